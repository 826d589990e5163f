// Host (CPU) builds of generated kernels; see jit/host_compile.h.
#include "jit/host_compile.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

#include "jit/hash.h"

namespace fusejit::jit {

namespace {

// Makes the CUDA spellings used by generated kernels mean something to a host compiler. The
// built-in index variables are thread_local so trampolines could run blocks on several threads.
constexpr const char* kHostPrelude = R"FJH(// ---- fusejit host prelude: CUDA spellings for a host C++ build ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
struct fj_host_dim3 { unsigned int x, y, z; };
static thread_local fj_host_dim3 threadIdx, blockIdx, blockDim, gridDim;
// ---- end of host prelude ----
)FJH";

// -ffp-contract=off: no FMA contraction, so every operation rounds as the reference's does.
// -fno-tree-vectorize: GCC 12.2's SLP vectorizer drops a (double)(float)x pair in the vector
// lanes (wrong code: cast(cast(d, f32), f64) - d gave 0; a 15-line C++ file shows it at -O2). The
// CPU path is for exactness, not speed.
// No -fno-builtin: it would not stop GCC folding libm calls (libstdc++ calls __builtin_expm1f etc.
// by name) and would turn memcpy into calls; ir/scalar/fj_scalar.h hides the operands of inexact
// math calls from the optimizer instead (fj_opaque), in kernels and the reference alike.
const char* const kHostFlags = "-ffp-contract=off -fno-tree-vectorize -fPIC -shared -std=c++17 -w";

std::string compiler() {
  const char* cxx = std::getenv("CXX");
  return (cxx && *cxx) ? cxx : "c++";
}

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// Runs a shell command, returning its exit status and combined output.
int run_command(const std::string& cmd, std::string& output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, got);
  return pclose(p);
}

const std::string& compiler_version(const std::string& cxx) {
  static std::mutex mu;
  static std::map<std::string, std::string> versions;
  std::lock_guard lock(mu);
  auto it = versions.find(cxx);
  if (it == versions.end()) {
    std::string out;
    run_command(cxx + " --version", out);
    it = versions.emplace(cxx, out).first;
  }
  return it->second;
}

std::string numbered(const std::string& src) {
  std::string r;
  std::istringstream in(src);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) r += fmt::format("{:5} | {}\n", n, line);
  return r;
}

std::string strip_restrict(std::string t) {
  const std::string r = " __restrict__";
  if (auto p = t.find(r); p != std::string::npos) t.erase(p, r.size());
  return t;
}

std::mutex g_mu;                                              // guards the two maps
std::map<std::string, std::weak_ptr<HostModule>> g_loaded;    // by key hex
std::map<std::string, std::shared_ptr<std::mutex>> g_key_mu;  // one compile per key at a time

}  // namespace

struct HostModuleAccess {
  static std::shared_ptr<HostModule> make(void* h, std::string path) {
    std::shared_ptr<HostModule> m(new HostModule());
    m->handle_ = h;
    m->path_ = std::move(path);
    return m;
  }
};

HostModule::~HostModule() {
  if (handle_) dlclose(handle_);
}

HostTrampoline HostModule::trampoline(const std::string& kernel_name) const {
  void* f = dlsym(handle_, (kernel_name + "__host").c_str());
  if (!f) throw HostCompileError(fmt::format("host module {} has no kernel {}", path_, kernel_name));
  return reinterpret_cast<HostTrampoline>(f);
}

std::string host_source(std::span<const GeneratedKernel> kernels) {
  TranslationUnit tu = emit_translation_unit(kernels);
  std::string s = kHostPrelude;
  s += tu.source;
  s += "\n// ---- host trampolines: run every (block, thread) of a launch serially ----\n";
  std::map<std::string, bool> done;
  for (const GeneratedKernel& k : kernels) {
    if (done[k.name]) continue;
    done[k.name] = true;
    s += fmt::format("extern \"C\" void {}__host(void** params, unsigned int grid, unsigned int block) {{\n", k.name);
    s += "  gridDim = {grid, 1, 1};\n  blockDim = {block, 1, 1};\n";
    s += "  for (unsigned int b = 0; b < grid; ++b) {\n    for (unsigned int t = 0; t < block; ++t) {\n";
    s += "      blockIdx = {b, 0, 0};\n      threadIdx = {t, 0, 0};\n";
    s += fmt::format("      {}(", k.name);
    for (size_t i = 0; i < k.signature.args.size(); ++i)
      s += fmt::format("{}*static_cast<{}*>(params[{}])", i ? ", " : "", strip_restrict(k.signature.args[i].ctype), i);
    s += ");\n    }\n  }\n}\n";
  }
  return s;
}

namespace {
std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return f ? ss.str() : std::string();
}
// XXH3-128 of a file's bytes as hex; "" when it cannot be read.
std::string file_hash(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::ostringstream ss;
  ss << f.rdbuf();
  return xxh3_128(ss.str()).hex();
}
}  // namespace

std::string host_cache_dir() {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates;
  if (const char* d = std::getenv("FUSEJIT_CACHE_DIR"); d && *d) candidates.push_back(std::string(d) + "/host");
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) candidates.push_back(std::string(d) + "/fusejit/host");
  if (const char* d = std::getenv("HOME"); d && *d) candidates.push_back(std::string(d) + "/.cache/fusejit/host");
  candidates.push_back((fs::temp_directory_path() / fmt::format("fusejit-host-{}", getuid())).string());
  for (const std::string& c : candidates) {
    std::error_code ec;
    fs::create_directories(c, ec);
    if (!ec && access(c.c_str(), W_OK) == 0) return c;
  }
  throw HostCompileError("no writable folder for host kernel builds (tried $FUSEJIT_CACHE_DIR, $XDG_CACHE_HOME, ~/.cache, /tmp)");
}

HostCompileResult host_compile(std::span<const GeneratedKernel> kernels, const HostCompileOptions& opts) {
  namespace fs = std::filesystem;
  const std::string src = host_source(kernels);
  const std::string cxx = compiler();
  const std::string flags = shell_quote(opts.opt_level) + " " + kHostFlags;
  Hasher h;
  h.add("fusejit host module v1").add(cxx).add(compiler_version(cxx)).add(flags).add(src);
  const std::string key = h.digest().hex();

  HostCompileResult r;
  // Different keys compile in parallel; the same key is compiled at most once per process.
  std::shared_ptr<std::mutex> key_mu;
  {
    std::lock_guard lock(g_mu);
    auto& slot = g_key_mu[key];
    if (!slot) slot = std::make_shared<std::mutex>();
    key_mu = slot;
  }
  std::lock_guard key_lock(*key_mu);
  auto remember = [&](const std::shared_ptr<HostModule>& m) {
    std::lock_guard lock(g_mu);
    g_loaded[key] = m;
  };
  {
    std::lock_guard lock(g_mu);
    if (auto it = g_loaded.find(key); it != g_loaded.end())
      if (auto m = it->second.lock()) {
        r.module = std::move(m);
        r.memory_hit = true;
        return r;
      }
  }

  std::string dir;
  if (!opts.disk_cache) {
    dir = (fs::temp_directory_path() / fmt::format("fusejit-nocache-{}", getpid())).string();
  } else if (!opts.cache_dir.empty()) {
    dir = opts.cache_dir + "/host";
  } else {
    dir = host_cache_dir();
  }
  {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec || access(dir.c_str(), W_OK) != 0)
      throw HostCompileError("cannot use '" + dir + "' for host kernel builds: " + (ec ? ec.message() : "not writable"));
  }
  const std::string so = dir + "/" + key + ".so";
  const std::string sum = so + ".sum";
  std::error_code rec;
  if (opts.disk_cache && fs::exists(so, rec)) {
    // Load only a regular file whose bytes still hash to the sum written with it (a FIFO or
    // device in its place would block the read; a damaged module must never be loaded).
    if (fs::is_regular_file(so, rec) && fs::is_regular_file(sum, rec) && read_file(sum) == file_hash(so)) {
      if (void* hnd = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        r.module = HostModuleAccess::make(hnd, so);
        r.disk_hit = true;
        remember(r.module);
        return r;
      }
    }
    std::error_code ec;
    fs::remove(so, ec);  // damaged, truncated or unreadable: rebuild it
    fs::remove(sum, ec);
  }

  // Compile into unique temporary names, then rename into place, so a concurrent process never
  // loads a half-written file.
  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format("{}/{}.tmp.{}.{}", dir, key, getpid(), counter++);
  {
    std::ofstream f(tmp + ".cpp", std::ios::binary);
    f << src;
    if (!f) throw HostCompileError("cannot write " + tmp + ".cpp");
  }
  const std::string cmd = fmt::format("{} {} -o {} {}", cxx, flags, shell_quote(tmp + ".so"), shell_quote(tmp + ".cpp"));
  const auto t0 = std::chrono::steady_clock::now();
  std::string output;
  const int status = run_command(cmd, output);
  r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::error_code ec;
  fs::remove(tmp + ".cpp", ec);
  if (status != 0) {
    fs::remove(tmp + ".so", ec);
    throw HostCompileError(fmt::format("host compiler failed (exit status {}): {}\n{}\nsource:\n{}", status, cmd,
                                       output, numbered(src)));
  }
  {
    std::ofstream f(tmp + ".sum", std::ios::binary);
    f << file_hash(tmp + ".so");
  }
  fs::rename(tmp + ".sum", sum, ec);
  fs::rename(tmp + ".so", so, ec);
  if (ec) throw HostCompileError(fmt::format("cannot move {} into the cache: {}", so, ec.message()));
  {
    std::ofstream f(dir + "/" + key + ".cpp", std::ios::binary);  // kept next to the .so for reading
    f << src;
  }
  void* hnd = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!hnd) throw HostCompileError(fmt::format("dlopen {} failed: {}", so, dlerror()));
  r.module = HostModuleAccess::make(hnd, so);
  remember(r.module);
  return r;
}

}  // namespace fusejit::jit
