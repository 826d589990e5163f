// fusejit::Graph: parse, load, inspect, print.
#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/eval.h"
#include "ir/names.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reduce.h"
#include "lib/internal.h"

namespace fusejit {

std::string_view version() { return "0.1.0"; }

std::string_view dtype_name(DType t) {
  if (!valid_dtype(t)) check_dtype(t, "dtype_name");
  return ir::dtype_name(to_ir(t));
}

void check_plan_kind(PlanKind kind) {
  if (kind != PlanKind::Fused && kind != PlanKind::Unfused)
    throw ir::UserError("invalid PlanKind value " + std::to_string(static_cast<unsigned>(kind)) + " (Fused or Unfused)");
}

void check_dtype(DType t, const std::string& what) {
  if (!valid_dtype(t))
    throw Error(ErrorKind::User, what + ": invalid DType value " + std::to_string(static_cast<unsigned>(t)) +
                                     " (not one of DType's enumerators)");
}

DType parse_dtype(std::string_view name) {
  if (const std::optional<ir::DType> t = ir::parse_dtype(name)) return from_ir(*t);
  throw Error(ErrorKind::User, ir::unknown_dtype_message(name));
}
std::size_t dtype_size(DType t) {
  if (!valid_dtype(t)) check_dtype(t, "dtype_size");
  return static_cast<std::size_t>(ir::dtype_size(to_ir(t)));
}

OpKind op_kind(std::string_view name) noexcept {
  if (ir::is_reduce_name(name)) return OpKind::Reduction;
  if (name == "cast") return OpKind::Elementwise;
  const std::optional<ir::Op> op = ir::parse_op(name);
  return op && !ir::is_leaf(*op) ? OpKind::Elementwise : OpKind::Unknown;
}

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
int64_t TensorInfo::bytes() const { return elements() * static_cast<int64_t>(dtype_size(dtype)); }

ir::Literal to_ir_literal(const Scalar& s) {
  if (s.kind != Scalar::Kind::Float && s.kind != Scalar::Kind::Int && s.kind != Scalar::Kind::Bool)
    throw ir::UserError(fmt::format("a Scalar of kind {} (Scalar::Kind is Bool, Int or Float: 0 to 2)",
                                    static_cast<int>(s.kind)));
  ir::Literal l;
  l.cat = s.kind == Scalar::Kind::Float ? ir::Category::Float
          : s.kind == Scalar::Kind::Int ? ir::Category::Int
                                        : ir::Category::Bool;
  l.f = s.f;
  l.i = s.i;
  return l;
}

ir::Scalar to_ir_scalar(const Scalar& s, ir::DType dtype) { return ir::literal_to_scalar(to_ir_literal(s), dtype); }

TensorInfo tensor_info(const ir::Graph& g, ir::NodeId id, const std::string& name) {
  TensorInfo t;
  const ir::Node& n = g.node(id);
  t.name = name;
  t.dtype = from_ir(n.dtype);
  for (const ir::Dim& d : n.shape) {
    t.shape.push_back(d.size);
    t.dim_names.push_back(d.sym >= 0 ? g.dims[static_cast<size_t>(d.sym)].name : std::string());
  }
  return t;
}

namespace {
// Parses impl->source into impl->graph; errors are rendered against that text.
Graph parse_into(std::shared_ptr<Graph::Impl> impl, const std::string& file, const DimValues& dims) {
  return translate_errors(
      [&] {
        impl->graph = ir::parse_graph(impl->source, file, dims);
        warn_about_graph(impl->graph);
        return Graph(impl);
      },
      file, impl->source);
}
}  // namespace

Graph Graph::parse(std::string_view text, std::string_view file, const DimValues& dims) {
  auto impl = std::make_shared<Impl>();
  impl->source = std::string(text);
  return parse_into(std::move(impl), std::string(file), dims);
}

Graph Graph::load(const std::string& path, const DimValues& dims) {
  // The parser's checked reader: regular files only, at most ir::kMaxGraphFileBytes. The text is
  // read once and kept (moved, not copied) for diagnostics.
  auto impl = std::make_shared<Impl>();
  impl->source = translate_errors([&] { return ir::read_text_file(path); }, path);  // Error::file(): the path
  return parse_into(std::move(impl), path, dims);
}

Graph Graph::with_dims(const DimValues& dims) const {
  return translate_errors(
      [&] {
        auto impl = std::make_shared<Impl>(*impl_);
        ir::rebind_dims(impl->graph, dims);
        return Graph(std::move(impl));
      },
      impl_->graph.file, impl_->source);
}

Scalar public_scalar(const ir::Scalar& v, ir::DType dtype) {
  if (ir::is_float(dtype)) return Scalar(v.f);
  if (dtype == ir::DType::Bool) return Scalar(v.i != 0);
  return Scalar(static_cast<int64_t>(v.i));
}

std::string Graph::name() const { return impl_->graph.name; }

std::vector<TensorInfo> Graph::inputs() const {
  std::vector<TensorInfo> out;
  for (ir::NodeId id : impl_->graph.inputs) out.push_back(tensor_info(impl_->graph, id, impl_->graph.node(id).name));
  return out;
}

std::vector<TensorInfo> Graph::outputs() const {
  std::vector<TensorInfo> out;
  for (const ir::OutputDecl& o : impl_->graph.outputs) out.push_back(tensor_info(impl_->graph, o.node, o.name));
  return out;
}

std::vector<ParamInfo> Graph::params() const {
  std::vector<ParamInfo> out;
  for (const ir::ParamDecl& p : impl_->graph.params) {
    const ir::Node& n = impl_->graph.node(p.node);
    ParamInfo info;
    info.name = n.name;
    info.dtype = from_ir(n.dtype);
    info.default_value = public_scalar(p.default_value, n.dtype);
    out.push_back(info);
  }
  return out;
}

DimValues Graph::dims() const {
  DimValues out;
  for (const ir::DimDecl& d : impl_->graph.dims) out.emplace_back(d.name, d.value);
  return out;
}

int Graph::op_count() const { return impl_->graph.op_count(); }

std::vector<int32_t> Graph::output_nodes() const {
  std::vector<int32_t> out;
  for (const ir::OutputDecl& o : impl_->graph.outputs) out.push_back(o.node);
  return out;
}

std::vector<NodeInfo> Graph::nodes() const {
  const ir::Graph& g = impl_->graph;
  std::vector<NodeInfo> out;
  out.reserve(g.nodes.size());
  for (int id = 0; id < g.size(); ++id) {
    const ir::Node& n = g.node(id);
    NodeInfo info;
    info.id = id;
    info.op = std::string(ir::op_name(n.op));
    info.name = n.name;
    info.dtype = from_ir(n.dtype);
    for (const ir::Dim& d : n.shape) info.shape.push_back(d.size);
    for (int k = 0; k < n.nargs; ++k) info.operands.push_back(n.arg(k));
    if (n.op == ir::Op::Const) info.value = public_scalar(n.value, n.dtype);
    if (n.op == ir::Op::Input || n.op == ir::Op::Param) info.slot = n.slot;
    if (ir::is_reduction(n.op)) {
      info.axes = ir::mask_axes(n.red.axes);
      info.keepdim = n.red.keepdim;
      info.correction = n.red.correction;
      info.initial = n.red.initial;
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::string Graph::to_text() const {
  return translate_errors([&] { return ir::print_graph(impl_->graph); });
}

}  // namespace fusejit
