// The unfused plan, traffic accounting and the kernel parameter estimate (ir/plan.h).
#include "ir/plan.h"

#include "ir/reduce.h"
#include "ir/reduce_group.h"

#include <algorithm>
#include <span>
#include <vector>

namespace fusejit::ir {
namespace {

int64_t bytes_of(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  return mul_bytes(num_elements(n.shape), dtype_size(n.dtype));
}

}  // namespace

int64_t add_bytes(int64_t a, int64_t b) {
  int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

int64_t mul_bytes(int64_t bytes, int64_t times) {
  int64_t r = 0;
  return __builtin_mul_overflow(bytes, times, &r) ? INT64_MAX : r;
}

int64_t GroupTraffic::bytes() const { return add_bytes(read_bytes, write_bytes); }

std::vector<int> output_bindings(const Graph& g) {
  std::vector<int> n(static_cast<size_t>(g.size()), 0);
  for (const OutputDecl& o : g.outputs) ++n[static_cast<size_t>(o.node)];
  return n;
}

bool writes_nothing(const Graph& g, const FusionGroup& group) {
  return std::all_of(group.outputs.begin(), group.outputs.end(),
                     [&](NodeId id) { return num_elements(g.node(id).shape) == 0; });
}

bool launches_nothing(const Graph& g, const FusionGroup& group) {
  const Shape launched = group.reduce_mask ? reduced_shape(group.iter_shape, group.reduce_mask, false) : group.iter_shape;
  return num_elements(launched) == 0 || writes_nothing(g, group);
}

namespace {
// A reduction kernel whose row is not kept on chip reads its re-read inputs once per pass, but for
// short rows (L1/L2 serve the re-reads: kShortRowElements).
int64_t reread_bytes(const Graph& g, const FusionGroup& group, const ReduceGroupInfo& info, const SplitRules& rules) {
  const RowSplit split = row_split_at(g, group, info, rules);
  if ((split.row_cache_bytes > 0 && !split.shared_rows_reread) || split.short_rows) return 0;
  // With only the rows that differ per row on chip, the broadcast ones are re-read (each counted
  // at its own size: one row, which L2 serves to every block).
  int64_t bytes = 0;
  const size_t first = split.shared_rows_reread ? info.per_row_inputs : 0;
  for (size_t k = first; k < info.reread_inputs.size(); ++k) {
    const NodeId id = info.reread_inputs[k];
    bytes = add_bytes(bytes, mul_bytes(bytes_of(g, id), info.input_passes.at(id) - 1));
  }
  return bytes;
}

// Whether a reduction kernel whose rows have length 0 reads group input `id`: only a row-scope load
// (an operand of a row value other than a reduction: an epilogue's per-row bias), or an input no
// pass loads per element; one loaded per element only is not read.
bool read_by_empty_rows(const Graph& g, const ReduceGroupInfo& info, NodeId id) {
  if (!info.input_passes.contains(id)) return true;
  for (NodeId r : info.row) {
    const Node& n = g.node(r);
    if (!is_reduction(n.op) && std::find(n.args.begin(), n.args.begin() + n.nargs, id) != n.args.begin() + n.nargs)
      return true;
  }
  return false;
}

// group_traffic with `copies[k]`: the buffers group output k is written to.
GroupTraffic traffic(const Graph& g, const FusionGroup& group, const SplitRules& rules, std::span<const int> copies) {
  GroupTraffic t;
  if (launches_nothing(g, group)) return t;
  for (size_t k = 0; k < group.outputs.size(); ++k)
    t.write_bytes = add_bytes(t.write_bytes, mul_bytes(bytes_of(g, group.outputs[k]), copies[k]));
  const ReduceGroupInfo info = group.reduce_mask ? analyze_reduce_group(g, group) : ReduceGroupInfo{};
  // Rows of length 0 load nothing per element (a broadcast input was counted over an empty
  // iteration), only their row-scope values (an epilogue's per-row bias).
  const bool empty_rows = num_elements(group.iter_shape) == 0;
  for (NodeId id : group.inputs)
    if (!empty_rows || read_by_empty_rows(g, info, id)) t.read_bytes = add_bytes(t.read_bytes, bytes_of(g, id));
  if (group.reduce_mask == 0 || !info.problem.empty() || empty_rows) return t;
  t.reread_bytes = reread_bytes(g, group, info, rules);
  t.read_bytes = add_bytes(t.read_bytes, t.reread_bytes);
  return t;
}
}  // namespace

GroupTraffic group_traffic(const Graph& g, const FusionGroup& group, const SplitRules& rules) {
  return group_traffic(g, group, rules, output_bindings(g));
}

GroupTraffic group_traffic(const Graph& g, const FusionGroup& group, const SplitRules& rules, std::span<const int> bindings) {
  std::vector<int> copies;
  for (NodeId id : group.outputs) copies.push_back(std::max(1, bindings[static_cast<size_t>(id)]));
  return traffic(g, group, rules, copies);
}

namespace {
// The larger of the kernel's two entries (jit/kernel_abi.h): every input and output has a stride
// per dim in the strided entry, a broadcast input one per collapsed dim in the fast one.
// `copies(k)`: the buffers output k is written to.
template <class Copies>
int64_t param_bytes(const FusionGroup& group, Copies copies) {
  const int64_t rank = static_cast<int64_t>(group.iter_shape.size());
  int64_t bytes = 64 + 16 * rank + 8 * static_cast<int64_t>(group.params.size());
  bytes += 8 * (1 + rank) * static_cast<int64_t>(group.inputs.size());
  for (size_t k = 0; k < group.outputs.size(); ++k) bytes += 8 * (1 + rank) * copies(k);
  return bytes;
}
}  // namespace

int64_t estimate_param_bytes(const Graph& g, const FusionGroup& group) {
  return estimate_param_bytes(group, output_bindings(g));
}

int64_t estimate_param_bytes(const FusionGroup& group, std::span<const int> bindings) {
  return param_bytes(group, [&](size_t k) { return std::max(1, bindings[static_cast<size_t>(group.outputs[k])]); });
}

Plan plan_unfused(const Graph& g) {
  Plan p;
  p.fused = false;
  // Only nodes some output depends on are computed (the rewriter's DCE does the same).
  std::vector<char> live(static_cast<size_t>(g.size()), 0);
  for (const OutputDecl& o : g.outputs) live[static_cast<size_t>(o.node)] = 1;
  for (NodeId id = g.size() - 1; id >= 0; --id)
    if (live[static_cast<size_t>(id)])
      for (int k = 0; k < g.node(id).nargs; ++k) live[static_cast<size_t>(g.node(id).args[static_cast<size_t>(k)])] = 1;
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (!live[static_cast<size_t>(id)] || is_leaf(n.op)) continue;
    FusionGroup grp;
    grp.nodes = {id};
    for (int k = 0; k < n.nargs; ++k) {
      NodeId a = n.args[static_cast<size_t>(k)];
      Op op = g.node(a).op;
      if (op == Op::Param) grp.params.push_back(a);
      else if (op != Op::Const) grp.inputs.push_back(a);
    }
    std::sort(grp.inputs.begin(), grp.inputs.end());
    grp.inputs.erase(std::unique(grp.inputs.begin(), grp.inputs.end()), grp.inputs.end());
    std::sort(grp.params.begin(), grp.params.end());
    grp.params.erase(std::unique(grp.params.begin(), grp.params.end()), grp.params.end());
    grp.outputs = {id};
    grp.iter_shape = n.shape;
    if (is_reduction(n.op)) {  // a reduction iterates over its operand
      grp.iter_shape = g.node(n.arg(0)).shape;
      grp.reduce_mask = n.red.axes;
    }
    grp.note = "unfused: one kernel per op";
    p.groups.push_back(std::move(grp));
    p.materialized.push_back(id);
  }
  append_leaf_output_groups(g, p);
  std::sort(p.materialized.begin(), p.materialized.end());
  return p;
}

void append_leaf_output_groups(const Graph& g, Plan& p) {
  std::vector<NodeId> done;
  for (const OutputDecl& o : g.outputs) {
    const Node& n = g.node(o.node);
    if (!is_leaf(n.op) || std::find(done.begin(), done.end(), o.node) != done.end()) continue;
    done.push_back(o.node);
    FusionGroup grp;
    if (n.op == Op::Input) grp.inputs = {o.node};
    if (n.op == Op::Param) grp.params = {o.node};
    grp.outputs = {o.node};
    grp.iter_shape = n.shape;
    grp.note = n.op == Op::Input ? "copy: output '" + o.name + "' is input '" + n.name + "' after rewrites"
                                 : "fill: output '" + o.name + "' is a " + (n.op == Op::Param ? "param" : "constant") +
                                       " after rewrites";
    p.groups.push_back(std::move(grp));
    p.materialized.push_back(o.node);
  }
}

}  // namespace fusejit::ir
