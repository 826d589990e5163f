// The op table ir/ops.def against itself and against docs/ops.md: every row is well formed (names,
// scalar functions, infix forms, tolerance columns consistent with the accuracy class), and the
// documentation lists every op in the semantics table of its arity and in the GPU bounds table with
// exactly the table's class and ulp bounds (Math rows: CUDA + glibc = the tolerance). Reductions
// (rule Reduce) are rows too, but not elementwise: no scalar function, listed in docs/ops.md's
// "Reductions" section, and absent from the GPU bounds table because planning refuses them.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ir/op.h"
#include "ir/op_fns.h"
#include "ir/reduce.h"
#include "jit/compare.h"
#include "tests/support/files.h"

using namespace fusejit;
using ir::Op;

namespace {


std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

// The cells of a markdown table row "| a | b |" -> {"a", "b"}, trimmed.
std::vector<std::string> cells(const std::string& row) {
  std::vector<std::string> out;
  size_t p = row.find('|');
  while (p != std::string::npos) {
    size_t q = row.find('|', p + 1);
    if (q == std::string::npos) break;
    std::string c = row.substr(p + 1, q - p - 1);
    const size_t a = c.find_first_not_of(' '), b = c.find_last_not_of(' ');
    out.push_back(a == std::string::npos ? "" : c.substr(a, b - a + 1));
    p = q;
  }
  return out;
}

// Op names written in backticks in a cell: "`exp` `exp2`" -> {exp, exp2}; "`where(c, a, b)`" -> {where}.
std::vector<std::string> ops_in(const std::string& cell) {
  std::vector<std::string> out;
  for (size_t p = cell.find('`'); p != std::string::npos; p = cell.find('`', p + 1)) {
    const size_t q = cell.find('`', p + 1);
    if (q == std::string::npos) break;
    std::string w = cell.substr(p + 1, q - p - 1);
    w = w.substr(0, w.find('('));
    if (ir::parse_op(w)) out.push_back(w);
    p = q;
  }
  return out;
}

// The data rows of the tables of the section titled `heading` ("## Unary ops"): rows up to the
// next "## " heading; `first_table_only` stops at the end of the first table.
std::vector<std::vector<std::string>> section_rows(const std::vector<std::string>& doc, const std::string& heading,
                                                   bool first_table_only) {
  std::vector<std::vector<std::string>> rows;
  size_t k = 0;
  while (k < doc.size() && doc[k] != heading) ++k;
  REQUIRE_MESSAGE(k < doc.size(), "docs/ops.md has no section " << heading);
  bool in_table = false;
  for (++k; k < doc.size() && doc[k].rfind("## ", 0) != 0; ++k) {
    const bool row = !doc[k].empty() && doc[k][0] == '|';
    if (!row && in_table && first_table_only) break;
    if (row && in_table && doc[k].find("---") == std::string::npos) rows.push_back(cells(doc[k]));
    in_table = row;
  }
  return rows;
}

std::string accuracy_name(ir::OpAccuracy a) {
  switch (a) {
    case ir::OpAccuracy::Exact: return "exact";
    case ir::OpAccuracy::Step: return "step";
    case ir::OpAccuracy::Math: return "math";
    case ir::OpAccuracy::Composite: return "composite";
  }
  return "?";
}

}  // namespace

TEST_CASE("every row of ir/ops.def is well formed") {
  for (int k = 0; k < ir::kNumOps; ++k) {
    const Op op = static_cast<Op>(k);
    const ir::OpInfo& info = ir::op_info(op);
    CAPTURE(info.name);
    if (ir::is_leaf(op)) {
      CHECK(info.arity == 0);
      CHECK(info.scalar_fn == "fj_none");
      CHECK(!ir::parse_op(info.name));
      continue;
    }
    if (ir::is_reduction(op)) {
      // Folded over tensors by ir/reference.cpp with ir/scalar/fj_reduce.h, never called per
      // element; no kernel runs them yet (planning refuses them), so no GPU tolerance either.
      CHECK(ir::parse_op(info.name) == op);
      CHECK(info.arity == 1);
      CHECK(info.scalar_fn == "fj_none");
      CHECK(info.infix.empty());
      CHECK(info.domain == ir::OpDomain::All);
      CHECK(info.gpu == ir::OpAccuracy::Exact);
      CHECK((info.ulp_f32 == 0 && info.ulp_f64 == 0 && info.ulp_half == 0));
      CHECK(info.half == ir::HalfForm::F32);
      continue;
    }
    CHECK(ir::parse_op(info.name) == op);
    CHECK((info.arity >= 1 && info.arity <= 3));
    CHECK(info.scalar_fn == (op == Op::Cast ? std::string("fj_cvt") : "fj_" + std::string(info.name)));
    CHECK((info.infix.empty() || info.arity == 2));
    CHECK((info.rule == ir::TypeRule::Same || info.domain == ir::OpDomain::All));
    const bool approx = info.gpu == ir::OpAccuracy::Math || info.gpu == ir::OpAccuracy::Composite;
    CHECK((info.ulp_f32 > 0) == approx);
    CHECK((info.ulp_f64 > 0) == approx);
    CHECK((info.ulp_half > 0) == approx);
    // The one tolerance function reads these columns.
    CHECK(jit::gpu_op_tolerance(op, ir::DType::F32).ulps == info.ulp_f32);
    CHECK(jit::gpu_op_tolerance(op, ir::DType::F64).ulps == info.ulp_f64);
    CHECK(jit::gpu_op_tolerance(op, ir::DType::BF16).ulps == info.ulp_half);
    CHECK(jit::gpu_op_tolerance(op, ir::DType::I32).ulps == 0);
    CHECK((jit::gpu_op_tolerance(op, ir::DType::F32).abs_scale > 0) == (info.gpu == ir::OpAccuracy::Composite));
    CHECK((jit::gpu_op_tolerance(op, ir::DType::BF16).abs_scale > 0) == (info.gpu == ir::OpAccuracy::Composite));
    // A Storage half form needs the fj_<op>_f16 / _bf16 functions on storage values.
    if (info.half == ir::HalfForm::Storage) {
      ir::with_op_fns(op, [&](auto fns) {
        if (info.arity == 2) {
          CHECK(requires { fns.f16(fj_f16{}, fj_f16{}); });
          CHECK(requires { fns.bf16(fj_bf16{}, fj_bf16{}); });
        } else if (info.arity == 3) {
          CHECK(requires { fns.f16(fj_f16{}, fj_f16{}, fj_f16{}); });
          CHECK(requires { fns.bf16(fj_bf16{}, fj_bf16{}, fj_bf16{}); });
        } else {
          CHECK(requires { fns.f16(fj_f16{}); });
          CHECK(requires { fns.bf16(fj_bf16{}); });
        }
      });
    }
  }
}

TEST_CASE("docs/ops.md lists every op in the semantics table of its arity, reductions in theirs") {
  const std::vector<std::string> doc = lines_of(testing::read_file(testing::source_path("docs/ops.md")));
  const char* const sections[] = {"## Unary ops", "## Binary ops", "## Ternary ops", "## Reductions"};
  std::map<std::string, std::string> listed;  // op -> the section that lists it
  for (const char* heading : sections)
    for (const std::vector<std::string>& row : section_rows(doc, heading, false))
      if (!row.empty())
        for (const std::string& name : ops_in(row[0])) {
          CAPTURE(name);
          CHECK_MESSAGE(!listed.count(name), name << " is listed twice");
          listed[name] = heading;
        }
  for (int k = 0; k < ir::kNumOps; ++k) {
    const Op op = static_cast<Op>(k);
    if (ir::is_leaf(op) || op == Op::Cast) continue;
    const std::string name(ir::op_name(op));
    CAPTURE(name);
    REQUIRE_MESSAGE(listed.count(name), "docs/ops.md has no row for " << name);
    CHECK(listed[name] == (ir::is_reduction(op) ? sections[3] : sections[ir::op_arity(op) - 1]));
  }
  CHECK(listed.size() == static_cast<size_t>(ir::kNumOps - 4));  // all but the 3 leaves and cast
}

TEST_CASE("docs/ops.md's GPU bounds table lists every op with ir/ops.def's class and bounds") {
  const std::vector<std::string> doc = lines_of(testing::read_file(testing::source_path("docs/ops.md")));
  const auto rows = section_rows(doc, "## GPU vs reference: ulp bounds", true);
  REQUIRE(rows.size() > 10);
  std::map<std::string, int> seen;
  for (const std::vector<std::string>& row : rows) {
    CAPTURE(row[0]);
    // | ops | class | CUDA f32 | glibc f32 | CUDA f64 | glibc f64 | f32 | f64 | f16, bf16 |
    REQUIRE(row.size() == 9);
    const std::vector<std::string> names = ops_in(row[0]);
    CHECK(!names.empty());
    for (const std::string& name : names) {
      CAPTURE(name);
      const ir::OpInfo& info = ir::op_info(*ir::parse_op(name));
      ++seen[name];
      CHECK(row[1] == accuracy_name(info.gpu));
      CHECK(row[6] == std::to_string(info.ulp_f32));
      CHECK(row[7] == std::to_string(info.ulp_f64));
      CHECK(row[8] == std::to_string(info.ulp_half));
      if (info.gpu == ir::OpAccuracy::Math) {
        // The tolerance is NVIDIA's bound plus glibc's (both against the correctly rounded result).
        CHECK(std::stoi(row[2]) + std::stoi(row[3]) == info.ulp_f32);
        CHECK(std::stoi(row[4]) + std::stoi(row[5]) == info.ulp_f64);
      }
    }
  }
  for (int k = 0; k < ir::kNumOps; ++k) {
    const Op op = static_cast<Op>(k);
    if (ir::is_leaf(op)) continue;
    CAPTURE(ir::op_name(op));
    CHECK(seen[std::string(ir::op_name(op))] == 1);
  }
}
