"""``fusejit.fuse``: a Python function of arrays, traced once per argument pattern into a graph,
compiled, cached, and called like the function (as ``cupy.fuse`` and ``torch.compile`` are used).

    @fusejit.fuse
    def rmsnorm(x, w, eps=1e-6):
        xf = x.astype("f32")
        return (xf * fusejit.op("rsqrt", (xf * xf).mean(-1, keepdims=True) + eps)).astype("bf16") * w

The function runs once per new *pattern* of its arguments, on :class:`fusejit.Value` stand-ins of
its arrays (a :class:`fusejit.GraphBuilder` records what it does), and the graph it recorded is
compiled with :func:`fusejit.compile`. A pattern is: each array's dtype and rank; which of its
sizes are 1 (broadcast) and which sizes are equal to each other (each class of equal sizes becomes
one named dim, so the program runs any size without a new trace: "duck sizing", as in
torch.compile's dynamic shapes; sizes equal now that were distinct in an earlier trace run that
trace's program, _pattern.serves); the names the arguments are passed under; and the type and
value of every other argument (Python numbers are weakly typed literals in the graph, as a Python
scalar is in PyTorch; an object of a Python class, such as a method's self, by its attributes'
values, its array attributes being inputs). A function that reads a
value's ``.shape`` while traced is specialised on every size instead (its graph would otherwise
keep the traced sizes for other ones). Guide: docs/python.md, "Fusing a Python function".
"""

from __future__ import annotations

import bisect
import collections
import difflib
import dis
import functools
import inspect
import keyword
import math
import operator
import os
import re
import sys
import threading
import time
import types
import warnings
from typing import Any, Callable, NoReturn

import numpy as np

from ._errors import _PACKAGE_DIR, Error, FusejitWarning, UserError, errors_made
from ._fusejit import GraphBuilder, Value, _op_kind, _watch_ops
from ._pattern import (_PLAIN_SCALARS, DTYPE_NAMES, IDENTITY, STATE_DEPTH, STATE_LEAVES, Attr, Keying, ScalarCopy,
                       Snapshot, Traced, arrays_not_inputs, as_array, by_value, constant_key, dtype_name, lifted, pattern_difference,
                       scalar_key, serves, state_of, swap_copies, tag_expression, tag_name, trace_copies,
                       traced_attribute)

# NumPy ufunc -> fusejit op of the same meaning (docs/ops.md defines the values: within its ulp
# bounds of NumPy's; promotion is PyTorch's, a Python or NumPy scalar operand weakly typed).
_UFUNCS = {
    "add": "add", "subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div",
    "floor_divide": "floordiv", "remainder": "mod", "fmod": "fmod", "power": "pow", "negative": "neg",
    "absolute": "abs", "fabs": "abs", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
    "log2": "log2", "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "cbrt": "cbrt",
    "reciprocal": "reciprocal", "sin": "sin", "cos": "cos", "tan": "tan", "arcsin": "asin",
    "arccos": "acos", "arctan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh", "floor": "floor", "ceil": "ceil",
    "rint": "round", "trunc": "trunc", "sign": "sign", "isnan": "isnan", "isinf": "isinf",
    "isfinite": "isfinite", "logical_not": "logical_not", "maximum": "maximum", "minimum": "minimum",
    "fmax": "fmax", "fmin": "fmin", "arctan2": "atan2", "hypot": "hypot", "copysign": "copysign",
    "equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le", "greater": "gt",
    "greater_equal": "ge", "logical_and": "logical_and", "logical_or": "logical_or",
    "logical_xor": "logical_xor", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "invert": "bitwise_not", "left_shift": "left_shift", "right_shift": "right_shift",
    "logaddexp": "logaddexp", "logaddexp2": "logaddexp2",
}

# NumPy reduction (function or method) -> fusejit reduction.
_REDUCTIONS = {"sum": "sum", "mean": "mean", "prod": "prod", "max": "amax", "amax": "amax", "min": "amin",
               "amin": "amin", "argmax": "argmax", "argmin": "argmin", "var": "var", "std": "std", "any": "any",
               "all": "all"}


def _builder_of(args: tuple, literals: bool = False) -> Any:
    """The GraphBuilder of the first Value among `args`; with `literals`, where every one is a
    number, a new builder, whose op() folds them as graph text does (fusejit.op("rsqrt", 64.0) in a
    traced function was a UserError: a new user's find); a UserError otherwise."""
    for a in args:
        if isinstance(a, Value):
            return a.builder
    if literals and args and all(isinstance(a, (bool, int, float, np.bool_, np.integer, np.floating)) for a in args):
        return GraphBuilder("literals")
    arrays = " (arrays are no graph values: it builds graph nodes, so call it inside a @fusejit.fuse function, " \
             "on its arguments, or on a GraphBuilder's values; it computes nothing itself)" \
        if any(hasattr(a, "shape") for a in args) else ""
    raise UserError("no fusejit.Value among the operands: an op needs a graph value, or numbers only (which fold)"
                    + arrays)


def op(name: str, *args: Any, **keywords: Any) -> Value:
    """The elementwise op `name` of docs/ops.md on values of one GraphBuilder (a Value's builder), as
    ``GraphBuilder.op``: ``fusejit.op("silu", g) * u``, ``fusejit.op("where", c, x, 0.0)``. For
    functions traced by :func:`fuse` and for builder values alike; operands that are all numbers
    fold, as graph text folds them, to a Python number (``fusejit.op("rsqrt", 64.0)`` is 0.125).
    Raises UserError (unknown op, bad operands; no Value among them, nor only numbers); a keyword
    argument is a TypeError saying what to write instead (``approximate="tanh"``: the op gelu_tanh)."""
    try:
        return _builder_of(args, literals=True).op(name, *args, **keywords)
    except UserError as e:
        if "builder's reduce(" not in e.message:
            raise
        # The library names GraphBuilder.reduce; the call here has fusejit.reduce beside it.
        raise UserError(e.message.replace("the builder's reduce(", "fusejit.reduce(")) from None


def _flag_of(v: Any, what: str) -> bool:
    """keepdim/keepdims as NumPy takes it: a bool or an integer (NumPy refuses a string, which
    bool() would take for True: keepdims="False" kept the dims)."""
    if v is None or isinstance(v, (bool, int, np.bool_, np.integer)):
        return bool(v)
    raise TypeError(f"{what}: expected True or False, got {v!r} ({type(v).__name__})")


def reduce(name: str, x: Value, axes: Any = None, keepdim: bool | None = None, *, correction: int | None = None,
           initial: float | None = None, keepdims: bool | None = None, **unknown: Any) -> Value:
    """The reduction or composite `name` (sum mean prod amax amin argmax argmin softmax log_softmax
    logsumexp var std any all) of `x` over `axes` (an int, ints, or None: every axis), as
    ``GraphBuilder.reduce`` on x's builder: ``fusejit.reduce("softmax", x / t, -1)``. Raises
    UserError (bad axes, dtype; docs/ops.md, "Reductions"). ``keepdims`` (NumPy's spelling) is
    ``keepdim`` and NumPy's ``axis=`` or PyTorch's ``dim=`` is ``axes``; ``var``/``std`` take
    PyTorch's correction (default 1), where ``v.var()`` takes NumPy's ddof (default 0). Another
    keyword (NumPy's ddof=) is a TypeError saying what fusejit calls it, as GraphBuilder.reduce's."""
    if not isinstance(x, Value):
        raise UserError(f"reduce('{name}'): x must be a fusejit.Value, got {type(x).__name__}")
    if keepdims is not None:  # GraphBuilder.reduce's rules for both (keepdims=1 as NumPy takes it)
        unknown["keepdims"] = keepdims
    return x.builder.reduce(name, x, axes, keepdim=keepdim, correction=correction, initial=initial, **unknown)


# ---- NumPy's protocols and ndarray-like methods on Value -----------------------------------------

def _refuse_array_update(name: str, inputs: tuple, out: Any) -> None:
    """A TypeError for ndarray.__isub__(value) and the like (`opt.stats.ema -= g`): an array that is
    no input of a traced function, updated in place (a hostile tester's find: it read "np.subtract(...,
    out=) is not supported")."""
    if isinstance(out, tuple) and len(out) == 1 and not isinstance(out[0], Value) and any(out[0] is a for a in inputs):
        raise TypeError(f"an in-place operator (np.{name} into its operand) on an array that is no input of the "
                        f"fused function ({type(out[0]).__name__}: a nested object's attribute, a list's element, a "
                        "global): NumPy would update it at every call, a trace only once; pass the array as an "
                        "argument, or as an array attribute of an argument")


def _array_ufunc(self: Value, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Value:
    """np.exp(v), np.maximum(v, 0), np.float32(2) * v: the fusejit op of the ufunc (_UFUNCS)."""
    name = ufunc.__name__
    if method == "__call__":
        _refuse_array_update(name, inputs, kwargs.get("out"))
    if method != "__call__" or kwargs:
        extra = f"np.{name}.{method}" if method != "__call__" else f"np.{name}(..., {', '.join(kwargs)}=)"
        d = kwargs.get("dtype")
        shown = f"np.{d.__name__}" if isinstance(d, type) else repr(str(d))
        operands = ", ".join(f"{v}.astype({shown})" for v in ("a", "b", "c")[:ufunc.nin]) if ufunc.nin > 1 else \
            f"v.astype({shown})"
        cast = f"; cast the operands first: np.{name}({operands})" if "dtype" in kwargs else ""
        raise TypeError(f"{extra} is not supported on fusejit values (only the plain call np.{name}(...)){cast}")
    if name not in _UFUNCS and name not in _COMPOSED_UFUNCS:
        raise TypeError(f"np.{name} has no fusejit op (docs/ops.md lists them; fusejit.op(name, ...) builds any)")
    for a in inputs:
        if as_array(a) is not None and getattr(a, "ndim", 0) != 0:
            raise TypeError(f"np.{name}: an array operand of shape {tuple(a.shape)} is no graph value: pass it "
                            "to the fused function as an argument (or to the graph as GraphBuilder.input)")
    if name in _COMPOSED_UFUNCS:
        return _COMPOSED_UFUNCS[name](*inputs)
    return _builder_of(inputs).op(_UFUNCS[name], *inputs)


_BYTES_OF_FLOAT = {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}


def _divmod(x1: Any, x2: Any) -> tuple[Value, Value]:
    """np.divmod and divmod(): (x1 // x2, x1 % x2), as NumPy's (one algorithm gives its floor_divide,
    remainder and divmod: the same bits); a semantic tester's find: divmod(v, w) was Python's
    TypeError."""
    b = _builder_of((x1, x2))
    return b.op("floordiv", x1, x2), b.op("mod", x1, x2)


def _square(v: Any) -> Value:
    """np.square: a bool squared as `v ** 2` (PyTorch's int64), not as logical `v * v`."""
    return v ** 2 if str(v.dtype) == "bool" else v * v


def _fabs(v: Any) -> Value:
    """np.fabs: PyTorch has none; NumPy's has float loops only: an integer or bool operand goes to the
    smallest float that holds it (float16 for bool, i8, u8; float64 for i32, i64)."""
    if str(v.dtype) not in _BYTES_OF_FLOAT:
        v = _astype(v, np.result_type(v.dtype.dtype, np.float16))
    return v.builder.op("abs", v)


# NumPy ufuncs built from several fusejit ops, or typed otherwise than the op of their name.
_COMPOSED_UFUNCS: dict[str, Callable[..., Value]] = {
    "square": _square, "fabs": _fabs,
    "positive": lambda v: _positive(v),  # a new array in NumPy, as v.copy() and +v
    "heaviside": lambda x1, x2: _heaviside(x1, x2),
    "divmod": lambda x1, x2: _divmod(x1, x2),
}

# NumPy's positional parameters after the array, per reduction function (numpy.sum, numpy.var, ...).
_NP_POSITIONAL = {"sum": ("axis", "dtype", "out", "keepdims"), "mean": ("axis", "dtype", "out", "keepdims"),
                  "prod": ("axis", "dtype", "out", "keepdims"), "var": ("axis", "dtype", "out", "ddof", "keepdims"),
                  "std": ("axis", "dtype", "out", "ddof", "keepdims"), "max": ("axis", "out", "keepdims"),
                  "min": ("axis", "out", "keepdims"), "amax": ("axis", "out", "keepdims"),
                  "amin": ("axis", "out", "keepdims"), "argmax": ("axis", "out"), "argmin": ("axis", "out"),
                  "any": ("axis", "out", "keepdims"), "all": ("axis", "out", "keepdims")}


def _cast_for_dtype(op_name: str, a: Any, dtype: Any) -> Value:
    """The operand of a reduction given NumPy's dtype=: cast to it. fusejit's rules then decide how
    it accumulates (docs/ops.md: f16/bf16 in f32, integers in i64), and the caller casts the result
    to it (an integer sum in i64 then wraps as NumPy's own accumulation in that dtype does). What
    NumPy computes otherwise is a TypeError."""
    cast = _astype(a, dtype)
    to, of = str(cast.dtype), str(a.dtype)  # fusejit's names: no ml_dtypes needed for bf16
    if op_name in ("mean", "var", "std") and to not in _BYTES_OF_FLOAT:
        raise TypeError(f"{op_name} with an integer dtype= ({cast.dtype.name}): NumPy truncates the result; "
                        f"fusejit's {op_name} needs a float: {op_name} in a float dtype, then .astype(...)")
    if op_name in ("var", "std") and to != of:
        # NumPy computes var's deviations (operand - mean) in the operand's dtype promoted with
        # dtype= (numpy/_core/_methods.py, _var) and only accumulates in dtype=: casting first
        # computes the same where that promotion is dtype= itself (i8 or bool to f32), and would
        # lose what dtype= cannot hold elsewhere (1e8 + 1 in f32 from f64 or i32).
        import numpy as np
        deviations = np.result_type(a.dtype.dtype, cast.dtype.dtype)
        if deviations != cast.dtype.dtype:
            raise TypeError(f"{op_name} of {a.dtype.name} values with dtype={cast.dtype.name} is not supported: "
                            f"NumPy computes the deviations in {deviations.name}, fusejit would in "
                            f"{cast.dtype.name}; compute {op_name} in {deviations.name}, then .astype(...)")
    return cast


def _ddof(op_name: str, ddof: Any) -> int:
    """NumPy's ddof as fusejit's correction: a whole number from 0 to 2^62 (an int, or a float such
    as 1.0; NumPy also takes a negative or a fractional one, which fusejit's var does not), with
    errors that name ddof, as the caller wrote it."""
    if isinstance(ddof, (float, np.floating, bool, np.bool_)) and float(ddof).is_integer():
        ddof = int(ddof)  # 1.0, and True as NumPy takes it (1)
    if not isinstance(ddof, (int, np.integer)):
        fractional = isinstance(ddof, (float, np.floating))
        raise TypeError(f"{op_name}: ddof must be a whole number, got {ddof!r} ({type(ddof).__name__}"
                        + (f"; NumPy's {op_name} takes a fractional ddof, fusejit's does not)" if fractional else ")"))
    if not 0 <= int(ddof) <= 2 ** 62:
        raise UserError(f"{op_name}: ddof={int(ddof)} is out of range (fusejit's var divides by max(0, n - ddof) "
                        f"with ddof from 0 to 2^62; NumPy's takes a negative one)")
    return int(ddof)


def _check_np_axis(op_name: str, axis: Any, ndim: int) -> None:
    """NumPy's axis rules where fusejit.reduce's differ: a list (NumPy: "'list' object cannot be
    interpreted as an integer"), a tuple for argmax/argmin, () (no axis, not every axis), and an
    axis out of range, NumPy's AxisError (an IndexError and a ValueError; a hostile tester's find:
    a UserError, which `except np.exceptions.AxisError` missed)."""
    if isinstance(axis, list) or (isinstance(axis, tuple) and op_name in ("argmax", "argmin")):
        takes = "an int or None" if op_name in ("argmax", "argmin") else "an int, a tuple of ints or None"
        raise TypeError(f"{op_name}: axis={axis!r} is a {type(axis).__name__}; NumPy's axis is {takes}")
    if isinstance(axis, tuple) and len(axis) == 0:
        raise UserError(f"{op_name} over axis=() reduces nothing in NumPy: use the value itself")
    for a in axis if isinstance(axis, tuple) else (axis,):
        if isinstance(a, (int, np.integer)) and not isinstance(a, bool) and not -ndim <= int(a) < ndim:
            raise getattr(np, "exceptions", np).AxisError(int(a), ndim)


def _np_reduction(op_name: str, a: Any, *, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
                  keepdims: bool = False, initial: Any = None, **rest: Any) -> Value:
    """np.sum(v, axis, keepdims=...) and the like, NumPy's signatures (ddof: var and std; initial:
    amax and amin, as fusejit.reduce takes it; dtype: sum, mean, prod, var and std, as NumPy's: the
    operand cast to it first, and the result in it)."""
    takes_dtype = op_name in ("sum", "mean", "prod", "var", "std")
    if (dtype is not None and not takes_dtype) or out is not None or rest:
        given = [k for k, v in (("dtype", dtype), ("out", out)) if v is not None] + list(rest)
        raise TypeError(f"{op_name} on a fusejit value takes axis and keepdims (and ddof for var/std, initial "
                        f"for max/min, dtype for sum/mean/prod/var/std), not {', '.join(given)}")
    if dtype is not None:
        cast = _cast_for_dtype(op_name, a, dtype)
        result = _np_reduction(op_name, cast, axis=axis, ddof=ddof, keepdims=keepdims, initial=initial)
        return result if str(result.dtype) == str(cast.dtype) else _astype(result, cast.dtype)
    _check_np_axis(op_name, axis, len(_SHAPE_GETTER(a)))
    correction = _ddof(op_name, ddof) if op_name in ("var", "std") else None
    if ddof and correction is None:
        raise TypeError(f"{op_name} takes no ddof")
    return reduce(op_name, a, axis, _flag_of(keepdims, "keepdims"), correction=correction, initial=initial)


def _rep(v: Any) -> Any:
    """`v` as NumPy types it in an expression (NEP 50): a value as an array of its dtype (strong), a
    Python scalar as itself (weak), a NumPy scalar as itself (strong)."""
    return np.zeros(1, v.dtype.dtype) if isinstance(v, Value) else v


def _to(v: Any, dt: Any) -> Any:
    """`v` in dtype `dt`: a value cast to it; a scalar rounded to `dt` as NumPy converts it (a value
    past its range to an infinity), as a Python scalar, which then takes the dtype of the value it
    meets (every value of the expression is cast to `dt` first)."""
    if isinstance(v, Value):
        return v if v.dtype == dt else _astype(v, dt)
    if isinstance(v, (bool, int, float, np.generic)) and getattr(dt, "kind", "") in "fV":  # V: ml_dtypes' bf16
        with np.errstate(all="ignore"):
            return dt.type(v).item()
    return v.item() if isinstance(v, np.generic) else v


def _scalar_of_0d(v: Any) -> Any:
    """A closed-over 0-d array as NumPy's functions take it (asanyarray: a strong NumPy scalar)."""
    return v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else v


def _heaviside(x1: Any, x2: Any) -> Value:
    """np.heaviside(x1, x2): 0 where x1 < 0, x2 where x1 == 0 (-0.0 too), 1 where x1 > 0 and NaN where
    x1 is NaN (numpy/_core/src/npymath/npy_math_internal.h.src, npy_heaviside; PyTorch's heaviside
    gives 0 there), in the dtype of NumPy's loop for the operands (NEP 50: f64 for an integer with a
    Python float, f16 for i8 with u8; a bf16 value: fusejit's promotion, cast to a float)."""
    x1, x2 = _scalar_of_0d(x1), _scalar_of_0d(x2)
    try:
        with np.errstate(all="ignore"):
            dt = np.heaviside(_rep(x1), _rep(x2)).dtype
    except TypeError:  # no NumPy loop for a bf16 operand
        dt = None
    if dt is not None:
        x1, x2 = _to(x1, dt), _to(x2, dt)
    step = op("where", x1 == 0, x2, x1)  # x2 where x1 is 0, else x1 (a NaN stays one)
    if dt is None and str(step.dtype) not in _BYTES_OF_FLOAT:
        step = _astype(step, np.result_type(step.dtype.dtype, np.float16))
    return op("where", x1 > 0, 1, op("where", x1 < 0, 0, step))


def _nonfinite_tolerance(rtol: Any, atol: Any) -> None:
    """NumPy's handling of a NaN or infinite rtol/atol (numpy/_core/numeric.py, isclose), as
    np.errstate(invalid=...) asks: a RuntimeWarning, a FloatingPointError, a print or nothing."""
    if all(not isinstance(t, (int, float, np.number)) or np.isfinite(t) for t in (rtol, atol)):
        return
    message = f"One of rtol or atol is not valid, atol: {atol}, rtol: {rtol}"
    mode = np.geterr()["invalid"]
    if mode == "warn":
        warnings.warn(message, RuntimeWarning, stacklevel=4)
    elif mode == "raise":
        raise FloatingPointError(message)
    elif mode == "print":
        print(message)


def _np_isclose(a: Any, b: Any, rtol: Any = 1e-05, atol: Any = 1e-08, equal_nan: bool = False) -> Value:
    """np.isclose as NumPy 2 computes it (numpy/_core/numeric.py): b cast to a float first (f64 for an
    integer or bool, as NumPy's result_type(b, 1.0); a Python int or bool as a Python float), then
    |a - b| <= atol + rtol * |b| where b is finite, or a == b, or (equal_nan) both NaN, each step in
    the dtype NumPy gives it (NEP 50: Python scalars weak, NumPy scalars and values strong)."""
    a, y, rtol, atol = (_scalar_of_0d(v) for v in (a, b, rtol, atol))
    if isinstance(y, (Value, np.generic)):
        ydt = np.result_type(_rep(y), 1.0)
        y = _to(y, ydt) if isinstance(y, Value) else ydt.type(y)
    elif isinstance(y, int):  # bool too
        y = float(y)
    _nonfinite_tolerance(rtol, atol)
    with np.errstate(all="ignore"):
        rx, ry = _rep(a), _rep(y)
        d_rep = abs(rx - ry)  # builtin abs, as numeric.py: a Python float stays one (weak)
        tol_rep = _rep(atol) + _rep(rtol) * abs(ry)
        d_dt, c_dt = d_rep.dtype, np.result_type(d_rep, tol_rep)
    xd, yd = _to(a, d_dt), _to(y, d_dt)
    if isinstance(tol_rep, np.ndarray):  # a value among y, atol, rtol: the tolerance in its dtype
        t_dt = tol_rep.dtype
        tol = _to(atol, t_dt) + _to(rtol, t_dt) * _to(abs(y), t_dt)
    else:
        tol = tol_rep  # scalars: NumPy's own value (a NumPy scalar's strength is in c_dt)

    def test(name: str, v: Any) -> Any:  # isfinite/isnan of a value or of a scalar
        return op(name, v) if isinstance(v, Value) else bool(getattr(np, name)(v))

    result = (_to(abs(xd - yd), c_dt) <= _to(tol, c_dt)) & test("isfinite", y) | (xd == yd)
    if _flag_of(equal_nan, "equal_nan"):
        result = result | (test("isnan", a) & test("isnan", y))
    return result


def _np_where(condition: Any, x: Any = None, y: Any = None) -> Value:
    if x is None or y is None:
        raise TypeError("np.where(condition) (the indices form) has no fusejit op: use np.where(condition, x, y)")
    return op("where", condition, x, y)


_NOT_GIVEN = object()  # an argument not passed (np.clip tells None from nothing)


def _np_clip(a: Any, a_min: Any = _NOT_GIVEN, a_max: Any = _NOT_GIVEN, out: Any = None, *, min: Any = _NOT_GIVEN,
             max: Any = _NOT_GIVEN, **kwargs: Any) -> Value:
    """np.clip with NumPy 2's signature and checks: a_min and a_max together, or the keywords min
    and max (either may be None or left out: no bound; neither: a copy); ufunc keywords refused."""
    if out is not None:
        raise TypeError("np.clip(..., out=) is not supported on fusejit values")
    if kwargs:
        raise TypeError(f"np.clip(..., {next(iter(kwargs))}=) is not supported on fusejit values (a clip keeps the "
                        "operand's dtype; cast with astype first)")
    if a_min is not _NOT_GIVEN or a_max is not _NOT_GIVEN:
        for name, v in (("a_min", a_min), ("a_max", a_max)):
            if v is _NOT_GIVEN:
                raise TypeError(f"clip() missing 1 required positional argument: '{name}'")
        if min is not _NOT_GIVEN or max is not _NOT_GIVEN:
            raise ValueError("Passing `min` or `max` keyword argument when `a_min` and `a_max` are provided is "
                             "forbidden.")
        lo, hi = a_min, a_max
    else:
        lo, hi = (None if v is _NOT_GIVEN else v for v in (min, max))
    if lo is None and hi is None:
        return _copy(a)  # NumPy 2: no bound, a copy
    if lo is None:
        return op("minimum", a, hi)
    return op("maximum", a, lo) if hi is None else op("clamp", a, lo, hi)


def _value_clip(self: Value, min: Any = None, max: Any = None, out: Any = None, **kwargs: Any) -> Value:
    """NumPy's ndarray.clip(min, max): clamp (either bound may be None: no bound; neither: a copy)."""
    for name in ("a_min", "a_max"):  # np.clip's names, not the method's (NumPy: a TypeError)
        if name in kwargs:
            raise TypeError(f"v.clip() got an unexpected keyword argument '{name}' (the method's are min and max)")
    return _np_clip(self, out=out, min=min, max=max, **kwargs)


def _value_round(self: Value, decimals: int = 0, out: Any = None) -> Value:
    """NumPy's ndarray.round(): half to even (np.round); decimals 0 only, no out."""
    return _np_round("round", (self, decimals, out), {})


def _is_zero_index(v: Any) -> bool:
    """Whether `v` is an integer 0 (a Python or NumPy int: operator.index takes both)."""
    try:
        return operator.index(v) == 0
    except TypeError:
        return False


def _np_round(name: str, args: tuple, kwargs: dict) -> Value:
    """np.round(v) / np.around(v), with decimals 0 and no out: NumPy rounds half to even, as
    fusejit's round; other decimals have no op."""
    decimals = args[1] if args[1:] else kwargs.get("decimals", 0)
    out = args[2] if args[2:] else kwargs.get("out")
    if len(args) <= 3 and _is_zero_index(decimals) and out is None and set(kwargs) <= {"decimals", "out"}:
        return op("round", args[0])
    raise TypeError(f"np.{name} with decimals has no fusejit op (np.round(v) rounds half to even)")


def _array_function(self: Value, func: Any, types: Any, args: tuple, kwargs: dict) -> Value:
    """np.sum(v, -1), np.where(c, v, 0), np.clip(v, 0, 6): NumPy's functions of values."""
    name = func.__name__
    if name in _REDUCTIONS:
        return _reduction_call(name, args[0], args[1:], kwargs, f"np.{name}", 1)
    if name == "where":
        return _np_where(*args, **kwargs)
    if name == "clip":
        return _np_clip(*args, **kwargs)
    if name == "isclose":
        return _np_isclose(*args, **kwargs)
    if name in ("round", "around"):
        return _np_round(name, args, kwargs)
    if name == "astype":  # NumPy 2's np.astype(x, dtype, /, *, copy=True, device=None)
        return _np_astype(*args, **kwargs)
    if name in ("take_along_axis", "take", "choose", "put_along_axis"):
        raise TypeError(f"np.{name} has no fusejit op: fusejit has no gather. To pick one element per row (a "
                        "cross-entropy's target logit), pass the indices along the axis as an input and compare: "
                        "np.where(classes == target, x, 0).sum(-1), classes = np.arange(V), target of shape [T, 1] "
                        "(docs/fuse.md, 'One element per row')")
    module = getattr(func, "__module__", None) or "numpy"  # np.linalg.norm, not np.norm
    where = ("np" + module[len("numpy"):]) if module.startswith("numpy") else module
    raise TypeError(f"{where}.{name} has no fusejit op on fusejit values (supported: NumPy's ufuncs of docs/ops.md, "
                    "heaviside, where, clip, isclose, astype, and the reductions sum mean prod max min amax amin argmax argmin var std)")


def _np_astype(x: Value, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Value:
    """np.astype(x, dtype): x.astype(dtype, copy=copy), as NumPy's function of an array ("cpu" or
    None its only device there)."""
    if device not in (None, "cpu"):
        raise ValueError(f"np.astype: device={device!r}: NumPy's only device is 'cpu' (NumPy's error)")
    return _astype(x, dtype, copy=copy)


def _reduction_call(name: str, a: Any, args: tuple, kwargs: dict, where: str, before: int) -> Value:
    """A NumPy reduction called as np.NAME(a, *args, **kwargs) or a.NAME(*args, **kwargs): NumPy's
    positional parameters (_NP_POSITIONAL; `before` counts the positional arguments before them)."""
    names = _NP_POSITIONAL[name]
    if len(args) > len(names):
        raise TypeError(f"{where} takes at most {before + len(names)} positional arguments")
    named = dict(zip(names, args))
    for k in kwargs:
        if k in named:
            raise TypeError(f"{where}: argument '{k}' given twice")
    try:
        return _np_reduction(_REDUCTIONS[name], a, **named, **kwargs)
    except TypeError as e:  # named as the call wrote it: v.max(dim=-1) said "amax on a fusejit value"
        shown = f"{_REDUCTIONS[name]} on a fusejit value takes "
        if not str(e).startswith(shown):
            raise
        raise TypeError(f"{where} on a fusejit value takes " + str(e)[len(shown):]) from None


def _method(op_name: str) -> Callable:
    def method(self: Value, *args: Any, **kwargs: Any) -> Value:
        return _reduction_call(op_name, self, args, kwargs, f"v.{op_name}", 0)

    method.__name__ = op_name
    method.__doc__ = (f"NumPy's ndarray.{op_name}({', '.join(_NP_POSITIONAL[op_name])}"
                      f"{', ddof=0' if op_name in ('var', 'std') and 'ddof' not in _NP_POSITIONAL[op_name] else ''}"
                      f"{', initial=' if op_name in ('max', 'min') else ''}), as NumPy's arguments (out= refused): "
                      f"fusejit's {_REDUCTIONS[op_name]} (docs/ops.md, \"Reductions\").")
    return method


_FUSEJIT_DTYPE_NAMES = frozenset(("bool", "i32", "i64", "bf16", "f32", "f64"))
# Names NumPy reads otherwise: its "i8" is int64 (8 bytes), "u8" uint64, "f16" float128.
_AMBIGUOUS_DTYPE_NAMES = {"i8": ("int8", "int64"), "u8": ("uint8", "uint64"), "f16": ("float16", "float128")}


def _refuse_ambiguous(dtype: str) -> NoReturn:
    """astype("i8"): NumPy's int64, fusejit's int8. Offers only names fusejit takes (float128, offered
    for "f16", was refused in turn: a new user's find)."""
    ours, numpys = _AMBIGUOUS_DTYPE_NAMES[dtype]
    theirs = f" or '{numpys}'" if numpys != "float128" else " (fusejit has no float128)"
    raise UserError(f"astype({dtype!r}): NumPy reads '{dtype}' as {numpys}, fusejit as {ours}; write "
                    f"'{ours}'{theirs} (or np.{ours})")


def _astype(self: Value, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True,
            copy: bool = True) -> Value:
    """``cast(x, dtype)``: dtype a fusejit name ("bf16"), a NumPy/PyTorch dtype (as GraphBuilder.input)
    or, as NumPy's astype takes it, a NumPy dtype name ("float32"; "float" is float64 there); "i8",
    "u8" and "f16", which NumPy reads as int64, uint64 and float128, are refused (write "int8" or
    np.int8). order and subok are NumPy's and mean nothing here (a value has no layout); copy=False
    to the value's own dtype gives the value itself, as NumPy gives the array (so `q =
    p.astype(p.dtype, copy=False); q -= g` updates p), else a cast is a new value; casting is
    NumPy's rule (_check_casting: a TypeError for a cast it does not allow)."""
    if casting == "same_value":  # NumPy 2.4: a cast that checks at run time that every value survives
        raise TypeError("astype(casting='same_value') is not supported on fusejit values: a kernel does not check "
                        "that every value survives the cast")
    if casting not in _CASTING:
        raise ValueError(f"astype: casting must be one of 'no', 'equiv', 'safe', 'same_kind', or 'unsafe', not "
                         f"{casting!r} (NumPy's error)")
    if isinstance(dtype, ValueDType):  # another value's dtype (x.astype(y.dtype))
        _check_casting(str(self.dtype), str(dtype), casting)
        return self if not copy and str(dtype) == str(self.dtype) else self.builder.cast(self, str(dtype))
    if isinstance(dtype, str) and dtype in _AMBIGUOUS_DTYPE_NAMES:
        _refuse_ambiguous(dtype)
    if isinstance(dtype, str) and dtype not in _FUSEJIT_DTYPE_NAMES:
        try:
            dtype = np.dtype(dtype)
        except TypeError:
            pass  # the builder names the dtypes it takes
    to = _fusejit_dtype_name(dtype)
    if casting != "unsafe" and to in _SAFE:  # refused before the cast is built (the graph stays as it was)
        _check_casting(str(self.dtype), to, casting)
    if not copy and to == str(self.dtype):
        return self  # NumPy's astype(copy=False) of the same dtype: the array itself (an update of it is one of v)
    return self.builder.cast(self, dtype)


def _fusejit_dtype_name(dtype: Any) -> str | None:
    """fusejit's name of a dtype astype was given ("f32" for np.float32), None for none (the
    builder's cast says why)."""
    from . import _dtype_name
    try:
        return dtype if isinstance(dtype, str) else _dtype_name(dtype)
    except (UserError, TypeError, ValueError):
        return None


# NumPy's casting rules (np.can_cast) over fusejit's dtypes: 'safe' keeps every value (bool to
# anything; an integer to a wider one or to a float whose significand holds it; a float to a
# wider float), 'same_kind' adds casts within a kind or to a later one (_KIND), 'no' and 'equiv'
# keep the dtype. bf16 is ml_dtypes' bfloat16 there: 8 significant bits hold u8 and i8 exactly,
# f16's 11 do not fit, so f16 <-> bf16 is same_kind only.
_SAFE = {"bool": {"bool", "u8", "i8", "i32", "i64", "f16", "bf16", "f32", "f64"},
         "u8": {"u8", "i32", "i64", "f16", "bf16", "f32", "f64"}, "i8": {"i8", "i32", "i64", "f16", "bf16", "f32", "f64"},
         "i32": {"i32", "i64", "f64"}, "i64": {"i64", "f64"}, "f16": {"f16", "f32", "f64"},
         "bf16": {"bf16", "f32", "f64"}, "f32": {"f32", "f64"}, "f64": {"f64"}}
_CASTING = ("no", "equiv", "safe", "same_kind", "unsafe")


def _check_casting(source: str, to: str, casting: str) -> None:
    """A TypeError in NumPy's words where its `casting` rule does not allow a cast from `source`
    to `to` (fusejit's dtype names)."""
    allowed = (casting == "unsafe" or to == source or casting in ("safe", "same_kind") and to in _SAFE[source]
               or casting == "same_kind" and _KIND[source] <= _KIND[to])
    if not allowed:
        raise TypeError(f"astype: cannot cast from {source} to {to} according to the rule {casting!r} (NumPy's "
                        "rule; astype's default casting='unsafe' casts any dtype)")


def _copy(self: Value) -> Value:
    """v.copy(): a new value equal to `self` (a cast to its own dtype), so that a result copying an
    argument comes back as a new array, as NumPy's does, not as the argument itself."""
    return self.builder.cast(self, str(self.dtype))


def _positive(self: Value) -> Value:
    """+v and np.positive(v): v.copy(), refused for bool as NumPy refuses it (no bool loop)."""
    if str(self.dtype) == "bool":
        raise TypeError("np.positive / +v of a bool value: NumPy has no bool loop for it; use v.copy()")
    return _copy(self)


def _comparison(op_name: str) -> Callable:
    """== and != build eq and ne, as on NumPy arrays and PyTorch tensors (x == 0 was Python's False,
    which where(x == 0, ...) took silently). Other operand types (None, a str) compare as objects."""

    def compare(self: Value, o: Any) -> Any:
        if o is None or isinstance(o, str):
            return NotImplemented  # Python's identity comparison: False for ==
        if isinstance(o, (Value, bool, int, float, np.generic)) or (isinstance(o, np.ndarray) and o.ndim == 0):
            return self.builder.op(op_name, self, o)
        raise TypeError(f"a fusejit value {'==' if op_name == 'eq' else '!='} {type(o).__name__}: only a value or a "
                        "number compares elementwise; pass an array as an argument of the fused function")

    compare.__name__ = f"__{op_name}__"
    return compare


class ValueDType:
    """A value's dtype, as a NumPy dtype behaves: ``np.dtype(v.dtype)``, ``np.finfo(v.dtype)``,
    ``a.astype(v.dtype)`` and ``v.astype(v.dtype)`` take it (``.dtype`` is NumPy's dtype of it;
    bf16 is ml_dtypes.bfloat16, UserError without ml_dtypes; its other attributes, ``kind``,
    ``itemsize``, ..., are read from it), ``.name`` is NumPy's name
    ("float16", "bfloat16"), ``str()`` fusejit's ("f16"). It equals NumPy's and PyTorch's dtypes
    of it, fusejit's name of it ("f16": fusejit's names first, as everywhere in fusejit, although
    NumPy reads "f16", "i8" and "u8" as float128, int64 and uint64) and NumPy's names and spellings
    of it ("float16", "<f2"). A str holding fusejit's name was read by NumPy as another dtype for
    f16, i8 and u8 (np.finfo gave float128's eps)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def name(self) -> str:
        """NumPy's name of the dtype: "float32", "bfloat16" (ml_dtypes' name), "int8", "bool"."""
        from . import _NUMPY_NAMES
        return _NUMPY_NAMES.get(self._name, "bfloat16")

    @property
    def dtype(self) -> Any:
        """NumPy's dtype of it, which np.dtype() and np.finfo() read; bf16 is ml_dtypes.bfloat16
        (UserError without the ml_dtypes package)."""
        from . import numpy_dtype
        return numpy_dtype(self._name)

    def __getattr__(self, attr: str) -> Any:
        """NumPy's dtype attributes (kind, itemsize, char, ...), read from ``.dtype``."""
        if attr.startswith("__"):  # protocols NumPy or copy probe for are not forwarded
            raise AttributeError(attr)
        return getattr(self.dtype, attr)

    def __str__(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"fusejit dtype {self._name} (NumPy {self.name})"

    def __eq__(self, o: object) -> bool:
        if isinstance(o, ValueDType):
            return o._name == self._name
        if isinstance(o, str):  # fusejit's names first, as everywhere in fusejit ("i8" is int8)
            if o in (self._name, self.name):
                return True
            if o in _FUSEJIT_DTYPE_NAMES or o in _AMBIGUOUS_DTYPE_NAMES:
                return False
        from . import _dtype_name
        try:
            return _dtype_name(o) == self._name
        except (UserError, TypeError, ValueError):
            return False

    def __ne__(self, o: object) -> bool:
        return not self.__eq__(o)

    def __hash__(self) -> int:
        """NumPy's dtype's hash, so that a dict or set keyed by NumPy dtypes finds it
        (``EPS[x.dtype]``, as for an array's dtype; a hostile tester's find); the name's for bf16
        without ml_dtypes. So a dict keyed by strings does not find it, although it equals them
        (as an array's dtype does not): look up ``str(v.dtype)`` there."""
        try:
            return hash(self.dtype)
        except UserError:
            return hash(self._name)


_DTYPE_GETTER = Value.__dict__["dtype"].fget


class _TraceState(threading.local):
    """Per thread: whether a Value's shape was read since the trace began; how many traces run."""

    shape_read = False
    active = 0
    item_set: list | tuple = ()  # the values this trace assigned with v[...] = x (_setitem), by identity: a list per trace


_TRACE = _TraceState()
_COPIES = ("copies",)  # the key in a trace's stand-ins of its objects' copies (trace_copies)
_SHAPE_GETTER = Value.__dict__["shape"].fget


def _shape(self: Value) -> list[int]:
    _TRACE.shape_read = True
    return _SHAPE_GETTER(self)


def _len(self: Value) -> int:
    """len(v): the first dim's size (a 0-d value has none: TypeError, as NumPy's); read in a
    function fuse traces, it specialises the function on every size (as .shape)."""
    shape = _shape(self)
    if not shape:
        raise TypeError("len() of a 0-d value")
    return shape[0]


# The in-place operators (v += x), by the binary operator each applies, and NumPy's kind order of
# dtypes for its casting rule 'same_kind' (np.can_cast: bool < unsigned < signed < float; a result
# casts back to a dtype of its kind or a later one).
_IN_PLACE = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
             "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>"}
_KIND = {"bool": 0, "u8": 1, "i8": 2, "i32": 2, "i64": 2, "f16": 3, "bf16": 3, "f32": 3, "f64": 3}


def _in_place(name: str) -> Any:
    symbol = _IN_PLACE[name]

    def update(self: Value, other: Any) -> Value:
        r = getattr(Value, f"__{name}__")(self, other)
        shape, got = _SHAPE_GETTER(self), _SHAPE_GETTER(r)
        if list(got) != list(shape):
            raise ValueError(f"an in-place {symbol}= on a value of {_DTYPE_GETTER(self)}{list(shape)}: non-broadcastable "
                             f"output operand with shape {tuple(shape)} doesn't match the broadcast shape {tuple(got)} "
                             f"(NumPy's error: an in-place result keeps its operand's shape); write v = v {symbol} ... "
                             "for a new value")
        to, dtype = _DTYPE_GETTER(self), _DTYPE_GETTER(r)
        if dtype != to:
            if _KIND[dtype] > _KIND[to]:
                raise TypeError(f"an in-place {symbol}= on a value of {to}{list(shape)}: cannot cast the result from "
                                f"{dtype} to {to} with casting rule 'same_kind' (NumPy's for an in-place operator; "
                                f"PyTorch refuses it too); write v = v {symbol} ... for a new value")
            r = self.builder.cast(r, to)
        self._assign(r)
        return self

    update.__name__ = f"__i{name}__"
    update.__doc__ = (f"v {symbol}= x, as NumPy's in-place operator: v itself becomes v {symbol} x, cast back to v's "
                      "dtype by NumPy's 'same_kind' rule (a TypeError otherwise) at v's shape (a ValueError "
                      "otherwise), so every reference to v sees it. In a fused function, an array argument updated "
                      "so is updated in the caller's array too, as NumPy's (docs/fuse.md).")
    return update


def install_value_methods() -> None:
    """Gives fusejit.Value NumPy's protocols (__array_ufunc__, __array_function__) and ndarray-like
    methods (astype, ndim, sum, mean, ...), for fuse-traced functions and builder values alike."""
    Value.__array_ufunc__ = _array_ufunc
    Value.__array_function__ = _array_function
    Value.__eq__ = _comparison("eq")
    Value.__ne__ = _comparison("ne")
    Value.__hash__ = object.__hash__  # by identity, as a tensor's
    Value.astype = _astype
    Value.__pos__ = _positive
    Value.__divmod__ = lambda self, other: _divmod(self, other)
    Value.__rdivmod__ = lambda self, other: _divmod(other, self)
    Value.__divmod__.__doc__ = Value.__rdivmod__.__doc__ = "divmod(v, w): (v // w, v % w), as NumPy's divmod."
    Value.dtype = property(lambda self: ValueDType(_DTYPE_GETTER(self)),
                           doc="The value's dtype, as NumPy's dtype of it behaves (np.dtype(v.dtype), np.finfo(v.dtype), "
                               "v.dtype == np.float32); str(v.dtype) is fusejit's name (\"f32\").")
    Value.ndim = property(lambda self: len(_SHAPE_GETTER(self)), doc="The value's rank (number of dims).")
    Value.size = property(lambda self: math.prod(_shape(self)),
                          doc="The value's element count at the builder's dim sizes; read in a function fuse "
                              "traces, it specialises the function on every size (as .shape).")
    Value.__len__ = _len
    Value.copy = lambda self, order="K": _copy(self)
    Value.copy.__doc__ = ("NumPy's ndarray.copy(): a new value of the same elements (a cast to its own dtype), so "
                          "a result that copies an argument is a new array, never the argument itself.")
    Value.shape = property(_shape, doc="The value's shape at the builder's dim sizes (list of ints); read in a "
                                       "function fuse traces, it specialises the function on every size.")
    for m in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "var", "std", "any", "all"):
        setattr(Value, m, _method(m))
    Value.clip = _value_clip
    _value_clip.__name__, _value_clip.__qualname__ = "clip", "Value.clip"  # named so in Python's argument errors
    Value.round = _value_round
    Value.__round__ = _round
    Value.__getitem__ = _getitem
    Value.__setitem__ = _setitem
    for name in _IN_PLACE:
        setattr(Value, f"__i{name}__", _in_place(name))
    Value.__matmul__ = Value.__rmatmul__ = Value.__imatmul__ = _no_matmul
    Value.__array__ = _no_array
    Value.__float__ = _no_number("float")
    Value.__int__ = _no_number("int")
    Value.__complex__ = _no_number("complex")
    Value.__getattr__ = _missing_attribute
    Value.__iter__ = None  # not iterable: no len() to iterate by (iter(v) is a TypeError, not a loop on __getitem__)
    for name in _LAYOUT_ATTRIBUTES:
        setattr(Value, name, property(_no_layout(name)))
    for name in _DATA_ATTRIBUTES:
        setattr(Value, name, property(_no_data(name)))
    Value.itemsize = property(lambda self: _ITEMSIZE[_DTYPE_GETTER(self)], doc="Bytes per element, as NumPy's.")
    Value.nbytes = property(lambda self: self.size * _ITEMSIZE[_DTYPE_GETTER(self)],
                            doc="Bytes of the value's elements, as NumPy's; read in a function fuse traces, it "
                                "specialises the function on every size (as .size).")


def _round(self: Value, ndigits: int | None = None) -> Value:
    """round(v): half to even, as round() of an ndarray (np.round) and of a PyTorch tensor."""
    if ndigits:
        raise TypeError("round(v, ndigits) has no fusejit op (round(v) rounds half to even)")
    return op("round", self)


def _no_array(self: Value, dtype: Any = None, copy: Any = None) -> Any:
    """np.asarray(v), np.array(v), np.abs([v, v]): a TypeError that says why (NumPy asks for data);
    for a value of a trace that has ended, the UserError that says so (_TraceBuilder)."""
    _DTYPE_GETTER(self)
    raise TypeError("a fusejit value has no data while a graph is built or traced: np.asarray, np.array and lists of "
                    "values would need it. Apply NumPy's functions to the value itself (np.exp(v), np.where(c, v, 0)); "
                    "combine values with operators, not by stacking them in a list or array")


# ndarray attributes that change a layout (what a graph cannot express: it maps elements 1:1 under
# broadcasting): an AttributeError, as for any attribute a value lacks, that says so.
_LAYOUT_ATTRIBUTES = ("reshape", "T", "mT", "transpose", "swapaxes", "flatten", "ravel", "squeeze", "view", "repeat",
                      "take", "sort", "argsort", "cumsum", "cumprod", "dot",
                      "unsqueeze", "permute", "expand", "flip", "gather")  # PyTorch's


# What an array has and a value, a node of a graph being built or traced, does not: its data.
_DATA_ATTRIBUTES = ("item", "tolist", "tobytes", "flags", "strides", "data", "ctypes")
_ITEMSIZE = {"bool": 1, "u8": 1, "i8": 1, "i32": 4, "i64": 8, **_BYTES_OF_FLOAT}


# PyTorch's tensor methods that cast (x.float()): NumPy's dtype of each, for v.astype(...).
_TORCH_CASTS = {"float": "np.float32", "double": "np.float64", "half": "np.float16", "bfloat16": '"bf16"',
                "int": "np.int32", "long": "np.int64", "bool": "np.bool_", "byte": "np.uint8", "char": "np.int8"}
# PyTorch's methods of Python's operators, in place ones included (p.add_(g) is p += g).
_TORCH_OPERATORS = {"add": "+", "sub": "-", "subtract": "-", "mul": "*", "multiply": "*", "div": "/", "divide": "/",
                    "true_divide": "/", "floordiv": "//", "floor_divide": "//", "mod": "%", "remainder": "%",
                    "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# What to write for a PyTorch method whose op an ndarray spells otherwise (x.where(cond, y) is
# where(cond, x, y)).
_NUMPY_SPELLING = {"clamp": "v.clip(lo, hi) or fusejit.op('clamp', v, lo, hi)", "abs": "abs(v) or np.abs(v)",
                   "pow": "v ** y", "neg": "-v", "amax": "v.max(axis) or fusejit.reduce('amax', v, axes)",
                   "amin": "v.min(axis) or fusejit.reduce('amin', v, axes)", "cast": "v.astype(dtype)",
                   "to": "v.astype(dtype)", "where": "np.where(cond, v, y) (PyTorch's v.where(cond, y))",
                   "square": "v * v", "copy_": "v[...] = y", "zero_": "v[...] = 0", "fill_": "v[...] = y",
                   "clamp_": "v[...] = v.clip(lo, hi)", "masked_fill": "np.where(mask, value, v)",
                   "masked_fill_": "v[...] = np.where(mask, value, v)", "type_as": "v.astype(u.dtype)",
                   **{m: f"v.astype({t})" for m, t in _TORCH_CASTS.items()},
                   **{m: f"v {o} y" for m, o in _TORCH_OPERATORS.items()},
                   **{f"{m}_": f"v {o}= y" for m, o in _TORCH_OPERATORS.items() if o in ("+", "-", "*", "/", "//", "%")}}


class _NoSuggestions:
    """The `obj` of an AttributeError whose message says what to write: Python's "Did you mean"
    reads dir(obj), which would add a misleading one (v.sqrt(): 'sort')."""

    def __dir__(self) -> list:
        return []


_NO_SUGGESTIONS = _NoSuggestions()


def _missing_attribute(self: Value, name: str) -> Any:
    """An attribute a value lacks (Python calls __getattr__ only then, also after a property raised
    AttributeError: _no_layout's and _no_data's messages are raised again here). An op of PyTorch's
    tensor methods (x.exp(), x.clamp(lo, hi), x.softmax(-1), x.float()) says what to write
    instead, asking the op table (_op_kind) rather than keeping a list of ops here; any other name
    gets Python's own error (with its "Did you mean" suggestion)."""
    refuse = _no_layout(name) if name in _LAYOUT_ATTRIBUTES else _no_data(name) if name in _DATA_ATTRIBUTES else None
    if refuse is not None:
        try:
            refuse(self)
        except AttributeError as e:
            raise AttributeError(str(e), name=name, obj=_NO_SUGGESTIONS) from None
    message = f"'fusejit.Value' object has no attribute '{name}'"
    kind = _op_kind(name) if name.isidentifier() and name.isascii() and not name.startswith("_") else ""
    ufunc = getattr(np, name, None) if kind else None
    if name in _NUMPY_SPELLING:
        message += f": a value has NumPy's ndarray methods, not PyTorch's; write {_NUMPY_SPELLING[name]}"
    elif kind == "elementwise":
        if isinstance(ufunc, np.ufunc):  # its operand count is the op's
            operands = "v, y" if ufunc.nin == 2 else "v"
            ways = f"np.{name}({operands}) or fusejit.op('{name}', {operands})"
        else:
            ways = f"fusejit.op('{name}', v) (any other operands after v: docs/ops.md)"
        message += f": a value has NumPy's ndarray methods, not PyTorch's; write {ways}"
    elif kind == "reduction":
        message += (f": a value has NumPy's ndarray methods, not PyTorch's; write fusejit.reduce('{name}', v, axes) "
                    "(axes: an int, ints or None for every axis)")
    else:
        raise AttributeError(message, name=name, obj=self)  # Python's own, with its "Did you mean"
    raise AttributeError(message, name=name, obj=_NO_SUGGESTIONS)


def _no_number(kind: str) -> Any:
    """float(v), int(v), complex(v) and what calls them (math.exp(v)): a TypeError that says what to
    write instead (a new user's find: math.exp(v) said "must be real number, not Value")."""
    def refuse(self: Value) -> Any:
        raise TypeError(f"a fusejit.Value is no Python number ({kind}(v), or math's functions of it): it stands for "
                        "an array while a graph is built or traced; use NumPy's functions (np.exp(v)) or "
                        "fusejit.op('exp', v)")
    refuse.__name__ = f"__{kind}__"
    return refuse


def _no_data(name: str) -> Any:
    def refuse(self: Value) -> Any:
        raise AttributeError(f"fusejit.Value has no '{name}': a value has no data (nor memory layout) while a graph "
                             "is built or traced; a fused function's results are arrays: read them after the call")
    refuse.__doc__ = f"ndarray.{name}: no data while a graph is built (an AttributeError that says so)."
    return refuse


def _no_layout(name: str) -> Any:
    def refuse(self: Value) -> Any:
        raise AttributeError(f"fusejit.Value has no '{name}': a fused graph maps elements one to one (broadcasting "
                             "included) and reduces; reshapes, transposes, sorts, scans and products are not ops "
                             "of it. Apply them to the arrays outside the fused function (a transposed view is "
                             "read through its strides, no copy), or keep reduced axes with keepdims=True")
    refuse.__doc__ = f"ndarray.{name}: not an op of a fused graph (an AttributeError that says so)."
    return refuse


def _no_matmul(self: Value, other: Any) -> Any:
    """a @ b: a TypeError that says why, as np.matmul's (Python's own named no fusejit op)."""
    raise TypeError("a @ b (matmul) has no fusejit op: a fused graph maps elements one to one (broadcasting "
                    "included) and reduces; run the matmul outside the fused function (cuBLAS, torch.matmul, np.matmul) "
                    "and fuse what comes before and after it")


def _getitem(self: Value, index: Any) -> Value:
    """v[...], v[:]: v itself, as NumPy's view of the whole array (so `p[:] += 1` updates p); any
    other index a TypeError that says what to write instead (a graph computes whole tensors)."""
    if _whole_index(index, len(_SHAPE_GETTER(self))):
        return self
    raise TypeError(f"fusejit values cannot be indexed or sliced (v[{_index_text(index)}]): a fused graph computes "
                    "whole tensors. To broadcast a reduction back over its axes keep them: np.max(x, axis=1, "
                    "keepdims=True), not np.max(x, axis=1)[:, None]; slice the arrays outside the fused function")


def _setitem(self: Value, index: Any, value: Any) -> None:
    """v[...] = x, v[:] = x, v[()] = x: v itself becomes x broadcast to v's shape and
    cast to v's dtype, as NumPy's assignment ('unsafe' casting: an i32 v[...] = 1.5 stores 1), so
    an array argument assigned so is updated in the caller's array (docs/fuse.md, in-place
    operators). Any other index is a TypeError (a graph computes whole tensors)."""
    if not _whole_index(index, len(_SHAPE_GETTER(self))):
        raise TypeError(f"fusejit values cannot be indexed or sliced (v[{_index_text(index)}] = ...): a fused graph "
                        "computes whole tensors. Assign a whole value with v[...] = x (or update it with v -= x, ...); "
                        "slice the arrays outside the fused function")
    if _TRACE.active:  # a NumPy scalar argument so assigned is refused per call (_refuse_scalar_item_set)
        _TRACE.item_set.append(self)
    if value is self:  # p[:] += 1: the update is done, p[:] was p itself
        return
    shape, to = tuple(_SHAPE_GETTER(self)), _DTYPE_GETTER(self)
    if _KIND[to] <= 2 and _numpy_scalar_like(value):  # into bool or an integer: stored as NumPy stores it
        value = _stored_as_numpy(value, to)
    got = tuple(_SHAPE_GETTER(value) if isinstance(value, Value) else np.shape(value))
    try:
        fits = np.broadcast_shapes(got, shape) == shape
    except ValueError:
        fits = False
    if not fits:  # said before any node is built (a refused call leaves the graph as it was)
        extra = len(got) > len(shape) and all(n == 1 for n in got[:len(got) - len(shape)])
        raise ValueError(f"v[{_index_text(index)}] = x: could not broadcast input array from shape {got} into shape "
                         f"{shape}" + (" (NumPy drops leading size-1 dims here, fusejit does not: give x v's rank)"
                                       if extra else " (NumPy's error)"))
    if isinstance(value, Value) and _DTYPE_GETTER(value) != to:
        value = self.builder.cast(value, to)  # first: one rounding, as NumPy's cast of x into v
    r = op("where", True, value, self)  # value broadcast over v's shape
    self._assign(r if _DTYPE_GETTER(r) == to else self.builder.cast(r, to))


def _numpy_scalar_like(value: Any) -> bool:
    """A Python bool, int or float, a NumPy scalar or a 0-d NumPy array."""
    return isinstance(value, (bool, int, float, np.generic)) or isinstance(value, np.ndarray) and value.ndim == 0


def _stored_as_numpy(value: Any, to: str) -> Any:
    """A scalar assigned into a bool or integer value, as NumPy's own assignment into a 0-d array of
    that dtype stores it, so the literal fits: NaN is NumPy's ValueError, an infinity or a Python
    number out of range its OverflowError (hostile testers' finds: 70000.0 into u8 stored 112, and
    np.int8(-1) into u8, which NumPy stores as 255, was a UserError)."""
    from . import numpy_dtype
    cell = np.zeros((), numpy_dtype(to))
    try:
        cell[...] = value
    except (ValueError, OverflowError, TypeError) as e:
        raise type(e)(f"{e} (NumPy's error)") from None
    return cell.item()


def _whole_index(index: Any, ndim: int) -> bool:
    """Whether v[index] is all of v, as NumPy's: `...`, `()`, or `:`s (one per dim at most) with or
    without one `...`; more `:`s than dims are NumPy's IndexError."""
    parts = index if isinstance(index, tuple) else (index,)
    full = [p for p in parts if isinstance(p, slice) and p == slice(None)]
    ellipses = sum(p is Ellipsis for p in parts)
    if len(full) + ellipses != len(parts) or ellipses > 1:
        return False
    if len(full) > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {len(full)} were indexed "
                         "(NumPy's error)")
    return True


def _index_text(index: Any) -> str:
    if index == ():
        return "()"
    parts = index if isinstance(index, tuple) else (index,)

    def one(p: Any) -> str:
        if isinstance(p, slice):
            bound = lambda b: "" if b is None else repr(b)  # noqa: E731
            return f"{bound(p.start)}:{bound(p.stop)}" + ("" if p.step is None else f":{bound(p.step)}")
        return "None" if p is None else "..." if p is Ellipsis else repr(p)
    return ", ".join(one(p) for p in parts)


# ---- fuse ----------------------------------------------------------------------------------------

_RESERVED = {"graph", "dim", "input", "param", "output", "true", "false", "inf", "nan", "cast"}
# One lock for every function's traces: re-entrant (a function may call itself, or another fused
# function, on arrays while traced), and one for all, so two functions that do so from two threads
# cannot each hold one lock and wait for the other's.
_TRACE_LOCK = threading.RLock()  # a `with` takes and leaves it whole: a Ctrl-C cannot split that


def _renew_trace_lock(at_exit: bool = False) -> None:
    """A new _TRACE_LOCK where another thread may hold the old one for good: in a child after
    fork() (only the forking thread lives there; it keeps a lock it holds itself), and at exit
    (__init__._at_exit, once the gate that parks daemon threads returning from fusejit calls is
    closed: one tracing in a compile holds it for good, and an atexit handler's trace waited for
    it for ever). At exit the lock is kept when it is free within 0.2 s (a trace running Python
    code ends, or parks in its next compile); a trace still running after that may overlap a
    handler's, in a process that is ending. The old lock's holder leaves it as it found it."""
    global _TRACE_LOCK
    if at_exit and _TRACE_LOCK.acquire(timeout=0.2):
        _TRACE_LOCK.release()
        return
    global _TRACE_WAITING, _TRACE_WATCHER_LOCK
    if not at_exit:
        _TRACE_WAITERS.clear()  # a parent's threads, which a child has not
        _TRACE_WAITING = threading.Event()  # its lock may be another thread's, held for good
        _TRACE_WATCHER_LOCK = threading.Lock()
    if at_exit or not _TRACE_LOCK._is_owned():
        _TRACE_LOCK = threading.RLock()
        _TRACE_HOLDER[:] = ["", "", 0.0]  # the old lock's holder holds no new one


os.register_at_fork(after_in_child=_renew_trace_lock)
_TRACE_WAIT_WARNING_S = 10.0  # a trace's wait for the lock before it warns that it may wait for ever
# The function whose traced code runs under _TRACE_LOCK, its thread's name ("": none runs now, a
# compile maybe) and since when (time.monotonic(), anew after a compile inside it): set by
# Fused._traced around the function's own code.
_TRACE_HOLDER: list = ["", "", 0.0]


# Traces waiting for _TRACE_LOCK: thread ident -> [function name, since (time.monotonic()), warned];
# one watcher thread (_watch_trace_waits) reads them. The waiting thread takes the lock with a `with`
# only, which an interrupt cannot leave held (a hand-made acquire and release could: a hostile
# tester's find), and starts no thread of its own (one per wait, interrupted, was left running).
_TRACE_WAITERS: dict = {}
_TRACE_WAITING = threading.Event()  # set while _TRACE_WAITERS may hold one
_TRACE_WATCHER = [0]  # the process that started the watcher (after fork(): none runs in the child)
_TRACE_WATCHER_LOCK = threading.Lock()  # one starts it


def _watch_trace_waits() -> None:
    """The watcher thread: warns once for each trace that has waited for _TRACE_LOCK over
    _TRACE_WAIT_WARNING_S while one other thread's traced code has run all that time (not traces
    that took turns, nor a compile: they end). A traced function that waits for a thread which
    traces waits for ever (docs/fuse.md, "Threads"), where the hang said nothing."""
    while True:
        _TRACE_WAITING.wait()
        time.sleep(min(1.0, _TRACE_WAIT_WARNING_S / 4))
        try:
            _poll_trace_waits()
        except Exception:  # noqa: BLE001: a dict changed by a finalizer meanwhile: the next poll reads it
            pass
        _TRACE_WAITING.clear()
        if _TRACE_WAITERS:  # one that came meanwhile
            _TRACE_WAITING.set()


def _poll_trace_waits() -> None:
    """One look of the watcher at the waiting traces. A function of its own, so that no frame it
    reads outlives it (a frame kept alive keeps its arrays and locals: their finalizers ran late)."""
    now, (fn, thread, since) = time.monotonic(), _TRACE_HOLDER
    waiters = list(_TRACE_WAITERS.copy().items())  # before the frames: one registered meanwhile is no stale one
    frames = sys._current_frames()
    del frames[threading.get_ident()]  # this frame's own: a cycle through these locals (frames -> it -> frames)
    for ident, waiter in waiters:
        frame = frames.get(ident)
        if not _in_entry(frame):  # no longer waiting (an interrupt in its cleanup): stale
            if _TRACE_WAITERS.get(ident) is waiter:
                _TRACE_WAITERS.pop(ident, None)
            continue
        if fn and not waiter[2] and now - max(waiter[1], since) >= _TRACE_WAIT_WARNING_S:
            waiter[2] = True
            _warn_trace_wait(frame, waiter[0], fn, thread)


def _in_entry(frame: Any) -> bool:
    """Whether a thread whose innermost frame is `frame` runs Fused._entry (waits there, or is about
    to: registering runs threading's code)."""
    while frame is not None:
        if frame.f_code is Fused._entry.__code__:
            return True
        frame = frame.f_back
    return False


def _warn_trace_wait(frame: Any, waiting: str, fn: str, thread: str) -> None:
    """The watcher's warning, at the waiting thread's own line (its innermost frame outside the
    package, from `frame`, the waiting one's); on stderr where a filter makes it an error, which
    the watcher has no caller to raise to (it ended the watcher)."""
    message = (f"fuse: the trace of '{waiting}' has waited {_TRACE_WAIT_WARNING_S:g} s for the trace of '{fn}' in "
               f"thread '{thread}' (traces take turns); if that function waits for the thread of this one, both wait "
               "for ever: a traced function must not wait for a thread that traces (docs/fuse.md, \"Threads\")")
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    file, line = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else (__file__, 0)
    try:
        warnings.warn_explicit(message, FusejitWarning, file, line or 0, module=frame.f_globals.get("__name__", "")
                               if frame is not None else __name__)
    except Exception:  # noqa: BLE001: an error filter's, raised here in the watcher
        sys.stderr.write(f"{file}:{line}: FusejitWarning: {message}\n")


def _await_trace(fn_name: str) -> bool:
    """Notes that the trace of `fn_name` is about to wait for _TRACE_LOCK, for the watcher (started
    here in a process that has none); False where this thread holds the lock already."""
    if _TRACE_LOCK._is_owned():
        return False
    if _TRACE_WATCHER[0] != os.getpid():
        with _TRACE_WATCHER_LOCK:
            if _TRACE_WATCHER[0] != os.getpid():
                _TRACE_WATCHER[0] = os.getpid()
                try:
                    threading.Thread(target=_watch_trace_waits, name="fusejit-trace-waits", daemon=True).start()
                except RuntimeError:  # no new thread at interpreter shutdown: no warning
                    pass
    _TRACE_WAITERS[threading.get_ident()] = [fn_name, time.monotonic(), False]
    _TRACE_WAITING.set()
    return True


_UNBOUND = object()  # a parameter a call has not bound yet (_by_keyword)
_MAX_ENTRIES = 64  # programs kept per function; one not called lately is dropped beyond (torch.compile: 8)
_TRACE_WARNING_AT = 8  # traces of one function before a warning (torch.compile's recompile limit is 8)
# Distinct values of one float argument, the rest of the pattern alike (other float arguments' values
# aside), before a warning that names it: two may be two call sites' constants, a third looks like
# a value that changes every call.
_FLOAT_VALUES_WARNING_AT = 3


def _no_array_hint(inputs: list) -> str:
    """The hint for a result that is no traced value when the call gave no array at all."""
    return ("; it was called with no array argument (numbers are constants of the trace): pass NumPy arrays or "
            "tensors" if not inputs else "")


def _graph_name(name: str, fallback: str, taken: set) -> str:
    """A graph-format name for `name` (itself where it can be one, else `fallback`), made unique
    among `taken` with trailing underscores, and added to it."""
    base = name if _nameable(name) else fallback
    while base in taken:
        base += "_"
    taken.add(base)
    return base


class _TraceBuilder(GraphBuilder):
    """A trace's GraphBuilder. Once the trace has built its graph, a value kept past it (stored in a
    global or an object) says so where a plain builder's says "build() ends it", as its user
    made no builder (the binding reads `_spent_note`, once the builder has built or has an
    attribute `_ended`, set when its trace raised: it builds nothing)."""

    def __init__(self, graph_name: str, fn_name: str) -> None:
        super().__init__(graph_name)
        self._spent_note = (f"a value of the trace of fused function '{fn_name}', which has ended: a fused function's "
                            "values exist only while it is traced, so one kept in a global, a closure or an object "
                            "cannot be computed with later; return it (it becomes an output), or do the work inside "
                            "the function")


class _LocalNames:
    """Names a trace's values after the locals the traced function stores them in, so the graph,
    plans and generated CUDA say ``xf``, ``ms`` where they said %4 and v2. The binding records
    each value an op call made for the function's own code with the offset of the instruction
    that made it (_watch_ops); the instruction after it, where it stores a local (`xf = ...`),
    names the value it made last. Nothing reads the function's frame or traces it: names never
    change what it computes, when its locals are freed, or what a debugger sees (hostile testers'
    finds against a sys.settrace design and a held frame)."""

    def __init__(self, code: Any) -> None:
        self.code, self.prior, self.made = code, None, []

    def __enter__(self) -> _LocalNames:
        self.prior = _watch_ops(self.code, self.made if self.code is not None else None)
        return self

    def __exit__(self, *exc: Any) -> None:
        _watch_ops(*self.prior)  # the record of a trace this one is inside, back

    def apply(self, b: Any, taken: set) -> None:
        """Names each value a local stores that has no name yet (inputs and outputs have theirs),
        after that local where it can be a graph name, made unique among `taken`: exact names
        first, so a local `x_1` keeps its name and a rebound `x` takes the next free one."""
        made, self.made = self.made, []
        starts, stores = _stores(self.code) if made else ([], {})
        last = {}  # per instruction, the value it made last (a loop's: the last iteration's)
        for at, v in made:  # `at` may point into the instruction's inline caches (CALL's, in 3.11)
            last[starts[bisect.bisect_right(starts, at) - 1]] = v
        named = [(last[at], name) for at, name in stores.items()
                 if at in last and last[at].builder is b and _nameable(name) and not _KERNEL_VARIABLE.fullmatch(name)]
        suffix: dict = {}  # per name, the next suffix to try (a local stored 20,000 times: linear)
        for v, name in sorted(named, key=lambda p: p[1] in taken):  # exact names first, in code order
            if v._name:  # an input's, an output's, or a value another local named
                continue
            unique = name
            while unique in taken:
                suffix[name] = suffix.get(name, 0) + 1
                unique = f"{name}_{suffix[name]}"
            taken.add(unique)
            try:
                b.name(v, unique)
            except Error:  # a name is no reason to fail a trace; it is new and valid, so none is expected
                continue


# Instructions whose result is the one value a call or an operator returned (not UNPACK_SEQUENCE,
# whose values a C `map` may make in any order, nor STORE_SUBSCR, whose `c[...] = a = x * 2`
# stores a value it did not make: a hostile tester's finds).
_PRODUCERS = frozenset({"BINARY_OP", "CALL", "CALL_KW", "CALL_FUNCTION_EX", "COMPARE_OP", "UNARY_NEGATIVE",
                        "UNARY_INVERT", "CALL_INTRINSIC_1"})


def _stores(code: Any) -> tuple[list, dict]:
    """The offsets where `code`'s instructions start, and {offset of a producing instruction: the
    local the next one stores its result in}."""
    ins = list(dis.get_instructions(code))
    out = {}
    real = [i for i in ins if i.opname != "EXTENDED_ARG"]  # the 257th local's store takes a prefix
    for a, s in zip(real, real[1:]):
        if a.opname not in _PRODUCERS:
            continue
        if s.opname in ("STORE_FAST", "STORE_DEREF") and isinstance(s.argval, str):
            out[a.offset] = s.argval
        elif s.opname == "STORE_FAST_LOAD_FAST" and isinstance(s.argval, tuple):  # Python 3.13: store, then load
            out[a.offset] = s.argval[0]
    return [i.offset for i in ins], out


# A kernel's own variables (v12): a local so named would read as another value in index.json.
_KERNEL_VARIABLE = re.compile(r"v[0-9]+")


def _nameable(name: str) -> bool:
    """Whether `name` can name a value in graph text as it is."""
    return name.isascii() and name.isidentifier() and name not in _RESERVED and not keyword.iskeyword(name)


def _changed(snap: Snapshot) -> bool:
    """Whether an object argument's attributes are no longer those its call read (the trace, or
    another thread, changed them): the program traced is then not kept for the pattern read."""
    now = state_of(snap.obj)
    return now.keys() != snap.state.keys() or any(now[n] is not e for n, e in snap.state.items())


def _wrapped_signature(fn: Callable) -> tuple[inspect.Signature, bool]:
    """fn's own signature, so a functools.wraps wrapper binds with its own defaults (following
    __wrapped__ gave the wrapped function's: a silent wrong value); but a generic wrapper's
    (*args, **kwargs) is the wrapped function's, whose names the inputs then take (args0, args1
    otherwise, and a new trace per call form): the first along __wrapped__ that is not generic (a
    generic wrapper of a wrapper with its own parameters binds by those, not the innermost
    function's). Also whether it is a wrapped function's."""
    own = inspect.signature(fn, follow_wrapped=False)
    f, sig, bound, seen = fn, own, 0, {id(fn)}
    while _generic(sig) and hasattr(f, "__wrapped__"):
        # A bound method's __wrapped__ is its function's: the object it was bound to (a decorated
        # classmethod's class) is that function's first parameter, dropped below as inspect does.
        bound += isinstance(f, types.MethodType)
        f = f.__wrapped__
        if id(f) in seen:
            raise TypeError(f"fuse: the __wrapped__ attributes of {fn!r} form a cycle")
        seen.add(id(f))
        sig = inspect.signature(f, follow_wrapped=False)
    params = list(sig.parameters.values())
    for _ in range(bound):
        if params and params[0].kind is not inspect.Parameter.VAR_POSITIONAL:
            params = params[1:]
    return sig.replace(parameters=params), f is not fn


def _generic(sig: inspect.Signature) -> bool:
    """A signature of (*args, **kwargs) only: a generic wrapper's."""
    return [p.kind for p in sig.parameters.values()] == [inspect.Parameter.VAR_POSITIONAL,
                                                          inspect.Parameter.VAR_KEYWORD]


def _signature(fn: Callable) -> inspect.Signature:
    """_wrapped_signature's signature."""
    return _wrapped_signature(fn)[0]


class _StubDefault:
    """A default value as _call_error's stub writes it: the name of a global of the stub's."""

    def __repr__(self) -> str:
        return "__fusejit_default"


def _call_error(sig: inspect.Signature, fn: Any, args: tuple, kwargs: dict, wrapped: Any = None) -> str | None:
    """Python's own message for a call that does not bind to `sig` ("f() got an unexpected keyword
    argument 'q'", where Signature.bind says a required argument is missing first), from calling a
    stub of that signature named as `fn`; None where the stub cannot be made or takes the call.
    `wrapped`, a functools.partial: its function's message for the call with its arguments."""
    if isinstance(wrapped, functools.partial):
        try:
            inner = _signature(wrapped.func)
        except (TypeError, ValueError):
            return None
        return _call_error(inner, wrapped.func, wrapped.args + args, {**wrapped.keywords, **kwargs}, wrapped.func)
    params = [p.replace(annotation=p.empty, default=p.empty if p.default is p.empty else _StubDefault())
              for p in sig.parameters.values()]
    text = str(sig.replace(parameters=params, return_annotation=inspect.Signature.empty))
    namespace: dict = {"__fusejit_default": None}
    if not hasattr(fn, "__name__"):  # a callable object (within a partial): its __call__, as Python names it
        fn = getattr(type(fn), "__call__", type(fn))
    # Named as fn where it can be (Python 3.9's messages take the code's name, later ones __qualname__).
    name = fn.__name__ if fn.__name__.isidentifier() and not keyword.iskeyword(fn.__name__) else "stub"
    try:
        exec(f"def {name}{text}: pass", namespace)  # noqa: S102: parameter names and "=" only
    except SyntaxError:
        return None
    stub = namespace[name]
    stub.__name__, stub.__qualname__ = fn.__name__, fn.__qualname__
    try:
        stub(*args, **kwargs)
    except TypeError as e:
        return str(e)
    return None


class _Entry:
    """One traced pattern: its program, input order and how results map back to the function's."""

    def __init__(self, program: Any, kind: Any, keys: list, sources: list):
        self.program = program
        self.kind = kind          # Value (one result), tuple, list, dict or None (updates in place only)
        self.keys = keys          # dict keys, in order (dict results)
        self.sources = sources    # per result: an output name, or the index of an argument returned as is
        # Its trace raised no fusejit error (one caught, `try: x + y except: ...`, may be a broadcast
        # that other sizes pass), so it may serve patterns with more sizes equal (_served).
        self.servable = True
        self.used = False  # called since the last drop passed it over (_drop_one)
        # (array index, output name) of each array argument the function updated in place (p -= ...):
        # the output is written into the argument, in place while its program allows it (_run).
        self.write_back: list = []
        self.in_place_refusals = 0  # calls whose program refused the update in place (_run)
        self.arg_names: list = []  # the array arguments' names, as the code writes them, where write_back is
        self.item_set: list = []  # the array arguments assigned with v[...] = x (_refuse_scalar_item_set)
        self.param_inputs: dict = {}  # input name -> the parameter it is (not an attribute or element of one)

    def results(self, outs: dict, arrays: list) -> Any:
        vals = [_scalar_if_0d(outs[s]) if isinstance(s, str) else
                arrays[s][()] if type(arrays[s]) is ScalarCopy else arrays[s] for s in self.sources]
        if self.kind is Value:
            return vals[0]
        if self.kind is None:  # a function that only updates its arguments in place
            return None
        if self.kind is dict:
            return dict(zip(self.keys, vals))
        return self.kind._make(vals) if hasattr(self.kind, "_make") else self.kind(vals)


class _BoundFused:
    """A fused function bound to an object (a fused method's `obj.method`, or fuse(obj.method)):
    called, or asked for its .program(), with the object as the first argument, which is keyed as
    an argument is (docs/fuse.md, "Objects and methods"); equal to another binding of the same
    function to the same object, as a bound method is; pickled as its object's attribute (a fused
    method's binding unpickles fused; one fuse(obj.method) or fuse(obj) made unpickles as the
    plain method)."""

    __slots__ = ("__func__", "__self__", "__weakref__")

    def __init__(self, fused: Fused, obj: Any):
        self.__func__, self.__self__ = fused, obj

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        return self.__func__._invoke((self.__self__, *args), kwargs, 4)

    def program(self, /, *args: Any, **kwargs: Any) -> Any:
        """Fused.program with the object as the first argument."""
        return self.__func__._program((self.__self__, *args), kwargs, 4)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__func__, name)

    @property
    def __doc__(self) -> str | None:  # type: ignore[override]  # help(obj.method): the method's
        return self.__func__.__doc__

    @property
    def __signature__(self) -> inspect.Signature:
        """The function's signature without its first parameter (the object)."""
        sig = self.__func__._sig
        return sig.replace(parameters=list(sig.parameters.values())[1:])

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, _BoundFused) and other.__func__ is self.__func__ and other.__self__ is self.__self__

    def __hash__(self) -> int:
        return hash((id(self.__func__), id(self.__self__)))

    def __reduce__(self) -> tuple:
        return (getattr, (self.__self__, self.__func__._attribute_name))

    def __repr__(self) -> str:
        return f"<bound fusejit.fuse {self.__func__.__qualname__} of {self.__self__!r}>"


class Fused:
    """A function compiled by :func:`fuse`: call it as the function; it traces and compiles once per
    argument pattern (module docstring) and then calls the program, passing its arrays through
    (NumPy in, NumPy out; PyTorch and CuPy tensors on their device and the caller's stream).
    Called with traced values (from another fused function's trace) it runs as the plain Python
    function, so its ops join the caller's graph. Thread-safe. As a class attribute it is a fused
    method: ``obj.method`` binds obj as its first argument (_BoundFused)."""

    _fuse_by_identity = True  # as an attribute of a fused method's object: its traces are no part of its value

    def __init__(self, fn: Callable, dynamic: bool, options: dict):
        functools.update_wrapper(self, fn)
        for attr in ("__name__", "__qualname__"):  # a functools.partial or a callable object has none
            if not hasattr(self, attr):
                setattr(self, attr, type(fn).__name__)
        self._fn = fn
        self._attribute_name = getattr(fn, "__name__", "")
        try:
            sig, followed = _wrapped_signature(fn)
        except ValueError as e:  # NumPy 2's np.sum, np.clip: builtin dispatchers with no signature
            raise TypeError(f"fuse: {e}: fusejit traces a Python function; wrap it in one, e.g. "
                            "fusejit.fuse(lambda x: np.sum(x, axis=-1))") from None
        self._use_signature(sig, followed)
        self._dynamic = dynamic
        self._options = options
        self._entries: collections.OrderedDict = collections.OrderedDict()  # move_to_end: one C call
        # Entries by a call's exact arguments (_exact_key): a positional call of NumPy arrays and
        # plain scalars seen before skips keying (1.5 to 4.4 us of 7 to 15 at 1 to 8 arrays, measured
        # 2026-12-07); cleared whenever an entry goes or the keys change (_drop_one, _trace).
        self._exact: dict = {}
        self._traces = 0
        self._specialised_by_shape = False
        self._float_values: dict = {}  # (pattern without one float argument's value, its tag) -> values seen
        self._said_identity: set = set()  # tags of object arguments warned of as keyed by identity
        self._last_key: tuple | None = None  # the pattern traced last (the eighth trace's warning names a change)

    def _use_signature(self, sig: inspect.Signature, followed: bool) -> None:
        """Binds calls with `sig` (_wrapped_signature; `followed`: a wrapped function's), and what
        the fast binding (_items) needs of it."""
        self._sig = sig
        # A generic wrapper's (*args, **kwargs) bound with the wrapped function's signature: keyed
        # and traced with the caller's arguments only (given the wrapped function's defaults too,
        # it could not tell an argument left out: a wrapper supplying one gave a wrong value). Not
        # sig == its own: == compares defaults, an array's elementwise.
        self._call_defaults = not followed
        params = list(sig.parameters.values())
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        # Every parameter positional: a call giving each positionally, or leaving trailing ones to
        # their defaults, skips Signature.bind (~5 µs).
        self._tags = [(p.name,) for p in params] if all(p.kind in positional for p in params) else None
        self._defaults = tuple(p.default for p in params)
        # Where a keyword argument goes in a call binding by _tags (absent: Signature.bind binds it).
        self._keyword_at = {p.name: k for k, p in enumerate(params) if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD}
        self._min_args = max((k + 1 for k, p in enumerate(params) if p.default is inspect.Parameter.empty), default=0)

    def __set_name__(self, owner: type, name: str) -> None:
        """The class attribute it is (a bound one pickles as that attribute of its object)."""
        self._attribute_name = name

    def __reduce__(self) -> str:
        """Pickled by reference, as the function it wraps (a module-level fused function in a child
        process started with "spawn"): the name it is found under in its module."""
        return self.__qualname__

    traces = property(lambda self: self._traces,
                      doc="How many times the function has been traced (once per new argument pattern).")

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        return self._invoke(args, kwargs, 4)

    def _invoke(self, args: tuple, kwargs: dict, stacklevel: int) -> Any:
        """A call; `stacklevel` of its warnings: the caller's frame."""
        entry, arrays = self._lookup(args, kwargs, stacklevel)
        if entry is None:  # traced values: inside another fused function's trace
            return self._fn(*args, **kwargs)
        targets = [t for t in entry.write_back if _updates_in_place(arrays[t[0]])] if entry.write_back else None
        if entry.item_set:
            _refuse_scalar_item_set(entry.item_set, arrays)
        if targets:  # before the launch, and raised as they are (_locate_by_trace would trace again)
            self._check_updatable(entry, targets, arrays)
        try:
            outs = self._run(entry, targets, arrays) if targets else entry.program(*arrays)
        except UserError as e:
            if not e.line:
                self._locate_by_trace(args, kwargs, e)
            raise
        if entry.write_back and len(targets) < len(entry.write_back):
            arrays = _with_new_values(arrays, entry.write_back, targets, outs)
        return entry.results(outs, arrays)

    def _lookup(self, args: tuple, kwargs: dict, stacklevel: int) -> tuple[_Entry | None, list]:
        """The call's entry and arrays: by its exact arguments where it has been called so before
        (_exact_key), else _entry's (None inside another fused function's trace)."""
        exact = _exact_key(args) if not kwargs and self._tags is not None and len(args) == len(self._tags) else None
        entry = self._exact.get(exact) if exact is not None else None
        if entry is not None:
            entry.used = True
            return entry, [a for a in args if type(a) is np.ndarray]  # what _key gives for such a call
        entry, arrays = self._entry(args, kwargs, stacklevel + 1)  # one frame deeper than _invoke
        if entry is not None and exact is not None:
            self._remember_exact(exact, entry)
        return entry, arrays

    def _remember_exact(self, exact: tuple, entry: _Entry) -> None:
        """Keeps `entry` for calls of the arguments `exact` (NumPy arrays and plain scalars). Without
        _TRACE_LOCK, which another function's compile may hold for seconds (a reviewer's find: a warm
        call at a new size waited 440 ms): an entry dropped meanwhile stays a valid program for these
        arguments, kept alive until the memo is next cleared (at most 4 * _MAX_ENTRIES keys)."""
        if len(self._exact) >= 4 * _MAX_ENTRIES:
            self._exact.clear()
        self._exact[exact] = entry

    def _run(self, entry: _Entry, targets: list, arrays: list) -> dict:
        """A call of a program that updates arguments (`targets`: entry.write_back's whose arrays
        change in place, _updates_in_place): each such output written over its argument, in place
        (the launch reads every element before it writes it); where the program refuses that (its
        plan reads the argument after writing it, a GPU program's strided host array), into a new
        array copied into the argument. After _MAX_IN_PLACE_REFUSALS refusals the entry copies from
        then on (its plan's, most likely)."""
        if entry.in_place_refusals < _MAX_IN_PLACE_REFUSALS:
            try:
                return entry.program(*arrays, out={name: arrays[i] for i, name in targets})
            except UserError:
                outs = entry.program(*arrays)  # raises the call's own error, if it is not in place's
                entry.in_place_refusals += 1
        else:
            outs = entry.program(*arrays)
        for i, name in targets:
            arrays[i][...] = outs[name]
        return outs

    def _check_updatable(self, entry: _Entry, targets: list, arrays: list) -> None:
        """NumPy's ValueError for a read-only array argument the function updates in place, and a
        UserError when one shares memory with another array argument: NumPy would see the update
        through the other (f(p, p): `a += 1; return b` gives p + 1), the traced program reads it as
        it was. Before any kernel runs, so a refused call changes nothing."""
        for i, _ in targets:
            a = arrays[i]
            if isinstance(a, np.ndarray) and not a.flags.writeable:
                raise ValueError(f"fuse: '{self.__name__}' updates its argument '{entry.arg_names[i]}' in place, but "
                                 "it is read-only (NumPy's error: output array is read-only)")
        for i, _ in targets:
            for j, b in enumerate(arrays):
                how = _sharing(arrays[i], b) if j != i else None
                if how:
                    raise UserError(f"fuse: '{self.__name__}' updates its argument '{entry.arg_names[i]}' in place, "
                                    f"and its argument '{entry.arg_names[j]}' {how} with it: NumPy would see the update "
                                    "through that one, a fused function reads it as it was; pass separate arrays")

    def _locate_by_trace(self, args: tuple, kwargs: dict, error: UserError) -> None:
        """A program refused a call at sizes its trace took (an amax over an axis that is empty
        now): traces again at the call's own sizes (compiling nothing) and raises that trace's
        error instead, which names the line of the function that built the op; returns when it
        raises none."""
        with _TRACE_LOCK:
            try:
                # Lifted, as _entry's: an object argument's arrays are stand-ins (a trace on the arrays
                # themselves ran their in-place operators on the caller's data: a hostile tester's find).
                self._trace_once(self._bind(args, kwargs, self._call_defaults), lifted(self._items(args, kwargs)),
                                 static=True, with_program=False)
            except UserError as e:
                if e.line:
                    raise e from error
            except Exception:  # noqa: BLE001: the program's own error is the one to raise then
                pass

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        """A fused method: bound to `obj`, an argument keyed by its attributes' values
        (_pattern.constant_key: objects alike share a trace; a changed attribute traces again)."""
        return self if obj is None else _BoundFused(self, obj)

    def program(self, /, *args: Any, **kwargs: Any) -> Any:
        """The :class:`fusejit.Program` these arguments run (traced and compiled if new): its
        ``cuda_source()``, ``plan_text``, ``kernels``; call it with the arrays in argument order
        (an object argument's array attributes after it, ``prog.graph.inputs`` names them; one left
        out takes the function's default, as a call of the function) to
        pass ``out=``, ``stream=`` or ``plan="unfused"``; an argument the function updates in place
        is its output ``NAME_updated`` there (pass ``out={"p_updated": p}`` to update it). One
        program serves every size of its pattern: its ``plan_text`` shows the sizes of the call
        that traced it."""
        return self._program(args, kwargs, 4)

    def _program(self, args: tuple, kwargs: dict, stacklevel: int) -> Any:
        """program(); `stacklevel` of its warnings: the caller's frame."""
        entry = self._entry(args, kwargs, stacklevel)[0]
        if entry is None:
            raise UserError(f"fuse: '{self.__name__}'.program() takes arrays, not traced values")
        entry.program._traced_by = self.__name__
        # A Program call writes no argument (a new user's find: an SGD step through it that silently
        # did not train): the Program warns when a call leaves them out of `out` (Program.__call__).
        entry.program._updates = tuple((name, entry.arg_names[i]) for i, name in entry.write_back)
        # An array default (eps=np.float32(1e-6)) is an input: a Program call may leave it out, as a
        # call of the function may (a new user's find: f.program(x)(x) said "missing input(s): eps").
        entry.program._defaults = self._array_defaults(entry)
        return entry.program

    def _array_defaults(self, entry: _Entry) -> dict:
        """input name -> the default of the parameter the input stands for (entry.param_inputs: its
        own, not an attribute's or an element's), where that default is an array of the input's
        dtype and rank (sizes the program's pattern refuses get the call's error, as a given array's).
        Any other (None, a float: no input of a call that leaves it out; another dtype: another
        pattern) stays a missing input; a generic wrapper's defaults are none of its function's."""
        from . import numpy_dtype

        if not self._call_defaults:  # a generic wrapper's (*args, **kwargs): its own defaults are not its function's
            return {}
        out = {}
        for t in entry.program.graph.inputs:
            pname = entry.param_inputs.get(t.name)
            d = self._sig.parameters[pname].default if pname is not None else None
            if isinstance(d, (np.ndarray, np.generic)) and d.ndim == len(t.shape):
                try:
                    if d.dtype == numpy_dtype(t.dtype):
                        out[t.name] = d
                except UserError:  # bf16 without ml_dtypes: no such default
                    pass
        return out

    def _bind(self, args: tuple, kwargs: dict, defaults: bool = True) -> inspect.BoundArguments:
        """The call bound to the signature, with its defaults unless `defaults` is False."""
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as e:
            # A Program call's keywords, where the function has no such parameter.
            call = [k for k in ("out", "stream", "plan") if k in kwargs and k not in self._sig.parameters]
            if not call:
                raise TypeError(_call_error(self._sig, self, args, kwargs, self._fn) or f"{self.__name__}(): {e}") from e
            raise TypeError(f"{self.__name__}(): {call[0]}= is not an argument of the fused function; a Program "
                            f"call takes it: {self.__name__}.program(*args)(*args, {call[0]}=...), whose "
                            f"outputs prog.graph.outputs names (docs/python.md, 'Fusing a Python "
                            "function')") from e
        if defaults:
            bound.apply_defaults()
        return bound

    def _flat(self, bound: inspect.BoundArguments) -> list:
        """(tag, value) of every argument, *args and **kwargs spread (_tag_name)."""
        items = []
        for pname, v in bound.arguments.items():
            kind = self._sig.parameters[pname].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                items += [((pname, k), x) for k, x in enumerate(v)]
            elif kind is inspect.Parameter.VAR_KEYWORD:
                items += [((pname, k), x) for k, x in v.items()]
            else:
                items.append(((pname,), v))
        return items

    def _key(self, items: list, static: bool) -> tuple[tuple, list]:
        """The pattern of the arguments (module docstring) and the arrays among them, in order;
        (None, None) when an argument is a traced value."""
        parts, arrays, classes, keying = [], [], {}, Keying()
        for tag, v in items:
            t = type(v)
            if t is np.ndarray:  # the common case first: a tuple of ints, a hashable dtype
                shape = v.shape
            elif t in _PLAIN_SCALARS:  # then a number: no array, no object (constant_key's first case)
                parts.append((tag, scalar_key(v)))
                continue
            else:
                a = None if type(v) is Snapshot else as_array(v)  # a Snapshot: an object argument (lifted)
                if a is None:
                    if isinstance(v, Value):
                        return None, None
                    part = self._constant(tag, v, keying)
                    if part is None:  # an object holding a traced value: inside another trace
                        return None, None
                    parts.append((tag, part))
                    continue
                v = a
                shape = tuple(int(s) for s in v.shape)
            if not static:
                shape = tuple([-1 if s == 1 else classes.setdefault(s, len(classes)) for s in shape])
            dt = v.dtype
            try:
                name = DTYPE_NAMES.get(dt) or dtype_name(dt)
            except UserError as e:
                raise UserError(f"{self.__name__}: argument '{tag_name(tag)}': {e.message}") from None
            parts.append((tag, name, shape))
            arrays.append(v)
        return (static, tuple(parts)), arrays

    def _constant(self, tag: tuple, v: Any, keying: Keying) -> Any:
        """constant_key of an argument, its errors naming it; None for one holding a traced value
        inside a trace (the call joins that trace)."""
        try:
            return constant_key(v, keying)
        except Traced:
            if _TRACE.active:
                return None
            raise UserError(f"fuse: '{self.__name__}': argument '{tag_name(tag)}' holds a value of a finished trace "
                            "(a fusejit.Value stored in it while a fused function was traced); store arrays in it, "
                            "not traced values") from None
        except UserError as e:  # a tuple too large to key
            raise UserError(f"{self.__name__}: argument '{tag_name(tag)}' ({type(v).__name__}) {e.message}") from None
        except (TypeError, ValueError):  # ValueError: a writable memoryview will not hash
            buffer = isinstance(v, (memoryview, bytearray)) or type(v).__name__ == "array"
            raise TypeError(f"{self.__name__}: argument '{tag_name(tag)}' ({type(v).__name__}) is neither an "
                            "array nor a hashable constant (a number, str, tuple, None)" +
                            ("; pass np.asarray(...) of it (no copy)" if buffer else "")) from None

    def _entry(self, args: tuple, kwargs: dict, stacklevel: int) -> tuple[_Entry | None, list]:
        items = lifted(self._items(args, kwargs))
        key, arrays = self._key(items, not self._dynamic)
        if key is None:
            return None, []
        entry = self._entries.get(key)
        if entry is not None:
            entry.used = True  # a second call (a first one's entry is new: last in the order)
        else:
            said: list = []
            try:
                waits = _await_trace(self.__name__)
                with _TRACE_LOCK:
                    if waits:
                        _TRACE_WAITERS.pop(threading.get_ident(), None)
                    key, arrays = self._key(items, not self._dynamic)  # _dynamic may have changed meanwhile
                    entry = self._entries.get(key) or self._new_entry(args, kwargs, items, key, said)
            finally:  # an interrupted wait's too, wherever the interrupt came
                _TRACE_WAITERS.pop(threading.get_ident(), None)
            for message in said:  # once the entry is kept: a warning raised as an error loses no trace
                warnings.warn(message, FusejitWarning, stacklevel=stacklevel)
        return entry, arrays

    def _items(self, args: tuple, kwargs: dict) -> list:
        """(tag, value) of every parameter of a call (_flat), the common forms without
        Signature.bind."""
        tags = self._tags
        if tags is not None and not kwargs and len(args) == len(tags):  # the common call first
            return list(zip(tags, args))
        if not self._call_defaults:  # a generic wrapper: keyed by the arguments it is called with (it may
            return self._flat(self._bind(args, kwargs, False))  # treat f(x) and f(x, 1.0) apart)
        if tags is not None and not kwargs and self._min_args <= len(args) < len(tags):
            return list(zip(tags, args + self._defaults[len(args):]))
        if tags is not None and (values := self._by_keyword(args, kwargs)) is not None:
            return list(zip(tags, values))
        return self._flat(self._bind(args, kwargs))

    def _new_entry(self, args: tuple, kwargs: dict, items: list, key: tuple, said: list) -> _Entry:
        """The entry of a pattern met for the first time (under _TRACE_LOCK): a program that serves
        it, else a new trace; kept (one dropped beyond _MAX_ENTRIES: _drop_one) unless the trace says
        not to."""
        entry = self._served(key)
        if entry is None:
            key, entry = self._trace(self._bind(args, kwargs, self._call_defaults), items, key, said)
        if key is not None:
            if len(self._entries) >= _MAX_ENTRIES:
                self._drop_one()
            self._entries[key] = entry
        return entry

    def _drop_one(self) -> None:
        """Drops the oldest pattern not called since the last drop passed it over, which moved the
        called ones to the end (second chance, an approximation of least recently used whose call
        path costs one attribute store): a serving loop's hot pattern is not traced again every 64
        new ones, as dropping the oldest traced did. Under _TRACE_LOCK."""
        self._exact.clear()  # it may hold the entry dropped
        kept: set = set()  # entries this pass found called: each of their keys is kept
        for _ in range(len(self._entries)):
            key = next(iter(self._entries))
            entry = self._entries[key]
            if not entry.used and id(entry) not in kept:
                del self._entries[key]
                return
            entry.used = False
            kept.add(id(entry))
            self._entries.move_to_end(key)  # never missing meanwhile: calls read it without the lock
        del self._entries[next(iter(self._entries))]  # every one was called: the first in order now

    def _served(self, key: tuple) -> _Entry | None:
        """A traced program that runs this new pattern (_pattern.serves: sizes that were distinct
        when traced are equal now), the last in the store's order (traced latest, or passed over by
        a drop as called since), kept under its key too; None when there is none. One entry kept
        under several keys shares one `used` flag: a call by either key keeps both (_drop_one)."""
        for traced in reversed(list(self._entries)):
            if serves(traced, key) and self._entries[traced].servable:
                return self._entries[traced]
        return None

    def _by_keyword(self, args: tuple, kwargs: dict) -> list | None:
        """Every parameter's value in a call whose keyword arguments each name a parameter after the
        positional ones, as Signature.bind binds them (~5 µs); None for any other call (bind then
        binds it or says why not)."""
        if len(args) > len(self._defaults):
            return None
        values = list(args) + [_UNBOUND] * (len(self._defaults) - len(args))
        for name, v in kwargs.items():
            k = self._keyword_at.get(name, -1)
            if k < len(args):  # unknown, positional-only, or given twice
                return None
            values[k] = v
        for k, v in enumerate(values):
            if v is _UNBOUND:
                if self._defaults[k] is inspect.Parameter.empty:
                    return None
                values[k] = self._defaults[k]
        return values

    def _trace(self, bound: inspect.BoundArguments, items: list, key: tuple, said: list) -> tuple[tuple, _Entry]:
        """Traces the function for this pattern (again with every size fixed if it reads a shape);
        returns the key to keep the entry under (None: not to keep it, an object argument changed
        meanwhile, by the trace or another thread), and the entry; appends its warnings to `said`."""
        entry, read_shape = self._trace_once(bound, items, static=key[0])
        if read_shape and not key[0]:
            self._dynamic = False  # every later pattern is specialised too
            self._exact.clear()  # entries kept under the dynamic keys: their calls are keyed again
            self._specialised_by_shape = True
            key, _ = self._key(items, True)
            entry, _ = self._trace_once(bound, items, static=True)
            said.append(f"fuse: '{self.__name__}' read a value's .shape while traced: it is now specialised on "
                        "every size, so each new size traces and compiles again (a decode loop would compile "
                        "every step); compute from the values instead, e.g. x.mean(-1) rather than "
                        "x.sum(-1) / x.shape[-1], or pass dynamic=False to say so")
        self._traces += 1
        said += self._changing_floats(key) + self._identity_objects(key)
        changed, self._last_key = pattern_difference(self._last_key, key), key
        if any(type(v) is Snapshot and _changed(v) for _, v in items):
            key = None
        if self._traces == _TRACE_WARNING_AT:
            why = ("each new size traces and compiles again, since it reads a value's .shape"
                   if self._specialised_by_shape else
                   "each new pattern of argument dtypes, ranks, sizes of 1, equal sizes, Python scalar values and "
                   "attribute values of object arguments such as a method's self traces and compiles again; pass a "
                   "scalar that changes from call to call as a 0-d array to make it an input (np.float32(lr) as an "
                   "argument, np.array(lr, np.float32) as an attribute), and keep an attribute that changes every "
                   "call (a step counter) off such an object")
            if changed and not self._specialised_by_shape:
                why += f"; the last trace's pattern differs from the one before in {changed}"
            said.append(f"fuse: '{self.__name__}' has been traced {self._traces} times ({why})")
        return key, entry

    def _identity_objects(self, key: tuple) -> list:
        """A warning, once per argument, for an object argument keyed by identity (_object_key)."""
        said = []
        for part in key[1]:
            k = part[1] if len(part) == 2 else None
            if isinstance(k, tuple) and len(k) == 3 and k[2] is IDENTITY and part[0] not in self._said_identity:
                self._said_identity.add(part[0])
                said.append(f"fuse: '{self.__name__}': argument '{tag_name(part[0])}' ({k[0].__name__}) is keyed "
                            f"by identity (its class has a C base, or it holds more than {STATE_LEAVES} values or "
                            f"objects and containers nested more than {STATE_DEPTH} deep): a change of its "
                            "attributes after its trace is not seen (pass what changes as arguments)")
        return said

    def _changing_floats(self, key: tuple) -> list:
        """Warnings for the float and int arguments that have now been traced at
        _FLOAT_VALUES_WARNING_AT distinct values with the rest of the pattern alike but those
        arguments' values (each argument warned of once). Ints too: a step counter (Adam's t) is the
        most common scalar that changes every call (a new user's find: it compiled 7 times silently)."""
        said = []
        static, parts = key
        # (tag, (float, hex)) or (tag, (int, value)): a Python float or int (not a bool)
        is_float = [len(p) == 2 and type(p[1]) is tuple and p[1][0] in (float, int) for p in parts]
        masked = (static, tuple((p[0], p[1][0]) if f else p for p, f in zip(parts, is_float)))
        if len(self._float_values) > _MAX_ENTRIES:
            self._float_values.clear()  # bounded as the programs are (its keys hold constants alive)
        for part, f in zip(parts, is_float):
            if not f:
                continue
            seen = self._float_values.setdefault((masked, part[0]), set())
            if len(seen) >= _FLOAT_VALUES_WARNING_AT:
                continue  # said already
            seen.add(part[1][1])
            if len(seen) == _FLOAT_VALUES_WARNING_AT:
                name, kind = tag_name(part[0]), part[1][0].__name__
                zero_d = f"np.float32({name})" if kind == "float" else f"np.int64({name})"
                # An int may be an axis, a size or a count, which no array can be (a reviewer's find).
                operand = "" if kind == "float" else " and it is an operand of arithmetic (not an axis, size or count)"
                said.append(f"fuse: '{self.__name__}' has traced and compiled a new program for each of "
                            f"{len(seen)} values of its argument '{name}' (a Python {kind} is a constant of the "
                            f"trace); if it changes from call to call{operand}, pass it as a 0-d array, e.g. "
                            f"{zero_d}, to make it an input of one program (it computes in the dtype "
                            "of the arrays it meets, as a PyTorch 0-d tensor does: np.float64 with f32 arrays "
                            "is cast to f32)")
        return said

    def _trace_once(self, bound: inspect.BoundArguments, items: list, static: bool,
                    with_program: bool = True) -> tuple[_Entry, bool]:
        """One trace and compile (`with_program` False: the graph only, the entry without a program);
        also whether the function read a shape meanwhile."""
        name = self.__name__ if self.__name__.isascii() and self.__name__.isidentifier() else "fused"
        b = _TraceBuilder(name, self.__name__)
        try:
            return self._traced(b, bound, items, static, with_program)
        except BaseException:
            b._ended = True  # built or not, its values are spent: one kept from it says so (_TraceBuilder)
            raise

    def _traced(self, b: _TraceBuilder, bound: inspect.BoundArguments, items: list, static: bool,
                with_program: bool) -> tuple[_Entry, bool]:
        """_trace_once's trace on its builder `b`."""
        code = self._code()
        if code is not None and _locatable(code.co_filename):  # the graph's file, whatever file builds the first op
            b._set_location(code.co_filename, code.co_firstlineno)
        stand_ins, inputs, taken, names = self._inputs(b, items, static)
        call = inspect.BoundArguments(self._sig, bound.arguments.copy())
        for pname in call.arguments:
            call.arguments[pname] = self._replace(pname, call.arguments[pname], stand_ins)
        outer = _TRACE.shape_read, _TRACE.item_set  # a trace inside another's (a fused call on arrays): restored after it
        _TRACE.shape_read, _TRACE.item_set = False, []
        _TRACE.active += 1
        errors = errors_made()
        local_names = _LocalNames(code)
        holder = _TRACE_HOLDER[:]  # a trace inside another's: the outer's, back after it
        _TRACE_HOLDER[:] = [self.__name__, threading.current_thread().name, time.monotonic()]
        try:
            with local_names:
                result = self._fn(*call.args, **call.kwargs)
        except Error as e:
            e._locate_in_caller()  # the line of the traced function that built the op
            raise
        except TypeError as e:
            self._explain_array_operand(e, items)
            raise
        finally:
            _TRACE_HOLDER[:] = holder[:2] + [time.monotonic()]  # the outer's code again, since now
            _TRACE.active -= 1
            read_shape, item_set = _TRACE.shape_read, _TRACE.item_set
            _TRACE.shape_read, _TRACE.item_set = outer  # this trace's reads are its own graph's, not the outer trace's
        self._check_untouched(items)
        self._check_copies_untouched(items, stand_ins)
        entry = self._entry_of(b, result, items, inputs, names, taken)
        entry.item_set = [i for i, v in enumerate(inputs) if any(v is w for w in item_set)]
        entry.servable = errors_made() == errors
        local_names.apply(b, taken)
        from . import compile as fj_compile
        graph = b.build()
        holder = _TRACE_HOLDER[:]
        _TRACE_HOLDER[:] = ["", "", 0.0]  # a compile, no traced code: it ends (_watch_trace_waits waits on quietly)
        try:
            entry.program = fj_compile(graph, **self._options) if with_program else None
        finally:
            _TRACE_HOLDER[:] = holder[:2] + [time.monotonic()]  # an outer trace's code again, since now
        return entry, read_shape

    def _entry_of(self, b: Any, result: Any, items: list, inputs: list, names: list, taken: set) -> _Entry:
        """The entry of a trace's result: its outputs, and one more per array argument it updated in
        place (`p -= ...`: written back at each call, _run)."""
        # Every one: a NumPy scalar's update goes into the 0-d copy a call makes of it, whose new value
        # a result that returns it gives, as NumPy's `s *= 2` rebinds s (a pattern that a 0-d array
        # shares with it is updated in place: decided per call, a reviewer's find).
        updated = [i for i, v in enumerate(inputs) if v._updated]
        try:
            entry = self._outputs(b, result, inputs, taken, updated)
        except UserError as e:  # what it returned: located at its first line (the return is past)
            raise self._at_definition(e) from None
        for i in updated:
            entry.write_back.append((i, _graph_name(f"{names[i][0]}_updated", f"arg{i}_updated", taken)))
            b.output(entry.write_back[-1][1], inputs[i])
        entry.arg_names = [tag_expression(tag) for _, tag in names] if updated else []
        entry.param_inputs = {name: tag[0] for name, tag in names if len(tag) == 1}
        return entry

    @staticmethod
    def _explain_array_operand(e: TypeError, items: list) -> None:
        """A trace's TypeError for an ndarray operand, where an object argument holds arrays that are
        not inputs (a dtype fusejit lacks, a class with __del__: docs/fuse.md): raises one naming them
        (it said only to pass the array as an argument); returns otherwise."""
        if "got ndarray" not in str(e):
            return
        notes = [f"{tag_name(v.tag)}.{n}" for _, v in items if type(v) is Snapshot for n in arrays_not_inputs(v)]
        if notes:
            raise TypeError(f"{e}; if the array is an attribute of an object argument, these are no inputs (their "
                            f"arrays reach ops as they are): {', '.join(notes)}") from e

    def _inputs(self, b: Any, items: list, static: bool) -> tuple[dict, list, set, list]:
        """A GraphBuilder input per array argument, its sizes as dims (one per class of equal sizes
        other than 1) or, when static, as they are; returns {tag: Value}, the inputs and the names
        the graph has taken and each input's (graph name, tag). An object argument's input attributes (lifted) are inputs too (a trace
        need not read them all), and the trace sees a copy of it holding them (trace_copies)."""
        taken, dims, stand_ins, inputs = set(), {}, {}, []
        arrays = [(tag, a) for tag, v in items if (a := as_array(v)) is not None]
        gnames = [_graph_name(tag_name(t), f"arg{k}", taken) for k, (t, _) in enumerate(arrays)]  # dims after
        for gname, (tag, v) in zip(gnames, arrays):
            shape = []
            for axis, s in enumerate(int(s) for s in v.shape):
                if static or s == 1:
                    shape.append(s)
                    continue
                if s not in dims:
                    dims[s] = b.dim(_graph_name(f"{gname}_{axis}", "", taken), s)
                shape.append(dims[s])
            stand_ins[tag] = b.input(gname, dtype_name(v.dtype), shape)
            inputs.append(stand_ins[tag])
            # No unused-input warning: an argument a call leaves unused (an optional mask) is plain
            # Python, and the warning came from the build inside the trace, past fuse's own warnings
            # (under warnings-as-errors every call traced again and raised: a hostile tester's find).
            b.allow_unused(stand_ins[tag])
        stand_ins[_COPIES] = trace_copies(items, stand_ins)
        return stand_ins, inputs, taken, [(gname, tag) for gname, (tag, _) in zip(gnames, arrays)]

    def _replace(self, pname: str, v: Any, stand_ins: dict) -> Any:
        """The argument `pname` as the function sees it while traced: arrays become their Values,
        objects with input attributes their copies (swap_copies)."""
        kind, copies = self._sig.parameters[pname].kind, stand_ins[_COPIES]
        if kind is inspect.Parameter.VAR_POSITIONAL:
            return tuple(stand_ins.get((pname, k), swap_copies(x, copies)) for k, x in enumerate(v))
        if kind is inspect.Parameter.VAR_KEYWORD:
            return {k: stand_ins.get((pname, k), swap_copies(x, copies)) for k, x in v.items()}
        return stand_ins.get((pname,), swap_copies(v, copies))

    def _check_untouched(self, items: list) -> None:
        """A UserError when the trace stored a traced value in an object argument (`self.cache[k] =
        v * 2`): it would hold a value of a finished graph. An attribute it rebound is given back
        its value first (a nested change cannot be undone)."""
        for tag, v in items:
            now = state_of(v.obj) if type(v) is Snapshot else {}
            name = traced_attribute(now)
            if not name:
                continue
            if name in v.state and now[name] is not v.state[name]:
                object.__setattr__(v.obj, name, v.state[name])
            elif name not in v.state:
                object.__delattr__(v.obj, name)
            raise UserError(f"fuse: '{self.__name__}' stored a traced value in its argument '{tag_name(tag)}' "
                            f"(its attribute '{name}'): a fused function runs once per pattern, so its changes to "
                            "its arguments happen once, at the trace; return the value instead")

    def _check_copies_untouched(self, items: list, stand_ins: dict) -> None:
        """A UserError when the trace rebound an attribute of an object argument's copy (the object
        the trace sees: trace_copies), `opt.w = opt.w - lr * g` or `opt.t += 1`, or stored a traced
        value in it: the caller's object would keep its old value, silently (a reviewer's find)."""
        copies = stand_ins[_COPIES]
        for tag, v in items:
            c = copies.get(id(v.obj)) if type(v) is Snapshot else None
            if c is None:
                continue
            given = {n: stand_ins[v.tag + (Attr(v.inputs[n]),)] if n in v.inputs else e for n, e in v.state.items()}
            now = state_of(c)
            for n in dict.fromkeys([*given, *now]):
                # An input, or a scalar or array it had, rebound (`self.t += 1` too: a hostile tester's
                # find), or a value stored (an object or container attribute is the copy's own: swapped).
                rebound = n in v.inputs or n in given and _plain(now.get(n))
                if now.get(n, given) is not given.get(n, given) and (rebound or isinstance(now.get(n), Value)):
                    name = f"{tag_expression(tag)}.{n}"
                    fix = f"Update the array in place ({name} -= ...), or return" if n in v.inputs else "Return"
                    verb = "deletes" if n not in now else "assigns"
                    raise UserError(f"fuse: '{self.__name__}' {verb} its argument's attribute '{name}': a fused "
                                    "function runs once per pattern, on a copy of the object, and writes only the "
                                    "arrays it returns or updates in place; the caller's object would keep its old "
                                    f"value. {fix} the new value and store it after the call ({name} = "
                                    f"{self.__name__}(...))")

    def _code(self) -> Any:
        """The function's code object (a functools.partial's or functools.wraps wrapper's function's);
        None for a callable object."""
        fn = self._fn
        while isinstance(fn, functools.partial):
            fn = fn.func
        return getattr(inspect.unwrap(fn), "__code__", None)

    def _at_definition(self, e: UserError) -> UserError:
        """`e` located at the function's first line (its decorator's, or its `def`), where it has one
        (a callable object has none)."""
        code = self._code()
        if code is None or e.line:
            return e
        return UserError(e.message, code.co_filename, code.co_firstlineno,
                         diagnostic=f"{code.co_filename}:{code.co_firstlineno}: {e.diagnostic}")

    def _outputs(self, b: Any, result: Any, inputs: list, taken: set, updated: list) -> _Entry:
        """Marks the function's results as outputs: one value, or a tuple, list or dict of them (an
        argument returned, updated in place or not, is the caller's array: `updated` lists those
        the trace updated, each written back by an output of its own)."""
        if isinstance(result, Value):
            kind, keys, values = Value, [], [result]
        elif result is None and updated:  # `p -= lr * g` and no return, as a NumPy update function
            kind, keys, values = None, [], []
        elif isinstance(result, (tuple, list)):  # a namedtuple comes back as its class, other subclasses as tuple or list
            named = isinstance(result, tuple) and hasattr(type(result), "_make") and hasattr(type(result), "_fields")
            kind = type(result) if named else tuple if isinstance(result, tuple) else list
            keys, values = [], list(result)
        elif isinstance(result, dict):
            kind, keys, values = dict, list(result), list(result.values())
        else:
            raise UserError(f"fuse: '{self.__name__}' returned {type(result).__name__}: return a value computed "
                            "from its array arguments, or a tuple, list or dict of such values (or update an array "
                            f"argument in place, p -= ..., and return None){_no_array_hint(inputs)}")
        named: dict = {}
        sources = [self._output(b, k, kind, keys, v, inputs, named, taken, updated) for k, v in enumerate(values)]
        if not named and not updated:
            what = "nothing (an empty " + kind.__name__ + ")" if not values else "only its arguments unchanged"
            raise UserError(f"fuse: '{self.__name__}' computes nothing: it returns {what}")
        return _Entry(None, kind, keys, sources)

    def _output(self, b: Any, k: int, kind: Any, keys: list, v: Any, inputs: list, named: dict, taken: set,
                updated: list) -> Any:
        """One result's source: an output name, or the argument index of an input returned as is."""
        if not isinstance(v, Value):
            where = f"result {keys[k]!r}" if kind is dict else f"result {k}" if kind is not Value else "its result"
            raise UserError(f"fuse: '{self.__name__}' {where} is {type(v).__name__}, not a value computed from "
                            f"its array arguments{_no_array_hint(inputs)}")
        for i, inp in enumerate(inputs):
            if v is inp and (not v._updated or i in updated):
                return i  # the argument itself (updated in place or not), as NumPy returns it
        if id(v) in named:
            return named[id(v)]  # the same value twice: one output
        if kind is dict and not isinstance(keys[k], str):
            raise UserError(f"fuse: '{self.__name__}' returned a dict key {keys[k]!r}: keys are output names")
        want = keys[k] if kind is dict else "out" if kind is Value else f"out{k}"
        out = _graph_name(want, f"out{k}", taken)  # a key that names an input or a dim is renamed in the graph
        b.output(out, v)
        named[id(v)] = out
        return out

    def __repr__(self) -> str:
        return f"<fusejit.fuse of {self.__qualname__}, {self._traces} trace(s)>"


def _with_new_values(arrays: list, write_back: list, targets: list, outs: dict) -> list:
    """`arrays` with each argument updated but not written back (an immutable array) replaced by
    its new value, which a result that returns it gives (its own `-=` rebound the name to it)."""
    arrays = list(arrays)
    for i, name in write_back:
        if (i, name) not in targets:
            arrays[i] = _scalar_if_0d(outs[name])
    return arrays


def _scalar_if_0d(a: Any) -> Any:
    """A new 0-d NumPy array (an output) as the NumPy scalar NumPy's operations give (x.sum(), np.exp
    of a 0-d array, an updated NumPy scalar argument); any other array as it is (PyTorch and CuPy
    give 0-d tensors and arrays)."""
    return a[()] if type(a) is np.ndarray and not a.shape else a


def _refuse_scalar_item_set(item_set: list, arrays: list) -> None:
    """`s[...] = x` on a NumPy scalar argument: NumPy's TypeError (a scalar is immutable), raised
    per call because one trace serves a scalar and a 0-d array alike (a hostile tester's find: it
    ran, and `s` kept its value)."""
    for i in item_set:
        if type(arrays[i]) is ScalarCopy:
            t = type(arrays[i][()])
            raise TypeError(f"'{t.__module__}.{t.__name__}' object does not support item assignment (NumPy's error: "
                            "a NumPy scalar is immutable; pass a 0-d array, np.array(s), to update it in place)")


def _updates_in_place(a: Any) -> bool:
    """Whether `a -= x` changes the array `a` itself (a NumPy array, a PyTorch or CuPy tensor), so
    fuse writes an update of it back; an immutable array's (JAX's) rebinds the name, so its update
    is only returned (a reviewer's find: DLPack wrote into it). NumPy scalars are immutable too."""
    from . import _framework
    fw = _framework(a)
    return fw in ("torch", "cupy") or fw == "numpy" and isinstance(a, np.ndarray) and type(a) is not ScalarCopy


# What an attribute rebound in a trace may become and be caught (_check_copies_untouched).
_REBOUND_TYPES = (int, float, complex, str, bytes, np.generic, np.ndarray, type(None))


def _plain(v: Any, depth: int = 0) -> bool:
    """A value whose rebinding a trace's copy of an object shows as such: a scalar, an array, None
    or a tuple of them (an object or a container holding objects is the copy's own, swapped). A
    tuple nested deeper than STATE_DEPTH counts as one (its rebinding refused, not lost; a
    reviewer's find: 100,000 levels were a RecursionError)."""
    if isinstance(v, _REBOUND_TYPES):
        return True
    return type(v) is tuple and (depth >= STATE_DEPTH or all(_plain(e, depth + 1) for e in v))


_MAX_IN_PLACE_REFUSALS = 3  # Fused._run: refusals of an update in place before an entry stops trying


def _byte_span(a: Any) -> tuple | None:
    """(memory, first byte, end) an array's elements span, memory being "cpu" or a CUDA device;
    None for an array without elements or of a kind it cannot read (its program checks those)."""
    if any(int(s) == 0 for s in a.shape):
        return None
    if isinstance(a, np.ndarray):  # a NumPy array beside another kind's (a CPU tensor)
        lo, hi = np.lib.array_utils.byte_bounds(a) if hasattr(np.lib, "array_utils") else np.byte_bounds(a)
        return "cpu", lo, hi
    if hasattr(a, "data_ptr") and hasattr(a, "element_size"):  # a PyTorch tensor: strides in elements
        where, size, strides, ptr = str(a.device), a.element_size(), a.stride(), a.data_ptr()
    elif hasattr(a, "__cuda_array_interface__"):  # CuPy: strides in bytes (None: C order)
        face = a.__cuda_array_interface__
        where, size, ptr = f"cuda:{a.device.id}" if hasattr(a, "device") else "cuda", a.itemsize, face["data"][0]
        strides = [s // size for s in face["strides"]] if face.get("strides") else _c_strides(a.shape)
    else:
        return None
    lo = ptr + size * sum((int(n) - 1) * s for n, s in zip(a.shape, strides) if s < 0)
    hi = ptr + size * (sum((int(n) - 1) * s for n, s in zip(a.shape, strides) if s > 0) + 1)
    return where, lo, hi


def _sharing(a: Any, b: Any) -> str | None:
    """How two arrays share memory: None (not a byte), "shares memory", or "may share memory"
    (past the bound of NumPy's exact search, or for arrays other than NumPy's whose byte ranges
    overlap). NumPy's: np.may_share_memory (a bounds check in C) first, np.shares_memory (two
    halves of each row share none) only where the bounds overlap."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if not np.may_share_memory(a, b):
            return None
        try:
            return "shares memory" if np.shares_memory(a, b, max_work=4096) else None
        except getattr(getattr(np, "exceptions", np), "TooHardError", ValueError):  # np.exceptions: NumPy 1.25+
            return "may share memory"
    sa, sb = _byte_span(a), _byte_span(b)
    if sa is None or sb is None or sa[0] != sb[0] or sa[2] <= sb[1] or sb[2] <= sa[1]:
        return None
    return "may share memory"


def _locatable(file: str) -> bool:
    """Whether ops may be located in `file`: UTF-8 (a file name with lone surrogates is none: its ops
    stay unlocated, a reviewer's find) and outside the fusejit package (fuse(np.add)'s wrapper)."""
    try:
        file.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return file != "" and "\0" not in file and not file.startswith(_PACKAGE_DIR)


def _exact_key(args: tuple) -> tuple | None:
    """A call's arguments exactly, where each is a NumPy array (by dtype and shape) or a plain
    scalar (by scalar_key; a str or None as itself); None for any other argument. Equal keys are
    one pattern (Fused._key: an array's pattern is its dtype and shape, a scalar's its value)."""
    key = []
    for v in args:
        t = type(v)
        if t is np.ndarray:
            key.append((v.dtype, v.shape))
        elif t is float or t is int or t is bool:
            key.append(scalar_key(v))
        elif t is str or v is None:
            key.append((t, v))
        else:
            return None
    return tuple(key)


def _c_strides(shape: Any) -> list:
    """C-order strides in elements."""
    strides, step = [], 1
    for n in reversed([int(n) for n in shape]):
        strides.insert(0, step)
        step *= n
    return strides


def _ufunc_function(ufunc: Any) -> Callable:
    """A function of the ufunc's nin arrays that calls it (named as it is)."""
    def call(*args: Any) -> Any:
        if len(args) != ufunc.nin:
            raise TypeError(f"{ufunc.__name__}() takes {ufunc.nin} array(s), got {len(args)}")
        return ufunc(*args)
    call.__name__ = call.__qualname__ = ufunc.__name__
    return call


def fuse(fn: Callable | None = None, *, dynamic: bool = True, **options: Any) -> Any:
    """Compiles a Python function of arrays into fused kernels: ``@fusejit.fuse`` or
    ``@fusejit.fuse(fast_math=True)``; returns a :class:`Fused`, called as the function.

    The function is traced on :class:`fusejit.Value` stand-ins of its array arguments (NumPy arrays,
    PyTorch and CuPy tensors; a NumPy scalar is a 0-d array) and may use Python operators, NumPy's
    ufuncs and ``np.where``/``np.clip``/``np.isclose``/``np.sum``-style reductions on them, ndarray-like methods
    (``astype``, ``sum``, ``mean``, ``max``, ``var``, ...), and :func:`fusejit.op` /
    :func:`fusejit.reduce` for every op of docs/ops.md. It returns one value or a tuple, list or dict
    of values. Other arguments (numbers, strings, None) are constants of the trace: Python numbers
    are weakly typed literals, so each new value traces and compiles again (a FusejitWarning names
    a float or int argument traced at three values; pass one that changes every call as
    np.float32(v), or an int operand of arithmetic as np.int64(t)).
    An object argument of a Python class (a method's self; ``fuse(obj.method)`` and ``fuse(obj)``
    bind it so) is keyed by its attributes' values, its array attributes being inputs read at
    every call (docs/fuse.md, "Objects and methods"; _pattern.py). An array argument or attribute
    updated in place (``p -= lr * g``) is updated in the caller's array, as NumPy's (the program's
    output ``p_updated``, written over it; the function may return None); one that shares memory
    with another array argument is a UserError.

    dynamic: True (default) gives each class of equal sizes other than 1 a named dim, so new sizes
    run the same program; False specialises on every size. options: :func:`fusejit.compile`'s
    keywords (fast_math, arch, backend, cache_dir, disk_cache, nvrtc_options, device, build_unfused,
    row_split, row_cache, row_cache_limit). Raises TypeError for an unknown option at decoration;
    calls raise what tracing (UserError with the op's message), compiling and calling raise.
    """
    from . import _flag, compile as fj_compile

    dynamic = _flag(dynamic, "fuse: dynamic")  # a string would be True to bool() (compile's flags are checked so too)
    if "dump_dir" in options:
        raise TypeError("fuse: dump_dir is not an option of fuse (each trace would write the same folder): "
                        "set the environment variable FUSEJIT_DUMP_DIR=DIR, which gives each trace's program a "
                        "folder of its own under DIR, or use f.program(...) and fusejit.compile(program.graph, "
                        "dump_dir=...)")
    try:
        inspect.signature(fj_compile).bind(None, **options)
    except TypeError as e:
        known = [p for p in inspect.signature(fj_compile).parameters if p != "graph"]
        near = [m for k in options for m in difflib.get_close_matches(k, known, n=1) if k not in known]
        hint = f"; did you mean {', '.join(repr(m) for m in near)}?" if near else ""
        raise TypeError(f"fuse: {e} (options are fusejit.compile's keywords){hint}") from None

    def wrap(f: Callable) -> Any:
        if isinstance(f, (staticmethod, classmethod)):  # @fuse above @staticmethod: fused inside
            return type(f)(wrap(f.__func__))
        if isinstance(f, Fused):  # fused already: its function, with these options
            return wrap(f._fn)
        if isinstance(f, _BoundFused):  # fuse(obj.fused_method)
            return _BoundFused(Fused(f.__func__._fn, dynamic, options), f.__self__)
        if not callable(f):
            raise TypeError(f"fuse: expected a function, got {type(f).__name__}")
        if isinstance(f, np.ufunc):  # fuse(np.exp): its signature's keywords (dtype, signature) are not arguments
            f = _ufunc_function(f)
        # fuse(model.forward), fuse(layer): the object is an argument, keyed at every call as a
        # fused method's self is (its changes traced again), not a constant of the first trace.
        if isinstance(f, types.MethodType) and not isinstance(f.__self__, type):
            return _BoundFused(Fused(f.__func__, dynamic, options), f.__self__)
        if not isinstance(f, (types.FunctionType, types.MethodType)) and by_value(type(f)):
            return _BoundFused(Fused(type(f).__call__, dynamic, options), f)
        return Fused(f, dynamic, options)

    return wrap if fn is None else wrap(fn)
