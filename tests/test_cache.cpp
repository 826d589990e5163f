// The kernel cache and the one disk store under it: key stability across processes, key
// sensitivity, damaged entries, many processes and threads on one folder, unwritable folders, LRU
// eviction, FUSEJIT_DISABLE_CACHE, the `fusejit cache` operations; then the store as the library
// uses it for both backends: CPU modules as entries, one cap, compile once across processes,
// private folders only, every damage case of a CPU entry, validated environment, keys that ignore
// the graph file's name and comments, and --no-cache leaving nothing behind. Child processes are this executable re-run with
// FJ_CACHE_TEST_CHILD set (handled before doctest's main runs).
#include <doctest/doctest.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fusejit/fusejit.h>
#include <fusejit/report.h>
#include <nlohmann/json.hpp>

#include "ir/error.h"
#include "jit/arch.h"
#include "jit/cache.h"
#include "jit/codegen.h"
#include "jit/disk_store.h"
#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "jit/gpu_build.h"
#include "jit/fork.h"
#include "jit/nvrtc.h"
#include "jit/source_key.h"
#include "lib/internal.h"
#include "tests/support/scoped_env.h"
#include "tests/support/files.h"
#include "tests/support/warnings.h"

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

std::string read_text(const fs::path& p) { return fusejit::testing::read_file(p); }
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

// ---- the store as the library uses it (public API, CPU path) ----

namespace fj = fusejit;

// Two graph files with the same statements; the second has another name, comments and blank lines.
// With a reduction: its kernel's comments say where each reduction is (file and line) too.
const char* kGraphA =
    "graph pair\ninput x : f32[8]\ninput y : f32[8]\nz = exp(x) * y + 1\nw = z - x\ns = sum(w)\noutput z, w, s\n";
const char* kGraphB =
    "# A copy of pair.txt under another name\n\n# with comments\ngraph pair\n\ninput x : f32[8]   # x\n"
    "input y : f32[8]\n\n\nz = exp(x) * y + 1  # z\n# w next\n\nw = z - x\n\ns = sum(w)\noutput z, w, s\n";
const char* kGraphOther = "graph other\ninput x : f32[8]\ny = sqrt(x) * 3\noutput y\n";

fj::Options cpu_options(const fs::path& dir = {}) {
  fj::Options o;
  o.backend = fj::Backend::Cpu;
  o.cache_dir = dir.string();
  return o;
}

// Compiles `text` for the CPU; the cache outcome of every kernel, fused then unfused. The
// Program is gone on return, so the next call loads its module again (from disk when cached).
// The cache outcome of every kernel of both plans (two host modules, one per plan), or with
// `fused_only` of the fused plan alone (one module).
std::vector<std::string> cpu_outcomes(const std::string& text, const std::string& file, fj::Options o,
                                      bool fused_only = false) {
  o.build_unfused = !fused_only;  // both plans now (else the unfused one on first use)
  fj::Program p = fj::Program::compile(fj::Graph::parse(text, file), o);
  std::vector<std::string> out;
  for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused})
    if (kind == fj::PlanKind::Fused || !fused_only)
      for (const fj::KernelInfo& k : p.kernels(kind)) out.emplace_back(fj::cache_outcome_name(k.cache));
  return out;
}
bool all_are(const std::vector<std::string>& outcomes, const std::string& what) {
  return !outcomes.empty() && std::all_of(outcomes.begin(), outcomes.end(), [&](const std::string& o) { return o == what; });
}

// Every path under `dir` (files and folders), relative, sorted; and their total file size.
std::vector<std::string> tree(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(fs::relative(it->path(), dir).string());
  std::sort(out.begin(), out.end());
  return out;
}
uint64_t tree_bytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file()) total += it->file_size();
  return total;
}

// Child: compiles kGraphOther for the CPU through FUSEJIT_CACHE_DIR; prints how many modules it
// compiled (0 or 1: fused and unfused kernels are one module).
int run_cpu_child() {
  if (const char* at = std::getenv("FJ_CACHE_TEST_START_NS")) {
    auto start = std::chrono::system_clock::time_point(std::chrono::nanoseconds(std::strtoll(at, nullptr, 10)));
    std::this_thread::sleep_until(start);
  }
  std::vector<std::string> o = cpu_outcomes(kGraphOther, "other.txt", cpu_options());
  std::printf("compiled=%d\n", o.front() == "compiled" ? 1 : 0);
  return 0;
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
  if (m == "cpu") {
    int rc = run_cpu_child();
    std::fflush(stdout);
    std::_Exit(rc);
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
  for (const auto& variant : variants) {
    const std::string& what = variant.first;
    const auto& v = variant.second;
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
      {"key bit flipped", flip(20), "damaged, or copied from another key"},
      {"another key's entry", [&] { write_text(path, other_file); }, "damaged, or copied from another key"},
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
  // A socket in its place, said as `cache list` says it (it was "cannot be opened: No such device
  // or address"); where the path fits a socket address (a long TMPDIR's would not).
  if (path.native().size() < sizeof(sockaddr_un{}.sun_path))
    damages.push_back({"a socket in its place",
                       [&] {
                         fs::remove(path);
                         const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
                         sockaddr_un addr{};
                         addr.sun_family = AF_UNIX;
                         std::memcpy(addr.sun_path, path.c_str(), path.native().size());
                         REQUIRE(::bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
                         ::close(s);
                       },
                       "a socket"});
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
    const std::pair<int, std::string> child = finish_child(c);
    const int rc = child.first;
    const std::string& out = child.second;
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
  CHECK(total_compiles == kWorkerKernels + 1);    // each kernel compiled once, by one process
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
    CHECK(w.list[0].find("neither reads nor writes it") != std::string::npos);
    CHECK(!cache.disk_enabled());
  }
  fs::remove_all(dir);
}

TEST_CASE("a cache folder whose files would pass PATH_MAX is not used: one warning, the run goes on") {
  // Its entries failed to open with ENAMETOOLONG, each warned as a damaged entry, and a CPU-path
  // build failed outright (its build folder's files are longer still).
  fs::path dir = make_temp_dir(), deep = dir;
  const size_t target = PATH_MAX - 100;  // room for a folder, not for its files
  while (deep.native().size() + 203 <= target) deep /= std::string(200, 'd');
  deep /= std::string(target - deep.native().size() - 1, 'e');  // 1 to 201 bytes: a name NAME_MAX allows
  REQUIRE(deep.native().size() == target);
  fs::create_directories(deep);
  CAPTURE(deep.native().size());
  Warnings w;
  KernelCache cache(config_for(deep, w.handler()));
  const DiskKeyInputs in = inputs_n(21);
  CHECK(cache.get_or_compile(in, [&] { return fake_compile(in); }).outcome == CacheOutcome::Compiled);
  REQUIRE(w.list.size() == 1);
  CHECK(w.list[0].find("path limit (PATH_MAX)") != std::string::npos);
  CHECK(!cache.disk_enabled());
  fs::remove_all(dir);
}

TEST_CASE("an oversized file in an entry's place is refused from its header, unread") {
  fs::path dir = make_temp_dir();
  const DiskKeyInputs in = inputs_n(22);
  const fs::path path = entry_path(dir, disk_key(in).key);
  {
    KernelCache seed(config_for(dir));
    seed.get_or_compile(in, [&] { return fake_compile(in); }, "fj_k22");
  }
  const uintmax_t good = fs::file_size(path);
  fs::resize_file(path, uintmax_t{1} << 30);  // sparse: a GiB the header does not account for
  const auto bytes_read = [] {  // this process's bytes read (Linux /proc/self/io), or -1
    std::ifstream io("/proc/self/io");
    for (std::string key; io >> key;) {
      long long v = 0;
      io >> v;
      if (key == "rchar:") return v;
    }
    return -1LL;
  };
  const long long read_before = bytes_read();
  Warnings w;
  KernelCache cache(config_for(dir, w.handler()));
  CHECK(cache.get_or_compile(in, [&] { return fake_compile(in); }).outcome == CacheOutcome::Compiled);
  REQUIRE(!w.list.empty());
  CHECK(w.list[0].find(fmt::format("size mismatch ({} bytes, header says {})", uintmax_t{1} << 30, good)) !=
        std::string::npos);
  if (read_before >= 0) CHECK(bytes_read() - read_before < (64 << 20));  // the GiB was never read
  CHECK(fs::file_size(path) < 2 * good);  // replaced by the rebuilt entry
  fs::remove_all(dir);
}

TEST_CASE("a cache folder removed under a running process is made again, not given up") {
  // `rm -rf ~/.cache/fusejit` beside a long-running service: its next build once turned its disk
  // cache off for good ("cannot create DIR/ab: No such file or directory").
  fs::path dir = make_temp_dir() / "cache";
  Warnings w;
  KernelCache cache(config_for(dir, w.handler()));
  DiskKeyInputs first = inputs_n(30);
  CHECK(cache.get_or_compile(first, [&] { return fake_compile(first); }).outcome == CacheOutcome::Compiled);
  fs::remove_all(dir);
  DiskKeyInputs second = inputs_n(31);
  CHECK(cache.get_or_compile(second, [&] { return fake_compile(second); }).outcome == CacheOutcome::Compiled);
  CHECK(w.list.empty());
  CHECK(cache.disk_enabled());
  CHECK((fs::status(dir).permissions() & fs::perms::all) == fs::perms::owner_all);
  KernelCache fresh(config_for(dir));  // the entry was written into the new folder
  CHECK(fresh.get_or_compile(second, [&] { return fake_compile(second); }).outcome == CacheOutcome::DiskHit);
  fs::remove_all(dir.parent_path());
}

TEST_CASE("a child forked while another thread builds a key builds that key itself") {
  // fork() keeps only the forking thread: the child once waited for ever on the build in flight.
  fs::path dir = make_temp_dir();
  KernelCache cache(config_for(dir));
  DiskKeyInputs in = inputs_n(40);
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  std::thread builder([&] {
    cache.get_or_compile(in, [&] {
      started.set_value();
      released.wait();
      return fake_compile(in);
    });
  });
  started.get_future().wait();
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(30);  // a hang ends the child by SIGALRM: a failure, not a hung suite
    const CacheResult r = cache.get_or_compile(in, [&] { return fake_compile(in); });
    ::_exit(r.outcome != CacheOutcome::MemoryHit && *r.kernel->binary == fake_binary(in) ? 0 : 1);
  }
  release.set_value();  // the parent's build ends, and with it the key's file lock
  builder.join();
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(cache.get_or_compile(in, [&] { return fake_compile(in); }).outcome == CacheOutcome::MemoryHit);
  fs::remove_all(dir);
}

TEST_CASE("unlock_and_close releases a flock that a forked child's copy of the descriptor would keep") {
  // Every lock fusejit takes with flock (cache entries, build folders, an ahead-of-time folder's
  // FolderLock) is released this way (jit/fork.h): with close() alone, a child forked while it was
  // held kept it for its whole life, and every other process waited.
  fs::path dir = make_temp_dir();
  const std::string path = (dir / "lock").string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  if (child == 0) {  // holds its copy of fd until the parent closes the pipe
    char c;
    ::close(ready[1]);
    ::alarm(30);
    (void)::read(ready[0], &c, 1);
    ::_exit(0);
  }
  ::close(ready[0]);
  unlock_and_close(fd);
  const int other = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(other >= 0);
  CHECK(::flock(other, LOCK_EX | LOCK_NB) == 0);  // free while the child still runs
  ::close(other);
  ::close(ready[1]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  fs::remove_all(dir);
}

TEST_CASE("an entry larger than the whole size cap is kept, with one warning saying the others go") {
  // A concurrency tester's find: a 1.2 MB module under FUSEJIT_CACHE_MAX_MB=1 evicted the other
  // program's entry at every run, each run recompiling one of them, and nothing said why.
  fs::path dir = make_temp_dir();
  std::vector<std::string> warnings;
  CacheConfig cfg = config_for(dir, [&](const std::string& m) { warnings.push_back(m); });
  cfg.max_bytes = 2000;
  KernelCache cache(cfg);
  const Target t{Arch{9, 0}, OutputKind::Cubin};
  const DiskKey small = disk_key(inputs_n(290)), big = disk_key(inputs_n(291)), bigger = disk_key(inputs_n(292));
  REQUIRE(cache.store(small, t, std::vector<char>(100, 's'), "k"));
  CHECK(warnings.empty());
  REQUIRE(cache.store(big, t, std::vector<char>(3000, 'b'), "k"));
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("is larger than the cache's size cap (FUSEJIT_CACHE_MAX_MB, 2000 bytes): it is kept and the "
                         "other entries go") != std::string::npos);
  CHECK(fs::exists(entry_path(dir, big.key)));
  CHECK(!fs::exists(entry_path(dir, small.key)));
  REQUIRE(cache.store(bigger, t, std::vector<char>(4000, 'b'), "k"));
  CHECK(warnings.size() == 1);  // once a process
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

TEST_CASE("a cache folder replaced or opened up under a running process is not used from then on") {
  // A folder removed and made again by someone else (a tmp cleaner, then another user), or made
  // group- or world-writable, was used as it was checked at start: its builds and loads went on.
  // 0: opened up; 1: made again, open; 2: made again as a link to a private folder of ours (its
  // maker could repoint it).
  for (const int how : {0, 1, 2}) {
    CAPTURE(how);
    const fs::path dir = make_temp_dir() / "cache";
    Warnings w;
    KernelCache cache(config_for(dir, w.handler()));
    DiskKeyInputs first = inputs_n(40);
    CHECK(cache.get_or_compile(first, [&] { return fake_compile(first); }).outcome == CacheOutcome::Compiled);
    if (how > 0) fs::remove_all(dir);
    if (how == 1) fs::create_directory(dir);
    if (how == 2) {
      fs::create_directory(dir.parent_path() / "elsewhere");
      fs::permissions(dir.parent_path() / "elsewhere", fs::perms::owner_all);
      fs::create_directory_symlink(dir.parent_path() / "elsewhere", dir);
    }
    if (how < 2) fs::permissions(dir, fs::perms::all);
    const std::vector<std::string> before = tree(dir);
    DiskKeyInputs second = inputs_n(41);
    CHECK(cache.get_or_compile(second, [&] { return fake_compile(second); }).outcome == CacheOutcome::Compiled);
    CHECK(tree(dir) == before);  // nothing written there
    CHECK_FALSE(cache.disk_enabled());
    REQUIRE(w.list.size() == 1);
    CHECK(doctest::String(w.list[0].c_str()) ==
          doctest::Contains(how < 2 ? "may be written by its group or other users" : "is a symbolic link"));
    fs::remove_all(dir.parent_path());
  }
}

TEST_CASE("a subfolder that is not private is skipped alone: one warning, the others are used, stats lists it") {
  // One such subfolder (root's after a `sudo` run with the same HOME, or chmod'ed open) turned the
  // whole disk cache off for the process at the first key that fell in it, and stats said nothing.
  const fs::path dir = make_temp_dir() / "cache";
  DiskKeyInputs bad_key = inputs_n(50), good_key = inputs_n(51);
  for (int i = 52; entry_path(dir, disk_key(good_key).key).parent_path() ==
                   entry_path(dir, disk_key(bad_key).key).parent_path(); ++i)
    good_key = inputs_n(i);
  const fs::path bad = entry_path(dir, disk_key(bad_key).key).parent_path();
  fs::create_directories(bad);
  fs::permissions(dir, fs::perms::owner_all);
  fs::permissions(bad, fs::perms::owner_all | fs::perms::group_all);
  const fs::path planted = entry_path(dir, disk_key(bad_key).key);  // someone else's: never loaded, never evicted
  write_text(planted, std::string(4096, 'x'));
  const std::vector<std::string> before = tree(bad);
  for (int run = 0; run < 2; ++run) {  // a second process compiles the skipped key again, loads the other
    CAPTURE(run);
    Warnings w;
    KernelCache cache(config_for(dir, w.handler()));
    for (int call = 0; call < 2; ++call)
      CHECK(cache.get_or_compile(bad_key, [&] { return fake_compile(bad_key); }).outcome ==
            (call == 0 ? CacheOutcome::Compiled : CacheOutcome::MemoryHit));
    CHECK(cache.get_or_compile(good_key, [&] { return fake_compile(good_key); }).outcome ==
          (run == 0 ? CacheOutcome::Compiled : CacheOutcome::DiskHit));
    CHECK(cache.disk_enabled());
    REQUIRE(w.list.size() == 1);  // once per subfolder and process
    CHECK(doctest::String(w.list[0].c_str()) == doctest::Contains(("kernel cache subfolder " + bad.string()).c_str()));
    CHECK(doctest::String(w.list[0].c_str()) == doctest::Contains("may be written by its group or other users"));
    CHECK(tree(bad) == before);  // nothing written there
  }
  const fusejit::jit::CacheStats st = fusejit::jit::cache_stats(dir);
  REQUIRE(st.unusable_subfolders.size() == 1);
  CHECK(doctest::String(st.unusable_subfolders[0].c_str()) == doctest::Contains(bad.string().c_str()));
  CHECK(st.entries == 1);  // the good key's: the planted file in the skipped subfolder is not counted
  CHECK(st.invalid == 0);
  fj::Options o;
  o.cache_dir = dir.string();
  CHECK(fj::cache_stats(o).unusable_subfolders == st.unusable_subfolders);
  CHECK(fj::cache_stats(o).enabled);
  KernelCache evicting(config_for(dir));
  evicting.evict_to(1);  // everything else goes; the skipped subfolder is not touched
  CHECK(fs::exists(planted));
  CHECK(tree(bad) == before);
  // list and clear agree with stats (a reviewer's find: list showed the planted file, clear removed it)
  for (const auto& e : fusejit::jit::list_cache(dir)) CHECK(e.path.parent_path() != bad);
  (void)fusejit::jit::clear_cache(dir);
  CHECK(fs::exists(planted));
  CHECK(tree(bad) == before);
  fs::remove_all(dir.parent_path());
}

TEST_CASE("a store named through a symlink keeps its folder when the link is repointed") {
  const fs::path dir = make_temp_dir();
  fs::create_directory(dir / "a");
  fs::permissions(dir / "a", fs::perms::owner_all);
  fs::create_directory(dir / "b");
  fs::create_symlink(dir / "a", dir / "link");
  const std::shared_ptr<DiskStore> store = DiskStore::shared((dir / "link").string(), true);
  CHECK(store->dir() == fs::canonical(dir / "a"));
  fs::remove(dir / "link");
  fs::create_symlink(dir / "b", dir / "link");
  CHECK(DiskStore::shared((dir / "a").string(), true)->dir() == fs::canonical(dir / "a"));
  fs::remove_all(dir);
}

TEST_CASE("one shared store per folder however it is named; its cap as the environment says at each call") {
  const fs::path dir = make_temp_dir();
  fs::create_directories(dir / "c");
  fs::create_symlink(dir / "c", dir / "link");
  const std::string c = (dir / "c").string();
  const std::shared_ptr<DiskStore> store = DiskStore::shared(c, true);
  for (const std::string& other : {c + "/", c + "//", (dir / "c" / ".").string(), (dir / "x" / ".." / "c").string(),
                                   (dir / "link").string(), (dir / "link").string() + "/",
                                   fs::relative(dir / "c").string()}) {
    CAPTURE(other);
    CHECK(DiskStore::shared(other, true) == store);
    CHECK(&KernelCache::shared(other, true) == &KernelCache::shared(c, true));  // one memory cache too
  }
  CHECK(DiskStore::shared((dir / "d").string(), true) != store);
  {
    ScopedEnv cap("FUSEJIT_CACHE_MAX_MB", "3");
    CHECK(DiskStore::shared(c, true)->max_bytes() == (uint64_t{3} << 20));
  }
  ScopedEnv cap("FUSEJIT_CACHE_MAX_MB", "5");
  CHECK(DiskStore::shared((dir / "link").string(), true)->max_bytes() == (uint64_t{5} << 20));
  fs::remove_all(dir);
}

TEST_CASE("two processes writing into one folder at once keep it under the cap together") {
  // Each KernelCache counts the folder at its first store, then adds its own writes: two of them
  // (two processes) each stayed under the cap while the folder went past it. A store past 90 %
  // of the cap counts the folder again (at most once a second).
  fs::path dir = make_temp_dir();
  const std::vector<char> payload(1000, 'p');
  const uint64_t entry_bytes = 88 + 1 + payload.size();
  CacheConfig cfg = config_for(dir);
  cfg.max_bytes = 3 * entry_bytes;
  KernelCache a(cfg), b(cfg);
  const Target t{Arch{9, 0}, OutputKind::Cubin};
  for (int i = 0; i < 4; ++i) REQUIRE((i % 2 ? b : a).store(disk_key(inputs_n(500 + i)), t, payload, "k"));
  CHECK(cache_stats(dir).bytes == 4 * entry_bytes);  // each counted 2 or 3 entries: no scan yet
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  REQUIRE(a.store(disk_key(inputs_n(504)), t, payload, "k"));  // a counts 3 of 3: past 90 %
  CHECK(cache_stats(dir).bytes <= cfg.max_bytes);
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
  ::setenv("HOME", "h", 1);  // a relative HOME too
  CHECK(!cache_dir_from_env());
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
  const struct timespec two_minutes_ago[2] = {{::time(nullptr) - 120, 0}, {::time(nullptr) - 120, 0}};
  REQUIRE(::utimensat(AT_FDCWD, (first_prefix / ".tmp-abandoned").c_str(), two_minutes_ago, AT_SYMLINK_NOFOLLOW) == 0);

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
  // A file past the largest entry (sparse: no disk used) is listed as too large, not "truncated".
  const fs::path big = entry_path(dir, disk_key(inputs_n(77)).key);
  fs::create_directories(big.parent_path());
  write_text(big, "");
  fs::resize_file(big, uint64_t{3} << 30);
  bool saw_big = false;
  for (const CacheEntryInfo& e : list_cache(dir))
    if (e.path == big) saw_big = e.problem.rfind("too large (3221225472 bytes; an entry is at most", 0) == 0;
  CHECK(saw_big);
  fs::remove(big);
  write_text(list[1].path, "damaged");
  // The public list says why an entry is not valid (`fusejit cache list` prints it).
  fusejit::Options po;
  po.cache_dir = dir.string();
  int bad = 0;
  for (const fusejit::CacheEntryInfo& e : fusejit::cache_list(po)) {
    CHECK(e.valid == e.problem.empty());
    bad += !e.valid;
  }
  CHECK(bad == 1);
  CacheStats s = cache_stats(dir);
  CHECK(s.entries == 3);
  CHECK(s.invalid == 1);
  CHECK(s.temp_files == 1);
  CHECK(s.dir == dir);

  // What builds in progress use stays (another process's `fusejit cache clear` made every CPU
  // compile beside it fail): a temp entry file younger than a minute, a build folder in use.
  write_text(first_prefix / ".tmp-being-renamed", "whole");
  DiskStore store(StoreConfig{dir, 0, [](const std::string&) {}});
  std::optional<DiskStore::Scratch> building = store.scratch();
  write_text(building->path() / "module.cpp", "int x;");
  const fs::path abandoned_build = dir / ".tmp-build-killed";
  fs::create_directories(abandoned_build);

  ClearResult cleared = clear_cache(dir);
  CHECK(cleared.removed == 3);  // entries (the abandoned temp file goes too)
  CHECK(!fs::exists(first_prefix / ".tmp-abandoned"));
  CHECK(!fs::exists(abandoned_build));
  CHECK(fs::exists(first_prefix / ".tmp-being-renamed"));
  CHECK(fs::exists(building->path() / "module.cpp"));
  const fs::path built = building->path();
  building.reset();  // the build ends: its folder goes with it
  CHECK(!fs::exists(built));
  CHECK(cleared.bytes > 0);
  CHECK(list_cache(dir).empty());
  CHECK(fs::exists(dir / "README"));
  CHECK(fs::exists(dir / "zz" / "0123456789abcdef0123456789abcdef.fjk"));
  CHECK(fs::exists(first_prefix / "notes.txt"));
  CHECK(cache_stats(dir / "does-not-exist").entries == 0);
  fs::remove_all(dir);
}

TEST_CASE("entries and temporary files dated ahead of the clock count as the oldest, not the newest") {
  // Entries restored with future times outlived every entry in use, whose loads set their time to
  // now; a future temporary file outlived `cache clear` and eviction (hostile pass).
  fs::path dir = make_temp_dir();
  const std::vector<char> payload(1000, 'p');
  CacheConfig cfg = config_for(dir);
  cfg.max_bytes = 3 * (88 + 1 + payload.size());  // three entries
  KernelCache cache(cfg);
  std::vector<DiskKey> keys;
  for (int i = 0; i < 4; ++i) keys.push_back(disk_key(inputs_n(250 + i)));
  const Target t{Arch{9, 0}, OutputKind::Cubin};
  const time_t now = ::time(nullptr), year_ahead = now + 365 * 86400;
  for (int i = 0; i < 3; ++i) {
    REQUIRE(cache.store(keys[i], t, payload, "k"));
    const time_t when = i == 0 ? year_ahead : now - 1000 + i;
    const struct timespec times[2] = {{when, 0}, {when, 0}};
    REQUIRE(::utimensat(AT_FDCWD, entry_path(dir, keys[i].key).c_str(), times, 0) == 0);
  }
  const fs::path prefix = entry_path(dir, keys[0].key).parent_path(), future_temp = prefix / ".tmp-from-the-future";
  write_text(future_temp, std::string(5000, 't'));
  const struct timespec ahead[2] = {{now + 2 * 86400, 0}, {now + 2 * 86400, 0}};
  REQUIRE(::utimensat(AT_FDCWD, future_temp.c_str(), ahead, 0) == 0);
  REQUIRE(cache.store(keys[3], t, payload, "k"));  // over the cap by one entry: a scan and an eviction
  CHECK(!fs::exists(entry_path(dir, keys[0].key)));  // dated a year ahead: first to go
  for (int i = 1; i < 4; ++i) CHECK(fs::exists(entry_path(dir, keys[i].key)));
  CHECK(!fs::exists(future_temp));  // no write of this process's: abandoned
  write_text(future_temp, "t");
  REQUIRE(::utimensat(AT_FDCWD, future_temp.c_str(), ahead, 0) == 0);
  CHECK(clear_cache(dir).removed == 3);
  CHECK(!fs::exists(future_temp));
  CHECK(cache_stats(dir).temp_files == 0);
  fs::remove_all(dir);
}

// Sets or clears a file's immutable flag (chattr +i): false where the filesystem or the user cannot.
bool set_immutable(const fs::path& path, bool on) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  int flags = 0;
  bool ok = fd >= 0 && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
  ok = ok && ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  if (fd >= 0) ::close(fd);
  return ok;
}

TEST_CASE("a damaged entry that cannot be deleted is rebuilt alone; the folder stays in use for other keys") {
  // Its failed store turned the whole folder off for the process (hostile pass). An immutable
  // file needs root on ext4 or the like: elsewhere the case is skipped, saying so.
  fs::path dir = make_temp_dir();
  const DiskKeyInputs a = inputs_n(93), b = inputs_n(94);
  KernelCache(config_for(dir)).get_or_compile(a, [&] { return fake_compile(a); });
  const fs::path stuck = entry_path(dir, disk_key(a).key);
  std::string bytes = read_text(stuck);
  bytes.back() ^= 1;
  write_text(stuck, bytes);
  if (!set_immutable(stuck, true)) {
    MESSAGE("skipped: cannot make a file immutable here (needs root and a filesystem with the flag)");
    fs::remove_all(dir);
    return;
  }
  struct Unfreeze {  // whatever fails below, the folder stays removable
    fs::path path, dir;
    ~Unfreeze() {
      set_immutable(path, false);
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } unfreeze{stuck, dir};
  Warnings w;
  KernelCache cache(config_for(dir, w.handler()));
  CHECK(cache.get_or_compile(a, [&] { return fake_compile(a); }).outcome == CacheOutcome::Compiled);
  CHECK(cache.get_or_compile(b, [&] { return fake_compile(b); }).outcome == CacheOutcome::Compiled);
  CHECK(cache.disk_enabled());
  CHECK(fs::exists(entry_path(dir, disk_key(b).key)));
  CHECK(KernelCache(config_for(dir)).get_or_compile(b, [&] { return fake_compile(b); }).outcome == CacheOutcome::DiskHit);
  REQUIRE(w.list.size() == 1);
  CHECK(w.list[0].find("could not be deleted") != std::string::npos);
}

TEST_CASE("a folder, FIFO, link or socket at a key's lock path is deleted with a warning, and the build takes the lock") {
  // Left there, every process built the key without a lock, silently, and `cache clear` kept it.
  fs::path dir = make_temp_dir();
  const DiskKeyInputs a = inputs_n(95), b = inputs_n(96), c = inputs_n(97), e = inputs_n(99);
  const auto lock_of = [&](const DiskKeyInputs& in) { return entry_path(dir, disk_key(in).key).replace_extension(".lock"); };
  for (const auto* in : {&a, &b, &c, &e}) fs::create_directories(lock_of(*in).parent_path());
  fs::create_directories(lock_of(a) / "inside");
  REQUIRE(::mkfifo(lock_of(b).c_str(), 0600) == 0);
  write_text(dir / "elsewhere", "not the cache's");
  fs::create_symlink(dir / "elsewhere", lock_of(c));
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(lock_of(e).string().size() < sizeof(addr.sun_path));
  std::strcpy(addr.sun_path, lock_of(e).c_str());
  REQUIRE(::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0);
  Warnings w;
  KernelCache cache(config_for(dir, w.handler()));
  for (const auto* in : {&a, &b, &c, &e}) {
    CAPTURE(lock_of(*in));
    CHECK(cache.get_or_compile(*in, [&] { return fake_compile(*in); }).outcome == CacheOutcome::Compiled);
    CHECK(fs::is_regular_file(fs::symlink_status(lock_of(*in))));  // the lock taken on a new file
  }
  ::close(sock);
  REQUIRE(w.list.size() == 4);
  for (const char* what : {"a folder; deleted", "a FIFO; deleted", "a symbolic link; deleted", "a socket; deleted"})
    CHECK(std::count_if(w.list.begin(), w.list.end(), [&](const std::string& m) { return m.find(what) != std::string::npos; }) == 1);
  CHECK(read_text(dir / "elsewhere") == "not the cache's");
  // What `cache clear` finds there is removed too.
  const DiskKeyInputs d = inputs_n(98);
  fs::create_directories(lock_of(d) / "inside");
  clear_cache(dir);
  CHECK(!fs::exists(fs::symlink_status(lock_of(d))));
  fs::remove_all(dir);
}

TEST_CASE("a folder, FIFO or link at an entry's path: listed as damaged, removed by clear, never followed") {
  fs::path dir = make_temp_dir();
  const fs::path fifo = entry_path(dir, disk_key(inputs_n(90)).key), folder = entry_path(dir, disk_key(inputs_n(91)).key);
  const fs::path link = entry_path(dir, disk_key(inputs_n(92)).key), target = dir / "target-of-link";
  for (const fs::path& p : {fifo, folder, link}) fs::create_directories(p.parent_path());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  fs::create_directories(folder / "inside");
  write_text(target, "not the cache's");
  fs::create_symlink(target, link);
  std::map<fs::path, std::string> problems;
  for (const CacheEntryInfo& e : list_cache(dir)) problems[e.path] = e.problem;
  CHECK(problems[fifo] == "a FIFO where an entry belongs");
  CHECK(problems[folder] == "a folder where an entry belongs");
  CHECK(problems[link] == "a symbolic link where an entry belongs");
  CHECK(cache_stats(dir).invalid == 3);
  CHECK(clear_cache(dir).removed == 3);
  for (const fs::path& p : {fifo, folder, link}) CHECK(!fs::exists(fs::symlink_status(p)));
  CHECK(read_text(target) == "not the cache's");  // the link went, not what it points at
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// The one store, as the library uses it for both backends.

TEST_CASE("location comments are cut exactly, and file names cannot break out of them") {
  CHECK(location_comment("gelu.txt", 5) == "  [gelu.txt:5]");
  CHECK(location_comment("a]b[c\nint evil;\x7f", 12) == "  [a?b?c?int evil;?:12]");
  const std::string src =
      "  const float v3 = fj_add(v1, v2);  // v3 = add(v1, v2) : f32  [gelu.txt:5]\n"
      "  const float v4 = a[3:4];  // not a location: [x]\n"
      "  y[i] = x[i];\n"
      "// Fusion group  [odd name.txt:77]\n"
      "int k = 1;  [no comment:1]\n"
      "// not made by location_comment  [a]b:9]\n";
  const std::string cut = without_location_comments(src);
  CHECK(cut ==
        "  const float v3 = fj_add(v1, v2);  // v3 = add(v1, v2) : f32\n"
        "  const float v4 = a[3:4];  // not a location: [x]\n"
        "  y[i] = x[i];\n"
        "// Fusion group\n"
        "int k = 1;  [no comment:1]\n"
        "// not made by location_comment  [a]b:9]\n");
  CHECK(without_location_comments("no newline at the end  // c  [g.txt:1]") == "no newline at the end  // c");
  CHECK(without_location_comments("") == "");
}

TEST_CASE("two graph files differing only in name, comments and blank lines share every cache entry") {
  fs::path dir = make_temp_dir();
  const fj::Options o = cpu_options(dir);
  // CPU path: one host module per plan.
  CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", o), "compiled"));
  const size_t entries = fj::cache_list(o).size();
  CHECK(entries == 2);
  // ... so a compile of the fused plan alone (after `fusejit run` built both) compiles nothing.
  for (const std::string& outcome : cpu_outcomes(kGraphA, "pair.txt", o, true)) CHECK(outcome != "compiled");
  CHECK(all_are(cpu_outcomes(kGraphB, "renamed/copy of pair.txt", o), "disk"));
  CHECK(fj::cache_list(o).size() == entries);
  // GPU path (NVRTC; no GPU needed): the same kernel names and entries, dumps with their own lines.
  fs::path out_a = make_temp_dir(), out_b = make_temp_dir();
  std::vector<fj::KernelInfo> ka = fj::compile_to_dir(fj::Graph::parse(kGraphA, "pair.txt"), "sm_80", out_a.string(), false, o);
  const size_t gpu_entries = fj::cache_list(o).size();
  CHECK(gpu_entries > entries);
  std::vector<fj::KernelInfo> kb =
      fj::compile_to_dir(fj::Graph::parse(kGraphB, "renamed/copy of pair.txt"), "sm_80", out_b.string(), false, o);
  REQUIRE(ka.size() == kb.size());
  for (size_t i = 0; i < ka.size(); ++i) {
    CAPTURE(i);
    CHECK(kb[i].name == ka[i].name);
    CHECK(kb[i].cache != fj::CacheOutcome::Compiled);
  }
  CHECK(fj::cache_list(o).size() == gpu_entries);
  CHECK(read_text(out_a / (ka[0].name + ".cu")).find("[pair.txt:4]") != std::string::npos);
  CHECK(read_text(out_b / (kb[0].name + ".cu")).find("[copy of pair.txt:10]") != std::string::npos);
  for (const fs::path& d : {dir, out_a, out_b}) fs::remove_all(d);
}

TEST_CASE("cache stats and clear say when the folder cannot be looked into or is not a folder") {
  // Both said "0 entries" / "removed 0 entries" and succeeded for a symbolic link loop.
  fs::path dir = make_temp_dir();
  fs::create_symlink(dir / "loop", dir / "loop");
  write_text(dir / "file", "x");
  for (const fs::path& bad : {dir / "loop", dir / "file" / "cache", dir / "file"}) {
    CAPTURE(bad);
    fj::Options o;
    o.cache_dir = bad.string();
    const fj::CacheStats st = fj::cache_stats(o);
    CHECK(!st.enabled);
    CHECK(!st.disabled_reason.empty());
    CHECK_THROWS_WITH_AS(fj::cache_clear(o), doctest::Contains(("cannot clear the kernel cache " + bad.string()).c_str()),
                         fj::Error);
    CHECK_THROWS_WITH_AS(fj::cache_list(o), doctest::Contains(("cannot list the kernel cache " + bad.string()).c_str()),
                         fj::Error);  // not "no entries"
  }
  // A dangling link is said to be one (it said "cannot inspect DIR: No such file or directory",
  // where ls shows DIR).
  fs::create_symlink(dir / "gone", dir / "dangling");
  fj::Options dangling;
  dangling.cache_dir = (dir / "dangling").string();
  CHECK(fj::cache_stats(dangling).disabled_reason ==
        (dir / "dangling").string() + " is a symbolic link to " + (dir / "gone").string() +
            ", which cannot be inspected: No such file or directory");
  // ... and cache clear decides by the same test: refused, not "removed 0 entries".
  CHECK_THROWS_WITH_AS(fj::cache_clear(dangling), doctest::Contains("fusejit does not use it as one"), fj::Error);
  fj::Options absent;
  absent.cache_dir = (dir / "absent").string();
  CHECK(fj::cache_stats(absent).enabled);  // made on first use
  CHECK(fj::cache_list(absent).empty());
  CHECK(fj::cache_clear(absent) == 0);
  fs::remove_all(dir);
}

TEST_CASE("cache clear refuses a folder fusejit does not use as a cache, and removes only this user's build folders") {
  // A hostile tester's find: `cache clear` removed a .tmp-build-NAME folder (and the user's file in
  // it) from a group-writable folder that `run` refused as a cache; and, run by root, another user's.
  fs::path dir = make_temp_dir();
  fs::create_directories(dir / ".tmp-build-notes");
  write_text(dir / ".tmp-build-notes" / "todo.txt", "notes");
  fs::permissions(dir, fs::perms::group_write, fs::perm_options::add);
  fj::Options o;
  o.cache_dir = dir.string();
  CHECK_FALSE(fj::cache_stats(o).enabled);
  CHECK_THROWS_WITH_AS(fj::cache_clear(o), doctest::Contains("fusejit does not use it as one"), fj::Error);
  CHECK(read_text(dir / ".tmp-build-notes" / "todo.txt") == "notes");
  fs::permissions(dir, fs::perms::group_write, fs::perm_options::remove);
  if (::geteuid() == 0) {  // another user's build folder and subfolder: only root can make them
    REQUIRE(::chown((dir / ".tmp-build-notes").c_str(), 65534, 65534) == 0);
    fs::create_directories(dir / "ab");
    REQUIRE(::chown((dir / "ab").c_str(), 65534, 65534) == 0);
    CHECK(fj::cache_clear(o) == 0);
    CHECK(read_text(dir / ".tmp-build-notes" / "todo.txt") == "notes");
    CHECK(fs::exists(dir / "ab"));
  }
  fs::remove_all(dir);
}

TEST_CASE("a dump removes the temporary files a killed dump left in the folder, and only those") {
  fs::path dir = make_temp_dir(), out = make_temp_dir();
  const std::vector<const char*> ours = {".index.json.4242.13.tmp", ".fj_g_0123456789abcdef.cu.4242.12.tmp",
                                         ".graph.txt.1.0.tmp", ".fj_scalar.h.77.3.tmp", ".fj_t_00112233445566ff.cubin.5.6.tmp"};
  const std::vector<const char*> theirs = {".keep.tmp", "notes.1.2.tmp", ".x.1.y.tmp", ".notes.txt.2024.1.tmp",
                                           ".settings.json.31337.0.tmp", ".fj_g_xyz.cu.1.2.tmp"};
  for (const auto* list : {&ours, &theirs})
    for (const char* name : *list) write_text(out / name, "partial");
  fs::create_directory(out / ".index.json.1.2.tmp");  // not a regular file
  const fj::Graph g = fj::Graph::parse("graph t\ninput x : f32[8]\ny = exp(x)\noutput y\n", "t.txt");
  fj::compile_to_dir(g, "sm_90", out.string(), false, cpu_options(dir), /*with_unfused=*/false);
  for (const char* gone : ours) CHECK_MESSAGE(!fs::exists(out / gone), gone);
  for (const char* kept : theirs) CHECK_MESSAGE(fs::exists(out / kept), kept);
  CHECK(fs::exists(out / ".index.json.1.2.tmp"));
  CHECK(fs::exists(out / "index.json"));
  fs::remove_all(dir);
  fs::remove_all(out);
}

TEST_CASE("an ahead-of-time folder's .cu files include the preludes written beside them, and compile there") {
  fs::path dir = make_temp_dir(), out = make_temp_dir();
  const fj::Graph g = fj::Graph::parse(
      "graph rms\ninput x : f32[8, 300]\ny = x * rsqrt(mean(x * x, -1, keepdim) + 1e-6)\noutput y\n", "rms.txt");
  const std::vector<fj::KernelInfo> ks = fj::compile_to_dir(g, "sm_90", out.string(), false, cpu_options(dir));
  const nlohmann::json index = nlohmann::json::parse(read_text(out / "index.json"));
  REQUIRE(index["headers"] == nlohmann::json::array({"fj_scalar.h", "fj_reduce.h", "fj_kernel.h"}));
  for (const PreludeHeader& h : prelude_headers()) CHECK(read_text(out / h.name) == h.text);
  REQUIRE(index["kernels"].size() == 6);  // fused; unfused: mul, mean, add, rsqrt, mul
  for (const nlohmann::json& k : index["kernels"]) {
    const std::string cu = read_text(out / k["cu"].get<std::string>());
    CAPTURE(cu.substr(0, 400));
    CHECK(cu.rfind("// Generated by fusejit.", 0) == 0);
    CHECK(cu.find("#include \"fj_scalar.h\"\n") != std::string::npos);
    CHECK(cu.find("#include \"fj_kernel.h\"\n") != std::string::npos);
    CHECK(cu.find("the scalar semantics of every fusejit op") == std::string::npos);  // not copied in
    CHECK(cu.size() < 20000);
    const std::string entry = "extern \"C\" __global__ void ", name = k["kernel"].get<std::string>() + "(";
    CHECK((cu.find(entry + name) != std::string::npos || cu.find(entry + "FJ_RED_ROW_BOUNDS " + name) != std::string::npos));
  }
  // A .cu compiles where it lies (NVRTC with the folder as include path, as nvcc finds "fj_scalar.h").
  for (size_t i : {size_t{0}, ks.size() - 1}) {
    const std::string name = index["kernels"][i]["cu"].get<std::string>();
    std::vector<std::string> opts = default_compile_options(false);
    opts.push_back("-I" + out.string());
    const CompileResult r = compile_cuda(read_text(out / name), name, CompileRequest{parse_target("sm_90"), opts, {}});
    CHECK(!r.binary.empty());
  }
  for (const fs::path& d : {dir, out}) fs::remove_all(d);
}

TEST_CASE("an ahead-of-time .cu's nvcc command leaves out the NVRTC-only options it was given, saying so") {
  // nvcc stopped at "Unknown option '-minimal'" (hostile pass).
  fs::path dir = make_temp_dir(), out = make_temp_dir();
  const fj::Graph g = fj::Graph::parse("graph m\ninput a : f32[64]\ny = a * 2\noutput y\n", "m.txt");
  fj::Options o = cpu_options(dir);
  // -default-device is fusejit's own too (not said then), and NVRTC's short form of
  // --device-as-default-execution-space, which was said while this was not.
  o.nvrtc_options = {"-minimal", "-lineinfo", "-default-device", "-Xptxas", "-v", "--ptxas-options=-O3"};
  fj::compile_to_dir(g, "sm_90", out.string(), false, o, /*with_unfused=*/false);
  const nlohmann::json index = nlohmann::json::parse(read_text(out / "index.json"));
  const std::string name = index["kernels"][0]["cu"].get<std::string>();
  const std::string cu = read_text(out / name);
  const std::string command = "nvcc -cubin -arch=sm_90 --std=c++17 --fmad=false --ftz=false --prec-div=true "
                              "--prec-sqrt=true -lineinfo -Xptxas -v --ptxas-options=-O3 " + name;
  CHECK(cu.find("// The same kernel with nvcc: " + command + "\n// (NVRTC-only options left out of it: -default-device "
                "-minimal)\n") !=
        std::string::npos);
  if (fs::exists("/usr/local/cuda/bin/nvcc"))
    CHECK(std::system(("cd '" + out.string() + "' && /usr/local/cuda/bin/" + command + " -o nvcc.cubin > nvcc.log 2>&1").c_str()) == 0);
  for (const fs::path& d : {dir, out}) fs::remove_all(d);
}

TEST_CASE("every NVRTC option fusejit passes on, NVRTC takes in both its spellings, and nvcc the ones its command keeps") {
  // The table in lib/options.cpp against NVRTC itself: an option fusejit passes that NVRTC rejects
  // would fail on a GPU only (the CPU path checks the table, not NVRTC). sm_100 for -device-float128.
  fs::path dir = make_temp_dir();
  const fj::Graph g = fj::Graph::parse("graph opts\ninput a : f32[4, 64]\ny = a * 2\noutput y\n", "o.txt");
  fj::Options o = cpu_options(dir);
  o.disk_cache = false;
  for (const int part : {0, 1, 2, 3}) {  // long, short; every other one (NVRTC refuses -err-no beside -no-err-no)
    const std::vector<std::string> all = fusejit::passed_nvrtc_options(part >= 2);
    o.nvrtc_options.clear();
    for (size_t i = part % 2; i < all.size(); i += 2) o.nvrtc_options.push_back(all[i]);
    CAPTURE(o.nvrtc_options);
    const fs::path out = dir / std::to_string(part);
    fj::compile_to_dir(g, "sm_100", out.string(), /*fast_math=*/true, o, /*with_unfused=*/false);
    const nlohmann::json index = nlohmann::json::parse(read_text(out / "index.json"));
    const std::string name = index["kernels"][0]["cu"].get<std::string>();
    const std::string cu = read_text(out / name);
    const size_t at = cu.find("// The same kernel with nvcc: ");
    REQUIRE(at != std::string::npos);
    const std::string command = cu.substr(at + 30, cu.find('\n', at) - at - 30);
    if (fs::exists("/usr/local/cuda/bin/nvcc"))
      CHECK(std::system(("cd '" + out.string() + "' && /usr/local/cuda/bin/" + command + " -o nvcc.cubin > nvcc.log 2>&1").c_str()) == 0);
  }
  fs::remove_all(dir);
}

TEST_CASE("-Xptxas pairs reach NVRTC as given, repeats too: a list checked as ptxas's never becomes an NVRTC option") {
  // A reviewer's find: repeated options were dropped, so the second -Xptxas went and its list,
  // --fmad=true, reached NVRTC itself: strict mode's a * b + c compiled with an FMA.
  fs::path dir = make_temp_dir(), out = make_temp_dir();
  const fj::Graph g = fj::Graph::parse("graph fma\ninput a : f32[64]\ninput b : f32[64]\ninput c : f32[64]\n"
                                       "y = a * b + c\noutput y\n", "fma.txt");
  fj::Options o = cpu_options(dir);
  o.disk_cache = false;
  o.nvrtc_options = {"-Xptxas", "-v", "-Xptxas", "--fmad=true"};
  fj::compile_to_dir(g, "compute_90", out.string(), false, o, /*with_unfused=*/false);
  const nlohmann::json index = nlohmann::json::parse(read_text(out / "index.json"));
  const nlohmann::json& k = index["kernels"][0];
  const std::vector<std::string> opts = k["nvrtc_options"].get<std::vector<std::string>>();
  CHECK(std::vector<std::string>(opts.end() - 4, opts.end()) == o.nvrtc_options);
  const std::string ptx = read_text(out / (k["kernel"].get<std::string>() + ".ptx"));
  CHECK(ptx.find("mul.rn.f32") != std::string::npos);
  CHECK(ptx.find("fma.rn.f32") == std::string::npos);
  for (const fs::path& d : {dir, out}) fs::remove_all(d);
}

TEST_CASE("an ahead-of-time .cu says its compile options; nvcc with them gives fusejit's kernel (no FMA in strict mode)") {
  fs::path dir = make_temp_dir(), out = make_temp_dir();
  const fj::Graph g = fj::Graph::parse("graph fma\ninput a : f32[64]\ninput b : f32[64]\ninput c : f32[64]\n"
                                       "y = a * b + c\noutput y\n", "fma.txt");
  fj::compile_to_dir(g, "compute_90", out.string(), false, cpu_options(dir), /*with_unfused=*/false);
  const nlohmann::json index = nlohmann::json::parse(read_text(out / "index.json"));
  REQUIRE(index["kernels"].size() == 1);
  const nlohmann::json& k = index["kernels"][0];
  CHECK(k["nvrtc_options"] == nlohmann::json(nvrtc_options_for(false, {}, {})));
  const std::string cu = read_text(out / k["cu"].get<std::string>());
  const std::string nvcc_line = "// The same kernel with nvcc: nvcc -ptx -arch=compute_90 --std=c++17 --fmad=false --ftz=false "
                                "--prec-div=true --prec-sqrt=true " + k["cu"].get<std::string>() + "\n";
  CAPTURE(cu.substr(0, 400));
  CHECK(cu.find("\n// NVRTC options: --std=c++17 -default-device --fmad=false --ftz=false --prec-div=true "
                "--prec-sqrt=true\n" + nvcc_line) != std::string::npos);
  const std::string nvcc_bin = "/usr/local/cuda/bin/nvcc";
  if (!fs::exists(nvcc_bin)) {
    MESSAGE("no nvcc at " << nvcc_bin << ": the nvcc half is not run");
  } else {
    // The documented command as it stands (less its newline), run where the file lies.
    const std::string args = nvcc_line.substr(nvcc_line.find("nvcc -ptx") + 4, nvcc_line.size() - 1 - (nvcc_line.find("nvcc -ptx") + 4));
    REQUIRE(std::system(("cd '" + out.string() + "' && " + nvcc_bin + args + " -o nvcc.ptx > nvcc.log 2>&1").c_str()) == 0);
    auto count = [](const std::string& text, const std::string& what) {
      size_t n = 0;
      for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
      return n;
    };
    const std::string mine = read_text(out / k["ptx"].get<std::string>()), theirs = read_text(out / "nvcc.ptx");
    CHECK(count(mine, "fma.rn.f32") == 0);
    CHECK(count(theirs, "fma.rn.f32") == 0);
    CHECK(count(theirs, "mul.rn.f32") == count(mine, "mul.rn.f32"));
    CHECK(count(mine, "mul.rn.f32") > 0);
  }
  for (const fs::path& d : {dir, out}) fs::remove_all(d);
}

TEST_CASE("one store: GPU kernels and CPU modules in one folder, listed, counted and cleared together") {
  fs::path dir = make_temp_dir(), out = make_temp_dir();
  const fj::Options o = cpu_options(dir);
  CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", o), "compiled"));
  fj::compile_to_dir(fj::Graph::parse(kGraphOther, "other.txt"), "sm_90", out.string(), false, o);
  std::set<std::string> targets;
  for (const fj::CacheEntryInfo& e : fj::cache_list(o)) {
    CHECK(e.valid);
    targets.insert(e.target);
  }
  CHECK(targets == std::set<std::string>{"host", "sm_90"});
  fj::CacheStats s = fj::cache_stats(o);
  CHECK(s.host_modules == 2);  // the fused and the unfused plan's
  CHECK(s.entries >= 1);
  CHECK(s.temp_files == 0);
  CHECK(s.enabled);
  CHECK(fj::cache_clear(o) == s.entries + s.host_modules);
  for (const std::string& f : tree(dir)) CHECK_MESSAGE(fs::is_directory(dir / f), f);  // no file left
  fs::remove_all(dir);
  fs::remove_all(out);
}

TEST_CASE("one size cap for GPU kernels and CPU modules") {
  fs::path dir = make_temp_dir();
  {
    KernelCache filler(config_for(dir));
    const std::vector<char> payload(100 << 10, 'p');
    for (int i = 0; i < 12; ++i) {  // 1.2 MiB of old GPU entries
      const DiskKey k = disk_key(inputs_n(500 + i));
      REQUIRE(filler.store(k, Target{Arch{9, 0}, OutputKind::Cubin}, payload, "k"));
      struct timespec times[2] = {{1000 + i, 0}, {1000 + i, 0}};
      REQUIRE(::utimensat(AT_FDCWD, entry_path(dir, k.key).c_str(), times, 0) == 0);
    }
  }
  REQUIRE(tree_bytes(dir) > (1u << 20));
  ScopedEnv cap("FUSEJIT_CACHE_MAX_MB", "1");
  CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", cpu_options(dir)), "compiled"));
  CHECK(tree_bytes(dir) <= (1u << 20));  // old GPU entries went, least recently used first
  CHECK(fj::cache_stats(cpu_options(dir)).host_modules == 2);
  CHECK(fj::cache_stats(cpu_options(dir)).cap_bytes == (1 << 20));
  fs::remove_all(dir);
}

TEST_CASE("a CPU module is compiled once across processes") {
  fs::path dir = make_temp_dir();
  const auto start = std::chrono::system_clock::now() + std::chrono::milliseconds(500);
  const long long start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count();
  std::vector<Child> children;
  for (int p = 0; p < 4; ++p)
    children.push_back(spawn_child({"FJ_CACHE_TEST_CHILD=cpu", "FUSEJIT_CACHE_DIR=" + dir.string(),
                                    "FJ_CACHE_TEST_START_NS=" + std::to_string(start_ns)}));
  int compiled = 0;
  for (auto& c : children) {
    const std::pair<int, std::string> child = finish_child(c);
    const int rc = child.first;
    const std::string& out = child.second;
    CAPTURE(out);
    CHECK(rc == 0);
    int n = -1;
    REQUIRE(std::sscanf(out.c_str(), "compiled=%d", &n) == 1);
    compiled += n;
  }
  CHECK(compiled == 1);  // the others waited on the key's lock and loaded it
  CHECK(cache_stats(dir).host_entries == 2);  // the fused and the unfused plan's modules
  fs::remove_all(dir);
}

TEST_CASE("stale temporary files, lock files and build folders are swept; fresh ones stay") {
  fs::path dir = make_temp_dir();
  KernelCache seed(config_for(dir));
  const DiskKeyInputs in = inputs_n(600);
  seed.get_or_compile(in, [&] { return fake_compile(in); });
  const fs::path prefix = entry_path(dir, disk_key(in).key).parent_path();
  const fs::path old_temp = prefix / ".tmp-killed", new_temp = prefix / ".tmp-running";
  const fs::path old_lock_named = entry_path(dir, Hash128{1, 0xab00000000000000ull}).replace_extension(".lock");
  // A build folder no build holds is abandoned once ten minutes old, not an hour (a concurrency
  // tester's find: processes exiting mid-build left theirs for an hour; the ten minutes spare a
  // build on another machine where flock is local to each); one kept for inspection (marked by a
  // file .kept) stays an hour.
  const fs::path old_build = dir / ".tmp-build-killed", exited_build = dir / ".tmp-build-exited";
  const fs::path new_build = dir / ".tmp-build-new";
  const fs::path old_kept = dir / ".tmp-build-oldkept", new_kept = dir / ".tmp-build-newkept";
  fs::create_directories(old_lock_named.parent_path());
  for (const fs::path& f : {old_temp, new_temp, old_lock_named}) write_text(f, "x");
  for (const fs::path& d : {old_build, exited_build, new_build, old_kept, new_kept}) {
    fs::create_directories(d);
    write_text(d / "module.cpp", "int x;");
  }
  for (const fs::path& d : {old_kept, new_kept}) write_text(d / ".kept", "");
  DiskStore store(StoreConfig{dir, 0, [](const std::string&) {}});
  std::optional<DiskStore::Scratch> running = store.scratch();  // a build in progress: locked
  write_text(running->path() / "module.cpp", "int x;");
  const time_t now = ::time(nullptr);
  const struct timespec two_hours_ago[2] = {{now - 7200, 0}, {now - 7200, 0}};
  const struct timespec eleven_minutes_ago[2] = {{now - 660, 0}, {now - 660, 0}};
  for (const fs::path& f : {old_temp, old_lock_named, old_build, old_kept})
    REQUIRE(::utimensat(AT_FDCWD, f.c_str(), two_hours_ago, AT_SYMLINK_NOFOLLOW) == 0);
  for (const fs::path& f : {exited_build, running->path()})
    REQUIRE(::utimensat(AT_FDCWD, f.c_str(), eleven_minutes_ago, AT_SYMLINK_NOFOLLOW) == 0);
  CHECK(cache_stats(dir).temp_files == 8);
  KernelCache next(config_for(dir));  // a new process's first store scans and sweeps
  const DiskKeyInputs in2 = inputs_n(601);
  next.get_or_compile(in2, [&] { return fake_compile(in2); });
  CHECK(!fs::exists(old_temp));
  CHECK(!fs::exists(old_lock_named));
  CHECK(!fs::exists(old_build));
  CHECK(!fs::exists(exited_build));
  CHECK(!fs::exists(old_kept));
  CHECK(fs::exists(new_temp));
  CHECK(fs::exists(new_build / "module.cpp"));
  CHECK(fs::exists(new_kept / "module.cpp"));
  CHECK(fs::exists(running->path() / "module.cpp"));  // locked: in use, whatever its age
  CHECK(cache_stats(dir).temp_files == 4);
  // Kept, a build folder is marked so, and the sweeps leave it its hour.
  const fs::path kept = running->keep();
  CHECK(fs::exists(kept / ".kept"));
  CHECK(fs::exists(kept / "module.cpp"));
  running.reset();
  KernelCache third(config_for(dir));
  const DiskKeyInputs in3 = inputs_n(602);
  third.get_or_compile(in3, [&] { return fake_compile(in3); });
  CHECK(fs::exists(kept / "module.cpp"));
  CHECK(clear_cache(dir).removed == 3);  // entries; the kept folders go too, as every temporary file
  CHECK(!fs::exists(kept));
  CHECK(cache_stats(dir).temp_files == 1);  // new_temp: younger than a minute, maybe being renamed into place
  fs::remove_all(dir);
}

TEST_CASE("cache environment variables are validated, with errors naming them") {
  fs::path dir = make_temp_dir();
  const fj::Options o = cpu_options(dir);
  auto expect_error = [&](const char* var, const char* value) {
    CAPTURE(var);
    CAPTURE(value);
    ScopedEnv e(var, value);
    for (int path = 0; path < 2; ++path) {
      try {
        if (path == 0) cpu_outcomes(kGraphOther, "other.txt", o);
        else fj::cache_stats(o);
        FAIL_CHECK("no error");
      } catch (const fj::Error& err) {
        CHECK(err.kind() == fj::ErrorKind::User);
        CHECK(std::string(err.what()).find(std::string(var) + "='" + value + "'") != std::string::npos);
        CHECK(err.file().empty());  // about the environment, not the graph file
        CHECK(err.diagnostic().rfind("error: " + std::string(var), 0) == 0);
      }
    }
  };
  for (const char* bad : {"-5", "abc", "1e3", "5 ", " 5", "0x10", "99999999999999999999", "17592186044416", "8796093022208"})
    expect_error("FUSEJIT_CACHE_MAX_MB", bad);
  for (const char* bad : {"maybe", "2", "enabled", "1 "}) expect_error("FUSEJIT_DISABLE_CACHE", bad);
  CHECK(tree(dir).empty());
  {
    ScopedEnv off("FUSEJIT_DISABLE_CACHE", "TRUE");
    CHECK(all_are(cpu_outcomes(kGraphOther, "other.txt", o), "compiled"));
    CHECK(tree(dir).empty());  // nothing on disk
  }
  for (const char* no : {"0", "no", "Off", "false", ""}) {
    ScopedEnv on("FUSEJIT_DISABLE_CACHE", no);
    CHECK(!cache_disabled_by_env());
  }
  for (const auto& [text, bytes] : {std::pair{"8796093022207", int64_t{8796093022207} << 20}, std::pair{"000000000000001", int64_t{1} << 20}}) {
    ScopedEnv big("FUSEJIT_CACHE_MAX_MB", text);  // the largest cap, and leading zeros
    CHECK(fj::cache_stats(o).cap_bytes == bytes);
  }
  ScopedEnv cap("FUSEJIT_CACHE_MAX_MB", "0");
  CHECK(cache_env().max_bytes == 0);  // no cap
  CHECK(fj::cache_stats(o).cap_bytes == 0);
  fs::remove_all(dir);
}

TEST_CASE("one cache-folder rule for GPU kernels and CPU modules; a relative XDG_CACHE_HOME is ignored") {
  fs::path home = make_temp_dir(), work = make_temp_dir();
  const fs::path cwd = fs::current_path();
  fs::current_path(work);
  {
    ScopedEnv a("FUSEJIT_CACHE_DIR", nullptr), b("XDG_CACHE_HOME", "relative-xdg"), c("HOME", home.c_str());
    CHECK(fj::cache_path() == (home / ".cache" / "fusejit").string());
    CHECK(all_are(cpu_outcomes(kGraphOther, "other.txt", cpu_options()), "compiled"));
    CHECK(fj::cache_stats().host_modules == 2);
    CHECK(!fs::exists(work / "relative-xdg"));
    ScopedEnv x("XDG_CACHE_HOME", (work / "xdg").c_str());
    CHECK(fj::cache_path() == (work / "xdg" / "fusejit").string());
  }
  fs::current_path(cwd);
  fs::remove_all(home);
  fs::remove_all(work);
}

TEST_CASE("a cache folder that is not private is never read or written: one warning, the run goes on") {
  fs::path good = make_temp_dir();
  CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", cpu_options(good)), "compiled"));
  // Each bad folder starts as a copy of a good cache: a module planted there must never load.
  std::vector<fs::path> made{good};
  auto planted = [&](const std::string& name) {
    made.push_back(make_temp_dir());
    fs::path bad = made.back() / name;
    fs::copy(good, bad, fs::copy_options::recursive);
    return bad;
  };
  auto expect_refused = [&](const fs::path& bad, bool via_env) {
    CAPTURE(bad);
    CAPTURE(via_env);
    const std::vector<std::string> before = tree(bad);
    LibraryWarnings w;
    std::optional<ScopedEnv> env;
    if (via_env) env.emplace("FUSEJIT_CACHE_DIR", bad.c_str());
    CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", cpu_options(via_env ? fs::path() : bad)), "compiled"));
    CHECK(tree(bad) == before);  // nothing written
    CHECK(w.list.size() == 1);
    CHECK(w.count("is not usable") == 1);
    CHECK(w.count("from here on this process neither reads nor writes it") == 1);
  };
  for (bool via_env : {false, true}) {
    fs::path open_to_all = planted(via_env ? "world-env" : "world-opt");
    for (const std::string& d : tree(open_to_all)) fs::permissions(open_to_all / d, fs::perms::all);
    fs::permissions(open_to_all, fs::perms::all);
    expect_refused(open_to_all, via_env);
    fs::path group = planted(via_env ? "group-env" : "group-opt");
    fs::permissions(group, fs::perms::owner_all | fs::perms::group_all);
    expect_refused(group, via_env);
    // A folder that cannot be created (a path below a regular file: unwritable even for root).
    made.push_back(make_temp_dir());
    fs::path file = made.back() / "a-file";
    write_text(file, "x");
    LibraryWarnings w;
    std::optional<ScopedEnv> env;
    if (via_env) env.emplace("FUSEJIT_CACHE_DIR", (file / "cache").c_str());
    CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", cpu_options(via_env ? fs::path() : file / "cache")), "compiled"));
    CHECK(w.count("neither reads nor writes it") == 1);
    if (::geteuid() == 0) {  // only root can give a folder to another user
      fs::path other = planted(via_env ? "other-env" : "other-opt");
      for (const std::string& f : tree(other)) REQUIRE(::lchown((other / f).c_str(), 65534, 65534) == 0);
      REQUIRE(::chown(other.c_str(), 65534, 65534) == 0);
      expect_refused(other, via_env);
    }
  }
  // A private folder of ours that is a symbolic link is fine: the link is followed.
  fs::path real = planted("real");
  made.push_back(make_temp_dir());
  fs::path link = made.back() / "link";
  fs::create_directory_symlink(real, link);
  CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", cpu_options(link)), "disk"));
  for (const fs::path& d : made) fs::remove_all(d);
}

TEST_CASE("without any cache folder nothing is written anywhere: one warning, a private build folder") {
  fs::path tmp = make_temp_dir();
  ScopedEnv a("FUSEJIT_CACHE_DIR", nullptr), b("XDG_CACHE_HOME", nullptr), c("HOME", nullptr), t("TMPDIR", tmp.c_str());
  LibraryWarnings w;
  CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", cpu_options()), "compiled"));
  CHECK(w.count("no kernel cache folder") == 1);
  CHECK(tree(tmp).empty());  // no shared folder such as /tmp/fusejit-host-<uid>, no leftovers
  fs::remove_all(tmp);
}

TEST_CASE("cache clear of entries it cannot remove (a read-only filesystem) is an error naming the first") {
  // It said "removed 0 entries" and succeeded (hostile pass). A read-only tmpfs needs root and
  // CAP_SYS_ADMIN: elsewhere the case is skipped, saying so.
  const fs::path mnt = make_temp_dir();
  if (std::system(("mount -t tmpfs -o size=16m tmpfs " + mnt.string() + " 2>/dev/null").c_str()) != 0) {
    MESSAGE("skipped: cannot mount a tmpfs here (needs root)");
    fs::remove_all(mnt);
    return;
  }
  const fj::Options o = cpu_options(mnt / "c");
  CHECK(all_are(cpu_outcomes(kGraphOther, "other.txt", o, true), "compiled"));
  REQUIRE(fj::cache_list(o).size() == 1);
  REQUIRE(std::system(("mount -o remount,ro " + mnt.string()).c_str()) == 0);
  try {
    (void)fj::cache_clear(o);
    FAIL_CHECK("cleared a read-only folder");
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK(std::string(e.what()).find("removed 0 cache entries, but 1 could not be removed (the first: " +
                                     (mnt / "c").string()) != std::string::npos);
    CHECK(std::string(e.what()).find("Read-only file system") != std::string::npos);
  }
  CHECK(std::system(("umount " + mnt.string()).c_str()) == 0);
  fs::remove_all(mnt);
}

TEST_CASE("a cache folder on a full filesystem: one warning, the build moves to TMPDIR, the run goes on") {
  // Every CPU compile failed with Error(Compile) there (hostile pass). A 64 KiB tmpfs needs root
  // and CAP_SYS_ADMIN: elsewhere the case is skipped, saying so.
  fs::path full = make_temp_dir(), tmp = make_temp_dir();
  if (std::system(("mount -t tmpfs -o size=64k tmpfs " + full.string() + " 2>/dev/null").c_str()) != 0) {
    MESSAGE("skipped: cannot mount a small tmpfs here (needs root)");
    fs::remove_all(full);
    fs::remove_all(tmp);
    return;
  }
  {
    ScopedEnv t("TMPDIR", tmp.c_str());
    LibraryWarnings w;
    CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", cpu_options(full / "c")), "compiled"));
    CHECK(w.count("its filesystem is full") == 1);
    CHECK(tree(tmp).empty());  // the private build folders are gone
  }
  CHECK(std::system(("umount " + full.string()).c_str()) == 0);
  fs::remove_all(full);
  fs::remove_all(tmp);
}

TEST_CASE("a cache folder on a noexec filesystem: one warning, modules load from TMPDIR; a noexec TMPDIR is named") {
  // dlopen failed with "failed to map segment" on every run, an Error(Compile) (hostile pass).
  // Mounting needs root and CAP_SYS_ADMIN: elsewhere the case is skipped, saying so.
  fs::path noexec = make_temp_dir(), tmp = make_temp_dir();
  if (std::system(("mount -t tmpfs -o size=16m,noexec tmpfs " + noexec.string() + " 2>/dev/null").c_str()) != 0) {
    MESSAGE("skipped: cannot mount a tmpfs here (needs root)");
    fs::remove_all(noexec);
    fs::remove_all(tmp);
    return;
  }
  // Unmounted (and both folders removed) also when a check below throws. Lazily: glibc's dlopen
  // leaves the first segment of a module it failed to map mapped (of a deleted file), which keeps
  // the mount busy while this process lives.
  struct Unmount {
    fs::path at, tmp;
    ~Unmount() {
      CHECK(std::system(("umount -l " + at.string()).c_str()) == 0);
      fs::remove_all(at);
      fs::remove_all(tmp);
    }
  } const unmount{noexec, tmp};
  {
    ScopedEnv t("TMPDIR", tmp.c_str());
    LibraryWarnings w;
    CHECK(all_are(cpu_outcomes(kGraphOther, "other.txt", cpu_options(noexec / "c"), true), "compiled"));
    CHECK(w.count("its filesystem is mounted noexec: host modules cannot be loaded from it") == 1);
    CHECK(tree(tmp).empty());
  }
  ScopedEnv t("TMPDIR", noexec.c_str());
  fj::Options o = cpu_options();
  o.disk_cache = false;
  try {
    (void)fj::Program::compile(fj::Graph::parse("graph noexec\ninput x : f32[8]\ny = x * 5 + 1\noutput y\n"), o);
    FAIL_CHECK("loaded a module from a noexec folder");
  } catch (const fj::Error& e) {
    CHECK(std::string(e.what()).find("from " + noexec.string() + ": its filesystem is mounted noexec") !=
          std::string::npos);
  }
}

TEST_CASE("a path holding a NUL byte is refused, never used cut short at the NUL") {
  // "DIR\0/x" reaches every system call as DIR: the cache once emptied DIR as an odd entry.
  const fs::path victim = make_temp_dir();
  write_text(victim / "notes.txt", "precious");
  const std::string cut = victim.string() + std::string(1, '\0') + "/fusejit-cache";
  fj::Options o = cpu_options();
  o.cache_dir = cut;
  const fj::Graph g = fj::Graph::parse(kGraphOther, "other.txt");
  auto refused = [](auto&& f) {
    try {
      f();
    } catch (const fj::Error& e) {
      CAPTURE(e.what());
      CHECK(std::string(e.what()).find("holds a NUL byte") != std::string::npos);
      return e.kind() == fj::ErrorKind::User;
    }
    return false;
  };
  CHECK(refused([&] { (void)fj::Program::compile(g, o); }));
  CHECK(refused([&] { (void)fj::cache_stats(o); }));
  CHECK(refused([&] { (void)fj::cache_clear(o); }));
  CHECK(refused([&] { (void)fj::compile_to_dir(g, "sm_90", cut, false, cpu_options(victim / "c")); }));
  CHECK(refused([&] { (void)fj::Program::load(cut); }));
  CHECK(refused([&] { (void)fj::Graph::load(cut); }));
  CHECK(read_text(victim / "notes.txt") == "precious");
  fs::remove_all(victim);
}

TEST_CASE("a cache folder removed during a CPU-path build: the build runs again, the folder is made again") {
  const fs::path dir = make_temp_dir(), tools = make_temp_dir();
  const fs::path cache = dir / "cache", count = tools / "count", cxx = tools / "cxx.sh";
  // A compiler that removes the cache folder, its own build folder included, on its first three
  // builds (a cleaner removing it every second hit one retry twice), then compiles.
  write_text(count, "0");
  write_text(cxx, "#!/bin/sh\nn=$(cat '" + count.string() + "')\nif [ \"$1\" != --version ] && [ \"$n\" -lt 3 ]; then\n" +
                      "  echo $((n + 1)) > '" + count.string() + "'; rm -rf '" + cache.string() + "'\nfi\nexec c++ \"$@\"\n");
  fs::permissions(cxx, fs::perms::owner_all);
  ScopedEnv c("CXX", cxx.c_str());
  CHECK(all_are(cpu_outcomes(kGraphOther, "other.txt", cpu_options(cache), true), "compiled"));
  CHECK(read_text(count) == "3\n");
  CHECK(fs::is_directory(cache));
  CHECK(fj::cache_list(cpu_options(cache)).size() == 1);
  // A fourth removal within one build turns the disk cache off (one warning naming the folder)
  // and builds in $TMPDIR (it was an error that said "the host compiler failed"), also for a
  // folder named with a trailing slash.
  write_text(count, "-1");
  LibraryWarnings w;
  CHECK(all_are(cpu_outcomes("input q : i32[3]\nr = q * 17\noutput r\n", "q.txt", cpu_options(cache.string() + "/"),
                             true),
                "compiled"));
  CHECK(read_text(count) == "3\n");
  REQUIRE(w.list.size() == 1);
  CHECK(w.count("a build's folder in it was removed 4 times in a row") == 1);
  CHECK(w.count("from here on this process neither reads nor writes it") == 1);
  fs::remove_all(dir);
  fs::remove_all(tools);
}

TEST_CASE("--no-cache (disk_cache = false) leaves nothing on disk, also when the compiler fails") {
  fs::path tmp = make_temp_dir();
  ScopedEnv t("TMPDIR", tmp.c_str());
  fj::Options o = cpu_options();
  o.disk_cache = false;
  CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", o), "compiled"));
  CHECK(tree(tmp).empty());
  {
    ScopedEnv cxx("CXX", "false");  // a compiler that fails
    CHECK_THROWS_AS(cpu_outcomes("input q : i32[3]\nr = q * 7\noutput r\n", "q.txt", o), fj::Error);
  }
  CHECK(tree(tmp).empty());
  fs::remove_all(tmp);
}

TEST_CASE("a build folder without a disk cache: an empty TMPDIR counts as unset, a bad one is named") {
  fj::Options o = cpu_options();
  o.disk_cache = false;
  {
    ScopedEnv t("TMPDIR", "");
    CHECK(all_are(cpu_outcomes("input q : i32[3]\nr = q * 11\noutput r\n", "q.txt", o), "compiled"));
  }
  ScopedEnv t("TMPDIR", "/nonexistent-fusejit-tmp");
  try {
    cpu_outcomes("input q : i32[3]\nr = q * 13\noutput r\n", "q.txt", o);
    FAIL("compiled without a temporary folder");
  } catch (const fj::Error& e) {
    CHECK(doctest::String(e.what()) == doctest::Contains("TMPDIR=/nonexistent-fusejit-tmp: No such file or directory"));
  }
}

TEST_CASE("a compile worker's warnings name the thread whose call it is (warning_origin)") {
  fs::path dir = make_temp_dir();
  const fj::Options o = cpu_options(dir);
  CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", o), "compiled"));
  for (const fj::CacheEntryInfo& e : fj::cache_list(o)) write_text(e.path, "damaged");
  std::mutex mu;
  std::vector<std::pair<std::thread::id, std::thread::id>> seen;  // (the handler's thread, the origin)
  fj::set_warning_handler([&](std::string_view) {
    std::lock_guard lock(mu);
    seen.emplace_back(std::this_thread::get_id(), fj::warning_origin());
  });
  CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", o), "compiled"));  // each damaged entry warns
  fj::set_warning_handler({});
  REQUIRE(seen.size() == 2);  // the fused and the unfused module, each built on a worker
  for (const auto& [on, origin] : seen) {
    CHECK(on != std::this_thread::get_id());
    CHECK(origin == std::this_thread::get_id());
  }
  CHECK(fj::warning_origin() == std::this_thread::get_id());
  fs::remove_all(dir);
}

TEST_CASE("every damage case of a CPU module entry is rebuilt with one warning, never loaded") {
  fs::path dir = make_temp_dir();
  const fj::Options o = cpu_options(dir);
  CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", o, true), "compiled"));
  REQUIRE(fj::cache_list(o).size() == 1);
  const fs::path path = fj::cache_list(o)[0].path;
  CHECK(all_are(cpu_outcomes(kGraphOther, "other.txt", o, true), "compiled"));
  fs::path other_path;
  for (const fj::CacheEntryInfo& e : fj::cache_list(o))
    if (e.path != path.string()) other_path = e.path;
  REQUIRE(!other_path.empty());
  const std::string good = read_text(path);
  const fs::path victim = make_temp_dir() / "precious.txt";
  write_text(victim, "precious");
  auto replace = [&](const std::function<void()>& make) {
    return [&, make] {
      fs::remove_all(path);
      make();
    };
  };
  struct Damage {
    const char* what;
    std::function<void()> apply;
  };
  std::vector<Damage> damages = {
      {"an entry copied from another key", [&] { write_text(path, read_text(other_path)); }},
      {"truncated", [&] { write_text(path, good.substr(0, good.size() / 2)); }},
      {"a bit flipped in the module", [&] {
         std::string s = good;
         s[s.size() - 100] ^= 0x01;
         write_text(path, s);
       }},
      {"garbage", [&] { write_text(path, std::string(300, 'z')); }},
      {"empty", [&] { write_text(path, ""); }},
      {"a directory", replace([&] { fs::create_directories(path / "inside"); })},
      {"a symbolic link", replace([&] { fs::create_symlink(victim, path); })},
      {"a FIFO", replace([&] { REQUIRE(::mkfifo(path.c_str(), 0600) == 0); })},
  };
  if (::geteuid() == 0)
    damages.push_back({"another user's file", [&] {
                         write_text(path, good);
                         REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
                       }});
  for (const Damage& d : damages) {
    std::string what = d.what;
    CAPTURE(what);
    d.apply();
    LibraryWarnings w;
    CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", o, true), "compiled"));
    CHECK(w.list.size() == 1);
    CHECK(w.count(path.string()) == 1);
    CHECK(read_text(victim) == "precious");  // never written through
    struct stat st;
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    CHECK(S_ISREG(st.st_mode));
    CHECK(all_are(cpu_outcomes(kGraphA, "pair.txt", o, true), "disk"));  // rewritten, valid again
  }
  fs::remove_all(dir);
  fs::remove_all(victim.parent_path());
}

TEST_CASE("a fused group's structural key differs wherever its generated kernel does") {
  // A memory hit by structural key returns the kernel generated first (GpuBuildOptions' cache):
  // graphs that differ in one thing code generation reads must not share a key. The key once left
  // out a reduction's axes and correction, the reduced axes and input names.
  const std::string head = "dim N = 8\ndim M = 4\n";
  const std::vector<std::string> bodies = {
      "input x : f32[N, N]\nr = sum(x, 0)\noutput r\n",
      "input x : f32[N, N]\nr = sum(x, 1)\noutput r\n",
      "input x : f32[N, N]\nr = sum(x, 1, keepdim)\noutput r\n",
      "input x : f32[N, N]\nr = mean(x, 1, correction=1)\noutput r\n",
      "input x : f32[N, N]\nr = mean(x, 1, correction=0)\noutput r\n",
      "input x : f32[N, N]\nr = amax(x, 1)\noutput r\n",
      "input x : f32[N, N]\nr = amax(x, 1, initial=-inf)\noutput r\n",
      "input xx : f32[N, N]\nr = sum(xx, 1)\noutput r\n",
      "input x : f32[M, N]\nr = sum(x, 1)\noutput r\n",
      "input x : f32[N, M]\nr = sum(x, 1)\noutput r\n",
      "input x : f32[N, N]\ny = x * 2.0\noutput y\n",
      "input x : f32[N, N]\ny = x * -2.0\noutput y\n",
      "input x : f32[N, N]\ny = x * 0.0\noutput y\n",
      "input x : f32[N, N]\ny = x * -0.0\noutput y\n",
      "input x : f32[N, N]\nparam p : f32 = 1\ny = x * p\noutput y\n",
      "input x : f32[N, N]\nparam q : f32 = 1\ny = x * q\noutput y\n",
      "input x : f32[N, N]\ny = x - cast(x, bf16)\noutput y\n",
      "input x : f32[N, N]\ny = x - cast(x, f16)\noutput y\n",
      "input x : f32[N, N]\ninput w : f32[N]\ny = x - w\noutput y\n",
      "input x : f32[N, N]\ninput w : f32[N]\ny = w - x\noutput y\n",
      "input x : f32[N, N]\ninput w : f32[N, 1]\ny = x - w\noutput y\n",
      "input x : f32[N, N]\ny = x - mean(x, -1, keepdim)\noutput y\n",
      "input x : f32[N, N]\ny = x - mean(x, 0, keepdim)\noutput y\n",
      "input x : f32[N, N]\ny = softmax(x, -1)\noutput y\n",
      "input x : f32[N, N]\ny = log_softmax(x, -1)\noutput y\n",
      "input x : f32[N, N]\ny = var(x, -1, correction=0)\noutput y\n",
      "input x : f32[N, N]\ny = var(x, -1, correction=2)\noutput y\n",
  };
  GpuBuildOptions o;
  o.target = parse_target("sm_90");
  std::map<std::string, std::string> source_by_key;  // key hex -> kernel name and source
  std::set<std::string> sources;
  for (const char* graph_name : {"g", "h"})
    for (const std::string& body : bodies) {
      CAPTURE(body);
      const std::string text = std::string("graph ") + graph_name + "\n" + head + body;
      const fusejit::ir::Graph g = fusejit::ir::parse_graph(text, "k.txt");
      const fusejit::ir::Graph again = fusejit::ir::parse_graph(text, "k.txt");
      const fusejit::ir::Plan plan = fusejit::ir::plan_fusion(g);
      for (size_t i = 0; i < plan.groups.size(); ++i) {
        const fusejit::ir::FusionGroup& grp = plan.groups[i];
        const GeneratedKernel k = generate_kernel(g, grp, o.codegen);
        const std::string kernel = k.name + "\n" + k.source;
        sources.insert(kernel);
        const Hash128 key = structural_key(g, grp, o);
        const auto [it, fresh] = source_by_key.emplace(key.hex(), kernel);
        CHECK((fresh || it->second == kernel));  // one key, one kernel
        CHECK(structural_key(again, fusejit::ir::plan_fusion(again).groups[i], o) == key);  // the same graph hits
      }
    }
  CHECK(sources.size() >= 2 * bodies.size() - 4);  // the graphs give that many kernels: the test tells them apart
  CHECK(source_by_key.size() >= sources.size());
  // New values of named dims with the same pattern of sizes (which are 0, 1, equal): the same key
  // and kernel, so a graph compiled again at other sizes generates no code (the sizes are kernel
  // arguments); a path to the file other than its name changes neither.
  const std::string body = "input x : f32[N, M]\ninput w : f32[M]\ny = x * w - mean(x * w, -1, keepdim)\noutput y\n";
  const auto key_and_kernel = [&](int64_t n, int64_t m, const char* file) {
    const fusejit::ir::Graph g = fusejit::ir::parse_graph(
        "graph k\ndim N = " + std::to_string(n) + "\ndim M = " + std::to_string(m) + "\n" + body, file);
    const fusejit::ir::FusionGroup grp = fusejit::ir::plan_fusion(g).groups.at(0);
    const GeneratedKernel k = generate_kernel(g, grp, o.codegen);
    return std::pair{structural_key(g, grp, o), k.name + "\n" + k.source};
  };
  const auto base = key_and_kernel(8, 64, "k.txt");
  for (const auto& sizes : {std::pair<int64_t, int64_t>{16, 4096}, {3, 100000}, {2, 3}}) {
    CAPTURE(sizes.first);  // not a structured binding: clang refuses to capture one
    CAPTURE(sizes.second);
    const auto other = key_and_kernel(sizes.first, sizes.second, "/some/folder/k.txt");
    CHECK(other.second == base.second);
    CHECK(other.first == base.first);
  }
  for (const auto& [n, m] : {std::pair<int64_t, int64_t>{8, 8}, {1, 64}, {8, 1}, {0, 64}}) {  // another pattern
    const auto other = key_and_kernel(n, m, "k.txt");
    CHECK((other.first != base.first || other.second == base.second));  // never one key for two kernels
  }
  // A tracer's locations (Python's lines: Graph::traced_file) show in the kernel's comments, as a
  // graph file's, and in no kernel name nor disk cache key (the source without location comments,
  // jit/source_key.h): code moved in its file, or to another file, keeps its kernels.
  const auto traced = [&](const char* file, uint32_t shift) {
    fusejit::ir::Graph g = fusejit::ir::parse_graph("graph k\ndim N = 8\ndim M = 64\n" + body, "k.txt");
    const bool located = file[0] != '\0';  // "": a graph built in code without locations
    g.file = file;
    g.traced_file = located;
    for (fusejit::ir::Node& n : g.nodes) n.loc = located ? fusejit::ir::Loc{n.loc.line + shift, 7} : fusejit::ir::Loc{};
    const fusejit::ir::FusionGroup grp = fusejit::ir::plan_fusion(g).groups.at(0);
    const GeneratedKernel k = generate_kernel(g, grp, o.codegen);
    return std::tuple{structural_key(g, grp, o), k.name, k.source};
  };
  const auto unlocated = traced("", 0);
  CHECK(without_location_comments(std::get<2>(unlocated)) == std::get<2>(unlocated));  // no location comments
  for (const auto& at : {std::pair<const char*, uint32_t>{"/home/me/model.py", 0}, {"other.py", 40}}) {
    CAPTURE(at.first);  // not a structured binding: clang refuses to capture one
    const auto moved = traced(at.first, at.second);
    CHECK(std::get<1>(moved) == std::get<1>(unlocated));
    CHECK(without_location_comments(std::get<2>(moved)) == std::get<2>(unlocated));
    const std::string tag = fmt::format("  [{}:{}]", at.second ? "other.py" : "model.py", 6 + at.second);
    CHECK(std::get<2>(moved).find(tag) != std::string::npos);  // y's line, as the graph file's
    CHECK(std::get<2>(moved).find("/home/me") == std::string::npos);  // the file's name, not its path
    CHECK(std::get<0>(moved) != std::get<0>(unlocated));  // the memory cache's key: a hit gives these comments
  }
  const auto down = traced("other.py", 41);  // the same file a line further: its own key, the same kernel name
  CHECK(std::get<0>(down) != std::get<0>(traced("other.py", 40)));
  CHECK(std::get<1>(down) == std::get<1>(unlocated));
}
