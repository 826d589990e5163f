// Running and measuring plans on the GPU. See gpu_runner.h.
#include "jit/gpu_runner.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ir/error.h"

namespace fusejit::jit {
namespace {

int64_t value_bytes(const ir::Graph& g, ir::NodeId id) {
  const ir::Node& n = g.node(id);
  return ir::num_elements(n.shape) * ir::dtype_size(n.dtype);
}

// A stream owned for the duration of a measurement.
class OwnedStream {
 public:
  explicit OwnedStream(const DeviceContext& dc) : dc_(dc) {
    dc.driver().check(dc.api().cuStreamCreate(&s_, 1 /* CU_STREAM_NON_BLOCKING */), "cuStreamCreate");
  }
  ~OwnedStream() {
    if (s_) {
      dc_.api().cuStreamSynchronize(s_);  // never leave work referencing freed buffers
      dc_.api().cuStreamDestroy(s_);
    }
  }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cu::Stream get() const { return s_; }

 private:
  const DeviceContext& dc_;
  cu::Stream s_ = nullptr;
};

// Events for `count` timed runs (a start and an end event each).
class EventPairs {
 public:
  EventPairs(const DeviceContext& dc, int count) : dc_(dc) {
    ev_.reserve(static_cast<size_t>(count) * 2);
    for (int i = 0; i < count * 2; ++i) {
      cu::Event e = nullptr;
      dc.driver().check(dc.api().cuEventCreate(&e, 0 /* CU_EVENT_DEFAULT: timing enabled */), "cuEventCreate");
      ev_.push_back(e);
    }
  }
  ~EventPairs() {
    for (cu::Event e : ev_) dc_.api().cuEventDestroy(e);
  }
  EventPairs(const EventPairs&) = delete;
  EventPairs& operator=(const EventPairs&) = delete;
  cu::Event start(int i) const { return ev_[static_cast<size_t>(i) * 2]; }
  cu::Event end(int i) const { return ev_[static_cast<size_t>(i) * 2 + 1]; }
  // Waits for the last run and returns each run's elapsed time in milliseconds.
  std::vector<double> elapsed(int count) const {
    std::vector<double> out;
    if (count == 0) return out;
    dc_.driver().check(dc_.api().cuEventSynchronize(end(count - 1)), "cuEventSynchronize");
    for (int i = 0; i < count; ++i) {
      float ms = 0;
      dc_.driver().check(dc_.api().cuEventElapsedTime(&ms, start(i), end(i)), "cuEventElapsedTime");
      out.push_back(ms);
    }
    return out;
  }

 private:
  const DeviceContext& dc_;
  std::vector<cu::Event> ev_;
};

std::vector<cu::DevicePtr> ptrs_of(const std::vector<DeviceBuffer>& bufs) {
  std::vector<cu::DevicePtr> p;
  p.reserve(bufs.size());
  for (const DeviceBuffer& b : bufs) p.push_back(b.ptr());
  return p;
}

std::vector<DeviceBuffer> alloc_all(const std::shared_ptr<DeviceContext>& dc, std::span<const int64_t> sizes,
                                    std::string_view what) {
  std::vector<DeviceBuffer> out;
  out.reserve(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i)
    out.emplace_back(dc, static_cast<size_t>(sizes[i]), fmt::format("{} {}", what, i));
  return out;
}

}  // namespace

// ---- GpuProgram ------------------------------------------------------------------------------

GpuProgram GpuProgram::load(std::shared_ptr<DeviceContext> dc, const ir::Graph& g, const ir::Plan& plan,
                            std::span<const GpuKernelSpec> kernels) {
  FJ_CHECK(dc != nullptr, "GpuProgram::load: no device context");
  FJ_CHECK(kernels.size() == plan.groups.size(), "GpuProgram::load: one kernel per fusion group expected");
  GpuProgram p;
  p.dc_ = std::move(dc);
  p.graph_ = std::make_shared<const ir::Graph>(g);
  p.plan_ = std::make_shared<const ir::Plan>(plan);
  for (const GpuKernelSpec& k : kernels) {
    FJ_CHECK(k.image != nullptr && !k.image->empty(), "GpuProgram::load: kernel " + k.name + " has no image");
    p.functions_.push_back(load_function(p.dc_, *k.image, k.target_name, k.name));
    p.signatures_.push_back(k.signature);
  }
  std::vector<bool> is_output(static_cast<size_t>(g.size()), false);
  for (const ir::OutputDecl& o : g.outputs) is_output[static_cast<size_t>(o.node)] = true;
  std::vector<ir::NodeId> mat = plan.materialized;
  std::sort(mat.begin(), mat.end());
  mat.erase(std::unique(mat.begin(), mat.end()), mat.end());
  for (ir::NodeId id : mat) {
    if (is_output[static_cast<size_t>(id)] || g.node(id).op == ir::Op::Input) continue;
    p.inter_nodes_.push_back(id);
    p.inter_bytes_.push_back(value_bytes(g, id));
  }
  return p;
}

int GpuProgram::kernel_count() const {
  int n = 0;
  for (const ir::FusionGroup& grp : plan_->groups)
    if (ir::num_elements(grp.iter_shape) > 0) ++n;
  return n;
}

int64_t GpuProgram::bytes_moved() const {
  int64_t b = 0;
  for (const ir::FusionGroup& grp : plan_->groups) {
    const ir::GroupTraffic t = ir::group_traffic(*graph_, grp);
    b += t.read_bytes + t.write_bytes;
  }
  return b;
}

LaunchConfig GpuProgram::launch_config(size_t i) const {
  FJ_CHECK(i < functions_.size(), "GpuProgram::launch_config: no such kernel");
  const GpuFunction& fn = functions_[i];
  return choose_launch(dc_->info(), fn.block, fn.blocks_per_sm, ir::num_elements(plan_->groups[i].iter_shape),
                       signatures_[i].vector_width);
}

void GpuProgram::enqueue(std::span<const cu::DevicePtr> inputs, std::span<const cu::DevicePtr> outputs,
                         std::span<const ir::Scalar> params, cu::Stream stream,
                         std::span<const cu::DevicePtr> intermediates) const {
  const ir::Graph& g = *graph_;
  FJ_CHECK(inputs.size() == g.inputs.size(), fmt::format("GpuProgram::enqueue: {} input pointers for {} inputs",
                                                          inputs.size(), g.inputs.size()));
  FJ_CHECK(outputs.size() == g.outputs.size(), fmt::format("GpuProgram::enqueue: {} output pointers for {} outputs",
                                                            outputs.size(), g.outputs.size()));
  FJ_CHECK(intermediates.empty() || intermediates.size() == inter_nodes_.size(),
           "GpuProgram::enqueue: wrong number of intermediate buffers");
  FJ_CHECK(params.empty() || params.size() == g.params.size(), "GpuProgram::enqueue: wrong number of params");

  // Outputs must not overlap inputs or each other (sizes from the graph).
  std::vector<DeviceRange> in_ranges, out_ranges;
  for (size_t i = 0; i < inputs.size(); ++i)
    in_ranges.push_back({inputs[i], static_cast<size_t>(value_bytes(g, g.inputs[i])),
                         fmt::format("input {}", g.node(g.inputs[i]).name)});
  for (size_t k = 0; k < outputs.size(); ++k)
    out_ranges.push_back({outputs[k], static_cast<size_t>(value_bytes(g, g.outputs[k].node)),
                          fmt::format("output {}", g.outputs[k].name)});
  check_no_overlap(in_ranges, out_ranges);

  std::vector<ir::Scalar> defaults;
  if (params.empty()) {
    for (const ir::ParamDecl& d : g.params) defaults.push_back(d.default_value);
    params = defaults;
  }

  const DeviceContext& dc = *dc_;
  const Driver& drv = dc.driver();
  const DriverApi& a = dc.api();
  DeviceContext::Scope scope(dc);

  // Where each materialised value lives: graph outputs in the caller's buffers (first declaration),
  // intermediates in ours.
  std::vector<cu::DevicePtr> written(static_cast<size_t>(g.size()), 0);
  std::vector<int> first_decl(static_cast<size_t>(g.size()), -1);
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const size_t id = static_cast<size_t>(g.outputs[k].node);
    if (first_decl[id] < 0) {
      first_decl[id] = static_cast<int>(k);
      written[id] = outputs[k];
    }
  }
  // Stream-ordered intermediates when the caller gave none; freed on the stream after the run.
  std::vector<cu::DevicePtr> owned;
  auto free_owned = [&] {
    for (cu::DevicePtr p : owned) a.cuMemFreeAsync(p, stream);
    owned.clear();
  };
  for (size_t i = 0; i < inter_nodes_.size(); ++i) {
    cu::DevicePtr p = 0;
    if (!intermediates.empty()) {
      p = intermediates[i];
    } else if (inter_bytes_[i] > 0) {
      cu::Result r = a.cuMemAllocAsync(&p, static_cast<size_t>(inter_bytes_[i]), stream);
      if (r != cu::kSuccess) {
        free_owned();
        if (r == cu::kErrorOutOfMemory)
          throw DriverError(DriverErrorKind::OutOfMemory,
                            fmt::format("out of device memory: cuMemAllocAsync of {} for intermediate v{} failed",
                                        format_bytes(static_cast<uint64_t>(inter_bytes_[i])), inter_nodes_[i]),
                            r);
        drv.check(r, "cuMemAllocAsync");
      }
      owned.push_back(p);
    }
    written[static_cast<size_t>(inter_nodes_[i])] = p;
  }

  try {
    for (size_t gi = 0; gi < plan_->groups.size(); ++gi) {
      const ir::FusionGroup& grp = plan_->groups[gi];
      const LaunchConfig cfg = launch_config(gi);
      if (cfg.empty()) continue;
      std::vector<uint64_t> in_addrs, out_addrs;
      for (ir::NodeId id : grp.inputs) {
        const ir::Node& n = g.node(id);
        in_addrs.push_back(n.op == ir::Op::Input ? inputs[static_cast<size_t>(n.slot)]
                                                 : written[static_cast<size_t>(id)]);
      }
      for (ir::NodeId id : grp.outputs) out_addrs.push_back(written[static_cast<size_t>(id)]);
      PackedArgs args = pack_args(signatures_[gi], g, grp, in_addrs, out_addrs, params, cfg.shape());
      launch_kernel(dc, functions_[gi], cfg, args, stream);
    }
    // A value declared as several outputs is written once and copied to the other buffers.
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      const size_t id = static_cast<size_t>(g.outputs[k].node);
      if (first_decl[id] == static_cast<int>(k)) continue;
      const int64_t bytes = value_bytes(g, g.outputs[k].node);
      if (bytes > 0)
        drv.check(a.cuMemcpyDtoDAsync(outputs[k], written[id], static_cast<size_t>(bytes), stream),
                  "cuMemcpyDtoDAsync (duplicate output)");
    }
  } catch (...) {
    free_owned();
    throw;
  }
  free_owned();
}

// ---- Measurement -----------------------------------------------------------------------------

double median_of(std::vector<double> s) {
  if (s.empty()) return 0;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

PathTiming make_path_timing(int kernels, std::span<const double> times_ms, int64_t bytes, double copy_gbps) {
  PathTiming t;
  t.kernels = kernels;
  t.bytes = bytes;
  if (times_ms.empty()) return t;
  t.median_ms = median_of(std::vector<double>(times_ms.begin(), times_ms.end()));
  t.min_ms = *std::min_element(times_ms.begin(), times_ms.end());
  t.max_ms = *std::max_element(times_ms.begin(), times_ms.end());
  if (t.median_ms > 0) t.gbps = static_cast<double>(bytes) / (t.median_ms * 1e-3) / 1e9;
  if (copy_gbps > 0) t.pct_of_copy = 100.0 * t.gbps / copy_gbps;
  return t;
}

int choose_buffer_sets(int64_t working_set_bytes, int64_t l2_bytes, double l2_multiple, int max_sets,
                       int64_t free_bytes) {
  if (working_set_bytes <= 0) return 1;
  const double target = l2_multiple * static_cast<double>(std::max<int64_t>(l2_bytes, 0));
  int64_t sets = static_cast<int64_t>(std::ceil(target / static_cast<double>(working_set_bytes)));
  sets = std::clamp<int64_t>(sets, 1, std::max(1, max_sets));
  if (free_bytes > 0) sets = std::min<int64_t>(sets, std::max<int64_t>(1, free_bytes / 2 / working_set_bytes));
  return static_cast<int>(sets);
}

GpuMeasurement run_and_measure(const GpuProgram& fused, const GpuProgram& unfused,
                               std::span<const std::vector<std::byte>> host_inputs,
                               std::span<const ir::Scalar> params, const MeasureOptions& options) {
  FJ_CHECK(fused.context() == unfused.context(), "run_and_measure: programs loaded in different contexts");
  const std::shared_ptr<DeviceContext>& dc = fused.context();
  const DeviceContext& d = *dc;
  const Driver& drv = d.driver();
  const DriverApi& a = d.api();
  const ir::Graph& g = fused.graph();
  FJ_CHECK(g.inputs.size() == unfused.graph().inputs.size() && g.outputs.size() == unfused.graph().outputs.size(),
           "run_and_measure: the two programs have different inputs or outputs");
  FJ_CHECK(host_inputs.size() == g.inputs.size(), "run_and_measure: one host buffer per graph input expected");

  std::vector<int64_t> in_bytes, out_bytes;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    in_bytes.push_back(value_bytes(g, g.inputs[i]));
    FJ_CHECK(static_cast<int64_t>(host_inputs[i].size()) == in_bytes.back(),
             fmt::format("run_and_measure: input {} has {} bytes, expected {}", g.node(g.inputs[i]).name,
                         host_inputs[i].size(), in_bytes.back()));
  }
  for (const ir::OutputDecl& o : g.outputs) out_bytes.push_back(value_bytes(g, o.node));

  GpuMeasurement m;
  m.device = d.info();
  m.warmup = options.warmup;
  m.repeats = options.repeats;
  DeviceContext::Scope scope(d);
  OwnedStream stream(d);
  const cu::Stream s = stream.get();

  // Set 0: inputs copied in once; separate outputs per path so both results come back.
  std::vector<DeviceBuffer> in0 = alloc_all(dc, in_bytes, "input");
  for (size_t i = 0; i < in0.size(); ++i)
    if (in_bytes[i] > 0)
      drv.check(a.cuMemcpyHtoDAsync(in0[i].ptr(), host_inputs[i].data(), host_inputs[i].size(), s), "cuMemcpyHtoDAsync");
  std::vector<DeviceBuffer> out_f = alloc_all(dc, out_bytes, "fused output");
  std::vector<DeviceBuffer> out_u = alloc_all(dc, out_bytes, "unfused output");
  std::vector<DeviceBuffer> inter_f = alloc_all(dc, fused.intermediate_bytes(), "fused intermediate");
  std::vector<DeviceBuffer> inter_u = alloc_all(dc, unfused.intermediate_bytes(), "unfused intermediate");
  const std::vector<cu::DevicePtr> in0_p = ptrs_of(in0), out_f_p = ptrs_of(out_f), out_u_p = ptrs_of(out_u);
  const std::vector<cu::DevicePtr> inter_f_p = ptrs_of(inter_f), inter_u_p = ptrs_of(inter_u);

  // The checked run: poison (0xFF bytes: NaN for every float dtype, -1/true for integers), run.
  auto poison = [&](const std::vector<DeviceBuffer>& bufs) {
    for (const DeviceBuffer& b : bufs)
      if (b.size() > 0) drv.check(a.cuMemsetD8Async(b.ptr(), 0xFF, b.size(), s), "cuMemsetD8Async (poison)");
  };
  poison(out_f);
  poison(inter_f);
  fused.enqueue(in0_p, out_f_p, params, s, inter_f_p);
  poison(out_u);
  poison(inter_u);
  unfused.enqueue(in0_p, out_u_p, params, s, inter_u_p);
  m.fused_outputs.resize(out_bytes.size());
  m.unfused_outputs.resize(out_bytes.size());
  for (size_t k = 0; k < out_bytes.size(); ++k) {
    m.fused_outputs[k].resize(static_cast<size_t>(out_bytes[k]));
    m.unfused_outputs[k].resize(static_cast<size_t>(out_bytes[k]));
    if (out_bytes[k] == 0) continue;
    drv.check(a.cuMemcpyDtoHAsync(m.fused_outputs[k].data(), out_f[k].ptr(), m.fused_outputs[k].size(), s),
              "cuMemcpyDtoHAsync");
    drv.check(a.cuMemcpyDtoHAsync(m.unfused_outputs[k].data(), out_u[k].ptr(), m.unfused_outputs[k].size(), s),
              "cuMemcpyDtoHAsync");
  }
  if (options.keep_intermediates) {
    const std::vector<int64_t>& ib = unfused.intermediate_bytes();
    m.unfused_intermediates.resize(ib.size());
    for (size_t k = 0; k < ib.size(); ++k) {
      m.unfused_intermediates[k].resize(static_cast<size_t>(ib[k]));
      if (ib[k] > 0)
        drv.check(a.cuMemcpyDtoHAsync(m.unfused_intermediates[k].data(), inter_u[k].ptr(), m.unfused_intermediates[k].size(), s),
                  "cuMemcpyDtoHAsync (intermediates)");
    }
  }
  drv.check(a.cuStreamSynchronize(s), "cuStreamSynchronize (checked run)");
  if (!options.time) return m;

  const int reps = std::max(1, options.repeats);
  const int warm = std::max(0, options.warmup);
  size_t free_b = 0, total_b = 0;
  drv.check(a.cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo");

  // Buffer sets rotated between runs so that consecutive runs touch more than ~4x L2.
  auto sum = [](std::span<const int64_t> v) {
    int64_t t = 0;
    for (int64_t x : v) t += x;
    return t;
  };
  const int64_t set_bytes = sum(in_bytes) + sum(out_bytes) + sum(fused.intermediate_bytes()) +
                            sum(unfused.intermediate_bytes());
  const int sets = choose_buffer_sets(set_bytes, d.info().l2_bytes, options.l2_multiple, options.max_buffer_sets,
                                      static_cast<int64_t>(free_b));
  m.buffer_sets = sets;
  m.l2_resident = static_cast<double>(set_bytes) * sets < options.l2_multiple * static_cast<double>(d.info().l2_bytes);
  {
    struct Set {
      std::vector<DeviceBuffer> in, out, inter_f, inter_u;
      std::vector<cu::DevicePtr> in_p, out_p, inter_f_p, inter_u_p;
    };
    std::vector<Set> extra(static_cast<size_t>(sets - 1));
    for (Set& st : extra) {
      st.in = alloc_all(dc, in_bytes, "input copy");
      for (size_t i = 0; i < st.in.size(); ++i)
        if (in_bytes[i] > 0)
          drv.check(a.cuMemcpyDtoDAsync(st.in[i].ptr(), in0[i].ptr(), static_cast<size_t>(in_bytes[i]), s),
                    "cuMemcpyDtoDAsync (input copy)");
      st.out = alloc_all(dc, out_bytes, "output");
      st.inter_f = alloc_all(dc, fused.intermediate_bytes(), "fused intermediate");
      st.inter_u = alloc_all(dc, unfused.intermediate_bytes(), "unfused intermediate");
      st.in_p = ptrs_of(st.in);
      st.out_p = ptrs_of(st.out);
      st.inter_f_p = ptrs_of(st.inter_f);
      st.inter_u_p = ptrs_of(st.inter_u);
    }
    auto run_set = [&](const GpuProgram& p, bool is_fused, int k) {
      if (k % sets == 0) {
        p.enqueue(in0_p, is_fused ? out_f_p : out_u_p, params, s, is_fused ? inter_f_p : inter_u_p);
      } else {
        const Set& st = extra[static_cast<size_t>(k % sets - 1)];
        p.enqueue(st.in_p, st.out_p, params, s, is_fused ? st.inter_f_p : st.inter_u_p);
      }
    };
    auto time_path = [&](const GpuProgram& p, bool is_fused) {
      for (int w = 0; w < std::max(warm, sets); ++w) run_set(p, is_fused, w);
      EventPairs ev(d, reps);
      for (int r = 0; r < reps; ++r) {
        drv.check(a.cuEventRecord(ev.start(r), s), "cuEventRecord");
        run_set(p, is_fused, r);
        drv.check(a.cuEventRecord(ev.end(r), s), "cuEventRecord");
      }
      return ev.elapsed(reps);
    };
    const std::vector<double> tf = time_path(fused, true);
    const std::vector<double> tu = time_path(unfused, false);
    m.fused = make_path_timing(fused.kernel_count(), tf, fused.bytes_moved(), 0);
    m.unfused = make_path_timing(unfused.kernel_count(), tu, unfused.bytes_moved(), 0);
    drv.check(a.cuStreamSynchronize(s), "cuStreamSynchronize");
  }  // extra sets freed before the copy baseline allocates

  // The bandwidth ceiling: a device-to-device copy moving the same bytes as the fused path.
  m.copy_bytes = m.fused.bytes / 2;
  if (m.copy_bytes > 0) {
    const int csets = choose_buffer_sets(2 * m.copy_bytes, d.info().l2_bytes, options.l2_multiple,
                                         options.max_buffer_sets, static_cast<int64_t>(free_b));
    std::vector<DeviceBuffer> src, dst;
    for (int i = 0; i < csets; ++i) {
      src.emplace_back(dc, static_cast<size_t>(m.copy_bytes), "copy baseline source");
      dst.emplace_back(dc, static_cast<size_t>(m.copy_bytes), "copy baseline destination");
      drv.check(a.cuMemsetD8Async(src.back().ptr(), 0x3C, src.back().size(), s), "cuMemsetD8Async");
    }
    auto copy = [&](int k) {
      const size_t i = static_cast<size_t>(k % csets);
      drv.check(a.cuMemcpyDtoDAsync(dst[i].ptr(), src[i].ptr(), static_cast<size_t>(m.copy_bytes), s),
                "cuMemcpyDtoDAsync (copy baseline)");
    };
    for (int w = 0; w < std::max(warm, csets); ++w) copy(w);
    EventPairs ev(d, reps);
    for (int r = 0; r < reps; ++r) {
      drv.check(a.cuEventRecord(ev.start(r), s), "cuEventRecord");
      copy(r);
      drv.check(a.cuEventRecord(ev.end(r), s), "cuEventRecord");
    }
    m.copy_ms = median_of(ev.elapsed(reps));
    if (m.copy_ms > 0) m.copy_gbps = 2.0 * static_cast<double>(m.copy_bytes) / (m.copy_ms * 1e-3) / 1e9;
  }
  m.fused.pct_of_copy = m.copy_gbps > 0 ? 100.0 * m.fused.gbps / m.copy_gbps : 0;
  m.unfused.pct_of_copy = m.copy_gbps > 0 ? 100.0 * m.unfused.gbps / m.copy_gbps : 0;
  m.speedup = m.fused.median_ms > 0 ? m.unfused.median_ms / m.fused.median_ms : 0;
  return m;
}

}  // namespace fusejit::jit
