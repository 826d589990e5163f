#include "ir/dim_alignment.h"

#include "ir/reduce.h"

namespace fusejit::ir {

std::vector<DimAlignment> mixed_dim_alignments(const Graph& g) {
  std::vector<DimAlignment> out;
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.nargs < 2 || is_reduction(n.op)) continue;
    for (size_t j = 0; j < n.shape.size(); ++j) {  // j: position counted from the right
      int32_t first = -1;
      for (int k = 0; k < n.nargs; ++k) {
        const Shape& s = g.node(n.arg(k)).shape;
        if (j >= s.size()) continue;
        const int32_t sym = s[s.size() - 1 - j].sym;
        if (sym < 0) continue;
        if (first < 0) first = sym;
        else if (sym != first) out.push_back({id, first, sym});
      }
    }
  }
  return out;
}

namespace {
// The first axis of `x` that reduction `r` keeps and that lines up with another axis of `x` where
// its result (rank: the kept axes) broadcasts against a value of shape `x`: {from, to}, or {-1, -1}.
std::pair<int, int> misaligned_axis(const Shape& x, const Node& r) {
  std::vector<int> kept;
  for (size_t d = 0; d < x.size(); ++d)
    if (!((r.red.axes >> d) & 1)) kept.push_back(static_cast<int>(d));
  for (size_t i = 0; i < kept.size(); ++i) {
    const int to = static_cast<int>(x.size() - kept.size() + i);
    if (kept[i] != to && x[static_cast<size_t>(kept[i])].size != 1 && x[static_cast<size_t>(to)].size != 1)
      return {kept[i], to};
  }
  return {-1, -1};
}
}  // namespace

namespace {
// Whether `a` and `b` are one shape but for leading size-1 dims, which move no axis: they align
// from the right.
bool same_from_right(const Shape& a, const Shape& b) {
  auto lead = [](const Shape& s) {
    size_t i = 0;
    while (i < s.size() && s[i].size == 1) ++i;
    return i;
  };
  const size_t i = lead(a), j = lead(b);
  if (a.size() - i != b.size() - j) return false;
  for (size_t k = 0; i + k < a.size(); ++k)
    if (a[i + k] != b[j + k]) return false;
  return true;
}

// The reduction without keepdim that node `id` is computed from elementwise at its shape (through
// operands of that shape or with leading 1s, constants aside), given `from` of the nodes before it;
// kNoNode if none.
// One whose kept axes would line up with others of its operand's shape comes first, so that
// `sum(x, 0) + amax(x, -1)` keeps amax's slip whatever the operands' order.
NodeId reduction_behind(const Graph& g, const std::vector<NodeId>& from, NodeId id) {
  const Node& n = g.node(id);
  if (is_reduction(n.op)) return !n.red.keepdim && n.red.axes != 0 ? id : kNoNode;
  NodeId found = kNoNode;
  for (int a = 0; a < n.nargs; ++a) {
    const Node& an = g.node(n.arg(a));
    const NodeId r = from[static_cast<size_t>(n.arg(a))];
    if (r == kNoNode || an.op == Op::Const || !same_from_right(an.shape, n.shape)) continue;
    if (misaligned_axis(g.node(g.node(r).arg(0)).shape, g.node(r)).first >= 0) return r;
    if (found == kNoNode) found = r;
  }
  return found;
}

// The first slip at elementwise node `id`: an operand from reduction r broadcast against another
// operand of r's operand's shape with a kept axis misaligned; {} (node kNoNode) if none.
AxisSlip slip_at(const Graph& g, const std::vector<NodeId>& from, NodeId id) {
  const Node& n = g.node(id);
  for (int a = 0; a < n.nargs; ++a) {
    const NodeId r = from[static_cast<size_t>(n.arg(a))];
    if (r == kNoNode) continue;
    const Shape& x = g.node(g.node(r).arg(0)).shape;
    for (int b = 0; b < n.nargs; ++b)
      if (b != a && g.node(n.arg(b)).shape == x)
        if (const auto [f, t] = misaligned_axis(x, g.node(r)); f >= 0) return {id, r, f, t};
  }
  return {};
}
}  // namespace

std::vector<AxisSlip> reduced_axis_slips(const Graph& g) {
  // One pass over the graph (a search per operand, as keepdim_hint's, took 1.8 s more to parse a
  // 200,000-op chain).
  std::vector<NodeId> from(static_cast<size_t>(g.size()), kNoNode);
  std::vector<AxisSlip> out;
  for (NodeId id = 0; id < g.size(); ++id) {
    from[static_cast<size_t>(id)] = reduction_behind(g, from, id);
    if (g.node(id).nargs < 2 || is_reduction(g.node(id).op)) continue;
    if (const AxisSlip s = slip_at(g, from, id); s.node != kNoNode) out.push_back(s);
  }
  return out;
}

}  // namespace fusejit::ir
