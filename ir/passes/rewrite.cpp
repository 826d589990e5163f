#include "ir/passes/rewrite.h"

#include <cmath>
#include <cstring>
#include <map>

#include "ir/eval.h"
#include "ir/passes/dce.h"
#include "ir/passes/rules.h"
#include "ir/reduce.h"

namespace fusejit::ir {

// ---- RewriteContext ---------------------------------------------------------------------------

size_t RewriteContext::KeyHash::operator()(const Key& k) const {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(static_cast<uint64_t>(k.op));
  mix(static_cast<uint64_t>(k.dtype));
  for (NodeId a : k.args) mix(static_cast<uint64_t>(static_cast<uint32_t>(a)));
  mix(k.bits);
  mix(k.red.axes);
  mix(k.red.keepdim);
  mix(static_cast<uint64_t>(k.red.correction));
  mix(k.red.initial);
  return static_cast<size_t>(h);
}

std::optional<Scalar> RewriteContext::const_value(NodeId id) const {
  const Node& n = node(id);
  if (n.op == Op::Const) return n.value;
  if (splat_carrier(id) == kNoNode) return std::nullopt;
  return node(n.args[1]).value;
}

NodeId RewriteContext::splat_carrier(NodeId id) const {
  const Node& n = node(id);
  if (n.op != Op::Where) return kNoNode;
  const Node& c = node(n.args[0]);
  const Node& v = node(n.args[1]);
  if (c.op != Op::Const || c.value.i == 0 || v.op != Op::Const || node(n.args[2]).shape != n.shape) return kNoNode;
  return n.args[2];
}

NodeId RewriteContext::emit(Op op, DType dtype, std::span<const NodeId> args, ReduceAttr red) {
  Key k{op, dtype, {kNoNode, kNoNode, kNoNode}, 0, red};
  for (size_t i = 0; i < args.size(); ++i) k.args[i] = args[i];
  auto it = table_.find(k);
  if (it != table_.end()) {
    last_hit_ = true;
    return it->second;
  }
  last_hit_ = false;
  NodeId id = is_reduction(op) ? b_.add_reduce(op, dtype, args[0], red, loc_) : b_.add_typed(op, dtype, args, loc_);
  table_.emplace(k, id);
  return id;
}

NodeId RewriteContext::constant(Scalar v) {
  Key k{Op::Const, v.dtype, {kNoNode, kNoNode, kNoNode}, 0, {}};
  if (is_float(v.dtype)) std::memcpy(&k.bits, &v.f, 8);
  else k.bits = static_cast<uint64_t>(v.i);
  auto it = table_.find(k);
  if (it != table_.end()) return it->second;
  NodeId id = b_.constant(v, loc_);
  table_.emplace(k, id);
  return id;
}

NodeId RewriteContext::splat(Scalar v, NodeId like) {
  NodeId c = constant(v);  // may grow the node array: no reference into it is held across this
  if (node(like).shape.empty()) return c;
  FJ_CHECK(node(like).dtype == v.dtype, "splat: the shape carrier must have the value's dtype");
  Scalar t;
  t.dtype = DType::Bool;
  t.i = 1;
  return emit(Op::Where, v.dtype, {constant(t), c, like});
}

// ---- match helpers ----------------------------------------------------------------------------

namespace match {

bool is_pow2(const Scalar& s) {
  if (!is_float(s.dtype) || !std::isfinite(s.f) || s.f == 0.0) return false;
  int e = 0;
  double m = std::frexp(std::fabs(s.f), &e);
  return m == 0.5;
}

bool split_const(const RewriteContext& ctx, const Candidate& n, NodeId* other, Scalar* c) {
  if (n.nargs != 2) return false;
  std::optional<Scalar> c0 = ctx.const_value(n.arg(0));
  std::optional<Scalar> c1 = ctx.const_value(n.arg(1));
  if (c1 && !c0) { *other = n.arg(0); *c = *c1; return true; }
  if (c0 && !c1) { *other = n.arg(1); *c = *c0; return true; }
  return false;
}

bool equals(const Scalar& s, double v) {
  if (is_float(s.dtype)) return s.f == v;
  return static_cast<double>(s.i) == v && std::fabs(v) < 9.0e15;
}

bool is_neg_zero(const Scalar& s) { return is_float(s.dtype) && s.f == 0.0 && std::signbit(s.f); }
bool is_pos_zero(const Scalar& s) { return is_float(s.dtype) && s.f == 0.0 && !std::signbit(s.f); }

bool fits(const RewriteContext& ctx, const Candidate& n, NodeId r) {
  const Node& x = ctx.node(r);
  return x.dtype == n.dtype && x.shape == n.shape;
}

Scalar make(DType t, double v) {
  Scalar s;
  s.dtype = t;
  if (is_float(t)) s.f = v;
  else s.i = static_cast<int64_t>(v);
  return s;
}

Scalar eval2(Op op, DType t, const Scalar& a, const Scalar& b) {
  Scalar v[2] = {a, b};
  return eval_scalar(op, t, v);
}

}  // namespace match

const std::vector<Rule>& all_rules() {
  // Never destroyed: a compile from a destructor run at the process's end (after this static's
  // would have run) reads it (hostile pass, valgrind).
  static const std::vector<Rule>& rules = *new std::vector<Rule>([] {
    std::vector<Rule> r;
    add_fold_rules(r);
    add_identity_rules(r);
    add_chain_rules(r);
    add_strength_rules(r);
    add_fast_rules(r);
    return r;
  }());
  return rules;
}

// ---- driver -----------------------------------------------------------------------------------

namespace {

struct Driver {
  const RewriteOptions& opts;
  std::vector<const Rule*> rules;                 // active rules, in order
  std::vector<std::vector<int>> by_op;            // op -> indices into `rules` (any-root ones included)
  std::vector<int> counts;                        // per active rule, then cse, then dce
  RewriteResult* res;

  explicit Driver(const RewriteOptions& o, RewriteResult* r) : opts(o), res(r) {
    for (const Rule& rule : all_rules())
      if (!rule.fast_only || o.fast_math) rules.push_back(&rule);
    by_op.resize(static_cast<size_t>(kNumOps));
    for (int op = 0; op < kNumOps; ++op)
      for (size_t k = 0; k < rules.size(); ++k)
        if (!rules[k]->root || static_cast<int>(*rules[k]->root) == op) by_op[static_cast<size_t>(op)].push_back(static_cast<int>(k));
    counts.assign(rules.size() + 2, 0);
  }

  void record(size_t idx, const Node& old, int iteration) {
    ++counts[idx];
    if (res->fires.size() < kMaxRecordedFires)
      res->fires.push_back(
          {idx < rules.size() ? rules[idx]->name : idx == rules.size() ? kCseRuleName : kDeadCodeRuleName, old.name,
           old.loc, iteration});
  }

  // Counts a fire of rule `idx` (rules.size(): cse) on node `n`.
  void fire(size_t idx, const Node& n, int iteration, int* fired, std::vector<int>* per_rule) {
    record(idx, n, iteration);
    ++(*per_rule)[idx];
    ++*fired;
  }

  // Node n as a candidate in the new graph: its op and dtype over its operands' new nodes.
  static Candidate candidate(const GraphBuilder& b, const Node& n, const std::vector<NodeId>& map) {
    Candidate c;
    c.op = n.op;
    c.dtype = n.dtype;
    c.nargs = n.nargs;
    for (int k = 0; k < n.nargs; ++k) {
      c.args[static_cast<size_t>(k)] = map[static_cast<size_t>(n.args[static_cast<size_t>(k)])];
      const Shape& s = b.graph().node(c.args[static_cast<size_t>(k)]).shape;
      c.shape = k == 0 ? s : broadcast_shapes(c.shape, s);
    }
    return c;
  }

  // The new node for non-leaf node n: the first rule that applies (none for a reduction), else
  // n itself, emitted (a CSE hit counts as a fire).
  NodeId rewrite_node(RewriteContext& ctx, const Candidate& c, const Node& n, int iteration, int* fired,
                      std::vector<int>* per_rule) {
    for (int ri : is_reduction(n.op) ? std::vector<int>{} : by_op[static_cast<size_t>(n.op)]) {
      const NodeId r = rules[static_cast<size_t>(ri)]->apply(ctx, c);
      if (r == kNoNode) continue;
      FJ_CHECK(match::fits(ctx, c, r), std::string("rewrite rule '") + rules[static_cast<size_t>(ri)]->name +
                                           "' changed a node's dtype or shape");
      fire(static_cast<size_t>(ri), n, iteration, fired, per_rule);
      return r;
    }
    const NodeId r = ctx.emit(c.op, c.dtype, std::span<const NodeId>(c.args.data(), static_cast<size_t>(c.nargs)), n.red);
    if (ctx.last_emit_was_hit()) fire(rules.size(), n, iteration, fired, per_rule);
    return r;
  }

  // One bottom-up rebuild of `g`; returns the number of fires (cse included).
  Graph once(const Graph& g, int iteration, int* fired, std::vector<int>* per_rule) {
    GraphBuilder b = GraphBuilder::rebuilding(g);
    RewriteContext ctx(b, opts);
    std::vector<NodeId> map(static_cast<size_t>(g.size()), kNoNode);
    for (NodeId id : g.inputs) map[static_cast<size_t>(id)] = b.copy_leaf(g, id);
    for (const ParamDecl& p : g.params) map[static_cast<size_t>(p.node)] = b.copy_leaf(g, p.node);
    *fired = 0;
    for (NodeId id = 0; id < g.size(); ++id) {
      const Node& n = g.node(id);
      if (n.op == Op::Input || n.op == Op::Param) continue;
      ctx.set_loc(n.loc);
      const NodeId r = n.op == Op::Const ? ctx.constant(n.value)
                                         : rewrite_node(ctx, candidate(b, n, map), n, iteration, fired, per_rule);
      // Keep the user's name on the value that now stands for it, if that value has none.
      const Node& rn = b.graph().node(r);
      if (!n.name.empty() && rn.name.empty() && rn.op != Op::Input && rn.op != Op::Param)
        b.set_node_name(r, n.name);
      map[static_cast<size_t>(id)] = r;
    }
    for (const OutputDecl& o : g.outputs) b.add_output(o.name, Operand::of(map[static_cast<size_t>(o.node)]), o.loc);
    // Not finish(): an output may legitimately have become an input or param (x*1), which the
    // verifier rejects for user-written graphs; the plan gives such outputs a copy group.
    return b.graph();
  }
};

}  // namespace

int RewriteResult::total_fires() const {
  int t = 0;
  for (const RuleCount& c : counts) t += c.count;
  return t;
}

namespace {
// An output that rewrites made an input (`y = x * 1`, `h = cast(x, f32)` of an f32 x) becomes
// `cast(x, dtype)` again: an elementwise op the planner puts in a kernel that reads x anyway (an
// RMSNorm's, writing h as it loads x), not a copy kernel of its own that reads x a second time.
// Outputs of one input share the op. Params and constants stay leaves (fill groups, ir/plan.h).
void materialize_input_outputs(Graph& g) {
  std::map<NodeId, NodeId> cast_of;
  for (OutputDecl& o : g.outputs) {
    if (g.node(o.node).op != Op::Input) continue;
    auto [it, fresh] = cast_of.try_emplace(o.node, static_cast<NodeId>(g.size()));
    if (fresh) {
      Node c;
      c.op = Op::Cast;
      c.dtype = g.node(o.node).dtype;
      c.shape = g.node(o.node).shape;
      c.args[0] = o.node;
      c.nargs = 1;
      c.name = o.name;
      c.loc = o.loc;
      g.nodes.push_back(std::move(c));
    }
    o.node = it->second;
  }
}
}  // namespace

RewriteResult rewrite(const Graph& g, const RewriteOptions& options) {
  RewriteResult res;
  res.fast_math = options.fast_math;
  Driver d(options, &res);
  int removed = 0;
  Graph cur = eliminate_dead_code(g, &removed);
  std::vector<int> last(d.rules.size() + 1, 0);
  int max_it = options.max_iterations < 1 ? 1 : options.max_iterations;
  int fired = 0;
  for (int it = 0; it < max_it; ++it) {
    std::fill(last.begin(), last.end(), 0);
    Graph next = d.once(cur, it, &fired, &last);
    int dead = 0;
    cur = eliminate_dead_code(next, &dead);
    removed += dead;
    res.iterations = it + 1;
    if (fired == 0) break;
  }
  if (fired != 0) {
    res.hit_cap = true;
    res.diagnostic = "rewrite stopped after " + std::to_string(res.iterations) +
                     " iterations without reaching a fixed point; still firing:";
    for (size_t k = 0; k < last.size(); ++k)
      if (last[k])
        res.diagnostic += std::string(" ") + (k < d.rules.size() ? d.rules[k]->name : kCseRuleName) + " (" +
                          std::to_string(last[k]) + ")";
  }
  d.counts[d.rules.size() + 1] = removed;
  for (size_t k = 0; k < d.rules.size(); ++k) res.counts.push_back({d.rules[k]->name, d.counts[k]});
  res.counts.push_back({kCseRuleName, d.counts[d.rules.size()]});
  res.counts.push_back({kDeadCodeRuleName, removed});
  materialize_input_outputs(cur);
  res.graph = std::move(cur);
  return res;
}

}  // namespace fusejit::ir
