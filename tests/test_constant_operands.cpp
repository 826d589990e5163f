// A math call must give the same bits whether its operand is a run-time value or a constant the
// host compiler can see (issue 16): at -O2 (this file's level; the CPU path's is -O1) GCC folds a libm
// call on a constant with its own correctly rounded arithmetic and clang through the host's
// double functions, while the reference and the unfused kernels call the C library at run time.
// For every math op and float dtype, each edge value is given three ways -- a typed constant
// (inlined into the kernel), a `where` whose other branch is an input (the constant is visible on
// one path), and a run-time input -- and fused, unfused and reference must agree bit for bit,
// with each other and across the three forms; the strictly rewritten graph (constant folding by
// eval_scalar) must give the same bits too. The case over every op checks the fused kernels
// only: they hold every constant form (a constant operand is inlined into the kernel, as in an
// unfused one), while the unfused program is one kernel per node, ~90% of the host code, and
// compiling it at -O2 was ~400 s of CPU per run; the random graph below checks both.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/eval.h"
#include "ir/parser.h"
#include "ir/passes/rewrite.h"
#include "ir/reference.h"
#include "tests/support/cpu_check.h"
#include "tests/support/random_graph.h"

using namespace fusejit;
using ir::DType;
using ir::Op;

namespace {

// The host compile options of this file's modules: -O2 (see the first TEST_CASE).
jit::HostCompileOptions o2() {
  jit::HostCompileOptions o;
  o.opt_level = "-O2";
  return o;
}

const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

// The ops checked, from ir/ops.def: every float-rule op (the math library calls of fj_scalar.h's
// FJ_LIBM1/2, and formulas over them), and the same-rule ops on floats that are not exact IEEE
// operations (pow; floor, round, mod, ... call the C library). A new row is covered by its arity.
bool checked(Op op) {
  const ir::OpInfo& info = ir::op_info(op);
  if (info.rule == ir::TypeRule::Float) return true;
  return info.rule == ir::TypeRule::Same && ir::defined_on(op, DType::F32) && info.gpu != ir::OpAccuracy::Exact;
}
std::vector<Op> math_ops(int arity) {
  std::vector<Op> ops;
  for (int o = 0; o < ir::kNumOps; ++o)
    if (checked(static_cast<Op>(o)) && ir::op_info(static_cast<Op>(o)).arity == arity) ops.push_back(static_cast<Op>(o));
  return ops;
}
const DType kFloats[] = {DType::F16, DType::BF16, DType::F32, DType::F64};

ir::Scalar as_dtype(double v, DType t) {
  ir::Scalar s;
  s.dtype = DType::F64;
  s.f = v;
  ir::Scalar a[1] = {s};
  return ir::eval_scalar(Op::Cast, t, a);
}

double smallest_subnormal(DType t) {
  return t == DType::F16 ? std::ldexp(1.0, -24) : t == DType::BF16 ? std::ldexp(1.0, -133)
         : t == DType::F32 ? std::ldexp(1.0, -149) : std::numeric_limits<double>::denorm_min();
}
double largest(DType t) {
  return t == DType::F16 ? 65504.0 : t == DType::BF16 ? 3.3895313892515355e38
         : t == DType::F32 ? 3.4028234663852886e38 : std::numeric_limits<double>::max();
}

// Edge values, and values where glibc and a correctly rounded fold are known to differ
// (expm1f(1), tanh(0.7), erf(0.25), log10(3.031859) in f64). The first kWhereValues also get the
// where form (each where form adds nodes to the graph; the suite runs on 2 cores).
constexpr size_t kWhereValues = 5;
std::vector<double> unary_values(DType t) {
  std::vector<double> v = {1.0, 0.7, -0.0, kInf, kNan, -kInf, 0.0, -1.0, 0.5, -2.5, smallest_subnormal(t), largest(t)};
  if (!ir::is_half(t)) v.insert(v.end(), {0.25, 3.031859, 20.5, 710.0});
  return v;
}

std::vector<std::pair<double, double>> binary_pairs(DType t) {
  std::vector<std::pair<double, double>> p = {{0.7, 2.0}, {-8.0, 1.0 / 3}, {5.275492, 1.7}, {3.14159, -1.5},
                                              {0.25, 3.3}, {kNan, 0.0},   {1.0, kNan},        {-1.0, kInf},
                                              {2.5, kInf}, {smallest_subnormal(t), -1.0}, {largest(t), 2.0}, {-7.25, 0.3}};
  for (double a : {0.0, -0.0, -1.0, kInf})
    for (double b : {-0.0, 1.0, -2.0, kNan}) p.push_back({a, b});
  return p;
}

// Output `out` (element `elem`, or every element when -1) must equal element `rt_elem` of the
// run-time output (output 0).
struct Expect {
  size_t out;
  int64_t elem;
  int64_t rt_elem;
};

struct MathCase {
  testing::Case c;
  std::vector<Expect> expects;
};

// The vector path (16-byte loads) has nothing to do with folding; leaving it out halves the
// compile time.
jit::CodegenOptions scalar_only() {
  jit::CodegenOptions o;
  o.vectorize = false;
  return o;
}

ir::Shape vec(int64_t n) { return {{n, -1}}; }

// Adds one output; returns its index.
size_t output(ir::GraphBuilder& b, const std::string& name, ir::Operand v) {
  b.add_output(name, v);
  return b.graph().outputs.size() - 1;
}

// The three forms of op(values[k]) for a unary op.
MathCase unary_case(Op op, DType t, uint64_t seed) {
  const std::vector<double> vals = unary_values(t);
  const int64_t n = static_cast<int64_t>(vals.size());
  ir::GraphBuilder b(fmt::format("{}_{}", ir::op_name(op), ir::dtype_name(t)));
  auto x = ir::Operand::of(b.add_input("x", t, vec(n)));
  auto yes = ir::Operand::of(b.add_input("yes", DType::Bool, vec(n)));
  auto no = ir::Operand::of(b.add_input("no", DType::Bool, vec(n)));
  ir::Operand xs[1] = {x};
  MathCase mc;
  output(b, "rt", b.apply(op, xs));
  for (int64_t k = 0; k < n; ++k) {
    auto c = ir::Operand::of(b.constant(as_dtype(vals[static_cast<size_t>(k)], t)));
    ir::Operand cs[1] = {c};
    mc.expects.push_back({output(b, fmt::format("lit{}", k), b.apply(op, cs)), 0, k});
    if (static_cast<size_t>(k) >= kWhereValues) continue;
    ir::Operand w3[3] = {k % 2 ? no : yes, k % 2 ? x : c, k % 2 ? c : x};
    ir::Operand ws[1] = {b.apply(Op::Where, w3)};
    mc.expects.push_back({output(b, fmt::format("where{}", k), b.apply(op, ws)), -1, k});
  }
  std::string label = b.graph().name;  // before finish() empties the builder
  mc.c = testing::make_case(std::move(label), b.finish(), seed, scalar_only());
  return mc;
}

// op(c1, c2) for every pair, op(c, y) or op(x, c) in turn, and the where form for the first pairs.
MathCase binary_case(Op op, DType t, uint64_t seed) {
  const auto pairs = binary_pairs(t);
  const int64_t n = static_cast<int64_t>(pairs.size());
  ir::GraphBuilder b(fmt::format("{}_{}", ir::op_name(op), ir::dtype_name(t)));
  auto x = ir::Operand::of(b.add_input("x", t, vec(n)));
  auto y = ir::Operand::of(b.add_input("y", t, vec(n)));
  auto yes = ir::Operand::of(b.add_input("yes", DType::Bool, vec(n)));
  auto no = ir::Operand::of(b.add_input("no", DType::Bool, vec(n)));
  MathCase mc;
  auto call = [&](ir::Operand a0, ir::Operand a1) {
    ir::Operand as[2] = {a0, a1};
    return b.apply(op, as);
  };
  output(b, "rt", call(x, y));
  for (int64_t k = 0; k < n; ++k) {
    auto ca = ir::Operand::of(b.constant(as_dtype(pairs[static_cast<size_t>(k)].first, t)));
    auto cb = ir::Operand::of(b.constant(as_dtype(pairs[static_cast<size_t>(k)].second, t)));
    if (k % 2) mc.expects.push_back({output(b, fmt::format("lit_a{}", k), call(ca, y)), k, k});
    else mc.expects.push_back({output(b, fmt::format("lit_b{}", k), call(x, cb)), k, k});
    mc.expects.push_back({output(b, fmt::format("lit_ab{}", k), call(ca, cb)), 0, k});
    if (static_cast<size_t>(k) >= kWhereValues) continue;
    ir::Operand w3[3] = {k % 2 ? no : yes, k % 2 ? y : cb, k % 2 ? cb : y};
    mc.expects.push_back({output(b, fmt::format("where{}", k), call(x, b.apply(Op::Where, w3))), k, k});
  }
  std::string label = b.graph().name;  // before finish() empties the builder
  mc.c = testing::make_case(std::move(label), b.finish(), seed, scalar_only());
  return mc;
}

std::vector<std::array<double, 3>> ternary_triples(DType t) {
  return {{1.0, 2.0, 0.25},  {1.0, 2.0, 0.75},       {-0.0, -0.0, 0.0},  {kInf, -kInf, 0.5},
          {kNan, 1.0, 0.3},  {1.0, kNan, 0.7},       {1.0, 2.0, kNan},   {0.7, -2.5, 1.0 / 3},
          {3.3, 7.1, 2.0},   {-1.0, kInf, -0.6},     {smallest_subnormal(t), 1.0, -0.6},
          {largest(t), -largest(t), 0.5}};
}

// op(c1, c2, c3) for every triple, and op(c, y, z) in turn.
MathCase ternary_case(Op op, DType t, uint64_t seed) {
  const auto triples = ternary_triples(t);
  const int64_t n = static_cast<int64_t>(triples.size());
  ir::GraphBuilder b(fmt::format("{}_{}", ir::op_name(op), ir::dtype_name(t)));
  ir::Operand in[3];
  for (int j = 0; j < 3; ++j) in[j] = ir::Operand::of(b.add_input(fmt::format("x{}", j), t, vec(n)));
  for (const char* name : {"yes", "no"}) b.add_input(name, DType::Bool, vec(n));
  MathCase mc;
  output(b, "rt", b.apply(op, in));
  for (int64_t k = 0; k < n; ++k) {
    ir::Operand c[3], one[3] = {in[0], in[1], in[2]};
    for (int j = 0; j < 3; ++j) c[j] = ir::Operand::of(b.constant(as_dtype(triples[static_cast<size_t>(k)][j], t)));
    one[k % 3] = c[k % 3];
    mc.expects.push_back({output(b, fmt::format("lit_one{}", k), b.apply(op, one)), k, k});
    mc.expects.push_back({output(b, fmt::format("lit_all{}", k), b.apply(op, c)), 0, k});
  }
  std::string label = b.graph().name;  // before finish() empties the builder
  mc.c = testing::make_case(std::move(label), b.finish(), seed, scalar_only());
  return mc;
}

// Inputs: x (and y, z) hold the values, `yes` is all true, `no` all false.
void set_inputs(MathCase& mc, const std::vector<std::vector<double>>& values) {
  const ir::Graph& g = mc.c.graph;
  const DType t = g.node(g.inputs[0]).dtype;
  const int64_t n = static_cast<int64_t>(values[0].size());
  std::vector<ir::Tensor> in;
  for (const std::vector<double>& src : values) {
    ir::Tensor v(t, {n});
    for (int64_t i = 0; i < n; ++i) v.set(i, as_dtype(src[static_cast<size_t>(i)], t));
    in.push_back(std::move(v));
  }
  for (bool value : {true, false}) {
    ir::Tensor m(DType::Bool, {n});
    for (int64_t i = 0; i < n; ++i) m.as<bool>()[i] = value;
    in.push_back(std::move(m));
  }
  mc.c.inputs = std::move(in);
}

bool same_value(const ir::Scalar& a, const ir::Scalar& b) {
  return a.same_as(b) || (std::isnan(a.f) && std::isnan(b.f));
}

// The forms agree with the run-time output; returns the number of mismatches.
int check_forms(const MathCase& mc, const std::vector<ir::Tensor>& out, const std::string& what) {
  int bad = 0;
  for (const Expect& e : mc.expects) {
    const ir::Tensor& o = out[e.out];
    const ir::Scalar want = out[0].get(e.rt_elem);
    for (int64_t i = e.elem < 0 ? 0 : e.elem; i < (e.elem < 0 ? o.numel() : e.elem + 1); ++i) {
      const ir::Scalar got = o.get(i);
      if (same_value(got, want)) continue;
      ++bad;
      FAIL_CHECK(mc.c.label << " (" << what << "): output '" << mc.c.graph.outputs[e.out].name << "' element " << i
                            << " is " << fmt::format("{} ({:a})", got.f, got.f) << ", the run-time operand gives "
                            << fmt::format("{} ({:a})", want.f, want.f));
    }
  }
  return bad;
}

int check_math_case(const MathCase& mc) {
  int bad = testing::check_case(mc.c);
  const std::vector<ir::Tensor> ref = ir::evaluate_reference(mc.c.graph, mc.c.inputs);
  bad += check_forms(mc, ref, "reference");
  const jit::CpuTensorRunResult f = jit::run_cpu_program(mc.c.fused, std::span<const ir::Tensor>(mc.c.inputs));
  bad += check_forms(mc, f.outputs, "fused");
  // Strict rewriting folds the constant forms with eval_scalar: the same bits again.
  const ir::Graph rw = ir::rewrite(mc.c.graph).graph;
  bad += check_forms(mc, ir::evaluate_reference(rw, mc.c.inputs), "rewritten");
  return bad;
}

}  // namespace

TEST_CASE("math ops on a constant operand give the run-time bits: every math op x float dtype x 3 forms") {
  std::vector<MathCase> cases;
  uint64_t seed = 1;
  for (DType t : kFloats) {
    for (Op op : math_ops(1)) {
      cases.push_back(unary_case(op, t, seed++));
      set_inputs(cases.back(), {unary_values(t)});
    }
    for (Op op : math_ops(2)) {
      cases.push_back(binary_case(op, t, seed++));
      std::vector<std::vector<double>> v(2);
      for (auto [a, b] : binary_pairs(t)) {
        v[0].push_back(a);
        v[1].push_back(b);
      }
      set_inputs(cases.back(), v);
    }
    for (Op op : math_ops(3)) {
      cases.push_back(ternary_case(op, t, seed++));
      std::vector<std::vector<double>> v(3);
      for (const auto& abc : ternary_triples(t))
        for (int j = 0; j < 3; ++j) v[static_cast<size_t>(j)].push_back(abc[static_cast<size_t>(j)]);
      set_inputs(cases.back(), v);
    }
  }
  // -O2, one level above the product's -O1 (jit/host_compile.h): GCC folds math calls at both,
  // and at -O2 it also inlines the where helpers, carrying constants into more calls.
  std::vector<testing::Case> plain;
  for (MathCase& mc : cases) {
    plain.push_back(std::move(mc.c));
    plain.back().with_unfused = false;  // see the top of this file
  }
  testing::compile_all(plain, o2());
  for (size_t k = 0; k < cases.size(); ++k) cases[k].c = std::move(plain[k]);
  int bad = 0;
  for (const MathCase& mc : cases) bad += check_math_case(mc);
  CHECK(bad == 0);
}

// The lists come from ir/ops.def; this guards the derivation: every float-rule op is in one, and
// the libm calls that are not float-rule ops (pow, floor) too.
TEST_CASE("the math op lists cover every float-rule op") {
  size_t listed = 0;
  for (int arity = 1; arity <= 3; ++arity) listed += math_ops(arity).size();
  size_t float_rule = 0;
  for (int o = 0; o < ir::kNumOps; ++o) float_rule += ir::op_info(static_cast<Op>(o)).rule == ir::TypeRule::Float;
  CHECK(listed > float_rule);
  for (Op op : {Op::Pow, Op::Floor, Op::Round, Op::Mod, Op::Cbrt, Op::Hypot, Op::Lerp}) CHECK(checked(op));
}

// Issue 16's graph: GCC folded expm1f(1.0f) in the fused kernel (the where's literal branch) to
// 0x3fdbf0a9, while glibc at run time gives 0x3fdbf0a8.
TEST_CASE("issue 16's random graph: fused, unfused and reference agree at -O2") {
  const char* text =
      "input x0 : i32[1]\n"
      "t0 = erf(x0)\n"
      "t1 = pow(t0, t0)\n"
      "t2 = exp2(t0)\n"
      "t3 = gelu_tanh(x0)\n"
      "t4 = where(t3, (true + false), t3)\n"
      "t5 = (t4 + -3) + 300\n"
      "t6 = expm1(t4)\n"
      "t7 = cast(cast(t6, f64), f32)\n"
      "t8 = abs(t7)\n"
      "t9 = exp2(t0)\n"
      "t10 = fmin(t5, t2)\n"
      "output t10, t8, t1\n";
  // As `fusejit run` does: strict rewrites, then plan and compile.
  ir::Graph g = ir::rewrite(ir::parse_graph(text, "issue16.txt")).graph;
  std::vector<testing::Case> cases;
  cases.push_back(testing::make_case("issue 16", std::move(g), 1));
  ir::Tensor x0(DType::I32, {1});
  x0.as<int32_t>()[0] = -2;
  cases[0].inputs = {x0};
  testing::compile_all(cases, o2(), 1);
  CHECK(testing::check_case(cases[0]) == 0);
  const std::vector<ir::Tensor> ref = ir::evaluate_reference(cases[0].graph, cases[0].inputs);
  volatile float one = 1.0f;  // volatile: GCC would fold std::expm1(1.0f) here too
  CHECK(ref[1].as<float>()[0] == std::expm1(static_cast<float>(one)));
}

// The unfused plan is made from the graph before rewriting, so a math call folded on the host
// (glibc) in the fused plan would meet the GPU's CUDA Math API value in the unfused one; strict
// constant folding leaves inexact math calls to the kernels and folds exact ops.
TEST_CASE("constant-fold leaves inexact math calls on constants to the kernels") {
  const ir::Graph g = ir::parse_graph(
      "input x : f32[2]\ny = x + exp(cast(1.0, f32)) + sqrt(cast(4.0, f32)) + pow(cast(2.0, f64), cast(0.5, f64))\noutput y\n",
      "fold.txt");
  const ir::Graph rw = ir::rewrite(g).graph;
  int exps = 0, sqrts = 0, pows = 0;
  for (const ir::Node& n : rw.nodes) {
    exps += n.op == Op::Exp;
    sqrts += n.op == Op::Sqrt;
    pows += n.op == Op::Pow;
  }
  CHECK(exps == 1);
  CHECK(pows == 1);
  CHECK(sqrts == 0);  // exact: folded
}
