// The scalar functions of every op (ir/ops.def, column fn) as callable objects, for the two host
// evaluators (ir/eval.cpp: one scalar; ir/reference.cpp: typed loops over tensors). Internal to ir/.
#pragma once

#include "ir/error.h"
#include "ir/op.h"
#include "ir/scalar/fj_scalar.h"

namespace fusejit::ir {

// The functions of one op: `fn` on compute types (bool, signed char, ..., float, double) and, for
// HalfForm::Storage ops, `f16` / `bf16` on 16-bit storage values (fj_<op>_f16 / fj_<op>_bf16).
// Each is a generic callable that is NOT invocable (SFINAE, no hard error) for argument types the
// header has no overload for, so callers test `requires { fns.fn(T{}) }` per compute type.
template <class Fn, class F16, class BF16>
struct OpFns {
  Fn fn;
  F16 f16;
  BF16 bf16;
};
template <class Fn, class F16, class BF16>
OpFns(Fn, F16, BF16) -> OpFns<Fn, F16, BF16>;

// Calls k(OpFns{...}) for `op`. Leaves have no function (fj_none) and casts call fj_cvt_<dst>
// directly, so their OpFns are invocable on nothing.
template <class K>
decltype(auto) with_op_fns(Op op, K&& k) {
#define FJ_FNOBJ(FN) [](auto... x) -> decltype(FN(x...)) { return FN(x...); }
  switch (op) {
#define FJ_OP(Enum, name, arity, rule, domain, fn, ...) \
  case Op::Enum: return k(OpFns{FJ_FNOBJ(fn), FJ_FNOBJ(fn##_f16), FJ_FNOBJ(fn##_bf16)});
#include "ir/ops.def"
#undef FJ_OP
  }
  FJ_CHECK(false, "with_op_fns: not an op");
  return k(OpFns{FJ_FNOBJ(fj_none), FJ_FNOBJ(fj_none), FJ_FNOBJ(fj_none)});
#undef FJ_FNOBJ
}

}  // namespace fusejit::ir
