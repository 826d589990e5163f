// fusejit::Program, running: launch (device pointers), run and measure (host tensors), with the
// dims taken from the input shapes. Compiling is lib/program.cpp.
#include <fmt/format.h>

#include "ir/tensor.h"
#include "lib/program_impl.h"

namespace fusejit {
namespace {

std::string dtype_text(ir::DType t) { return std::string(ir::dtype_name(t)); }

std::string shape_text(std::span<const int64_t> shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

// What each named dim is bound to while the inputs are read, and by which input.
struct DimBindings {
  std::vector<int64_t> value;      // per graph dim, -1 = not bound yet
  std::vector<std::string> by;     // the input that bound it
};

// The type an input must have, for messages: literal sizes as numbers, named dims by name, or
// "T=5" once an earlier input bound T.
std::string expected_type(const ir::Graph& g, const ir::Node& n, const DimBindings& b) {
  std::string s;
  for (const ir::Dim& d : n.shape) {
    std::string e = std::to_string(d.size);
    if (d.sym >= 0) {
      const size_t k = static_cast<size_t>(d.sym);
      e = g.dims[k].name + (b.value[k] >= 0 ? "=" + std::to_string(b.value[k]) : "");
    }
    s += (s.empty() ? "" : ", ") + e;
  }
  return dtype_text(n.dtype) + "[" + s + "]";
}

// Checks input `t` against graph input `n` and binds the dims it names; throws ir::UserError
// naming both types (and the input that bound a conflicting dim).
void bind_input(const ir::Graph& g, const ir::Node& n, const TensorView& t, DimBindings& b) {
  DimBindings next = b;
  std::string conflict;
  bool ok = to_ir(t.dtype) == n.dtype && t.shape.size() == n.shape.size();
  for (size_t d = 0; ok && d < n.shape.size(); ++d) {
    const ir::Dim& dim = n.shape[d];
    if (dim.sym < 0) {
      ok = t.shape[d] == dim.size;
      continue;
    }
    const size_t k = static_cast<size_t>(dim.sym);
    ok = t.shape[d] >= 0 && (next.value[k] < 0 || next.value[k] == t.shape[d]);
    if (!ok && next.value[k] >= 0)
      conflict = fmt::format(" ({} = {} from input '{}')", g.dims[k].name, next.value[k], next.by[k]);
    if (next.value[k] < 0) {
      next.value[k] = t.shape[d];
      next.by[k] = n.name;
    }
  }
  if (!ok)
    throw ir::UserError(fmt::format("input '{}': expected {}{}, got {}{}", n.name, expected_type(g, n, b), conflict,
                                    dtype_text(to_ir(t.dtype)), shape_text(t.shape)));
  const int64_t elements = ir::checked_numel({t.shape.begin(), t.shape.end()});
  const int64_t want = elements * ir::dtype_size(n.dtype);
  if (elements < 0 || static_cast<int64_t>(t.data.size()) != want)
    throw ir::UserError(fmt::format("input '{}': {}{} needs {} bytes, its data has {}", n.name, dtype_text(n.dtype),
                                    shape_text(t.shape), want, t.data.size()));
  b = std::move(next);
}

// The dim values the input shapes give (only the dims some input names). Throws ir::UserError on a
// wrong count, dtype or shape.
DimValues dims_from_inputs(const ir::Graph& g, std::span<const TensorView> inputs) {
  if (inputs.size() != g.inputs.size()) {
    std::string names;
    for (ir::NodeId id : g.inputs) names += (names.empty() ? "" : ", ") + g.node(id).name;
    throw ir::UserError(fmt::format("expected {} input tensor(s) ({}), got {}", g.inputs.size(), names, inputs.size()));
  }
  DimBindings b{std::vector<int64_t>(g.dims.size(), -1), std::vector<std::string>(g.dims.size())};
  for (size_t k = 0; k < inputs.size(); ++k) bind_input(g, g.node(g.inputs[k]), inputs[k], b);
  DimValues dims;
  for (size_t k = 0; k < g.dims.size(); ++k)
    if (b.value[k] >= 0) dims.emplace_back(g.dims[k].name, b.value[k]);
  return dims;
}

bool same_dims(const Graph& g, const DimValues& dims) {
  DimValues cur = g.dims();
  for (const auto& [name, v] : dims) {
    bool found = false;
    for (const auto& [n2, v2] : cur)
      if (n2 == name) {
        found = true;
        if (v2 != v) return false;
      }
    if (!found) return false;  // let with_dims() report the unknown name
  }
  return true;
}

// The same program at other dims: the same kernels (sizes are kernel arguments), found in the
// in-memory cache.
Program at_dims(const Program::Impl& p, const DimValues& dims) {
  Options o = p.options;
  o.backend = p.backend;
  return Program::compile(p.graph.with_dims(dims), o);
}

std::vector<std::span<const std::byte>> data_of(std::span<const TensorView> ts) {
  std::vector<std::span<const std::byte>> out;
  for (const TensorView& t : ts) out.push_back(t.data);
  return out;
}

// Host tensors for the plan's outputs and (when asked) intermediates, with spans of them.
struct HostResults {
  std::vector<HostTensor> outputs;
  std::vector<std::pair<int32_t, HostTensor>> intermediates;
  std::vector<std::span<std::byte>> out, inter;
};

HostResults alloc_results(const ir::Graph& g, const std::vector<ir::NodeId>& inter_nodes, bool keep) {
  HostResults r;
  for (const ir::OutputDecl& o : g.outputs)
    r.outputs.emplace_back(from_ir(g.node(o.node).dtype), ir::shape_sizes(g.node(o.node).shape));
  for (size_t i = 0; keep && i < inter_nodes.size(); ++i) {
    const ir::Node& n = g.node(inter_nodes[i]);
    r.intermediates.emplace_back(inter_nodes[i], HostTensor(from_ir(n.dtype), ir::shape_sizes(n.shape)));
  }
  for (HostTensor& t : r.outputs) r.out.push_back(t.data());
  for (auto& [id, t] : r.intermediates) r.inter.push_back(t.data());
  return r;
}

// One checked run and, with `time`, the timed runs of one plan on host tensors whose shapes match
// this program's dims.
Measurement measure_here(const Program::Impl& p, std::span<const TensorView> inputs, const Params& params, PlanKind kind,
                         const MeasureOptions& o, bool time) {
  const std::vector<ir::Scalar> pv = resolve_params(p.graph.impl().graph, params, p.options.message_style);
  const Program::Impl::Path& path = p.path(kind);
  const ir::Graph& g = p.graph_of(kind);
  const std::vector<ir::NodeId> inter = jit::plan_intermediates(g, path.plan);
  HostResults r = alloc_results(g, inter, o.keep_intermediates);
  const std::vector<std::span<const std::byte>> in = data_of(inputs);
  Measurement m;
  for (const KernelInfo& k : path.kernels) {
    m.kernels += k.elements > 0;
    m.bytes += k.read_bytes + k.write_bytes;
  }
  jit::PathTiming t;
  if (p.backend == Backend::Cpu) {
    t = jit::measure_cpu_program(*path.cpu, in, r.out, r.inter, pv, time ? o.repeats : 1);
  } else {
    jit::MeasureOptions jo;
    jo.warmup = o.warmup;
    jo.repeats = o.repeats;
    jo.time = time;
    jo.copy_baseline = o.copy_baseline;
    const jit::GpuMeasurement gm = jit::measure_gpu_program(*path.gpu, in, r.out, r.inter, pv, jo);
    t = gm.timing;
    m.copy_gbps = gm.copy_gbps;
    m.buffer_sets = gm.buffer_sets;
    m.l2_resident = gm.l2_resident;
  }
  if (time) {
    m.median_ms = t.median_ms;
    m.min_ms = t.min_ms;
    m.max_ms = t.max_ms;
    m.gbps = m.median_ms > 0 ? static_cast<double>(m.bytes) / (m.median_ms * 1e6) : 0.0;
  }
  m.outputs = std::move(r.outputs);
  m.intermediates = std::move(r.intermediates);
  return m;
}

Measurement measure_any(const Program::Impl& p, std::span<const TensorView> inputs, const Params& params, PlanKind kind,
                        const MeasureOptions& o, bool time) {
  const DimValues dims = translate_errors([&] { return dims_from_inputs(p.graph.impl().graph, inputs); });
  if (!same_dims(p.graph, dims)) return measure_any(at_dims(p, dims).impl(), inputs, params, kind, o, time);
  return translate_errors([&] { return measure_here(p, inputs, params, kind, o, time); });
}

}  // namespace

std::vector<HostTensor> Program::run(std::span<const TensorView> inputs, const Params& params, PlanKind kind) const {
  return measure_any(*impl_, inputs, params, kind, {}, false).outputs;
}

std::vector<HostTensor> Program::run(std::initializer_list<TensorView> inputs, const Params& params, PlanKind kind) const {
  return run(std::span<const TensorView>(inputs.begin(), inputs.size()), params, kind);
}

std::vector<HostTensor> Program::run(std::span<const HostTensor> inputs, const Params& params, PlanKind kind) const {
  const std::vector<TensorView> views(inputs.begin(), inputs.end());
  return run(std::span<const TensorView>(views), params, kind);
}

Measurement Program::measure(std::span<const TensorView> inputs, const Params& params, PlanKind kind,
                             const MeasureOptions& options) const {
  return measure_any(*impl_, inputs, params, kind, options, true);
}

Measurement Program::measure(std::initializer_list<TensorView> inputs, const Params& params, PlanKind kind,
                             const MeasureOptions& options) const {
  return measure(std::span<const TensorView>(inputs.begin(), inputs.size()), params, kind, options);
}

void Program::launch(std::span<const void* const> inputs, std::span<void* const> outputs, const Params& params,
                     void* stream, PlanKind kind, const DimValues& dims) const {
  if (!dims.empty() && !same_dims(impl_->graph, dims)) {
    at_dims(*impl_, dims).launch(inputs, outputs, params, stream, kind);
    return;
  }
  translate_errors([&] {
    if (impl_->backend != Backend::Cuda)
      throw ir::UserError("Program::launch needs the CUDA backend; this program was compiled for the CPU (use run())");
    const ir::Graph& g = impl_->graph.impl().graph;
    if (inputs.size() != g.inputs.size() || outputs.size() != g.outputs.size())
      throw ir::UserError("launch: expected " + std::to_string(g.inputs.size()) + " input and " +
                          std::to_string(g.outputs.size()) + " output pointer(s), got " + std::to_string(inputs.size()) +
                          " and " + std::to_string(outputs.size()));
    std::vector<jit::cu::DevicePtr> in, out;
    for (const void* p : inputs) in.push_back(reinterpret_cast<jit::cu::DevicePtr>(p));
    for (void* p : outputs) out.push_back(reinterpret_cast<jit::cu::DevicePtr>(p));
    const std::vector<ir::Scalar> pv = resolve_params(g, params, impl_->options.message_style);
    impl_->path(kind).gpu->enqueue(in, out, pv, static_cast<jit::cu::Stream>(stream));
  });
}

}  // namespace fusejit
