#include "ir/printer.h"

#include "ir/reduce.h"

#include "ir/builder.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/names.h"

namespace fusejit::ir {
namespace {

std::string shortest(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string float_text(double v, DType dt) {
  if (std::isnan(v)) return std::signbit(v) ? "-nan" : "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  std::string s = shortest(v);
  if (dt == DType::F32) {
    // The shortest f32 text is nicer (0.1, not 0.10000000149011612); keep it only if reading it
    // as f64 and rounding to f32 (what the builder does with a weak literal) gives v back.
    float f = static_cast<float>(v);
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, f);
    std::string fs(buf, r.ptr);
    double back = 0;
    std::from_chars(fs.data(), fs.data() + fs.size(), back);
    if (static_cast<double>(static_cast<float>(back)) == v) s = fs;
  }
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

struct Printer {
  const Graph& g;
  std::vector<std::string> names;   // printed name per node ("" for inlined constants)
  std::vector<int> uses;            // operand uses + output uses per node
  std::vector<char> inlined;        // Const printed inline in its single user
  std::unordered_set<std::string> taken;

  explicit Printer(const Graph& graph)
      : g(graph), names(graph.nodes.size()), uses(graph.nodes.size()), inlined(graph.nodes.size()) {}

  // Can the Const operands of node j be written as literals? All-or-nothing per node: the
  // candidates must be exactly the nodes just before j in operand order (the builder creates
  // literal constants there), and weak typing must give each its own dtype back.
  void plan_inlining(NodeId j) {
    const Node& n = g.node(j);
    if (is_leaf(n.op) || n.op == Op::Cast) return;
    const OpInfo& info = op_info(n.op);
    std::vector<int> cand;
    for (int k = 0; k < n.nargs; ++k) {
      const Node& a = g.node(n.args[k]);
      if (a.op == Op::Const && a.name.empty() && uses[n.args[k]] == 1) cand.push_back(k);
    }
    if (cand.empty() || static_cast<int>(cand.size()) == n.nargs) return;  // need a strong operand
    // A literal exponent of 2, 0.5 or -1 builds mul, sqrt or reciprocal (GraphBuilder::scalar_pow):
    // such a typed constant exponent of a pow stays `cast(2.0, f32)`.
    if (n.op == Op::Pow && is_float(n.dtype) && cand.back() == 1) {
      const Scalar& c = g.node(n.args[1]).value;
      const double v = is_float(c.dtype) ? c.f : static_cast<double>(c.i);
      if (v == 2.0 || v == 0.5 || v == -1.0) return;
    }
    for (size_t c = 0; c < cand.size(); ++c)
      if (n.args[cand[c]] != j - static_cast<NodeId>(cand.size() - c)) return;
    // Re-run the builder's typing (ir::result_type) with the candidates weak.
    auto is_cand = [&](int k) { return std::find(cand.begin(), cand.end(), k) != cand.end(); };
    std::vector<TypedOperand> typed;
    for (int k = info.rule == TypeRule::Where ? 1 : 0; k < n.nargs; ++k) {
      const Node& a = g.node(n.args[k]);
      if (is_cand(k)) typed.push_back({default_dtype(dtype_category(a.dtype)), Tier::Weak});
      else typed.push_back({a.dtype, a.shape.empty() ? Tier::ZeroDim : Tier::Dimensioned});
    }
    if (typed.empty()) return;
    const DType operand = rule_dtypes(info.rule, result_type(typed)).operand;
    for (int k : cand) {
      DType want = (info.rule == TypeRule::Where && k == 0) ? DType::Bool : operand;
      if (g.node(n.args[k]).dtype != want) return;
    }
    // Strong operands must already have the operand dtype, or the builder would add casts.
    for (int k = 0; k < n.nargs; ++k) {
      if (is_cand(k) || info.rule == TypeRule::Pred) continue;
      DType want = (info.rule == TypeRule::Where && k == 0) ? DType::Bool : operand;
      if (g.node(n.args[k]).dtype != want) return;
    }
    for (int k : cand) inlined[n.args[k]] = 1;
  }

  // Unnamed nodes print as anonymous temporaries %<id>, which the parser binds without naming
  // the node (so the round trip keeps them unnamed); they cannot collide with user names.
  std::string fresh(NodeId id) {
    std::string s(1, '%');
    s += std::to_string(id);
    return s;
  }

  std::string operand(NodeId id) const {
    return inlined[id] ? print_scalar(g.node(id).value) : names[id];
  }

  // The statement that defines node `id`. Leaves and casts have their own syntax; every other op
  // prints in its infix form (ir/ops.def) if it has one, else as a call.
  std::string line(NodeId id) const {
    const Node& n = g.node(id);
    const std::string dt(dtype_name(n.dtype));
    if (n.op == Op::Input) {
      std::string s = "input " + names[id] + " : " + dt + "[";
      for (size_t k = 0; k < n.shape.size(); ++k) {
        if (k) s += ", ";
        const Dim& d = n.shape[k];
        s += d.sym >= 0 ? g.dims[d.sym].name : std::to_string(d.size);
      }
      s += "]";
      if (const ValueRange& r = g.input_ranges[static_cast<size_t>(n.slot)]; r.set())
        s += " range " + print_scalar(Scalar{DType::F64, r.lo, 0}) + ":" + print_scalar(Scalar{DType::F64, r.hi, 0});
      return s + "\n";
    }
    if (n.op == Op::Param) return "param " + names[id] + " : " + dt + " = " + print_scalar(g.params[n.slot].default_value) + "\n";
    if (n.op == Op::Const) return names[id] + " = cast(" + print_scalar(n.value) + ", " + dt + ")\n";
    if (n.op == Op::Cast) return names[id] + " = cast(" + operand(n.args[0]) + ", " + dt + ")\n";
    const std::string_view sym = op_info(n.op).infix;
    if (!sym.empty()) return names[id] + " = " + operand(n.args[0]) + " " + std::string(sym) + " " + operand(n.args[1]) + "\n";
    std::string s = names[id] + " = " + std::string(op_name(n.op)) + "(";
    for (int k = 0; k < n.nargs; ++k) s += (k ? ", " : "") + operand(n.args[k]);
    if (is_reduction(n.op)) s += reduce_args_text(n.op, n.red, g.node(n.args[0]).shape.size());
    return s + ")\n";
  }

  std::string run() {
    for (const Node& n : g.nodes)
      for (int k = 0; k < n.nargs; ++k) ++uses[n.args[k]];
    for (const OutputDecl& o : g.outputs) ++uses[o.node];
    for (NodeId j = 0; j < g.size(); ++j) plan_inlining(j);

    // Keep user names that are valid and unique; everything else gets a temporary.
    for (const DimDecl& d : g.dims) taken.insert(d.name);
    // An output name that belongs to another node's output alias cannot also name a node.
    std::unordered_map<std::string, NodeId> output_of;
    for (const OutputDecl& o : g.outputs) output_of.emplace(o.name, o.node);
    for (NodeId id = 0; id < g.size(); ++id) {
      const std::string& nm = g.node(id).name;
      auto out = output_of.find(nm);
      if (out != output_of.end() && out->second != id) continue;
      if (!inlined[id] && is_identifier(nm) && !is_reserved(nm) && !taken.count(nm)) {
        names[id] = nm;
        taken.insert(nm);
      }
    }
    for (const OutputDecl& o : g.outputs) taken.insert(o.name);
    for (NodeId id = 0; id < g.size(); ++id)
      if (!inlined[id] && names[id].empty()) names[id] = fresh(id);

    std::string out;
    if (!g.name.empty()) out += "graph " + g.name + "\n";
    for (const DimDecl& d : g.dims) out += "dim " + d.name + " = " + std::to_string(d.value) + "\n";
    for (NodeId id = 0; id < g.size(); ++id)
      if (!inlined[id]) out += line(id);
    // Outputs: an output named differently from its node goes through an alias line. One that
    // rewrites made an input or a param prints as a same-dtype cast, since the parser refuses an
    // output naming an input; strict rewrites remove the cast again (cast-same).
    std::string outputs;
    for (const OutputDecl& o : g.outputs) {
      const Node& n = g.node(o.node);
      if (n.op == Op::Input || n.op == Op::Param)
        out += o.name + " = cast(" + names[o.node] + ", " + std::string(dtype_name(n.dtype)) + ")  # output " +
               o.name + " is " + (n.op == Op::Input ? "input " : "param ") + names[o.node] + "\n";
      else if (o.name != names[o.node])
        out += o.name + " = " + names[o.node] + "\n";
    }
    for (const OutputDecl& o : g.outputs) outputs += (outputs.empty() ? "output " : ", ") + o.name;
    out += outputs + "\n";
    return out;
  }
};

}  // namespace

std::string print_scalar(const Scalar& s) {
  if (s.dtype == DType::Bool) return s.i ? "true" : "false";
  if (is_int(s.dtype)) return std::to_string(s.i);
  return float_text(s.f, s.dtype);
}

std::string print_graph(const Graph& g) { return Printer(g).run(); }

}  // namespace fusejit::ir
