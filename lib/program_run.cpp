// fusejit::Program, host tensors: run and measure, with the dims taken from the input shapes and
// the launch path of lib/program_launch.cpp (on the CPU the views are read in place; on the GPU
// they are copied in and the outputs back).
#include <chrono>

#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/tensor.h"
#include "lib/launch_check.h"
#include "lib/program_impl.h"

namespace fusejit {
namespace {

using Impl = Program::Impl;

// Host tensors for the outputs and (when asked) intermediates of one plan at these dims.
struct HostResults {
  std::vector<HostTensor> outputs;
  std::vector<std::pair<int32_t, HostTensor>> intermediates;
  std::vector<std::span<std::byte>> out, inter;
};

HostResults alloc_results(const Impl& p, const Impl::Path& path, std::span<const int64_t> dims, const jit::LaunchState& st,
                          bool keep) {
  const ir::Graph& g0 = p.graph_of(path.kind);
  HostResults r;
  for (size_t k = 0; k < g0.outputs.size(); ++k)
    r.outputs.emplace_back(from_ir(g0.node(g0.outputs[k].node).dtype), st.output_shapes[k]);
  if (keep && !path.bindings->intermediates.empty()) {
    DimValues named;
    for (size_t k = 0; k < g0.dims.size(); ++k) named.emplace_back(g0.dims[k].name, dims[k]);
    ir::Graph g = g0;
    ir::rebind_dims(g, named);
    for (ir::NodeId id : path.bindings->intermediates)
      r.intermediates.emplace_back(id, HostTensor(from_ir(g.node(id).dtype), ir::shape_sizes(g.node(id).shape)));
  }
  for (HostTensor& t : r.outputs) r.out.push_back(t.data());
  for (auto& [id, t] : r.intermediates) r.inter.push_back(t.data());
  return r;
}

std::vector<jit::TensorArg> args_of(std::span<const TensorView> views) {
  std::vector<jit::TensorArg> out;
  for (const TensorView& v : views) out.push_back({reinterpret_cast<uint64_t>(v.data.data()), v.shape, v.strides});
  return out;
}

std::vector<uint64_t> addrs_of(const std::vector<std::span<std::byte>>& bufs) {
  std::vector<uint64_t> out;
  for (std::span<std::byte> b : bufs) out.push_back(reinterpret_cast<uint64_t>(b.data()));
  return out;
}

// CPU: the checked run (outputs poisoned first) and `repeats - 1` more, each timed.
jit::PathTiming measure_cpu(const Impl& p, PlanKind kind, std::span<const int64_t> dims, std::span<const TensorView> inputs,
                            HostResults& r, std::span<const ir::Scalar> params, int repeats) {
  for (std::span<std::byte> b : r.out) std::fill(b.begin(), b.end(), std::byte{0xFF});
  for (std::span<std::byte> b : r.inter) std::fill(b.begin(), b.end(), std::byte{0xFF});
  const std::vector<jit::TensorArg> in = args_of(inputs);
  std::vector<jit::TensorArg> out;
  for (size_t k = 0; k < r.outputs.size(); ++k)
    out.push_back({reinterpret_cast<uint64_t>(r.out[k].data()), r.outputs[k].shape(), {}});
  const std::vector<uint64_t> inter = addrs_of(r.inter);
  std::vector<double> times;
  for (int k = 0; k < std::max(1, repeats); ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    launch_bound(p, kind, dims, {in, out, k == 0 ? std::span<const uint64_t>(inter) : std::span<const uint64_t>{}}, params,
                 nullptr);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const Impl::Path& path = p.path(kind);
  const int kernels = dims_entry(p, path, dims).state->kernel_launches();
  return jit::make_path_timing(kernels, times, dims_entry(p, path, dims).state->bytes_moved);
}

// GPU: measure_gpu_runs with the inputs' bytes copied in as they are (strides kept) and every
// run through the launch path.
jit::GpuMeasurement measure_gpu(const Impl& p, PlanKind kind, std::span<const int64_t> dims,
                                std::span<const TensorView> inputs, HostResults& r, std::span<const ir::Scalar> params,
                                const jit::LaunchState& st, const MeasureOptions& o, bool time) {
  jit::RunSpec spec;
  std::vector<std::span<const std::byte>> in_bytes;
  for (const TensorView& v : inputs) {
    spec.input_bytes.push_back(static_cast<int64_t>(v.data.size()));
    in_bytes.push_back(v.data);
  }
  spec.output_bytes = st.output_bytes;
  spec.intermediate_bytes = st.intermediate_bytes;
  spec.kernels = st.kernel_launches();
  spec.bytes_moved = st.bytes_moved;
  spec.enqueue = [&](std::span<const jit::cu::DevicePtr> in_p, std::span<const jit::cu::DevicePtr> out_p,
                     std::span<const jit::cu::DevicePtr> inter_p, jit::cu::Stream s) {
    std::vector<jit::TensorArg> in, out;
    for (size_t k = 0; k < inputs.size(); ++k) in.push_back({in_p[k], inputs[k].shape, inputs[k].strides});
    for (size_t k = 0; k < out_p.size(); ++k) out.push_back({out_p[k], st.output_shapes[k], {}});
    const std::vector<uint64_t> inter(inter_p.begin(), inter_p.end());
    launch_bound(p, kind, dims, {in, out, inter}, params, s);
  };
  jit::MeasureOptions jo;
  jo.warmup = o.warmup;
  jo.repeats = o.repeats;
  jo.time = time;
  jo.copy_baseline = o.copy_baseline;
  return jit::measure_gpu_runs(p.device, spec, in_bytes, r.out, r.inter, jo);
}

Measurement measure_any(const Impl& p0, std::span<const TensorView> inputs, const Params& params, PlanKind kind,
                        const MeasureOptions& o, bool time) {
  return translate_errors([&] {
    const jit::LaunchScratch::Lease lease;  // the launches below use it (of_this_thread)
    const ir::Graph& g = p0.graph.impl().graph;
    std::vector<int64_t> dims;
    bind_dims(g, inputs, dims, p0.options.message_style);
    check_strides(g, args_of(inputs), {});  // first: check_view_data needs extents that fit in int64
    check_view_data(g, inputs);
    const std::vector<ir::Scalar> pv = resolve_params(g, params, p0.options.message_style);
    const auto [pp, hit] = resolve_dims(p0, kind, dims);
    const Impl& p = *pp;
    const Impl::Path& path = p.path(kind);
    HostResults r = alloc_results(p, path, dims, *hit.state, o.keep_intermediates);
    Measurement m;
    m.kernels = hit.state->kernel_launches();
    m.bytes = hit.state->bytes_moved;
    jit::PathTiming t;
    if (p.backend == Backend::Cpu) {
      t = measure_cpu(p, kind, dims, inputs, r, pv, time ? o.repeats : 1);
    } else {
      const jit::GpuMeasurement gm = measure_gpu(p, kind, dims, inputs, r, pv, *hit.state, o, time);
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
  }, p0.graph.impl().graph.file, p0.graph.impl().source);  // a graph line at these dims (rebind_dims)
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
  if (options.warmup < 0 || options.repeats < 1)
    throw Error(ErrorKind::User, fmt::format("MeasureOptions: warmup {} and repeats {}: warmup must be >= 0 and repeats "
                                             ">= 1",
                                             options.warmup, options.repeats));
  return measure_any(*impl_, inputs, params, kind, options, true);
}

Measurement Program::measure(std::initializer_list<TensorView> inputs, const Params& params, PlanKind kind,
                             const MeasureOptions& options) const {
  return measure(std::span<const TensorView>(inputs.begin(), inputs.size()), params, kind, options);
}

}  // namespace fusejit
