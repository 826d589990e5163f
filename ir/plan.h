// A fusion plan: the graph partitioned into fusion groups, each one kernel launch over one
// iteration space. The fused plan comes from ir/passes/plan_fusion.h; the unfused plan (one group
// per non-leaf node) from plan_unfused(). Code generation (jit/) turns each group into a kernel.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusejit::ir {

// A field code generation reads must also go into jit::structural_key (jit/gpu_build.cpp).
struct FusionGroup {
  // Nodes computed inside the kernel, in topological order. Leaves are never listed: Const nodes
  // are inlined as literals, Param nodes are scalar kernel arguments, Input nodes are read.
  std::vector<NodeId> nodes;
  // Values read from device memory, ascending node id: graph inputs and values materialised by an
  // earlier group. Each may have a smaller shape than iter_shape (broadcast read with strides).
  std::vector<NodeId> inputs;
  // Params read by the kernel (Param node ids, ascending).
  std::vector<NodeId> params;
  // Values written to device memory, ascending node id; each has exactly iter_shape (in a reduction
  // group, a row value has the reduced shape, with or without keepdim). A value that
  // is a graph output is written once, here; a leaf listed here (an output that rewrites reduced
  // to an input, param or constant) is copied or filled.
  std::vector<NodeId> outputs;
  // The iteration space: the kernel runs one thread-iteration per element of this shape. In a
  // reduction group, the shape of the reductions' operand (every reduction of a group has it).
  Shape iter_shape;
  // Why the group ends where it does (for `fusejit plan`), e.g. "graph end", "shape change".
  std::string note;
  // Reduction groups (those listing a reduction node) only: the bit mask of the iter_shape axes
  // every reduction of the group reduces (bit k: axis k); 0 otherwise. Values of the group are then
  // either element values (broadcast to iter_shape) or row values, one per element of the reduced
  // shape (the reductions and what is computed from them): ir/reduce_group.h.
  uint64_t reduce_mask = 0;
  // A row reduction group on a GPU: whether its fast entry reads the rows with vectors
  // (jit::vector_rows_ok: the row a multiple of the vector width V), the only case where a short
  // row is re-read instead of kept on chip (SplitRules::short_rows). Set by the planner from
  // PlanOptions::vector_rows (the library asks the generated kernel); true where unknown.
  bool vector_rows = true;
};

// Overrides of the launcher's rules for reduction kernels (Options::row_split, Options::row_cache),
// to measure each way on a GPU; the bits never depend on them. The default is fusejit's rules.
// The row cache's default limit, bytes of shared memory per block (ir/reduce_group.h, row_cache_at):
// what the CPU path and plans made without a GPU assume. A GPU's is row_cache_limit_for() its
// opt-in maximum.
inline constexpr int64_t kRowCacheBytes = 48 * 1024;
// Short rows on a GPU (SplitRules::short_rows; not without one): a row of at most
// kShortRowElements whose re-read inputs take at most kShortRowBytes (ir/reduce_group.h,
// row_cache_bytes) is not kept on chip; every pass reads it from memory, where L1 and L2 serve the
// re-reads of a row just read, so the traffic model counts it once (RowSplit::short_rows).
// Measured on an H200 (2026-12-04, docs/performance.md), share of the copy bandwidth on chip ->
// re-read: rows of 1,024 elements: softmax f32 52 -> 62 %, RMSNorm bf16 56 -> 85 %, LayerNorm f32
// 60 -> 70 % (the best block size of either); 2,048: softmax f32 56 -> 63 %, LayerNorm f32 62 ->
// 72 %; 4,096 were faster on chip (softmax f32 71 % against 58 %, RMSNorm bf16 76 % against 60 %).
inline constexpr int64_t kShortRowElements = 2048;
inline constexpr int64_t kShortRowBytes = 8192;
// Shared memory a reduction kernel may need besides its row cache: its lane buffer (256 lanes of
// at most 32 bytes, 8 KiB: kMaxPassReductions, kMaxLaneBytes), the warp tree's result, and room
// for what the toolchain adds (sm_90 CUBINs carry 1 KiB more shared memory than sm_80 ones for the
// same kernel: 9,248 B for a pass of four 8-byte reductions), so 12 KiB. A kernel's static and
// dynamic shared memory together may not pass the opt-in maximum, or its load fails.
inline constexpr int64_t kRowCacheStaticReserve = 12 * 1024;
// The row cache limit on a GPU whose blocks may opt in to `optin_bytes` of shared memory
// (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 227 KiB on sm_90, 163 KiB on sm_80,
// 99 KiB on sm_86/89, 64 KiB on sm_75; CUDA C++ Programming Guide, "Technical Specifications per
// Compute Capability"): all of it but kRowCacheStaticReserve, and never under the 48 KiB default
// (every sm_75 and later GPU fits that: 48 + 12 <= 64).
inline int64_t row_cache_limit_for(int64_t optin_bytes) {
  return optin_bytes - kRowCacheStaticReserve > kRowCacheBytes ? optin_bytes - kRowCacheStaticReserve : kRowCacheBytes;
}

struct SplitRules {
  int64_t row_split = 0;  // 0: ir::choose_split; 1: never split; N: min(N, chunks) parts
  bool row_cache = true;  // false: never keep a row on chip (every pass reads memory)
  // The most bytes of shared memory a block's row cache may take (kRowCacheBytes without a GPU,
  // row_cache_limit_for() the GPU's opt-in maximum on one, or a smaller limit the caller sets).
  int64_t row_cache_limit = kRowCacheBytes;
  // Whether rows on chip may keep their kept values (ReduceGroupInfo::kept_values): not in fast-math
  // mode, where NVRTC may contract a value into its consumer (an FMA) where the epilogue computes it
  // but not where it reads it back, so the row cache would change the bits (jit/codegen generates
  // no kept values there either).
  bool kept_values = true;
  // Short rows (kShortRowElements, kShortRowBytes) are re-read from L1/L2, not kept on chip: a
  // GPU's rule; false on the CPU path and in plans made without a GPU, whose rows stay "on chip"
  // in a host buffer.
  bool short_rows = false;
  // A larger limit the caller asked for, which the GPU's capped to row_cache_limit (0: none), so a
  // note can say why a row it should have held is re-read.
  int64_t capped_from = 0;
};

struct Plan {
  bool fused = true;                 // false for the one-kernel-per-node plan
  SplitRules rules;                  // how its reduction kernels run (notes and traffic follow them)
  std::vector<FusionGroup> groups;   // in launch order (a group only reads values written earlier)
  // Every value written to device memory by some group (graph outputs and intermediates).
  std::vector<NodeId> materialized;
};

// Bytes a group reads (each input once at its own size) and writes (each output once). A reduction
// kernel that does not keep its row on chip (ir/reduce_group.h, RowSplit::row_cache_bytes == 0)
// reads an input its passes share once per pass: those extra reads are reread_bytes, counted in
// read_bytes too.
struct GroupTraffic {
  int64_t read_bytes = 0;
  int64_t write_bytes = 0;
  int64_t reread_bytes = 0;
  int64_t bytes() const;  // read_bytes + write_bytes, saturating (add_bytes)
};

// Byte counts of the traffic model add and multiply saturating at INT64_MAX: each tensor's size
// fits in 64 bits (the builder checks), but a plan's sum of them need not (an f32 tensor of 2^61
// elements, read once and written once); a report then shows the largest count, not a wrapped one.
int64_t add_bytes(int64_t a, int64_t b);
int64_t mul_bytes(int64_t bytes, int64_t times);

// Every output of the group is empty: it launches nothing, however many (empty) rows it has, as a
// kernel's only effect is what it writes (softmax over rows of length 0).
bool writes_nothing(const Graph& g, const FusionGroup& group);
// The group launches no kernel: no element (a reduction: no row) to launch over, or writes_nothing.
bool launches_nothing(const Graph& g, const FusionGroup& group);

// A group that launches nothing (no element, a reduction to no rows, or writes_nothing) moves no
// byte; one whose rows have length 0 writes its outputs (the identities) and reads only the inputs
// it loads once per row (an epilogue's per-row bias), none it loads per element. `rules`: how
// reduction kernels run (the re-reads of a row not kept on chip are counted). Scans the whole graph
// for its output bindings: in a loop over a plan's groups, use the overload taking them.
GroupTraffic group_traffic(const Graph& g, const FusionGroup& group, const SplitRules& rules = {});
// Per node of `g`: how many graph outputs are bound to it (output_bindings(g)[id]).
std::vector<int> output_bindings(const Graph& g);
// group_traffic with output_bindings(g) computed once by the caller: a loop over the groups of a
// plan of 20,000 outputs (one kernel each unfused) then costs one scan of the outputs, not one per group.
GroupTraffic group_traffic(const Graph& g, const FusionGroup& group, const SplitRules& rules, std::span<const int> bindings);

// Hardware limits the planner respects (ir/passes/plan_fusion.h splits groups to stay within them).
//
// Kernel parameter space: CUDA allows 4,096 bytes of __global__ function parameters; CUDA 12.1
// raised it to 32,764 bytes on Volta and newer (CUDA C++ Programming Guide, "Function Parameters").
// The planner uses the conservative 4,096 so every plan launches on every supported toolkit and
// GPU; a group whose estimate exceeds it is split, so a launch never fails for this reason.
inline constexpr int64_t kMaxKernelParamBytes = 4096;
// Ops per kernel: a bound on register pressure (every live intermediate is a register; past a
// few hundred ops NVRTC spills to local memory and the fused kernel loses to the unfused one).
inline constexpr int kMaxOpsPerKernel = 256;

// Upper bound on the parameter bytes of either entry point of the kernel generated for `group`
// (jit/kernel_abi.h must stay within it): 8 per pointer and 8 per dim of its strides for each input
// and each output binding (a value that is two graph outputs is written to two buffers), 8 per
// param, 16 * rank(iter_shape) for the sizes and their magic numbers, and 64 for the element count,
// flags and alignment padding.
int64_t estimate_param_bytes(const Graph& g, const FusionGroup& group);
// The same with `bindings[node]`, the graph outputs bound to each node, counted once by the caller
// (the planner estimates every group on each of its splitting rounds: a scan of the graph's
// outputs per estimate made a plan of 20,000 outputs take seconds).
int64_t estimate_param_bytes(const FusionGroup& group, std::span<const int> bindings);

// One group per non-leaf node (plus a copy/fill group per output that is a leaf): the baseline
// that fusion is measured against. Deterministic.
Plan plan_unfused(const Graph& g);

// Appends one group per graph output that is a leaf (an input: copy kernel reading it, for a graph
// planned without ir::rewrite, whose result makes such an output a cast; a param
// or constant: fill kernel), each leaf once, in output order; adds them to p.materialized.
// Shared by plan_unfused and the fusion planner.
void append_leaf_output_groups(const Graph& g, Plan& p);

}  // namespace fusejit::ir
