// fusejit::GraphBuilder: the public builder, a thin layer over ir::GraphBuilder.
#include <unordered_map>

#include "ir/builder.h"
#include "lib/internal.h"

namespace fusejit {

struct GraphBuilder::Impl {
  ir::GraphBuilder b;
  explicit Impl(std::string name) : b(std::move(name)) {}
};

namespace {
ir::Operand operand_of(const Value& v, int32_t node) {
  (void)v;
  return ir::Operand::of(node);
}


ir::Op op_by_name(std::string_view name) {
  auto op = ir::parse_op(name);
  if (!op || *op == ir::Op::Cast)
    throw ir::UserError("unknown op '" + std::string(name) + "'" + (op ? " (use GraphBuilder::cast)" : ""));
  return *op;
}
}  // namespace

GraphBuilder::GraphBuilder(std::string graph_name) : impl_(std::make_unique<Impl>(std::move(graph_name))) {}
GraphBuilder::~GraphBuilder() = default;

int32_t GraphBuilder::node_of(const Value& v) {
  if (v.owner_ != this) throw Error(ErrorKind::User, "value belongs to another GraphBuilder");
  return v.id_;
}

DimRef GraphBuilder::dim(const std::string& name, int64_t value) {
  return translate_errors([&] { return DimRef{impl_->b.add_dim(name, value)}; });
}

Value GraphBuilder::input(const std::string& name, DType dtype, const std::vector<Extent>& shape) {
  return translate_errors([&] {
    ir::Shape s;
    for (const Extent& e : shape) {
      if (e.dim >= static_cast<int32_t>(impl_->b.graph().dims.size()))
        throw ir::UserError("input '" + name + "' uses a dim of another builder");
      s.push_back(ir::Dim{e.dim >= 0 ? 0 : e.size, e.dim});
    }
    return Value(this, impl_->b.add_input(name, to_ir(dtype), s));
  });
}

Value GraphBuilder::param(const std::string& name, DType dtype, Scalar default_value) {
  return translate_errors(
      [&] { return Value(this, impl_->b.add_param(name, to_ir(dtype), to_ir_literal(default_value))); });
}

Value GraphBuilder::op(std::string_view name, std::initializer_list<Value> args) {
  return op(name, std::vector<Value>(args));
}

Value GraphBuilder::op(std::string_view name, const std::vector<Value>& args) {
  return translate_errors([&] {
    ir::Op op = op_by_name(name);
    std::vector<ir::Operand> ops;
    for (const Value& v : args)
      ops.push_back(v.is_literal() ? ir::Operand::of(to_ir_literal(v.lit_)) : operand_of(v, node_of(v)));
    ir::Operand r = impl_->b.apply(op, ops);
    return Value(this, impl_->b.materialize(r));
  });
}

Value GraphBuilder::cast(const Value& x, DType dtype) {
  return translate_errors([&] {
    ir::Operand in = x.is_literal() ? ir::Operand::of(to_ir_literal(x.lit_)) : ir::Operand::of(node_of(x));
    return Value(this, impl_->b.materialize(impl_->b.cast(in, to_ir(dtype))));
  });
}

void GraphBuilder::name(const Value& v, const std::string& name) {
  translate_errors([&] { impl_->b.set_node_name(node_of(v), name); });
}

void GraphBuilder::output(const std::string& name, const Value& v) {
  translate_errors([&] {
    ir::Operand o = v.is_literal() ? ir::Operand::of(to_ir_literal(v.lit_)) : ir::Operand::of(node_of(v));
    impl_->b.add_output(name, o);
  });
}

Graph GraphBuilder::build() {
  return translate_errors([&] {
    auto impl = std::make_shared<Graph::Impl>();
    impl->graph = impl_->b.finish();
    return Graph(std::move(impl));
  });
}

Value binary(std::string_view op, const Value& a, const Value& b) {
  GraphBuilder* owner = a.owner_ ? a.owner_ : b.owner_;
  if (!owner) throw Error(ErrorKind::User, "binary op on two literals: at least one operand must be a graph value");
  if (a.owner_ && b.owner_ && a.owner_ != b.owner_)
    throw Error(ErrorKind::User, "operands belong to different GraphBuilders");
  return owner->op(op, {a, b});
}

}  // namespace fusejit
