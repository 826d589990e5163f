// The IR verifier: checks every invariant a graph must satisfy before any pass, codegen or
// evaluation sees it. Broken IR invariants (operand order, arity, dtypes per rule, shapes) throw
// InternalError: a builder or pass bug. Problems a user can cause (no outputs, an output that
// names an input, duplicate names) throw UserError with the location.
#pragma once

#include "ir/graph.h"

namespace fusejit::ir {

void verify(const Graph& g);

}  // namespace fusejit::ir
