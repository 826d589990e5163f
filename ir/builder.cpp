#include "ir/builder.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "ir/eval.h"
#include "ir/random_fill.h"
#include "ir/reduce.h"
#include "ir/verify.h"

namespace fusejit::ir {
namespace {

bool mul_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

DType literal_dtype_alone(Category c) {
  // All-weak expressions are evaluated as Python would: in f64 / i64 / bool.
  return c == Category::Float ? DType::F64 : c == Category::Int ? DType::I64 : DType::Bool;
}

Literal scalar_to_literal(const Scalar& s, Loc loc) {
  Literal l;
  l.cat = dtype_category(s.dtype);
  if (l.cat == Category::Float) l.f = s.f;
  else l.i = s.i;
  l.loc = loc;
  return l;
}

// c10's combine_categories(higher, lower) for one pair of tiers (nullopt: the tier is empty).
std::optional<DType> combine_tiers(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower || is_float(*higher)) return higher;
  if (*higher == DType::Bool || is_float(*lower)) return promote(*higher, *lower);
  return higher;
}

// Ops that select one of their operands: on bool literals they stay bool, as Python's max/min do;
// every other op does arithmetic, where Python's bools are the ints 0 and 1.
bool selects(Op op) {
  return op == Op::Maximum || op == Op::Minimum || op == Op::Fmax || op == Op::Fmin || op == Op::Clamp ||
         op == Op::Where;
}

// True when an i64 fold of `op` on `v` wrapped, where Python's exact integers would not.
bool i64_fold_overflows(Op op, std::span<const Scalar> v) {
  int64_t r = 0;
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  switch (op) {
    case Op::Add: return __builtin_add_overflow(v[0].i, v[1].i, &r);
    case Op::Sub: return __builtin_sub_overflow(v[0].i, v[1].i, &r);
    case Op::Mul: return __builtin_mul_overflow(v[0].i, v[1].i, &r);
    case Op::Fma: return __builtin_mul_overflow(v[0].i, v[1].i, &r) || __builtin_add_overflow(r, v[2].i, &r);
    case Op::Neg: case Op::Abs: return v[0].i == kMin;
    case Op::FloorDiv: return v[0].i == kMin && v[1].i == -1;
    case Op::LeftShift: {  // Python: a << b == a * 2^b (a negative b raises there: the op's rule applies)
      const int64_t a = v[0].i, b = v[1].i;
      if (b <= 0 || a == 0) return false;
      if (b >= 63) return !(b == 63 && a == -1);
      const int64_t lim = int64_t{1} << (63 - b);
      return a < -lim || a >= lim;
    }
    case Op::Pow: {  // exponent >= 0 here (a negative one folds in f64)
      int64_t acc = 1;
      for (int64_t e = 0; e < v[1].i && acc != 0; ++e) {
        if (__builtin_mul_overflow(acc, v[0].i, &acc)) return true;
        if (acc == 1 || (acc == -1 && v[0].i == -1)) break;  // |base| <= 1: the rest cannot overflow
      }
      return false;
    }
    default: return false;
  }
}

// A Same-rule op on a promoted dtype outside its ir/ops.def domain is a user error asking for a cast.
void check_defined_on(Op op, DType common, Loc loc) {
  if (defined_on(op, common)) return;
  // NumPy refuses these two on bools too, pointing at the logical op the user likely meant.
  const bool bools = common == DType::Bool;
  const char* fix = bools && op == Op::Neg ? "negate a bool with logical_not (NumPy's ~), or cast to an integer type first"
                    : bools && op == Op::Sub ? "take a difference of bools with logical_xor (NumPy's ^), or cast to an integer type first"
                    : !is_float(common)                         ? "cast to an integer type first"
                    : op_info(op).domain == OpDomain::IntBool ? "it needs integer or bool operands"
                                                              : "it needs integer operands";
  throw UserError(std::string(op_name(op)) + " is not defined for " + std::string(dtype_name(common)) + " operands; " + fix,
                  loc);
}

}  // namespace

DType result_type(std::span<const TypedOperand> ops) {
  FJ_CHECK(!ops.empty(), "result_type of no operands");
  std::optional<DType> tier[3];
  for (const TypedOperand& o : ops) {
    std::optional<DType>& t = tier[static_cast<int>(o.tier)];
    t = t ? promote(*t, o.dtype) : o.dtype;
  }
  return *combine_tiers(tier[0], combine_tiers(tier[1], tier[2]));
}

// The float dtype to suggest when a literal overflows `t`.
std::string wider_float(DType t) { return t == DType::F32 ? "f64" : "f32"; }

std::string literal_text(const Literal& l) {
  if (l.cat == Category::Bool) return l.i ? "true" : "false";
  if (l.cat == Category::Int) return std::to_string(l.i);
  // The shortest text that reads back as l.f (1e+39, not 9.9999999999999994e+38), marked as a
  // float as Python's repr marks it: 1e6 is "1000000.0", not the integer 1000000.
  std::string text = fmt::format("{}", l.f);
  if (text.find_first_not_of("-0123456789") == std::string::npos) text += ".0";
  return text;
}

namespace {
// check_literal_fits for an operand of `op`; in a comparison the message says what NumPy 2 does
// instead (it compares an out-of-range integer by value; cast(300, u8) would compare with 44).
void check_operand_literal(Op op, TypeRule rule, const Literal& l, DType want, Loc loc) {
  if (rule == TypeRule::Compare && !is_float(want))
    if (const std::string why = literal_misfit(l, want); !why.empty())
      throw UserError(fmt::format("literal {} does not fit in {} ({}); NumPy 2 would compare it by value, fusejit "
                                  "refuses it: {} in a wider dtype (cast the tensor, e.g. to i64)",
                                  literal_text(l), dtype_name(want), why, op_name(op)),
                      l.loc.known() ? l.loc : loc);
  check_literal_fits(l, want, loc);
}
}  // namespace

std::string literal_misfit(const Literal& l, DType dtype) {
  if (dtype == DType::Bool) return "";
  if (is_float(dtype)) {
    const double v = l.cat == Category::Float ? l.f : static_cast<double>(l.i);
    return std::isfinite(v) && std::isinf(literal_to_scalar(l, dtype).f) ? "it would overflow to inf" : "";
  }
  int64_t lo = 0, hi = 0;
  switch (dtype) {
    case DType::I8: lo = -128; hi = 127; break;
    case DType::U8: lo = 0; hi = 255; break;
    case DType::I32: lo = std::numeric_limits<int32_t>::min(); hi = std::numeric_limits<int32_t>::max(); break;
    default: lo = std::numeric_limits<int64_t>::min(); hi = std::numeric_limits<int64_t>::max(); break;
  }
  // A float converts by truncation toward zero (the cast rules): -0.5 is 0 for a u8, 255.9 is 255.
  // (lo - 1.0 rounds to lo for i64, hence both tests at the low end.)
  const bool fits = l.cat == Category::Float
                        ? ((l.f >= static_cast<double>(lo) || l.f > static_cast<double>(lo) - 1.0) &&
                           l.f < static_cast<double>(hi) + 1.0)
                        : (l.cat == Category::Bool || (l.i >= lo && l.i <= hi));
  return fits ? "" : "range " + std::to_string(lo) + " to " + std::to_string(hi);
}

namespace {
// A nonzero float literal that rounds to 0 in `dtype` (x_f16 * 1e-8: all zeros): "it would round
// to 0", else "". For literals only: a param value set at a call that shrinks to 0 (a decaying
// rate) is its correctly rounded value.
std::string literal_vanishes(const Literal& l, DType dtype) {
  if (!is_float(dtype) || l.cat == Category::Bool) return "";
  const double v = l.cat == Category::Float ? l.f : static_cast<double>(l.i);
  return v != 0 && literal_to_scalar(l, dtype).f == 0 ? "it would round to 0" : "";
}

// Why literal `l` does not fit `dtype` (out of range, or a nonzero that would round to 0), or "".
std::string literal_problem(const Literal& l, DType dtype) {
  std::string why = literal_misfit(l, dtype);
  return why.empty() ? literal_vanishes(l, dtype) : why;
}
}  // namespace

void check_literal_fits(const Literal& l, DType dtype, Loc loc) {
  const std::string why = literal_problem(l, dtype);
  if (why.empty()) return;
  const std::string what = "literal " + literal_text(l) + " does not fit in " + std::string(dtype_name(dtype));
  const Loc at = l.loc.known() ? l.loc : loc;
  if (is_float(dtype)) throw UserError(what + " (" + why + "); use a wider dtype such as " + wider_float(dtype), at);
  throw UserError(what + " (" + why + "); use a wider dtype, or write cast(" + literal_text(l) + ", " +
                      std::string(dtype_name(dtype)) + ") to convert it by the cast rules",
                  at);
}

int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (const Dim& d : s) n *= d.size;
  return n;
}

bool element_count_overflows(const Shape& s) {
  int64_t n = 1;
  for (const Dim& d : s)
    if (d.size != 0 && mul_overflows(n, d.size, &n)) return true;
  return false;
}

std::string overflow_reason(const Shape& s) {
  if (std::none_of(s.begin(), s.end(), [](const Dim& d) { return d.size == 0; }))
    return "whose element count overflows 64 bits";
  return "whose non-zero sizes multiply past 2^63 - 1 (refused with a 0 among them too: strides and row counts "
         "come from the other sizes)";
}

std::string shape_to_string(const Shape& s, const Graph* g) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k) {
    if (k) out += ", ";
    if (s[k].sym >= 0 && g && static_cast<size_t>(s[k].sym) < g->dims.size())
      out += g->dims[static_cast<size_t>(s[k].sym)].name + "=";
    out += std::to_string(s[k].size);
  }
  return out + "]";
}

bool Scalar::same_as(const Scalar& o) const {
  if (dtype != o.dtype) return false;
  if (is_float(dtype)) {
    uint64_t a, b;
    __builtin_memcpy(&a, &f, 8);
    __builtin_memcpy(&b, &o.f, 8);
    return a == b;
  }
  return i == o.i;
}

int Graph::op_count() const {
  int n = 0;
  for (const Node& nd : nodes) n += is_leaf(nd.op) ? 0 : 1;
  return n;
}

Scalar literal_to_scalar(const Literal& l, DType dtype) {
  Scalar src;
  src.dtype = literal_dtype_alone(l.cat);
  if (l.cat == Category::Float) src.f = l.f;
  else src.i = l.i;
  if (src.dtype == dtype) return src;
  Scalar args[1] = {src};
  return eval_scalar(Op::Cast, dtype, args);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, Loc loc, const Graph* g) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    // Right-aligned: position k counts from the left of the longer shape.
    const Dim* da = k + a.size() >= rank ? &a[k + a.size() - rank] : nullptr;
    const Dim* db = k + b.size() >= rank ? &b[k + b.size() - rank] : nullptr;
    if (!da) { out[k] = *db; continue; }
    if (!db) { out[k] = *da; continue; }
    if (da->size == db->size) out[k] = da->sym >= 0 ? *da : *db;
    else if (da->size == 1) out[k] = *db;
    else if (db->size == 1) out[k] = *da;
    else
      throw UserError("shapes " + shape_to_string(a, g) + " and " + shape_to_string(b, g) +
                          " do not broadcast (dimension " + std::to_string(k) + ": " +
                          std::to_string(da->size) + " vs " + std::to_string(db->size) + ")",
                      loc);
  }
  if (element_count_overflows(out))
    throw UserError("broadcast shape " + shape_to_string(out, g) + " " + overflow_reason(out), loc);
  return out;
}

GraphBuilder::GraphBuilder(std::string graph_name, std::string file) {
  g_.name = std::move(graph_name);
  g_.file = std::move(file);
}

int32_t GraphBuilder::find_dim(const std::string& name) const {
  auto it = dim_index_.find(name);
  return it == dim_index_.end() ? -1 : it->second;
}

int32_t GraphBuilder::add_dim(const std::string& name, int64_t value, Loc loc) {
  if (find_dim(name) >= 0) throw UserError("dim '" + name + "' is declared twice", loc);
  if (value < 0) throw UserError("dim '" + name + "' must be >= 0, got " + std::to_string(value), loc);
  g_.dims.push_back({name, value, loc});
  dim_index_.emplace(name, static_cast<int32_t>(g_.dims.size() - 1));
  return static_cast<int32_t>(g_.dims.size() - 1);
}

NodeId GraphBuilder::push(Node n) {
  // A huge expression gives a located error instead of gigabytes of nodes (about 150 bytes each).
  if (limit_nodes_ && g_.nodes.size() >= kMaxGraphNodes)
    throw UserError("graph too large: more than " + std::to_string(kMaxGraphNodes) + " nodes (fusejit's limit)", n.loc);
  g_.nodes.push_back(std::move(n));
  return static_cast<NodeId>(g_.nodes.size() - 1);
}

NodeId GraphBuilder::add_input(const std::string& name, DType dtype, const Shape& shape, Loc loc) {
  Node n;
  n.op = Op::Input;
  n.dtype = dtype;
  n.shape = shape;
  for (Dim& d : n.shape) {  // every size first, so a message shows the whole shape
    if (d.sym < 0) continue;
    FJ_CHECK(static_cast<size_t>(d.sym) < g_.dims.size(), "input dim refers to an undeclared dim");
    d.size = g_.dims[static_cast<size_t>(d.sym)].value;
  }
  for (const Dim& d : n.shape)
    if (d.size < 0) throw UserError("input '" + name + "' has a negative dimension", loc);
  check_input_size(g_, name, n, loc);
  if (n.shape.size() > kMaxRank)
    throw UserError("input '" + name + "' has rank " + std::to_string(n.shape.size()) + "; at most " +
                        std::to_string(kMaxRank) + " dimensions are supported (as in NumPy)",
                    loc);
  n.slot = static_cast<int32_t>(g_.inputs.size());
  n.name = name;
  n.loc = loc;
  NodeId id = push(std::move(n));
  g_.inputs.push_back(id);
  g_.input_ranges.emplace_back();
  return id;
}

void GraphBuilder::set_input_range(NodeId input, double lo, double hi, Loc loc) {
  FJ_CHECK(input >= 0 && input < g_.size() && g_.node(input).op == Op::Input, "set_input_range on a non-input");
  const Node& n = g_.node(input);
  if (n.dtype == DType::Bool)
    throw UserError("input '" + n.name + "' is bool; random bools are false/true with equal odds and take no range", loc);
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi))
    throw UserError("a range needs finite LO < HI (e.g. `range 0:1`)", loc);
  try {
    check_fill_range(n.dtype, FillRange{lo, hi});
  } catch (const UserError& e) {
    throw UserError(e.what(), loc);  // the same rule as --range, located in the graph text
  }
  g_.input_ranges[static_cast<size_t>(n.slot)] = {lo, hi};
}

NodeId GraphBuilder::add_param(const std::string& name, DType dtype, const Literal& def, Loc loc) {
  // Named as the param's: a literal's advice, cast(300, u8), is no default (graph text refuses an
  // expression there; a C++ or Python default is a number).
  if (const std::string why = literal_problem(def, dtype); !why.empty())
    throw UserError("the default " + literal_text(def) + " of param '" + name + "' does not fit in " +
                        std::string(dtype_name(dtype)) + " (" + why + "); " +
                        (is_float(dtype) ? "give the param a wider dtype such as " + wider_float(dtype)
                                         : std::string("give a default in range, or the param a wider dtype")),
                    def.loc.known() ? def.loc : loc);
  Node n;
  n.op = Op::Param;
  n.dtype = dtype;
  n.slot = static_cast<int32_t>(g_.params.size());
  n.name = name;
  n.loc = loc;
  NodeId id = push(std::move(n));
  g_.params.push_back({id, literal_to_scalar(def, dtype)});
  return id;
}

NodeId GraphBuilder::constant(const Scalar& value, Loc loc) {
  Node n;
  n.op = Op::Const;
  n.dtype = value.dtype;
  n.value = value;
  n.loc = loc;
  return push(std::move(n));
}

NodeId GraphBuilder::materialize(const Operand& x, Loc loc) {
  if (!x.is_literal()) return x.node;
  // A named output `c = 1e300` or sum(1e300) in the default dtype f32: refused as x * 1e300 is
  // (it became inf silently: docs/ops.md, "A literal must fit the dtype it converts to").
  check_literal_fits(x.lit, default_dtype(x.lit.cat), loc);
  return constant(literal_to_scalar(x.lit, default_dtype(x.lit.cat)), loc);
}

namespace {
// A reduction without keepdim that value `id` is computed from elementwise, at its shape (through
// ops whose operands have that shape or are constants, breadth first, up to 64 values); kNoNode
// if none.
NodeId dropped_reduction(const Graph& g, NodeId id) {
  std::vector<NodeId> todo{id};
  for (size_t i = 0; i < todo.size() && i < 64; ++i) {
    const Node& n = g.node(todo[i]);
    if (is_reduction(n.op)) {
      if (!n.red.keepdim && n.red.axes != 0) return todo[i];
      continue;
    }
    for (int k = 0; k < n.nargs; ++k) {
      const NodeId a = n.arg(k);
      if (g.node(a).shape == n.shape && g.node(a).op != Op::Const && std::find(todo.begin(), todo.end(), a) == todo.end())
        todo.push_back(a);
    }
  }
  return kNoNode;
}
}  // namespace

// x - amax(x, -1), the commonest slip: the reduced axis is gone, so NumPy's right alignment no
// longer lines the rows up.
std::string keepdim_hint(const Graph& g, std::span<const NodeId> args) {
  for (NodeId a : args) {
    while (g.node(a).op == Op::Cast) a = g.node(a).arg(0);
    const Node& r = g.node(a);
    if (is_reduction(r.op) && !r.red.keepdim && r.red.axes != 0)
      return "; " + (r.name.empty() ? "the " + std::string(op_name(r.op)) + " result" : "'" + r.name + "'") +
             " has dropped its reduced axes: reduce with `keepdim` (NumPy's keepdims=True) to broadcast it back over "
             "them";
    // A value computed from such a reduction (std's sqrt of a mean, logsumexp's sum and max: named
    // by its line, as the composite the user wrote expands into other ops).
    if (const NodeId from = dropped_reduction(g, a); from != kNoNode)
      return "; " + (r.name.empty() ? std::string("an operand") : "'" + r.name + "'") +
             " comes from a reduction without `keepdim`" +
             (g.node(from).loc.known() ? " (on line " + std::to_string(g.node(from).loc.line) + ")" : std::string()) +
             ", whose reduced axes are gone: reduce with `keepdim` (NumPy's keepdims=True) to broadcast it back over "
             "them";
  }
  return "";
}

namespace {

// When shapes `a` and `b` do not broadcast and the shorter one's sizes are the longer one's
// leading sizes ([8] against [8, 100]: a value per row, meant to pair with the first axis), says
// that NumPy aligns shapes at their last dims; else "".
std::string alignment_hint(const Shape& a, const Shape& b, const Graph& g) {
  const Shape& s = a.size() < b.size() ? a : b;
  const Shape& l = a.size() < b.size() ? b : a;
  if (s.empty() || s.size() == l.size()) return "";
  for (size_t k = 0; k < s.size(); ++k)
    if (s[k].size != l[k].size) return "";
  return "; shapes align at their last dims (NumPy's rule), so " + shape_to_string(s, &g) +
         " is matched against the last dims of " + shape_to_string(l, &g) + ": to pair it with the first ones, give it " +
         (l.size() - s.size() == 1 ? std::string("a trailing dim") : std::to_string(l.size() - s.size()) + " trailing dims") +
         " of size 1 (declare the input so, or pass the array so: a[:, None] in NumPy, before the call of a fused "
         "function; or keep the reduced axes where it comes from a reduction: keepdim, NumPy's keepdims=True)";
}

// The hint for operands `args` whose shapes do not broadcast, the last against those before it
// (of shape `before`): a reduction without keepdim, else how shapes align.
std::string broadcast_hint(const Graph& g, std::span<const NodeId> args, const Shape& before) {
  std::string hint = keepdim_hint(g, args);
  return hint.empty() ? alignment_hint(before, g.node(args.back()).shape, g) : hint;
}

}  // namespace

Shape GraphBuilder::broadcast(const Shape& a, const Shape& b, Loc loc) const {
  return broadcast_shapes(a, b, loc, &g_);
}

NodeId GraphBuilder::add_typed(Op op, DType dtype, std::span<const NodeId> args, Loc loc) {
  FJ_CHECK(!is_leaf(op), "add_typed on a leaf op");
  FJ_CHECK(static_cast<int>(args.size()) == op_arity(op), "add_typed: wrong operand count");
  Node n;
  n.op = op;
  n.dtype = dtype;
  n.nargs = static_cast<uint8_t>(args.size());
  for (size_t k = 0; k < args.size(); ++k) {
    FJ_CHECK(args[k] >= 0 && args[k] < g_.size(), "add_typed: operand out of range");
    n.args[k] = args[k];
    try {
      n.shape = k == 0 ? g_.node(args[k]).shape : broadcast(n.shape, g_.node(args[k]).shape, loc);
    } catch (const UserError& e) {
      throw UserError(e.what() + broadcast_hint(g_, args.first(k + 1), n.shape), e.loc());
    }
  }
  check_value_bytes(g_, dtype, n.shape, loc);
  n.loc = loc;
  return push(std::move(n));
}

void check_input_size(const Graph& g, const std::string& name, const Node& n, Loc loc) {
  if (element_count_overflows(n.shape))
    throw UserError("input '" + name + "' has shape " + shape_to_string(n.shape, &g) + " " + overflow_reason(n.shape),
                    loc);
  int64_t bytes = 0;
  if (mul_overflows(num_elements(n.shape), dtype_size(n.dtype), &bytes))
    throw UserError("input '" + name + "' of shape " + shape_to_string(n.shape, &g) + " has 2^63 bytes or more", loc);
}

void check_value_bytes(const Graph& g, DType dtype, const Shape& shape, Loc loc) {
  int64_t bytes = 0;
  if (element_count_overflows(shape) || mul_overflows(num_elements(shape), dtype_size(dtype), &bytes))
    throw UserError("the " + std::string(dtype_name(dtype)) + " value of shape " + shape_to_string(shape, &g) +
                        " would have 2^63 bytes or more",
                    loc);
}

Operand GraphBuilder::cast(const Operand& x, DType to, Loc loc) {
  if (x.is_literal()) return Operand::of(constant(literal_to_scalar(x.lit, to), loc));
  NodeId args[1] = {x.node};
  return Operand::of(add_typed(Op::Cast, to, args, loc));
}

// pow(x, 2) -> mul(x, x), pow(x, 0.5) -> sqrt(x), pow(x, -1) -> reciprocal(x) for a literal
// exponent (a scalar) and a float result: what NumPy (its power loops' scalar fast paths, `x ** 2`
// and np.power alike) and PyTorch (ATen's pow with a Scalar exponent, CPU and CUDA) both compute,
// so the bits are theirs (C pow differs from x*x in the last bit, and pow(-inf, 0.5) is +inf where
// sqrt gives NaN). A tensor exponent keeps C pow, as theirs. x is cast to the float dtype first.
std::optional<Operand> GraphBuilder::scalar_pow(const Operand& x, const Operand& exponent, DType operand, Loc loc) {
  if (!exponent.is_literal() || exponent.lit.cat == Category::Bool) return std::nullopt;
  // Compared in the operand's dtype, as NumPy and PyTorch's CUDA kernel compare it (2.0000001 is 2 in f32).
  const double c = literal_to_scalar(exponent.lit, operand).f;
  if (c != 2.0 && c != 0.5 && c != -1.0) return std::nullopt;
  const Operand base = g_.node(x.node).dtype == operand ? x : cast(x, operand, loc);
  if (c == 2.0) {
    const Operand both[2] = {base, base};
    return apply(Op::Mul, both, loc);
  }
  const Operand one[1] = {base};
  return apply(c == 0.5 ? Op::Sqrt : Op::Reciprocal, one, loc);
}

Operand GraphBuilder::apply(Op op, std::span<const Operand> args, Loc loc) {
  const OpInfo& info = op_info(op);
  if (info.rule == TypeRule::Leaf || info.rule == TypeRule::Cast)
    throw UserError(std::string(info.name) + " cannot be applied like an op", loc);
  if (static_cast<int>(args.size()) != info.arity)
    throw UserError(std::string(info.name) + " takes " + std::to_string(info.arity) + " argument" +
                        (info.arity == 1 ? "" : "s") + ", got " + std::to_string(args.size()),
                    loc);

  if (info.rule == TypeRule::Reduce) return reduce(op, args[0], {}, false, loc);
  bool any_strong = false;
  for (const Operand& a : args) any_strong |= !a.is_literal();
  if (!any_strong) return fold_literals(op, args, loc);

  const DType common = common_dtype(op, args);
  check_defined_on(op, common, loc);
  const RuleDtypes rd = rule_dtypes(info.rule, common);
  const DType operand = rd.operand, result = rd.result;
  if (op == Op::Pow && is_float(result)) {
    if (std::optional<Operand> fast = scalar_pow(args[0], args[1], operand, loc)) return *fast;
  }
  return Operand::of(add_typed(op, result, operand_nodes(op, args, operand, loc), loc));
}

// The operands of `op` as nodes of the dtypes it takes: literals become constants of `operand`
// (a where's condition: bool), other dtypes are cast to it.
std::vector<NodeId> GraphBuilder::operand_nodes(Op op, std::span<const Operand> args, DType operand, Loc loc) {
  const TypeRule rule = op_info(op).rule;
  std::vector<NodeId> ids;
  for (size_t k = 0; k < args.size(); ++k) {
    const DType want = rule == TypeRule::Where && k == 0 ? DType::Bool : operand;
    if (rule == TypeRule::Pred) {
      ids.push_back(args[k].node);  // strong by construction (arity 1)
      continue;
    }
    if (args[k].is_literal()) check_operand_literal(op, rule, args[k].lit, want, loc);
    NodeId id = args[k].is_literal() ? constant(literal_to_scalar(args[k].lit, want), loc) : args[k].node;
    if (g_.node(id).dtype != want) {
      NodeId c[1] = {id};
      id = add_typed(Op::Cast, want, c, loc);
    }
    ids.push_back(id);
  }
  return ids;
}

DType GraphBuilder::common_dtype(Op op, std::span<const Operand> args) const {
  std::vector<TypedOperand> ops;
  for (size_t k = op_info(op).rule == TypeRule::Where ? 1 : 0; k < args.size(); ++k) {
    if (args[k].is_literal()) {
      ops.push_back({default_dtype(args[k].lit.cat), Tier::Weak});
    } else {
      const Node& n = g_.node(args[k].node);
      ops.push_back({n.dtype, n.shape.empty() ? Tier::ZeroDim : Tier::Dimensioned});
    }
  }
  return result_type(ops);
}

namespace {
// Python's int / int: the exact quotient rounded once to f64. Each operand converted to f64 first
// rounded twice beyond 2^53 (9007199254740993 / 3 gave ...330.5, Python ...331.0). The quotient
// of the operands scaled by 2^s has 56 bits or more; a nonzero remainder sets its last bit (sticky,
// below the rounding bit), so converting it rounds as the exact value does. nullopt: b == 0 (the
// op's own rule).
std::optional<double> exact_int_quotient(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  const bool negative = (a < 0) != (b < 0);
  const uint64_t ua = a < 0 ? 0 - static_cast<uint64_t>(a) : static_cast<uint64_t>(a);
  const uint64_t ub = b < 0 ? 0 - static_cast<uint64_t>(b) : static_cast<uint64_t>(b);
  if (ua == 0) return negative ? -0.0 : 0.0;  // Python: 0 / -3 == -0.0
  const int s = std::max(0, 56 + static_cast<int>(std::bit_width(ub)) - static_cast<int>(std::bit_width(ua)));
  const unsigned __int128 n = static_cast<unsigned __int128>(ua) << s;  // below 2^121
  uint64_t q = static_cast<uint64_t>(n / ub);
  if (n % ub != 0) q |= 1;
  const double r = std::ldexp(static_cast<double>(q), -s);
  return negative ? -r : r;
}
}  // namespace

Operand GraphBuilder::fold_literals(Op op, std::span<const Operand> args, Loc loc) const {
  if (op == Op::Div && args[0].lit.cat != Category::Float && args[1].lit.cat != Category::Float)
    if (const std::optional<double> q = exact_int_quotient(args[0].lit.i, args[1].lit.i))
      return Operand::of(scalar_to_literal(Scalar{DType::F64, *q, 0}, loc));
  const OpInfo& info = op_info(op);
  Category cat = Category::Bool;
  for (size_t k = info.rule == TypeRule::Where ? 1 : 0; k < args.size(); ++k) cat = std::max(cat, args[k].lit.cat);
  DType opnd = literal_dtype_alone(cat);
  // True + True == 2, but True & True is True: Python's & | ^ keep bools bool (and bitwise_not(true)
  // is false, as in NumPy and PyTorch; Python's ~True == -2 is deprecated since 3.12).
  if (opnd == DType::Bool && info.rule == TypeRule::Same && !selects(op) && info.domain != OpDomain::IntBool)
    opnd = DType::I64;
  if (op == Op::Pow && opnd == DType::I64 && args[1].lit.cat != Category::Float && args[1].lit.i < 0)
    opnd = DType::F64;  // Python: 2 ** -1 == 0.5
  if (info.rule == TypeRule::Same) check_defined_on(op, opnd, loc);
  DType result = opnd;
  switch (info.rule) {
    case TypeRule::Float: opnd = result = DType::F64; break;
    case TypeRule::Compare: case TypeRule::Logical: case TypeRule::Pred: result = DType::Bool; break;
    default: break;
  }
  std::vector<Scalar> vals;
  for (size_t k = 0; k < args.size(); ++k) {
    DType t = opnd;
    if (info.rule == TypeRule::Logical || (info.rule == TypeRule::Where && k == 0)) t = DType::Bool;
    if (info.rule == TypeRule::Pred) t = literal_dtype_alone(args[k].lit.cat);
    vals.push_back(literal_to_scalar(args[k].lit, t));
  }
  if (result == DType::I64 && i64_fold_overflows(op, vals)) {
    std::string call = std::string(info.name) + "(";
    for (size_t k = 0; k < args.size(); ++k) call += (k ? ", " : "") + literal_text(args[k].lit);
    // A shift takes no float; cast(1, i64) is a typed constant, shifted by the op's own rule.
    const std::string fix = op == Op::LeftShift ? "write cast(" + literal_text(args[0].lit) + ", i64) to drop the bits shifted out"
                                                : "write a float literal (2.0) to fold in f64";
    throw UserError(call + ") overflows i64: literals fold in i64 (Python's integers would not wrap); " + fix, loc);
  }
  return Operand::of(scalar_to_literal(eval_scalar(op, result, vals), loc));
}

Graph Graph::header() const {
  Graph h;
  h.name = name;
  h.file = file;
  h.traced_file = traced_file;
  h.dims = dims;
  return h;
}

GraphBuilder GraphBuilder::rebuilding(const Graph& from) {
  GraphBuilder b;
  b.g_ = from.header();
  for (size_t k = 0; k < b.g_.dims.size(); ++k) b.dim_index_.emplace(b.g_.dims[k].name, static_cast<int32_t>(k));
  return b;
}

NodeId GraphBuilder::copy_leaf(const Graph& from, NodeId leaf) {
  const Node& src = from.node(leaf);
  FJ_CHECK(is_leaf(src.op), "copy_leaf on a non-leaf");
  Node n = src;
  if (src.op == Op::Input) {
    n.slot = static_cast<int32_t>(g_.inputs.size());
    NodeId id = push(std::move(n));
    g_.inputs.push_back(id);
    g_.input_ranges.push_back(static_cast<size_t>(src.slot) < from.input_ranges.size()
                                  ? from.input_ranges[static_cast<size_t>(src.slot)]
                                  : ValueRange{});
    return id;
  }
  if (src.op == Op::Param) {
    n.slot = static_cast<int32_t>(g_.params.size());
    NodeId id = push(std::move(n));
    ParamDecl d = from.params[static_cast<size_t>(src.slot)];
    d.node = id;
    g_.params.push_back(d);
    return id;
  }
  return push(std::move(n));
}

void GraphBuilder::set_node_name(NodeId id, const std::string& name) { g_.node(id).name = name; }

void GraphBuilder::add_output(const std::string& name, const Operand& value, Loc loc) {
  NodeId id = materialize(value, loc);
  g_.outputs.push_back({name, id, loc});
}

Graph GraphBuilder::finish() {
  // The parser says so first, in graph-text words (`output y`): this one is for builders.
  if (g_.outputs.empty()) throw UserError("graph has no output; add one with output(), e.g. b.output(\"y\", v)", {});
  verify(g_);
  Graph out = std::move(g_);
  g_ = Graph{};
  dim_index_.clear();
  return out;
}

std::string unknown_dim_message(const Graph& g, const std::string& name, const std::string& where) {
  std::string declared;
  for (const DimDecl& d : g.dims) declared += (declared.empty() ? "" : ", ") + d.name;
  return "unknown dim '" + name + "'" + where + "; the graph declares " +
         (declared.empty() ? std::string("no dims") : "dims " + declared);
}

void rebind_dims(Graph& g, const std::vector<std::pair<std::string, int64_t>>& values) {
  for (const auto& [name, v] : values) {
    const std::string& wanted = name;  // clang 14 cannot capture a structured binding
    auto it = std::find_if(g.dims.begin(), g.dims.end(), [&](const DimDecl& d) { return d.name == wanted; });
    if (it == g.dims.end()) throw UserError(unknown_dim_message(g, name));
    if (v < 0) throw UserError("dim '" + name + "' must be >= 0, got " + std::to_string(v));
    it->value = v;
  }
  for (Node& n : g.nodes) {
    if (n.op == Op::Input) {
      for (Dim& d : n.shape)
        if (d.sym >= 0) d.size = g.dims[static_cast<size_t>(d.sym)].value;
      check_input_size(g, n.name, n, n.loc);  // after every size is set: the message shows them all
    } else if (is_reduction(n.op)) {
      const Shape& in = g.node(n.args[0]).shape;
      check_reduce_nonempty(n.op, in, g.node(n.args[0]).dtype, n.red, n.name.empty() ? "" : "'" + n.name + "'", n.loc);
      n.shape = reduced_shape(in, n.red.axes, n.red.keepdim);
      check_value_bytes(g, n.dtype, n.shape, n.loc);
    } else if (!is_leaf(n.op)) {
      Shape s = g.node(n.args[0]).shape;
      for (int k = 1; k < n.nargs; ++k) {
        try {
          s = broadcast_shapes(s, g.node(n.args[k]).shape, n.loc, &g);
        } catch (const UserError& e) {  // as the builder says it: the graph held at the dims it was written for
          throw UserError(e.what() + broadcast_hint(g, std::span(n.args).first(static_cast<size_t>(k) + 1), s), e.loc());
        }
      }
      n.shape = std::move(s);
      check_value_bytes(g, n.dtype, n.shape, n.loc);
    }
  }
}

bool structurally_equal(const Graph& a, const Graph& b) {
  if (a.name != b.name || a.dims.size() != b.dims.size() || a.nodes.size() != b.nodes.size() ||
      a.inputs != b.inputs || a.input_ranges != b.input_ranges || a.params.size() != b.params.size() ||
      a.outputs.size() != b.outputs.size())
    return false;
  for (size_t k = 0; k < a.dims.size(); ++k)
    if (a.dims[k].name != b.dims[k].name || a.dims[k].value != b.dims[k].value) return false;
  for (size_t k = 0; k < a.params.size(); ++k)
    if (a.params[k].node != b.params[k].node || !a.params[k].default_value.same_as(b.params[k].default_value))
      return false;
  for (size_t k = 0; k < a.outputs.size(); ++k)
    if (a.outputs[k].name != b.outputs[k].name || a.outputs[k].node != b.outputs[k].node) return false;
  for (size_t k = 0; k < a.nodes.size(); ++k) {
    const Node &x = a.nodes[k], &y = b.nodes[k];
    if (x.op != y.op || x.dtype != y.dtype || x.shape != y.shape || x.args != y.args || x.nargs != y.nargs ||
        x.slot != y.slot || x.name != y.name || x.red != y.red)
      return false;
    if (x.op == Op::Const && !x.value.same_as(y.value)) return false;
  }
  return true;
}

}  // namespace fusejit::ir
