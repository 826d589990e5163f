// The parameter list of a generated kernel and the ONE function that packs its arguments.
//
// Both launchers use this: the Driver API path (cuLaunchKernel's `void** kernelParams`, one
// pointer per kernel parameter, each pointing at the argument's bytes; CUDA Driver API docs,
// "cuLaunchKernel") and the CPU path (the host trampoline reads the same array). Shapes, strides
// and params are kernel arguments, so a new dim value or param value never regenerates or
// recompiles a kernel; only a change of the layout (rank after collapsing, broadcast pattern,
// index width) does.
//
// Parameter order of every generated kernel (see jit/codegen.h):
//   1. one pointer per group input, in FusionGroup::inputs order     (const T*)
//   2. one pointer per group output, in FusionGroup::outputs order   (T*)
//   3. one value per param, in FusionGroup::params order; compute type (f16/bf16 params as float)
//   4. n: the element count of the iteration space (IndexT)
//   5. sizes of collapsed dims 1..rank-1 (IndexT), only when some input is strided; in 32-bit
//      kernels each size is followed by the magic multiplier and shift that divide by it (see
//      div_magic32)
//   6. for each strided input, the element stride of each collapsed dim it is not broadcast along
//   7. vec_ok (int), only when the kernel has a vector path: 1 when every pointer is 16-byte aligned
//      and, when some input is strided, the size of the innermost collapsed dim is a multiple of
//      the vector width (pack_args decides it per launch)
// IndexT is `unsigned int` for 32-bit kernels and `unsigned long long` for 64-bit ones.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/plan.h"

namespace fusejit::jit {

// How one input of a kernel is addressed.
enum class InputAccess : uint8_t {
  Contiguous,  // same shape as the iteration space: element i is at offset i
  Uniform,     // broadcast along every (non-size-1) dim: always offset 0 (loaded once per thread)
  Strided,     // broadcast along some dims: offset = sum(coord[d] * stride[d]) over its full dims
};

// The memory layout a kernel was generated for. Computed from the shapes only (never from sizes
// beyond "is it 1"), so it stays equal when a dim changes value without changing the broadcast
// pattern.
struct KernelLayout {
  // Dims of the iteration space merged into each collapsed dim, as [first, last) ranges of
  // iter_shape dims (size-1 iter dims are dropped: they never change an offset). Outermost first.
  std::vector<std::pair<int, int>> dim_groups;
  // Per group input (FusionGroup::inputs order): how it is addressed.
  std::vector<InputAccess> access;
  // Per group input, per collapsed dim: true if the input is broadcast along it (stride 0).
  // Only meaningful for Strided inputs.
  std::vector<std::vector<bool>> bcast;
  // True when the kernel uses 64-bit index math (element count >= 2^31).
  bool index64 = false;
  friend bool operator==(const KernelLayout&, const KernelLayout&) = default;
};

// group.iter_shape with named dims (Dim::sym >= 0) at their current Graph::dims values, so a plan
// made before ir::rebind_dims() still describes the current iteration space.
ir::Shape current_iter_shape(const ir::Graph& g, const ir::FusionGroup& group);

// Computes the layout of `group` from the shapes of its inputs (at their current sizes) and its
// iter_shape. `index64` is chosen from the element count (>= 2^31 -> 64-bit).
KernelLayout compute_layout(const ir::Graph& g, const ir::FusionGroup& group);
// Same from explicit shapes: `input_shapes` in FusionGroup::inputs order, each broadcastable to
// `iter_shape` (NumPy right alignment). Throws ir::InternalError if one is not.
KernelLayout compute_layout(std::span<const ir::Shape> input_shapes, const ir::Shape& iter_shape);
// True when `n` elements need 64-bit index math (n >= 2^31).
inline bool needs_index64(int64_t n) { return n >= (int64_t{1} << 31); }
// A short stable text of the layout, e.g. "r2 i32 in:C,S01,U", for cache keys and dumps.
std::string layout_fingerprint(const KernelLayout& l);

// What one kernel parameter carries.
enum class ArgKind : uint8_t { InputPtr, OutputPtr, Param, NumElements, DimSize, DimDivMul, DimDivShift, Stride, VecFlag };

// Division by an invariant integer with a multiply and a shift (T. Granlund and P. Montgomery,
// "Division by invariant integers using multiplication", PLDI 1994; H. Warren, Hacker's Delight,
// 2nd ed., 10-9), as PyTorch's IntDivider does: for 1 <= d < 2^31 and every x < 2^31,
//   x / d == (umulhi(x, mul) + x) >> shift     (the sum fits in 32 bits because x < 2^31).
// 32-bit kernels divide the flat index by each collapsed dim's size this way instead of with a
// division instruction sequence (~20 instructions). Throws ir::InternalError for d outside [1, 2^31).
struct DivMagic {
  uint32_t mul = 1;
  uint32_t shift = 0;
};
DivMagic div_magic32(uint64_t d);

struct ArgSlot {
  ArgKind kind = ArgKind::InputPtr;
  // InputPtr/Stride: position in FusionGroup::inputs; OutputPtr: in FusionGroup::outputs;
  // Param: position in FusionGroup::params; DimSize/DimDivMul/DimDivShift: collapsed dim;
  // otherwise -1.
  int index = -1;
  int dim = -1;             // Stride: the collapsed dim; otherwise -1
  int param_slot = -1;      // Param: the graph param slot (Node::slot), index into param values
  ir::DType dtype = ir::DType::F32;  // InputPtr/OutputPtr: element dtype; Param: param dtype
  int bytes = 8;            // size of the argument in bytes (pointers 8, IndexT 4 or 8, ...)
  std::string name;         // parameter name in the generated source, e.g. "in_v3", "n"
  std::string ctype;        // C type in the generated source, e.g. "const float* __restrict__"
};

// The full parameter list of one generated kernel, in order.
struct KernelSignature {
  std::vector<ArgSlot> args;
  KernelLayout layout;
  // Elements per vector iteration (16 bytes of the narrowest vector-moved dtype, at most 64 bytes
  // of the widest; see jit/codegen.cpp); 1 = none.
  int vector_width = 1;
};

// Grid and block size of one launch (x dimension only). grid * block must be < 2^31 so the
// 32-bit grid-stride loop cannot overflow; pack_args checks it.
struct LaunchShape {
  uint32_t grid = 1;
  uint32_t block = 1;
};

// Owns the bytes of every argument and the pointer array handed to cuLaunchKernel or to the
// host trampoline. Movable (the pointer array is rebuilt on move), not copyable.
class PackedArgs {
 public:
  PackedArgs() = default;
  PackedArgs(PackedArgs&& o) noexcept;
  PackedArgs& operator=(PackedArgs&& o) noexcept;
  PackedArgs(const PackedArgs&) = delete;
  PackedArgs& operator=(const PackedArgs&) = delete;
  // One pointer per kernel parameter, each pointing at that argument's bytes. Valid while this
  // object lives.
  void** params() { return ptrs_.data(); }
  size_t size() const { return ptrs_.size(); }
  // True when the vector path was enabled (the kernel has one, every pointer is 16-byte aligned
  // and, with a strided input, the innermost collapsed size is a multiple of the vector width).
  bool vectorized() const { return vectorized_; }

 private:
  friend PackedArgs pack_args(const KernelSignature&, std::span<const uint64_t>, std::span<const uint64_t>,
                              std::span<const ir::Scalar>, std::span<const ir::Shape>, const ir::Shape&,
                              const LaunchShape&);
  void rebuild();
  std::vector<uint64_t> storage_;  // one 8-byte slot per argument (little-endian, low bytes used)
  std::vector<void*> ptrs_;
  bool vectorized_ = false;
};

// Packs the arguments of a kernel with signature `sig`.
//   input_addrs:  device (or host) addresses of the group inputs, FusionGroup::inputs order
//   output_addrs: addresses of the group outputs, FusionGroup::outputs order
//   param_values: values of ALL graph params indexed by param slot (Graph::params order); each
//                 must have the param's dtype
//   input_shapes: current shapes of the group inputs (FusionGroup::inputs order)
//   iter_shape:   current iteration shape (FusionGroup::iter_shape with current dim sizes)
// Throws ir::InternalError when a count or dtype does not match the signature, when the current
// shapes give a different layout than the kernel was generated for (regenerate it), when a 32-bit
// kernel would see >= 2^31 elements, or when grid * block >= 2^31.
PackedArgs pack_args(const KernelSignature& sig, std::span<const uint64_t> input_addrs,
                     std::span<const uint64_t> output_addrs, std::span<const ir::Scalar> param_values,
                     std::span<const ir::Shape> input_shapes, const ir::Shape& iter_shape,
                     const LaunchShape& launch);

// Convenience: shapes taken from the graph (current sizes of group.inputs; group.iter_shape with
// named dims at their current Graph::dims values, so a plan made before rebind_dims still packs)
// and param values from their defaults unless `param_values` (indexed by slot) is non-empty.
PackedArgs pack_args(const KernelSignature& sig, const ir::Graph& g, const ir::FusionGroup& group,
                     std::span<const uint64_t> input_addrs, std::span<const uint64_t> output_addrs,
                     std::span<const ir::Scalar> param_values, const LaunchShape& launch);

// ---- Buffers of one run, shared by both launchers (jit/gpu_runner.h, jit/cpu_runner.h) ----

// Bytes of value `id` at the graph's current shapes: num_elements * dtype_size.
int64_t value_bytes(const ir::Graph& g, ir::NodeId id);

// The values a plan materialises that are neither graph inputs nor graph outputs (the unfused
// plan's intermediates), in ascending node id order: a runner gives each a buffer of its own.
std::vector<ir::NodeId> plan_intermediates(const ir::Graph& g, const ir::Plan& plan);

// Where each value of one run of a plan lives (device or host addresses: the runner's choice).
// Graph inputs are read from the caller's input buffers; graph outputs are written to the caller's
// output buffers (a value declared as several outputs, or an output that is a graph input, is
// copied there after the kernels: copies()); intermediates live in the buffers given in
// plan_intermediates() order.
class RunBuffers {
 public:
  // Throws ir::InternalError on a wrong count, or an output that no group of `plan` writes and that
  // is not a graph input.
  RunBuffers(const ir::Graph& g, const ir::Plan& plan, std::span<const uint64_t> inputs,
             std::span<const uint64_t> outputs, std::span<const ir::NodeId> intermediates,
             std::span<const uint64_t> intermediate_addrs);
  // Addresses of a group's inputs and of its outputs, in FusionGroup order.
  std::vector<uint64_t> group_inputs(const ir::FusionGroup& grp) const;
  std::vector<uint64_t> group_outputs(const ir::FusionGroup& grp) const;
  // The copies that complete a run, after every kernel: dst <- src, `bytes` bytes.
  struct Copy {
    uint64_t dst = 0, src = 0;
    int64_t bytes = 0;
  };
  const std::vector<Copy>& copies() const { return copies_; }

 private:
  const ir::Graph& g_;
  std::span<const uint64_t> inputs_;
  std::vector<uint64_t> at_;  // per node id: where a written value lives (0 = nowhere)
  std::vector<Copy> copies_;
};

}  // namespace fusejit::jit
