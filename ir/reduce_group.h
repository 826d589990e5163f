// What a reduction group computes where: the analysis the planner (to accept a group) and the
// code generator (to order a reduction kernel's phases) share. See docs/architecture.md,
// "Reduction kernels".
//
// A reduction group (ir/plan.h) iterates over the shape X of its reductions' operand
// (FusionGroup::iter_shape) and reduces the axes of FusionGroup::reduce_mask. Each of its values
// is one of:
//  - an element value: computed per element of X (its shape broadcasts to X) from inputs,
//    params, constants, other element values and row values in keepdim form: the prologue of a
//    reduction, or the epilogue (`x - max`, `x * rsqrt(ms + eps)`);
//  - a row value: a reduction, or computed from one; one value per row (element of the reduced
//    shape R). Its shape is the keepdim form of R (X with the reduced axes as literal 1s, or a
//    right-aligned suffix of it: it then broadcasts over the reduced axes of X), or exactly R
//    (without the reduced axes), in which case it reads only other such values, constants and
//    params (a value of shape R broadcasts against X by NumPy's right alignment, not per row).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"

namespace fusejit::ir {

struct ReduceGroupInfo {
  std::vector<NodeId> reductions;  // the group's reductions, in topological order (empty: elementwise)
  std::set<NodeId> row;            // the row values among the group's nodes
  // A reduction of the same operand by the same op and correction as an earlier one of the group
  // (they differ only in keepdim, as logsumexp's two amax): its row values are that one's, so a
  // kernel computes them once. Maps the later reduction to the earliest.
  std::map<NodeId, NodeId> same_as;
  // The level of each reduction: 1 + the highest level of the reductions its operand reads the
  // values of (1 when it reads none; softmax: amax 1, the sum of exp(x - max) 2). A row split over
  // blocks runs each level as two launches (docs/ops.md, "A row split over blocks").
  std::map<NodeId, int> level;
  int levels = 0;                  // the highest level (0: no reduction)
  // The passes over a row that compute the reductions (same_as twins left out), level by level:
  // the reductions of one level linked by the inputs they load per element (grad_norm's sum(g * g)
  // and amax(abs(g)); also a(x) and b(y) when c loads x and y) share passes of up to
  // kMaxPassReductions, so the row is read once for them whatever order they are written in; each
  // is still combined in its own fixed order (fj_red_pair in ir/scalar/fj_reduce.h), so the bits
  // are those of one pass each. Members widest compute type first (the least padding), then in
  // topological order.
  std::vector<std::vector<NodeId>> passes;
  // The element ops a kernel evaluates per element over all its passes: each pass computes its
  // reductions' operands again from the row (a chain v = v - amax(v, -1, keepdim) of n steps:
  // pass k computes k subtractions, n^2/2 in all), the epilogue its element outputs. The planner
  // splits a group whose count is over kMaxPassOps (its source, and compile time, grow with it).
  int64_t pass_ops = 0;
  bool element_outputs = false;    // some output is an element value (written per element)
  // Every element output reads no row value and the reductions take one pass: the element outputs
  // are written in that pass, from what it loads, so the row is read once (an AMP unscale with its
  // found-inf flag, a cast with its amax). In place stays safe: each element is loaded and written
  // by one thread, and no later pass reads it.
  bool early_outputs = false;
  // An element-output pass after the reductions (element outputs, not written early).
  bool epilogue() const { return element_outputs && !early_outputs; }
  // Per group input read per element (not a row-scope load): the passes over a row that load it
  // (one per distinct reduction whose operand reads it, one for the element outputs).
  std::map<NodeId, int> input_passes;
  // The inputs loaded per element by two or more passes and varying along a reduced axis: first
  // those whose rows differ from row to row, then (from per_row_inputs on) those broadcast over the
  // rows (a [1, S] mask beside [H, S] scores), each part in group input order. A kernel with one
  // block per row keeps their rows in its row cache (docs/ops.md, "The row on chip": the first pass
  // writes each element it loads to shared memory, later passes read it there) when they fit; when
  // only the first per_row_inputs fit, those (RowCacheUse mode 3: the broadcast rows, the same
  // bytes for every block, are re-read through L2); otherwise every pass reads them from memory.
  std::vector<NodeId> reread_inputs;
  size_t per_row_inputs = 0;
  // Element values a pass computes that the epilogue computes again from the same inputs, costly
  // ones only (a library math call, a division or square root, an integer division: costly_op),
  // the highest such on each of the epilogue's paths, in topological order (softmax: exp(x - max),
  // which its sum pass computes and its epilogue divides by the sum). A row kernel whose launch
  // keeps them on chip too (row_cache 2: RowCacheUse) writes each to the row cache in the first pass
  // that computes it and reads it there in the epilogue, so the bits are the same either way. Not
  // f16/bf16 values (their storage and f32 forms), nor in column kernels (no row cache).
  std::vector<NodeId> kept_values;
  // Why the group cannot run as one kernel of its kind ("" when it can), for the planner, and the
  // node (or input) it names.
  std::string problem;
  NodeId problem_node = kNoNode;
  // The same analysis: what a kernel generated from one computes is what the other needs.
  bool operator==(const ReduceGroupInfo&) const = default;
};

// The most reductions one pass computes together, and the most bytes of its lane: four 8-byte
// values, or two argmax/argmin lanes (value, index: 16 bytes each). So the kernel's one lane
// buffer (FJ_RED_LANES lanes of the widest pass) takes at most 8 KiB of static shared memory,
// within ir::kRowCacheStaticReserve beside the row cache (ir/plan.h).
inline constexpr size_t kMaxPassReductions = 4;
// The most element ops a reduction kernel evaluates per element over its passes
// (ReduceGroupInfo::pass_ops): twice kMaxOpsPerKernel, as the generated source of a kernel of
// 256 elementwise ops. A hostile tester's chain of 100 dependent amax in one group made 858 KB of
// source and compiled for 50 s.
inline constexpr int64_t kMaxPassOps = 2 * kMaxOpsPerKernel;
inline constexpr int64_t kMaxLaneBytes = 32;
// Static shared memory a column kernel needs besides its lane buffers: the warp tree's results per
// lane type (FJ_RED_MAX_GROUPS values each) and what ptxas adds (about 1 KiB for sm_90). column_rows_per_block leaves it free.
inline constexpr int64_t kColumnStaticReserve = 2 * 1024;

// The bytes of one lane of a pass (ReduceGroupInfo::passes): its reductions' compute types laid out
// as the kernel's nested fj_red_two structs (ir/scalar/fj_reduce.h), with C++'s alignment; a
// single reduction's lane is its compute type.
int64_t pass_lane_bytes(const Graph& g, std::span<const NodeId> pass);

// True when `s` is a row shape of a reduction of X over `mask` in keepdim form: right-aligned to
// X, every reduced axis is absent or a literal 1 and every other dim is 1 or X's size.
bool is_keepdim_row_shape(const Shape& s, const Shape& x, uint64_t mask);

// True when the shapes have the same sizes, dim by dim.
bool same_sizes(const Shape& a, const Shape& b);

// The analysis of `grp` (its nodes in topological order, iter_shape, reduce_mask) in `g`.
ReduceGroupInfo analyze_reduce_group(const Graph& g, const FusionGroup& grp);

// Blocks per row of a reduction kernel with one block per row: 1 unless rows are few and long (up
// to 16 rows of at least 8 chunks: more than 57,344 elements; up to 512 rows of at least 32
// chunks, more than 253,952; a whole-tensor sum), then parts of at least 2 chunks
// (16,384 elements) each, at most 512 parts and about 1,024 blocks in all. A function of the sizes
// only, and the bits never depend on it (fj_reduce_phase combines the same chunk values the same
// way). Measured once on an H200 (2026-12-04): one row of 128,256 f32 (16 chunks) ran 3.5 times
// faster in 8 parts than in one block, which the earlier threshold of 32 chunks left it in.
int64_t choose_row_split(int64_t rows, int64_t row_len);

// The bytes of one lane of the kernel's lane buffer: the widest pass's lane (pass_lane_bytes). Every
// pass uses the one buffer in turn (jit/codegen).
int64_t lane_bytes(const Graph& g, const ReduceGroupInfo& info);

// Rows a column kernel (rows side by side in a block) holds per block: a power of two up to 32
// whose lane buffers, 256 lanes of lane_bytes each per row, fit in 48 KiB of static shared memory
// less kColumnStaticReserve (at least 1: a lane buffer takes at most 8 KiB). jit/codegen lays
// blocks out by it; the launcher counts blocks.
int column_rows_per_block(const Graph& g, const ReduceGroupInfo& info);

// Blocks per column group of a column kernel (rows_per_block rows side by side): 1 unless the
// rows have at least 2 chunks (more than 8,192 elements) and the groups are fewer than 512, then
// one part per chunk up to about 1,024 blocks in all (a group's chunk is rows_per_block times a
// row's, so columns split sooner than rows). Thresholds not yet measured on a GPU.
int64_t choose_column_split(int64_t groups, int64_t row_len);

// The launcher's rule for either layout: choose_row_split(rows, row_len) with one block per row
// (rows_per_block 1 and block_rows), else choose_column_split over ceil(rows / rows_per_block).
int64_t choose_split(bool block_rows, int64_t rows, int64_t rows_per_block, int64_t row_len);
// Blocks per row as the launcher runs them: choose_split, or rules.row_split parts (at most one per
// chunk) when it is set.
int64_t blocks_per_row(const SplitRules& rules, bool block_rows, int64_t rows, int64_t rows_per_block, int64_t row_len);

// Whether a reduction group reduces its innermost axis that is not a literal 1 (jit/codegen's kept
// dims): its kernel then runs one block per row; else rows side by side (a column reduction).
bool reduces_innermost(const FusionGroup& grp);

// The row cache: shared memory per block of a kernel with one block per row, for the row of every
// cached input (ReduceGroupInfo::reread_inputs), each region `row_len * element size` bytes rounded
// up to 16 (the kernel lays them out in that order). The launcher keeps the row on chip when a row
// is not split and this is at most SplitRules::row_cache_limit: kRowCacheBytes (48 KiB) without a
// GPU, on a GPU all the shared memory a block may opt in to but kRowCacheStaticReserve
// (row_cache_limit_for). With the kernel's static lane arrays a block then needs more than the
// 48 KiB a block gets without opting in (CUDA C++ Programming Guide, "Shared Memory"), so the GPU
// launcher opts in per function (jit::FunctionLimits). Limits chosen before any GPU measurement.
int64_t row_cache_bytes(std::span<const int> element_sizes, int64_t row_len);
// The launcher's rule: the row cache's bytes when a row runs in one block (blocks_per_row 1) and
// they are at most `limit`, else 0 (the passes read memory).
int64_t row_cache_at(std::span<const int> element_sizes, int64_t row_len, int64_t blocks_per_row, int64_t limit);
// The element sizes of info.reread_inputs in `g` (their storage dtypes), for row_cache_bytes.
std::vector<int> row_cache_element_sizes(const Graph& g, const ReduceGroupInfo& info);
// The element sizes of info.kept_values in `g` (their compute types), laid out after the inputs.
std::vector<int> kept_value_sizes(const Graph& g, const ReduceGroupInfo& info);

// The most shared memory a row cache takes to also keep a row's kept values (ReduceGroupInfo::
// kept_values): they save compute, not memory traffic, and a larger cache allows fewer blocks per
// SM, so only while inputs and values fit in 48 KiB (4 blocks of 256 threads per SM on an sm_90's
// 228 KiB with the static reserve). An estimate, not yet measured on a GPU.
inline constexpr int64_t kKeptValuesCacheBytes = 48 * 1024;

// What a launch keeps in a row kernel's row cache: `mode` 0 nothing (the passes read memory), 1
// the cached inputs' rows, 2 those and the kept values, 3 the rows of the inputs that differ from
// row to row only (ReduceGroupInfo::per_row_inputs) (the kernel's row_cache argument), taking
// `bytes` of shared memory per block.
struct RowCacheUse {
  int mode = 0;
  int64_t bytes = 0;
  bool operator==(const RowCacheUse&) const = default;
};
// Whether a row of `row_len` elements whose re-read inputs take `input_bytes` (row_cache_bytes) is
// short (kShortRowElements, kShortRowBytes).
bool short_row(int64_t input_bytes, int64_t row_len);
// The launcher's rule: 0 for short rows when `short_rows` (SplitRules::short_rows); else
// mode 2 when the inputs and values together fit min(limit, kKeptValuesCacheBytes), else mode 1
// when the inputs fit `limit` (row_cache_at), else mode 3 when the first `per_row` inputs (those
// that differ from row to row, fewer than all) fit and are not short, else 0. Broadcast rows go first because every
// block reads the same bytes of them, which L2 keeps; a row only one block reads is a read of HBM
// per pass. A rule chosen before any GPU measurement.
RowCacheUse row_cache_use(std::span<const int> input_sizes, std::span<const int> value_sizes, int64_t row_len,
                          int64_t blocks_per_row, int64_t limit, bool short_rows = false,
                          size_t per_row = SIZE_MAX);

// How a reduction group's rows run at the graph's current sizes (docs/ops.md, "A row split over
// blocks"): rows side by side in blocks (a column reduction: block_rows false) or one block per
// row, and blocks_per_row > 1 blocks per row (per group of rows side by side) over `launches`
// launches.
// `row_cache_bytes`: the shared memory the row cache takes per block at these sizes, 0 when the
// rows are not kept on chip (no cached input, a split or column layout, or over the limit);
// `values_on_chip`: the kept values are in it too (RowCacheUse mode 2).
struct RowSplit {
  bool block_rows = false;
  int64_t blocks_per_row = 1;
  int launches = 1;
  int64_t row_cache_bytes = 0;
  bool values_on_chip = false;
  // Only the inputs whose rows differ from row to row are on chip (RowCacheUse mode 3); the passes
  // read the broadcast ones (ReduceGroupInfo::reread_inputs from per_row_inputs on) from memory.
  bool shared_rows_reread = false;
  // One block per row, unsplit, short (short_row) under rules with SplitRules::short_rows (a
  // GPU's): re-read from L1/L2, counted once by the traffic model, whether or not the rules allow
  // a row cache.
  bool short_rows = false;
};
// `rules`: the launcher's overrides (Options::row_split, row_cache). `launches` is 0 for no rows.
RowSplit row_split_at(const Graph& g, const FusionGroup& grp, const ReduceGroupInfo& info, const SplitRules& rules = {});

}  // namespace fusejit::ir
