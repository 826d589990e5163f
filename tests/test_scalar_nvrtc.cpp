// ir/scalar/fj_scalar.h must compile as CUDA device code under NVRTC with no includes (generated
// kernels embed it as text). This test builds a kernel that calls the fj_ function of every op of
// ir/ops.def on every compute type the host header supports (so host and device offer the same
// overloads), the storage-form half functions, every cast and the half load/store/round helpers,
// and compiles it with NVRTC for sm_75/80/90/100 with strict options (-fmad=false). NVRTC needs no
// GPU.
#include <doctest/doctest.h>
#include <nvrtc.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ir/reduce.h"
#include "ir/op.h"
#include "ir/op_fns.h"
#include "tests/support/files.h"

using namespace fusejit::ir;

namespace {

std::string read_header() { return fusejit::testing::read_file(fusejit::testing::source_path("ir/scalar/fj_scalar.h")); }

// The compute types, by the C++ name the header uses.
template <class T> struct TypeName;
template <> struct TypeName<bool> { static constexpr const char* name = "bool"; };
template <> struct TypeName<signed char> { static constexpr const char* name = "signed char"; };
template <> struct TypeName<unsigned char> { static constexpr const char* name = "unsigned char"; };
template <> struct TypeName<int> { static constexpr const char* name = "int"; };
template <> struct TypeName<long long> { static constexpr const char* name = "long long"; };
template <> struct TypeName<float> { static constexpr const char* name = "float"; };
template <> struct TypeName<double> { static constexpr const char* name = "double"; };

template <class R, class T> constexpr bool ok_ret = std::is_same_v<R, T> || std::is_same_v<R, bool>;

// Whether fns.fn has an exact-type overload for T with the op's arity (the call compiles AND
// returns bool or T, i.e. no silent promotion); where's condition is bool.
template <class T, class Fns>
bool host_has(Op op, const Fns& fns) {
  if (op == Op::Where) {
    if constexpr (requires { fns.fn(bool{}, T{}, T{}); }) return ok_ret<decltype(fns.fn(bool{}, T{}, T{})), T>;
    return false;
  }
  switch (op_arity(op)) {
    case 1: if constexpr (requires { fns.fn(T{}); }) return ok_ret<decltype(fns.fn(T{})), T>; return false;
    case 2: if constexpr (requires { fns.fn(T{}, T{}); }) return ok_ret<decltype(fns.fn(T{}, T{})), T>; return false;
    case 3: if constexpr (requires { fns.fn(T{}, T{}, T{}); }) return ok_ret<decltype(fns.fn(T{}, T{}, T{})), T>; return false;
  }
  return false;
}

// Every callable op of ir/ops.def (but cast) for which the host header has an overload on T.
template <class T>
std::vector<Op> host_overloads() {
  std::vector<Op> out;
  for (int k = 0; k < kNumOps; ++k) {
    const Op op = static_cast<Op>(k);
    if (is_leaf(op) || op == Op::Cast) continue;
    if (with_op_fns(op, [&](auto fns) { return host_has<T>(op, fns); })) out.push_back(op);
  }
  return out;
}

const char* kCvtDst[] = {"bool", "i8", "u8", "i32", "i64", "f16", "bf16", "f32", "f64"};

template <class T>
void emit_type(std::ostringstream& k, int idx, std::set<std::string>& covered) {
  std::string tn = TypeName<T>::name;
  std::string v = "v" + std::to_string(idx);
  k << "  { " << tn << " " << v << " = (" << tn << ")in[i + " << idx << "];\n";
  for (Op op : host_overloads<T>()) {
    const std::string fn(op_info(op).scalar_fn);
    covered.insert(fn);
    k << "    acc += (double)" << fn << "(" << (op == Op::Where ? "in[i] > 0.0" : v);
    for (int a = 1; a < op_arity(op); ++a) k << ", " << v;
    k << ");\n";
  }
  for (const char* d : kCvtDst) k << "    acc += (double)fj_cvt_" << d << "(" << v << ");\n";
  k << "  }\n";
}

// Storage-form half ops (ir/ops.def half == Storage): fj_<op>_f16 / fj_<op>_bf16 on storage values.
void emit_storage_ops(std::ostringstream& k, std::set<std::string>& covered) {
  for (int o = 0; o < kNumOps; ++o) {
    const Op op = static_cast<Op>(o);
    if (op_info(op).half != HalfForm::Storage) continue;
    for (const char* h : {"f16", "bf16"}) {
      const std::string fn = std::string(op_info(op).scalar_fn) + "_" + h;
      covered.insert(fn);
      k << "  " << (h[0] == 'f' ? "h" : "b") << "[i] = " << fn << "(" << (h[0] == 'f' ? "h[i]" : "b[i]");
      for (int a = 1; a < op_arity(op); ++a) k << ", " << (h[0] == 'f' ? "h[i]" : "b[i]");
      k << ");\n";
    }
  }
}

std::string build_kernel(std::set<std::string>& covered) {
  std::ostringstream k;
  k << "\nextern \"C\" __global__ void fj_all(const double* in, double* out, fj_f16* h, fj_bf16* b) {\n"
       "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  double acc = 0.0;\n";
  emit_type<bool>(k, 0, covered);
  emit_type<signed char>(k, 1, covered);
  emit_type<unsigned char>(k, 2, covered);
  emit_type<int>(k, 3, covered);
  emit_type<long long>(k, 4, covered);
  emit_type<float>(k, 5, covered);
  emit_type<double>(k, 6, covered);
  emit_storage_ops(k, covered);
  k << "  float x = fj_load(h[i]) + fj_load(b[i]);\n"
       "  h[i] = fj_store_f16(fj_round_f16(x));\n"
       "  b[i] = fj_store_bf16(fj_round_bf16(x));\n"
       "  out[i] = acc;\n}\n";
  return k.str();
}

// Compiles `src` for `arch`; returns "" on success, else the NVRTC log (or the API error).
// Compiles `src` for `arch`; returns "" on success, else the error or warnings. The CUBIN goes to
// *cubin_out when given.
std::string nvrtc_compile(const std::string& src, const std::string& arch, std::vector<std::string> extra,
                          std::string* cubin_out = nullptr) {
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, src.c_str(), "fj_scalar_test.cu", 0, nullptr, nullptr) != NVRTC_SUCCESS)
    return "nvrtcCreateProgram failed";
  std::vector<std::string> opts = {"--gpu-architecture=" + arch, "-fmad=false"};
  opts.insert(opts.end(), extra.begin(), extra.end());
  std::vector<const char*> copts;
  for (auto& o : opts) copts.push_back(o.c_str());
  nvrtcResult r = nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  std::string log(n, '\0');
  if (n) nvrtcGetProgramLog(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  size_t cubin = 0;
  if (r == NVRTC_SUCCESS) nvrtcGetCUBINSize(prog, &cubin);
  if (cubin && cubin_out) {
    cubin_out->resize(cubin);
    nvrtcGetCUBIN(prog, cubin_out->data());
  }
  nvrtcDestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) return std::string(nvrtcGetErrorString(r)) + "\n" + log;
  if (!log.empty()) return "warnings:\n" + log;  // the header must compile cleanly
  if (cubin == 0) return "no CUBIN produced";
  return "";
}

std::set<std::string> supported_archs() {
  int n = 0;
  std::set<std::string> out;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return out;
  std::vector<int> archs(static_cast<size_t>(n));
  nvrtcGetSupportedArchs(archs.data());
  for (int a : archs) out.insert("sm_" + std::to_string(a));
  return out;
}

}  // namespace

TEST_CASE("the kernel covers every op of ir/ops.def") {
  std::set<std::string> covered;
  build_kernel(covered);
  for (int k = 0; k < kNumOps; ++k) {
    Op op = static_cast<Op>(k);
    if (is_leaf(op) || op == Op::Cast || is_reduction(op)) continue;
    CAPTURE(op_name(op));
    CHECK(covered.count(std::string(op_info(op).scalar_fn)) == 1);
    if (op_info(op).half == HalfForm::Storage) CHECK(covered.count(std::string(op_info(op).scalar_fn) + "_bf16") == 1);
  }
}

TEST_CASE("fj_scalar.h compiles under NVRTC with no includes for sm_75/80/90/100") {
  std::set<std::string> covered;
  std::string src = read_header() + build_kernel(covered);
  CHECK(src.find("#include") != std::string::npos);  // host includes exist but are guarded
  std::set<std::string> supported = supported_archs();
  REQUIRE(supported.count("sm_90"));
  int compiled = 0;
  for (const char* arch : {"sm_75", "sm_80", "sm_90", "sm_100"}) {
    if (!supported.count(arch)) {
      MESSAGE("NVRTC does not support " << arch << "; skipped");
      continue;
    }
    CAPTURE(arch);
    std::string err = nvrtc_compile(src, arch, {"--std=c++17"});
    CHECK_MESSAGE(err.empty(), err);
    ++compiled;
  }
  CHECK(compiled >= 2);
  // The options codegen uses in strict mode (jit::default_compile_options): -default-device etc.
  std::string err = nvrtc_compile(src, "sm_90",
                                  {"--std=c++17", "-default-device", "--ftz=false", "--prec-div=true", "--prec-sqrt=true"});
  CHECK_MESSAGE(err.empty(), err);
  // And C++20.
  err = nvrtc_compile(src, "sm_90", {"--std=c++20"});
  CHECK_MESSAGE(err.empty(), err);
}

// NVRTC 13 evaluates a CUDA math call whose argument is a constant at compile time, through the
// host's double functions (atan2f(5.275492f, 1.7f) became the immediate 0x3fa128d3), not the CUDA
// Math API the GPU runs: a fused kernel that sees a literal operand could then differ from the
// unfused one. fj_scalar.h's fj_opaque keeps those calls at run time; no folded value may appear
// in the CUBIN.
TEST_CASE("NVRTC does not fold fj_ math calls on constant operands") {
  volatile float a = 5.275492f, b = 1.7f, c = 0.7f, d = 3.031859f, e = 1.5f, g = 2.5f, h = 3.3f;
  volatile double cd = 0.7, dd = 3.031859, ed = 1.5;
  auto f32 = [](double v) { const float f = static_cast<float>(v); uint32_t u; std::memcpy(&u, &f, 4); return u; };
  auto f64 = [](double v) { uint64_t u; std::memcpy(&u, &v, 8); return u; };
  const uint32_t folded32[] = {f32(std::atan2(double(a), double(b))), f32(std::tanh(double(c))), f32(std::log10(double(d))),
                               f32(std::exp(double(e))), f32(std::sin(double(c))), f32(std::pow(double(g), double(h)))};
  const uint64_t folded64[] = {f64(std::tanh(double(cd))), f64(std::log10(double(dd))), f64(std::exp(double(ed)))};
  const std::string kernel = read_header() +
                             "extern \"C\" __global__ void k(float* o, double* d) {\n"
                             "  o[0] = fj_atan2(5.275492f, 1.7f); o[1] = fj_tanh(0.7f); o[2] = fj_log10(3.031859f);\n"
                             "  o[3] = fj_exp(1.5f); o[4] = fj_sin(0.7f); o[5] = fj_pow(2.5f, 3.3f);\n"
                             "  d[0] = fj_tanh(0.7); d[1] = fj_log10(3.031859); d[2] = fj_exp(1.5);\n}\n";
  std::string cubin;
  const std::string err = nvrtc_compile(kernel, "sm_90", {"--std=c++17", "-default-device"}, &cubin);
  REQUIRE_MESSAGE(err.empty(), err);
  for (uint32_t v : folded32) {
    CAPTURE(v);
    CHECK(cubin.find(std::string(reinterpret_cast<const char*>(&v), 4)) == std::string::npos);
  }
  for (uint64_t v : folded64) {
    CAPTURE(v);
    CHECK(cubin.find(std::string(reinterpret_cast<const char*>(&v), 8)) == std::string::npos);
  }
}
