// What a launch or run is given, checked against the graph before anything runs: counts, dtypes,
// shapes (binding the graph's dims from the inputs), strides, params. Messages name the tensor and
// both types: "input 'a': expected bf16[16, 4], got bf16[4, 16]". The checks allocate nothing
// unless they throw, so a warm launch stays allocation-free.
#pragma once

#include <span>
#include <vector>

#include "lib/program_impl.h"

namespace fusejit {

// The graph's input names in declaration order, comma-separated ("x, w"), for messages.
std::string input_names(const ir::Graph& g);

// Throws ir::UserError unless there is one tensor per graph input and per graph output.
void check_counts(const ir::Graph& g, size_t inputs, size_t outputs);

// Binds every graph dim from the inputs' shapes into `dims` (Graph::dims order; a dim no input
// names keeps its current value), checking each input's dtype, rank and literal sizes. T is
// TensorRef or TensorView. Throws ir::UserError naming the input (and the input that bound a dim
// to another value); its hints convert or reshape in NumPy and PyTorch for MessageStyle::Python,
// else in the C++ API.
template <class T>
void bind_dims(const ir::Graph& g, std::span<const T> inputs, std::vector<int64_t>& dims, MessageStyle style);

// The dim values `dims` names, the others at their current values, into `out`. Throws
// ir::UserError on an unknown name or a negative value.
void dims_from_values(const ir::Graph& g, const DimValues& dims, std::vector<int64_t>& out);

// The CUDA device the tensors name (TensorRef::device), -1 when none does. Throws ir::UserError
// when two name different devices, or when one names a device on the CPU backend (`cuda` false).
int tensors_device(const ir::Graph& g, std::span<const TensorRef> inputs, std::span<const TensorRef> outputs,
                   bool cuda);
// Throws ir::UserError unless every output has its graph output's dtype.
void check_output_dtypes(const ir::Graph& g, std::span<const TensorRef> outputs);
// Throws ir::UserError unless every output has the shape the launch state gives it.
void check_output_shapes(const ir::Graph& g, const jit::LaunchState& st, std::span<const jit::TensorArg> outputs);
// Throws ir::UserError unless every tensor has no strides or one stride per dim, non-negative on
// each dim of more than one element (unless the tensor has none), an
// extent of at most 2^63 - 1 bytes (jit::view_bytes; run it before anything computes with the
// extent), and data unless it has no elements.
void check_strides(const ir::Graph& g, std::span<const jit::TensorArg> inputs, std::span<const jit::TensorArg> outputs);
// Throws ir::UserError unless every tensor with elements has an address that is a multiple of its
// element size: a GPU's load or store of a misaligned element faults (CUDA_ERROR_MISALIGNED_ADDRESS,
// a sticky error that spoils the context; CUDA C++ Programming Guide, "Device Memory Accesses").
// For the CUDA backend's launches; host memory on the CPU path may be misaligned.
void check_alignment(const ir::Graph& g, std::span<const jit::TensorArg> inputs, std::span<const jit::TensorArg> outputs);
// Throws ir::UserError unless each view's data holds every element its shape and strides reach.
void check_view_data(const ir::Graph& g, std::span<const TensorView> inputs);

// The value of every graph param (slot order): the defaults for empty `params`, else resolved
// into `buf` (Params' rules; see resolve_params).
std::span<const ir::Scalar> resolve_params_fast(const Program::Impl& p, const Params& params, std::vector<ir::Scalar>& buf);

}  // namespace fusejit
