// fj_scalar.h on a real GPU vs the same header on the host (label `gpu`; exits 77 = skipped where
// there is no driver or device). Every op of ir/ops.def that the header defines on floats runs on
// hard and random inputs in f32, f64, f16 and bf16; every op defined on integers on i8/u8/i32/i64;
// casts too. Exact and Step ops must agree bit for bit; Math and Composite ops within their
// ir/ops.def tolerance (jit::gpu_op_tolerance, listed in docs/ops.md). Dlopens libcuda itself.
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

#include "ir/op_fns.h"
#include "jit/compare.h"
#include "tests/support/files.h"

using namespace fusejit;
using ir::HalfForm;
using ir::Op;
using ir::op_arity;
using ir::op_info;
using ir::op_name;
using ir::with_op_fns;
using ir::kNumOps;
using ir::is_leaf;

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

// ---- the op lists, derived from ir/ops.def: every op the host header defines on the type ----
template <class R, class T> constexpr bool ok_ret = std::is_same_v<R, T> || std::is_same_v<R, bool>;

// Calls fns.fn on x, y, z (as many as the op's arity; where: x > y, y, z) in compute type T, the
// result converted to T (comparisons give 0/1). has == false when the header has no exact-type
// overload for T.
template <class T, class Fns>
T call_op(Op op, const Fns& fns, T x, T y, T z, bool* has = nullptr) {
  if (has) *has = true;
  if (op == Op::Where) {
    if constexpr (requires { fns.fn(bool{}, T{}, T{}); })
      if constexpr (ok_ret<decltype(fns.fn(bool{}, T{}, T{})), T>) return (T)fns.fn(x > y, y, z);
  } else if (op_arity(op) == 1) {
    if constexpr (requires { fns.fn(T{}); })
      if constexpr (ok_ret<decltype(fns.fn(T{})), T>) return (T)fns.fn(x);
  } else if (op_arity(op) == 2) {
    if constexpr (requires { fns.fn(T{}, T{}); })
      if constexpr (ok_ret<decltype(fns.fn(T{}, T{})), T>) return (T)fns.fn(x, y);
  } else if (op_arity(op) == 3) {
    if constexpr (requires { fns.fn(T{}, T{}, T{}); })
      if constexpr (ok_ret<decltype(fns.fn(T{}, T{}, T{})), T>) return (T)fns.fn(x, y, z);
  }
  if (has) *has = false;
  return T(0);
}

// Storage-form half ops on 16-bit values (ir/ops.def half == Storage); H is fj_f16 or fj_bf16.
template <class H, class Fns>
H call_storage(Op op, const Fns& fns, H x, H y, H z) {
  auto& f = [&]() -> auto& { if constexpr (std::is_same_v<H, fj_f16>) return fns.f16; else return fns.bf16; }();
  if (op_arity(op) == 1) { if constexpr (requires { f(H{}); }) return f(x); }
  else if (op_arity(op) == 2) { if constexpr (requires { f(H{}, H{}); }) return f(x, y); }
  else { if constexpr (requires { f(H{}, H{}, H{}); }) return f(x, y, z); }
  FAIL("no storage-form function for " << op_name(op));
  return x;
}

// The non-leaf ops (casts have their own test) that the header defines on compute type T.
template <class T> std::vector<Op> ops_on() {
  std::vector<Op> out;
  for (int k = 0; k < kNumOps; ++k) {
    const Op op = static_cast<Op>(k);
    if (is_leaf(op) || op == Op::Cast) continue;
    bool has = false;
    with_op_fns(op, [&](auto fns) { call_op<T>(op, fns, T(0), T(0), T(0), &has); });
    if (has) out.push_back(op);
  }
  return out;
}
std::vector<Op> storage_ops() {
  std::vector<Op> out;
  for (int k = 0; k < kNumOps; ++k)
    if (op_info(static_cast<Op>(k)).half == HalfForm::Storage) out.push_back(static_cast<Op>(k));
  return out;
}

template <class T> T host_op(Op op, T x, T y, T z) {
  return with_op_fns(op, [&](auto fns) { return call_op<T>(op, fns, x, y, z); });
}

// The device expression for op on x, y, z in compute type T (T is a typedef in the kernel).
std::string device_expr(Op op, const char* x, const char* y, const char* z) {
  std::string e = "(T)" + std::string(op_info(op).scalar_fn) + "(";
  if (op == Op::Where) return e + x + " > " + y + ", " + y + ", " + z + ")";
  const char* v[3] = {x, y, z};
  for (int a = 0; a < op_arity(op); ++a) e += (a ? ", " : "") + std::string(v[a]);
  return e + ")";
}

#define FJ_CASTS(X)                                                                                    \
  X(bool, (double)fj_cvt_bool(x)) X(i8, (double)fj_cvt_i8(x)) X(u8, (double)fj_cvt_u8(x))                \
  X(i32, (double)fj_cvt_i32(x)) X(i64_hi, (double)(fj_cvt_i64(x) >> 20)) X(i64_lo, (double)(fj_cvt_i64(x) & 0xfffff)) \
  X(f16, (double)fj_cvt_f16(x)) X(bf16, (double)fj_cvt_bf16(x)) X(f32, (double)fj_cvt_f32(x)) X(f64, (double)fj_cvt_f64(x))

template <class T> double host_cast(int op, T x) {
  int k = 0;
#define X(name, expr) if (op == k++) return expr;
  FJ_CASTS(X)
#undef X
  return 0;
}

std::string kernel_source() {
  // source_path: FUSEJIT_SOURCE_DIR can be overridden at run time (a binary copied to another machine).
  std::string s = testing::read_file(testing::source_path("ir/scalar/fj_scalar.h"));
  // One switch case per op the header defines on the type (ops_on); f16/bf16 kernels compute in
  // f32 and round once, except Storage-form ops, which run on the 16-bit values.
  auto float_kernel = [&](const char* name, const char* T, const char* S, const char* load, const char* store,
                          const std::vector<Op>& ops, const char* half) {
    s += std::string("\nextern \"C\" __global__ void ") + name + "(int op, const " + S + "* a, const " + S + "* b, const " +
         S + "* c, " + S + "* o, int n) {\n  typedef " + T + " T;\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i >= n) return;\n  T x = " + load + "(a[i]), y = " + load + "(b[i]), z = " + load + "(c[i]);\n  T r = 0;\n"
         "  switch (op) {\n";
    for (size_t k = 0; k < ops.size(); ++k) {
      if (half && op_info(ops[k]).half == HalfForm::Storage) {
        std::string call = std::string(op_info(ops[k]).scalar_fn) + "_" + half + "(a[i]";
        for (int j = 1; j < op_arity(ops[k]); ++j) call += j == 1 ? ", b[i]" : ", c[i]";
        s += "    case " + std::to_string(k) + ": o[i] = " + call + "); return;\n";
      } else {
        s += "    case " + std::to_string(k) + ": r = " + device_expr(ops[k], "x", "y", "z") + "; break;\n";
      }
    }
    s += std::string("  }\n  o[i] = ") + store + "(r);\n}\n";
  };
  s += "\n__device__ float fj_id(float v) { return v; }\n__device__ double fj_idd(double v) { return v; }\n";
  float_kernel("k_f32", "float", "float", "fj_id", "fj_id", ops_on<float>(), nullptr);
  float_kernel("k_f64", "double", "double", "fj_idd", "fj_idd", ops_on<double>(), nullptr);
  float_kernel("k_f16", "float", "fj_f16", "fj_load", "fj_store_f16", ops_on<float>(), "f16");
  float_kernel("k_bf16", "float", "fj_bf16", "fj_load", "fj_store_bf16", ops_on<float>(), "bf16");
  // Storage-form half ops alone: the native PTX instructions (add/sub/mul.rn.f16 on sm_53+, .bf16
  // on sm_90+; fma.rn.f16 on sm_53+, .bf16 on sm_80+).
  for (const char* h : {"f16", "bf16"}) {
    const std::string t = std::string("fj_") + h;
    s += "\nextern \"C\" __global__ void k_native_" + std::string(h) + "(int op, const " + t + "* a, const " + t +
         "* b, const " + t + "* c, " + t + "* o, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i >= n) return;\n  switch (op) {\n";
    const std::vector<Op> st = storage_ops();
    for (size_t k = 0; k < st.size(); ++k) {
      std::string call = std::string(op_info(st[k]).scalar_fn) + "_" + h + "(a[i]";
      for (int j = 1; j < op_arity(st[k]); ++j) call += j == 1 ? ", b[i]" : ", c[i]";
      s += "    case " + std::to_string(k) + ": o[i] = " + call + "); break;\n";
    }
    s += "  }\n}\n";
  }
  auto int_kernel = [&](const char* name, const char* T, const std::vector<Op>& ops) {
    s += std::string("\nextern \"C\" __global__ void ") + name + "(int op, const " + T + "* a, const " + T + "* b, const " +
         T + "* c, " + T + "* o, int n) {\n  typedef " + T + " T;\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
         "  if (i >= n) return;\n  T x = a[i], y = b[i], z = c[i];\n  T r = 0;\n  switch (op) {\n";
    for (size_t k = 0; k < ops.size(); ++k)
      s += "    case " + std::to_string(k) + ": r = " + device_expr(ops[k], "x", "y", "z") + "; break;\n";
    s += "  }\n  o[i] = r;\n}\n";
  };
  int_kernel("k_i8", "signed char", ops_on<signed char>());
  int_kernel("k_u8", "unsigned char", ops_on<unsigned char>());
  int_kernel("k_i32", "int", ops_on<int>());
  int_kernel("k_i64", "long long", ops_on<long long>());
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
      case 2: {  // one draw per statement: the same values under every compiler
        const double m = static_cast<double>(r() >> 11) * 0x1.0p-53 + 0.5;
        const int e = static_cast<int>(r() % 80) - 40;
        x = std::ldexp(m, e) * (r() % 2 ? 1 : -1);
        break;
      }
      default: x = (static_cast<double>(r() >> 11) * 0x1.0p-53 - 0.5) * 200.0; break;
    }
    v[i] = static_cast<T>(x);
  }
  return v;
}

template <class T>
void check_float(const char* kernel, ir::DType dtype) {
  const size_t n = 1 << 16;
  std::vector<T> a = inputs<T>(1, n), b = inputs<T>(2, n), c = inputs<T>(3, n);
  const std::vector<Op> ops = ops_on<T>();
  for (size_t op = 0; op < ops.size(); ++op) {
    const std::string name(op_name(ops[op]));
    CAPTURE(name);
    const jit::OpTolerance tol = jit::gpu_op_tolerance(ops[op], dtype);
    std::vector<T> g = launch<T, T>(kernel, static_cast<int>(op), a, &b, &c);
    size_t bad = 0;
    uint64_t worst = 0;
    for (size_t i = 0; i < n; ++i) {
      T h = host_op<T>(ops[op], a[i], b[i], c[i]);
      bool ok;
      if (tol.ulps == 0) ok = same_bits(h, g[i]);
      else {
        uint64_t d = ulp_dist(h, g[i]);
        ok = d <= static_cast<uint64_t>(tol.ulps);
        if (!ok && tol.abs_scale > 0 && std::isfinite(h) && std::isfinite(g[i]))
          ok = std::fabs(static_cast<double>(h) - static_cast<double>(g[i])) <=
               tol.abs_scale * std::max(1.0, std::fabs(static_cast<double>(a[i])));
        if (d != ~0ull) worst = std::max(worst, d);
      }
      if (!ok && bad++ < 3)
        MESSAGE(std::string(kernel) << " " << name << "(" << a[i] << ", " << b[i] << ", " << c[i] << "): host " << h
                       << " gpu " << g[i]);
    }
    if (tol.ulps) MESSAGE(std::string(kernel) << " " << name << ": max ulp difference " << worst);
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("f32 ops on the GPU match the host within ir/ops.def's tolerances") {
  check_float<float>("k_f32", ir::DType::F32);
}

TEST_CASE("f64 ops on the GPU match the host within ir/ops.def's tolerances") {
  check_float<double>("k_f64", ir::DType::F64);
}

TEST_CASE("f16 and bf16 nodes (computed in f32, rounded per node; Storage ops on 16 bits) on the GPU") {
  const size_t n = 1 << 16;
  const std::vector<Op> ops = ops_on<float>();
  for (int half = 0; half < 2; ++half) {
    std::vector<float> fa = inputs<float>(4, n), fb = inputs<float>(5, n), fc = inputs<float>(6, n);
    std::vector<unsigned short> a(n), b(n), c(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = half ? fj_store_bf16(fa[i]).bits : fj_store_f16(fa[i]).bits;
      b[i] = half ? fj_store_bf16(fb[i]).bits : fj_store_f16(fb[i]).bits;
      c[i] = half ? fj_store_bf16(fc[i]).bits : fj_store_f16(fc[i]).bits;
    }
    auto load = [&](unsigned short v) { return half ? fj_load(fj_bf16{v}) : fj_load(fj_f16{v}); };
    // The host's value: Storage ops on the 16-bit values, every other op in f32 rounded once.
    auto host = [&](Op op, size_t i) -> unsigned short {
      if (op_info(op).half == HalfForm::Storage)
        return with_op_fns(op, [&](auto fns) -> unsigned short {
          if (half) return call_storage<fj_bf16>(op, fns, fj_bf16{a[i]}, fj_bf16{b[i]}, fj_bf16{c[i]}).bits;
          return call_storage<fj_f16>(op, fns, fj_f16{a[i]}, fj_f16{b[i]}, fj_f16{c[i]}).bits;
        });
      const float r = host_op<float>(op, load(a[i]), load(b[i]), load(c[i]));
      return half ? fj_store_bf16(r).bits : fj_store_f16(r).bits;
    };
    for (size_t op = 0; op < ops.size(); ++op) {
      const std::string name(op_name(ops[op]));
      CAPTURE(name);
      CAPTURE(half);
      const jit::OpTolerance tol = jit::gpu_op_tolerance(ops[op], half ? ir::DType::BF16 : ir::DType::F16);
      std::vector<unsigned short> g =
          launch<unsigned short, unsigned short>(half ? "k_bf16" : "k_f16", static_cast<int>(op), a, &b, &c);
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) {
        const unsigned short h = host(ops[op], i);
        float hv = load(h), gv = load(g[i]);
        // Exact ops: identical bits (any NaN matches). Math ops: at most ulp_half half ulps apart
        // (f32 differences only show when the value sits next to a rounding boundary).
        bool ok = (std::isnan(hv) && std::isnan(gv)) || h == g[i] ||
                  (tol.ulps > 0 && !std::isnan(hv) && !std::isnan(gv) && ((h ^ g[i]) & 0x8000) == 0 &&
                   std::abs(static_cast<int>(h & 0x7fff) - static_cast<int>(g[i] & 0x7fff)) <= tol.ulps);
        // Composites near cancellation: the f32 absolute tolerance of docs/ops.md.
        if (!ok && op_info(ops[op]).gpu == ir::OpAccuracy::Composite && std::isfinite(hv) && std::isfinite(gv))
          ok = std::fabs(static_cast<double>(hv) - gv) <= 0x1.0p-20 * std::max(1.0, std::fabs(static_cast<double>(load(a[i]))));
        if (!ok && bad++ < 3) MESSAGE(name << " half " << half << ": host " << hv << " gpu " << gv);
      }
      CHECK(bad == 0);
    }
  }
}

// Every f16/bf16 pattern as a against 128 b (and c) patterns (all exponents, signs, zeros,
// subnormals, infinities, NaNs): the device's native half instructions for the Storage-form ops
// (add, sub, mul, fma, ...) give the host's bits (correctly rounded), NaN payloads aside. This is
// what lets generated kernels keep half chains in storage form (ir/scalar/fj_scalar.h).
TEST_CASE("native f16/bf16 Storage-form ops on the GPU equal the host bit for bit") {
  std::vector<unsigned short> bs = {0x7c00, 0xfc00, 0x7f80, 0xff80, 0x8000, 0x0001, 0x8001, 0x3c00, 0x7bff, 0x7f7f, 0x0400};
  for (unsigned b = 0; bs.size() < 128; b += 523) bs.push_back(static_cast<unsigned short>(b & 0xffff));
  std::vector<unsigned short> a, b, c;
  for (unsigned x = 0; x < 65536; ++x)
    for (size_t j = 0; j < bs.size(); ++j) {
      a.push_back(static_cast<unsigned short>(x));
      b.push_back(bs[j]);
      c.push_back(bs[(j * 37 + x) % bs.size()]);
    }
  const std::vector<Op> st = storage_ops();
  for (int bf = 0; bf < 2; ++bf) {
    auto nan = [&](unsigned v) { return (v & 0x7fffu) > (bf ? 0x7f80u : 0x7c00u); };
    for (size_t op = 0; op < st.size(); ++op) {
      const std::string name(op_name(st[op]));
      CAPTURE(bf);
      CAPTURE(name);
      std::vector<unsigned short> g =
          launch<unsigned short, unsigned short>(bf ? "k_native_bf16" : "k_native_f16", static_cast<int>(op), a, &b, &c);
      size_t bad = 0;
      with_op_fns(st[op], [&](auto fns) {
        for (size_t i = 0; i < a.size(); ++i) {
          const unsigned h = bf ? call_storage<fj_bf16>(st[op], fns, fj_bf16{a[i]}, fj_bf16{b[i]}, fj_bf16{c[i]}).bits
                                : call_storage<fj_f16>(st[op], fns, fj_f16{a[i]}, fj_f16{b[i]}, fj_f16{c[i]}).bits;
          if (h != g[i] && !(nan(h) && nan(g[i])) && bad++ < 3)
            MESSAGE("a=0x" << std::hex << a[i] << " b=0x" << b[i] << " c=0x" << c[i] << " host 0x" << h << " gpu 0x" << g[i]);
        }
      });
      CHECK(bad == 0);
    }
  }
}

template <class T> void check_int(const char* kernel) {
  const size_t n = 1 << 14;
  std::mt19937_64 r(7);
  std::vector<T> a(n), b(n), c(n);
  // Extremes and shift counts around the width (W - 1, W, W + 1, 64, 100; -1 above).
  constexpr int W = 8 * sizeof(T);
  const T ex[] = {std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), T(0), T(1), static_cast<T>(-1), T(2), T(3),
                  T(W - 1), T(W), T(W + 1), T(64), T(100)};
  const size_t nex = sizeof(ex) / sizeof(ex[0]);
  for (size_t i = 0; i < n; ++i) {
    a[i] = r() % 3 == 0 ? ex[r() % nex] : static_cast<T>(r() % 2 ? r() : r() % 17);
    b[i] = r() % 3 == 0 ? ex[r() % nex] : static_cast<T>(r() % 2 ? r() : r() % 17);
    c[i] = r() % 3 == 0 ? ex[r() % nex] : static_cast<T>(r());
  }
  const std::vector<Op> ops = ops_on<T>();
  for (size_t op = 0; op < ops.size(); ++op) {
    const std::string name(op_name(ops[op]));
    CAPTURE(name);
    std::vector<T> g = launch<T, T>(kernel, static_cast<int>(op), a, &b, &c);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) bad += host_op<T>(ops[op], a[i], b[i], c[i]) != g[i];
    CHECK(bad == 0);
  }
}

TEST_CASE("integer ops on the GPU are bit-identical (wrapping, division by zero, INT_MIN / -1, shifts)") {
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
