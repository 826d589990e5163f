// fusejit::run_graph: the whole job of `fusejit run` as a client of Program's public API: inputs,
// compile, fused and unfused runs (GPU or CPU), timing, checks against the reference evaluator,
// statistics, saved outputs.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/builder.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "ir/passes/plan_report.h"
#include "ir/plan.h"
#include "ir/random_fill.h"
#include "ir/reduce.h"
#include "ir/reference.h"
#include "ir/tensor.h"
#include "jit/compare.h"
#include "jit/nvrtc.h"
#include "fusejit/report.h"
#include "lib/internal.h"
#include "lib/launch_check.h"
#include "lib/program_impl.h"
#include "lib/report_format.h"

namespace fusejit {
namespace {

using Bytes = std::span<const std::byte>;

// An input named twice in `files` (label: the option's name) is an error: which file would it read?
void refuse_repeated_inputs(const std::vector<std::pair<std::string, std::string>>& files, const std::string& label) {
  for (size_t k = 0; k < files.size(); ++k)
    for (size_t j = 0; j < k; ++j)
      if (files[j].first == files[k].first)
        throw ir::UserError(label + " " + files[k].first + "=" + files[k].second + ": input '" + files[k].first +
                            "' is given twice (" + files[j].second + " before)");
}

// Every input read from a file (no repeats, each one of the graph's: checked before): the options
// of the random inputs change nothing, said once (a hostile tester's find: they were taken silently).
void warn_unused_fill_options(const ir::Graph& g, const RunOptions& ro) {
  if (g.inputs.empty() || ro.input_files.size() < g.inputs.size() || (!ro.special_values && ro.seed == 0)) return;
  const MessageStyle style = ro.options.message_style;
  std::string given = ro.special_values ? option_name(OptionField::SpecialValues, style) : "";
  if (ro.seed != 0)
    given += (given.empty() ? "" : " and ") + option_name(OptionField::Seed, style) + " " + std::to_string(ro.seed);
  warn(given + (ro.special_values && ro.seed != 0 ? " have" : " has") + " no effect: every input is read from a file (" +
       option_name(OptionField::InputFiles, style) + ")");
}

// Every input, option or graph name given in RunOptions must exist and make sense.
void check_input_options(const ir::Graph& g, const RunOptions& ro) {
  const MessageStyle style = ro.options.message_style;
  const std::string files = option_name(OptionField::InputFiles, style), ranges = option_name(OptionField::InputRanges, style);
  auto find = [&](const std::string& name) {
    return std::find_if(g.inputs.begin(), g.inputs.end(), [&](ir::NodeId id) { return g.node(id).name == name; });
  };
  // "the graph has no input named 'msk' (its inputs: s, mask)", as for an unknown param.
  auto no_input = [&](const std::string& name) {
    const std::string names = input_names(g);
    return "the graph has no input named '" + name + "' (" + (names.empty() ? "it has no inputs" : "its inputs: " + names) + ")";
  };
  for (const auto& [name, file] : ro.input_files)
    if (find(name) == g.inputs.end()) throw ir::UserError(files + " " + name + "=" + file + ": " + no_input(name));
  refuse_repeated_inputs(ro.input_files, files);
  for (const auto& r : ro.input_ranges) {
    auto it = find(r.first);
    if (it == g.inputs.end()) throw ir::UserError(ranges + " " + r.first + ": " + no_input(r.first));
    if (g.node(*it).dtype == ir::DType::Bool)
      throw ir::UserError(ranges + " " + r.first + ": input '" + r.first +
                          "' is bool; random bools are false/true with equal odds and take no range");
    bool from_file = std::any_of(ro.input_files.begin(), ro.input_files.end(), [&](const auto& f) { return f.first == r.first; });
    if (from_file)
      throw ir::UserError(ranges + " " + r.first + ": input '" + r.first + "' is read from a file (" + files + "), not generated");
    try {  // the dtype's own limits (random_fill checks them again, for the graph's `range`)
      ir::check_fill_range(g.node(*it).dtype, ir::FillRange{r.second.first, r.second.second});
    } catch (const ir::UserError& e) {
      throw ir::UserError(ranges + " " + r.first + ": " + e.what());
    }
  }
  warn_unused_fill_options(g, ro);
}


// Input k: read from its .npy file, or random (deterministic in the seed).
ir::Tensor make_input(const ir::Graph& g, size_t k, const RunOptions& ro) {
  const ir::Node& n = g.node(g.inputs[k]);
  std::vector<int64_t> shape = ir::shape_sizes(n.shape);
  auto file = std::find_if(ro.input_files.rbegin(), ro.input_files.rend(), [&](const auto& p) { return p.first == n.name; });
  if (file != ro.input_files.rend()) {
    std::string dims;
    std::vector<int32_t> named;  // each dim once ([N, N] names N once)
    for (const ir::Dim& d : n.shape)
      if (d.sym >= 0 && std::find(named.begin(), named.end(), d.sym) == named.end()) {
        named.push_back(d.sym);
        dims += (dims.empty() ? "" : ", ") + g.dims[static_cast<size_t>(d.sym)].name;
      }
    // `fusejit run` takes dims from the files (fusejit::input_file_dims) unless --dim sets them.
    const std::string hint = ro.options.message_style == MessageStyle::CommandLine
                                 ? "(--dim sets the graph's dims " + dims + "; without it they follow the file)"
                                 : "(the graph's dims " + dims + " can be set to match: Graph::with_dims, with "
                                   "fusejit::input_file_dims to read them from the files)";
    const std::string expected = std::string(ir::dtype_name(n.dtype)) + ir::shape_to_string(n.shape, &g);  // [T=4096, D=4096]
    return ir::read_npy_input(file->second, n.name, n.dtype, shape, dims.empty() ? "" : hint, expected);
  }
  ir::FillSpec spec;
  auto range = std::find_if(ro.input_ranges.rbegin(), ro.input_ranges.rend(), [&](const auto& p) { return p.first == n.name; });
  if (range != ro.input_ranges.rend()) spec.range = ir::FillRange{range->second.first, range->second.second};
  else if (const ir::ValueRange& r = g.input_ranges[k]; r.set()) spec.range = ir::FillRange{r.lo, r.hi};  // `range` in the graph
  if (ro.special_values) spec.mode = ir::FillMode::Special;
  ir::Tensor t(n.dtype, shape);
  ir::random_fill(t, ir::input_seed(ro.seed, n.name), spec);
  return t;
}

std::vector<ir::Tensor> make_inputs(const ir::Graph& g, const RunOptions& ro) {
  check_input_options(g, ro);
  std::vector<ir::Tensor> out;
  for (size_t k = 0; k < g.inputs.size(); ++k) out.push_back(make_input(g, k, ro));
  return out;
}

std::vector<TensorView> views_of(const std::vector<ir::Tensor>& ts) {
  std::vector<TensorView> out;
  for (const ir::Tensor& t : ts) out.emplace_back(from_ir(t.dtype), t.shape, t.data);
  return out;
}

std::vector<Bytes> bytes_of(const std::vector<ir::Tensor>& ts) {
  std::vector<Bytes> out;
  for (const ir::Tensor& t : ts) out.emplace_back(t.data);
  return out;
}

std::vector<Bytes> bytes_of(const std::vector<HostTensor>& ts) {
  std::vector<Bytes> out;
  for (const HostTensor& t : ts) out.push_back(t.data());
  return out;
}

OutputStats stats_of(const TensorInfo& info, const HostTensor& t) {
  OutputStats s;
  s.info = info;
  const ir::DType dtype = to_ir(t.dtype());
  const size_t esz = static_cast<size_t>(ir::dtype_size(dtype));
  // As NumPy's nanmin / nanmax / nanmean: NaNs are counted, not averaged; infinities take part
  // (so the mean of [inf, 1] is inf); all-NaN or empty gives NaN.
  double sum = -0.0;  // addition's identity: the mean of -0.0s is -0.0, as NumPy's (0.0 + -0.0 is 0.0)
  int64_t counted = 0;
  s.min = s.max = s.mean = std::nan("");
  for (int64_t i = 0; i < t.elements(); ++i) {
    const ir::Scalar v = ir::load_element(dtype, t.data().data() + static_cast<size_t>(i) * esz);
    const double d = ir::is_float(dtype) ? v.f : static_cast<double>(v.i);
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

// fused vs unfused (bitwise in strict mode) and each vs the reference (exact on the CPU).
CheckReport compare_all(const std::string& what, const ir::Graph& g, int64_t tolerance, const std::vector<Bytes>& expected,
                        const std::vector<Bytes>& actual) {
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
CheckReport distance_report(const std::string& what, const ir::Graph& g, const std::vector<Bytes>& expected,
                            const std::vector<Bytes>& actual) {
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
  // Elements 0 ulp apart differ in the sign of zero (x*0 -> 0 in fast mode) or are a NaN against a number.
  const std::string by = max_ulps == 0 ? " only in the sign of a zero or a NaN against a number"
                                       : ", by at most " + std::to_string(max_ulps) +
                                             " ulp (a NaN against a number is counted, not measured)";
  c.detail = mismatches == 0 ? "identical values"
                             : std::to_string(mismatches) + " of " + std::to_string(total) + " elements differ" + by +
                                   "; informational";
  return c;
}

// The device value of every node the unfused run materialised (graph outputs and intermediates),
// by node id; null where there is none.
std::vector<const HostTensor*> device_values(const ir::Graph& g, const Measurement& unfused) {
  std::vector<const HostTensor*> value(static_cast<size_t>(g.size()), nullptr);
  for (const auto& [id, t] : unfused.intermediates) value[static_cast<size_t>(id)] = &t;
  for (size_t k = 0; k < g.outputs.size(); ++k) value[static_cast<size_t>(g.outputs[k].node)] = &unfused.outputs[k];
  return value;
}

// Node `id` recomputed by the reference from the device's own operand values (a one-node graph);
// nullopt when an operand's device value is unknown. `operands` receives the tensor operands.
std::optional<ir::Tensor> reference_of_node(const ir::Graph& g, ir::NodeId id, const std::vector<ir::Tensor>& inputs,
                                            const std::vector<ir::Scalar>& params,
                                            const std::vector<const HostTensor*>& value, std::vector<ir::Tensor>& operands) {
  const ir::Node& n = g.node(id);
  ir::GraphBuilder b("check");
  std::vector<ir::NodeId> args;
  for (int a = 0; a < n.nargs; ++a) {
    const ir::Node& op = g.node(n.args[a]);
    if (op.op == ir::Op::Const) {
      args.push_back(b.constant(op.value));
      continue;
    }
    if (op.op == ir::Op::Param) {
      args.push_back(b.constant(params[static_cast<size_t>(op.slot)]));
      continue;
    }
    ir::Shape s = op.shape;
    for (ir::Dim& d : s) d.sym = -1;
    args.push_back(b.add_input("a" + std::to_string(a), op.dtype, s));
    if (op.op == ir::Op::Input) {
      operands.push_back(inputs[static_cast<size_t>(op.slot)]);
      continue;
    }
    const HostTensor* v = value[static_cast<size_t>(n.args[a])];
    if (!v) return std::nullopt;
    ir::Tensor t(op.dtype, ir::shape_sizes(op.shape));
    std::copy(v->data().begin(), v->data().end(), t.data.begin());
    operands.push_back(std::move(t));
  }
  // A reduction keeps its axes; the GPU computes it in the same fixed order, so it is exact.
  const ir::NodeId r = ir::is_reduction(n.op) ? b.add_reduce(n.op, n.dtype, args[0], n.red) : b.add_typed(n.op, n.dtype, args);
  b.add_output("r", ir::Operand::of(r));
  return ir::evaluate_reference(b.finish(), operands, {})[0];
}

// Composite activations near cancellation: accepted element by element within the ulp bound or
// within abs_scale * max(|x|, 1), x the first operand (docs/ops.md).
bool within_abs_bound(ir::DType dtype, const ir::Tensor& ref, Bytes got, const ir::Tensor& x, const jit::OpTolerance& tol) {
  const size_t esz = static_cast<size_t>(ir::dtype_size(dtype));
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double rv = ref.get(i).f, gv = ir::load_element(dtype, got.data() + static_cast<size_t>(i) * esz).f;
    const double xv = x.get(i % std::max<int64_t>(1, x.numel())).f;
    if (std::isnan(rv) || std::isnan(gv)) {
      if (std::isnan(rv) != std::isnan(gv)) return false;
      continue;
    }
    if (rv == gv || std::fabs(rv - gv) <= tol.abs_scale * std::max(std::fabs(xv), 1.0)) continue;
    const Bytes r1(ref.data.data() + static_cast<size_t>(i) * esz, esz), g1(got.data() + static_cast<size_t>(i) * esz, esz);
    if (!jit::compare_outputs(dtype, r1, g1, 1, tol.ulps).ok) return false;
  }
  return true;
}

// The per-op check of the unfused GPU run: every node recomputed by the reference from the GPU's
// own operand values must match the GPU's value within that op's documented bound. This is where
// the CUDA Math API's ulp bounds apply (errors of a whole chain can grow through cancellation).
CheckReport per_op_check(const ir::Graph& g, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Scalar>& params,
                         const Measurement& unfused) {
  CheckReport c;
  c.what = "unfused GPU, each op vs reference";
  c.ran = true;
  const std::vector<const HostTensor*> value = device_values(g, unfused);
  int checked = 0;
  uint64_t worst = 0;
  for (ir::NodeId id = 0; id < g.size(); ++id) {
    const ir::Node& n = g.node(id);
    if (ir::is_leaf(n.op) || !value[static_cast<size_t>(id)]) continue;
    std::vector<ir::Tensor> operands;
    std::optional<ir::Tensor> ref = reference_of_node(g, id, inputs, params, value, operands);
    if (!ref) continue;
    const jit::OpTolerance tol = jit::gpu_op_tolerance(n.op, n.dtype);
    const Bytes got = value[static_cast<size_t>(id)]->data();
    const jit::CompareResult cr =
        jit::compare_outputs(n.dtype, ref->data, got, ir::num_elements(n.shape), tol.ulps, "v" + std::to_string(id));
    ++checked;
    worst = std::max(worst, cr.max_ulps);
    if (cr.ok || (tol.abs_scale > 0 && !operands.empty() && within_abs_bound(n.dtype, *ref, got, operands[0], tol))) continue;
    if (c.ok) {
      c.ok = false;
      c.detail = std::string(ir::op_name(n.op)) + " (node v" + std::to_string(id) +
                 (n.loc.known() ? ", graph line " + std::to_string(n.loc.line) : std::string()) + ", bound " +
                 std::to_string(tol.ulps) + " ulp): " + cr.message;
    }
  }
  if (c.ok) c.detail = std::to_string(checked) + " ops within their documented bounds (max " + std::to_string(worst) + " ulp)";
  return c;
}

// The checks of both paths: fused vs unfused, and each against the reference evaluator.
void add_checks(RunReport& rep, const ir::Graph& g, const Program& prog, const std::vector<ir::Tensor>& inputs,
                const std::vector<ir::Scalar>& params, const Measurement& fused, const Measurement& unfused) {
  const bool strict = !prog.fast_math(), gpu = prog.backend() == Backend::Cuda;
  const std::vector<Bytes> f = bytes_of(fused.outputs), u = bytes_of(unfused.outputs);
  // GPU: every bit must match, NaN payloads aside (a rewrite such as x * 1 -> x keeps an input
  // NaN's payload where the GPU multiply returns its canonical NaN), but never the poison the
  // outputs were filled with. CPU: the host compiler may give a NaN another sign or payload in
  // one build than in the other; values must match with any NaN equal. NaN payloads are not
  // part of the contract (docs/ops.md).
  const int64_t tol = gpu ? jit::kBitwiseAnyNaN : 0;
  if (strict) rep.checks.push_back(compare_all("fused vs unfused", g, tol, u, f));
  else rep.checks.push_back(distance_report("fused (fast-math) vs unfused (strict)", g, u, f));
  const std::vector<ir::Tensor> ref_t = ir::evaluate_reference(g, inputs, params);
  const std::vector<Bytes> ref = bytes_of(ref_t);
  if (gpu) {
    rep.checks.push_back(per_op_check(g, inputs, params, unfused));
    rep.checks.push_back(distance_report("fused vs reference (whole graph)", g, ref, f));
    return;
  }
  // Same semantics header, same host compiler: every value must match exactly.
  rep.checks.push_back(compare_all("unfused vs reference", g, 0, ref, u));
  if (strict) rep.checks.push_back(compare_all("fused vs reference", g, 0, ref, f));
  else rep.checks.push_back(distance_report("fused (fast-math) vs reference", g, ref, f));
}

void fill_path(PathReport& p, const char* name, const std::vector<KernelInfo>& kernels) {
  p.name = name;
  p.kernels = static_cast<int>(kernels.size());
  for (const KernelInfo& k : kernels) {
    p.bytes = ir::add_bytes(p.bytes, ir::add_bytes(k.read_bytes, k.write_bytes));
    switch (k.cache) {
      case CacheOutcome::MemoryHit: ++p.memory_hits; break;
      case CacheOutcome::DiskHit:
      case CacheOutcome::Loaded: ++p.disk_hits; break;  // a binary read from disk either way
      case CacheOutcome::Compiled: ++p.compiled; break;
      case CacheOutcome::NotBuilt: break;               // run_graph builds both plans
    }
    p.compile_ms += k.compile_ms;
  }
}

void fill_timing(PathReport& p, const Measurement& m, double copy_gbps) {
  p.launches = m.kernels;
  p.time_ms = m.median_ms;
  p.gbps = m.gbps;
  p.pct_of_copy = copy_gbps > 0 ? 100.0 * m.gbps / copy_gbps : 0.0;
}

// The nodes output `name` is computed from (itself included), by id.
std::vector<char> feeds(const ir::Graph& g, const std::string& name) {
  std::vector<char> in(g.nodes.size(), 0);
  for (const ir::OutputDecl& o : g.outputs)
    if (o.name == name) in[static_cast<size_t>(o.node)] = 1;
  for (ir::NodeId id = g.size() - 1; id >= 0; --id)  // operands come before their users
    if (in[static_cast<size_t>(id)])
      for (int k = 0; k < g.node(id).nargs; ++k) in[static_cast<size_t>(g.node(id).args[k])] = 1;
  return in;
}

// Among the nodes `used`, a NaN param (NaNs whatever the inputs), else a mean (var and std are
// means) that divides by max(0, n - correction) = 0 at these dims (0/0); "" when neither.
std::string nan_cause(const ir::Graph& g, const std::vector<ir::Scalar>& params, const std::vector<char>& used) {
  for (size_t k = 0; k < params.size(); ++k)
    if (ir::is_float(params[k].dtype) && std::isnan(params[k].f) && used[static_cast<size_t>(g.params[k].node)])
      return fmt::format("param '{}' is NaN", g.node(g.params[k].node).name);
  for (ir::NodeId id = 0; id < g.size(); ++id) {
    const ir::Node& n = g.node(id);
    if (n.op != ir::Op::Mean || !used[static_cast<size_t>(id)]) continue;
    const int64_t len = ir::reduce_length(g.node(n.args[0]).shape, n.red.axes);
    if (len > n.red.correction) continue;
    return fmt::format("the mean{} (var and std are means) reduces {} element{} per result with correction {}, so it "
                       "divides by max(0, n - correction) = 0 at these dims",
                       n.loc.known() ? fmt::format(" at line {}", n.loc.line) : "", len, len == 1 ? "" : "s",
                       n.red.correction);
  }
  return "";
}

// The inputs among `used` read from files and those generated, each as "'a', 'b'".
std::pair<std::string, std::string> inputs_by_source(const ir::Graph& g, const std::vector<char>& used,
                                                     const RunOptions& ro) {
  std::string files, generated;
  for (ir::NodeId id : g.inputs) {
    if (!used[static_cast<size_t>(id)]) continue;
    const std::string& name = g.node(id).name;
    const bool file = std::any_of(ro.input_files.begin(), ro.input_files.end(), [&](const auto& f) { return f.first == name; });
    (file ? files : generated) += fmt::format("{}'{}'", (file ? files : generated).empty() ? "" : ", ", name);
  }
  return {files, generated};
}

// Whether `used` holds a param or constant (sqrt(-1), a param out of the domain may give the NaN).
bool reads_params_or_constants(const ir::Graph& g, const std::vector<char>& used) {
  for (ir::NodeId id = 0; id < g.size(); ++id)
    if (used[static_cast<size_t>(id)] && (g.node(id).op == ir::Op::Param || g.node(id).op == ir::Op::Const)) return true;
  return false;
}

// Why an output computed from the nodes `used` is mostly NaN, when nan_cause finds no param or mean:
// what the inputs it reads are (read from files, generated from ranges or as special values), or
// that it reads none.
std::string nan_advice(const ir::Graph& g, const std::vector<char>& used, const RunOptions& ro, bool reduced) {
  const auto [files, generated] = inputs_by_source(g, used, ro);
  const std::string or_fixed = reads_params_or_constants(g, used) ? ", or its params' or constants' values give NaN" : "";
  const MessageStyle style = ro.options.message_style;
  const std::string from_files = files.empty() ? "" : fmt::format("the values of {} (read from {}) are NaN or outside the "
                                                                  "graph's domain", files, option_name(OptionField::InputFiles, style));
  if (generated.empty())
    return files.empty() ? "it reads no input: its params' and constants' values give NaN" : from_files + or_fixed;
  const std::string gen = ro.special_values && reduced
      ? "the special-value inputs (" + std::string(style == MessageStyle::CommandLine ? "--special" : "RunOptions::special_values") +
            ") put NaNs in most rows a reduction reads (or its inputs are outside the graph's domain); run without them to "
            "check its values too"
      : fmt::format("give {} a range the graph is defined on (`input v : f32[N] range 0:1` in the graph, or {})", generated,
                    style == MessageStyle::CommandLine ? "--range NAME=LO:HI" : option_name(OptionField::InputRanges, style));
  return (files.empty() ? gen : from_files + "; or " + gen) + or_fixed;
}

// An output that is mostly NaN passes its checks by comparing NaNs: say so, and why (a NaN param
// or a mean over too few elements that it is computed from; a reduction it is computed from over
// rows that --special seeded with NaN; random inputs outside the graph's domain).
void warn_nan_outputs(RunReport& rep, const ir::Graph& g, const std::vector<ir::Scalar>& params, const RunOptions& ro) {
  for (const OutputStats& st : rep.stats) {
    if (st.nan_count == 0 || st.nan_count < st.info.elements() / 2) continue;
    const std::vector<char> used = feeds(g, st.info.name);
    std::string why = nan_cause(g, params, used);
    // A NaN --special puts in a row spreads to the row's result; through elementwise ops, to one element.
    bool reduced = false;
    for (ir::NodeId id = 0; id < g.size(); ++id)
      reduced = reduced || (used[static_cast<size_t>(id)] && ir::is_reduction(g.node(id).op));
    if (why.empty()) why = nan_advice(g, used, ro, reduced);
    const bool checked = !rep.checks.empty();  // --no-check: no check compares anything
    rep.warnings.push_back(fmt::format("output '{}' is NaN in {} of {} elements{}: {}", st.info.name, st.nan_count,
                                       st.info.elements(), checked ? ", so its checks compare NaNs mostly" : "", why));
  }
}

// What the report says before anything runs: the graph and the run's settings.
RunReport describe(const Graph& graph, const RunOptions& ro, const std::vector<ir::Scalar>& params) {
  const ir::Graph& g = graph.impl().graph;
  RunReport rep;
  rep.graph_name = g.name.empty() ? g.file : g.name;
  rep.inputs = graph.inputs();
  rep.outputs = graph.outputs();
  rep.op_count = g.op_count();
  for (const TensorInfo& t : rep.outputs) rep.elements = std::max(rep.elements, t.elements());
  rep.fast_math = ro.options.fast_math;
  rep.seed = ro.seed;
  for (const auto& f : ro.input_files) rep.file_inputs.push_back(f.first);
  rep.special_values = ro.special_values && rep.file_inputs.size() < rep.inputs.size();  // some input generated
  rep.dims = graph.dims();
  for (size_t k = 0; k < params.size(); ++k)
    rep.params.emplace_back(g.node(g.params[k].node).name, public_scalar(params[k], params[k].dtype));
  return rep;
}

// Overrides of the launcher's rules (to measure each way) change how reductions run and the bytes
// they move; said ("; ...") only where the rewritten graph reduces (NodeInfo::axes).
std::string override_notes(const Program& prog, const Options& o) {
  std::string s;
  const std::vector<NodeInfo> nodes = prog.rewritten().nodes();
  if (std::none_of(nodes.begin(), nodes.end(), [](const NodeInfo& n) { return !n.axes.empty(); })) return s;
  const bool cli = o.message_style == MessageStyle::CommandLine;
  const std::string split = option_name(OptionField::RowSplit, o.message_style) + (cli ? " " : " = ") + std::to_string(o.row_split);
  if (o.row_split == 1) s += "; reduction rows never split (" + split + ")";
  if (o.row_split > 1) s += "; reduction rows of over one chunk split in up to " + std::to_string(o.row_split) +
                           " parts, one per 8,192 elements (" + split + ")";
  const std::string limit = option_name(OptionField::RowCacheLimit, o.message_style) + (cli ? " " : " = ") +
                            std::to_string(o.row_cache_limit);
  if (!o.row_cache)
    s += std::string("; rows re-read by every pass (") + (cli ? "--no-row-cache" : "Options::row_cache = false") +
         (o.row_cache_limit > 0 ? ", so " + limit + " has no effect" : "") + ")";
  else if (o.row_cache_limit > 0)  // the limit that applies: capped by the GPU's (Program::Impl::rules)
    s += "; row caches of at most " + std::to_string(prog.impl().rules.row_cache_limit) + " B (" + limit +
         (prog.impl().rules.row_cache_limit < o.row_cache_limit ? ", capped by the GPU's" : "") + ")";
  return s;
}

// What the compiled program says: backend, target, rewrites, plans and their traffic.
void describe_program(RunReport& rep, const Program& prog, const Options& o) {
  rep.backend = prog.backend() == Backend::Cuda ? "cuda" : "cpu";
  rep.backend_note = prog.backend_note();
  rep.target = prog.target();
  rep.device = prog.device();
  rep.driver_version = prog.driver_version();
  if (prog.backend() == Backend::Cuda) rep.nvrtc_version = jit::nvrtc_version().str();  // the CPU path uses none
  rep.rewrites = prog.rewrite_summary();
  fill_path(rep.fused, "fused", prog.kernels(PlanKind::Fused));
  fill_path(rep.unfused, "unfused", prog.kernels(PlanKind::Unfused));
  rep.predicted_ratio = ir::predicted_speedup(rep.fused.bytes, rep.unfused.bytes);
  rep.plan = std::to_string(rep.fused.kernels) + " fused kernel(s) vs " + std::to_string(rep.unfused.kernels) +
             " unfused; predicted speedup " +
             (std::isinf(rep.predicted_ratio) ? "unbounded (the fused plan moves no bytes)"
                                              : fmt_ratio(rep.predicted_ratio) + " (unfused bytes / fused bytes)");
  // Where the sources went (--dump-dir, or FUSEJIT_DUMP_DIR's folder), and which are the fused kernels'.
  if (const std::string dir = prog.dump_dir(); !dir.empty()) {
    std::vector<std::string> names;
    for (const KernelInfo& k : prog.kernels(PlanKind::Fused)) names.push_back(k.name);
    rep.plan += fmt::format("; sources in {} (fused: {}.cu; index.json lists every kernel)", dir, fmt::join(names, ".cu, "));
  }
  rep.plan += override_notes(prog, o);
}

// Before the run: the save folder made (or a file or dangling link in its path refused) and every
// output's file name checked, so a mistake there does not cost the run and its report.
void prepare_save_dir(const ir::Graph& g, const RunOptions& ro) {
  const std::string option = option_name(OptionField::SaveDir, ro.options.message_style);
  ir::check_path(ro.save_dir, option);
  if (const std::string why = ir::make_folders(ro.save_dir); !why.empty())
    throw ir::UserError(option + " " + ro.save_dir + ": " + why);
  // A file made and removed there: a folder the run could not write into is said before the run,
  // not after it with its report lost (a hostile tester's find; access() says yes to root on /proc).
  std::string probe = (std::filesystem::path(ro.save_dir) / ".fusejit-save-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0)
    throw ir::UserError(fmt::format("{} {}: cannot write into it: {}", option, ro.save_dir, std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
  constexpr size_t kNameMax = 255;  // bytes in one file name (NAME_MAX of Linux's file systems)
  for (const ir::OutputDecl& o : g.outputs) {
    if (o.name.size() + 4 > kNameMax)
      throw ir::UserError(fmt::format("{} {}: output '{}...' cannot be saved: its file name would have {} bytes, more "
                                      "than the {} a file name may have (rename the output)",
                                      option, ro.save_dir, o.name.substr(0, 32), o.name.size() + 4, kNameMax));
    // A file or symlink there is replaced (ir::write_npy); a folder cannot be.
    const std::filesystem::path at = std::filesystem::path(ro.save_dir) / (o.name + ".npy");
    std::error_code ec;
    if (std::filesystem::is_directory(std::filesystem::symlink_status(at, ec)))
      throw ir::UserError(fmt::format("{} {}: output '{}' cannot be saved: {} is a folder", option, ro.save_dir, o.name,
                                      at.string()));
    for (const auto& [input, file] : ro.input_files)  // an input's own file, read for the run, is not the output's
      if (std::filesystem::equivalent(at, file, ec))
        throw ir::UserError(fmt::format("{} {}: output '{}' would be saved over {}, the file of input '{}': save into "
                                        "another folder", option, ro.save_dir, o.name, at.string(), input));
  }
}

void save_outputs(const ir::Graph& g, const RunReport& rep, const std::vector<HostTensor>& outputs, const RunOptions& ro) {
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    ir::Tensor t(to_ir(outputs[k].dtype()), rep.outputs[k].shape);
    std::copy(outputs[k].data().begin(), outputs[k].data().end(), t.data.begin());
    ir::write_npy((std::filesystem::path(ro.save_dir) / (g.outputs[k].name + ".npy")).string(), t);
  }
}

}  // namespace

DimValues input_file_dims(const Graph& graph, const std::vector<std::pair<std::string, std::string>>& input_files) {
  const ir::Graph& g = graph.impl().graph;
  return translate_errors([&] {
    DimValues out;
    std::vector<std::string> by(g.dims.size());  // per dim: "file (input 'x', axis 0)" that bound it
    std::vector<int64_t> size(g.dims.size(), -1);
    refuse_repeated_inputs(input_files, "input_files");
    for (const auto& input_file : input_files) {
      const std::string& name = input_file.first;
      const std::string& file = input_file.second;
      auto it = std::find_if(g.inputs.begin(), g.inputs.end(), [&](ir::NodeId id) { return g.node(id).name == name; });
      if (it == g.inputs.end()) continue;  // run_graph names it
      const ir::Shape& shape = g.node(*it).shape;
      const std::vector<int64_t> have = ir::read_npy_shape(file, g.node(*it).dtype, name);  // bf16 as '<u2' bits too
      if (have.size() != shape.size()) continue;  // run_graph's read reports it
      for (size_t d = 0; d < shape.size(); ++d) {
        if (shape[d].sym < 0) continue;
        const auto s = static_cast<size_t>(shape[d].sym);
        const std::string here = fmt::format("{} (input '{}', axis {})", file, name, d);
        if (size[s] >= 0 && size[s] != have[d])
          throw ir::FileError(fmt::format("dim {}: {} has size {} but {} has size {}", g.dims[s].name, by[s], size[s],
                                          here, have[d]),
                              file);  // the file that disagrees with an earlier one, not the graph's
        if (size[s] < 0) out.emplace_back(g.dims[s].name, have[d]);
        size[s] = have[d];
        by[s] = here;
      }
    }
    return out;
  }, g.file, graph.impl().source);
}

RunReport run_graph(const Graph& graph, const RunOptions& ro) {
  const ir::Graph& g = graph.impl().graph;
  return translate_errors([&] {
    const std::vector<ir::Scalar> params = resolve_params(g, ro.params, ro.options.message_style);
    if (ro.warmup < 0 || ro.repeats < 1)
      throw ir::UserError(fmt::format("RunOptions: warmup {} and repeats {}: warmup must be >= 0 and repeats >= 1",
                                      ro.warmup, ro.repeats));
    RunReport rep = describe(graph, ro, params);
    if (!ro.save_dir.empty()) prepare_save_dir(g, ro);
    const std::vector<ir::Tensor> inputs = make_inputs(g, ro);
    Options co = ro.options;
    co.build_unfused = true;  // both plans run here: built together (one host compile on the CPU)
    const Program prog = Program::compile(graph, co);
    describe_program(rep, prog, co);

    const bool gpu = prog.backend() == Backend::Cuda;
    const std::vector<TensorView> views = views_of(inputs);
    MeasureOptions mo;
    mo.warmup = ro.warmup;
    mo.repeats = gpu ? ro.repeats : std::max(1, std::min(ro.repeats, 3));  // the CPU is slow: a few runs
    mo.copy_baseline = gpu;
    const Measurement fused = prog.measure(views, ro.params, PlanKind::Fused, mo);
    mo.copy_baseline = false;
    mo.keep_intermediates = gpu && ro.check;  // for the per-op check
    const Measurement unfused = prog.measure(views, ro.params, PlanKind::Unfused, mo);
    rep.copy_gbps = fused.copy_gbps;
    fill_timing(rep.fused, fused, rep.copy_gbps);
    fill_timing(rep.unfused, unfused, rep.copy_gbps);
    rep.speedup = rep.fused.time_ms > 0 ? rep.unfused.time_ms / rep.fused.time_ms : 0.0;
    if (gpu && fused.l2_resident)
      rep.warnings.push_back("the working set fits in L2 even with buffer rotation: times flatter DRAM bandwidth");

    if (ro.check) add_checks(rep, g, prog, inputs, params, fused, unfused);
    for (size_t k = 0; k < g.outputs.size(); ++k) rep.stats.push_back(stats_of(rep.outputs[k], fused.outputs[k]));
    warn_nan_outputs(rep, g, params, ro);
    if (!ro.save_dir.empty()) save_outputs(g, rep, fused.outputs, ro);
    return rep;
  }, g.file, graph.impl().source);
}

bool RunReport::ok() const {
  return std::all_of(checks.begin(), checks.end(), [](const CheckReport& c) { return !c.ran || c.ok; });
}

}  // namespace fusejit
