// fj_scalar.h on a real GPU vs the same header on the host (label `gpu`; exits 77 = skipped where
// there is no driver or device). Every float op runs on hard and random inputs in f32, f64 and
// f16; integer ops and casts too. Exact ops (arithmetic, division, sqrt, rsqrt, rounding, fmod,
// floordiv, mod, comparisons, casts, half rounding, integer ops) must agree bit for bit; math
// library ops within the ulp tolerances of docs/ops.md. Self-contained: dlopens libcuda itself.
#include <doctest/doctest.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ir/scalar/fj_scalar.h"

namespace {

// ---- minimal Driver API through dlopen ----
using CUres = int;
struct Cu {
  CUres (*cuInit)(unsigned);
  CUres (*cuDeviceGet)(int*, int);
  CUres (*cuDeviceGetAttribute)(int*, int, int);
  CUres (*cuDevicePrimaryCtxRetain)(void**, int);
  CUres (*cuCtxSetCurrent)(void*);
  CUres (*cuModuleLoadData)(void**, const void*);
  CUres (*cuModuleGetFunction)(void**, void*, const char*);
  CUres (*cuMemAlloc)(unsigned long long*, size_t);
  CUres (*cuMemFree)(unsigned long long);
  CUres (*cuMemcpyHtoD)(unsigned long long, const void*, size_t);
  CUres (*cuMemcpyDtoH)(void*, unsigned long long, size_t);
  CUres (*cuLaunchKernel)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**,
                          void**);
  CUres (*cuCtxSynchronize)();
} cu;
int g_cc = 0;
void* g_mod = nullptr;

template <class F> bool sym(void* h, F& f, const char* name) {
  f = reinterpret_cast<F>(dlsym(h, name));
  return f != nullptr;
}

[[noreturn]] void skip(const char* why) {
  std::fprintf(stderr, "test_gpu_scalar: skipped: %s\n", why);
  std::fflush(stderr);
  std::_Exit(77);
}

#define CU_OK(call) REQUIRE((call) == 0)

// ---- the op list (X-macro shared by the kernel text and the host evaluation) ----
// X(name, arity, expression on x y z, tol_f32, tol_f64, composite)
#define FJ_FLOAT_OPS(X)                                     \
  X(neg, fj_neg(x), 0, 0, 0) X(abs, fj_abs(x), 0, 0, 0)     \
  X(exp, fj_exp(x), 3, 2, 0) X(exp2, fj_exp2(x), 3, 2, 0)   \
  X(expm1, fj_expm1(x), 2, 2, 0) X(log, fj_log(x), 2, 2, 0) \
  X(log2, fj_log2(x), 2, 3, 0) X(log10, fj_log10(x), 4, 3, 0) \
  X(log1p, fj_log1p(x), 2, 2, 0) X(sqrt, fj_sqrt(x), 0, 0, 0) \
  X(rsqrt, fj_rsqrt(x), 0, 0, 0) X(reciprocal, fj_reciprocal(x), 0, 0, 0) \
  X(sin, fj_sin(x), 3, 3, 0) X(cos, fj_cos(x), 3, 3, 0) X(tan, fj_tan(x), 5, 3, 0) \
  X(tanh, fj_tanh(x), 4, 3, 0) X(erf, fj_erf(x), 3, 3, 0) \
  X(sigmoid, fj_sigmoid(x), 12, 8, 1) X(silu, fj_silu(x), 12, 8, 1) X(softplus, fj_softplus(x), 20, 16, 1) \
  X(gelu, fj_gelu(x), 12, 12, 1) X(gelu_tanh, fj_gelu_tanh(x), 16, 12, 1) \
  X(relu, fj_relu(x), 0, 0, 0) X(floor, fj_floor(x), 0, 0, 0) X(ceil, fj_ceil(x), 0, 0, 0) \
  X(round, fj_round(x), 0, 0, 0) X(trunc, fj_trunc(x), 0, 0, 0) X(sign, fj_sign(x), 0, 0, 0) \
  X(isnan, (T)fj_isnan(x), 0, 0, 0) X(isinf, (T)fj_isinf(x), 0, 0, 0) \
  X(add, fj_add(x, y), 0, 0, 0) X(sub, fj_sub(x, y), 0, 0, 0) X(mul, fj_mul(x, y), 0, 0, 0) \
  X(div, fj_div(x, y), 0, 0, 0) X(pow, fj_pow(x, y), 5, 3, 0) \
  X(maximum, fj_maximum(x, y), 0, 0, 0) X(minimum, fj_minimum(x, y), 0, 0, 0) \
  X(fmax, fj_fmax(x, y), 0, 0, 0) X(fmin, fj_fmin(x, y), 0, 0, 0) \
  X(floordiv, fj_floordiv(x, y), 0, 0, 0) X(mod, fj_mod(x, y), 0, 0, 0) X(fmod, fj_fmod(x, y), 0, 0, 0) \
  X(atan2, fj_atan2(x, y), 5, 3, 0) X(lt, (T)fj_lt(x, y), 0, 0, 0) X(eq, (T)fj_eq(x, y), 0, 0, 0) \
  X(where, fj_where(x > y, y, z), 0, 0, 0) X(clamp, fj_clamp(x, y, z), 0, 0, 0)

#define FJ_INT_OPS(X)                                                                              \
  X(add, fj_add(x, y)) X(sub, fj_sub(x, y)) X(mul, fj_mul(x, y)) X(neg, fj_neg(x)) X(abs, fj_abs(x)) \
  X(floordiv, fj_floordiv(x, y)) X(mod, fj_mod(x, y)) X(fmod, fj_fmod(x, y)) X(pow, fj_pow(x, y))    \
  X(maximum, fj_maximum(x, y)) X(minimum, fj_minimum(x, y)) X(clamp, fj_clamp(x, y, z))              \
  X(sign, fj_sign(x)) X(relu, fj_relu(x)) X(lt, (T)fj_lt(x, y))

#define FJ_CASTS(X)                                                                                    \
  X(bool, (double)fj_cvt_bool(x)) X(i8, (double)fj_cvt_i8(x)) X(u8, (double)fj_cvt_u8(x))                \
  X(i32, (double)fj_cvt_i32(x)) X(i64_hi, (double)(fj_cvt_i64(x) >> 20)) X(i64_lo, (double)(fj_cvt_i64(x) & 0xfffff)) \
  X(f16, (double)fj_cvt_f16(x)) X(bf16, (double)fj_cvt_bf16(x)) X(f32, (double)fj_cvt_f32(x)) X(f64, (double)fj_cvt_f64(x))

template <class T> T host_float(int op, T x, T y, T z) {
  int k = 0;
#define X(name, expr, t32, t64, comp) if (op == k++) return expr;
  FJ_FLOAT_OPS(X)
#undef X
  return T(0);
}
template <class T> T host_int(int op, T x, T y, T z) {
  int k = 0;
#define X(name, expr) if (op == k++) return expr;
  FJ_INT_OPS(X)
#undef X
  return T(0);
}
template <class T> double host_cast(int op, T x) {
  int k = 0;
#define X(name, expr) if (op == k++) return expr;
  FJ_CASTS(X)
#undef X
  return 0;
}

std::string kernel_source() {
  // FUSEJIT_SOURCE_DIR can be overridden at run time (a binary copied to another machine).
  const char* dir = std::getenv("FUSEJIT_SOURCE_DIR");
  std::ifstream f(std::string(dir && *dir ? dir : FUSEJIT_SOURCE_DIR) + "/ir/scalar/fj_scalar.h");
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  auto float_kernel = [&](const char* name, const char* T, const char* S, const char* load, const char* store) {
    s += std::string("\nextern \"C\" __global__ void ") + name + "(int op, const " + S + "* a, const " + S + "* b, const " +
         S + "* c, " + S + "* o, int n) {\n  typedef " + T + " T;\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i >= n) return;\n  T x = " + load + "(a[i]), y = " + load + "(b[i]), z = " + load + "(c[i]);\n  T r = 0;\n"
         "  switch (op) {\n";
    int k = 0;
#define X(nm, expr, t32, t64, comp) s += "    case " + std::to_string(k++) + ": r = " #expr "; break;\n";
    FJ_FLOAT_OPS(X)
#undef X
    s += std::string("  }\n  o[i] = ") + store + "(r);\n}\n";
  };
  s += "\n__device__ float fj_id(float v) { return v; }\n__device__ double fj_idd(double v) { return v; }\n";
  float_kernel("k_f32", "float", "float", "fj_id", "fj_id");
  float_kernel("k_f64", "double", "double", "fj_idd", "fj_idd");
  float_kernel("k_f16", "float", "fj_f16", "fj_load", "fj_store_f16");
  float_kernel("k_bf16", "float", "fj_bf16", "fj_load", "fj_store_bf16");
  // Half add/sub/mul in storage form: the native PTX instructions (f16 on sm_53+, bf16 on sm_90+).
  for (const char* h : {"f16", "bf16"}) {
    const std::string t = std::string("fj_") + h;
    s += "\nextern \"C\" __global__ void k_native_" + std::string(h) + "(int op, const " + t + "* a, const " + t +
         "* b, const " + t + "* c, " + t + "* o, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i >= n) return;\n  o[i] = op == 0 ? fj_add_" + h + "(a[i], b[i]) : op == 1 ? fj_sub_" + h +
         "(a[i], b[i]) : fj_mul_" + h + "(a[i], b[i]);\n}\n";
  }
  auto int_kernel = [&](const char* name, const char* T) {
    s += std::string("\nextern \"C\" __global__ void ") + name + "(int op, const " + T + "* a, const " + T + "* b, const " +
         T + "* c, " + T + "* o, int n) {\n  typedef " + T + " T;\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i >= n) return;\n  T x = a[i], y = b[i], z = c[i];\n  T r = 0;\n  switch (op) {\n";
    int k = 0;
#define X(nm, expr) s += "    case " + std::to_string(k++) + ": r = " #expr "; break;\n";
    FJ_INT_OPS(X)
#undef X
    s += "  }\n  o[i] = r;\n}\n";
  };
  int_kernel("k_i8", "signed char");
  int_kernel("k_u8", "unsigned char");
  int_kernel("k_i32", "int");
  int_kernel("k_i64", "long long");
  auto cast_kernel = [&](const char* name, const char* T) {
    s += std::string("\nextern \"C\" __global__ void ") + name + "(int op, const " + T + "* a, double* o, int n) {\n"
         "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i >= n) return;\n  " + T + " x = a[i];\n  double r = 0;\n"
         "  switch (op) {\n";
    int k = 0;
#define X(nm, expr) s += "    case " + std::to_string(k++) + ": r = " #expr "; break;\n";
    FJ_CASTS(X)
#undef X
    s += "  }\n  o[i] = r;\n}\n";
  };
  cast_kernel("c_f32", "float");
  cast_kernel("c_f64", "double");
  cast_kernel("c_i64", "long long");
  cast_kernel("c_i32", "int");
  return s;
}

struct GpuSetup {
  GpuSetup() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) skip("libcuda.so.1 not found");
    bool ok = sym(h, cu.cuInit, "cuInit") && sym(h, cu.cuDeviceGet, "cuDeviceGet") &&
              sym(h, cu.cuDeviceGetAttribute, "cuDeviceGetAttribute") &&
              sym(h, cu.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
              sym(h, cu.cuCtxSetCurrent, "cuCtxSetCurrent") && sym(h, cu.cuModuleLoadData, "cuModuleLoadData") &&
              sym(h, cu.cuModuleGetFunction, "cuModuleGetFunction") && sym(h, cu.cuMemAlloc, "cuMemAlloc_v2") &&
              sym(h, cu.cuMemFree, "cuMemFree_v2") && sym(h, cu.cuMemcpyHtoD, "cuMemcpyHtoD_v2") &&
              sym(h, cu.cuMemcpyDtoH, "cuMemcpyDtoH_v2") && sym(h, cu.cuLaunchKernel, "cuLaunchKernel") &&
              sym(h, cu.cuCtxSynchronize, "cuCtxSynchronize");
    if (!ok) skip("libcuda lacks an entry point");
    int dev = 0, major = 0, minor = 0;
    if (cu.cuInit(0) != 0 || cu.cuDeviceGet(&dev, 0) != 0) skip("no CUDA device");
    cu.cuDeviceGetAttribute(&major, 75, dev);
    cu.cuDeviceGetAttribute(&minor, 76, dev);
    g_cc = major * 10 + minor;
    void* ctx = nullptr;
    if (cu.cuDevicePrimaryCtxRetain(&ctx, dev) != 0 || cu.cuCtxSetCurrent(ctx) != 0) skip("cannot create a context");
  }
} g_setup;

void* load_module() {
  if (g_mod) return g_mod;
  std::string src = kernel_source();
  nvrtcProgram p;
  REQUIRE(nvrtcCreateProgram(&p, src.c_str(), "gpu_scalar.cu", 0, nullptr, nullptr) == NVRTC_SUCCESS);
  std::string arch = "--gpu-architecture=sm_" + std::to_string(g_cc);
  const char* opts[] = {arch.c_str(), "-fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--std=c++17"};
  nvrtcResult r = nvrtcCompileProgram(p, 6, opts);
  size_t n = 0;
  nvrtcGetProgramLogSize(p, &n);
  std::string log(n, '\0');
  nvrtcGetProgramLog(p, log.data());
  INFO(log);
  REQUIRE(r == NVRTC_SUCCESS);
  size_t sz = 0;
  nvrtcGetCUBINSize(p, &sz);
  std::vector<char> cubin(sz);
  nvrtcGetCUBIN(p, cubin.data());
  nvrtcDestroyProgram(&p);
  CU_OK(cu.cuModuleLoadData(&g_mod, cubin.data()));
  return g_mod;
}

// Runs kernel `name` with op `op` on the three inputs; returns the output.
template <class S, class O>
std::vector<O> launch(const char* name, int op, const std::vector<S>& a, const std::vector<S>* b, const std::vector<S>* c) {
  void* fn = nullptr;
  CU_OK(cu.cuModuleGetFunction(&fn, load_module(), name));
  int n = static_cast<int>(a.size());
  unsigned long long da = 0, db = 0, dc = 0, dout = 0;
  size_t bytes = a.size() * sizeof(S);
  CU_OK(cu.cuMemAlloc(&da, bytes));
  CU_OK(cu.cuMemAlloc(&db, bytes));
  CU_OK(cu.cuMemAlloc(&dc, bytes));
  CU_OK(cu.cuMemAlloc(&dout, a.size() * sizeof(O)));
  CU_OK(cu.cuMemcpyHtoD(da, a.data(), bytes));
  CU_OK(cu.cuMemcpyHtoD(db, (b ? b : &a)->data(), bytes));
  CU_OK(cu.cuMemcpyHtoD(dc, (c ? c : &a)->data(), bytes));
  std::vector<void*> args;
  if (b) args = {&op, &da, &db, &dc, &dout, &n};
  else args = {&op, &da, &dout, &n};
  CU_OK(cu.cuLaunchKernel(fn, static_cast<unsigned>((n + 255) / 256), 1, 1, 256, 1, 1, 0, nullptr, args.data(), nullptr));
  CU_OK(cu.cuCtxSynchronize());
  std::vector<O> out(a.size());
  CU_OK(cu.cuMemcpyDtoH(out.data(), dout, a.size() * sizeof(O)));
  cu.cuMemFree(da);
  cu.cuMemFree(db);
  cu.cuMemFree(dc);
  cu.cuMemFree(dout);
  return out;
}

// Distance in ulps between two floats of the same type (0 for two NaNs; huge for NaN vs number).
template <class T> uint64_t ulp_dist(T a, T b) {
  if (std::isnan(a) && std::isnan(b)) return 0;
  if (std::isnan(a) || std::isnan(b)) return ~0ull;
  if (a == b) return 0;  // +0 == -0 handled by the bit check elsewhere
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  I ia, ib;
  std::memcpy(&ia, &a, sizeof(T));
  std::memcpy(&ib, &b, sizeof(T));
  auto ord = [](I v) -> __int128 { return v < 0 ? -static_cast<__int128>(v & std::numeric_limits<I>::max()) : v; };
  __int128 d = ord(ia) - ord(ib);
  return static_cast<uint64_t>(d < 0 ? -d : d);
}

template <class T> bool same_bits(T a, T b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T> std::vector<T> inputs(uint64_t seed, size_t n) {
  std::vector<double> sp = {0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -7.0, 20.0, 20.5, -20.0, 88.0, -104.0,
                            1e-3, 1e-30, -1e-30, 1e30, -1e30, 65504.0, 65520.0, 1e-40, -1e-40, 1e-310,
                            std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN(), 3.4e38, 1e300, -1e300};
  std::mt19937_64 r(seed);  // test-only randomness
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    double x;
    switch (r() % 4) {
      case 0: x = sp[r() % sp.size()]; break;
      case 1: x = (static_cast<double>(r() >> 11) * 0x1.0p-53 - 0.5) * 20.0; break;
      case 2: x = std::ldexp(static_cast<double>(r() >> 11) * 0x1.0p-53 + 0.5, static_cast<int>(r() % 80) - 40) * (r() % 2 ? 1 : -1); break;
      default: x = (static_cast<double>(r() >> 11) * 0x1.0p-53 - 0.5) * 200.0; break;
    }
    v[i] = static_cast<T>(x);
  }
  return v;
}

const char* kFloatNames[] = {
#define X(name, expr, t32, t64, comp) #name,
    FJ_FLOAT_OPS(X)
#undef X
};
const int kTol32[] = {
#define X(name, expr, t32, t64, comp) t32,
    FJ_FLOAT_OPS(X)
#undef X
};
const int kTol64[] = {
#define X(name, expr, t32, t64, comp) t64,
    FJ_FLOAT_OPS(X)
#undef X
};
const int kComposite[] = {
#define X(name, expr, t32, t64, comp) comp,
    FJ_FLOAT_OPS(X)
#undef X
};
constexpr int kNumFloatOps = sizeof(kTol32) / sizeof(int);

template <class T>
void check_float(const char* kernel, const int* tol, double abs_tol) {
  const size_t n = 1 << 16;
  std::vector<T> a = inputs<T>(1, n), b = inputs<T>(2, n), c = inputs<T>(3, n);
  for (int op = 0; op < kNumFloatOps; ++op) {
    CAPTURE(kFloatNames[op]);
    std::vector<T> g = launch<T, T>(kernel, op, a, &b, &c);
    size_t bad = 0;
    uint64_t worst = 0;
    for (size_t i = 0; i < n; ++i) {
      T h = host_float<T>(op, a[i], b[i], c[i]);
      bool ok;
      if (tol[op] == 0) ok = same_bits(h, g[i]);
      else {
        uint64_t d = ulp_dist(h, g[i]);
        ok = d <= static_cast<uint64_t>(tol[op]);
        if (!ok && kComposite[op] && std::isfinite(h) && std::isfinite(g[i]))
          ok = std::fabs(static_cast<double>(h) - static_cast<double>(g[i])) <=
               abs_tol * std::max(1.0, std::fabs(static_cast<double>(a[i])));
        if (d != ~0ull) worst = std::max(worst, d);
      }
      if (!ok && bad++ < 3)
        MESSAGE(std::string(kernel) << " " << std::string(kFloatNames[op]) << "(" << a[i] << ", " << b[i] << ", " << c[i] << "): host " << h
                       << " gpu " << g[i]);
    }
    if (tol[op]) MESSAGE(std::string(kernel) << " " << std::string(kFloatNames[op]) << ": max ulp difference " << worst);
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("f32 ops on the GPU match the host within docs/ops.md's tolerances") {
  check_float<float>("k_f32", kTol32, 0x1.0p-20);
}

TEST_CASE("f64 ops on the GPU match the host within docs/ops.md's tolerances") {
  check_float<double>("k_f64", kTol64, 0x1.0p-48);
}

TEST_CASE("f16 and bf16 nodes (computed in f32, rounded per node) on the GPU") {
  const size_t n = 1 << 16;
  for (int half = 0; half < 2; ++half) {
    std::vector<float> fa = inputs<float>(4, n), fb = inputs<float>(5, n), fc = inputs<float>(6, n);
    std::vector<unsigned short> a(n), b(n), c(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = half ? fj_store_bf16(fa[i]).bits : fj_store_f16(fa[i]).bits;
      b[i] = half ? fj_store_bf16(fb[i]).bits : fj_store_f16(fb[i]).bits;
      c[i] = half ? fj_store_bf16(fc[i]).bits : fj_store_f16(fc[i]).bits;
    }
    auto load = [&](unsigned short v) { return half ? fj_load(fj_bf16{v}) : fj_load(fj_f16{v}); };
    for (int op = 0; op < kNumFloatOps; ++op) {
      CAPTURE(kFloatNames[op]);
      CAPTURE(half);
      std::vector<unsigned short> g = launch<unsigned short, unsigned short>(half ? "k_bf16" : "k_f16", op, a, &b, &c);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) {
        float r = host_float<float>(op, load(a[i]), load(b[i]), load(c[i]));
        unsigned short h = half ? fj_store_bf16(r).bits : fj_store_f16(r).bits;
        float hv = load(h), gv = load(g[i]);
        // Exact ops: identical bits (any NaN matches). Math ops: at most 1 half ulp apart (f32
        // differences only show when the value sits next to a rounding boundary).
        bool ok = kTol32[op] == 0 ? (h == g[i] || (std::isnan(hv) && std::isnan(gv)))
                                  : (std::isnan(hv) && std::isnan(gv)) ||
                                        (!std::isnan(hv) && !std::isnan(gv) &&
                                         (h == g[i] || (((h ^ g[i]) & 0x8000) == 0 &&
                                                        std::abs(static_cast<int>(h & 0x7fff) - static_cast<int>(g[i] & 0x7fff)) <= 1)));
        // Composites near cancellation: the absolute tolerance of docs/ops.md.
        if (!ok && kComposite[op] && std::isfinite(hv) && std::isfinite(gv))
          ok = std::fabs(static_cast<double>(hv) - gv) <= 0x1.0p-20 * std::max(1.0, std::fabs(static_cast<double>(load(a[i]))));
        if (!ok && bad++ < 3) MESSAGE(std::string(kFloatNames[op]) << " half " << half << ": host " << hv << " gpu " << gv);
      }
      CHECK(bad == 0);
    }
  }
}

// Every f16/bf16 pattern as a against 128 b patterns (all exponents, signs, zeros, subnormals,
// infinities, NaNs): the device's native half add/sub/mul give the host's bits (f32 op, one
// rounding), NaN payloads aside. This is what lets generated kernels keep half chains in storage
// form (ir/scalar/fj_scalar.h).
TEST_CASE("native f16/bf16 add, sub, mul on the GPU equal the per-node rule bit for bit") {
  std::vector<unsigned short> bs = {0x7c00, 0xfc00, 0x7f80, 0xff80, 0x8000, 0x0001, 0x8001, 0x3c00, 0x7bff, 0x7f7f, 0x0400};
  for (unsigned b = 0; bs.size() < 128; b += 523) bs.push_back(static_cast<unsigned short>(b & 0xffff));
  std::vector<unsigned short> a, b;
  for (unsigned x = 0; x < 65536; ++x)
    for (unsigned short y : bs) {
      a.push_back(static_cast<unsigned short>(x));
      b.push_back(y);
    }
  for (int bf = 0; bf < 2; ++bf) {
    auto nan = [&](unsigned v) { return (v & 0x7fffu) > (bf ? 0x7f80u : 0x7c00u); };
    for (int op = 0; op < 3; ++op) {
      CAPTURE(bf);
      CAPTURE(op);
      std::vector<unsigned short> g = launch<unsigned short, unsigned short>(bf ? "k_native_bf16" : "k_native_f16", op, a, &b, &b);
      size_t bad = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        unsigned h;
        if (bf) {
          const fj_bf16 x{a[i]}, y{b[i]};
          h = (op == 0 ? fj_add_bf16(x, y) : op == 1 ? fj_sub_bf16(x, y) : fj_mul_bf16(x, y)).bits;
        } else {
          const fj_f16 x{a[i]}, y{b[i]};
          h = (op == 0 ? fj_add_f16(x, y) : op == 1 ? fj_sub_f16(x, y) : fj_mul_f16(x, y)).bits;
        }
        if (h != g[i] && !(nan(h) && nan(g[i])) && bad++ < 3)
          MESSAGE("a=0x" << std::hex << a[i] << " b=0x" << b[i] << " host 0x" << h << " gpu 0x" << g[i]);
      }
      CHECK(bad == 0);
    }
  }
}

template <class T> void check_int(const char* kernel) {
  const size_t n = 1 << 14;
  std::mt19937_64 r(7);
  std::vector<T> a(n), b(n), c(n);
  const T ex[] = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(0), T(1), static_cast<T>(-1), T(2), T(3)};
  for (size_t i = 0; i < n; ++i) {
    a[i] = r() % 3 == 0 ? ex[r() % 7] : static_cast<T>(r() % 2 ? r() : r() % 17);
    b[i] = r() % 3 == 0 ? ex[r() % 7] : static_cast<T>(r() % 2 ? r() : r() % 17);
    c[i] = r() % 3 == 0 ? ex[r() % 7] : static_cast<T>(r());
  }
  int k = 0;
#define X(name, expr)                                                      \
  {                                                                        \
    int op = k++;                                                          \
    CAPTURE(#name);                                                        \
    std::vector<T> g = launch<T, T>(kernel, op, a, &b, &c);                \
    size_t bad = 0;                                                        \
    for (size_t i = 0; i < n; ++i) bad += host_int<T>(op, a[i], b[i], c[i]) != g[i]; \
    CHECK(bad == 0);                                                       \
  }
  FJ_INT_OPS(X)
#undef X
}

TEST_CASE("integer ops on the GPU are bit-identical (wrapping, division by zero, INT_MIN / -1)") {
  check_int<signed char>("k_i8");
  check_int<unsigned char>("k_u8");
  check_int<int>("k_i32");
  check_int<long long>("k_i64");
}

template <class T> void check_casts(const char* kernel, std::vector<T> a) {
  int k = 0;
#define X(name, expr)                                                                       \
  {                                                                                         \
    int op = k++;                                                                           \
    CAPTURE(#name);                                                                         \
    std::vector<double> g = launch<T, double>(kernel, op, a, nullptr, nullptr);             \
    size_t bad = 0;                                                                         \
    for (size_t i = 0; i < a.size(); ++i) bad += !same_bits(host_cast<T>(op, a[i]), g[i]); \
    CHECK(bad == 0);                                                                        \
  }
  FJ_CASTS(X)
#undef X
}

TEST_CASE("casts on the GPU are bit-identical (saturation, NaN -> 0, single rounding to halves)") {
  check_casts<float>("c_f32", inputs<float>(8, 1 << 15));
  check_casts<double>("c_f64", inputs<double>(9, 1 << 15));
  std::mt19937_64 r(10);
  std::vector<long long> i64(1 << 15);
  for (auto& v : i64) v = static_cast<long long>(r()) >> (r() % 64);
  check_casts<long long>("c_i64", i64);
  std::vector<int> i32(1 << 15);
  for (auto& v : i32) v = static_cast<int>(r()) >> (r() % 32);
  check_casts<int>("c_i32", i32);
}
