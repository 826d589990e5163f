#!/usr/bin/env python3
"""Writes tests/data/op_expectations.txt: the values NumPy and PyTorch give for fusejit's ops on edge
values (NaN, +-inf, +-0, subnormals, the largest finite values, integer extremes, shift counts past
the width, ...), so tests/test_op_expectations.cpp can check the CPU paths (reference, constant
folding, fused and unfused kernels) bit for bit without either library installed.

Each op names its source per dtype, in this order of preference: NumPy, PyTorch, and for dtypes
neither library has (bfloat16 in NumPy; e.g. cbrt in PyTorch) the float64 result of the library
rounded once to the dtype ("f64"), or for bfloat16 NumPy's float32 result rounded once ("f32", as
PyTorch's CPU kernels compute bfloat16). fma has no NumPy or PyTorch function: its expectation is the exact
rational a*b + c rounded once to nearest-even ("exact", the IEEE 754 fusedMultiplyAdd).

Run from the repository root (the output is deterministic; commit it with the script):
    python3 -m venv /tmp/fj-venv && /tmp/fj-venv/bin/pip install numpy torch
    /tmp/fj-venv/bin/python tests/data/op_expectations.py
`--only OP...` rewrites only those ops' lines (the others stay as the file has them; ops whose
sources are NumPy's need no PyTorch). `--measure [OP...]` instead prints how far glibc (the CPU path's math library) lies from the same sources
on ordinary values (the numbers in docs/ops.md's "NumPy, PyTorch and glibc" table).

Line format (bits in hex, little-endian value of the dtype's width; bool 0/1):
    <op> <dtype> <source> <operand bits>... -> <result bits> [glibc <bits>]
The optional tail records where glibc (the math library of fusejit's CPU path) gives another value
than the source (e.g. NumPy's AVX-512 paths use Intel SVML, PyTorch's vector paths Sleef): the test
then expects glibc's bits, and docs/ops.md lists the difference.
"""

import functools
import math
import os
import sys
from fractions import Fraction

import numpy as np

try:
    import torch
except ImportError:  # the ops that need PyTorch say so when they run
    torch = None

FLOAT_DTYPES = ["f16", "bf16", "f32", "f64"]
INT_DTYPES = ["i8", "u8", "i32", "i64"]
NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "u8": np.uint8,
      "i32": np.int32, "i64": np.int64, "bool": np.bool_}
UINT = {"f16": np.uint16, "bf16": np.uint16, "f32": np.uint32, "f64": np.uint64}
# (significand bits p including the hidden one, minimum normal exponent, maximum exponent)
FORMAT = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127), "f64": (53, -1022, 1023)}


def torch_dtype(dt):
    return {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
            "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}[dt]


# ---- conversions between values and bits -------------------------------------------------------

def bits_of(dt, values):
    """Bits (Python ints) of an array of dtype dt (a NumPy array, or a torch tensor for bf16)."""
    if dt == "bf16":
        return [int(v) & 0xFFFF for v in values.view(torch.int16).tolist()]
    if dt == "bool":
        return [int(bool(v)) for v in values]
    if dt in UINT:
        return [int(v) for v in np.asarray(values, dtype=NP[dt]).view(UINT[dt])]
    width = np.dtype(NP[dt]).itemsize * 8
    return [int(v) & ((1 << width) - 1) for v in np.asarray(values, dtype=NP[dt])]


def from_bits(dt, bits):
    """An array of dtype dt with the given bits (NumPy; a torch tensor for bf16)."""
    if dt == "bf16":
        return torch.tensor([b - 0x10000 if b & 0x8000 else b for b in bits], dtype=torch.int16).view(torch.bfloat16)
    if dt in UINT:
        return np.array(bits, dtype=UINT[dt]).view(NP[dt])
    if dt == "bool":
        return np.array(bits, dtype=np.bool_)
    unsigned = {1: np.uint8, 4: np.uint32, 8: np.uint64}[np.dtype(NP[dt]).itemsize]
    return np.array(bits, dtype=unsigned).view(NP[dt])


def to_f64(dt, bits):
    """Exact float64 values of float bits."""
    if dt == "bf16":
        return np.array([b << 16 for b in bits], dtype=np.uint32).view(np.float32).astype(np.float64)
    return from_bits(dt, bits).astype(np.float64)


def round_f64_to(dt, values):
    """Bits of float64 values rounded once to nearest-even into dt (NaN stays NaN); bf16 as
    PyTorch converts float64 (through float32: c10::BFloat16 has a float constructor only)."""
    if dt == "bf16":
        if torch is None:
            return bf16_of_f32(np.asarray(values, dtype=np.float64).astype(np.float32))
        return bits_of(dt, torch.tensor(values, dtype=torch.float64).to(torch.bfloat16))
    with np.errstate(over="ignore"):  # overflow rounds to inf, as intended
        return bits_of(dt, np.asarray(values, dtype=np.float64).astype(NP[dt]))


def bf16_of_f32(values):
    """Bits of float32 values rounded to bfloat16 as c10's round_to_nearest_even does (NaN ->
    0x7FC0): PyTorch's conversion, without PyTorch."""
    out = []
    for v, b in zip(values, np.asarray(values, dtype=np.float32).view(np.uint32).tolist()):
        out.append(0x7FC0 if np.isnan(v) else ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF)
    return out


def round_exact(dt, q, zero_negative=False):
    """Bits of the rational q rounded once to nearest-even into float dtype dt (overflow -> inf)."""
    p, emin, emax = FORMAT[dt]
    if q == 0:
        return round_f64_to(dt, [-0.0 if zero_negative else 0.0])[0]
    sign = -1 if q < 0 else 1
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    e = max(e, emin)  # subnormals share the smallest normal exponent's grid
    unit = Fraction(2) ** (e - p + 1)
    m = q / unit
    n = math.floor(m)
    rest = m - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1):
        n += 1
    value = n * unit
    if value >= Fraction(2) ** (emax + 1):
        return round_f64_to(dt, [sign * math.inf])[0]
    return round_f64_to(dt, [sign * float(value)])[0]  # exact: every format fits in float64


# ---- edge values ---------------------------------------------------------------------------------

def float_edges(dt):
    """Bits of the float edge values of dt: NaNs, infinities, zeros, subnormals, extremes, and
    small exact values where the ops change behaviour (0.5, 1, 2, 3, 6, 20, ...)."""
    p, emin, emax = FORMAT[dt]
    tiny = 2.0 ** (emin - p + 1)          # smallest subnormal
    max_sub = 2.0 ** emin - tiny          # largest subnormal
    max_fin = (2.0 - 2.0 ** (1 - p)) * 2.0 ** emax if dt != "f64" else sys.float_info.max
    one_up = 1.0 + 2.0 ** (1 - p)         # next value above 1
    one_down = 1.0 - 2.0 ** -p            # next value below 1
    vals = [0.0, -0.0, math.inf, -math.inf, tiny, -tiny, max_sub, -max_sub, 2.0 ** emin, -(2.0 ** emin),
            max_fin, -max_fin, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 6.0, -6.0, 20.0, -20.0,
            one_up, -one_up, one_down, -one_down]
    bits = round_f64_to(dt, vals)
    nan = {"f16": 0x7E00, "bf16": 0x7FC0, "f32": 0x7FC00000, "f64": 0x7FF8000000000000}[dt]
    sign = {"f16": 0x8000, "bf16": 0x8000, "f32": 0x80000000, "f64": 0x8000000000000000}[dt]
    return bits + [nan, nan | sign]


def int_edges(dt):
    info = np.iinfo(NP[dt])
    width = np.dtype(NP[dt]).itemsize * 8
    vals = {int(info.min), int(info.min) + 1, -1, 0, 1, 2, 3, 7, width - 2, width - 1, width, width + 1,
            100, int(info.max) - 1, int(info.max), -width, -2}
    vals = sorted(v for v in vals if info.min <= v <= info.max)
    return bits_of(dt, np.array(vals, dtype=NP[dt]))


def edges(dt):
    if dt == "bool":
        return [0, 1]
    return float_edges(dt) if dt in FORMAT else int_edges(dt)


# ---- sources -------------------------------------------------------------------------------------

def numpy_fn(name):
    """An elementwise NumPy function on arrays of dt (None for bf16: NumPy has no bfloat16)."""
    f = getattr(np, name)

    def run(dt, args):
        if dt == "bf16":
            return None
        with np.errstate(all="ignore"):
            return "numpy", bits_of(dt, f(*[from_bits(dt, a) for a in args]).astype(NP[dt]))
    return run


def torch_fn(path):
    """A PyTorch function on tensors of dt, named by its path below `torch` ("nn.functional.elu"),
    so that the ops whose sources are NumPy's can be regenerated without PyTorch (--only)."""
    def run(dt, args):
        if torch is None:
            sys.exit("PyTorch is needed for this op: pip install torch")
        fn = functools.reduce(getattr, path.split("."), torch)
        ts = [from_bits(dt, a) if dt == "bf16" else torch.from_numpy(from_bits(dt, a)) for a in args]
        out = fn(*ts)
        if dt == "bf16":
            return "torch", bits_of(dt, out)
        return "torch", bits_of(dt, out.numpy())
    return run


def leaky_relu_source(dt, args):
    """torch.nn.functional.leaky_relu(x, slope) with each case's slope (a Python float, which
    PyTorch keeps in the compute type: exact here, since it is a value of dt)."""
    x, slope = args
    out = [0] * len(x)
    for sv in sorted(set(slope)):
        idx = [i for i in range(len(x)) if slope[i] == sv]
        xs = [x[i] for i in idx]
        t = from_bits(dt, xs) if dt == "bf16" else torch.from_numpy(from_bits(dt, xs))
        r = torch.nn.functional.leaky_relu(t, float(to_f64(dt, [sv])[0]))
        for i, b in zip(idx, bits_of(dt, r if dt == "bf16" else r.numpy())):
            out[i] = b
    return "torch", out


def fma_source(dt, args):
    """fma has no NumPy or PyTorch function: floats are the exact rational a*b + c rounded once to
    nearest-even (IEEE 754 fusedMultiplyAdd; an exact zero is -0 only for (-0) + (-0));
    integers wrap, as NumPy's a * b + c does."""
    if dt not in FORMAT:
        a, b, c = (from_bits(dt, x) for x in args)
        with np.errstate(all="ignore"):
            return "numpy", bits_of(dt, (a * b + c).astype(NP[dt]))
    out = []
    for x, y, z in zip(*(to_f64(dt, a) for a in args)):
        x, y, z = float(x), float(y), float(z)
        if math.isnan(x) or math.isnan(y) or math.isnan(z):
            r = math.nan
        elif math.isinf(x) or math.isinf(y):
            r = math.nan if x == 0 or y == 0 else math.copysign(math.inf, x) * math.copysign(1, y)
            if math.isinf(z) and z != r:
                r = math.nan
        elif math.isinf(z):
            r = z
        else:
            prod = Fraction(x) * Fraction(y)
            q = prod + Fraction(z)
            neg_zero = prod == 0 and z == 0 and math.copysign(1, x) * math.copysign(1, y) < 0 and math.copysign(1, z) < 0
            out.append(round_exact(dt, q, neg_zero))
            continue
        out.append(round_f64_to(dt, [r])[0])
    return "exact", out


def fma_ties(dt):
    """fma cases that decide a tie of dt: a * b exactly halfway between two values of dt, plus a
    tiny c that must break the tie (rounding a*b + c first to f32 or f64 loses it), cancellations
    c = -round(a * b), and random values."""
    p, emin, _ = FORMAT[dt]
    tiny = 2.0 ** (emin - p + 1)
    a, b, c = [], [], []
    for scale in (1.0, 2.0 ** 10, 2.0 ** -10):
        for cv in (tiny, -tiny, 0.0, -0.0, 2.0 ** (emin + 1), -(2.0 ** (emin + 1))):
            for s in (1.0, -1.0):
                a.append(1.5 * s * scale)
                b.append(1.0 + 2.0 ** (1 - p))  # 1.5 * (1 + ulp) needs one bit more than dt has: a tie
                c.append(cv)
    rng = np.random.default_rng(5)
    for _ in range(300):
        x, y = rng.uniform(-4, 4, 2)
        xr, yr = (to_f64(dt, round_f64_to(dt, [v]))[0] for v in (x, y))
        a.append(xr)
        b.append(yr)
        c.append(-float(to_f64(dt, round_f64_to(dt, [xr * yr]))[0]) if rng.uniform() < 0.5 else rng.uniform(-4, 4))
    return [round_f64_to(dt, v) for v in (a, b, c)]


def f64_fn(name):
    """NumPy's float64 function on the exact operand values, rounded once to dt."""
    f = getattr(np, name)

    def run(dt, args):
        with np.errstate(all="ignore"):
            return "f64", round_f64_to(dt, f(*[to_f64(dt, a) for a in args]))
    return run


def f32_fn(name):
    """bf16 as PyTorch's CPU kernels compute it: NumPy's float32 function on the (exact) float32
    values, rounded once to bfloat16 (bf16_of_f32); None for other dtypes."""
    f = getattr(np, name)

    def run(dt, args):
        if dt != "bf16":
            return None
        with np.errstate(all="ignore"):
            return "f32", bf16_of_f32(f(*[to_f64(dt, a).astype(np.float32) for a in args]))
    return run


def first_of(*runs):
    def run(dt, args):
        for r in runs:
            out = r(dt, args)
            if out is not None:
                return out
        raise RuntimeError("no source")
    return run


# Each op: (arity, dtypes, source, extra cases or None). Sources return (source name, result bits)
# for operand bit lists.
OPS = {
    "cbrt": (1, FLOAT_DTYPES, first_of(numpy_fn("cbrt"), f64_fn("cbrt")), None),
    "erfc": (1, FLOAT_DTYPES, torch_fn("erfc"), None),
    "asin": (1, FLOAT_DTYPES, first_of(numpy_fn("arcsin"), torch_fn("asin")), None),
    "acos": (1, FLOAT_DTYPES, first_of(numpy_fn("arccos"), torch_fn("acos")), None),
    "atan": (1, FLOAT_DTYPES, first_of(numpy_fn("arctan"), torch_fn("atan")), None),
    "sinh": (1, FLOAT_DTYPES, first_of(numpy_fn("sinh"), torch_fn("sinh")), None),
    "cosh": (1, FLOAT_DTYPES, first_of(numpy_fn("cosh"), torch_fn("cosh")), None),
    "asinh": (1, FLOAT_DTYPES, first_of(numpy_fn("arcsinh"), torch_fn("asinh")), None),
    "acosh": (1, FLOAT_DTYPES, first_of(numpy_fn("arccosh"), torch_fn("acosh")), None),
    "atanh": (1, FLOAT_DTYPES, first_of(numpy_fn("arctanh"), torch_fn("atanh")), None),
    "hardswish": (1, FLOAT_DTYPES, torch_fn("nn.functional.hardswish"), None),
    "hardsigmoid": (1, FLOAT_DTYPES, torch_fn("nn.functional.hardsigmoid"), None),
    "elu": (1, FLOAT_DTYPES, torch_fn("nn.functional.elu"), None),
    "hypot": (2, FLOAT_DTYPES, first_of(numpy_fn("hypot"), torch_fn("hypot")), None),
    "copysign": (2, FLOAT_DTYPES, first_of(numpy_fn("copysign"), torch_fn("copysign")), None),
    "leaky_relu": (2, FLOAT_DTYPES, leaky_relu_source, None),
    # NumPy's npy_logaddexp/npy_logaddexp2 (PyTorch's scalar loop gives the same values: docs/ops.md).
    "logaddexp": (2, FLOAT_DTYPES, first_of(numpy_fn("logaddexp"), f32_fn("logaddexp")), None),
    "logaddexp2": (2, FLOAT_DTYPES, first_of(numpy_fn("logaddexp2"), f32_fn("logaddexp2")), None),
    "fma": (3, FLOAT_DTYPES + INT_DTYPES, fma_source, lambda dt: fma_ties(dt) if dt in FORMAT else [[], [], []]),
    "lerp": (3, FLOAT_DTYPES, torch_fn("lerp"), None),
    # Integer bit operations: NumPy, whose shifts agree with PyTorch's lshift/rshift kernels on
    # every count (docs/ops.md); and/or/xor/not are logical on bool in both.
    "bitwise_and": (2, INT_DTYPES + ["bool"], numpy_fn("bitwise_and"), None),
    "bitwise_or": (2, INT_DTYPES + ["bool"], numpy_fn("bitwise_or"), None),
    "bitwise_xor": (2, INT_DTYPES + ["bool"], numpy_fn("bitwise_xor"), None),
    "bitwise_not": (1, INT_DTYPES + ["bool"], numpy_fn("invert"), None),
    "left_shift": (2, INT_DTYPES, numpy_fn("left_shift"), None),
    "right_shift": (2, INT_DTYPES, numpy_fn("right_shift"), None),
}


def cases(dt, arity):
    """Operand bit lists: every edge value (unary), every pair (binary), every triple of a subset
    (ternary)."""
    e = edges(dt)
    if arity == 1:
        return [e]
    if arity == 2:
        return [[x for x in e for _ in e], [y for _ in e for y in e]]
    sub = e[::3] + e[1::9]
    return [[x for x in sub for _ in sub for _ in sub], [y for _ in sub for y in sub for _ in sub],
            [z for _ in sub for _ in sub for z in sub]]


# ---- glibc: the math library of fusejit's CPU path --------------------------------------------

_LIBM = None


def libm_fn(name, dt, arity):
    """glibc's function `name` for compute dtype dt (f16/bf16/f32 compute in float: name + "f")."""
    import ctypes
    global _LIBM
    if _LIBM is None:
        _LIBM = ctypes.CDLL("libm.so.6")
    ct = ctypes.c_double if dt == "f64" else ctypes.c_float
    f = getattr(_LIBM, name if dt == "f64" else name + "f")
    f.restype = ct
    f.argtypes = [ct] * arity
    return f


# The exact functions (mpmath) behind the math-library ops, to measure glibc's error.
def _exact():
    import mpmath
    return {"cbrt": lambda x: mpmath.cbrt(x) if x >= 0 else -mpmath.cbrt(-x), "erfc": mpmath.erfc, "asin": mpmath.asin, "acos": mpmath.acos,
            "atan": mpmath.atan, "sinh": mpmath.sinh, "cosh": mpmath.cosh, "asinh": mpmath.asinh,
            "acosh": mpmath.acosh, "atanh": mpmath.atanh, "hypot": mpmath.hypot,
            "elu": lambda x: mpmath.expm1(x) if x < 0 else x}


class _Lazy(dict):
    def __missing__(self, key):
        self.update(_exact())
        return dict.__getitem__(self, key)


EXACT = _Lazy()


# The CPU path's value of the ops whose fj_ function calls the math library, as glibc computes it
# (f(name) gives glibc's function of that name in the compute type), for the ops whose source may
# use another implementation (NumPy's AVX-512 paths use Intel SVML; PyTorch's vector paths Sleef).
GLIBC = {
    "cbrt": lambda f, x: f("cbrt", 1)(x),
    "erfc": lambda f, x: f("erfc", 1)(x),
    "asin": lambda f, x: f("asin", 1)(x),
    "acos": lambda f, x: f("acos", 1)(x),
    "atan": lambda f, x: f("atan", 1)(x),
    "sinh": lambda f, x: f("sinh", 1)(x),
    "cosh": lambda f, x: f("cosh", 1)(x),
    "asinh": lambda f, x: f("asinh", 1)(x),
    "acosh": lambda f, x: f("acosh", 1)(x),
    "atanh": lambda f, x: f("atanh", 1)(x),
    "elu": lambda f, x: f("expm1", 1)(x) if x < 0 else x,
    "hypot": lambda f, x, y: f("hypot", 2)(x, y),
}


def glibc_bits(op, dt, args):
    """Bits of glibc's result for every case (computed in the compute type, rounded once to dt)."""
    fn = GLIBC[op]
    cdt = "f64" if dt == "f64" else "f32"
    vals = [to_f64(dt, a) for a in args]
    out = []
    for i in range(len(args[0])):
        xs = [float(v[i]) for v in vals]
        r = fn(lambda name, arity: libm_fn(name, cdt, arity), *xs)
        out.append(r)
    return round_f64_to(dt, [float(np.asarray(r, dtype=NP[cdt])) for r in out])


def ulps(dt, a, b):
    """Ulp distance of two float bit patterns (0 for two NaNs)."""
    width = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}[dt]
    sign = 1 << (width - 1)
    na, nb = (math.isnan(v) for v in to_f64(dt, [a, b]))
    if na or nb:
        return 0 if na and nb else 1 << 62

    def ordered(v):
        return -(v & (sign - 1)) if v & sign else v
    return abs(ordered(a) - ordered(b))


def glibc_error(op, dt, args, got):
    """The largest error of glibc's results against the exact value (mpmath, 200 bits), in ulps of
    the result's binade: what libm-test-ulps bounds."""
    import mpmath
    mpmath.mp.prec = 200
    exact_fn = EXACT[op]
    vals = [to_f64(dt, a) for a in args]
    worst = 0.0
    for i, gb in enumerate(got):
        e = exact_fn(*[mpmath.mpf(float(v[i])) for v in vals])
        gv = to_f64(dt, [gb])[0]
        if not mpmath.isfinite(e) or not math.isfinite(gv) or e == 0:
            continue
        p, emin, _ = FORMAT[dt]
        ulp = mpmath.mpf(2) ** (max(int(mpmath.floor(mpmath.log(abs(e), 2))), emin) - p + 1)
        worst = max(worst, float(abs(mpmath.mpf(gv) - e) / ulp))
    return worst


def measure(only=None):
    """Prints how far glibc lies from each op's source on ordinary values: random values of every
    binade in [2^-30, 2^30] with both signs, plus uniform [-10, 10] (docs/ops.md's table of
    library differences)."""
    rng = np.random.default_rng(1)
    for op, (arity, dtypes, source, extra) in OPS.items():
        if op not in GLIBC or (only and op not in only):
            continue
        for dt in dtypes:
            args = cases(dt, arity)
            if extra:
                args = [a + m for a, m in zip(args, extra(dt))]
            src, lib = source(dt, args)
            diff = [ulps(dt, a, b) for a, b in zip(lib, glibc_bits(op, dt, args))]
            print("%-12s %-4s %-6s edge values: glibc differs on %4d of %d, at most %d ulp" %
                  (op, dt, src, sum(1 for d in diff if d), len(diff), max(diff)))
        for dt in ("f32", "f64"):
            n = 20000
            x = [np.concatenate([rng.uniform(-10, 10, n), np.ldexp(rng.uniform(1, 2, n), rng.integers(-30, 30, n)) *
                                 rng.choice([-1, 1], n)]).astype(NP[dt]) for _ in range(arity)]
            args = [bits_of(dt, v) for v in x]
            src, lib = source(dt, args)
            g = glibc_bits(op, dt, args)
            diff = [ulps(dt, a, b) for a, b in zip(lib, g)]
            print("%-12s %-4s %-6s ordinary values: glibc differs on %6d of %d, at most %d ulp; glibc's error %.2f ulp" %
                  (op, dt, src, sum(1 for d in diff if d), len(diff), max(diff), glibc_error(op, dt, args, g)))


def op_lines(op):
    """The data lines of one op, every dtype of its OPS entry."""
    arity, dtypes, source, extra = OPS[op]
    lines = []
    for dt in dtypes:
        args = cases(dt, arity)
        if extra:
            more = extra(dt)
            args = [a + m for a, m in zip(args, more)]
        src, res = source(dt, args)
        lib = glibc_bits(op, dt, args) if op in GLIBC else res
        width = 1 if dt == "bool" else {"f16": 4, "bf16": 4, "i8": 2, "u8": 2, "f32": 8, "i32": 8}.get(dt, 16)
        for k in range(len(res)):
            ops = " ".join("%0*x" % (width, a[k]) for a in args)
            line = "%s %s %s %s -> %0*x" % (op, dt, src, ops, width, res[k])
            if lib[k] != res[k] and ulps(dt, lib[k], res[k]) != 0:
                line += " glibc %0*x" % (width, lib[k])  # a difference the test checks and docs list
            lines.append(line)
    return lines


def main():
    """Writes every op's lines; `--only OP...` rewrites those ops' lines and keeps the others as the
    file has them (the same NumPy version required), so ops with NumPy sources can be added where
    PyTorch is not installed."""
    if sys.argv[1:2] == ["--measure"]:
        return measure(sys.argv[2:])
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "op_expectations.txt")
    only = sys.argv[2:] if sys.argv[1:2] == ["--only"] else None
    kept = {}
    header = "# Generated by tests/data/op_expectations.py (numpy %s, torch %s); do not edit." % (
        np.__version__, torch.__version__ if torch else "absent")
    if only:
        unknown = [op for op in only if op not in OPS]
        if unknown:
            sys.exit("unknown ops: %s" % " ".join(unknown))
        with open(out_path) as f:
            old = f.read().splitlines()
        if "(numpy %s," % np.__version__ not in old[0]:
            sys.exit("%s was made with another NumPy than %s: regenerate every op" % (out_path, np.__version__))
        header = old[0]
        for line in old[2:]:
            kept.setdefault(line.split(" ", 1)[0], []).append(line)
    lines = [header, "# <op> <dtype> <source> <operand bits>... -> <result bits> [glibc <bits>]"]
    for op in OPS:
        lines += op_lines(op) if only is None or op in only else kept.get(op, [])
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %d cases to %s" % (len(lines) - 2, out_path))


if __name__ == "__main__":
    main()
