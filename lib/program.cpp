// fusejit::Program: rewrite, plan, generate, compile (through the kernel cache), launch.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "ir/passes/plan_fusion.h"
#include "ir/passes/plan_report.h"
#include "ir/printer.h"
#include "jit/arch.h"
#include "jit/cache.h"
#include "jit/codegen.h"
#include "jit/gpu_module.h"
#include "jit/hash.h"
#include "jit/host_compile.h"
#include "jit/kernel_abi.h"
#include "jit/nvrtc.h"
#include "lib/internal.h"
#include "lib/program_impl.h"
#include "fusejit/report.h"

namespace fusejit {
namespace {

namespace fs = std::filesystem;

// The structure of a group that determines its generated source: ops, dtypes, operand wiring,
// constant bits, the memory layout (broadcast pattern, index width), the graph and line names
// that appear in the source, and the mode. Hashing it lets a memory hit skip code generation
// (ArrayFire's JIT does the same).
jit::Hash128 structural_key(const ir::Graph& g, const ir::FusionGroup& grp, bool fast_math, const std::string& target,
                            const std::vector<std::string>& extra_options) {
  std::string s;
  s.reserve(64 * (grp.nodes.size() + grp.inputs.size()) + 128);
  auto add = [&](std::string_view t) {
    s.append(t);
    s.push_back('|');
  };
  add(kCodegenVersion);
  add(g.name);
  add(g.file);
  add(target);
  add(fast_math ? "fast" : "strict");
  for (const std::string& opt : extra_options) add("opt:" + opt);
  for (const ir::Dim& d : grp.iter_shape)  // dim names appear in the source's header comment
    add(d.sym >= 0 && static_cast<size_t>(d.sym) < g.dims.size() ? g.dims[static_cast<size_t>(d.sym)].name : "-");
  add(jit::layout_fingerprint(jit::compute_layout(g, grp)));
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
  return jit::xxh3_128(s);
}

// Each node as `fusejit plan` names it (ir::node_text).
std::vector<std::string> node_lines(const ir::Graph& g, const ir::FusionGroup& grp) {
  std::vector<std::string> out;
  for (ir::NodeId id : grp.nodes) out.push_back(ir::node_text(g, id));
  return out;
}

KernelInfo kernel_info(const ir::Graph& g, const ir::FusionGroup& grp, const jit::GeneratedKernel& k) {
  KernelInfo info;
  info.name = k.name;
  info.source = k.source;
  info.ops = node_lines(g, grp);
  info.elements = ir::num_elements(grp.iter_shape);
  ir::GroupTraffic t = ir::group_traffic(g, grp);
  info.read_bytes = t.read_bytes;
  info.write_bytes = t.write_bytes;
  return info;
}

const char* outcome_name(jit::CacheOutcome o) {
  switch (o) {
    case jit::CacheOutcome::MemoryHit: return "memory";
    case jit::CacheOutcome::DiskHit: return "disk";
    case jit::CacheOutcome::Compiled: return "compiled";
  }
  return "compiled";
}

jit::KernelCache& cache_for(const Options& o) {
  if (o.cache_dir.empty() && o.disk_cache) {
    static std::once_flag routed;  // the library never prints: route the cache's warnings
    std::call_once(routed, [] { jit::KernelCache::global().set_warning_handler([](const std::string& m) { warn(m); }); });
    return jit::KernelCache::global();
  }
  // A cache per distinct configuration, kept for the process (like the global one).
  static std::mutex mu;
  static std::vector<std::pair<std::string, std::unique_ptr<jit::KernelCache>>> caches;
  std::string id = (o.disk_cache ? "disk:" : "nodisk:") + o.cache_dir;
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [k, c] : caches)
    if (k == id) return *c;
  jit::CacheConfig cfg;
  if (!o.cache_dir.empty()) cfg.dir = fs::path(o.cache_dir);
  cfg.disk = o.disk_cache;
  cfg.warn = [](const std::string& m) { warn(m); };
  caches.emplace_back(id, std::make_unique<jit::KernelCache>(cfg));
  return *caches.back().second;
}

void write_text(const fs::path& p, std::string_view text) {
  std::ofstream f(p, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) throw ir::UserError("cannot write '" + p.string() + "'");
}

// Writes DIR/<kernel>.cu (a complete translation unit: prelude + kernel), DIR/<kernel>.<cubin|ptx>
// when a binary is given, and returns the index entry.
nlohmann::json dump_kernel(const fs::path& dir, const std::string& plan, const jit::GeneratedKernel& k,
                           const KernelInfo& info, const std::vector<char>* binary, const std::string& ext) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ir::UserError("cannot create dump folder '" + dir.string() + "': " + ec.message());
  jit::GeneratedKernel one = k;
  jit::TranslationUnit tu = jit::emit_translation_unit(std::span<const jit::GeneratedKernel>(&one, 1));
  write_text(dir / (k.name + ".cu"), tu.source);
  nlohmann::json e = {{"plan", plan}, {"kernel", k.name}, {"cu", k.name + ".cu"}, {"elements", info.elements},
                      {"read_bytes", info.read_bytes}, {"write_bytes", info.write_bytes}, {"ops", info.ops},
                      {"index64", k.index64}, {"vector_width", k.vector_width}, {"cache", info.cache}};
  if (binary) {
    size_t n = binary->size();
    if (ext == "ptx" && n && (*binary)[n - 1] == '\0') --n;  // PTX text without its terminator
    write_text(dir / (k.name + "." + ext), std::string_view(binary->data(), n));
    e[ext] = k.name + "." + ext;
  }
  return e;
}

// Options::nvrtc_options may not choose the target: --arch / Options::arch does, and the output is
// labelled with it (an -arch here would silently build for another GPU).
void check_extra_nvrtc_options(const std::vector<std::string>& extra) {
  for (const std::string& o : extra)
    for (const char* p : {"-arch", "--gpu-architecture", "-gpu-architecture", "--gpu-name"})
      if (o.rfind(p, 0) == 0)
        throw ir::UserError("NVRTC option '" + o + "' chooses the target; use --arch (Options::arch) instead");
}

// NVRTC options of a GPU program: fusejit's defaults for the mode, those the generated code
// requires, then the caller's extra options (Options::nvrtc_options), each once, in that order.
std::vector<std::string> gpu_compile_options(bool fast_math, const std::vector<std::string>& required,
                                             const std::vector<std::string>& extra) {
  std::vector<std::string> out = jit::default_compile_options(fast_math);
  for (const std::vector<std::string>* list : {&required, &extra})
    for (const std::string& opt : *list)
      if (std::find(out.begin(), out.end(), opt) == out.end()) out.push_back(opt);
  return out;
}

struct GpuCompiled {
  std::vector<jit::GpuKernelSpec> specs;
  std::vector<jit::GeneratedKernel> kernels;
  std::vector<std::shared_ptr<const std::vector<char>>> images;
};

// Fused plan: each kernel its own NVRTC program and cache entry (a memory hit skips codegen).
GpuCompiled compile_fused_gpu(const ir::Graph& g, const ir::Plan& plan, const jit::Target& target, const Options& o,
                              std::vector<KernelInfo>& infos) {
  GpuCompiled out;
  jit::KernelCache& cache = cache_for(o);
  jit::CodegenOptions cg;
  cg.fast_math = o.fast_math;
  for (const ir::FusionGroup& grp : plan.groups) {
    jit::Hash128 skey = structural_key(g, grp, o.fast_math, target.name(), o.nvrtc_options);
    jit::CacheResult r = cache.get_or_build(
        skey,
        [&] {
          jit::GeneratedKernel k = jit::generate_kernel(g, grp, cg);
          jit::TranslationUnit tu = jit::emit_translation_unit(std::span<const jit::GeneratedKernel>(&k, 1));
          jit::CompileRequest req;
          req.target = target;
          req.options = gpu_compile_options(o.fast_math, tu.nvrtc_options, o.nvrtc_options);
          jit::KernelCache::Generated gen;
          gen.inputs = jit::make_key_inputs(tu.source, req, kCodegenVersion);
          gen.label = k.name;
          gen.user_data = std::make_shared<const jit::GeneratedKernel>(std::move(k));
          return gen;
        },
        [&](const jit::KernelCache::Generated& gen) {
          return jit::compile_cuda(gen.inputs.source, gen.label + ".cu", jit::compile_request_of(gen.inputs));
        });
    auto k = std::static_pointer_cast<const jit::GeneratedKernel>(r.kernel->user_data);
    FJ_CHECK(k != nullptr, "kernel cache returned no generated kernel");
    KernelInfo info = kernel_info(g, grp, *k);
    info.cache = outcome_name(r.outcome);
    info.compile_ms = r.compile_ms;
    infos.push_back(std::move(info));
    out.specs.push_back({k->name, k->signature, r.kernel->binary, target.name()});
    out.kernels.push_back(*k);
    out.images.push_back(r.kernel->binary);
  }
  return out;
}

// Unfused plan: every per-node kernel in ONE NVRTC program (one compile, one cache entry), so the
// comparison does not cost N compiles.
GpuCompiled compile_unfused_gpu(const ir::Graph& g, const ir::Plan& plan, const jit::Target& target, const Options& o,
                                std::vector<KernelInfo>& infos) {
  GpuCompiled out;
  out.kernels = jit::generate_plan_kernels(g, plan, unfused_codegen_options());
  if (out.kernels.empty()) return out;
  jit::TranslationUnit tu = jit::emit_translation_unit(out.kernels);
  jit::CompileRequest req;
  req.target = target;
  req.options = gpu_compile_options(false, tu.nvrtc_options, o.nvrtc_options);
  std::string label = (g.name.empty() ? std::string("graph") : g.name) + "_unfused";
  jit::CacheResult r = jit::compile_cached(cache_for(o), tu.source, label + ".cu", req, kCodegenVersion, label);
  for (size_t i = 0; i < plan.groups.size(); ++i) {
    KernelInfo info = kernel_info(g, plan.groups[i], out.kernels[i]);
    info.cache = outcome_name(r.outcome);
    info.compile_ms = i == 0 ? r.compile_ms : 0.0;  // one program: its time is counted once
    infos.push_back(std::move(info));
    out.specs.push_back({out.kernels[i].name, out.kernels[i].signature, r.kernel->binary, target.name()});
    out.images.push_back(r.kernel->binary);
  }
  return out;
}

void dump_all(const Program::Impl& p, const std::vector<jit::GeneratedKernel>& fk, const std::vector<jit::GeneratedKernel>& uk,
              const std::vector<std::shared_ptr<const std::vector<char>>>& fb,
              const std::vector<std::shared_ptr<const std::vector<char>>>& ub, const std::string& ext) {
  fs::path dir(p.options.dump_dir);
  nlohmann::json index = {{"graph", p.graph.name()}, {"target", p.target}, {"fast_math", p.options.fast_math},
                          {"kernels", nlohmann::json::array()}};
  for (size_t i = 0; i < fk.size(); ++i)
    index["kernels"].push_back(dump_kernel(dir, "fused", fk[i], p.fused_kernels[i], fb.empty() ? nullptr : fb[i].get(), ext));
  for (size_t i = 0; i < uk.size(); ++i)
    index["kernels"].push_back(dump_kernel(dir, "unfused", uk[i], p.unfused_kernels[i], ub.empty() ? nullptr : ub[i].get(), ext));
  write_text(dir / "index.json", index.dump(2) + "\n");
}

void compile_cpu(Program::Impl& p) {
  jit::CodegenOptions cg;
  cg.fast_math = p.options.fast_math;
  p.cpu_fused = std::make_shared<jit::CpuProgram>(jit::prepare_cpu_program(p.rewritten.impl().graph, p.fused_plan, cg));
  p.cpu_unfused =
      std::make_shared<jit::CpuProgram>(jit::prepare_cpu_program(p.graph.impl().graph, p.unfused_plan, unfused_codegen_options()));
  jit::HostCompileOptions ho;
  ho.cache_dir = p.options.cache_dir;
  ho.disk_cache = p.options.disk_cache;
  if (p.options.fast_math) {
    // Fast-math and strict kernels need different compile modes: one shared object each.
    jit::CpuProgram* f[1] = {p.cpu_fused.get()};
    jit::CpuProgram* u[1] = {p.cpu_unfused.get()};
    jit::compile_cpu_programs(f, ho);
    jit::compile_cpu_programs(u, ho);
  } else {
    jit::CpuProgram* both[2] = {p.cpu_fused.get(), p.cpu_unfused.get()};
    jit::compile_cpu_programs(both, ho);
  }
  if (!p.options.arch.empty())
    warn("--arch " + p.options.arch + " has no effect on the CPU path (no GPU is used)");
  if (!p.options.nvrtc_options.empty()) warn("NVRTC options have no effect on the CPU path (no GPU is used)");
  auto fill = [](const jit::CpuProgram& cp, std::vector<KernelInfo>& infos) {
    for (size_t i = 0; i < cp.plan.groups.size(); ++i) {
      KernelInfo info = kernel_info(cp.graph, cp.plan.groups[i], cp.kernels[i]);
      info.cache = cp.compile.memory_hit ? "memory" : cp.compile.disk_hit ? "disk" : "compiled";
      info.compile_ms = i == 0 ? cp.compile.compile_ms : 0.0;
      infos.push_back(std::move(info));
    }
  };
  fill(*p.cpu_fused, p.fused_kernels);
  fill(*p.cpu_unfused, p.unfused_kernels);
  // In strict mode both plans are one host shared object: count its compile time once.
  if (!p.options.fast_math && !p.unfused_kernels.empty() && !p.fused_kernels.empty()) p.unfused_kernels[0].compile_ms = 0.0;
  p.target = "host C++ (" + std::string(std::getenv("CXX") ? std::getenv("CXX") : "c++") +
             ", -ffp-contract=off -fno-tree-vectorize)";
  if (!p.options.dump_dir.empty()) dump_all(p, p.cpu_fused->kernels, p.cpu_unfused->kernels, {}, {}, "");
}

// An explicit --arch / Options::arch, checked against this NVRTC. Its errors are about the option,
// not the graph file, so they carry no file name.
jit::ArchDecision explicit_target(const std::string& arch) {
  return translate_errors([&] { return jit::check_explicit_target(jit::parse_target(arch), jit::supported_archs()); });
}

void compile_gpu(Program::Impl& p) {
  const jit::DeviceInfo& dev = p.device->info();
  jit::ArchDecision d = p.options.arch.empty()
                            ? jit::choose_target_for_device(jit::Arch{dev.cc_major, dev.cc_minor})
                            : explicit_target(p.options.arch);
  if (!d.warning.empty()) warn(d.warning);
  p.target = d.target.name() + (d.target.kind == jit::OutputKind::Cubin ? " (CUBIN)" : " (PTX, JIT-compiled by the driver)");
  GpuCompiled f = compile_fused_gpu(p.rewritten.impl().graph, p.fused_plan, d.target, p.options, p.fused_kernels);
  GpuCompiled u = compile_unfused_gpu(p.graph.impl().graph, p.unfused_plan, d.target, p.options, p.unfused_kernels);
  if (!p.options.dump_dir.empty()) dump_all(p, f.kernels, u.kernels, f.images, u.images, jit::to_string(d.target.kind));
  p.gpu_fused = std::make_shared<jit::GpuProgram>(jit::GpuProgram::load(p.device, p.rewritten.impl().graph, p.fused_plan, f.specs));
  p.gpu_unfused = std::make_shared<jit::GpuProgram>(jit::GpuProgram::load(p.device, p.graph.impl().graph, p.unfused_plan, u.specs));
}

}  // namespace

std::shared_ptr<jit::DeviceContext> open_device(int ordinal, std::string* why_not) {
  auto drv = jit::Driver::get();
  if (!drv->available()) {
    *why_not = drv->unavailable_reason();
    return nullptr;
  }
  try {
    return jit::DeviceContext::open(ordinal, drv);
  } catch (const jit::DriverError& e) {
    *why_not = e.what();
    return nullptr;
  }
}

std::vector<ir::Scalar> param_values(const ir::Graph& g, std::span<const Scalar> params) {
  std::vector<ir::Scalar> out;
  if (params.empty()) {
    for (const ir::ParamDecl& p : g.params) out.push_back(p.default_value);
    return out;
  }
  if (params.size() != g.params.size())
    throw ir::UserError("expected " + std::to_string(g.params.size()) + " param value(s), got " + std::to_string(params.size()));
  for (size_t k = 0; k < params.size(); ++k) out.push_back(to_ir_scalar(params[k], g.node(g.params[k].node).dtype));
  return out;
}

namespace {
// Rewrites and plans (fused over the rewritten graph, unfused over the graph as written).
std::shared_ptr<Program::Impl> rewrite_and_plan(const Graph& graph, const Options& options) {
  auto p = std::make_shared<Program::Impl>(graph);
  p->options = options;
  if (const char* e = std::getenv("FUSEJIT_DISABLE_CACHE"); e && *e && std::string(e) != "0") p->options.disk_cache = false;
  const ir::Graph& g = graph.impl().graph;
  ir::RewriteOptions ro;
  ro.fast_math = options.fast_math;
  p->rewrite = ir::rewrite(g, ro);
  auto rimpl = std::make_shared<Graph::Impl>();
  rimpl->graph = p->rewrite.graph;
  p->rewritten = Graph(rimpl);
  p->fused_plan = ir::plan_fusion(p->rewritten.impl().graph);
  p->unfused_plan = ir::plan_unfused(g);
  return p;
}
}  // namespace

std::vector<KernelInfo> compile_to_dir(const Graph& graph, const std::string& arch, const std::string& out_dir, bool fast_math,
                                       const Options& cache) {
  return translate_errors([&] {
    Options o;
    o.cache_dir = cache.cache_dir;
    o.disk_cache = cache.disk_cache;
    o.nvrtc_options = cache.nvrtc_options;
    o.fast_math = fast_math;
    o.dump_dir = out_dir;
    o.arch = arch;
    translate_errors([&] { check_extra_nvrtc_options(o.nvrtc_options); });
    jit::ArchDecision d = explicit_target(arch);
    std::shared_ptr<Program::Impl> p = rewrite_and_plan(graph, o);
    p->target = d.target.name();
    GpuCompiled f = compile_fused_gpu(p->rewritten.impl().graph, p->fused_plan, d.target, p->options, p->fused_kernels);
    GpuCompiled u = compile_unfused_gpu(p->graph.impl().graph, p->unfused_plan, d.target, p->options, p->unfused_kernels);
    dump_all(*p, f.kernels, u.kernels, f.images, u.images, jit::to_string(d.target.kind));
    std::vector<KernelInfo> all = p->fused_kernels;
    all.insert(all.end(), p->unfused_kernels.begin(), p->unfused_kernels.end());
    return all;
  }, graph.impl().graph.file, graph.impl().source);
}

Program Program::compile(const Graph& graph, const Options& options) {
  translate_errors([&] { check_extra_nvrtc_options(options.nvrtc_options); });
  return translate_errors([&] {
    std::shared_ptr<Impl> p = rewrite_and_plan(graph, options);

    if (options.backend != Backend::Cpu) {
      std::string why;
      p->device = open_device(options.device, &why);
      if (!p->device && options.backend == Backend::Cuda)
        throw jit::DriverError(jit::DriverErrorKind::NoDevice, "the CUDA backend was requested but no GPU is usable: " + why);
      if (!p->device) p->backend_note = "no GPU: " + why;
    }
    p->backend = p->device ? Backend::Cuda : Backend::Cpu;
    if (p->backend == Backend::Cuda) compile_gpu(*p);
    else compile_cpu(*p);
    return Program(std::move(p));
  }, graph.impl().graph.file, graph.impl().source);
}

Backend Program::backend() const { return impl_->backend; }
std::string Program::target() const { return impl_->target; }
bool Program::fast_math() const { return impl_->options.fast_math; }
const Graph& Program::graph() const { return impl_->graph; }
const Graph& Program::rewritten() const { return impl_->rewritten; }
const std::vector<KernelInfo>& Program::kernels(PlanKind kind) const {
  return kind == PlanKind::Fused ? impl_->fused_kernels : impl_->unfused_kernels;
}

std::string Program::plan_text() const {
  std::vector<std::string> names;
  for (const KernelInfo& k : impl_->fused_kernels) names.push_back(k.name);
  return ir::format_plan_text(impl_->rewrite, impl_->fused_plan, impl_->unfused_plan, &impl_->graph.impl().graph, names);
}

std::string Program::rewrite_summary() const {
  std::string s = impl_->rewrite.fast_math ? "rewrites (fast-math mode):" : "rewrites (strict mode):";
  int shown = 0;
  for (const ir::RuleCount& c : impl_->rewrite.counts)
    if (c.count) {
      s += " " + c.rule + " x" + std::to_string(c.count) + ";";
      ++shown;
    }
  if (!shown) s += " none fired";
  if (impl_->rewrite.hit_cap) s += " (iteration cap hit: " + impl_->rewrite.diagnostic + ")";
  return s;
}

namespace {
bool same_dims(const Graph& g, const DimValues& dims) {
  DimValues cur = g.dims();
  for (const auto& [name, v] : dims) {
    bool found = false;
    for (const auto& [n2, v2] : cur)
      if (n2 == name) {
        found = true;
        if (v2 != v) return false;
      }
    if (!found) return false;  // let with_dims() report the unknown name
  }
  return true;
}
}  // namespace

void Program::launch(std::span<const void* const> inputs, std::span<void* const> outputs, std::span<const Scalar> params,
                     void* stream, PlanKind kind, const DimValues& dims) const {
  if (!dims.empty() && !same_dims(impl_->graph, dims)) {
    // Other dims: same kernels (sizes are kernel arguments), found in the in-memory cache.
    Options o = impl_->options;
    o.backend = Backend::Cuda;
    Program::compile(impl_->graph.with_dims(dims), o).launch(inputs, outputs, params, stream, kind);
    return;
  }
  translate_errors([&] {
    if (impl_->backend != Backend::Cuda)
      throw ir::UserError("Program::launch needs the CUDA backend; this program was compiled for the CPU (use run())");
    const ir::Graph& g = impl_->graph.impl().graph;
    if (inputs.size() != g.inputs.size() || outputs.size() != g.outputs.size())
      throw ir::UserError("launch: expected " + std::to_string(g.inputs.size()) + " input and " +
                          std::to_string(g.outputs.size()) + " output pointer(s), got " + std::to_string(inputs.size()) +
                          " and " + std::to_string(outputs.size()));
    std::vector<jit::cu::DevicePtr> in, out;
    for (const void* p : inputs) in.push_back(reinterpret_cast<jit::cu::DevicePtr>(p));
    for (void* p : outputs) out.push_back(reinterpret_cast<jit::cu::DevicePtr>(p));
    std::vector<ir::Scalar> pv = param_values(g, params);
    const jit::GpuProgram& prog = kind == PlanKind::Fused ? *impl_->gpu_fused : *impl_->gpu_unfused;
    prog.enqueue(in, out, pv, static_cast<jit::cu::Stream>(stream));
  });
}

std::vector<HostTensor> Program::run(const std::vector<HostTensor>& inputs, std::span<const Scalar> params, PlanKind kind,
                                     const DimValues& dims) const {
  if (!dims.empty() && !same_dims(impl_->graph, dims))
    return Program::compile(impl_->graph.with_dims(dims), impl_->options).run(inputs, params, kind);
  return translate_errors([&] {
    const ir::Graph& g = impl_->graph.impl().graph;
    if (inputs.size() != g.inputs.size())
      throw ir::UserError("run: expected " + std::to_string(g.inputs.size()) + " input tensor(s), got " +
                          std::to_string(inputs.size()));
    for (size_t k = 0; k < inputs.size(); ++k) {
      TensorInfo want = tensor_info(g, g.inputs[k], g.node(g.inputs[k]).name);
      if (inputs[k].dtype != want.dtype || inputs[k].shape != want.shape ||
          static_cast<int64_t>(inputs[k].data.size()) != want.bytes())
        throw ir::UserError("input '" + want.name + "': expected " + std::string(dtype_name(want.dtype)) +
                            ir::shape_to_string(g.node(g.inputs[k]).shape) + " (" + std::to_string(want.bytes()) +
                            " bytes), found " + std::string(dtype_name(inputs[k].dtype)) + " with " +
                            std::to_string(inputs[k].data.size()) + " bytes");
    }
    std::vector<ir::Scalar> pv = param_values(g, params);
    std::vector<HostTensor> result;
    auto out_info = [&](size_t k) { return tensor_info(g, g.outputs[k].node, g.outputs[k].name); };
    if (impl_->backend == Backend::Cpu) {
      std::vector<jit::HostBuffer> bufs;
      for (const HostTensor& t : inputs) bufs.emplace_back(t.data.data(), t.data.size());
      const jit::CpuProgram& prog = kind == PlanKind::Fused ? *impl_->cpu_fused : *impl_->cpu_unfused;
      jit::CpuRunResult r = jit::run_cpu_program(prog, bufs, pv);
      for (size_t k = 0; k < r.outputs.size(); ++k) {
        TensorInfo info = out_info(k);
        HostTensor t{info.dtype, info.shape, {}};
        t.data.resize(r.outputs[k].size());
        std::memcpy(t.data.data(), r.outputs[k].data(), r.outputs[k].size());
        result.push_back(std::move(t));
      }
      return result;
    }
    // GPU: copy in, run on a private stream, copy back.
    const jit::DeviceContext& dc = *impl_->device;
    jit::DeviceContext::Scope scope(dc);
    const jit::DriverApi& api = dc.api();
    jit::cu::Stream stream = nullptr;
    dc.driver().check(api.cuStreamCreate(&stream, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
    struct StreamGuard {
      const jit::DriverApi& api;
      jit::cu::Stream s;
      ~StreamGuard() { api.cuStreamDestroy(s); }
    } guard{api, stream};
    std::vector<jit::DeviceBuffer> din, dout;
    std::vector<jit::cu::DevicePtr> pin, pout;
    for (size_t k = 0; k < inputs.size(); ++k) {
      din.emplace_back(impl_->device, inputs[k].data.size(), "input " + g.node(g.inputs[k]).name);
      pin.push_back(din.back().ptr());
      if (!inputs[k].data.empty())
        dc.driver().check(api.cuMemcpyHtoDAsync(din.back().ptr(), inputs[k].data.data(), inputs[k].data.size(), stream),
                          "cuMemcpyHtoDAsync");
    }
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      TensorInfo info = out_info(k);
      dout.emplace_back(impl_->device, static_cast<size_t>(info.bytes()), "output " + info.name);
      pout.push_back(dout.back().ptr());
    }
    const jit::GpuProgram& prog = kind == PlanKind::Fused ? *impl_->gpu_fused : *impl_->gpu_unfused;
    prog.enqueue(pin, pout, pv, stream);
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      TensorInfo info = out_info(k);
      HostTensor t{info.dtype, info.shape, {}};
      t.data.resize(static_cast<size_t>(info.bytes()));
      if (!t.data.empty())
        dc.driver().check(api.cuMemcpyDtoHAsync(t.data.data(), pout[k], t.data.size(), stream), "cuMemcpyDtoHAsync");
      result.push_back(std::move(t));
    }
    dc.driver().check(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
    return result;
  });
}

}  // namespace fusejit
