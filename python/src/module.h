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

// A Python int (or an object with __index__) as int64; Error(User) "<what>: X is outside int64".
int64_t checked_int64(nanobind::handle h, const std::string& what);

// fusejit.GraphBuilder, fusejit.Value and fusejit.Dim (python/src/builder.cpp).
void bind_builder(nanobind::module_& m);

}  // namespace fusejit_py
