// Stages 1 and 2 of the GPU build path; see gpu_build.h.
#include "jit/gpu_build.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "jit/hash.h"
#include "jit/kernel_abi.h"
#include "jit/nvrtc.h"

namespace fusejit::jit {
namespace {

// Appends `t` so that no two different sequences of strings append the same text (a file name
// may hold any byte).
void add_string(std::string& s, std::string_view t) {
  s += std::to_string(t.size());
  s.push_back(':');
  s.append(t);
  s.push_back('|');
}

void add_shape(std::string& s, const ir::Shape& shape) {
  s.push_back('[');
  for (const ir::Dim& d : shape) s += std::to_string(d.size) + "/" + std::to_string(d.sym) + ",";
  s += "]|";
}

void add_ids(std::string& s, char tag, const std::vector<ir::NodeId>& ids) {
  s.push_back(tag);
  for (ir::NodeId id : ids) s += std::to_string(id) + ",";
  s.push_back('|');
}

// Everything of node `id` code generation may read: op, dtype, shape (sizes and dims), operands,
// a constant's value, a leaf's slot, a reduction's attributes, name and place in the text.
void add_node(std::string& s, const ir::Graph& g, ir::NodeId id) {
  const ir::Node& n = g.node(id);
  uint64_t fbits = 0;
  std::memcpy(&fbits, &n.value.f, sizeof fbits);
  s += std::to_string(id) + "=" + std::string(ir::op_name(n.op)) + ":" + std::string(ir::dtype_name(n.dtype));
  add_shape(s, n.shape);
  for (int k = 0; k < n.nargs; ++k) s += std::to_string(n.args[static_cast<size_t>(k)]) + ",";
  s += "v" + std::string(ir::dtype_name(n.value.dtype)) + ":" + std::to_string(fbits) + ":" + std::to_string(n.value.i);
  s += "s" + std::to_string(n.slot) + "r" + std::to_string(n.red.axes) + "." + std::to_string(n.red.keepdim) + "." +
       std::to_string(n.red.correction) + "." + std::to_string(n.red.initial);
  s += "@" + std::to_string(n.loc.line) + "." + std::to_string(n.loc.col);
  add_string(s, n.name);
}

}  // namespace

// Everything generate_kernel reads of the graph and the group, the code generation options, and
// everything that changes the binary (mode, target, options): the group's structure with every
// attribute of its nodes (a reduction's axes and correction included), the iteration shape and
// reduced axes, the memory layout, the names and lines that appear in the source. A hash of a
// serialisation of them all, not of a chosen few: a field left out let two graphs that differ only
// there (sum(x, 0) and sum(x, 1)) share a kernel.
Hash128 structural_key(const ir::Graph& g, const ir::FusionGroup& grp, const GpuBuildOptions& o) {
  std::string s;
  s.reserve(96 * (grp.nodes.size() + grp.inputs.size()) + 256);
  add_string(s, kCodegenVersion);
  add_string(s, g.name);
  add_string(s, g.file);
  for (const ir::DimDecl& d : g.dims) {
    add_string(s, d.name);
    s += std::to_string(d.value) + "|";
  }
  add_string(s, o.target.name());
  s += o.codegen.fast_math ? "fast|" : "strict|";
  for (const std::string& opt : o.extra_options) add_string(s, opt);
  s += fmt::format("cg{}.{}.{}|", o.codegen.vectorize, o.codegen.index_bits, o.codegen.canonical_names);
  KernelLayout layout = compute_layout(g, grp);
  if (o.codegen.index_bits == 64) layout.index64 = true;  // the 64-bit variant of a small kernel
  add_string(s, layout_fingerprint(layout));
  add_ids(s, 'N', grp.nodes);
  add_ids(s, 'I', grp.inputs);
  add_ids(s, 'P', grp.params);
  add_ids(s, 'O', grp.outputs);
  add_shape(s, grp.iter_shape);
  s += "m" + std::to_string(grp.reduce_mask) + "." + std::to_string(grp.vector_rows) + "|";
  std::vector<ir::NodeId> read(grp.inputs.begin(), grp.inputs.end());  // every node the kernel names
  read.insert(read.end(), grp.params.begin(), grp.params.end());
  read.insert(read.end(), grp.outputs.begin(), grp.outputs.end());
  for (ir::NodeId id : grp.nodes) {
    read.push_back(id);
    const ir::Node& n = g.node(id);
    read.insert(read.end(), n.args.begin(), n.args.begin() + n.nargs);
  }
  std::sort(read.begin(), read.end());
  read.erase(std::unique(read.begin(), read.end()), read.end());
  for (ir::NodeId id : read) add_node(s, g, id);
  return xxh3_128(s);
}

namespace {

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
