// Parser for the graph text format (docs/graph-format.md). Builds the graph through
// ir::GraphBuilder, so typing (weak literals, promotion) and broadcasting follow the builder.
#pragma once

#include <cstdint>
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

// Reads `path` and parses it (file = path). Throws UserError if the file cannot be read.
Graph parse_graph_file(const std::string& path, const DimOverrides& dim_overrides = {});

// Reads a whole file into a string; throws UserError naming the path on failure (used by the
// command line to show source lines in diagnostics).
std::string read_text_file(const std::string& path);

}  // namespace fusejit::ir
