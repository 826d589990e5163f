// Reports of a rewrite + fusion plan: text for `fusejit plan`, a short summary for `fusejit run`,
// Graphviz DOT (one cluster per fusion group) for `--dot`, and JSON for `--json`. Values are named
// as the printer names them (ir/printer.h): the node's name, or `%<id>` for a temporary.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "ir/passes/rewrite.h"
#include "ir/plan.h"

namespace fusejit::ir {

// How reports name a value (plan text and JSON, KernelInfo::ops, index.json): its name, a
// constant's value, else `%<id>`, the printer's temporary.
std::string value_name(const Graph& g, NodeId id);
// One op node with its operands named by value_name: "h = add(x, bias)", "%5 = cast(h, f16)".
std::string node_text(const Graph& g, NodeId id);

// A byte count for people, in the decimal units of bandwidth in GB/s (1 kB = 1000 B): "512 B",
// "16.38 kB", "134.22 MB", "1.74 GB"; 2^63 - 1 (a saturated count) says it is a bound. `fusejit
// plan` and `fusejit run` both print bytes with it.
std::string format_bytes(int64_t bytes);

// Kernel count and device-memory traffic of a plan (sum of group_traffic over its groups).
struct PlanTotals {
  int kernels = 0;
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
  int64_t bytes() const { return add_bytes(read_bytes, write_bytes); }  // saturating (ir/plan.h)
};
PlanTotals plan_totals(const Graph& g, const Plan& p);
// The same for `groups` run under `rules` (the planner compares candidate groupings with it).
PlanTotals plan_totals(const Graph& g, std::span<const FusionGroup> groups, const SplitRules& rules);

// Predicted fused/unfused traffic ratio (< 1 means fusion moves fewer bytes); 1 when both are 0.
double traffic_ratio(const PlanTotals& fused, const PlanTotals& unfused);
// The traffic model's predicted speedup, unfused bytes over fused bytes: 1 when neither plan moves
// a byte, +inf when only the unfused one does (size-0 dims: the fused kernels launch nothing).
double predicted_speedup(int64_t fused_bytes, int64_t unfused_bytes);

// The full `fusejit plan` text: mode, rule fire counts and places, the rewritten graph (printer),
// each fused group (nodes, inputs, params, outputs, iteration shape, bytes read/written, note),
// the unfused plan's kernels and bytes, and the predicted traffic ratio. `rw.graph` is the graph
// both plans were made for.
// `unfused_graph`: the graph the unfused plan was made for, when it is not rw.graph (fusejit
// compares against the graph as written, before rewrites); nullptr = rw.graph.
// `kernel_names`: the fused kernels' names as code generation made them (one per group); empty =
// the placeholder names of kernel_name().
std::string format_plan_text(const RewriteResult& rw, const Plan& fused, const Plan& unfused,
                             const Graph* unfused_graph = nullptr, std::span<const std::string> kernel_names = {});

// A few lines for `fusejit run`: mode, fires, kernels and bytes fused vs unfused, ratio.
std::string format_plan_summary(const RewriteResult& rw, const Plan& fused, const Plan& unfused,
                                const Graph* unfused_graph = nullptr);

// Graphviz DOT of the fused plan: one `cluster_<k>` subgraph per fusion group holding its nodes;
// graph inputs, params and constants outside clusters; edges are operand -> user; values written
// to memory are drawn as double octagons. Renders with `dot -Tpng`.
std::string format_plan_dot(const Graph& g, const Plan& fused, std::span<const std::string> kernel_names = {});

// Machine-readable report: {"mode", "rewrite": {"iterations", "hit_cap", "diagnostic",
// "counts": {rule: n}, "fires": [{"rule", "node", "line", "col"}]}, "fused": PLAN, "unfused":
// {"kernels", "read_bytes", "write_bytes"}, "traffic_ratio" (null where the text says "unknown":
// byte counts past 2^63 - 1, or none unfused)} with PLAN = {"kernels", "read_bytes",
// "write_bytes", "groups": [{"kernel", "nodes", "recomputed" (its nodes another group computes too
// and it does not write), "inputs", "params", "outputs" (the values it writes),
// "graph_outputs" (the graph outputs those are, by output name: `z = y` writes y as y and z),
// "iter_shape",
// "read_bytes", "write_bytes", "param_bytes", "note"}]}; values named as in the text report.
nlohmann::json plan_to_json(const RewriteResult& rw, const Plan& fused, const Plan& unfused,
                            const Graph* unfused_graph = nullptr, std::span<const std::string> kernel_names = {});

// Placeholder name of group `index` of a plan for graph `g`, e.g. "fj_gelu_tanh_k0" (graph name
// sanitised to [A-Za-z0-9_]; "fj_graph_k0" when unnamed), for reports made without code
// generation. `kernel_names[index]` instead when given (the generated kernel's real name).
std::string kernel_name(const Graph& g, size_t index, std::span<const std::string> kernel_names = {});

}  // namespace fusejit::ir
