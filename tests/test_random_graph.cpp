// The random-graph generator (tests/support/random_graph.h) itself: it reaches every op of
// ir/ops.def, and the integer-only rows (bit operations, shifts) on every integer dtype with shift
// counts outside [0, width), so the property tests built on it (test_cpu_path, test_rewrite,
// test_plan, test_nvrtc_samples, ...) exercise them.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <utility>

#include "ir/graph.h"
#include "tests/support/random_graph.h"

using namespace fusejit;
using ir::DType;
using ir::Op;

TEST_CASE("random graphs contain every op, the bit operations on every integer dtype, shifts past the width") {
  std::map<Op, int> seen;
  std::set<std::pair<Op, DType>> int_rows;
  int counts_outside = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    testing::RandomGraphOptions o;
    o.seed = seed;
    const ir::Graph g = testing::random_graph(o);
    for (const ir::Node& n : g.nodes) {
      ++seen[n.op];
      const ir::OpDomain d = ir::op_info(n.op).domain;
      if (ir::is_leaf(n.op) || (d != ir::OpDomain::Int && d != ir::OpDomain::IntBool)) continue;
      int_rows.insert({n.op, n.dtype});
      if (n.op != Op::LeftShift && n.op != Op::RightShift) continue;
      const ir::Node& count = g.node(n.args[1]);
      if (count.op == Op::Const && (count.value.i < 0 || count.value.i >= 8 * ir::dtype_size(n.dtype))) ++counts_outside;
    }
  }
  for (int k = 0; k < ir::kNumOps; ++k) {
    const Op op = static_cast<Op>(k);
    CAPTURE(ir::op_name(op));
    CHECK(seen[op] > 0);
    const ir::OpDomain d = ir::op_info(op).domain;
    if (d != ir::OpDomain::Int && d != ir::OpDomain::IntBool) continue;
    for (DType t : {DType::I8, DType::U8, DType::I32, DType::I64}) {
      CAPTURE(ir::dtype_name(t));
      CHECK(int_rows.count({op, t}) == 1);
    }
    if (d == ir::OpDomain::IntBool) CHECK(int_rows.count({op, DType::Bool}) == 1);
  }
  MESSAGE(counts_outside << " shifts by a constant count outside [0, width)");
  CHECK(counts_outside >= 10);
}
