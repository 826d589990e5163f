// Target selection against NVRTC's run-time list of architectures: supported, newer and older
// devices (device arch and supported list supplied through the test hooks), `--arch` parsing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "ir/error.h"
#include "jit/arch.h"
#include "jit/nvrtc.h"

using namespace fusejit::jit;
using fusejit::ir::UserError;

namespace {
const std::vector<int> kList = {121, 75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120};  // unsorted on purpose

// Clears the hooks even when a check fails.
struct HookReset {
  ~HookReset() {
    set_supported_archs_for_testing(std::nullopt);
    set_device_arch_for_testing(std::nullopt);
    ::unsetenv("FUSEJIT_TEST_DEVICE_ARCH");
    ::unsetenv("FUSEJIT_TEST_NVRTC_ARCHS");
  }
};

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("parse_target accepts sm_XY and compute_XY") {
  CHECK(parse_target("sm_90") == Target{Arch{9, 0}, OutputKind::Cubin});
  CHECK(parse_target("compute_90") == Target{Arch{9, 0}, OutputKind::Ptx});
  CHECK(parse_target("sm_100") == Target{Arch{10, 0}, OutputKind::Cubin});
  CHECK(parse_target("sm_121") == Target{Arch{12, 1}, OutputKind::Cubin});
  CHECK(parse_target("sm_75").name() == "sm_75");
  CHECK(parse_target("compute_103").name() == "compute_103");
  CHECK(parse_target("compute_80").nvrtc_option() == "--gpu-architecture=compute_80");
  for (const char* bad : {"", "sm90", "sm_", "sm_9", "sm_9a", "sm_x0a", "gfx90", "compute_x", "sm_0900", "sm_090",
                          "SM_90", "sm_1000", " sm_90"}) {
    CAPTURE(bad);
    std::string msg = error_of([&] { parse_target(bad); });
    CHECK(msg.find("invalid GPU architecture") != std::string::npos);
  }
  // Arch-specific targets say which portable one to use.
  CHECK(error_of([&] { parse_target("sm_90a"); }) ==
        "GPU architecture 'sm_90a' is arch-specific ('a' suffix): fusejit's kernels use no arch-specific feature; "
        "use the portable 'sm_90', which runs on the same GPU");
  CHECK(error_of([&] { parse_target("sm_100f"); }).find("use the portable 'sm_100'") != std::string::npos);
  CHECK(error_of([&] { parse_target("compute_90a"); }).find("use the portable 'compute_90'") != std::string::npos);
}

TEST_CASE("a supported device gets CUBIN for its own sm_XY") {
  for (int n : {75, 80, 90, 100, 121}) {
    ArchDecision d = choose_target(Arch::from_number(n), kList);
    CHECK(d.target == Target{Arch::from_number(n), OutputKind::Cubin});
    CHECK(d.warning.empty());
    CHECK(d.device == Arch::from_number(n));
  }
}

TEST_CASE("a device newer than NVRTC gets PTX for the newest compute_XY and a warning") {
  ArchDecision d = choose_target(Arch{13, 0}, kList);
  CHECK(d.target == Target{Arch{12, 1}, OutputKind::Ptx});
  CHECK(d.target.name() == "compute_121");
  CHECK(d.warning.find("sm_130") != std::string::npos);
  CHECK(d.warning.find("sm_121") != std::string::npos);
  CHECK(d.warning.find("compute_121") != std::string::npos);
  CHECK(d.warning.find("driver JIT-compiles") != std::string::npos);
}

TEST_CASE("a device older than NVRTC's oldest is an error naming both") {
  std::string msg = error_of([] { choose_target(Arch{7, 0}, kList); });
  CHECK(msg.find("sm_70") != std::string::npos);
  CHECK(msg.find("sm_75") != std::string::npos);
  CHECK(msg.find("older") != std::string::npos);
  CHECK(!error_of([] { choose_target(Arch{5, 2}, kList); }).empty());
  CHECK(!error_of([] { choose_target(Arch{9, 0}, std::vector<int>{}); }).empty());
}

TEST_CASE("a device inside the range but not listed gets PTX for the closest older arch") {
  ArchDecision d = choose_target(Arch{9, 5}, kList);
  CHECK(d.target == Target{Arch{9, 0}, OutputKind::Ptx});
  CHECK(!d.warning.empty());
}

TEST_CASE("explicit --arch is checked against the supported list") {
  Target t = parse_target("compute_90");
  CHECK(check_explicit_target(t, kList).target == t);
  std::string msg = error_of([] { check_explicit_target(parse_target("sm_60"), kList); });
  CHECK(msg.find("sm_60") != std::string::npos);
  CHECK(msg.find("sm_75, sm_80") != std::string::npos);
  // A PTX request is answered in PTX names (a hostile tester's find: compute_91 listed sm_XY).
  msg = error_of([] { check_explicit_target(parse_target("compute_91"), kList); });
  CHECK(msg.find("cannot compile for compute_91; it supports compute_75, compute_80") != std::string::npos);
}

TEST_CASE("the real NVRTC list is queried at run time") {
  HookReset reset;
  std::vector<int> archs = supported_archs();
  REQUIRE(!archs.empty());
  CHECK(std::is_sorted(archs.begin(), archs.end()));
  // The CI toolkit (CUDA 12.8+/13) supports the architectures the issue requires.
  for (int n : {75, 80, 90, 100}) CHECK(std::find(archs.begin(), archs.end(), n) != archs.end());
  CHECK(choose_target_for_device(Arch{9, 0}).target == Target{Arch{9, 0}, OutputKind::Cubin});
}

TEST_CASE("test hooks supply the device arch and the supported list") {
  HookReset reset;
  set_supported_archs_for_testing(std::vector<int>{80, 90});
  set_device_arch_for_testing(Arch{12, 0});
  ArchDecision newer = choose_target_for_device(Arch{9, 0});  // the detected arch is overridden
  CHECK(newer.device == Arch{12, 0});
  CHECK(newer.target == Target{Arch{9, 0}, OutputKind::Ptx});
  CHECK(!newer.warning.empty());
  set_device_arch_for_testing(Arch{7, 5});
  CHECK(error_of([] { choose_target_for_device(Arch{9, 0}); }).find("sm_80") != std::string::npos);
  set_device_arch_for_testing(std::nullopt);
  CHECK(choose_target_for_device(Arch{8, 0}).target == Target{Arch{8, 0}, OutputKind::Cubin});

  // The same through the environment (for CLI tests); the function hooks take precedence.
  set_supported_archs_for_testing(std::nullopt);
  ::setenv("FUSEJIT_TEST_NVRTC_ARCHS", "75, 80,90", 1);
  ::setenv("FUSEJIT_TEST_DEVICE_ARCH", "sm_100", 1);
  CHECK(supported_archs() == std::vector<int>{75, 80, 90});
  ArchDecision env = choose_target_for_device(Arch{8, 0});
  CHECK(env.target.name() == "compute_90");
  ::setenv("FUSEJIT_TEST_DEVICE_ARCH", "70", 1);
  CHECK(!error_of([] { choose_target_for_device(Arch{8, 0}); }).empty());
  ::setenv("FUSEJIT_TEST_NVRTC_ARCHS", "75,eighty", 1);
  CHECK(!error_of([] { supported_archs(); }).empty());
}

TEST_CASE("the PTX chosen for a too-new device really compiles") {
  HookReset reset;
  std::vector<int> archs = supported_archs();
  Arch future = Arch::from_number(archs.back() + 10);
  ArchDecision d = choose_target(future, archs);
  REQUIRE(d.target.kind == OutputKind::Ptx);
  const std::string src = "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }\n";
  CompileResult r = compile_cuda(src, "k.cu", CompileRequest{d.target, default_compile_options(false), {}});
  CHECK(std::string(r.binary.data()).find(".target sm_" + std::to_string(archs.back())) != std::string::npos);
}

TEST_CASE("shared_optin_bytes: the CUDA Programming Guide's shared memory per block, nothing for an unknown capability") {
  CHECK(shared_optin_bytes({9, 0}) == 232448);   // 227 KB: H100/H200
  CHECK(shared_optin_bytes({10, 0}) == 232448);
  CHECK(shared_optin_bytes({8, 0}) == 166912);   // 163 KB: A100
  CHECK(shared_optin_bytes({8, 6}) == 101376);   // 99 KB
  CHECK(shared_optin_bytes({8, 9}) == 101376);
  CHECK(shared_optin_bytes({12, 0}) == 101376);
  // NVRTC 13's sm_88 and sm_110 (a new user's `plan --arch sm_110` was refused while `compile` took
  // it): as 8.6 and 10.0, whose traits NVIDIA's libcu++ arch_traits.h gives them.
  CHECK(shared_optin_bytes({8, 8}) == 101376);
  CHECK(shared_optin_bytes({11, 0}) == 232448);
  CHECK_FALSE(shared_optin_bytes({10, 1}));  // renamed sm_110 in CUDA 13: no table of its own
  CHECK(shared_optin_bytes({7, 5}) == 65536);
  CHECK_FALSE(shared_optin_bytes({7, 0}));
  CHECK_FALSE(shared_optin_bytes({13, 0}));
  // The row cache limit each gives is at least the 48 KiB default (ir::row_cache_limit_for).
  for (int n : {75, 80, 86, 87, 89, 90, 100, 103, 120, 121})
    CHECK(*shared_optin_bytes(Arch::from_number(n)) - 12 * 1024 >= 48 * 1024);
}
