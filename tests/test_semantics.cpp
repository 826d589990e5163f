// Every op's scalar semantics (ir/eval.h over ir/scalar/fj_scalar.h) on the hard cases, against
// hand-computed values: NaN, +-inf, -0.0, subnormals, half overflow and rounding ties, integer
// extremes, floor division signs, out-of-range casts; plus promotion and weak-literal rules.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <vector>

#include "ir/builder.h"
#include "ir/eval.h"
#include "ir/scalar/fj_scalar.h"
#include "tests/support/sanitized.h"

using namespace fusejit::ir;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

Scalar F(DType t, double v) { Scalar s; s.dtype = t; s.f = v; return s; }
Scalar F32(double v) { return F(DType::F32, v); }
Scalar F64(double v) { return F(DType::F64, v); }
Scalar I(DType t, int64_t v) { Scalar s; s.dtype = t; s.i = v; return s; }
Scalar I32(int64_t v) { return I(DType::I32, v); }
Scalar B(bool v) { return I(DType::Bool, v ? 1 : 0); }

Scalar ev(Op op, DType result, std::vector<Scalar> args) { return eval_scalar(op, result, args); }
// Unary/binary on one dtype with the natural result dtype.
Scalar un(Op op, Scalar x) { return ev(op, x.dtype, {x}); }
Scalar bin(Op op, Scalar a, Scalar b) { return ev(op, a.dtype, {a, b}); }
Scalar cast(Scalar x, DType to) { return ev(Op::Cast, to, {x}); }

uint64_t bits(double d) { uint64_t u; std::memcpy(&u, &d, 8); return u; }
// Bitwise float equality except that any NaN matches any NaN.
bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || bits(a) == bits(b); }

#define CHECK_F(expr, want)                                  \
  do {                                                       \
    Scalar r_ = (expr);                                      \
    INFO("got " << r_.f << " want " << (want));              \
    CHECK(same(r_.f, (want)));                               \
  } while (0)
#define CHECK_I(expr, want) CHECK((expr).i == static_cast<int64_t>(want))


}  // namespace

TEST_CASE("half conversions round to nearest even with overflow, subnormals and NaN") {
  // f16: max 65504; 65520 is the tie between 65504 and 65536 (= inf) and rounds to inf.
  CHECK(fj_round_f16(65504.0f) == 65504.0f);
  CHECK(fj_round_f16(65519.996f) == 65504.0f);
  CHECK(std::isinf(fj_round_f16(65520.0f)));
  CHECK(fj_round_f16(-70000.0f) == -INFINITY);
  CHECK(fj_round_f16(std::ldexp(1.0f, -24)) == std::ldexp(1.0f, -24));       // smallest subnormal
  CHECK(fj_round_f16(std::ldexp(1.0f, -25)) == 0.0f);                        // tie -> even (0)
  CHECK(fj_round_f16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)) == std::ldexp(1.0f, -24));
  CHECK(fj_round_f16(3 * std::ldexp(1.0f, -25)) == std::ldexp(1.0f, -23));   // 1.5 units -> 2
  CHECK(fj_round_f16(5 * std::ldexp(1.0f, -25)) == std::ldexp(1.0f, -23));   // 2.5 units -> 2
  CHECK(fj_round_f16(1.0f + std::ldexp(1.0f, -11)) == 1.0f);                 // tie -> even
  CHECK(fj_round_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 1.0f + std::ldexp(1.0f, -9));
  CHECK(fj_round_f16(std::ldexp(1.0f, -14) * 0.99951171875f) == std::ldexp(1.0f, -14));  // subnormal -> min normal
  CHECK(std::signbit(fj_round_f16(-0.0f)));
  CHECK(std::signbit(fj_round_f16(-1e-30f)));
  CHECK(std::isnan(fj_round_f16(NAN)));
  CHECK(fj_store_f16(1.0f).bits == 0x3c00);
  CHECK(fj_store_f16(-2.0f).bits == 0xc000);
  CHECK(fj_store_f16(65504.0f).bits == 0x7bff);
  CHECK(fj_store_f16(INFINITY).bits == 0x7c00);
  CHECK((fj_store_f16(NAN).bits & 0x7e00) == 0x7e00);
  CHECK(fj_store_f16(0.1f).bits == 0x2e66);
  // Every f16 bit pattern round-trips through float.
  for (unsigned h = 0; h < 0x10000; ++h) {
    fj_f16 x{static_cast<unsigned short>(h)};
    float v = fj_load(x);
    if (std::isnan(v)) continue;
    REQUIRE(fj_store_f16(v).bits == h);
  }
  // bf16: 8 significant bits, f32's exponent range.
  CHECK(fj_round_bf16(1.0f + std::ldexp(1.0f, -8)) == 1.0f);
  CHECK(fj_round_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(std::isinf(fj_round_bf16(3.4028234e38f)));                           // f32 max -> inf
  CHECK(fj_round_bf16(3.3895314e38f) == 3.3895314e38f);                       // bf16 max
  CHECK(fj_round_bf16(std::ldexp(1.0f, -133)) == std::ldexp(1.0f, -133));   // smallest subnormal
  CHECK(fj_round_bf16(std::ldexp(1.0f, -134)) == 0.0f);                      // tie -> 0
  CHECK(fj_round_bf16(3 * std::ldexp(1.0f, -134)) == std::ldexp(1.0f, -132));
  CHECK(std::isnan(fj_round_bf16(NAN)));
  CHECK(fj_store_bf16(1.0f).bits == 0x3f80);
  for (unsigned h = 0; h < 0x10000; ++h) {
    fj_bf16 x{static_cast<unsigned short>(h)};
    float v = fj_load(x);
    if (std::isnan(v)) continue;
    REQUIRE(fj_store_bf16(v).bits == h);
  }
}

TEST_CASE("f64 and i64 round straight to half types (no double rounding)") {
  // 1 + 2^-11 + 2^-40: via f32 it would become the tie 1 + 2^-11 and round down to 1.
  double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  CHECK(fj_cvt_f16(x) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(fj_cvt_f16(static_cast<float>(x)) == 1.0f);
  CHECK(fj_cvt_f16(0.1) == 0.0999755859375f);
  CHECK(std::isinf(fj_cvt_f16(1e300)));
  CHECK(fj_cvt_f16(1e-300) == 0.0f);
  CHECK(std::signbit(fj_cvt_f16(-1e-300)));
  CHECK(fj_cvt_f16(std::ldexp(1.0, -1074)) == 0.0f);  // f64 subnormal
  double y = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  CHECK(fj_cvt_bf16(y) == 1.0f + std::ldexp(1.0f, -7));
  CHECK(std::isinf(fj_cvt_bf16(1e39)));
  // i64 -> bf16: 2^62 + 2^54 + 1 is just above the tie, so it rounds up; through f64 it would
  // lose the +1 and round to even (2^62).
  long long big = (1ll << 62) + (1ll << 54) + 1;
  CHECK(fj_cvt_bf16(big) == std::ldexp(1.0f, 62) + std::ldexp(1.0f, 55));
  CHECK(fj_cvt_bf16(static_cast<long long>(kI64Min)) == -std::ldexp(1.0f, 63));
  CHECK(fj_cvt_f16(65519ll) == 65504.0f);
  CHECK(std::isinf(fj_cvt_f16(65520ll)));
  CHECK(fj_cvt_f16(static_cast<long long>(kI64Min)) == -INFINITY);
  CHECK(fj_cvt_f16(2049) == 2048.0f);  // tie -> even
  CHECK(fj_cvt_f16(2051) == 2052.0f);
  CHECK(fj_cvt_f16(static_cast<signed char>(-128)) == -128.0f);
  CHECK(fj_cvt_f16(static_cast<unsigned char>(255)) == 255.0f);
  CHECK(fj_cvt_bf16(257) == 256.0f);
  CHECK(fj_cvt_bf16(0) == 0.0f);
  CHECK(!std::signbit(fj_cvt_f16(0)));
}

TEST_CASE("casts: float to int truncates, NaN -> 0, out of range saturates; int to int wraps") {
  CHECK_I(cast(F32(kNaN), DType::I32), 0);
  CHECK_I(cast(F32(-1.9), DType::I32), -1);
  CHECK_I(cast(F32(1.9), DType::I32), 1);
  CHECK_I(cast(F32(1e10), DType::I32), kI32Max);
  CHECK_I(cast(F32(-1e10), DType::I32), kI32Min);
  CHECK_I(cast(F32(kInf), DType::I32), kI32Max);
  CHECK_I(cast(F32(-kInf), DType::I32), kI32Min);
  CHECK_I(cast(F32(-2147483648.0), DType::I32), kI32Min);
  CHECK_I(cast(F32(2147483520.0), DType::I32), 2147483520);
  CHECK_I(cast(F64(2147483647.9), DType::I32), kI32Max);
  CHECK_I(cast(F64(-2147483648.9), DType::I32), kI32Min);
  CHECK_I(cast(F64(9.3e18), DType::I64), kI64Max);
  CHECK_I(cast(F64(-9223372036854775808.0), DType::I64), kI64Min);
  CHECK_I(cast(F64(-1e300), DType::I64), kI64Min);
  CHECK_I(cast(F64(kNaN), DType::I64), 0);
  CHECK_I(cast(F32(9.2233715e18), DType::I64), 9223371487098961920ll);
  CHECK_I(cast(F32(127.9), DType::I8), 127);
  CHECK_I(cast(F32(200), DType::I8), 127);
  CHECK_I(cast(F32(-128.9), DType::I8), -128);
  CHECK_I(cast(F32(-1000), DType::I8), -128);
  // float -> u8 through i64, as PyTorch (c10::static_cast_with_inter_type) and NumPy: wraps.
  CHECK_I(cast(F32(-0.5), DType::U8), 0);
  CHECK_I(cast(F32(-1), DType::U8), 255);
  CHECK_I(cast(F32(-1.9), DType::U8), 255);
  CHECK_I(cast(F32(-129), DType::U8), 127);
  CHECK_I(cast(F32(255.9), DType::U8), 255);
  CHECK_I(cast(F32(256), DType::U8), 0);
  CHECK_I(cast(F32(300), DType::U8), 44);
  CHECK_I(cast(F(DType::F16, 65504), DType::U8), 224);
  CHECK_I(cast(F32(kNaN), DType::U8), 0);
  CHECK_I(cast(F32(kInf), DType::U8), 255);  // past i64: i64's saturation, then the low byte
  CHECK_I(cast(F32(-kInf), DType::U8), 0);
  CHECK_I(cast(F64(1e30), DType::U8), 255);
  CHECK_I(cast(F(DType::BF16, -kInf), DType::I64), kI64Min);
  // int -> int wraps (two's complement).
  CHECK_I(cast(I32(300), DType::U8), 44);
  CHECK_I(cast(I32(-1), DType::U8), 255);
  CHECK_I(cast(I(DType::I64, (1ll << 32) + 5), DType::I32), 5);
  CHECK_I(cast(I(DType::I64, kI64Min), DType::I32), 0);
  CHECK_I(cast(I(DType::U8, 200), DType::I8), -56);
  CHECK_I(cast(I(DType::I8, -1), DType::I64), -1);
  CHECK_I(cast(I(DType::U8, 255), DType::I32), 255);
  // to bool: x != 0.
  CHECK_I(cast(F32(kNaN), DType::Bool), 1);
  CHECK_I(cast(F32(-0.0), DType::Bool), 0);
  CHECK_I(cast(F64(1e-310), DType::Bool), 1);
  CHECK_I(cast(I32(-5), DType::Bool), 1);
  CHECK_I(cast(I(DType::U8, 0), DType::Bool), 0);
  // from bool.
  CHECK_F(cast(B(true), DType::F16), 1.0);
  CHECK_I(cast(B(true), DType::I8), 1);
  // float <-> float.
  CHECK_F(cast(F64(1e39), DType::F32), kInf);
  CHECK_F(cast(F64(0.1), DType::F32), static_cast<double>(0.1f));
  CHECK_F(cast(F64(0.1), DType::F16), 0.0999755859375);
  CHECK_F(cast(F(DType::F16, 0.0999755859375), DType::BF16), 0.10009765625);
  CHECK_F(cast(F(DType::BF16, 3.3895313892515355e38), DType::F16), kInf);
  CHECK_F(cast(F64(-0.0), DType::BF16), -0.0);
  CHECK_F(cast(F64(kNaN), DType::F16), kNaN);
  CHECK_F(cast(I(DType::I64, kI64Max), DType::F32), 9223372036854775808.0);
  CHECK_F(cast(I(DType::I64, (1ll << 53) + 1), DType::F64), 9007199254740992.0);
  CHECK_F(cast(F32(1e-45), DType::F64), static_cast<double>(1e-45f));  // subnormal kept
}

TEST_CASE("every one of the 9x9 casts is defined and identity casts are exact") {
  const DType all[] = {DType::Bool, DType::I8, DType::U8, DType::I32, DType::I64,
                       DType::F16, DType::BF16, DType::F32, DType::F64};
  for (DType from : all)
    for (DType to : all) {
      Scalar x = is_float(from) ? F(from, -3.0) : I(from, from == DType::Bool ? 1 : from == DType::U8 ? 3 : -3);
      Scalar r = cast(x, to);
      CHECK(r.dtype == to);
      if (from == to) CHECK(r.same_as(x));
      if (to == DType::Bool) CHECK(r.i == 1);
      if (to == DType::U8 && is_float(from)) CHECK(r.i == 253);          // -3.0 wraps through i64
      if (to == DType::U8 && (from == DType::I8 || from == DType::I32 || from == DType::I64)) CHECK(r.i == 253);
    }
}

TEST_CASE("integer arithmetic wraps; division by zero and INT_MIN / -1 are defined") {
  CHECK_I(bin(Op::Add, I32(kI32Max), I32(1)), kI32Min);
  CHECK_I(bin(Op::Sub, I32(kI32Min), I32(1)), kI32Max);
  CHECK_I(bin(Op::Mul, I32(65536), I32(65536)), 0);
  CHECK_I(bin(Op::Mul, I(DType::I64, kI64Max), I(DType::I64, 2)), -2);
  CHECK_I(bin(Op::Add, I(DType::I8, 127), I(DType::I8, 1)), -128);
  CHECK_I(bin(Op::Add, I(DType::U8, 255), I(DType::U8, 1)), 0);
  CHECK_I(bin(Op::Sub, I(DType::U8, 0), I(DType::U8, 1)), 255);
  CHECK_I(bin(Op::Mul, I(DType::U8, 16), I(DType::U8, 17)), 16);
  CHECK_I(un(Op::Neg, I32(kI32Min)), kI32Min);
  CHECK_I(un(Op::Neg, I(DType::U8, 1)), 255);
  CHECK_I(un(Op::Abs, I32(kI32Min)), kI32Min);
  CHECK_I(un(Op::Abs, I(DType::I8, -128)), -128);
  CHECK_I(un(Op::Abs, I(DType::I64, -7)), 7);
  // floordiv / mod: floor semantics (Python); fmod truncates (C).
  CHECK_I(bin(Op::FloorDiv, I32(7), I32(2)), 3);
  CHECK_I(bin(Op::FloorDiv, I32(7), I32(-2)), -4);
  CHECK_I(bin(Op::FloorDiv, I32(-7), I32(2)), -4);
  CHECK_I(bin(Op::FloorDiv, I32(-7), I32(-2)), 3);
  CHECK_I(bin(Op::FloorDiv, I32(-6), I32(2)), -3);
  CHECK_I(bin(Op::Mod, I32(-7), I32(2)), 1);
  CHECK_I(bin(Op::Mod, I32(7), I32(-2)), -1);
  CHECK_I(bin(Op::Mod, I32(-7), I32(-2)), -1);
  CHECK_I(bin(Op::Mod, I32(6), I32(-2)), 0);
  CHECK_I(bin(Op::Fmod, I32(-7), I32(2)), -1);
  CHECK_I(bin(Op::Fmod, I32(7), I32(-2)), 1);
  CHECK_I(bin(Op::FloorDiv, I32(7), I32(0)), 0);
  CHECK_I(bin(Op::Mod, I32(7), I32(0)), 0);
  CHECK_I(bin(Op::Fmod, I32(7), I32(0)), 0);
  CHECK_I(bin(Op::FloorDiv, I32(kI32Min), I32(-1)), kI32Min);
  CHECK_I(bin(Op::Mod, I32(kI32Min), I32(-1)), 0);
  CHECK_I(bin(Op::Fmod, I32(kI32Min), I32(-1)), 0);
  CHECK_I(bin(Op::FloorDiv, I(DType::I64, kI64Min), I(DType::I64, -1)), kI64Min);
  CHECK_I(bin(Op::Mod, I(DType::I64, kI64Min), I(DType::I64, 3)), 1);  // -2^63 = 3 * q + 1
  CHECK_I(bin(Op::FloorDiv, I(DType::I8, -128), I(DType::I8, -1)), -128);
  CHECK_I(bin(Op::Mod, I(DType::I8, -128), I(DType::I8, 127)), 126);
  CHECK_I(bin(Op::FloorDiv, I(DType::U8, 7), I(DType::U8, 2)), 3);
  CHECK_I(bin(Op::FloorDiv, I(DType::U8, 7), I(DType::U8, 0)), 0);
  CHECK_I(bin(Op::Mod, I(DType::U8, 255), I(DType::U8, 7)), 3);
  CHECK_I(bin(Op::Mod, I(DType::U8, 5), I(DType::U8, 0)), 0);
  // pow: wraps; negative exponents as PyTorch (1 for base 1, +-1 for base -1, else 0).
  CHECK_I(bin(Op::Pow, I32(2), I32(10)), 1024);
  CHECK_I(bin(Op::Pow, I32(2), I32(31)), kI32Min);
  CHECK_I(bin(Op::Pow, I32(3), I32(0)), 1);
  CHECK_I(bin(Op::Pow, I32(0), I32(0)), 1);
  CHECK_I(bin(Op::Pow, I32(2), I32(-1)), 0);
  CHECK_I(bin(Op::Pow, I32(0), I32(-1)), 0);
  CHECK_I(bin(Op::Pow, I32(1), I32(-5)), 1);
  CHECK_I(bin(Op::Pow, I32(-1), I32(-3)), -1);
  CHECK_I(bin(Op::Pow, I32(-1), I32(-2)), 1);
  CHECK_I(bin(Op::Pow, I32(-2), I32(3)), -8);
  CHECK_I(bin(Op::Pow, I(DType::I8, 2), I(DType::I8, 7)), -128);
  CHECK_I(bin(Op::Pow, I(DType::U8, 3), I(DType::U8, 5)), 243);
  CHECK_I(bin(Op::Pow, I(DType::U8, 2), I(DType::U8, 8)), 0);
  CHECK_I(bin(Op::Pow, I(DType::I64, 3), I(DType::I64, 40)), 12157665459056928801ull);
  CHECK_I(bin(Op::Pow, I(DType::I64, 3), I(DType::I64, 41)), static_cast<int64_t>(12157665459056928801ull * 3ull));
  // maximum / minimum / clamp / sign / relu on integers.
  CHECK_I(bin(Op::Maximum, I32(-3), I32(2)), 2);
  CHECK_I(bin(Op::Minimum, I(DType::I64, kI64Min), I(DType::I64, 0)), kI64Min);
  CHECK_I(bin(Op::Fmax, I(DType::U8, 200), I(DType::U8, 100)), 200);
  CHECK_I(ev(Op::Clamp, DType::I32, {I32(-10), I32(-3), I32(5)}), -3);
  CHECK_I(ev(Op::Clamp, DType::I32, {I32(10), I32(-3), I32(5)}), 5);
  CHECK_I(ev(Op::Clamp, DType::I32, {I32(0), I32(3), I32(1)}), 1);  // lo > hi -> hi
  CHECK_I(un(Op::Sign, I32(-7)), -1);
  CHECK_I(un(Op::Sign, I32(0)), 0);
  CHECK_I(un(Op::Sign, I(DType::I64, kI64Max)), 1);
  CHECK_I(un(Op::Sign, I(DType::U8, 9)), 1);
  CHECK_I(un(Op::Relu, I32(-5)), 0);
  CHECK_I(un(Op::Relu, I(DType::I8, 5)), 5);
  CHECK_I(un(Op::Floor, I32(-5)), -5);
  CHECK_I(un(Op::Round, I(DType::I64, kI64Max)), kI64Max);
  CHECK_I(ev(Op::IsNan, DType::Bool, {I32(3)}), 0);
  CHECK_I(ev(Op::IsInf, DType::Bool, {I(DType::I64, kI64Max)}), 0);
  CHECK_I(ev(Op::IsFinite, DType::Bool, {I(DType::I64, kI64Min)}), 1);
  CHECK_I(ev(Op::IsFinite, DType::Bool, {I(DType::Bool, 0)}), 1);
}

TEST_CASE("bool ops: add is or, mul is and; logical ops; comparisons") {
  CHECK_I(bin(Op::Add, B(true), B(true)), 1);
  CHECK_I(bin(Op::Add, B(false), B(false)), 0);
  CHECK_I(bin(Op::Mul, B(true), B(false)), 0);
  CHECK_I(bin(Op::Mul, B(true), B(true)), 1);
  CHECK_I(bin(Op::Maximum, B(false), B(true)), 1);
  CHECK_I(bin(Op::Minimum, B(false), B(true)), 0);
  CHECK_I(bin(Op::Fmax, B(false), B(true)), 1);
  CHECK_I(bin(Op::Fmin, B(false), B(true)), 0);
  CHECK_I(un(Op::Abs, B(true)), 1);
  CHECK_I(ev(Op::Clamp, DType::Bool, {B(false), B(true), B(true)}), 1);
  CHECK_I(ev(Op::Clamp, DType::Bool, {B(true), B(false), B(false)}), 0);
  CHECK_I(ev(Op::LogicalNot, DType::Bool, {B(false)}), 1);
  CHECK_I(ev(Op::LogicalAnd, DType::Bool, {B(true), B(false)}), 0);
  CHECK_I(ev(Op::LogicalOr, DType::Bool, {B(true), B(false)}), 1);
  CHECK_I(ev(Op::LogicalXor, DType::Bool, {B(true), B(false)}), 1);
  CHECK_I(ev(Op::LogicalXor, DType::Bool, {B(true), B(true)}), 0);
  CHECK_I(ev(Op::Lt, DType::Bool, {B(false), B(true)}), 1);
  CHECK_I(ev(Op::Eq, DType::Bool, {B(true), B(true)}), 1);
  CHECK_I(ev(Op::Where, DType::Bool, {B(true), B(false), B(true)}), 0);
  // Comparisons with NaN are false except ne; -0.0 == 0.0.
  CHECK_I(ev(Op::Eq, DType::Bool, {F32(kNaN), F32(kNaN)}), 0);
  CHECK_I(ev(Op::Ne, DType::Bool, {F32(kNaN), F32(kNaN)}), 1);
  CHECK_I(ev(Op::Lt, DType::Bool, {F32(kNaN), F32(1)}), 0);
  CHECK_I(ev(Op::Ge, DType::Bool, {F32(kNaN), F32(1)}), 0);
  CHECK_I(ev(Op::Eq, DType::Bool, {F64(-0.0), F64(0.0)}), 1);
  CHECK_I(ev(Op::Le, DType::Bool, {F64(-kInf), F64(-1e308)}), 1);
  CHECK_I(ev(Op::Gt, DType::Bool, {I(DType::I64, kI64Max), I(DType::I64, kI64Min)}), 1);
  CHECK_I(ev(Op::Lt, DType::Bool, {I(DType::U8, 255), I(DType::U8, 0)}), 0);
  CHECK_I(ev(Op::Gt, DType::Bool, {F(DType::F16, 65504), F(DType::F16, kInf)}), 0);
  CHECK_F(ev(Op::Where, DType::F32, {B(true), F32(-0.0), F32(0.0)}), -0.0);
  CHECK_F(ev(Op::Where, DType::F32, {B(false), F32(-0.0), F32(kNaN)}), kNaN);
  CHECK_I(ev(Op::Where, DType::I64, {B(false), I(DType::I64, 1), I(DType::I64, kI64Min)}), kI64Min);
}

TEST_CASE("float NaN rules: maximum/minimum/clamp/relu propagate, fmax/fmin ignore") {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    Scalar nan = F(t, kNaN), one = F(t, 1), two = F(t, 2), zero = F(t, 0), nzero = F(t, -0.0);
    CHECK_F(bin(Op::Maximum, nan, one), kNaN);
    CHECK_F(bin(Op::Maximum, one, nan), kNaN);
    CHECK_F(bin(Op::Minimum, nan, one), kNaN);
    CHECK_F(bin(Op::Minimum, one, nan), kNaN);
    CHECK_F(bin(Op::Maximum, one, two), 2.0);
    CHECK_F(bin(Op::Minimum, one, two), 1.0);
    CHECK_F(bin(Op::Fmax, nan, one), 1.0);
    CHECK_F(bin(Op::Fmax, one, nan), 1.0);
    CHECK_F(bin(Op::Fmin, nan, one), 1.0);
    CHECK_F(bin(Op::Fmin, one, nan), 1.0);
    CHECK_F(bin(Op::Fmax, nan, nan), kNaN);
    // Equal operands (0.0 vs -0.0): the first operand is returned (std::max/std::min).
    CHECK_F(bin(Op::Maximum, nzero, zero), -0.0);
    CHECK_F(bin(Op::Maximum, zero, nzero), 0.0);
    CHECK_F(bin(Op::Minimum, zero, nzero), 0.0);
    CHECK_F(bin(Op::Fmin, nzero, zero), -0.0);
    CHECK_F(bin(Op::Maximum, F(t, -kInf), F(t, -1e30 < -65504 && t == DType::F16 ? -65504 : -1)), t == DType::F16 ? -65504.0 : -1.0);
    CHECK_F(ev(Op::Clamp, t, {nan, zero, one}), kNaN);
    CHECK_F(ev(Op::Clamp, t, {two, nan, one}), kNaN);
    CHECK_F(ev(Op::Clamp, t, {two, zero, nan}), kNaN);
    CHECK_F(ev(Op::Clamp, t, {two, zero, one}), 1.0);
    CHECK_F(ev(Op::Clamp, t, {F(t, -kInf), zero, one}), 0.0);
    CHECK_F(ev(Op::Clamp, t, {zero, two, one}), 1.0);  // lo > hi -> hi (PyTorch)
    CHECK_F(un(Op::Relu, nan), kNaN);
    CHECK_F(un(Op::Relu, nzero), 0.0);
    CHECK_F(un(Op::Relu, F(t, -3)), 0.0);
    CHECK_F(un(Op::Relu, F(t, kInf)), kInf);
    CHECK_F(un(Op::Relu, F(t, 0.5)), 0.5);
  }
}

TEST_CASE("float rounding ops, sign, abs, neg") {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    CAPTURE(dtype_name(t));
    auto R = [&](double x) { return un(Op::Round, F(t, x)); };
    CHECK_F(R(0.5), 0.0);
    CHECK_F(R(1.5), 2.0);
    CHECK_F(R(2.5), 2.0);
    CHECK_F(R(-0.5), -0.0);
    CHECK_F(R(-2.5), -2.0);
    CHECK_F(R(-3.5), -4.0);
    CHECK_F(R(kInf), kInf);
    CHECK_F(R(kNaN), kNaN);
    CHECK_F(un(Op::Floor, F(t, -0.5)), -1.0);
    CHECK_F(un(Op::Floor, F(t, -0.0)), -0.0);
    CHECK_F(un(Op::Ceil, F(t, -0.5)), -0.0);
    CHECK_F(un(Op::Ceil, F(t, 0.25)), 1.0);
    CHECK_F(un(Op::Trunc, F(t, -1.75)), -1.0);
    CHECK_F(un(Op::Trunc, F(t, -0.5)), -0.0);
    CHECK_F(un(Op::Sign, F(t, -0.0)), 0.0);  // +0.0, as NumPy and PyTorch
    CHECK_F(un(Op::Sign, F(t, 0.0)), 0.0);
    CHECK_F(un(Op::Sign, F(t, kNaN)), kNaN);
    CHECK_F(un(Op::Sign, F(t, -kInf)), -1.0);
    CHECK_F(un(Op::Sign, F(t, 0.25)), 1.0);
    CHECK_F(un(Op::Abs, F(t, -0.0)), 0.0);
    CHECK_F(un(Op::Abs, F(t, -kInf)), kInf);
    CHECK_F(un(Op::Abs, F(t, kNaN)), kNaN);
    CHECK_F(un(Op::Neg, F(t, 0.0)), -0.0);
    CHECK_F(un(Op::Neg, F(t, kNaN)), kNaN);
    CHECK_I(ev(Op::IsNan, DType::Bool, {F(t, kNaN)}), 1);
    CHECK_I(ev(Op::IsNan, DType::Bool, {F(t, kInf)}), 0);
    CHECK_I(ev(Op::IsInf, DType::Bool, {F(t, -kInf)}), 1);
    CHECK_I(ev(Op::IsInf, DType::Bool, {F(t, kNaN)}), 0);
    CHECK_I(ev(Op::IsInf, DType::Bool, {F(t, t == DType::F16 ? 65504 : 3e38)}), 0);
    // isfinite: neither NaN nor +-inf (np.isfinite, torch.isfinite); the largest finite and the
    // smallest subnormal values are finite.
    CHECK_I(ev(Op::IsFinite, DType::Bool, {F(t, kNaN)}), 0);
    CHECK_I(ev(Op::IsFinite, DType::Bool, {F(t, -kNaN)}), 0);
    CHECK_I(ev(Op::IsFinite, DType::Bool, {F(t, kInf)}), 0);
    CHECK_I(ev(Op::IsFinite, DType::Bool, {F(t, -kInf)}), 0);
    CHECK_I(ev(Op::IsFinite, DType::Bool, {F(t, -0.0)}), 1);
    CHECK_I(ev(Op::IsFinite, DType::Bool, {F(t, t == DType::F16 ? 65504 : 3e38)}), 1);
    CHECK_I(ev(Op::IsFinite, DType::Bool, {F(t, t == DType::F16 ? 5.960464477539063e-08 : 1e-45)}), 1);
  }
  CHECK_F(un(Op::Round, F64(4503599627370497.0)), 4503599627370497.0);  // already integral
  CHECK_F(un(Op::Round, F32(8388609.0)), 8388609.0);
}

TEST_CASE("float division, floordiv, mod and fmod (PyTorch's floating formulas)") {
  CHECK_F(ev(Op::Div, DType::F32, {F32(1), F32(0)}), kInf);
  CHECK_F(ev(Op::Div, DType::F32, {F32(-1), F32(0)}), -kInf);
  CHECK_F(ev(Op::Div, DType::F32, {F32(1), F32(-0.0)}), -kInf);
  CHECK_F(ev(Op::Div, DType::F32, {F32(0), F32(0)}), kNaN);
  CHECK_F(ev(Op::Div, DType::F32, {F32(1), F32(3)}), static_cast<double>(1.0f / 3.0f));
  CHECK_F(ev(Op::Div, DType::F16, {F(DType::F16, 1), F(DType::F16, 3)}), 0.333251953125);
  CHECK_F(ev(Op::Div, DType::F32, {F32(1e-45), F32(2)}), 0.0);  // subnormal halves to 0 (tie, even)
  for (DType t : {DType::F32, DType::F64}) {
    CAPTURE(dtype_name(t));
    auto fd = [&](double a, double b) { return bin(Op::FloorDiv, F(t, a), F(t, b)); };
    auto md = [&](double a, double b) { return bin(Op::Mod, F(t, a), F(t, b)); };
    auto fm = [&](double a, double b) { return bin(Op::Fmod, F(t, a), F(t, b)); };
    CHECK_F(fd(7, 2), 3.0);
    CHECK_F(fd(7, -2), -4.0);
    CHECK_F(fd(-7.5, 2), -4.0);
    CHECK_F(fd(-7, -2), 3.0);
    CHECK_F(fd(1, 0), kInf);
    CHECK_F(fd(-1, 0), -kInf);
    CHECK_F(fd(0, 0), kNaN);
    CHECK_F(fd(-0.0, 1), -0.0);
    CHECK_F(fd(0.0, -1), -0.0);
    CHECK_F(fd(1, kInf), 0.0);
    CHECK_F(fd(-1, kInf), -1.0);
    CHECK_F(fd(kInf, 2), kNaN);
    CHECK_F(fd(kNaN, 2), kNaN);
    CHECK_F(fd(5, 0.5), 10.0);
    CHECK_F(md(-7.5, 2), 0.5);
    CHECK_F(md(7.5, -2), -0.5);
    CHECK_F(md(-7, -2), -1.0);
    CHECK_F(md(5, 0), kNaN);
    CHECK_F(md(-5, kInf), kInf);
    CHECK_F(md(5, kInf), 5.0);
    CHECK_F(md(-0.0, 1), 0.0);  // a zero remainder takes the divisor's sign (Python, NumPy)
    CHECK_F(md(4, -2), -0.0);
    CHECK_F(md(-1, 1), 0.0);
    CHECK_F(md(0.0, -kInf), -0.0);
    CHECK_F(fm(-7.5, 2), -1.5);
    CHECK_F(fm(7.5, -2), 1.5);
    CHECK_F(fm(5, 0), kNaN);
    CHECK_F(fm(kInf, 1), kNaN);
    CHECK_F(fm(5, kInf), 5.0);
    CHECK_F(fm(-0.0, 3), -0.0);
  }
  CHECK_F(bin(Op::FloorDiv, F(DType::F16, -7), F(DType::F16, 2)), -4.0);
  CHECK_F(bin(Op::Mod, F(DType::BF16, -1), F(DType::BF16, 3)), 2.0);
}

TEST_CASE("add/sub/mul on floats: IEEE, subnormals kept, halves rounded per node") {
  CHECK_F(bin(Op::Add, F32(kInf), F32(-kInf)), kNaN);
  CHECK_F(bin(Op::Mul, F32(0), F32(kInf)), kNaN);
  CHECK_F(bin(Op::Add, F32(-0.0), F32(-0.0)), -0.0);
  CHECK_F(bin(Op::Add, F32(-0.0), F32(0.0)), 0.0);
  CHECK_F(bin(Op::Sub, F32(0.0), F32(0.0)), 0.0);
  CHECK_F(bin(Op::Mul, F32(-1), F32(0)), -0.0);
  CHECK_F(bin(Op::Mul, F32(1e-45), F32(1)), static_cast<double>(1e-45f));      // no flush to zero
  CHECK_F(bin(Op::Mul, F32(std::ldexp(1.0, -126)), F32(0.5)), std::ldexp(1.0, -127));
  CHECK_F(bin(Op::Mul, F32(3e38), F32(10)), kInf);
  CHECK_F(bin(Op::Add, F(DType::F16, 65504), F(DType::F16, 16)), kInf);         // 65520 -> inf
  CHECK_F(bin(Op::Add, F(DType::F16, 65504), F(DType::F16, 8)), 65504.0);
  CHECK_F(bin(Op::Add, F(DType::F16, 1), F(DType::F16, std::ldexp(1.0, -11))), 1.0);
  CHECK_F(bin(Op::Mul, F(DType::F16, std::ldexp(1.0, -24)), F(DType::F16, 0.5)), 0.0);
  CHECK_F(bin(Op::Mul, F(DType::F16, std::ldexp(1.0, -14)), F(DType::F16, 0.5)), std::ldexp(1.0, -15));
  CHECK_F(bin(Op::Add, F(DType::BF16, 1), F(DType::BF16, std::ldexp(1.0, -8))), 1.0);
  CHECK_F(bin(Op::Mul, F(DType::BF16, 3.3895313892515355e38), F(DType::BF16, 2)), kInf);
  CHECK_F(bin(Op::Add, F64(0.1), F64(0.2)), 0.30000000000000004);
  CHECK_F(bin(Op::Add, F32(0.1f), F32(0.2f)), static_cast<double>(0.1f + 0.2f));
}

// The branch-free bf16 rounding (used where the GPU has no bf16 convert, and on the host) equals
// the generic bit-level rounding. Exhaustive over all 2^32 patterns takes seconds (done when it was
// written); here every 251st pattern plus the edges.
TEST_CASE("branch-free bf16 rounding equals the generic rounding") {
  size_t bad = 0;
  auto check = [&](uint32_t u) {
    const float f = fj_u2f(u);
    if (fj_bf16_bits_soft(f) != fj_round_bits_f32(f, 7, 8) && bad++ < 5) MESSAGE("0x" << std::hex << u);
  };
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 251) check(static_cast<uint32_t>(u));
  for (uint32_t u : {0x7f7f8000u, 0x7f7f7fffu, 0x7f7fffffu, 0x7f800000u, 0x7f800001u, 0x7fc00000u, 0xffffffffu,
                     0x00008000u, 0x00018000u, 0x00007fffu, 0x80008000u, 0x3f808000u, 0x3f818000u})
    check(u);
  CHECK(bad == 0);
}

// fj_add_f16 etc. (native half instructions on the GPU) must equal the per-node rule, f32 op then
// one rounding. Both are checked against the correctly rounded result, computed from the double
// result (exact for f16 sums and for all half products; for bf16 sums rounding through double is
// innocuous too, 53 >= 2 * 8 + 2): every f16/bf16 pattern as a against 269 b patterns spread over
// all exponents and signs, plus zeros, subnormals, the largest finite values, infinities and NaNs.
TEST_CASE("half add/sub/mul in storage form equal the f32-then-round rule and correct rounding") {
  for (int bf = 0; bf < 2; ++bf) {
    const int mb = bf ? 7 : 10, eb = bf ? 8 : 5;
    auto load = [&](unsigned v) { return bf ? fj_load(fj_bf16{static_cast<unsigned short>(v)}) : fj_load(fj_f16{static_cast<unsigned short>(v)}); };
    auto is_nan = [&](unsigned v) { return (v & 0x7fffu) > (bf ? 0x7f80u : 0x7c00u); };
    std::vector<unsigned> bs = {0x7c00, 0xfc00, 0x7f80, 0xff80, 0x8000, 0x0001, 0x8001, 0x3c00, 0x7bff, 0x7f7f, 0x0400};
    for (unsigned b = 0; b < 65536; b += 255) bs.push_back(b);
    size_t bad = 0, checked = 0;
    for (unsigned a = 0; a < 65536; a += fusejit::testing::kSweepStep)  // support/sanitized.h
      for (unsigned b : bs) {
        for (int op = 0; op < 3; ++op) {
          unsigned got;
          if (bf) {
            const fj_bf16 x{static_cast<unsigned short>(a)}, y{static_cast<unsigned short>(b)};
            got = (op == 0 ? fj_add_bf16(x, y) : op == 1 ? fj_sub_bf16(x, y) : fj_mul_bf16(x, y)).bits;
          } else {
            const fj_f16 x{static_cast<unsigned short>(a)}, y{static_cast<unsigned short>(b)};
            got = (op == 0 ? fj_add_f16(x, y) : op == 1 ? fj_sub_f16(x, y) : fj_mul_f16(x, y)).bits;
          }
          const double da = load(a), db = load(b);
          const double exact = op == 0 ? da + db : op == 1 ? da - db : da * db;
          const unsigned want = fj_round_bits_f64(exact, mb, eb);
          ++checked;
          if (got != want && !(is_nan(got) && is_nan(want)) && bad++ < 5)
            MESSAGE("bf16=" << bf << " op " << op << " a=0x" << std::hex << a << " b=0x" << b << " got 0x" << got
                            << " want 0x" << want);
        }
      }
    CHECK(bad == 0);
    CHECK(checked == 3u * ((65536u + fusejit::testing::kSweepStep - 1) / fusejit::testing::kSweepStep) * bs.size());
  }
}

TEST_CASE("math functions: special values and the composite activation formulas") {
  auto f = [](Op op, double x) { return ev(op, DType::F32, {F32(x)}); };
  auto d = [](Op op, double x) { return ev(op, DType::F64, {F64(x)}); };
  CHECK_F(f(Op::Exp, -kInf), 0.0);
  CHECK_F(f(Op::Exp, kInf), kInf);
  CHECK_F(f(Op::Exp, kNaN), kNaN);
  CHECK_F(f(Op::Exp, 0), 1.0);
  CHECK_F(f(Op::Exp, 100), kInf);
  CHECK_F(f(Op::Exp2, 10), 1024.0);
  CHECK_F(f(Op::Exp2, -1074), 0.0);
  CHECK_F(d(Op::Exp2, -1074), std::ldexp(1.0, -1074));
  CHECK_F(f(Op::Expm1, -kInf), -1.0);
  CHECK_F(f(Op::Expm1, -0.0), -0.0);
  CHECK_F(f(Op::Log, 0), -kInf);
  CHECK_F(f(Op::Log, -0.0), -kInf);
  CHECK_F(f(Op::Log, -1), kNaN);
  CHECK_F(f(Op::Log, 1), 0.0);
  CHECK_F(f(Op::Log2, 8), 3.0);
  CHECK_F(f(Op::Log10, 1000), 3.0);
  CHECK_F(f(Op::Log1p, -1), -kInf);
  CHECK_F(f(Op::Log1p, -0.0), -0.0);
  CHECK_F(f(Op::Sqrt, -0.0), -0.0);
  CHECK_F(f(Op::Sqrt, -1), kNaN);
  CHECK_F(f(Op::Sqrt, kInf), kInf);
  CHECK_F(f(Op::Sqrt, 2), static_cast<double>(std::sqrt(2.0f)));
  CHECK_F(f(Op::Rsqrt, 4), 0.5);
  CHECK_F(f(Op::Rsqrt, 0), kInf);
  CHECK_F(f(Op::Rsqrt, -0.0), -kInf);
  CHECK_F(f(Op::Rsqrt, kInf), 0.0);
  CHECK_F(f(Op::Rsqrt, -1), kNaN);
  CHECK_F(f(Op::Rsqrt, 2), static_cast<double>(1.0f / std::sqrt(2.0f)));
  CHECK_F(f(Op::Reciprocal, -0.0), -kInf);
  CHECK_F(f(Op::Reciprocal, kInf), 0.0);
  CHECK_F(f(Op::Reciprocal, 3), static_cast<double>(1.0f / 3.0f));
  CHECK_F(f(Op::Sin, -0.0), -0.0);
  CHECK_F(f(Op::Sin, kInf), kNaN);
  CHECK_F(f(Op::Cos, 0), 1.0);
  CHECK_F(f(Op::Tan, -0.0), -0.0);
  CHECK_F(f(Op::Tanh, kInf), 1.0);
  CHECK_F(f(Op::Tanh, -kInf), -1.0);
  CHECK_F(f(Op::Tanh, -0.0), -0.0);
  CHECK_F(f(Op::Erf, kInf), 1.0);
  CHECK_F(f(Op::Erf, -kInf), -1.0);
  CHECK_F(f(Op::Erf, -0.0), -0.0);
  CHECK_F(ev(Op::Atan2, DType::F32, {F32(0), F32(-1)}), static_cast<double>(std::atan2(0.0f, -1.0f)));
  CHECK_F(ev(Op::Atan2, DType::F32, {F32(-0.0), F32(-1)}), static_cast<double>(-std::atan2(0.0f, -1.0f)));
  CHECK_F(ev(Op::Atan2, DType::F32, {F32(0), F32(0)}), 0.0);
  CHECK_F(ev(Op::Atan2, DType::F32, {F32(kNaN), F32(1)}), kNaN);
  CHECK_F(ev(Op::Pow, DType::F32, {F32(0), F32(-1)}), kInf);
  CHECK_F(ev(Op::Pow, DType::F32, {F32(kNaN), F32(0)}), 1.0);
  CHECK_F(ev(Op::Pow, DType::F32, {F32(1), F32(kNaN)}), 1.0);
  CHECK_F(ev(Op::Pow, DType::F32, {F32(-8), F32(1.0 / 3)}), kNaN);
  CHECK_F(ev(Op::Pow, DType::F32, {F32(-2), F32(3)}), -8.0);
  CHECK_F(ev(Op::Pow, DType::F16, {F(DType::F16, 2), F(DType::F16, 16)}), kInf);  // 65536 -> inf
  // sigmoid(x) = 1 / (1 + exp(-x))
  CHECK_F(f(Op::Sigmoid, 0), 0.5);
  CHECK_F(f(Op::Sigmoid, -kInf), 0.0);
  CHECK_F(f(Op::Sigmoid, kInf), 1.0);
  CHECK_F(f(Op::Sigmoid, -200), 0.0);
  CHECK_F(f(Op::Sigmoid, kNaN), kNaN);
  CHECK_F(f(Op::Sigmoid, 1), static_cast<double>(1.0f / (1.0f + std::exp(-1.0f))));
  // silu(x) = x / (1 + exp(-x)); -inf / inf = NaN by the formula.
  CHECK_F(f(Op::Silu, 0), 0.0);
  CHECK_F(f(Op::Silu, -0.0), -0.0);
  CHECK_F(f(Op::Silu, kInf), kInf);
  CHECK_F(f(Op::Silu, -kInf), kNaN);
  CHECK_F(f(Op::Silu, -100), static_cast<double>(-100.0f / (1.0f + std::exp(100.0f))));
  CHECK_F(f(Op::Silu, 2), static_cast<double>(2.0f / (1.0f + std::exp(-2.0f))));
  // gelu(x) = 0.5 * x * (1 + erf(x * M_SQRT1_2)); gelu(-inf) = -inf * 0 = NaN by the formula.
  CHECK_F(f(Op::Gelu, 0), 0.0);
  CHECK_F(f(Op::Gelu, kInf), kInf);
  CHECK_F(f(Op::Gelu, -kInf), kNaN);
  CHECK_F(f(Op::Gelu, 1), static_cast<double>(0.5f * 1.0f * (1.0f + std::erf(1.0f * 0.70710678118654752440f))));
  CHECK_F(d(Op::Gelu, 1), 0.5 * 1.0 * (1.0 + std::erf(1.0 * 0.70710678118654752440)));
  CHECK(std::fabs(d(Op::Gelu, 1).f - 0.8413447460685429) < 1e-15);
  // gelu_tanh(x) = 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
  CHECK_F(f(Op::GeluTanh, 0), 0.0);
  CHECK_F(f(Op::GeluTanh, kInf), kInf);
  CHECK_F(f(Op::GeluTanh, -1e13), -0.0);  // x^3 overflows to -inf, tanh -> -1, 1 + -1 = 0
  CHECK(std::fabs(d(Op::GeluTanh, 1).f - 0.8411919906082768) < 1e-15);
  CHECK_F(f(Op::GeluTanh, 1.5),
          static_cast<double>(0.5f * 1.5f * (1.0f + std::tanh(0.7978845608028654f * (1.5f + 0.044715f * 1.5f * 1.5f * 1.5f)))));
  // softplus(x) = x > 20 ? x : log1p(exp(x))
  CHECK_F(f(Op::Softplus, 30), 30.0);
  CHECK_F(f(Op::Softplus, 20.5), 20.5);
  CHECK_F(f(Op::Softplus, 20), static_cast<double>(std::log1p(std::exp(20.0f))));
  CHECK_F(f(Op::Softplus, -kInf), 0.0);
  CHECK_F(f(Op::Softplus, kInf), kInf);
  CHECK_F(f(Op::Softplus, kNaN), kNaN);
  CHECK_F(f(Op::Softplus, 0), static_cast<double>(std::log1p(1.0f)));
  CHECK_F(d(Op::Softplus, 0), std::log(2.0));
  // logaddexp(a, b): NumPy's npy_logaddexp; large operands do not overflow (exp(1000) would).
  const auto lae = [](Op op, double a, double b) { return ev(op, DType::F32, {F32(a), F32(b)}); };
  const auto lae64 = [](Op op, double a, double b) { return ev(op, DType::F64, {F64(a), F64(b)}); };
  CHECK_F(lae(Op::Logaddexp, 0, 0), static_cast<double>(0.693147180559945309417232121458176568f));
  CHECK_F(lae64(Op::Logaddexp, 1000, 1000), 1000 + 0.693147180559945309417232121458176568);
  CHECK_F(lae64(Op::Logaddexp, 1000, 0), 1000.0);
  CHECK_F(lae64(Op::Logaddexp, 1, 2), 2 + std::log1p(std::exp(-1.0)));
  CHECK_F(lae(Op::Logaddexp, -kInf, -kInf), -kInf);
  CHECK_F(lae(Op::Logaddexp, kInf, kInf), kInf);
  CHECK_F(lae(Op::Logaddexp, kInf, -kInf), kInf);
  CHECK_F(lae(Op::Logaddexp, -0.0, -kInf), 0.0);
  CHECK_F(lae(Op::Logaddexp, kNaN, 1), kNaN);
  CHECK_F(lae(Op::Logaddexp, 1, kNaN), kNaN);
  CHECK_F(lae64(Op::Logaddexp2, 3, 3), 4.0);
  CHECK_F(lae64(Op::Logaddexp2, 1, 0), 1 + 1.442695040888963407359924681001892137 * std::log1p(std::exp2(-1.0)));
  CHECK_F(lae(Op::Logaddexp2, -kInf, -kInf), -kInf);
  CHECK_F(lae(Op::Logaddexp2, kNaN, kNaN), kNaN);
  // Half dtypes: computed in f32, rounded once at the end of the node.
  CHECK_F(ev(Op::Exp, DType::F16, {F(DType::F16, 12)}), kInf);  // e^12 = 162755 > 65504
  CHECK_F(ev(Op::Exp, DType::F16, {F(DType::F16, 1)}), 2.71875);
  CHECK_F(ev(Op::Exp, DType::BF16, {F(DType::BF16, 1)}), 2.71875);
  CHECK_F(ev(Op::Sigmoid, DType::BF16, {F(DType::BF16, -100)}), static_cast<double>(fj_round_bf16(1.0f / (1.0f + std::exp(100.0f)))));
}

TEST_CASE("eval_scalar rejects broken preconditions with InternalError") {
  CHECK_THROWS_AS(ev(Op::Add, DType::F32, {F32(1)}), InternalError);
  CHECK_THROWS_AS(ev(Op::Add, DType::F32, {F32(1), F64(1)}), InternalError);
  CHECK_THROWS_AS(ev(Op::Exp, DType::I32, {I32(1)}), InternalError);
  CHECK_THROWS_AS(ev(Op::Sub, DType::Bool, {B(true), B(true)}), InternalError);
  CHECK_THROWS_AS(ev(Op::Where, DType::F32, {F32(1), F32(1), F32(2)}), InternalError);
  CHECK_THROWS_AS(ev(Op::Input, DType::F32, {}), InternalError);
}

TEST_CASE("promote follows torch.result_type for fusejit's dtypes") {
  using D = DType;
  const D all[] = {D::Bool, D::I8, D::U8, D::I32, D::I64, D::F16, D::BF16, D::F32, D::F64};
  // Row/column order as in `all`; the i8/u8 entry is i32 (PyTorch says i16, which fusejit lacks).
  const D table[9][9] = {
      {D::Bool, D::I8, D::U8, D::I32, D::I64, D::F16, D::BF16, D::F32, D::F64},
      {D::I8, D::I8, D::I32, D::I32, D::I64, D::F16, D::BF16, D::F32, D::F64},
      {D::U8, D::I32, D::U8, D::I32, D::I64, D::F16, D::BF16, D::F32, D::F64},
      {D::I32, D::I32, D::I32, D::I32, D::I64, D::F16, D::BF16, D::F32, D::F64},
      {D::I64, D::I64, D::I64, D::I64, D::I64, D::F16, D::BF16, D::F32, D::F64},
      {D::F16, D::F16, D::F16, D::F16, D::F16, D::F16, D::F32, D::F32, D::F64},
      {D::BF16, D::BF16, D::BF16, D::BF16, D::BF16, D::F32, D::BF16, D::F32, D::F64},
      {D::F32, D::F32, D::F32, D::F32, D::F32, D::F32, D::F32, D::F32, D::F64},
      {D::F64, D::F64, D::F64, D::F64, D::F64, D::F64, D::F64, D::F64, D::F64},
  };
  for (int a = 0; a < 9; ++a)
    for (int b = 0; b < 9; ++b) {
      CAPTURE(dtype_name(all[a]));
      CAPTURE(dtype_name(all[b]));
      CHECK(promote(all[a], all[b]) == table[a][b]);
    }
}

namespace {
// Builds `op(x, y)` on fresh inputs/literals and returns the result node's dtype.
struct Built {
  GraphBuilder b{"t"};
  Operand in(DType t) { return Operand::of(b.add_input("v" + std::to_string(n++), t, {})); }
  DType dtype(const Operand& o) const { return b.graph().node(o.node).dtype; }
  int n = 0;
};
Operand lit_i(int64_t v) { Literal l; l.cat = Category::Int; l.i = v; return Operand::of(l); }
Operand lit_f(double v) { Literal l; l.cat = Category::Float; l.f = v; return Operand::of(l); }
Operand lit_b(bool v) { Literal l; l.cat = Category::Bool; l.i = v; return Operand::of(l); }
}  // namespace

TEST_CASE("builder typing: promotion, weak literals, float ops on ints, comparisons") {
  Built g;
  auto ap = [&](Op op, std::vector<Operand> a) { return g.b.apply(op, a); };
  CHECK(g.dtype(ap(Op::Add, {g.in(DType::F16), g.in(DType::F32)})) == DType::F32);
  CHECK(g.dtype(ap(Op::Add, {g.in(DType::BF16), g.in(DType::F16)})) == DType::F32);
  CHECK(g.dtype(ap(Op::Add, {g.in(DType::I32), g.in(DType::F16)})) == DType::F16);
  CHECK(g.dtype(ap(Op::Add, {g.in(DType::Bool), g.in(DType::I32)})) == DType::I32);
  CHECK(g.dtype(ap(Op::Add, {g.in(DType::I8), g.in(DType::U8)})) == DType::I32);
  // Weak literals take the tensor's dtype within a category; a higher category picks the default.
  CHECK(g.dtype(ap(Op::Mul, {g.in(DType::F16), lit_f(0.5)})) == DType::F16);
  CHECK(g.dtype(ap(Op::Mul, {g.in(DType::F16), lit_i(2)})) == DType::F16);
  CHECK(g.dtype(ap(Op::Mul, {g.in(DType::I32), lit_i(2)})) == DType::I32);
  CHECK(g.dtype(ap(Op::Mul, {g.in(DType::U8), lit_i(2)})) == DType::U8);
  CHECK(g.dtype(ap(Op::Add, {g.in(DType::I32), lit_f(2.5)})) == DType::F32);
  CHECK(g.dtype(ap(Op::Add, {g.in(DType::Bool), lit_i(1)})) == DType::I64);
  CHECK(g.dtype(ap(Op::Add, {g.in(DType::Bool), lit_b(true)})) == DType::Bool);
  CHECK(g.dtype(ap(Op::Add, {lit_f(1.5), g.in(DType::F64)})) == DType::F64);
  // Float-rule ops: ints become f32; float dtypes are kept.
  CHECK(g.dtype(ap(Op::Exp, {g.in(DType::I32)})) == DType::F32);
  CHECK(g.dtype(ap(Op::Exp, {g.in(DType::F16)})) == DType::F16);
  CHECK(g.dtype(ap(Op::Div, {g.in(DType::I64), g.in(DType::I64)})) == DType::F32);
  CHECK(g.dtype(ap(Op::Div, {g.in(DType::F64), lit_i(2)})) == DType::F64);
  CHECK(g.dtype(ap(Op::Sqrt, {g.in(DType::Bool)})) == DType::F32);
  // Comparisons, predicates and logical ops give bool.
  CHECK(g.dtype(ap(Op::Lt, {g.in(DType::I32), lit_f(2.5)})) == DType::Bool);
  CHECK(g.dtype(ap(Op::IsNan, {g.in(DType::I32)})) == DType::Bool);
  CHECK(g.dtype(ap(Op::LogicalAnd, {g.in(DType::F32), g.in(DType::I8)})) == DType::Bool);
  // where: the condition is converted to bool; values promote.
  CHECK(g.dtype(ap(Op::Where, {g.in(DType::Bool), g.in(DType::I32), lit_f(0.5)})) == DType::F32);
  CHECK(g.dtype(ap(Op::Where, {g.in(DType::F32), g.in(DType::F16), g.in(DType::BF16)})) == DType::F32);
  CHECK(g.dtype(ap(Op::Clamp, {g.in(DType::I32), lit_i(0), lit_i(5)})) == DType::I32);
  // Same-rule ops except add/mul/maximum/minimum/fmax/fmin/abs/clamp/where reject bool.
  CHECK_THROWS_AS(ap(Op::Sub, {g.in(DType::Bool), g.in(DType::Bool)}), UserError);
  CHECK_THROWS_AS(ap(Op::Neg, {g.in(DType::Bool)}), UserError);
  CHECK(g.dtype(ap(Op::Add, {g.in(DType::Bool), g.in(DType::Bool)})) == DType::Bool);
}

TEST_CASE("builder folds all-literal expressions in f64/i64 and converts literals by the cast rules") {
  Built g;
  auto ap = [&](Op op, std::vector<Operand> a) { return g.b.apply(op, a); };
  Operand half = ap(Op::Div, {lit_i(1), lit_i(2)});
  REQUIRE(half.is_literal());
  CHECK(half.lit.cat == Category::Float);
  CHECK(half.lit.f == 0.5);
  Operand q = ap(Op::FloorDiv, {lit_i(-7), lit_i(2)});
  REQUIRE(q.is_literal());
  CHECK(q.lit.i == -4);
  Operand p = ap(Op::Add, {lit_f(0.1), lit_f(0.2)});
  CHECK(p.lit.f == 0.30000000000000004);  // f64 arithmetic, not f32
  // A literal meeting a u8 tensor is converted by the cast rules (300 wraps to 44).
  CHECK(literal_to_scalar(Literal{Category::Int, 0.0, 300, {}}, DType::U8).i == 44);
  CHECK(literal_to_scalar(Literal{Category::Float, 1e10, 0, {}}, DType::I32).i == kI32Max);
  CHECK(literal_to_scalar(Literal{Category::Float, 0.1, 0, {}}, DType::F16).f == 0.0999755859375);
  CHECK(std::isinf(literal_to_scalar(Literal{Category::Float, 1e5, 0, {}}, DType::F16).f));
  CHECK(literal_to_scalar(Literal{Category::Int, 0.0, (1ll << 62) + (1ll << 54) + 1, {}}, DType::BF16).f ==
        std::ldexp(1.0, 62) + std::ldexp(1.0, 55));
}

TEST_CASE("promotion tiers: params, 0-d inputs, typed constants and 0-d results rank below tensors") {
  GraphBuilder b("tiers");
  auto vec = [&](DType t) { return Operand::of(b.add_input("v" + std::to_string(b.graph().size()), t, {{4, -1}})); };
  auto zd = [&](DType t) { return Operand::of(b.add_input("s" + std::to_string(b.graph().size()), t, {})); };
  auto dt = [&](const Operand& o) { return b.graph().node(o.node).dtype; };
  auto ap = [&](Op op, std::vector<Operand> a) { return b.apply(op, a); };
  Literal eps_default{Category::Float, 1e-5, 0, {}};
  const Operand eps = Operand::of(b.add_param("eps", DType::F32, eps_default));
  const Operand h = vec(DType::F16);
  CHECK(dt(ap(Op::Mul, {h, eps})) == DType::F16);                      // issue 11: was f32
  CHECK(dt(ap(Op::Add, {vec(DType::U8), zd(DType::I64)})) == DType::U8);  // issue 11: was i64
  CHECK(dt(ap(Op::Add, {vec(DType::I8), zd(DType::U8)})) == DType::I8);
  CHECK(dt(ap(Op::Mul, {vec(DType::I32), zd(DType::F64)})) == DType::F64);
  CHECK(dt(ap(Op::Add, {vec(DType::Bool), zd(DType::I32)})) == DType::I32);
  CHECK(dt(ap(Op::Where, {vec(DType::Bool), h, eps})) == DType::F16);
  CHECK(dt(ap(Op::Clamp, {h, eps, zd(DType::F64)})) == DType::F16);
  CHECK(dt(ap(Op::Maximum, {h, b.cast(Operand::of(eps_default), DType::F32)})) == DType::F16);  // typed constant
  const Operand eps2 = ap(Op::Mul, {eps, Operand::of(Literal{Category::Int, 0.0, 2, {}})});       // 0-d result
  CHECK(dt(ap(Op::Sub, {h, eps2})) == DType::F16);
  CHECK(dt(ap(Op::Mul, {b.cast(h, DType::F32), eps})) == DType::F32);  // the explicit cast forces f32
  CHECK(dt(ap(Op::Add, {zd(DType::F16), eps})) == DType::F32);         // one tier: the table
  CHECK(dt(ap(Op::Lt, {h, eps})) == DType::Bool);
  // A literal that does not fit the dtype it converts to is a located error naming it.
  const Operand x8 = vec(DType::I8);
  Literal lo{Category::Int, 0.0, -1000, {3, 14}}, hi{Category::Int, 0.0, 1000, {3, 21}};
  try {
    ap(Op::Clamp, {x8, Operand::of(lo), Operand::of(hi)});
    FAIL("clamp(x_i8, -1000, 1000) must be an error");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find("literal -1000 does not fit in i8") != std::string::npos);
    CHECK(e.loc() == Loc{3, 14});
  }
  CHECK_THROWS_AS(ap(Op::Add, {vec(DType::U8), Operand::of(Literal{Category::Int, 0.0, -1, {}})}), UserError);
  CHECK_THROWS_AS(ap(Op::Mul, {h, Operand::of(Literal{Category::Float, 1e5, 0, {}})}), UserError);
  CHECK(dt(ap(Op::Mul, {h, Operand::of(Literal{Category::Float, kInf, 0, {}})})) == DType::F16);  // inf is no overflow
  CHECK(dt(ap(Op::Add, {x8, Operand::of(Literal{Category::Int, 0.0, -128, {}})})) == DType::I8);
  CHECK_THROWS_AS(ap(Op::Add, {x8, Operand::of(Literal{Category::Float, 1e300, 0, {}})}), UserError);  // f32 inf
  // Explicit casts convert by the cast rules, unchecked.
  CHECK(b.graph().node(b.cast(Operand::of(hi), DType::I8).node).value.i == -24);
}

namespace {
// The bit operations of one integer dtype against an oracle written with exact int64 / 128-bit
// arithmetic: a << b is a * 2^b wrapped to the width, a >> b is floor(a / 2^b), and a count
// outside [0, W) gives 0 (left) or the sign fill (right), PyTorch's and NumPy's rule
// (docs/ops.md). Returns the number of mismatches over all pairs of `values`.
template <class T>
int bit_op_mismatches(DType t, const std::vector<int64_t>& values) {
  constexpr int W = 8 * static_cast<int>(sizeof(T));
  constexpr bool sgn = std::numeric_limits<T>::is_signed;
  auto wrap = [](__int128 v) {  // v mod 2^W as a value of T
    const unsigned __int128 m = static_cast<unsigned __int128>(v) & ((static_cast<unsigned __int128>(1) << W) - 1);
    return static_cast<int64_t>(sgn && (m >> (W - 1)) ? static_cast<__int128>(m) - (static_cast<__int128>(1) << W)
                                                      : static_cast<__int128>(m));
  };
  auto floor_shift = [](int64_t a, int64_t n) {  // floor(a / 2^n), 0 <= n < 64
    const __int128 d = static_cast<__int128>(1) << n;
    __int128 q = a / d;
    if (q * d != a && a < 0) --q;
    return static_cast<int64_t>(q);
  };
  int bad = 0;
  for (int64_t a : values)
    for (int64_t b : values) {
      const bool outside = b < 0 || b >= W;
      const int64_t ls = outside ? 0 : wrap(static_cast<__int128>(a) * (static_cast<__int128>(1) << b));
      const int64_t rs = outside ? (a < 0 ? -1 : 0) : floor_shift(a, b);
      const int64_t want[] = {wrap(a & b), wrap(a | b), wrap(a ^ b), wrap(~a), ls, rs};
      const Op ops[] = {Op::BitwiseAnd, Op::BitwiseOr, Op::BitwiseXor, Op::BitwiseNot, Op::LeftShift, Op::RightShift};
      for (int k = 0; k < 6; ++k) {
        const Scalar r = ops[k] == Op::BitwiseNot ? un(ops[k], I(t, a)) : bin(ops[k], I(t, a), I(t, b));
        if (r.i != want[k] && bad++ < 4)
          FAIL_CHECK(op_name(ops[k]) << "(" << a << ", " << b << ") in " << dtype_name(t) << ": got " << r.i
                                     << ", want " << want[k]);
      }
    }
  return bad;
}
}  // namespace

TEST_CASE("bit operations and shifts: every i8 and u8 pair; i32 and i64 extremes and counts around the width") {
  std::vector<int64_t> i8, u8;
  for (int64_t v = -128; v < 128; ++v) i8.push_back(v);
  for (int64_t v = 0; v < 256; ++v) u8.push_back(v);
  CHECK(bit_op_mismatches<signed char>(DType::I8, i8) == 0);
  CHECK(bit_op_mismatches<unsigned char>(DType::U8, u8) == 0);
  std::vector<int64_t> i32 = {kI32Min, kI32Min + 1, -1000, -65, -64, -33, -32, -2, -1, 0, 1, 2, 3, 30, 31, 32, 33,
                              63, 64, 65, 100, 12345, kI32Max - 1, kI32Max};
  CHECK(bit_op_mismatches<int>(DType::I32, i32) == 0);
  std::vector<int64_t> i64 = i32;
  for (int64_t v : {kI64Min, kI64Min + 1, int64_t{62}, int64_t{1} << 40, -(int64_t{1} << 40), kI64Max - 1, kI64Max})
    i64.push_back(v);
  CHECK(bit_op_mismatches<long long>(DType::I64, i64) == 0);
  // bool: logical.
  for (bool a : {false, true})
    for (bool b : {false, true}) {
      CHECK(bin(Op::BitwiseAnd, B(a), B(b)).i == (a && b));
      CHECK(bin(Op::BitwiseOr, B(a), B(b)).i == (a || b));
      CHECK(bin(Op::BitwiseXor, B(a), B(b)).i == (a != b));
    }
  CHECK(un(Op::BitwiseNot, B(true)).i == 0);
  CHECK(un(Op::BitwiseNot, B(false)).i == 1);
}

TEST_CASE("bit operations: typing (PyTorch's domains), literal fits and folding as Python") {
  Built g;
  auto ap = [&](Op op, std::vector<Operand> a) { return g.b.apply(op, a); };
  CHECK(g.dtype(ap(Op::BitwiseAnd, {g.in(DType::I32), g.in(DType::Bool)})) == DType::I32);
  CHECK(g.dtype(ap(Op::BitwiseXor, {g.in(DType::Bool), g.in(DType::Bool)})) == DType::Bool);
  CHECK(g.dtype(ap(Op::BitwiseOr, {g.in(DType::Bool), lit_b(true)})) == DType::Bool);
  CHECK(g.dtype(ap(Op::BitwiseNot, {g.in(DType::Bool)})) == DType::Bool);
  CHECK(g.dtype(ap(Op::BitwiseAnd, {g.in(DType::U8), g.in(DType::I8)})) == DType::I32);  // PyTorch: int16
  CHECK(g.dtype(ap(Op::LeftShift, {g.in(DType::I8), lit_i(100)})) == DType::I8);
  CHECK(g.dtype(ap(Op::RightShift, {g.in(DType::U8), g.in(DType::I64)})) == DType::I64);
  CHECK(g.dtype(ap(Op::LeftShift, {g.in(DType::Bool), lit_i(1)})) == DType::I64);  // bool + int literal -> i64
  // Refused, with the op and the dtype named: floats anywhere, shifts of bool, counts that do not fit.
  auto refused = [&](Op op, std::vector<Operand> a, const char* what) {
    try {
      ap(op, a);
      FAIL("accepted: " << what);
    } catch (const UserError& e) {
      CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
    }
  };
  refused(Op::BitwiseAnd, {g.in(DType::I32), g.in(DType::F32)}, "bitwise_and is not defined for f32 operands; it needs integer or bool operands");
  refused(Op::BitwiseNot, {g.in(DType::F16)}, "bitwise_not is not defined for f16 operands");
  refused(Op::LeftShift, {g.in(DType::I64), lit_f(0.5)}, "left_shift is not defined for f32 operands; it needs integer operands");
  refused(Op::RightShift, {g.in(DType::Bool), g.in(DType::Bool)}, "right_shift is not defined for bool operands; cast to an integer type first");
  refused(Op::LeftShift, {g.in(DType::Bool), lit_b(true)}, "left_shift is not defined for bool");
  // NumPy refuses - on bools too, and names the logical op meant.
  refused(Op::Neg, {g.in(DType::Bool)}, "neg is not defined for bool operands; negate a bool with logical_not (NumPy's ~)");
  refused(Op::Sub, {g.in(DType::Bool), lit_b(true)}, "take a difference of bools with logical_xor (NumPy's ^)");
  refused(Op::LeftShift, {g.in(DType::I8), lit_i(128)}, "literal 128 does not fit in i8");
  refused(Op::BitwiseXor, {lit_f(1.5), lit_i(1)}, "bitwise_xor is not defined for f64");
  // Literal folding: Python's & | ^ keep bools bool; << is exact (2^64 does not fit i64); a
  // negative count, which Python refuses, takes the op's rule.
  auto folded = [&](Op op, std::vector<Operand> a) {
    const Operand r = ap(op, a);
    REQUIRE(r.is_literal());
    return r.lit;
  };
  CHECK(folded(Op::BitwiseAnd, {lit_b(true), lit_b(true)}).cat == Category::Bool);
  CHECK(folded(Op::BitwiseNot, {lit_b(true)}).i == 0);
  CHECK(folded(Op::BitwiseNot, {lit_b(true)}).cat == Category::Bool);
  CHECK(folded(Op::BitwiseAnd, {lit_b(true), lit_i(3)}).cat == Category::Int);
  CHECK(folded(Op::LeftShift, {lit_b(true), lit_b(true)}).i == 2);
  CHECK(folded(Op::LeftShift, {lit_i(-1), lit_i(63)}).i == kI64Min);
  CHECK(folded(Op::LeftShift, {lit_i(0), lit_i(1000)}).i == 0);
  CHECK(folded(Op::LeftShift, {lit_i(1), lit_i(-1)}).i == 0);
  CHECK(folded(Op::RightShift, {lit_i(-5), lit_i(-1)}).i == -1);
  CHECK(folded(Op::RightShift, {lit_i(kI64Min), lit_i(1000)}).i == -1);
  CHECK_THROWS_AS(ap(Op::LeftShift, {lit_i(1), lit_i(63)}), UserError);
  CHECK_THROWS_AS(ap(Op::LeftShift, {lit_i(1), lit_i(64)}), UserError);
  CHECK_THROWS_AS(ap(Op::LeftShift, {lit_i(kI64Min), lit_i(1)}), UserError);
  CHECK(folded(Op::LeftShift, {lit_i(-(int64_t{1} << 61)), lit_i(2)}).i == kI64Min);
}
