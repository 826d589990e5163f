// A fusion plan: the graph partitioned into fusion groups, each one kernel launch over one
// iteration space. The fused plan comes from ir/passes/plan_fusion.h; the unfused plan (one group
// per non-leaf node) from plan_unfused(). Code generation (jit/) turns each group into a kernel.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusejit::ir {

struct FusionGroup {
  // Nodes computed inside the kernel, in topological order. Leaves are never listed: Const nodes
  // are inlined as literals, Param nodes are scalar kernel arguments, Input nodes are read.
  std::vector<NodeId> nodes;
  // Values read from device memory, ascending node id: graph inputs and values materialised by an
  // earlier group. Each may have a smaller shape than iter_shape (broadcast read with strides).
  std::vector<NodeId> inputs;
  // Params read by the kernel (Param node ids, ascending).
  std::vector<NodeId> params;
  // Values written to device memory, ascending node id; each has exactly iter_shape. A value that
  // is a graph output is written once, here; a leaf listed here (an output that rewrites reduced
  // to an input, param or constant) is copied or filled.
  std::vector<NodeId> outputs;
  // The iteration space: the kernel runs one thread-iteration per element of this shape.
  Shape iter_shape;
  // Why the group ends where it does (for `fusejit plan`), e.g. "graph end", "shape change".
  std::string note;
};

struct Plan {
  bool fused = true;                 // false for the one-kernel-per-node plan
  std::vector<FusionGroup> groups;   // in launch order (a group only reads values written earlier)
  // Every value written to device memory by some group (graph outputs and intermediates).
  std::vector<NodeId> materialized;
};

// Bytes a group reads (each input read once at its own size) and writes (each output once).
struct GroupTraffic {
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
};
GroupTraffic group_traffic(const Graph& g, const FusionGroup& group);

// One group per non-leaf node (plus a copy/fill group per output that is a leaf): the baseline
// that fusion is measured against. Deterministic.
Plan plan_unfused(const Graph& g);

}  // namespace fusejit::ir
