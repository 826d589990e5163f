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

}  // namespace fusejit::ir
