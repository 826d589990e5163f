// `fusejit cache`: the on-disk kernel cache as library calls (fusejit/report.h).
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
    jit::ClearResult r = jit::clear_cache(resolve(o));
    jit::KernelCache::global().clear_memory();
    return static_cast<int64_t>(r.removed);
  });
}

}  // namespace fusejit
