// How far a GPU result may lie from the reference evaluator, per op: the CUDA Math API's
// documented maximum ulp errors (CUDA C++ Programming Guide, "Mathematical Functions" appendix,
// single- and double-precision tables, default flags: -prec-div=true, -prec-sqrt=true,
// -ftz=false) against the host C library the reference uses. The table is docs/ops.md's
// "GPU vs reference" table in code.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "ir/op.h"

namespace fusejit {

struct OpTolerance {
  // Maximum distance in ulps of the node's dtype between a GPU result and the reference result
  // computed from the same operand values. 0 = exact (NaN matches NaN).
  int64_t ulps = 0;
  // Composite activations only: also accept |gpu - ref| <= abs_scale * max(|x|, 1), x the op's
  // first operand (docs/ops.md: relative bounds fail near cancellation). 0 = not applicable.
  double abs_scale = 0.0;
};

// The tolerance of one op node of dtype `dtype` whose operands are exact (the per-op check of the
// unfused path on the GPU). Correctly rounded ops (arithmetic, sqrt, division, comparisons,
// casts, rounding functions, min/max, ...) are exact.
OpTolerance gpu_op_tolerance(ir::Op op, ir::DType dtype);

}  // namespace fusejit
