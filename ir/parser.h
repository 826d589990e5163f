// Parser for the graph text format (docs/graph-format.md). Builds the graph through
// ir::GraphBuilder, so typing (weak literals, promotion) and broadcasting follow the builder.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace fusejit::ir {

// Dim values given at run time (`--dim N=1024`): name -> value; they replace the declared
// defaults. Later entries win over earlier ones for the same name.
using DimOverrides = std::vector<std::pair<std::string, int64_t>>;

// Maximum nesting depth of an expression (parentheses, unary minus, call arguments). Deeper
// expressions are rejected with a UserError instead of risking a stack overflow.
inline constexpr int kMaxExprDepth = 256;

// Parses graph text into a verified Graph. `file` is recorded in Graph::file (for diagnostics).
// Every node gets the Loc (line, col) of the expression that produced it; nodes of `name = expr`
// statements get that name. Throws UserError with a Loc for every malformed input (render it with
// format_diagnostic in ir/diagnostic.h); an override naming an undeclared dim throws UserError
// without a Loc. Runs in time roughly linear in the text size; never recurses deeper than
// kMaxExprDepth.
Graph parse_graph(std::string_view text, const std::string& file, const DimOverrides& dim_overrides = {});

// Most bytes a graph file may hold (docs/graph-format.md). Real graphs are kilobytes; the limit
// bounds what a mistaken path (a log, a data file) costs.
inline constexpr uint64_t kMaxGraphFileBytes = uint64_t{16} << 20;

// Reads `path` and parses it (file = path). Throws UserError if the file cannot be read.
Graph parse_graph_file(const std::string& path, const DimOverrides& dim_overrides = {});

// Graph text as the parser reads it and counts its columns: without a UTF-8 byte-order mark (some
// editors write one). Diagnostics render the text so (lib/error.cpp).
std::string_view without_bom(std::string_view text);

// Reads a whole graph file into a string: the one checked reader for graph files (the library's
// Graph::load and every command use it). Throws UserError naming the path and the problem when
// it cannot be opened or read, is not a regular file (a directory, FIFO, device or socket is
// refused without reading it, so /dev/zero or a FIFO never hang), or holds more than
// kMaxGraphFileBytes.
std::string read_text_file(const std::string& path);

// What a path whose stat mode is `mode` names when it is not a regular file, for an error message:
// "it is a directory", "it is a FIFO (named pipe), not a regular file", ...
std::string not_regular_file(unsigned mode);

// What read_checked_file calls a file in its messages ("graph file", "graph files"), and the most
// bytes it reads.
struct FileKind {
  const char* what;
  const char* plural;
  uint64_t max_bytes;
};

// Throws UserError when `path` holds a NUL byte: every system call reads a path only up to its
// first NUL, so "DIR\0/x" would name DIR itself, a file or folder other than the one given.
// `what` names it in the message ("cache folder", "graph file").
void check_path(std::string_view path, std::string_view what);

// read_text_file for any file fusejit reads whole (an ahead-of-time folder's index, sources and
// binaries): the same checks and errors, with `kind`'s words and limit.
std::string read_checked_file(const std::string& path, const FileKind& kind);

// Writes `pieces`, in order, to a new file beside `path` (".NAME.PID.N.tmp", or ".fj.PID.N.tmp"
// where that name would pass NAME_MAX) and renames it over `path`: a reader sees the old file or
// the new one, and a symlink at `path` is replaced, never written through (O_NOFOLLOW | O_EXCL on
// the new file, made with `mode` less the umask). Returns "" or why it failed (strerror); the new
// file is removed then. The one writer of whole files (ahead-of-time folders, --save-dir's .npy).
std::string replace_file(const std::string& path, std::initializer_list<std::string_view> pieces, unsigned mode = 0644);

// Makes folder `path` and its missing parents (as mkdir -p). Returns "" or why it could not, in
// words: "a symbolic link to 'T', which does not exist" or "a file, not a folder" (of a parent:
// "'a/b' is a file, not a folder") where the system says only "File exists" or "Not a directory".
// The one folder maker of --save-dir and dump/ahead-of-time folders.
std::string make_folders(const std::string& path);

}  // namespace fusejit::ir
