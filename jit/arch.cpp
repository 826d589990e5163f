#include "jit/arch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "ir/error.h"
#include "jit/nvrtc.h"

namespace fusejit::jit {

namespace {

std::mutex g_hook_mutex;
std::optional<std::vector<int>> g_archs_hook;
std::optional<Arch> g_device_hook;

// "sm_75, sm_80, ..." (`prefix` "compute_": the PTX names, for a compute_XY request).
std::string join_archs(std::span<const int> archs, std::string_view prefix = "sm_") {
  std::string s;
  for (int a : archs) s += (s.empty() ? "" : ", ") + fmt::format("{}{}", prefix, a);
  return s;
}

// Parses "75,80,90" (spaces allowed); nullopt if malformed.
std::optional<std::vector<int>> parse_arch_list(std::string_view text) {
  std::vector<int> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i == text.size()) break;
    int v = 0;
    size_t start = i;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - start < 4) v = v * 10 + (text[i++] - '0');
    if (i == start || (i < text.size() && text[i] != ',' && text[i] != ' ')) return std::nullopt;
    out.push_back(v);
  }
  if (out.empty()) return std::nullopt;
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

const char* to_string(OutputKind kind) { return kind == OutputKind::Cubin ? "cubin" : "ptx"; }

std::string Target::name() const {
  return fmt::format("{}_{}", kind == OutputKind::Cubin ? "sm" : "compute", arch.number());
}

std::string target_runs_on(const Target& t, Arch device) {
  const std::string cc = fmt::format("compute capability {}.{}", device.major, device.minor);
  if (t.kind == OutputKind::Ptx)
    return device >= t.arch ? "" : fmt::format("PTX for {} runs on {}.{} and later GPUs, not on {}", t.name(), t.arch.major, t.arch.minor, cc);
  if (device.major == t.arch.major && device.minor >= t.arch.minor) return "";
  return fmt::format("a CUBIN for {} runs on GPUs of compute capability {}.{} to {}.9, not on {}", t.name(), t.arch.major,
                     t.arch.minor, t.arch.major, cc);
}

std::string Target::nvrtc_option() const { return "--gpu-architecture=" + name(); }

std::optional<int64_t> shared_optin_bytes(Arch a) {
  constexpr int64_t KB = 1024;
  switch (a.number()) {
    case 75: return 64 * KB;
    case 80: case 87: return 163 * KB;
    case 86: case 88: case 89: case 120: case 121: return 99 * KB;
    case 90: case 100: case 103: case 110: return 227 * KB;
    default: return std::nullopt;
  }
}

Target parse_target(std::string_view text) {
  auto fail = [&]() -> Target {
    throw ir::UserError(fmt::format("invalid GPU architecture '{}': expected sm_XY (CUBIN) or compute_XY (PTX), "
                                    "e.g. sm_90 or compute_90", text));
  };
  Target t;
  std::string_view digits;
  if (text.starts_with("sm_")) {
    t.kind = OutputKind::Cubin;
    digits = text.substr(3);
  } else if (text.starts_with("compute_")) {
    t.kind = OutputKind::Ptx;
    digits = text.substr(8);
  } else {
    return fail();
  }
  // sm_90a / sm_100f (arch- and family-specific features): fusejit's kernels use none, and the
  // portable target runs on that GPU.
  if (const size_t last = digits.size() - 1; digits.size() >= 3 && (digits[last] == 'a' || digits[last] == 'f') &&
                                             digits.substr(0, last).find_first_not_of("0123456789") == std::string_view::npos)
    throw ir::UserError(fmt::format("GPU architecture '{}' is arch-specific ('{}' suffix): fusejit's kernels use no "
                                    "arch-specific feature; use the portable '{}', which runs on the same GPU",
                                    text, digits[last], text.substr(0, text.size() - 1)));
  if (digits.size() < 2 || digits.size() > 3 || digits[0] == '0') return fail();
  int n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return fail();
    n = n * 10 + (c - '0');
  }
  t.arch = Arch::from_number(n);
  return t;
}

ArchDecision choose_target(Arch device, std::span<const int> supported_in) {
  if (supported_in.empty()) throw ir::UserError("the loaded NVRTC reports no supported GPU architectures");
  std::vector<int> supported(supported_in.begin(), supported_in.end());
  std::sort(supported.begin(), supported.end());
  const int dev = device.number();
  const int oldest = supported.front();
  const int newest = supported.back();
  ArchDecision d;
  d.device = device;
  if (std::binary_search(supported.begin(), supported.end(), dev)) {
    d.target = Target{device, OutputKind::Cubin};
    return d;
  }
  if (dev < oldest) {
    throw ir::UserError(fmt::format(
        "the GPU's architecture sm_{} is older than the oldest architecture this NVRTC supports (sm_{}); "
        "use an older CUDA toolkit for this GPU", dev, oldest));
  }
  // Newest supported virtual arch not above the device: its PTX is forward compatible.
  int pick = *std::prev(std::upper_bound(supported.begin(), supported.end(), dev));
  d.target = Target{Arch::from_number(pick), OutputKind::Ptx};
  if (dev > newest) {
    d.warning = fmt::format(
        "the GPU's architecture sm_{} is newer than the newest this NVRTC supports (sm_{}): compiling PTX for "
        "compute_{}, which the driver JIT-compiles at load time (correct, but possibly slower than native code; "
        "only a benchmark tells)", dev, newest, pick);
  } else {
    d.warning = fmt::format(
        "this NVRTC cannot compile for the GPU's architecture sm_{} (it supports {}): compiling PTX for "
        "compute_{}, which the driver JIT-compiles at load time (correct, but possibly slower)",
        dev, join_archs(supported), pick);
  }
  return d;
}

ArchDecision check_explicit_target(const Target& requested, std::span<const int> supported) {
  if (std::find(supported.begin(), supported.end(), requested.arch.number()) == supported.end()) {
    std::vector<int> sorted(supported.begin(), supported.end());
    std::sort(sorted.begin(), sorted.end());
    const std::string name = requested.name();
    throw ir::UserError(fmt::format("this NVRTC cannot compile for {}; it supports {}", name,
                                    join_archs(sorted, name.starts_with("compute_") ? "compute_" : "sm_")));
  }
  return ArchDecision{requested, requested.arch, {}};
}

std::vector<int> supported_archs() {
  {
    std::lock_guard lock(g_hook_mutex);
    if (g_archs_hook) return *g_archs_hook;
  }
  if (const char* env = std::getenv("FUSEJIT_TEST_NVRTC_ARCHS"); env && *env) {
    if (auto list = parse_arch_list(env)) return *list;
    throw ir::UserError(fmt::format("FUSEJIT_TEST_NVRTC_ARCHS='{}' is not a list like 75,80,90", env));
  }
  static const std::vector<int> real = nvrtc_supported_archs();  // thread-safe static init
  return real;
}

Arch effective_device_arch(Arch detected) {
  {
    std::lock_guard lock(g_hook_mutex);
    if (g_device_hook) return *g_device_hook;
  }
  if (const char* env = std::getenv("FUSEJIT_TEST_DEVICE_ARCH"); env && *env) {
    std::string_view text(env);
    if (!text.starts_with("sm_") && !text.starts_with("compute_")) return parse_target("sm_" + std::string(text)).arch;
    return parse_target(text).arch;
  }
  return detected;
}

ArchDecision choose_target_for_device(Arch detected) {
  auto archs = supported_archs();
  return choose_target(effective_device_arch(detected), archs);
}

void set_supported_archs_for_testing(std::optional<std::vector<int>> archs) {
  std::lock_guard lock(g_hook_mutex);
  g_archs_hook = std::move(archs);
}

void set_device_arch_for_testing(std::optional<Arch> arch) {
  std::lock_guard lock(g_hook_mutex);
  g_device_hook = arch;
}

}  // namespace fusejit::jit
