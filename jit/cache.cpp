#include "jit/cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <random>
#include <thread>

#include "ir/error.h"

namespace fusejit::jit {

namespace fs = std::filesystem;

namespace {

// ---- Entry file layout (all integers little-endian) ----
//   0  8  magic "FJKCACHE"
//   8  4  format version (kCacheFormatVersion)
//  12  4  header size (kHeaderSize)
//  16 16  key (Hash128, lo then hi)
//  32 16  check hash of the same inputs (collision guard)
//  48  4  target arch number (e.g. 90)
//  52  4  output kind (0 CUBIN, 1 PTX)
//  56  4  label size
//  60  4  reserved, 0
//  64  8  payload size
//  72 16  XXH3-128 of bytes [0,72) + label + payload
//  88     label, then payload
constexpr char kMagic[8] = {'F', 'J', 'K', 'C', 'A', 'C', 'H', 'E'};
constexpr size_t kHeaderSize = 88;
constexpr size_t kHashedHeader = 72;
constexpr const char* kEntrySuffix = ".fjk";
constexpr const char* kTempPrefix = ".tmp-";
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 31;  // anything larger is not ours
constexpr auto kStaleTemp = std::chrono::hours(1);

void put32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t get32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

Hash128 content_hash(const unsigned char* header, std::string_view label, std::span<const char> payload) {
  Hasher h;
  h.add(std::string_view(reinterpret_cast<const char*>(header), kHashedHeader)).add(label);
  h.add(std::string_view(payload.data(), payload.size()));
  return h.digest();
}

std::vector<unsigned char> encode_entry(const DiskKey& key, const Target& target, std::string_view label,
                                        std::span<const char> payload) {
  std::vector<unsigned char> buf(kHeaderSize + label.size() + payload.size());
  unsigned char* h = buf.data();
  std::memcpy(h, kMagic, 8);
  put32(h + 8, kCacheFormatVersion);
  put32(h + 12, kHeaderSize);
  key.key.to_bytes(h + 16);
  key.check.to_bytes(h + 32);
  put32(h + 48, static_cast<uint32_t>(target.arch.number()));
  put32(h + 52, target.kind == OutputKind::Cubin ? 0 : 1);
  put32(h + 56, static_cast<uint32_t>(label.size()));
  put32(h + 60, 0);
  put64(h + 64, payload.size());
  content_hash(h, label, payload).to_bytes(h + 72);
  std::memcpy(h + kHeaderSize, label.data(), label.size());
  if (!payload.empty()) std::memcpy(h + kHeaderSize + label.size(), payload.data(), payload.size());
  return buf;
}

// A decoded entry, or the reason it must not be used.
struct Decoded {
  std::string problem;  // empty when valid
  DiskKey key;
  Target target;
  std::string label;
  std::span<const char> payload;
};

// Validates a whole entry file. `expected` is the key the file is looked up under.
Decoded decode_entry(std::span<const char> file, const Hash128& expected, const std::optional<Hash128>& check) {
  Decoded d;
  const auto* h = reinterpret_cast<const unsigned char*>(file.data());
  if (file.size() < kHeaderSize) {
    d.problem = fmt::format("truncated ({} bytes, smaller than the {}-byte header)", file.size(), kHeaderSize);
    return d;
  }
  if (std::memcmp(h, kMagic, 8) != 0) {
    d.problem = "not a fusejit cache entry (bad magic)";
    return d;
  }
  if (uint32_t v = get32(h + 8); v != kCacheFormatVersion) {
    d.problem = fmt::format("format version {} (this fusejit reads {})", v, kCacheFormatVersion);
    return d;
  }
  if (get32(h + 12) != kHeaderSize) {
    d.problem = "bad header size";
    return d;
  }
  d.key.key = Hash128::from_bytes(h + 16);
  d.key.check = Hash128::from_bytes(h + 32);
  if (d.key.key != expected) {
    d.problem = fmt::format("holds key {} instead of {} (foreign entry)", d.key.key.hex(), expected.hex());
    return d;
  }
  if (check && d.key.check != *check) {
    d.problem = "check hash differs: another kernel with a colliding key";
    return d;
  }
  const uint64_t label_size = get32(h + 56);
  const uint64_t payload_size = get64(h + 64);
  if (payload_size > kMaxEntryBytes || kHeaderSize + label_size + payload_size != file.size()) {
    d.problem = fmt::format("size mismatch ({} bytes, header says {}): truncated or overwritten", file.size(),
                            kHeaderSize + label_size + payload_size);
    return d;
  }
  d.label.assign(file.data() + kHeaderSize, label_size);
  d.payload = file.subspan(kHeaderSize + label_size, payload_size);
  if (content_hash(h, d.label, d.payload) != Hash128::from_bytes(h + 72)) {
    d.problem = "content hash mismatch (corrupted)";
    return d;
  }
  const uint32_t kind = get32(h + 52);
  if (kind > 1) {
    d.problem = "bad output kind";
    return d;
  }
  d.target = Target{Arch::from_number(static_cast<int>(get32(h + 48))), kind == 0 ? OutputKind::Cubin : OutputKind::Ptx};
  return d;
}

// Reads a whole file through an open descriptor.
bool read_all(int fd, std::vector<char>& out, size_t size) {
  out.resize(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return true;
}

bool write_all(int fd, const unsigned char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// One file found by a scan of the cache folder.
struct ScannedFile {
  fs::path path;
  bool temp = false;
  std::optional<Hash128> key;  // for entries
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;
};

// Lists entry files (DIR/ab/<32 hex>.fjk whose name starts with ab) and temp files. Never throws.
std::vector<ScannedFile> scan(const fs::path& dir) {
  std::vector<ScannedFile> out;
  std::error_code ec;
  fs::directory_iterator top(dir, ec), end;
  for (; !ec && top != end; top.increment(ec)) {
    const std::string prefix = top->path().filename().string();
    if (prefix.size() != 2 || !is_hex(prefix)) continue;
    std::error_code ec2;
    fs::directory_iterator sub(top->path(), ec2);
    for (; !ec2 && sub != end; sub.increment(ec2)) {
      const std::string name = sub->path().filename().string();
      ScannedFile f;
      f.path = sub->path();
      if (name.starts_with(kTempPrefix)) {
        f.temp = true;
      } else if (name.size() == 32 + std::strlen(kEntrySuffix) && name.ends_with(kEntrySuffix) &&
                 name.compare(0, 2, prefix) == 0) {
        f.key = Hash128::from_hex(std::string_view(name).substr(0, 32));
        if (!f.key || !is_hex(name.substr(0, 32))) continue;
      } else {
        continue;
      }
      struct stat st;
      if (::lstat(f.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      f.bytes = static_cast<uint64_t>(st.st_size);
      f.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      out.push_back(std::move(f));
    }
  }
  return out;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<uint64_t> env_max_bytes() {
  const char* env = std::getenv("FUSEJIT_CACHE_MAX_MB");
  if (!env || !*env) return std::nullopt;
  char* endp = nullptr;
  unsigned long long mb = std::strtoull(env, &endp, 10);
  if (*endp != '\0') return std::nullopt;
  return static_cast<uint64_t>(mb) << 20;
}

void default_warn(const std::string& message) { std::fprintf(stderr, "fusejit: warning: %s\n", message.c_str()); }

}  // namespace

// ---- keys ----

DiskKeyInputs make_key_inputs(std::string source, const CompileRequest& request, std::string codegen_version) {
  return DiskKeyInputs{std::move(source), nvrtc_version().str(), request.options, request.target,
                       std::move(codegen_version)};
}

CompileRequest compile_request_of(const DiskKeyInputs& inputs) { return CompileRequest{inputs.target, inputs.options, {}}; }

DiskKey disk_key(const DiskKeyInputs& in) {
  FJ_CHECK(!in.codegen_version.empty(), "DiskKeyInputs::codegen_version must be set");
  auto feed = [&](Hasher& h) {
    h.add("fusejit kernel cache").add_u64(kCacheFormatVersion);
    h.add("source").add(in.source);
    h.add("compiler").add(in.compiler_version);
    h.add("options").add_u64(in.options.size());
    for (const auto& o : in.options) h.add(o);
    h.add("target").add(in.target.name()).add(to_string(in.target.kind));
    h.add("codegen").add(in.codegen_version);
    return h.digest();
  };
  Hasher a(0), b(0x9E3779B97F4A7C15ull);
  return DiskKey{feed(a), feed(b)};
}

const char* to_string(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::MemoryHit: return "memory hit";
    case CacheOutcome::DiskHit: return "disk hit";
    case CacheOutcome::Compiled: return "compiled";
  }
  return "?";
}

// ---- folders ----

std::optional<fs::path> cache_dir_from_env() {
  if (const char* d = std::getenv("FUSEJIT_CACHE_DIR"); d && *d) return fs::path(d);
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x && x[0] == '/') return fs::path(x) / "fusejit";
  if (const char* h = std::getenv("HOME"); h && *h) return fs::path(h) / ".cache" / "fusejit";
  return std::nullopt;
}

bool cache_disabled_by_env() {
  const char* e = std::getenv("FUSEJIT_DISABLE_CACHE");
  return e && *e && std::string_view(e) != "0";
}

fs::path entry_path(const fs::path& dir, const Hash128& key) {
  const std::string hex = key.hex();
  return dir / hex.substr(0, 2) / (hex + kEntrySuffix);
}

// ---- KernelCache ----

struct KernelCache::Slot {
  std::shared_future<KernelPtr> future;
};

KernelCache::KernelCache(CacheConfig config) : config_(std::move(config)) {
  if (!config_.warn) config_.warn = default_warn;
  if (config_.disk && !cache_disabled_by_env()) {
    if (auto d = config_.dir ? config_.dir : cache_dir_from_env()) {
      dir_ = *d;
      disk_ok_ = true;
    }
  }
}

KernelCache& KernelCache::global() {
  static KernelCache cache([] {
    CacheConfig c;
    if (auto mb = env_max_bytes()) c.max_bytes = *mb;
    return c;
  }());
  return cache;
}

bool KernelCache::disk_enabled() const {
  std::lock_guard lock(mutex_);
  return disk_ok_;
}

CacheCounters KernelCache::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void KernelCache::clear_memory() {
  std::lock_guard lock(mutex_);
  by_structure_.clear();
  by_disk_key_.clear();
  counters_ = {};
}

void KernelCache::set_warning_handler(std::function<void(const std::string&)> warn) {
  std::lock_guard lock(mutex_);
  config_.warn = warn ? std::move(warn) : default_warn;
}

void KernelCache::warn_once(const std::string& message) {
  std::function<void(const std::string&)> warn;
  {
    std::lock_guard lock(mutex_);
    if (warned_) return;
    warned_ = true;
    warn = config_.warn;
  }
  warn(message);
}

void KernelCache::disable_disk(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (!disk_ok_) return;
    disk_ok_ = false;
  }
  warn_once(fmt::format("kernel cache folder {} is not usable ({}); continuing without the disk cache",
                        dir_.string(), why));
}

LoadResult KernelCache::load(const DiskKey& key) {
  LoadResult r;
  if (!disk_enabled()) return r;
  const fs::path path = entry_path(dir_, key.key);
  // O_NONBLOCK: a FIFO in an entry's place must not block the open (it is then discarded).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return r;  // missing (or unreadable: treated as a miss)
  struct stat st;
  std::vector<char> bytes;
  bool ok = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  if (ok) read_all(fd, bytes, static_cast<size_t>(std::min<uint64_t>(st.st_size, kMaxEntryBytes + 1)));
  Decoded d = ok ? decode_entry(bytes, key.key, key.check) : Decoded{"not a regular file", {}, {}, {}, {}};
  if (d.problem.empty()) {
    ::futimens(fd, nullptr);  // the LRU clock: mark as just used
    ::close(fd);
    r.status = LoadResult::Status::Loaded;
    r.label = std::move(d.label);
    r.payload.assign(d.payload.begin(), d.payload.end());
    return r;
  }
  // Delete the bad entry, unless another process has meanwhile renamed a fresh one into place.
  struct stat now;
  if (ok && ::stat(path.c_str(), &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev)
    ::unlink(path.c_str());
  ::close(fd);
  {
    std::lock_guard lock(mutex_);
    ++counters_.discarded;
  }
  r.status = LoadResult::Status::Discarded;
  r.problem = std::move(d.problem);
  return r;
}

bool KernelCache::store(const DiskKey& key, const Target& target, std::span<const char> payload,
                        std::string_view label) {
  if (!disk_enabled()) return false;
  const fs::path final_path = entry_path(dir_, key.key);
  std::error_code ec;
  fs::create_directories(final_path.parent_path(), ec);
  if (ec) {
    disable_disk(fmt::format("cannot create {}: {}", final_path.parent_path().string(), ec.message()));
    return false;
  }
  // Temp names are unique per process (pid, a per-process random nonce: pids repeat across
  // containers sharing a folder) and per call (counter).
  static const uint64_t nonce = std::random_device{}() * 0x100000001ull ^ static_cast<uint64_t>(now_ns());
  static std::atomic<uint64_t> counter{0};
  const std::vector<unsigned char> buf = encode_entry(key, target, label, payload);
  fs::path temp;
  int fd = -1;
  for (int attempt = 0; attempt < 3 && fd < 0; ++attempt) {
    temp = final_path.parent_path() / fmt::format("{}{}-{}-{:x}-{}", kTempPrefix, key.key.hex(), ::getpid(), nonce,
                                                  counter.fetch_add(1));
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == ENOENT) fs::create_directories(final_path.parent_path(), ec);  // raced with `cache clear`
    else if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    disable_disk(fmt::format("cannot write {}: {}", temp.string(), std::strerror(errno)));
    return false;
  }
  bool ok = write_all(fd, buf.data(), buf.size());
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(temp.c_str(), final_path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(temp.c_str());
    disable_disk(fmt::format("cannot write {}: {}", final_path.string(), std::strerror(err)));
    return false;
  }
  bool over = false;
  {
    std::lock_guard lock(mutex_);
    if (approx_bytes_ >= 0) approx_bytes_ += static_cast<int64_t>(buf.size());
    over = config_.max_bytes > 0 && (approx_bytes_ < 0 || static_cast<uint64_t>(approx_bytes_) > config_.max_bytes);
  }
  if (over) evict_impl(config_.max_bytes, final_path);
  return true;
}

size_t KernelCache::evict_to(uint64_t max_bytes) { return evict_impl(max_bytes, {}); }

size_t KernelCache::evict_impl(uint64_t max_bytes, const fs::path& keep) {
  if (dir_.empty()) return 0;
  std::vector<ScannedFile> files = scan(dir_);
  const int64_t stale_before = now_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(kStaleTemp).count();
  uint64_t total = 0;
  std::vector<ScannedFile*> entries;
  for (auto& f : files) {
    if (f.temp) {
      if (f.mtime_ns < stale_before) ::unlink(f.path.c_str());  // left behind by a crashed writer
      continue;
    }
    total += f.bytes;
    entries.push_back(&f);
  }
  std::sort(entries.begin(), entries.end(), [](const ScannedFile* a, const ScannedFile* b) {
    return a->mtime_ns != b->mtime_ns ? a->mtime_ns < b->mtime_ns : a->path < b->path;
  });
  size_t removed = 0;
  for (ScannedFile* f : entries) {
    if (max_bytes == 0 || total <= max_bytes) break;
    if (!keep.empty() && f->path == keep) continue;
    if (::unlink(f->path.c_str()) == 0) ++removed;
    total -= f->bytes;  // gone either way (another process may have removed it first)
  }
  std::lock_guard lock(mutex_);
  counters_.evicted += removed;
  approx_bytes_ = static_cast<int64_t>(total);
  return removed;
}

template <class Fn>
KernelCache::KernelPtr KernelCache::once(std::unordered_map<Hash128, std::shared_ptr<Slot>, Hash128Hasher>& map,
                                         const Hash128& key, bool& computed_here, Fn&& fn) {
  std::promise<KernelPtr> promise;
  std::shared_ptr<Slot> slot;
  computed_here = false;
  {
    std::lock_guard lock(mutex_);
    auto it = map.find(key);
    if (it != map.end()) {
      slot = it->second;
      ++counters_.memory_hits;
    } else {
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
  LoadResult loaded = load(key);
  if (loaded.status == LoadResult::Status::Loaded) {
    kernel->binary = std::make_shared<const std::vector<char>>(std::move(loaded.payload));
    outcome = CacheOutcome::DiskHit;
    std::lock_guard lock(mutex_);
    ++counters_.disk_hits;
    return kernel;
  }
  CompileResult result = compile();
  FJ_CHECK(result.target == inputs.target, "the compile callback built a different target than the cache key says");
  FJ_CHECK(!result.binary.empty(), "the compile callback returned an empty binary");
  outcome = CacheOutcome::Compiled;
  compile_ms = result.compile_ms;
  {
    std::lock_guard lock(mutex_);
    ++counters_.compiles;
  }
  store(key, inputs.target, result.binary, label);
  kernel->binary = std::make_shared<const std::vector<char>>(std::move(result.binary));
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

// ---- tools ----

namespace {
std::vector<char> read_file(const fs::path& path) {
  std::vector<char> bytes;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bytes;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
    read_all(fd, bytes, static_cast<size_t>(std::min<uint64_t>(st.st_size, kMaxEntryBytes + 1)));
  ::close(fd);
  return bytes;
}
}  // namespace

std::vector<CacheEntryInfo> list_cache(const fs::path& dir) {
  std::vector<ScannedFile> files = scan(dir);
  std::sort(files.begin(), files.end(), [](const ScannedFile& a, const ScannedFile& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns > b.mtime_ns : a.path < b.path;
  });
  std::vector<CacheEntryInfo> out;
  for (const auto& f : files) {
    if (f.temp) continue;
    CacheEntryInfo e;
    e.key = *f.key;
    e.path = f.path;
    e.file_bytes = f.bytes;
    e.mtime_unix = f.mtime_ns / 1000000000;
    std::vector<char> bytes = read_file(f.path);
    Decoded d = decode_entry(bytes, *f.key, std::nullopt);
    e.valid = d.problem.empty();
    e.problem = d.problem;
    if (e.valid) {
      e.label = d.label;
      e.target = d.target.name();
    }
    out.push_back(std::move(e));
  }
  return out;
}

CacheStats cache_stats(const fs::path& dir) {
  CacheStats s;
  s.dir = dir;
  for (const auto& e : list_cache(dir)) {
    ++s.entries;
    s.bytes += e.file_bytes;
    if (!e.valid) ++s.invalid;
  }
  for (const auto& f : scan(dir))
    if (f.temp) ++s.temp_files;
  return s;
}

ClearResult clear_cache(const fs::path& dir) {
  ClearResult r;
  for (const auto& f : scan(dir)) {
    if (::unlink(f.path.c_str()) == 0) {
      ++r.removed;
      r.bytes += f.bytes;
    }
  }
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() == 2 && is_hex(name)) ::rmdir(it->path().c_str());  // only succeeds when empty
  }
  return r;
}

}  // namespace fusejit::jit
