#include "ir/passes/dce.h"

namespace fusejit::ir {

namespace {

// Per node: does some output depend on it? `keep_leaves`: count inputs and params as live.
std::vector<char> live_nodes(const Graph& g, bool keep_leaves) {
  std::vector<char> live(static_cast<size_t>(g.size()), 0);
  for (const OutputDecl& o : g.outputs) live[static_cast<size_t>(o.node)] = 1;
  if (keep_leaves) {
    for (NodeId id : g.inputs) live[static_cast<size_t>(id)] = 1;
    for (const ParamDecl& p : g.params) live[static_cast<size_t>(p.node)] = 1;
  }
  // Reverse topological sweep: operands of a live node are live.
  for (NodeId id = g.size() - 1; id >= 0; --id) {
    if (!live[static_cast<size_t>(id)]) continue;
    const Node& n = g.node(id);
    for (int k = 0; k < n.nargs; ++k) live[static_cast<size_t>(n.args[static_cast<size_t>(k)])] = 1;
  }
  return live;
}

}  // namespace

std::vector<NodeId> unused_inputs(const Graph& g) {
  std::vector<char> live = live_nodes(g, false);
  std::vector<NodeId> out;
  for (NodeId id : g.inputs)
    if (!live[static_cast<size_t>(id)]) out.push_back(id);
  return out;
}

Graph eliminate_dead_code(const Graph& g, int* removed) {
  std::vector<char> live = live_nodes(g, true);
  Graph out = g.header();
  std::vector<NodeId> map(static_cast<size_t>(g.size()), kNoNode);
  int dropped = 0;
  for (NodeId id = 0; id < g.size(); ++id) {
    if (!live[static_cast<size_t>(id)]) { ++dropped; continue; }
    Node n = g.node(id);
    for (int k = 0; k < n.nargs; ++k) n.args[static_cast<size_t>(k)] = map[static_cast<size_t>(n.args[static_cast<size_t>(k)])];
    map[static_cast<size_t>(id)] = out.size();
    out.nodes.push_back(std::move(n));
  }
  for (NodeId id : g.inputs) out.inputs.push_back(map[static_cast<size_t>(id)]);
  out.input_ranges = g.input_ranges;
  for (ParamDecl p : g.params) {
    p.node = map[static_cast<size_t>(p.node)];
    out.params.push_back(p);
  }
  for (OutputDecl o : g.outputs) {
    o.node = map[static_cast<size_t>(o.node)];
    out.outputs.push_back(o);
  }
  if (removed) *removed = dropped;
  return out;
}

}  // namespace fusejit::ir
