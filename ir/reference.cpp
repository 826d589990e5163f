// Reference evaluator: node by node, each node's value by the fj_ function of its ir/ops.def row
// (the same code generated kernels run), looped over the broadcast output with typed inner loops.
#include "ir/reference.h"

#include "ir/reduce.h"

#include <algorithm>
#include <array>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "ir/op_fns.h"

namespace fusejit::ir {
namespace {

// Storage type S and compute type CT of each dtype, with load/store between them. bool is stored
// as a byte and loaded as byte != 0, so a hostile input byte (e.g. 2 from a .npy file) is still a
// valid bool. Half stores round to nearest even (fj_store_*), which is the per-node rounding.
template <DType D> struct St;
template <> struct St<DType::Bool> {
  using S = unsigned char; using CT = bool;
  static CT load(S v) { return v != 0; }
  static S store(CT v) { return v ? 1 : 0; }
};
#define FJ_PLAIN_ST(D, ST, C)                 \
  template <> struct St<DType::D> {           \
    using S = ST; using CT = C;               \
    static CT load(S v) { return v; }         \
    static S store(CT v) { return v; }        \
  };
FJ_PLAIN_ST(I8, signed char, signed char)
FJ_PLAIN_ST(U8, unsigned char, unsigned char)
FJ_PLAIN_ST(I32, int, int)
FJ_PLAIN_ST(I64, long long, long long)
FJ_PLAIN_ST(F32, float, float)
FJ_PLAIN_ST(F64, double, double)
#undef FJ_PLAIN_ST
template <> struct St<DType::F16> {
  using S = fj_f16; using CT = float;
  static CT load(S v) { return fj_load(v); }
  static S store(CT v) { return fj_store_f16(v); }
};
template <> struct St<DType::BF16> {
  using S = fj_bf16; using CT = float;
  static CT load(S v) { return fj_load(v); }
  static S store(CT v) { return fj_store_bf16(v); }
};
static_assert(sizeof(fj_f16) == 2 && sizeof(fj_bf16) == 2 && sizeof(long long) == 8 && sizeof(int) == 4);

template <class F>
decltype(auto) with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(std::integral_constant<DType, DType::Bool>{});
    case DType::I8: return f(std::integral_constant<DType, DType::I8>{});
    case DType::U8: return f(std::integral_constant<DType, DType::U8>{});
    case DType::I32: return f(std::integral_constant<DType, DType::I32>{});
    case DType::I64: return f(std::integral_constant<DType, DType::I64>{});
    case DType::F16: return f(std::integral_constant<DType, DType::F16>{});
    case DType::BF16: return f(std::integral_constant<DType, DType::BF16>{});
    case DType::F32: return f(std::integral_constant<DType, DType::F32>{});
    case DType::F64: return f(std::integral_constant<DType, DType::F64>{});
  }
  FJ_CHECK(false, "bad dtype");
  return f(std::integral_constant<DType, DType::F64>{});
}

// Iterates the broadcast of up to 3 operands onto the output shape, one row (the innermost,
// coalesced dimension) at a time: f(out_offset, operand offsets, row length, operand strides).
// Strides are in elements; a broadcast dimension has stride 0.
class Broadcast {
 public:
  Broadcast(const std::vector<int64_t>& out, std::span<const std::vector<int64_t>* const> ins) : n_(ins.size()) {
    size_t rank = out.size();
    std::vector<std::array<int64_t, 3>> strides(rank, {0, 0, 0});
    for (size_t k = 0; k < n_; ++k) {
      const std::vector<int64_t>& s = *ins[k];
      FJ_CHECK(s.size() <= rank, "operand rank exceeds the node's rank");
      int64_t st = 1;
      for (size_t j = s.size(); j-- > 0;) {
        size_t d = rank - s.size() + j;
        FJ_CHECK(s[j] == out[d] || s[j] == 1, "operand shape does not broadcast to the node's shape");
        strides[d][k] = s[j] == 1 ? 0 : st;
        st *= s[j];
      }
    }
    // Drop size-1 dims, then merge neighbours that are contiguous for every operand.
    for (size_t d = 0; d < rank; ++d) {
      if (out[d] == 1) continue;
      if (!sizes_.empty()) {
        bool merge = true;
        for (size_t k = 0; k < n_; ++k) merge &= strides_.back()[k] == strides[d][k] * out[d];
        if (merge) {
          sizes_.back() *= out[d];
          strides_.back() = strides[d];
          continue;
        }
      }
      sizes_.push_back(out[d]);
      strides_.push_back(strides[d]);
    }
    numel_ = 1;
    for (int64_t s : out) numel_ *= s;
  }

  // The row callback: f(out_offset, operand offsets, row length, operand strides). A plain
  // function pointer plus context, so the row iteration (and its thread pool) is compiled once
  // rather than once per op x dtype loop (this file's compile time is on every build's critical path).
  struct RowFn {
    void* ctx;
    void (*call)(void* ctx, int64_t, const std::array<int64_t, 3>&, int64_t, const std::array<int64_t, 3>&);
    void operator()(int64_t o, const std::array<int64_t, 3>& off, int64_t len, const std::array<int64_t, 3>& st) const {
      call(ctx, o, off, len, st);
    }
  };

  // Calls f once per row. Large outputs are split into blocks of rows evaluated on several threads
  // (every row is written by exactly one call, so f must only write its own row); the results do
  // not depend on the split.
  template <class F>
  void for_each_row(F&& f) const {
    using FD = std::remove_reference_t<F>;
    run_rows(RowFn{const_cast<void*>(static_cast<const void*>(&f)),
               [](void* c, int64_t o, const std::array<int64_t, 3>& off, int64_t len, const std::array<int64_t, 3>& st) {
                 (*static_cast<FD*>(c))(o, off, len, st);
               }});
  }

 private:
  static constexpr int64_t kElementsPerThread = int64_t{1} << 20;  // below this, threads cost more than they save

  void run_rows(RowFn f) const {
    if (numel_ == 0) return;
    std::array<int64_t, 3> zero{0, 0, 0};
    if (sizes_.empty()) { f(int64_t{0}, zero, int64_t{1}, zero); return; }
    const int64_t len = sizes_.back(), rows = numel_ / len;
    const int64_t threads = std::min<int64_t>({static_cast<int64_t>(std::max(1u, std::thread::hardware_concurrency())),
                                               16, numel_ / kElementsPerThread, rows});
    if (threads <= 1) return rows_range(0, rows, f);
    std::vector<std::thread> pool;
    const int64_t per = (rows + threads - 1) / threads;
    for (int64_t b = per; b < rows; b += per) pool.emplace_back([&, b] { rows_range(b, std::min(rows, b + per), f); });
    rows_range(0, std::min(rows, per), f);
    for (std::thread& t : pool) t.join();
  }

  // Rows [first, last) of the output, in order.
  void rows_range(int64_t first, int64_t last, RowFn f) const {
    const size_t r = sizes_.size();
    const int64_t len = sizes_[r - 1];
    const std::array<int64_t, 3>& inner = strides_[r - 1];
    std::array<int64_t, 3> off{0, 0, 0};
    std::vector<int64_t> ctr(r, 0);
    for (size_t d = r - 1, rem = static_cast<size_t>(first); d-- > 0;) {  // row index -> outer counter
      ctr[d] = static_cast<int64_t>(rem % static_cast<size_t>(sizes_[d]));
      rem /= static_cast<size_t>(sizes_[d]);
      for (size_t k = 0; k < n_; ++k) off[k] += ctr[d] * strides_[d][k];
    }
    for (int64_t row = first; row < last; ++row) {
      f(row * len, off, len, inner);
      for (size_t d = r - 1; d-- > 0;) {  // advance the outer counter
        for (size_t k = 0; k < n_; ++k) off[k] += strides_[d][k];
        if (++ctr[d] < sizes_[d]) break;
        for (size_t k = 0; k < n_; ++k) off[k] -= strides_[d][k] * sizes_[d];
        ctr[d] = 0;
      }
    }
  }

  size_t n_;
  int64_t numel_ = 1;
  std::vector<int64_t> sizes_;
  std::vector<std::array<int64_t, 3>> strides_;
};

[[noreturn]] void unsupported(const Node& n, DType t) {
  internal_error(__FILE__, __LINE__,
                 "reference: " + std::string(op_name(n.op)) + " is not defined on " + std::string(dtype_name(t)));
}

// The typed loop: out[i] = store(fn(load(a0[..]), ...)) over the broadcast.
template <DType DR, DType D0, DType D1, int N, class Fn>
void run_loop(Tensor& out, const Tensor* const* args, const Broadcast& bc, Fn fn) {
  using SR = typename St<DR>::S;
  SR* o = out.as<SR>();
  const typename St<D0>::S* a0 = args[0]->as<typename St<D0>::S>();
  const typename St<D1>::S* a1 = N > 1 ? args[1]->as<typename St<D1>::S>() : nullptr;
  const typename St<D1>::S* a2 = N > 2 ? args[2]->as<typename St<D1>::S>() : nullptr;
  bc.for_each_row([&](int64_t oo, const std::array<int64_t, 3>& off, int64_t len, const std::array<int64_t, 3>& st) {
    SR* orow = o + oo;
    if constexpr (N == 1) {
      const auto* p0 = a0 + off[0];
      for (int64_t j = 0; j < len; ++j) orow[j] = St<DR>::store(fn(St<D0>::load(p0[j * st[0]])));
    } else if constexpr (N == 2) {
      const auto* p0 = a0 + off[0];
      const auto* p1 = a1 + off[1];
      for (int64_t j = 0; j < len; ++j)
        orow[j] = St<DR>::store(fn(St<D0>::load(p0[j * st[0]]), St<D1>::load(p1[j * st[1]])));
    } else {
      const auto* p0 = a0 + off[0];
      const auto* p1 = a1 + off[1];
      const auto* p2 = a2 + off[2];
      for (int64_t j = 0; j < len; ++j)
        orow[j] = St<DR>::store(
            fn(St<D0>::load(p0[j * st[0]]), St<D1>::load(p1[j * st[1]]), St<D1>::load(p2[j * st[2]])));
    }
  });
}

void eval_cast(const Node& n, Tensor& out, const Tensor* const* args, const Broadcast& bc) {
  with_dtype(args[0]->dtype, [&](auto d0) {
    constexpr DType D0 = decltype(d0)::value;
    with_dtype(n.dtype, [&](auto dr) {
      constexpr DType DR = decltype(dr)::value;
      auto cvt = [](typename St<D0>::CT v) {
        if constexpr (DR == DType::Bool) return fj_cvt_bool(v);
        else if constexpr (DR == DType::I8) return fj_cvt_i8(v);
        else if constexpr (DR == DType::U8) return fj_cvt_u8(v);
        else if constexpr (DR == DType::I32) return fj_cvt_i32(v);
        else if constexpr (DR == DType::I64) return fj_cvt_i64(v);
        else if constexpr (DR == DType::F16) return fj_cvt_f16(v);
        else if constexpr (DR == DType::BF16) return fj_cvt_bf16(v);
        else if constexpr (DR == DType::F32) return fj_cvt_f32(v);
        else return fj_cvt_f64(v);
      };
      run_loop<DR, D0, D0, 1>(out, args, bc, cvt);
    });
  });
}

// Runs fn over the node with value dtype DV (result bool when to_bool): the typed loop whose
// operand count and argument types fit the node; InternalError if fn has no such overload.
template <DType DV, class Fn>
void run_typed(const Node& n, Tensor& out, const Tensor* const* args, const Broadcast& bc, Fn fn, bool to_bool) {
  using CT = typename St<DV>::CT;
  auto go = [&](auto drt) {
    constexpr DType DR = decltype(drt)::value;
    using RT = typename St<DR>::CT;
    if (n.op == Op::Where) {
      if constexpr (requires { { fn(bool{}, CT{}, CT{}) } -> std::same_as<RT>; })
        return run_loop<DR, DType::Bool, DV, 3>(out, args, bc, fn);
    } else if (n.nargs == 1) {
      if constexpr (requires { { fn(CT{}) } -> std::same_as<RT>; }) return run_loop<DR, DV, DV, 1>(out, args, bc, fn);
    } else if (n.nargs == 2) {
      if constexpr (requires { { fn(CT{}, CT{}) } -> std::same_as<RT>; }) return run_loop<DR, DV, DV, 2>(out, args, bc, fn);
    } else {
      if constexpr (requires { { fn(CT{}, CT{}, CT{}) } -> std::same_as<RT>; })
        return run_loop<DR, DV, DV, 3>(out, args, bc, fn);
    }
    unsupported(n, DV);
  };
  if (to_bool) go(std::integral_constant<DType, DType::Bool>{});
  else go(std::integral_constant<DType, DV>{});
}

void eval_node(const Node& n, Tensor& out, const Tensor* const* args) {
  const std::vector<int64_t>* sp[3] = {nullptr, nullptr, nullptr};
  for (int k = 0; k < n.nargs; ++k) sp[k] = &args[k]->shape;
  Broadcast bc(out.shape, std::span<const std::vector<int64_t>* const>(sp, n.nargs));
  if (n.op == Op::Cast) return eval_cast(n, out, args, bc);

  const OpInfo& info = op_info(n.op);
  const bool to_bool = info.rule == TypeRule::Compare || info.rule == TypeRule::Logical || info.rule == TypeRule::Pred;
  const int vi = n.op == Op::Where ? 1 : 0;  // the operand whose dtype is the value dtype
  const DType dv = args[vi]->dtype;
  FJ_CHECK(n.dtype == (to_bool ? DType::Bool : dv),
           "reference: node dtype does not follow its operands for " + std::string(info.name));
  for (int k = 0; k < n.nargs; ++k)
    if (k != 0 || n.op != Op::Where)
      FJ_CHECK(args[k]->dtype == dv, "reference: operand dtypes differ for " + std::string(info.name));
  if (n.op == Op::Where) FJ_CHECK(args[0]->dtype == DType::Bool, "reference: where condition is not bool");

  with_op_fns(n.op, [&](auto fns) {
    with_dtype(dv, [&](auto dvt) {
      constexpr DType DV = decltype(dvt)::value;
      if constexpr (DV == DType::F16 || DV == DType::BF16) {
        if (info.half == HalfForm::Storage) {
          // The op on 16-bit storage values; operands are exact half values, so the conversions
          // around it are exact.
          auto& hfn = [&]() -> auto& { if constexpr (DV == DType::F16) return fns.f16; else return fns.bf16; }();
          auto on_storage = [&hfn](auto... v) -> decltype(fj_load(hfn(St<DV>::store(v)...))) {
            return fj_load(hfn(St<DV>::store(v)...));
          };
          return run_typed<DV>(n, out, args, bc, on_storage, false);
        }
      }
      run_typed<DV>(n, out, args, bc, fns.fn, to_bool);
    });
  });
}

void check_storage(const Tensor& t, const std::string& what) {
  int64_t n = checked_numel(t.shape);
  if (n < 0 || static_cast<uint64_t>(n) * static_cast<uint64_t>(dtype_size(t.dtype)) != t.data.size())
    throw UserError(what + ": storage of " + std::to_string(t.data.size()) + " bytes does not match its type " +
                    tensor_type_string(t.dtype, t.shape));
}

// The inputs and params match the graph's (count, dtype, shape, storage size): a UserError otherwise.
void check_arguments(const Graph& g, std::span<const Tensor> inputs, std::span<const Scalar> params) {
  const std::string graph = "graph" + (g.name.empty() ? std::string() : " '" + g.name + "'");
  if (inputs.size() != g.inputs.size())
    throw UserError(graph + " has " + std::to_string(g.inputs.size()) + " input(s), got " + std::to_string(inputs.size()));
  if (!params.empty() && params.size() != g.params.size())
    throw UserError(graph + " has " + std::to_string(g.params.size()) + " param(s), got " + std::to_string(params.size()));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Node& in = g.node(g.inputs[k]);
    std::vector<int64_t> want = shape_sizes(in.shape);
    const Tensor& t = inputs[k];
    if (t.dtype != in.dtype || t.shape != want)
      throw UserError("input '" + in.name + "': expected " + tensor_type_string(in.dtype, want) + ", found " +
                      tensor_type_string(t.dtype, t.shape));
    check_storage(t, "input '" + in.name + "'");
  }
  for (size_t k = 0; k < params.size(); ++k) {
    const Node& p = g.node(g.params[k].node);
    if (params[k].dtype != p.dtype)
      throw UserError("param '" + p.name + "': expected a " + std::string(dtype_name(p.dtype)) + " value, found " +
                      std::string(dtype_name(params[k].dtype)));
  }
}

// A param's or constant's value as a 0-d tensor (a param: its value given, else its default).
Tensor leaf_value(const Graph& g, const Node& nd, std::span<const Scalar> params) {
  const Scalar v = nd.op == Op::Const ? nd.value
                   : params.empty()   ? g.params[static_cast<size_t>(nd.slot)].default_value
                                      : params[static_cast<size_t>(nd.slot)];
  Tensor t(nd.dtype, shape_sizes(nd.shape));
  for (int64_t e = 0; e < t.numel(); ++e) t.set(e, v);
  return t;
}

// Node values in graph order, each operand freed after its last use unless it is an output. Nodes
// no output depends on are not computed (as no plan computes them: a dead `x * y` of 10^10
// elements beside a small output would need that much memory).
class Evaluation {
 public:
  Evaluation(const Graph& g, std::span<const Tensor> inputs, std::span<const Scalar> params)
      : g_(g), inputs_(inputs), params_(params), n_(g.nodes.size()), live_(n_, 0), last_use_(n_, -1),
        out_uses_(n_, 0), owned_(n_), val_(n_, nullptr) {
    for (const OutputDecl& o : g.outputs) out_uses_[static_cast<size_t>(o.node)]++, live_[static_cast<size_t>(o.node)] = 1;
    for (size_t i = n_; i-- > 0;)
      if (live_[i])
        for (int k = 0; k < g.nodes[i].nargs; ++k) live_[static_cast<size_t>(g.nodes[i].args[k])] = 1;
    for (size_t i = 0; i < n_; ++i)
      if (live_[i])
        for (int k = 0; k < g.nodes[i].nargs; ++k) last_use_[static_cast<size_t>(g.nodes[i].args[k])] = static_cast<int64_t>(i);
  }

  std::vector<Tensor> run() {
    for (size_t i = 0; i < n_; ++i)
      if (live_[i]) evaluate(i);
    std::vector<Tensor> result;
    result.reserve(g_.outputs.size());
    for (const OutputDecl& o : g_.outputs) {
      const size_t id = static_cast<size_t>(o.node);
      if (g_.nodes[id].op != Op::Input && --out_uses_[id] == 0) result.push_back(std::move(owned_[id]));
      else result.push_back(*val_[id]);
    }
    return result;
  }

 private:
  void evaluate(size_t i) {
    const Node& nd = g_.nodes[i];
    if (nd.op == Op::Input) {
      val_[i] = &inputs_[static_cast<size_t>(nd.slot)];
      return;
    }
    if (nd.op == Op::Param || nd.op == Op::Const) {
      owned_[i] = leaf_value(g_, nd, params_);
      val_[i] = &owned_[i];
      return;
    }
    const Tensor* args[3] = {nullptr, nullptr, nullptr};
    for (int k = 0; k < nd.nargs; ++k) {
      args[k] = val_[static_cast<size_t>(nd.args[k])];
      FJ_CHECK(args[k] != nullptr, "reference: operand used after it was freed");
    }
    if (is_reduction(nd.op)) {
      owned_[i] = eval_reduction(nd, *args[0]);
    } else {
      owned_[i] = Tensor(nd.dtype, shape_sizes(nd.shape));
      eval_node(nd, owned_[i], args);
    }
    val_[i] = &owned_[i];
    free_operands(i);
  }

  // Frees the operands whose last use node i was (outputs are kept).
  void free_operands(size_t i) {
    const Node& nd = g_.nodes[i];
    for (int k = 0; k < nd.nargs; ++k) {
      const size_t a = static_cast<size_t>(nd.args[k]);
      if (last_use_[a] == static_cast<int64_t>(i) && out_uses_[a] == 0 && g_.nodes[a].op != Op::Input) {
        owned_[a] = Tensor();
        owned_[a].data.shrink_to_fit();
        val_[a] = nullptr;
      }
    }
  }

  const Graph& g_;
  std::span<const Tensor> inputs_;
  std::span<const Scalar> params_;
  size_t n_;
  std::vector<char> live_;  // some output depends on it
  std::vector<int64_t> last_use_, out_uses_;
  std::vector<Tensor> owned_;
  std::vector<const Tensor*> val_;
};

}  // namespace

std::vector<Tensor> evaluate_reference(const Graph& g, std::span<const Tensor> inputs, std::span<const Scalar> params) {
  check_arguments(g, inputs, params);
  return Evaluation(g, inputs, params).run();
}

}  // namespace fusejit::ir
