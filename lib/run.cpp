// fusejit::run_graph: the whole job of `fusejit run` — inputs, compile, fused and unfused runs
// (GPU or CPU), timing, checks against the reference evaluator, statistics, saved outputs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "ir/builder.h"
#include "ir/npy.h"
#include "ir/random_fill.h"
#include "ir/reference.h"
#include "ir/tensor.h"
#include "jit/compare.h"
#include "jit/nvrtc.h"
#include "fusejit/report.h"
#include "lib/internal.h"
#include "lib/program_impl.h"
#include "lib/report_format.h"
#include "lib/tolerance.h"

namespace fusejit {
namespace {

std::vector<ir::Tensor> make_inputs(const ir::Graph& g, const RunOptions& ro) {
  for (const auto& [name, file] : ro.input_files) {
    const std::string& wanted = name;  // clang 14 cannot capture a structured binding
    bool found = std::any_of(g.inputs.begin(), g.inputs.end(), [&](ir::NodeId id) { return g.node(id).name == wanted; });
    if (!found) throw ir::UserError("--input " + name + "=" + file + ": the graph has no input named '" + name + "'");
  }
  for (const auto& r : ro.input_ranges) {
    auto it = std::find_if(g.inputs.begin(), g.inputs.end(), [&](ir::NodeId id) { return g.node(id).name == r.first; });
    if (it == g.inputs.end()) throw ir::UserError("--range " + r.first + ": the graph has no input named '" + r.first + "'");
    if (g.node(*it).dtype == ir::DType::Bool)
      throw ir::UserError("--range " + r.first + ": input '" + r.first +
                          "' is bool; random bools are false/true with equal odds and take no range");
    bool from_file = std::any_of(ro.input_files.begin(), ro.input_files.end(), [&](const auto& f) { return f.first == r.first; });
    if (from_file) throw ir::UserError("--range " + r.first + ": input '" + r.first + "' is read from a file (--input), not generated");
  }
  std::vector<ir::Tensor> out;
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    const ir::Node& n = g.node(g.inputs[k]);
    std::vector<int64_t> shape = ir::shape_sizes(n.shape);
    auto file = std::find_if(ro.input_files.rbegin(), ro.input_files.rend(), [&](const auto& p) { return p.first == n.name; });
    if (file != ro.input_files.rend()) {
      std::string dims;
      for (const ir::Dim& d : n.shape)
        if (d.sym >= 0) dims += (dims.empty() ? "" : ", ") + g.dims[static_cast<size_t>(d.sym)].name;
      out.push_back(ir::read_npy_input(file->second, n.name, n.dtype, shape,
                                       dims.empty() ? "" : "(the graph's dims " + dims + " can be set to match with --dim NAME=VALUE)"));
      continue;
    }
    ir::FillSpec spec;
    auto range = std::find_if(ro.input_ranges.rbegin(), ro.input_ranges.rend(), [&](const auto& p) { return p.first == n.name; });
    if (range != ro.input_ranges.rend()) spec.range = ir::FillRange{range->second.first, range->second.second};
    else if (const ir::ValueRange& r = g.input_ranges[k]; r.set()) spec.range = ir::FillRange{r.lo, r.hi};  // `range` in the graph
    if (ro.special_values) spec.mode = ir::FillMode::Special;
    ir::Tensor t(n.dtype, shape);
    ir::random_fill(t, ir::input_seed(ro.seed, n.name), spec);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<ir::Scalar> run_params(const ir::Graph& g, const RunOptions& ro) {
  std::vector<ir::Scalar> out;
  for (const auto& [name, v] : ro.params) {
    const std::string& wanted = name;  // clang 14 cannot capture a structured binding
    bool found = std::any_of(g.params.begin(), g.params.end(), [&](const ir::ParamDecl& p) { return g.node(p.node).name == wanted; });
    if (!found) throw ir::UserError("--param " + name + ": the graph has no param named '" + name + "'");
  }
  for (const ir::ParamDecl& p : g.params) {
    const ir::Node& n = g.node(p.node);
    // The last value given wins, as for --dim and --range.
    auto it = std::find_if(ro.params.rbegin(), ro.params.rend(), [&](const auto& q) { return q.first == n.name; });
    out.push_back(it == ro.params.rend() ? p.default_value : to_ir_scalar(it->second, n.dtype));
  }
  return out;
}

OutputStats stats_of(const TensorInfo& info, ir::DType dtype, std::span<const std::byte> bytes) {
  OutputStats s;
  s.info = info;
  ir::Tensor t;
  t.dtype = dtype;
  t.shape = info.shape;
  t.data.assign(bytes.begin(), bytes.end());
  int64_t n = t.numel();
  // As NumPy's nanmin / nanmax / nanmean: NaNs are counted, not averaged; infinities take part
  // (so the mean of [inf, 1] is inf); all-NaN or empty gives NaN.
  double sum = 0;
  int64_t counted = 0;
  s.min = s.max = s.mean = std::nan("");
  for (int64_t i = 0; i < n; ++i) {
    ir::Scalar v = t.get(i);
    double d = ir::is_float(dtype) ? v.f : static_cast<double>(v.i);
    if (std::isnan(d)) {
      ++s.nan_count;
      continue;
    }
    if (std::isinf(d)) ++s.inf_count;
    if (counted == 0 || d < s.min) s.min = d;
    if (counted == 0 || d > s.max) s.max = d;
    sum += d;
    ++counted;
  }
  if (counted) s.mean = sum / static_cast<double>(counted);
  return s;
}

std::span<const std::byte> bytes_of(const ir::Tensor& t) { return {t.data.data(), t.data.size()}; }

// fused vs unfused (bitwise in strict mode) and each vs the reference (exact on the CPU).
CheckReport compare_all(const std::string& what, const ir::Graph& g, int64_t tolerance,
                        const std::vector<std::span<const std::byte>>& expected,
                        const std::vector<std::span<const std::byte>>& actual) {
  CheckReport c;
  c.what = what;
  c.ran = true;
  uint64_t max_ulps = 0;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const ir::Node& n = g.node(g.outputs[k].node);
    std::vector<int64_t> shape = ir::shape_sizes(n.shape);
    jit::CompareResult r = jit::compare_outputs(n.dtype, expected[k], actual[k], ir::num_elements(n.shape), tolerance,
                                                g.outputs[k].name, shape);
    max_ulps = std::max(max_ulps, r.max_ulps);
    if (!r.ok && c.ok) {
      c.ok = false;
      c.detail = r.message;
    }
  }
  if (c.ok) c.detail = tolerance == jit::kBitwise        ? "bitwise identical"
                       : tolerance == jit::kBitwiseAnyNaN ? "bitwise identical (NaN payloads aside)"
                       : tolerance == 0           ? "identical values"
                                                  : "within " + std::to_string(tolerance) + " ulp (max " + std::to_string(max_ulps) + ")";
  return c;
}

// Reports how far the outputs are from the reference, without a pass/fail bound (used where the
// per-op check is the real criterion, and in fast-math mode).
CheckReport distance_report(const std::string& what, const ir::Graph& g, const std::vector<std::span<const std::byte>>& expected,
                            const std::vector<std::span<const std::byte>>& actual) {
  CheckReport c;
  c.what = what;
  c.ran = true;
  uint64_t max_ulps = 0;
  int64_t mismatches = 0, total = 0;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const ir::Node& n = g.node(g.outputs[k].node);
    int64_t count = ir::num_elements(n.shape);
    jit::CompareResult r = jit::compare_outputs(n.dtype, expected[k], actual[k], count, 0, g.outputs[k].name);
    max_ulps = std::max(max_ulps, r.max_ulps);
    mismatches += r.mismatches;
    total += count;
  }
  c.detail = mismatches == 0 ? "identical values"
                             : std::to_string(mismatches) + " of " + std::to_string(total) + " elements differ, by at most " +
                                   std::to_string(max_ulps) +
                                   " ulp (a NaN against a number is counted, not measured); informational";
  return c;
}

// The per-op check of the unfused GPU run: every node recomputed by the reference from the GPU's
// own operand values must match the GPU's value within that op's documented bound. This is where
// the CUDA Math API's ulp bounds apply (errors of a whole chain can grow through cancellation).
CheckReport per_op_check(const ir::Graph& g, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Scalar>& params,
                         const std::vector<ir::NodeId>& inter_nodes, const std::vector<std::vector<std::byte>>& inter_values,
                         const std::vector<std::vector<std::byte>>& outputs) {
  CheckReport c;
  c.what = "unfused GPU, each op vs reference";
  c.ran = true;
  // Device values of every node the unfused run materialised.
  std::vector<const std::vector<std::byte>*> value(static_cast<size_t>(g.size()), nullptr);
  for (size_t k = 0; k < inter_nodes.size(); ++k) value[static_cast<size_t>(inter_nodes[k])] = &inter_values[k];
  for (size_t k = 0; k < g.outputs.size(); ++k) value[static_cast<size_t>(g.outputs[k].node)] = &outputs[k];
  int checked = 0;
  uint64_t worst = 0;
  for (ir::NodeId id = 0; id < g.size(); ++id) {
    const ir::Node& n = g.node(id);
    if (ir::is_leaf(n.op) || !value[static_cast<size_t>(id)]) continue;
    // A one-node graph over the node's operands, evaluated by the reference.
    ir::GraphBuilder b("check");
    std::vector<ir::NodeId> args;
    std::vector<ir::Tensor> operand_tensors;
    bool have_all = true;
    for (int a = 0; a < n.nargs && have_all; ++a) {
      const ir::Node& op = g.node(n.args[a]);
      if (op.op == ir::Op::Const) {
        args.push_back(b.constant(op.value));
      } else if (op.op == ir::Op::Param) {
        args.push_back(b.constant(params[static_cast<size_t>(op.slot)]));
      } else {
        ir::Shape s = op.shape;
        for (ir::Dim& d : s) d.sym = -1;
        args.push_back(b.add_input("a" + std::to_string(a), op.dtype, s));
        ir::Tensor t;
        if (op.op == ir::Op::Input) {
          t = inputs[static_cast<size_t>(op.slot)];
        } else if (value[static_cast<size_t>(n.args[a])]) {
          t.dtype = op.dtype;
          t.shape = ir::shape_sizes(op.shape);
          t.data = *value[static_cast<size_t>(n.args[a])];
        } else {
          have_all = false;
        }
        operand_tensors.push_back(std::move(t));
      }
    }
    if (!have_all) continue;
    ir::NodeId r = b.add_typed(n.op, n.dtype, args);
    b.add_output("r", ir::Operand::of(r));
    ir::Graph one = b.finish();
    ir::Tensor ref = ir::evaluate_reference(one, operand_tensors, {})[0];
    OpTolerance tol = gpu_op_tolerance(n.op, n.dtype);
    std::span<const std::byte> got(value[static_cast<size_t>(id)]->data(), value[static_cast<size_t>(id)]->size());
    int64_t count = ir::num_elements(n.shape);
    jit::CompareResult cr = jit::compare_outputs(n.dtype, bytes_of(ref), got, count, tol.ulps, "v" + std::to_string(id));
    ++checked;
    worst = std::max(worst, cr.max_ulps);
    if (!cr.ok && tol.abs_scale > 0 && !operand_tensors.empty()) {
      // Composite activation near cancellation: accept, element by element, within ulps or within
      // abs_scale * max(|x|, 1) (docs/ops.md).
      const ir::Tensor& x = operand_tensors[0];
      ir::Tensor gt;
      gt.dtype = n.dtype;
      gt.shape = ir::shape_sizes(n.shape);
      gt.data.assign(got.begin(), got.end());
      bool ok = true;
      for (int64_t i = 0; i < count && ok; ++i) {
        double rv = ref.get(i).f, gv = gt.get(i).f, xv = x.get(i % std::max<int64_t>(1, x.numel())).f;
        if (std::isnan(rv) || std::isnan(gv)) {
          ok = std::isnan(rv) && std::isnan(gv);
          continue;
        }
        if (rv == gv) continue;
        ok = std::fabs(rv - gv) <= tol.abs_scale * std::max(std::fabs(xv), 1.0) ||
             jit::compare_outputs(n.dtype, std::span<const std::byte>(ref.data.data() + i * ir::dtype_size(n.dtype), ir::dtype_size(n.dtype)),
                                  std::span<const std::byte>(gt.data.data() + i * ir::dtype_size(n.dtype), ir::dtype_size(n.dtype)), 1,
                                  tol.ulps).ok;
      }
      if (ok) continue;
    }
    if (!cr.ok && c.ok) {
      c.ok = false;
      c.detail = std::string(ir::op_name(n.op)) + " (node v" + std::to_string(id) +
                 (n.loc.known() ? ", graph line " + std::to_string(n.loc.line) : std::string()) + ", bound " +
                 std::to_string(tol.ulps) + " ulp): " + cr.message;
    }
  }
  if (c.ok) c.detail = std::to_string(checked) + " ops within their documented bounds (max " + std::to_string(worst) + " ulp)";
  return c;
}

std::vector<std::span<const std::byte>> spans(const std::vector<std::vector<std::byte>>& v) {
  std::vector<std::span<const std::byte>> out;
  for (const auto& b : v) out.emplace_back(b.data(), b.size());
  return out;
}
std::vector<std::span<const std::byte>> spans(const std::vector<ir::Tensor>& v) {
  std::vector<std::span<const std::byte>> out;
  for (const auto& t : v) out.emplace_back(t.data.data(), t.data.size());
  return out;
}

void fill_compile(PathReport& p, const std::vector<KernelInfo>& kernels) {
  for (const KernelInfo& k : kernels) {
    if (k.cache == "memory") ++p.memory_hits;
    else if (k.cache == "disk") ++p.disk_hits;
    else ++p.compiled;
    p.compile_ms += k.compile_ms;
  }
}

}  // namespace

RunReport run_graph(const Graph& graph, const RunOptions& ro) {
  const ir::Graph& g = graph.impl().graph;
  return translate_errors([&] {
    RunReport rep;
    rep.graph_name = g.name.empty() ? g.file : g.name;
    rep.inputs = graph.inputs();
    rep.outputs = graph.outputs();
    rep.op_count = g.op_count();
    for (const TensorInfo& t : rep.outputs) rep.elements = std::max(rep.elements, t.elements());
    rep.fast_math = ro.options.fast_math;
    rep.seed = ro.seed;
    rep.special_values = ro.special_values;
    rep.dims = graph.dims();
    rep.nvrtc_version = jit::nvrtc_version().str();

    std::vector<ir::Tensor> inputs = make_inputs(g, ro);
    std::vector<ir::Scalar> params = run_params(g, ro);
    for (size_t k = 0; k < params.size(); ++k)
      rep.params.emplace_back(g.node(g.params[k].node).name,
                              ir::is_float(params[k].dtype) ? params[k].f : static_cast<double>(params[k].i));

    Program prog = Program::compile(graph, ro.options);
    const Program::Impl& p = prog.impl();
    rep.backend = p.backend == Backend::Cuda ? "cuda" : "cpu";
    rep.backend_note = p.backend_note;
    rep.target = p.target;
    rep.rewrites = prog.rewrite_summary();
    rep.fused.name = "fused";
    rep.unfused.name = "unfused";
    rep.fused.kernels = static_cast<int>(p.fused_plan.groups.size());
    rep.unfused.kernels = static_cast<int>(p.unfused_plan.groups.size());
    for (const ir::FusionGroup& grp : p.fused_plan.groups) {
      ir::GroupTraffic t = ir::group_traffic(p.rewritten.impl().graph, grp);
      rep.fused.bytes += t.read_bytes + t.write_bytes;
    }
    for (const ir::FusionGroup& grp : p.unfused_plan.groups) {
      ir::GroupTraffic t = ir::group_traffic(g, grp);
      rep.unfused.bytes += t.read_bytes + t.write_bytes;
    }
    rep.predicted_ratio = rep.fused.bytes > 0 ? static_cast<double>(rep.unfused.bytes) / static_cast<double>(rep.fused.bytes) : 1.0;
    rep.plan = std::to_string(rep.fused.kernels) + " fused kernel(s) vs " + std::to_string(rep.unfused.kernels) +
               " unfused; predicted traffic ratio " + fmt_ratio(rep.predicted_ratio);
    fill_compile(rep.fused, p.fused_kernels);
    fill_compile(rep.unfused, p.unfused_kernels);

    std::vector<std::vector<std::byte>> fused_out, unfused_out;
    std::vector<ir::NodeId> inter_nodes;
    std::vector<std::vector<std::byte>> inter_values;
    if (p.backend == Backend::Cuda) {
      const jit::DeviceInfo& d = p.device->info();
      rep.device = d.name + " (" + d.sm_arch() + ", " + std::to_string(d.sm_count) + " SMs)";
      rep.driver_version = jit::cuda_version_string(d.driver_version);
      std::vector<std::vector<std::byte>> host_in;
      for (const ir::Tensor& t : inputs) host_in.push_back(t.data);
      jit::MeasureOptions mo;
      mo.warmup = ro.warmup;
      mo.repeats = ro.repeats;
      mo.keep_intermediates = ro.check;
      jit::GpuMeasurement m = jit::run_and_measure(*p.gpu_fused, *p.gpu_unfused, host_in, params, mo);
      rep.fused.time_ms = m.fused.median_ms;
      rep.fused.gbps = m.fused.gbps;
      rep.fused.pct_of_copy = m.fused.pct_of_copy;
      rep.unfused.time_ms = m.unfused.median_ms;
      rep.unfused.gbps = m.unfused.gbps;
      rep.unfused.pct_of_copy = m.unfused.pct_of_copy;
      rep.copy_gbps = m.copy_gbps;
      rep.speedup = m.speedup;
      if (m.l2_resident) rep.warnings.push_back("the working set fits in L2 even with buffer rotation: times flatter DRAM bandwidth");
      fused_out = std::move(m.fused_outputs);
      unfused_out = std::move(m.unfused_outputs);
      inter_nodes = p.gpu_unfused->intermediate_nodes();
      inter_values = std::move(m.unfused_intermediates);
    } else {
      rep.device = "host CPU";
      std::vector<jit::HostBuffer> bufs;
      for (const ir::Tensor& t : inputs) bufs.emplace_back(t.data.data(), t.data.size());
      auto time_path = [&](const jit::CpuProgram& cp, PathReport& pr, std::vector<std::vector<std::byte>>& out) {
        int reps = std::max(1, std::min(ro.repeats, 3));  // the CPU is slow: a few runs, median
        std::vector<double> times;
        for (int r = 0; r < reps; ++r) {
          jit::CpuRunResult res = jit::run_cpu_program(cp, bufs, params);
          times.push_back(res.run_ms);
          if (r == 0)
            for (const jit::HostBuffer& b : res.outputs)
              out.emplace_back(reinterpret_cast<const std::byte*>(b.data()), reinterpret_cast<const std::byte*>(b.data()) + b.size());
        }
        std::sort(times.begin(), times.end());
        pr.time_ms = times[times.size() / 2];
        pr.gbps = pr.time_ms > 0 ? static_cast<double>(pr.bytes) / (pr.time_ms * 1e6) : 0.0;
      };
      time_path(*p.cpu_fused, rep.fused, fused_out);
      time_path(*p.cpu_unfused, rep.unfused, unfused_out);
      rep.speedup = rep.fused.time_ms > 0 ? rep.unfused.time_ms / rep.fused.time_ms : 0.0;
    }

    if (ro.check) {
      bool strict = !ro.options.fast_math;
      // GPU: every bit must match, NaN payloads aside (a rewrite such as x * 1 -> x keeps an input
      // NaN's payload where the GPU multiply returns its canonical NaN), but never the poison the
      // outputs were filled with. CPU: the host compiler may give a NaN another sign or payload in
      // one build than in the other; values must match with any NaN equal. NaN payloads are not
      // part of the contract (docs/ops.md).
      int64_t tol = p.backend == Backend::Cuda ? jit::kBitwiseAnyNaN : 0;
      if (strict) rep.checks.push_back(compare_all("fused vs unfused", g, tol, spans(unfused_out), spans(fused_out)));
      else rep.checks.push_back(distance_report("fused (fast-math) vs unfused (strict)", g, spans(unfused_out), spans(fused_out)));
      std::vector<ir::Tensor> ref = ir::evaluate_reference(g, inputs, params);
      if (p.backend == Backend::Cpu) {
        // Same semantics header, same host compiler: every value must match exactly.
        rep.checks.push_back(compare_all("unfused vs reference", g, 0, spans(ref), spans(unfused_out)));
        if (strict) rep.checks.push_back(compare_all("fused vs reference", g, 0, spans(ref), spans(fused_out)));
        else rep.checks.push_back(distance_report("fused (fast-math) vs reference", g, spans(ref), spans(fused_out)));
      } else {
        rep.checks.push_back(per_op_check(g, inputs, params, inter_nodes, inter_values, unfused_out));
        rep.checks.push_back(distance_report("fused vs reference (whole graph)", g, spans(ref), spans(fused_out)));
      }
    }
    for (size_t k = 0; k < g.outputs.size(); ++k)
      rep.stats.push_back(stats_of(rep.outputs[k], g.node(g.outputs[k].node).dtype, fused_out[k]));

    if (!ro.save_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(ro.save_dir, ec);
      if (ec) throw ir::UserError("--save-dir " + ro.save_dir + ": " + ec.message());
      for (size_t k = 0; k < g.outputs.size(); ++k) {
        ir::Tensor t;
        t.dtype = g.node(g.outputs[k].node).dtype;
        t.shape = rep.outputs[k].shape;
        t.data = fused_out[k];
        ir::write_npy((std::filesystem::path(ro.save_dir) / (g.outputs[k].name + ".npy")).string(), t);
      }
    }
    return rep;
  }, g.file, graph.impl().source);
}

bool RunReport::ok() const {
  return std::all_of(checks.begin(), checks.end(), [](const CheckReport& c) { return !c.ran || c.ok; });
}

}  // namespace fusejit
