// The fusion planner: partitions a (rewritten) graph into fusion groups, each one kernel launch.
#pragma once

#include <cstdint>
#include <functional>

#include "ir/graph.h"
#include "ir/plan.h"

namespace fusejit::ir {

struct PlanOptions {
  // Split a group whose kernel would exceed these (defaults: the limits in ir/plan.h).
  int max_ops_per_group = kMaxOpsPerKernel;
  int64_t max_param_bytes = kMaxKernelParamBytes;
  // A producer whose shape is smaller than its consumers' iteration space (a broadcast operand:
  // a bias row, a per-channel scale) and that is not a graph output is recomputed inside each
  // consumer kernel instead of being written to memory, when its expression has at most this
  // many distinct ops down to the inputs and reductions it reads ("too costly" beyond). 0
  // disables recomputation.
  int max_recompute_ops = 16;
  // How reduction kernels will run (Options::row_split, row_cache): the groups do not depend on
  // it; their notes and the plan's traffic (Plan::rules) do.
  SplitRules rules;
  // With rules.short_rows (a GPU's plan): whether a row reduction group's kernel reads its rows
  // with vectors (FusionGroup::vector_rows). The library answers it from the generated kernel
  // (jit::vector_rows_ok), which the planner cannot build; unset, every group is taken as one.
  std::function<bool(const FusionGroup&)> vector_rows;
};

// Partitions `g` into fusion groups (ir/plan.h). Rules:
//  - each group iterates over one shape: the shape of the values it writes; values of other
//    (larger) shapes are computed in their own groups, so outputs of different shapes are in
//    different groups (the group notes say so);
//  - as few groups as possible: every node joins the latest group of its shape unless that group
//    would then read a value produced by a later group (which would form a cycle), or the op cap
//    is reached; launch order is group order, and a group only reads values written by earlier
//    groups;
//  - a smaller-shaped producer that is not a graph output is recomputed in each consumer group
//    (PlanOptions::max_recompute_ops);
//  - a group over the kernel parameter byte or op cap is split in two (in topological order)
//    until all fit, so launches never fail on the parameter limit, even with 600 inputs;
//  - every graph output is written exactly once, by the group computing it; an output that is a
//    leaf gets a copy/fill group (append_leaf_output_groups).
// Nodes no output depends on are not planned. Deterministic: depends only on the graph (node
// order, shapes), never on addresses or hash order. Linear in the graph size.
Plan plan_fusion(const Graph& g, const PlanOptions& options = {});

}  // namespace fusejit::ir
