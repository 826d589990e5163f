// End to end on the CPU: rewrite (strict) -> plan_fusion -> generated kernels compiled with the
// host compiler -> outputs bit for bit equal to the reference evaluator on the ORIGINAL graph
// (NaN payloads aside). Checks that the plans (multi-output groups, recomputed broadcast
// producers, copy/fill groups of leaf outputs, parameter-cap splits) are executable as planned.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>

#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "ir/passes/rewrite.h"
#include "ir/reference.h"
#include "jit/cpu_runner.h"
#include "tests/support/random_graph.h"
#include "tests/support/samples.h"

using namespace fusejit;
using namespace fusejit::ir;

namespace {

// Returns the launches whose row cache held the per-row inputs only (row_cache 3).
int run_and_compare(const std::vector<Graph>& originals, const PlanOptions& po) {
  int per_row_only = 0;
  std::vector<std::unique_ptr<jit::CpuProgram>> progs;
  std::vector<jit::CpuProgram*> ptrs;
  for (const Graph& g : originals) {
    Graph r = rewrite(g).graph;
    progs.push_back(std::make_unique<jit::CpuProgram>(jit::prepare_cpu_program(r, plan_fusion(r, po))));
    ptrs.push_back(progs.back().get());
  }
  jit::compile_cpu_programs(ptrs);
  for (size_t k = 0; k < originals.size(); ++k) {
    INFO("graph " << k << " " << originals[k].name);
    auto in = testing::random_inputs(originals[k], 77 + k);
    auto ps = testing::random_params(originals[k], 91 + k);
    auto want = evaluate_reference(originals[k], in, ps);
    auto got = jit::run_cpu_program(*progs[k], in, ps);
    per_row_only += got.per_row_cache_launches;
    REQUIRE(got.outputs.size() == want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      std::string why;
      bool same = testing::same_bits(want[o], got.outputs[o], &why);
      if (!same) FAIL_CHECK("output " << originals[k].outputs[o].name << ": " << why);
    }
  }
  return per_row_only;
}

}  // namespace

// An output that is an input after rewrites is a same-dtype cast in a kernel that reads the input
// (ir/passes/rewrite.h); one that is a param has a fill group writing the output buffer.
TEST_CASE("leaf outputs (an input's cast, a fill group) run on the CPU like the reference") {
  std::vector<Graph> gs;
  gs.push_back(parse_graph("input x : f32[6]\ny = x * 1\nz = x + 1\noutput y, z\n", "copy"));
  gs.push_back(parse_graph("input x : f32[6]\nparam p : f32 = 2.5\ny = p * 1\nz = x + p\noutput y, z\n", "fill"));
  run_and_compare(gs, {});
}

TEST_CASE("fused plans of samples and random graphs run on the CPU bit for bit like the reference") {
  std::vector<Graph> originals;
  for (const std::filesystem::path& path : fusejit::testing::sample_graphs()) {
    originals.push_back(fusejit::testing::parse_small(path, 5));
  }
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    testing::RandomGraphOptions o;
    o.seed = 9000 + seed;
    o.num_ops = 10 + static_cast<int>(seed % 20);
    o.max_outputs = 4;
    originals.push_back(testing::random_graph(o));
  }
  // A mask broadcast over the rows: under the 64-byte row cache below only x's rows fit.
  originals.push_back(parse_graph("input x : f32[3, 16]\ninput m : f32[16]\ny = softmax(x + m, -1)\noutput y\n", "masked"));
  PlanOptions po;
  po.max_ops_per_group = 6;  // small cap: exercises splits and materialised intermediates
  run_and_compare(originals, po);
  run_and_compare(originals, {});
  // Launched under other rules (run_cpu_program follows the plan's): a row cache of 64 bytes keeps
  // short rows on chip, puts longer ones back in memory and keeps only the rows that differ per
  // row where broadcast rows do not fit (row_cache 3); and no row cache at all.
  PlanOptions small;
  small.rules.row_cache_limit = 64;
  CHECK(run_and_compare(originals, small) >= 1);
  small.rules.row_cache = false;
  run_and_compare(originals, small);
}
