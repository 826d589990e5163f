// Generated CUDA source: names, comments, layouts, index width, constants, and that every op's
// kernel compiles both with NVRTC (sm_90, no include path) and with the host compiler.
#include <doctest/doctest.h>

#include <random>

#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <fmt/format.h>

#include "ir/reduce.h"
#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "ir/plan.h"
#include "jit/codegen.h"
#include "jit/host_compile.h"
#include "jit/kernel_abi.h"
#include "jit/nvrtc.h"
#include "tests/support/nvrtc_cached.h"
#include "tests/support/scoped_env.h"
#include "tests/support/files.h"

using namespace fusejit;
using ir::DType;
using ir::NodeId;
using ir::Op;

namespace {

ir::Shape shp(std::initializer_list<int64_t> s) {
  ir::Shape r;
  for (int64_t v : s) r.push_back({v, -1});
  return r;
}

// One group holding every non-leaf node of the graph, reading every Input, writing the outputs.
ir::FusionGroup whole_graph_group(const ir::Graph& g) {
  ir::FusionGroup grp;
  for (NodeId i = 0; i < g.size(); ++i) {
    const ir::Node& n = g.node(i);
    if (n.op == Op::Input) grp.inputs.push_back(i);
    else if (n.op == Op::Param) grp.params.push_back(i);
    else if (!ir::is_leaf(n.op)) grp.nodes.push_back(i);
  }
  for (const ir::OutputDecl& o : g.outputs) grp.outputs.push_back(o.node);
  grp.iter_shape = g.node(g.outputs.front().node).shape;
  return grp;
}

ir::Operand op2(ir::GraphBuilder& b, Op op, ir::Operand x, ir::Operand y, uint32_t line) {
  ir::Operand a[2] = {x, y};
  return b.apply(op, a, ir::Loc{line, 1});
}

// x : f32[4, 8], bias : f32[8]; y = exp(x * bias + 1.5)
ir::Graph bias_graph(const ir::Shape& xs, const ir::Shape& bs, DType t = DType::F32) {
  ir::GraphBuilder b("bias act", "bias.txt");
  auto x = ir::Operand::of(b.add_input("x", t, xs, ir::Loc{2, 1}));
  auto bias = ir::Operand::of(b.add_input("bias", t, bs, ir::Loc{3, 1}));
  auto m = op2(b, Op::Mul, x, bias, 4);
  ir::Literal l;
  l.cat = ir::Category::Float;
  l.f = 1.5;
  auto s = op2(b, Op::Add, m, ir::Operand::of(l), 5);
  ir::Operand e1[1] = {s};
  auto y = b.apply(Op::Exp, e1, ir::Loc{6, 1});
  b.add_output("y", y, ir::Loc{7, 1});
  return b.finish();
}

// Compiles with the project's NVRTC wrapper (jit/nvrtc.h) through the tests' kernel cache
// (support/nvrtc_cached.h): no include paths, the given target. Returns "" on success, else the
// wrapper's full report with NVRTC's log.
std::string nvrtc_compile(const std::string& src, const std::vector<std::string>& opts, const char* target = "sm_90") {
  jit::CompileRequest req;
  req.target = jit::parse_target(target);
  req.options = opts;
  try {
    testing::compile_cuda_cached(src, "fusejit_test.cu", req);
    return "";
  } catch (const jit::CompileError& e) {
    return std::string(e.what()) + "\n" + e.log();
  }
}

}  // namespace

TEST_CASE("kernel names are deterministic and the source is commented per node") {
  ir::Graph g = bias_graph(shp({4, 8}), shp({8}));
  ir::FusionGroup grp = whole_graph_group(g);
  jit::GeneratedKernel k1 = jit::generate_kernel(g, grp);
  jit::GeneratedKernel k2 = jit::generate_kernel(g, grp);
  CHECK(k1.name == k2.name);
  CHECK(k1.source == k2.source);
  CHECK(k1.name.rfind("fj_bias_act_", 0) == 0);
  CHECK(k1.name.size() == std::string("fj_bias_act_").size() + 16);  // 64-bit hash
  CHECK(k1.source.find("extern \"C\" __global__ void " + k1.name + "(") != std::string::npos);
  // Each computing line names its node and its graph line.
  CHECK(k1.source.find("= mul(v0, v1) : f32  [bias.txt:4]") != std::string::npos);
  CHECK(k1.source.find("= fj_exp(v") != std::string::npos);
  CHECK(k1.source.find("[bias.txt:6]") != std::string::npos);
  CHECK(k1.source.find("0x1.8p+0f") != std::string::npos);  // the 1.5 literal, exact
  // The bias row is broadcast along dim 0: strided access (contiguous along the inner dim).
  CHECK(k1.source.find("st_v1_1") != std::string::npos);
  CHECK(k1.source.find("fj_vload<float, 4>(in_v1 + off_v1)") != std::string::npos);
  CHECK(!k1.index64);
  CHECK(k1.source.find("unsigned int n") != std::string::npos);
  CHECK(k1.nvrtc_options == std::vector<std::string>{"--std=c++17", "--fmad=false"});
  // A different graph body gives a different name.
  ir::Graph g2 = bias_graph(shp({4, 8}), shp({4, 8}));
  CHECK(jit::generate_kernel(g2, whole_graph_group(g2)).name != k1.name);
}

TEST_CASE("a graph name of the kernel's own form (v1) is not read as another value in the comments") {
  const ir::Graph g = ir::parse_graph("graph g\ninput v0 : f32[8]\ninput x : f32[8]\nv1 = v0 * x\ny = exp(v1)\noutput y\n", "v.txt");
  const std::string src = jit::generate_kernel(g, whole_graph_group(g)).source;
  CAPTURE(src);
  CHECK(src.find("// Inputs: v0 (named v0), v1 (x).") != std::string::npos);
  CHECK(src.find("// v2 (named v1) = mul(v0, v1) : f32  [v.txt:4]") != std::string::npos);
  CHECK(src.find("// v3 (y) = exp(v2)") != std::string::npos);  // other names as before
}

TEST_CASE("contiguous groups get a 16-byte vector path and a runtime alignment flag") {
  ir::Graph g = bias_graph(shp({4, 8}), shp({4, 8}));
  jit::GeneratedKernel k = jit::generate_kernel(g, whole_graph_group(g));
  CHECK(k.vector_width == 4);
  CHECK(k.source.find("fj_vload<float, 4>(in_v0 + i)") != std::string::npos);
  CHECK(k.source.find("if (vec_ok)") != std::string::npos);
  CHECK(k.signature.args.back().kind == jit::ArgKind::VecFlag);
  // f64 arrays: 2 per 16 bytes; no vector path when disabled.
  ir::Graph gd = bias_graph(shp({16}), shp({16}), DType::F64);
  CHECK(jit::generate_kernel(gd, whole_graph_group(gd)).vector_width == 2);
  jit::CodegenOptions nov;
  nov.vectorize = false;
  CHECK(jit::generate_kernel(gd, whole_graph_group(gd), nov).source.find("vec_ok") == std::string::npos);
  // A 0-d input is uniform: read once, vector path kept.
  ir::Graph gu = bias_graph(shp({4, 8}), shp({}));
  jit::GeneratedKernel ku = jit::generate_kernel(gu, whole_graph_group(gu));
  CHECK(ku.vector_width == 4);
  CHECK(ku.source.find("const float u_v1 = in_v1[0];") != std::string::npos);
}

TEST_CASE("broadcast groups get a vector path: one index computation per vector") {
  // Row broadcast (bias_gelu): x f16[T, F] + bias f16[F]. The bias is contiguous along the
  // innermost collapsed dim: one vector load at its per-vector base offset.
  {
    ir::Graph g = bias_graph(shp({6, 16}), shp({16}), DType::F16);
    jit::GeneratedKernel k = jit::generate_kernel(g, whole_graph_group(g));
    CHECK(k.vector_width == 8);
    CHECK(k.signature.args.back().kind == jit::ArgKind::VecFlag);
    const size_t vec = k.source.find("if (vec_ok)");
    const size_t tail = k.source.find("for (unsigned int i = start + tid");
    REQUIRE(vec != std::string::npos);
    REQUIRE(tail != std::string::npos);
    const std::string vloop = k.source.substr(vec, tail - vec);
    CHECK(vloop.find("const unsigned int q1 = fjk_udiv(rem, size1_mul, size1_shift);") != std::string::npos);
    CHECK(vloop.find("const unsigned int c1 = rem - q1 * size1;") != std::string::npos);
    CHECK(vloop.find("const unsigned int off_v1 = c1 * st_v1_1;") != std::string::npos);
    CHECK(vloop.find("fj_vload<fj_f16, 8>(in_v0 + i)") != std::string::npos);
    CHECK(vloop.find("fj_vload<fj_f16, 8>(in_v1 + off_v1)") != std::string::npos);
    // Halves reach the element function in storage form (converted there only where an f32 op needs them).
    CHECK(vloop.find("_elem(x_v0.v[j], x_v1.v[j], r_v") != std::string::npos);
    // The division chain sits outside the lane loop: once per vector.
    CHECK(vloop.find("fjk_udiv(rem, size1_mul") < vloop.find("for (int j = 0; j < 8; ++j)"));
    // The scalar loop stays as the fallback and the tail.
    CHECK(k.source.substr(tail).find("_elem(in_v0[i], in_v1[off_v1], r_v") != std::string::npos);
  }
  // Channel broadcast (nchw_normalize): img u8[N, C, H, W] with mean f32[1, C, 1, 1]. The mean is
  // broadcast along the innermost collapsed dim (H*W): one scalar load per vector, all lanes.
  {
    ir::GraphBuilder b("nchw");
    auto img = ir::Operand::of(b.add_input("img", DType::U8, shp({2, 3, 4, 4})));
    auto mean = ir::Operand::of(b.add_input("mean", DType::F32, shp({1, 3, 1, 1})));
    auto y = op2(b, Op::Sub, b.cast(img, DType::F32), mean, 3);
    b.add_output("y", y);
    ir::Graph g = b.finish();
    ir::FusionGroup grp = whole_graph_group(g);
    jit::GeneratedKernel k = jit::generate_kernel(g, grp);
    // The widest array sets the width: 16 bytes of f32 out a thread, 4 u8 pixels in one 4-byte load
    // (V = 16 from the u8 image, four f32 stores 64 bytes apart a thread, ran at half the bandwidth
    // on an H200: jit/codegen.cpp, vector_width).
    CHECK(k.vector_width == 4);
    CHECK(k.source.find("fj_vload<unsigned char, 4>(in_v0 + i)") != std::string::npos);
    CHECK(k.source.find("fj_vstore<float, 4>(out_v") != std::string::npos);
    CHECK(k.source.find("const float b_v1 = in_v1[off_v1];") != std::string::npos);
    CHECK(k.source.find("_elem(x_v0.v[j], b_v1, r_v") != std::string::npos);
    CHECK(k.signature.layout.dim_groups.size() == 3);
    // vec_ok needs aligned pointers AND H*W % 4 == 0, decided per launch (no new kernel).
    uint64_t in[2] = {0x1000, 0x2000}, out[1] = {0x3000};
    std::vector<ir::Shape> shapes = {shp({2, 3, 4, 4}), shp({1, 3, 1, 1})};
    CHECK(jit::pack_args(k.signature, in, out, {}, shapes, shp({2, 3, 4, 4}), {}).vectorized());
    shapes = {shp({2, 3, 3, 5}), shp({1, 3, 1, 1})};
    CHECK(!jit::pack_args(k.signature, in, out, {}, shapes, shp({2, 3, 3, 5}), {}).vectorized());
    shapes = {shp({2, 3, 3, 2}), shp({1, 3, 1, 1})};
    CHECK(!jit::pack_args(k.signature, in, out, {}, shapes, shp({2, 3, 3, 2}), {}).vectorized());
    shapes = {shp({2, 3, 2, 2}), shp({1, 3, 1, 1})};
    CHECK(jit::pack_args(k.signature, in, out, {}, shapes, shp({2, 3, 2, 2}), {}).vectorized());
    shapes = {shp({2, 3, 8, 2}), shp({1, 3, 1, 1})};
    CHECK(jit::pack_args(k.signature, in, out, {}, shapes, shp({2, 3, 8, 2}), {}).vectorized());
    uint64_t bad_in[2] = {0x1000, 0x2004};
    CHECK(!jit::pack_args(k.signature, bad_in, out, {}, shapes, shp({2, 3, 8, 2}), {}).vectorized());
    uint64_t bad_out[1] = {0x3008};  // f32 output 8-byte aligned only: its 16-byte stores would fault
    CHECK(!jit::pack_args(k.signature, in, bad_out, {}, shapes, shp({2, 3, 8, 2}), {}).vectorized());
    // Both compile with NVRTC to an sm_90 CUBIN.
    std::vector<jit::GeneratedKernel> ks = {k};
    ir::Graph gb = bias_graph(shp({6, 16}), shp({16}), DType::F16);
    ks.push_back(jit::generate_kernel(gb, whole_graph_group(gb)));
    jit::TranslationUnit tu = jit::emit_translation_unit(ks);
    const std::string err = nvrtc_compile(tu.source, tu.nvrtc_options);
    CHECK_MESSAGE(err == "", err.substr(0, 6000));
  }
}

TEST_CASE("dims broadcast the same way collapse; index width follows the element count") {
  // [2, 3, 4, 5] with bias [4, 5]: dims 0,1 collapse (bias broadcast), dims 2,3 collapse (full).
  ir::Graph g = bias_graph(shp({2, 3, 4, 5}), shp({4, 5}));
  jit::KernelLayout l = jit::compute_layout(g, whole_graph_group(g));
  REQUIRE(l.dim_groups.size() == 2);
  CHECK(l.dim_groups[0] == std::pair{0, 2});
  CHECK(l.dim_groups[1] == std::pair{2, 4});
  CHECK(l.access[0] == jit::InputAccess::Contiguous);
  CHECK(l.access[1] == jit::InputAccess::Strided);
  // Size-1 dims never split a collapse.
  ir::Graph g1 = bias_graph(shp({6, 1, 7}), shp({6, 1, 7}));
  CHECK(jit::compute_layout(g1, whole_graph_group(g1)).dim_groups.size() == 1);

  ir::Graph small = bias_graph(shp({2147483647}), shp({1}));
  CHECK(!jit::generate_kernel(small, whole_graph_group(small)).index64);
  ir::Graph big = bias_graph(shp({32768, 65536}), shp({65536}));  // exactly 2^31 elements
  jit::GeneratedKernel kb = jit::generate_kernel(big, whole_graph_group(big));
  CHECK(kb.index64);
  CHECK(kb.source.find("unsigned long long n") != std::string::npos);
  CHECK(kb.source.find("unsigned int") == std::string::npos);
  jit::CodegenOptions o32;
  o32.index_bits = 32;
  CHECK_THROWS_AS(jit::generate_kernel(big, whole_graph_group(big), o32), ir::InternalError);
}

TEST_CASE("pack_args: sizes and strides from the current shapes, layout checked") {
  ir::Graph g = bias_graph(shp({2, 3, 4, 5}), shp({4, 5}));
  ir::FusionGroup grp = whole_graph_group(g);
  jit::GeneratedKernel k = jit::generate_kernel(g, grp);
  uint64_t in[2] = {0x1000, 0x2000}, out[1] = {0x3000};
  jit::PackedArgs p = jit::pack_args(k.signature, g, grp, in, out, {}, {});
  REQUIRE(p.size() == k.signature.args.size());
  for (size_t i = 0; i < k.signature.args.size(); ++i) {
    const jit::ArgSlot& a = k.signature.args[i];
    if (a.kind == jit::ArgKind::NumElements) CHECK(*static_cast<uint32_t*>(p.params()[i]) == 120u);
    if (a.kind == jit::ArgKind::DimSize) CHECK(*static_cast<uint32_t*>(p.params()[i]) == 20u);
    if (a.kind == jit::ArgKind::DimDivMul) CHECK(*static_cast<uint32_t*>(p.params()[i]) == jit::div_magic32(20).mul);
    if (a.kind == jit::ArgKind::DimDivShift) CHECK(*static_cast<uint32_t*>(p.params()[i]) == 5u);
    if (a.kind == jit::ArgKind::Stride) CHECK(*static_cast<uint32_t*>(p.params()[i]) == 1u);
    if (a.kind == jit::ArgKind::InputPtr) CHECK(*static_cast<uint64_t*>(p.params()[i]) == in[a.index]);
  }
  jit::PackedArgs moved = std::move(p);
  CHECK(*static_cast<uint64_t*>(moved.params()[0]) == 0x1000);
  // A new dim value with the same broadcast pattern packs fine; a new pattern is refused.
  std::vector<ir::Shape> shapes = {shp({2, 3, 40, 5}), shp({40, 5})};
  CHECK_NOTHROW(jit::pack_args(k.signature, in, out, {}, shapes, shp({2, 3, 40, 5}), {}));
  std::vector<ir::Shape> other = {shp({2, 3, 4, 5}), shp({3, 4, 5})};
  CHECK_THROWS_AS(jit::pack_args(k.signature, in, out, {}, other, shp({2, 3, 4, 5}), {}), ir::InternalError);
  jit::LaunchShape huge{1u << 22, 1024};
  CHECK_THROWS_AS(jit::pack_args(k.signature, g, grp, in, out, {}, huge), ir::InternalError);
}

// The index math of 32-bit kernels divides by collapsed sizes with div_magic32's numbers (the same
// expression as the kernel prelude's fjk_udiv); it must equal x / d for every x < 2^31.
TEST_CASE("magic-number division equals integer division for every index below 2^31") {
  auto udiv = [](uint32_t x, jit::DivMagic m) {
    return (static_cast<uint32_t>((static_cast<uint64_t>(x) * m.mul) >> 32) + x) >> m.shift;
  };
  std::vector<uint64_t> ds;
  for (uint64_t d = 1; d <= 4100; ++d) ds.push_back(d);
  for (int k = 12; k < 31; ++k)
    for (int64_t e : {-3, -1, 0, 1, 3}) ds.push_back(static_cast<uint64_t>((int64_t{1} << k) + e));
  ds.push_back((uint64_t{1} << 31) - 1);
  for (uint64_t d : {262144ull, 50176ull, 89401ull, 357899ull, 8192ull * 3, 1000003ull}) ds.push_back(d);
  std::mt19937_64 rng(5);  // test-only randomness
  const uint32_t top = (1u << 31) - 1;
  size_t bad = 0;
  for (uint64_t d : ds) {
    const jit::DivMagic m = jit::div_magic32(d);
    std::vector<uint32_t> xs = {0, 1, top, top - 1};
    for (uint64_t q : {uint64_t{1}, uint64_t{2}, uint64_t{1000}, top / d, top / d - 1})
      for (int64_t e : {-1, 0, 1}) {
        const int64_t x = static_cast<int64_t>(q * d) + e;
        if (x >= 0 && x <= top) xs.push_back(static_cast<uint32_t>(x));
      }
    for (int r = 0; r < 64; ++r) xs.push_back(static_cast<uint32_t>(rng() & top));
    for (uint32_t x : xs)
      if (udiv(x, m) != x / d && bad++ < 5) MESSAGE("x=" << x << " d=" << d << " got " << udiv(x, m));
  }
  CHECK(bad == 0);
  CHECK_THROWS_AS(jit::div_magic32(0), ir::InternalError);
  CHECK_THROWS_AS(jit::div_magic32(uint64_t{1} << 31), ir::InternalError);
}

TEST_CASE("constants are printed to round-trip exactly") {
  auto f32 = [](float v) { ir::Scalar s; s.dtype = DType::F32; s.f = v; return jit::constant_literal(s); };
  CHECK(f32(1.5f) == "0x1.8p+0f");
  CHECK(f32(std::numeric_limits<float>::max()) == "0x1.fffffep+127f");
  CHECK(f32(std::numeric_limits<float>::denorm_min()) == "0x1p-149f");
  CHECK(f32(-0.0f) == "-0x0p+0f");
  CHECK(f32(std::numeric_limits<float>::infinity()) == "fjk_f32_from_bits(0x7f800000u)");
  CHECK(f32(-std::numeric_limits<float>::infinity()) == "fjk_f32_from_bits(0xff800000u)");
  CHECK(f32(std::numeric_limits<float>::quiet_NaN()) == "fjk_f32_from_bits(0x7fc00000u)");
  ir::Scalar d;
  d.dtype = DType::F64;
  d.f = std::numeric_limits<double>::denorm_min();
  CHECK(jit::constant_literal(d) == "0x0.0000000000001p-1022");
  d.f = 0.1;
  CHECK(jit::constant_literal(d) == "0x1.999999999999ap-4");
  ir::Scalar i;
  i.dtype = DType::I32;
  i.i = INT32_MIN;
  CHECK(jit::constant_literal(i) == "(-2147483647 - 1)");
  i.dtype = DType::I64;
  i.i = INT64_MIN;
  CHECK(jit::constant_literal(i) == "(-9223372036854775807LL - 1LL)");
  i.dtype = DType::I8;
  i.i = -128;
  CHECK(jit::constant_literal(i) == "(signed char)(-128)");
}

TEST_CASE("f16 nodes are rounded per node in strict mode only") {
  ir::Graph g = bias_graph(shp({8}), shp({8}), DType::F16);
  jit::GeneratedKernel k = jit::generate_kernel(g, whole_graph_group(g));
  // Strict: mul and add of halves stay in storage form (native half instructions on the GPU);
  // exp computes in f32 and rounds once to storage form, which is the output.
  CHECK(k.source.find("= fj_mul_f16(v0h, v1h);") != std::string::npos);
  CHECK(k.source.find("= fj_add_f16(v2h, v3h);") != std::string::npos);
  CHECK(k.source.find("= fj_store_f16(fj_exp(v4));") != std::string::npos);
  CHECK(k.source.find("fj_round_f16(") == std::string::npos);
  CHECK(k.source.find("fj_f16& o_v5") != std::string::npos);
  CHECK(k.vector_width == 8);
  jit::CodegenOptions fast;
  fast.fast_math = true;
  jit::GeneratedKernel kf = jit::generate_kernel(g, whole_graph_group(g), fast);
  CHECK(kf.source.find("fj_round_f16(") == std::string::npos);
  CHECK(kf.source.find("fj_mul_f16") == std::string::npos);  // fast: halves are f32 throughout
  CHECK(kf.source.find("= fj_mul(v0, v1);") != std::string::npos);
  CHECK(kf.source.find("= fj_store_f16(v5);") != std::string::npos);  // rounded once, at the output
  CHECK(kf.nvrtc_options == std::vector<std::string>{"--std=c++17", "--use_fast_math", "--fmad=true"});
  std::vector<jit::GeneratedKernel> mixed = {k, kf};
  CHECK_THROWS_AS(jit::emit_translation_unit(mixed), ir::InternalError);
}

// Every op on every dtype it accepts, one kernel per node, all in ONE translation unit. The
// scalar loop alone keeps this big program quick to compile; vector_kernels() covers the vector
// path for every dtype.
std::vector<jit::GeneratedKernel> every_op_kernels() {
  jit::CodegenOptions opts;
  opts.vectorize = false;
  std::vector<jit::GeneratedKernel> ks;
  const DType types[] = {DType::Bool, DType::I8, DType::U8, DType::I32, DType::I64,
                         DType::F16, DType::BF16, DType::F32, DType::F64};
  for (int o = 0; o < ir::kNumOps; ++o) {
    const Op op = static_cast<Op>(o);
    if (ir::is_leaf(op) || ir::is_reduction(op)) continue;  // reductions: tests/test_reduce.cpp
    for (DType t : types) {
      ir::GraphBuilder b("ops");
      std::vector<ir::Operand> args;
      for (int a = 0; a < ir::op_arity(op); ++a)
        args.push_back(ir::Operand::of(b.add_input(fmt::format("a{}", a), (op == Op::Where && a == 0) ? DType::Bool : t,
                                                   shp({a == 1 ? 1 : 5, 7}))));
      try {
        ir::Operand r = op == Op::Cast ? b.cast(args[0], types[(static_cast<int>(t) + 3) % 9]) : b.apply(op, args);
        b.add_output("r", r);
      } catch (const ir::UserError&) {
        continue;  // op not defined on this dtype (e.g. neg of bool)
      }
      ir::Graph g = b.finish();
      ir::Plan p = ir::plan_unfused(g);
      if (p.groups.empty()) p.groups.push_back(whole_graph_group(g));  // until the planner lands
      for (const ir::FusionGroup& grp : p.groups) ks.push_back(jit::generate_kernel(g, grp, opts));
    }
  }
  return ks;
}

// The vector path for every dtype: y = where(c, a, cast(b)) with contiguous arrays, broadcast
// rows and columns (and a 0-d uniform input), strict and fast mode.
std::vector<jit::GeneratedKernel> vector_kernels(bool fast) {
  std::vector<jit::GeneratedKernel> ks;
  jit::CodegenOptions opts;
  opts.fast_math = fast;
  const DType types[] = {DType::Bool, DType::I8, DType::U8, DType::I32, DType::I64,
                         DType::F16, DType::BF16, DType::F32, DType::F64};
  // `a` contiguous, a broadcast row (strided, contiguous along the inner dim) and a broadcast
  // column (strided, broadcast along the inner dim).
  for (DType t : types)
    for (const ir::Shape& ashape : {shp({5, 7}), shp({7}), shp({5, 1})}) {
      ir::GraphBuilder b("vec");
      auto c = ir::Operand::of(b.add_input("c", DType::Bool, shp({5, 7})));
      auto a = ir::Operand::of(b.add_input("a", t, ashape));
      auto s = ir::Operand::of(b.add_input("s", DType::F16, shp({})));
      ir::Operand w[3] = {c, a, b.cast(s, t)};
      b.add_output("y", b.apply(Op::Where, w));
      ir::Graph g = b.finish();
      ks.push_back(jit::generate_kernel(g, whole_graph_group(g), opts));
      CHECK(ks.back().vector_width > 1);
    }
  return ks;
}

// The every-op program is compiled to PTX for compute_90 (NVRTC's front end and NVVM: what can
// reject generated source); the vector kernels go all the way to an sm_90 CUBIN (ptxas too).
// test_scalar_nvrtc covers the prelude itself on sm_75..sm_100.
TEST_CASE("every op's kernel compiles with NVRTC for sm_90 without any include path") {
  std::vector<jit::GeneratedKernel> ks = every_op_kernels();
  CHECK(ks.size() > 200);
  jit::TranslationUnit tu = jit::emit_translation_unit(ks);
  MESSAGE(tu.kernel_names.size() << " distinct kernels in one NVRTC program");
  CHECK(tu.source.find("#include <cuda") == std::string::npos);
  std::string err = nvrtc_compile(tu.source, tu.nvrtc_options, "compute_90");
  CHECK_MESSAGE(err == "", err.substr(0, 6000));
  for (bool fast : {false, true}) {
    std::vector<jit::GeneratedKernel> vk = vector_kernels(fast);
    jit::TranslationUnit vtu = jit::emit_translation_unit(vk);
    err = nvrtc_compile(vtu.source, vtu.nvrtc_options);
    CHECK_MESSAGE(err == "", err.substr(0, 6000));
  }
}

TEST_CASE("every op's kernel compiles with the host compiler") {
  std::vector<jit::GeneratedKernel> ks = every_op_kernels();
  // -O0: whether the host compiler accepts the source does not depend on the level, and
  // test_cpu_path compiles and runs every op at the product's level (jit/host_compile.h).
  jit::HostCompileOptions quick;
  quick.opt_level = "-O0";
  jit::HostCompileResult r;
  try {
    r = jit::host_compile(ks, quick);
  } catch (const jit::HostCompileError& e) {
    FAIL(std::string(e.what()).substr(0, 6000));
  }
  REQUIRE(r.module);
  std::vector<jit::GeneratedKernel> vk = vector_kernels(false);
  CHECK_NOTHROW(jit::host_compile(vk, quick));
  for (const auto& k : ks) CHECK(reinterpret_cast<void*>(r.module->trampoline(k.name)) != nullptr);
  // A second compile of the same kernels is a hit in this process.
  CHECK(jit::host_compile(ks, quick).memory_hit);
}

// A failed host compile: "host compiler failed (exit code N): COMMAND", at most 20 lines of the
// compiler's output, and the path of the kept source, not the whole generated source.
std::string host_compile_failure(std::vector<jit::GeneratedKernel> ks, const jit::HostCompileOptions& o) {
  try {
    jit::host_compile(ks, o);
  } catch (const jit::HostCompileError& e) {
    return e.what();
  }
  FAIL("expected a HostCompileError");
  return {};
}

TEST_CASE("a host compiler failure is a short error: command, exit code, first lines, kept source") {
  ir::Graph g = bias_graph(shp({8}), shp({8}));
  jit::GeneratedKernel k = jit::generate_kernel(g, whole_graph_group(g));
  for (int i = 0; i < 40; ++i) k.source += "\nthis is not C++ " + std::to_string(i) + ";\n";  // 40+ error lines
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fj-hostfail-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  jit::HostCompileOptions o;
  o.cache_dir = dir.string();
  std::string msg = host_compile_failure({k}, o);
  CAPTURE(msg);
  CHECK(msg.rfind("host compiler failed (exit code 1): ", 0) == 0);
  CHECK(msg.find("this is not C++ 0") != std::string::npos);  // the first error is shown
  CHECK(msg.find("more lines)") != std::string::npos);       // and the rest is counted, not shown
  CHECK(std::count(msg.begin(), msg.end(), '\n') <= 25);
  CHECK(msg.find("fj_scalar") == std::string::npos);  // no generated source in the message
  const std::string keep = "source kept for inspection: ";
  REQUIRE(msg.find(keep) != std::string::npos);
  const std::filesystem::path src = msg.substr(msg.find(keep) + keep.size());
  CHECK(src.parent_path().parent_path() == std::filesystem::canonical(dir));
  CHECK(testing::read_file(src).find("this is not C++ 39;") != std::string::npos);

  // A compiler that is not there: exit code 127 in words, not a raw wait status (32512).
  {
    ScopedEnv cxx("CXX", "/nonexistent/c++");
    msg = host_compile_failure({jit::generate_kernel(g, whole_graph_group(g))}, o);
  }
  CAPTURE(msg);
  CHECK(msg.rfind("host compiler failed (not found: the shell could not run it (exit code 127); the CPU path needs a "
                  "C++17 compiler: install g++ or clang++, or set CXX to one): /nonexistent/c++ ", 0) == 0);
  CHECK(msg.find("32512") == std::string::npos);
  // With the disk cache off nothing stays on disk, so the source is not kept.
  o.disk_cache = false;
  msg = host_compile_failure({k}, o);
  CHECK(msg.find("source not kept: the disk cache is off") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a process that ignores SIGCHLD still compiles on the CPU path; a failure there says why it is unsure") {
  // SIG_IGN makes the kernel reap every child, so pclose cannot learn the compiler's status
  // (ECHILD): every compile failed as "could not be started" although the compiler had run. A
  // parent's SIG_IGN survives exec, so a program started by such a daemon is in this state too.
  struct IgnoreSigchld {
    void (*before)(int) = std::signal(SIGCHLD, SIG_IGN);
    ~IgnoreSigchld() { std::signal(SIGCHLD, before); }
  } ignore;
  ir::Graph g = bias_graph(shp({8}), shp({8}));
  jit::GeneratedKernel k = jit::generate_kernel(g, whole_graph_group(g));
  k.source += "\n// a source of its own: " + std::to_string(::getpid()) + "\n";  // compiled here, not a hit
  jit::HostCompileOptions o;
  o.disk_cache = false;
  o.opt_level = "-O0";
  jit::HostCompileResult r;
  const std::vector<jit::GeneratedKernel> ks = {k};
  CHECK_NOTHROW(r = jit::host_compile(ks, o));
  CHECK(r.module);
  k.source += "this is not C++;\n";
  const std::string msg = host_compile_failure({k}, o);
  CHECK(msg.rfind("host compiler failed (its exit status is unknown: this process ignores SIGCHLD", 0) == 0);
}

// A kernel whose threads each run their share of fjk_stage_row (the prelude's copy of a row into
// the row cache): `T` the cached storage type, `S` the input's (fj_bool_in for bool). The copy has
// no barrier inside, so the host trampoline's serial loop over threads is the block.
jit::GeneratedKernel stage_row_kernel(const std::string& name, const std::string& t, const std::string& s) {
  jit::GeneratedKernel k;
  k.name = name;
  const std::string params = fmt::format("const {}* src, {}* dst, long long n, unsigned long long stride", s, t);
  for (const char* suffix : {"", "_s"})
    k.source += fmt::format("extern \"C\" __global__ void {}{}({}) {{\n"
                            "  fjk_stage_row(dst, src, n, stride, (int)threadIdx.x, (int)blockDim.x);\n  fjk_stage_wait();\n}}\n",
                            name, suffix, params);
  using jit::ArgKind;
  k.signature.args = {{ArgKind::InputPtr, 0, -1, -1, ir::DType::F32, 8, "src", "const " + s + "*"},
                      {ArgKind::OutputPtr, 0, -1, -1, ir::DType::F32, 8, "dst", t + "*"},
                      {ArgKind::RowLength, -1, -1, -1, ir::DType::I64, 8, "n", "long long"},
                      {ArgKind::Workspace, -1, -1, -1, ir::DType::I64, 8, "stride", "unsigned long long"}};
  k.strided_signature = k.signature;
  return k;
}

TEST_CASE("the row cache's copy: every element once at its place, for any thread count, stride and alignment") {
  std::vector<jit::GeneratedKernel> ks = {stage_row_kernel("fj_stage_f32", "float", "float"),
                                          stage_row_kernel("fj_stage_bf16", "fj_bf16", "fj_bf16"),
                                          stage_row_kernel("fj_stage_u8", "unsigned char", "unsigned char"),
                                          stage_row_kernel("fj_stage_bool", "bool", "fj_bool_in")};
  jit::HostCompileOptions o;
  o.opt_level = "-O0";
  o.check_alignment = true;  // a 16-byte unit at a misaligned address traps, as it faults on a GPU
  const jit::HostCompileResult r = jit::host_compile(ks, o);
  REQUIRE(r.module);
  alignas(16) unsigned char src[1024], dst[1024 + 64];
  for (int i = 0; i < 1024; ++i) src[i] = static_cast<unsigned char>(i * 37 + 11);
  struct Case {
    const char* name;
    int size;
  };
  for (const Case c : {Case{"fj_stage_f32", 4}, Case{"fj_stage_bf16", 2}, Case{"fj_stage_u8", 1}, Case{"fj_stage_bool", 1}}) {
    const jit::HostTrampoline run = r.module->trampoline(c.name);
    for (long long n : {0LL, 1LL, 3LL, 4LL, 8LL, 16LL, 17LL, 63LL, 64LL, 100LL})
      for (unsigned long long stride : {1ULL, 3ULL, 0ULL})
        for (int offset : {0, 2, 4, 16})  // bytes from 16-byte alignment, the input's start
          for (unsigned threads : {1U, 3U, 32U, 256U}) {
            if (offset % c.size != 0 || (n > 0 && offset + (n - 1) * stride * c.size + c.size > 1024)) continue;
            CAPTURE(c.name);
            CAPTURE(n);
            CAPTURE(stride);
            CAPTURE(offset);
            CAPTURE(threads);
            std::memset(dst, 0xEE, sizeof dst);
            const void* sp = src + offset;
            void* dp = dst;
            void* params[4] = {&sp, &dp, &n, &stride};
            run(params, 1, threads, nullptr);
            bool same = true;
            for (long long i = 0; i < n; ++i) {
              const unsigned char* from = src + offset + static_cast<size_t>(i) * stride * c.size;
              if (std::string(c.name) == "fj_stage_bool")  // any nonzero byte is true, cached as 1
                same = same && dst[i] == (from[0] != 0 ? 1 : 0);
              else
                same = same && std::memcmp(dst + i * c.size, from, static_cast<size_t>(c.size)) == 0;
            }
            CHECK(same);
            CHECK(dst[n * c.size] == 0xEE);  // nothing past the row
          }
  }
}
