// Host (CPU) builds of generated kernels; see jit/host_compile.h.
#include "jit/host_compile.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "ir/error.h"
#include "jit/disk_store.h"
#include "jit/fork.h"
#include "jit/hash.h"
#include "jit/source_key.h"

namespace fusejit::jit {

namespace {

// Makes the CUDA spellings used by generated kernels mean something to a host compiler. The
// built-in index variables are thread_local so trampolines could run blocks on several threads.
constexpr const char* kHostPrelude = R"FJH(// ---- fusejit host prelude: CUDA spellings for a host C++ build ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#ifndef __shared__
#define __shared__
#endif
struct fj_host_dim3 { unsigned int x, y, z; };
static thread_local fj_host_dim3 threadIdx, blockIdx, blockDim, gridDim;
static thread_local unsigned char* fj_host_dynamic_shared = nullptr;  // FJK_DYNAMIC_SHARED
// ---- end of host prelude ----
)FJH";

// -fno-fast-math: a $CXX holding -ffast-math or -Ofast (or -ffinite-math-only, -fno-signed-zeros)
// would drop NaN checks and signs of zero from strict kernels (a hostile tester's find: where(isnan)
// and maximum(NaN, 0) gave wrong values); first, as clang's -fno-fast-math sets -ffp-contract=on.
// -fno-unsafe-math-optimizations too: GCC 12 links crtfastmath.o into the module for a
// -funsafe-math-optimizations that -fno-fast-math leaves (its constructor sets flush-to-zero in
// the thread that loads the module; a reviewer's find).
// -ffp-contract=off: no FMA contraction, so every operation rounds as the reference's does.
// -fno-tree-vectorize: GCC 12.2's SLP vectorizer drops a (double)(float)x pair in the vector
// lanes (wrong code: cast(cast(d, f32), f64) - d gave 0; a 15-line C++ file shows it at -O2). The
// CPU path is for exactness, not speed.
// No -fno-builtin: it would not stop GCC folding libm calls (libstdc++ calls __builtin_expm1f etc.
// by name) and would turn memcpy into calls; ir/scalar/fj_scalar.h hides the operands of inexact
// math calls from the optimizer instead (fj_opaque), in kernels and the reference alike.
// -fno-strict-aliasing: shared memory is typed by casts, as in CUDA (a reduction's lane buffer holds
// each pass's lane type in turn; the row cache is dynamic shared memory); on the host the optimizer
// must not reorder accesses to it by type.
// Lines of the compiler's output a failure message shows (a wrong prelude can give thousands).
constexpr size_t kCompilerOutputLines = 20;

#define FJ_HOST_SEMANTIC_FLAGS "-fno-fast-math -fno-unsafe-math-optimizations -ffp-contract=off -fno-tree-vectorize -fno-strict-aliasing"
const char* const kHostFlags = FJ_HOST_SEMANTIC_FLAGS " -fPIC -shared -std=c++17 -w";

std::string compiler() {
  const char* cxx = std::getenv("CXX");
  return (cxx && *cxx) ? cxx : "c++";
}


// The wait status of a command that ran but whose status this process cannot learn: it ignores
// SIGCHLD (SIG_IGN: the kernel reaps every child, so pclose fails with ECHILD, also in a program a
// parent started so) or reaps children in its own handler (waitpid(-1, ...): a server's).
constexpr int kStatusUnknown = -2;

// Runs a shell command, returning its wait status (-1 if it could not be started, kStatusUnknown)
// and combined output.
int run_command(const std::string& cmd, std::string& output) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, got);
  const int status = pclose(p);
  return status == -1 && errno == ECHILD ? kStatusUnknown : status;
}

// This process's compile state. After fork() the child has only the thread that forked, so a lock
// another thread held then (a key's mutex, held for a whole compile; the version lock, held while
// `$CXX --version` runs) would never be released there, and the child's compile of that key, or
// its first compile, would wait forever. So the child starts afresh (jit/fork.h): the old state
// is leaked, as its mutexes may be held; modules loaded before stay loaded for those holding them,
// and a compile finds them again through the disk cache.
struct CompileState {
  std::mutex mu;                                             // guards the two maps
  std::map<Hash128, std::weak_ptr<HostModule>> loaded;       // by key
  std::map<Hash128, std::shared_ptr<std::mutex>> key_mu;     // one compile per key at a time
  std::mutex version_mu;                                     // guards versions
  std::map<std::string, std::string> versions;               // `$CXX --version` and -dumpmachine per compiler
};
CompileState* g_state = new CompileState;

CompileState& compile_state() {
  [[maybe_unused]] static const int registered = renew_in_fork_child([] { g_state = new CompileState; });
  return *g_state;
}

const std::string& compiler_version(const std::string& cxx) {
  CompileState& st = compile_state();
  std::lock_guard lock(st.version_mu);
  auto it = st.versions.find(cxx);
  if (it == st.versions.end()) {
    // The target triple too: one compiler build for x86-64 and for aarch64 prints one --version,
    // and two such machines may share a cache folder (an NFS home); a module of the other one
    // would fail to load, every time.
    std::string out, machine;
    run_command(cxx + " --version", out);
    run_command(cxx + " -dumpmachine", machine);
    it = st.versions.emplace(cxx, out + "\ntarget: " + machine).first;
  }
  return it->second;
}

// A wait status as words: "exit code 1", "killed by signal 9", "not found (exit code 127)".
std::string describe_status(int status) {
  if (status == -1) return "could not be started";
  if (status == kStatusUnknown)
    return "its exit status is unknown: this process ignores SIGCHLD or reaps its children in a handler, and it "
           "wrote no shared object";
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  if (!WIFEXITED(status)) return fmt::format("wait status {}", status);
  const int code = WEXITSTATUS(status);
  if (code == 127)  // the CPU path's one run-time need: say how to meet it
    return "not found: the shell could not run it (exit code 127); the CPU path needs a C++17 compiler: install "
           "g++ or clang++, or set CXX to one";
  return fmt::format("exit code {}", code);
}

// The first `max_lines` lines of a compiler's output, and how many more there were.
std::string first_lines(const std::string& text, size_t max_lines) {
  std::string r;
  size_t lines = 0, p = 0;
  for (; p < text.size() && lines < max_lines; ++lines) {
    size_t q = text.find('\n', p);
    if (q == std::string::npos) q = text.size();
    r += "  " + text.substr(p, std::min<size_t>(q - p, 300)) + "\n";  // 300: one line, not a wall
    p = q + 1;
  }
  size_t rest = 0;
  for (size_t q = p; q < text.size(); ++q) rest += text[q] == '\n';
  if (p < text.size() && text.back() != '\n') ++rest;
  if (rest) r += fmt::format("  ... ({} more line{})\n", rest, rest == 1 ? "" : "s");
  return r.empty() ? "  (no output)\n" : r;
}

std::string strip_restrict(std::string t) {
  const std::string r = " __restrict__";
  if (auto p = t.find(r); p != std::string::npos) t.erase(p, r.size());
  return t;
}

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
  if (handle_) locked_dlclose(handle_);
}

HostTrampoline HostModule::trampoline(const std::string& kernel_name) const {
  void* f = dlsym(handle_, (kernel_name + "__host").c_str());
  if (!f) throw HostCompileError(fmt::format("{} has no kernel {}", path_, kernel_name));
  return reinterpret_cast<HostTrampoline>(f);
}

const char* host_semantic_flags() { return FJ_HOST_SEMANTIC_FLAGS; }

namespace {

// Prepended in block_threads mode (tests): `__shared__` variables are function statics shared by
// a block's threads, fj_red_sync() is a pthread barrier of the block, and a warp's shuffle goes
// through memory between two barriers of its 32 threads. One launch at a time per module.
constexpr const char* kBlockThreadsPrelude = R"FJH(// ---- fusejit block threads (tests): one host thread per CUDA thread ----
#include <pthread.h>
#include <string.h>
#include <thread>
#include <vector>
#define __shared__ static
struct fj_host_block_state {
  pthread_barrier_t block, warp[32], done;  // done: the end of a block (a thread that left early waits
                                            // there, never at a barrier of the kernel's)
  unsigned char words[1024][64];  // each thread's word in a shuffle
};
static fj_host_block_state* fj_host_block_now;  // the launch being run
#define FJ_RED_HOST_SYNC() pthread_barrier_wait(&fj_host_block_now->block)
#define FJ_RED_HOST_SHFL_DOWN(v, h, lane) fj_host_shfl_down(v, h, lane)
#define FJ_RED_HOST_WHOLE_WARPS(n) ((n) == (int)blockDim.x && (n) % 32 == 0)
)FJH";

// Defined after the host prelude (they use the index variables). fj_host_run_blocks runs `body` as every thread of
// every block, blocks one after another, each thread waiting at the end of a block for the others
// (its __shared__ statics are the next block's). A kernel whose threads do not all reach each of
// its barriers hangs here, as it may on a GPU (a ctest timeout ends it).
constexpr const char* kBlockThreadsRunner = R"FJH(
// Warp `threadIdx.x / 32`'s __shfl_down_sync(full mask, v, h): every lane takes part.
template <class T> inline T fj_host_shfl_down(T v, int h, int) {
  static_assert(sizeof(T) <= 64, "a lane value is at most 64 bytes");
  const unsigned w = threadIdx.x / 32, base = 32 * w;  // the caller's warp and its first thread
  const unsigned l = threadIdx.x % 32;
  memcpy(fj_host_block_now->words[base + l], &v, sizeof(T));
  pthread_barrier_wait(&fj_host_block_now->warp[w]);
  T got = v;
  if (l + h < 32) memcpy(&got, fj_host_block_now->words[base + l + h], sizeof(T));
  pthread_barrier_wait(&fj_host_block_now->warp[w]);
  return got;
}
template <class F> void fj_host_run_blocks(unsigned grid, unsigned block, void* dyn, F body) {
  fj_host_block_state st;
  pthread_barrier_init(&st.block, nullptr, block);
  pthread_barrier_init(&st.done, nullptr, block);
  for (unsigned w = 0; w * 32 < block; ++w) pthread_barrier_init(&st.warp[w], nullptr, block - 32 * w < 32 ? block - 32 * w : 32);
  fj_host_block_now = &st;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < block; ++t)
    threads.emplace_back([=, &st] {
      fj_host_dynamic_shared = static_cast<unsigned char*>(dyn);
      gridDim = {grid, 1, 1};
      blockDim = {block, 1, 1};
      threadIdx = {t, 0, 0};
      for (unsigned b = 0; b < grid; ++b) {
        blockIdx = {b, 0, 0};
        body();
        pthread_barrier_wait(&st.done);
      }
    });
  for (std::thread& t : threads) t.join();
  pthread_barrier_destroy(&st.block);
  pthread_barrier_destroy(&st.done);
  for (unsigned w = 0; w * 32 < block; ++w) pthread_barrier_destroy(&st.warp[w]);
}
// ---- end of block threads ----
)FJH";

// The call of kernel `name` with the trampoline's params.
std::string kernel_call(const std::string& name, const KernelSignature& sig) {
  std::string s = name + "(";
  for (size_t i = 0; i < sig.args.size(); ++i)
    s += fmt::format("{}*static_cast<{}*>(params[{}])", i ? ", " : "", strip_restrict(sig.args[i].ctype), i);
  return s + ")";
}

// One trampoline: the launch's blocks and threads, serially, or as threads (block_threads, for a
// reduction kernel: elementwise kernels never meet at a barrier).
std::string trampoline(const std::string& name, const KernelSignature& sig, bool reduction, bool block_threads) {
  std::string s = fmt::format("extern \"C\" void {}__host(void** params, unsigned int grid, unsigned int block, void* dyn) {{\n", name);
  if (reduction && block_threads) return s + fmt::format("  fj_host_run_blocks(grid, block, dyn, [=] {{ {}; }});\n}}\n", kernel_call(name, sig));
  s += "  fj_host_dynamic_shared = static_cast<unsigned char*>(dyn);\n";
  // A reduction kernel's threads meet at __syncthreads(), which a serial loop cannot honour: each
  // block runs with one thread (the fixed order gives the same bits for any block size).
  if (reduction) s += "  block = 1;\n";
  s += "  gridDim = {grid, 1, 1};\n  blockDim = {block, 1, 1};\n";
  s += "  for (unsigned int b = 0; b < grid; ++b) {\n    for (unsigned int t = 0; t < block; ++t) {\n";
  s += "      blockIdx = {b, 0, 0};\n      threadIdx = {t, 0, 0};\n";
  return s + fmt::format("      {};\n    }}\n  }}\n}}\n", kernel_call(name, sig));
}

}  // namespace

std::string host_source(std::span<const GeneratedKernel> kernels, bool block_threads) {
  TranslationUnit tu = emit_translation_unit(kernels);
  std::string s = block_threads ? std::string(kBlockThreadsPrelude) + kHostPrelude + kBlockThreadsRunner : kHostPrelude;
  s += tu.source;
  s += block_threads ? "\n// ---- host trampolines: reduction kernels' blocks as threads ----\n"
                     : "\n// ---- host trampolines: run every (block, thread) of a launch serially ----\n";
  std::map<std::string, bool> done;
  for (const GeneratedKernel& k : kernels) {
    if (done[k.name]) continue;
    done[k.name] = true;
    s += trampoline(k.name, k.signature, k.reduction, block_threads);
    s += trampoline(k.strided_name(), k.strided_signature, k.reduction, block_threads);
    if (k.lane_groups > 1) s += trampoline(k.long_rows_name(), k.signature, k.reduction, block_threads);
  }
  return s;
}

namespace {

namespace fs = std::filesystem;

// Everything that determines a host module, and its key in the disk store.
struct HostBuild {
  std::string source;
  std::string cxx;
  std::string flags;
  DiskKey key;
  std::string label;  // kernel names, shown by `fusejit cache list`
};

HostBuild describe_build(std::span<const GeneratedKernel> kernels, const HostCompileOptions& opts) {
  HostBuild b;
  b.source = host_source(kernels, opts.block_threads);
  b.cxx = compiler();
  b.flags = shell_quote(opts.opt_level) + " " + kHostFlags + (opts.check_alignment ? " -DFJK_CHECK_ALIGNMENT" : "") +
            (opts.block_threads ? " -pthread" : "");
  b.key = KeyBuilder("fusejit host module")
              .add(b.cxx)
              .add(compiler_version(b.cxx))
              .add(b.flags)
              .add(without_location_comments(b.source))
              .digest();
  for (const GeneratedKernel& k : kernels) {
    if (b.label.size() > 200) {
      b.label += " ...";
      break;
    }
    if (b.label.find(k.name) == std::string::npos) b.label += (b.label.empty() ? "" : " ") + k.name;
  }
  return b;
}

// A build that found no room in its folder (ENOSPC, EDQUOT): with_room moves it out of the cache
// folder, whose filesystem is full, to $TMPDIR without the disk cache.
class OutOfSpace : public HostCompileError {
 public:
  using HostCompileError::HostCompileError;
};

// A build whose folder was removed under it (`rm -rf` of the cache folder, `cache clear` by
// another process): with_room runs it again in a fresh folder.
class FolderGone : public HostCompileError {
 public:
  FolderGone(const std::string& what, fs::path folder) : HostCompileError(what), folder_(std::move(folder)) {}
  const fs::path& folder() const { return folder_; }  // the build folder that went

 private:
  fs::path folder_;
};

// A shared object that cannot be loaded from its folder, on a filesystem mounted noexec (a
// hardened /tmp or home): with_room moves the load out of the cache folder to $TMPDIR.
class NoExec : public HostCompileError {
 public:
  NoExec(const std::string& what, bool in_store) : HostCompileError(what), in_store_(in_store) {}
  bool in_store() const { return in_store_; }  // its folder was in the cache folder, not in $TMPDIR

 private:
  bool in_store_;
};

// Throws FolderGone when `folder` is no more (whatever step failed in it), else returns.
void check_folder_there(const fs::path& folder, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(folder, ec) && !ec)
    throw FolderGone(fmt::format("the build folder {} was removed: {}", folder.string(), what), folder);
}

void write_module_file(const fs::path& path, std::string_view bytes) {
  if (int err = write_new_file(path, std::span<const char>(bytes.data(), bytes.size()))) {
    const std::string what = fmt::format("cannot write {}: {}", path.string(), std::strerror(err));
    if (err == ENOSPC || err == EDQUOT) throw OutOfSpace(what);
    check_folder_there(path.parent_path(), what);
    throw HostCompileError(what);
  }
}

// Runs `build` in the disk store's build folder; if that filesystem is full, disables the store
// (one warning, as for any unusable cache folder: docs/api.md) and runs it again in $TMPDIR. Also
// when another thread disabled the store first: this build's folder was in the store all the same.
// A build whose folder was removed under it runs again, up to 3 times (the cache folder is made
// again): a loop removing the cache folder every second (a cleaner) hit one retry twice. A fourth
// removal disables the store (one warning) and builds in $TMPDIR: a hostile tester's cleaner every
// second failed one run in five, saying "the host compiler failed".
template <class F>
auto with_room(DiskStore& store, F&& build) {
  try {
    for (int attempt = 1;; ++attempt) {
      try {
        return build();
      } catch (const FolderGone& e) {
        if (attempt < 4) continue;
        // By where the folder was (another thread may have disabled the store meanwhile, as for
        // NoExec): one in $TMPDIR removed is the error, naming it (a reviewer's find).
        const auto folder_of = [](const fs::path& p) { return (p / "").lexically_normal(); };  // "a/b/" is "a/b"
        if (store.dir().empty() || folder_of(e.folder().parent_path()) != folder_of(store.dir())) throw;
        if (store.enabled())
          store.disable(fmt::format("a build's folder in it was removed 4 times in a row (something removes the "
                                    "cache folder: a cleaner?): {}",
                                    e.what()));
        return build();  // the store is off: a $TMPDIR folder
      }
    }
  } catch (const OutOfSpace& e) {
    if (store.enabled()) store.disable(fmt::format("its filesystem is full: {}", e.what()));  // warns once
    return build();  // the store is off: a $TMPDIR folder (a second OutOfSpace there is the error)
  } catch (const NoExec& e) {
    if (!e.in_store()) throw;  // $TMPDIR's filesystem itself: the error names it
    // Another thread may have disabled the store first: this build's folder was in it all the same.
    if (store.enabled()) store.disable("its filesystem is mounted noexec: host modules cannot be loaded from it");
    return build();
  }
}

DiskStore::Scratch build_folder(DiskStore& store) {
  try {
    return store.scratch();
  } catch (const std::runtime_error& e) {
    throw HostCompileError(e.what());
  }
}

// Runs the host compiler on `b` in a private build folder (removed on return, also on error) and
// returns the shared object's bytes.
std::vector<char> compile_shared_object(const HostBuild& b, DiskStore& store, double& compile_ms) {
  DiskStore::Scratch scratch = build_folder(store);
  const fs::path cpp = scratch.path() / (b.key.key.hex() + ".cpp");
  const fs::path so = scratch.path() / (b.key.key.hex() + ".so");
  write_module_file(cpp, b.source);
  const std::string cmd = fmt::format("{} {} -o {} {}", b.cxx, b.flags, shell_quote(so.string()), shell_quote(cpp.string()));
  const auto t0 = std::chrono::steady_clock::now();
  std::string output;
  int status = run_command(cmd, output);
  // The status lost (SIGCHLD ignored): the shared object tells. The compiler removes it when it
  // fails; a truncated one (a compiler killed) fails to load with its own error.
  std::error_code ec;
  if (status == kStatusUnknown && std::filesystem::file_size(so, ec) > 0 && !ec) status = 0;
  compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (status != 0 && output.find(std::strerror(ENOSPC)) != std::string::npos)  // "No space left on device"
    throw OutOfSpace(fmt::format("no space left on device for the host compiler's output in {}", scratch.path().string()));
  if (status != 0) check_folder_there(scratch.path(), "the host compiler failed");
  if (status != 0) {
    // Keep the source only where the user keeps files (the cache folder, swept after an hour);
    // with the disk cache off nothing may stay on disk.
    // A build folder in $TMPDIR (the cache folder took none) is not kept: the next sweep there removes it.
    const std::string kept = !store.enabled()     ? "source not kept: the disk cache is off"
                             : !scratch.in_store() ? "source not kept: the cache folder took no build folder"
                                                   : kept_source(scratch, cpp.filename());
    throw HostCompileError(fmt::format("host compiler failed ({}): {}\n{}{}", describe_status(status), cmd,
                                       first_lines(output, kCompilerOutputLines), kept));
  }
  std::optional<std::vector<char>> bytes = read_regular_file(so, uint64_t{1} << 31);
  if (!bytes) check_folder_there(scratch.path(), "no shared object");
  if (!bytes) throw HostCompileError(fmt::format("the host compiler wrote no shared object at {}", so.string()));
  return std::move(*bytes);
}

// Loads verified module bytes through a fresh private copy, removed once loaded. The file name
// carries the key, so dlopen never mistakes it for another module it loaded under that name.
std::shared_ptr<HostModule> load_shared_object(const HostBuild& b, const std::vector<char>& bytes, DiskStore& store);

// One compile per key at a time in this process; modules stay loaded while anyone holds them.
std::shared_ptr<std::mutex> key_mutex(CompileState& st, const Hash128& key) {
  std::lock_guard lock(st.mu);
  auto& slot = st.key_mu[key];
  if (!slot) slot = std::make_shared<std::mutex>();
  return slot;
}

std::shared_ptr<HostModule> loaded_module(CompileState& st, const Hash128& key) {
  std::lock_guard lock(st.mu);
  auto it = st.loaded.find(key);
  return it == st.loaded.end() ? nullptr : it->second.lock();
}

}  // namespace

namespace {
std::shared_ptr<HostModule> load_shared_object(const HostBuild& b, const std::vector<char>& bytes, DiskStore& store) {
  DiskStore::Scratch scratch = build_folder(store);
  const fs::path so = scratch.path() / (b.key.key.hex() + ".so");
  write_module_file(so, std::string_view(bytes.data(), bytes.size()));
  void* handle = locked_dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const std::string why = dlerror();
    check_folder_there(scratch.path(), "dlopen failed");
    if (struct statvfs fs_info; ::statvfs(scratch.path().c_str(), &fs_info) == 0 && (fs_info.f_flag & ST_NOEXEC))
      throw NoExec(fmt::format("cannot load host module {} from {}: its filesystem is mounted noexec ({}); set "
                               "TMPDIR to a folder on another filesystem",
                               b.key.key.hex(), scratch.path().parent_path().string(), why),
                   scratch.in_store());
    throw HostCompileError(fmt::format("dlopen of host module {} failed: {}", b.key.key.hex(), why));
  }
  const std::string origin =
      "host module " + (store.enabled() ? entry_path(store.dir(), b.key.key).string() : b.key.key.hex());
  return HostModuleAccess::make(handle, origin);
}
}  // namespace

HostCompileResult host_compile(std::span<const GeneratedKernel> kernels, const HostCompileOptions& opts) {
  const HostBuild b = describe_build(kernels, opts);
  CompileState& st = compile_state();
  const std::shared_ptr<std::mutex> key_mu = key_mutex(st, b.key.key);
  std::lock_guard key_lock(*key_mu);
  HostCompileResult r;
  if ((r.module = loaded_module(st, b.key.key))) {
    r.memory_hit = true;
    return r;
  }
  std::shared_ptr<DiskStore> store = DiskStore::shared(opts.cache_dir, opts.disk_cache);
  DiskStore::Fetched f = store->fetch_or_build(b.key, [&] {
    std::vector<char> so = with_room(*store, [&] { return compile_shared_object(b, *store, r.compile_ms); });
    return DiskStore::Built{std::move(so), EntryMeta{EntryKind::HostModule, 0, b.label}};
  });
  FJ_CHECK(f.meta.kind == EntryKind::HostModule, "a cache entry with a host module's key and check hash holds a GPU kernel");
  r.disk_hit = f.from_disk;
  r.module = with_room(*store, [&] { return load_shared_object(b, f.payload, *store); });
  std::lock_guard lock(st.mu);
  st.loaded[b.key.key] = r.module;
  return r;
}

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

}  // namespace fusejit::jit
