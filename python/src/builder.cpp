// fusejit.GraphBuilder, fusejit.Value and fusejit.Dim: the C++ fusejit::GraphBuilder
// (lib/include/fusejit/fusejit.h) for Python, with Python operators on values. A Value holds its
// builder, so a builder lives as long as any of its values (the C++ Value only points at it).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "module.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace fusejit_py {

namespace {

// A Python int (or an object with __index__) as int64; Error(User) "<what>: X is outside int64".
int64_t checked_int64(nb::handle h, const std::string& what) {
  int64_t i = 0;
  if (!nb::try_cast(h, i))
    throw fusejit::Error(fusejit::ErrorKind::User, what + ": " + nb::cast<std::string>(nb::repr(h)) + " is outside int64");
  return i;
}

using fusejit::Error;
using fusejit::ErrorKind;

struct PyValue {
  fusejit::Value v;
  nb::object builder;  // the fusejit.GraphBuilder whose node `v` is
  bool updated = false;  // an in-place operator (v += 1) made it another node: _assign
};

struct PyDim {
  fusejit::DimRef ref;
  std::string name;
  int64_t size = 0;
  nb::object builder;
};

std::string py_type_name(nb::handle h) { return nb::cast<std::string>(nb::str(h.type().attr("__name__"))); }

// Whether `v` is an int equal to 0 (any int: an ndim of 2**70 made nb::cast<int> throw bad_cast).
bool zero_int(const nb::object& v) {
  if (!PyLong_Check(v.ptr())) return false;
  int overflow = 0;  // set past long long, with no Python error
  return PyLong_AsLongLongAndOverflow(v.ptr(), &overflow) == 0 && overflow == 0;
}

// The Python bool, int or float of a NumPy or PyTorch 0-d value (`.item()`), or nothing (a
// longdouble's item() is a longdouble again, a complex's a complex: no such number).
nb::object scalar_item(nb::handle h) {
  if (PyType_Check(h.ptr()) || !nb::hasattr(h, "item") || !nb::hasattr(h, "ndim")) return {};  // a class: its
  const nb::object ndim = h.attr("ndim");                                                     // ndim is a descriptor
  if (!zero_int(ndim)) return {};
  nb::object v = h.attr("item")();
  const bool number = PyBool_Check(v.ptr()) || PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr());
  return number ? v : nb::object();
}

// For a 0-d value (NumPy scalar, 0-d array) whose item() is no bool, int or float: why it is
// refused, naming its dtype; else "".
std::string odd_scalar(nb::handle h) {
  if (PyType_Check(h.ptr()) || !nb::hasattr(h, "ndim") || !nb::hasattr(h, "dtype")) return "";
  const nb::object ndim = h.attr("ndim");
  if (!zero_int(ndim)) return "";
  const nb::object dtype = h.attr("dtype");
  const nb::object text = nb::steal(PyObject_Str(dtype.ptr()));  // str(dtype): "complex64", "<U1"
  Py_ssize_t size = 0;
  const char* utf8 = text.is_valid() ? PyUnicode_AsUTF8AndSize(text.ptr(), &size) : nullptr;
  if (!utf8) {  // a __str__ that raised, or text that is not UTF-8 (a lone surrogate)
    PyErr_Clear();
    return "";
  }
  return " (a 0-d value of dtype " + std::string(utf8, static_cast<size_t>(size)) +
         ": fusejit's dtypes are bool, integers and floats up to 64 bits)";
}

}  // namespace

// An int argument within int64: a Python int or an integer NumPy scalar (anything with
// __index__), not a bool.
bool bool_like(nb::handle h) {
  return PyBool_Check(h.ptr()) || (nb::hasattr(h, "dtype") && nb::hasattr(h.attr("dtype"), "kind") &&
                                   nb::cast<std::string>(nb::str(h.attr("dtype").attr("kind"))) == "b");
}

int64_t int_arg(nb::handle h, const std::string& what) {
  nb::object index;
  if (!bool_like(h)) {
    PyObject* i = PyNumber_Index(h.ptr());
    if (i) index = nb::steal(i);
    else PyErr_Clear();
  }
  if (!index.is_valid()) throw nb::type_error((what + ": expected an int, got " + py_type_name(h)).c_str());
  return checked_int64(index, what);
}

// A reduction's correction: an int as int_arg takes it; one beyond int64 gets the library's
// range message (ir/builder_reduce.cpp) with its own value, not "outside int64".
int64_t correction_arg(nb::handle h, std::string_view op) {
  PyObject* i = bool_like(h) ? nullptr : PyNumber_Index(h.ptr());
  if (!i) PyErr_Clear();
  nb::object index = nb::steal(i);
  int64_t c = 0;
  if (index.is_valid() && !nb::try_cast(index, c)) {
    const std::string text = nb::cast<std::string>(nb::str(index));
    throw fusejit::Error(fusejit::ErrorKind::User,
                         std::string(op) + ": correction=" + text +
                             (text[0] == '-' ? " is negative (it must be 0 or more)" : " is out of range (it is at most 2^62)"));
  }
  return int_arg(h, "correction");
}

namespace {

// A dtype argument: a fusejit name ("f32") as it is, anything else (NumPy's and PyTorch's dtypes and
// scalar types) through fusejit._dtype_name, which maps them with the tables numpy_dtype and
// torch_dtype use and raises UserError for the rest.
fusejit::DType dtype_arg(nb::handle h) {
  if (nb::isinstance<nb::str>(h)) return parse_dtype(nb::cast<std::string>(h));
  return parse_dtype(nb::cast<std::string>(nb::module_::import_("fusejit").attr("_dtype_name")(h)));
}


// A bool argument: a Python bool or a NumPy bool scalar.
bool bool_arg(nb::handle h, const std::string& what) {
  if (PyBool_Check(h.ptr())) return h.ptr() == Py_True;
  if (nb::object v = scalar_item(h); v.is_valid() && PyBool_Check(v.ptr())) return v.ptr() == Py_True;
  throw nb::type_error((what + ": expected a bool, got " + py_type_name(h)).c_str());
}

// NumPy's axis= of reduction `op`, read once (an iterable: a range, an array, a generator) as to_axes
// reads axes; sets, dicts, bytes and strings refused, as NumPy refuses them, and an empty one too.
nb::object numpy_axis(std::string_view op, nb::handle value) {
  PyObject* v = value.ptr();
  if (value.is_none() || PyLong_Check(v)) return nb::borrow(value);
  if (PyAnySet_Check(v) || PyDict_Check(v) || PyBytes_Check(v) || PyByteArray_Check(v) || PyMemoryView_Check(v) ||
      PyUnicode_Check(v))
    throw nb::type_error(("axis: an int, a tuple of ints or None, got " + py_type_name(value)).c_str());
  PyObject* it = PyObject_GetIter(v);
  if (it == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw nb::python_error();
    PyErr_Clear();  // no iterable (a NumPy integer, a 0-d array): to_axes reads it
    return nb::borrow(value);
  }
  const nb::object iter = nb::steal(it);
  PyObject* t = PySequence_Tuple(iter.ptr());  // an error while iterating (a generator's own) is the call's
  if (t == nullptr) throw nb::python_error();
  nb::object seen = nb::steal(t);
  if (PyTuple_Check(seen.ptr()) && PyTuple_GET_SIZE(seen.ptr()) == 0)
    throw Error(ErrorKind::User, std::string(op) + " over axis=() reduces nothing in NumPy: use the value itself");
  return seen;
}

// NumPy's axis= or PyTorch's dim= (`k`) of reduction `op` as its axes. NumPy's keeps NumPy's
// meaning where fusejit's differs: axis=() reduces nothing (fusejit's empty axes are every axis,
// PyTorch's dim=()), and var/std need correction= (NumPy's ddof defaults to 0, fusejit's
// correction to PyTorch's 1).
void alias_axes(std::string_view op, const std::string& k, nb::handle value, nb::object& axes, bool& axes_given,
                nb::handle correction) {
  if (axes_given && !value.is_none()) throw nb::type_error("reduce(): give one of axes, axis and dim");
  const nb::object seen = k == "axis" ? numpy_axis(op, value) : nb::borrow(value);
  if (k == "axis" && (op == "var" || op == "std") && correction.is_none())
    throw nb::type_error(("reduce('" + std::string(op) + "', axis=...): give correction=N (NumPy's ddof=N): NumPy's "
                          "ddof defaults to 0, fusejit's correction to PyTorch's 1; or write v." + std::string(op) +
                          "(axis) for NumPy's").c_str());
  if (value.is_none()) return;
  axes = seen;
  axes_given = true;
}

// reduce()'s keyword arguments past its own: NumPy's keepdims is keepdim, NumPy's axis and
// PyTorch's dim are axes (as fusejit.reduce and Value.sum take them: a NumPy or PyTorch user types
// them by reflex); ddof/unbiased say what fusejit calls them (as the graph text's parser does),
// anything else lists the ones it takes. Updates `axes` (alias_axes); returns keepdim.
bool reduce_keywords(std::string_view op, nb::object& axes, nb::handle keepdim, nb::handle correction,
                     const nb::kwargs& extra) {
  nb::handle kd = keepdim;
  const char* name = "keepdim";
  bool axes_given = !axes.is_none();
  for (auto [key, value] : extra) {
    const std::string k = nb::cast<std::string>(nb::str(key));
    if (k == "keepdims" && !keepdim.is_none()) throw nb::type_error("reduce(): give keepdim or NumPy's keepdims, not both");
    if (k == "keepdims") {
      kd = value;
      name = "keepdims";
      continue;
    }
    if (k == "axis" || k == "dim") {
      alias_axes(op, k, value, axes, axes_given, correction);
      continue;
    }
    std::string hint = "reduce() takes name, x, axes (or axis, dim), keepdim (or keepdims), correction and initial";
    if (k == "ddof" || k == "unbiased") hint = "NumPy's ddof and PyTorch's unbiased are written correction=N here";
    throw nb::type_error(("reduce(): unknown argument '" + k + "': " + hint).c_str());
  }
  if (std::string_view(name) == "keepdims" && PyLong_Check(kd.ptr()) && !PyBool_Check(kd.ptr()))
    return PyObject_IsTrue(kd.ptr()) == 1;  // NumPy's keepdims=1, as NumPy takes it
  return !kd.is_none() && bool_arg(kd, name);
}

// op()'s operands are positional, as in graph text; a keyword (PyTorch's gelu(x, approximate=...),
// NumPy's out=/dtype=) gets a TypeError saying what to write instead of nanobind's signature dump.
void refuse_op_keywords(std::string_view name, const nb::kwargs& kwargs) {
  for (auto [key, value] : kwargs) {
    const std::string k = nb::cast<std::string>(nb::str(key));
    std::string hint = "its operands are positional: op('" + std::string(name) + "', x, ...)";
    if (k == "approximate") hint = "PyTorch's gelu(x, approximate=\"tanh\") is op('gelu_tanh', x) here";
    if (k == "dtype") hint = "cast the result with v.astype(dtype) or GraphBuilder.cast(x, dtype)";
    if (k == "out") hint = "outputs are named with GraphBuilder.output(name, v) and given when the program is called";
    throw nb::type_error(("op(): takes no keyword argument '" + k + "': " + hint).c_str());
  }
}

// A float argument: a Python int or float, or a NumPy scalar of one (not a bool).
double float_arg(nb::handle h, const std::string& what) {
  nb::object v = PyFloat_Check(h.ptr()) || PyLong_Check(h.ptr()) ? nb::borrow(h) : scalar_item(h);
  if (!v.is_valid() || PyBool_Check(v.ptr()) || !(PyFloat_Check(v.ptr()) || PyLong_Check(v.ptr())))
    throw nb::type_error((what + ": expected a float, got " + py_type_name(h)).c_str());
  const double d = PyFloat_AsDouble(v.ptr());  // an int beyond f64 raises OverflowError
  if (d == -1.0 && PyErr_Occurred()) nb::raise_python_error();
  return d;
}

fusejit::GraphBuilder& cpp(nb::handle builder);

// A value argument for `builder`: one of its Values, or a Python bool, int or float literal
// (a NumPy or PyTorch scalar through .item()), weakly typed as in PyTorch.
fusejit::Value to_value(nb::handle h, nb::handle builder) {
  if (nb::isinstance<PyValue>(h)) {
    const PyValue& pv = nb::cast<const PyValue&>(h);
    if (!pv.builder.is(builder)) {
      cpp(pv.builder);  // a finished fuse trace's value says so
      throw Error(ErrorKind::User, "a value of another GraphBuilder");
    }
    return pv.v;
  }
  if (PyBool_Check(h.ptr())) return fusejit::Value(h.ptr() == Py_True);
  if (PyLong_Check(h.ptr())) return fusejit::Value(checked_int64(h, "integer literal"));
  if (PyFloat_Check(h.ptr())) return fusejit::Value(nb::cast<double>(h));
  if (nb::object v = scalar_item(h); v.is_valid()) return to_value(v, builder);
  const std::string odd = odd_scalar(h);
  const std::string hint = !odd.empty()             ? odd
                           : nb::hasattr(h, "shape") ? " (an array is no graph value: pass it to a fused function as an "
                                                       "argument of its own, or to the graph as GraphBuilder.input; an "
                                                       "array a fused function reads from a global or from within a "
                                                       "tuple argument is none of its inputs)"
                                                     : "";
  throw nb::type_error(
      ("expected a fusejit.Value or a bool, int or float literal, got " + py_type_name(h) + hint).c_str());
}

// The C++ builder. A fuse trace's (python/fusejit/_fuse.py, _TraceBuilder, whose user made no
// builder) that has built its graph, or whose trace raised (`_ended`: it builds nothing), throws
// its `_spent_note` instead of the call's "build() ends it" or, for a trace that raised, of
// nothing (its values computed on in a dead builder, "a value of another GraphBuilder" later).
fusejit::GraphBuilder& cpp(nb::handle builder) {
  auto& b = nb::cast<fusejit::GraphBuilder&>(builder);
  if (b.built() ? nb::hasattr(builder, "_spent_note") : nb::hasattr(builder, "_ended"))  // one lookup a call
    throw Error(ErrorKind::User, nb::cast<std::string>(builder.attr("_spent_note")));
  return b;
}

// The fusejit package's folder: frames of its files are fusejit's own, not the caller's. Set once at
// module init (bind_builder), under the GIL: a function-local static initialised by Python code could
// deadlock (the GIL released inside the guard while another thread waits on it holding the GIL).
std::string g_package_dir;
const std::string& package_dir() { return g_package_dir; }

// What a fuse trace names its values from (python/fusejit/_fuse.py, _LocalNames): each value an op
// call made directly for the traced function's code (its innermost frame outside the package is
// a frame of that code), with the bytecode offset of the instruction that called it. The trace
// then reads which local the next instruction stores it in (dis). Found on the way
// caller_location walks anyway: no tracer (sys.settrace's events refreshed a locals() dict the
// function held, on Python before 3.13) and no frame held past the return (its locals' finalizers
// ran late, and a trace that raised kept its arguments alive: hostile testers' finds). Per
// thread, set by the trace around the call, under the GIL; raw references, taken back by it.
struct OpWatch {
  PyObject* code = nullptr;  // the traced function's code object
  PyObject* made = nullptr;  // a list of (offset, Value) it appends to
  int pending = -1;          // the offset of the op call under way, or -1 (not the function's own)
};
thread_local OpWatch t_watch;

// The value `v` an op call made for `builder`, recorded for the trace when the call was the
// traced function's own (a copy: an in-place operator later moves the returned object only).
nb::object made(fusejit::Value v, nb::handle builder) {
  nb::object o = nb::cast(PyValue{v, nb::borrow(builder)});
  if (t_watch.pending >= 0 && t_watch.made != nullptr) {
    nb::object entry = nb::make_tuple(t_watch.pending, nb::cast(PyValue{v, nb::borrow(builder)}));
    if (PyList_Append(t_watch.made, entry.ptr()) != 0) throw nb::python_error();
  }
  t_watch.pending = -1;
  return o;
}

// FILE, LINE and COLUMN (from 1; 0 before Python 3.11, which has no columns) of the innermost
// Python frame outside the fusejit package: the line of the caller's code that builds an op (a
// traced function's `return x - m`, through np.clip's or fusejit.op's frames); no file outside one.
std::tuple<std::string, int, int> caller_location() {
  t_watch.pending = -1;  // an earlier call's, if it raised or folded, is not this one's
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed; null outside Python code
  Py_XINCREF(frame);
  std::tuple<std::string, int, int> where{"", 0, 0};
  while (frame != nullptr) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new references, as PyFrame_GetBack's
    Py_ssize_t size = 0;
    const char* file = PyUnicode_AsUTF8AndSize(code->co_filename, &size);
    if (file == nullptr) {  // a name that is no UTF-8 (lone surrogates): not located, nor at a caller's line
      PyErr_Clear();
      Py_DECREF(code);
      break;
    }
    const std::string_view name(file, static_cast<size_t>(size));
    const bool own = name.rfind(package_dir(), 0) == 0;  // every frame where the folder is "" (no UTF-8 name)
    // The op's frame. A file named "" or holding a NUL (code compiled so) locates nothing, where
    // the walk went on to the caller's line and set_location refused the NUL (a hostile tester's).
    if (!own && !name.empty() && name.find('\0') == std::string_view::npos) {
      int line = std::max(PyFrame_GetLineNumber(frame), 0), col = 0;  // -1: no line known
#if PY_VERSION_HEX >= 0x030B0000
      int start_line = 0, start_col = 0, end_line = 0, end_col = 0;
      if (PyCode_Addr2Location(code, PyFrame_GetLasti(frame), &start_line, &start_col, &end_line, &end_col) &&
          start_line == line && start_col >= 0)
        col = start_col + 1;  // a byte offset in the line, as graph text's columns
#endif
      where = {std::string(name), line, col};
    }
#if PY_VERSION_HEX >= 0x030B0000
    if (!own) t_watch.pending = reinterpret_cast<PyObject*>(code) == t_watch.code ? PyFrame_GetLasti(frame) : -1;
#endif
    Py_DECREF(code);
    if (!own) break;
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  return where;
}

// The builder, its next nodes located at the caller's line (GraphBuilder::set_location), so a
// warning about them (an axis slip), or a program's error about them at a launch, names that line.
fusejit::GraphBuilder& at_caller(nb::handle builder) {
  fusejit::GraphBuilder& b = cpp(builder);
  const auto [file, line, col] = caller_location();
  b.set_location(file, line, col);
  return b;
}

nb::object apply(nb::handle builder, std::string_view op, std::initializer_list<nb::handle> args) {
  std::vector<fusejit::Value> vs;
  for (nb::handle a : args) vs.push_back(to_value(a, builder));
  return made(at_caller(builder).op(op, vs), builder);
}

}  // namespace

fusejit::Scalar to_scalar(nb::handle h, const std::string& what) {
  if (PyBool_Check(h.ptr())) return fusejit::Scalar(h.ptr() == Py_True);
  if (PyLong_Check(h.ptr())) {
    int64_t i = 0;
    if (nb::try_cast(h, i)) return fusejit::Scalar(i);
    // Integers are held in int64 (graph text refuses such a literal too); a float param takes float(v).
    throw Error(ErrorKind::User, what + ": " + nb::cast<std::string>(nb::repr(h)) +
                                     " is outside int64 (integers are held in int64; for a float param pass float(v))");
  }
  if (PyFloat_Check(h.ptr())) return fusejit::Scalar(nb::cast<double>(h));
  if (nb::object v = scalar_item(h); v.is_valid()) return to_scalar(v, what);
  // An array of one element ([2.0]) is not a 0-d one: say which shapes are taken.
  const std::string shape =
      !PyType_Check(h.ptr()) && nb::hasattr(h, "shape") ? nb::cast<std::string>(nb::repr(h.attr("shape"))) : "";
  throw nb::type_error((what + ": expected a bool, int or float, got " + py_type_name(h) +
                        (!odd_scalar(h).empty() ? odd_scalar(h)
                         : shape.empty()        ? ""
                                                : " of shape " + shape + " (a NumPy scalar or 0-d array is taken)"))
                           .c_str());
}

namespace {

std::vector<fusejit::Extent> to_extents(nb::handle builder, const nb::sequence& shape) {
  std::vector<fusejit::Extent> out;
  for (nb::handle e : shape) {
    if (nb::isinstance<PyDim>(e)) {
      const PyDim& d = nb::cast<const PyDim&>(e);
      if (!d.builder.is(builder)) throw Error(ErrorKind::User, "dim '" + d.name + "' belongs to another GraphBuilder");
      out.emplace_back(d.ref);
    } else if (!bool_like(e) && PyIndex_Check(e.ptr())) {  // an int, or an integer NumPy scalar as axes take
      out.emplace_back(int_arg(e, "shape"));
    } else {
      throw nb::type_error(("a shape holds ints and fusejit.Dims (GraphBuilder.dim), got " + py_type_name(e)).c_str());
    }
  }
  return out;
}

std::vector<int64_t> to_axes(nb::handle axes) {
  if (axes.is_none()) return {};
  if (nb::isinstance<nb::str>(axes))
    throw nb::type_error(("axes: an int, a sequence of ints or None (every axis), got " + py_type_name(axes)).c_str());
  // Iterable: a sequence of axes; else one axis (an int, a NumPy integer, a 0-d integer array; a
  // graph value, which has a len() but no iteration, is named as what it is).
  PyObject* it = PyObject_GetIter(axes.ptr());
  if (!it) {
    PyErr_Clear();
    return {int_arg(axes, "axes")};
  }
  Py_DECREF(it);
  std::vector<int64_t> out;
  for (nb::handle a : nb::iter(axes)) out.push_back(int_arg(a, "axes"));
  return out;
}

// Python's binary operators on values, by graph-format op name; reflected forms swap operands.
constexpr std::pair<const char*, const char*> kBinary[] = {
    {"add", "add"}, {"sub", "sub"}, {"mul", "mul"}, {"truediv", "div"}, {"floordiv", "floordiv"}, {"mod", "mod"},
    {"pow", "pow"}, {"and", "bitwise_and"}, {"or", "bitwise_or"}, {"xor", "bitwise_xor"}, {"lshift", "left_shift"},
    {"rshift", "right_shift"}};
constexpr std::pair<const char*, const char*> kCompare[] = {{"lt", "lt"}, {"le", "le"}, {"gt", "gt"}, {"ge", "ge"}};

void bind_value(nb::module_& m) {
  auto cls = nb::class_<PyValue>(
      m, "Value",
      "A value while building a graph (GraphBuilder): a node of its builder, which it keeps alive.\n\n"
      "Python operators build ops with NumPy broadcasting and PyTorch promotion (docs/ops.md): + - * / // % ** "
      "& | ^ << >> (add sub mul div floordiv mod pow bitwise_and bitwise_or bitwise_xor left_shift "
      "right_shift), unary - (neg), ~ (bitwise_not), abs() (abs), < <= > >= == != (lt le gt ge eq "
      "ne; == and != from the fusejit package, which also gives NumPy's ufuncs and reductions). A bool, int or float operand is a weakly "
      "typed literal (x * 2 keeps x's dtype).");
  for (auto [py, op] : kBinary) {
    const std::string name = py;
    const std::string fj = op;
    // .none(): `x + None` gets to_value's message, not nanobind's list of signatures.
    cls.def(("__" + name + "__").c_str(), [fj](nb::handle self, nb::handle o) {
      return apply(nb::cast<const PyValue&>(self).builder, fj, {self, o});
    }, nb::arg("other").none());
    cls.def(("__r" + name + "__").c_str(), [fj](nb::handle self, nb::handle o) {
      return apply(nb::cast<const PyValue&>(self).builder, fj, {o, self});
    }, nb::arg("other").none());
  }
  for (auto [py, op] : kCompare) {
    const std::string fj = op;
    cls.def(("__" + std::string(py) + "__").c_str(), [fj](nb::handle self, nb::handle o) {
      return apply(nb::cast<const PyValue&>(self).builder, fj, {self, o});
    }, nb::arg("other").none());
  }
  // NumPy then calls the reflected operators here (np.float32(2) * x, np.array(3.0) < x) instead of
  // building an object array of values.
  cls.attr("__array_ufunc__") = nb::none();
  cls.def("__neg__", [](nb::handle self) { return apply(nb::cast<const PyValue&>(self).builder, "neg", {self}); })
      .def("__invert__", [](nb::handle self) { return apply(nb::cast<const PyValue&>(self).builder, "bitwise_not", {self}); })
      .def("__abs__", [](nb::handle self) { return apply(nb::cast<const PyValue&>(self).builder, "abs", {self}); })
      .def("__bool__", [](nb::handle) -> bool {
        throw nb::type_error("a graph value has no truth value while the graph is built: use where(cond, a, b) (np.where), and "
                            "np.maximum / np.minimum for Python's max(a, b) / min(a, b)");
      })
      .def_prop_ro("dtype", [](const PyValue& v) { return std::string(fusejit::dtype_name(cpp(v.builder).info(v.v).dtype)); },
                   "The value's dtype name (\"f32\", ...).")
      .def_prop_ro("shape", [](const PyValue& v) { return cpp(v.builder).info(v.v).shape; },
                   "The value's shape at the builder's dim sizes (list of ints).")
      .def_prop_ro("builder", [](const PyValue& v) { return v.builder; },
                   "The fusejit.GraphBuilder whose node the value is (fusejit.op and fusejit.reduce find it here).")
      .def("_assign", [](PyValue& self, const PyValue& other) {
        if (!self.builder.is(other.builder)) throw Error(ErrorKind::User, "_assign: a value of another GraphBuilder");
        self.v = other.v;
        self.updated = true;
      }, nb::arg("other"),
           "Makes this Python object the node of `other` (of the same builder), as an in-place operator does "
           "(v += 1: every reference to v sees the new value, as NumPy's in-place update of an array).")
      .def_prop_ro("_updated", [](const PyValue& v) { return v.updated; },
                   "Whether an in-place operator (_assign) made this object another node than it was made as.")
      .def_prop_ro("_name", [](const PyValue& v) { return cpp(v.builder).info(v.v).name; },
                   "The node's name (GraphBuilder.name, an output's), \"\" when it has none.")
      .def("__repr__", [](const PyValue& v) {
        fusejit::TensorInfo t;
        try {
          t = cpp(v.builder).info(v.v);
        } catch (const fusejit::Error&) {  // a spent builder refuses info(): repr still answers (logs, debuggers)
          return std::string(nb::hasattr(v.builder, "_spent_note") ? "<fusejit.Value of a fused function's trace that has ended>"
                                                                   : "<fusejit.Value of a GraphBuilder that has built its graph>");
        }
        std::string s = "<fusejit.Value" + (t.name.empty() ? "" : " " + t.name) + " : " +
                        std::string(fusejit::dtype_name(t.dtype)) + "[";
        for (size_t d = 0; d < t.shape.size(); ++d)
          s += (d ? ", " : "") + (t.dim_names[d].empty() ? std::to_string(t.shape[d]) : t.dim_names[d]);
        return s + "]>";
      });
}

void bind_graph_builder(nb::module_& m) {
  nb::class_<fusejit::GraphBuilder>(
      m, "GraphBuilder",
      "Builds a graph in code; its calls mirror the graph format statement by statement "
      "(docs/graph-format.md), and the built graph equals the parsed text of its Graph.to_text(). "
      "Errors raise fusejit.UserError (a refused call changes nothing, but for an in-place operator's refusal "
      "by its cast or shape rule: the nodes it built stay, unused); build() ends the builder.")
      .def(nb::init<std::string>(), "name"_a = "", "`graph NAME` (\"\": none).")
      .def(
          "dim",
          [](nb::handle self, const std::string& name, nb::handle size_arg) {
            const int64_t size = int_arg(size_arg, "dim '" + name + "'");
            return PyDim{cpp(self).dim(name, size), name, size, nb::borrow(self)};
          },
          "name"_a, "size"_a, "`dim NAME = size`: a named size that follows the tensors a program is called with.")
      .def(
          "input",
          [](nb::handle self, const std::string& name, nb::handle dtype, const nb::sequence& shape) {
            return PyValue{cpp(self).input(name, dtype_arg(dtype), to_extents(self, shape)), nb::borrow(self)};
          },
          "name"_a, "dtype"_a.none(), "shape"_a,
          "`input NAME : DTYPE[shape]`; shape holds ints and Dims. dtype: a name (\"f32\") or NumPy's / PyTorch's "
          "dtype (np.float32, ml_dtypes.bfloat16, torch.bfloat16).")
      .def(
          "param",
          [](nb::handle self, const std::string& name, nb::handle dtype, nb::handle value) {
            return PyValue{cpp(self).param(name, dtype_arg(dtype), to_scalar(value, "param '" + name + "'")),
                           nb::borrow(self)};
          },
          "name"_a, "dtype"_a.none(), "default"_a = 0.0, "`param NAME : DTYPE = default`: a scalar set per call.")
      .def(
          "op",
          [](nb::handle self, std::string_view name, nb::args args, nb::kwargs kwargs) {
            refuse_op_keywords(name, kwargs);
            if (name == "cast")  // before its dtype argument is refused as no value
              throw Error(ErrorKind::User, "op 'cast' takes a dtype: use v.astype(dtype), or GraphBuilder.cast(x, dtype)");
            std::vector<fusejit::Value> vs;
            for (nb::handle a : args) vs.push_back(to_value(a, self));
            const fusejit::Value v = at_caller(self).op(name, vs);
            if (const std::optional<fusejit::Scalar> lit = v.literal()) return scalar_to_py(*lit);  // folded
            return made(v, self);
          },
          "name"_a, "args"_a, "kwargs"_a,
          "Any elementwise op of docs/ops.md by name: op('tanh', x), op('where', c, a, b), op('maximum', x, 0). "
          "Operands that are all literals fold as graph text folds them: op('exp', 1.0) is the float exp(1).")
      .def(
          "reduce",
          [](nb::handle self, std::string_view name, nb::handle x, nb::handle axes, nb::handle keepdim,
             nb::handle correction, nb::handle initial, nb::kwargs extra) {
            nb::object ax = nb::borrow(axes);  // or NumPy's axis= / PyTorch's dim=
            const bool kd = reduce_keywords(name, ax, keepdim, correction, extra);
            std::optional<int64_t> c;
            if (!correction.is_none()) c = correction_arg(correction, name);
            std::optional<double> init;
            if (!initial.is_none()) init = float_arg(initial, "initial");
            return made(at_caller(self).reduce(name, to_value(x, self), to_axes(ax), kd, c, init), self);
          },
          "name"_a, "x"_a, "axes"_a.none() = nb::none(), "keepdim"_a.none() = nb::none(), "correction"_a.none() = nb::none(),
          "initial"_a.none() = nb::none(), "kwargs"_a,
          "A reduction (sum mean prod amax amin argmax argmin) or a composite of them (softmax log_softmax logsumexp "
          "var std any all) over axes (an int, ints, or None: every axis; argmax/argmin one or None, giving an i64 "
          "index), as in graph text (docs/ops.md, Reductions). "
          "NumPy's axis= and PyTorch's dim= are axes. keepdim (or NumPy's keepdims): keep the reduced axes as size-1 dims. "
          "correction: mean, var, std. initial: amax -inf, amin inf only (NumPy's initial=; zero elements "
          "give it).")
      .def(
          "cast",
          [](nb::handle self, nb::handle x, nb::handle dtype) {
            return made(at_caller(self).cast(to_value(x, self), dtype_arg(dtype)), self);
          },
          "x"_a, "dtype"_a.none(), "`cast(x, DTYPE)`; dtype as for input().")
      .def(
          "name",
          [](nb::handle self, const PyValue& v, const std::string& name) {
            if (!v.builder.is(self)) throw Error(ErrorKind::User, "a value of another GraphBuilder");
            cpp(self).name(v.v, name);
            return nb::find(v);  // the argument's own object: a value hashes by identity
          },
          nb::sig("def name(self, value: Value, name: str) -> Value"), "value"_a, "name"_a,
          "`NAME = value`: names a value (kept in the IR and generated code); returns it.")
      .def(
          "output",
          [](nb::handle self, const std::string& name, nb::handle v) { cpp(self).output(name, to_value(v, self)); },
          "name"_a, "value"_a, "`output NAME`: marks the value as an output named `name`.")
      .def(
          "_set_location",
          [](nb::handle self, const std::string& file, int line, int column) { cpp(self).set_location(file, line, column); },
          "file"_a, "line"_a, "column"_a = 0,
          "fuse's: the graph's file, where none is set yet (the first location given sets it: fuse gives its "
          "function's file before tracing, so the ops of that file are located whatever file builds the first op). "
          "Each op records the line of the Python code that builds it, in that file (ops built in other files are "
          "unlocated), which warnings about it and a program's errors about it at a call name.")
      .def(
          "allow_unused", [](nb::handle self, nb::handle v) { cpp(self).allow_unused(to_value(v, self)); }, "input"_a,
          "Marks an input (a Value input() returned) as one the graph may leave unused: build() warns "
          "\"input '...' is not used by any output\" for it no more. UserError for a value that is no input.")
      .def(
          "build",
          [](nb::handle self) {
            fusejit::GraphBuilder& b = cpp(self);  // a finished trace's says so
            WarningScope scope;  // an unused input warns
            return b.build();
          },
          "Verifies and returns the Graph; the builder is then spent.");
}

}  // namespace

void bind_builder(nb::module_& m) {
  // A package folder whose name is no UTF-8 (lone surrogates): "" matches every frame's file, so
  // no op is located (as in such a file), where nb::cast failed the import (std::bad_cast).
  const nb::object dir = nb::module_::import_("fusejit._errors").attr("_PACKAGE_DIR");
  const char* utf8 = PyUnicode_AsUTF8(dir.ptr());
  if (utf8 == nullptr) PyErr_Clear();
  g_package_dir = utf8 == nullptr ? "" : utf8;
  nb::class_<PyDim>(m, "Dim", "A named dim of a GraphBuilder (GraphBuilder.dim), for input shapes.")
      .def_ro("name", &PyDim::name, "The dim's name.")
      .def_ro("size", &PyDim::size, "Its size (the graph's default; Graph.with_dims and calls may set others).")
      .def("__repr__", [](const PyDim& d) { return "<fusejit.Dim " + d.name + " = " + std::to_string(d.size) + ">"; });
  bind_value(m);
  bind_graph_builder(m);
  // A trace's op record (OpWatch): _watch_ops(code, made) records the traced function's own op
  // calls into the list `made` (None, None: none) and returns the (code, made) it replaces, which
  // the trace gives back the same way when it ends (a trace inside another's).
  m.def("_watch_ops", [](nb::handle code, nb::handle made) {
    if (!(code.is_none() || PyCode_Check(code.ptr())) || !(made.is_none() || PyList_Check(made.ptr())))
      throw nb::type_error("_watch_ops(code object or None, list or None)");
    auto held = [](PyObject* p) { return nb::borrow(p ? p : Py_None); };
    nb::tuple prior = nb::make_tuple(held(t_watch.code), held(t_watch.made));
    Py_XDECREF(t_watch.code);
    Py_XDECREF(t_watch.made);
    auto hold = [](nb::handle h) { return h.is_none() ? nullptr : nb::borrow(h).release().ptr(); };
    t_watch = {hold(code), hold(made), -1};
    return prior;
  }, nb::arg("code").none(), nb::arg("made").none());
  // The op table's answer for a method a value lacks (Value.__getattr__: PyTorch's x.exp()).
  m.def("_op_kind", [](std::string_view name) {
    switch (fusejit::op_kind(name)) {
      case fusejit::OpKind::Elementwise: return "elementwise";
      case fusejit::OpKind::Reduction: return "reduction";
      case fusejit::OpKind::Unknown: return "";
    }
    return "";
  }, nb::arg("name"), "'elementwise', 'reduction' or '' (fusejit::op_kind): what graph text calls `name`.");
}

}  // namespace fusejit_py
