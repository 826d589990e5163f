// The library's GPU path (Program::compile for the CUDA backend, launch, run, run_graph's timing
// and checks) end to end without a GPU: the kernels are really compiled by NVRTC for sm_90, the
// Driver API is the fake of tests/support/fake_driver.h, and each "launch" runs the host build of
// the same generated kernel.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>

#include <fusejit/fusejit.h>
#include <fusejit/report.h>

#include "tests/support/fake_gpu.h"
#include "tests/support/files.h"

namespace fj = fusejit;

namespace {

using fake_gpu::emulate;
using fake_gpu::FakeGpu;

// The error Program::compile throws for `g` with `o` (a test failure when it compiles).
fj::Error compile_error(const fj::Graph& g, const fj::Options& o) {
  try {
    fj::Program::compile(g, o);
  } catch (const fj::Error& e) {
    return e;
  }
  FAIL("expected Program::compile to throw");
  return fj::Error(fj::ErrorKind::Internal, "unreachable");
}

std::string sample(const char* name) { return fusejit::testing::sample_path(name); }

// n deterministic f32 values ((i * 7919) % 1000) / div - off: spread, not tidy.
std::vector<float> patterned(size_t n, float div, float off) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 7919) % 1000) / div - off;
  return v;
}

// The CPU backend's outputs of `text` for its one f32 input of `shape` holding `v`: the bits a
// CUDA launch on the fake driver must give.
std::vector<fj::HostTensor> cpu_outputs(const std::string& text, std::vector<int64_t> shape, const std::vector<float>& v) {
  fj::Options o;
  o.backend = fj::Backend::Cpu;
  return fj::Program::compile(fj::Graph::parse(text), o).run({fj::HostTensor::from_floats(fj::DType::F32, shape, v)});
}

// `text` (one f32 input x, one f32 output) compiled for the fake GPU with `o`.
fj::Program compile_cuda(const std::string& text, fj::Options o) {
  o.backend = fj::Backend::Cuda;
  return fj::Program::compile(fj::Graph::parse(text), o);
}

// Launches `p` once on `vx` (its kernels emulated) and returns the output; the launch is
// fake_cuda::st().launches[0].
std::vector<float> launch_once(const fj::Program& p, const std::vector<float>& vx) {
  auto keep = emulate(p);
  std::vector<float> y(vx.size());
  const void* ins[1] = {vx.data()};
  void* outs[1] = {y.data()};
  fake_cuda::st().keep_launches = true;
  fake_cuda::st().launches.clear();
  p.launch(ins, outs);
  fake_cuda::st().keep_launches = false;
  return y;
}

}  // namespace

TEST_CASE("run_graph on the CUDA backend: fused vs unfused, per-op check, timing fields") {
  FakeGpu gpu;
  struct Case {
    const char* file;
    fj::DimValues dims;
    std::vector<std::pair<std::string, std::pair<double, double>>> ranges;
  } cases[] = {
      {"x2x3.txt", {{"N", 4099}}, {}},
      {"gpt2_gelu_tanh.txt", {{"T", 3}, {"F", 67}}, {}},
      {"adam_step.txt", {{"N", 1000}}, {{"v", {0.0, 1.0}}}},
      {"bias_gelu.txt", {{"T", 5}, {"F", 33}}, {}},
      {"llama_swiglu.txt", {{"T", 2}, {"F", 40}}, {}},
      {"nchw_normalize.txt", {{"N", 2}, {"H", 5}, {"W", 7}}, {}},
      {"int8_quant.txt", {{"T", 4}, {"F", 16}}, {}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.file);
    fj::Graph g = fj::Graph::load(sample(c.file), c.dims);
    fj::Options o;
    o.backend = fj::Backend::Cuda;
    fj::Program p = fj::Program::compile(g, o);
    CHECK(p.backend() == fj::Backend::Cuda);
    CHECK(p.target() == "sm_90 (CUBIN)");
    auto keep = emulate(p);
    fj::RunOptions ro;
    ro.options = o;
    ro.warmup = 1;
    ro.repeats = 3;
    ro.special_values = true;
    ro.input_ranges = c.ranges;
    fj::RunReport r = fj::run_graph(g, ro);
    CHECK(r.backend == "cuda");
    CHECK(r.device.find("Fake H200") != std::string::npos);
    REQUIRE(r.checks.size() == 3);
    for (const auto& chk : r.checks) {
      CAPTURE(chk.what);
      CAPTURE(chk.detail);
      CHECK(chk.ok);
    }
    // The per-op check saw every op: the unfused run's intermediates came back from the device.
    const std::string ops = std::to_string(p.kernels(fj::PlanKind::Unfused).size()) + " ops within";
    CHECK(r.checks[1].detail.rfind(ops, 0) == 0);
    CHECK(r.fused.kernels == static_cast<int>(p.kernels(fj::PlanKind::Fused).size()));
    CHECK(r.fused.time_ms > 0);
    CHECK(r.copy_gbps > 0);
    CHECK(r.to_json().find("\"pct_of_copy\"") != std::string::npos);
  }
  CHECK(fake_cuda::st().live.empty());  // every device buffer freed
}

TEST_CASE("Program::run and launch on the CUDA backend") {
  FakeGpu gpu;
  fj::GraphBuilder b("axpy");
  fj::Value x = b.input("x", fj::DType::F32, {64});
  fj::Value y = b.input("y", fj::DType::F32, {64});
  fj::Value a = b.param("a", fj::DType::F32, 2.0);
  b.output("z", a * x + y);
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  fj::Program p = fj::Program::compile(b.build(), o);
  auto keep = emulate(p);
  std::vector<float> vx(64), vy(64, 0.5f);
  for (int i = 0; i < 64; ++i) vx[static_cast<size_t>(i)] = static_cast<float>(i);
  const fj::HostTensor tx = fj::HostTensor::from_floats(fj::DType::F32, {64}, vx);
  const fj::HostTensor ty = fj::HostTensor::from_floats(fj::DType::F32, {64}, vy);
  auto out = p.run({tx, ty}, {3.0});
  CHECK(out[0].to_floats()[5] == 15.5f);
  CHECK(p.run({tx, ty}, {{"a", 3.0}}, fj::PlanKind::Unfused)[0] == out[0]);

  // Other dims from the input shapes alone, on the GPU path too.
  fj::GraphBuilder db("dims");
  fj::DimRef N = db.dim("N", 64);
  db.output("y", db.input("x", fj::DType::F32, {N}) * 2);
  fj::Program dp = fj::Program::compile(db.build(), o);
  auto dkeep = emulate(dp);
  const std::vector<float> five = {1, 2, 3, 4, 5};
  const fj::HostTensor y5 = dp.run({fj::HostTensor::from_floats(fj::DType::F32, {5}, five)})[0];
  CHECK(y5.shape() == std::vector<int64_t>{5});
  CHECK(y5.to_floats() == std::vector<float>{2, 4, 6, 8, 10});

  // launch: caller-owned "device" pointers (host memory under the fake driver).
  std::vector<float> hx(64, 1.0f), hy(64, 2.0f), hz(64, 0.0f);
  const void* ins[2] = {hx.data(), hy.data()};
  void* outs[1] = {hz.data()};
  p.launch(ins, outs, {3.0}, nullptr);
  CHECK(hz[7] == 5.0f);
  p.launch(ins, outs, {{"a", 4.0}}, nullptr);  // params by name
  CHECK(hz[7] == 6.0f);
  p.launch(ins, outs);  // the default, a = 2
  CHECK(hz[7] == 4.0f);
  // The output may be an input's own buffer (in place: z = 3x + y written over x)...
  void* in_place[1] = {hx.data()};
  p.launch(ins, in_place, {3.0}, nullptr);
  CHECK(hx[7] == 5.0f);
  // ... but an output overlapping an input any other way is refused as the caller's mistake.
  void* bad[1] = {hx.data() + 1};
  try {
    p.launch(ins, bad, {3.0}, nullptr);
    FAIL("expected an error");
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK(std::string(e.what()).find("output 'z'") != std::string::npos);
    CHECK(std::string(e.what()).find("overlaps input 'x'") != std::string::npos);
  }
  // A wrong pointer count.
  CHECK_THROWS_AS(p.launch(std::span<const void* const>(ins, 1), outs, {3.0}, nullptr), fj::Error);
  // An f32 element at an address that is no multiple of 4 faults on a GPU: refused with the address.
  std::vector<char> raw(64 * 4 + 8);
  const void* odd[2] = {raw.data() + 1, hy.data()};
  CHECK_THROWS_WITH_AS(p.launch(odd, outs, {3.0}, nullptr), doctest::Contains("input 'x': its data pointer 0x"), fj::Error);
  CHECK_THROWS_WITH_AS(p.launch(odd, outs, {3.0}, nullptr),
                       doctest::Contains("is not a multiple of the 4-byte element size of f32: a GPU faults"), fj::Error);
  void* odd_out[1] = {raw.data() + 2};
  const int64_t shape64[1] = {64};
  const fj::TensorRef rx(hx.data(), fj::DType::F32, shape64), ry(hy.data(), fj::DType::F32, shape64);
  const fj::TensorRef rz(static_cast<void*>(raw.data() + 2), fj::DType::F32, shape64);
  CHECK_THROWS_WITH_AS(p.launch({rx, ry}, {rz}), doctest::Contains("output 'z': its data pointer"), fj::Error);
  CHECK_THROWS_AS(p.launch(ins, odd_out, {3.0}, nullptr), fj::Error);
}

TEST_CASE("TensorRef::device: tensors naming another GPU than the launch's, or two GPUs, are refused") {
  FakeGpu gpu;  // one device, ordinal 0; its context is current on no thread
  fj::GraphBuilder b("axpy");
  fj::Value x = b.input("x", fj::DType::F32, {64});
  fj::Value y = b.input("y", fj::DType::F32, {64});
  b.output("z", x * 2 + y);
  const fj::Graph g = b.build();
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  fj::Program p = fj::Program::compile(g, o);
  auto keep = emulate(p);
  std::vector<float> hx(64, 1.0f), hy(64, 2.0f), hz(64, 0.0f);
  const int64_t shape[1] = {64};
  fj::TensorRef rx(hx.data(), fj::DType::F32, shape), ry(hy.data(), fj::DType::F32, shape);
  fj::TensorRef rz(hz.data(), fj::DType::F32, shape);
  rx.device = 0;  // the launch's own device: runs
  rz.device = 0;
  p.launch({rx, ry}, {rz});
  CHECK(hz[5] == 4.0f);
  rz.device = 1;  // the output on another GPU than an input
  CHECK_THROWS_WITH_AS(p.launch({rx, ry}, {rz}),
                       doctest::Contains("output 'z' is on CUDA device 1, input 'x' on device 0: one launch runs on one GPU"),
                       fj::Error);
  rx.device = 1;  // all on device 1, the kernels on device 0 (an illegal address on a real GPU)
  hz.assign(64, 0.0f);
  CHECK_THROWS_WITH_AS(p.launch({rx, ry}, {rz}),
                       doctest::Contains("the tensors are on CUDA device 1, but the kernels would run on the program's device 0"),
                       fj::Error);
  CHECK(hz[5] == 0.0f);  // nothing ran
  // The same on a program's first launch (no module loaded yet): refused before loading.
  const fj::Program fresh = fj::Program::compile(g, o);
  auto keep_fresh = emulate(fresh);
  CHECK_THROWS_WITH_AS(fresh.launch({rx, ry}, {rz}), doctest::Contains("the tensors are on CUDA device 1"), fj::Error);
  // A non-zero Options::device while the caller's context is on another device (fusejit uses
  // that context as it is): a warning says so at compile.
  std::vector<std::string> warnings;
  fj::set_warning_handler([&](std::string_view w) { warnings.emplace_back(w); });
  fake_cuda::ctx_push(fake_cuda::primary());  // device 0's, as the CUDA runtime leaves it
  fj::Options on1 = o;
  on1.device = 1;
  (void)fj::Program::compile(g, on1);
  (void)fj::Program::compile(g, o);  // device 0, the default: no warning
  fusejit::jit::cu::Context popped = nullptr;
  fake_cuda::ctx_pop(&popped);
  fj::set_warning_handler({});
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("Options::device 1: this thread's current CUDA context is on device 0") != std::string::npos);
  // A CPU program given device memory.
  fj::Options cpu;
  cpu.backend = fj::Backend::Cpu;
  fj::Program pc = fj::Program::compile(g, cpu);
  rx.device = -1;
  CHECK_THROWS_WITH_AS(pc.launch({rx, ry}, {rz}),
                       doctest::Contains("output 'z' is on CUDA device 1, but this program runs on the CPU"), fj::Error);
  rz.device = -1;
  pc.launch({rx, ry}, {rz});
  CHECK(hz[5] == 4.0f);
}

TEST_CASE("a whole-tensor reduction on the CUDA backend: two launches, a stream-ordered workspace, the CPU's bits") {
  FakeGpu gpu;
  bool pools = true;
  SUBCASE("memory pools") {}
  SUBCASE("a device without memory pools (some virtual GPUs)") { pools = false; }
  fake_cuda::st().memory_pools = pools ? 1 : 0;
  const std::string text = "graph total\ninput x : f32[300000]\ns = sum(x * x)\nm = amax(x)\noutput s, m\n";
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  fj::Program p = fj::Program::compile(fj::Graph::parse(text), o);
  auto keep = emulate(p);
  const std::vector<float> vx = patterned(300000, 997.0f, 0.4f);
  const fj::HostTensor x = fj::HostTensor::from_floats(fj::DType::F32, {300000}, vx);
  const std::vector<fj::HostTensor> want = cpu_outputs(text, {300000}, vx);

  float s = 0, m = 0;
  const void* ins[1] = {vx.data()};
  void* outs[2] = {&s, &m};
  fake_cuda::st().calls.reserve(64);
  fake_cuda::st().record = true;
  p.launch(ins, outs);
  fake_cuda::st().record = false;
  auto count = [](const char* name) {
    return std::count_if(fake_cuda::st().calls.begin(), fake_cuda::st().calls.end(),
                         [&](const char* c) { return std::strcmp(c, name) == 0; });
  };
  CHECK(count("cuLaunchKernel") == 2);  // 37 chunks in 9 parts, then their tree
  CHECK(count("cuMemAllocAsync") == (pools ? 1 : 0));
  CHECK(count("cuMemFreeAsync") == (pools ? 1 : 0));
  // Without pools: cuMemAlloc, and cuMemFree once the stream has run the kernels.
  CHECK(count("cuMemAlloc") == (pools ? 0 : 1));
  CHECK(count("cuMemFree") == (pools ? 0 : 1));
  CHECK(count("cuStreamSynchronize") == (pools ? 0 : 1));
  CHECK(fake_cuda::st().live.empty());
  CHECK(std::memcmp(&s, want[0].data().data(), 4) == 0);
  CHECK(std::memcmp(&m, want[1].data().data(), 4) == 0);
  CHECK(p.run({x})[0] == want[0]);
  CHECK(p.run({x}, {}, fj::PlanKind::Unfused)[0] == want[0]);
}

TEST_CASE("graphs that differ only in a reduction's axes or correction get their own kernels in one process") {
  // The in-memory cache finds a fused group by its structure before generating code: it once
  // left out a reduction's axes and correction, and sum(x, 1) ran sum(x, 0)'s kernel.
  FakeGpu gpu;
  const std::vector<float> vx = patterned(64, 37.0f, 9.0f);
  for (const char* red : {"sum(x, 0)", "sum(x, 1)", "var(x, 1, correction=0)", "var(x, 1, correction=3)"}) {
    CAPTURE(red);
    const std::string text = std::string("graph sq\ninput x : f32[8, 8]\nr = ") + red + "\noutput r\n";
    fj::Options o;
    o.backend = fj::Backend::Cuda;
    const fj::Program p = fj::Program::compile(fj::Graph::parse(text), o);
    auto keep = emulate(p);
    const fj::HostTensor want = cpu_outputs(text, {8, 8}, vx)[0];
    std::vector<float> r(8);
    const void* ins[1] = {vx.data()};
    void* outs[1] = {r.data()};
    p.launch(ins, outs);
    CHECK(std::memcmp(r.data(), want.data().data(), 32) == 0);
  }
}

TEST_CASE("a fused plan of several kernels compiles them at once; the kernels keep the plan's order and the CPU's bits") {
  FakeGpu gpu;
  // Three reduction kernels (over rows, columns, rows again), each its own NVRTC program: they
  // compile on threads of their own (GpuBuildOptions::for_each), and with the unfused program.
  const std::string text =
      "graph three\ninput x : f32[64, 256]\ny = softmax(x, -1)\nz = softmax(y, 0)\nw = z * 2.0 + x\n"
      "v = sum(w * w, -1, keepdim)\nout = w / v\noutput out\n";
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  o.cache_dir = (std::filesystem::path(FUSEJIT_BINARY_DIR) / "test-fake-gpu-three").string();
  std::filesystem::remove_all(o.cache_dir);  // a cold cache: every kernel compiled here
  fj::Program p = fj::Program::compile(fj::Graph::parse(text), o);
  auto keep = emulate(p);
  const std::vector<fj::KernelInfo> ks = p.kernels(fj::PlanKind::Fused);
  REQUIRE(ks.size() == 3);
  const std::string plan = fj::plan_graph(fj::Graph::parse(text), o).text;
  size_t at = 0;
  for (const fj::KernelInfo& k : ks) {  // the plan's kernel 0, 1, 2 in that order
    CAPTURE(k.name);
    CHECK(k.cache == fj::CacheOutcome::Compiled);
    const size_t found = plan.find(k.name, at);
    REQUIRE(found != std::string::npos);
    at = found;
  }
  const std::vector<float> vx = patterned(64 * 256, 97.0f, 4.0f);
  const fj::HostTensor x = fj::HostTensor::from_floats(fj::DType::F32, {64, 256}, vx);
  const std::vector<fj::HostTensor> want = cpu_outputs(text, {64, 256}, vx);
  CHECK(p.run({x})[0] == want[0]);
  CHECK(p.run({x}, {}, fj::PlanKind::Unfused)[0] == want[0]);
  std::filesystem::remove_all(o.cache_dir);
}

TEST_CASE("-DFJ_RED_MIN_BLOCKS bounds the row entries (__launch_bounds__): NVRTC compiles them, the CPU's bits") {
  FakeGpu gpu;
  const std::string text = "graph sm\ninput x : f32[16, 4096]\ny = softmax(x, -1)\noutput y\n";
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  o.nvrtc_options = {"-DFJ_RED_MIN_BLOCKS=6"};
  fj::Program p = fj::Program::compile(fj::Graph::parse(text), o);
  auto keep = emulate(p);
  const std::vector<fj::KernelInfo> ks = p.kernels(fj::PlanKind::Fused);
  REQUIRE(ks.size() == 1);
  CHECK(ks[0].source.find("extern \"C\" __global__ void FJ_RED_ROW_BOUNDS " + ks[0].name + "(") != std::string::npos);
  CHECK(ks[0].source.find("extern \"C\" __global__ void " + ks[0].name + "_l(") != std::string::npos);  // 1,024 threads
  const std::vector<float> vx = patterned(16 * 4096, 97.0f, 4.0f);
  const fj::HostTensor x = fj::HostTensor::from_floats(fj::DType::F32, {16, 4096}, vx);
  CHECK(p.run({x})[0] == cpu_outputs(text, {16, 4096}, vx)[0]);
}

TEST_CASE("a column reduction with few long columns on the CUDA backend: split in parts, the CPU's bits") {
  FakeGpu gpu;
  const std::string text = "graph cols\ninput x : f32[100000, 3]\ns = sum(x, 0)\noutput s\n";
  const std::vector<float> vx = patterned(300000, 997.0f, 0.4f);
  const std::vector<fj::HostTensor> want = cpu_outputs(text, {100000, 3}, vx);
  fake_cuda::st().sm_count = 132;  // an H200's SMs: the grid is not capped below 13 blocks
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  fj::Program p = fj::Program::compile(fj::Graph::parse(text), o);
  auto keep = emulate(p);
  float s[3] = {};
  const void* ins[1] = {vx.data()};
  void* outs[1] = {s};
  fake_cuda::st().keep_launches = true;
  fake_cuda::st().launches.clear();
  p.launch(ins, outs);
  fake_cuda::st().keep_launches = false;
  REQUIRE(fake_cuda::st().launches.size() == 2);  // 13 chunks in 13 parts, then their tree
  CHECK(fake_cuda::st().launches[0].grid == 13);  // one group of 3 columns x 13 parts
  CHECK(fake_cuda::st().launches[1].grid == 1);
  // A column kernel's rows share the block's threads: the occupancy API's 768, not capped at 256,
  // and the grid is still one block per group and part.
  CHECK(fake_cuda::st().launches[0].block == 768);
  CHECK(std::memcmp(s, want[0].data().data(), sizeof s) == 0);
}

TEST_CASE("the row on chip on the CUDA backend: dynamic shared memory per launch, the CPU's bits either way") {
  FakeGpu gpu;
  // LayerNorm over rows of 3000 f32: x is read by 3 passes, so its row (12,000 B) stays on chip.
  // 2 SMs of 64 KiB, 8 blocks each by threads; a block takes 2,048 B of lane arrays and the
  // 12,000 B row cache: 4 fit an SM (the grid cap is queried at 12 KiB, GpuFunction::grid_cap).
  fake_cuda::st().sm_count = 2;
  fake_cuda::st().occ_blocks_per_sm = 8;
  fake_cuda::st().shared_per_sm = 64 * 1024;
  const std::string text = "graph ln\ninput x : f32[20, 3000]\nm = mean(x, -1, keepdim)\nd = x - m\n"
                           "v = mean(d * d, -1, keepdim)\ny = d * rsqrt(v + 1e-5)\noutput y\n";
  const std::vector<float> vx = patterned(60000, 97.0f, 5.0f);
  const std::vector<fj::HostTensor> want = cpu_outputs(text, {20, 3000}, vx);
  for (bool cache : {true, false}) {
    CAPTURE(cache);
    fj::Options o;
    o.row_cache = cache;
    const std::vector<float> y = launch_once(compile_cuda(text, o), vx);
    REQUIRE(fake_cuda::st().launches.size() == 1);
    CHECK(fake_cuda::st().launches[0].shared_bytes == (cache ? 12000u : 0u));
    CHECK(fake_cuda::st().launches[0].grid == (cache ? 8u : 16u));  // 20 rows over the resident blocks
    // The occupancy API would give 768 threads; a reduction kernel asks for at most 256
    // (jit::kReduceMaxBlock: its passes load with one thread per lane), its fast entry with a
    // vector path of V = 4 f32 lanes a thread at most 64 when its passes read memory (the threads
    // they keep busy), 256 with the row on chip (all copy the row in; a pass takes a lane each).
    CHECK(fake_cuda::st().occ_block == 768);
    CHECK(fake_cuda::st().launches[0].block == (cache ? 256u : 64u));
    CHECK(std::memcmp(y.data(), want[0].data().data(), y.size() * 4) == 0);
  }
}

TEST_CASE("a mask broadcast over the rows: the scores' rows on chip, the mask re-read from memory, the CPU's bits") {
  FakeGpu gpu;
  // Masked softmax over rows of 16,384 f32 on the fake GPU (99 KiB opt-in: an 87 KiB row cache):
  // scores and mask would take 128 KiB, the scores alone take 64 KiB (row cache mode 3).
  const std::string text = "graph msm\ninput s : f32[4, 16384]\ninput mask : f32[16384]\ny = softmax(s + mask, -1)\n"
                           "output y\n";
  const std::vector<float> vs = patterned(4 * 16384, 97.0f, 5.0f), vm = patterned(16384, 31.0f, 16.0f);
  fj::Options cpu;
  cpu.backend = fj::Backend::Cpu;
  const std::vector<fj::HostTensor> want = fj::Program::compile(fj::Graph::parse(text), cpu)
      .run({fj::HostTensor::from_floats(fj::DType::F32, {4, 16384}, vs), fj::HostTensor::from_floats(fj::DType::F32, {16384}, vm)});
  for (int64_t limit : {int64_t{0}, int64_t{60000}}) {  // the GPU's limit; one the scores do not fit: nothing on chip
    CAPTURE(limit);
    fj::Options o;
    o.row_cache_limit = limit;
    const fj::Program p = compile_cuda(text, o);
    auto keep = emulate(p);
    std::vector<float> y(vs.size());
    const void* ins[2] = {vs.data(), vm.data()};
    void* outs[1] = {y.data()};
    fake_cuda::st().keep_launches = true;
    fake_cuda::st().launches.clear();
    p.launch(ins, outs);
    fake_cuda::st().keep_launches = false;
    REQUIRE(fake_cuda::st().launches.size() == 1);
    CHECK(fake_cuda::st().launches[0].shared_bytes == (limit == 0 ? 65536u : 0u));
    CHECK(std::memcmp(y.data(), want[0].data().data(), y.size() * 4) == 0);
    CHECK(p.plan_text().find(limit == 0 ? "(65536 B of shared memory per block for s) but for mask" : "each reading s, mask from memory") !=
          std::string::npos);
  }
}

TEST_CASE("short rows on a GPU are re-read from memory, not kept on chip, with the same bits") {
  // Rows of 2,048 f32 (8 KiB, ir::kShortRowElements): no row cache on a GPU; every pass reads the
  // row (L1/L2 serve the re-reads), with the fast entry's block of 64 threads. 2,049 stay on chip.
  for (int64_t len : {int64_t{2048}, int64_t{2049}}) {
    CAPTURE(len);
    FakeGpu gpu;
    const std::string text = "graph sm\ninput x : f32[6, " + std::to_string(len) + "]\ny = softmax(x, -1)\noutput y\n";
    const std::vector<float> vx = patterned(static_cast<size_t>(6 * len), 97.0f, 5.0f);
    const std::vector<fj::HostTensor> want = cpu_outputs(text, {6, len}, vx);
    const std::vector<float> y = launch_once(compile_cuda(text, {}), vx);
    REQUIRE(fake_cuda::st().launches.size() == 1);
    CHECK((fake_cuda::st().launches[0].shared_bytes == 0) == (len == 2048));
    CHECK(fake_cuda::st().launches[0].block == (len == 2048 ? 64u : 256u));
    CHECK(std::memcmp(y.data(), want[0].data().data(), y.size() * 4) == 0);
  }
}

TEST_CASE("a 48 KiB row cache launches: the kernel opts in to dynamic shared memory beyond the 48 KiB default") {
  FakeGpu gpu;
  // Softmax over rows of 12,288 f32: a 49,152 B row cache on top of the lane arrays' static shared
  // memory, over the driver's default 48 KiB per block unless the function opted in.
  const std::string text = "graph sm\ninput x : f32[2, 12288]\ny = softmax(x, -1)\noutput y\n";
  const std::vector<float> vx = patterned(2 * 12288, 97.0f, 5.0f);
  const fj::Program p = compile_cuda(text, {});
  std::vector<float> y = launch_once(p, vx);
  REQUIRE(fake_cuda::st().launches.size() == 1);
  CHECK(fake_cuda::st().launches[0].shared_bytes == 49152u);
  // The fast entry of a kernel whose row stays on chip opts in to the device's row cache limit:
  // its opt-in maximum (the fake's 99 KiB) less kRowCacheStaticReserve (12 KiB).
  CHECK(fake_cuda::st().max_dynamic_shared[p.kernels(fj::PlanKind::Fused)[0].name] == 87 * 1024);
  const std::vector<fj::HostTensor> want = cpu_outputs(text, {2, 12288}, vx);
  CHECK(std::memcmp(y.data(), want[0].data().data(), y.size() * 4) == 0);
  // Without the opt-in the driver refuses the launch (the failure this guards against).
  fake_cuda::st().max_dynamic_shared.clear();
  CHECK_THROWS_AS(launch_once(p, vx), fj::Error);
}

TEST_CASE("the row cache limit follows the GPU's opt-in shared memory; Options::row_cache_limit lowers it") {
  // Softmax over rows of 32,768 f32: a 131,072 B row. It stays on chip on a GPU whose blocks may
  // opt in to 227 KiB (sm_90: 215 KiB limit), not on one of 99 KiB (sm_86/89: 87 KiB), nor under a
  // row_cache_limit of 48 KiB; the same bits every way.
  const std::string text = "graph sm\ninput x : f32[2, 32768]\ny = softmax(x, -1)\noutput y\n";
  const std::vector<float> vx = patterned(2 * 32768, 97.0f, 5.0f);
  const std::vector<fj::HostTensor> want = cpu_outputs(text, {2, 32768}, vx);
  struct Case {
    unsigned optin;
    int64_t limit;
    unsigned shared;
  };
  for (const Case c : {Case{227 * 1024, 0, 131072}, Case{99 * 1024, 0, 0}, Case{227 * 1024, 49152, 0},
                       Case{227 * 1024, 131072, 131072}, Case{227 * 1024, 131071, 0}, Case{99 * 1024, 1 << 30, 0}}) {
    CAPTURE(c.optin);
    CAPTURE(c.limit);
    FakeGpu gpu;
    fake_cuda::st().shared_optin = c.optin;
    fj::Options o;
    o.row_cache_limit = c.limit;
    const std::vector<float> y = launch_once(compile_cuda(text, o), vx);
    REQUIRE(fake_cuda::st().launches.size() == 1);
    CHECK(fake_cuda::st().launches[0].shared_bytes == c.shared);
    // Rows of 32,768 on chip take the long-row block (jit::kReduceLongRowBlock, 1024: the fake's
    // occupancy API gives 768 under it); re-read from memory, the fast entry's 64 (as above).
    CHECK(fake_cuda::st().launches[0].block == (c.shared ? 768u : 64u));
    CHECK(std::memcmp(y.data(), want[0].data().data(), y.size() * 4) == 0);
  }
  {  // A kernel whose static shared memory is over the 12 KiB reserve: its functions opt in to the
     // room left (99 KiB - 20 KiB), and a row cache the plan allowed past that is an error naming
     // the numbers (not the driver's CUDA_ERROR_INVALID_VALUE); a lower limit runs.
    const std::string t2 = "graph sm\ninput x : f32[2, 20480]\ny = softmax(x, -1)\noutput y\n";
    const std::vector<float> v2 = patterned(2 * 20480, 97.0f, 5.0f);
    const std::vector<fj::HostTensor> want2 = cpu_outputs(t2, {2, 20480}, v2);
    for (int64_t limit : {int64_t{0}, int64_t{79} * 1024}) {
      CAPTURE(limit);
      FakeGpu gpu;
      fake_cuda::st().static_shared = 20480;
      fj::Options o;
      o.row_cache_limit = limit;
      const fj::Program p = compile_cuda(t2, o);
      if (limit == 0) {
        CHECK_THROWS_WITH(launch_once(p, v2), doctest::Contains("its 81920 B row cache is over the 80896 B"));
        continue;
      }
      const std::vector<float> y = launch_once(p, v2);
      REQUIRE(fake_cuda::st().launches.size() == 1);
      CHECK(fake_cuda::st().launches[0].shared_bytes == 0u);
      CHECK(fake_cuda::st().max_dynamic_shared[p.kernels(fj::PlanKind::Fused)[0].name] == 79 * 1024);
      CHECK(std::memcmp(y.data(), want2[0].data().data(), y.size() * 4) == 0);
    }
  }
  FakeGpu gpu;
  {  // run_graph's plan line gives the limit that applies: a larger one is capped by the GPU's
    auto sm = fj::Graph::parse(text);
    fj::RunOptions ro;
    ro.options.backend = fj::Backend::Cuda;
    ro.options.row_cache_limit = 1 << 30;
    ro.warmup = 0;
    ro.repeats = 1;
    fj::Program p = fj::Program::compile(sm, ro.options);
    auto keep = emulate(p);
    const fj::RunReport r = fj::run_graph(sm, ro);
    CHECK_MESSAGE(r.plan.find("row caches of at most 89088 B (Options::row_cache_limit = 1073741824, capped by the GPU's)") !=
                      std::string::npos,
                  r.plan);
  }
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  o.row_cache_limit = -1;
  try {
    (void)fj::Program::compile(fj::Graph::parse(text), o);
    FAIL("expected an error");
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK(std::string(e.what()).find("Options::row_cache_limit -1: must be >= 0") != std::string::npos);
  }
}

TEST_CASE("extra NVRTC options reach NVRTC, are part of the cache key, and bad ones are User errors") {
  FakeGpu gpu;
  fj::GraphBuilder b("regcap");
  fj::Value x = b.input("x", fj::DType::F16, {8, 64});
  fj::Value bias = b.input("bias", fj::DType::F16, {64});
  b.output("y", b.op("gelu", {x + bias}));
  const fj::Graph g = b.build();
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  o.disk_cache = false;
  fj::Program plain = fj::Program::compile(g, o);
  o.nvrtc_options = {"--maxrregcount=32"};
  fj::Program capped = fj::Program::compile(g, o);
  // Not served from the plain program's memory-cache entry: compiled again with the option.
  CHECK(capped.kernels(fj::PlanKind::Fused)[0].cache == fj::CacheOutcome::Compiled);
  CHECK(fj::Program::compile(g, o).kernels(fj::PlanKind::Fused)[0].cache == fj::CacheOutcome::MemoryHit);
  CHECK(plain.kernels(fj::PlanKind::Fused)[0].name == capped.kernels(fj::PlanKind::Fused)[0].name);
  // The same structure with other value names is a different source (its comments name them), not
  // a memory-cache hit on the first one.
  o.nvrtc_options = {};
  const char* text = "graph t\ninput x : f16[8, 64]\ninput bias : f16[64]\n%s = gelu(x + bias)\noutput %s\n";
  char first[256], second[256];
  std::snprintf(first, sizeof first, text, "y", "y");
  std::snprintf(second, sizeof second, text, "activation", "activation");
  const fj::KernelInfo k1 = fj::Program::compile(fj::Graph::parse(first, "same.txt"), o).kernels(fj::PlanKind::Fused)[0];
  const fj::KernelInfo k2 = fj::Program::compile(fj::Graph::parse(second, "same.txt"), o).kernels(fj::PlanKind::Fused)[0];
  CHECK(k1.source.find("(y)") != std::string::npos);
  CHECK(k2.source.find("(activation)") != std::string::npos);
  CHECK(k2.cache == fj::CacheOutcome::Compiled);
  o.nvrtc_options = {"--no-such-option"};
  const fj::Error bad = compile_error(g, o);
  CHECK(bad.kind() == fj::ErrorKind::User);  // the caller's option, not the generated code
  CHECK(std::string(bad.what()).find("--no-such-option") != std::string::npos);
  CHECK(std::string(bad.what()).find("extern \"C\"") == std::string::npos);  // no source dump
  // Options that choose the target are refused: --arch / Options::arch does that.
  for (const char* arch_opt : {"-arch=sm_80", "--gpu-architecture=compute_80"}) {
    o.nvrtc_options = {arch_opt};
    const fj::Error e = compile_error(g, o);
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK(std::string(e.what()).find("use Options::arch") != std::string::npos);
  }
  // Options that read files are refused: the cache key holds the option, not the file's contents.
  for (const char* file_opt : {"-I/tmp", "--include-path=/tmp", "--pre-include=my.h", "-include=my.h", "--use-pch=x"}) {
    CAPTURE(file_opt);
    o.nvrtc_options = {file_opt};
    const fj::Error e = compile_error(g, o);
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK(std::string(e.what()).find("read files whose contents the kernel cache's key cannot see") != std::string::npos);
  }
}

TEST_CASE("no GPU: the CUDA backend is a Driver error, Auto falls back to the CPU and says why") {
  auto none = fusejit::jit::Driver::load("libcuda-that-does-not-exist.so");
  fusejit::jit::set_driver_for_testing(none);
  fj::GraphBuilder b("t");
  b.output("y", b.input("x", fj::DType::F32, {4}) * 2);
  fj::Graph g = b.build();
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  const fj::Error e = compile_error(g, o);
  CHECK(e.kind() == fj::ErrorKind::Driver);
  CHECK(std::string(e.what()).find("no CUDA driver") != std::string::npos);
  fj::RunOptions ro;
  fj::RunReport r = fj::run_graph(g, ro);
  CHECK(r.backend == "cpu");
  CHECK(r.backend_note.find("no CUDA driver") != std::string::npos);
  CHECK(r.to_text().find("host CPU, running the generated CUDA (no GPU: no CUDA driver found: ") != std::string::npos);
  fusejit::jit::set_driver_for_testing(nullptr);
}
