// docs/ops.md's tables are checked against the code, so the docs cannot drift from it: the
// signed-zero/NaN/inf table against eval_scalar (the definition every path shares) in every float
// dtype, and the promotion tables against ir::promote and the builder's three tiers.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ir/builder.h"
#include "ir/eval.h"

using namespace fusejit::ir;

namespace {

std::string read_doc(const std::string& rel) {
  std::ifstream f(std::string(FUSEJIT_SOURCE_DIR) + "/" + rel);
  REQUIRE_MESSAGE(f, "cannot read " << rel);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

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
    const std::string expr = r[0].substr(1, r[0].size() - 2);  // strip the backticks
    CAPTURE(expr);
    const size_t open = expr.find('(');
    REQUIRE(open != std::string::npos);
    const auto op = parse_op(expr.substr(0, open));
    REQUIRE(op.has_value());
    std::vector<double> args;
    std::stringstream list(expr.substr(open + 1, expr.size() - open - 2));
    for (std::string a; std::getline(list, a, ',');) args.push_back(std::strtod(trim(a).c_str(), nullptr));
    REQUIRE(static_cast<int>(args.size()) == op_arity(*op));
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
