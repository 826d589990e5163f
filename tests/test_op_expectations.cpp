// The ops against NumPy and PyTorch on edge values (NaN, +-inf, +-0, subnormals, the largest finite
// values, integer extremes, shift counts past the width, ...), bit for bit on every CPU path:
// constant folding (ir::eval_scalar), the reference evaluator, and the generated kernels fused and
// unfused. The expected values are tests/data/op_expectations.txt, written by
// tests/data/op_expectations.py from NumPy / PyTorch (see there for each op's source), so this test
// needs neither library. Any two NaNs match (NaN payloads and signs are not part of the contract);
// every other result, the sign of zero included, must be identical. Where the data records that
// glibc (the CPU path's math library) gives another value than NumPy/PyTorch on a case (their
// vector paths use Intel SVML / Sleef), the CPU path must give exactly glibc's value; docs/ops.md
// lists those differences.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/eval.h"
#include "ir/passes/plan_fusion.h"
#include "ir/plan.h"
#include "ir/reference.h"
#include "jit/cpu_runner.h"

using namespace fusejit;
using ir::DType;
using ir::Op;

namespace {

// All cases of one op on one dtype, in file order.
struct Group {
  Op op = Op::Add;
  DType dtype = DType::F32;
  std::string source;                     // numpy, torch, f64, f32, exact
  std::vector<std::vector<uint64_t>> args;  // args[k][i]: operand k of case i
  std::vector<uint64_t> expected;     // what fusejit must give: the source's bits, or glibc's (below)
  std::vector<uint64_t> source_bits;  // the source's bits
};

std::vector<Group> load_groups() {
  std::ifstream f(std::string(FUSEJIT_SOURCE_DIR) + "/tests/data/op_expectations.txt");
  REQUIRE(f.good());
  std::vector<Group> groups;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string op, dt, src, tok;
    ss >> op >> dt >> src;
    const auto o = ir::parse_op(op);
    const auto t = ir::parse_dtype(dt);
    REQUIRE_MESSAGE((o && t), "bad line: " << line);
    if (groups.empty() || groups.back().op != *o || groups.back().dtype != *t) {
      groups.push_back({*o, *t, src, std::vector<std::vector<uint64_t>>(static_cast<size_t>(ir::op_arity(*o))), {}, {}});
    }
    Group& g = groups.back();
    for (auto& a : g.args) {
      ss >> tok;
      a.push_back(std::stoull(tok, nullptr, 16));
    }
    ss >> tok;
    REQUIRE_MESSAGE(tok == "->", "bad line: " << line);
    ss >> tok;
    g.source_bits.push_back(std::stoull(tok, nullptr, 16));
    g.expected.push_back(g.source_bits.back());
    // "glibc <bits>": the math library of the CPU path gives another value than NumPy/PyTorch
    // (docs/ops.md lists these); the CPU path must give exactly glibc's.
    if (ss >> tok) {
      REQUIRE_MESSAGE(tok == "glibc", "bad line: " << line);
      ss >> tok;
      g.expected.back() = std::stoull(tok, nullptr, 16);
    }
  }
  return groups;
}

bool is_nan_bits(DType t, uint64_t b) {
  switch (t) {
    case DType::F16: return (b & 0x7fff) > 0x7c00;
    case DType::BF16: return (b & 0x7fff) > 0x7f80;
    case DType::F32: return (b & 0x7fffffffu) > 0x7f800000u;
    case DType::F64: return (b & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    default: return false;
  }
}

bool same(DType t, uint64_t a, uint64_t b) { return a == b || (is_nan_bits(t, a) && is_nan_bits(t, b)); }

uint64_t element_bits(const ir::Tensor& t, size_t i) {
  uint64_t v = 0;
  const size_t w = static_cast<size_t>(ir::dtype_size(t.dtype));
  std::memcpy(&v, t.data.data() + i * w, w);
  return v;
}

ir::Tensor tensor_of(DType t, const std::vector<uint64_t>& bits) {
  ir::Tensor x(t, {static_cast<int64_t>(bits.size())});
  const size_t w = static_cast<size_t>(ir::dtype_size(t));
  for (size_t i = 0; i < bits.size(); ++i) std::memcpy(x.data.data() + i * w, &bits[i], w);
  return x;
}

// Checks one output against the group's expectations; returns the number of mismatches.
int check(const Group& g, const ir::Tensor& got, const char* path) {
  int bad = 0;
  for (size_t i = 0; i < g.expected.size(); ++i) {
    const uint64_t r = element_bits(got, i);
    if (same(g.dtype, g.expected[i], r)) continue;
    if (bad++ < 4) {
      std::string args;
      for (const auto& a : g.args) args += fmt::format("{}0x{:x}", args.empty() ? "" : ", ", a[i]);
      FAIL_CHECK(fmt::format("{}({}) on {} [{}]: expected 0x{:x} ({} 0x{:x}), got 0x{:x}", ir::op_name(g.op),
                             ir::dtype_name(g.dtype), path, args, g.expected[i], g.source, g.source_bits[i], r));
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("ops equal NumPy/PyTorch on edge values: folding, reference, fused and unfused kernels") {
  const std::vector<Group> groups = load_groups();
  REQUIRE(!groups.empty());
  std::set<Op> ops;
  size_t cases = 0;

  // One graph per dtype: every group's operands are inputs of their own length, its result an output.
  std::map<DType, std::vector<const Group*>> by_dtype;
  for (const Group& g : groups) by_dtype[g.dtype].push_back(&g);
  struct Run {
    ir::Graph graph;
    std::vector<ir::Tensor> inputs;
    std::vector<const Group*> groups;
    jit::CpuProgram fused, unfused;
  };
  std::vector<Run> runs;
  for (const auto& [dt, gs] : by_dtype) {
    Run run;
    ir::GraphBuilder b(fmt::format("expect_{}", ir::dtype_name(dt)));
    for (size_t k = 0; k < gs.size(); ++k) {
      const Group& g = *gs[k];
      std::vector<ir::Operand> args;
      const int64_t n = static_cast<int64_t>(g.expected.size());
      for (size_t a = 0; a < g.args.size(); ++a) {
        args.push_back(ir::Operand::of(b.add_input(fmt::format("x{}_{}", k, a), dt, {{n, -1}})));
        run.inputs.push_back(tensor_of(dt, g.args[a]));
      }
      const ir::Operand r = b.apply(g.op, args);
      REQUIRE(b.graph().node(r.node).dtype == dt);
      b.add_output(fmt::format("r{}", k), r);
      run.groups.push_back(&g);
      ops.insert(g.op);
      cases += g.expected.size();
    }
    run.graph = b.finish();
    run.fused = jit::prepare_cpu_program(run.graph, ir::plan_fusion(run.graph));
    run.unfused = jit::prepare_cpu_program(run.graph, ir::plan_unfused(run.graph));
    runs.push_back(std::move(run));
  }
  std::vector<jit::CpuProgram*> programs;
  for (Run& r : runs) {
    programs.push_back(&r.fused);
    programs.push_back(&r.unfused);
  }
  jit::compile_cpu_programs(programs);

  int bad = 0;
  for (const Run& run : runs) {
    const std::vector<ir::Tensor> ref = ir::evaluate_reference(run.graph, run.inputs);
    const jit::CpuTensorRunResult fused = jit::run_cpu_program(run.fused, std::span<const ir::Tensor>(run.inputs), {});
    const jit::CpuTensorRunResult unfused = jit::run_cpu_program(run.unfused, std::span<const ir::Tensor>(run.inputs), {});
    for (size_t k = 0; k < run.groups.size(); ++k) {
      const Group& g = *run.groups[k];
      bad += check(g, ref[k], "reference");
      bad += check(g, fused.outputs[k], "fused kernel");
      bad += check(g, unfused.outputs[k], "unfused kernel");
      // Constant folding: eval_scalar on each case.
      ir::Tensor folded(g.dtype, {static_cast<int64_t>(g.expected.size())});
      for (size_t i = 0; i < g.expected.size(); ++i) {
        std::vector<ir::Scalar> s;
        for (const auto& a : g.args) s.push_back(tensor_of(g.dtype, {a[i]}).get(0));
        folded.set(static_cast<int64_t>(i), ir::eval_scalar(g.op, g.dtype, s));
      }
      bad += check(g, folded, "eval_scalar");
    }
  }
  size_t glibc = 0;
  for (const Group& g : groups)
    for (size_t i = 0; i < g.expected.size(); ++i) glibc += !same(g.dtype, g.expected[i], g.source_bits[i]);
  MESSAGE(cases << " cases of " << ops.size() << " ops; " << glibc
                << " where glibc differs from NumPy/PyTorch (the CPU path must give glibc's value)");
  CHECK(bad == 0);
}
