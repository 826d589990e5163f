// ir/scalar/fj_scalar.h must compile as CUDA device code under NVRTC with no includes (generated
// kernels embed it as text). This test builds a kernel that calls the fj_ function of every op of
// ir/ops.def on every compute type the host header supports (so host and device offer the same
// overloads), the storage-form half functions, every cast and the half load/store/round helpers,
// and compiles it with NVRTC for sm_75/80/90/100 with strict options (-fmad=false). NVRTC needs no
// GPU.
#include <doctest/doctest.h>
#include <nvrtc.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "ir/op.h"
#include "ir/op_fns.h"

using namespace fusejit::ir;

namespace {

std::string read_header() {
  std::ifstream f(std::string(FUSEJIT_SOURCE_DIR) + "/ir/scalar/fj_scalar.h");
  REQUIRE(f.good());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

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
std::string nvrtc_compile(const std::string& src, const std::string& arch, std::vector<std::string> extra) {
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
    if (is_leaf(op) || op == Op::Cast) continue;
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
