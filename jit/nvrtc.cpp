#include "jit/nvrtc.h"

#include "ir/error.h"
#include "jit/driver.h"
#include "jit/fork.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <fmt/format.h>
#include <nvrtc.h>  // types and constants only: every function is called through NvrtcApi

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>

#ifndef FUSEJIT_NVRTC_SOMAJOR
#define FUSEJIT_NVRTC_SOMAJOR 13
#endif
#ifndef FUSEJIT_CUDA_LIBDIR
#define FUSEJIT_CUDA_LIBDIR ""
#endif

namespace fusejit::jit {

namespace {

// The NVRTC entry points fusejit calls, resolved with dlsym (their C names are stable across
// CUDA 12 and 13).
struct NvrtcApi {
  nvrtcResult (*nvrtcVersion)(int*, int*) = nullptr;
  const char* (*nvrtcGetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                                    const char* const*) = nullptr;
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*nvrtcAddNameExpression)(nvrtcProgram, const char*) = nullptr;
  nvrtcResult (*nvrtcGetLoweredName)(nvrtcProgram, const char*, const char**) = nullptr;
  nvrtcResult (*nvrtcGetNumSupportedArchs)(int*) = nullptr;
  nvrtcResult (*nvrtcGetSupportedArchs)(int*) = nullptr;
};

// The loaded library (never dlclose'd: kernels compiled by it may still be referenced).
struct Loaded {
  bool ok = false;
  std::string reason;
  NvrtcApi api;
  int64_t library_bytes = -1;  // the loaded libnvrtc's size: tells patch releases of one version apart
};

// The size of the file the library holding `symbol` was loaded from, -1 if unknown.
int64_t library_bytes_of(void* symbol) {
  Dl_info info{};
  struct stat st{};
  if (symbol == nullptr || ::dladdr(symbol, &info) == 0 || info.dli_fname == nullptr ||
      ::stat(info.dli_fname, &st) != 0)
    return -1;
  return static_cast<int64_t>(st.st_size);
}

// The library loaded, never destroyed: a compile from a destructor run at the process's end (after
// this file's globals would have gone) still finds it.
struct NvrtcState {
  std::mutex mutex;
  std::shared_ptr<const Loaded> loaded;                // guarded by mutex
  std::optional<std::string> override_library;        // reload_nvrtc_for_testing
};
NvrtcState& nvrtc_state() {
  static NvrtcState* const state = new NvrtcState;
  return *state;
}

// Resolves every entry point from `h`; false (naming the missing ones) when some are absent.
bool resolve_all(void* h, NvrtcApi& a, std::string& missing) {
  auto sym = [&](const char* name, auto& slot) {
    void* p = dlsym(h, name);
    if (!p) missing += (missing.empty() ? "" : ", ") + std::string(name);
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
  };
  sym("nvrtcVersion", a.nvrtcVersion);
  sym("nvrtcGetErrorString", a.nvrtcGetErrorString);
  sym("nvrtcCreateProgram", a.nvrtcCreateProgram);
  sym("nvrtcDestroyProgram", a.nvrtcDestroyProgram);
  sym("nvrtcCompileProgram", a.nvrtcCompileProgram);
  sym("nvrtcGetProgramLogSize", a.nvrtcGetProgramLogSize);
  sym("nvrtcGetProgramLog", a.nvrtcGetProgramLog);
  sym("nvrtcGetCUBINSize", a.nvrtcGetCUBINSize);
  sym("nvrtcGetCUBIN", a.nvrtcGetCUBIN);
  sym("nvrtcGetPTXSize", a.nvrtcGetPTXSize);
  sym("nvrtcGetPTX", a.nvrtcGetPTX);
  sym("nvrtcAddNameExpression", a.nvrtcAddNameExpression);
  sym("nvrtcGetLoweredName", a.nvrtcGetLoweredName);
  sym("nvrtcGetNumSupportedArchs", a.nvrtcGetNumSupportedArchs);
  sym("nvrtcGetSupportedArchs", a.nvrtcGetSupportedArchs);
  return missing.empty();
}

// The CUDA version of the installed driver (cuDriverGetVersion needs no cuInit), 0 without one.
// The driver itself, not the test hook's (set_driver_for_testing): NVRTC is loaded once a process.
int installed_driver_version() {
  void* h = locked_dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // never closed, as jit/driver.cpp
  return h == nullptr ? 0 : libcuda_version(h);
}

std::shared_ptr<const Loaded> load_nvrtc(const std::optional<std::string>& only) {
  auto l = std::make_shared<Loaded>();
  std::vector<std::string> tried;
  std::vector<std::string> candidates;
  if (only) candidates = {*only};
  else if (const char* env = std::getenv("FUSEJIT_NVRTC"); env && *env) candidates = {env};
  else candidates = nvrtc_search_order(installed_driver_version());
  for (const std::string& c : candidates) {
    dlerror();
    void* h = locked_dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char* e = dlerror();
      tried.push_back(e ? e : c + ": not found");
      continue;
    }
    std::string missing;
    if (resolve_all(h, l->api, missing)) {
      l->ok = true;
      l->library_bytes = library_bytes_of(reinterpret_cast<void*>(l->api.nvrtcVersion));
      return l;
    }
    tried.push_back(c + " lacks " + missing);
  }
  std::string list;
  for (size_t i = 0; i < tried.size() && i < 4; ++i) list += (i ? "; " : "") + tried[i];
  if (tried.size() > 4) list += fmt::format("; and {} more places", tried.size() - 4);
  l->reason = fmt::format("NVRTC, the CUDA toolkit's runtime compiler, is not available ({}): install it (e.g. the "
                          "cuda-nvrtc package of your CUDA version) or set FUSEJIT_NVRTC to libnvrtc.so's path",
                          list);
  return l;
}

std::shared_ptr<const Loaded> loaded_nvrtc() {
  NvrtcState& st = nvrtc_state();
  std::lock_guard lock(st.mutex);
  if (!st.loaded) st.loaded = load_nvrtc(st.override_library);
  return st.loaded;
}

// The entry points (a copy: a reload for testing may free the table meanwhile, and the library is
// never closed); throws NvrtcUnavailable. No thread_local: a compile from a destructor run at a
// thread's or the process's end would find one destroyed.
NvrtcApi api() {
  const std::shared_ptr<const Loaded> l = loaded_nvrtc();
  if (!l->ok) throw NvrtcUnavailable(l->reason);
  return l->api;
}

// Splits into lines without their '\n' (a trailing newline does not add an empty line).
std::vector<std::string_view> split_lines(const std::string& s) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    lines.emplace_back(s.data() + start, end - start);
    start = end + 1;
  }
  return lines;
}

std::string join_options(const std::vector<std::string>& options) {
  std::string s;
  for (const auto& o : options) s += (s.empty() ? "" : " ") + o;
  return s;
}

struct ProgramDeleter {
  void operator()(nvrtcProgram* p) const {
    api().nvrtcDestroyProgram(p);
    delete p;
  }
};

std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  if (api().nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string log(size, '\0');
  if (api().nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// The source part of a CompileError: everything when short, else the lines around each error, or
// the head of the source when the log names no line (a ptxas limit; the kernel cache keeps the
// whole source on disk for such errors: KernelCache).
std::string source_excerpt(const std::string& source, const std::vector<int>& lines) {
  constexpr int kHead = 40;
  const int total = static_cast<int>(split_lines(source).size());
  if (total <= kCompileErrorSourceLines) return number_source_lines(source, lines);
  if (lines.empty()) {
    return fmt::format("({} lines; the first {})\n", total, kHead) + number_source_lines(source, {}, 1, kHead) +
           fmt::format("   ... ({} more lines)\n", total - kHead);
  }
  std::vector<std::pair<int, int>> ranges;
  for (int l : lines) {
    int a = std::max(1, l - 4), b = std::min(total, l + 4);
    if (!ranges.empty() && a <= ranges.back().second + 1) ranges.back().second = std::max(ranges.back().second, b);
    else ranges.emplace_back(a, b);
  }
  std::string out = fmt::format("({} lines; showing the lines around each error)\n", total);
  for (auto [a, b] : ranges) out += number_source_lines(source, lines, a, b) + "   ...\n";
  return out;
}

[[noreturn]] void fail(const std::string& headline, const std::string& log, const std::vector<std::string>& options,
                       const std::string& source, const std::string& program_name) {
  std::vector<int> lines = error_lines_from_log(log, program_name);
  std::vector<std::string> refs;
  std::string mapped;
  for (int l : lines) {
    std::string ref = graph_ref_of_line(source, l);
    if (ref.empty()) continue;
    mapped += fmt::format("  {}({}) comes from {}\n", program_name, l, ref);
    refs.push_back(std::move(ref));
  }
  std::string msg = headline + "\n";
  if (!mapped.empty()) msg += "generated lines mapped to the graph:\n" + mapped;
  msg += "NVRTC options: " + join_options(options) + "\n";
  msg += "NVRTC log:\n" + (log.empty() ? std::string("  (empty)") : log) + "\n";
  msg += "generated source (" + program_name + "):\n" + source_excerpt(source, lines);
  throw CompileError(std::move(msg), log, options, source, std::move(refs));
}

}  // namespace

std::vector<std::string> nvrtc_search_order(int driver_cuda_version) {
  std::vector<std::string> names;
  // A driver runs what an NVRTC of its own major version or older built, not a newer major's
  // (CUDA Compatibility, "Minor Version Compatibility"): with a CUDA 12 driver, NVRTC 12 first.
  const int driver_major = driver_cuda_version / 1000;
  if (driver_major > 0 && driver_major < FUSEJIT_NVRTC_SOMAJOR) names.push_back("libnvrtc.so." + std::to_string(driver_major));
  for (const std::string& n : {"libnvrtc.so." + std::to_string(FUSEJIT_NVRTC_SOMAJOR), std::string("libnvrtc.so.13"),
                               std::string("libnvrtc.so.12"), std::string("libnvrtc.so")})
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  std::vector<std::string> out = names;
  std::vector<std::string> roots;
  for (const char* env : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(env); v && *v) roots.push_back(v);
  roots.push_back("/usr/local/cuda");
  std::vector<std::string> dirs;
  for (const std::string& r : roots)
    for (const char* sub : {"/lib64", "/targets/x86_64-linux/lib", "/targets/sbsa-linux/lib"}) dirs.push_back(r + sub);
  if (*FUSEJIT_CUDA_LIBDIR) dirs.push_back(FUSEJIT_CUDA_LIBDIR);
  for (const std::string& d : dirs)
    for (const std::string& n : names) out.push_back(d + "/" + n);
  return out;
}

std::string NvrtcVersion::str() const { return major ? fmt::format("{}.{}", major, minor) : "unavailable"; }

NvrtcVersion nvrtc_version() {
  const std::shared_ptr<const Loaded> l = loaded_nvrtc();
  NvrtcVersion r;
  if (!l->ok || l->api.nvrtcVersion(&r.major, &r.minor) != NVRTC_SUCCESS) r = NvrtcVersion{};
  return r;
}

std::string nvrtc_identity() {
  const std::shared_ptr<const Loaded> l = loaded_nvrtc();
  const std::string version = nvrtc_version().str();
  return l->library_bytes >= 0 ? fmt::format("{} ({} bytes)", version, l->library_bytes) : version;
}

bool nvrtc_available() { return loaded_nvrtc()->ok; }

std::string nvrtc_unavailable_reason() { return loaded_nvrtc()->reason; }

void reload_nvrtc_for_testing(std::optional<std::string> library) {
  NvrtcState& st = nvrtc_state();
  std::lock_guard lock(st.mutex);
  st.override_library = std::move(library);
  st.loaded = nullptr;
}

std::vector<int> nvrtc_supported_archs() {
  const NvrtcApi a = api();
  int n = 0;
  if (a.nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0)
    throw NvrtcUnavailable("nvrtcGetNumSupportedArchs failed");
  std::vector<int> archs(static_cast<size_t>(n));
  if (a.nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) throw NvrtcUnavailable("nvrtcGetSupportedArchs failed");
  std::sort(archs.begin(), archs.end());
  return archs;
}

std::vector<std::string> default_compile_options(bool fast_math) {
  std::vector<std::string> o = {"--std=c++17", "-default-device"};
  if (fast_math) {
    o.push_back("--use_fast_math");
  } else {
    o.insert(o.end(), std::begin(kStrictFloatOptions), std::end(kStrictFloatOptions));
  }
  return o;
}

namespace {
using ProgramPtr = std::unique_ptr<nvrtcProgram, ProgramDeleter>;

// What compile_cuda compiles, for its error messages.
struct CompileJob {
  const std::string& source;
  const std::string& program_name;
  const CompileRequest& request;
  std::vector<std::string> options;  // the target's option, then the request's
};

// The NVRTC program of the job's source, with its name expressions added.
ProgramPtr create_program(const CompileJob& job) {
  ProgramPtr prog(new nvrtcProgram(nullptr));
  nvrtcResult rc = api().nvrtcCreateProgram(prog.get(), job.source.c_str(), job.program_name.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS)  // nvrtcDestroyProgram on a null program is harmless
    fail(fmt::format("NVRTC could not create program {}: {}", job.program_name, api().nvrtcGetErrorString(rc)), {},
         job.options, job.source, job.program_name);
  for (const auto& name : job.request.name_expressions) {
    rc = api().nvrtcAddNameExpression(*prog, name.c_str());
    if (rc != NVRTC_SUCCESS)
      fail(fmt::format("NVRTC rejected name expression '{}': {}", name, api().nvrtcGetErrorString(rc)), {}, job.options,
           job.source, job.program_name);
  }
  return prog;
}

// Compiles the program; returns NVRTC's log. A rejected option is the caller's mistake (a
// UserError naming the options, without the generated source); any other failure is fail()'s.
std::string compile_program(nvrtcProgram prog, const CompileJob& job) {
  std::vector<const char*> argv;
  argv.reserve(job.options.size());
  for (const auto& o : job.options) argv.push_back(o.c_str());
  const nvrtcResult rc = api().nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  std::string log = program_log(prog);
  if (rc == NVRTC_ERROR_INVALID_OPTION) {
    std::string said = log;
    while (!said.empty() && (said.back() == '\n' || said.back() == '\0')) said.pop_back();
    throw ir::UserError(fmt::format("NVRTC {} rejected an option: {} (options: {})", nvrtc_version().str(),
                                    said.empty() ? api().nvrtcGetErrorString(rc) : said, join_options(job.options)));
  }
  if (rc != NVRTC_SUCCESS)
    fail(fmt::format("NVRTC {} failed to compile {} for {}: {}", nvrtc_version().str(), job.program_name,
                     job.request.target.name(), api().nvrtcGetErrorString(rc)),
         log, job.options, job.source, job.program_name);
  return log;
}

// The compiled program's CUBIN or PTX (as the target asks) and the lowered names of its name
// expressions, into `out`.
void fetch_results(nvrtcProgram prog, const CompileJob& job, CompileResult& out) {
  size_t size = 0;
  const bool cubin = job.request.target.kind == OutputKind::Cubin;
  nvrtcResult rc = cubin ? api().nvrtcGetCUBINSize(prog, &size) : api().nvrtcGetPTXSize(prog, &size);
  if (rc == NVRTC_SUCCESS) {
    out.binary.resize(size);
    rc = cubin ? api().nvrtcGetCUBIN(prog, out.binary.data()) : api().nvrtcGetPTX(prog, out.binary.data());
  }
  if (rc != NVRTC_SUCCESS || out.binary.empty())
    fail(fmt::format("NVRTC produced no {} for {}: {}", to_string(job.request.target.kind), job.program_name,
                     api().nvrtcGetErrorString(rc)),
         out.log, job.options, job.source, job.program_name);
  for (const auto& name : job.request.name_expressions) {
    const char* lowered = nullptr;
    rc = api().nvrtcGetLoweredName(prog, name.c_str(), &lowered);
    if (rc != NVRTC_SUCCESS || !lowered)
      fail(fmt::format("NVRTC has no lowered name for '{}': {}", name, api().nvrtcGetErrorString(rc)), out.log,
           job.options, job.source, job.program_name);
    out.lowered_names.emplace_back(name, lowered);
  }
}
}  // namespace

CompileResult compile_cuda(const std::string& source, const std::string& program_name, const CompileRequest& request) {
  CompileJob job{source, program_name, request, {request.target.nvrtc_option()}};
  job.options.insert(job.options.end(), request.options.begin(), request.options.end());
  api();  // throws NvrtcUnavailable before anything is created
  const auto t0 = std::chrono::steady_clock::now();
  const ProgramPtr prog = create_program(job);
  CompileResult out;
  out.target = request.target;
  out.log = compile_program(*prog, job);
  fetch_results(*prog, job, out);
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

std::string number_source_lines(const std::string& source, const std::vector<int>& mark, int first_line,
                                int last_line) {
  auto lines = split_lines(source);
  const int total = static_cast<int>(lines.size());
  if (last_line < 0 || last_line > total) last_line = total;
  first_line = std::max(first_line, 1);
  const int width = static_cast<int>(std::to_string(std::max(total, 1)).size());
  std::string out;
  for (int i = first_line; i <= last_line; ++i) {
    bool marked = std::find(mark.begin(), mark.end(), i) != mark.end();
    out += fmt::format("{}{:>{}} | {}\n", marked ? '>' : ' ', i, width, lines[static_cast<size_t>(i - 1)]);
  }
  return out;
}

std::vector<int> error_lines_from_log(const std::string& log, const std::string& program_name) {
  // NVRTC writes "NAME(LINE): error: ..." (also "warning"/"remark"); only errors are collected.
  std::vector<int> lines;
  const std::string prefix = program_name + "(";
  for (auto line : split_lines(log)) {
    if (!line.starts_with(prefix)) continue;
    size_t i = prefix.size();
    int n = 0;
    size_t start = i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9' && i - start < 9) n = n * 10 + (line[i++] - '0');
    if (i == start || line.substr(i).find("): error") != 0) continue;
    if (std::find(lines.begin(), lines.end(), n) == lines.end()) lines.push_back(n);
  }
  return lines;
}

std::string graph_ref_of_line(const std::string& source, int line) {
  auto lines = split_lines(source);
  if (line < 1 || line > static_cast<int>(lines.size())) return {};
  std::string_view text = lines[static_cast<size_t>(line - 1)];
  // Scan tags from the right: "[X:N]" with no spaces in X and digits after the last ':'.
  size_t end = text.size();
  while (true) {
    size_t close = text.rfind(']', end == 0 ? 0 : end - 1);
    if (close == std::string_view::npos || end == 0) return {};
    size_t open = text.rfind('[', close);
    if (open == std::string_view::npos) return {};
    std::string_view inner = text.substr(open + 1, close - open - 1);
    size_t colon = inner.rfind(':');
    bool ok = colon != std::string_view::npos && colon > 0 && colon + 1 < inner.size() &&
              inner.find(' ') == std::string_view::npos;
    for (size_t k = colon + 1; ok && k < inner.size(); ++k) ok = inner[k] >= '0' && inner[k] <= '9';
    if (ok) return std::string(inner);
    end = open;
  }
}

}  // namespace fusejit::jit
