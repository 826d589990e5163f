// `fusejit cache`: the on-disk kernel cache as library calls (fusejit/report.h).
#include <algorithm>
#include <cctype>

#include "fusejit/report.h"
#include "jit/cache.h"
#include "jit/host_compile.h"
#include "lib/internal.h"

namespace fusejit {
namespace {
std::filesystem::path resolve(const Options& o) {
  if (!o.cache_dir.empty()) return o.cache_dir;
  auto d = jit::cache_dir_from_env();
  if (!d) throw ir::UserError("no cache folder: set FUSEJIT_CACHE_DIR, XDG_CACHE_HOME or HOME");
  return *d;
}
// The CPU path's compiled host modules (DIR/host): KEY.so, KEY.so.sum, KEY.cpp, temporaries.
std::vector<std::filesystem::directory_entry> host_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::directory_entry> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir / "host", ec)) {
    std::string name = e.path().filename().string();
    bool ours = name.size() > 32 && std::all_of(name.begin(), name.begin() + 32, [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
    if (ours && e.is_regular_file(ec)) out.push_back(e);
  }
  return out;
}
}  // namespace

std::string cache_path(const Options& o) {
  return translate_errors([&] { return resolve(o).string(); });
}

CacheStats cache_stats(const Options& o) {
  return translate_errors([&] {
    std::filesystem::path dir = resolve(o);
    jit::CacheStats s = jit::cache_stats(dir);
    CacheStats out;
    out.path = dir.string();
    out.enabled = o.disk_cache && !jit::cache_disabled_by_env();
    out.entries = static_cast<int64_t>(s.entries);
    out.bytes = static_cast<int64_t>(s.bytes);
    out.cap_bytes = static_cast<int64_t>(jit::KernelCache::global().max_bytes());
    for (const auto& f : host_files(dir)) {
      if (f.path().extension() == ".so") ++out.host_modules;
      out.host_bytes += static_cast<int64_t>(f.file_size());
    }
    return out;
  });
}

std::vector<CacheEntryInfo> cache_list(const Options& o) {
  return translate_errors([&] {
    std::vector<CacheEntryInfo> out;
    for (const jit::CacheEntryInfo& e : jit::list_cache(resolve(o)))
      out.push_back({e.key.hex(), e.path.string(), static_cast<int64_t>(e.file_bytes), e.label, e.target, e.valid});
    return out;
  });
}

int64_t cache_clear(const Options& o) {
  return translate_errors([&] {
    std::filesystem::path dir = resolve(o);
    jit::ClearResult r = jit::clear_cache(dir);
    jit::KernelCache::global().clear_memory();
    int64_t removed = static_cast<int64_t>(r.removed);
    for (const auto& f : host_files(dir)) {
      std::error_code ec;
      if (std::filesystem::remove(f.path(), ec) && f.path().extension() == ".so") ++removed;
    }
    return removed;
  });
}

}  // namespace fusejit
