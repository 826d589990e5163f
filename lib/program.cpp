// fusejit::Program, compiling: rewrite, plan, generate, compile (through the kernel cache), load.
// Running is lib/program_run.cpp.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "ir/passes/plan_fusion.h"
#include "ir/passes/plan_report.h"
#include "jit/arch.h"
#include "jit/cache.h"
#include "jit/codegen.h"
#include "jit/gpu_build.h"
#include "jit/host_compile.h"
#include "lib/program_impl.h"

namespace fusejit {
namespace {

namespace fs = std::filesystem;

// Code generation options of the unfused baseline: always strict (it is what fast mode is compared
// with), and canonical names so nodes that differ only in their ids share one kernel (a
// 50,000-node chain compiles a handful of kernels, not 50,000).
jit::CodegenOptions unfused_codegen_options() {
  jit::CodegenOptions cg;
  cg.canonical_names = true;
  return cg;
}

jit::CodegenOptions codegen_options(PlanKind kind, const Options& o) {
  if (kind == PlanKind::Unfused) return unfused_codegen_options();
  jit::CodegenOptions cg;
  cg.fast_math = o.fast_math;
  return cg;
}

std::vector<std::string> node_lines(const ir::Graph& g, const ir::FusionGroup& grp) {
  std::vector<std::string> out;
  for (ir::NodeId id : grp.nodes) {
    const ir::Node& n = g.node(id);
    std::string t = "v" + std::to_string(id) + " = " + std::string(ir::op_name(n.op)) + "(";
    for (int k = 0; k < n.nargs; ++k) t += (k ? ", v" : "v") + std::to_string(n.args[k]);
    if (n.op == ir::Op::Cast) t += ", " + std::string(ir::dtype_name(n.dtype));
    out.push_back(t + ")");
  }
  return out;
}

CacheOutcome outcome_of(jit::CacheOutcome o) {
  switch (o) {
    case jit::CacheOutcome::MemoryHit: return CacheOutcome::MemoryHit;
    case jit::CacheOutcome::DiskHit: return CacheOutcome::DiskHit;
    case jit::CacheOutcome::Compiled: return CacheOutcome::Compiled;
  }
  return CacheOutcome::Compiled;
}

KernelInfo kernel_info(const ir::Graph& g, const ir::FusionGroup& grp, const jit::GeneratedKernel& k,
                       CacheOutcome outcome, double compile_ms) {
  KernelInfo info;
  info.name = k.name;
  info.source = k.source;
  info.ops = node_lines(g, grp);
  info.elements = ir::num_elements(grp.iter_shape);
  const ir::GroupTraffic t = ir::group_traffic(g, grp);
  info.read_bytes = t.read_bytes;
  info.write_bytes = t.write_bytes;
  info.cache = outcome;
  info.compile_ms = compile_ms;
  return info;
}

// The process-wide cache of the folder the options name (jit/cache.h): GPU kernels and CPU host
// modules of one folder share its disk store.
jit::KernelCache& cache_for(const Options& o) { return jit::KernelCache::shared(o.cache_dir, o.disk_cache); }

// The library never prints: the disk store's warnings go to the warning handler.
void route_cache_warnings() {
  static std::once_flag routed;
  std::call_once(routed, [] { jit::set_cache_warning_handler([](const std::string& m) { warn(m); }); });
}

// ---- --dump-dir / compile_to_dir ---------------------------------------------------------------

void write_text(const fs::path& p, std::string_view text) {
  std::ofstream f(p, std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f) throw ir::UserError("cannot write '" + p.string() + "'");
}

// One kernel to dump: its code, what the program reports of it, and its binary (nullptr on the CPU).
struct DumpedKernel {
  const jit::GeneratedKernel* kernel;
  const KernelInfo* info;
  const std::vector<char>* binary;
};

// Writes DIR/<kernel>.cu (a complete translation unit: prelude + kernel), DIR/<kernel>.<cubin|ptx>
// when a binary is given, and returns the index entry.
nlohmann::json dump_kernel(const fs::path& dir, const std::string& plan, const DumpedKernel& d, const std::string& ext) {
  const jit::GeneratedKernel& k = *d.kernel;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ir::UserError("cannot create dump folder '" + dir.string() + "': " + ec.message());
  jit::TranslationUnit tu = jit::emit_translation_unit(std::span<const jit::GeneratedKernel>(&k, 1));
  write_text(dir / (k.name + ".cu"), tu.source);
  nlohmann::json e = {{"plan", plan}, {"kernel", k.name}, {"cu", k.name + ".cu"}, {"elements", d.info->elements},
                      {"read_bytes", d.info->read_bytes}, {"write_bytes", d.info->write_bytes}, {"ops", d.info->ops},
                      {"index64", k.index64}, {"vector_width", k.vector_width},
                      {"cache", cache_outcome_name(d.info->cache)}};
  if (d.binary) {
    size_t n = d.binary->size();
    if (ext == "ptx" && n && (*d.binary)[n - 1] == '\0') --n;  // PTX text without its terminator
    write_text(dir / (k.name + "." + ext), std::string_view(d.binary->data(), n));
    e[ext] = k.name + "." + ext;
  }
  return e;
}

// Writes every kernel of both plans and index.json into Options::dump_dir.
void dump_all(const Program::Impl& p, const std::vector<DumpedKernel>& fused, const std::vector<DumpedKernel>& unfused,
              const std::string& ext) {
  fs::path dir(p.options.dump_dir);
  nlohmann::json index = {{"graph", p.graph.name()}, {"target", p.target}, {"fast_math", p.options.fast_math},
                          {"kernels", nlohmann::json::array()}};
  for (const DumpedKernel& d : fused) index["kernels"].push_back(dump_kernel(dir, "fused", d, ext));
  for (const DumpedKernel& d : unfused) index["kernels"].push_back(dump_kernel(dir, "unfused", d, ext));
  write_text(dir / "index.json", index.dump(2) + "\n");
}

std::vector<DumpedKernel> dumped(const jit::CompiledPlan& c, const std::vector<KernelInfo>& infos) {
  std::vector<DumpedKernel> out;
  for (size_t i = 0; i < c.kernels.size(); ++i) out.push_back({&c.kernels[i].kernel, &infos[i], c.kernels[i].image.get()});
  return out;
}

std::vector<DumpedKernel> dumped(const jit::CpuProgram& c, const std::vector<KernelInfo>& infos) {
  std::vector<DumpedKernel> out;
  for (size_t i = 0; i < c.kernels.size(); ++i) out.push_back({&c.kernels[i], &infos[i], nullptr});
  return out;
}

// ---- Options --------------------------------------------------------------------------------

// Options::nvrtc_options may not choose the target: Options::arch does, and the output is labelled
// with it (an -arch here would silently build for another GPU).
void check_extra_nvrtc_options(const Options& o) {
  for (const std::string& opt : o.nvrtc_options)
    for (const char* p : {"-arch", "--gpu-architecture", "-gpu-architecture", "--gpu-name"})
      if (opt.rfind(p, 0) == 0)
        throw ir::UserError("NVRTC option '" + opt + "' chooses the target; use " +
                            option_name(OptionField::Arch, o.message_style) + " instead");
}

// An explicit Options::arch, checked against this NVRTC. Its errors are about the option, not the
// graph file, so they carry no file name.
jit::ArchDecision explicit_target(const std::string& arch, MessageStyle style) {
  return translate_errors([&] {
    try {
      return jit::check_explicit_target(jit::parse_target(arch), jit::supported_archs());
    } catch (const ir::UserError& e) {
      throw ir::UserError(option_name(OptionField::Arch, style) + ": " + e.what());
    }
  });
}

// ---- CPU ------------------------------------------------------------------------------------

void fill_cpu_infos(const jit::CpuProgram& cp, std::vector<KernelInfo>& infos) {
  const CacheOutcome outcome = cp.compile.memory_hit ? CacheOutcome::MemoryHit
                               : cp.compile.disk_hit ? CacheOutcome::DiskHit
                                                     : CacheOutcome::Compiled;
  for (size_t i = 0; i < cp.plan.groups.size(); ++i)
    infos.push_back(kernel_info(cp.graph, cp.plan.groups[i], cp.kernels[i], outcome, i == 0 ? cp.compile.compile_ms : 0.0));
}

void compile_cpu(Program::Impl& p) {
  const Options& o = p.options;
  // Checked although it has no effect here: an invalid arch is an error on every backend.
  if (!o.arch.empty()) explicit_target(o.arch, o.message_style);
  p.fused.cpu = std::make_shared<jit::CpuProgram>(
      jit::prepare_cpu_program(p.graph_of(PlanKind::Fused), p.fused.plan, codegen_options(PlanKind::Fused, o)));
  p.unfused.cpu = std::make_shared<jit::CpuProgram>(
      jit::prepare_cpu_program(p.graph_of(PlanKind::Unfused), p.unfused.plan, codegen_options(PlanKind::Unfused, o)));
  jit::HostCompileOptions ho;
  ho.cache_dir = o.cache_dir;
  ho.disk_cache = o.disk_cache;
  jit::CpuProgram* f[1] = {p.fused.cpu.get()};
  jit::CpuProgram* u[1] = {p.unfused.cpu.get()};
  jit::CpuProgram* both[2] = {p.fused.cpu.get(), p.unfused.cpu.get()};
  if (o.fast_math) {
    // Fast-math and strict kernels need different compile modes: one shared object each.
    jit::compile_cpu_programs(f, ho);
    jit::compile_cpu_programs(u, ho);
  } else {
    jit::compile_cpu_programs(both, ho);
  }
  if (!o.arch.empty())
    warn(option_name(OptionField::Arch, o.message_style) + " " + o.arch + " has no effect on the CPU path (no GPU is used)");
  if (!o.nvrtc_options.empty()) {
    std::string list;
    for (const std::string& opt : o.nvrtc_options) list += (list.empty() ? "" : " ") + opt;
    warn(option_name(OptionField::NvrtcOptions, o.message_style) + " (" + list +
         ") has no effect on the CPU path (no GPU is used)");
  }
  fill_cpu_infos(*p.fused.cpu, p.fused.kernels);
  fill_cpu_infos(*p.unfused.cpu, p.unfused.kernels);
  // In strict mode both plans are one host shared object: count its compile time once.
  if (!o.fast_math && !p.unfused.kernels.empty() && !p.fused.kernels.empty()) p.unfused.kernels[0].compile_ms = 0.0;
  p.target = "host C++ (" + std::string(std::getenv("CXX") ? std::getenv("CXX") : "c++") +
             ", -ffp-contract=off -fno-tree-vectorize)";
  if (!o.dump_dir.empty()) dump_all(p, dumped(*p.fused.cpu, p.fused.kernels), dumped(*p.unfused.cpu, p.unfused.kernels), "");
}

// ---- GPU ------------------------------------------------------------------------------------

// Stages 1 and 2 of both plans for `target` (jit/gpu_build.h), their KernelInfos, and the dump.
std::pair<jit::CompiledPlan, jit::CompiledPlan> compile_gpu_plans(Program::Impl& p, const jit::Target& target) {
  jit::GpuBuildOptions bo;
  bo.target = target;
  bo.extra_options = p.options.nvrtc_options;
  bo.cache = &cache_for(p.options);
  std::pair<jit::CompiledPlan, jit::CompiledPlan> out;
  for (PlanKind kind : {PlanKind::Fused, PlanKind::Unfused}) {
    bo.codegen = codegen_options(kind, p.options);
    Program::Impl::Path& path = kind == PlanKind::Fused ? p.fused : p.unfused;
    jit::CompiledPlan& c = kind == PlanKind::Fused ? out.first : out.second;
    c = jit::compile_plan(p.graph_of(kind), path.plan, bo);
    for (size_t i = 0; i < c.kernels.size(); ++i)
      path.kernels.push_back(kernel_info(p.graph_of(kind), path.plan.groups[i], c.kernels[i].kernel,
                                         outcome_of(c.kernels[i].outcome), c.kernels[i].compile_ms));
  }
  if (!p.options.dump_dir.empty())
    dump_all(p, dumped(out.first, p.fused.kernels), dumped(out.second, p.unfused.kernels), jit::to_string(target.kind));
  return out;
}

void compile_gpu(Program::Impl& p) {
  const jit::DeviceInfo& dev = p.device->info();
  jit::ArchDecision d = p.options.arch.empty() ? jit::choose_target_for_device(jit::Arch{dev.cc_major, dev.cc_minor})
                                               : explicit_target(p.options.arch, p.options.message_style);
  if (!d.warning.empty()) warn(d.warning);
  p.target = d.target.name() + (d.target.kind == jit::OutputKind::Cubin ? " (CUBIN)" : " (PTX, JIT-compiled by the driver)");
  auto [fused, unfused] = compile_gpu_plans(p, d.target);
  p.fused.gpu = std::make_shared<jit::GpuProgram>(jit::GpuProgram::load(p.device, p.graph_of(PlanKind::Fused), p.fused.plan, fused));
  p.unfused.gpu =
      std::make_shared<jit::GpuProgram>(jit::GpuProgram::load(p.device, p.graph_of(PlanKind::Unfused), p.unfused.plan, unfused));
}

// Probes for a usable GPU: nullptr and the reason when there is none.
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

// Rewrites and plans (fused over the rewritten graph, unfused over the graph as written).
std::shared_ptr<Program::Impl> rewrite_and_plan(const Graph& graph, const Options& options) {
  auto p = std::make_shared<Program::Impl>(graph);
  p->options = options;
  route_cache_warnings();
  if (jit::cache_disabled_by_env()) p->options.disk_cache = false;
  const ir::Graph& g = graph.impl().graph;
  ir::RewriteOptions ro;
  ro.fast_math = options.fast_math;
  p->rewrite = ir::rewrite(g, ro);
  auto rimpl = std::make_shared<Graph::Impl>();
  rimpl->graph = p->rewrite.graph;
  p->rewritten = Graph(rimpl);
  p->fused.plan = ir::plan_fusion(p->rewritten.impl().graph);
  p->unfused.plan = ir::plan_unfused(g);
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
    o.message_style = cache.message_style;
    o.fast_math = fast_math;
    o.dump_dir = out_dir;
    o.arch = arch;
    translate_errors([&] { check_extra_nvrtc_options(o); });
    jit::ArchDecision d = explicit_target(arch, o.message_style);
    std::shared_ptr<Program::Impl> p = rewrite_and_plan(graph, o);
    p->target = d.target.name();
    compile_gpu_plans(*p, d.target);
    std::vector<KernelInfo> all = p->fused.kernels;
    all.insert(all.end(), p->unfused.kernels.begin(), p->unfused.kernels.end());
    return all;
  }, graph.impl().graph.file, graph.impl().source);
}

Program Program::compile(const Graph& graph, const Options& options) {
  translate_errors([&] { check_extra_nvrtc_options(options); });
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
std::string Program::backend_note() const { return impl_->backend_note; }
bool Program::fast_math() const { return impl_->options.fast_math; }
const Graph& Program::graph() const { return impl_->graph; }
const Graph& Program::rewritten() const { return impl_->rewritten; }
const std::vector<KernelInfo>& Program::kernels(PlanKind kind) const { return impl_->path(kind).kernels; }

std::string Program::device() const {
  if (!impl_->device) return "host CPU";
  const jit::DeviceInfo& d = impl_->device->info();
  return d.name + " (" + d.sm_arch() + ", " + std::to_string(d.sm_count) + " SMs)";
}

std::string Program::driver_version() const {
  return impl_->device ? jit::cuda_version_string(impl_->device->info().driver_version) : std::string();
}

std::string Program::plan_text() const {
  std::vector<std::string> names;
  for (const KernelInfo& k : impl_->fused.kernels) names.push_back(k.name);
  return ir::format_plan_text(impl_->rewrite, impl_->fused.plan, impl_->unfused.plan, &impl_->graph.impl().graph, names);
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

}  // namespace fusejit
