#include "ir/passes/plan_report.h"

#include "ir/reduce.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/names.h"
#include "ir/printer.h"
#include "ir/reduce_group.h"

namespace fusejit::ir {
namespace {

bool reduction_group(const Graph& g, const FusionGroup& grp) {
  return std::any_of(grp.nodes.begin(), grp.nodes.end(), [&](NodeId id) { return is_reduction(g.node(id).op); });
}

// "[0, 2]": the axes of a mask.
std::string axes_text(uint64_t mask) { return fmt::format("[{}]", fmt::join(mask_axes(mask), ", ")); }

// ", reducing axes [1]" for a reduction group, "" otherwise.
std::string reduces_text(const Graph& g, const FusionGroup& grp) {
  return reduction_group(g, grp) ? ", reducing axes " + axes_text(grp.reduce_mask) : "";
}

std::string list(const Graph& g, const std::vector<NodeId>& ids) {
  std::string s;
  for (size_t k = 0; k < ids.size(); ++k) s += (k ? ", " : "") + value_name(g, ids[k]);
  return s.empty() ? "-" : s;
}

// The exact count, and the rounded one when it is shorter: "134234112 B (134.23 MB)".
std::string bytes_text(int64_t b) {
  return b >= 1000 && b != INT64_MAX ? fmt::format("{} B ({})", b, format_bytes(b)) : format_bytes(b);
}

std::string dot_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\n') { o += "\\n"; continue; }
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

}  // namespace

std::string value_name(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (!n.name.empty()) return n.name;
  if (n.op == Op::Const) return print_scalar(n.value);
  return "%" + std::to_string(id);
}

std::string node_text(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  std::string t = value_name(g, id) + " = " + std::string(op_name(n.op)) + "(";
  for (int k = 0; k < n.nargs; ++k) t += (k ? ", " : "") + value_name(g, n.args[static_cast<size_t>(k)]);
  if (n.op == Op::Cast) t += ", " + std::string(dtype_name(n.dtype));
  if (is_reduction(n.op)) t += reduce_args_text(n.op, n.red, g.node(n.arg(0)).shape.size());  // as the printer: axes, keepdim
  return t + ")";
}

std::string format_bytes(int64_t b) {
  // A count the traffic model saturated (plan.cpp) is a bound, not a count: said so.
  if (b == INT64_MAX) return "2^63 - 1 B or more (the count saturated)";
  // The unit by the value as rounded to 2 decimals: 999,995 B is "1.00 MB", not "1000.00 kB".
  const double v = static_cast<double>(b);
  if (b >= 999'995'000) return fmt::format("{:.2f} GB", v / 1e9);
  if (b >= 999'995) return fmt::format("{:.2f} MB", v / 1e6);
  if (b >= 1000) return fmt::format("{:.2f} kB", v / 1e3);
  return fmt::format("{} B", b);
}

PlanTotals plan_totals(const Graph& g, const Plan& p) { return plan_totals(g, p.groups, p.rules); }

PlanTotals plan_totals(const Graph& g, std::span<const FusionGroup> groups, const SplitRules& rules) {
  PlanTotals t;
  t.kernels = static_cast<int>(groups.size());
  const std::vector<int> bindings = output_bindings(g);
  for (const FusionGroup& grp : groups) {
    GroupTraffic tr = group_traffic(g, grp, rules, bindings);
    t.read_bytes = add_bytes(t.read_bytes, tr.read_bytes);
    t.write_bytes = add_bytes(t.write_bytes, tr.write_bytes);
  }
  return t;
}

double traffic_ratio(const PlanTotals& fused, const PlanTotals& unfused) {
  if (unfused.bytes() == 0) return 1.0;
  return static_cast<double>(fused.bytes()) / static_cast<double>(unfused.bytes());
}

double predicted_speedup(int64_t fused_bytes, int64_t unfused_bytes) {
  if (fused_bytes == 0) return unfused_bytes == 0 ? 1.0 : std::numeric_limits<double>::infinity();
  return static_cast<double>(unfused_bytes) / static_cast<double>(fused_bytes);
}

std::string kernel_name(const Graph& g, size_t index, std::span<const std::string> kernel_names) {
  if (index < kernel_names.size()) return kernel_names[index];
  return "fj_" + identifier_part(g.name) + "_k" + std::to_string(index);
}

// What the unfused plan runs: every op of the graph as written (before rewrites: what a framework
// without fusejit would launch), or of rw.graph.
std::string unfused_label(const Graph* unfused_graph) {
  return unfused_graph ? " (one kernel per op of the graph as written, before rewrites)" : " (one kernel per op)";
}

namespace {
// Byte counts saturate (ir::add_bytes): past 2^63 - 1 no ratio means anything.
bool saturated(const PlanTotals& t) { return t.bytes() == std::numeric_limits<int64_t>::max(); }

// traffic_ratio for the JSON report: null where the text says "unknown" (byte counts past 2^63 - 1,
// or none unfused).
nlohmann::json ratio_json(const PlanTotals& f, const PlanTotals& u) {
  if (saturated(f) || saturated(u) || (u.bytes() == 0 && f.bytes() > 0)) return nullptr;
  return traffic_ratio(f, u);
}

// "predicted traffic fused/unfused: 0.250 (predicted speedup 4.00x)", the last line of both formats.
std::string predicted_line(const PlanTotals& f, const PlanTotals& u) {
  if (saturated(f) || saturated(u))
    return "predicted traffic fused/unfused: unknown (the byte counts pass 2^63 - 1 at these dims)\n";
  if (f.bytes() == 0 && u.bytes() > 0)
    return fmt::format("predicted traffic fused/unfused: 0.000 (the fused plan moves no bytes, the unfused {} B)\n",
                       u.bytes());
  return fmt::format("predicted traffic fused/unfused: {:.3f} (predicted speedup {:.2f}x)\n", traffic_ratio(f, u),
                     predicted_speedup(f.bytes(), u.bytes()));
}
}  // namespace

std::string format_plan_summary(const RewriteResult& rw, const Plan& fused, const Plan& unfused, const Graph* unfused_graph) {
  const Graph& g = rw.graph;
  PlanTotals f = plan_totals(g, fused), u = plan_totals(unfused_graph ? *unfused_graph : g, unfused);
  std::string s = fmt::format("rewrites ({} mode): {} fired in {} iteration{}{}\n", rw.fast_math ? "fast-math" : "strict",
                              rw.total_fires(), rw.iterations, rw.iterations == 1 ? "" : "s",
                              rw.hit_cap ? " (iteration cap hit)" : "");
  s += fmt::format("fused plan:   {} kernel{}, reads {}, writes {}\n", f.kernels, f.kernels == 1 ? "" : "s",
                   bytes_text(f.read_bytes), bytes_text(f.write_bytes));
  s += fmt::format("unfused plan: {} kernel{}, reads {}, writes {}{}\n", u.kernels, u.kernels == 1 ? "" : "s",
                   bytes_text(u.read_bytes), bytes_text(u.write_bytes), unfused_label(unfused_graph));
  return s + predicted_line(f, u);
}

namespace {
// "#   rule   count  at name@line:col, ..." per rule that fired (up to 8 places each).
std::string rule_lines(const RewriteResult& rw) {
  std::string s;
  for (const RuleCount& c : rw.counts) {
    if (!c.count) continue;
    s += fmt::format("#   {:<16} {:>6}", c.rule, c.count);
    std::string where;
    int shown = 0;
    for (const RuleFire& f : rw.fires) {
      if (f.rule != c.rule || shown == 8) continue;
      std::string at = !f.node_name.empty() ? f.node_name : "";
      if (f.loc.known()) at += (at.empty() ? "" : "@") + std::to_string(f.loc.line) + ":" + std::to_string(f.loc.col);
      if (at.empty()) continue;
      where += (shown++ ? ", " : "") + at;
    }
    if (!where.empty()) s += "  at " + where + (c.count > shown ? ", ..." : "");
    s += "\n";
  }
  return s;
}

// One fused kernel's block: its ops, shape and reductions, values in and out, bytes, note.
// Per node of `g`: the names of the graph outputs bound to it, in declaration order.
std::vector<std::vector<std::string>> output_names(const Graph& g) {
  std::vector<std::vector<std::string>> names(static_cast<size_t>(g.size()));
  for (const OutputDecl& o : g.outputs) names[static_cast<size_t>(o.node)].push_back(o.name);
  return names;
}

// The values a group writes, each with the graph outputs it is written as where those are not just
// the value's own name: `x (as output y)` for a copy of an input, `y (as outputs y, z)` for two.
std::string written_list(const Graph& g, const FusionGroup& grp, const std::vector<std::vector<std::string>>& names) {
  std::string s;
  for (NodeId id : grp.outputs) {
    const std::vector<std::string>& as = names[static_cast<size_t>(id)];
    const std::string name = value_name(g, id);
    s += (s.empty() ? "" : ", ") + name;
    if (!as.empty() && !(as.size() == 1 && as[0] == name))
      s += fmt::format(" (as output{} {})", as.size() == 1 ? "" : "s", fmt::join(as, ", "));
  }
  return s.empty() ? "-" : s;
}

// Per node of `g`: the groups of `plan` that compute it, in launch order.
std::vector<std::vector<size_t>> computing_groups(const Graph& g, const Plan& plan) {
  std::vector<std::vector<size_t>> by(static_cast<size_t>(g.size()));
  for (size_t k = 0; k < plan.groups.size(); ++k)
    for (NodeId id : plan.groups[k].nodes) by[static_cast<size_t>(id)].push_back(k);
  return by;
}

// The nodes group k computes that other groups compute too and k does not write: values
// recomputed where they are read rather than written once and read back (docs/rewrites-and-planning.md).
std::vector<NodeId> recomputed(const Plan& plan, size_t k, const std::vector<std::vector<size_t>>& by) {
  const FusionGroup& grp = plan.groups[k];
  std::vector<NodeId> out;
  for (NodeId id : grp.nodes)
    if (by[static_cast<size_t>(id)].size() > 1 && std::find(grp.outputs.begin(), grp.outputs.end(), id) == grp.outputs.end())
      out.push_back(id);
  return out;
}

// "c (also in kernel 1), d (also in kernels 0, 2)": group k's recomputed values and the other
// groups that compute each.
std::string recomputed_list(const Graph& g, const Plan& plan, size_t k, const std::vector<std::vector<size_t>>& by) {
  std::string s;
  for (NodeId id : recomputed(plan, k, by)) {
    std::vector<size_t> others;
    for (size_t o : by[static_cast<size_t>(id)])
      if (o != k) others.push_back(o);
    s += fmt::format("{}{} (also in kernel{} {})", s.empty() ? "" : ", ", value_name(g, id), others.size() == 1 ? "" : "s",
                     fmt::join(others, ", "));
  }
  return s;
}

std::string group_block(const Graph& g, const Plan& fused, size_t k, std::span<const std::string> kernel_names,
                        std::span<const int> bindings, const std::vector<std::vector<std::string>>& names,
                        const std::vector<std::vector<size_t>>& computing) {
  const FusionGroup& grp = fused.groups[k];
  const GroupTraffic t = group_traffic(g, grp, fused.rules, bindings);
  std::string s = fmt::format("kernel {} ({}): {} op{} over {}{}\n", k, kernel_name(g, k, kernel_names), grp.nodes.size(),
                              grp.nodes.size() == 1 ? "" : "s", shape_to_string(grp.iter_shape, &g), reduces_text(g, grp));
  s += "  nodes:   " + list(g, grp.nodes) + "\n";
  if (const std::string r = recomputed_list(g, fused, k, computing); !r.empty()) s += "  recomputed: " + r + "\n";
  s += "  inputs:  " + list(g, grp.inputs) + "\n";
  if (!grp.params.empty()) s += "  params:  " + list(g, grp.params) + "\n";
  s += "  outputs: " + written_list(g, grp, names) + "\n";
  const std::string reread = t.reread_bytes ? fmt::format(" ({} of it re-read by later passes)", bytes_text(t.reread_bytes)) : "";
  s += fmt::format("  bytes:   read {}{}, write {}; kernel parameters ~{} B\n", bytes_text(t.read_bytes), reread,
                   bytes_text(t.write_bytes), estimate_param_bytes(grp, bindings));
  return s + "  note:    " + grp.note + "\n";
}
}  // namespace

std::string format_plan_text(const RewriteResult& rw, const Plan& fused, const Plan& unfused, const Graph* unfused_graph,
                             std::span<const std::string> kernel_names) {
  const Graph& g = rw.graph;
  std::string s = fmt::format("# rewrites: {} mode, {} iteration{}\n", rw.fast_math ? "fast-math" : "strict", rw.iterations,
                              rw.iterations == 1 ? "" : "s");
  if (rw.hit_cap) s += "# warning: " + rw.diagnostic + "\n";
  s += rule_lines(rw) + "# rewritten graph:\n" + print_graph(g) + "\n# fused plan\n";
  const std::vector<int> bindings = output_bindings(g);
  const std::vector<std::vector<std::string>> names = output_names(g);
  const std::vector<std::vector<size_t>> computing = computing_groups(g, fused);
  for (size_t k = 0; k < fused.groups.size(); ++k) s += group_block(g, fused, k, kernel_names, bindings, names, computing);
  PlanTotals f = plan_totals(g, fused), u = plan_totals(unfused_graph ? *unfused_graph : g, unfused);
  s += fmt::format("\n# totals\nfused:   {} kernel{}, read {}, write {}\n", f.kernels, f.kernels == 1 ? "" : "s",
                   bytes_text(f.read_bytes), bytes_text(f.write_bytes));
  s += fmt::format("unfused: {} kernel{}, read {}, write {}{}\n", u.kernels, u.kernels == 1 ? "" : "s",
                   bytes_text(u.read_bytes), bytes_text(u.write_bytes), unfused_label(unfused_graph));
  return s + predicted_line(f, u);
}

namespace {
// A node's label in the drawing: its value name, then what it is (op or input/param and dtype,
// a reduction's axes and options).
std::string dot_label(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  std::string l = value_name(g, id);
  if (n.op == Op::Input || n.op == Op::Param) l += "\n" + std::string(n.op == Op::Input ? "input " : "param ") + std::string(dtype_name(n.dtype));
  else if (n.op != Op::Const) l += "\n" + std::string(op_name(n.op)) + " " + std::string(dtype_name(n.dtype));
  if (is_reduction(n.op))
    l += " " + axes_text(n.red.axes) + (n.red.keepdim ? " keepdim" : "") +
         (n.red.correction ? fmt::format(" correction={}", n.red.correction) : "") +
         (n.red.initial ? (n.op == Op::Amax ? " initial=-inf" : " initial=inf") : "");
  return l;
}

// Which group draws each node first (-1: none; a later group that recomputes it draws a copy of
// its own), and which nodes a group writes.
struct DotGroups {
  std::vector<int> group_of;
  std::vector<char> written;
  // A node computed by several groups is drawn as its owner's: the group that writes it, else the
  // one over its own shape (a plan tester's find: c * 3 of [64, 1] was "recomputed" in its own
  // [64, 1] group, as the later one, and a member of the [64, 128] group that recomputes it), else
  // the first.
  DotGroups(const Graph& g, const Plan& fused)
      : group_of(static_cast<size_t>(g.size()), -1), written(static_cast<size_t>(g.size()), 0) {
    for (size_t k = 0; k < fused.groups.size(); ++k)
      for (NodeId id : fused.groups[k].outputs) {
        written[static_cast<size_t>(id)] = 1;
        own(id, k, std::find(fused.groups[k].nodes.begin(), fused.groups[k].nodes.end(), id) != fused.groups[k].nodes.end());
      }
    for (size_t k = 0; k < fused.groups.size(); ++k)
      for (NodeId id : fused.groups[k].nodes) own(id, k, g.node(id).shape == fused.groups[k].iter_shape);
    for (size_t k = 0; k < fused.groups.size(); ++k)
      for (NodeId id : fused.groups[k].nodes) own(id, k, true);
  }
  void own(NodeId id, size_t k, bool takes) {
    if (takes && group_of[static_cast<size_t>(id)] < 0) group_of[static_cast<size_t>(id)] = static_cast<int>(k);
  }
  // Node `id` as group k draws it: n<id> in its owner, n<id>_<k> in another group that computes it
  // again (from memory's inputs, not from the owner's value).
  std::string id_in(NodeId id, size_t k) const {
    return group_of[static_cast<size_t>(id)] == static_cast<int>(k) ? fmt::format("n{}", id) : fmt::format("n{}_{}", id, k);
  }
};

// One cluster per fusion group (kernel), labelled with its bytes, holding the nodes it computes
// (a recomputed one dashed); a copy / fill group of a leaf output is a dashed box.
std::string dot_clusters(const Graph& g, const Plan& fused, const DotGroups& d, std::span<const std::string> kernel_names) {
  std::string s;
  const std::vector<int> bindings = output_bindings(g);
  for (size_t k = 0; k < fused.groups.size(); ++k) {
    const FusionGroup& grp = fused.groups[k];
    const GroupTraffic t = group_traffic(g, grp, fused.rules, bindings);
    s += fmt::format("  subgraph cluster_{} {{\n    label=\"{} over {}{}\\nread {}, write {}\";\n    style=rounded; color=blue;\n", k,
                     kernel_name(g, k, kernel_names), dot_escape(shape_to_string(grp.iter_shape, &g)),
                     dot_escape(reduces_text(g, grp)), format_bytes(t.read_bytes), format_bytes(t.write_bytes));
    for (NodeId id : grp.nodes) {
      const bool again = d.group_of[static_cast<size_t>(id)] != static_cast<int>(k);
      s += fmt::format("    {} [label=\"{}{}\", shape={}{}];\n", d.id_in(id, k), dot_escape(dot_label(g, id)),
                       again ? "\\n(recomputed)" : "", d.written[static_cast<size_t>(id)] && !again ? "doubleoctagon" : "box",
                       again ? ", style=dashed" : "");
    }
    if (grp.nodes.empty())
      for (NodeId id : grp.outputs)
        s += fmt::format("    c{} [label=\"{}\", shape=box, style=dashed];\n", k,
                         dot_escape(grp.note.substr(0, grp.note.find(':')) + "\n" + value_name(g, id)));
    s += "  }\n";
  }
  return s;
}

// The inputs, params and constants that a live node or an output uses, outside every cluster.
std::string dot_leaves(const Graph& g, const DotGroups& d) {
  std::vector<char> used(static_cast<size_t>(g.size()), 0);
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (d.group_of[static_cast<size_t>(id)] < 0 && !is_leaf(n.op)) continue;  // dead
    for (int a = 0; a < n.nargs; ++a) used[static_cast<size_t>(n.args[static_cast<size_t>(a)])] = 1;
  }
  for (const OutputDecl& o : g.outputs) used[static_cast<size_t>(o.node)] = 1;
  std::string s;
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (is_leaf(n.op) && used[static_cast<size_t>(id)])
      s += fmt::format("  n{} [label=\"{}\", shape={}];\n", id, dot_escape(dot_label(g, id)),
                       n.op == Op::Const ? "plaintext" : "ellipse");
  }
  return s;
}

// Edges from a leaf output into its copy / fill group.
std::string dot_copy_edges(const Plan& fused) {
  std::string s;
  for (size_t k = 0; k < fused.groups.size(); ++k)
    if (fused.groups[k].nodes.empty())
      for (NodeId id : fused.groups[k].outputs) s += fmt::format("  n{} -> c{};\n", id, k);
  return s;
}

// Edges into each node a group computes: from the group's own operand (recomputed or not) where
// the group computes it, else from a leaf or a value an earlier group wrote; then values to outputs
// (a leaf output from its copy / fill group).
std::string dot_edges(const Graph& g, const Plan& fused, const DotGroups& d) {
  std::string s;
  std::vector<char> in_group(static_cast<size_t>(g.size()), 0);
  for (size_t k = 0; k < fused.groups.size(); ++k) {
    const FusionGroup& grp = fused.groups[k];
    for (NodeId id : grp.nodes) in_group[static_cast<size_t>(id)] = 1;
    for (NodeId id : grp.nodes)
      for (int a = 0; a < g.node(id).nargs; ++a) {
        const NodeId arg = g.node(id).args[static_cast<size_t>(a)];
        s += fmt::format("  {} -> {};\n", in_group[static_cast<size_t>(arg)] ? d.id_in(arg, k) : fmt::format("n{}", arg),
                         d.id_in(id, k));
      }
    for (NodeId id : grp.nodes) in_group[static_cast<size_t>(id)] = 0;
  }
  // An output that is a leaf (a copy of an input, a fill) comes from its copy / fill group's box.
  std::vector<std::string> from(static_cast<size_t>(g.size()));
  for (size_t k = 0; k < fused.groups.size(); ++k)
    if (fused.groups[k].nodes.empty())
      for (NodeId id : fused.groups[k].outputs) from[static_cast<size_t>(id)] = fmt::format("c{}", k);
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const NodeId id = g.outputs[k].node;
    s += fmt::format("  out{} [label=\"output {}\", shape=note];\n  {} -> out{};\n", k, dot_escape(g.outputs[k].name),
                     from[static_cast<size_t>(id)].empty() ? fmt::format("n{}", id) : from[static_cast<size_t>(id)], k);
  }
  return s;
}
}  // namespace

std::string format_plan_dot(const Graph& g, const Plan& fused, std::span<const std::string> kernel_names) {
  const DotGroups d(g, fused);
  return "digraph \"" + dot_escape(g.name.empty() ? "graph" : g.name) +
         "\" {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n" + dot_clusters(g, fused, d, kernel_names) +
         dot_copy_edges(fused) + dot_leaves(g, d) + dot_edges(g, fused, d) + "}\n";
}

nlohmann::json plan_to_json(const RewriteResult& rw, const Plan& fused, const Plan& unfused, const Graph* unfused_graph,
                            std::span<const std::string> kernel_names) {
  using nlohmann::json;
  const Graph& g = rw.graph;
  auto names = [&](const std::vector<NodeId>& ids) {
    json a = json::array();
    for (NodeId id : ids) a.push_back(value_name(g, id));
    return a;
  };
  json counts = json::object();
  for (const RuleCount& c : rw.counts) counts[c.rule] = c.count;
  json fires = json::array();
  for (const RuleFire& f : rw.fires)
    fires.push_back({{"rule", f.rule}, {"node", f.node_name}, {"line", f.loc.line}, {"col", f.loc.col}, {"iteration", f.iteration}});
  json groups = json::array();
  const std::vector<int> bindings = output_bindings(g);
  const std::vector<std::vector<std::string>> out_names = output_names(g);
  const std::vector<std::vector<size_t>> computing = computing_groups(g, fused);
  for (size_t k = 0; k < fused.groups.size(); ++k) {
    const FusionGroup& grp = fused.groups[k];
    GroupTraffic t = group_traffic(g, grp, fused.rules, bindings);
    json graph_outputs = json::array();  // the graph outputs its values are (`z = y`: y and z; a copy of x: y)
    for (NodeId id : grp.outputs)
      for (const std::string& n : out_names[static_cast<size_t>(id)]) graph_outputs.push_back(n);
    json shape = json::array();
    for (const Dim& d : grp.iter_shape) shape.push_back(d.size);
    json e = {{"kernel", kernel_name(g, k, kernel_names)}, {"nodes", names(grp.nodes)},
              {"recomputed", names(recomputed(fused, k, computing))}, {"inputs", names(grp.inputs)},
              {"params", names(grp.params)}, {"outputs", names(grp.outputs)}, {"graph_outputs", graph_outputs},
              {"iter_shape", shape},
              {"read_bytes", t.read_bytes}, {"write_bytes", t.write_bytes},
              {"param_bytes", estimate_param_bytes(grp, bindings)}, {"note", grp.note},
              {"reduce_axes", reduction_group(g, grp) ? mask_axes(grp.reduce_mask) : std::vector<int64_t>{}}};
    if (reduction_group(g, grp)) {  // how its rows run at these sizes (docs/ops.md, "A row split over blocks")
      const RowSplit r = row_split_at(g, grp, analyze_reduce_group(g, grp), fused.rules);
      e["row_layout"] = r.block_rows ? "block_per_row" : "rows_side_by_side";
      e["rows_per_block"] = r.block_rows ? 1 : column_rows_per_block(g, analyze_reduce_group(g, grp));
      e["blocks_per_row"] = r.blocks_per_row;
      e["launches"] = r.launches;
      e["row_cache_bytes"] = r.row_cache_bytes;  // 0: passes re-read their inputs (reread_bytes)
      e["kept_values"] = fused.rules.kept_values ? names(analyze_reduce_group(g, grp).kept_values) : json::array();
      e["values_on_chip"] = r.values_on_chip;  // the row cache holds them too (row_cache 2)
      // Rows broadcast over the rows, read from memory by each pass beside rows on chip (row_cache 3).
      e["broadcast_rows_reread"] = r.shared_rows_reread;
      e["reread_bytes"] = t.reread_bytes;
      e["short_rows"] = r.short_rows;  // re-read from L1/L2, counted once (ir::kShortRowElements)
    }
    groups.push_back(std::move(e));
  }
  PlanTotals f = plan_totals(g, fused), u = plan_totals(unfused_graph ? *unfused_graph : g, unfused);
  return {{"mode", rw.fast_math ? "fast-math" : "strict"},
          {"rewrite", {{"iterations", rw.iterations}, {"hit_cap", rw.hit_cap}, {"diagnostic", rw.diagnostic},
                       {"counts", counts}, {"fires", fires}}},
          {"fused", {{"kernels", f.kernels}, {"read_bytes", f.read_bytes}, {"write_bytes", f.write_bytes}, {"groups", groups}}},
          {"unfused", {{"kernels", u.kernels}, {"read_bytes", u.read_bytes}, {"write_bytes", u.write_bytes}}},
          {"traffic_ratio", ratio_json(f, u)}};
}

}  // namespace fusejit::ir
