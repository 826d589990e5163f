// Kernel layout (dim collapsing, broadcast pattern) and argument packing; see jit/kernel_abi.h.
#include "jit/kernel_abi.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace fusejit::jit {

namespace {

// Per iter dim, per input: 'F' full, 'B' broadcast. Size-1 iter dims are dropped by the caller.
bool input_is_bcast(const ir::Shape& in, const ir::Shape& iter, size_t d) {
  const size_t off = iter.size() - in.size();
  if (d < off) return true;
  return in[d - off].size == 1 && iter[d].size != 1;
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
  // Merge adjacent non-trivial dims whose broadcast pattern is the same for every input:
  // addressing them as one dim gives the same offsets with fewer divisions.
  std::vector<std::vector<bool>> pattern;  // per collapsed dim, per input
  for (size_t d = 0; d < iter.size(); ++d) {
    if (iter[d].size == 1) continue;
    std::vector<bool> p(nin);
    for (size_t k = 0; k < nin; ++k) p[k] = input_is_bcast(input_shapes[k], iter, d);
    if (!l.dim_groups.empty() && pattern.back() == p && l.dim_groups.back().second == static_cast<int>(d)) {
      l.dim_groups.back().second = static_cast<int>(d) + 1;
      continue;
    }
    // A dropped size-1 dim between two groups does not stop a merge either.
    if (!l.dim_groups.empty() && pattern.back() == p) {
      bool only_ones = true;
      for (int e = l.dim_groups.back().second; e < static_cast<int>(d); ++e)
        only_ones = only_ones && iter[static_cast<size_t>(e)].size == 1;
      if (only_ones) {
        l.dim_groups.back().second = static_cast<int>(d) + 1;
        continue;
      }
    }
    l.dim_groups.push_back({static_cast<int>(d), static_cast<int>(d) + 1});
    pattern.push_back(std::move(p));
  }
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
  l.index64 = needs_index64(ir::num_elements(iter));
  return l;
}

ir::Shape current_iter_shape(const ir::Graph& g, const ir::FusionGroup& group) {
  ir::Shape iter = group.iter_shape;
  for (ir::Dim& d : iter)
    if (d.sym >= 0 && static_cast<size_t>(d.sym) < g.dims.size()) d.size = g.dims[static_cast<size_t>(d.sym)].value;
  return iter;
}

KernelLayout compute_layout(const ir::Graph& g, const ir::FusionGroup& group) {
  std::vector<ir::Shape> shapes;
  for (ir::NodeId id : group.inputs) shapes.push_back(g.node(id).shape);
  return compute_layout(shapes, current_iter_shape(g, group));
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
  return s;
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

uint64_t param_slot_value(const ir::Scalar& v, ir::DType t) {
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

// Checks that the current shapes give the layout the kernel was generated for and that the launch
// fits the 32-bit grid-stride loop; returns the element count.
int64_t check_launchable(const KernelSignature& sig, std::span<const ir::Shape> input_shapes, const ir::Shape& iter_shape,
                         const LaunchShape& launch) {
  const KernelLayout& gen = sig.layout;
  FJ_CHECK(input_shapes.size() == gen.access.size(), "pack_args: input count does not match the kernel");
  FJ_CHECK(uint64_t{launch.grid} * launch.block < (uint64_t{1} << 31) && launch.grid > 0 && launch.block > 0,
           "pack_args: grid * block must be in [1, 2^31)");
  KernelLayout now = compute_layout(input_shapes, iter_shape);
  const int64_t n = ir::num_elements(iter_shape);
  FJ_CHECK(gen.index64 || !now.index64,
           fmt::format("pack_args: a 32-bit-index kernel cannot run {} elements; regenerate it", n));
  now.index64 = gen.index64;
  FJ_CHECK(now == gen, fmt::format("pack_args: the shapes give layout '{}' but the kernel was generated for "
                                   "'{}'; regenerate it",
                                   layout_fingerprint(now), layout_fingerprint(gen)));
  return n;
}

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

// What one launch's arguments are made of (pack_args' parameters, and the derived sizes).
struct PackInputs {
  std::span<const uint64_t> input_addrs, output_addrs;
  std::span<const ir::Scalar> param_values;
  std::span<const ir::Shape> input_shapes;
  const ir::Shape& iter_shape;
  int64_t n;
  std::vector<int64_t> csize;
};

// The value of one argument (VecFlag: 0, set once alignment is known).
uint64_t arg_value(const ArgSlot& a, const KernelLayout& l, const PackInputs& in) {
  switch (a.kind) {
    case ArgKind::InputPtr: return in.input_addrs[static_cast<size_t>(a.index)];
    case ArgKind::OutputPtr:
      FJ_CHECK(static_cast<size_t>(a.index) < in.output_addrs.size(), "pack_args: missing output address");
      return in.output_addrs[static_cast<size_t>(a.index)];
    case ArgKind::Param: {
      FJ_CHECK(a.param_slot >= 0 && static_cast<size_t>(a.param_slot) < in.param_values.size(),
               "pack_args: missing param value");
      const ir::Scalar& s = in.param_values[static_cast<size_t>(a.param_slot)];
      FJ_CHECK(s.dtype == a.dtype, "pack_args: param value has the wrong dtype");
      return param_slot_value(s, a.dtype);
    }
    case ArgKind::NumElements: return static_cast<uint64_t>(in.n);
    case ArgKind::DimSize: return static_cast<uint64_t>(in.csize[static_cast<size_t>(a.index)]);
    case ArgKind::DimDivMul:
    case ArgKind::DimDivShift: {
      // A zero-size dim means no elements: the kernel never divides, any numbers do.
      const int64_t d = in.csize[static_cast<size_t>(a.index)];
      const DivMagic m = d > 0 ? div_magic32(static_cast<uint64_t>(d)) : DivMagic{};
      return a.kind == ArgKind::DimDivMul ? m.mul : m.shift;
    }
    case ArgKind::Stride:
      return static_cast<uint64_t>(input_stride(l, in.input_shapes[static_cast<size_t>(a.index)], in.iter_shape,
                                                static_cast<size_t>(a.dim)));
    case ArgKind::VecFlag: return 0;
  }
  FJ_CHECK(false, "pack_args: unknown argument kind");
  return 0;
}

}  // namespace

PackedArgs pack_args(const KernelSignature& sig, std::span<const uint64_t> input_addrs,
                     std::span<const uint64_t> output_addrs, std::span<const ir::Scalar> param_values,
                     std::span<const ir::Shape> input_shapes, const ir::Shape& iter_shape,
                     const LaunchShape& launch) {
  const KernelLayout& gen = sig.layout;
  FJ_CHECK(input_addrs.size() == gen.access.size(), "pack_args: input count does not match the kernel");
  const int64_t n = check_launchable(sig, input_shapes, iter_shape, launch);
  const PackInputs in{input_addrs, output_addrs, param_values, input_shapes, iter_shape, n,
                      collapsed_sizes(gen, iter_shape)};
  PackedArgs p;
  bool aligned = true;
  for (const ArgSlot& a : sig.args) {
    uint64_t v = arg_value(a, gen, in);
    if (a.kind == ArgKind::InputPtr || a.kind == ArgKind::OutputPtr) aligned = aligned && v % 16 == 0;
    if (a.bytes == 4 && a.kind != ArgKind::Param) v = slot_of<uint32_t>(static_cast<uint32_t>(v));
    p.storage_.push_back(v);
  }
  FJ_CHECK(output_addrs.size() == static_cast<size_t>(std::count_if(sig.args.begin(), sig.args.end(),
                                                                    [](const ArgSlot& a) { return a.kind == ArgKind::OutputPtr; })),
           "pack_args: output count does not match the kernel");
  // With a strided input, V consecutive elements must stay in one row of the innermost collapsed
  // dim (so a strided input's lanes are at off + j, or all at off, and off is V-aligned): its
  // size must be a multiple of V. Checked here, per launch, so a new dim value never recompiles.
  bool rows_ok = true;
  if (std::any_of(gen.access.begin(), gen.access.end(), [](InputAccess a) { return a == InputAccess::Strided; }))
    rows_ok = !in.csize.empty() && in.csize.back() % sig.vector_width == 0;
  p.vectorized_ = sig.vector_width > 1 && aligned && rows_ok;
  for (size_t i = 0; i < sig.args.size(); ++i)
    if (sig.args[i].kind == ArgKind::VecFlag) p.storage_[i] = slot_of<int32_t>(p.vectorized_ ? 1 : 0);
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

RunBuffers::RunBuffers(const ir::Graph& g, const ir::Plan& plan, std::span<const uint64_t> inputs,
                       std::span<const uint64_t> outputs, std::span<const ir::NodeId> intermediates,
                       std::span<const uint64_t> intermediate_addrs)
    : g_(g), inputs_(inputs), at_(static_cast<size_t>(g.size()), 0) {
  FJ_CHECK(inputs.size() == g.inputs.size() && outputs.size() == g.outputs.size() &&
               intermediates.size() == intermediate_addrs.size(),
           "RunBuffers: wrong number of buffers");
  std::vector<bool> written(static_cast<size_t>(g.size()), false), placed(written);
  for (const ir::FusionGroup& grp : plan.groups)
    for (ir::NodeId id : grp.outputs) written[static_cast<size_t>(id)] = true;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const size_t id = static_cast<size_t>(g.outputs[k].node);
    const ir::Node& n = g.node(g.outputs[k].node);
    if (written[id] && !placed[id]) {
      at_[id] = outputs[k];  // the first output naming a value is where its kernel writes it
      placed[id] = true;
      continue;
    }
    FJ_CHECK(written[id] || n.op == ir::Op::Input,
             fmt::format("RunBuffers: output '{}' is never written by the plan", g.outputs[k].name));
    const uint64_t src = written[id] ? at_[id] : inputs[static_cast<size_t>(n.slot)];
    copies_.push_back({outputs[k], src, value_bytes(g, g.outputs[k].node)});
  }
  for (size_t i = 0; i < intermediates.size(); ++i) at_[static_cast<size_t>(intermediates[i])] = intermediate_addrs[i];
}

std::vector<uint64_t> RunBuffers::group_inputs(const ir::FusionGroup& grp) const {
  std::vector<uint64_t> out;
  out.reserve(grp.inputs.size());
  // A graph input is always read from the caller's buffer.
  for (ir::NodeId id : grp.inputs) {
    const ir::Node& n = g_.node(id);
    out.push_back(n.op == ir::Op::Input ? inputs_[static_cast<size_t>(n.slot)] : at_[static_cast<size_t>(id)]);
  }
  return out;
}

std::vector<uint64_t> RunBuffers::group_outputs(const ir::FusionGroup& grp) const {
  std::vector<uint64_t> out;
  out.reserve(grp.outputs.size());
  for (ir::NodeId id : grp.outputs) out.push_back(at_[static_cast<size_t>(id)]);
  return out;
}

}  // namespace fusejit::jit
