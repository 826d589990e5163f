// GraphBuilder's reductions and the composites built from them (softmax, log_softmax, logsumexp);
// see ir/builder.h and ir/reduce.h.
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "ir/builder.h"
#include "ir/reduce.h"

namespace fusejit::ir {

NodeId GraphBuilder::add_reduce(Op op, DType dtype, NodeId arg, ReduceAttr red, Loc loc) {
  FJ_CHECK(is_reduction(op), "add_reduce: not a reduction");
  FJ_CHECK(arg >= 0 && arg < g_.size() && reduce_result_dtype(op, g_.node(arg).dtype) == dtype,
           "add_reduce: operand must have the compute dtype");
  const Shape& in = g_.node(arg).shape;
  FJ_CHECK(red.axes >> std::min<size_t>(in.size(), 63) == 0 || in.size() == 64, "add_reduce: axis beyond the rank");
  check_reduce_nonempty(op, in, g_.node(arg).dtype, red, "", loc);
  Node n;
  n.op = op;
  n.dtype = dtype;
  n.nargs = 1;
  n.args[0] = arg;
  n.red = red;
  n.shape = reduced_shape(in, red.axes, red.keepdim);
  check_value_bytes(g_, dtype, n.shape, loc);
  n.loc = loc;
  return push(std::move(n));
}

namespace {
// The parser's bound on a correction literal, so every built graph prints text that parses back.
void check_correction(std::string_view what, int64_t correction, Loc loc) {
  if (correction > GraphBuilder::kMaxCorrection)
    throw UserError(fmt::format("{}: correction={} is out of range (it is at most 2^62)", what, correction), loc);
}

// Whether a reduction of a `from` operand starts from `initial` (NumPy's initial=): only a float
// amax's -inf or amin's +inf, their identities, so the result differs from the plain reduction's
// only where that one has no elements. Throws UserError for any other op, dtype or value.
bool initial_flag(Op op, DType from, std::optional<double> initial, Loc loc) {
  if (!initial) return false;
  const std::string_view name = op_name(op);
  if (op != Op::Amax && op != Op::Amin)
    throw UserError(fmt::format("{}: initial= applies only to amax and amin", name), loc);
  if (!is_float(from))
    throw UserError(fmt::format("{} of {} values: initial={} needs a float dtype", name, dtype_name(from), *initial), loc);
  const double identity = op == Op::Amax ? -INFINITY : INFINITY;
  if (*initial != identity)
    throw UserError(fmt::format("{}: initial={} is not supported, only {}'s identity initial={} (a row of nothing gives "
                                "it); for another start value write {}({}(x, ...), VALUE)",
                                name, *initial, name, identity, op == Op::Amax ? "maximum" : "minimum", name),
                    loc);
  return true;
}
}  // namespace

Operand GraphBuilder::reduce(Op op, const Operand& x, std::span<const int64_t> axes, bool keepdim, Loc loc,
                             int64_t correction, std::optional<double> initial) {
  const NodeId in = materialize(x, loc);
  const Node& xn = g_.node(in);
  if (correction < 0 || (correction != 0 && op != Op::Mean))
    throw UserError(fmt::format("{}: correction={} {}", op_name(op), correction,
                                op == Op::Mean ? "is negative (it must be 0 or more)" : "applies only to mean, var and std"),
                    loc);
  check_correction(op_name(op), correction, loc);
  if (is_arg_reduction(op) && axes.size() > 1)
    throw UserError(fmt::format("{0} takes one axis or none (an index into the flattened tensor), as NumPy's and "
                                "PyTorch's do: {0}(x, -1) or {0}(x)",
                                op_name(op)),
                    loc);
  const ReduceAttr red{reduce_axes_mask(axes, xn.shape.size(), loc), keepdim, correction,
                       initial_flag(op, xn.dtype, initial, loc)};
  const DType from = xn.dtype;
  const DType ct = reduce_compute_dtype(op, from, loc);
  const NodeId arg = from == ct ? in : cast(Operand::of(in), ct, loc).node;
  const NodeId r = add_reduce(op, reduce_result_dtype(op, ct), arg, red, loc);
  const bool half = from == DType::F16 || from == DType::BF16;
  return half && !is_arg_reduction(op) ? cast(Operand::of(r), from, loc) : Operand::of(r);
}

namespace {

// The float dtype a composite of `x` computes in: f32 for f16/bf16 (rounded once at the end, as
// PyTorch's softmax and var kernels accumulate in f32); integer inputs are refused: PyTorch refuses
// them too, but for logsumexp, which computes in its default float dtype (fusejit picks none).
DType composite_dtype(const Node& x, const char* what, Loc loc) {
  if (!is_float(x.dtype))
    throw UserError(fmt::format("{} of {} values: {} needs a float dtype (cast it first{})", what, dtype_name(x.dtype),
                                what,
                                std::string_view(what) == "logsumexp"
                                    ? "; PyTorch computes an integer logsumexp in its default float dtype, fusejit "
                                      "has no default one"
                                    : ", as PyTorch requires"),
                    loc);
  return x.dtype == DType::F16 || x.dtype == DType::BF16 ? DType::F32 : x.dtype;
}

// The checks of the composites over one axis built on amax (softmax, log_softmax, logsumexp):
// a float tensor of rank >= 1 and a valid axis. An empty axis is fine: their amax starts from
// -inf (initial=-inf), so softmax of nothing is empty and logsumexp of nothing -inf, as PyTorch.
DType max_composite_dtype(const Node& x, int64_t axis, const char* what, Loc loc) {
  const DType ct = composite_dtype(x, what, loc);
  if (x.shape.empty()) throw UserError(fmt::format("{} needs a tensor of rank 1 or more, not a 0-d value", what), loc);
  const int64_t ax[1] = {axis};
  (void)reduce_axes_mask(ax, x.shape.size(), loc);
  return ct;
}

// The composites' max: amax(x, axis, keepdim, initial=-inf).
Operand composite_max(GraphBuilder& b, const Operand& x, int64_t axis, bool keepdim, Loc loc) {
  const int64_t ax[1] = {axis};
  return b.reduce(Op::Amax, x, ax, keepdim, loc, 0, -INFINITY);
}

}  // namespace

Operand GraphBuilder::softmax(const Operand& x, int64_t axis, Loc loc) {
  const NodeId in = materialize(x, loc);
  const DType from = g_.node(in).dtype, ct = max_composite_dtype(g_.node(in), axis, "softmax", loc);
  const Operand xc = from == ct ? Operand::of(in) : cast(Operand::of(in), ct, loc);
  const int64_t ax[1] = {axis};
  const Operand m = composite_max(*this, xc, axis, true, loc);
  const Operand d[2] = {xc, m};
  const Operand diff = apply(Op::Sub, d, loc);
  const Operand ex[1] = {diff};
  const Operand ev = apply(Op::Exp, ex, loc);
  const Operand q[2] = {ev, reduce(Op::Sum, ev, ax, true, loc)};
  const Operand y = apply(Op::Div, q, loc);
  return from == ct ? y : cast(y, from, loc);
}

Operand GraphBuilder::log_softmax(const Operand& x, int64_t axis, Loc loc) {
  const NodeId in = materialize(x, loc);
  const DType from = g_.node(in).dtype, ct = max_composite_dtype(g_.node(in), axis, "log_softmax", loc);
  const Operand xc = from == ct ? Operand::of(in) : cast(Operand::of(in), ct, loc);
  const int64_t ax[1] = {axis};
  const Operand d[2] = {xc, composite_max(*this, xc, axis, true, loc)};
  const Operand diff = apply(Op::Sub, d, loc);
  const Operand ex[1] = {diff};
  const Operand ev = apply(Op::Exp, ex, loc);
  const Operand s[1] = {reduce(Op::Sum, ev, ax, true, loc)};
  const Operand q[2] = {diff, apply(Op::Log, s, loc)};
  const Operand y = apply(Op::Sub, q, loc);
  return from == ct ? y : cast(y, from, loc);
}

Operand GraphBuilder::logsumexp(const Operand& x, int64_t axis, bool keepdim, Loc loc) {
  const NodeId in = materialize(x, loc);
  const DType from = g_.node(in).dtype, ct = max_composite_dtype(g_.node(in), axis, "logsumexp", loc);
  const Operand xc = from == ct ? Operand::of(in) : cast(Operand::of(in), ct, loc);
  const int64_t ax[1] = {axis};
  // torch.logsumexp: an infinite max is replaced by 0 both where it is subtracted and added.
  auto finite_max = [&](bool keep) {
    const Operand m = composite_max(*this, xc, axis, keep, loc);
    const Operand inf[1] = {m};
    Literal zero;
    zero.cat = Category::Float;
    const Operand w[3] = {apply(Op::IsInf, inf, loc), Operand::of(zero), m};
    return apply(Op::Where, w, loc);
  };
  const Operand d[2] = {xc, finite_max(true)};
  const Operand ex[1] = {apply(Op::Sub, d, loc)};
  const Operand s[1] = {reduce(Op::Sum, apply(Op::Exp, ex, loc), ax, keepdim, loc)};
  const Operand q[2] = {apply(Op::Log, s, loc), finite_max(keepdim)};
  const Operand y = apply(Op::Add, q, loc);
  return from == ct ? y : cast(y, from, loc);
}

Operand GraphBuilder::var(const Operand& x, std::span<const int64_t> axes, bool keepdim, int64_t correction, bool sd,
                          Loc loc) {
  const char* what = sd ? "std" : "var";
  const NodeId in = materialize(x, loc);
  const DType from = g_.node(in).dtype, ct = composite_dtype(g_.node(in), what, loc);
  if (correction < 0)
    throw UserError(fmt::format("{}: correction={} is negative (it must be 0 or more)", what, correction), loc);
  check_correction(what, correction, loc);
  const Operand xc = from == ct ? Operand::of(in) : cast(Operand::of(in), ct, loc);
  // Two passes: the mean, then the deviations from it (PyTorch uses Welford's update). The second pass
  // is the corrected two-pass form (Chan, Golub and LeVeque, "Algorithms for computing the sample
  // variance", 1983, eq. 1.7): sum(d*d) less sum(d)^2 / n, which removes the error the rounded mean
  // leaves (a constant row's var is 0; ill-conditioned data is as accurate as Welford's update).
  // As mean(d*d, c) - mean(d, 0) * mean(d, c); where that term is not finite (n <= c divides by
  // 0, a NaN or inf), the plain mean(d*d, c) as before; never below 0 (rounding).
  const Operand d[2] = {xc, reduce(Op::Mean, xc, axes, true, loc)};
  const Operand dev = apply(Op::Sub, d, loc);
  const Operand sq[2] = {dev, dev};
  const Operand m2 = reduce(Op::Mean, apply(Op::Mul, sq, loc), axes, keepdim, loc, correction);
  const Operand m0 = reduce(Op::Mean, dev, axes, keepdim, loc, 0);
  const Operand s[2] = {m0, correction == 0 ? m0 : reduce(Op::Mean, dev, axes, keepdim, loc, correction)};
  const Operand t[1] = {apply(Op::Mul, s, loc)};
  const Operand corrected[2] = {m2, t[0]};
  const Operand w[3] = {apply(Op::IsFinite, t, loc), apply(Op::Sub, corrected, loc), m2};
  Literal zero;
  zero.cat = Category::Float;
  const Operand clamp[2] = {apply(Op::Where, w, loc), Operand::of(zero)};
  Operand y = apply(Op::Maximum, clamp, loc);
  if (sd) {
    const Operand v[1] = {y};
    y = apply(Op::Sqrt, v, loc);
  }
  return from == ct ? y : cast(y, from, loc);
}

Operand GraphBuilder::any_all(const Operand& x, std::span<const int64_t> axes, bool keepdim, bool all, Loc loc) {
  const NodeId in = materialize(x, loc);
  Operand b = g_.node(in).dtype == DType::Bool ? Operand::of(in) : cast(Operand::of(in), DType::Bool, loc);
  if (all) {
    const Operand v[1] = {b};
    b = apply(Op::LogicalNot, v, loc);
  }
  Literal zero;
  zero.cat = Category::Int;
  const Operand q[2] = {reduce(Op::Sum, b, axes, keepdim, loc), Operand::of(zero)};
  return apply(all ? Op::Eq : Op::Ne, q, loc);
}

Operand GraphBuilder::reduce_by_name(std::string_view name, const Operand& x, const ReduceArgs& a, Loc loc) {
  const std::string n(name);
  const bool spread = name == "var" || name == "std";
  if (a.correction && !takes_correction(name))
    throw UserError(n + " takes no correction (only mean, var and std do)", loc);
  if (a.initial && name != "amax" && name != "amin")
    throw UserError(n + " takes no initial= (only amax and amin do" +
                        (is_composite_name(name) && !spread ? "; " + n + " over an empty axis needs none" : "") + ")",
                    loc);
  // A repeated or out-of-range axis points at the axes (a literal operand is 0-d: it has none).
  if (a.axes_loc.known()) (void)reduce_axes_mask(a.axes, x.is_literal() ? 0 : g_.node(x.node).shape.size(), a.axes_loc);
  // So does a bad initial value, at the value (an initial given to another op is the op's error).
  if (a.initial && a.initial_loc.known() && !x.is_literal() && (name == "amax" || name == "amin"))
    (void)initial_flag(name == "amax" ? Op::Amax : Op::Amin, g_.node(x.node).dtype, a.initial, a.initial_loc);
  if (spread) return var(x, a.axes, a.keepdim, a.correction.value_or(1), name == "std", loc);
  if (name == "any" || name == "all") return any_all(x, a.axes, a.keepdim, name == "all", loc);
  if (!is_composite_name(name)) {
    const std::optional<Op> op = parse_op(name);
    FJ_CHECK(op && is_reduction(*op), "reduce_by_name: not a reduction: " + n);
    return reduce(*op, x, a.axes, a.keepdim, loc, a.correction.value_or(0), a.initial);
  }
  if (a.axes.size() != 1 || (a.keepdim && name != "logsumexp"))
    throw UserError(n + " takes a value and one axis" + (name == "logsumexp" ? " and an optional keepdim" : "") +
                        ", e.g. " + n + "(x, -1)" +
                        (a.axes.size() == 1 ? "; no keepdim: its result has the shape of its input" : ""),
                    loc);
  if (name == "softmax") return softmax(x, a.axes[0], loc);
  if (name == "log_softmax") return log_softmax(x, a.axes[0], loc);
  return logsumexp(x, a.axes[0], a.keepdim, loc);
}

}  // namespace fusejit::ir
