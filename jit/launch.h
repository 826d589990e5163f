// Launching a compiled plan, on the GPU and the CPU alike, in three parts:
//  - PlanBindings, the same for every launch: which buffer each group reads and writes (a graph
//    input, a graph output, or an intermediate), and what in-place use the plan allows;
//  - LaunchState, computed once per set of dim values: each group's iteration space, which kernel
//    variant and entry point runs it, and the static slots of its arguments (sizes, magic
//    divisors, broadcast strides: jit/kernel_abi.h's static_args);
//  - launch_plan(), per launch: pointers, params, vec_ok and the strides of a caller's strided
//    tensors written into thread-local scratch slots (no heap allocation once they have grown),
//    then one call per kernel to a KernelRunner (cuLaunchKernel or a host trampoline).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"
#include "jit/codegen.h"
#include "jit/kernel_abi.h"

namespace fusejit::jit {

// Where a group reads or writes a value during a run.
struct BufferRef {
  enum class Kind : uint8_t { Input, Output, Intermediate };
  Kind kind = Kind::Input;
  int32_t index = 0;  // graph input slot, graph output index, or PlanBindings::intermediates index
};

// The buffers of a plan's groups, computed once per plan.
struct PlanBindings {
  // Throws ir::InternalError on an output that no group of `plan` writes.
  PlanBindings(const ir::Graph& g, const ir::Plan& plan);
  std::vector<std::vector<BufferRef>> group_inputs, group_outputs;  // per group, FusionGroup order
  std::vector<ir::NodeId> intermediates;                             // plan_intermediates(g, plan)
  // An output that repeats an earlier output's value (`output a` and `output b` naming one value)
  // is copied from it after every kernel.
  struct Copy {
    int32_t output = 0;
    int32_t from_output = 0;
    std::string name, from_name;  // the outputs' names, for messages
  };
  std::vector<Copy> copies;
  std::vector<int32_t> last_reader;  // per graph input slot: the last group reading it, -1 if none
  std::vector<int32_t> writer;       // per graph output: the group writing it, -1 for a copy
  // Per graph output: 1 when it is a row value of a reduction group (ir/reduce_group.h), written
  // once per row while the row's threads may still read inputs broadcast over it: it cannot be
  // written in place over an input its own kernel reads.
  std::vector<uint8_t> row_output;
};

// One tensor of a launch: its address, and for a caller's tensor its shape and strides in elements
// (empty strides: C-contiguous). Intermediates are always C-contiguous.
struct TensorArg {
  uint64_t addr = 0;
  std::span<const int64_t> shape;
  std::span<const int64_t> strides;
};

// True when a tensor with these strides is in its canonical layout: C-contiguous, where a dim of
// size 1 may have any stride, and a tensor with no elements is canonical whatever its strides.
// `strides` empty means C-contiguous.
bool is_canonical(std::span<const int64_t> shape, std::span<const int64_t> strides);

// Number of elements past the first that a view spans (sum of (size - 1) * stride); 0 for a
// tensor of at most one element; -1 for an empty tensor. Only for views that view_bytes accepts.
int64_t view_span(std::span<const int64_t> shape, std::span<const int64_t> strides);
// Bytes from a view's first element to the end of its last, (view_span + 1) * elem_size; 0 for an
// empty tensor; -1 when the sizes, strides or bytes pass INT64_MAX (no memory holds such a view:
// the launch checks refuse it before anything else computes with its extent). Strides must be
// empty or one per dim, each >= 0.
int64_t view_bytes(std::span<const int64_t> shape, std::span<const int64_t> strides, int64_t elem_size);

// Work items per block of a reduction kernel (GroupLaunch::items).
inline constexpr int64_t kReduceItemsPerBlock = 256;
// The row length (elements) from which a launch keeping its rows on chip is a long-row launch
// (GroupLaunch::long_rows).
inline constexpr int64_t kLongRowElements = 16384;

// One group at one set of dim values.
struct GroupLaunch {
  int64_t n = 0;               // elements of the iteration space
  // Work items the launch is sized by (0: nothing is launched): n for an elementwise kernel; for a
  // reduction kernel kReduceItemsPerBlock per block it needs: one block per row, or per group of
  // rows_per_block rows (a column kernel), so a reduction over a zero-size axis still runs and
  // writes its rows. The GPU launcher turns them into that many blocks of any size.
  int64_t items = 0;
  int variant = 0;             // 0: the kernels as compiled; 1: their 64-bit-index variant
  const GeneratedKernel* kernel = nullptr;  // the kernel of that variant (owned by the caller)
  bool fast = true;            // the fast entry's layout holds; else the strided entry always runs
  bool rows_ok = false;        // the sizes allow the fast entry's vector path (vector_rows_ok)
  std::vector<uint64_t> fast_args, strided_args;  // static_args() of each entry (fast: when `fast`)
  // A reduction whose rows split over blocks (GeneratedKernel::split_reductions, ir::choose_split):
  // row_split > 1 blocks per row (per group of rows side by side); the kernel runs split_phases
  // times (odd split_phase on items * row_split, even on items) with a workspace of workspace_bytes.
  // 1: one launch, no workspace.
  int64_t row_split = 1;
  int64_t workspace_bytes = 0;
  // > 0: the kernel keeps each row's cached inputs on chip (GeneratedKernel::row_cache_sizes,
  // ir::row_cache_bytes <= LaunchRules::row_cache_limit, rows not split), and its kept values too
  // when they also fit, or only the rows that differ per row (ir::row_cache_use): its row_cache
  // argument is row_cache_mode (1, 2 or 3) and
  // every launch gets this many bytes of dynamic shared memory. 0: no row cache.
  int64_t row_cache_bytes = 0;
  int row_cache_mode = 0;
  // Rows of at least kLongRowElements kept on chip by a kernel that writes element outputs: the
  // launch takes the larger block of GpuProgram's long-row function (kReduceLongRowBlock,
  // jit/gpu_module.h).
  bool long_rows = false;
  // Mode 2 only: the bytes of the inputs' regions alone (mode 1's). A kernel with a vector path
  // reads its kept values there only (codegen: fj_rv needs fj_vector), so a launch of its strided
  // entry or with vec_ok 0 passes row_cache 1 and this much shared memory: blocks per SM are not
  // spent on regions nobody reads.
  int64_t row_cache_input_bytes = 0;
  // Whether a launch of this entry (`strided`) on this path (`vector`: vec_ok 1) keeps its values
  // on chip: row_cache 2, and the kernel reads them on that path.
  bool keeps_values(bool strided, bool vector) const {
    return row_cache_mode == 2 && (kernel->signature.vector_width <= 1 || (!strided && vector));
  }
  // The dynamic shared memory of such a launch, bytes: row_cache_bytes, or row_cache_input_bytes
  // when mode 2 is not kept (keeps_values).
  int64_t shared_bytes(bool strided, bool vector) const {
    return row_cache_mode == 2 && !keeps_values(strided, vector) ? row_cache_input_bytes : row_cache_bytes;
  }
  // Kernel launches of one run of this group: 0 (no items), 1, or split_phases (a split row).
  int launches() const { return items == 0 ? 0 : row_split > 1 ? kernel->split_phases : 1; }
};



// What one set of dim values needs. Immutable once made; shared by concurrent launches.
struct LaunchState {
  std::vector<int64_t> dims;                       // the dim values (Graph::dims order)
  std::vector<GroupLaunch> groups;                 // plan order
  std::vector<std::vector<int64_t>> input_shapes;  // per graph input: sizes at these dims
  std::vector<std::vector<int64_t>> output_shapes; // per graph output
  std::vector<int64_t> output_bytes;               // per graph output
  std::vector<int64_t> intermediate_bytes;         // per PlanBindings::intermediates entry
  int64_t bytes_moved = 0;                         // one run's traffic (ir::group_traffic with the rules)
  bool wide = false;                               // some group needs the 64-bit variant
  int kernel_launches() const;                     // kernels one run launches (GroupLaunch::launches)
};

// Overrides of the launcher's rules for reduction kernels (ir/plan.h).
using LaunchRules = ir::SplitRules;

// Where the kernels of each variant come from: kernel(variant, group). Variant 1 is asked for only
// for a group whose iteration space has >= 2^31 elements while variant 0 indexes in 32 bits; the
// provider may compile it then. The kernels must outlive every LaunchState made from them.
using KernelProvider = std::function<const GeneratedKernel&(int variant, size_t group)>;

// Computes the launch state of `plan` (made over `planned`, the same graph at the plan's dims; null
// when that is `g_at_dims` itself) for `g_at_dims`, the graph rebound to new dim values
// (ir::rebind_dims). Returns nullptr when the plan does not hold there, so the caller must plan
// again for these dims: a group whose outputs no longer share one shape (a broadcast between two
// named dims now takes another one), or a reduction group whose analysis (ir::ReduceGroupInfo:
// which values are per row, which per element) differs from the one its kernel was generated from
// (a reduced dim of 1, or a dim of 0, at one of the two).
std::shared_ptr<const LaunchState> make_launch_state(const ir::Graph& g_at_dims, const ir::Plan& plan,
                                                     const PlanBindings& bindings, const KernelProvider& kernels,
                                                     const LaunchRules& rules = {}, const ir::Graph* planned = nullptr);

// Runs one kernel entry; implemented by the GPU (jit/gpu_runner.h) and CPU (jit/cpu_runner.h)
// launchers.
class KernelRunner {
 public:
  virtual ~KernelRunner() = default;
  // `args`: one pointer per argument of the entry; valid during the call only. `vector`: the fast
  // entry runs its vector path (vec_ok = 1), so a thread-iteration covers vector_width elements.
  // `items`: the work items to size the launch by (GroupLaunch::items, or a split row's phase's).
  virtual void run(const GroupLaunch& group, size_t group_index, bool strided, bool vector, int64_t items,
                   void** args) = 0;
  // Scratch memory of at least `bytes` bytes, 16-byte aligned, that stays valid, in stream order,
  // for the kernels of this launch (a split row's chunk values); the runner owns it.
  virtual uint64_t workspace(size_t bytes) = 0;
  // dst <- src, `bytes` bytes, after every kernel (an output repeating another's value).
  virtual void copy(uint64_t dst, uint64_t src, size_t bytes) = 0;
};

// Per-thread buffers of the launch path (this file's and the library's), kept between calls so a
// warm launch allocates nothing; one thread-local lookup per launch.
struct LaunchScratch {
  std::vector<uint64_t> slots;
  std::vector<void*> ptrs;
  std::vector<uint8_t> canonical_in, canonical_out;
  std::vector<std::pair<uint64_t, uint64_t>> input_bytes;  // check_aliasing: [begin, end) per input
  std::vector<std::pair<uint64_t, uint64_t>> output_bytes;
  std::vector<int64_t> dims;                               // the library's: dims bound per launch
  std::vector<ir::Scalar> params;
  std::vector<TensorArg> inputs, outputs;
  std::vector<uint64_t> host_intermediates, device_intermediates;
  std::vector<std::byte> host_arena;
  // The scratch of the launch in progress on this thread: the innermost Lease's (level 0 when
  // none is held). Grown once, then reused: a warm launch allocates nothing.
  static LaunchScratch& of_this_thread();
  // Held by each public launch, run and measure for its duration: a launch started meanwhile on
  // the same thread (by a warning handler the outer one called while compiling for new dims) gets
  // a scratch of its own, so the outer launch's tensors and dims stay intact.
  class Lease {
   public:
    Lease();
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    LaunchScratch& scratch() const { return *scratch_; }

   private:
    LaunchScratch* scratch_;
  };
};

struct LaunchOptions {
  bool vector_path = true;     // false: vec_ok is always 0 (tests of the scalar loop)
  bool force_strided = false;  // true: every group runs its strided entry (tests of it)
  // The CUDA device the caller's tensors are on (TensorRef::device), -1 not known. launch_plan
  // ignores it; Program::launch checks it against the context it launches in.
  int device = -1;
};

// What one launch did (for tests and run statistics).
struct LaunchStats {
  int kernels = 0;          // entries run (groups with at least one element)
  int vector = 0;           // fast entries run with vec_ok = 1
  int strided = 0;          // strided entries run
  int kept = 0;             // launches whose row cache held kept values (GroupLaunch::keeps_values)
  int per_row_only = 0;     // launches whose row cache held the per-row inputs only (row_cache 3)
};

// Launches every group of the plan for `state`:
//   inputs/outputs: one per graph input/output, with the shapes of state.input_shapes /
//                   output_shapes (the caller checks them);
//   intermediates:  one address per bindings.intermediates entry;
//   params:         one value per graph param (slot order), each of the param's dtype.
// A group whose tensors are all canonical runs its fast entry (with the vector path when every
// pointer is 16-byte aligned and rows_ok), otherwise its strided entry. Throws ir::UserError when
// an output that repeats another's value is strided (it is copied as bytes).
LaunchStats launch_plan(const PlanBindings& bindings, const LaunchState& state, std::span<const TensorArg> inputs,
                        std::span<const TensorArg> outputs, std::span<const uint64_t> intermediates,
                        std::span<const ir::Scalar> params, KernelRunner& runner, const LaunchOptions& options = {},
                        LaunchScratch& scratch = LaunchScratch::of_this_thread());

// Refuses outputs whose memory overlaps an input or another output (or itself: two elements at one
// address), with one exception: an output may be exactly an input's buffer (same address, dtype,
// shape and strides over its dims of size > 1) when the plan reads that input for the last time in
// the group that writes the output or earlier (elementwise at the same index: each element is read
// before the same thread writes it). Empty tensors never overlap. `element_bytes` per input/output.
// Throws ir::UserError naming both tensors, e.g. "output 'y' overlaps input 'x' ...".
void check_aliasing(const ir::Graph& g, const PlanBindings& bindings, std::span<const TensorArg> inputs,
                    std::span<const TensorArg> outputs, LaunchScratch& scratch = LaunchScratch::of_this_thread());

}  // namespace fusejit::jit
