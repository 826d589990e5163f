// Shared by the extension's source files (python/src/): see module.cpp.
#pragma once

#include <nanobind/nanobind.h>

#include <string_view>

#include "fusejit/fusejit.h"

namespace fusejit_py {

// The dtype named `name` ("f32", "bf16", ...); Error(User) for another name.
fusejit::DType parse_dtype(std::string_view name);

// fusejit.GraphBuilder, fusejit.Value and fusejit.Dim (python/src/builder.cpp).
void bind_builder(nanobind::module_& m);

}  // namespace fusejit_py
