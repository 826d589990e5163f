// fusejit::GraphBuilder: the public builder, a thin layer over ir::GraphBuilder. It checks what the
// parser checks in graph text (names by ir/names.h, one namespace, outputs computed by the graph),
// so every graph it builds prints as text that parses back to the same graph.
#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/names.h"
#include "ir/reduce.h"
#include "lib/internal.h"

namespace fusejit {

struct GraphBuilder::Impl {
  ir::GraphBuilder b;
  std::unordered_map<std::string, ir::NameBinding> scope;  // dims, inputs, params, named values
  std::unordered_set<std::string> outputs;
  std::set<std::string> may_be_unused;  // inputs build() does not warn of (allow_unused)
  ir::Loc loc;  // set_location's, for the nodes the next calls add (in the graph's file)
  bool built = false;
  explicit Impl(std::string name) : b(std::move(name)) { b.limit_nodes(); }

  // Binds a new name by the parser's rules (ir::check_new_name) once `add` has succeeded, so a
  // refused call leaves the builder as it was.
  template <class F>
  auto define(const std::string& name, ir::NameKind kind, F&& add) {
    auto it = scope.find(name);
    ir::check_new_name(name, it == scope.end() ? nullptr : &it->second, {});
    auto r = add();
    scope.emplace(name, ir::NameBinding{kind, 0});
    return r;
  }
  void check_usable() const {
    if (built)
      throw Error(ErrorKind::User,
                  "this GraphBuilder has already built its graph; build() ends it (start a new GraphBuilder)");
  }
  const ir::Node& node(int32_t id) const { return b.graph().node(id); }
  // Runs a call that adds nodes; if it throws, the nodes it added (a literal's constant, a cast)
  // go again, so a refused call leaves the graph as it was.
  template <class F>
  auto adding_nodes(F&& f) {
    const int before = b.graph().size();
    try {
      auto r = f();
      if (loc.known()) b.locate_nodes_after(before, loc);
      return r;
    } catch (...) {
      b.drop_nodes_after(before);
      throw;
    }
  }
};

namespace {

constexpr const char* kEmptyValue = "an empty Value (default-constructed, nothing assigned to it) has no dtype or shape: "
                                    "assign it a value of this builder first";

// translate_errors around a call that adds nodes, which go again if it throws.
template <class F>
auto adding_nodes(GraphBuilder::Impl& impl, F&& f) {
  return translate_errors([&] { return impl.adding_nodes(f); });
}

ir::Op op_by_name(std::string_view name) {
  if (ir::is_composite_name(name) || (ir::parse_op(name) && ir::is_reduction(*ir::parse_op(name))))
    throw ir::UserError("'" + std::string(name) + "' is a reduction" + (ir::is_composite_name(name) ? " composite" : "") +
                        ": build it with the builder's reduce(\"" + std::string(name) + "\", x, axes)");
  auto op = ir::parse_op(name);
  if (!op) throw ir::UserError(ir::unknown_op_message(name));
  if (*op == ir::Op::Cast) throw ir::UserError("op 'cast' takes a dtype: build it with the builder's cast(x, dtype)");
  return *op;
}

}  // namespace

namespace {

// The builders alive, address -> serial: a Value of a destroyed builder (a new one may have taken
// its address, as one on the stack does) is refused instead of read through a dangling pointer.
struct LiveBuilders {
  std::mutex mu;
  std::unordered_map<const GraphBuilder*, uint64_t> serials;
  uint64_t next = 1;
};
LiveBuilders& live_builders() {
  static LiveBuilders* live = new LiveBuilders;  // never destroyed: builders may outlive static destruction
  return *live;
}
constexpr const char* kDeadBuilder =
    "a value of a GraphBuilder that no longer exists: values must not outlive their builder "
    "(build the graph while its builder is alive, or keep the Graph that build() returns)";

// A folded literal as a literal Value (weak, of its category).
Value literal_value(const ir::Literal& l) {
  switch (l.cat) {
    case ir::Category::Bool: return Value(l.i != 0);
    case ir::Category::Int: return Value(l.i);
    case ir::Category::Float: break;
  }
  return Value(l.f);
}

}  // namespace

GraphBuilder::GraphBuilder(std::string graph_name) {
  translate_errors([&] { ir::check_graph_name(graph_name); });
  impl_ = std::make_unique<Impl>(std::move(graph_name));
  LiveBuilders& live = live_builders();
  std::lock_guard lock(live.mu);
  serial_ = live.next++;
  live.serials[this] = serial_;
}
GraphBuilder::~GraphBuilder() {
  LiveBuilders& live = live_builders();
  std::lock_guard lock(live.mu);
  live.serials.erase(this);
}

GraphBuilder* GraphBuilder::owner_of(const Value& v) {
  if (!v.owner_) return nullptr;
  LiveBuilders& live = live_builders();
  std::lock_guard lock(live.mu);
  const auto it = live.serials.find(v.owner_);
  if (it == live.serials.end() || it->second != v.serial_) throw Error(ErrorKind::User, kDeadBuilder);
  return v.owner_;
}

int32_t GraphBuilder::node_of(const Value& v) {
  impl_->check_usable();
  if (v.empty_) throw Error(ErrorKind::User, kEmptyValue);
  if (v.owner_ != this || v.serial_ != serial_) {
    owner_of(v);  // throws kDeadBuilder for a value of a builder gone (at this address or another)
    throw Error(ErrorKind::User, "value belongs to another GraphBuilder");
  }
  if (v.id_ < 0 || v.id_ >= impl_->b.graph().size())
    throw Error(ErrorKind::User, "value does not belong to this GraphBuilder's graph");
  return v.id_;
}

DimRef GraphBuilder::dim(const std::string& name, int64_t value) {
  impl_->check_usable();
  return translate_errors([&] {
    return impl_->define(name, ir::NameKind::Dim, [&] { return DimRef{impl_->b.add_dim(name, value), impl_.get(), serial_}; });
  });
}

Value GraphBuilder::input(const std::string& name, DType dtype, const std::vector<Extent>& shape) {
  impl_->check_usable();
  check_dtype(dtype, "input '" + name + "'");
  return translate_errors([&] {
    ir::Shape s;
    for (const Extent& e : shape) {
      const bool ours = e.builder == impl_.get() && e.serial == serial_;  // an address alone may be a new builder's
      if (e.named && (!ours || e.dim < 0 || e.dim >= static_cast<int32_t>(impl_->b.graph().dims.size())))
        throw ir::UserError(fmt::format("input '{}': extent {} of its shape is a DimRef this builder's dim() did not "
                                        "return (a default DimRef, or one of another builder, alive or not)",
                                        name, s.size()));
      s.push_back(ir::Dim{e.named ? 0 : e.size, e.named ? e.dim : -1});
    }
    return impl_->define(name, ir::NameKind::Input, [&] { return Value(this, serial_, impl_->b.add_input(name, to_ir(dtype), s)); });
  });
}

Value GraphBuilder::param(const std::string& name, DType dtype, Scalar default_value) {
  impl_->check_usable();
  check_dtype(dtype, "param '" + name + "'");
  return translate_errors([&] {
    return impl_->define(name, ir::NameKind::Param, [&] {
      return Value(this, serial_, impl_->b.add_param(name, to_ir(dtype), to_ir_literal(default_value)));
    });
  });
}

Value GraphBuilder::op(std::string_view name, std::initializer_list<Value> args) {
  return op(name, std::vector<Value>(args));
}

Value GraphBuilder::op(std::string_view name, const std::vector<Value>& args) {
  impl_->check_usable();
  for (size_t k = 0; k < args.size(); ++k)
    if (args[k].empty_) throw Error(ErrorKind::User, fmt::format("{}: operand {}: {}", name, k, kEmptyValue));
  return adding_nodes(*impl_, [&] {
    ir::Op op = op_by_name(name);
    std::vector<ir::Operand> ops;
    for (const Value& v : args)
      ops.push_back(v.is_literal() ? ir::Operand::of(to_ir_literal(v.lit_)) : ir::Operand::of(node_of(v)));
    ir::Operand r = impl_->b.apply(op, ops);
    if (r.is_literal()) return literal_value(r.lit);  // folded, and weak, as in graph text
    return Value(this, serial_, impl_->b.materialize(r));
  });
}

Value GraphBuilder::reduce(std::string_view name, const Value& x, const Axes& axes, Keepdim keepdim,
                           Correction correction, std::optional<double> initial) {
  impl_->check_usable();
  return adding_nodes(*impl_, [&] {
    if (!ir::is_reduce_name(name)) {
      const std::optional<ir::Op> op = ir::parse_op(name);
      throw ir::UserError(op ? "op '" + std::string(name) + "' is no reduction: build it with the builder's op(\"" +
                                   std::string(name) + "\", ...)"
                             : ir::unknown_op_message(name));
    }
    const ir::Operand in = x.is_literal() ? ir::Operand::of(to_ir_literal(x.lit_)) : ir::Operand::of(node_of(x));
    const ir::Operand r = impl_->b.reduce_by_name(name, in, {axes.list, keepdim.value, correction.value, initial, {}, {}});
    return Value(this, serial_, impl_->b.materialize(r));
  });
}

Value GraphBuilder::cast(const Value& x, DType dtype) {
  impl_->check_usable();
  check_dtype(dtype, "cast");
  return adding_nodes(*impl_, [&] {
    ir::Operand in = x.is_literal() ? ir::Operand::of(to_ir_literal(x.lit_)) : ir::Operand::of(node_of(x));
    return Value(this, serial_, impl_->b.materialize(impl_->b.cast(in, to_ir(dtype))));
  });
}

void GraphBuilder::name(const Value& v, const std::string& name) {
  impl_->check_usable();
  translate_errors([&] {
    if (v.is_literal())
      throw ir::UserError("cannot name '" + name + "' a literal: name the value an op returns");
    const ir::Node& n = impl_->node(node_of(v));
    // In graph text `b = a` only aliases a named value; a value has one name.
    if (n.op == ir::Op::Input || n.op == ir::Op::Param)
      throw ir::UserError("cannot name " + std::string(n.op == ir::Op::Input ? "input '" : "param '") + n.name +
                          "' '" + name + "': inputs and params keep their declared names");
    if (!n.name.empty())
      throw ir::UserError("cannot name the value '" + n.name + "' '" + name + "': a value is named once");
    impl_->define(name, ir::NameKind::Value, [&] {
      impl_->b.set_node_name(v.id_, name);
      return 0;
    });
  });
}

bool GraphBuilder::built() const noexcept { return impl_->built; }

TensorInfo GraphBuilder::info(const Value& v) {
  impl_->check_usable();
  if (v.is_literal())
    throw Error(ErrorKind::User, "a literal has no dtype or shape of its own: the op it meets gives it one");
  const int32_t id = node_of(v);
  return tensor_info(impl_->b.graph(), id, impl_->node(id).name);
}

void GraphBuilder::output(const std::string& name, const Value& v) {
  impl_->check_usable();
  translate_errors([&] {
    if (impl_->outputs.count(name)) throw ir::UserError("output '" + name + "' is listed twice");
    ir::Operand o = v.is_literal() ? ir::Operand::of(to_ir_literal(v.lit_)) : ir::Operand::of(node_of(v));
    if (o.is_literal()) {
      // As in graph text (`c = 2` then `output c`): a constant node that carries the output's name.
      o = ir::Operand::of(impl_->define(name, ir::NameKind::Value, [&] {
        ir::NodeId id = impl_->b.materialize(o);
        impl_->b.set_node_name(id, name);
        return id;
      }));
    } else {
      const ir::Node& n = impl_->node(o.node);
      if (n.op == ir::Op::Input || n.op == ir::Op::Param)
        throw ir::UserError("output '" + name + "' names " + (n.op == ir::Op::Input ? "input" : "param") + " '" +
                            n.name + "'; an output must be computed by the graph");
      // An unnamed value takes the output's name (text: `name = <expr>`, then `output name`); a
      // value named otherwise gets `name` as a new binding (the printed text says `name = value`).
      if (n.name.empty()) {
        impl_->define(name, ir::NameKind::Value, [&] {
          impl_->b.set_node_name(o.node, name);
          return 0;
        });
      } else if (n.name != name) {
        impl_->define(name, ir::NameKind::Value, [] { return 0; });
      }
    }
    impl_->b.add_output(name, o);
    impl_->outputs.insert(name);
  });
}

void GraphBuilder::allow_unused(const Value& input) {
  impl_->check_usable();
  translate_errors([&] {
    const ir::Graph& g = impl_->b.graph();
    if (!input.empty_ && input.serial_ != serial_) owner_of(input);  // a builder gone (at this address too)
    if (input.owner_ != this || input.serial_ != serial_ || input.id_ < 0 ||
        input.id_ >= static_cast<int32_t>(g.nodes.size()) || g.node(input.id_).op != ir::Op::Input)
      throw ir::UserError("allow_unused: the value is no input of this GraphBuilder");
    impl_->may_be_unused.insert(g.node(input.id_).name);
  });
}

void GraphBuilder::set_location(const std::string& file, int line, int column) {
  impl_->check_usable();
  if (line < 0 || column < 0)
    throw Error(ErrorKind::User, fmt::format("set_location: a line and a column count from 1 (0: unknown), not "
                                             "line {} column {}", line, column));
  if (file.find('\0') != std::string::npos)  // as every path fusejit takes (docs/api.md)
    throw Error(ErrorKind::User, "set_location: the file name '" + file + "' holds a NUL byte");
  const std::string& graph_file = impl_->b.graph().file;
  if (graph_file.empty() && !file.empty() && line > 0) impl_->b.set_traced_file(file);
  const bool ours = !file.empty() && file == impl_->b.graph().file && line > 0;
  impl_->loc = ours ? ir::Loc{static_cast<uint32_t>(line), static_cast<uint32_t>(column)} : ir::Loc{};
}

Graph GraphBuilder::build() {
  impl_->check_usable();
  return translate_errors([&] {
    auto impl = std::make_shared<Graph::Impl>();
    impl->graph = impl_->b.finish();
    impl_->built = true;
    warn_about_graph(impl->graph, impl_->may_be_unused);
    return Graph(std::move(impl));
  });
}

Value binary(std::string_view op, const Value& a, const Value& b) {
  if (a.empty_ || b.empty_) throw Error(ErrorKind::User, fmt::format("{}: {}", op, kEmptyValue));
  GraphBuilder* const a_owner = GraphBuilder::owner_of(a);
  GraphBuilder* const b_owner = GraphBuilder::owner_of(b);
  GraphBuilder* owner = a_owner ? a_owner : b_owner;
  if (!owner) throw Error(ErrorKind::User, "binary op on two literals: at least one operand must be a graph value");
  if (a_owner && b_owner && a_owner != b_owner)
    throw Error(ErrorKind::User, "operands belong to different GraphBuilders");
  return owner->op(op, {a, b});
}

Value unary(std::string_view op, const Value& a) {
  if (a.empty_) throw Error(ErrorKind::User, fmt::format("{}: {}", op, kEmptyValue));
  GraphBuilder* const owner = GraphBuilder::owner_of(a);
  if (!owner) throw Error(ErrorKind::User, fmt::format("{} of a literal: the operand must be a graph value", op));
  return owner->op(op, {a});
}

}  // namespace fusejit
