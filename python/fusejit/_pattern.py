"""The *pattern* of a fused function's arguments (``fusejit.fuse``, docs/fuse.md "When it traces
again"): what of an argument that is no array decides the graph a trace records, as a hashable key.

- A scalar by its type and bits (``0.0`` and ``-0.0`` differ; a NumPy scalar by dtype and bytes),
  a tuple or frozenset element by element.
- An object of a class written in Python (a method's ``self``, a dataclass, a ``SimpleNamespace``)
  by its type and its attributes' values, recursively, never by its ``==`` (which may call objects
  equal that trace differently); its own arrays are inputs of the graph (``lifted``), keyed by
  dtype and shape where the caller keys arrays, and the trace sees a copy of it holding their
  values. Its attributes are read once per call (a ``Snapshot``).
- Where objects are shared is part of the pattern: a mutable object, container or array met a
  second time in one call's arguments (``self.a is self.b``, an object passed twice, a cycle) is
  keyed as the same one, so ``is`` in a trace sees what it saw when traced.
- Anything else (an enum member, an object without attributes such as a sentinel, a ``Decimal``,
  an object of the standard library, one too large to key at every call) by identity, through a
  weak reference where it takes one.
"""

from __future__ import annotations

import argparse
import collections
import copyreg
import enum
import functools
import os
import struct
import sys
import sysconfig
import types
import weakref
from typing import Any

import numpy as np

from ._errors import UserError
from ._fusejit import Value

_DOUBLE = struct.Struct("<d")


def FLOAT_KEY(v: float) -> bytes:  # noqa: N802  # a key function, as float.hex was
    """A float's bits: 0.0 and -0.0 differ, and so do NaNs of either sign (copysign reads it)."""
    return _DOUBLE.pack(v)



STATE_DEPTH = 6  # objects and containers nested in an argument, at most; deeper: by identity (a tuple: an error)
STATE_LEAVES = 256  # values keyed per object argument at most; an object with more is keyed by identity
TUPLE_LEAVES = 4096  # values keyed per tuple argument at most (a UserError beyond)
SMALL_ARRAY = 64  # an array within an attribute of at most this many elements is keyed by its bytes
IDENTITY = ("keyed by identity",)  # the mark of an object argument keyed by identity that fuse warns of
_PLAIN_SCALARS = frozenset({float, int, bool, str, type(None)})
_NEVER_LIFTED = _PLAIN_SCALARS | {np.ndarray}  # the common arguments, passed over first by lifted
_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class written in Python (or made at run time)


_MISSING = object()


def _type_memo(fn: Any) -> Any:
    """fn(t) kept per type: a class written in Python (a heap type) weakly, so no entry keeps a
    traced method's class, and with it its module's globals, alive (past nanobind's leak report at
    exit, which would name a GraphBuilder held there); a type of C (np.ndarray, float) for good."""
    strong: dict = {}
    weak: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @functools.wraps(fn)
    def memo(t: type) -> Any:
        r = strong.get(t, _MISSING)
        if r is not _MISSING:
            return r
        if t.__flags__ & _HEAP_TYPE:
            r = weak.get(t, _MISSING)
            if r is _MISSING:
                r = weak[t] = fn(t)
            return r
        r = strong[t] = fn(t)
        return r

    return memo


class ByIdentity:
    """A constant keyed by identity. Held by a weak reference where the object takes one (an object
    given to a fused function once is not kept alive by it; a dead one matches no later object of
    the same id), else kept alive, so its id is not reused."""

    __slots__ = ("ref", "strong", "id")

    def __init__(self, obj: Any):
        self.id = id(obj)
        try:
            self.ref, self.strong = weakref.ref(obj), None
        except TypeError:  # an int subclass, a list: no weak reference
            self.ref, self.strong = None, obj

    def get(self) -> Any:
        return self.strong if self.ref is None else self.ref()

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, ByIdentity) or other.id != self.id:
            return False
        obj = self.get()
        return obj is not None and other.get() is obj

    def __hash__(self) -> int:
        return self.id


class TooLarge(Exception):
    """An object's state is too large (or too deep) to key by value on every call."""


class Traced(Exception):
    """A constant argument holds a traced value (the object a trace passes on): the call is inside
    another trace, or the object kept a value of a finished one."""


@_type_memo
def _python_defined(t: type) -> bool:
    """A class written in Python: every base but object a heap type."""
    return t is not Value and all(c is object or c.__flags__ & _HEAP_TYPE for c in t.__mro__)


@_type_memo
def _slot_names(t: type) -> tuple:
    """The names of the slots instances of `t` hold (as copy and pickle find them)."""
    return tuple(copyreg._slotnames(t))  # type: ignore[attr-defined]  # what copy.copy uses


_STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"])


def _from_stdlib(t: type) -> bool:
    """A class of Python's standard library (a Logger, a Thread): a service, not a configuration;
    keyed by identity (its state may be global: a logger's manager). By the file its module was
    loaded from, not its name alone (a package of one's own may be called `code` or `queue`)."""
    if t.__module__.split(".")[0] not in sys.stdlib_module_names:
        return False
    path = getattr(sys.modules.get(t.__module__), "__file__", None)
    return path is None or os.path.realpath(path).startswith(_STDLIB + os.sep)


@_type_memo
def by_value(t: type) -> bool:
    """An object type keyed by its attributes' values: a SimpleNamespace or argparse Namespace, or
    a class written in Python (no C base), its state in __dict__ and __slots__; not an enum (its
    members are singletons), a class of the standard library, nor fusejit's Fused and Program: by
    identity."""
    if issubclass(t, (types.SimpleNamespace, argparse.Namespace)):
        return True
    return (_python_defined(t) and not issubclass(t, enum.Enum) and not _from_stdlib(t)
            and not getattr(t, "_fuse_by_identity", False))


@_type_memo
def _deletes(t: type) -> bool:
    """A class with a __del__: the copy a trace would see of its object would run it (its arrays
    are no inputs)."""
    return any("__del__" in vars(c) for c in t.__mro__ if c is not object)


def state_of(v: Any) -> dict:
    """An object's attributes: its __dict__ and the slots it has set."""
    names = _slot_names(type(v))
    state = dict(vars(v)) if type(v).__dictoffset__ else {}
    for n in names:
        if n not in state:
            try:
                state[n] = getattr(v, n)
            except AttributeError:  # a slot not set
                pass
    return state


@_type_memo
def array_type(t: type) -> bool:
    """An array type of NumPy, PyTorch or CuPy (a protocol the extension takes: DLPack, CUDA's or
    NumPy's array interface), not merely one with shape and dtype attributes (a layer object may
    have those); no NumPy scalar."""
    return issubclass(t, np.ndarray) or (not issubclass(t, np.generic) and any(
        hasattr(t, p) for p in ("__dlpack__", "__cuda_array_interface__", "__array_interface__")))


class ScalarCopy(np.ndarray):
    """A NumPy scalar argument as the 0-d array a program reads (as_array): no array of the caller's,
    so fuse gives it back, and an update of it, as a NumPy scalar, as NumPy's immutable scalars
    are (`s *= 2` rebinds s to a new scalar)."""


def as_array(v: Any) -> Any:
    """`v` as an input array (a NumPy scalar as a 0-d ScalarCopy), or None: not an array."""
    if isinstance(v, np.generic):
        return np.asarray(v).view(ScalarCopy)
    if isinstance(v, (Value, type)):  # a class such as np.float16 has shape and dtype descriptors
        return None
    if isinstance(v, np.ma.MaskedArray):
        raise UserError("a NumPy masked array is not supported: fusejit would read its data and ignore its mask; "
                        "pass a.filled(value), or the data and the mask as two arrays")
    if isinstance(v, np.matrix):
        raise UserError("a NumPy matrix is not supported: its * and ** are matrix products and its reductions keep "
                        "two dims, where fusejit's are elementwise; pass np.asarray(m)")
    if not array_type(type(v)):
        return None
    a = _with_shape(v)
    if a is None:
        raise UserError(f"a {type(v).__name__} has __dlpack__ but no shape or dtype: pass np.from_dlpack(a), or the "
                        "framework's tensor of it")
    return a


def _with_shape(v: Any) -> Any:
    """An array (array_type) with shape and dtype: itself, NumPy's view of an array interface alone
    (no copy), or None (DLPack alone)."""
    if hasattr(v, "shape") and hasattr(v, "dtype"):
        return v
    return np.asarray(v) if hasattr(type(v), "__array_interface__") else None


DTYPE_NAMES: dict = {}  # array dtype -> fusejit's name
_NO_DTYPE: dict = {}  # array dtype fusejit lacks -> why (UserError's message)


def dtype_name(dt: Any) -> str:
    """fusejit's name of an array's dtype (NumPy's, PyTorch's or CuPy's), looked up once per dtype
    (both tables hold the few dtypes a program meets; cleared past 256). UserError for a dtype
    fusejit lacks (saying to cast the array); TypeError for an unhashable one."""
    name = DTYPE_NAMES.get(dt)
    if name is not None:
        return name
    why = _NO_DTYPE.get(dt)
    if why is None:
        from . import _dtype_name
        try:
            name = _dtype_name(dt, of_array=True)
        except UserError as e:
            why = e.message
        table, entry = (DTYPE_NAMES, name) if why is None else (_NO_DTYPE, why)
        if len(table) >= 256:
            table.clear()
        table[dt] = entry
    if why is not None:
        raise UserError(why)
    return name


def input_attribute(e: Any) -> bool:
    """An object argument's attribute that is an input (lifted): an array (array_type) of a fusejit
    dtype. A NumPy scalar is a constant, as a number."""
    if not array_type(type(e)):
        return False
    try:
        dt = e.dtype
        return dt in DTYPE_NAMES or (dt not in _NO_DTYPE and bool(dtype_name(dt)))
    except (UserError, TypeError, AttributeError):  # a dtype fusejit lacks, an unhashable or absent one
        return False


def arrays_not_inputs(snap: Snapshot) -> list[str]:
    """The array attributes of an object argument that are not inputs of the trace (lifted), each
    with why: "w (uint32: ...)". A trace's TypeError for an ndarray operand names them (it said
    only "pass it as an argument")."""
    out = []
    for n, e in snap.state.items():
        if n in snap.inputs or not array_type(type(e)):
            continue
        if _deletes(type(snap.obj)):
            out.append(f"{n} (its class {type(snap.obj).__name__} defines __del__, which the trace's copy of the "
                       "object would run)")
            continue
        try:
            dtype_name(e.dtype)
        except (UserError, TypeError, AttributeError) as err:
            out.append(f"{n} ({getattr(err, 'message', str(err))})")
    return out


class Attr(str):
    """The last part of the tag of an object argument's input attribute (lifted): its name."""


def tag_name(tag: tuple) -> str:
    """The name of an argument tagged (parameter,), (*args parameter, index) or (**kwargs parameter,
    key), or of an input attribute of one, tag + (Attr(name),): "self_w"."""
    if isinstance(tag[-1], Attr):
        return f"{tag_name(tag[:-1])}_{tag[-1]}"
    if len(tag) == 1:
        return tag[0]
    return f"{tag[0]}{tag[1]}" if isinstance(tag[1], int) else tag[1]


def tag_expression(tag: tuple) -> str:
    """The Python expression of an argument's tag, as the function's code names it: "p",
    "args[0]", "kwargs['w']", "opt.w" (an input attribute of an object argument)."""
    if isinstance(tag[-1], Attr):
        return f"{tag_expression(tag[:-1])}.{tag[-1]}"
    if len(tag) == 1:
        return tag[0]
    return f"{tag[0]}[{tag[1]!r}]"


class Snapshot:
    """An object argument as one call reads it (lifted): the object, its attributes (read once),
    its input attributes (name -> the name of the first attribute holding the same array: one
    input per array), and the tag of the argument that holds it first."""

    __slots__ = ("obj", "state", "inputs", "tag")

    def __init__(self, obj: Any, state: dict, inputs: dict, tag: tuple = ()):
        self.obj, self.state, self.inputs, self.tag = obj, state, inputs, tag


@_type_memo
def _keyed_by_value(t: type) -> bool:
    """A class whose objects lifted reads: keyed by value (by_value) and no array (as_array)."""
    return by_value(t) and not array_type(t) and not issubclass(t, (Value, type))


def lifted(items: list) -> list:
    """`items` ((tag, argument) pairs) with each object argument keyed by value (by_value, not
    array-like, with 1 to STATE_LEAVES attributes) as a Snapshot, followed by its input
    attributes, one per array, as arguments of their own tagged tag + (Attr(name),): inputs of
    the graph, read at every call (a layer's weights). An object of a class with __del__ has none
    (the copy the trace would see would run it)."""
    out, taken = None, {}  # taken: id -> the Snapshot of an object met in an earlier argument
    for k, (tag, v) in enumerate(items):
        t = type(v)
        state = state_of(v) if t not in _NEVER_LIFTED and _keyed_by_value(t) else {}
        if not 0 < len(state) <= STATE_LEAVES:
            if out is not None:
                out.append((tag, v))
            continue
        if out is None:
            out = items[:k]
        if id(v) in taken:  # passed twice: its inputs are the first argument's
            out.append((tag, taken[id(v)]))
            continue
        first: dict = {}  # id(array) -> the first attribute holding it
        inputs = {} if _deletes(type(v)) else {
            n: first.setdefault(id(e), n) for n, e in state.items() if input_attribute(e)}
        snap = taken[id(v)] = Snapshot(v, state, inputs, tag)
        out += [(tag, snap)] + [(tag + (Attr(n),), state[n]) for n in first.values()]
    return items if out is None else out


def scalar_key(v: Any) -> Any:
    """A scalar's key, by type and bits (a float by its hex: 0.0 and -0.0 differ; a NumPy scalar by
    dtype and bytes: datetime64 days are not seconds); None for any other value."""
    t = type(v)  # the real type: a proxy or mock whose __class__ claims float is none
    if issubclass(t, np.generic):
        return (t, v.dtype.str, v.tobytes())
    if issubclass(t, float):  # float and its subclasses
        return (t, FLOAT_KEY(v))
    # The values themselves, through the base types' own conversions: a subclass's __int__,
    # __str__ or __bytes__ could give two values one key (and run a stale trace).
    if issubclass(t, complex):
        return (t, FLOAT_KEY(complex.real.__get__(v)), FLOAT_KEY(complex.imag.__get__(v)))
    if issubclass(t, int):  # bool too
        return (t, int.__int__(v))
    if issubclass(t, str):
        return (t, str.__str__(v))
    if issubclass(t, bytes):
        return (t, bytes(memoryview(v)))
    if v is None or v is Ellipsis:
        return (t,)
    if t is range:
        return (t, v.start, v.stop, v.step)
    return None


class Keying:
    """One call's keying: the values an argument may still hold (`left`), and the mutable objects,
    containers and arrays met so far in its arguments, id -> order met (`seen`, `kept` alive): one
    met again (`self.a is self.b`, an object reachable from two arguments, a cycle) is keyed as
    ("same", order), so patterns whose objects are shared differently differ."""

    __slots__ = ("left", "seen", "kept")

    def __init__(self) -> None:
        self.left, self.seen, self.kept = 0, {}, []

    def meet(self, v: Any) -> Any:
        """("same", order) for an object met before in this call, else None (and it is met now)."""
        k = self.seen.get(id(v))
        if k is not None:
            return ("same", k)
        self.seen[id(v)] = len(self.kept)
        self.kept.append(v)
        return None


def constant_key(v: Any, keying: Keying | None = None) -> Any:
    """An argument's key when it is no array (module docstring); `keying`: the call's, shared by
    its arguments. TypeError for an unhashable one that is no object of a Python class (a list, a
    dict, a memoryview); UserError for a tuple too large to key; Traced."""
    t = type(v)
    if t in _PLAIN_SCALARS:  # the common argument first
        return scalar_key(v)
    keying = Keying() if keying is None else keying
    if t is Snapshot or by_value(t):
        return _argument_key(v if t is Snapshot else Snapshot(v, state_of(v), {}), keying)
    if isinstance(v, (tuple, frozenset)) or t is types.MethodType or scalar_key(v) is not None:
        return _unshared_argument_key(v, keying)
    if not _python_defined(t):
        hash(v)  # a TypeError for a list, a dict, a memoryview: no constant
    if t.__flags__ & _HEAP_TYPE and t.__dictoffset__ and not _from_stdlib(t) and not issubclass(t, enum.Enum) and vars(v):
        return (t, ByIdentity(v), IDENTITY)  # a Python class with a C base (an Exception): fuse warns
    return (t, ByIdentity(v))


def _unshared_argument_key(v: Any, keying: Keying) -> Any:
    """An argument that is a tuple, frozenset, bound method or scalar (with a subclass's
    attributes) by value; too large, a bound method by identity, a tuple a UserError."""
    keying.left = TUPLE_LEAVES if isinstance(v, (tuple, frozenset)) else STATE_LEAVES
    try:
        return _unshared_key(v, keying, 0)
    except TooLarge:
        if type(v) is types.MethodType:
            return (types.MethodType, ByIdentity(v.__func__), ByIdentity(v.__self__))
        if not isinstance(v, (tuple, frozenset)):
            return (type(v), ByIdentity(v), IDENTITY)  # a scalar subclass holding too much
        raise UserError(f"holds more than {TUPLE_LEAVES} values, or containers and objects nested more than "
                        f"{STATE_DEPTH} deep, to key by value at every call") from None


def _with_attributes(key: Any, v: Any, keying: Keying, depth: int) -> Any:
    """`key` of a scalar or container, and the attributes an instance of a subclass holds (in its
    __dict__ or its slots: a str subclass with a `scale` slot traced at 2 ran again at 5)."""
    t = type(v)
    state = state_of(v) if t.__dictoffset__ or _slot_names(t) else None
    if not state:
        return key
    return (key, tuple((n, _state_key(e, keying, depth + 1)) for n, e in state.items()))


def _argument_key(snap: Snapshot, keying: Keying) -> Any:
    """An object argument by its type and attributes, its input attributes as ("input", the
    attribute holding that array first). Without attributes (a sentinel) by identity; too large,
    by identity with the IDENTITY mark (fuse warns: its changes are not seen)."""
    obj, t = snap.obj, type(snap.obj)
    if not snap.state:
        return (t, ByIdentity(obj))
    if len(snap.state) > STATE_LEAVES:
        return (t, ByIdentity(obj), IDENTITY)
    same = keying.meet(obj)
    if same is not None:  # passed twice
        return same
    keying.left = STATE_LEAVES
    try:
        return (t, tuple((n, ("input", snap.inputs[n]) if n in snap.inputs else _state_key(e, keying, 1))
                         for n, e in snap.state.items()))
    except TooLarge:
        return (t, ByIdentity(obj), IDENTITY)


def _state_key(v: Any, keying: Keying, depth: int) -> Any:
    """The key of what an object argument holds: a scalar as scalar_key, a container by its
    elements, an array by dtype and shape (and its bytes when small: a trace may read its values;
    else its identity: a change in place is not seen), an object keyed by value by its
    attributes, a bound method by its function and object, anything else by identity; a mutable
    one met before in the call as ("same", order). Raises TooLarge past the values left or
    STATE_DEPTH levels, Traced for a traced value."""
    keying.left -= 1
    if keying.left < 0 or depth > STATE_DEPTH:
        raise TooLarge
    t = type(v)
    if t in _PLAIN_SCALARS:  # the common attribute first: eps, a flag, a name
        return (t, FLOAT_KEY(v)) if t is float else (t, v)
    if isinstance(v, Value):
        raise Traced
    fixed = _unshared_key(v, keying, depth)
    if fixed is not None:
        return fixed
    a = _with_shape(v) if array_type(t) else None
    shared = a is not None or by_value(t) or isinstance(v, _CONTAINERS)
    same = keying.meet(v) if shared else None
    if same is not None:
        return same
    if a is not None:
        return _array_key(v, a, keying, depth)
    return _held_key(v, keying, depth)


def _array_key(v: Any, a: Any, keying: Keying, depth: int) -> Any:
    """An array held in an argument (`a`: it with shape and dtype) by dtype and shape, and its
    bytes when small (its elements' keys for objects), else its identity."""
    shape = tuple(int(s) for s in a.shape)
    if isinstance(a, np.ndarray) and a.size <= SMALL_ARRAY:
        if a.dtype.hasobject:  # its elements are objects: by their keys
            return (type(v), a.dtype.str, shape, tuple(_state_key(e, keying, depth + 1) for e in a.flat))
        return (type(v), a.dtype.str, shape, np.ascontiguousarray(a).tobytes())
    return (type(v), str(a.dtype), shape, ByIdentity(v))


def _unshared_key(v: Any, keying: Keying, depth: int) -> Any:
    """_state_key of what sharing cannot change (a tuple, frozenset, scalar, bound method, and the
    attributes of a subclass of one), or None."""
    if isinstance(v, tuple):
        return _with_attributes((type(v), tuple(_state_key(e, keying, depth + 1) for e in v)), v, keying, depth)
    if isinstance(v, frozenset):
        return _with_attributes((type(v), _multiset(v, keying, depth)), v, keying, depth)
    if type(v) is types.MethodType:
        return _method_key(v, keying, depth)
    key = scalar_key(v)
    return key if key is None else _with_attributes(key, v, keying, depth)


def _held_key(v: Any, keying: Keying, depth: int) -> Any:
    """_state_key of a container (and of the attributes of a subclass of one) or an object (met
    now), or by identity."""
    t = type(v)
    if isinstance(v, _CONTAINERS):
        key = (t, _elements_key(v.data if isinstance(v, (collections.UserList, collections.UserDict)) else v,
                                keying, depth))
        extra = {n: e for n, e in state_of(v).items() if n != "data"} if t.__dictoffset__ or _slot_names(t) else {}
        return key + (tuple((n, _state_key(e, keying, depth + 1)) for n, e in extra.items()),) if extra else key
    if by_value(t):
        state = state_of(v)
        if not state:  # a sentinel: `is` tells it apart from another of its class
            return (t, ByIdentity(v))
        return (t, tuple((n, _state_key(e, keying, depth + 1)) for n, e in state.items()))
    return (t, ByIdentity(v))


_CONTAINERS = (list, collections.deque, set, dict, collections.UserList, collections.UserDict)


def _elements_key(v: Any, keying: Keying, depth: int) -> Any:
    """A list's, deque's, set's or dict's elements (a set's as a multiset, a deque's maxlen too)."""
    if isinstance(v, set):
        return _multiset(v, keying, depth)
    if isinstance(v, dict):
        return tuple((_state_key(k, keying, depth + 1), _state_key(e, keying, depth + 1)) for k, e in v.items())
    maxlen = (v.maxlen,) if isinstance(v, collections.deque) else ()
    return maxlen + tuple(_state_key(e, keying, depth + 1) for e in v)


def _multiset(v: Any, keying: Keying, depth: int) -> frozenset:
    """A set's elements' keys, each with its count (two equal objects are two elements). Keyed
    apart from the rest of the call (their order of meeting depends on the set's iteration
    order, which may differ between equal patterns): their sharing is no part of the pattern."""
    inner = Keying()
    inner.left = keying.left
    keys = [_state_key(e, inner, depth + 1) for e in v]
    keying.left = inner.left
    return frozenset(collections.Counter(keys).items())


def _method_key(v: types.MethodType, keying: Keying, depth: int) -> Any:
    """A bound method (a new object at each access) by its function and its object's key (as an
    attribute's: that object's arrays are no inputs)."""
    return (types.MethodType, ByIdentity(v.__func__), _state_key(v.__self__, keying, depth + 1))


def traced_attribute(state: dict) -> str:
    """The first attribute of an object's `state` (state_of) that holds a traced value (Traced), or ""."""
    for n, e in state.items():
        keying = Keying()
        keying.left = float("inf")
        try:
            _state_key(e, keying, 0)
        except Traced:
            return n
        except TooLarge:
            pass
    return ""


def trace_copies(items: list, values: dict) -> dict:
    """{id(object): the object the trace sees} for each object argument with input attributes: one copy
    per object (an object passed twice is one), of its class, made without __init__, holding its
    attributes as read (references to itself: to the copy) and each input attribute's Value,
    values[tag of the argument holding it first + (Attr(the attribute holding that array
    first),)]. A copy, not the object: a thread that uses the object meanwhile never sees a
    traced value."""
    copies: dict = {}
    for _, v in items:
        if type(v) is not Snapshot or not v.inputs or id(v.obj) in copies:
            continue
        t = type(v.obj)
        c = copies[id(v.obj)] = (t.__new__(t) if issubclass(t, (types.SimpleNamespace, argparse.Namespace))
                                 else object.__new__(t))
        held = {n: values[v.tag + (Attr(v.inputs[n]),)] if n in v.inputs else c if e is v.obj else e
                for n, e in v.state.items()}
        in_dict = vars(v.obj) if t.__dictoffset__ else {}
        for n, e in held.items():
            if n in in_dict:  # as it was held: past a property of the same name, any key
                c.__dict__[n] = e
            else:  # a slot
                object.__setattr__(c, n, e)
    return copies


def swap_copies(v: Any, copies: dict) -> Any:
    """An argument as the trace sees it: an object copied (trace_copies) as its copy, also within
    tuples (`f(a, (a,))` keeps `t[0] is p`); lists, dicts and objects are not looked into."""
    if id(v) in copies:
        return copies[id(v)]
    if (type(v) is tuple or hasattr(type(v), "_make")) and isinstance(v, tuple) and copies:
        swapped = [swap_copies(e, copies) for e in v]
        if any(a is not b for a, b in zip(swapped, v)):
            return tuple(swapped) if type(v) is tuple else type(v)._make(swapped)
    return v


def _attributes_of(key: Any) -> dict | None:
    """{name: key} of an object's key (_object_key), None for another key."""
    if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], type) and isinstance(key[1], tuple)):
        return None
    if not by_value(key[0]) or not all(isinstance(p, tuple) and len(p) == 2 for p in key[1]):
        return None
    return dict(key[1])


def attribute_difference(before: Any, after: Any) -> str:
    """The first attribute whose key differs between two keys of one object (_object_key), or ""."""
    names_before, names_after = _attributes_of(before), _attributes_of(after)
    if names_before is None or names_after is None:
        return ""
    for n in list(names_before) + [n for n in names_after if n not in names_before]:
        if names_before.get(n, "absent") != names_after.get(n, "absent"):
            return n
    return ""


def pattern_difference(before: tuple | None, key: tuple) -> str:
    """Where two patterns of one function differ: "argument 'x'" or "argument 'self', attribute
    'layer_idx'"; "" when they differ in which arguments they have."""
    if before is None or before[0] != key[0] or len(before[1]) != len(key[1]):
        return ""
    for a, b in zip(before[1], key[1]):
        if a != b:
            if a[0] != b[0]:
                return ""
            what = attribute_difference(a[1], b[1]) if len(a) == 2 == len(b) else ""
            return f"argument '{tag_name(a[0])}'" + (f", attribute '{what}'" if what else "")
    return ""


def serves(traced: tuple, key: tuple) -> bool:
    """Whether the program traced for the pattern `traced` runs calls of the pattern `key` (both of
    one function, duck-sized): the same pattern but that some of `traced`'s classes of equal sizes
    are equal in `key` too (a decode step whose sequence length reaches the head count). Its graph
    then has two named dims where the call's sizes are equal, and a graph never combines two named
    dims on one axis (the trace would have failed; a trace that made an error, caught or not,
    serves no other pattern: _fuse._Entry.servable), so it runs them, with the same ops and bits,
    as torch.compile's graph with two size symbols runs a call where they are equal."""
    if traced[0] or key[0] or len(traced[1]) != len(key[1]):  # static: sizes are part of the pattern
        return False
    classes: dict = {}  # traced class -> the call's class
    for a, b in zip(traced[1], key[1]):
        if len(a) != 3 or len(b) != 3:  # constants
            if a != b:
                return False
            continue
        if a[:2] != b[:2] or len(a[2]) != len(b[2]):
            return False
        for s, t in zip(a[2], b[2]):
            if (s == -1 or t == -1) and s != t:  # a size of 1 broadcasts
                return False
            if classes.setdefault(s, t) != t:
                return False
    return True
