// docs/ops.md's tables are checked against the code, so the docs cannot drift from it: the
// signed-zero/NaN/inf table against eval_scalar (the definition every path shares) in every float
// dtype, the integer bit operations table against eval_scalar in each row's dtype, and the
// promotion tables against ir::promote and the builder's three tiers.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/eval.h"
#include "ir/parser.h"
#include "tests/support/files.h"

using namespace fusejit::ir;

namespace {

std::string read_doc(const std::string& rel) { return fusejit::testing::read_file(fusejit::testing::source_path(rel)); }

std::string trim(std::string s) {
  const size_t a = s.find_first_not_of(" \t*"), b = s.find_last_not_of(" \t*");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// The cells of a markdown table row ("| a | b |" -> {"a", "b"}), trimmed (bold marks too).
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t k = 1; k < line.size(); ++k) {
    if (line[k] == '|') {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += line[k];
    }
  }
  return out;
}

// The table rows that follow `heading` in `doc`, header and separator skipped.
std::vector<std::vector<std::string>> table_after(const std::string& doc, const std::string& heading) {
  const size_t at = doc.find(heading);
  REQUIRE_MESSAGE(at != std::string::npos, "docs lack the section '" << heading << "'");
  std::istringstream in(doc.substr(at));
  std::string line;
  std::vector<std::vector<std::string>> rows;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("|", 0) != 0) {
      if (in_table) break;
      continue;
    }
    in_table = true;
    rows.push_back(cells(line));
  }
  REQUIRE(rows.size() > 2);
  rows.erase(rows.begin(), rows.begin() + 2);
  return rows;
}

// A table cell such as "`left_shift(1, 8)`": the op and its operand texts, trimmed.
struct Call {
  Op op;
  std::vector<std::string> args;
};
Call parse_call(const std::string& cell) {
  const std::string expr = cell.substr(1, cell.size() - 2);  // strip the backticks
  const size_t open = expr.find('(');
  REQUIRE_MESSAGE(open != std::string::npos, expr);
  const auto op = parse_op(expr.substr(0, open));
  REQUIRE_MESSAGE(op.has_value(), expr);
  Call c{*op, {}};
  std::stringstream list(expr.substr(open + 1, expr.size() - open - 2));
  for (std::string a; std::getline(list, a, ',');) c.args.push_back(trim(a));
  REQUIRE_MESSAGE(static_cast<int>(c.args.size()) == op_arity(*op), expr);
  return c;
}

Scalar in_dtype(double v, DType t) {
  Scalar s;
  s.dtype = DType::F64;
  s.f = v;
  Scalar a[1] = {s};
  return eval_scalar(Op::Cast, t, a);
}

}  // namespace

TEST_CASE("docs/ops.md: the signed-zero, NaN and inf table is what eval_scalar computes") {
  const auto rows = table_after(read_doc("docs/ops.md"), "## Signed zeros, NaN and infinity");
  CHECK(rows.size() > 40);
  for (const auto& r : rows) {
    REQUIRE(r.size() >= 2);
    CAPTURE(r[0]);
    const Call c = parse_call(r[0]);
    const auto op = &c.op;
    std::vector<double> args;
    for (const std::string& a : c.args) args.push_back(std::strtod(a.c_str(), nullptr));
    const double want = std::strtod(r[1].c_str(), nullptr);
    for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64}) {
      CAPTURE(dtype_name(t));
      std::vector<Scalar> xs;
      for (double a : args) xs.push_back(in_dtype(a, t));
      const Scalar got = eval_scalar(*op, t, xs);
      const Scalar w = in_dtype(want, t);
      CHECK((got.same_as(w) || (std::isnan(got.f) && std::isnan(w.f))));
    }
  }
}

// Rows such as `left_shift(1, 8)` | i8 | 0 |: the operands are values of the row's dtype (true and
// false for bool); eval_scalar's result must be the fusejit column.
TEST_CASE("docs/ops.md: the integer bit operations table is what eval_scalar computes") {
  const auto rows = table_after(read_doc("docs/ops.md"), "## Integer bit operations");
  CHECK(rows.size() >= 40);
  auto value = [](const std::string& text, DType t) {
    Scalar s;
    s.dtype = t;
    s.i = text == "true" ? 1 : text == "false" ? 0 : std::stoll(text);
    return s;
  };
  int shifts_past_width = 0;
  for (const auto& r : rows) {
    REQUIRE(r.size() >= 3);
    CAPTURE(r[0]);
    const Call c = parse_call(r[0]);
    const auto op = &c.op;
    const auto t = parse_dtype(r[1]);
    REQUIRE(t.has_value());
    REQUIRE((op_info(*op).domain == OpDomain::Int || op_info(*op).domain == OpDomain::IntBool));
    std::vector<Scalar> xs;
    for (const std::string& a : c.args) xs.push_back(value(a, *t));
    const bool shift = *op == Op::LeftShift || *op == Op::RightShift;
    if (shift && (xs[1].i < 0 || xs[1].i >= 8 * dtype_size(*t))) ++shifts_past_width;
    CHECK(eval_scalar(*op, *t, xs).i == value(r[2], *t).i);
  }
  CHECK(shifts_past_width >= 20);
}

TEST_CASE("docs/ops.md: the promotion table is ir::promote") {
  const auto rows = table_after(read_doc("docs/ops.md"), "Within one tier, dtypes promote by this table");
  REQUIRE(rows.size() == static_cast<size_t>(kNumDTypes));
  for (const auto& r : rows) {
    REQUIRE(r.size() == static_cast<size_t>(kNumDTypes) + 1);
    const auto a = parse_dtype(r[0]);
    REQUIRE(a.has_value());
    for (int k = 0; k < kNumDTypes; ++k) {
      std::string cell = r[static_cast<size_t>(k) + 1];
      if (!cell.empty() && cell.back() == '*') cell.pop_back();  // footnote: PyTorch gives i16
      CAPTURE(r[0]);
      CAPTURE(k);
      const auto want = parse_dtype(trim(cell));
      REQUIRE(want.has_value());
      CHECK(promote(*a, static_cast<DType>(k)) == *want);
    }
  }
}

// Each row's expression, e.g. `f16[4] * f32[]`, is built as a graph whose tensors are inputs of
// those types; the output's dtype must be the row's result.
TEST_CASE("docs/ops.md: the three-tier promotion examples are what the builder does") {
  const auto rows = table_after(read_doc("docs/ops.md"), "Across tiers (");
  CHECK(rows.size() >= 12);
  const std::regex tensor(R"(\b(bool|i8|u8|i32|i64|f16|bf16|f32|f64)\[([^\]]*)\])");
  for (const auto& r : rows) {
    std::string expr = r[0].substr(1, r[0].size() - 2), decls, body;
    CAPTURE(expr);
    int n = 0;
    for (std::sregex_iterator it(expr.begin(), expr.end(), tensor), end; it != end; ++it) {
      body += it->prefix().str() + "v" + std::to_string(n);
      decls += "input v" + std::to_string(n++) + " : " + (*it)[1].str() + "[" + (*it)[2].str() + "]\n";
      if (std::next(it) == end) body += it->suffix().str();
    }
    const Graph g = parse_graph(decls + "y = " + body + "\noutput y\n", "tiers.txt");
    const auto want = parse_dtype(r[1]);
    REQUIRE(want.has_value());
    CHECK(dtype_name(g.node(g.outputs[0].node).dtype) == dtype_name(*want));
  }
}
