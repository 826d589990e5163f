// fusejit::Program, launching: dims bound from the tensors' shapes, the per-dims launch state
// (made once per set of dim values, then a hash lookup), the modules of each CUDA context (loaded
// once per context), and the launch itself on the GPU or the CPU. A warm launch allocates nothing
// (per-thread scratch keeps its capacity) and makes no driver call but cuCtxGetCurrent, cuCtxGetId
// and cuLaunchKernel.
#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/reduce.h"
#include "ir/tensor.h"
#include "lib/launch_check.h"
#include "lib/program_impl.h"

namespace fusejit {

using Impl = Program::Impl;

namespace {

uint64_t hash_dims(std::span<const int64_t> dims) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the values
  for (int64_t v : dims) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
  return h;
}

// ---- Dims entries ------------------------------------------------------------------------------

DimValues named_dims(const ir::Graph& g, std::span<const int64_t> dims) {
  DimValues out;
  for (size_t k = 0; k < g.dims.size(); ++k) out.emplace_back(g.dims[k].name, dims[k]);
  return out;
}

ir::Graph rebound(const ir::Graph& g, const DimValues& dims) {
  ir::Graph r = g;
  ir::rebind_dims(r, dims);
  return r;
}

// Whether every value of `a` has the same dims as in `b` (the same graph at other dim values): each
// dim the same named dim, or the same literal size. Where a broadcast takes another dim
// (`a * 0 + b` of [2, R] and [2, S]: [2, S] at R = 1, [2, R] at S = 1), it does not.
bool same_broadcasts(const ir::Graph& a, const ir::Graph& b) {
  for (size_t n = 0; n < a.nodes.size(); ++n) {
    const ir::Shape& x = a.nodes[n].shape;
    const ir::Shape& y = b.nodes[n].shape;
    if (x.size() != y.size()) return false;
    for (size_t d = 0; d < x.size(); ++d)
      if (x[d].sym != y[d].sym || (x[d].sym < 0 && x[d].size != y[d].size)) return false;
  }
  return true;
}

// Whether no rewrite rule fired but the two that depend on no shape (CSE, dead code).
bool no_shape_rule_fired(const ir::RewriteResult& r) {
  for (const ir::RuleCount& c : r.counts)
    if (c.count > 0 && c.rule != ir::kDeadCodeRuleName && c.rule != ir::kCseRuleName) return false;
  return true;
}

// True when the rewrites made at the compiled dims hold at these: the graph as written broadcasts
// as it did there (a rewrite such as a * 0 + b -> b, or x * 1 -> x, fired where its operand had the
// result's dims, which a broadcast that now takes another named dim changes, also where the outputs
// keep their shapes), and the rewritten graph's outputs have the shapes the graph as written gives.
bool rewrites_hold(const Impl& p, const ir::Graph& fused_at_dims, const DimValues& dims) {
  const ir::Graph g = rebound(p.graph_of(PlanKind::Unfused), dims);
  // No rule fired (dead code and CSE aside: neither depends on a shape): the fused graph is the
  // graph as written, whose plan make_launch_state checks at these dims itself.
  if (!no_shape_rule_fired(p.rewrite) && !same_broadcasts(g, p.graph_of(PlanKind::Unfused))) return false;
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (ir::shape_sizes(g.node(g.outputs[k].node).shape) !=
        ir::shape_sizes(fused_at_dims.node(fused_at_dims.outputs[k].node).shape))
      return false;
  return true;
}

// A Program compiled for the dims `dims` (and any other with the same dims at 0, at 1 and above),
// for dim values where this program's plan does not hold.
std::shared_ptr<const Impl> specialization(const Impl& p, const DimValues& dims) {
  std::vector<uint8_t> mask;  // per dim: 0, 1, or 2 for more (what a plan's analysis depends on)
  for (const auto& d : dims) mask.push_back(static_cast<uint8_t>(std::min<int64_t>(d.second, 2)));
  {
    std::lock_guard lock(p.spec_mu);
    for (const auto& [m, s] : p.specializations)
      if (m == mask) return s;
  }
  Options o = p.options;
  o.backend = p.backend;
  o.dump_dir.clear();
  o.build_unfused = false;
  const Program spec = [&] {
    try {
      return compile_program(p.graph.with_dims(dims), o, false);  // no FUSEJIT_DUMP_DIR folder of its own
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Compile) throw;
      std::string named;
      for (const auto& [name, v] : dims) named += (named.empty() ? "" : ", ") + name + " = " + std::to_string(v);
      throw Error(ErrorKind::Compile, "the dims " + named + " need the graph planned and compiled again for their dims "
                                      "at 0 and 1 (docs/api.md, \"What makes a new kernel\"): " + e.what());
    }
  }();
  std::lock_guard lock(p.spec_mu);
  for (const auto& [m, s] : p.specializations)
    if (m == mask) return s;  // another thread was first
  const auto holder = std::make_shared<const Program>(spec);
  std::shared_ptr<const Impl> impl(holder, &holder->impl());  // shares spec's ownership
  p.specializations.emplace_back(mask, impl);
  const std::vector<KernelInfo> k = spec.kernels(PlanKind::Fused);
  p.spec_infos.insert(p.spec_infos.end(), k.begin(), k.end());
  return impl;
}

Impl::DimsEntry make_entry(const Impl& p, const Impl::Path& path, std::span<const int64_t> dims, uint64_t h) {
  Impl::DimsEntry e;
  e.hash = h;
  e.dims.assign(dims.begin(), dims.end());
  const DimValues named = named_dims(p.graph_of(path.kind), dims);
  const ir::Graph g = rebound(p.graph_of(path.kind), named);
  if (path.kind == PlanKind::Unfused || rewrites_hold(p, g, named))
    e.state = jit::make_launch_state(
        g, path.plan, *path.bindings,
        [&](int v, size_t gi) -> const jit::GeneratedKernel& { return p.variant(path, v).kernels[gi]; },
        p.rules, &p.graph_of(path.kind));
  if (!e.state) e.delegate = specialization(p, named);
  return e;
}

}  // namespace

DimsHit dims_entry(const Impl& p, const Impl::Path& path, std::span<const int64_t> dims) {
  const uint64_t h = hash_dims(dims);
  {
    std::lock_guard lock(path.mu);
    for (const Impl::DimsEntry& e : path.dims)
      if (e.hash == h && std::equal(e.dims.begin(), e.dims.end(), dims.begin(), dims.end())) return {e.state, e.delegate};
  }
  Impl::DimsEntry e = make_entry(p, path, dims, h);  // outside the lock: it may compile
  const DimsHit hit{e.state, e.delegate};
  std::lock_guard lock(path.mu);
  if (path.dims.size() < Impl::kMaxDimsEntries) {
    path.dims.push_back(std::move(e));
  } else {
    path.dims[path.next_evict] = std::move(e);
    path.next_evict = (path.next_evict + 1) % Impl::kMaxDimsEntries;
  }
  return hit;
}

std::pair<const Impl*, DimsHit> resolve_dims(const Impl& p, PlanKind kind, std::span<const int64_t> dims) {
  const Impl* impl = &p;
  DimsHit hit = dims_entry(p, p.path(kind), dims);
  while (hit.delegate) {
    impl = hit.delegate.get();
    hit = dims_entry(*impl, impl->path(kind), dims);
  }
  return {impl, hit};
}

namespace {

// ---- The GPU -----------------------------------------------------------------------------------

// The caller's current context for the call, or the program's own, pushed for it; with its
// jit::context_id, since a handle can name a context made after the one modules were loaded in.
class CurrentContext {
 public:
  explicit CurrentContext(const Impl& p) : p_(p) {
    const jit::DriverApi& a = p.device->api();
    p.device->driver().check(a.cuCtxGetCurrent(&ctx_), "cuCtxGetCurrent");
    if (ctx_ == nullptr) {
      ctx_ = p.device->context();
      p.device->driver().check(a.cuCtxPushCurrent(ctx_), "cuCtxPushCurrent");
      pushed_ = true;
    }
    // Asked also of the program's own context: the one it borrowed at compile time may have been
    // destroyed and another made at its address, or a primary context reset (cudaDeviceReset).
    id_ = jit::context_id(p.device->driver(), ctx_);
  }
  ~CurrentContext() {
    jit::cu::Context popped = nullptr;
    if (pushed_) p_.device->api().cuCtxPopCurrent(&popped);  // a destructor cannot throw
  }
  CurrentContext(const CurrentContext&) = delete;
  CurrentContext& operator=(const CurrentContext&) = delete;
  jit::cu::Context get() const { return ctx_; }
  uint64_t id() const { return id_; }
  bool pushed() const { return pushed_; }  // the program's own context, none being current
  // Whether this is the context `l` was loaded in, or that of `dc`.
  bool is(const Impl::Loaded& l) const { return l.ctx == ctx_ && l.ctx_id == id_; }
  bool is(const jit::DeviceContext& dc) const { return dc.context() == ctx_ && dc.context_id() == id_; }

 private:
  const Impl& p_;
  jit::cu::Context ctx_ = nullptr;
  uint64_t id_ = 0;
  bool pushed_ = false;
};

// The variants `path` needs loaded in context `ctx` (which is current): loaded at the first
// launch in that context, then found.
struct LoadedRefs {
  const jit::DeviceContext* dc = nullptr;
  const jit::GpuProgram* v0 = nullptr;
  const jit::GpuProgram* v1 = nullptr;
};

LoadedRefs find_loaded(const Impl::Path& path, const CurrentContext& ctx, bool wide) {
  std::lock_guard lock(path.mu);
  for (const Impl::Loaded& l : path.contexts)
    if (ctx.is(l) && (!wide || l.variants[1])) return {l.dc.get(), l.variants[0].get(), l.variants[1].get()};
  return {};
}

LoadedRefs load_in_context(const Impl& p, const Impl::Path& path, const CurrentContext& ctx, bool wide) {
  std::shared_ptr<jit::DeviceContext> dc = ctx.is(*p.device) ? p.device
                                               : jit::DeviceContext::open(p.options.device, p.device->driver_ptr());
  const ir::Graph& g = p.graph_of(path.kind);
  auto load = [&](int v) {
    return std::make_shared<const jit::GpuProgram>(jit::GpuProgram::load(dc, g, path.plan, p.variant(path, v).gpu));
  };
  std::shared_ptr<const jit::GpuProgram> v0 = load(0), v1 = wide ? load(1) : nullptr;
  std::lock_guard lock(path.mu);
  for (Impl::Loaded& l : path.contexts)
    if (ctx.is(l)) {
      if (!l.variants[1]) l.variants[1] = v1;
      return {l.dc.get(), l.variants[0].get(), l.variants[1].get()};
    }
  // The entries of a context destroyed at this handle are retired: their modules went with it (and
  // are never unloaded: the handles may name a later context's), and a launch that found them
  // before may still hold their pointers.
  auto dead = std::stable_partition(path.contexts.begin(), path.contexts.end(),
                                    [&](const Impl::Loaded& l) { return l.ctx != ctx.get(); });
  std::move(dead, path.contexts.end(), std::back_inserter(path.retired));
  path.contexts.erase(dead, path.contexts.end());
  path.contexts.push_back({ctx.get(), ctx.id(), dc, {v0, v1}});
  const Impl::Loaded& l = path.contexts.back();
  return {l.dc.get(), l.variants[0].get(), l.variants[1].get()};
}

// Refuses tensors on CUDA device `device` (TensorRef::device) when the launch runs in a context on
// another device, `ctx_device`: the program's own context when `pushed`, else the caller's.
void check_device(int device, int ctx_device, bool pushed) {
  if (device < 0 || device == ctx_device) return;
  const std::string where =
      pushed ? fmt::format("the program's device {} (no CUDA context is current on this thread)", ctx_device)
             : fmt::format("device {}, that of this thread's current CUDA context, where fusejit launches "
                           "(torch.cuda.set_device({}) or `with torch.cuda.device({}):` makes device {} current)",
                           ctx_device, device, device, device);
  throw ir::UserError(fmt::format("the tensors are on CUDA device {}, but the kernels would run on {}", device, where));
}

// The device of the calling thread's current context, asked of the driver (a cold path: a warm launch reads it
// from the context's loaded modules, with no driver call).
int context_device(const Impl& p) {
  jit::cu::Device d = 0;
  p.device->driver().check(p.device->api().cuCtxGetDevice(&d), "cuCtxGetDevice");
  return static_cast<int>(d);
}

void launch_gpu(const Impl& p, const Impl::Path& path, const jit::LaunchState& st, const LaunchTensors& t,
                std::span<const ir::Scalar> params, void* stream, const jit::LaunchOptions& o, jit::LaunchScratch& sc) {
  const CurrentContext ctx(p);
  LoadedRefs r = find_loaded(path, ctx, st.wide);
  if (!r.v0) {  // checked before loading: another GPU's architecture would fail the load less clearly
    if (o.device >= 0) check_device(o.device, context_device(p), ctx.pushed());
    r = load_in_context(p, path, ctx, st.wide);
  }
  check_device(o.device, r.dc->info().ordinal, ctx.pushed());
  const auto s = static_cast<jit::cu::Stream>(stream);
  jit::GpuKernelRunner runner(*r.dc, r.v0, r.v1, s);
  if (!t.intermediates.empty() || st.intermediate_bytes.empty()) {
    jit::launch_plan(*path.bindings, st, t.inputs, t.outputs, t.intermediates, params, runner, o, sc);
    return;
  }
  // Intermediates stream-ordered: allocated and freed on the caller's stream around the kernels.
  const jit::StreamScratch inter(*r.dc, path.bindings->intermediates, st.intermediate_bytes, s, sc.device_intermediates);
  jit::launch_plan(*path.bindings, st, t.inputs, t.outputs, inter.addrs(), params, runner, o, sc);
}

// ---- The CPU -----------------------------------------------------------------------------------

// Grows the per-thread arena of the CPU path's intermediates to `bytes`; Error(User) when the host
// cannot hold them (the unfused softmax of 2^33 empty rows still writes 2^33 row maxima).
void grow_host_arena(std::vector<std::byte>& arena, int64_t bytes) {
  try {
    if (static_cast<uint64_t>(bytes) > arena.max_size()) throw std::bad_alloc();
    arena.resize(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::User, fmt::format("not enough host memory for the intermediates of this plan ({} bytes)", bytes));
  }
}

void launch_cpu(const Impl& p, const Impl::Path& path, const jit::LaunchState& st, const LaunchTensors& t,
                std::span<const ir::Scalar> params, const jit::LaunchOptions& o, jit::LaunchScratch& s) {
  const jit::CpuProgram* v0 = p.variant(path, 0).cpu.get();
  const jit::CpuProgram* v1 = st.wide ? p.variant(path, 1).cpu.get() : nullptr;
  jit::CpuKernelRunner runner(v0, v1);
  std::span<const uint64_t> inter = t.intermediates;
  if (inter.empty() && !st.intermediate_bytes.empty()) {
    // Per-thread host memory, 64-byte aligned slices (the vector path needs 16).
    int64_t total = 64;  // saturating: 2^63 - 1 is more than any host has
    for (int64_t b : st.intermediate_bytes) total = ir::add_bytes(total, ir::mul_bytes(ir::ceil_div(b, 64), 64));
    if (s.host_arena.size() < static_cast<uint64_t>(total)) grow_host_arena(s.host_arena, total);
    uint64_t at = (reinterpret_cast<uint64_t>(s.host_arena.data()) + 63) / 64 * 64;
    s.host_intermediates.clear();
    for (int64_t b : st.intermediate_bytes) {
      s.host_intermediates.push_back(at);
      at += (static_cast<uint64_t>(b) + 63) / 64 * 64;
    }
    inter = s.host_intermediates;
  }
  jit::launch_plan(*path.bindings, st, t.inputs, t.outputs, inter, params, runner, o, s);
}

}  // namespace

void launch_bound(const Impl& p, PlanKind kind, std::span<const int64_t> dims, const LaunchTensors& t,
                  std::span<const ir::Scalar> params, void* stream, const jit::LaunchOptions& o, jit::LaunchScratch& s) {
  const Impl::Path& path = p.path(kind);
  const DimsHit hit = dims_entry(p, path, dims);
  if (hit.delegate) return launch_bound(*hit.delegate, kind, dims, t, params, stream, o, s);
  const jit::LaunchState& st = *hit.state;
  check_output_shapes(p.graph_of(kind), st, t.outputs);
  jit::check_aliasing(p.graph_of(kind), *path.bindings, t.inputs, t.outputs, s);
  if (p.backend == Backend::Cuda) launch_gpu(p, path, st, t, params, stream, o, s);
  else launch_cpu(p, path, st, t, params, o, s);
}

// ---- The public launch calls -------------------------------------------------------------------

void Program::launch(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs, const Params& params,
                     void* stream, PlanKind kind) const {
  translate_errors([&] {
    const Impl& p = *impl_;
    const ir::Graph& g = p.graph.impl().graph;
    const jit::LaunchScratch::Lease lease;
    jit::LaunchScratch& s = lease.scratch();
    check_counts(g, inputs.size(), outputs.size());
    s.inputs.clear();
    s.outputs.clear();
    for (const TensorRef& r : inputs) s.inputs.push_back({reinterpret_cast<uint64_t>(r.data), r.shape, r.strides});
    for (const TensorRef& r : outputs) s.outputs.push_back({reinterpret_cast<uint64_t>(r.data), r.shape, r.strides});
    bind_dims(g, inputs, s.dims, p.options.message_style);
    check_output_dtypes(g, outputs);
    check_strides(g, s.inputs, s.outputs);
    if (p.backend == Backend::Cuda) check_alignment(g, s.inputs, s.outputs);
    const std::span<const ir::Scalar> pv = resolve_params_fast(p, params, s.params);
    jit::LaunchOptions o;
    o.device = tensors_device(g, inputs, outputs, p.backend == Backend::Cuda);
    launch_bound(p, kind, s.dims, {s.inputs, s.outputs, {}}, pv, stream, o, s);
  }, impl_->graph.impl().graph.file, impl_->graph.impl().source);  // a graph line at these dims (rebind_dims)
}

std::vector<std::vector<int64_t>> Program::output_shapes(std::span<const TensorRef> inputs, PlanKind kind) const {
  return translate_errors([&] {
    std::vector<int64_t> dims;
    bind_dims(impl_->graph.impl().graph, inputs, dims, impl_->options.message_style);
    const auto [runs, hit] = resolve_dims(*impl_, kind, dims);
    return hit.state->output_shapes;
  }, impl_->graph.impl().graph.file, impl_->graph.impl().source);
}

std::vector<std::vector<int64_t>> Program::output_shapes(std::initializer_list<TensorRef> inputs, PlanKind kind) const {
  return output_shapes(std::span<const TensorRef>(inputs.begin(), inputs.size()), kind);
}

void Program::launch(std::initializer_list<TensorRef> inputs, std::initializer_list<TensorRef> outputs,
                     const Params& params, void* stream, PlanKind kind) const {
  launch(std::span<const TensorRef>(inputs.begin(), inputs.size()), std::span<const TensorRef>(outputs.begin(), outputs.size()),
         params, stream, kind);
}

void Program::launch(std::span<const void* const> inputs, std::span<void* const> outputs, const Params& params,
                     void* stream, PlanKind kind, const DimValues& dims) const {
  translate_errors([&] {
    const Impl& p = *impl_;
    if (p.backend != Backend::Cuda)
      throw ir::UserError("Program::launch with device pointers needs the CUDA backend; this program was compiled for "
                          "the CPU (use launch() with TensorRefs to host memory, or run())");
    const ir::Graph& g = p.graph.impl().graph;
    check_counts(g, inputs.size(), outputs.size());
    const jit::LaunchScratch::Lease lease;
    jit::LaunchScratch& s = lease.scratch();
    dims_from_values(g, dims, s.dims);
    const auto [runs, hit] = resolve_dims(p, kind, s.dims);  // `hit` keeps the state alive
    const jit::LaunchState& st = *hit.state;
    s.inputs.clear();
    s.outputs.clear();
    for (size_t k = 0; k < inputs.size(); ++k)
      s.inputs.push_back({reinterpret_cast<uint64_t>(inputs[k]), st.input_shapes[k], {}});
    for (size_t k = 0; k < outputs.size(); ++k)
      s.outputs.push_back({reinterpret_cast<uint64_t>(outputs[k]), st.output_shapes[k], {}});
    check_strides(g, s.inputs, s.outputs);  // no null pointer for a tensor with elements
    check_alignment(g, s.inputs, s.outputs);
    const std::span<const ir::Scalar> pv = resolve_params_fast(p, params, s.params);
    launch_bound(p, kind, s.dims, {s.inputs, s.outputs, {}}, pv, stream, {}, s);
  }, impl_->graph.impl().graph.file, impl_->graph.impl().source);  // a graph line at these dims (rebind_dims)
}

}  // namespace fusejit
