// Running a plan's compiled kernels on the GPU and measuring them honestly: CUDA-event timing
// (warm-up, then the median of repeated runs), buffer sets rotated so the L2 cache does not
// flatter small working sets, outputs poisoned with 0xFF bytes (a NaN pattern for floats) before
// the checked run so an unwritten element cannot pass a check, and optionally a device-to-device
// copy of half the bytes as the bandwidth ceiling.
//
// Formatting reports is the library's job (fusejit::RunReport); this file provides the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"
#include "jit/driver.h"
#include "jit/gpu_build.h"
#include "jit/gpu_module.h"
#include "jit/kernel_abi.h"
#include "jit/launch.h"
#include "jit/timing.h"

namespace fusejit::jit {

// A plan whose kernels (every entry point of each) are loaded in one context (stage 3 of
// jit/gpu_build.h). Immutable after load(): enqueue() may be called from several threads on
// different streams.
class GpuProgram {
 public:
  // Loads compiled.kernels[i] for plan.groups[i] (same count; ir::InternalError otherwise). The
  // graph's current dim sizes are the shapes every enqueue() runs at. Throws DriverError (module
  // load, missing function).
  static GpuProgram load(std::shared_ptr<DeviceContext> dc, const ir::Graph& g, const ir::Plan& plan,
                         const CompiledPlan& compiled);

  const ir::Graph& graph() const { return *graph_; }
  const ir::Plan& plan() const { return *plan_; }
  const std::shared_ptr<DeviceContext>& context() const { return dc_; }
  // Kernel launches per run (LaunchState::kernel_launches).
  int kernel_count() const;
  // Bytes one run moves: per kernel, each input read once and each output written once
  // (ir::group_traffic summed over the plan's groups).
  int64_t bytes_moved() const;
  // The values the plan materialises that are not graph outputs (plan_intermediates), and their
  // byte sizes, same order.
  const std::vector<ir::NodeId>& intermediate_nodes() const { return bindings_->intermediates; }
  const std::vector<int64_t>& intermediate_bytes() const { return state_->intermediate_bytes; }
  // The launch configuration of kernel i's fast entry with its vector path at the graph's dims (its row-cache
  // function when those launches keep rows on chip; reports and tests).
  LaunchConfig launch_config(size_t i) const;
  // The loaded entry of group i: its fast entry, or its strided one; `on_chip`: for a launch that
  // keeps its rows in the row cache (GroupLaunch::row_cache_bytes > 0), whose fast entry may take a
  // larger block (GpuProgram::load); `long_rows`: such a launch over long rows
  // (GroupLaunch::long_rows: kReduceLongRowBlock).
  const GpuFunction& function(size_t group, bool strided, bool on_chip = false, bool long_rows = false) const {
    return (strided ? strided_ : on_chip ? (long_rows ? on_chip_long_ : on_chip_) : functions_)[group];
  }
  const std::vector<GeneratedKernel>& kernels() const { return kernels_; }

  // Enqueues one run on `stream` without synchronising.
  //   inputs:  one device address per graph input (Graph::inputs order), each at least the input's
  //            bytes (num_elements * dtype_size at the graph's current dims), C-contiguous;
  //   outputs: one per graph output (Graph::outputs order), same rule; an output that repeats
  //            another's value is written once and copied; an output may be an input's own buffer
  //            when the plan allows it (jit/launch.h, check_aliasing);
  //   params:  one value per graph param, with the param's dtype (empty = the defaults);
  //   intermediates: one address per intermediate_nodes() entry, or empty to allocate them
  //            stream-ordered (stream_alloc) and free them on the stream at the end of the run.
  // Throws ir::UserError when an output overlaps an input or another output otherwise (sizes from
  // the graph), ir::InternalError on a wrong count, DriverError on a driver failure.
  void enqueue(std::span<const cu::DevicePtr> inputs, std::span<const cu::DevicePtr> outputs,
               std::span<const ir::Scalar> params, cu::Stream stream,
               std::span<const cu::DevicePtr> intermediates = {}) const;

 private:
  void load_entries(const CompiledKernel& k, const std::string& target);

  std::shared_ptr<DeviceContext> dc_;
  std::shared_ptr<const ir::Graph> graph_;
  std::shared_ptr<const ir::Plan> plan_;
  std::shared_ptr<const PlanBindings> bindings_;
  std::shared_ptr<const LaunchState> state_;  // at the graph's dims
  std::vector<GpuFunction> functions_, strided_, on_chip_, on_chip_long_;
  std::vector<GeneratedKernel> kernels_;
};

// Launches kernel entries of up to two loaded variants of one plan (jit/launch.h's variant 0 and
// 1) on `stream` with cuLaunchKernel: nothing else (no allocation, copy or synchronisation), but
// the copy of an output that repeats another's value and a split reduction's workspace (stream_alloc:
// stream-ordered where the device has memory pools, else allocated and freed synchronised). The grid follows choose_launch() for the
// path that runs (a thread-iteration covers vector_width elements only on the vector path).
class GpuKernelRunner : public KernelRunner {
 public:
  GpuKernelRunner(const DeviceContext& dc, const GpuProgram* variant0, const GpuProgram* variant1, cu::Stream stream)
      : dc_(dc), variants_{variant0, variant1}, stream_(stream) {}
  ~GpuKernelRunner() override;  // frees the workspace on the stream, after the launch's kernels
  GpuKernelRunner(const GpuKernelRunner&) = delete;
  GpuKernelRunner& operator=(const GpuKernelRunner&) = delete;
  void run(const GroupLaunch& group, size_t group_index, bool strided, bool vector, int64_t items,
           void** args) override;
  void copy(uint64_t dst, uint64_t src, size_t bytes) override;
  // stream_alloc (stream-ordered where the device has memory pools). Throws DriverError as it does.
  uint64_t workspace(size_t bytes) override;

 private:
  const DeviceContext& dc_;
  const GpuProgram* variants_[2];
  cu::Stream stream_;
  cu::DevicePtr workspace_ = 0;
  size_t workspace_bytes_ = 0;
};

// Allocates the intermediates of one run with stream_alloc (stream-ordered where the device has
// memory pools) and frees them on the stream when destroyed (after the run's kernels are enqueued).
// Throws DriverError as stream_alloc does, naming the value. Used by launches that were given no intermediate buffers. The addresses are
// kept in `addrs` (the caller's, so its capacity is reused).
class StreamScratch {
 public:
  StreamScratch(const DeviceContext& dc, std::span<const ir::NodeId> nodes, std::span<const int64_t> bytes,
                cu::Stream stream, std::vector<uint64_t>& addrs);
  ~StreamScratch();
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  std::span<const uint64_t> addrs() const { return addrs_; }

 private:
  void release() noexcept;  // stream_free of every buffer in addrs_ (the destructor; a failed constructor)

  const DeviceContext& dc_;
  cu::Stream stream_;
  std::vector<uint64_t>& addrs_;
};

struct MeasureOptions {
  int warmup = 3;                // untimed runs before timing (at least one per buffer set)
  int repeats = 20;              // timed runs; the median is reported
  double l2_multiple = 4.0;      // rotate buffer sets until the total exceeds this many L2 sizes
  int max_buffer_sets = 16;
  bool time = true;              // false: only the checked run (no timing, no copy baseline)
  bool copy_baseline = false;    // also time a device-to-device copy of half the bytes moved
};

// The outcome of measure_gpu_program.
struct GpuMeasurement {
  PathTiming timing;
  int buffer_sets = 1;           // buffer sets rotated between timed runs (L2 defeat)
  bool l2_resident = false;      // true when even the rotation could not exceed ~4x L2 (tiny inputs)
  int64_t copy_bytes = 0;        // bytes copied by the baseline (half the bytes moved: a copy reads
                                 // and writes each byte, so both move the same traffic)
  double copy_ms = 0;            // median time of the copy
  double copy_gbps = 0;          // 2 * copy_bytes / copy_ms: the achievable bandwidth ceiling
};

// What measure_gpu_runs measures: the buffer sizes of one run and how to enqueue it.
struct RunSpec {
  std::vector<int64_t> input_bytes, output_bytes, intermediate_bytes;  // per buffer
  int kernels = 0;            // kernel launches per run
  int64_t bytes_moved = 0;    // bytes one run moves (ir::plan_totals)
  // Enqueues one run on the stream with these device buffers (same order and sizes as above).
  std::function<void(std::span<const cu::DevicePtr> inputs, std::span<const cu::DevicePtr> outputs,
                     std::span<const cu::DevicePtr> intermediates, cu::Stream stream)>
      enqueue;
};

// Copies `inputs` (one host buffer per spec input, its exact byte size) to the device once, runs
// spec.enqueue once on outputs and intermediates poisoned with 0xFF bytes and copies them back into
// `outputs` (one host buffer per spec output, exact size) and `intermediates` (empty, or one per
// spec intermediate), then (if options.time) times repeated runs and, with options.copy_baseline,
// the copy. Allocates and frees all its device memory (DriverError(OutOfMemory) with sizes when it
// does not fit); uses its own stream in dc's context.
GpuMeasurement measure_gpu_runs(const std::shared_ptr<DeviceContext>& dc, const RunSpec& spec,
                                std::span<const std::span<const std::byte>> inputs,
                                std::span<const std::span<std::byte>> outputs,
                                std::span<const std::span<std::byte>> intermediates, const MeasureOptions& options = {});

// measure_gpu_runs for `program` at its graph's dims: inputs one host buffer per graph input (C
// order, exact byte size), outputs one per graph output, intermediates empty or one per
// GpuProgram::intermediate_nodes() entry; `params` one per graph param (empty = defaults).
GpuMeasurement measure_gpu_program(const GpuProgram& program, std::span<const std::span<const std::byte>> inputs,
                                   std::span<const std::span<std::byte>> outputs,
                                   std::span<const std::span<std::byte>> intermediates,
                                   std::span<const ir::Scalar> params, const MeasureOptions& options = {});

// --- Pure helpers (tested without a GPU) -----------------------------------------------------

// Buffer sets to rotate so that sets * working_set >= l2_multiple * l2_bytes, limited by
// max_sets and by memory: sets * working_set must stay within half of free_bytes. At least 1.
int choose_buffer_sets(int64_t working_set_bytes, int64_t l2_bytes, double l2_multiple, int max_sets,
                       int64_t free_bytes);

}  // namespace fusejit::jit
