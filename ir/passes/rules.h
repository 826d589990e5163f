// Rewrite rules, MLIR-pattern style: each rule is a small object (root op, name, match-and-
// rewrite function). The driver (ir/passes/rewrite.cpp) rebuilds the graph node by node; for each
// node it offers the candidate (operands already rewritten, in the graph being built) to the
// rules rooted at its op. A rule only READS the graph; it returns the replacement, creating any
// new nodes through the context (hash-consed, so CSE is built in), or kNoNode for no match.
#pragma once

#include <array>
#include <optional>
#include <unordered_map>
#include <span>
#include <vector>

#include "ir/builder.h"
#include "ir/graph.h"

namespace fusejit::ir {

struct RewriteOptions;

// What a rule sees and may create. All NodeIds refer to the graph being built.
class RewriteContext {
 public:
  RewriteContext(GraphBuilder& b, const RewriteOptions& o) : b_(b), opts_(o) {}
  const Graph& graph() const { return b_.graph(); }
  // A node of the graph being built. The reference is valid only until the next emit(),
  // constant() or splat(), which may grow (and move) the node array: copy what is needed first.
  const Node& node(NodeId id) const { return b_.graph().node(id); }
  const RewriteOptions& options() const { return opts_; }
  // The value of a node known to be one constant everywhere: a Const, or a splat (see splat())
  // of one; else nullopt. A splat has a shape: rules check that their replacement fits. A copy:
  // a pointer into the graph would dangle once emit() grows its node array.
  std::optional<Scalar> const_value(NodeId id) const;
  // For a splat where(true, c, like): `like` (the node that carries its shape); else kNoNode.
  NodeId splat_carrier(NodeId id) const;
  // A node with op/dtype/args; returns an identical existing node if there is one (CSE).
  // `red`: a reduction's axes (ir/reduce.h); default for every other op.
  NodeId emit(Op op, DType dtype, std::span<const NodeId> args, ReduceAttr red = {});
  NodeId emit(Op op, DType dtype, std::initializer_list<NodeId> args) {
    return emit(op, dtype, std::span<const NodeId>(args.begin(), args.size()));
  }
  // A 0-d constant, shared with any equal (same bits) constant. `v` is taken by value, so it may
  // come from a node of this graph.
  NodeId constant(Scalar v);
  // The scalar `v` broadcast to the shape of `like` (same dtype as v): a Const if `like` is 0-d,
  // else where(true, v, like) -- the IR has no broadcast op, and the select keeps the shape.
  NodeId splat(Scalar v, NodeId like);
  // Number of nodes in the graph being built (ids below this existed before a rule ran).
  NodeId size() const { return b_.graph().size(); }

  // Hash-consing key: op, dtype, operands and (Const only) the value bits.
  struct Key {
    Op op;
    DType dtype;
    std::array<NodeId, 3> args;
    uint64_t bits;
    ReduceAttr red;  // reductions: axes and keepdim
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  // True if the last emit() returned an existing node.
  bool last_emit_was_hit() const { return last_hit_; }
  // Location given to nodes created from here on (the node being rewritten).
  void set_loc(Loc loc) { loc_ = loc; }

 private:
  GraphBuilder& b_;
  const RewriteOptions& opts_;
  std::unordered_map<Key, NodeId, KeyHash> table_;  // lookup only; never iterated
  bool last_hit_ = false;
  Loc loc_;
};

// A candidate node: op, dtype and operands already in the graph being built; shape is the
// broadcast of the operands' shapes. A rule's replacement must have this dtype and shape.
struct Candidate {
  Op op;
  DType dtype;
  std::array<NodeId, 3> args{kNoNode, kNoNode, kNoNode};
  int nargs = 0;
  Shape shape;
  NodeId arg(int k) const { return args[static_cast<size_t>(k)]; }
};

struct Rule {
  const char* name;
  std::optional<Op> root;  // nullopt: any non-leaf op
  bool fast_only;          // applied only with RewriteOptions::fast_math
  NodeId (*apply)(RewriteContext& ctx, const Candidate& n);
};

// Rule sets, one file each (ir/passes/rules_<set>.cpp). The driver uses them in this order.
void add_fold_rules(std::vector<Rule>& out);      // constant folding
void add_identity_rules(std::vector<Rule>& out);  // x*1, x-0, neg(neg(x)), where(true,...), ...
void add_chain_rules(std::vector<Rule>& out);     // (x*c1)*c2, (x+c1)+c2 when exact
void add_strength_rules(std::vector<Rule>& out);  // x/2^k -> x*2^-k, pow(x,2) -> x*x
void add_fast_rules(std::vector<Rule>& out);      // fast-math only

// The full rule list (all sets, in order); fast-only rules included, flagged.
const std::vector<Rule>& all_rules();

// Small matching helpers shared by the rule files.
namespace match {
// True if the scalar is a finite float equal to +-2^k.
bool is_pow2(const Scalar& s);
// For a commutative binary candidate: if exactly one operand is a Const, returns the other
// operand and (a copy of) the constant.
bool split_const(const RewriteContext& ctx, const Candidate& n, NodeId* other, Scalar* c);
// True if the scalar equals `v` (ints: i == v; floats: f == v, so -0.0 == 0.0 here).
bool equals(const Scalar& s, double v);
bool is_neg_zero(const Scalar& s);
bool is_pos_zero(const Scalar& s);
// Same dtype and shape as the candidate (a replacement must keep both).
bool fits(const RewriteContext& ctx, const Candidate& n, NodeId r);
// Scalar helpers (build a typed scalar).
Scalar make(DType t, double v);
// The binary op `op` at dtype `t` on two constants, as the reference evaluates it.
Scalar eval2(Op op, DType t, const Scalar& a, const Scalar& b);
}  // namespace match

}  // namespace fusejit::ir
