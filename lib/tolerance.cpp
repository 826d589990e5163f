// Per-op GPU-vs-reference tolerances: docs/ops.md's "GPU vs reference: ulp bounds" table in code
// (CUDA Math API error bounds plus glibc's, per op; composite activations as documented there).
#include "lib/tolerance.h"

namespace fusejit {
namespace {

struct Row {
  int64_t f32, f64;  // tolerance in ulp of the node's dtype (CUDA bound + glibc bound)
  int calls;         // math-library calls on the op's path (for f16/bf16: 1 half ulp per call)
};

// One row per op that calls the math library; every other op is exact on both sides.
Row row(ir::Op op) {
  using ir::Op;
  switch (op) {
    case Op::Exp: case Op::Exp2: return {3, 2, 1};
    case Op::Expm1: case Op::Log: case Op::Log1p: return {2, 2, 1};
    case Op::Log2: return {2, 3, 1};
    case Op::Log10: return {4, 3, 1};
    case Op::Sin: case Op::Cos: return {3, 3, 1};
    case Op::Tan: return {5, 3, 1};
    case Op::Tanh: return {4, 3, 1};
    case Op::Erf: return {3, 3, 1};
    case Op::Pow: return {5, 3, 1};
    case Op::Atan2: return {5, 3, 1};
    // Composite activations: 4 x the sum of their calls' tolerances (docs/ops.md).
    case Op::Sigmoid: case Op::Silu: return {4 * 3, 4 * 2, 1};      // exp
    case Op::Softplus: return {4 * (3 + 2), 4 * (2 + 2), 2};         // exp, log1p
    case Op::Gelu: return {4 * 3, 4 * 3, 1};                         // erf
    case Op::GeluTanh: return {4 * 4, 4 * 3, 1};                     // tanh
    default: return {0, 0, 0};
  }
}

bool composite(ir::Op op) {
  return op == ir::Op::Sigmoid || op == ir::Op::Silu || op == ir::Op::Softplus || op == ir::Op::Gelu ||
         op == ir::Op::GeluTanh;
}

}  // namespace

OpTolerance gpu_op_tolerance(ir::Op op, ir::DType dtype) {
  OpTolerance t;
  if (!ir::is_float(dtype)) return t;  // integer and bool results are exact on every path
  Row r = row(op);
  if (r.calls == 0) return t;
  if (ir::is_half(dtype)) {
    t.ulps = r.calls;  // computed in f32 and rounded once: at most 1 half-type ulp per call
  } else {
    t.ulps = dtype == ir::DType::F64 ? r.f64 : r.f32;
  }
  // Near cancellation (1 + erf(x) for x << 0, 1 + tanh(...)) a relative bound is meaningless:
  // composites may instead be within 2^-20 (f32) / 2^-48 (f64) times max(1, |x|).
  if (composite(op)) t.abs_scale = dtype == ir::DType::F64 ? 0x1p-48 : dtype == ir::DType::F32 ? 0x1p-20 : 0.0;
  return t;
}

}  // namespace fusejit
