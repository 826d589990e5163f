// Printer tests: parse(print(g)) is structurally equal to g and print is a fixed point, on every
// sample graph, on hand-written edge cases, and on random graphs built through the builder API.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>
#include <string>

#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "tests/support/random_graph.h"
#include "tests/support/files.h"

using namespace fusejit::ir;
namespace fs = std::filesystem;

namespace {
void check_round_trip(const Graph& g) {
  std::string text = print_graph(g);
  CAPTURE(text);
  Graph back = parse_graph(text, "printed.txt");
  CHECK(structurally_equal(g, back));
  CHECK(print_graph(back) == text);
}
void check_text_round_trip(const std::string& src) {
  CAPTURE(src);
  check_round_trip(parse_graph(src, "src.txt"));
}
// prefix + number (avoids a GCC 12 -Wrestrict false positive on "lit" + std::string).
std::string numbered(const char* prefix, int k) {
  std::string s = prefix;
  s += std::to_string(k);
  return s;
}
Scalar sf(DType t, double v) { Scalar s; s.dtype = t; s.f = v; return s; }
Scalar si(DType t, int64_t v) { Scalar s; s.dtype = t; s.i = v; return s; }
}  // namespace

TEST_CASE("every sample round-trips") {
  int count = 0;
  for (const fs::path& path : fusejit::testing::sample_graphs()) {
    ++count;
    CAPTURE(path.string());
    check_round_trip(parse_graph_file(path.string()));
  }
  CHECK(count >= 10);
}

TEST_CASE("printed text of a small graph") {
  Graph g = parse_graph("graph g\ndim N = 4\ninput x : i32[N, 2]\nparam a : f16 = 0.1\n"
                        "y = x * 2\nz = y + a\nw = z\noutput z, w\n",
                        "g.txt");
  CHECK(print_graph(g) ==
        "graph g\n"
        "dim N = 4\n"
        "input x : i32[N, 2]\n"
        "param a : f16 = 0.0999755859375\n"
        "y = x * 2\n"
        "%4 = cast(y, f16)\n"
        "z = %4 + a\n"
        "w = z\n"
        "output z, w\n");
}

TEST_CASE("edge cases round-trip") {
  const char* cases[] = {
      // Literals of every kind, inlined and as typed constants.
      "input x : f64[3]\ny = x * -0.0 + inf - -inf * nan\noutput y\n",
      "input x : f32[3]\ny = x * 0.1 + 1e-45 + 3.4028234663852886e38\noutput y\n",
      "input x : f64[3]\ny = x + 4.9406564584124654e-324 + 2.2250738585072014e-308\noutput y\n",
      "input x : i64[3]\ny = x + -9223372036854775808 - 9223372036854775807\noutput y\n",
      "input x : i8[3]\ny = x + 127\nz = x * cast(-128, i8)\noutput y, z\n",
      "input x : u8[3]\ny = x + 255\noutput y\n",
      "input x : bf16[3]\ny = x * 3.140625\nz = cast(1.5, bf16) + x\noutput y, z\n",
      "input x : f16[3]\ny = x * 65504.0 + 5.960464477539063e-08\noutput y\n",
      "input b : bool[3]\ny = logical_and(b, true)\nz = b + false\nw = logical_not(b)\noutput y, z, w\n",
      // Promotion: literal first, then a cast of the strong operand (const before cast).
      "input x : i32[3]\ny = 0.5 * x\noutput y\n",
      "input x : i32[3]\ny = x * 0.5\noutput y\n",
      "input x : f16[3]\ninput w : bf16[3]\ny = x + w\noutput y\n",
      "input x : i8[3]\ninput w : u8[3]\ny = x - w\nz = x / w\noutput y, z\n",
      // where with weak values and a weak condition, clamp with literal bounds.
      "input c : bool[3]\ninput x : f32[3]\ny = where(c, 1, 2)\nz = where(c, x, 0)\nw = where(true, x, x)\n"
      "v = where(c, 1.5, 2)\noutput y, z, w, v\n",
      "input x : i32[2, 3]\ny = clamp(x, -1, 1)\nz = clamp(cast(x, f32), 0, inf)\noutput y, z\n",
      // Named and aliased literals and constants, outputs in any order, repeated output lines.
      "c = 2\nd = c\ninput x : f32[4]\ny = x + c\noutput d\noutput y, c\n",
      "input x : f32[4]\nk = cast(2, i32)\ny = x * k\noutput y\noutput k\n",
      "input x : f32[4]\na = x * 2\nb = a\nc = b\noutput c, a, b\n",
      // Temporaries whose natural names are taken by user names.
      "input t1 : f32[4]\nt3 = exp(t1) + t1 * 2\nt2 = t3\noutput t2\n",
      // Every op, once.
      "input x : f32[2, 3]\ninput i : i32[3]\ninput b : bool[2, 1]\n"
      "u1 = neg(x) + abs(x) + exp(x) + exp2(x) + expm1(x) + log(x) + log2(x) + log10(x) + log1p(x)\n"
      "u2 = sqrt(x) + rsqrt(x) + reciprocal(x) + sin(x) + cos(x) + tan(x) + tanh(x) + sigmoid(x)\n"
      "u3 = relu(x) + gelu(x) + gelu_tanh(x) + silu(x) + softplus(x) + erf(x) + floor(x) + ceil(x)\n"
      "u4 = round(x) + trunc(x) + sign(x) + where(isnan(x), 1, 0) + where(isinf(i), 1, 0)\n"
      "b1 = logical_or(logical_not(b), logical_and(b, x > 0))\n"
      "b2 = ((x >= 1) == (x <= 2)) != (x < i)\n"
      "v1 = add(x, i) - sub(i, 1) * mul(x, 2) / div(i, 3) + pow(x, 2) + maximum(x, i) + minimum(i, 3)\n"
      "v2 = fmax(x, 1) + fmin(x, nan) + floordiv(i, 2) + mod(i, 3) + fmod(x, 2.5) + atan2(x, i)\n"
      "v3 = where(b, x, i) + clamp(x, 0, 1) + cast(i, f64)\n"
      "output u1, u2, u3, u4, b1, b2, v1, v2, v3\n",
      // 0-d tensors and broadcasting of every kind.
      "dim A = 3\ndim B = 1\ninput s : f32[]\ninput r : f32[A, 1]\ninput c : f32[1, A]\ninput q : f32[B, A]\n"
      "y = s + r + c + q\noutput y\n",
  };
  for (const char* src : cases) check_text_round_trip(src);
}

TEST_CASE("param defaults of every dtype round-trip") {
  check_text_round_trip(
      "param a : bool = true\nparam b : i8 = -128\nparam c : u8 = 255\nparam d : i32 = -2147483648\n"
      "param e : i64 = -9223372036854775808\nparam f : f16 = 0.1\nparam g : bf16 = 0.1\nparam h : f32 = -0.0\n"
      "param i : f64 = nan\nparam j : f32 = -inf\n"
      "y = a + b + c + d + e + f + g + h + i + j\noutput y\n");
}

TEST_CASE("print_scalar") {
  CHECK(print_scalar(sf(DType::F32, 2.0)) == "2.0");
  CHECK(print_scalar(sf(DType::F64, -0.0)) == "-0.0");
  CHECK(print_scalar(sf(DType::F64, 0.1)) == "0.1");
  CHECK(print_scalar(sf(DType::F32, static_cast<double>(0.1f))) == "0.1");
  CHECK(print_scalar(sf(DType::F64, std::numeric_limits<double>::infinity())) == "inf");
  CHECK(print_scalar(sf(DType::F64, -std::numeric_limits<double>::infinity())) == "-inf");
  CHECK(print_scalar(sf(DType::F64, std::numeric_limits<double>::quiet_NaN())) == "nan");
  CHECK(print_scalar(sf(DType::F64, -std::numeric_limits<double>::quiet_NaN())) == "-nan");
  CHECK(print_scalar(sf(DType::F64, 1e300)) == "1e+300");
  CHECK(print_scalar(si(DType::I64, std::numeric_limits<int64_t>::min())) == "-9223372036854775808");
  CHECK(print_scalar(si(DType::Bool, 1)) == "true");
}

TEST_CASE("API-built graphs with odd names still print parseable text") {
  GraphBuilder b("api");
  NodeId x = b.add_input("x", DType::F32, {{4, -1}});
  Operand args[2] = {Operand::of(x), Operand::of(b.constant(sf(DType::F32, 3.0)))};
  Operand y = b.apply(Op::Mul, args);
  b.set_node_name(y.node, "not an identifier");
  NodeId c = b.constant(si(DType::I32, 7));
  Operand args2[2] = {y, Operand::of(x)};
  Operand z = b.apply(Op::Add, args2);
  b.set_node_name(z.node, "out");  // the same name as an output of another node
  b.add_output("out", y);
  b.add_output("seven", Operand::of(c));
  b.add_output("z", z);
  Graph g = b.finish();
  std::string text = print_graph(g);
  CAPTURE(text);
  Graph back = parse_graph(text, "api.txt");
  REQUIRE(back.outputs.size() == 3);
  CHECK(back.node(back.outputs[1].node).value.i == 7);
  CHECK(back.node(back.outputs[0].node).op == Op::Mul);
  CHECK(back.node(back.outputs[2].node).op == Op::Add);
}

TEST_CASE("random graphs built through the API round-trip") {
  std::mt19937_64 rng(12345);
  const DType types[] = {DType::Bool, DType::I8,   DType::U8,  DType::I32, DType::I64,
                         DType::F16,  DType::BF16, DType::F32, DType::F64};
  const double specials[] = {0.0, -0.0, 1.0, -1.5, 0.1, 1e-310, 65504.0, 3.0e38, 1e300,
                             std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN()};
  const int64_t ispecials[] = {0, 1, -1, 127, -128, 255, 2147483647, std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max()};
  int built = 0;
  for (int iter = 0; iter < 300; ++iter) {
    GraphBuilder b("rnd");
    b.add_dim("N", 3);
    std::vector<Operand> pool;
    int n_in = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < n_in; ++k) {
      Shape s;
      if (rng() % 2) s.push_back({3, 0});
      if (rng() % 2) s.push_back({rng() % 2 ? 1 : 3, -1});
      pool.push_back(Operand::of(b.add_input(numbered("in", k), types[rng() % 9], s)));
    }
    if (rng() % 2) {
      Literal l; l.cat = Category::Float; l.f = specials[rng() % 12];
      const DType pt = types[rng() % 9];
      try {
        check_literal_fits(l, pt);
      } catch (const UserError&) {
        l.f = 1.0;  // a param default must fit its dtype
      }
      pool.push_back(Operand::of(b.add_param("p", pt, l)));
    }
    for (int step = 0; step < 12; ++step) {
      auto pick = [&]() -> Operand {
        uint64_t r = rng() % 10;
        Literal l;
        if (r == 0) { l.cat = Category::Float; l.f = specials[rng() % 12]; return Operand::of(l); }
        if (r == 1) { l.cat = Category::Int; l.i = ispecials[rng() % 9]; return Operand::of(l); }
        if (r == 2) { l.cat = Category::Bool; l.i = static_cast<int64_t>(rng() % 2); return Operand::of(l); }
        return pool[rng() % pool.size()];
      };
      try {
        if (rng() % 6 == 0) {
          pool.push_back(b.cast(pick(), types[rng() % 9]));
        } else {
          Op op;
          do op = static_cast<Op>(rng() % kNumOps); while (is_leaf(op) || op == Op::Cast);
          std::vector<Operand> args;
          for (int k = 0; k < op_arity(op); ++k) args.push_back(pick());
          Operand r = b.apply(op, args);
          if (!r.is_literal()) {
            if (rng() % 3 == 0) b.set_node_name(r.node, numbered("v", step));
            pool.push_back(r);
          }
        }
      } catch (const UserError&) {
        // e.g. neg of bool or a broadcast mismatch: skip this op.
      }
    }
    std::vector<NodeId> candidates;
    for (NodeId id = 0; id < b.graph().size(); ++id)
      if (b.graph().node(id).op != Op::Input && b.graph().node(id).op != Op::Param) candidates.push_back(id);
    if (candidates.empty()) continue;
    int n_out = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < n_out; ++k) b.add_output(numbered("o", k), Operand::of(candidates[rng() % candidates.size()]));
    Graph g = b.finish();
    ++built;
    check_round_trip(g);
  }
  CHECK(built > 200);
}

TEST_CASE("the shared random graph generator's graphs round-trip") {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    fusejit::testing::RandomGraphOptions opt;
    opt.seed = seed;
    Graph g = fusejit::testing::random_graph(opt);
    CAPTURE(seed);
    check_round_trip(g);
  }
}
