// fork() safety, in one place: what fusejit renews in a fork()ed child, and the call that
// registers a renewal.
//
// The child of fork() has only the thread that called it (POSIX fork(); pthread_atfork()), so a
// lock another thread held at that instant stays held there for ever, and work another thread had
// in flight never finishes. fusejit's answers, all of them:
//  - state a thread holds across a long wait registers a renewal here, which replaces it in the
//    child (the old state is leaked: its locks may be held): the host-compile state
//    (jit/host_compile.cpp: per-key compile locks, the `$CXX --version` lock, the loaded modules)
//    and the warning handler's call count and lock (lib/error.cpp). The Python extension's exit
//    gate (python/src/module.cpp) registers its own, as it links only the public API;
//  - a build in flight in the GPU kernel cache cannot be renewed (a future): its slot records the
//    process that builds it, and a child builds that key again (jit/cache.cpp, Slot::orphaned);
//  - every flock is released (LOCK_UN) before its descriptor is closed (unlock_and_close below:
//    the cache's entry and build locks, jit/disk_store.cpp; an ahead-of-time folder's lock,
//    lib/aot.cpp): the child's inherited copy of the descriptor would otherwise keep it locked
//    for everyone.
//  - brief critical sections of a Program (its dims table, loaded contexts, specializations) and
//    then of the shared kernel caches and disk stores (their maps, counters and the warning
//    handler's lock: KernelCache::lock_shared_for_fork) are locked around every fork() (around_fork
//    below; lib/program.cpp, registered with the first Program), so none is held mid-update.
// Not covered: the GPU module table (a child cannot use the parent's CUDA context anyway: CUDA
// does not survive fork()). What a child can do is in docs/api.md ("CUDA graphs, streams and threads").
#pragma once

#include <dlfcn.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>

#include <mutex>

namespace fusejit::jit {

// Registers `renew` to run in every fork()ed child of this process before fork() returns there
// (pthread_atfork's child handler; it runs with only the forking thread, so it may not wait for
// anything). Register before the state's first use, once (a function-local static). Returns
// pthread_atfork's result: 0, or ENOMEM.
inline int renew_in_fork_child(void (*renew)()) { return ::pthread_atfork(nullptr, nullptr, renew); }

// Registers handlers around every fork() of this process (pthread_atfork): `prepare` in the forking
// thread before it (to take locks that brief critical sections hold, waiting for other threads to
// leave them), `parent` and `child` after it in each process (to release them). Register once.
inline int around_fork(void (*prepare)(), void (*parent)(), void (*child)()) {
  return ::pthread_atfork(prepare, parent, child);
}

// fusejit's dlopen and dlclose calls hold this lock, and the fork handlers take it last
// (lib/program.cpp): a fork() at the instant another thread is inside the dynamic loader leaves the
// loader's own lock held in the child (glibc takes no loader lock around fork), whose first dlopen,
// the CPU path's module load, then waits for ever. Never destroyed (modules close at exit).
inline std::mutex& loader_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
inline void* locked_dlopen(const char* file, int mode) {
  std::lock_guard lock(loader_mutex());
  return ::dlopen(file, mode);
}
inline int locked_dlclose(void* handle) {
  std::lock_guard lock(loader_mutex());
  return ::dlclose(handle);
}

// Releases a flock on `fd` (if it holds one), then closes it. Closing alone would not release it
// while a copy of the descriptor lives on: a child forked meanwhile holds one (O_CLOEXEC ends it
// only at exec) for as long as it runs.
inline void unlock_and_close(int fd) {
  ::flock(fd, LOCK_UN);
  ::close(fd);
}

}  // namespace fusejit::jit
