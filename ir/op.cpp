#include "ir/op.h"

#include <array>

namespace fusejit::ir {
namespace {
constexpr std::array<OpInfo, kNumOps> kOps{{
#define FJ_OP(Enum, name, arity, rule) {name, arity, TypeRule::rule},
#include "ir/ops.def"
#undef FJ_OP
}};
}  // namespace

const OpInfo& op_info(Op op) { return kOps[static_cast<int>(op)]; }

bool defined_on_bool(Op op) {
  switch (op) {
    case Op::Add: case Op::Mul: case Op::Maximum: case Op::Minimum: case Op::Fmax: case Op::Fmin:
    case Op::Abs: case Op::Clamp: case Op::Where:
      return true;
    default:
      return false;
  }
}

std::optional<Op> parse_op(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i)
    if (kOps[i].name == name && kOps[i].rule != TypeRule::Leaf) return static_cast<Op>(i);
  return std::nullopt;
}

}  // namespace fusejit::ir
