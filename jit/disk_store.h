// The one on-disk store under every fusejit cache: GPU kernels (CUBIN or PTX, jit/cache.h) and
// the CPU path's host modules (shared objects, jit/host_compile.h) are entries of the same kind,
// in the same folder, with the same guarantees:
//  - The folder comes from one rule (cache_env()) and is used only when it is private: a folder
//    this user owns that no group or other user may write (created with mode 0700). Any other
//    folder gives one warning and no disk cache, never a load from or a write to it; a subfolder
//    (DIR/ab) that is not private is skipped alone, with one warning.
//  - One file per entry, DIR/ab/<32 hex digits>.fjk, named by a 128-bit key of everything that
//    determines the binary. The entry carries that key, an independent check hash of the same
//    inputs and a hash of its bytes; a damaged, foreign, colliding or odd entry (a symlink, a
//    FIFO, a folder, another user's file) is deleted with one warning and rebuilt, never loaded.
//  - Entries are written to fresh temporary names (O_EXCL | O_NOFOLLOW, mode 0600) and renamed
//    into place, so readers never see half an entry and nothing is written through a link.
//  - A key is built at most once at a time across threads and processes (an flock per key);
//    the others wait and load the result.
//  - One size cap for all entries (FUSEJIT_CACHE_MAX_MB), least recently used first; temporary
//    files, lock files and build folders left by killed runs are swept after an hour.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jit/hash.h"

namespace fusejit::jit {

// Bumped whenever the entry file layout or the key derivation changes; entries of another
// version are never found (the version is part of every key) or are discarded.
inline constexpr uint32_t kCacheFormatVersion = 2;
// Default size cap of the disk store (1 GiB); FUSEJIT_CACHE_MAX_MB overrides it.
inline constexpr uint64_t kDefaultCacheMaxBytes = uint64_t{1} << 30;

// ---- The environment (documented in docs/api.md, "The kernel cache") ----

struct CacheEnv {
  // $FUSEJIT_CACHE_DIR, else $XDG_CACHE_HOME/fusejit (an absolute XDG_CACHE_HOME only, as the
  // XDG spec says), else $HOME/.cache/fusejit (an absolute HOME only); nullopt when none is set.
  // Made absolute.
  std::optional<std::filesystem::path> dir;
  bool disabled = false;                       // FUSEJIT_DISABLE_CACHE is 1/true/yes/on
  uint64_t max_bytes = kDefaultCacheMaxBytes;  // FUSEJIT_CACHE_MAX_MB in MiB; 0 means no cap
};
// Reads and validates the variables above. Throws ir::FileError (no file: it is about the
// environment) naming the variable and its value when FUSEJIT_DISABLE_CACHE is not one of
// 0/1/true/false/yes/no/on/off (any case) or FUSEJIT_CACHE_MAX_MB is not a decimal number of
// MiB below 2^43 (the cap in bytes fits a signed 64-bit count). Empty variables count as unset.
CacheEnv cache_env();
// cache_env().dir and cache_env().disabled, for callers that need one part (same errors).
std::optional<std::filesystem::path> cache_dir_from_env();
bool cache_disabled_by_env();

// ---- Files (the store's own reading and writing rules, for its users too) ----

// Creates `path` holding `bytes`: a new file only (O_EXCL, never through a link: O_NOFOLLOW),
// mode 0600. Returns 0, or the errno of the failure (EEXIST when anything is at `path`).
int write_new_file(const std::filesystem::path& path, std::span<const char> bytes);
// The bytes of `path` when it is a regular file of at most `max_bytes` (never through a link,
// never waiting on a FIFO); nullopt otherwise.
std::optional<std::vector<char>> read_regular_file(const std::filesystem::path& path, uint64_t max_bytes);

// ---- Private folders ----

// Why `dir` must not hold cache files, or "" when it may: it must be a directory (a symbolic link
// to one is followed only when `follow` is set: the folder named by the user may be a link, the
// folders inside it may not), owned by this process's effective user, and not writable by its
// group or others, and (with `follow`: the cache folder itself) short enough that every file fusejit
// makes under it stays under PATH_MAX.
std::string folder_problem(const std::filesystem::path& dir, bool follow);
// Creates `dir` and its missing parents with mode 0700 (existing folders keep their mode) and
// returns folder_problem(dir, true).
std::string make_private_folder(const std::filesystem::path& dir);

// ---- Entries ----

// The name of an entry (key) and an independent hash of the same inputs (check), stored in the
// entry so that two inputs colliding on the 128-bit key are still told apart.
struct DiskKey {
  Hash128 key;
  Hash128 check;
  friend bool operator==(const DiskKey&, const DiskKey&) = default;
};

// Builds a DiskKey from typed fields: two Hashers with different seeds see the same fields, after
// a domain string (what kind of entry) and kCacheFormatVersion. Deterministic across processes
// and machines.
class KeyBuilder {
 public:
  explicit KeyBuilder(std::string_view domain);
  KeyBuilder& add(std::string_view field);
  KeyBuilder& add_u64(uint64_t field);
  DiskKey digest() const;

 private:
  Hasher a_, b_;
};

// What an entry holds. The numbers are stored in the entry header.
enum class EntryKind : uint32_t { Cubin = 0, Ptx = 1, HostModule = 2 };
// "sm_90" / "compute_90" for GPU entries (from kind and arch), "host" for host modules.
std::string entry_target_name(EntryKind kind, uint32_t arch);

struct EntryMeta {
  EntryKind kind = EntryKind::Cubin;
  uint32_t arch = 0;  // compute capability as major*10+minor for GPU entries; 0 for host modules
  std::string label;  // e.g. kernel names, shown by `fusejit cache list`
};

// The file of `key` under `dir`: DIR/ab/abcdef....fjk (first two hex digits as a subfolder).
std::filesystem::path entry_path(const std::filesystem::path& dir, const Hash128& key);

// The result of reading one entry.
struct LoadResult {
  enum class Status { Missing, Loaded, Discarded } status = Status::Missing;
  std::string problem;        // why an entry was discarded ("truncated", "foreign entry", "a FIFO", ...)
  std::vector<char> payload;  // the binary when Loaded
  EntryMeta meta;             // when Loaded
};

struct StoreConfig {
  std::optional<std::filesystem::path> dir;    // nullopt: no disk store (every lookup misses)
  uint64_t max_bytes = kDefaultCacheMaxBytes;  // size cap of all entries; 0 means no cap
  // Receives the store's warnings (unusable folder, discarded entry). Default: stderr.
  std::function<void(const std::string&)> warn;
};

// Counters since construction.
struct StoreCounters {
  uint64_t discarded = 0;  // damaged/foreign/colliding/odd entries deleted
  uint64_t evicted = 0;    // entries removed by the size cap
};

// The disk store of one folder. Every member function is thread-safe and never throws for a
// problem of the folder or its files: those give a warning (the first time the folder proves
// unusable: one warning, then the store works as if disabled; a discarded entry: one warning
// each) and the caller builds what it needed.
class DiskStore {
 public:
  // Creates the folder (mode 0700) and checks it now; see make_private_folder().
  explicit DiskStore(StoreConfig config);
  DiskStore(const DiskStore&) = delete;
  DiskStore& operator=(const DiskStore&) = delete;

  // The process-wide store of folder `dir` ("" = from the environment; one store however the
  // folder is named: relative, with a trailing '/', through a symlink, which is resolved now: the
  // store keeps the folder it named then) with the cap the
  // environment sets at this call (FUSEJIT_CACHE_MAX_MB, read again each time), shared by the GPU kernel cache and the host modules so that the folder gets one
  // set of warnings and one size account. `disk` false or FUSEJIT_DISABLE_CACHE give a disabled
  // store; no folder in the environment gives one too, after one warning. Throws ir::FileError
  // for a malformed environment variable (see cache_env()).
  static std::shared_ptr<DiskStore> shared(const std::string& dir, bool disk);
  // fork(): take the shared stores' locks (the registry's, each store's, the warning handler's)
  // before it, release them after it in the parent and the child (jit/fork.h; called by the
  // Program registry's handlers, lib/program.cpp, after the programs' own locks).
  static void lock_shared_for_fork();
  static void unlock_shared_after_fork();

  bool enabled() const;                                      // false once the folder proved unusable
  const std::filesystem::path& dir() const { return dir_; }  // empty when configured without one
  uint64_t max_bytes() const;
  void set_max_bytes(uint64_t max_bytes);  // 0: no cap; applies from the next store()
  StoreCounters counters() const;

  // Reads, checks and returns the entry of `key` (refreshing its last-use time for the LRU);
  // anything that fails a check is deleted with a warning and reported as Discarded.
  LoadResult load(const DiskKey& key);
  // Writes an entry atomically; false (after the one warning) if the folder is unusable. Evicts
  // least recently used entries when the folder grows past the cap.
  bool store(const DiskKey& key, const EntryMeta& meta, std::span<const char> payload);

  struct Built {
    std::vector<char> payload;
    EntryMeta meta;
  };
  struct Fetched {
    std::vector<char> payload;
    EntryMeta meta;
    bool from_disk = false;  // false: `build` ran in this call
  };
  // The compile-once protocol: load `key`; on a miss take the key's lock (other threads and
  // processes asking for the same key wait here), load again, and only then build(), store and
  // return it. Exceptions from build() propagate; nothing is stored then.
  Fetched fetch_or_build(const DiskKey& key, const std::function<Built()>& build);

  // Deletes least-recently-used entries until the entries take at most `max_bytes` (0: no cap),
  // and sweeps what killed runs left (sweep_abandoned: stale temporary files, lock files and kept
  // build folders; build folders no build holds); returns the entries removed.
  size_t evict_to(uint64_t max_bytes);

  // A private folder for a compiler's temporary files, removed (with its contents) by the
  // destructor: DIR/.tmp-build-XXXXXX in the store's folder, or $TMPDIR/fusejit-lbuild-XXXXXX
  // (mode 0700; fusejit-build-XXXXXX where no flock can be had) when the store is disabled. Throws std::runtime_error when none can be made.
  // While it lives it holds a shared flock on the folder, so `cache clear` in another process
  // leaves it alone (clear_cache); a killed process's folder loses the lock with the process.
  class Scratch {
   public:
    Scratch(std::filesystem::path path, int lock_fd, bool in_store)
        : path_(std::move(path)), fd_(lock_fd), in_store_(in_store) {}
    Scratch(Scratch&& o) noexcept
        : path_(std::exchange(o.path_, {})), fd_(std::exchange(o.fd_, -1)), in_store_(o.in_store_) {}
    Scratch& operator=(Scratch&&) = delete;
    ~Scratch();
    const std::filesystem::path& path() const { return path_; }
    bool in_store() const { return in_store_; }  // a folder in the cache folder, not in $TMPDIR
    // Keeps the folder (it is not removed on destruction, and no longer locked) and returns its
    // path; in the store it is marked kept (a file `.kept` in it) and swept once an hour old (an
    // unlocked, unmarked build folder, an abandoned build's, goes at a sweep ten minutes on).
    // Returns an empty path, keeping nothing, when the mark cannot be written.
    std::filesystem::path keep();

   private:
    std::filesystem::path path_;
    int fd_ = -1;  // a shared flock on the folder while its build runs (-1: none could be taken)
    bool in_store_ = false;
  };
  Scratch scratch();
  // Stops using the folder for the rest of the process (enabled() false from now on), with one
  // warning naming it and `why` ("its filesystem is full: ..."); later calls warn no more.
  void disable(const std::string& why);

 private:
  void warn(const std::string& message);
  bool root_usable();
  std::string prefix_problem(const std::filesystem::path& prefix, bool create);
  // No disable(); `own` is set when the problem is the subfolder's own (see prefix_problem).
  std::string prefix_problem_once(const std::filesystem::path& prefix, bool create, bool& own);
  void skip_prefix(const std::filesystem::path& prefix, const std::string& why);
  void discard(const std::filesystem::path& path, const std::string& problem, const void* seen_stat);
  void not_stored(const std::filesystem::path& path, int err);
  size_t evict_impl(uint64_t max_bytes, const std::filesystem::path& keep);
  void counted_after_store(const std::filesystem::path& final_path, size_t bytes_stored);

  StoreConfig config_;
  std::filesystem::path dir_;
  mutable std::mutex mutex_;  // guards the fields below and the warning callback
  bool ok_ = false;
  bool warned_unusable_ = false;
  bool warned_oversize_ = false;  // an entry larger than the whole cap was stored (said once)
  bool root_is_link_ = false;  // the folder was a symbolic link at start (a store made without shared())
  std::set<std::string> warned_discards_;  // entry paths warned of (a second look warns no more)
  std::set<std::string> skipped_prefixes_;  // subfolders not used (another owner, open mode), each warned of once
  StoreCounters counters_;
  int64_t approx_bytes_ = -1;  // size of the entries, for the cap (-1: not scanned yet)
  std::chrono::steady_clock::time_point scanned_;  // when approx_bytes_ was last counted from the folder
};

// Where the shared stores (DiskStore::shared) send their warnings; default: stderr.
void set_cache_warning_handler(std::function<void(const std::string&)> warn);

// ---- The operations behind `fusejit cache stats|list|clear` ----

struct CacheEntryInfo {
  Hash128 key;
  std::filesystem::path path;
  uint64_t file_bytes = 0;
  int64_t mtime_unix = 0;  // last use (seconds since the epoch)
  EntryKind kind = EntryKind::Cubin;
  std::string label;       // e.g. kernel names
  std::string target;      // "sm_90", "compute_90" or "host"
  bool valid = false;      // header and payload checks pass
  std::string problem;     // why not valid
};

// Every entry file under `dir`, most recently used first. Only files named like entries are read.
std::vector<CacheEntryInfo> list_cache(const std::filesystem::path& dir);

struct CacheStats {
  std::filesystem::path dir;
  uint64_t entries = 0, bytes = 0;            // all entries
  uint64_t host_entries = 0, host_bytes = 0;  // the host modules among them
  uint64_t invalid = 0, invalid_bytes = 0;  // entries failing a check (deleted on their next load)
  uint64_t temp_files = 0;  // in-progress or abandoned temporary files and build folders
  std::vector<std::string> unusable_subfolders;  // why each subfolder a store skips is skipped (folder_problem)
};
CacheStats cache_stats(const std::filesystem::path& dir);

struct ClearResult {
  uint64_t removed = 0;  // entries removed
  uint64_t bytes = 0;    // bytes of every file removed
  uint64_t kept = 0;     // entries that could not be removed (a read-only folder), and the first error
  std::string kept_error;
};
// Removes entries, temporary files, unused lock files, build folders and the emptied prefix
// folders under `dir`; files that do not look like cache files are left alone (the folder may
// be shared by mistake), and so are other users' build folders and subfolders. The caller checks
// that `dir` is one a store uses (folder_problem). What a build in progress uses stays: a build
// folder whose Scratch holds its lock, a temporary entry file younger than a minute (it lives
// between a write and a rename).
ClearResult clear_cache(const std::filesystem::path& dir);

// Keeps `scratch` (Scratch::keep) and says so for a message: "source kept for inspection:
// FOLDER/FILE", or "source not kept: ..." when it cannot be kept.
std::string kept_source(DiskStore::Scratch& scratch, const std::filesystem::path& file);

}  // namespace fusejit::jit
