// The fusion planner: single kernels for the samples, the parameter-byte and op caps, recompute
// of broadcast producers, determinism, and the plan invariants (no cycles, every output written
// once, every value a kernel needs is computed in it or written by an earlier kernel).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <limits>
#include <filesystem>

#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/parser.h"
#include "ir/passes/plan_fusion.h"
#include "ir/passes/plan_report.h"
#include "ir/passes/rewrite.h"
#include "ir/plan.h"
#include "ir/reduce.h"
#include "ir/reduce_group.h"
#include "tests/support/random_graph.h"
#include "tests/support/samples.h"

using namespace fusejit::ir;

namespace {

bool has(const std::vector<NodeId>& v, NodeId x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Checks every invariant of ir/plan.h on `p`.
void check_plan(const Graph& g, const Plan& p, const PlanOptions& o = {}) {
  std::vector<int> written_by(static_cast<size_t>(g.size()), -1);
  for (size_t gi = 0; gi < p.groups.size(); ++gi) {
    const FusionGroup& grp = p.groups[gi];
    CHECK(std::is_sorted(grp.nodes.begin(), grp.nodes.end()));
    CHECK(std::is_sorted(grp.inputs.begin(), grp.inputs.end()));
    CHECK(std::is_sorted(grp.outputs.begin(), grp.outputs.end()));
    // Every operand of a computed node is in the group, an input, a param or a constant.
    for (NodeId id : grp.nodes) {
      const Node& n = g.node(id);
      CHECK_FALSE(is_leaf(n.op));
      for (int k = 0; k < n.nargs; ++k) {
        NodeId a = n.args[static_cast<size_t>(k)];
        Op op = g.node(a).op;
        bool ok = op == Op::Const || (op == Op::Param && has(grp.params, a)) || has(grp.nodes, a) || has(grp.inputs, a);
        CHECK(ok);
      }
    }
    // Inputs are graph inputs or values written by an EARLIER group (launch order: no cycles).
    for (NodeId in : grp.inputs) {
      if (g.node(in).op == Op::Input) continue;
      REQUIRE(written_by[static_cast<size_t>(in)] >= 0);
      CHECK(written_by[static_cast<size_t>(in)] < static_cast<int>(gi));
    }
    // A reduction group writes element values (the iteration shape) and row values (the reduced
    // shape): ir/reduce_group.h accepts it; every other group writes its iteration shape.
    const ReduceGroupInfo red = analyze_reduce_group(g, grp);
    CHECK(red.problem.empty());
    for (NodeId out : grp.outputs) {
      if (red.reductions.empty()) CHECK(g.node(out).shape == grp.iter_shape);
      CHECK((has(grp.nodes, out) || is_leaf(g.node(out).op)));
      CHECK(written_by[static_cast<size_t>(out)] == -1);  // written exactly once
      written_by[static_cast<size_t>(out)] = static_cast<int>(gi);
    }
    if (grp.nodes.size() > 1) {
      CHECK(estimate_param_bytes(g, grp) <= o.max_param_bytes);
      CHECK(static_cast<int>(grp.nodes.size()) <= o.max_ops_per_group);
    }
    CHECK_FALSE(grp.note.empty());
  }
  for (const OutputDecl& out : g.outputs) CHECK(written_by[static_cast<size_t>(out.node)] >= 0);
}

Graph sample(const std::string& name, int64_t dim = 16) {
  return fusejit::testing::parse_small(fusejit::testing::sample_path(name), dim);
}

}  // namespace

TEST_CASE("samples plan to a single kernel") {
  for (const char* name : {"x2x3.txt", "gpt2_gelu_tanh.txt", "llama_swiglu.txt", "bias_gelu.txt", "black_scholes.txt",
                           "adam_step.txt"}) {
    Graph g = rewrite(sample(name)).graph;
    Plan p = plan_fusion(g);
    INFO(name);
    CHECK(p.groups.size() == 1);
    CHECK(p.fused);
    check_plan(g, p);
    CHECK(p.groups[0].outputs.size() == g.outputs.size());
    Plan u = plan_unfused(g);
    CHECK(u.groups.size() == static_cast<size_t>(g.op_count()));
    check_plan(g, u);
    int64_t fused = 0, unfused = 0;
    for (const auto& grp : p.groups) fused += group_traffic(g, grp).read_bytes + group_traffic(g, grp).write_bytes;
    for (const auto& grp : u.groups) unfused += group_traffic(g, grp).read_bytes + group_traffic(g, grp).write_bytes;
    CHECK(fused <= unfused);
  }
  // Adam: three outputs from one kernel.
  Graph adam = rewrite(sample("adam_step.txt")).graph;
  CHECK(plan_fusion(adam).groups[0].outputs.size() == 3);
  // x*2*3: one multiply, reads x once, writes z once.
  Graph x = rewrite(sample("x2x3.txt", 1000)).graph;
  Plan px = plan_fusion(x);
  CHECK(px.groups[0].nodes.size() == 1);
  CHECK(group_traffic(x, px.groups[0]).read_bytes == 4000);
  CHECK(group_traffic(x, px.groups[0]).write_bytes == 4000);
}

TEST_CASE("every sample plans validly, fused and unfused") {
  for (const std::filesystem::path& path : fusejit::testing::sample_graphs()) {
    Graph g = rewrite(fusejit::testing::parse_small(path, 16)).graph;
    INFO(path.filename().string());
    check_plan(g, plan_fusion(g));
    check_plan(g, plan_unfused(g));
  }
}

TEST_CASE("traffic of tensors near 2^63 bytes saturates at INT64_MAX, not wrapping (a fuzz finding)") {
  // Each tensor's size fits int64 (the builder checks); a read plus a write of 2^63 - 2^61 bytes,
  // or two rows of 2^60 f32 kept on chip, do not.
  Graph g = parse_graph("dim N = 2223372036854775808\ninput x : f32[N]\ny = x * 2\noutput y\n", "t");
  const Plan p = plan_fusion(g);
  CHECK(group_traffic(g, p.groups[0]).read_bytes == 8893488147419103232);
  CHECK(group_traffic(g, p.groups[0]).bytes() == INT64_MAX);
  CHECK(plan_totals(g, p).bytes() == INT64_MAX);
  CHECK(traffic_ratio(plan_totals(g, p), plan_totals(g, plan_unfused(g))) == 1.0);
  const RewriteResult rw = rewrite(parse_graph(
      "dim N = 1152921504606846976\ninput x : f32[1, N]\ninput r : f32[1, N]\nh = x + r\n"
      "y = h * rsqrt(mean(h * h, -1, keepdim) + 1e-6)\noutput h, y\n", "t"));
  const Plan q = plan_fusion(rw.graph);
  REQUIRE(q.groups.size() == 1);
  CHECK(group_traffic(rw.graph, q.groups[0]).read_bytes == INT64_MAX);  // re-read, saturated
  const std::array<int, 2> sizes{4, 4};
  CHECK(row_cache_bytes(sizes, int64_t{1} << 60) == INT64_MAX);
  CHECK(row_cache_bytes(sizes, 5) == 64);  // 20 B each, to 16 B
  CHECK(add_bytes(INT64_MAX, 1) == INT64_MAX);
  CHECK(mul_bytes(int64_t{1} << 62, 2) == INT64_MAX);
  CHECK(mul_bytes(3, 5) == 15);
  const std::string text = format_plan_text(rw, q, plan_unfused(rw.graph));
  CHECK(text.find("2^63 - 1 B or more (the count saturated)") != std::string::npos);  // a bound, not a count
  CHECK(text.find("9223372036854775807") == std::string::npos);
  CHECK(text.find("predicted traffic fused/unfused: unknown (the byte counts pass 2^63 - 1 at these dims)") !=
        std::string::npos);
  CHECK(plan_to_json(rw, q, plan_unfused(rw.graph))["traffic_ratio"].is_null());  // it was 1.0: no ratio either
}

TEST_CASE("plan JSON names the graph outputs each group writes, aliases and copies of inputs too") {
  // "outputs" names values: z = y left z out, and a copy of x read as the input x (a tester's).
  const RewriteResult rw = rewrite(parse_graph(
      "input x : f32[4]\ny = x * 2\nz = y\nc = -(-x)\noutput y, z, c\n", "t"));
  const Plan q = plan_fusion(rw.graph);
  const nlohmann::json j = plan_to_json(rw, q, plan_unfused(rw.graph));
  std::vector<std::string> all;
  for (const auto& grp : j["fused"]["groups"])
    for (const auto& n : grp["graph_outputs"]) all.push_back(n.get<std::string>());
  std::sort(all.begin(), all.end());
  CHECK(all == std::vector<std::string>{"c", "y", "z"});
}

TEST_CASE("plan text and JSON name the values a kernel recomputes that another kernel computes too") {
  // exp(x) is computed by the [2, 64, 64] kernel and the row sum's, written by neither: the text
  // listed it among both kernels' nodes, with nothing to tell it was evaluated twice.
  const RewriteResult rw = rewrite(parse_graph("input x : f32[64, 64]\ninput u : f32[2, 64, 64]\nc = exp(x)\n"
                                               "a = c + u\ns = sum(c, -1, keepdim)\nd = x * 3\noutput a, s, d\n", "r.txt"));
  const Plan q = plan_fusion(rw.graph);
  REQUIRE(q.groups.size() == 2);  // d joins the row sum's kernel
  const std::string text = format_plan_text(rw, q, plan_unfused(rw.graph));
  CAPTURE(text);
  const nlohmann::json j = plan_to_json(rw, q, plan_unfused(rw.graph));
  size_t marked = 0;
  for (size_t k = 0; k < q.groups.size(); ++k) {
    const auto r = j["fused"]["groups"][k]["recomputed"].get<std::vector<std::string>>();
    const auto& nodes = j["fused"]["groups"][k]["nodes"];
    const bool has_c = std::find(nodes.begin(), nodes.end(), "c") != nodes.end();
    CHECK(r == (has_c ? std::vector<std::string>{"c"} : std::vector<std::string>{}));
    marked += has_c;
  }
  CHECK(marked == 2);
  CHECK(text.find("  recomputed: c (also in kernel ") != std::string::npos);
  // d, computed by one kernel only, is no recomputed value; nor a value a kernel writes.
  CHECK(text.find("recomputed: d") == std::string::npos);
}

TEST_CASE("a plan whose fused kernels move no bytes says so (no 'predicted speedup 1.00x')") {
  // Size 0, the unfused plan still moving the typed constants' bytes.
  const RewriteResult rw = rewrite(parse_graph(
      "dim N = 0\ninput x : f32[N]\ny = x * exp(cast(2, f32)) * cast(3, f32)\noutput y\n", "t"));
  const Plan q = plan_fusion(rw.graph), u = plan_unfused(rw.graph);
  const std::string text = format_plan_text(rw, q, u);
  CAPTURE(text);
  REQUIRE(plan_totals(rw.graph, q).bytes() == 0);
  REQUIRE(plan_totals(rw.graph, u).bytes() > 0);
  CHECK(text.find("predicted traffic fused/unfused: 0.000 (the fused plan moves no bytes, the unfused") !=
        std::string::npos);
}

TEST_CASE("size-0 reductions: rows of length 0 read nothing, empty outputs launch nothing (as the launcher)") {
  // A hostile tester's finds: b was counted read over an empty iteration (fused 20 B against the
  // unfused 0 B: "predicted speedup 0.50x"), and softmax over rows of length 0 planned one launch
  // where the launcher makes none (jit/launch.cpp, writes_nothing).
  const Graph col = parse_graph("dim N = 0\ninput x : f32[N, 5]\ninput b : f32[5]\ny = x + b\ns = sum(y, 0)\noutput s\n", "t");
  const Plan pc = plan_fusion(col);
  REQUIRE(pc.groups.size() == 1);
  CHECK(group_traffic(col, pc.groups[0]).read_bytes == 0);
  CHECK(group_traffic(col, pc.groups[0]).write_bytes == 20);  // the sums of nothing: zeros
  CHECK(row_split_at(col, pc.groups[0], analyze_reduce_group(col, pc.groups[0])).launches == 1);
  // ... but a row-scope input of the epilogue is read once per row (a reviewer's find: y = b was
  // counted as reading nothing).
  const Graph epi = parse_graph("dim N = 64\ndim C = 0\ninput x : f32[N, C]\ninput b : f32[N, 1]\n"
                                "s = sum(x, -1, keepdim)\ny = s + b\noutput y\n", "t");
  const Plan pe = plan_fusion(epi);
  REQUIRE(pe.groups.size() == 1);
  CHECK(group_traffic(epi, pe.groups[0]).read_bytes == 256);
  CHECK(group_traffic(epi, pe.groups[0]).write_bytes == 256);
  // ... also one the rows load per element too (r in sum(x * r) + r), and a column reduction's
  // broadcast row (b in sum(x * b, 0) + b): a hostile tester's finds.
  for (const char* text : {"dim R = 3\ndim C = 0\ninput x : f32[R, C]\ninput r : f32[R, 1]\n"
                           "s = sum(x * r, 1, keepdim) + r\noutput s\n",
                           "dim R = 0\ndim C = 3\ninput x : f32[R, C]\ninput r : f32[C]\n"
                           "s = sum(x * r, 0) + r\noutput s\n"}) {
    CAPTURE(text);
    const Graph both = parse_graph(text, "t");
    const Plan pb = plan_fusion(both);
    REQUIRE(pb.groups.size() == 1);
    CHECK(group_traffic(both, pb.groups[0]).read_bytes == 12);
  }
  const RewriteResult rw = rewrite(parse_graph("dim N = 3\ndim C = 0\ninput x : f32[N, C]\ny = softmax(x, -1)\noutput y\n", "t"));
  const Plan q = plan_fusion(rw.graph);
  REQUIRE(q.groups.size() == 1);
  CHECK(writes_nothing(rw.graph, q.groups[0]));
  CHECK(row_split_at(rw.graph, q.groups[0], analyze_reduce_group(rw.graph, q.groups[0])).launches == 0);
  CHECK(group_traffic(rw.graph, q.groups[0]).bytes() == 0);
  CHECK(predicted_speedup(0, 24) == std::numeric_limits<double>::infinity());
  CHECK(predicted_speedup(0, 0) == 1.0);
  CHECK(predicted_speedup(20, 40) == 2.0);
}

TEST_CASE("a broadcast producer is recomputed in the consumer unless it is an output") {
  Graph g = parse_graph("input x : f32[8, 4]\ninput b : f32[4]\nbb = exp(b) * 2\ny = x + bb\noutput y\n", "t");
  Plan p = plan_fusion(g);
  REQUIRE(p.groups.size() == 1);
  CHECK(p.groups[0].nodes.size() == 3);
  CHECK(p.groups[0].inputs.size() == 2);
  check_plan(g, p);
  // The same producer as a graph output: materialised in its own [4] group, read by the other.
  Graph h = parse_graph("input x : f32[8, 4]\ninput b : f32[4]\nbb = exp(b) * 2\ny = x + bb\noutput y, bb\n", "t");
  Plan q = plan_fusion(h);
  CHECK(q.groups.size() == 2);
  check_plan(h, q);
  CHECK(q.groups[0].note.find("other groups") != std::string::npos);
  // Recomputation off: the producer gets its own group.
  Plan r = plan_fusion(g, {.max_recompute_ops = 0, .rules = {}, .vector_rows = {}});
  CHECK(r.groups.size() == 2);
  check_plan(g, r);
}

TEST_CASE("a widening cast two reduction groups read is recomputed in both, not written as an intermediate") {
  // CSE leaves one cast(x, i64) for both sums; writing it (8 bytes an element) and reading it back
  // would move 16 bytes where recomputing reads the 1-byte input again.
  Graph g = rewrite(parse_graph("input x : i8[3, 40]\na = sum(x, -1)\ne = sum(x)\noutput a, e\n", "t")).graph;
  REQUIRE(g.op_count() == 3);  // one cast, two sums
  Plan p = plan_fusion(g);
  REQUIRE(p.groups.size() == 2);
  check_plan(g, p);
  for (const FusionGroup& grp : p.groups) {
    REQUIRE(grp.inputs.size() == 1);
    CHECK(g.node(grp.inputs[0]).op == Op::Input);
  }
  CHECK(plan_totals(g, p).write_bytes == 3 * 8 + 8);  // the outputs alone
  // A value wider in its operands than in itself (a + b of two inputs) is still written once.
  Graph h = rewrite(parse_graph("input x : f32[3, 40]\ninput y : f32[3, 40]\nz = x + y\na = sum(z, -1)\ne = sum(z)\n"
                                "output a, e\n", "t")).graph;
  Plan q = plan_fusion(h);
  check_plan(h, q);
  CHECK(plan_totals(h, q).write_bytes > 3 * 4 + 4);
}

TEST_CASE("x - amax(x, 0) that an axis-1 group reads is recomputed there, not written between the kernels") {
  // softmax over axis 0, then a sum over axis 1: the axis-0 kernel writes the column maxima and
  // sums (2 x 300 f32), the axis-1 kernel reads x again to recompute x - max and exp.
  Graph g = rewrite(parse_graph("input x : f32[64, 300]\ny = softmax(x, 0)\ns = sum(y, 1)\noutput s\n", "t")).graph;
  Plan p = plan_fusion(g);
  check_plan(g, p);
  REQUIRE(p.groups.size() == 2);
  CHECK(plan_totals(g, p).write_bytes == 2 * 300 * 4 + 64 * 4);  // was 64 x 300 x 4 + 300 x 4 + 64 x 4
  // Read by three other groups: 3 x (x + its column max) against (1 + 3) x d still recomputes d;
  // e = x * z, as large as each of its operands, is written once and read by the others.
  Graph h = rewrite(parse_graph("input x : f32[64, 300]\ninput z : f32[64, 300]\nd = x - amax(x, 0, keepdim)\n"
                                "e = x * z\na = sum(d * e, 0)\nb = sum(d, 1)\nc = sum(d * d)\n"
                                "f = sum(e, 1)\ng = sum(e)\nk = amax(e, 0)\noutput a, b, c, f, g, k\n", "t")).graph;
  Plan q = plan_fusion(h);
  check_plan(h, q);
  std::vector<Op> written;
  for (const FusionGroup& grp : q.groups)
    for (NodeId id : grp.outputs) written.push_back(h.node(id).op);
  CHECK(std::count(written.begin(), written.end(), Op::Sub) == 0);  // d
  CHECK(std::count(written.begin(), written.end(), Op::Mul) == 1);  // e
}

TEST_CASE("a recomputed value's cost counts each shared op once and stops at the values it reads") {
  // LayerNorm's output feeding a whole-tensor amax (an FP8 per-tensor scale): y's expression is
  // 10 distinct ops over x and the row stats (17 counted as a tree, d used twice; the reductions'
  // own operands were counted too), so the amax kernel recomputes yf from x instead of the row
  // kernel writing abs(yf) in f32 for it: 2 bytes an element written (y) instead of 6.
  Graph g = rewrite(parse_graph("input x : bf16[64, 512]\ninput w : bf16[512]\ninput b : bf16[512]\nxf = cast(x, f32)\n"
                                "mu = mean(xf, -1, keepdim)\nd = xf - mu\n"
                                "yf = d * rsqrt(mean(d * d, -1, keepdim) + 1e-5) * cast(w, f32) + cast(b, f32)\n"
                                "y = cast(yf, bf16)\namax_y = amax(abs(yf))\noutput y, amax_y\n", "t")).graph;
  Plan p = plan_fusion(g);
  check_plan(g, p);
  REQUIRE(p.groups.size() == 2);
  CHECK(plan_totals(g, p).write_bytes == 64 * 512 * 2 + 2 * 64 * 4 + 4);  // y, the row stats, amax_y
  // x * sigmoid(x) reads x alone: recomputed in the column sum's kernel (x read again) rather
  // than written and read back.
  Graph h = rewrite(parse_graph("input x : f32[256, 128]\nh = x * sigmoid(x)\nmu = mean(h, -1, keepdim)\nd = h - mu\n"
                                "y = d * rsqrt(mean(d * d, -1, keepdim) + 1e-5)\ncs = sum(h, 0)\noutput y, cs\n", "t")).graph;
  Plan q = plan_fusion(h);
  check_plan(h, q);
  CHECK(plan_totals(h, q).write_bytes == 256 * 128 * 4 + 128 * 4);  // y and cs
  // A graph output is in memory: an expression over it reads it (not its own expression).
  // w = z > 0 over an f64 output z is written as bool rather than recomputed from 8-byte z; a cast
  // of a 20-op output t is recomputed from t (one read of t, not a write and a read of the cast).
  Graph o = rewrite(parse_graph("input x : i8[64, 48]\nz = cast(x, f64) * 1.5\nw = z > 0\na = sum(w, 0)\n"
                                "b = sum(w, 1)\noutput z, a, b\n", "t")).graph;
  Plan po = plan_fusion(o);
  check_plan(o, po);
  CHECK(plan_totals(o, po).read_bytes == 64 * 48 + 64 * 48);  // x, then w (bool) in the axis-1 kernel
  std::string chain = "input x : f32[40, 30]\nt0 = sin(x)\n";
  for (int k = 1; k < 20; ++k) chain += fmt::format("t{} = {}(t{})\n", k, k % 2 ? "cos" : "tanh", k - 1);
  Graph c = rewrite(parse_graph(chain + "w = cast(t19, f64)\na = sum(w, 0)\nb = sum(w, 1)\noutput t19, a, b\n", "t")).graph;
  Plan pc = plan_fusion(c);
  check_plan(c, pc);
  CHECK(plan_totals(c, pc).write_bytes == 40 * 30 * 4 + 30 * 8 + 40 * 8);  // t19, a, b: no w
  // An expression of more than max_recompute_ops distinct ops is written.
  PlanOptions few;
  few.max_recompute_ops = 1;  // h is 2 ops: sigmoid, mul
  CHECK(plan_totals(h, plan_fusion(h, few)).write_bytes > 256 * 128 * 4 + 128 * 4);
}

TEST_CASE("outputs of different shapes go to different groups") {
  Graph g = parse_graph("input x : f32[8, 4]\ninput b : f32[4]\ny = x * 2\nc = b + 1\noutput y, c\n", "t");
  Plan p = plan_fusion(g);
  CHECK(p.groups.size() == 2);
  check_plan(g, p);
}

TEST_CASE("an output that rewrites made an input is written by a kernel reading that input, not a copy") {
  // It was a copy group of its own: x read twice, and z written over x in place was refused (the
  // copy read x after z's kernel wrote it).
  Graph g = rewrite(parse_graph("input x : f32[8]\ny = x * 1\nz = x + 1\noutput y, z\n", "t")).graph;
  CHECK(g.node(g.outputs[0].node).op == Op::Cast);
  Plan p = plan_fusion(g);
  REQUIRE(p.groups.size() == 1);
  CHECK(p.groups[0].outputs.size() == 2);
  check_plan(g, p);
  // An RMSNorm whose f32 input is also cast to f32 and written (`h`): one kernel, x read once.
  Graph r = rewrite(parse_graph("input x : f32[4, 64]\nh = cast(x, f32)\nms = mean(h * h, -1, keepdim)\n"
                                "y = h * rsqrt(ms + 1e-6)\noutput h, y\n", "r")).graph;
  Plan pr = plan_fusion(r);
  REQUIRE(pr.groups.size() == 1);
  CHECK(plan_totals(r, pr).read_bytes == 4 * 64 * 4);
  check_plan(r, pr);
  // Two outputs of one input share one op; a param output keeps its fill group.
  Graph t = rewrite(parse_graph("input x : f32[8]\nparam p : f32 = 2\na = x * 1\nb = cast(x, f32)\nc = p * 1\n"
                                "output a, b, c\n", "t2")).graph;
  CHECK(t.outputs[0].node == t.outputs[1].node);
  Plan pt = plan_fusion(t);
  REQUIRE(pt.groups.size() == 2);
  CHECK(pt.groups[1].note.find("fill") == 0);
  check_plan(t, pt);
}

TEST_CASE("a graph planned without rewrites whose output is an input gets a copy group") {
  Graph g = parse_graph("input x : f32[8]\nz = x + 1\noutput z\n", "t");
  g.outputs.push_back({"y", g.inputs[0], {}});  // as no parser or builder makes it (verify refuses it)
  Plan p = plan_fusion(g);
  REQUIRE(p.groups.size() == 2);
  CHECK(p.groups[1].note.find("copy") == 0);
  CHECK(p.groups[1].nodes.empty());
}

TEST_CASE("600 inputs: split by the kernel parameter byte cap, never over it") {
  GraphBuilder b("wide");
  Operand acc;
  for (int k = 0; k < 600; ++k) {
    // Broadcast inputs ([64, 1] and [1, 64]) carry strides too.
    Shape s = k % 2 ? Shape{{64, -1}, {1, -1}} : Shape{{1, -1}, {64, -1}};
    NodeId in = b.add_input("x" + std::to_string(k), DType::F32, s);
    if (k == 0) { acc = Operand::of(in); continue; }
    Operand a[2] = {acc, Operand::of(in)};
    acc = b.apply(Op::Add, a);
  }
  b.add_output("y", acc);
  Graph g = b.finish();
  PlanOptions o;
  o.max_ops_per_group = 100000;  // isolate the parameter cap
  Plan p = plan_fusion(g, o);
  CHECK(p.groups.size() > 1);
  bool param_split = false;
  for (const auto& grp : p.groups) param_split |= grp.note.find("parameters over 4096") != std::string::npos;
  CHECK(param_split);
  check_plan(g, p, o);
  Plan d = plan_fusion(g);  // default caps: op cap and parameter cap both hold
  check_plan(g, d);
}

TEST_CASE("op cap splits long chains") {
  GraphBuilder b("chain");
  Operand x = Operand::of(b.add_input("x", DType::F32, {{16, -1}}));
  for (int k = 0; k < 1000; ++k) {
    Operand a[1] = {x};
    x = b.apply(k % 2 ? Op::Sin : Op::Cos, a);
  }
  b.add_output("y", x);
  Graph g = b.finish();
  Plan p = plan_fusion(g);
  CHECK(p.groups.size() == 4);
  check_plan(g, p);
}

TEST_CASE("a chain of dependent reductions is split where its passes would recompute more than kMaxPassOps ops") {
  // v = v - amax(v, -1, keepdim), n times: pass k computes the k subtractions before it again (a
  // C++ API hostile tester's find: n = 100 made 858 KB of source, compiled for 50 s). 30 steps
  // (0 + 1 + ... + 29 = 435 ops in the reductions' passes, 30 in the epilogue) stay one kernel;
  // 40 (780 + 40) split after the most steps that fit, 31 (465 + 31 = 496 ops): 31 + 9. Halves
  // made 70 steps 4 kernels (35 did not fit, then 17 and 18), and split 33 between an amax and its
  // subtraction (the second kernel read the row value too); now 31 + 31 + 8 and 31 + 2.
  const auto steps = [](int n) {
    std::string s = "input x : f32[4, 8]\nv0 = x\n";
    for (int k = 0; k < n; ++k) s += fmt::format("v{} = v{} - amax(v{}, -1, keepdim)\n", k + 1, k, k);
    return parse_graph(s + fmt::format("output v{}\n", n), "chain.txt");
  };
  const Graph g30 = steps(30), g40 = steps(40);
  const Plan p30 = plan_fusion(g30), p40 = plan_fusion(g40);
  check_plan(g30, p30);
  check_plan(g40, p40);
  REQUIRE(p30.groups.size() == 1);
  CHECK(analyze_reduce_group(g30, p30.groups[0]).pass_ops == 465);
  REQUIRE(p40.groups.size() == 2);
  for (const FusionGroup& grp : p40.groups) CHECK(analyze_reduce_group(g40, grp).pass_ops <= kMaxPassOps);
  CHECK(p40.groups[1].note.find("split: the passes over each row would evaluate more than 512 ops per element") !=
        std::string::npos);
  CHECK(analyze_reduce_group(g40, p40.groups[0]).pass_ops == 496);
  const Graph g33 = steps(33), g70 = steps(70);
  const Plan p33 = plan_fusion(g33), p70 = plan_fusion(g70);
  check_plan(g33, p33);
  check_plan(g70, p70);
  CHECK(p70.groups.size() == 3);
  REQUIRE(p33.groups.size() == 2);
  CHECK(p33.groups[1].inputs == std::vector<NodeId>{p33.groups[0].outputs.at(0)});  // v31 only
  // Early outputs are written in the one pass that computes them for the reduction: counted once
  // (a reviewer's find: the mul and add were counted in the pass and again in an epilogue).
  const Graph early = parse_graph("input x : f32[4, 8]\ny = x * 2 + 1\nm = amax(y, -1)\noutput y, m\n", "early.txt");
  const Plan pe = plan_fusion(early);
  REQUIRE(pe.groups.size() == 1);
  const ReduceGroupInfo info = analyze_reduce_group(early, pe.groups[0]);
  CHECK(info.early_outputs);
  CHECK(info.pass_ops == 2);
}

TEST_CASE("the op cap splitting a row output off its reductions does not plan every reduction alone") {
  // The cap closed the LayerNorm's group after v + eps: the rest (rsqrt, a row output; y) had no
  // reduction, could not write r as a reduction group, and the planner planned both means alone
  // (and d, d * d, y in kernels between them). Only the row value at fault leaves the key now.
  Graph g = parse_graph("input x : f32[16, 64]\nm = mean(x, -1, keepdim)\nd = x - m\nv = mean(d * d, -1, keepdim)\n"
                        "r = rsqrt(v + 1e-5)\ny = d * r\noutput y, r\n",
                        "ln.txt");
  const PlanOptions o{.max_ops_per_group = 5, .rules = {}, .vector_rows = {}};
  Plan p = plan_fusion(g, o);
  check_plan(g, p, o);
  const auto both = [&](const FusionGroup& grp) {
    return std::count_if(grp.nodes.begin(), grp.nodes.end(), [&](NodeId id) { return is_reduction(g.node(id).op); }) == 2;
  };
  CHECK(std::any_of(p.groups.begin(), p.groups.end(), both));
  CHECK(p.groups.size() == 3);  // the means with d; r over the rows; y
}

namespace {
// `n` unary ops (sin, cos, tanh, abs in turn) from `from`, named PREFIX0.., as graph text.
std::string chain(const std::string& prefix, const std::string& from, int n) {
  static const char* ops[] = {"sin", "cos", "tanh", "abs"};
  std::string s;
  for (int k = 0; k < n; ++k)
    s += fmt::format("{}{} = {}({})\n", prefix, k, ops[k % 4], k ? prefix + std::to_string(k - 1) : from);
  return s;
}
}  // namespace

TEST_CASE("row values split off their reductions: detached, or the reductions alone, whichever moves fewer bytes") {
  // A reviewer's graphs where detaching the stranded row values cost more than planning the
  // key's reductions alone: another key's softmax lost its prologue (4 kernels, 5676 B), and a
  // value riding along in the sum's group was written and read back (4320 B).
  Graph two = parse_graph("input x : f32[8, 33]\nc = sum(x, 0, keepdim)\n" + chain("r", "c", 256) + chain("e", "x", 20) +
                              "l = softmax(e19, -1)\noutput r255, l\n",
                          "two.txt");
  Plan p = plan_fusion(two);
  check_plan(two, p);
  CHECK(p.groups.size() == 3);
  CHECK(plan_totals(two, p).bytes() == 3564);
  Graph one = parse_graph("input x : f32[8, 33]\ne0 = sin(x)\ns = sum(x, -1, keepdim)\n" + chain("r", "s", 255) +
                              "t0 = sin(e0)\noutput r254, t0\n",
                          "one.txt");
  p = plan_fusion(one);
  check_plan(one, p);
  CHECK(p.groups.size() == 3);
  CHECK(plan_totals(one, p).bytes() == 3264);
  // The two are compared as the launcher reads rows: on a GPU without the row cache, rows of 33
  // f32 are re-read, not as vectors (they counted once, and the 3-kernel plan moved 6432 B).
  // (`plan --arch sm_90 --no-row-cache`: 4536 B, its vector_rows answered per kernel.)
  Graph lse = parse_graph("input x : f32[8, 33]\nl = logsumexp(x, -1, keepdim)\na = abs(l)\nd = x - l\n" +
                              chain("r", "a", 247) + "c = cos(d)\noutput r246, c\n",
                          "lse.txt");
  PlanOptions o;
  o.rules.short_rows = true;
  o.rules.row_cache = false;
  o.vector_rows = [](const FusionGroup&) { return false; };
  p = plan_fusion(lse, o);
  check_plan(lse, p, o);
  CHECK(plan_totals(lse, p).bytes() == 5568);  // 5632 before groups moved after a later one they read (move_after)
}

TEST_CASE("independent statements in either order give one plan: a group moves after a later one it comes to read") {
  // A plan tester's find: with `a = x * 2` written before `s`, y = a / s opened a third kernel and
  // a was written and read back (17.05 MB against 8.66 MB with s written first).
  const std::string head = "input x : f32[1024, 1024]\ninput w : f32[1024, 64]\n";
  const std::string a = "a = x * 2\n", sv = "s = amax(abs(w), -1, keepdim)\n", tail = "y = a / s\noutput y\n";
  const Graph first = parse_graph(head + a + sv + tail, "a.txt"), second = parse_graph(head + sv + a + tail, "s.txt");
  const Plan p1 = plan_fusion(first), p2 = plan_fusion(second);
  check_plan(first, p1);
  check_plan(second, p2);
  CHECK(p1.groups.size() == 2);
  CHECK(p2.groups.size() == 2);
  CHECK(plan_totals(first, p1).bytes() == plan_totals(second, p2).bytes());
  // A group that reads the moved one moves after it too (h over [2, 64, 64] reads a, an output):
  // s, then a and y in one kernel, then h (4 kernels before, a for each statement).
  const Graph three = parse_graph("input x : f32[64, 64]\ninput u : f32[2, 64, 64]\ninput w : f32[64, 8]\n"
                                   "a = x * 2\nh = a + u\ns = amax(w, -1, keepdim)\ny = a / s\noutput h, y, a\n", "m.txt");
  const Plan p3 = plan_fusion(three);
  check_plan(three, p3);
  REQUIRE(p3.groups.size() == 3);
  CHECK(p3.groups[0].reduce_mask != 0);        // s first
  CHECK(p3.groups[1].nodes.size() == 2);       // then a and y
  CHECK(p3.groups[2].iter_shape.size() == 3);  // then h, which reads a
  // A move can cost more (var's epilogue moved after an unrelated amin stranded var's reductions:
  // 6 kernels, 4x the bytes, a move tester's find): planned without moves too, the cheaper kept.
  const Graph var = parse_graph("input x : f32[4096, 1024]\ninput c : f32[16]\nv = var(x, 1)\nm = amin(c, 0)\n"
                                "y = exp(v - m)\noutput y\n", "v.txt");
  const Plan p4 = plan_fusion(var);
  check_plan(var, p4);
  CHECK(p4.groups.size() == 3);
  CHECK(plan_totals(var, p4).bytes() == 16826436 + 65540);
}

TEST_CASE("deterministic and valid on 400 random graphs") {
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    fusejit::testing::RandomGraphOptions o;
    o.seed = seed;
    o.num_ops = 5 + static_cast<int>(seed % 40);
    o.max_outputs = 5;
    Graph g = fusejit::testing::random_graph(o);
    for (const Graph* h : {&g}) {
      Graph r = rewrite(*h).graph;
      Plan a = plan_fusion(r), b = plan_fusion(r);
      REQUIRE(a.groups.size() == b.groups.size());
      for (size_t k = 0; k < a.groups.size(); ++k) {
        CHECK(a.groups[k].nodes == b.groups[k].nodes);
        CHECK(a.groups[k].inputs == b.groups[k].inputs);
        CHECK(a.groups[k].outputs == b.groups[k].outputs);
      }
      check_plan(r, a);
      check_plan(*h, plan_fusion(*h));  // also without rewrites
      check_plan(r, plan_fusion(r, {.max_ops_per_group = 3, .rules = {}, .vector_rows = {}}));  // tiny cap: many splits
    }
  }
}

TEST_CASE("byte counts take the unit of their value as rounded: 999,995 B is 1.00 MB, not 1000.00 kB (an auditor's find)") {
  using fusejit::ir::format_bytes;
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(999) == "999 B");
  CHECK(format_bytes(1000) == "1.00 kB");
  CHECK(format_bytes(999'994) == "999.99 kB");
  CHECK(format_bytes(999'995) == "1.00 MB");
  CHECK(format_bytes(999'999) == "1.00 MB");
  CHECK(format_bytes(999'994'999) == "999.99 MB");
  CHECK(format_bytes(999'995'000) == "1.00 GB");
  CHECK(format_bytes(int64_t{1} << 62) == "4611686018.43 GB");
  CHECK(format_bytes(INT64_MAX) == "2^63 - 1 B or more (the count saturated)");  // a bound, not a count
}

TEST_CASE("a group a move put after one split off it is not called the first of its shape's kernels") {
  // c is split off a's group by the op cap; r joining t's group moves that group, and a's with
  // it (a reads t), after d: the split-off group launches first, so a's may not say "first of".
  const Graph g = parse_graph("input x : f32[64, 64]\ninput v : f32[64, 16]\ninput w : f32[64, 8]\n"
                              "t = sum(v, -1, keepdim)\na = x * t\nb = a + 1\nb2 = b * 2\nc = x - 3\n"
                              "d = amax(w, -1, keepdim)\nr = sum(v * d, -1, keepdim)\noutput b2, c, r\n", "m.txt");
  const Plan p = plan_fusion(g, {.max_ops_per_group = 3, .rules = {}, .vector_rows = {}});
  check_plan(g, p);
  REQUIRE(p.groups.size() == 4);
  CHECK(p.groups[0].note.find("split: more than 3 ops") == 0);
  CHECK(p.groups[3].note.find("one of 2 kernels over [64, 64] (opened first and moved later") == 0);
  CHECK(p.groups[3].note.find("first of") == std::string::npos);
}

TEST_CASE("a member that would make its group read a later group depending on it opens a new group, moves or not") {
  // y's group a is read by h's group, whose sum q y reads: moving a after q's group would make a
  // cycle, so y opens a group after q (the Dependency note), a and y each written by their own.
  const Graph g = parse_graph("input x : f32[64, 64]\ninput u : f32[2, 64, 64]\n"
                              "a = x * 2\nh = a + u\nm = sum(h, -1)\nq = sum(m, 0)\ny = a + q\noutput a, y\n", "c.txt");
  const Plan p = plan_fusion(g);
  check_plan(g, p);
  REQUIRE(p.groups.size() == 4);
  CHECK(p.groups[0].note.find("first of 2 kernels over [64, 64]") == 0);
  CHECK(p.groups[3].note == "new group: the previous group of this shape would read a value computed after it (cycle)");
}

TEST_CASE("moves stop at their bound, every later member opening a group that says so, and the plan stays valid") {
  // 40 chains of distinct shapes, each step dividing every chain by a new row maximum planned
  // after them, the chains taken in the order the step before left them: each join moves its
  // chain's group past the ones not yet moved, about 860 positions a step of 41 nodes, over the
  // bound of 4 a node (at least 65,536): joins in later steps open groups (MoveBudget).
  std::string text;
  constexpr int kChains = 40, kSteps = 200;
  for (int c = 0; c < kChains; ++c) text += fmt::format("input x{} : f32[8, {}]\n", c, 8 + c);
  for (int s = 0; s < kSteps; ++s) text += fmt::format("input w{} : f32[8, {}]\n", s, 100 + s);
  for (int s = 0; s < kSteps; ++s) {
    text += fmt::format("m{} = amax(w{}, -1, keepdim)\n", s, s);
    for (int k = 0; k < kChains; ++k) {
      const int c = s % 2 ? kChains - 1 - k : k;  // (in the order of the step before, moves pass few groups)
      text += fmt::format("x{}_{} = {} / m{}\n", c, s, s ? fmt::format("x{}_{}", c, s - 1) : fmt::format("x{}", c), s);
    }
  }
  for (int c = 0; c < kChains; ++c) text += fmt::format("output x{}_{}\n", c, kSteps - 1);
  const Graph g = parse_graph(text, "b.txt");
  const Plan p = plan_fusion(g);
  check_plan(g, p);
  size_t budget_notes = 0;
  for (const auto& grp : p.groups) budget_notes += grp.note.find("would pass the bound on such moves") != std::string::npos;
  CHECK(budget_notes > 0);
  CHECK(p.groups.size() < static_cast<size_t>(kSteps * (kChains + 1)));  // moves joined the earlier steps
}
