// Issue 4, "Done when": every sample graph and the random test graphs compile with NVRTC, through
// fusejit's own wrapper (jit/nvrtc.h), to CUBIN for sm_75, sm_80, sm_90 and sm_100 with no CUDA
// headers and no include path, fused and unfused, strict and fast. Kernels are batched into one
// program per arch (as the unfused path does) to keep CI time down: ~100 kernels take NVRTC+ptxas
// several seconds per arch; they go through the kernel cache (tests/support/nvrtc_cached.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "ir/passes/rewrite.h"
#include "jit/arch.h"
#include "jit/codegen.h"
#include "jit/nvrtc.h"
#include "support/nvrtc_cached.h"
#include "support/random_graph.h"

using namespace fusejit;
namespace fs = std::filesystem;

namespace {

const char* const kArchs[] = {"sm_75", "sm_80", "sm_90", "sm_100"};

std::vector<jit::GeneratedKernel> kernels_of(const ir::Graph& parsed, bool fast) {
  ir::RewriteOptions ro;
  ro.fast_math = fast;
  ir::Graph g = ir::rewrite(parsed, ro).graph;
  jit::CodegenOptions co;
  co.fast_math = fast;
  std::vector<jit::GeneratedKernel> ks = jit::generate_plan_kernels(g, ir::plan_fusion(g), co);
  std::vector<jit::GeneratedKernel> unfused = jit::generate_plan_kernels(g, ir::plan_unfused(g), co);
  ks.insert(ks.end(), unfused.begin(), unfused.end());
  return ks;
}

bool is_elf(const std::vector<char>& b) { return b.size() > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F'; }

void compile_everywhere(const jit::TranslationUnit& tu, const std::string& name) {
  // The prelude's only includes are host-side (#ifndef __CUDACC_RTC__); no CUDA header anywhere.
  CHECK(tu.source.find("#include <cuda") == std::string::npos);
  CHECK(tu.source.find("#include \"cuda") == std::string::npos);
  for (const auto& o : tu.nvrtc_options) CHECK(o.rfind("-I", 0) != 0);
  for (const std::string arch : kArchs) {
    CAPTURE(arch);
    jit::CompileRequest req{jit::parse_target(arch), tu.nvrtc_options, {}};
    try {
      const std::vector<char> binary = testing::compile_cuda_cached(tu.source, name, req);
      CHECK(is_elf(binary));
      std::string bin(binary.begin(), binary.end());
      for (const auto& k : tu.kernel_names) CHECK_MESSAGE(bin.find(k) != std::string::npos, k);
    } catch (const jit::CompileError& e) {
      FAIL(std::string(e.what()).substr(0, 6000));
    }
  }
}

}  // namespace

TEST_CASE("every sample graph compiles for sm_75, sm_80, sm_90 and sm_100, strict and fast") {
  std::vector<fs::path> samples;
  for (const auto& e : fs::directory_iterator(fs::path(FUSEJIT_SOURCE_DIR) / "samples" / "graphs"))
    if (e.path().extension() == ".txt") samples.push_back(e.path());
  std::sort(samples.begin(), samples.end());
  REQUIRE(samples.size() >= 3);
  // One program per mode and arch holding every sample's fused and unfused kernels: NVRTC time
  // is dominated by the per-program prelude, and CI has few cores.
  for (bool fast : {false, true}) {
    CAPTURE(fast);
    std::vector<jit::GeneratedKernel> all;
    for (const auto& path : samples) {
      std::string file = path.filename().string();
      CAPTURE(file);
      std::vector<jit::GeneratedKernel> ks = kernels_of(ir::parse_graph_file(path.string()), fast);
      REQUIRE(!ks.empty());
      all.insert(all.end(), ks.begin(), ks.end());
    }
    compile_everywhere(jit::emit_translation_unit(all), fast ? "samples_fast.cu" : "samples.cu");
  }
}

TEST_CASE("random test graphs compile for sm_75, sm_80, sm_90 and sm_100") {
  // All kernels of 8 random graphs in one program per arch keeps this to 4 NVRTC calls.
  std::vector<jit::GeneratedKernel> all;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    testing::RandomGraphOptions o;
    o.seed = seed * 7919;
    std::vector<jit::GeneratedKernel> ks = kernels_of(testing::random_graph(o), false);
    all.insert(all.end(), ks.begin(), ks.end());
  }
  jit::TranslationUnit tu = jit::emit_translation_unit(all);
  MESSAGE(tu.kernel_names.size() << " distinct kernels from 8 random graphs");
  compile_everywhere(tu, "random_graphs.cu");
}
