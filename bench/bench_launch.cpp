// fusejit's own host cost per Program::launch: argument checks, the dims lookup, parameter
// packing, everything but the driver's launch calls; and heap allocations on that path, counted by
// this program's operator new (not guessed).
//
//   bench_launch [--iters N] [--only 1|8] [--json]
//                                         on the fake driver of tests/support/fake_driver.h (no GPU)
//   bench_launch --gpu [--iters N]        on the real driver, against raw cuLaunchKernel of the
//                                         same kernels with pre-packed arguments
//
// Programs: one kernel (y = a * x + b over f32[T, 256]) and eight kernels (eight outputs of eight
// different shapes: one fused kernel each, no intermediates), each launched at fixed dims and
// alternating between two dims sets (T = 64 and T = 1). Reported per launch and per kernel:
// total host time, the driver's share (fake: the fake entry points timed alone; GPU: raw
// cuLaunchKernel), fusejit's own (the difference), and allocations per launch. Times are medians
// over batches of calls.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <fusejit/fusejit.h>

#include "jit/driver.h"
#include "lib/program_impl.h"
#include "tests/support/alloc_counter.h"
#include "tests/support/fake_driver.h"

namespace fj = fusejit;
namespace jit = fusejit::jit;


namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  bool gpu = false;
  bool json = false;
  int iters = 200000;
  int only = 0;  // 1 or 8: that program only
};

// One program and the tensors of its two dims sets, in memory of the backend.
struct Case {
  std::string name;
  fj::Program program;
  int kernels = 0;
  std::vector<std::vector<int64_t>> shapes[2];  // per dims set: every input's, then every output's shape
  std::vector<void*> buffers;                   // per tensor, sized for the larger dims set
  std::vector<fj::TensorRef> in[2], out[2];
};

fj::Graph one_kernel_graph() {
  return fj::Graph::parse("graph launch1\ndim T = 64\ninput x : f32[T, 256]\ninput b : f32[256]\nparam a : f32 = 2\n"
                          "y = a * x + b\noutput y\n");
}

// Eight outputs of eight shapes: the fused plan has eight kernels and no intermediates.
fj::Graph eight_kernel_graph() {
  std::string text = "graph launch8\ndim T = 64\nparam a : f32 = 2\n";
  for (int k = 1; k <= 8; ++k) text += "input x" + std::to_string(k) + " : f32[T, " + std::to_string(8 * k) + "]\n";
  for (int k = 1; k <= 8; ++k) text += "y" + std::to_string(k) + " = a * x" + std::to_string(k) + " + 1\n";
  text += "output y1";
  for (int k = 2; k <= 8; ++k) text += ", y" + std::to_string(k);
  return fj::Graph::parse(text + "\n");
}

void* device_alloc(bool gpu, size_t bytes) {
  if (!gpu) return std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  jit::cu::DevicePtr p = 0;
  const jit::Driver& d = *jit::Driver::get();
  d.check(d.api().cuMemAlloc(&p, bytes), "cuMemAlloc");
  return reinterpret_cast<void*>(p);
}

Case make_case(const std::string& name, const fj::Graph& g, bool gpu) {
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  Case c{name, fj::Program::compile(g, o), 0, {}, {}, {}, {}};
  // The program's context current on this thread, as the CUDA runtime leaves its primary context.
  const jit::DeviceContext& dc = *c.program.impl().device;
  jit::cu::Context cur = nullptr;
  dc.driver().check(dc.api().cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
  if (!cur) dc.driver().check(dc.api().cuCtxPushCurrent(dc.context()), "cuCtxPushCurrent");
  c.kernels = static_cast<int>(c.program.kernels(fj::PlanKind::Fused).size());
  const int64_t t_of[2] = {64, 1};
  for (int s = 0; s < 2; ++s) {
    for (const fj::TensorInfo& t : g.inputs()) {
      std::vector<int64_t> shape = t.shape;
      if (!t.dim_names.empty() && t.dim_names[0] == "T") shape[0] = t_of[s];
      c.shapes[s].push_back(shape);
    }
    for (const fj::TensorInfo& t : g.outputs()) {
      std::vector<int64_t> shape = t.shape;
      if (!t.dim_names.empty() && t.dim_names[0] == "T") shape[0] = t_of[s];
      c.shapes[s].push_back(shape);
    }
  }
  const size_t nin = g.inputs().size();
  for (size_t k = 0; k < c.shapes[0].size(); ++k) {
    int64_t n = 1;
    for (int64_t d : c.shapes[0][k]) n *= d;
    c.buffers.push_back(device_alloc(gpu, static_cast<size_t>(n) * 4));
  }
  for (int s = 0; s < 2; ++s)
    for (size_t k = 0; k < c.shapes[s].size(); ++k)
      (k < nin ? c.in[s] : c.out[s]).push_back(fj::TensorRef(c.buffers[k], fj::DType::F32, c.shapes[s][k]));
  return c;
}

void sync(bool gpu) {
  if (!gpu) return;
  const jit::Driver& d = *jit::Driver::get();
  d.check(d.api().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

// Seconds per call of `f`: the median over batches of the batch's mean (the machine may be shared:
// the median keeps a batch that another process interrupted from counting), and the heap
// allocations made during all timed calls. On the GPU the queue is drained between batches,
// untimed, and a batch queues at most 256 kernels (`kernels` a call): a full launch queue would
// block cuLaunchKernel until the GPU frees a slot, timing the GPU rather than the host (the
// queue's depth is undocumented; about a thousand launches).
template <class F>
std::pair<double, long> time_calls(int iters, bool gpu, int kernels, F&& f) {
  const int batch = gpu ? std::max(1, 256 / kernels) : 2048;
  std::vector<double> per_call;
  long allocs = 0;
  for (int done = 0; done < iters; done += batch) {
    const int n = std::min(batch, iters - done);
    double seconds = 0;
    allocs += alloc_counter::during([&] {
      const auto t0 = Clock::now();
      for (int i = 0; i < n; ++i) f(done + i);
      seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    });
    per_call.push_back(seconds / n);
    sync(gpu);
  }
  std::nth_element(per_call.begin(), per_call.begin() + static_cast<std::ptrdiff_t>(per_call.size() / 2), per_call.end());
  return {per_call[per_call.size() / 2], allocs};
}

// The driver's share of one launch: cuCtxGetCurrent, cuCtxGetId and one cuLaunchKernel per kernel, called
// directly with the program's loaded functions and pre-packed arguments (the fast entry of each
// kernel at the first dims set; on the GPU these run the same kernels).
double raw_launch_seconds(const Case& c, int iters, bool gpu) {
  const fj::Program::Impl& impl = c.program.impl();
  const fj::Program::Impl::Path& path = impl.fused;
  const jit::DriverApi& a = impl.device->api();
  jit::cu::Context ctx = nullptr;
  a.cuCtxGetCurrent(&ctx);
  const fj::Program::Impl::Loaded* loaded = nullptr;
  for (const auto& l : path.contexts)
    if (l.ctx == ctx) loaded = &l;
  if (!loaded) return 0;
  std::vector<std::vector<uint64_t>> slots;
  std::vector<std::vector<void*>> ptrs;
  std::vector<jit::LaunchConfig> cfgs;
  const std::vector<int64_t> dims = {64};
  const fj::DimsHit hit = fj::dims_entry(impl, path, dims);
  for (size_t gi = 0; gi < path.plan.groups.size(); ++gi) {
    const jit::GroupLaunch& gl = hit.state->groups[gi];
    slots.push_back(gl.fast_args);
    const jit::KernelSignature& sig = gl.kernel->signature;
    for (size_t k = 0; k < sig.args.size(); ++k) {  // the same tensors the launches use (no intermediates)
      const jit::ArgSlot& a = sig.args[k];
      if (a.kind != jit::ArgKind::InputPtr && a.kind != jit::ArgKind::OutputPtr) continue;
      const bool in = a.kind == jit::ArgKind::InputPtr;
      const jit::BufferRef r = (in ? path.bindings->group_inputs : path.bindings->group_outputs)[gi][static_cast<size_t>(a.index)];
      const fj::TensorRef& t = (r.kind == jit::BufferRef::Kind::Input ? c.in : c.out)[0][static_cast<size_t>(r.index)];
      slots.back()[k] = reinterpret_cast<uint64_t>(t.data);
    }
    const jit::GpuFunction& fn = loaded->variants[0]->function(gi, false);
    cfgs.push_back(jit::choose_launch(loaded->dc->info(), fn.block, fn.blocks_per_sm, gl.n, 1));
  }
  for (auto& s : slots) {
    ptrs.emplace_back();
    for (uint64_t& v : s) ptrs.back().push_back(&v);
  }
  return time_calls(iters, gpu, static_cast<int>(slots.size()), [&](int) {
           jit::cu::Context cur = nullptr;
           a.cuCtxGetCurrent(&cur);
           unsigned long long id = 0;
           if (a.cuCtxGetId) a.cuCtxGetId(cur, &id);
           for (size_t gi = 0; gi < slots.size(); ++gi) {
             const jit::GpuFunction& fn = loaded->variants[0]->function(gi, false);
             a.cuLaunchKernel(fn.fn, cfgs[gi].grid, 1, 1, cfgs[gi].block, 1, 1, 0, nullptr, ptrs[gi].data(), nullptr);
           }
         }).first;
}

struct Row {
  std::string program, dims;
  int kernels;
  double total_us, driver_us, own_us;
  double allocs_per_launch;
};

Row measure(const Case& c, bool alternate, const Options& o) {
  const fj::Params params = {3.0};
  for (int s = 0; s < 2; ++s) c.program.launch(c.in[s], c.out[s], params);  // first launches: load, make states
  sync(o.gpu);
  const auto [t, allocs] = time_calls(o.iters, o.gpu, c.kernels, [&](int i) {
    const int s = alternate ? i & 1 : 0;
    c.program.launch(c.in[s], c.out[s], params);
  });
  const double driver = raw_launch_seconds(c, o.iters, o.gpu);
  return {c.name, alternate ? "T = 64, 1 alternating" : "T = 64 fixed", c.kernels, t * 1e6, driver * 1e6, (t - driver) * 1e6,
          static_cast<double>(allocs) / o.iters};
}

// A whole number in [lo, hi] from `text`, or -1 (atoi read "abc" as 0: a median of no timings).
long whole(const char* text, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  return errno == 0 && end != text && *end == '\0' && v >= lo && v <= hi ? v : -1;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    long v = 0;
    if (a == "--gpu") o.gpu = true;
    else if (a == "--json") o.json = true;
    else if (a == "--iters" && i + 1 < argc && (v = whole(argv[++i], 1, 100000000)) > 0) o.iters = static_cast<int>(v);
    else if (a == "--only" && i + 1 < argc && ((v = whole(argv[++i], 1, 8)) == 1 || v == 8)) o.only = static_cast<int>(v);
    else {
      std::printf("usage: bench_launch [--gpu] [--iters N (1 to 10^8)] [--only 1|8] [--json]\n");
      std::exit(a == "--help" || a == "-h" ? 0 : 2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  try {
    if (!o.gpu) {
      jit::set_driver_for_testing(fake_cuda::reset());
      fake_cuda::st().keep_launches = false;
    }
    jit::Driver::get()->api();  // throws without a driver
    std::vector<Case> cases;
    if (o.only != 8) cases.push_back(make_case("1 kernel", one_kernel_graph(), o.gpu));
    if (o.only != 1) cases.push_back(make_case("8 kernels", eight_kernel_graph(), o.gpu));
    std::vector<Row> rows;
    for (const Case& c : cases)
      for (bool alternate : {false, true}) rows.push_back(measure(c, alternate, o));
    const char* where = o.gpu ? "GPU (driver: raw cuLaunchKernel)" : "fake driver";
    if (o.json) {
      for (const Row& r : rows)
        std::printf("{\"backend\": \"%s\", \"program\": \"%s\", \"dims\": \"%s\", \"kernels\": %d, \"total_us\": %.3f, "
                    "\"driver_us\": %.3f, \"own_us\": %.3f, \"own_us_per_kernel\": %.3f, \"allocs_per_launch\": %.4f}\n",
                    o.gpu ? "cuda" : "fake", r.program.c_str(), r.dims.c_str(), r.kernels, r.total_us, r.driver_us,
                    r.own_us, r.own_us / r.kernels, r.allocs_per_launch);
      return 0;
    }
    std::printf("bench_launch on the %s, %d launches each; times per launch in microseconds\n", where, o.iters);
    std::printf("%-10s %-22s %7s %9s %9s %9s %12s %10s\n", "program", "dims", "kernels", "total", "driver", "fusejit",
                "fusejit/kern", "allocs");
    for (const Row& r : rows)
      std::printf("%-10s %-22s %7d %9.3f %9.3f %9.3f %12.3f %10.4f\n", r.program.c_str(), r.dims.c_str(), r.kernels,
                  r.total_us, r.driver_us, r.own_us, r.own_us / r.kernels, r.allocs_per_launch);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_launch: %s\n", e.what());
    return 1;
  }
}
