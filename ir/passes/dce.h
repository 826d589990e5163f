// Dead-code elimination: drops every node no output depends on. Inputs and params are always
// kept (they are the graph's interface), in slot order.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace fusejit::ir {

// Returns `g` without dead nodes; `removed` (optional) receives how many nodes were dropped.
// Node order, names, locations and output bindings are kept.
Graph eliminate_dead_code(const Graph& g, int* removed = nullptr);

// The inputs no output depends on, in slot order (worth a warning: the caller still has to
// supply them).
std::vector<NodeId> unused_inputs(const Graph& g);

}  // namespace fusejit::ir
