#include "tests/support/cpu_check.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <span>

#include <fmt/format.h>

#include "ir/passes/plan_fusion.h"
#include "ir/reference.h"
#include "tests/support/random_graph.h"

namespace fusejit::testing {
namespace {
std::atomic<int> g_nan_payload_only{0};
}

int nan_payload_only_count() { return g_nan_payload_only.load(); }

bool identical(const ir::Tensor& a, const ir::Tensor& b, std::string& why) {
  if (a.dtype != b.dtype || a.shape != b.shape) {
    why = fmt::format("type {} vs {}", ir::tensor_type_string(a.dtype, a.shape), ir::tensor_type_string(b.dtype, b.shape));
    return false;
  }
  if (a.data == b.data) return true;
  if (same_bits(a, b)) {
    ++g_nan_payload_only;
    return true;
  }
  const int sz = ir::dtype_size(a.dtype);
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(a.data.data() + i * sz, b.data.data() + i * sz, static_cast<size_t>(sz)) != 0) {
      const ir::Scalar x = a.get(i), y = b.get(i);
      uint64_t bx = 0, by = 0;
      std::memcpy(&bx, a.data.data() + i * sz, static_cast<size_t>(sz));
      std::memcpy(&by, b.data.data() + i * sz, static_cast<size_t>(sz));
      auto show = [&](const ir::Scalar& s) { return ir::is_float(a.dtype) ? fmt::format("{}", s.f) : fmt::format("{}", s.i); };
      why = fmt::format("element {}: {} (0x{:x}) vs {} (0x{:x})", i, show(x), bx, show(y), by);
      return false;
    }
  return true;
}

Case make_case(std::string label, ir::Graph g, uint64_t seed, const jit::CodegenOptions& opts) {
  Case c;
  c.label = std::move(label);
  c.inputs = random_inputs(g, seed, 0.35);
  c.params = random_params(g, seed);
  c.fused = jit::prepare_cpu_program(g, ir::plan_fusion(g), opts);
  c.unfused = jit::prepare_cpu_program(g, ir::plan_unfused(g), opts);
  c.graph = std::move(g);
  return c;
}

void compile_all(std::vector<Case>& cases, const jit::HostCompileOptions& opts, int parts,
                 const std::optional<jit::HostCompileOptions>& unfused_opts) {
  std::vector<std::future<void>> jobs;
  const size_t per = (cases.size() + static_cast<size_t>(parts) - 1) / static_cast<size_t>(parts);
  for (size_t first = 0; first < cases.size(); first += per)
    jobs.push_back(std::async(std::launch::async, [&, first] {
      std::vector<jit::CpuProgram*> ps, unfused;
      for (size_t k = first; k < std::min(cases.size(), first + per); ++k) {
        ps.push_back(&cases[k].fused);
        if (cases[k].with_unfused) (unfused_opts ? unfused : ps).push_back(&cases[k].unfused);
      }
      jit::compile_cpu_programs(ps, opts);
      if (!unfused.empty()) jit::compile_cpu_programs(unfused, *unfused_opts);
    }));
  for (auto& j : jobs) j.get();
}

int check_case(const Case& c, const jit::CpuRunOptions& run) {
  const std::vector<ir::Tensor> ref = ir::evaluate_reference(c.graph, c.inputs, c.params);
  const jit::CpuTensorRunResult f = jit::run_cpu_program(c.fused, std::span<const ir::Tensor>(c.inputs), c.params, run);
  jit::CpuTensorRunResult u;
  if (c.with_unfused) u = jit::run_cpu_program(c.unfused, std::span<const ir::Tensor>(c.inputs), c.params, run);
  int bad = 0;
  for (size_t o = 0; o < ref.size(); ++o) {
    std::string why;
    if (!identical(ref[o], f.outputs[o], why)) {
      ++bad;
      FAIL_CHECK(c.label << ": fused output '" << c.graph.outputs[o].name << "' differs from the reference: " << why);
    }
    if (c.with_unfused && !identical(ref[o], u.outputs[o], why)) {
      ++bad;
      FAIL_CHECK(c.label << ": unfused output '" << c.graph.outputs[o].name << "' differs from the reference: " << why);
    }
  }
  return bad;
}

}  // namespace fusejit::testing
