#include "ir/random_fill.h"

#include <charconv>
#include <cstring>
#include <cmath>
#include <limits>
#include <string>

#include "ir/scalar/fj_scalar.h"

namespace fusejit::ir {
namespace {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// xoshiro256** (Blackman and Vigna), seeded through splitmix64 as its authors recommend.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& w : s_) w = splitmix64(seed);
  }
  uint64_t next() {
    uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Uniform in [0, n) (n > 0) by the multiply-shift method; n == 0 means 2^64.
  uint64_t below(uint64_t n) {
    if (n == 0) return next();
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

std::string num(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

struct IntLimits { int64_t lo, hi; };
IntLimits int_limits(DType t) {
  switch (t) {
    case DType::I8: return {-128, 127};
    case DType::U8: return {0, 255};
    case DType::I32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

// The largest finite value of a float dtype (f64 for the others).
double float_max(DType t) {
  switch (t) {
    case DType::F16: return 65504.0;
    case DType::BF16: return 3.3895313892515355e38;
    case DType::F32: return std::numeric_limits<float>::max();
    default: return std::numeric_limits<double>::max();
  }
}

// Whether `v` rounds to a finite value of float dtype `t` (round to nearest even: below the largest
// finite value plus half its ulp; the largest has an odd significand, so the tie goes to inf).
bool rounds_finite(double v, DType t) {
  const double half_ulp = t == DType::F16 ? 16.0 : t == DType::BF16 ? std::ldexp(1.0, 119) : t == DType::F32 ? std::ldexp(1.0, 103) : 0.0;
  return half_ulp > 0 ? std::fabs(v) < float_max(t) + half_ulp : std::isfinite(v);
}

// A one-element tensor of dtype `t` holding `v` rounded by the cast rules (as random_fill stores it).
Tensor one_value(double v, DType t) {
  Tensor one(t, {1});
  Scalar s;
  s.dtype = DType::F64;
  s.f = v;
  one.set(0, s);
  return one;
}

double in_dtype(double v, DType t) { return one_value(v, t).get(0).f; }

// The largest value of float dtype `t` below `v` (v >= the dtype's lowest finite value): f16 0.99951
// for 1, where uniform draws in [0, 1) rounded to f16 gave 1 about once in 4,000 (hostile pass).
double below(double v, DType t) {
  Tensor one = one_value(v, t);
  const double r = one.get(0).f;
  if (r < v) return r;  // v rounded down already
  const size_t size = dtype_size(t);
  uint64_t bits = 0;
  std::memcpy(&bits, one.data.data(), size);
  if (r > 0) bits -= 1;       // sign and magnitude: one step toward 0
  else if (r < 0) bits += 1;  // one step away from 0
  else bits = (uint64_t{1} << (8 * size - 1)) | 1;  // below +-0: the negative of the smallest subnormal
  std::memcpy(one.data.data(), &bits, size);
  return one.get(0).f;
}

// Hard cases per float dtype, as f64 values exactly representable in that dtype.
std::vector<double> float_specials(DType t) {
  double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  double sub, norm;
  switch (t) {
    case DType::F16: sub = std::ldexp(1.0, -24); norm = std::ldexp(1.0, -14); break;
    case DType::BF16: sub = std::ldexp(1.0, -133); norm = std::ldexp(1.0, -126); break;
    case DType::F32: sub = std::ldexp(1.0, -149); norm = std::ldexp(1.0, -126); break;
    default: sub = std::numeric_limits<double>::denorm_min(); norm = std::numeric_limits<double>::min(); break;
  }
  const double big = float_max(t);
  return {nan, inf, -inf, -0.0, 0.0, sub, -sub, norm, -norm, big, -big, 0.5, 2.5, -2.5, 1.0, -1.0};
}

}  // namespace

FillRange default_fill_range(DType t) {
  switch (t) {
    case DType::Bool: return {0, 1};
    case DType::I8: return {-100, 100};
    case DType::U8: return {0, 200};
    case DType::I32: case DType::I64: return {-1000, 1000};
    default: return {-4.0, 4.0};
  }
}

uint64_t input_seed(uint64_t run_seed, std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (char c : name) { h ^= static_cast<unsigned char>(c); h *= 0x100000001b3ull; }
  uint64_t s = run_seed ^ h;
  return splitmix64(s);
}

namespace {
// Why range r does not suit dtype t (in the parentheses of the error), or "".
std::string range_problem(DType t, const FillRange& r) {
  const std::string what = std::string(dtype_name(t));
  if (!std::isfinite(r.lo) || !std::isfinite(r.hi) || !(r.lo < r.hi)) return "need finite LO < HI";  // floats: [LO, HI)
  if (t == DType::Bool) return "";
  if (is_int(t)) {
    IntLimits lim = int_limits(t);
    // Bounds must be whole numbers within the dtype (checked in f64, exact for these magnitudes).
    const bool whole = r.lo == std::floor(r.lo) && r.hi == std::floor(r.hi);
    return whole && r.lo >= static_cast<double>(lim.lo) && r.hi <= static_cast<double>(lim.hi)
               ? ""
               : "need whole numbers in [" + std::to_string(lim.lo) + ", " + std::to_string(lim.hi) + "]";
  }
  // A bound that rounds to inf would fill inf there: --special draws those on purpose.
  if (!rounds_finite(r.lo, t) || !rounds_finite(r.hi, t))
    return "need bounds that round to a finite " + what + ": at most " + num(float_max(t)) + " in magnitude";
  if (r.hi - r.lo > std::numeric_limits<double>::max()) return "too wide";
  // 1e-50:1e-49 for an f32 input filled it with zeros alone (hostile pass), as 1:1 would.
  if (in_dtype(r.lo, t) == in_dtype(r.hi, t))
    return "LO and HI round to the same " + what + " value, " + num(in_dtype(r.lo, t)) + ": every element would be that value";
  return "";
}
}  // namespace

void check_fill_range(DType t, const FillRange& r) {
  if (const std::string why = range_problem(t, r); !why.empty())
    throw UserError("invalid random range " + num(r.lo) + ":" + num(r.hi) + " for " + std::string(dtype_name(t)) + " (" +
                    why + ")");
}

void random_fill(Tensor& t, uint64_t seed, const FillSpec& spec) {
  FillRange r = spec.range.value_or(default_fill_range(t.dtype));
  check_fill_range(t.dtype, r);
  Rng rng(seed);
  const int64_t n = t.numel();
  const bool special = spec.mode == FillMode::Special;
  Scalar s;
  if (t.dtype == DType::Bool) {
    s.dtype = DType::Bool;
    for (int64_t i = 0; i < n; ++i) { s.i = static_cast<int64_t>(rng.next() >> 63); t.set(i, s); }
    return;
  }
  if (is_int(t.dtype)) {
    IntLimits lim = int_limits(t.dtype);
    int64_t lo = r.lo <= -9.2233720368547758e18 ? INT64_MIN : static_cast<int64_t>(r.lo);
    int64_t hi = r.hi >= 9.2233720368547758e18 ? INT64_MAX : static_cast<int64_t>(r.hi);
    uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) + 1;  // 0 = all 2^64
    const int64_t specials[] = {lim.lo, lim.hi, lim.lo + 1, lim.hi - 1, 0, 1, lim.lo < 0 ? -1 : 2};
    s.dtype = DType::I64;
    for (int64_t i = 0; i < n; ++i) {
      if (special && (rng.next() >> 63)) s.i = specials[rng.below(std::size(specials))];
      else s.i = static_cast<int64_t>(static_cast<uint64_t>(lo) + rng.below(span));
      Scalar v = s;
      v.dtype = t.dtype;  // in range by construction: store as the dtype directly
      t.set(i, v);
    }
    return;
  }
  std::vector<double> sp = float_specials(t.dtype);
  const double top = below(r.hi, t.dtype);  // [LO, HI): a draw that rounds up to HI or past takes this
  s.dtype = DType::F64;
  for (int64_t i = 0; i < n; ++i) {
    const bool hard = special && (rng.next() >> 63);
    s.f = hard ? sp[rng.below(sp.size())] : r.lo + (r.hi - r.lo) * rng.unit();
    t.set(i, s);  // rounds to the dtype by the cast rules
    if (!hard && t.get(i).f >= r.hi) t.set(i, Scalar{DType::F64, top});
  }
}

FillRange parse_fill_range(std::string_view text) {
  auto bad = [&]() -> UserError {
    return UserError("invalid range '" + std::string(text) + "': expected LO:HI with numbers, e.g. -1:1");
  };
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) throw bad();
  auto parse = [&](std::string_view s) {
    double v = 0;
    auto res = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || res.ec != std::errc() || res.ptr != s.data() + s.size() || !std::isfinite(v)) throw bad();
    return v;
  };
  FillRange r{parse(text.substr(0, colon)), parse(text.substr(colon + 1))};
  if (r.lo > r.hi) throw UserError("invalid range '" + std::string(text) + "': LO must not exceed HI");
  return r;
}

}  // namespace fusejit::ir
