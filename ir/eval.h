// Scalar semantics of every op: the single definition the reference evaluator, constant
// folding and weak-literal folding all use. Implemented on top of ir/scalar/fj_scalar.h, the
// header that generated kernels also embed, so the CPU paths agree bit for bit by construction.
#pragma once

#include <span>

#include "ir/graph.h"

namespace fusejit::ir {

// Evaluates `op` on scalar operands. Preconditions (checked, InternalError otherwise): args
// has op_arity(op) entries and each already has the op's operand dtype (see ir/ops.def);
// `result` is the node's dtype (for Cast, the target dtype). The result is rounded to `result`
// (f16/bf16: computed in f32, rounded to nearest-even). Never traps: integer division by zero,
// INT_MIN / -1, overflow and out-of-range casts give the values documented in docs/ops.md.
Scalar eval_scalar(Op op, DType result, std::span<const Scalar> args);

}  // namespace fusejit::ir
