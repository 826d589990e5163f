// The production launch path (issue 12): any dims without recompiling, the lazy unfused plan, in
// place and aliasing, strided views, zero-size tensors, warm launches that issue nothing but
// kernel launches and allocate nothing (counted by this binary's operator new), several contexts,
// and ahead-of-time folders run with NVRTC hidden. CPU path and the fake driver of
// tests/support/fake_driver.h (kernels compiled by NVRTC for sm_90, run as their host builds).
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <new>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fusejit/fusejit.h>
#include <fusejit/report.h>

#include "jit/cache.h"
#include "jit/nvrtc.h"
#include "jit/overlap.h"
#include "tests/support/alloc_counter.h"
#include "ir/parser.h"
#include "tests/support/fake_gpu.h"
#include "tests/support/launch_data.h"
#include "tests/support/scoped_env.h"
#include "tests/support/random_graph.h"
#include "tests/support/files.h"

namespace fj = fusejit;
namespace jit = fusejit::jit;
namespace fs = std::filesystem;


namespace {

using fake_gpu::emulate;
using fake_gpu::FakeGpu;
using launch_data::adam_inputs;
using launch_data::AdamInputs;
using launch_data::random_tensor;

fj::Options cpu_options() {
  fj::Options o;
  o.backend = fj::Backend::Cpu;
  o.disk_cache = false;
  return o;
}

fj::Options gpu_options() {
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fj::Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A view of `t`'s storage from element `offset` on, with `shape` and `strides` (CPU launch()).
fj::TensorRef view(fj::HostTensor& t, int64_t offset, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides) {
  return fj::TensorRef(t.data().data() + offset * static_cast<int64_t>(fj::dtype_size(t.dtype())), t.dtype(), shape, strides);
}

const std::string kAdamW = launch_data::adamw_graph(1003);

// AdamW out of place (run) and in place (launch writing p, m and v over themselves) agree bit for bit.
void check_adamw_in_place(const fj::Program& prog, fj::PlanKind kind) {
  AdamInputs a = adam_inputs(1003);
  const std::vector<fj::HostTensor> want = prog.run({a.p, a.grad, a.m, a.v}, {}, kind);
  prog.launch({a.p, a.grad, a.m, a.v}, {a.p, a.m, a.v}, {}, nullptr, kind);
  CHECK(a.p == want[0]);
  CHECK(a.m == want[1]);
  CHECK(a.v == want[2]);
}

}  // namespace

TEST_CASE("dims at launch: size-1 dims and the compiled dims reuse the compiled kernels") {
  fj::Graph g = fj::Graph::parse(
      "graph dims_once\ndim B = 2\ndim T = 8\ninput x : f32[B, T, 16]\ninput s : f32[B, 1, 16]\n"
      "input bias : f32[16]\ny = x * s + bias\noutput y\n");
  const fj::Program p = fj::Program::compile(g, cpu_options());
  const std::vector<fj::KernelInfo> compiled = p.kernels(fj::PlanKind::Fused);
  // T = 1 (the decode case), then B = 1, then both, then the compiled dims: no new kernel.
  for (const auto& bt : {std::pair<int64_t, int64_t>{2, 1}, {1, 8}, {1, 1}, {2, 8}, {3, 5}}) {
    const int64_t b = bt.first, t = bt.second;
    CAPTURE(b);
    CAPTURE(t);
    const fj::HostTensor x = random_tensor(fj::DType::F32, {b, t, 16}, 7);
    const fj::HostTensor s = random_tensor(fj::DType::F32, {b, 1, 16}, 8);
    const fj::HostTensor bias = random_tensor(fj::DType::F32, {16}, 9);
    const fj::HostTensor y = p.run({x, s, bias})[0];
    REQUIRE(y.shape() == std::vector<int64_t>{b, t, 16});
    const auto xv = x.values<float>(), sv = s.values<float>(), bv = bias.values<float>(), yv = y.values<float>();
    for (int64_t i = 0; i < b * t * 16; ++i) {
      const int64_t bb = i / (t * 16), f = i % 16;
      const float want = xv[static_cast<size_t>(i)] * sv[static_cast<size_t>(bb * 16 + f)] + bv[static_cast<size_t>(f)];
      REQUIRE(std::memcmp(&want, &yv[static_cast<size_t>(i)], 4) == 0);
    }
  }
  CHECK(p.specializations().empty());  // nothing compiled after compile()
  // What a caller allocating the outputs asks first (data not needed).
  const std::vector<int64_t> x_shape = {5, 3, 16}, s_shape = {5, 1, 16}, b_shape = {16};
  const fj::TensorRef shapes_only[3] = {fj::TensorRef(nullptr, fj::DType::F32, x_shape),
                                        fj::TensorRef(nullptr, fj::DType::F32, s_shape),
                                        fj::TensorRef(nullptr, fj::DType::F32, b_shape)};
  CHECK(p.output_shapes(shapes_only) == std::vector<std::vector<int64_t>>{{5, 3, 16}});
  // A braced list, as launch() takes (a hostile tester's wish: it did not compile).
  CHECK(p.output_shapes({shapes_only[0], shapes_only[1], shapes_only[2]}, fj::PlanKind::Unfused) ==
        std::vector<std::vector<int64_t>>{{5, 3, 16}});
  const fj::TensorRef wrong[3] = {shapes_only[0], fj::TensorRef(nullptr, fj::DType::F32, x_shape), shapes_only[2]};
  CHECK(contains(error_of([&] { p.output_shapes(wrong); }), "input 's': expected f32[B=5, 1, 16], got f32[5, 3, 16]"));
  REQUIRE(p.kernels(fj::PlanKind::Fused).size() == compiled.size());
  CHECK(p.kernels(fj::PlanKind::Fused)[0].name == compiled[0].name);
}

TEST_CASE("a graph error at the dims of a launch is located in the graph's file; an argument error names no file") {
  const std::string text = "dim N = 4\ndim C = 8\ninput x : f32[N, C]\ny = amax(x, -1)\noutput y\n";
  const fj::Program p = fj::Program::compile(fj::Graph::parse(text, "sm.txt"), cpu_options());
  const std::vector<int64_t> empty_rows = {4, 0}, bad_rank = {4};
  const fj::TensorRef in[1] = {fj::TensorRef(nullptr, fj::DType::F32, empty_rows)};
  try {
    p.output_shapes(in);
    FAIL("expected an error");
  } catch (const fj::Error& e) {
    CHECK(e.file() == "sm.txt");
    CHECK(e.line() == 4);
    CHECK(contains(e.diagnostic(), "sm.txt:4:5: error: 'y': amax of zero elements"));
    CHECK(contains(e.diagnostic(), "y = amax(x, -1)\n      ^"));
  }
  // softmax's own amax starts from -inf (initial=-inf): an empty axis gives an empty result.
  const fj::Program sm = fj::Program::compile(
      fj::Graph::parse("dim N = 4\ndim C = 8\ninput x : f32[N, C]\ny = softmax(x, -1)\noutput y\n"), cpu_options());
  CHECK(sm.output_shapes(in) == std::vector<std::vector<int64_t>>{{4, 0}});
  const fj::TensorRef wrong[1] = {fj::TensorRef(nullptr, fj::DType::F32, bad_rank)};
  try {
    p.output_shapes(wrong);
    FAIL("expected an error");
  } catch (const fj::Error& e) {
    CHECK(e.diagnostic().rfind("error: input 'x'", 0) == 0);
  }
}

TEST_CASE("dims at launch on the GPU path: a size-1 dim, another, then the compiled dims compile nothing (counted)") {
  FakeGpu gpu;
  const std::string text =
      "graph dims_gpu_once\ndim B = 2\ndim T = 8\ninput x : f32[B, T, 16]\ninput s : f32[B, 1, 16]\n"
      "input bias : f32[16]\ny = x * s + bias\noutput y\n";
  fj::Options o = gpu_options();
  o.disk_cache = false;
  const fj::Program p = fj::Program::compile(fj::Graph::parse(text), o);
  auto keep = emulate(p);
  const fj::Program cpu = fj::Program::compile(fj::Graph::parse(text), cpu_options());
  fusejit::jit::KernelCache& cache = fusejit::jit::KernelCache::shared("", false);
  const uint64_t compiles = cache.counters().compiles;  // NVRTC runs of this process so far
  for (const auto& bt : {std::pair<int64_t, int64_t>{2, 1}, {1, 8}, {2, 8}}) {
    const int64_t b = bt.first, t = bt.second;
    const fj::HostTensor x = random_tensor(fj::DType::F32, {b, t, 16}, 7), s = random_tensor(fj::DType::F32, {b, 1, 16}, 8);
    const fj::HostTensor bias = random_tensor(fj::DType::F32, {16}, 9);
    CHECK(p.run({x, s, bias})[0] == cpu.run({x, s, bias})[0]);
  }
  CHECK(cache.counters().compiles == compiles);
  CHECK(p.specializations().empty());
}

TEST_CASE("dims at launch: a plan that changes where two named dims meet is compiled once for that pattern") {
  // y1 has a's shape and y2 the broadcast of a and b: one kernel while S = T, two shapes at S = 1.
  fj::Graph g = fj::Graph::parse(
      "graph two_dims\ndim S = 4\ndim T = 4\ninput a : f32[S, 8]\ninput b : f32[T, 8]\n"
      "y1 = a * 2\ny2 = a + b\noutput y1, y2\n");
  const fj::Program p = fj::Program::compile(g, cpu_options());
  for (const auto& st : {std::pair<int64_t, int64_t>{1, 4}, {1, 6}, {4, 4}, {1, 2}}) {
    const int64_t s = st.first, t = st.second;
    CAPTURE(s);
    CAPTURE(t);
    const fj::HostTensor a = random_tensor(fj::DType::F32, {s, 8}, 1), b = random_tensor(fj::DType::F32, {t, 8}, 2);
    const std::vector<fj::HostTensor> out = p.run({a, b});
    REQUIRE(out[1].shape() == std::vector<int64_t>{std::max(s, t), 8});
    const auto av = a.values<float>(), bv = b.values<float>(), y2 = out[1].values<float>();
    for (int64_t i = 0; i < std::max(s, t) * 8; ++i) {
      const float want = av[static_cast<size_t>(s == 1 ? i % 8 : i)] + bv[static_cast<size_t>(t == 1 ? i % 8 : i)];
      REQUIRE(y2[static_cast<size_t>(i)] == want);
    }
    CHECK(p.run({a, b}, {}, fj::PlanKind::Unfused)[1] == out[1]);
  }
  // One Program for the dims pattern S = 1, compiled once (S = 1 with T = 4, 6 and 2 share it).
  const std::vector<fj::KernelInfo> spec = p.specializations();
  CHECK(spec.size() == 2);  // its fused plan: one kernel per shape
}

TEST_CASE("dims at launch: a reduction compiled where a reduced dim is 1 or 0 runs other dims right, in bounds") {
  // Which values are per row and which per element must not follow sizes that change at launch: at
  // C = 1 the keepdim row [N, 1] has the iteration space's sizes; at N = 0 a [1] result is not one
  // of N elements. Each program runs every other dims' tensors and must give the bits of the program
  // compiled at those dims, writing exactly its outputs (guard elements around them stay poisoned).
  const std::vector<std::string> bodies = {
      "y = sum(x, -1, keepdim)\n", "y = softmax(x, -1)\n", "y = logsumexp(x, -1, keepdim)\nz = logsumexp(x, -1)\n",
      "y = var(x, -1)\n", "y = x - mean(x, -1, keepdim)\nz = sum(x, -1, keepdim) * 2 + 1\n",
      "y = sum(x, 0, keepdim)\n",
      // Values constant along the reduced axes ride in the reduction's kernel: written once per row,
      // also where the rows are empty (N = 0), and a 0-d one where the iteration space is.
      "y = sum(x, 0)\nz = exp(cast(0.5, f32)) + sum(x, [0, 1]) * 0\n", "y = sum(x)\nz = exp(cast(0.5, f32))\n"};
  const std::vector<std::pair<int64_t, int64_t>> dims = {{3, 1}, {1, 1}, {3, 0}, {2, 5}};
  fj::Options o;
  o.backend = fj::Backend::Cpu;
  auto compile = [&](const std::string& body, std::pair<int64_t, int64_t> nc) -> std::optional<fj::Program> {
    const std::string text = fmt::format("dim N = {}\ndim C = {}\ninput x : f32[N, C]\n{}output y{}\n", nc.first,
                                         nc.second, body, body.find("z =") != std::string::npos ? ", z" : "");
    try {
      return fj::Program::compile(fj::Graph::parse(text), o);
    } catch (const fj::Error& e) {  // softmax over C = 0: no identity for its max
      CHECK(e.kind() == fj::ErrorKind::User);
      return std::nullopt;
    }
  };
  constexpr int64_t kGuard = 16;
  for (const std::string& body : bodies) {
    std::vector<std::optional<fj::Program>> progs;
    for (const auto& nc : dims) progs.push_back(compile(body, nc));
    for (size_t from = 0; from < dims.size(); ++from) {
      if (!progs[from]) continue;
      for (size_t at = 0; at < dims.size(); ++at) {
        if (!progs[at]) continue;
        CAPTURE(body);
        CAPTURE(dims[from]);
        CAPTURE(dims[at]);
        const fj::HostTensor x = random_tensor(fj::DType::F32, {dims[at].first, dims[at].second}, 11);
        for (const fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
          const std::vector<fj::HostTensor> want = progs[at]->run({x}, {}, kind);
          std::vector<fj::HostTensor> guarded;
          std::vector<fj::TensorRef> outs;
          for (const fj::HostTensor& w : want) {
            guarded.emplace_back(fj::DType::F32, std::vector<int64_t>{w.elements() + 2 * kGuard});
            std::memset(guarded.back().data().data(), 0xA5, guarded.back().bytes());
          }
          for (size_t k = 0; k < want.size(); ++k) outs.push_back(view(guarded[k], kGuard, want[k].shape(), {}));
          const fj::TensorRef in[1] = {x};
          progs[from]->launch(in, outs, {}, nullptr, kind);
          for (size_t k = 0; k < want.size(); ++k) {
            const std::byte* g = guarded[k].data().data();
            const size_t head = kGuard * 4, body_bytes = want[k].bytes();
            for (size_t b = 0; b < head; ++b) REQUIRE(g[b] == std::byte{0xA5});
            for (size_t b = 0; b < head; ++b) REQUIRE(g[head + body_bytes + b] == std::byte{0xA5});
            REQUIRE(std::memcmp(g + head, want[k].data().data(), body_bytes) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("dims at launch: an input a named dim of 1 broadcast at compile time, called where it is not") {
  // Compiled at S = 1 (b broadcast along x), called at S = 8 (or 4): the strided entry runs the
  // call's pattern and must read b along it (it read b's first element only: the compile-time
  // pattern), and the other way round. Each call must give the bits of a program compiled at its
  // dims. Rows of one dim, of several (flat), columns, a softmax, an epilogue; and a rewrite that
  // holds at one pattern only (a * 0 + b is b where b has the sum's shape).
  const std::vector<std::pair<std::string, int64_t>> bodies = {
      {"input x : f32[2, 8]\ninput b : f32[2, S]\ny = sum(x * b, -1)\n", 8},
      {"input x : f32[3, 8]\ninput b : f32[S, 8]\ny = softmax(x * b, -1)\n", 3},
      {"input x : f32[2, 4, 8]\ninput b : f32[S, 8]\ny = x - mean(x * b, [1, 2], keepdim)\n", 4},
      {"input x : f32[8, 3]\ninput b : f32[S, 3]\ny = sum(x * b, 0)\n", 8},
      {"input a : i32[2, 8]\ninput b : i32[2, S]\ny = sum(a * 0 + b, -1)\n", 8},
      {"dim R = 1\ninput a : i32[2, R]\ninput b : i32[2, S]\ny = sum(a * 0 + b, -1)\n", 8},
  };
  for (const auto& body_wide : bodies) {
    const std::string& body = body_wide.first;  // not a structured binding: clang 14 cannot capture one
    const int64_t wide = body_wide.second;
    std::vector<fj::Program> progs;
    for (int64_t s : {int64_t{1}, wide})
      progs.push_back(fj::Program::compile(fj::Graph::parse(fmt::format("dim S = {}\n{}output y\n", s, body)), cpu_options()));
    for (size_t from = 0; from < progs.size(); ++from)
      for (size_t at = 0; at < progs.size(); ++at) {
        CAPTURE(body);
        CAPTURE(from);
        CAPTURE(at);
        std::vector<fj::HostTensor> ins;
        for (const fj::TensorInfo& in : progs[at].graph().inputs())
          ins.push_back(random_tensor(in.dtype, in.shape, 20 + static_cast<uint32_t>(ins.size())));
        for (const fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused})
          CHECK(progs[from].run(ins, {}, kind)[0] == progs[at].run(ins, {}, fj::PlanKind::Unfused)[0]);
      }
  }
  // R = 1, S = 8 at compile time, called at R = 8, S = 1: a * 0 + b broadcasts a's R now; the
  // rewrite to b held only where b had the sum's shape (it summed b alone: [3, 5] for [24, 40]).
  const fj::Program p = fj::Program::compile(
      fj::Graph::parse("dim R = 1\ndim S = 8\ninput a : i32[2, R]\ninput b : i32[2, S]\ny = sum(a * 0 + b, -1)\noutput y\n"),
      cpu_options());
  const fj::HostTensor a = random_tensor(fj::DType::I32, {2, 8}, 5), b = random_tensor(fj::DType::I32, {2, 1}, 6);
  CHECK(p.run({a, b})[0] == p.run({a, b}, {}, fj::PlanKind::Unfused)[0]);
}

TEST_CASE("dims at launch: where no rule fired, a named dim starting to broadcast compiles nothing new") {
  // z is [S] at S = 8 and the literal [8] at S = 1 (the broadcast keeps the named dim of equal
  // sizes): a rewrite could have depended on that, but none fired, and the plan holds at both.
  for (const std::string body : {"z = x + y\nw = sum(z * x, -1)\n", "z = y + x\nw = softmax(z, -1)\n"}) {
    const auto text = [&](int64_t s) {
      return fmt::format("dim S = {}\ninput x : f32[S]\ninput y : f32[8]\n{}output z, w\n", s, body);
    };
    const fj::Program p = fj::Program::compile(fj::Graph::parse(text(8)), cpu_options());
    for (int64_t s : {int64_t{1}, int64_t{8}}) {
      CAPTURE(body);
      CAPTURE(s);
      const fj::Program at = fj::Program::compile(fj::Graph::parse(text(s)), cpu_options());
      const fj::HostTensor x = random_tensor(fj::DType::F32, {s}, 3), y = random_tensor(fj::DType::F32, {8}, 4);
      const std::vector<fj::HostTensor> got = p.run({x, y}), want = at.run({x, y}, {}, fj::PlanKind::Unfused);
      CHECK(got[0] == want[0]);
      CHECK(got[1] == want[1]);
    }
    CHECK(p.specializations().empty());
  }
}

TEST_CASE("the unfused plan is compiled on first use, and KernelInfo says so") {
  fj::Graph g = fj::Graph::parse("graph lazy\ninput x : f32[64]\ny = exp(x) * 2 + 1\noutput y\n");
  const fj::Program p = fj::Program::compile(g, cpu_options());
  const std::vector<fj::KernelInfo> before = p.kernels(fj::PlanKind::Unfused);
  REQUIRE(before.size() == 3);
  for (const fj::KernelInfo& k : before) {
    CHECK(k.cache == fj::CacheOutcome::NotBuilt);
    CHECK(k.name.empty());
    CHECK(k.source.empty());
    CHECK(k.ops.size() == 1);
    CHECK(k.read_bytes + k.write_bytes > 0);
  }
  CHECK(fj::cache_outcome_name(fj::CacheOutcome::NotBuilt) == "not built");
  CHECK_THROWS_WITH_AS(fj::cache_outcome_name(static_cast<fj::CacheOutcome>(99)),
                       doctest::Contains("invalid CacheOutcome value 99"), fj::Error);  // it said "compiled"
  CHECK(p.kernels(fj::PlanKind::Fused)[0].cache != fj::CacheOutcome::NotBuilt);
  const fj::HostTensor x = random_tensor(fj::DType::F32, {64}, 3);
  CHECK(p.run({x}, {}, fj::PlanKind::Unfused)[0] == p.run({x})[0]);
  for (const fj::KernelInfo& k : p.kernels(fj::PlanKind::Unfused)) {
    CHECK(k.cache != fj::CacheOutcome::NotBuilt);
    CHECK(!k.name.empty());
  }
  fj::Options eager = cpu_options();
  eager.build_unfused = true;
  for (const fj::KernelInfo& k : fj::Program::compile(g, eager).kernels(fj::PlanKind::Unfused))
    CHECK(k.cache != fj::CacheOutcome::NotBuilt);
}

TEST_CASE("AdamW in place is bitwise identical to out of place (CPU, fused and unfused)") {
  const fj::Program prog = fj::Program::compile(fj::Graph::parse(kAdamW), cpu_options());
  check_adamw_in_place(prog, fj::PlanKind::Fused);
  check_adamw_in_place(prog, fj::PlanKind::Unfused);  // intermediates between its 14 kernels
}

TEST_CASE("in place in a reduction kernel: element outputs run in place, a row value over an input it reads is refused") {
  // s = sum(x, 0) over b: the kernel writes s once per column while its threads still read b,
  // broadcast, for y (found by a hostile pass: every y came out 5). Same for a row of a row kernel.
  const char* texts[] = {"dim N = 4\ndim M = 3\ninput x : f32[N, M]\ninput b : f32[M]\ny = x + b\ns = sum(x, 0)\n"
                         "output y, s\n",
                         "dim N = 4\ndim M = 3\ninput x : f32[N, M]\ninput b : f32[N, 1]\ny = x * b\n"
                         "s = amax(x, -1, keepdim)\noutput y, s\n"};
  for (const char* text : texts) {
    CAPTURE(text);
    const fj::Program p = fj::Program::compile(fj::Graph::parse(text), cpu_options());
    fj::HostTensor x = random_tensor(fj::DType::F32, {4, 3}, 1);
    fj::HostTensor b = random_tensor(fj::DType::F32, std::string(text).find("[M]\n") != std::string::npos
                                                         ? std::vector<int64_t>{3} : std::vector<int64_t>{4, 1}, 2);
    fj::HostTensor y(fj::DType::F32, {4, 3});
    const std::string e = error_of([&] { p.launch({x, b}, {y, b}); });
    CHECK(contains(e, "output 's' is the buffer of input 'b', but kernel 1 of 1 writes 's' once per row of its "
                      "reduction while the row's threads still read 'b'"));
  }
  // An element output over the input of its reduction kernel: each element read before it is written.
  const fj::Program sm = fj::Program::compile(
      fj::Graph::parse("dim N = 3\ndim C = 700\ninput x : f32[N, C]\nmu = mean(x, -1, keepdim)\nd = x - mu\n"
                       "y = d * rsqrt(mean(d * d, -1, keepdim) + 1e-5)\noutput y\n"),
      cpu_options());
  fj::HostTensor x = random_tensor(fj::DType::F32, {3, 700}, 3);
  const fj::HostTensor want = sm.run({x})[0];
  sm.launch({x}, {x});
  CHECK(x == want);
}

TEST_CASE("element outputs written in the one pass (the row read once): in place, split rows, column kernels") {
  // u reads no reduction, so the kernel writes it as its one pass loads x: a whole-tensor flag, a
  // row kernel, and a column kernel with rows past the end (C = 37: its last block repeats a row).
  const char* texts[] = {"dim N = 40\ndim C = 600\ninput x : f32[N, C]\nparam s : f32 = 0.5\nu = x * s\n"
                         "f = any(logical_not(isfinite(u)))\noutput u, f\n",
                         "dim N = 40\ndim C = 600\ninput x : f32[N, C]\nu = x * 3\nm = amax(abs(x), -1)\noutput u, m\n",
                         "dim N = 600\ndim C = 37\ninput x : f32[N, C]\nu = x - 1\ns = sum(x, 0)\noutput u, s\n",
                         // ... also where u reads a row value of inputs alone (known before the pass; an
                         // auditor's find: it took a second pass over x, predicting 1.00x for 1.50x)
                         "dim N = 40\ndim C = 600\ninput x : f32[N, C]\ninput t : f32[N, 1]\nu = x * (t * 2)\n"
                         "m = sum(x, -1)\noutput u, m\n",
                         "dim N = 600\ndim C = 37\ninput x : f32[N, C]\ninput w : f32[C]\nu = x * (w * 2)\n"
                         "s = sum(x, 0)\noutput u, s\n"};
  for (const char* text : texts) {
    CAPTURE(text);
    const fj::Graph g = fj::Graph::parse(text);
    const fj::PlanReport plan = fj::plan_graph(g);
    CHECK(plan.fused_kernels == 1);
    const std::string row = contains(text, "sum(x, 0)") ? "column" : "row";  // a column kernel's rows are columns
    CHECK(contains(plan.text, "1 pass over each " + row + " (the element outputs written in it)"));
    CHECK(!contains(plan.text, "re-read"));
    const std::vector<int64_t> shape = g.inputs()[0].shape;
    for (int64_t split : {0, 1, 3}) {
      CAPTURE(split);
      fj::Options o = cpu_options();
      o.row_split = split;
      const fj::Program p = fj::Program::compile(g, o);
      fj::HostTensor x = random_tensor(fj::DType::F32, shape, 5);
      x.values<float>()[17] = NAN;
      std::vector<fj::HostTensor> in = {x};
      if (g.inputs().size() == 2) in.push_back(random_tensor(fj::DType::F32, g.inputs()[1].shape, 6));
      const std::vector<fj::HostTensor> want = p.run(in, {}, fj::PlanKind::Unfused);
      CHECK(p.run(in) == want);
      fj::HostTensor r(want[1].dtype(), want[1].shape());
      const std::vector<fj::TensorRef> ins(in.begin(), in.end()), outs = {in[0], r};
      p.launch(ins, outs);  // u over x
      CHECK(in[0] == want[0]);
      CHECK(r == want[1]);
    }
  }
}

TEST_CASE("row kernels over strided views read the rows they keep on chip at the views' strides") {
  // Softmax and LayerNorm over rows of x (re-read by every pass: kept on chip when it fits), and a
  // softmax of x + b with b [N, 1] (re-read too, constant along the row: stride 0). Inputs as views
  // with a stride of 3 along the row and as transposes (the strided entry), with the row cache on,
  // off and under a limit the rows do not fit: the bits of contiguous copies every way.
  const char* texts[] = {"dim N = 6\ndim C = 203\ninput x : f32[N, C]\ny = softmax(x, -1)\noutput y\n",
                         "dim N = 6\ndim C = 203\ninput x : bf16[N, C]\nh = cast(x, f32)\nm = mean(h, -1, keepdim)\n"
                         "d = h - m\nv = mean(d * d, -1, keepdim)\ny = d * rsqrt(v + 1e-5)\noutput y\n",
                         "dim N = 6\ndim C = 203\ninput x : f32[N, C]\ninput b : f32[N, 1]\ny = softmax(x + b, -1)\noutput y\n"};
  for (const char* text : texts) {
    CAPTURE(text);
    const fj::Graph g = fj::Graph::parse(text);
    std::vector<fj::HostTensor> ins;  // x [6, 203], b [6, 1]
    for (size_t i = 0; i < g.inputs().size(); ++i)
      ins.push_back(random_tensor(g.inputs()[i].dtype, {6, i == 0 ? 203 : 1}, 40 + static_cast<int>(i)));
    for (int cache = 0; cache < 3; ++cache) {
      CAPTURE(cache);
      fj::Options o = cpu_options();
      o.row_cache = cache != 1;
      o.row_cache_limit = cache == 2 ? 64 : 0;
      const fj::Program p = fj::Program::compile(g, o);
      const std::vector<fj::HostTensor> want = p.run(ins);
      // Every input in storage 3 times as wide, element (r, c) at 3 (r C + c) + 1 (stride 3 along
      // the row), and transposed: element (r, c) at c N + r.
      std::vector<fj::HostTensor> wide, transposed;
      std::vector<fj::TensorRef> wide_refs, t_refs;
      for (fj::HostTensor& t : ins) {
        const int64_t n = t.shape()[0], c = t.shape()[1];
        const size_t es = fj::dtype_size(t.dtype());
        wide.emplace_back(t.dtype(), std::vector<int64_t>{3 * n * c + 1});
        transposed.emplace_back(t.dtype(), std::vector<int64_t>{c, n});
        for (int64_t r = 0; r < n; ++r)
          for (int64_t k = 0; k < c; ++k) {
            const std::byte* from = t.data().data() + (r * c + k) * es;
            std::memcpy(wide.back().data().data() + (3 * (r * c + k) + 1) * es, from, es);
            std::memcpy(transposed.back().data().data() + (k * n + r) * es, from, es);
          }
      }
      std::vector<std::vector<int64_t>> wide_strides, t_strides;  // a TensorRef refers to them
      for (const fj::HostTensor& t : ins) {
        wide_strides.push_back({3 * t.shape()[1], 3});
        t_strides.push_back({1, t.shape()[0]});
      }
      for (size_t i = 0; i < ins.size(); ++i) {
        wide_refs.push_back(view(wide[i], 1, ins[i].shape(), wide_strides[i]));
        t_refs.push_back(view(transposed[i], 0, ins[i].shape(), t_strides[i]));
      }
      for (const std::vector<fj::TensorRef>* refs : {&wide_refs, &t_refs}) {
        fj::HostTensor y(want[0].dtype(), want[0].shape());
        const fj::TensorRef outs[1] = {y};
        p.launch(*refs, outs);
        CHECK(y == want[0]);
      }
    }
  }
}

TEST_CASE("views reaching past 2^63 bytes are refused before any check computes with their extent") {
  // The byte extent wrapped mod 2^64: run() read far outside a 128-byte buffer, launch() took
  // four rows 2^64 bytes apart as one 32-byte block (hostile pass).
  const fj::Program p = fj::Program::compile(fj::Graph::parse("input x : f32[4, 8]\ny = x * 2\noutput y\n"), cpu_options());
  std::vector<std::byte> data(128);
  const std::vector<int64_t> shape = {4, 8}, wide = {int64_t{1} << 61, 1}, wider = {int64_t{1} << 62, 1};
  const fj::TensorView v(fj::DType::F32, shape, data, wide);
  CHECK(contains(error_of([&] { p.run({v}); }), "input 'x': f32[4, 8] with strides [2305843009213693952, 1] reaches "
                                                "more than 2^63 - 1 bytes"));
  fj::HostTensor x = random_tensor(fj::DType::F32, {4, 8}, 1), y(fj::DType::F32, {4, 8});
  CHECK(contains(error_of([&] { p.launch({x}, {fj::TensorRef(y.data().data(), fj::DType::F32, shape, wider)}); }),
                 "output 'y': f32[4, 8] with strides [4611686018427387904, 1] reaches more than 2^63 - 1 bytes"));
  const fj::Program n = fj::Program::compile(fj::Graph::parse("dim N = 16\ninput x : f32[N]\ns = sum(x)\noutput s\n"),
                                             cpu_options());
  const std::vector<int64_t> huge = {(int64_t{1} << 62) + 16};
  CHECK(contains(error_of([&] { n.run({fj::TensorView(fj::DType::F32, huge, std::span(data).first(64))}); }),
                 "input 'x': f32[4611686018427387920] reaches more than 2^63 - 1 bytes"));
  // A broadcast view of 2^64 elements over 4 bytes reaches no memory past them: its element
  // count is what overflows (the message said it reached past 2^63 bytes).
  const fj::Program m = fj::Program::compile(
      fj::Graph::parse("dim M = 4\ndim N = 8\ninput x : f32[M, N]\ny = x * 2\noutput y\n"), cpu_options());
  const std::vector<int64_t> square = {int64_t{1} << 32, int64_t{1} << 32}, zeros = {0, 0};
  CHECK(contains(error_of([&] { m.run({fj::TensorView(fj::DType::F32, square, std::span(data).first(4), zeros)}); }),
                 "input 'x': f32[4294967296, 4294967296] has an element count that overflows 64 bits"));
}

TEST_CASE("overlaps other than in place are refused, naming both tensors") {
  const fj::Program prog = fj::Program::compile(fj::Graph::parse(kAdamW), cpu_options());
  AdamInputs a = adam_inputs(1003);
  fj::HostTensor big(fj::DType::F32, {2006});
  const std::vector<int64_t> n = {1003}, one = {1}, zero = {0};
  // p_out one element past p: a partial overlap.
  fj::HostTensor p2(fj::DType::F32, {1004});
  std::string e = error_of([&] {
    prog.launch({view(p2, 0, n, one), a.grad, a.m, a.v}, {view(p2, 1, n, one), a.m, a.v});
  });
  CHECK(contains(e, "output 'p_out'"));
  CHECK(contains(e, "overlaps input 'p'"));
  // The same bytes read with another stride (every other element) is no in-place update either.
  e = error_of([&] {
    prog.launch({view(big, 0, n, {2}), a.grad, a.m, a.v}, {view(big, 0, n, one), a.m, a.v});
  });
  CHECK(contains(e, "output 'p_out'"));
  CHECK(contains(e, "same tensor"));
  // Two outputs in one buffer.
  e = error_of([&] { prog.launch({a.p, a.grad, a.m, a.v}, {view(big, 0, n, one), view(big, 500, n, one), a.v}); });
  CHECK(contains(e, "output 'm_out'"));
  CHECK(contains(e, "overlaps output 'p_out'"));
  // An expanded output: every element at one address.
  e = error_of([&] { prog.launch({a.p, a.grad, a.m, a.v}, {view(big, 0, n, zero), a.m, a.v}); });
  CHECK(contains(e, "output 'p_out' is a view whose elements overlap each other"));
  // No data for a tensor with elements.
  e = error_of([&] { prog.launch({fj::TensorRef(nullptr, fj::DType::F32, n), a.grad, a.m, a.v}, {a.p, a.m, a.v}); });
  CHECK(contains(e, "input 'p': a null data pointer for a tensor of shape [1003]"));
  // A negative stride.
  e = error_of([&] { prog.launch({view(big, 1002, n, {-1}), a.grad, a.m, a.v}, {a.p, a.m, a.v}); });
  CHECK(contains(e, "input 'p': strides [-1] for shape [1003]: a negative stride (a reversed view such as x[::-1]) "
                    "is not supported"));
  // ... but a stride means nothing on a dim of size 1 or in a tensor without elements (NumPy gives
  // x[::-1] of one element the stride -1), so any is taken there.
  const fj::Program add = fj::Program::compile(
      fj::Graph::parse("graph add\ndim R = 4\ninput x : f32[R, 1]\ninput b : f32[1, 1]\ny = x + b\noutput y\n"),
      cpu_options());
  fj::HostTensor x41 = random_tensor(fj::DType::F32, {4, 1}, 3), b11 = random_tensor(fj::DType::F32, {1, 1}, 4);
  fj::HostTensor y41(fj::DType::F32, {4, 1});
  const std::vector<int64_t> s41 = {4, 1}, s11 = {1, 1};
  add.launch({view(x41, 0, s41, {1, -7}), view(b11, 0, s11, {-3, -5})}, {view(y41, 0, s41, {1, -1})});
  const std::vector<fj::HostTensor> want = add.run({x41, b11});
  CHECK(std::memcmp(y41.data().data(), want[0].data().data(), y41.bytes()) == 0);
  fj::HostTensor x0(fj::DType::F32, {0, 1}), y0(fj::DType::F32, {0, 1});
  add.launch({view(x0, 0, {0, 1}, {-2, -1}), b11}, {view(y0, 0, {0, 1}, {-1, 1})});
  // In place where the plan reads the input again after writing the output (unfused: y's kernel
  // runs before z's, which reads x).
  const fj::Program two = fj::Program::compile(
      fj::Graph::parse("graph later\ninput x : f32[8]\ninput w : f32[4, 8]\ny = x + 1\nz = w * x\noutput y, z\n"),
      cpu_options());
  fj::HostTensor x = random_tensor(fj::DType::F32, {8}, 1), w = random_tensor(fj::DType::F32, {4, 8}, 2);
  fj::HostTensor z(fj::DType::F32, {4, 8});
  e = error_of([&] { two.launch({x, w}, {x, z}, {}, nullptr, fj::PlanKind::Unfused); });
  CHECK(contains(e, "output 'y' is the buffer of input 'x', but the plan reads 'x' in kernel 2"));
  // Another dtype over the same bytes.
  const fj::Program cast = fj::Program::compile(
      fj::Graph::parse("graph cast\ninput x : i32[8]\ny = cast(x, f32)\noutput y\n"), cpu_options());
  fj::HostTensor xi(fj::DType::I32, {8});
  e = error_of([&] { cast.launch({xi}, {fj::TensorRef(xi.data().data(), fj::DType::F32, xi.shape())}); });
  CHECK(contains(e, "same tensor"));
}

TEST_CASE("views_share_bytes: the exact answer, against every byte of random small views") {
  std::mt19937_64 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto bytes_of = [](const jit::ByteView& v) {
    std::set<uint64_t> out;
    int64_t count = 1;
    for (int64_t n : v.shape) count *= n;
    for (int64_t flat = 0; flat < count; ++flat) {
      int64_t rem = flat, off = 0;
      for (size_t d = v.shape.size(); d-- > 0;) {
        off += (rem % v.shape[d]) * v.strides[d];
        rem /= v.shape[d];
      }
      for (int64_t e = 0; e < v.elem_size; ++e) out.insert(v.addr + static_cast<uint64_t>(off * v.elem_size + e));
    }
    return out;
  };
  int shared = 0, disjoint = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<int64_t> shape[2], strides[2];
    jit::ByteView v[2];
    for (int k = 0; k < 2; ++k) {
      const int64_t rank = pick(0, 3);
      for (int64_t d = 0; d < rank; ++d) {
        shape[k].push_back(pick(0, 9) == 0 ? 0 : pick(1, 4));
        strides[k].push_back(pick(0, 7));
      }
      v[k] = {static_cast<uint64_t>(1000 + pick(0, 40)), shape[k], strides[k], int64_t{1} << pick(0, 3)};
    }
    const std::set<uint64_t> a = bytes_of(v[0]), b = bytes_of(v[1]);
    const bool any = std::any_of(a.begin(), a.end(), [&](uint64_t x) { return b.count(x) > 0; });
    CAPTURE(iter);
    REQUIRE(jit::views_share_bytes(v[0], v[1]) == (any ? jit::Sharing::Some : jit::Sharing::None));
    REQUIRE(jit::views_share_bytes(v[1], v[0]) == (any ? jit::Sharing::Some : jit::Sharing::None));
    (any ? shared : disjoint) += 1;
  }
  CHECK(shared > 500);  // both answers are exercised
  CHECK(disjoint > 500);
  // Layouts of real size are decided in a few steps: the two halves of each row of a [4096, 2 * 8192]
  // bf16 buffer, and a KV cache [32, 4096, 128] whose position 100 is written while 0..99 are read.
  const std::vector<int64_t> rows = {4096, 8192}, wide = {2 * 8192, 1};
  CHECK(jit::views_share_bytes({0, rows, wide, 2}, {2 * 8192, rows, wide, 2}, 100) == jit::Sharing::None);
  CHECK(jit::views_share_bytes({0, rows, wide, 2}, {2 * 8190, rows, wide, 2}, 100) == jit::Sharing::Some);
  const std::vector<int64_t> past = {32, 100, 128}, one = {32, 1, 128}, cache = {4096 * 128, 128, 1};
  CHECK(jit::views_share_bytes({0, past, cache, 4}, {100 * 128 * 4, one, cache, 4}, 100) == jit::Sharing::None);
  CHECK(jit::views_share_bytes({0, past, cache, 4}, {99 * 128 * 4, one, cache, 4}, 100) == jit::Sharing::Some);
  // Odd floats read through strides that are not nested (26 and 34 elements), even floats
  // written: the element bytes' bounds settle it at once (it took 65,536 steps per pair before).
  const std::vector<int64_t> odd_shape = {200, 200}, odd_strides = {26, 34}, even_shape = {4000}, even_stride = {2};
  CHECK(jit::views_share_bytes({4, odd_shape, odd_strides, 4}, {0, even_shape, even_stride, 4}, 10) == jit::Sharing::None);
  CHECK(jit::views_share_bytes({8, odd_shape, odd_strides, 4}, {0, even_shape, even_stride, 4}, 100) == jit::Sharing::Some);
  // Even elements against odd ones: no candidate has the right parity, decided at once.
  const std::vector<int64_t> big = {1000001}, s2 = {2}, s4 = {4};
  CHECK(jit::views_share_bytes({0, big, s2, 1}, {1, big, s4, 1}, 10) == jit::Sharing::None);
  // Two slicings of one C-contiguous f32 buffer [165, 400, 9] with other steps (a hostile tester's:
  // H[2::2, 5::2, 3::2][:82, :198, :2] beside H[7:89, 3:201, 7:9]): strides 2s beside s merge, so it
  // is decided at once (it ran past 4,096 steps and was refused as "may overlap").
  const std::vector<int64_t> hs = {82, 198, 2}, step2 = {7200, 18, 2}, step1 = {3600, 9, 1};
  const uint64_t x_at = (2 * 3600 + 5 * 9 + 3) * 4, y_at = (7 * 3600 + 3 * 9 + 7) * 4;
  CHECK(jit::views_share_bytes({x_at, hs, step2, 4}, {y_at, hs, step1, 4}, 10) == jit::Sharing::None);
  CHECK(jit::views_share_bytes({x_at, hs, step2, 4}, {y_at - 2 * 4, hs, step1, 4}, 10) == jit::Sharing::Some);  // [.., 5:7]
  // Coprime strides a and b whose byte sets miss each other only because the equation's right side
  // is the largest sum a*x + b*y cannot make (a*b - a - b): a million candidates, none a solution,
  // undecided within the bound, which callers take as sharing.
  const int64_t a = 1000003, b = 999983;
  const std::vector<int64_t> sa = {a}, sb = {b};
  CHECK(jit::views_share_bytes({0, big, sa, 1}, {static_cast<uint64_t>(b * 3 - a - b), big, sb, 1}, 10) ==
        jit::Sharing::Unknown);
}

TEST_CASE("views_share_bytes: slicings of one buffer with other steps, decided in few steps and exactly") {
  // Random 3-d slicings (start, step 1..4, count) of a C-contiguous [12, 14, 10] buffer of 1-, 2- or
  // 4-byte elements, against every byte: decided exactly (never Unknown at the default bound).
  std::mt19937_64 rng(29);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int64_t dims[3] = {12, 14, 10};
  int shared = 0, disjoint = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const int64_t elem = int64_t{1} << pick(0, 2);
    std::vector<int64_t> shape[2], strides[2];
    uint64_t addr[2] = {0, 0};
    std::set<uint64_t> bytes[2];
    for (int k = 0; k < 2; ++k) {
      int64_t start[3], step[3];
      for (int d = 0; d < 3; ++d) {
        step[d] = pick(1, 4);
        start[d] = pick(0, dims[d] - 1);
        shape[k].push_back(pick(1, (dims[d] - 1 - start[d]) / step[d] + 1));
      }
      strides[k] = {step[0] * dims[1] * dims[2], step[1] * dims[2], step[2]};
      addr[k] = static_cast<uint64_t>((start[0] * dims[1] * dims[2] + start[1] * dims[2] + start[2]) * elem);
      for (int64_t i = 0; i < shape[k][0]; ++i)
        for (int64_t j = 0; j < shape[k][1]; ++j)
          for (int64_t l = 0; l < shape[k][2]; ++l)
            for (int64_t e = 0; e < elem; ++e)
              bytes[k].insert(addr[k] + static_cast<uint64_t>((i * strides[k][0] + j * strides[k][1] + l * strides[k][2]) * elem + e));
    }
    const bool any = std::any_of(bytes[0].begin(), bytes[0].end(), [&](uint64_t b) { return bytes[1].count(b) > 0; });
    CAPTURE(iter);
    const jit::Sharing want = any ? jit::Sharing::Some : jit::Sharing::None;
    REQUIRE(jit::views_share_bytes({addr[0], shape[0], strides[0], elem}, {addr[1], shape[1], strides[1], elem}) == want);
    (any ? shared : disjoint) += 1;
  }
  CHECK(shared > 100);  // both answers are exercised
  CHECK(disjoint > 1000);
}

TEST_CASE("view_overlaps_itself: the exact answer, against every element of random small views") {
  std::mt19937_64 rng(12);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int overlapping = 0, distinct = 0, interleaved = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<int64_t> shape, strides;
    const int64_t rank = pick(0, 4);
    for (int64_t d = 0; d < rank; ++d) {
      shape.push_back(pick(0, 12) == 0 ? 0 : pick(1, 5));
      strides.push_back(pick(0, 9));
    }
    std::set<int64_t> offsets;
    int64_t count = 1;
    for (int64_t n : shape) count *= n;
    for (int64_t flat = 0; flat < count; ++flat) {
      int64_t rem = flat, off = 0;
      for (size_t d = shape.size(); d-- > 0;) {
        off += (rem % shape[d]) * strides[d];
        rem /= shape[d];
      }
      offsets.insert(off);
    }
    const bool any = static_cast<int64_t>(offsets.size()) < count;
    CAPTURE(iter);
    REQUIRE(jit::view_overlaps_itself({0, shape, strides, 4}) == (any ? jit::Sharing::Some : jit::Sharing::None));
    (any ? overlapping : distinct) += 1;
    std::vector<int64_t> sorted = strides;
    std::sort(sorted.begin(), sorted.end());
    interleaved += !any && count > 1 && std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end() &&
                   sorted.size() > 1 && sorted[1] < sorted[0] * 2;
  }
  CHECK(overlapping > 500);  // both answers are exercised
  CHECK(distinct > 500);
  CHECK(interleaved > 20);  // and distinct views whose strides are not nested
  // Contiguous (empty strides) and a real interleaved layout: [3, 2] with strides [2, 3] reaches
  // offsets 0 3 2 5 4 7. A stride 0 on a dim of size > 1 overlaps at once.
  const std::vector<int64_t> s32 = {3, 2}, st23 = {2, 3}, st22 = {2, 2}, big = {4096, 4096}, no_strides = {};
  CHECK(jit::view_overlaps_itself({0, big, no_strides, 4}) == jit::Sharing::None);
  CHECK(jit::view_overlaps_itself({0, s32, st23, 4}) == jit::Sharing::None);
  CHECK(jit::view_overlaps_itself({0, s32, st22, 4}) == jit::Sharing::Some);
  const std::vector<int64_t> one_dim = {1000000}, zero = {0};
  CHECK(jit::view_overlaps_itself({0, one_dim, zero, 2}, 1) == jit::Sharing::Some);
  // Coprime strides in the millions whose sums never meet inside the shape: undecided.
  const std::vector<int64_t> wide = {1000, 1000}, coprime = {1000003, 999983};
  CHECK(jit::view_overlaps_itself({0, wide, coprime, 4}, 10) == jit::Sharing::Unknown);
}

TEST_CASE("an output whose strides interleave without meeting runs; an undecided overlap says so") {
  const fj::Program p = fj::Program::compile(
      fj::Graph::parse("graph t\ninput x : f32[3, 2]\ny = x * 2\noutput y\n"), cpu_options());
  const fj::HostTensor x = random_tensor(fj::DType::F32, {3, 2}, 3);
  for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
    fj::HostTensor buf(fj::DType::F32, {8});
    const std::vector<int64_t> shape = {3, 2}, strides = {2, 3};
    p.launch({x}, {view(buf, 0, shape, strides)}, {}, nullptr, kind);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 2; ++j)
        REQUIRE(buf.values<float>()[static_cast<size_t>(2 * i + 3 * j)] ==
                x.values<float>()[static_cast<size_t>(2 * i + j)] * 2);
    // Strides [2, 2] put y[1, 0] and y[0, 1] at one address.
    const std::vector<int64_t> meeting = {2, 2};
    CHECK(contains(error_of([&] { p.launch({x}, {view(buf, 0, shape, meeting)}, {}, nullptr, kind); }),
                   "output 'y' is a view whose elements overlap each other"));
  }
  // Strides 5001 and 5000 over [4999, 4999]: distinct addresses (two elements meet only when the
  // first index moves by 5000), but proving it takes ~5,000 candidates, past the bound: refused as
  // "may overlap", with the reason. The input is one byte, broadcast.
  const fj::Program q = fj::Program::compile(
      fj::Graph::parse("graph t\ninput x : u8[4999, 4999]\ny = x + 1\noutput y\n"), cpu_options());
  const std::vector<int64_t> shape = {4999, 4999}, strides = {5001, 5000}, bcast = {0, 0};
  CHECK(jit::view_overlaps_itself({0, shape, strides, 1}) == jit::Sharing::Unknown);
  CHECK(jit::view_overlaps_itself({0, shape, strides, 1}, 1 << 14) == jit::Sharing::None);
  std::vector<uint8_t> mem(static_cast<size_t>(5001 * 4998 + 5000 * 4998 + 1));
  const uint8_t one = 1;
  const std::string e = error_of([&] {
    q.launch({fj::TensorRef(&one, fj::DType::U8, shape, bcast)}, {fj::TensorRef(mem.data(), fj::DType::U8, shape, strides)},
             {}, nullptr, fj::PlanKind::Fused);
  });
  CHECK(contains(e, "output 'y' is a view whose elements may overlap each other"));
  CHECK(contains(e, "could not decide within 4096 steps"));
  CHECK(contains(e, "pass a contiguous array"));
}

TEST_CASE("outputs that interleave with an input without sharing a byte run (the halves of each row)") {
  const fj::Program p = fj::Program::compile(
      fj::Graph::parse("graph swiglu\ndim T = 5\ninput gate : f32[T, 8]\ninput up : f32[T, 8]\n"
                       "y = silu(gate) * up\noutput y\n"),
      cpu_options());
  const std::vector<int64_t> shape = {5, 8}, strides = {16, 1};
  for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
    fj::HostTensor h = random_tensor(fj::DType::F32, {5, 16}, 9);
    fj::HostTensor gate(fj::DType::F32, {5, 8}), up(fj::DType::F32, {5, 8});
    for (int64_t i = 0; i < 40; ++i) {
      gate.values<float>()[static_cast<size_t>(i)] = h.values<float>()[static_cast<size_t>(i / 8 * 16 + i % 8)];
      up.values<float>()[static_cast<size_t>(i)] = h.values<float>()[static_cast<size_t>(i / 8 * 16 + 8 + i % 8)];
    }
    const fj::HostTensor want = p.run({gate, up}, {}, kind)[0];
    // y over up (the same view: in place) while gate, the other half of each row, is read.
    p.launch({view(h, 0, shape, strides), view(h, 8, shape, strides)}, {view(h, 8, shape, strides)}, {}, nullptr, kind);
    for (int64_t i = 0; i < 40; ++i)
      REQUIRE(h.values<float>()[static_cast<size_t>(i / 8 * 16 + 8 + i % 8)] == want.values<float>()[static_cast<size_t>(i)]);
    // One element further, y's first element of each row is gate's last: refused.
    fj::HostTensor h2 = random_tensor(fj::DType::F32, {5, 17}, 9);
    const std::vector<int64_t> strides2 = {17, 1};
    const std::string e = error_of([&] {
      p.launch({view(h2, 0, shape, strides2), view(h2, 9, shape, strides2)}, {view(h2, 7, shape, strides2)}, {}, nullptr, kind);
    });
    CHECK(contains(e, "output 'y'"));
    CHECK(contains(e, "overlaps input 'gate'"));
  }
}

TEST_CASE("strided inputs: transposed, sliced and expanded views give the bits of their contiguous copies (CPU)") {
  const int64_t M = 37, N = 24;
  const fj::Program p = fj::Program::compile(
      fj::Graph::parse("graph strided\ndim M = 37\ninput x : f32[M, 24]\ninput b : f32[24]\n"
                       "y = gelu(x) * b + x\noutput y\n"),
      cpu_options());
  const fj::HostTensor buf = random_tensor(fj::DType::F32, {N, M}, 5);        // x^T in memory
  const fj::HostTensor wide = random_tensor(fj::DType::F32, {M, 2 * N}, 6);   // x inside a wider row
  const fj::HostTensor b = random_tensor(fj::DType::F32, {N}, 7);
  fj::HostTensor xt(fj::DType::F32, {M, N}), xs(fj::DType::F32, {M, N});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      xt.values<float>()[static_cast<size_t>(i * N + j)] = buf.values<float>()[static_cast<size_t>(j * M + i)];
      xs.values<float>()[static_cast<size_t>(i * N + j)] = wide.values<float>()[static_cast<size_t>(i * 2 * N + 5 + j)];
    }
  const std::vector<int64_t> shape = {M, N}, t_strides = {1, M}, s_strides = {2 * N, 1};
  const fj::TensorView transposed(fj::DType::F32, shape, buf.data(), t_strides);
  const fj::TensorView sliced(fj::DType::F32, shape, wide.data().subspan(5 * 4), s_strides);
  for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
    CHECK(p.run({transposed, b}, {}, kind)[0] == p.run({xt, b}, {}, kind)[0]);
    CHECK(p.run({sliced, b}, {}, kind)[0] == p.run({xs, b}, {}, kind)[0]);
  }
  // An expanded bias (stride 0: one value for every column) equals its materialised copy.
  const std::vector<int64_t> b_shape = {N}, b_zero = {0};
  const fj::TensorView expanded(fj::DType::F32, b_shape, b.data().subspan(0, 4), b_zero);
  fj::HostTensor bx(fj::DType::F32, {N});
  for (float& v : bx.values<float>()) v = b.values<float>()[0];
  CHECK(p.run({xt, expanded})[0] == p.run({xt, bx})[0]);
  // A strided output: y written transposed into a [N, M] buffer.
  fj::HostTensor yt(fj::DType::F32, {N, M});
  fj::HostTensor x = xt;
  fj::HostTensor bb = b;
  p.launch({x, bb}, {view(yt, 0, shape, t_strides)});
  const fj::HostTensor y = p.run({xt, b})[0];
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      REQUIRE(yt.values<float>()[static_cast<size_t>(j * M + i)] == y.values<float>()[static_cast<size_t>(i * N + j)]);
  // A view whose data is too short for its strides is refused.
  const std::string e = error_of([&] { p.run({fj::TensorView(fj::DType::F32, shape, buf.data().subspan(4), t_strides), b}); });
  CHECK(contains(e, "input 'x': f32[37, 24] with strides [1, 37] needs at least 3552 bytes"));
}

TEST_CASE("zero-size tensors launch nothing and succeed") {
  const fj::Program p = fj::Program::compile(
      fj::Graph::parse("graph empty\ndim M = 4\ninput x : f32[M, 8]\ny = x * 2\noutput y\n"), cpu_options());
  const fj::HostTensor x(fj::DType::F32, {0, 8});
  const std::vector<fj::HostTensor> out = p.run({x});
  CHECK(out[0].shape() == std::vector<int64_t>{0, 8});
  fj::HostTensor y(fj::DType::F32, {0, 8});
  p.launch({fj::TensorRef(static_cast<const void*>(nullptr), fj::DType::F32, x.shape())}, {fj::TensorRef(nullptr, fj::DType::F32, y.shape())});

  FakeGpu gpu;
  const fj::Program g = fj::Program::compile(p.graph(), gpu_options());
  const size_t before = fake_cuda::st().launches.size();
  const std::vector<int64_t> shape = {0, 8};
  g.launch({fj::TensorRef(static_cast<const void*>(nullptr), fj::DType::F32, shape)},
           {fj::TensorRef(nullptr, fj::DType::F32, shape)});
  CHECK(fake_cuda::st().launches.size() == before);
  CHECK(g.run({x})[0].shape() == std::vector<int64_t>{0, 8});
}

TEST_CASE("zero-size tensors with a dim of 2^31 or more run in the 32-bit kernels (no division by that dim)") {
  const int64_t big = int64_t{3} << 30;  // 3 * 2^30: over 2^31, and not a power of two
  struct Case {
    const char* text;
    std::vector<int64_t> in, out;
    std::vector<float> want;
  };
  const Case cases[] = {
      {"input x : f32[N, C]\ny = x * 2 + 1\noutput y\n", {0, big}, {0, big}, {}},
      {"input x : f32[N, C]\ny = softmax(x, -1)\noutput y\n", {0, big}, {0, big}, {}},
      {"input x : f32[N, C]\ny = softmax(x, -1)\noutput y\n", {big, 0}, {big, 0}, {}},
      // Rows of nothing: the reduced dims are 0 and 3 * 2^30 long; 4 sums of 0.
      {"input x : f32[N, Z, C]\ny = sum(x, [1, 2])\noutput y\n", {4, 0, big}, {4}, {0, 0, 0, 0}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    const fj::Graph g = fj::Graph::parse(std::string("dim N = 8\ndim Z = 2\ndim C = 16\n") + c.text);
    const fj::Program p = fj::Program::compile(g, cpu_options());
    const std::vector<fj::HostTensor> out = p.run({fj::HostTensor(fj::DType::F32, c.in)});
    CHECK(out[0].shape() == c.out);
    std::vector<float> got(c.want.size());
    std::memcpy(got.data(), out[0].data().data(), got.size() * sizeof(float));
    CHECK(got == c.want);
  }
}

TEST_CASE("fake GPU: strided views, in place and other dims through NVRTC-compiled kernels") {
  FakeGpu gpu;
  const fj::Program prog = fj::Program::compile(fj::Graph::parse(kAdamW), gpu_options());
  auto keep = emulate(prog);
  const fj::Program cpu = fj::Program::compile(fj::Graph::parse(kAdamW), cpu_options());
  for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
    // Other dims, with no new kernel.
    AdamInputs a = adam_inputs(517);
    const std::vector<fj::HostTensor> want = cpu.run({a.p, a.grad, a.m, a.v}, {}, kind);
    const std::vector<fj::HostTensor> got = prog.run({a.p, a.grad, a.m, a.v}, {}, kind);
    for (size_t k = 0; k < 3; ++k) CHECK(got[k] == want[k]);
    // In place through launch ("device" pointers are host memory under the fake driver).
    prog.launch({a.p, a.grad, a.m, a.v}, {a.p, a.m, a.v}, {}, nullptr, kind);
    CHECK(a.p == want[0]);
    CHECK(a.m == want[1]);
    CHECK(a.v == want[2]);
    // The gradient read as every other element of a wider buffer: the strided entry.
    const fj::HostTensor wide = random_tensor(fj::DType::F32, {2 * 517}, 11, -1, 1);
    fj::HostTensor dense(fj::DType::F32, {517});
    for (int64_t i = 0; i < 517; ++i) dense.values<float>()[static_cast<size_t>(i)] = wide.values<float>()[static_cast<size_t>(2 * i)];
    const std::vector<int64_t> shape = {517}, two = {2};
    const fj::TensorView grad(fj::DType::F32, shape, wide.data(), two);
    AdamInputs c = adam_inputs(517);
    const std::vector<fj::HostTensor> strided = prog.run({c.p, grad, c.m, c.v}, {}, kind);
    const std::vector<fj::HostTensor> plain = cpu.run({c.p, dense, c.m, c.v}, {}, kind);
    for (size_t k = 0; k < 3; ++k) CHECK(strided[k] == plain[k]);
  }
  CHECK(prog.specializations().empty());
}

TEST_CASE("fake GPU: transposed and sliced inputs give the bits of their contiguous copies (NVRTC-compiled)") {
  FakeGpu gpu;
  const std::string text = "graph strided_gpu\ndim M = 37\ninput x : f32[M, 24]\ninput b : f32[24]\n"
                           "y = x * b + x\noutput y\n";
  const fj::Program p = fj::Program::compile(fj::Graph::parse(text), gpu_options());
  auto keep = emulate(p);
  const int64_t M = 37, N = 24;
  const fj::HostTensor buf = random_tensor(fj::DType::F32, {N, M}, 5), wide = random_tensor(fj::DType::F32, {M, 2 * N}, 6);
  const fj::HostTensor b = random_tensor(fj::DType::F32, {N}, 7);
  fj::HostTensor xt(fj::DType::F32, {M, N}), xs(fj::DType::F32, {M, N});
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      xt.values<float>()[static_cast<size_t>(i * N + j)] = buf.values<float>()[static_cast<size_t>(j * M + i)];
      xs.values<float>()[static_cast<size_t>(i * N + j)] = wide.values<float>()[static_cast<size_t>(i * 2 * N + 5 + j)];
    }
  const std::vector<int64_t> shape = {M, N}, t_strides = {1, M}, s_strides = {2 * N, 1};
  const fj::TensorView transposed(fj::DType::F32, shape, buf.data(), t_strides);
  const fj::TensorView sliced(fj::DType::F32, shape, wide.data().subspan(5 * 4), s_strides);
  for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
    CHECK(p.run({transposed, b}, {}, kind)[0] == p.run({xt, b}, {}, kind)[0]);
    CHECK(p.run({sliced, b}, {}, kind)[0] == p.run({xs, b}, {}, kind)[0]);
  }
}

TEST_CASE("a warm launch issues only kernel launches and allocates nothing") {
  FakeGpu gpu;
  fake_cuda::st().keep_launches = false;
  const fj::Program p = fj::Program::compile(
      // Names past the small-string buffer: a message built on the way would allocate.
      fj::Graph::parse("graph warm\ndim T = 64\ninput hidden_states_in : f32[T, 32]\ninput bias_of_the_layer : f32[32]\n"
                       "param a : f32 = 2\nnormalized_output = a * hidden_states_in + bias_of_the_layer\n"
                       "output normalized_output\n"),
      gpu_options());
  std::vector<float> x(64 * 32), b(32), y(64 * 32);
  const std::vector<int64_t> s64 = {64, 32}, s3 = {3, 32}, sb = {32}, st = {1, 64}, sy = {64, 32};
  const fj::TensorRef in64[2] = {fj::TensorRef(static_cast<const void*>(x.data()), fj::DType::F32, s64),
                                 fj::TensorRef(static_cast<const void*>(b.data()), fj::DType::F32, sb)};
  const fj::TensorRef in3[2] = {fj::TensorRef(static_cast<const void*>(x.data()), fj::DType::F32, s3),
                                fj::TensorRef(static_cast<const void*>(b.data()), fj::DType::F32, sb)};
  const fj::TensorRef out64[1] = {fj::TensorRef(y.data(), fj::DType::F32, s64)};
  const fj::TensorRef out3[1] = {fj::TensorRef(y.data(), fj::DType::F32, s3)};
  const fj::Params params = {3.0};
  auto& calls = fake_cuda::st().calls;
  calls.reserve(4096);
  auto record = [&](auto&& f) {
    calls.clear();
    fake_cuda::st().record = true;
    const long allocs = alloc_counter::during(f);
    fake_cuda::st().record = false;
    return allocs;
  };
  fake_cuda::ctx_push(fake_cuda::primary());  // as the CUDA runtime leaves it
  record([&] { p.launch(in64, out64, params); });  // the first launch in this context loads the module
  CHECK(std::find_if(calls.begin(), calls.end(), [](const char* c) { return std::strcmp(c, "cuModuleLoadDataEx") == 0; }) !=
        calls.end());
  p.launch(in3, out3, params);  // a second dims set, seen once
  const std::vector<std::string> only_launch = {"cuCtxGetCurrent", "cuCtxGetId", "cuLaunchKernel"};
  for (int round = 0; round < 3; ++round) {
    for (const auto* io : {&in64, &in3}) {
      const long allocs = record([&] { p.launch(*io, io == &in64 ? out64 : out3, params); });
      CHECK(allocs == 0);
      CHECK(std::vector<std::string>(calls.begin(), calls.end()) == only_launch);
    }
  }
  // Tensors that name their device (TensorRef::device, as the Python binding's CUDA tensors do):
  // checked with no allocation and no driver call.
  fj::TensorRef din[2] = {in64[0], in64[1]}, dout[1] = {out64[0]};
  for (fj::TensorRef* r : {&din[0], &din[1], &dout[0]}) r->device = 0;
  p.launch(din, dout, params);
  CHECK(record([&] { p.launch(din, dout, params); }) == 0);
  CHECK(std::vector<std::string>(calls.begin(), calls.end()) == only_launch);
  // Default params and a strided (transposed) input: still only the launch.
  const fj::TensorRef tin[2] = {fj::TensorRef(static_cast<const void*>(x.data()), fj::DType::F32, sy, st), in64[1]};
  p.launch(tin, out64);
  CHECK(record([&] { p.launch(tin, out64); }) == 0);
  CHECK(std::vector<std::string>(calls.begin(), calls.end()) == only_launch);
  // No current context: fusejit pushes its own around the launch.
  fusejit::jit::cu::Context popped = nullptr;
  fake_cuda::ctx_pop(&popped);
  CHECK(record([&] { p.launch(in64, out64, params); }) == 0);
  CHECK(std::vector<std::string>(calls.begin(), calls.end()) ==
        std::vector<std::string>{"cuCtxGetCurrent", "cuCtxPushCurrent", "cuCtxGetId", "cuLaunchKernel", "cuCtxPopCurrent"});
  // The unfused plan's intermediates are allocated and freed stream-ordered (docs/api.md).
  p.launch(in64, out64, params, nullptr, fj::PlanKind::Unfused);
  record([&] { p.launch(in64, out64, params, nullptr, fj::PlanKind::Unfused); });
  for (const char* c : calls) {
    CAPTURE(c);
    CHECK((std::string(c) == "cuCtxGetCurrent" || std::string(c) == "cuCtxGetId" || std::string(c) == "cuCtxPushCurrent" ||
           std::string(c) == "cuCtxPopCurrent" || std::string(c) == "cuLaunchKernel" ||
           std::string(c) == "cuMemAllocAsync" || std::string(c) == "cuMemAlloc" || std::string(c) == "cuMemFreeAsync" ||
           std::string(c) == "cuMemFree"));
  }
}

TEST_CASE("one Program on two contexts loads its modules once per context") {
  FakeGpu gpu;
  const fj::Program p = fj::Program::compile(
      fj::Graph::parse("graph two_ctx\ninput x : f32[16]\ny = x + 1\noutput y\n"), gpu_options());
  auto keep = emulate(p);
  std::vector<float> x(16, 1.0f), y(16, 0.0f);
  const std::vector<int64_t> shape = {16};
  const fj::TensorRef in[1] = {fj::TensorRef(static_cast<const void*>(x.data()), fj::DType::F32, shape)};
  const fj::TensorRef out[1] = {fj::TensorRef(y.data(), fj::DType::F32, shape)};
  const auto a = fake_cuda::primary(), b = reinterpret_cast<fusejit::jit::cu::Context>(0x2000);
  // Launches in `ctx` (none current: nullptr) and checks the result.
  auto launch_in = [&](fusejit::jit::cu::Context ctx) {
    fusejit::jit::cu::Context popped = nullptr;
    if (ctx) fake_cuda::ctx_push(ctx);
    p.launch(in, out);
    if (ctx) fake_cuda::ctx_pop(&popped);
    CHECK(y[3] == 2.0f);
    y[3] = 0;
  };
  for (int round = 0; round < 3; ++round)
    for (auto ctx : {a, b}) launch_in(ctx);
  CHECK(fake_cuda::st().modules_per_context[a] == 1);
  CHECK(fake_cuda::st().modules_per_context[b] == 1);
  // A context destroyed and another made at its address (a handle the driver reused): its modules
  // went with it, so the new one loads its own (found by the old handle, a launch would fail on a
  // dead module, or run whatever a reused function handle names).
  fake_cuda::recreate_context(b);
  for (int round = 0; round < 2; ++round) launch_in(b);
  CHECK(fake_cuda::st().modules_per_context[b] == 2);
  CHECK(fake_cuda::st().modules_per_context[a] == 1);
  // No context current: fusejit pushes the program's own, and asks its id too (a context it
  // borrowed may be gone, a primary context reset).
  launch_in(nullptr);
  CHECK(fake_cuda::st().modules_per_context[a] == 1);
  fake_cuda::recreate_context(a);
  for (int round = 0; round < 2; ++round) launch_in(nullptr);
  CHECK(fake_cuda::st().modules_per_context[a] == 2);
  CHECK(fake_cuda::st().current == nullptr);
}

TEST_CASE("a launch that must allocate on a device without memory pools refuses a stream being captured") {
  FakeGpu gpu;
  fake_cuda::st().memory_pools = 0;
  const fj::Program p = fj::Program::compile(
      fj::Graph::parse("graph capture\ninput x : f32[16]\ny = exp(x) + 1\nz = y * 2\noutput z\n"), gpu_options());
  auto keep = emulate(p);
  std::vector<float> x(16, 0.0f), z(16, 0.0f);
  const std::vector<int64_t> shape = {16};
  const fj::TensorRef in[1] = {fj::TensorRef(static_cast<const void*>(x.data()), fj::DType::F32, shape)};
  const fj::TensorRef out[1] = {fj::TensorRef(z.data(), fj::DType::F32, shape)};
  p.launch(in, out, {}, nullptr, fj::PlanKind::Unfused);  // an intermediate: cuMemAlloc, synchronised cuMemFree
  CHECK(z[3] == 4.0f);
  CHECK(fake_cuda::st().live.empty());
  fake_cuda::st().capturing = 1;
  CHECK_THROWS_WITH_AS(p.launch(in, out, {}, nullptr, fj::PlanKind::Unfused),
                       doctest::Contains("has no memory pools (MEMORY_POOLS_SUPPORTED is 0): cuMemAlloc and the "
                                         "synchronisation before cuMemFree cannot be captured in a CUDA graph"),
                       fj::Error);
  CHECK(fake_cuda::st().live.empty());
  p.launch(in, out);  // the fused plan allocates nothing: it may be captured
  fake_cuda::st().capturing = 0;
}

namespace {

fs::path scratch_dir(const std::string& name) {
  fs::path d = fs::path(FUSEJIT_BINARY_DIR) / "test-launch" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST_CASE("ahead of time: index.json names a written value by its graph outputs, a copy of an input too") {
  const fs::path dir = scratch_dir("aot-outputs");
  const fj::Graph g = fj::Graph::parse("dim N = 8\ninput x : f32[N]\ny = x * 2\nz = y\nw = neg(neg(x))\noutput y, z, w\n");
  fj::compile_to_dir(g, "sm_90", dir.string());
  const nlohmann::json index = nlohmann::json::parse(std::ifstream(dir / "index.json"));
  std::vector<std::string> written;  // fused kernels' outputs: tensor, then its graph outputs
  for (const auto& k : index["kernels"]) {
    if (k["plan"] != "fused") continue;
    for (const auto& a : k["entries"][0]["args"]) {
      if (a["kind"] == "input") CHECK(a["tensor"] == "x");
      if (a["kind"] != "output") continue;
      written.push_back(a["tensor"].get<std::string>() + ":");
      for (const auto& n : a["graph_outputs"]) written.back() += n.get<std::string>() + ",";
    }
  }
  CHECK(written == std::vector<std::string>{"y:y,z,", "w:w,"});  // the copy of x writes w, not "x"
}

TEST_CASE("ahead of time: a compiled folder loads and runs with NVRTC hidden; index.json lists every argument") {
  const fs::path dir = scratch_dir("aot");
  const fj::Graph g = fj::Graph::parse(kAdamW, "adamw.txt");
  fj::compile_to_dir(g, "sm_90", dir.string());
  const nlohmann::json index = nlohmann::json::parse(std::ifstream(dir / "index.json"));
  CHECK(index["format"] == "fusejit-aot");
  CHECK(index["format_version"] == 1);
  CHECK(index["target"] == "sm_90");
  CHECK(fs::exists(dir / "graph.txt"));
  const nlohmann::json& k0 = index["kernels"][0];
  REQUIRE(k0["entries"].size() == 2);
  CHECK(k0["entries"][1]["name"] == k0["kernel"].get<std::string>() + "_s");
  const nlohmann::json& args = k0["entries"][0]["args"];
  CHECK(args[0]["kind"] == "input");
  CHECK(args[0]["tensor"] == "p");
  CHECK(args[0]["ctype"] == "const float*");
  bool has_param = false;
  for (const auto& a : args) has_param = has_param || (a["kind"] == "param" && a["param"] == "lr");
  CHECK(has_param);
  // The unfused kernels are one NVRTC program: one file holds its image, named by every entry.
  std::set<std::string> unfused_files;
  size_t unfused = 0, cubins = 0;
  for (const auto& k : index["kernels"])
    if (k["plan"] == "unfused") ++unfused, unfused_files.insert(k["cubin"].get<std::string>());
  for (const auto& f : fs::directory_iterator(dir)) cubins += f.path().extension() == ".cubin";
  CHECK(unfused > 1);
  CHECK(unfused_files.size() == 1);
  CHECK(cubins == index["kernels"].size() - unfused + 1);

  FakeGpu gpu;
  fusejit::jit::reload_nvrtc_for_testing("/nonexistent/libnvrtc.so.99");
  REQUIRE_FALSE(fusejit::jit::nvrtc_available());
  try {
    const fj::Program p = fj::Program::load(dir.string());
    CHECK(p.kernels(fj::PlanKind::Fused)[0].cache == fj::CacheOutcome::Loaded);
    // The kernel part of the source, as for a kernel compiled in process (the .cu includes the preludes).
    const std::string src = p.kernels(fj::PlanKind::Fused)[0].source;
    CHECK((contains(src, "extern \"C\" __global__") && !contains(src, "#include") && !contains(src, "fj_scalar.h:")));
    CHECK(p.target() == "sm_90 (CUBIN)");
    auto keep = emulate(p);
    const fj::Program cpu = fj::Program::compile(g, cpu_options());
    AdamInputs a = adam_inputs(1003);
    for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
      const std::vector<fj::HostTensor> got = p.run({a.p, a.grad, a.m, a.v}, {}, kind);
      const std::vector<fj::HostTensor> want = cpu.run({a.p, a.grad, a.m, a.v}, {}, kind);
      for (size_t k = 0; k < 3; ++k) CHECK(got[k] == want[k]);
    }
    CHECK(p.kernels(fj::PlanKind::Unfused)[0].cache == fj::CacheOutcome::Loaded);
    // 2^31 elements need the 64-bit-index kernels, which the folder lacks: a clear error.
    const std::vector<int64_t> huge = {int64_t{1} << 31};
    const fj::TensorRef t(reinterpret_cast<void*>(0x1000), fj::DType::F32, huge);
    const std::string e = error_of([&] { p.launch({t, t, t, t}, {t, t, t}); });
    CAPTURE(e);
    CHECK(contains(e, "64-bit-index variant of the fused kernels are not in the folder"));
    CHECK(contains(e, "NVRTC"));
  } catch (...) {
    fusejit::jit::reload_nvrtc_for_testing(std::nullopt);
    throw;
  }
  fusejit::jit::reload_nvrtc_for_testing(std::nullopt);
  CHECK(fusejit::jit::nvrtc_available());
}

namespace {

// Loads `dir` on the fake GPU; "" when it loads, else the error.
std::string load_error(const fs::path& dir) {
  FakeGpu gpu;
  try {
    const fj::Program p = fj::Program::load(dir.string());
    return "";
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    return e.what();
  }
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(std::ifstream(p)); }

void write_file(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

}  // namespace

TEST_CASE("ahead of time: a folder whose graph.txt or index.json was changed is refused, never run") {
  // A reduction kernel's source names the graph file in its comments ([g.txt:4]), which a loaded
  // folder calls graph.txt: kernel names are hashed without them, or no such folder would load.
  const char* exp_graph = "graph g\ninput x : f32[8]\ny = exp(x)\ns = sum(y)\noutput y, s\n";
  const fs::path dir = scratch_dir("aot-tamper");
  fj::compile_to_dir(fj::Graph::parse(exp_graph, "g.txt"), "sm_90", (dir / "ok").string());
  CHECK(load_error(dir / "ok") == "");
  // A row kernel with a long-row entry (softmax: a row cache and element outputs) lists three
  // entries and loads; without its third it is refused.
  const char* softmax_graph = "graph g\ninput x : f32[4, 20000]\ny = softmax(x, -1)\noutput y\n";
  fj::compile_to_dir(fj::Graph::parse(softmax_graph, "g.txt"), "sm_90", (dir / "long").string());
  CHECK(load_error(dir / "long") == "");
  {  // A size graph.txt's shapes cannot take: the index's error (it was reported at a line of graph.txt).
    fj::compile_to_dir(fj::Graph::parse("dim N = 4\ninput x : f32[N, 8]\ny = x * 2\noutput y\n", "g.txt"), "sm_90",
                       (dir / "dims").string());
    nlohmann::json x = read_json(dir / "dims" / "index.json");
    x["dims"]["N"] = int64_t{1} << 62;
    write_file(dir / "dims" / "index.json", x.dump());
    CHECK(contains(load_error(dir / "dims"), "index.json': its \"dims\" do not fit '"));
    x["dims"].erase("N");  // a dim graph.txt declares: the binaries were planned at another value
    write_file(dir / "dims" / "index.json", x.dump());
    CHECK(contains(load_error(dir / "dims"), "index.json': \"dims\" lacks dim 'N', which '"));
  }
  {
    nlohmann::json x = read_json(dir / "long" / "index.json");
    REQUIRE(x["kernels"][0]["entries"].size() == 3);
    CHECK(x["kernels"][0]["entries"][2]["use"] == "long_rows");
    CHECK(x["kernels"][0]["lane_groups"] == 4);
    x["kernels"][0]["entries"].erase(2);
    fs::copy(dir / "long", dir / "long-two");
    write_file(dir / "long-two" / "index.json", x.dump());
    CHECK(contains(load_error(dir / "long-two"), "with other parameters than the"));
  }
  auto variant = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    fs::copy(dir / "ok", dir / name);
    nlohmann::json x = read_json(dir / name / "index.json");
    edit(x);
    write_file(dir / name / "index.json", x.dump());
    return load_error(dir / name);
  };
  {  // The params and graph outputs an argument carries, by name (a hostile tester's finds: two
     // params' names swapped in the index, and graph.txt's outputs reordered, loaded)
    const char* two = "graph g\nparam s : f32 = 2.0\nparam b : f32 = 1.0\ninput x : f32[8]\ny = x * s + b\n"
                      "z = y\noutput y, z\n";
    fj::compile_to_dir(fj::Graph::parse(two, "g.txt"), "sm_90", (dir / "names").string());
    CHECK(load_error(dir / "names") == "");
    fs::copy(dir / "names", dir / "names-params");
    nlohmann::json x = read_json(dir / "names-params" / "index.json");
    int swapped = 0;
    for (nlohmann::json& e : x["kernels"][0]["entries"])
      for (nlohmann::json& a : e["args"])
        if (a.contains("param")) {
          a["param"] = a["param"] == "s" ? "b" : "s";
          ++swapped;
        }
    REQUIRE(swapped > 0);
    write_file(dir / "names-params" / "index.json", x.dump());
    CHECK(contains(load_error(dir / "names-params"), "with other parameters than the"));
    fs::copy(dir / "names", dir / "names-outputs");
    write_file(dir / "names-outputs" / "graph.txt", std::string(two).replace(std::string(two).find("output y, z"), 11,
                                                                             "output z, y"));
    CHECK(contains(load_error(dir / "names-outputs"), "with other parameters than the"));
  }
  {  // Bytes after a NUL (nlohmann's parser stops at it; a hostile tester's find: taken)
    fs::copy(dir / "ok", dir / "nul");
    std::ofstream(dir / "nul" / "index.json", std::ios::app) << std::string("\0garbage{", 9);
    CHECK(contains(load_error(dir / "nul"), "index.json' is not valid JSON: a NUL byte at byte "));
  }
  // Another graph with the same arguments over the binaries: the kernel names differ.
  fs::copy(dir / "ok", dir / "swapped");
  write_file(dir / "swapped" / "graph.txt", "graph g\ninput x : f32[8]\ny = log(x)\ns = sum(y)\noutput y, s\n");
  std::string e = load_error(dir / "swapped");
  CHECK(contains(e, "kernel 0 of the fused plan is fj_g_"));
  CHECK(contains(e, "compiled from another graph"));
  // The index itself given for the folder (a hostile tester's find: "index.json/index.json: Not a directory").
  CHECK(contains(error_of([&] { (void)fj::Program::load((dir / "ok" / "index.json").string()); }),
                 "index.json' is a file: Program::load takes the folder `fusejit compile -o` wrote (this file's folder)"));
  {  // Without a GPU too (a missing driver, also on a GPU machine): graph.txt is checked before a GPU
     // is looked for (a build machine can check a folder).
    fusejit::jit::set_driver_for_testing(fusejit::jit::Driver::load("libcuda-that-does-not-exist.so"));
    const std::string no_gpu = error_of([&] { (void)fj::Program::load((dir / "swapped").string()); });
    CHECK(contains(no_gpu, "compiled from another graph"));
    fj::Options cpu;
    cpu.backend = fj::Backend::Cpu;
    CHECK(contains(error_of([&] { (void)fj::Program::load((dir / "swapped").string(), cpu); }),
                   "compiled from another graph"));
    // A sound folder: Auto says it needs a GPU and names the CPU path; Backend::Cpu runs its graph there.
    fj::Error auto_error(fj::ErrorKind::User, "");
    try {
      (void)fj::Program::load((dir / "ok").string());
    } catch (const fj::Error& err) {
      auto_error = err;
    }
    CHECK(auto_error.kind() == fj::ErrorKind::Driver);
    CHECK(contains(auto_error.what(), "Program::load needs a GPU to run the folder's binaries: "));
    CHECK(contains(auto_error.what(), "(the folder is checked; Options::backend = Backend::Cpu runs its graph on the CPU path"));
    const fj::Program on_cpu = fj::Program::load((dir / "ok").string(), cpu);
    CHECK(on_cpu.backend() == fj::Backend::Cpu);
    const float xs[8] = {0, 1, -1, 2, -0.0f, 88, -100, 0.5f};
    const fj::HostTensor x = fj::HostTensor::from_floats(fj::DType::F32, {8}, xs);
    const std::vector<fj::HostTensor> got = on_cpu.run({x});
    const std::vector<fj::HostTensor> want = fj::Program::compile(fj::Graph::parse(exp_graph, "g.txt"), cpu).run({x});
    REQUIRE(got.size() == 2);
    for (size_t k = 0; k < 2; ++k) CHECK(std::ranges::equal(got[k].data(), want[k].data()));
    fusejit::jit::set_driver_for_testing(nullptr);
  }
  // Damaged or hostile index values: User errors naming the file and the key.
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> cases = {
      {[](nlohmann::json& x) { x["kernels"][0]["group"] = -1; }, "\"group\" is not a non-negative integer"},
      {[](nlohmann::json& x) { x["kernels"][0]["group"] = 18446744073709551615ull; }, "\"group\" is not below"},
      {[](nlohmann::json& x) { x["kernels"][0]["group"] = 1e18; }, "\"group\" is not a non-negative integer"},
      {[](nlohmann::json& x) { x["kernels"][1] = x["kernels"][0]; }, "a second kernel for the same plan and group"},
      {[](nlohmann::json& x) { x["kernels"][0]["cubin"] = "/etc/passwd"; }, "\"cubin\" is not a kernel file of the folder"},
      {[](nlohmann::json& x) { x["kernels"][0]["cubin"] = "fj_g_1.ptx"; }, "\"cubin\" is not a kernel file of the folder"},
      {[](nlohmann::json& x) { x["kernels"][0]["cubin"] = "../fj_g_1.cubin"; }, "\"cubin\" is not a kernel file of the folder"},
      // Another kernel's binary (the unfused plan's image, which every unfused entry names).
      {[](nlohmann::json& x) { x["kernels"][0]["cubin"] = x["kernels"][1]["cubin"]; }, "does not hold kernel fj_g_"},
      {[](nlohmann::json& x) { x["kernels"][0]["kernel"] = "../evil"; }, "\"kernel\" is not a fusejit kernel name"},
      {[](nlohmann::json& x) { x["graph"] = "/etc/passwd"; }, "\"graph\" is not a file name in the folder"},
      {[](nlohmann::json& x) { x["format_version"] = "1"; }, "has format_version \"1\", not a number; this fusejit reads the number 1"},
      {[](nlohmann::json& x) { x["target"] = "sm_abc"; }, "index.json': \"target\": invalid GPU architecture 'sm_abc'"},
      {[](nlohmann::json& x) { x["format_version"] = 1.5; }, "has format_version 1.5"},
      {[](nlohmann::json& x) { x["kernels"] = "x"; }, "\"kernels\" is not an array"},
      {[](nlohmann::json& x) { x["kernels"][0]["entries"][0]["args"][0]["ctype"] = 1; }, "\"ctype\" is not a string"},
      {[](nlohmann::json& x) { x["kernels"][0]["entries"][0]["args"][0]["ctype"] = "const double*"; },
       "in index.json with other parameters than the fj_g_"},
      {[](nlohmann::json& x) { x["kernels"] = nlohmann::json::array(); }, "index.json lists no kernel 0 of the fused plan"},
      // What an external launcher reads of an entry point is the kernel's (a hostile tester's edits loaded).
      {[](nlohmann::json& x) { x["kernels"][0]["entries"][0]["name"] = "evil"; }, "with other parameters than the fj_g_"},
      {[](nlohmann::json& x) { x["kernels"][0]["entries"][0]["args"][0]["bytes"] = 4; }, "with other parameters than"},
      {[](nlohmann::json& x) { x["kernels"][0]["entries"][0]["args"][0]["dtype"] = "f16"; }, "with other parameters than"},
      {[](nlohmann::json& x) { x["kernels"][0]["entries"][0]["args"][0]["bytes"] = -8; }, "\"bytes\" is not a non-negative"},
      {[](nlohmann::json& x) { x["kernels"][0]["entries"][0] = "x"; }, "an entry point of \"entries\" is not an object"},
      {[](nlohmann::json& x) {
         nlohmann::json extra = x["kernels"][0];  // a fused kernel for a group past the fused plan's
         extra["group"] = 1;
         x["kernels"].push_back(extra);
       },
       "index.json': it lists a kernel for group 1 of the fused plan, which has 1 kernel;"},
      {[](nlohmann::json& x) { x.erase("codegen_version"); }, "index.json': \"codegen_version\" is missing"},
      {[](nlohmann::json& x) { x["fusejit_version"] = 1; }, "\"fusejit_version\" is not a string"},
      {[](nlohmann::json& x) { x["headers"] = {1}; }, "\"headers\" holds a value that is not a string"},
      {[](nlohmann::json& x) { x["graph"] = std::string("graph.txt\0junk", 14); }, "\"graph\" is not a file name in the folder"},
      {[](nlohmann::json& x) { x.erase("dims"); }, "\"dims\" is missing"},
      {[](nlohmann::json& x) { x["output"] = "none"; }, "(a dump folder of the CPU path: Options::dump_dir, Python's dump_dir=, `fusejit run --dump-dir`; for reading)"},
      {[](nlohmann::json& x) { x["output"] = "exe"; }, "has \"output\": \"exe\" (\"cubin\" or \"ptx\""},
      {[](nlohmann::json& x) { x.erase("output"); }, "has \"output\": missing"},
      {[](nlohmann::json& x) { x["format_version"] = 1.0; }, "has format_version 1.0; this fusejit reads the number 1"},
      {[](nlohmann::json& x) { x["target"] = "compute_90"; }, "\"target\" compute_90 does not hold \"output\" cubin"},
      {[](nlohmann::json& x) { x["dims"]["N"] = 9223372036854775808ull; }, "dim 'N' is not an integer from 0 to 2^63 - 1"},
      {[](nlohmann::json& x) { x["dims"]["Q"] = 4; }, "index.json': \"dims\" names dim 'Q', which '"},
      // The options a kernel was compiled with are its mode's and the folder's (a fast-math binary
      // under a strict index ran FMA-contracted code as strict), and its binary is the one written.
      {[](nlohmann::json& x) { x["kernels"][0]["nvrtc_options"].push_back("--use_fast_math"); },
       "was compiled with NVRTC options"},
      {[](nlohmann::json& x) { x["nvrtc_options"] = {"--maxrregcount=32"}; }, "was compiled with NVRTC options"},
      // A strict index whose options loosen float math (written before the rule, or edited).
      {[](nlohmann::json& x) { x["nvrtc_options"] = {"--fmad=true"}; },
       "index.json': \"nvrtc_options\": NVRTC option '--fmad=true' changes floating-point results"},
      {[](nlohmann::json& x) { x["kernels"][0]["nvrtc_options"] = 5; }, "\"nvrtc_options\" is not an array"},
      {[](nlohmann::json& x) { x["kernels"][0]["binary_xxh3"] = "zz"; }, "\"binary_xxh3\" is not 32 hex digits"},
      {[](nlohmann::json& x) { x["kernels"][0]["binary_xxh3"] = std::string(32, '0'); },
       "(its \"binary_xxh3\" differs: the file was replaced or damaged)"},
      // The unfused plan would compile with it, for another GPU than "target" (Options refuses it too).
      {[](nlohmann::json& x) { x["nvrtc_options"] = {"-arch=sm_80"}; }, "\"nvrtc_options\" holds '-arch=sm_80', which chooses the target"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    e = variant("case" + std::to_string(i), cases[i].first);
    CAPTURE(e);
    CHECK(contains(e, cases[i].second));
    if (!contains(cases[i].second, "does not hold kernel")) continue;
    // The fused binaries are checked before a GPU is looked for: the same error without one.
    try {
      (void)fj::Program::load((dir / ("case" + std::to_string(i))).string());
      FAIL("a folder whose index names another kernel's binary loaded");
    } catch (const fj::Error& no_gpu) {
      CHECK(contains(no_gpu.what(), "does not hold kernel fj_g_"));
    }
  }
  // A FIFO or a device where a file should be is refused without reading it (it would hang or
  // never end).
  fs::copy(dir / "ok", dir / "fifo");
  fs::remove(dir / "fifo" / "index.json");
  REQUIRE(::mkfifo((dir / "fifo" / "index.json").c_str(), 0600) == 0);
  CHECK(contains(load_error(dir / "fifo"), "it is a FIFO (named pipe)"));
  fs::copy(dir / "ok", dir / "zero");
  fs::remove(dir / "zero" / "graph.txt");
  fs::create_symlink("/dev/zero", dir / "zero" / "graph.txt");
  CHECK(contains(load_error(dir / "zero"), "it is a character device"));
  fs::copy(dir / "ok", dir / "empty");
  const std::string cubin = read_json(dir / "ok" / "index.json")["kernels"][0]["cubin"].get<std::string>();
  write_file(dir / "empty" / cubin, "");
  CHECK(contains(load_error(dir / "empty"), "' is empty: write the folder again"));
  {  // Strict and fast-math folders of a graph whose kernel source is the same in both modes: the
     // index's mode and each binary are tied to the kernels (a hostile tester ran one as the other).
    const fj::Graph fma = fj::Graph::parse("graph fma\ninput x : f32[64]\ninput y : f32[64]\ninput w : f32[64]\n"
                                           "z = x * y + w\noutput z\n", "fma.txt");
    fj::compile_to_dir(fma, "sm_90", (dir / "fma-strict").string(), false, {}, false);
    fj::compile_to_dir(fma, "sm_90", (dir / "fma-fast").string(), true, {}, false);
    const nlohmann::json strict_index = read_json(dir / "fma-strict" / "index.json");
    const std::string bin = strict_index["kernels"][0]["cubin"].get<std::string>();
    REQUIRE(bin == read_json(dir / "fma-fast" / "index.json")["kernels"][0]["cubin"].get<std::string>());
    CHECK(load_error(dir / "fma-strict") == "");
    CHECK(load_error(dir / "fma-fast") == "");
    fj::Options cpu;  // the CPU path in the folder's mode; a dump_dir is not written (into the folder: it hung)
    cpu.backend = fj::Backend::Cpu;
    cpu.dump_dir = (dir / "fma-fast").string();
    CHECK(fj::Program::load((dir / "fma-fast").string(), cpu).fast_math());
    CHECK_FALSE(fj::Program::load((dir / "fma-strict").string(), cpu).fast_math());
    CHECK(read_json(dir / "fma-fast" / "index.json")["output"] == "cubin");
    nlohmann::json flipped = read_json(dir / "fma-fast" / "index.json");
    flipped["fast_math"] = false;
    write_file(dir / "fma-fast" / "index.json", flipped.dump());
    CHECK(contains(load_error(dir / "fma-fast"), "was compiled with NVRTC options"));
    fs::copy_file(dir / "fma-fast" / bin, dir / "fma-strict" / bin, fs::copy_options::overwrite_existing);
    CHECK(contains(error_of([&] { (void)fj::Program::load((dir / "fma-strict").string()); }),
                   "(its \"binary_xxh3\" differs: the file was replaced or damaged)"));
  }
  // A text file holding the kernel's name is no CUBIN; a name of megabytes is refused unshown.
  fs::copy(dir / "ok", dir / "text");
  const std::string kname = read_json(dir / "ok" / "index.json")["kernels"][0]["kernel"].get<std::string>();
  write_file(dir / "text" / cubin, "not a binary, but it names " + kname + "\n");
  CHECK(contains(load_error(dir / "text"), "' is not a CUBIN (no ELF header): write the folder again"));
  fs::copy(dir / "ok", dir / "elf-other");  // an ELF file without the name as a string of its own
  write_file(dir / "elf-other" / cubin, std::string("\x7f" "ELF") + "x" + kname + "_s" + std::string(1, '\0'));
  CHECK(contains(load_error(dir / "elf-other"), "does not hold kernel " + kname));
  e = variant("long-name", [](nlohmann::json& x) { x["kernels"][0]["cubin"] = "fj_" + std::string(1 << 20, 'a') + ".cubin"; });
  CHECK(contains(e, "\"cubin\" is not a kernel file of the folder"));
  CHECK(e.size() < 1000);
  // A missing binary is named before a GPU is looked for (it said only "needs a GPU" without one).
  fs::copy(dir / "ok", dir / "lost");
  fs::remove(dir / "lost" / cubin);
  CHECK(contains(load_error(dir / "lost"), "kernel 0: its file '" + (dir / "lost" / cubin).string() + "' is missing"));
  // A folder in the place of a kernel's .cu (checked for being there only, it passed).
  fs::copy(dir / "ok", dir / "cu-folder");
  const std::string cu = cubin.substr(0, cubin.rfind('.')) + ".cu";
  REQUIRE(fs::remove(dir / "cu-folder" / cu));
  fs::create_directory(dir / "cu-folder" / cu);
  CHECK(contains(load_error(dir / "cu-folder"), "its file '" + (dir / "cu-folder" / cu).string() + "' is no regular file"));
  try {
    (void)fj::Program::load((dir / "lost").string());  // no FakeGpu: still the folder's error
    FAIL("loaded");
  } catch (const fj::Error& e2) {
    CHECK(e2.kind() == fj::ErrorKind::User);
    CHECK(contains(e2.what(), "is missing; write the folder again with `fusejit compile`"));
  }
  // graph.txt is read and parsed once: an unused input warns once at load (it warned twice).
  const fs::path unused_dir = dir / "unused";
  fj::compile_to_dir(fj::Graph::parse("graph u\ninput x : f32[8]\ninput z : f32[8]\ny = exp(x)\noutput y\n", "u.txt"),
                     "sm_90", unused_dir.string());
  int unused_warnings = 0;
  fj::set_warning_handler([&](std::string_view m) { unused_warnings += contains(std::string(m), "is not used"); });
  CHECK(load_error(unused_dir) == "");
  fj::set_warning_handler({});
  CHECK(unused_warnings == 1);
  // The unfused plan's files are looked for on its first use: without them the fused plan loads.
  fs::copy(dir / "ok", dir / "no-unfused");
  for (const auto& k : read_json(dir / "ok" / "index.json")["kernels"])
    if (k["plan"] == "unfused") fs::remove(dir / "no-unfused" / k["cubin"].get<std::string>());
  CHECK(load_error(dir / "no-unfused") == "");
  // A graph error names the folder's graph.txt, whose lines it counts.
  fs::copy(dir / "ok", dir / "typo");
  write_file(dir / "typo" / "graph.txt", "graph g\ninput x : f32[8]\ny = epx(x)\ns = sum(y)\noutput y, s\n");
  FakeGpu gpu;
  try {
    (void)fj::Program::load((dir / "typo").string());
    FAIL("loaded");
  } catch (const fj::Error& e2) {
    CHECK(e2.file() == (dir / "typo" / "graph.txt").string());
    CHECK(e2.line() == 3);
  }
}

TEST_CASE("ahead of time: a folder for another GPU is refused at load; one written again, at its unfused plan's use") {
  const fs::path dir = scratch_dir("aot-arch");
  const fj::Graph g = fj::Graph::parse("graph g\ninput x : f32[8]\ny = exp(x)\ns = sum(y)\noutput y, s\n", "g.txt");
  for (const char* arch : {"sm_80", "sm_90", "sm_100", "compute_80", "compute_90", "compute_100"})
    fj::compile_to_dir(g, arch, (dir / arch).string());
  // The fake GPU is compute capability 9.0: a CUBIN runs on its own major version, PTX on later GPUs.
  for (const char* arch : {"sm_90", "compute_80", "compute_90"}) CHECK(load_error(dir / arch) == "");
  const std::string e80 = load_error(dir / "sm_80");
  CAPTURE(e80);
  CHECK(contains(e80, "holds kernels for sm_80: a CUBIN for sm_80 runs on GPUs of compute capability 8.0 to 8.9, not "
                      "on compute capability 9.0; write it for this GPU with `fusejit compile GRAPH --arch sm_90 -o DIR`"));
  CHECK(contains(load_error(dir / "sm_100"), "a CUBIN for sm_100 runs on GPUs of compute capability 10.0 to 10.9"));
  CHECK(contains(load_error(dir / "compute_100"), "PTX for compute_100 runs on 10.0 and later GPUs, not on compute capability 9.0"));
  {  // A PTX that names the kernel only in a comment does not hold it (its `.entry` line is what counts).
    const fs::path ptx_dir = dir / "ptx-no-entry";
    fs::copy(dir / "compute_90", ptx_dir);
    const nlohmann::json k0 = read_json(ptx_dir / "index.json")["kernels"][0];
    const std::string name = k0["kernel"].get<std::string>();
    write_file(ptx_dir / k0["ptx"].get<std::string>(), "// " + name + "\n.version 8.0\n.target sm_90\n");
    CHECK(contains(load_error(ptx_dir), "does not hold kernel " + name));
  }
  // Written again (another mode) after the load: the unfused plan, read on first use, is refused.
  FakeGpu gpu;
  {  // A module that does not load (a damaged binary) names the file it came from.
    const fj::Program d = fj::Program::load((dir / "compute_90").string());
    fake_cuda::st().load_result = 200;  // CUDA_ERROR_INVALID_IMAGE
    const std::string bad = error_of([&] { (void)d.run({fj::HostTensor(fj::DType::F32, {8})}); });
    fake_cuda::st().load_result = 0;
    CAPTURE(bad);
    CHECK(contains(bad, "(the image read from " + (dir / "compute_90").string() + "/fj_g_"));
  }
  const fj::Program p = fj::Program::load((dir / "sm_90").string());
  fj::compile_to_dir(g, "sm_90", (dir / "sm_90").string(), /*fast_math=*/true);
  const fj::HostTensor x(fj::DType::F32, {8});
  const std::string e = error_of([&] { (void)p.run({x}, {}, fj::PlanKind::Unfused); });
  CHECK(contains(e, "was written again since Program::load read it (its index.json changed)"));
  // --fused-only: the fused plan alone; a loaded program compiles the unfused one on first use.
  fj::compile_to_dir(g, "sm_90", (dir / "fused-only").string(), false, {}, /*with_unfused=*/false);
  const nlohmann::json fo = read_json(dir / "fused-only" / "index.json");
  CHECK(fo["plans"] == nlohmann::json::array({"fused"}));
  for (const auto& k : fo["kernels"]) CHECK(k["plan"] == "fused");
  const fj::Program q = fj::Program::load((dir / "fused-only").string());
  auto keep = emulate(q);
  const std::vector<float> values = {-3.5f, 0.0f, -0.0f, 1e-40f, 2.5f, 88.0f, -100.0f, 7.0f};
  const fj::HostTensor x8 = fj::HostTensor::from_floats(fj::DType::F32, {8}, values);
  const std::vector<fj::HostTensor> fused = q.run({x8}, {}, fj::PlanKind::Fused);
  const std::vector<fj::HostTensor> unfused = q.run({x8}, {}, fj::PlanKind::Unfused);
  CHECK((fused[0] == unfused[0] && fused[1] == unfused[1]));
  CHECK(q.kernels(fj::PlanKind::Fused)[0].cache == fj::CacheOutcome::Loaded);
  CHECK(q.kernels(fj::PlanKind::Unfused)[0].cache != fj::CacheOutcome::Loaded);
  fs::remove_all(dir);
}

TEST_CASE("ahead of time: writing a folder replaces symlinks, keeps files it did not write, refuses an empty path") {
  const fs::path dir = scratch_dir("aot-write");
  const fj::Graph g = fj::Graph::parse("graph g\ninput x : f32[8]\ny = exp(x)\noutput y\n", "g.txt");
  // An index naming the user's files, index.json and graph.txt: none is removed.
  fs::create_directories(dir / "trap");
  write_file(dir / "trap" / "precious.txt", "mine");
  write_file(dir / "trap" / "index.json",
             R"({"format":"fusejit-aot","format_version":1,"kernels":[{"cu":"precious.txt"},{"cu":"index.json"},)"
             R"({"cu":"graph.txt"}]})");
  fj::compile_to_dir(g, "sm_90", (dir / "trap").string());
  CHECK(fs::exists(dir / "trap" / "precious.txt"));
  CHECK(load_error(dir / "trap") == "");
  // graph.txt of a folder fusejit wrote made a symlink to a file elsewhere: the link is replaced,
  // the file untouched.
  fj::compile_to_dir(g, "sm_90", (dir / "sym").string());
  write_file(dir / "victim.txt", "victim");
  fs::remove(dir / "sym" / "graph.txt");
  fs::create_symlink(dir / "victim.txt", dir / "sym" / "graph.txt");
  fj::compile_to_dir(g, "sm_90", (dir / "sym").string());
  CHECK(!fs::is_symlink(dir / "sym" / "graph.txt"));
  std::ifstream victim(dir / "victim.txt");
  CHECK(std::string(std::istreambuf_iterator<char>(victim), {}) == "victim");
  // Compiled at other dims: loaded at those dims.
  const fj::Graph big = fj::Graph::parse("graph g\ndim N = 8\ninput x : f32[N]\ny = exp(x)\noutput y\n", "g.txt")
                            .with_dims({{"N", 3000000000}});
  fj::compile_to_dir(big, "sm_90", (dir / "dims").string());
  CHECK(load_error(dir / "dims") == "");
  CHECK(contains(error_of([&] { fj::compile_to_dir(g, "sm_90", ""); }), "the output folder is an empty path"));
  // No temporary file is left behind.
  for (const auto& entry : fs::directory_iterator(dir / "sym")) CHECK(entry.path().extension() != ".tmp");
}

TEST_CASE("FUSEJIT_DUMP_DIR: every program compile builds writes a folder of its own, named by its graph and a hash") {
  const fs::path dir = scratch_dir("env-dump");
  const ScopedEnv env("FUSEJIT_DUMP_DIR", (dir / "all").c_str());
  fj::Options o;
  o.backend = fj::Backend::Cpu;
  const fj::Graph first = fj::Graph::parse("graph first\ninput x : f32[8]\ny = exp(x)\noutput y\n", "a.txt");
  const fj::Graph second = fj::Graph::parse("input x : f32[8]\ny = x * 2\noutput y\n", "/no/such/second.txt");
  fj::Options fast = o;
  fast.fast_math = true;
  const fj::Program p1 = fj::Program::compile(first, o), p2 = fj::Program::compile(second, o);
  const fj::Program again = fj::Program::compile(first, o), p1_fast = fj::Program::compile(first, fast);
  CHECK(again.dump_dir() == p1.dump_dir());     // the same program: the same folder
  CHECK(p1_fast.dump_dir() != p1.dump_dir());   // another mode: another folder
  fj::Options no_row_cache = o;  // other row rules, other kernels: another folder (a reviewer's find:
  no_row_cache.row_cache = false;  // the second replaced the first's index.json)
  const fj::Program p1_memory = fj::Program::compile(first, no_row_cache);
  CHECK(p1_memory.dump_dir() != p1.dump_dir());
  const std::string n1 = fs::path(p1.dump_dir()).filename().string(), n2 = fs::path(p2.dump_dir()).filename().string();
  CHECK(fs::path(p1.dump_dir()).parent_path() == dir / "all");
  CHECK((n1.rfind("first-", 0) == 0 && n1.size() == 6 + 16));  // `graph first`
  CHECK(n2.rfind("second-", 0) == 0);                         // no graph name: the file's stem
  // Text parsed without a file ("<string>") is "graph".
  const fj::Program unnamed = fj::Program::compile(fj::Graph::parse("input x : f32[2]\ny = -x\noutput y\n"), o);
  CHECK(fs::path(unnamed.dump_dir()).filename().string().rfind("graph-", 0) == 0);
  for (const fj::Program* p : {&p1, &p2, &p1_fast}) {
    const nlohmann::json index = read_json(fs::path(p->dump_dir()) / "index.json");
    CHECK(index["plans"].size() == 2);
    CHECK(fs::exists(fs::path(p->dump_dir()) / "graph.txt"));
    // Each .cu says which plan it is of (its name is a hash: a new user's find).
    for (const nlohmann::json& k : index["kernels"]) {
      std::ifstream cu(fs::path(p->dump_dir()) / k["cu"].get<std::string>());
      const std::string text(std::istreambuf_iterator<char>(cu), {});
      CHECK(contains(text, fmt::format("{} plan{}: kernel {} of ", k["plan"] == "fused" ? "used" : "nfused",
                                       k["plan"] == "fused" ? "" : " (one kernel per op, the baseline)", k["group"].get<int>())));
    }
  }
  CHECK(std::distance(fs::directory_iterator(dir / "all"), fs::directory_iterator()) == 5);
  // A dump_dir of the program's own is written instead; unset, nothing is written.
  fj::Options mine = o;
  mine.dump_dir = (dir / "mine").string();
  CHECK(fj::Program::compile(second, mine).dump_dir() == mine.dump_dir);
  CHECK(std::distance(fs::directory_iterator(dir / "all"), fs::directory_iterator()) == 5);
  {
    const ScopedEnv unset("FUSEJIT_DUMP_DIR", "");
    CHECK(fj::Program::compile(second, fast).dump_dir().empty());
  }
  // compile_to_dir writes where it is told, and a load, which compiles on the CPU path, nothing.
  fj::compile_to_dir(second, "sm_90", (dir / "aot").string());
  CHECK(fj::Program::load((dir / "aot").string(), o).dump_dir().empty());
  CHECK(std::distance(fs::directory_iterator(dir / "all"), fs::directory_iterator()) == 5);
  // A folder that cannot be written is an error naming the variable, not a program without its dump:
  // one fusejit did not write too (it said "choose a new or empty folder" of a folder the user
  // never chose, a hostile tester's find).
  write_file(fs::path(p2.dump_dir()) / "index.json", "{}");
  CHECK(contains(error_of([&] { (void)fj::Program::compile(second, o); }),
                 "(writing the program's folder under FUSEJIT_DUMP_DIR: unset the variable to write none)"));
  write_file(dir / "file", "x");
  const ScopedEnv bad("FUSEJIT_DUMP_DIR", (dir / "file").c_str());
  CHECK(contains(error_of([&] { (void)fj::Program::compile(first, o); }), "the program's folder under FUSEJIT_DUMP_DIR"));
}

TEST_CASE("ahead of time: a folder fusejit did not write is left alone; a failed write leaves the earlier folder loadable") {
  // A hostile tester's finds: a user's index.json, graph.txt and fj_scalar.h were replaced without
  // a word, and a file an index of a newer format listed was removed.
  const fs::path dir = scratch_dir("aot-foreign");
  const fj::Graph g = fj::Graph::parse("graph g\ninput x : f32[8]\ny = exp(x)\noutput y\n", "g.txt");
  const auto refused = [&](const fs::path& folder, const std::string& file, const std::string& text, const char* why) {
    CAPTURE(folder);
    CHECK(contains(error_of([&] { fj::compile_to_dir(g, "sm_90", folder.string()); }), why));
    std::ifstream in(folder / file);
    CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == text);
  };
  fs::create_directories(dir / "json");
  write_file(dir / "json" / "index.json", R"({"my":"json"})");
  refused(dir / "json", "index.json", R"({"my":"json"})", "is not one fusejit wrote: its index.json is not an index");
  fs::create_directories(dir / "text");
  write_file(dir / "text" / "graph.txt", "g");
  refused(dir / "text", "graph.txt", "g", "it holds a graph.txt of other text and no index.json of fusejit's");
  write_file(dir / "text" / "graph.txt", g.to_text());  // the text the dump writes: taken, as the header below
  write_file(dir / "text" / "fj_scalar.h", "x");
  refused(dir / "text", "fj_scalar.h", "x", "it holds a fj_scalar.h of other text");
  fs::create_directories(dir / "newer");
  const std::string newer = R"({"format":"fusejit-aot","format_version":7,"kernels":[{"cu":"fj_user_0123456789abcdef.cu"}]})";
  write_file(dir / "newer" / "index.json", newer);
  write_file(dir / "newer" / "fj_user_0123456789abcdef.cu", "mine");
  refused(dir / "newer", "fj_user_0123456789abcdef.cu", "mine", "of a format this fusejit does not know (format_version 7");
  // A graph file in the folder, compiled into it (graph.txt is that file), and an empty folder: written.
  fs::create_directories(dir / "own");
  write_file(dir / "own" / "graph.txt", "graph g\ninput x : f32[8]\ny = exp(x)\noutput y\n");
  fj::compile_to_dir(fj::Graph::load((dir / "own" / "graph.txt").string()), "sm_90", (dir / "own").string());
  CHECK(load_error(dir / "own") == "");
  fs::create_directories(dir / "empty");
  fj::compile_to_dir(g, "sm_90", (dir / "empty").string());
  CHECK(load_error(dir / "empty") == "");
  // A dump of another graph that fails on the way (a kernel file it cannot write) leaves the
  // earlier graph.txt and index.json, a folder that loads (it left a new graph.txt beside the old
  // index, refused as edited).
  const fj::Graph other = fj::Graph::parse("graph g\ninput x : f32[8]\ny = tanh(x)\noutput y\n", "g.txt");
  const std::vector<fj::KernelInfo> ks = fj::compile_to_dir(other, "sm_90", (dir / "probe").string(), false, {}, false);
  REQUIRE(!ks.empty());
  fs::create_directories(dir / "empty" / (ks[0].name + ".cu") / "x");
  CHECK(contains(error_of([&] { fj::compile_to_dir(other, "sm_90", (dir / "empty").string()); }), "cannot write"));
  CHECK(load_error(dir / "empty") == "");
}

TEST_CASE("ahead of time: a folder another process holds is waited for with a warning naming it, not silently") {
  const fs::path dir = scratch_dir("aot-held");
  const fj::Graph g = fj::Graph::parse("graph g\ninput x : f32[8]\ny = exp(x)\noutput y\n", "g.txt");
  fs::create_directories(dir);
  // Another open file description's exclusive flock (as another process's), let go once the
  // warning came (or after 30 s: then the CHECKs below fail).
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  std::atomic<bool> warned{false};
  std::thread holder([fd, &warned] {
    for (int k = 0; k < 3000 && !warned; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::close(fd);
  });
  std::vector<std::string> warnings;
  fj::set_warning_handler([&](std::string_view m) {
    warnings.emplace_back(m);
    warned = true;
  });
  const std::string error = error_of([&] { fj::compile_to_dir(g, "sm_90", dir.string()); });
  fj::set_warning_handler({});
  holder.join();
  CHECK(error == "(no error)");
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0] == "waiting for another process that holds the folder " + dir.string() +
                           " (a dump writing it or a load reading it); giving up after 60 s");
  CHECK(load_error(dir) == "");
}

TEST_CASE("FUSEJIT_NVRTC hides NVRTC: compiling fails clearly, the CPU path runs") {
  const char* bin = std::getenv("FUSEJIT_BIN");
  if (!bin || !*bin) return;  // built without the command
  const fs::path dir = scratch_dir("nvrtc_env");
  const std::string sample = fusejit::testing::sample_path("x2x3.txt");
  const std::string log = (dir / "log.txt").string();
  const std::string pre = "FUSEJIT_NVRTC=/nonexistent/libnvrtc.so '" + std::string(bin) + "' ";
  int rc = std::system((pre + "compile " + sample + " --arch sm_90 -o " + (dir / "out").string() + " > " + log + " 2>&1").c_str());
  const std::string out = fusejit::testing::read_file(log);
  CHECK(WEXITSTATUS(rc) == 1);
  CHECK(contains(out, "NVRTC, the CUDA toolkit's runtime compiler, is not available"));
  rc = std::system((pre + "run " + sample + " --dim N=64 --backend cpu > " + log + " 2>&1").c_str());
  CHECK(WEXITSTATUS(rc) == 0);
  // An --arch on the CPU path needs no NVRTC: its form is checked (a typo is the user's error, 2),
  // a valid one warns that it has no effect (it was an Error(Compile) for both).
  rc = std::system((pre + "run " + sample + " --dim N=64 --backend cpu --arch sm_90 > " + log + " 2>&1").c_str());
  CHECK(WEXITSTATUS(rc) == 0);
  CHECK(contains(fusejit::testing::read_file(log), "--arch sm_90 has no effect on the CPU path"));
  rc = std::system((pre + "run " + sample + " --dim N=64 --backend cpu --arch sm_xx > " + log + " 2>&1").c_str());
  CHECK(WEXITSTATUS(rc) == 2);
  CHECK(contains(fusejit::testing::read_file(log), "--arch: invalid GPU architecture 'sm_xx'"));
}

namespace {

// Bytes of a kernel parameter list as the CUDA ABI lays it out (each argument at its own alignment).
int64_t param_bytes(const fusejit::jit::KernelSignature& sig) {
  int64_t at = 0;
  for (const fusejit::jit::ArgSlot& a : sig.args) at = (at + a.bytes - 1) / a.bytes * a.bytes + a.bytes;
  return at;
}

void check_param_bytes(const fusejit::ir::Graph& g, const fusejit::ir::Plan& plan, const std::string& label) {
  for (const fusejit::ir::FusionGroup& grp : plan.groups) {
    const fusejit::jit::GeneratedKernel k = fusejit::jit::generate_kernel(g, grp);
    const int64_t bound = fusejit::ir::estimate_param_bytes(g, grp);
    CAPTURE(label);
    CHECK(param_bytes(k.signature) <= bound);
    CHECK(param_bytes(k.strided_signature) <= bound);
  }
}

}  // namespace

TEST_CASE("both entry points stay within the planner's kernel parameter bound") {
  namespace ir = fusejit::ir;
  for (const auto& e : fs::directory_iterator(fs::path(FUSEJIT_SOURCE_DIR) / "samples" / "graphs")) {
    const ir::Graph g = ir::parse_graph_file(e.path().string());
    check_param_bytes(g, ir::plan_fusion(g), e.path().filename().string());
    check_param_bytes(g, ir::plan_unfused(g), e.path().filename().string());
  }
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    fusejit::testing::RandomGraphOptions o;
    o.seed = seed;
    o.num_ops = 12;
    const ir::Graph g = fusejit::testing::random_graph(o);
    check_param_bytes(g, ir::plan_fusion(g), "random graph " + std::to_string(seed));
  }
  // 600 inputs: the planner splits the group so each kernel's strides still fit.
  ir::GraphBuilder b("wide");
  ir::Operand sum = ir::Operand::of(b.add_input("x0", ir::DType::F32, {{64, -1}, {8, -1}}));
  for (int i = 1; i < 600; ++i) {
    ir::Operand args[2] = {sum, ir::Operand::of(b.add_input("x" + std::to_string(i), ir::DType::F32, {{64, -1}, {8, -1}}))};
    sum = b.apply(ir::Op::Add, args);
  }
  b.add_output("y", sum);
  const ir::Graph g = b.finish();
  const ir::Plan plan = ir::plan_fusion(g);
  CHECK(plan.groups.size() > 1);
  check_param_bytes(g, plan, "600 inputs");
  for (const ir::FusionGroup& grp : plan.groups) CHECK(ir::estimate_param_bytes(g, grp) <= ir::kMaxKernelParamBytes);
}
