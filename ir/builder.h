// GraphBuilder: the one way graphs are constructed (by the parser, the public API's builder and
// the passes). It applies the typing rules (promotion, weak literals, implicit casts as explicit
// Cast nodes) and NumPy broadcasting, so every graph it returns satisfies ir/verify.h.
#pragma once

#include <optional>
#include <span>
#include <string_view>
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
  Loc loc;         // where it was written (for errors); {} if unknown
};

// An operand while building: either a node or a weak literal. Expressions made only of literals
// are folded at build time as Python evaluates them (docs/graph-format.md): in i64 / f64, bools
// counting as ints in arithmetic (`true + true` is 2), `int / int` and `int ** negative int`
// giving floats; the result stays weak. An i64 overflow is a UserError (Python's ints do not
// wrap); where Python raises (division by zero, a math domain error) the op's own rule applies.
struct Operand {
  NodeId node = kNoNode;
  Literal lit;
  bool is_literal() const { return node == kNoNode; }
  static Operand of(NodeId n) { Operand o; o.node = n; return o; }
  static Operand of(Literal l) { Operand o; o.lit = l; return o; }
};

// The three tiers of type promotion, as in torch.result_type (PyTorch docs, "Type Promotion"):
// tensors with dimensions, 0-d tensors (inputs of shape [], params, typed constants, values
// computed from them), and weak literals (Python scalars). Within a category
// (bool < integer < float) a higher tier's dtype wins over a lower tier's: `f16[4] * param f32`
// is f16, `u8[2] + i64[]` is u8; a lower tier of a higher category decides the category (and, for
// 0-d tensors, the dtype): `i32[4] * f64[]` is f64, `i32[4] * 0.5` is f32.
enum class Tier : uint8_t { Dimensioned, ZeroDim, Weak };
struct TypedOperand {
  DType dtype;  // for Weak: default_dtype of the literal's category (bool, i64, f32)
  Tier tier;
};
// The common dtype of `ops` (non-empty) by the three tiers: each tier's dtypes promote among
// themselves (ir::promote), then tiers combine as c10's combine_categories does: a float higher
// tier wins; a bool higher tier, or a float lower tier, promotes with the lower; otherwise the
// higher tier wins.
DType result_type(std::span<const TypedOperand> ops);

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string graph_name = "", std::string file = "");
  // Refuse a node past kMaxGraphNodes (UserError at its Loc): the parser and the public builders,
  // whose graphs must print as text that parses back; a rewrite may hold old and new nodes at once.
  void limit_nodes() { limit_nodes_ = true; }

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
  // Declares a 0-d run-time scalar param with a default value (converted to `dtype` by the cast
  // rules). Throws UserError, naming the param, when the default does not fit `dtype` (the rules
  // of check_literal_fits).
  NodeId add_param(const std::string& name, DType dtype, const Literal& default_value, Loc loc = {});

  // Applies a non-leaf, non-cast op. Operands promote by result_type's three tiers; weak
  // literals become constants of the operand dtype; operands are cast to the op's operand dtype;
  // shapes broadcast (NumPy). If every operand is a literal the op is folded as Python would
  // (see Literal) and a literal returned. Throws UserError on an arity, dtype (e.g. neg of bool)
  // or shape mismatch (naming both shapes), on a literal that does not fit the dtype it converts
  // to (check_literal_fits), and on an i64 overflow while folding literals.
  Operand apply(Op op, std::span<const Operand> args, Loc loc = {});
  // Reduction `op` (sum, mean, prod, amax, amin) of x over `axes` (negative from the end; empty:
  // every axis), keeping them as size-1 dims when `keepdim`. Applies PyTorch's dtype rules
  // (ir/reduce.h, reduce_compute_dtype): x is cast to the compute dtype first and, for an f16/bf16
  // x, the result cast back (one rounding at the end). A literal x becomes a 0-d constant.
  // Throws UserError at `loc` on a bad axis (out of range, repeated), an integer mean, or an
  // amax/amin of zero elements. apply(op, {x}) of a reduction op reduces every axis.
  // `correction` (mean only; 0 or more): divide the sum by max(0, n - correction), as var's
  // second pass does; UserError for another op or a negative value. `initial` (NumPy's initial=):
  // only -inf for a float amax and +inf for a float amin, their identities: zero elements then
  // give it instead of an error; UserError for another op, dtype or value.
  Operand reduce(Op op, const Operand& x, std::span<const int64_t> axes, bool keepdim, Loc loc = {},
                 int64_t correction = 0, std::optional<double> initial = std::nullopt);
  // Composites in their numerically stable forms, expanded into primitives here so plans and
  // dumps show them (docs/ops.md, "Reductions"); `axis` as for reduce(). x must be a float tensor
  // of rank >= 1 (UserError otherwise, as PyTorch); f16/bf16 are computed in f32 and the result
  // is cast back once, as PyTorch's softmax kernels accumulate in f32.
  //   softmax(x, a)     = e / sum(e, a, keepdim), e = exp(x - amax(x, a, keepdim))
  //   log_softmax(x, a) = (x - m) - log(sum(exp(x - m), a, keepdim)), m = amax(x, a, keepdim)
  //   logsumexp(x, a)   = m' + log(sum(exp(x - m), a)), m' = m with the reduced axis removed,
  //                       where an infinite m becomes 0 inside the exp (torch.logsumexp: a row
  //                       of -inf gives -inf, a row holding +inf gives +inf, not NaN)
  // Throws UserError as reduce() does.
  Operand softmax(const Operand& x, int64_t axis, Loc loc = {});
  Operand log_softmax(const Operand& x, int64_t axis, Loc loc = {});
  Operand logsumexp(const Operand& x, int64_t axis, bool keepdim, Loc loc = {});
  // var(x, axes, correction) = mean((x - mean(x, axes, keepdim))^2, axes, correction): the
  // squared deviations summed and divided by max(0, n - correction), PyTorch's torch.var (its
  // default correction is 1, Bessel's; NumPy's ddof defaults to 0); `sd` takes the sqrt
  // (torch.std). Any axes as reduce(), rank 0 included; f16/bf16 as the composites above. n <=
  // correction divides by 0: NaN for a row of equal values, else +inf, as torch. Throws
  // UserError for a non-float x, a bad axis or a negative correction.
  Operand var(const Operand& x, std::span<const int64_t> axes, bool keepdim, int64_t correction, bool sd, Loc loc = {});
  // any(x, axes) = sum(cast(x, bool), axes) != 0 and all(x, axes) = sum(logical_not(x), axes) == 0
  // (np.any / np.all, torch.any / torch.all): a bool result for any dtype, NaN counts as true, and
  // over no elements any is false and all true. Any axes as reduce(); the count is an i64 sum.
  Operand any_all(const Operand& x, std::span<const int64_t> axes, bool keepdim, bool all, Loc loc = {});
  // What `name(x[, AXES][, keepdim][, correction=N | initial=±inf])` means in graph text
  // (docs/graph-format.md), for the parser and the public GraphBuilder alike: a reduction op (sum
  // mean prod amax amin) or a composite (ir/reduce.h, composite_names). softmax and log_softmax
  // take exactly one axis and no keepdim, logsumexp one axis; a correction is for mean (default
  // 0), var and std (default 1); an initial for amax (-inf) and amin (+inf).
  // Throws UserError at `loc` for other argument combinations and as the functions above.
  // The largest correction (mean, var, std) the graph format reads.
  static constexpr int64_t kMaxCorrection = int64_t{1} << 62;
  struct ReduceArgs {
    std::vector<int64_t> axes;          // as written (negative from the end); empty: every axis
    bool keepdim = false;
    std::optional<int64_t> correction;  // unset: the op's default
    std::optional<double> initial;      // amax/amin: NumPy's initial= (only -inf / +inf)
    Loc axes_loc;                       // where the axes are written; a bad axis is reported there
    Loc initial_loc;                    // where the initial value is written; a bad one is reported there
  };
  Operand reduce_by_name(std::string_view name, const Operand& x, const ReduceArgs& args, Loc loc = {});
  // cast(x, dtype). A weak literal is converted straight to a Const of that dtype.
  Operand cast(const Operand& x, DType to, Loc loc = {});
  // Turns a literal into a Const node of its default dtype (i64, f32 or bool); nodes pass through.
  NodeId materialize(const Operand& x, Loc loc = {});
  // A typed constant node (0-d).
  NodeId constant(const Scalar& value, Loc loc = {});

  // Low-level append for passes: operands must already have the op's operand dtypes (FJ_CHECK);
  // the shape is the broadcast of the operands' shapes. For Cast, `dtype` is the target.
  NodeId add_typed(Op op, DType dtype, std::span<const NodeId> args, Loc loc = {});
  // Low-level append of a reduction for passes: `arg` must already have the compute dtype `dtype`;
  // the shape follows from `red` (ir/reduce.h). Throws UserError at `loc` for an amax/amin of
  // zero elements.
  NodeId add_reduce(Op op, DType dtype, NodeId arg, ReduceAttr red, Loc loc = {});
  // Copies a leaf (Input/Param/Const) of another graph with its declaration (for passes that
  // rebuild a graph). Inputs and params must be copied in slot order.
  NodeId copy_leaf(const Graph& from, NodeId leaf);
  // A builder of a graph with `from`'s header (Graph::header: name, file, dims, where its
  // locations came from) and no nodes, for passes that rebuild a graph; copy leaves with copy_leaf.
  static GraphBuilder rebuilding(const Graph& from);

  void set_node_name(NodeId id, const std::string& name);
  void add_output(const std::string& name, const Operand& value, Loc loc = {});

  const Graph& graph() const { return g_; }
  // Drops the nodes added after the graph had `size` nodes (constants and casts a refused call
  // made before failing); nothing may refer to them.
  void drop_nodes_after(int size) { g_.nodes.resize(static_cast<size_t>(size)); }
  // Gives the nodes added after the graph had `size` nodes that have no location `loc` (a
  // tracer's line: fusejit::GraphBuilder::set_location).
  void locate_nodes_after(int size, Loc loc) {
    for (size_t k = static_cast<size_t>(size); k < g_.nodes.size(); ++k)
      if (!g_.nodes[k].loc.known()) g_.nodes[k].loc = loc;
  }
  // The file a tracer's locations of its nodes are in (Graph::file, Graph::traced_file).
  void set_traced_file(std::string file) {
    g_.file = std::move(file);
    g_.traced_file = true;
  }
  // Finishes and verifies the graph (ir/verify.h); the builder is left empty. Throws UserError
  // when the graph has no output.
  Graph finish();

 private:
  NodeId push(Node n);
  Operand fold_literals(Op op, std::span<const Operand> args, Loc loc) const;
  // pow(x, literal 2 / 0.5 / -1, compared in `operand`) as mul / sqrt / reciprocal (NumPy's and
  // PyTorch's scalar fast paths), x strong and the result float (`operand`); nullopt otherwise.
  std::optional<Operand> scalar_pow(const Operand& x, const Operand& exponent, DType operand, Loc loc);
  std::vector<NodeId> operand_nodes(Op op, std::span<const Operand> args, DType operand, Loc loc);
  DType common_dtype(Op op, std::span<const Operand> args) const;
  Shape broadcast(const Shape& a, const Shape& b, Loc loc) const;
  Graph g_;
  std::unordered_map<std::string, int32_t> dim_index_;  // name -> index in g_.dims (O(1) find_dim)
  bool limit_nodes_ = false;
};

// Broadcasts two shapes by NumPy's rules (right-aligned; a size-1 dim stretches). Throws UserError
// naming both shapes on mismatch or int64 overflow of the element count.
Shape broadcast_shapes(const Shape& a, const Shape& b, Loc loc = {}, const Graph* g = nullptr);

// For operands that do not broadcast: "; 'm' has dropped its reduced axes: reduce with `keepdim`
// ..." when one of `args` is, or is computed elementwise from, a reduction without keepdim; ""
// otherwise. Appended to the broadcast error by the builder and by rebind_dims.
std::string keepdim_hint(const Graph& g, std::span<const NodeId> args);

// Throws UserError at `loc` when a computed value of `dtype` and `shape` would not fit 2^63 bytes
// (a broadcast or reduction result; inputs are checked where declared).
void check_value_bytes(const Graph& g, DType dtype, const Shape& shape, Loc loc);
// Throws UserError (at `loc`) when input `name` (node `n`, its sizes set) has an element count or
// byte size past 2^63 - 1: the builder's check of an input, and rebind_dims's at new dims.
void check_input_size(const Graph& g, const std::string& name, const Node& n, Loc loc);

// Sets dims to new values (name -> value) and recomputes every node's shape. Throws UserError on
// an unknown dim name, a negative value, or a broadcast that no longer holds.
void rebind_dims(Graph& g, const std::vector<std::pair<std::string, int64_t>>& values);

// "unknown dim 'Q'<where>; the graph declares dims N, C" (or "no dims"): the one message for a dim
// name a graph does not declare (the parser's overrides, rebind_dims, the library's dims).
std::string unknown_dim_message(const Graph& g, const std::string& name, const std::string& where = "");

// Converts a weak literal to a typed scalar (float -> int truncates toward zero etc., the cast rules).
Scalar literal_to_scalar(const Literal& l, DType dtype);

// Throws UserError (at l.loc, else `loc`) naming the literal, its value and `dtype` when an
// implicit conversion of `l` to `dtype` would not keep its value up to rounding: an integer
// outside the dtype's range (`clamp(x_i8, -1000, 1000)`; PyTorch refuses these too), a finite
// value that overflows a float dtype to inf (`x_f16 * 100000`) or a nonzero one that rounds to 0 in
// it (`x_f16 * 1e-8`: NumPy 2 multiplies by 0, PyTorch keeps 1e-8 in f32), a float outside an integer
// dtype's range or NaN (param defaults). Conversions to bool (x != 0) always fit; explicit
// `cast` is never checked (it wraps and saturates by the cast rules).
void check_literal_fits(const Literal& l, DType dtype, Loc loc = {});
// A literal as messages show it: true, 300, 1e+39 (a float's shortest round-trip text).
std::string literal_text(const Literal& l);
// What check_literal_fits refuses, without throwing: "" when `l` fits `dtype`, else why not
// ("range 0 to 255", "it would overflow to inf"); for param values set at a call, where a value
// that rounds to 0 is taken (check_literal_fits refuses it in a literal).
std::string literal_misfit(const Literal& l, DType dtype);

}  // namespace fusejit::ir
