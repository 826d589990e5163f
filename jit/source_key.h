// Location comments in generated source: "  [gelu.txt:5]" at the end of a `//` comment names the
// graph file and line a value comes from, for people reading dumps and compile errors. They never
// change the binary, so kernel names (jit/codegen) and disk cache keys (jit/cache, jit/host_compile)
// are computed on the source without them: renaming a graph file, or adding comments or blank
// lines to it, changes no kernel name and recompiles nothing. Both halves of that rule are here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fusejit::jit {

// "  [FILE:LINE]" with the characters that could end the comment or the marker early (control
// characters, '[' and ']') replaced by '?', so without_location_comments() finds it exactly;
// bytes that are not UTF-8 written as "\xNN" (ir::escape_invalid_utf8).
std::string location_comment(std::string_view file, uint32_t line);

// `source` with every location comment removed: on each line that has a `//` comment ending in
// "  [NAME:DIGITS]", that marker is cut. Everything else (code, other comments, line breaks, so
// line numbers too) is kept byte for byte.
std::string without_location_comments(std::string_view source);

}  // namespace fusejit::jit
