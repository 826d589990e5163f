// The two-level GPU kernel cache; see jit/cache.h.
#include "jit/cache.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>

#include "ir/error.h"
#include "jit/source_key.h"

namespace fusejit::jit {

namespace fs = std::filesystem;

namespace {
EntryKind entry_kind(const Target& t) { return t.kind == OutputKind::Cubin ? EntryKind::Cubin : EntryKind::Ptx; }

// `e` saying where the whole generated source was kept, for a source too long for its message. As for the host compiler's failures, a build folder of the store keeps it (swept after an
// hour); with the disk cache off nothing may stay on disk.
CompileError with_kept_source(const CompileError& e, DiskStore& store, std::string label) {
  std::replace(label.begin(), label.end(), '/', '_');
  std::string kept = "source not kept: the disk cache is off";
  if (store.enabled()) {
    try {
      DiskStore::Scratch scratch = store.scratch();
      const std::filesystem::path cu = scratch.path() / (label + ".cu");
      if (!scratch.in_store()) kept = "source not kept: the cache folder took no build folder";  // $TMPDIR's is swept
      else if (write_new_file(cu, std::span<const char>(e.source().data(), e.source().size())) != 0)
        kept = "source not kept: cannot write " + cu.string();
      else
        kept = kept_source(scratch, cu.filename());
    } catch (const std::runtime_error& why) {
      kept = std::string("source not kept: ") + why.what();
    }
  }
  return CompileError(std::string(e.what()) + kept + "\n", e.log(), e.options(), e.source(), e.graph_refs());
}
}  // namespace

// ---- keys ----

DiskKeyInputs make_key_inputs(std::string source, const CompileRequest& request, std::string codegen_version) {
  return DiskKeyInputs{std::move(source), nvrtc_identity(), request.options, request.target,
                       std::move(codegen_version)};
}

CompileRequest compile_request_of(const DiskKeyInputs& inputs) { return CompileRequest{inputs.target, inputs.options, {}}; }

DiskKey disk_key(const DiskKeyInputs& in) {
  FJ_CHECK(!in.codegen_version.empty(), "DiskKeyInputs::codegen_version must be set");
  KeyBuilder k("fusejit kernel cache");
  k.add("source").add(without_location_comments(in.source));
  k.add("compiler").add(in.compiler_version);
  k.add("options").add_u64(in.options.size());
  for (const auto& o : in.options) k.add(o);
  k.add("target").add(in.target.name()).add(to_string(in.target.kind));
  k.add("codegen").add(in.codegen_version);
  return k.digest();
}

const char* to_string(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::MemoryHit: return "memory hit";
    case CacheOutcome::DiskHit: return "disk hit";
    case CacheOutcome::Compiled: return "compiled";
  }
  return "?";
}

// ---- KernelCache ----

struct KernelCache::Slot {
  std::shared_future<KernelPtr> future;
  pid_t process = ::getpid();  // whose thread builds it: a fork()ed child's copy has no such thread (jit/fork.h)

  // Whether waiting for it could never end: a build in flight in the parent when this process was
  // forked from it (the child has only the thread that forked).
  bool orphaned() const {
    return process != ::getpid() && future.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  }
};

KernelCache::KernelCache(CacheConfig config) : config_(std::move(config)) {
  disk_ = config_.store;
  if (!disk_) {
    StoreConfig sc;
    if (config_.disk && !cache_disabled_by_env()) sc.dir = config_.dir ? config_.dir : cache_dir_from_env();
    sc.max_bytes = config_.max_bytes;
    sc.warn = config_.warn;
    disk_ = std::make_shared<DiskStore>(std::move(sc));
  }
  store_base_ = disk_->counters();
}

namespace {
// The shared caches, one per shared store, never freed (callers keep references).
struct SharedCaches {
  std::mutex mu;
  std::map<const DiskStore*, std::unique_ptr<KernelCache>> by_store;
};
SharedCaches& shared_caches() {
  static SharedCaches s;
  return s;
}
}  // namespace

KernelCache& KernelCache::shared(const std::string& dir, bool disk) {
  std::shared_ptr<DiskStore> store = DiskStore::shared(dir, disk);
  SharedCaches& all = shared_caches();
  std::lock_guard lock(all.mu);
  auto& c = all.by_store[store.get()];
  if (!c) {
    CacheConfig cfg;
    cfg.store = std::move(store);
    c = std::make_unique<KernelCache>(std::move(cfg));
  }
  return *c;
}

KernelCache& KernelCache::global() { return shared("", true); }

// Lock order as the caches take them: the registry (clear_all_memory, shared), a cache, a store.
void KernelCache::lock_shared_for_fork() {
  SharedCaches& all = shared_caches();
  all.mu.lock();
  for (auto& [store, cache] : all.by_store) cache->mutex_.lock();
  DiskStore::lock_shared_for_fork();
}

void KernelCache::unlock_shared_after_fork() {
  DiskStore::unlock_shared_after_fork();
  SharedCaches& all = shared_caches();
  for (auto it = all.by_store.rbegin(); it != all.by_store.rend(); ++it) it->second->mutex_.unlock();
  all.mu.unlock();
}

void KernelCache::clear_all_memory() {
  SharedCaches& all = shared_caches();
  std::lock_guard lock(all.mu);
  for (auto& [store, cache] : all.by_store) cache->clear_memory();
}

bool KernelCache::disk_enabled() const { return disk_->enabled(); }
const fs::path& KernelCache::dir() const { return disk_->dir(); }
uint64_t KernelCache::max_bytes() const { return disk_->max_bytes(); }

CacheCounters KernelCache::counters() const {
  const StoreCounters s = disk_->counters();
  std::lock_guard lock(mutex_);
  CacheCounters c = counters_;
  c.discarded = s.discarded - store_base_.discarded;
  c.evicted = s.evicted - store_base_.evicted;
  return c;
}

void KernelCache::clear_memory() {
  const StoreCounters s = disk_->counters();
  std::lock_guard lock(mutex_);
  by_structure_.clear();
  by_disk_key_.clear();
  counters_ = {};
  store_base_ = s;
}

LoadResult KernelCache::load(const DiskKey& key) { return disk_->load(key); }

bool KernelCache::store(const DiskKey& key, const Target& target, std::span<const char> payload, std::string_view label) {
  return disk_->store(key, EntryMeta{entry_kind(target), static_cast<uint32_t>(target.arch.number()), std::string(label)},
                      payload);
}

size_t KernelCache::evict_to(uint64_t max_bytes) { return disk_->evict_to(max_bytes); }

template <class Fn>
KernelCache::KernelPtr KernelCache::once(std::unordered_map<Hash128, std::shared_ptr<Slot>, Hash128Hasher>& map,
                                         const Hash128& key, bool& computed_here, Fn&& fn) {
  std::promise<KernelPtr> promise;
  std::shared_ptr<Slot> slot;
  computed_here = false;
  {
    std::lock_guard lock(mutex_);
    auto it = map.find(key);
    if (it != map.end() && !it->second->orphaned()) {
      slot = it->second;
      ++counters_.memory_hits;
    } else {
      if (it != map.end()) map.erase(it);  // built here instead
      slot = std::make_shared<Slot>();
      slot->future = promise.get_future().share();
      map.emplace(key, slot);
      computed_here = true;
    }
  }
  if (!computed_here) return slot->future.get();  // waits for an in-flight build; rethrows its error
  auto forget = [&] {
    std::lock_guard lock(mutex_);
    auto it = map.find(key);
    if (it != map.end() && it->second == slot) map.erase(it);
  };
  try {
    KernelPtr value = fn();
    promise.set_value(value);
    if (!config_.memory) forget();
    return value;
  } catch (...) {
    forget();  // nothing is cached for a failed build; a later call tries again
    promise.set_exception(std::current_exception());
    throw;
  }
}

std::shared_ptr<CachedKernel> KernelCache::lookup_disk_level(const DiskKeyInputs& inputs, const DiskKey& key,
                                                             const std::string& label,
                                                             const std::function<CompileResult()>& compile,
                                                             CacheOutcome& outcome, double& compile_ms) {
  auto kernel = std::make_shared<CachedKernel>();
  kernel->key = key;
  kernel->target = inputs.target;
  kernel->source = inputs.source;
  kernel->label = label;
  DiskStore::Fetched f = disk_->fetch_or_build(key, [&] {
    CompileResult result;
    try {
      result = compile();
    } catch (const CompileError& e) {
      if (std::count(e.source().begin(), e.source().end(), '\n') <= kCompileErrorSourceLines) throw;
      throw with_kept_source(e, *disk_, label);
    }
    FJ_CHECK(result.target == inputs.target, "the compile callback built a different target than the cache key says");
    FJ_CHECK(!result.binary.empty(), "the compile callback returned an empty binary");
    compile_ms = result.compile_ms;
    return DiskStore::Built{std::move(result.binary),
                            EntryMeta{entry_kind(inputs.target), static_cast<uint32_t>(inputs.target.arch.number()), label}};
  });
  const bool wrong_kind = f.from_disk && (f.meta.kind != entry_kind(inputs.target) ||
                                          f.meta.arch != static_cast<uint32_t>(inputs.target.arch.number()));
  FJ_CHECK(!wrong_kind, "a kernel cache entry with matching key and check hash holds another target");
  outcome = f.from_disk ? CacheOutcome::DiskHit : CacheOutcome::Compiled;
  {
    std::lock_guard lock(mutex_);
    ++(f.from_disk ? counters_.disk_hits : counters_.compiles);
  }
  kernel->binary = std::make_shared<const std::vector<char>>(std::move(f.payload));
  return kernel;
}

CacheResult KernelCache::get_or_compile(const DiskKeyInputs& inputs, const std::function<CompileResult()>& compile,
                                        std::string label, std::shared_ptr<const void> user_data) {
  const auto t0 = std::chrono::steady_clock::now();
  const DiskKey key = disk_key(inputs);
  CacheResult r;
  r.outcome = CacheOutcome::MemoryHit;
  bool here = false;
  r.kernel = once(by_disk_key_, key.key, here, [&] {
    auto k = lookup_disk_level(inputs, key, label, compile, r.outcome, r.compile_ms);
    k->user_data = std::move(user_data);
    return KernelPtr(std::move(k));
  });
  if (!here) r.outcome = CacheOutcome::MemoryHit;
  r.lookup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

CacheResult KernelCache::get_or_build(const Hash128& structural_key, const std::function<Generated()>& generate,
                                      const std::function<CompileResult(const Generated&)>& compile) {
  const auto t0 = std::chrono::steady_clock::now();
  CacheResult r;
  r.outcome = CacheOutcome::MemoryHit;
  bool here = false;
  r.kernel = once(by_structure_, structural_key, here, [&] {
    Generated g = generate();
    const DiskKey key = disk_key(g.inputs);
    bool inner_here = false;
    CacheOutcome inner = CacheOutcome::MemoryHit;
    KernelPtr shared = once(by_disk_key_, key.key, inner_here, [&] {
      return KernelPtr(lookup_disk_level(g.inputs, key, g.label, [&] { return compile(g); }, inner, r.compile_ms));
    });
    r.outcome = inner_here ? inner : CacheOutcome::MemoryHit;
    // Same binary, but this caller's label and data (another structure may share the source).
    auto mine = std::make_shared<CachedKernel>(*shared);
    mine->label = std::move(g.label);
    mine->user_data = std::move(g.user_data);
    return KernelPtr(std::move(mine));
  });
  if (!here) r.outcome = CacheOutcome::MemoryHit;
  r.lookup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

CacheResult compile_cached(KernelCache& cache, const std::string& source, const std::string& program_name,
                           const CompileRequest& request, const std::string& codegen_version, const std::string& label) {
  FJ_CHECK(request.name_expressions.empty(), "compile_cached: lowered names are not cached; use extern \"C\" kernels");
  DiskKeyInputs inputs = make_key_inputs(source, request, codegen_version);
  return cache.get_or_compile(
      inputs, [&] { return compile_cuda(source, program_name, request); }, label.empty() ? program_name : label);
}

}  // namespace fusejit::jit
