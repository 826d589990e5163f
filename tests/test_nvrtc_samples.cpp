// Issue 4, "Done when": every sample graph and the random test graphs compile with NVRTC, through
// fusejit's own wrapper (jit/nvrtc.h), to CUBIN for sm_75, sm_80, sm_90 and sm_100 with no CUDA
// headers and no include path, fused and unfused, strict (fast mode: sm_75 and sm_100). Kernels
// are batched into one program per arch (as the unfused path does) to keep CI time down: ~100
// kernels take NVRTC+ptxas several seconds per arch; they go through the kernel cache
// (tests/support/nvrtc_cached.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "ir/passes/rewrite.h"
#include "ir/reduce_group.h"
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

void compile_everywhere(const jit::TranslationUnit& tu, const std::string& name,
                        std::span<const char* const> archs = kArchs) {
  // The prelude's only includes are host-side (#ifndef __CUDACC_RTC__); no CUDA header anywhere.
  CHECK(tu.source.find("#include <cuda") == std::string::npos);
  CHECK(tu.source.find("#include \"cuda") == std::string::npos);
  for (const auto& o : tu.nvrtc_options) CHECK(o.rfind("-I", 0) != 0);
  for (const std::string arch : archs) {
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

TEST_CASE("every sample graph compiles for sm_75, sm_80, sm_90 and sm_100 (fast mode: sm_75 and sm_100)") {
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
    // Fast mode for the oldest and newest arch only: its kernels differ from strict ones in the
    // rewrites and the math flags, not per arch, and each program of every sample takes NVRTC about
    // a minute on the 2-core CI machine (this test was the longest of CI's first step).
    static const char* const kFastArchs[] = {"sm_75", "sm_100"};
    compile_everywhere(jit::emit_translation_unit(all), fast ? "samples_fast.cu" : "samples.cu",
                       fast ? std::span<const char* const>(kFastArchs) : std::span<const char* const>(kArchs));
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

TEST_CASE("column kernels whose lane buffers would fill 48 KiB of static shared memory compile to CUBIN") {
  // Rows side by side, 256 lanes each: lanes of 12, 24 or 48 bytes filled 48 KiB exactly, and the
  // warp tree's result and ptxas's own shared memory put sm_90 kernels over it ("uses too much
  // shared data (0xc018 bytes, 0xc000 max)"; a reviewer's find, for argmax passes and three f32 or
  // f64 column reductions alike). A pass of three 16-byte argmax lanes is now two passes.
  const char* graphs[] = {
      "input x : f32[3000, 3]\ns = sum(x, 0)\nm = amax(x, 0)\nn = amin(x, 0)\noutput s, m, n\n",
      "input x : f64[3000, 3]\ns = sum(x, 0)\nm = amax(x, 0)\nn = amin(x, 0)\noutput s, m, n\n",
      "input x : f32[3000, 3]\na = argmax(x, 0)\nm = amax(x, 0)\noutput a, m\n",
      "input x : f32[3000, 3]\na = argmax(x, 0)\nb = argmin(x, 0)\nc = argmax(x * x, 0)\noutput a, b, c\n",
      ("input l : bf16[3000, 5]\nx = cast(l, f32)\nt = argmax(x, 0)\nm = amax(x, 0, keepdim)\n"
       "p = 1 / sum(exp(x - m), 0)\noutput t, p\n"),
  };
  std::vector<jit::GeneratedKernel> all;
  for (const char* text : graphs) {
    const ir::Graph g = ir::parse_graph(text, "col.txt");
    const ir::Plan plan = ir::plan_fusion(g);
    for (const ir::FusionGroup& grp : plan.groups) {
      const ir::ReduceGroupInfo info = ir::analyze_reduce_group(g, grp);
      for (const std::vector<ir::NodeId>& p : info.passes) CHECK(ir::pass_lane_bytes(g, p) <= ir::kMaxLaneBytes);
      CHECK(ir::column_rows_per_block(g, info) * 256 * ir::lane_bytes(g, info) <= 48 * 1024 - ir::kColumnStaticReserve);
    }
    std::vector<jit::GeneratedKernel> ks = jit::generate_plan_kernels(g, plan, {});
    all.insert(all.end(), ks.begin(), ks.end());
  }
  const jit::TranslationUnit tu = jit::emit_translation_unit(all);
  for (const char* arch : {"sm_80", "sm_90"}) {
    CAPTURE(arch);
    jit::CompileRequest req{jit::parse_target(arch), tu.nvrtc_options, {}};
    try {
      CHECK(is_elf(testing::compile_cuda_cached(tu.source, "columns", req)));
    } catch (const jit::CompileError& e) {
      FAIL(std::string(e.what()).substr(0, 3000));
    }
  }
}
