// fusejit::Program, compiling: rewrite, plan, generate, compile (through the kernel cache) each
// plan's variants on first need. Launching is lib/program_launch.cpp, host tensors
// lib/program_run.cpp, ahead-of-time folders lib/aot.cpp.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include <fmt/format.h>

#include "ir/names.h"
#include "ir/passes/plan_fusion.h"
#include "ir/passes/plan_report.h"
#include "jit/arch.h"
#include "jit/cache.h"
#include "jit/codegen.h"
#include "jit/fork.h"
#include "jit/host_compile.h"
#include "jit/nvrtc.h"
#include "lib/aot.h"
#include "lib/program_impl.h"

namespace fusejit {
namespace {

namespace fs = std::filesystem;

CacheOutcome outcome_of(jit::CacheOutcome o) {
  switch (o) {
    case jit::CacheOutcome::MemoryHit: return CacheOutcome::MemoryHit;
    case jit::CacheOutcome::DiskHit: return CacheOutcome::DiskHit;
    case jit::CacheOutcome::Compiled: return CacheOutcome::Compiled;
  }
  return CacheOutcome::Compiled;
}

// The process-wide cache of the folder the options name (jit/cache.h): GPU kernels and CPU host
// modules of one folder share its disk store.
jit::KernelCache& cache_for(const Options& o) { return jit::KernelCache::shared(o.cache_dir, o.disk_cache); }

// The library never prints: the disk store's warnings go to the warning handler.
void route_cache_warnings() {
  static std::once_flag routed;
  std::call_once(routed, [] { jit::set_cache_warning_handler([](const std::string& m) { warn(m); }); });
}

// ---- Options --------------------------------------------------------------------------------

// An explicit Options::arch (or `what` names where it came from), checked against this NVRTC.
// Its errors are about the option, not the graph file, so they carry no file name.
// `arch` parsed (its form: Error(User) naming the option) and checked against what the loaded
// NVRTC supports; `form_only`: NVRTC is not asked (the CPU path without one).
jit::ArchDecision explicit_target(const std::string& arch, MessageStyle style, const char* what = nullptr,
                                  bool form_only = false) {
  return translate_errors([&] {
    try {
      const jit::Target t = jit::parse_target(arch);  // before NVRTC is loaded: a typo is the user's error
      return form_only ? jit::ArchDecision{t, {}, ""} : jit::check_explicit_target(t, jit::supported_archs());
    } catch (const ir::UserError& e) {
      throw ir::UserError((what ? std::string(what) : option_name(OptionField::Arch, style)) + ": " + e.what());
    }
  });
}

void warn_cpu_ignores(const Options& o) {
  if (o.device != 0)
    warn(option_name(OptionField::Device, o.message_style) + " " + std::to_string(o.device) +
         " has no effect on the CPU path (no GPU is used)");
  if (!o.arch.empty())
    warn(option_name(OptionField::Arch, o.message_style) + " " + o.arch + " has no effect on the CPU path (no GPU is used)");
  if (!o.nvrtc_options.empty()) {
    std::string list;
    for (const std::string& opt : o.nvrtc_options) list += (list.empty() ? "" : " ") + opt;
    warn(option_name(OptionField::NvrtcOptions, o.message_style) + " (" + list +
         ") has no effect on the CPU path (no GPU is used)");
  }
}

// ---- Variants ---------------------------------------------------------------------------------

// Runs body(0) .. body(n - 1) on up to min(n, cores, 8) compile workers it starts (their
// warnings' origin is the calling thread), each index once, and returns when all have returned;
// then rethrows the exception of the lowest index that threw, so an error does not depend on
// thread timing. NVRTC and the host compiler run one program per thread. Where no thread can be
// started (a process limit), this thread runs them all.
void run_concurrently(size_t n, const std::function<void(size_t)>& body) {
  const size_t threads = std::min<size_t>({n, std::max(1u, std::thread::hardware_concurrency()), 8});
  std::vector<std::exception_ptr> failed(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) {
      try {
        body(i);
      } catch (...) {
        failed[i] = std::current_exception();
      }
    }
  };
  const std::thread::id caller = warning_origin();
  std::vector<std::thread> workers;
  try {
    for (size_t t = 0; t < threads; ++t)
      workers.emplace_back([&] {
        const WarningOrigin origin(caller);
        work();
      });
  } catch (const std::system_error&) {  // no more threads: fewer workers
  }
  if (workers.empty()) work();
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : failed)
    if (e) std::rethrow_exception(e);
}

// The CPU variants of several paths, each its own host shared object (the one a compile of that
// path alone makes, so a later fused-only compile finds it in the cache), compiled concurrently.
std::vector<std::shared_ptr<Program::Impl::Variant>> build_cpu_variants(
    const Program::Impl& p, std::span<const Program::Impl::Path* const> paths, int v) {
  std::vector<std::shared_ptr<Program::Impl::Variant>> out;
  std::vector<jit::CpuProgram*> progs;
  for (const Program::Impl::Path* path : paths) {
    out.push_back(std::make_shared<Program::Impl::Variant>());
    out.back()->cpu = std::make_shared<jit::CpuProgram>(
        jit::prepare_cpu_program(p.graph_of(path->kind), path->plan, codegen_options(path->kind, p.options, v)));
    progs.push_back(out.back()->cpu.get());
  }
  jit::HostCompileOptions ho;
  ho.cache_dir = p.options.cache_dir;
  ho.disk_cache = p.options.disk_cache;
  run_concurrently(progs.size(), [&](size_t k) {
    jit::CpuProgram* one[1] = {progs[k]};
    jit::compile_cpu_programs(one, ho);
  });
  for (size_t k = 0; k < paths.size(); ++k) {
    Program::Impl::Variant& var = *out[k];
    const jit::HostCompileResult& c = var.cpu->compile;
    const CacheOutcome outcome =
        c.memory_hit ? CacheOutcome::MemoryHit : c.disk_hit ? CacheOutcome::DiskHit : CacheOutcome::Compiled;
    var.kernels = var.cpu->kernels;
    const ir::Graph& g = p.graph_of(paths[k]->kind);
    const std::vector<int> bindings = ir::output_bindings(g);
    // One compile per path: its time is counted once, on the path's first kernel.
    for (size_t i = 0; i < paths[k]->plan.groups.size(); ++i)
      var.infos.push_back(kernel_info(g, paths[k]->plan.groups[i], var.kernels[i], outcome, i == 0 ? c.compile_ms : 0.0,
                                      p.rules, bindings));
  }
  return out;
}

std::shared_ptr<Program::Impl::Variant> build_gpu_variant(const Program::Impl& p, const Program::Impl::Path& path, int v) {
  auto out = std::make_shared<Program::Impl::Variant>();
  const ir::Graph& g = p.graph_of(path.kind);
  jit::GpuBuildOptions bo;
  bo.target = p.gpu_target;
  bo.extra_options = p.options.nvrtc_options;
  bo.cache = &cache_for(p.options);
  bo.codegen = codegen_options(path.kind, p.options, v);
  bo.for_each = run_concurrently;  // a fused plan's groups: one NVRTC program each, at once
  out->gpu = jit::compile_plan(g, path.plan, bo);
  const std::vector<int> bindings = ir::output_bindings(g);
  for (size_t i = 0; i < out->gpu.kernels.size(); ++i) {
    const jit::CompiledKernel& k = out->gpu.kernels[i];
    out->kernels.push_back(k.kernel);
    out->infos.push_back(kernel_info(g, path.plan.groups[i], k.kernel, outcome_of(k.outcome), k.compile_ms,
                                     p.rules, bindings));
  }
  return out;
}

}  // namespace

// The unfused baseline is always strict (it is what fast mode is compared with), with canonical
// names so nodes that differ only in their ids share one kernel (a 50,000-node chain compiles a
// handful of kernels, not 50,000).
jit::CodegenOptions codegen_options(PlanKind kind, const Options& o, int variant) {
  jit::CodegenOptions cg;
  if (kind == PlanKind::Unfused) cg.canonical_names = true;
  else cg.fast_math = o.fast_math;
  if (variant == 1) cg.index_bits = 64;
  return cg;
}

std::shared_ptr<Program::Impl> rewrite_and_plan(const Graph& graph, const Options& options, int64_t shared_optin) {
  auto p = std::make_shared<Program::Impl>(graph);
  p->options = options;
  p->rules = split_rules(options, shared_optin);
  route_cache_warnings();
  if (jit::cache_disabled_by_env()) p->options.disk_cache = false;
  const ir::Graph& g = graph.impl().graph;
  ir::RewriteOptions ro;
  ro.fast_math = options.fast_math;
  p->rewrite = ir::rewrite(g, ro);
  auto rimpl = std::make_shared<Graph::Impl>();
  rimpl->graph = p->rewrite.graph;
  p->rewritten = Graph(rimpl);
  p->fused.kind = PlanKind::Fused;
  ir::PlanOptions po;
  po.rules = p->rules;
  po.vector_rows = vector_rows_of(p->rewritten.impl().graph, options.fast_math);
  p->fused.plan = ir::plan_fusion(p->rewritten.impl().graph, po);
  p->fused.bindings = std::make_shared<const jit::PlanBindings>(p->rewritten.impl().graph, p->fused.plan);
  for (const ir::ParamDecl& d : g.params) p->default_params.push_back(d.default_value);
  return p;
}

std::shared_ptr<jit::DeviceContext> open_device(const Options& o, std::string* why_not) {
  auto drv = jit::Driver::get();
  if (!drv->available()) {
    *why_not = drv->unavailable_reason();
    return nullptr;
  }
  std::shared_ptr<jit::DeviceContext> dc;
  try {
    dc = jit::DeviceContext::open(o.device, drv);
  } catch (const jit::DriverError& e) {
    *why_not = e.what();
    return nullptr;
  }
  // 0, the default, is taken for "unset": a caller on device 1 (torch.cuda.set_device(1)) gets it.
  if (dc->borrowed_context() && o.device != 0 && dc->info().ordinal != o.device)
    warn(fmt::format("{} {}: this thread's current CUDA context is on device {}, which fusejit uses as it is (it "
                     "never replaces the caller's context); make device {} current first (cudaSetDevice({}), "
                     "torch.cuda.set_device({}))",
                     option_name(OptionField::Device, o.message_style), o.device, dc->info().ordinal, o.device,
                     o.device, o.device));
  return dc;
}

namespace {

void choose_gpu_target(Program::Impl& p) {
  const jit::DeviceInfo& dev = p.device->info();
  jit::ArchDecision d = p.options.arch.empty() ? jit::choose_target_for_device(jit::Arch{dev.cc_major, dev.cc_minor})
                                               : explicit_target(p.options.arch, p.options.message_style);
  if (!d.warning.empty()) warn(d.warning);
  p.gpu_target = d.target;
  p.target = d.target.name() + (d.target.kind == jit::OutputKind::Cubin ? " (CUBIN)" : " (PTX, JIT-compiled by the driver)");
}

}  // namespace

KernelInfo kernel_info(const ir::Graph& g, const ir::FusionGroup& grp, const jit::GeneratedKernel& k, CacheOutcome outcome,
                       double compile_ms, const ir::SplitRules& rules, std::span<const int> bindings) {
  KernelInfo info = unbuilt_info(g, grp, rules, bindings);
  info.name = k.name;
  info.source = k.source;
  info.cache = outcome;
  info.compile_ms = compile_ms;
  info.index64 = k.index64;
  return info;
}

KernelInfo unbuilt_info(const ir::Graph& g, const ir::FusionGroup& grp, const ir::SplitRules& rules,
                        std::span<const int> bindings) {
  KernelInfo info;
  for (ir::NodeId id : grp.nodes) info.ops.push_back(ir::node_text(g, id));  // as `fusejit plan` names it
  info.elements = ir::num_elements(grp.iter_shape);
  const ir::GroupTraffic t = ir::group_traffic(g, grp, rules, bindings);
  info.read_bytes = t.read_bytes;
  info.write_bytes = t.write_bytes;
  info.cache = CacheOutcome::NotBuilt;
  info.index64 = jit::needs_index64(info.elements);
  return info;
}

std::shared_ptr<const Program::Impl::Variant> build_variant(const Program::Impl& p, const Program::Impl::Path& path, int v) {
  return translate_errors([&]() -> std::shared_ptr<const Program::Impl::Variant> {
    if (p.backend == Backend::Cpu) {
      const Program::Impl::Path* one[1] = {&path};
      return build_cpu_variants(p, one, v)[0];
    }
    if (!p.loaded) return build_gpu_variant(p, path, v);
    if (std::shared_ptr<const Program::Impl::Variant> from = variant_from_folder(p, path, v)) return from;
    try {  // not in the folder: compiled, which needs NVRTC
      return build_gpu_variant(p, path, v);
    } catch (const jit::NvrtcUnavailable& e) {
      throw jit::NvrtcUnavailable(std::string("Program::load: the ") +
                                  (v == 1 ? "64-bit-index variant of the " : "") +
                                  (path.kind == PlanKind::Fused ? "fused" : "unfused") +
                                  " kernels are not in the folder and must be compiled, but " + e.what());
    }
  }, p.graph.impl().graph.file, p.graph.impl().source);
}

namespace {

std::unique_ptr<Program::Impl::Path> unfused_path(const Program::Impl& p) {
  auto u = std::make_unique<Program::Impl::Path>();
  u->kind = PlanKind::Unfused;
  const ir::Graph& g = p.graph_of(PlanKind::Unfused);
  u->plan = ir::plan_unfused(g);
  u->bindings = std::make_shared<const jit::PlanBindings>(g, u->plan);
  return u;
}

// Publishes the built unfused path (and writes the dump folder, which holds both plans).
void publish_unfused(const Program::Impl& p, std::unique_ptr<Program::Impl::Path> u) {
  p.unfused = std::move(u);
  if (!p.options.dump_dir.empty()) dump_program(p);
  p.unfused_ready.store(true, std::memory_order_release);
}

// Both plans at once (what `fusejit run`, which runs both, pays). On the CPU in strict mode their
// two host shared objects compile concurrently (fast-math and strict kernels need different compile
// modes); on a GPU the fused plan's programs and the unfused one compile concurrently.
void build_both(Program::Impl& p) {
  const bool cpu_strict = p.backend == Backend::Cpu && !p.options.fast_math;
  bool built = false;
  std::call_once(p.unfused_once, [&] {
    std::unique_ptr<Program::Impl::Path> u = unfused_path(p);
    if (cpu_strict) {
      const Program::Impl::Path* both[2] = {&p.fused, u.get()};
      std::vector<std::shared_ptr<Program::Impl::Variant>> v =
          translate_errors([&] { return build_cpu_variants(p, both, 0); }, p.graph.impl().graph.file,
                           p.graph.impl().source);
      p.fused.variants[0] = v[0];
      u->variants[0] = v[1];
    } else {
      run_concurrently(2, [&](size_t i) {
        if (i == 0) p.fused.variants[0] = build_variant(p, p.fused, 0);
        else u->variants[0] = build_variant(p, *u, 0);
      });
    }
    publish_unfused(p, std::move(u));  // after both: its dump folder holds both plans
    built = true;
  });
  if (!built && !cpu_strict) p.fused.variants[0] = build_variant(p, p.fused, 0);
}

}  // namespace

const Program::Impl::Path& Program::Impl::path(PlanKind kind) const {
  if (kind == PlanKind::Fused) return fused;
  check_plan_kind(kind);
  if (!unfused_ready.load(std::memory_order_acquire)) {
    std::call_once(unfused_once, [&] {
      std::unique_ptr<Path> u = unfused_path(*this);
      u->variants[0] = build_variant(*this, *u, 0);
      publish_unfused(*this, std::move(u));
    });
  }
  return *unfused;
}

namespace {

// Every live Program::Impl, for fork(): its locks are taken before fork() and released after it, in
// the parent and the child (jit/fork.h). Never destroyed: a Program may outlive static destruction.
struct ForkRegistry {
  std::mutex mu;
  std::set<const Program::Impl*> impls;  // guarded by mu
};

void lock_programs_for_fork();
void unlock_programs_after_fork();

ForkRegistry& fork_registry() {
  static ForkRegistry* r = [] {
    auto* reg = new ForkRegistry;
    jit::around_fork(lock_programs_for_fork, unlock_programs_after_fork, unlock_programs_after_fork);
    return reg;
  }();
  return *r;
}

// The programs' locks, then the shared kernel caches' and disk stores' (a program's critical
// sections never wait for those; a cache's never for a program's).
void lock_programs_for_fork() {
  ForkRegistry& r = fork_registry();
  r.mu.lock();
  for (const Program::Impl* p : r.impls) p->lock_for_fork();
  jit::KernelCache::lock_shared_for_fork();
  jit::loader_mutex().lock();  // last: a dlopen in flight holds no other lock of fusejit's
}

void unlock_programs_after_fork() {
  jit::loader_mutex().unlock();
  jit::KernelCache::unlock_shared_after_fork();
  ForkRegistry& r = fork_registry();
  for (auto it = r.impls.rbegin(); it != r.impls.rend(); ++it) (*it)->unlock_after_fork();
  r.mu.unlock();
}

}  // namespace

Program::Impl::Impl(Graph g) : graph(g), rewritten(std::move(g)) {
  ForkRegistry& r = fork_registry();
  std::lock_guard lock(r.mu);
  r.impls.insert(this);
}

Program::Impl::~Impl() {
  ForkRegistry& r = fork_registry();
  std::lock_guard lock(r.mu);
  r.impls.erase(this);
}

// Lock order as the launches take them: a path's mu, then spec_mu (variant()).
void Program::Impl::lock_for_fork() const {
  fused.mu.lock();
  fork_locked_unfused = unfused_ready.load(std::memory_order_acquire);
  if (fork_locked_unfused) unfused->mu.lock();
  spec_mu.lock();
}

void Program::Impl::unlock_after_fork() const {
  spec_mu.unlock();
  if (fork_locked_unfused) unfused->mu.unlock();
  fused.mu.unlock();
}

const Program::Impl::Variant& Program::Impl::variant(const Path& p, int v) const {
  if (v == 0) return *p.variants[0];
  {
    std::lock_guard lock(p.mu);
    if (p.variants[1]) return *p.variants[1];
  }
  // Built outside the lock (it may compile for seconds); the first one stored wins.
  std::shared_ptr<const Variant> built = build_variant(*this, p, 1);
  std::lock_guard lock(p.mu);
  if (!p.variants[1]) {
    const_cast<Path&>(p).variants[1] = built;
    std::lock_guard spec(spec_mu);
    spec_infos.insert(spec_infos.end(), built->infos.begin(), built->infos.end());
  }
  return *p.variants[1];
}

namespace {

// FUSEJIT_DUMP_DIR's folder for program p (docs/aot.md, "Every program's kernels"), "" where the
// variable is unset or empty: named after its graph, with a hash of what makes its kernels (the
// graph's text, the mode, the target: backend, arch or host compiler, the NVRTC options and the
// row rules as resolved), so programs whose kernels differ never share a folder (a dump replaces
// the folder's program) and compiling the same program again writes the same one.
std::string env_dump_dir(const Program::Impl& p) {
  const char* root = std::getenv("FUSEJIT_DUMP_DIR");
  if (!root || !*root) return "";
  const ir::SplitRules& r = p.rules;
  std::string identity = p.graph.to_text() + fmt::format("\n{}\n{}\n{} {} {} {} {}\n", p.options.fast_math, p.target, r.row_split,
                                                         r.row_cache, r.row_cache_limit, r.kept_values, r.short_rows);
  for (const std::string& opt : p.options.nvrtc_options) identity += opt + '\n';
  // After `graph NAME`, else the graph file's stem (a Python builder's: its script's), else "graph"
  // (text parsed without a file is "<string>").
  const std::string& file = p.graph.impl().graph.file;
  const std::string base = !p.graph.name().empty()             ? p.graph.name()
                           : file.empty() || file[0] == '<' ? std::string()
                                                            : std::filesystem::path(file).stem().string();
  return (std::filesystem::path(root) / (ir::identifier_part(base) + "-" + jit::xxh3_128(identity).hex().substr(0, 16))).string();
}

}  // namespace

Program Program::compile(const Graph& graph, const Options& options) { return compile_program(graph, options, true); }

Program compile_program(const Graph& graph, const Options& options, bool env_dump_dir_applies) {
  translate_errors([&] {
    check_options(options);  // first: its enums name the other checks' messages
    check_extra_nvrtc_options(options);
  });
  return translate_errors([&] {
    std::shared_ptr<jit::DeviceContext> device;  // opened first: the plan's row cache limit is the GPU's
    std::string why;
    if (options.backend != Backend::Cpu) {
      device = open_device(options, &why);
      if (!device && options.backend == Backend::Cuda)
        throw jit::DriverError(jit::DriverErrorKind::NoDevice, "the CUDA backend was requested but no GPU is usable: " + why);
    }
    std::shared_ptr<Program::Impl> p = rewrite_and_plan(graph, options, device ? device->info().shared_per_block_optin : 0);
    p->device = device;
    if (!p->device && options.backend != Backend::Cpu) p->backend_note = "no GPU: " + why;
    p->backend = p->device ? Backend::Cuda : Backend::Cpu;
    if (p->backend == Backend::Cuda) {
      choose_gpu_target(*p);
    } else {
      // Checked although it has no effect here: an invalid arch is an error on every backend (against
      // NVRTC's list where there is an NVRTC: the CPU path needs none).
      if (!options.arch.empty())
        explicit_target(options.arch, options.message_style, nullptr, !jit::nvrtc_available());
      warn_cpu_ignores(options);
      p->target = "host C++ (" + std::string(std::getenv("CXX") ? std::getenv("CXX") : "c++") + ", " +
                  jit::host_semantic_flags() + ")";
    }
    if (env_dump_dir_applies && options.dump_dir.empty()) {  // once the target and row rules are known
      p->options.dump_dir = env_dump_dir(*p);
      p->dump_dir_from_env = !p->options.dump_dir.empty();
    }
    // A dump holds both plans, so it builds the unfused one now (and writes the folder then).
    if (options.build_unfused || !p->options.dump_dir.empty()) build_both(*p);
    else p->fused.variants[0] = build_variant(*p, p->fused, 0);
    return Program(std::move(p));
  }, graph.impl().graph.file, graph.impl().source);
}

std::vector<KernelInfo> compile_to_dir(const Graph& graph, const std::string& arch, const std::string& out_dir, bool fast_math,
                                       const Options& cache, bool with_unfused) {
  return translate_errors([&] {
    if (out_dir.empty()) throw ir::UserError("compile_to_dir: the output folder is an empty path");
    Options o;
    o.cache_dir = cache.cache_dir;
    o.disk_cache = cache.disk_cache;
    o.nvrtc_options = cache.nvrtc_options;
    o.message_style = cache.message_style;
    o.fast_math = fast_math;
    o.dump_dir = out_dir;
    o.arch = arch;
    check_options(o);
    translate_errors([&] { check_extra_nvrtc_options(o); });
    // The arch is this function's argument in C++ (the CLI's --arch, Python's arch= otherwise).
    const jit::ArchDecision d = explicit_target(
        arch, o.message_style, o.message_style == MessageStyle::Api ? "compile_to_dir's arch argument" : nullptr);
    std::shared_ptr<Program::Impl> p = rewrite_and_plan(graph, o, 0);
    p->backend = Backend::Cuda;  // compiled for a GPU; nothing is loaded, no device is needed
    p->gpu_target = d.target;
    p->target = d.target.name() + (d.target.kind == jit::OutputKind::Cubin ? " (CUBIN)" : " (PTX, JIT-compiled by the driver)");
    if (!with_unfused) {
      p->fused.variants[0] = build_variant(*p, p->fused, 0);
      dump_program(*p);  // the fused plan alone (no unfused path is built)
      return p->fused.variants[0]->infos;
    }
    build_both(*p);  // writes the folder
    std::vector<KernelInfo> all = p->fused.variants[0]->infos;
    const std::vector<KernelInfo>& u = p->unfused->variants[0]->infos;
    all.insert(all.end(), u.begin(), u.end());
    return all;
  }, graph.impl().graph.file, graph.impl().source);
}

Backend Program::backend() const { return impl_->backend; }
std::string Program::target() const { return impl_->target; }
std::string Program::backend_note() const { return impl_->backend_note; }
std::string Program::dump_dir() const { return impl_->loaded ? std::string() : impl_->options.dump_dir; }
bool Program::fast_math() const { return impl_->options.fast_math; }
const Graph& Program::graph() const { return impl_->graph; }
const Graph& Program::rewritten() const { return impl_->rewritten; }

std::vector<size_t> Program::positions_of(std::span<const std::string_view> names, bool outputs) const {
  const std::vector<TensorInfo> infos = outputs ? graph().outputs() : graph().inputs();
  const std::string_view what = outputs ? "output" : "input";
  std::string all;  // "its inputs: 'x', 'w'": the names a message lists
  for (const TensorInfo& t : infos) all += fmt::format("{}'{}'", all.empty() ? "" : ", ", t.name);
  all = all.empty() ? fmt::format("it has no {}s", what) : fmt::format("its {}s: {}", what, all);
  const auto known = [&](std::string_view n) {
    return std::any_of(infos.begin(), infos.end(), [&](const TensorInfo& t) { return t.name == n; });
  };
  const std::vector<ParamInfo> params = graph().params();
  for (auto n = names.begin(); n != names.end(); ++n) {
    if (std::find(names.begin(), n, *n) != n)
      throw Error(ErrorKind::User, fmt::format("{} '{}' is given twice", what, *n));
    const bool param = std::any_of(params.begin(), params.end(), [&](const ParamInfo& p) { return p.name == *n; });
    if (!known(*n))
      throw Error(ErrorKind::User, fmt::format("the graph has no {} '{}' ({}{})", what, *n, all,
                                               param ? "; it is a param: give it in the Params argument" : ""));
  }
  std::vector<size_t> order;
  for (const TensorInfo& t : infos) {
    const auto n = std::find(names.begin(), names.end(), t.name);
    if (n == names.end())
      throw Error(ErrorKind::User, fmt::format("{} '{}' is not given ({})", what, t.name, all));
    order.push_back(static_cast<size_t>(n - names.begin()));
  }
  return order;
}

std::vector<KernelInfo> Program::kernels(PlanKind kind) const {
  if (kind == PlanKind::Fused) return impl_->fused.variants[0]->infos;
  translate_errors([&] { check_plan_kind(kind); });
  if (impl_->unfused_ready.load(std::memory_order_acquire)) return impl_->unfused->variants[0]->infos;
  const ir::Graph& g = impl_->graph_of(PlanKind::Unfused);
  const ir::Plan plan = ir::plan_unfused(g);
  std::vector<KernelInfo> out;
  const std::vector<int> bindings = ir::output_bindings(g);
  for (const ir::FusionGroup& grp : plan.groups) out.push_back(unbuilt_info(g, grp, impl_->rules, bindings));
  return out;
}

std::vector<KernelInfo> Program::specializations() const {
  std::lock_guard lock(impl_->spec_mu);
  return impl_->spec_infos;
}

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
  for (const KernelInfo& k : impl_->fused.variants[0]->infos) names.push_back(k.name);
  const ir::Plan unfused = impl_->unfused_ready.load() ? impl_->unfused->plan : ir::plan_unfused(impl_->graph.impl().graph);
  return ir::format_plan_text(impl_->rewrite, impl_->fused.plan, unfused, &impl_->graph.impl().graph, names);
}

std::string Program::rewrite_summary() const {
  std::string s = impl_->rewrite.fast_math ? "rewrites (fast-math mode):" : "rewrites (strict mode):";
  int shown = 0;
  for (const ir::RuleCount& c : impl_->rewrite.counts)
    if (c.count) s += (shown++ ? ", " : " ") + c.rule + " x" + std::to_string(c.count);
  if (!shown) s += " none fired";
  if (impl_->rewrite.hit_cap) s += " (iteration cap hit: " + impl_->rewrite.diagnostic + ")";
  return s;
}

}  // namespace fusejit
