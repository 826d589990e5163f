// Algebraic identities that hold bit for bit in IEEE 754 arithmetic (round to nearest even, no
// flush-to-zero) and in wrapping integer arithmetic. Deliberately absent for floats, because
// they are wrong there: x*0 -> 0 (NaN*0 and inf*0 are NaN, -1*0 is -0), x-x -> 0 (inf-inf is
// NaN), x+0 -> x (-0 + 0 is +0). Those are integer-only here, and fast-math-only for floats.
#include <cmath>

#include "ir/passes/rules.h"

namespace fusejit::ir {
namespace {

using namespace match;

// mul(x, 1) -> x, mul(1, x) -> x (all dtypes; for bool, 1 is true and mul is logical and)
NodeId mul_one(RewriteContext& ctx, const Candidate& n) {
  NodeId x;
  Scalar c;
  if (!split_const(ctx, n, &x, &c) || !equals(c, 1.0) || !fits(ctx, n, x)) return kNoNode;
  return x;
}

// div(x, 1) -> x (x/1 is exactly x for every float, NaN and inf included)
NodeId div_one(RewriteContext& ctx, const Candidate& n) {
  std::optional<Scalar> c = ctx.const_value(n.arg(1));
  if (!c || !equals(*c, 1.0) || !fits(ctx, n, n.arg(0))) return kNoNode;
  return n.arg(0);
}

// sub(x, +0) -> x (floats: only +0, since x - (-0) turns -0 into +0; integers: 0)
NodeId sub_zero(RewriteContext& ctx, const Candidate& n) {
  std::optional<Scalar> c = ctx.const_value(n.arg(1));
  if (!c || !fits(ctx, n, n.arg(0))) return kNoNode;
  if (is_float(c->dtype) ? !is_pos_zero(*c) : c->i != 0) return kNoNode;
  return n.arg(0);
}

// add(x, -0.0) -> x, add(-0.0, x) -> x (floats: x + -0 == x for every x, +0 + -0 == +0 included)
NodeId add_neg_zero(RewriteContext& ctx, const Candidate& n) {
  NodeId x;
  Scalar c;
  if (!split_const(ctx, n, &x, &c) || !is_neg_zero(c) || !fits(ctx, n, x)) return kNoNode;
  return x;
}

// add(x, 0) -> x for integers and bool (bool add is logical or)
NodeId int_add_zero(RewriteContext& ctx, const Candidate& n) {
  NodeId x;
  Scalar c;
  if (is_float(n.dtype) || !split_const(ctx, n, &x, &c) || c.i != 0 || !fits(ctx, n, x)) return kNoNode;
  return x;
}

// mul(x, 0) -> 0 broadcast to x's shape, for integers and bool (never for floats: NaN, inf, -0)
NodeId int_mul_zero(RewriteContext& ctx, const Candidate& n) {
  NodeId x;
  Scalar c;
  if (is_float(n.dtype) || !split_const(ctx, n, &x, &c) || c.i != 0 || ctx.node(x).shape != n.shape) return kNoNode;
  return ctx.splat(c, x);
}

// sub(x, x) -> 0 broadcast to x's shape, for integers (wrapping: x - x is always 0)
NodeId int_sub_self(RewriteContext& ctx, const Candidate& n) {
  if (is_float(n.dtype) || n.arg(0) != n.arg(1) || ctx.node(n.arg(0)).op == Op::Const) return kNoNode;
  return ctx.splat(make(n.dtype, 0), n.arg(0));
}

// neg(neg(x)) -> x (a sign flip twice; for integers wrapping negation is an involution)
NodeId neg_neg(RewriteContext& ctx, const Candidate& n) {
  const Node& a = ctx.node(n.arg(0));
  if (a.op != Op::Neg || !fits(ctx, n, a.args[0])) return kNoNode;
  return a.args[0];
}

// cast(x, T) -> x when x already has dtype T
NodeId cast_same(RewriteContext& ctx, const Candidate& n) {
  return ctx.node(n.arg(0)).dtype == n.dtype ? n.arg(0) : kNoNode;
}

// True if every value of dtype t converts to w exactly (so converting back returns it).
bool widens_exactly(DType t, DType w) {
  switch (t) {
    case DType::Bool: return w != DType::Bool;
    case DType::I8:
    case DType::U8:
      return w == DType::I32 || w == DType::I64 || is_float(w);  // |x| <= 255 fits 8 significand bits
    case DType::I32: return w == DType::I64 || w == DType::F64;
    case DType::F16:
    case DType::BF16: return w == DType::F32 || w == DType::F64;
    case DType::F32: return w == DType::F64;
    default: return false;
  }
}

// cast(cast(x: T, W), T) -> x when W holds every T value exactly (a widening round trip;
// cast(cast(x: f32, f16), f32) is a narrowing the user asked for and is never removed)
NodeId cast_roundtrip(RewriteContext& ctx, const Candidate& n) {
  const Node& inner = ctx.node(n.arg(0));
  if (inner.op != Op::Cast) return kNoNode;
  NodeId x = inner.args[0];
  if (ctx.node(x).dtype != n.dtype || !widens_exactly(n.dtype, inner.dtype) || !fits(ctx, n, x)) return kNoNode;
  return x;
}

// where(true, a, b) -> a; where(false, a, b) -> b (when that operand has the result's shape)
NodeId where_const(RewriteContext& ctx, const Candidate& n) {
  std::optional<Scalar> c = ctx.const_value(n.arg(0));
  if (!c) return kNoNode;
  NodeId r = c->i ? n.arg(1) : n.arg(2);
  return fits(ctx, n, r) ? r : kNoNode;
}

// where(c, a, a) -> a (when a has the result's shape)
NodeId where_same(RewriteContext& ctx, const Candidate& n) {
  return n.arg(1) == n.arg(2) && fits(ctx, n, n.arg(1)) ? n.arg(1) : kNoNode;
}

// logical_not(logical_not(b)) -> b
NodeId not_not(RewriteContext& ctx, const Candidate& n) {
  const Node& a = ctx.node(n.arg(0));
  if (a.op != Op::LogicalNot || !fits(ctx, n, a.args[0])) return kNoNode;
  return a.args[0];
}

}  // namespace

void add_identity_rules(std::vector<Rule>& out) {
  out.push_back({"mul-one", Op::Mul, false, mul_one});
  out.push_back({"div-one", Op::Div, false, div_one});
  out.push_back({"sub-zero", Op::Sub, false, sub_zero});
  out.push_back({"add-neg-zero", Op::Add, false, add_neg_zero});
  out.push_back({"int-add-zero", Op::Add, false, int_add_zero});
  out.push_back({"int-mul-zero", Op::Mul, false, int_mul_zero});
  out.push_back({"int-sub-self", Op::Sub, false, int_sub_self});
  out.push_back({"neg-neg", Op::Neg, false, neg_neg});
  out.push_back({"cast-same", Op::Cast, false, cast_same});
  out.push_back({"cast-roundtrip", Op::Cast, false, cast_roundtrip});
  out.push_back({"where-const", Op::Where, false, where_const});
  out.push_back({"where-same", Op::Where, false, where_same});
  out.push_back({"not-not", Op::LogicalNot, false, not_not});
}

}  // namespace fusejit::ir
