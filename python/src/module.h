// Shared by the extension's source files (python/src/): see module.cpp.
#pragma once

#include <nanobind/nanobind.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "fusejit/fusejit.h"

namespace fusejit_py {

// The dtype named `name` ("f32", "bf16", ...); Error(User) for another name.
fusejit::DType parse_dtype(std::string_view name);

// An int argument within int64 (a Python int or anything with __index__, not a bool): TypeError
// "<what>: expected an int, got T" otherwise, Error(User) past int64 (python/src/builder.cpp).
int64_t int_arg(nanobind::handle h, const std::string& what);

// Whether `h` is a bool: Python's, or a NumPy/PyTorch one (a dtype of kind "b"), which would
// otherwise pass as the int 0 or 1.
bool bool_like(nanobind::handle h);

// A bool, int or float (or a NumPy/PyTorch 0-d one) as a Scalar; TypeError "<what>: expected a
// bool, int or float, got T" otherwise.
fusejit::Scalar to_scalar(nanobind::handle h, const std::string& what);

// A Scalar as the Python bool, int or float of its kind (python/src/module.cpp).
nanobind::object scalar_to_py(const fusejit::Scalar& s);

// fusejit.GraphBuilder, fusejit.Value and fusejit.Dim (python/src/builder.cpp).
void bind_builder(nanobind::module_& m);

// One binding call that may warn: a warning a `warnings` filter turns into an error while it runs
// (on this thread, or on a thread fusejit started for it) is raised when the scope ends, unless
// another exception is already on its way. Construct and destroy it with the GIL held.
struct WarningScope {
  WarningScope();
  WarningScope(const WarningScope&) = delete;
  WarningScope& operator=(const WarningScope&) = delete;
  ~WarningScope() noexcept(false);
};

// Releases the GIL for its lifetime, as nanobind::gil_scoped_release, but a thread that could
// be taking it back when Python begins to finalise never does: it waits forever instead. Pythons
// before 3.14 end a thread that takes the GIL once finalisation has begun with pthread_exit, whose
// forced unwind through this destructor (noexcept) and nanobind's catch (...) is std::terminate:
// a daemon thread inside a fusejit call at exit aborted the process (CPython gh-87135; 3.14 makes
// such a thread wait forever, as this does). After the package's atexit hook (close_gil_gate),
// the threads that were running then wait, and any thread once finalisation has begun; threads
// started later (by later atexit handlers) and the finalising thread pass.
class GilRelease {
 public:
  GilRelease();
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;
  ~GilRelease();

 private:
  PyThreadState* state_;
};

// The atexit hook's last step (called with the GIL held): from now on the threads running now,
// but the caller, wait forever when they leave a released() call (GilRelease); returns once those
// already taking the GIL back hold it.
void close_gil_gate();

// Runs f with the GIL released (compiles and launches: other Python threads run meanwhile), in a
// WarningScope.
template <class F>
auto released(F&& f) {
  WarningScope scope;
  GilRelease release;  // destroyed first: the scope ends with the GIL held
  return f();
}

}  // namespace fusejit_py
