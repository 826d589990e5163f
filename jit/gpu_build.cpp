// Stages 1 and 2 of the GPU build path; see gpu_build.h.
#include "jit/gpu_build.h"

#include <algorithm>
#include <cstring>

#include "jit/hash.h"
#include "jit/kernel_abi.h"
#include "jit/nvrtc.h"

namespace fusejit::jit {
namespace {

// The structure of a group that determines its generated source: ops, dtypes, operand wiring,
// constant bits, the memory layout (broadcast pattern, index width, forced or not), the graph and
// line names that appear in the source, the code generation options, and everything that changes
// the binary (mode, target, options).
Hash128 structural_key(const ir::Graph& g, const ir::FusionGroup& grp, const GpuBuildOptions& o) {
  std::string s;
  s.reserve(64 * (grp.nodes.size() + grp.inputs.size()) + 128);
  auto add = [&](std::string_view t) {
    s.append(t);
    s.push_back('|');
  };
  add(kCodegenVersion);
  add(g.name);
  add(g.file);
  add(o.target.name());
  add(o.codegen.fast_math ? "fast" : "strict");
  for (const std::string& opt : o.extra_options) add("opt:" + opt);
  for (const ir::Dim& d : grp.iter_shape)  // dim names appear in the source's header comment
    add(d.sym >= 0 && static_cast<size_t>(d.sym) < g.dims.size() ? g.dims[static_cast<size_t>(d.sym)].name : "-");
  KernelLayout layout = compute_layout(g, grp);
  if (o.codegen.index_bits == 64) layout.index64 = true;  // the 64-bit variant of a small kernel
  add(layout_fingerprint(layout));
  add(o.codegen.canonical_names ? "canonical" : "named");
  add(o.codegen.vectorize ? "vector" : "scalar");
  auto ref = [&](ir::NodeId id) -> std::string {
    const ir::Node& n = g.node(id);
    if (n.op == ir::Op::Const) {
      uint64_t bits = 0;
      if (ir::is_float(n.dtype)) std::memcpy(&bits, &n.value.f, 8);
      else bits = static_cast<uint64_t>(n.value.i);
      return "c" + std::string(ir::dtype_name(n.dtype)) + ":" + std::to_string(bits);
    }
    return "n" + std::to_string(id);  // ids are stable within the graph; the source names v<id>
  };
  for (ir::NodeId id : grp.inputs) add("in" + std::to_string(id) + ":" + std::string(ir::dtype_name(g.node(id).dtype)));
  for (ir::NodeId id : grp.params) add("p" + std::to_string(id) + ":" + std::string(ir::dtype_name(g.node(id).dtype)));
  for (ir::NodeId id : grp.nodes) {
    const ir::Node& n = g.node(id);
    std::string t = std::to_string(id) + "=" + std::string(ir::op_name(n.op)) + ":" + std::string(ir::dtype_name(n.dtype)) +
                    "@" + std::to_string(n.loc.line) + "'" + n.name + "'(";  // names appear in comments
    for (int k = 0; k < n.nargs; ++k) t += ref(n.args[k]) + ",";
    add(t + ")");
  }
  for (ir::NodeId id : grp.outputs) add("out" + std::to_string(id) + ":" + ref(id));
  return xxh3_128(s);
}

// The NVRTC request of a translation unit.
CompileRequest request_for(const TranslationUnit& tu, const GpuBuildOptions& o) {
  CompileRequest req;
  req.target = o.target;
  req.options = nvrtc_options_for(o.codegen.fast_math, tu.nvrtc_options, o.extra_options);
  return req;
}

KernelCache& cache_of(const GpuBuildOptions& o) { return o.cache ? *o.cache : KernelCache::global(); }

// One group of a fused plan: its own program and cache entry, found by its structure first.
CompiledKernel compile_group(const ir::Graph& g, const ir::FusionGroup& grp, const GpuBuildOptions& o) {
  CacheResult r = cache_of(o).get_or_build(
      structural_key(g, grp, o),
      [&] {
        GeneratedKernel k = generate_kernel(g, grp, o.codegen);
        const TranslationUnit tu = emit_translation_unit(std::span<const GeneratedKernel>(&k, 1));
        KernelCache::Generated gen;
        gen.inputs = make_key_inputs(tu.source, request_for(tu, o), kCodegenVersion);
        gen.label = k.name;
        gen.user_data = std::make_shared<const GeneratedKernel>(std::move(k));
        return gen;
      },
      [&](const KernelCache::Generated& gen) {
        return compile_cuda(gen.inputs.source, gen.label + ".cu", compile_request_of(gen.inputs));
      });
  auto k = std::static_pointer_cast<const GeneratedKernel>(r.kernel->user_data);
  FJ_CHECK(k != nullptr, "kernel cache returned no generated kernel");
  return {*k, r.kernel->binary, r.outcome, r.compile_ms, {}};
}

// Fused plan: its groups' programs compile at once where o.for_each starts threads (NVRTC runs
// one program per thread; a plan of several reduction kernels otherwise waits for each in turn).
CompiledPlan compile_each_group(const ir::Graph& g, const ir::Plan& plan, const GpuBuildOptions& o) {
  CompiledPlan out{o.target, std::vector<CompiledKernel>(plan.groups.size())};
  auto one = [&](size_t i) { out.kernels[i] = compile_group(g, plan.groups[i], o); };
  if (o.for_each && plan.groups.size() > 1) {
    o.for_each(plan.groups.size(), one);
  } else {
    for (size_t i = 0; i < plan.groups.size(); ++i) one(i);
  }
  return out;
}

// Unfused plan: every kernel in one program.
CompiledPlan compile_as_one_program(const ir::Graph& g, const ir::Plan& plan, const GpuBuildOptions& o) {
  CompiledPlan out{o.target, {}};
  std::vector<GeneratedKernel> kernels = generate_plan_kernels(g, plan, o.codegen);
  if (kernels.empty()) return out;
  const TranslationUnit tu = emit_translation_unit(kernels);
  const std::string label = (g.name.empty() ? std::string("graph") : g.name) + (plan.fused ? "_fused" : "_unfused");
  CacheResult r = compile_cached(cache_of(o), tu.source, label + ".cu", request_for(tu, o), kCodegenVersion, label);
  for (size_t i = 0; i < kernels.size(); ++i)
    out.kernels.push_back({std::move(kernels[i]), r.kernel->binary, r.outcome, i == 0 ? r.compile_ms : 0.0, {}});
  return out;
}

}  // namespace

std::vector<std::string> nvrtc_options_for(bool fast_math, std::span<const std::string> required,
                                           std::span<const std::string> extra) {
  std::vector<std::string> out = default_compile_options(fast_math);
  for (std::span<const std::string> list : {required, extra})
    for (const std::string& opt : list)
      if (std::find(out.begin(), out.end(), opt) == out.end()) out.push_back(opt);
  return out;
}

CompiledPlan compile_plan(const ir::Graph& g, const ir::Plan& plan, const GpuBuildOptions& options) {
  return plan.fused ? compile_each_group(g, plan, options) : compile_as_one_program(g, plan, options);
}

}  // namespace fusejit::jit
