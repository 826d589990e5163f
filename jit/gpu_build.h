// From a plan to loaded GPU kernels in one call: code generation (jit/codegen.h), one NVRTC
// program per plan through the kernel cache (jit/cache.h), the target chosen from the device's
// compute capability and what the linked NVRTC supports (jit/arch.h), and the module load
// (jit/gpu_module.h). The GPU counterpart of jit/cpu_runner.h's build_cpu_program.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"
#include "jit/arch.h"
#include "jit/cache.h"
#include "jit/codegen.h"
#include "jit/gpu_runner.h"

namespace fusejit::jit {

// Part of every disk-cache key of GPU kernels (the generated source is in the key too).
inline constexpr const char* kGpuCodegenVersion = "fusejit-gpu-1";

struct GpuBuildOptions {
  CodegenOptions codegen;             // strict by default; fast_math also selects NVRTC's fast options
  std::optional<Target> target;       // an explicit --arch; nullopt: chosen for the device
  KernelCache* cache = nullptr;       // nullptr: KernelCache::global()
};

struct GpuBuild {
  GpuProgram program;
  std::vector<GeneratedKernel> kernels;  // one per plan group, plan order
  ArchDecision arch;                     // target, device arch, and a warning for the PTX fallback
  CacheOutcome outcome = CacheOutcome::Compiled;  // of the plan's one NVRTC program
  double compile_ms = 0;                 // NVRTC time when compiled, else 0
};

// Generates, compiles (or finds in the cache) and loads every kernel of `plan` for the device of
// `dc`, at the graph's current shapes. Throws CompileError (NVRTC), ir::UserError (the device is
// older than NVRTC supports, or an unsupported --arch), DriverError (module load: e.g. PTX newer
// than the driver).
GpuBuild build_gpu_program(const std::shared_ptr<DeviceContext>& dc, const ir::Graph& g, const ir::Plan& plan,
                           const GpuBuildOptions& options = {});

}  // namespace fusejit::jit
