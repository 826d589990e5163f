// Golden tests: tests/golden/<name>.graph in; <name>.rewritten (rule counts + rewritten graph),
// <name>.plan (the `fusejit plan` text) and <name>.cu (the CUDA of every fused kernel, without the
// preludes) out, compared with the files in the repository.
// Regenerate after an intended change with FUSEJIT_UPDATE_GOLDEN=1 and review the diff.
// Also checks the DOT and JSON forms of the same reports.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <fmt/format.h>

#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "ir/passes/plan_report.h"
#include "ir/passes/rewrite.h"
#include "ir/printer.h"
#include "jit/codegen.h"
#include "tests/support/files.h"

using namespace fusejit::ir;
namespace fs = std::filesystem;

namespace {


std::string rewritten_text(const RewriteResult& r) {
  std::string s = std::string("# mode: ") + (r.fast_math ? "fast-math" : "strict") + "\n";
  for (const RuleCount& c : r.counts)
    if (c.count) s += "# " + c.rule + ": " + std::to_string(c.count) + "\n";
  return s + print_graph(r.graph);
}

void compare(const fs::path& expected, const std::string& actual) {
  const char* update = std::getenv("FUSEJIT_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(expected, std::ios::binary) << actual;
    return;
  }
  INFO("golden file " << expected.string() << " (regenerate with FUSEJIT_UPDATE_GOLDEN=1)");
  REQUIRE(fs::exists(expected));
  CHECK(fusejit::testing::read_file(expected) == actual);
}

fs::path golden_dir() { return fs::path(FUSEJIT_SOURCE_DIR) / "tests" / "golden"; }

}  // namespace

TEST_CASE("golden: rewritten graphs and plans") {
  int n = 0;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(golden_dir()))
    if (e.path().extension() == ".graph") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    INFO(p.filename().string());
    Graph g = parse_graph(fusejit::testing::read_file(p), p.filename().string());
    RewriteResult r = rewrite(g);
    Plan fused = plan_fusion(r.graph), unfused = plan_unfused(r.graph);
    fs::path base = p;
    compare(base.replace_extension(".rewritten"), rewritten_text(r));
    compare(base.replace_extension(".plan"), format_plan_text(r, fused, unfused));
    std::string cuda;
    for (const fusejit::jit::GeneratedKernel& k : fusejit::jit::generate_plan_kernels(r.graph, fused))
      cuda += k.source + "\n";
    compare(base.replace_extension(".cu"), cuda);
    // The rewritten text reads back as the same graph; where an output became an input or a
    // param (printed as a same-dtype cast), rewriting it again gives the same graph.
    Graph again = parse_graph(print_graph(r.graph), "again");
    bool leaf_out = false;
    for (const OutputDecl& o : r.graph.outputs) leaf_out |= is_leaf(r.graph.node(o.node).op);
    CHECK(structurally_equal(leaf_out ? rewrite(again).graph : again, r.graph));
    ++n;
  }
  CHECK(n >= 6);
}

TEST_CASE("reports: JSON and DOT") {
  Graph g = parse_graph(fusejit::testing::read_file(golden_dir() / "shapes.graph"), "shapes.graph");
  RewriteResult r = rewrite(g);
  Plan fused = plan_fusion(r.graph), unfused = plan_unfused(r.graph);
  nlohmann::json j = plan_to_json(r, fused, unfused);
  CHECK(j["mode"] == "strict");
  CHECK(j["fused"]["kernels"] == fused.groups.size());
  CHECK(j["unfused"]["kernels"] == unfused.groups.size());
  CHECK(j["fused"]["groups"][0]["kernel"] == "fj_shapes_k0");
  CHECK(nlohmann::json::parse(j.dump()) == j);
  CHECK(j["traffic_ratio"].get<double>() < 1.0);

  std::string dot = format_plan_dot(r.graph, fused);
  size_t clusters = 0;
  for (size_t p = dot.find("subgraph cluster_"); p != std::string::npos; p = dot.find("subgraph cluster_", p + 1)) ++clusters;
  CHECK(clusters == fused.groups.size());
  // Render with Graphviz when it is installed.
  if (std::system("command -v dot >/dev/null 2>&1") == 0) {
    fs::path dir = fs::path(FUSEJIT_BINARY_DIR) / "test-golden";
    fs::create_directories(dir);
    std::ofstream(dir / "shapes.dot") << dot;
    std::string cmd = "dot -Tpng -o '" + (dir / "shapes.png").string() + "' '" + (dir / "shapes.dot").string() + "' 2>&1";
    CHECK(std::system(cmd.c_str()) == 0);
    CHECK(fs::file_size(dir / "shapes.png") > 100);
  } else {
    MESSAGE("graphviz `dot` not installed: DOT not rendered");
  }
  std::string summary = format_plan_summary(r, fused, unfused);
  CHECK(summary.find("strict") != std::string::npos);
  CHECK(summary.find("predicted traffic fused/unfused") != std::string::npos);
}

TEST_CASE("reports: DOT draws a recomputed node in each kernel that computes it, and each kernel's bytes") {
  // h is computed by the row kernel (y) and again by the column kernel (cs), never written.
  RewriteResult r = rewrite(parse_graph("graph silu\ninput x : f32[64, 32]\nh = x * sigmoid(x)\n"
                                        "y = h - mean(h, -1, keepdim)\ncs = sum(h, 0)\noutput y, cs\n",
                                        "silu.txt"));
  const Plan fused = plan_fusion(r.graph);
  REQUIRE(fused.groups.size() == 2);
  const std::string dot = format_plan_dot(r.graph, fused);
  const NodeId h = 2, cs = fused.groups[1].outputs[0];
  CAPTURE(dot);
  CHECK(dot.find(fmt::format("n{}_1 [label=\"h\\nmul f32\\n(recomputed)\", shape=box, style=dashed]", h)) != std::string::npos);
  CHECK(dot.find(fmt::format("  n{}_1 -> n{};\n", h, cs)) != std::string::npos);
  CHECK(dot.find(fmt::format("  n{} -> n{};\n", h, cs)) == std::string::npos);  // h is not in memory
  CHECK(dot.find("\\nread 8.19 kB, write 8.19 kB\"") != std::string::npos);  // the row kernel: x in, y out
  CHECK(dot.find("\\nread 8.19 kB, write 128 B\"") != std::string::npos);    // the column kernel: x in, cs out
}

TEST_CASE("reports: DOT draws a node two kernels compute as a member of the kernel over its own shape") {
  // A plan tester's find: c * 3 of [64, 1] was drawn "(recomputed)" in the [64, 1] kernel (the
  // later one) and as a member of the [64, 128] kernel that recomputes it for v3.
  RewriteResult r = rewrite(parse_graph("input x : f32[64, 128]\ninput c : f32[64, 1]\nv3 = (c * 3) + x\n"
                                        "v2 = (c * 3) * 2\noutput v3, v2\n", "rc.txt"));
  const Plan fused = plan_fusion(r.graph);
  REQUIRE(fused.groups.size() == 2);
  REQUIRE(fused.groups[1].iter_shape.size() == 2);
  CHECK(fused.groups[1].iter_shape[1].size == 1);  // the [64, 1] kernel is the second
  const std::string dot = format_plan_dot(r.graph, fused);
  CAPTURE(dot);
  CHECK(dot.find("n3_0 [label=\"%3\\nmul f32\\n(recomputed)\", shape=box, style=dashed]") != std::string::npos);
  CHECK(dot.find("n3 [label=\"%3\\nmul f32\", shape=box]") != std::string::npos);
  CHECK(dot.find("(recomputed)") == dot.rfind("(recomputed)"));  // one copy only
}

TEST_CASE("reports: DOT draws an output that is a param from its fill box, not from the param") {
  // (An output that became an input is a cast node in a kernel: drawn as any node.)
  RewriteResult r = rewrite(parse_graph("input x : f32[8]\nparam p : f32 = 2\ny = x * 2\nz = y\nw = p * 1\n"
                                        "output y, z, w\n", "fill.txt"));
  const Plan fused = plan_fusion(r.graph);
  REQUIRE(fused.groups.size() == 2);
  REQUIRE(fused.groups[1].nodes.empty());  // the fill of w with p
  const std::string dot = format_plan_dot(r.graph, fused);
  CAPTURE(dot);
  CHECK(dot.find("  n1 -> c1;\n") != std::string::npos);
  CHECK(dot.find("  c1 -> out2;\n") != std::string::npos);
  CHECK(dot.find("  n1 -> out2;\n") == std::string::npos);  // it ran past the fill kernel
  CHECK(dot.find("  n3 -> out1;\n") != std::string::npos);  // z = y: from y's node
}

TEST_CASE("reports: DOT names a reduction's axes on its node and its cluster") {
  RewriteResult r = rewrite(parse_graph(fusejit::testing::read_file(golden_dir() / "rmsnorm.graph"), "rmsnorm.graph"));
  const std::string dot = format_plan_dot(r.graph, plan_fusion(r.graph));
  CHECK(dot.find("mean f32 [1] keepdim") != std::string::npos);
  CHECK(dot.find("reducing axes [1]") != std::string::npos);
  // ... and a composite's max its initial value (softmax's amax starts from -inf).
  RewriteResult s = rewrite(parse_graph(fusejit::testing::read_file(golden_dir() / "reductions.graph"), "reductions.graph"));
  CHECK(format_plan_dot(s.graph, plan_fusion(s.graph)).find("amax f32 [1] keepdim initial=-inf") != std::string::npos);
}
