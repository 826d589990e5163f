"""A fusejit graph as NumPy, CuPy or PyTorch calls, generated from the graph's nodes.

Used by bench/peers.py to run the same graph through other frameworks, and checked on the CPU
(NumPy) against fusejit for every sample by python/tests/test_translate.py. The translation is
generated, never written per graph: each elementwise op of ir/ops.def needs one entry in ``OPS``
and each reduction one in ``REDUCTIONS`` (a new op without one fails that test by name).

    fn = translate(graph, "numpy")       # a Python function: fn(x=..., w=..., eps=...) -> (y, ...)
    print(fn.source)                     # the generated code

The NumPy translation follows docs/ops.md exactly where NumPy alone would not: an f16/bf16 node
is computed in f32 and rounded once to its dtype (``fj.wide``), float -> integer casts saturate
(NaN -> 0; u8 through i64, wrapping, as PyTorch), integer ``pow`` takes negative exponents, ``fma`` is rounded once and ``lerp`` is
torch's fma form (``fj.cast``, ``fj.pow``, ``fj.fma``, ``fj.lerp``). It differs from fusejit
only where the math libraries do (NumPy's SVML or Python's ``math`` against glibc: a few ulp,
covered by ``TOLERANCE``). CuPy shares the expressions (half nodes in f32 too), but its
``fj.cast``, ``fj.pow``, ``fj.fma`` and ``fj.lerp`` are the plain CuPy calls (out-of-range casts,
negative integer exponents and fma's last bit differ there); PyTorch runs its own ops
(``torch.lerp``, ``.to``, its half kernels), as bench/peers.py wants.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any, Callable

# op name -> (NumPy/CuPy expression, PyTorch expression); {0} {1} {2} are the operands, {dtype}
# the result dtype's name. `xp` is numpy or cupy, `fj` the helpers of the backend below. Each
# follows docs/ops.md's definition (the CPU test compares with fusejit within the ulp bounds):
# relu and sign add + 0 because -0.0 + 0 = +0.0 (relu(-0.0) and sign(-0.0) are +0.0, where
# NumPy's maximum may return either zero); hardswish is (x * h) / 6, left to right.
OPS: dict[str, tuple[str, str]] = {
    "neg": ("-{0}", "-{0}"),
    "abs": ("xp.abs({0})", "torch.abs({0})"),
    "exp": ("xp.exp({0})", "torch.exp({0})"),
    "exp2": ("xp.exp2({0})", "torch.exp2({0})"),
    "expm1": ("xp.expm1({0})", "torch.expm1({0})"),
    "log": ("xp.log({0})", "torch.log({0})"),
    "log2": ("xp.log2({0})", "torch.log2({0})"),
    "log10": ("xp.log10({0})", "torch.log10({0})"),
    "log1p": ("xp.log1p({0})", "torch.log1p({0})"),
    "sqrt": ("xp.sqrt({0})", "torch.sqrt({0})"),
    "rsqrt": ("xp.reciprocal(xp.sqrt({0}))", "torch.rsqrt({0})"),
    "reciprocal": ("xp.reciprocal({0})", "torch.reciprocal({0})"),
    "sin": ("xp.sin({0})", "torch.sin({0})"),
    "cos": ("xp.cos({0})", "torch.cos({0})"),
    "tan": ("xp.tan({0})", "torch.tan({0})"),
    "tanh": ("xp.tanh({0})", "torch.tanh({0})"),
    "sigmoid": ("xp.reciprocal(1 + xp.exp(-{0}))", "torch.sigmoid({0})"),
    "relu": ("xp.maximum({0}, 0) + 0", "torch.relu({0})"),
    "gelu": ("0.5 * {0} * (1 + fj.erf({0} * 0.7071067811865476))", "torch.nn.functional.gelu({0})"),
    "gelu_tanh": ("0.5 * {0} * (1 + xp.tanh(0.7978845608028654 * ({0} + 0.044715 * {0} * {0} * {0})))",
                  "torch.nn.functional.gelu({0}, approximate='tanh')"),
    "silu": ("{0} / (1 + xp.exp(-{0}))", "torch.nn.functional.silu({0})"),
    "softplus": ("xp.where({0} > 20, {0}, xp.log1p(xp.exp({0})))", "torch.nn.functional.softplus({0})"),
    "erf": ("fj.erf({0})", "torch.erf({0})"),
    "floor": ("xp.floor({0})", "torch.floor({0})"),
    "ceil": ("xp.ceil({0})", "torch.ceil({0})"),
    "round": ("xp.rint({0})", "torch.round({0})"),
    "trunc": ("xp.trunc({0})", "torch.trunc({0})"),
    "sign": ("xp.sign({0}) + 0", "torch.sign({0})"),
    "isnan": ("xp.isnan({0})", "torch.isnan({0})"),
    "isinf": ("xp.isinf({0})", "torch.isinf({0})"),
    "isfinite": ("xp.isfinite({0})", "torch.isfinite({0})"),
    "logical_not": ("xp.logical_not({0})", "torch.logical_not({0})"),
    "add": ("{0} + {1}", "{0} + {1}"),
    "sub": ("{0} - {1}", "{0} - {1}"),
    "mul": ("{0} * {1}", "{0} * {1}"),
    "div": ("{0} / {1}", "{0} / {1}"),
    "pow": ("fj.pow({0}, {1})", "torch.pow({0}, {1})"),
    "maximum": ("xp.maximum({0}, {1})", "torch.maximum({0}, {1})"),
    "minimum": ("xp.minimum({0}, {1})", "torch.minimum({0}, {1})"),
    "fmax": ("xp.fmax({0}, {1})", "torch.fmax({0}, {1})"),
    "fmin": ("xp.fmin({0}, {1})", "torch.fmin({0}, {1})"),
    "floordiv": ("xp.floor_divide({0}, {1})", "torch.floor_divide({0}, {1})"),
    "mod": ("xp.mod({0}, {1})", "torch.remainder({0}, {1})"),
    "fmod": ("xp.fmod({0}, {1})", "torch.fmod({0}, {1})"),
    "atan2": ("xp.arctan2({0}, {1})", "torch.atan2({0}, {1})"),
    "eq": ("{0} == {1}", "{0} == {1}"),
    "ne": ("{0} != {1}", "{0} != {1}"),
    "lt": ("{0} < {1}", "{0} < {1}"),
    "le": ("{0} <= {1}", "{0} <= {1}"),
    "gt": ("{0} > {1}", "{0} > {1}"),
    "ge": ("{0} >= {1}", "{0} >= {1}"),
    "logical_and": ("xp.logical_and({0}, {1})", "torch.logical_and({0}, {1})"),
    "logical_or": ("xp.logical_or({0}, {1})", "torch.logical_or({0}, {1})"),
    "logical_xor": ("xp.logical_xor({0}, {1})", "torch.logical_xor({0}, {1})"),
    "where": ("xp.where({0}, {1}, {2})", "torch.where({0}, {1}, {2})"),
    "clamp": ("xp.minimum(xp.maximum({0}, {1}), {2})", "torch.minimum(torch.maximum({0}, {1}), {2})"),
    "cbrt": ("xp.cbrt({0})", "torch.sign({0}) * torch.abs({0}).pow(1.0 / 3.0)"),
    "erfc": ("fj.erfc({0})", "torch.erfc({0})"),
    "asin": ("xp.arcsin({0})", "torch.asin({0})"),
    "acos": ("xp.arccos({0})", "torch.acos({0})"),
    "atan": ("xp.arctan({0})", "torch.atan({0})"),
    "sinh": ("xp.sinh({0})", "torch.sinh({0})"),
    "cosh": ("xp.cosh({0})", "torch.cosh({0})"),
    "asinh": ("xp.arcsinh({0})", "torch.asinh({0})"),
    "acosh": ("xp.arccosh({0})", "torch.acosh({0})"),
    "atanh": ("xp.arctanh({0})", "torch.atanh({0})"),
    "hardswish": ("{0} * xp.minimum(xp.maximum({0} + 3, 0), 6) / 6", "torch.nn.functional.hardswish({0})"),
    "hardsigmoid": ("xp.minimum(xp.maximum({0} + 3, 0), 6) / 6", "torch.nn.functional.hardsigmoid({0})"),
    "elu": ("xp.where({0} < 0, xp.expm1({0}), {0})", "torch.nn.functional.elu({0})"),
    "hypot": ("xp.hypot({0}, {1})", "torch.hypot({0}, {1})"),
    "copysign": ("xp.copysign({0}, {1})", "torch.copysign({0}, {1})"),
    "leaky_relu": ("xp.where({0} > 0, {0}, {0} * {1})", "torch.where({0} > 0, {0}, {0} * {1})"),
    "logaddexp": ("xp.logaddexp({0}, {1})", "torch.logaddexp({0}, {1})"),
    "logaddexp2": ("xp.logaddexp2({0}, {1})", "torch.logaddexp2({0}, {1})"),
    "fma": ("fj.fma({0}, {1}, {2})", "torch.addcmul({2}, {0}, {1})"),
    "lerp": ("fj.lerp({0}, {1}, {2})", "torch.lerp({0}, {1}, {2})"),
    "bitwise_and": ("xp.bitwise_and({0}, {1})", "torch.bitwise_and({0}, {1})"),
    "bitwise_or": ("xp.bitwise_or({0}, {1})", "torch.bitwise_or({0}, {1})"),
    "bitwise_xor": ("xp.bitwise_xor({0}, {1})", "torch.bitwise_xor({0}, {1})"),
    "bitwise_not": ("xp.invert({0})", "torch.bitwise_not({0})"),
    "left_shift": ("xp.left_shift({0}, {1})", "torch.bitwise_left_shift({0}, {1})"),
    "right_shift": ("xp.right_shift({0}, {1})", "torch.bitwise_right_shift({0}, {1})"),
    "cast": ("fj.cast({0}, '{dtype}')", "{0}.to(fj.{dtype})"),
}

# Reductions: op name -> (NumPy/CuPy, PyTorch); {axes} is the tuple of reduced axes, {keepdim}
# True or False. The operand already has the result dtype (fusejit casts it first: sums of
# integers in i64, f16/bf16 in f32), so no dtype argument is needed. NumPy's max/min and torch's
# amax/amin propagate NaN, as fusejit does. torch.prod takes one dim: fj.prod reduces one at a time.
# The peers' summation orders differ from fusejit's fixed order (TOLERANCE covers it).
REDUCTIONS: dict[str, tuple[str, str]] = {
    "sum": ("xp.sum({0}, axis={axes}, keepdims={keepdim})", "torch.sum({0}, dim={axes}, keepdim={keepdim})"),
    "mean": ("xp.mean({0}, axis={axes}, keepdims={keepdim})", "torch.mean({0}, dim={axes}, keepdim={keepdim})"),
    "prod": ("xp.prod({0}, axis={axes}, keepdims={keepdim})", "fj.prod({0}, {axes}, {keepdim})"),
    "amax": ("xp.max({0}, axis={axes}, keepdims={keepdim})", "torch.amax({0}, dim={axes}, keepdim={keepdim})"),
    "amin": ("xp.min({0}, axis={axes}, keepdims={keepdim})", "torch.amin({0}, dim={axes}, keepdim={keepdim})"),
    # One axis or all ({axis} None: the flattened index); fusejit's i64 index is NumPy's intp here.
    # torch's keepdim with dim=None is reshaped to fusejit's (and NumPy's) shape of ones.
    "argmax": ("xp.argmax({0}, axis={axis}, keepdims={keepdim})", "torch.argmax({0}, dim={axis}, keepdim={keepdim}){ones}"),
    "argmin": ("xp.argmin({0}, axis={axis}, keepdims={keepdim})", "torch.argmin({0}, dim={axis}, keepdim={keepdim}){ones}"),
}

BACKENDS = ("numpy", "cupy", "torch")

# How far a peer's float result may be from fusejit's, by dtype: (relative, absolute). Libraries'
# math functions differ by a few ulp (more after a chain of ops). Integers and bool must agree
# exactly, NaN only with NaN and an infinity only with the same infinity.
TOLERANCE = {"f64": (1e-9, 1e-12), "f32": (2e-5, 1e-6), "f16": (1e-2, 1e-3), "bf16": (2e-2, 1e-2)}


def mismatch(got: Any, want: Any, dtype: str, computed_in: str | None = None) -> str | None:
    """None when NumPy array `got` matches fusejit's `want` (an output of fusejit dtype `dtype`),
    else the first mismatch. Floats: within the TOLERANCE of `dtype`, or of `computed_in` where
    that is coarser (an f32 value cast to f64 carries f32's error: see ``computed_in()``)."""
    import numpy as np

    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return f"shape {g.shape} != fusejit's {w.shape}"
    if dtype not in TOLERANCE:  # integers and bool: exactly (i64 holds every one of them)
        g, w = g.astype(np.int64), w.astype(np.int64)
        ok = g == w
    else:
        # The coarser of the two (the tuples order by rtol, and atol grows with it).
        rtol, atol = max(TOLERANCE[dtype], TOLERANCE.get(computed_in or dtype, TOLERANCE[dtype]))
        g, w = g.astype(np.float64), w.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            # An infinity is only close to itself (|g - inf| <= rtol * inf would accept anything).
            near = np.isfinite(g) & np.isfinite(w) & (np.abs(g - w) <= atol + rtol * np.abs(w))
            ok = (np.isnan(g) & np.isnan(w)) | (g == w) | near
    if ok.all():
        return None
    k = tuple(int(i) for i in np.argwhere(~ok)[0])
    return f"{int((~ok).sum())} element(s) differ, first at {k}: {g[k]!r} vs fusejit {w[k]!r}"


def computed_in(graph: Any) -> dict[str, str]:
    """Output name -> the coarsest float dtype (by TOLERANCE) of the computed nodes it depends on,
    itself included: the precision its errors were made in (`computed_in` of ``mismatch``).
    Inputs, params and constants make no error, so they do not count."""
    coarsest: dict[int, str | None] = {}
    for n in graph.nodes:  # in topological order, as generate() reads them
        own = [] if n.op in ("input", "param", "const") else [n.dtype]
        floats = [d for d in [coarsest[a] for a in n.operands] + own if d in TOLERANCE]
        coarsest[n.id] = max(floats, key=lambda d: TOLERANCE[d], default=None)
    return {t.name: coarsest[i] or t.dtype for t, i in zip(graph.outputs, graph.output_nodes)}


_DTYPES = ("bool", "i8", "u8", "i32", "i64", "f16", "bf16", "f32", "f64")


def input_ranges(graph_text: str) -> dict[str, tuple[float, float]]:
    """The `input NAME : ... range LO:HI` annotations of graph text: the value ranges test data
    for each input should be drawn from (docs/graph-format.md), so peers and fusejit see valid
    arguments (e.g. positive prices for a log)."""
    pat = re.compile(r"^\s*input\s+(\w+)\s*:.*?\brange\s+(-?[\d.e+-]+):(-?[\d.e+-]+)", re.M)
    return {m[1]: (float(m[2]), float(m[3])) for m in pat.finditer(graph_text)}


class _Helpers:
    """What generated code reaches as ``fj``: dtypes by fusejit name, erf, erfc, and 0-d constants."""

    def __init__(self, backend: str, device: Any = None):
        self.backend = backend
        self.device = device
        from . import numpy_dtype, torch_dtype

        if backend == "torch":
            import torch

            self.mod = torch
            for fj_name in _DTYPES:
                setattr(self, fj_name, torch_dtype(fj_name))
            return

        for fj_name in _DTYPES:
            try:
                setattr(self, fj_name, numpy_dtype(fj_name))
            except Exception:  # bf16 without ml_dtypes: only graphs using it fail
                pass
        if backend == "cupy":
            import cupy
            import cupyx.scipy.special

            self.mod = cupy
            self.erf = cupyx.scipy.special.erf
            self.erfc = cupyx.scipy.special.erfc
        else:
            import numpy

            self.mod = numpy
            # NumPy has no erf: math.erf per element (double precision, then rounded to the dtype).
            self._erf = numpy.vectorize(math.erf, otypes=[numpy.float64])
            self._erfc = numpy.vectorize(math.erfc, otypes=[numpy.float64])

    @staticmethod
    def divisor(x: Any, axes: tuple, correction: int) -> int:
        """A corrected mean's divisor max(0, n - correction), n from x's shape at call time (the
        function runs on any dims, as fusejit's kernels do)."""
        return max(0, math.prod(x.shape[a] for a in axes) - correction)

    def prod(self, x: Any, axes: tuple, keepdim: bool) -> Any:
        """torch.prod over several axes (it takes one), innermost first so the numbering holds."""
        for a in sorted(axes, reverse=True):
            x = self.mod.prod(x, dim=a, keepdim=keepdim)
        return x

    def erf(self, x: Any) -> Any:
        return self._erf(x).astype(x.dtype)

    def erfc(self, x: Any) -> Any:
        return self._erfc(x).astype(x.dtype)

    # The helpers below give docs/ops.md's rule where NumPy's own call would not. On CuPy (no
    # int64 views or Python loops inside cupy.fuse) they are the plain calls.
    def wide(self, x: Any) -> Any:
        """An f16/bf16 operand in f32 (exact): half nodes are computed in f32 and rounded once."""
        return x.astype(self.f32)

    def cast(self, x: Any, dtype: str) -> Any:
        """docs/ops.md "Casts": float -> integer truncates, NaN -> 0, saturates at the dtype's
        MIN/MAX (NumPy's astype is undefined there), u8 through i64 (wrapping, PyTorch's rule);
        float -> bool is x != 0 (NaN -> true)."""
        to = getattr(self, dtype)
        if self.backend == "cupy" or x.dtype.kind not in "fV":  # V: ml_dtypes' bfloat16
            return x.astype(to)
        if dtype == "bool":
            return x != 0
        if dtype not in ("i8", "u8", "i32", "i64"):
            return x.astype(to)  # one rounding from the exact value (NumPy, ml_dtypes)
        if dtype == "u8":
            return self.cast(x, "i64").astype(to)  # the low byte of the saturated i64
        np, info = self.mod, self.mod.iinfo(to)
        x = x.astype(np.float32) if x.dtype.itemsize == 2 else x  # halves: exact in f32
        hi = 2.0 ** (info.bits - 1)  # MAX + 1, exact in any float
        lo = float(info.min)  # x <= lo saturates to MIN
        t = np.where((x > lo) & (x < hi), np.trunc(x), 0).astype(to)  # NaN fails both tests: 0
        return np.where(x >= hi, to.type(info.max), np.where(x <= lo, to.type(info.min), t))

    def pow(self, a: Any, b: Any) -> Any:
        """Integer pow with a negative exponent (NumPy raises): PyTorch's rule, 1 for base 1,
        +-1 for base -1 (odd/even exponent), else 0 (fj_pow in ir/scalar/fj_scalar.h)."""
        np = self.mod
        if self.backend == "cupy" or np.result_type(a, b).kind != "i":
            return np.power(a, b)
        odd = (b & 1) == 1
        r = np.power(a, np.maximum(b, 0))  # wrapping square-and-multiply, as fusejit
        return np.where(b >= 0, r, np.where(a == 1, a, np.where(a == -1, np.where(odd, a, -a), 0 * a)))

    def fma(self, a: Any, b: Any, c: Any) -> Any:
        """a * b + c rounded once to the operands' dtype (docs/ops.md; integers wrap)."""
        np = self.mod
        if self.backend == "cupy" or np.result_type(a, b, c).kind in "iub":
            return a * b + c
        dt = np.result_type(a, b, c)
        if dt == np.float64:
            return _fma_f64(a, b, c)
        # f32, f16, bf16: the product is exact in f64 (2 x 24 bits at most), the sum is rounded
        # to odd in f64, then rounded once to dt: the same result as rounding the exact sum once
        # (Boldo & Melquiond 2008; fj_fma_half_bits in ir/scalar/fj_scalar.h does the same).
        p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
        c = np.asarray(c, np.float64)
        s = np.asarray(p + c)
        z = s - p
        e = (p - (s - z)) + (c - z)  # TwoSum: p + c == s + e exactly (NaN when s is not finite)
        u = s.view(np.uint64)
        step = (e != 0) & ~np.isnan(e) & ((u & np.uint64(1)) == 0)  # inexact and even
        toward = np.where((e > 0) == (s > 0), np.uint64(1), np.uint64(2**64 - 1))
        r = np.where(step, u + toward, u).view(np.float64)
        return r.astype(dt)

    def lerp(self, a: Any, b: Any, w: Any) -> Any:
        """torch.lerp as docs/ops.md (and fj_lerp) define it: two fma forms split at |w| = 0.5."""
        if self.backend == "cupy":
            return self.mod.where(abs(w) < 0.5, a + w * (b - a), b - (b - a) * (1 - w))
        d = b - a
        return self.mod.where(abs(w) < 0.5, self.fma(w, d, a), self.fma(w - 1, d, b))

    def const(self, value: Any, dtype: str) -> Any:
        """A 0-d array of `dtype` holding `value` on the backend's device."""
        if self.backend == "torch":
            return self.mod.tensor(value, dtype=getattr(self, dtype), device=self.device)
        import numpy

        # A NumPy scalar for CuPy too: cupy.fuse takes scalars, not device arrays, as constants.
        return numpy.asarray(value, dtype=getattr(self, dtype))[()]


def _fma_f64(a: Any, b: Any, c: Any) -> Any:
    """f64 fma per element: math.fma (Python 3.13+) or exact rationals rounded once (slow: for the
    CPU checks), the non-finite cases by IEEE's rules (math.fma raises on them)."""
    import numpy

    def one(x: float, y: float, z: float) -> float:
        if not (math.isfinite(x) and math.isfinite(y)):
            return x * y + z  # inf or NaN product: exact, and so is the sum's rule
        if not math.isfinite(z):
            return z  # a finite product cannot cancel it (x * y might overflow: not exact)
        if hasattr(math, "fma"):  # Python 3.13+; it raises where the result overflows
            try:
                return math.fma(x, y, z)
            except OverflowError:
                pass
        r = Fraction(x) * Fraction(y) + Fraction(z)
        if r == 0:  # exact zero: IEEE's sign rule (+0 unless both addends are -0)
            return x * y + z if x * y == 0 else 0.0
        try:
            return float(r)  # int / int: correctly rounded, subnormals included
        except OverflowError:
            return math.inf if r > 0 else -math.inf

    return numpy.vectorize(one, otypes=[numpy.float64])(a, b, c)


# Rounding ops are the identity on integers (docs/ops.md); NumPy's would return float64.
_IDENTITY_ON_INTEGERS = {"floor", "ceil", "round", "trunc"}


_HALF = ("f16", "bf16")
# Ops whose f16/bf16 form is not "in f32, rounded once": a cast rounds once from its exact source,
# fma the exact a * b + c (fj.cast, fj.fma). ir/ops.def marks fma, add, sub, mul "Storage"; for
# add, sub and mul f32 then one rounding gives the same bits (docs/ops.md), so they are wrapped.
_HALF_NATIVE = {"cast", "fma"}


def _expr(backend: str, n: Any, names: dict[int, str], dtypes: dict[int, str]) -> str:
    if n.op in _IDENTITY_ON_INTEGERS and n.dtype in ("bool", "i8", "u8", "i32", "i64"):
        return names[n.operands[0]]
    if n.op in REDUCTIONS:
        # A mean with a correction (var's second pass) is the sum over max(0, count - correction).
        corrected = n.op == "mean" and n.correction != 0
        template = REDUCTIONS["sum" if corrected else n.op][1 if backend == "torch" else 0]
        axis = n.axes[0] if len(n.axes) == 1 else None
        ones = f".reshape({tuple(n.shape)})" if axis is None and n.keepdim else ""
        operand = names[n.operands[0]]
        if backend == "torch" and n.op in ("argmax", "argmin") and dtypes[n.operands[0]] == "bool":
            operand = f"{operand}.to(torch.uint8)"  # torch.argmax refuses bool; false < true as u8
        e = template.format(operand, axes=tuple(n.axes), axis=axis, keepdim=bool(n.keepdim), ones=ones)
        if n.initial and backend == "numpy":
            # amax/amin from -inf/+inf (the composites' max). CuPy and torch.amax take no initial:
            # the same result except on an empty axis, which they refuse.
            e = f"{e[:-1]}, initial={'-' if n.op == 'amax' else ''}xp.inf)"
        if not corrected:
            return e
        return f"({e} / fj.divisor({names[n.operands[0]]}, {tuple(n.axes)}, {n.correction}))"
    if n.op not in OPS:
        raise KeyError(f"translate: no entry for op '{n.op}' in fusejit.translate.OPS (add one: docs/ops.md)")
    template = OPS[n.op][1 if backend == "torch" else 0]
    if backend == "torch" or n.op in _HALF_NATIVE:
        return template.format(*(names[a] for a in n.operands), dtype=n.dtype)
    # docs/ops.md: an f16/bf16 node is computed in f32 and rounded once to its dtype (NumPy's
    # half loops round every intermediate: f16 exp overflows in softplus, bf16 gelu cancels).
    args = [f"fj.wide({names[a]})" if dtypes[a] in _HALF else names[a] for a in n.operands]
    e = template.format(*args, dtype=n.dtype)
    return f"({e}).astype(fj.{n.dtype})" if n.dtype in _HALF else e


def generate(graph: Any, backend: str = "numpy") -> tuple[str, list[tuple[str, Any, str]]]:
    """The source of ``def fn(<inputs>, <params>)`` returning the outputs (declaration order) as a
    tuple, and the constants it reads as globals: (name, value, dtype)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    ins = [t.name for t in graph.inputs]
    pars = [p.name for p in graph.params]
    names: dict[int, str] = {}
    dtypes = {n.id: n.dtype for n in graph.nodes}
    consts: list[tuple[str, Any, str]] = []
    body = []
    for n in graph.nodes:
        if n.op == "input":
            names[n.id] = ins[n.slot]
        elif n.op == "param":
            names[n.id] = pars[n.slot]
        elif n.op == "const":
            names[n.id] = f"c{n.id}"
            consts.append((names[n.id], n.value, n.dtype))
        else:
            names[n.id] = f"v{n.id}"
            body.append(f"    v{n.id} = {_expr(backend, n, names, dtypes)}  # {n.name or '%' + str(n.id)} : {n.dtype}")
    ret = ", ".join(names[i] for i in graph.output_nodes)
    head = "".join(f"# {name} = {value!r} ({dtype})\n" for name, value, dtype in consts)
    src = head + f"def fn({', '.join(ins + pars)}):\n" + "\n".join(body) + f"\n    return ({ret},)\n"
    return src, consts


def translate(graph: Any, backend: str = "numpy", device: Any = None) -> Callable[..., tuple]:
    """A Python function computing `graph` with `backend` ("numpy", "cupy" or "torch"), called with
    the inputs and params by name or in declaration order (params as 0-d arrays or numbers of the
    backend); returns the outputs as a tuple. ``fn.source`` holds the generated code. `device`:
    the torch device of the constants."""
    src, consts = generate(graph, backend)
    fj = _Helpers(backend, device)
    env: dict[str, Any] = {"fj": fj}
    if backend == "torch":
        import torch

        env["torch"] = torch
    else:
        env["xp"] = fj.mod
    for name, value, dtype in consts:
        env[name] = fj.const(value, dtype)
    exec(compile(src, f"<fusejit.translate {graph.name} {backend}>", "exec"), env)
    fn = env["fn"]
    fn.source = src
    return fn
