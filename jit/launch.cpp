// Plan bindings, per-dims launch state and the per-launch argument filling; see jit/launch.h.
#include "jit/launch.h"

#include <algorithm>
#include <array>
#include <set>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/passes/plan_report.h"
#include "ir/reduce.h"
#include "ir/reduce_group.h"
#include "jit/overlap.h"

namespace fusejit::jit {

// ---- PlanBindings ------------------------------------------------------------------------------

PlanBindings::PlanBindings(const ir::Graph& g, const ir::Plan& plan)
    : intermediates(plan_intermediates(g, plan)),
      last_reader(g.inputs.size(), -1),
      writer(g.outputs.size(), -1),
      row_output(g.outputs.size(), 0) {
  const size_t n = static_cast<size_t>(g.size());
  std::vector<int32_t> first_output(n, -1), inter(n, -1), written_by(n, -1);
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (int32_t& f = first_output[static_cast<size_t>(g.outputs[k].node)]; f < 0) f = static_cast<int32_t>(k);
  for (size_t i = 0; i < intermediates.size(); ++i) inter[static_cast<size_t>(intermediates[i])] = static_cast<int32_t>(i);
  for (size_t gi = 0; gi < plan.groups.size(); ++gi) {
    const ir::FusionGroup& grp = plan.groups[gi];
    std::vector<BufferRef> in, out;
    for (ir::NodeId id : grp.inputs) {
      const ir::Node& nd = g.node(id);
      if (nd.op == ir::Op::Input) {  // a graph input is always read from the caller's buffer
        in.push_back({BufferRef::Kind::Input, nd.slot});
        last_reader[static_cast<size_t>(nd.slot)] = static_cast<int32_t>(gi);
      } else if (const int32_t k = first_output[static_cast<size_t>(id)]; k >= 0) {
        in.push_back({BufferRef::Kind::Output, k});
      } else {
        FJ_CHECK(inter[static_cast<size_t>(id)] >= 0, fmt::format("PlanBindings: v{} is read but never materialised", id));
        in.push_back({BufferRef::Kind::Intermediate, inter[static_cast<size_t>(id)]});
      }
    }
    const std::set<ir::NodeId> rows = grp.reduce_mask ? ir::analyze_reduce_group(g, grp).row : std::set<ir::NodeId>{};
    for (ir::NodeId id : grp.outputs) {
      written_by[static_cast<size_t>(id)] = static_cast<int32_t>(gi);
      if (const int32_t k = first_output[static_cast<size_t>(id)]; k >= 0) {
        out.push_back({BufferRef::Kind::Output, k});
        writer[static_cast<size_t>(k)] = static_cast<int32_t>(gi);
        row_output[static_cast<size_t>(k)] = rows.count(id) ? 1 : 0;
      } else {
        FJ_CHECK(inter[static_cast<size_t>(id)] >= 0, fmt::format("PlanBindings: v{} is written to no buffer", id));
        out.push_back({BufferRef::Kind::Intermediate, inter[static_cast<size_t>(id)]});
      }
    }
    group_inputs.push_back(std::move(in));
    group_outputs.push_back(std::move(out));
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const size_t id = static_cast<size_t>(g.outputs[k].node);
    FJ_CHECK(written_by[id] >= 0, fmt::format("PlanBindings: output '{}' is never written by the plan", g.outputs[k].name));
    if (first_output[id] != static_cast<int32_t>(k))
      copies.push_back({static_cast<int32_t>(k), first_output[id], g.outputs[k].name,
                        g.outputs[static_cast<size_t>(first_output[id])].name});
  }
}

// ---- Views -------------------------------------------------------------------------------------

bool is_canonical(std::span<const int64_t> shape, std::span<const int64_t> strides) {
  if (strides.empty()) return true;
  // No elements: no layout (NumPy and PyTorch give empty tensors any strides, 0 among them).
  if (std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end()) return true;
  int64_t expect = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

int64_t view_span(std::span<const int64_t> shape, std::span<const int64_t> strides) {
  int64_t span = 0, contiguous = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 0) return -1;
    span += (shape[d] - 1) * (strides.empty() ? contiguous : strides[d]);
    contiguous *= shape[d];
  }
  return span;
}

int64_t view_bytes(std::span<const int64_t> shape, std::span<const int64_t> strides, int64_t elem_size) {
  for (int64_t n : shape)
    if (n == 0) return 0;
  int64_t span = 0, contiguous = 1, step = 0, bytes = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t stride = strides.empty() ? contiguous : strides[d];
    if (__builtin_mul_overflow(shape[d] - 1, stride, &step) || __builtin_add_overflow(span, step, &span) ||
        __builtin_mul_overflow(contiguous, shape[d], &contiguous))
      return -1;
  }
  if (__builtin_add_overflow(span, 1, &span) || __builtin_mul_overflow(span, elem_size, &bytes)) return -1;
  return bytes;
}

// ---- LaunchState -------------------------------------------------------------------------------

int LaunchState::kernel_launches() const {
  int n = 0;
  for (const GroupLaunch& gl : groups) n += gl.launches();
  return n;
}

namespace {

std::vector<int64_t> sizes_of(const ir::Shape& s) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const ir::Dim& d : s) out.push_back(d.size);
  return out;
}

// `s` broadcasts to `iter` (NumPy right alignment, sizes only).
bool broadcasts_to(const ir::Shape& s, const ir::Shape& iter) {
  if (s.size() > iter.size()) return false;
  const size_t off = iter.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d].size != 1 && s[d].size != iter[d + off].size) return false;
  return true;
}

// Whether the grouping of `grp` holds at the current shapes of `g`. A reduction kernel also needs
// the analysis it was generated from (`planned`: the graph at the plan's dims, if other): which
// values are per row and which per element follows from sizes (at C = 1 a keepdim row [N, 1] has
// the iteration shape [N, C]; at N = 0 a [1] result is no longer one element of [N]).
bool group_holds(const ir::Graph& g, const ir::Graph* planned, const ir::FusionGroup& grp, const ir::Shape& iter) {
  if (reduction_operand(g, grp) != ir::kNoNode) {  // the reduction kernel's own rules, at these sizes
    ir::FusionGroup now = grp;
    now.iter_shape = iter;
    const ir::ReduceGroupInfo info = ir::analyze_reduce_group(g, now);
    return info.problem.empty() && (!planned || info == ir::analyze_reduce_group(*planned, grp));
  }
  const std::vector<int64_t> iter_sizes = sizes_of(iter);
  for (ir::NodeId id : grp.outputs)
    if (sizes_of(g.node(id).shape) != iter_sizes) return false;
  for (ir::NodeId id : grp.inputs)
    if (!broadcasts_to(g.node(id).shape, iter)) return false;
  for (ir::NodeId id : grp.nodes)
    if (!broadcasts_to(g.node(id).shape, iter)) return false;
  return true;
}

// The row_cache argument of an entry (a launch whose kept values nobody reads passes 1, not 2).
void set_row_cache_slot(const KernelSignature& sig, std::vector<uint64_t>& slots, int mode) {
  for (size_t k = 0; k < sig.args.size() && k < slots.size(); ++k)
    if (sig.args[k].kind == ArgKind::RowCache) slots[k] = static_cast<uint64_t>(mode);
}

// The row cache of a group whose rows are not split (GroupLaunch::row_cache_bytes), and its
// row_cache argument in both entries' static slots.
void set_row_cache(const LaunchRules& rules, int64_t row_len, GroupLaunch& out) {
  if (!rules.row_cache) return;
  // Short rows leave the row cache only where the fast entry's vector loop reads them (its scalar
  // loop keeps 256 / V threads: measured only with vectors).
  const bool short_rows = rules.short_rows && out.rows_ok;
  const ir::RowCacheUse use = ir::row_cache_use(out.kernel->row_cache_sizes, out.kernel->row_value_sizes, row_len,
                                                out.row_split, rules.row_cache_limit, short_rows,
                                                out.kernel->row_cache_per_row);
  out.row_cache_bytes = use.bytes;
  out.row_cache_mode = use.mode;
  if (use.mode == 0) return;
  // Only kernels that write element outputs gain from the long-row block (kReduceLongRowBlock).
  out.long_rows = row_len >= kLongRowElements && out.kernel->writes_elements();
  if (use.mode == 2)
    out.row_cache_input_bytes =
        ir::row_cache_use(out.kernel->row_cache_sizes, {}, row_len, out.row_split, rules.row_cache_limit,
                          short_rows).bytes;
  if (out.fast) set_row_cache_slot(out.kernel->signature, out.fast_args, use.mode);
  set_row_cache_slot(out.kernel->strided_signature, out.strided_args, use.mode);
}

// The launch of one group, or false when the plan's grouping does not hold for these shapes.
bool group_launch(const ir::Graph& g, const ir::Graph* planned, const ir::FusionGroup& grp, size_t gi,
                  const KernelProvider& kernels, const LaunchRules& rules, GroupLaunch& out) {
  const ir::Shape iter = current_iter_shape(g, grp);
  if (!group_holds(g, planned, grp, iter)) return false;
  std::vector<ir::Shape> in_shapes;
  for (ir::NodeId id : grp.inputs) in_shapes.push_back(g.node(id).shape);
  out.n = ir::num_elements(iter);
  const GeneratedKernel& base = kernels(0, gi);
  int64_t index_range = out.n;
  out.items = out.n;
  if (base.reduction) {
    const int64_t rows = ir::num_elements(ir::reduced_shape(iter, grp.reduce_mask, false));
    index_range = std::max(out.n, rows);
    // One block per row, or per group of rows side by side (a column kernel).
    const int64_t rpb = std::max(1, base.rows_per_block);
    // Saturating: 2^63 - 1 rows of a u8 tensor plan, though no device holds them.
    out.items = ir::mul_bytes(base.row_blocks ? rows : ir::ceil_div(rows, rpb), kReduceItemsPerBlock);
  }
  if (ir::writes_nothing(g, grp)) index_range = out.items = 0;  // e.g. softmax over 2^32 rows of length 0
  out.variant = !base.index64 && needs_index64(index_range) ? 1 : 0;
  out.kernel = out.variant ? &kernels(1, gi) : &base;
  out.fast = layout_matches(out.kernel->signature, in_shapes, iter);
  out.rows_ok = out.fast && vector_rows_ok(out.kernel->signature, iter);
  if (out.fast) out.fast_args = static_args(out.kernel->signature, in_shapes, iter);
  out.strided_args = static_args(out.kernel->strided_signature, in_shapes, iter);
  if (out.kernel->split_reductions > 0) {
    const int64_t rows = ir::num_elements(ir::reduced_shape(iter, grp.reduce_mask, false));
    const int64_t row_len = ir::reduce_length(iter, grp.reduce_mask);
    out.row_split = ir::blocks_per_row(rules, out.kernel->row_blocks, rows, out.kernel->rows_per_block, row_len);
    if (out.row_split > 1) out.workspace_bytes = 8 * ir::split_workspace_slots(out.kernel->split_reductions, rows, row_len);
    set_row_cache(rules, row_len, out);
  }
  return true;
}

}  // namespace

std::shared_ptr<const LaunchState> make_launch_state(const ir::Graph& g, const ir::Plan& plan,
                                                     const PlanBindings& bindings, const KernelProvider& kernels,
                                                     const LaunchRules& rules, const ir::Graph* planned) {
  auto st = std::make_shared<LaunchState>();
  for (const ir::DimDecl& d : g.dims) st->dims.push_back(d.value);
  for (ir::NodeId id : g.inputs) st->input_shapes.push_back(sizes_of(g.node(id).shape));
  for (const ir::OutputDecl& o : g.outputs) {
    st->output_shapes.push_back(sizes_of(g.node(o.node).shape));
    st->output_bytes.push_back(value_bytes(g, o.node));
  }
  for (ir::NodeId id : bindings.intermediates) st->intermediate_bytes.push_back(value_bytes(g, id));
  st->groups.resize(plan.groups.size());
  for (size_t gi = 0; gi < plan.groups.size(); ++gi) {
    if (!group_launch(g, planned, plan.groups[gi], gi, kernels, rules, st->groups[gi])) return nullptr;
    st->wide = st->wide || st->groups[gi].variant == 1;
  }
  const std::vector<int> output_bindings = ir::output_bindings(g);
  for (size_t gi = 0; gi < plan.groups.size(); ++gi) {  // at these dims, as the kernels run with `rules`
    if (st->groups[gi].launches() == 0) continue;       // nothing to compute: no traffic (kernels = 0, bytes = 0)
    ir::FusionGroup at = plan.groups[gi];
    at.iter_shape = current_iter_shape(g, plan.groups[gi]);
    st->bytes_moved = ir::add_bytes(st->bytes_moved, ir::group_traffic(g, at, rules, output_bindings).bytes());
  }
  return st;
}

// ---- launch_plan -------------------------------------------------------------------------------

namespace {

// What a launch reads its tensors from.
struct Tensors {
  std::span<const TensorArg> inputs, outputs;
  std::span<const uint64_t> intermediates;
  const std::vector<uint8_t>& canonical_in;
  const std::vector<uint8_t>& canonical_out;

  const TensorArg* caller(const BufferRef& r) const {
    if (r.kind == BufferRef::Kind::Input) return &inputs[static_cast<size_t>(r.index)];
    if (r.kind == BufferRef::Kind::Output) return &outputs[static_cast<size_t>(r.index)];
    return nullptr;
  }
  uint64_t addr(const BufferRef& r) const {
    const TensorArg* t = caller(r);
    return t ? t->addr : intermediates[static_cast<size_t>(r.index)];
  }
  bool canonical(const BufferRef& r) const {
    if (r.kind == BufferRef::Kind::Input) return canonical_in[static_cast<size_t>(r.index)] != 0;
    if (r.kind == BufferRef::Kind::Output) return canonical_out[static_cast<size_t>(r.index)] != 0;
    return true;
  }
  // The stride slot of a caller's strided tensor along its own dim t (-1: a dim it lacks).
  bool caller_stride(const BufferRef& r, int t, uint64_t& value) const {
    if (canonical(r)) return false;  // the static slot already holds the C-contiguous stride
    const TensorArg& a = *caller(r);
    const size_t d = static_cast<size_t>(t);
    value = t < 0 || a.shape[d] == 1 ? 0 : static_cast<uint64_t>(a.strides[d]);
    return true;
  }
};

bool group_is_canonical(const PlanBindings& b, size_t gi, const Tensors& t) {
  for (const BufferRef& r : b.group_inputs[gi])
    if (!t.canonical(r)) return false;
  for (const BufferRef& r : b.group_outputs[gi])
    if (!t.canonical(r)) return false;
  return true;
}

// Fills the slots of one entry that change per launch; returns whether every pointer is 16-byte
// aligned. `vec_slot` receives the index of vec_ok (or stays -1).
bool fill_dynamic(const KernelSignature& sig, const std::vector<BufferRef>& ins, const std::vector<BufferRef>& outs,
                  const Tensors& t, std::span<const ir::Scalar> params, std::vector<uint64_t>& slots, int& vec_slot) {
  bool aligned = true;
  for (size_t k = 0; k < sig.args.size(); ++k) {
    const ArgSlot& a = sig.args[k];
    const size_t i = static_cast<size_t>(std::max(a.index, 0));
    switch (a.kind) {
      case ArgKind::InputPtr:
      case ArgKind::OutputPtr:
        slots[k] = t.addr(a.kind == ArgKind::InputPtr ? ins[i] : outs[i]);
        aligned = aligned && slots[k] % 16 == 0;
        break;
      case ArgKind::Param: slots[k] = param_arg_bits(params[static_cast<size_t>(a.param_slot)], a.dtype); break;
      case ArgKind::InStride:
        t.caller_stride(ins[i], sig.layout.in_dims[i][static_cast<size_t>(a.dim)], slots[k]);
        break;
      case ArgKind::OutStride:
        t.caller_stride(outs[i], sig.layout.out_dims[i][static_cast<size_t>(a.dim)], slots[k]);
        break;
      case ArgKind::VecFlag: vec_slot = static_cast<int>(k); break;
      default: break;
    }
  }
  return aligned;
}

// The arguments of a split row's launch (GroupLaunch::row_split): which phase, the blocks per row
// and the workspace of the chunk values.
void set_split_slots(const KernelSignature& sig, std::vector<uint64_t>& slots, int phase, int64_t split, uint64_t ws) {
  for (size_t k = 0; k < sig.args.size(); ++k) {
    if (sig.args[k].kind == ArgKind::SplitPhase) slots[k] = static_cast<uint64_t>(phase);
    if (sig.args[k].kind == ArgKind::RowSplit) slots[k] = static_cast<uint64_t>(split);
    if (sig.args[k].kind == ArgKind::Workspace) slots[k] = ws;
  }
}

// Runs group `gi` with its arguments in s.slots: once, or once per phase of a split row.
void run_phases(const GroupLaunch& gl, size_t gi, const KernelSignature& sig, bool strided, bool vec,
                KernelRunner& runner, LaunchScratch& s) {
  s.ptrs.resize(s.slots.size());
  for (size_t k = 0; k < s.slots.size(); ++k) s.ptrs[k] = &s.slots[k];
  if (gl.row_split <= 1) return runner.run(gl, gi, strided, vec, gl.items, s.ptrs.data());
  const uint64_t ws = runner.workspace(static_cast<size_t>(gl.workspace_bytes));
  for (int phase = 1; phase <= gl.kernel->split_phases; ++phase) {
    set_split_slots(sig, s.slots, phase, gl.row_split, ws);
    runner.run(gl, gi, strided, vec, phase % 2 ? gl.items * gl.row_split : gl.items, s.ptrs.data());
  }
}

// Fills the arguments of group `gi` and runs it: once, or once per phase of a split row (odd: chunk
// values of row_split blocks per row, or the element outputs; even: one block per row combining).
void launch_group(const PlanBindings& b, const GroupLaunch& gl, size_t gi, const Tensors& t,
                  std::span<const ir::Scalar> params, KernelRunner& runner, const LaunchOptions& o, LaunchScratch& s,
                  LaunchStats& stats) {
  const bool strided = o.force_strided || !gl.fast || !group_is_canonical(b, gi, t);
  const KernelSignature& sig = strided ? gl.kernel->strided_signature : gl.kernel->signature;
  const std::vector<uint64_t>& fixed = strided ? gl.strided_args : gl.fast_args;
  s.slots.assign(fixed.begin(), fixed.end());
  int vec_slot = -1;
  const bool aligned = fill_dynamic(sig, b.group_inputs[gi], b.group_outputs[gi], t, params, s.slots, vec_slot);
  const bool vec = vec_slot >= 0 && o.vector_path && gl.rows_ok && aligned;
  if (vec_slot >= 0) s.slots[static_cast<size_t>(vec_slot)] = vec ? 1 : 0;
  const bool kept = gl.keeps_values(strided, vec);
  if (gl.row_cache_mode == 2 && !kept) set_row_cache_slot(sig, s.slots, 1);
  run_phases(gl, gi, sig, strided, vec, runner, s);
  stats.kernels += gl.launches();
  stats.vector += vec;
  stats.strided += strided;
  stats.kept += kept;
  stats.per_row_only += gl.row_cache_mode == 3;
}

}  // namespace

namespace {
struct ThreadScratch {
  std::vector<std::unique_ptr<LaunchScratch>> levels;  // one per nested Lease
  size_t depth = 0;                                    // Leases held
};
// The pointers are trivially destructible, so valid in any destructor a thread or the process runs
// at its end: a launch from a thread_local's or a global's destructor (a cache flushing at exit)
// found a destroyed thread_local scratch (hostile pass). The owner frees the scratch when the
// thread's thread_locals go; after that (`t_ended`), the outermost Lease frees the one it used.
thread_local ThreadScratch* t_scratch = nullptr;
thread_local bool t_ended = false;
struct ScratchOwner {
  ~ScratchOwner() {
    delete std::exchange(t_scratch, nullptr);
    t_ended = true;
  }
};
ThreadScratch& thread_scratch() {
  if (!t_scratch) {
    t_scratch = new ThreadScratch;
    if (!t_ended) {
      thread_local ScratchOwner owner;  // constructed (its destructor registered) at the first use
      (void)owner;
    }
  }
  return *t_scratch;
}
}  // namespace

LaunchScratch& LaunchScratch::of_this_thread() {
  ThreadScratch& t = thread_scratch();
  const size_t level = t.depth == 0 ? 0 : t.depth - 1;
  while (t.levels.size() <= level) t.levels.push_back(std::make_unique<LaunchScratch>());
  return *t.levels[level];
}

LaunchScratch::Lease::Lease() {
  ++thread_scratch().depth;
  scratch_ = &of_this_thread();
}

LaunchScratch::Lease::~Lease() {
  // t_scratch is the one the constructor used: nothing frees it while a Lease is held.
  if (--t_scratch->depth == 0 && t_ended) delete std::exchange(t_scratch, nullptr);
}

LaunchStats launch_plan(const PlanBindings& b, const LaunchState& st, std::span<const TensorArg> inputs,
                        std::span<const TensorArg> outputs, std::span<const uint64_t> intermediates,
                        std::span<const ir::Scalar> params, KernelRunner& runner, const LaunchOptions& o,
                        LaunchScratch& s) {
  FJ_CHECK(inputs.size() == st.input_shapes.size() && outputs.size() == st.output_shapes.size() &&
               intermediates.size() == st.intermediate_bytes.size(),
           "launch_plan: wrong number of tensors");
  s.canonical_in.resize(inputs.size());
  s.canonical_out.resize(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) s.canonical_in[i] = is_canonical(inputs[i].shape, inputs[i].strides);
  for (size_t k = 0; k < outputs.size(); ++k) s.canonical_out[k] = is_canonical(outputs[k].shape, outputs[k].strides);
  for (const PlanBindings::Copy& c : b.copies)
    if (!s.canonical_out[static_cast<size_t>(c.output)] || !s.canonical_out[static_cast<size_t>(c.from_output)])
      throw ir::UserError(fmt::format("output '{}' repeats output '{}''s value and one of them is a strided view: "
                                      "pass C-contiguous tensors for both (the value is copied as bytes)",
                                      c.name, c.from_name));
  const Tensors t{inputs, outputs, intermediates, s.canonical_in, s.canonical_out};
  LaunchStats stats;
  for (size_t gi = 0; gi < st.groups.size(); ++gi)
    if (st.groups[gi].items > 0) launch_group(b, st.groups[gi], gi, t, params, runner, o, s, stats);
  for (const PlanBindings::Copy& c : b.copies)
    if (const int64_t bytes = st.output_bytes[static_cast<size_t>(c.output)]; bytes > 0)
      runner.copy(outputs[static_cast<size_t>(c.output)].addr, outputs[static_cast<size_t>(c.from_output)].addr,
                  static_cast<size_t>(bytes));
  return stats;
}

// ---- Aliasing ----------------------------------------------------------------------------------

namespace {

// [begin, end) bytes a view spans; empty (0, 0) for a tensor without elements.
std::pair<uint64_t, uint64_t> byte_range(const TensorArg& t, ir::DType dtype) {
  const int64_t span = view_span(t.shape, t.strides);
  if (span < 0) return {0, 0};
  return {t.addr, t.addr + static_cast<uint64_t>((span + 1) * ir::dtype_size(dtype))};
}

bool overlap(std::pair<uint64_t, uint64_t> a, std::pair<uint64_t, uint64_t> b) {
  return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}

ByteView byte_view(const TensorArg& t, ir::DType dtype) {
  return {t.addr, t.shape, t.strides, static_cast<int64_t>(ir::dtype_size(dtype))};
}

// Views whose byte ranges overlap but whose bytes may be disjoint (two halves of each row): asks
// the exact question; one too costly to decide is refused as sharing, said as such.
Sharing share_bytes(const TensorArg& a, ir::DType da, const TensorArg& b, ir::DType db) {
  return views_share_bytes(byte_view(a, da), byte_view(b, db));
}

// How a refusal names the overlap: proven, or not decided within views_share_bytes's bound.
const char* overlap_verb(Sharing s) { return s == Sharing::Unknown ? "may overlap" : "overlaps"; }

// `fix`: what to pass instead ("separate buffers", "a contiguous array").
std::string undecided_note(Sharing s, const char* fix = "separate buffers") {
  return s == Sharing::Unknown ? fmt::format(" (fusejit could not decide within {} steps whether these interleaved "
                                             "strides share a byte, so it refuses them; pass {})",
                                             kOverlapMaxWork, fix)
                               : std::string();
}

std::string describe(const char* role, const std::string& name, std::pair<uint64_t, uint64_t> r) {
  return fmt::format("{} '{}' (bytes [0x{:x}, 0x{:x}))", role, name, r.first, r.second);
}

// Whether the strides are nested (each larger than the span of the smaller ones, as any C or
// sliced layout has): then no two elements share an address, found in one sorted pass.
bool nested_strides(const TensorArg& t) {
  if (t.strides.empty()) return true;
  std::array<std::pair<int64_t, int64_t>, ir::kMaxRank> dims{};
  size_t n = 0;
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (t.shape[d] > 1) dims[n++] = {t.strides[d], t.shape[d]};
  std::sort(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(n));
  int64_t reach = 0;
  for (size_t k = 0; k < n; ++k) {
    if (dims[k].first <= reach) return false;
    reach += (dims[k].second - 1) * dims[k].first;
  }
  return true;
}

// Two elements of the view at one address (a dim of size > 1 with stride 0, or strides that
// interleave onto each other; shape [3, 2] with strides [2, 3] interleaves without meeting).
Sharing self_overlap(const TensorArg& t, ir::DType dtype) {
  return nested_strides(t) ? Sharing::None : view_overlaps_itself(byte_view(t, dtype));
}

bool same_view(const TensorArg& a, const TensorArg& b) {
  if (a.addr != b.addr || !std::equal(a.shape.begin(), a.shape.end(), b.shape.begin(), b.shape.end())) return false;
  int64_t contiguous = 1;
  for (size_t d = a.shape.size(); d-- > 0;) {
    const int64_t sa = a.strides.empty() ? contiguous : a.strides[d];
    const int64_t sb = b.strides.empty() ? contiguous : b.strides[d];
    if (a.shape[d] != 1 && sa != sb) return false;
    contiguous *= a.shape[d];
  }
  return true;
}

// The error for output k overlapping input s where it may not.
[[noreturn]] void refuse_in_place(const ir::Graph& g, const PlanBindings& b, std::span<const TensorArg> inputs,
                                  std::span<const TensorArg> outputs, size_t k, size_t s, Sharing how) {
  const ir::Node& in = g.node(g.inputs[s]);
  const ir::Node& out = g.node(g.outputs[k].node);
  if (!same_view(outputs[k], inputs[s]) || out.dtype != in.dtype)
    throw ir::UserError(fmt::format("{} {} {}: an output may share memory with an input only as the same tensor "
                                    "(same address, dtype, shape and strides), updated in place{}",
                                    describe("output", g.outputs[k].name, byte_range(outputs[k], out.dtype)),
                                    overlap_verb(how), describe("input", in.name, byte_range(inputs[s], in.dtype)),
                                    undecided_note(how)));
  if (b.row_output[k] && b.last_reader[s] == b.writer[k])
    throw ir::UserError(fmt::format("output '{}' is the buffer of input '{}', but kernel {} of {} writes '{}' once per row "
                                    "of its reduction while the row's threads still read '{}': it cannot run in place; "
                                    "pass another output buffer",
                                    g.outputs[k].name, in.name, b.writer[k] + 1, b.group_inputs.size(),
                                    g.outputs[k].name, in.name));
  throw ir::UserError(fmt::format("output '{}' is the buffer of input '{}', but the plan reads '{}' in kernel {} of {} "
                                  "after writing '{}' in kernel {}: it cannot run in place; pass another output buffer",
                                  g.outputs[k].name, in.name, in.name, b.last_reader[s] + 1, b.group_inputs.size(),
                                  g.outputs[k].name, b.writer[k] + 1));
}

// Whether output k may be input s's own buffer: the same tensor, last read by the kernel that
// writes it (each element is read before it is written: a row value is not) or an earlier one. A
// copy runs after every kernel.
bool may_run_in_place(const ir::Graph& g, const PlanBindings& b, const TensorArg& out, const TensorArg& in, size_t k,
                      size_t s) {
  const int32_t writes = b.writer[k] >= 0 ? b.writer[k] : static_cast<int32_t>(b.group_inputs.size());
  const bool before = b.last_reader[s] < writes || (b.last_reader[s] == writes && !b.row_output[k]);
  return before && same_view(out, in) && g.node(g.outputs[k].node).dtype == g.node(g.inputs[s]).dtype;
}

}  // namespace

void check_aliasing(const ir::Graph& g, const PlanBindings& b, std::span<const TensorArg> inputs,
                    std::span<const TensorArg> outputs, LaunchScratch& sc) {
  FJ_CHECK(inputs.size() == g.inputs.size() && outputs.size() == g.outputs.size(), "check_aliasing: wrong counts");
  sc.input_bytes.clear();
  sc.output_bytes.clear();
  for (size_t s = 0; s < inputs.size(); ++s) sc.input_bytes.push_back(byte_range(inputs[s], g.node(g.inputs[s]).dtype));
  for (size_t k = 0; k < outputs.size(); ++k) {
    const std::pair<uint64_t, uint64_t> out = byte_range(outputs[k], g.node(g.outputs[k].node).dtype);
    sc.output_bytes.push_back(out);
    const ir::DType dk = g.node(g.outputs[k].node).dtype;
    if (const Sharing self = out.first < out.second ? self_overlap(outputs[k], dk) : Sharing::None;
        self != Sharing::None)
      throw ir::UserError(fmt::format("output '{}' is a view whose elements {} each other (a stride of 0, or strides "
                                      "that interleave onto each other): every output element needs its own memory{}",
                                      g.outputs[k].name, self == Sharing::Unknown ? "may overlap" : "overlap",
                                      undecided_note(self, "a contiguous array")));
    for (size_t s = 0; s < inputs.size(); ++s) {
      if (!overlap(out, sc.input_bytes[s])) continue;
      if (may_run_in_place(g, b, outputs[k], inputs[s], k, s)) continue;
      const Sharing how = share_bytes(outputs[k], dk, inputs[s], g.node(g.inputs[s]).dtype);
      if (how != Sharing::None) refuse_in_place(g, b, inputs, outputs, k, s, how);
    }
    for (size_t j = 0; j < k; ++j) {
      if (!overlap(out, sc.output_bytes[j])) continue;
      const Sharing how = share_bytes(outputs[k], dk, outputs[j], g.node(g.outputs[j].node).dtype);
      if (how != Sharing::None)
        throw ir::UserError(fmt::format("{} {} {}: outputs must not share memory{}",
                                        describe("output", g.outputs[k].name, out), overlap_verb(how),
                                        describe("output", g.outputs[j].name, sc.output_bytes[j]), undecided_note(how)));
    }
  }
}

}  // namespace fusejit::jit
