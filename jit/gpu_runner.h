// Running a plan's compiled kernels on the GPU (fused or unfused) and measuring them honestly:
// CUDA-event timing (warm-up, then the median of repeated runs), a device-to-device copy of the
// same byte count timed in the same run as the bandwidth ceiling, buffer sets rotated so the L2
// cache does not flatter small working sets, and outputs poisoned with 0xFF bytes (a NaN pattern
// for floats) before the checked run so an unwritten element cannot pass a check.
//
// Formatting the report is the CLI's job (fusejit::RunReport); this file provides the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"
#include "jit/driver.h"
#include "jit/gpu_module.h"
#include "jit/kernel_abi.h"

namespace fusejit::jit {

// One compiled kernel of a plan: what codegen produced (name, signature) and the binary the
// kernel cache returned (several kernels may share one image: the unfused path is one program).
struct GpuKernelSpec {
  std::string name;                                // extern "C" symbol in the image
  KernelSignature signature;                       // from codegen (GeneratedKernel::signature)
  std::shared_ptr<const std::vector<char>> image;  // CUBIN, or PTX text with its final '\0'
  std::string target_name;                         // "sm_90" (CUBIN) / "compute_90" (PTX), for messages
};

// A plan whose kernels are loaded in one context. Immutable after load(): enqueue() may be called
// from several threads on different streams.
class GpuProgram {
 public:
  // Loads kernels[i] for plan.groups[i] (same count; ir::InternalError otherwise). The graph's
  // current dim sizes are the shapes every enqueue() runs at. Throws DriverError (module load,
  // missing function).
  static GpuProgram load(std::shared_ptr<DeviceContext> dc, const ir::Graph& g, const ir::Plan& plan,
                         std::span<const GpuKernelSpec> kernels);

  const ir::Graph& graph() const { return *graph_; }
  const ir::Plan& plan() const { return *plan_; }
  const std::shared_ptr<DeviceContext>& context() const { return dc_; }
  // Kernel launches per run (groups with at least one element).
  int kernel_count() const;
  // Bytes one run moves: per kernel, each input read once and each output written once
  // (ir::group_traffic summed over the plan's groups).
  int64_t bytes_moved() const;
  // Byte sizes of the values the plan materialises that are not graph outputs (the unfused path's
  // intermediates), in ascending node id order; empty for a plan that needs none.
  const std::vector<int64_t>& intermediate_bytes() const { return inter_bytes_; }
  // The node ids of those intermediates, same order.
  const std::vector<ir::NodeId>& intermediate_nodes() const { return inter_nodes_; }
  // The launch configuration of kernel i (for reports and tests).
  LaunchConfig launch_config(size_t i) const;

  // Enqueues one run on `stream` without synchronising.
  //   inputs:  one device address per graph input (Graph::inputs order), each at least the input's
  //            bytes (num_elements * dtype_size at the graph's current dims), C-contiguous;
  //   outputs: one per graph output (Graph::outputs order), same rule; an output that appears
  //            twice in Graph::outputs is written by its kernel and copied to the second buffer;
  //   params:  one value per graph param, with the param's dtype (empty = the defaults);
  //   intermediates: one address per intermediate_bytes() entry, or empty to allocate them
  //            stream-ordered (cuMemAllocAsync) and free them on the stream at the end of the run.
  // Throws DriverError(BadArgument) when an output overlaps an input or another output (sizes
  // from the graph), ir::InternalError on a wrong count, DriverError on a driver failure.
  void enqueue(std::span<const cu::DevicePtr> inputs, std::span<const cu::DevicePtr> outputs,
               std::span<const ir::Scalar> params, cu::Stream stream,
               std::span<const cu::DevicePtr> intermediates = {}) const;

 private:
  std::shared_ptr<DeviceContext> dc_;
  std::shared_ptr<const ir::Graph> graph_;
  std::shared_ptr<const ir::Plan> plan_;
  std::vector<GpuFunction> functions_;
  std::vector<KernelSignature> signatures_;
  std::vector<ir::NodeId> inter_nodes_;
  std::vector<int64_t> inter_bytes_;
};

// Timing of one path over the repeated runs.
struct PathTiming {
  int kernels = 0;               // launches per run
  double median_ms = 0;          // median over the timed runs (CUDA events)
  double min_ms = 0, max_ms = 0;
  int64_t bytes = 0;             // GpuProgram::bytes_moved()
  double gbps = 0;               // bytes / median time, 1e9 bytes per second
  double pct_of_copy = 0;        // gbps / copy bandwidth of the same run, percent
};

// The outcome of run_and_measure.
struct GpuMeasurement {
  DeviceInfo device;
  PathTiming fused, unfused;
  int64_t copy_bytes = 0;        // bytes copied by the baseline (half the fused bytes moved: a copy
                                 // reads and writes each byte, so both move the same traffic)
  double copy_ms = 0;            // median time of the copy
  double copy_gbps = 0;          // 2 * copy_bytes / copy_ms: the achievable bandwidth ceiling
  double speedup = 0;            // unfused median / fused median
  int buffer_sets = 1;           // buffer sets rotated between timed runs (L2 defeat)
  bool l2_resident = false;      // true when even the rotation could not exceed ~4x L2 (tiny inputs)
  int warmup = 0, repeats = 0;
  // Host copies of every graph output from the checked (poisoned-first) run of each path, in
  // Graph::outputs order, C order bytes.
  std::vector<std::vector<std::byte>> fused_outputs, unfused_outputs;
  // With MeasureOptions::keep_intermediates: host copies of the unfused program's intermediates
  // from its checked run, in GpuProgram::intermediate_nodes() order (for the per-op check).
  std::vector<std::vector<std::byte>> unfused_intermediates;
};

struct MeasureOptions {
  int warmup = 3;                // untimed runs of each path before timing
  int repeats = 20;              // timed runs; the median is reported
  double l2_multiple = 4.0;      // rotate buffer sets until the total exceeds this many L2 sizes
  int max_buffer_sets = 16;
  bool time = true;              // false: only the checked runs (no timing, no copy baseline)
  bool keep_intermediates = false;  // copy the unfused intermediates back (GpuMeasurement)
};

// Copies `host_inputs` (one per graph input, C order, exact byte size) to the device once, runs
// the fused and the unfused program once each on outputs poisoned with 0xFF bytes and copies the
// outputs back, then (if options.time) times each path and the copy baseline. Both programs must
// be loaded in the same context and for the same graph inputs/outputs. Allocates and frees all its
// device memory (DriverError(OutOfMemory) with sizes when it does not fit); uses its own stream.
GpuMeasurement run_and_measure(const GpuProgram& fused, const GpuProgram& unfused,
                               std::span<const std::vector<std::byte>> host_inputs,
                               std::span<const ir::Scalar> params, const MeasureOptions& options = {});

// --- Pure helpers (tested without a GPU) -----------------------------------------------------

// Median of the samples (mean of the middle two for an even count); 0 for none.
double median_of(std::vector<double> samples);
// Path timing from per-run times (ms), bytes moved and the copy bandwidth (GB/s; 0 = unknown).
PathTiming make_path_timing(int kernels, std::span<const double> times_ms, int64_t bytes, double copy_gbps);
// Buffer sets to rotate so that sets * working_set >= l2_multiple * l2_bytes, limited by
// max_sets and by memory: sets * working_set must stay within half of free_bytes. At least 1.
int choose_buffer_sets(int64_t working_set_bytes, int64_t l2_bytes, double l2_multiple, int max_sets,
                       int64_t free_bytes);

}  // namespace fusejit::jit
