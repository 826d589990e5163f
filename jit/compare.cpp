// Element-wise output comparison. See compare.h.
#include "jit/compare.h"

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/error.h"
#include "ir/reduce.h"

namespace fusejit::jit {
namespace {

uint64_t load_bits(const std::byte* p, int size) {
  uint64_t v = 0;
  std::memcpy(&v, p, static_cast<size_t>(size));  // little-endian host
  return v;
}

struct FloatFormat {
  int bits;       // total width
  int mant_bits;  // explicit mantissa bits
};

FloatFormat float_format(ir::DType t) {
  switch (t) {
    case ir::DType::F16: return {16, 10};
    case ir::DType::BF16: return {16, 7};
    case ir::DType::F32: return {32, 23};
    default: return {64, 52};
  }
}

bool is_nan_bits(ir::DType t, uint64_t v) {
  const FloatFormat f = float_format(t);
  const uint64_t sign = uint64_t{1} << (f.bits - 1);
  const uint64_t mant_mask = (uint64_t{1} << f.mant_bits) - 1;
  const uint64_t exp_mask = (sign - 1) & ~mant_mask;
  return (v & exp_mask) == exp_mask && (v & mant_mask) != 0;
}

// Maps a float's bits onto a monotonic signed integer line (+0 and -0 both at 0).
int64_t ordered(ir::DType t, uint64_t v) {
  const FloatFormat f = float_format(t);
  const uint64_t sign = uint64_t{1} << (f.bits - 1);
  const int64_t mag = static_cast<int64_t>(v & (sign - 1));
  return (v & sign) ? -mag : mag;
}

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(static_cast<double>(mant), -24);
  else if (exp == 31) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
  return sign ? -v : v;
}

double to_double(ir::DType t, uint64_t v) {
  switch (t) {
    case ir::DType::F16: return half_to_double(static_cast<uint16_t>(v));
    case ir::DType::BF16: {
      const uint32_t u = static_cast<uint32_t>(v) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case ir::DType::F32: {
      const uint32_t u = static_cast<uint32_t>(v);
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    default: {
      double d;
      std::memcpy(&d, &v, 8);
      return d;
    }
  }
}

// docs/ops.md: composites near cancellation are compared within 2^-20 (f32, and f16/bf16, computed
// in f32) / 2^-48 (f64) times max(1, |x|). A half result near 0 keeps the f32 cancellation's absolute
// error (gelu(bf16 -5.5625): -0.0 against -7.4e-8 exact), many half ulps there.
double composite_abs_scale(ir::DType t) { return t == ir::DType::F64 ? 0x1p-48 : 0x1p-20; }

}  // namespace

OpTolerance gpu_op_tolerance(ir::Op op, ir::DType dtype) {
  const ir::OpInfo& info = ir::op_info(op);
  OpTolerance t;
  if (!ir::is_float(dtype)) return t;  // integer and bool results are exact on every path
  t.ulps = ir::is_half(dtype) ? info.ulp_half : dtype == ir::DType::F64 ? info.ulp_f64 : info.ulp_f32;
  if (info.gpu == ir::OpAccuracy::Composite) t.abs_scale = composite_abs_scale(dtype);
  return t;
}

OutputTolerance gpu_output_tolerance(const ir::Graph& g, ir::NodeId output) {
  // The cone of the output (SSA: operands have smaller ids, so one backward sweep finds it).
  std::vector<bool> in_cone(static_cast<size_t>(output) + 1, false);
  in_cone[static_cast<size_t>(output)] = true;
  for (ir::NodeId id = output; id >= 0; --id) {
    if (!in_cone[static_cast<size_t>(id)]) continue;
    const ir::Node& n = g.node(id);
    for (int k = 0; k < n.nargs; ++k) in_cone[static_cast<size_t>(n.arg(k))] = true;
  }
  const ir::DType out_t = g.node(output).dtype;
  std::vector<bool> approx(static_cast<size_t>(output) + 1, false);  // a Math/Composite op in its cone
  int64_t ulps = 0;
  bool any_approx = false, composite = false;
  OutputTolerance t;
  for (ir::NodeId id = 0; id <= output; ++id) {
    if (!in_cone[static_cast<size_t>(id)]) continue;
    const ir::Node& n = g.node(id);
    const ir::OpAccuracy acc = ir::op_info(n.op).gpu;
    bool arg_approx = false;
    for (int k = 0; k < n.nargs; ++k) arg_approx = arg_approx || approx[static_cast<size_t>(n.arg(k))];
    // (A cast to a float dtype only rounds: continuous. where/max/min/clamp/relu are continuous in
    // their float operands; an approximate condition of where() came through a comparison.)
    if (arg_approx && acc == ir::OpAccuracy::Step && !(n.op == ir::Op::Cast && ir::is_float(n.dtype)))
      t.comparable = false;
    // A sum or product of approximate values has no bound relative to its result (terms of either
    // sign cancel); amax/amin pick one value and keep its bound; argmax/argmin of approximate
    // values may pick another element, anywhere in the row.
    if (arg_approx && (n.op == ir::Op::Sum || n.op == ir::Op::Mean || n.op == ir::Op::Prod || ir::is_arg_reduction(n.op)))
      t.comparable = false;
    const bool own = acc == ir::OpAccuracy::Math || acc == ir::OpAccuracy::Composite;
    if (own && ir::is_float(n.dtype)) {
      any_approx = true;
      ulps += gpu_op_tolerance(n.op, ir::is_float(out_t) ? out_t : n.dtype).ulps;
      composite = composite || acc == ir::OpAccuracy::Composite;
    }
    approx[static_cast<size_t>(id)] = (own && ir::is_float(n.dtype)) || arg_approx;
  }
  if (!any_approx) return t;
  if (!ir::is_float(out_t)) {
    t.comparable = false;  // an integer or bool computed from approximate math
    return t;
  }
  t.ulps = ulps;
  if (composite) t.abs_tolerance = composite_abs_scale(out_t);
  return t;
}

uint64_t ulp_distance(ir::DType dtype, uint64_t a_bits, uint64_t b_bits) {
  const int64_t a = ordered(dtype, a_bits), b = ordered(dtype, b_bits);
  return a > b ? static_cast<uint64_t>(a) - static_cast<uint64_t>(b) : static_cast<uint64_t>(b) - static_cast<uint64_t>(a);
}

std::string format_element(ir::DType dtype, const std::byte* element) {
  const int size = ir::dtype_size(dtype);
  const uint64_t bits = load_bits(element, size);
  const std::string hex = fmt::format("0x{:0{}x}", bits, size * 2);
  switch (dtype) {
    case ir::DType::Bool: return fmt::format("{} ({})", bits != 0 ? "true" : "false", hex);
    case ir::DType::I8: return fmt::format("{} ({})", static_cast<int8_t>(bits), hex);
    case ir::DType::U8: return fmt::format("{} ({})", static_cast<uint8_t>(bits), hex);
    case ir::DType::I32: return fmt::format("{} ({})", static_cast<int32_t>(bits), hex);
    case ir::DType::I64: return fmt::format("{} ({})", static_cast<int64_t>(bits), hex);
    case ir::DType::F16: {
      const double v = half_to_double(static_cast<uint16_t>(bits));
      if (std::isnan(v)) return fmt::format("nan ({})", hex);  // the sign and payload are in the hex
      return fmt::format("{} ({})", static_cast<float>(v), hex);
    }
    case ir::DType::BF16: {
      const uint32_t f32 = static_cast<uint32_t>(bits) << 16;
      float f;
      std::memcpy(&f, &f32, 4);
      if (std::isnan(f)) return fmt::format("nan ({})", hex);
      return fmt::format("{} ({})", f, hex);
    }
    case ir::DType::F32: {
      const uint32_t u = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &u, 4);
      if (std::isnan(f)) return fmt::format("nan ({})", hex);
      return fmt::format("{} ({})", f, hex);
    }
    case ir::DType::F64: {
      double d;
      std::memcpy(&d, &bits, 8);
      if (std::isnan(d)) return fmt::format("nan ({})", hex);
      return fmt::format("{} ({})", d, hex);
    }
  }
  return hex;
}

namespace {
// Whether element bits `a` match the expected `e` under the tolerance (compare_outputs' rules);
// raises max_ulps to their distance where it is measured.
bool element_matches(ir::DType dtype, uint64_t e, uint64_t a, int64_t ulp_tolerance, double abs_tolerance,
                     uint64_t& max_ulps) {
  const int size = ir::dtype_size(dtype);
  if (!ir::is_float(dtype) || (ulp_tolerance < 0 && ulp_tolerance != kBitwiseAnyNaN)) return e == a;
  if (ulp_tolerance == kBitwiseAnyNaN) {
    const uint64_t poison = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
    return e == a || (is_nan_bits(dtype, e) && is_nan_bits(dtype, a) && e != poison && a != poison);
  }
  const bool en = is_nan_bits(dtype, e), an = is_nan_bits(dtype, a);
  if (en || an) return en && an;
  if (ulp_tolerance == 0) {
    // Exact comparison, but the distance is still reported (fast-math and whole-graph reports).
    if (e != a) max_ulps = std::max(max_ulps, ulp_distance(dtype, e, a));
    return e == a;
  }
  const uint64_t d = ulp_distance(dtype, e, a);
  max_ulps = std::max(max_ulps, d);
  if (d <= static_cast<uint64_t>(ulp_tolerance)) return true;
  if (abs_tolerance <= 0) return false;
  const double ev = to_double(dtype, e), av = to_double(dtype, a);
  return std::isfinite(ev) && std::isfinite(av) && std::fabs(av - ev) <= abs_tolerance * std::max(1.0, std::fabs(ev));
}

// compare_outputs' message for a result with mismatches: how many, under which rule, and the
// first one with its coordinates in `shape`.
std::string mismatch_message(const CompareResult& r, int64_t count, int64_t ulp_tolerance, std::string_view what,
                             std::span<const int64_t> shape) {
  std::string coords;
  if (!shape.empty()) {
    std::vector<int64_t> c(shape.size());
    int64_t rest = r.first_index;
    for (size_t d = shape.size(); d-- > 0;) {
      const int64_t s = shape[d] > 0 ? shape[d] : 1;
      c[d] = rest % s;
      rest /= s;
    }
    coords = fmt::format(" [{}]", fmt::join(c, ", "));
  }
  const std::string tol = ulp_tolerance == kBitwiseAnyNaN ? "bitwise, NaN payloads aside"
                          : ulp_tolerance < 0                ? "bitwise"
                          : ulp_tolerance == 0               ? "exact" :
                          fmt::format("tolerance {} ulp", ulp_tolerance);
  return fmt::format("{}{}{} of {} elements differ ({}); first at index {}{}: expected {}, got {}", what,
                     what.empty() ? "" : ": ", r.mismatches, count, tol, r.first_index, coords, r.expected_text,
                     r.actual_text);
}
}  // namespace

CompareResult compare_outputs(ir::DType dtype, std::span<const std::byte> expected, std::span<const std::byte> actual,
                              int64_t count, int64_t ulp_tolerance, std::string_view what,
                              std::span<const int64_t> shape, double abs_tolerance) {
  const int size = ir::dtype_size(dtype);
  FJ_CHECK(count >= 0 && expected.size() >= static_cast<size_t>(count) * static_cast<size_t>(size) &&
               actual.size() >= static_cast<size_t>(count) * static_cast<size_t>(size),
           "compare_outputs: buffers smaller than count elements");
  CompareResult r;
  for (int64_t i = 0; i < count; ++i) {
    const std::byte* pe = expected.data() + i * size;
    const std::byte* pa = actual.data() + i * size;
    if (element_matches(dtype, load_bits(pe, size), load_bits(pa, size), ulp_tolerance, abs_tolerance, r.max_ulps))
      continue;
    if (r.mismatches++ == 0) {
      r.first_index = i;
      r.expected_text = format_element(dtype, pe);
      r.actual_text = format_element(dtype, pa);
    }
  }
  r.ok = r.mismatches == 0;
  if (!r.ok) r.message = mismatch_message(r, count, ulp_tolerance, what, shape);
  return r;
}

}  // namespace fusejit::jit
