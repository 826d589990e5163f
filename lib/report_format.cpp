// RunReport as text (for people) and JSON (for tools and scripts/device-check.sh).
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "ir/passes/plan_report.h"
#include "lib/internal.h"
#include "lib/report_format.h"
#include "fusejit/report.h"

namespace fusejit {

std::string fmt_ratio(double r) { return fmt::format("{:.2f}x", r); }

std::string tensor_text(const TensorInfo& t) {
  std::string s = t.name + " " + std::string(dtype_name(t.dtype)) + "[";
  for (size_t k = 0; k < t.shape.size(); ++k) {
    if (k) s += ", ";
    if (!t.dim_names[k].empty()) s += t.dim_names[k] + "=";
    s += std::to_string(t.shape[k]);
  }
  return s + "]";
}

namespace {
// A param value as written: the shortest text that reads back as the same f32 when the value is
// one (0.001, not 0.0010000000474974513), else the shortest f64 text.
std::string short_number(double v) {
  const float f = static_cast<float>(v);
  if (static_cast<double>(f) == v) return fmt::format("{}", f);
  return fmt::format("{}", v);
}

// A param value: integers exact, bools as true/false, floats as short_number.
std::string scalar_text(const Scalar& s) {
  switch (s.kind) {
    case Scalar::Kind::Bool: return s.i ? "true" : "false";
    case Scalar::Kind::Int: return fmt::format("{}", s.i);
    case Scalar::Kind::Float: break;
  }
  return short_number(s.f);
}

// JSON has no inf or NaN: a non-finite number is written as the string "inf", "-inf" or "nan"
// (a param's value, a statistic).
nlohmann::json number_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

nlohmann::json scalar_json(const Scalar& s) {
  switch (s.kind) {
    case Scalar::Kind::Bool: return s.i != 0;
    case Scalar::Kind::Int: return s.i;
    case Scalar::Kind::Float: break;
  }
  return number_json(s.f);
}

// A statistic for the text report: 6 significant digits; NaN without a sign.
std::string stat_text(double v) { return std::isnan(v) ? std::string("nan") : fmt::format("{:.6g}", v); }

// "1 op", "9 ops".
std::string count_of(int64_t n, const char* what) { return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"); }

std::string compile_text(const PathReport& p) {
  std::string s;
  auto part = [&](int n, const char* what) {
    if (!n) return;
    if (!s.empty()) s += ", ";
    s += fmt::format("{} {}{}", n, what, n == 1 || std::string_view(what) == "compiled" ? "" : "s");
  };
  part(p.compiled, "compiled");
  part(p.disk_hits, "disk hit");
  part(p.memory_hits, "memory hit");
  if (p.compiled && p.compile_ms > 0) s += fmt::format(" ({:.0f} ms)", p.compile_ms);
  else if (p.compiled) s += " (built with the fused kernels: time above)";
  return s;
}

// The table of the two paths (and the copy baseline), then a note per path that launches more
// kernels than it has, or fewer (a kernel whose outputs are empty is not launched). On the CPU path bytes per second say nothing about memory traffic (one core
// computes), so the GB/s column shows "-".
std::string path_table(const PathReport& fused, const PathReport& unfused, double copy_gbps, bool cpu) {
  std::string s = fmt::format("  {:<8} {:>7} {:>11} {:>12} {:>9} {:>7}   {}\n", "path", "kernels", "time (ms)",
                              "bytes moved", "GB/s", "% copy", "compile");
  for (const PathReport* p : {&fused, &unfused}) {
    std::string pct = copy_gbps > 0 ? fmt::format("{:.1f}%", p->pct_of_copy) : std::string("-");
    const std::string gbps = cpu ? std::string("-") : fmt::format("{:.1f}", p->gbps);
    s += fmt::format("  {:<8} {:>7} {:>11.4f} {:>12} {:>9} {:>7}   {}\n", p->name, p->kernels, p->time_ms,
                     ir::format_bytes(p->bytes), gbps, pct, compile_text(*p));
  }
  if (copy_gbps > 0) s += fmt::format("  {:<8} {:>7} {:>11} {:>12} {:>9.1f} {:>7}\n", "copy", "", "", "", copy_gbps, "100%");
  for (const PathReport* p : {&fused, &unfused})
    if (p->launches > p->kernels)
      s += fmt::format("  note      {}: {} launches of {} kernel(s): a reduction whose few long rows split over blocks\n"
                       "            runs once per phase (chunk values, their fixed tree, ...; docs/ops.md)\n",
                       p->name, p->launches, p->kernels);
    else if (p->launches < p->kernels)
      s += fmt::format("  note      {}: {} launch(es) of {} kernel(s): a kernel whose outputs have no elements at "
                       "these sizes is not launched\n",
                       p->name, p->launches, p->kernels);
  return s;
}

nlohmann::json tensor_json(const TensorInfo& t) {
  return {{"name", t.name}, {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"dims", t.dim_names},
          {"bytes", t.bytes()}};
}

// null, not 0, for what was not measured (the text report's "-"): GB/s on the host CPU, the share
// of a copy bandwidth that was not timed.
nlohmann::json measured(double v, bool was) { return was ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json path_json(const PathReport& p, bool cpu, double copy_gbps) {
  return {{"kernels", p.kernels}, {"launches", p.launches}, {"time_ms", p.time_ms}, {"bytes", p.bytes},
          {"gbps", measured(p.gbps, !cpu)}, {"pct_of_copy", measured(p.pct_of_copy, copy_gbps > 0)},
          {"compiled", p.compiled}, {"disk_hits", p.disk_hits}, {"memory_hits", p.memory_hits}, {"compile_ms", p.compile_ms}};
}
// to_text's first block: device, target, mode, tensors, graph size, how it ran, rewrites, plan.
std::string header_text(const RunReport& r) {
  std::string s = fmt::format("fusejit run: {}\n", r.graph_name);
  if (r.backend == "cpu")
    s += fmt::format("  device    host CPU, running the generated CUDA ({})\n",
                     r.backend_note.empty() ? std::string("CPU backend requested") : r.backend_note);
  else
    s += fmt::format("  device    {}, driver {}, NVRTC {}\n", r.device, r.driver_version, r.nvrtc_version);
  s += fmt::format("  target    {}\n", r.target);
  s += fmt::format("  mode      {}\n", r.fast_math ? "fast-math (results may differ from the reference)" : "strict (bitwise)");
  for (size_t k = 0; k < r.inputs.size(); ++k)
    s += fmt::format("  {}  {} ({})\n", k == 0 ? "inputs  " : "        ", tensor_text(r.inputs[k]), ir::format_bytes(r.inputs[k].bytes()));
  for (size_t k = 0; k < r.outputs.size(); ++k)
    s += fmt::format("  {}  {} ({})\n", k == 0 ? "outputs " : "        ", tensor_text(r.outputs[k]), ir::format_bytes(r.outputs[k].bytes()));
  s += fmt::format("  graph     {}, {} elements in the largest output\n", count_of(r.op_count, "op"), r.elements);
  // The seed only where some input is random: files alone take none.
  std::string run_args = r.file_inputs.size() < r.inputs.size() || r.inputs.empty()
                             ? fmt::format("seed {}{}", r.seed, r.special_values ? ", special values" : "")
                             : "no random inputs";
  const std::string from = r.file_inputs.empty() ? std::string("random inputs")
                           : fmt::format("{} from .npy files{}", fmt::join(r.file_inputs, ", "),
                                         r.file_inputs.size() < r.inputs.size() ? ", the rest random" : "");
  std::string params;  // every param's value, given or its default (after the inputs: none is random)
  for (const auto& [n, v] : r.params) params += fmt::format("{}{}={}", params.empty() ? "; params " : ", ", n, scalar_text(v));
  s += fmt::format("  run       {} ({}){}\n", run_args, from, params);
  s += fmt::format("  {}\n", r.rewrites);
  return s + fmt::format("  plan      {}\n\n", r.plan);
}

// The speedup line, and on the CPU the note on what its times mean.
std::string speedup_text(const RunReport& r) {
  const bool cpu = r.backend == "cpu";
  if (r.elements == 0)  // the times are launch overheads: a ratio of them says nothing about fusion
    return "  speedup   - (the outputs have no elements: the times are launch overheads, which say nothing of fusion)\n";
  std::string s = fmt::format("  speedup   {} measured{} (fused over unfused), {} predicted from bytes moved\n",
                              fmt_ratio(r.speedup), cpu ? " on the host CPU" : "", fmt_ratio(r.predicted_ratio));
  if (cpu)
    s += "  note      host CPU times measure one core's arithmetic, not GPU memory traffic, and are the median\n"
         "            of at most 3 runs (noisy on a busy machine); on a GPU the speedup of memory-bound kernels\n"
         "            approaches the predicted ratio (docs/report-example.md)\n";
  return s;
}

// The checks that ran and each output's min, max, mean and NaN and inf counts.
std::string checks_and_stats_text(const RunReport& r) {
  std::string s = r.checks.empty() ? "" : "\n";
  for (const CheckReport& c : r.checks)
    if (c.ran) s += fmt::format("  check     {}: {}{}\n", c.what, c.ok ? "" : "FAILED: ", c.detail);
  s += fmt::format("\n  {:<12} {:>14} {:>14} {:>14} {:>8} {:>8}\n", "output", "min", "max", "mean", "NaN", "inf");
  for (const OutputStats& o : r.stats) {
    // No elements, or NaN alone (NaN is skipped): no min, max or mean ("-", not nan).
    const bool none = o.info.bytes() == 0 || o.nan_count == o.info.elements();
    s += fmt::format("  {:<12} {:>14} {:>14} {:>14} {:>8} {:>8}\n", o.info.name, none ? "-" : stat_text(o.min),
                     none ? "-" : stat_text(o.max), none ? "-" : stat_text(o.mean), o.nan_count, o.inf_count);
  }
  return s;
}
}  // namespace

std::string RunReport::to_text() const {
  std::string s = header_text(*this) + path_table(fused, unfused, copy_gbps, backend == "cpu") + speedup_text(*this) +
                  checks_and_stats_text(*this);
  for (const std::string& w : warnings) s += "  warning: " + w + "\n";
  const bool checked = std::any_of(checks.begin(), checks.end(), [](const CheckReport& c) { return c.ran; });
  s += fmt::format("\n  result    {}\n", !checked ? "not checked (the checks were skipped)" : ok() ? "OK" : "CHECK FAILED");
  return s;
}

std::string RunReport::to_json() const {
  nlohmann::json j;
  j["graph"] = graph_name;
  j["backend"] = backend;
  j["backend_note"] = backend_note;
  j["device"] = device;
  j["target"] = target;
  j["driver_version"] = driver_version;
  j["nvrtc_version"] = nvrtc_version;
  j["mode"] = fast_math ? "fast-math" : "strict";
  j["inputs"] = nlohmann::json::array();
  for (const TensorInfo& t : inputs) j["inputs"].push_back(tensor_json(t));
  j["outputs"] = nlohmann::json::array();
  for (const TensorInfo& t : outputs) j["outputs"].push_back(tensor_json(t));
  j["op_count"] = op_count;
  j["elements"] = elements;
  j["seed"] = seed;
  j["special_values"] = special_values;
  j["file_inputs"] = file_inputs;
  j["dims"] = nlohmann::json::object();
  for (const auto& [n, v] : dims) j["dims"][n] = v;
  j["params"] = nlohmann::json::object();
  for (const auto& [n, v] : params) j["params"][n] = scalar_json(v);
  j["rewrites"] = rewrites;
  j["plan"] = plan;
  j["predicted_ratio"] = measured(predicted_ratio, std::isfinite(predicted_ratio));  // null: unbounded
  j["copy_gbps"] = measured(copy_gbps, copy_gbps > 0);
  j["fused"] = path_json(fused, backend == "cpu", copy_gbps);
  j["unfused"] = path_json(unfused, backend == "cpu", copy_gbps);
  j["speedup"] = measured(speedup, elements > 0);  // as the text: no ratio of launch overheads
  j["checks"] = nlohmann::json::array();
  for (const CheckReport& c : checks) j["checks"].push_back({{"what", c.what}, {"ran", c.ran}, {"ok", c.ok}, {"detail", c.detail}});
  j["stats"] = nlohmann::json::array();
  for (const OutputStats& o : stats) {
    // No elements: no min, max or mean (null, as the text's "-").
    const auto num = [&](double v) { return o.info.bytes() == 0 ? nlohmann::json(nullptr) : number_json(v); };
    j["stats"].push_back({{"name", o.info.name}, {"min", num(o.min)}, {"max", num(o.max)}, {"mean", num(o.mean)},
                          {"nan", o.nan_count}, {"inf", o.inf_count}});
  }
  j["warnings"] = warnings;
  j["ok"] = ok();
  return json_text(std::move(j));
}

namespace {
void escape_strings(nlohmann::json& j) {
  if (j.is_string()) {
    j = ir::escape_invalid_utf8(j.get_ref<const std::string&>());
  } else if (j.is_array()) {
    for (nlohmann::json& e : j) escape_strings(e);
  } else if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [key, value] : j.items()) {
      escape_strings(value);
      out[ir::escape_invalid_utf8(key)] = std::move(value);
    }
    j = std::move(out);
  }
}
}  // namespace

std::string json_text(nlohmann::json j) {
  escape_strings(j);
  return j.dump(2);
}

}  // namespace fusejit
