#include "jit/nvrtc.h"

#include "ir/error.h"

#include <fmt/format.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <memory>

namespace fusejit::jit {

namespace {

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
    nvrtcDestroyProgram(p);
    delete p;
  }
};

std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0) return {};
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// The source part of a CompileError: everything when short, else the lines around each error.
std::string source_excerpt(const std::string& source, const std::vector<int>& lines) {
  const int total = static_cast<int>(split_lines(source).size());
  if (total <= 400 || lines.empty()) return number_source_lines(source, lines);
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

std::string NvrtcVersion::str() const { return fmt::format("{}.{}", major, minor); }

NvrtcVersion nvrtc_version() {
  static const NvrtcVersion v = [] {
    NvrtcVersion r;
    if (nvrtcVersion(&r.major, &r.minor) != NVRTC_SUCCESS) r = NvrtcVersion{};
    return r;
  }();
  return v;
}

std::vector<std::string> default_compile_options(bool fast_math) {
  std::vector<std::string> o = {"--std=c++17", "-default-device"};
  if (fast_math) {
    o.push_back("--use_fast_math");
  } else {
    o.insert(o.end(), {"--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true"});
  }
  return o;
}

CompileResult compile_cuda(const std::string& source, const std::string& program_name, const CompileRequest& request) {
  std::vector<std::string> options;
  options.push_back(request.target.nvrtc_option());
  options.insert(options.end(), request.options.begin(), request.options.end());

  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<nvrtcProgram, ProgramDeleter> prog(new nvrtcProgram(nullptr));
  nvrtcResult rc = nvrtcCreateProgram(prog.get(), source.c_str(), program_name.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS) {
    // nvrtcDestroyProgram on a null program is harmless.
    fail(fmt::format("NVRTC could not create program {}: {}", program_name, nvrtcGetErrorString(rc)), {}, options,
         source, program_name);
  }
  for (const auto& name : request.name_expressions) {
    rc = nvrtcAddNameExpression(*prog, name.c_str());
    if (rc != NVRTC_SUCCESS)
      fail(fmt::format("NVRTC rejected name expression '{}': {}", name, nvrtcGetErrorString(rc)), {}, options, source,
           program_name);
  }
  std::vector<const char*> argv;
  argv.reserve(options.size());
  for (const auto& o : options) argv.push_back(o.c_str());
  rc = nvrtcCompileProgram(*prog, static_cast<int>(argv.size()), argv.data());
  std::string log = program_log(*prog);
  if (rc == NVRTC_ERROR_INVALID_OPTION) {
    // A bad option (e.g. from Options::nvrtc_options) is the caller's mistake, not the code's:
    // say which options and what NVRTC said, without the generated source.
    std::string said = log;
    while (!said.empty() && (said.back() == '\n' || said.back() == '\0')) said.pop_back();
    throw ir::UserError(fmt::format("NVRTC {} rejected an option: {} (options: {})", nvrtc_version().str(),
                                    said.empty() ? nvrtcGetErrorString(rc) : said, join_options(options)));
  }
  if (rc != NVRTC_SUCCESS) {
    fail(fmt::format("NVRTC {} failed to compile {} for {}: {}", nvrtc_version().str(), program_name,
                     request.target.name(), nvrtcGetErrorString(rc)),
         log, options, source, program_name);
  }

  CompileResult out;
  out.target = request.target;
  out.log = std::move(log);
  size_t size = 0;
  if (request.target.kind == OutputKind::Cubin) {
    rc = nvrtcGetCUBINSize(*prog, &size);
    if (rc == NVRTC_SUCCESS) {
      out.binary.resize(size);
      rc = nvrtcGetCUBIN(*prog, out.binary.data());
    }
  } else {
    rc = nvrtcGetPTXSize(*prog, &size);
    if (rc == NVRTC_SUCCESS) {
      out.binary.resize(size);
      rc = nvrtcGetPTX(*prog, out.binary.data());
    }
  }
  if (rc != NVRTC_SUCCESS || out.binary.empty())
    fail(fmt::format("NVRTC produced no {} for {}: {}", to_string(request.target.kind), program_name,
                     nvrtcGetErrorString(rc)),
         out.log, options, source, program_name);
  for (const auto& name : request.name_expressions) {
    const char* lowered = nullptr;
    rc = nvrtcGetLoweredName(*prog, name.c_str(), &lowered);
    if (rc != NVRTC_SUCCESS || !lowered)
      fail(fmt::format("NVRTC has no lowered name for '{}': {}", name, nvrtcGetErrorString(rc)), out.log, options,
           source, program_name);
    out.lowered_names.emplace_back(name, lowered);
  }
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
