// The one GPU build path, used by the library (Program::compile, compile_to_dir) and the tests
// alike, in stages with their own types (jitify2's model: source -> compiled -> loaded):
//   1. source:   a plan's groups -> GeneratedKernel / TranslationUnit (jit/codegen.h) and the
//                NVRTC options (nvrtc_options_for);
//   2. compiled: -> CUBIN or PTX through the kernel cache (jit/cache.h): CompiledPlan. Needs no
//                device, so `fusejit compile` stops here;
//   3. loaded:   -> modules and functions in a device context: GpuProgram::load (jit/gpu_runner.h).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"
#include "jit/arch.h"
#include "jit/cache.h"
#include "jit/codegen.h"

namespace fusejit::jit {

struct GpuBuildOptions {
  CodegenOptions codegen;                  // fast_math also selects NVRTC's fast-math options
  Target target;                           // what NVRTC builds (jit/arch.h chooses it)
  std::vector<std::string> extra_options;  // the caller's NVRTC options, after fusejit's own
  KernelCache* cache = nullptr;            // nullptr: KernelCache::global()
  // Runs body(0) .. body(n - 1), each once, perhaps at once on threads it starts (lib starts them
  // with the caller's warning origin), and returns when all have returned; rethrows what one
  // threw. Empty: one after another on this thread. A fused plan's groups compile through it.
  std::function<void(size_t n, const std::function<void(size_t)>& body)> for_each;
};

// NVRTC options of one program: fusejit's defaults for the mode, then those the generated code
// requires (TranslationUnit::nvrtc_options), each once, then the caller's extra options as given
// (repeats kept: "-Xptxas LIST" pairs stay pairs). Never an architecture option (the target adds it).
std::vector<std::string> nvrtc_options_for(bool fast_math, std::span<const std::string> required,
                                           std::span<const std::string> extra);

// Stage 2 of one plan group: its kernel and the binary that holds it.
struct CompiledKernel {
  GeneratedKernel kernel;
  std::shared_ptr<const std::vector<char>> image;  // CUBIN, or PTX text with its final '\0'; shared
                                                   // by the kernels of one NVRTC program
  CacheOutcome outcome = CacheOutcome::Compiled;
  double compile_ms = 0;  // NVRTC time of its program, on the program's first kernel only
  std::string origin;     // the file the image was read from (an ahead-of-time folder's), else ""
};

struct CompiledPlan {
  Target target;
  std::vector<CompiledKernel> kernels;  // one per plan group, plan order
};

// Stages 1 and 2 for every group of `plan` over `g` at the graph's current shapes.
//  - A fused plan (plan.fused) compiles each group as its own NVRTC program and cache entry, and
//    looks it up first by structural_key, so a memory hit skips code generation as well as NVRTC
//    (ArrayFire's JIT does the same).
//  - An unfused plan compiles all its kernels as ONE program (one compile, one cache entry), so the
//    comparison baseline does not cost one compile per op.
// Throws CompileError when NVRTC rejects the source, ir::UserError when it rejects an option.
CompiledPlan compile_plan(const ir::Graph& g, const ir::Plan& plan, const GpuBuildOptions& options);

// The key a fused plan's group is found by in memory before any code is generated: a hash of
// everything generate_kernel reads (the group, every attribute of the nodes it computes, reads and
// writes, the graph's name, file and dims) and of the build options, so equal keys mean equal
// kernels. Exposed for the test that holds it to that (tests/test_cache.cpp).
Hash128 structural_key(const ir::Graph& g, const ir::FusionGroup& grp, const GpuBuildOptions& o);

}  // namespace fusejit::jit
