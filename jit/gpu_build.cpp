// Plan -> generated source -> NVRTC (cached) -> loaded GPU kernels. See gpu_build.h.
#include "jit/gpu_build.h"

#include <algorithm>

#include "jit/nvrtc.h"

namespace fusejit::jit {

GpuBuild build_gpu_program(const std::shared_ptr<DeviceContext>& dc, const ir::Graph& g, const ir::Plan& plan,
                           const GpuBuildOptions& options) {
  GpuBuild b;
  const Arch device{dc->info().cc_major, dc->info().cc_minor};
  if (options.target) {
    b.arch = check_explicit_target(*options.target, supported_archs());
    b.arch.device = device;
  } else {
    b.arch = choose_target_for_device(device);
  }
  b.kernels = generate_plan_kernels(g, plan, options.codegen);
  std::vector<GpuKernelSpec> specs;
  if (!b.kernels.empty()) {
    const TranslationUnit tu = emit_translation_unit(b.kernels);
    CompileRequest req;
    req.target = b.arch.target;
    req.options = default_compile_options(options.codegen.fast_math);
    for (const std::string& o : tu.nvrtc_options)
      if (std::find(req.options.begin(), req.options.end(), o) == req.options.end()) req.options.push_back(o);
    KernelCache& cache = options.cache ? *options.cache : KernelCache::global();
    const std::string program_name = (plan.fused ? "fj_fused_" : "fj_unfused_") + tu.kernel_names.front() + ".cu";
    CacheResult cr = compile_cached(cache, tu.source, program_name, req, kGpuCodegenVersion, program_name);
    b.outcome = cr.outcome;
    b.compile_ms = cr.compile_ms;
    for (const GeneratedKernel& k : b.kernels)
      specs.push_back({k.name, k.signature, cr.kernel->binary, b.arch.target.name()});
  }
  b.program = GpuProgram::load(dc, g, plan, specs);
  return b;
}

}  // namespace fusejit::jit
