// The production launch path on a real GPU (label `gpu`; exits 77 = skipped without a driver and
// device): AdamW in place bitwise identical to out of place, transposed and sliced device views
// against their contiguous copies, zero-size tensors, size-1 and other dims without a new kernel,
// capture of a launch into a CUDA graph and its replay, and one Program on two contexts.
//
// FUSEJIT_GPU_TEST_FAKE=1 runs it on tests/support/fake_driver.h (kernels compiled with NVRTC, run
// as their host builds; the CUDA graph and second-context cases need the real driver and are
// skipped), for developing this file without a GPU.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fusejit/fusejit.h>

#include "jit/driver.h"
#include "tests/support/fake_gpu.h"
#include "tests/support/launch_data.h"

namespace fj = fusejit;
namespace jit = fusejit::jit;
namespace cu = fusejit::jit::cu;

namespace {

bool g_fake = false;
std::shared_ptr<jit::DeviceContext> g_dc;

// Runs before doctest's main: no driver or no device -> the whole executable is skipped. The
// device's primary context is made current, as the CUDA runtime leaves it.
struct SkipWithoutGpu {
  SkipWithoutGpu() {
    try {
      const char* fake = std::getenv("FUSEJIT_GPU_TEST_FAKE");
      g_fake = fake && *fake && std::string(fake) != "0";
      if (g_fake) jit::set_driver_for_testing(fake_cuda::reset());
      g_dc = jit::DeviceContext::open(0);
      g_dc->driver().check(g_dc->api().cuCtxPushCurrent(g_dc->context()), "cuCtxPushCurrent");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "test_gpu_launch: skipped: %s\n", e.what());
      std::fflush(stderr);
      std::_Exit(77);
    }
  }
} g_skip;

using launch_data::random_tensor;

const jit::DriverApi& api() { return g_dc->api(); }
void check(cu::Result r, const char* what) { g_dc->driver().check(r, what); }

// A tensor in device memory (a DeviceBuffer of the current context).
struct DevTensor {
  fj::DType dtype = fj::DType::F32;
  std::vector<int64_t> shape;
  jit::DeviceBuffer buf;
  fj::TensorRef ref(const std::vector<int64_t>& view_shape = {}, const std::vector<int64_t>& strides = {},
                    int64_t offset = 0) {
    return fj::TensorRef(reinterpret_cast<void*>(buf.ptr() + static_cast<uint64_t>(offset) * fj::dtype_size(dtype)),
                         dtype, view_shape.empty() ? shape : view_shape, strides);
  }
};

DevTensor upload(const fj::HostTensor& t, const std::shared_ptr<jit::DeviceContext>& dc = g_dc) {
  DevTensor d{t.dtype(), t.shape(), jit::DeviceBuffer(dc, std::max<size_t>(t.bytes(), 1), "test tensor")};
  if (t.bytes()) check(api().cuMemcpyHtoDAsync(d.buf.ptr(), t.data().data(), t.bytes(), nullptr), "cuMemcpyHtoDAsync");
  check(api().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  return d;
}

DevTensor device_zeros(fj::DType dtype, std::vector<int64_t> shape) { return upload(fj::HostTensor(dtype, std::move(shape))); }

fj::HostTensor download(const DevTensor& d, cu::Stream s = nullptr) {
  fj::HostTensor t(d.dtype, d.shape);
  check(api().cuStreamSynchronize(s), "cuStreamSynchronize");
  if (t.bytes()) check(api().cuMemcpyDtoHAsync(t.data().data(), d.buf.ptr(), t.bytes(), nullptr), "cuMemcpyDtoHAsync");
  check(api().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
  return t;
}

fj::Program compile(const std::string& text) {
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  return fj::Program::compile(fj::Graph::parse(text), o);
}

fj::Program compile_cpu(const std::string& text) {
  fj::Options o;
  o.backend = fj::Backend::Cpu;
  return fj::Program::compile(fj::Graph::parse(text), o);
}

// Host emulations of the program's kernels under the fake driver; nothing on a real GPU.
std::vector<std::shared_ptr<jit::HostModule>> emulate(const fj::Program& p) {
  return g_fake ? fake_gpu::emulate(p) : std::vector<std::shared_ptr<jit::HostModule>>{};
}

const std::string kAdamW = launch_data::adamw_graph(1000003);

// A driver entry point the library does not use (CUDA graphs, contexts), from libcuda itself.
template <class Fn>
Fn driver_entry(const char* name) {
  using GetProc = cu::Result (*)(const char*, void**, int, unsigned long long, int*);
  static void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(h != nullptr);
  auto gpa = reinterpret_cast<GetProc>(dlsym(h, "cuGetProcAddress_v2"));
  const bool resolved = gpa != nullptr;
  REQUIRE(resolved);
  void* p = nullptr;
  int status = 0;
  REQUIRE(gpa(name, &p, 12000, 0, &status) == 0);
  REQUIRE(p != nullptr);
  return reinterpret_cast<Fn>(p);
}

}  // namespace

TEST_CASE("AdamW in place on the GPU is bitwise identical to out of place, and to the CPU") {
  const fj::Program prog = compile(kAdamW);
  auto keep = emulate(prog);
  const fj::Program cpu = compile_cpu(kAdamW);
  const int64_t n = 1000003;
  const launch_data::AdamInputs h = launch_data::adam_inputs(n);
  const fj::HostTensor &hp = h.p, &hg = h.grad, &hm = h.m, &hv = h.v;
  const std::vector<fj::HostTensor> want = cpu.run({hp, hg, hm, hv});
  for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
    CAPTURE(kind == fj::PlanKind::Fused ? "fused" : "unfused");
    DevTensor p = upload(hp), g = upload(hg), m = upload(hm), v = upload(hv);
    DevTensor po = device_zeros(fj::DType::F32, {n}), mo = device_zeros(fj::DType::F32, {n}), vo = device_zeros(fj::DType::F32, {n});
    prog.launch({p.ref(), g.ref(), m.ref(), v.ref()}, {po.ref(), mo.ref(), vo.ref()}, {}, nullptr, kind);
    const fj::HostTensor out_p = download(po), out_m = download(mo), out_v = download(vo);
    prog.launch({p.ref(), g.ref(), m.ref(), v.ref()}, {p.ref(), m.ref(), v.ref()}, {}, nullptr, kind);
    CHECK(download(p) == out_p);
    CHECK(download(m) == out_m);
    CHECK(download(v) == out_v);
    CHECK(out_p == want[0]);  // add, mul, div and sqrt are correctly rounded on both
    CHECK(out_m == want[1]);
    CHECK(out_v == want[2]);
  }
}

TEST_CASE("reduction kernels in place on the GPU: element outputs over their input give the out-of-place bits") {
  // docs/api.md, "In place and aliasing": a reduction kernel's passes read the row before the
  // last one writes it, with the row cache in shared memory, split rows (several launches) and
  // column reductions alike. Checked on the CPU path; this checks the device kernels.
  // Element outputs that read no reduction are written in the one pass (the row read once): in
  // place each element is loaded and written by one thread; a column kernel's rows past the end
  // (C = 37: the last block repeats a row) must write nothing, or they would read the new values.
  // Output 0 goes over x; any other output (a row value) gets its own buffer.
  const char* texts[] = {
      "dim N = 64\ndim C = 4096\ninput x : f32[N, C]\ny = softmax(x, -1)\noutput y\n",
      "dim N = 2\ndim C = 300000\ninput x : f32[N, C]\ny = softmax(x, -1)\noutput y\n",
      ("dim N = 64\ndim C = 1024\ninput x : f32[N, C]\nmu = mean(x, -1, keepdim)\nd = x - mu\n"
       "y = d * rsqrt(mean(d * d, -1, keepdim) + 1e-5)\noutput y\n"),
      "dim N = 4096\ndim C = 96\ninput x : f32[N, C]\ny = x - sum(x, 0, keepdim)\noutput y\n",
      "dim N = 4096\ndim C = 4100\ninput x : f32[N, C]\nu = x * 0.5\nf = any(logical_not(isfinite(u)))\noutput u, f\n",
      "dim N = 4096\ndim C = 37\ninput x : f32[N, C]\nu = x - 1\ns = sum(x, 0)\noutput u, s\n",
      "dim N = 64\ndim C = 4096\ninput x : f32[N, C]\nu = x * 3\nm = amax(abs(x), -1)\noutput u, m\n"};
  for (const char* text : texts) {
    CAPTURE(text);
    const fj::Program prog = compile(text);
    auto keep = emulate(prog);
    const std::vector<fj::TensorInfo> outs = prog.graph().outputs();
    const fj::HostTensor hx = random_tensor(fj::DType::F32, prog.graph().inputs()[0].shape, 11);
    DevTensor x = upload(hx);
    const std::vector<fj::TensorRef> in = {x.ref()};
    std::vector<DevTensor> y;
    for (const fj::TensorInfo& o : outs) y.push_back(device_zeros(o.dtype, o.shape));
    std::vector<fj::TensorRef> refs;
    for (DevTensor& t : y) refs.push_back(t.ref());
    prog.launch(in, refs);
    std::vector<fj::HostTensor> want;
    for (DevTensor& t : y) want.push_back(download(t));
    refs[0] = x.ref();
    prog.launch(in, refs);
    CHECK(download(x) == want[0]);
    for (size_t k = 1; k < y.size(); ++k) CHECK(download(y[k]) == want[k]);
  }
}

TEST_CASE("reductions under a GPU's rules give the CPU path's bits: short rows re-read, long rows, split rows") {
  // docs/ops.md, "Short and long rows on a GPU" and "A row split over blocks": a GPU program plans
  // with short rows (<= 2,048 elements, vector path) re-read from L1/L2, long rows on chip
  // (>= 16,384) at up to 1,024 threads a block, and few rows of >= 8 chunks split; the CPU
  // program keeps every row on chip in one block. The same bits every way.
  const char* texts[] = {
      "input x : f32[64, 1024]\ny = softmax(x, -1)\noutput y\n",      // short: re-read, vector path
      "input x : f32[64, 1001]\ny = softmax(x, -1)\noutput y\n",      // short, not a multiple of V: on chip
      "input x : bf16[32, 2048]\ny = softmax(x, -1)\noutput y\n",     // short bf16
      ("input x : f32[16, 2048]\nmu = mean(x, -1, keepdim)\nd = x - mu\n"
       "y = d * rsqrt(mean(d * d, -1, keepdim) + 1e-5)\noutput y\n"),  // LayerNorm, short
      "input x : f32[8, 32768]\ny = softmax(x, -1)\noutput y\n",      // long rows on chip
      "input x : bf16[4, 32768]\ny = softmax(x, -1)\noutput y\n",     // long bf16 rows
      "input x : f32[2, 128256]\ny = logsumexp(x, -1)\noutput y\n",   // 16 chunks, 2 rows: split in 8
  };
  for (const char* text : texts) {
    CAPTURE(text);
    const fj::Program prog = compile(text);
    auto keep = emulate(prog);
    const fj::Program cpu = compile_cpu(text);
    const fj::TensorInfo in = prog.graph().inputs()[0];
    const fj::HostTensor hx = random_tensor(in.dtype, in.shape, 23);
    const std::vector<fj::HostTensor> want = cpu.run({hx});
    const fj::TensorInfo out = prog.graph().outputs()[0];
    DevTensor x = upload(hx), y = device_zeros(out.dtype, out.shape);
    prog.launch({x.ref()}, {y.ref()});
    CHECK(download(y) == want[0]);
  }
}

TEST_CASE("transposed and sliced device views give the bits of their contiguous copies") {
  const std::string text = "graph views_gpu\ndim M = 1000\ninput x : f32[M, 96]\ninput b : f32[96]\n"
                           "y = gelu(x) * b + x\noutput y\n";
  const fj::Program prog = compile(text);
  auto keep = emulate(prog);
  const int64_t M = 1000, N = 96;
  const fj::HostTensor hbuf = random_tensor(fj::DType::F32, {N, M}, 5), hwide = random_tensor(fj::DType::F32, {M, 2 * N}, 6);
  const fj::HostTensor hb = random_tensor(fj::DType::F32, {N}, 7);
  fj::HostTensor xt(fj::DType::F32, {M, N}), xs(fj::DType::F32, {M, N});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      xt.values<float>()[static_cast<size_t>(i * N + j)] = hbuf.values<float>()[static_cast<size_t>(j * M + i)];
      xs.values<float>()[static_cast<size_t>(i * N + j)] = hwide.values<float>()[static_cast<size_t>(i * 2 * N + 5 + j)];
    }
  DevTensor buf = upload(hbuf), wide = upload(hwide), b = upload(hb), dxt = upload(xt), dxs = upload(xs);
  for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
    DevTensor y1 = device_zeros(fj::DType::F32, {M, N}), y2 = device_zeros(fj::DType::F32, {M, N});
    prog.launch({buf.ref({M, N}, {1, M}), b.ref()}, {y1.ref()}, {}, nullptr, kind);
    prog.launch({dxt.ref(), b.ref()}, {y2.ref()}, {}, nullptr, kind);
    CHECK(download(y1) == download(y2));
    prog.launch({wide.ref({M, N}, {2 * N, 1}, 5), b.ref()}, {y1.ref()}, {}, nullptr, kind);
    prog.launch({dxs.ref(), b.ref()}, {y2.ref()}, {}, nullptr, kind);
    CHECK(download(y1) == download(y2));
    // A transposed output.
    DevTensor yt = device_zeros(fj::DType::F32, {N, M});
    prog.launch({dxt.ref(), b.ref()}, {yt.ref({M, N}, {1, M})}, {}, nullptr, kind);
    prog.launch({dxt.ref(), b.ref()}, {y2.ref()}, {}, nullptr, kind);
    const fj::HostTensor t = download(yt), y = download(y2);
    bool same = true;
    for (int64_t i = 0; i < M && same; ++i)
      for (int64_t j = 0; j < N && same; ++j)
        same = std::memcmp(&t.values<float>()[static_cast<size_t>(j * M + i)], &y.values<float>()[static_cast<size_t>(i * N + j)], 4) == 0;
    CHECK(same);
  }
}

TEST_CASE("zero-size tensors launch nothing; size-1 and other dims need no new kernel") {
  const std::string text = "graph dims_gpu\ndim B = 4\ndim T = 512\ninput x : f32[B, T, 64]\ninput s : f32[B, 1, 64]\n"
                           "input bias : f32[64]\ny = x * s + bias\noutput y\n";
  const fj::Program prog = compile(text);
  auto keep = emulate(prog);
  const fj::Program cpu = compile_cpu(text);
  for (const auto& bt : {std::pair<int64_t, int64_t>{4, 1}, {1, 512}, {1, 1}, {4, 512}, {3, 77}, {0, 5}, {2, 0}}) {
    const int64_t b = bt.first, t = bt.second;
    CAPTURE(b);
    CAPTURE(t);
    const fj::HostTensor x = random_tensor(fj::DType::F32, {b, t, 64}, 1), s = random_tensor(fj::DType::F32, {b, 1, 64}, 2);
    const fj::HostTensor bias = random_tensor(fj::DType::F32, {64}, 3);
    DevTensor dx = upload(x), ds = upload(s), dbias = upload(bias), dy = device_zeros(fj::DType::F32, {b, t, 64});
    prog.launch({dx.ref(), ds.ref(), dbias.ref()}, {dy.ref()});
    CHECK(download(dy) == cpu.run({x, s, bias})[0]);  // mul and add: the same bits
  }
  CHECK(prog.specializations().empty());
}

TEST_CASE("a launch captured into a CUDA graph replays with the buffers' new contents") {
  if (g_fake) return;  // needs the real driver's stream capture
  using BeginCapture = cu::Result (*)(cu::Stream, int);
  using EndCapture = cu::Result (*)(cu::Stream, void**);
  using Instantiate = cu::Result (*)(void**, void*, unsigned long long);
  using GraphLaunch = cu::Result (*)(void*, cu::Stream);
  using Destroy = cu::Result (*)(void*);
  const auto begin = driver_entry<BeginCapture>("cuStreamBeginCapture");
  const auto end = driver_entry<EndCapture>("cuStreamEndCapture");
  const auto instantiate = driver_entry<Instantiate>("cuGraphInstantiate");
  const auto graph_launch = driver_entry<GraphLaunch>("cuGraphLaunch");
  const auto graph_destroy = driver_entry<Destroy>("cuGraphDestroy");
  const auto exec_destroy = driver_entry<Destroy>("cuGraphExecDestroy");
  const std::string text = "graph captured\ndim T = 4096\ninput x : f32[T, 256]\ninput b : f32[256]\nparam a : f32 = 2\n"
                           "y = a * x + b\noutput y\n";
  const fj::Program prog = compile(text);
  const fj::Program cpu = compile_cpu(text);
  jit::OwnedStream stream(*g_dc);
  const cu::Stream s = stream.get();
  const fj::HostTensor x1 = random_tensor(fj::DType::F32, {4096, 256}, 1), x2 = random_tensor(fj::DType::F32, {4096, 256}, 2);
  const fj::HostTensor b = random_tensor(fj::DType::F32, {256}, 3);
  DevTensor dx = upload(x1), db = upload(b), dy = device_zeros(fj::DType::F32, {4096, 256});
  prog.launch({dx.ref(), db.ref()}, {dy.ref()}, {3.0}, s);  // the first launch in this context loads
  check(api().cuStreamSynchronize(s), "cuStreamSynchronize");
  // Global mode, as torch.cuda.graph uses: any call unsafe during capture would fail it.
  check(begin(s, 0 /* CU_STREAM_CAPTURE_MODE_GLOBAL */), "cuStreamBeginCapture");
  prog.launch({dx.ref(), db.ref()}, {dy.ref()}, {3.0}, s);
  void* graph = nullptr;
  check(end(s, &graph), "cuStreamEndCapture");
  void* exec = nullptr;
  check(instantiate(&exec, graph, 0), "cuGraphInstantiate");
  for (const fj::HostTensor* x : {&x2, &x1, &x2}) {
    check(api().cuMemcpyHtoDAsync(dx.buf.ptr(), x->data().data(), x->bytes(), s), "cuMemcpyHtoDAsync");
    check(api().cuMemsetD8Async(dy.buf.ptr(), 0xFF, 4096 * 256 * 4, s), "cuMemsetD8Async");
    check(graph_launch(exec, s), "cuGraphLaunch");
    CHECK(download(dy, s) == cpu.run({*x, b}, {3.0})[0]);
  }
  exec_destroy(exec);
  graph_destroy(graph);
}

TEST_CASE("one Program on two contexts: each loads its modules and runs") {
  if (g_fake) return;  // needs the real driver's contexts (test_launch covers the fake one)
  // cuGetProcAddress("cuCtxCreate", 12000) gave CUDA 13's driver's function of another signature
  // (a params pointer before the flags: _v3 or _v4), so the device argument landed elsewhere and
  // the call failed with CUDA_ERROR_INVALID_DEVICE on the H200 (2026-12-04). Ask by name: v4 (CUDA
  // 12.5+; null params make a plain context on CUDA 13), else or if it refuses, 12.0's v2.
  using CtxCreateV4 = cu::Result (*)(cu::Context*, void*, unsigned, cu::Device);
  using CtxCreateV2 = cu::Result (*)(cu::Context*, unsigned, cu::Device);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  void* v4 = dlsym(lib, "cuCtxCreate_v4");
  void* v2 = dlsym(lib, "cuCtxCreate_v2");
  REQUIRE((v4 != nullptr || v2 != nullptr));
  const auto ctx_create = [v4, v2](cu::Context* c, unsigned flags, cu::Device d) {
    const cu::Result r = v4 ? reinterpret_cast<CtxCreateV4>(v4)(c, nullptr, flags, d) : 1;
    return r == 0 || !v2 ? r : reinterpret_cast<CtxCreateV2>(v2)(c, flags, d);
  };
  const std::string text = "graph two_contexts\ninput x : f32[65536]\ny = x * 3 + 1\noutput y\n";
  const fj::Program prog = compile(text);
  const fj::Program cpu = compile_cpu(text);
  const fj::HostTensor hx = random_tensor(fj::DType::F32, {65536}, 9);
  const fj::HostTensor want = cpu.run({hx})[0];
  {
    DevTensor x = upload(hx), y = device_zeros(fj::DType::F32, {65536});
    prog.launch({x.ref()}, {y.ref()});
    CHECK(download(y) == want);
  }
  cu::Context other = nullptr;
  check(ctx_create(&other, 0, 0), "cuCtxCreate");  // current now
  {
    auto dc = jit::DeviceContext::open(0);  // borrows the new current context
    CHECK(dc->context() == other);
    DevTensor x = upload(hx, dc), y = upload(fj::HostTensor(fj::DType::F32, {65536}), dc);
    for (int i = 0; i < 2; ++i) {
      prog.launch({x.ref()}, {y.ref()});
      CHECK(download(y) == want);
    }
  }
  cu::Context popped = nullptr;
  check(api().cuCtxPopCurrent(&popped), "cuCtxPopCurrent");
  CHECK(popped == other);
  DevTensor x = upload(hx), y = device_zeros(fj::DType::F32, {65536});
  prog.launch({x.ref()}, {y.ref()});  // the first context again: its modules are still loaded
  CHECK(download(y) == want);
  // `other` stays alive: fusejit's module cache holds modules loaded in it until exit.
}
