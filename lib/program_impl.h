// Program::Impl: a graph rewritten, planned (fused and unfused), generated and compiled for one
// backend. Shared by lib/program.cpp (compile, launch, run) and lib/run.cpp (the `run` job).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fusejit/fusejit.h"
#include "ir/graph.h"
#include "ir/passes/rewrite.h"
#include "ir/plan.h"
#include "jit/codegen.h"
#include "jit/cpu_runner.h"
#include "jit/driver.h"
#include "jit/gpu_runner.h"

namespace fusejit {

// Bumped whenever generated code changes meaning for the same IR; part of every disk cache key.
inline constexpr const char* kCodegenVersion = "fusejit-codegen-4";

// Code generation options of the unfused baseline: always strict (it is what fast mode is compared
// with), and canonical names so nodes that differ only in their ids share one kernel (a
// 50,000-node chain compiles a handful of kernels, not 50,000).
inline jit::CodegenOptions unfused_codegen_options() {
  jit::CodegenOptions cg;
  cg.canonical_names = true;
  return cg;
}

struct Program::Impl {
  Graph graph;                      // as given
  Graph rewritten;                  // after rewrites: what the fused kernels compute
  ir::RewriteResult rewrite;
  ir::Plan fused_plan;              // over rewritten.impl().graph
  ir::Plan unfused_plan;            // over graph.impl().graph: one kernel per op, as written
  Options options;
  Backend backend = Backend::Cpu;
  std::string target;               // "sm_90 (CUBIN)", "host C++", ...
  std::string backend_note;         // why the CPU was used under Backend::Auto
  std::vector<KernelInfo> fused_kernels, unfused_kernels;

  // CPU backend.
  std::shared_ptr<jit::CpuProgram> cpu_fused, cpu_unfused;
  // GPU backend.
  std::shared_ptr<jit::DeviceContext> device;
  std::shared_ptr<jit::GpuProgram> gpu_fused, gpu_unfused;

  explicit Impl(Graph g) : graph(g), rewritten(std::move(g)) {}
};

// Converts public param values (empty = defaults) to one ir::Scalar per graph param, in slot
// order, each of the param's dtype. Throws Error(User) on a wrong count.
std::vector<ir::Scalar> param_values(const ir::Graph& g, std::span<const Scalar> params);

// Probes for a usable GPU: nullptr and the reason when there is none.
std::shared_ptr<jit::DeviceContext> open_device(int ordinal, std::string* why_not);

}  // namespace fusejit
