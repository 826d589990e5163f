// Kernel cache timing: an in-memory hit (should cost microseconds), a disk hit (well under a
// millisecond) and, for scale, the NVRTC compile they replace. Run by hand:
//   build/bench/bench_cache [iterations]
// Uses a private temporary cache folder; prints a small table to stdout.
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "jit/arch.h"
#include "jit/cache.h"
#include "jit/nvrtc.h"

namespace fusejit::jit {
extern const char* const kScalarPrelude;  // embedded ir/scalar/fj_scalar.h
}

using namespace fusejit::jit;
using Clock = std::chrono::steady_clock;

namespace {

struct Stats {
  double median_us, p90_us, min_us;
};

template <class Fn>
Stats time_calls(int n, Fn&& fn) {
  std::vector<double> us(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    fn();
    us[static_cast<size_t>(i)] = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  }
  std::sort(us.begin(), us.end());
  return Stats{us[us.size() / 2], us[us.size() * 9 / 10], us.front()};
}

void row(const char* what, const Stats& s) {
  std::printf("%-44s %12.2f %12.2f %12.2f\n", what, s.median_us, s.p90_us, s.min_us);
}

// A timed call that was meant to hit the cache missed it (the timing would not be a hit's).
std::runtime_error Miss(const char* what) { return std::runtime_error(std::string("expected a ") + what + " hit, got a miss"); }

// A private cache folder under the temp folder, removed with what it holds when the run ends
// (also when it throws).
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::error_code ec;
    const std::filesystem::path root = std::filesystem::temp_directory_path(ec);
    const char* env = std::getenv("TMPDIR");
    if (ec) throw std::runtime_error("no temp folder (TMPDIR=" + std::string(env ? env : "") + "): " + ec.message());
    std::string tmpl = (root / "fj-bench-cache-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("cannot make a folder " + tmpl + ": " + std::strerror(errno));
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

int bench(int n) {
  TempDir tmp;
  const std::filesystem::path& dir = tmp.path;

  // A generated-kernel-sized source: the scalar prelude plus a small fused kernel.
  const std::string kernel =
      "extern \"C\" __global__ void fj_bench(const float* __restrict__ x, float* __restrict__ y, long long n) {\n"
      "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
      "       i += (long long)gridDim.x * blockDim.x) {\n"
      "    float v1 = x[i] * 0.5f;   // [bench.txt:2]\n"
      "    float v2 = v1 + 1.0f;     // [bench.txt:3]\n"
      "    y[i] = v2 * v2;           // [bench.txt:4]\n"
      "  }\n}\n";
  std::string source = std::string(kScalarPrelude) + "\n" + kernel;
  CompileRequest req{parse_target("sm_90"), default_compile_options(false), {}};
  DiskKeyInputs inputs = make_key_inputs(source, req, "bench");
  auto compile = [&] { return compile_cuda(inputs.source, "fj_bench.cu", compile_request_of(inputs)); };
  try {
    compile();
  } catch (const CompileError&) {  // prelude not compilable yet: time with the kernel alone
    inputs = make_key_inputs(kernel, req, "bench");
  }

  KernelCache warm(CacheConfig{dir, kDefaultCacheMaxBytes, true, true, {}});
  auto first = warm.get_or_compile(inputs, compile, "fj_bench");
  std::printf("NVRTC %s, target %s, source %zu bytes, binary %zu bytes, %d iterations\n", nvrtc_version().str().c_str(),
              req.target.name().c_str(), inputs.source.size(), first.kernel->binary->size(), n);
  std::printf("%-44s %12s %12s %12s\n", "operation", "median us", "p90 us", "min us");
  std::printf("%-44s %12.2f %12s %12s\n", "NVRTC compile (first call, for scale)", first.compile_ms * 1000, "-", "-");

  const Hash128 skey{0x1234, 0x5678};
  warm.get_or_build(skey, [&] { return KernelCache::Generated{inputs, "fj_bench", nullptr}; },
                    [&](const KernelCache::Generated&) { return compile(); });
  row("memory hit by structural key (get_or_build)", time_calls(n * 50, [&] {
        auto r = warm.get_or_build(skey, [&]() -> KernelCache::Generated { throw Miss("memory"); },
                                   [&](const KernelCache::Generated&) -> CompileResult { throw Miss("memory"); });
        if (r.outcome != CacheOutcome::MemoryHit) throw Miss("memory");
      }));
  row("memory hit by disk key (hashes the source)", time_calls(n * 10, [&] {
        if (warm.get_or_compile(inputs, compile).outcome != CacheOutcome::MemoryHit) throw Miss("memory");
      }));
  row("disk key only (XXH3-128 of the inputs)", time_calls(n * 10, [&] { (void)disk_key(inputs); }));

  KernelCache cold(CacheConfig{dir, kDefaultCacheMaxBytes, true, /*memory=*/false, {}});
  row("disk hit (open, read, verify, touch)", time_calls(n, [&] {
        if (cold.get_or_compile(inputs, compile).outcome != CacheOutcome::DiskHit) throw Miss("disk");
      }));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string a1 = argc > 1 ? argv[1] : "";
  if (a1 == "--help" || a1 == "-h") {
    std::printf("usage: bench_cache [ITERATIONS (10 to 10^6; default 2000)]\n");
    return 0;
  }
  char* end = nullptr;
  const long iters = argc > 1 ? std::strtol(argv[1], &end, 10) : 2000;
  if (argc > 2 || (argc > 1 && (end == argv[1] || *end != '\0' || iters < 10 || iters > 1000000))) {
    std::fprintf(stderr, "usage: bench_cache [ITERATIONS (10 to 10^6; default 2000)]\n");
    return 2;
  }
  try {  // no NVRTC, no temp folder: a message, not std::terminate
    return bench(static_cast<int>(iters));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cache: %s\n", e.what());
    return 1;
  }
}
