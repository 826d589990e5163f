// Constant folding: an op whose operands are all constants becomes one constant, computed by
// ir::eval_scalar -- the same fj_scalar.h code the kernels run, rounded to the node's dtype
// (f16/bf16 computed in f32 and rounded; inf, NaN, overflow to inf and half casts included), so
// folding never changes a bit. Calls of inexact math functions are not folded (see below).
#include "ir/eval.h"
#include "ir/passes/rules.h"

namespace fusejit::ir {
namespace {

// Float ops that call an inexact math library function (exp, log, sin, pow, ...): folding them
// on the host would give glibc's bits, while a GPU kernel of the unfused plan (planned from the
// graph before rewriting) computes the CUDA Math API's, up to a few ulp apart; fused and unfused
// GPU outputs must stay bitwise equal, so these are left to the kernels (docs/ops.md, "Constant
// operands"). Exact ops (arithmetic, sqrt, rounding, fmod, casts) fold to the same bits everywhere.
bool calls_inexact_math(Op op, DType operand) {
  const OpAccuracy a = op_info(op).gpu;  // ir/ops.def: Math and Composite rows call the math library
  return is_float(operand) && (a == OpAccuracy::Math || a == OpAccuracy::Composite);
}

// op(c1, ..., cn) -> eval_scalar(op, dtype, c1..cn), all operands constants; when some operand is
// a splat (a constant broadcast to a shape), the result is splat over that shape
NodeId fold(RewriteContext& ctx, const Candidate& n) {
  if (calls_inexact_math(n.op, ctx.node(n.arg(0)).dtype)) return kNoNode;
  Scalar vals[3];
  NodeId carrier = kNoNode;
  bool all_const = true;
  for (int k = 0; k < n.nargs; ++k) {
    std::optional<Scalar> c = ctx.const_value(n.arg(k));
    if (!c) return kNoNode;
    vals[k] = *c;
    if (ctx.node(n.arg(k)).op != Op::Const) {
      all_const = false;
      NodeId like = ctx.splat_carrier(n.arg(k));
      if (carrier == kNoNode && ctx.node(like).shape == n.shape && ctx.node(like).dtype == n.dtype) carrier = like;
    }
  }
  if (!all_const && carrier == kNoNode) return kNoNode;
  Scalar v = eval_scalar(n.op, n.dtype, std::span<const Scalar>(vals, static_cast<size_t>(n.nargs)));
  return all_const ? ctx.constant(v) : ctx.splat(v, carrier);
}

}  // namespace

void add_fold_rules(std::vector<Rule>& out) { out.push_back({"constant-fold", std::nullopt, false, fold}); }

}  // namespace fusejit::ir
