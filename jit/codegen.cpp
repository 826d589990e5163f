// CUDA C++ generation for fusion groups; see jit/codegen.h for the shape of the output.
#include "jit/codegen.h"

#include <xxhash.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>

#include "ir/names.h"
#include "ir/printer.h"
#include "ir/reduce.h"
#include "ir/reduce_group.h"
#include "ir/scalar/fj_scalar.h"
#include "jit/source_key.h"

namespace fusejit::jit {

namespace {

constexpr const char* kKernelPrelude = R"FJK(
// ---- fusejit kernel prelude: indexing and vector helpers for generated kernels ----
#ifdef FJ_DEVICE_CODE
#define FJK_FN __device__ __forceinline__
#else
#define FJK_FN static inline
#endif
// N elements of T moved as aligned accesses of up to 16 bytes each (the widest the hardware has),
// so the compiler emits ld.global.v4 / st.global.v4 style instructions; a 64-byte vector is four.
// The alignment promised is min(16, sizeof(T) * N): what pack_args checks (16-byte pointers).
// A bool input's byte, read as NumPy reads a bool array: any nonzero byte is true (a view of other
// bytes as bool holds 2 or 255). Kernels write bools as 0 or 1.
struct fj_bool_in {
  unsigned char b;
#ifdef FJ_DEVICE_CODE
  __device__ __forceinline__
#endif
  operator bool() const { return b != 0; }
};
template <class T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) fj_vec {
  T v[N];
};
// Host builds with FJK_CHECK_ALIGNMENT (tests) trap where the GPU would fault: a vector access at an
// address that is not a multiple of its alignment.
#if !defined(FJ_DEVICE_CODE) && defined(FJK_CHECK_ALIGNMENT)
#define FJK_ALIGNED(p, T, N) \
  if (reinterpret_cast<unsigned long long>(p) % alignof(fj_vec<T, N>) != 0) __builtin_trap()
#else
#define FJK_ALIGNED(p, T, N)
#endif
template <class T, int N>
FJK_FN fj_vec<T, N> fj_vload(const T* p) {
#ifdef FJ_DEVICE_CODE
  return *reinterpret_cast<const fj_vec<T, N>*>(p);
#else
  FJK_ALIGNED(p, T, N);
  fj_vec<T, N> r;
  __builtin_memcpy(&r, p, sizeof(r));  // host: no aliasing assumptions
  return r;
#endif
}
template <class T, int N>
FJK_FN void fj_vstore(T* p, const fj_vec<T, N>& x) {
#ifdef FJ_DEVICE_CODE
  *reinterpret_cast<fj_vec<T, N>*>(p) = x;
#else
  FJK_ALIGNED(p, T, N);
  __builtin_memcpy(p, &x, sizeof(x));
#endif
}
// A row of n elements of an input, src[i * stride] for i < n, copied into the row cache dst[0, n) by
// the block's nt threads together (a row with a row cache does this first for each cached input;
// every pass then reads the row on chip; the caller's fjk_stage_wait() and barrier make it visible
// to the block). A contiguous row of whole 16-byte units at 16-byte aligned addresses moves in
// 16-byte units: on sm_80 and later with cp.async (global to shared memory without registers, so
// all of a thread's units, of every cached input, are in flight at once until fjk_stage_wait: PTX
// ISA, "cp.async"), else FJK_STAGE_BATCH vector loads in flight per thread.
#define FJK_STAGE_BATCH 4
template <class T>
FJK_FN void fjk_stage_row(T* dst, const T* src, long long n, unsigned long long stride, int tid, int nt) {
  const long long bytes = n * (long long)sizeof(T);
  if (stride != 1 || bytes % 16 != 0 || ((unsigned long long)src | (unsigned long long)dst) % 16 != 0) {
    for (long long i = tid; i < n; i += nt) dst[i] = src[(unsigned long long)i * stride];
    return;
  }
  const long long units = bytes / 16;
  const unsigned int* s = (const unsigned int*)src;
  unsigned int* d = (unsigned int*)dst;
#if defined(FJ_DEVICE_CODE) && __CUDA_ARCH__ >= 800
  for (long long u = tid; u < units; u += nt)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
                 :: "r"((unsigned int)__cvta_generic_to_shared(d + 4 * u)), "l"(s + 4 * u) : "memory");
#else
  for (long long u0 = tid; u0 < units; u0 += FJK_STAGE_BATCH * (long long)nt) {
    fj_vec<unsigned int, 4> x[FJK_STAGE_BATCH];
    for (int j = 0; j < FJK_STAGE_BATCH; ++j)
      if (u0 + j * nt < units) x[j] = fj_vload<unsigned int, 4>(s + 4 * (u0 + j * nt));
    for (int j = 0; j < FJK_STAGE_BATCH; ++j)
      if (u0 + j * nt < units) fj_vstore<unsigned int, 4>(d + 4 * (u0 + j * nt), x[j]);
  }
#endif
}
// Waits for this thread's copies of fjk_stage_row to land (cp.async's; the other forms are done).
FJK_FN void fjk_stage_wait() {
#if defined(FJ_DEVICE_CODE) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}
// A bool input's row is cached as 0 or 1 (fj_bool_in: any nonzero byte is true), element by element.
FJK_FN void fjk_stage_row(bool* dst, const fj_bool_in* src, long long n, unsigned long long stride, int tid, int nt) {
  for (long long i = tid; i < n; i += nt) dst[i] = src[(unsigned long long)i * stride];
}
// The launch's dynamic shared memory (a reduction kernel's row cache): on the host, a buffer the
// trampoline's caller passes (fj_host_dynamic_shared, the host prelude).
#ifdef FJ_DEVICE_CODE
#define FJK_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#else
#define FJK_DYNAMIC_SHARED(name) unsigned char* const name = fj_host_dynamic_shared
#endif
// A region of the launch's dynamic shared memory, `offset` bytes in, when `on`. On the GPU the address
// whatever `on` (it is read only when on), so the compiler keeps it in the shared state space
// (ld/st.shared with 32-bit addresses; a select with a null pointer made it generic: 8 to 13 more
// registers in the fused softmax under ptxas for sm_90); on the host null when off (no buffer).
template <class T>
FJK_FN T* fjk_shared_region(unsigned char* base, unsigned long long offset, bool on) {
#ifdef FJ_DEVICE_CODE
  return (T*)(base + offset);
#else
  return on ? (T*)(base + offset) : (T*)0;
#endif
}
// x / d for x < 2^31 from the magic numbers pack_args passes (jit/kernel_abi.h, div_magic32):
// a multiply-high, an add and a shift instead of a division sequence.
FJK_FN unsigned int fjk_udiv(unsigned int x, unsigned int mul, unsigned int shift) {
#ifdef FJ_DEVICE_CODE
  return (__umulhi(x, mul) + x) >> shift;
#else
  return ((unsigned int)(((unsigned long long)x * mul) >> 32) + x) >> shift;
#endif
}
// Exact constants that have no literal form (inf, nan with its payload).
FJK_FN float fjk_f32_from_bits(unsigned int b) {
#ifdef FJ_DEVICE_CODE
  return __int_as_float(static_cast<int>(b));
#else
  float f;
  __builtin_memcpy(&f, &b, sizeof f);
  return f;
#endif
}
FJK_FN double fjk_f64_from_bits(unsigned long long b) {
#ifdef FJ_DEVICE_CODE
  return __longlong_as_double(static_cast<long long>(b));
#else
  double d;
  __builtin_memcpy(&d, &b, sizeof d);
  return d;
#endif
}
// ---- end of kernel prelude ----
)FJK";

// How values are named in a kernel's text. By default after graph node ids (`v12`), with the
// node's name and source line in comments. Canonical kernels (CodegenOptions::canonical_names)
// number values in order of first appearance and carry no names or lines, so structurally equal
// groups give the same text, name and cache entry.
class Naming {
 public:
  Naming(const ir::Graph& g, bool canonical) : g_(g), canonical_(canonical) {}
  std::string v(ir::NodeId id) {
    if (!canonical_) return fmt::format("v{}", id);
    auto [it, added] = canon_.try_emplace(id, static_cast<int>(canon_.size()));
    return fmt::format("v{}", it->second);
  }
  // "  [gelu.txt:5]", or "" when the node has no location or names are canonical.
  std::string where(const ir::Node& n) const {
    if (canonical_ || !n.loc.known()) return "";
    std::string file = g_.file;
    if (auto p = file.find_last_of('/'); p != std::string::npos) file = file.substr(p + 1);
    if (file.empty()) file = g_.name.empty() ? "graph" : g_.name;
    return location_comment(file, n.loc.line);
  }
  std::string label(ir::NodeId id) {
    const ir::Node& n = g_.node(id);
    if (n.name.empty() || canonical_) return v(id);
    // A graph name of the kernel's own form (v1) would read as another value: "v2 (named v1)".
    const bool like_id = n.name.size() > 1 && n.name[0] == 'v' &&
                         std::all_of(n.name.begin() + 1, n.name.end(), [](char c) { return c >= '0' && c <= '9'; });
    return fmt::format("{} ({}{})", v(id), like_id ? "named " : "", n.name);
  }
  // Comment text describing how a node is computed.
  std::string describe(ir::NodeId id) {
    const ir::Node& n = g_.node(id);
    std::string args;
    for (int k = 0; k < n.nargs; ++k) args += (k ? ", " : "") + v(n.arg(k));
    if (n.op == ir::Op::Cast) args += fmt::format(", {}", ir::dtype_name(n.dtype));
    return fmt::format("{} = {}({}) : {}", label(id), ir::op_name(n.op), args, ir::dtype_name(n.dtype));
  }

 private:
  const ir::Graph& g_;
  bool canonical_;
  std::map<ir::NodeId, int> canon_;
};

}  // namespace

const char* kernel_prelude() { return kKernelPrelude; }

const char* storage_ctype(ir::DType t) {
  switch (t) {
    case ir::DType::Bool: return "bool";
    case ir::DType::I8: return "signed char";
    case ir::DType::U8: return "unsigned char";
    case ir::DType::I32: return "int";
    case ir::DType::I64: return "long long";
    case ir::DType::F16: return "fj_f16";
    case ir::DType::BF16: return "fj_bf16";
    case ir::DType::F32: return "float";
    case ir::DType::F64: return "double";
  }
  FJ_CHECK(false, "unknown dtype");
  return "";
}

const char* compute_ctype(ir::DType t) { return ir::is_half(t) ? "float" : storage_ctype(t); }

std::string constant_literal(const ir::Scalar& s) {
  char buf[64];
  switch (s.dtype) {
    case ir::DType::Bool: return s.i ? "true" : "false";
    case ir::DType::I8: return fmt::format("(signed char)({})", static_cast<int>(static_cast<int8_t>(s.i)));
    case ir::DType::U8: return fmt::format("(unsigned char){}", static_cast<int>(static_cast<uint8_t>(s.i)));
    case ir::DType::I32: {
      const int32_t v = static_cast<int32_t>(s.i);
      if (v == INT32_MIN) return "(-2147483647 - 1)";
      return fmt::format("{}", v);
    }
    case ir::DType::I64:
      if (s.i == INT64_MIN) return "(-9223372036854775807LL - 1LL)";
      return fmt::format("{}LL", s.i);
    case ir::DType::F16:
    case ir::DType::BF16:
    case ir::DType::F32: {
      const float f = static_cast<float>(s.f);
      if (!std::isfinite(f)) {
        uint32_t b;
        std::memcpy(&b, &f, 4);
        return fmt::format("fjk_f32_from_bits(0x{:08x}u)", b);
      }
      std::snprintf(buf, sizeof buf, "%af", static_cast<double>(f));
      return buf;
    }
    case ir::DType::F64: {
      if (!std::isfinite(s.f)) {
        uint64_t b;
        std::memcpy(&b, &s.f, 8);
        return fmt::format("fjk_f64_from_bits(0x{:016x}ull)", b);
      }
      std::snprintf(buf, sizeof buf, "%a", s.f);
      return buf;
    }
  }
  FJ_CHECK(false, "unknown dtype");
  return "";
}

namespace {

// What every stage of one kernel's generation reads: the group, its layout, value names and the
// index type. Stages run in a fixed order (vector width, signature, element function, body,
// finish) because canonical names are numbered by first use.
struct KernelGen {
  KernelGen(const ir::Graph& graph, const ir::FusionGroup& grp, const CodegenOptions& options)
      : g(graph), group(grp), opts(options), nm(graph, options.canonical_names), layout(compute_layout(graph, grp)) {
    if (opts.index_bits == 64) layout.index64 = true;
    FJ_CHECK(!(opts.index_bits == 32 && layout.index64), "codegen: 32-bit index math forced for >= 2^31 elements");
    idx = layout.index64 ? "unsigned long long" : "unsigned int";
    idx_bytes = layout.index64 ? 8 : 4;
    all_flat = std::none_of(layout.access.begin(), layout.access.end(),
                            [](InputAccess a) { return a == InputAccess::Strided; });
    rank = layout.dim_groups.size();
  }
  ir::DType dtype(ir::NodeId id) const { return g.node(id).dtype; }
  const char* storage(ir::NodeId id) const { return storage_ctype(dtype(id)); }
  // A strided input contiguous along the innermost collapsed dim: loaded as a vector.
  bool inner_vec(size_t i) const { return layout.access[i] == InputAccess::Strided && !layout.bcast[i][rank - 1]; }

  const ir::Graph& g;
  const ir::FusionGroup& group;
  const CodegenOptions& opts;
  Naming nm;
  KernelLayout layout;
  const char* idx = "unsigned int";  // IndexT of jit/kernel_abi.h
  int idx_bytes = 4;
  bool all_flat = true;              // no strided input: no coordinates to compute
  size_t rank = 0;                   // collapsed dims
  int V = 1;                         // vector width (stage 1)
};

// Stage 1: the vector width. V consecutive elements of the iteration space per iteration.
// Contiguous inputs and outputs move as one vector. A strided input is either contiguous along the
// innermost collapsed dim (its stride there is 1: one vector load at its base offset) or broadcast
// along it (one scalar load reused by all V lanes). With strided inputs the vector path is only
// valid when the innermost collapsed size is a multiple of V (then the V elements never cross a
// row and every base offset is a multiple of V, so aligned); pack_args checks that at run time.
// V is set by the WIDEST array that moves as a vector: 16 bytes per access of it (a u8 input
// feeding an f32 output gets V = 4: a 4-byte load and a 16-byte store per thread), so every warp-wide
// access covers one contiguous span. Measured on an H200: V from the narrowest array (V = 16 there,
// four 16-byte f32 stores per thread 64 bytes apart) took nchw_normalize from 75 % to 40 % of the
// copy bandwidth and int8_quant from 88 % to 64 % (2026-11-30 against 2026-12-04,
// docs/performance.md).
int vector_width(const KernelGen& k) {
  int max_size = 1;
  auto note_size = [&](ir::DType t) { max_size = std::max(max_size, ir::dtype_size(t)); };
  for (size_t i = 0; i < k.group.inputs.size(); ++i)
    if (k.layout.access[i] == InputAccess::Contiguous || k.inner_vec(i)) note_size(k.dtype(k.group.inputs[i]));
  for (ir::NodeId o : k.group.outputs) note_size(k.dtype(o));
  // No vector path for a 0-d iteration space (one element).
  if (!k.opts.vectorize || k.group.outputs.empty() || k.rank < 1 || (!k.all_flat && k.rank < 2)) return 1;
  return std::max(1, 16 / max_size);
}

// The element type an input pointer points to: its storage type, but fj_bool_in for bool (any
// nonzero byte reads as true).
const char* input_storage(KernelGen& k, ir::NodeId id) {
  return k.dtype(id) == ir::DType::Bool ? "fj_bool_in" : k.storage(id);
}

// The parameters both entry points start with: pointers, params and n (jit/kernel_abi.h).
KernelSignature common_signature(KernelGen& k) {
  KernelSignature sig;
  sig.layout = k.layout;
  const ir::FusionGroup& grp = k.group;
  // No __restrict__: an output may be the same buffer as an input (in place).
  for (size_t i = 0; i < grp.inputs.size(); ++i)
    sig.args.push_back({ArgKind::InputPtr, static_cast<int>(i), -1, -1, k.dtype(grp.inputs[i]), 8,
                        "in_" + k.nm.v(grp.inputs[i]), fmt::format("const {}*", input_storage(k, grp.inputs[i]))});
  for (size_t i = 0; i < grp.outputs.size(); ++i)
    sig.args.push_back({ArgKind::OutputPtr, static_cast<int>(i), -1, -1, k.dtype(grp.outputs[i]), 8,
                        "out_" + k.nm.v(grp.outputs[i]), fmt::format("{}*", k.storage(grp.outputs[i]))});
  for (size_t i = 0; i < grp.params.size(); ++i) {
    const ir::Node& nd = k.g.node(grp.params[i]);
    FJ_CHECK(nd.op == ir::Op::Param, "codegen: group param is not a Param node");
    const int bytes = ir::is_half(nd.dtype) ? 4 : ir::dtype_size(nd.dtype);
    sig.args.push_back({ArgKind::Param, static_cast<int>(i), -1, nd.slot, nd.dtype, bytes, "p_" + k.nm.v(grp.params[i]),
                        compute_ctype(nd.dtype)});
  }
  sig.args.push_back({ArgKind::NumElements, -1, -1, -1, ir::DType::I64, k.idx_bytes, "n", k.idx});
  return sig;
}

// Stage 2: the fast entry's parameter list, in the order of jit/kernel_abi.h.
KernelSignature signature(KernelGen& k) {
  KernelSignature sig = common_signature(k);
  sig.vector_width = k.V;
  const ir::FusionGroup& grp = k.group;
  if (!k.all_flat) {
    for (size_t c = 1; c < k.rank; ++c) {
      sig.args.push_back({ArgKind::DimSize, static_cast<int>(c), -1, -1, ir::DType::I64, k.idx_bytes,
                          fmt::format("size{}", c), k.idx});
      if (!k.layout.index64) {
        sig.args.push_back({ArgKind::DimDivMul, static_cast<int>(c), -1, -1, ir::DType::I32, 4,
                            fmt::format("size{}_mul", c), "unsigned int"});
        sig.args.push_back({ArgKind::DimDivShift, static_cast<int>(c), -1, -1, ir::DType::I32, 4,
                            fmt::format("size{}_shift", c), "unsigned int"});
      }
    }
    for (size_t i = 0; i < grp.inputs.size(); ++i) {
      if (k.layout.access[i] != InputAccess::Strided) continue;
      for (size_t c = 0; c < k.rank; ++c)
        if (!k.layout.bcast[i][c])
          sig.args.push_back({ArgKind::Stride, static_cast<int>(i), static_cast<int>(c), -1, ir::DType::I64, k.idx_bytes,
                              fmt::format("st_{}_{}", k.nm.v(grp.inputs[i]), c), k.idx});
    }
  }
  if (k.V > 1) sig.args.push_back({ArgKind::VecFlag, -1, -1, -1, ir::DType::I32, 4, "vec_ok", "int"});
  return sig;
}

// The strided entry's parameter list: sizes of the kept dims 1..K-1 (with magic numbers in 32-bit
// kernels), then each input's strides along the kept dims it has, then each output's.
KernelSignature strided_signature(KernelGen& k) {
  KernelSignature sig = common_signature(k);
  sig.strided = true;
  const ir::FusionGroup& grp = k.group;
  const size_t K = k.layout.iter_dims.size();
  for (size_t j = 1; j < K; ++j) {
    sig.args.push_back({ArgKind::IterSize, static_cast<int>(j), -1, -1, ir::DType::I64, k.idx_bytes,
                        fmt::format("isize{}", j), k.idx});
    if (!k.layout.index64) {
      sig.args.push_back({ArgKind::IterDivMul, static_cast<int>(j), -1, -1, ir::DType::I32, 4,
                          fmt::format("isize{}_mul", j), "unsigned int"});
      sig.args.push_back({ArgKind::IterDivShift, static_cast<int>(j), -1, -1, ir::DType::I32, 4,
                          fmt::format("isize{}_shift", j), "unsigned int"});
    }
  }
  for (size_t i = 0; i < grp.inputs.size(); ++i)
    for (size_t j = 0; j < K; ++j)
      if (k.layout.in_dims[i][j] >= 0)
        sig.args.push_back({ArgKind::InStride, static_cast<int>(i), static_cast<int>(j), -1, ir::DType::I64, 8,
                            fmt::format("ist_{}_{}", k.nm.v(grp.inputs[i]), j), "unsigned long long"});
  for (size_t i = 0; i < grp.outputs.size(); ++i)
    for (size_t j = 0; j < K; ++j)
      sig.args.push_back({ArgKind::OutStride, static_cast<int>(i), static_cast<int>(j), -1, ir::DType::I64, 8,
                          fmt::format("ost_{}_{}", k.nm.v(grp.outputs[i]), j), "unsigned long long"});
  return sig;
}

// The two forms of an f16/bf16 value in the element function: storage bits `vNh` (fj_f16/fj_bf16)
// and their exact f32 value `vN`. Inputs arrive and outputs leave in storage form; ops whose
// ir/ops.def half form is Storage (add, sub, mul, fma) compute on halves of their own dtype in
// storage form (fj_add_f16 etc.: native instructions on the GPU, correctly rounded; see
// fj_scalar.h); every other op computes in f32 and rounds once. A form is emitted only where some
// use needs it, so a half chain of add/mul never converts.
class HalfForms {
 public:
  enum class Form { Storage, Compute };

  explicit HalfForms(KernelGen& k) : k_(k) {
    for (ir::NodeId id : k.group.nodes) {
      const ir::Node& nd = k.g.node(id);
      for (int j = 0; j < nd.nargs; ++j) (native(nd) ? need_h_ : need_f_).insert(nd.arg(j));
    }
    for (ir::NodeId id : k.group.outputs) (half(id) ? need_h_ : need_f_).insert(id);
  }
  bool half(ir::NodeId id) const { return ir::is_half(k_.dtype(id)); }
  bool needs_storage(ir::NodeId id) const { return need_h_.count(id) > 0; }
  bool needs_compute(ir::NodeId id) const { return need_f_.count(id) > 0; }
  std::string hname(ir::NodeId id) { return k_.nm.v(id) + "h"; }
  // The name a use in `form` reads: `vNh` for a half in storage form, else `vN`.
  std::string name(ir::NodeId id, Form form) { return half(id) && form == Form::Storage ? hname(id) : k_.nm.v(id); }
  // An add/sub/mul of halves of its own dtype, computed in storage form (strict mode only).
  bool native(const ir::Node& nd) const {
    if (k_.opts.fast_math || !ir::is_half(nd.dtype)) return false;
    if (ir::op_info(nd.op).half != ir::HalfForm::Storage) return false;
    for (int j = 0; j < nd.nargs; ++j)
      if (k_.dtype(nd.arg(j)) != nd.dtype) return false;
    return true;
  }
  // Declares value `id` from `expr`, which gives it in form `have` (`note` ends the line: its
  // comment and newline), then its other form where some use needs it.
  std::string declare(ir::NodeId id, Form have, const std::string& expr, const std::string& note) {
    const ir::DType t = k_.dtype(id);
    const std::string line = have == Form::Storage
                                 ? fmt::format("  const {} {} = {};{}", storage_ctype(t), hname(id), expr, note)
                                 : fmt::format("  const {} {} = {};{}", compute_ctype(t), k_.nm.v(id), expr, note);
    return line + other_form(id, have);
  }
  // The other form of half value `id`, given in form `have`, where some use needs it.
  std::string other_form(ir::NodeId id, Form have) {
    if (!half(id)) return "";
    if (have == Form::Storage && needs_compute(id))
      return fmt::format("  const float {} = fj_load({});\n", k_.nm.v(id), hname(id));
    if (have == Form::Compute && needs_storage(id))
      return fmt::format("  const {} {} = {}({});\n", k_.storage(id), hname(id), store_fn(k_.dtype(id)), k_.nm.v(id));
    return "";
  }
  static const char* store_fn(ir::DType t) { return t == ir::DType::F16 ? "fj_store_f16" : "fj_store_bf16"; }

 private:
  KernelGen& k_;
  std::set<ir::NodeId> need_h_, need_f_;  // half values whose storage / f32 form some use reads
};

// The constants a group reads, each declared in the forms its uses need. Throws InternalError for
// an operand that is neither computed in the group, read, a param nor a constant.
std::string declare_constants(KernelGen& k, HalfForms& hf) {
  const std::set<ir::NodeId> in_group(k.group.nodes.begin(), k.group.nodes.end());
  const std::set<ir::NodeId> read(k.group.inputs.begin(), k.group.inputs.end());
  const std::set<ir::NodeId> params(k.group.params.begin(), k.group.params.end());
  std::set<ir::NodeId> consts;
  auto note_operand = [&](ir::NodeId a) {
    if (in_group.count(a) || read.count(a) || params.count(a)) return;
    FJ_CHECK(k.g.node(a).op == ir::Op::Const,
             fmt::format("codegen: operand v{} is not computed, read or a param in this group", a));
    consts.insert(a);
  };
  for (ir::NodeId id : k.group.nodes)
    for (int j = 0; j < k.g.node(id).nargs; ++j) note_operand(k.g.node(id).arg(j));
  for (ir::NodeId id : k.group.outputs) note_operand(id);
  std::string body;
  for (ir::NodeId c : consts) {
    const ir::Node& cn = k.g.node(c);
    const std::string note = fmt::format("  // {} = const {} : {}{}\n", k.nm.label(c), ir::print_scalar(cn.value),
                                         ir::dtype_name(cn.dtype), k.nm.where(cn));
    // Both forms are exact literals: no conversion at run time.
    if (hf.half(c) && hf.needs_storage(c)) {
      const float f = static_cast<float>(cn.value.f);
      const unsigned bits = cn.dtype == ir::DType::F16 ? fj_f16_bits_of(f) : fj_bf16_bits_of(f);
      body += fmt::format("  const {} {} = {{(unsigned short)0x{:04x}u}};{}", storage_ctype(cn.dtype), hf.hname(c), bits, note);
      if (!hf.needs_compute(c)) continue;
    }
    body += fmt::format("  const {} {} = {};{}", compute_ctype(cn.dtype), k.nm.v(c), constant_literal(cn.value), note);
  }
  return body;
}

// One op node of the group: fj_<op>(operands), rounded to its dtype for f16/bf16 in strict mode.
std::string compute_node(KernelGen& k, HalfForms& hf, ir::NodeId id) {
  using Form = HalfForms::Form;
  const ir::Node& nd = k.g.node(id);
  FJ_CHECK(!ir::is_leaf(nd.op), "codegen: a leaf is listed among a group's nodes");
  const std::string note = fmt::format("  // {}{}\n", k.nm.describe(id), k.nm.where(nd));
  const std::string_view scalar_fn = ir::op_info(nd.op).scalar_fn;  // ir/ops.def; casts: fj_cvt_<dst>
  if (hf.native(nd)) {
    std::string hargs;
    for (int j = 0; j < nd.nargs; ++j) hargs += (j ? ", " : "") + hf.hname(nd.arg(j));
    return hf.declare(id, Form::Storage, fmt::format("{}_{}({})", scalar_fn, ir::dtype_name(nd.dtype), hargs), note);
  }
  std::string args;
  for (int j = 0; j < nd.nargs; ++j) args += (j ? ", " : "") + k.nm.v(nd.arg(j));
  const std::string fn = nd.op == ir::Op::Cast ? fmt::format("{}_{}", scalar_fn, ir::dtype_name(nd.dtype))
                                               : std::string(scalar_fn);
  std::string value = fmt::format("{}({})", fn, args);
  if (hf.half(id) && !k.opts.fast_math && hf.needs_storage(id)) {
    // One rounding to storage form. A cast whose operand is held as an f32 value (f32, or a
    // half's exact f32 form) rounds that value directly.
    const ir::DType src = nd.nargs ? k.dtype(nd.arg(0)) : nd.dtype;
    const bool cast_from_f32 = nd.op == ir::Op::Cast && (src == ir::DType::F32 || ir::is_half(src));
    return hf.declare(id, Form::Storage,
                      fmt::format("{}({})", HalfForms::store_fn(nd.dtype), cast_from_f32 ? k.nm.v(nd.arg(0)) : value), note);
  }
  // Strict: every f16/bf16 node is rounded to its type (casts already return a rounded value).
  // Fast mode keeps halves in f32; the storage form is rounded once where an output needs it.
  if (hf.half(id) && nd.op != ir::Op::Cast && !k.opts.fast_math)
    value = fmt::format("{}({})", nd.dtype == ir::DType::F16 ? "fj_round_f16" : "fj_round_bf16", value);
  return hf.declare(id, Form::Compute, value, note);
}

// Stage 3: the element function, `@NAME@_elem(inputs, params, outputs&)`: the group's outputs of
// one element from its loaded inputs and params.
std::string element_function(KernelGen& k) {
  using Form = HalfForms::Form;
  HalfForms hf(k);
  std::string params;
  auto add_param = [&](const std::string& p) { params += (params.empty() ? "" : ", ") + p; };
  for (ir::NodeId id : k.group.inputs) add_param(fmt::format("{} {}", k.storage(id), hf.name(id, Form::Storage)));
  for (ir::NodeId id : k.group.params) add_param(fmt::format("{} {}", compute_ctype(k.dtype(id)), k.nm.v(id)));
  for (ir::NodeId id : k.group.outputs) add_param(fmt::format("{}& o_{}", k.storage(id), k.nm.v(id)));
  std::string body;
  for (ir::NodeId id : k.group.inputs) body += hf.other_form(id, Form::Storage);   // inputs arrive as storage
  for (ir::NodeId id : k.group.params) body += hf.other_form(id, Form::Compute);   // half params arrive as f32
  body += declare_constants(k, hf);
  for (ir::NodeId id : k.group.nodes) body += compute_node(k, hf, id);
  for (ir::NodeId id : k.group.outputs) body += fmt::format("  o_{} = {};\n", k.nm.v(id), hf.name(id, Form::Storage));
  return fmt::format("static __device__ __forceinline__ void @NAME@_elem({}) {{\n", params) + body + "}\n";
}

// The arguments of one element-function call: each input as this loop reads it, params, results.
std::string element_call(KernelGen& k, const std::string& idx_expr, bool vec) {
  std::string s;
  auto add = [&](const std::string& x) { s += (s.empty() ? "" : ", ") + x; };
  for (size_t i = 0; i < k.group.inputs.size(); ++i) {
    const std::string v = k.nm.v(k.group.inputs[i]);
    switch (k.layout.access[i]) {
      case InputAccess::Uniform: add("u_" + v); break;
      case InputAccess::Contiguous: add(vec ? fmt::format("x_{}.v[j]", v) : fmt::format("in_{}[{}]", v, idx_expr)); break;
      case InputAccess::Strided:
        if (!vec) add(fmt::format("in_{0}[off_{0}]", v));
        else if (k.inner_vec(i)) add(fmt::format("x_{}.v[j]", v));
        else add("b_" + v);  // broadcast along the innermost dim: one load per vector
        break;
    }
  }
  for (ir::NodeId id : k.group.params) add("p_" + k.nm.v(id));
  for (ir::NodeId id : k.group.outputs) add("r_" + k.nm.v(id));
  return s;
}

// Coordinates of element `i` in the collapsed iteration space (innermost dim first) and the offset
// of every strided input; `ind` is the indentation.
std::string element_offsets(KernelGen& k, const std::string& ind) {
  const char* idx = k.idx;
  std::string s = fmt::format("{}{} rem = i;\n", ind, idx);
  for (size_t c = k.rank - 1; c >= 1; --c) {
    if (k.layout.index64)
      s += fmt::format("{0}const {1} c{2} = rem % size{2};\n{0}rem /= size{2};\n", ind, idx, c);
    else  // i < 2^31: divide by multiplying (Granlund-Montgomery magic numbers from pack_args)
      s += fmt::format("{0}const {1} q{2} = fjk_udiv(rem, size{2}_mul, size{2}_shift);  // rem / size{2}\n"
                       "{0}const {1} c{2} = rem - q{2} * size{2};\n{0}rem = q{2};\n",
                       ind, idx, c);
  }
  s += fmt::format("{}const {} c0 = rem;\n", ind, idx);
  for (size_t i = 0; i < k.group.inputs.size(); ++i) {
    if (k.layout.access[i] != InputAccess::Strided) continue;
    const std::string v = k.nm.v(k.group.inputs[i]);
    std::string off;
    for (size_t c = 0; c < k.rank; ++c)
      if (!k.layout.bcast[i][c]) off += fmt::format("{}c{} * st_{}_{}", off.empty() ? "" : " + ", c, v, c);
    s += fmt::format("{}const {} off_{} = {};\n", ind, idx, v, off);
  }
  return s;
}

// The vector loop of stage 4: V elements per iteration while vec_ok, one index computation each.
std::string vector_loop(KernelGen& k) {
  const int V = k.V;
  const char* idx = k.idx;
  std::string kb;
  if (k.all_flat)
    kb += fmt::format("  if (vec_ok) {{  // every pointer 16-byte aligned: {} elements per iteration\n", V);
  else
    kb += fmt::format("  if (vec_ok) {{  // every pointer 16-byte aligned and size{} % {} == 0: {} elements per "
                      "iteration, in one row\n", k.rank - 1, V, V);
  kb += fmt::format("    const {} nvec = n / {};\n", idx, V);
  kb += fmt::format("    for ({} k = tid; k < nvec; k += nthreads) {{\n", idx);
  kb += fmt::format("      const {} i = k * {};\n", idx, V);
  // Lane j of a strided input is at off + j (contiguous along the innermost dim) or at off
  // (broadcast along it).
  if (!k.all_flat) kb += element_offsets(k, "      ");
  for (size_t i = 0; i < k.group.inputs.size(); ++i) {
    const ir::NodeId id = k.group.inputs[i];
    const std::string v = k.nm.v(id);
    const char* st = input_storage(k, id);
    if (k.layout.access[i] == InputAccess::Contiguous)
      kb += fmt::format("      const fj_vec<{0}, {1}> x_{2} = fj_vload<{0}, {1}>(in_{2} + i);\n", st, V, v);
    else if (k.inner_vec(i))
      kb += fmt::format("      const fj_vec<{0}, {1}> x_{2} = fj_vload<{0}, {1}>(in_{2} + off_{2});\n", st, V, v);
    else if (k.layout.access[i] == InputAccess::Strided)
      kb += fmt::format("      const {} b_{} = {};\n", st, v, fmt::format("in_{0}[off_{0}]", v));
  }
  for (ir::NodeId id : k.group.outputs) kb += fmt::format("      fj_vec<{}, {}> y_{};\n", k.storage(id), V, k.nm.v(id));
  kb += "#pragma unroll\n";
  kb += fmt::format("      for (int j = 0; j < {}; ++j) {{\n", V);
  for (ir::NodeId id : k.group.outputs) kb += fmt::format("        {} r_{};\n", k.storage(id), k.nm.v(id));
  kb += fmt::format("        @NAME@_elem({});\n", element_call(k, "", true));
  for (ir::NodeId id : k.group.outputs) kb += fmt::format("        y_{0}.v[j] = r_{0};\n", k.nm.v(id));
  kb += "      }\n";
  for (ir::NodeId id : k.group.outputs)
    kb += fmt::format("      fj_vstore<{0}, {1}>(out_{2} + i, y_{2});\n", k.storage(id), V, k.nm.v(id));
  kb += "    }\n";
  kb += fmt::format("    start = nvec * {};\n", V);
  kb += "  }\n";
  return kb;
}

// Stage 4: the kernel itself, a grid-stride loop (after the vector loop when there is one).
std::string kernel_function(KernelGen& k, const KernelSignature& sig) {
  const char* idx = k.idx;
  std::string params;
  for (const ArgSlot& a : sig.args) params += fmt::format("{}{} {}", params.empty() ? "" : ",\n    ", a.ctype, a.name);
  std::string kb;
  kb += fmt::format("  const {0} tid = ({0})blockIdx.x * blockDim.x + threadIdx.x;\n", idx);
  kb += fmt::format("  const {0} nthreads = ({0})gridDim.x * blockDim.x;\n", idx);
  for (size_t i = 0; i < k.group.inputs.size(); ++i)
    if (k.layout.access[i] == InputAccess::Uniform) {
      const ir::NodeId id = k.group.inputs[i];
      kb += fmt::format("  const {} u_{} = {};  // broadcast along every dim: read once\n", k.storage(id), k.nm.v(id),
                        fmt::format("in_{}[0]", k.nm.v(id)));
    }
  kb += fmt::format("  {} start = 0;\n", idx);
  if (k.V > 1) kb += vector_loop(k);
  kb += fmt::format("  for ({} i = start + tid; i < n; i += nthreads) {{\n", idx);
  if (!k.all_flat) kb += element_offsets(k, "    ");
  for (ir::NodeId id : k.group.outputs) kb += fmt::format("    {} r_{};\n", k.storage(id), k.nm.v(id));
  kb += fmt::format("    @NAME@_elem({});\n", element_call(k, "i", false));
  for (ir::NodeId id : k.group.outputs) kb += fmt::format("    out_{0}[i] = r_{0};\n", k.nm.v(id));
  kb += "  }\n";
  return fmt::format("extern \"C\" __global__ void @NAME@(\n    {}) {{\n", params) + kb + "}\n";
}

// The strided entry: one scalar grid-stride loop over the kept dims, every input and output at
// its own strides (64-bit offsets: a view into a large buffer may lie beyond 2^31 elements even
// when the iteration space does not). Each element's inputs are loaded before its outputs are
// stored, so an output may be the input's own buffer.
std::string strided_kernel_function(KernelGen& k, const KernelSignature& sig) {
  const char* idx = k.idx;
  const size_t K = k.layout.iter_dims.size();
  std::string params;
  for (const ArgSlot& a : sig.args) params += fmt::format("{}{} {}", params.empty() ? "" : ",\n    ", a.ctype, a.name);
  std::string kb;
  kb += fmt::format("  const {0} tid = ({0})blockIdx.x * blockDim.x + threadIdx.x;\n", idx);
  kb += fmt::format("  const {0} nthreads = ({0})gridDim.x * blockDim.x;\n", idx);
  kb += fmt::format("  for ({} i = tid; i < n; i += nthreads) {{\n", idx);
  if (K > 0) kb += fmt::format("    {} rem = i;\n", idx);
  for (size_t j = K - 1; K > 1 && j >= 1; --j) {
    if (k.layout.index64)
      kb += fmt::format("    const {0} c{1} = rem % isize{1};\n    rem /= isize{1};\n", idx, j);
    else
      kb += fmt::format("    const {0} q{1} = fjk_udiv(rem, isize{1}_mul, isize{1}_shift);  // rem / isize{1}\n"
                        "    const {0} c{1} = rem - q{1} * isize{1};\n    rem = q{1};\n",
                        idx, j);
  }
  if (K > 0) kb += fmt::format("    const {} c0 = rem;\n", idx);
  auto offset = [&](const char* prefix, const std::string& v, auto has_dim) {
    std::string off;
    for (size_t j = 0; j < K; ++j)
      if (has_dim(j)) off += fmt::format("{}(unsigned long long)c{} * {}_{}_{}", off.empty() ? "" : " + ", j, prefix, v, j);
    return off.empty() ? std::string("0ull") : off;
  };
  std::string call;
  auto add = [&](const std::string& x) { call += (call.empty() ? "" : ", ") + x; };
  for (size_t i = 0; i < k.group.inputs.size(); ++i) {
    const std::string v = k.nm.v(k.group.inputs[i]);
    kb += fmt::format("    const unsigned long long ioff_{} = {};\n", v,
                      offset("ist", v, [&](size_t j) { return k.layout.in_dims[i][j] >= 0; }));
    add(fmt::format("in_{0}[ioff_{0}]", v));
  }
  for (ir::NodeId id : k.group.params) add("p_" + k.nm.v(id));
  for (ir::NodeId id : k.group.outputs) {
    const std::string v = k.nm.v(id);
    kb += fmt::format("    const unsigned long long ooff_{} = {};\n", v, offset("ost", v, [](size_t) { return true; }));
    kb += fmt::format("    {} r_{};\n", k.storage(id), v);
    add("r_" + v);
  }
  kb += fmt::format("    @NAME@_elem({});\n", call);
  for (ir::NodeId id : k.group.outputs) kb += fmt::format("    out_{0}[ooff_{0}] = r_{0};\n", k.nm.v(id));
  kb += "  }\n";
  return fmt::format("extern \"C\" __global__ void @NAME@_s(\n    {}) {{\n", params) + kb + "}\n";
}

// The comment that heads a kernel: its iteration space (dims named symbolically, since sizes are
// kernel arguments: a new dim value gives the same source and cache entry), layout, outputs and,
// with the graph's names, inputs and params.
std::string kernel_header(KernelGen& k) {
  std::string outs;
  for (ir::NodeId id : k.group.outputs) outs += (outs.empty() ? "" : ", ") + k.nm.label(id);
  std::string space;
  for (const ir::Dim& d : k.group.iter_shape)
    space += (space.empty() ? "" : ", ") +
             (d.sym >= 0 && static_cast<size_t>(d.sym) < k.g.dims.size() ? k.g.dims[static_cast<size_t>(d.sym)].name
                                                                         : std::to_string(d.size));
  std::string text = fmt::format("// Fusion group: {} op(s), iteration space [{}], {}-bit index math{}.\n",
                                 k.group.nodes.size(), space, k.layout.index64 ? 64 : 32,
                                 k.V > 1 ? fmt::format(", {}-wide vector path", k.V) : std::string());
  text += fmt::format("// Layout: {} (docs/architecture.md, \"A kernel's layout line\"). Outputs: {}.\n",
                      layout_fingerprint(k.layout), outs.empty() ? "none" : outs);
  if (!k.opts.canonical_names) {  // what each v<N> argument is, in the graph's names (unnamed: its %N)
    std::string ins, params;
    for (ir::NodeId id : k.group.inputs) ins += (ins.empty() ? "" : ", ") + k.nm.label(id);
    for (ir::NodeId id : k.group.params) params += (params.empty() ? "" : ", ") + k.nm.label(id);
    text += fmt::format("// Inputs: {}.{}\n", ins.empty() ? "none" : ins, params.empty() ? "" : " Params: " + params + ".");
  }
  text += "// Entry points: @NAME@ for tensors in their canonical layout, @NAME@_s for any strides.\n";
  if (k.opts.canonical_names)
    text += "// Canonical value names (v0 = first value seen): every node of this structure shares this kernel;\n"
            "// index.json lists, per node, the kernel it runs.\n";
  return text;
}

// Stage 5: names the kernel after its text (64 bits of XXH3: names stand for kernels, unfused
// nodes share them, caches key on them, and 32 bits collide among tens of thousands of kernels)
// and puts the name in place of @NAME@. Location comments are left out of the hash so that the
// graph file's name and line numbers change no kernel name (jit/source_key.h).
void finish(GeneratedKernel& out, const std::string& graph_name, const std::string& text) {
  const std::string keyed = without_location_comments(text);
  const uint64_t h = XXH3_64bits(keyed.data(), keyed.size());
  out.name = fmt::format("fj_{}_{:016x}", ir::identifier_part(graph_name), h);
  std::string src;
  for (size_t p = 0;;) {
    const size_t q = text.find("@NAME@", p);
    src.append(text, p, q == std::string::npos ? std::string::npos : q - p);
    if (q == std::string::npos) break;
    src += out.name;
    p = q + 6;
  }
  out.source = std::move(src);
  out.nvrtc_options = out.fast_math ? std::vector<std::string>{"--std=c++17", "--use_fast_math", "--fmad=true"}
                                    : std::vector<std::string>{"--std=c++17", "--fmad=false"};
}

// ---- Reduction kernels (ir/reduce_group.h) ----------------------------------------------------

// Adds `extra` spaces in front of every line of `block` (its stages are written at two).
std::string indent(const std::string& block, size_t extra) {
  std::string out, pad(extra, ' ');
  size_t p = 0;
  while (p < block.size()) {
    const size_t q = block.find('\n', p);
    const size_t e = q == std::string::npos ? block.size() : q + 1;
    out += pad + block.substr(p, e - p);
    p = e;
  }
  return out;
}

// One reduction kernel's generation: row values once per row, element values per element of a
// row, each reduction in the fixed order of ir/scalar/fj_reduce.h (see GeneratedKernel::reduction).
struct ReduceGen {
  KernelGen& k;
  HalfForms& hf;
  const ir::ReduceGroupInfo info;
  std::vector<int> red_j, row_j;  // kept dims (iter_dims indices) reduced / not
  std::set<ir::NodeId> nodes, row_done;
  std::map<ir::NodeId, size_t> input_index;
  // Row cache (info.reread_inputs): the inputs every pass reads on chip when the launch keeps the row
  // there (fj_rc), copied at the start of the row (stage_rows).
  std::set<ir::NodeId> cached;
  // Kept values (info.kept_values): written to the row cache by the first pass computing each
  // (kept_written) when the launch keeps them there (fj_rv), read there by the epilogue.
  std::set<ir::NodeId> kept, kept_written;
  bool flat = false;  // flat_row(), decided once
  int V = 1;  // the vector width of a row kernel's fast entry (vec_width), 1: none

  ReduceGen(KernelGen& kg, HalfForms& h) : k(kg), hf(h), info(ir::analyze_reduce_group(kg.g, kg.group)) {
    FJ_CHECK(info.problem.empty(), "codegen: " + info.problem);
    for (size_t j = 0; j < k.layout.iter_dims.size(); ++j)
      (k.group.reduce_mask >> k.layout.iter_dims[j] & 1 ? red_j : row_j).push_back(static_cast<int>(j));
    nodes.insert(k.group.nodes.begin(), k.group.nodes.end());
    for (size_t i = 0; i < k.group.inputs.size(); ++i) input_index[k.group.inputs[i]] = i;
    if (row_blocks()) cached.insert(info.reread_inputs.begin(), info.reread_inputs.end());
    // Not in fast-math mode: ir::SplitRules::kept_values.
    if (!cached.empty() && !k.opts.fast_math) kept.insert(info.kept_values.begin(), info.kept_values.end());
    flat = flat_row();
    V = vec_width();
  }
  bool row_blocks() const { return ir::reduces_innermost(k.group); }

  // A row kernel whose row spans several innermost dims (sum(x) of a matrix, mean over [H, W] of
  // [N, H, W]; not [0, 2] of a 3-d tensor) that every input has all of or none of, and every element
  // output all of: in the fast entry (C-contiguous tensors) element k of the row is at k from the
  // row's base, as in a row of one dim, so it needs neither the coordinates of k nor strides, and
  // its vector path runs.
  bool flat_row() const {
    if (!row_blocks() || red_j.size() < 2) return false;
    for (size_t t = 0; t < red_j.size(); ++t)  // the innermost dims, none kept between them
      if (red_j[red_j.size() - 1 - t] != last_dim() - static_cast<int>(t)) return false;
    const int m = static_cast<int>(red_j.size());
    for (size_t i = 0; i < k.group.inputs.size(); ++i) {
      int n = 0;
      for (int j : red_j) n += has_dim(i, j);
      if (n != 0 && n != m) return false;
    }
    for (size_t i : element_outputs())
      for (int j : red_j)
        if (k.layout.out_dims[i][static_cast<size_t>(j)] < 0) return false;
    return true;
  }
  // The offset of element k of the row from the row's base in `terms` (c<j> times strides) for
  // input `input` (-1: an output): in the fast entry of a flat row k itself, or 0 for an input
  // broadcast along the whole row (has_dim), which the strided entry may read along it all the same.
  std::string row_offset(const std::string& terms, int input = -1) const {
    if (!flat || terms.empty()) return terms;
    const bool varies = input < 0 || has_dim(static_cast<size_t>(input), red_j.back());
    return fmt::format("(fj_fast ? {} : {})", varies ? "(unsigned long long)k" : "0ull", terms);
  }

  // Input `id`'s offset of element k from its row's base (row_offset of its terms along the row).
  std::string input_row_offset(ir::NodeId id) {
    const int i = static_cast<int>(input_index.at(id));
    return row_offset(terms(red_j, "ist", v(id), i), i);
  }

  // Whether cached input `id`'s row is on chip in this launch: fj_rc for the rows that differ per
  // row, fj_rca for the broadcast ones (ReduceGroupInfo::per_row_inputs), which row_cache 3 leaves
  // in memory.
  std::string on_chip(ir::NodeId id) const {
    const auto at = std::find(info.reread_inputs.begin(), info.reread_inputs.end(), id);
    return static_cast<size_t>(at - info.reread_inputs.begin()) < info.per_row_inputs ? "fj_rc" : "fj_rca";
  }

  // Whether input i varies along kept dim j (an iter_dims index) in the fast entry: not broadcast
  // along it in the kernel's pattern (KernelLayout::access, bcast), which a launch of the fast
  // entry has. A named dim of 1 met by another dim's size is broadcast although in_dims names it
  // (`b : f32[2, S]` against `x : f32[2, 8]`, S = 1): the fast entry read such an input at stride
  // 1 along the row, past its end. The strided entry runs any pattern (S = 8 in a call of a
  // program compiled at S = 1): it reads every dim an input names (names_dim) at the stride passed,
  // 0 where the call broadcasts it.
  bool has_dim(size_t i, int j) const {
    if (k.layout.access[i] != InputAccess::Strided) return k.layout.access[i] == InputAccess::Contiguous;
    const int d = k.layout.iter_dims[static_cast<size_t>(j)];
    for (size_t c = 0; c < k.layout.dim_groups.size(); ++c)
      if (d >= k.layout.dim_groups[c].first && d < k.layout.dim_groups[c].second) return !k.layout.bcast[i][c];
    return false;
  }
  bool names_dim(size_t i, int j) const { return k.layout.in_dims[i][static_cast<size_t>(j)] >= 0; }
  // Whether input i varies along the row (a row kernel's innermost dim) in the fast entry, and
  // whether it may in the strided entry.
  bool along_row(size_t i) const { return has_dim(i, last_dim()); }
  bool names_row(size_t i) const { return names_dim(i, last_dim()); }

  // The vector width of a row kernel's fast entry: V elements per vector access along the row, V
  // lanes per thread in a pass (fj_red_loads in fj_reduce.h), so the widest array moved along the
  // row moves 16 bytes per access (f32: 4, bf16: 8, at most 8). 1 (none) for column kernels, rows of
  // several dims but a flat_row(), a bool input along the row (read as any nonzero byte, not as a vector)
  // or CodegenOptions::vectorize off. The launcher turns it on per launch (vec_ok: rows of a
  // multiple of V elements, 16-byte aligned pointers, the fast entry).
  int vec_width() const {
    if (!k.opts.vectorize || !row_blocks() || (red_j.size() != 1 && !flat)) return 1;
    int widest = 1;
    for (size_t i = 0; i < k.group.inputs.size(); ++i) {
      if (!along_row(i)) continue;
      if (k.dtype(k.group.inputs[i]) == ir::DType::Bool) return 1;
      widest = std::max(widest, ir::dtype_size(k.dtype(k.group.inputs[i])));
    }
    for (size_t i : element_outputs()) widest = std::max(widest, ir::dtype_size(k.dtype(k.group.outputs[i])));
    return std::min(8, 16 / widest);
  }

  // The first workspace slot of each pass when a row is split over blocks (a pass of several
  // reductions takes fj_red_words of its lane type), the slots in all, and the last phase of a split
  // row (2 per level, one more for element outputs; ir/reduce_group.h).
  std::vector<int> pass_slot;
  int split_words = 0;
  int final_phase = 0;

  // Every reduction kernel may split a long row over several blocks (fj_reduce_phase; the launcher
  // decides, ir::choose_split): its passes' workspace slots and its last phase.
  void plan_split() {
    for (const std::vector<ir::NodeId>& p : info.passes) {
      pass_slot.push_back(split_words);
      split_words += static_cast<int>((ir::pass_lane_bytes(k.g, p) + 7) / 8);
    }
    final_phase = 2 * info.levels + (info.epilogue() ? 1 : 0);
  }

  // A pass's lane type, combiner and the access to member m of its value: the member's type, the
  // reduction's combiner and nothing for one reduction; nested fj_red_two / fj_red_pair for more.
  std::string lane_type(const std::vector<ir::NodeId>& p, size_t from = 0) {
    const std::string t = member_type(p[from]);
    return from + 1 == p.size() ? t : fmt::format("fj_red_two<{}, {}>", t, lane_type(p, from + 1));
  }
  // What reduction r combines: its operand's compute type, or for argmax/argmin the pair of an
  // element's value and index (fj_red_arg).
  std::string member_type(ir::NodeId r) {
    const ir::Node& nd = k.g.node(r);
    const std::string t = compute_ctype(k.dtype(nd.arg(0)));
    return ir::is_arg_reduction(nd.op) ? fmt::format("fj_red_arg<{}>", t) : t;
  }
  std::string combiner(const std::vector<ir::NodeId>& p, size_t from = 0) {
    const std::string c = ir::reduce_combiner(k.g.node(p[from]).op);
    return from + 1 == p.size() ? c : fmt::format("fj_red_pair<{}, {}>", c, combiner(p, from + 1));
  }
  static std::string member(size_t m, size_t n) {
    if (n == 1) return "";
    std::string s;
    for (size_t j = 0; j < m; ++j) s += ".b";
    return s + (m + 1 == n ? "" : ".a");
  }
  std::string v(ir::NodeId id) { return k.nm.v(id); }

  // The element values and inputs `id` needs in an element scope; the row values it reads. With
  // `read`, the kept values it reads from the row cache go there, their operands not collected.
  void collect(ir::NodeId id, std::set<ir::NodeId>& elems, std::set<ir::NodeId>& ins, std::set<ir::NodeId>& rows,
               std::set<ir::NodeId>* read = nullptr) {
    if (input_index.count(id)) ins.insert(id);
    if (!nodes.count(id)) return;  // an input, a param or a constant (declared at the top)
    if (info.row.count(id)) {
      rows.insert(id);
      return;
    }
    if (read && kept_written.count(id)) {
      read->insert(id);
      return;
    }
    if (!elems.insert(id).second) return;
    for (int a = 0; a < k.g.node(id).nargs; ++a) collect(k.g.node(id).arg(a), elems, ins, rows, read);
  }

  // c<j> for kept dims `dims` (ascending) from `var`, innermost first; the outermost takes the rest.
  std::string decompose(const std::vector<int>& dims, const std::string& var) {
    if (dims.empty()) return "";
    std::string s = fmt::format("  {} rem_{} = {};\n", k.idx, var, var);
    for (size_t t = dims.size(); t-- > 1;) {
      const int j = dims[t];
      if (k.layout.index64)
        s += fmt::format("  const {0} c{1} = rem_{2} % isize{1};\n  rem_{2} /= isize{1};\n", k.idx, j, var);
      else
        s += fmt::format("  const {0} c{1} = rem_{2} - fjk_udiv(rem_{2}, isize{1}_mul, isize{1}_shift) * isize{1};\n"
                         "  rem_{2} = fjk_udiv(rem_{2}, isize{1}_mul, isize{1}_shift);\n",
                         k.idx, j, var);
    }
    return s + fmt::format("  const {} c{} = rem_{};\n", k.idx, dims[0], var);
  }

  // Sum of c<j> * <prefix>_<value>_<j> over `dims` (an input's only where it has the dim); along a
  // row kernel's innermost dim, the stride fj_<prefix>_<value> (1 in the fast entry: row_strides()).
  std::string terms(const std::vector<int>& dims, const char* prefix, const std::string& val, int input) {
    std::string s;
    for (int j : dims)
      if (input < 0 || names_dim(static_cast<size_t>(input), j))  // a broadcast dim's stride is 0
        s += fmt::format("{}(unsigned long long)c{} * {}", s.empty() ? "" : " + ", j,
                         row_blocks() && j == last_dim() ? fmt::format("fj_{}_{}", prefix, val)
                                                         : fmt::format("{}_{}_{}", prefix, val, j));
    return s;
  }
  int last_dim() const { return static_cast<int>(k.layout.iter_dims.size()) - 1; }

  // A row kernel's strides along the row (its innermost dim): the fast entry runs C-contiguous
  // tensors only (jit/launch.cpp), where they are 1, so fj_fast makes them a constant the compiler
  // folds into the address arithmetic; the strided entry passes them on.
  std::string row_strides() {
    if (!row_blocks()) return "";
    std::string s;
    auto declare = [&](const char* prefix, ir::NodeId id, bool varies) {
      s += fmt::format("  const unsigned long long fj_{0}_{1} = fj_fast ? {3} : {0}_{1}_{2};{4}\n", prefix, v(id), last_dim(),
                       varies ? "1ull" : "0ull", varies ? "" : "  // broadcast along the row here (has_dim)");
    };
    for (size_t i = 0; i < k.group.inputs.size(); ++i)
      if (names_row(i)) declare("ist", k.group.inputs[i], along_row(i));
    for (size_t i : element_outputs()) declare("ost", k.group.outputs[i], true);
    if (V > 1)
      s += fmt::format("  // The vector path: {} elements a vector access along the row (the fast entry; vec_ok: rows of a\n"
                       "  // multiple of {} elements, 16-byte aligned pointers)\n"
                       "  const bool fj_vector = FJ_RED_VECTOR && fj_fast && vec_ok != 0;\n", V, V);
    return s.empty() ? "" : "  // Strides along the row: 1 in the fast entry (C-contiguous tensors)\n" + s;
  }

  // Loads of `ins` at <off>_<v> and the element values `elems`, in topological order. A cached
  // input is read in the row cache when the launch keeps the row on chip: at element `at` of its
  // row pointer (row_pointer()), else at k of the cache.
  std::string elements(const std::set<ir::NodeId>& elems, const std::set<ir::NodeId>& ins, const char* off,
                       const char* at = "k", const std::set<ir::NodeId>& read = {}) {
    std::string s;
    for (ir::NodeId id : read)
      s += fmt::format("  const {} {} = fj_rv_{}[{}];  // {}, kept on chip by a pass\n", compute_ctype(k.dtype(id)), v(id), v(id),
                       at, k.nm.label(id));
    for (ir::NodeId id : ins) {
      const std::string name = hf.name(id, HalfForms::Form::Storage), load = fmt::format("in_{}[{}_{}]", v(id), off, v(id));
      if (!cached.count(id))
        s += fmt::format("  const {} {} = {};\n", k.storage(id), name, load);
      else if (row_pointer(id))
        s += fmt::format("  const {0} {1} = fj_row_{2}[(unsigned long long){3} * fj_rst_{2}];\n", k.storage(id), name, v(id), at);
      else
        s += fmt::format("  const {0} {1} = {4} ? fj_rc_{3}[k] : {2};\n", k.storage(id), name, load, v(id), on_chip(id));
      s += hf.other_form(id, HalfForms::Form::Storage);
    }
    for (ir::NodeId id : elems) s += compute_node(k, hf, id);
    return s;
  }

  // The vector form of elements() at elements fj_k .. fj_k + V - 1 of the row (the fast entry: stride
  // 1, fj_k a multiple of V): inputs along the row loaded V at a time (a cached one from the row
  // cache when `on_chip` and the launch keeps the row there), then per element fj_j the element
  // values as elements() computes them, `lane` (the pass's result for element fj_j) and the outputs
  // `outs`, stored V at a time. An input not along the row loads per element, as elements().
  std::string vector_elements(const std::set<ir::NodeId>& elems, const std::set<ir::NodeId>& ins,
                              const std::vector<size_t>& outs, const std::string& lane, bool on_chip,
                              const std::set<ir::NodeId>& read = {}) {
    std::string pre, each, post;
    for (ir::NodeId id : read) {  // kept values, V at a time from the row cache
      const std::string t = compute_ctype(k.dtype(id));
      pre += fmt::format("  const fj_vec<{0}, {1}> x_{2} = fj_vload<{0}, {1}>(fj_rv_{2} + fj_k);  // {3}, kept on chip\n", t, V,
                         v(id), k.nm.label(id));
      each += fmt::format("  const {} {} = x_{}.v[fj_j];\n", t, v(id), v(id));
    }
    std::set<ir::NodeId> scalar_ins;
    for (ir::NodeId id : ins) {
      if (!along_row(input_index.at(id))) {
        scalar_ins.insert(id);
        each += fmt::format("  const unsigned long long ioff_{0} = ib_{0};\n", v(id));
        continue;
      }
      const std::string t = k.storage(id), x = "x_" + v(id);
      const std::string mem = fmt::format("fj_vload<{}, {}>(in_{} + ib_{} + fj_k)", t, V, v(id), v(id));
      if (!row_pointer(id) || !on_chip)
        pre += fmt::format("  const fj_vec<{}, {}> {} = {};\n", t, V, x, mem);
      else  // the fast entry: fj_rst_ is 1 either way
        pre += fmt::format("  const fj_vec<{0}, {1}> {2} = fj_vload<{0}, {1}>(fj_row_{3} + fj_k);\n", t, V, x, v(id));
      each += fmt::format("  const {} {} = {}.v[fj_j];\n", t, hf.name(id, HalfForms::Form::Storage), x) +
              hf.other_form(id, HalfForms::Form::Storage);
    }
    if (!scalar_ins.empty()) each = fmt::format("  const {} k = fj_k + fj_j;\n", k.idx) + each;
    each += elements(elems, scalar_ins, "ioff");
    for (size_t i : outs) {
      const ir::NodeId o = k.group.outputs[i];
      pre += fmt::format("  fj_vec<{}, {}> y_{};\n", k.storage(o), V, v(o));
      each += fmt::format("  y_{}.v[fj_j] = {};\n", v(o), hf.name(o, HalfForms::Form::Storage));
      post += fmt::format("  fj_vstore<{0}, {1}>(out_{2} + ob_{2} + fj_k, y_{2});\n", k.storage(o), V, v(o));
    }
    return pre + fmt::format("  #pragma unroll\n  for (int fj_j = 0; fj_j < {}; ++fj_j) {{\n", V) + indent(each + lane, 2) +
           "  }\n" + post;
  }

  // Declares `id` in the row scope (once), after what it reads: row values, element values of the
  // row and inputs at the row's base offsets (they do not vary along the reduced axes).
  std::string ensure_row(ir::NodeId id) {
    if (row_done.count(id) || (!nodes.count(id) && !input_index.count(id))) return "";
    row_done.insert(id);
    if (input_index.count(id)) return elements({}, {id}, "ib");
    const ir::Node& nd = k.g.node(id);
    FJ_CHECK(!ir::is_reduction(nd.op), "codegen: a row value is needed before its reduction");
    std::string s;
    for (int a = 0; a < nd.nargs; ++a) s += ensure_row(nd.arg(a));
    return s + compute_node(k, hf, id);
  }

  // A same_as twin: the row values of the earlier reduction (only keepdim differs).
  std::string twin(ir::NodeId r) {
    const ir::Node& nd = k.g.node(r);
    const ir::NodeId same = info.same_as.at(r);
    row_done.insert(r);
    // The location ends the comment line: names are hashed without it (jit/source_key.h).
    return fmt::format("  // {}, the row values of {} (only keepdim differs){}\n  const {} {} = {};\n", k.nm.describe(r),
                       k.nm.label(same), k.nm.where(nd), compute_ctype(nd.dtype), v(r), v(same));
  }

  // The element offsets ioff_<v> of `ins` at element k of the row (a cached input read through its
  // row pointer needs none).
  std::string offsets(const std::set<ir::NodeId>& ins) {
    std::string s;
    for (ir::NodeId id : ins) {
      if (row_pointer(id)) continue;
      const std::string t = input_row_offset(id);
      s += fmt::format("  const unsigned long long ioff_{0} = ib_{0}{1};\n", v(id), t.empty() ? "" : " + " + t);
    }
    return s;
  }

  // Whether a cached input is read through its row pointer: in rows of one reduced dim, unless a
  // bool (the row cache holds 0/1 bools, memory any nonzero byte: fj_bool_in).
  bool row_pointer(ir::NodeId id) const {
    return cached.count(id) && red_j.size() == 1 && k.dtype(id) != ir::DType::Bool;
  }

  // A cached input's row as the passes and the epilogue read it, chosen once per row: the row
  // cache (stride 1) when the launch keeps the row on chip, else memory at the input's stride
  // along the row. So an element's load is one access at a constant offset from the pointer, not a
  // branch between the two and 64-bit index arithmetic per element.
  std::string declare_row_pointers() {
    std::string s;
    for (ir::NodeId id : info.reread_inputs) {
      if (!row_pointer(id)) continue;
      const std::string st = names_row(input_index.at(id)) ? "fj_ist_" + v(id) : std::string("0ull");
      s += fmt::format("  const {0}* const fj_row_{1} = {3} ? fj_rc_{1} : in_{1} + ib_{1};\n"
                       "  const unsigned long long fj_rst_{1} = {3} ? 1ull : {2};\n",
                       k.storage(id), v(id), st, on_chip(id));
    }
    return s.empty() ? "" : "  // The rows the passes read: on chip when the launch keeps them there, else in memory\n" + s;
  }

  // The members' operands of pass p, nested as the lane type: "a, {b, c}"; an argmax/argmin's is
  // its operand with the element's index in the row, `index`.
  std::string pass_operands(const std::vector<ir::NodeId>& p, const std::string& index) {
    auto operand = [&](ir::NodeId r) {
      const std::string x = v(k.g.node(r).arg(0));
      return ir::is_arg_reduction(k.g.node(r).op) ? fmt::format("{}{{{}, {}}}", member_type(r), x, index) : x;
    };
    std::string operands = operand(p[0]);
    for (size_t m = 1; m < p.size(); ++m) operands += (m + 1 < p.size() ? ", {" : ", ") + operand(p[m]);
    return operands + std::string(p.size() > 2 ? p.size() - 2 : 0, '}');
  }

  // One pass over the row (ReduceGroupInfo::passes): its reductions' operands computed per element
  // inside the load function of fj_reduce_phase, each reduction combined in its own fixed order.
  std::string pass(size_t pi) {
    const std::vector<ir::NodeId>& p = info.passes[pi];
    std::set<ir::NodeId> elems, ins, rows;
    for (ir::NodeId r : p) collect(k.g.node(r).arg(0), elems, ins, rows);
    const std::vector<size_t> early = info.early_outputs ? element_outputs() : std::vector<size_t>{};
    for (size_t i : early) collect(k.group.outputs[i], elems, ins, rows);
    std::string s;
    for (ir::NodeId x : rows) s += ensure_row(x);
    std::string body = offsets(ins);
    if (!body.empty() || !early.empty())  // element k's coordinates: for offsets in memory and output writes
      body = fmt::format("  const {} k = ({})fj_i;\n", k.idx, k.idx) + decompose(red_j, "k") + body;
    const std::string lt = lane_type(p);
    // A lane's value for element fj_i (fj_i + fj_j in the vector path's element fj_j).
    auto result = [&](const std::string& index) {
      const std::string operands = pass_operands(p, index);
      return p.size() == 1 ? operands : lt + "{" + operands + "}";
    };
    body += elements(elems, ins, "ioff", "fj_i") + keep_writes(elems) + output_writes(early) +
            fmt::format("  return {};\n", result("fj_i"));
    std::string load = fmt::format("[&](long long fj_i) -> {} {{\n{}  }}", lt, indent(body, 2));
    if (V > 1) {  // vector loads from memory; a row on chip is read one lane a thread
      const std::string vec = fmt::format("  const {0} fj_k = ({0})fj_i;  // elements fj_k .. fj_k + {1}: this thread's {2} lanes\n",
                                          k.idx, V - 1, V) +
                              vector_elements(elems, ins, early, fmt::format("  fj_out[fj_j] = {};\n", result("fj_i + fj_j")), false);
      load = fmt::format("fj_red_loads<{}>({}, {},\n      [&](long long fj_i, {}* fj_out) {{\n{}  }})", V,
                         cached.empty() ? "fj_vector" : "fj_vector && !fj_rc", load, lt, indent(vec, 2));
    }
    const int level = info.level.at(p[0]);
    const std::string value = fmt::format(
        "fj_reduce_phase<{0}, {1}>(split_phase, {2}, (long long)row_len, fj_part, fj_parts, {3}, "
        "fj_lanes_{4}, fj_tid, fj_nt,\n      fj_red_chunk_slots<{1}>(ws, {5}, {6}, (long long)rows, (long long)o, "
        "(long long)row_len), fj_red_row_slot<{1}>(ws, {6}, (long long)rows, (long long)o){7})",
        combiner(p), lt, 2 * level - 1, load, lane_name(p), split_words, pass_slot[pi],
        row_blocks() ? ", true, fj_lane_groups" : ", fj_live");
    if (p.size() == 1) return s + reduction_value(p[0], value);
    std::string names;
    for (ir::NodeId r : p) names += (names.empty() ? "" : ", ") + k.nm.label(r);
    s += fmt::format("  // One pass for {}: each in the fixed order of fj_reduce.h, as alone\n"
                     "  static_assert(sizeof({}) == {}, \"the lane layout ir::pass_lane_bytes sizes the workspace by\");\n"
                     "  const {} fj_pass{} = {};\n",
                     names, lt, ir::pass_lane_bytes(k.g, p), lt, pi, value);
    for (size_t m = 0; m < p.size(); ++m) s += reduction_value(p[m], fmt::format("fj_pass{}{}", pi, member(m, p.size())));
    return s;
  }

  // The kept values among a pass's element values `elems` that no earlier pass wrote, written to
  // the row cache when the launch keeps them there (each element is loaded once, by one thread, and
  // the pass's lane tree ends at a barrier before the epilogue reads them).
  std::string keep_writes(const std::set<ir::NodeId>& elems) {
    std::string s;
    for (ir::NodeId id : elems)
      if (kept.count(id) && kept_written.insert(id).second)
        s += fmt::format("  if (fj_rv) fj_rv_{0}[fj_i] = {0};  // kept on chip for the epilogue\n", v(id));
    return s;
  }

  // `const T v = <value>;` for reduction r from its combined value (a mean divides it; an
  // argmax/argmin takes the index).
  std::string reduction_value(ir::NodeId r, std::string value) {
    const ir::Node& nd = k.g.node(r);
    if (ir::is_arg_reduction(nd.op)) value += ".i";
    if (nd.op == ir::Op::Mean)
      value = nd.red.correction == 0
                  ? fmt::format("fj_red_mean({}, (long long)row_len)", value)
                  : fmt::format("fj_red_mean({}, fj_red_divisor((long long)row_len, {}LL))", value, nd.red.correction);
    row_done.insert(r);
    return fmt::format("  // {}, in the fixed order of fj_reduce.h{}\n  const {} {} = {};\n", k.nm.describe(r), k.nm.where(nd),
                       compute_ctype(nd.dtype), v(r), value);
  }

  // A pass's lanes as part of a name: its members' compute types, "float", "double_float",
  // "arg_float" (an argmax's).
  std::string lane_name(const std::vector<ir::NodeId>& p) {
    std::string m;
    for (ir::NodeId r : p)
      m += (m.empty() ? "" : "_") + std::string(ir::is_arg_reduction(k.g.node(r).op) ? "arg_" : "") +
           compute_ctype(k.dtype(k.g.node(r).arg(0)));
    std::replace(m.begin(), m.end(), ' ', '_');
    return m;
  }

  // The lane types of the passes, each once, by name.
  std::map<std::string, std::string> lane_types() {
    std::map<std::string, std::string> types;
    for (const std::vector<ir::NodeId>& p : info.passes) types[lane_name(p)] = lane_type(p);
    return types;
  }

  // The group's element outputs (not row values), by output index.
  std::vector<size_t> element_outputs() const {
    std::vector<size_t> outs;
    for (size_t i = 0; i < k.group.outputs.size(); ++i)
      if (!k.layout.row_out[i]) outs.push_back(i);
    return outs;
  }

  // Stores of element outputs `outs` at element k of the row. Inside a pass, a column kernel's
  // repeated last row (fj_live false) writes nothing: in place, its loads would read what the live
  // row wrote (the epilogue's loop skips that row already).
  std::string output_writes(const std::vector<size_t>& outs) {
    const bool guard = info.early_outputs && !row_blocks();
    std::string s;
    for (size_t i : outs) {
      const ir::NodeId o = k.group.outputs[i];
      const std::string t = row_offset(terms(red_j, "ost", v(o), -1));
      s += fmt::format("  {}out_{}[ob_{}{}] = {};\n", guard ? "if (fj_live) " : "", v(o), v(o),
                       t.empty() ? "" : " + " + t, hf.name(o, HalfForms::Form::Storage));
    }
    return s.empty() || !info.early_outputs ? s : "  // the element outputs, written as the pass loads the row (the row is read once)\n" + s;
  }

  // The element outputs, per element of the row (threads split the row as they split the lanes),
  // unless the one pass wrote them.
  std::string epilogue() {
    std::set<ir::NodeId> elems, ins, rows;
    const std::vector<size_t> outs = info.early_outputs ? std::vector<size_t>{} : element_outputs();
    for (size_t i : outs) collect(k.group.outputs[i], elems, ins, rows);
    if (outs.empty()) return "";
    std::string s;
    for (ir::NodeId x : rows) s += ensure_row(x);
    s += "  long long fj_k0, fj_k1;  // the row, or this part's chunks of it in a split row's last launch\n"
         "  fj_red_part_elements(split_phase, (long long)row_len, fj_part, fj_parts, fj_k0, fj_k1);\n";
    FJ_CHECK(kept_written == kept, "codegen: a kept value that no pass computes");
    std::string start = fmt::format("({})fj_k0", k.idx);
    if (V > 1) {  // V elements a thread and iteration while whole vectors are left (fj_k0 is a multiple of V)
      std::string vec = vector_loop(outs, false);
      // Only the vector loop reads kept values; the tail computes them again (the same bits): a second
      // scalar loop cost the fast entry 12 registers under ptxas for sm_90, a second vector loop none.
      if (!kept.empty())
        vec = "  if (fj_rv) {  // the kept values on chip: read, not computed again\n" + indent(vector_loop(outs, true), 2) +
              "  } else {\n" + indent(vec, 2) + "  }\n";
      s += fmt::format("  {0} fj_ks = ({0})fj_k0;  // where the scalar loop starts\n"
                       "  if (fj_vector) {{  // vector loads and stores: {1} elements a thread and iteration\n"
                       "    const {0} fj_kv = ({0})fj_k0 + ({0})(fj_k1 - fj_k0) / {1} * {1};\n",
                       k.idx, V) +
           indent(vec, 2) + "    fj_ks = fj_kv;\n  }\n";
      start = "fj_ks";
    } else if (!kept.empty()) {
      return s + "  if (fj_rv) {  // the kept values on chip: read, not computed again\n" +
             indent(scalar_loop(outs, true, start), 2) + "  } else {\n" + indent(scalar_loop(outs, false, start), 2) + "  }\n";
    }
    return s + scalar_loop(outs, false, start);
  }

  // The epilogue's vector loop over elements fj_k0 .. fj_kv of the row, V at a time. With
  // `kept_read`, the kept values it reads come from the row cache.
  std::string vector_loop(const std::vector<size_t>& outs, bool kept_read) {
    std::set<ir::NodeId> elems, ins, rows, read;
    for (size_t i : outs) collect(k.group.outputs[i], elems, ins, rows, kept_read ? &read : nullptr);
    return fmt::format("  for ({0} fj_k = ({0})fj_k0 + {1} * ({0})fj_tid; fj_k < fj_kv; fj_k += {1} * ({0})fj_nt) {{\n", k.idx,
                       V) +
           indent(vector_elements(elems, ins, outs, "", true, read), 2) + "  }\n";
  }

  // The epilogue's scalar loop over elements `start` .. fj_k1 of the row (the vector loop's tail,
  // or all of it), kept values read from the row cache with `kept_read`.
  std::string scalar_loop(const std::vector<size_t>& outs, bool kept_read, const std::string& start) {
    std::set<ir::NodeId> elems, ins, rows, read;
    for (size_t i : outs) collect(k.group.outputs[i], elems, ins, rows, kept_read ? &read : nullptr);
    std::string body = decompose(red_j, "k") + offsets(ins);
    body += elements(elems, ins, "ioff", "k", read) + output_writes(outs);
    return fmt::format("  for ({0} k = {1} + fj_tid; {2}k < ({0})fj_k1; k += fj_nt) {{  // the element outputs\n", k.idx, start,
                       row_blocks() ? "" : "fj_live && ") +
           indent(body, 2) + "  }\n";
  }

  // The reductions level by level; in a split row, the launches of a level end after it.
  std::string reductions() {
    std::string s;
    for (int j = 1; j <= info.levels; ++j) {
      for (size_t pi = 0; pi < info.passes.size(); ++pi)
        if (info.level.at(info.passes[pi][0]) == j) s += pass(pi);
      for (ir::NodeId r : info.reductions)
        if (info.same_as.count(r) && info.level.at(r) == j) s += twin(r);
      if (2 * j == final_phase)
        s += fmt::format("  if (split_phase == {}) continue;  // a split row's chunk values, combined by the next launch\n",
                         2 * j - 1);
      else
        s += fmt::format("  if (split_phase == {} || split_phase == {}) continue;  // a split row's level-{} launches\n",
                         2 * j - 1, 2 * j, j);
    }
    return s;
  }

  // One row: its coordinates and base offsets, the reductions, the row outputs, the element outputs.
  std::string row() {
    std::string s = decompose(row_j, "o");
    for (size_t i = 0; i < k.group.inputs.size(); ++i) {
      const std::string t = terms(row_j, "ist", v(k.group.inputs[i]), static_cast<int>(i));
      s += fmt::format("  const unsigned long long ib_{} = {};\n", v(k.group.inputs[i]), t.empty() ? "0ull" : t);
    }
    for (ir::NodeId o : k.group.outputs) {
      const std::string t = terms(row_j, "ost", v(o), -1);
      s += fmt::format("  const unsigned long long ob_{} = {};\n", v(o), t.empty() ? "0ull" : t);
    }
    s += stage_rows() + declare_row_pointers();
    s += reductions();
    std::string writes;
    for (size_t i = 0; i < k.group.outputs.size(); ++i)
      if (k.layout.row_out[i]) {
        const ir::NodeId o = k.group.outputs[i];
        s += ensure_row(o);
        writes += fmt::format("    out_{0}[ob_{0}] = {1};\n", v(o), hf.name(o, HalfForms::Form::Storage));
      }
    if (!writes.empty())
      s += std::string(!row_blocks() ? "  if (fj_tid == 0 && fj_live && fj_part == 0) {" : "  if (fj_tid == 0 && fj_part == 0) {") +
           "  // the row outputs, once per row\n" + writes + "  }\n";
    return s + epilogue();
  }

  int col_rows() const { return ir::column_rows_per_block(k.g, info); }

  // The row on chip: the cached inputs' rows copied into the row cache by all the block's threads
  // before the first pass (fjk_stage_row: 16-byte units where the row is contiguous and aligned), so
  // the row's only read of memory keeps as many loads in flight as the block has threads, and every
  // pass reads shared memory. A row of several reduced dims is copied element by element.
  std::string stage_rows() {
    if (cached.empty()) return "";
    std::string s;
    if (red_j.size() == 1) {
      for (ir::NodeId id : info.reread_inputs) {
        const size_t i = input_index.at(id);
        s += fmt::format("  {2}fjk_stage_row(fj_rc_{0}, in_{0} + ib_{0}, (long long)row_len, {1}, fj_tid, fj_nt);\n", v(id),
                         names_row(i) ? "fj_ist_" + v(id) : std::string("0ull"),
                         on_chip(id) == "fj_rc" ? "" : "if (fj_rca) ");
      }
    } else {
      std::string body = decompose(red_j, "k");
      for (ir::NodeId id : info.reread_inputs) {
        const std::string t = input_row_offset(id);
        body += fmt::format("  {2}fj_rc_{0}[k] = in_{0}[ib_{0}{1}];\n", v(id), t.empty() ? "" : " + " + t,
                            on_chip(id) == "fj_rc" ? "" : "if (fj_rca) ");
      }
      s += fmt::format("  for ({0} k = ({0})fj_tid; k < row_len; k += ({0})fj_nt) {{\n", k.idx) + indent(body, 2) + "  }\n";
    }
    if (red_j.size() == 1) s += "  fjk_stage_wait();\n";
    return "  if (fj_rc) {  // the row on chip: copied by the whole block, then every pass reads it there\n" + indent(s, 2) +
           "    if (fj_nt > 1) fj_red_sync();\n  }\n";
  }

  // The row loop of a column kernel (the innermost axis kept): rows side by side in a block, so
  // neighbouring threads read neighbouring elements, each row's lanes shared by the block's other
  // threads (fj_reduce_phase with fj_nt threads). A row past the end repeats the last one, so its
  // threads meet every barrier, and writes nothing (fj_live).
  std::string column_loop() {
    std::string s = fmt::format(
        "  // {0} rows (columns) per block side by side (neighbouring threads read neighbouring elements), each\n"
        "  // reduced by the block's threads in turn sharing its lanes; rows per block divide the block size\n"
        "  int fj_rpb = {0};\n"
        "  while ((int)blockDim.x % fj_rpb != 0) fj_rpb /= 2;\n"
        "  const int fj_nt = (int)blockDim.x / fj_rpb, fj_tid = (int)threadIdx.x / fj_rpb, fj_r = (int)threadIdx.x % fj_rpb;\n",
        col_rows());
    s += "  // Row fj_r's lane l at l * fj_rpb + fj_r (fj_red_lanes_at): a warp's rows' lanes in neighbouring words\n";
    for (const auto& [name, t] : lane_types())
      s += fmt::format("  const fj_red_lanes_at<{0}> fj_lanes_{1} = {{({0}*)fj_lane_buf + fj_r, fj_rpb}};\n", t, name);
    return s + fmt::format("  // Each group of fj_rpb rows in a block; row_split blocks per group in the odd launches of a split\n"
                           "  const {0} fj_parts = (split_phase & 1) ? row_split : 1, fj_groups = (rows + fj_rpb - 1) / fj_rpb;\n"
                           "  for ({0} fj_b = blockIdx.x; fj_b < fj_groups * fj_parts; fj_b += gridDim.x) {{\n"
                           "    const {0} fj_o0 = fj_b / fj_parts * fj_rpb, fj_part = fj_b - fj_b / fj_parts * fj_parts;\n"
                           "    const bool fj_live = fj_o0 + fj_r < rows;\n"
                           "    const {0} o = fj_live ? fj_o0 + fj_r : rows - 1;\n",
                           k.idx);
  }

  // The row cache's regions in the launch's dynamic shared memory (GeneratedKernel::row_cache_sizes).
  std::string row_cache() {
    if (cached.empty()) return "";
    std::string s = "  // The row on chip (docs/ops.md): the inputs several passes read, copied into shared memory at\n"
                    "  // the start of each row when the launch gave room for them (row_cache 1 to 3; not in a split row's launches)\n"
                    "  FJK_DYNAMIC_SHARED(fj_row_cache);\n  const bool fj_rc = row_cache != 0 && split_phase == 0;\n";
    if (info.per_row_inputs < info.reread_inputs.size())
      s += "  // with row_cache 3 the rows that differ per row only: the broadcast ones (the same bytes for every\n"
           "  // block, which L2 keeps) are read from memory\n"
           "  const bool fj_rca = fj_rc && row_cache != 3;\n";
    std::string offset = "0";
    for (ir::NodeId id : info.reread_inputs) {
      s += fmt::format("  {0}* const fj_rc_{1} = fjk_shared_region<{0}>(fj_row_cache, {2}, {3});\n", k.storage(id), v(id), offset,
                       on_chip(id));
      offset += fmt::format(" + ((unsigned long long)row_len * {} + 15) / 16 * 16", ir::dtype_size(k.dtype(id)));
    }
    if (kept.empty()) return s;
    s += "  // and, with row_cache 2, the values a pass computes and the epilogue reads again (kept values)\n";
    s += V > 1 ? "  // (read by the vector loop only: a launch without it neither writes nor reads them)\n"
                 "  const bool fj_rv = FJ_RED_KEPT && fj_rc && row_cache == 2 && fj_vector;\n"
               : "  const bool fj_rv = FJ_RED_KEPT && fj_rc && row_cache == 2;\n";
    for (ir::NodeId id : info.kept_values) {
      s += fmt::format("  {0}* const fj_rv_{1} = fjk_shared_region<{0}>(fj_row_cache, {2}, fj_rv);\n", compute_ctype(k.dtype(id)),
                       v(id), offset);
      offset += fmt::format(" + ((unsigned long long)row_len * {} + 15) / 16 * 16", ir::dtype_size(k.dtype(id)));
    }
    return s;
  }

  // The body function both entries call.
  std::string body_function(const KernelSignature& sig) {
    std::string params, s;
    for (const ArgSlot& a : sig.args) params += fmt::format("{}{} {}", params.empty() ? "" : ",\n    ", a.ctype, a.name);
    // One lane buffer, the passes' lanes in turn (each pass ends at a barrier): FJ_RED_LANES lanes of
    // the widest pass (ir::lane_bytes each) in 8-byte words, per row of a column kernel's block.
    const std::string words = fmt::format("(FJ_RED_LANES * {} + 7) / 8", ir::lane_bytes(k.g, info));
    if (row_blocks()) {  // fj_lane_groups lane arrays: the long-row entry's block reduces that many chunks at once
      s += fmt::format("  __shared__ unsigned long long fj_lane_buf[fj_lane_groups * ({})];\n", words);
      for (const auto& [name, t] : lane_types()) s += fmt::format("  {0}* const fj_lanes_{1} = ({0}*)fj_lane_buf;\n", t, name);
    } else {
      s += fmt::format("  __shared__ unsigned long long fj_lane_buf[{} * ({})];\n", col_rows(), words);
    }
    for (ir::NodeId id : k.group.params) {
      s += fmt::format("  const {} {} = p_{};\n", compute_ctype(k.dtype(id)), v(id), v(id));
      s += hf.other_form(id, HalfForms::Form::Compute);
    }
    s += declare_constants(k, hf);
    s += row_strides();
    s += row_cache();
    if (row_blocks())
      s += fmt::format("  const int fj_tid = (int)threadIdx.x, fj_nt = (int)blockDim.x;\n"
                       "  // One block per row; row_split blocks per row in the odd launches of a split row\n"
                       "  const {0} fj_parts = (split_phase & 1) ? row_split : 1;\n"
                       "  for ({0} fj_b = blockIdx.x; fj_b < rows * fj_parts; fj_b += gridDim.x) {{\n"
                       "    const {0} o = fj_b / fj_parts, fj_part = fj_b - o * fj_parts;\n", k.idx);
    else
      s += column_loop();
    s += indent(row(), 2);
    if (!cached.empty()) s += "    if (fj_rc && fj_nt > 1) fj_red_sync();  // the next row overwrites the row cache\n";
    s += "  }\n";
    return fmt::format("template <bool fj_fast, int fj_lane_groups>\nstatic __device__ __forceinline__ void @NAME@_rows(\n    {}) {{\n",
                       params) +
           s + "}\n";
  }
};

KernelSignature reduce_signature(KernelGen& k, bool split, bool row_cache, int V) {
  KernelSignature sig = strided_signature(k);
  sig.args.push_back({ArgKind::RowCount, -1, -1, -1, ir::DType::I64, k.idx_bytes, "rows", k.idx});
  sig.args.push_back({ArgKind::RowLength, -1, -1, -1, ir::DType::I64, k.idx_bytes, "row_len", k.idx});
  if (split) {
    sig.args.push_back({ArgKind::SplitPhase, -1, -1, -1, ir::DType::I32, 4, "split_phase", "int"});
    sig.args.push_back({ArgKind::RowSplit, -1, -1, -1, ir::DType::I64, k.idx_bytes, "row_split", k.idx});
    sig.args.push_back({ArgKind::Workspace, -1, -1, -1, ir::DType::I64, 8, "ws", "unsigned long long*"});
  }
  if (row_cache) sig.args.push_back({ArgKind::RowCache, -1, -1, -1, ir::DType::I32, 4, "row_cache", "unsigned int"});
  if (V > 1) sig.args.push_back({ArgKind::VecFlag, -1, -1, -1, ir::DType::I32, 4, "vec_ok", "int"});
  return sig;
}

// An entry: the fast one (suffix "") with the row strides 1, the strided one ("_s") as passed.
// The long-row entry ("_l", GeneratedKernel::long_rows_name) is the fast one with lane_groups lane
// arrays: kept apart so that the others' registers stay what one lane array needs. `bounded`: a
// row kernel's fast or strided entry, whose blocks never pass kReduceMaxBlock threads, marked
// FJ_RED_ROW_BOUNDS (fj_reduce.h: empty unless -DFJ_RED_MIN_BLOCKS asks for __launch_bounds__).
std::string reduce_entry(const KernelSignature& sig, const char* suffix, int lane_groups = 1, bool bounded = false) {
  std::string params, args;
  for (const ArgSlot& a : sig.args) {
    params += fmt::format("{}{} {}", params.empty() ? "" : ",\n    ", a.ctype, a.name);
    args += (args.empty() ? "" : ", ") + a.name;
  }
  return fmt::format("extern \"C\" __global__ void {}@NAME@{}(\n    {}) {{\n  @NAME@_rows<{}, {}>({});\n}}\n",
                     bounded ? "FJ_RED_ROW_BOUNDS " : "", suffix, params, std::string_view(suffix) == "_s" ? "false" : "true",
                     lane_groups, args);
}

std::string reduce_header(KernelGen& k, const ReduceGen& r, int lane_groups) {
  std::string axes;
  for (int64_t a : ir::mask_axes(k.group.reduce_mask)) axes += (axes.empty() ? "" : ", ") + std::to_string(a);
  std::string text = kernel_header(k);
  text.erase(text.rfind("// Entry points"));
  text += fmt::format("// Reduction kernel: axes [{}] of the iteration space, {}.\n"
                      "// Every reduction combines a row's elements in fusejit's fixed order (fj_reduce.h:\n"
                      "// chunks of FJ_RED_CHUNK, element i to lane\n"
                      "// i mod FJ_RED_LANES in index order, lanes by a halving tree), whatever the block size.\n"
                      "// Entry points: @NAME@ for C-contiguous tensors (stride 1 along a row: fj_fast), @NAME@_s for any strides{}.\n",
                      axes,
                      r.row_blocks() ? "one block per row (threads share the lanes), or for a few long rows\n"
                                       "// row_split blocks per row in several launches (fj_reduce_phase)"
                                     : "columns side by side in a block (a row, the elements one output\n"
                                       "// reduces, is a column of the tensor), each one's lanes shared by its threads, or\n"
                                       "// for a few groups of long columns row_split blocks per group in several launches",
                      lane_groups > 1 ? fmt::format(",\n// @NAME@_l as @NAME@ for long rows on chip: a block of 256 k threads reduces up to min(k, {}) "
                                                    "chunks at once, in lane groups", lane_groups)
                                      : std::string());
  return text;
}

GeneratedKernel generate_reduce_kernel(KernelGen& k) {
  HalfForms hf(k);
  ReduceGen r(k, hf);
  GeneratedKernel out;
  out.fast_math = k.opts.fast_math;
  out.index64 = k.layout.index64;
  out.reduction = true;
  out.row_blocks = r.row_blocks();
  r.plan_split();
  out.split_reductions = r.split_words;
  out.split_phases = r.final_phase;
  out.rows_per_block = r.row_blocks() ? 1 : r.col_rows();
  if (r.row_blocks()) out.row_cache_sizes = ir::row_cache_element_sizes(k.g, r.info);
  if (r.row_blocks()) out.row_cache_per_row = r.info.per_row_inputs;
  if (!r.kept.empty()) out.row_value_sizes = ir::kept_value_sizes(k.g, r.info);
  if (out.takes_long_rows())
    out.lane_groups = static_cast<int>(std::clamp<int64_t>(
        kLaneGroupBytes / (256 * ir::lane_bytes(k.g, r.info)), 1, kMaxLaneGroups));  // FJ_RED_LANES lanes an array
  out.strided_signature = reduce_signature(k, out.split_reductions > 0, !out.row_cache_sizes.empty(), r.V);
  out.signature = out.strided_signature;
  out.signature.vector_width = r.V;  // the fast entry's vector path (the strided entry ignores vec_ok)
  out.signature.reduce_rows = r.V > 1;
  out.vector_width = r.V;
  const std::string body = r.body_function(out.signature);
  const bool bounded = r.row_blocks();
  std::string entries = reduce_entry(out.signature, "", 1, bounded) + reduce_entry(out.signature, "_s", 1, bounded);
  if (out.lane_groups > 1) entries += reduce_entry(out.signature, "_l", out.lane_groups);
  finish(out, k.g.name, reduce_header(k, r, out.lane_groups) + body + entries);
  return out;
}

}  // namespace

GeneratedKernel generate_kernel(const ir::Graph& g, const ir::FusionGroup& group, const CodegenOptions& opts) {
  KernelGen k(g, group, opts);
  if (reduction_operand(g, group) != ir::kNoNode) return generate_reduce_kernel(k);
  k.V = vector_width(k);
  GeneratedKernel out;
  out.fast_math = opts.fast_math;
  out.index64 = k.layout.index64;
  out.vector_width = k.V;
  out.signature = signature(k);
  out.strided_signature = strided_signature(k);
  const std::string elem = element_function(k);
  const std::string kernel = kernel_function(k, out.signature);
  const std::string strided = strided_kernel_function(k, out.strided_signature);
  finish(out, g.name, kernel_header(k) + elem + kernel + strided);
  return out;
}

std::vector<GeneratedKernel> generate_plan_kernels(const ir::Graph& g, const ir::Plan& plan, const CodegenOptions& opts) {
  std::vector<GeneratedKernel> r;
  r.reserve(plan.groups.size());
  for (const ir::FusionGroup& grp : plan.groups) r.push_back(generate_kernel(g, grp, opts));
  return r;
}

std::span<const PreludeHeader> prelude_headers() {
  static const PreludeHeader headers[] = {
      {"fj_scalar.h", kScalarPrelude}, {"fj_reduce.h", kReducePrelude}, {"fj_kernel.h", kKernelPrelude}};
  return headers;
}

namespace {
// The preludes `kernels` need (fj_reduce.h only for reductions), as text or #include lines.
std::string prelude_text(std::span<const GeneratedKernel> kernels, Prelude prelude) {
  const std::span<const PreludeHeader> h = prelude_headers();
  auto part = [&](size_t k) {
    return prelude == Prelude::Embedded ? std::string(h[k].text) : fmt::format("#include \"{}\"\n", h[k].name);
  };
  std::string s = prelude == Prelude::Embedded
                      ? "// Generated by fusejit. Scalar semantics: ir/scalar/fj_scalar.h (embedded below).\n"
                      : "// Generated by fusejit. Scalar semantics: fj_scalar.h (ir/scalar/fj_scalar.h); the reduction\n"
                        "// order: fj_reduce.h; indexing and vector helpers: fj_kernel.h. The kernel follows them.\n";
  s += part(0);
  if (std::any_of(kernels.begin(), kernels.end(), [](const GeneratedKernel& k) { return k.reduction; })) {
    if (std::none_of(kernels.begin(), kernels.end(), [](const GeneratedKernel& k) { return k.index64; }))
      s += "// 32-bit indexing: fewer than 2^31 elements, at most 2^18 chunks of a row (FJ_RED_STACK).\n"
           "#define FJ_RED_STACK 20\n";
    s += part(1);
  }
  return s + part(2);
}
}  // namespace

TranslationUnit emit_translation_unit(std::span<const GeneratedKernel> kernels, Prelude prelude) {
  TranslationUnit tu;
  tu.source = prelude_text(kernels, prelude);
  std::map<std::string, const std::string*> seen;
  for (const GeneratedKernel& k : kernels) {
    FJ_CHECK(k.fast_math == kernels.front().fast_math, "emit_translation_unit: kernels mix fast and strict mode");
    if (auto it = seen.find(k.name); it != seen.end()) {
      // The name keys on the text without location comments: the same kernel written at other
      // lines (of another graph in one translation unit) is the same kernel.
      FJ_CHECK(without_location_comments(*it->second) == without_location_comments(k.source),
               "emit_translation_unit: two different kernels named " + k.name);
      continue;
    }
    seen[k.name] = &k.source;
    tu.kernel_names.push_back(k.name);
    tu.source += "\n";
    tu.source += k.source;
    for (const std::string& o : k.nvrtc_options)
      if (std::find(tu.nvrtc_options.begin(), tu.nvrtc_options.end(), o) == tu.nvrtc_options.end())
        tu.nvrtc_options.push_back(o);
  }
  return tu;
}

}  // namespace fusejit::jit
