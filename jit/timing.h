// The statistics of repeated runs, the same for both backends (GPU: CUDA event times; CPU: steady
// clock around the launches).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fusejit::jit {

// Timing of one plan over the repeated runs.
struct PathTiming {
  int kernels = 0;               // launches per run
  double median_ms = 0;          // median over the timed runs
  double min_ms = 0, max_ms = 0;
  int64_t bytes = 0;             // bytes one run moves (ir::group_traffic summed over the plan)
  double gbps = 0;               // bytes / median time, 1e9 bytes per second
};

// Median of the samples (mean of the middle two for an even count); 0 for none.
double median_of(std::vector<double> samples);
// Path timing from per-run times (ms) and the bytes one run moves.
PathTiming make_path_timing(int kernels, std::span<const double> times_ms, int64_t bytes);

}  // namespace fusejit::jit
