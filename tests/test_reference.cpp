// The reference evaluator: broadcast patterns, per-node half rounding, params, error messages, and
// a differential check of random graphs against an independent per-element evaluation through
// eval_scalar (explicit index arithmetic, no shared loop code).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/reduce.h"
#include "ir/builder.h"
#include "ir/eval.h"
#include "ir/reference.h"
#include "ir/scalar/fj_scalar.h"
#include "ir/tensor.h"

using namespace fusejit::ir;

namespace {

Shape shp(std::vector<int64_t> s) {
  Shape out;
  for (int64_t d : s) out.push_back({d, -1});
  return out;
}

Tensor make(DType t, std::vector<int64_t> shape, std::vector<double> vals) {
  Tensor x(t, shape);
  REQUIRE(static_cast<int64_t>(vals.size()) == x.numel());
  for (size_t i = 0; i < vals.size(); ++i) {
    Scalar s;
    s.dtype = DType::F64;
    s.f = vals[i];
    x.set(static_cast<int64_t>(i), s);  // converted by the cast rules
  }
  return x;
}

std::vector<double> values(const Tensor& t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numel(); ++i) {
    Scalar s = t.get(i);
    out.push_back(is_float(s.dtype) ? s.f : static_cast<double>(s.i));
  }
  return out;
}

Operand lit_f(double v) { Literal l; l.cat = Category::Float; l.f = v; return Operand::of(l); }

bool same_bits(const Scalar& a, const Scalar& b) {
  if (a.dtype != b.dtype) return false;
  if (is_float(a.dtype)) return (std::isnan(a.f) && std::isnan(b.f)) || a.same_as(b);
  return a.i == b.i;
}

// Independent evaluation: every node as a full tensor, element by element through eval_scalar,
// with the broadcast index computed from the multi-index.
std::vector<Tensor> naive(const Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> v(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    std::vector<int64_t> shape = shape_sizes(n.shape);
    if (n.op == Op::Input) { v[i] = inputs[static_cast<size_t>(n.slot)]; continue; }
    Tensor t(n.dtype, shape);
    for (int64_t e = 0; e < t.numel(); ++e) {
      if (n.op == Op::Const) { t.set(e, n.value); continue; }
      if (n.op == Op::Param) { t.set(e, g.params[static_cast<size_t>(n.slot)].default_value); continue; }
      // multi-index of e
      std::vector<int64_t> idx(shape.size());
      int64_t r = e;
      for (size_t d = shape.size(); d-- > 0;) { idx[d] = r % shape[d]; r /= shape[d]; }
      std::vector<Scalar> args;
      for (int k = 0; k < n.nargs; ++k) {
        const Tensor& a = v[static_cast<size_t>(n.args[k])];
        int64_t off = 0;
        for (size_t j = 0; j < a.shape.size(); ++j) {
          size_t d = shape.size() - a.shape.size() + j;
          off = off * a.shape[j] + (a.shape[j] == 1 ? 0 : idx[d]);
        }
        args.push_back(a.get(off));
      }
      t.set(e, eval_scalar(n.op, n.dtype, args));
    }
    v[i] = std::move(t);
  }
  std::vector<Tensor> out;
  for (const OutputDecl& o : g.outputs) out.push_back(v[static_cast<size_t>(o.node)]);
  return out;
}

void check_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    REQUIRE(a[k].dtype == b[k].dtype);
    REQUIRE(a[k].shape == b[k].shape);
    for (int64_t i = 0; i < a[k].numel(); ++i) {
      Scalar x = a[k].get(i), y = b[k].get(i);
      if (!same_bits(x, y)) {
        FAIL_CHECK("output " << k << " element " << i << ": " << x.f << "/" << x.i << " vs " << y.f << "/" << y.i);
        return;
      }
    }
  }
}

}  // namespace

TEST_CASE("broadcast patterns") {
  struct Case { std::vector<int64_t> a, b, out; };
  const Case cases[] = {
      {{2, 3}, {3}, {2, 3}},         {{2, 3}, {2, 3}, {2, 3}},   {{2, 1}, {1, 3}, {2, 3}},
      {{4, 1, 3}, {2, 1}, {4, 2, 3}}, {{}, {2, 3}, {2, 3}},      {{1}, {5}, {5}},
      {{3, 1}, {3, 4}, {3, 4}},      {{0, 3}, {3}, {0, 3}},      {{2, 1, 1, 5}, {1, 3, 4, 1}, {2, 3, 4, 5}},
      {{1, 1}, {}, {1, 1}},          {{6}, {1, 1, 6}, {1, 1, 6}}, {{2, 3, 4}, {2, 1, 4}, {2, 3, 4}},
  };
  for (const Case& c : cases) {
    GraphBuilder b("bc");
    NodeId x = b.add_input("x", DType::F32, shp(c.a));
    NodeId y = b.add_input("y", DType::I32, shp(c.b));
    Operand args[2] = {Operand::of(x), Operand::of(y)};
    Operand s = b.apply(Op::Sub, args);
    b.add_output("s", s);
    Graph g = b.finish();
    Tensor tx(DType::F32, c.a), ty(DType::I32, c.b);
    for (int64_t i = 0; i < tx.numel(); ++i) tx.set(i, Scalar{DType::F64, 100.0 * i, 0});
    for (int64_t i = 0; i < ty.numel(); ++i) ty.set(i, Scalar{DType::I64, 0, i});
    std::vector<Tensor> in = {tx, ty};
    std::vector<Tensor> out = evaluate_reference(g, in);
    REQUIRE(out.size() == 1);
    CHECK(out[0].shape == c.out);
    CHECK(out[0].dtype == DType::F32);
    check_equal(out, naive(g, in));
  }
  // A hand-computed case: [2,1] - [1,3].
  GraphBuilder b("hand");
  NodeId x = b.add_input("x", DType::F32, shp({2, 1}));
  NodeId y = b.add_input("y", DType::F32, shp({1, 3}));
  Operand args[2] = {Operand::of(x), Operand::of(y)};
  b.add_output("d", b.apply(Op::Sub, args));
  Graph g = b.finish();
  std::vector<Tensor> in = {make(DType::F32, {2, 1}, {10, 20}), make(DType::F32, {1, 3}, {1, 2, 3})};
  CHECK(values(evaluate_reference(g, in)[0]) == std::vector<double>{9, 8, 7, 19, 18, 17});
}

TEST_CASE("a node no output depends on is not computed (a dead 10^10-element product beside a small sum)") {
  GraphBuilder b("dead");
  NodeId x = b.add_input("x", DType::F32, shp({100000, 1}));
  NodeId y = b.add_input("y", DType::F32, shp({100000}));
  Operand xy[2] = {Operand::of(x), Operand::of(y)};
  (void)b.apply(Op::Mul, xy);  // [100000, 100000] f32: 40 GB, never needed
  ReduceAttr over0;
  over0.axes = 1;  // axis 0
  Operand s = Operand::of(b.add_reduce(Op::Sum, DType::F32, x, over0));
  b.add_output("s", s);
  Graph g = b.finish();
  Tensor tx(DType::F32, {100000, 1}), ty(DType::F32, {100000});
  for (int64_t i = 0; i < tx.numel(); ++i) tx.set(i, Scalar{DType::F64, 1.0, 0});
  std::vector<Tensor> in = {tx, ty};
  const std::vector<Tensor> out = evaluate_reference(g, in);
  REQUIRE(out.size() == 1);
  CHECK(out[0].get(0).f == 100000.0);
}

TEST_CASE("f16 and bf16 are rounded on every node") {
  GraphBuilder b("half");
  NodeId x = b.add_input("x", DType::F16, shp({3}));
  Operand xs = Operand::of(x);
  // y = x * 2 - x: with per-node rounding 65504 * 2 overflows to inf first.
  Operand two[2] = {xs, lit_f(2)};
  Operand x2 = b.apply(Op::Mul, two);
  Operand sub[2] = {x2, xs};
  b.add_output("y", b.apply(Op::Sub, sub));
  // z = (x + 2^-11) + 2^-11: each add rounds back to x for x = 1.
  Operand a1[2] = {xs, lit_f(std::ldexp(1.0, -11))};
  Operand t = b.apply(Op::Add, a1);
  Operand a2[2] = {t, lit_f(std::ldexp(1.0, -11))};
  b.add_output("z", b.apply(Op::Add, a2));
  NodeId h = b.add_input("h", DType::BF16, shp({1}));
  Operand hs[2] = {Operand::of(h), lit_f(std::ldexp(1.0, -8))};
  Operand h1 = b.apply(Op::Add, hs);
  Operand hs2[2] = {h1, lit_f(std::ldexp(1.0, -8))};
  b.add_output("w", b.apply(Op::Add, hs2));
  Graph g = b.finish();
  std::vector<Tensor> in = {make(DType::F16, {3}, {65504, 1, -0.0}), make(DType::BF16, {1}, {1})};
  std::vector<Tensor> out = evaluate_reference(g, in);
  std::vector<double> y = values(out[0]), z = values(out[1]), w = values(out[2]);
  CHECK(std::isinf(y[0]));
  CHECK(y[1] == 1.0);
  CHECK(y[2] == 0.0);
  CHECK(z[0] == 65504.0);
  CHECK(z[1] == 1.0);
  CHECK(w[0] == 1.0);
  check_equal(out, naive(g, in));
}

TEST_CASE("params: defaults and overrides; consts; duplicate outputs") {
  GraphBuilder b("p");
  NodeId x = b.add_input("x", DType::F32, shp({4}));
  Literal def; def.cat = Category::Float; def.f = 0.5;
  NodeId alpha = b.add_param("alpha", DType::F32, def);
  Operand m[2] = {Operand::of(x), Operand::of(alpha)};
  Operand y = b.apply(Op::Mul, m);
  b.add_output("y", y);
  b.add_output("y2", y);
  b.add_output("c", lit_f(3.0));
  Graph g = b.finish();
  std::vector<Tensor> in = {make(DType::F32, {4}, {1, 2, -4, 1e30})};
  std::vector<Tensor> out = evaluate_reference(g, in);
  CHECK(values(out[0]) == std::vector<double>{0.5, 1, -2, static_cast<double>(1e30f * 0.5f)});
  CHECK(values(out[1]) == values(out[0]));
  CHECK(values(out[2]) == std::vector<double>{3.0});
  CHECK(out[2].shape.empty());
  Scalar p{DType::F32, -2.0, 0};
  std::vector<Scalar> ps = {p};
  out = evaluate_reference(g, in, ps);
  CHECK(values(out[0]) == std::vector<double>{-2, -4, 8, static_cast<double>(1e30f * -2.0f)});
  Scalar bad{DType::F64, 1.0, 0};
  std::vector<Scalar> bads = {bad};
  CHECK_THROWS_WITH_AS(evaluate_reference(g, in, bads), "param 'alpha': expected a f32 value, found f64", UserError);
  std::vector<Scalar> two = {p, p};
  CHECK_THROWS_WITH_AS(evaluate_reference(g, in, two), "graph 'p' has 1 param(s), got 2", UserError);
}

TEST_CASE("input errors name the input, the expected and the found type") {
  GraphBuilder b("e");
  NodeId x = b.add_input("x", DType::F32, shp({2, 3}));
  Operand a[1] = {Operand::of(x)};
  b.add_output("y", b.apply(Op::Exp, a));
  Graph g = b.finish();
  std::vector<Tensor> wrong_dtype = {Tensor(DType::F16, {2, 3})};
  CHECK_THROWS_WITH_AS(evaluate_reference(g, wrong_dtype), "input 'x': expected f32[2, 3], found f16[2, 3]", UserError);
  std::vector<Tensor> wrong_shape = {Tensor(DType::F32, {3, 2})};
  CHECK_THROWS_WITH_AS(evaluate_reference(g, wrong_shape), "input 'x': expected f32[2, 3], found f32[3, 2]", UserError);
  std::vector<Tensor> none;
  CHECK_THROWS_WITH_AS(evaluate_reference(g, none), "graph 'e' has 1 input(s), got 0", UserError);
  Tensor torn(DType::F32, {2, 3});
  torn.data.resize(7);
  std::vector<Tensor> bad_storage = {torn};
  CHECK_THROWS_WITH_AS(evaluate_reference(g, bad_storage),
                       "input 'x': storage of 7 bytes does not match its type f32[2, 3]", UserError);
  CHECK_THROWS_AS(Tensor(DType::F64, {int64_t{1} << 40, int64_t{1} << 30}), UserError);
  CHECK_THROWS_AS(Tensor(DType::F32, {-1}), UserError);
}

TEST_CASE("bool inputs with bytes other than 0/1 read as true") {
  GraphBuilder b("b");
  NodeId c = b.add_input("c", DType::Bool, shp({3}));
  Operand a[1] = {Operand::of(c)};
  b.add_output("n", b.apply(Op::LogicalNot, a));
  Graph g = b.finish();
  Tensor t(DType::Bool, {3});
  t.data[0] = std::byte{0};
  t.data[1] = std::byte{1};
  t.data[2] = std::byte{7};
  std::vector<Tensor> in = {t};
  CHECK(values(evaluate_reference(g, in)[0]) == std::vector<double>{1, 0, 0});
}

TEST_CASE("random graphs agree with the per-element eval_scalar evaluation") {
  std::mt19937_64 rng(12345);  // test-only randomness; fixed seed
  const DType dtypes[] = {DType::Bool, DType::I8, DType::U8, DType::I32, DType::I64,
                          DType::F16, DType::BF16, DType::F32, DType::F64};
  const double specials[] = {0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e-40, -1e-310, 65504.0, 70000.0, 1e30,
                             -1e300, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN(), 127.0, -128.0, 255.0, 2147483647.0,
                             -2147483648.0, 9.3e18, 7.0, -7.0};
  int graphs = 0, nodes = 0;
  for (int round = 0; round < 60; ++round) {
    GraphBuilder b("rnd");
    std::vector<std::vector<int64_t>> shapes = {{3, 4}, {4}, {3, 1}, {}, {1, 4}};
    std::vector<Operand> pool;
    std::vector<Tensor> in;
    for (int k = 0; k < 4; ++k) {
      DType t = dtypes[rng() % 9];
      std::vector<int64_t> s = shapes[rng() % shapes.size()];
      pool.push_back(Operand::of(b.add_input("x" + std::to_string(k), t, shp(s))));
      Tensor x(t, s);
      for (int64_t i = 0; i < x.numel(); ++i) x.set(i, Scalar{DType::F64, specials[rng() % std::size(specials)], 0});
      in.push_back(std::move(x));
    }
    for (int step = 0; step < 12; ++step) {
      Op op = static_cast<Op>(rng() % kNumOps);
      if (is_leaf(op) || is_reduction(op)) continue;  // element-wise oracle only
      try {
        if (op == Op::Cast) {
          const Operand from = pool[rng() % pool.size()];  // draws in order, whatever the compiler
          pool.push_back(b.cast(from, dtypes[rng() % 9]));
        } else {
          std::vector<Operand> args;
          for (int k = 0; k < op_arity(op); ++k) args.push_back(pool[rng() % pool.size()]);
          pool.push_back(b.apply(op, args));
        }
      } catch (const UserError&) {
        // e.g. neg of bool: not a valid graph; try another op
      }
    }
    int outs = 0;
    for (size_t k = 4; k < pool.size(); ++k)
      if (!pool[k].is_literal() && rng() % 2 == 0) b.add_output("o" + std::to_string(outs++), pool[k]);
    if (outs == 0) b.add_output("last", pool.back());
    Graph g = b.finish();
    ++graphs;
    nodes += g.op_count();
    std::vector<Tensor> ref = evaluate_reference(g, in);
    check_equal(ref, naive(g, in));
  }
  CHECK(graphs == 60);
  CHECK(nodes > 300);
}

TEST_CASE("reasonably fast on a million-element broadcast chain") {
  GraphBuilder b("big");
  NodeId x = b.add_input("x", DType::F32, shp({1000, 1000}));
  NodeId bias = b.add_input("bias", DType::F16, shp({1000}));
  Operand a[2] = {Operand::of(x), Operand::of(bias)};
  Operand s = b.apply(Op::Add, a);
  Operand g1[1] = {s};
  Operand y = b.apply(Op::GeluTanh, g1);
  b.add_output("y", y);
  Graph g = b.finish();
  Tensor tx(DType::F32, {1000, 1000});
  for (int64_t i = 0; i < tx.numel(); ++i) tx.as<float>()[i] = static_cast<float>(i % 977) * 0.01f - 4.0f;
  Tensor tb(DType::F16, {1000});
  std::vector<Tensor> in = {tx, tb};
  std::vector<Tensor> out = evaluate_reference(g, in);
  CHECK(out[0].numel() == 1000000);
  CHECK(out[0].get(999999).f == static_cast<double>(out[0].as<float>()[999999]));
}

// Outputs of 2^21 elements and more are evaluated in blocks of rows on several threads: rows with
// three broadcast operands (a row mask, a full matrix, a column vector), odd sizes so blocks start
// mid-way through the outer counter, every element equal to a direct loop over the fj_ functions.
TEST_CASE("multi-threaded rows give the same values as a direct loop") {
  const int64_t R = 2053, C = 1031;  // 2,116,643 elements: at least two blocks
  GraphBuilder b("rows");
  NodeId mask = b.add_input("mask", DType::Bool, shp({R, 1}));
  NodeId x = b.add_input("x", DType::F32, shp({R, C}));
  NodeId bias = b.add_input("bias", DType::F16, shp({C}));
  Operand m[2] = {Operand::of(x), Operand::of(bias)};
  Operand prod = b.apply(Op::Mul, m);
  Operand p1[2] = {Operand::of(x), lit_f(1.0)};
  Operand plus = b.apply(Op::Add, p1);
  Operand w[3] = {Operand::of(mask), prod, plus};
  b.add_output("y", b.apply(Op::Where, w));
  Graph g = b.finish();
  Tensor tm(DType::Bool, {R, 1}), tx(DType::F32, {R, C}), tb(DType::F16, {C});
  for (int64_t i = 0; i < R; ++i) tm.as<unsigned char>()[i] = static_cast<unsigned char>((i * 7) % 3 == 0);
  for (int64_t i = 0; i < R * C; ++i) tx.as<float>()[i] = static_cast<float>((i * 2654435761u) % 20011) * 0.001f - 10.0f;
  for (int64_t j = 0; j < C; ++j) tb.as<fj_f16>()[j] = fj_store_f16(static_cast<float>(j % 97) * 0.125f - 6.0f);
  std::vector<Tensor> in = {tm, tx, tb};
  std::vector<Tensor> out = evaluate_reference(g, in);
  REQUIRE(out[0].numel() == R * C);
  int64_t bad = 0;
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) {
      const float xv = tx.as<float>()[i * C + j];
      const float want = tm.as<unsigned char>()[i] ? fj_mul(xv, fj_load(tb.as<fj_f16>()[j])) : fj_add(xv, 1.0f);
      const float got = out[0].as<float>()[i * C + j];
      if (std::memcmp(&want, &got, 4) != 0 && bad++ < 3) FAIL_CHECK("element [" << i << ", " << j << "]: " << got << " vs " << want);
    }
  CHECK(bad == 0);
}
