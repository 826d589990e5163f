// Statistics of repeated runs; see timing.h.
#include "jit/timing.h"

#include <algorithm>

namespace fusejit::jit {

double median_of(std::vector<double> s) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

PathTiming make_path_timing(int kernels, std::span<const double> times_ms, int64_t bytes) {
  PathTiming t;
  t.kernels = kernels;
  t.bytes = bytes;
  if (times_ms.empty()) return t;
  t.median_ms = median_of(std::vector<double>(times_ms.begin(), times_ms.end()));
  t.min_ms = *std::min_element(times_ms.begin(), times_ms.end());
  t.max_ms = *std::max_element(times_ms.begin(), times_ms.end());
  if (t.median_ms > 0) t.gbps = static_cast<double>(bytes) / (t.median_ms * 1e-3) / 1e9;
  return t;
}

}  // namespace fusejit::jit
