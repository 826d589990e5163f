// GPU architecture targets for NVRTC: parsing `sm_90` / `compute_90`, and choosing what to compile
// for a device from the architectures the loaded NVRTC reports at run time
// (nvrtcGetSupportedArchs; no hard-coded tables, so a newer toolkit needs no fusejit change).
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fusejit::jit {

// A compute capability, e.g. {9, 0} for sm_90 (H100/H200). Minor is 0..9.
struct Arch {
  int major = 0;
  int minor = 0;
  // The NVRTC/nvcc number: 10 * major + minor (90 for 9.0, 100 for 10.0, 121 for 12.1).
  int number() const { return major * 10 + minor; }
  static Arch from_number(int n) { return Arch{n / 10, n % 10}; }
  friend bool operator==(const Arch&, const Arch&) = default;
  friend auto operator<=>(const Arch&, const Arch&) = default;
};

// What NVRTC produces: CUBIN (SASS for one real architecture, `sm_XY`, loaded as is) or PTX for a
// virtual architecture (`compute_XY`, JIT-compiled by the driver at module load).
enum class OutputKind { Cubin, Ptx };

const char* to_string(OutputKind kind);  // "cubin" / "ptx" (also the dump-file extension)

// A compilation target: an architecture plus the output kind.
struct Target {
  Arch arch;
  OutputKind kind = OutputKind::Cubin;
  // "sm_90" for CUBIN, "compute_90" for PTX.
  std::string name() const;
  // The NVRTC option selecting it: "--gpu-architecture=sm_90" / "--gpu-architecture=compute_90".
  std::string nvrtc_option() const;
  friend bool operator==(const Target&, const Target&) = default;
};

// Parses `sm_90`, `sm_100`, `compute_90` (as given to `--arch`); the optional letter suffixes of
// arch-specific targets (`sm_90a`, `sm_100f`) are rejected, since fusejit emits portable code.
// Throws ir::UserError naming the text and the accepted forms.
Target parse_target(std::string_view text);

// "" when code for `t` runs on a device of compute capability `device`, else why not. A CUBIN runs
// on its own major version at its minor or later (sm_80 on 8.0, 8.6 and 8.9, not on 9.0); PTX on
// its architecture and every later one, JIT-compiled by the driver (CUDA C++ Programming Guide,
// "Binary Compatibility" and "PTX Compatibility").
std::string target_runs_on(const Target& t, Arch device);

// The outcome of target selection for a device.
struct ArchDecision {
  Target target;        // what to compile
  Arch device;          // the device's compute capability the decision was made for
  // Non-empty when compiling PTX for an older virtual arch because the device is newer than
  // NVRTC: say that the driver JIT-compiles it (correct, possibly slower). The library passes
  // it to its warning callback; this module never prints.
  std::string warning;
};

// Chooses the target for a device from NVRTC's supported list (numbers such as 75, 80, 90, any
// order, as from nvrtcGetSupportedArchs):
//  - device arch in the list                  -> CUBIN for sm_XY (no warning);
//  - device newer than the newest in the list -> PTX for the newest compute_XY, plus a warning;
//  - device not in the list but within range  -> PTX for the newest listed arch below it, plus a
//    warning (PTX for an older virtual arch runs on any newer device);
//  - device older than the oldest in the list -> throws ir::UserError naming both archs.
// Throws ir::UserError if `supported` is empty. Pure: no NVRTC call, no global state.
ArchDecision choose_target(Arch device, std::span<const int> supported);

// The shared memory a block of a GPU of compute capability `a` may opt in to, in bytes
// (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: "Maximum amount of shared memory per
// thread block" in the CUDA C++ Programming Guide's "Technical Specifications per Compute
// Capability": 64 KB on 7.5, 163 KB on 8.0 and 8.7, 99 KB on 8.6, 8.9 and 12.x, 227 KB on 9.0 and
// 10.x; 8.8 and 11.0, which NVRTC 13 targets, as 8.6 and 10.0: NVIDIA's libcu++
// cuda/__device/arch_traits.h derives their traits from those two); nullopt for a capability not
// in that list. What a plan made without the GPU assumes (`fusejit plan --arch`); a program on a
// GPU asks the driver instead.
std::optional<int64_t> shared_optin_bytes(Arch a);

// For an explicit `--arch`: accepts the target if NVRTC supports its arch; otherwise throws
// ir::UserError listing what the loaded NVRTC supports.
ArchDecision check_explicit_target(const Target& requested, std::span<const int> supported);

// The architectures the loaded NVRTC supports, ascending (nvrtcGetNumSupportedArchs +
// nvrtcGetSupportedArchs, queried once). The test hook below or the environment variable
// FUSEJIT_TEST_NVRTC_ARCHS ("75,80,90") replaces the list. Throws std::runtime_error if NVRTC fails.
std::vector<int> supported_archs();

// The device arch the launcher detected, unless the test hook below or the environment variable
// FUSEJIT_TEST_DEVICE_ARCH ("sm_120" or "120") overrides it.
Arch effective_device_arch(Arch detected);

// choose_target(effective_device_arch(detected), supported_archs()): the call the GPU path makes.
ArchDecision choose_target_for_device(Arch detected);

// Test hooks (process-wide, thread-safe; nullopt restores the real value). They take precedence
// over the environment variables.
void set_supported_archs_for_testing(std::optional<std::vector<int>> archs);
void set_device_arch_for_testing(std::optional<Arch> arch);

}  // namespace fusejit::jit
