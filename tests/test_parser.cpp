// Parser tests: statements, precedence, typing through the builder, locations, names, dim
// overrides, and that every sample graph parses.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "ir/diagnostic.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verify.h"
#include "tests/support/samples.h"

using namespace fusejit::ir;
namespace fs = std::filesystem;

namespace {
const Node& out_node(const Graph& g, size_t k = 0) { return g.node(g.outputs.at(k).node); }
std::string err_of(std::string_view text) {
  try {
    parse_graph(text, "t.txt");
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}
Loc loc_of(std::string_view text) {
  try {
    parse_graph(text, "t.txt");
  } catch (const UserError& e) {
    return e.loc();
  }
  return {};
}
}  // namespace

TEST_CASE("all statements") {
  Graph g = parse_graph(
      "graph demo   # the name\n"
      "\n"
      "dim N = 16\n"
      "input x : f32[N, 4]\n"
      "input s : f16[]\n"
      "param alpha : f32 = 0.5\n"
      "y = x * alpha + 1\n"
      "output y\n",
      "demo.txt");
  CHECK(g.name == "demo");
  CHECK(g.file == "demo.txt");
  REQUIRE(g.dims.size() == 1);
  CHECK(g.dims[0].name == "N");
  CHECK(g.dims[0].value == 16);
  REQUIRE(g.inputs.size() == 2);
  const Node& x = g.node(g.inputs[0]);
  CHECK(x.name == "x");
  CHECK(x.dtype == DType::F32);
  REQUIRE(x.shape.size() == 2);
  CHECK(x.shape[0] == Dim{16, 0});
  CHECK(x.shape[1] == Dim{4, -1});
  CHECK(g.node(g.inputs[1]).shape.empty());
  CHECK(g.node(g.inputs[1]).dtype == DType::F16);
  REQUIRE(g.params.size() == 1);
  CHECK(g.params[0].default_value.dtype == DType::F32);
  CHECK(g.params[0].default_value.f == 0.5);
  const Node& y = out_node(g);
  CHECK(y.op == Op::Add);
  CHECK(y.name == "y");
  CHECK(y.loc == Loc{7, 15});  // the '+'
  CHECK(g.node(y.arg(0)).op == Op::Mul);
  CHECK(g.node(y.arg(0)).loc == Loc{7, 7});
}

TEST_CASE("input ranges: parsed, printed back, part of structural equality") {
  const char* text =
      "dim N = 4\n"
      "input p : f32[N]\n"
      "input v : f32[N] range 0:1\n"
      "input m : f64[N] range -1e-3:1/255\n"
      "input img : u8[N] range 0:255\n"
      "input s : f16 range -2.5:2.5\n"
      "y = p + v + m + cast(img, f32) + s\n"
      "output y\n";
  Graph g = parse_graph(text, "r.txt");
  REQUIRE(g.input_ranges.size() == 5);
  CHECK(!g.input_ranges[0].set());
  CHECK(g.input_ranges[1] == ValueRange{0.0, 1.0});
  CHECK(g.input_ranges[2] == ValueRange{-1e-3, 1.0 / 255});
  CHECK(g.input_ranges[3] == ValueRange{0.0, 255.0});
  CHECK(g.input_ranges[4] == ValueRange{-2.5, 2.5});
  const std::string printed = print_graph(g);
  CHECK(printed.find("input v : f32[N] range 0.0:1.0\n") != std::string::npos);
  Graph again = parse_graph(printed, "again.txt");
  CHECK(structurally_equal(again, g));
  CHECK(print_graph(again) == printed);
  CHECK(!structurally_equal(parse_graph("input v : f32[4] range 0:2\nw = v * 2\noutput w\n", "a"),
                            parse_graph("input v : f32[4] range 0:1\nw = v * 2\noutput w\n", "b")));
}

TEST_CASE("precedence and associativity") {
  // a - b - c is (a - b) - c; a + b * c is a + (b * c); comparison lowest.
  Graph g = parse_graph("input a : f32[]\ninput b : f32[]\ninput c : f32[]\n"
                        "r = a - b - c\ns = a + b * c\nt = a + b < c * a\nu = -a * b\nv = (a + b) / c\n"
                        "output r, s, t, u, v\n",
                        "p.txt");
  const Node& r = out_node(g, 0);
  CHECK(r.op == Op::Sub);
  CHECK(g.node(r.arg(0)).op == Op::Sub);
  CHECK(r.arg(1) == g.inputs[2]);
  const Node& s = out_node(g, 1);
  CHECK(s.op == Op::Add);
  CHECK(g.node(s.arg(1)).op == Op::Mul);
  const Node& t = out_node(g, 2);
  CHECK(t.op == Op::Lt);
  CHECK(t.dtype == DType::Bool);
  CHECK(g.node(t.arg(0)).op == Op::Add);
  CHECK(g.node(t.arg(1)).op == Op::Mul);
  const Node& u = out_node(g, 3);
  CHECK(u.op == Op::Mul);
  CHECK(g.node(u.arg(0)).op == Op::Neg);
  const Node& v = out_node(g, 4);
  CHECK(v.op == Op::Div);
  CHECK(g.node(v.arg(0)).op == Op::Add);
}

TEST_CASE("bit operators: & | ^ ~ << >> with Python's precedence, printed back infix") {
  // | lowest, then ^, &, shifts, + -; comparisons below all of them: a < (b | a).
  Graph g = parse_graph("input a : i32[4]\ninput b : i32[4]\ny = a | b ^ a & b << 1 + 2\nz = ~a >> 1\n"
                        "c = a < b | a\nm = -~a\nk = a << 2 << 1\noutput y, z, c, m, k\n",
                        "b.txt");
  const Node& y = out_node(g, 0);
  CHECK(y.op == Op::BitwiseOr);
  const Node& x = g.node(y.arg(1));
  CHECK(x.op == Op::BitwiseXor);
  const Node& n = g.node(x.arg(1));
  CHECK(n.op == Op::BitwiseAnd);
  const Node& sh = g.node(n.arg(1));
  CHECK(sh.op == Op::LeftShift);
  CHECK(g.node(sh.arg(1)).op == Op::Const);  // 1 + 2 folded first: the shift count 3
  CHECK(g.node(sh.arg(1)).value.i == 3);
  CHECK(out_node(g, 1).op == Op::RightShift);
  CHECK(g.node(out_node(g, 1).arg(0)).op == Op::BitwiseNot);
  CHECK(out_node(g, 2).op == Op::Lt);
  CHECK(g.node(out_node(g, 2).arg(1)).op == Op::BitwiseOr);
  CHECK(out_node(g, 3).op == Op::Neg);
  CHECK(g.node(out_node(g, 3).arg(0)).op == Op::BitwiseNot);
  CHECK(g.node(out_node(g, 4).arg(0)).op == Op::LeftShift);  // (a << 2) << 1
  const std::string text = print_graph(g);
  CHECK(text.find(" = b << 3\n") != std::string::npos);
  CHECK(text.find("y = a | ") != std::string::npos);
  CHECK(text.find("bitwise_not(a)") != std::string::npos);  // unary: printed as a call
  CHECK(structurally_equal(g, parse_graph(text, "b2.txt")));
  // Bool: & | ^ ~ are logical; shifts and floats are refused by the ops' domains, located.
  CHECK_NOTHROW(parse_graph("input p : bool[2]\ny = ~p & p | p ^ p\noutput y\n", "b.txt"));
  CHECK(err_of("input f : f32[2]\ny = f & 1\noutput y\n").find("bitwise_and") != std::string::npos);
  CHECK(loc_of("input f : f32[2]\ny = f & 1\noutput y\n") == Loc{2, 7});
  CHECK(err_of("input p : bool[2]\ny = p << p\noutput y\n").find("left_shift") != std::string::npos);
  CHECK(loc_of("input a : i32[2]\ny = a & & a\noutput y\n") == Loc{2, 9});
  CHECK(loc_of("input a : i32[2]\ny = a < < a\noutput y\n") == Loc{2, 9});
}

TEST_CASE("Python's ** // %: the same nodes as pow, floordiv and mod, with Python's precedence") {
  // The operator spellings build exactly the nodes the calls build.
  auto same = [](const std::string& op_form, const std::string& call_form) {
    const std::string head = "input a : i32[4]\ninput b : i32[4]\ninput x : f32[4]\n";
    return structurally_equal(parse_graph(head + "y = " + op_form + "\noutput y\n", "o.txt"),
                              parse_graph(head + "y = " + call_form + "\noutput y\n", "c.txt"));
  };
  CHECK(same("x ** 2", "pow(x, 2)"));
  CHECK(same("a // b", "floordiv(a, b)"));
  CHECK(same("a % b", "mod(a, b)"));
  CHECK(same("x % 2.5", "mod(x, 2.5)"));
  CHECK(same("a%b", "mod(a, b)"));  // `%` before a letter is the operator
  CHECK(same("-x ** 2", "-pow(x, 2)"));  // ** binds tighter than a unary operator on its left
  CHECK(same("~a ** 2", "bitwise_not(pow(a, 2))"));
  CHECK(same("x ** -x", "pow(x, -x)"));  // and looser than one on its right
  CHECK(same("x ** 2 ** 3", "pow(x, pow(2, 3))"));  // right-associative
  CHECK(same("a * b ** 2 % 7 // 3", "floordiv(mod(a * pow(b, 2), 7), 3)"));  // * / // % left to right
  CHECK(same("a + b // 2", "a + floordiv(b, 2)"));
  CHECK(same("(a + b) ** 2", "pow(a + b, 2)"));
  // Literals fold as Python evaluates them: -2 ** 2 is -(2 ** 2), not a negative literal squared.
  auto value_of = [](const std::string& expr, const char* dt) {
    return out_node(parse_graph("c = cast(" + expr + ", " + dt + ")\noutput c\n", "f.txt")).value;
  };
  CHECK(value_of("-2 ** 2", "i64").i == -4);
  CHECK(value_of("(-2) ** 2", "i64").i == 4);
  CHECK(value_of("2 ** 3 ** 2", "i64").i == 512);
  CHECK(value_of("- - 2 ** 2", "i64").i == 4);
  CHECK(value_of("-7 // 2", "i64").i == -4);  // floor, as Python's //
  CHECK(value_of("-7 % 3", "i64").i == 2);    // the divisor's sign, as Python's %
  CHECK(value_of("7.5 % -2", "f64").f == -0.5);
  CHECK(value_of("-2.0 ** 0.5", "f64").f == -std::sqrt(2.0));
  CHECK(std::isnan(value_of("(-2.0) ** 0.5", "f64").f));  // pow's NaN where Python makes a complex
  CHECK(std::signbit(value_of("-0.0 ** 1", "f64").f));  // -(0.0 ** 1)
  CHECK(value_of("-9223372036854775808", "i64").i == std::numeric_limits<int64_t>::min());  // still one literal
  // `%` and digits is a temporary, so a remainder by a literal takes a space; both say so.
  CHECK(err_of("input a : i32[2]\ny = a %2\noutput y\n") ==
        "'%2' reads as a temporary; a remainder needs a space after '%' (x % 2)");
  CHECK(loc_of("input a : i32[2]\ny = a %2\noutput y\n") == Loc{2, 7});
  CHECK(err_of("input a : i32[2]\ny = a %2x\noutput y\n").find("is not a temporary") != std::string::npos);
  CHECK(loc_of("input a : i32[2]\ny = a ** \noutput y\n") == Loc{2, 10});
  CHECK(loc_of("input a : i32[2]\ny = a // // a\noutput y\n") == Loc{2, 10});
  // The printer writes them as calls (its infix forms are the ones without a second meaning).
  const std::string text = print_graph(parse_graph("input a : i32[4]\ny = a % 3 + a // 2 + a ** 3\noutput y\n", "p.txt"));
  CHECK(text.find("mod(a, 3)") != std::string::npos);
  CHECK(text.find("floordiv(a, 2)") != std::string::npos);
  CHECK(text.find("pow(a, 3)") != std::string::npos);
}

TEST_CASE("every comparison operator") {
  const std::pair<const char*, Op> cases[] = {{"<", Op::Lt}, {"<=", Op::Le}, {">", Op::Gt},
                                              {">=", Op::Ge}, {"==", Op::Eq}, {"!=", Op::Ne}};
  for (auto [sym, op] : cases) {
    Graph g = parse_graph(std::string("input a : i32[3]\ny = a ") + sym + " 2\noutput y\n", "c.txt");
    CHECK(out_node(g).op == op);
    CHECK(out_node(g).dtype == DType::Bool);
    CHECK(g.node(out_node(g).arg(1)).dtype == DType::I32);  // weak literal took a's dtype
  }
  CHECK(err_of("input a : f32[]\ny = a < a < a\noutput y\n").find("cannot be chained") != std::string::npos);
  // Parenthesised, a chain is fine: (a < b) is bool, then compared with a.
  CHECK_NOTHROW(parse_graph("input a : f32[]\ny = (a < a) < a\noutput y\n", "c.txt"));
}

TEST_CASE("calls, casts and weak literals") {
  Graph g = parse_graph("input x : f16[2, 3]\ninput i : i32[3]\n"
                        "a = where(x > 0, x, 0)\nb = clamp(i, -1, 7)\nc = cast(x, bf16)\n"
                        "d = exp(i)\ne = i / 2\nf = x + 2.5\ng = isnan(x)\nh = cast(3, i8)\n"
                        "output a, b, c, d, e, f, g, h\n",
                        "c.txt");
  CHECK(out_node(g, 0).op == Op::Where);
  CHECK(out_node(g, 0).dtype == DType::F16);
  CHECK(out_node(g, 1).op == Op::Clamp);
  CHECK(out_node(g, 1).dtype == DType::I32);
  CHECK(out_node(g, 2).op == Op::Cast);
  CHECK(out_node(g, 2).dtype == DType::BF16);
  CHECK(out_node(g, 3).dtype == DType::F32);   // exp(int) -> f32
  CHECK(out_node(g, 4).dtype == DType::F32);   // int / int -> f32 (true division)
  CHECK(out_node(g, 5).dtype == DType::F16);   // weak float literal takes f16
  CHECK(out_node(g, 6).dtype == DType::Bool);
  CHECK(out_node(g, 7).op == Op::Const);        // cast of a literal is a Const directly
  CHECK(out_node(g, 7).dtype == DType::I8);
  CHECK(out_node(g, 7).value.i == 3);
  CHECK(out_node(g, 7).name == "h");
  CHECK(out_node(g, 1).shape == Shape{{3, -1}});
  CHECK(out_node(g, 0).shape == Shape{{2, -1}, {3, -1}});
}

TEST_CASE("literal values") {
  auto value_of = [](const std::string& lit, const char* dt = "i64") {
    Graph g = parse_graph(std::string("c = cast(") + lit + ", " + dt + ")\noutput c\n", "l.txt");
    return out_node(g).value;
  };
  CHECK(value_of("-9223372036854775808").i == std::numeric_limits<int64_t>::min());
  CHECK(value_of("9223372036854775807").i == std::numeric_limits<int64_t>::max());
  CHECK(value_of("true", "bool").i == 1);
  CHECK(value_of("false", "bool").i == 0);
  CHECK(value_of("0.5", "f64").f == 0.5);
  CHECK(value_of("1e-3", "f64").f == 1e-3);
  CHECK(value_of(".25", "f64").f == 0.25);
  CHECK(value_of("2.", "f64").f == 2.0);
  CHECK(value_of("1E+2", "f64").f == 100.0);
  CHECK(value_of("inf", "f64").f == std::numeric_limits<double>::infinity());
  CHECK(value_of("-inf", "f64").f == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(value_of("nan", "f64").f));
  double nz = value_of("-0.0", "f64").f;
  CHECK(nz == 0.0);
  CHECK(std::signbit(nz));
  CHECK(value_of("4.9406564584124654e-324", "f64").f == std::numeric_limits<double>::denorm_min());
  // Underflow to zero (Python reads 0.0) is refused as a literal that rounds to 0 is (ops.md,
  // "Typing"); a subnormal and a zero with any exponent are taken.
  CHECK(err_of("c = 1e-400\noutput c\n").find("is too small for f64 (it would round to 0") != std::string::npos);
  CHECK(value_of("1e-310", "f64").f == 1e-310);
  CHECK(value_of("0e-999", "f64").f == 0.0);
  CHECK(err_of("c = 9223372036854775808\noutput c\n").find("does not fit in i64") != std::string::npos);
  CHECK(err_of("c = 99999999999999999999\noutput c\n").find("does not fit in i64") != std::string::npos);
  // Quoted as written: a unary minus is part of the literal, a binary one is not.
  CHECK(err_of("c = -99999999999999999999\noutput c\n") == "integer literal -99999999999999999999 does not fit in i64");
  CHECK(loc_of("c = -99999999999999999999\noutput c\n").col == 5);
  CHECK(err_of("input a : i64[2]\nc = a - 99999999999999999999\noutput c\n") ==
        "integer literal 99999999999999999999 does not fit in i64");
  CHECK(loc_of("input a : i64[2]\nc = a - 99999999999999999999\noutput c\n").col == 9);
  CHECK(err_of("input a : f32[2]\nc = sum(a, -99999999999999999999)\noutput c\n") ==
        "axis -99999999999999999999 is out of range for a tensor of rank 1 (expected -1 to 0)");
  CHECK(loc_of("input a : f32[2]\nc = sum(a, -99999999999999999999)\noutput c\n").col == 12);  // at the minus
  CHECK(err_of("input a : f32[2]\nc = amax(a, 0, initial=-99999999999999999999)\noutput c\n") ==
        "initial=-99999999999999999999 is not supported (amax takes initial=-inf, amin initial=inf)");
  CHECK(err_of("c = " + std::string(5000, '9') + "\noutput c\n") ==
        "integer literal " + std::string(12, '9') + "..." + std::string(24, '9') + " (5000 digits) does not fit in i64");
  CHECK(err_of("c = " + std::string(49, '0') + "9223372036854775808\noutput c\n") ==
        "integer literal 000000000000...000009223372036854775808 (68 digits) does not fit in i64");
  CHECK(err_of("c = 1e400\noutput c\n").find("too large for f64") != std::string::npos);
  // A float default truncates toward zero, so it fits when its truncation does: -0.5 is a u8's 0
  // and -128.5 an i8's -128, as 255.9 is a u8's 255; -1.0 and -129.0 do not fit.
  auto param_of = [](const std::string& def, const char* dt) {
    Graph g = parse_graph(std::string("param p : ") + dt + " = " + def + "\ninput x : i64[2]\ny = x + cast(p, i64)\noutput y\n",
                          "p.txt");
    return g.params[0].default_value.i;
  };
  CHECK(param_of("-0.5", "u8") == 0);
  CHECK(param_of("255.9", "u8") == 255);
  CHECK(param_of("-128.5", "i8") == -128);
  CHECK(param_of("-9223372036854775808.0", "i64") == std::numeric_limits<int64_t>::min());
  CHECK(err_of("param p : u8 = -1.0\noutput p\n").find("does not fit in u8") != std::string::npos);
  CHECK(err_of("param p : i8 = -129.0\noutput p\n").find("does not fit in i8") != std::string::npos);
  // A named literal stays weak and is materialized (with its name) when it is an output.
  Graph g = parse_graph("c = 2\ninput x : i8[4]\ny = x + c\noutput y, c\n", "w.txt");
  CHECK(out_node(g, 0).dtype == DType::I8);
  CHECK(out_node(g, 1).op == Op::Const);
  CHECK(out_node(g, 1).dtype == DType::I64);
  CHECK(out_node(g, 1).name == "c");
}

TEST_CASE("literal folding uses the semantics (eval_scalar)") {
  // All-literal expressions fold as Python would; checks real folded values.
  auto value_of = [](const std::string& expr, const char* dt) {
    Graph g = parse_graph("c = cast(" + expr + ", " + dt + ")\noutput c\n", "f.txt");
    return out_node(g).value;
  };
  CHECK(value_of("1 + 2 * 3", "i64").i == 7);
  CHECK(value_of("7 / 2", "f64").f == 3.5);
  CHECK(value_of("-(3)", "i64").i == -3);
  CHECK(value_of("0.1 + 0.2", "f64").f == 0.1 + 0.2);
  CHECK(value_of("floordiv(-7, 2)", "i64").i == -4);
  CHECK(value_of("2.5", "i32").i == 2);
  CHECK(value_of("1 < 2", "bool").i == 1);
}

TEST_CASE("names, aliases and locations") {
  Graph g = parse_graph("input x : f32[8]\na = x * 2\nb = a\nc = (b)\nd = b + c\noutput d, b\n", "n.txt");
  CHECK(g.outputs[1].name == "b");
  CHECK(g.node(g.outputs[1].node).name == "a");  // alias: the node keeps its first name
  CHECK(out_node(g).name == "d");
  CHECK(g.outputs[0].loc == Loc{6, 8});
  for (const Node& n : g.nodes) CHECK(n.loc.known());
  // Temporaries are unnamed.
  Graph h = parse_graph("input x : f32[8]\ny = exp(x) + 1\noutput y\n", "n.txt");
  int unnamed = 0;
  for (const Node& n : h.nodes) unnamed += n.name.empty();
  CHECK(unnamed == 2);  // exp(x) and the literal constant
}

TEST_CASE("dim overrides") {
  const char* text = "dim N = 8192\ndim K = 4\ninput x : f32[N, K]\ny = x + 1\noutput y\n";
  Graph g = parse_graph(text, "d.txt", {{"N", 16}, {"K", 2}, {"N", 32}});
  CHECK(g.dims[0].value == 32);
  CHECK(g.dims[1].value == 2);
  CHECK(num_elements(out_node(g).shape) == 64);
  try {
    parse_graph(text, "d.txt", {{"M", 3}});
    FAIL("expected an error");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()) == "unknown dim 'M' in a dim override; the graph declares dims N, K");
    CHECK(!e.loc().known());
  }
}

TEST_CASE("error locations") {
  CHECK(loc_of("input x : f32[]\ny = x + z\noutput y\n") == Loc{2, 9});
  CHECK(loc_of("input x : f32[]\ny = foo(x)\noutput y\n") == Loc{2, 5});
  CHECK(err_of("input x : f32[]\ny = tahn(x)\noutput y\n") == "unknown op 'tahn'; did you mean 'tanh' or 'tan'?");
  // NumPy's and PyTorch's dtype names: how fusejit writes them.
  CHECK(err_of("input x : bfloat16[2]\ny = x + 1\noutput y\n") == "unknown dtype 'bfloat16': fusejit writes it bf16");
  CHECK(err_of("input x : f32[2]\ny = cast(x, half)\noutput y\n") == "unknown dtype 'half': fusejit writes it f16");
  CHECK(err_of("input x : f33[2]\ny = x + 1\noutput y\n") == "unknown dtype 'f33'; did you mean 'f32'?");
  // Every guess at the fewest typos, same length first: a dropped letter is as likely as a swap.
  CHECK(err_of("input x : f32[]\ny = slu(x)\noutput y\n") == "unknown op 'slu'; did you mean 'elu' or 'silu'?");
  CHECK(err_of("input x : f32[]\ny = sinn(x)\noutput y\n") == "unknown op 'sinn'; did you mean 'sign', 'sinh' or 'sin'?");
  CHECK(err_of("input x : f32[]\ny = x + 1\n") == "graph has no output; add a line such as `output y`");
  CHECK(loc_of("input x : f32[]\ny = x + 1\n") == Loc{2, 10});
  CHECK(err_of("input x : f32[]\ny = z\nz = x * 2\noutput y\n") == "'z' is used before its definition on line 3");
  CHECK(err_of("input x : f32[3]\ninput w : f32[4]\ny = x + w\noutput y\n").find("do not broadcast") !=
        std::string::npos);
  CHECK(loc_of("input x : f32[3]\ninput w : f32[4]\ny = x + w\noutput y\n") == Loc{3, 7});
}

TEST_CASE("no trailing comma in a call or a list: one message for each") {
  // One spelling of each list, as the printer writes it; `sum(x, [0,])` was accepted while
  // `sum(x, 1,)` was refused.
  CHECK(err_of("input x : f32[2]\ny = add(x, x,)\noutput y\n") ==
        "expected an argument after ',' (remove the trailing ',')");
  CHECK(loc_of("input x : f32[2]\ny = add(x, x,)\noutput y\n") == Loc{2, 14});
  CHECK(err_of("input x : f32[2]\ny = cast(x, i32,)\noutput y\n") ==
        "expected an argument after ',' (remove the trailing ',')");
  CHECK(err_of("input x : f32[2, 3,]\ny = x + 1\noutput y\n") ==
        "expected a dimension after ',' (remove the trailing ',')");
  CHECK(loc_of("input x : f32[2, 3,]\ny = x + 1\noutput y\n") == Loc{1, 20});
  CHECK(err_of("input x : f32[2, 3]\ny = sum(x, [0, 1,])\noutput y\n") ==
        "expected an axis after ',' (remove the trailing ',')");
  CHECK(err_of("input x : f32[2]\ny = add(x,\noutput y\n") == "expected an expression, found end of line");
  CHECK(err_of("input x : f32[2]\ny = x + 1\noutput y,\n") == "expected an output name after ',' (remove the trailing ',')");
  CHECK(err_of("input x : f32[2]\ny = x + 1\noutput y,") == "expected an output name after ',' (remove the trailing ',')");
}

TEST_CASE("parse_graph_file") {
  CHECK_THROWS_AS(parse_graph_file("/nonexistent/graph.txt"), UserError);
  CHECK_THROWS_AS(parse_graph_file(FUSEJIT_SOURCE_DIR "/samples"), UserError);  // a directory
}

TEST_CASE("every sample graph parses, also with small dims") {
  int count = 0;
  for (const fs::path& path : fusejit::testing::sample_graphs()) {
    ++count;
    CAPTURE(path.string());
    Graph g = parse_graph_file(path.string());
    CHECK(!g.outputs.empty());
    CHECK(!g.name.empty());
    // Realistic default sizes: the largest input holds at least 16 MB (a decode-shape sample is
    // small on purpose: one token, where launch cost decides).
    int64_t biggest = 0;
    for (NodeId id : g.inputs)
      biggest = std::max(biggest, num_elements(g.node(id).shape) * dtype_size(g.node(id).dtype));
    if (path.stem().string().find("decode") == std::string::npos) CHECK(biggest >= (int64_t{16} << 20));
    DimOverrides small;
    for (const DimDecl& d : g.dims) small.push_back({d.name, d.name == "C" ? 3 : 5});
    Graph s = parse_graph_file(path.string(), small);
    for (NodeId id : s.inputs) CHECK(num_elements(s.node(id).shape) <= 5 * 5 * 5 * 5);
  }
  CHECK(count >= 10);
}

TEST_CASE("verifier catches broken IR and bad outputs") {
  const char* text = "input x : f32[4]\ninput i : i32[4]\ny = x * 2\nz = exp(i)\noutput y, z\n";
  Graph good = parse_graph(text, "v.txt");
  CHECK_NOTHROW(verify(good));
  auto broken = [&](auto mutate) {
    Graph g = good;
    mutate(g);
    return g;
  };
  // IR invariants are InternalError (a builder or pass bug).
  CHECK_THROWS_AS(verify(broken([](Graph& g) { g.nodes.back().dtype = DType::F16; })), InternalError);
  CHECK_THROWS_AS(verify(broken([](Graph& g) { g.nodes.back().args[0] = static_cast<NodeId>(g.nodes.size()); })),
                  InternalError);
  CHECK_THROWS_AS(verify(broken([](Graph& g) { g.nodes.back().nargs = 2; })), InternalError);
  CHECK_THROWS_AS(verify(broken([](Graph& g) { g.nodes.back().shape = {{5, -1}}; })), InternalError);
  CHECK_THROWS_AS(verify(broken([](Graph& g) { g.nodes[0].slot = 1; })), InternalError);
  CHECK_THROWS_AS(verify(broken([](Graph& g) { g.inputs.pop_back(); })), InternalError);
  CHECK_THROWS_AS(verify(broken([](Graph& g) {
                    for (Node& n : g.nodes)
                      if (n.op == Op::Mul) n.dtype = DType::Bool;
                  })),
                  InternalError);
  // Output problems are the user's: UserError with the output's location.
  Graph none = broken([](Graph& g) { g.outputs.clear(); });
  CHECK_THROWS_AS(verify(none), UserError);
  try {
    verify(broken([](Graph& g) { g.outputs[1].node = g.inputs[0]; }));
    FAIL("expected an error");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()) == "output 'z' names input 'x'; an output must be computed by the graph");
    CHECK(e.loc() == Loc{5, 11});
  }
  try {
    verify(broken([](Graph& g) { g.outputs[1].name = g.outputs[0].name; }));
    FAIL("expected an error");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()) == "output 'y' is listed twice");
  }
}

// The promotion table lives in docs/ops.md (checked by tests/test_ops_doc.cpp).
TEST_CASE("docs/graph-format.md: the example parses") {
  std::ifstream in(FUSEJIT_SOURCE_DIR "/docs/graph-format.md");
  REQUIRE(in);
  std::string line, example;
  bool in_first_block = false, first_done = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0 && !first_done) {
      if (in_first_block) first_done = true;
      in_first_block = !in_first_block;
      continue;
    }
    if (in_first_block) example += line + "\n";
  }
  Graph g = parse_graph(example, "graph-format.md");
  CHECK(g.name == "gelu_tanh");
  CHECK(g.params.size() == 1);
}

TEST_CASE("CRLF line endings and comments everywhere") {
  Graph g = parse_graph("# header\r\ngraph crlf # name\r\ninput x : f32[4]\r\n\r\ny = x * 2 # twice\r\noutput y\r\n",
                        "crlf.txt");
  CHECK(g.name == "crlf");
  CHECK(out_node(g).loc == Loc{5, 7});
  try {
    parse_graph("input x : f32[4]\r\ny = x * q\r\noutput y\r\n", "crlf.txt");
    FAIL("expected an error");
  } catch (const UserError& e) {
    CHECK(format_diagnostic(e, "crlf.txt", "input x : f32[4]\r\ny = x * q\r\noutput y\r\n") ==
          "crlf.txt:2:9: error: undefined name 'q'\n  y = x * q\n          ^\n");
  }
}

TEST_CASE("a very long name is cut in the message line, as the excerpt is; what() keeps it whole") {
  const std::string name(1000, 'q'), text = "input x : f32[4]\ny = x + " + name + "\noutput y\n";
  try {
    parse_graph(text, "long.txt");
    FAIL("expected an error");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()).find(name) != std::string::npos);
    const std::string d = format_diagnostic(e, "long.txt", text);
    const std::string first = d.substr(0, d.find('\n'));
    CHECK(first == "long.txt:2:9: error: undefined name '" + std::string(35, 'q') + "..." + std::string(35, 'q') +
                       "' (1000 bytes)");
  }
  // Quoted text with spaces (prose, not a name) is never cut.
  const UserError prose("the note '" + std::string(200, 'a') + " b' stays", Loc{});
  CHECK(format_diagnostic(prose, "", "") == "error: " + std::string(prose.what()) + "\n");
}

TEST_CASE("a UTF-8 byte-order mark at the start is ignored") {
  Graph g = parse_graph("\xEF\xBB\xBFinput x : f32[4]\ny = x * 2\noutput y\n", "bom.txt");
  CHECK(g.outputs.size() == 1);
  CHECK_THROWS_AS(parse_graph("input x : f32[4]\n\xEF\xBB\xBFy = x\noutput y\n", "bom2.txt"), UserError);
}
