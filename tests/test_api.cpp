// The public API: builder, parse/build equivalence, error kinds with locations, the CPU path,
// and concurrent runs of one Program from several threads.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
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

// Whether GraphBuilder::reduce compiles with a `K` in keepdim's place.
template <class K>
concept ReduceTakesKeepdim = requires(fj::GraphBuilder& b, fj::Value x, K k) { b.reduce("var", x, -1, k); };
template <class C>
concept ReduceTakesCorrection = requires(fj::GraphBuilder& b, fj::Value x, C c) { b.reduce("var", x, -1, false, c); };

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

TEST_CASE("a moved-from Graph or Program is still the same one (a call on one crashed)") {
  fj::Graph g = fj::Graph::parse(kSwiglu, "swiglu.txt");
  fj::Graph g2 = std::move(g);
  CHECK(g.to_text() == g2.to_text());  // NOLINT(bugprone-use-after-move): what this test checks
  fj::Program p = fj::Program::compile(g2, cpu_options());
  fj::Program q = std::move(p);
  fj::Program r = p;  // NOLINT(bugprone-use-after-move)
  r = std::move(q);
  CHECK(p.graph().name() == "swiglu");  // NOLINT(bugprone-use-after-move)
  CHECK(q.graph().name() == "swiglu");  // NOLINT(bugprone-use-after-move)
  fj::HostTensor gate(fj::DType::F32, {4, 8}), up(fj::DType::F32, {4, 8});
  CHECK(p.run({gate, up}).size() == 1);
}

TEST_CASE("a Graph or Program of a null state is refused (a placeholder Program(nullptr) crashed on its first call)") {
  CHECK_THROWS_WITH_AS((void)fj::Program(nullptr), doctest::Contains("Program::compile or Program::load"), fj::Error);
  CHECK_THROWS_WITH_AS((void)fj::Graph(nullptr), doctest::Contains("Graph::parse"), fj::Error);
  for (const auto& make : {std::function<void()>([] { (void)fj::Program(nullptr); }),
                           std::function<void()>([] { (void)fj::Graph(std::shared_ptr<const fj::Graph::Impl>()); })}) {
    try {
      make();
      FAIL("expected an error");
    } catch (const fj::Error& e) {
      CHECK(e.kind() == fj::ErrorKind::User);
    }
  }
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
    CHECK(e.diagnostic().back() != '\n');  // as format_diagnostic: api.md's example adds one
  }
  {  // An unlocated error's long quoted name is cut in diagnostic() as a located one's is.
    const fj::Error e(fj::ErrorKind::User, "no input named '" + std::string(1000, 'q') + "'");
    CHECK(e.diagnostic() == "error: no input named '" + std::string(35, 'q') + "..." + std::string(35, 'q') + "' (1000 bytes)");
    CHECK(std::string(e.what()).size() == 1017);
    // A compile error's log keeps its lines (diagnostic() had joined them with '?').
    const fj::Error log(fj::ErrorKind::Compile, "host compiler failed (exit code 1): c++ x.cpp\n  err 1\n  err 2");
    CHECK(log.diagnostic() == "error: host compiler failed (exit code 1): c++ x.cpp\n  err 1\n  err 2");
    // A quoted path is no name: a command to copy and run again keeps it whole.
    const std::string path = "/tmp/" + std::string(300, 'd') + "/k.so";
    CHECK(fj::Error(fj::ErrorKind::Compile, "c++ -o '" + path + "' x.cpp").diagnostic() == "error: c++ -o '" + path + "' x.cpp");
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

TEST_CASE("a negative dim override is the override's error, with no place in the graph text (as with_dims)") {
  // A new user's find: Graph::load(path, {{"N", -1}}) pointed at the file's `dim N = ...` line.
  const char* text = "graph g\ndim N = 8\ninput x : f32[N]\ny = x * 2\noutput y\n";
  try {
    (void)fj::Graph::parse(text, "g.txt", {{"N", -1}});
    FAIL("expected an error");
  } catch (const fj::Error& e) {
    CHECK(std::string(e.what()) == "dim 'N' must be >= 0, got -1");
    CHECK(e.line() == 0);
  }
  CHECK_THROWS_WITH_AS(fj::Graph::parse(text, "g.txt").with_dims({{"N", -1}}), "dim 'N' must be >= 0, got -1", fj::Error);
}

TEST_CASE("parse_dtype: graph-text names, and how fusejit writes NumPy's and PyTorch's") {
  for (fj::DType t : {fj::DType::Bool, fj::DType::I8, fj::DType::U8, fj::DType::I32, fj::DType::I64, fj::DType::F16,
                      fj::DType::BF16, fj::DType::F32, fj::DType::F64})
    CHECK(fj::parse_dtype(fj::dtype_name(t)) == t);
  auto message = [](std::string_view name) {
    try {
      (void)fj::parse_dtype(name);
    } catch (const fj::Error& e) {
      CHECK(e.kind() == fj::ErrorKind::User);
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  CHECK(message("float32") == "unknown dtype 'float32': fusejit writes it f32");
  CHECK(message("bfloat16") == "unknown dtype 'bfloat16': fusejit writes it bf16");
  CHECK(message("f33") == "unknown dtype 'f33'; did you mean 'f32'?");
  CHECK(message("") == "unknown dtype ''; expected one of bool, i8, u8, i32, i64, f16, bf16, f32, f64");
}

TEST_CASE("error_kind_name: the kind of fusejit run --json's error and of Python's exceptions") {
  CHECK(fj::error_kind_name(fj::ErrorKind::User) == "user");
  CHECK(fj::error_kind_name(fj::ErrorKind::Compile) == "compile");
  CHECK(fj::error_kind_name(fj::ErrorKind::Driver) == "driver");
  CHECK(fj::error_kind_name(fj::ErrorKind::Internal) == "internal");
  CHECK(fj::error_kind_name(static_cast<fj::ErrorKind>(99)) == "internal");
}

TEST_CASE("op_kind answers as GraphBuilder::op and reduce take the name") {
  CHECK(fj::op_kind("exp") == fj::OpKind::Elementwise);
  CHECK(fj::op_kind("where") == fj::OpKind::Elementwise);
  CHECK(fj::op_kind("cast") == fj::OpKind::Elementwise);
  for (const char* name : {"sum", "amax", "argmax", "softmax", "logsumexp", "var", "std", "any", "all"})
    CHECK_MESSAGE(fj::op_kind(name) == fj::OpKind::Reduction, std::string(name));
  for (const char* name : {"", "input", "param", "const", "Exp", "max", "min", "reshape", "exp "})
    CHECK_MESSAGE(fj::op_kind(name) == fj::OpKind::Unknown, std::string(name));
  // Every name the builder's op() takes (an arity error aside) is one op_kind calls elementwise,
  // and no other: the others get "unknown op" or "is a reduction".
  for (const char* name : {"exp", "neg", "maximum", "clamp", "fma", "where", "silu", "gelu_tanh", "isnan", "logical_not",
                           "left_shift", "sum", "softmax", "max", "square", "input", "frob"}) {
    fj::GraphBuilder b;
    fj::Value x = b.input("x", fj::DType::F32, {4});
    std::string error;
    try {
      (void)b.op(name, {x});
    } catch (const fj::Error& e) {
      error = e.what();
    }
    const bool elementwise = error.find("unknown op") == std::string::npos && error.find("is a reduction") == std::string::npos;
    const std::string what = std::string(name) + ": " + error;
    CHECK_MESSAGE((fj::op_kind(name) == fj::OpKind::Elementwise) == elementwise, what);
  }
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

TEST_CASE("the unfused plan's first use: from threads at once, and in a child forked during it") {
  const fj::Graph g = fj::Graph::parse("input x : f32[4, 8]\ny = tanh(x) * 3\nz = y * x + 1\noutput z\n");
  std::vector<float> xs(32);
  for (int k = 0; k < 32; ++k) xs[k] = -2.0f + 0.125f * static_cast<float>(k);
  const std::vector<fj::HostTensor> in = {f32_tensor({4, 8}, xs)};
  fj::Program p = fj::Program::compile(g, cpu_options());
  const auto expect = p.run(in);
  // Threads that arrive together: one builds it, all get the same bits.
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] { ok[t] = p.run(in, {}, fj::PlanKind::Unfused)[0] == expect[0]; });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK(ok[t] == 1);
  // A child forked while another thread builds it builds it too (a compile lock held by a thread
  // the child lacks once made it wait for ever).
  // Without the disk cache, and ops no other test of this process uses, the build compiles.
  fj::Options no_disk = cpu_options();
  no_disk.disk_cache = false;
  const fj::Graph g2 = fj::Graph::parse("input x : f32[4, 8]\ny = atan2(x, x + 3)\nz = hypot(y, x) - y\noutput z\n");
  fj::Program r = fj::Program::compile(g2, no_disk);
  const auto expect2 = r.run(in);
  std::atomic<bool> started{false}, built{false};
  std::thread builder([&] {
    started = true;
    r.run(in, {}, fj::PlanKind::Unfused);
    built = true;
  });
  while (!started.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the build takes about 0.1 s or more
  const bool in_flight = !built.load();
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(60);  // a hang ends the child by SIGALRM: a failure, not a hung suite
    ::_exit(r.run(in, {}, fj::PlanKind::Unfused)[0] == expect2[0] ? 0 : 1);
  }
  builder.join();
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(in_flight);  // the case this checks (glibc's pthread_once, under std::call_once, restarts
                     // an initialisation in flight at a fork in the child)
}

TEST_CASE("a child forked while other threads launch a program launches it too (its locks are taken around fork)") {
  // Threads inside a launch hold the program's dims-table lock for tens of nanoseconds per call; a
  // fork at that instant left it held in the child for ever, which hung at its first launch. With
  // three threads launching in a loop, 150 forks met that instant a few times a run before.
  const fj::Graph g = fj::Graph::parse("dim N = 8\ninput x : f32[N]\ny = x * 3 + 1\noutput y\n");
  fj::Program p = fj::Program::compile(g, cpu_options());
  std::vector<float> xs(8, 1.0f), ys(8, 0.0f);
  const int64_t shape[1] = {8};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      std::vector<float> out(8);
      const fj::TensorRef in(static_cast<const void*>(xs.data()), fj::DType::F32, shape);
      const fj::TensorRef o(static_cast<void*>(out.data()), fj::DType::F32, shape);
      while (!stop.load(std::memory_order_relaxed)) p.launch({in}, {o});
    });
  int hung = 0, wrong = 0;
  for (int k = 0; k < 150; ++k) {
    const pid_t child = ::fork();
    if (child == 0) {
      ::alarm(5);  // a hang ends the child by SIGALRM
      p.launch({fj::TensorRef(static_cast<const void*>(xs.data()), fj::DType::F32, shape)},
               {fj::TensorRef(static_cast<void*>(ys.data()), fj::DType::F32, shape)});
      ::_exit(ys[0] == 4.0f ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    if (!WIFEXITED(status)) ++hung;
    else if (WEXITSTATUS(status) != 0) ++wrong;
    if (hung) break;  // one is the failure; more would only take 5 s each
  }
  stop = true;
  for (auto& th : threads) th.join();
  CHECK(hung == 0);
  CHECK(wrong == 0);
}

namespace {
// y = x * 2 over {1, 2, 3}: returns y[2] (6 when right).
float launch_doubling(const fj::Program& p) {
  std::vector<float> x = {1, 2, 3}, y(3, 0.0f);
  const int64_t shape[1] = {3};
  p.launch({fj::TensorRef(static_cast<const void*>(x.data()), fj::DType::F32, shape)},
           {fj::TensorRef(static_cast<void*>(y.data()), fj::DType::F32, shape)});
  return y[2];
}
const fj::Program* g_at_exit = nullptr;
struct LaunchesAtThreadEnd {
  const fj::Program* p = nullptr;
  float* result = nullptr;
  ~LaunchesAtThreadEnd() {
    if (p) *result = launch_doubling(*p);
  }
};
}  // namespace

TEST_CASE("a launch from a thread_local's destructor or an atexit function works after that thread launched") {
  // The per-thread launch scratch was a thread_local itself: destroyed before a thread_local made
  // earlier, or before the process's exit functions, then used by their launch (a segfault; hostile pass).
  const fj::Program p = fj::Program::compile(fj::Graph::parse("dim N = 3\ninput x : f32[N]\ny = x * 2\noutput y\n"),
                                             cpu_options());
  float in_thread = 0, at_thread_end = 0;
  std::thread([&] {
    thread_local LaunchesAtThreadEnd holder;  // made before the thread's first launch: destroyed after its scratch
    holder.p = &p;
    holder.result = &at_thread_end;
    in_thread = launch_doubling(p);
  }).join();
  CHECK(in_thread == 6.0f);
  CHECK(at_thread_end == 6.0f);
  const pid_t child = ::fork();
  if (child == 0) {
    ::alarm(20);
    g_at_exit = &p;
    const bool before = launch_doubling(p) == 6.0f;
    std::atexit([] { ::_exit(launch_doubling(*g_at_exit) == 6.0f ? 0 : 3); });  // runs after the thread_locals' end
    std::exit(before ? 0 : 4);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a child forked while other threads compile compiles too (the shared caches' and stores' locks are taken around fork)") {
  // Program::compile looks up the shared kernel cache and disk store (their registries' and the
  // stores' brief critical sections), and each Program's CPU module is dlopen'ed and dlclose'd: a
  // fork at such an instant left a lock held in the child (fusejit's, or glibc's loader lock, which
  // hung the child's dlopen in most runs of this test).
#ifdef FUSEJIT_SANITIZED
  // AddressSanitizer's allocator is not fork-safe: a child forked while the compiling threads
  // allocate waits for ever on the allocator's lock (seen in CI); glibc's malloc is (fork() takes
  // its arena locks). The sanitized build skips this test.
  return;
#endif
  const fj::Graph g = fj::Graph::parse("dim N = 8\ninput x : f32[N]\ny = x * 5 - 1\noutput y\n");
  (void)fj::Program::compile(g, cpu_options());  // built once: later compiles are memory hits
  std::atomic<bool> stop{false};
  std::atomic<long> compiles{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        (void)fj::Program::compile(g, cpu_options());
        compiles.fetch_add(1, std::memory_order_relaxed);
      }
    });
  int hung = 0, wrong = 0;
  for (int k = 0; k < 100; ++k) {
    const pid_t child = ::fork();
    if (child == 0) {
      ::alarm(5);  // a hang ends the child by SIGALRM
      const fj::Program c = fj::Program::compile(g, cpu_options());
      const std::vector<float> one = {2.0f};
      const fj::HostTensor y = c.run({fj::HostTensor::from_floats(fj::DType::F32, {1}, one)})[0];
      ::_exit(y.to_floats()[0] == 9.0f ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    if (!WIFEXITED(status)) ++hung;
    else if (WEXITSTATUS(status) != 0) ++wrong;
    if (hung) break;
  }
  stop = true;
  for (auto& th : threads) th.join();
  CHECK(compiles.load() > 0);
  CHECK(hung == 0);
  CHECK(wrong == 0);
}

TEST_CASE("a replaced warning handler is never called again; one may not replace itself") {
  // Threads warn (an unused input) while the handler is replaced: once set_warning_handler has
  // returned, the old handler must not run, or freeing what it captured is a use after free.
  const std::string unused = "graph w\ninput x : f32[2]\ninput z : f32[2]\ny = x + 1\noutput y\n";
  std::atomic<bool> replaced{false}, stop{false};
  std::atomic<int> late{0}, calls{0};
  fj::set_warning_handler([&](std::string_view) {
    ++calls;
    if (replaced.load()) ++late;
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      while (!stop.load()) fj::Graph::parse(unused);
    });
  while (calls.load() < 100) std::this_thread::yield();
  // Handler calls that overlap without end do not starve the replacement: new calls wait for it.
  fj::set_warning_handler([&](std::string_view) {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  const auto t0 = std::chrono::steady_clock::now();
  fj::set_warning_handler([](std::string_view) {});
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  replaced = true;
  for (int k = 0; k < 200; ++k) fj::Graph::parse(unused);
  stop = true;
  for (auto& th : threads) th.join();
  CHECK(late.load() == 0);
  std::string inner;
  fj::set_warning_handler([&](std::string_view) {
    try {
      fj::set_warning_handler({});
    } catch (const fj::Error& e) {
      inner = e.what();
    }
  });
  fj::Graph::parse(unused);
  fj::set_warning_handler({});
  CHECK(inner == "set_warning_handler called from inside a warning handler");
}

TEST_CASE("a launch from a warning handler, during a launch that compiles for new dims, leaves that launch intact") {
  fj::Options o = cpu_options();
  o.device = 1;  // warns at every compile on the CPU path, also of a specialization mid-launch
  o.disk_cache = false;
  const fj::Program p = fj::Program::compile(
      fj::Graph::parse("graph s1\ndim S = 8\ndim T = 8\ndim D = 4\ninput a : f32[S, D]\ninput b : f32[T, D]\n"
                       "ya = a * 2\ny = ya + b\noutput y\noutput ya\n"),
      o);
  const fj::Program q = fj::Program::compile(fj::Graph::parse("graph q\ndim N = 3\ninput x : f32[N]\ny = x + 100\noutput y\n"),
                                             cpu_options());
  std::vector<float> qx(3, 1.0f), qy(3, 0.0f);
  const std::vector<int64_t> qs = {3};
  int inner = 0;
  fj::set_warning_handler([&](std::string_view) {
    q.launch({fj::TensorRef(qx.data(), fj::DType::F32, qs)}, {fj::TensorRef(qy.data(), fj::DType::F32, qs)});
    ++inner;
  });
  std::vector<float> a(4, 1.0f), b(20, 10.0f), y(20, -1.0f), ya(4, -1.0f);
  const std::vector<int64_t> as = {1, 4}, bs = {5, 4};  // S = 1 meets T = 5: a specialization
  p.launch({fj::TensorRef(a.data(), fj::DType::F32, as), fj::TensorRef(b.data(), fj::DType::F32, bs)},
           {fj::TensorRef(y.data(), fj::DType::F32, bs), fj::TensorRef(ya.data(), fj::DType::F32, as)});
  fj::set_warning_handler({});
  CHECK(inner >= 1);
  CHECK(qy == std::vector<float>(3, 101.0f));
  CHECK(y == std::vector<float>(20, 12.0f));
  CHECK(ya == std::vector<float>(4, 2.0f));
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

TEST_CASE("run_graph in fast-math mode: elements that differ in the sign of zero alone are said so, not \"0 ulp\"") {
  fj::RunOptions ro;
  ro.options.backend = fj::Backend::Cpu;
  ro.options.fast_math = true;  // x*0 -> 0: +0 where strict gives -0 for a negative x
  const fj::RunReport r = fj::run_graph(fj::Graph::parse("input x : f32[64]\nw = x * 0\noutput w\n", "zero.txt"), ro);
  CHECK(r.ok());
  bool said = false;
  for (const fj::CheckReport& c : r.checks) {
    CAPTURE(c.detail);
    CHECK(c.detail.find("at most 0 ulp") == std::string::npos);
    said = said || c.detail.find("differ only in the sign of a zero or a NaN against a number; informational") !=
                       std::string::npos;
  }
  CHECK(said);
}

TEST_CASE("a Scalar from any integer type; an invalid kind or device ordinal is a user error") {
  fj::GraphBuilder b("count");
  fj::Value x = b.input("x", fj::DType::I64, {3});
  fj::Value n = b.param("n", fj::DType::I64, 5LL);  // long long (was ambiguous: int or int64_t)
  b.output("y", x + n);
  fj::Program p = fj::Program::compile(b.build(), cpu_options());
  fj::HostTensor tx(fj::DType::I64, {3});
  const std::vector<uint8_t> sizes(7);
  CHECK(p.run({tx}, {{"n", sizes.size()}})[0].values<int64_t>()[1] == 7);  // a size_t
  CHECK(p.run({tx})[0].values<int64_t>()[0] == 5);
  CHECK(fj::Scalar(uint16_t{65535}).i == 65535);
  CHECK(fj::Scalar(-3LL).kind == fj::Scalar::Kind::Int);
  // Past INT64_MAX an unsigned value would wrap: refused as a builder Value of one is.
  CHECK_THROWS_WITH_AS((void)fj::Scalar(std::numeric_limits<uint64_t>::max()), doctest::Contains("is past INT64_MAX"),
                       fj::Error);
  CHECK(fj::Scalar(uint64_t{INT64_MAX}).i == INT64_MAX);
  static_assert(!std::is_constructible_v<fj::Scalar, char>, "'a' is no value (it would be 97)");
  static_assert(std::is_constructible_v<fj::Scalar, signed char> && std::is_constructible_v<fj::Scalar, size_t>);
  // A builder literal likewise: "0.5" was true, 'a' 97 (a tester's where(c, x, "0.5")).
  static_assert(!std::is_constructible_v<fj::Value, const char*> && !std::is_constructible_v<fj::Value, char>);
  static_assert(!std::is_constructible_v<fj::Value, char32_t> && std::is_constructible_v<fj::Value, uint8_t>);
  static_assert(!std::is_constructible_v<fj::Scalar, wchar_t> && !std::is_constructible_v<fj::Scalar, const char*>);
  static_assert(!std::is_constructible_v<fj::Value, const wchar_t*> && !std::is_constructible_v<fj::Value, char8_t*>);
  static_assert(!std::is_constructible_v<fj::Scalar, const char16_t*> && !std::is_constructible_v<fj::Value, int*>);
  static_assert(!std::is_convertible_v<char16_t, fj::Value> && std::is_convertible_v<signed char, fj::Value>);
  static_assert(ReduceTakesKeepdim<bool> && !ReduceTakesKeepdim<int> && !ReduceTakesKeepdim<double>);
  // -INFINITY in correction's place, meant as amax's initial, would be read as a correction.
  enum Unscoped { kOne = 1 };
  static_assert(ReduceTakesCorrection<int> && ReduceTakesCorrection<size_t> && ReduceTakesCorrection<std::nullopt_t> &&
                ReduceTakesCorrection<std::optional<int64_t>> && ReduceTakesCorrection<std::optional<int>> &&
                ReduceTakesCorrection<std::optional<size_t>> && ReduceTakesCorrection<Unscoped> &&
                ReduceTakesCorrection<int8_t> && !ReduceTakesCorrection<double> && !ReduceTakesCorrection<float> &&
                !ReduceTakesCorrection<bool> && !ReduceTakesCorrection<char> && !ReduceTakesCorrection<char8_t> &&
                !ReduceTakesCorrection<std::optional<double>> && !ReduceTakesCorrection<std::optional<bool>>);
  // An unscoped enum's constant is an integer literal, as Scalar and Correction take it (a hostile
  // tester's find: it became a float literal, so an i32 x * kOne was f32); a scoped one and an
  // __int128 are none (the latter became a float literal too).
  {
    fj::GraphBuilder eb("enums");
    const fj::Value xi = eb.input("x", fj::DType::I32, {2});
    CHECK(eb.info(xi * kOne).dtype == fj::DType::I32);
    enum Wide : uint64_t { kWide = uint64_t{1} << 40 };
    CHECK(fj::Value(kWide).literal()->kind == fj::Scalar::Kind::Int);
    CHECK(fj::Value(kWide).literal()->i == int64_t{1} << 40);
    // ... and a size: {kFour, 8} was std::vector's (count, value) constructor, [8, 8, 8, 8].
    enum Sizes { kFour = 4 };
    CHECK(eb.info(eb.input("y", fj::DType::I32, {kFour, 8})).shape == std::vector<int64_t>{4, 8});
    CHECK(eb.info(eb.input("z", fj::DType::I32, {kFour})).shape == std::vector<int64_t>{4});
  }
  {  // a default out of the param's dtype names the param (it read "literal 300 ... write cast(300, u8)")
    fj::GraphBuilder pb("defaults");
    CHECK_THROWS_WITH_AS((void)pb.param("pu", fj::DType::U8, 300),
                         "the default 300 of param 'pu' does not fit in u8 (range 0 to 255); give a default in range, or "
                         "the param a wider dtype",
                         fj::Error);
    CHECK_THROWS_WITH_AS((void)pb.param("pf", fj::DType::F16, 1e-30),
                         doctest::Contains("the default 1e-30 of param 'pf' does not fit in f16 (it would round to 0); "
                                           "give the param a wider dtype such as f32"),
                         fj::Error);
  }
  enum class Scoped { kA = 1 };
  static_assert(!std::is_constructible_v<fj::Value, Scoped> && std::is_constructible_v<fj::Value, Unscoped>);
#ifdef __SIZEOF_INT128__
  static_assert(!std::is_constructible_v<fj::Value, fj::detail::Int128> &&
                !std::is_constructible_v<fj::Value, fj::detail::UInt128>);
#endif
  static_assert(std::is_convertible_v<long double, fj::Value> && std::is_convertible_v<float, fj::Value>);
  CHECK(fj::Value(0.5L).literal()->f == 0.5);
  CHECK(fj::Correction(std::optional<unsigned>(3)).value == 3);
  CHECK_FALSE(fj::Correction(std::optional<int>()).value.has_value());
  CHECK_THROWS_WITH_AS(fj::Correction(uint64_t{1} << 63), "correction=9223372036854775808 is out of range (it is at most 2^62)",
                       fj::Error);
  static_assert(std::is_member_function_pointer_v<decltype(&fj::GraphBuilder::reduce)>);  // one function still
  // A function or member pointer converted to bool too.
  static_assert(!std::is_constructible_v<fj::Value, void (*)()> && !std::is_constructible_v<fj::Scalar, void (*)()>);
  static_assert(!std::is_constructible_v<fj::Value, int fj::Axes::*> && std::is_constructible_v<fj::Value, bool>);
  fj::Scalar bad;
  bad.kind = static_cast<fj::Scalar::Kind>(7);
  CHECK_THROWS_WITH_AS(p.run({tx}, {{"n", bad}}), doctest::Contains("a Scalar of kind 7"), fj::Error);
  try {
    (void)b.param("m", fj::DType::I64, bad);
    FAIL("expected an error");
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
  }
  fj::HostTensor ty(fj::DType::I64, {3});
  fj::TensorRef in = tx, out = ty;
  in.device = -5;
  CHECK_THROWS_WITH_AS(p.launch({in}, {out}), doctest::Contains("input 'x' names CUDA device -5"), fj::Error);
}

TEST_CASE("params by name or by position, in run and in RunOptions") {
  fj::GraphBuilder b("axpby");
  fj::Value x = b.input("x", fj::DType::F32, {3});
  fj::Value y = b.input("y", fj::DType::F32, {3});
  fj::Value alpha = b.param("alpha", fj::DType::F32, 2.0);
  fj::Value beta = b.param("beta", fj::DType::F32, 1.0);
  b.output("z", alpha * x + beta * y);
  fj::Program p = fj::Program::compile(b.build(), cpu_options());
  const fj::HostTensor tx = f32_tensor({3}, {1, 2, 3}), ty = f32_tensor({3}, {10, 20, 30});
  CHECK(as_f32(p.run({tx, ty})[0]) == std::vector<float>{12, 24, 36});                        // defaults
  CHECK(as_f32(p.run({tx, ty}, {1e-5, 0})[0])[2] == 3e-5f);                                  // positional
  CHECK(as_f32(p.run({tx, ty}, {{"beta", 0.5}})[0]) == std::vector<float>{7, 14, 21});        // named subset
  CHECK(as_f32(p.run({tx, ty}, {{"beta", 0.5}, {"alpha", 1}})[0]) == std::vector<float>{6, 12, 18});
  fj::Params later;
  later.set("alpha", 5).set("alpha", 3);  // a name given twice takes its last value
  CHECK(as_f32(p.run({tx, ty}, later)[0]) == std::vector<float>{13, 26, 39});
  const std::vector<fj::Scalar> values = {3.0, 0};
  CHECK(as_f32(p.run({tx, ty}, values)[0]) == std::vector<float>{3, 6, 9});

  auto message = [&](const fj::Params& params) {
    try {
      p.run({tx, ty}, params);
    } catch (const fj::Error& e) {
      CHECK(e.kind() == fj::ErrorKind::User);
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(message({{"gamma", 1}}) == "params: the graph has no param named 'gamma' (its params: alpha, beta)");
  CHECK(message({1.0}) == "params: the graph has 2 param(s), got 1 positional value(s)");
  fj::Params both = {1.0, 2.0};
  both.set("alpha", 1);
  CHECK(message(both) == "params: give param values by name or by position, not both");
  // A value that does not fit the param's dtype is refused as a default would be (it overflowed to inf).
  CHECK(message({{"alpha", 1e39}}) ==
        "params alpha=1e+39: does not fit f32, the dtype of param 'alpha' (it would overflow to inf; a default of 1e+39 "
        "is refused too)");

  fj::RunOptions ro;
  ro.options = cpu_options();
  ro.params = {{"alpha", 3}};
  fj::RunReport r = fj::run_graph(p.graph(), ro);
  CHECK(r.ok());
  REQUIRE(r.params.size() == 2);
  CHECK((r.params[0].first == "alpha" && r.params[0].second.kind == fj::Scalar::Kind::Float && r.params[0].second.f == 3.0));
  CHECK((r.params[1].first == "beta" && r.params[1].second.f == 1.0));
  ro.params = {{"gamma", 3}};
  CHECK_THROWS_WITH_AS(fj::run_graph(p.graph(), ro), "params: the graph has no param named 'gamma' (its params: alpha, beta)",
                       fj::Error);
}

TEST_CASE("f16 and bf16 host conversions round to nearest even, bit for bit with the kernels") {
  CHECK(fj::f16_from_float(1.0f) == 0x3C00);
  CHECK(fj::f16_from_float(1.0f + 0x1p-11f) == 0x3C00);       // a tie: to the even neighbour, 1
  CHECK(fj::f16_from_float(1.0f + 3 * 0x1p-11f) == 0x3C02);   // a tie: to the even neighbour, 1 + 2^-9
  CHECK(fj::f16_from_float(65519.0f) == 0x7BFF);              // below the halfway point to 65536
  CHECK(fj::f16_from_float(65520.0f) == 0x7C00);              // the tie rounds to even: infinity
  CHECK(fj::f16_from_float(0x1p-24f) == 0x0001);              // the smallest subnormal
  CHECK(fj::f16_from_float(0x1p-25f) == 0x0000);              // half of it: a tie, to even (zero)
  CHECK(fj::f16_from_float(-0.0f) == 0x8000);
  CHECK(fj::f16_from_float(-INFINITY) == 0xFC00);
  CHECK((fj::f16_from_float(NAN) & 0x7C00) == 0x7C00);
  CHECK((fj::f16_from_float(NAN) & 0x03FF) != 0);
  CHECK(fj::bf16_from_float(1.0f + 0x1p-8f) == 0x3F80);       // a tie, to even
  CHECK(fj::bf16_from_float(1.0f + 3 * 0x1p-8f) == 0x3F82);
  CHECK(fj::bf16_from_float(3.4028235e38f) == 0x7F80);        // the largest float rounds up to infinity
  CHECK(fj::bf16_from_float(-0.0f) == 0x8000);
  CHECK(fj::bf16_to_float(0x0001) == 0x1p-133f);              // subnormals are exact
  // Every bit pattern converts to float exactly and back unchanged (NaNs stay NaN).
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t b16 = static_cast<uint16_t>(bits);
    const float h = fj::f16_to_float(b16), bf = fj::bf16_to_float(b16);
    if (std::isnan(h)) CHECK(std::isnan(fj::f16_to_float(fj::f16_from_float(h))));
    else REQUIRE(fj::f16_from_float(h) == b16);
    if (std::isnan(bf)) CHECK(std::isnan(fj::bf16_to_float(fj::bf16_from_float(bf))));
    else REQUIRE(fj::bf16_from_float(bf) == b16);
  }
  // HostTensor conversions use the same rounding, and a bf16 kernel on the CPU agrees with them.
  const std::vector<float> v = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -0.0f, 1e-40f, 3.4028235e38f, NAN};
  const fj::HostTensor t = fj::HostTensor::from_floats(fj::DType::BF16, {6}, v);
  for (size_t i = 0; i < v.size(); ++i) CHECK(t.values<uint16_t>()[i] == fj::bf16_from_float(v[i]));
  const std::vector<float> back = t.to_floats();
  CHECK(back[0] == 1.0f);
  CHECK(std::signbit(back[2]));
  CHECK(std::isinf(back[4]));
  CHECK(std::isnan(back[5]));
  fj::GraphBuilder b("round");
  b.output("y", b.cast(b.input("x", fj::DType::F32, {6}), fj::DType::BF16));
  const fj::HostTensor y = fj::Program::compile(b.build(), cpu_options()).run({f32_tensor({6}, v)})[0];
  CHECK(y.dtype() == fj::DType::BF16);
  for (size_t i = 0; i < v.size(); ++i) CHECK(y.values<uint16_t>()[i] == t.values<uint16_t>()[i]);
  CHECK_THROWS_AS(t.values<float>(), fj::Error);  // 4-byte elements of a 2-byte dtype
  CHECK_THROWS_AS(fj::HostTensor::from_floats(fj::DType::F16, {2, 2}, v), fj::Error);  // 6 values for 4 elements
}

TEST_CASE("host tensors carry their shapes: dims come from the inputs, checked against the graph") {
  fj::Program p = fj::Program::compile(build_swiglu(), cpu_options());  // compiled with T = 4
  std::vector<float> g(2 * 8), u(2 * 8, 2.0f);
  for (size_t k = 0; k < g.size(); ++k) g[k] = static_cast<float>(k) - 8.0f;
  // T = 2 without saying so: the shapes are enough; the same kernels run.
  const std::vector<fj::HostTensor> out = p.run({f32_tensor({2, 8}, g), f32_tensor({2, 8}, u)});
  REQUIRE(out.size() == 1);
  CHECK(out[0].shape() == std::vector<int64_t>{2, 8});
  const float want = (g[3] / (1.0f + std::exp(-g[3]))) * 2.0f;
  CHECK(out[0].to_floats()[3] == want);
  // T = 0: an empty run is no error.
  CHECK(p.run({f32_tensor({0, 8}, {}), f32_tensor({0, 8}, {})})[0].shape() == std::vector<int64_t>{0, 8});
  // A TensorView over a caller's buffer needs no copy.
  const int64_t shape[2] = {2, 8};
  const fj::TensorView view(fj::DType::F32, shape, std::as_bytes(std::span<const float>(g)));
  const fj::TensorView views[2] = {view, view};
  CHECK(p.run(std::span<const fj::TensorView>(views))[0].shape() == std::vector<int64_t>{2, 8});

  auto message = [&](std::initializer_list<fj::TensorView> inputs) {
    try {
      p.run(inputs);
    } catch (const fj::Error& e) {
      CHECK(e.kind() == fj::ErrorKind::User);
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const fj::HostTensor a28 = f32_tensor({2, 8}, g), a38(fj::DType::F32, {3, 8}), a82(fj::DType::F32, {8, 2});
  CHECK(message({a28, a38}) ==
        "input 'up': expected f32[T=2, 8] (T = 2 from input 'gate', which is f32[2, 8]), got f32[3, 8]");
  CHECK(message({a82, a82}) == "input 'gate': expected f32[T, 8], got f32[8, 2]; axis 1 has the fixed size 8 in the "
                                "graph: name it with a dim (`b.dim(\"N\", 8)` on the GraphBuilder, then N in the input's "
                                "shape) to let it follow the tensors");
  CHECK(message({a28, fj::HostTensor(fj::DType::BF16, {2, 8})}) ==
        "input 'up': expected f32[T=2, 8], got bf16[2, 8]; a launch converts no dtype: convert the tensor to f32 first "
        "(a HostTensor t: HostTensor::from_floats(DType::F32, t.shape(), t.to_floats()))");
  // No recipe through f32 for an integer input (from_floats would round an i64 past 2^24).
  const fj::Program ip = fj::Program::compile(fj::Graph::parse("input k : i64[4]\ny = k + 1\noutput y\n"), cpu_options());
  CHECK_THROWS_WITH_AS(ip.run({fj::HostTensor(fj::DType::I32, {4})}),
                       "input 'k': expected i64[4], got i32[4]; a launch converts no dtype: convert the tensor to i64 first",
                       fj::Error);
  CHECK(message({a28, fj::HostTensor(fj::DType::F32, {2, 2, 8})}) ==
        "input 'up': expected f32[T=2, 8], got f32[2, 2, 8]; a graph input's rank is fixed (2 in the graph, 3 given)");
  // A mask of rank 1 for a [1, 1, S] input (NumPy would broadcast it): the reshape that fits.
  const fj::Program mp = fj::Program::compile(
      fj::Graph::parse("dim S = 5\ninput s : f32[2, S]\ninput m : f32[1, 1, S]\ny = s + m\noutput y\n"), cpu_options());
  CHECK_THROWS_WITH_AS(mp.run({fj::HostTensor(fj::DType::F32, {2, 5}), fj::HostTensor(fj::DType::F32, {5})}),
                       "input 'm': expected f32[1, 1, S=5], got f32[5]; a graph input's rank is fixed (3 in the graph, 1 "
                       "given): reshape it to [1, 1, 5]",
                       fj::Error);
  CHECK(message({a28}) == "expected 2 input tensor(s) (gate, up), got 1");
  // A negative size says so (a hostile tester's find: the message did not say what was wrong).
  const int64_t negative[2] = {-2, 8};
  const fj::TensorView neg(fj::DType::F32, negative, std::as_bytes(std::span<const float>(g)));
  CHECK(message({neg, a28}) == "input 'gate': expected f32[T, 8], got f32[-2, 8] (a negative size: sizes are 0 or more)");
  // A moved-from HostTensor (shape [], no data) says so.
  fj::HostTensor moved = a28, taker = std::move(moved);
  CHECK(message({moved, a28}) == "input 'gate': expected f32[T, 8], got f32[]; a graph input's rank is fixed (2 in the "
                                 "graph, 0 given); it has no data (a moved-from HostTensor?)");  // NOLINT(bugprone-use-after-move)
  // Two inputs in each other's place say so; a tensor that would fit another input alone does not.
  const fj::Program rp = fj::Program::compile(
      fj::Graph::parse("dim T = 2\ndim D = 8\ninput x : bf16[T, D]\ninput w : bf16[D]\ny = x * w\noutput y\n"), cpu_options());
  const fj::HostTensor x28(fj::DType::BF16, {2, 8}), w8(fj::DType::BF16, {8});
  CHECK_THROWS_WITH_AS(rp.run({w8, x28}),
                       "input 'x': expected bf16[T, D], got bf16[8]; the tensors of inputs 'x' and 'w' fit each other's "
                       "place: swapped? (the graph's order: x, w)",
                       fj::Error);
  // Nor where the exchange would still conflict: x and z bind T differently.
  const fj::Program rz = fj::Program::compile(
      fj::Graph::parse("dim T = 2\ndim D = 8\ninput x : bf16[T, D]\ninput w : bf16[D]\ninput z : bf16[T, D]\n"
                       "y = x * w + z\noutput y\n"),
      cpu_options());
  CHECK_THROWS_WITH_AS(rz.run({w8, x28, fj::HostTensor(fj::DType::BF16, {3, 8})}),
                       "input 'x': expected bf16[T, D], got bf16[8]; a graph input's rank is fixed (2 in the graph, 1 given)",
                       fj::Error);
  CHECK_THROWS_WITH_AS(rz.run({w8, x28, x28}), doctest::Contains("swapped?"), fj::Error);
  // Two pairs swapped: the first pair is named (the other inputs wrong alone do not hide it).
  const fj::Program two = fj::Program::compile(
      fj::Graph::parse("input a : f32[3]\ninput b : f32[4]\ninput c : i32[5]\ninput d : i32[6]\n"
                       "y = sum(a) + sum(b) + cast(sum(c) + sum(d), f32)\noutput y\n"),
      cpu_options());
  CHECK_THROWS_WITH_AS(two.run({fj::HostTensor(fj::DType::F32, {4}), fj::HostTensor(fj::DType::F32, {3}),
                                fj::HostTensor(fj::DType::I32, {6}), fj::HostTensor(fj::DType::I32, {5})}),
                       "input 'a': expected f32[3], got f32[4]; the tensors of inputs 'a' and 'b' fit each other's "
                       "place: swapped? (the graph's order: a, b, c, d)",
                       fj::Error);
  // Inputs shifted by one place are no swap: the tensor given for a would fit b's place and d's alike.
  const fj::Program four = fj::Program::compile(
      fj::Graph::parse("input a : f32[3]\ninput b : f32[4]\ninput c : f32[3]\ninput d : f32[4]\n"
                       "y = sum(a) + sum(b) + sum(c) + sum(d)\noutput y\n"),
      cpu_options());
  const fj::HostTensor f3(fj::DType::F32, {3}), f4(fj::DType::F32, {4});
  try {
    four.run({f4, f3, f4, f3});
    FAIL("ran shifted inputs");
  } catch (const fj::Error& e) {
    CHECK(std::string(e.what()).find("swapped") == std::string::npos);
  }
  // An input given right is no party to a swap (a tester's: b's tensor would fit a, but a's fits a).
  const fj::Program ab = fj::Program::compile(
      fj::Graph::parse("dim N = 4\ninput a : f32[N]\ninput b : f32[4]\ny = sum(a) + sum(b)\noutput y\n"), cpu_options());
  CHECK_THROWS_WITH_AS(ab.run({fj::HostTensor(fj::DType::F32, {4}), fj::HostTensor(fj::DType::F32, {5})}),
                       doctest::Contains("input 'b': expected f32[4], got f32[5]; axis 0 has the fixed size 4"), fj::Error);
  try {
    ab.run({fj::HostTensor(fj::DType::F32, {4}), fj::HostTensor(fj::DType::F32, {5})});
  } catch (const fj::Error& e) {
    CHECK(std::string(e.what()).find("swapped") == std::string::npos);
  }
  // Every tensor fits its place alone, but the dims disagree: the one exchange that makes them agree.
  const fj::Program abc = fj::Program::compile(
      fj::Graph::parse("dim N = 4\ndim M = 3\ninput a : f32[N]\ninput b : f32[M, N]\ninput c : f32[M]\n"
                       "y = b * a + sum(c)\noutput y\n"),
      cpu_options());
  const fj::HostTensor f43(fj::DType::F32, {3, 4});
  CHECK_THROWS_WITH_AS(abc.run({f3, f43, f4}),
                       doctest::Contains("; the tensors of inputs 'a' and 'c' exchanged would agree: swapped? (the "
                                         "graph's order: a, b, c)"),
                       fj::Error);
  // Nor where two exchanges would: given [3], [2], [2], [3], exchanging x and w or z and v agrees.
  const fj::Program xyz = fj::Program::compile(
      fj::Graph::parse("dim N = 2\ndim M = 3\ninput x : f32[N]\ninput w : f32[M]\ninput z : f32[N]\n"
                       "input v : f32[M]\ny = sum(x) + sum(w) + sum(z) + sum(v)\noutput y\n"),
      cpu_options());
  const fj::HostTensor f2(fj::DType::F32, {2});
  try {
    xyz.run({f3, f2, f2, f3});
    FAIL("ran conflicting dims");
  } catch (const fj::Error& e) {
    CHECK(std::string(e.what()).find("swapped") == std::string::npos);
  }
  CHECK_THROWS_WITH_AS(rp.run({x28, x28}),
                       "input 'w': expected bf16[D=8], got bf16[2, 8]; a graph input's rank is fixed (1 in the graph, 2 given)",
                       fj::Error);
  const fj::TensorView short_data(fj::DType::F32, shape, a28.data().first(8));
  CHECK(message({a28, short_data}) ==
        "input 'up': f32[2, 8] needs exactly 64 bytes, its data has 8 (a C-contiguous view's data is its elements; "
        "give strides for a view into a larger buffer)");
  // Larger is refused too (a wrong shape shows this way), with a message that says so.
  std::vector<float> big(20, 1.0f);
  const fj::TensorView long_data(fj::DType::F32, shape, std::as_bytes(std::span<const float>(big)));
  CHECK(message({a28, long_data}).find("needs exactly 64 bytes, its data has 80") != std::string::npos);

  // Literal sizes: the message names both shapes.
  fj::GraphBuilder lb("literal");
  lb.output("y", lb.input("a", fj::DType::BF16, {16, 4}) * 2);
  fj::Program lp = fj::Program::compile(lb.build(), cpu_options());
  CHECK_THROWS_WITH_AS(lp.run({fj::HostTensor(fj::DType::BF16, {4, 16})}),
                       "input 'a': expected bf16[16, 4], got bf16[4, 16]; axis 0 has the fixed size 16 in the graph: "
                       "name it with a dim (`b.dim(\"N\", 16)` on the GraphBuilder, then N in the input's shape) to "
                       "let it follow the tensors",  // a built graph: no `dim N = 16` to write (it said so)
                       fj::Error);
  // The name suggested is one the graph does not use (a `dim N` there: M; N and M: K).
  for (const auto& [dims, name] : {std::pair{"dim N = 4\n", "M"}, std::pair{"dim N = 4\ndim M = 2\n", "K"}}) {
    const fj::Graph ng = fj::Graph::parse(std::string(dims) + "input x : f32[N, 8]\ny = softmax(x, -1)\noutput y\n");
    const fj::Program np = fj::Program::compile(ng, cpu_options());
    CHECK_THROWS_WITH_AS(np.run({fj::HostTensor(fj::DType::F32, {4, 9})}),
                         ("input 'x': expected f32[N, 8], got f32[4, 9]; axis 1 has the fixed size 8 in the graph: "
                          "name it with a dim (`dim " + std::string(name) + " = 8`, then " + name +
                          " in the input's shape) to let it follow the tensors").c_str(),
                         fj::Error);
  }
}

TEST_CASE("Options::arch is checked on the CPU path too; messages name the API field") {
  std::vector<std::string> warnings;
  fj::set_warning_handler([&](std::string_view m) { warnings.emplace_back(m); });
  fj::Options o = cpu_options();
  o.arch = "sm_9000x";
  try {
    fj::Program::compile(build_swiglu(), o);
    FAIL("an invalid arch compiled");
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK(std::string(e.what()).rfind("Options::arch: invalid GPU architecture 'sm_9000x'", 0) == 0);
  }
  // compile_to_dir's arch is its own argument, not an Options field.
  CHECK_THROWS_WITH_AS(fj::compile_to_dir(build_swiglu(), "sm_9", "unused-folder"),
                       doctest::Contains("compile_to_dir's arch argument: invalid GPU architecture 'sm_9'"), fj::Error);
  o.arch = "sm_90";
  o.nvrtc_options = {"--maxrregcount=32"};
  o.device = 3;
  fj::Program::compile(build_swiglu(), o);
  fj::set_warning_handler({});
  REQUIRE(warnings.size() == 3);
  CHECK(warnings[0] == "Options::device 3 has no effect on the CPU path (no GPU is used)");
  CHECK(warnings[1] == "Options::arch sm_90 has no effect on the CPU path (no GPU is used)");
  CHECK(warnings[2] == "Options::nvrtc_options (--maxrregcount=32) has no effect on the CPU path (no GPU is used)");
  o.device = 0;
  // The `fusejit` command's messages name its flags instead.
  o.message_style = fj::MessageStyle::CommandLine;
  o.arch = "sm_9000x";
  CHECK_THROWS_WITH_AS(fj::Program::compile(build_swiglu(), o),
                       doctest::Contains("--arch: invalid GPU architecture 'sm_9000x'"), fj::Error);
}

TEST_CASE("measure: a kernel with nothing to compute is neither launched nor counted in the bytes") {
  const fj::Graph g = fj::Graph::parse("dim S = 4\ndim C = 3\ninput a : f32[S, C]\ninput b : f32[S, C]\nh = a * b\n"
                                       "r = sum(h, 0, keepdim)\ny = h - r\nm = amax(h, -1, initial=-inf)\noutput y, m\n");
  fj::Program p = fj::Program::compile(g, cpu_options());
  const fj::HostTensor empty(fj::DType::F32, {0, 3});
  const fj::TensorView views[2] = {empty, empty};
  fj::MeasureOptions mo;
  mo.repeats = 1;
  const fj::Measurement f = p.measure(views, {}, fj::PlanKind::Fused, mo);
  CHECK(f.kernels == 0);  // y and m have no elements; r, inside the kernel that writes y, is not needed
  CHECK(f.bytes == 0);
  const fj::Measurement u = p.measure(views, {}, fj::PlanKind::Unfused, mo);
  CHECK(u.kernels == 1);  // the unfused sum writes r: 3 zeros
  CHECK(u.bytes == 12);
}

TEST_CASE("measure: a checked run with poisoned outputs, timing, and the unfused intermediates") {
  fj::GraphBuilder b("chain");
  fj::Value x = b.input("x", fj::DType::F32, {4});
  fj::Value t = b.op("exp", {x});
  b.output("y", t * 3);
  fj::Program p = fj::Program::compile(b.build(), cpu_options());
  const fj::HostTensor in = f32_tensor({4}, {0, 1, -1, NAN});
  const fj::TensorView views[1] = {in};
  fj::MeasureOptions mo;
  mo.repeats = 3;
  mo.keep_intermediates = true;
  const fj::Measurement u = p.measure(views, {}, fj::PlanKind::Unfused, mo);
  CHECK(u.kernels == 2);
  CHECK(u.bytes == 4 * 16);  // exp reads and writes 16 bytes, mul the same
  CHECK(u.median_ms >= 0);
  CHECK(u.min_ms <= u.median_ms);
  CHECK(u.median_ms <= u.max_ms);
  REQUIRE(u.outputs.size() == 1);
  CHECK(u.outputs[0] == p.run({in})[0]);
  // exp's value: node id N, which KernelInfo::ops names %N (it has no name in the graph).
  REQUIRE(u.intermediates.size() == 1);
  const auto& [id, value] = u.intermediates[0];
  CHECK(p.kernels(fj::PlanKind::Unfused)[0].ops[0] == "%" + std::to_string(id) + " = exp(x)");
  CHECK(value.to_floats()[1] == std::exp(1.0f));
  const fj::Measurement f = p.measure({in}, {}, fj::PlanKind::Fused, mo);
  CHECK(f.kernels == 1);
  CHECK(f.bytes == 32);
  CHECK(f.intermediates.empty());  // the fused plan materialises nothing else
  CHECK(f.outputs[0] == u.outputs[0]);
  // No timed run, or a negative warmup, is an error, not a median of nothing.
  for (const auto& [warmup, repeats] : {std::pair{-7, 20}, std::pair{3, 0}, std::pair{0, -5}}) {
    fj::MeasureOptions bad;
    bad.warmup = warmup;
    bad.repeats = repeats;
    CHECK_THROWS_WITH_AS(p.measure({in}, {}, fj::PlanKind::Fused, bad),
                         doctest::Contains("warmup must be >= 0 and repeats >= 1"), fj::Error);
  }
}

TEST_CASE("Options::row_split: forced splits launch once per phase and give the same bits") {
  const fj::Graph g = fj::Graph::parse("input x : f32[3, 20000]\ny = softmax(x, -1)\nm = amax(x, -1)\noutput y, m\n");
  std::vector<float> v(60000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 1000) / 97.0f - 5.0f;
  const fj::HostTensor in = fj::HostTensor::from_floats(fj::DType::F32, {3, 20000}, v);
  const fj::TensorView views[1] = {in};
  fj::MeasureOptions mo;
  mo.repeats = 1;
  mo.warmup = 0;
  std::vector<fj::HostTensor> want;
  for (int64_t split : {0, 1, 2, 3, 100}) {  // 0: the rule (3 rows of 20,000 do not split); 100: min(100, 3 chunks)
    CAPTURE(split);
    fj::Options o = cpu_options();
    o.row_split = split;
    fj::Program p = fj::Program::compile(g, o);
    const fj::Measurement f = p.measure(views, {}, fj::PlanKind::Fused, mo);
    CHECK(f.kernels == (split >= 2 ? 5 : 1));  // softmax: 2 levels and element outputs
    if (want.empty()) want = f.outputs;
    CHECK(f.outputs == want);
    CHECK(p.measure(views, {}, fj::PlanKind::Unfused, mo).outputs == want);
  }
  fj::Options bad = cpu_options();
  bad.row_split = -1;
  try {
    fj::Program::compile(g, bad);
    FAIL("expected an error");
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK(std::string(e.what()).find("Options::row_split -1: must be >= 0") != std::string::npos);
  }
}

TEST_CASE("Options::row_cache: the row on chip or re-read from memory gives the same bits") {
  // RMSNorm over rows of 4096 f32 and residual-add + RMSNorm (two cached inputs, 2 x 16 KiB).
  const char* texts[] = {
      "input x : f32[5, 4096]\ninput w : f32[4096]\ny = x * rsqrt(mean(x * x, -1, keepdim) + 1e-6) * w\noutput y\n",
      "input x : f32[3, 4096]\ninput r : f32[3, 4096]\nh = x + r\ny = h * rsqrt(mean(h * h, -1, keepdim) + 1e-6)\n"
      "output y, h\n",
  };
  for (const char* text : texts) {
    CAPTURE(text);
    const fj::Graph g = fj::Graph::parse(text);
    std::vector<fj::HostTensor> ins;
    for (size_t k = 0; k < g.inputs().size(); ++k) {
      const std::vector<int64_t> shape = g.inputs()[k].shape;
      std::vector<float> v(static_cast<size_t>(g.inputs()[k].elements()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919 + k * 131) % 1000) / 97.0f - 5.0f;
      ins.push_back(fj::HostTensor::from_floats(fj::DType::F32, shape, v));
    }
    std::vector<fj::TensorView> views(ins.begin(), ins.end());
    fj::MeasureOptions mo;
    mo.repeats = 1;
    mo.warmup = 0;
    std::vector<fj::HostTensor> want;
    for (bool cache : {true, false}) {
      CAPTURE(cache);
      fj::Options o = cpu_options();
      o.row_cache = cache;
      fj::Program p = fj::Program::compile(g, o);
      const fj::Measurement f = p.measure(views, {}, fj::PlanKind::Fused, mo);
      CHECK(f.kernels == 1);
      if (want.empty()) want = f.outputs;
      CHECK(f.outputs == want);
      CHECK(p.measure(views, {}, fj::PlanKind::Unfused, mo).outputs == want);
    }
  }
}

TEST_CASE("HostTensor: aligned storage, deep copies, empty after a move") {
  fj::HostTensor a = f32_tensor({2, 2}, {1, 2, 3, 4});
  CHECK(reinterpret_cast<uintptr_t>(a.data().data()) % 64 == 0);
  CHECK(a.elements() == 4);
  CHECK(a.bytes() == 16);
  fj::HostTensor copy = a;
  a.values<float>()[0] = -1;
  CHECK(copy.to_floats()[0] == 1);  // the copy has its own data
  CHECK(copy != a);
  fj::HostTensor moved = std::move(a);
  CHECK(moved.to_floats()[0] == -1);
  CHECK(a.bytes() == 0);  // NOLINT(bugprone-use-after-move): documented state
  CHECK(a.data().empty());
  const fj::HostTensor empty(fj::DType::I64, {0, 3}), scalar(fj::DType::F64, {});
  CHECK(empty.bytes() == 0);
  CHECK(empty.data().data() != nullptr);  // a kernel argument must be an address, even for 0 bytes
  CHECK(scalar.elements() == 1);
  CHECK_THROWS_AS(fj::HostTensor(fj::DType::F32, {-1}), fj::Error);
  CHECK_THROWS_AS(fj::HostTensor(fj::DType::F32, {int64_t{1} << 62, 8}), fj::Error);  // the byte size overflows
  // A braced shape of mixed integer types (a size_t with an int narrowed, a compile error).
  const size_t rows = 3;
  const uint32_t cols = 2;
  const fj::HostTensor mixed(fj::DType::F32, {rows, 4, cols});
  CHECK(mixed.shape() == std::vector<int64_t>{3, 4, 2});
  const std::vector<float> six{1, 2, 3, 4, 5, 6};
  CHECK(fj::HostTensor::from_floats(fj::DType::F16, {rows, cols}, six).shape() == std::vector<int64_t>{3, 2});
  CHECK_THROWS_WITH_AS(fj::HostTensor(fj::DType::F32, {size_t(-1)}), doctest::Contains("negative"), fj::Error);
  const std::vector<int64_t> shape{2, 5};
  CHECK(fj::HostTensor(fj::DType::I8, shape).shape() == shape);  // the vector form as before
}

// A new user's finds: a Value kept past its builder crashed (it was read through a dangling
// pointer); two inputs of one shape could only be given by position.
TEST_CASE("a Value used after its GraphBuilder is gone is a user error, also where a new builder took its address") {
  const std::string dead = "a value of a GraphBuilder that no longer exists";
  fj::Value leaked;
  {
    fj::GraphBuilder b1;
    leaked = b1.op("exp", b1.input("a", fj::DType::F32, {4}));
  }
  CHECK_THROWS_WITH_AS((void)(leaked * 3.0), doctest::Contains(dead.c_str()), fj::Error);
  CHECK_THROWS_WITH_AS((void)(-leaked), doctest::Contains(dead.c_str()), fj::Error);
  fj::GraphBuilder b2;
  const fj::Value c = b2.input("c", fj::DType::F32, {4});
  CHECK_THROWS_WITH_AS((void)(leaked + c), doctest::Contains(dead.c_str()), fj::Error);
  CHECK_THROWS_WITH_AS((void)(c + leaked), doctest::Contains(dead.c_str()), fj::Error);
  CHECK_THROWS_WITH_AS(b2.op("exp", leaked), doctest::Contains(dead.c_str()), fj::Error);
  const fj::Value other = fj::GraphBuilder().input("o", fj::DType::F32, {4});  // its builder is gone too
  CHECK_THROWS_WITH_AS(b2.op("exp", other), doctest::Contains(dead.c_str()), fj::Error);
  fj::GraphBuilder b3;
  CHECK_THROWS_WITH_AS(b2.op("exp", b3.input("t", fj::DType::F32, {4})), "value belongs to another GraphBuilder",
                       fj::Error);
  // A DimRef of a builder gone: refused, also where a new builder's state took its address.
  fj::DimRef stale;
  {
    fj::GraphBuilder b4;
    stale = b4.dim("T", 4);
  }
  fj::GraphBuilder b5;
  (void)b5.dim("N", 8);
  CHECK_THROWS_WITH_AS(b5.input("x", fj::DType::F32, {stale}), doctest::Contains("a DimRef this builder's dim() did not"),
                       fj::Error);
  // The same storage: a builder made where the old one was has its address; the old value's node
  // id names a node of the new graph, which it must not reach.
  std::optional<fj::GraphBuilder> slot;
  slot.emplace();
  const fj::Value old = slot->op("exp", slot->input("a", fj::DType::F32, {4}));
  slot.reset();
  slot.emplace();
  const fj::Value a = slot->input("a", fj::DType::F32, {4});
  (void)slot->op("neg", a);  // the new graph has a node of old's id too
  CHECK_THROWS_WITH_AS(slot->op("add", {old, a}), doctest::Contains(dead.c_str()), fj::Error);
  CHECK_THROWS_WITH_AS((void)(old * a), doctest::Contains(dead.c_str()), fj::Error);
  CHECK_THROWS_WITH_AS(slot->output("y", old), doctest::Contains(dead.c_str()), fj::Error);
  slot->output("y", a * 2);  // the builder itself is unharmed
  CHECK(slot->build().op_count() == 2);
}

TEST_CASE("inputs and outputs by name, in the graph's order; unknown, repeated and missing names are errors") {
  const fj::Program p = fj::Program::compile(build_swiglu(), cpu_options());
  const std::vector<float> g{-2, -0.5, 0, 1, 3, -0.0f, 7, 1e-3f}, u{1, 2, 3, 4, 5, 6, 7, 8};
  const fj::HostTensor gate = f32_tensor({1, 8}, g), up = f32_tensor({1, 8}, u);
  const std::vector<fj::TensorView> ordered = p.inputs_by_name<fj::TensorView>({{"up", up}, {"gate", gate}});
  REQUIRE(ordered.size() == 2);
  CHECK(ordered[0].data.data() == gate.data().data());  // gate is declared first
  CHECK(as_f32(p.run(ordered)[0]) == as_f32(p.run({gate, up})[0]));
  CHECK(as_f32(p.run(ordered)[0]) != as_f32(p.run({up, gate})[0]));  // the swap by position differs
  fj::HostTensor y(fj::DType::F32, {1, 8});
  p.launch(p.inputs_by_name<fj::TensorRef>({{"up", up}, {"gate", gate}}), p.outputs_by_name<fj::TensorRef>({{"y", y}}));
  CHECK(as_f32(y) == as_f32(p.run({gate, up})[0]));
  CHECK_THROWS_WITH_AS(p.inputs_by_name<fj::TensorView>({{"gate", gate}, {"upp", up}}),
                       "the graph has no input 'upp' (its inputs: 'gate', 'up')", fj::Error);
  CHECK_THROWS_WITH_AS(p.inputs_by_name<fj::TensorView>({{"gate", gate}, {"gate", up}}), "input 'gate' is given twice",
                       fj::Error);
  CHECK_THROWS_WITH_AS(p.inputs_by_name<fj::TensorView>({{"gate", gate}}),
                       "input 'up' is not given (its inputs: 'gate', 'up')", fj::Error);
  CHECK_THROWS_WITH_AS(p.outputs_by_name<fj::TensorRef>({{"gate", y}}), "the graph has no output 'gate' (its outputs: 'y')",
                       fj::Error);
  const fj::Program q = fj::Program::compile(
      fj::Graph::parse("param s : f32 = 2\ninput x : f32[2]\ny = x * s\noutput y\n"), cpu_options());
  CHECK_THROWS_WITH_AS(q.inputs_by_name<fj::TensorView>({{"s", gate}}),
                       "the graph has no input 's' (its inputs: 'x'; it is a param: give it in the Params argument)",
                       fj::Error);
}

// A shape or strides view of a temporary std::vector dangled (a launch then read freed memory as
// strides): fj::Dims refuses one when compiling.
static_assert(!std::is_constructible_v<fj::Dims, std::vector<int64_t>&&>);
static_assert(!std::is_constructible_v<fj::Dims, std::array<int64_t, 2>&&>);
static_assert(std::is_constructible_v<fj::Dims, std::vector<int64_t>&>);
static_assert(std::is_constructible_v<fj::Dims, std::span<int64_t>>);
static_assert(std::is_constructible_v<fj::Dims, int64_t (&)[3]>);
static_assert(!std::is_constructible_v<fj::TensorRef, void*, fj::DType, std::vector<int64_t>&, std::vector<int64_t>>);
static_assert(!std::is_constructible_v<fj::TensorRef, const void*, fj::DType, std::vector<int64_t>>);
static_assert(!std::is_constructible_v<fj::TensorView, fj::DType, std::vector<int64_t>, std::span<const std::byte>>);
static_assert(std::is_constructible_v<fj::TensorRef, void*, fj::DType, std::vector<int64_t>&, std::vector<int64_t>&>);

TEST_CASE("a byte mask given for a bool input says how the graph can take it") {
  const fj::Program p = fj::Program::compile(
      fj::Graph::parse("input m : bool[4]\ninput x : f32[4]\ny = where(m, x, 0.0)\noutput y\n", "mask.txt"), cpu_options());
  const fj::HostTensor m(fj::DType::U8, {4}), x(fj::DType::F32, {4});
  CHECK_THROWS_WITH_AS(p.run({m, x}),
                       "input 'm': expected bool[4], got u8[4]; for a byte mask, declare the input u8 and use `m != 0` (or "
                       "cast(m, bool)) in the graph",
                       fj::Error);
}

TEST_CASE("extra NVRTC options that loosen float math are refused in strict mode, taken with fast_math") {
  fj::Options o = cpu_options();
  for (const char* opt : {"--fmad=true", "-fmad=true", "--use_fast_math", "-use_fast_math", "--ftz=true",
                          "--prec-div=false", "-prec-sqrt=false"}) {
    CAPTURE(opt);
    o.nvrtc_options = {opt};
    o.fast_math = false;
    CHECK_THROWS_WITH_AS(fj::Program::compile(build_swiglu(), o),
                         doctest::Contains("changes floating-point results, which strict mode keeps bit for bit"),
                         fj::Error);
    CHECK_THROWS_AS(fj::compile_to_dir(build_swiglu(), "sm_90", "unused-folder", false, o), fj::Error);
    o.fast_math = true;
    CHECK_NOTHROW(fj::Program::compile(build_swiglu(), o));
  }
  o.fast_math = false;
  o.nvrtc_options = {"--fmad=false", "--ftz=false", "--maxrregcount=32", "-DFJ_RED_MIN_BLOCKS=6"};  // and a knob
  CHECK_NOTHROW(fj::Program::compile(build_swiglu(), o));
  // ... and the reduction prelude's switches, which scripts/device-check.sh measures (the same bits).
  o.nvrtc_options = {"-DFJ_RED_NO_VECTOR", "-DFJ_RED_NO_KEPT", "-DFJ_RED_NO_GROUPS", "-DFJ_RED_NO_WARP_TREE",
                     "--define-macro=FJ_RED_NO_GROUPS"};
  CHECK_NOTHROW(fj::Program::compile(build_swiglu(), o));
  o.nvrtc_options = {"--ptxas-options=-v", "-Xptxas", "-v", "-lineinfo", "--extra-device-vectorization"};
  CHECK_NOTHROW(fj::Program::compile(build_swiglu(), o));
  // A hostile tester's ways past a check of whole words: blanks, a value in its own string, a NUL,
  // a macro renaming a math call, output kinds fusejit cannot load, a padded -arch or -I.
  const std::pair<std::string, const char*> refused[] = {
      {" --fmad=true", "is not one word"},          {"--fmad=true ", "is not one word"},
      {"--use_fast_math\t", "is not one word"},     {std::string("--fmad=true\0", 12), "'--fmad=true\\x00' holds a NUL byte"},
      {"--fmad", "takes its value in the same string"}, {"-ftz", "takes its value in the same string"},
      {"-Dsqrtf=__fsqrt_rz", "defines or undefines a macro"}, {"--define-macro=X", "defines or undefines a macro"},
      {"-UFJ_DEVICE_CODE", "defines or undefines a macro"},      {"-dc", "changes what NVRTC writes"},
      {"-DFJ_RED_NO_GROUPS=0", "defines or undefines a macro"},  {"-UFJ_RED_NO_KEPT", "defines or undefines a macro"},
      {"-DFJ_RED_NO_VECTORS", "defines or undefines a macro"},
      // A launch bound's value is checked (NVRTC named "abc" an undefined identifier, a CompileError).
      {"-DFJ_RED_MIN_BLOCKS=abc", "no launch bound: a decimal integer from 1 to 32"},
      {"-DFJ_RED_MIN_BLOCKS=", "no launch bound"}, {"-DFJ_RED_MIN_BLOCKS=0", "no launch bound"},
      {"-DFJ_RED_MIN_BLOCKS=-3", "no launch bound"}, {"--define-macro=FJ_RED_MIN_BLOCKS=33", "no launch bound"},
      {"-DFJ_RED_MIN_BLOCKS=2)__global__", "no launch bound"}, {"-DFJ_RED_MIN_BLOCKS=6 ", "is not one word"},
      {"-DFJ_RED_MIN_BLOCKS=08", "no launch bound"}, {"-DFJ_RED_MIN_BLOCKS=010", "no launch bound"},
      {"--relocatable-device-code=true", "changes what NVRTC writes"},
      {"-fdevice-syntax-only", "changes what NVRTC writes"}, {" -arch=sm_80", "is not one word"},
      {"-arch=sm_80", "chooses the target"},        {"-I/tmp", "makes the compile read files"},
      {"", "is not one word"},
      // Past a list of refusals (a hostile API user's finds): options NVRTC takes that let it assume
      // no aliasing (an in-place launch's output is an input), write OptiX IR (an empty file), or
      // report files; hidden ones (--fassociative-math reorders float math); spellings and values
      // NVRTC rejects, which the CPU path let through to fail on a GPU only.
      {"--restrict", "lets NVRTC assume that no two kernel pointers alias"},
      {"-restrict", "lets NVRTC assume that no two kernel pointers alias"},
      {"--optix-ir", "changes what NVRTC writes"}, {"--gen-opt-lto", "changes what NVRTC writes"},
      {"-fdevice-time-trace=t.json", "writes a report file of its own"}, {"--time=t.csv", "writes a report file"},
      {"--fassociative-math", "is not among the NVRTC options fusejit passes on"},
      {"--lineinfo", "is not among the NVRTC options"}, {"-generate-line-info", "is not among the NVRTC options"},
      {"---fmad=false", "is not among the NVRTC options"},
      {"--ftz=1", "takes true or false"}, {"-G=1", "takes no value"}, {"-dopt", "takes its value in the same string"},
      {"--dopt=off", "takes the value on"}, {"--std=c++14", "takes c++17 or c++20"},
      {"--maxrregcount=-1", "takes a count"}, {"--jump-table-density=102", "from 0 to 101"},
      {"-Xptxas=-v,--gpu-name=sm_80", "passes ptxas an option that chooses the target"},
      {"--ptxas-options=-arch=sm_80", "passes ptxas an option that chooses the target"}};
  for (const auto& r : refused) {
    const std::string opt = r.first;
    CAPTURE(opt);
    o.nvrtc_options = {opt};
    for (const bool fast : {false, true}) {
      o.fast_math = fast;
      CHECK_THROWS_WITH_AS(fj::Program::compile(build_swiglu(), o), doctest::Contains(r.second), fj::Error);
    }
  }
  // A control character in the option is shown as '?' (a newline forged an "error:" line: a reviewer's find).
  o.fast_math = false;
  o.nvrtc_options = {"-ftz=true\nerror: forged"};
  CHECK_THROWS_WITH_AS(fj::Program::compile(build_swiglu(), o), doctest::Contains("NVRTC option '-ftz=true?error: forged'"),
                       fj::Error);
  // ptxas's options as the option after -Xptxas (NVRTC reads them so): checked as those after '='.
  o.nvrtc_options = {"-Xptxas", "--gpu-name=sm_80"};
  CHECK_THROWS_WITH_AS(fj::Program::compile(build_swiglu(), o), doctest::Contains("passes ptxas an option that chooses"), fj::Error);
  o.nvrtc_options = {"-Xptxas", "-v -O3"};
  CHECK_THROWS_WITH_AS(fj::Program::compile(build_swiglu(), o), doctest::Contains("is not followed by one word"), fj::Error);
  o.nvrtc_options = {"--ptxas-options", "-v,-O3", "-G", "--maxrregcount=64"};
  CHECK_NOTHROW(fj::Program::compile(build_swiglu(), o));
  // ptxas -c makes relocatable code, as -rdc would (a reviewer's find).
  for (const char* ptxas : {"-Xptxas=-c", "--ptxas-options=-v,--compile-only", "-Xptxas=-ewp"}) {
    CAPTURE(ptxas);
    o.nvrtc_options = {ptxas};
    CHECK_THROWS_WITH_AS(fj::Program::compile(build_swiglu(), o), doctest::Contains("makes relocatable code"), fj::Error);
  }
}

TEST_CASE("an op of literals only folds as graph text does, into a weak literal (it was an f32 constant)") {
  fj::GraphBuilder b;
  const fj::Value x = b.input("x", fj::DType::F64, {3});
  const fj::Value folded = b.op("logaddexp", 1.0, 2.0);
  REQUIRE(folded.literal().has_value());
  CHECK(folded.literal()->f == 2 + std::log1p(std::exp(-1.0)));
  CHECK(b.op("add", 2, 3).literal()->i == 5);
  CHECK(b.op("lt", 1, 2).literal()->kind == fj::Scalar::Kind::Bool);
  b.output("y", x + folded);
  const fj::Graph built = b.build();
  const fj::Graph text = fj::Graph::parse("input x : f64[3]\ny = x + logaddexp(1.0, 2.0)\noutput y\n");
  CHECK(built.to_text() == text.to_text());
  CHECK_FALSE(x.literal().has_value());
}
