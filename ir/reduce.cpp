// Reduction rules and reference evaluation; see ir/reduce.h.
#include "ir/reduce.h"

#include <optional>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "ir/scalar/fj_scalar.h"
#include "ir/scalar/fj_reduce.h"

namespace fusejit::ir {

bool is_reduction(Op op) { return op_info(op).rule == TypeRule::Reduce; }

std::string axis_out_of_range(std::string_view axis, size_t rank) {
  if (rank == 0)  // NumPy's rule (PyTorch also accepts 0 and -1 here, reducing nothing)
    return fmt::format("axis {} is out of range: a 0-d tensor has no axes (of the reductions, only those with no axes, e.g. sum(x), take one)", axis);
  const auto r = static_cast<int64_t>(rank);
  return fmt::format("axis {} is out of range for a tensor of rank {} (expected {} to {})", axis, r, -r, r - 1);
}

uint64_t reduce_axes_mask(std::span<const int64_t> axes, size_t rank, Loc loc) {
  if (axes.empty()) return rank == 0 ? 0 : (rank == 64 ? ~uint64_t{0} : (uint64_t{1} << rank) - 1);
  const auto r = static_cast<int64_t>(rank);
  uint64_t mask = 0;
  int64_t written[64] = {};  // the axis as written, per normalised axis (for the repeat message)
  for (int64_t a : axes) {
    if (a < -r || a >= r) throw UserError(axis_out_of_range(std::to_string(a), rank), loc);
    const int64_t k = a < 0 ? a + r : a;
    if (mask & (uint64_t{1} << k)) {
      if (written[k] == a) throw UserError(fmt::format("axis {} appears twice in the reduced axes", a), loc);
      throw UserError(fmt::format("axes {} and {} name the same axis ({} of a tensor of rank {})", written[k], a, k, r), loc);
    }
    written[k] = a;
    mask |= uint64_t{1} << k;
  }
  return mask;
}

std::vector<int64_t> mask_axes(uint64_t mask) {
  std::vector<int64_t> out;
  for (int64_t k = 0; k < 64; ++k)
    if (mask & (uint64_t{1} << k)) out.push_back(k);
  return out;
}

Shape reduced_shape(const Shape& in, uint64_t mask, bool keepdim) {
  Shape out;
  for (size_t k = 0; k < in.size(); ++k) {
    if (!(mask & (uint64_t{1} << k))) out.push_back(in[k]);
    else if (keepdim) out.push_back(Dim{1, -1});
  }
  return out;
}

int64_t reduce_length(const Shape& in, uint64_t mask) {
  int64_t n = 1;
  for (size_t k = 0; k < in.size(); ++k)
    if (mask & (uint64_t{1} << k)) n *= in[k].size;
  return n;
}

DType reduce_compute_dtype(Op op, DType in, Loc loc) {
  const bool half = in == DType::F16 || in == DType::BF16;
  switch (op) {
    case Op::Sum: case Op::Prod:
      return is_float(in) ? (half ? DType::F32 : in) : DType::I64;
    case Op::Mean:
      if (!is_float(in))
        throw UserError(fmt::format("mean of an integer or bool tensor ({}): mean needs a float dtype (cast it first: "
                                    "mean(cast(x, f32), AXES) in graph text, b.reduce(\"mean\", b.cast(x, DType::F32), AXES) in C++, "
                                    "x.astype(\"f32\").mean(AXES) in Python; "
                                    "PyTorch refuses integer means too)", dtype_name(in)),
                        loc);
      return half ? DType::F32 : in;
    case Op::Amax: case Op::Amin: case Op::Argmax: case Op::Argmin:
      return half ? DType::F32 : in;
    default:
      break;
  }
  internal_error(__FILE__, __LINE__, "reduce_compute_dtype: not a reduction");
}

void check_reduce_nonempty(Op op, const Shape& in, DType in_dtype, const ReduceAttr& red, const std::string& what,
                           Loc loc) {
  // PyTorch refuses it whenever a reduced axis is empty, also when the result has no elements
  // (aten's zero_numel_check_dims: "Expected reduction dim 1 to have non-zero size").
  const uint64_t mask = red.axes;
  const bool arg = is_arg_reduction(op);
  if ((op != Op::Amax && op != Op::Amin && !arg) || red.initial || reduce_length(in, mask) != 0) return;
  // A float operand may start from the op's identity instead (NumPy's initial=; builder_reduce.cpp).
  const std::string initial =
      !is_float(in_dtype) || arg ? ""
                                 : fmt::format(", or start from initial={0} (Python: v.{1}(axis, initial={2}); "
                                               "C++: GraphBuilder::reduce's `initial`)",
                                               op == Op::Amax ? "-inf" : "inf", op == Op::Amax ? "max" : "min",
                                               op == Op::Amax ? "-np.inf" : "np.inf");
  throw UserError(fmt::format("{}{} of zero elements (reduced axes {} of shape {}) has no {}; "
                              "make the reduced axes non-empty{}",
                              what.empty() ? "" : what + ": ", op_name(op), fmt::join(mask_axes(mask), ", "),
                              shape_to_string(in), arg ? "index to return (NumPy and PyTorch refuse it too)" : "identity",
                              initial),
                  loc);
}

namespace {

// Element offsets of a reduction over a C-contiguous operand: result element o, reduced element i
// (row-major over the reduced axes) -> offset outer(o) + inner(i).
class ReduceIndex {
 public:
  ReduceIndex(const std::vector<int64_t>& shape, uint64_t mask) {
    int64_t stride = 1;
    for (size_t k = shape.size(); k-- > 0;) {
      const bool red = mask & (uint64_t{1} << k);
      (red ? inner_ : outer_).push_back({shape[k], stride});
      stride *= shape[k];
    }
  }
  int64_t inner(int64_t i) const { return offset(inner_, i); }
  int64_t outer(int64_t o) const { return offset(outer_, o); }

 private:
  struct Axis { int64_t size, stride; };  // innermost first
  static int64_t offset(const std::vector<Axis>& axes, int64_t i) {
    int64_t off = 0;
    for (const Axis& a : axes) {
      off += (i % a.size) * a.stride;
      i /= a.size;
    }
    return off;
  }
  std::vector<Axis> outer_, inner_;
};

// Storage of each compute type (bool as one byte 0/1, read as byte != 0).
template <class T> T load_as(const std::byte* p, int64_t k) {
  if constexpr (std::is_same_v<T, bool>) return reinterpret_cast<const unsigned char*>(p)[k] != 0;
  else return reinterpret_cast<const T*>(p)[k];
}

int64_t reduce_length_of(const std::vector<int64_t>& shape, uint64_t mask) {
  int64_t len = 1;
  for (size_t k = 0; k < shape.size(); ++k)
    if (mask & (uint64_t{1} << k)) len *= shape[k];
  return len;
}

template <class R, class T>
void reduce_typed(const Node& n, const Tensor& in, Tensor& out) {
  const ReduceIndex idx(in.shape, n.red.axes);
  const int64_t len = reduce_length_of(in.shape, n.red.axes);
  const int64_t rows = out.numel();
  T lanes[FJ_RED_LANES];
  for (int64_t o = 0; o < rows; ++o) {
    const int64_t base = idx.outer(o);
    auto load = [&](long long i) { return load_as<T>(in.data.data(), base + idx.inner(i)); };
    T v = fj_reduce_fixed<R, T>(len, load, lanes, 0, 1);
    if constexpr (std::is_floating_point_v<T>)
      if (n.op == Op::Mean) v = fj_red_mean(v, fj_red_divisor(len, n.red.correction));
    if constexpr (std::is_same_v<T, bool>) reinterpret_cast<unsigned char*>(out.data.data())[o] = v ? 1 : 0;
    else out.as<T>()[o] = v;
  }
}

// argmax/argmin: lanes of (value, index), the index written as i64.
template <class R, class T>
void arg_reduce_typed(const Node& n, const Tensor& in, Tensor& out) {
  const ReduceIndex idx(in.shape, n.red.axes);
  const int64_t len = reduce_length_of(in.shape, n.red.axes);
  const int64_t rows = out.numel();
  using Lane = fj_red_arg<T>;
  std::vector<Lane> lanes(FJ_RED_LANES);
  for (int64_t o = 0; o < rows; ++o) {
    const int64_t base = idx.outer(o);
    auto load = [&](long long i) { return Lane{load_as<T>(in.data.data(), base + idx.inner(i)), i}; };
    out.as<int64_t>()[o] = fj_reduce_fixed<R, Lane>(len, load, lanes.data(), 0, 1).i;
  }
}

template <class T>
void reduce_op(const Node& n, const Tensor& in, Tensor& out) {
  switch (n.op) {
    case Op::Sum: case Op::Mean: return reduce_typed<fj_red_sum, T>(n, in, out);
    case Op::Prod: return reduce_typed<fj_red_prod, T>(n, in, out);
    case Op::Amax: return reduce_typed<fj_red_max, T>(n, in, out);
    case Op::Amin: return reduce_typed<fj_red_min, T>(n, in, out);
    case Op::Argmax: return arg_reduce_typed<fj_red_argmax, T>(n, in, out);
    case Op::Argmin: return arg_reduce_typed<fj_red_argmin, T>(n, in, out);
    default: internal_error(__FILE__, __LINE__, "eval_reduction: not a reduction");
  }
}

}  // namespace

static_assert(kReduceChunk == FJ_RED_CHUNK, "ir/reduce.h and fj_reduce.h disagree on the chunk size");

const char* reduce_combiner(Op op) {
  switch (op) {
    case Op::Sum: case Op::Mean: return "fj_red_sum";
    case Op::Prod: return "fj_red_prod";
    case Op::Amax: return "fj_red_max";
    case Op::Amin: return "fj_red_min";
    case Op::Argmax: return "fj_red_argmax";
    case Op::Argmin: return "fj_red_argmin";
    default: internal_error(__FILE__, __LINE__, "reduce_combiner: not a reduction");
  }
}

Tensor eval_reduction(const Node& n, const Tensor& in) {
  FJ_CHECK(reduce_result_dtype(n.op, in.dtype) == n.dtype, "eval_reduction: operand dtype is not the node's compute dtype");
  Tensor out(n.dtype, shape_sizes(n.shape));
  switch (in.dtype) {
    case DType::Bool: reduce_op<bool>(n, in, out); break;
    case DType::I8: reduce_op<signed char>(n, in, out); break;
    case DType::U8: reduce_op<unsigned char>(n, in, out); break;
    case DType::I32: reduce_op<int>(n, in, out); break;
    case DType::I64: reduce_op<long long>(n, in, out); break;
    case DType::F32: reduce_op<float>(n, in, out); break;
    case DType::F64: reduce_op<double>(n, in, out); break;
    case DType::F16: case DType::BF16:
      internal_error(__FILE__, __LINE__, "eval_reduction: f16/bf16 reductions compute in f32");
  }
  return out;
}

std::string reduce_args_text(Op op, const ReduceAttr& red, size_t in_rank) {
  const std::vector<int64_t> axes = mask_axes(red.axes);
  std::string s;
  // An argmax/argmin over every axis prints none (its text takes one axis or none).
  if (axes.size() == 1) s = fmt::format(", {}", axes[0]);
  else if (axes.size() != in_rank || (red.keepdim && !is_arg_reduction(op))) s = fmt::format(", [{}]", fmt::join(axes, ", "));
  if (red.keepdim) s += ", keepdim";
  if (red.correction != 0) s += fmt::format(", correction={}", red.correction);
  if (red.initial) s += op == Op::Amax ? ", initial=-inf" : ", initial=inf";
  return s;
}


bool is_reduce_name(std::string_view name) {
  if (is_composite_name(name)) return true;
  const std::optional<Op> op = parse_op(name);
  return op && is_reduction(*op);
}

bool is_composite_name(std::string_view name) {
  for (std::string_view c : composite_names())
    if (c == name) return true;
  return false;
}

const std::vector<std::string_view>& composite_names() {
  // The builder expands them (ir/builder.h); the graph format calls them like reductions.
  static const std::vector<std::string_view> names{"softmax", "log_softmax", "logsumexp", "var", "std", "any", "all"};
  return names;
}

}  // namespace fusejit::ir
