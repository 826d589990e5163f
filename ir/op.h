// Op kinds of the IR, generated from ir/ops.def.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fusejit::ir {

enum class Op : uint8_t {
#define FJ_OP(Enum, name, arity, rule) Enum,
#include "ir/ops.def"
#undef FJ_OP
};

inline constexpr int kNumOps = 0
#define FJ_OP(Enum, name, arity, rule) +1
#include "ir/ops.def"
#undef FJ_OP
    ;

// How an op's result dtype follows from its operands; see ir/ops.def for each rule.
// Reduce: a reduction over axes of its one operand (ir/reduce.h has its dtype and shape rules).
enum class TypeRule : uint8_t { Leaf, Same, Float, Compare, Logical, Pred, Where, Cast, Reduce };

struct OpInfo {
  std::string_view name;  // as in graph text, e.g. "gelu_tanh"
  int arity;              // operand count; 0 for leaves
  TypeRule rule;
};

const OpInfo& op_info(Op op);
inline std::string_view op_name(Op op) { return op_info(op).name; }
inline int op_arity(Op op) { return op_info(op).arity; }
inline bool is_leaf(Op op) { return op_info(op).rule == TypeRule::Leaf; }
// True for the Same-rule ops that stay meaningful on bool operands (PyTorch: add is logical or,
// mul is logical and; maximum/minimum/fmax/fmin/abs/clamp/where select). Other arithmetic on bool
// is an error, as in PyTorch.
bool defined_on_bool(Op op);
// Looks up an op by its graph-text name; leaves ("input", "param", "const") are not callable and
// are not found.
std::optional<Op> parse_op(std::string_view name);

}  // namespace fusejit::ir
