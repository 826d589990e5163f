// Reductions: the graph text (parse, print, located errors), PyTorch's dtype rules, the fixed
// order of ir/scalar/fj_reduce.h against an independent level-by-level implementation of the order
// docs/ops.md documents, the error bound against long double, special values, every axis pattern
// against a naive loop, the composites, the rewriter and the planner's refusal.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "ir/passes/rewrite.h"
#include "ir/printer.h"
#include "ir/reduce.h"
#include "ir/reference.h"
#include "ir/tensor.h"

using namespace fusejit::ir;

namespace {

constexpr int kLanes = 256;     // docs/ops.md, "Reductions"
constexpr int64_t kChunk = 8192;

Graph parse(const std::string& text) { return parse_graph(text, "r.txt"); }

// The documented order, written independently of fj_reduce.h: lanes (i mod 256) summed in index
// order per chunk of 8192, the lane tree by halves, then chunk values paired level by level (an
// odd last one passing up).
template <class T, class Op>
T documented_order(const std::vector<T>& x, T id, Op op) {
  std::vector<T> chunks;
  for (size_t c0 = 0; c0 < x.size(); c0 += kChunk) {
    std::vector<T> lane(kLanes, id);
    for (size_t i = c0; i < std::min(x.size(), c0 + kChunk); ++i) lane[(i - c0) % kLanes] = op(lane[(i - c0) % kLanes], x[i]);
    for (int h = kLanes / 2; h >= 1; h /= 2)
      for (int l = 0; l < h; ++l) lane[l] = op(lane[l], lane[l + h]);
    chunks.push_back(lane[0]);
  }
  while (chunks.size() > 1) {
    std::vector<T> next;
    for (size_t k = 0; k + 1 < chunks.size(); k += 2) next.push_back(op(chunks[k], chunks[k + 1]));
    if (chunks.size() % 2) next.push_back(chunks.back());
    chunks = next;
  }
  return chunks.empty() ? T(0) : chunks[0];
}

Tensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  Tensor t(DType::F32, std::move(shape));
  if (!v.empty()) std::memcpy(t.data.data(), v.data(), v.size() * 4);  // memcpy(nullptr, nullptr, 0) is UB
  return t;
}

// sum(x, -1) of one f32 row through the reference evaluator.
float ref_sum(const std::vector<float>& v, const char* op = "sum") {
  Graph g = parse("dim N = " + std::to_string(v.size()) + "\ninput x : f32[N]\ny = " + op + "(x, -1)\noutput y\n");
  Tensor in = f32_tensor({static_cast<int64_t>(v.size())}, v);
  return evaluate_reference(g, std::span<const Tensor>(&in, 1))[0].as<float>()[0];
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<float> mixed_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-20, 20);
  std::vector<float> v(n);
  for (float& f : v) f = std::ldexp(mant(rng), ex(rng));  // magnitudes 2^-20..2^20: the order shows in the bits
  return v;
}

}  // namespace

TEST_CASE("reduction text: parse, shapes, dtypes and a round trip through the printer") {
  Graph g = parse(
      "input x : f32[4, 5, 6]\ninput b : bool[7]\ninput h : f16[3, 8]\ninput i : i32[2, 3]\n"
      "a = sum(x, -1)\nc = sum(x, [0, 2], keepdim)\nd = mean(x)\ne = amax(x, 1, keepdim)\n"
      "f = sum(b)\nk = mean(h, -1)\nm = prod(i, 0)\nn = amin(i, [-1, 0])\n"
      "output a, c, d, e, f, k, m, n\n");
  auto out = [&](int k) -> const Node& { return g.node(g.outputs[static_cast<size_t>(k)].node); };
  CHECK(shape_sizes(out(0).shape) == std::vector<int64_t>{4, 5});
  CHECK(shape_sizes(out(1).shape) == std::vector<int64_t>{1, 5, 1});
  CHECK(out(2).shape.empty());
  CHECK(shape_sizes(out(3).shape) == std::vector<int64_t>{4, 1, 6});
  CHECK(out(4).dtype == DType::I64);  // torch: sum of bool is int64
  CHECK(out(5).dtype == DType::F16);  // computed in f32, cast back once
  CHECK(out(5).op == Op::Cast);
  CHECK(g.node(out(5).args[0]).op == Op::Mean);
  CHECK(g.node(out(5).args[0]).dtype == DType::F32);
  CHECK(out(6).dtype == DType::I64);
  CHECK(out(7).dtype == DType::I32);
  CHECK(out(7).shape.empty());
  const std::string text = print_graph(g);
  CHECK(text.find("sum(x, [0, 2], keepdim)") != std::string::npos);
  CHECK(text.find("sum(x, 2)") != std::string::npos);
  Graph again = parse(text);
  CHECK(structurally_equal(g, again));
  CHECK(print_graph(again) == text);
}

TEST_CASE("reduction text: bad axes, integer means and empty amax are located errors") {
  struct Bad { const char* line; uint32_t col; const char* says; };
  const Bad bad[] = {
      // A bad axis is located at the axes (ReduceArgs::axes_loc).
      {"y = sum(x, 2)", 12, "axis 2 is out of range for a tensor of rank 2"},
      {"y = sum(x, -3)", 12, "axis -3 is out of range"},
      {"y = sum(x, [1, -1])", 12, "axes 1 and -1 name the same axis (1 of a tensor of rank 2)"},
      {"y = sum(x, [0, 0])", 12, "axis 0 appears twice in the reduced axes"},
      {"y = mean(i)", 5, "mean needs a float dtype"},
      {"y = amax(z, 0)", 5, "amax of zero elements"},
      {"y = sum(x, keepdim, 1)", 21, "the axes come first"},
      {"y = sum(x, 1.5)", 12, "expected an axis"},
      {"y = softmax(x)", 5, "softmax takes a value and one axis"},
      {"y = softmax(i, 0)", 5, "softmax needs a float dtype"},
      {"y = summ(x)", 5, "did you mean 'sum'"},
      {"y = var(i)", 5, "var needs a float dtype"},
      {"y = std(x, 9)", 12, "axis 9 is out of range"},
      {"y = softmax(x, 2)", 16, "axis 2 is out of range"},
      {"y = sum(x, -1, correction=1)", 5, "sum takes no correction (only mean, var and std do)"},
      {"y = var(x, -1, correction=-1)", 27, "a non-negative integer correction"},
      {"y = var(x, -1, correction 1)", 27, "'=' after `correction`"},
      {"y = var(x, correction=1, keepdim)", 26, "`keepdim` comes before `correction=N`"},
      {"y = var(x, correction=1, correction=2)", 26, "`correction` is given twice"},
      {"y = var(x, keepdim, keepdim)", 21, "`keepdim` is given twice"},
      {"y = var(x, keepdim, -1)", 21, "the axes come first; expected `keepdim`"},
      {"y = var(x, -1,)", 15, "expected an argument after ',' (remove the trailing ',')"},
      {"y = sum(x, [0,])", 15, "expected an axis after ',' (remove the trailing ',')"},
      {"y = var(x, -1, ddof=0)", 16, "NumPy's ddof and PyTorch's unbiased are written `correction=N`"},
      {"y = softmax(x, -1, correction=1)", 5, "softmax takes no correction"},
      // initial= (NumPy's): only amax's -inf and amin's +inf, of a float operand.
      {"y = sum(x, -1, initial=0)", 5, "sum takes no initial= (only amax and amin do)"},
      {"y = softmax(z, 0, initial=-inf)", 5, "softmax over an empty axis needs none"},
      {"y = amax(x, -1, initial=0)", 25, "amax: initial=0 is not supported, only amax's identity initial=-inf"},
      {"y = amin(x, -1, initial=-inf)", 25, "only amin's identity initial=inf"},
      {"y = amax(i, initial=-inf)", 21, "amax of i32 values: initial=-inf needs a float dtype"},
      {"y = amax(x, -1, initial=-x)", 26, "expected a number after `initial=`"},
      {"y = amax(x, -1, initial -inf)", 25, "'=' after `initial`"},
      {"y = amax(x, initial=-inf, keepdim)", 27, "`keepdim` comes before `initial=V`"},
      {"y = amax(x, initial=-inf, initial=-inf)", 27, "`initial` is given twice"},
      {"y = mean(x, correction=1, initial=-inf)", 27, "`correction=N` or `initial=V`, not both"},
      {"y = amax(x, -1, 3)", 17, "expected `keepdim`, `initial=V` or ')' after the axes"},
      // What PyTorch and NumPy users write first
      {"y = max(x, -1)", 5, "for a reduction write amax (torch.amax), for an elementwise one maximum"},
      {"y = min(x)", 5, "for a reduction write amin"},
      {"y = mean(x, -1, keepdim=True)", 24, "`keepdim` takes no value: write `keepdim` alone"},
      {"y = sum(x, -1, keepdims)", 16, "NumPy's keepdims is written `keepdim` here"},
      {"y = gelu(x, approximate=\"tanh\")", 13, "PyTorch's gelu(x, approximate=\"tanh\") is the op gelu_tanh(x) here"},
      {"y = sum(x, -1, 3)", 16, "expected `keepdim` or ')' after the axes"},
      {"y = var(x, -1, 3)", 16, "expected `keepdim`, `correction=N` or ')' after the axes"},
      {"y = x - amax(x, -1)", 7, "the amax result has dropped its reduced axes: reduce with `keepdim`"},
  };
  for (const Bad& b : bad) {
    CAPTURE(b.line);
    const std::string text = std::string("input x : f32[3, 4]\ninput i : i32[3]\ninput z : f32[0, 2]\n") + b.line + "\noutput y\n";
    try {
      parse(text);
      FAIL("no error");
    } catch (const UserError& e) {
      CHECK(std::string(e.what()).find(b.says) != std::string::npos);
      CHECK(e.loc().line == 4);
      CHECK(e.loc().col == b.col);
    }
  }
  // amax over an axis that --dim later makes empty: rebinding refuses it.
  Graph g = parse("dim N = 3\ninput x : f32[N, 2]\ny = amax(x, 0)\noutput y\n");
  CHECK_THROWS_WITH_AS(rebind_dims(g, {{"N", 0}}), doctest::Contains("zero elements"), UserError);
  CHECK_NOTHROW(rebind_dims(g, {{"N", 5}}));
  CHECK(shape_sizes(g.node(g.outputs[0].node).shape) == std::vector<int64_t>{2});
  // ... unless it starts from its identity (initial=-inf), as the composites' max does.
  Graph h = parse("dim N = 3\ninput x : f32[N, 2]\ny = amax(x, 0, initial=-inf)\nz = logsumexp(x, 0)\noutput y, z\n");
  CHECK_NOTHROW(rebind_dims(h, {{"N", 0}}));
}

TEST_CASE("fixed order: the reference is the documented order, bit for bit, at every chunk edge") {
  const size_t lengths[] = {1, 2, 3, 255, 256, 257, 511, 7919, 8191, 8192, 8193, 16383, 16384, 16385,
                            3 * 8192 + 5, 5 * 8192, 7 * 8192 + 1, 65537};
  for (size_t n : lengths) {
    CAPTURE(n);
    const std::vector<float> v = mixed_values(n, static_cast<uint32_t>(n));
    const float want = documented_order<float>(v, -0.0f, [](float a, float b) { return a + b; });
    CHECK(bits(ref_sum(v)) == bits(want));
    const float mx = documented_order<float>(v, -INFINITY, [](float a, float b) { return a < b ? b : a; });
    CHECK(bits(ref_sum(v, "amax")) == bits(mx));
  }
  // The data are order-sensitive: a left-to-right sum gives other bits, so the checks above see
  // any change of lanes, chunk size or tree.
  const std::vector<float> v = mixed_values(65537, 65537);
  float seq = -0.0f;
  for (float f : v) seq += f;
  CHECK(bits(seq) != bits(ref_sum(v)));
}

TEST_CASE("fixed order: error against long double within the documented bound") {
  // docs/ops.md: |sum - exact| <= (ceil(m / 256) + 8 + ceil(log2(chunks))) * u * sum|x|, m = min(n, 8192).
  for (size_t n : {100u, 4096u, 8193u, 100000u, 1000003u}) {
    CAPTURE(n);
    const std::vector<float> v = mixed_values(n, 7u + static_cast<uint32_t>(n));
    long double exact = 0, mag = 0;
    for (float f : v) { exact += f; mag += std::fabs(static_cast<long double>(f)); }
    const double m = static_cast<double>(std::min<size_t>(n, kChunk));
    const double chunks = std::ceil(static_cast<double>(n) / kChunk);
    const double k = std::ceil(m / kLanes) + 8 + std::ceil(std::log2(chunks));
    const long double bound = k * std::ldexp(1.0, -24) * mag;
    CHECK(std::fabs(static_cast<long double>(ref_sum(v)) - exact) <= bound);
  }
}

TEST_CASE("special values: NaN, inf, signed zero, empty reductions, integer wrap") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  CHECK(std::isnan(ref_sum({1.0f, nan, 3.0f}, "amax")));
  CHECK(std::isnan(ref_sum({1.0f, nan, 3.0f}, "amin")));
  CHECK(std::isnan(ref_sum({inf, -inf})));
  CHECK(ref_sum({inf, 1.0f}) == inf);
  CHECK(ref_sum({-inf, 5.0f}, "amin") == -inf);
  // NumPy and PyTorch start a sum from +0.0: a sum of -0.0 values is +0.0, at any length.
  CHECK(bits(ref_sum({-0.0f})) == bits(0.0f));
  CHECK(bits(ref_sum({-0.0f, -0.0f})) == bits(0.0f));
  CHECK(bits(ref_sum(std::vector<float>(20000, -0.0f))) == bits(0.0f));
  CHECK(bits(ref_sum(std::vector<float>(3, -0.0f), "mean")) == bits(0.0f));
  CHECK(bits(ref_sum({-0.0f, 0.0f})) == bits(0.0f));
  CHECK(bits(ref_sum({})) == bits(0.0f));                // empty sum: +0.0
  CHECK(ref_sum({}, "prod") == 1.0f);
  CHECK(std::isnan(ref_sum({}, "mean")));                // torch.mean of nothing: nan
  CHECK(ref_sum({2.0f, 4.0f, 9.0f}, "mean") == 5.0f);
  CHECK(ref_sum({7.0f}, "prod") == 7.0f);

  Graph g = parse("input a : i64[3]\ninput b : i8[4]\ns = sum(a)\np = prod(b)\nm = amax(b)\noutput s, p, m\n");
  Tensor a(DType::I64, {3}), b(DType::I8, {4});
  const int64_t av[3] = {std::numeric_limits<int64_t>::max(), 1, 5};
  std::memcpy(a.data.data(), av, sizeof av);
  const int8_t bv[4] = {-128, 100, 3, -1};
  std::memcpy(b.data.data(), bv, sizeof bv);
  const Tensor ins[2] = {a, b};
  std::vector<Tensor> r = evaluate_reference(g, ins);
  CHECK(r[0].as<int64_t>()[0] == std::numeric_limits<int64_t>::min() + 5);  // wraps, as torch
  CHECK(r[1].dtype == DType::I64);
  CHECK(r[1].as<int64_t>()[0] == int64_t{-128} * 100 * 3 * -1);             // in i64: no i8 wrap
  CHECK(r[2].as<int8_t>()[0] == 100);
}

TEST_CASE("every axis pattern and keepdim against a naive loop (integers: any order is exact)") {
  Graph g = parse(
      "input x : i32[3, 4, 5]\n"
      "a = sum(x, -1)\nb = sum(x, 0)\nc = sum(x, [0, 2], keepdim)\nd = sum(x)\ne = amax(x, 1)\nf = amin(x, [0, 1])\n"
      "output a, b, c, d, e, f\n");
  Tensor x(DType::I32, {3, 4, 5});
  std::mt19937 rng(3);
  for (int k = 0; k < 60; ++k) x.as<int32_t>()[k] = static_cast<int32_t>(rng() % 2001) - 1000;
  auto at = [&](int i, int j, int l) { return static_cast<int64_t>(x.as<int32_t>()[(i * 4 + j) * 5 + l]); };
  std::vector<Tensor> r = evaluate_reference(g, std::span<const Tensor>(&x, 1));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      int64_t s = 0;
      for (int l = 0; l < 5; ++l) s += at(i, j, l);
      CHECK(r[0].as<int64_t>()[i * 4 + j] == s);
    }
  for (int j = 0; j < 4; ++j)
    for (int l = 0; l < 5; ++l) CHECK(r[1].as<int64_t>()[j * 5 + l] == at(0, j, l) + at(1, j, l) + at(2, j, l));
  CHECK(r[2].shape == std::vector<int64_t>{1, 4, 1});
  int64_t total = 0;
  for (int j = 0; j < 4; ++j) {
    int64_t s = 0;
    for (int i = 0; i < 3; ++i)
      for (int l = 0; l < 5; ++l) s += at(i, j, l);
    CHECK(r[2].as<int64_t>()[j] == s);
    total += s;
  }
  CHECK(r[3].as<int64_t>()[0] == total);
  for (int i = 0; i < 3; ++i)
    for (int l = 0; l < 5; ++l) {
      int64_t m = std::numeric_limits<int64_t>::min();
      for (int j = 0; j < 4; ++j) m = std::max(m, at(i, j, l));
      CHECK(r[4].as<int32_t>()[i * 5 + l] == m);
    }
  for (int l = 0; l < 5; ++l) {
    int64_t m = std::numeric_limits<int64_t>::max();
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) m = std::min(m, at(i, j, l));
    CHECK(r[5].as<int32_t>()[l] == m);
  }
}

TEST_CASE("outer-axis float reductions take the reduced elements in index order of the reduced axes") {
  // sum over axis 0 of [N, 3]: column c reduces x[0, c], x[1, c], ... in the documented order.
  const int64_t n = 8200;  // one full chunk plus 8
  const std::vector<float> v = mixed_values(static_cast<size_t>(n * 3), 11);
  Graph g = parse("input x : f32[8200, 3]\ny = sum(x, 0, keepdim)\noutput y\n");
  Tensor in = f32_tensor({n, 3}, v);
  Tensor r = evaluate_reference(g, std::span<const Tensor>(&in, 1))[0];
  REQUIRE(r.shape == std::vector<int64_t>{1, 3});
  for (int c = 0; c < 3; ++c) {
    std::vector<float> col;
    for (int64_t i = 0; i < n; ++i) col.push_back(v[static_cast<size_t>(i * 3 + c)]);
    CHECK(bits(r.as<float>()[c]) == bits(documented_order<float>(col, -0.0f, [](float a, float b) { return a + b; })));
  }
}

TEST_CASE("composites: softmax, log_softmax, logsumexp (stable; torch's inf rules)") {
  Graph g = parse(
      "input x : f32[4, 6]\ns = softmax(x, -1)\nl = log_softmax(x, 1)\ne = logsumexp(x, -1)\n"
      "k = logsumexp(x, -1, keepdim)\noutput s, l, e, k\n");
  const float inf = INFINITY;
  std::vector<float> v = {1, 2, 3, 4, 5, 6,  1000, 1001, 999, 1000, 998, 1000,
                          -inf, -inf, -inf, -inf, -inf, -inf,  inf, 0, 1, 2, 3, 4};
  Tensor in = f32_tensor({4, 6}, v);
  std::vector<Tensor> r = evaluate_reference(g, std::span<const Tensor>(&in, 1));
  for (int row = 0; row < 2; ++row) {
    long double m = -INFINITY, s = 0;
    for (int j = 0; j < 6; ++j) m = std::max<long double>(m, v[row * 6 + j]);
    for (int j = 0; j < 6; ++j) s += std::exp(static_cast<long double>(v[row * 6 + j]) - m);
    for (int j = 0; j < 6; ++j) {
      const long double want = std::exp(static_cast<long double>(v[row * 6 + j]) - m) / s;
      CHECK(std::fabs(r[0].as<float>()[row * 6 + j] - want) <= 4e-7L * (1 + want));  // no overflow at 1000
      CHECK(std::fabs(r[1].as<float>()[row * 6 + j] - std::log(want)) <= 4e-6L * (1 + std::fabs(std::log(want))));
    }
    CHECK(std::fabs(r[2].as<float>()[row] - (m + std::log(s))) <= 1e-6L * std::fabs(m + std::log(s)) + 1e-6L);
    CHECK(bits(r[3].as<float>()[row]) == bits(r[2].as<float>()[row]));
  }
  CHECK(r[2].as<float>()[2] == -inf);  // torch.logsumexp of a row of -inf
  CHECK(r[2].as<float>()[3] == inf);   // and of a row holding +inf
  CHECK(std::isnan(r[0].as<float>()[12]));  // softmax of a row of -inf is NaN, as in torch
  CHECK(r[2].shape == std::vector<int64_t>{4});
  CHECK(r[3].shape == std::vector<int64_t>{4, 1});

  Graph h = parse("input x : bf16[2, 8]\ny = softmax(x, -1)\noutput y\n");
  const Node& y = h.node(h.outputs[0].node);
  CHECK(y.dtype == DType::BF16);
  CHECK(y.op == Op::Cast);  // computed in f32, rounded once

  // Over an empty axis, as PyTorch: softmax and log_softmax are empty, logsumexp is -inf (their
  // amax starts from -inf: initial=-inf, printed so the text parses back); amax from -inf alone.
  Graph e = parse("input x : f32[3, 0]\ns = softmax(x, -1)\nl = log_softmax(x, 1)\nk = logsumexp(x, -1, keepdim)\n"
                  "m = amax(x, -1, initial=-inf)\nn = amin(x, -1, initial=inf)\noutput s, l, k, m, n\n");
  const std::string text = print_graph(e);
  CHECK(text.find("amax(x, 1, keepdim, initial=-inf)") != std::string::npos);
  CHECK(text.find("amin(x, 1, initial=inf)") != std::string::npos);
  CHECK(print_graph(parse(text)) == text);
  const Tensor none = f32_tensor({3, 0}, {});
  const std::vector<Tensor> re = evaluate_reference(e, std::span<const Tensor>(&none, 1));
  CHECK(re[0].shape == std::vector<int64_t>{3, 0});
  CHECK(re[1].shape == std::vector<int64_t>{3, 0});
  REQUIRE(re[2].shape == std::vector<int64_t>{3, 1});
  for (int row = 0; row < 3; ++row) {
    CHECK(re[2].as<float>()[row] == -inf);
    CHECK(re[3].as<float>()[row] == -inf);
    CHECK(re[4].as<float>()[row] == inf);
  }
}

TEST_CASE("var and std: PyTorch's correction, two passes, within a few ulp of long double") {
  Graph g = parse(
      "input x : f32[3, 7]\ninput h : bf16[2, 5]\n"
      "v1 = var(x, -1)\nv0 = var(x, 1, keepdim, correction=0)\ns2 = std(x, -1, correction=2)\n"
      "va = var(x)\nvc = var(x, 0)\nvh = var(h, -1)\noutput v1, v0, s2, va, vc, vh\n");
  // The expansion shows in the IR: the second mean carries the correction, and prints it.
  const std::string text = print_graph(g);
  CHECK(text.find("mean(x, 1, keepdim)") != std::string::npos);
  CHECK(text.find(", 1, correction=1)") != std::string::npos);
  CHECK(text.find(", 1, keepdim)") != std::string::npos);  // correction=0: a plain mean
  CHECK(text.find("correction=2)") != std::string::npos);
  Graph again = parse(text);
  CHECK(structurally_equal(g, again));
  CHECK(print_graph(again) == text);
  CHECK(g.node(g.outputs[5].node).dtype == DType::BF16);  // computed in f32, rounded once

  const std::vector<float> v = mixed_values(21, 9);
  Tensor in = f32_tensor({3, 7}, v);
  Tensor hb(DType::BF16, {2, 5});
  const Tensor ins[2] = {in, hb};
  std::vector<Tensor> r = evaluate_reference(g, ins);
  // var over elements idx of v with correction c, two-pass in long double.
  auto want = [&](const std::vector<size_t>& idx, int c) {
    long double m = 0, s = 0;
    for (size_t i : idx) m += v[i];
    m /= static_cast<long double>(idx.size());
    for (size_t i : idx) s += (v[i] - m) * (v[i] - m);
    return s / static_cast<long double>(static_cast<int64_t>(idx.size()) - c);
  };
  auto close = [](float got, long double w) { return std::fabs(got - w) <= 1e-5L * std::fabs(w); };
  std::vector<size_t> all;
  for (size_t row = 0; row < 3; ++row) {
    std::vector<size_t> idx;
    for (size_t j = 0; j < 7; ++j) idx.push_back(row * 7 + j), all.push_back(row * 7 + j);
    CHECK(close(r[0].as<float>()[row], want(idx, 1)));
    CHECK(close(r[1].as<float>()[row], want(idx, 0)));
    CHECK(close(r[2].as<float>()[row], std::sqrt(want(idx, 2))));
  }
  CHECK(r[1].shape == std::vector<int64_t>{3, 1});
  CHECK(close(r[3].as<float>()[0], want(all, 1)));
  for (size_t col = 0; col < 7; ++col) CHECK(close(r[4].as<float>()[col], want({col, 7 + col, 14 + col}, 1)));

  // n <= correction divides by 0 (torch: NaN for equal values, inf otherwise); a 0-d var has n = 1.
  Graph e = parse("input x : f32[2, 1]\ninput s : f32[]\na = var(x, -1)\nb = var(x, -1, correction=3)\n"
                  "c = var(s)\nd = var(s, correction=0)\ne = var(x, 0, correction=2)\noutput a, b, c, d, e\n");
  Tensor x2 = f32_tensor({2, 1}, {1.5f, 4.0f}), s0 = f32_tensor({}, {2.0f});
  const Tensor ins2[2] = {x2, s0};
  std::vector<Tensor> q = evaluate_reference(e, ins2);
  CHECK(std::isnan(q[0].as<float>()[0]));   // 0 / 0
  CHECK(std::isnan(q[1].as<float>()[1]));
  CHECK(std::isnan(q[2].as<float>()[0]));
  CHECK(bits(q[3].as<float>()[0]) == bits(0.0f));
  CHECK(q[4].as<float>()[0] == INFINITY);   // 3.125 / 0
}

TEST_CASE("var corrects for the rounded mean: a large mean against a small spread, a constant row") {
  // The plain two-pass form gave 0.0039 (3x the exact value, NumPy's f32 var) for the first row,
  // and ~9e-6 for a constant row of 10000.1 (Chan, Golub and LeVeque's corrected form: eq. 1.7).
  Graph g = parse("input x : f32[3]\ninput c : f32[8193]\ninput w : f32[1000]\n"
                  "a = var(x)\nb = var(c, correction=0)\nd = std(w)\noutput a, b, d\n");
  const std::string text = print_graph(g);
  CHECK(text.find("isfinite(") != std::string::npos);
  CHECK(text.find("maximum(") != std::string::npos);
  std::vector<float> wide(1000);
  long double m = 0, s = 0;
  for (size_t k = 0; k < wide.size(); ++k) m += wide[k] = 1e4f + static_cast<float>((k * 7919) % 1000) / 999.0f;
  m /= 1000;
  for (float f : wide) s += (f - m) * (f - m);
  const Tensor ins[3] = {f32_tensor({3}, {1e6f, 1e6f + 0.0625f, 1e6f + 0.0625f}),
                         f32_tensor({8193}, std::vector<float>(8193, 10000.1f)), f32_tensor({1000}, wide)};
  std::vector<Tensor> r = evaluate_reference(g, ins);
  CHECK(r[0].as<float>()[0] == doctest::Approx(0.0013020833).epsilon(1e-6));
  CHECK(bits(r[1].as<float>()[0]) == bits(0.0f));
  CHECK(r[2].as<float>()[0] == doctest::Approx(static_cast<double>(std::sqrt(s / 999))).epsilon(1e-5));
}

TEST_CASE("any and all: bool of any dtype, NaN counts as true, no elements give false and true (np.any, np.all)") {
  Graph g = parse("input x : f32[3, 4]\ninput i : i8[3, 4]\ninput z : f32[3, 0]\n"
                  "a = any(x, -1)\nb = all(x, -1, keepdim)\nc = any(i)\nd = all(i, [0, 1])\n"
                  "e = any(z, -1)\nf = all(z, -1)\nh = all(isfinite(x), 0)\noutput a, b, c, d, e, f, h\n");
  for (size_t k = 0; k < g.outputs.size(); ++k) CHECK(g.node(g.outputs[k].node).dtype == DType::Bool);
  CHECK(g.node(g.outputs[1].node).shape.size() == 2);  // keepdim
  // Rows: all zero (one -0.0), one NaN among zeros, all nonzero with an inf, mixed.
  Tensor x = f32_tensor({3, 4}, {0.0f, -0.0f, 0.0f, 0.0f, 0.0f, NAN, 0.0f, 0.0f, 1.0f, -INFINITY, 1e-45f, 2.0f});
  Tensor i(DType::I8, {3, 4});
  for (size_t k = 0; k < 12; ++k) i.data[k] = std::byte{k == 7 ? uint8_t{0} : static_cast<uint8_t>(k + 1)};  // one zero
  Tensor z(DType::F32, {3, 0});
  const Tensor ins[3] = {x, i, z};
  const std::vector<Tensor> r = evaluate_reference(g, ins);
  auto b = [](const Tensor& t, size_t k) { return t.data[k] != std::byte{0}; };
  CHECK((!b(r[0], 0) && b(r[0], 1) && b(r[0], 2)));   // any: NaN is true, -0.0 false
  CHECK((!b(r[1], 0) && !b(r[1], 1) && b(r[1], 2)));  // all: only the row without a zero
  CHECK(b(r[2], 0));
  CHECK(!b(r[3], 0));                                  // i8 holds one 0
  for (size_t k = 0; k < 3; ++k) {
    CHECK(!b(r[4], k));  // any of nothing
    CHECK(b(r[5], k));   // all of nothing
  }
  for (size_t col = 0; col < 4; ++col) CHECK(b(r[6], col) == (col != 1));  // NaN in column 1, -inf in column 1
  // Other extras are refused as for the other reductions.
  CHECK_THROWS_WITH_AS(parse("input x : f32[4]\ny = any(x, -1, correction=1)\noutput y\n"),
                       "any takes no correction (only mean, var and std do)", UserError);
}

TEST_CASE("the rewriter keeps reductions and merges only identical ones; the planner fuses both into one kernel") {
  Graph g = parse("input x : f32[4, 6]\na = sum(x, -1) * 1\nb = sum(x, 1)\nc = sum(x, 1, keepdim)\n"
                  "output a, b, c\n");
  RewriteResult rw = rewrite(g, {});
  int sums = 0;
  for (const Node& n : rw.graph.nodes) sums += n.op == Op::Sum;
  CHECK(sums == 2);  // sum(x, -1) == sum(x, 1); the keepdim one differs
  Tensor in = f32_tensor({4, 6}, mixed_values(24, 5));
  std::vector<Tensor> before = evaluate_reference(g, std::span<const Tensor>(&in, 1));
  std::vector<Tensor> after = evaluate_reference(rw.graph, std::span<const Tensor>(&in, 1));
  for (size_t k = 0; k < before.size(); ++k) CHECK(before[k].data == after[k].data);
  const Plan fused = plan_fusion(rw.graph);
  REQUIRE(fused.groups.size() == 1);  // both sums: one kernel over [4, 6]
  CHECK(fused.groups[0].reduce_mask == 2);
  CHECK(fused.groups[0].iter_shape.size() == 2);
  CHECK(plan_unfused(rw.graph).groups.size() == 2);  // one kernel per sum (the multiply by 1 is gone)
}

namespace {
// argmax/argmin(x, -1) of one f32 row through the reference evaluator.
int64_t ref_arg(const std::vector<float>& v, const char* op) {
  Graph g = parse("dim N = " + std::to_string(v.size()) + "\ninput x : f32[N]\ny = " + op + "(x, -1)\noutput y\n");
  Tensor in = f32_tensor({static_cast<int64_t>(v.size())}, v);
  const std::vector<Tensor> r = evaluate_reference(g, std::span<const Tensor>(&in, 1));
  REQUIRE(r[0].dtype == DType::I64);
  return r[0].as<int64_t>()[0];
}
}  // namespace

TEST_CASE("argmax and argmin: the first best index, NaN first, as NumPy and PyTorch") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  CHECK(ref_arg({1, 5, 5, 2}, "argmax") == 1);  // ties: the first
  CHECK(ref_arg({1, -5, 2, -5}, "argmin") == 1);
  CHECK(ref_arg({1, nan, 3, nan}, "argmax") == 1);  // NaN wins, the first one (np.argmax, torch.argmax)
  CHECK(ref_arg({1, nan, 3, nan}, "argmin") == 1);  // for argmin too (np.argmin, torch.argmin)
  CHECK(ref_arg({-0.0f, 0.0f}, "argmax") == 0);     // -0.0 == 0.0: the first
  CHECK(ref_arg({0.0f, -0.0f}, "argmin") == 0);
  CHECK(ref_arg({-inf, -inf}, "argmax") == 0);      // equal to the identity: still an element's index
  CHECK(ref_arg({inf, inf}, "argmin") == 0);
  CHECK(ref_arg({7}, "argmax") == 0);
  // Ties across lanes and chunks: the first of many equal values, wherever the order meets them.
  std::vector<float> ties(20000, 1.0f);
  CHECK(ref_arg(ties, "argmax") == 0);
  ties[19999] = 2.0f;
  ties[8192 + 300] = 2.0f;
  ties[17000] = 2.0f;
  CHECK(ref_arg(ties, "argmax") == 8192 + 300);
  ties[12345] = nan;
  CHECK(ref_arg(ties, "argmax") == 12345);
  CHECK(ref_arg(ties, "argmin") == 12345);
  // Against a naive scan on random rows of every length around a lane, a batch and a chunk.
  for (size_t n : {1u, 2u, 255u, 256u, 257u, 2048u, 8191u, 8192u, 8193u, 16385u}) {
    std::vector<float> v = mixed_values(n, static_cast<uint32_t>(n));
    for (size_t i = 0; i < n; i += 7) v[i] = v[n / 2];  // ties
    size_t best_max = 0, best_min = 0;
    for (size_t i = 1; i < n; ++i) {
      if (v[i] > v[best_max]) best_max = i;
      if (v[i] < v[best_min]) best_min = i;
    }
    CAPTURE(n);
    CHECK(ref_arg(v, "argmax") == static_cast<int64_t>(best_max));
    CHECK(ref_arg(v, "argmin") == static_cast<int64_t>(best_min));
  }
}

TEST_CASE("argmax and argmin: i64 results, one axis or the flattened index, keepdim, dtypes, errors") {
  Graph g = parse("input x : f32[2, 3]\ninput h : bf16[2, 3]\ninput b : bool[4]\ninput i : i8[2, 3]\n"
                  "a = argmax(x)\nk = argmax(x, -1, keepdim)\nc = argmin(x, 0)\nf = argmax(x, keepdim)\n"
                  "hb = argmin(h, 1)\nbb = argmax(b)\nii = argmin(i, [0])\noutput a, k, c, f, hb, bb, ii\n");
  for (const OutputDecl& o : g.outputs) CHECK(g.node(o.node).dtype == DType::I64);
  CHECK(shape_sizes(g.node(g.outputs[0].node).shape).empty());
  CHECK(shape_sizes(g.node(g.outputs[1].node).shape) == std::vector<int64_t>{2, 1});
  CHECK(shape_sizes(g.node(g.outputs[2].node).shape) == std::vector<int64_t>{3});
  CHECK(shape_sizes(g.node(g.outputs[3].node).shape) == std::vector<int64_t>{1, 1});  // NumPy's keepdims
  CHECK(g.node(g.node(g.outputs[4].node).arg(0)).op == Op::Cast);  // bf16 compared in f32 (exact), no cast back
  const std::string text = print_graph(g);
  CHECK(text.find("a = argmax(x)\n") != std::string::npos);
  CHECK(text.find("k = argmax(x, 1, keepdim)\n") != std::string::npos);
  CHECK(structurally_equal(g, parse(text)));

  Tensor x = f32_tensor({2, 3}, {4, 9, 9, -1, 12, -3});
  Tensor h(DType::BF16, {2, 3}), b(DType::Bool, {4}), i(DType::I8, {2, 3});
  const uint16_t hv[6] = {0x4000, 0xbf80, 0xbf80, 0x7fc0, 0x0000, 0x8000};  // 2, -1, -1 | nan, 0, -0
  std::memcpy(h.data.data(), hv, sizeof hv);
  const uint8_t bv[4] = {0, 0, 1, 1};
  std::memcpy(b.data.data(), bv, sizeof bv);
  const int8_t iv[6] = {-128, 127, 0, -128, -128, 5};
  std::memcpy(i.data.data(), iv, sizeof iv);
  const Tensor ins[4] = {x, h, b, i};
  const std::vector<Tensor> r = evaluate_reference(g, ins);
  CHECK(r[0].as<int64_t>()[0] == 4);  // 12, flattened row-major
  CHECK(r[1].as<int64_t>()[0] == 1);
  CHECK(r[1].as<int64_t>()[1] == 1);
  CHECK(std::vector<int64_t>(r[2].as<int64_t>(), r[2].as<int64_t>() + 3) == std::vector<int64_t>{1, 0, 1});
  CHECK(r[3].as<int64_t>()[0] == 4);
  CHECK(r[4].as<int64_t>()[0] == 1);  // the first of the equal -1s
  CHECK(r[4].as<int64_t>()[1] == 0);  // the NaN
  CHECK(r[5].as<int64_t>()[0] == 2);  // the first true
  CHECK(std::vector<int64_t>(r[6].as<int64_t>(), r[6].as<int64_t>() + 3) == std::vector<int64_t>{0, 1, 0});

  struct Bad { const char* line; const char* says; };
  const Bad bad[] = {
      {"y = argmax(x, [0, 1])", "argmax takes one axis or none (an index into the flattened tensor)"},
      {"y = argmin(z, 0)", "argmin of zero elements (reduced axes 0 of shape [0, 2]) has no index to return"},
      {"y = argmax(z)", "argmax of zero elements"},
      {"y = argmax(x, -1, initial=-inf)", "argmax takes no initial= (only amax and amin do)"},
      {"y = argmax(x, -1, correction=1)", "argmax takes no correction"},
      {"y = argmax(x, 2)", "axis 2 is out of range"},
  };
  for (const Bad& e : bad) {
    CAPTURE(e.line);
    CHECK_THROWS_WITH_AS(parse(std::string("input x : f32[3, 4]\ninput z : f32[0, 2]\n") + e.line + "\noutput y\n"),
                         doctest::Contains(e.says), UserError);
  }
  // An axis that --dim makes empty: refused at rebinding, as amax's.
  Graph d = parse("dim N = 3\ninput x : f32[N, 2]\ny = argmax(x, 0)\noutput y\n");
  CHECK_THROWS_WITH_AS(rebind_dims(d, {{"N", 0}}), doctest::Contains("zero elements"), UserError);
}
