// The two-level kernel cache.
//  - Memory: compiled kernels of this process, keyed by the caller's 128-bit structural hash of a
//    fusion group (a hit skips code generation and NVRTC) and by the disk key.
//  - Disk: one file per kernel under the cache folder, keyed by XXH3-128 over everything that
//    changes the binary (DiskKeyInputs), so a second run of the same graph compiles nothing.
// Each key is computed at most once per process (concurrent callers wait for the first), entries
// are written to a temporary file and rename()d into place (readers never see half an entry; any
// number of processes may write the same key), and a damaged, foreign or colliding entry is
// deleted and recompiled, never loaded.
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
#include "jit/hash.h"
#include "jit/nvrtc.h"

namespace fusejit::jit {

// Bumped whenever the entry file layout changes; entries of another version are discarded.
inline constexpr uint32_t kCacheFormatVersion = 1;
// Default size cap of the disk cache (1 GiB); FUSEJIT_CACHE_MAX_MB overrides it for global().
inline constexpr uint64_t kDefaultCacheMaxBytes = uint64_t{1} << 30;

// Everything that changes the compiled binary. Build it with make_key_inputs() so the key and
// the actual NVRTC call see the same source, options and target.
struct DiskKeyInputs {
  std::string source;                 // the complete generated CUDA source
  std::string compiler_version;       // e.g. nvrtc_version().str()
  std::vector<std::string> options;   // compile options except the architecture, in order
  Target target;                      // architecture and output kind (CUBIN/PTX)
  std::string codegen_version;        // fusejit's code generator version constant (required)
};

// make_key_inputs(source, request, codegen_version): inputs for an NVRTC compile of `request`.
DiskKeyInputs make_key_inputs(std::string source, const CompileRequest& request, std::string codegen_version);
// The NVRTC request that DiskKeyInputs describes (no name expressions).
CompileRequest compile_request_of(const DiskKeyInputs& inputs);

// The disk key (file name) and an independent check hash of the same inputs, stored in the
// entry so that two inputs colliding on the 128-bit key are still told apart. Deterministic
// across processes and machines. Throws ir::InternalError if codegen_version is empty.
struct DiskKey {
  Hash128 key;
  Hash128 check;
  friend bool operator==(const DiskKey&, const DiskKey&) = default;
};
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

// The result of reading one disk entry.
struct LoadResult {
  enum class Status { Missing, Loaded, Discarded } status = Status::Missing;
  std::string problem;       // why an entry was discarded ("truncated", "payload hash mismatch", ...)
  std::vector<char> payload; // the binary when Loaded
  std::string label;
};

// The cache folder from the environment: $FUSEJIT_CACHE_DIR, else $XDG_CACHE_HOME/fusejit (if
// absolute), else $HOME/.cache/fusejit; nullopt if none is set.
std::optional<std::filesystem::path> cache_dir_from_env();
// True when FUSEJIT_DISABLE_CACHE is set to anything but "" or "0".
bool cache_disabled_by_env();
// The file of `key` under `dir`: DIR/ab/abcdef....fjk (first two hex digits as a subfolder).
std::filesystem::path entry_path(const std::filesystem::path& dir, const Hash128& key);

struct CacheConfig {
  // The cache folder; nullopt: cache_dir_from_env().
  std::optional<std::filesystem::path> dir;
  uint64_t max_bytes = kDefaultCacheMaxBytes;  // disk size cap; 0 means no cap
  bool disk = true;                            // false (or FUSEJIT_DISABLE_CACHE=1): no disk level
  bool memory = true;                          // false: nothing is kept in memory between calls
  // Receives the cache's warnings (e.g. the one about an unwritable folder). Default: stderr.
  std::function<void(const std::string&)> warn;
};

// Counters since construction (or clear_memory()).
struct CacheCounters {
  uint64_t memory_hits = 0, disk_hits = 0, compiles = 0;
  uint64_t discarded = 0;  // damaged/foreign/colliding disk entries deleted
  uint64_t evicted = 0;    // entries removed by the size cap
};

// Every member function is thread-safe. The memory level is unbounded (a process holds the
// kernels of the graphs it runs); the disk level is bounded by max_bytes. A cache whose folder is
// missing from the environment, disabled, or proved unwritable works as a memory-only cache.
class KernelCache {
 public:
  explicit KernelCache(CacheConfig config = {});
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The process-wide cache used by the library, configured from the environment on first use:
  // folder from cache_dir_from_env(), FUSEJIT_DISABLE_CACHE=1 turns the disk level off (the
  // memory level stays: it never outlives the process), FUSEJIT_CACHE_MAX_MB sets the cap. The
  // library installs its warning callback with set_warning_handler() before the first lookup.
  static KernelCache& global();

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
  // Writes an entry atomically; false (after the one warning) if the folder is unwritable.
  bool store(const DiskKey& key, const Target& target, std::span<const char> payload, std::string_view label);
  // Deletes least-recently-used entries until the folder holds at most `max_bytes` (entry
  // files only); returns the number removed. Also removes stale temporary files.
  size_t evict_to(uint64_t max_bytes);

  bool disk_enabled() const;                  // false once the folder proved unwritable
  const std::filesystem::path& dir() const { return dir_; }  // empty if no disk level
  uint64_t max_bytes() const { return config_.max_bytes; }
  CacheCounters counters() const;
  void clear_memory();                        // forgets the memory level and the counters
  void set_warning_handler(std::function<void(const std::string&)> warn);

 private:
  using KernelPtr = std::shared_ptr<const CachedKernel>;
  struct Slot;
  template <class Fn>
  KernelPtr once(std::unordered_map<Hash128, std::shared_ptr<Slot>, Hash128Hasher>& map, const Hash128& key,
                 bool& computed_here, Fn&& fn);
  std::shared_ptr<CachedKernel> lookup_disk_level(const DiskKeyInputs& inputs, const DiskKey& key, const std::string& label,
                              const std::function<CompileResult()>& compile, CacheOutcome& outcome,
                              double& compile_ms);
  size_t evict_impl(uint64_t max_bytes, const std::filesystem::path& keep);
  void warn_once(const std::string& message);
  void disable_disk(const std::string& why);

  CacheConfig config_;
  std::filesystem::path dir_;
  mutable std::mutex mutex_;  // guards the maps, counters, disk state and the warning handler
  std::unordered_map<Hash128, std::shared_ptr<Slot>, Hash128Hasher> by_structure_;
  std::unordered_map<Hash128, std::shared_ptr<Slot>, Hash128Hasher> by_disk_key_;
  CacheCounters counters_;
  bool disk_ok_ = false;
  bool warned_ = false;
  int64_t approx_bytes_ = -1;  // disk usage estimate for the cap (-1: not scanned yet)
};

// The usual GPU path in one call: the disk key from (source, request, codegen_version), then
// cache.get_or_compile() with compile_cuda(source, program_name, request) on a miss. The request
// must carry no name expressions (lowered names are not cached; kernels are extern "C"; an
// ir::InternalError otherwise). Throws CompileError when NVRTC rejects the source.
CacheResult compile_cached(KernelCache& cache, const std::string& source, const std::string& program_name,
                           const CompileRequest& request, const std::string& codegen_version,
                           const std::string& label = {});

// ---- The operations behind `fusejit cache stats|list|clear|path` (the CLI prints). ----

struct CacheEntryInfo {
  Hash128 key;
  std::filesystem::path path;
  uint64_t file_bytes = 0;
  int64_t mtime_unix = 0;     // last use (seconds since the epoch)
  std::string label;          // e.g. kernel name
  std::string target;         // e.g. "sm_90" / "compute_90"
  bool valid = false;         // header and payload checks pass
  std::string problem;        // why not valid
};

// Every entry file under `dir`, most recently used first. Only files named like entries are read.
std::vector<CacheEntryInfo> list_cache(const std::filesystem::path& dir);

struct CacheStats {
  std::filesystem::path dir;
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t invalid = 0;       // entries failing a check (deleted on their next load)
  uint64_t temp_files = 0;    // in-progress or abandoned temporary files
};
CacheStats cache_stats(const std::filesystem::path& dir);

struct ClearResult {
  uint64_t removed = 0;
  uint64_t bytes = 0;
};
// Removes entry files, temporary files and the emptied prefix folders under `dir`; files that do
// not look like cache files are left alone (the folder may be shared by mistake).
ClearResult clear_cache(const std::filesystem::path& dir);

}  // namespace fusejit::jit
