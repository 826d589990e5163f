// The two-level kernel cache of GPU binaries.
//  - Memory: compiled kernels of this process, keyed by the caller's 128-bit structural hash of a
//    fusion group (a hit skips code generation and NVRTC) and by the disk key.
//  - Disk: the one disk store (jit/disk_store.h), keyed by XXH3-128 over everything that changes
//    the binary (DiskKeyInputs; the source without its location comments), so a second run of the
//    same graph compiles nothing, whatever the graph file is called.
// Each key is computed at most once per process (concurrent callers wait for the first) and at
// most once at a time across processes (the store's per-key lock); the store's guarantees (atomic
// writes, damaged or foreign entries rebuilt, private folders only, one size cap) hold here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "jit/arch.h"
#include "jit/disk_store.h"
#include "jit/hash.h"
#include "jit/nvrtc.h"

namespace fusejit::jit {

// Everything that changes the compiled binary. Build it with make_key_inputs() so the key and
// the actual NVRTC call see the same source, options and target.
struct DiskKeyInputs {
  std::string source;                 // the complete generated CUDA source (location comments are
                                      // left out of the key: jit/source_key.h)
  std::string compiler_version;       // nvrtc_identity(): "13.0 (109338064 bytes)"
  std::vector<std::string> options;   // compile options except the architecture, in order
  Target target;                      // architecture and output kind (CUBIN/PTX)
  std::string codegen_version;        // fusejit's code generator version constant (required)
};

// make_key_inputs(source, request, codegen_version): inputs for an NVRTC compile of `request`.
DiskKeyInputs make_key_inputs(std::string source, const CompileRequest& request, std::string codegen_version);
// The NVRTC request that DiskKeyInputs describes (no name expressions).
CompileRequest compile_request_of(const DiskKeyInputs& inputs);

// The disk key (file name) and check hash of `inputs` (see DiskKey). Deterministic across
// processes and machines. Throws ir::InternalError if codegen_version is empty.
DiskKey disk_key(const DiskKeyInputs& inputs);

// How a kernel was obtained; every run reports it per kernel.
enum class CacheOutcome { MemoryHit, DiskHit, Compiled };
const char* to_string(CacheOutcome outcome);  // "memory hit" / "disk hit" / "compiled"

// A compiled kernel held by the cache. Immutable and shared.
struct CachedKernel {
  DiskKey key;
  Target target;
  std::shared_ptr<const std::vector<char>> binary;  // CUBIN bytes or PTX text (with its '\0')
  std::string source;                                // the generated source (for --dump-dir)
  std::string label;                                 // e.g. the kernel name, shown by `cache list`
  std::shared_ptr<const void> user_data;             // the caller's data from get_or_build()
};

struct CacheResult {
  std::shared_ptr<const CachedKernel> kernel;
  CacheOutcome outcome = CacheOutcome::Compiled;
  double compile_ms = 0;  // NVRTC time when outcome == Compiled, else 0
  double lookup_ms = 0;   // wall time of the whole cache call, milliseconds
};

struct CacheConfig {
  // The cache folder; nullopt: cache_dir_from_env().
  std::optional<std::filesystem::path> dir;
  uint64_t max_bytes = kDefaultCacheMaxBytes;  // disk size cap; 0 means no cap
  bool disk = true;                            // false (or FUSEJIT_DISABLE_CACHE=1): no disk level
  bool memory = true;                          // false: nothing is kept in memory between calls
  // Receives the cache's warnings (e.g. the one about an unusable folder). Default: stderr.
  std::function<void(const std::string&)> warn;
  // A disk store to use (shared with other caches); when set, dir, max_bytes, disk and warn are
  // ignored: the store has its own.
  std::shared_ptr<DiskStore> store = nullptr;
};

// Counters since construction (or clear_memory()).
struct CacheCounters {
  uint64_t memory_hits = 0, disk_hits = 0, compiles = 0;
  uint64_t discarded = 0;  // damaged/foreign/colliding disk entries deleted
  uint64_t evicted = 0;    // entries removed by the size cap
};

// Every member function is thread-safe. The memory level is unbounded (a process holds the
// kernels of the graphs it runs); the disk level is bounded by the store's cap. A cache whose
// folder is missing from the environment, disabled, or proved unusable works as a memory-only
// cache.
class KernelCache {
 public:
  // Throws ir::FileError when FUSEJIT_DISABLE_CACHE is malformed (see cache_env()).
  explicit KernelCache(CacheConfig config = {});
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The process-wide cache of folder `dir` ("" = from the environment; `disk` false: memory
  // only), on DiskStore::shared(dir, disk), so GPU kernels and host modules of one folder share
  // its store. Kept for the life of the process. Throws ir::FileError for a malformed
  // environment variable (cache_env()).
  static KernelCache& shared(const std::string& dir, bool disk);
  // shared("", true): the cache configured from the environment.
  static KernelCache& global();
  // Forgets the memory level of every shared cache (after `fusejit cache clear`).
  static void clear_all_memory();
  // fork(): take the shared caches' locks (the registry's, each cache's) and then the shared disk
  // stores' before it; release them after it in the parent and the child (jit/fork.h; called by
  // the Program registry's handlers, lib/program.cpp, after the programs' own locks).
  static void lock_shared_for_fork();
  static void unlock_shared_after_fork();

  struct Generated {
    DiskKeyInputs inputs;                  // from code generation
    std::string label;                     // kernel name, stored in the entry
    std::shared_ptr<const void> user_data; // returned with the kernel on later memory hits
  };

  // Two-level lookup. `structural_key` must cover everything that determines the generated
  // source and compile request (group structure, dtypes, mode, target). On a memory hit neither
  // `generate` nor `compile` runs; otherwise `generate` runs, then the disk is tried, then
  // `compile` (which must compile exactly generated.inputs) and the entry is stored. Concurrent
  // callers with the same key wait for the first. Exceptions from generate/compile (e.g.
  // CompileError) propagate to every waiting caller and nothing is cached.
  CacheResult get_or_build(const Hash128& structural_key, const std::function<Generated()>& generate,
                           const std::function<CompileResult(const Generated&)>& compile);

  // Lookup by disk key only (the source is already generated): memory, then disk, then compile()
  // (which must compile exactly `inputs`). label/user_data of the first caller are the ones kept.
  // Same waiting and exception rules as get_or_build().
  CacheResult get_or_compile(const DiskKeyInputs& inputs, const std::function<CompileResult()>& compile,
                             std::string label = {}, std::shared_ptr<const void> user_data = {});

  // The disk level alone (tests and tools). load() deletes an entry that fails any check.
  LoadResult load(const DiskKey& key);
  // Writes an entry atomically; false (after the one warning) if the folder is unusable.
  bool store(const DiskKey& key, const Target& target, std::span<const char> payload, std::string_view label);
  // Deletes least-recently-used entries until the folder holds at most `max_bytes` (entry
  // files only); returns the number removed. Also removes stale temporary files.
  size_t evict_to(uint64_t max_bytes);

  bool disk_enabled() const;                  // false once the folder proved unusable
  const std::filesystem::path& dir() const;   // empty if no disk level
  uint64_t max_bytes() const;
  CacheCounters counters() const;
  void clear_memory();                        // forgets the memory level and the counters
  DiskStore& disk_store() { return *disk_; }

 private:
  using KernelPtr = std::shared_ptr<const CachedKernel>;
  struct Slot;
  template <class Fn>
  KernelPtr once(std::unordered_map<Hash128, std::shared_ptr<Slot>, Hash128Hasher>& map, const Hash128& key,
                 bool& computed_here, Fn&& fn);
  std::shared_ptr<CachedKernel> lookup_disk_level(const DiskKeyInputs& inputs, const DiskKey& key, const std::string& label,
                                                  const std::function<CompileResult()>& compile, CacheOutcome& outcome,
                                                  double& compile_ms);

  CacheConfig config_;
  std::shared_ptr<DiskStore> disk_;  // never null (a disabled store when there is no disk level)
  mutable std::mutex mutex_;         // guards the maps and counters
  std::unordered_map<Hash128, std::shared_ptr<Slot>, Hash128Hasher> by_structure_;
  std::unordered_map<Hash128, std::shared_ptr<Slot>, Hash128Hasher> by_disk_key_;
  CacheCounters counters_;
  StoreCounters store_base_;  // the store's counters at construction / clear_memory()
};

// The usual GPU path in one call: the disk key from (source, request, codegen_version), then
// cache.get_or_compile() with compile_cuda(source, program_name, request) on a miss. The request
// must carry no name expressions (lowered names are not cached; kernels are extern "C"; an
// ir::InternalError otherwise). Throws CompileError when NVRTC rejects the source.
CacheResult compile_cached(KernelCache& cache, const std::string& source, const std::string& program_name,
                           const CompileRequest& request, const std::string& codegen_version,
                           const std::string& label = {});

// The operations behind `fusejit cache stats|list|clear` are in jit/disk_store.h.

}  // namespace fusejit::jit
