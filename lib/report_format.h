// Small formatting helpers shared by the report code.
#pragma once

#include <cstdint>
#include <string>

#include "fusejit/fusejit.h"

namespace fusejit {
std::string fmt_ratio(double r);        // "9.00x"
std::string tensor_text(const TensorInfo& t);  // "x f32[T=8192, 3072]"
}  // namespace fusejit
