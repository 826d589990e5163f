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

#include "ir/printer.h"
#include "ir/scalar/fj_scalar.h"

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
template <class T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) fj_vec {
  T v[N];
};
template <class T, int N>
FJK_FN fj_vec<T, N> fj_vload(const T* p) {
#ifdef FJ_DEVICE_CODE
  return *reinterpret_cast<const fj_vec<T, N>*>(p);
#else
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
  __builtin_memcpy(p, &x, sizeof(x));
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

std::string sanitize(const std::string& s) {
  std::string r;
  for (char c : s) r += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (r.empty()) r = "graph";
  if (r.size() > 32) r.resize(32);
  return r;
}

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
    return fmt::format("  [{}:{}]", file, n.loc.line);
  }
  std::string label(ir::NodeId id) {
    const ir::Node& n = g_.node(id);
    return n.name.empty() || canonical_ ? v(id) : fmt::format("{} ({})", v(id), n.name);
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

GeneratedKernel generate_kernel(const ir::Graph& g, const ir::FusionGroup& group, const CodegenOptions& opts) {
  GeneratedKernel k;
  Naming nm(g, opts.canonical_names);
  k.fast_math = opts.fast_math;
  KernelLayout layout = compute_layout(g, group);
  if (opts.index_bits == 64) layout.index64 = true;
  FJ_CHECK(!(opts.index_bits == 32 && layout.index64), "codegen: 32-bit index math forced for >= 2^31 elements");
  k.index64 = layout.index64;
  const char* idx = layout.index64 ? "unsigned long long" : "unsigned int";
  const int idx_bytes = layout.index64 ? 8 : 4;

  std::set<ir::NodeId> in_group(group.nodes.begin(), group.nodes.end());
  std::map<ir::NodeId, size_t> input_pos;
  for (size_t i = 0; i < group.inputs.size(); ++i) input_pos[group.inputs[i]] = i;
  std::set<ir::NodeId> params(group.params.begin(), group.params.end());

  // Vector path: V consecutive elements of the iteration space per iteration. Contiguous inputs
  // and outputs move as one vector. A strided input is either contiguous along the innermost
  // collapsed dim (its stride there is 1: one vector load at its base offset) or broadcast along
  // it (one scalar load reused by all V lanes). With strided inputs the vector path is only valid
  // when the innermost collapsed size is a multiple of V (then the V elements never cross a row
  // and every base offset is a multiple of V, so aligned); pack_args checks that at run time.
  const bool all_flat = std::none_of(layout.access.begin(), layout.access.end(),
                                     [](InputAccess a) { return a == InputAccess::Strided; });
  const size_t rank = layout.dim_groups.size();
  // Strided input contiguous along the innermost collapsed dim: loaded as a vector.
  auto inner_vec = [&](size_t i) { return layout.access[i] == InputAccess::Strided && !layout.bcast[i][rank - 1]; };
  // V is set by the NARROWEST array that moves as a vector, so it moves 16 bytes per access (a u8
  // input feeding an f32 output gets V = 16, not 4: four times the bytes in flight per load and
  // one index computation per 16 elements), capped at 64 bytes per thread for the widest array
  // (4 x 16-byte accesses) to bound registers.
  int min_size = 16, max_size = 1;
  auto note_size = [&](ir::DType t) {
    min_size = std::min(min_size, ir::dtype_size(t));
    max_size = std::max(max_size, ir::dtype_size(t));
  };
  for (size_t i = 0; i < group.inputs.size(); ++i)
    if (layout.access[i] == InputAccess::Contiguous || inner_vec(i)) note_size(g.node(group.inputs[i]).dtype);
  for (ir::NodeId o : group.outputs) note_size(g.node(o).dtype);
  int V = 1;
  // No vector path for a 0-d iteration space (one element).
  if (opts.vectorize && !group.outputs.empty() && rank >= 1 && (all_flat || rank >= 2)) {
    V = 16 / min_size;
    while (V > 1 && V * max_size > 64) V /= 2;
  }
  k.vector_width = V;

  // ---- signature ----
  KernelSignature& sig = k.signature;
  sig.layout = layout;
  sig.vector_width = V;
  for (size_t i = 0; i < group.inputs.size(); ++i) {
    const ir::Node& nd = g.node(group.inputs[i]);
    sig.args.push_back({ArgKind::InputPtr, static_cast<int>(i), -1, -1, nd.dtype, 8, "in_" + nm.v(group.inputs[i]),
                        fmt::format("const {}* __restrict__", storage_ctype(nd.dtype))});
  }
  for (size_t i = 0; i < group.outputs.size(); ++i) {
    const ir::Node& nd = g.node(group.outputs[i]);
    sig.args.push_back({ArgKind::OutputPtr, static_cast<int>(i), -1, -1, nd.dtype, 8, "out_" + nm.v(group.outputs[i]),
                        fmt::format("{}* __restrict__", storage_ctype(nd.dtype))});
  }
  for (size_t i = 0; i < group.params.size(); ++i) {
    const ir::Node& nd = g.node(group.params[i]);
    FJ_CHECK(nd.op == ir::Op::Param, "codegen: group param is not a Param node");
    const int bytes = ir::is_half(nd.dtype) ? 4 : ir::dtype_size(nd.dtype);
    sig.args.push_back({ArgKind::Param, static_cast<int>(i), -1, nd.slot, nd.dtype, bytes, "p_" + nm.v(group.params[i]),
                        compute_ctype(nd.dtype)});
  }
  sig.args.push_back({ArgKind::NumElements, -1, -1, -1, ir::DType::I64, idx_bytes, "n", idx});
  if (!all_flat) {
    for (size_t c = 1; c < rank; ++c) {
      sig.args.push_back({ArgKind::DimSize, static_cast<int>(c), -1, -1, ir::DType::I64, idx_bytes,
                          fmt::format("size{}", c), idx});
      if (!layout.index64) {
        sig.args.push_back({ArgKind::DimDivMul, static_cast<int>(c), -1, -1, ir::DType::I32, 4,
                            fmt::format("size{}_mul", c), "unsigned int"});
        sig.args.push_back({ArgKind::DimDivShift, static_cast<int>(c), -1, -1, ir::DType::I32, 4,
                            fmt::format("size{}_shift", c), "unsigned int"});
      }
    }
    for (size_t i = 0; i < group.inputs.size(); ++i) {
      if (layout.access[i] != InputAccess::Strided) continue;
      for (size_t c = 0; c < rank; ++c)
        if (!layout.bcast[i][c])
          sig.args.push_back({ArgKind::Stride, static_cast<int>(i), static_cast<int>(c), -1, ir::DType::I64, idx_bytes,
                              fmt::format("st_{}_{}", nm.v(group.inputs[i]), c), idx});
    }
  }
  if (V > 1) sig.args.push_back({ArgKind::VecFlag, -1, -1, -1, ir::DType::I32, 4, "vec_ok", "int"});

  // ---- element function: computes the group's outputs from loaded inputs and params ----
  // f16/bf16 values exist in two forms: storage bits `vNh` (fj_f16/fj_bf16) and their exact f32
  // value `vN`. Inputs arrive and outputs leave in storage form; ops whose ir/ops.def half form is
  // Storage (add, sub, mul, ...) compute on halves in storage form (fj_add_f16 etc.: native
  // instructions on the GPU, correctly rounded; see fj_scalar.h); every other op computes in f32
  // and rounds once. A form is emitted only where some use needs it, so a half chain of add/mul
  // never converts.
  std::string body;
  std::string elem_params;
  auto add_elem_param = [&](const std::string& p) { elem_params += (elem_params.empty() ? "" : ", ") + p; };
  auto half = [&](ir::NodeId id) { return ir::is_half(g.node(id).dtype); };
  auto hname = [&](ir::NodeId id) { return nm.v(id) + "h"; };
  auto native_half = [&](const ir::Node& nd) {
    if (opts.fast_math || !ir::is_half(nd.dtype)) return false;
    if (ir::op_info(nd.op).half != ir::HalfForm::Storage) return false;
    for (int j = 0; j < nd.nargs; ++j)
      if (g.node(nd.arg(j)).dtype != nd.dtype) return false;
    return true;
  };
  std::set<ir::NodeId> need_h, need_f;  // half values whose storage / f32 form some use reads
  for (ir::NodeId id : group.nodes) {
    const ir::Node& nd = g.node(id);
    for (int j = 0; j < nd.nargs; ++j) (native_half(nd) ? need_h : need_f).insert(nd.arg(j));
  }
  for (ir::NodeId id : group.outputs) (half(id) ? need_h : need_f).insert(id);
  for (ir::NodeId id : group.inputs)
    add_elem_param(fmt::format("{} {}", storage_ctype(g.node(id).dtype), half(id) ? hname(id) : nm.v(id)));
  for (ir::NodeId id : group.params) add_elem_param(fmt::format("{} {}", compute_ctype(g.node(id).dtype), nm.v(id)));
  for (ir::NodeId id : group.outputs)
    add_elem_param(fmt::format("{}& o_{}", storage_ctype(g.node(id).dtype), nm.v(id)));
  auto store_fn = [](ir::DType t) { return t == ir::DType::F16 ? "fj_store_f16" : "fj_store_bf16"; };

  // Half inputs: their f32 value where an f32 op reads it.
  for (ir::NodeId id : group.inputs)
    if (half(id) && need_f.count(id))
      body += fmt::format("  const float {} = fj_load({});\n", nm.v(id), hname(id));
  // Half params arrive as f32 (exact half values): their storage form where a half op reads it.
  for (ir::NodeId id : group.params)
    if (half(id) && need_h.count(id))
      body += fmt::format("  const {} {} = {}({});\n", storage_ctype(g.node(id).dtype), hname(id),
                          store_fn(g.node(id).dtype), nm.v(id));

  // Constants used by the group, declared first so every value has a name.
  std::set<ir::NodeId> consts;
  auto note_operand = [&](ir::NodeId a) {
    const ir::Node& an = g.node(a);
    if (in_group.count(a) || input_pos.count(a) || params.count(a)) return;
    FJ_CHECK(an.op == ir::Op::Const, fmt::format("codegen: operand v{} is not computed, read or a param in this group", a));
    consts.insert(a);
  };
  for (ir::NodeId id : group.nodes)
    for (int j = 0; j < g.node(id).nargs; ++j) note_operand(g.node(id).arg(j));
  for (ir::NodeId id : group.outputs) note_operand(id);
  for (ir::NodeId c : consts) {
    const ir::Node& cn = g.node(c);
    const std::string note = fmt::format("  // {} = const {} : {}{}\n", nm.label(c), ir::print_scalar(cn.value),
                                         ir::dtype_name(cn.dtype), nm.where(cn));
    if (ir::is_half(cn.dtype) && need_h.count(c)) {
      const float f = static_cast<float>(cn.value.f);
      const unsigned bits = cn.dtype == ir::DType::F16 ? fj_f16_bits_of(f) : fj_bf16_bits_of(f);
      body += fmt::format("  const {} {} = {{(unsigned short)0x{:04x}u}};{}", storage_ctype(cn.dtype), hname(c), bits, note);
      if (!need_f.count(c)) continue;
    }
    body += fmt::format("  const {} {} = {};{}", compute_ctype(cn.dtype), nm.v(c), constant_literal(cn.value), note);
  }
  for (ir::NodeId id : group.nodes) {
    const ir::Node& nd = g.node(id);
    FJ_CHECK(!ir::is_leaf(nd.op), "codegen: a leaf is listed among a group's nodes");
    const std::string note = fmt::format("  // {}{}\n", nm.describe(id), nm.where(nd));
    const char* ht = ir::is_half(nd.dtype) ? storage_ctype(nd.dtype) : "";
    if (native_half(nd)) {
      std::string hargs;
      for (int j = 0; j < nd.nargs; ++j) hargs += (j ? ", " : "") + hname(nd.arg(j));
      body += fmt::format("  const {} {} = {}_{}({});{}", ht, hname(id), ir::op_info(nd.op).scalar_fn,
                          ir::dtype_name(nd.dtype), hargs, note);
      if (need_f.count(id)) body += fmt::format("  const float {} = fj_load({});\n", nm.v(id), hname(id));
      continue;
    }
    std::string args;
    for (int j = 0; j < nd.nargs; ++j) args += (j ? ", " : "") + nm.v(nd.arg(j));
    // A cast whose operand is held as an f32 value (f32, or a half's exact f32 form) rounds it once.
    const ir::DType src = nd.nargs ? g.node(nd.arg(0)).dtype : nd.dtype;
    const bool cast_from_f32 = nd.op == ir::Op::Cast && (src == ir::DType::F32 || ir::is_half(src));
    std::string fn(ir::op_info(nd.op).scalar_fn);  // ir/ops.def; casts: fj_cvt_<dst>
    if (nd.op == ir::Op::Cast) fn += fmt::format("_{}", ir::dtype_name(nd.dtype));
    std::string value = fmt::format("{}({})", fn, args);
    if (ir::is_half(nd.dtype) && !opts.fast_math && need_h.count(id)) {
      // One rounding to storage form, then the f32 value where an f32 op reads it.
      body += fmt::format("  const {} {} = {}({});{}", ht, hname(id), store_fn(nd.dtype),
                          cast_from_f32 ? nm.v(nd.arg(0)) : value, note);
      if (need_f.count(id)) body += fmt::format("  const float {} = fj_load({});\n", nm.v(id), hname(id));
      continue;
    }
    // Strict: every f16/bf16 node is rounded to its type (casts already return a rounded value).
    if (ir::is_half(nd.dtype) && nd.op != ir::Op::Cast && !opts.fast_math)
      value = fmt::format("{}({})", nd.dtype == ir::DType::F16 ? "fj_round_f16" : "fj_round_bf16", value);
    body += fmt::format("  const {} {} = {};{}", compute_ctype(nd.dtype), nm.v(id), value, note);
    // Fast mode keeps halves in f32; the storage form is rounded once where an output needs it.
    if (ir::is_half(nd.dtype) && need_h.count(id))
      body += fmt::format("  const {} {} = {}({});\n", ht, hname(id), store_fn(nd.dtype), nm.v(id));
  }
  for (ir::NodeId id : group.outputs) body += fmt::format("  o_{} = {};\n", nm.v(id), half(id) ? hname(id) : nm.v(id));

  // ---- kernel ----
  std::string kp;  // kernel parameter list
  for (const ArgSlot& a : sig.args) kp += fmt::format("{}{} {}", kp.empty() ? "" : ",\n    ", a.ctype, a.name);

  auto elem_call = [&](const std::string& idx_expr, bool vec) {
    std::string s;
    auto add = [&](const std::string& x) { s += (s.empty() ? "" : ", ") + x; };
    for (size_t i = 0; i < group.inputs.size(); ++i) {
      const ir::NodeId id = group.inputs[i];
      switch (layout.access[i]) {
        case InputAccess::Uniform: add("u_" + nm.v(id)); break;
        case InputAccess::Contiguous:
          add(vec ? fmt::format("x_{}.v[j]", nm.v(id)) : fmt::format("in_{}[{}]", nm.v(id), idx_expr));
          break;
        case InputAccess::Strided:
          if (!vec) add(fmt::format("in_{0}[off_{0}]", nm.v(id)));
          else if (inner_vec(i)) add(fmt::format("x_{}.v[j]", nm.v(id)));
          else add("b_" + nm.v(id));  // broadcast along the innermost dim: one load per vector
          break;
      }
    }
    for (ir::NodeId id : group.params) add("p_" + nm.v(id));
    for (ir::NodeId id : group.outputs) add("r_" + nm.v(id));
    return s;
  };

  // Coordinates of element `i` in the collapsed iteration space (innermost dim first) and the
  // offset of every strided input; `ind` is the indentation.
  auto emit_offsets = [&](const std::string& ind) {
    std::string s = fmt::format("{}{} rem = i;\n", ind, idx);
    for (size_t c = rank - 1; c >= 1; --c) {
      if (layout.index64)
        s += fmt::format("{0}const {1} c{2} = rem % size{2};\n{0}rem /= size{2};\n", ind, idx, c);
      else  // i < 2^31: divide by multiplying (Granlund-Montgomery magic numbers from pack_args)
        s += fmt::format("{0}const {1} q{2} = fjk_udiv(rem, size{2}_mul, size{2}_shift);  // rem / size{2}\n"
                         "{0}const {1} c{2} = rem - q{2} * size{2};\n{0}rem = q{2};\n",
                         ind, idx, c);
    }
    s += fmt::format("{}const {} c0 = rem;\n", ind, idx);
    for (size_t i = 0; i < group.inputs.size(); ++i) {
      if (layout.access[i] != InputAccess::Strided) continue;
      std::string off;
      for (size_t c = 0; c < rank; ++c)
        if (!layout.bcast[i][c]) off += fmt::format("{}c{} * st_{}_{}", off.empty() ? "" : " + ", c, nm.v(group.inputs[i]), c);
      s += fmt::format("{}const {} off_{} = {};\n", ind, idx, nm.v(group.inputs[i]), off);
    }
    return s;
  };

  std::string kb;
  kb += fmt::format("  const {0} tid = ({0})blockIdx.x * blockDim.x + threadIdx.x;\n", idx);
  kb += fmt::format("  const {0} nthreads = ({0})gridDim.x * blockDim.x;\n", idx);
  for (size_t i = 0; i < group.inputs.size(); ++i)
    if (layout.access[i] == InputAccess::Uniform) {
      const ir::NodeId id = group.inputs[i];
      kb += fmt::format("  const {} u_{} = {};  // broadcast along every dim: read once\n",
                        storage_ctype(g.node(id).dtype), nm.v(id), fmt::format("in_{}[0]", nm.v(id)));
    }
  kb += fmt::format("  {} start = 0;\n", idx);
  if (V > 1) {
    if (all_flat)
      kb += fmt::format("  if (vec_ok) {{  // every pointer 16-byte aligned: {} elements per iteration\n", V);
    else
      kb += fmt::format("  if (vec_ok) {{  // every pointer 16-byte aligned and size{} % {} == 0: {} elements per "
                        "iteration, in one row\n", rank - 1, V, V);
    kb += fmt::format("    const {} nvec = n / {};\n", idx, V);
    kb += fmt::format("    for ({} k = tid; k < nvec; k += nthreads) {{\n", idx);
    kb += fmt::format("      const {} i = k * {};\n", idx, V);
    // One index computation per vector: lane j of a strided input is at off + j (contiguous along
    // the innermost dim) or at off (broadcast along it).
    if (!all_flat) kb += emit_offsets("      ");
    for (size_t i = 0; i < group.inputs.size(); ++i) {
      const ir::NodeId id = group.inputs[i];
      const ir::DType t = g.node(id).dtype;
      const char* st = storage_ctype(t);
      if (layout.access[i] == InputAccess::Contiguous)
        kb += fmt::format("      const fj_vec<{0}, {1}> x_{2} = fj_vload<{0}, {1}>(in_{2} + i);\n", st, V, nm.v(id));
      else if (inner_vec(i))
        kb += fmt::format("      const fj_vec<{0}, {1}> x_{2} = fj_vload<{0}, {1}>(in_{2} + off_{2});\n", st, V, nm.v(id));
      else if (layout.access[i] == InputAccess::Strided)
        kb += fmt::format("      const {} b_{} = {};\n", st, nm.v(id),
                          fmt::format("in_{0}[off_{0}]", nm.v(id)));
    }
    for (ir::NodeId id : group.outputs)
      kb += fmt::format("      fj_vec<{}, {}> y_{};\n", storage_ctype(g.node(id).dtype), V, nm.v(id));
    kb += "#pragma unroll\n";
    kb += fmt::format("      for (int j = 0; j < {}; ++j) {{\n", V);
    for (ir::NodeId id : group.outputs) kb += fmt::format("        {} r_{};\n", storage_ctype(g.node(id).dtype), nm.v(id));
    kb += fmt::format("        @NAME@_elem({});\n", elem_call("", true));
    for (ir::NodeId id : group.outputs)
      kb += fmt::format("        y_{0}.v[j] = r_{0};\n", nm.v(id));
    kb += "      }\n";
    for (ir::NodeId id : group.outputs)
      kb += fmt::format("      fj_vstore<{0}, {1}>(out_{2} + i, y_{2});\n", storage_ctype(g.node(id).dtype), V, nm.v(id));
    kb += "    }\n";
    kb += fmt::format("    start = nvec * {};\n", V);
    kb += "  }\n";
  }
  kb += fmt::format("  for ({} i = start + tid; i < n; i += nthreads) {{\n", idx);
  if (!all_flat) kb += emit_offsets("    ");
  for (ir::NodeId id : group.outputs) kb += fmt::format("    {} r_{};\n", storage_ctype(g.node(id).dtype), nm.v(id));
  kb += fmt::format("    @NAME@_elem({});\n", elem_call("i", false));
  for (ir::NodeId id : group.outputs)
    kb += fmt::format("    out_{0}[i] = r_{0};\n", nm.v(id));
  kb += "  }\n";

  std::string outs;
  for (ir::NodeId id : group.outputs) outs += (outs.empty() ? "" : ", ") + nm.label(id);
  std::string text;
  // Sizes are kernel arguments: the text names dims symbolically so a new dim value gives the
  // same source (and the same cache entry).
  std::string space;
  for (const ir::Dim& d : group.iter_shape)
    space += (space.empty() ? "" : ", ") +
             (d.sym >= 0 && static_cast<size_t>(d.sym) < g.dims.size() ? g.dims[static_cast<size_t>(d.sym)].name
                                                                     : std::to_string(d.size));
  text += fmt::format("// Fusion group: {} op(s), iteration space [{}], {}-bit index math{}.\n",
                      group.nodes.size(), space, layout.index64 ? 64 : 32,
                      V > 1 ? fmt::format(", {}-wide vector path", V) : std::string());
  text += fmt::format("// Layout: {}. Outputs: {}.\n", layout_fingerprint(layout), outs.empty() ? "none" : outs);
  if (opts.canonical_names)
    text += "// Canonical value names (v0 = first value seen): every node of this structure shares this kernel;\n"
            "// index.json lists, per node, the kernel it runs.\n";
  text += fmt::format("static __device__ __forceinline__ void @NAME@_elem({}) {{\n", elem_params);
  text += body;
  text += "}\n";
  text += fmt::format("extern \"C\" __global__ void @NAME@(\n    {}) {{\n", kp);
  text += kb;
  text += "}\n";

  const uint64_t h = XXH3_64bits(text.data(), text.size());
  // 64 bits of the text's hash: names stand for kernels (unfused nodes share them, caches key on them),
  // and 32 bits collide among tens of thousands of kernels.
  k.name = fmt::format("fj_{}_{:016x}", sanitize(g.name), h);
  std::string out;
  for (size_t p = 0;;) {
    const size_t q = text.find("@NAME@", p);
    out.append(text, p, q == std::string::npos ? std::string::npos : q - p);
    if (q == std::string::npos) break;
    out += k.name;
    p = q + 6;
  }
  k.source = std::move(out);
  k.nvrtc_options = opts.fast_math ? std::vector<std::string>{"--std=c++17", "--use_fast_math", "--fmad=true"}
                                   : std::vector<std::string>{"--std=c++17", "--fmad=false"};
  return k;
}

std::vector<GeneratedKernel> generate_plan_kernels(const ir::Graph& g, const ir::Plan& plan, const CodegenOptions& opts) {
  std::vector<GeneratedKernel> r;
  r.reserve(plan.groups.size());
  for (const ir::FusionGroup& grp : plan.groups) r.push_back(generate_kernel(g, grp, opts));
  return r;
}

TranslationUnit emit_translation_unit(std::span<const GeneratedKernel> kernels) {
  TranslationUnit tu;
  tu.source = "// Generated by fusejit. Scalar semantics: ir/scalar/fj_scalar.h (embedded below).\n";
  tu.source += kScalarPrelude;
  tu.source += kKernelPrelude;
  std::map<std::string, const std::string*> seen;
  for (const GeneratedKernel& k : kernels) {
    FJ_CHECK(k.fast_math == kernels.front().fast_math, "emit_translation_unit: kernels mix fast and strict mode");
    if (auto it = seen.find(k.name); it != seen.end()) {
      FJ_CHECK(*it->second == k.source, "emit_translation_unit: two different kernels named " + k.name);
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
