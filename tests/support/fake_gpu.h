// The library's GPU path without a GPU: the fake driver of fake_driver.h installed as the process's
// driver, and each kernel "launch" running the host build of the same generated kernel, so values
// can be checked. Programs compile for sm_90 with NVRTC as on a real device.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <fusejit/fusejit.h>

#include "ir/passes/plan_fusion.h"
#include "jit/codegen.h"
#include "jit/host_compile.h"
#include "lib/internal.h"
#include "tests/support/fake_driver.h"

namespace fake_gpu {

namespace fj = fusejit;

// Installs a fresh fake driver (4 GiB free) as the process's driver for the scope.
struct FakeGpu {
  FakeGpu() {
    auto drv = fake_cuda::reset();
    fake_cuda::st().free = size_t{4} << 30;
    fusejit::jit::set_driver_for_testing(drv);
  }
  ~FakeGpu() { fusejit::jit::set_driver_for_testing(nullptr); }
  FakeGpu(const FakeGpu&) = delete;
  FakeGpu& operator=(const FakeGpu&) = delete;
};

// How emulate() runs a launch.
struct Emulation {
  // false: an elementwise kernel runs the launch's grid and block as the launcher chose them, every
  // (block, thread) in turn on one host thread (so the launcher's grid and the kernels' indexing
  // are what covers the elements); a reduction kernel's work runs in one block of one thread (its
  // threads meet at barriers, which one host thread cannot honour; its loops cover the rows).
  // Quick. true: the launch's grid and block for every kernel, a reduction kernel's blocks each as
  // `block` host threads (jit::HostCompileOptions::block_threads), so barriers, the warp tree and
  // several rows per block run as on a GPU. Slow.
  bool block_threads = false;
};

// Registers host emulations of every kernel of both plans of `p` (every entry point of each) with
// the fake driver: the host build of the same kernels, generated again from the program's graphs
// and their (deterministic) plans as Program::compile makes them. A built plan's kernels are
// registered under the names the program reports (a loaded folder's names); a plan not built yet
// under the names code generation gives. A launch's dynamic shared memory starts as garbage
// (0xCD bytes), as on a GPU. Returns the host modules to keep alive.
inline std::vector<std::shared_ptr<fusejit::jit::HostModule>> emulate(const fj::Program& p, Emulation how = {}) {
  namespace ir = fusejit::ir;
  std::vector<std::shared_ptr<fusejit::jit::HostModule>> keep;
  for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
    const bool fused = kind == fj::PlanKind::Fused;
    const ir::Graph& g = (fused ? p.rewritten() : p.graph()).impl().graph;
    fusejit::jit::CodegenOptions cg;
    cg.fast_math = fused && p.fast_math();
    cg.canonical_names = !fused;
    auto kernels = fusejit::jit::generate_plan_kernels(g, fused ? ir::plan_fusion(g) : ir::plan_unfused(g), cg);
    const std::vector<fj::KernelInfo> infos = p.kernels(kind);
    if (kernels.size() != infos.size() || kernels.empty()) continue;
    fusejit::jit::HostCompileOptions ho;
    ho.block_threads = how.block_threads;
    auto module = fusejit::jit::host_compile(kernels, ho).module;
    keep.push_back(module);
    for (size_t i = 0; i < kernels.size(); ++i) {
      const std::string name = infos[i].cache == fj::CacheOutcome::NotBuilt ? kernels[i].name : infos[i].name;
      std::vector<std::pair<std::string, std::string>> entries = {{kernels[i].name, name},
                                                                  {kernels[i].strided_name(), name + "_s"}};
      if (kernels[i].lane_groups > 1) entries.emplace_back(kernels[i].long_rows_name(), name + "_l");
      for (const auto& [entry, as] : entries) {
        auto tr = module->trampoline(entry);
        const bool real = how.block_threads || !kernels[i].reduction;
        fake_cuda::st().kernels[as] = [tr, real](void** a, unsigned grid, unsigned block, unsigned shared) {
          std::vector<uint64_t> dynamic_shared((shared + 7) / 8, 0xCDCDCDCDCDCDCDCDull);  // the launch's shared memory
          tr(a, real ? grid : 1, real ? block : 1, shared ? dynamic_shared.data() : nullptr);
        };
      }
    }
  }
  return keep;
}

}  // namespace fake_gpu
