// Inputs at and past their limits: graph paths that are not regular files (a FIFO, /dev/zero, a
// directory, a socket), graph files over the size limit, expressions over the node limit, and host
// buffers larger than memory. Each must be a clear user error naming the problem, never a hang,
// "graph has no output" at 1:1, gigabytes of memory, or "internal error: std::bad_alloc".
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fusejit/fusejit.h>
#include <fusejit/report.h>

namespace fs = std::filesystem;
namespace fj = fusejit;

// Sanitized builds use more memory and abort on huge allocations instead of returning null. The
// build says so (FUSEJIT_SANITIZED, tests/CMakeLists.txt): the test sources are not instrumented
// there, so the compiler's own macros (__SANITIZE_ADDRESS__, __has_feature) do not.
#ifdef FUSEJIT_SANITIZED
#define FJ_TEST_ASAN 1
#else
#define FJ_TEST_ASAN 0
#endif

namespace {

fs::path scratch(const std::string& name) {
  fs::path p = fs::path(FUSEJIT_BINARY_DIR) / "test-input-limits" / name;
  fs::remove_all(p);
  fs::create_directories(p.parent_path());
  return p;
}

struct Outcome {
  bool finished = false;  // false: still running after the time limit (killed)
  int code = -1;          // 0: loaded; 2: fusejit::Error(User); 3: another error
  std::string message;
};

// Graph::load(path) in a child process, killed after `limit`: a hang is a test failure, not a
// hung test.
Outcome load_in_child(const std::string& path, std::chrono::seconds limit = std::chrono::seconds(20)) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);  // the child must not write this process's buffered output again
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    std::string msg;
    try {
      fj::Graph::load(path);
    } catch (const fj::Error& e) {
      code = e.kind() == fj::ErrorKind::User ? 2 : 3;
      msg = e.what();
    } catch (const std::exception& e) {
      code = 3;
      msg = e.what();
    }
    (void)!::write(fds[1], msg.data(), msg.size());
    ::_exit(code);
  }
  ::close(fds[1]);
  Outcome o;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ::close(fds[0]);
      return o;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0) o.message.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  o.finished = true;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

void check_refused(const std::string& path, const std::string& problem) {
  CAPTURE(path);
  Outcome o = load_in_child(path);
  REQUIRE_MESSAGE(o.finished, "Graph::load did not return (a hang)");
  CHECK(o.code == 2);
  CHECK(o.message == "cannot read graph file '" + path + "': " + problem);
}

struct CliRun {
  int code = -1;
  std::string out;          // stdout and stderr together
  long max_rss_kb = 0;      // the command's peak resident memory
};

// Runs the fusejit command with `args`, reporting its peak memory (wait4). Outside sanitizer
// builds its address space is capped at 3 GiB, so a regression fails instead of exhausting memory.
CliRun run_cli(const std::vector<std::string>& args) {
  const char* bin = std::getenv("FUSEJIT_BIN");
  REQUIRE(bin != nullptr);
  const fs::path out_file = scratch("cli-output.txt");
  std::fflush(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
#if !FJ_TEST_ASAN
    struct rlimit cap = {rlim_t{3} << 30, rlim_t{3} << 30};
    ::setrlimit(RLIMIT_AS, &cap);
#endif
    std::FILE* f = std::freopen(out_file.c_str(), "w", stdout);
    if (!f || ::dup2(::fileno(stdout), 2) < 0) ::_exit(127);
    std::vector<char*> argv{const_cast<char*>(bin)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(bin, argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  CliRun r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.max_rss_kb = ru.ru_maxrss;
  std::ifstream in(out_file);
  r.out.assign(std::istreambuf_iterator<char>(in), {});
  return r;
}

// A one-line expression `y = x+x+...+x` of about `bytes` bytes.
fs::path long_expression(const std::string& name, size_t bytes) {
  fs::path p = scratch(name);
  std::ofstream f(p, std::ios::binary);
  f << "graph big\ninput x : f32[4]\ny = x";
  const std::string chunk = [] {
    std::string c;
    for (int i = 0; i < 4096; ++i) c += "+x";
    return c;
  }();
  for (size_t written = 0; written < bytes; written += chunk.size()) f << chunk;
  f << "\noutput y\n";
  return p;
}

}  // namespace

TEST_CASE("a graph path that is not a regular file is refused at once, naming what it is") {
  const fs::path dir = scratch("a-folder");
  fs::create_directories(dir);
  check_refused(dir.string(), "it is a directory");
  check_refused("/dev/zero", "it is a character device (like /dev/zero), not a regular file");
  const fs::path fifo = scratch("a-fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // nobody ever writes to it
  check_refused(fifo.string(), "it is a FIFO (named pipe), not a regular file");
  const fs::path sock = scratch("a-socket");
  int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  REQUIRE(sock.string().size() < sizeof addr.sun_path);
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  Outcome o = load_in_child(sock.string());
  CHECK(o.finished);
  CHECK(o.code == 2);
  CHECK(o.message.find("it is a socket") != std::string::npos);
  ::close(s);
  o = load_in_child(scratch("missing.txt").string());
  CHECK(o.code == 2);
  CHECK(o.message == "cannot open graph file '" + scratch("missing.txt").string() + "': No such file or directory");
  // The command line says the same, with exit code 2.
  CliRun r = run_cli({"plan", dir.string()});
  CHECK(r.code == 2);
  CHECK(r.out == "fusejit: error: cannot read graph file '" + dir.string() + "': it is a directory\n");
}

TEST_CASE("a graph file over the 16 MiB limit is refused before it is read") {
  const fs::path big = scratch("big.txt");
  {
    std::ofstream f(big);
    f << "graph big\n";
  }
  fs::resize_file(big, (uint64_t{16} << 20) + 1);  // sparse: no disk used
  Outcome o = load_in_child(big.string());
  CHECK(o.code == 2);
  CHECK(o.message == "graph file '" + big.string() + "' has 16777217 bytes; fusejit reads graph files of at most 16 MiB");
  fs::remove(big);
}

TEST_CASE("a 50 MB one-line expression costs megabytes, not gigabytes") {
  // Over the file size limit: refused without reading it.
  const fs::path huge = long_expression("expr-50mb.txt", 50u << 20);
  CliRun r = run_cli({"plan", huge.string()});
  CHECK(r.code == 2);
  CHECK(r.out.find("fusejit reads graph files of at most 16 MiB") != std::string::npos);
  CHECK(r.max_rss_kb < (FJ_TEST_ASAN ? 400 : 200) * 1024);
  fs::remove(huge);
  // Under the size limit but over the node limit: a located error once 2^20 nodes exist.
  const fs::path many = long_expression("expr-15mb.txt", 15u << 20);
  r = run_cli({"plan", many.string()});
  CHECK(r.code == 2);
  CHECK(r.out.rfind(many.string() + ":3:", 0) == 0);
  CHECK(r.out.find("error: graph too large: more than 1048576 nodes") != std::string::npos);
  CHECK(r.max_rss_kb < (FJ_TEST_ASAN ? 2048 : 800) * 1024);  // about 200 MB in a release build
  fs::remove(many);
}

TEST_CASE("host buffers larger than memory are a user error naming the size") {
  if (FJ_TEST_ASAN) return;  // AddressSanitizer aborts on an allocation this large instead of returning null
  // 2^23 x 2^23 f32 = 256 TiB: more than any host's address space, whatever the overcommit mode.
  fj::Graph g = fj::Graph::parse("graph oom\ndim N = 8388608\ninput a : f32[N, 1]\ninput b : f32[1, N]\nc = a + b\noutput c\n",
                                 "oom.txt");
  fj::RunOptions ro;
  ro.options.backend = fj::Backend::Cpu;
  ro.repeats = 1;
  ro.warmup = 0;
  try {
    fj::run_graph(g, ro);
    FAIL("no error");
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK(std::string(e.what()).find("not enough host memory") != std::string::npos);
    CHECK(std::string(e.what()).find("281474976710656 bytes") != std::string::npos);
  }
  // The unfused softmax of 2^38 empty rows writes 2^38 row maxima and sums (1 TiB each) between
  // its kernels: the CPU path's intermediates say so too (the fused kernel writes nothing).
  const fj::Program p = fj::Program::compile(
      fj::Graph::parse("dim N = 4\ninput x : f32[N, 0]\ny = softmax(x, -1)\noutput y\n"), [] {
        fj::Options o;
        o.backend = fj::Backend::Cpu;
        return o;
      }());
  const fj::HostTensor x(fj::DType::F32, {int64_t{1} << 38, 0});
  CHECK(p.run({x})[0].shape() == std::vector<int64_t>{int64_t{1} << 38, 0});
  try {
    p.run({x}, {}, fj::PlanKind::Unfused);
    FAIL("no error");
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    CHECK_MESSAGE(std::string(e.what()).find("not enough host memory for the intermediates") != std::string::npos, e.what());
  }
}
