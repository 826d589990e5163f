// Whether two strided views share a byte: the exact question (NumPy's `np.shares_memory`), where
// comparing the byte ranges they span (`np.may_share_memory`) answers "maybe" for views that
// interleave without touching, such as the two halves of each row (`h[:, :F]` and `h[:, F:]`)
// or the columns of a KV cache written while others are read.
#pragma once

#include <cstdint>
#include <span>

namespace fusejit::jit {

// A view of memory: byte address of element 0, shape and strides in elements (empty strides:
// C-contiguous; strides are >= 0 on dims of more than one element, as launch_check requires, and
// any on a dim of one, where no term uses them), and bytes per element.
struct ByteView {
  uint64_t addr = 0;
  std::span<const int64_t> shape;
  std::span<const int64_t> strides;
  int64_t elem_size = 1;
};

// The candidates views_share_bytes tries before it answers Unknown (each a few operations).
inline constexpr int64_t kOverlapMaxWork = 1 << 12;

enum class Sharing : uint8_t {
  None,     // no byte belongs to both views
  Some,     // at least one byte does
  Unknown,  // not decided within max_work steps (callers treat it as Some)
};

// Decides whether `a` and `b` share a byte. A byte of a view is addr + sum_d i_d * stride_d *
// elem_size + e with 0 <= i_d < shape_d and 0 <= e < elem_size, so the question is whether
//   sum_k c_k x_k = R,  0 <= x_k <= u_k  (integers)
// has a solution, with one term per dim of size > 1 of either view and per element byte (a
// bounded knapsack: NP-hard in general, as the NumPy source notes for its own solver in
// numpy/_core/src/common/mem_overlap.c). Terms whose coefficients divide and whose values leave
// no gap merge first (2s*y + s*x: one term), then a depth-first search over the terms, largest
// coefficient first: nested strides (every stride larger than what the smaller ones span, as any
// C or sliced layout has) leave at most a few candidate values per term, so such views are
// decided in a few steps each; `max_work` bounds the candidates tried. Views of no elements share
// nothing. Sizes, strides and spans must fit in int64 (view_bytes checks them before any launch).
Sharing views_share_bytes(const ByteView& a, const ByteView& b, int64_t max_work = kOverlapMaxWork);

// Whether two elements of one view share an address (NumPy's internal overlap, which decides
// whether an output may be written through the view): a nonzero x with |x_d| < shape_d and
// sum_d x_d * stride_d = 0. Its first nonzero x_k can be taken positive, so for each k this is
// the bounded knapsack above with x_k = 1 + w and x_j = y_j - (shape_j - 1) for j > k; a stride
// of 0 on a dim of size > 1 is Some at once. `elem_size` plays no part (strides are in elements).
Sharing view_overlaps_itself(const ByteView& v, int64_t max_work = kOverlapMaxWork);

}  // namespace fusejit::jit
