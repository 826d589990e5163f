// libFuzzer target: graph text -> parse -> verify -> print and re-parse -> rewrite (strict and
// fast) -> plan (fused and unfused) -> code generation -> plan reports. No compiler runs.
// A user error (ir::UserError) at any stage is a fine outcome; anything else escaping (an
// InternalError, another exception, a crash, a sanitizer report, a leak, a hang) is a finding.
// Built with clang as fuzz_graph (scripts/fuzz.sh), and with any compiler as fuzz_graph_replay,
// which runs the seed and regression corpus in the ordinary test suite.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "ir/passes/rewrite.h"
#include "ir/plan.h"
#include "ir/printer.h"
#include "ir/verify.h"
#include "jit/codegen.h"
#include "lib/internal.h"
#include "fusejit/report.h"

namespace ir = fusejit::ir;
namespace jit = fusejit::jit;

namespace {

// Longer inputs only make each execution slower; the grammar is line based.
constexpr size_t kMaxInput = 16 * 1024;

[[noreturn]] void finding(const std::string& what, std::string_view text) {
  std::fprintf(stderr, "fuzz_graph: %s\n--- input ---\n%.*s\n--- end ---\n", what.c_str(), static_cast<int>(text.size()),
               text.data());
  std::abort();
}

// The `fusejit plan` path (rewrite, both plans, fused kernels' code, text/DOT/JSON reports), then
// the translation units of both plans as the compile paths emit them.
void rewrite_plan_generate(const ir::Graph& g, std::string_view text, bool fast_math) {
  auto impl = std::make_shared<fusejit::Graph::Impl>();
  impl->graph = g;
  impl->source = std::string(text);
  try {
    (void)fusejit::plan_graph(fusejit::Graph(std::move(impl)), fast_math);
  } catch (const fusejit::Error& e) {
    if (e.kind() != fusejit::ErrorKind::User) finding(std::string("plan_graph: ") + e.what(), text);
    return;
  }
  ir::RewriteOptions ro;
  ro.fast_math = fast_math;
  jit::CodegenOptions cg;
  cg.fast_math = fast_math;
  const ir::Graph rewritten = ir::rewrite(g, ro).graph;
  (void)jit::emit_translation_unit(jit::generate_plan_kernels(rewritten, ir::plan_fusion(rewritten), cg));
  jit::CodegenOptions unfused;
  unfused.canonical_names = true;  // as the unfused path generates them
  (void)jit::emit_translation_unit(jit::generate_plan_kernels(g, ir::plan_unfused(g), unfused));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    fusejit::set_warning_handler([](std::string_view) {});  // e.g. unused inputs: not findings
    return true;
  }();
  (void)quiet;
  if (size > kMaxInput) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ir::Graph g;
  try {
    g = ir::parse_graph(text, "fuzz.txt");
  } catch (const ir::UserError& e) {
    (void)ir::format_diagnostic(e, "fuzz.txt", text);  // rendering the caret must not fail either
    return 0;
  }
  try {
    ir::verify(g);
  } catch (const ir::UserError& e) {
    finding(std::string("the parser returned a graph the verifier rejects: ") + e.what(), text);
  }
  // The printer's text parses back to the same graph.
  const std::string printed = ir::print_graph(g);
  try {
    if (!ir::structurally_equal(ir::parse_graph(printed, "printed.txt"), g))
      finding("print_graph's text parses to a different graph:\n" + printed, text);
  } catch (const ir::UserError& e) {
    finding(std::string("print_graph's text does not parse: ") + e.what() + "\n" + printed, text);
  }
  for (bool fast_math : {false, true}) {
    try {
      rewrite_plan_generate(g, text, fast_math);
    } catch (const ir::UserError&) {
      // e.g. a rewritten constant the user's dtype cannot hold: reported to the user, fine here.
    }
  }
  return 0;
}
