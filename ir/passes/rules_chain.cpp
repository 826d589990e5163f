// Merging chains of multiplies / adds by constants, only where it is provably bit-exact.
//
// mul(mul(x, c1), c2) -> mul(x, c) with c = c1*c2, for a float dtype T, exact when
//   (1) c1 = +-2^k with k >= 0 (|c1| >= 1): x*c1 only shifts the exponent, so it is exact
//       (subnormal x included: |x*c1| >= |x| never loses bits) unless it overflows to +-inf;
//   (2) c2 is finite with |c2| >= 1, and c = c1*c2 is exactly representable in T.
// Then without overflow both sides round the same real number x*c1*c2 once, so they agree. With
// overflow, |x*c1| > max(T) (it has x's significand, so it is beyond the rounding threshold), and
// |x*c| = |x*c1|*|c2| >= |x*c1| overflows too, with the same sign. x = NaN, +-inf, +-0 agree by
// the sign rules. For f16/bf16 (computed in f32, rounded per node) the same holds: x*c1 is exact
// in f32 and in the half type (or overflows both to inf), so both sides are round_half(round_f32(
// x*c1*c2)) of the same real. The seed's x*2*3 -> x*6 is this case. Counterexamples to the
// excluded cases: x*2*0.5 (x = max: inf vs max), x*1.5*4 (x = the smallest subnormal: the first
// product rounds in the subnormal range, 8 vs 6 units), x*0.5*3 (x subnormal: x*0.5 rounds).
// Integers wrap modulo 2^n, a ring, so any integer chain merges exactly (bool: and is associative).
//
// add/sub chains: (x + k1) + k2 -> x + (k1 + k2) with sub(x, c) read as x + (-c): exact for
// integers (wrapping; -INT_MIN == INT_MIN is still right modulo 2^n). Never for floats in strict
// mode (each add rounds); fast mode has its own rule.
#include <cmath>

#include "ir/eval.h"
#include "ir/passes/rules.h"

namespace fusejit::ir {
namespace {

using namespace match;

// If node `id` is mul(x, c) or mul(c, x) with exactly one Const operand, sets x and c.
bool as_mul_const(const RewriteContext& ctx, NodeId id, NodeId* x, Scalar* c) {
  const Node& a = ctx.node(id);
  if (a.op != Op::Mul) return false;
  Candidate inner;
  inner.op = a.op;
  inner.nargs = 2;
  inner.args = a.args;
  return split_const(ctx, inner, x, c);
}

// mul(mul(x, c1), c2) -> mul(x, c1*c2) when exact (see the file comment for the condition)
NodeId mul_chain(RewriteContext& ctx, const Candidate& n) {
  NodeId a, x;
  Scalar c1, c2;
  if (!split_const(ctx, n, &a, &c2) || !as_mul_const(ctx, a, &x, &c1)) return kNoNode;
  Scalar c = eval2(Op::Mul, n.dtype, c1, c2);
  if (is_float(n.dtype)) {
    if (!is_pow2(c1) || std::fabs(c1.f) < 1.0) return kNoNode;
    if (!std::isfinite(c2.f) || std::fabs(c2.f) < 1.0) return kNoNode;
    if (!std::isfinite(c.f) || c.f != c1.f * c2.f) return kNoNode;  // double product is exact here
  }
  NodeId r = ctx.emit(Op::Mul, n.dtype, {x, ctx.constant(c)});
  return fits(ctx, n, r) ? r : kNoNode;
}

// If node `id` is add(x, c), add(c, x) or sub(x, c) on an integer dtype, sets x and k (c or -c).
bool as_add_const(const RewriteContext& ctx, NodeId id, NodeId* x, Scalar* k) {
  const Node& a = ctx.node(id);
  if (a.op == Op::Add) {
    Candidate inner;
    inner.op = a.op;
    inner.nargs = 2;
    inner.args = a.args;
    return split_const(ctx, inner, x, k);
  }
  if (a.op == Op::Sub) {
    std::optional<Scalar> c = ctx.const_value(a.args[1]);
    if (!c || ctx.const_value(a.args[0])) return false;
    *x = a.args[0];
    Scalar v[1] = {*c};
    *k = eval_scalar(Op::Neg, a.dtype, v);
    return true;
  }
  return false;
}

// add(add(x, c1), c2) -> add(x, c1+c2) for integers (sub(x, c) counts as add(x, -c); wrapping)
NodeId int_add_chain(RewriteContext& ctx, const Candidate& n) {
  if (!is_int(n.dtype)) return kNoNode;
  Candidate outer = n;
  NodeId a, x;
  Scalar k1, k2;
  // Read the outer candidate the way as_add_const reads a node.
  if (n.op == Op::Add) {
    if (!split_const(ctx, outer, &a, &k2)) return kNoNode;
  } else {
    std::optional<Scalar> c = ctx.const_value(n.arg(1));
    if (!c || ctx.const_value(n.arg(0))) return kNoNode;
    a = n.arg(0);
    Scalar v[1] = {*c};
    k2 = eval_scalar(Op::Neg, n.dtype, v);
  }
  if (!as_add_const(ctx, a, &x, &k1)) return kNoNode;
  NodeId r = ctx.emit(Op::Add, n.dtype, {x, ctx.constant(eval2(Op::Add, n.dtype, k1, k2))});
  return fits(ctx, n, r) ? r : kNoNode;
}

}  // namespace

void add_chain_rules(std::vector<Rule>& out) {
  out.push_back({"mul-chain", Op::Mul, false, mul_chain});
  out.push_back({"int-add-chain", Op::Add, false, int_add_chain});
  out.push_back({"int-sub-chain", Op::Sub, false, int_add_chain});
}

}  // namespace fusejit::ir
