// fj_scalar.h: the scalar semantics of every fusejit op, in ONE header shared by the reference
// evaluator (host C++) and every generated kernel (embedded as text, compiled by NVRTC for the
// GPU or by the host compiler for the CPU path). Because both sides run this exact code, CPU
// results agree bit for bit with the reference; on the GPU only the math library calls differ
// (CUDA Math API instead of the C library; ulp bounds in docs/ops.md).
//
// Rules (docs/ops.md explains each, with its source):
// - Compute types: bool, signed char (i8), unsigned char (u8), int (i32), long long (i64), float
//   (f32, and f16/bf16 values held exactly in a float), double (f64).
// - fj_<op>(CT...) for every non-leaf op of ir/ops.def except cast, overloaded on compute types.
//   Integer arithmetic wraps (done in unsigned types: never UB). x//0, x%0, fmod(x,0) give 0 for
//   integers; INT_MIN//-1 = INT_MIN (wraps), INT_MIN % -1 = 0. Integer pow with a negative
//   exponent follows PyTorch: 1 for base 1, +-1 for base -1, otherwise 0. Shifts by a count
//   outside [0, width) give 0 (left) or the sign fill (right), as PyTorch and NumPy.
// - NaN: maximum/minimum/clamp/relu propagate NaN; fmax/fmin return the other operand.
// - Zeros: sign(-0.0) = +0.0; a zero float remainder (mod) takes the divisor's sign (Python,
//   NumPy); docs/ops.md lists every signed-zero, NaN and inf rule where NumPy and PyTorch differ.
// - Casts fj_cvt_<dst>(src): float -> int truncates toward zero; NaN -> 0; values beyond the
//   destination's range saturate to its min/max. int -> int wraps (two's complement). Anything
//   -> bool is x != 0 (so NaN -> true). Every conversion into f16/bf16 is ONE round-to-nearest-
//   even from the exact source value (f64 and i64 sources included: no double rounding).
// - f16/bf16: fj_round_f16/bf16 round a float to the nearest-even half value (overflow -> inf,
//   NaN stays NaN), returned as a float. Bit operations only, so host and device agree.
//
// Constraints: compiles with g++/clang++ as C++17/20 and under NVRTC with NO includes; everything
// is prefixed fj_ / FJ_ because generated kernels paste this text at their top. Keep the text
// free of the embed delimiter used by cmake/embed.cmake.
#ifndef FJ_SCALAR_H
#define FJ_SCALAR_H

// Device code: NVRTC (__CUDACC_RTC__) or nvcc (__CUDACC__), so a dumped .cu also builds with
// `nvcc -cubin`. The host C++ build of the kernels defines neither.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define FJ_DEVICE_CODE 1
#endif
#ifdef FJ_DEVICE_CODE
#define FJ_FN __device__ __forceinline__
#else
#include <cmath>
#include <cstdint>
#include <cstring>
#define FJ_FN static inline
#endif

// Storage types of the 16-bit floats (raw IEEE binary16 / bfloat16 bits).
struct fj_f16 { unsigned short bits; };
struct fj_bf16 { unsigned short bits; };

// ---------------------------------------------------------------------------------------------
// Bit casts.
// ---------------------------------------------------------------------------------------------
#ifdef FJ_DEVICE_CODE
FJ_FN unsigned int fj_f2u(float x) { return __float_as_uint(x); }
FJ_FN float fj_u2f(unsigned int u) { return __uint_as_float(u); }
FJ_FN unsigned long long fj_d2u(double x) { return (unsigned long long)__double_as_longlong(x); }
FJ_FN double fj_u2d(unsigned long long u) { return __longlong_as_double((long long)u); }
FJ_FN int fj_clz64(unsigned long long x) { return __clzll((long long)x); }  // x != 0
#else
FJ_FN unsigned int fj_f2u(float x) { unsigned int u; std::memcpy(&u, &x, 4); return u; }
FJ_FN float fj_u2f(unsigned int u) { float x; std::memcpy(&x, &u, 4); return x; }
FJ_FN unsigned long long fj_d2u(double x) { unsigned long long u; std::memcpy(&u, &x, 8); return u; }
FJ_FN double fj_u2d(unsigned long long u) { double x; std::memcpy(&x, &u, 8); return x; }
FJ_FN int fj_clz64(unsigned long long x) { return __builtin_clzll(x); }  // x != 0
#endif

// ---------------------------------------------------------------------------------------------
// Rounding into a small binary float format with `mb` mantissa bits and `eb` exponent bits
// (f16: 10, 5; bf16: 7, 8), round to nearest, ties to even. Returns the format's bits.
// ---------------------------------------------------------------------------------------------

// Packs sign + a magnitude m * 2^e2 (m > 0, exact) rounded once to nearest-even.
FJ_FN unsigned int fj_pack_small(unsigned int sign, unsigned long long m, int e2, int mb, int eb) {
  const int bias = (1 << (eb - 1)) - 1;
  const unsigned int inf = ((1u << eb) - 1u) << mb;
  int top = 63 - fj_clz64(m);       // value = m * 2^e2, leading bit of m at `top`
  int exp = top + e2;               // unbiased exponent of the value
  int te = exp + bias;              // biased target exponent if normal
  if (te >= (1 << eb) - 1) return sign | inf;
  // Number of low bits of m that are dropped: keep mb+1 bits for normals, fewer for subnormals
  // (whose unit is 2^(1 - bias - mb)).
  int shift = te >= 1 ? top - mb : (1 - bias - mb) - e2;
  unsigned long long r;
  if (shift <= 0) {
    r = m << (-shift);  // exact: fits, since the result has at most mb+1 bits
  } else {
    if (shift >= 64) return sign;  // far below half the smallest subnormal
    r = m >> shift;
    unsigned long long rem = m & ((1ull << shift) - 1ull);
    unsigned long long half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (r & 1ull))) r += 1ull;
  }
  // Normal: r has its leading bit at mb, so (te-1)<<mb + r sets exponent te; a carry out of the
  // mantissa bumps the exponent. Subnormal (te < 1): r < 2^mb, or == 2^mb = smallest normal.
  unsigned long long bits = te >= 1 ? ((unsigned long long)(te - 1) << mb) + r : r;
  if (bits >= inf) return sign | inf;
  return sign | (unsigned int)bits;
}

FJ_FN unsigned int fj_round_bits_f64(double d, int mb, int eb) {
  unsigned long long x = fj_d2u(d);
  unsigned int sign = (unsigned int)(x >> 63) << (mb + eb);
  unsigned long long ax = x & 0x7fffffffffffffffull;
  const unsigned int inf = ((1u << eb) - 1u) << mb;
  if (ax > 0x7ff0000000000000ull)  // NaN: quiet, keep the top payload bits
    return sign | inf | (1u << (mb - 1)) | (unsigned int)((ax >> (52 - mb)) & ((1u << mb) - 1u));
  if (ax == 0x7ff0000000000000ull) return sign | inf;
  if (ax == 0) return sign;
  int e = (int)(ax >> 52);
  unsigned long long m = ax & 0xfffffffffffffull;
  if (e == 0) e = 1; else m |= 1ull << 52;
  return fj_pack_small(sign, m, e - 1075, mb, eb);
}

FJ_FN unsigned int fj_round_bits_f32(float f, int mb, int eb) {
  unsigned int x = fj_f2u(f);
  unsigned int sign = (x >> 31) << (mb + eb);
  unsigned int ax = x & 0x7fffffffu;
  const unsigned int inf = ((1u << eb) - 1u) << mb;
  if (ax > 0x7f800000u)  // NaN: quiet, keep the top payload bits
    return sign | inf | (1u << (mb - 1)) | ((ax >> (23 - mb)) & ((1u << mb) - 1u));
  if (ax == 0x7f800000u) return sign | inf;
  if (ax == 0) return sign;
  int e = (int)(ax >> 23);
  unsigned int m = ax & 0x7fffffu;
  if (e == 0) e = 1; else m |= 1u << 23;
  return fj_pack_small(sign, m, e - 150, mb, eb);
}

// Integer magnitude -> small float, one rounding.
FJ_FN unsigned int fj_round_bits_i64(long long v, int mb, int eb) {
  unsigned int sign = v < 0 ? 1u << (mb + eb) : 0u;
  unsigned long long m = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
  if (m == 0) return 0u;
  return fj_pack_small(sign, m, 0, mb, eb);
}

#ifdef FJ_DEVICE_CODE
// On the GPU the conversions use the hardware's cvt instructions (PTX ISA, "cvt"): the same IEEE
// round-to-nearest-even, subnormal and overflow results as the bit-level code, at a fraction of
// its cost (the bit-level path made f16/bf16 kernels compute-bound); NaN becomes a canonical NaN.
FJ_FN unsigned int fj_hw_round_f16_bits(float x) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
FJ_FN float fj_hw_f16_bits_to_f32(unsigned int b) {
  float r;
  unsigned short h = (unsigned short)b;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
  return r;
}
#if __CUDA_ARCH__ >= 800
#define FJ_HW_BF16 1
FJ_FN unsigned int fj_hw_round_bf16_bits(float x) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
}
#endif
#endif

// f16 bits -> float (exact).
FJ_FN float fj_f16_bits_to_f32(unsigned int h) {
#ifdef FJ_DEVICE_CODE
  return fj_hw_f16_bits_to_f32(h);
#else
  unsigned int sign = (h & 0x8000u) << 16;
  unsigned int e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return fj_u2f(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    if (m == 0) return fj_u2f(sign);
    e = 113;  // normalise a subnormal: value = m * 2^-24
    while (!(m & 0x400u)) { m <<= 1; --e; }
    return fj_u2f(sign | (e << 23) | ((m & 0x3ffu) << 13));
  }
  return fj_u2f(sign | ((e + 112u) << 23) | (m << 13));
#endif
}
FJ_FN float fj_bf16_bits_to_f32(unsigned int b) { return fj_u2f(b << 16); }

// Storage <-> compute.
FJ_FN float fj_load(fj_f16 h) { return fj_f16_bits_to_f32(h.bits); }
FJ_FN float fj_load(fj_bf16 h) { return fj_bf16_bits_to_f32(h.bits); }
// Rounds a float to f16 / bf16 bits (nearest-even).
FJ_FN unsigned int fj_f16_bits_of(float x) {
#ifdef FJ_DEVICE_CODE
  return fj_hw_round_f16_bits(x);
#else
  return fj_round_bits_f32(x, 10, 5);
#endif
}
// bf16 is the top half of an f32 (same exponent range), so round to nearest even is one add on
// the bits: the same results as fj_round_bits_f32(x, 7, 8) for every f32 (overflow to inf,
// subnormals, NaN quieted with its top payload bits; tests/test_semantics.cpp checks it). Branch
// free: the branchy generic path, inlined per vector lane, made NVRTC's optimizer run for minutes
// on sm_75 (no bf16 cvt there).
FJ_FN unsigned int fj_bf16_bits_soft(float x) {
  const unsigned int u = fj_f2u(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;  // NaN: quiet, keep the top payload
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}
FJ_FN unsigned int fj_bf16_bits_of(float x) {
#ifdef FJ_HW_BF16
  return fj_hw_round_bf16_bits(x);
#else
  return fj_bf16_bits_soft(x);
#endif
}
FJ_FN fj_f16 fj_store_f16(float x) { fj_f16 r; r.bits = (unsigned short)fj_f16_bits_of(x); return r; }
FJ_FN fj_bf16 fj_store_bf16(float x) { fj_bf16 r; r.bits = (unsigned short)fj_bf16_bits_of(x); return r; }

// Per-node rounding of an f16/bf16 result computed in f32.
FJ_FN float fj_round_f16(float x) { return fj_f16_bits_to_f32(fj_f16_bits_of(x)); }
FJ_FN float fj_round_bf16(float x) { return fj_bf16_bits_to_f32(fj_bf16_bits_of(x)); }

// ---------------------------------------------------------------------------------------------
// Casts: fj_cvt_<dst>(CT src) -> CT(dst).
// ---------------------------------------------------------------------------------------------

// To bool: x != 0 (NaN != 0, so NaN -> true).
FJ_FN bool fj_cvt_bool(bool x) { return x; }
FJ_FN bool fj_cvt_bool(signed char x) { return x != 0; }
FJ_FN bool fj_cvt_bool(unsigned char x) { return x != 0; }
FJ_FN bool fj_cvt_bool(int x) { return x != 0; }
FJ_FN bool fj_cvt_bool(long long x) { return x != 0; }
FJ_FN bool fj_cvt_bool(float x) { return x != 0.0f; }
FJ_FN bool fj_cvt_bool(double x) { return x != 0.0; }

// To integers. From integers: two's-complement wrap (through the unsigned type). From floats:
// truncate toward zero; NaN -> 0; x >= HI -> MAX; x <= LO -> MIN, where HI = MAX + 1 and
// LO = MIN; in-range conversions are exact. u8 is PyTorch's (c10::static_cast_with_inter_type,
// CPU and CUDA) and NumPy's: through i64, so a truncated value wraps (-1.0 -> 255, 300.0 -> 44).
#define FJ_CVT_INT(NAME, T, U, HI, LO, MAXV, MINV)                                            \
  FJ_FN T fj_cvt_##NAME(bool x) { return (T)(x ? 1 : 0); }                                   \
  FJ_FN T fj_cvt_##NAME(signed char x) { return (T)(U)x; }                                   \
  FJ_FN T fj_cvt_##NAME(unsigned char x) { return (T)(U)x; }                                 \
  FJ_FN T fj_cvt_##NAME(int x) { return (T)(U)x; }                                           \
  FJ_FN T fj_cvt_##NAME(long long x) { return (T)(U)x; }                                     \
  FJ_FN T fj_cvt_##NAME(float x) {                                                           \
    if (x != x) return (T)0;                                                                 \
    if (x >= (float)(HI)) return MAXV;                                                       \
    if (x <= (float)(LO)) return MINV;                                                       \
    return (T)x;                                                                             \
  }                                                                                          \
  FJ_FN T fj_cvt_##NAME(double x) {                                                          \
    if (x != x) return (T)0;                                                                 \
    if (x >= (double)(HI)) return MAXV;                                                      \
    if (x <= (double)(LO)) return MINV;                                                      \
    return (T)x;                                                                             \
  }
FJ_CVT_INT(i8, signed char, unsigned char, 128.0, -128.0, (signed char)127, (signed char)(-128))
FJ_CVT_INT(i32, int, unsigned int, 2147483648.0, -2147483648.0, 2147483647, (-2147483647 - 1))
FJ_CVT_INT(i64, long long, unsigned long long, 9223372036854775808.0, -9223372036854775808.0,
           9223372036854775807ll, (-9223372036854775807ll - 1ll))
#undef FJ_CVT_INT
FJ_FN unsigned char fj_cvt_u8(bool x) { return (unsigned char)(x ? 1 : 0); }
FJ_FN unsigned char fj_cvt_u8(signed char x) { return (unsigned char)x; }
FJ_FN unsigned char fj_cvt_u8(unsigned char x) { return x; }
FJ_FN unsigned char fj_cvt_u8(int x) { return (unsigned char)(unsigned int)x; }
FJ_FN unsigned char fj_cvt_u8(long long x) { return (unsigned char)(unsigned long long)x; }
FJ_FN unsigned char fj_cvt_u8(double x) { return (unsigned char)(unsigned long long)fj_cvt_i64(x); }
FJ_FN unsigned char fj_cvt_u8(float x) { return (unsigned char)(unsigned long long)fj_cvt_i64(x); }

// To f32 / f64: the C++ conversions (round to nearest even; exact where representable).
FJ_FN float fj_cvt_f32(bool x) { return x ? 1.0f : 0.0f; }
FJ_FN float fj_cvt_f32(signed char x) { return (float)x; }
FJ_FN float fj_cvt_f32(unsigned char x) { return (float)x; }
FJ_FN float fj_cvt_f32(int x) { return (float)x; }
FJ_FN float fj_cvt_f32(long long x) { return (float)x; }
FJ_FN float fj_cvt_f32(float x) { return x; }
FJ_FN float fj_cvt_f32(double x) { return (float)x; }
FJ_FN double fj_cvt_f64(bool x) { return x ? 1.0 : 0.0; }
FJ_FN double fj_cvt_f64(signed char x) { return (double)x; }
FJ_FN double fj_cvt_f64(unsigned char x) { return (double)x; }
FJ_FN double fj_cvt_f64(int x) { return (double)x; }
FJ_FN double fj_cvt_f64(long long x) { return (double)x; }
FJ_FN double fj_cvt_f64(float x) { return (double)x; }
FJ_FN double fj_cvt_f64(double x) { return x; }

// To f16 / bf16 (result held in a float): one round-to-nearest-even from the exact source value.
// Integers are rounded from their exact magnitude (fj_round_bits_i64), f64 from its exact bits.
#define FJ_CVT_HALF(NAME, MB, EB, TOF)                                                         \
  FJ_FN float fj_cvt_##NAME(bool x) { return x ? 1.0f : 0.0f; }                                \
  FJ_FN float fj_cvt_##NAME(signed char x) { return TOF(fj_round_bits_i64(x, MB, EB)); }       \
  FJ_FN float fj_cvt_##NAME(unsigned char x) { return TOF(fj_round_bits_i64(x, MB, EB)); }     \
  FJ_FN float fj_cvt_##NAME(int x) { return TOF(fj_round_bits_i64(x, MB, EB)); }               \
  FJ_FN float fj_cvt_##NAME(long long x) { return TOF(fj_round_bits_i64(x, MB, EB)); }         \
  FJ_FN float fj_cvt_##NAME(float x) { return TOF(fj_##NAME##_bits_of(x)); }                   \
  FJ_FN float fj_cvt_##NAME(double x) { return TOF(fj_round_bits_f64(x, MB, EB)); }
FJ_CVT_HALF(f16, 10, 5, fj_f16_bits_to_f32)
FJ_CVT_HALF(bf16, 7, 8, fj_bf16_bits_to_f32)
#undef FJ_CVT_HALF

// ---------------------------------------------------------------------------------------------
// Math library: C/C++ library on the host, CUDA Math API on the device.
// ---------------------------------------------------------------------------------------------
// The inexact functions take their arguments through fj_opaque, an empty asm statement the
// optimizer cannot see through, so no compiler evaluates such a call at compile time: a fused
// kernel that sees a constant operand (a literal, a where's literal branch) must give the bits
// the unfused kernel and the reference compute at run time. Measured (docs/ops.md, "Constant
// operands"): GCC 12 at -O2 folds with its own correctly rounded arithmetic (expm1f(1.0f):
// 0x3fdbf0a9; glibc at run time: 0x3fdbf0a8); clang 14 and NVRTC 13 fold float functions through
// the host's double functions (atan2f(5.275492f, 1.7f): 0x3fa128d3; glibc 0x3fa128d4), and NVRTC
// f64 functions through the host's libm, not the CUDA Math API the GPU runs. -fno-builtin does not
// help on the host: libstdc++'s float overloads call __builtin_expm1f etc. by name. The exact
// functions (sqrt, floor, ceil, trunc, rint, fabs, fmod) fold to the run-time bits and stay
// visible to the optimizer.
#ifdef FJ_DEVICE_CODE
FJ_FN float fj_opaque(float x) { asm("" : "+f"(x)); return x; }
FJ_FN double fj_opaque(double x) { asm("" : "+d"(x)); return x; }
#define FJ_MATH1(OP, FN)                                              \
  FJ_FN float fj_##OP(float x) { return FN##f(x); }                   \
  FJ_FN double fj_##OP(double x) { return FN(x); }
#define FJ_MATH2(OP, FN)                                              \
  FJ_FN float fj_##OP(float a, float b) { return FN##f(a, b); }       \
  FJ_FN double fj_##OP(double a, double b) { return FN(a, b); }
#define FJ_LIBM1(OP, FN)                                                          \
  FJ_FN float fj_##OP(float x) { return FN##f(fj_opaque(x)); }                    \
  FJ_FN double fj_##OP(double x) { return FN(fj_opaque(x)); }
#define FJ_LIBM2(OP, FN)                                                                   \
  FJ_FN float fj_##OP(float a, float b) { return FN##f(fj_opaque(a), fj_opaque(b)); }      \
  FJ_FN double fj_##OP(double a, double b) { return FN(fj_opaque(a), fj_opaque(b)); }
#else
#if defined(__x86_64__)
#define FJ_OPAQUE_CONSTRAINT "+x"  // an SSE register: no move, no spill
#elif defined(__aarch64__)
#define FJ_OPAQUE_CONSTRAINT "+w"  // a SIMD/FP register
#else
#define FJ_OPAQUE_CONSTRAINT "+m"
#endif
FJ_FN float fj_opaque(float x) { __asm__("" : FJ_OPAQUE_CONSTRAINT(x)); return x; }
FJ_FN double fj_opaque(double x) { __asm__("" : FJ_OPAQUE_CONSTRAINT(x)); return x; }
#undef FJ_OPAQUE_CONSTRAINT
#define FJ_MATH1(OP, FN)                                              \
  FJ_FN float fj_##OP(float x) { return std::FN(x); }                 \
  FJ_FN double fj_##OP(double x) { return std::FN(x); }
#define FJ_MATH2(OP, FN)                                              \
  FJ_FN float fj_##OP(float a, float b) { return std::FN(a, b); }     \
  FJ_FN double fj_##OP(double a, double b) { return std::FN(a, b); }
#define FJ_LIBM1(OP, FN)                                                          \
  FJ_FN float fj_##OP(float x) { return std::FN(fj_opaque(x)); }                  \
  FJ_FN double fj_##OP(double x) { return std::FN(fj_opaque(x)); }
#define FJ_LIBM2(OP, FN)                                                                   \
  FJ_FN float fj_##OP(float a, float b) { return std::FN(fj_opaque(a), fj_opaque(b)); }    \
  FJ_FN double fj_##OP(double a, double b) { return std::FN(fj_opaque(a), fj_opaque(b)); }
#endif
FJ_LIBM1(exp, exp)
FJ_LIBM1(exp2, exp2)
FJ_LIBM1(expm1, expm1)
FJ_LIBM1(log, log)
FJ_LIBM1(log2, log2)
FJ_LIBM1(log10, log10)
FJ_LIBM1(log1p, log1p)
FJ_MATH1(sqrt, sqrt)      // correctly rounded on both sides (IEEE; NVRTC's default -prec-sqrt=true)
FJ_LIBM1(sin, sin)
FJ_LIBM1(cos, cos)
FJ_LIBM1(tan, tan)
FJ_LIBM1(tanh, tanh)
FJ_LIBM1(erf, erf)
FJ_MATH1(floor, floor)    // exact
FJ_MATH1(ceil, ceil)      // exact
FJ_MATH1(trunc, trunc)    // exact
FJ_MATH1(round, rint)     // exact; rint rounds half to even in the default rounding mode
FJ_MATH1(fm_fabs, fabs)   // internal helper
FJ_LIBM2(pow, pow)
FJ_LIBM2(atan2, atan2)
FJ_MATH2(fmod, fmod)      // exact (truncating remainder, C's fmod)
FJ_LIBM1(cbrt, cbrt)
FJ_LIBM1(erfc, erfc)
FJ_LIBM1(asin, asin)
FJ_LIBM1(acos, acos)
FJ_LIBM1(atan, atan)
FJ_LIBM1(sinh, sinh)
FJ_LIBM1(cosh, cosh)
FJ_LIBM1(asinh, asinh)
FJ_LIBM1(acosh, acosh)
FJ_LIBM1(atanh, atanh)
FJ_LIBM2(hypot, hypot)
FJ_MATH2(copysign, copysign)  // exact (sign bit only)
// One rounding (IEEE 754 fusedMultiplyAdd), in strict mode too: an explicit fma is not the
// contraction that -ffp-contract=off / -fmad=false forbid. Exact, so a fold gives the run-time bits.
#ifdef FJ_DEVICE_CODE
FJ_FN float fj_fma(float a, float b, float c) { return fmaf(a, b, c); }
FJ_FN double fj_fma(double a, double b, double c) { return fma(a, b, c); }
#else
FJ_FN float fj_fma(float a, float b, float c) { return std::fma(a, b, c); }
FJ_FN double fj_fma(double a, double b, double c) { return std::fma(a, b, c); }
#endif
#undef FJ_MATH1
#undef FJ_MATH2
#undef FJ_LIBM1
#undef FJ_LIBM2

// ---------------------------------------------------------------------------------------------
// Float ops (float and double).
// ---------------------------------------------------------------------------------------------
#define FJ_FLOAT_OPS(T)                                                                     \
  FJ_FN T fj_neg(T x) { return -x; }                                                           \
  FJ_FN T fj_abs(T x) { return fj_fm_fabs(x); }                                                \
  FJ_FN T fj_rsqrt(T x) { return (T)1 / fj_sqrt(x); }                                          \
  FJ_FN T fj_reciprocal(T x) { return (T)1 / x; }                                              \
  FJ_FN T fj_sigmoid(T x) { return (T)1 / ((T)1 + fj_exp(-x)); }                               \
  FJ_FN T fj_silu(T x) { return x / ((T)1 + fj_exp(-x)); }                                     \
  FJ_FN T fj_gelu(T x) { return (T)0.5 * x * ((T)1 + fj_erf(x * (T)0.70710678118654752440)); }  \
  FJ_FN T fj_gelu_tanh(T x) {                                                                  \
    return (T)0.5 * x * ((T)1 + fj_tanh((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x))); \
  }                                                                                            \
  FJ_FN T fj_softplus(T x) { return x > (T)20 ? x : fj_log1p(fj_exp(x)); }                     \
  FJ_FN T fj_relu(T x) { return x != x ? x : (x > (T)0 ? x : (T)0); }                          \
  FJ_FN T fj_sign(T x) { return x != x ? x : x > (T)0 ? (T)1 : x < (T)0 ? (T)-1 : (T)0; }      \
  FJ_FN bool fj_isnan(T x) { return x != x; }                                                  \
  FJ_FN bool fj_isinf(T x) { return x == x && (x - x) != (x - x); /* inf - inf is NaN */ }     \
  FJ_FN bool fj_isfinite(T x) { return x - x == x - x; /* NaN for inf and NaN */ }             \
  FJ_FN T fj_add(T a, T b) { return a + b; }                                                   \
  FJ_FN T fj_sub(T a, T b) { return a - b; }                                                   \
  FJ_FN T fj_mul(T a, T b) { return a * b; }                                                   \
  FJ_FN T fj_div(T a, T b) { return a / b; }                                                   \
  FJ_FN T fj_maximum(T a, T b) { return a != a ? a : b != b ? b : (a < b ? b : a); }           \
  FJ_FN T fj_minimum(T a, T b) { return a != a ? a : b != b ? b : (b < a ? b : a); }           \
  FJ_FN T fj_fmax(T a, T b) { return a != a ? b : b != b ? a : (a < b ? b : a); }              \
  FJ_FN T fj_fmin(T a, T b) { return a != a ? b : b != b ? a : (b < a ? b : a); }              \
  FJ_FN T fj_mod(T a, T b) {                                                                   \
    T m = fj_fmod(a, b);                                                                       \
    if (m == (T)0) return fj_f_signbit(b) ? -(T)0 : (T)0; /* the divisor's sign, as Python */  \
    if ((b < (T)0) != (m < (T)0)) m += b;                                                      \
    return m;                                                                                  \
  }                                                                                            \
  FJ_FN T fj_floordiv(T a, T b) {                                                              \
    if (b == (T)0) return a / b;                                                               \
    T m = fj_fmod(a, b);                                                                       \
    T d = (a - m) / b;                                                                         \
    if (m != (T)0 && ((b < (T)0) != (m < (T)0))) d -= (T)1;                                    \
    if (d != (T)0) {                                                                           \
      T f = fj_floor(d);                                                                       \
      if (d - f > (T)0.5) f += (T)1;                                                           \
      return f;                                                                                \
    }                                                                                          \
    return fj_f_signbit(a / b) ? -(T)0 : (T)0; /* copysign(0, a / b) */                        \
  }                                                                                            \
  FJ_FN T fj_clamp(T x, T lo, T hi) { return fj_minimum(fj_maximum(x, lo), hi); }

FJ_FN bool fj_f_signbit(float x) { return (fj_f2u(x) >> 31) != 0u; }
FJ_FN bool fj_f_signbit(double x) { return (fj_d2u(x) >> 63) != 0ull; }
FJ_FLOAT_OPS(float)
FJ_FLOAT_OPS(double)
#undef FJ_FLOAT_OPS

// ---------------------------------------------------------------------------------------------
// f16/bf16 add, sub, mul on values in storage form: fj_<op>_f16(a, b), fj_<op>_bf16(a, b).
// The meaning is the per-node rule: compute in f32, round once to the half type. For these three
// ops that equals the correctly rounded half operation, because f32 carries p = 24 >= 2q + 2
// significand bits for q = 11 (f16) and q = 8 (bf16), so rounding first to f32 and then to the
// half type cannot differ from rounding the exact result once (double rounding is innocuous:
// S. A. Figueroa, "When is double rounding innocuous?", SIGNUM Newsletter 30(3), 1995; a product
// of two halves is even exact in f32). The GPU therefore uses the native instructions (PTX ISA,
// "Half Precision Floating-Point Instructions": add/sub/mul.rn.f16 on sm_53+, .bf16 on sm_90+):
// one instruction instead of a convert, an f32 op and two converts. NaN results may carry a
// different payload (NaN payloads are not part of the contract). tests/test_semantics.cpp checks
// the identity against the exact result on the host; tests/test_gpu_scalar.cpp checks the device
// instructions against the host bit for bit.
// ---------------------------------------------------------------------------------------------
#define FJ_HALF_OP_HW(OP, NAME)                                                                \
  FJ_FN fj_##NAME fj_##OP##_##NAME(fj_##NAME a, fj_##NAME b) {                                 \
    fj_##NAME r;                                                                               \
    asm(#OP ".rn." #NAME " %0, %1, %2;" : "=h"(r.bits) : "h"(a.bits), "h"(b.bits));            \
    return r;                                                                                  \
  }
#define FJ_HALF_OP_F32(OP, NAME)                                                               \
  FJ_FN fj_##NAME fj_##OP##_##NAME(fj_##NAME a, fj_##NAME b) {                                 \
    return fj_store_##NAME(fj_##OP(fj_load(a), fj_load(b)));                                   \
  }
#if defined(FJ_DEVICE_CODE) && __CUDA_ARCH__ >= 530
#define FJ_HALF_OP_F16 FJ_HALF_OP_HW
#else
#define FJ_HALF_OP_F16 FJ_HALF_OP_F32
#endif
#if defined(FJ_DEVICE_CODE) && __CUDA_ARCH__ >= 900
#define FJ_HALF_OP_BF16 FJ_HALF_OP_HW
#else
#define FJ_HALF_OP_BF16 FJ_HALF_OP_F32
#endif
FJ_HALF_OP_F16(add, f16)
FJ_HALF_OP_F16(sub, f16)
FJ_HALF_OP_F16(mul, f16)
FJ_HALF_OP_BF16(add, bf16)
FJ_HALF_OP_BF16(sub, bf16)
FJ_HALF_OP_BF16(mul, bf16)
#undef FJ_HALF_OP_F16
#undef FJ_HALF_OP_BF16
#undef FJ_HALF_OP_HW
#undef FJ_HALF_OP_F32

// ---------------------------------------------------------------------------------------------
// Integer ops. T: the compute type, U: its unsigned twin (wrapping arithmetic, never UB).
// ---------------------------------------------------------------------------------------------
#define FJ_INT_COMMON(T, U)                                                              \
  FJ_FN T fj_add(T a, T b) { return (T)(U)((U)a + (U)b); }                                     \
  FJ_FN T fj_sub(T a, T b) { return (T)(U)((U)a - (U)b); }                                     \
  FJ_FN T fj_mul(T a, T b) { return (T)(U)((U)a * (U)b); }                                     \
  FJ_FN T fj_neg(T x) { return (T)(U)((U)0 - (U)x); }                                          \
  FJ_FN T fj_floor(T x) { return x; }                                                          \
  FJ_FN T fj_ceil(T x) { return x; }                                                           \
  FJ_FN T fj_round(T x) { return x; }                                                          \
  FJ_FN T fj_trunc(T x) { return x; }                                                          \
  FJ_FN bool fj_isnan(T) { return false; }                                                     \
  FJ_FN bool fj_isinf(T) { return false; }                                                     \
  FJ_FN bool fj_isfinite(T) { return true; }                                                   \
  FJ_FN T fj_maximum(T a, T b) { return a < b ? b : a; }                                       \
  FJ_FN T fj_minimum(T a, T b) { return b < a ? b : a; }                                       \
  FJ_FN T fj_fmax(T a, T b) { return a < b ? b : a; }                                          \
  FJ_FN T fj_fmin(T a, T b) { return b < a ? b : a; }                                          \
  FJ_FN T fj_clamp(T x, T lo, T hi) { return fj_minimum(fj_maximum(x, lo), hi); }             \
  FJ_FN T fj_i_powu(T a, T b) { /* b >= 0: square and multiply, wrapping */                   \
    U r = (U)1, base = (U)a;                                                                   \
    unsigned long long e = (unsigned long long)b;                                              \
    while (e) {                                                                                \
      if (e & 1ull) r = (U)(r * base);                                                         \
      base = (U)(base * base);                                                                 \
      e >>= 1;                                                                                 \
    }                                                                                          \
    return (T)r;                                                                               \
  }

#define FJ_INT_SIGNED(T, U, MINV)                                                              \
  FJ_INT_COMMON(T, U)                                                                          \
  /* Truncating quotient/remainder with the two trapping cases defined. */                     \
  FJ_FN T fj_i_tdiv(T a, T b) { return b == (T)0 ? (T)0 : (a == MINV && b == (T)-1) ? a : (T)(a / b); } \
  FJ_FN T fj_i_trem(T a, T b) { return b == (T)0 ? (T)0 : (a == MINV && b == (T)-1) ? (T)0 : (T)(a % b); } \
  FJ_FN T fj_fmod(T a, T b) { return fj_i_trem(a, b); }                                        \
  FJ_FN T fj_floordiv(T a, T b) {                                                              \
    T q = fj_i_tdiv(a, b), r = fj_i_trem(a, b);                                                \
    return (r != (T)0 && ((r < (T)0) != (b < (T)0))) ? (T)(q - (T)1) : q;                      \
  }                                                                                            \
  FJ_FN T fj_mod(T a, T b) {                                                                   \
    T r = fj_i_trem(a, b);                                                                     \
    return (r != (T)0 && ((r < (T)0) != (b < (T)0))) ? (T)(U)((U)r + (U)b) : r;                \
  }                                                                                            \
  FJ_FN T fj_abs(T x) { return x < (T)0 ? fj_neg(x) : x; }                                     \
  FJ_FN T fj_relu(T x) { return x > (T)0 ? x : (T)0; }                                         \
  FJ_FN T fj_sign(T x) { return (T)((x > (T)0) - (x < (T)0)); }                                \
  FJ_FN T fj_pow(T a, T b) {                                                                   \
    if (b < (T)0) return a == (T)1 ? (T)1 : a == (T)-1 ? ((b & (T)1) ? (T)-1 : (T)1) : (T)0;  \
    return fj_i_powu(a, b);                                                                    \
  }

FJ_INT_SIGNED(signed char, unsigned char, (signed char)(-128))
FJ_INT_SIGNED(int, unsigned int, (-2147483647 - 1))
FJ_INT_SIGNED(long long, unsigned long long, (-9223372036854775807ll - 1ll))
FJ_INT_COMMON(unsigned char, unsigned char)
// u8: truncation and floor agree for non-negative operands; x // 0 = x % 0 = 0.
FJ_FN unsigned char fj_fmod(unsigned char a, unsigned char b) { return b ? (unsigned char)(a % b) : (unsigned char)0; }
FJ_FN unsigned char fj_mod(unsigned char a, unsigned char b) { return fj_fmod(a, b); }
FJ_FN unsigned char fj_floordiv(unsigned char a, unsigned char b) { return b ? (unsigned char)(a / b) : (unsigned char)0; }
FJ_FN unsigned char fj_abs(unsigned char x) { return x; }
FJ_FN unsigned char fj_relu(unsigned char x) { return x; }
FJ_FN unsigned char fj_sign(unsigned char x) { return (unsigned char)(x != 0); }
FJ_FN unsigned char fj_pow(unsigned char a, unsigned char b) { return fj_i_powu(a, b); }
#undef FJ_INT_SIGNED
#undef FJ_INT_COMMON

// ---------------------------------------------------------------------------------------------
// Bool ops (the builder allows add, mul, maximum, minimum, fmax, fmin, abs, clamp, where and the
// bitwise ops on bool: add is logical or, mul logical and, as in PyTorch; bitwise ops further down).
// ---------------------------------------------------------------------------------------------
FJ_FN bool fj_add(bool a, bool b) { return a || b; }
FJ_FN bool fj_mul(bool a, bool b) { return a && b; }
FJ_FN bool fj_maximum(bool a, bool b) { return a || b; }
FJ_FN bool fj_minimum(bool a, bool b) { return a && b; }
FJ_FN bool fj_fmax(bool a, bool b) { return a || b; }
FJ_FN bool fj_fmin(bool a, bool b) { return a && b; }
FJ_FN bool fj_abs(bool x) { return x; }
FJ_FN bool fj_clamp(bool x, bool lo, bool hi) { return (x || lo) && hi; }
FJ_FN bool fj_isnan(bool) { return false; }
FJ_FN bool fj_isinf(bool) { return false; }
FJ_FN bool fj_isfinite(bool) { return true; }
FJ_FN bool fj_logical_not(bool x) { return !x; }
FJ_FN bool fj_logical_and(bool a, bool b) { return a && b; }
FJ_FN bool fj_logical_or(bool a, bool b) { return a || b; }
FJ_FN bool fj_logical_xor(bool a, bool b) { return a != b; }

// ---------------------------------------------------------------------------------------------
// Comparisons (IEEE: any comparison with NaN is false except ne) and where, on every type.
// ---------------------------------------------------------------------------------------------
#define FJ_CMP_WHERE(T)                                                  \
  FJ_FN bool fj_eq(T a, T b) { return a == b; }                          \
  FJ_FN bool fj_ne(T a, T b) { return a != b; }                          \
  FJ_FN bool fj_lt(T a, T b) { return a < b; }                           \
  FJ_FN bool fj_le(T a, T b) { return a <= b; }                          \
  FJ_FN bool fj_gt(T a, T b) { return a > b; }                           \
  FJ_FN bool fj_ge(T a, T b) { return a >= b; }                          \
  FJ_FN T fj_where(bool c, T a, T b) { return c ? a : b; }
FJ_CMP_WHERE(bool)
FJ_CMP_WHERE(signed char)
FJ_CMP_WHERE(unsigned char)
FJ_CMP_WHERE(int)
FJ_CMP_WHERE(long long)
FJ_CMP_WHERE(float)
FJ_CMP_WHERE(double)
#undef FJ_CMP_WHERE

// ---------------------------------------------------------------------------------------------
// Ops added through the op table (ir/ops.def; semantics and sources in docs/ops.md). The math
// library calls are declared with the others above (FJ_LIBM1/2: behind fj_opaque).
// ---------------------------------------------------------------------------------------------
// Float ops written with other fj_ functions, on float (f32, and f16/bf16 values) and double.
#define FJ_TABLE_FLOAT_OPS(T) \
  FJ_FN T fj_hardswish(T x) { return x * fj_minimum(fj_maximum(x + (T)3, (T)0), (T)6) / (T)6; } \
  FJ_FN T fj_hardsigmoid(T x) { return fj_minimum(fj_maximum(x + (T)3, (T)0), (T)6) / (T)6; } \
  FJ_FN T fj_elu(T x) { return x < (T)0 ? fj_expm1(x) : x; } \
  FJ_FN T fj_leaky_relu(T x, T slope) { return x > (T)0 ? x : x * slope; } \
  FJ_FN T fj_lerp(T a, T b, T w) { return fj_abs(w) < (T)0.5 ? fj_fma(w, b - a, a) : fj_fma(w - (T)1, b - a, b); } \
  /* NumPy's npy_logaddexp / npy_logaddexp2 (npymath): a == b first (equal infinities), d NaN: NaN */ \
  FJ_FN T fj_logaddexp(T a, T b) { \
    const T d = a - b; \
    return a == b ? a + (T)0.693147180559945309417232121458176568 /* ln 2 */ \
         : d > (T)0 ? a + fj_log1p(fj_exp(-d)) : d <= (T)0 ? b + fj_log1p(fj_exp(d)) : d; \
  } \
  FJ_FN T fj_logaddexp2(T a, T b) { \
    const T d = a - b, log2e = (T)1.442695040888963407359924681001892137; \
    return a == b ? a + (T)1 \
         : d > (T)0 ? a + log2e * fj_log1p(fj_exp2(-d)) : d <= (T)0 ? b + log2e * fj_log1p(fj_exp2(d)) : d; \
  }
FJ_TABLE_FLOAT_OPS(float)
FJ_TABLE_FLOAT_OPS(double)
#undef FJ_TABLE_FLOAT_OPS

// Integer ops (T: the compute type, U: its unsigned twin, W: its width in bits; wrapping, never
// UB). Bit operations act on the two's-complement bits, computed in U. Shift counts follow
// PyTorch's lshift/rshift kernels (NumPy's npy_lshift/npy_rshift agree): a count outside
// [0, W) -- negative, or W and more -- gives 0 for left_shift; for right_shift it shifts by W - 1
// on signed types (sign fill: -1 for negative values, else 0) and gives 0 on u8. (U)b >= W tests
// both ends at once (a negative count converts to a large unsigned value). The signed right shift
// shifts only non-negative values (~(~a >> n) for negative a): C++17 leaves >> of a negative value
// implementation-defined.
#define FJ_TABLE_INT_OPS(T, U, W) \
  FJ_FN T fj_fma(T a, T b, T c) { return (T)(U)((U)((U)a * (U)b) + (U)c); } \
  FJ_FN T fj_bitwise_and(T a, T b) { return (T)(U)((U)a & (U)b); } \
  FJ_FN T fj_bitwise_or(T a, T b) { return (T)(U)((U)a | (U)b); } \
  FJ_FN T fj_bitwise_xor(T a, T b) { return (T)(U)((U)a ^ (U)b); } \
  FJ_FN T fj_bitwise_not(T x) { return (T)(U)~(U)x; } \
  FJ_FN T fj_left_shift(T a, T b) { return (U)b >= (U)(W) ? (T)0 : (T)(U)((U)a << b); }
#define FJ_TABLE_SIGNED_OPS(T, U, W) \
  FJ_TABLE_INT_OPS(T, U, W) \
  FJ_FN T fj_right_shift(T a, T b) { \
    const T n = (U)b >= (U)((W) - 1) ? (T)((W) - 1) : b; \
    return a < (T)0 ? (T)~(~a >> n) : (T)(a >> n); \
  }
FJ_TABLE_SIGNED_OPS(signed char, unsigned char, 8)
FJ_TABLE_SIGNED_OPS(int, unsigned int, 32)
FJ_TABLE_SIGNED_OPS(long long, unsigned long long, 64)
FJ_TABLE_INT_OPS(unsigned char, unsigned char, 8)
FJ_FN unsigned char fj_right_shift(unsigned char a, unsigned char b) { return b >= 8 ? (unsigned char)0 : (unsigned char)(a >> b); }
#undef FJ_TABLE_SIGNED_OPS
#undef FJ_TABLE_INT_OPS
// On bool the bit operations are logical (PyTorch and NumPy); shifts are not defined on bool.
FJ_FN bool fj_bitwise_and(bool a, bool b) { return a && b; }
FJ_FN bool fj_bitwise_or(bool a, bool b) { return a || b; }
FJ_FN bool fj_bitwise_xor(bool a, bool b) { return a != b; }
FJ_FN bool fj_bitwise_not(bool x) { return !x; }

// fma of f16/bf16 values, rounded once to the half format (mb, eb: its mantissa and exponent
// bits). Rounding a*b + c to f32 (or to f64) first and then to the half format can round twice
// (a*b + c needs up to ~2^-53 resolution to decide a tie of the half format). So: a*b is exact in
// f64 (2 x 11 or 2 x 8 significant bits), the sum is rounded to odd in f64 (the nearest rounding
// s plus the sign of its error e, from Knuth's TwoSum), and that is rounded once to the half
// format: rounding to odd in precision >= p + 2 and then to nearest in precision p equals one
// rounding to nearest (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved
// algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008). NaN and inf need no
// correction (e is NaN then). tests/test_op_expectations.cpp checks it against exact results.
FJ_FN unsigned int fj_fma_half_bits(float a, float b, float c, int mb, int eb) {
  const double p = (double)a * (double)b;
  const double s = p + (double)c;
  const double z = s - p;
  const double e = (p - (s - z)) + ((double)c - z);  // p + c == s + e exactly
  double r = s;
  if (e != 0.0 && e == e && (fj_d2u(s) & 1ull) == 0ull)  // inexact and even: step toward the exact sum
    r = fj_u2d(fj_d2u(s) + (((e > 0.0) == (s > 0.0)) ? 1ull : ~0ull));
  return fj_round_bits_f64(r, mb, eb);
}
// On the GPU the native fma.rn.f16 (sm_53+) and fma.rn.bf16 (sm_80+) round once as well (PTX
// ISA, "Half Precision Floating-Point Instructions: fma"); the same bits, NaN payloads aside.
#if defined(FJ_DEVICE_CODE) && __CUDA_ARCH__ >= 530
FJ_FN fj_f16 fj_fma_f16(fj_f16 a, fj_f16 b, fj_f16 c) {
  fj_f16 r;
  asm("fma.rn.f16 %0, %1, %2, %3;" : "=h"(r.bits) : "h"(a.bits), "h"(b.bits), "h"(c.bits));
  return r;
}
#else
FJ_FN fj_f16 fj_fma_f16(fj_f16 a, fj_f16 b, fj_f16 c) {
  fj_f16 r;
  r.bits = (unsigned short)fj_fma_half_bits(fj_load(a), fj_load(b), fj_load(c), 10, 5);
  return r;
}
#endif
#if defined(FJ_DEVICE_CODE) && __CUDA_ARCH__ >= 800
FJ_FN fj_bf16 fj_fma_bf16(fj_bf16 a, fj_bf16 b, fj_bf16 c) {
  fj_bf16 r;
  asm("fma.rn.bf16 %0, %1, %2, %3;" : "=h"(r.bits) : "h"(a.bits), "h"(b.bits), "h"(c.bits));
  return r;
}
#else
FJ_FN fj_bf16 fj_fma_bf16(fj_bf16 a, fj_bf16 b, fj_bf16 c) {
  fj_bf16 r;
  r.bits = (unsigned short)fj_fma_half_bits(fj_load(a), fj_load(b), fj_load(c), 7, 8);
  return r;
}
#endif


#endif  // FJ_SCALAR_H
