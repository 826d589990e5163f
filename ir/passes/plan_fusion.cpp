#include "ir/passes/plan_fusion.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "ir/passes/plan_report.h"
#include "ir/reduce.h"
#include "ir/reduce_group.h"

namespace fusejit::ir {
namespace {

constexpr int kMaxDupShapes = 4;  // a recomputed node serving more iteration shapes is materialised

enum class NodeRole : uint8_t { Dead, Leaf, Member, Dup };

// Why a group was started (for FusionGroup::note).
enum class Opened : uint8_t { FirstOfShape, Dependency, MoveBudget, OpCap, SplitParams, SplitOps, SplitPasses };

using ShapeKey = std::vector<std::pair<int64_t, int32_t>>;

ShapeKey shape_key(const Shape& s) {
  ShapeKey k;
  k.reserve(s.size());
  for (const Dim& d : s) k.emplace_back(d.size, d.sym);
  return k;
}

struct Planner {
  const Graph& g;
  const PlanOptions& opt;
  const std::set<NodeId>& isolated;  // reductions planned alone (plan_fusion's fallback)
  const std::set<NodeId>& detached;  // values that claim no reduction key (plan_fusion's fallback)
  size_t n;
  std::vector<NodeRole> kind;
  std::vector<int> sid;            // shape id per node
  std::vector<int> gkey;           // group key per node: its shape id, or its reduction's key
  std::vector<Shape> shapes;       // by key: shape ids first, then reduction keys (iteration shape)
  std::vector<uint64_t> key_mask;  // by key: the reduced axes of a reduction key, else 0
  std::vector<std::vector<NodeId>> key_reductions;  // by key: the reductions that made it
  std::vector<int> out_bind;       // graph output bindings per node
  // What recomputing a node takes: the distinct ops of its expression down to the values it reads
  // (inputs, reductions and graph outputs, which are in memory; params and constants are free), itself included;
  // `over` (sets cleared) beyond max_recompute_ops ops. Shared subexpressions count once, as the
  // kernel computes them once (LayerNorm's y reuses d = x - mean: 10 ops, not 17).
  struct Cone {
    std::vector<NodeId> ops, reads;  // sorted
    bool over = false;
  };
  std::vector<Cone> cone;
  std::vector<int> group;          // Member: its group index
  std::vector<std::vector<NodeId>> members;
  std::vector<Opened> opened;
  std::vector<int> key;            // group -> shape id

  Planner(const Graph& graph, const PlanOptions& o, const std::set<NodeId>& iso, const std::set<NodeId>& det, bool move)
      : g(graph), opt(o), isolated(iso), detached(det), n(static_cast<size_t>(graph.size())), moves(move) {}
  bool moves;               // whether form_groups may move a group after a later one (move_after)
  bool wanted_move = false;  // without moves: a member opened a group where a move might have joined it

  int new_key(const Shape& s, uint64_t mask) {
    shapes.push_back(s);
    key_mask.push_back(mask);
    key_reductions.emplace_back();
    return static_cast<int>(shapes.size()) - 1;
  }

  // Reduction keys: reductions of one operand shape over the same axes share a key, and with it
  // the values of that shape (element values) and of the reduced shape, with or without the
  // reduced dims as 1s (row values): so a softmax or an RMSNorm lands in one group. Where several
  // keys claim a shape (softmax(x, -1) + softmax(x, 0)), a value goes to the key of its latest
  // keyed operand (it follows the reduction it reads: the epilogue of that one), else to the first.
  // An isolated reduction gets a key of its own and claims nothing.
  void reduction_keys(std::map<ShapeKey, int>& ids) {
    std::map<std::pair<ShapeKey, uint64_t>, int> rkeys;
    std::vector<std::vector<int>> claim(shapes.size());  // by shape id: the keys claiming it, in order
    auto claim_shape = [&](const Shape& s, int k) {
      auto it = ids.find(shape_key(s));
      if (it == ids.end()) return;
      std::vector<int>& c = claim[static_cast<size_t>(it->second)];
      if (std::find(c.begin(), c.end(), k) == c.end()) c.push_back(k);
    };
    for (size_t i = 0; i < n; ++i) {
      const Node& nd = g.nodes[i];
      if (kind[i] != NodeRole::Member || !is_reduction(nd.op)) continue;
      const Shape& x = node(nd.arg(0)).shape;
      int k;
      if (isolated.count(static_cast<NodeId>(i))) {
        k = new_key(x, nd.red.axes);
      } else {
        auto [it, fresh] = rkeys.emplace(std::pair{shape_key(x), nd.red.axes}, 0);
        if (fresh) it->second = new_key(x, nd.red.axes);
        k = it->second;
        claim_shape(x, k);
        claim_shape(reduced_shape(x, nd.red.axes, true), k);
        claim_shape(reduced_shape(x, nd.red.axes, false), k);
      }
      gkey[i] = k;
      key_reductions[static_cast<size_t>(k)].push_back(static_cast<NodeId>(i));
    }
    for (size_t i = 0; i < n; ++i) {
      if (kind[i] != NodeRole::Member || is_reduction(g.nodes[i].op)) continue;  // leaves and dead nodes: sid -1
      if (detached.count(static_cast<NodeId>(i))) continue;
      const std::vector<int>& c = claim[static_cast<size_t>(sid[i])];
      if (!c.empty()) gkey[i] = follow_key(i, c);
    }
  }

  // The key of element or row value `i` among the keys `c` claiming its shape: the key of its
  // latest operand (highest node id) with a key in `c`, else the first of `c`. `var(d, 0)` of a
  // `d` computed in an axis-1 group squares `d - mean(d, 0)`: that follows the mean (axis 0).
  int follow_key(size_t i, const std::vector<int>& c) const {
    size_t latest = SIZE_MAX;
    for (int a = 0; a < g.nodes[i].nargs; ++a) {
      const size_t x = static_cast<size_t>(g.nodes[i].args[static_cast<size_t>(a)]);
      const bool keyed = kind[x] == NodeRole::Member && std::find(c.begin(), c.end(), gkey[x]) != c.end();
      if (keyed && (latest == SIZE_MAX || x > latest)) latest = x;
    }
    return latest != SIZE_MAX ? gkey[latest] : c.front();
  }

  const Node& node(NodeId id) const { return g.node(id); }

  // Whether recomputing node i in the `others` groups that read it besides its own reads fewer
  // bytes than writing it once and reading it in each: others x the bytes of the values its cone
  // reads < (1 + others) x its own. A widening cast after CSE (i8 -> i64: 1 byte read again
  // against 8 written and 8 read); `x - amax(x, 0)` read by an axis-1 group (x read again against
  // x's size written and read); `x * sigmoid(x)` (x alone). `a + b` of two inputs read by one
  // other group is a tie, and is written.
  bool cheaper_recomputed(size_t i, int64_t others) const {
    int64_t in = 0;
    for (NodeId r : cone[i].reads) in += num_elements(node(r).shape) * dtype_size(node(r).dtype);
    const int64_t value = num_elements(g.nodes[i].shape) * dtype_size(g.nodes[i].dtype);
    // long double: exact for these products (64-bit significand), where int64 could overflow.
    return static_cast<long double>(others) * in < static_cast<long double>(1 + others) * value;
  }

  // Node i's Cone from its operands' (set unions, each at most max_recompute_ops + 1 long).
  Cone make_cone(size_t i) const {
    Cone c;
    c.ops.push_back(static_cast<NodeId>(i));
    auto merge = [](std::vector<NodeId>& into, const std::vector<NodeId>& from) {
      std::vector<NodeId> u;
      std::set_union(into.begin(), into.end(), from.begin(), from.end(), std::back_inserter(u));
      into = std::move(u);
    };
    const Node& nd = g.nodes[i];
    for (int a = 0; a < nd.nargs && !c.over; ++a) {
      const NodeId x = nd.arg(a);
      const Node& xn = node(x);
      // Inputs, reductions and graph outputs are in memory: read, never recomputed.
      if (xn.op == Op::Input || is_reduction(xn.op) || out_bind[static_cast<size_t>(x)] > 0) merge(c.reads, {x});
      else if (!is_leaf(xn.op)) {
        const Cone& xc = cone[static_cast<size_t>(x)];
        c.over = xc.over;
        merge(c.ops, xc.ops);
        merge(c.reads, xc.reads);
      }
      c.over = c.over || static_cast<int>(c.ops.size()) > opt.max_recompute_ops;
    }
    c.over = c.over || static_cast<int>(c.ops.size()) > opt.max_recompute_ops;
    if (c.over) c = Cone{{}, {}, true};
    return c;
  }

  // Which nodes an output needs (reverse topological order).
  std::vector<char> live_nodes() const {
    std::vector<char> live(n, 0);
    for (const OutputDecl& o : g.outputs) live[static_cast<size_t>(o.node)] = 1;
    for (size_t i = n; i-- > 0;)
      if (live[i])
        for (int k = 0; k < g.nodes[i].nargs; ++k) live[static_cast<size_t>(g.nodes[i].args[static_cast<size_t>(k)])] = 1;
    return live;
  }

  // Each live node's consumers, CSR: those of node i are list[start[i] .. start[i + 1]).
  struct Users {
    std::vector<int> start;
    std::vector<NodeId> list;
  };

  // Roles Leaf / Member of the live nodes, their shape ids (std::map: deterministic) and
  // recompute cones, and their consumers.
  Users index_nodes(const std::vector<char>& live, std::map<ShapeKey, int>& ids) {
    sid.assign(n, -1);
    cone.assign(n, Cone{});
    Users u{std::vector<int>(n + 1, 0), {}};
    for (size_t i = 0; i < n; ++i) {
      const Node& nd = g.nodes[i];
      if (!live[i]) continue;
      if (is_leaf(nd.op)) { kind[i] = NodeRole::Leaf; continue; }
      kind[i] = NodeRole::Member;
      auto [it, fresh] = ids.emplace(shape_key(nd.shape), static_cast<int>(shapes.size()));
      if (fresh) new_key(nd.shape, 0);
      sid[i] = it->second;
      for (int a = 0; a < nd.nargs; ++a) ++u.start[static_cast<size_t>(nd.args[static_cast<size_t>(a)]) + 1];
      if (!is_reduction(nd.op)) cone[i] = make_cone(i);
    }
    for (size_t i = 0; i < n; ++i) u.start[i + 1] += u.start[i];
    u.list.resize(static_cast<size_t>(u.start[n]));
    std::vector<int> fill(u.start.begin(), u.start.end() - 1);
    for (size_t i = 0; i < n; ++i) {
      if (!live[i] || is_leaf(g.nodes[i].op)) continue;
      for (int a = 0; a < g.nodes[i].nargs; ++a)
        u.list[static_cast<size_t>(fill[static_cast<size_t>(g.nodes[i].args[static_cast<size_t>(a)])]++)] = static_cast<NodeId>(i);
    }
    return u;
  }

  // Reverse pass: Member (own group, materialised if needed) or Dup (recomputed per consumer).
  // A reduction is never recomputed. evals[i]: the iteration shapes node i is evaluated in.
  void choose_roles(const Users& users) {
    std::vector<std::vector<int>> evals(n);
    for (size_t i = n; i-- > 0;) {
      if (kind[i] != NodeRole::Member) continue;
      if (out_bind[i] == 0 && !cone[i].over && !is_reduction(g.nodes[i].op)) {
        std::vector<int> u;
        for (int k = users.start[i]; k < users.start[i + 1]; ++k)
          for (int s : evals[static_cast<size_t>(users.list[static_cast<size_t>(k)])]) u.push_back(s);
        std::sort(u.begin(), u.end());
        u.erase(std::unique(u.begin(), u.end()), u.end());
        const bool own = std::binary_search(u.begin(), u.end(), gkey[i]);
        if (!u.empty() && static_cast<int>(u.size()) <= kMaxDupShapes &&
            (!own || (u.size() > 1 && cheaper_recomputed(i, static_cast<int64_t>(u.size()) - 1)))) {
          kind[i] = NodeRole::Dup;
          evals[i] = std::move(u);
          continue;
        }
      }
      evals[i] = {gkey[i]};
    }
  }

  void classify() {
    kind.assign(n, NodeRole::Dead);
    out_bind = output_bindings(g);
    std::map<ShapeKey, int> ids;
    const Users users = index_nodes(live_nodes(), ids);
    gkey = sid;
    reduction_keys(ids);
    choose_roles(users);
  }

  // The groups whose values node `a` carries into a group that reads it: its own group (a
  // member), the groups its recomputed cone reads (a Dup), none (a leaf). Sorted, distinct.
  std::vector<int> sources(NodeId a, const std::vector<std::vector<int>>& dsrc) const {
    switch (kind[static_cast<size_t>(a)]) {
      case NodeRole::Member: return {group[static_cast<size_t>(a)]};
      case NodeRole::Dup: return dsrc[static_cast<size_t>(a)];
      default: return {};
    }
  }

  // Group state while forming groups, by group id (the order groups opened in): each group's
  // direct source groups (deps) and each Dup node's (dsrc), the latest group per key, ops per
  // group, and the launch order: order[position] = id, pos[id] = position. group[] holds ids
  // until form_groups puts members in launch order.
  struct Forming {
    std::vector<std::vector<int>> deps, dsrc;
    std::vector<int> latest, ops, order, pos;
    int64_t budget = 0;  // group positions moves may still pass (move_after), so planning stays linear
  };
  // Positions moves may pass in all, per node of the graph, and at least (a reviewer measured 0.8 s
  // of moves in a worst-case graph of 110,000 nodes under a bound of 4,096 moves).
  static constexpr int64_t kMoveBudgetPerNode = 4, kMinMoveBudget = 1 << 16;

  // Group G, which a new member would make read group D placed after it, moved after D with the
  // groups in between that depend on it, the others keeping their order (a plan tester's find:
  // `a = x * 2`, then `s = amax(w, -1, keepdim)`, then `y = a / s` wrote a and read it back,
  // where writing s first fused a and y: the plan followed the order of independent statements).
  // Refused (Dependency) where D, or a group of `srcs`, depends on G: joining would make a cycle;
  // (MoveBudget) past the positions moves may pass. FirstOfShape: moved.
  Opened move_after(int G, int D, const std::vector<int>& srcs, Forming& f) {
    const int pg = f.pos[static_cast<size_t>(G)], pd = f.pos[static_cast<size_t>(D)];
    if (!moves) {
      wanted_move = true;
      return Opened::Dependency;
    }
    if (pd - pg + 1 > f.budget) return Opened::MoveBudget;
    std::vector<char> marked(static_cast<size_t>(pd - pg + 1), 0);  // by position - pg: depends on G
    marked[0] = 1;
    auto is_marked = [&](int id) {
      const int q = f.pos[static_cast<size_t>(id)];
      return q >= pg && q <= pd && marked[static_cast<size_t>(q - pg)];
    };
    for (int q = pg + 1; q <= pd; ++q)
      for (int d : f.deps[static_cast<size_t>(f.order[static_cast<size_t>(q)])])
        if (is_marked(d)) marked[static_cast<size_t>(q - pg)] = 1;
    for (int x : srcs)
      if (x != G && is_marked(x)) return Opened::Dependency;
    std::vector<int> ids;  // the range in its new order: the unmarked first
    for (char pass = 0; pass < 2; ++pass)
      for (int q = pg; q <= pd; ++q)
        if (marked[static_cast<size_t>(q - pg)] == pass) ids.push_back(f.order[static_cast<size_t>(q)]);
    for (size_t k = 0; k < ids.size(); ++k) {
      f.order[static_cast<size_t>(pg) + k] = ids[k];
      f.pos[static_cast<size_t>(ids[k])] = pg + static_cast<int>(k);
    }
    f.budget -= pd - pg + 1;
    return Opened::FirstOfShape;  // (moved: no group opened)
  }

  void form_groups() {
    group.assign(n, -1);
    Forming f;
    f.dsrc.assign(n, {});
    f.latest.assign(shapes.size(), -1);
    f.budget = std::max(kMinMoveBudget, kMoveBudgetPerNode * static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) {
      const Node& nd = g.nodes[i];
      if (kind[i] != NodeRole::Dup && kind[i] != NodeRole::Member) continue;
      std::vector<int> srcs;
      int extra = 1;
      for (int a = 0; a < nd.nargs; ++a) {
        const NodeId x = nd.args[static_cast<size_t>(a)];
        const std::vector<int> s = sources(x, f.dsrc);
        srcs.insert(srcs.end(), s.begin(), s.end());
        if (kind[static_cast<size_t>(x)] == NodeRole::Dup) extra += static_cast<int>(cone[static_cast<size_t>(x)].ops.size());
      }
      std::sort(srcs.begin(), srcs.end());
      srcs.erase(std::unique(srcs.begin(), srcs.end()), srcs.end());
      if (kind[i] == NodeRole::Dup) f.dsrc[i] = std::move(srcs);
      else join_or_open(i, srcs, extra, f);
    }
    in_launch_order(f);
  }

  // Member i joins the latest group of its key (moved after a group placed later that it reads,
  // move_after), or opens one: for its key's first member, where joining would make a cycle, or at
  // the op cap.
  void join_or_open(size_t i, const std::vector<int>& srcs, int extra, Forming& f) {
    int G = f.latest[static_cast<size_t>(gkey[i])];
    Opened why = Opened::FirstOfShape;
    if (G >= 0) {
      int dep = -1;  // the source placed last
      for (int x : srcs)
        if (dep < 0 || f.pos[static_cast<size_t>(x)] > f.pos[static_cast<size_t>(dep)]) dep = x;
      const bool later = dep >= 0 && f.pos[static_cast<size_t>(dep)] > f.pos[static_cast<size_t>(G)];
      if (f.ops[static_cast<size_t>(G)] + extra > opt.max_ops_per_group) why = Opened::OpCap;
      else if (later) why = move_after(G, dep, srcs, f);
      if (why == Opened::FirstOfShape) {  // joins (moved after dep where it was later)
        add_member(G, i, srcs, extra, f);
        return;
      }
    }
    G = static_cast<int>(members.size());
    members.emplace_back();
    opened.push_back(why);
    key.push_back(gkey[i]);
    f.ops.push_back(0);
    f.deps.emplace_back();
    f.pos.push_back(static_cast<int>(f.order.size()));
    f.order.push_back(G);
    f.latest[static_cast<size_t>(gkey[i])] = G;
    add_member(G, i, srcs, extra, f);
  }

  void add_member(int G, size_t i, const std::vector<int>& srcs, int extra, Forming& f) {
    members[static_cast<size_t>(G)].push_back(static_cast<NodeId>(i));
    f.ops[static_cast<size_t>(G)] += extra;
    group[i] = G;
    std::vector<int>& d = f.deps[static_cast<size_t>(G)];
    for (int x : srcs)
      if (x != G) d.push_back(x);
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
  }

  // The groups, and group[] of their members, by launch position rather than id.
  void in_launch_order(const Forming& f) {
    std::vector<std::vector<NodeId>> m(members.size());
    std::vector<Opened> o(members.size());
    std::vector<int> k(members.size());
    for (size_t q = 0; q < f.order.size(); ++q) {
      const auto id = static_cast<size_t>(f.order[q]);
      m[q] = std::move(members[id]);
      o[q] = opened[id];
      k[q] = key[id];
      for (NodeId x : m[q]) group[static_cast<size_t>(x)] = static_cast<int>(q);
    }
    members = std::move(m);
    opened = std::move(o);
    key = std::move(k);
  }

  // Group G's nodes recomputed in it (Dup nodes reachable through Dup operands, added to
  // fg.nodes) and its inputs and params; a member of another group it reads is marked `outside`
  // (that group writes it). stamp[i] == G: node i already seen for G.
  void gather_operands(int G, FusionGroup& fg, std::vector<int>& stamp, std::vector<char>& outside) {
    std::vector<NodeId> stack(fg.nodes.begin(), fg.nodes.end());
    while (!stack.empty()) {
      const Node& nd = node(stack.back());
      stack.pop_back();
      for (int a = 0; a < nd.nargs; ++a) {
        const NodeId y = nd.args[static_cast<size_t>(a)];
        const size_t yi = static_cast<size_t>(y);
        if (stamp[yi] == G) continue;
        if (kind[yi] == NodeRole::Dup) {
          stamp[yi] = G;
          fg.nodes.push_back(y);
          stack.push_back(y);
        } else if (kind[yi] == NodeRole::Leaf) {
          stamp[yi] = G;
          if (node(y).op == Op::Input) fg.inputs.push_back(y);
          else if (node(y).op == Op::Param) fg.params.push_back(y);
        } else if (kind[yi] == NodeRole::Member && group[yi] != G) {
          stamp[yi] = G;
          fg.inputs.push_back(y);
          outside[yi] = 1;
        }
      }
    }
  }

  // Builds the FusionGroups from the membership: recomputed nodes, inputs, params, outputs.
  std::vector<FusionGroup> finalize() {
    std::vector<FusionGroup> out(members.size());
    std::vector<int> stamp(n, -1);
    std::vector<char> outside(n, 0);
    for (size_t gi = 0; gi < members.size(); ++gi) {
      FusionGroup& fg = out[gi];
      const int G = static_cast<int>(gi);
      for (NodeId m : members[gi]) {
        group[static_cast<size_t>(m)] = G;
        stamp[static_cast<size_t>(m)] = G;
      }
      fg.nodes = members[gi];
      gather_operands(G, fg, stamp, outside);
      std::sort(fg.nodes.begin(), fg.nodes.end());
      std::sort(fg.inputs.begin(), fg.inputs.end());
      std::sort(fg.params.begin(), fg.params.end());
      fg.iter_shape = shapes[static_cast<size_t>(key[gi])];
      if (std::any_of(fg.nodes.begin(), fg.nodes.end(), [&](NodeId m) { return is_reduction(node(m).op); }))
        fg.reduce_mask = key_mask[static_cast<size_t>(key[gi])];
    }
    for (size_t gi = 0; gi < members.size(); ++gi)
      for (NodeId m : members[gi])
        if (out_bind[static_cast<size_t>(m)] || outside[static_cast<size_t>(m)]) out[gi].outputs.push_back(m);
    return out;
  }

  // Group gi of a reduction key, holding none of its reductions: its row values (its members not of
  // its iteration shape) join `into`, all at once (one planning round, not one per value). Returns
  // whether any was new.
  bool detach_row_values(size_t gi, const FusionGroup& fg, std::set<NodeId>& into) const {
    if (key_mask[static_cast<size_t>(key[gi])] == 0) return false;
    const size_t was = into.size();
    for (NodeId m : members[gi])
      if (shape_key(node(m).shape) != shape_key(fg.iter_shape)) into.insert(m);
    return into.size() > was;
  }

  // The pass ops (ReduceGroupInfo::pass_ops) of group gi's first k members as a group of their own
  // (the rest another): the groups built so (finalize), then the membership put back.
  int64_t prefix_pass_ops(size_t gi, size_t k) {
    const std::vector<std::vector<NodeId>> was_members = members;
    const std::vector<int> was_key = key, was_group = group;
    const auto at = static_cast<std::ptrdiff_t>(gi);
    members.insert(members.begin() + at + 1,
                   std::vector<NodeId>(members[gi].begin() + static_cast<std::ptrdiff_t>(k), members[gi].end()));
    members[gi].resize(k);
    key.insert(key.begin() + at + 1, key[gi]);
    const int64_t ops = analyze_reduce_group(g, finalize()[gi]).pass_ops;
    members = was_members;
    key = was_key;
    group = was_group;
    return ops;
  }

  // Where group gi, whose passes are over kMaxPassOps, splits: after the most members whose passes
  // fit (a chain of n amax steps makes about n / 34 kernels, not a power of two of halves), found
  // by bisection (the count grows with the members); one member at least.
  size_t pass_split(size_t gi) {
    size_t lo = 1, hi = members[gi].size() - 1;  // lo: fits, or is the least split
    while (lo < hi) {
      const size_t mid = lo + (hi - lo + 1) / 2;
      if (prefix_pass_ops(gi, mid) <= kMaxPassOps) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  // Splits every group over a cap in two (halves; a group over kMaxPassOps after the most members
  // that fit); returns true if any split happened.
  bool split_oversized(const std::vector<FusionGroup>& fgs) {
    std::vector<size_t> at(fgs.size(), 0);  // where group gi splits (0: it does not)
    std::vector<Opened> why(fgs.size());
    for (size_t gi = 0; gi < fgs.size(); ++gi) {
      const bool params = estimate_param_bytes(fgs[gi], out_bind) > opt.max_param_bytes;
      const bool ops = static_cast<int>(fgs[gi].nodes.size()) > opt.max_ops_per_group;
      const bool passes = !params && !ops && fgs[gi].reduce_mask && analyze_reduce_group(g, fgs[gi]).pass_ops > kMaxPassOps;
      if (!(params || ops || passes) || members[gi].size() < 2) continue;
      at[gi] = passes ? pass_split(gi) : members[gi].size() / 2;
      why[gi] = params ? Opened::SplitParams : ops ? Opened::SplitOps : Opened::SplitPasses;
    }
    std::vector<std::vector<NodeId>> nm;
    std::vector<Opened> no;
    std::vector<int> nk;
    bool any = false;
    for (size_t gi = 0; gi < fgs.size(); ++gi) {
      if (at[gi] > 0) {
        const size_t half = at[gi];
        nm.emplace_back(members[gi].begin(), members[gi].begin() + static_cast<std::ptrdiff_t>(half));
        nm.emplace_back(members[gi].begin() + static_cast<std::ptrdiff_t>(half), members[gi].end());
        no.push_back(opened[gi]);
        no.push_back(why[gi]);
        nk.push_back(key[gi]);
        nk.push_back(key[gi]);
        any = true;
      } else {
        nm.push_back(std::move(members[gi]));
        no.push_back(opened[gi]);
        nk.push_back(key[gi]);
      }
    }
    members = std::move(nm);
    opened = std::move(no);
    key = std::move(nk);
    return any;
  }

  // "axes [0, 1]" when other groups reduce group gi's iteration shape over other axes (its key is
  // a reduction key and another key has the same shape), else "".
  std::string other_axes(size_t gi) const {
    const size_t k = static_cast<size_t>(key[gi]);
    if (key_mask[k] == 0) return "";
    std::set<uint64_t> masks;
    for (int k2 : key)
      if (key_mask[static_cast<size_t>(k2)] != 0 && key_mask[static_cast<size_t>(k2)] != key_mask[k] &&
          shape_key(shapes[static_cast<size_t>(k2)]) == shape_key(shapes[k]))
        masks.insert(key_mask[static_cast<size_t>(k2)]);
    std::string s;
    for (uint64_t m : masks) {
      std::string axes;
      for (int64_t a : mask_axes(m)) axes += (axes.empty() ? "" : ", ") + std::to_string(a);
      s += (s.empty() ? "axes [" : " and [") + axes + "]";
    }
    return s;
  }

  std::string note(size_t gi, size_t num_shapes, const std::vector<int>& per_key) const {
    std::string s;
    size_t same_key = static_cast<size_t>(per_key[static_cast<size_t>(key[gi])]);
    switch (opened[gi]) {
      case Opened::FirstOfShape:
        if (same_key > 1) {
          // Opened first, but a move may have put a group split off it earlier in launch order.
          const bool launched_first = std::find(key.begin(), key.begin() + static_cast<std::ptrdiff_t>(gi), key[gi]) ==
                                      key.begin() + static_cast<std::ptrdiff_t>(gi);
          s = (launched_first ? "first of " : "one of ") + std::to_string(same_key) + " kernels over " +
              shape_to_string(shapes[static_cast<size_t>(key[gi])], &g) +
              (launched_first ? " (each later one says why it is split off)"
                              : " (opened first and moved later in launch order with a kernel it reads; each other "
                                "one says why it is split off)");
          if (num_shapes > 1) s += "; values of other shapes are in other groups";
          break;
        }
        s = num_shapes > 1 ? "iteration shape " + shape_to_string(shapes[static_cast<size_t>(key[gi])], &g) +
                                 ": values of other shapes are in other groups (one iteration space per kernel)"
                           : "one kernel over " + shape_to_string(shapes[static_cast<size_t>(key[gi])], &g);
        if (const std::string o = other_axes(gi); !o.empty())
          s = "iteration shape " + shape_to_string(shapes[static_cast<size_t>(key[gi])], &g) + ": reductions of it over " +
              o + " are another kernel (one set of reduced axes per kernel)";
        break;
      case Opened::Dependency:
        s = "new group: the previous group of this shape would read a value computed after it (cycle)";
        break;
      case Opened::MoveBudget:
        s = "new group: the previous group of this shape would read a value computed after it, and moving it after "
            "that value's group would pass the bound on such moves (planning time)";
        break;
      case Opened::OpCap:
      case Opened::SplitOps:
        s = "split: more than " + std::to_string(opt.max_ops_per_group) + " ops per kernel (register pressure)";
        break;
      case Opened::SplitParams:
        s = "split: kernel parameters over " + std::to_string(opt.max_param_bytes) + " bytes";
        break;
      case Opened::SplitPasses:
        s = fmt::format("split: the passes over each row would evaluate more than {} ops per element (each pass "
                        "computes its reduction's operand again; source and compile time grow with them)",
                        kMaxPassOps);
        break;
    }
    return s;
  }
};

}  // namespace

namespace {

// Whether the value at fault in a reduction group can leave reduction groups: an element or row
// value of the group (not a reduction), not detached before.
bool detachable(const Graph& g, const ReduceGroupInfo& info, const FusionGroup& fg, const std::set<NodeId>& detached) {
  const NodeId bad = info.problem_node;
  return bad != kNoNode && !is_reduction(g.node(bad).op) && !info.reductions.empty() &&
         std::find(fg.nodes.begin(), fg.nodes.end(), bad) != fg.nodes.end() && !detached.count(bad);
}

// The groups of `g` with the reductions of `isolated` planned alone and the values of `detached`
// outside reduction groups. For every group that cannot run as one kernel (ir/reduce_group.h):
// the value it names leaves reduction groups when it is an element or row value of the group (x -
// amax(x, -1) without keepdim reads the row values by NumPy's right alignment: an elementwise
// kernel computes it, and a softmax of the same x stays one kernel); otherwise the group's
// reductions are planned alone. A group of a reduction key left with none of its reductions (the
// op cap or the parameter split put them in an earlier group) that writes a row value: with
// `detach_stranded`, its row values leave the key (`stranded` is set), else the key's reductions
// are planned alone. Returns false when it changed either set.
bool plan_groups(const Graph& g, std::set<NodeId>& isolated, std::set<NodeId>& detached, Planner& p,
                 std::vector<FusionGroup>& fgs, bool detach_stranded, bool& stranded) {
  p.classify();
  p.form_groups();
  fgs = p.finalize();
  for (int round = 0; round < 64 && p.split_oversized(fgs); ++round) fgs = p.finalize();
  const size_t before = isolated.size() + detached.size();
  std::string problem;
  for (size_t gi = 0; gi < fgs.size(); ++gi) {
    const ReduceGroupInfo info = analyze_reduce_group(g, fgs[gi]);
    if (info.problem.empty()) continue;
    if (problem.empty()) problem = fmt::format("group {}: {}", gi, info.problem);
    if (detach_stranded && info.reductions.empty() && p.detach_row_values(gi, fgs[gi], detached)) {
      stranded = true;
      continue;
    }
    if (detachable(g, info, fgs[gi], detached)) {
      detached.insert(info.problem_node);
      continue;
    }
    for (NodeId r : p.key_reductions[static_cast<size_t>(p.key[gi])]) isolated.insert(r);
    for (NodeId r : info.reductions) isolated.insert(r);
  }
  // Each round detaches a value or isolates a reduction, or the groups hold.
  FJ_CHECK(problem.empty() || isolated.size() + detached.size() > before,
           "plan_fusion: a group cannot run as one kernel: " + problem);
  const bool ok = problem.empty();
  return ok;
}

// What the row cache does with the kept values (ReduceGroupInfo::kept_values): holds them, so the
// epilogue reads what a pass computed, or why not.
std::string kept_note(const Graph& g, const FusionGroup& fg, const ReduceGroupInfo& info, const RowSplit& split,
                      const SplitRules& rules) {
  if (info.kept_values.empty() || !rules.kept_values) return "";
  std::string names;
  for (NodeId v : info.kept_values) names += (names.empty() ? "" : ", ") + value_name(g, v);
  if (split.values_on_chip) return fmt::format(" and {}, which a pass computes and the epilogue reads", names);
  std::vector<int> all = row_cache_element_sizes(g, info);
  for (int size : kept_value_sizes(g, info)) all.push_back(size);
  return fmt::format("; the epilogue computes {} again: a value a pass computes is kept on chip for the epilogue only "
                     "while it fits with the inputs' rows in {} B (it saves arithmetic, not memory traffic), and with "
                     "{} the row cache would take {} B",
                     names, std::min(rules.row_cache_limit, kKeptValuesCacheBytes),
                     info.kept_values.size() == 1 ? "it" : "them",
                     row_cache_bytes(all, reduce_length(fg.iter_shape, fg.reduce_mask)));
}

// Why the row cache limit is what it is, where a row of `bytes` does not fit it: a larger limit
// asked for that would have held it but the GPU's caps; the default without a GPU (`fusejit plan`
// on a GPU machine plans without the GPU unless given its arch).
std::string default_limit_note(const SplitRules& rules, int64_t bytes) {
  if (rules.capped_from >= bytes)  // the limit asked for would have held the row
    return fmt::format(" (the limit asked for, {} B, capped by the shared memory a block of the GPU may opt in to)",
                       rules.capped_from);
  return !rules.short_rows && rules.row_cache_limit == kRowCacheBytes
             ? " (48 KiB, the limit without a GPU; `plan --arch sm_90` plans for one)"
             : "";
}

// The row cache holding only the rows that differ per row (RowCacheUse mode 3).
std::string shared_rows_note(const Graph& g, const FusionGroup& fg, const ReduceGroupInfo& info, int64_t all_bytes,
                             const RowSplit& split, const SplitRules& rules) {
  std::string kept, shared;
  for (size_t k = 0; k < info.reread_inputs.size(); ++k)
    (k < info.per_row_inputs ? kept : shared) +=
        ((k < info.per_row_inputs ? kept : shared).empty() ? "" : ", ") + value_name(g, info.reread_inputs[k]);
  const bool one = info.reread_inputs.size() - info.per_row_inputs == 1;
  return fmt::format(", the row kept on chip ({} B of shared memory per block for {}) but for {}, the same in every row, "
                     "which each pass reads from memory (L2 serves every block the same bytes): with {} the row cache "
                     "would take {} B, over the {} B row cache{}{}",
                     split.row_cache_bytes, kept, shared, one ? "it" : "them", all_bytes, rules.row_cache_limit,
                     default_limit_note(rules, all_bytes), kept_note(g, fg, info, split, rules));
}

std::string reread_note(const Graph& g, const FusionGroup& fg, const ReduceGroupInfo& info, const RowSplit& split,
                        const SplitRules& rules) {
  const int64_t bytes = row_cache_bytes(row_cache_element_sizes(g, info), reduce_length(fg.iter_shape, fg.reduce_mask));
  const int64_t rows = num_elements(reduced_shape(fg.iter_shape, fg.reduce_mask, false));
  if (info.reread_inputs.empty() || bytes == 0 || rows == 0) return "";  // nothing read twice, or nothing to read
  std::string names;  // the inputs the passes share
  for (NodeId i : info.reread_inputs) names += (names.empty() ? "" : ", ") + value_name(g, i);
  if (split.shared_rows_reread) return shared_rows_note(g, fg, info, bytes, split, rules);
  if (split.row_cache_bytes > 0)
    return fmt::format(", the row kept on chip ({} B of shared memory per block for {}{})", split.row_cache_bytes, names,
                       kept_note(g, fg, info, split, rules));
  if (!split.block_rows) return fmt::format(", each reading {} from memory (a column kernel keeps no column on chip)", names);
  if (split.blocks_per_row > 1) return fmt::format(", each reading {} from memory (a split row is not kept on chip)", names);
  if (split.short_rows)
    return fmt::format(", each reading {} from memory: a short row (at most {} elements and {} B) is re-read from "
                       "L1/L2 on the vector path, not kept on chip", names, kShortRowElements, kShortRowBytes);
  if (!rules.row_cache) return fmt::format(", each reading {} from memory (the row cache is off)", names);
  if (bytes == INT64_MAX)  // saturated (row_cache_bytes): no memory holds it
    return fmt::format(", each reading {} from memory: a row of {} takes more than 2^63 - 1 bytes", names, names);
  int64_t exact = 0;  // the rows' bytes before rounding each up to 16
  for (int size : row_cache_element_sizes(g, info))
    exact = add_bytes(exact, mul_bytes(reduce_length(fg.iter_shape, fg.reduce_mask), size));
  const std::string rounded = exact == bytes ? "" : fmt::format(" ({} B, each input's row rounded up to 16)", exact);
  return fmt::format(", each reading {} from memory: a row of {} takes {} B{}, over the {} B row cache{}", names, names,
                     bytes, rounded, rules.row_cache_limit, default_limit_note(rules, bytes));
}

// "reduces axes [1] of [N, 4096] (2 reductions: 3 passes over each row, the row kept on chip (16384 B
// of shared memory per block); one block per row at these sizes); " for a reduction group.
std::string reduction_note(const Graph& g, const FusionGroup& fg, const SplitRules& rules) {
  const ReduceGroupInfo info = analyze_reduce_group(g, fg);
  if (info.reductions.empty()) return "";
  std::string axes;
  for (int64_t a : mask_axes(fg.reduce_mask)) axes += (axes.empty() ? "" : ", ") + std::to_string(a);
  const size_t passes = info.passes.size() + (info.epilogue() ? 1 : 0);
  const RowSplit split = row_split_at(g, fg, info, rules);
  // Column kernels: rows side by side, a group of up to rpb rows a block (and its split parts). A
  // column kernel's rows are columns of the tensor (the innermost axis is kept): the note says so.
  const char* row = split.block_rows ? "row" : "column";
  const int64_t rows = num_elements(reduced_shape(fg.iter_shape, fg.reduce_mask, false));
  const int64_t rpb = split.block_rows ? 1 : column_rows_per_block(g, info), units = ceil_div(rows, rpb);
  std::string how = split.block_rows ? "one block per row at these sizes"
                                     : fmt::format("columns side by side, up to {} a block ({} block{} at these sizes)",
                                                   rpb, units, units == 1 ? "" : "s");
  if (split.blocks_per_row > 1)
    how = fmt::format("{}{} blocks per {} at these sizes, {} launches ({} blocks)",
                      split.block_rows ? "" : fmt::format("columns side by side, up to {} a block, ", rpb),
                      split.blocks_per_row, row, split.launches, units * split.blocks_per_row);
  const size_t n = info.reductions.size();
  const std::string count = fmt::format("{} reduction{}", n, n == 1 ? "" : "s") +
                            (info.same_as.empty() ? "" : fmt::format(", {} distinct", n - info.same_as.size()));
  const std::string reads = fmt::format("{} pass{} over each {}{}", passes, passes == 1 ? "" : "es", row,
                                        info.early_outputs ? " (the element outputs written in it)" : "") +
                            reread_note(g, fg, info, split, rules);
  return fmt::format("reduces axes [{}] of {} ({}: {}; {}); ", axes, shape_to_string(fg.iter_shape, &g), count, reads, how);
}

}  // namespace

namespace {

// One way of planning: the groups, and the planner and sets they came from.
struct Attempt {
  std::set<NodeId> isolated, detached;
  std::unique_ptr<Planner> planner;
  std::vector<FusionGroup> fgs;
  bool stranded = false;  // a reduction key's group without its reductions had its row values detached
};

// A group that mixes values a reduction kernel cannot compute together (ir/reduce_group.h) is
// planned again without the value at fault, or with its reductions alone, until every group
// holds: at most one round per node.
std::unique_ptr<Attempt> attempt(const Graph& g, const PlanOptions& options, bool detach_stranded, bool moves) {
  auto a = std::make_unique<Attempt>();
  do {
    a->planner = std::make_unique<Planner>(g, options, a->isolated, a->detached, moves);
  } while (!plan_groups(g, a->isolated, a->detached, *a->planner, a->fgs, detach_stranded, a->stranded));
  // Before the cost, which counts short rows re-read where they are not read as vectors, and the
  // note, which says where rows live.
  for (FusionGroup& fg : a->fgs)
    if (options.rules.short_rows && options.vector_rows && fg.reduce_mask != 0) fg.vector_rows = options.vector_rows(fg);
  return a;
}

// The predicted bytes of an attempt's kernels, then their count: what choosing between two compares.
std::pair<int64_t, int> cost(const Graph& g, const Attempt& a, const SplitRules& rules) {
  const PlanTotals t = plan_totals(g, a.fgs, rules);
  return {t.bytes(), t.kernels};
}

// Where a split left a reduction key's row values without their reductions, detaching them
// usually keeps the reductions fused, but can cost more than planning the key's reductions alone
// (another key then claims its values): both are planned, the cheaper kept.
std::unique_ptr<Attempt> cheaper(const Graph& g, const PlanOptions& options, bool moves) {
  std::unique_ptr<Attempt> a = attempt(g, options, true, moves);
  if (a->stranded) {
    std::unique_ptr<Attempt> b = attempt(g, options, false, moves);
    if (cost(g, *b, options.rules) < cost(g, *a, options.rules)) a = std::move(b);
  }
  return a;
}

}  // namespace

Plan plan_fusion(const Graph& g, const PlanOptions& options) {
  // Moving a group after a later one it comes to read (move_after) fuses what the order of
  // independent statements split, but can strand a reduction group's values or block a later join
  // (a tester's graphs: var then an unrelated amin moved 4x the bytes): planned with and without
  // moves, the cheaper kept, the plan without them on a tie.
  std::unique_ptr<Attempt> a = cheaper(g, options, false);
  if (a->planner->wanted_move) {
    std::unique_ptr<Attempt> b = cheaper(g, options, true);
    if (cost(g, *b, options.rules) < cost(g, *a, options.rules)) a = std::move(b);
  }
  std::vector<FusionGroup>& fgs = a->fgs;
  Planner& p = *a->planner;
  std::vector<int> per_key(p.shapes.size(), 0);
  for (int k : p.key) ++per_key[static_cast<size_t>(k)];
  std::vector<int> keys = p.key;
  std::sort(keys.begin(), keys.end());
  size_t num_keys = static_cast<size_t>(std::unique(keys.begin(), keys.end()) - keys.begin());
  Plan plan;
  plan.fused = true;
  plan.rules = options.rules;
  for (size_t gi = 0; gi < fgs.size(); ++gi) {
    fgs[gi].note = reduction_note(g, fgs[gi], options.rules) + p.note(gi, num_keys, per_key);
    for (NodeId o : fgs[gi].outputs) plan.materialized.push_back(o);
    plan.groups.push_back(std::move(fgs[gi]));
  }
  append_leaf_output_groups(g, plan);
  std::sort(plan.materialized.begin(), plan.materialized.end());
  return plan;
}

}  // namespace fusejit::ir
