#include "ir/op.h"

#include <array>

#include "ir/error.h"

namespace fusejit::ir {
namespace {
constexpr std::array<OpInfo, kNumOps> kOps{{
#define FJ_OP(Enum, name, arity, rule, domain, fn, infix, gpu, u32, u64, uh, half)            \
  {name, arity, TypeRule::rule, OpDomain::domain, #fn, infix, OpAccuracy::gpu, u32, u64, uh, \
   HalfForm::half},
#include "ir/ops.def"
#undef FJ_OP
}};
}  // namespace

const OpInfo& op_info(Op op) { return kOps[static_cast<int>(op)]; }

bool defined_on(Op op, DType t) {
  const OpInfo& info = op_info(op);
  if (info.rule != TypeRule::Same) return true;
  switch (info.domain) {
    case OpDomain::All: return true;
    case OpDomain::NoBool: return t != DType::Bool;
    case OpDomain::Int: return is_int(t);
    case OpDomain::IntBool: return !is_float(t);
  }
  return false;
}

std::optional<Op> parse_op(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (kOps[i].name == name && kOps[i].rule != TypeRule::Leaf) return static_cast<Op>(i);
  return std::nullopt;
}

RuleDtypes rule_dtypes(TypeRule rule, DType common, DType float_default) {
  switch (rule) {
    case TypeRule::Same:
    case TypeRule::Where: return {common, common};
    case TypeRule::Float: {
      const DType t = is_float(common) ? common : float_default;
      return {t, t};
    }
    case TypeRule::Compare:
    case TypeRule::Pred: return {common, DType::Bool};
    case TypeRule::Logical: return {DType::Bool, DType::Bool};
    case TypeRule::Leaf:
    case TypeRule::Cast:
    case TypeRule::Reduce: break;  // reductions: reduce_compute_dtype (ir/reduce.h)
  }
  FJ_CHECK(false, "rule_dtypes: leaves, casts and reductions have no rule-derived dtypes");
  return {common, common};
}

}  // namespace fusejit::ir
