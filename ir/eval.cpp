// eval_scalar: every op on one set of scalar operands, by calling the fj_ functions of
// ir/scalar/fj_scalar.h (the header generated kernels embed), so constant folding, the reference
// evaluator and the CPU kernels share one definition of each op.
#include "ir/eval.h"

#include <string>
#include <type_traits>

#include "ir/scalar/fj_scalar.h"

namespace fusejit::ir {
namespace {

// Calls f with a value of the compute type CT(t) (f16/bf16 compute in float).
template <class F>
decltype(auto) with_ct(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(bool{});
    case DType::I8: return f(static_cast<signed char>(0));
    case DType::U8: return f(static_cast<unsigned char>(0));
    case DType::I32: return f(int{});
    case DType::I64: return f(0LL);
    case DType::F16:
    case DType::BF16:
    case DType::F32: return f(0.0f);
    case DType::F64: return f(0.0);
  }
  FJ_CHECK(false, "bad dtype");
  return f(0.0);
}

template <class T>
T get(const Scalar& s) {
  if constexpr (std::is_same_v<T, bool>) return s.i != 0;
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(s.i);
  else return static_cast<T>(s.f);  // exact: s.f is already rounded to s.dtype
}

template <class T>
bool ct_is(DType t) {
  switch (t) {
    case DType::Bool: return std::is_same_v<T, bool>;
    case DType::I8: return std::is_same_v<T, signed char>;
    case DType::U8: return std::is_same_v<T, unsigned char>;
    case DType::I32: return std::is_same_v<T, int>;
    case DType::I64: return std::is_same_v<T, long long>;
    case DType::F16: case DType::BF16: case DType::F32: return std::is_same_v<T, float>;
    case DType::F64: return std::is_same_v<T, double>;
  }
  return false;
}

// Wraps a compute-type value as a Scalar of dtype t, rounding f16/bf16 per node.
template <class T>
Scalar box(DType t, T v) {
  FJ_CHECK(ct_is<T>(t), "eval_scalar: result compute type does not match dtype " + std::string(dtype_name(t)));
  Scalar s;
  s.dtype = t;
  if constexpr (std::is_same_v<T, bool>) s.i = v ? 1 : 0;
  else if constexpr (std::is_integral_v<T>) s.i = static_cast<int64_t>(v);
  else if constexpr (std::is_same_v<T, float>)
    s.f = t == DType::F16 ? fj_round_f16(v) : t == DType::BF16 ? fj_round_bf16(v) : v;
  else s.f = v;
  return s;
}

[[noreturn]] void unsupported(Op op, DType t) {
  internal_error(__FILE__, __LINE__,
                 "eval_scalar: " + std::string(op_name(op)) + " is not defined on " + std::string(dtype_name(t)));
}

Scalar cast(DType to, const Scalar& x) {
  return with_ct(x.dtype, [&](auto z) -> Scalar {
    using T = decltype(z);
    T v = get<T>(x);
    switch (to) {
      case DType::Bool: return box(to, fj_cvt_bool(v));
      case DType::I8: return box(to, fj_cvt_i8(v));
      case DType::U8: return box(to, fj_cvt_u8(v));
      case DType::I32: return box(to, fj_cvt_i32(v));
      case DType::I64: return box(to, fj_cvt_i64(v));
      case DType::F16: return box(to, fj_cvt_f16(v));
      case DType::BF16: return box(to, fj_cvt_bf16(v));
      case DType::F32: return box(to, fj_cvt_f32(v));
      case DType::F64: return box(to, fj_cvt_f64(v));
    }
    unsupported(Op::Cast, to);
  });
}

// Operand dtype checks (ir/ops.def type rules); InternalError on a violated precondition.
void check_args(Op op, DType result, std::span<const Scalar> a) {
  const OpInfo& info = op_info(op);
  FJ_CHECK(!is_leaf(op), "eval_scalar on a leaf op");
  FJ_CHECK(static_cast<int>(a.size()) == info.arity,
           "eval_scalar: " + std::string(info.name) + " needs " + std::to_string(info.arity) + " operands");
  auto all_same = [&](size_t from) {
    for (size_t k = from + 1; k < a.size(); ++k)
      FJ_CHECK(a[k].dtype == a[from].dtype, "eval_scalar: operand dtypes differ for " + std::string(info.name));
  };
  switch (info.rule) {
    case TypeRule::Same: all_same(0); FJ_CHECK(a[0].dtype == result, "eval_scalar: result dtype mismatch"); break;
    case TypeRule::Float:
      all_same(0);
      FJ_CHECK(a[0].dtype == result && is_float(result), "eval_scalar: float op needs float operands");
      break;
    case TypeRule::Compare: all_same(0); FJ_CHECK(result == DType::Bool, "eval_scalar: compare gives bool"); break;
    case TypeRule::Logical:
      for (const Scalar& s : a) FJ_CHECK(s.dtype == DType::Bool, "eval_scalar: logical op needs bool operands");
      FJ_CHECK(result == DType::Bool, "eval_scalar: logical op gives bool");
      break;
    case TypeRule::Pred: FJ_CHECK(result == DType::Bool, "eval_scalar: predicate gives bool"); break;
    case TypeRule::Where:
      FJ_CHECK(a[0].dtype == DType::Bool, "eval_scalar: where condition must be bool");
      FJ_CHECK(a[1].dtype == result && a[2].dtype == result, "eval_scalar: where operand dtype mismatch");
      break;
    case TypeRule::Cast: break;
    case TypeRule::Leaf: break;
    case TypeRule::Reduce: break;  // reductions are not scalar ops: unsupported() below
  }
}

}  // namespace

Scalar eval_scalar(Op op, DType result, std::span<const Scalar> args) {
  check_args(op, result, args);
  if (op == Op::Cast) return cast(result, args[0]);
  DType t = op == Op::Where ? args[1].dtype : args[0].dtype;

  // One macro per arity: call fj_<fn> if it exists for the compute type, else InternalError.
#define FJ_UN(E, FN)                                                                  \
  case Op::E:                                                                         \
    return with_ct(t, [&](auto z) -> Scalar {                                         \
      using T = decltype(z);                                                          \
      if constexpr (requires(T x) { FN(x); }) return box(result, FN(get<T>(args[0]))); \
      else unsupported(op, t);                                                        \
    });
#define FJ_BIN(E, FN)                                                                 \
  case Op::E:                                                                         \
    return with_ct(t, [&](auto z) -> Scalar {                                         \
      using T = decltype(z);                                                          \
      if constexpr (requires(T x) { FN(x, x); })                                      \
        return box(result, FN(get<T>(args[0]), get<T>(args[1])));                     \
      else unsupported(op, t);                                                        \
    });

  switch (op) {
    FJ_UN(Neg, fj_neg)
    FJ_UN(Abs, fj_abs)
    FJ_UN(Exp, fj_exp)
    FJ_UN(Exp2, fj_exp2)
    FJ_UN(Expm1, fj_expm1)
    FJ_UN(Log, fj_log)
    FJ_UN(Log2, fj_log2)
    FJ_UN(Log10, fj_log10)
    FJ_UN(Log1p, fj_log1p)
    FJ_UN(Sqrt, fj_sqrt)
    FJ_UN(Rsqrt, fj_rsqrt)
    FJ_UN(Reciprocal, fj_reciprocal)
    FJ_UN(Sin, fj_sin)
    FJ_UN(Cos, fj_cos)
    FJ_UN(Tan, fj_tan)
    FJ_UN(Tanh, fj_tanh)
    FJ_UN(Sigmoid, fj_sigmoid)
    FJ_UN(Relu, fj_relu)
    FJ_UN(Gelu, fj_gelu)
    FJ_UN(GeluTanh, fj_gelu_tanh)
    FJ_UN(Silu, fj_silu)
    FJ_UN(Softplus, fj_softplus)
    FJ_UN(Erf, fj_erf)
    FJ_UN(Floor, fj_floor)
    FJ_UN(Ceil, fj_ceil)
    FJ_UN(Round, fj_round)
    FJ_UN(Trunc, fj_trunc)
    FJ_UN(Sign, fj_sign)
    FJ_UN(IsNan, fj_isnan)
    FJ_UN(IsInf, fj_isinf)
    FJ_UN(LogicalNot, fj_logical_not)
    FJ_BIN(Add, fj_add)
    FJ_BIN(Sub, fj_sub)
    FJ_BIN(Mul, fj_mul)
    FJ_BIN(Div, fj_div)
    FJ_BIN(Pow, fj_pow)
    FJ_BIN(Maximum, fj_maximum)
    FJ_BIN(Minimum, fj_minimum)
    FJ_BIN(Fmax, fj_fmax)
    FJ_BIN(Fmin, fj_fmin)
    FJ_BIN(FloorDiv, fj_floordiv)
    FJ_BIN(Mod, fj_mod)
    FJ_BIN(Fmod, fj_fmod)
    FJ_BIN(Atan2, fj_atan2)
    FJ_BIN(Eq, fj_eq)
    FJ_BIN(Ne, fj_ne)
    FJ_BIN(Lt, fj_lt)
    FJ_BIN(Le, fj_le)
    FJ_BIN(Gt, fj_gt)
    FJ_BIN(Ge, fj_ge)
    FJ_BIN(LogicalAnd, fj_logical_and)
    FJ_BIN(LogicalOr, fj_logical_or)
    case Op::Where:
      return with_ct(t, [&](auto z) -> Scalar {
        using T = decltype(z);
        return box(result, fj_where(get<bool>(args[0]), get<T>(args[1]), get<T>(args[2])));
      });
    case Op::Clamp:
      return with_ct(t, [&](auto z) -> Scalar {
        using T = decltype(z);
        return box(result, fj_clamp(get<T>(args[0]), get<T>(args[1]), get<T>(args[2])));
      });
    case Op::Cast:
    case Op::Input:
    case Op::Param:
    case Op::Const:
    case Op::Sum: case Op::Mean: case Op::Prod: case Op::Amax: case Op::Amin:  // over tensors: ir/reduce.h
      break;
  }
#undef FJ_UN
#undef FJ_BIN
  unsupported(op, t);
}

}  // namespace fusejit::ir
