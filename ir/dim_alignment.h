// Broadcasts that line up two different named dims: a graph is written for every value of its
// dims, and such a broadcast holds only while the two are equal or one of them is 1.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace fusejit::ir {

// Node `node` broadcasts its operands so that named dim `a` (an index into Graph::dims) lines up
// with named dim `b` at the same position (NumPy aligns shapes from the right).
struct DimAlignment {
  NodeId node = kNoNode;
  int32_t a = -1, b = -1;
};

// Every such node and pair of dims, in topological order. The commonest cause is a slip: a
// reduction without keepdim broadcast back, `x * rsqrt(mean(x * x, -1) + eps)` over x : [T, D],
// which lines T up with D; it runs while T == D and at T = 1 (a decode step), and fails for any
// other batch. Some are meant: an input whose dim is either 1 or another dim's size.
std::vector<DimAlignment> mixed_dim_alignments(const Graph& g);

}  // namespace fusejit::ir
