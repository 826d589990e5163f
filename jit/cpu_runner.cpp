// CPU execution of generated kernels; see jit/cpu_runner.h.
#include "jit/cpu_runner.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <algorithm>

#include <fmt/format.h>

#include "ir/error.h"
#include "ir/passes/plan_report.h"

namespace fusejit::jit {

CpuProgram prepare_cpu_program(const ir::Graph& g, const ir::Plan& plan, const CodegenOptions& opts) {
  CpuProgram p;
  p.graph = g;
  p.plan = plan;
  p.kernels = generate_plan_kernels(g, plan, opts);
  return p;
}

void compile_cpu_programs(std::span<CpuProgram* const> programs, const HostCompileOptions& opts) {
  std::vector<GeneratedKernel> all;
  for (CpuProgram* p : programs) all.insert(all.end(), p->kernels.begin(), p->kernels.end());
  if (all.empty()) return;
  HostCompileResult r = host_compile(all, opts);
  for (CpuProgram* p : programs) {
    p->module = r.module;
    p->compile = r;
    p->trampolines.clear();
    p->strided_trampolines.clear();
    for (const GeneratedKernel& k : p->kernels) {
      p->trampolines.push_back(r.module->trampoline(k.name));
      p->strided_trampolines.push_back(r.module->trampoline(k.strided_name()));
    }
  }
}

CpuProgram build_cpu_program(const ir::Graph& g, const ir::Plan& plan, const CodegenOptions& opts) {
  CpuProgram p = prepare_cpu_program(g, plan, opts);
  CpuProgram* ps[] = {&p};
  compile_cpu_programs(ps);
  return p;
}

namespace {

// Rejects inputs whose byte size is not the graph input's.
void check_inputs(const ir::Graph& g, std::span<const std::span<const std::byte>> inputs) {
  if (inputs.size() != g.inputs.size())
    throw ir::UserError(fmt::format("graph has {} inputs but {} were given", g.inputs.size(), inputs.size()));
  for (size_t s = 0; s < inputs.size(); ++s) {
    const ir::Node& n = g.node(g.inputs[s]);
    const size_t want = static_cast<size_t>(value_bytes(g, g.inputs[s]));
    if (inputs[s].size() != want)
      throw ir::UserError(fmt::format("input '{}' needs {} bytes ({} {}) but has {}", n.name, want,
                                      ir::dtype_name(n.dtype), ir::shape_to_string(n.shape, &g), inputs[s].size()));
  }
}

// The value of every graph param: `params` checked, or the defaults.
std::vector<ir::Scalar> param_values(const ir::Graph& g, std::span<const ir::Scalar> params) {
  if (params.empty()) {
    std::vector<ir::Scalar> out;
    for (const ir::ParamDecl& d : g.params) out.push_back(d.default_value);
    return out;
  }
  if (params.size() != g.params.size())
    throw ir::UserError(fmt::format("graph has {} params but {} values were given", g.params.size(), params.size()));
  return {params.begin(), params.end()};
}

uint64_t address_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

// Host buffers of a run: the intermediates when the caller gave none, and misaligned input copies.
struct Scratch {
  std::vector<std::vector<std::byte>> owned;  // operator new aligns to 16 bytes: the vector path applies
  std::vector<uint64_t> inputs, outputs, intermediates;
};

Scratch bind(const CpuProgram& prog, std::span<const std::span<const std::byte>> inputs,
             std::span<const std::span<std::byte>> outputs, std::span<const std::span<std::byte>> intermediates,
             bool misalign) {
  const ir::Graph& g = prog.graph;
  const std::vector<ir::NodeId> inter = plan_intermediates(g, prog.plan);
  FJ_CHECK(outputs.size() == g.outputs.size(), "run_cpu_program: one buffer per graph output expected");
  FJ_CHECK(intermediates.empty() || intermediates.size() == inter.size(), "run_cpu_program: wrong number of intermediates");
  Scratch s;
  s.owned.reserve(inputs.size() + inter.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!misalign) {
      s.inputs.push_back(address_of(inputs[k].data()));
      continue;
    }
    // Element alignment kept, 16-byte alignment broken (as a sub-tensor view would be).
    const size_t esz = static_cast<size_t>(ir::dtype_size(g.node(g.inputs[k]).dtype));
    s.owned.emplace_back(inputs[k].size() + esz);
    std::copy(inputs[k].begin(), inputs[k].end(), s.owned.back().begin() + static_cast<std::ptrdiff_t>(esz));
    s.inputs.push_back(address_of(s.owned.back().data() + esz));
  }
  for (size_t k = 0; k < outputs.size(); ++k) {
    FJ_CHECK(static_cast<int64_t>(outputs[k].size()) == value_bytes(g, g.outputs[k].node),
             "run_cpu_program: output buffer of the wrong size");
    s.outputs.push_back(address_of(outputs[k].data()));
  }
  for (size_t i = 0; i < inter.size(); ++i) {
    if (!intermediates.empty()) {
      s.intermediates.push_back(address_of(intermediates[i].data()));
      continue;
    }
    s.owned.emplace_back(static_cast<size_t>(std::max<int64_t>(value_bytes(g, inter[i]), 16)));
    s.intermediates.push_back(address_of(s.owned.back().data()));
  }
  return s;
}

}  // namespace

void CpuKernelRunner::run(const GroupLaunch& group, size_t group_index, bool strided, bool vector, int64_t,
                          void** args) {
  const CpuProgram* p = variants_[group.variant];
  FJ_CHECK(p != nullptr && group_index < p->trampolines.size(), "CpuKernelRunner: the kernel variant is not compiled");
  void* shared = nullptr;
  if (const auto bytes = static_cast<size_t>(group.shared_bytes(strided, vector)); bytes > 0) {
    if (shared_.size() * 16 < bytes) shared_.resize((bytes + 15) / 16);
    shared = shared_.data();
  }
  (strided ? p->strided_trampolines : p->trampolines)[group_index](args, launch_.grid, launch_.block, shared);
}

uint64_t CpuKernelRunner::workspace(size_t bytes) {
  try {
    if (workspace_.size() * 8 < bytes) workspace_.resize((bytes + 7) / 8);
  } catch (const std::bad_alloc&) {  // a split row of 2^46 elements: 2^36 chunk values
    throw ir::UserError(fmt::format("not enough host memory for the chunk values of a split row ({} bytes)", bytes));
  }
  return address_of(workspace_.data());
}

void CpuKernelRunner::copy(uint64_t dst, uint64_t src, size_t bytes) {
  if (dst == src) return;
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
}

CpuRunStats run_cpu_program(const CpuProgram& prog, std::span<const std::span<const std::byte>> inputs,
                            std::span<const std::span<std::byte>> outputs, std::span<const ir::Scalar> params,
                            const CpuRunOptions& opts, std::span<const std::span<std::byte>> intermediates) {
  const ir::Graph& g = prog.graph;
  check_inputs(g, inputs);
  const std::vector<ir::Scalar> pv = param_values(g, params);
  FJ_CHECK(prog.trampolines.size() == prog.plan.groups.size(), "run_cpu_program: program is not compiled");
  const Scratch s = bind(prog, inputs, outputs, intermediates, opts.misalign_inputs);
  const PlanBindings bindings(g, prog.plan);
  const std::shared_ptr<const LaunchState> state =
      make_launch_state(g, prog.plan, bindings, [&](int variant, size_t gi) -> const GeneratedKernel& {
        FJ_CHECK(variant == 0, "run_cpu_program: the kernels were generated for fewer elements");
        return prog.kernels[gi];
      }, prog.plan.rules);  // the rules it was planned with (row splits, the row cache), as Program runs it
  FJ_CHECK(state != nullptr, "run_cpu_program: the plan does not hold for its own graph");
  std::vector<TensorArg> in, out;
  for (size_t k = 0; k < s.inputs.size(); ++k) in.push_back({s.inputs[k], state->input_shapes[k], {}});
  for (size_t k = 0; k < s.outputs.size(); ++k) out.push_back({s.outputs[k], state->output_shapes[k], {}});
  CpuKernelRunner runner(&prog, nullptr, opts.launch);
  LaunchOptions lo;
  lo.vector_path = opts.vector_path;
  lo.force_strided = opts.force_strided;
  const auto t0 = std::chrono::steady_clock::now();
  const LaunchStats ls = launch_plan(bindings, *state, in, out, s.intermediates, pv, runner, lo);
  CpuRunStats r;
  r.run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.kernels_launched = ls.kernels;
  r.vector_launches = ls.vector;
  r.strided_launches = ls.strided;
  r.kept_value_launches = ls.kept;
  r.per_row_cache_launches = ls.per_row_only;
  return r;
}

PathTiming measure_cpu_program(const CpuProgram& prog, std::span<const std::span<const std::byte>> inputs,
                               std::span<const std::span<std::byte>> outputs,
                               std::span<const std::span<std::byte>> intermediates, std::span<const ir::Scalar> params,
                               int repeats) {
  for (std::span<std::byte> b : outputs) std::fill(b.begin(), b.end(), std::byte{0xFF});
  for (std::span<std::byte> b : intermediates) std::fill(b.begin(), b.end(), std::byte{0xFF});
  std::vector<double> times;
  int launched = 0;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const CpuRunStats st = run_cpu_program(prog, inputs, outputs, params, {}, r == 0 ? intermediates : std::span<const std::span<std::byte>>{});
    times.push_back(st.run_ms);
    launched = st.kernels_launched;
  }
  return make_path_timing(launched, times, ir::plan_totals(prog.graph, prog.plan).bytes());
}

CpuTensorRunResult run_cpu_program(const CpuProgram& prog, std::span<const ir::Tensor> inputs,
                                   std::span<const ir::Scalar> params, const CpuRunOptions& opts) {
  const ir::Graph& g = prog.graph;
  if (inputs.size() != g.inputs.size())
    throw ir::UserError(fmt::format("graph has {} inputs but {} were given", g.inputs.size(), inputs.size()));
  std::vector<std::span<const std::byte>> in;
  for (size_t s = 0; s < inputs.size(); ++s) {
    const ir::Node& n = g.node(g.inputs[s]);
    const std::vector<int64_t> want = ir::shape_sizes(n.shape);
    if (inputs[s].dtype != n.dtype || inputs[s].shape != want)
      throw ir::UserError(fmt::format("input '{}': expected {}, found {}", n.name, ir::tensor_type_string(n.dtype, want),
                                      ir::tensor_type_string(inputs[s].dtype, inputs[s].shape)));
    in.emplace_back(inputs[s].data);
  }
  CpuTensorRunResult t;
  std::vector<std::span<std::byte>> out;
  for (const ir::OutputDecl& o : g.outputs) {
    const ir::Node& n = g.node(o.node);
    t.outputs.emplace_back(n.dtype, ir::shape_sizes(n.shape));
  }
  for (ir::Tensor& o : t.outputs) out.emplace_back(o.data);
  static_cast<CpuRunStats&>(t) = run_cpu_program(prog, in, out, params, opts);
  return t;
}

}  // namespace fusejit::jit
