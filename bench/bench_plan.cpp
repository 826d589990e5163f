// Planner scaling: builds graphs of 10k / 100k / 200k nodes (a mix of elementwise ops over a
// [1024, 256] space with broadcast [256] producers, several outputs; and one of 20k nodes with an
// output every other node: per-output work that scans every output was quadratic) and times
// rewrite, plan_fusion, plan_unfused and the traffic of both plans (plan_totals, what `fusejit
// plan` reports), each the fastest of three runs. Not a test: prints the timings, with the nodes
// before and after rewrites (dead code and CSE remove about a third; the planner sees the rest, and
// ns/node counts those). Run: build/bench/bench_plan
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>

#include "ir/builder.h"
#include "ir/passes/plan_fusion.h"
#include "ir/passes/plan_report.h"
#include "ir/passes/rewrite.h"
#include "ir/plan.h"

using namespace fusejit::ir;

// "x" + number without GCC 12's false -Wrestrict warning on operator+(const char*, string&&).
static std::string numbered(const char* prefix, long long k) {
  std::string s(prefix);
  s += std::to_string(k);
  return s;
}

static Graph make_graph(int nodes, uint64_t seed, uint64_t output_every) {
  std::mt19937_64 rng(seed);
  GraphBuilder b("bench");
  std::vector<NodeId> big, small;
  for (int k = 0; k < 8; ++k) big.push_back(b.add_input(numbered("x", k), DType::F32, {{1024, -1}, {256, -1}}));
  for (int k = 0; k < 4; ++k) small.push_back(b.add_input(numbered("b", k), DType::F32, {{256, -1}}));
  const Op unary[] = {Op::Exp, Op::Tanh, Op::Neg, Op::Sqrt, Op::Sigmoid};
  const Op binary[] = {Op::Add, Op::Mul, Op::Sub, Op::Maximum};
  int outputs = 0;
  while (b.graph().size() < nodes) {
    bool on_small = rng() % 8 == 0;
    std::vector<NodeId>& pool = on_small ? small : big;
    auto pick = [&](std::vector<NodeId>& p) { return p[p.size() - 1 - rng() % std::min<size_t>(p.size(), 16)]; };
    Operand r;
    if (rng() % 3 == 0) {
      Operand a[1] = {Operand::of(pick(pool))};
      r = b.apply(unary[rng() % 5], a);
    } else {
      Operand a[2] = {Operand::of(pick(pool)), Operand::of(rng() % 4 == 0 ? pick(small) : pick(pool))};
      r = b.apply(binary[rng() % 4], a);
    }
    pool.push_back(r.node);
    if (rng() % output_every == 0) b.add_output(numbered("o", outputs++), r);
  }
  b.add_output("y", Operand::of(big.back()));
  return b.finish();
}

template <class F> static double time_ms(F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The fastest of three runs of f (the first also warms the allocator and caches).
template <class F> static double best_ms(F&& f) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) best = std::min(best, time_ms(f));
  return best;
}

int main(int argc, char** argv) {
  if (argc > 1) {  // it takes no argument: --help says so, anything else is a mistake
    const std::string a = argv[1];
    std::fprintf(a == "--help" || a == "-h" ? stdout : stderr,
                 "usage: bench_plan (no arguments): times rewrite, plan_fusion, plan_unfused and plan_totals on\n"
                 "generated graphs of 10k, 100k, 200k and 20k nodes; ns/node is plan_fusion's time over the\n"
                 "nodes it plans (the rewritten graph's)\n");
    return a == "--help" || a == "-h" ? 0 : 2;
  }
  std::printf("%8s %9s %8s %10s %14s %14s %10s %8s %8s\n", "nodes", "rewritten", "outputs", "rewrite_ms",
              "plan_fused_ms", "plan_unfus_ms", "totals_ms", "groups", "ns/node");
  for (auto [n, every] : {std::pair{10000, 2000}, {100000, 2000}, {200000, 2000}, {20000, 2}}) {
    Graph g = make_graph(n, 42, static_cast<uint64_t>(every));
    Graph r;
    double rw = best_ms([&] { r = rewrite(g).graph; });
    Plan p;
    double best = best_ms([&] { p = plan_fusion(r); });
    Plan u;
    double un = best_ms([&] { u = plan_unfused(r); });
    int64_t bytes = 0;
    double tot = best_ms([&] { bytes = plan_totals(r, p).read_bytes + plan_totals(r, u).read_bytes; });
    std::printf("%8d %9d %8zu %10.1f %14.1f %14.1f %10.1f %8zu %8.0f\n", g.size(), r.size(), g.outputs.size(), rw,
                best, un, tot, p.groups.size(), best * 1e6 / r.size());
    if (bytes < 0) return 1;  // keeps the totals computed
  }
  return 0;
}
