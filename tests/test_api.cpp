// The public API: builder, parse/build equivalence, error kinds with locations, the CPU path,
// and concurrent runs of one Program from several threads.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include <fusejit/fusejit.h>
#include <fusejit/report.h>

namespace fj = fusejit;

namespace {

fj::HostTensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  return fj::HostTensor::from_floats(fj::DType::F32, std::move(shape), values);
}

std::vector<float> as_f32(const fj::HostTensor& t) { return t.to_floats(); }

const char* kSwiglu =
    "graph swiglu\n"
    "dim T = 4\n"
    "input gate : f32[T, 8]\n"
    "input up : f32[T, 8]\n"
    "y = silu(gate) * up\n"
    "output y\n";

fj::Graph build_swiglu() {
  fj::GraphBuilder b("swiglu");
  fj::DimRef T = b.dim("T", 4);
  fj::Value gate = b.input("gate", fj::DType::F32, {T, 8});
  fj::Value up = b.input("up", fj::DType::F32, {T, 8});
  fj::Value y = b.op("silu", {gate}) * up;
  b.name(y, "y");
  b.output("y", y);
  return b.build();
}

fj::Options cpu_options() {
  fj::Options o;
  o.backend = fj::Backend::Cpu;
  return o;
}

}  // namespace

TEST_CASE("builder and parser give the same graph") {
  fj::Graph parsed = fj::Graph::parse(kSwiglu, "swiglu.txt");
  fj::Graph built = build_swiglu();
  CHECK(parsed.to_text() == built.to_text());
  CHECK(built.op_count() == 2);
  REQUIRE(built.inputs().size() == 2);
  CHECK(built.inputs()[0].shape == std::vector<int64_t>{4, 8});
  CHECK(built.inputs()[0].dim_names == std::vector<std::string>{"T", ""});
  CHECK(built.outputs()[0].dtype == fj::DType::F32);
}

TEST_CASE("builder literals are weakly typed and promotion follows PyTorch") {
  fj::GraphBuilder b("w");
  fj::Value h = b.input("h", fj::DType::F16, {3});
  fj::Value i = b.input("i", fj::DType::I32, {3});
  b.output("a", h * 2);          // int literal meets f16: f16
  b.output("b", i * 0.5);        // float literal meets i32: f32 (default float dtype)
  b.output("c", h + i);          // i32 with f16: f16
  b.output("d", b.op("lt", {h, 1.0}));
  fj::Graph g = b.build();
  auto outs = g.outputs();
  CHECK(outs[0].dtype == fj::DType::F16);
  CHECK(outs[1].dtype == fj::DType::F32);
  CHECK(outs[2].dtype == fj::DType::F16);
  CHECK(outs[3].dtype == fj::DType::Bool);
}

TEST_CASE("errors carry a kind and, for graph text, a location") {
  try {
    fj::Graph::parse("input x : f32[4]\ny = x +* 2\noutput y\n", "bad.txt");
    FAIL("expected an error");
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK(e.file() == "bad.txt");
    CHECK(e.line() == 2);
    CHECK(e.column() > 0);
    CHECK(e.diagnostic().rfind("bad.txt:2:", 0) == 0);
  }
  fj::GraphBuilder b;
  fj::Value x = b.input("x", fj::DType::F32, {4});
  fj::Value y = b.input("y", fj::DType::F32, {5});
  CHECK_THROWS_AS(b.op("add", {x, y}), fj::Error);
  try {
    b.op("nosuchop", {x});
    FAIL("expected an error");
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK(std::string(e.what()).find("nosuchop") != std::string::npos);
  }
  CHECK_THROWS_AS(fj::Graph::load("/nonexistent/graph.txt"), fj::Error);
  fj::GraphBuilder empty;
  empty.input("x", fj::DType::F32, {4});
  CHECK_THROWS_AS(empty.build(), fj::Error);  // no output
}

TEST_CASE("GPU backend without a driver is a Driver error") {
  fj::Options o;
  o.backend = fj::Backend::Cuda;
  fj::Graph g = build_swiglu();
  try {
    fj::Program p = fj::Program::compile(g, o);
    // A machine with a GPU gets here; nothing more to check in this test.
    CHECK(p.backend() == fj::Backend::Cuda);
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::Driver);
  }
}

TEST_CASE("compile once, run fused and unfused on the CPU, bitwise equal and correct") {
  fj::Program p = fj::Program::compile(build_swiglu(), cpu_options());
  CHECK(p.backend() == fj::Backend::Cpu);
  CHECK(p.kernels(fj::PlanKind::Fused).size() == 1);
  CHECK(p.kernels(fj::PlanKind::Unfused).size() == 2);
  // Every declared accessor links and says something true (plan_text once had no definition).
  const std::string plan = p.plan_text();
  CHECK(plan.find("kernel 0 (" + p.kernels(fj::PlanKind::Fused)[0].name + ")") != std::string::npos);
  CHECK(plan.find("predicted") != std::string::npos);
  CHECK(p.rewrite_summary().rfind("rewrites (strict mode):", 0) == 0);
  CHECK(p.target().rfind("host C++", 0) == 0);
  CHECK(!p.fast_math());
  CHECK(p.rewritten().op_count() >= 1);
  std::vector<float> g(32), u(32);
  for (int k = 0; k < 32; ++k) {
    g[k] = -4.0f + 0.25f * static_cast<float>(k);
    u[k] = 1.0f + static_cast<float>(k);
  }
  g[3] = NAN;
  g[4] = -INFINITY;
  g[5] = -0.0f;
  g[6] = 1e-40f;
  std::vector<fj::HostTensor> in = {f32_tensor({4, 8}, g), f32_tensor({4, 8}, u)};
  auto fused = p.run(in);
  auto unfused = p.run(in, {}, fj::PlanKind::Unfused);
  REQUIRE(fused.size() == 1);
  CHECK(fused[0] == unfused[0]);
  auto y = as_f32(fused[0]);
  CHECK(std::isnan(y[3]));
  float expect = (g[10] / (1.0f + std::exp(-g[10]))) * u[10];
  CHECK(y[10] == expect);
}

TEST_CASE("one Program runs concurrently from several threads") {
  fj::Program p = fj::Program::compile(build_swiglu(), cpu_options());
  std::vector<float> g(32, 0.5f), u(32, 2.0f);
  std::vector<fj::HostTensor> in = {f32_tensor({4, 8}, g), f32_tensor({4, 8}, u)};
  auto expect = p.run(in);
  std::vector<std::thread> threads;
  std::vector<int> ok(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      bool good = true;
      for (int r = 0; r < 20; ++r) good &= p.run(in, {}, r % 2 ? fj::PlanKind::Unfused : fj::PlanKind::Fused)[0] == expect[0];
      ok[t] = good;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) CHECK(ok[t] == 1);
}

TEST_CASE("params are run-time values") {
  fj::GraphBuilder b("scale");
  fj::Value x = b.input("x", fj::DType::F32, {4});
  fj::Value a = b.param("alpha", fj::DType::F32, 2.0);
  b.output("y", x * a);
  fj::Program p = fj::Program::compile(b.build(), cpu_options());
  std::vector<fj::HostTensor> in = {f32_tensor({4}, {1, 2, 3, 4})};
  CHECK(as_f32(p.run(in)[0]) == std::vector<float>{2, 4, 6, 8});
  CHECK(as_f32(p.run(in, {3.0})[0]) == std::vector<float>{3, 6, 9, 12});
}

TEST_CASE("run_graph reports the CPU path honestly") {
  fj::Graph g = fj::Graph::parse(kSwiglu, "swiglu.txt");
  fj::RunOptions ro;
  ro.options.backend = fj::Backend::Cpu;
  fj::RunReport r = fj::run_graph(g, ro);
  CHECK(r.backend == "cpu");
  CHECK(r.ok());
  CHECK(r.fused.kernels == 1);
  CHECK(r.unfused.kernels == 2);
  CHECK(r.fused.bytes < r.unfused.bytes);
  CHECK(r.to_json().find("\"fused\"") != std::string::npos);
}
