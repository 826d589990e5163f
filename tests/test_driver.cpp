// The GPU launch path without a GPU: launch configuration against a fake device description,
// the driver's error messages (no driver, no device, PTX newer than the driver, out of memory,
// a failing launch) through a fake driver table, argument packing and address mapping through
// host emulations of kernels, the poisoned checked run and the timing math.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <dlfcn.h>
#include <algorithm>

#include <cmath>
#include <cstring>

#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "jit/compare.h"
#include "jit/arch.h"
#include "jit/gpu_build.h"
#include "jit/gpu_runner.h"
#include "jit/nvrtc.h"
#include "support/fake_driver.h"
#include "tests/support/files.h"

using namespace fusejit;
using namespace fusejit::jit;
using ir::NodeId;

namespace {

DeviceInfo h200() {
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.cc_major = 9;
  d.sm_count = 132;
  d.l2_bytes = 50 << 20;
  d.max_threads_per_block = 1024;
  return d;
}

template <class F>
std::string error_of(F&& f, DriverErrorKind* kind = nullptr) {
  try {
    f();
  } catch (const DriverError& e) {
    if (kind) *kind = e.kind();
    return e.what();
  } catch (const std::exception& e) {  // the checks before a launch throw ir::UserError
    return e.what();
  }
  return "(no error)";
}

bool starts_with(const std::string& s, std::string_view p) { return s.rfind(p, 0) == 0; }

}  // namespace

TEST_CASE("launch configuration fills every SM and never exceeds the work") {
  const DeviceInfo d = h200();
  // Large: capped at sm_count * blocks_per_sm, block from the occupancy API.
  LaunchConfig c = choose_launch(d, 768, 2, int64_t{1} << 30, 4);
  CHECK(c.block == 768);
  CHECK(c.grid == 264);
  // Small: only the blocks there is work for.
  c = choose_launch(d, 256, 8, 1000, 4);
  CHECK(c.grid == 1);
  CHECK(c.block == 256);
  c = choose_launch(d, 256, 8, 1025 * 4, 4);
  CHECK(c.grid == 5);
  // The 357,899 x 2 grid: 715,798 elements, 4 per vector iteration, 1024 threads per block.
  c = choose_launch(d, 1024, 2, 357899 * 2, 4);
  CHECK(c.grid == 175);  // ceil(178,950 / 1024)
  c = choose_launch(d, 1024, 2, 357899 * 2, 1);
  CHECK(c.grid == 264);  // 699 blocks of work, capped at 132 * 2
  // Nothing to do: no launch.
  CHECK(choose_launch(d, 256, 2, 0, 4).empty());
  // Block sizes are whole warps within the device limit; a missing answer gives 256.
  CHECK(choose_launch(d, 1000, 1, 1 << 20, 1).block == 992);
  CHECK(choose_launch(d, 4096, 1, 1 << 20, 1).block == 1024);
  CHECK(choose_launch(d, 0, 1, 1 << 20, 1).block == 256);
  CHECK(choose_launch(d, 7, 1, 1 << 20, 1).block == 32);
  // Above 2^31 elements with an absurd device: grid * block stays below 2^31.
  DeviceInfo huge = d;
  huge.sm_count = 1 << 24;
  c = choose_launch(huge, 1024, 32, int64_t{1} << 40, 1);
  CHECK(uint64_t{c.grid} * c.block < (uint64_t{1} << 31));
  CHECK(c.grid > 0);
  // A loaded function's precomputed numbers (GpuFunction::config, what a launch uses) give
  // choose_launch's answer for every size.
  for (const DeviceInfo& dev : {d, huge})
    for (int occ : {0, 7, 256, 768, 1024})
      for (int per_sm : {1, 2, 32}) {
        GpuFunction fn;
        const LaunchConfig widest = choose_launch(dev, occ, per_sm, int64_t{1} << 62, 1);
        fn.launch_block = widest.block;
        fn.max_grid = widest.grid;
        for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{715798}, int64_t{1} << 31, int64_t{1} << 40})
          for (int vw : {1, 4, 16}) {
            const LaunchConfig want = choose_launch(dev, occ, per_sm, n, vw), got = fn.config(n, vw);
            CHECK(got.grid == want.grid);
            CHECK(got.block == want.block);
          }
      }
}

TEST_CASE("buffer rotation, medians and bandwidth math") {
  CHECK(median_of({}) == 0);
  CHECK(median_of({3, 1, 2}) == 2);
  CHECK(median_of({4, 1, 3, 2}) == 2.5);
  // 1 MB working set, 50 MB L2: 200 sets wanted, capped at 16.
  CHECK(choose_buffer_sets(1 << 20, 50 << 20, 4.0, 16, int64_t{80} << 30) == 16);
  // 60 MB: 4 sets reach 200 MB.
  CHECK(choose_buffer_sets(60 << 20, 50 << 20, 4.0, 16, int64_t{80} << 30) == 4);
  // 1 GB: one set is already far beyond L2.
  CHECK(choose_buffer_sets(int64_t{1} << 30, 50 << 20, 4.0, 16, int64_t{80} << 30) == 1);
  // Memory-limited: at most half of free memory.
  CHECK(choose_buffer_sets(60 << 20, 50 << 20, 4.0, 16, 200 << 20) == 1);
  CHECK(choose_buffer_sets(0, 50 << 20, 4.0, 16, 0) == 1);
  const double times[] = {2.0, 1.0, 3.0};
  PathTiming t = make_path_timing(2, times, 4'000'000'000);
  CHECK(t.median_ms == 2.0);
  CHECK(t.min_ms == 1.0);
  CHECK(t.max_ms == 3.0);
  CHECK(t.gbps == doctest::Approx(2000.0));
}

TEST_CASE("no driver: a clear message, never a crash") {
  auto d = Driver::load("libcuda-fusejit-test-missing.so.1");
  CHECK_FALSE(d->available());
  CHECK(starts_with(d->unavailable_reason(), "no CUDA driver found: libcuda-fusejit-test-missing.so.1: "));
  DriverErrorKind kind = DriverErrorKind::Other;
  CHECK(error_of([&] { DeviceContext::open(0, d); }, &kind) == d->unavailable_reason());
  CHECK(kind == DriverErrorKind::NoDriver);
  CHECK_THROWS_AS(d->api(), DriverError);
  // The process-wide driver on this machine: either a working libcuda or the same kind of message.
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto real = Driver::get();
  if (h == nullptr) {
    CHECK_FALSE(real->available());
    CHECK(starts_with(real->unavailable_reason(), "no CUDA driver found: libcuda.so.1: "));
  } else {
    MESSAGE("libcuda.so.1 present: driver available = " << real->available() << " " << real->unavailable_reason());
  }
}

TEST_CASE("no device and a device that does not exist") {
  auto d = fake_cuda::reset();
  fake_cuda::st().init_result = cu::kErrorNoDevice;
  DriverErrorKind kind = DriverErrorKind::Other;
  std::string msg = error_of([&] { DeviceContext::open(0, d); }, &kind);
  CHECK(kind == DriverErrorKind::NoDevice);
  CHECK(starts_with(msg, "no CUDA device found: the driver (CUDA 12.4) reports CUDA_ERROR_NO_DEVICE "
                         "(no CUDA-capable device is detected)"));

  d = fake_cuda::reset();
  fake_cuda::st().device_count = 0;
  msg = error_of([&] { DeviceContext::open(0, d); }, &kind);
  CHECK(kind == DriverErrorKind::NoDevice);
  CHECK(starts_with(msg, "no CUDA device found: the driver (CUDA 12.4) sees no device"));

  d = fake_cuda::reset();
  msg = error_of([&] { DeviceContext::open(3, d); }, &kind);
  CHECK(kind == DriverErrorKind::NoDevice);
  CHECK(starts_with(msg, "device 3 requested but only 1 CUDA device is visible (ordinals 0..0)"));
}

TEST_CASE("device info, primary context and a caller's current context") {
  auto d = fake_cuda::reset();
  {
    auto dc = DeviceContext::open(0, d);
    CHECK(dc->info().name == "Fake H200");
    CHECK(dc->info().sm_arch() == "sm_90");
    CHECK(dc->info().sm_count == 132);
    CHECK(dc->info().l2_bytes == 50 << 20);
    CHECK(dc->info().driver_version == 12040);
    CHECK(dc->context() == fake_cuda::primary());
    CHECK_FALSE(dc->borrowed_context());
    // A scope makes it current and restores the previous (none) afterwards.
    CHECK(fake_cuda::st().current == nullptr);
    {
      DeviceContext::Scope s(*dc);
      CHECK(fake_cuda::st().current == fake_cuda::primary());
    }
    CHECK(fake_cuda::st().current == nullptr);
  }
  // The caller (e.g. the CUDA runtime) has a context current: fusejit uses it.
  auto caller = reinterpret_cast<cu::Context>(0x2000);
  fake_cuda::st().current = caller;
  auto dc = DeviceContext::open(0, d);
  CHECK(dc->context() == caller);
  CHECK(dc->borrowed_context());
  {
    DeviceContext::Scope s(*dc);
    CHECK(fake_cuda::st().stack.empty());  // already current: nothing pushed
  }
  fake_cuda::st().current = nullptr;
}

TEST_CASE("intermediates: an allocation that fails frees the ones made before it (a constructor that throws)") {
  auto d = fake_cuda::reset();
  auto dc = DeviceContext::open(0, d);
  const ir::NodeId nodes[3] = {4, 5, 6};
  const int64_t bytes[3] = {1024, 0, 2048};
  std::vector<uint64_t> addrs;
  {
    StreamScratch s(*dc, nodes, bytes, nullptr, addrs);
    CHECK(fake_cuda::st().live.size() == 2);  // none for the 0-byte one
  }
  CHECK(fake_cuda::st().live.empty());
  fake_cuda::st().allocs_before_oom = 1;  // the first succeeds, the second fails
  DriverErrorKind kind = DriverErrorKind::Other;
  const std::string msg = error_of([&] { StreamScratch s(*dc, nodes, bytes, nullptr, addrs); }, &kind);
  CHECK(kind == DriverErrorKind::OutOfMemory);
  CHECK(msg.find("intermediate v6") != std::string::npos);
  CHECK(fake_cuda::st().live.empty());  // the first buffer was freed, not leaked
  fake_cuda::st().allocs_before_oom = -1;
}

TEST_CASE("a measurement that fails part way waits for its queued work before freeing the buffers it uses") {
  auto d = fake_cuda::reset();
  auto dc = DeviceContext::open(0, d);
  int calls_left = 0;
  RunSpec spec;
  spec.input_bytes = {1024};
  spec.output_bytes = {1024};
  spec.kernels = 1;
  spec.bytes_moved = 2048;
  spec.enqueue = [&](std::span<const cu::DevicePtr>, std::span<const cu::DevicePtr>, std::span<const cu::DevicePtr>,
                     cu::Stream) {  // a launch failing after earlier runs' work was queued
    if (--calls_left == 0) d->check(cu::kErrorInvalidValue, "cuLaunchKernel");
  };
  std::vector<std::byte> in(1024), out(1024);
  const std::span<const std::byte> ins[1] = {in};
  const std::span<std::byte> outs[1] = {out};
  MeasureOptions o;
  o.max_buffer_sets = 3;
  for (int failing : {1, 2, 5}) {  // the checked run, the first warm-up run, a timed run
    CAPTURE(failing);
    calls_left = failing;
    fake_cuda::st().calls.clear();
    fake_cuda::st().record = true;
    error_of([&] { measure_gpu_runs(dc, spec, ins, outs, {}, o); });
    fake_cuda::st().record = false;
    const auto& calls = fake_cuda::st().calls;
    const auto is = [](const char* name) { return [name](const char* c) { return std::strcmp(c, name) == 0; }; };
    const auto first_free = std::find_if(calls.begin(), calls.end(), is("cuMemFree"));
    REQUIRE(first_free != calls.end());
    // The last thing queued before the failure was a copy, memset or event; nothing is freed before a wait.
    const auto last_queued = std::find_if(std::make_reverse_iterator(first_free), calls.rend(), [](const char* c) {
      return std::strncmp(c, "cuMemcpy", 8) == 0 || std::strncmp(c, "cuMemset", 8) == 0 ||
             std::strcmp(c, "cuEventRecord") == 0;
    }).base();
    CHECK(std::find_if(last_queued, first_free, is("cuStreamSynchronize")) != first_free);
    CHECK(fake_cuda::st().live.empty());
  }
}

TEST_CASE("out of memory names the size, the buffer and what is free") {
  auto d = fake_cuda::reset();
  auto dc = DeviceContext::open(0, d);
  fake_cuda::st().alloc_result = cu::kErrorOutOfMemory;
  DriverErrorKind kind = DriverErrorKind::Other;
  std::string msg = error_of([&] { DeviceBuffer b(dc, size_t{12} << 30, "input x"); }, &kind);
  CHECK(kind == DriverErrorKind::OutOfMemory);
  CHECK(msg == "out of device memory: cuMemAlloc of 12.0 GiB failed for input x (free 1.0 GiB of 80.0 GiB on Fake H200)");
  fake_cuda::st().alloc_result = 0;
  {
    DeviceBuffer b(dc, 1000, "ok");
    CHECK(b.ptr() != 0);
    CHECK(fake_cuda::st().live.size() == 1);
    DeviceBuffer moved = std::move(b);
    CHECK(b.ptr() == 0);
    CHECK(fake_cuda::st().live.size() == 1);
  }
  CHECK(fake_cuda::st().live.empty());
}

TEST_CASE("modules are keyed by the context's id: a later context at a destroyed one's address loads its own") {
  clear_module_cache();
  auto d = fake_cuda::reset();
  const auto b = reinterpret_cast<cu::Context>(0x2000);
  cu::Context popped = nullptr;
  fake_cuda::ctx_push(b);  // the caller's context, borrowed
  auto first = DeviceContext::open(0, d);
  const std::vector<char> image = {'c', 'u', 'b', 'i', 'n'};
  load_function(first, image, "sm_90", "k");
  load_function(first, image, "sm_90", "k");
  CHECK(fake_cuda::st().modules_per_context[b] == 1);
  fake_cuda::recreate_context(b);
  auto second = DeviceContext::open(0, d);
  CHECK(second->context() == first->context());
  CHECK(second->context_id() != first->context_id());
  fake_cuda::st().calls.clear();
  fake_cuda::st().record = true;
  load_function(second, image, "sm_90", "k");
  fake_cuda::st().record = false;
  CHECK(fake_cuda::st().modules_per_context[b] == 2);
  // The dead context's entry is forgotten, not unloaded: its handle may name a live module now.
  CHECK(module_cache_size() == 1);
  CHECK(std::count(fake_cuda::st().calls.begin(), fake_cuda::st().calls.end(), std::string("cuModuleUnload")) == 0);
  // A third context at another handle keeps its own entry beside it.
  fake_cuda::ctx_push(reinterpret_cast<cu::Context>(0x3000));
  load_function(DeviceContext::open(0, d), image, "sm_90", "k");
  CHECK(module_cache_size() == 2);
  fake_cuda::ctx_pop(&popped);
  clear_module_cache();
  fake_cuda::ctx_pop(&popped);
}

TEST_CASE("a CUBIN for this GPU that a driver of an older major cannot load says so; NVRTC of the driver's major first") {
  clear_module_cache();
  auto d = fake_cuda::reset();  // a CUDA 12.4 driver
  auto dc = DeviceContext::open(0, d);
  const std::vector<char> image = {'c', 'u', 'b', 'i', 'n'};
  for (cu::Result r : {cu::kErrorNoBinaryForGpu, cu::kErrorInvalidImage})
    for (const char* target : {"sm_90", "sm_90a"}) {
      CAPTURE(target);
      fake_cuda::st().load_result = r;
      DriverErrorKind kind = DriverErrorKind::Other;
      const std::string msg = error_of([&] { load_function(dc, image, target, "k"); }, &kind);
      CHECK(kind == DriverErrorKind::PtxTooNew);
      CHECK(msg.find(fmt::format("the image was built for this GPU ({}), so the driver (CUDA 12.4) is likely older than "
                                 "the CUDA toolkit (NVRTC) that built it",
                                 target)) != std::string::npos);
    }
  fake_cuda::st().load_result = cu::kErrorInvalidImage;  // for another GPU: the driver's own error
  DriverErrorKind kind = DriverErrorKind::PtxTooNew;
  CHECK(error_of([&] { load_function(dc, image, "sm_80", "k"); }, &kind).find("likely older") == std::string::npos);
  CHECK(kind == DriverErrorKind::Other);
  fake_cuda::st().load_result = 0;
  clear_module_cache();
  // Where NVRTC is looked for.
  const std::vector<std::string> none = nvrtc_search_order(0), old = nvrtc_search_order(12040);
  REQUIRE(starts_with(none.front(), "libnvrtc.so."));
  const int build_major = std::stoi(none.front().substr(12));  // the toolkit fusejit was built with
  CHECK(build_major >= 12);
  CHECK(nvrtc_search_order(build_major * 1000 + 20) == none);
  CHECK(nvrtc_search_order(build_major * 1000 + 1000) == none);  // a newer driver runs older NVRTC's output
  CHECK(old.front() == (build_major > 12 ? "libnvrtc.so.12" : none.front()));
  CHECK(std::count(old.begin(), old.begin() + 4, "libnvrtc.so.12") == 1);  // once among the sonames
  CHECK(old.size() == none.size());
}

TEST_CASE("PTX newer than the driver, CUBIN for another arch, failing calls name the kernel") {
  clear_module_cache();
  auto d = fake_cuda::reset();
  auto dc = DeviceContext::open(0, d);
  const std::vector<char> image = {'p', 't', 'x', '\0'};
  fake_cuda::st().load_result = cu::kErrorUnsupportedPtxVersion;
  DriverErrorKind kind = DriverErrorKind::Other;
  std::string msg = error_of([&] { load_function(dc, image, "compute_90", "k"); }, &kind);
  CHECK(kind == DriverErrorKind::PtxTooNew);
  const NvrtcVersion nv = nvrtc_version();
  CHECK(starts_with(msg, "the driver (CUDA 12.4) is older than NVRTC (CUDA " + nv.str() + ") that produced this PTX"));
  CHECK(msg.find("CUDA_ERROR_UNSUPPORTED_PTX_VERSION") != std::string::npos);

  fake_cuda::st().load_result = cu::kErrorNoBinaryForGpu;
  msg = error_of([&] { load_function(dc, image, "sm_100", "k"); }, &kind);
  CHECK(msg.find("compiled for sm_100 and does not run on Fake H200 (sm_90)") != std::string::npos);

  // Loaded once per (context, image): a second function from the same image reuses the module.
  fake_cuda::st().load_result = 0;
  GpuFunction f1 = load_function(dc, image, "compute_90", "k1");
  GpuFunction f2 = load_function(dc, image, "compute_90", "k2");
  GpuFunction f1b = load_function(dc, image, "compute_90", "k1");
  CHECK(fake_cuda::st().modules_loaded == 1);
  CHECK(module_cache_size() == 1);
  CHECK(f1.fn == f1b.fn);
  CHECK(f1.fn != f2.fn);
  CHECK(f1.block == 768);
  CHECK(f1.blocks_per_sm == 2);

  fake_cuda::st().launch_result = cu::kErrorInvalidValue;
  PackedArgs none;
  msg = error_of([&] { launch_kernel(*dc, f1, LaunchConfig{1, 32}, none, nullptr); }, &kind);
  CHECK(msg == "cuLaunchKernel failed for kernel k1: CUDA_ERROR_INVALID_VALUE (invalid argument)");
  CHECK(kind == DriverErrorKind::Other);
  // An error code the driver does not know still gives a message.
  CHECK(d->describe(7777) == "CUresult 7777 (unknown to this driver)");
  clear_module_cache();
  CHECK(module_cache_size() == 0);
}

namespace {

// y = (x + 1) * 2 over f32[n]; the fused plan is one kernel, the unfused plan two with an
// intermediate. Kernels are emulated on the host through the fake driver.
struct TwoOpGraph {
  ir::Graph g;
  ir::NodeId x = -1, add = -1, mul = -1;
};

TwoOpGraph two_op_graph(int64_t n) {
  ir::GraphBuilder b("two");
  TwoOpGraph t;
  t.x = b.add_input("x", ir::DType::F32, {{n, -1}});
  ir::Literal one{ir::Category::Float, 1.0, 0, {}}, two{ir::Category::Float, 2.0, 0, {}};
  ir::Operand a1[2] = {ir::Operand::of(t.x), ir::Operand::of(one)};
  ir::Operand s = b.apply(ir::Op::Add, a1);
  ir::Operand a2[2] = {s, ir::Operand::of(two)};
  ir::Operand y = b.apply(ir::Op::Mul, a2);
  b.add_output("y", y);
  t.add = s.node;
  t.mul = y.node;
  t.g = b.finish();
  return t;
}

KernelSignature contiguous_sig(const ir::Graph& g, const ir::FusionGroup& grp) {
  KernelSignature sig;
  sig.layout = compute_layout(g, grp);
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    ArgSlot a;
    a.kind = ArgKind::InputPtr;
    a.index = static_cast<int>(i);
    sig.args.push_back(a);
  }
  for (size_t i = 0; i < grp.outputs.size(); ++i) {
    ArgSlot a;
    a.kind = ArgKind::OutputPtr;
    a.index = static_cast<int>(i);
    sig.args.push_back(a);
  }
  ArgSlot n;
  n.kind = ArgKind::NumElements;
  n.bytes = 4;
  sig.args.push_back(n);
  return sig;
}

template <class F>
std::function<void(void**, unsigned, unsigned, unsigned)> unary_kernel(F f) {
  return [f](void** p, unsigned, unsigned, unsigned) {
    const float* in = *static_cast<const float* const*>(p[0]);
    float* out = *static_cast<float* const*>(p[1]);
    const uint32_t n = *static_cast<const uint32_t*>(p[2]);
    for (uint32_t i = 0; i < n; ++i) out[i] = f(in[i]);
  };
}

}  // namespace

TEST_CASE("fused and unfused runs on the fake driver: addresses, poison, timing") {
  clear_module_cache();
  auto d = fake_cuda::reset();
  auto dc = DeviceContext::open(0, d);
  const int64_t n = 1000;
  TwoOpGraph t = two_op_graph(n);
  const ir::Graph& g = t.g;
  ir::Shape shape = {{n, -1}};

  ir::Plan fused;
  fused.groups.push_back({{t.add, t.mul}, {t.x}, {}, {t.mul}, shape, "graph end"});
  fused.materialized = {t.mul};
  ir::Plan unfused;
  unfused.fused = false;
  unfused.groups.push_back({{t.add}, {t.x}, {}, {t.add}, shape, "one node"});
  unfused.groups.push_back({{t.mul}, {t.add}, {}, {t.mul}, shape, "one node"});
  unfused.materialized = {t.add, t.mul};

  auto image_f = std::make_shared<const std::vector<char>>(std::vector<char>{'f', '\0'});
  auto image_u = std::make_shared<const std::vector<char>>(std::vector<char>{'u', '\0'});
  auto kernel = [&](const char* name, const ir::FusionGroup& grp, std::shared_ptr<const std::vector<char>> image) {
    GeneratedKernel k;
    k.name = name;
    k.signature = contiguous_sig(g, grp);
    k.strided_signature = k.signature;  // never run here: every tensor is contiguous
    k.strided_signature.strided = true;
    return CompiledKernel{k, std::move(image), CacheOutcome::Compiled, 0.0, {}};
  };
  const Target sm90{{9, 0}, OutputKind::Cubin};
  const CompiledPlan kf{sm90, {kernel("k_fused", fused.groups[0], image_f)}};
  const CompiledPlan ku{sm90, {kernel("k_add", unfused.groups[0], image_u), kernel("k_mul", unfused.groups[1], image_u)}};
  fake_cuda::st().kernels["k_fused"] = unary_kernel([](float v) { return (v + 1.0f) * 2.0f; });
  fake_cuda::st().kernels["k_add"] = unary_kernel([](float v) { return v + 1.0f; });
  fake_cuda::st().kernels["k_mul"] = unary_kernel([](float v) { return v * 2.0f; });

  GpuProgram pf = GpuProgram::load(dc, g, fused, kf);
  GpuProgram pu = GpuProgram::load(dc, g, unfused, ku);
  CHECK(fake_cuda::st().modules_loaded == 2);  // the unfused kernels share one image
  CHECK(pf.kernel_count() == 1);
  CHECK(pu.kernel_count() == 2);
  CHECK(pf.intermediate_bytes().empty());
  REQUIRE(pu.intermediate_bytes().size() == 1);
  CHECK(pu.intermediate_bytes()[0] == n * 4);
  CHECK(pf.launch_config(0).grid == 2);  // ceil(1000 / 768)

  std::vector<std::byte> xin(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    float v = static_cast<float>(i) - 500.5f;
    if (i == 7) v = -0.0f;
    if (i == 8) v = std::numeric_limits<float>::infinity();
    std::memcpy(xin.data() + i * 4, &v, 4);
  }
  const std::span<const std::byte> inputs[1] = {xin};
  std::vector<std::byte> yf(xin.size()), yu(xin.size()), inter(xin.size());
  const std::span<std::byte> out_f[1] = {yf}, out_u[1] = {yu}, inter_u[1] = {inter};
  MeasureOptions mo;
  mo.warmup = 2;
  mo.repeats = 5;
  mo.copy_baseline = true;
  GpuMeasurement mf = measure_gpu_program(pf, inputs, out_f, {}, {}, mo);
  mo.copy_baseline = false;
  GpuMeasurement mu = measure_gpu_program(pu, inputs, out_u, inter_u, {}, mo);
  for (int64_t i = 0; i < n; ++i) {
    float xv, f, u, t;
    std::memcpy(&xv, xin.data() + i * 4, 4);
    std::memcpy(&f, yf.data() + i * 4, 4);
    std::memcpy(&u, yu.data() + i * 4, 4);
    std::memcpy(&t, inter.data() + i * 4, 4);
    const float want = (xv + 1.0f) * 2.0f, want_t = xv + 1.0f;
    CHECK(std::memcmp(&f, &want, 4) == 0);
    CHECK(std::memcmp(&u, &want, 4) == 0);
    CHECK(std::memcmp(&t, &want_t, 4) == 0);  // the unfused intermediate came back
  }
  CHECK(compare_outputs(ir::DType::F32, yf, yu, n, kBitwise).ok);
  // Timing: fake events tick once per record and per launch, 0.25 ms a tick.
  CHECK(mf.timing.kernels == 1);
  CHECK(mu.timing.kernels == 2);
  CHECK(mf.timing.median_ms == doctest::Approx(0.5));
  CHECK(mu.timing.median_ms == doctest::Approx(0.75));
  CHECK(mf.buffer_sets == 16);  // 8 KB working set vs 50 MB L2: rotate the maximum
  CHECK(mf.l2_resident);
  CHECK(mf.copy_bytes == mf.timing.bytes / 2);
  CHECK(mf.copy_gbps > 0);
  CHECK(mu.copy_gbps == 0);  // not asked for
  // Launches: the checked run, then warm-up (at least one run per set) and the timed runs.
  int fused_launches = 0, unfused_launches = 0;
  for (const auto& l : fake_cuda::st().launches) {
    if (l.kernel == "k_fused") ++fused_launches;
    else ++unfused_launches;
    CHECK(l.block == 768);
    CHECK(l.stream != nullptr);
  }
  CHECK(fused_launches == 1 + 16 + 5);
  CHECK(unfused_launches == 2 * (1 + 16 + 5));
  // Every device buffer was freed.
  CHECK(fake_cuda::st().live.empty());

  // A kernel that forgets its last element: the poison (0xFF bytes) shows through.
  fake_cuda::st().kernels["k_fused"] = [](void** p, unsigned, unsigned, unsigned) {
    const float* in = *static_cast<const float* const*>(p[0]);
    float* out = *static_cast<float* const*>(p[1]);
    const uint32_t cnt = *static_cast<const uint32_t*>(p[2]);
    for (uint32_t i = 0; i + 1 < cnt; ++i) out[i] = (in[i] + 1.0f) * 2.0f;
  };
  mo.time = false;
  measure_gpu_program(pf, inputs, out_f, {}, {}, mo);
  CompareResult r = compare_outputs(ir::DType::F32, yu, yf, n, 0, "y");
  CHECK_FALSE(r.ok);
  CHECK(r.first_index == n - 1);
  CHECK(r.message == "y: 1 of 1000 elements differ (exact); first at index 999: expected 999 (0x4479c000), got nan (0xffffffff)");

  // Output aliasing an input is refused before anything is launched.
  const size_t before = fake_cuda::st().launches.size();
  DeviceBuffer buf(dc, static_cast<size_t>(n) * 4, "x");
  const cu::DevicePtr in_p[] = {buf.ptr()};
  const cu::DevicePtr out_p[] = {buf.ptr() + 16};
  std::string msg = error_of([&] { pf.enqueue(in_p, out_p, {}, nullptr); });
  CHECK(msg.find("output 'y'") != std::string::npos);
  CHECK(msg.find("overlaps input 'x'") != std::string::npos);
  CHECK(fake_cuda::st().launches.size() == before);
  clear_module_cache();
}

TEST_CASE("compare_outputs: bitwise, exact and ulp tolerances with decimal and hex values") {
  auto bytes = [](auto... v) {
    std::vector<std::byte> out;
    auto put = [&](auto x) {
      const size_t at = out.size();
      out.resize(at + sizeof(x));
      std::memcpy(out.data() + at, &x, sizeof(x));
    };
    (put(v), ...);
    return out;
  };
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  uint32_t other_nan_bits = 0x7fffffff;
  float other_nan;
  std::memcpy(&other_nan, &other_nan_bits, 4);
  // NaN payloads differ: bitwise fails, exact passes.
  auto e = bytes(1.0f, qnan, -0.0f);
  auto a = bytes(1.0f, other_nan, -0.0f);
  CHECK_FALSE(compare_outputs(ir::DType::F32, e, a, 3, kBitwise).ok);
  CHECK(compare_outputs(ir::DType::F32, e, a, 3, 0).ok);
  // Bitwise with NaN payloads aside: payloads may differ, the all-ones poison never matches, and
  // the sign of zero still counts.
  CHECK(compare_outputs(ir::DType::F32, e, a, 3, kBitwiseAnyNaN).ok);
  const uint32_t poison_bits = 0xffffffffu;
  float poison;
  std::memcpy(&poison, &poison_bits, 4);
  CompareResult rp = compare_outputs(ir::DType::F32, bytes(qnan), bytes(poison), 1, kBitwiseAnyNaN, "p");
  CHECK_FALSE(rp.ok);
  CHECK(rp.message.find("(bitwise, NaN payloads aside)") != std::string::npos);
  CHECK_FALSE(compare_outputs(ir::DType::F16, bytes(uint16_t{0x7e00}), bytes(uint16_t{0xffff}), 1, kBitwiseAnyNaN).ok);
  CHECK(compare_outputs(ir::DType::F16, bytes(uint16_t{0x7e00}), bytes(uint16_t{0x7fff}), 1, kBitwiseAnyNaN).ok);
  CHECK_FALSE(compare_outputs(ir::DType::F32, bytes(-0.0f), bytes(0.0f), 1, kBitwiseAnyNaN).ok);
  // -0.0 vs +0.0: not exact, but 0 ulp apart.
  auto z = bytes(1.0f, qnan, 0.0f);
  CompareResult r = compare_outputs(ir::DType::F32, e, z, 3, 0, "out", std::vector<int64_t>{3});
  CHECK_FALSE(r.ok);
  CHECK(r.message == "out: 1 of 3 elements differ (exact); first at index 2 [2]: expected -0 (0x80000000), got 0 (0x00000000)");
  CHECK(compare_outputs(ir::DType::F32, e, z, 3, 1).ok);
  // One ulp off passes a 1-ulp tolerance, two do not; NaN never matches a number.
  float one_up = std::nextafter(1.0f, 2.0f), two_up = std::nextafter(one_up, 2.0f);
  CHECK(compare_outputs(ir::DType::F32, bytes(1.0f), bytes(one_up), 1, 1).ok);
  r = compare_outputs(ir::DType::F32, bytes(1.0f), bytes(two_up), 1, 1);
  CHECK_FALSE(r.ok);
  CHECK(r.max_ulps == 2);
  // An exact comparison still measures how far apart the numbers are (fast-math reports use it).
  r = compare_outputs(ir::DType::F32, bytes(1.0f, -0.0f), bytes(two_up, 0.0f), 2, 0);
  CHECK_FALSE(r.ok);
  CHECK(r.mismatches == 2);
  CHECK(r.max_ulps == 2);
  CHECK_FALSE(compare_outputs(ir::DType::F32, bytes(1.0f), bytes(qnan), 1, 100).ok);
  // Largest finite and inf are 1 ulp apart on the ordered line.
  CHECK(ulp_distance(ir::DType::F32, 0x7f7fffff, 0x7f800000) == 1);
  CHECK(ulp_distance(ir::DType::F32, 0x80000001, 0x00000001) == 2);
  // f16 / bf16 / f64 / integers print in decimal and hex.
  r = compare_outputs(ir::DType::F16, bytes(uint16_t{0x3c00}), bytes(uint16_t{0xfc00}), 1, 0, "h");
  CHECK(r.message == "h: 1 of 1 elements differ (exact); first at index 0: expected 1 (0x3c00), got -inf (0xfc00)");
  CHECK(format_element(ir::DType::F16, bytes(uint16_t{0x0001}).data()) == "5.9604645e-08 (0x0001)");
  CHECK(format_element(ir::DType::BF16, bytes(uint16_t{0x3fc0}).data()) == "1.5 (0x3fc0)");
  CHECK(format_element(ir::DType::F64, bytes(0.1).data()) == "0.1 (0x3fb999999999999a)");
  CHECK(format_element(ir::DType::I8, bytes(int8_t{-128}).data()) == "-128 (0x80)");
  CHECK(format_element(ir::DType::I64, bytes(int64_t{-1}).data()) == "-1 (0xffffffffffffffff)");
  CHECK(format_element(ir::DType::Bool, bytes(uint8_t{1}).data()) == "true (0x01)");
  // Integers are exact whatever the tolerance.
  CHECK_FALSE(compare_outputs(ir::DType::I32, bytes(5), bytes(6), 1, 4).ok);
  // Multi-dim coordinates.
  r = compare_outputs(ir::DType::I32, bytes(0, 0, 0, 0, 0, 9), bytes(0, 0, 0, 0, 0, 8), 6, 0, "m",
                      std::vector<int64_t>{2, 3});
  CHECK(r.message.find("first at index 5 [1, 2]: expected 9 (0x00000009), got 8 (0x00000008)") != std::string::npos);
}

TEST_CASE("real generated kernels: NVRTC for the fake sm_90 device, loaded, packed and launched") {
  clear_module_cache();
  auto d = fake_cuda::reset();
  auto dc = DeviceContext::open(0, d);
  const std::string path = fusejit::testing::sample_path("llama_swiglu.txt");
  ir::Graph g = ir::parse_graph_file(path);
  std::vector<std::pair<std::string, int64_t>> dims;
  for (const ir::DimDecl& dd : g.dims) dims.push_back({dd.name, std::min<int64_t>(dd.value, 64)});
  ir::rebind_dims(g, dims);
  // The production build path (jit/gpu_build.h), as Program::compile runs it.
  const ArchDecision arch = choose_target_for_device(Arch{dc->info().cc_major, dc->info().cc_minor});
  CHECK(arch.target.name() == "sm_90");
  GpuBuildOptions bo;
  bo.target = arch.target;
  const ir::Plan fused_plan = ir::plan_fusion(g), unfused_plan = ir::plan_unfused(g);
  const CompiledPlan fc = compile_plan(g, fused_plan, bo);
  bo.codegen.canonical_names = true;
  const CompiledPlan uc = compile_plan(g, unfused_plan, bo);
  CHECK(fc.kernels.size() == fused_plan.groups.size());
  CHECK(fc.kernels.size() >= 1);
  CHECK(uc.kernels.size() > fc.kernels.size());
  for (const CompiledKernel& k : uc.kernels) CHECK(k.image == uc.kernels[0].image);  // one NVRTC program
  const GpuProgram f = GpuProgram::load(dc, g, fused_plan, fc);
  const GpuProgram u = GpuProgram::load(dc, g, unfused_plan, uc);
  CHECK(fake_cuda::st().modules_loaded == static_cast<int>(fc.kernels.size()) + 1);  // one module per program
  std::vector<std::vector<std::byte>> in;
  std::vector<std::span<const std::byte>> in_spans;
  for (NodeId id : g.inputs) in.emplace_back(static_cast<size_t>(value_bytes(g, id)), std::byte{0});
  for (const auto& b : in) in_spans.emplace_back(b);
  std::vector<std::vector<std::byte>> out;
  std::vector<std::span<std::byte>> out_spans;
  for (const ir::OutputDecl& o : g.outputs) out.emplace_back(static_cast<size_t>(value_bytes(g, o.node)));
  for (auto& b : out) out_spans.emplace_back(b);
  MeasureOptions mo;
  mo.time = false;
  measure_gpu_program(f, in_spans, out_spans, {}, {}, mo);
  measure_gpu_program(u, in_spans, out_spans, {}, {}, mo);
  CHECK(static_cast<int>(fake_cuda::st().launches.size()) == f.kernel_count() + u.kernel_count());
  // Nothing ran the kernels: every output is still the 0xFF poison.
  for (const auto& o : out)
    for (std::byte b : o) REQUIRE(b == std::byte{0xFF});
  for (size_t i = 0; i < fc.kernels.size(); ++i) {
    const LaunchConfig c = f.launch_config(i);
    CHECK(c.block == 768);
    CHECK(c.grid >= 1);
  }
  CHECK(fake_cuda::st().live.empty());
  clear_module_cache();
}

TEST_CASE("per-output GPU tolerance from the docs/ops.md table") {
  ir::GraphBuilder b("tol");
  NodeId x = b.add_input("x", ir::DType::F32, {{8, -1}});
  NodeId h = b.add_input("h", ir::DType::F16, {{8, -1}});
  auto un = [&](ir::Op op, ir::Operand a) {
    ir::Operand v[1] = {a};
    return b.apply(op, v);
  };
  auto bin = [&](ir::Op op, ir::Operand a, ir::Operand c) {
    ir::Operand v[2] = {a, c};
    return b.apply(op, v);
  };
  ir::Operand X = ir::Operand::of(x);
  ir::Operand exact = bin(ir::Op::Mul, bin(ir::Op::Add, X, X), X);
  ir::Operand e = un(ir::Op::Exp, X);
  ir::Operand el = un(ir::Op::Log, e);                       // exp (3) + log (2)
  ir::Operand s = un(ir::Op::Silu, X);                        // composite: 4 * 3, plus abs
  ir::Operand cmp = bin(ir::Op::Gt, e, X);                    // bool from approximate math
  ir::Operand fl = un(ir::Op::Floor, e);                      // a step after approximate math
  ir::Operand mx = bin(ir::Op::Maximum, e, X);                // continuous: still comparable
  ir::Operand hh = un(ir::Op::Tanh, ir::Operand::of(h));      // f16: 1 half-ulp per call
  b.add_output("exact", exact);
  b.add_output("el", el);
  b.add_output("s", s);
  b.add_output("cmp", cmp);
  b.add_output("fl", fl);
  b.add_output("mx", mx);
  b.add_output("hh", hh);
  ir::Graph g = b.finish();
  auto tol = [&](int k) { return gpu_output_tolerance(g, g.outputs[static_cast<size_t>(k)].node); };
  CHECK(tol(0).exact());
  CHECK(tol(1).ulps == 5);
  CHECK(tol(1).abs_tolerance == 0);
  CHECK(tol(2).ulps == 12);
  CHECK(tol(2).abs_tolerance == std::ldexp(1.0, -20));
  CHECK_FALSE(tol(3).comparable);
  CHECK_FALSE(tol(4).comparable);
  CHECK(tol(5).comparable);
  CHECK(tol(5).ulps == 3);
  CHECK(tol(6).ulps == 1);
  // The absolute tolerance accepts a tiny difference near zero that is many ulps.
  float ev = 1e-30f, av = 2e-30f;
  std::vector<std::byte> eb(4), ab(4);
  std::memcpy(eb.data(), &ev, 4);
  std::memcpy(ab.data(), &av, 4);
  CHECK_FALSE(compare_outputs(ir::DType::F32, eb, ab, 1, 12).ok);
  CHECK(compare_outputs(ir::DType::F32, eb, ab, 1, 12, {}, {}, std::ldexp(1.0, -20)).ok);
}
