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
// are not printable text (binary garbage) are shown as '?', and what terminal_safe() replaces in
// FILE, MESSAGE and the line; a quoted name in MESSAGE as shorten_quoted_names() cuts it. The
// result ends with a newline.
std::string format_diagnostic(const UserError& err, const std::string& file, std::string_view source_text);

// `text` with what a terminal would act on instead of showing replaced by '?', one per byte (byte
// columns stay put): control bytes but tab (and line feed where `keep_line_feeds`: a compiler log
// keeps its lines), DEL, the C1 controls U+0080-U+009F (a terminal may read U+009B as CSI, ECMA-48)
// and the bidirectional overrides and isolates U+202A-U+202E, U+2066-U+2069, which reorder what
// is shown ("Trojan Source", CVE-2021-42574; GCC and rustc warn about them too). Other bytes,
// invalid UTF-8 included, are kept.
std::string terminal_safe(std::string_view text, bool keep_line_feeds = false);

// `message` with each quoted word (between single quotes, no space, line feed or '/': a name) over 160
// bytes cut to its first and last 35 bytes around "...", its length after it:
// 'qqq...qqq' (1000 bytes). Line feeds (a compiler log's) stay.
std::string shorten_quoted_names(std::string_view message);

}  // namespace fusejit::ir
