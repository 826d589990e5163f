"""The *pattern* of a fused function's arguments (``fusejit.fuse``, docs/python.md "When it traces
again"): what of an argument that is no array decides the graph a trace records, as a hashable key.

- A scalar by its type and bits (``0.0`` and ``-0.0`` differ; a NumPy scalar by dtype and bytes),
  a tuple or frozenset element by element.
- An object of a class written in Python (a method's ``self``, a dataclass, a ``SimpleNamespace``)
  by its type and its attributes' values, recursively, never by its ``==`` (which may call objects
  equal that trace differently); its own arrays are inputs of the graph (``lifted``), keyed by
  dtype and shape where the caller keys arrays. Its attributes are read once per call (a
  ``Snapshot``), and the trace sees a copy of them (``trace_copies``), so what it assigns or
  changes is not kept and another thread's change cannot pair one value with another's program.
- Anything else (an enum member, a sentinel with no attributes, a ``Decimal``, an object of a
  class with ``__slots__``, one too large to key at every call) by identity, through a weak
  reference where it takes one.
"""

from __future__ import annotations

import argparse
import collections
import copy as copy_module
import copyreg
import enum
import functools
import sys
import types
import weakref
from typing import Any

import numpy as np

from ._errors import UserError
from ._fusejit import Value

FLOAT_KEY = float.hex  # -0.0 and 0.0, each NaN payload alike: hex tells 0.0 from -0.0
STATE_DEPTH = 6  # objects and containers nested in an argument, at most; deeper: by identity (a tuple: an error)
STATE_LEAVES = 256  # values keyed per object argument at most; an object with more is keyed by identity
TUPLE_LEAVES = 4096  # values keyed per tuple argument at most (a UserError beyond)
SMALL_ARRAY = 64  # an array within an attribute of at most this many elements is keyed by its bytes
IDENTITY = ("keyed by identity",)  # the mark of an object argument keyed by identity that fuse warns of
_PLAIN_SCALARS = frozenset({float, int, bool, str, type(None)})
_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class written in Python (or made at run time)


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


@functools.lru_cache(maxsize=256)
def _python_defined(t: type) -> bool:
    """A class written in Python: every base but object a heap type."""
    return t is not Value and all(c is object or c.__flags__ & _HEAP_TYPE for c in t.__mro__)


@functools.lru_cache(maxsize=256)
def _slot_names(t: type) -> tuple:
    """The names of the slots instances of `t` hold (as copy and pickle find them)."""
    return tuple(copyreg._slotnames(t))  # type: ignore[attr-defined]  # what copy.copy uses


def _from_stdlib(t: type) -> bool:
    """A class of Python's standard library (a Logger, a Thread): a service, not a configuration;
    keyed by identity (its state may be global: a logger's manager)."""
    return t.__module__.split(".")[0] in sys.stdlib_module_names


@functools.lru_cache(maxsize=256)
def by_value(t: type) -> bool:
    """An object type keyed by its attributes' values: a SimpleNamespace or argparse Namespace, or
    a class written in Python (no C base), its state in __dict__ and __slots__; not an enum (its
    members are singletons), a class of the standard library, one with __del__ (a copy's would
    run), nor fusejit's Fused and Program: by identity."""
    if t in (types.SimpleNamespace, argparse.Namespace):
        return True
    return (_python_defined(t) and not issubclass(t, enum.Enum) and not _from_stdlib(t) and not _deletes(t)
            and not getattr(t, "_fuse_by_identity", False))


def _deletes(t: type) -> bool:
    """A class with a __del__ (a trace's copy of its object would run it: fuse warns)."""
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


@functools.lru_cache(maxsize=256)
def array_type(t: type) -> bool:
    """An array type of NumPy, PyTorch or CuPy (a protocol the extension takes: DLPack, CUDA's or
    NumPy's array interface), not merely one with shape and dtype attributes (a layer object may
    have those); no NumPy scalar."""
    return issubclass(t, np.ndarray) or (not issubclass(t, np.generic) and any(
        hasattr(t, p) for p in ("__dlpack__", "__cuda_array_interface__", "__array_interface__")))


def as_array(v: Any) -> Any:
    """`v` as an input array (a NumPy scalar as a 0-d array), or None: not an array."""
    if isinstance(v, np.generic):
        return np.asarray(v)
    if isinstance(v, (Value, type)):  # a class such as np.float16 has shape and dtype descriptors
        return None
    if isinstance(v, np.ma.MaskedArray):
        raise UserError("a NumPy masked array is not supported: fusejit would read its data and ignore its mask; "
                        "pass a.filled(value), or the data and the mask as two arrays")
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


@functools.lru_cache(maxsize=64)
def _fusejit_dtype(dt: Any) -> bool:
    """Whether fusejit has the array dtype `dt` (NumPy's, PyTorch's or CuPy's)."""
    from . import _dtype_name
    try:
        _dtype_name(dt)
    except (UserError, TypeError):
        return False
    return True


def input_attribute(e: Any) -> bool:
    """An object argument's attribute that is an input (lifted): an array (array_type) of a fusejit
    dtype. A NumPy scalar is a constant, as a number."""
    if not array_type(type(e)):
        return False
    try:
        return _fusejit_dtype(e.dtype)
    except (TypeError, AttributeError):  # an unhashable or absent dtype
        return False


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


class Snapshot:
    """An object argument as one call sees it: the object and its attributes, read once (lifted).
    `copy`, for a trace only (trace_copies): the object the trace sees."""

    __slots__ = ("obj", "state", "copy")

    def __init__(self, obj: Any, state: dict, copy: Any = None):
        self.obj, self.state, self.copy = obj, state, copy


def lifted(items: list) -> list:
    """`items` ((tag, argument) pairs) with each object argument keyed by value (by_value, not
    array-like) as a Snapshot, followed by its input attributes as arguments of their own, tagged
    tag + (Attr(name),): inputs of the graph, read at every call (a layer's weights). Not an
    object without attributes (a sentinel: by identity) or with too many to key at every call."""
    out = None
    for k, (tag, v) in enumerate(items):
        state = state_of(v) if type(v) is not np.ndarray and by_value(type(v)) and as_array(v) is None else {}
        if not 0 < len(state) <= STATE_LEAVES:
            if out is not None:
                out.append((tag, v))
            continue
        if out is None:
            out = items[:k]
        out += [(tag, Snapshot(v, state))] + [(tag + (Attr(n),), e) for n, e in state.items() if input_attribute(e)]
    return items if out is None else out


def scalar_key(v: Any) -> Any:
    """A scalar's key, by type and bits (a float by its hex: 0.0 and -0.0 differ; a NumPy scalar by
    dtype and bytes: datetime64 days are not seconds); None for any other value."""
    t = type(v)
    if isinstance(v, np.generic):
        return (t, v.dtype.str, v.tobytes())
    if isinstance(v, float):  # float and its subclasses
        return (t, FLOAT_KEY(v))
    if isinstance(v, complex):
        return (t, FLOAT_KEY(v.real), FLOAT_KEY(v.imag))
    if isinstance(v, (bool, int)):
        return (t, int(v))
    if isinstance(v, (str, bytes)):
        return (t, bytes(v) if isinstance(v, bytes) else str(v))
    if v is None or v is Ellipsis:
        return (t,)
    if isinstance(v, range):
        return (t, v.start, v.stop, v.step)
    return None


def constant_key(v: Any) -> Any:
    """An argument's key when it is no array (module docstring). TypeError for an unhashable one
    that is no object of a Python class (a list, a dict, a memoryview); UserError for a tuple too
    large to key; Traced."""
    key = scalar_key(v)
    if key is not None:
        return key
    t = type(v)
    if t is Snapshot:  # its copy's state refers to the copy where the object's refers to the object
        return _object_key(v.obj, None, 0, v.state, v.obj if v.copy is None else v.copy)
    if isinstance(v, (tuple, frozenset)):
        try:
            return _state_key(v, [TUPLE_LEAVES, []], 0)
        except TooLarge:
            raise UserError(f"holds more than {TUPLE_LEAVES} values, or containers and objects nested more than "
                            f"{STATE_DEPTH} deep, to key by value at every call") from None
    if by_value(t):
        return _object_key(v, None, 0)
    if not _python_defined(t):
        hash(v)  # a TypeError for a list, a dict, a memoryview: no constant
    elif _deletes(t):  # its changes are not seen: fuse warns
        return (t, ByIdentity(v), IDENTITY)
    return (t, ByIdentity(v))


def _state_key(v: Any, budget: list, depth: int) -> Any:
    """The key of what an object argument holds: a scalar as scalar_key, a container by its
    elements, an array by dtype and shape (and its bytes when small: a trace may read its values;
    else its identity: a change in place is not seen), an object keyed by value by its
    attributes, anything else by identity. Raises TooLarge past the budget's values or STATE_DEPTH
    levels, Traced for a traced value. `budget`: [values left, the containers and objects being
    keyed, outermost first]."""
    budget[0] -= 1
    if budget[0] < 0:
        raise TooLarge
    t = type(v)
    if t in _PLAIN_SCALARS:  # the common attribute first: eps, a flag, a name
        return (t, FLOAT_KEY(v)) if t is float else (t, v)
    if isinstance(v, Value):
        raise Traced
    if isinstance(v, (list, tuple, collections.deque, set, frozenset, dict)):
        return _container_key(v, budget, depth + 1)
    scalar = scalar_key(v)
    if scalar is not None:
        return scalar
    a = _with_shape(v) if array_type(t) else None
    if a is not None:
        shape = tuple(int(s) for s in a.shape)
        if isinstance(a, np.ndarray) and a.size <= SMALL_ARRAY and not a.dtype.hasobject:
            return (t, a.dtype.str, shape, np.ascontiguousarray(a).tobytes())
        return (t, str(a.dtype), shape, ByIdentity(v))
    if by_value(t):
        return _object_key(v, budget, depth + 1)
    return (t, ByIdentity(v))


def _cycle(path: list, v: Any) -> Any:
    """("cycle", place) when `v` is being keyed already (a reference back to it), else None."""
    for k, o in enumerate(path):
        if o is v:
            return ("cycle", k)
    return None


def _container_key(v: Any, budget: list, depth: int) -> Any:
    """A list, tuple, deque, set or dict by its elements (_state_key); one holding itself, by its
    place among the containers and objects being keyed."""
    path = budget[1]
    back = _cycle(path, v)
    if back is not None:
        return back
    if depth > STATE_DEPTH:
        raise TooLarge
    path.append(v)
    try:
        if isinstance(v, (set, frozenset)):
            return (type(v), frozenset(_state_key(e, budget, depth) for e in v))
        if isinstance(v, dict):
            return (type(v), tuple((_state_key(k, budget, depth), _state_key(e, budget, depth)) for k, e in v.items()))
        return (type(v), tuple(_state_key(e, budget, depth) for e in v))
    finally:
        path.pop()


def _object_key(v: Any, budget: list | None, depth: int, state: dict | None = None, itself: Any = None) -> Any:
    """An object by its type and attributes (`state`, else state_of(v)); an argument's own (budget
    None) input attributes as ("input",), keyed where lifted adds them. One without attributes (a
    sentinel) by identity. Too large, an argument is keyed by identity with the IDENTITY mark (fuse
    warns); raises TooLarge within another object. `itself`: what a reference back to it is (v, or
    the trace's copy whose state this is)."""
    inner = [STATE_LEAVES, []] if budget is None else budget
    itself = v if itself is None else itself
    back = _cycle(inner[1], itself)
    if back is not None:
        return back
    state = state_of(v) if state is None else state
    if not state:
        return (type(v), ByIdentity(v))
    if depth > STATE_DEPTH or len(state) > inner[0]:
        if budget is not None:
            raise TooLarge
        return (type(v), ByIdentity(v), IDENTITY)
    inner[1].append(itself)
    try:
        return (type(v), tuple((n, ("input",) if budget is None and input_attribute(e) else _state_key(e, inner, depth))
                               for n, e in state.items()))
    except TooLarge:
        if budget is not None:
            raise
    finally:
        inner[1].pop()
    return (type(v), ByIdentity(v), IDENTITY)


def _state_copy(v: Any, memo: dict) -> Any:
    """A copy of what an object argument holds, for its trace: containers and objects keyed by
    value are copied (a trace that changes them changes the copy, not the caller's), anything
    else (arrays, scalars, objects keyed by identity) is shared. `memo`: id -> copy (cycles)."""
    if type(v) in _PLAIN_SCALARS or id(v) in memo:
        return memo.get(id(v), v)
    if isinstance(v, (list, collections.deque, set, dict)):
        c = memo[id(v)] = copy_module.copy(v)  # its type, maxlen, default_factory
        c.clear()
        if isinstance(v, dict):
            c.update((k, _state_copy(e, memo)) for k, e in v.items())
        elif isinstance(v, set):
            c.update(_state_copy(e, memo) for e in v)
        else:
            c.extend(_state_copy(e, memo) for e in v)
        return c
    if type(v) is tuple:
        return tuple(_state_copy(e, memo) for e in v)
    if by_value(type(v)) and as_array(v) is None:
        c = memo[id(v)] = blank(type(v))
        fill(c, {n: _state_copy(e, memo) for n, e in state_of(v).items()})
        return c
    return v


def fill(c: Any, state: dict) -> None:
    """Sets the attributes `state` on `c` (a blank object), past a frozen dataclass's __setattr__."""
    for n, e in state.items():
        object.__setattr__(c, n, e)


def blank(t: type) -> Any:
    """An instance of `t` with no attributes, made without its __init__ (a trace's copy)."""
    return t() if t in (types.SimpleNamespace, argparse.Namespace) else object.__new__(t)


def trace_copies(items: list) -> list:
    """`items` with each Snapshot given the copy its trace sees: an object of its class holding a
    copy of its attributes (_state_copy; references to the object itself, or an object passed
    twice: one copy), taken before the trace; the pattern is keyed from it (what was traced is
    what the key says)."""
    out, memo = [], {}
    for tag, v in items:
        if type(v) is Snapshot:
            c = memo.get(id(v.obj))
            first = c is None
            if first:
                c = memo[id(v.obj)] = blank(type(v.obj))
            v = Snapshot(v.obj, {n: _state_copy(e, memo) for n, e in v.state.items()}, c)
            if first:
                fill(c, v.state)
        out.append((tag, v))
    return out


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
