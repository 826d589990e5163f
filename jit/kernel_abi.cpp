// Kernel layout (dim collapsing, broadcast pattern) and argument packing; see jit/kernel_abi.h.
#include "jit/kernel_abi.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "ir/reduce.h"
#include "ir/reduce_group.h"

namespace fusejit::jit {

namespace {

bool literal_one(const ir::Dim& d) { return d.sym < 0 && d.size == 1; }

// Whether input `in` is broadcast along iteration dim d (never a literal-1 iteration dim): it lacks
// the dim, has it as a literal 1, or (two different named dims meeting) has size 1 against a
// larger size. The same named dim is never broadcast against itself, whatever its value.
bool input_is_bcast(const ir::Shape& in, const ir::Shape& iter, size_t d) {
  const size_t off = iter.size() - in.size();
  if (d < off) return true;
  const ir::Dim& a = in[d - off];
  const ir::Dim& b = iter[d];
  if (a.sym >= 0 && a.sym == b.sym) return false;
  if (literal_one(a)) return true;
  return a.size == 1 && b.size != 1;
}

// Adjacent kept dims whose broadcast pattern is the same for every input are merged: addressing
// them as one dim gives the same offsets with fewer divisions. Literal-1 dims between two groups
// do not stop a merge. Returns the pattern of each collapsed dim (per input: broadcast?).
std::vector<std::vector<bool>> collapse_dims(std::span<const ir::Shape> input_shapes, const ir::Shape& iter,
                                             KernelLayout& l) {
  std::vector<std::vector<bool>> pattern;
  for (size_t d = 0; d < iter.size(); ++d) {
    if (literal_one(iter[d])) continue;
    std::vector<bool> p(input_shapes.size());
    for (size_t k = 0; k < input_shapes.size(); ++k) p[k] = input_is_bcast(input_shapes[k], iter, d);
    if (!l.dim_groups.empty() && pattern.back() == p) {
      bool only_ones = true;
      for (int e = l.dim_groups.back().second; e < static_cast<int>(d); ++e)
        only_ones = only_ones && literal_one(iter[static_cast<size_t>(e)]);
      if (only_ones) {
        l.dim_groups.back().second = static_cast<int>(d) + 1;
        continue;
      }
    }
    l.dim_groups.push_back({static_cast<int>(d), static_cast<int>(d) + 1});
    pattern.push_back(std::move(p));
  }
  return pattern;
}

}  // namespace

KernelLayout compute_layout(std::span<const ir::Shape> input_shapes, const ir::Shape& iter) {
  KernelLayout l;
  const size_t nin = input_shapes.size();
  for (size_t k = 0; k < nin; ++k) {
    const ir::Shape& in = input_shapes[k];
    FJ_CHECK(in.size() <= iter.size(), "kernel input has a higher rank than the iteration space");
    const size_t off = iter.size() - in.size();
    for (size_t d = 0; d < in.size(); ++d)
      FJ_CHECK(in[d].size == 1 || in[d].size == iter[d + off].size,
               "kernel input shape does not broadcast to the iteration space");
  }
  const std::vector<std::vector<bool>> pattern = collapse_dims(input_shapes, iter, l);
  l.access.resize(nin);
  l.bcast.resize(nin);
  for (size_t k = 0; k < nin; ++k) {
    bool any_b = false, any_f = false;
    for (size_t c = 0; c < pattern.size(); ++c) {
      l.bcast[k].push_back(pattern[c][k]);
      (pattern[c][k] ? any_b : any_f) = true;
    }
    l.access[k] = !any_b ? InputAccess::Contiguous : (!any_f ? InputAccess::Uniform : InputAccess::Strided);
    if (l.access[k] != InputAccess::Strided) l.bcast[k].clear();
  }
  for (size_t d = 0; d < iter.size(); ++d)
    if (!literal_one(iter[d])) l.iter_dims.push_back(static_cast<int>(d));
  l.in_dims.resize(nin);
  for (size_t k = 0; k < nin; ++k) {
    const ir::Shape& in = input_shapes[k];
    const size_t off = iter.size() - in.size();
    for (int d : l.iter_dims) {
      const size_t du = static_cast<size_t>(d);
      l.in_dims[k].push_back(du >= off && !literal_one(in[du - off]) ? static_cast<int>(du - off) : -1);
    }
  }
  l.index64 = needs_index64(ir::num_elements(iter));
  return l;
}

ir::NodeId reduction_operand(const ir::Graph& g, const ir::FusionGroup& group) {
  for (ir::NodeId id : group.nodes)
    if (ir::is_reduction(g.node(id).op)) return g.node(id).arg(0);
  return ir::kNoNode;
}

ir::Shape current_iter_shape(const ir::Graph& g, const ir::FusionGroup& group) {
  if (const ir::NodeId x = reduction_operand(g, group); x != ir::kNoNode) return g.node(x).shape;
  if (!group.outputs.empty()) return g.node(group.outputs.front()).shape;
  ir::Shape iter = group.iter_shape;
  for (ir::Dim& d : iter)
    if (d.sym >= 0 && static_cast<size_t>(d.sym) < g.dims.size()) d.size = g.dims[static_cast<size_t>(d.sym)].value;
  return iter;
}

KernelLayout compute_layout(const ir::Graph& g, const ir::FusionGroup& group) {
  std::vector<ir::Shape> shapes;
  for (ir::NodeId id : group.inputs) shapes.push_back(g.node(id).shape);
  const ir::Shape iter = current_iter_shape(g, group);
  KernelLayout l = compute_layout(shapes, iter);
  const bool reduces = reduction_operand(g, group) != ir::kNoNode;
  ir::ReduceGroupInfo info;
  if (reduces) {
    info = ir::analyze_reduce_group(g, group);
    l.reduce_mask = group.reduce_mask;
    // Rows are counted too: a reduction over a zero-size axis still writes every row.
    l.index64 = l.index64 || needs_index64(ir::num_elements(ir::reduced_shape(iter, group.reduce_mask, false)));
  }
  for (ir::NodeId o : group.outputs) {
    const ir::Shape& os = g.node(o).shape;
    // A reduction kernel's row values are its row outputs (ir/reduce_group.h), also where their
    // sizes are the iteration space's (a reduced dim of 1 at these dims).
    const bool row = reduces && info.row.count(o);
    const bool dropped = row && os.size() != iter.size();  // the reduced shape without keepdim
    std::vector<int> dims;
    for (int d : l.iter_dims) {
      int own = d - static_cast<int>(iter.size() - os.size());  // right-aligned (keepdim form)
      if (dropped) {  // the reduced axes are missing: count the kept ones before d
        own = 0;
        for (int e = 0; e < d; ++e) own += !(group.reduce_mask >> e & 1);
        if (group.reduce_mask >> d & 1) own = -1;
      }
      dims.push_back(own >= 0 && !literal_one(os[static_cast<size_t>(own)]) ? own : -1);
    }
    l.out_dims.push_back(std::move(dims));
    l.row_out.push_back(row ? 1 : 0);
  }
  return l;
}

bool same_input_layout(const KernelLayout& a, const KernelLayout& b) {
  return a.dim_groups == b.dim_groups && a.access == b.access && a.bcast == b.bcast && a.iter_dims == b.iter_dims &&
         a.in_dims == b.in_dims && a.index64 == b.index64;
}

std::string layout_fingerprint(const KernelLayout& l) {
  std::string s = fmt::format("r{} i{} in:", l.dim_groups.size(), l.index64 ? 64 : 32);
  for (const auto& [a, b] : l.dim_groups) s += fmt::format("[{},{})", a, b);
  for (size_t k = 0; k < l.access.size(); ++k) {
    s += k ? "," : ":";
    switch (l.access[k]) {
      case InputAccess::Contiguous: s += "C"; break;
      case InputAccess::Uniform: s += "U"; break;
      case InputAccess::Strided:
        s += "S";
        for (bool b : l.bcast[k]) s += b ? "0" : "1";
        break;
    }
  }
  // The strided entry: the kept dims, then per input the own dim each maps to ('-': stride 0).
  auto join = [](const std::vector<int>& v) {
    std::string t;
    for (size_t j = 0; j < v.size(); ++j) t += (j ? "." : "") + (v[j] < 0 ? std::string("-") : std::to_string(v[j]));
    return t;
  };
  s += " k" + join(l.iter_dims);
  for (size_t k = 0; k < l.in_dims.size(); ++k) s += (k ? "," : ":") + join(l.in_dims[k]);
  return s;
}

const char* arg_kind_name(ArgKind kind) {
  switch (kind) {
    case ArgKind::InputPtr: return "input";
    case ArgKind::OutputPtr: return "output";
    case ArgKind::Param: return "param";
    case ArgKind::NumElements: return "n";
    case ArgKind::DimSize: return "size";
    case ArgKind::DimDivMul: return "size_mul";
    case ArgKind::DimDivShift: return "size_shift";
    case ArgKind::Stride: return "stride";
    case ArgKind::VecFlag: return "vec_ok";
    case ArgKind::RowCount: return "rows";
    case ArgKind::RowLength: return "row_length";
    case ArgKind::SplitPhase: return "split_phase";
    case ArgKind::RowSplit: return "row_split";
    case ArgKind::Workspace: return "workspace";
    case ArgKind::RowCache: return "row_cache";
    case ArgKind::IterSize: return "iter_size";
    case ArgKind::IterDivMul: return "iter_size_mul";
    case ArgKind::IterDivShift: return "iter_size_shift";
    case ArgKind::InStride: return "in_stride";
    case ArgKind::OutStride: return "out_stride";
  }
  return "?";
}

PackedArgs::PackedArgs(PackedArgs&& o) noexcept
    : storage_(std::move(o.storage_)), vectorized_(o.vectorized_) {
  rebuild();
  o.ptrs_.clear();
}

PackedArgs& PackedArgs::operator=(PackedArgs&& o) noexcept {
  storage_ = std::move(o.storage_);
  vectorized_ = o.vectorized_;
  rebuild();
  o.ptrs_.clear();
  return *this;
}

void PackedArgs::rebuild() {
  ptrs_.resize(storage_.size());
  for (size_t i = 0; i < storage_.size(); ++i) ptrs_[i] = &storage_[i];
}

namespace {

// Writes `bytes` low-order bytes of a value into an 8-byte slot (little-endian host, as CUDA's
// kernel parameter buffer expects the argument's own representation).
template <class T>
uint64_t slot_of(T v) {
  uint64_t s = 0;
  std::memcpy(&s, &v, sizeof(T));
  return s;
}

}  // namespace

DivMagic div_magic32(uint64_t d) {
  FJ_CHECK(d >= 1 && d < (uint64_t{1} << 31), fmt::format("div_magic32: divisor {} outside [1, 2^31)", d));
  uint32_t s = 0;
  while ((uint64_t{1} << s) < d) ++s;  // s = ceil(log2(d))
  // mul = floor(2^32 * (2^s - d) / d) + 1 < 2^32 (since 2^s - d < d).
  const uint64_t mul = ((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1;
  return {static_cast<uint32_t>(mul), s};
}

namespace {

// The sizes of the collapsed dims at the current iteration shape.
std::vector<int64_t> collapsed_sizes(const KernelLayout& l, const ir::Shape& iter_shape) {
  std::vector<int64_t> csize(l.dim_groups.size());
  for (size_t c = 0; c < csize.size(); ++c) {
    int64_t s = 1;
    for (int d = l.dim_groups[c].first; d < l.dim_groups[c].second; ++d) s *= iter_shape[static_cast<size_t>(d)].size;
    csize[c] = s;
  }
  return csize;
}

// Row-major element stride of the innermost iter dim of collapsed dim c, in input `in`'s own layout.
int64_t input_stride(const KernelLayout& l, const ir::Shape& in, const ir::Shape& iter_shape, size_t c) {
  const size_t off = iter_shape.size() - in.size();
  const size_t last = static_cast<size_t>(l.dim_groups[c].second - 1);
  int64_t st = 1;
  for (size_t d = last + 1; d < iter_shape.size(); ++d)
    if (d >= off) st *= in[d - off].size;
  return st;
}

// C-contiguous element stride of dim t of `shape` (0 for a dim of size 1: it never moves).
int64_t contiguous_stride(const ir::Shape& shape, int t) {
  if (shape[static_cast<size_t>(t)].size == 1) return 0;
  int64_t st = 1;
  for (size_t d = static_cast<size_t>(t) + 1; d < shape.size(); ++d) st *= shape[d].size;
  return st;
}

// The C-contiguous stride of output i along kept dim j: that of the iteration shape, where a row
// output (its own shape is iter_shape without the reduced axes, or with them as 1s) skips the
// reduced axes and has stride 0 along them.
int64_t output_stride(const KernelLayout& l, const ir::Shape& iter, size_t i, size_t j) {
  const int t = l.iter_dims[j];
  const bool row = i < l.row_out.size() && l.row_out[i];
  if (i < l.out_dims.size() && l.out_dims[i][j] < 0) return 0;
  if (!row) return contiguous_stride(iter, t);
  int64_t st = 1;
  for (size_t d = static_cast<size_t>(t) + 1; d < iter.size(); ++d)
    if (!(l.reduce_mask >> d & 1)) st *= iter[d].size;
  return st;
}

// What the static slots are computed from.
struct StaticInputs {
  std::span<const ir::Shape> input_shapes;
  const ir::Shape& iter_shape;
  int64_t n;
  std::vector<int64_t> csize;  // collapsed sizes (fast entry)
};

uint64_t magic_part(ArgKind kind, int64_t d, int64_t n) {
  // A zero-size dim means no elements: the kernel never divides, any numbers do. Nor by a dim of
  // 2^31 or more in a 32-bit-index kernel (n < 2^31): only beside a zero-size dim (n == 0), where
  // the rows along it or the row loop over it are empty (2^31 rows take the 64-bit variant).
  const bool unused = d <= 0 || (n == 0 && needs_index64(d));
  const DivMagic m = unused ? DivMagic{} : div_magic32(static_cast<uint64_t>(d));
  return kind == ArgKind::DimDivMul || kind == ArgKind::IterDivMul ? m.mul : m.shift;
}

// The value of one static argument; 0 for the slots a launch fills.
uint64_t static_value(const ArgSlot& a, const KernelLayout& l, const StaticInputs& in) {
  const size_t i = static_cast<size_t>(std::max(a.index, 0));
  switch (a.kind) {
    case ArgKind::NumElements: return static_cast<uint64_t>(in.n);
    case ArgKind::DimSize: return static_cast<uint64_t>(in.csize[i]);
    case ArgKind::DimDivMul:
    case ArgKind::DimDivShift: return magic_part(a.kind, in.csize[i], in.n);
    case ArgKind::Stride:
      return static_cast<uint64_t>(input_stride(l, in.input_shapes[i], in.iter_shape, static_cast<size_t>(a.dim)));
    case ArgKind::IterSize: return static_cast<uint64_t>(in.iter_shape[static_cast<size_t>(l.iter_dims[i])].size);
    case ArgKind::IterDivMul:
    case ArgKind::IterDivShift:
      return magic_part(a.kind, in.iter_shape[static_cast<size_t>(l.iter_dims[i])].size, in.n);
    case ArgKind::InStride:
      return static_cast<uint64_t>(contiguous_stride(in.input_shapes[i], l.in_dims[i][static_cast<size_t>(a.dim)]));
    case ArgKind::OutStride: return static_cast<uint64_t>(output_stride(l, in.iter_shape, i, static_cast<size_t>(a.dim)));
    case ArgKind::RowCount:
      return static_cast<uint64_t>(ir::num_elements(ir::reduced_shape(in.iter_shape, l.reduce_mask, false)));
    case ArgKind::RowLength: return static_cast<uint64_t>(ir::reduce_length(in.iter_shape, l.reduce_mask));
    case ArgKind::InputPtr:
    case ArgKind::OutputPtr:
    case ArgKind::Param:
    case ArgKind::VecFlag:
    case ArgKind::SplitPhase:
    case ArgKind::RowSplit:
    case ArgKind::Workspace:
    case ArgKind::RowCache: return 0;
  }
  FJ_CHECK(false, "static_args: unknown argument kind");
  return 0;
}

bool has_strided_input(const KernelLayout& l) {
  return std::any_of(l.access.begin(), l.access.end(), [](InputAccess a) { return a == InputAccess::Strided; });
}

}  // namespace

uint64_t param_arg_bits(const ir::Scalar& v, ir::DType t) {
  switch (t) {
    case ir::DType::Bool: return slot_of<bool>(v.i != 0);
    case ir::DType::I8: return slot_of<int8_t>(static_cast<int8_t>(v.i));
    case ir::DType::U8: return slot_of<uint8_t>(static_cast<uint8_t>(v.i));
    case ir::DType::I32: return slot_of<int32_t>(static_cast<int32_t>(v.i));
    case ir::DType::I64: return slot_of<int64_t>(v.i);
    case ir::DType::F16:
    case ir::DType::BF16:
    case ir::DType::F32: return slot_of<float>(static_cast<float>(v.f));
    case ir::DType::F64: return slot_of<double>(v.f);
  }
  FJ_CHECK(false, "unknown dtype");
  return 0;
}

bool layout_matches(const KernelSignature& sig, std::span<const ir::Shape> input_shapes, const ir::Shape& iter_shape) {
  if (input_shapes.size() != sig.layout.access.size()) return false;
  KernelLayout now = compute_layout(input_shapes, iter_shape);
  if (now.index64 && !sig.layout.index64) return false;
  now.index64 = sig.layout.index64;
  return same_input_layout(now, sig.layout);
}

bool vector_rows_ok(const KernelSignature& sig, const ir::Shape& iter_shape) {
  if (sig.vector_width <= 1) return false;
  if (sig.reduce_rows) {  // every row V-aligned: the row (the innermost kept dim) a multiple of V long
    const std::vector<int>& kept = sig.layout.iter_dims;
    return !kept.empty() && iter_shape[static_cast<size_t>(kept.back())].size % sig.vector_width == 0;
  }
  if (!has_strided_input(sig.layout)) return true;
  // V consecutive elements must stay in one row of the innermost collapsed dim, so a strided
  // input's lanes are at off + j (or all at off) and off is V-aligned.
  const std::vector<int64_t> csize = collapsed_sizes(sig.layout, iter_shape);
  return !csize.empty() && csize.back() % sig.vector_width == 0;
}

std::vector<uint64_t> static_args(const KernelSignature& sig, std::span<const ir::Shape> input_shapes,
                                  const ir::Shape& iter_shape) {
  const KernelLayout& l = sig.layout;
  FJ_CHECK(input_shapes.size() == l.access.size(), "static_args: input count does not match the kernel");
  const int64_t n = ir::num_elements(iter_shape);
  FJ_CHECK(l.index64 || !needs_index64(n),
           fmt::format("static_args: a 32-bit-index kernel cannot run {} elements; it needs its 64-bit variant", n));
  // The fast entry runs the layout it was generated for; the strided entry any broadcast pattern
  // over the same kept dims.
  KernelLayout now = compute_layout(input_shapes, iter_shape);
  now.index64 = l.index64;
  const bool ok = sig.strided ? now.iter_dims == l.iter_dims && now.in_dims == l.in_dims : same_input_layout(now, l);
  FJ_CHECK(ok, fmt::format("static_args: the shapes give layout '{}' but the kernel was generated for '{}'",
                           layout_fingerprint(now), layout_fingerprint(l)));
  const StaticInputs in{input_shapes, iter_shape, n, collapsed_sizes(l, iter_shape)};
  std::vector<uint64_t> out;
  out.reserve(sig.args.size());
  for (const ArgSlot& a : sig.args) {
    uint64_t v = static_value(a, l, in);
    if (a.bytes == 4) v = slot_of<uint32_t>(static_cast<uint32_t>(v));
    out.push_back(v);
  }
  return out;
}

PackedArgs pack_args(const KernelSignature& sig, std::span<const uint64_t> input_addrs,
                     std::span<const uint64_t> output_addrs, std::span<const ir::Scalar> param_values,
                     std::span<const ir::Shape> input_shapes, const ir::Shape& iter_shape,
                     const LaunchShape& launch) {
  FJ_CHECK(input_addrs.size() == sig.layout.access.size(), "pack_args: input count does not match the kernel");
  FJ_CHECK(uint64_t{launch.grid} * launch.block < (uint64_t{1} << 31) && launch.grid > 0 && launch.block > 0,
           "pack_args: grid * block must be in [1, 2^31)");
  PackedArgs p;
  p.storage_ = static_args(sig, input_shapes, iter_shape);
  size_t outputs = 0;
  bool aligned = true;
  for (size_t k = 0; k < sig.args.size(); ++k) {
    const ArgSlot& a = sig.args[k];
    const size_t i = static_cast<size_t>(a.index);
    if (a.kind == ArgKind::InputPtr) p.storage_[k] = input_addrs[i];
    if (a.kind == ArgKind::OutputPtr) {
      FJ_CHECK(i < output_addrs.size(), "pack_args: missing output address");
      p.storage_[k] = output_addrs[i];
      ++outputs;
    }
    if (a.kind == ArgKind::InputPtr || a.kind == ArgKind::OutputPtr) aligned = aligned && p.storage_[k] % 16 == 0;
    if (a.kind == ArgKind::Param) {
      FJ_CHECK(a.param_slot >= 0 && static_cast<size_t>(a.param_slot) < param_values.size(), "pack_args: missing param value");
      const ir::Scalar& v = param_values[static_cast<size_t>(a.param_slot)];
      FJ_CHECK(v.dtype == a.dtype, "pack_args: param value has the wrong dtype");
      p.storage_[k] = param_arg_bits(v, a.dtype);
    }
  }
  FJ_CHECK(outputs == output_addrs.size(), "pack_args: output count does not match the kernel");
  p.vectorized_ = aligned && vector_rows_ok(sig, iter_shape);
  for (size_t k = 0; k < sig.args.size(); ++k)
    if (sig.args[k].kind == ArgKind::VecFlag) p.storage_[k] = slot_of<int32_t>(p.vectorized_ ? 1 : 0);
  p.rebuild();
  return p;
}

PackedArgs pack_args(const KernelSignature& sig, const ir::Graph& g, const ir::FusionGroup& group,
                     std::span<const uint64_t> input_addrs, std::span<const uint64_t> output_addrs,
                     std::span<const ir::Scalar> param_values, const LaunchShape& launch) {
  std::vector<ir::Shape> shapes;
  for (ir::NodeId id : group.inputs) shapes.push_back(g.node(id).shape);
  std::vector<ir::Scalar> defaults;
  if (param_values.empty()) {
    for (const ir::ParamDecl& d : g.params) defaults.push_back(d.default_value);
    param_values = defaults;
  }
  return pack_args(sig, input_addrs, output_addrs, param_values, shapes, current_iter_shape(g, group), launch);
}

int64_t value_bytes(const ir::Graph& g, ir::NodeId id) {
  const ir::Node& n = g.node(id);
  return ir::num_elements(n.shape) * ir::dtype_size(n.dtype);
}

std::vector<ir::NodeId> plan_intermediates(const ir::Graph& g, const ir::Plan& plan) {
  std::vector<bool> is_output(static_cast<size_t>(g.size()), false);
  for (const ir::OutputDecl& o : g.outputs) is_output[static_cast<size_t>(o.node)] = true;
  std::vector<ir::NodeId> mat = plan.materialized;
  std::sort(mat.begin(), mat.end());
  mat.erase(std::unique(mat.begin(), mat.end()), mat.end());
  std::vector<ir::NodeId> out;
  for (ir::NodeId id : mat)
    if (!is_output[static_cast<size_t>(id)] && g.node(id).op != ir::Op::Input) out.push_back(id);
  return out;
}

}  // namespace fusejit::jit
