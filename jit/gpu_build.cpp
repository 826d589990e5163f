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

// Feeds a structural key: every field code generation reads, into a streaming XXH3 (framed
// fields, so no two different sequences hash alike).
class KeyWriter {
 public:
  explicit KeyWriter(const ir::Graph& g) : g_(g) {}
  Hasher h;

  // A dim: a number written in the graph by its value (it appears in the source); a named dim by
  // its name and its size's class among the group's sizes (0, 1, or the n-th distinct other size,
  // as Python's duck sizing): code generation compares sizes (same_sizes, size-1 dims) but never
  // reads a named dim's value, which is a kernel argument, so a graph at new dim values of the same
  // pattern finds its kernels.
  void shape(const ir::Shape& s) {
    h.add_u64(s.size());
    for (const ir::Dim& d : s) {
      h.add_i64(d.sym).add_u64(size_class(d.size));
      if (d.sym < 0) h.add_i64(d.size);
      else h.add(static_cast<size_t>(d.sym) < g_.dims.size() ? g_.dims[static_cast<size_t>(d.sym)].name : "-");
    }
  }
  void ids(const std::vector<ir::NodeId>& v) {
    h.add_u64(v.size());
    for (ir::NodeId id : v) h.add_i64(id);
  }
  // Node `id`: op, dtype, shape, operands, a constant's value, a leaf's slot, a reduction's
  // attributes, its name and line (the source's comments show both).
  void node(ir::NodeId id) {
    const ir::Node& n = g_.node(id);
    uint64_t fbits = 0;
    std::memcpy(&fbits, &n.value.f, sizeof fbits);
    h.add_i64(id).add_u64(static_cast<uint64_t>(n.op)).add_u64(static_cast<uint64_t>(n.dtype));
    shape(n.shape);
    h.add_u64(n.nargs);
    for (int k = 0; k < n.nargs; ++k) h.add_i64(n.args[static_cast<size_t>(k)]);
    h.add_u64(static_cast<uint64_t>(n.value.dtype)).add_u64(fbits).add_i64(n.value.i).add_i64(n.slot);
    h.add_u64(n.red.axes).add_bool(n.red.keepdim).add_i64(n.red.correction).add_bool(n.red.initial);
    h.add_u64(n.loc.line).add(n.name);
  }

 private:
  uint64_t size_class(int64_t size) {
    if (size <= 1) return static_cast<uint64_t>(size);
    auto it = std::find(sizes_.begin(), sizes_.end(), size);
    if (it == sizes_.end()) it = sizes_.insert(sizes_.end(), size);
    return 2 + static_cast<uint64_t>(it - sizes_.begin());
  }
  const ir::Graph& g_;
  std::vector<int64_t> sizes_;
};

}  // namespace

// Everything generate_kernel reads of the graph and the group, the code generation options, and
// everything that changes the binary (mode, target, options): the group's structure with every
// attribute of its nodes (a reduction's axes and correction included), the iteration shape and
// reduced axes, the memory layout, the names and lines that appear in the source. Every field, not
// a chosen few: a field left out let two graphs that differ only there (sum(x, 0) and sum(x, 1))
// share a kernel.
Hash128 structural_key(const ir::Graph& g, const ir::FusionGroup& grp, const GpuBuildOptions& o) {
  KeyWriter w(g);
  Hasher& h = w.h;
  // The file as comments show it (a hit returns the source of the kernel it stands for).
  const std::string_view file = std::string_view(g.file).substr(g.file.find_last_of('/') + 1);
  h.add(kCodegenVersion).add(g.name).add(file).add(o.target.name()).add_bool(o.codegen.fast_math);
  h.add_u64(o.extra_options.size());
  for (const std::string& opt : o.extra_options) h.add(opt);
  h.add_bool(o.codegen.vectorize).add_i64(o.codegen.index_bits).add_bool(o.codegen.canonical_names);
  KernelLayout layout = compute_layout(g, grp);
  if (o.codegen.index_bits == 64) layout.index64 = true;  // the 64-bit variant of a small kernel
  h.add(layout_fingerprint(layout));
  w.ids(grp.nodes);
  w.ids(grp.inputs);
  w.ids(grp.params);
  w.ids(grp.outputs);
  w.shape(grp.iter_shape);
  h.add_u64(grp.reduce_mask).add_bool(grp.vector_rows);
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
  for (ir::NodeId id : read) w.node(id);
  return h.digest();
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
  for (const std::string& opt : required)
    if (std::find(out.begin(), out.end(), opt) == out.end()) out.push_back(opt);
  // The caller's as given, repeats included: dropping one would re-pair "-Xptxas LIST" forms, so
  // that a LIST checked as ptxas's became an NVRTC option (a reviewer's find: --fmad=true so).
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

CompiledPlan compile_plan(const ir::Graph& g, const ir::Plan& plan, const GpuBuildOptions& options) {
  return plan.fused ? compile_each_group(g, plan, options) : compile_as_one_program(g, plan, options);
}

}  // namespace fusejit::jit
