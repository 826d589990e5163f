#!/usr/bin/env python3
"""Checks the NumPy column of docs/ops.md's signed-zero/NaN/inf table with NumPy itself.

usage: scripts/ops-doc-numpy.py   (needs `pip install numpy`; not part of the test suite, which
checks the fusejit column against the code without Python: tests/test_ops_doc.cpp)

Each row's expression is evaluated on float64 scalars; a cell "A or B" accepts either (NumPy's
SIMD and scalar loops differ there); ops NumPy lacks are computed by the formula the note names.
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
    "fmod": np.fmod, "atan2": np.arctan2, "clamp": np.clip,
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


def main():
    doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "ops.md").read_text()
    section = doc[doc.index("## Signed zeros, NaN and infinity"):]
    bad = rows = 0
    for line in section.splitlines()[4:]:
        m = re.match(r"\| `(\w+)\((.*)\)` \| [^|]* \| ([^|]*) \|", line)
        if not m:
            if rows:
                break
            continue
        rows += 1
        op, args, want = m.group(1), [float(a) for a in m.group(2).split(",")], m.group(3).strip()
        got = show(NUMPY[op](*[np.float64(a) for a in args]))
        if got not in [w.strip() for w in want.split(" or ")]:
            bad += 1
            print(f"{op}{tuple(args)}: NumPy gives {got}, docs say {want}")
    print(f"{rows - bad} passed, {bad} failed")
    return 1 if bad or rows < 40 else 0


if __name__ == "__main__":
    sys.exit(main())
