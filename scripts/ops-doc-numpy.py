#!/usr/bin/env python3
"""Checks the NumPy columns of docs/ops.md's signed-zero/NaN/inf table and its integer bit
operations table with NumPy itself.

usage: build/venv/bin/python scripts/ops-doc-numpy.py   (any Python with NumPy: the build's venv has
it; not part of the test suite, which checks the fusejit column against the code without Python:
tests/test_ops_doc.cpp)

Each row of the first table is evaluated on float64 scalars; a cell "A or B" accepts either (NumPy's
SIMD and scalar loops differ there; "A (scalar 0.5) or B (array)" compares the scalars to A); ops NumPy lacks are computed by the formula the note names.
Each row of the integer table is evaluated on arrays of the row's dtype.
"""
import math
import pathlib
import re
import sys

import numpy as np

np.seterr(all="ignore")
NUMPY = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "expm1": np.expm1, "log": np.log,
    "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": np.reciprocal, "sin": np.sin, "tanh": np.tanh, "round": np.round,
    "ceil": np.ceil, "trunc": np.trunc, "sign": np.sign, "erf": math.erf,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "silu": lambda x: x / (1 + np.exp(-x)),
    "softplus": lambda x: np.log1p(np.exp(x)), "add": np.add, "sub": np.subtract,
    "mul": np.multiply, "div": np.divide, "pow": np.power, "maximum": np.maximum,
    "minimum": np.minimum, "fmax": np.fmax, "floordiv": np.floor_divide, "mod": np.mod,
    "fmod": np.fmod, "atan2": np.arctan2, "clamp": np.clip, "logaddexp": np.logaddexp,
}


def show(v):
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "-0.0" if math.copysign(1, v) < 0 else "+0.0"
    return repr(v)


INT_NUMPY = {"bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
             "bitwise_not": np.invert, "left_shift": np.left_shift, "right_shift": np.right_shift}
INT_DTYPES = {"bool": np.bool_, "i8": np.int8, "u8": np.uint8, "i32": np.int32, "i64": np.int64}


def table_rows(doc, heading, pattern):
    """The regex matches of the rows of the first table after `heading` that match `pattern`."""
    rows = []
    for line in doc[doc.index(heading):].splitlines()[1:]:
        m = re.match(pattern, line)
        if m:
            rows.append(m)
        elif rows:
            break
    return rows


def int_table(doc):
    """The integer bit operations table: each row's expression on NumPy arrays of the row's dtype."""
    bad = rows = 0
    for m in table_rows(doc, "## Integer bit operations", r"\| `(\w+)\((.*)\)` \| (\w+) \| [^|]* \| ([^|]*) \|"):
        rows += 1
        op, dt, want = m.group(1), INT_DTYPES[m.group(3)], m.group(4).strip()
        args = [np.array([a.strip() == "true" if dt is np.bool_ else int(a)], dtype=dt) for a in m.group(2).split(",")]
        r = INT_NUMPY[op](*args)[0]
        got = ("true" if r else "false") if r.dtype == np.bool_ else str(int(r))
        if r.dtype != np.dtype(dt) or got != want:
            bad += 1
            print(f"{op}{tuple(m.group(2).split(','))} in {m.group(3)}: NumPy gives {got} ({r.dtype}), docs say {want}")
    return rows, bad


def main():
    doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "ops.md").read_text()
    int_rows, int_bad = int_table(doc)
    bad = rows = 0
    for m in table_rows(doc, "## Signed zeros, NaN and infinity", r"\| `(\w+)\((.*)\)` \| [^|]* \| ([^|]*) \|"):
        rows += 1
        op, args, want = m.group(1), [float(a) for a in m.group(2).split(",")], m.group(3).strip()
        got = show(NUMPY[op](*[np.float64(a) for a in args]))
        # "A or B" accepts either; "A (scalar 0.5) or B (array)": the value before the note.
        if got not in [w.strip().split(" (")[0] for w in want.split(" or ")]:
            bad += 1
            print(f"{op}{tuple(args)}: NumPy gives {got}, docs say {want}")
    print(f"{rows - bad + int_rows - int_bad} passed, {bad + int_bad} failed")
    return 1 if bad or int_bad or rows < 40 or int_rows < 40 else 0


if __name__ == "__main__":
    if len(sys.argv) > 1:  # it takes no arguments: --help (or anything) prints the docstring
        print(__doc__)
        sys.exit(0 if sys.argv[1] in ("-h", "--help") else 2)
    sys.exit(main())
