#include <doctest/doctest.h>
#include "ir/builder.h"
using namespace fusejit::ir;
TEST_CASE("builder promotes and broadcasts") {
  GraphBuilder b("t");
  NodeId x = b.add_input("x", DType::F16, {{4, -1}, {1, -1}});
  NodeId y = b.add_input("y", DType::F32, {{3, -1}});
  Operand args[2] = {Operand::of(x), Operand::of(y)};
  Operand r = b.apply(Op::Add, args);
  CHECK(b.graph().node(r.node).dtype == DType::F32);
  CHECK(num_elements(b.graph().node(r.node).shape) == 12);
  Operand bad[2] = {Operand::of(y), Operand::of(b.add_input("z", DType::I32, {{5, -1}}))};
  CHECK_THROWS_AS(b.apply(Op::Add, bad), UserError);
}
