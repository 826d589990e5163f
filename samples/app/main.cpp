// samples/app: LLaMA's SwiGLU, y = silu(gate) * up, built with fusejit's builder, compiled once
// and run fused and unfused. On a GPU it uses memory from the CUDA runtime API (cudaMalloc) and a
// cudaStream_t, as an inference engine would; without one it runs on fusejit's CPU path.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <fusejit/fusejit.h>

namespace fj = fusejit;

namespace {

// Bytes one run of these kernels moves (fusejit's traffic model, KernelInfo).
int64_t bytes_of(const std::vector<fj::KernelInfo>& kernels) {
  int64_t n = 0;
  for (const fj::KernelInfo& k : kernels) n += k.read_bytes + k.write_bytes;
  return n;
}

fj::Graph build_swiglu(int64_t tokens, int64_t hidden) {
  fj::GraphBuilder b("swiglu");
  fj::DimRef T = b.dim("T", tokens);
  fj::DimRef H = b.dim("H", hidden);
  fj::Value gate = b.input("gate", fj::DType::F32, {T, H});
  fj::Value up = b.input("up", fj::DType::F32, {T, H});
  fj::Value y = b.op("silu", {gate}) * up;
  b.output("y", y);
  return b.build();
}

fj::HostTensor random_tensor(const std::vector<int64_t>& shape, unsigned seed) {
  fj::HostTensor t(fj::DType::F32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

bool check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

int run_gpu(const fj::Program& prog, const std::vector<fj::HostTensor>& inputs, int64_t n) {
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  void *gate = nullptr, *up = nullptr, *y_fused = nullptr, *y_unfused = nullptr;
  cudaStream_t stream = nullptr;
  if (!check(cudaMalloc(&gate, bytes), "cudaMalloc") || !check(cudaMalloc(&up, bytes), "cudaMalloc") ||
      !check(cudaMalloc(&y_fused, bytes), "cudaMalloc") || !check(cudaMalloc(&y_unfused, bytes), "cudaMalloc") ||
      !check(cudaStreamCreate(&stream), "cudaStreamCreate"))
    return 1;
  cudaMemcpy(gate, inputs[0].data().data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(up, inputs[1].data().data(), bytes, cudaMemcpyHostToDevice);

  const void* ins[2] = {gate, up};
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  float ms[2] = {0, 0};
  void* outs[2] = {y_fused, y_unfused};
  for (int k = 0; k < 2; ++k) {
    fj::PlanKind kind = k == 0 ? fj::PlanKind::Fused : fj::PlanKind::Unfused;
    void* out[1] = {outs[k]};
    prog.launch(ins, out, {}, stream, kind);  // warm-up (module load)
    cudaEventRecord(start, stream);
    for (int r = 0; r < 20; ++r) prog.launch(ins, out, {}, stream, kind);
    cudaEventRecord(stop, stream);
    if (!check(cudaEventSynchronize(stop), "launch")) return 1;
    cudaEventElapsedTime(&ms[k], start, stop);
    ms[k] /= 20;
  }
  std::vector<unsigned char> a(bytes), b(bytes);
  cudaMemcpy(a.data(), y_fused, bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(b.data(), y_unfused, bytes, cudaMemcpyDeviceToHost);
  bool same = std::memcmp(a.data(), b.data(), bytes) == 0;
  std::printf("GPU (%s): fused %zu kernel(s) %.3f ms, unfused %zu kernel(s) %.3f ms, speedup %.2fx, bitwise %s\n",
              prog.target().c_str(), prog.kernels(fj::PlanKind::Fused).size(), ms[0],
              prog.kernels(fj::PlanKind::Unfused).size(), ms[1], ms[1] / ms[0], same ? "identical" : "DIFFERENT");
  cudaFree(gate);
  cudaFree(up);
  cudaFree(y_fused);
  cudaFree(y_unfused);
  cudaStreamDestroy(stream);
  return same ? 0 : 1;
}

int run_cpu(const fj::Program& prog, const std::vector<fj::HostTensor>& inputs) {
  // The median of 9 timed runs after one untimed (warm caches), as `fusejit run` reports.
  double ms[2];
  std::vector<fj::HostTensor> out[2];
  for (int k = 0; k < 2; ++k) {
    const fj::PlanKind kind = k == 0 ? fj::PlanKind::Fused : fj::PlanKind::Unfused;
    out[k] = prog.run(inputs, {}, kind);
    std::vector<double> times;
    for (int r = 0; r < 9; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      out[k] = prog.run(inputs, {}, kind);
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::nth_element(times.begin(), times.begin() + 4, times.end());
    ms[k] = times[4];
  }
  bool same = out[0][0] == out[1][0];
  std::printf("CPU (no GPU found): fused %zu kernel(s) %.3f ms, unfused %zu kernel(s) %.3f ms, bitwise %s\n",
              prog.kernels(fj::PlanKind::Fused).size(), ms[0], prog.kernels(fj::PlanKind::Unfused).size(), ms[1],
              same ? "identical" : "DIFFERENT");
  std::printf("  (host CPU times measure arithmetic, not the memory traffic fusion saves: on a GPU the fused\n"
              "   kernel moves %.1fx fewer bytes; `fusejit plan` shows them)\n",
              static_cast<double>(bytes_of(prog.kernels(fj::PlanKind::Unfused))) /
                  static_cast<double>(std::max<int64_t>(1, bytes_of(prog.kernels(fj::PlanKind::Fused)))));
  return same ? 0 : 1;
}

}  // namespace

int main() {
  try {
    int devices = 0;
    bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
    // Inference-sized on a GPU (LLaMA-7B MLP: 11008 wide); small on the CPU.
    int64_t tokens = gpu ? 4096 : 64, hidden = gpu ? 11008 : 1024;
    fj::Graph graph = build_swiglu(tokens, hidden);
    fj::Options options;
    options.backend = gpu ? fj::Backend::Cuda : fj::Backend::Cpu;
    options.build_unfused = true;  // both plans are compared below: compile both now, not on first use
    if (gpu) cudaFree(nullptr);  // make the runtime's primary context current; fusejit uses it
    fj::Program prog = fj::Program::compile(graph, options);
    int64_t n = tokens * hidden;
    std::vector<fj::HostTensor> inputs = {random_tensor({tokens, hidden}, 1), random_tensor({tokens, hidden}, 2)};
    return gpu ? run_gpu(prog, inputs, n) : run_cpu(prog, inputs);
  } catch (const fj::Error& e) {
    std::fprintf(stderr, "%s\n", e.diagnostic().c_str());
    return 1;
  }
}
