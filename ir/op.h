// Op kinds of the IR and what each consumer needs to know about them, generated from the one
// table ir/ops.def (its header explains every column).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ir/dtype.h"

namespace fusejit::ir {

enum class Op : uint8_t {
#define FJ_OP(Enum, ...) Enum,
#include "ir/ops.def"
#undef FJ_OP
};

inline constexpr int kNumOps = 0
#define FJ_OP(...) +1
#include "ir/ops.def"
#undef FJ_OP
    ;

// How an op's result dtype follows from its operands; see ir/ops.def for each rule.
// Reduce: a reduction over axes of its one operand (ir/reduce.h has its dtype and shape rules).
enum class TypeRule : uint8_t { Leaf, Same, Float, Compare, Logical, Pred, Where, Cast, Reduce };

// The dtypes a Same-rule op accepts after promotion (ir/ops.def, column `domain`).
enum class OpDomain : uint8_t { All, NoBool, Int, IntBool };

// A GPU result against the reference evaluator's (ir/ops.def, column `gpu`; docs/ops.md).
enum class OpAccuracy : uint8_t {
  Exact,      // the same bits
  Step,       // the same bits, but discontinuous in its operands
  Math,       // one CUDA Math API call: within the op's ulp bound
  Composite,  // several calls: within the op's ulp bound or an absolute tolerance
};

// How an f16/bf16 node is computed (ir/ops.def, column `half`).
enum class HalfForm : uint8_t {
  F32,      // fj_<op> in f32, then one rounding to the node's dtype
  Storage,  // fj_<op>_f16 / fj_<op>_bf16 on 16-bit storage values, correctly rounded
};

// One row of ir/ops.def.
struct OpInfo {
  std::string_view name;       // as in graph text, e.g. "gelu_tanh"
  int arity;                   // operand count; 0 for leaves
  TypeRule rule;
  OpDomain domain;
  std::string_view scalar_fn;  // fj_scalar.h function, e.g. "fj_gelu_tanh"; casts: "fj_cvt" + "_<dst>"
  std::string_view infix;      // "+" for add; "" when the op has no operator form
  OpAccuracy gpu;
  int ulp_f32, ulp_f64, ulp_half;  // GPU tolerance in ulps of the node's dtype (0 unless Math/Composite)
  HalfForm half;
};

const OpInfo& op_info(Op op);
inline std::string_view op_name(Op op) { return op_info(op).name; }
inline int op_arity(Op op) { return op_info(op).arity; }
inline bool is_leaf(Op op) { return op_info(op).rule == TypeRule::Leaf; }
// Whether an op of rule Same accepts operands of dtype `t` (its domain; PyTorch: add is logical
// or on bool, bitwise ops and shifts reject floats, shifts reject bool). Always true for the
// other rules, which convert their operands.
bool defined_on(Op op, DType t);
// Looks up an op by its graph-text name; leaves ("input", "param", "const") are not callable and
// are not found.
std::optional<Op> parse_op(std::string_view name);

// Operand and result dtype of an op of rule `rule` whose operands promote to `common` (the
// ir/ops.def type rules). `float_default` is what an integer or bool dtype becomes under the
// Float rule: f32 for tensors (PyTorch), f64 when only Python-like literals are folded. Where:
// `operand` is the value operands' dtype (the condition is bool). Leaf, Cast and Reduce (ir/reduce.h)
// have no rule-derived dtypes: InternalError.
struct RuleDtypes {
  DType operand;
  DType result;
};
RuleDtypes rule_dtypes(TypeRule rule, DType common, DType float_default = DType::F32);

}  // namespace fusejit::ir
