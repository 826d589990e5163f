// Test data shared by the launch-path tests (test_launch, test_gpu_launch): deterministic random
// host tensors and an AdamW step, the in-place workload of issue 12.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <fusejit/fusejit.h>

namespace launch_data {

// Values in [lo, hi) from an LCG: the same on every machine.
inline fusejit::HostTensor random_tensor(fusejit::DType dtype, std::vector<int64_t> shape, uint32_t seed, float lo = -4,
                                         float hi = 4) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>(s >> 8) / 16777216.0f;
  }
  return fusejit::HostTensor::from_floats(dtype, std::move(shape), v);
}

// One AdamW step (decoupled weight decay) over f32[N], N = `n`: p, m and v are updated, the ones
// an optimizer writes in place.
inline std::string adamw_graph(int64_t n) {
  return "graph adamw\ndim N = " + std::to_string(n) + R"(
input p : f32[N]
input grad : f32[N] range -1:1
input m : f32[N] range -0.1:0.1
input v : f32[N] range 0:1
param lr : f32 = 0.001
param beta1 : f32 = 0.9
param beta2 : f32 = 0.999
param eps : f32 = 1e-8
param wd : f32 = 0.01
param bc1 : f32 = 0.1
param bc2 : f32 = 0.001
m_out = beta1 * m + (1 - beta1) * grad
v_out = beta2 * v + (1 - beta2) * grad * grad
p_out = p * (1 - lr * wd) - lr * (m_out / bc1) / (sqrt(v_out / bc2) + eps)
output p_out, m_out, v_out
)";
}

// AdamW's inputs: p, grad, m, v over f32[n], in their ranges.
struct AdamInputs {
  fusejit::HostTensor p, grad, m, v;
};
inline AdamInputs adam_inputs(int64_t n) {
  return {random_tensor(fusejit::DType::F32, {n}, 1), random_tensor(fusejit::DType::F32, {n}, 2, -1, 1),
          random_tensor(fusejit::DType::F32, {n}, 3, -0.1f, 0.1f), random_tensor(fusejit::DType::F32, {n}, 4, 0, 1)};
}

}  // namespace launch_data
