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

// Runs f with the GIL released (compiles and launches: other Python threads run meanwhile), in a
// WarningScope.
template <class F>
auto released(F&& f) {
  WarningScope scope;
  nanobind::gil_scoped_release release;  // destroyed first: the scope ends with the GIL held
  return f();
}

}  // namespace fusejit_py
