// The reference evaluator: the oracle every other path (CPU kernels, GPU kernels, fused or not) is
// checked against. It evaluates a graph node by node on host tensors with the semantics of
// ir/scalar/fj_scalar.h (see docs/ops.md): each node's value is fj_<op>(operands) computed in the
// operands' compute type, rounded to the node's dtype (f16/bf16 per node, round to nearest even).
// Operands broadcast by NumPy's rules. Written to be obviously right; typed loops keep it usable on
// tens of millions of elements.
#pragma once

#include <span>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace fusejit::ir {

// Evaluates `g` and returns one tensor per Graph::outputs entry, in that order (an output listed
// twice is returned twice). `inputs`: one per Graph::inputs entry in declaration order, each with
// exactly the input's dtype and shape (the graph's current dim values). `params`: one per
// Graph::params entry, each of the param's dtype; empty means every param takes its default.
// Throws UserError naming the input or param with the expected and found dtype/shape
// ("input 'x': expected f32[8, 4096], found f16[8, 4096]"), on a wrong count, on storage whose size
// does not match the shape, or when memory for a node runs out. Intermediates are freed after
// their last use.
std::vector<Tensor> evaluate_reference(const Graph& g, std::span<const Tensor> inputs,
                                       std::span<const Scalar> params = {});

}  // namespace fusejit::ir
