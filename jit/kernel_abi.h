// The parameter lists of a generated kernel's two entry points (a long-row entry, NAME_l, takes
// NAME's) and the functions that fill them.
//
// Both launchers use this: the Driver API path (cuLaunchKernel's `void** kernelParams`, one
// pointer per kernel parameter, each pointing at the argument's bytes; CUDA Driver API docs,
// "cuLaunchKernel") and the CPU path (the host trampoline reads the same array). Shapes, strides
// and params are kernel arguments, so a new dim value or param value never regenerates or
// recompiles a kernel; only the index width and, for the fast entry, a broadcast layout that
// changes do (docs/api.md, "What makes a new kernel").
//
// Every kernel has two entry points over the same element function (jit/codegen.h):
//  - NAME, the fast entry, for tensors in their canonical layout (C-contiguous; a broadcast
//    operand at its own C-contiguous strides). Parameters:
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
//      the vector width (decided per launch)
//  - NAME_s, the strided entry, for any non-negative per-tensor strides (transposed, sliced and
//    expanded views): one scalar loop over the kept iteration dims (KernelLayout::iter_dims).
//   1-4. as above
//   5. sizes of kept dims 1..K-1 (IndexT), each followed by its magic multiplier and shift in
//      32-bit kernels
//   6. for each group input, the element stride (unsigned long long) of each kept dim the input
//      has (KernelLayout::in_dims; a dim it lacks or has as a literal 1 is stride 0)
//   7. for each group output, the element stride of each kept dim
// IndexT is `unsigned int` for 32-bit kernels and `unsigned long long` for 64-bit ones. Pointers
// carry no __restrict__: an output may be the same buffer as an input (in place; every element is
// read before it is written, by the thread that writes it).
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

// The memory layout a kernel was generated for, computed from the shapes' structure: a literal
// size-1 dim is dropped (and broadcast), a named dim is kept and never broadcast against itself
// whatever its value (a named dim at 1 is then a dim of size 1: every offset along it is 0), so T = 1
// and T = 4096 give the same layout and kernel. Only where two different named dims meet (an
// input's S against the iteration space's T) does the current size decide (S = 1: broadcast).
struct KernelLayout {
  // Dims of the iteration space merged into each collapsed dim, as [first, last) ranges of
  // iter_shape dims (literal size-1 iter dims are dropped: they never change an offset). Outermost
  // first.
  std::vector<std::pair<int, int>> dim_groups;
  // Per group input (FusionGroup::inputs order): how it is addressed.
  std::vector<InputAccess> access;
  // Per group input, per collapsed dim: true if the input is broadcast along it (stride 0).
  // Only meaningful for Strided inputs.
  std::vector<std::vector<bool>> bcast;
  // The dims of the iteration space the strided entry loops over: every dim but a literal 1
  // (ascending iter_shape indices). A named dim is kept even at value 1, so the kernel stays the
  // same whatever its value.
  std::vector<int> iter_dims;
  // Per group input, per kept dim (iter_dims order): the input's own dim index that the dim maps
  // to (NumPy right alignment), or -1 when the input lacks it or has it as a literal 1 (stride 0
  // in the strided entry).
  std::vector<std::vector<int>> in_dims;
  // True when the kernel uses 64-bit index math (element count >= 2^31).
  bool index64 = false;
  // Reduction kernels (ir/reduce_group.h): the reduced iter_shape axes (bit k: axis k); 0 otherwise.
  uint64_t reduce_mask = 0;
  // Per group output, per kept dim (iter_dims order): the output's own dim index, or -1 when it
  // lacks the dim (a row output of the reduced shape along a reduced axis). Identity for an
  // elementwise kernel. Filled by compute_layout(g, group) only.
  std::vector<std::vector<int>> out_dims;
  // Per group output: 1 for a row output of a reduction kernel (one element per row: its stride
  // along the reduced axes is 0 and its own shape is iter_shape without them).
  std::vector<uint8_t> row_out;
  friend bool operator==(const KernelLayout&, const KernelLayout&) = default;
};

// True when two layouts address the inputs the same way (every field but the outputs' and the
// reduction's, which the shapes of the inputs and the iteration space do not give).
bool same_input_layout(const KernelLayout& a, const KernelLayout& b);

// The current iteration space of `group` in `g`: the shape of its reductions' operand in a
// reduction group, else the shape of its outputs (an elementwise group's outputs all have its
// iteration shape), so a plan made before ir::rebind_dims() describes the rebound graph,
// even where a broadcast now takes another named dim; group.iter_shape with its named dims at their
// current values for a group without outputs.
ir::Shape current_iter_shape(const ir::Graph& g, const ir::FusionGroup& group);
// The operand of the first reduction of `group` (whose shape is its iteration space), or
// ir::kNoNode for an elementwise group.
ir::NodeId reduction_operand(const ir::Graph& g, const ir::FusionGroup& group);

// Computes the layout of `group` from the shapes of its inputs (at their current sizes) and its
// iter_shape. `index64` is chosen from the element count (>= 2^31 -> 64-bit).
KernelLayout compute_layout(const ir::Graph& g, const ir::FusionGroup& group);
// Same from explicit shapes: `input_shapes` in FusionGroup::inputs order, each broadcastable to
// `iter_shape` (NumPy right alignment). Throws ir::InternalError if one is not.
KernelLayout compute_layout(std::span<const ir::Shape> input_shapes, const ir::Shape& iter_shape);
// True when `n` elements need 64-bit index math (n >= 2^31).
inline bool needs_index64(int64_t n) { return n >= (int64_t{1} << 31); }
// A short stable text of the layout, e.g. "r2 i32 [0,1)[1,3):C,S01,U k3", for cache keys and dumps
// (k: kept dims and, per input of the strided entry, the own dims they map to when not all).
std::string layout_fingerprint(const KernelLayout& l);

// What one kernel parameter carries.
enum class ArgKind : uint8_t {
  InputPtr, OutputPtr, Param, NumElements,
  DimSize, DimDivMul, DimDivShift, Stride, VecFlag,          // fast entry
  IterSize, IterDivMul, IterDivShift, InStride, OutStride,   // strided entry
  RowCount, RowLength,                                       // reduction kernels
  SplitPhase, RowSplit, Workspace,                           // ... whose rows may split (launch fills)
  RowCache,                                                  // ... that keep the row on chip (launch fills)
};
// "input", "output", "param", "n", "size", "size_mul", "size_shift", "stride", "vec_ok",
// "iter_size", "iter_size_mul", "iter_size_shift", "in_stride", "out_stride", "rows", "row_length",
// "split_phase", "row_split", "workspace", "row_cache": as index.json names them (docs/aot.md).
const char* arg_kind_name(ArgKind kind);

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
  // InputPtr/Stride/InStride: position in FusionGroup::inputs; OutputPtr/OutStride: in
  // FusionGroup::outputs; Param: position in FusionGroup::params; DimSize/DimDivMul/DimDivShift:
  // collapsed dim; IterSize/IterDivMul/IterDivShift: kept dim (KernelLayout::iter_dims index);
  // otherwise -1.
  int index = -1;
  // Stride: the collapsed dim; InStride/OutStride: the kept dim (iter_dims index); otherwise -1.
  int dim = -1;
  int param_slot = -1;      // Param: the graph param slot (Node::slot), index into param values
  ir::DType dtype = ir::DType::F32;  // InputPtr/OutputPtr: element dtype; Param: param dtype
  int bytes = 8;            // size of the argument in bytes (pointers 8, IndexT 4 or 8, ...)
  std::string name;         // parameter name in the generated source, e.g. "in_v3", "n"
  std::string ctype;        // C type in the generated source, e.g. "const float*"
};

// The full parameter list of one entry point of a generated kernel, in order.
struct KernelSignature {
  std::vector<ArgSlot> args;
  KernelLayout layout;
  // Elements per vector iteration (16 bytes of the widest vector-moved dtype; see
  // jit/codegen.cpp); 1 = none. Always 1 for the strided entry.
  int vector_width = 1;
  bool strided = false;  // the strided entry (NAME_s), else the fast one
  // A row reduction kernel's vector path (jit/codegen.cpp, ReduceGen::vec_width): every row starts
  // V-aligned only when the row length (the size of the innermost kept dim) is a multiple of V.
  bool reduce_rows = false;
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

// Packs the arguments of a fast entry with signature `sig` for C-contiguous tensors (tests and
// tools; launches go through jit/launch.h, which fills the same slots from static_args()).
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

// ---- Launch-time argument filling, shared by jit/launch.h and pack_args ----

// The slots of one entry point's arguments that stay the same for every launch over the same
// shapes: n, sizes and their magic numbers, the broadcast strides of the fast entry, and the
// C-contiguous strides of the strided entry (those of a tensor in its canonical layout, stride 0
// along a dim of size 1). The slots a launch fills (pointers, params, vec_ok, a caller's own
// strides) are 0. One 8-byte slot per argument, 4-byte arguments in the low bytes (little-endian),
// as cuLaunchKernel and the host trampolines read them.
//   input_shapes: current shapes of the group inputs (FusionGroup::inputs order)
//   iter_shape:   current iteration shape
// Throws ir::InternalError when a 32-bit kernel would see >= 2^31 elements or, for the fast entry,
// when the shapes give another layout than it was generated for (check layout_matches() first).
std::vector<uint64_t> static_args(const KernelSignature& sig, std::span<const ir::Shape> input_shapes,
                                  const ir::Shape& iter_shape);
// True when the fast entry of `sig` runs these shapes: compute_layout() gives the layout it was
// generated for (the index width aside: a 64-bit kernel runs any size, a 32-bit one < 2^31).
bool layout_matches(const KernelSignature& sig, std::span<const ir::Shape> input_shapes, const ir::Shape& iter_shape);
// True when the sizes allow the fast entry's vector path (vec_ok also needs aligned pointers):
// with a strided input, the innermost collapsed size must be a multiple of the vector width; in a
// row reduction kernel (KernelSignature::reduce_rows), the row length.
bool vector_rows_ok(const KernelSignature& sig, const ir::Shape& iter_shape);
// The bits of a param value in its argument slot (f16/bf16 params travel as float).
uint64_t param_arg_bits(const ir::Scalar& v, ir::DType t);

// Bytes of value `id` at the graph's current shapes: num_elements * dtype_size.
int64_t value_bytes(const ir::Graph& g, ir::NodeId id);

// The values a plan materialises that are neither graph inputs nor graph outputs (the unfused
// plan's intermediates), in ascending node id order: a runner gives each a buffer of its own.
std::vector<ir::NodeId> plan_intermediates(const ir::Graph& g, const ir::Plan& plan);

}  // namespace fusejit::jit
