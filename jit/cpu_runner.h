// Running a plan's generated kernels on the CPU (the path used when there is no GPU, and the one
// that tests the generated source on every commit). The kernels are compiled by
// jit/host_compile.h (all kernels of a plan, or of several plans, as ONE shared object),
// arguments are filled by jit/launch.h exactly as for cuLaunchKernel (same PlanBindings, same
// LaunchState, same launch_plan), and each group is "launched" through its host trampoline.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"
#include "ir/tensor.h"
#include "jit/codegen.h"
#include "jit/host_compile.h"
#include "jit/kernel_abi.h"
#include "jit/launch.h"
#include "jit/timing.h"

namespace fusejit::jit {

// One plan's kernels, generated and (after compile_cpu_programs) loaded. Holds a copy of the
// graph and plan so it stays valid on its own.
struct CpuProgram {
  ir::Graph graph;
  ir::Plan plan;
  std::vector<GeneratedKernel> kernels;      // one per plan group, plan order
  std::shared_ptr<HostModule> module;        // set by compile_cpu_programs
  std::vector<HostTrampoline> trampolines;   // one per plan group: its fast entry
  std::vector<HostTrampoline> strided_trampolines;  // one per plan group: its strided entry
  HostCompileResult compile;                 // how the module was obtained (hit / compile time)
};

// Runs kernel entries through the host trampolines of up to two compiled variants of one plan
// (jit/launch.h's variant 0 and 1), serially, as a grid of `launch` would run.
class CpuKernelRunner : public KernelRunner {
 public:
  CpuKernelRunner(const CpuProgram* variant0, const CpuProgram* variant1, LaunchShape launch = {})
      : variants_{variant0, variant1}, launch_(launch) {}
  void run(const GroupLaunch& group, size_t group_index, bool strided, bool vector, int64_t items,
           void** args) override;
  void copy(uint64_t dst, uint64_t src, size_t bytes) override;
  uint64_t workspace(size_t bytes) override;  // host memory owned by the runner

 private:
  const CpuProgram* variants_[2];
  LaunchShape launch_;
  std::vector<uint64_t> workspace_;
  // The launches' dynamic shared memory (GroupLaunch::row_cache_bytes), 16-byte aligned as a GPU's
  // (the row cache's 16-byte copies and vector accesses; their alignment traps check it in tests).
  struct alignas(16) SharedUnit {
    unsigned char bytes[16];
  };
  std::vector<SharedUnit> shared_;
};

// Generates the kernels of `plan` for `g` at its current shapes (nothing is compiled yet).
CpuProgram prepare_cpu_program(const ir::Graph& g, const ir::Plan& plan, const CodegenOptions& opts = {});

// Compiles the kernels of all `programs` as one host shared object (or finds it in the cache) and
// binds their trampolines. Throws HostCompileError on a compiler failure.
void compile_cpu_programs(std::span<CpuProgram* const> programs, const HostCompileOptions& opts = {});

// prepare + compile for one plan.
CpuProgram build_cpu_program(const ir::Graph& g, const ir::Plan& plan, const CodegenOptions& opts = {});

// What one run did.
struct CpuRunStats {
  double run_ms = 0.0;              // steady-clock time of the launches (argument filling included)
  int kernels_launched = 0;
  int vector_launches = 0;          // launches whose vec_ok was 1 (the vector path ran)
  int strided_launches = 0;         // launches of the strided entry
  int kept_value_launches = 0;      // launches whose row cache held kept values (row_cache 2)
  int per_row_cache_launches = 0;   // launches whose row cache held the per-row inputs only (row_cache 3)
};

// Options of run_cpu_program. `launch` is the (serial) grid and block the trampolines emulate:
// the default, one thread, is the fastest on a CPU; others exercise the grid-stride loop.
struct CpuRunOptions {
  LaunchShape launch;        // default: one block of one thread
  bool vector_path = true;   // false: clear vec_ok so only the scalar loop runs (tests)
  // true: every graph input is read from a copy that starts one element past a 16-byte boundary,
  // as a sub-tensor view would, so launch_plan sees a misaligned pointer and clears vec_ok for
  // every kernel reading a graph input (tests of the runtime alignment check).
  bool misalign_inputs = false;
  bool force_strided = false;  // true: every kernel runs its strided entry (tests of it)
};

// Runs `prog` once, as GpuProgram::enqueue does on the GPU (jit/launch.h):
//   inputs:  one host buffer per graph input (slot order) of exactly num_elements * dtype_size
//            bytes (ir::UserError naming the input otherwise);
//   outputs: one per graph output, exact size (ir::InternalError otherwise): written;
//   params:  the value of every graph param (slot order; empty = defaults);
//   intermediates: one per plan_intermediates() entry, exact size, or empty to use buffers of
//            its own.
// The launches follow prog.plan.rules (ir::SplitRules: row splits, the row cache and its limit), the
// rules the plan's notes and traffic describe.
// Throws ir::InternalError on a broken plan.
CpuRunStats run_cpu_program(const CpuProgram& prog, std::span<const std::span<const std::byte>> inputs,
                            std::span<const std::span<std::byte>> outputs, std::span<const ir::Scalar> params = {},
                            const CpuRunOptions& opts = {}, std::span<const std::span<std::byte>> intermediates = {});

// run_cpu_program once on outputs (and intermediates) filled with 0xFF bytes first, so an element
// no kernel wrote shows as NaN / -1, then `repeats - 1` more times; the timing of all `repeats`
// runs (at least one).
PathTiming measure_cpu_program(const CpuProgram& prog, std::span<const std::span<const std::byte>> inputs,
                               std::span<const std::span<std::byte>> outputs,
                               std::span<const std::span<std::byte>> intermediates, std::span<const ir::Scalar> params,
                               int repeats);

struct CpuTensorRunResult : CpuRunStats {
  std::vector<ir::Tensor> outputs;  // one per graph output, with the output's dtype and shape
};
// The same on ir::Tensor inputs (one per graph input, slot order, with the input's dtype and
// current shape; a mismatch is an ir::UserError naming the input).
CpuTensorRunResult run_cpu_program(const CpuProgram& prog, std::span<const ir::Tensor> inputs,
                                   std::span<const ir::Scalar> params = {}, const CpuRunOptions& opts = {});

}  // namespace fusejit::jit
