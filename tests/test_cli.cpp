// The `fusejit` command end to end, as a user runs it: every sample on the CPU path with small
// dims, outputs saved with --save-dir read back and compared with the report, a second run that
// compiles nothing, plan/compile/cache subcommands, and exit codes for bad input.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/npy.h"
#include "tests/support/files.h"
#include "tests/support/scoped_env.h"

namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr together
};

Result run(const std::string& args) {
  const char* bin = std::getenv("FUSEJIT_BIN");
  REQUIRE(bin != nullptr);
  // stderr joins stdout unless `args` redirects it (the later redirection wins).
  std::string cmd = std::string(bin) + " " + args.substr(0, args.rfind(" 2>") == std::string::npos ? args.size() : args.rfind(" 2>")) +
                    " 2>&1" + (args.rfind(" 2>") == std::string::npos ? "" : args.substr(args.rfind(" 2>")));
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs the command with stdout and stderr apart.
struct SplitResult {
  int code = -1;
  std::string out, err;
};
SplitResult run_split(const std::string& args) {
  fs::path err = fs::path(FUSEJIT_BINARY_DIR) / "test-cli" / "stderr.txt";
  fs::create_directories(err.parent_path());
  Result r = run(args + " 2>" + err.string());
  return {r.code, r.out, fusejit::testing::read_file(err)};
}

std::string sample(const std::string& name) { return fusejit::testing::sample_path(name); }

fs::path scratch(const std::string& name) {
  fs::path p = fs::path(FUSEJIT_BINARY_DIR) / "test-cli" / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// Small dims for each sample so the CPU path runs in well under a second.
const std::vector<std::pair<std::string, std::string>> kSamples = {
    {"x2x3.txt", "--dim N=1000"},
    {"gpt2_gelu_tanh.txt", "--dim T=4 --dim F=96"},
    {"llama_swiglu.txt", "--dim T=4 --dim F=96"},
    {"bias_gelu.txt", "--dim T=4 --dim F=96"},
    {"residual_scale.txt", "--dim B=2 --dim L=3 --dim C=40"},
    {"adam_step.txt", "--dim N=500 --range v=0:1"},
    {"black_scholes.txt", "--dim OPT_N=500 --range S=5:30 --range X=1:100 --range T=0.25:10"},
    {"nchw_normalize.txt", "--dim N=2 --dim H=5 --dim W=7 --range std=0.2:0.3"},
    {"int8_quant.txt", "--dim T=4 --dim F=64"},
    {"softplus_mish.txt", "--dim N=1 --dim C=3 --dim H=5 --dim W=7"},
};

}  // namespace

TEST_CASE("every sample runs; saved outputs match the report; a second run compiles nothing") {
  for (const auto& entry : kSamples) {
    const auto& file = entry.first;
    const auto& dims = entry.second;
    CAPTURE(file);
    fs::path dir = scratch(file);
    Result r = run("run " + sample(file) + " " + dims + " --backend cpu --json --special --save-dir " + dir.string());
    REQUIRE_MESSAGE(r.code == 0, r.out);
    nlohmann::json j = nlohmann::json::parse(r.out);
    CHECK(j["ok"] == true);
    CHECK(j["backend"] == "cpu");
    CHECK(j["nvrtc_version"] == "");  // the CPU path compiles with the host compiler (it said "13.0")
    CHECK(j["driver_version"] == "");
    for (const auto& st : j["stats"]) {
      std::string name = st["name"];
      CAPTURE(name);
      fusejit::ir::Tensor t = fusejit::ir::read_npy((dir / (name + ".npy")).string());
      int64_t nan = 0, inf = 0, finite = 0;
      double mn = 0, mx = 0, sum = 0;
      bool first = true;
      for (int64_t i = 0; i < t.numel(); ++i) {
        fusejit::ir::Scalar v = t.get(i);
        double d = fusejit::ir::is_float(t.dtype) ? v.f : static_cast<double>(v.i);
        if (std::isnan(d)) { ++nan; continue; }
        if (std::isinf(d)) ++inf;
        if (first || d < mn) mn = d;
        if (first || d > mx) mx = d;
        first = false;
        if (std::isfinite(d)) { sum += d; ++finite; }
      }
      CHECK(st["nan"] == nan);
      CHECK(st["inf"] == inf);
      // Non-finite statistics are the strings "inf", "-inf" and "nan" (JSON has no such numbers).
      auto value = [](const nlohmann::json& v) -> double {
        if (v.is_string()) return v == "inf" ? HUGE_VAL : v == "-inf" ? -HUGE_VAL : NAN;
        return v.get<double>();
      };
      auto same = [](double a, double b) { return std::isinf(a) || std::isinf(b) ? a == b : a == doctest::Approx(b); };
      if (!first) {
        CHECK(same(value(st["min"]), mn));
        CHECK(same(value(st["max"]), mx));
      }
      if (finite && inf == 0) CHECK(same(value(st["mean"]), sum / static_cast<double>(finite)));
    }
    // The same graph again: every kernel comes from the cache.
    Result again = run("run " + sample(file) + " " + dims + " --backend cpu --json --no-check");
    REQUIRE_MESSAGE(again.code == 0, again.out);
    nlohmann::json j2 = nlohmann::json::parse(again.out);
    CHECK(j2["fused"]["compiled"] == 0);
    CHECK(j2["unfused"]["compiled"] == 0);
  }
}

TEST_CASE("plan, compile and cache subcommands") {
  Result p = run("plan " + sample("x2x3.txt") + " --json");
  REQUIRE_MESSAGE(p.code == 0, p.out);
  nlohmann::json j = nlohmann::json::parse(p.out);
  CHECK(j["fused"]["kernels"] == 1);
  Result dot = run("plan " + sample("adam_step.txt") + " --dot");
  CHECK(dot.code == 0);
  CHECK(dot.out.rfind("digraph", 0) == 0);
  Result text = run("plan " + sample("x2x3.txt"));
  CHECK(text.out.find("predicted speedup 2.00x") != std::string::npos);
  // The first line says whose rules the plan follows; --json says it as arch and row_cache_limit.
  CHECK(text.out.rfind("# planned without a GPU's limits (--arch not given): a row kept on chip up to 49152 B a "
                       "block; --arch sm_90 plans as that GPU runs it\n", 0) == 0);
  CHECK(j["arch"].is_null());
  CHECK(j["row_cache_limit"] == 49152);
  CHECK(j["row_cache"] == true);
  Result sm90 = run("plan " + sample("softmax.txt") + " --arch sm_90 --json");
  REQUIRE_MESSAGE(sm90.code == 0, sm90.out);
  CHECK(nlohmann::json::parse(sm90.out)["arch"] == "sm_90");
  CHECK(run("plan " + sample("softmax.txt") + " --arch sm_90 --no-row-cache")
            .out.rfind("# planned as sm_90 runs it: no row kept on chip (row cache off), short rows re-read from L1/L2\n", 0) == 0);

  fs::path dir = scratch("compile");
  Result c = run("compile " + sample("gpt2_gelu_tanh.txt") + " --arch sm_90 -o " + dir.string());
  REQUIRE_MESSAGE(c.code == 0, c.out);
  nlohmann::json index = nlohmann::json::parse(std::ifstream(dir / "index.json"));
  REQUIRE(index["kernels"].size() == 10);  // 1 fused + 9 unfused
  // The unfused kernels' one binary is said (a new user counted the .cubin files: 2 for 10 kernels).
  CHECK(c.out.find("compiled 10 kernel(s) (1 fused + 9 unfused, the one-kernel-per-op baseline; those share one binary) for sm_90") !=
        std::string::npos);
  for (const auto& k : index["kernels"]) {
    CHECK(fs::exists(dir / k["cu"].get<std::string>()));
    CHECK(fs::exists(dir / k["cubin"].get<std::string>()));
  }
  // `plan` names each fused kernel as code generation does (the name `compile` and `run` use).
  nlohmann::json pj = nlohmann::json::parse(run("plan " + sample("gpt2_gelu_tanh.txt") + " --json").out);
  REQUIRE(pj["fused"]["groups"].size() == 1);
  CHECK(pj["fused"]["groups"][0]["kernel"] == index["kernels"][0]["kernel"]);
  CHECK(index["kernels"][0]["plan"] == "fused");
  // Another graph into the same folder: the earlier kernel files go, a file fusejit did not write stays.
  std::ofstream(dir / "mine.txt") << "notes\n";
  REQUIRE(run("compile " + sample("x2x3.txt") + " --arch sm_90 -o " + dir.string()).code == 0);
  nlohmann::json again = nlohmann::json::parse(std::ifstream(dir / "index.json"));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  // .cu per kernel, .cubin per fused kernel and one for the unfused plan (one NVRTC program: its
  // entries name one file), graph.txt, index.json, the three prelude headers, mine.txt
  REQUIRE(again["kernels"].size() == 3);  // 1 fused, 2 unfused
  CHECK(again["kernels"][1]["cubin"] == again["kernels"][2]["cubin"]);
  CHECK(files == again["kernels"].size() + 2 + 6);
  for (const auto& h : again["headers"]) CHECK(fs::exists(dir / h.get<std::string>()));
  CHECK(fs::exists(dir / "mine.txt"));
  CHECK(!fs::exists(dir / index["kernels"][0]["cu"].get<std::string>()));
  const fs::path fused_dir = scratch("fused-only");
  Result fo = run("compile " + sample("gpt2_gelu_tanh.txt") + " --fused-only -o " + fused_dir.string());
  REQUIRE_MESSAGE(fo.code == 0, fo.out);
  // Without --arch: sm_90, said to be the default (a build machine has no GPU to ask).
  CHECK(fo.out.find("compiled 1 kernel(s) (the fused plan only: --fused-only) for sm_90 (the default: give --arch sm_XY "
                    "for another GPU)") != std::string::npos);
  CHECK(c.out.find("(the default") == std::string::npos);
  CHECK(fo.out.find("\n  fused kernel 0: fj_gpt2_gelu_tanh_") != std::string::npos);
  CHECK(fo.out.find(".cu (9 ops)\n") != std::string::npos);
  const nlohmann::json fused_index = nlohmann::json::parse(std::ifstream(fused_dir / "index.json"));
  CHECK((fused_index["kernels"].size() == 1 && fused_index["kernels"][0]["plan"] == "fused"));
  Result ptx = run("compile " + sample("x2x3.txt") + " --arch sm_90 --ptx -o " + scratch("ptx").string());
  CHECK(ptx.code == 0);
  CHECK(ptx.out.find("for compute_90 (PTX: --ptx made --arch sm_90 compute_90) into") != std::string::npos);

  fs::path cache = scratch("cache");
  CHECK(run("cache path --cache-dir " + cache.string()).out == cache.string() + "\n");
  CHECK(run("run " + sample("x2x3.txt") + " --dim N=10 --backend cpu --cache-dir " + cache.string()).code == 0);
  CHECK(run("cache stats --cache-dir " + cache.string()).out.find("CPU modules:  2 entries,") != std::string::npos);
  for (const auto& f : fs::recursive_directory_iterator(cache))  // one module left: "1 entry", not "1 entries"
    if (f.path().extension() == ".fjk") {
      fs::remove(f.path());
      break;
    }
  CHECK(run("cache stats --cache-dir " + cache.string()).out.find("CPU modules:  1 entry, ") != std::string::npos);
  CHECK(run("cache clear --cache-dir " + cache.string()).code == 0);
  const std::string cleared = run("cache stats --cache-dir " + cache.string()).out;
  CHECK(cleared.find("CPU modules:  0 entries, 0 bytes\n") != std::string::npos);
  CHECK(cleared.find("; 0 temporary files\n") != std::string::npos);
  // A line feed in the folder's name is '?' in what `stats` prints (it split the line).
  const fs::path odd = scratch("line\nfeed");
  CHECK(run("cache stats --cache-dir '" + odd.string() + "'").out.find("path:         " + (odd.parent_path() / "line?feed").string() +
                                                                      "\n") != std::string::npos);
  // Before and after the subcommand: the last one silently won.
  const Result twice = run("cache --cache-dir " + cache.string() + " stats --cache-dir " + scratch("other").string());
  CHECK(twice.code != 0);
  CHECK(twice.out.find("--cache-dir is given twice, before and after `stats`") != std::string::npos);
}

TEST_CASE("exit codes: 2 for bad input with file:line:col, 0 for --help") {
  fs::path dir = scratch("bad");
  std::ofstream(dir / "bad.txt") << "input x : f32[4]\ny = exp(x, x)\noutput y\n";
  Result r = run("run " + (dir / "bad.txt").string());
  CHECK(r.code == 2);
  CHECK(r.out.find("bad.txt:2:") != std::string::npos);
  CHECK(r.out.find("error:") != std::string::npos);
  CHECK(run("run " + sample("x2x3.txt") + " --dim N=abc").code == 2);
  CHECK(run("run " + sample("x2x3.txt") + " --dim M=3").code == 2);
  CHECK(run("run " + sample("x2x3.txt") + " --param nope=1").code == 2);
  CHECK(run("run /nonexistent.txt").code == 2);
  // A range that cannot apply is refused, not ignored: bool inputs, inputs read from files.
  std::ofstream(dir / "mask.txt") << "input m : bool[8]\ninput x : f32[8]\ny = where(m, x, 0.0)\noutput y\n";
  r = run("run " + (dir / "mask.txt").string() + " --backend cpu --range m=0:1");
  CHECK(r.code == 2);
  CHECK(r.out.find("input 'm' is bool") != std::string::npos);
  r = run("run " + (dir / "mask.txt").string() + " --backend cpu --range nope=0:1");
  CHECK(r.code == 2);
  CHECK(r.out.find("no input named 'nope'") != std::string::npos);
  CHECK(run("run " + sample("x2x3.txt") + " --seed -1").code == 2);
  // An empty path (`--save-dir "$OUT"` with OUT unset) is refused, not taken as "no folder".
  for (const std::string flags : {"run x2x3.txt --save-dir ''", "run x2x3.txt --cache-dir ''", "compile x2x3.txt -o ''",
                                  "run x2x3.txt --dump-dir ''", "cache stats --cache-dir ''",
                                  // `--opt=` before a subcommand or the graph: CLI11 alone took the
                                  // next argument as the value ("A subcommand is required").
                                  "cache --cache-dir= stats", "cache stats --cache-dir=",
                                  "run --save-dir= x2x3.txt", "compile --out= x2x3.txt"}) {
    CAPTURE(flags);
    std::string cmd = flags;
    if (const size_t at = cmd.find("x2x3.txt"); at != std::string::npos) cmd.replace(at, 8, sample("x2x3.txt"));
    r = run(cmd);
    CHECK(r.code == 2);
    CHECK(r.out.find(": an empty path: give a folder") != std::string::npos);
  }
  // A folder to make where a dangling symlink or a file is: said in words (it was "File exists").
  const fs::path odd = scratch("odd-folders");
  fs::create_symlink(odd / "nowhere", odd / "link");
  std::ofstream(odd / "file") << "x";
  for (const char* o : {"--save-dir ", "--dump-dir "}) {
    CAPTURE(o);
    r = run("run " + sample("x2x3.txt") + " --backend cpu --repeats 1 " + std::string(o) + (odd / "link").string());
    CHECK(r.code == 2);
    CHECK(r.out.find("a symbolic link to '" + (odd / "nowhere").string() + "', which does not exist") != std::string::npos);
    r = run("run " + sample("x2x3.txt") + " --backend cpu --repeats 1 " + std::string(o) + (odd / "file").string());
    CHECK(r.code == 2);
    CHECK(r.out.find((odd / "file").string()) != std::string::npos);
    CHECK(r.out.find(": a file, not a folder") != std::string::npos);
    // A parent at fault is named ("File exists" / "Not a directory" before).
    r = run("run " + sample("x2x3.txt") + " --backend cpu --repeats 1 " + std::string(o) + (odd / "link" / "sub").string());
    CHECK(r.out.find("'" + (odd / "link").string() + "' is a symbolic link to '") != std::string::npos);
    r = run("run " + sample("x2x3.txt") + " --backend cpu --repeats 1 " + std::string(o) + (odd / "file" / "").string());
    CHECK(r.out.find(": a file, not a folder") != std::string::npos);
  }
  // --dump-dir says where the sources went and which file is the fused kernel's (named by hash).
  r = run("run " + sample("x2x3.txt") + " --backend cpu --repeats 1 --dump-dir " + (odd / "dumped").string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  const size_t at = r.out.find("; sources in " + (odd / "dumped").string() + " (fused: fj_x2x3_");
  REQUIRE(at != std::string::npos);
  const size_t name = r.out.find("fj_x2x3_", at), end = r.out.find(".cu;", at);
  REQUIRE(end != std::string::npos);
  CHECK(fs::exists(odd / "dumped" / (r.out.substr(name, end - name) + ".cu")));
  // An output whose file name would be too long is refused before the run, leaving no file of
  // another output behind (a.npy was written, then the run's report lost).
  const fs::path long_name = odd / "long.txt";
  std::ofstream(long_name) << "input x : f32[4]\na = x + 1\n" << std::string(300, 'b') << " = x * 2\noutput a, "
                           << std::string(300, 'b') << "\n";
  r = run("run " + long_name.string() + " --backend cpu --repeats 1 --save-dir " + (odd / "saved").string());
  CHECK(r.code == 2);
  CHECK(r.out.find("cannot be saved: its file name would have 304 bytes, more than the 255") != std::string::npos);
  CHECK(!fs::exists(odd / "saved" / "a.npy"));
  r = run("run " + sample("x2x3.txt") + " --backend cpu --repeats 1 --dim N=4 --save-dir " + (odd / "saved").string());
  CHECK(r.out.find("  saved     z.npy in " + (odd / "saved").string()) != std::string::npos);  // it says where
  // ... and so is one where a folder has its file's name.
  std::ofstream(odd / "two.txt") << "input x : f32[4]\nm = x + 1\nt = x * 2\noutput m, t\n";
  fs::create_directories(odd / "saved2" / "t.npy");
  r = run("run " + (odd / "two.txt").string() + " --backend cpu --repeats 1 --save-dir " + (odd / "saved2").string());
  CHECK(r.code == 2);
  CHECK(r.out.find("output 't' cannot be saved: " + (odd / "saved2" / "t.npy").string() + " is a folder") !=
        std::string::npos);
  CHECK(!fs::exists(odd / "saved2" / "m.npy"));
  // A folder it cannot write into is said before the run (after it, the report was lost: a hostile
  // tester's find); /proc's folders refuse new files to root too.
  r = run("run " + sample("x2x3.txt") + " --backend cpu --repeats 1 --dim N=4 --save-dir /proc/self/fdinfo");
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.out.find("--save-dir /proc/self/fdinfo: cannot write into it: ") != std::string::npos, r.out);
  CHECK(r.out.find("path ") == std::string::npos);  // no report: nothing ran
  // A file name's ESC and BEL stay out of the terminal in the report and the saved line, as in errors.
  const fs::path escape = odd / "g\x1b[2J\x07.txt";
  std::ofstream(escape) << "input x : f32[4]\ny = x * 2\noutput y\n";  // no graph name: the report names the file
  r = run("run '" + escape.string() + "' --backend cpu --repeats 1 --save-dir '" + (odd / "s\x1b[31m").string() + "'");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find('\x1b') == std::string::npos);
  CHECK(r.out.find('\x07') == std::string::npos);
  CHECK(r.out.find("g?[2J?.txt\n") != std::string::npos);  // the report's first line
  // A flag's `--json=` is the flag (only options that take a value are split at an empty `=`).
  r = run("plan " + sample("x2x3.txt") + " --json=");
  CHECK(r.code == 0);
  CHECK(r.out.find("\"fused\"") != std::string::npos);
  // Each cache subcommand's --help lists the --cache-dir it takes.
  for (const char* sub : {"stats", "list", "clear", "path"}) {
    r = run(std::string("cache ") + sub + " --help");
    CHECK(r.code == 0);
    CHECK(r.out.find("--cache-dir") != std::string::npos);
  }
  // NVRTC options: one that picks the target is refused (--arch does that); one NVRTC rejects is
  // the user's error, reported in a few lines, not with the generated source.
  r = run("compile " + sample("x2x3.txt") + " -o " + (dir / "o").string() + " --nvrtc-option=-arch=sm_80");
  CHECK(r.code == 2);
  CHECK(r.out.find("use --arch") != std::string::npos);
  r = run("compile " + sample("x2x3.txt") + " -o " + (dir / "o").string() + " --no-cache --nvrtc-option=--bogus");
  CHECK(r.code == 2);
  CHECK(r.out.find("--bogus") != std::string::npos);
  CHECK(r.out.size() < 1000);
  // Subnormal values are numbers; only overflow is out of range.
  std::ofstream(dir / "sub.txt") << "param p : f64 = 0\ninput x : f64[4]\ny = x + p\noutput y\n";
  r = run("run " + (dir / "sub.txt").string() + " --backend cpu --param p=1e-320 --range x=1e-320:1e-319");
  CHECK(r.code == 0);
  // The params after the inputs' source, not inside it ("seed 0, p=... (random inputs)").
  CHECK(r.out.find("run       seed 0 (random inputs); params p=") != std::string::npos);
  CHECK(run("run " + (dir / "sub.txt").string() + " --backend cpu --param p=1e999").code == 2);
}

TEST_CASE("generated inputs come from the graph's `range`, which --range overrides") {
  fs::path dir = scratch("ranged");
  std::ofstream(dir / "ranged.txt") << "input v : f32[64] range 100:101\ninput k : i32[64] range 7:9\n"
                                       "a = v * 1\nb = k + 0\noutput a, b\n";
  auto span_of = [&](const std::string& name) {
    fusejit::ir::Tensor t = fusejit::ir::read_npy((dir / "out" / (name + ".npy")).string());
    double lo = HUGE_VAL, hi = -HUGE_VAL;
    for (int64_t i = 0; i < t.numel(); ++i) {
      fusejit::ir::Scalar s = t.get(i);
      const double d = fusejit::ir::is_float(t.dtype) ? s.f : static_cast<double>(s.i);
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
    return std::pair{lo, hi};
  };
  const std::string base = "run " + (dir / "ranged.txt").string() + " --backend cpu --save-dir " + (dir / "out").string();
  Result r = run(base);
  REQUIRE_MESSAGE(r.code == 0, r.out);
  auto [alo, ahi] = span_of("a");
  CHECK(alo >= 100.0);
  CHECK(ahi < 101.0);
  auto [klo, khi] = span_of("b");
  CHECK(klo == 7.0);  // integers: both ends included (64 draws from 3 values)
  CHECK(khi == 9.0);
  r = run(base + " --range v=-2:-1");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  auto [olo, ohi] = span_of("a");
  CHECK(olo >= -2.0);
  CHECK(ohi < -1.0);
  // A range the input's dtype cannot hold is the command line's error, located there.
  SplitResult bad = run_split(base + " --range k=0:1e10");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("<command line>:1:") != std::string::npos);
  CHECK(bad.err.find("--range k: invalid random range") != std::string::npos);
  // A float bound past the dtype's largest finite value would fill inf: refused, as LO == HI is.
  bad = run_split(base + " --range v=-1e39:1e39");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("(need bounds that round to a finite f32: at most 3.4028234663852886e+38 in magnitude)") !=
        std::string::npos);
  // FLT_MAX's usual nine-digit spelling rounds to it: taken.
  CHECK(run(base + " --range v=-3.4028235e38:3.4028235e38").code == 0);
  // A bool input takes no range, whatever the bounds (said before the bounds are looked at).
  std::ofstream(dir / "flag.txt") << "input f : bool[4]\ny = f & f\noutput y\n";
  bad = run_split("run " + (dir / "flag.txt").string() + " --backend cpu --range f=1:1");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("is bool; random bools") != std::string::npos);
  // Ranges are held in f64, as the graph's `range` says: an integer bound past 2^53 is refused, not
  // rounded (nor is a float spelling of it suggested, which an i64 input would have clamped).
  bad = run_split(base + " --range k=0:9223372036854775808");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("the range's HI 9223372036854775808 is past +-2^53") != std::string::npos);
  CHECK(bad.err.find("as a float") == std::string::npos);
  bad = run_split(base + " --range k=-9007199254740993:0");
  CHECK(bad.err.find("the range's LO -9007199254740993 is past +-2^53") != std::string::npos);
  CHECK(run(base + " --range v=-9007199254740992:9007199254740992").code == 0);
  bad = run_split(base + " --range v=false:true");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("'false' is not a number") != std::string::npos);
  bad = run_split(base + " --range v=5:5");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("need finite LO < HI") != std::string::npos);
  CHECK(run("frobnicate").code == 2);
  CHECK(run("--help").code == 0);
  CHECK(run("run --help").code == 0);
  const auto version = run("--version");  // the name too, as other tools print it
  CHECK(version.code == 0);
  CHECK(version.out.rfind("fusejit 0.", 0) == 0);
}

TEST_CASE("--dim errors point at the command line, not at the graph file") {
  SplitResult r = run_split("run " + sample("x2x3.txt") + " --dim N=-5");
  CHECK(r.code == 2);
  CAPTURE(r.err);
  // "<command line>:1:COL: error: ...", the command line, and a caret under the value.
  REQUIRE(r.err.rfind("<command line>:1:", 0) == 0);
  CHECK(r.err.find("--dim N=-5: a dim's value must be >= 0, got -5") != std::string::npos);
  CHECK(r.err.find("x2x3.txt:") == std::string::npos);
  std::vector<std::string> lines;
  for (size_t p = 0, q; p < r.err.size(); p = q + 1) {
    q = r.err.find('\n', p);
    if (q == std::string::npos) q = r.err.size();
    lines.push_back(r.err.substr(p, q - p));
  }
  REQUIRE(lines.size() >= 3);
  const size_t caret = lines[2].find('^');
  REQUIRE(caret != std::string::npos);
  CHECK(lines[1].substr(caret) == "-5");
  const int col = std::stoi(lines[0].substr(std::string("<command line>:1:").size()));
  CHECK(static_cast<size_t>(col) == caret - 1);  // the text is indented by two blanks
  // An argument holding a quote is shown as a shell reads it back, the caret still under the value.
  r = run_split("run " + sample("x2x3.txt") + " --dim \"N=5'x\"");
  CHECK(r.code == 2);
  {
    const size_t nl1 = r.err.find('\n'), nl2 = r.err.find('\n', nl1 + 1), nl3 = r.err.find('\n', nl2 + 1);
    const std::string shown = r.err.substr(nl1 + 1, nl2 - nl1 - 1), marks = r.err.substr(nl2 + 1, nl3 - nl2 - 1);
    CAPTURE(r.err);
    CHECK(shown.ends_with(" --dim 'N=5'\\''x'"));
    CHECK(shown.substr(marks.find('^')) == "5'\\''x'");
  }
  // A later value of one --dim that the library refuses is located too (it said only "fusejit: error:"),
  // a control character in a value is shown as '?' (the message kept its one line, an ESC reached the
  // terminal), and the caret counts characters, not bytes, before it (a graph path with an é).
  r = run_split("plan " + sample("x2x3.txt") + " --dim N=1 M=2");
  CHECK(r.err.rfind("<command line>:1:", 0) == 0);
  CHECK(r.err.find("--dim M: unknown dim 'M' in a dim override") != std::string::npos);
  r = run_split("plan " + sample("x2x3.txt") + " --dim=N=1 N=x");
  CHECK(r.err.find("'N' is given twice") != std::string::npos);
  CHECK(r.err.rfind("<command line>:1:", 0) == 0);
  r = run_split("plan " + sample("x2x3.txt") + " --dim \"$(printf 'N=x\\ny')\"");
  CHECK(r.err.find("--dim N=x?y: 'x?y' is not an integer\n") != std::string::npos);
  CHECK(r.err.find(" --dim 'N=x?y'\n") != std::string::npos);  // the command line as shown
  r = run_split("plan " + sample("x2x3.txt") + " \"$(printf '\\033[31mzz')\"");  // every error path
  CHECK(r.err.find("unexpected argument: ?[31mzz") != std::string::npos);
  CHECK(r.err.find('\033') == std::string::npos);
  // A C1 CSI (U+009B, which some terminals act on) and a right-to-left override (U+202E, which
  // reorders the line shown) are '?' too.
  r = run_split("plan " + sample("x2x3.txt") + " \"$(printf '\302\23331m\342\200\256zz')\"");
  CHECK(r.err.find("unexpected argument: ??31m???zz") != std::string::npos);
  CHECK(r.err.find("\302\233") == std::string::npos);
  CHECK(r.err.find("\342\200\256") == std::string::npos);
  {
    const fs::path dir = scratch("utf8-path");
    fs::copy_file(sample("x2x3.txt"), dir / "\xc3\xa9.txt");
    r = run_split("plan " + (dir / "\xc3\xa9.txt").string() + " --dim N=x");
    const size_t nl1 = r.err.find('\n'), nl2 = r.err.find('\n', nl1 + 1);
    const std::string marks = r.err.substr(nl2 + 1);
    CAPTURE(r.err);
    CHECK(r.err.find(".txt --dim N=x\n") != std::string::npos);
    CHECK(marks.find('^') == nl2 - nl1 - 3);  // under the x, the last character (the é is 2 bytes)
  }
  // Also as `--dim=N=-5`, and for a value that is not a number.
  r = run_split("plan " + sample("x2x3.txt") + " --dim=N=x1");
  CHECK(r.code == 2);
  CHECK(r.err.find("'x1' is not an integer") != std::string::npos);
  CHECK(r.err.find("--dim=N=x1\n") != std::string::npos);
  // A dim the graph does not declare (found by the parser) is the command line's error too.
  r = run_split("plan " + sample("x2x3.txt") + " --dim N=3 --dim Q=4");
  CHECK(r.code == 2);
  CHECK(r.err.rfind("<command line>:1:", 0) == 0);
  CHECK(r.err.find("--dim Q: unknown dim 'Q' in a dim override; the graph declares dims N") != std::string::npos);
  CHECK(r.err.find("x2x3.txt:") == std::string::npos);
  // A name given twice (the last one won, silently), for every NAME=VALUE option; the caret is
  // under the second.
  r = run_split("plan " + sample("x2x3.txt") + " --dim N=3 --dim N=4");
  CHECK(r.code == 2);
  CHECK(r.err.find("--dim N=4: 'N' is given twice (--dim N=3 before)") != std::string::npos);
  // The caret is under the repeat, also when it is the same text, or a later value of one --dim.
  for (const char* args : {" --dim N=3 --dim N=3", " --dim=N=3 --dim N=3", " --dim N=3 N=3"}) {
    CAPTURE(args);
    r = run_split("plan " + sample("x2x3.txt") + args);
    const std::string cmd = "fusejit plan " + sample("x2x3.txt") + args;
    REQUIRE(r.err.rfind("<command line>:1:", 0) == 0);
    const size_t col = std::stoul(r.err.substr(std::string("<command line>:1:").size()));
    CHECK(col == cmd.rfind("N=3") + 1);
  }
  r = run_split("run " + sample("x2x3.txt") + " --backend cpu --range x=0:1 --range x=1:2");
  CHECK(r.code == 2);
  CHECK(r.err.find("--range x=1:2: 'x' is given twice (--range x=0:1 before)") != std::string::npos);
  r = run_split("run " + sample("rmsnorm.txt") + " --backend cpu --param eps=1 --param eps=2");
  CHECK(r.code == 2);
  CHECK(r.err.find("--param eps=2: 'eps' is given twice") != std::string::npos);
}

TEST_CASE("option values the library refuses (--nvrtc-option, --dump-dir) point at the command line too") {
  // A hostile tester's find: they were the only option errors without a caret.
  const fs::path file = scratch("option-carets") / "f";
  std::ofstream(file) << "not a folder";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --nvrtc-option -G --nvrtc-option=--bogus --backend cpu", "--bogus"},
      {" --dump-dir " + (file / "sub").string() + " --backend cpu", (file / "sub").string()}};
  for (const auto& c : cases) {
    CAPTURE(c.first);
    const SplitResult r = run_split("run " + sample("x2x3.txt") + c.first);
    const std::string cmd = "fusejit run " + sample("x2x3.txt") + c.first;
    CHECK(r.code == 2);
    REQUIRE(r.err.rfind("<command line>:1:", 0) == 0);
    CHECK(std::stoul(r.err.substr(std::string("<command line>:1:").size())) == cmd.find(c.second) + 1);
  }
}

TEST_CASE("run --json and plan --json report every error as a JSON object on stdout, and as text on stderr") {
  fs::path dir = scratch("json-errors");
  std::ofstream(dir / "bad.txt") << "input x : f32[4]\ny = exp(x, x)\noutput y\n";
  struct Case {
    std::string args, file, message;
    int line, col;
  };
  const std::vector<Case> cases = {
      {"run " + (dir / "bad.txt").string() + " --json", (dir / "bad.txt").string(), "exp takes 1 argument", 2, 5},
      {"run " + sample("x2x3.txt") + " --json --dim N=-5", "<command line>", "must be >= 0", 1, 0},
      {"run /nonexistent/g.txt --json", "/nonexistent/g.txt", "/nonexistent/g.txt", 0, 0},  // file: the graph
      {"run " + sample("x2x3.txt") + " --json --no-such-flag", "", "--no-such-flag", 0, 0},
      {"run " + sample("x2x3.txt") + " --json --param nope=1", "<command line>", "nope", 1, 0},
      {"run " + sample("x2x3.txt") + " --json --range=nope=0:1", "<command line>", "--range nope: the graph has no input", 1, 0},
      {"plan " + (dir / "bad.txt").string() + " --json", (dir / "bad.txt").string(), "exp takes 1 argument", 2, 5},
      {"plan " + sample("x2x3.txt") + " --json --dim N=-5", "<command line>", "must be >= 0", 1, 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.args);
    SplitResult r = run_split(c.args);
    CHECK(r.code == 2);
    CAPTURE(r.out);
    nlohmann::json j = nlohmann::json::parse(r.out);  // stdout is JSON and nothing else
    CHECK(j["ok"] == false);
    const nlohmann::json& e = j["error"];
    CHECK(e["kind"] == "user");
    CHECK(e["message"].get<std::string>().find(c.message) != std::string::npos);
    if (!c.file.empty()) CHECK(e["file"].get<std::string>().find(c.file) != std::string::npos);
    CHECK(e["line"] == c.line);
    if (c.col) CHECK(e["col"] == c.col);
    if (c.line == 1 && c.file == "<command line>") CHECK(e["col"].get<int>() > 0);
    CHECK(r.err.find("error") != std::string::npos);
  }
}

TEST_CASE("--json with bytes that are not UTF-8 (a file name, an option value): JSON with them escaped, no abort") {
  fs::path dir = scratch("json-non-utf8");
  const std::string bad = (dir / "bad\xff.txt").string(), good = (dir / "good\xfe.txt").string();
  std::ofstream(bad) << "input x : f32[4]\ny = tahn(x)\noutput y\n";
  std::ofstream(good) << "dim N = 64\ninput x : f32[N]\ny = exp(x)\noutput y\n";
  // A graph error in a file whose name is not UTF-8: the name as "\xff" in the JSON and on stderr.
  SplitResult r = run_split("run '" + bad + "' --json");
  CHECK(r.code == 2);
  CAPTURE(r.out);
  nlohmann::json j = nlohmann::json::parse(r.out);
  CHECK(j["error"]["file"].get<std::string>().find("bad\\xff.txt") != std::string::npos);
  CHECK(j["error"]["line"] == 2);
  CHECK(r.err.find("bad\\xff.txt:2:5: error: unknown op 'tahn'") != std::string::npos);
  // The same from an option's value, and from a .npy file name.
  for (const std::string& args : {"run '" + good + "' --json --dim 'N\xff=3'", "run '" + good + "' --json --input 'x=no\xff.npy'"}) {
    CAPTURE(args);
    SplitResult e = run_split(args);
    CHECK(e.code == 2);
    const nlohmann::json err = nlohmann::json::parse(e.out)["error"];  // in the message or the file name
    CHECK((err["message"].get<std::string>() + err["file"].get<std::string>()).find("\\xff") != std::string::npos);
  }
  // A good graph under such a name: its report, plan and compiled folder name it with "\xfe", as
  // errors do (they wrote U+FFFD).
  SplitResult ok = run_split("run '" + good + "' --json --repeats 1 --warmup 0");
  CHECK(ok.code == 0);
  const nlohmann::json report = nlohmann::json::parse(ok.out);
  CHECK(report["ok"] == true);
  CHECK(report["graph"].get<std::string>().find("good\\xfe.txt") != std::string::npos);
  Result c = run("compile '" + good + "' --fused-only -o " + (dir / "aot").string());
  CAPTURE(c.out);
  CHECK(c.code == 0);
  const nlohmann::json index = nlohmann::json::parse(std::ifstream(dir / "aot" / "index.json"));
  CHECK(index["graph_file"].get<std::string>().find("good\\xfe.txt") != std::string::npos);
}

TEST_CASE("an input no output uses gets a warning") {
  fs::path dir = scratch("unused");
  std::ofstream(dir / "u.txt") << "input x : f32[4]\ninput unused_b : f32[4]\ny = x * 2\noutput y\n";
  SplitResult r = run_split("plan " + (dir / "u.txt").string());
  CHECK(r.code == 0);
  CHECK(r.err.find("u.txt:2:7: input 'unused_b' is not used by any output") != std::string::npos);
  CHECK(r.err.find("warning") != std::string::npos);
  r = run_split("plan " + sample("x2x3.txt"));
  CHECK(r.err.empty());
  // plan --json: in its warnings, as run's
  r = run_split("plan " + (dir / "u.txt").string() + " --json");
  CHECK(nlohmann::json::parse(r.out)["warnings"][0].get<std::string>().find("input 'unused_b' is not used") !=
        std::string::npos);
  CHECK(nlohmann::json::parse(run_split("plan " + sample("x2x3.txt") + " --json").out)["warnings"].empty());
  // run --json: on stderr and in the report's warnings
  r = run_split("run " + (dir / "u.txt").string() + " --backend cpu --repeats 1 --warmup 0 --json");
  CHECK(r.code == 0);
  CHECK(r.err.find("input 'unused_b' is not used") != std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["warnings"].size() == 1);
  CHECK(j["warnings"][0].get<std::string>().find("u.txt:2:7: input 'unused_b' is not used by any output") != std::string::npos);
}

TEST_CASE("plan and run print bytes in the same units; index.json and plan name values the same way") {
  const std::string g = sample("bias_gelu.txt") + " --dim T=64 --dim F=4096";
  std::string plan = run("plan " + g).out;
  std::string rep = run("run " + g + " --backend cpu --repeats 1 --warmup 0").out;
  CAPTURE(plan);
  CAPTURE(rep);
  // bias_gelu's output y is f16[64, 4096], 524288 B: the fused kernel writes it, and run lists it.
  CHECK(plan.find("write 524288 B (524.29 kB)") != std::string::npos);
  CHECK(rep.find("y f16[T=64, F=4096] (524.29 kB)") != std::string::npos);
  for (const char* binary : {"KiB", "MiB", "GiB"}) {
    CHECK(plan.find(binary) == std::string::npos);
    CHECK(rep.find(binary) == std::string::npos);
  }
  CHECK(plan.find(" kB)") != std::string::npos);

  fs::path dir = scratch("names");
  REQUIRE(run("compile " + g + " --arch sm_80 -o " + dir.string()).code == 0);
  nlohmann::json index = nlohmann::json::parse(std::ifstream(dir / "index.json"));
  nlohmann::json pj = nlohmann::json::parse(run("plan " + g + " --json").out);
  REQUIRE(index["kernels"][0]["plan"] == "fused");
  std::vector<std::string> lhs;
  for (const auto& op : index["kernels"][0]["ops"]) {
    std::string line = op;
    lhs.push_back(line.substr(0, line.find(" = ")));
  }
  CHECK(lhs == pj["fused"]["groups"][0]["nodes"].get<std::vector<std::string>>());
  CHECK(index["kernels"][0]["ops"][0] == "h = add(x, bias)");
}

TEST_CASE("messages about options name the command's flags, not the library's fields") {
  const std::string x2x3 = sample("x2x3.txt") + " --backend cpu --dim N=64 ";
  Result r = run("run " + x2x3 + "--arch sm_90");
  CHECK(r.code == 0);
  CHECK(r.out.find("--arch sm_90 has no effect on the CPU path") != std::string::npos);
  r = run("run " + x2x3 + "--arch sm_9000x");
  CHECK(r.code == 2);
  CHECK(r.out.find("--arch: invalid GPU architecture 'sm_9000x'") != std::string::npos);
  r = run("run " + x2x3 + "--nvrtc-option=--maxrregcount=32");
  CHECK(r.out.find("--nvrtc-option (--maxrregcount=32) has no effect on the CPU path") != std::string::npos);
  // Param values as graph text writes them: no hex, no integer silently rounded past i64, and one
  // that does not fit the param's dtype is refused as a default would be.
  const std::string rms = sample("rmsnorm.txt") + " --backend cpu --dim T=2 --dim D=8 ";
  const std::pair<std::string, std::string> refused[] = {
      {x2x3 + "--param nope=1", "--param nope: the graph has no param named 'nope'"},
      {rms + "--param eps=0x10", "'0x10' is not a number"},
      {rms + "--param eps=-9223372036854776000", "integer -9223372036854776000 does not fit in i64"},
      {rms + "--param eps=1e40", "--param eps=1e+40: does not fit f32, the dtype of param 'eps'"},
  };
  for (const auto& c : refused) {  // not a structured binding: clang 14 refuses one inside CAPTURE
    CAPTURE(c.first);
    r = run("run " + c.first);
    CHECK(r.code == 2);
    CHECK(r.out.find(c.second) != std::string::npos);
  }
  r = run("compile " + sample("x2x3.txt") + " -o " + scratch("arch").string() + " --arch sm_9000x");
  CHECK(r.code == 2);
  CHECK(r.out.find("--arch: invalid GPU architecture") != std::string::npos);
  CHECK(r.out.find("Options::") == std::string::npos);
  // A run command line turned into plan or compile: --param is refused, saying why.
  for (const char* cmd : {"plan ", "compile "}) {
    r = run(cmd + sample("rmsnorm.txt") + " --param eps=1e-5" + (cmd[0] == 'c' ? " -o " + scratch("p").string() : ""));
    CAPTURE(cmd);
    CHECK(r.code == 2);
    CHECK(r.out.find("takes no --param: a param is a kernel argument") != std::string::npos);
    CHECK(r.out.find("<command line>:1:") != std::string::npos);
    r = run(cmd + sample("rmsnorm.txt") + " --param" + (cmd[0] == 'c' ? " -o " + scratch("p").string() : ""));
    CHECK(r.code == 2);
    CHECK(r.out.find("error: --param: " + std::string(cmd[0] == 'c' ? "compile" : "plan") + " takes no --param") !=
          std::string::npos);
  }
}

TEST_CASE("arguments no option takes are named in order, with the options an unknown one is close to") {
  const std::string x2x3 = sample("x2x3.txt");
  const std::pair<std::string, std::string> cases[] = {
      {"run " + x2x3 + " --dims N=8",
       "fusejit: error: unexpected arguments: --dims N=8; --dims is no option of `run`: did you mean --dim? "
       "(`fusejit run --help` lists what it takes)"},
      {"compile " + x2x3 + " -o " + scratch("extras").string() + " --fused",
       "--fused is no option of `compile`: did you mean --fused-only?"},
      {"cache stats --foo", "fusejit: error: unexpected argument: --foo (`fusejit cache stats --help` lists what it takes)"},
      {"plan " + x2x3 + " extra", "unexpected argument: extra (`fusejit plan --help`"},
      {"run " + x2x3 + " --fast_math", "--fast_math is no option of `run`: did you mean --fast-math?"},
      {"plan " + x2x3 + " --repeats 3", "--repeats is an option of `fusejit run`, not of `plan`"},
      // Before the subcommand that takes it (it said "an option of `fusejit run`, not of `plan`").
      {"--fast-math plan " + x2x3, "--fast-math is an option of `plan`: give it after `plan`"},
      {"run " + x2x3 + " --seed=x", "error: --seed: 'x' is not a decimal integer"},
      {"frob", "fusejit: error: unknown subcommand 'frob': `fusejit` takes run, plan, compile, cache"},
      {"cache frob", "unknown subcommand 'frob': `fusejit cache` takes stats, list, clear, path"},
      {"", "fusejit: error: `fusejit` takes a subcommand: run, plan, compile, cache (`fusejit --help` says what each does)"},
      {"cache", "`fusejit cache` takes a subcommand: stats, list, clear, path"},
      {"compile " + x2x3, "fusejit: error: -o/--out DIR is required: the folder to write the kernels into"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.first);
    Result r = run(c.first);
    CHECK(r.code == 2);
    CHECK(r.out.find(c.second) != std::string::npos);
  }
  const nlohmann::json j = nlohmann::json::parse(run_split("plan " + x2x3 + " --dims N=8 --json").out);
  CHECK(j["error"]["message"].get<std::string>().find("did you mean --dim?") != std::string::npos);
  // --input and --range of a name the graph lacks list its inputs, as --param lists the params.
  Result r = run("run " + sample("rmsnorm.txt") + " --backend cpu --input msk=m.npy");
  CHECK(r.code == 2);
  CHECK(r.out.find("--input msk=m.npy: the graph has no input named 'msk' (its inputs: x, w)") != std::string::npos);
  // A dim a file gave that the graph cannot take is said to come from the files (the graph's line
  // alone looked at fault).
  const fs::path dir = scratch("file_dims");
  std::ofstream(dir / "g.txt") << "dim A = 2\ndim B = 3\ninput x : f32[A, B]\ninput z : f32[B, B]\n"
                                  "y = sum(x, [0]) + sum(z, [0])\noutput y\n";
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 922337203685477580), }";
  std::string padded = header + std::string(64 - (10 + header.size() + 1) % 64, ' ') + "\n";
  std::ofstream(dir / "x.npy", std::ios::binary) << std::string("\x93NUMPY\x01\x00", 8)
                                                 << static_cast<char>(padded.size() & 0xff)
                                                 << static_cast<char>(padded.size() >> 8) << padded;
  r = run("run " + (dir / "g.txt").string() + " --backend cpu --input x=" + (dir / "x.npy").string());
  CHECK(r.code == 2);
  CHECK(r.out.find("g.txt:4:7: error: input 'z' has shape [B=922337203685477580") != std::string::npos);
  CHECK(r.out.find("note: the --input files gave the dims A = 0, B = 922337203685477580") != std::string::npos);
}

TEST_CASE("plan --arch plans as a GPU of that compute capability runs the graph") {
  fs::path dir = scratch("plan_arch");
  std::ofstream(dir / "sm.txt") << "dim H = 4\ndim S = 16384\ninput s : f32[H, S]\ninput mask : f32[1, S]\n"
                                   "y = softmax(s + mask, -1)\noutput y\n";
  const std::string g = (dir / "sm.txt").string();
  Result r = run("plan " + g);  // without a GPU: 48 KiB, and how to plan for one
  CHECK(r.code == 0);
  CHECK(r.out.find("over the 49152 B row cache (48 KiB, the limit without a GPU; `plan --arch sm_90` plans for one)") !=
        std::string::npos);
  r = run("plan " + g + " --arch sm_90");  // 227 KiB less 12 KiB: the 128 KiB row of s and mask fits
  CHECK(r.code == 0);
  CHECK(r.out.find("the row kept on chip (131072 B of shared memory per block for s, mask") != std::string::npos);
  r = run("plan " + g + " --arch sm_86");  // 99 KiB less 12 KiB: only s fits, the mask (the same in every row) is re-read
  CHECK(r.out.find("the row kept on chip (65536 B of shared memory per block for s) but for mask, the same in every "
                   "row, which each pass reads from memory (L2 serves every block the same bytes): with it the row "
                   "cache would take 131072 B, over the 89088 B row cache;") != std::string::npos);
  const nlohmann::json k0 = nlohmann::json::parse(run("plan " + g + " --arch sm_86 --json").out)["fused"]["groups"][0];
  CHECK(k0["broadcast_rows_reread"] == true);
  CHECK(k0["row_cache_bytes"] == 65536);
  // A larger --row-cache-limit is capped by the GPU's, and the note says so.
  r = run("plan " + g + " --arch sm_86 --row-cache-limit 100000");  // would not have held the 131072 B either
  CHECK(r.out.find("over the 89088 B row cache;") != std::string::npos);
  CHECK(r.out.find("the limit asked for") == std::string::npos);
  r = run("plan " + g + " --arch sm_86 --row-cache-limit 1000000");
  CHECK(r.out.find("over the 89088 B row cache (the limit asked for, 1000000 B, capped by the shared memory a block "
                   "of the GPU may opt in to);") != std::string::npos);
  r = run("plan " + g + " --arch compute_80 --dim S=1024 --json");  // a short row: re-read, counted once
  CHECK(nlohmann::json::parse(r.out).dump().find("a short row (at most 2048 elements and 8192 B) is re-read") !=
        std::string::npos);
  // A row the vector loop cannot read (1,023 f32: not a multiple of 4) stays on chip, as the launcher keeps it.
  r = run("plan " + g + " --arch sm_90 --dim S=1023");
  CHECK(r.out.find("a short row") == std::string::npos);
  CHECK(r.out.find("the row kept on chip (12288 B of shared memory per block for s, mask and %5") != std::string::npos);
  r = run("plan " + g + " --arch sm_70");
  CHECK(r.code == 2);
  CHECK(r.out.find("--arch sm_70: fusejit knows the shared memory per block of sm_75") != std::string::npos);
  CHECK(r.out.find("give --row-cache-limit instead") != std::string::npos);
  r = run("plan " + g + " --arch sm_9x");
  CHECK(r.code == 2);
  CHECK(r.out.find("--arch: invalid GPU architecture 'sm_9x'") != std::string::npos);
}

TEST_CASE("--no-row-cache: every pass reads memory, the outputs are the same bits; plan says where rows live") {
  fs::path dir = scratch("row-cache");
  const std::string base = "run " + sample("layernorm.txt") + " --backend cpu --dim N=6 --dim C=3000 --save-dir ";
  Result on = run(base + (dir / "on").string());
  REQUIRE_MESSAGE(on.code == 0, on.out);
  Result off = run(base + (dir / "off").string() + " --no-row-cache");
  REQUIRE_MESSAGE(off.code == 0, off.out);
  // The report says so, and counts the passes' re-reads in the bytes moved.
  CHECK(off.out.find("rows re-read by every pass (--no-row-cache)") != std::string::npos);
  CHECK(on.out.find("rows re-read") == std::string::npos);
  CHECK(fusejit::testing::read_file(dir / "on" / "y.npy") == fusejit::testing::read_file(dir / "off" / "y.npy"));
  Result plan = run("plan " + sample("layernorm.txt") + " --dim N=6 --dim C=3000");
  REQUIRE_MESSAGE(plan.code == 0, plan.out);
  CHECK(plan.out.find("the row kept on chip (12000 B of shared memory per block for x)") != std::string::npos);
  plan = run("plan " + sample("layernorm.txt") + " --dim N=6 --dim C=30000");  // 120,000 B rows: re-read
  CHECK(plan.out.find("each reading x from memory: a row of x takes 120000 B, over the 49152 B row cache") !=
        std::string::npos);
  CHECK(plan.out.find("of it re-read by later passes") != std::string::npos);
  // plan takes run's options and says how the kernels then run.
  plan = run("plan " + sample("layernorm.txt") + " --dim N=6 --dim C=3000 --no-row-cache");
  CHECK(plan.out.find("each reading x from memory (the row cache is off)") != std::string::npos);
  // --row-cache-limit sets the limit: 120,000 B rows stay on chip under a 128 KiB one, and the
  // 12,000 B ones of C=3000 no longer under 10,000 B; a negative limit is refused.
  plan = run("plan " + sample("layernorm.txt") + " --dim N=6 --dim C=30000 --row-cache-limit 131072");
  REQUIRE_MESSAGE(plan.code == 0, plan.out);
  CHECK(plan.out.find("the row kept on chip (120000 B of shared memory per block for x)") != std::string::npos);
  plan = run("plan " + sample("layernorm.txt") + " --dim N=6 --dim C=3000 --row-cache-limit 10000");
  CHECK(plan.out.find("a row of x takes 12000 B, over the 10000 B row cache") != std::string::npos);
  plan = run("plan " + sample("layernorm.txt") + " --row-cache-limit -1");
  CHECK(plan.code != 0);
  CHECK(plan.out.find("--row-cache-limit: must be >= 0") != std::string::npos);
  Result limited = run(base + (dir / "limited").string() + " --row-cache-limit 1000");
  REQUIRE_MESSAGE(limited.code == 0, limited.out);
  CHECK(limited.out.find("row caches of at most 1000 B (--row-cache-limit 1000)") != std::string::npos);
  Result both = run(base + (dir / "both").string() + " --no-row-cache --row-cache-limit 16");
  CHECK(both.out.find("rows re-read by every pass (--no-row-cache, so --row-cache-limit 16 has no effect)") !=
        std::string::npos);
  // x's 72 kB read by 3 passes instead of once: 168 kB moved becomes 312 kB.
  CHECK(on.out.find("168.00 kB") != std::string::npos);
  CHECK(limited.out.find("312.00 kB") != std::string::npos);
  CHECK(fusejit::testing::read_file(dir / "on" / "y.npy") == fusejit::testing::read_file(dir / "limited" / "y.npy"));
  plan = run("plan " + sample("layernorm.txt") + " --dim N=2 --dim C=30000 --row-split 3");
  CHECK(plan.out.find("3 blocks per row at these sizes, 5 launches (6 blocks)") != std::string::npos);
  // A count past int64 is refused, not stored as 2^63 - 1.
  plan = run("plan " + sample("layernorm.txt") + " --row-split 99999999999999999999");
  CHECK(plan.code == 2);
  CHECK(plan.out.find("--row-split: must be 0 to 9223372036854775807, got 99999999999999999999") != std::string::npos);
  // So is a seed past 2^64 - 1 (it ran with seed 2^64 - 1).
  plan = run("run " + sample("x2x3.txt") + " --seed 18446744073709551616");
  CHECK(plan.code == 2);
  CHECK(plan.out.find("--seed: must be 0 to 18446744073709551615, got 18446744073709551616") != std::string::npos);
  // An empty count (`--row-split "$N"` with N unset) is refused, not read as 0.
  plan = run("plan " + sample("layernorm.txt") + " --row-split ''");
  CHECK(plan.code == 2);
  CHECK(plan.out.find("--row-split: an empty value: give a number") != std::string::npos);
}

TEST_CASE("integer options: decimal only, range errors and repeats point into the command line") {
  const std::string g = sample("x2x3.txt");
  // CLI11 alone read 0x10 as 16 and 010 as octal 8 (--dim and graph text take decimal only).
  Result r = run("run " + g + " --seed 0x10");
  CHECK(r.code == 2);
  CHECK(r.out.find("<command line>:1:") != std::string::npos);
  CHECK(r.out.find("--seed: '0x10' is not a decimal integer") != std::string::npos);
  r = run("run " + g + " --backend cpu --repeats 1 --json --seed 010");
  CHECK(r.code == 0);
  CHECK(r.out.find("\"seed\": 10,") != std::string::npos);
  r = run("run " + g + " --repeats 0");
  CHECK(r.code == 2);
  CHECK(r.out.find("--repeats: must be 1 to 100000, got 0") != std::string::npos);
  // The caret is under the value at fault: the line, then spaces up to it.
  const std::string line = "  fusejit run " + g + " --warmup -1\n";
  r = run("run " + g + " --warmup -1");
  CHECK(r.out.find(line + std::string(line.size() - 3, ' ') + "^") != std::string::npos);
  CHECK(r.out.find("--warmup: must be >= 0") != std::string::npos);
  r = run("run " + g + " --device 99999999999");
  CHECK(r.out.find("--device: must be 0 to 2147483647, got 99999999999") != std::string::npos);
  // An option given twice (CLI11: "At Most 1 required but received 2"), the caret under the second.
  r = run("run " + g + " --seed 3 --seed=4");
  CHECK(r.code == 2);
  const std::string twice = "  fusejit run " + g + " --seed 3 --seed=4\n";
  CHECK(r.out.find("--seed is given 2 times: give it once") != std::string::npos);
  CHECK(r.out.find(twice + std::string(twice.size() - 2, ' ') + "^") != std::string::npos);
  // Given twice by its short form: the same words, located too (a hostile tester's find), as are
  // an empty -o and two options that exclude each other (under the later one).
  const auto caret_at = [](const std::string& shown, const std::string& before) {
    return "  " + shown + "\n" + std::string(2 + before.size(), ' ') + "^";
  };
  r = run("compile " + g + " -o a -o b");
  CHECK(r.code == 2);
  CHECK(r.out.find("error: --out is given 2 times: give it once") != std::string::npos);
  CHECK(r.out.find(caret_at("fusejit compile " + g + " -o a -o b", "fusejit compile " + g + " -o a -o ")) !=
        std::string::npos);
  r = run("compile " + g + " -o ''");
  CHECK(r.out.find(caret_at("fusejit compile " + g + " -o ''", "fusejit compile " + g + " -o '")) != std::string::npos);
  r = run("plan " + g + " --json --dot");
  CHECK(r.code == 2);
  CHECK(r.out.find(caret_at("fusejit plan " + g + " --json --dot", "fusejit plan " + g + " --json ")) != std::string::npos);
  // A graph file named -g.txt is read as an option by CLI11: "GRAPH is required" says to give it after --.
  const fs::path dash = fs::path(FUSEJIT_BINARY_DIR) / "test-cli" / "-dash.txt";
  fs::create_directories(dash.parent_path());
  fs::copy_file(g, dash, fs::copy_options::overwrite_existing);
  const fs::path was = fs::current_path();
  fs::current_path(dash.parent_path());
  r = run("plan -dash.txt");
  fs::current_path(was);
  CHECK(r.code == 2);
  CHECK(r.out.find("GRAPH is required; '-dash.txt' is a file, read as an option: give a file whose name starts with "
                   "'-' after `--` (fusejit plan -- -dash.txt)") != std::string::npos);
  // A library error about --arch's value points at it (it was unlocated, and --json blamed the graph file).
  r = run("plan " + g + " --arch sm_9");
  CHECK(r.code == 2);
  CHECK(r.out.find("<command line>:1:" + std::to_string(std::string("fusejit plan " + g + " --arch ").size() + 1) +
                   ": error: --arch: invalid GPU architecture 'sm_9'") != std::string::npos);
  r = run("plan " + g + " --arch sm_101");  // a well-formed arch without a shared-memory figure (CUDA 13: sm_110)
  CHECK(r.out.find("<command line>:1:" + std::to_string(std::string("fusejit plan " + g + " --arch ").size() + 1) +
                   ": error: --arch sm_101: fusejit knows") != std::string::npos);
  r = run("plan " + g + " --arch ''");
  CHECK(r.out.find("--arch: an empty value: give sm_XY or compute_XY") != std::string::npos);
  // CLI11 checks each value before it counts them: the caret under the bad one, not the first.
  for (const std::string& bad : {std::string(" --repeats 1 --repeats 0"), std::string(" --seed 1 --seed 0x1"),
                                 std::string(" --backend cpu --backend gpu")}) {
    CAPTURE(bad);
    const std::string shown = "  fusejit run " + g + bad + "\n";
    r = run("run " + g + bad);
    CHECK(r.code == 2);
    const size_t last = bad.rfind(' ') + 1;  // the second value's column in `bad`
    CHECK(r.out.find(shown + std::string(shown.size() - 1 - (bad.size() - last), ' ') + "^") != std::string::npos);
  }
  // -0 is 0 for every integer option (it was refused for --seed only).
  r = run("run " + g + " --backend cpu --repeats 1 --json --seed -0");
  CHECK(r.code == 0);
  CHECK(r.out.find("\"seed\": 0,") != std::string::npos);
}

TEST_CASE("run --input: the dims of an input's shape follow its .npy file unless --dim sets them") {
  fs::path dir = scratch("input-dims");
  std::ofstream(dir / "g.txt") << "dim N = 4096\ndim C = 8\ninput x : f32[N, C]\ninput b : f32[C]\n"
                                  "y = softmax(x, -1) + b\noutput y\n";
  fusejit::ir::Tensor x(fusejit::ir::DType::F32, {3, 5}), b5(fusejit::ir::DType::F32, {5}), b6(fusejit::ir::DType::F32, {6});
  fusejit::ir::write_npy((dir / "x.npy").string(), x);
  fusejit::ir::write_npy((dir / "b5.npy").string(), b5);
  fusejit::ir::write_npy((dir / "b6.npy").string(), b6);
  const std::string base = "run " + (dir / "g.txt").string() + " --backend cpu --repeats 1 --input x=" + (dir / "x.npy").string();
  Result r = run(base);
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("x f32[N=3, C=5]") != std::string::npos);
  r = run(base + " --input b=" + (dir / "b5.npy").string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("no effect") == std::string::npos);
  // Every input from a file: the random inputs' options are said to change nothing (they were taken silently).
  r = run(base + " --input b=" + (dir / "b5.npy").string() + " --special --seed 7");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("warning: --special and --seed 7 have no effect: every input is read from a file (--input)") !=
        std::string::npos);
  r = run(base + " --special");  // b is generated: no warning
  CHECK(r.out.find("no effect") == std::string::npos);
  // Two files that disagree on a dim: both named.
  r = run(base + " --input b=" + (dir / "b6.npy").string());
  CHECK(r.code == 2);
  CHECK(r.out.find("dim C: " + (dir / "x.npy").string() + " (input 'x', axis 1) has size 5 but " +
                   (dir / "b6.npy").string() + " (input 'b', axis 0) has size 6") != std::string::npos);
  // --dim wins over the file, and the file is then refused.
  r = run(base + " --dim N=7");
  CHECK(r.code == 2);
  CHECK(r.out.find("the file has f32[3, 5], expected f32[N=7, C=5] (--dim sets the graph's dims N, C; without it they "
                   "follow the file)") != std::string::npos);
  // A dim of two axes is named once (it read "dims N, N": a hostile tester's find).
  std::ofstream(dir / "sq.txt") << "dim N = 4\ninput x : f32[N, N]\ny = x * 2\noutput y\n";
  fusejit::ir::write_npy((dir / "sq.npy").string(), fusejit::ir::Tensor(fusejit::ir::DType::F32, {3, 3}));
  r = run("run " + (dir / "sq.txt").string() + " --backend cpu --repeats 1 --dim N=4 --input x=" + (dir / "sq.npy").string());
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.out.find("(--dim sets the graph's dims N; without it") != std::string::npos, r.out);
}

TEST_CASE("run's output statistics keep the sign of a zero mean") {
  // A hostile tester's find: an output of -0.0s had mean 0 (a sum started at +0.0).
  const fs::path g = scratch("negzero") / "g.txt";
  fs::create_directories(g.parent_path());
  std::ofstream(g) << "input x : f32[4]\ny = -(abs(x) * 0.0)\noutput y\n";
  Result r = run("run " + g.string() + " --backend cpu --repeats 1 --json");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const double mean = j["stats"][0]["mean"].get<double>();
  CHECK(mean == 0.0);
  CHECK(std::signbit(mean));
}

TEST_CASE("run --special: an output that is mostly NaN is named, so its 'identical values' is read for what it is") {
  Result r = run("run " + sample("rmsnorm.txt") + " --backend cpu --repeats 1 --dim T=4 --dim D=64 --special");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("warning: output 'y' is NaN in ") != std::string::npos);
  CHECK(r.out.find("the special-value inputs (--special)") != std::string::npos);
  r = run("run " + sample("rmsnorm.txt") + " --backend cpu --repeats 1 --dim T=4 --dim D=64");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("is NaN in") == std::string::npos);
  // Without --special too: random inputs outside the graph's domain (sqrt of negatives).
  const fs::path g = scratch("nan") / "sqrt.txt";
  fs::create_directories(g.parent_path());
  std::ofstream(g) << "dim N = 1000\ninput v : f32[N]\ny = sqrt(v)\noutput y\n";
  r = run("run " + g.string() + " --backend cpu --repeats 1 --range v=-1:-0.5");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("warning: output 'y' is NaN in 1000 of 1000 elements, so its checks compare NaNs mostly: give "
                   "'v' a range") != std::string::npos);
  // With --special and no reduction, the domain still: --special's NaNs reach one element each.
  r = run("run " + g.string() + " --backend cpu --repeats 1 --range v=-1:-0.5 --special");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("compare NaNs mostly: give 'v' a range") != std::string::npos);
  CHECK(r.out.find("a reduction reads") == std::string::npos);
  // Inputs from files: --range cannot help (it is refused with --input); the files are named.
  fusejit::ir::Tensor nans(fusejit::ir::DType::F32, {1000});
  for (int64_t i = 0; i < 1000; ++i) nans.as<float>()[i] = std::nanf("");
  fusejit::ir::write_npy((g.parent_path() / "nans.npy").string(), nans);
  r = run("run " + g.string() + " --backend cpu --repeats 1 --input v=" + (g.parent_path() / "nans.npy").string());
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("compare NaNs mostly: the values of 'v' (read from --input) are NaN or outside the graph's domain") !=
        std::string::npos);
  // No input at all: the params and constants.
  std::ofstream(g.parent_path() / "p.txt") << "input x : f32[4]\nparam a : f64 = 1e308\nz = x + 1\ny = cast(a, f32) * 0\noutput z, y\n";
  r = run("run " + (g.parent_path() / "p.txt").string() + " --backend cpu --repeats 1");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("output 'y' is NaN in 1 of 1 elements, so its checks compare NaNs mostly: it reads no input: its "
                   "params' and constants' values give NaN") != std::string::npos);
  // An input and a param out of its domain: both named; without checks, none said to compare NaNs.
  std::ofstream(g.parent_path() / "q.txt") << "dim N = 64\ninput x : f32[N]\nparam p : f32 = 1\ny = x * 0 + sqrt(p)\noutput y\n";
  r = run("run " + (g.parent_path() / "q.txt").string() + " --backend cpu --repeats 1 --param p=-1 --no-check");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("output 'y' is NaN in 64 of 64 elements: give 'x' a range the graph is defined on (`input v : f32[N] "
                   "range 0:1` in the graph, or --range NAME=LO:HI), or its params' or constants' values give NaN") !=
        std::string::npos);
  // A NaN param: the param, not the inputs.
  r = run("run " + sample("rmsnorm.txt") + " --backend cpu --repeats 1 --dim T=4 --dim D=64 --param eps=nan");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("compare NaNs mostly: param 'eps' is NaN") != std::string::npos);
  // A var of one element a row, an empty mean with a correction: 0/0 at these dims, whatever the inputs.
  const fs::path v = scratch("nan") / "var.txt";
  // An output not computed from it has its own cause (z: its inputs).
  std::ofstream(v) << "dim N = 3\ndim C = 1\ninput x : f32[N, C]\ny = var(x, -1)\nz = sqrt(x - 10)\noutput y, z\n";
  r = run("run " + v.string() + " --backend cpu --repeats 1");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("output 'y' is NaN in 3 of 3 elements, so its checks compare NaNs mostly: the mean at line 4 (var and "
                   "std are means) reduces 1 element per result with correction 1, so it divides by max(0, n - "
                   "correction) = 0 at these dims") != std::string::npos);
  CHECK(r.out.find("output 'z' is NaN in 3 of 3 elements, so its checks compare NaNs mostly: give 'x' a range") !=
        std::string::npos);
  r = run("run " + v.string() + " --backend cpu --repeats 1 --dim C=2");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("output 'y' is NaN") == std::string::npos);
}

TEST_CASE("run reports integer params exactly, in text and JSON") {
  fs::path dir = scratch("int-params");
  std::ofstream(dir / "g.txt") << "input x : i64[4]\nparam k : i64 = 1\nparam j : i32 = 1\nparam b : bool = true\n"
                                  "y = x * k + j + cast(b, i64)\noutput y\n";
  const std::string base = "run " + (dir / "g.txt").string() + " --backend cpu --repeats 1 --param k=-9223372036854775807 "
                           "--param j=-2147483648";
  Result r = run(base);
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("k=-9223372036854775807, j=-2147483648, b=true") != std::string::npos);
  SplitResult s = run_split(base + " --json");
  REQUIRE_MESSAGE(s.code == 0, s.err);
  const nlohmann::json j = nlohmann::json::parse(s.out);
  CHECK(j["params"]["k"].get<int64_t>() == -9223372036854775807);
  CHECK(j["params"]["j"].get<int64_t>() == -2147483648);
  CHECK(j["params"]["b"].get<bool>());
}

TEST_CASE("run with no elements: no speedup is claimed from launch overheads") {
  Result r = run("run " + sample("softmax.txt") + " --dim N=0 --backend cpu --repeats 1");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("speedup   - (the outputs have no elements: the times are launch overheads, which say nothing of fusion)") != std::string::npos);
  CHECK(r.out.find("measured on the host CPU") == std::string::npos);
  // ... nor in --json: null, as a figure not measured.
  Result j = run("run " + sample("softmax.txt") + " --dim N=0 --backend cpu --repeats 1 --json");
  REQUIRE_MESSAGE(j.code == 0, j.out);
  const nlohmann::json report = nlohmann::json::parse(j.out);
  CHECK(report["speedup"].is_null());
  // ... and an output with no elements has no statistics: null (as the text's "-"), not "nan".
  REQUIRE(!report["stats"].empty());
  for (const char* field : {"min", "max", "mean"}) CHECK(report["stats"][0][field].is_null());
  // Rows of length 0: the fused softmax launches nothing and moves no byte where the unfused
  // kernels write the rows' max and sum; the plan agrees with the run (it said 1 launch, and the
  // run "predicted speedup 1.00x").
  const std::string empty_rows = sample("softmax.txt") + " --dim N=3 --dim C=0";
  Result rows = run("run " + empty_rows + " --backend cpu --repeats 1 --json");
  REQUIRE_MESSAGE(rows.code == 0, rows.out);
  const nlohmann::json rj = nlohmann::json::parse(rows.out);
  CHECK(rj["fused"]["launches"] == 0);
  CHECK(rj["predicted_ratio"].is_null());
  CHECK(rj["plan"].get<std::string>().find("predicted speedup unbounded (the fused plan moves no bytes)") != std::string::npos);
  // The text says why the kernel column counts more kernels than ran (an auditor's find).
  Result text = run("run " + empty_rows + " --backend cpu --repeats 1");
  REQUIRE_MESSAGE(text.code == 0, text.out);
  CHECK_MESSAGE(text.out.find("note      fused: 0 launch(es) of 1 kernel(s): a kernel whose outputs have no elements at "
                              "these sizes is not launched") != std::string::npos, text.out);
  Result planned = run("plan " + empty_rows + " --json");
  REQUIRE_MESSAGE(planned.code == 0, planned.out);
  const nlohmann::json pj = nlohmann::json::parse(planned.out);
  CHECK(pj["fused"]["groups"][0]["launches"] == 0);
  CHECK(pj["traffic_ratio"] == 0.0);
}

TEST_CASE("run --json writes a non-finite param as the statistics do: \"nan\", \"inf\", \"-inf\"") {
  fs::path dir = scratch("nan-params");
  std::ofstream(dir / "g.txt") << "input x : f32[4]\nparam p : f32 = 0\nparam q : f32 = 0\ny = x + p + q\noutput y\n";
  SplitResult s = run_split("run " + (dir / "g.txt").string() + " --backend cpu --repeats 1 --param p=nan --param q=-inf --json");
  REQUIRE_MESSAGE(s.code == 0, s.err);
  const nlohmann::json j = nlohmann::json::parse(s.out);
  CHECK(j["params"]["p"] == "nan");  // it was null: the value lost
  CHECK(j["params"]["q"] == "-inf");
}

TEST_CASE("--no-cache: the build folder an interrupted run left in TMPDIR goes at the next run; one in use stays") {
  // A Ctrl-C'd run left its folder for an hour, though --help says nothing is left (hostile pass).
  const fs::path tmp = scratch("tmpdir-sweep"), left = tmp / "fusejit-lbuild-left", busy = tmp / "fusejit-lbuild-busy";
  const fs::path unlocked = tmp / "fusejit-build-young";  // no flock there (or an older fusejit's): by age only
  fs::create_directories(unlocked);
  fs::create_directories(left);
  std::ofstream(left / "module.cpp") << "int x;";
  fs::create_directories(busy);
  const int fd = ::open(busy.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_SH) == 0);  // as a build running in another process holds it
  {
    ScopedEnv t("TMPDIR", tmp.c_str());
    const Result r = run("run " + sample("x2x3.txt") + " --dim N=10 --backend cpu --no-cache");
    CHECK_MESSAGE(r.code == 0, r.out);
  }
  CHECK(!fs::exists(left));
  CHECK(fs::exists(busy));
  CHECK(fs::exists(unlocked));
  CHECK(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()) == 2);  // its own build went too
  ::close(fd);
  fs::remove_all(tmp);
}

TEST_CASE("compile -o and run --save-dir never write over the graph file or an input file") {
  // A graph named index.json in the dump folder was replaced by the dump's index; an --input file
  // in the --save-dir folder named as an output, by that output (hostile pass).
  const fs::path dir = scratch("no-overwrite");
  const std::string graph = "input x : f32[4]\ny = x * 2\noutput y\n";
  std::ofstream(dir / "index.json") << graph;
  Result r = run("compile " + (dir / "index.json").string() + " -o " + dir.string() + " --no-cache");
  CHECK(r.code == 2);
  CHECK(r.out.find("the dump would write its index.json over the graph file") != std::string::npos);
  CHECK(fusejit::testing::read_file(dir / "index.json") == graph);
  std::ofstream(dir / "graph.txt") << graph;  // graph.txt itself: written with its own text
  // (once that index.json, no index of fusejit's, is gone: the folder is not fusejit's while it is there)
  r = run("compile " + (dir / "graph.txt").string() + " -o " + dir.string() + " --no-cache");
  CHECK(r.code == 2);
  CHECK(r.out.find("is not one fusejit wrote: its index.json is not an index fusejit wrote") != std::string::npos);
  fs::remove(dir / "index.json");
  r = run("compile " + (dir / "graph.txt").string() + " -o " + dir.string() + " --no-cache");
  CHECK_MESSAGE(r.code == 0, r.out);
  CHECK(fusejit::testing::read_file(dir / "graph.txt") == graph);
  fusejit::ir::Tensor x(fusejit::ir::DType::F32, {4});
  fusejit::ir::write_npy((dir / "y.npy").string(), x);
  const std::string before = fusejit::testing::read_file(dir / "y.npy");
  r = run("run " + (dir / "graph.txt").string() + " --backend cpu --repeats 1 --input x=" + (dir / "y.npy").string() +
          " --save-dir " + dir.string());
  CHECK(r.code == 2);
  CHECK(r.out.find("output 'y' would be saved over " + (dir / "y.npy").string() + ", the file of input 'x'") !=
        std::string::npos);
  CHECK(fusejit::testing::read_file(dir / "y.npy") == before);
}

TEST_CASE("a run says what it did not do: no checks with --no-check, no special values or seed with file inputs only") {
  const fs::path dir = scratch("said");
  std::ofstream(dir / "g.txt") << "input x : f32[4]\ny = x * 2\noutput y\n";
  Result r = run("run " + (dir / "g.txt").string() + " --backend cpu --repeats 1 --no-check");
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("result    not checked (the checks were skipped)") != std::string::npos);
  CHECK(r.out.find("result    OK") == std::string::npos);
  fusejit::ir::write_npy((dir / "x.npy").string(), fusejit::ir::Tensor(fusejit::ir::DType::F32, {4}));
  const std::string files = "run " + (dir / "g.txt").string() + " --backend cpu --repeats 1 --special --seed 7 --input x=" +
                            (dir / "x.npy").string();
  r = run(files);
  REQUIRE_MESSAGE(r.code == 0, r.out);
  CHECK(r.out.find("run       no random inputs (x from .npy files)") != std::string::npos);
  const SplitResult s = run_split(files + " --json");
  REQUIRE_MESSAGE(s.code == 0, s.err);
  CHECK(nlohmann::json::parse(s.out)["special_values"] == false);
}
