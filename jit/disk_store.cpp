// The one on-disk store; see jit/disk_store.h.
#include "jit/disk_store.h"
#include "jit/fork.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include "ir/error.h"
#include "ir/parser.h"

namespace fusejit::jit {

namespace fs = std::filesystem;

namespace {

// ---- Entry file layout (all integers little-endian) ----
//   0  8  magic "FJKCACHE"
//   8  4  format version (kCacheFormatVersion)
//  12  4  header size (kHeaderSize)
//  16 16  key (Hash128, lo then hi)
//  32 16  check hash of the same inputs (collision guard)
//  48  4  arch number (e.g. 90; 0 for host modules)
//  52  4  entry kind (EntryKind: 0 CUBIN, 1 PTX, 2 host module)
//  56  4  label size
//  60  4  reserved, 0
//  64  8  payload size
//  72 16  XXH3-128 of bytes [0,72) + label + payload
//  88     label, then payload
constexpr char kMagic[8] = {'F', 'J', 'K', 'C', 'A', 'C', 'H', 'E'};
constexpr size_t kHeaderSize = 88;
#ifdef PATH_MAX
constexpr size_t kPathMax = PATH_MAX;
#else
constexpr size_t kPathMax = 4096;  // GNU/Hurd defines none; Linux's
#endif
constexpr size_t kHashedHeader = 72;
constexpr const char* kEntrySuffix = ".fjk";
constexpr const char* kLockSuffix = ".lock";
constexpr const char* kTempPrefix = ".tmp-";             // temporary entry files, in prefix folders
constexpr const char* kBuildPrefix = ".tmp-build-";      // compiler scratch folders, in the root
constexpr const char* kKeptMark = ".kept";                 // in one kept for inspection (a failed compile's source)
// An unlocked build folder younger than this may be another machine's build in progress, where the
// cache folder is shared over a filesystem whose flock is local to each machine (NFS with local_lock).
constexpr auto kUnlockedGrace = std::chrono::minutes(10);
constexpr const char* kTmpBuildPrefix = "fusejit-lbuild-";  // the same in $TMPDIR (no disk store), locked
constexpr const char* kTmpUnlockedPrefix = "fusejit-build-";  // ... where no lock could be taken (or an older fusejit's)
constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 31;   // anything larger is not ours
constexpr auto kStale = std::chrono::hours(1);           // temp files older than this are abandoned
constexpr auto kTempInFlight = std::chrono::minutes(1);  // `cache clear` spares temp files younger than this
// A file whose time is further ahead than this while its status change time is not was given that
// time (a backup restored, `touch -d`): it counts as the oldest, not the newest, so it goes first.
// Both ahead is a clock behind the file server's: its times are kept (never abandoned, as before).
constexpr auto kFuture = std::chrono::hours(1);
constexpr auto kRescan = std::chrono::seconds(30);       // a storing process counts the folder again after this
// Another process building the same key: after kLockNote a warning says it is waited for (a
// process stopped with Ctrl-Z holds its lock), after kLockWait this one builds too. NVRTC takes
// seconds for a large kernel; a duplicate build costs only time.
constexpr auto kLockNote = std::chrono::seconds(5);
constexpr auto kLockWait = std::chrono::seconds(60);

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

std::vector<unsigned char> encode_entry(const DiskKey& key, const EntryMeta& meta, std::span<const char> payload) {
  std::vector<unsigned char> buf(kHeaderSize + meta.label.size() + payload.size());
  unsigned char* h = buf.data();
  std::memcpy(h, kMagic, 8);
  put32(h + 8, kCacheFormatVersion);
  put32(h + 12, kHeaderSize);
  key.key.to_bytes(h + 16);
  key.check.to_bytes(h + 32);
  put32(h + 48, meta.arch);
  put32(h + 52, static_cast<uint32_t>(meta.kind));
  put32(h + 56, static_cast<uint32_t>(meta.label.size()));
  put32(h + 60, 0);
  put64(h + 64, payload.size());
  content_hash(h, meta.label, payload).to_bytes(h + 72);
  std::memcpy(h + kHeaderSize, meta.label.data(), meta.label.size());
  if (!payload.empty()) std::memcpy(h + kHeaderSize + meta.label.size(), payload.data(), payload.size());
  return buf;
}

// A decoded entry, or the reason it must not be used.
struct Decoded {
  std::string problem;  // empty when valid
  EntryMeta meta;
  std::span<const char> payload;
};

// Checks every field of an entry file that should hold `expected` (and, when given, `check`).
Decoded decode_entry(std::span<const char> file, const Hash128& expected, std::optional<Hash128> check) {
  Decoded d;
  auto fail = [&](std::string why) {
    d.problem = std::move(why);
    return d;
  };
  if (file.size() < kHeaderSize) return fail(fmt::format("truncated ({} bytes, header needs {})", file.size(), kHeaderSize));
  const auto* h = reinterpret_cast<const unsigned char*>(file.data());
  if (std::memcmp(h, kMagic, 8) != 0) return fail("bad magic: not a fusejit cache entry");
  if (get32(h + 8) != kCacheFormatVersion)
    return fail(fmt::format("format version {} (this fusejit reads {})", get32(h + 8), kCacheFormatVersion));
  if (get32(h + 12) != kHeaderSize) return fail("bad header size");
  const Hash128 key = Hash128::from_bytes(h + 16);
  if (key != expected) return fail(fmt::format("holds key {} instead of {} (damaged, or copied from another key)", key.hex(), expected.hex()));
  if (check && Hash128::from_bytes(h + 32) != *check) return fail("check hash differs: another entry with a colliding key");
  const uint64_t label_size = get32(h + 56);
  const uint64_t payload_size = get64(h + 64);
  if (payload_size > kMaxEntryBytes || kHeaderSize + label_size + payload_size != file.size())
    return fail(fmt::format("size mismatch ({} bytes, header says {}): truncated or overwritten", file.size(),
                            kHeaderSize + label_size + payload_size));
  d.meta.label.assign(file.data() + kHeaderSize, label_size);
  d.payload = file.subspan(kHeaderSize + label_size, payload_size);
  if (content_hash(h, d.meta.label, d.payload) != Hash128::from_bytes(h + 72)) return fail("content hash mismatch (corrupted)");
  const uint32_t kind = get32(h + 52);
  if (kind > static_cast<uint32_t>(EntryKind::HostModule)) return fail("bad entry kind");
  d.meta.kind = static_cast<EntryKind>(kind);
  d.meta.arch = get32(h + 48);
  return d;
}

// Reads through an open descriptor until `out` holds `size` bytes (fewer if the file ends first);
// what `out` holds already stays.
void read_all(int fd, std::vector<char>& out, size_t size) {
  size_t done = out.size();
  out.resize(size);
  while (done < size) {
    ssize_t n = ::read(fd, out.data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  out.resize(done);
}

// Reads the entry file of `size` bytes open as `fd` into `out`: its header first, the rest only
// when the header's sizes add up to `size`, so an oversized file is refused unread (a 1.5 GB file
// in an entry's place was read whole, twice at once, before its header was looked at). Returns the
// problem, or "" (decode_entry then checks every field).
std::string read_entry(int fd, uint64_t size, std::vector<char>& out) {
  out.clear();
  read_all(fd, out, static_cast<size_t>(std::min<uint64_t>(size, kHeaderSize)));
  if (out.size() == kHeaderSize && size > kHeaderSize) {
    const auto* h = reinterpret_cast<const unsigned char*>(out.data());
    if (std::memcmp(h, kMagic, 8) != 0) return "bad magic: not a fusejit cache entry";
    const uint64_t payload_size = get64(h + 64), declared = kHeaderSize + get32(h + 56) + payload_size;
    if (payload_size > kMaxEntryBytes || declared != size)
      return fmt::format("size mismatch ({} bytes, header says {}): truncated or overwritten", size, declared);
    read_all(fd, out, static_cast<size_t>(size));
  }
  return "";
}

bool is_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}
int64_t stale_before_ns() { return now_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(kStale).count(); }
// The time eviction and `cache clear` order a file by: its mtime, or 0 for one set beyond kFuture.
int64_t order_time_ns(const struct stat& st) {
  const int64_t t = mtime_ns(st), ahead = now_ns() + std::chrono::duration_cast<std::chrono::nanoseconds>(kFuture).count();
  const int64_t changed = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return t > ahead && changed <= ahead ? 0 : t;
}

// Why the file described by `st` is not an entry fusejit may read ("" when it may).
std::string file_problem(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "a folder";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != ::geteuid()) return fmt::format("owned by user id {}, not by this user", st.st_uid);
  if (static_cast<uint64_t>(st.st_size) > kMaxEntryBytes + kHeaderSize)
    return fmt::format("too large ({} bytes; an entry is at most {})", st.st_size, kMaxEntryBytes + kHeaderSize);
  return "";
}

// Removes whatever is at an entry or lock path (`only_odd`: unless it is a regular file now) without
// following it: a folder with its contents only
// when it has one of their names (`<key>.fjk`, `<key>.lock`), else only when empty, so no path ever empties a folder of
// the user's (a path cut short by a system call was once one). Returns "" when nothing is left
// there, else why it could not be removed.
std::string remove_odd(const fs::path& path, bool only_odd = false) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return "";
  // A lock path's regular file is another process's new lock file, put there since it was seen.
  if (only_odd && S_ISREG(st.st_mode)) return "";
  std::error_code ec;
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return std::strerror(errno);
    return "";
  }
  if (path.extension() == kEntrySuffix || path.extension() == kLockSuffix) fs::remove_all(path, ec);
  else fs::remove(path, ec);
  return ec && ec != std::errc::no_such_file_or_directory ? ec.message() : "";
}

// ---- the environment ----

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

bool parse_switch(const char* name, const std::string& value) {
  std::string v = value;
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* yes : {"1", "true", "yes", "on"})
    if (v == yes) return true;
  for (const char* no : {"0", "false", "no", "off"})
    if (v == no) return false;
  throw ir::FileError(fmt::format("{}='{}' is not a switch: use 1 (true, yes, on) or 0 (false, no, off)", name, value), "");
}

uint64_t parse_max_mb(const std::string& value) {
  const bool digits = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits)
    throw ir::FileError(fmt::format("FUSEJIT_CACHE_MAX_MB='{}' is not a size: give the cap in MiB as a whole number "
                                    "(0 means no cap)", value), "");
  const unsigned long long mb = std::strtoull(value.c_str(), nullptr, 10);
  const size_t digits_shown = value.size() - std::min(value.find_first_not_of('0'), value.size());  // "0001" is 1
  if (digits_shown > 14 || mb >= (1ull << 43))  // MiB << 20 must fit in a signed 64-bit byte count
    throw ir::FileError(fmt::format("FUSEJIT_CACHE_MAX_MB='{}' is too large (at most {} MiB)", value, (1ull << 43) - 1), "");
  return static_cast<uint64_t>(mb) << 20;
}

// ---- the shared stores' warnings ----

std::mutex g_warn_mu;
std::function<void(const std::string&)> g_warn;

void default_warn(const std::string& message) { std::fprintf(stderr, "fusejit: warning: %s\n", message.c_str()); }

void shared_warn(const std::string& message) {
  std::function<void(const std::string&)> w;
  {
    std::lock_guard lock(g_warn_mu);
    w = g_warn;
  }
  (w ? w : default_warn)(message);
}

// ---- scanning a folder ----

enum class FileType { Entry, Temp, Lock, Build };

struct ScannedFile {
  fs::path path;
  FileType type = FileType::Entry;
  std::optional<Hash128> key;  // entries and locks
  uint64_t bytes = 0;
  int64_t mtime_ns = 0;
  int64_t order_ns = 0;  // order_time_ns: what eviction and `cache clear` go by
  std::string odd;  // at an entry's path, not a regular file: file_problem()'s words ("a FIFO", ...)
  bool kept = false;  // a build folder kept for inspection (holding kKeptMark): swept by age, not by its lock
};

std::optional<ScannedFile> classify(const fs::path& path, const std::string& name, const std::string& prefix) {
  ScannedFile f;
  f.path = path;
  const size_t hex = 32;
  if (name.starts_with(kTempPrefix)) {
    f.type = FileType::Temp;
  } else if (name.size() > hex && name.compare(0, 2, prefix) == 0 && is_hex(name.substr(0, hex)) &&
             (name.substr(hex) == kEntrySuffix || name.substr(hex) == kLockSuffix)) {
    f.type = name.substr(hex) == kEntrySuffix ? FileType::Entry : FileType::Lock;
    f.key = Hash128::from_hex(std::string_view(name).substr(0, hex));
    if (!f.key) return std::nullopt;
  } else {
    return std::nullopt;
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  f.mtime_ns = mtime_ns(st);
  f.order_ns = order_time_ns(st);
  if (!S_ISREG(st.st_mode)) {
    // A folder, FIFO or link named as an entry or lock: listed as damaged (entries) and removed by
    // `cache clear` (never followed); other odd files are not fusejit's.
    if (f.type == FileType::Temp) return std::nullopt;
    f.odd = file_problem(st);
    return f;
  }
  f.bytes = static_cast<uint64_t>(st.st_size);
  return f;
}

uint64_t folder_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

// Lists entries, temp files and lock files (in DIR/ab/) and build folders (in DIR). Never throws.
// A subfolder a store does not use (folder_problem: another owner's, or open to others) is left
// out: its files are neither the cache's entries nor fusejit's to evict, clear or count; so is a
// build folder of another user (root's `cache clear` removed another user's .tmp-build-NAME).
std::vector<ScannedFile> scan(const fs::path& dir) {
  std::vector<ScannedFile> out;
  std::error_code ec;
  fs::directory_iterator top(dir, ec), end;
  for (; !ec && top != end; top.increment(ec)) {
    const std::string prefix = top->path().filename().string();
    if (prefix.starts_with(kBuildPrefix)) {
      struct stat st, mark;
      if (::lstat(top->path().c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid())
        out.push_back({top->path(), FileType::Build, std::nullopt, folder_bytes(top->path()), mtime_ns(st),
                       order_time_ns(st), {}, ::lstat((top->path() / kKeptMark).c_str(), &mark) == 0});
      continue;
    }
    if (prefix.size() != 2 || !is_hex(prefix) || top->is_symlink(ec) || !folder_problem(top->path(), false).empty())
      continue;
    std::error_code ec2;
    for (fs::directory_iterator sub(top->path(), ec2); !ec2 && sub != end; sub.increment(ec2))
      if (auto f = classify(sub->path(), sub->path().filename().string(), prefix)) out.push_back(std::move(*f));
  }
  return out;
}

// Writes `bytes` to a fresh temporary file in `prefix` (set in `temp`; left empty when none could
// be created). Names are unique per process (pid, a per-process random nonce: pids repeat across
// containers sharing a folder) and per call (counter); O_EXCL | O_NOFOLLOW: always a new file.
// `recreate_prefix` runs when the folder vanished (a race with `cache clear`). Returns 0 or errno.
int write_temp(const fs::path& prefix, const Hash128& key, std::span<const unsigned char> bytes, fs::path& temp,
               const std::function<void()>& recreate_prefix) {
  static const uint64_t nonce = std::random_device{}() * 0x100000001ull ^ static_cast<uint64_t>(now_ns());
  static std::atomic<uint64_t> counter{0};
  const std::span<const char> chars(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  for (int attempt = 0; attempt < 3; ++attempt) {
    const fs::path name =
        prefix / fmt::format("{}{}-{}-{:x}-{}", kTempPrefix, key.hex(), ::getpid(), nonce, counter.fetch_add(1));
    const int err = write_new_file(name, chars);
    if (err != EEXIST && err != ENOENT) {
      temp = name;  // created, or refused for another reason: the caller unlinks it either way
      return err;
    }
    if (err == ENOENT) recreate_prefix();
  }
  return EEXIST;
}

// Renames `temp` to `final_path`; when a folder is in the entry's place, removes it
// (`remove_folder`) and tries once more. 0, or the errno of the failure.
int rename_into_place(const fs::path& temp, const fs::path& final_path, const std::function<void()>& remove_folder) {
  if (::rename(temp.c_str(), final_path.c_str()) == 0) return 0;
  if (errno != EISDIR && errno != ENOTEMPTY && errno != EEXIST) return errno;
  remove_folder();
  return ::rename(temp.c_str(), final_path.c_str()) == 0 ? 0 : errno;
}

// Removes a build folder unless a Scratch holds its lock (a build in progress).
bool remove_unused_build(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  std::error_code ec;
  const bool removed = ::flock(fd, LOCK_EX | LOCK_NB) == 0 && fs::remove_all(path, ec) > 0;
  unlock_and_close(fd);
  return removed;
}

// A shared flock on a fresh build folder, which must still be the one at `path` (a `cache clear`
// may have removed it, empty, before the lock): -1 when it is not, or cannot be locked.
int lock_build_folder(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  int rc = -1;
  while (fd >= 0 && (rc = ::flock(fd, LOCK_SH)) != 0 && errno == EINTR) {
  }
  struct stat held, now;
  if (fd >= 0 && rc == 0 && ::fstat(fd, &held) == 0 && ::lstat(path.c_str(), &now) == 0 &&
      held.st_ino == now.st_ino && held.st_dev == now.st_dev)
    return fd;
  if (fd >= 0) unlock_and_close(fd);
  return -1;
}

// Removes a lock file unless some process holds it.
bool remove_unused_lock(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  bool removed = ::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::unlink(path.c_str()) == 0;
  unlock_and_close(fd);
  return removed;
}

// Removes the build folders of this user that killed or interrupted runs left in $TMPDIR, once per
// process: locked ones (kTmpBuildPrefix) that no build holds, whatever their age; unlocked ones
// (kTmpUnlockedPrefix: no flock there, or an older fusejit's) an hour old.
void sweep_tmp_builds(const fs::path& tmp) {
  static std::once_flag once;
  std::call_once(once, [&] {
    const int64_t before = stale_before_ns();
    std::error_code ec;
    for (fs::directory_iterator it(tmp, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      const bool locked = name.starts_with(kTmpBuildPrefix);
      struct stat st;
      if (!locked && !name.starts_with(kTmpUnlockedPrefix)) continue;
      if (::lstat(it->path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
      if (locked) remove_unused_build(it->path());
      else if (mtime_ns(st) < before) fs::remove_all(it->path(), ec);
    }
  });
}

// An exclusive flock on a key's lock file, held until destruction.
class EntryLock {
 public:
  EntryLock() = default;
  explicit EntryLock(int fd) : fd_(fd) {}
  EntryLock(EntryLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  EntryLock& operator=(EntryLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~EntryLock() {
    if (fd_ >= 0) unlock_and_close(fd_);
  }

 private:
  int fd_ = -1;
};

// Takes an exclusive flock on `fd` (the lock file `path`), waiting up to kLockWait: after
// kLockNote a warning names the holder's lock, after kLockWait another says this one builds too.
void wait_for_lock(int fd, const fs::path& path, const std::function<void(const std::string&)>& warn) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + kLockWait;
  auto pause = std::chrono::milliseconds(1);
  bool said = false;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) break;
    const auto now = std::chrono::steady_clock::now();
    if (!said && now > start + kLockNote) {  // a stopped or hung process holds it: say so, not hang silently
      said = true;
      warn(fmt::format("waiting for another process building the same kernel (it holds {}); building it here after "
                       "{} s",
                       path.string(), std::chrono::duration_cast<std::chrono::seconds>(kLockWait).count()));
    }
    if (now > deadline) {
      warn(fmt::format("waited {} s for another process building {}; building it here too",
                       std::chrono::duration_cast<std::chrono::seconds>(kLockWait).count(), path.string()));
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

// What is at a lock path that is no lock file, from open's result `fd` (else its `err`) and the
// open file's `st` (filled): "a folder", ...; "" for a lock file, or where the open failed for a
// reason a removal would not mend.
std::string lock_path_problem(int fd, int err, struct stat& st) {
  if (fd >= 0) return ::fstat(fd, &st) != 0 ? "cannot be inspected" : file_problem(st);
  return err == ELOOP ? "a symbolic link" : err == EISDIR ? "a folder" : err == ENXIO ? "a socket" : "";
}

// Waits (up to kLockWait) for the lock of `path`; no lock (and a warning) when it cannot be had.
// A lock won on a file that `cache clear` unlinked meanwhile (it removes unused ones) excludes
// nobody: it is taken again on the file now at `path` (`retries` times). A folder, FIFO, link or
// socket where the lock belongs is removed (with a warning) and the lock taken on a new file: left
// there, every process would build the key without one.
EntryLock lock_file(const fs::path& path, const std::function<void(const std::string&)>& warn, int retries = 2) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
  struct stat st;
  const std::string problem = lock_path_problem(fd, errno, st);
  if (fd < 0 || !problem.empty()) {
    const bool regular = fd >= 0 && S_ISREG(st.st_mode);  // another user's file: left alone, as before
    if (fd >= 0) ::close(fd);
    // Build without the lock: at worst two processes build the same entry.
    if (problem.empty() || regular || retries <= 0) return {};
    if (const std::string kept = remove_odd(path, true); !kept.empty()) {
      warn(fmt::format("kernel cache lock file {} is {} and could not be deleted ({}); the kernel is built without "
                       "it (other processes may build it at the same time)", path.string(), problem, kept));
      return {};
    }
    warn(fmt::format("kernel cache lock file {} was {}; deleted", path.string(), problem));
    return lock_file(path, warn, retries - 1);
  }
  wait_for_lock(fd, path, warn);
  struct stat now;
  if (retries > 0 && (::lstat(path.c_str(), &now) != 0 || now.st_ino != st.st_ino || now.st_dev != st.st_dev)) {
    unlock_and_close(fd);
    return lock_file(path, warn, retries - 1);
  }
  return EntryLock(fd);
}

}  // namespace

// ---- files ----

int write_new_file(const fs::path& path, std::span<const char> bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  int err = 0;
  for (size_t done = 0; done < bytes.size() && !err;) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) err = n < 0 ? errno : EIO;
    else done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && !err) err = errno;
  return err;
}

std::optional<std::vector<char>> read_regular_file(const fs::path& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::optional<std::vector<char>> bytes;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) <= max_bytes) {
    bytes.emplace();
    read_all(fd, *bytes, static_cast<size_t>(st.st_size));
  }
  ::close(fd);
  return bytes;
}

// ---- environment ----

CacheEnv cache_env() {
  CacheEnv env;
  std::error_code ec;
  if (auto d = env_value("FUSEJIT_CACHE_DIR")) env.dir = fs::path(*d);
  else if (auto x = env_value("XDG_CACHE_HOME"); x && (*x)[0] == '/') env.dir = fs::path(*x) / "fusejit";
  // A relative HOME (a misconfigured service) is ignored as a relative XDG_CACHE_HOME is: taken
  // from the working directory it would scatter caches over every folder a program starts in.
  else if (auto h = env_value("HOME"); h && (*h)[0] == '/') env.dir = fs::path(*h) / ".cache" / "fusejit";
  if (env.dir && env.dir->is_relative()) {
    fs::path abs = fs::absolute(*env.dir, ec);
    if (!ec) env.dir = abs;
  }
  if (auto v = env_value("FUSEJIT_DISABLE_CACHE")) env.disabled = parse_switch("FUSEJIT_DISABLE_CACHE", *v);
  if (auto v = env_value("FUSEJIT_CACHE_MAX_MB")) env.max_bytes = parse_max_mb(*v);
  return env;
}

std::optional<fs::path> cache_dir_from_env() { return cache_env().dir; }
bool cache_disabled_by_env() { return cache_env().disabled; }

// ---- folders ----

std::string folder_problem(const fs::path& dir, bool follow) {
  // The longest name fusejit makes under the cache folder (a build folder's files, an entry's lock
  // or temp file, its subfolder included) is under kLongestName bytes: a cache folder whose files
  // would pass PATH_MAX is not used (it failed at the first build, with a warning per entry).
  // Checked for the cache folder itself (`follow`), not again for its subfolders.
  constexpr size_t kLongestName = 160;
  if (follow && dir.native().size() + kLongestName >= kPathMax)
    return fmt::format("its path is {} bytes long: names under it would pass the {}-byte path limit (PATH_MAX)",
                       dir.native().size(), kPathMax);
  struct stat st;
  if ((follow ? ::stat(dir.c_str(), &st) : ::lstat(dir.c_str(), &st)) != 0) {
    const int err = errno;
    std::error_code ec;
    if (follow && ::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode))  // a dangling link: say so (ls shows it)
      if (const fs::path to = fs::read_symlink(dir, ec); !ec)
        return fmt::format("{} is a symbolic link to {}, which cannot be inspected: {}", dir.string(), to.string(),
                           std::strerror(err));
    return fmt::format("cannot inspect {}: {}", dir.string(), std::strerror(err));
  }
  if (S_ISLNK(st.st_mode)) return fmt::format("{} is a symbolic link", dir.string());
  if (!S_ISDIR(st.st_mode)) return fmt::format("{} is not a folder", dir.string());
  if (st.st_uid != ::geteuid())
    return fmt::format("{} belongs to user id {}, not to this user (id {})", dir.string(), st.st_uid, ::geteuid());
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return fmt::format("{} may be written by its group or other users (mode {:o})", dir.string(), st.st_mode & 07777);
  // Its owner's own mode taken away (chmod 000, 500): its entries could be neither read nor replaced
  // (root is not kept out by the mode bits; a read-only filesystem is not this).
  if (::geteuid() != 0 && (st.st_mode & S_IRWXU) != S_IRWXU)
    return fmt::format("{} lacks its owner's read, write or search permission (mode {:03o}; chmod 700 gives them back)",
                       dir.string(), st.st_mode & 07777);
  return "";
}

std::string make_private_folder(const fs::path& dir) {
  fs::path p;
  for (const fs::path& part : dir) {
    p /= part;
    if (::mkdir(p.c_str(), 0700) != 0 && errno != EEXIST)
      return fmt::format("cannot create {}: {}", p.string(), std::strerror(errno));
  }
  return folder_problem(dir, true);
}

// ---- keys ----

KeyBuilder::KeyBuilder(std::string_view domain) : a_(0), b_(0x9E3779B97F4A7C15ull) {
  add(domain).add_u64(kCacheFormatVersion);
}
KeyBuilder& KeyBuilder::add(std::string_view field) {
  a_.add(field);
  b_.add(field);
  return *this;
}
KeyBuilder& KeyBuilder::add_u64(uint64_t field) {
  a_.add_u64(field);
  b_.add_u64(field);
  return *this;
}
DiskKey KeyBuilder::digest() const { return DiskKey{a_.digest(), b_.digest()}; }

std::string entry_target_name(EntryKind kind, uint32_t arch) {
  switch (kind) {
    case EntryKind::Cubin: return fmt::format("sm_{}", arch);
    case EntryKind::Ptx: return fmt::format("compute_{}", arch);
    case EntryKind::HostModule: return "host";
  }
  return "?";
}

fs::path entry_path(const fs::path& dir, const Hash128& key) {
  const std::string hex = key.hex();
  return dir / hex.substr(0, 2) / (hex + kEntrySuffix);
}

// ---- DiskStore ----

void set_cache_warning_handler(std::function<void(const std::string&)> warn) {
  std::lock_guard lock(g_warn_mu);
  g_warn = std::move(warn);
}

DiskStore::DiskStore(StoreConfig config) : config_(std::move(config)) {
  if (!config_.warn) config_.warn = default_warn;
  if (!config_.dir) return;
  dir_ = *config_.dir;
  ok_ = true;
  if (std::string problem = make_private_folder(dir_); !problem.empty()) disable(problem);
  struct stat st;
  root_is_link_ = ::lstat(dir_.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

namespace {
// The shared stores by folder. Never destroyed: a store may be used during static destruction.
struct StoreRegistry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<DiskStore>> stores;  // guarded by mu
};
StoreRegistry& store_registry() {
  static auto* r = new StoreRegistry;
  return *r;
}
}  // namespace

// Lock order as the stores take them: the registry (which warns while held), each store, the
// warning handler's lock (shared_warn).
void DiskStore::lock_shared_for_fork() {
  StoreRegistry& reg = store_registry();
  reg.mu.lock();
  for (auto& [id, store] : reg.stores) store->mutex_.lock();
  g_warn_mu.lock();
}

void DiskStore::unlock_shared_after_fork() {
  StoreRegistry& reg = store_registry();
  g_warn_mu.unlock();
  for (auto it = reg.stores.rbegin(); it != reg.stores.rend(); ++it) it->second->mutex_.unlock();
  reg.mu.unlock();
}

namespace {
// The folder as one path however it is named: "d", "d/", "./d" and a symlink to it. The store
// keeps this path, so a symlink repointed later never moves it into an unchecked folder.
fs::path resolved_folder(const fs::path& folder) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(folder, ec);
  if (ec) p = folder.lexically_normal();
  std::string s = p.string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}
}  // namespace

std::shared_ptr<DiskStore> DiskStore::shared(const std::string& dir, bool disk) {
  ir::check_path(dir, "cache folder");
  const CacheEnv env = cache_env();
  std::optional<fs::path> folder;
  bool none_set = false;
  if (disk && !env.disabled) {
    std::error_code ec;
    if (!dir.empty()) folder = resolved_folder(fs::absolute(dir, ec));
    else if (env.dir) folder = resolved_folder(*env.dir);
    else none_set = true;
  }
  const std::string id = folder ? "dir:" + folder->string() : none_set ? "none" : "off";
  StoreRegistry& reg = store_registry();
  std::lock_guard lock(reg.mu);
  auto& stores = reg.stores;
  if (auto it = stores.find(id); it != stores.end()) {
    it->second->set_max_bytes(env.max_bytes);  // FUSEJIT_CACHE_MAX_MB as it is now
    return it->second;
  }
  auto store = std::make_shared<DiskStore>(StoreConfig{folder, env.max_bytes, shared_warn});
  if (none_set)
    shared_warn("no kernel cache folder (none of FUSEJIT_CACHE_DIR, XDG_CACHE_HOME, HOME is set; a relative "
                "XDG_CACHE_HOME or HOME is ignored); continuing without the disk cache");
  stores.emplace(id, store);
  return store;
}

uint64_t DiskStore::max_bytes() const {
  std::lock_guard lock(mutex_);
  return config_.max_bytes;
}

void DiskStore::set_max_bytes(uint64_t max_bytes) {
  std::lock_guard lock(mutex_);
  config_.max_bytes = max_bytes;
}

bool DiskStore::enabled() const {
  std::lock_guard lock(mutex_);
  return ok_;
}

StoreCounters DiskStore::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void DiskStore::warn(const std::string& message) {
  std::function<void(const std::string&)> w;
  {
    std::lock_guard lock(mutex_);
    w = config_.warn;
  }
  w(message);
}

void DiskStore::disable(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    ok_ = false;
    if (warned_unusable_) return;
    warned_unusable_ = true;
  }
  // "From here on": entries this process already read from other subfolders stay loaded.
  warn(fmt::format("kernel cache folder {} is not usable ({}); from here on this process neither reads nor "
                   "writes it (what it compiles stays cached in memory)",
                   dir_.string(), why));
}

// Checks the cache folder again before each use, as at start: removed under this process, it is
// made again; replaced or opened up since (another owner, group- or world-writable), it is not
// used from here on (one warning): a load from it, or a build in it, would run what others put
// there. One stat; a use between this check and a change of the folder is not caught.
bool DiskStore::root_usable() {
  if (!enabled()) return false;
  struct stat st;
  std::string problem;
  if (::lstat(dir_.c_str(), &st) != 0 && errno == ENOENT) problem = make_private_folder(dir_);
  // Not followed unless it was a link at start: a folder made again as a link to one of ours
  // would pass the owner check, and its maker could repoint it.
  if (problem.empty()) problem = folder_problem(dir_, root_is_link_);
  if (problem.empty()) return true;
  disable(problem);
  return false;
}

// Is `prefix` (DIR/ab) a private folder of ours? "" when it is; creates it when `create`;
// replaces a file or link in its place (with a warning). A subfolder that is not private
// (another owner, say root after a `sudo` run, or group-writable) is skipped: the keys in it are
// neither loaded nor stored, one warning; any other problem (cannot create it) disables the store.
// "missing" when it does not exist and `create` is false.
std::string DiskStore::prefix_problem(const fs::path& prefix, bool create) {
  // A `cache clear` in another process removes empty prefix folders: one that vanishes between
  // the checks is looked at again, not taken for an unusable folder.
  for (int attempt = 0;; ++attempt) {
    bool own = false;
    std::string problem = prefix_problem_once(prefix, create, own);
    struct stat st;
    const bool vanished = ::lstat(prefix.c_str(), &st) != 0 && errno == ENOENT;
    if (problem.empty() || problem == "missing" || !vanished || attempt == 2) {
      if (!problem.empty() && problem != "missing") own ? skip_prefix(prefix, problem) : disable(problem);
      return problem;
    }
  }
}

std::string DiskStore::prefix_problem_once(const fs::path& prefix, bool create, bool& own) {
  struct stat st;
  const bool exists = ::lstat(prefix.c_str(), &st) == 0;
  const int err = errno;
  own = true;
  if (exists && S_ISDIR(st.st_mode)) return folder_problem(prefix, false);
  own = false;
  if (exists) discard(prefix, S_ISLNK(st.st_mode) ? "a symbolic link where a folder belongs" : "a file where a folder belongs", &st);
  else if (err != ENOENT) return fmt::format("cannot inspect {}: {}", prefix.string(), std::strerror(err));
  if (!create) return "missing";
  bool made = ::mkdir(prefix.c_str(), 0700) == 0 || errno == EEXIST;
  if (!made && errno == ENOENT) {
    // The cache folder itself was removed under this process (`rm -rf ~/.cache/fusejit`): it is
    // made again, with the checks it had at start.
    if (std::string problem = make_private_folder(dir_); !problem.empty()) return problem;
    made = ::mkdir(prefix.c_str(), 0700) == 0 || errno == EEXIST;
  }
  if (!made) return fmt::format("cannot create {}: {}", prefix.string(), std::strerror(errno));
  own = true;
  return folder_problem(prefix, false);
}

void DiskStore::skip_prefix(const fs::path& prefix, const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (!skipped_prefixes_.insert(prefix.string()).second) return;
  }
  warn(fmt::format("kernel cache subfolder {} is not used ({}): the kernels whose keys fall in it are compiled "
                   "again by each process (the other subfolders are used); mend or remove it, as its owner",
                   prefix.string(), why));
}

// Deletes a bad entry (or whatever sits at an entry path), counts it and warns once for it.
// `seen_stat` (a struct stat*) is what the reader saw: the path is left alone if another
// process has meanwhile renamed a fresh entry into place.
void DiskStore::discard(const fs::path& path, const std::string& problem, const void* seen_stat) {
  struct stat now;
  const auto* seen = static_cast<const struct stat*>(seen_stat);
  std::string kept;  // why it could not be deleted
  if (!seen || (::lstat(path.c_str(), &now) == 0 && now.st_ino == seen->st_ino && now.st_dev == seen->st_dev))
    kept = remove_odd(path);
  {
    std::lock_guard lock(mutex_);
    ++counters_.discarded;
    // fetch_or_build looks twice (before and after the key's lock): one warning for what stays
    if (!kept.empty() && !warned_discards_.insert(path.string()).second) return;
  }
  if (path.has_extension()) {  // an entry (DIR/ab/KEY.fjk)
    if (kept.empty()) warn(fmt::format("kernel cache entry {} was unusable ({}); deleted, it is rebuilt", path.string(), problem));
    else warn(fmt::format("kernel cache entry {} is unusable ({}) and could not be deleted ({}); it is rebuilt each "
                          "time it is needed", path.string(), problem, kept));
  } else if (kept.empty()) {  // a subfolder (DIR/ab)
    warn(fmt::format("kernel cache subfolder {} was unusable ({}); deleted, it is made again", path.string(), problem));
  } else {
    warn(fmt::format("kernel cache subfolder {} is unusable ({}) and could not be deleted ({})", path.string(), problem,
                     kept));
  }
}

// Warns once per path that an entry could not be put in its place (an undeletable file there).
void DiskStore::not_stored(const fs::path& path, int err) {
  {
    std::lock_guard lock(mutex_);
    if (!warned_discards_.insert(path.string()).second) return;  // discard said it cannot be deleted
  }
  warn(fmt::format("kernel cache entry {} could not be written ({}); the kernel is rebuilt each time it is needed",
                   path.string(), std::strerror(err)));
}

namespace {
// Opens an entry file to read: its descriptor, or -1 with `problem` "" (no entry) or what is there
// instead. Not opened unless it is a regular file (a device's open may act: a hostile tester's
// find), nor then, if a FIFO took its place since, blocking (O_NONBLOCK; the caller's fstat checks
// again); never through a link.
int open_entry(const fs::path& path, std::string& problem) {
  struct stat first;
  const bool seen = ::lstat(path.c_str(), &first) == 0;
  if (!seen && errno == ENOENT) return -1;
  if (seen && !S_ISREG(first.st_mode)) {
    problem = file_problem(first);
    return -1;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno != ENOENT)
    problem = errno == ELOOP ? "a symbolic link" : fmt::format("cannot be opened: {}", std::strerror(errno));
  return fd;
}
}  // namespace

LoadResult DiskStore::load(const DiskKey& key) {
  LoadResult r;
  if (!root_usable()) return r;
  const fs::path path = entry_path(dir_, key.key);
  if (!prefix_problem(path.parent_path(), false).empty()) return r;
  int fd = open_entry(path, r.problem);
  if (fd < 0) {
    if (r.problem.empty()) return r;  // no entry
    discard(path, r.problem, nullptr);
    r.status = LoadResult::Status::Discarded;
    return r;
  }
  struct stat st;
  r.problem = ::fstat(fd, &st) != 0 ? "cannot be inspected" : file_problem(st);
  std::vector<char> bytes;
  Decoded d;
  if (r.problem.empty()) r.problem = read_entry(fd, static_cast<uint64_t>(st.st_size), bytes);
  if (r.problem.empty()) {
    d = decode_entry(bytes, key.key, key.check);
    r.problem = d.problem;
  }
  if (r.problem.empty()) {
    ::futimens(fd, nullptr);  // the LRU clock: mark as just used
    ::close(fd);
    r.status = LoadResult::Status::Loaded;
    r.meta = std::move(d.meta);
    r.payload.assign(d.payload.begin(), d.payload.end());
    return r;
  }
  ::close(fd);
  discard(path, r.problem, &st);
  r.status = LoadResult::Status::Discarded;
  return r;
}

bool DiskStore::store(const DiskKey& key, const EntryMeta& meta, std::span<const char> payload) {
  if (!root_usable()) return false;
  const fs::path final_path = entry_path(dir_, key.key);
  const fs::path prefix = final_path.parent_path();
  if (!prefix_problem(prefix, true).empty()) return false;
  const std::vector<unsigned char> buf = encode_entry(key, meta, payload);
  fs::path temp;
  int err = write_temp(prefix, key.key, buf, temp, [&] { prefix_problem(prefix, true); });
  if (err && temp.empty()) {
    disable(fmt::format("cannot create a file in {}: {}", prefix.string(), std::strerror(err)));
    return false;
  }
  if (err != 0) {  // the folder takes no file (full, read-only): nothing more is written to it
    ::unlink(temp.c_str());
    disable(fmt::format("cannot write {}: {}", final_path.string(), std::strerror(err)));
    return false;
  }
  if (err = rename_into_place(temp, final_path, [&] { discard(final_path, "a folder", nullptr); }); err != 0) {
    ::unlink(temp.c_str());
    // ENOENT: a `cache clear` removed the temp file or its folder. Else this one path refuses
    // (an undeletable file there, which discard named): only this key is not stored.
    if (err != ENOENT) not_stored(final_path, err);
    return false;
  }
  counted_after_store(final_path, buf.size());
  return true;
}

// After a store of `bytes` at `final_path`: its bytes counted, the folder counted again and
// evicted down to the cap when due, and an entry over the whole cap said once.
void DiskStore::counted_after_store(const fs::path& final_path, size_t bytes_stored) {
  bool rescan = false, oversize = false;
  uint64_t cap = 0;
  {
    std::lock_guard lock(mutex_);
    if (approx_bytes_ >= 0) approx_bytes_ += static_cast<int64_t>(bytes_stored);
    // An entry over the whole cap evicts every other one: said once (a concurrency tester saw two
    // programs' entries evict each other at every run, each recompiling in turn, silently).
    oversize = config_.max_bytes > 0 && bytes_stored > config_.max_bytes && !std::exchange(warned_oversize_, true);
    // The first store of a process scans the folder (and sweeps what killed runs left). Later
    // ones count their own bytes only, so other processes' writes are seen when it scans again:
    // past the cap, past 90 % of it at most once a second (a full cache stays there), and every
    // kRescan (two processes each below the cap would otherwise fill the folder past it together).
    cap = config_.max_bytes;
    const uint64_t bytes = static_cast<uint64_t>(approx_bytes_);
    const auto since = std::chrono::steady_clock::now() - scanned_;
    rescan = approx_bytes_ < 0 || (cap > 0 && (bytes > cap || since > kRescan ||
                                               (bytes > cap - cap / 10 && since > std::chrono::seconds(1))));
  }
  if (oversize)
    warn(fmt::format("kernel cache: the entry {} ({} bytes) is larger than the cache's size cap (FUSEJIT_CACHE_MAX_MB, "
                     "{} bytes): it is kept and the other entries go, so they are built again when next used; raise "
                     "the cap",
                     final_path.string(), bytes_stored, cap));
  if (rescan) evict_impl(cap, final_path);
}

DiskStore::Fetched DiskStore::fetch_or_build(const DiskKey& key, const std::function<Built()>& build) {
  Fetched f;
  auto loaded = [&](LoadResult& l) {
    if (l.status != LoadResult::Status::Loaded) return false;
    f.payload = std::move(l.payload);
    f.meta = std::move(l.meta);
    f.from_disk = true;
    return true;
  };
  if (LoadResult l = load(key); loaded(l)) return f;
  EntryLock lock;
  if (root_usable()) {
    fs::path lock_path = entry_path(dir_, key.key);
    lock_path.replace_extension(kLockSuffix);
    if (prefix_problem(lock_path.parent_path(), true).empty()) {
      lock = lock_file(lock_path, [this](const std::string& m) { warn(m); });
      if (LoadResult l = load(key); loaded(l)) return f;  // built by whoever held the lock
    }
  }
  Built b = build();
  store(key, b.meta, b.payload);
  f.payload = std::move(b.payload);
  f.meta = std::move(b.meta);
  return f;
}

namespace {
// Removes what a killed run left behind (no entry): a build folder no build holds, once
// kUnlockedGrace old (a killed run's, or one a process left by exiting mid-build); a temporary
// file, lock file or kept build folder older than `stale`.
void sweep_abandoned(const ScannedFile& f, int64_t stale) {
  if (f.type == FileType::Entry) return;
  const int64_t grace = now_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(kUnlockedGrace).count();
  if (f.type == FileType::Build && !f.kept && f.order_ns < grace) remove_unused_build(f.path);
  if (f.order_ns >= stale) return;
  if (f.type == FileType::Temp) ::unlink(f.path.c_str());
  else if (f.type == FileType::Lock && !f.odd.empty()) remove_odd(f.path, true);
  else if (f.type == FileType::Lock) remove_unused_lock(f.path);
  else if (f.kept) remove_unused_build(f.path);
}
}  // namespace

size_t DiskStore::evict_to(uint64_t max_bytes) { return evict_impl(max_bytes, {}); }

size_t DiskStore::evict_impl(uint64_t max_bytes, const fs::path& keep) {
  if (dir_.empty() || !enabled()) return 0;
  std::vector<ScannedFile> files = scan(dir_);
  const int64_t stale = stale_before_ns();
  uint64_t total = 0;
  std::vector<ScannedFile*> entries;
  for (auto& f : files) {  // scan leaves out a subfolder skipped (skip_prefix): neither counted nor touched
    if (f.type == FileType::Entry && f.odd.empty()) {  // an odd one: a load removes it, with a warning
      total += f.bytes;
      entries.push_back(&f);
    } else {
      sweep_abandoned(f, stale);
    }
  }
  std::sort(entries.begin(), entries.end(), [](const ScannedFile* a, const ScannedFile* b) {
    return a->order_ns != b->order_ns ? a->order_ns < b->order_ns : a->path < b->path;
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
  scanned_ = std::chrono::steady_clock::now();
  return removed;
}

DiskStore::Scratch::~Scratch() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
  if (fd_ >= 0) unlock_and_close(fd_);
}

std::string kept_source(DiskStore::Scratch& scratch, const fs::path& file) {
  const fs::path folder = scratch.path();
  const fs::path kept = scratch.keep();
  return kept.empty() ? "source not kept: cannot mark " + folder.string() + " kept (it is removed)"
                      : "source kept for inspection: " + (kept / file).string();
}

fs::path DiskStore::Scratch::keep() {
  // Marked while locked: an unlocked build folder without the mark is an abandoned build's,
  // removed at a sweep ten minutes on; a marked one stays an hour. Unmarked, it is not kept.
  if (in_store_ && write_new_file(path_ / kKeptMark, std::span<const char>()) != 0) return {};
  if (fd_ >= 0) unlock_and_close(std::exchange(fd_, -1));
  return std::exchange(path_, {});
}

namespace {
// The temporary folder as std::filesystem::temp_directory_path finds it (TMPDIR, TMP, TEMP,
// TEMPDIR, else /tmp), but an empty variable counts as unset (as mktemp and Python's tempfile
// read TMPDIR), and a bad one is named in the error.
fs::path temp_folder() {
  for (const char* name : {"TMPDIR", "TMP", "TEMP", "TEMPDIR"}) {
    const std::optional<std::string> v = env_value(name);
    if (!v) continue;
    struct stat st;
    const int rc = ::stat(v->c_str(), &st);
    if (rc != 0 || !S_ISDIR(st.st_mode))
      throw std::runtime_error(fmt::format("no temporary folder for a kernel build: {}={}: {}; set {} to a writable "
                                           "folder", name, *v, rc != 0 ? std::strerror(errno) : "not a folder", name));
    return *v;
  }
  return "/tmp";
}
}  // namespace

DiskStore::Scratch DiskStore::scratch() {
  for (int attempt = 0; attempt < 3 && (attempt > 0 || root_usable()) && enabled(); ++attempt) {
    std::string tmpl = (dir_ / (std::string(kBuildPrefix) + "XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) {
      // The cache folder was removed under this process: made again, with its checks at start.
      if (errno == ENOENT && make_private_folder(dir_).empty()) continue;
      break;
    }
    if (const int fd = lock_build_folder(tmpl); fd >= 0) return Scratch(tmpl, fd, true);
    std::error_code ec;
    fs::remove_all(tmpl, ec);  // removed by a `cache clear` before it was locked: another name
  }
  const fs::path tmp = temp_folder();
  sweep_tmp_builds(tmp);
  // Locked as in the store, so the next process's sweep removes one an interrupted run left; where
  // no lock can be had (a filesystem without flock), unlocked under another name, swept by age.
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::string tmpl = (tmp / (std::string(kTmpBuildPrefix) + "XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) break;  // said below
    if (const int fd = lock_build_folder(tmpl); fd >= 0) return Scratch(tmpl, fd, false);
    std::error_code ec;
    fs::remove_all(tmpl, ec);
  }
  std::string tmpl = (tmp / (std::string(kTmpUnlockedPrefix) + "XXXXXX")).string();
  if (!::mkdtemp(tmpl.data()))  // mode 0700, a fresh name
    throw std::runtime_error(fmt::format("cannot create a build folder in {}: {}", tmp.string(), std::strerror(errno)));
  return Scratch(tmpl, -1, false);
}

// ---- tools ----

std::vector<CacheEntryInfo> list_cache(const fs::path& dir) {
  std::vector<ScannedFile> files = scan(dir);
  std::sort(files.begin(), files.end(), [](const ScannedFile& a, const ScannedFile& b) {
    return a.mtime_ns != b.mtime_ns ? a.mtime_ns > b.mtime_ns : a.path < b.path;
  });
  std::vector<CacheEntryInfo> out;
  for (const auto& f : files) {
    if (f.type != FileType::Entry) continue;
    CacheEntryInfo e;
    e.key = *f.key;
    e.path = f.path;
    e.file_bytes = f.bytes;
    e.mtime_unix = f.mtime_ns / 1000000000;
    if (!f.odd.empty()) {
      e.valid = false;
      e.problem = f.odd + " where an entry belongs";
      out.push_back(std::move(e));
      continue;
    }
    std::vector<char> bytes;
    Decoded d;
    const int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || ::fstat(fd, &st) != 0) d.problem = "unreadable";
    else if (d.problem = file_problem(st); d.problem.empty()) d.problem = read_entry(fd, static_cast<uint64_t>(st.st_size), bytes);
    if (fd >= 0) ::close(fd);
    if (d.problem.empty()) d = decode_entry(bytes, *f.key, std::nullopt);
    e.valid = d.problem.empty();
    e.problem = d.problem;
    if (e.valid) {
      e.kind = d.meta.kind;
      e.label = d.meta.label;
      e.target = entry_target_name(d.meta.kind, d.meta.arch);
    }
    out.push_back(std::move(e));
  }
  return out;
}

namespace {
// Why each subfolder (DIR/ab) a store does not use is not used (folder_problem), sorted.
std::vector<std::string> unusable_subfolders(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator top(dir, ec), end; !ec && top != end; top.increment(ec)) {
    const std::string name = top->path().filename().string();
    struct stat st;
    if (name.size() == 2 && is_hex(name) && ::lstat(top->path().c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      if (std::string problem = folder_problem(top->path(), false); !problem.empty()) out.push_back(std::move(problem));
  }
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

CacheStats cache_stats(const fs::path& dir) {
  CacheStats s;
  s.dir = dir;
  s.unusable_subfolders = unusable_subfolders(dir);  // list_cache leaves their entries out (scan)
  for (const auto& e : list_cache(dir)) {
    ++s.entries;
    s.bytes += e.file_bytes;
    if (!e.valid) {
      ++s.invalid;
      s.invalid_bytes += e.file_bytes;
    }
    if (e.valid && e.kind == EntryKind::HostModule) {
      ++s.host_entries;
      s.host_bytes += e.file_bytes;
    }
  }
  for (const auto& f : scan(dir))
    if (f.type == FileType::Temp || f.type == FileType::Build) ++s.temp_files;
  return s;
}

namespace {
// Removes one file `cache clear` found: an unused lock or build folder, an entry or temporary
// file. An entry that stays (not one another process removed first) is counted in r.kept.
bool remove_found(const ScannedFile& f, ClearResult& r) {
  if (f.type == FileType::Lock) return f.odd.empty() ? remove_unused_lock(f.path) : remove_odd(f.path, true).empty();
  if (f.type == FileType::Build) return remove_unused_build(f.path);  // kept or not: unless a build holds it
  if (!f.odd.empty()) {
    struct stat st;
    if (remove_odd(f.path).empty() || ::lstat(f.path.c_str(), &st) != 0) return true;
    if (r.kept++ == 0) r.kept_error = fmt::format("{}: {} that could not be removed", f.path.string(), f.odd);
    return false;
  }
  if (::unlink(f.path.c_str()) == 0) return true;
  if (f.type == FileType::Entry && errno != ENOENT && r.kept++ == 0)
    r.kept_error = fmt::format("{}: {}", f.path.string(), std::strerror(errno));
  return false;
}
}  // namespace

ClearResult clear_cache(const fs::path& dir) {
  ClearResult r;
  const int64_t in_flight = now_ns() - std::chrono::duration_cast<std::chrono::nanoseconds>(kTempInFlight).count();
  for (const auto& f : scan(dir)) {
    if (f.type == FileType::Temp && f.order_ns >= in_flight) continue;  // between a write and its rename
    if (!remove_found(f, r)) continue;
    r.bytes += f.bytes;
    if (f.type == FileType::Entry) ++r.removed;
  }
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() == 2 && is_hex(name) && folder_problem(it->path(), false).empty())
      ::rmdir(it->path().c_str());  // only succeeds when empty
  }
  return r;
}

}  // namespace fusejit::jit
