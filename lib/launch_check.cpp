// Checks of launch and run arguments; see lib/launch_check.h.
#include "lib/launch_check.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <string>

#include "ir/builder.h"
#include "ir/tensor.h"

namespace fusejit {
namespace {

std::string dtype_text(ir::DType t) { return std::string(ir::dtype_name(t)); }

std::string shape_text(std::span<const int64_t> shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

// What each named dim is bound to while the inputs are read, and by which input (messages only).
struct DimBindings {
  std::vector<int64_t> value;      // per graph dim, -1 = not bound yet
  std::vector<std::string> by;     // the input that bound it
};

// The type an input must have, for messages: literal sizes as numbers, named dims by name, or
// "T=5" once an earlier input bound T.
std::string expected_type(const ir::Graph& g, const ir::Node& n, const DimBindings& b) {
  std::string s;
  for (const ir::Dim& d : n.shape) {
    std::string e = std::to_string(d.size);
    if (d.sym >= 0) {
      const size_t k = static_cast<size_t>(d.sym);
      e = g.dims[k].name + (b.value[k] >= 0 ? "=" + std::to_string(b.value[k]) : "");
    }
    s += (s.empty() ? "" : ", ") + e;
  }
  return dtype_text(n.dtype) + "[" + s + "]";
}

// " (N = 4096 from input 'x', which is f32[4096, 8])": where dim s got its value, with that input's
// type, so the message shows which of the two tensors is the wrong one.
template <class T>
std::string dim_source(const ir::Graph& g, std::span<const T> inputs, size_t k, const DimBindings& b, size_t s) {
  std::string which;
  for (size_t j = 0; j < k; ++j)
    if (g.node(g.inputs[j]).name == b.by[s])
      which = fmt::format(", which is {}{}", dtype_text(to_ir(inputs[j].dtype)), shape_text(inputs[j].shape));
  return fmt::format(" ({} = {} from input '{}'{})", g.dims[s].name, b.value[s], b.by[s], which);
}

// A dim name the graph does not use, for a message suggesting `dim NAME = size` (names share one
// namespace: a suggested N beside a `dim N` would be refused).
std::string free_dim_name(const ir::Graph& g) {
  std::set<std::string> used;
  for (const ir::DimDecl& d : g.dims) used.insert(d.name);
  for (const ir::Node& n : g.nodes) used.insert(n.name);
  for (const ir::OutputDecl& o : g.outputs) used.insert(o.name);
  for (const char* name : {"N", "M", "K", "D", "L", "C", "H", "W"})
    if (!used.count(name)) return name;
  for (int k = 1;; ++k)
    if (const std::string name = "D" + std::to_string(k); !used.count(name)) return name;
}

// The message for the first input of `inputs` that does not fit (the slow path, run only to throw).
// A tensor of another rank than the graph's input: a graph input's rank is fixed (NumPy would
// broadcast a [S] mask against [1, 1, S]; a launch does not). Where the graph's extra leading dims
// are literal 1s, the reshape that fits.
std::string rank_hint(const ir::Node& n, std::span<const int64_t> shape, bool python) {
  if (shape.size() == n.shape.size()) return "";
  std::string hint = fmt::format("; a graph input's rank is fixed ({} in the graph, {} given)", n.shape.size(), shape.size());
  const size_t extra = n.shape.size() > shape.size() ? n.shape.size() - shape.size() : 0;
  bool ones = extra > 0;
  for (size_t d = 0; d < extra; ++d) ones = ones && n.shape[d].sym < 0 && n.shape[d].size == 1;
  if (!ones) return hint;
  std::vector<int64_t> fit(extra, 1);
  fit.insert(fit.end(), shape.begin(), shape.end());
  return hint + fmt::format(": reshape it to {}{}", shape_text(fit),
                            python ? fmt::format(" (NumPy: x.reshape({}))", fmt::join(fit, ", ")) : "");
}

// A byte mask given for a bool input: the graph can take it as it is. `python`: the conversion
// in NumPy and PyTorch, else in the C++ API.
std::string dtype_hint(const ir::Node& n, DType given, bool python) {
  if (to_ir(given) == n.dtype) return "";
  if (n.dtype == ir::DType::Bool && (given == DType::U8 || given == DType::I8))
    return fmt::format("; for a byte mask, declare the input {} and use `{} != 0` (or cast({}, bool)) in the graph",
                       given == DType::U8 ? "u8" : "i8", n.name, n.name);
  // A launch converts no dtype (a copy the caller did not ask for): say how to convert.
  const std::string_view want = ir::dtype_name(n.dtype);
  if (!python) {  // from_floats goes through f32: a recipe for f16, bf16 and f32 only (an i64 would round)
    const char* e = n.dtype == ir::DType::F16 ? "F16" : n.dtype == ir::DType::BF16 ? "BF16"
                    : n.dtype == ir::DType::F32 ? "F32" : nullptr;  // DType's enumerator
    return fmt::format("; a launch converts no dtype: convert the tensor to {} first{}", want,
                       e ? fmt::format(" (a HostTensor t: HostTensor::from_floats(DType::{}, t.shape(), t.to_floats()))", e)
                         : "");
  }
  return fmt::format("; a launch converts no dtype: convert the tensor to {} first (NumPy: x.astype(fusejit.numpy_dtype"
                     "(\"{}\")), PyTorch: x.to(fusejit.torch_dtype(\"{}\")))", want, want, want);
}

// Whether tensor `t` alone fits input node `n`: its dtype, rank and fixed sizes.
template <class T>
bool fits_alone(const T& t, const ir::Node& n) {
  if (to_ir(t.dtype) != n.dtype || t.shape.size() != n.shape.size()) return false;
  for (size_t d = 0; d < n.shape.size(); ++d)
    if (n.shape[d].sym < 0 ? t.shape[d] != n.shape[d].size : t.shape[d] < 0) return false;
  return true;
}

// Whether, with the tensors of inputs k and j exchanged, both fit and bind the named dims as the
// other inputs that fit alone do (one that does not is wrong another way: two swapped pairs).
template <class T>
bool fits_swapped(const ir::Graph& g, std::span<const T> inputs, size_t k, size_t j) {
  std::vector<int64_t> bound(g.dims.size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const T& t = inputs[i == k ? j : i == j ? k : i];
    const ir::Node& n = g.node(g.inputs[i]);
    if (!fits_alone(t, n)) {
      if (i == k || i == j) return false;
      continue;
    }
    for (size_t d = 0; d < n.shape.size(); ++d) {
      if (n.shape[d].sym < 0) continue;
      int64_t& b = bound[static_cast<size_t>(n.shape[d].sym)];
      if (b >= 0 && b != t.shape[d]) return false;
      b = t.shape[d];
    }
  }
  return true;
}

// The places tensor `t` fits among the inputs whose own tensors do not fit them, but `own`.
template <class T>
size_t misfit_places(const ir::Graph& g, std::span<const T> inputs, const T& t, size_t own) {
  size_t n = 0;
  for (size_t m = 0; m < inputs.size(); ++m)
    n += m != own && fits_alone(t, g.node(g.inputs[m])) && !fits_alone(inputs[m], g.node(g.inputs[m]));
  return n;
}

// Input k's tensor fits not its own input but input j, whose tensor fits not its own but input k,
// and exchanged, both fit: two inputs given in each other's place. Only where neither tensor fits
// another misplaced input as well (inputs shifted by one place are no swap).
template <class T>
std::string swap_hint(const ir::Graph& g, std::span<const T> inputs, size_t k) {
  const ir::Node& n = g.node(g.inputs[k]);
  if (fits_alone(inputs[k], n)) return "";
  for (size_t j = 0; j < inputs.size(); ++j)
    if (j != k && fits_alone(inputs[k], g.node(g.inputs[j])) && fits_alone(inputs[j], n) &&
        !fits_alone(inputs[j], g.node(g.inputs[j])) && fits_swapped(g, inputs, k, j) &&
        misfit_places(g, inputs, inputs[k], k) == 1 && misfit_places(g, inputs, inputs[j], j) == 1)
      return fmt::format("; the tensors of inputs '{}' and '{}' fit each other's place: swapped? (the graph's order: {})",
                         n.name, g.node(g.inputs[j]).name, input_names(g));
  return "";
}

// Every input's tensor fits its place alone, but their dims disagree: the one pair of tensors of
// other shapes whose exchange makes every dim agree (`a:[N] b:[M, N] c:[M]` given c, b, a), else "".
// Up to 64 inputs: the pairs times a check of every input grow as n^3 (700 inputs took 1.3 s).
template <class T>
std::string conflict_swap_hint(const ir::Graph& g, std::span<const T> inputs) {
  if (inputs.size() > 64) return "";
  std::string hint;
  int pairs = 0;
  for (size_t k = 0; k < inputs.size(); ++k)
    for (size_t j = k + 1; j < inputs.size(); ++j)
      if (!std::ranges::equal(inputs[k].shape, inputs[j].shape) && fits_swapped(g, inputs, k, j) && ++pairs == 1)
        hint = fmt::format("; the tensors of inputs '{}' and '{}' exchanged would agree: swapped? (the graph's order: {})",
                           g.node(g.inputs[k]).name, g.node(g.inputs[j]).name, input_names(g));
  return pairs == 1 ? hint : "";
}

// A null 0-d tensor (which has one element): the state of a moved-from HostTensor. Only run() and
// measure() say so: their TensorViews come from HostTensors; a TensorRef's data may be null
// (output_shapes).
std::string moved_hint(const TensorView& t) {
  return t.shape.empty() && t.data.data() == nullptr ? "; it has no data (a moved-from HostTensor?)" : "";
}
std::string moved_hint(const TensorRef&) { return ""; }
// launch()'s null 0-d tensor: a moved-from HostTensor's, or a pointer not set.
std::string null_hint(std::span<const int64_t> shape) { return shape.empty() ? "; a moved-from HostTensor?" : ""; }

// The hints for input k's tensor, which does not fit (`conflict`: a dim bound otherwise; `fixed`:
// a literal size differs). A swap explains the rest: the hints for a tensor meant for this input
// would mislead.
template <class T>
std::string misfit_hints(const ir::Graph& g, std::span<const T> inputs, size_t k, const std::string& conflict,
                         const std::string& fixed, bool python) {
  const ir::Node& n = g.node(g.inputs[k]);
  const T& t = inputs[k];
  std::string swap = swap_hint(g, inputs, k);
  if (swap.empty() && !conflict.empty()) swap = conflict_swap_hint(g, inputs);
  return swap.empty() ? fixed + rank_hint(n, t.shape, python) + dtype_hint(n, t.dtype, python) + moved_hint(t) : swap;
}

// "; axis 1 has the fixed size 64 in the graph: name it with a dim (...)": graph text says `dim N
// = 64`; a built graph (no source location) the builder's call. Only on the error path.
std::string fixed_size_hint(const ir::Graph& g, const ir::Node& input, size_t axis, int64_t size) {
  const std::string name = free_dim_name(g);
  const std::string how = input.loc.known() ? fmt::format("`dim {} = {}`", name, size)
                                            : fmt::format("`b.dim(\"{}\", {})` on the GraphBuilder", name, size);
  return fmt::format("; axis {} has the fixed size {} in the graph: name it with a dim ({}, then {} in the input's "
                     "shape) to let it follow the tensors",
                     axis, size, how, name);
}

// " (a negative size ...)" where `shape` holds one, else "" (a hostile tester's find: f32[-2, 3]
// against f32[N, 3] did not say what was wrong).
std::string negative_size_hint(std::span<const int64_t> shape) {
  return std::any_of(shape.begin(), shape.end(), [](int64_t v) { return v < 0; }) ? " (a negative size: sizes are 0 or more)"
                                                                                  : "";
}

template <class T>
[[noreturn]] void refuse_inputs(const ir::Graph& g, std::span<const T> inputs, bool python) {
  DimBindings b{std::vector<int64_t>(g.dims.size(), -1), std::vector<std::string>(g.dims.size())};
  for (size_t k = 0; k < inputs.size(); ++k) {
    const ir::Node& n = g.node(g.inputs[k]);
    const T& t = inputs[k];
    DimBindings next = b;
    std::string conflict, fixed;
    bool ok = to_ir(t.dtype) == n.dtype && t.shape.size() == n.shape.size();
    for (size_t d = 0; ok && d < n.shape.size(); ++d) {
      const ir::Dim& dim = n.shape[d];
      if (dim.sym < 0) {
        ok = t.shape[d] == dim.size;
        // A size written as a number is fixed; only a named dim follows the tensors.
        if (!ok) fixed = fixed_size_hint(g, n, d, dim.size);
        continue;
      }
      const size_t s = static_cast<size_t>(dim.sym);
      ok = t.shape[d] >= 0 && (next.value[s] < 0 || next.value[s] == t.shape[d]);
      if (!ok && next.value[s] >= 0) conflict = dim_source(g, inputs, k, next, s);
      if (next.value[s] < 0) {
        next.value[s] = t.shape[d];
        next.by[s] = n.name;
      }
    }
    if (!ok)
      throw ir::UserError(fmt::format("input '{}': expected {}{}, got {}{}{}{}", n.name, expected_type(g, n, b), conflict,
                                      dtype_text(to_ir(t.dtype)), shape_text(t.shape),
                                      negative_size_hint(t.shape), misfit_hints(g, inputs, k, conflict, fixed, python)));
    b = std::move(next);
  }
  throw ir::InternalError("refuse_inputs: every input fits");
}

}  // namespace

std::string input_names(const ir::Graph& g) {
  std::string names;
  for (ir::NodeId id : g.inputs) names += (names.empty() ? "" : ", ") + g.node(id).name;
  return names;
}

void check_counts(const ir::Graph& g, size_t inputs, size_t outputs) {
  if (inputs == g.inputs.size() && outputs == g.outputs.size()) return;
  std::string out;
  for (const ir::OutputDecl& o : g.outputs) out += (out.empty() ? "" : ", ") + o.name;
  throw ir::UserError(fmt::format("expected {} input tensor(s) ({}) and {} output tensor(s) ({}), got {} and {}",
                                  g.inputs.size(), input_names(g), g.outputs.size(), out, inputs, outputs));
}

template <class T>
void bind_dims(const ir::Graph& g, std::span<const T> inputs, std::vector<int64_t>& dims, MessageStyle style) {
  const bool python = style == MessageStyle::Python;
  if (inputs.size() != g.inputs.size())
    throw ir::UserError(fmt::format("expected {} input tensor(s) ({}), got {}", g.inputs.size(), input_names(g), inputs.size()));
  dims.assign(g.dims.size(), -1);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const ir::Node& n = g.node(g.inputs[k]);
    const T& t = inputs[k];
    if (!valid_dtype(t.dtype)) check_dtype(t.dtype, "input '" + n.name + "'");
    if (to_ir(t.dtype) != n.dtype || t.shape.size() != n.shape.size()) refuse_inputs(g, inputs, python);
    for (size_t d = 0; d < n.shape.size(); ++d) {
      const ir::Dim& dim = n.shape[d];
      const int64_t v = t.shape[d];
      int64_t* bound = dim.sym >= 0 ? &dims[static_cast<size_t>(dim.sym)] : nullptr;
      const bool ok = bound ? v >= 0 && (*bound < 0 || *bound == v) : v == dim.size;
      if (!ok) refuse_inputs(g, inputs, python);
      if (bound) *bound = v;
    }
  }
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] < 0) dims[k] = g.dims[k].value;
}

template void bind_dims<TensorRef>(const ir::Graph&, std::span<const TensorRef>, std::vector<int64_t>&, MessageStyle);
template void bind_dims<TensorView>(const ir::Graph&, std::span<const TensorView>, std::vector<int64_t>&, MessageStyle);

void dims_from_values(const ir::Graph& g, const DimValues& dims, std::vector<int64_t>& out) {
  out.resize(g.dims.size());
  for (size_t k = 0; k < g.dims.size(); ++k) out[k] = g.dims[k].value;
  for (const auto& [name, v] : dims) {
    size_t k = 0;
    while (k < g.dims.size() && g.dims[k].name != name) ++k;
    if (k == g.dims.size()) throw ir::UserError(ir::unknown_dim_message(g, name));
    if (v < 0) throw ir::UserError("dim '" + name + "' must be >= 0, got " + std::to_string(v));
    out[k] = v;
  }
}

int tensors_device(const ir::Graph& g, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                   bool cuda) {
  // Ordinals only on the way through (a warm launch allocates nothing); names when refusing.
  const size_t n = inputs.size() + outputs.size();
  auto at = [&](size_t k) -> const TensorRef& { return k < inputs.size() ? inputs[k] : outputs[k - inputs.size()]; };
  auto name = [&](size_t k) {
    return k < inputs.size() ? fmt::format("input '{}'", g.node(g.inputs[k]).name)
                             : fmt::format("output '{}'", g.outputs[k - inputs.size()].name);
  };
  size_t first = n;  // the first tensor naming a device
  for (size_t k = 0; k < n; ++k) {
    const int d = at(k).device;
    if (d < -1)
      throw ir::UserError(fmt::format("{} names CUDA device {}: a TensorRef's device is an ordinal (0 or more) or -1 "
                                      "(not known)", name(k), d));
    if (d < 0) continue;
    if (!cuda)
      throw ir::UserError(fmt::format("{} is on CUDA device {}, but this program runs on the CPU: pass host memory",
                                      name(k), d));
    if (first == n) first = k;
    else if (d != at(first).device)
      throw ir::UserError(fmt::format("{} is on CUDA device {}, {} on device {}: one launch runs on one GPU", name(k), d,
                                      name(first), at(first).device));
  }
  return first == n ? -1 : at(first).device;
}

void check_output_dtypes(const ir::Graph& g, std::span<const TensorRef> outputs) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    const ir::Node& n = g.node(g.outputs[k].node);
    if (!valid_dtype(outputs[k].dtype)) check_dtype(outputs[k].dtype, "output '" + g.outputs[k].name + "'");
    if (to_ir(outputs[k].dtype) != n.dtype)
      throw ir::UserError(fmt::format("output '{}': expected dtype {}, got {}{}", g.outputs[k].name, dtype_text(n.dtype),
                                      dtype_text(to_ir(outputs[k].dtype)), shape_text(outputs[k].shape)));
  }
}

void check_output_shapes(const ir::Graph& g, const jit::LaunchState& st, std::span<const jit::TensorArg> outputs) {
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::vector<int64_t>& want = st.output_shapes[k];
    if (!std::equal(want.begin(), want.end(), outputs[k].shape.begin(), outputs[k].shape.end()))
      throw ir::UserError(fmt::format("output '{}': expected {}{} (the shape the inputs give), got {}{}{}", g.outputs[k].name,
                                      dtype_text(g.node(g.outputs[k].node).dtype), shape_text(want),
                                      dtype_text(g.node(g.outputs[k].node).dtype), shape_text(outputs[k].shape),
                                      negative_size_hint(outputs[k].shape)));
  }
}

void check_strides(const ir::Graph& g, std::span<const jit::TensorArg> inputs, std::span<const jit::TensorArg> outputs) {
  auto check = [&](const jit::TensorArg& t, const char* role, const std::string& name, ir::DType dtype) {
    if (!t.strides.empty() && t.strides.size() != t.shape.size())
      throw ir::UserError(fmt::format("{} '{}': strides {} for shape {}: give one stride per dim, in elements, each "
                                      ">= 0 on a dim of more than one element (or none for a C-contiguous tensor)",
                                      role, name, shape_text(t.strides), shape_text(t.shape)));
    // A stride means nothing on a dim of size 1 or in a tensor without elements (NumPy gives
    // x[::-1] of one element the stride -1): only one that reverses elements is refused.
    const bool empty = std::find(t.shape.begin(), t.shape.end(), int64_t{0}) != t.shape.end();
    for (size_t d = 0; d < t.strides.size(); ++d)
      if (t.strides[d] < 0 && t.shape[d] > 1 && !empty)
        throw ir::UserError(fmt::format("{} '{}': strides {} for shape {}: a negative stride (a reversed view such as "
                                        "x[::-1]) is not supported; pass a copy in forward order (from Python: "
                                        "np.ascontiguousarray(x), or x.contiguous() in PyTorch)",
                                        role, name, shape_text(t.strides), shape_text(t.shape)));
    const int64_t bytes = jit::view_bytes(t.shape, t.strides, ir::dtype_size(dtype));
    if (bytes < 0 && ir::checked_numel(t.shape) < 0)  // a stride-0 view may span few bytes
      throw ir::UserError(fmt::format("{} '{}': {}{} has an element count that overflows 64 bits", role, name,
                                      dtype_text(dtype), shape_text(t.shape)));
    if (bytes < 0)
      throw ir::UserError(fmt::format("{} '{}': {}{}{} reaches more than 2^63 - 1 bytes: no memory holds it", role, name,
                                      dtype_text(dtype), shape_text(t.shape),
                                      t.strides.empty() ? "" : " with strides " + shape_text(t.strides)));
    if (t.addr == 0 && bytes > 0)
      throw ir::UserError(fmt::format("{} '{}': a null data pointer for a tensor of shape {} (only a tensor with no "
                                      "elements may have none){}",
                                      role, name, shape_text(t.shape), null_hint(t.shape)));
  };
  for (size_t k = 0; k < inputs.size(); ++k) check(inputs[k], "input", g.node(g.inputs[k]).name, g.node(g.inputs[k]).dtype);
  for (size_t k = 0; k < outputs.size(); ++k)
    check(outputs[k], "output", g.outputs[k].name, g.node(g.outputs[k].node).dtype);
}

void check_alignment(const ir::Graph& g, std::span<const jit::TensorArg> inputs, std::span<const jit::TensorArg> outputs) {
  auto check = [](const jit::TensorArg& t, const char* role, const std::string& name, ir::DType dtype) {
    const int64_t size = ir::dtype_size(dtype);
    if (t.addr % static_cast<uint64_t>(size) == 0 || jit::view_bytes(t.shape, t.strides, size) == 0) return;
    throw ir::UserError(fmt::format("{} '{}': its data pointer {:#x} is not a multiple of the {}-byte element size of "
                                    "{}: a GPU faults on such loads and stores; pass an aligned copy",
                                    role, name, t.addr, size, dtype_text(dtype)));
  };
  for (size_t k = 0; k < inputs.size(); ++k) check(inputs[k], "input", g.node(g.inputs[k]).name, g.node(g.inputs[k]).dtype);
  for (size_t k = 0; k < outputs.size(); ++k)
    check(outputs[k], "output", g.outputs[k].name, g.node(g.outputs[k].node).dtype);
}

void check_view_data(const ir::Graph& g, std::span<const TensorView> inputs) {
  for (size_t k = 0; k < inputs.size(); ++k) {
    const TensorView& t = inputs[k];
    const int64_t want = jit::view_bytes(t.shape, t.strides, ir::dtype_size(to_ir(t.dtype)));  // check_strides: >= 0
    const bool contiguous = t.strides.empty();
    // A C-contiguous view's data is exactly its elements; a strided one holds at least what it reaches.
    if (contiguous ? static_cast<int64_t>(t.data.size()) != want : static_cast<int64_t>(t.data.size()) < want)
      throw ir::UserError(fmt::format("input '{}': {}{}{} needs {}{} bytes, its data has {}{}", g.node(g.inputs[k]).name,
                                      dtype_text(to_ir(t.dtype)), shape_text(t.shape),
                                      contiguous ? "" : " with strides " + shape_text(t.strides),
                                      contiguous ? "exactly " : "at least ", want, t.data.size(),
                                      contiguous ? " (a C-contiguous view's data is its elements; give strides for a "
                                                   "view into a larger buffer)"
                                                 : ""));
  }
}

std::span<const ir::Scalar> resolve_params_fast(const Program::Impl& p, const Params& params, std::vector<ir::Scalar>& buf) {
  if (params.empty()) return p.default_params;
  resolve_params_into(p.graph.impl().graph, params, p.options.message_style, buf);
  return buf;
}

}  // namespace fusejit
