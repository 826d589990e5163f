// Deterministic random graphs and inputs for property tests (rewrites, planner, codegen, GPU).
// Same seed -> same graph and values on every machine: uses std::mt19937_64 (fully specified by
// the C++ standard) and its own range reductions, never std::*_distribution (implementation-defined).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"

namespace fusejit::testing {

struct RandomGraphOptions {
  uint64_t seed = 1;
  int num_ops = 24;          // ops to attempt (patterns count as one each)
  int max_inputs = 4;        // 1..max_inputs inputs
  int max_params = 2;        // 0..max_params params
  int max_rank = 3;          // iteration rank 0..max_rank; dims of size 1..4 (or 0: zero_dim_rate; one may be a named dim "N")
  int max_outputs = 3;       // 1..max_outputs outputs
  bool allow_half = true;    // f16/bf16 inputs and casts
  bool allow_int = true;     // integer and bool inputs
  double pattern_rate = 0.35;  // share of steps that emit a rewrite-rule pattern (x*c1*c2, x/2, ...)
  double literal_rate = 0.2;   // share of operands that are literals (special values included)
  double reduction_rate = 0.06;  // share of op steps that reduce (sum ... amin over random axes, softmax, ...)
  // Share of reduction steps that normalise a costly value by its own reduction over the innermost
  // axis, `u = f(x); u / sum(u, -1, keepdim)` or `u - amax(u, -1, keepdim)` with f a math op: the
  // epilogue then reads what a pass computed (ir::ReduceGroupInfo::kept_values). 0 draws none, so
  // the other tests' graphs stay as they were.
  double normalize_rate = 0.0;
  // Share of graphs with one axis of size 0 (a literal size or the named dim N): empty tensors,
  // and reductions over an empty axis (their identities; amax and the like are refused there and
  // drawn again). 0 draws none, as normalize_rate.
  double zero_dim_rate = 0.0;
};

// A verified graph built with ir::GraphBuilder::apply (typing and broadcasting rules apply):
// mixed dtypes, size-1 dims and rank differences, literals with special values (inf, nan, -0.0,
// integer extremes), params, several outputs, and every op of ir/ops.def (drawn from the table, so a
// new row is generated without a change here) including cast/where/clamp/compare; integer-only
// rows (bit operations, shifts) on integer operands, often with shift counts around the widths;
// reductions over random axes with or without keepdim, argmax/argmin over one axis or all, and the
// softmax/log_softmax/logsumexp composites.
ir::Graph random_graph(const RandomGraphOptions& options);

// One tensor per graph input (current dim sizes). About `special_rate` of the elements are special
// values of the dtype: NaN, +-inf, +-0.0, subnormals, the largest finite values, integer
// extremes; the rest are ordinary values (floats in [-8, 8], some random bit patterns).
std::vector<ir::Tensor> random_inputs(const ir::Graph& g, uint64_t seed, double special_rate = 0.3);
// One tensor per graph input with every element finite: uniform in the input's `range` (graph
// text) or else its dtype's default range (ir/random_fill.h). A reduction test needs them where
// random_inputs' NaN or inf would decide a row's result whatever order its elements combine in.
std::vector<ir::Tensor> finite_inputs(const ir::Graph& g, uint64_t seed);
// One value per graph param, special values included.
std::vector<ir::Scalar> random_params(const ir::Graph& g, uint64_t seed);

// Element-wise bitwise equality of two tensors, except that any two NaNs are equal (payloads are
// not part of the contract: GPU arithmetic returns a canonical NaN). On a mismatch returns false
// and describes the first differing element in *why.
bool same_bits(const ir::Tensor& a, const ir::Tensor& b, std::string* why = nullptr);

}  // namespace fusejit::testing
