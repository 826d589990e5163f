// Program::Impl: a graph rewritten, planned (fused and unfused), generated and compiled for one
// backend. Private to the Program implementation (lib/program.cpp compiles, lib/program_run.cpp
// runs); everything else, run_graph included, uses the public API.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fusejit/fusejit.h"
#include "ir/graph.h"
#include "ir/passes/rewrite.h"
#include "ir/plan.h"
#include "jit/cpu_runner.h"
#include "jit/driver.h"
#include "jit/gpu_runner.h"
#include "lib/internal.h"

namespace fusejit {

struct Program::Impl {
  // One plan of the program and what it was compiled to.
  struct Path {
    ir::Plan plan;
    std::vector<KernelInfo> kernels;             // one per plan group
    std::shared_ptr<jit::CpuProgram> cpu;        // CPU backend
    std::shared_ptr<jit::GpuProgram> gpu;        // GPU backend
  };

  Graph graph;                      // as given
  Graph rewritten;                  // after rewrites: what the fused kernels compute
  ir::RewriteResult rewrite;
  Options options;
  Backend backend = Backend::Cpu;
  std::string target;               // "sm_90 (CUBIN)", "host C++ (...)", ...
  std::string backend_note;         // why the CPU was used under Backend::Auto
  Path fused;                       // over rewritten.impl().graph
  Path unfused;                     // over graph.impl().graph: one kernel per op, as written
  std::shared_ptr<jit::DeviceContext> device;

  explicit Impl(Graph g) : graph(g), rewritten(std::move(g)) {}
  const Path& path(PlanKind kind) const { return kind == PlanKind::Fused ? fused : unfused; }
  // The graph a plan was made for.
  const ir::Graph& graph_of(PlanKind kind) const {
    return (kind == PlanKind::Fused ? rewritten : graph).impl().graph;
  }
};

}  // namespace fusejit
