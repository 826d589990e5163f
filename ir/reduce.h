// Reductions (sum, mean, prod, amax, amin, argmax, argmin over a set of axes, optionally keeping
// them as size 1):
// the axis and dtype rules every consumer shares (builder, parser, verifier, reference evaluator,
// planner, code generator), and the reference evaluation in the fixed order of
// ir/scalar/fj_reduce.h. Semantics and sources: docs/ops.md, "Reductions".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace fusejit::ir {

// True for the reduction ops (rule Reduce in ir/ops.def).
bool is_reduction(Op op);
// True for argmax and argmin: their result is the i64 index of the element they pick, not a value
// of their operand's dtype (reduce_result_dtype).
inline bool is_arg_reduction(Op op) { return op == Op::Argmax || op == Op::Argmin; }

// The composites the builder expands into reductions and elementwise ops (GraphBuilder::
// reduce_by_name): softmax, log_softmax, logsumexp, var, std, any, all. Called like reductions in graph text.
const std::vector<std::string_view>& composite_names();
bool is_composite_name(std::string_view name);
// True for the name of a reduction op or of a composite: the calls the graph format parses as
// `name(x[, AXES][, keepdim][, correction=N])`.
bool is_reduce_name(std::string_view name);
// Whether reduction `name` takes `correction=N` (mean, var, std: PyTorch's var/std correction).
inline bool takes_correction(std::string_view name) { return name == "mean" || name == "var" || name == "std"; }

// The bit mask of the reduced axes of an operand of rank `rank` from the axes as written:
// negative axes count from the end; an empty list reduces every axis (`sum(x)`). Throws
// UserError at `loc` for an axis outside [-rank, rank) or an axis given twice (after
// normalisation: `sum(x, [1, -1])` of a rank-2 x), naming the axis and the rank.
uint64_t reduce_axes_mask(std::span<const int64_t> axes, size_t rank, Loc loc = {});
// The message of an axis out of range for a tensor of `rank` dims, the axis as written (`axis`
// may be past int64: the parser's). NumPy's rule for rank 0 (no axes).
std::string axis_out_of_range(std::string_view axis, size_t rank);

// The axes of a mask, ascending.
std::vector<int64_t> mask_axes(uint64_t mask);

// The result shape: the operand's shape without the reduced axes, or with them as literal 1s when
// `keepdim` (PyTorch's keepdim=True, NumPy's keepdims).
Shape reduced_shape(const Shape& in, uint64_t mask, bool keepdim);

// Number of elements each result element combines (the product of the reduced axes' sizes).
int64_t reduce_length(const Shape& in, uint64_t mask);

// Elements per chunk of the fixed reduction order (FJ_RED_CHUNK of ir/scalar/fj_reduce.h), and the
// number of chunks of a reduction of `n` elements.
inline constexpr int64_t kReduceChunk = 8192;
// ceil(n / d) for n >= 0, d > 0, without overflow: the planner sees row counts and lengths up to
// 2^63 - 1 (an empty tensor's, or a u8 tensor's).
inline constexpr int64_t ceil_div(int64_t n, int64_t d) { return n / d + (n % d > 0 ? 1 : 0); }
inline constexpr int64_t reduce_chunks(int64_t n) { return ceil_div(n, kReduceChunk); }
// 8-byte slots of the workspace of a row split over blocks (fj_reduce.h: the row value of each of
// `nslots` reductions per row, then their chunk values).
inline constexpr int64_t split_workspace_slots(int64_t nslots, int64_t rows, int64_t row_len) {
  return nslots * rows * (1 + reduce_chunks(row_len));
}

// The dtype a reduction computes in (its operand's, after the builder's cast), PyTorch's rules:
// sum and prod of bool or an integer dtype are i64; mean needs a float dtype (UserError at `loc`
// otherwise, as torch.mean refuses integer tensors); amax/amin/argmax/argmin keep the dtype;
// f16/bf16 operands compute in f32 (the builder casts a value result back to the operand dtype:
// one rounding at the end; f16/bf16 to f32 is exact, so argmax picks the same element).
DType reduce_compute_dtype(Op op, DType in, Loc loc = {});
// The dtype a reduction computing in `compute` returns: i64 for argmax/argmin (NumPy's intp,
// PyTorch's int64), else `compute`.
inline DType reduce_result_dtype(Op op, DType compute) { return is_arg_reduction(op) ? DType::I64 : compute; }

// Throws UserError at `loc` when an amax/amin/argmax/argmin reduces zero elements, whether or not
// the result has elements (PyTorch: "Expected reduction dim 1 to have non-zero size"; NumPy:
// "attempt to get argmax of an empty sequence"): no identity or index exists to return. `what` ("" or the node's quoted name) prefixes the message; a float operand (`in_dtype`)
// is told of initial= too.
void check_reduce_nonempty(Op op, const Shape& in, DType in_dtype, const ReduceAttr& red, const std::string& what,
                           Loc loc = {});

// The struct of ir/scalar/fj_reduce.h that combines the elements of reduction `op` ("fj_red_sum"
// for sum and mean, "fj_red_prod", "fj_red_max", "fj_red_min", "fj_red_argmax", "fj_red_argmin"):
// what generated kernels call. An arg reduction's lanes are fj_red_arg<compute type> (value, index).
const char* reduce_combiner(Op op);

// The reference value of reduction node `n` (dtype and shape from the node) applied to `in`, in
// the fixed order of ir/scalar/fj_reduce.h: every result element reduces its elements, taken in
// row-major order of the reduced axes (an argmax's index counts in that order: NumPy's flattened
// index when every axis is reduced). `in` has the node operand's dtype and shape.
Tensor eval_reduction(const Node& n, const Tensor& in);

// "sum(x, [0, 2], keepdim)" style axis text for the printer: ", [a, b]" or ", a" plus
// ", keepdim", ", correction=N" (a mean's, when not 0) and ", initial=-inf" (amax) or
// ", initial=inf" (amin) when set; "" for a full reduction without keepdim of a non-0-d operand.
std::string reduce_args_text(Op op, const ReduceAttr& red, size_t in_rank);

}  // namespace fusejit::ir
