// Strength reduction where it is exact.
#include <cmath>
#include <limits>

#include "ir/eval.h"
#include "ir/passes/rules.h"

namespace fusejit::ir {
namespace {

using namespace match;

// Smallest positive normal number of a float dtype.
double min_normal(DType t) {
  switch (t) {
    case DType::F16: return std::ldexp(1.0, -14);
    case DType::BF16:
    case DType::F32: return std::ldexp(1.0, -126);
    default: return std::numeric_limits<double>::min();
  }
}

// div(x, c) -> mul(x, 1/c) when c = +-2^k and 1/c is a normal number of the dtype: x/c and
// x*(1/c) are then the same real number, rounded once each (in f32 and then to the half type for
// f16/bf16), so they agree for every x, NaN, inf, zeros and subnormals included.
NodeId div_pow2(RewriteContext& ctx, const Candidate& n) {
  std::optional<Scalar> c = ctx.const_value(n.arg(1));
  if (!c || !is_float(n.dtype) || !is_pow2(*c)) return kNoNode;
  Scalar one = make(n.dtype, 1.0);
  Scalar v[2] = {one, *c};
  Scalar r = eval_scalar(Op::Div, n.dtype, v);
  if (!std::isfinite(r.f) || r.f * c->f != 1.0 || std::fabs(r.f) < min_normal(n.dtype)) return kNoNode;
  NodeId out = ctx.emit(Op::Mul, n.dtype, {n.arg(0), ctx.constant(r)});
  return fits(ctx, n, out) ? out : kNoNode;
}

// pow(x, 2) -> mul(x, x) for integers (square-and-multiply with wrapping is exactly x*x) and for
// f16/bf16: x has <= 11 significant bits, so x*x is exact in f32 and pow(x, 2) returns that same
// exact f32 value (it is representable, and powf's error is < 1 ulp); both are then rounded to
// the half type once. Tested exhaustively over all 2^16 values of each half type. Not for
// f32/f64 in strict mode: powf/pow are not correctly rounded, so a tie case may round differently
// from x*x (fast mode does it).
NodeId pow_two(RewriteContext& ctx, const Candidate& n) {
  std::optional<Scalar> c = ctx.const_value(n.arg(1));
  if (!c || !equals(*c, 2.0)) return kNoNode;
  if (!(is_int(n.dtype) || is_half(n.dtype))) return kNoNode;
  NodeId out = ctx.emit(Op::Mul, n.dtype, {n.arg(0), n.arg(0)});
  return fits(ctx, n, out) ? out : kNoNode;
}

}  // namespace

void add_strength_rules(std::vector<Rule>& out) {
  out.push_back({"div-pow2", Op::Div, false, div_pow2});
  out.push_back({"pow-two", Op::Pow, false, pow_two});
}

}  // namespace fusejit::ir
