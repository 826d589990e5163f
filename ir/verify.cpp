#include "ir/verify.h"

#include <string>
#include <unordered_map>

#include "ir/builder.h"
#include "ir/reduce.h"

namespace fusejit::ir {
namespace {


std::string where(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  std::string s = "node " + std::to_string(id) + " (" + std::string(op_name(n.op));
  if (!n.name.empty()) s += " '" + n.name + "'";
  return s + ")";
}

// A reduction computes in its operand's dtype, which must be its compute dtype (ir/reduce.h),
// returns that dtype (argmax/argmin: i64) and has the reduced shape of its operand.
void check_reduction(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  const Node& a = g.node(n.args[0]);
  FJ_CHECK(reduce_result_dtype(n.op, a.dtype) == n.dtype, where(g, id) + ": result dtype is not its operand's");
  FJ_CHECK(is_float(a.dtype) || n.op != Op::Mean, where(g, id) + ": mean of a non-float dtype");
  FJ_CHECK(n.red.correction == 0 || (n.op == Op::Mean && n.red.correction > 0),
           where(g, id) + ": a correction other than a mean's positive one");
  FJ_CHECK(!n.red.initial || ((n.op == Op::Amax || n.op == Op::Amin) && is_float(n.dtype)),
           where(g, id) + ": an initial value on other than a float amax or amin");
  FJ_CHECK(reduce_compute_dtype(n.op, a.dtype) == a.dtype, where(g, id) + ": not a reduction compute dtype");
  FJ_CHECK(a.shape.size() == 64 || (n.red.axes >> a.shape.size()) == 0, where(g, id) + ": reduced axis beyond the rank");
  FJ_CHECK(reduced_shape(a.shape, n.red.axes, n.red.keepdim) == n.shape,
           where(g, id) + ": shape " + shape_to_string(n.shape, &g) + " is not the reduced shape of its operand");
}

// Op, operand count and slots (earlier nodes only), dims and element count.
void check_structure(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  FJ_CHECK(static_cast<int>(n.op) < kNumOps, where(g, id) + ": bad op");
  FJ_CHECK(n.nargs == op_info(n.op).arity, where(g, id) + ": wrong operand count");
  for (int k = 0; k < 3; ++k) {
    if (k < n.nargs)
      FJ_CHECK(n.args[k] >= 0 && n.args[k] < id, where(g, id) + ": operand is not an earlier node");
    else
      FJ_CHECK(n.args[k] == kNoNode, where(g, id) + ": unused operand slot is set");
  }
  for (const Dim& d : n.shape) {
    FJ_CHECK(d.size >= 0, where(g, id) + ": negative dimension");
    FJ_CHECK(d.sym >= -1 && d.sym < static_cast<int32_t>(g.dims.size()), where(g, id) + ": bad dim symbol");
  }
  FJ_CHECK(!element_count_overflows(n.shape), where(g, id) + ": element count overflows");
}

// An input, param or constant: its slot in the graph's lists, its shape and value dtype.
void check_leaf(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.op == Op::Input) {
    FJ_CHECK(n.slot >= 0 && static_cast<size_t>(n.slot) < g.inputs.size() && g.inputs[n.slot] == id,
             where(g, id) + ": input slot does not match Graph::inputs");
    for (const Dim& d : n.shape)
      FJ_CHECK(d.sym < 0 || g.dims[d.sym].value == d.size, where(g, id) + ": dim size differs from its dim");
  } else if (n.op == Op::Param) {
    FJ_CHECK(n.slot >= 0 && static_cast<size_t>(n.slot) < g.params.size() && g.params[n.slot].node == id,
             where(g, id) + ": param slot does not match Graph::params");
    FJ_CHECK(n.shape.empty(), where(g, id) + ": a param must be 0-d");
    FJ_CHECK(g.params[n.slot].default_value.dtype == n.dtype, where(g, id) + ": param default has another dtype");
  } else {
    FJ_CHECK(n.shape.empty(), where(g, id) + ": a constant must be 0-d");
    FJ_CHECK(n.value.dtype == n.dtype, where(g, id) + ": constant value has another dtype");
  }
}

// An elementwise node's dtypes by its op's type rule (TypeRule in ir/op.h).
void check_elementwise_dtypes(const Graph& g, NodeId id, TypeRule rule) {
  const Node& n = g.node(id);
  auto dt = [&](int k) { return g.node(n.args[k]).dtype; };
  switch (rule) {
    case TypeRule::Same:
      for (int k = 0; k < n.nargs; ++k) FJ_CHECK(dt(k) == n.dtype, where(g, id) + ": operand dtype differs from result");
      FJ_CHECK(defined_on(n.op, n.dtype), where(g, id) + ": op not defined on its dtype");
      break;
    case TypeRule::Float:
      FJ_CHECK(is_float(n.dtype), where(g, id) + ": result must be floating point");
      for (int k = 0; k < n.nargs; ++k) FJ_CHECK(dt(k) == n.dtype, where(g, id) + ": operand dtype differs from result");
      break;
    case TypeRule::Compare:
      FJ_CHECK(n.dtype == DType::Bool, where(g, id) + ": comparison result must be bool");
      for (int k = 1; k < n.nargs; ++k) FJ_CHECK(dt(k) == dt(0), where(g, id) + ": operand dtypes differ");
      break;
    case TypeRule::Logical:
      FJ_CHECK(n.dtype == DType::Bool, where(g, id) + ": logical result must be bool");
      for (int k = 0; k < n.nargs; ++k) FJ_CHECK(dt(k) == DType::Bool, where(g, id) + ": operand must be bool");
      break;
    case TypeRule::Pred:
      FJ_CHECK(n.dtype == DType::Bool, where(g, id) + ": predicate result must be bool");
      break;
    case TypeRule::Where:
      FJ_CHECK(dt(0) == DType::Bool, where(g, id) + ": condition must be bool");
      FJ_CHECK(dt(1) == n.dtype && dt(2) == n.dtype, where(g, id) + ": value operands must have the result dtype");
      break;
    case TypeRule::Cast:
    case TypeRule::Leaf:
    case TypeRule::Reduce:
      break;
  }
}

// An elementwise node has no reduction attributes, and its shape is the NumPy broadcast of its
// operands' shapes.
void check_broadcast(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  FJ_CHECK(n.red == ReduceAttr{}, where(g, id) + ": reduction axes on an elementwise node");
  Shape s = g.node(n.args[0]).shape;
  try {
    for (int k = 1; k < n.nargs; ++k) s = broadcast_shapes(s, g.node(n.args[k]).shape, n.loc, &g);
  } catch (const UserError& e) {
    FJ_CHECK(false, where(g, id) + ": operands do not broadcast: " + e.what());
  }
  FJ_CHECK(s == n.shape, where(g, id) + ": shape " + shape_to_string(n.shape, &g) +
                             " is not the broadcast of its operands' shapes " + shape_to_string(s, &g));
}

void check_node(const Graph& g, NodeId id) {
  check_structure(g, id);
  const TypeRule rule = op_info(g.node(id).op).rule;
  if (rule == TypeRule::Leaf) return check_leaf(g, id);
  if (rule == TypeRule::Reduce) return check_reduction(g, id);
  check_elementwise_dtypes(g, id, rule);
  check_broadcast(g, id);
}

}  // namespace

void verify(const Graph& g) {
  size_t n_inputs = 0, n_params = 0;
  for (NodeId id = 0; id < g.size(); ++id) {
    check_node(g, id);
    n_inputs += g.node(id).op == Op::Input;
    n_params += g.node(id).op == Op::Param;
  }
  FJ_CHECK(n_inputs == g.inputs.size(), "Graph::inputs does not list every Input node");
  FJ_CHECK(n_params == g.params.size(), "Graph::params does not list every Param node");
  for (size_t k = 0; k < g.inputs.size(); ++k)
    FJ_CHECK(g.inputs[k] >= 0 && g.inputs[k] < g.size() && g.node(g.inputs[k]).op == Op::Input &&
                 g.node(g.inputs[k]).slot == static_cast<int32_t>(k),
             "Graph::inputs[" + std::to_string(k) + "] is not the Input node with that slot");
  for (size_t k = 0; k < g.params.size(); ++k)
    FJ_CHECK(g.params[k].node >= 0 && g.params[k].node < g.size() && g.node(g.params[k].node).op == Op::Param &&
                 g.node(g.params[k].node).slot == static_cast<int32_t>(k),
             "Graph::params[" + std::to_string(k) + "] is not the Param node with that slot");

  if (g.outputs.empty()) throw UserError("graph has no output; add a line such as `output y`");
  std::unordered_map<std::string, size_t> seen;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const OutputDecl& o = g.outputs[k];
    FJ_CHECK(o.node >= 0 && o.node < g.size(), "output '" + o.name + "' refers to no node");
    const Node& n = g.node(o.node);
    if (n.op == Op::Input || n.op == Op::Param)
      throw UserError("output '" + o.name + "' names " + (n.op == Op::Input ? "input" : "param") + " '" + n.name +
                          "'; an output must be computed by the graph",
                      o.loc);
    if (o.name.empty()) throw UserError("output " + std::to_string(k) + " has an empty name", o.loc);
    auto [it, fresh] = seen.emplace(o.name, k);
    if (!fresh) throw UserError("output '" + o.name + "' is listed twice", o.loc);
  }
}

}  // namespace fusejit::ir
