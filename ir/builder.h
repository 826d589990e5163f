// GraphBuilder: the one way graphs are constructed (by the parser, the public API's builder and
// the passes). It applies the typing rules (promotion, weak literals, implicit casts as explicit
// Cast nodes) and NumPy broadcasting, so every graph it returns satisfies ir/verify.h.
#pragma once

#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace fusejit::ir {

// A weakly typed literal (`2`, `0.5`, `true`, `inf`): it takes its dtype from the strong operand
// it meets (PyTorch's rule for Python scalars). An int literal meeting a float tensor becomes that
// float dtype; a float literal meeting an int or bool tensor makes the result f32 (the default);
// an int literal meeting a bool tensor gives i64.
struct Literal {
  Category cat = Category::Int;
  double f = 0.0;  // cat == Float
  int64_t i = 0;   // cat == Int or Bool
};

// An operand while building: either a node or a weak literal. Expressions made only of literals
// are folded at build time in f64 / i64 (as Python would evaluate them) and stay weak.
struct Operand {
  NodeId node = kNoNode;
  Literal lit;
  bool is_literal() const { return node == kNoNode; }
  static Operand of(NodeId n) { Operand o; o.node = n; return o; }
  static Operand of(Literal l) { Operand o; o.lit = l; return o; }
};

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string graph_name = "", std::string file = "");

  // Declares a named dim; returns its index (Dim::sym). Throws UserError on a duplicate name or a
  // value < 0.
  int32_t add_dim(const std::string& name, int64_t value, Loc loc = {});
  // Index of a declared dim, or -1.
  int32_t find_dim(const std::string& name) const;
  // Declares an input tensor. Dims with sym >= 0 take their size from that dim's value. Throws
  // UserError on a duplicate name or an element count that overflows int64.
  NodeId add_input(const std::string& name, DType dtype, const Shape& shape, Loc loc = {});
  // Sets the range generated values of `input` are drawn from (ValueRange). Throws UserError at
  // `loc` unless lo < hi are finite, or when the input is bool (random bools take no range).
  void set_input_range(NodeId input, double lo, double hi, Loc loc = {});
  // Declares a 0-d run-time scalar param with a default value (converted to `dtype`).
  NodeId add_param(const std::string& name, DType dtype, const Literal& default_value, Loc loc = {});

  // Applies a non-leaf, non-cast op. Weak literals are typed from the strong operands; operands
  // are cast to the op's operand dtype; shapes broadcast (NumPy). If every operand is a literal
  // the op is folded and a literal returned. Throws UserError on an arity, dtype (e.g. neg of
  // bool) or shape mismatch, naming both shapes.
  Operand apply(Op op, std::span<const Operand> args, Loc loc = {});
  // cast(x, dtype). A weak literal is converted straight to a Const of that dtype.
  Operand cast(const Operand& x, DType to, Loc loc = {});
  // Turns a literal into a Const node of its default dtype (i64, f32 or bool); nodes pass through.
  NodeId materialize(const Operand& x, Loc loc = {});
  // A typed constant node (0-d).
  NodeId constant(const Scalar& value, Loc loc = {});

  // Low-level append for passes: operands must already have the op's operand dtypes (FJ_CHECK);
  // the shape is the broadcast of the operands' shapes. For Cast, `dtype` is the target.
  NodeId add_typed(Op op, DType dtype, std::span<const NodeId> args, Loc loc = {});
  // Copies a leaf (Input/Param/Const) of another graph with its declaration (for passes that
  // rebuild a graph). Inputs and params must be copied in slot order.
  NodeId copy_leaf(const Graph& from, NodeId leaf);
  // Copies dims (names and values) from another graph; call before copy_leaf.
  void copy_dims(const Graph& from);

  void set_node_name(NodeId id, const std::string& name);
  void add_output(const std::string& name, const Operand& value, Loc loc = {});

  const Graph& graph() const { return g_; }
  // Finishes and verifies the graph (ir/verify.h); the builder is left empty. Throws UserError
  // when the graph has no output.
  Graph finish();

 private:
  NodeId push(Node n);
  DType operand_dtype(Op op, std::span<const DType> strong) const;
  Shape broadcast(const Shape& a, const Shape& b, Loc loc) const;
  Graph g_;
  std::unordered_map<std::string, int32_t> dim_index_;  // name -> index in g_.dims (O(1) find_dim)
};

// Broadcasts two shapes by NumPy's rules (right-aligned; a size-1 dim stretches). Throws UserError
// naming both shapes on mismatch or int64 overflow of the element count.
Shape broadcast_shapes(const Shape& a, const Shape& b, Loc loc = {}, const Graph* g = nullptr);

// Sets dims to new values (name -> value) and recomputes every node's shape. Throws UserError on
// an unknown dim name, a negative value, or a broadcast that no longer holds.
void rebind_dims(Graph& g, const std::vector<std::pair<std::string, int64_t>>& values);

// Converts a weak literal to a typed scalar (float -> int truncates toward zero etc., the cast rules).
Scalar literal_to_scalar(const Literal& l, DType dtype);

}  // namespace fusejit::ir
