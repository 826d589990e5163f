// Rendering of user errors in graph text as compiler-style diagnostics.
#pragma once

#include <string>
#include <string_view>

#include "ir/error.h"

namespace fusejit::ir {

// Formats `err` as
//   FILE:LINE:COL: error: MESSAGE
//     <the offending source line>
//     <spaces>^
// (the two last lines only when err.loc() is known and the line exists in `source_text`).
// Without a location: "FILE: error: MESSAGE" (or "error: MESSAGE" if `file` is empty). Lines
// longer than 160 bytes are cut to a window around the column, marked with "...". Bytes that
// are not printable text (binary garbage) are shown as '?'. The result ends with a newline.
std::string format_diagnostic(const UserError& err, const std::string& file, std::string_view source_text);

}  // namespace fusejit::ir
