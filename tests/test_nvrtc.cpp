// NVRTC wrapper: real compiles for several architectures (no GPU needed), PTX output, failure
// reports (log, options, numbered source, graph lines), nothing on stdout, no cache entry.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "jit/arch.h"
#include "jit/codegen.h"
#include "jit/cache.h"
#include "jit/nvrtc.h"

using namespace fusejit::jit;
namespace fs = std::filesystem;

namespace {

// A self-contained kernel like the generated ones: no includes, extern "C", graph line tags.
const std::string kGood = R"(// test kernel
extern "C" __global__ void fj_test_axpb(const float* __restrict__ x, float* __restrict__ y, float a, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    float v0 = x[i];        // %0 = input x      [graph.txt:1]
    float v1 = v0 * a;      // %1 = mul %0, a    [graph.txt:3]
    y[i] = v1 + 1.0f;       // %2 = add %1, 1    [graph.txt:4]
  }
}
)";

// Line 5 uses an undefined name; its tag points at graph line 7.
const std::string kBad = R"(// broken kernel
extern "C" __global__ void fj_test_bad(const float* x, float* y, long long n) {
  for (long long i = threadIdx.x; i < n; i += blockDim.x) {
    float v0 = x[i];            // %0 = input x   [graph.txt:2]
    float v1 = fj_nope(v0);     // %1 = nope %0   [graph.txt:7]
    y[i] = v1;                  // output         [graph.txt:8]
  }
}
)";

bool is_elf(const std::vector<char>& b) { return b.size() > 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F'; }

fs::path make_temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "fj-nvrtc-XXXXXX").string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

}  // namespace

TEST_CASE("NVRTC version is reported") {
  NvrtcVersion v = nvrtc_version();
  CHECK(v.major >= 12);
  CHECK(v.str() == std::to_string(v.major) + "." + std::to_string(v.minor));
  // The cache's name for it adds the library's size (patch releases share major.minor).
  const std::string id = nvrtc_identity();
  CAPTURE(id);
  CHECK(id.rfind(v.str() + " (", 0) == 0);
  CHECK(id.size() > v.str().size() + 8);
  CHECK(id.substr(id.size() - 7) == " bytes)");
}

TEST_CASE("a small kernel compiles to CUBIN for sm_75, sm_80, sm_90 and sm_100") {
  for (const char* arch : {"sm_75", "sm_80", "sm_90", "sm_100"}) {
    CAPTURE(arch);
    CompileRequest req{parse_target(arch), default_compile_options(false), {}};
    CompileResult r = compile_cuda(kGood, "fj_test_axpb.cu", req);
    CHECK(is_elf(r.binary));
    CHECK(r.target == req.target);
    CHECK(r.compile_ms > 0);
    CHECK(std::string(r.binary.begin(), r.binary.end()).find("fj_test_axpb") != std::string::npos);
  }
}

// bf16 params and half arithmetic on sm_75 (no bf16 instructions: software rounding in every vector
// lane). The branchy rounding once made NVRTC's optimizer run for minutes on these; it must take
// well under a few seconds.
TEST_CASE("bf16-heavy kernels compile quickly for sm_75") {
  for (const char* text : {"param a : bf16 = 1\nparam b : bf16 = 2\ny = a + b\noutput y\n",
                           "param a : bf16 = 1\nparam b : bf16 = 2\ninput x : f32[64]\ny = a + b + x\noutput y\n",
                           "input x : bf16[64]\ninput s : bf16[64]\ny = (x * s + x) * s - x\noutput y\n"}) {
    CAPTURE(text);
    fusejit::ir::Graph g = fusejit::ir::parse_graph(text, "bf16.txt");
    for (const fusejit::ir::Plan& plan : {fusejit::ir::plan_fusion(g), fusejit::ir::plan_unfused(g)}) {
      std::vector<GeneratedKernel> ks = generate_plan_kernels(g, plan);
      TranslationUnit tu = emit_translation_unit(ks);
      CompileRequest req{parse_target("sm_75"), default_compile_options(false), {}};
      for (const std::string& o : tu.nvrtc_options) req.options.push_back(o);
      const auto t0 = std::chrono::steady_clock::now();
      CompileResult r = compile_cuda(tu.source, "bf16_sm75.cu", req);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      CHECK(!r.binary.empty());
      CHECK(s < 20.0);  // seconds; a few hundred ms normally
    }
  }
}

TEST_CASE("compute_XY produces PTX text for that virtual architecture") {
  CompileRequest req{parse_target("compute_90"), default_compile_options(false), {}};
  CompileResult r = compile_cuda(kGood, "fj_test_axpb.cu", req);
  REQUIRE(!r.binary.empty());
  CHECK(r.binary.back() == '\0');
  std::string ptx(r.binary.data());
  CHECK(ptx.find(".target sm_90") != std::string::npos);
  CHECK(ptx.find(".entry fj_test_axpb") != std::string::npos);
  // --fmad=false: the multiply and add stay separate instructions (no fma contraction).
  CHECK(ptx.find("fma.rn.f32") == std::string::npos);
  CHECK(ptx.find("mul.rn.f32") != std::string::npos);
}

TEST_CASE("fast mode options allow contraction into FMA") {
  CompileRequest req{parse_target("compute_90"), default_compile_options(true), {}};
  std::string ptx(compile_cuda(kGood, "fj_test_axpb.cu", req).binary.data());
  CHECK(ptx.find("fma.rn") != std::string::npos);
}

TEST_CASE("default options never carry include paths") {
  for (bool fast : {false, true})
    for (const auto& o : default_compile_options(fast)) CHECK(o.rfind("-I", 0) != 0);
  auto strict = default_compile_options(false);
  CHECK(std::find(strict.begin(), strict.end(), "--fmad=false") != strict.end());
}

TEST_CASE("lowered names of name expressions") {
  const std::string src = "template <typename T> __global__ void k(T* p) { p[0] = T(1); }\n";
  CompileRequest req{parse_target("sm_80"), {"--std=c++17"}, {"k<float>", "k<int>"}};
  CompileResult r = compile_cuda(src, "tmpl.cu", req);
  REQUIRE(r.lowered_names.size() == 2);
  CHECK(r.lowered_names[0].first == "k<float>");
  CHECK(r.lowered_names[0].second == "_Z1kIfEvPT_");
  CHECK(r.lowered_names[1].second == "_Z1kIiEvPT_");
}

TEST_CASE("a syntax error reports log, options, numbered source and graph lines, on no stream") {
  // Capture fd 1 and 2 around the failing compile: the wrapper must print nothing.
  std::fflush(stdout);
  std::fflush(stderr);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture);
  int saved_out = ::dup(1), saved_err = ::dup(2);
  ::dup2(::fileno(capture), 1);
  ::dup2(::fileno(capture), 2);
  std::string message;
  bool threw = false;
  std::vector<std::string> refs, options;
  std::string log;
  try {
    compile_cuda(kBad, "fj_test_bad.cu", CompileRequest{parse_target("sm_90"), default_compile_options(false), {}});
  } catch (const CompileError& e) {
    threw = true;
    message = e.what();
    refs = e.graph_refs();
    options = e.options();
    log = e.log();
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  ::close(saved_out);
  ::close(saved_err);
  std::fseek(capture, 0, SEEK_END);
  CHECK(std::ftell(capture) == 0);
  std::fclose(capture);

  REQUIRE(threw);
  CHECK(log.find("fj_test_bad.cu(5): error") != std::string::npos);
  CHECK(log.find("fj_nope") != std::string::npos);
  CHECK(message.find(log) != std::string::npos);                       // the NVRTC log
  CHECK(message.find("--fmad=false") != std::string::npos);            // the options
  CHECK(message.find("--gpu-architecture=sm_90") != std::string::npos);
  CHECK(message.find(">5 |     float v1 = fj_nope(v0);") != std::string::npos);  // numbered, marked
  CHECK(message.find(" 1 | // broken kernel") != std::string::npos);
  CHECK(message.find("fj_test_bad.cu(5) comes from graph.txt:7") != std::string::npos);
  REQUIRE(refs.size() == 1);
  CHECK(refs[0] == "graph.txt:7");
  CHECK(options.front() == "--gpu-architecture=sm_90");
}

TEST_CASE("a failed compile leaves no cache entry and is retried next time") {
  fs::path dir = make_temp_dir();
  KernelCache cache(CacheConfig{dir, kDefaultCacheMaxBytes, true, true, [](const std::string&) {}});
  CompileRequest req{parse_target("sm_80"), default_compile_options(false), {}};
  DiskKeyInputs in = make_key_inputs(kBad, req, "test-codegen-1");
  int calls = 0;
  auto compile = [&] {
    ++calls;
    return compile_cuda(in.source, "fj_test_bad.cu", compile_request_of(in));
  };
  CHECK_THROWS_AS(cache.get_or_compile(in, compile), CompileError);
  CHECK_THROWS_AS(cache.get_or_compile(in, compile), CompileError);
  CHECK(calls == 2);  // failures are not cached in memory either
  CHECK(list_cache(dir).empty());
  CHECK(cache_stats(dir).temp_files == 0);

  // The good kernel through the same cache: compiled once, then a memory hit, then a disk hit.
  DiskKeyInputs good = make_key_inputs(kGood, req, "test-codegen-1");
  auto compile_good = [&] { return compile_cuda(good.source, "fj_test_axpb.cu", compile_request_of(good)); };
  CacheResult a = cache.get_or_compile(good, compile_good, "fj_test_axpb");
  CHECK(a.outcome == CacheOutcome::Compiled);
  CHECK(a.compile_ms > 0);
  CHECK(is_elf(*a.kernel->binary));
  CHECK(cache.get_or_compile(good, compile_good).outcome == CacheOutcome::MemoryHit);
  KernelCache fresh(CacheConfig{dir, kDefaultCacheMaxBytes, true, true, {}});
  CacheResult b = fresh.get_or_compile(good, [&]() -> CompileResult { FAIL("must not compile"); return {}; });
  CHECK(b.outcome == CacheOutcome::DiskHit);
  CHECK(*b.kernel->binary == *a.kernel->binary);
  auto entries = list_cache(dir);
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].valid);
  CHECK(entries[0].target == "sm_80");
  CHECK(entries[0].label == "fj_test_axpb");
  fs::remove_all(dir);
}

TEST_CASE("helpers: numbered lines, log parsing and graph tags") {
  CHECK(number_source_lines("a\nb\n") == " 1 | a\n 2 | b\n");
  CHECK(number_source_lines("a\nb\nc", {2}, 2, 3) == ">2 | b\n 3 | c\n");
  std::string log = "p.cu(12): error: x\np.cu(3): warning: y\nq.cu(4): error: z\np.cu(12): error: again\np.cu(7): error: w";
  CHECK(error_lines_from_log(log, "p.cu") == std::vector<int>{12, 7});
  std::string src = "x\n  y = 1; // [a.txt:4] note [g.txt:19]\n z [not a tag]\n[x y:3]\n";
  CHECK(graph_ref_of_line(src, 2) == "g.txt:19");
  CHECK(graph_ref_of_line(src, 1) == "");
  CHECK(graph_ref_of_line(src, 3) == "");
  CHECK(graph_ref_of_line(src, 4) == "");
  CHECK(graph_ref_of_line(src, 99) == "");
}

TEST_CASE("a long source is excerpted around the error lines") {
  std::string src;
  for (int i = 1; i < 500; ++i) src += "// filler line " + std::to_string(i) + "\n";
  src += "__global__ void k() { undefined_thing(); }  // [big.txt:42]\n";
  for (int i = 501; i <= 600; ++i) src += "// filler line " + std::to_string(i) + "\n";
  try {
    compile_cuda(src, "big.cu", CompileRequest{parse_target("sm_80"), {}, {}});
    FAIL("must not compile");
  } catch (const CompileError& e) {
    std::string m = e.what();
    CHECK(m.find("showing the lines around each error") != std::string::npos);
    CHECK(m.find(">500 | __global__ void k()") != std::string::npos);
    CHECK(m.find(" 497 | // filler line 497") != std::string::npos);
    CHECK(m.find("filler line 100\n") == std::string::npos);
    CHECK(m.find("big.cu(500) comes from big.txt:42") != std::string::npos);
    CHECK(e.source() == src);
  }
}

TEST_CASE("a long source whose failure names no line shows its head; the cache keeps it whole") {
  // ptxas, not the front end, refuses too much static shared memory: the log names no source line.
  std::string src = "__shared__ char fj_big[200000];\n"
                    "extern \"C\" __global__ void k(char* p) { fj_big[threadIdx.x] = 1; p[0] = fj_big[p[1]]; }\n";
  for (int i = 3; i <= 600; ++i) src += "// filler line " + std::to_string(i) + "\n";
  const auto dir = std::filesystem::temp_directory_path() / ("fj_test_kept_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  for (const bool disk : {true, false}) {
    CAPTURE(disk);
    CacheConfig config;
    config.dir = dir;
    config.disk = disk;
    KernelCache cache(config);
    const CompileRequest req{parse_target("sm_80"), {}, {}};
    try {
      compile_cached(cache, src, "big_smem.cu", req, "test", "big_smem");
      FAIL("must not compile");
    } catch (const CompileError& e) {
      std::string m = e.what();
      CHECK(m.find("(600 lines; the first 40)") != std::string::npos);
      CHECK(m.find("  40 | // filler line 40\n") != std::string::npos);
      CHECK(m.find("filler line 41\n") == std::string::npos);
      CHECK(m.find("   ... (560 more lines)\n") != std::string::npos);
      CHECK(e.source() == src);
      const std::string tag = "source kept for inspection: ";
      const size_t at = m.find(tag);
      if (!disk) {
        CHECK(m.find("source not kept: the disk cache is off") != std::string::npos);
        continue;
      }
      REQUIRE(at != std::string::npos);
      const std::string path = m.substr(at + tag.size(), m.find('\n', at) - at - tag.size());
      CHECK(std::filesystem::path(path).filename() == "big_smem.cu");
      CHECK(path.rfind(dir.string(), 0) == 0);
      std::ifstream in(path, std::ios::binary);
      CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == src);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("concurrent compiles of different programs from several threads") {
  std::vector<std::thread> threads;
  std::vector<std::string> ptx(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string src = "extern \"C\" __global__ void k" + std::to_string(t) + "(float* p) { p[0] = " +
                        std::to_string(t) + ".0f; }\n";
      ptx[static_cast<size_t>(t)] =
          compile_cuda(src, "k.cu", CompileRequest{parse_target("compute_80"), {}, {}}).binary.data();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) CHECK(ptx[static_cast<size_t>(t)].find(".entry k" + std::to_string(t)) != std::string::npos);
}

TEST_CASE("compile_cached: NVRTC on a miss, the disk on the next process") {
  fs::path dir = make_temp_dir();
  CompileRequest req{parse_target("sm_90"), default_compile_options(false), {}};
  KernelCache a(CacheConfig{dir, kDefaultCacheMaxBytes, true, true, {}});
  CacheResult r1 = compile_cached(a, kGood, "fj_test_axpb.cu", req, "cg-1");
  CHECK(r1.outcome == CacheOutcome::Compiled);
  CHECK(is_elf(*r1.kernel->binary));
  CHECK(compile_cached(a, kGood, "fj_test_axpb.cu", req, "cg-1").outcome == CacheOutcome::MemoryHit);
  KernelCache b(CacheConfig{dir, kDefaultCacheMaxBytes, true, true, {}});
  CacheResult r2 = compile_cached(b, kGood, "fj_test_axpb.cu", req, "cg-1");
  CHECK(r2.outcome == CacheOutcome::DiskHit);
  CHECK(*r2.kernel->binary == *r1.kernel->binary);
  // A different codegen version or option is a different kernel.
  CHECK(compile_cached(b, kGood, "fj_test_axpb.cu", req, "cg-2").outcome == CacheOutcome::Compiled);
  CompileRequest fast{parse_target("sm_90"), default_compile_options(true), {}};
  CHECK(compile_cached(b, kGood, "fj_test_axpb.cu", fast, "cg-1").outcome == CacheOutcome::Compiled);
  CHECK(list_cache(dir).size() == 3);
  CompileRequest named = req;
  named.name_expressions = {"x"};
  CHECK_THROWS(compile_cached(b, kGood, "fj_test_axpb.cu", named, "cg-1"));
  fs::remove_all(dir);
}
