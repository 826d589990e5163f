// Fast-math rules (RewriteOptions::fast_math only): they may change results, the way
// -ffast-math does (no NaN/inf/signed-zero guarantees, reassociation).
#include <cmath>

#include "ir/eval.h"
#include "ir/passes/rules.h"

namespace fusejit::ir {
namespace {

using namespace match;

// mul(x, 0) -> 0 for floats (wrong for NaN, inf and the sign of zero)
NodeId fast_mul_zero(RewriteContext& ctx, const Candidate& n) {
  NodeId x;
  Scalar c;
  if (!is_float(n.dtype) || !split_const(ctx, n, &x, &c) || c.f != 0.0 || ctx.node(x).shape != n.shape) return kNoNode;
  return ctx.splat(c, x);
}

// sub(x, x) -> 0 for floats (wrong for NaN and inf)
NodeId fast_sub_self(RewriteContext& ctx, const Candidate& n) {
  if (!is_float(n.dtype) || n.arg(0) != n.arg(1) || ctx.node(n.arg(0)).op == Op::Const) return kNoNode;
  return ctx.splat(make(n.dtype, 0.0), n.arg(0));
}

// add(x, +-0) -> x, sub(x, +-0) -> x for floats (wrong for the sign of zero)
NodeId fast_add_zero(RewriteContext& ctx, const Candidate& n) {
  NodeId x;
  std::optional<Scalar> c;
  if (!is_float(n.dtype)) return kNoNode;
  if (n.op == Op::Add) {
    if (!split_const(ctx, n, &x, &c.emplace())) return kNoNode;
  } else {
    x = n.arg(0);
    c = ctx.const_value(n.arg(1));
  }
  if (!c || c->f != 0.0 || !fits(ctx, n, x)) return kNoNode;
  return x;
}

bool finite_const(const std::optional<Scalar>& c) { return c && is_float(c->dtype) && std::isfinite(c->f); }

// mul(mul(x, c1), c2) -> mul(x, c1*c2) for floats, any finite constants (reassociation)
NodeId fast_mul_chain(RewriteContext& ctx, const Candidate& n) {
  NodeId a, x;
  std::optional<Scalar> c1, c2;
  if (!is_float(n.dtype) || !split_const(ctx, n, &a, &c2.emplace()) || !finite_const(c2)) return kNoNode;
  const Node& an = ctx.node(a);
  if (an.op != Op::Mul) return kNoNode;
  Candidate inner;
  inner.op = Op::Mul;
  inner.nargs = 2;
  inner.args = an.args;
  if (!split_const(ctx, inner, &x, &c1.emplace()) || !finite_const(c1)) return kNoNode;
  NodeId r = ctx.emit(Op::Mul, n.dtype, {x, ctx.constant(eval2(Op::Mul, n.dtype, *c1, *c2))});
  return fits(ctx, n, r) ? r : kNoNode;
}

// Reads add(x, c), add(c, x), sub(x, c) as x + k (float dtype, finite c).
bool as_add(const RewriteContext& ctx, Op op, const std::array<NodeId, 3>& args, DType t, NodeId* x, Scalar* k) {
  if (op == Op::Add) {
    Candidate c;
    c.op = op;
    c.nargs = 2;
    c.args = args;
    std::optional<Scalar> v;
    if (!split_const(ctx, c, x, &v.emplace()) || !finite_const(v)) return false;
    *k = *v;
    return true;
  }
  if (op == Op::Sub) {
    std::optional<Scalar> v = ctx.const_value(args[1]);
    if (!finite_const(v) || ctx.const_value(args[0])) return false;
    *x = args[0];
    *k = *v;
    k->f = -k->f;
    (void)t;
    return true;
  }
  return false;
}

// add(add(x, c1), c2) -> add(x, c1+c2) for floats (sub(x, c) as add(x, -c); reassociation)
NodeId fast_add_chain(RewriteContext& ctx, const Candidate& n) {
  NodeId a, x;
  Scalar k1, k2;
  if (!is_float(n.dtype) || !as_add(ctx, n.op, n.args, n.dtype, &a, &k2)) return kNoNode;
  const Node& an = ctx.node(a);
  if (!as_add(ctx, an.op, an.args, n.dtype, &x, &k1)) return kNoNode;
  NodeId r = ctx.emit(Op::Add, n.dtype, {x, ctx.constant(eval2(Op::Add, n.dtype, k1, k2))});
  return fits(ctx, n, r) ? r : kNoNode;
}

// mul(x, sigmoid(x)) -> silu(x) (silu rounds once where the pair rounds twice)
NodeId fast_silu(RewriteContext& ctx, const Candidate& n) {
  if (!is_float(n.dtype)) return kNoNode;
  for (int k = 0; k < 2; ++k) {
    NodeId x = n.arg(k);
    const Node& s = ctx.node(n.arg(1 - k));
    if (s.op == Op::Sigmoid && s.args[0] == x && s.dtype == n.dtype) {
      NodeId r = ctx.emit(Op::Silu, n.dtype, {x});
      return fits(ctx, n, r) ? r : kNoNode;
    }
  }
  return kNoNode;
}

// pow(x, 2) -> mul(x, x) for f32/f64 (pow is not correctly rounded; x*x is)
NodeId fast_pow_two(RewriteContext& ctx, const Candidate& n) {
  std::optional<Scalar> c = ctx.const_value(n.arg(1));
  if (!c || !is_float(n.dtype) || !equals(*c, 2.0)) return kNoNode;
  NodeId r = ctx.emit(Op::Mul, n.dtype, {n.arg(0), n.arg(0)});
  return fits(ctx, n, r) ? r : kNoNode;
}

// div(x, c) -> mul(x, 1/c) for f32/f64, any finite nonzero c with a finite 1/c (one extra
// rounding). Not for halves: 1/c rounded to f16 put a third of x / 7's results 1 ulp off (a new
// user's find), and fast mode computes halves in f32 anyway (docs/ops.md).
NodeId fast_div_const(RewriteContext& ctx, const Candidate& n) {
  std::optional<Scalar> c = ctx.const_value(n.arg(1));
  if (is_half(n.dtype) || !finite_const(c) || c->f == 0.0) return kNoNode;
  Scalar r = eval2(Op::Div, n.dtype, make(n.dtype, 1.0), *c);
  if (!std::isfinite(r.f) || r.f == 0.0) return kNoNode;
  NodeId out = ctx.emit(Op::Mul, n.dtype, {n.arg(0), ctx.constant(r)});
  return fits(ctx, n, out) ? out : kNoNode;
}

}  // namespace

void add_fast_rules(std::vector<Rule>& out) {
  out.push_back({"fast-mul-zero", Op::Mul, true, fast_mul_zero});
  out.push_back({"fast-sub-self", Op::Sub, true, fast_sub_self});
  out.push_back({"fast-add-zero", Op::Add, true, fast_add_zero});
  out.push_back({"fast-sub-zero", Op::Sub, true, fast_add_zero});
  out.push_back({"fast-mul-chain", Op::Mul, true, fast_mul_chain});
  out.push_back({"fast-add-chain", Op::Add, true, fast_add_chain});
  out.push_back({"fast-sub-chain", Op::Sub, true, fast_add_chain});
  out.push_back({"fast-silu", Op::Mul, true, fast_silu});
  out.push_back({"fast-pow-two", Op::Pow, true, fast_pow_two});
  out.push_back({"fast-div-const", Op::Div, true, fast_div_const});
}

}  // namespace fusejit::ir
