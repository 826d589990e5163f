// Comparing two output tensors element by element: bitwise (fused vs unfused), exactly, or within
// a number of ulps (GPU vs the reference evaluator for ops whose CUDA Math API implementation is
// not correctly rounded; the per-op bounds are in docs/ops.md). The first differing element is
// reported with its index and both values in decimal and hex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ir/dtype.h"
#include "ir/graph.h"

namespace fusejit::jit {

// Tolerance passed to compare_outputs.
inline constexpr int64_t kBitwise = -1;  // every bit equal, NaN payloads and the sign of zero included
// Every bit equal, except that two NaNs match unless one of them is the all-ones poison pattern
// the GPU runner fills outputs with (so an unwritten element still fails). Fused vs unfused on the
// GPU: a strict rewrite such as x * 1 -> x keeps an input NaN's payload where the unfused multiply
// returns the canonical NaN, and NaN payloads are not part of the contract (docs/ops.md).
inline constexpr int64_t kBitwiseAnyNaN = -2;
// ulp_tolerance == 0: exact values: floats equal bit for bit, except that any NaN matches any NaN
//   (GPU and CPU NaN payloads may differ); -0.0 and +0.0 are different values.
// ulp_tolerance > 0: floats within that many units in the last place of the dtype, counted on the
//   ordered line of representable values (so +0/-0 are 0 ulp apart, the largest finite value and
//   inf 1 ulp); NaN matches only NaN; integers and bool must still be equal.

struct CompareResult {
  bool ok = true;
  int64_t mismatches = 0;       // elements outside the tolerance
  int64_t first_index = -1;     // flat (C order) index of the first one, -1 if none
  std::string expected_text;    // first mismatch: "1.5 (0x3fc00000)"
  std::string actual_text;
  uint64_t max_ulps = 0;        // largest ulp distance seen among non-NaN float pairs
  // One line: "OUTPUT: 17 of 1000 elements differ (tolerance 1 ulp); first at index 12 [0, 12]:
  // expected 1.5 (0x3fc00000), got nan (0x7fffffff)"; "" when ok.
  std::string message;
};

// Compares `count` elements of dtype `dtype` stored contiguously in `expected` and `actual` (both
// at least count * dtype_size bytes; ir::InternalError otherwise). `shape` (optional, C order)
// adds coordinates to the message; `what` names the output. `abs_tolerance` > 0 (floats, with
// ulp_tolerance > 0 only) also accepts |actual - expected| <= abs_tolerance * max(1, |expected|)
// (docs/ops.md: composite activations near cancellation). Never throws on any bit pattern.
CompareResult compare_outputs(ir::DType dtype, std::span<const std::byte> expected, std::span<const std::byte> actual,
                              int64_t count, int64_t ulp_tolerance, std::string_view what = {},
                              std::span<const int64_t> shape = {}, double abs_tolerance = 0);

// How far one op node's GPU result may lie from the reference result computed from the same
// operand values: the op's row of ir/ops.def (columns gpu and ulp_*), which docs/ops.md ("GPU vs
// reference: ulp bounds") lists and tests/test_op_table.cpp checks against it. Integer and bool
// results, and Exact/Step ops, are exact (ulps 0: NaN matches NaN).
struct OpTolerance {
  // Maximum distance in ulps of the node's dtype (f32 and f64 columns; f16/bf16: ulp_half).
  int64_t ulps = 0;
  // Composite ops only: also accept |gpu - ref| <= abs_scale * max(|x|, 1), x the op's first
  // operand: 2^-20 for f32, 2^-48 for f64, 0 otherwise (relative bounds fail near cancellation).
  double abs_scale = 0.0;
};
OpTolerance gpu_op_tolerance(ir::Op op, ir::DType dtype);

// The tolerance of one graph output on the GPU against the reference evaluator: the sum of
// gpu_op_tolerance(op, output dtype) over every Math or Composite op in the output's cone (a
// conservative bound), so ulps == 0 (exact) when the cone has only exact ops; abs_tolerance is the
// composite one when the cone has a composite op. comparable == false when an approximate value
// feeds a Step op that can turn a one-ulp change into any change (a comparison, a cast to an
// integer, floor, ...) or when the output is an integer or bool computed from approximate math:
// then only fused vs unfused (bitwise) is meaningful.
struct OutputTolerance {
  int64_t ulps = 0;
  double abs_tolerance = 0;
  bool comparable = true;
  bool exact() const { return comparable && ulps == 0 && abs_tolerance == 0; }
};
OutputTolerance gpu_output_tolerance(const ir::Graph& g, ir::NodeId output);

// One element as "decimal (0xHEX)", e.g. "-0 (0x8000)" for f16, "nan (0x7fc00000)", "-128 (0x80)".
std::string format_element(ir::DType dtype, const std::byte* element);

// Ulp distance between two non-NaN values of a float dtype given as raw bits (low bits used).
uint64_t ulp_distance(ir::DType dtype, uint64_t a_bits, uint64_t b_bits);

}  // namespace fusejit::jit
