// Reduction kernels on the CPU path: every reduction op x dtype x axis pattern, keepdim, size-1
// and zero-size axes, rows of length 1, primes and lengths around the chunk size, NaN/inf rows,
// fused with prologue and epilogue: fused, unfused and the reference agree bit for bit. And the
// generated kernel run with 1 to 1024 real threads per block (jit::HostCompileOptions::
// block_threads: a pthread barrier as __syncthreads, warp shuffles through memory) and several
// grid sizes gives the same bits: the fixed order does not depend on the launch.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "ir/plan.h"
#include "ir/reduce.h"
#include "ir/reduce_group.h"
#include "ir/reference.h"
#include "jit/codegen.h"
#include "jit/host_compile.h"
#include "jit/kernel_abi.h"
#include "jit/launch.h"
#include "support/cpu_check.h"
#include "support/random_graph.h"

using namespace fusejit;

namespace {

using testing::finite_inputs;

testing::Case reduce_case(const std::string& text, uint64_t seed) {
  return testing::make_case(text, ir::parse_graph(text, "reduce.txt"), seed);
}

// `y = OP(x, AXES[, keepdim])` over x : DT[shape], plus an epilogue reading y per element when the
// result keeps its dims and the dtype has a subtraction.
std::string reduce_text(const char* op, const char* dt, const std::string& shape, const std::string& axes, bool keep) {
  std::string t = fmt::format("input x : {}[{}]\ny = {}(x{}{})\n", dt, shape, op, axes.empty() ? "" : ", " + axes,
                              keep ? ", keepdim" : "");
  const bool sub = std::string(dt) != "bool";
  if (keep && sub) return t + "e = x - y\noutput y, e\n";
  return t + "output y\n";
}

void check_all(std::vector<testing::Case>& cases, int expect_fused_kernels = -1) {
  jit::HostCompileOptions quick;
  quick.opt_level = "-O0";  // results do not depend on it (jit/host_compile.h)
  testing::compile_all(cases, quick);
  for (const testing::Case& c : cases) {
    CAPTURE(c.label);
    if (expect_fused_kernels >= 0) CHECK(c.fused.kernels.size() == static_cast<size_t>(expect_fused_kernels));
    CHECK(testing::check_case(c) == 0);
  }
}

// check_all's cases (compiled) run again through the fast entry's scalar loop (vec_ok 0) and the
// strided entry: each must give the reference's bits too.
void check_other_entries(const std::vector<testing::Case>& cases) {
  for (const testing::Case& c : cases) {
    CAPTURE(c.label);
    jit::CpuRunOptions scalar, strided;
    scalar.vector_path = false;
    strided.force_strided = true;
    CHECK(testing::check_case(c, scalar) == 0);
    CHECK(testing::check_case(c, strided) == 0);
  }
}

}  // namespace

TEST_CASE("every reduction op and dtype over the innermost, outer, several and all axes") {
  std::vector<testing::Case> cases;
  uint64_t seed = 100;
  const char* ops[] = {"sum", "mean", "prod", "amax", "amin", "argmax", "argmin"};
  const char* dtypes[] = {"bool", "i8", "u8", "i32", "i64", "f16", "bf16", "f32", "f64"};
  for (const char* op : ops)
    for (const char* dt : dtypes) {
      const bool is_float = dt[0] == 'f' || (dt[0] == 'b' && dt[1] == 'f');
      if (std::string(op) == "mean" && !is_float) continue;  // refused, as torch.mean refuses integers
      cases.push_back(reduce_case(reduce_text(op, dt, "3, 5, 7", "-1", true), seed++));
      cases.push_back(reduce_case(reduce_text(op, dt, "3, 5, 7", "0", false), seed++));
    }
  // Axis patterns, keepdim or not, on a few dtypes.
  const char* patterns[] = {"0", "1", "-1", "[0, 2]", "[1, 2]", "[0, 1]", "[0, 1, 2]", ""};
  for (const char* dt : {"f32", "bf16", "i32"})
    for (const char* ax : patterns)
      for (bool keep : {false, true}) cases.push_back(reduce_case(reduce_text("sum", dt, "4, 3, 6", ax, keep), seed++));
  for (const char* ax : patterns) cases.push_back(reduce_case(reduce_text("amax", "f32", "2, 3, 5", ax, true), seed++));
  for (const char* ax : patterns) cases.push_back(reduce_case(reduce_text("var", "f32", "2, 3, 5", ax, true), seed++));
  for (const char* ax : {"0", "1", "-1", ""})  // argmax/argmin: one axis or all (the flattened index)
    for (bool keep : {false, true}) {
      cases.push_back(reduce_case(reduce_text("argmax", "f32", "2, 3, 5", ax, keep), seed++));
      cases.push_back(reduce_case(reduce_text("argmin", "bf16", "2, 3, 5", ax, keep), seed++));
    }
  cases.push_back(reduce_case("input x : f64[4, 9]\ny = mean(x, 0, correction=3)\noutput y\n", seed++));
  check_all(cases);
}

TEST_CASE("size-1 and zero-size axes, rows of length 1, primes and lengths around the chunk size") {
  std::vector<testing::Case> cases;
  uint64_t seed = 300;
  for (const char* shape : {"1, 1", "5, 1", "1, 7", "0, 4", "4, 0", "2, 8191", "2, 8192", "2, 8193", "1, 16411", "1, 24577"})
    for (const char* op : {"sum", "prod", "mean"}) {
      cases.push_back(reduce_case(reduce_text(op, "f32", shape, "-1", true), seed++));
      cases.push_back(reduce_case(reduce_text(op, "f32", shape, "0", false), seed++));
    }
  for (const char* shape : {"1, 1", "2, 8193", "3, 257"}) {
    cases.push_back(reduce_case(reduce_text("amin", "f16", shape, "-1", false), seed++));
    cases.push_back(reduce_case(reduce_text("amax", "i64", shape, "", false), seed++));
  }
  for (const char* shape : {"1, 1", "5, 1", "1, 7", "0, 4", "2, 8191", "2, 8192", "2, 8193", "1, 16411"})
    for (const char* op : {"argmax", "argmin"}) {
      cases.push_back(reduce_case(reduce_text(op, "f32", shape, "-1", true), seed++));
      cases.push_back(reduce_case(reduce_text(op, "i8", shape, "-1", false), seed++));  // many ties
    }
  // A named dim at 1 keeps its dim; a whole-tensor reduction of a 0-d value.
  cases.push_back(reduce_case("dim T = 1\ninput x : f32[T, 9]\ny = mean(x, -1, keepdim)\nz = x / y\noutput y, z\n", seed++));
  cases.push_back(reduce_case("input x : f32[]\ny = sum(x)\noutput y\n", seed++));
  // Composites over an empty axis: softmax of nothing is empty, logsumexp -inf (their amax starts
  // from -inf, initial=-inf), as PyTorch; an amin from +inf.
  for (const char* dt : {"f32", "bf16"})
    cases.push_back(reduce_case(
        fmt::format("input x : {}[3, 0]\ns = softmax(x, -1)\nl = log_softmax(x, 1)\ne = logsumexp(x, -1)\n"
                    "k = logsumexp(x, 1, keepdim)\nm = amin(x, -1, initial=inf)\noutput s, l, e, k, m\n",
                    dt),
        seed++));
  // Long rows again with finite inputs (finite_inputs).
  for (size_t i = 0, n = cases.size(); i < n; ++i) {
    if (ir::num_elements(cases[i].graph.node(cases[i].graph.inputs[0]).shape) < 1000) continue;
    testing::Case finite = cases[i];
    finite.label += " (finite inputs)";
    finite.inputs = finite_inputs(finite.graph, seed++);
    cases.push_back(std::move(finite));
  }
  check_all(cases);
}

TEST_CASE("softmax, log_softmax, logsumexp, RMSNorm and LayerNorm fuse into one kernel and match the reference") {
  std::vector<testing::Case> cases;
  uint64_t seed = 500;
  for (const char* shape : {"3, 5", "2, 1", "4, 300", "2, 8193"})
    for (const char* dt : {"f32", "bf16", "f16", "f64"}) {
      for (const char* f : {"softmax(x, -1)", "log_softmax(x, -1)", "logsumexp(x, -1, keepdim)", "logsumexp(x, -1)"})
        cases.push_back(reduce_case(fmt::format("input x : {}[{}]\ny = {}\noutput y\n", dt, shape, f), seed++));
      if (shape[0] != '4')  // var and std: the same code on three of the shapes (CI time)
        for (const char* f : {"var(x, -1)", "std(x, -1, keepdim, correction=0)"})
          cases.push_back(reduce_case(fmt::format("input x : {}[{}]\ny = {}\noutput y\n", dt, shape, f), seed++));
      cases.push_back(reduce_case(
          fmt::format("input x : {0}[{1}]\ninput w : {0}[{2}]\nparam eps : f32 = 1e-6\nh = cast(x, f32)\n"
                      "ms = mean(h * h, -1, keepdim)\ny = w * cast(h * rsqrt(ms + eps), {0})\noutput y\n",
                      dt, shape, std::string(shape).substr(std::string(shape).find(' ') + 1)),
          seed++));
      cases.push_back(reduce_case(
          fmt::format("input x : {0}[{1}]\ninput w : {0}[{2}]\ninput b : {0}[{2}]\nmu = mean(x, -1, keepdim)\n"
                      "d = x - mu\nvar = mean(d * d, -1, keepdim)\ny = d * rsqrt(var + 1e-5) * w + b\noutput y\n",
                      dt, shape, std::string(shape).substr(std::string(shape).find(' ') + 1)),
          seed++));
    }
  check_all(cases, 1);
}

TEST_CASE("reductions over two axes of one shape: each value follows the reduction it reads") {
  // softmax over rows plus softmax over columns: two kernels (one per axis), not five.
  std::vector<testing::Case> two;
  two.push_back(reduce_case("input x : f32[64, 32]\ny = softmax(x, -1) + softmax(x, 0)\noutput y\n", 700));
  two.push_back(reduce_case("input x : f32[16, 16]\na = softmax(x, -1)\nb = log_softmax(x, 0)\noutput a, b\n", 701));
  check_all(two, 2);
  // var over axis 0 of a value an axis-1 group computes: the squares follow var's mean (axis 0),
  // so var is one kernel and no [24, 24] temporary is written; the axis-0 sum a, first in the
  // text, joins var's kernel, which moves after b's (3 kernels before groups moved).
  std::vector<testing::Case> three;
  three.push_back(reduce_case("input x : f32[24, 24]\na = sum(x, 0)\nb = sum(x, 1, keepdim)\nd = x - b + a\n"
                              "e = var(d, 0)\noutput e\n",
                              702));
  check_all(three, 2);
  // x - amax(x, -1) without keepdim broadcasts the row maxima by NumPy's right alignment (along
  // columns): that value leaves the reduction group for an elementwise kernel, and the softmax of
  // the same x stays one kernel (the fallback isolated every reduction: six kernels).
  std::vector<testing::Case> detached;
  detached.push_back(reduce_case("input x : f32[64, 64]\nm = amax(x, -1)\ny = x - m\ns = softmax(x, -1)\noutput y, s\n", 703));
  detached.push_back(reduce_case("input x : f32[8, 8]\ninput b : f32[8]\nm = sum(x, -1)\nc = m + b\n"
                                 "r = x / sum(x, -1, keepdim)\noutput c, r\n", 704));
  check_all(detached, 2);
  // logsumexp without keepdim: its two amax (with and without keepdim) are one pass.
  const ir::Graph lse = ir::parse_graph("input x : f32[8, 100]\ny = logsumexp(x, -1)\noutput y\n", "l.txt");
  const ir::Plan p = ir::plan_fusion(lse);
  REQUIRE(p.groups.size() == 1);
  CHECK(p.groups[0].note.find("3 reductions, 2 distinct: 2 passes") != std::string::npos);
}

TEST_CASE("a row of several innermost dims is flat in the fast entry: its vector path, the same bits") {
  // sum(x) of a matrix, mean over [H, W]: element k of a C-contiguous row at k from its base, V at
  // a time (it was one division per dim and element, and no vector path). Inputs broadcast along
  // the whole row ([N, 1, 1]) or along none of it ([H, W]) keep it flat; one along part of it ([W])
  // or axes [0, 2] (a kept dim between) do not.
  struct Flat {
    std::string text;
    int vector_width;  // of the fused kernel
  };
  const Flat flats[] = {
      {"input x : f32[6, 16]\ny = sum(x)\noutput y\n", 4},
      {"input x : bf16[3, 5, 8]\ny = amax(x, [1, 2], keepdim)\ne = x - y\noutput y, e\n", 8},
      {"input x : f16[3, 5, 8]\ny = argmax(x, keepdim)\noutput y\n", 8},
      {"input x : f32[3, 5, 12]\ninput w : f32[5, 12]\ninput g : f32[3, 1, 1]\nm = mean(x * w, [1, 2], keepdim)\n"
       "v = var(x, [1, 2], keepdim)\ny = (x - m) * rsqrt(v + 1e-5) * g\noutput y\n", 4},
      {"input x : f32[2, 3, 9]\nm = amax(x, [1, 2], keepdim)\ne = exp(x - m)\ny = e / sum(e, [1, 2], keepdim)\noutput y\n",
       4},  // rows of 27: not a multiple of 4 (vec_ok 0)
      {"input x : f32[3, 5, 8]\ninput w : f32[8]\ny = sum(x * w, [1, 2])\noutput y\n", 1},
      {"input x : f32[4, 3, 8]\ny = sum(x, [0, 2], keepdim)\ne = x - y\noutput y, e\n", 1},
  };
  std::vector<testing::Case> cases;
  uint64_t seed = 900;
  for (const Flat& f : flats) {
    cases.push_back(reduce_case(f.text, seed++));
    CAPTURE(f.text);
    REQUIRE(cases.back().fused.kernels.size() == 1);
    CHECK(cases.back().fused.kernels[0].vector_width == f.vector_width);
  }
  check_all(cases, 1);
  // The fast entry's scalar loop (flat offsets, no vectors) and the strided entry (every dim
  // addressed) give the same bits.
  check_other_entries(cases);
}

TEST_CASE("an input broadcast along a row by a named dim of 1 is read at stride 0 there, in every entry") {
  // b's S = 1 against the row's 8 (or [S, 8] against [6, 8]): broadcast, although b names a dim
  // there. The fast entry read b at stride 1 along the row, past its end (wrong sums, and on a GPU
  // an illegal address); the flat row of several dims did too.
  const char* texts[] = {
      "dim S = 1\ninput x : f32[2, 8]\ninput b : f32[2, S]\ny = sum(x + b, -1)\noutput y\n",
      "dim S = 1\ninput x : f32[2, 8]\ninput b : f32[2, S]\ny = x * b\nz = y - amax(y, -1, keepdim)\noutput z\n",
      "dim S = 1\ninput x : bf16[3, 16]\ninput b : bf16[3, S]\ny = softmax(x * b, -1)\noutput y\n",
      "dim S = 1\ninput x : f32[2, 6, 8]\ninput b : f32[S, 8]\ny = sum(x + b, [1, 2])\noutput y\n",
      "dim S = 1\ndim T = 1\ninput x : f32[2, 6, 8]\ninput b : f32[S, T]\nm = mean(x * b, [1, 2], keepdim)\n"
      "y = x - m\noutput y\n",
  };
  std::vector<testing::Case> cases;
  uint64_t seed = 950;
  for (const char* t : texts) cases.push_back(reduce_case(t, seed++));
  check_all(cases, 1);
  check_other_entries(cases);
}

TEST_CASE("random graphs with reductions: fused, unfused and reference agree") {
  std::vector<testing::Case> cases;
  for (uint64_t s = 0; s < 120; ++s) {
    testing::RandomGraphOptions o;
    o.seed = 9100 + s;
    o.num_ops = 10;
    o.reduction_rate = 0.35;
    o.normalize_rate = 0.5;
    cases.push_back(testing::make_case(fmt::format("random seed {}", o.seed), testing::random_graph(o), o.seed));
  }
  int with_reduction_groups = 0, with_kept_values = 0;
  for (const testing::Case& c : cases) {
    for (const ir::FusionGroup& grp : c.fused.plan.groups)
      if (jit::reduction_operand(c.graph, grp) != ir::kNoNode) {
        ++with_reduction_groups;
        break;
      }
    for (const ir::FusionGroup& grp : c.fused.plan.groups)
      if (jit::reduction_operand(c.graph, grp) != ir::kNoNode && !ir::analyze_reduce_group(c.graph, grp).kept_values.empty()) {
        ++with_kept_values;
        break;
      }
  }
  CHECK(with_reduction_groups > 40);  // the generator does reduce (48 of 120)
  MESSAGE("random reduction graphs with kept values: ", with_kept_values);
  CHECK(with_kept_values > 3);  // and makes epilogues that read what a pass computed
  check_all(cases);
}

TEST_CASE("the row cache limit: the GPU's opt-in shared memory less the static reserve; sizes that saturate never fit") {
  CHECK(ir::row_cache_limit_for(227 * 1024) == 215 * 1024);  // sm_90
  CHECK(ir::row_cache_limit_for(163 * 1024) == 151 * 1024);  // sm_80
  CHECK(ir::row_cache_limit_for(64 * 1024) == 52 * 1024);    // sm_75
  CHECK(ir::row_cache_limit_for(48 * 1024) == 48 * 1024);    // never under the 48 KiB default
  const int f32[] = {4}, two[] = {1, 8};
  CHECK(ir::row_cache_bytes(two, 17) == 32 + 144);  // each input's row rounded up to 16 bytes
  CHECK(ir::row_cache_at(two, 17, 1, 176) == 176);
  CHECK(ir::row_cache_at(two, 17, 1, 175) == 0);
  CHECK(ir::row_cache_at(two, 17, 2, 176) == 0);  // a split row is never on chip
  // A row of 2^62 f32 takes 2^64 bytes: its size saturates at INT64_MAX and does not fit even
  // under the largest limit.
  CHECK(ir::row_cache_bytes(f32, int64_t{1} << 62) == INT64_MAX);
  CHECK(ir::row_cache_at(f32, int64_t{1} << 62, 1, INT64_MAX) == 0);
  // The plan says a row's size as rounded, and what it was.
  const ir::Graph g = ir::parse_graph("input x : f32[2, 7]\ny = softmax(x, -1)\noutput y\n", "t.txt");
  ir::PlanOptions po;
  po.rules.row_cache_limit = 28;
  const ir::Plan plan = ir::plan_fusion(g, po);
  REQUIRE(plan.groups.size() == 1);
  CHECK_MESSAGE(plan.groups[0].note.find("a row of x takes 32 B (28 B, each input's row rounded up to 16), over the 28 B row cache") !=
                    std::string::npos,
                plan.groups[0].note);
  // A row past 2^63 - 1 bytes says so, whatever the limit.
  const ir::Graph huge = ir::parse_graph("dim L = 2305843009213693951\ninput x : f32[1, L]\ny = softmax(x, -1)\noutput y\n", "t.txt");
  po.rules.row_cache_limit = INT64_MAX;
  po.rules.row_split = 1;
  const ir::Plan hp = ir::plan_fusion(huge, po);
  REQUIRE(hp.groups.size() == 1);
  CHECK_MESSAGE(hp.groups[0].note.find("each reading x from memory: a row of x takes more than 2^63 - 1 bytes") != std::string::npos,
                hp.groups[0].note);
}

TEST_CASE("few long rows split over blocks (several launches) and give the reference's bits") {
  CHECK(ir::choose_row_split(1, 32 * 8192) == 16);
  CHECK(ir::choose_row_split(1, 128256) == 8);         // 16 chunks (a vocabulary-sized row)
  CHECK(ir::choose_row_split(8, 128256) == 8);         // greedy_decode's 8 rows: 64 blocks
  CHECK(ir::choose_row_split(1, 8 * 8192) == 4);
  CHECK(ir::choose_row_split(1, 7 * 8192) == 1);       // 7 chunks: one block
  CHECK(ir::choose_row_split(16, 8 * 8192) == 4);
  CHECK(ir::choose_row_split(17, 8 * 8192) == 1);      // beyond 16 rows: 32 chunks
  CHECK(ir::choose_row_split(17, 32 * 8192) == 16);
  CHECK(ir::choose_row_split(512, 32 * 8192) == 2);
  CHECK(ir::choose_row_split(513, 32 * 8192) == 1);
  CHECK(ir::choose_row_split(1, 1 << 24) == 512);     // a whole-tensor sum of 16M elements
  CHECK(ir::choose_row_split(4096, 1 << 20) == 1);    // many rows fill the GPU already
  CHECK(ir::choose_row_split(0, 1 << 20) == 1);
  CHECK(ir::choose_column_split(1, 300000) == 37);     // 3 columns: 37 chunks, one part each
  CHECK(ir::choose_column_split(2, 20000) == 3);
  CHECK(ir::choose_column_split(128, 65536) == 8);     // a [65536, 4096] bias gradient: 1,024 blocks
  CHECK(ir::choose_column_split(128, 8192) == 1);      // one chunk: nothing to split
  CHECK(ir::choose_column_split(512, 1 << 20) == 1);   // many groups fill the GPU already
  CHECK(ir::choose_split(false, 64, 32, 100000) == ir::choose_column_split(2, 100000));
  CHECK(ir::choose_split(true, 64, 1, 1 << 20) == ir::choose_row_split(64, 1 << 20));
  std::vector<testing::Case> cases;
  uint64_t seed = 500;
  // (graph, launches of its split kernel: 2 per level of reductions, 1 more for element outputs)
  const std::pair<const char*, int> graphs[] = {
      {"input x : f32[300001]\ny = sum(x)\noutput y\n", 2},
      {"input x : f32[3, 270000]\ns = sum(x * x, -1)\nm = amax(x, -1)\ny = sqrt(s) + m\noutput y, m\n", 2},
      {"input x : bf16[2, 262145]\ny = mean(x, -1, keepdim)\nz = amin(x, -1)\noutput y, z\n", 2},
      {"input x : i32[600, 600]\ny = sum(x)\nz = prod(x)\noutput y, z\n", 2},
      {"input x : f64[2, 3, 90000]\ny = mean(x, [1, 2], correction=1)\noutput y\n", 2},
      {"input x : f16[1, 262144]\ny = amax(x, -1)\nw = amax(x, -1, keepdim)\noutput y, w\n", 2},
      {"input x : bf16[1, 300000] range -8:8\ny = softmax(x, -1)\noutput y\n", 5},
      {"input x : f32[2, 270000]\ny = logsumexp(x, -1)\noutput y\n", 4},
      {"input x : f32[600, 600]\nm = mean(x)\nd = x - m\ny = d / sqrt(mean(d * d))\noutput y, m\n", 5},
      {"input x : f32[2, 270000]\ninput w : f32[270000]\ninput b : f32[270000]\n"
       "mu = mean(x, -1, keepdim)\nd = x - mu\nv = mean(d * d, -1, keepdim)\ny = d * rsqrt(v + 1e-5) * w + b\n"
       "output y\n", 5},
      {"input x : f32[2, 270000]\ny = x - amax(x, -1, keepdim)\noutput y\n", 3},
      // argmax lanes (value, index: two workspace slots) alone and in a pass with a sum.
      {"input x : f32[3, 270000]\nm = argmax(x, -1)\nn = argmin(x * x, -1)\ns = sum(x, -1)\noutput m, n, s\n", 2},
      {"input x : i8[1, 300000]\nm = argmin(x, -1, keepdim)\ny = cast(x, i64) - m\noutput y, m\n", 3},
      // Column kernels (rows side by side): one group of 3 columns in 37 parts; two groups of 40
      // columns in 3 parts with element outputs; a standardization over axis 0 (two levels).
      {"input x : f32[300000, 3]\ny = sum(x, 0)\noutput y\n", 2},
      {"input x : f32[300000, 3]\ny = argmax(x, 0)\nz = amax(x, 0)\noutput y, z\n", 2},
      {"input x : f32[20000, 40]\nm = amax(x, 0, keepdim)\ny = x - m\noutput y, m\n", 3},
      {"input x : f32[17000, 5]\nmu = mean(x, 0, keepdim)\nd = x - mu\nv = mean(d * d, 0, keepdim)\n"
       "y = d * rsqrt(v + 1e-5)\noutput y, v\n", 5},
  };
  for (const auto& [text, launches] : graphs) cases.push_back(reduce_case(text, seed++));
  for (size_t i = 0; i < cases.size(); ++i) cases[i].inputs = finite_inputs(cases[i].graph, 600 + i);
  // The first again with one NaN, in the last block's part of the row: carried across the split.
  testing::Case one_nan = cases[0];
  one_nan.label += ", one NaN at the end";
  one_nan.inputs[0].set(300000, ir::Scalar{ir::DType::F32, std::nan(""), 0});
  cases.push_back(std::move(one_nan));
  check_all(cases, 1);
  for (size_t i = 0; i < std::size(graphs); ++i) {
    const testing::Case& c = cases[i];
    CAPTURE(c.label);
    CHECK(c.fused.kernels[0].split_reductions > 0);
    CHECK(jit::run_cpu_program(c.fused, c.inputs, c.params).kernels_launched == graphs[i].second);
    // What `fusejit plan` says (a column kernel's rows are columns of the tensor).
    const char* row = c.fused.kernels[0].row_blocks ? "row" : "column";
    CHECK(c.fused.plan.groups[0].note.find(fmt::format("blocks per {} at these sizes, {} launches", row, graphs[i].second)) !=
          std::string::npos);
  }
}

TEST_CASE("reductions of one level that load a common input share a pass, up to four; lanes laid out as C++ does") {
  struct Want {
    const char* text;
    std::vector<std::vector<std::string>> passes;  // ReduceGroupInfo::passes by name
    std::vector<int64_t> lane_bytes;               // pass_lane_bytes of each
  };
  const Want wants[] = {
      // grad_norm: one pass. LayerNorm: its two levels cannot share one.
      {"input g : f32[8, 100]\nn = sum(g * g, -1)\nm = amax(abs(g), -1)\noutput n, m\n", {{"n", "m"}}, {8}},
      {"input x : f32[8, 100]\nm = mean(x, -1, keepdim)\nv = mean((x - m) * (x - m), -1, keepdim)\noutput m, v\n",
       {{"m"}, {"v"}}, {4, 4}},
      // No common input: a pass each. Five of one input: four, then one.
      {"input a : f32[8, 100]\ninput b : f32[8, 100]\ns = sum(a, -1)\nt = sum(b, -1)\noutput s, t\n", {{"s"}, {"t"}}, {4, 4}},
      {"input a : f32[8, 100]\ns1 = sum(a, -1)\ns2 = amax(a, -1)\ns3 = amin(a, -1)\ns4 = prod(a, -1)\n"
       "s5 = sum(a * a, -1)\noutput s1, s2, s3, s4, s5\n", {{"s1", "s2", "s3", "s4"}, {"s5"}}, {16, 4}},
      // Linked through m's loads of a and b: one pass, the widest members first: {i64, {f64, i8}}.
      {"input a : i8[8, 100]\ninput b : f64[8, 100]\ns = sum(a, -1)\nv = sum(b, -1)\nm = amax(a + cast(b, i8), -1)\n"
       "output s, m, v\n", {{"s", "v", "m"}}, {24}},
      {"input a : i8[8, 100]\ns = amax(a, -1)\nt = sum(a, -1)\noutput s, t\n", {{"t", "s"}}, {16}},
      // An argmax's lane is {value; long long index}: 16 bytes aligned to 8, whatever the value. A
      // lane takes at most 32 bytes (ir::kMaxLaneBytes): m and s fit (24), k takes a second pass.
      {"input a : i8[8, 100]\nm = argmax(a, -1)\noutput m\n", {{"m"}}, {16}},
      {"input a : f32[8, 100]\nm = argmax(a, -1)\ns = sum(a, -1)\nk = argmin(a, -1)\noutput m, s, k\n",
       {{"m", "s"}, {"k"}}, {24, 16}},
      {"input a : f32[8, 100]\nm = argmax(a, -1)\nk = argmin(a, -1)\ns = sum(a, -1)\noutput m, s, k\n",
       {{"m", "k"}, {"s"}}, {32, 4}},
      // The same reductions in another order: the same one pass (the hostile pass found 2 and 1).
      {"input a : f32[8, 100]\ninput b : f32[8, 100]\nr1 = sum(a, -1)\nr2 = sum(b, -1)\nr3 = sum(a * b, -1)\n"
       "output r1, r2, r3\n", {{"r1", "r2", "r3"}}, {12}},
      {"input a : f32[8, 100]\ninput b : f32[8, 100]\nr1 = sum(a, -1)\nr3 = sum(a * b, -1)\nr2 = sum(b, -1)\n"
       "output r1, r2, r3\n", {{"r1", "r3", "r2"}}, {12}},
  };
  for (const Want& w : wants) {
    CAPTURE(std::string(w.text));
    const ir::Graph g = ir::parse_graph(w.text, "t.txt");
    const ir::Plan plan = ir::plan_fusion(g);
    REQUIRE(plan.groups.size() == 1);
    const ir::ReduceGroupInfo info = ir::analyze_reduce_group(g, plan.groups[0]);
    std::vector<std::vector<std::string>> names;
    std::vector<int64_t> bytes;
    for (const std::vector<ir::NodeId>& p : info.passes) {
      names.emplace_back();
      for (ir::NodeId r : p) names.back().push_back(g.node(r).name.empty() ? "?" : g.node(r).name);
      bytes.push_back(ir::pass_lane_bytes(g, p));
    }
    CHECK(names == w.passes);
    CHECK(bytes == w.lane_bytes);
  }
}

TEST_CASE("the row on chip: which inputs stay in shared memory, when, and what the plan counts") {
  struct Want {
    const char* text;
    std::vector<std::string> reread;  // ReduceGroupInfo::reread_inputs by name
    int64_t cache_bytes;              // per block at these sizes; 0: the passes read memory
    int64_t reread_bytes;             // the traffic model's extra reads
    const char* note;
  };
  const Want wants[] = {
      // x and exp(x - max) (kept values: 16 KiB each).
      {"input x : f32[4, 4096]\ny = softmax(x, -1)\noutput y\n", {"x"}, 32768, 0,
       "3 passes over each row, the row kept on chip (32768 B of shared memory per block for x and %3, which a pass"},
      // w is read by the last pass only: not cached. bf16 rows: 2 bytes an element.
      {"input x : bf16[4, 4096]\ninput w : bf16[4096]\nh = cast(x, f32)\n"
       "y = w * cast(h * rsqrt(mean(h * h, -1, keepdim) + 1e-6), bf16)\noutput y\n", {"x"}, 8192, 0,
       "2 passes over each row, the row kept on chip (8192 B"},
      // Residual-add + RMSNorm: both inputs, each region rounded up to 16 bytes.
      {"input x : f32[2, 1001]\ninput r : f32[2, 1001]\nh = x + r\ny = h * rsqrt(mean(h * h, -1, keepdim) + 1e-6)\n"
       "output y, h\n", {"x", "r"}, 2 * 4016, 0, "the row kept on chip (8032 B of shared memory per block for x, r)"},
      // 80,000 B rows are over the 48 KiB cache: the two later passes read x again.
      {"input x : f32[4, 20000]\ny = softmax(x, -1)\noutput y\n", {"x"}, 0, 2 * 320000,
       "3 passes over each row, each reading x from memory: a row of x takes 80000 B, over the 49152 B row cache"},
      // A split row never keeps its row on chip (its passes are separate launches).
      {"input x : f32[1, 300000]\ny = softmax(x, -1)\noutput y\n", {"x"}, 0, 2400000,
       "3 passes over each row, each reading x from memory (a split row is not kept on chip);"},
      // Two reductions of one level that load x: one pass (ReduceGroupInfo::passes), x read once.
      {"input x : f32[1, 300000]\ns = sum(x * x, -1)\nm = amax(x, -1)\noutput s, m\n", {}, 0, 0,
       "(2 reductions: 1 pass over each row;"},
      {"input x : f32[8, 512]\ny = sum(x, -1)\noutput y\n", {}, 0, 0, "(1 reduction: 1 pass over each row;"},
      // A column kernel reads its rows again in every pass (no row cache).
      {"input dy : f32[700, 64]\nm = amax(dy, 0, keepdim)\ny = dy - m\noutput y\n", {"dy"}, 0, 700 * 64 * 4,
       "2 passes over each column, each reading dy from memory (a column kernel keeps no column on chip); columns side by side"},
  };
  for (const Want& w : wants) {
    const std::string text = w.text;
    CAPTURE(text);
    const ir::Graph g = ir::parse_graph(w.text, "t.txt");
    const ir::Plan plan = ir::plan_fusion(g);
    REQUIRE(!plan.groups.empty());
    const ir::FusionGroup& grp = plan.groups[0];
    const ir::ReduceGroupInfo info = ir::analyze_reduce_group(g, grp);
    std::vector<std::string> names;
    for (ir::NodeId i : info.reread_inputs) names.push_back(g.node(i).name);
    CHECK(names == w.reread);
    CHECK(ir::row_split_at(g, grp, info).row_cache_bytes == w.cache_bytes);
    CHECK(ir::group_traffic(g, grp).reread_bytes == w.reread_bytes);
    // With the row cache off (Options::row_cache = false) every re-read input is counted.
    int64_t every_pass = 0;
    for (ir::NodeId i : info.reread_inputs)
      every_pass += (info.input_passes.at(i) - 1) * ir::num_elements(g.node(i).shape) * ir::dtype_size(g.node(i).dtype);
    CHECK(ir::group_traffic(g, grp, ir::SplitRules{0, false}).reread_bytes == every_pass);
    CHECK(ir::row_split_at(g, grp, info, ir::SplitRules{0, false}).row_cache_bytes == 0);
    CHECK_MESSAGE(grp.note.find(w.note) != std::string::npos, grp.note);
    // The launcher's decision at the same sizes, and with Options::row_cache off.
    const jit::GeneratedKernel k = jit::generate_kernel(g, grp);
    const jit::PlanBindings b(g, plan);
    const std::vector<jit::GeneratedKernel> ks = jit::generate_plan_kernels(g, plan);
    for (bool on : {true, false}) {
      const auto st = jit::make_launch_state(g, plan, b, [&](int, size_t gi) -> const jit::GeneratedKernel& { return ks[gi]; },
                                             jit::LaunchRules{0, on});
      REQUIRE(st != nullptr);
      CHECK(st->groups[0].row_cache_bytes == (on ? w.cache_bytes : 0));
    }
    CHECK(k.row_cache_sizes.size() == (k.row_blocks ? w.reread.size() : 0));
  }
}

// A KernelRunner that runs nothing and records each launch's row_cache argument and shared bytes.
struct RowCacheRecorder final : jit::KernelRunner {
  std::vector<std::pair<uint64_t, int64_t>> seen;
  void run(const jit::GroupLaunch& gl, size_t, bool strided, bool vector, int64_t, void** args) override {
    const jit::KernelSignature& sig = strided ? gl.kernel->strided_signature : gl.kernel->signature;
    for (size_t k = 0; k < sig.args.size(); ++k)
      if (sig.args[k].kind == jit::ArgKind::RowCache)
        seen.emplace_back(*static_cast<const uint64_t*>(args[k]), gl.shared_bytes(strided, vector));
  }
  uint64_t workspace(size_t) override { return 0; }
  void copy(uint64_t, uint64_t, size_t) override {}
};

TEST_CASE("a reduction group whose outputs are all empty launches nothing, however many rows it has") {
  // Kernels planned at 4 rows of length 0, launched at 2^32 rows: softmax writes no element (its
  // row values stay in the kernel), so no launch and no 64-bit variant; sum writes 2^32 zeros.
  for (const char* op : {"softmax(x, -1)", "sum(x, -1)"}) {
    CAPTURE(op);
    const std::string text = std::string("dim N = 4\ninput x : f32[N, 0]\ny = ") + op + "\noutput y\n";
    const ir::Graph planned = ir::parse_graph(text, "t.txt");
    const ir::Graph big = ir::parse_graph(text, "t.txt", {{"N", int64_t{1} << 32}});
    const ir::Plan plan = ir::plan_fusion(planned);
    REQUIRE(plan.groups.size() == 1);
    const std::vector<jit::GeneratedKernel> ks = jit::generate_plan_kernels(planned, plan);
    REQUIRE(!ks[0].index64);
    const jit::PlanBindings b(big, plan);
    int wide_asked = 0;
    const auto st = jit::make_launch_state(big, plan, b, [&](int v, size_t gi) -> const jit::GeneratedKernel& {
      wide_asked += v;
      return ks[gi];
    }, {}, &planned);
    REQUIRE(st != nullptr);
    const bool writes = std::string(op).starts_with("sum");
    CHECK((st->groups[0].items > 0) == writes);
    CHECK(st->kernel_launches() == (writes ? 1 : 0));
    CHECK(wide_asked == (writes ? 1 : 0));
  }
}

TEST_CASE("short rows re-read from L1/L2 on a GPU; long rows on chip take the long-row block") {
  // A GPU's rules (SplitRules::short_rows): rows of at most 2,048 elements whose re-read inputs
  // take at most 8 KiB are not kept on chip, and their re-reads are counted once; without a GPU
  // the same rows stay on chip.
  const char* softmax = "m = amax(x, -1, keepdim)\ne = exp(x - m)\ny = e / sum(e, -1, keepdim)\noutput y\n";
  ir::SplitRules gpu{0, true, ir::row_cache_limit_for(227 * 1024), true, true};
  struct Want {
    const char* input;
    int mode;         // row_cache_mode on a GPU
    bool long_rows;   // GroupLaunch::long_rows
    bool cpu_cache;   // on chip without a GPU's rules (a host buffer, at most 48 KiB)
    const char* note;
  };
  const Want wants[] = {
      {"input x : f32[4, 1024]\n", 0, false, true, "a short row (at most 2048 elements and 8192 B) is re-read from L1/L2"},
      {"input x : f32[4, 2048]\n", 0, false, true, "a short row"},
      {"input x : bf16[4, 2049]\n", 1, false, true, "the row kept on chip"},  // bf16 values are not kept
      {"input x : f64[4, 2048]\n", 2, false, true, "the row kept on chip"},   // 16 KiB
      {"input x : f32[4, 2049]\n", 2, false, true, "the row kept on chip"},
      {"input x : f32[2, 16383]\n", 1, false, false, "the row kept on chip"},
      {"input x : f32[2, 16384]\n", 1, true, false, "the row kept on chip"},
  };
  for (const Want& w : wants) {
    const std::string text = std::string(w.input) + softmax;
    CAPTURE(text);
    const ir::Graph g = ir::parse_graph(text, "t.txt");
    ir::PlanOptions po;
    po.rules = gpu;
    const ir::Plan plan = ir::plan_fusion(g, po);
    REQUIRE(plan.groups.size() == 1);
    CHECK_MESSAGE(plan.groups[0].note.find(w.note) != std::string::npos, plan.groups[0].note);
    const ir::GroupTraffic t = ir::group_traffic(g, plan.groups[0], gpu);
    CHECK(t.reread_bytes == 0);  // short rows: counted once; long ones: on chip
    CHECK(t.read_bytes == ir::num_elements(g.node(g.inputs[0]).shape) * ir::dtype_size(g.node(g.inputs[0]).dtype));
    const std::vector<jit::GeneratedKernel> ks = jit::generate_plan_kernels(g, plan);
    const jit::PlanBindings b(g, plan);
    const auto provider = [&](int, size_t gi) -> const jit::GeneratedKernel& { return ks[gi]; };
    const auto st = jit::make_launch_state(g, plan, b, provider, gpu);
    REQUIRE(st != nullptr);
    CHECK(st->groups[0].row_cache_mode == w.mode);
    CHECK(st->groups[0].long_rows == w.long_rows);
    CHECK(ir::row_split_at(g, plan.groups[0], ir::analyze_reduce_group(g, plan.groups[0]), gpu).short_rows == (w.mode == 0));
    // Without a GPU's rules the short rows stay on chip (a host buffer on the CPU path; rows over
    // its 48 KiB limit do not).
    const auto cpu = jit::make_launch_state(g, plan, b, provider);
    CHECK((cpu->groups[0].row_cache_mode > 0) == w.cpu_cache);
  }
  // A kernel with row outputs only (logsumexp) keeps kReduceMaxBlock over long rows on chip.
  const ir::Graph g = ir::parse_graph("input x : f32[2, 32768]\ny = logsumexp(x, -1)\noutput y\n", "t.txt");
  ir::PlanOptions po;
  po.rules = gpu;
  const ir::Plan plan = ir::plan_fusion(g, po);
  const std::vector<jit::GeneratedKernel> ks = jit::generate_plan_kernels(g, plan);
  const jit::PlanBindings b(g, plan);
  const auto st = jit::make_launch_state(g, plan, b, [&](int, size_t gi) -> const jit::GeneratedKernel& { return ks[gi]; }, gpu);
  REQUIRE(st != nullptr);
  CHECK(st->groups[0].row_cache_mode == 1);
  CHECK_FALSE(st->groups[0].long_rows);
}

TEST_CASE("a row broadcast over the rows leaves the row cache first: the rows that differ per row stay on chip") {
  // row_cache_use with per_row: all inputs while they fit; else the first per_row (mode 3).
  const int two[] = {4, 2}, none[] = {0};
  const std::span<const int> no_values(none, 0);
  CHECK(ir::row_cache_use(two, no_values, 4096, 1, 24576, false, 1) == ir::RowCacheUse{1, 24576});
  CHECK(ir::row_cache_use(two, no_values, 4096, 1, 24575, false, 1) == ir::RowCacheUse{3, 16384});
  CHECK(ir::row_cache_use(two, no_values, 4096, 1, 16383, false, 1) == ir::RowCacheUse{});
  CHECK(ir::row_cache_use(two, no_values, 4096, 1, 24575, false, 0) == ir::RowCacheUse{});  // no input differs per row
  CHECK(ir::row_cache_use(two, no_values, 4096, 1, 24575) == ir::RowCacheUse{});            // all or nothing
  CHECK(ir::row_cache_use(two, no_values, 4096, 2, 24575, false, 1) == ir::RowCacheUse{});  // a split row
  CHECK(ir::row_cache_use(two, no_values, 1024, 1, 4000, true, 1) == ir::RowCacheUse{});    // a short row
  // The rows mode 3 would keep are short (8 KiB of 2,048 elements): re-read, as without the mask.
  CHECK(ir::row_cache_use(two, no_values, 2048, 1, 8192, true, 1) == ir::RowCacheUse{});
  CHECK(ir::row_cache_use(two, no_values, 2048, 1, 8192, false, 1) == ir::RowCacheUse{3, 8192});

  // Masked softmax over rows of 16,384 f32 on an sm_86 (87 KiB): scores and mask take 128 KiB; the
  // mask (listed first) is the same in every row, so the scores alone are kept (64 KiB) and the
  // mask's two re-reads are counted at its own size.
  const ir::Graph g = ir::parse_graph("input mask : f32[1, 16384]\ninput s : f32[4, 16384]\n"
                                      "y = softmax(s + mask, -1)\noutput y\n", "t.txt");
  ir::PlanOptions po;
  po.rules.row_cache_limit = ir::row_cache_limit_for(99 * 1024);
  po.rules.short_rows = true;
  const ir::Plan plan = ir::plan_fusion(g, po);
  REQUIRE(plan.groups.size() == 1);
  const ir::ReduceGroupInfo info = ir::analyze_reduce_group(g, plan.groups[0]);
  REQUIRE(info.reread_inputs.size() == 2);
  CHECK(g.node(info.reread_inputs[0]).name == "s");
  CHECK(info.per_row_inputs == 1);
  const ir::RowSplit split = ir::row_split_at(g, plan.groups[0], info, po.rules);
  CHECK(split.row_cache_bytes == 65536);
  CHECK(split.shared_rows_reread);
  CHECK(ir::group_traffic(g, plan.groups[0], po.rules).reread_bytes == 2 * 65536);
  const std::vector<jit::GeneratedKernel> ks = jit::generate_plan_kernels(g, plan);
  CHECK(ks[0].row_cache_per_row == 1);
  CHECK(ks[0].source.find("const bool fj_rca = fj_rc && row_cache != 3;") != std::string::npos);
  const jit::PlanBindings b(g, plan);
  auto st = jit::make_launch_state(g, plan, b, [&](int, size_t gi) -> const jit::GeneratedKernel& { return ks[gi]; }, po.rules);
  REQUIRE(st != nullptr);
  CHECK(st->groups[0].row_cache_mode == 3);
  CHECK(st->groups[0].row_cache_bytes == 65536);
  // With room for both, both (mode 1; the kept exp values do not fit 48 KiB).
  po.rules.row_cache_limit = 131072;
  st = jit::make_launch_state(g, plan, b, [&](int, size_t gi) -> const jit::GeneratedKernel& { return ks[gi]; }, po.rules);
  CHECK(st->groups[0].row_cache_mode == 1);
  CHECK(ir::group_traffic(g, plan.groups[0], po.rules).reread_bytes == 0);
}

TEST_CASE("kept values: what a pass computes and the epilogue reads again, kept on chip while it fits") {
  // row_cache_use: inputs and values within min(limit, 48 KiB): mode 2; the inputs alone: mode 1.
  const int f32[] = {4}, none[] = {0};
  CHECK(ir::row_cache_use(f32, f32, 4096, 1, 49152) == ir::RowCacheUse{2, 32768});
  CHECK(ir::row_cache_use(f32, f32, 8192, 1, 215 * 1024) == ir::RowCacheUse{1, 32768});  // 64 KiB > 48 KiB
  CHECK(ir::row_cache_use(f32, f32, 4096, 1, 32767) == ir::RowCacheUse{1, 16384});
  CHECK(ir::row_cache_use(f32, f32, 4096, 1, 16383) == ir::RowCacheUse{});
  CHECK(ir::row_cache_use(f32, f32, 4096, 2, 49152) == ir::RowCacheUse{});  // a split row: never on chip
  CHECK(ir::row_cache_use(f32, std::span<const int>(none, 0), 4096, 1, 49152) == ir::RowCacheUse{1, 16384});
  CHECK(ir::row_cache_use(f32, f32, int64_t{1} << 61, 1, INT64_MAX) == ir::RowCacheUse{});
  struct Want {
    const char* text;
    std::vector<std::string> kept;  // ReduceGroupInfo::kept_values by name
    int mode;                       // the launcher's row_cache argument at these sizes (default rules)
    int64_t bytes;
    const char* note;
  };
  const char* softmax = "m = amax(x, -1, keepdim)\ne = exp(x - m)\ny = e / sum(e, -1, keepdim)\noutput y\n";
  const Want wants[] = {
      {"input x : f32[4, 4096]\n", {"e"}, 2, 32768, "(32768 B of shared memory per block for x and e, which a pass computes"},
      {"input x : f32[4, 8192]\n", {"e"}, 1, 32768,
       "(32768 B of shared memory per block for x; the epilogue computes e again: a value a pass computes is kept on chip "
       "for the epilogue only while it fits with the inputs' rows in 49152 B (it saves arithmetic, not memory traffic), "
       "and with it the row cache would take 65536 B)"},
      {"input x : f32[4, 20000]\n", {"e"}, 0, 0, "each reading x from memory"},
      {"input x : f32[1, 300000]\n", {"e"}, 0, 0, "(a split row is not kept on chip)"},
      // f16/bf16 values are not kept (their two forms); a value computed in f32 is.
      {"input x : bf16[4, 256]\n", {}, 1, 512, "(512 B of shared memory per block for x)"},
  };
  for (const Want& w : wants) {
    const std::string text = std::string(w.text) + softmax;
    CAPTURE(text);
    const ir::Graph g = ir::parse_graph(text, "t.txt");
    const ir::Plan plan = ir::plan_fusion(g);
    REQUIRE(plan.groups.size() == 1);
    const ir::ReduceGroupInfo info = ir::analyze_reduce_group(g, plan.groups[0]);
    std::vector<std::string> kept;
    for (ir::NodeId v : info.kept_values) kept.push_back(g.node(v).name);
    CHECK(kept == w.kept);
    CHECK_MESSAGE(plan.groups[0].note.find(w.note) != std::string::npos, plan.groups[0].note);
    const std::vector<jit::GeneratedKernel> ks = jit::generate_plan_kernels(g, plan);
    CHECK(ks[0].row_value_sizes.size() == w.kept.size());
    const jit::PlanBindings b(g, plan);
    const auto provider = [&](int, size_t gi) -> const jit::GeneratedKernel& { return ks[gi]; };
    const auto st = jit::make_launch_state(g, plan, b, provider);
    REQUIRE(st != nullptr);
    CHECK(st->groups[0].row_cache_mode == w.mode);
    CHECK(st->groups[0].row_cache_bytes == w.bytes);
    CHECK(ir::row_split_at(g, plan.groups[0], info).values_on_chip == (w.mode == 2));
    if (w.mode == 2) {  // a limit with room for the inputs only keeps x alone
      const auto st1 = jit::make_launch_state(g, plan, b, provider, jit::LaunchRules{0, true, w.bytes / 2});
      CHECK(st1->groups[0].row_cache_mode == 1);
      CHECK(st1->groups[0].row_cache_bytes == w.bytes / 2);
    }
  }
  // Fast-math mode keeps none (NVRTC may contract a value into its consumer where the epilogue
  // computes it, not where it reads it back): the plan, the kernel and the launch agree.
  {
    const ir::Graph g = ir::parse_graph(std::string("input x : f32[4, 4096]\n") + softmax, "t.txt");
    ir::PlanOptions po;
    po.rules.kept_values = false;
    const ir::Plan plan = ir::plan_fusion(g, po);
    CHECK_MESSAGE(plan.groups[0].note.find("(16384 B of shared memory per block for x)") != std::string::npos,
                  plan.groups[0].note);
    jit::CodegenOptions fast;
    fast.fast_math = true;
    const std::vector<jit::GeneratedKernel> ks = jit::generate_plan_kernels(g, plan, fast);
    CHECK(ks[0].row_value_sizes.empty());
    CHECK(ks[0].source.find("fj_rv") == std::string::npos);
    const jit::PlanBindings b(g, plan);
    const auto st = jit::make_launch_state(g, plan, b, [&](int, size_t gi) -> const jit::GeneratedKernel& { return ks[gi]; });
    CHECK(st->groups[0].row_cache_mode == 1);
    CHECK(st->groups[0].row_cache_bytes == 16384);
  }
  // Only the vector path of a kernel with one reads kept values: a launch of the strided entry, or
  // with vec_ok 0 (vector path off, a misaligned input), passes row_cache 1 and the inputs' bytes.
  {
    const ir::Graph g = ir::parse_graph(std::string("input x : f32[4, 4096]\n") + softmax, "t.txt");
    const ir::Plan plan = ir::plan_fusion(g);
    const std::vector<jit::GeneratedKernel> ks = jit::generate_plan_kernels(g, plan);
    REQUIRE(ks[0].signature.vector_width > 1);
    const jit::PlanBindings b(g, plan);
    const auto st = jit::make_launch_state(g, plan, b, [&](int, size_t gi) -> const jit::GeneratedKernel& { return ks[gi]; });
    REQUIRE(st->groups[0].row_cache_mode == 2);
    CHECK(st->groups[0].row_cache_input_bytes == 16384);
    RowCacheRecorder rec;
    const int64_t shape[] = {4, 4096};
    const auto launch = [&](uint64_t in_addr, const jit::LaunchOptions& o) {
      const jit::TensorArg in[] = {{in_addr, shape, {}}}, out[] = {{0x100000, shape, {}}};
      return jit::launch_plan(b, *st, in, out, {}, {}, rec, o);
    };
    jit::LaunchOptions scalar, strided;
    scalar.vector_path = false;
    strided.force_strided = true;
    CHECK(launch(0x1000, {}).kept == 1);
    CHECK(rec.seen == std::vector<std::pair<uint64_t, int64_t>>{{2, 32768}});
    CHECK(launch(0x1000, scalar).kept == 0);
    CHECK(launch(0x1000, strided).kept == 0);
    CHECK(launch(0x1004, {}).kept == 0);  // misaligned: vec_ok 0
    CHECK(rec.seen == std::vector<std::pair<uint64_t, int64_t>>{{2, 32768}, {1, 16384}, {1, 16384}, {1, 16384}});
    // A kernel without a vector path reads them in its scalar loop: every launch keeps them.
    jit::CodegenOptions no_vector;
    no_vector.vectorize = false;
    const std::vector<jit::GeneratedKernel> ks1 = jit::generate_plan_kernels(g, plan, no_vector);
    REQUIRE(ks1[0].signature.vector_width == 1);
    const auto st1 = jit::make_launch_state(g, plan, b, [&](int, size_t gi) -> const jit::GeneratedKernel& { return ks1[gi]; });
    const jit::TensorArg in[] = {{0x1004, shape, {}}}, out[] = {{0x100000, shape, {}}};
    CHECK(jit::launch_plan(b, *st1, in, out, {}, {}, rec, strided).kept == 1);
    CHECK(rec.seen.back() == std::pair<uint64_t, int64_t>{2, 32768});
  }
  // Which values: the highest costly one on each of the epilogue's paths that a pass computes.
  const std::pair<const char*, std::vector<std::string>> which[] = {
      // f = e * 2 is costly by what is below it: kept instead of e.
      {"input x : f32[4, 64]\nm = amax(x, -1, keepdim)\ne = exp(x - m)\nf = e * 2\ny = f / sum(f, -1, keepdim)\noutput y\n",
       {"f"}},
      // A division and an integer floor division are costly; a product is not (RMSNorm keeps nothing).
      {"input x : f32[4, 64]\ninput w : f32[64]\nd = x / w\ny = d - sum(d, -1, keepdim)\noutput y\n", {"d"}},
      {"input x : i32[4, 300]\nq = floordiv(x, 7)\ny = q - amax(q, -1, keepdim)\noutput y\n", {"q"}},
      {"input x : f32[4, 64]\nh = x * x\ny = x * rsqrt(mean(h, -1, keepdim) + 1e-6)\noutput y\n", {}},
      // log_softmax: its epilogue computes x - m - log(s), no exp: nothing to keep.
      {"input x : f32[4, 64]\ny = log_softmax(x, -1)\noutput y\n", {}},
      // Two values, one per path, each written by the first pass computing it.
      {"input x : f32[4, 64]\nm = amax(x, -1, keepdim)\ne = exp(x - m)\nt = tanh(x)\ns = sum(e, -1, keepdim)\n"
       "u = sum(t * e, -1, keepdim)\ny = e / s + t / u\noutput y\n",
       {"e", "t"}},
      // No epilogue (the outputs are written as the one pass loads the row), or a column kernel.
      {"input x : f32[4, 64]\ne = exp(x)\ns = sum(e, -1)\noutput e, s\n", {}},
      {"input x : f32[64, 4]\ne = exp(x)\ny = e - amax(e, 0, keepdim)\noutput y\n", {}},
  };
  for (const auto& w : which) {
    const char* const text = w.first;  // not a structured binding: clang's CAPTURE cannot name one
    const std::vector<std::string>& want = w.second;
    CAPTURE(text);
    const ir::Graph g = ir::parse_graph(text, "t.txt");
    const ir::Plan plan = ir::plan_fusion(g);
    REQUIRE(plan.groups.size() == 1);
    std::vector<std::string> kept;
    for (ir::NodeId v : ir::analyze_reduce_group(g, plan.groups[0]).kept_values) kept.push_back(g.node(v).name);
    CHECK(kept == want);
  }
}

// ---- The launch does not change the bits --------------------------------------------------------

namespace {

// The split-row arguments of a packed launch (launch_plan's set_split_slots).
void set_split(const jit::GeneratedKernel& k, jit::PackedArgs& args, int phase, long long parts, uint64_t ws) {
  for (size_t i = 0; i < k.signature.args.size(); ++i) {
    auto* slot = static_cast<uint64_t*>(args.params()[i]);
    if (k.signature.args[i].kind == jit::ArgKind::SplitPhase) *slot = static_cast<uint64_t>(phase);
    if (k.signature.args[i].kind == jit::ArgKind::RowSplit) *slot = static_cast<uint64_t>(parts);
    if (k.signature.args[i].kind == jit::ArgKind::Workspace) *slot = ws;
  }
}

// The row_cache argument of a packed launch (launch_plan sets it with the launch's shared memory):
// 0 off, 1 the inputs, 2 the inputs and the kept values.
void set_row_cache(const jit::GeneratedKernel& k, jit::PackedArgs& args, int mode) {
  for (size_t i = 0; i < k.signature.args.size(); ++i)
    if (k.signature.args[i].kind == jit::ArgKind::RowCache) *static_cast<uint64_t*>(args.params()[i]) = static_cast<uint64_t>(mode);
}

}  // namespace

TEST_CASE("a reduction kernel gives the same bits for every block size and grid (1 to 1024 threads)") {
  const char* graphs[] = {
      "graph t\ninput x : f32[3, 9000] range -8:8\ny = softmax(x, -1)\noutput y\n",
      "graph t\ninput x : bf16[2, 5000]\ninput w : bf16[5000]\nh = cast(x, f32)\nms = mean(h * h, -1, keepdim)\n"
      "y = w * cast(h * rsqrt(ms + 1e-6), bf16)\noutput y, ms\n",
      "graph t\ninput x : f32[4, 2, 300]\nmu = mean(x, [1, 2], keepdim)\nd = x - mu\ny = d / sum(d * d, [1, 2], keepdim)\n"
      "output y\n",
      // Rows of two reduced dims (no vector path): the scalar loop reads the kept exp(x - m).
      "graph t\ninput x : f32[4, 3, 301] range -8:8\nm = amax(x, [1, 2], keepdim)\ne = exp(x - m)\n"
      "y = e / sum(e, [1, 2], keepdim)\noutput y\n",
      "graph t\ninput dy : f32[700, 5]\ndb = sum(dy, 0)\noutput db\n",  // rows side by side in a block
      // A row broadcast over the rows beside one that differs per row: with row_cache 3 only the
      // latter is on chip (through its row pointer; element by element in rows of two dims).
      "graph t\ninput s : f32[3, 900] range -8:8\ninput m : f32[900]\ny = softmax(s + m, -1)\noutput y\n",
      "graph t\ninput x : f32[4, 3, 301]\ninput b : f32[1, 3, 301]\nh = x + b\ny = h - mean(h, [1, 2], keepdim)\noutput y\n",
      // Long rows, run whole and split in 2 and 9 parts: one level and row outputs (two
      // launches); two levels and element outputs (softmax: five launches); row and element
      // outputs of two levels (standardization, its mean and variance).
      "graph t\ninput x : f32[2, 70000]\ny = sum(x * x, -1)\nz = amax(x, -1)\noutput y, z\n",
      // One pass of three reductions whose lanes take two workspace slots (i64, i8, i8), and a
      // column kernel's pass of two (the lanes of 16 rows fill the block's 48 KiB).
      "graph t\ninput x : i8[2, 70000]\ns = sum(x, -1)\nm = amax(x, -1)\nn = amin(x, -1)\noutput s, m, n\n",
      "graph t\ninput dy : f32[20000, 33]\ndb = sum(dy, 0)\nm = amax(dy, 0)\noutput db, m\n",
      "graph t\ninput x : f32[2, 70000] range -8:8\ny = softmax(x, -1)\noutput y\n",
      "graph t\ninput x : f32[2, 70000]\nm = mean(x, -1, keepdim)\nd = x - m\nv = mean(d * d, -1, keepdim)\n"
      "y = d * rsqrt(v + 1e-5)\noutput y, m, v\n",
      // Columns of 20,000 (3 chunks) in two groups of side-by-side rows (33 columns: the second
      // group has one live row, the rest repeat it), whole and split.
      "graph t\ninput dy : f32[20000, 33]\nm = amax(dy, 0, keepdim)\ny = dy - m\noutput y, m\n",
      // argmax lanes (16 bytes, two shuffle words apart) in rows and columns, whole and split.
      "graph t\ninput x : f32[2, 70000]\nm = argmax(x, -1)\ns = sum(x, -1)\nn = argmin(x, -1)\noutput m, s, n\n",
      "graph t\ninput dy : bf16[20000, 33]\nm = argmax(dy, 0)\noutput m\n",
  };
  for (const char* text : graphs) {
    CAPTURE(text);
    ir::Graph g = ir::parse_graph(text, "t.txt");
    const ir::Plan plan = ir::plan_fusion(g);
    REQUIRE(plan.groups.size() == 1);
    const ir::FusionGroup& grp = plan.groups[0];
    const jit::GeneratedKernel k = jit::generate_kernel(g, grp);
    REQUIRE(k.reduction);
    // Each block as `block` host threads: barriers, the warp tree's shuffles, shared lane arrays.
    jit::HostCompileOptions threads;
    threads.block_threads = true;
    threads.check_alignment = true;
    const auto module = jit::host_compile(std::vector<jit::GeneratedKernel>{k}, threads).module;
    const jit::HostTrampoline run = module->trampoline(k.name);

    const bool split = std::string(text).find("0000") != std::string::npos;  // the long rows above
    REQUIRE((!split || k.split_reductions > 0));
    const std::vector<ir::Tensor> in = split ? finite_inputs(g, 77) : testing::random_inputs(g, 77, 0.05);
    const std::vector<ir::Tensor> want = ir::evaluate_reference(g, in);
    std::vector<uint64_t> in_addrs, out_addrs;
    for (ir::NodeId id : grp.inputs) in_addrs.push_back(reinterpret_cast<uint64_t>(in[static_cast<size_t>(g.node(id).slot)].data.data()));
    std::vector<ir::Tensor> outs;
    for (ir::NodeId id : grp.outputs) outs.emplace_back(g.node(id).dtype, ir::shape_sizes(g.node(id).shape));
    for (ir::Tensor& t : outs) out_addrs.push_back(reinterpret_cast<uint64_t>(t.data.data()));
    std::vector<ir::Scalar> params;
    for (const ir::ParamDecl& p : g.params) params.push_back(p.default_value);
    const std::vector<unsigned> blocks = split ? std::vector<unsigned>{1, 96} : std::vector<unsigned>{1, 2, 3, 32, 96, 256, 1024};
    // The row cache on (whatever the row's size: the 48 KiB limit is the launcher's) and off.
    const int64_t row_len = ir::reduce_length(grp.iter_shape, grp.reduce_mask);
    std::vector<int> sizes = k.row_cache_sizes;  // inputs, then kept values (row_cache 2)
    sizes.insert(sizes.end(), k.row_value_sizes.begin(), k.row_value_sizes.end());
    std::vector<uint64_t> shared(static_cast<size_t>(ir::row_cache_bytes(sizes, row_len) / 8), ~0ull);
    // Row cache 3 gets room for the rows that differ per row only (the broadcast ones are read in memory).
    const std::vector<int> per_row(k.row_cache_sizes.begin(), k.row_cache_sizes.begin() + static_cast<long>(k.row_cache_per_row));
    std::vector<uint64_t> shared_per_row(static_cast<size_t>(ir::row_cache_bytes(per_row, row_len) / 8), ~0ull);
    const bool broadcast_row = std::string(text).find("input m :") != std::string::npos ||
                               std::string(text).find("input b :") != std::string::npos;
    CHECK((k.row_cache_per_row == 1 && k.row_cache_sizes.size() == 2) == broadcast_row);
    // Every row kernel here re-reads x, except the pass computing sum(x * x) and amax(x) together;
    // the softmax kernels keep exp(x - max) too (row_cache 2).
    CHECK(k.row_cache_sizes.size() == (k.row_blocks ? ir::analyze_reduce_group(g, grp).reread_inputs.size() : 0));
    const bool exp = std::string(text).find("softmax") != std::string::npos || std::string(text).find("exp(") != std::string::npos;
    CHECK(k.row_value_sizes.size() == (k.row_blocks && exp ? 1u : 0u));
    std::vector<int> modes{0};
    if (!k.row_cache_sizes.empty()) modes.push_back(1);
    if (!k.row_value_sizes.empty()) modes.push_back(2);
    if (broadcast_row) modes.push_back(3);
    for (int cache : modes)
    for (long long parts : split ? std::vector<long long>{1, 2, 9} : std::vector<long long>{1})
    for (unsigned block : blocks)
      for (unsigned grid : {1u, 2u, 5u}) {
        CAPTURE(cache);
        CAPTURE(parts);
        CAPTURE(block);
        CAPTURE(grid);
        for (ir::Tensor& t : outs) std::memset(t.data.data(), 0xA5, t.data.size());
        jit::PackedArgs args = jit::pack_args(k.signature, g, grp, in_addrs, out_addrs, params, {grid, block});
        const int64_t rows = ir::num_elements(ir::reduced_shape(grp.iter_shape, grp.reduce_mask, false));
        std::vector<uint64_t> ws(static_cast<size_t>(ir::split_workspace_slots(k.split_reductions, rows, row_len)), ~0ull);
        set_row_cache(k, args, parts == 1 ? cache : 0);  // split launches never get the row cache
        if (parts == 1) run(args.params(), grid, block, cache == 3 ? shared_per_row.data() : cache ? shared.data() : nullptr);
        for (int phase = 1; parts > 1 && phase <= k.split_phases; ++phase) {  // as launch_plan does
          set_split(k, args, phase, parts, reinterpret_cast<uint64_t>(ws.data()));
          run(args.params(), grid, block, nullptr);
        }
        for (size_t o = 0; o < g.outputs.size(); ++o) {
          const auto it = std::find(grp.outputs.begin(), grp.outputs.end(), g.outputs[o].node);
          REQUIRE(it != grp.outputs.end());
          std::string why;
          CHECK_MESSAGE(testing::identical(outs[static_cast<size_t>(it - grp.outputs.begin())], want[o], why), why);
        }
      }
  }
}
