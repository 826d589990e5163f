// The fixed reduction order's device side: ir/scalar/fj_reduce.h, pasted after fj_scalar.h as
// generated kernels paste them, compiles under NVRTC with no includes for sm_75/80/90/100 in a
// block-per-row kernel (lanes in __shared__ memory, fj_red_sync() = __syncthreads()), for every
// combining op and compute type. Skipped where NVRTC cannot be loaded.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "jit/nvrtc.h"
#include "support/nvrtc_cached.h"
#include "tests/support/files.h"

using namespace fusejit;

namespace {

// One row-reduction kernel per (op, type): block b reduces rows b, b + gridDim.x, ...
std::string row_kernels() {
  std::string s;
  const char* ops[] = {"fj_red_sum", "fj_red_prod", "fj_red_max", "fj_red_min"};
  const char* types[] = {"float", "double", "long long", "int", "signed char", "unsigned char", "bool"};
  int k = 0;
  for (const char* op : ops)
    for (const char* t : types) {
      s += "extern \"C\" __global__ void row_" + std::to_string(k++) + "(const " + t + "* x, " + t +
           "* y, long long rows, long long n) {\n"
           "  __shared__ " + t + " lanes[FJ_RED_LANES];\n"
           "  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {\n"
           "    const " + t + "* row = x + r * n;\n"
           "    " + t + " v = fj_reduce_fixed<" + op + ", " + t +
           ">(n, [&](long long i) { return row[i]; }, lanes, (int)threadIdx.x, (int)blockDim.x);\n"
           "    if (threadIdx.x == 0) y[r] = v;\n  }\n}\n";
    }
  s += "extern \"C\" __global__ void row_mean(const float* x, float* y, long long n) {\n"
       "  __shared__ float lanes[FJ_RED_LANES];\n"
       "  float v = fj_reduce_fixed<fj_red_sum, float>(n, [&](long long i) { return x[i]; }, lanes, (int)threadIdx.x, "
       "(int)blockDim.x);\n"
       "  if (threadIdx.x == 0) y[0] = fj_red_mean(v, n) + fj_red_mean(v, fj_red_divisor(n, 1));\n}\n";
  return s;
}

}  // namespace

TEST_CASE("fj_reduce.h compiles under NVRTC for sm_75/80/90/100 in block-per-row kernels") {
  // The CUDA toolkit is a build requirement: no NVRTC is a failure here, as in test_scalar_nvrtc.
  REQUIRE_MESSAGE(jit::nvrtc_available(), "NVRTC unavailable: " << jit::nvrtc_unavailable_reason());
  const std::string src = testing::read_file(testing::source_path("ir/scalar/fj_scalar.h")) +
                          testing::read_file(testing::source_path("ir/scalar/fj_reduce.h")) + row_kernels();
  const std::vector<int> supported = jit::nvrtc_supported_archs();
  int compiled = 0;
  for (const char* arch : {"sm_75", "sm_80", "sm_90", "sm_100"}) {
    const jit::Target t = jit::parse_target(arch);
    if (std::find(supported.begin(), supported.end(), t.arch.number()) == supported.end()) {
      MESSAGE("NVRTC does not support " << arch << "; skipped");
      continue;
    }
    CAPTURE(arch);
    jit::CompileRequest req;
    req.target = t;
    req.options = jit::default_compile_options(false);
    CHECK_NOTHROW(testing::compile_cuda_cached(src, "fj_reduce_test.cu", req));  // support/nvrtc_cached.h
    ++compiled;
  }
  CHECK(compiled >= 2);
}
