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

// docs/ops.md, "GPU vs reference: ulp bounds": {f32, f64} tolerance of one call; composites are
// the sum of their calls (sigmoid/silu: exp; softplus: exp + log1p; gelu: erf; gelu_tanh: tanh).
struct OpBound {
  int f32 = 0, f64 = 0;
  bool composite = false;
};

OpBound op_bound(ir::Op op) {
  using ir::Op;
  switch (op) {
    case Op::Exp: case Op::Exp2: return {3, 2};
    case Op::Expm1: case Op::Log: case Op::Log1p: return {2, 2};
    case Op::Log2: return {2, 3};
    case Op::Log10: return {4, 3};
    case Op::Sin: case Op::Cos: return {3, 3};
    case Op::Tan: return {5, 3};
    case Op::Tanh: return {4, 3};
    case Op::Erf: return {3, 3};
    case Op::Pow: case Op::Atan2: return {5, 3};
    case Op::Sigmoid: case Op::Silu: return {3, 2, true};
    case Op::Softplus: return {5, 4, true};
    case Op::Gelu: return {3, 3, true};
    case Op::GeluTanh: return {4, 3, true};
    default: return {};
  }
}

}  // namespace

// Ops whose result jumps when an operand moves by one ulp: after an approximate value they can
// turn a few-ulp difference into any difference (a flipped comparison, a rounding step).
bool discontinuous(ir::Op op) {
  using ir::Op;
  switch (op) {
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Cast:
    case Op::Floor: case Op::Ceil: case Op::Round: case Op::Trunc: case Op::Sign: case Op::IsNan: case Op::IsInf:
    case Op::FloorDiv: case Op::Mod: case Op::Fmod: case Op::LogicalNot: case Op::LogicalAnd: case Op::LogicalOr:
      return true;
    default:
      return false;
  }
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
  const bool f64 = out_t == ir::DType::F64;
  std::vector<bool> approx(static_cast<size_t>(output) + 1, false);  // an approximate op in its cone
  int64_t ulps = 0, calls = 0;
  bool composite = false;
  OutputTolerance t;
  for (ir::NodeId id = 0; id <= output; ++id) {
    if (!in_cone[static_cast<size_t>(id)]) continue;
    const ir::Node& n = g.node(id);
    bool arg_approx = false;
    for (int k = 0; k < n.nargs; ++k) arg_approx = arg_approx || approx[static_cast<size_t>(n.arg(k))];
    // (A cast to a float dtype only rounds: continuous. where/max/min/clamp/relu are continuous in
    // their float operands; an approximate condition of where() came through a comparison.)
    if (arg_approx && discontinuous(n.op) && !(n.op == ir::Op::Cast && ir::is_float(n.dtype))) t.comparable = false;
    const OpBound b = op_bound(n.op);
    const int one = f64 ? b.f64 : b.f32;
    if (one > 0) {
      ++calls;
      ulps += b.composite ? 4 * one : one;
      composite = composite || b.composite;
    }
    approx[static_cast<size_t>(id)] = one > 0 || arg_approx;
  }
  if (calls == 0) return t;
  if (!ir::is_float(out_t)) {
    t.comparable = false;  // an integer or bool computed from approximate math
    return t;
  }
  if (ir::is_half(out_t)) {
    t.ulps = calls;
    return t;
  }
  t.ulps = ulps;
  if (composite) t.abs_tolerance = f64 ? std::ldexp(1.0, -48) : std::ldexp(1.0, -20);
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

CompareResult compare_outputs(ir::DType dtype, std::span<const std::byte> expected, std::span<const std::byte> actual,
                              int64_t count, int64_t ulp_tolerance, std::string_view what,
                              std::span<const int64_t> shape, double abs_tolerance) {
  const int size = ir::dtype_size(dtype);
  FJ_CHECK(count >= 0 && expected.size() >= static_cast<size_t>(count) * static_cast<size_t>(size) &&
               actual.size() >= static_cast<size_t>(count) * static_cast<size_t>(size),
           "compare_outputs: buffers smaller than count elements");
  const bool flt = ir::is_float(dtype);
  CompareResult r;
  for (int64_t i = 0; i < count; ++i) {
    const std::byte* pe = expected.data() + i * size;
    const std::byte* pa = actual.data() + i * size;
    const uint64_t e = load_bits(pe, size), a = load_bits(pa, size);
    bool same;
    if (ulp_tolerance == kBitwiseAnyNaN && flt) {
      const uint64_t poison = size == 8 ? ~0ull : (1ull << (8 * size)) - 1;
      same = e == a || (is_nan_bits(dtype, e) && is_nan_bits(dtype, a) && e != poison && a != poison);
    } else if (ulp_tolerance < 0 || !flt) {
      same = e == a;
    } else {
      const bool en = is_nan_bits(dtype, e), an = is_nan_bits(dtype, a);
      if (en || an) {
        same = en && an;
      } else if (ulp_tolerance == 0) {
        same = e == a;
        // Exact comparison, but the distance is still reported (fast-math and whole-graph reports).
        if (!same) r.max_ulps = std::max(r.max_ulps, ulp_distance(dtype, e, a));
      } else {
        const uint64_t d = ulp_distance(dtype, e, a);
        if (d > r.max_ulps) r.max_ulps = d;
        same = d <= static_cast<uint64_t>(ulp_tolerance);
        if (!same && abs_tolerance > 0) {
          const double ev = to_double(dtype, e), av = to_double(dtype, a);
          same = std::isfinite(ev) && std::isfinite(av) &&
                 std::fabs(av - ev) <= abs_tolerance * std::max(1.0, std::fabs(ev));
        }
      }
    }
    if (same) continue;
    if (r.mismatches++ == 0) {
      r.first_index = i;
      r.expected_text = format_element(dtype, pe);
      r.actual_text = format_element(dtype, pa);
    }
  }
  r.ok = r.mismatches == 0;
  if (!r.ok) {
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
    r.message = fmt::format("{}{}{} of {} elements differ ({}); first at index {}{}: expected {}, got {}", what,
                            what.empty() ? "" : ": ", r.mismatches, count, tol, r.first_index, coords,
                            r.expected_text, r.actual_text);
  }
  return r;
}

}  // namespace fusejit::jit
