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

std::vector<AxisSlip> reduced_axis_slips(const Graph& g) {
  // from[v]: the reduction without keepdim that v is computed from elementwise at its shape
  // (through operands of that shape, constants aside), or kNoNode; one pass over the graph (a
  // search per operand, as keepdim_hint's, took 1.8 s more to parse a 200,000-op chain).
  std::vector<NodeId> from(static_cast<size_t>(g.size()), kNoNode);
  std::vector<AxisSlip> out;
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (is_reduction(n.op)) {
      if (!n.red.keepdim && n.red.axes != 0) from[static_cast<size_t>(id)] = id;
      continue;
    }
    for (int a = 0; a < n.nargs && from[static_cast<size_t>(id)] == kNoNode; ++a) {
      const Node& an = g.node(n.arg(a));
      if (an.op != Op::Const && an.shape == n.shape) from[static_cast<size_t>(id)] = from[static_cast<size_t>(n.arg(a))];
    }
    for (int a = 0; a < n.nargs && n.nargs > 1 && (out.empty() || out.back().node != id); ++a) {
      const NodeId r = from[static_cast<size_t>(n.arg(a))];
      if (r == kNoNode) continue;
      const Shape& x = g.node(g.node(r).arg(0)).shape;
      for (int b = 0; b < n.nargs; ++b) {
        if (b == a || g.node(n.arg(b)).shape != x) continue;
        if (const auto [f, t] = misaligned_axis(x, g.node(r)); f >= 0) {
          out.push_back({id, r, f, t});
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace fusejit::ir
