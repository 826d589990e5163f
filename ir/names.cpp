#include "ir/names.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/dtype.h"
#include "ir/op.h"
#include "ir/reduce.h"

namespace fusejit::ir {
namespace {

constexpr std::string_view kReserved[] = {"graph", "dim", "input", "param", "output",
                                          "true",  "false", "inf", "nan",  "cast"};

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Levenshtein distance, except that swapping two adjacent letters ("tahn" -> "tanh") costs 1.
size_t typo_distance(std::string_view a, std::string_view b) {
  size_t d = edit_distance(a, b);
  if (a.size() == b.size()) {
    for (size_t i = 0; i + 1 < a.size(); ++i) {
      if (a[i] != b[i] && a[i] == b[i + 1] && a[i + 1] == b[i]) {
        std::string t(a);
        std::swap(t[i], t[i + 1]);
        d = std::min(d, 1 + edit_distance(t, b));
        break;
      }
    }
  }
  return d;
}

}  // namespace

std::string quoted(std::string_view s) {
  // Long or odd names are cut for the message (a name is never longer than a line anyway), and
  // control bytes shown as \xNN (a NUL would end the message where C strings carry it).
  std::string r = "'";
  for (char c : s.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    r += u < 0x20 || u == 0x7F ? fmt::format("\\x{:02x}", u) : std::string(1, c);
  }
  return r + (s.size() > 40 ? "...'" : "'");
}

bool is_identifier(std::string_view s) {
  return !s.empty() && is_ident_start(s[0]) && std::all_of(s.begin(), s.end(), is_ident_char);
}

std::string identifier_part(std::string_view name) {
  std::string r;
  for (char c : name.substr(0, 32)) r += is_ident_char(c) ? c : '_';
  return r.empty() ? "graph" : r;
}

bool is_reserved(std::string_view s) {
  return std::find(std::begin(kReserved), std::end(kReserved), s) != std::end(kReserved);
}

std::span<const std::string_view> reserved_words() { return kReserved; }

std::string_view name_kind_word(NameKind k) {
  switch (k) {
    case NameKind::Dim: return "a dim";
    case NameKind::Input: return "an input";
    case NameKind::Param: return "a param";
    case NameKind::Value: return "a value";
  }
  return "";
}

void check_new_name(std::string_view name, const NameBinding* prior, Loc loc, bool is_temp) {
  if (!is_temp && !is_identifier(name))
    throw UserError(quoted(name) + " is not a valid name (a letter or '_', then letters, digits or '_')", loc);
  if (is_reserved(name))
    throw UserError(quoted(name) + " is a reserved word and cannot be used as a name", loc);
  if (prior)
    throw UserError(quoted(name) + " is already defined as " + std::string(name_kind_word(prior->kind)) +
                        (prior->line ? " on line " + std::to_string(prior->line) : std::string()) +
                        " (names are assigned once)",
                    loc);
}

void check_graph_name(std::string_view name) {
  if (!name.empty() && !is_identifier(name))
    throw UserError("graph name " + quoted(name) + " is not a valid name (a letter or '_', then letters, digits or '_')");
}

namespace {
// "'a'", "'a' or 'b'", "'a', 'b' or 'c'".
std::string one_of(std::span<const std::string_view> names) {
  std::string s;
  for (size_t k = 0; k < names.size(); ++k)
    s += fmt::format("{}'{}'", k == 0 ? "" : k + 1 == names.size() ? " or " : ", ", names[k]);
  return s;
}
}  // namespace

std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates) {
  // No guesses for names of 1-2 letters (anything is close); 1 typo up to 5 letters, else 2.
  const size_t limit = word.size() <= 2 ? 0 : word.size() <= 5 ? 1 : 2;
  // Every candidate at the fewest typos (`slu`: elu and silu), those of the same length first
  // (typos more often swap than drop letters), at most three.
  std::vector<std::pair<size_t, std::string_view>> found;  // (score, name)
  size_t fewest = SIZE_MAX;
  for (std::string_view cv : candidates) {
    if (cv.size() + 2 < word.size() || word.size() + 2 < cv.size()) continue;
    const size_t d = typo_distance(word, cv);
    if (d == 0 || d > limit || d > fewest) continue;
    if (d < fewest) found.clear();
    fewest = d;
    found.emplace_back(cv.size() == word.size() ? 0 : 1, cv);
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string_view> names;
  for (size_t k = 0; k < found.size() && k < 3; ++k) names.push_back(found[k].second);
  return names.empty() ? "" : "; did you mean " + one_of(names) + "?";
}

std::string unknown_dtype_message(std::string_view name) {
  // Names whose width depends on who reads them: say both.
  if (name == "float")
    return "unknown dtype 'float': write f32 (C's float, torch.float) or f64 (Python's float, NumPy's default)";
  if (name == "int")
    return "unknown dtype 'int': write i32 (C's int, torch.int) or i64 (Python's int, torch.long, NumPy's default)";
  if (const std::optional<DType> f = foreign_dtype(name))
    return fmt::format("unknown dtype '{}': fusejit writes it {}", name, dtype_name(*f));
  std::vector<std::string_view> names;
  for (int k = 0; k < kNumDTypes; ++k) names.push_back(dtype_name(static_cast<DType>(k)));
  const std::string guess = did_you_mean(name, names);
  return fmt::format("unknown dtype '{}'{}", name, guess.empty() ? "; expected one of " + fmt::format("{}", fmt::join(names, ", ")) : guess);
}

std::string unknown_op_message(std::string_view name) {
  // cast and the composites the builder expands (ir/builder.h) are called like ops.
  std::vector<std::string_view> names{"cast"};
  names.insert(names.end(), composite_names().begin(), composite_names().end());
  for (int k = 0; k < kNumOps; ++k)
    if (!is_leaf(static_cast<Op>(k))) names.push_back(op_name(static_cast<Op>(k)));
  // PyTorch's and NumPy's names for what fusejit spells otherwise: a typo guess (max -> fmax)
  // would name an elementwise op that silently computes something else.
  if (name == "max" || name == "min")
    return "unknown op " + quoted(name) + ": for a reduction write a" + std::string(name) + " (torch.a" +
           std::string(name) + "), for an elementwise one " + std::string(name) + "imum (NaN-propagating, torch." +
           std::string(name) + "imum) or f" + std::string(name);
  // Names from PyTorch and NumPy that fusejit spells otherwise or builds from other ops.
  static constexpr std::pair<std::string_view, std::string_view> kForeign[] = {
      {"square", "write x * x (or pow(x, 2))"},
      {"layer_norm", "LayerNorm is two means and an rsqrt: see samples/graphs/layernorm.txt"},
      {"rms_norm", "RMSNorm is mean and rsqrt: see samples/graphs/rmsnorm.txt"},
      {"clip", "write clamp(x, lo, hi)"},
      {"remainder", "write x % y or mod(x, y) (Python's %, torch.remainder)"},
      {"swish", "write silu(x)"},
  };
  for (const auto& [foreign, hint] : kForeign)
    if (name == foreign) return "unknown op " + quoted(name) + ": " + std::string(hint);
  // Movement, indexing, scan, sort and matrix ops: no typo guess (cat -> cos) for what fusejit has none of.
  static constexpr std::string_view kNotFused[] = {
      "cat",    "concat",  "concatenate", "stack",  "split",  "chunk", "reshape", "view",      "flatten",
      "permute", "transpose", "squeeze",  "unsqueeze", "expand", "flip", "roll",   "gather",    "scatter",
      "index_select", "take", "slice",    "narrow", "topk",   "sort",  "argsort", "cumsum",    "cumprod",
      "arange", "iota",    "matmul",      "mm",     "bmm",    "dot",   "einsum",  "linear",    "conv2d"};
  for (std::string_view nf : kNotFused)
    if (name == nf)
      return "unknown op " + quoted(name) +
             ": fusejit fuses elementwise ops and reductions, and has no movement, indexing, scan, sort or matrix "
             "ops; pass such a tensor (a slice, a transposed view, an index table) as an input of its own, and "
             "from Python as a strided view of the array (docs/python.md)";
  return "unknown op " + quoted(name) + did_you_mean(name, names);
}

}  // namespace fusejit::ir
