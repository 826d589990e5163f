"""fusejit: a runtime JIT kernel fuser for NVIDIA GPUs, on NumPy arrays, PyTorch and CuPy tensors.

    import numpy as np, fusejit
    g = fusejit.Graph.parse("dim N = 4\\ninput x : f32[N]\\ny = tanh(x) * 2\\noutput y")
    prog = fusejit.compile(g)
    outs = prog(x=np.arange(4, dtype=np.float32))     # {"y": array([...], dtype=float32)}

Graphs also come from code: ``b = fusejit.GraphBuilder(); x = b.input("x", "f32", [b.dim("N", 4)]);
b.output("y", b.op("tanh", x) * 2); g = b.build()`` (Python operators on its values build ops), or
from a Python function traced by ``@fusejit.fuse`` (NumPy's ufuncs and reductions on its values).

A thin layer over the C++ library (docs/api.md); this module binds arguments, allocates outputs
like the inputs and finds the caller's stream. Guide: docs/python.md.
"""

from __future__ import annotations

import atexit
import os
import re
import sys
import warnings
from typing import Any, Mapping, NoReturn, Sequence

import numpy as _np

from . import _fusejit
from ._errors import CompileError, DriverError, Error, FusejitWarning, InternalError, UserError
from ._fusejit import (CacheEntry, CacheStats, Dim, Graph, GraphBuilder, KernelInfo, NodeInfo, ParamInfo, TensorInfo,
                       Value)
from ._fuse import Fused, ValueDType, fuse, install_value_methods as _install_value_methods, op, reduce
from . import translate as translate  # fusejit.translate without an import of its own (stdlib only)

_install_value_methods()

# nanobind's static methods are plain attributes of their class, which help() listed as data.
for _name in ("parse", "load"):
    setattr(Graph, _name, staticmethod(Graph.__dict__[_name]))
del _name


def _graph_from_text(text: str) -> Graph:
    """A pickled Graph: Graph.parse of its text (a function pickle finds by name; nanobind's are not)."""
    return Graph.parse(text)


Graph.__reduce__ = lambda self: (_graph_from_text, (self.to_text(),))  # type: ignore[method-assign]

__version__: str = _fusejit.__version__
__all__ = [
    "Graph", "GraphBuilder", "Value", "Dim", "Program", "compile", "compile_to_dir", "load", "KernelInfo", "NodeInfo", "ParamInfo",
    "TensorInfo", "Error", "UserError", "CompileError", "DriverError", "InternalError", "FusejitWarning",
    "numpy_dtype", "torch_dtype", "fuse", "Fused", "op", "reduce", "cache_path", "cache_stats", "cache_list",
    "cache_clear", "CacheStats", "CacheEntry", "ValueDType",
]



def _at_exit() -> None:
    """Before Python finalises: the stderr warning handler again, and threads still inside a
    fusejit call (daemon threads) wait for the process to end rather than take the GIL back
    (GilRelease in python/src/module.h: Pythons before 3.14 would end them with pthread_exit, an
    abort). With such threads alive, nanobind's leak report at exit is off: what they hold is
    never released, which is no leak of fusejit's. Then fuse's trace lock is a new one: a parked
    thread that was tracing holds the old one for good (a later atexit handler's trace waited)."""
    import threading

    from . import _fuse

    _fusejit._at_exit(threading.active_count() > 1)
    _fuse._renew_trace_lock(at_exit=True)


atexit.register(_at_exit)

_NUMPY_NAMES = {"bool": "bool", "i8": "int8", "u8": "uint8", "i32": "int32", "i64": "int64", "f16": "float16",
                "f32": "float32", "f64": "float64"}


def numpy_dtype(dtype: str) -> Any:
    """The NumPy dtype of a fusejit dtype name ("f32", "bf16", ...). bf16 is ``ml_dtypes.bfloat16``
    and needs the ml_dtypes package (UserError without it)."""
    import numpy as np

    if dtype == "bf16":
        try:
            import ml_dtypes
        except ImportError:
            raise UserError("bf16 on NumPy needs the ml_dtypes package (pip install ml_dtypes)") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_NUMPY_NAMES[dtype])


# Per-call caches (a call must cost a few µs): facts about each array type and each NumPy dtype
# (`dtype.name` alone costs ~1.5 µs), learnt on first sight. Each pair is cleared together if it
# ever grows large (types or dtypes made on the fly), so the second stays within the first.
_FRAMEWORK_OF_TYPE: dict[type, str | None] = {}  # "numpy", "torch", "cupy", or None: ask the object
_NDARRAY_TYPES: set[type] = set()  # np.ndarray and its subclasses (NumPy scalars are not)
_NUMPY_DTYPE_FACTS: dict[Any, tuple[bool, bool]] = {}  # dtype -> (is bfloat16, is native)
_PLAIN_ITEMSIZE: dict[Any, int] = {}  # dtype -> itemsize, for those the extension takes as they are
_CACHE_LIMIT = 1024
_MISSING = object()  # an output that `out` does not supply (None would be an array fusejit refuses)


def _framework_by_type(t: type) -> str | None:
    """The framework whose array (or NumPy scalar) type `t` is: by its bases, so that other objects
    of those modules (np.dtype("f4"), x.flat, torch.float32) are refused as no array, and a subclass
    of torch.Tensor defined elsewhere (torchao's, a user's) is PyTorch's. The one rule of "which
    framework's array" (_fuse._updates_in_place asks it too)."""
    for mod, name in (("torch", "Tensor"), ("cupy", "ndarray")):
        base = getattr(sys.modules.get(mod), name, None)  # imported if `t` is one of its arrays
        if isinstance(base, type) and issubclass(t, base):
            return mod
    np_mod = sys.modules.get("numpy")
    nd = getattr(np_mod, "ndarray", None)
    if np_mod is not None and issubclass(t, np_mod.generic):  # a scalar, of ml_dtypes' types too
        return "numpy"
    return "numpy" if isinstance(nd, type) and issubclass(t, nd) else None  # an ndarray or a subclass


def _learn_type(t: type) -> str | None:
    """_FRAMEWORK_OF_TYPE's entry for a type seen for the first time (and _NDARRAY_TYPES')."""
    if len(_FRAMEWORK_OF_TYPE) >= _CACHE_LIMIT:
        _FRAMEWORK_OF_TYPE.clear()
        _NDARRAY_TYPES.clear()
    fw = _framework_by_type(t)
    nd = getattr(sys.modules.get("numpy"), "ndarray", None)
    ma = sys.modules.get("numpy.ma")  # imported if `t` can be a masked array (a subclass's too)
    if fw == "numpy" and ma is not None and issubclass(t, ma.MaskedArray):
        raise UserError(f"a NumPy masked array ({t.__name__}) is not supported: fusejit would read its data and "
                        "ignore its mask; pass a.filled(value), or the data and the mask as two arrays")
    if fw == "numpy" and isinstance(nd, type) and issubclass(t, nd):
        _NDARRAY_TYPES.add(t)
    _FRAMEWORK_OF_TYPE[t] = fw
    return fw


def _framework(a: Any) -> str:
    """"numpy", "torch", "cupy" or "dlpack" (any other DLPack producer)."""
    t = type(a)
    fw = _FRAMEWORK_OF_TYPE.get(t, _MISSING)  # one lookup: another thread may clear the cache
    if fw is _MISSING:
        fw = _learn_type(t)
    if fw:
        return fw
    if hasattr(a, "__dlpack__") or hasattr(a, "__array_interface__"):
        return "dlpack"
    return ""


def _numpy_dtype_facts(dt: Any) -> tuple[bool, bool]:
    """(is it bfloat16, is it native); a dtype that is neither goes in _PLAIN_ITEMSIZE too."""
    facts = _NUMPY_DTYPE_FACTS.get(dt)
    if facts is None:
        if len(_NUMPY_DTYPE_FACTS) >= _CACHE_LIMIT:
            _NUMPY_DTYPE_FACTS.clear()
            _PLAIN_ITEMSIZE.clear()
        facts = _NUMPY_DTYPE_FACTS[dt] = (dt.name == "bfloat16", dt.isnative)
        if facts == (False, True) and _known_kind(dt):
            _PLAIN_ITEMSIZE[dt] = dt.itemsize
    return facts


def _known_kind(dt: Any) -> bool:
    """Whether a native NumPy dtype is one the extension takes or names when it refuses it (bool and
    integers; float16/32/64): not object, complex, long double, strings, dates, nor ml_dtypes' other
    floats (float8_e5m2 has kind "f" too)."""
    return (dt.kind in "biu" and dt.itemsize <= 8) or dt.name in ("float16", "float32", "float64")


def _plain_numpy(arrays: list, outputs: bool) -> bool:
    """Whether every array is a NumPy array the extension takes as it is (the common call's fast
    check): a native dtype other than bfloat16, strides in whole elements, writeable if an output.
    False sends the call through _as_storage, which says what is wrong."""
    for a in arrays:
        if type(a) not in _NDARRAY_TYPES:
            return False
        size = _PLAIN_ITEMSIZE.get(a.dtype)
        if not size or (outputs and not a.flags.writeable):
            return False
        for s in a.strides:
            if s % size:
                return False
    return True


def _as_storage(a: Any, what: str) -> tuple[Any, str | None]:
    """The array the extension reads, and a dtype override: NumPy arrays of ml_dtypes.bfloat16
    travel as a uint16 view of the same memory (no copy), marked "bf16"."""
    fw = _framework(a)
    if not fw:
        buffer = isinstance(a, (memoryview, bytearray)) or type(a).__name__ == "array"  # array.array
        hint = ("; pass np.asarray(...) of it (no copy)" if buffer else
                "; pass np.frombuffer(it, dtype) (np.asarray of bytes is one string)" if isinstance(a, bytes) else "")
        raise TypeError(f"{what}: expected an array (NumPy, PyTorch, CuPy or any DLPack tensor), "
                        f"got {type(a).__name__}{hint}")
    if fw == "dlpack" and not hasattr(a, "__dlpack__"):
        a, fw = _interface_array(a), "numpy"
    return _numpy_storage(a, what) if fw == "numpy" else (a, None)


def _numpy_storage(a: Any, what: str) -> tuple[Any, str | None]:
    """_as_storage of a NumPy array or scalar: its dtype, byte order and strides checked."""
    import numpy as np

    if isinstance(a, np.generic):  # a NumPy scalar (np.float32(3), ml_dtypes.bfloat16(3)): a 0-d array
        a = np.asarray(a)
    bf16, native = _numpy_dtype_facts(a.dtype)
    if not native:  # as the .npy reader says it (first: a big-endian bfloat16 would pass as bf16 bits)
        fix = "ml_dtypes.bfloat16" if bf16 else repr(a.dtype.newbyteorder("=").str)
        shown = "bfloat16, " + a.dtype.str if bf16 else a.dtype.str
        if what.startswith("output"):  # a converted copy would take the results, not this array
            raise UserError(f"{what}: big-endian data ({shown!r}) is not supported; pass an array of dtype {fix} "
                            "for the results (np.empty(shape, dtype)) and convert it afterwards if you need to")
        raise UserError(f"{what}: big-endian data ({shown!r}) is not supported; convert it with .astype({fix})")
    if not bf16 and not _known_kind(a.dtype):
        raise UserError(f"{what}: NumPy dtype {a.dtype.name} has no fusejit dtype; fusejit takes bool, int8, uint8, "
                        "int32, int64, float16, ml_dtypes.bfloat16, float32 and float64 arrays")
    if any(s % a.itemsize for s in a.strides):  # np.lib.stride_tricks.as_strided
        raise UserError(f"{what}: strides {a.strides} bytes are not multiples of its item size {a.itemsize}: "
                        "fusejit takes strides in elements; pass a copy (np.ascontiguousarray)")
    return (a.view(np.uint16), "bf16") if bf16 else (a, None)


def _interface_array(a: Any) -> Any:
    """An object with __array_interface__ alone (no __dlpack__) as the ndarray NumPy reads it as (no copy)."""
    import numpy as np

    return np.asarray(a)


def _refused(e: TypeError, arrays: list, whats: list[str]) -> NoReturn:
    """Re-raises a TypeError of an extension call: nanobind's refusal of arrays by type ("incompatible
    function arguments", which names its private signatures) as one naming the non-NumPy,
    non-framework arrays; any other as it is."""
    if "incompatible function arguments" not in str(e):
        raise e
    grad = [w for a, w in zip(arrays, whats) if _framework(a) == "torch" and getattr(a, "requires_grad", False) is True]
    if grad:  # torch's __dlpack__ refuses it ("Can't export tensors that require gradient"), nanobind says less
        raise TypeError(f"{grad[0]}: a PyTorch tensor that requires grad: fusejit's kernels record no autograd "
                        "graph, and PyTorch exports no such tensor; pass t.detach(), the same memory (an update "
                        "in place, as an optimizer's step under torch.no_grad(), then changes the tensor itself)"
                        ) from None
    odd = [(a, w) for a, w in zip(arrays, whats) if _framework(a) == "dlpack"]
    cause: BaseException = e
    for a, _ in odd:  # nanobind swallowed what a failing __dlpack__ raised: the cause, where there is one
        try:
            a.__dlpack__()
        except Exception as err:  # noqa: BLE001: the object's own error, whatever it is
            cause = err
            break
    raise TypeError(f"{', '.join(w for _, w in odd) or ', '.join(whats)}: not readable as a tensor (a __dlpack__ "
                    "that fails or returns no DLPack capsule, or a read-only tensor given as an output); pass a NumPy "
                    "array or a PyTorch or CuPy tensor") from cause


def _storages(arrays: list, whats: list[str]) -> tuple[list, list]:
    """_as_storage of each array: the arrays the extension reads and their dtype overrides."""
    stored = [_as_storage(a, what) for a, what in zip(arrays, whats)]
    return [s for s, _ in stored], [o for _, o in stored]


def torch_dtype(dtype: str) -> Any:
    """The PyTorch dtype of a fusejit dtype name ("bf16" -> torch.bfloat16); imports torch."""
    import torch

    return {"bool": torch.bool, "i8": torch.int8, "u8": torch.uint8, "i32": torch.int32, "i64": torch.int64,
            "f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}[dtype]


_DTYPE_NAMES = ("bool", "i8", "u8", "i32", "i64", "f16", "bf16", "f32", "f64")


def _dtype_name(dtype: Any, of_array: bool = False) -> str:
    """The fusejit name of a dtype argument that is not a string (GraphBuilder.input, param, cast):
    a PyTorch dtype (torch.bfloat16), or what ``np.dtype()`` takes (np.float32, np.dtype("<f4"),
    ml_dtypes.bfloat16, float, bool), matched with the tables of torch_dtype and numpy_dtype.
    Raises UserError for anything else (a big-endian NumPy dtype, complex, object)."""
    if dtype is None:  # np.dtype(None) would be float64
        raise UserError("dtype None: give a dtype name (f32, ...) or a NumPy or PyTorch dtype")
    if isinstance(dtype, ValueDType):  # a value's dtype (v.dtype): its name, also for bf16 without ml_dtypes
        return str(dtype)
    if type(dtype).__module__ == "torch":
        for name in _DTYPE_NAMES:
            if torch_dtype(name) == dtype:
                return name
    else:
        import numpy as np

        try:
            dt = np.dtype(dtype)
        except (TypeError, ValueError):
            dt = None
        for name in _DTYPE_NAMES:
            if dt is not None and (name != "bf16" or dt.name == "bfloat16") and numpy_dtype(name) == dt:
                return name
        if dt is not None and not dt.isnative:  # a bfloat16's str is a void's ('<V2'): named so
            native = "ml_dtypes.bfloat16" if dt.name == "bfloat16" else repr(dt.newbyteorder('=').str)
            raise UserError(f"dtype {dtype!r}: big-endian; fusejit's dtypes are in the machine's byte order "
                            f"({native})")
    _no_such_dtype(dtype, of_array)


def _no_such_dtype(dtype: Any, of_array: bool = False) -> NoReturn:
    """The UserError for a dtype fusejit has none of, named as NumPy names it where NumPy knows it."""
    import numpy as np

    try:
        what = f"dtype {dtype!r}" if type(dtype).__module__ == "torch" else f"NumPy dtype {np.dtype(dtype).name}"
    except (TypeError, ValueError):
        what = f"dtype {dtype!r}"
    held = " (bf16 or f16 bits held as uint16: pass a.view(ml_dtypes.bfloat16) or a.view(np.float16))"
    held = held if what == "NumPy dtype uint16" else ""
    if of_array:  # an array's dtype (_fuse): cast the array
        raise UserError(f"{what} is none of fusejit's dtypes: cast the array to one first (a.astype(np.int32), "
                        f"a.astype(np.float32), ...){held}")
    raise UserError(f"{what}: fusejit has no such dtype; use a name ({', '.join(_DTYPE_NAMES)}) or the NumPy or "
                    "PyTorch dtype of one" + held)


_NUMPY_DTYPES: dict[str, Any] = {}  # fusejit dtype name -> NumPy dtype, for outputs fusejit allocates


def _np_empty(shape: Sequence[int], dtype: str) -> Any:
    """A new uninitialised NumPy array of `shape` and fusejit dtype `dtype`."""
    dt = _NUMPY_DTYPES.get(dtype)
    if dt is None:
        dt = _NUMPY_DTYPES[dtype] = numpy_dtype(dtype)
    return _np.empty(shape, dtype=dt)


def _empty_like(like: Any, shape: Sequence[int], dtype: str) -> Any:
    """A new uninitialised array of `shape` and `dtype` in the framework and on the device of `like`."""
    fw = _framework(like)
    if fw == "torch":
        import torch

        return torch.empty(tuple(shape), dtype=torch_dtype(dtype), device=like.device)
    if fw == "cupy":
        import cupy

        with like.device:
            return cupy.empty(tuple(shape), dtype=numpy_dtype(dtype))
    return _np_empty(tuple(shape), dtype)


def _current_stream(like: Any) -> int:
    """The caller's current CUDA stream for a device tensor (PyTorch's or CuPy's), else 0."""
    fw = _framework(like)
    if fw == "torch" and like.is_cuda:
        import torch

        return torch.cuda.current_stream(like.device).cuda_stream
    if fw == "cupy":
        import cupy

        return cupy.cuda.get_current_stream().ptr
    return 0


def _device_guard(like: Any) -> Any:
    """For a tensor on another GPU than the current one, a context manager that makes its device
    current for the launch, as PyTorch's own ops do (fusejit launches in the current CUDA context,
    and the stream is that device's); else None."""
    fw = _framework(like)
    if fw == "torch" and like.is_cuda:
        import torch

        if like.device.index != torch.cuda.current_device():
            return torch.cuda.device(like.device)
    elif fw == "cupy":
        import cupy

        if like.device.id != cupy.cuda.runtime.getDevice():
            return like.device  # a cupy.cuda.Device is a context manager
    return None


def _check_call_options(stream: Any, plan: Any, inputs: Any = ()) -> None:
    """A TypeError naming `stream` or `plan` when a call's value is of the wrong type or range; it
    says so where the graph has an input of that name (an array given for it by keyword lands here)."""
    def clash(name: str) -> str:
        return f" ({name}: the call's own keyword; pass such an input positionally)" if name in inputs else ""

    if not isinstance(plan, str):
        raise TypeError(f"plan: expected \"fused\" or \"unfused\", got {type(plan).__name__}" + clash("plan"))
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int) or not 0 <= stream < 2**64):
        got = repr(stream) if isinstance(stream, int) else type(stream).__name__
        raise TypeError(f"stream: expected a CUDA stream handle (an int in [0, 2^64), e.g. "
                        f"torch.cuda.current_stream().cuda_stream), got {got}" + clash("stream"))


class Program:
    """A graph compiled for the GPU (or the CPU without one); from :func:`compile` or :func:`load`.

    Call it with one array per graph input (by name, or positionally in declaration order) and the
    params by name; it returns ``{output name: array}``. Thread-safe: several threads may call one
    program at once (the GIL is released while it compiles and launches).
    """

    _fuse_by_identity = True  # an attribute of a fused method's object: keyed by identity, not value

    def __init__(self, impl: Any):
        if type(impl).__name__ != "_Program":  # fusejit.Program(graph) is no way to make one
            raise TypeError(f"Program: made by fusejit.compile(graph) or fusejit.load(folder), not from "
                            f"{type(impl).__name__}")
        self._p = impl
        self._traced_by = ""  # the fused function that traced it (Fused.program), for its messages
        self._updates: tuple = ()  # (output, argument) of each argument the fused function updates in place
        # input -> the fused function's default for the argument it stands for (eps=np.float32(1e-6)),
        # which a call that leaves the input out takes, as a call of the function does (Fused.program)
        self._defaults: dict = {}
        g = impl.graph
        self._inputs = [t.name for t in g.inputs]
        self._outputs = [(t.name, t.dtype) for t in g.outputs]
        self._params = {p.name for p in g.params}
        # Built once so that a call formats no strings and builds no lists it can do without.
        self._out_names = [n for n, _ in self._outputs]
        self._out_set = frozenset(self._out_names)
        self._in_whats = [f"input '{n}'" for n in self._inputs]
        self._out_whats = [f"output '{n}'" for n in self._out_names]
        self._no_in_as = [None] * len(self._inputs)  # no dtype overrides (read, never kept, by C++)
        self._no_out_as = [None] * len(self._outputs)
        self._bf16_outputs = any(dt == "bf16" for _, dt in self._outputs)  # allocated ones need _launch's view
        self._shapes: dict[tuple, Any] = {}  # (plan, input shapes...) -> output shapes (_allocate)

    backend = property(lambda self: self._p.backend, doc='"cuda" or "cpu", decided at compile time')
    target = property(lambda self: self._p.target, doc='e.g. "sm_90 (CUBIN)" or "host C++ (...)"')
    device = property(lambda self: self._p.device, doc='e.g. "NVIDIA H200 (sm_90, 132 SMs)" or "host CPU"')
    backend_note = property(lambda self: self._p.backend_note, doc="why the CPU was chosen, else \"\"")
    dump_dir = property(lambda self: self._p.dump_dir,
                        doc="the folder compile wrote the kernels to: dump_dir=, else FUSEJIT_DUMP_DIR's folder "
                            "`<graph name>-<16 hex digits>` for this program (docs/aot.md); \"\" for none")
    fast_math = property(lambda self: self._p.fast_math, doc="whether value-changing rewrites were allowed")
    graph = property(lambda self: self._p.graph, doc="the graph as given")
    rewritten = property(lambda self: self._p.rewritten, doc="the graph after rewrites (what the kernels compute)")
    rewrite_summary = property(lambda self: self._p.rewrite_summary,
                               doc='one line: the rules that fired and their counts, '
                                   '"rewrites (strict mode): mul-chain x1, dead-code x3" '
                                   '(or "rewrites (strict mode): none fired")')
    plan_text = property(lambda self: self._p.plan_text, doc="fusion groups and traffic, as `fusejit plan`")
    kernels = property(lambda self: self._p.kernels("fused"), doc="the fused plan's kernels (KernelInfo list)")
    unfused_kernels = property(lambda self: self._p.kernels("unfused"),
                               doc='one kernel per op; cache "not built" until first used')
    specializations = property(lambda self: self._p.specializations,
                               doc="kernels built after compile for other dims (64-bit index, new broadcasts)")

    def cuda_source(self, plan: str = "fused") -> str:
        """The generated CUDA C++ of every kernel of the plan ("fused" or "unfused"), in plan order:
        the kernels alone, without the preludes that define the ops' functions (fj_scalar.h,
        fj_reduce.h, fj_kernel.h); ``compile_to_dir`` (``fusejit compile -o DIR``) writes each
        .cu with its #include lines and the preludes beside it, ready for nvcc. Raises UserError
        for the unfused plan before it is built (its first use, or compile(..., build_unfused=True))."""
        if not isinstance(plan, str):
            raise TypeError(f"cuda_source: plan: expected \"fused\" or \"unfused\", got {type(plan).__name__}")
        kernels = self._p.kernels(plan)
        if any(k.cache == "not built" for k in kernels):
            raise UserError(f'cuda_source("{plan}"): the {plan} plan is not built yet: it is built on its first '
                            f'use (prog(..., plan="{plan}")) or by compile(..., build_unfused=True)')
        return "\n".join(k.source for k in kernels)

    def _bind(self, args: tuple, kwargs: dict) -> tuple[list, dict]:
        """The input arrays in declaration order, and the params given."""
        inputs = self._inputs
        if not kwargs and len(args) == len(inputs):  # every input in order, no params
            return list(args), {}
        if not args:  # every input by name and only params besides: nothing to refuse
            try:
                arrays = [kwargs[n] for n in inputs]
            except KeyError:
                return self._bind_checked(args, kwargs)  # says what is missing
            if len(kwargs) == len(inputs):
                return arrays, {}
            params = {k: v for k, v in kwargs.items() if k in self._params}
            if len(params) + len(inputs) == len(kwargs):
                return arrays, params
        return self._bind_checked(args, kwargs)

    def _bind_checked(self, args: tuple, kwargs: dict) -> tuple[list, dict]:
        """_bind by every rule, in the order its errors are raised."""
        if len(args) > len(self._inputs):
            # A number among the extra arguments is likely a param's value.
            params = sorted(self._params)
            np_mod = sys.modules.get("numpy")  # a NumPy scalar counts too (NumPy is imported if it is one)
            kinds = (bool, int, float) + ((np_mod.generic,) if np_mod else ())
            number = any(isinstance(a, kinds) for a in args[len(self._inputs):])
            traced = (f" (a Python number is a constant of the trace of fused function '{self._traced_by}', no "
                      "input of its Program: call the function for another value, or pass it to the function as "
                      "a 0-d array to make it an input)") if self._traced_by and number else ""
            raise TypeError(f"{len(args)} positional inputs given; the graph has {len(self._inputs)}: "
                            + ", ".join(self._inputs)
                            + (f" (params go by keyword: {params[0]}=...)" if params and number else traced))
        given = dict(zip(self._inputs, args))
        params = {}
        for k, v in kwargs.items():
            if k in self._inputs:
                if k in given:
                    raise TypeError(f"input '{k}' given twice")
                given[k] = v
            elif k in self._params:
                params[k] = v  # a number, NumPy scalar or 0-d array (the extension converts and checks it)
            else:
                graph = f"graph '{self.graph.name}'" if self.graph.name else "the graph"  # unnamed: no ''
                raise TypeError(f"'{k}' is neither an input nor a param of {graph} "
                                f"(inputs: {', '.join(self._inputs) or 'none'}; params: "
                                f"{', '.join(sorted(self._params)) or 'none'})")
        missing = [n for n in self._inputs if n not in given]
        for n in [n for n in missing if n in self._defaults]:
            given[n] = self._defaults[n]
            missing.remove(n)
        if missing:
            # An input named as a keyword of the call itself never reaches kwargs.
            clash = [n for n in missing if n in ("out", "stream", "plan")]
            raise TypeError("missing input(s): " + ", ".join(missing)
                            + (f" ({', '.join(clash)}: the call's own keyword; pass such an input positionally)"
                               if clash else ""))
        return [given[n] for n in self._inputs], params

    def output_shapes(self, *args: Any, plan: str = "fused", **inputs: Any) -> dict[str, tuple[int, ...]]:
        """The shape of each output for these inputs (checked as a call checks them), without running;
        ``plan`` as in a call ("fused" or "unfused": the same shapes)."""
        _check_call_options(None, plan, self._inputs)
        arrays, _ = self._bind(args, inputs)
        try:
            shapes = self._p.output_shapes(*_storages(arrays, self._in_whats), plan)
        except TypeError as e:
            _refused(e, arrays, self._in_whats)
        return {name: tuple(s) for name, s in zip(self._out_names, shapes)}

    def __call__(self, *args: Any, out: Mapping[str, Any] | Sequence[Any] | Any | None = None,
                 stream: int | None = None, plan: str = "fused", **kwargs: Any) -> dict[str, Any]:
        """Runs the program: ``prog(x=..., w=..., eps=1e-6, out={"y": y})``.

        Inputs: one array per graph input, of its dtype; dims come from their shapes. Params: by
        name, the rest take the graph's defaults. Outputs are allocated like the first input
        (NumPy -> NumPy, torch -> torch on its device, CuPy -> CuPy) unless ``out`` supplies them
        (a dict by name, a list or tuple of one array per output in declaration order, or, for a
        program of one output, the array itself);
        an output may be an input (in place) where docs/api.md allows it. Strided views (e.g.
        transposed) are read and written in place, never copied (a GPU program copies NumPy
        arrays to the device and back: its host ``out`` arrays must be C-contiguous). Device tensors run on the
        caller's current stream (PyTorch's or CuPy's; ``stream=`` overrides it) without
        synchronising. Returns ``{output name: array}``, ``out``'s arrays included.
        Raises UserError (wrong dtype, shape, device; a param value that does not fit its dtype)
        and TypeError (missing or unknown argument; a param that is no bool, int or float).
        ``plan="unfused"`` runs the unfused plan instead (one kernel per op of the graph as written,
        compiled on its first use), to compare with the fused one.
        """
        if self._updates:
            self._warn_updates(out)
        try:
            # The hot loop's call (every input, by position or by name, and no param), checked fast.
            inputs = len(self._inputs)
            if stream is None and type(plan) is str and plan == "fused" and not (args and kwargs) and \
                    len(kwargs or args) == inputs:
                results = self._plain_call(args or [kwargs.get(n) for n in self._inputs], out)
                if results is not None:
                    return results
            return self._call(args, out, stream, plan, kwargs)
        except TypeError:
            _check_call_options(stream, plan, self._inputs)  # nanobind's message would name the extension's signature
            raise
        except UserError as e:
            self._explained(e)

    def _warn_updates(self, out: Any) -> None:
        """Once per Program, for a call whose `out` leaves out an argument the fused function that
        traced it updates in place: a Program call does not update it."""
        if out is not None and not isinstance(out, Mapping):  # one array per output (or pairs): each is given
            return
        if all(n in (out or ()) for n, _ in self._updates):
            return
        outs = ", ".join(f"{n!r}: {arg}" for n, arg in self._updates)
        warnings.warn(f"this Program of fused function '{self._traced_by}' returns the updated values of the arguments "
                      f"it updates in place, and updates nothing itself: pass out={{{outs}}} to update them",
                      FusejitWarning, stacklevel=3)
        self._updates = ()  # said once

    def _plain_call(self, args: Sequence[Any], out: Any) -> dict[str, Any] | None:
        """A call of `args`, one per input in order (None for one not given), and `out` None or a
        dict of every output: where every array is a _plain_numpy one and (without `out`) the
        output shapes of these input shapes are known (_allocate learnt them), the launch without
        _call's binding and its checks of what was not given (a warm call of small arrays costs
        about a quarter less); else None (_call's turn)."""
        if not args or not _plain_numpy(args, False):
            return None
        if out is None:
            shapes = self._shapes.get(("fused", *[a.shape for a in args]))
            if shapes is None or self._bf16_outputs:  # a bf16 output travels as a uint16 view (_launch)
                return None
            results = [_np_empty(shape, dt) for shape, (_, dt) in zip(shapes, self._outputs)]
        elif type(out) is dict and len(out) == len(self._out_names):
            results = [out.get(n) for n in self._out_names]
            if not _plain_numpy(results, True):  # None (a name not given) is refused there too
                return None
        else:
            return None
        try:
            self._p.launch(args, self._no_in_as, results, self._no_out_as, [], 0, "fused")
        except TypeError as e:
            _refused(e, list(args) + results, self._in_whats + self._out_whats)
        return dict(zip(self._out_names, results))

    def _explained(self, e: UserError) -> NoReturn:
        """Raises a call's UserError, where it is a size error of a program fuse traced with what
        the trace fixed (a size of 1, dims that shared a size), else as it is."""
        fixed = _FIXED_SIZE.search(e.message) if self._traced_by else None
        if fixed is None:
            shared = self._shared_dim(e.message)
            if shared is None:
                raise e
            raise UserError(e.message + f"; the axes of dim {shared} had one size when fuse traced "
                            f"'{self._traced_by}' (equal sizes share a dim, and a Program runs its own "
                            "pattern only): call the fused function itself, which traces these sizes "
                            "where the function takes them (or says why they do not broadcast)") from None
        # A program fuse traced: its graph text is not the caller's to edit.
        raise UserError(e.message[:fixed.start()] + f"; axis {fixed.group(1)} had size {fixed.group(2)} when "
                        f"fuse traced '{self._traced_by}' (a size of 1 broadcasts, so it is part of the "
                        "pattern): call the fused function itself, which traces this size once") from None

    def _shared_dim(self, message: str) -> str | None:
        """The dim a size error of a program fuse traced names (axes that share it had one size
        when traced), else None."""
        named = _SIZE_FROM.search(message) if self._traced_by else None
        return None if named is None else named.group(1)

    def _call(self, args: tuple, out: Any, stream: int | None, plan: str, kwargs: dict) -> dict[str, Any]:
        """__call__ without the check of its options' types."""
        arrays, params = self._bind(args, kwargs)
        if out is not None and type(out) is not dict:  # any mapping, pairs, or one array per output in order
            out = self._out_mapping(out)
        results, complete = self._given_outputs(out)
        plain = _plain_numpy(arrays, False)
        if plain:  # the common case, checked fast; else each array's rules
            stored, in_as = arrays, self._no_in_as
        else:
            stored, in_as = _storages(arrays, self._in_whats)
        like = arrays[0] if arrays else next(iter(out.values()), None) if out else None
        guard = None if like is None or type(like) in _NDARRAY_TYPES else _device_guard(like)
        if guard is not None:  # a tensor on another GPU than the current one: launch on its device
            with guard:
                return self._call(args, out, stream, plan, kwargs)
        if not complete:
            self._allocate(results, like, stored, in_as, plan, plain)
        self._launch(stored, in_as, results, like, params, stream, plan)
        return dict(zip(self._out_names, results))

    def _launch(self, stored: list, in_as: list, results: list, like: Any, params: dict, stream: int | None,
                plan: str) -> None:
        """The extension's launch on the caller's stream (`stream`, else `like`'s current one)."""
        if _plain_numpy(results, True):
            outs, out_as = results, self._no_out_as
        else:
            outs, out_as = self._output_storages(results)
        if stream is None:  # NumPy arrays have none (checked first: the cheap common case)
            stream = 0 if like is None or type(like) in _NDARRAY_TYPES else _current_stream(like)
        elif stream is True or stream is False:  # an int to nanobind: True would be stream 1
            _check_call_options(stream, plan, self._inputs)
        try:
            self._p.launch(stored, in_as, outs, out_as, list(params.items()) if params else [], stream, plan)
        except TypeError as e:
            _refused(e, stored + outs, self._in_whats + self._out_whats)

    def _out_mapping(self, out: Any) -> dict[str, Any]:
        """``out`` as a dict: a mapping or (name, array) pairs as dict() reads them, a list or tuple
        of one array per output in declaration order, or the array of a program's one output."""
        if hasattr(out, "shape") and len(self._out_names) == 1:  # one array for the one output, as NumPy's out=
            return {self._out_names[0]: out}
        if isinstance(out, (list, tuple)) and not (out and all(isinstance(p, tuple) and len(p) == 2 and
                                                               isinstance(p[0], str) for p in out)):
            if len(out) != len(self._out_names):
                raise TypeError(f"out: {len(out)} array(s) for {len(self._out_names)} output(s) "
                                f"({', '.join(self._out_names)}): give one per output in order, or a dict by name")
            return dict(zip(self._out_names, out))
        try:
            if hasattr(out, "shape"):  # an array (its rows would read as pairs)
                raise TypeError
            return dict(out)
        except (TypeError, ValueError):
            hint = (f" (the program has {len(self._out_names)} outputs: out={{{self._out_names[0]!r}: y, ...}} or one "
                    "array per output in order)")
            raise TypeError(f"out: expected a dict {{output name: array}} or one array per output in order, "
                            f"got {type(out).__name__}{hint if hasattr(out, 'shape') else ''}") from None

    def _given_outputs(self, out: Mapping[str, Any] | None) -> tuple[list, bool]:
        """`out`'s arrays in output order (_MISSING where fusejit allocates), and whether it gave all."""
        names = self._out_names
        if not out:
            return [_MISSING] * len(names), not names
        if len(out) == len(names):  # every output given (no room for an unknown name)
            try:
                return [out[n] for n in names], True
            except KeyError:
                pass
        unknown = [k for k in out if k not in self._out_set]
        if unknown:
            raise TypeError(f"out: no output named {', '.join(map(repr, unknown))} (outputs: " + ", ".join(names) +
                            "; out= maps output names to arrays)")
        results = [out[n] if n in out else _MISSING for n in names]
        return results, all(a is not _MISSING for a in results)  # not `in`: it would compare arrays

    def _allocate(self, results: list, like: Any, stored: list, in_as: list, plan: str, plain: bool) -> None:
        """Fills the outputs `out` did not give with new arrays like `like` (`plain`: the inputs
        are _plain_numpy)."""
        # The output shapes follow from the input shapes alone: learnt once per input shapes, so a
        # call reads each tensor once (the extension's output_shapes would read it again). Only for
        # arrays whose .shape is their framework's (a DLPack producer's may be anything).
        key = shapes = None
        if plain or all(type(a) in _NDARRAY_TYPES or _FRAMEWORK_OF_TYPE.get(type(a)) for a in stored):
            key = (plan, *[a.shape for a in stored])
            shapes = self._shapes.get(key)
        if shapes is None:
            try:
                shapes = self._p.output_shapes(stored, in_as, plan)
            except TypeError as e:
                _refused(e, stored, self._in_whats)
            if key is not None:
                if len(self._shapes) >= _CACHE_LIMIT:
                    self._shapes.clear()
                self._shapes[key] = shapes
        numpy_like = type(like) in _NDARRAY_TYPES  # NumPy's empty, without _empty_like's lookups (1 us a call)
        for k, (a, (_, dt)) in enumerate(zip(results, self._outputs)):
            if a is _MISSING:
                results[k] = _np_empty(shapes[k], dt) if numpy_like else _empty_like(like, shapes[k], dt)

    def _output_storages(self, results: list) -> tuple[list, list]:
        """_storages of the outputs, read-only NumPy arrays refused first."""
        for n, a in zip(self._out_names, results):
            fw = _framework(a)
            if fw == "dlpack" and not hasattr(a, "__dlpack__"):
                a, fw = _interface_array(a), "numpy"
            if fw == "numpy" and not a.flags.writeable:
                raise UserError(f"output '{n}': the array is read-only")
        return _storages(results, self._out_whats)

    def __copy__(self) -> Program:
        """The program itself: its kernels and plans never change after compile."""
        return self

    def __deepcopy__(self, memo: dict) -> Program:
        """The program itself (as __copy__)."""
        return self

    def __repr__(self) -> str:
        return f"<fusejit.Program {self.graph.name!r} on {self.target}, {len(self.kernels)} kernel(s)>"


def compile(graph: Graph, fast_math: bool = False, arch: str | None = None, *, backend: str = "auto",
            cache_dir: str | bytes | os.PathLike[str] | None = None, disk_cache: bool = True,
            nvrtc_options: Sequence[str] = (),
            device: int = 0, dump_dir: str | bytes | os.PathLike[str] | None = None, build_unfused: bool = False,
            row_split: int = 0, row_cache: bool = True, row_cache_limit: int = 0) -> Program:
    """Rewrites, plans and compiles a graph (or loads its kernels from the cache): ``Program::compile``.

    fast_math: allow value-changing rewrites. arch: "sm_90" (CUBIN) or "compute_90" (PTX), default
    the device's. backend: "auto" (the GPU when there is one, else the CPU), "cuda" or "cpu".
    cache_dir: kernel cache folder, a str, bytes or os.PathLike as every path argument (default
    $FUSEJIT_CACHE_DIR, else $XDG_CACHE_HOME/fusejit, else ~/.cache/fusejit). disk_cache: False
    keeps compiled kernels in memory only. device: the CUDA device ordinal.
    nvrtc_options: extra NVRTC flags. dump_dir: also write the ahead-of-time folder (docs/aot.md;
    on the CPU path its sources only: compile_to_dir writes a loadable one without a GPU); None
    with the environment variable FUSEJIT_DUMP_DIR=DIR set: a folder of the program's own under DIR
    (prog.dump_dir names it).
    build_unfused: compile the unfused plan now, not on its first use. row_split: blocks per row of
    reductions (0: fusejit's rule, few rows of over 57,344 elements (253,952 past 16 rows), or few groups of columns of
    over 8,192, split; 1: never; N: N parts; the same bits either way; docs/ops.md, "A row split
    over blocks"). row_cache: reduction kernels keep a row their passes share in shared memory when
    it fits in row_cache_limit bytes (False: every pass reads memory; the same bits either way;
    docs/ops.md, "The row on chip"). row_cache_limit: 0, fusejit's rule (on a GPU the shared
    memory a block may opt in to less 12 KiB, 227 KiB - 12 KiB on sm_90; 48 KiB on the CPU); N, at
    most N bytes, capped by the GPU's. Raises UserError, CompileError, DriverError.
    """
    _check_device(device)
    if not isinstance(graph, Graph):
        raise TypeError(f"graph: expected a fusejit.Graph, got {type(graph).__name__}")
    for name, v in (("arch", arch), ("backend", backend)):
        if not (isinstance(v, str) or (v is None and name == "arch")):
            raise TypeError(f"{name}: expected a str, got {type(v).__name__}")
    options = _nvrtc_options(nvrtc_options)
    return Program(_fusejit.compile(graph, _flag(fast_math, "fast_math"), arch, backend, cache_dir,
                                    _flag(disk_cache, "disk_cache"), options, device, dump_dir,
                                    _flag(build_unfused, "build_unfused"), row_split, row_cache, row_cache_limit))


def _nvrtc_options(nvrtc_options: Any) -> list[str]:
    """nvrtc_options as a list of str (a TypeError for one str, a mapping or a non-iterable)."""
    options = None if isinstance(nvrtc_options, (str, bytes, Mapping)) else _list_or_none(nvrtc_options)
    if options is None or not all(isinstance(o, str) for o in options):
        raise TypeError("nvrtc_options: expected a list of str, one option each (['--maxrregcount=32'])")
    return options


# The part of a launch error (lib/launch_check.cpp) that advises editing the graph text.
# "... (a_0 = 4 from input 'a'...": the dim a size error names.
_SIZE_FROM = re.compile(r"\((\w+) = \d+ from input ")
_FIXED_SIZE = re.compile(r"; axis (\d+) has the fixed size (\d+) in the graph: name it with a dim .*$", re.S)


def _list_or_none(v: Any) -> list | None:
    """list(v) once (a generator is read once), or None when v is not iterable."""
    try:
        return list(v)
    except TypeError:
        return None


def _flag(v: Any, name: str) -> bool:
    """A bool option: True or False, or a NumPy bool (a TypeError naming the option otherwise, not
    nanobind's list of the extension's signatures)."""
    if isinstance(v, bool) or (type(v).__module__ == "numpy" and type(v).__name__ in ("bool", "bool_")):
        return bool(v)
    raise TypeError(f"{name}: expected True or False, got {v!r}")


def _check_device(device: Any) -> None:
    """A TypeError for a device that is no int (nanobind takes True as the int 1: GPU 1, silently)."""
    numpy_int = type(device).__module__ == "numpy" and type(device).__name__[:3] in ("int", "uin")
    if isinstance(device, bool) or not (isinstance(device, int) or numpy_int):
        raise TypeError(f"device: expected a CUDA device ordinal (an int), got {device!r}")
    if not 0 <= int(device) < 2**31:  # C++ refuses a negative one too; a larger one is no C int
        raise UserError(f"device {int(device)}: a CUDA device ordinal is 0 or more (and under 2**31)")


def load(dir: str | bytes | os.PathLike[str], *, cache_dir: str | bytes | os.PathLike[str] | None = None,
         disk_cache: bool = True,
         device: int = 0, backend: str = "auto") -> Program:
    """Loads a folder written by ``fusejit compile GRAPH --arch sm_XY -o DIR``: ``Program::load``.
    Its index, graph.txt and fused kernels are checked on any machine; loading for the GPU needs one
    (DriverError without one, once those checks pass). ``backend="cpu"`` runs the folder's graph on the CPU path instead
    (compiled by the host C++ compiler, as :func:`compile` does; the binaries are not used).
    cache_dir and disk_cache: the kernel cache, as in :func:`compile`, for a kernel the folder
    lacks (a 64-bit-index variant, dims whose broadcasts change the plan), which is then compiled
    with NVRTC; device: the CUDA device ordinal. Raises UserError for a bad folder."""
    _check_device(device)
    if not isinstance(backend, str):
        raise TypeError(f"backend: expected a str, got {type(backend).__name__}")
    return Program(_fusejit.load(dir, cache_dir, _flag(disk_cache, "disk_cache"), device, backend))



def compile_to_dir(graph: Graph, arch: str, out_dir: str | bytes | os.PathLike[str], *, fast_math: bool = False,
                   fused_only: bool = False, cache_dir: str | bytes | os.PathLike[str] | None = None,
                   disk_cache: bool = True, nvrtc_options: Sequence[str] = ()) -> list[KernelInfo]:
    """Writes the ahead-of-time folder :func:`load` runs, as ``fusejit compile GRAPH --arch ARCH -o
    OUT_DIR`` does (C++ ``fusejit::compile_to_dir``; format: docs/aot.md): graph.txt, each kernel's
    .cu and its CUBIN ("sm_90") or PTX ("compute_90"), index.json. Needs NVRTC, not a GPU, so a
    build machine without one writes it. fused_only: the fused plan's kernels only (a folder for
    deployment; the loaded program compiles its unfused plan with NVRTC on first use).
    fast_math, cache_dir, disk_cache and nvrtc_options as in :func:`compile`. Returns the kernels
    written, fused first. Raises UserError for a bad arch or an unwritable folder, CompileError
    when NVRTC fails or is missing."""
    if not isinstance(graph, Graph):
        raise TypeError(f"graph: expected a fusejit.Graph, got {type(graph).__name__}")
    if not isinstance(arch, str):
        raise TypeError(f"arch: expected a str such as 'sm_90', got {type(arch).__name__}")
    options = _nvrtc_options(nvrtc_options)
    return _fusejit.compile_to_dir(graph, arch, out_dir, _flag(fast_math, "fast_math"), cache_dir,
                                   _flag(disk_cache, "disk_cache"), options, _flag(fused_only, "fused_only"))


# The kernel cache on disk (the wheel has no `fusejit cache` command): docs/api.md, "The kernel cache".
def cache_path(cache_dir: str | bytes | os.PathLike[str] | None = None) -> str:
    """The kernel cache folder, an absolute path: cache_dir, else $FUSEJIT_CACHE_DIR, else
    $XDG_CACHE_HOME/fusejit, else ~/.cache/fusejit (``fusejit cache path``). Raises UserError when
    none is set or a cache environment variable is malformed."""
    return _fusejit.cache_path(cache_dir)


def cache_stats(cache_dir: str | bytes | os.PathLike[str] | None = None) -> CacheStats:
    """The cache folder's counts: GPU kernel entries and CPU-path host modules and their bytes, the
    size cap, damaged entries, temporary files, and why each subfolder the cache skips is skipped
    (``unusable_subfolders``; ``fusejit cache stats``). Reads the folder only.
    Raises UserError as :func:`cache_path`."""
    return _fusejit.cache_stats(cache_dir)


def cache_list(cache_dir: str | bytes | os.PathLike[str] | None = None) -> list[CacheEntry]:
    """Every entry of the cache folder, most recently used first (``fusejit cache list``), as a
    CacheEntry: ``key``, ``path`` (its file), ``bytes``, ``label`` (its kernels' names), ``target``
    ("sm_90", "compute_90" or "host"), ``valid`` and, when not, ``problem``; none for an absent folder. Raises UserError as :func:`cache_path`, and for a folder that
    cannot be looked into or is not a folder (as :func:`cache_clear`)."""
    return _fusejit.cache_list(cache_dir)


def cache_clear(cache_dir: str | bytes | os.PathLike[str] | None = None) -> int:
    """Removes every entry (GPU kernels and CPU host modules) and temporary file of the cache
    folder, except what builds running meanwhile in other processes use; returns how many entries
    were removed (``fusejit cache clear``). Programs already compiled keep their kernels (in
    memory); the next compile of a removed kernel compiles it again. Raises UserError as
    :func:`cache_path`, when some entry could not be removed (a read-only folder), naming it, and
    for a folder fusejit does not use as a cache (writable by other users, another user's:
    ``cache_stats().disabled_reason`` says why), whose files are not its to remove."""
    return _fusejit.cache_clear(cache_dir)


def __dir__() -> list[str]:
    """dir(fusejit): the public names (PEP 562), not the modules and typing names this file imports."""
    return sorted({*__all__, "__all__", "__doc__", "__version__", "translate"})
