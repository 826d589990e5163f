// Printer: renders a Graph as graph text (docs/graph-format.md). Used for round-trip tests and
// as the "IR dump" of the rewrite engine and the command line.
#pragma once

#include <string>

#include "ir/graph.h"

namespace fusejit::ir {

// Prints `g` as graph text: `graph`, `dim`, `input`, `param` declarations, then one statement per
// non-leaf node in node order (SSA), then `output` lines. Named nodes keep their names; unnamed
// ones print as anonymous temporaries `%<id>` (the node id, so dumps line up with ids; the parser
// binds a `%N` without naming the node, which keeps temporaries unnamed across a round trip). Const nodes are written
// inline as literals where the weak-literal rule re-creates exactly the same node at the same
// position, otherwise as `tN = cast(LITERAL, dtype)`; implicit casts appear as explicit
// `cast(x, dtype)`. Floats are printed in the shortest form that reads back to the same bits
// (inf, -inf, nan, -nan, -0.0 included).
//
// Guarantee: for any graph produced by parse_graph, parse_graph(print_graph(g)) is
// structurally_equal to g, and printing that again gives the same text. Graphs built through the
// API round-trip too when their node and output names are distinct identifiers that are not
// reserved words; otherwise such names are replaced (the text still parses). NaN payloads other
// than the default quiet NaN (with either sign) are not preserved. An output that is an input or a
// param (as rewrites may leave it; the parser refuses one) prints as a same-dtype cast of it with a
// comment, so the text parses, and strict rewrites of it give the graph back.
std::string print_graph(const Graph& g);

// Text of one literal as the printer writes it: "true", "-3", "0.5", "2.0", "-inf", "nan".
// Float dtypes always print with a '.', 'e', inf or nan so they read back as float literals.
std::string print_scalar(const Scalar& s);

}  // namespace fusejit::ir
