// The kernel cache: key stability across processes, key sensitivity, damaged entries, many
// processes and threads on one folder, unwritable folders, LRU eviction, FUSEJIT_DISABLE_CACHE,
// and the `fusejit cache` operations. Child processes are this executable re-run with
// FJ_CACHE_TEST_CHILD set (handled before doctest's main runs).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ir/error.h"
#include "jit/cache.h"
#include "jit/nvrtc.h"

extern char** environ;

using namespace fusejit::jit;
namespace fs = std::filesystem;

namespace {

const char* kCodegen = "test-codegen-7";

DiskKeyInputs golden_inputs() {
  return DiskKeyInputs{"extern \"C\" __global__ void fj_k(float* p) { p[0] = 1.0f; }\n", "13.0",
                       {"--std=c++17", "--fmad=false", "-default-device"}, Target{Arch{9, 0}, OutputKind::Cubin},
                       kCodegen};
}

DiskKeyInputs inputs_n(int i) {
  DiskKeyInputs in = golden_inputs();
  in.source = "// kernel " + std::to_string(i) + "\n" + in.source;
  return in;
}

// A stand-in for NVRTC: deterministic bytes derived from everything in the inputs.
std::vector<char> fake_binary(const DiskKeyInputs& in) {
  std::string s = "FAKEBIN|" + in.target.name() + "|" + in.codegen_version + "|" + in.source;
  for (const auto& o : in.options) s += "|" + o;
  return std::vector<char>(s.begin(), s.end());
}

CompileResult fake_compile(const DiskKeyInputs& in, int sleep_ms = 0) {
  if (sleep_ms) std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  CompileResult r;
  r.target = in.target;
  r.binary = fake_binary(in);
  r.compile_ms = 1.5;
  return r;
}

const std::string kRealKernel =
    "extern \"C\" __global__ void fj_real(const float* x, float* y, long long n) {\n"
    "  for (long long i = threadIdx.x; i < n; i += blockDim.x) y[i] = x[i] * 2.0f + 1.0f;  // [g.txt:1]\n"
    "}\n";

uint64_t bytes_hash(const std::vector<char>& b) { return xxh3_128(std::string_view(b.data(), b.size())).lo; }

fs::path make_temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "fj-cache-test-XXXXXX").string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

struct Warnings {
  std::mutex mu;
  std::vector<std::string> list;
  std::function<void(const std::string&)> handler() {
    return [this](const std::string& m) {
      std::lock_guard lock(mu);
      list.push_back(m);
    };
  }
};

CacheConfig config_for(const fs::path& dir, std::function<void(const std::string&)> warn = [](const std::string&) {}) {
  CacheConfig c;
  c.dir = dir;
  c.warn = std::move(warn);
  return c;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

// ---- child processes ----

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  REQUIRE(n > 0);
  return std::string(buf, static_cast<size_t>(n));
}

struct Child {
  pid_t pid = -1;
  int out_fd = -1;
};

// Starts this executable with extra environment variables; its stdout comes back through a pipe.
Child spawn_child(const std::vector<std::string>& extra_env) {
  std::string exe = self_exe();
  std::vector<std::string> env_store;
  auto overridden = [&](std::string_view var) {
    for (const auto& e : extra_env)
      if (var.substr(0, var.find('=') + 1) == std::string_view(e).substr(0, e.find('=') + 1)) return true;
    return false;
  };
  for (char** e = environ; *e; ++e)
    if (!overridden(*e)) env_store.emplace_back(*e);
  for (const auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> envp;
  for (auto& s : env_store) envp.push_back(s.data());
  envp.push_back(nullptr);
  char* argv[] = {exe.data(), nullptr};
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execve(exe.c_str(), argv, envp.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  return Child{pid, fds[0]};
}

// Waits for the child; returns (exit status, stdout).
std::pair<int, std::string> finish_child(Child c) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(c.out_fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(c.out_fd);
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

constexpr int kWorkerKernels = 6;

// Worker: 4 threads ask one shared KernelCache for the same kernels (in different orders) plus a
// real NVRTC kernel; every result is checked and no key may be compiled twice in this process.
int run_worker() {
  if (const char* at = std::getenv("FJ_CACHE_TEST_START_NS")) {  // start together with the others
    auto start = std::chrono::system_clock::time_point(std::chrono::nanoseconds(std::strtoll(at, nullptr, 10)));
    std::this_thread::sleep_until(start);
  }
  KernelCache cache(CacheConfig{std::nullopt, kDefaultCacheMaxBytes, true, true,
                                [](const std::string& w) { std::fprintf(stderr, "warning: %s\n", w.c_str()); }});
  std::atomic<int> compiles[kWorkerKernels + 1] = {};
  std::atomic<int> disk_hits{0}, bad{0};
  std::mutex mu;
  std::set<uint64_t> real_hashes;
  CompileRequest real_req{Target{Arch{8, 0}, OutputKind::Cubin}, default_compile_options(false), {}};
  DiskKeyInputs real = make_key_inputs(kRealKernel, real_req, kCodegen);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j <= kWorkerKernels; ++j) {
        int i = (j + t * 2) % (kWorkerKernels + 1);
        CacheResult r;
        if (i == kWorkerKernels) {
          r = cache.get_or_compile(real, [&] {
            compiles[i]++;
            return compile_cuda(real.source, "fj_real.cu", compile_request_of(real));
          });
          std::lock_guard lock(mu);
          real_hashes.insert(bytes_hash(*r.kernel->binary));
        } else {
          DiskKeyInputs in = inputs_n(i);
          r = cache.get_or_compile(in, [&] {
            compiles[i]++;
            return fake_compile(in, 30);
          });
          if (*r.kernel->binary != fake_binary(in)) bad++;
        }
        if (r.outcome == CacheOutcome::DiskHit) disk_hits++;
      }
    });
  }
  for (auto& th : threads) th.join();
  int total = 0;
  for (auto& c : compiles) {
    if (c > 1) bad++;  // compiled twice in one process
    total += c;
  }
  if (real_hashes.size() != 1) bad++;
  std::printf("compiles=%d disk_hits=%d real=%llx bad=%d\n", total, disk_hits.load(),
              static_cast<unsigned long long>(real_hashes.empty() ? 0 : *real_hashes.begin()), bad.load());
  return bad == 0 ? 0 : 1;
}

// Runs before doctest's main when this executable is started as a child.
const int child_mode = [] {
  const char* mode = std::getenv("FJ_CACHE_TEST_CHILD");
  if (!mode) return 0;
  std::string m(mode);
  if (m == "key") {
    DiskKey k = disk_key(golden_inputs());
    std::printf("%s %s\n", k.key.hex().c_str(), k.check.hex().c_str());
    std::fflush(stdout);
    std::_Exit(0);
  }
  if (m == "worker") {
    int rc = run_worker();
    std::fflush(stdout);
    std::_Exit(rc);
  }
  std::_Exit(99);
}();

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST_CASE("the disk key is the same in another process and on another machine") {
  DiskKey here = disk_key(golden_inputs());
  auto [rc, out] = finish_child(spawn_child({"FJ_CACHE_TEST_CHILD=key"}));
  REQUIRE(rc == 0);
  CHECK(out == here.key.hex() + " " + here.check.hex() + "\n");
  // Golden value: a change here means every user's cache is invalidated; bump
  // kCacheFormatVersion on purpose when that is intended, and update these.
  CHECK(here.key.hex() == "52c5d7946bb7252a3cfa02bd6b686d52");
  CHECK(here.check.hex() == "4a693db0a9d591a16facef793f006896");
  CHECK(here.key != here.check);
}

TEST_CASE("the disk key changes with every input that changes the binary") {
  std::vector<std::pair<std::string, DiskKeyInputs>> variants;
  DiskKeyInputs base = golden_inputs();
  auto add = [&](std::string what, auto change) {
    DiskKeyInputs v = base;
    change(v);
    variants.emplace_back(std::move(what), std::move(v));
  };
  add("source", [](DiskKeyInputs& v) { v.source.replace(v.source.find("1.0f"), 4, "2.0f"); });
  add("source trailing newline", [](DiskKeyInputs& v) { v.source += "\n"; });
  add("nvrtc version", [](DiskKeyInputs& v) { v.compiler_version = "13.1"; });
  add("option changed", [](DiskKeyInputs& v) { v.options[1] = "--fmad=true"; });
  add("option added", [](DiskKeyInputs& v) { v.options.push_back("--use_fast_math"); });
  add("option removed", [](DiskKeyInputs& v) { v.options.pop_back(); });
  add("options reordered", [](DiskKeyInputs& v) { std::swap(v.options[0], v.options[1]); });
  add("options re-split", [](DiskKeyInputs& v) { v.options = {"--std=c++17--fmad=false", "-default-device"}; });
  add("arch", [](DiskKeyInputs& v) { v.target.arch = Arch{10, 0}; });
  add("arch minor", [](DiskKeyInputs& v) { v.target.arch = Arch{8, 9}; });
  add("output kind", [](DiskKeyInputs& v) { v.target.kind = OutputKind::Ptx; });
  add("codegen version", [](DiskKeyInputs& v) { v.codegen_version = "test-codegen-8"; });
  std::set<Hash128> keys{disk_key(base).key};
  std::set<Hash128> checks{disk_key(base).check};
  for (const auto& [what, v] : variants) {
    CAPTURE(what);
    CHECK(keys.insert(disk_key(v).key).second);
    CHECK(checks.insert(disk_key(v).check).second);
  }
  CHECK(disk_key(golden_inputs()) == disk_key(base));  // and nothing else changes it
  DiskKeyInputs no_version = base;
  no_version.codegen_version.clear();
  CHECK_THROWS_AS(disk_key(no_version), fusejit::ir::InternalError);
}

TEST_CASE("Hash128 text and byte forms round-trip") {
  Hash128 h{0x0123456789abcdefull, 0xfedcba9876543210ull};
  CHECK(h.hex() == "fedcba98765432100123456789abcdef");
  CHECK(Hash128::from_hex(h.hex()) == h);
  CHECK(!Hash128::from_hex("xyz"));
  CHECK(!Hash128::from_hex(std::string(32, 'g')));
  unsigned char b[16];
  h.to_bytes(b);
  CHECK(b[0] == 0xef);
  CHECK(Hash128::from_bytes(b) == h);
  CHECK(entry_path("/c", h) == fs::path("/c/fe/fedcba98765432100123456789abcdef.fjk"));
}

TEST_CASE("memory hit, then disk hit in a fresh cache, outcomes and counters") {
  fs::path dir = make_temp_dir();
  DiskKeyInputs in = inputs_n(1);
  int calls = 0;
  auto compile = [&] {
    ++calls;
    return fake_compile(in);
  };
  KernelCache a(config_for(dir));
  CacheResult r1 = a.get_or_compile(in, compile, "fj_k1");
  CHECK(r1.outcome == CacheOutcome::Compiled);
  CHECK(r1.compile_ms == 1.5);
  CacheResult r2 = a.get_or_compile(in, compile);
  CHECK(r2.outcome == CacheOutcome::MemoryHit);
  CHECK(r2.kernel == r1.kernel);
  CHECK(r2.compile_ms == 0);
  KernelCache b(config_for(dir));
  CacheResult r3 = b.get_or_compile(in, compile);
  CHECK(r3.outcome == CacheOutcome::DiskHit);
  CHECK(*r3.kernel->binary == fake_binary(in));
  CHECK(r3.kernel->target == in.target);
  CHECK(calls == 1);
  CHECK(a.counters().compiles == 1);
  CHECK(a.counters().memory_hits == 1);
  CHECK(b.counters().disk_hits == 1);
  CHECK(std::string(to_string(CacheOutcome::DiskHit)) == "disk hit");

  // memory = false: nothing kept between calls, so the second call reads the disk.
  CacheConfig nomem = config_for(dir);
  nomem.memory = false;
  KernelCache c(nomem);
  CHECK(c.get_or_compile(in, compile).outcome == CacheOutcome::DiskHit);
  CHECK(c.get_or_compile(in, compile).outcome == CacheOutcome::DiskHit);
  fs::remove_all(dir);
}

TEST_CASE("get_or_build: a memory hit skips code generation; user data comes back") {
  fs::path dir = make_temp_dir();
  int generated = 0, compiled = 0;
  auto generate = [&] {
    ++generated;
    return KernelCache::Generated{inputs_n(2), "fj_k2", std::make_shared<int>(42)};
  };
  auto compile = [&](const KernelCache::Generated& g) {
    ++compiled;
    return fake_compile(g.inputs);
  };
  Hash128 skey{1, 2};
  KernelCache a(config_for(dir));
  CacheResult r1 = a.get_or_build(skey, generate, compile);
  CHECK(r1.outcome == CacheOutcome::Compiled);
  CacheResult r2 = a.get_or_build(skey, generate, compile);
  CHECK(r2.outcome == CacheOutcome::MemoryHit);
  CHECK(generated == 1);
  CHECK(compiled == 1);
  REQUIRE(r2.kernel->user_data);
  CHECK(*std::static_pointer_cast<const int>(r2.kernel->user_data) == 42);
  CHECK(r2.kernel->label == "fj_k2");
  CHECK(r2.kernel->source == inputs_n(2).source);
  // Another structural key generating the same source shares the binary (memory hit by disk key).
  CacheResult r3 = a.get_or_build(Hash128{3, 4}, generate, compile);
  CHECK(r3.outcome == CacheOutcome::MemoryHit);
  CHECK(generated == 2);
  CHECK(compiled == 1);
  CHECK(r3.kernel->binary == r1.kernel->binary);
  // A new process (fresh cache): generation runs again, the binary comes from disk.
  KernelCache b(config_for(dir));
  CacheResult r4 = b.get_or_build(skey, generate, compile);
  CHECK(r4.outcome == CacheOutcome::DiskHit);
  CHECK(generated == 3);
  CHECK(compiled == 1);
  fs::remove_all(dir);
}

TEST_CASE("many threads asking for the same keys compile each key once") {
  fs::path dir = make_temp_dir();
  KernelCache cache(config_for(dir));
  std::atomic<int> generated{0}, compiled[8] = {};
  std::vector<std::thread> threads;
  std::mutex mu;
  std::map<int, std::set<const CachedKernel*>> seen;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      for (int j = 0; j < 8; ++j) {
        int i = (j + t) % 8;
        CacheResult r = cache.get_or_build(
            Hash128{static_cast<uint64_t>(i), 99},
            [&] {
              generated++;
              return KernelCache::Generated{inputs_n(100 + i), "", nullptr};
            },
            [&](const KernelCache::Generated& g) {
              compiled[i]++;
              return fake_compile(g.inputs, 20);
            });
        CHECK(*r.kernel->binary == fake_binary(inputs_n(100 + i)));
        std::lock_guard lock(mu);
        seen[i].insert(r.kernel.get());
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(generated == 8);
  for (auto& c : compiled) CHECK(c == 1);
  for (auto& [i, s] : seen) CHECK(s.size() == 1);
  CHECK(list_cache(dir).size() == 8);
  fs::remove_all(dir);
}

TEST_CASE("a compile error reaches every waiting thread and nothing is cached") {
  fs::path dir = make_temp_dir();
  KernelCache cache(config_for(dir));
  DiskKeyInputs in = inputs_n(3);
  std::atomic<int> calls{0}, caught{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      try {
        cache.get_or_compile(in, [&]() -> CompileResult {
          calls++;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          throw CompileError("boom", "log", {}, in.source, {});
        });
      } catch (const CompileError& e) {
        if (std::string(e.what()) == "boom") caught++;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(caught == 4);
  CHECK(calls >= 1);
  CHECK(list_cache(dir).empty());
  int before = calls;
  CHECK(cache.get_or_compile(in, [&] { calls++; return fake_compile(in); }).outcome == CacheOutcome::Compiled);
  CHECK(calls == before + 1);
  fs::remove_all(dir);
}

TEST_CASE("truncated, bit-flipped, foreign, colliding and garbage entries are recompiled, never loaded") {
  fs::path dir = make_temp_dir();
  DiskKeyInputs in = inputs_n(4);
  DiskKeyInputs other = inputs_n(5);
  const DiskKey key = disk_key(in);
  const fs::path path = entry_path(dir, key.key);
  {
    KernelCache seed(config_for(dir));
    seed.get_or_compile(in, [&] { return fake_compile(in); }, "fj_k4");
    seed.get_or_compile(other, [&] { return fake_compile(other); }, "fj_k5");
  }
  const std::string good = read_text(path);
  const std::string other_file = read_text(entry_path(dir, disk_key(other).key));
  REQUIRE(good.size() > 100);

  struct Damage {
    const char* what;
    std::function<void()> apply;
    const char* problem;  // expected in LoadResult::problem
  };
  auto flip = [&](size_t offset) {
    return [&, offset] {
      std::string s = good;
      s[offset] = static_cast<char>(s[offset] ^ 0x10);
      write_text(path, s);
    };
  };
  std::vector<Damage> damages = {
      {"truncated to half", [&] { write_text(path, good.substr(0, good.size() / 2)); }, "size mismatch"},
      {"truncated inside the header", [&] { write_text(path, good.substr(0, 40)); }, "truncated"},
      {"empty file", [&] { write_text(path, ""); }, "truncated"},
      {"one byte missing", [&] { write_text(path, good.substr(0, good.size() - 1)); }, "size mismatch"},
      {"one byte appended", [&] { write_text(path, good + "x"); }, "size mismatch"},
      {"payload bit flipped", flip(good.size() - 7), "content hash mismatch"},
      {"label bit flipped", flip(89), "content hash mismatch"},
      {"header arch bit flipped", flip(48), "content hash mismatch"},
      {"magic bit flipped", flip(2), "bad magic"},
      {"format version changed", flip(8), "format version"},
      {"key bit flipped", flip(20), "foreign entry"},
      {"another key's entry", [&] { write_text(path, other_file); }, "foreign entry"},
      {"garbage", [&] { write_text(path, std::string(300, '\x5a')); }, "bad magic"},
      {"colliding key",
       [&] {
         // Same 128-bit key, different inputs: only the check hash tells them apart.
         KernelCache writer(config_for(dir));
         std::vector<char> payload = fake_binary(other);
         REQUIRE(writer.store(DiskKey{key.key, disk_key(other).check}, other.target, payload, "fj_other"));
       },
       "colliding"},
  };
  for (const auto& d : damages) {
    std::string what = d.what;
    CAPTURE(what);
    write_text(path, good);
    d.apply();
    {
      KernelCache probe(config_for(dir));
      LoadResult lr = probe.load(key);
      CHECK(lr.status == LoadResult::Status::Discarded);
      CHECK(lr.problem.find(d.problem) != std::string::npos);
      CHECK(lr.payload.empty());
      CHECK(!fs::exists(path));  // deleted, so the next run recompiles and rewrites it
    }
    d.apply();
    KernelCache fresh(config_for(dir));
    int calls = 0;
    CacheResult r = fresh.get_or_compile(
        in,
        [&] {
          ++calls;
          return fake_compile(in);
        },
        "fj_k4");
    CHECK(r.outcome == CacheOutcome::Compiled);
    CHECK(calls == 1);
    CHECK(*r.kernel->binary == fake_binary(in));
    CHECK(fresh.counters().discarded == 1);
    CHECK(read_text(path) == good);  // rewritten, valid again
  }
  // The undamaged entry still loads.
  KernelCache ok(config_for(dir));
  CHECK(ok.load(key).status == LoadResult::Status::Loaded);
  CHECK(ok.load(DiskKey{Hash128{7, 7}, Hash128{}}).status == LoadResult::Status::Missing);
  fs::remove_all(dir);
}

TEST_CASE("8 processes sharing one empty cache folder") {
  fs::path dir = make_temp_dir();
  const auto start = std::chrono::system_clock::now() + std::chrono::milliseconds(400);
  const long long start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count();
  std::vector<Child> children;
  for (int p = 0; p < 8; ++p)
    children.push_back(spawn_child({"FJ_CACHE_TEST_CHILD=worker", "FUSEJIT_CACHE_DIR=" + dir.string(),
                                    "FJ_CACHE_TEST_START_NS=" + std::to_string(start_ns)}));
  std::set<std::string> real_hashes;
  int total_compiles = 0;
  for (auto& c : children) {
    auto [rc, out] = finish_child(c);
    CAPTURE(out);
    CHECK(rc == 0);
    CHECK(out.find("bad=0") != std::string::npos);
    int compiles = -1, hits = -1, bad = -1;
    char real[64] = {};
    REQUIRE(std::sscanf(out.c_str(), "compiles=%d disk_hits=%d real=%63s bad=%d", &compiles, &hits, real, &bad) == 4);
    CHECK(compiles <= kWorkerKernels + 1);
    total_compiles += compiles;
    real_hashes.insert(real);
  }
  CHECK(real_hashes.size() == 1);                 // every process got the same NVRTC binary
  CHECK(total_compiles >= kWorkerKernels + 1);    // somebody compiled each kernel
  std::vector<CacheEntryInfo> entries = list_cache(dir);
  CHECK(entries.size() == kWorkerKernels + 1);    // one valid entry per key
  for (const auto& e : entries) CHECK(e.valid);
  CHECK(cache_stats(dir).temp_files == 0);        // no half-written files left behind
  // A later process finds everything on disk.
  KernelCache later(config_for(dir));
  for (int i = 0; i < kWorkerKernels; ++i) {
    DiskKeyInputs in = inputs_n(i);
    CacheResult r = later.get_or_compile(in, [&]() -> CompileResult { FAIL("must be a disk hit"); return {}; });
    CHECK(r.outcome == CacheOutcome::DiskHit);
    CHECK(*r.kernel->binary == fake_binary(in));
  }
  fs::remove_all(dir);
}

TEST_CASE("an unwritable cache folder gives one warning and the run goes on") {
  fs::path dir = make_temp_dir();
  write_text(dir / "a-file", "not a folder");
  // Tests may run as root, where permission bits do not stop writes; a path below a regular
  // file is unwritable for everybody.
  for (fs::path bad : {dir / "a-file" / "cache", fs::path("/dev/null/fusejit-cache")}) {
    CAPTURE(bad);
    Warnings w;
    KernelCache cache(config_for(bad, w.handler()));
    for (int i = 0; i < 3; ++i) {
      DiskKeyInputs in = inputs_n(10 + i);
      CacheResult r = cache.get_or_compile(in, [&] { return fake_compile(in); });
      CHECK(r.outcome == CacheOutcome::Compiled);
      CHECK(*r.kernel->binary == fake_binary(in));
      CHECK(cache.get_or_compile(in, [&] { return fake_compile(in); }).outcome == CacheOutcome::MemoryHit);
    }
    REQUIRE(w.list.size() == 1);
    CHECK(w.list[0].find(bad.string()) != std::string::npos);
    CHECK(w.list[0].find("without the disk cache") != std::string::npos);
    CHECK(!cache.disk_enabled());
  }
  fs::remove_all(dir);
}

TEST_CASE("the size cap evicts the least recently used entries") {
  fs::path dir = make_temp_dir();
  const std::vector<char> payload(1000, 'p');
  const uint64_t entry_bytes = 88 + 1 + payload.size();  // header + label "k" + payload
  CacheConfig cfg = config_for(dir);
  cfg.max_bytes = 3 * entry_bytes;
  KernelCache cache(cfg);
  std::vector<DiskKey> keys;
  for (int i = 0; i < 4; ++i) keys.push_back(disk_key(inputs_n(200 + i)));
  const Target t{Arch{9, 0}, OutputKind::Cubin};
  for (int i = 0; i < 3; ++i) {
    REQUIRE(cache.store(keys[i], t, payload, "k"));
    // Distinct, increasing last-use times (file systems may have coarse clocks).
    struct timespec times[2] = {{1000 + i * 100, 0}, {1000 + i * 100, 0}};
    REQUIRE(::utimensat(AT_FDCWD, entry_path(dir, keys[i].key).c_str(), times, 0) == 0);
  }
  CHECK(cache_stats(dir).bytes == 3 * entry_bytes);
  CHECK(cache.load(keys[0]).status == LoadResult::Status::Loaded);  // now the most recently used
  REQUIRE(cache.store(keys[3], t, payload, "k"));                    // over the cap by one entry
  CHECK(fs::exists(entry_path(dir, keys[0].key)));
  CHECK(!fs::exists(entry_path(dir, keys[1].key)));  // least recently used: evicted
  CHECK(fs::exists(entry_path(dir, keys[2].key)));
  CHECK(fs::exists(entry_path(dir, keys[3].key)));
  CHECK(cache.counters().evicted == 1);
  CHECK(cache_stats(dir).bytes <= cfg.max_bytes);
  CHECK(list_cache(dir).front().key == keys[3].key);  // most recent first

  // Through get_or_compile: the folder never grows past the cap.
  for (int i = 0; i < 10; ++i) {
    DiskKeyInputs in = inputs_n(300 + i);
    cache.get_or_compile(in, [&] { return fake_compile(in); });
    CHECK(cache_stats(dir).bytes <= cfg.max_bytes);
  }
  CHECK(cache.evict_to(0) == 0);  // 0 = no cap
  CHECK(cache.evict_to(1) >= 1);
  CHECK(cache_stats(dir).entries == 0);
  fs::remove_all(dir);
}

TEST_CASE("FUSEJIT_DISABLE_CACHE=1 turns the disk cache off") {
  fs::path dir = make_temp_dir();
  DiskKeyInputs in = inputs_n(20);
  int calls = 0;
  auto compile = [&] {
    ++calls;
    return fake_compile(in);
  };
  ::setenv("FUSEJIT_DISABLE_CACHE", "1", 1);
  CHECK(cache_disabled_by_env());
  {
    KernelCache a(config_for(dir));
    CHECK(!a.disk_enabled());
    CHECK(a.get_or_compile(in, compile).outcome == CacheOutcome::Compiled);
    KernelCache b(config_for(dir));
    CHECK(b.get_or_compile(in, compile).outcome == CacheOutcome::Compiled);
  }
  CHECK(calls == 2);
  CHECK(fs::is_empty(dir));
  ::setenv("FUSEJIT_DISABLE_CACHE", "0", 1);
  CHECK(!cache_disabled_by_env());
  ::unsetenv("FUSEJIT_DISABLE_CACHE");
  CHECK(!cache_disabled_by_env());
  KernelCache c(config_for(dir));
  CHECK(c.disk_enabled());
  CacheConfig off = config_for(dir);
  off.disk = false;
  KernelCache d(off);
  CHECK(!d.disk_enabled());
  CHECK(d.dir().empty());
  fs::remove_all(dir);
}

TEST_CASE("cache folder from the environment") {
  struct Saved {
    std::string name;
    std::optional<std::string> value;
  };
  std::vector<Saved> saved;
  for (const char* n : {"FUSEJIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME"}) {
    const char* v = std::getenv(n);
    saved.push_back({n, v ? std::optional<std::string>(v) : std::nullopt});
  }
  ::setenv("FUSEJIT_CACHE_DIR", "/a/b", 1);
  ::setenv("XDG_CACHE_HOME", "/x", 1);
  ::setenv("HOME", "/h", 1);
  CHECK(cache_dir_from_env() == fs::path("/a/b"));
  ::unsetenv("FUSEJIT_CACHE_DIR");
  CHECK(cache_dir_from_env() == fs::path("/x/fusejit"));
  ::setenv("XDG_CACHE_HOME", "relative", 1);  // XDG: relative paths are ignored
  CHECK(cache_dir_from_env() == fs::path("/h/.cache/fusejit"));
  ::unsetenv("XDG_CACHE_HOME");
  CHECK(cache_dir_from_env() == fs::path("/h/.cache/fusejit"));
  ::unsetenv("HOME");
  CHECK(!cache_dir_from_env());
  for (const auto& s : saved) {
    if (s.value) ::setenv(s.name.c_str(), s.value->c_str(), 1);
    else ::unsetenv(s.name.c_str());
  }
}

TEST_CASE("cache stats, list and clear touch only cache files") {
  fs::path dir = make_temp_dir();
  KernelCache cache(config_for(dir));
  for (int i = 0; i < 3; ++i) {
    DiskKeyInputs in = inputs_n(30 + i);
    cache.get_or_compile(in, [&] { return fake_compile(in); }, "fj_k" + std::to_string(i));
  }
  // Strangers in the folder (a user pointing FUSEJIT_CACHE_DIR at a shared folder).
  write_text(dir / "README", "mine");
  fs::create_directories(dir / "zz");
  write_text(dir / "zz" / "0123456789abcdef0123456789abcdef.fjk", "mine too");
  const fs::path first_prefix = entry_path(dir, disk_key(inputs_n(30)).key).parent_path();
  write_text(first_prefix / "notes.txt", "also mine");
  write_text(first_prefix / ".tmp-abandoned", "partial");

  std::vector<CacheEntryInfo> list = list_cache(dir);
  REQUIRE(list.size() == 3);
  std::set<std::string> labels;
  for (const auto& e : list) {
    CHECK(e.valid);
    CHECK(e.target == "sm_90");
    CHECK(e.file_bytes > 88);
    CHECK(e.mtime_unix > 0);
    labels.insert(e.label);
  }
  CHECK(labels == std::set<std::string>{"fj_k0", "fj_k1", "fj_k2"});
  write_text(list[1].path, "damaged");
  CacheStats s = cache_stats(dir);
  CHECK(s.entries == 3);
  CHECK(s.invalid == 1);
  CHECK(s.temp_files == 1);
  CHECK(s.dir == dir);

  ClearResult cleared = clear_cache(dir);
  CHECK(cleared.removed == 3);  // entries (the temp file goes too)
  CHECK(!fs::exists(first_prefix / ".tmp-abandoned"));
  CHECK(cleared.bytes > 0);
  CHECK(list_cache(dir).empty());
  CHECK(fs::exists(dir / "README"));
  CHECK(fs::exists(dir / "zz" / "0123456789abcdef0123456789abcdef.fjk"));
  CHECK(fs::exists(first_prefix / "notes.txt"));
  CHECK(cache_stats(dir / "does-not-exist").entries == 0);
  fs::remove_all(dir);
}
