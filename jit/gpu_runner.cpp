// Running and measuring plans on the GPU. See gpu_runner.h.
#include "jit/gpu_runner.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <numeric>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/passes/plan_report.h"
#include "ir/reduce_group.h"

namespace fusejit::jit {
namespace {

// Declared after a function's device buffers (so destroyed before they are freed): when an
// exception unwinds, waits for the work queued on `s`, which may still use them (cuMemFree "may
// perform implicit synchronization": not a promise, CUDA Driver API, Memory Management).
class DrainOnUnwind {
 public:
  DrainOnUnwind(const DeviceContext& dc, cu::Stream s) : dc_(dc), s_(s), unwinding_(std::uncaught_exceptions()) {}
  ~DrainOnUnwind() {
    if (std::uncaught_exceptions() > unwinding_) dc_.api().cuStreamSynchronize(s_);  // its error is the thrown one's
  }
  DrainOnUnwind(const DrainOnUnwind&) = delete;
  DrainOnUnwind& operator=(const DrainOnUnwind&) = delete;

 private:
  const DeviceContext& dc_;
  cu::Stream s_;
  int unwinding_;
};

// Events for `count` timed runs (a start and an end event each).
class EventPairs {
 public:
  EventPairs(const DeviceContext& dc, int count) : dc_(dc) {
    ev_.reserve(static_cast<size_t>(count) * 2);
    for (int i = 0; i < count * 2; ++i) {
      cu::Event e = nullptr;
      dc.driver().check(dc.api().cuEventCreate(&e, 0 /* CU_EVENT_DEFAULT: timing enabled */), "cuEventCreate");
      ev_.push_back(e);
    }
  }
  ~EventPairs() {
    for (cu::Event e : ev_) dc_.api().cuEventDestroy(e);
  }
  EventPairs(const EventPairs&) = delete;
  EventPairs& operator=(const EventPairs&) = delete;
  cu::Event start(int i) const { return ev_[static_cast<size_t>(i) * 2]; }
  cu::Event end(int i) const { return ev_[static_cast<size_t>(i) * 2 + 1]; }
  // Waits for the last run and returns each run's elapsed time in milliseconds.
  std::vector<double> elapsed(int count) const {
    std::vector<double> out;
    if (count == 0) return out;
    dc_.driver().check(dc_.api().cuEventSynchronize(end(count - 1)), "cuEventSynchronize");
    for (int i = 0; i < count; ++i) {
      float ms = 0;
      dc_.driver().check(dc_.api().cuEventElapsedTime(&ms, start(i), end(i)), "cuEventElapsedTime");
      out.push_back(ms);
    }
    return out;
  }

 private:
  const DeviceContext& dc_;
  std::vector<cu::Event> ev_;
};

// The one timing loop: `warmup` untimed calls of run(k), then `repeats` calls each between a pair
// of events on stream `s`; returns each timed call's milliseconds.
std::vector<double> time_runs(const DeviceContext& d, cu::Stream s, int warmup, int repeats,
                              const std::function<void(int)>& run) {
  for (int w = 0; w < warmup; ++w) run(w);
  EventPairs ev(d, repeats);
  for (int r = 0; r < repeats; ++r) {
    d.driver().check(d.api().cuEventRecord(ev.start(r), s), "cuEventRecord");
    run(r);
    d.driver().check(d.api().cuEventRecord(ev.end(r), s), "cuEventRecord");
  }
  return ev.elapsed(repeats);
}

int64_t sum_of(std::span<const int64_t> v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

// Device buffers for one run: inputs, outputs, intermediates.
struct BufferSet {
  std::vector<DeviceBuffer> in, out, inter;
  std::vector<cu::DevicePtr> in_p, out_p, inter_p;
};

std::vector<DeviceBuffer> alloc_all(const std::shared_ptr<DeviceContext>& dc, std::span<const int64_t> sizes,
                                    std::string_view what) {
  std::vector<DeviceBuffer> out;
  out.reserve(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i)
    out.emplace_back(dc, static_cast<size_t>(sizes[i]), fmt::format("{} {}", what, i));
  return out;
}

std::vector<cu::DevicePtr> ptrs_of(const std::vector<DeviceBuffer>& bufs) {
  std::vector<cu::DevicePtr> p;
  p.reserve(bufs.size());
  for (const DeviceBuffer& b : bufs) p.push_back(b.ptr());
  return p;
}

// A buffer set whose inputs are copied from `from_device` (device addresses), or from `from_host`
// when that is empty.
BufferSet make_set(const std::shared_ptr<DeviceContext>& dc, const RunSpec& spec, std::span<const cu::DevicePtr> from_device,
                   std::span<const std::span<const std::byte>> from_host, cu::Stream s) {
  const Driver& drv = dc->driver();
  BufferSet b;
  b.in = alloc_all(dc, spec.input_bytes, "input");
  b.out = alloc_all(dc, spec.output_bytes, "output");
  b.inter = alloc_all(dc, spec.intermediate_bytes, "intermediate");
  const DrainOnUnwind drain(*dc, s);  // every allocation made before the first copy is queued
  for (size_t i = 0; i < b.in.size(); ++i) {
    if (spec.input_bytes[i] == 0) continue;
    if (from_device.empty())
      drv.check(dc->api().cuMemcpyHtoDAsync(b.in[i].ptr(), from_host[i].data(), from_host[i].size(), s), "cuMemcpyHtoDAsync");
    else
      drv.check(dc->api().cuMemcpyDtoDAsync(b.in[i].ptr(), from_device[i], static_cast<size_t>(spec.input_bytes[i]), s),
                "cuMemcpyDtoDAsync (input copy)");
  }
  b.in_p = ptrs_of(b.in);
  b.out_p = ptrs_of(b.out);
  b.inter_p = ptrs_of(b.inter);
  return b;
}

void poison(const DeviceContext& d, const std::vector<DeviceBuffer>& bufs, cu::Stream s) {
  for (const DeviceBuffer& b : bufs)
    if (b.size() > 0) d.driver().check(d.api().cuMemsetD8Async(b.ptr(), 0xFF, b.size(), s), "cuMemsetD8Async (poison)");
}

void download(const DeviceContext& d, const std::vector<DeviceBuffer>& from, std::span<const std::span<std::byte>> to,
              cu::Stream s) {
  for (size_t k = 0; k < to.size(); ++k) {
    FJ_CHECK(to[k].size() == from[k].size(), "measure_gpu_runs: host buffer of the wrong size");
    if (!to[k].empty())
      d.driver().check(d.api().cuMemcpyDtoHAsync(to[k].data(), from[k].ptr(), to[k].size(), s), "cuMemcpyDtoHAsync");
  }
}

// Times the runs over `sets` rotated buffer sets (set 0 is `first`).
PathTiming time_runs_of(const std::shared_ptr<DeviceContext>& dc, const RunSpec& spec, const BufferSet& first, int sets,
                        const MeasureOptions& o, cu::Stream s) {
  std::vector<BufferSet> extra;
  const DrainOnUnwind drain(*dc, s);
  for (int i = 1; i < sets; ++i) extra.push_back(make_set(dc, spec, first.in_p, {}, s));
  auto run = [&](int k) {
    const BufferSet& b = k % sets == 0 ? first : extra[static_cast<size_t>(k % sets - 1)];
    spec.enqueue(b.in_p, b.out_p, b.inter_p, s);
  };
  const std::vector<double> t = time_runs(*dc, s, std::max(std::max(0, o.warmup), sets), std::max(1, o.repeats), run);
  const PathTiming timing = make_path_timing(spec.kernels, t, spec.bytes_moved);
  dc->driver().check(dc->api().cuStreamSynchronize(s), "cuStreamSynchronize");
  return timing;  // the extra sets are freed here, before a copy baseline allocates
}

// The bandwidth ceiling: a device-to-device copy of `bytes` (reads + writes = 2 * bytes), with
// buffer sets rotated as for the kernels.
void time_copy(GpuMeasurement& m, const std::shared_ptr<DeviceContext>& dc, int64_t bytes, int64_t free_bytes,
               const MeasureOptions& o, cu::Stream s) {
  m.copy_bytes = bytes;
  if (bytes <= 0) return;
  const Driver& drv = dc->driver();
  const int sets = choose_buffer_sets(2 * bytes, dc->info().l2_bytes, o.l2_multiple, o.max_buffer_sets, free_bytes);
  std::vector<DeviceBuffer> src, dst;
  const DrainOnUnwind drain(*dc, s);
  for (int i = 0; i < sets; ++i) {
    src.emplace_back(dc, static_cast<size_t>(bytes), "copy baseline source");
    dst.emplace_back(dc, static_cast<size_t>(bytes), "copy baseline destination");
    drv.check(dc->api().cuMemsetD8Async(src.back().ptr(), 0x3C, src.back().size(), s), "cuMemsetD8Async");
  }
  auto copy = [&](int k) {
    const size_t i = static_cast<size_t>(k % sets);
    drv.check(dc->api().cuMemcpyDtoDAsync(dst[i].ptr(), src[i].ptr(), static_cast<size_t>(bytes), s),
              "cuMemcpyDtoDAsync (copy baseline)");
  };
  m.copy_ms = median_of(time_runs(*dc, s, std::max(std::max(0, o.warmup), sets), std::max(1, o.repeats), copy));
  if (m.copy_ms > 0) m.copy_gbps = 2.0 * static_cast<double>(bytes) / (m.copy_ms * 1e-3) / 1e9;
}

}  // namespace

// ---- GpuProgram ------------------------------------------------------------------------------

// A long row's block of FJ_RED_LANES threads per lane array (fj_red_chunk_range).
static_assert(kMaxLaneGroups * 256 == kReduceLongRowBlock, "a long row's block is kMaxLaneGroups lane groups");

// The entries of one compiled kernel, each loaded with its launch limits: the fast entry, the same
// for launches with rows on chip and with long rows on chip, and the strided entry.
void GpuProgram::load_entries(const CompiledKernel& k, const std::string& target) {
  FJ_CHECK(k.image != nullptr && !k.image->empty(), "GpuProgram::load: kernel " + k.kernel.name + " has no image");
  FunctionLimits limits;
  if (k.kernel.reduction && k.kernel.row_blocks) limits.max_block = kReduceMaxBlock;
  // Opted in to the largest row cache any rules allow on this GPU (launches ask for what they use).
  if (!k.kernel.row_cache_sizes.empty())
    limits.max_dynamic_shared = static_cast<int>(ir::row_cache_limit_for(dc_->info().shared_per_block_optin));
  FunctionLimits fast = limits;
  // A row kernel's fast entry with a vector path keeps FJ_RED_LANES / V threads busy in a pass that
  // reads memory (V lanes each: fj_red_loads): a larger block would idle the rest there and take
  // registers and room on the SM from other rows' blocks. With the row on chip, all the threads
  // copy the row in and write the outputs, and a pass takes one lane a thread: kReduceMaxBlock.
  if (k.kernel.reduction && k.kernel.row_blocks && k.kernel.vector_width > 1)
    fast.max_block = kReduceMaxBlock / k.kernel.vector_width;
  // A module that does not load names the file its image came from (a damaged folder's .cubin).
  auto load = [&](const std::string& name, FunctionLimits l) {
    try {
      return load_function(dc_, *k.image, target, name, l);
    } catch (const DriverError& e) {
      if (k.origin.empty()) throw;
      throw DriverError(e.kind(), fmt::format("{} (the image read from {})", e.what(), k.origin), e.code());
    }
  };
  functions_.push_back(load(k.kernel.name, fast));
  on_chip_.push_back(fast.max_block == limits.max_block ? functions_.back() : load(k.kernel.name, limits));
  strided_.push_back(load(k.kernel.strided_name(), limits));
  FunctionLimits long_rows = limits;
  if (k.kernel.takes_long_rows()) long_rows.max_block = kReduceLongRowBlock;
  // The long-row entry where the kernel has one (lane groups), else the fast entry with the larger block.
  const std::string long_name = k.kernel.lane_groups > 1 ? k.kernel.long_rows_name() : k.kernel.name;
  on_chip_long_.push_back(long_rows.max_block == limits.max_block ? on_chip_.back() : load(long_name, long_rows));
  kernels_.push_back(k.kernel);
}

GpuProgram GpuProgram::load(std::shared_ptr<DeviceContext> dc, const ir::Graph& g, const ir::Plan& plan,
                            const CompiledPlan& compiled) {
  FJ_CHECK(dc != nullptr, "GpuProgram::load: no device context");
  FJ_CHECK(compiled.kernels.size() == plan.groups.size(),
           fmt::format("GpuProgram::load: {} kernels for {} plan groups", compiled.kernels.size(), plan.groups.size()));
  GpuProgram p;
  p.dc_ = std::move(dc);
  p.graph_ = std::make_shared<const ir::Graph>(g);
  p.plan_ = std::make_shared<const ir::Plan>(plan);
  for (const CompiledKernel& k : compiled.kernels) p.load_entries(k, compiled.target.name());
  p.bindings_ = std::make_shared<const PlanBindings>(g, plan);
  // No larger row cache than every function with one could opt in to (its static shared memory
  // may leave less room than ir::kRowCacheStaticReserve assumes: GpuFunction::max_dynamic_shared).
  ir::SplitRules rules = plan.rules;
  rules.row_cache_limit = std::min(rules.row_cache_limit, ir::row_cache_limit_for(p.dc_->info().shared_per_block_optin));
  for (size_t i = 0; i < p.kernels_.size(); ++i)
    if (!p.kernels_[i].row_cache_sizes.empty())
      for (const GpuFunction* fn : {&p.functions_[i], &p.on_chip_[i], &p.on_chip_long_[i], &p.strided_[i]})
        rules.row_cache_limit = std::min<int64_t>(rules.row_cache_limit, fn->max_dynamic_shared);
  p.state_ = make_launch_state(g, plan, *p.bindings_, [&](int variant, size_t gi) -> const GeneratedKernel& {
    FJ_CHECK(variant == 0, "GpuProgram: the kernels were generated for fewer elements than the graph has");
    return p.kernels_[gi];
  }, rules);
  FJ_CHECK(p.state_ != nullptr, "GpuProgram::load: the plan does not hold for its own graph");
  return p;
}

int GpuProgram::kernel_count() const {
  return state_->kernel_launches();
}

int64_t GpuProgram::bytes_moved() const { return ir::plan_totals(*graph_, *plan_).bytes(); }

namespace {

// The launch of `items` work items of `group` with `fn`: an elementwise kernel's grid covers the
// items (vector iterations on the vector path); a reduction kernel's items are
// kReduceItemsPerBlock per block it needs (one per row, or per group of rows side by side), so its
// grid is that many blocks whatever block size it launches with (capped at the blocks resident at
// once with its row cache: GpuFunction::grid_cap).
LaunchConfig group_config(const GpuFunction& fn, const GroupLaunch& group, int64_t items, bool strided, bool vector) {
  const auto shared = static_cast<uint32_t>(group.shared_bytes(strided, vector));
  return group.kernel->reduction ? fn.config(items / kReduceItemsPerBlock * fn.launch_block, 1, shared)
                                 : fn.config(items, vector ? group.kernel->signature.vector_width : 1, shared);
}

}  // namespace

LaunchConfig GpuProgram::launch_config(size_t i) const {
  FJ_CHECK(i < functions_.size(), "GpuProgram::launch_config: no such kernel");
  const GroupLaunch& group = state_->groups[i];
  return group_config(function(i, false, group.row_cache_bytes > 0, group.long_rows), group, group.items, false, true);
}

void GpuProgram::enqueue(std::span<const cu::DevicePtr> inputs, std::span<const cu::DevicePtr> outputs,
                         std::span<const ir::Scalar> params, cu::Stream stream,
                         std::span<const cu::DevicePtr> intermediates) const {
  const ir::Graph& g = *graph_;
  FJ_CHECK(inputs.size() == g.inputs.size(), fmt::format("GpuProgram::enqueue: {} input pointers for {} inputs",
                                                          inputs.size(), g.inputs.size()));
  FJ_CHECK(outputs.size() == g.outputs.size(), fmt::format("GpuProgram::enqueue: {} output pointers for {} outputs",
                                                            outputs.size(), g.outputs.size()));
  FJ_CHECK(intermediates.empty() || intermediates.size() == bindings_->intermediates.size(),
           "GpuProgram::enqueue: wrong number of intermediate buffers");
  FJ_CHECK(params.empty() || params.size() == g.params.size(), "GpuProgram::enqueue: wrong number of params");
  std::vector<ir::Scalar> defaults;
  if (params.empty()) {
    for (const ir::ParamDecl& d : g.params) defaults.push_back(d.default_value);
    params = defaults;
  }
  std::vector<TensorArg> in, out;
  for (size_t k = 0; k < inputs.size(); ++k) in.push_back({inputs[k], state_->input_shapes[k], {}});
  for (size_t k = 0; k < outputs.size(); ++k) out.push_back({outputs[k], state_->output_shapes[k], {}});
  check_aliasing(g, *bindings_, in, out);
  DeviceContext::Scope scope(*dc_);
  GpuKernelRunner runner(*dc_, this, nullptr, stream);
  if (!intermediates.empty()) {
    const std::vector<uint64_t> inter(intermediates.begin(), intermediates.end());
    launch_plan(*bindings_, *state_, in, out, inter, params, runner);
    return;
  }
  std::vector<uint64_t> addrs;
  const StreamScratch scratch(*dc_, bindings_->intermediates, state_->intermediate_bytes, stream, addrs);
  launch_plan(*bindings_, *state_, in, out, scratch.addrs(), params, runner);
}

// ---- GpuKernelRunner, StreamScratch ------------------------------------------------------------

void GpuKernelRunner::run(const GroupLaunch& group, size_t group_index, bool strided, bool vector, int64_t items,
                          void** args) {
  const GpuProgram* p = variants_[group.variant];
  FJ_CHECK(p != nullptr, "GpuKernelRunner: the kernel variant is not loaded");
  const GpuFunction& fn = p->function(group_index, strided, group.row_cache_bytes > 0, group.long_rows);
  // The plan's row cache limit assumes at most ir::kRowCacheStaticReserve of static shared memory
  // per kernel; a kernel with more says so here, not as the driver's CUDA_ERROR_INVALID_VALUE.
  const int64_t shared = group.shared_bytes(strided, vector);
  FJ_CHECK(shared <= fn.max_dynamic_shared,
           fmt::format("kernel {}: its {} B row cache is over the {} B of dynamic shared memory its static shared "
                       "memory leaves under the device's opt-in maximum (ir::kRowCacheStaticReserve is too small; "
                       "Options::row_cache_limit lower, or row_cache false, avoids it)",
                       fn.name, shared, fn.max_dynamic_shared));
  launch_kernel(dc_, fn, group_config(fn, group, items, strided, vector), args, stream_);
}

uint64_t GpuKernelRunner::workspace(size_t bytes) {
  if (bytes <= workspace_bytes_) return workspace_;
  if (workspace_) stream_free(dc_, workspace_, stream_);
  workspace_ = 0;
  workspace_bytes_ = 0;
  workspace_ = stream_alloc(dc_, bytes, stream_, "a split reduction's chunk values");
  workspace_bytes_ = bytes;
  return workspace_;
}

GpuKernelRunner::~GpuKernelRunner() {
  if (workspace_) stream_free(dc_, workspace_, stream_);  // a destructor cannot throw
}

void GpuKernelRunner::copy(uint64_t dst, uint64_t src, size_t bytes) {
  if (dst == src) return;
  dc_.driver().check(dc_.api().cuMemcpyDtoDAsync(dst, src, bytes, stream_), "cuMemcpyDtoDAsync (output copy)");
}

StreamScratch::StreamScratch(const DeviceContext& dc, std::span<const ir::NodeId> nodes, std::span<const int64_t> bytes,
                             cu::Stream stream, std::vector<uint64_t>& addrs)
    : dc_(dc), stream_(stream), addrs_(addrs) {
  addrs_.clear();
  try {
    for (size_t i = 0; i < bytes.size(); ++i) {
      cu::DevicePtr p = 0;
      if (bytes[i] > 0) p = stream_alloc(dc, static_cast<size_t>(bytes[i]), stream, fmt::format("intermediate v{}", nodes[i]));
      addrs_.push_back(p);
    }
  } catch (...) {
    release();  // a constructor that throws runs no destructor: free what was allocated before
    throw;
  }
}

void StreamScratch::release() noexcept {
  for (uint64_t p : addrs_)
    if (p) stream_free(dc_, p, stream_);  // cannot throw; freed in stream order
}

StreamScratch::~StreamScratch() { release(); }

// ---- Measurement -----------------------------------------------------------------------------

int choose_buffer_sets(int64_t working_set_bytes, int64_t l2_bytes, double l2_multiple, int max_sets,
                       int64_t free_bytes) {
  if (working_set_bytes <= 0) return 1;
  const double target = l2_multiple * static_cast<double>(std::max<int64_t>(l2_bytes, 0));
  int64_t sets = static_cast<int64_t>(std::ceil(target / static_cast<double>(working_set_bytes)));
  sets = std::clamp<int64_t>(sets, 1, std::max(1, max_sets));
  if (free_bytes > 0) sets = std::min<int64_t>(sets, std::max<int64_t>(1, free_bytes / 2 / working_set_bytes));
  return static_cast<int>(sets);
}

GpuMeasurement measure_gpu_runs(const std::shared_ptr<DeviceContext>& dc, const RunSpec& spec,
                                std::span<const std::span<const std::byte>> inputs,
                                std::span<const std::span<std::byte>> outputs,
                                std::span<const std::span<std::byte>> intermediates, const MeasureOptions& options) {
  const DeviceContext& d = *dc;
  FJ_CHECK(inputs.size() == spec.input_bytes.size() && outputs.size() == spec.output_bytes.size(),
           "measure_gpu_runs: one host buffer per input and output expected");
  FJ_CHECK(intermediates.empty() || intermediates.size() == spec.intermediate_bytes.size(),
           "measure_gpu_runs: wrong number of intermediate buffers");
  for (size_t i = 0; i < inputs.size(); ++i)
    FJ_CHECK(static_cast<int64_t>(inputs[i].size()) == spec.input_bytes[i],
             fmt::format("measure_gpu_runs: input {} has {} bytes, expected {}", i, inputs[i].size(), spec.input_bytes[i]));
  GpuMeasurement m;
  DeviceContext::Scope scope(d);
  OwnedStream stream(d);
  const cu::Stream s = stream.get();

  // The checked run: poison (0xFF bytes: NaN for every float dtype, -1/true for integers), run.
  const BufferSet first = make_set(dc, spec, {}, inputs, s);
  const DrainOnUnwind drain(d, s);
  poison(d, first.out, s);
  poison(d, first.inter, s);
  spec.enqueue(first.in_p, first.out_p, first.inter_p, s);
  download(d, first.out, outputs, s);
  if (!intermediates.empty()) download(d, first.inter, intermediates, s);
  d.driver().check(d.api().cuStreamSynchronize(s), "cuStreamSynchronize (checked run)");
  if (!options.time) return m;

  // Buffer sets rotated between runs so that consecutive runs touch more than ~4x L2.
  size_t free_b = 0, total_b = 0;
  d.driver().check(d.api().cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo");
  const int64_t set_bytes = sum_of(spec.input_bytes) + sum_of(spec.output_bytes) + sum_of(spec.intermediate_bytes);
  m.buffer_sets = choose_buffer_sets(set_bytes, d.info().l2_bytes, options.l2_multiple, options.max_buffer_sets,
                                     static_cast<int64_t>(free_b));
  m.l2_resident = static_cast<double>(set_bytes) * m.buffer_sets <
                  options.l2_multiple * static_cast<double>(d.info().l2_bytes);
  m.timing = time_runs_of(dc, spec, first, m.buffer_sets, options, s);
  if (options.copy_baseline) time_copy(m, dc, m.timing.bytes / 2, static_cast<int64_t>(free_b), options, s);
  return m;
}

GpuMeasurement measure_gpu_program(const GpuProgram& p, std::span<const std::span<const std::byte>> inputs,
                                   std::span<const std::span<std::byte>> outputs,
                                   std::span<const std::span<std::byte>> intermediates,
                                   std::span<const ir::Scalar> params, const MeasureOptions& options) {
  const ir::Graph& g = p.graph();
  RunSpec spec;
  for (ir::NodeId id : g.inputs) spec.input_bytes.push_back(value_bytes(g, id));
  for (const ir::OutputDecl& o : g.outputs) spec.output_bytes.push_back(value_bytes(g, o.node));
  spec.intermediate_bytes = p.intermediate_bytes();
  spec.kernels = p.kernel_count();
  spec.bytes_moved = p.bytes_moved();
  spec.enqueue = [&](std::span<const cu::DevicePtr> in, std::span<const cu::DevicePtr> out,
                     std::span<const cu::DevicePtr> inter, cu::Stream s) { p.enqueue(in, out, params, s, inter); };
  return measure_gpu_runs(p.context(), spec, inputs, outputs, intermediates, options);
}

}  // namespace fusejit::jit
