// Compiling generated kernels for the CPU: the same CUDA C++ source the GPU gets, built by the
// system C++ compiler ($CXX, else `c++`) with -ffp-contract=off (so no FMA changes a result)
// together with a host prelude that defines __global__, __device__, blockIdx, threadIdx, ..., and
// loaded with dlopen. Each kernel gets a host trampoline
//   extern "C" void <name>__host(void** params, unsigned grid, unsigned block, void* dynamic_shared)
// that runs every (block, thread) pair of the launch serially, so the grid-stride loop, the vector
// path and the index math are exercised exactly as written (a reduction kernel's blocks with one
// thread each, or, for tests, with a host thread per CUDA thread: block_threads below). `dynamic_shared` is the launch's
// dynamic shared memory (a reduction kernel's row cache; null when the launch asks for none),
// owned by the caller and used by one block at a time.
//
// Compiled shared objects are entries of the one disk store (jit/disk_store.h), keyed by XXH3-128
// of the compiler, its version, the flags and the source without location comments, so a repeat
// run compiles nothing; the store's guarantees (private folder, verified entries, compile once
// across processes, one size cap) hold for them as for GPU kernels. The compiler runs in a
// private build folder that is removed when it finishes, also on error, and a module is loaded
// from a private copy of its verified bytes, never from a path another user could write.
#pragma once

#include <memory>
#include <span>
#include <stdexcept>
#include <string>

#include "jit/codegen.h"

namespace fusejit::jit {

// The compiler failed (or could not be run, or the result could not be loaded). A compiler
// failure's what() holds the command, its exit code (or signal), the first 20 lines of its output
// and the path of the source file, kept in the cache folder for an hour (not kept when the disk
// cache is off).
class HostCompileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Signature of every host trampoline.
using HostTrampoline = void (*)(void** params, unsigned grid, unsigned block, void* dynamic_shared);

// A loaded shared object holding host builds of some kernels. Shared by every caller that
// compiled the same source in this process; unloaded when the last reference goes.
class HostModule {
 public:
  ~HostModule();
  HostModule(const HostModule&) = delete;
  HostModule& operator=(const HostModule&) = delete;
  // The trampoline of kernel `name`; throws HostCompileError if the module has no such kernel.
  HostTrampoline trampoline(const std::string& kernel_name) const;
  // Where the module came from, for messages: "host module " and its cache entry, or its key when
  // the disk cache is off.
  const std::string& path() const { return path_; }

 private:
  friend struct HostModuleAccess;
  HostModule() = default;
  void* handle_ = nullptr;
  std::string path_;
};

struct HostCompileResult {
  std::shared_ptr<HostModule> module;
  bool disk_hit = false;     // loaded from the on-disk cache: nothing compiled
  bool memory_hit = false;   // already loaded in this process
  double compile_ms = 0.0;   // wall time spent compiling (0 on a hit)
};

struct HostCompileOptions {
  // Optimisation flag. The product uses -O1: the CPU path is for exactness, and GCC 12 compiles a
  // large module ~40% faster than at -O2 (the every-op module: 35 s -> 21 s; docs/testing.md).
  // Results do not depend on it (no -ffast-math, no contraction), so big test batches may use -O0.
  std::string opt_level = "-O1";
  // Cache folder ("" = the environment's: cache_env() in jit/disk_store.h). Modules are entries
  // of DiskStore::shared(cache_dir, disk_cache), next to the GPU kernels of the same folder.
  std::string cache_dir;
  // false: nothing is read from or kept on disk across processes (the build folder is removed
  // as soon as the module is loaded).
  bool disk_cache = true;
  // true (tests): a misaligned vector access (fj_vload / fj_vstore) traps, as it faults on a GPU,
  // so a launch that took the vector path for a misaligned tensor fails on the CPU path too, where
  // the access is a byte copy that would give the right values (-DFJK_CHECK_ALIGNMENT).
  bool check_alignment = false;
  // true (tests): each block of a reduction kernel's launch runs as `block` host threads, one per
  // CUDA thread (blocks one after another): its __shared__ variables are shared by them,
  // __syncthreads() is a barrier of the block and a warp's shuffles go through memory between
  // barriers of its 32 threads. So the parts of a kernel that only a GPU ran before (lane arrays
  // written by many threads, the warp tree, several rows per block, the row cache filled by the
  // block) run with the launch's real block size on the CPU. Elementwise kernels, which never
  // meet at a barrier, run serially as without it. Slow (a thread per CUDA thread); one launch
  // of a module at a time. A different source, so a different cache entry.
  bool block_threads = false;
};

// The host C++ translation unit for `kernels`: host prelude + emit_translation_unit() + one
// trampoline per distinct kernel entry. `block_threads`: as HostCompileOptions::block_threads.
std::string host_source(std::span<const GeneratedKernel> kernels, bool block_threads = false);

// The host compiler flags that keep the CPU path's results those of the reference (no FMA
// contraction, no SLP vectorizing, no type-based aliasing), as reports name the target.
const char* host_semantic_flags();

// Compiles (or finds in the caches) and loads the host build of `kernels`. Thread-safe; a module
// is compiled at most once at a time across threads and processes. Throws HostCompileError on a
// compiler failure (with its output) or when no private build folder can be made, and
// ir::FileError for a malformed cache environment variable.
HostCompileResult host_compile(std::span<const GeneratedKernel> kernels, const HostCompileOptions& opts = {});

// `s` as one POSIX shell word: in single quotes, a quote within as '\'' (for the host compiler's
// command line and the nvcc command an ahead-of-time .cu gives).
std::string shell_quote(const std::string& s);

}  // namespace fusejit::jit
