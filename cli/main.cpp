// The `fusejit` command: a thin client of the public API (fusejit/fusejit.h, fusejit/report.h).
// Exit codes: 0 success; 1 a check failed or a runtime (compile/driver) error; 2 bad input
// (graph, options, files); 3 an internal error (a fusejit bug).
#include <CLI/CLI.hpp>

#include <cctype>
#include <cstdio>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <fusejit/fusejit.h>
#include <fusejit/report.h>

namespace fj = fusejit;

namespace {

int exit_code(const fj::Error& e) {
  switch (e.kind()) {
    case fj::ErrorKind::User: return 2;
    case fj::ErrorKind::Internal: return 3;
    default: return 1;
  }
}

// Splits "name=value"; throws CLI::ValidationError naming the option on a bad form.
std::pair<std::string, std::string> split_kv(const std::string& s, const std::string& option) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    throw CLI::ValidationError(option, "expected NAME=VALUE, got '" + s + "'");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

int64_t parse_int(const std::string& v, const std::string& what) {
  try {
    size_t pos = 0;
    // Decimal only (as in graph text): "010" is ten, not octal eight; no spaces.
    if (v.empty() || !(std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '-')) throw std::invalid_argument(v);
    long long x = std::stoll(v, &pos, 10);
    if (pos != v.size()) throw std::invalid_argument(v);
    return x;
  } catch (const std::out_of_range&) {
    throw CLI::ValidationError(what, "'" + v + "' is out of range for a 64-bit integer");
  } catch (const std::exception&) {
    throw CLI::ValidationError(what, "'" + v + "' is not an integer");
  }
}

fj::Scalar parse_scalar(const std::string& v, const std::string& what) {
  if (v == "true") return fj::Scalar(true);
  if (v == "false") return fj::Scalar(false);
  try {
    size_t pos = 0;
    long long x = std::stoll(v, &pos, 10);
    if (pos == v.size()) return fj::Scalar(static_cast<int64_t>(x));
  } catch (const std::exception&) {
  }
  if (!v.empty() && !std::isspace(static_cast<unsigned char>(v[0]))) {
    // strtod, not stod: an underflow to a subnormal (1e-320) is a value, only overflow is an error.
    errno = 0;
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (end == v.c_str() + v.size()) {
      if (errno == ERANGE && std::fabs(d) > 1.0) throw CLI::ValidationError(what, "'" + v + "' is out of range");
      return fj::Scalar(d);
    }
  }
  throw CLI::ValidationError(what, "'" + v + "' is not a number (use e.g. 0.5, 3, inf, nan, true)");
}

fj::DimValues parse_dims(const std::vector<std::string>& dims) {
  fj::DimValues out;
  for (const std::string& d : dims) {
    auto [k, v] = split_kv(d, "--dim");
    out.emplace_back(k, parse_int(v, "--dim " + k));
  }
  return out;
}

// "must be >= 0" without CLI11's NonNegativeNumber message (which prints the largest double).
const CLI::Validator kNonNegative(
    [](std::string& v) { return !v.empty() && v[0] == '-' ? std::string("must be >= 0") : std::string(); }, "NONNEGATIVE");

struct Common {
  std::string graph;
  std::vector<std::string> dims;
  bool fast_math = false;
};

void add_common(CLI::App* cmd, Common& c) {
  cmd->add_option("GRAPH", c.graph, "graph file (format: docs/graph-format.md)")->required();
  cmd->add_option("--dim", c.dims, "override a named dim, NAME=VALUE (repeatable)");
  cmd->add_flag("--fast-math", c.fast_math,
                "allow value-changing rewrites, FMA contraction and f32 intermediates (default: strict, bitwise)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fusejit: a runtime JIT kernel fuser for NVIDIA GPUs.\n"
               "Fuses graphs of elementwise ops into generated CUDA kernels (NVRTC, cached), runs them\n"
               "fused and unfused, and reports time, bytes moved, bandwidth and a bitwise check.",
               "fusejit"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(fj::version()));

  // fusejit run
  Common run_c;
  std::vector<std::string> params, inputs, ranges;
  uint64_t seed = 0;
  std::string save_dir, dump_dir, arch, backend = "auto", cache_dir;
  int device = 0, repeats = 20, warmup = 3;
  bool json = false, no_cache = false, no_check = false, special = false;
  CLI::App* run = app.add_subcommand("run", "run a graph fused and unfused, time, check and report");
  add_common(run, run_c);
  run->add_option("--param", params, "set a param, NAME=VALUE (repeatable)");
  run->add_option("--input", inputs, "read an input from a NumPy .npy file, NAME=FILE (repeatable)");
  run->add_option("--range", ranges, "random range of an input, NAME=LO:HI (repeatable; overrides the graph's `range`)");
  run->add_option("--seed", seed, "seed of the deterministic random inputs (0 to 2^64-1)")
      ->default_val(0)->check(kNonNegative);
  run->add_flag("--special", special,
                "mix hard cases into random inputs: NaN, +-inf, -0.0, subnormals, extremes (docs/ops.md)");
  run->add_option("--save-dir", save_dir, "write each output as DIR/<name>.npy");
  run->add_option("--dump-dir", dump_dir, "write every kernel's .cu (and .cubin/.ptx) with an index.json");
  run->add_option("--arch", arch, "target architecture: sm_XY (CUBIN) or compute_XY (PTX); default: the GPU's");
  std::vector<std::string> run_nvrtc;
  run->add_option("--nvrtc-option", run_nvrtc,
                  "extra NVRTC option for every GPU kernel, e.g. --nvrtc-option=--maxrregcount=32 (repeatable)");
  run->add_option("--backend", backend, "auto (GPU if present), cuda, or cpu")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))->default_val("auto");
  run->add_option("--device", device, "CUDA device ordinal")->default_val(0)->check(kNonNegative);
  run->add_option("--repeats", repeats, "timed runs per path; the median is reported")
      ->default_val(20)->check(CLI::Range(1, 100000));
  run->add_option("--warmup", warmup, "untimed runs before timing")->default_val(3)->check(CLI::Range(0, 100000));
  run->add_option("--cache-dir", cache_dir,
                  "kernel cache folder, private to you (default: $FUSEJIT_CACHE_DIR, $XDG_CACHE_HOME/fusejit, ~/.cache/fusejit)");
  run->add_flag("--no-cache", no_cache, "do not read or write the on-disk kernel cache (nothing is left on disk)");
  run->add_flag("--no-check", no_check, "skip the reference evaluation and checks");
  run->add_flag("--json", json, "print the report as JSON");

  // fusejit plan
  Common plan_c;
  bool plan_dot = false, plan_json = false;
  CLI::App* plan = app.add_subcommand("plan", "print the rewritten graph and its fusion plan");
  add_common(plan, plan_c);
  plan->add_flag("--dot", plan_dot, "print the plan as Graphviz DOT (one cluster per fusion group)");
  plan->add_flag("--json", plan_json, "print the plan as JSON");

  // fusejit compile
  Common comp_c;
  std::string comp_arch = "sm_90", out_dir;
  bool ptx = false;
  CLI::App* comp = app.add_subcommand("compile", "generate and compile every kernel ahead of time (no GPU needed)");
  add_common(comp, comp_c);
  comp->add_option("--arch", comp_arch, "target: sm_XY (or compute_XY for PTX)")->default_val("sm_90");
  comp->add_flag("--ptx", ptx, "emit PTX for compute_XY instead of a CUBIN");
  comp->add_option("-o,--out", out_dir, "output folder")->required();
  std::string comp_cache_dir;
  bool comp_no_cache = false;
  comp->add_option("--cache-dir", comp_cache_dir, "kernel cache folder (default as for run)");
  comp->add_flag("--no-cache", comp_no_cache, "do not read or write the on-disk kernel cache");
  std::vector<std::string> comp_nvrtc;
  comp->add_option("--nvrtc-option", comp_nvrtc, "extra NVRTC option, e.g. --nvrtc-option=--maxrregcount=32 (repeatable)");

  // fusejit cache
  CLI::App* cache = app.add_subcommand("cache", "inspect or clear the on-disk kernel cache (GPU kernels and CPU modules)");
  cache->require_subcommand(1);
  std::string cache_opt_dir;
  cache->add_option("--cache-dir", cache_opt_dir, "cache folder (default as for run)");
  CLI::App* c_stats = cache->add_subcommand("stats", "entries, bytes and the size cap");
  CLI::App* c_list = cache->add_subcommand("list", "one line per entry: key, bytes, target (sm_XY, compute_XY or host), kernel name(s)");
  CLI::App* c_clear = cache->add_subcommand("clear", "remove every entry and temporary file");
  CLI::App* c_path = cache->add_subcommand("path", "print the cache folder");
  for (CLI::App* c : {c_stats, c_list, c_clear, c_path}) c->fallthrough();  // `cache stats --cache-dir X` works too

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  try {
    if (*run) {
      fj::RunOptions ro;
      for (const std::string& p : params) {
        auto [k, v] = split_kv(p, "--param");
        ro.params.set(k, parse_scalar(v, "--param " + k));
      }
      for (const std::string& i : inputs) {
        auto kv = split_kv(i, "--input");
        for (const auto& prev : ro.input_files)
          if (prev.first == kv.first) throw CLI::ValidationError("--input", "input '" + kv.first + "' is given twice");
        ro.input_files.push_back(kv);
      }
      for (const std::string& r : ranges) {
        auto [k, v] = split_kv(r, "--range");
        auto colon = v.find(':');
        if (colon == std::string::npos) throw CLI::ValidationError("--range", "expected NAME=LO:HI, got '" + r + "'");
        double lo = parse_scalar(v.substr(0, colon), "--range " + k).as_double();
        double hi = parse_scalar(v.substr(colon + 1), "--range " + k).as_double();
        if (!(lo < hi)) throw CLI::ValidationError("--range", "need LO < HI in '" + r + "'");
        ro.input_ranges.push_back({k, {lo, hi}});
      }
      ro.seed = seed;
      ro.special_values = special;
      ro.save_dir = save_dir;
      ro.repeats = repeats;
      ro.warmup = warmup;
      ro.check = !no_check;
      ro.options.fast_math = run_c.fast_math;
      ro.options.arch = arch;
      ro.options.dump_dir = dump_dir;
      ro.options.device = device;
      ro.options.cache_dir = cache_dir;
      ro.options.disk_cache = !no_cache;
      ro.options.nvrtc_options = run_nvrtc;
      ro.options.message_style = fj::MessageStyle::CommandLine;
      ro.options.backend = backend == "cuda" ? fj::Backend::Cuda : backend == "cpu" ? fj::Backend::Cpu : fj::Backend::Auto;
      fj::Graph g = fj::Graph::load(run_c.graph, parse_dims(run_c.dims));
      fj::RunReport rep = fj::run_graph(g, ro);
      std::fputs((json ? rep.to_json() + "\n" : rep.to_text()).c_str(), stdout);
      return rep.ok() ? 0 : 1;
    }
    if (*plan) {
      fj::Graph g = fj::Graph::load(plan_c.graph, parse_dims(plan_c.dims));
      fj::PlanReport rep = fj::plan_graph(g, plan_c.fast_math);
      std::fputs((plan_dot ? rep.dot : plan_json ? rep.json + "\n" : rep.text).c_str(), stdout);
      return 0;
    }
    if (*comp) {
      fj::Graph g = fj::Graph::load(comp_c.graph, parse_dims(comp_c.dims));
      std::string a = comp_arch;
      if (ptx && a.rfind("sm_", 0) == 0) a = "compute_" + a.substr(3);
      fj::Options co;
      co.cache_dir = comp_cache_dir;
      co.disk_cache = !comp_no_cache;
      co.nvrtc_options = comp_nvrtc;
      co.message_style = fj::MessageStyle::CommandLine;
      auto kernels = fj::compile_to_dir(g, a, out_dir, comp_c.fast_math, co);
      std::printf("compiled %zu kernel(s) for %s into %s (index.json lists them)\n", kernels.size(), a.c_str(),
                  out_dir.c_str());
      return 0;
    }
    if (*cache) {
      fj::Options o;
      o.cache_dir = cache_opt_dir;
      if (*c_path) {
        std::printf("%s\n", fj::cache_path(o).c_str());
      } else if (*c_stats) {
        fj::CacheStats s = fj::cache_stats(o);
        std::printf("path:         %s%s%s\nGPU kernels:  %lld entries, %lld bytes\nCPU modules:  %lld, %lld bytes\n"
                    "cap:          %lld bytes for all entries (least recently used evicted first)\n"
                    "damaged:      %lld entries (rebuilt on next use); %lld temporary files\n",
                    s.path.c_str(), s.enabled ? "" : " (disk cache off: ", s.enabled ? "" : (s.disabled_reason + ")").c_str(),
                    static_cast<long long>(s.entries), static_cast<long long>(s.bytes),
                    static_cast<long long>(s.host_modules), static_cast<long long>(s.host_bytes),
                    static_cast<long long>(s.cap_bytes), static_cast<long long>(s.invalid),
                    static_cast<long long>(s.temp_files));
      } else if (*c_list) {
        const std::vector<fj::CacheEntryInfo> entries = fj::cache_list(o);
        for (const fj::CacheEntryInfo& e : entries)
          std::printf("%s %10lld %-12s %s%s\n", e.key.c_str(), static_cast<long long>(e.bytes), e.target.c_str(),
                      e.label.c_str(), e.valid ? "" : "  (damaged: deleted on next load)");
        if (entries.empty()) std::printf("no entries in %s\n", fj::cache_path(o).c_str());
      } else if (*c_clear) {
        long long n = static_cast<long long>(fj::cache_clear(o));
        std::printf("removed %lld entr%s\n", n, n == 1 ? "y" : "ies");
      }
      return 0;
    }
  } catch (const CLI::ValidationError& e) {
    std::fprintf(stderr, "fusejit: error: %s\n", e.what());
    return 2;
  } catch (const fj::Error& e) {
    std::string d = e.diagnostic();
    while (!d.empty() && d.back() == '\n') d.pop_back();
    // Errors without a file location read like the command line's own: "fusejit: error: ...".
    if (d.rfind("error: ", 0) == 0 || d.rfind("internal error", 0) == 0) d = "fusejit: " + d;
    std::fprintf(stderr, "%s\n", d.c_str());
    return exit_code(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fusejit: internal error: %s\n", e.what());
    return 3;
  }
  return 0;
}
