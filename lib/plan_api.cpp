// `fusejit plan`: rewrite and plan without compiling (fusejit/report.h).
#include "fusejit/report.h"

#include <fmt/format.h>

#include "ir/passes/plan_fusion.h"
#include "ir/passes/plan_report.h"
#include "ir/passes/rewrite.h"
#include "jit/arch.h"
#include "jit/codegen.h"
#include "lib/internal.h"

namespace fusejit {

namespace {
// With Options::arch, the shared memory a block of that GPU may opt in to (jit::shared_optin_bytes),
// so the plan is the one a program on such a GPU runs (its row cache limit, short rows re-read);
// 0 without: the rules without a GPU.
int64_t plan_shared_optin(const Options& o) {
  if (o.arch.empty()) return 0;
  const std::string option = option_name(OptionField::Arch, o.message_style);
  jit::Target t;
  try {
    t = jit::parse_target(o.arch);
  } catch (const ir::UserError& e) {
    throw ir::UserError(option + ": " + e.what());
  }
  if (std::optional<int64_t> bytes = jit::shared_optin_bytes(t.arch)) return *bytes;
  throw ir::UserError(fmt::format("{} {}: fusejit knows the shared memory per block of sm_75, sm_80, sm_86, sm_87, "
                                  "sm_88, sm_89, sm_90, sm_100, sm_103, sm_110, sm_120 and sm_121, not of this GPU; "
                                  "plan without {} "
                                  "and give {} instead",
                                  option, o.arch, option, option_name(OptionField::RowCacheLimit, o.message_style)));
}

// The plan text's first line: whose rules it follows (a plan made without a GPU keeps rows on chip
// up to the CPU path's limit, which a GPU's shared memory may not hold).
std::string planned_for(const Options& o, const ir::SplitRules& rules) {
  const std::string rows = rules.row_cache ? fmt::format("a row kept on chip up to {} B a block", rules.row_cache_limit)
                                           : std::string("no row kept on chip (row cache off)");
  if (o.arch.rfind("compute_", 0) == 0)  // PTX: later GPUs run it too, some with less shared memory
    return fmt::format("# planned as {} runs on sm_{}: {}, short rows re-read from L1/L2\n", o.arch, o.arch.substr(8),
                       rows);
  if (!o.arch.empty()) return fmt::format("# planned as {} runs it: {}, short rows re-read from L1/L2\n", o.arch, rows);
  const std::string arch = option_name(OptionField::Arch, o.message_style);
  return fmt::format("# planned without a GPU's limits ({0} not given): {1}; {0} sm_90 plans as that GPU runs it\n", arch,
                     rows);
}
}  // namespace

PlanReport plan_graph(const Graph& graph, bool fast_math) {
  Options o;
  o.fast_math = fast_math;
  return plan_graph(graph, o);
}

PlanReport plan_graph(const Graph& graph, const Options& options) {
  const ir::Graph& g = graph.impl().graph;
  const bool fast_math = options.fast_math;
  return translate_errors([&] {
    check_options(options);
    ir::RewriteOptions ro;
    ro.fast_math = fast_math;
    ir::RewriteResult rw = ir::rewrite(g, ro);
    ir::PlanOptions po;
    po.rules = split_rules(options, plan_shared_optin(options));
    po.vector_rows = vector_rows_of(rw.graph, fast_math);
    ir::Plan fused = ir::plan_fusion(rw.graph, po);
    // The baseline is the graph as written, one kernel per op: what running it op by op costs.
    ir::Plan unfused = ir::plan_unfused(g);
    // The fused kernels' real names (content-hashed, as `run`, `compile` and --dump-dir show
    // them): code generation is cheap next to compiling, and only the names are kept.
    jit::CodegenOptions cg;
    cg.fast_math = fast_math;
    std::vector<std::string> names;
    const std::vector<jit::GeneratedKernel> kernels = jit::generate_plan_kernels(rw.graph, fused, cg);
    for (const jit::GeneratedKernel& k : kernels) names.push_back(k.name);
    PlanReport r;
    r.text = planned_for(options, po.rules) + ir::format_plan_text(rw, fused, unfused, &g, names);
    r.dot = ir::format_plan_dot(rw.graph, fused, names);
    nlohmann::json j = ir::plan_to_json(rw, fused, unfused, &g, names);
    j["arch"] = options.arch.empty() ? nlohmann::json(nullptr) : nlohmann::json(options.arch);  // null: no GPU's rules
    j["row_cache"] = po.rules.row_cache;  // false: no row kept on chip, whatever the limit
    j["row_cache_limit"] = po.rules.row_cache_limit;
    r.json = json_text(std::move(j));
    ir::PlanTotals f = ir::plan_totals(rw.graph, fused), u = ir::plan_totals(g, unfused);
    r.fused_kernels = f.kernels;
    r.unfused_kernels = u.kernels;
    r.predicted_ratio = ir::predicted_speedup(f.bytes(), u.bytes());
    return r;
  }, g.file, graph.impl().source);
}

}  // namespace fusejit
