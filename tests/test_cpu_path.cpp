// The CPU path: generated kernels compiled by the host compiler and run on the CPU, fused and
// unfused, agree BIT FOR BIT with the reference evaluator on every op x dtype, every sample graph
// and >= 1,000 random graphs (special values, broadcasting, mixed dtypes, multi-output groups).
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir/random_fill.h"
#include "ir/reduce.h"
#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "ir/passes/rewrite.h"
#include "ir/plan.h"
#include "ir/reference.h"
#include "jit/cpu_runner.h"
#include "tests/support/cpu_check.h"
#include "tests/support/random_graph.h"
#include "tests/support/files.h"
#include "tests/support/scoped_env.h"

using namespace fusejit;
using ir::DType;
using ir::Op;
using testing::Case;
using testing::check_case;
using testing::compile_all;
using testing::make_case;

namespace {

ir::Shape shp(std::initializer_list<int64_t> s) {
  ir::Shape r;
  for (int64_t v : s) r.push_back({v, -1});
  return r;
}

}  // namespace

TEST_CASE("every op x dtype: fused, unfused and reference agree bit for bit, with broadcasting") {
  const DType types[] = {DType::Bool, DType::I8, DType::U8, DType::I32, DType::I64,
                         DType::F16, DType::BF16, DType::F32, DType::F64};
  std::vector<Case> cases;
  uint64_t seed = 100;
  for (int o = 0; o < ir::kNumOps; ++o) {
    const Op op = static_cast<Op>(o);
    if (ir::is_leaf(op) || ir::is_reduction(op)) continue;  // reductions: tests/test_reduce.cpp
    for (DType t : types) {
      ir::GraphBuilder b(std::string(ir::op_name(op)));
      // Operand 0 full [6, 9]; operand 1 a broadcast row [9]; operand 2 a column [6, 1].
      const ir::Shape shapes[3] = {shp({6, 9}), shp({9}), shp({6, 1})};
      std::vector<ir::Operand> args;
      for (int a = 0; a < ir::op_arity(op); ++a)
        args.push_back(ir::Operand::of(
            b.add_input(fmt::format("a{}", a), (op == Op::Where && a == 0) ? DType::Bool : t, shapes[a])));
      try {
        // Casts go from t to every dtype; other ops also feed a second op so groups have 2 nodes.
        if (op == Op::Cast) {
          for (DType to : types) b.add_output(std::string("to_") + std::string(ir::dtype_name(to)), b.cast(args[0], to));
        } else {
          ir::Operand r = b.apply(op, args);
          b.add_output("r", r);
          ir::Operand a2[2] = {r, r};
          if (b.graph().node(r.node).dtype != DType::Bool) b.add_output("r2", b.apply(Op::Mul, a2));
        }
      } catch (const ir::UserError&) {
        continue;  // op not defined on this dtype (neg of bool, ...)
      }
      ir::Graph g = b.finish();
      cases.push_back(make_case(fmt::format("{}({})", ir::op_name(op), ir::dtype_name(t)), std::move(g), seed++));
    }
  }
  CHECK(cases.size() > 250);
  // The fused programs at the product's level (-O1, jit/host_compile.h); the unfused ones (the same op code, one op per
  // kernel) at -O0, which compiles ~6x faster: results do not depend on the level.
  jit::HostCompileOptions quick;
  quick.opt_level = "-O0";
  compile_all(cases, {}, 2, quick);
  int bad = 0;
  for (const Case& c : cases) bad += check_case(c);
  // The scalar-only loop and a multi-block, multi-thread grid-stride launch give the same bits.
  jit::CpuRunOptions scalar;
  scalar.vector_path = false;
  scalar.launch = {3, 5};
  for (const Case& c : cases) bad += check_case(c, scalar);
  CHECK(bad == 0);
}

TEST_CASE("every sample graph, at small dims, fused and unfused match the reference") {
  std::vector<Case> cases;
  uint64_t seed = 7;
  const std::filesystem::path dir = std::filesystem::path(FUSEJIT_SOURCE_DIR) / "samples" / "graphs";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 8);
  for (const auto& f : files) {
    ir::Graph g = ir::parse_graph_file(f.string());
    std::vector<std::pair<std::string, int64_t>> small;
    for (size_t d = 0; d < g.dims.size(); ++d) small.push_back({g.dims[d].name, static_cast<int64_t>(3 + 2 * d)});
    ir::rebind_dims(g, small);
    // The same graph with 64-bit index math forced (the code path of >= 2^31 elements).
    jit::CodegenOptions i64;
    i64.index_bits = 64;
    cases.push_back(make_case(f.filename().string() + " (64-bit index)", g, seed, i64));
    CHECK(cases.back().fused.kernels.front().index64);
    cases.push_back(make_case(f.filename().string(), std::move(g), seed++));
  }
  jit::HostCompileOptions trap;  // a vector access at a misaligned address traps, as on a GPU
  trap.check_alignment = true;
  compile_all(cases, trap);
  int bad = 0;
  jit::CpuRunOptions strided;  // every kernel through its strided entry (the one views run)
  strided.force_strided = true;
  for (const Case& c : cases) {
    CHECK(c.fused.plan.groups.size() <= c.unfused.plan.groups.size());
    bad += check_case(c);
    bad += check_case(c, strided);
  }
  CHECK(bad == 0);
}

TEST_CASE("1,000+ random graphs: fused, unfused and reference agree bit for bit") {
  // Batches of graphs share one host compile. -O0 keeps the compile short; results do not depend
  // on the optimisation level (no -ffast-math, no contraction); the samples and the every-op test
  // use the product's level (jit/host_compile.h).
  jit::HostCompileOptions quick;
  quick.opt_level = "-O0";
  quick.check_alignment = true;  // a misaligned vector access traps, as on a GPU
  int graphs = 0, bad = 0, multi_output_groups = 0, strided_groups = 0, kernels = 0;
  double compile_s = 0;
  const int kBatches = 10, kPerBatch = 100;
  std::vector<std::vector<Case>> batches(kBatches);
  for (int batch = 0; batch < kBatches; ++batch) {
    std::vector<Case>& cases = batches[static_cast<size_t>(batch)];
    for (int k = 0; k < kPerBatch; ++k) {
      testing::RandomGraphOptions o;
      o.seed = 5000 + static_cast<uint64_t>(batch * kPerBatch + k);
      o.num_ops = 8;
      ir::Graph g = testing::random_graph(o);
      jit::CodegenOptions co;
      co.vectorize = (k % 4 == 0);  // the vector path for every dtype is covered above
      cases.push_back(make_case(fmt::format("random graph seed {}", o.seed), std::move(g), o.seed, co));
      for (const ir::FusionGroup& grp : cases.back().fused.plan.groups) multi_output_groups += grp.outputs.size() > 1;
      for (const jit::CpuProgram* pr : {&cases.back().fused, &cases.back().unfused})
        for (const jit::GeneratedKernel& kk : pr->kernels) strided_groups += kk.source.find("off_v") != std::string::npos;
    }
  }
  // Two compiler processes at a time (the CI machine has 2 cores).
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::future<void>> jobs;
  for (int w = 0; w < 2; ++w)
    jobs.push_back(std::async(std::launch::async, [&, w] {
      for (int batch = w; batch < kBatches; batch += 2) compile_all(batches[static_cast<size_t>(batch)], quick, 1);
    }));
  for (auto& j : jobs) j.get();
  compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (std::vector<Case>& cases : batches) {
    ++kernels;
    for (size_t k = 0; k < cases.size(); ++k) {
      jit::CpuRunOptions run;
      if (k % 3 == 1) run.launch = {2, 3};
      if (k % 3 == 2) run.force_strided = true;  // the strided entry, as views run it
      // Every fourth graph on finite inputs: random_inputs' NaN and inf in most long rows would hide
      // a reduction that combines its elements in another order.
      if (k % 4 == 3)
        for (ir::Tensor& t : cases[k].inputs) ir::random_fill(t, 9000 + k);
      bad += check_case(cases[k], run);
      ++graphs;
    }
  }
  MESSAGE(graphs << " graphs, " << kernels << " host modules, compile " << compile_s << " s, " << testing::nan_payload_only_count()
                 << " outputs equal up to NaN sign/payload");
  CHECK(graphs >= 1000);
  CHECK(multi_output_groups > 50);
  CHECK(strided_groups > 30);
  CHECK(bad == 0);
}

TEST_CASE("broadcast inputs on the vector path: bias rows and [1,C,1,1] channels, bit for bit") {
  // Innermost collapsed sizes that are and are not a multiple of V (8 for f16; 4 for u8 in, f32
  // out: 16 bytes of the widest array).
  struct Spec {
    const char* file;
    std::vector<std::pair<std::string, int64_t>> dims;
    bool vec;  // innermost size % V == 0: the fused kernel takes the vector path
  };
  const std::vector<Spec> specs = {
      {"bias_gelu.txt", {{"T", 5}, {"F", 24}}, true},   {"bias_gelu.txt", {{"T", 3}, {"F", 8}}, true},
      {"bias_gelu.txt", {{"T", 5}, {"F", 13}}, false},  {"bias_gelu.txt", {{"T", 4}, {"F", 20}}, false},
      {"nchw_normalize.txt", {{"N", 2}, {"C", 3}, {"H", 4}, {"W", 8}}, true},
      {"nchw_normalize.txt", {{"N", 3}, {"C", 2}, {"H", 2}, {"W", 8}}, true},
      {"nchw_normalize.txt", {{"N", 2}, {"C", 3}, {"H", 4}, {"W", 6}}, true},   // 24: a multiple of 4
      {"nchw_normalize.txt", {{"N", 2}, {"C", 3}, {"H", 3}, {"W", 6}}, false},  // 18: a multiple of 2, not 4
      {"nchw_normalize.txt", {{"N", 2}, {"C", 3}, {"H", 3}, {"W", 5}}, false},
      {"nchw_normalize.txt", {{"N", 1}, {"C", 4}, {"H", 1}, {"W", 7}}, false},
  };
  std::vector<Case> cases;
  uint64_t seed = 91;
  for (const Spec& sp : specs) {
    ir::Graph g = ir::parse_graph_file((std::filesystem::path(FUSEJIT_SOURCE_DIR) / "samples" / "graphs" / sp.file).string());
    ir::rebind_dims(g, sp.dims);
    cases.push_back(make_case(fmt::format("{} {}", sp.file, sp.vec ? "(vector)" : "(scalar)"), std::move(g), seed++));
  }
  jit::HostCompileOptions trap;  // a vector access at a misaligned address traps, as on a GPU
  trap.check_alignment = true;
  compile_all(cases, trap);
  int bad = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    REQUIRE(c.fused.kernels.size() == 1);
    CHECK(c.fused.kernels[0].vector_width > 1);
    CHECK(c.fused.kernels[0].source.find("off_v") != std::string::npos);  // strided inputs
    jit::CpuRunOptions plain, misaligned, scalar;
    misaligned.misalign_inputs = true;
    misaligned.launch = {2, 3};
    scalar.vector_path = false;
    const auto f = jit::run_cpu_program(c.fused, std::span<const ir::Tensor>(c.inputs), c.params, plain);
    CHECK_MESSAGE((f.vector_launches == 1) == specs[k].vec, c.label);
    const auto m = jit::run_cpu_program(c.fused, std::span<const ir::Tensor>(c.inputs), c.params, misaligned);
    CHECK_MESSAGE(m.vector_launches == 0, c.label);
    bad += check_case(c, plain);
    bad += check_case(c, misaligned);
    bad += check_case(c, scalar);
    // A multi-thread grid-stride launch splits the vectors across threads.
    jit::CpuRunOptions grid;
    grid.launch = {3, 2};
    bad += check_case(c, grid);
  }
  CHECK(bad == 0);
}

TEST_CASE("row reductions on the vector path: V lanes a thread, the same bits as the scalar loop") {
  // Rows that are (vector) and are not (scalar) a multiple of V (4 for f32, 8 for bf16), within a
  // chunk and a few elements past one, a row split over blocks, and element outputs written in the
  // one pass (early outputs).
  struct Spec {
    std::string label, text;
    std::vector<std::pair<std::string, int64_t>> dims;
    bool vec;
  };
  auto sample = [](const char* file) {
    std::ifstream f(std::filesystem::path(FUSEJIT_SOURCE_DIR) / "samples" / "graphs" / file);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string early = "graph early\ndim N = 16\ndim C = 1028\ninput g : f32[N, C] range -3:3\nparam s : f32 = 0.5\n"
                            "u = g * s\nm = amax(abs(g), -1)\noutput u, m\n";
  const std::vector<Spec> specs = {
      {"softmax", sample("softmax.txt"), {{"N", 16}, {"C", 1028}}, true},
      {"softmax", sample("softmax.txt"), {{"N", 16}, {"C", 1030}}, false},
      {"softmax_bf16", sample("softmax_bf16.txt"), {{"N", 6}, {"C", 8200}}, true},
      {"softmax_bf16", sample("softmax_bf16.txt"), {{"N", 2}, {"C", 8204}}, false},
      {"rmsnorm", sample("rmsnorm.txt"), {{"T", 16}, {"D", 4104}}, true},
      {"residual_rmsnorm", sample("residual_rmsnorm.txt"), {{"T", 16}, {"D", 1000}}, true},
      {"layernorm", sample("layernorm.txt"), {{"N", 16}, {"C", 1028}}, true},
      {"logsumexp", sample("logsumexp.txt"), {{"N", 8}, {"V", 9000}}, true},
      {"greedy_decode", sample("greedy_decode.txt"), {{"B", 4}, {"V", 9000}}, true},
      {"grad_norm (split over blocks)", sample("grad_norm.txt"), {{"N", 300000}}, true},
      {"early outputs", early, {}, true},
  };
  std::vector<Case> cases;
  uint64_t seed = 301;
  for (const Spec& sp : specs) {
    ir::Graph g = ir::parse_graph(sp.text, sp.label + ".txt");
    ir::rebind_dims(g, sp.dims);
    cases.push_back(make_case(fmt::format("{} {}", sp.label, sp.vec ? "(vector)" : "(scalar)"), std::move(g), seed++));
  }
  jit::HostCompileOptions trap;  // a vector access at a misaligned address traps, as on a GPU
  trap.check_alignment = true;
  compile_all(cases, trap);
  // Again with finite inputs: a NaN or inf in most rows (random_inputs' specials) hides the order.
  for (size_t k = 0, n = cases.size(); k < n; ++k) {
    Case finite = cases[k];
    finite.label += " (finite inputs)";
    for (ir::Tensor& t : finite.inputs) ir::random_fill(t, seed++);
    cases.push_back(std::move(finite));
  }
  int bad = 0;
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    REQUIRE(c.fused.kernels.size() == 1);
    CHECK_MESSAGE(c.fused.kernels[0].vector_width > 1, c.label);
    jit::CpuRunOptions plain, misaligned, scalar, strided;
    misaligned.misalign_inputs = true;
    scalar.vector_path = false;
    strided.force_strided = true;
    const auto f = jit::run_cpu_program(c.fused, std::span<const ir::Tensor>(c.inputs), c.params, plain);
    CHECK_MESSAGE((f.vector_launches == 1) == specs[k % specs.size()].vec, c.label);
    CHECK_MESSAGE(f.strided_launches == 0, c.label);  // the fast entry: the only one with the vector path
    CHECK_MESSAGE(jit::run_cpu_program(c.fused, std::span<const ir::Tensor>(c.inputs), c.params, misaligned).vector_launches == 0,
                  c.label);
    for (const jit::CpuRunOptions& o : {plain, misaligned, scalar, strided}) bad += check_case(c, o);
  }
  CHECK(bad == 0);
}

TEST_CASE("a new dim value or param value reuses the compiled kernels") {
  ir::GraphBuilder b("rebind");
  const int32_t n = b.add_dim("N", 8);
  ir::Shape xs = {{8, n}, {4, -1}};
  auto x = ir::Operand::of(b.add_input("x", DType::F32, xs));
  auto bias = ir::Operand::of(b.add_input("bias", DType::F32, shp({4})));
  ir::Literal a;
  a.cat = ir::Category::Float;
  a.f = 0.5;
  auto p = ir::Operand::of(b.add_param("alpha", DType::F32, a));
  ir::Operand m[2] = {x, bias};
  ir::Operand s[2] = {b.apply(Op::Mul, m), p};
  b.add_output("y", b.apply(Op::Add, s));
  ir::Graph g = b.finish();
  Case c = make_case("rebind", g, 1);
  std::vector<Case> one;
  one.push_back(std::move(c));
  compile_all(one);
  Case& cc = one.front();
  CHECK(check_case(cc) == 0);
  // Rebind N in the programs' graphs (the kernels and plans stay as generated) and the case's graph.
  ir::rebind_dims(cc.graph, {{"N", 13}});
  ir::rebind_dims(cc.fused.graph, {{"N", 13}});
  ir::rebind_dims(cc.unfused.graph, {{"N", 13}});
  cc.inputs = testing::random_inputs(cc.graph, 2);
  cc.params = {ir::literal_to_scalar(a, DType::F32)};
  cc.params[0].f = -3.25;
  CHECK(check_case(cc) == 0);
  CHECK(cc.fused.kernels.front().name == jit::generate_kernel(cc.fused.graph, cc.fused.plan.groups.front()).name);
  // A wrong input is a clear UserError.
  std::vector<ir::Tensor> wrong = cc.inputs;
  wrong[0] = ir::Tensor(DType::F16, {13, 4});
  CHECK_THROWS_AS(jit::run_cpu_program(cc.fused, std::span<const ir::Tensor>(wrong)), ir::UserError);
}

TEST_CASE("outputs that rewrites made leaves: an input's is cast in a kernel, a param's filled") {
  ir::GraphBuilder b("leaves");
  auto x = ir::Operand::of(b.add_input("x", DType::BF16, shp({3, 5})));
  ir::Literal a;
  a.cat = ir::Category::Float;
  a.f = -2.5;
  auto p = ir::Operand::of(b.add_param("alpha", DType::F64, a));
  // The builder refuses leaf outputs; the rewriter produces them (x * 1 -> x, alpha * 1 -> alpha)
  // and makes an input's a same-dtype cast again, which sq's kernel computes.
  ir::Literal one_l;
  one_l.i = 1;
  ir::Operand xm[2] = {x, ir::Operand::of(one_l)};
  b.add_output("x_again", b.apply(Op::Mul, xm));
  ir::Operand pm[2] = {p, ir::Operand::of(one_l)};
  b.add_output("alpha_out", b.apply(Op::Mul, pm));
  ir::Operand m[2] = {x, x};
  b.add_output("sq", b.apply(Op::Mul, m));
  ir::Graph g = ir::rewrite(b.finish()).graph;
  int leaf_outputs = 0;
  for (const ir::OutputDecl& o : g.outputs) leaf_outputs += ir::is_leaf(g.node(o.node).op);
  CHECK(leaf_outputs == 1);
  CHECK(g.node(g.outputs[0].node).op == Op::Cast);
  std::vector<Case> one;
  one.push_back(make_case("leaves", std::move(g), 3));
  compile_all(one);
  CHECK(check_case(one.front()) == 0);
}

// Zero-size dims (no elements) and 0-d iteration spaces (one element): launches that do nothing or
// one thing, with broadcasting and multiply-based index division in the kernel.
TEST_CASE("zero-size dims and 0-d spaces") {
  std::vector<Case> cases;
  const char* texts[] = {
      "input a : f16[4, 0]\ninput b : u8[0]\ny = a * b\noutput y\n",
      "dim K = 16\ninput a : f32[3, K]\ninput b : f32[K]\ninput c : f32[3, 1]\ny = where(a > b, c, a * b)\noutput y\n",
      "param a : bf16 = 1.5\nparam b : bf16 = 2\ny = a * b + a\noutput y\n",
      "input s : f16\ninput t : f32[1, 1]\ny = s * t + 1\noutput y\n",
  };
  uint64_t seed = 7;
  for (const char* t : texts) cases.push_back(make_case(t, ir::parse_graph(t, "z.txt"), seed++));
  ir::Graph zero = ir::parse_graph(texts[1], "z.txt", {{"K", 0}});
  cases.push_back(make_case("K = 0", std::move(zero), seed++));
  compile_all(cases);
  int bad = 0;
  for (const Case& c : cases) bad += check_case(c);
  CHECK(bad == 0);
}

TEST_CASE("random graphs with an axis of size 0: fused, unfused and reference agree bit for bit") {
  // Empty tensors beside non-empty ones (a size-0 axis broadcast against 1), and reductions over
  // an empty axis, which write their identities (0 for sum, 1 for prod, NaN for mean, -inf for
  // logsumexp) into a non-empty result.
  jit::HostCompileOptions quick;
  quick.opt_level = "-O0";
  std::vector<Case> cases;
  int empty = 0, identities = 0;  // outputs without elements; reductions of nothing into something
  auto none = [](const ir::Shape& s) { return std::any_of(s.begin(), s.end(), [](const ir::Dim& d) { return d.size == 0; }); };
  for (uint64_t seed = 7000; seed < 7060; ++seed) {
    testing::RandomGraphOptions o;
    o.seed = seed;
    o.num_ops = 10;
    o.reduction_rate = 0.3;
    o.zero_dim_rate = 1.0;
    cases.push_back(make_case(fmt::format("random graph seed {} with a size-0 axis", seed), testing::random_graph(o), seed));
    const ir::Graph& g = cases.back().graph;
    for (const ir::OutputDecl& out : g.outputs) empty += none(g.node(out.node).shape);
    for (const ir::Node& n : g.nodes) identities += ir::is_reduction(n.op) && none(g.node(n.args[0]).shape) && !none(n.shape);
  }
  compile_all(cases, quick, 1);
  int bad = 0;
  for (const Case& c : cases) bad += check_case(c, {.launch = {2, 3}});
  CHECK(bad == 0);
  CHECK(empty > 20);      // the generator gave empty outputs
  CHECK(identities > 5);  // and reductions over the empty axis gave elements
}

// GCC 12.2's SLP vectorizer dropped a (double)(float)x pair in the 2-lane vector loop of f64
// kernels (host_compile.cpp turns tree vectorization off); the difference must survive.
TEST_CASE("narrowing casts inside f64 kernels are not optimised away by the host compiler") {
  std::vector<Case> cases;
  const char* text = "input d : f64[64]\na = cast(cast(d, f32), f64) - d\noutput a\n";
  cases.push_back(make_case("f64 round trips", ir::parse_graph(text, "rt.txt"), 11));
  compile_all(cases);
  CHECK(check_case(cases.front()) == 0);
  const auto f = jit::run_cpu_program(cases.front().fused, std::span<const ir::Tensor>(cases.front().inputs), cases.front().params);
  int nonzero = 0;
  for (int64_t i = 0; i < 64; ++i) nonzero += f.outputs[0].as<double>()[i] != 0.0;
  CHECK(nonzero > 32);  // random f64 values are almost never f32-representable
}

// A hostile tester's find: CXX="g++ -ffast-math" (or -Ofast) made strict kernels drop NaN checks
// and signs of zero (where(isnan(x), 1, x) gave NaN, maximum(NaN, 0) gave 0); the host flags
// after $CXX's own turn fast math off again.
TEST_CASE("fast-math flags in $CXX do not loosen the CPU path: NaN, inf and -0.0 keep the reference's bits") {
  const char* text =
      "input x : f32[8]\ny = where(isnan(x), 1.0, x + x * 0.0)\nz = maximum(x, 0.0)\nw = x + 0.0\n"
      "v = where(isinf(x), 2.0, x - x)\noutput y, z, w, v\n";
  const float specials[8] = {NAN, -0.0f, INFINITY, 2.0f, -INFINITY, 0.0f, -NAN, 1e-40f};
  for (const char* flags : {"-ffast-math", "-Ofast", "-ffinite-math-only -fno-signed-zeros", "-funsafe-math-optimizations"}) {
    const std::string cxx = "c++ " + std::string(flags);
    ScopedEnv env("CXX", cxx.c_str());
    std::vector<Case> cases;
    cases.push_back(make_case(cxx, ir::parse_graph(text, "fast.txt"), 12));
    std::memcpy(cases.front().inputs[0].as<float>(), specials, sizeof specials);
    compile_all(cases, {}, 1);
    CAPTURE(cxx);
    CHECK(check_case(cases.front()) == 0);
  }
}

// Groups moved after a later group they come to read (plan_fusion's move_after): the launch order
// follows, every kernel reading values written before it.
TEST_CASE("a plan whose groups moved after a later one runs them in an order that gives the reference's bits") {
  std::vector<Case> cases;
  cases.push_back(make_case("moved", ir::parse_graph("input x : f32[64, 64]\ninput u : f32[2, 64, 64]\n"
                                                     "input w : f32[64, 8]\na = x * 2\nh = a + u\n"
                                                     "s = amax(w, -1, keepdim)\ny = a / s\noutput h, y, a\n", "m.txt"),
                            13));
  REQUIRE(cases.front().fused.kernels.size() == 3);
  compile_all(cases, {}, 1);
  CHECK(check_case(cases.front()) == 0);
}

TEST_CASE("a repeated build compiles nothing") {
  ir::Graph g = ir::parse_graph_file(testing::sample_path("x2x3.txt"));
  jit::CpuProgram a = jit::build_cpu_program(g, ir::plan_fusion(g));
  jit::CpuProgram b = jit::build_cpu_program(g, ir::plan_fusion(g));
  CHECK((b.compile.memory_hit || b.compile.disk_hit));
  CHECK(b.compile.compile_ms == 0.0);
  CHECK(a.module == b.module);
}
