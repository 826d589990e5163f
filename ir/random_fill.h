// Deterministic random inputs for `fusejit run` and tests: the same seed gives the same bits on
// every machine and compiler (splitmix64 + xoshiro256**, integer-only draws, IEEE double
// arithmetic; no std:: distributions, whose output is implementation-defined).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ir/tensor.h"

namespace fusejit::ir {

// A value range. Floats: uniform in [lo, hi) drawn in f64, then rounded to the dtype by the cast
// rules (so a half dtype can produce hi itself). Integers: uniform over the integers in [lo, hi]
// (both ends included). Bool: the range is ignored; each element is true with probability 1/2.
struct FillRange {
  double lo = 0.0;
  double hi = 1.0;
};

enum class FillMode {
  Uniform,  // every element from the range
  Special,  // about half the elements are hard cases of the dtype: NaN, +-inf, -0.0, +-smallest
            // subnormal, +-smallest normal, +-largest finite, 0.5, 2.5, -2.5 for floats; min, max,
            // min+1, max-1, 0, +-1 for integers. The rest come from the range.
};

struct FillSpec {
  std::optional<FillRange> range;  // default: default_fill_range(dtype)
  FillMode mode = FillMode::Uniform;
};

// Documented defaults: floats (f16, bf16, f32, f64) [-4, 4); i8 [-100, 100]; u8 [0, 200];
// i32 and i64 [-1000, 1000]; bool ignores the range.
FillRange default_fill_range(DType t);

// A seed for one input, mixed from the run's seed and the input's name (FNV-1a, then splitmix64),
// so adding or reordering inputs does not change the others' values.
uint64_t input_seed(uint64_t run_seed, std::string_view input_name);

// Fills `t` in place (C order) from `seed`. Throws UserError when the range is invalid for the
// dtype: lo > hi, a non-finite bound, a float range wider than the f64 range, or integer bounds
// outside the dtype (e.g. u8 with lo < 0) or not whole numbers.
void random_fill(Tensor& t, uint64_t seed, const FillSpec& spec = {});

// Throws UserError when `r` is not a valid range for dtype `t` (the checks random_fill makes).
void check_fill_range(DType t, const FillRange& r);
// Parses "LO:HI" (e.g. "-1:1", "0:255", "-1e3:1e3") as given to --range; UserError otherwise.
FillRange parse_fill_range(std::string_view text);

}  // namespace fusejit::ir
