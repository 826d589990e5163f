// Errors: user errors (bad graphs, bad values; carry a source location) are kept apart from
// internal errors (a fusejit bug), as Halide does, so reports can tell them apart.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace fusejit::ir {

// A position in graph text, 1-based. line == 0 means "no location" (e.g. built through the API).
struct Loc {
  uint32_t line = 0;
  uint32_t col = 0;
  bool known() const { return line != 0; }
  friend bool operator==(const Loc&, const Loc&) = default;
};

// A mistake in the user's input: graph text, builder calls, dims, params, files, options.
// what() is the bare message; render with format_diagnostic() (ir/diagnostic.h) for
// "FILE:LINE:COL: error: MESSAGE" plus the offending line and a caret.
class UserError : public std::runtime_error {
 public:
  UserError(std::string message, Loc loc = {}) : std::runtime_error(std::move(message)), loc_(loc) {}
  const Loc& loc() const { return loc_; }

 private:
  Loc loc_;
};

// A mistake in an input other than the graph text: a .npy file (file() is its path) or the
// environment (file() is ""). Rendered as "FILE: error: MESSAGE" (or "error: MESSAGE"), never
// against the graph file's name and lines; what() is the bare message.
class FileError : public UserError {
 public:
  FileError(std::string message, std::string file) : UserError(std::move(message)), file_(std::move(file)) {}
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
