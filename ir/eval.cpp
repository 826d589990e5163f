// eval_scalar: every op on one set of scalar operands, by calling the fj_ function of its ir/ops.def
// row (ir/scalar/fj_scalar.h, the header generated kernels embed), so constant folding, the
// reference evaluator and the CPU kernels share one definition of each op.
#include "ir/eval.h"

#include <string>
#include <type_traits>

#include "ir/op_fns.h"

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

// Calls fn on the operands in compute type T (the where condition as bool); InternalError when
// the header has no overload of the op for T.
template <class T, class Fn>
Scalar call_ct(Op op, DType result, std::span<const Scalar> a, Fn& fn) {
  const DType t = a[op == Op::Where ? 1 : 0].dtype;
  if (op == Op::Where) {
    if constexpr (requires { fn(bool{}, T{}, T{}); }) return box(result, fn(get<bool>(a[0]), get<T>(a[1]), get<T>(a[2])));
  } else if (a.size() == 1) {
    if constexpr (requires { fn(T{}); }) return box(result, fn(get<T>(a[0])));
  } else if (a.size() == 2) {
    if constexpr (requires { fn(T{}, T{}); }) return box(result, fn(get<T>(a[0]), get<T>(a[1])));
  } else {
    if constexpr (requires { fn(T{}, T{}, T{}); }) return box(result, fn(get<T>(a[0]), get<T>(a[1]), get<T>(a[2])));
  }
  unsupported(op, t);
}

// HalfForm::Storage ops on f16/bf16 operands: fn on the storage values (exact conversions, since
// each operand already holds a value of the half dtype).
template <class H, class Fn, class Store>
Scalar call_storage(Op op, DType result, std::span<const Scalar> a, Fn& fn, Store store) {
  auto h = [&](size_t k) { return store(static_cast<float>(a[k].f)); };
  if (a.size() == 1) {
    if constexpr (requires { fn(H{}); }) return box(result, fj_load(fn(h(0))));
  } else if (a.size() == 2) {
    if constexpr (requires { fn(H{}, H{}); }) return box(result, fj_load(fn(h(0), h(1))));
  } else {
    if constexpr (requires { fn(H{}, H{}, H{}); }) return box(result, fj_load(fn(h(0), h(1), h(2))));
  }
  unsupported(op, result);
}

}  // namespace

Scalar eval_scalar(Op op, DType result, std::span<const Scalar> args) {
  check_args(op, result, args);
  if (op == Op::Cast) return cast(result, args[0]);
  const DType t = args[op == Op::Where ? 1 : 0].dtype;
  return with_op_fns(op, [&](auto fns) -> Scalar {
    if (op_info(op).half == HalfForm::Storage && t == DType::F16) return call_storage<fj_f16>(op, result, args, fns.f16, fj_store_f16);
    if (op_info(op).half == HalfForm::Storage && t == DType::BF16) return call_storage<fj_bf16>(op, result, args, fns.bf16, fj_store_bf16);
    return with_ct(t, [&](auto z) -> Scalar { return call_ct<decltype(z)>(op, result, args, fns.fn); });
  });
}

}  // namespace fusejit::ir
