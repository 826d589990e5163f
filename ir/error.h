// Errors: user errors (bad graphs, bad values; carry a source location) are kept apart from
// internal errors (a fusejit bug), as Halide does, so reports can tell them apart.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fusejit::ir {

// Length of the UTF-8 sequence starting at s[i] (i < s.size()), or 0 if it is not valid UTF-8
// (overlong forms, surrogates and values above U+10FFFF are invalid, per RFC 3629).
size_t utf8_len(std::string_view s, size_t i);
// utf8_len, and the sequence's code point in *cp when it is valid.
size_t utf8_decode(std::string_view s, size_t i, char32_t* cp);

// `s` with each NUL byte and each byte that does not start a valid UTF-8 sequence written as
// "\xNN" (lower-case hex), everything else kept: text for a message (a file name or option value
// a user gave may hold any bytes), which JSON, Python's str and what() (a C string) all take whole.
std::string escape_invalid_utf8(std::string_view s);

// A position in graph text, 1-based. line == 0 means "no location" (e.g. built through the API).
struct Loc {
  uint32_t line = 0;
  uint32_t col = 0;
  bool known() const { return line != 0; }
  friend bool operator==(const Loc&, const Loc&) = default;
};

// A mistake in the user's input: graph text, builder calls, dims, params, files, options.
// what() is the bare message (escape_invalid_utf8: whole as a C string); render with
// format_diagnostic() (ir/diagnostic.h) for "FILE:LINE:COL: error: MESSAGE" plus the offending
// line and a caret.
class UserError : public std::runtime_error {
 public:
  UserError(std::string message, Loc loc = {}) : std::runtime_error(escape_invalid_utf8(message)), loc_(loc) {}
  const Loc& loc() const { return loc_; }

 private:
  Loc loc_;
};

// A mistake in an input other than the graph text: a .npy file (file() is its path) or the
// environment (file() is ""). Rendered as "FILE: error: MESSAGE" (or "error: MESSAGE"), never
// against the graph file's name and lines; what() is the bare message.
class FileError : public UserError {
 public:
  FileError(std::string message, std::string file)
      : UserError(std::move(message)), file_(escape_invalid_utf8(file)) {}
  const std::string& file() const { return file_; }

 private:
  std::string file_;
};

// A broken invariant inside fusejit: always a bug, never the user's fault.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& message) : std::logic_error(message) {}
};

[[noreturn]] void internal_error(const char* file, int line, const std::string& message);

}  // namespace fusejit::ir

// Checks an internal invariant; on failure throws InternalError naming the source position.
#define FJ_CHECK(cond, msg)                                                   \
  do {                                                                        \
    if (!(cond)) ::fusejit::ir::internal_error(__FILE__, __LINE__, (msg));    \
  } while (0)
