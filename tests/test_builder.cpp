// The public GraphBuilder: misuse throws Error(User) instead of crashing; names are checked by the
// parser's own rules (ir/names.h), with the parser's messages; and every graph the builder accepts
// prints as text that parses back to the same graph (driven by random graphs and random names).
#include <doctest/doctest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "fusejit/fusejit.h"
#include "ir/builder.h"
#include "ir/reduce.h"
#include "lib/internal.h"
#include "tests/support/files.h"
#include "tests/support/random_graph.h"
#include "tests/support/warnings.h"

namespace fj = fusejit;

namespace {

// The message (what()) of the Error(User) that `f` throws; fails the test if it throws nothing.
template <class F>
std::string user_error(F&& f) {
  try {
    f();
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    return e.what();
  }
  FAIL("expected an Error(User)");
  return "";
}

std::string parse_error(const std::string& text) {
  return user_error([&] { fj::Graph::parse(text, "t.txt"); });
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a GraphBuilder and its values after build() throw Error(User), never crash") {
  fj::GraphBuilder b("g");
  fj::DimRef n = b.dim("N", 4);
  fj::Value x = b.input("x", fj::DType::F32, {n});
  fj::Value y = x * 2;
  b.name(y, "y");
  b.output("y", y);
  CHECK_FALSE(b.built());
  fj::Graph g = b.build();
  CHECK(b.built());
  CHECK(g.op_count() == 1);
  const std::string used = "already built its graph";
  CHECK(contains(user_error([&] { b.op("exp", {x}); }), used));
  CHECK(contains(user_error([&] { (void)(y + 1); }), used));
  CHECK(contains(user_error([&] { (void)(x * y); }), used));
  CHECK(contains(user_error([&] { b.cast(y, fj::DType::F16); }), used));
  CHECK(contains(user_error([&] { b.name(y, "z"); }), used));
  CHECK(contains(user_error([&] { b.output("z", y); }), used));
  CHECK(contains(user_error([&] { b.input("w", fj::DType::F32, {n}); }), used));
  CHECK(contains(user_error([&] { b.param("p", fj::DType::F32); }), used));
  CHECK(contains(user_error([&] { b.dim("M", 2); }), used));
  CHECK(contains(user_error([&] { b.build(); }), used));
  // The built graph is unaffected.
  CHECK(g.to_text() == "graph g\ndim N = 4\ninput x : f32[N]\ny = x * 2.0\noutput y\n");
}

TEST_CASE("a DType value outside the enum is Error(User), not an internal error") {
  const auto bad = static_cast<fj::DType>(99);
  fj::GraphBuilder b("g");
  const fj::Value x = b.input("x", fj::DType::F32, {4});
  CHECK_THROWS_WITH_AS(b.input("y", bad, {4}), "input 'y': invalid DType value 99 (not one of DType's enumerators)",
                       fj::Error);
  CHECK_THROWS_WITH_AS(b.param("p", bad, 1.0), "param 'p': invalid DType value 99 (not one of DType's enumerators)",
                       fj::Error);
  CHECK_THROWS_WITH_AS(b.cast(x, bad), "cast: invalid DType value 99 (not one of DType's enumerators)", fj::Error);
  CHECK_THROWS_WITH_AS(fj::HostTensor(bad, {2}), "host tensor: invalid DType value 99 (not one of DType's enumerators)",
                       fj::Error);
  CHECK_THROWS_WITH_AS(fj::dtype_name(bad), "dtype_name: invalid DType value 99 (not one of DType's enumerators)", fj::Error);
  CHECK_THROWS_WITH_AS(fj::dtype_size(bad), "dtype_size: invalid DType value 99 (not one of DType's enumerators)", fj::Error);
  b.output("z", b.cast(x, fj::DType::F16));
  const fj::Graph built = b.build();
  CHECK(built.op_count() == 1);  // the refused calls added nothing
  // Tensors given to a program: an input's or output's dtype is checked before it is named.
  fj::Options cpu;
  cpu.backend = fj::Backend::Cpu;
  const fj::Program p = fj::Program::compile(built, cpu);
  std::vector<float> in(4);
  std::vector<uint16_t> out(4);
  const int64_t shape[1] = {4};
  const fj::TensorRef good_in(in.data(), fj::DType::F32, shape), good_out(out.data(), fj::DType::F16, shape);
  const fj::TensorRef bad_in(in.data(), bad, shape), bad_out(out.data(), bad, shape);
  CHECK_THROWS_WITH_AS(p.launch({bad_in}, {good_out}), doctest::Contains("input 'x': invalid DType value 99"), fj::Error);
  CHECK_THROWS_WITH_AS(p.launch({good_in}, {bad_out}), doctest::Contains("output 'z': invalid DType value 99"), fj::Error);
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(in.data()), 16);
  CHECK_THROWS_WITH_AS(p.run({fj::TensorView(bad, shape, bytes)}), doctest::Contains("input 'x': invalid DType value 99"),
                       fj::Error);
  const fj::TensorRef bad_ins[1] = {bad_in};
  CHECK_THROWS_WITH_AS(p.output_shapes(bad_ins), doctest::Contains("input 'x': invalid DType value 99"), fj::Error);
  // Other enums from a cast integer.
  CHECK_THROWS_WITH_AS(p.launch({good_in}, {good_out}, {}, nullptr, static_cast<fj::PlanKind>(7)),
                       doctest::Contains("invalid PlanKind value 7"), fj::Error);
  fj::Options odd = cpu;
  odd.backend = static_cast<fj::Backend>(9);
  CHECK_THROWS_WITH_AS(fj::Program::compile(built, odd), doctest::Contains("Options::backend: invalid Backend value 9"),
                       fj::Error);
  odd = cpu;
  odd.message_style = static_cast<fj::MessageStyle>(5);
  CHECK_THROWS_WITH_AS(fj::Program::compile(built, odd), doctest::Contains("invalid MessageStyle value 5"), fj::Error);
  // A graph's own name may be a reserved word (`graph input` is unambiguous): builder and parser agree.
  for (const char* word : {"input", "graph", "nan"}) {
    CHECK_NOTHROW(fj::GraphBuilder{word});
    CHECK(fj::Graph::parse("graph " + std::string(word) + "\ninput x : f32[2]\ny = x * 2\noutput y\n").name() == word);
  }
  // A builder with no output is told how to add one in builder words (not graph text's `output y`).
  fj::GraphBuilder empty("e");
  (void)empty.input("x", fj::DType::F32, {2});
  CHECK_THROWS_WITH_AS(empty.build(), doctest::Contains("add one with output(), e.g. b.output(\"y\", v)"), fj::Error);
  // A moved-from HostTensor may be copied (it was a read of null memory).
  fj::HostTensor t(fj::DType::F32, {3});
  fj::HostTensor moved = std::move(t);
  const fj::HostTensor copy = t;  // NOLINT(bugprone-use-after-move): the case under test
  CHECK(moved.elements() == 3);
  // Moved from, it holds no data, and its copy is an empty tensor of shape {0} (it was shape {}
  // of 4 bytes: a 0-d tensor of 1 element from one of 0).
  CHECK(t.elements() == 0);  // NOLINT(bugprone-use-after-move): the case under test
  CHECK(t.bytes() == 0);     // NOLINT(bugprone-use-after-move)
  CHECK(copy.shape() == std::vector<int64_t>{0});
  CHECK(copy.elements() == 0);
  CHECK(copy.bytes() == 0);
  fj::HostTensor assigned(fj::DType::I8, {5});
  fj::HostTensor target(fj::DType::I8, {1});
  target = std::move(assigned);
  CHECK(assigned.elements() == 0);  // NOLINT(bugprone-use-after-move)
  fj::HostTensor again;
  again = assigned;  // NOLINT(bugprone-use-after-move): copy-assigned from a moved-from tensor
  CHECK(again.shape() == std::vector<int64_t>{0});
  CHECK(again.dtype() == fj::DType::I8);
  CHECK(target.elements() == 5);
  // Self-move-assignment keeps the tensor whole (it emptied the shape and kept the bytes).
  fj::HostTensor& alias = moved;
  moved = std::move(alias);
  CHECK(moved.shape() == std::vector<int64_t>{3});
  CHECK(moved.elements() == 3);
}

TEST_CASE("a warning handler that throws: the call goes on, the message reaches stderr") {
  int calls = 0;
  fj::set_warning_handler([&](std::string_view) {
    ++calls;
    throw std::runtime_error("handler failed");
  });
  // An unused input warns (at parse and at build).
  CHECK_NOTHROW(fj::Graph::parse("input x : f32[2]\ninput unused : f32[2]\ny = x * 2\noutput y\n"));
  fj::set_warning_handler({});
  CHECK(calls >= 1);
}

TEST_CASE("allow_unused refuses a value of a builder gone, even one at the same address (a hostile tester's find)") {
  fj::Value keep;
  std::string error = "none";
  for (int i = 0; i < 2; ++i) {
    fj::GraphBuilder b("g");  // the same stack slot both times
    fj::Value x = b.input("x", fj::DType::F32, {4});
    fj::Value y = b.input("y", fj::DType::F32, {4});
    if (i == 0) {
      keep = y;
      continue;
    }
    error = user_error([&] { b.allow_unused(keep); });  // it marked this builder's 'y'
    (void)x;
  }
  CHECK(contains(error, "a value of a GraphBuilder that no longer exists"));
}

TEST_CASE("a builder refuses the node past the graph limit, so every graph it builds parses back") {
  fj::GraphBuilder b("big");
  const fj::Value x = b.input("x", fj::DType::F32, {4});
  fj::Value v = x;
  std::string error;
  int ops = 0;
  try {
    for (; ops < (1 << 20); ++ops) v = v + x;
  } catch (const fj::Error& e) {
    CHECK(e.kind() == fj::ErrorKind::User);
    error = e.what();
  }
  CHECK(ops == (1 << 20) - 1);  // the input and 2^20 - 1 adds: 2^20 nodes
  CHECK(contains(error, "graph too large: more than 1048576 nodes (fusejit's limit)"));
}

TEST_CASE("allow_unused: an input the graph may leave unused builds without a warning; only inputs take it") {
  LibraryWarnings warnings;
  std::vector<std::string>& got = warnings.list;
  fj::GraphBuilder b("g");
  fj::Value x = b.input("x", fj::DType::F32, {4});
  fj::Value w = b.input("w", fj::DType::F32, {4});
  fj::Value z = b.input("z", fj::DType::F32, {4});
  b.allow_unused(w);
  fj::Value y = b.op("mul", x, 2.0);
  CHECK(contains(user_error([&] { b.allow_unused(y); }), "allow_unused: the value is no input of this GraphBuilder"));
  fj::GraphBuilder other("o");
  CHECK(contains(user_error([&] { other.allow_unused(x); }), "no input of this GraphBuilder"));
  b.output("y", y);
  const fj::Graph g = b.build();
  REQUIRE(got.size() == 1);  // z only
  CHECK(got[0] == "input 'z' is not used by any output");
  CHECK(g.inputs().size() == 3);  // w stays an input
  (void)z;
}

TEST_CASE("a reduction without keepdim broadcast so that two named dims line up warns once per pair; at dims where it fails the error says keepdim") {
  LibraryWarnings warnings;
  std::vector<std::string>& got = warnings.list;
  // RMSNorm without keepdim: [T] against [T, D] lines T up with D (it runs while T == D, and at T = 1).
  const char* rms = "dim T = 8\ndim D = 8\ninput x : f32[T, D]\nms = mean(x * x, -1)\n"
                    "y = x * rsqrt(ms + 1e-6)\nz = y + ms\noutput y, z\n";
  const fj::Graph g = fj::Graph::parse(rms, "rms.txt");
  REQUIRE(got.size() == 1);  // y and z line up the same pair: one warning
  CHECK(got[0] == "rms.txt:5:7: 'y' lines up dim D with dim T (shapes [T=8, D=8] and [T=8], aligned from the right), "
                  "so the graph holds only while D == T or one of them is 1; an operand comes from a reduction "
                  "without `keepdim` (on line 4), whose reduced axes are gone: reduce with `keepdim` (NumPy's "
                  "keepdims=True) to broadcast it back over them");
  // At other dims the broadcast fails; the error has the same hint (rebind_dims, as the builder's).
  const std::string at4 = user_error([&] { (void)g.with_dims({{"T", 4}}); });
  CAPTURE(at4);
  CHECK(contains(at4,
                 "shapes [T=4, D=8] and [T=4] do not broadcast (dimension 1: 8 vs 4); an operand "
                 "comes from a reduction without `keepdim` (on line 4)"));
  got.clear();
  // None: keepdim, one dim name throughout, literal sizes, a size-1 literal against a named dim.
  (void)fj::Graph::parse("dim T = 8\ndim D = 8\ninput x : f32[T, D]\ny = x / sum(x, -1, keepdim)\noutput y\n");
  (void)fj::Graph::parse("dim N = 8\ninput x : f32[N, N]\ninput b : f32[N]\ny = x + b\noutput y\n");
  (void)fj::Graph::parse("dim B = 2\ninput x : f32[B, 4, 8]\ninput m : f32[B, 1, 8]\ninput c : f32[8]\n"
                         "y = x + m * c\noutput y\n");
  CHECK(got.empty());
  for (const auto& f : std::filesystem::directory_iterator(fusejit::testing::source_path("samples/graphs"))) {
    (void)fj::Graph::load(f.path().string());
    CAPTURE(f.path());
    CHECK(got.empty());  // no sample lines up two dims
  }
  // The reduction behind any operand, in any order, through a where, or 20 ops down: one warning each.
  (void)fj::Graph::parse("dim T = 8\ndim D = 8\ninput x : f32[T, D]\ninput b : f32[T]\ninput c : bool[T]\n"
                         "s = sum(x, -1)\nz = b + s\nw = where(c, b, z)\ny = x * w\noutput y\n");
  std::string chain = "dim T = 8\ndim D = 8\ninput x : f32[T, D]\nu0 = sum(x, -1)\n";
  for (int k = 1; k <= 20; ++k) chain += "u" + std::to_string(k) + " = u" + std::to_string(k - 1) + " + 1\n";
  (void)fj::Graph::parse(chain + "y = x * u20\noutput y\n");
  REQUIRE(got.size() == 2);
  CHECK(contains(got[0], "'y' lines up dim D with dim T"));
  CHECK(contains(got[1], "'y' lines up dim D with dim T"));
  got.clear();
  // Inputs whose dims line up (one may be 1 or the other's size): meant, so no warning.
  (void)fj::Graph::parse("dim S = 8\ndim T = 8\ninput a : f32[S, 4]\ninput b : f32[T, 4]\ny = a + b\noutput y\n");
  CHECK(got.empty());
  // From the builder, a decode step (T = 1 against D = 16), the reduction behind a cast and a where.
  fj::GraphBuilder b;
  fj::Value x = b.input("x", fj::DType::F32, {b.dim("T", 1), b.dim("D", 16)});
  fj::Value c = b.input("c", fj::DType::Bool, {16});
  b.output("y", b.op("where", c, x, b.cast(b.reduce("sum", x, -1), fj::DType::F64)));
  (void)b.build();
  REQUIRE(got.size() == 1);
  CHECK(got[0] == "'y' lines up dim D with dim T (shapes [16], [T=1, D=16] and [T=1], aligned from the right), so "
                  "the graph holds only while D == T or one of them is 1; the sum result has dropped its reduced "
                  "axes: reduce with `keepdim` (NumPy's keepdims=True) to broadcast it back over them");
}

TEST_CASE("set_location locates the nodes built after it, as graph text's, in the graph's one file") {
  // A tracer's lines (Python's fuse): the warning names the line that built the op, not the
  // caller's line of build() (a new user's find: the slip named the fused function's call).
  LibraryWarnings warnings;
  fj::GraphBuilder b("g");
  fj::Value x = b.input("x", fj::DType::F32, {8, 8});
  b.set_location("model.py", 12, 9);
  fj::Value m = b.reduce("mean", x, -1);
  b.set_location("model.py", 13, 0);  // no column: FILE:LINE
  fj::Value y = x - m;
  b.set_location("other.py", 20, 1);  // another file than the graph's: unlocated
  fj::Value z = x / b.reduce("sum", x, -1);
  b.set_location("model.py", 0, 0);  // line 0: unlocated
  fj::Value w = x * b.reduce("amax", x, -1);
  b.output("y", y);
  b.output("z", z);
  b.output("w", w);
  const fj::Graph g = b.build();
  REQUIRE(warnings.list.size() == 3);
  CHECK(warnings.list[0].rfind("model.py:13: 'y' broadcasts the mean", 0) == 0);
  CHECK(warnings.list[1].rfind("'z' broadcasts the sum", 0) == 0);
  CHECK(warnings.list[2].rfind("'w' broadcasts the amax", 0) == 0);
  CHECK(g.to_text() == fj::Graph::parse(g.to_text()).to_text());  // locations are no part of the graph text
  CHECK_THROWS_AS(b.set_location("model.py", 1, 1), fj::Error);  // built: every call throws
}

TEST_CASE("a location without a column says FILE:LINE, in a program's error at a launch too; a negative one is refused") {
  // A hostile tester's find: column 0 printed "m.py:12:0:", and a negative line was dropped silently.
  fj::GraphBuilder b("g");
  const fj::DimRef n = b.dim("N", 4);
  const fj::Value x = b.input("x", fj::DType::F32, {3, n});
  CHECK_THROWS_WITH_AS(b.set_location("m.py", -5, 3), doctest::Contains("count from 1"), fj::Error);
  CHECK_THROWS_AS(b.set_location("m.py", 5, -1), fj::Error);
  // A NUL, as in every path fusejit takes (a hostile tester's find: taken, and shown as \x00 later).
  CHECK_THROWS_WITH_AS(b.set_location(std::string("a\0b", 3), 5, 1),
                       "set_location: the file name 'a\\x00b' holds a NUL byte", fj::Error);
  b.set_location("m.py", 12, 0);
  b.output("o", b.reduce("amax", x, 1));
  fj::Options cpu;
  cpu.backend = fj::Backend::Cpu;
  const fj::Program p = fj::Program::compile(b.build(), cpu);
  const int64_t empty_rows[2] = {3, 0};
  try {
    (void)p.run({fj::TensorView(fj::DType::F32, empty_rows, {})});
    FAIL("an amax of zero elements ran");
  } catch (const fj::Error& e) {
    CHECK(e.line() == 12);
    CHECK(e.column() == 0);
    CHECK(e.diagnostic().rfind("m.py:12: error: 'o': amax of zero elements", 0) == 0);
  }
  CHECK(fj::format_diagnostic("m", "f.py", 2, 0, "a\nbc\n") == "f.py:2: error: m\n  bc");
}

TEST_CASE("the same slip where no two named dims meet (a square shape, one dim for both axes) warns by axes") {
  // NumPy's x / x.sum(-1) of a square x runs, dividing each row by another row's sum: fuse traces
  // both axes of one size as one dim and graph text may give literal sizes, so no two dims differ.
  LibraryWarnings warnings;
  std::vector<std::string>& got = warnings.list;
  (void)fj::Graph::parse("input x : f32[8, 8]\nms = mean(x * x, -1)\ny = x * rsqrt(ms + 1e-6)\noutput y\n", "sq.txt");
  REQUIRE(got.size() == 1);
  CHECK(got[0] == "sq.txt:3:7: 'y' broadcasts the mean of a [8, 8] value back against that shape with the axis it keeps "
                  "(0) lined up with axis 1 (shapes align from the right): each element meets another slice's result, "
                  "and it runs only because the sizes agree; an operand comes from a reduction without `keepdim` (on "
                  "line 2), whose reduced axes are gone: reduce with `keepdim` (NumPy's keepdims=True) to broadcast it "
                  "back over them");
  got.clear();
  (void)fj::Graph::parse("dim N = 8\ninput x : f32[N, N]\ny = x / sum(x, -1)\noutput y\n");
  (void)fj::Graph::parse("input x : f32[3, 3, 3]\ny = x - amax(x, 1)\noutput y\n");  // kept 0 and 2 meet 1 and 2
  // Beside a reduction that lines up right, in either order (the first operand's alone was kept).
  (void)fj::Graph::parse("input x : f32[4, 4]\ny = x / (sum(x, 0) + amax(x, -1))\noutput y\n");
  // Through a value that gained leading 1s by a broadcast (they move no axis).
  (void)fj::Graph::parse("input x : f32[4, 4]\ninput b : f32[1, 4]\nq = amax(x, -1) + b\ny = x - q\noutput y\n");
  REQUIRE(got.size() == 4);
  CHECK(contains(got[3], "'y' broadcasts the amax of a [4, 4] value"));
  CHECK(contains(got[2], "'y' broadcasts the amax of a [4, 4] value"));
  CHECK(contains(got[0], "'y' broadcasts the sum of a [N=8, N=8] value"));
  CHECK(contains(got[1], "'y' broadcasts the amax of a [3, 3, 3] value back against that shape with the axis it keeps (0) lined up with axis 1"));
  got.clear();
  // None: the reduction over the leading axis (x - mean(x, 0): its kept axes line up with themselves),
  // keepdim, a kept axis of size 1, an operand of another shape, or no reduction at all.
  (void)fj::Graph::parse("input x : f32[8, 8]\ny = x - mean(x, 0)\noutput y\n");
  (void)fj::Graph::parse("input x : f32[8, 8]\ny = x / sum(x, -1, keepdim)\noutput y\n");
  (void)fj::Graph::parse("input x : f32[1, 8]\ny = x / sum(x, -1)\noutput y\n");
  (void)fj::Graph::parse("input x : f32[8, 8]\ninput b : f32[4, 8, 8]\ny = b * sum(x, -1)\noutput y\n");
  (void)fj::Graph::parse("input x : f32[8, 8]\ninput b : f32[8]\ny = x + b\noutput y\n");
  // A broadcast that adds an axis of its own (b's 3) is no longer the reduction's value.
  (void)fj::Graph::parse("input x : f32[3, 3]\ninput b : f32[3, 1]\ny = x - (amax(x, -1) + b)\noutput y\n");
  CHECK(got.empty());
}

TEST_CASE("a refused op, reduce or cast adds no node (a literal's constant, a cast made before failing)") {
  fj::GraphBuilder b("g");
  fj::Value x = b.input("x", fj::DType::F32, {3});
  fj::Value i = b.cast(x, fj::DType::I8);
  CHECK(contains(user_error([&] { b.reduce("sum", 3, {0}); }), "axis 0 is out of range"));
  CHECK(contains(user_error([&] { b.op("clamp", {i, 5, 1000}); }), "does not fit in i8"));
  CHECK(contains(user_error([&] { b.op("exp", {i, 2}); }), "exp takes 1 argument"));
  b.output("y", b.op("abs", {i}));
  CHECK(b.build().to_text() == "graph g\ninput x : f32[3]\n%1 = cast(x, i8)\ny = abs(%1)\noutput y\n");
}

TEST_CASE("a correction past the parser's bound (2^62) is refused by the builder too") {
  fj::GraphBuilder b("g");
  fj::Value x = b.input("x", fj::DType::F32, {4});
  for (const char* op : {"mean", "var", "std"}) {
    CAPTURE(op);
    CHECK(contains(user_error([&] { b.reduce(op, x, {0}, false, (int64_t{1} << 62) + 1); }), "at most 2^62"));
  }
  b.output("v", b.reduce("var", x, {0}, false, int64_t{1} << 62));
  const fj::Graph g = b.build();
  CHECK(fj::Graph::parse(g.to_text()).to_text() == g.to_text());
}

TEST_CASE("an output names an unnamed value; a named value keeps its name") {
  fj::GraphBuilder b("g");
  fj::Value x = b.input("x", fj::DType::F32, {4});
  fj::Value t = x * 3;
  b.output("z", t);
  b.output("w", t);  // already named z: w is a new binding
  fj::Value u = x + 1;
  b.name(u, "u");
  b.output("v", u);
  CHECK(b.build().to_text() == "graph g\ninput x : f32[4]\nz = x * 3.0\nu = x + 1.0\nw = z\nv = u\noutput z, w, v\n");
}

TEST_CASE("any C++ integer type is an extent or a literal; -x and b.op with operands as arguments") {
  fj::GraphBuilder b("g");
  const size_t hidden = 8;
  const unsigned rows = 2;
  fj::Value x = b.input("x", fj::DType::F32, {rows, hidden});  // size_t and unsigned extents
  fj::Value i = b.input("i", fj::DType::I64, {int64_t{2}, 8L});
  fj::Value c = b.input("c", fj::DType::Bool, {hidden});
  // One op a statement: the operands of + are evaluated in an unspecified order.
  fj::Value n = -x;
  fj::Value m = n * hidden;  // a size_t literal
  fj::Value e = b.op("exp", m);
  fj::Value w = b.op("where", c, e, 0.0);
  fj::Value z = b.op("maximum", w, 1u);
  fj::Value k = i * uint64_t{3};
  b.output("z", z);
  b.output("k", k);
  CHECK(b.build().to_text() == "graph g\ninput x : f32[2, 8]\ninput i : i64[2, 8]\ninput c : bool[8]\n"
                               "%3 = neg(x)\n%5 = %3 * 8.0\n%6 = exp(%5)\n%8 = where(c, %6, 0.0)\nz = maximum(%8, 1.0)\n"
                               "k = i * 3\noutput z, k\n");
  // No literal holds an unsigned value over INT64_MAX; a size over it is refused as negative.
  fj::GraphBuilder eb("e");
  fj::Value v = eb.input("v", fj::DType::I64, {4});
  CHECK_THROWS_WITH_AS((void)(v * UINT64_MAX), "integer literal 18446744073709551615 is over INT64_MAX", fj::Error);
  CHECK_THROWS_AS(eb.input("w", fj::DType::F32, {SIZE_MAX}), fj::Error);
  CHECK_THROWS_WITH_AS(-fj::Value(2.0), "neg of a literal: the operand must be a graph value", fj::Error);
  CHECK_NOTHROW((void)(v * static_cast<short>(-3)));
}

TEST_CASE("GraphBuilder::info: a value's dtype and shape while building") {
  fj::GraphBuilder b("g");
  fj::DimRef n = b.dim("N", 5);
  fj::Value x = b.input("x", fj::DType::F16, {n, 3});
  fj::TensorInfo t = b.info(x);
  CHECK((t.name == "x" && t.dtype == fj::DType::F16));
  CHECK(t.shape == std::vector<int64_t>{5, 3});
  CHECK(t.dim_names == std::vector<std::string>{"N", ""});
  fj::Value m = b.reduce("amax", x * 2, {-1}, true);
  t = b.info(m);
  CHECK((t.name.empty() && t.dtype == fj::DType::F16 && t.shape == std::vector<int64_t>{5, 1}));
  CHECK(b.info(b.cast(b.op("lt", {x, 1}), fj::DType::I32)).dtype == fj::DType::I32);
  CHECK(contains(user_error([&] { b.info(2.5); }), "a literal has no dtype or shape"));
  fj::GraphBuilder other;
  CHECK(contains(user_error([&] { other.info(x); }), "another GraphBuilder"));
  b.output("y", m);
  b.build();
  CHECK(contains(user_error([&] { b.info(x); }), "already built"));
}

TEST_CASE("an empty Value is a place for one assigned later; using it is a user error") {
  fj::GraphBuilder b("g");
  fj::Value x = b.input("x", fj::DType::F32, {4, 3});
  fj::Value empty;
  CHECK((empty.empty() && !empty.is_literal() && !fj::Value(2.0).empty() && !x.empty()));
  for (const std::string& m : {user_error([&] { (void)(empty + x); }), user_error([&] { (void)(2.0 * empty); }),
                               user_error([&] { (void)(-empty); }), user_error([&] { b.op("exp", empty); }),
                               user_error([&] { b.reduce("sum", empty); }), user_error([&] { b.cast(empty, fj::DType::F16); }),
                               user_error([&] { b.info(empty); }), user_error([&] { b.name(empty, "e"); }),
                               user_error([&] { b.output("e", empty); })})
    CHECK_MESSAGE(contains(m, "an empty Value"), m);
  CHECK(contains(user_error([&] { b.op("clamp", x, empty, 1.0); }), "clamp: operand 1: an empty Value"));
  std::vector<fj::Value> terms(3);
  fj::Value acc;
  for (int k = 0; k < 3; ++k) {
    terms[static_cast<size_t>(k)] = x * (k + 1);
    acc = acc.empty() ? terms[static_cast<size_t>(k)] : acc + terms[static_cast<size_t>(k)];
  }
  b.output("acc", acc);  // the builder is still usable after the refused calls
  CHECK(b.build().to_text().find("output acc") != std::string::npos);
}

TEST_CASE("reduce() takes one axis as a number, several as a list, none for all") {
  fj::GraphBuilder b("g");
  fj::Value x = b.input("x", fj::DType::F32, {4, 3, 2});
  const std::vector<int64_t> outer{0, 1};
  CHECK(b.info(b.reduce("sum", x, -1)).shape == std::vector<int64_t>{4, 3});
  CHECK(b.info(b.reduce("sum", x, {-1})).shape == std::vector<int64_t>{4, 3});
  CHECK(b.info(b.reduce("sum", x, 0, true)).shape == std::vector<int64_t>{1, 3, 2});
  CHECK(b.info(b.reduce("sum", x, {0, 2})).shape == std::vector<int64_t>{3});
  CHECK(b.info(b.reduce("sum", x, outer)).shape == std::vector<int64_t>{2});
  CHECK(b.info(b.reduce("sum", x, {})).shape.empty());
  CHECK(b.info(b.reduce("sum", x)).shape.empty());
  CHECK(b.info(b.reduce("var", x, 1, false, 0)).shape == std::vector<int64_t>{4, 2});
  CHECK(contains(user_error([&] { b.reduce("sum", x, SIZE_MAX); }), "axis 18446744073709551615 is over INT64_MAX"));
  CHECK(b.info(b.reduce("sum", x, size_t{2})).shape == std::vector<int64_t>{4, 3});
  static_assert(!std::is_convertible_v<bool, fj::Axes>, "reduce(name, x, true) must not compile: keepdim needs axes first");
}

TEST_CASE("values of another builder, and a refused call, leave the builder usable") {
  fj::GraphBuilder a, b;
  fj::Value xa = a.input("x", fj::DType::F32, {4});
  fj::Value xb = b.input("x", fj::DType::F32, {4});
  CHECK(contains(user_error([&] { (void)(xa + xb); }), "different GraphBuilders"));
  CHECK(contains(user_error([&] { b.op("exp", {xa}); }), "another GraphBuilder"));
  CHECK(contains(user_error([&] { b.output("y", xa * 2); }), "another GraphBuilder"));
  // A refused declaration binds nothing: the name is still free afterwards.
  CHECK(contains(user_error([&] { b.dim("N", -1); }), ">= 0"));
  fj::DimRef n = b.dim("N", 3);
  CHECK(contains(user_error([&] { b.input("bad", fj::DType::F32, {fj::DimRef{7}}); }), "another builder"));
  // A default DimRef was a literal 1, DimRef{-5} an internal error, another builder's dim 0 this one's.
  CHECK(contains(user_error([&] { b.input("bad", fj::DType::F32, {4, fj::DimRef{}}); }),
                 "input 'bad': extent 1 of its shape is a DimRef this builder's dim() did not return"));
  CHECK(contains(user_error([&] { b.input("bad", fj::DType::F32, {fj::DimRef{-5}}); }), "a default DimRef"));
  fj::GraphBuilder other;
  const fj::DimRef theirs = other.dim("M", 2);
  CHECK(contains(user_error([&] { b.input("bad", fj::DType::F32, {theirs}); }), "or one of another builder"));
  fj::Value w = b.input("bad", fj::DType::F32, {n});
  b.output("y", b.op("exp", {xb}) + 1);
  b.output("z", w * 2);
  CHECK(b.build().outputs().size() == 2);
}

TEST_CASE("builder names are checked by the parser's rules, with the parser's messages") {
  // A name with a space, a reserved word, a leading digit, non-ASCII: refused where the parser
  // refuses them (graph text cannot even spell most of them).
  for (std::string bad : {"my x", "", "1x", "x-y", "caf\xc3\xa9", "%3", "cast", "inf", "graph", "true"}) {
    CAPTURE(bad);
    fj::GraphBuilder b;
    std::string msg = user_error([&] { b.input(bad, fj::DType::F32, {4}); });
    CHECK(contains(msg, "name"));
    CHECK(!user_error([&] { b.dim(bad, 4); }).empty());
    CHECK(!user_error([&] { b.param(bad, fj::DType::F32); }).empty());
    fj::Value x = b.input("x", fj::DType::F32, {4});
    CHECK(!user_error([&] { b.name(x * 2, bad); }).empty());
    CHECK(!user_error([&] { b.output(bad, x * 2); }).empty());
  }
  // Reserved words: the same message as the parser's.
  {
    fj::GraphBuilder b;
    std::string msg = user_error([&] { b.input("cast", fj::DType::F32, {4}); });
    CHECK(msg == parse_error("input cast : f32[4]\noutput cast\n"));
  }
  // One namespace: a dim named like an input, an output named like an input, a name used twice.
  {
    fj::GraphBuilder b;
    fj::Value x = b.input("x", fj::DType::F32, {4});
    std::string msg = user_error([&] { b.dim("x", 4); });
    CHECK(msg == "'x' is already defined as an input (names are assigned once)");
    CHECK(contains(parse_error("input x : f32[4]\ndim x = 4\n"), "'x' is already defined as an input on line 1"));
    CHECK(user_error([&] { b.output("x", x * 2); }) == msg);
    fj::Value y = x * 2;
    b.name(y, "y");
    CHECK(contains(user_error([&] { b.name(x + 1, "y"); }), "'y' is already defined as a value"));
    // name(v, existing): refused, not silently dropped; a value has one name, inputs keep theirs.
    CHECK(contains(user_error([&] { b.name(y, "y2"); }), "a value is named once"));
    CHECK(contains(user_error([&] { b.name(x, "x2"); }), "inputs and params keep their declared names"));
    CHECK(contains(user_error([&] { b.name(2.0, "two"); }), "literal"));
    b.output("y", y);
    CHECK(contains(user_error([&] { b.output("y", y); }), "listed twice"));
    CHECK(contains(user_error([&] { b.output("x_out", x); }), "an output must be computed by the graph"));
    CHECK(contains(parse_error("input x : f32[4]\noutput x\n"), "an output must be computed by the graph"));
    fj::Graph g = b.build();
    // The refused output's `x * 2` and `x + 1` were computed before the calls refused them.
    CHECK(g.to_text() == "input x : f32[4]\n%2 = x * 2.0\ny = x * 2.0\n%6 = x + 1.0\noutput y\n");
  }
  // The graph's own name: an identifier (a reserved word parses there: `graph cast`).
  CHECK(contains(user_error([] { fj::GraphBuilder b("my graph"); }), "graph name 'my graph' is not a valid name"));
  CHECK_NOTHROW(fj::GraphBuilder("cast"));
}

TEST_CASE("the builder's unknown-op error gets the parser's did-you-mean") {
  fj::GraphBuilder b;
  fj::Value x = b.input("x", fj::DType::F32, {4});
  std::string msg = user_error([&] { b.op("tahn", {x}); });
  CHECK(msg == "unknown op 'tahn'; did you mean 'tanh' or 'tan'?");
  CHECK(contains(parse_error("input x : f32[4]\ny = tahn(x)\noutput y\n"), msg));
  CHECK(contains(user_error([&] { b.op("cast", {x}); }), "builder's cast(x, dtype)"));
}

TEST_CASE("reductions and composites through GraphBuilder::reduce give the parser's graph and errors") {
  const char* text =
      "dim N = 4\ninput x : f32[N, 6]\ninput w : f32[6]\n"
      "ms = mean(x * x, -1, keepdim)\ny = x * rsqrt(ms + 1e-6) * w\n"
      "s = sum(x, [0, 1])\np = softmax(x, 0)\nl = logsumexp(x, -1, keepdim)\n"
      "v = var(x, -1)\nd = std(x, [0, 1], keepdim, correction=0)\nc = mean(x, 0, correction=2)\n"
      "output y, s, p, l, v, d, c\n";
  fj::GraphBuilder b;
  fj::DimRef N = b.dim("N", 4);
  fj::Value x = b.input("x", fj::DType::F32, {N, 6});
  fj::Value w = b.input("w", fj::DType::F32, {6});
  fj::Value ms = b.reduce("mean", x * x, {-1}, true);
  b.name(ms, "ms");
  fj::Value y = x * b.op("rsqrt", {ms + 1e-6}) * w;
  const std::pair<const char*, fj::Value> outs[] = {
      {"y", y},
      {"s", b.reduce("sum", x, {0, 1})},
      {"p", b.reduce("softmax", x, {0})},
      {"l", b.reduce("logsumexp", x, {-1}, true)},
      {"v", b.reduce("var", x, {-1})},
      {"d", b.reduce("std", x, {0, 1}, true, 0)},
      {"c", b.reduce("mean", x, {0}, false, 2)},
  };
  for (const auto& [name, v] : outs) {
    b.name(v, name);
    b.output(name, v);
  }
  fj::Graph built = b.build();
  CHECK(built.to_text() == fj::Graph::parse(text).to_text());
  bool saw_correction = false;
  for (const fj::NodeInfo& n : built.nodes()) saw_correction = saw_correction || (n.op == "mean" && n.correction == 2);
  CHECK(saw_correction);

  fj::GraphBuilder e;
  fj::Value f = e.input("f", fj::DType::F32, {3, 0});
  fj::Value i = e.input("i", fj::DType::I32, {3});
  CHECK(e.info(e.reduce("softmax", f, {-1})).shape == std::vector<int64_t>{3, 0});  // empty, as torch.softmax
  CHECK(e.info(e.reduce("logsumexp", f, {-1})).shape == std::vector<int64_t>{3});    // -inf, as torch.logsumexp
  CHECK(contains(user_error([&] { e.reduce("amax", f, {-1}); }), "amax of zero elements"));
  CHECK(e.info(e.reduce("amax", f, {-1}, false, {}, -INFINITY)).shape == std::vector<int64_t>{3});
  CHECK(contains(user_error([&] { e.reduce("amin", f, {-1}, false, {}, -INFINITY); }), "only amin's identity initial=inf"));
  CHECK(contains(user_error([&] { e.reduce("logsumexp", f, {-1}, false, {}, -INFINITY); }), "logsumexp takes no initial="));
  CHECK(contains(user_error([&] { e.reduce("softmax", f, {0, 1}); }), "softmax takes a value and one axis"));
  CHECK(contains(user_error([&] { e.reduce("softmax", f, {-1}, true); }),
                 "softmax takes a value and one axis, e.g. softmax(x, -1); no keepdim: its result has the shape of its input"));
  CHECK(contains(user_error([&] { e.reduce("var", i); }), "var needs a float dtype"));
  CHECK(contains(user_error([&] { e.reduce("sum", f, {}, false, 1); }), "sum takes no correction"));
  CHECK(contains(user_error([&] { e.reduce("mean", f, {}, false, -1); }), "correction=-1 is negative"));
  CHECK(contains(user_error([&] { e.reduce("sum", f, {2}); }), "axis 2 is out of range"));
  CHECK(user_error([&] { e.reduce("summ", f); }) == "unknown op 'summ'; did you mean 'sum'?");
  CHECK(contains(user_error([&] { e.reduce("add", f); }), "op 'add' is no reduction: build it with the builder's op"));
  CHECK(contains(user_error([&] { e.op("softmax", {f}); }), "build it with the builder's reduce(\"softmax\""));
  CHECK(contains(user_error([&] { e.op("sum", {f}); }), "'sum' is a reduction: build it with the builder's reduce"));
  CHECK(e.reduce("amax", i, {}, true).is_literal() == false);  // refused calls left the builder usable
}

TEST_CASE("an output of a literal is a named constant, as `c = 2` then `output c` in text") {
  fj::GraphBuilder b;
  fj::Value x = b.input("x", fj::DType::F32, {4});
  fj::Value y = x * 2;
  b.name(y, "y");
  b.output("y", y);
  b.output("c", 2.0);
  fj::Graph g = b.build();
  fj::Graph back = fj::Graph::parse(g.to_text());
  CHECK(fusejit::ir::structurally_equal(g.impl().graph, back.impl().graph));
  CHECK(g.to_text() == fj::Graph::parse("input x : f32[4]\ny = x * 2\nc = 2.0\noutput y, c\n").to_text());
}

namespace {

// Replays a random ir::Graph through the public builder, trying a random name (often a bad or
// taken one) at every declaration, naming and output. Returns the built graph, or nothing when
// the builder refused the whole graph.
struct Replay {
  std::mt19937_64 rng;
  int accepted = 0, refused = 0, fresh = 0;

  explicit Replay(uint64_t seed) : rng(seed) {}

  std::string pick() {
    static const char* const pool[] = {"a b", "", "1x", "cast", "graph", "inf", "true", "output", "x-y",
                                       "%3",  "N",  "in0", "in1",  "p0",    "t0",  "t1",   "out0",  "y",
                                       "_ok", "Z9", "tanh", "f32"};
    return pool[rng() % (sizeof pool / sizeof pool[0])];
  }
  std::string fresh_name(const char* stem) { return stem + std::string("_") + std::to_string(fresh++); }

  // Calls f(name) with a random name; when refused (Error(User)), with a fresh valid one.
  template <class F>
  auto named(const char* stem, F&& f) {
    std::string name = pick();
    try {
      auto r = f(name);
      ++accepted;
      return r;
    } catch (const fj::Error& e) {
      REQUIRE(e.kind() == fj::ErrorKind::User);
      ++refused;
    }
    return f(fresh_name(stem));
  }

  static fj::Scalar literal(const fusejit::ir::Scalar& s) {
    if (fusejit::ir::is_float(s.dtype)) return fj::Scalar(s.f);
    if (s.dtype == fusejit::ir::DType::Bool) return fj::Scalar(s.i != 0);
    return fj::Scalar(s.i);
  }

  fj::Graph run(const fusejit::ir::Graph& rg) {
    namespace ir = fusejit::ir;
    std::string gname = rng() % 2 ? pick() : "";
    std::unique_ptr<fj::GraphBuilder> bp;
    try {
      bp = std::make_unique<fj::GraphBuilder>(gname);
    } catch (const fj::Error&) {
      ++refused;
      bp = std::make_unique<fj::GraphBuilder>("g");
    }
    fj::GraphBuilder& b = *bp;
    std::vector<fj::DimRef> dims;
    for (const ir::DimDecl& d : rg.dims) dims.push_back(named("d", [&](const std::string& n) { return b.dim(n, d.value); }));
    std::vector<fj::Value> val;
    for (ir::NodeId id = 0; id < rg.size(); ++id) {
      const ir::Node& n = rg.node(id);
      fj::DType dt = fj::from_ir(n.dtype);
      switch (n.op) {
        case ir::Op::Input: {
          std::vector<fj::Extent> shape;
          for (const ir::Dim& d : n.shape) shape.push_back(d.sym >= 0 ? fj::Extent(dims[static_cast<size_t>(d.sym)]) : fj::Extent(d.size));
          val.push_back(named("in", [&](const std::string& nm) { return b.input(nm, dt, shape); }));
          break;
        }
        case ir::Op::Param: {
          fj::Scalar def = literal(rg.params[static_cast<size_t>(n.slot)].default_value);
          val.push_back(named("p", [&](const std::string& nm) { return b.param(nm, dt, def); }));
          break;
        }
        case ir::Op::Const: {
          fj::Scalar c = literal(n.value);
          fj::Value lit = c.kind == fj::Scalar::Kind::Float ? fj::Value(c.f)
                          : c.kind == fj::Scalar::Kind::Bool ? fj::Value(c.i != 0)
                                                             : fj::Value(c.i);
          val.push_back(b.cast(lit, dt));
          break;
        }
        case ir::Op::Cast: val.push_back(b.cast(val[static_cast<size_t>(n.args[0])], dt)); break;
        case ir::Op::Sum: case ir::Op::Mean: case ir::Op::Prod: case ir::Op::Amax: case ir::Op::Amin:
        case ir::Op::Argmax: case ir::Op::Argmin: {
          std::vector<int64_t> axes;
          for (int a = 0; a < 64; ++a)
            if (n.red.axes >> a & 1) axes.push_back(a);
          if (ir::is_arg_reduction(n.op) && axes.size() > 1) axes.clear();  // one axis or none (every axis)
          val.push_back(b.reduce(ir::op_name(n.op), val[static_cast<size_t>(n.args[0])], axes, n.red.keepdim,
                                 n.op == ir::Op::Mean ? std::optional<int64_t>(n.red.correction) : std::nullopt));
          break;
        }
        default: {
          std::vector<fj::Value> args;
          for (int k = 0; k < n.nargs; ++k) args.push_back(val[static_cast<size_t>(n.args[static_cast<size_t>(k)])]);
          val.push_back(b.op(ir::op_name(n.op), args));
        }
      }
      if (!ir::is_leaf(n.op) && rng() % 3 == 0)
        named("v", [&](const std::string& nm) { b.name(val.back(), nm); return 0; });
    }
    for (const ir::OutputDecl& o : rg.outputs) {
      fj::Value v = val[static_cast<size_t>(o.node)];
      // Sometimes an input as an output too: always refused.
      if (!rg.inputs.empty() && rng() % 4 == 0) {
        CHECK_THROWS_AS(b.output(fresh_name("o"), val[static_cast<size_t>(rg.inputs[0])]), fj::Error);
      }
      if (ir::is_leaf(rg.node(o.node).op) && rg.node(o.node).op != ir::Op::Const) continue;
      named("o", [&](const std::string& nm) { b.output(nm, v); return 0; });
    }
    return b.build();
  }
};

}  // namespace

TEST_CASE("every graph the builder accepts prints as text that parses back to it (random graphs, random names)") {
  int graphs = 0, accepted = 0, refused = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    CAPTURE(seed);
    fusejit::testing::RandomGraphOptions ro;
    ro.seed = seed;
    ro.num_ops = 6 + static_cast<int>(seed % 20);
    fusejit::ir::Graph rg = fusejit::testing::random_graph(ro);
    Replay r(seed);
    fj::Graph g = r.run(rg);
    std::string text = g.to_text();
    CAPTURE(text);
    fj::Graph back = fj::Graph::parse(text, "roundtrip.txt");
    CHECK(fusejit::ir::structurally_equal(g.impl().graph, back.impl().graph));
    CHECK(back.to_text() == text);
    ++graphs;
    accepted += r.accepted;
    refused += r.refused;
  }
  CHECK(graphs == 300);
  // Both outcomes occur often, so the property is exercised on each side.
  CHECK(accepted > 300);
  CHECK(refused > 300);
}

TEST_CASE("new dims that make a computed value over 2^63 bytes are a located error (with_dims, rebind_dims)") {
  // A reduction of an empty axis and a broadcast: the inputs have no bytes or few, the results too
  // many. The parser checks them at the dims it reads; with_dims must too.
  const std::string text = "dim N = 4\ninput x : f32[N, 0]\ny = sum(x, 1)\ninput a : f32[N, 1]\ninput b : f32[1, N]\n"
                           "z = a + b\noutput y, z\n";
  const fj::Graph g = fj::Graph::parse(text, "big.txt");
  for (const int64_t n : {int64_t{9223372036854775807}, int64_t{1} << 31}) {
    CAPTURE(n);
    try {
      (void)g.with_dims({{"N", n}});
      FAIL("expected an error");
    } catch (const fj::Error& e) {
      CHECK(e.kind() == fj::ErrorKind::User);
      CHECK(e.line() == (n == (int64_t{1} << 31) ? 6 : 3));
      CHECK(std::string(e.what()).find("would have 2^63 bytes or more") != std::string::npos);
    }
  }
  CHECK(g.with_dims({{"N", 1000}}).dims()[0].second == 1000);
  // An input's bytes too (its element count fits: 2^61 f64 elements), as the builder and the
  // parser check them; TensorInfo::bytes() wrapped to 0 and plans read 2^63 - 1 bytes.
  const fj::Graph h = fj::Graph::parse("dim N = 4\ninput x : f64[N]\ny = sum(x)\noutput y\n", "h.txt");
  try {
    (void)h.with_dims({{"N", int64_t{1} << 61}});
    FAIL("expected an error");
  } catch (const fj::Error& e) {
    CHECK(e.line() == 2);
    CHECK(std::string(e.what()) == "input 'x' of shape [N=2305843009213693952] has 2^63 bytes or more");
  }
  CHECK_THROWS_WITH_AS(fj::Graph::parse("dim N = 4\ninput x : f64[N]\noutput x\n", "p.txt", {{"N", int64_t{1} << 61}}),
                       doctest::Contains("has 2^63 bytes or more"), fj::Error);
}

TEST_CASE("a shape whose non-zero sizes overflow is refused with a 0 among them too, in any order, naming every size") {
  const fj::Graph g = fj::Graph::parse("graph g\ndim N = 4\ndim M = 4\ndim K = 4\ninput a : f32[N, M, K]\ny = a + 1\noutput y\n");
  fj::Options cpu;
  cpu.backend = fj::Backend::Cpu;
  const fj::Program p = fj::Program::compile(g, cpu);
  const int64_t big = int64_t{1} << 40;
  const std::string with_zero = "whose non-zero sizes multiply past 2^63 - 1";
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{big, big, 0}, std::vector<int64_t>{0, big, big},
                                            std::vector<int64_t>{big, 0, big}}) {
    CAPTURE(shape[0]);
    CAPTURE(shape[2]);
    const fj::TensorRef a(nullptr, fj::DType::F32, shape), y(nullptr, fj::DType::F32, shape);
    CHECK_THROWS_WITH_AS(p.launch({a}, {y}), doctest::Contains(with_zero.c_str()), fj::Error);
    const fj::TensorRef ins[1] = {a};
    CHECK_THROWS_WITH_AS(p.output_shapes(ins), doctest::Contains(with_zero.c_str()), fj::Error);
    CHECK_THROWS_AS(fj::HostTensor(fj::DType::F32, shape), fj::Error);
  }
  // The message shows every size given (the last one too, before: K=4, its default).
  CHECK_THROWS_WITH_AS(g.with_dims({{"N", big}, {"M", big}, {"K", 0}}),
                       doctest::Contains(("has shape [N=1099511627776, M=1099511627776, K=0] " + with_zero).c_str()), fj::Error);
  CHECK_THROWS_WITH_AS(g.with_dims({{"N", big}, {"M", big}, {"K", 5}}),
                       doctest::Contains("has shape [N=1099511627776, M=1099511627776, K=5] whose element count overflows 64 bits"),
                       fj::Error);
  fj::GraphBuilder b("b");
  CHECK_THROWS_WITH_AS(b.input("x", fj::DType::F32, {0, big, big}), doctest::Contains(with_zero.c_str()), fj::Error);
  // Empty shapes whose other sizes fit run (nothing to compute).
  const std::vector<int64_t> empty = {big, 0, 8};
  const fj::TensorRef a(nullptr, fj::DType::F32, empty), y(nullptr, fj::DType::F32, empty);
  CHECK_NOTHROW(p.launch({a}, {y}));
}

TEST_CASE("pow with a literal exponent of 2, 0.5 or -1 and a float result is NumPy's and PyTorch's mul, sqrt, reciprocal") {
  const fj::Graph g = fj::Graph::parse(
      "graph p\ninput x : f32[4]\ninput h : bf16[4]\ninput k : i32[4]\nparam e : f32 = 2.0\n"
      "a = x ** 2\nb = pow(x, 0.5)\nc = x ** -1\nd = pow(h, 2.0)\nf = pow(k, 2.0)\n"
      "n1 = pow(x, 3.0)\nn2 = pow(k, 2)\nn3 = pow(x, e)\nn4 = pow(x, cast(2.0, f32))\nn5 = pow(x, -0.5)\n"
      "r = pow(x, 2.0000001)\nn6 = pow(cast(x, f64), 2.0000001)\n"  // compared in the operand's dtype
      "output a, b, c, d, f, n1, n2, n3, n4, n5, r, n6\n");
  const std::string text = g.to_text();
  CAPTURE(text);
  for (const char* built : {"a = x * x\n", "b = sqrt(x)\n", "c = reciprocal(x)\n", "d = h * h\n", "f = %", "r = x * x\n"})
    CHECK(text.find(built) != std::string::npos);
  CHECK(text.find("cast(k, f32)") != std::string::npos);  // an int base with a float literal: cast, then x*x
  for (const char* kept : {"n1 = pow(x, 3.0)", "n2 = pow(k, 2)", "n3 = pow(x, e)", "n4 = pow(x, %", "n5 = pow(x, -0.5)",
                           "n6 = pow(%"})
    CHECK(text.find(kept) != std::string::npos);
  // A typed constant exponent prints as a cast, so the text reads back as the same C pow.
  CHECK(text.find("= cast(2.0, f32)\n") != std::string::npos);
  CHECK(fj::Graph::parse(text).to_text() == text);
}
