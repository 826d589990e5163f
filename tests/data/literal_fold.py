#!/usr/bin/env python3
"""Generates tests/data/literal_fold.txt: what Python's own arithmetic gives for every fusejit op
on literal operands, for tests/test_literal_fold.cpp (which needs no Python at test time).

usage: python3 tests/data/literal_fold.py > tests/data/literal_fold.txt

docs/graph-format.md: an expression of literals folds as Python evaluates it, in i64 / f64,
bools counting as the ints 0 and 1 in arithmetic. Each line is

    OP(ARG, ...) <tab> KIND <tab> VALUE

KIND is bool, int, float or error (an int result outside i64: fusejit refuses it, Python's
integers would not wrap; or operands Python refuses, such as a float in a bitwise op); a float
VALUE is float.hex() (exact). Ops with a Python operator or
`math` function use it; the others use the formula docs/ops.md defines for them, written with
Python's arithmetic (maximum propagates NaN, as numpy.maximum does; fmod of ints truncates, as
C's % does). Where Python raises (division by zero, a math domain or range error, a complex
power, a negative shift count) there is no line: fusejit's own op rule applies there
(tests/test_semantics.cpp). One op departs from Python on purpose: bitwise_not(true) is false
(NumPy, PyTorch), where Python's deprecated ~True is -2. Ints
beyond 2^53 meeting a float or a float function are left out: fusejit converts the int to f64
first (as NumPy does), Python compares exact integers. True division of ints is in: both round
the exact quotient once.
"""
import itertools
import math
from fractions import Fraction

INTS = [0, 1, -1, 2, 3, 7, -7, 2**31, -2**31, 2**53, 2**62, 2**63 - 1, -2**63]
BOOLS = [True, False]
FLOATS = [0.0, -0.0, 0.5, -2.5, 1.5, 3.0, 0.1, 2.0, 1e300, math.inf, -math.inf, math.nan]
SMALL = [True, False, 0, 1, -1, 2, 3, -7, 2**62, -2**63, 0.0, -0.0, 0.5, -2.5, 3.0, 1e300, math.inf, -math.inf, math.nan]
I64 = (-2**63, 2**63 - 1)


def kind(v):
    return "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "float"


def common(*vs):
    """Python's arithmetic typing of mixed operands: bool < int < float."""
    ks = [kind(v) for v in vs]
    return "float" if "float" in ks else "int" if "int" in ks else "bool"


def as_kind(v, k):
    return float(v) if k == "float" else int(v) if k == "int" else bool(v)


def zero_signed(r, x):
    """math.floor etc. return ints; a float operand keeps IEEE's sign of zero."""
    return math.copysign(0.0, x) if r == 0 else float(r)


def rounding(fn):
    def f(x):
        if isinstance(x, float):
            return x if not math.isfinite(x) else zero_signed(fn(x), x)
        return int(x)
    return f


def select(a, b, take_b, nan_propagates):
    """maximum/minimum (a NaN operand wins) and fmax/fmin (a NaN operand is ignored), on the
    operands converted to their common type."""
    k = common(a, b)
    a, b = as_kind(a, k), as_kind(b, k)
    if a != a or b != b:
        return (a if a != a else b) if nan_propagates else (b if a != a else a)
    return b if take_b(a, b) else a


def select_max(a, b):
    return select(a, b, lambda x, y: x < y, True)


def select_min(a, b):
    return select(a, b, lambda x, y: y < x, True)


def fmax(a, b):
    return select(a, b, lambda x, y: x < y, False)


def fmin(a, b):
    return select(a, b, lambda x, y: y < x, False)


def fmod(a, b):
    if common(a, b) == "float":
        return math.fmod(a, b)
    r = abs(int(a)) % abs(int(b))  # raises on 0, as Python's % does
    return -r if a < 0 else r


def sign(x):
    if isinstance(x, float):
        return x if x != x else float((x > 0) - (x < 0))
    return (x > 0) - (x < 0)


def relu(x):
    if isinstance(x, float):
        return x if x != x else (x if x > 0 else 0.0)
    return int(x) if x > 0 else 0


def f64(fn):
    return lambda *a: fn(*[float(v) for v in a])


def fma(a, b, c):
    """One rounding of a * b + c: ints (and bools) as Python ints; floats exactly through
    Fraction (float(Fraction) rounds correctly; math.fma is Python 3.13+). IEEE's cases where
    Fraction cannot help: a non-finite operand, and the sign of an exact zero."""
    if common(a, b, c) != "float":
        if not I64[0] <= int(a) * int(b) <= I64[1]:
            raise I64Overflow  # the product overflows, as mul's would: fusejit refuses it
        return int(a) * int(b) + int(c)
    a, b, c = float(a), float(b), float(c)
    if not all(map(math.isfinite, (a, b))):
        return a * b + c  # the product is inf or NaN exactly
    if not math.isfinite(c):
        return c  # a finite exact product meets inf or NaN
    if a * b == 0 and c == 0:
        return a * b + c  # IEEE's sum of two zeros
    r = Fraction(a) * Fraction(b) + Fraction(c)
    return float(r)


def lerp(a, b, w):
    """docs/ops.md: torch.lerp's two fma forms, switched on |w| < 0.5."""
    return fma(w, b - a, a) if abs(w) < 0.5 else fma(w - 1.0, b - a, b)


def hardsigmoid(x):
    return select_min(select_max(x + 3.0, 0.0), 6.0) / 6.0


def hardswish(x):
    """x * clamp(x + 3, 0, 6) / 6, multiplied before dividing (docs/ops.md)."""
    return x * select_min(select_max(x + 3.0, 0.0), 6.0) / 6.0


def logaddexp(a, b):
    """NumPy's npy_logaddexp (docs/ops.md): a == b first (equal infinities), a NaN difference as is."""
    if a == b:
        return a + 0.6931471805599453
    d = a - b
    return a + math.log1p(math.exp(-d)) if d > 0 else b + math.log1p(math.exp(d)) if d <= 0 else d


def logaddexp2(a, b):
    """NumPy's npy_logaddexp2 (docs/ops.md), log2(1 + y) as log2(e) * log1p(y)."""
    if a == b:
        return a + 1.0
    d = a - b
    if d > 0:
        return a + 1.4426950408889634 * math.log1p(math.exp2(-d))
    return b + 1.4426950408889634 * math.log1p(math.exp2(d)) if d <= 0 else d


class I64Overflow(Exception):
    """An intermediate int result outside i64 (fusejit refuses it)."""


UNARY = {
    "neg": lambda x: -x, "abs": abs, "exp": f64(math.exp), "exp2": f64(math.exp2),
    "expm1": f64(math.expm1), "log": f64(math.log), "log2": f64(math.log2), "log10": f64(math.log10),
    "log1p": f64(math.log1p), "sqrt": f64(math.sqrt), "rsqrt": f64(lambda x: 1 / math.sqrt(x)),
    "reciprocal": f64(lambda x: 1 / x), "sin": f64(math.sin), "cos": f64(math.cos), "tan": f64(math.tan),
    "tanh": f64(math.tanh), "sigmoid": f64(lambda x: 1 / (1 + math.exp(-x))), "relu": relu,
    "gelu": f64(lambda x: 0.5 * x * (1 + math.erf(x * 0.7071067811865476))),
    "gelu_tanh": f64(lambda x: 0.5 * x * (1 + math.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))),
    "silu": f64(lambda x: x / (1 + math.exp(-x))),
    "softplus": f64(lambda x: x if x > 20 else math.log1p(math.exp(x))), "erf": f64(math.erf),
    "floor": rounding(math.floor), "ceil": rounding(math.ceil), "round": rounding(round),
    "trunc": rounding(math.trunc), "sign": sign, "isnan": lambda x: math.isnan(x),
    "isfinite": lambda x: math.isfinite(x),
    "isinf": lambda x: math.isinf(x), "logical_not": lambda x: not x,
    "cbrt": f64(math.cbrt), "erfc": f64(math.erfc), "asin": f64(math.asin), "acos": f64(math.acos),
    "atan": f64(math.atan), "sinh": f64(math.sinh), "cosh": f64(math.cosh), "asinh": f64(math.asinh),
    "acosh": f64(math.acosh), "atanh": f64(math.atanh), "hardswish": f64(hardswish),
    "hardsigmoid": f64(hardsigmoid), "elu": f64(lambda x: math.expm1(x) if x < 0 else x),
    # ~True == -2 in Python (deprecated since 3.12); fusejit gives NumPy's and PyTorch's not.
    "bitwise_not": lambda x: (not x) if isinstance(x, bool) else ~x,
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b, "maximum": select_max, "minimum": select_min,
    "fmax": fmax, "fmin": fmin, "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "fmod": fmod,
    "atan2": f64(math.atan2), "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "logical_and": lambda a, b: bool(a) and bool(b), "logical_or": lambda a, b: bool(a) or bool(b),
    "logical_xor": lambda a, b: bool(a) != bool(b),
    "hypot": f64(math.hypot), "copysign": f64(math.copysign),
    "leaky_relu": f64(lambda x, slope: x if x > 0 else x * slope),
    "logaddexp": f64(logaddexp), "logaddexp2": f64(logaddexp2),
    "bitwise_and": lambda a, b: a & b, "bitwise_or": lambda a, b: a | b, "bitwise_xor": lambda a, b: a ^ b,
    "left_shift": lambda a, b: a << b, "right_shift": lambda a, b: a >> b,
}
FLOAT_FNS = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin",
             "cos", "tan", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu", "softplus", "erf", "atan2", "div",
             "cbrt", "erfc", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "hardswish",
             "hardsigmoid", "elu", "hypot", "copysign", "leaky_relu", "lerp", "logaddexp", "logaddexp2"}


def text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    return "nan" if math.isnan(v) else v.hex()


def lossy(op, args):
    """An int beyond 2^53 that fusejit converts to f64 where Python keeps it exact."""
    big = any(kind(a) == "int" and abs(a) > 2**53 for a in args)
    if op == "div" and common(*args) != "float":  # int / int: the exact quotient, rounded once
        return False
    return big and (op in FLOAT_FNS or common(*args) == "float" or
                    (op == "pow" and kind(args[1]) != "float" and args[1] < 0))


def huge_power(op, args):
    """An integer power or left shift whose exact value needs more than 64 bits (never computed:
    2**62 ** 2**62, 1 << 2**62)."""
    a, b = args if op in ("pow", "left_shift") else (0, 0)
    return kind(a) != "float" and kind(b) != "float" and abs(a) >= (1 if op == "left_shift" else 2) and b > 64


def line(op, fn, args):
    if lossy(op, args):
        return None
    call = f"{op}({', '.join(text(a) for a in args)})"
    if huge_power(op, args):
        return f"{call}\terror\t-"
    try:
        r = fn(*args)
    except (I64Overflow, TypeError):  # TypeError: Python refuses the operands (1.5 & 1), as fusejit does
        return f"{call}\terror\t-"
    except (ZeroDivisionError, ValueError, OverflowError):
        return None
    if isinstance(r, complex):
        return None
    if kind(r) == "int" and not I64[0] <= r <= I64[1]:
        return f"{call}\terror\t-"
    return f"{call}\t{kind(r)}\t{value(r)}"


def main():
    out = []
    for op, fn in UNARY.items():
        out += [line(op, fn, (x,)) for x in BOOLS + INTS + FLOATS]
    for op, fn in BINARY.items():
        out += [line(op, fn, p) for p in itertools.product(SMALL, SMALL)]
    extra = [("pow", (-2**31, -2)), ("pow", (2, 63)), ("pow", (-2, 63)), ("pow", (2, 64)), ("pow", (-1, -3)),
             ("mul", (2**62, 2)), ("sub", (-2**63, 1)), ("floordiv", (-2**63, -1)), ("div", (1, 3)),
             ("div", (2**53 + 1, 3)), ("div", (2**63 - 1, -7)), ("div", (-2**63, 2**63 - 1)), ("div", (2**62 + 1, 2**62 + 3)),
             ("div", (3, 2**63 - 1)), ("div", (-2**63, -1)), ("div", (0, -3)),
             ("add", (True, False)), ("mul", (True, True)), ("sub", (False, True))]
    for a, b in [(1, 62), (1, 63), (-1, 63), (2, 62), (-2, 62), (3, 61), (1, 64), (0, 64), (0, 100), (-1, 100),
                 (5, 100), (2**62, 1), (-2**62, 1), (-2**63, 63), (-2**63, 64), (2**63 - 1, 62), (-1, 2**63 - 1)]:
        extra += [("left_shift", (a, b)), ("right_shift", (a, b))]
    out += [line(op, BINARY[op], args) for op, args in extra]
    where = lambda c, a, b: as_kind(a if c else b, common(a, b))
    clamp = lambda x, lo, hi: select_min(select_max(x, lo), hi)
    triples = list(itertools.product([True, 0, -1.5, math.nan], [False, 2, 0.5, -math.inf], [True, 7, -0.0, math.nan]))
    out += [line("where", where, t) for t in triples] + [line("clamp", clamp, t) for t in triples]
    out += [line("fma", fma, t) for t in triples] + [line("lerp", f64(lerp), t) for t in triples]
    out += [line("fma", fma, t) for t in [(0.1, 10.0, -1.0), (1e308, 10.0, -math.inf), (-0.0, 1.0, -0.0),
                                          (2**62, 2, 0), (2**62, 2, -2**63), (3, -0.0, 0.0)]]
    print("\n".join(l for l in out if l))


if __name__ == "__main__":
    main()
