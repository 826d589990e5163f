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

// Node `node` broadcasts a value computed elementwise from `reduction` (one without keepdim, of a
// value of shape X) against another operand of shape X, so that axis `from` of X, which the
// reduction keeps, lines up with X's axis `to` != from: NumPy's `x / x.sum(-1)` of a square x,
// which runs (the sizes agree) but divides each row by another row's sum. Found by axes, where
// mixed_dim_alignments sees only different named dims (not a square literal shape, nor the one dim
// fuse traces for two axes of one size). Axes of size 1 broadcast and are never a slip. At most
// one per node, in topological order.
struct AxisSlip {
  NodeId node = kNoNode, reduction = kNoNode;
  int from = -1, to = -1;
};
std::vector<AxisSlip> reduced_axis_slips(const Graph& g);

}  // namespace fusejit::ir
