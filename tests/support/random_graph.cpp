#include "tests/support/random_graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "ir/reduce.h"
#include "ir/builder.h"
#include "ir/eval.h"
#include "ir/random_fill.h"

namespace fusejit::testing {
namespace {

// "x" + number without GCC 12's false -Wrestrict warning on operator+(const char*, string&&).
static std::string numbered(const char* prefix, long long k) {
  std::string s(prefix);
  s += std::to_string(k);
  return s;
}

using namespace fusejit::ir;

struct Rng {
  std::mt19937_64 e;
  explicit Rng(uint64_t s) : e(s) {}
  uint64_t u() { return e(); }
  int below(int n) { return static_cast<int>(u() % static_cast<uint64_t>(n)); }
  double unit() { return static_cast<double>(u() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }
  template <class T> const T& pick(const std::vector<T>& v) { return v[static_cast<size_t>(below(static_cast<int>(v.size())))]; }
};

const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

Literal flit(double v) { Literal l; l.cat = Category::Float; l.f = v; return l; }
Literal ilit(int64_t v) { Literal l; l.cat = Category::Int; l.i = v; return l; }
Literal blit(bool v) { Literal l; l.cat = Category::Bool; l.i = v; return l; }

Literal random_literal(Rng& r) {
  static const std::vector<double> fl = {0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0, -2.5, kInf, -kInf, kNan,
                                         1e30, 65504.0, 1e-40, 1e-3, 4.0, 0.25, 1e300};
  static const std::vector<int64_t> il = {0, 1, 2, -1, 3, 7, 127, -128, 255, 2147483647, -2147483648LL,
                                          std::numeric_limits<int64_t>::min(), 100000};
  int k = r.below(10);
  if (k < 5) return flit(r.pick(fl));
  if (k < 9) return ilit(r.pick(il));
  return blit(r.chance(0.5));
}

std::vector<DType> dtypes(const RandomGraphOptions& o) {
  std::vector<DType> t = {DType::F32, DType::F32, DType::F64};
  if (o.allow_half) { t.push_back(DType::F16); t.push_back(DType::BF16); }
  if (o.allow_int) { t.push_back(DType::I32); t.push_back(DType::I64); t.push_back(DType::I8); t.push_back(DType::U8); t.push_back(DType::Bool); }
  return t;
}

struct Gen {
  Rng r;
  const RandomGraphOptions& o;
  GraphBuilder b;
  std::vector<NodeId> pool;     // every node (leaves included)
  std::vector<NodeId> computed; // non-leaf nodes
  std::vector<char> seen;       // node id -> already in pool
  explicit Gen(const RandomGraphOptions& opt) : r(opt.seed), o(opt), b("random_" + std::to_string(opt.seed)) {}

  NodeId any() {
    // Prefer recent values so graphs grow deep as well as wide.
    if (pool.size() > 4 && r.chance(0.6)) return pool[pool.size() - 1 - static_cast<size_t>(r.below(4))];
    return r.pick(pool);
  }
  Operand operand() { return r.chance(o.literal_rate) ? Operand::of(random_literal(r)) : Operand::of(any()); }

  bool try_apply(Op op, std::vector<Operand> args) {
    bool strong = false;
    for (auto& a : args) strong |= !a.is_literal();
    if (!strong) args[0] = Operand::of(any());
    try {
      return apply_and_add(op, args);
    } catch (const UserError&) {
      // A float literal its operand's dtype cannot hold (x_f16 * 1e-40 rounds to 0) is refused;
      // as an f64 constant it converts by the cast rules, so the folding of such constants is
      // still generated.
      bool any_float = false;
      for (auto& a : args)
        if (a.is_literal() && a.lit.cat == Category::Float) {
          a = b.cast(a, DType::F64);
          any_float = true;
        }
      try {
        return any_float && apply_and_add(op, args);
      } catch (const UserError&) {
        return false;
      }
    }
  }
  bool apply_and_add(Op op, const std::vector<Operand>& args) {
    Operand res = b.apply(op, args);
    if (res.is_literal()) return false;
    add(res.node);
    return true;
  }
  void add(NodeId id) {
    if (static_cast<size_t>(id) >= seen.size()) seen.resize(static_cast<size_t>(id) + 1, 0);
    if (seen[static_cast<size_t>(id)]) return;
    seen[static_cast<size_t>(id)] = 1;
    pool.push_back(id);
    if (!is_leaf(b.graph().node(id).op)) computed.push_back(id);
  }
  bool try_cast(NodeId x, DType t) {
    try {
      add(b.cast(Operand::of(x), t).node);
      return true;
    } catch (const UserError&) {
      return false;
    }
  }

  // One rewrite-rule pattern on a random value.
  bool pattern() {
    NodeId x = any();
    Operand X = Operand::of(x);
    static const std::vector<double> mc = {2.0, 4.0, -2.0, 0.5, 1.0, 3.0, 1.5, -1.0, 0.25, 65536.0, 6.0, 1e-30, 1e30};
    switch (r.below(13)) {
      case 0: {
        if (!try_apply(Op::Mul, {X, Operand::of(flit(r.pick(mc)))})) return false;
        return try_apply(Op::Mul, {Operand::of(pool.back()), Operand::of(flit(r.pick(mc)))});
      }
      case 1: return try_apply(Op::Div, {X, Operand::of(flit(r.pick(mc)))});
      case 2: return try_apply(Op::Pow, {X, Operand::of(r.chance(0.5) ? ilit(2) : flit(2.0))});
      case 3: {
        if (!try_apply(Op::Neg, {X})) return false;
        return try_apply(Op::Neg, {Operand::of(pool.back())});
      }
      case 4: {
        static const std::vector<Op> ops = {Op::Mul, Op::Div, Op::Sub, Op::Add, Op::Add, Op::Mul, Op::Sub};
        static const std::vector<double> ks = {1.0, 1.0, 0.0, -0.0, 0.0, 0.0, 0.0};
        int k = r.below(static_cast<int>(ops.size()));
        Literal l = r.chance(0.5) && ks[static_cast<size_t>(k)] == 0.0 && !std::signbit(ks[static_cast<size_t>(k)]) ? ilit(0)
                    : ks[static_cast<size_t>(k)] == 1.0 && r.chance(0.5) ? ilit(1) : flit(ks[static_cast<size_t>(k)]);
        if (r.chance(0.3)) return try_apply(ops[static_cast<size_t>(k)], {Operand::of(l), X});
        return try_apply(ops[static_cast<size_t>(k)], {X, Operand::of(l)});
      }
      case 5: return try_apply(Op::Sub, {X, X});
      case 6: return try_apply(Op::Where, {Operand::of(blit(r.chance(0.5))), X, Operand::of(any())});
      case 7: {
        if (!try_apply(Op::Lt, {X, Operand::of(any())})) return false;
        if (!try_apply(Op::LogicalNot, {Operand::of(pool.back())})) return false;
        return try_apply(Op::LogicalNot, {Operand::of(pool.back())});
      }
      case 8: {
        DType w = r.pick(dtypes(o));
        if (!try_cast(x, w)) return false;
        return try_cast(pool.back(), b.graph().node(x).dtype);
      }
      case 9: {
        if (!try_apply(Op::Add, {X, Operand::of(random_literal(r))})) return false;
        const Literal l = random_literal(r);
        return try_apply(r.chance(0.5) ? Op::Sub : Op::Add, {Operand::of(pool.back()), Operand::of(l)});
      }
      case 10: {
        if (!try_apply(Op::Sigmoid, {X})) return false;
        return try_apply(Op::Mul, {X, Operand::of(pool.back())});
      }
      case 11: {
        // A math op whose operand is a literal on one path (issue 16: the host compiler could
        // fold the call there), or a binary math op with a literal operand.
        static const std::vector<Op> math = [] {  // every math-library op of ir/ops.def
          std::vector<Op> ops;
          for (int o = 0; o < kNumOps; ++o) {
            const OpInfo& info = op_info(static_cast<Op>(o));
            if ((info.gpu == OpAccuracy::Math || info.gpu == OpAccuracy::Composite) && info.arity <= 2)
              ops.push_back(static_cast<Op>(o));
          }
          return ops;
        }();
        const Op m = r.pick(math);
        if (op_arity(m) == 2) return try_apply(m, {X, Operand::of(random_literal(r))});
        if (!try_apply(Op::Where, {Operand::of(any()), Operand::of(random_literal(r)), X})) return false;
        return try_apply(m, {Operand::of(pool.back())});
      }
      default: return try_apply(Op::Where, {Operand::of(any()), X, X});
    }
  }

  // A reduction of a random value over a random set of axes (none listed: all), an argmax or
  // argmin over one axis or all, or a composite (softmax, log_softmax, logsumexp, var and std with
  // a correction of 0 to 2).
  bool random_reduction() {
    if (o.normalize_rate > 0 && r.chance(o.normalize_rate)) return normalize();
    const NodeId x = any();
    const int rank = static_cast<int>(b.graph().node(x).shape.size());
    std::vector<int64_t> axes;
    for (int d = 0; d < rank; ++d)
      if (r.chance(0.5)) axes.push_back(r.chance(0.5) ? d : d - rank);
    static const Op ops[] = {Op::Sum, Op::Mean, Op::Prod, Op::Amax, Op::Amin};
    try {
      const int pick = r.below(12);
      int64_t axis = 0;
      if (rank > 0) {
        const int64_t a = r.below(rank);
        axis = a - (r.chance(0.5) ? rank : 0);
      }
      const bool keep = r.chance(0.5);
      const int64_t correction = r.below(3);
      const std::vector<int64_t> one = rank > 0 && r.chance(0.7) ? std::vector<int64_t>{axis} : std::vector<int64_t>{};
      Operand res = pick < 5   ? b.reduce(ops[pick], Operand::of(x), axes, keep)
                    : pick >= 10 ? b.reduce(pick == 10 ? Op::Argmax : Op::Argmin, Operand::of(x), one, keep)
                    : pick == 5 ? b.softmax(Operand::of(x), axis)
                    : pick == 6 ? b.log_softmax(Operand::of(x), axis)
                    : pick == 7 ? b.logsumexp(Operand::of(x), axis, keep)
                                : b.var(Operand::of(x), axes, keep, correction, pick == 9);
      add(res.node);
      return true;
    } catch (const UserError&) {
      return false;
    }
  }

  // A costly value normalised by its own reduction over the innermost axis (normalize_rate).
  bool normalize() {
    static const Op fs[] = {Op::Exp, Op::Tanh, Op::Sigmoid, Op::Log1p, Op::Sqrt, Op::Reciprocal, Op::Erf};
    try {
      // One draw per statement: the order of a call's arguments differs between compilers.
      const Op f = fs[r.below(7)];
      const NodeId x = any();
      const Operand u = b.apply(f, std::vector<Operand>{Operand::of(x)});
      const int64_t last[] = {-1};
      const Op reduce = r.chance(0.5) ? Op::Sum : Op::Amax;
      const Operand red = b.reduce(reduce, u, last, true);
      const Op combine = r.chance(0.5) ? Op::Div : Op::Sub;
      add(b.apply(combine, std::vector<Operand>{u, red}).node);
      return true;
    } catch (const UserError&) {
      return false;
    }
  }

  // An integer-only row of ir/ops.def (domain Int or IntBool: bit operations, shifts) on integer
  // values (bool too for IntBool), the second operand often a shift count around the widths.
  // Drawn like the other ops, they would seldom meet only integer operands in a pool of mostly
  // floats.
  bool int_op(Op op) {
    if (!o.allow_int) return false;
    const bool with_bool = op_info(op).domain == OpDomain::IntBool;
    std::vector<NodeId> ints;
    for (NodeId id : pool) {
      const DType t = b.graph().node(id).dtype;
      if (is_int(t) || (with_bool && t == DType::Bool)) ints.push_back(id);
    }
    if (ints.empty() || r.chance(0.2)) {
      static const std::vector<DType> int_types = {DType::I8, DType::U8, DType::I32, DType::I64};
      const DType t = r.pick(int_types);
      if (!try_cast(any(), t)) return false;
      ints.push_back(pool.back());
    }
    std::vector<Operand> args = {Operand::of(r.pick(ints))};
    static const std::vector<int64_t> counts = {-1, 0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100};
    if (op_arity(op) == 2)
      args.push_back(r.chance(0.5) ? Operand::of(ilit(r.pick(counts))) : Operand::of(r.pick(ints)));
    return try_apply(op, args);
  }

  bool random_op() {
    if (r.chance(0.08)) {
      const DType t = r.pick(dtypes(o));
      return try_cast(any(), t);
    }
    if (r.chance(o.reduction_rate)) return random_reduction();
    Op op;  // any callable row of ir/ops.def (casts and reductions are drawn above)
    do op = static_cast<Op>(r.below(kNumOps));
    while (is_leaf(op) || op == Op::Cast || is_reduction(op));
    if (op_info(op).domain == OpDomain::Int || op_info(op).domain == OpDomain::IntBool) return int_op(op);
    std::vector<Operand> args;
    for (int k = 0; k < op_arity(op); ++k) args.push_back(operand());
    return try_apply(op, args);
  }

  Graph build() {
    int rank = r.below(o.max_rank + 1);
    bool named = rank > 0 && r.chance(0.5);
    // An axis of size 0 (zero_dim_rate; no draw at 0, so the other tests' graphs stay as they were).
    const int zero_at = o.zero_dim_rate > 0 && rank > 0 && r.chance(o.zero_dim_rate) ? r.below(rank) : -1;
    auto size = [&](int k) { return k == zero_at ? 0 : 1 + r.below(4); };
    if (named) b.add_dim("N", size(0));
    Shape base;
    for (int k = 0; k < rank; ++k) base.push_back({size(k), named && k == 0 ? 0 : -1});
    if (named) base[0].size = b.graph().dims[0].value;
    // A named dim of 1 that broadcasts like a literal 1 (`b : f32[2, S]` against `[2, 8]`, S = 1):
    // the kernels must not read it as a dim the input varies along.
    int one_sym = -1;
    if (rank > 0 && r.chance(0.3)) {
      b.add_dim("S", 1);
      one_sym = static_cast<int>(b.graph().dims.size()) - 1;
    }
    auto broadcast_one = [&]() { return one_sym >= 0 && r.chance(0.5) ? Dim{1, one_sym} : Dim{1, -1}; };
    int ni = 1 + r.below(o.max_inputs);
    std::vector<DType> ts = dtypes(o);
    for (int k = 0; k < ni; ++k) {
      Shape s;
      size_t drop = static_cast<size_t>(r.below(static_cast<int>(base.size()) + 1));
      if (k == 0) drop = 0;  // one input carries the full shape
      for (size_t d = drop; d < base.size(); ++d) s.push_back(k > 0 && r.chance(0.3) ? broadcast_one() : base[d]);
      add(b.add_input(numbered("in", k), r.pick(ts), s));
    }
    int np = r.below(o.max_params + 1);
    for (int k = 0; k < np; ++k) {
      DType t = r.pick(ts);
      Literal def = random_literal(r);
      try {
        check_literal_fits(def, t);
      } catch (const UserError&) {
        def = ilit(1);  // a default must fit the param's dtype
      }
      add(b.add_param(numbered("p", k), t, def));
    }
    for (int step = 0; step < o.num_ops; ++step) {
      for (int tries = 0; tries < 8; ++tries)
        if (r.chance(o.pattern_rate) ? pattern() : random_op()) break;
    }
    if (computed.empty()) {
      Operand a[2] = {Operand::of(pool[0]), Operand::of(ilit(1))};
      add(b.apply(Op::Add, a).node);
    }
    int nout = 1 + r.below(o.max_outputs);
    std::vector<NodeId> outs = {computed.back()};
    for (int k = 1; k < nout; ++k) outs.push_back(r.pick(computed));
    for (size_t k = 0; k < outs.size(); ++k) {
      if (r.chance(0.5) && b.graph().node(outs[k]).name.empty()) b.set_node_name(outs[k], numbered("t", k));
      b.add_output(numbered("out", k), Operand::of(outs[k]));
    }
    return b.finish();
  }
};

Scalar special_value(Rng& r, DType t) {
  Scalar s;
  s.dtype = DType::F64;
  if (is_float(t)) {
    double maxv = t == DType::F16 ? 65504.0 : t == DType::BF16 ? 3.3895313892515355e38 : t == DType::F32 ? 3.4028234663852886e38 : std::numeric_limits<double>::max();
    double sub = t == DType::F16 ? std::ldexp(1.0, -24) : t == DType::BF16 ? std::ldexp(1.0, -133) : t == DType::F32 ? std::ldexp(1.0, -149) : std::numeric_limits<double>::denorm_min();
    double minn = t == DType::F16 ? std::ldexp(1.0, -14) : t == DType::F64 ? std::numeric_limits<double>::min() : std::ldexp(1.0, -126);
    const double v[] = {kNan, kInf, -kInf, 0.0, -0.0, sub, -sub, 3 * sub, maxv, -maxv, minn, minn * 0.75, 1.0, -1.0, 0.5, 2.0};
    s.f = v[r.below(16)];
    return s;
  }
  s.dtype = DType::I64;
  if (t == DType::Bool) { s.i = r.below(2); return s; }
  int64_t lo = t == DType::I8 ? -128 : t == DType::U8 ? 0 : t == DType::I32 ? -2147483648LL : std::numeric_limits<int64_t>::min();
  int64_t hi = t == DType::I8 ? 127 : t == DType::U8 ? 255 : t == DType::I32 ? 2147483647LL : std::numeric_limits<int64_t>::max();
  const int64_t v[] = {lo, hi, 0, 1, -1, lo + 1, hi - 1, 2};
  s.i = v[r.below(8)];
  if (t == DType::U8 && s.i < 0) s.i = 255;
  return s;
}

Scalar ordinary_value(Rng& r, DType t) {
  Scalar s;
  if (is_float(t)) {
    s.dtype = DType::F64;
    s.f = (r.unit() * 16.0 - 8.0);
    if (r.chance(0.3)) s.f = std::round(s.f * 4) / 4;  // exact halves: ties and x - x == 0 cases
    return s;
  }
  s.dtype = DType::I64;
  s.i = t == DType::Bool ? r.below(2) : t == DType::U8 ? r.below(256) : r.below(41) - 20;
  return s;
}

Scalar to_dtype(const Scalar& s, DType t) {
  if (s.dtype == t) return s;
  Scalar a[1] = {s};
  return eval_scalar(Op::Cast, t, a);
}

}  // namespace

ir::Graph random_graph(const RandomGraphOptions& options) {
  Gen g(options);
  return g.build();
}

std::vector<ir::Tensor> random_inputs(const ir::Graph& g, uint64_t seed, double special_rate) {
  Rng r(seed * 0x9E3779B97F4A7C15ull + 7);
  std::vector<Tensor> out;
  for (NodeId id : g.inputs) {
    const Node& n = g.node(id);
    Tensor t(n.dtype, shape_sizes(n.shape));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (is_float(n.dtype) && r.chance(0.05)) {
        // Random bit patterns reach every exponent (NaN payloads and subnormals included).
        uint64_t bits = r.u();
        switch (n.dtype) {
          case DType::F16: case DType::BF16: t.as<uint16_t>()[i] = static_cast<uint16_t>(bits); break;
          case DType::F32: t.as<uint32_t>()[i] = static_cast<uint32_t>(bits); break;
          default: t.as<uint64_t>()[i] = bits; break;
        }
        continue;
      }
      Scalar v = r.chance(special_rate) ? special_value(r, n.dtype) : ordinary_value(r, n.dtype);
      t.set(i, to_dtype(v, n.dtype));
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<ir::Tensor> finite_inputs(const ir::Graph& g, uint64_t seed) {
  std::vector<Tensor> out;
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    const Node& n = g.node(g.inputs[k]);
    out.emplace_back(n.dtype, shape_sizes(n.shape));
    FillSpec spec;
    if (const ValueRange& range = g.input_ranges[k]; range.set()) spec.range = FillRange{range.lo, range.hi};
    random_fill(out.back(), seed++, spec);
  }
  return out;
}

std::vector<ir::Scalar> random_params(const ir::Graph& g, uint64_t seed) {
  Rng r(seed * 0xD1B54A32D192ED03ull + 11);
  std::vector<Scalar> out;
  for (const ParamDecl& p : g.params) {
    DType t = g.node(p.node).dtype;
    out.push_back(to_dtype(r.chance(0.4) ? special_value(r, t) : ordinary_value(r, t), t));
  }
  return out;
}

bool same_bits(const ir::Tensor& a, const ir::Tensor& b, std::string* why) {
  if (a.dtype != b.dtype || a.shape != b.shape) {
    if (why) *why = "type " + tensor_type_string(a.dtype, a.shape) + " vs " + tensor_type_string(b.dtype, b.shape);
    return false;
  }
  for (int64_t i = 0; i < a.numel(); ++i) {
    Scalar x = a.get(i), y = b.get(i);
    if (is_float(a.dtype) && std::isnan(x.f) && std::isnan(y.f)) continue;
    if (x.same_as(y)) continue;
    if (why) {
      char buf[160];
      if (is_float(a.dtype)) std::snprintf(buf, sizeof buf, "element %lld: %.17g vs %.17g", static_cast<long long>(i), x.f, y.f);
      else std::snprintf(buf, sizeof buf, "element %lld: %lld vs %lld", static_cast<long long>(i), static_cast<long long>(x.i), static_cast<long long>(y.i));
      *why = buf;
    }
    return false;
  }
  return true;
}

}  // namespace fusejit::testing
