// `fusejit cache`: the one on-disk store (jit/disk_store.h) as library calls (fusejit/report.h).
#include "fusejit/report.h"

#include <sys/stat.h>

#include <cerrno>

#include <fmt/format.h>

#include "jit/cache.h"
#include "ir/parser.h"
#include "jit/disk_store.h"
#include "lib/internal.h"

namespace fusejit {
namespace {
std::filesystem::path resolve(const Options& o) {
  ir::check_path(o.cache_dir, "cache folder");
  if (!o.cache_dir.empty()) return std::filesystem::absolute(o.cache_dir);
  auto d = jit::cache_env().dir;
  if (!d) throw ir::UserError("no cache folder: set FUSEJIT_CACHE_DIR, XDG_CACHE_HOME or HOME (the last two as absolute paths)");
  return *d;
}

// Why an absent cache folder could not be made, or "": the nearest folder above it that exists is
// not a folder (a path through a regular file).
std::string absent_folder_problem(const std::filesystem::path& dir) {
  std::error_code ec;
  for (std::filesystem::path p = dir.parent_path(); !p.empty(); p = p.parent_path()) {
    const std::filesystem::file_status st = std::filesystem::symlink_status(p, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) return fmt::format("cannot inspect {}: {}", p.string(), ec.message());
    if (!ec && std::filesystem::exists(st))
      return std::filesystem::is_directory(std::filesystem::status(p, ec)) ? "" : p.string() + " is not a folder";
    if (p == p.parent_path()) break;
  }
  return "";
}

// Why a store would not use what is at `dir` (jit::folder_problem), or "" when nothing is there:
// lstat, so a dangling link is there (run makes no folder at it). The one test of cache_stats and
// cache_clear.
std::string present_folder_problem(const std::filesystem::path& dir) {
  struct stat st;
  return ::lstat(dir.c_str(), &st) == 0 || errno != ENOENT ? jit::folder_problem(dir, true) : "";
}

// Why `dir` cannot be looked into (a symbolic link loop, a path through a file, not a folder, no
// read permission):
// an error for `cache list` and `cache clear`, not "no entries"; "" for a folder or an absent one.
std::string unreadable_folder(const std::filesystem::path& dir) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(dir, ec);
  if (ec) return ec == std::errc::no_such_file_or_directory ? absent_folder_problem(dir) : ec.message();
  if (st.type() != std::filesystem::file_type::directory) return "not a folder";
  std::filesystem::directory_iterator it(dir, ec);  // a folder without read permission
  return ec ? ec.message() : "";
}
}  // namespace

std::string cache_path(const Options& o) {
  return translate_errors([&] { return resolve(o).string(); });
}

CacheStats cache_stats(const Options& o) {
  return translate_errors([&] {
    const jit::CacheEnv env = jit::cache_env();
    std::filesystem::path dir = resolve(o);
    jit::CacheStats s = jit::cache_stats(dir);
    CacheStats out;
    out.path = dir.string();
    if (!o.disk_cache || env.disabled) out.disabled_reason = "disabled";
    else if (out.disabled_reason = present_folder_problem(dir); out.disabled_reason.empty())
      out.disabled_reason = absent_folder_problem(dir);
    out.enabled = out.disabled_reason.empty();
    out.entries = static_cast<int64_t>(s.entries - s.host_entries - s.invalid);
    out.bytes = static_cast<int64_t>(s.bytes - s.host_bytes - s.invalid_bytes);
    out.cap_bytes = static_cast<int64_t>(env.max_bytes);
    out.host_modules = static_cast<int64_t>(s.host_entries);
    out.host_bytes = static_cast<int64_t>(s.host_bytes);
    out.invalid = static_cast<int64_t>(s.invalid);
    out.temp_files = static_cast<int64_t>(s.temp_files);
    out.unusable_subfolders = std::move(s.unusable_subfolders);
    return out;
  });
}

std::vector<CacheEntryInfo> cache_list(const Options& o) {
  return translate_errors([&] {
    const std::filesystem::path dir = resolve(o);
    if (std::string problem = unreadable_folder(dir); !problem.empty())
      throw ir::UserError(fmt::format("cannot list the kernel cache {}: {}", dir.string(), problem));
    std::vector<CacheEntryInfo> out;
    for (const jit::CacheEntryInfo& e : jit::list_cache(dir))
      out.push_back({e.key.hex(), e.path.string(), static_cast<int64_t>(e.file_bytes), e.label, e.target, e.valid,
                     e.problem});
    return out;
  });
}

int64_t cache_clear(const Options& o) {
  return translate_errors([&] {
    const std::filesystem::path dir = resolve(o);
    if (std::string problem = unreadable_folder(dir); !problem.empty())
      throw ir::UserError(fmt::format("cannot clear the kernel cache {}: {}", dir.string(), problem));
    // A folder a store refuses to use (open to other users, another user's) holds no files of
    // fusejit's to remove (a hostile tester's find: clear removed them where run refused the folder).
    if (std::string problem = present_folder_problem(dir); !problem.empty())
      throw ir::UserError(fmt::format("cannot clear the kernel cache {}: fusejit does not use it as one ({}), so "
                                      "its files are not fusejit's to remove",
                                      dir.string(), problem));
    jit::ClearResult r = jit::clear_cache(dir);
    jit::KernelCache::clear_all_memory();
    if (r.kept > 0)
      throw ir::UserError(fmt::format("removed {} cache entr{}, but {} could not be removed (the first: {})",
                                      r.removed, r.removed == 1 ? "y" : "ies", r.kept, r.kept_error));
    return static_cast<int64_t>(r.removed);
  });
}

}  // namespace fusejit
