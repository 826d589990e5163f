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
  // For ops whose formula subtracts nearly equal values (gelu's 1 + erf(x/sqrt(2)) for negative
  // x): also accept |gpu - ref| <= input_scaled_ulps * eps(dtype) * max(|x|, 1).
  int64_t input_scaled_ulps = 0;
};

// The tolerance of one op node of dtype `dtype` whose operands are exact (the per-op check of the
// unfused path on the GPU). Correctly rounded ops (arithmetic, sqrt, division, comparisons,
// casts, rounding functions, min/max, ...) are exact.
OpTolerance gpu_op_tolerance(ir::Op op, ir::DType dtype);

}  // namespace fusejit
