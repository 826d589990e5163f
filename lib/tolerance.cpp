// Per-op GPU-vs-reference tolerances (see lib/tolerance.h and docs/ops.md).
#include "lib/tolerance.h"

namespace fusejit {
namespace {

// Maximum ulp error of the single-precision (f32) CUDA implementation, plus 1 ulp for the host
// C library's own error (glibc's float functions are within 1 ulp), for ops that call a math
// library function. Composite ops add the errors of their steps.
int64_t f32_ulps(ir::Op op) {
  using ir::Op;
  switch (op) {
    case Op::Exp: return 2 + 1;
    case Op::Exp2: return 2 + 1;
    case Op::Expm1: return 1 + 1;
    case Op::Log: return 1 + 1;
    case Op::Log2: return 1 + 1;
    case Op::Log10: return 2 + 1;
    case Op::Log1p: return 1 + 1;
    case Op::Sin: case Op::Cos: return 2 + 1;
    case Op::Tan: return 4 + 1;
    case Op::Tanh: return 2 + 1;
    case Op::Erf: return 2 + 1;
    case Op::Pow: return 4 + 1;   // powf: 4 ulp (CUDA) ; integer pow is exact (handled below)
    case Op::Atan2: return 3 + 1;
    case Op::Sigmoid: return 3 + 2;   // 1 / (1 + exp(-x)): exp's error, one add, one division
    case Op::Silu: return 3 + 2;      // x / (1 + exp(-x))
    case Op::Softplus: return 4 + 2;  // log1p(exp(x)) for x <= 20
    case Op::Gelu: return 4 + 2;      // 0.5 * x * (1 + erf(x / sqrt 2)): plus the input-scaled bound
    case Op::GeluTanh: return 4 + 2;  // 0.5 * x * (1 + tanh(...)): plus the input-scaled bound
    default: return 0;
  }
}

}  // namespace

OpTolerance gpu_op_tolerance(ir::Op op, ir::DType dtype) {
  OpTolerance t;
  if (!ir::is_float(dtype)) return t;  // integer and bool results are exact on every path
  int64_t u = f32_ulps(op);
  if (u == 0) return t;
  if (ir::is_half(dtype)) {
    // Computed in f32, then rounded once to the half type: a few f32 ulps can move the result
    // across a rounding boundary of the half type, at most by one half-type ulp.
    t.ulps = 1;
  } else if (dtype == ir::DType::F64) {
    // CUDA's double-precision functions are within 1-2 ulp (tan, pow: 2); glibc within 1.
    t.ulps = u <= 3 ? 3 : 4;
  } else {
    t.ulps = u;
  }
  if (op == ir::Op::Gelu || op == ir::Op::GeluTanh) t.input_scaled_ulps = 8;
  return t;
}

}  // namespace fusejit
