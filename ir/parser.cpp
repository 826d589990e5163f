#include "ir/parser.h"

#include "ir/reduce.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "ir/builder.h"
#include "ir/lexer.h"
#include "ir/names.h"

namespace fusejit::ir {
namespace {

using Kind = NameKind;

// A name's binding (kind, line) and the value it stands for.
struct Binding : NameBinding {
  Operand value;
  Binding() = default;
  Binding(Kind k, Operand v, uint32_t line) : NameBinding{k, line}, value(v) {}
};

class Parser {
 public:
  Parser(std::string_view text, const std::string& file, const DimOverrides& overrides)
      : text_(text), lex_(text), b_("", file), overrides_(overrides) {
    b_.limit_nodes();
  }

  // After a whole statement; `x[...]` (Python's indexing) gets a hint: graph text has none.
  UserError end_of_line_expected() const {
    const std::string hint = tok_.kind == Tok::LBracket
                                 ? " (graph text has no indexing or slicing: pass the slice as an input of its own; "
                                   "from Python, a strided view of the array)"
                                 : "";
    return UserError("expected end of line, found " + describe(tok_) + hint, tok_.loc);
  }

  Graph run() {
    check_text(text_);
    advance();
    bool first = true;
    while (tok_.kind != Tok::Eof) {
      if (tok_.kind == Tok::Newline) { advance(); continue; }
      statement(first);
      first = false;
      if (tok_.kind != Tok::Newline && tok_.kind != Tok::Eof) throw end_of_line_expected();
    }
    if (b_.graph().outputs.empty())
      throw UserError("graph has no output; add a line such as `output y`", end_loc());
    for (const auto& [name, v] : overrides_) {
      (void)v;
      if (b_.find_dim(name) < 0) throw UserError(unknown_dim_message(b_.graph(), name, " in a dim override"));
    }
    Graph g = b_.finish();
    g.name = graph_name_;
    return g;
  }

 private:
  void advance() { tok_ = lex_.next(); }

  // A number's text for a message: past 40 characters (a literal may be megabytes of digits) its
  // first and last digits and the count, so leading zeros do not hide the value.
  static std::string number_text(const Token& t) {
    if (t.text.size() <= 40) return std::string(t.text);
    return fmt::format("{}...{} ({} digits)", t.text.substr(0, 12), t.text.substr(t.text.size() - 24), t.text.size());
  }

  static std::string describe(const Token& t) {
    if (t.kind == Tok::Ident || t.kind == Tok::Int || t.kind == Tok::Float || t.kind == Tok::Temp) {
      std::string s(t.text.substr(0, 40));
      return "'" + s + (t.text.size() > 40 ? "...'" : "'");
    }
    return std::string(tok_description(t.kind));
  }

  Token expect(Tok kind, const char* what) {
    if (tok_.kind != kind)
      throw UserError(std::string("expected ") + what + ", found " + describe(tok_), tok_.loc);
    Token t = tok_;
    advance();
    return t;
  }

  Loc end_loc() const {
    size_t end = text_.size();
    if (end > 0 && text_[end - 1] == '\n') --end;
    uint32_t line = 1;
    size_t start = 0;
    for (size_t i = 0; i < end; ++i)
      if (text_[i] == '\n') { ++line; start = i + 1; }
    return {line, static_cast<uint32_t>(end - start + 1)};
  }

  // Line of a later statement defining `name` (`name = ...`, `input name`, ...), or 0. Only
  // called on the way to an error, so its linear scan costs nothing in the common case.
  uint32_t later_definition(std::string_view name) const {
    // The current token is on the statement's line (or is the newline ending it).
    uint32_t line = tok_.loc.line + 1;
    size_t i = lex_.offset();
    if (tok_.kind != Tok::Newline) {
      while (i < text_.size() && text_[i] != '\n') ++i;
      ++i;
    }
    auto skip_blank = [&](size_t& p) { while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p; };
    auto word = [&](size_t& p) {
      size_t s = p;
      if (p < text_.size() && text_[p] == '%') ++p;
      while (p < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[p])) || text_[p] == '_')) ++p;
      return text_.substr(s, p - s);
    };
    for (; i < text_.size(); ++line) {
      size_t p = i;
      skip_blank(p);
      std::string_view w = word(p);
      if (w == "input" || w == "param" || w == "dim") {
        skip_blank(p);
        if (word(p) == name) return line;
      } else if (w == name) {
        skip_blank(p);
        if (p < text_.size() && text_[p] == '=' && (p + 1 >= text_.size() || text_[p + 1] != '=')) return line;
      }
      while (i < text_.size() && text_[i] != '\n') ++i;
      ++i;
    }
    return 0;
  }

  static std::string kind_word(Kind k) { return std::string(name_kind_word(k)); }

  // Checks `name` may be defined here (ir/names.h: not reserved, not defined before).
  void check_new_name(const Token& t) {
    auto it = scope_.find(std::string(t.text));
    ir::check_new_name(t.text, it == scope_.end() ? nullptr : &it->second, t.loc, t.kind == Tok::Temp);
  }

  const Binding& lookup(const Token& t) {
    auto it = scope_.find(std::string(t.text));
    if (it != scope_.end()) return it->second;
    std::string name(t.text);
    if (uint32_t line = later_definition(name))
      throw UserError("'" + name + "' is used before its definition on line " + std::to_string(line), t.loc);
    std::vector<std::string_view> names;
    for (const auto& [n, bnd] : scope_) names.push_back(n);
    std::sort(names.begin(), names.end());
    throw UserError("undefined name '" + name + "'" + did_you_mean(name, names) + comment_hint(t) + keyword_hint(name),
                    t.loc);
  }

  // PyTorch's gelu(x, approximate="tanh") reads here as a name: its op is gelu_tanh.
  static std::string keyword_hint(std::string_view name) {
    return name == "approximate" ? "; PyTorch's gelu(x, approximate=\"tanh\") is the op gelu_tanh(x) here" : "";
  }

  // `y = x * 2  // double it`: a C++ comment reads as floor division by the name after it.
  std::string comment_hint(const Token& t) const {
    size_t p = static_cast<size_t>(t.text.data() - text_.data());
    while (p > 0 && (text_[p - 1] == ' ' || text_[p - 1] == '\t')) --p;
    if (p < 2 || text_.compare(p - 2, 2, "//") != 0) return "";
    return "; `//` is floor division here: comments start with `#`";
  }

  Operand lookup_value(const Token& t) {
    const Binding& bnd = lookup(t);
    if (bnd.kind == Kind::Dim)
      throw UserError("'" + std::string(t.text) + "' is a dim; dims cannot be used as values", t.loc);
    return bnd.value;
  }

  DType parse_dtype_tok() {
    Token t = expect(Tok::Ident, "a dtype");
    auto d = parse_dtype(t.text);
    if (!d) throw UserError(unknown_dtype_message(t.text), t.loc);
    return *d;
  }

  // cast's dtype: `cast(x, f32)`; `dtype=f32` (PyTorch's and NumPy's keyword) says how to write it.
  DType cast_dtype_tok() {
    if (tok_.kind == Tok::Ident && tok_.text == "dtype")  // no dtype has that name
      throw UserError("cast takes its dtype as the second argument, without a keyword: `cast(x, f32)`", tok_.loc);
    return parse_dtype_tok();
  }

  void statement(bool first) {
    if (tok_.kind == Tok::Temp) return assign_stmt();
    if (tok_.kind != Tok::Ident)
      throw UserError("expected a statement (`name = expr`, `input`, `param`, `dim`, `output` or `graph`), found " +
                          describe(tok_) +
                          (tok_.kind == Tok::Percent ? " (a temporary is '%' and digits, such as %12)" : ""),
                      tok_.loc);
    std::string_view kw = tok_.text;
    if (kw == "graph") return graph_stmt(first);
    if (kw == "dim") return dim_stmt();
    if (kw == "input") return input_stmt();
    if (kw == "param") return param_stmt();
    if (kw == "output") return output_stmt();
    assign_stmt();
  }

  void graph_stmt(bool first) {
    Token kw = tok_;
    if (!first) throw UserError("`graph NAME` must be the first statement", kw.loc);
    advance();
    graph_name_ = std::string(expect(Tok::Ident, "a graph name").text);
  }

  void dim_stmt() {
    Loc stmt = tok_.loc;
    advance();
    Token name = expect(Tok::Ident, "a dim name");
    check_new_name(name);
    expect(Tok::Assign, "'=' and a default size (e.g. `dim N = 1024`)");
    Token v = expect(Tok::Int, "a non-negative integer size");
    if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw UserError("dim size " + number_text(v) + " does not fit in i64", v.loc);
    int64_t value = static_cast<int64_t>(v.u);
    std::string n(name.text);
    bool overridden = false;
    for (const auto& [oname, ov] : overrides_)
      if (oname == n) value = ov, overridden = true;  // later overrides win
    if (overridden && value < 0)  // the override's mistake, not the text's: no place in the file (as with_dims)
      throw UserError("dim '" + n + "' must be >= 0, got " + std::to_string(value));
    b_.add_dim(n, value, name.loc);
    scope_[n] = {Kind::Dim, {}, stmt.line};
  }

  void input_stmt() {
    Loc stmt = tok_.loc;
    advance();
    Token name = expect(Tok::Ident, "an input name");
    check_new_name(name);
    expect(Tok::Colon, "':' and a dtype (e.g. `input x : f32[N, 4096]`)");
    DType dt = parse_dtype_tok();
    Shape shape;
    if (tok_.kind == Tok::LBracket) {
      Loc open = tok_.loc;
      advance();
      if (tok_.kind != Tok::RBracket) {
        for (;;) {
          if (tok_.kind == Tok::Int) {
            if (tok_.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
              throw UserError("dimension " + number_text(tok_) + " does not fit in i64", tok_.loc);
            shape.push_back({static_cast<int64_t>(tok_.u), -1});
          } else if (tok_.kind == Tok::Ident) {
            auto it = scope_.find(std::string(tok_.text));
            if (it == scope_.end() || it->second.kind != Kind::Dim) {
              if (it != scope_.end())
                throw UserError("'" + std::string(tok_.text) + "' is " + kind_word(it->second.kind) +
                                    ", not a dim",
                                tok_.loc);
              if (uint32_t line = later_definition(tok_.text))
                throw UserError("dim '" + std::string(tok_.text) + "' is used before its declaration on line " +
                                    std::to_string(line),
                                tok_.loc);
              throw UserError("unknown dim '" + std::string(tok_.text) + "'; declare it first with `dim " +
                                  std::string(tok_.text) + " = SIZE`",
                              tok_.loc);
            }
            int32_t sym = b_.find_dim(std::string(tok_.text));
            shape.push_back({b_.graph().dims[static_cast<size_t>(sym)].value, sym});
          } else {
            throw UserError("expected a dimension (an integer or a dim name), found " + describe(tok_), tok_.loc);
          }
          advance();
          if (tok_.kind == Tok::Comma) {
            advance();
            refuse_trailing_comma(Tok::RBracket, "a dimension");
            continue;
          }
          if (tok_.kind == Tok::RBracket) break;
          throw UserError("expected ',' or ']' to close '[' at column " + std::to_string(open.col) + ", found " +
                              describe(tok_),
                          tok_.loc);
        }
      }
      advance();  // ']'
    }
    NodeId id = b_.add_input(std::string(name.text), dt, shape, name.loc);
    // Optional `range LO:HI`: where generated values of this input are drawn from.
    if (tok_.kind == Tok::Ident && tok_.text == "range") {
      Loc at = tok_.loc;
      advance();
      const double lo = range_bound("LO");
      expect(Tok::Colon, "':' between the bounds (e.g. `range 0:1`)");
      const double hi = range_bound("HI");
      b_.set_input_range(id, lo, hi, at);
    }
    scope_[std::string(name.text)] = {Kind::Input, Operand::of(id), stmt.line};
  }

  // One bound of `range LO:HI`: a constant expression (a literal such as -0.5 or 1/255).
  double range_bound(const char* which) {
    Loc at = tok_.loc;
    Operand v = expr(0);
    if (!v.is_literal() || v.lit.cat == Category::Bool)
      throw UserError(std::string("expected a number for the range's ") + which + " (e.g. `range -1:1`)", at);
    if (v.lit.cat == Category::Float) return v.lit.f;
    // Ranges are kept in f64: an integer bound must survive that exactly (|x| <= 2^53).
    const double d = static_cast<double>(v.lit.i);
    if (v.lit.i > (int64_t{1} << 53) || v.lit.i < -(int64_t{1} << 53))
      throw UserError(std::string("the range's ") + which + " must be within +-2^53 (ranges are held in f64)", at);
    return d;
  }

  void param_stmt() {
    Loc stmt = tok_.loc;
    advance();
    Token name = expect(Tok::Ident, "a param name");
    check_new_name(name);
    expect(Tok::Colon, "':' and a dtype (e.g. `param alpha : f32 = 0.5`)");
    DType dt = parse_dtype_tok();
    if (tok_.kind == Tok::LBracket)
      throw UserError("params are 0-d scalars and take no shape; use `input` for a tensor", tok_.loc);
    expect(Tok::Assign, "'=' and a default value (e.g. `param alpha : f32 = 0.5`)");
    Loc at = tok_.loc;
    Operand v = expr(0);
    if (!v.is_literal()) throw UserError("a param default must be a constant (a literal such as 0.5)", at);
    NodeId id = b_.add_param(std::string(name.text), dt, v.lit, name.loc);
    scope_[std::string(name.text)] = {Kind::Param, Operand::of(id), stmt.line};
  }

  void output_stmt() {
    advance();
    for (;;) {
      if (tok_.kind == Tok::Temp)  // the printer's %N: a name of the text, not of the graph's outputs
        throw UserError("'" + std::string(tok_.text) + "' is a temporary; an output is a named value: write `y = " +
                            std::string(tok_.text) + "` and `output y`",
                        tok_.loc);
      Token name = expect(Tok::Ident, "an output name");
      const Binding& bnd = lookup(name);
      std::string n(name.text);
      if (bnd.kind == Kind::Dim) throw UserError("output '" + n + "' names a dim, not a value", name.loc);
      if (auto it = output_lines_.find(n); it != output_lines_.end())
        throw UserError("output '" + n + "' is listed twice (first on line " + std::to_string(it->second) + ")",
                        name.loc);
      Operand v = bnd.value;
      if (!v.is_literal()) {
        const Node& node = b_.graph().node(v.node);
        if (node.op == Op::Input || node.op == Op::Param)
          throw UserError("output '" + n + "' names " + (node.op == Op::Input ? "input" : "param") + " '" +
                              node.name + "'; an output must be computed by the graph",
                          name.loc);
      } else {
        // A named literal (`c = 2`): materialize it as a Const node carrying the output's name.
        NodeId id = b_.materialize(v, name.loc);
        b_.set_node_name(id, n);
        v = Operand::of(id);
      }
      b_.add_output(n, v, name.loc);
      output_lines_[n] = name.loc.line;
      if (tok_.kind != Tok::Comma) break;
      advance();
      if (tok_.kind == Tok::Newline || tok_.kind == Tok::Eof)
        throw UserError("expected an output name after ',' (remove the trailing ',')", tok_.loc);
    }
  }

  void assign_stmt() {
    Token name = tok_;
    advance();
    if (tok_.kind != Tok::Assign)
      throw UserError("expected '=' after '" + std::string(name.text.substr(0, 40)) +
                          "' (a statement is `name = expr`, `input`, `param`, `dim`, `output` or `graph`), found " +
                          describe(tok_),
                      tok_.loc);
    check_new_name(name);
    advance();
    NodeId before = static_cast<NodeId>(b_.graph().size());
    Operand v = expr(0);
    // A new node takes the statement's name; an existing one (`b = a`) is only aliased, and a
    // temporary (`%3 = ...`) names nothing.
    if (name.kind == Tok::Ident && !v.is_literal() && v.node >= before) b_.set_node_name(v.node, std::string(name.text));
    Kind kind = Kind::Value;
    scope_[std::string(name.text)] = {kind, v, name.loc.line};
  }

  // ---- expressions, Python's precedence (lowest first):
  //      cmp := or [cmpop or]; or := xor {'|' xor}; xor := and {'^' and}; and := shift {'&' shift};
  //      shift := add {('<<'|'>>') add}; add := mul {(+|-) mul}; mul := unary {(*|/|//|%) unary};
  //      unary := ('-'|'~') unary | power; power := primary ['**' unary];
  //      primary := literal | name | call | '(' expr ')'.
  void check_depth(int depth, Loc loc) {
    if (depth > kMaxExprDepth)
      throw UserError("expression nested too deeply (more than " + std::to_string(kMaxExprDepth) + " levels)", loc);
  }

  static std::optional<Op> cmp_op(Tok t) {
    switch (t) {
      case Tok::Lt: return Op::Lt;
      case Tok::Le: return Op::Le;
      case Tok::Gt: return Op::Gt;
      case Tok::Ge: return Op::Ge;
      case Tok::Eq: return Op::Eq;
      case Tok::Ne: return Op::Ne;
      default: return std::nullopt;
    }
  }

  Operand binary(Op op, const Operand& a, const Operand& b, Loc loc) {
    Operand args[2] = {a, b};
    return b_.apply(op, args, loc);
  }

  Operand expr(int depth) {
    Operand lhs = bit_or(depth);
    if (auto op = cmp_op(tok_.kind)) {
      Token t = tok_;
      advance();
      Operand rhs = bit_or(depth);
      if (cmp_op(tok_.kind))
        throw UserError("comparisons cannot be chained; use parentheses or logical_and(a < b, b < c)", tok_.loc);
      lhs = binary(*op, lhs, rhs, t.loc);
    }
    return lhs;
  }

  // One left-associative level of binary operators: `next {tok next}`, `tok` applying `op`.
  template <class Next>
  Operand left_assoc(int depth, Next next, std::initializer_list<std::pair<Tok, Op>> ops) {
    Operand lhs = (this->*next)(depth);
    for (;;) {
      const auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& p) { return p.first == tok_.kind; });
      if (it == ops.end()) return lhs;
      Token t = tok_;
      advance();
      Operand rhs = (this->*next)(depth);
      lhs = binary(it->second, lhs, rhs, t.loc);
    }
  }
  Operand bit_or(int depth) { return left_assoc(depth, &Parser::bit_xor, {{Tok::Pipe, Op::BitwiseOr}}); }
  Operand bit_xor(int depth) { return left_assoc(depth, &Parser::bit_and, {{Tok::Caret, Op::BitwiseXor}}); }
  Operand bit_and(int depth) { return left_assoc(depth, &Parser::shift, {{Tok::Amp, Op::BitwiseAnd}}); }
  Operand shift(int depth) {
    return left_assoc(depth, &Parser::additive, {{Tok::Shl, Op::LeftShift}, {Tok::Shr, Op::RightShift}});
  }

  Operand additive(int depth) {
    return left_assoc(depth, &Parser::multiplicative, {{Tok::Plus, Op::Add}, {Tok::Minus, Op::Sub}});
  }
  Operand multiplicative(int depth) {
    Operand lhs = left_assoc(depth, &Parser::unary,
                             {{Tok::Star, Op::Mul}, {Tok::Slash, Op::Div}, {Tok::FloorDiv, Op::FloorDiv},
                              {Tok::Percent, Op::Mod}});
    if (tok_.kind == Tok::Temp)  // `x %2`: the lexer read a temporary where an operator belongs
      throw UserError("'" + std::string(tok_.text) + "' reads as a temporary; a remainder needs a space after '%' (x % " +
                          std::string(tok_.text.substr(1)) + ")",
                      tok_.loc);
    return lhs;
  }

  // `-x`, `~x`, or a power. As in Python, `**` binds tighter than a unary operator on its left
  // and looser than one on its right: -x ** 2 is -(x ** 2), 2 ** -1 is 2 ** (-1).
  Operand unary(int depth) {
    if (tok_.kind != Tok::Minus && tok_.kind != Tok::Tilde) return power(depth);
    const Token t = tok_;
    check_depth(depth + 1, t.loc);
    advance();
    if (t.kind == Tok::Minus && negated_literal_ahead()) return negative_literal(t.loc);
    Operand args[1] = {unary(depth + 1)};
    return b_.apply(t.kind == Tok::Minus ? Op::Neg : Op::BitwiseNot, args, t.loc);
  }

  // True when the current token is a number, `inf` or `nan` that a minus before it negates as a
  // literal (so -9223372036854775808 and -0.0 are exact, independent of constant folding): not
  // when `**` follows, since -2 ** 2 is -(2 ** 2).
  bool negated_literal_ahead() const {
    const bool number = tok_.kind == Tok::Int || tok_.kind == Tok::Float ||
                        (tok_.kind == Tok::Ident && (tok_.text == "inf" || tok_.text == "nan"));
    if (!number) return false;
    Lexer ahead = lex_;  // a copy: peeks at the next token without consuming it
    return ahead.next().kind != Tok::Power;
  }

  // The negated literal at the current token (negated_literal_ahead() said there is one).
  Operand negative_literal(Loc minus) {
    Literal l;
    l.loc = minus;
    if (tok_.kind == Tok::Int) {
      if (tok_.too_big) throw UserError("integer literal -" + number_text(tok_) + " does not fit in i64", minus);
      l.cat = Category::Int;
      l.i = static_cast<int64_t>(0 - tok_.u);  // 2^63 wraps to INT64_MIN, as intended
    } else {
      l.cat = Category::Float;
      l.f = tok_.kind == Tok::Float ? -tok_.f
            : tok_.text == "inf"    ? -std::numeric_limits<double>::infinity()
                                    : -std::numeric_limits<double>::quiet_NaN();
    }
    advance();
    return Operand::of(l);
  }

  // primary [`**` unary]: right-associative (2 ** 3 ** 2 is 2 ** 9), as in Python.
  Operand power(int depth) {
    Operand base = primary(depth);
    if (tok_.kind != Tok::Power) return base;
    const Token t = tok_;
    check_depth(depth + 1, t.loc);
    advance();
    Operand exponent = unary(depth + 1);
    return binary(Op::Pow, base, exponent, t.loc);
  }

  Operand primary(int depth) {
    const Token t = tok_;
    switch (t.kind) {
      case Tok::Int:
      case Tok::Float: return number(t);
      case Tok::LParen: return parenthesized(t, depth);
      case Tok::Temp:
        advance();
        return lookup_value(t);
      case Tok::Ident:
        advance();
        return tok_.kind == Tok::LParen ? call(t, depth) : named_value(t);
      default: throw UserError("expected an expression, found " + describe(t), t.loc);
    }
  }

  // An integer or float literal (the current token, `t`).
  Operand number(const Token& t) {
    if (t.kind == Tok::Int && t.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw UserError("integer literal " + number_text(t) + " does not fit in i64", t.loc);
    advance();
    Literal l;
    l.cat = t.kind == Tok::Int ? Category::Int : Category::Float;
    if (t.kind == Tok::Int) l.i = static_cast<int64_t>(t.u);
    else l.f = t.f;
    l.loc = t.loc;
    return Operand::of(l);
  }

  // `( expr )`, the current token being the '(' (`open`).
  Operand parenthesized(const Token& open, int depth) {
    check_depth(depth + 1, open.loc);
    advance();
    Operand v = expr(depth + 1);
    if (tok_.kind != Tok::RParen)
      throw UserError("expected ')' to close '(' at column " + std::to_string(open.loc.col) + ", found " + describe(tok_),
                      tok_.loc);
    advance();
    return v;
  }

  // A name used as a value (already consumed): true, false, inf, nan, or a defined value.
  Operand named_value(const Token& t) {
    Literal l;
    l.loc = t.loc;
    if (t.text == "true" || t.text == "false") {
      l.cat = Category::Bool;
      l.i = t.text == "true";
      return Operand::of(l);
    }
    if (t.text == "inf" || t.text == "nan") {
      l.cat = Category::Float;
      l.f = t.text == "inf" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
      return Operand::of(l);
    }
    if (is_reserved(t.text)) throw UserError("'" + std::string(t.text) + "' is a keyword, not a value", t.loc);
    return lookup_value(t);
  }

  // The op a call names; a name bound to a value, or no op's, is a located error.
  Op called_op(const Token& name) {
    if (const std::optional<Op> op = parse_op(name.text)) return *op;
    if (auto bound = scope_.find(std::string(name.text)); bound != scope_.end())
      throw UserError("'" + std::string(name.text) + "' is " + kind_word(bound->second.kind) +
                          ", not an op; it cannot be called",
                      name.loc);
    throw UserError(unknown_op_message(name.text), name.loc);
  }

  // A call's arguments up to its ')' (consumed), the current token being its '(' (`open`); a
  // cast's second argument is a dtype (`cast_to`).
  std::vector<Operand> call_args(const Token& open, bool is_cast, std::optional<DType>& cast_to, int depth) {
    advance();  // '('
    std::vector<Operand> args;
    if (tok_.kind != Tok::RParen) {
      for (;;) {
        if (is_cast && args.size() == 1 && !cast_to) {
          cast_to = cast_dtype_tok();
        } else if (is_cast && cast_to && tok_.kind == Tok::Ident && parse_dtype(tok_.text)) {
          advance();  // a dtype as a third argument: counted for cast's arity error, not read as a value
          args.push_back(args.front());
        } else {
          args.push_back(expr(depth + 1));
        }
        if (tok_.kind == Tok::Comma) {
          advance();
          refuse_trailing_comma(Tok::RParen, "an argument");
          continue;
        }
        if (tok_.kind == Tok::RParen) break;
        throw UserError("expected ',' or ')' to close '(' at column " + std::to_string(open.loc.col) + ", found " +
                            describe(tok_),
                        tok_.loc);
      }
    }
    advance();  // ')'
    return args;
  }

  Operand call(const Token& name, int depth) {
    const Token open = tok_;
    check_depth(depth + 1, open.loc);
    if (is_reduce_name(name.text)) return reduce_call(name, depth);
    const bool is_cast = name.text == "cast";
    const std::optional<Op> op = is_cast ? std::nullopt : std::optional<Op>(called_op(name));
    std::optional<DType> cast_to;
    const std::vector<Operand> args = call_args(open, is_cast, cast_to, depth);
    if (!is_cast) return b_.apply(*op, args, name.loc);
    if (!cast_to || args.size() != 1)
      throw UserError("cast takes 2 arguments (a value and a dtype), got " + std::to_string(args.size() + (cast_to ? 1 : 0)),
                      name.loc);
    return b_.cast(args[0], *cast_to, name.loc);
  }

  // One axis: an integer, negative ones counting from the end.
  int64_t axis_literal() {
    // NumPy's axis=, PyTorch's dim= and a Python tuple of axes, each with the spelling this format takes.
    const std::string_view t = tok_.text;
    if (tok_.kind == Tok::Ident && (t == "axis" || t == "axes" || t == "dim" || t == "dims"))
      throw UserError(fmt::format("write the axis without a keyword: `-1`, not `{}=-1` (several axes in brackets: "
                                  "`[0, 2]`)", t), tok_.loc);
    if (tok_.kind == Tok::LParen)
      throw UserError("axes go in brackets, as in `sum(x, [0, 1])`, or one alone, as in `sum(x, 1)`; not in parentheses",
                      tok_.loc);
    const bool neg = tok_.kind == Tok::Minus;
    const Loc at = tok_.loc;
    if (neg) advance();
    Token v = expect(Tok::Int, "an axis (an integer such as -1)");
    // No tensor has 2^62 axes: any larger magnitude is out of range whatever the rank (and
    // -2^63, which fits in i64, is not special). Said as the builder says it, at the axis.
    if (v.u > (uint64_t{1} << 62))
      throw UserError(axis_out_of_range(fmt::format("{}{}", neg ? "-" : "", number_text(v)), axis_rank_), at);
    return neg ? -static_cast<int64_t>(v.u) : static_cast<int64_t>(v.u);
  }

  // `correction=N` (N a non-negative integer), after its `,`.
  int64_t correction_literal() {
    advance();  // `correction`
    expect(Tok::Assign, "'=' after `correction` (as in `correction=1`)");
    Token v = expect(Tok::Int, "a non-negative integer correction (as in `correction=1`)");
    if (v.u > static_cast<uint64_t>(GraphBuilder::kMaxCorrection))
      throw UserError(fmt::format("correction {} is out of range (it is at most 2^62)", number_text(v)), v.loc);
    return static_cast<int64_t>(v.u);
  }

  // `initial=V` (V a number or inf, signed), after its `,`; the builder says which values it takes.
  double initial_literal(Loc& at) {
    advance();  // `initial`
    expect(Tok::Assign, "'=' after `initial` (as in `initial=-inf`)");
    at = tok_.loc;
    const bool neg = tok_.kind == Tok::Minus;
    if (neg || tok_.kind == Tok::Plus) advance();
    double v = 0;
    if (tok_.kind == Tok::Ident && tok_.text == "inf") v = std::numeric_limits<double>::infinity();
    else if (tok_.kind == Tok::Float) v = tok_.f;
    else if (tok_.kind == Tok::Int && tok_.too_big)  // no identity anyway; say so with the text as written
      throw UserError(fmt::format("initial={}{} is not supported (amax takes initial=-inf, amin initial=inf)",
                                  neg ? "-" : "", number_text(tok_)),
                      at);
    else if (tok_.kind == Tok::Int) v = static_cast<double>(tok_.u);
    else throw UserError("expected a number after `initial=` (as in `initial=-inf`), found " + describe(tok_), tok_.loc);
    advance();
    return neg ? -v : v;
  }

  // `keepdim`, then `correction=N` or `initial=V`, after a reduction's `,`: in that order, each at
  // most once.
  void reduce_keyword(GraphBuilder::ReduceArgs& a) {
    const bool keep = tok_.text == "keepdim";
    const bool initial = tok_.text == "initial";
    if (keep ? a.keepdim : (a.correction.has_value() || a.initial.has_value())) {
      const bool same = keep || (initial ? a.initial.has_value() : a.correction.has_value());
      throw UserError(same ? fmt::format("`{}` is given twice", tok_.text)
                           : std::string("a reduction takes `correction=N` or `initial=V`, not both"),
                      tok_.loc);
    }
    if (!keep) {
      if (initial) a.initial = initial_literal(a.initial_loc);
      else a.correction = correction_literal();
      return;
    }
    if (a.correction || a.initial)
      throw UserError(fmt::format("`keepdim` comes before `{}`", a.initial ? "initial=V" : "correction=N"), tok_.loc);
    a.keepdim = true;
    advance();
    if (tok_.kind == Tok::Assign)
      throw UserError("`keepdim` takes no value: write `keepdim` alone (PyTorch's keepdim=True)", tok_.loc);
  }

  // A ',' just before `close`: lists and calls take no trailing comma (one spelling of each).
  void refuse_trailing_comma(Tok close, std::string_view what) {
    if (tok_.kind == close)
      throw UserError(fmt::format("expected {} after ',' (remove the trailing ',')", what), tok_.loc);
  }

  // `[AXIS, ...]` after its '['.
  void axes_list(std::vector<int64_t>& axes) {
    advance();  // '['
    while (tok_.kind != Tok::RBracket) {
      axes.push_back(axis_literal());
      if (tok_.kind != Tok::Comma) break;
      advance();
      refuse_trailing_comma(Tok::RBracket, "an axis");
    }
    expect(Tok::RBracket, "']' to close the list of axes");
  }

  // `, AXES` (an integer or a [list]), `, keepdim` and `, correction=N` or `, initial=V`, each
  // optional and in that order, then ')'. `keywords` lists what the reduction takes, for messages.
  void reduce_tail(GraphBuilder::ReduceArgs& a, std::string_view keywords) {
    bool has_axes = false;
    while (tok_.kind == Tok::Comma) {
      advance();
      const bool late = a.keepdim || a.correction || a.initial;
      if (tok_.kind == Tok::Ident && (tok_.text == "keepdim" || tok_.text == "correction" || tok_.text == "initial")) {
        reduce_keyword(a);
      } else if (tok_.kind == Tok::RParen) {
        refuse_trailing_comma(Tok::RParen, "an argument");
      } else if (tok_.kind == Tok::Ident && tok_.text == "keepdims") {
        throw UserError("unknown argument `keepdims`: NumPy's keepdims is written `keepdim` here", tok_.loc);
      } else if (tok_.kind == Tok::Ident && (tok_.text == "ddof" || tok_.text == "unbiased")) {
        throw UserError(fmt::format("unknown argument `{}`: NumPy's ddof and PyTorch's unbiased are written "
                                    "`correction=N` here (ddof=1 and unbiased=True are correction=1)",
                                    tok_.text),
                        tok_.loc);
      } else if (!has_axes && !late) {
        has_axes = true;
        a.axes_loc = tok_.loc;
        if (tok_.kind == Tok::LBracket) axes_list(a.axes);
        else a.axes.push_back(axis_literal());
      } else {
        throw UserError(fmt::format("{} {} or ')' after the axes, found {}",
                                    late ? "the axes come first; expected" : "expected", keywords, describe(tok_)),
                        tok_.loc);
      }
    }
  }

  // sum/mean/prod/amax/amin/var/std(x[, AXES][, keepdim][, correction=N]) (amax/amin: initial=V
  // instead of correction=N), softmax/log_softmax(x,
  // AXIS), logsumexp(x, AXIS[, keepdim]) (docs/graph-format.md; GraphBuilder::reduce_by_name).
  Operand reduce_call(const Token& name, int depth) {
    Token open = tok_;
    check_depth(depth + 1, open.loc);
    advance();  // '('
    Operand x = expr(depth + 1);
    GraphBuilder::ReduceArgs args;
    axis_rank_ = x.is_literal() ? 0 : b_.graph().node(x.node).shape.size();
    const bool extremum = name.text == "amax" || name.text == "amin";
    reduce_tail(args, takes_correction(name.text) ? "`keepdim`, `correction=N`"
                      : extremum                  ? "`keepdim`, `initial=V`"
                                                  : "`keepdim`");
    if (tok_.kind != Tok::RParen)
      throw UserError("expected ',' or ')' to close '(' at column " + std::to_string(open.loc.col) + ", found " +
                          describe(tok_),
                      tok_.loc);
    advance();
    return b_.reduce_by_name(name.text, x, args, name.loc);
  }

  std::string_view text_;
  Lexer lex_;
  Token tok_;
  GraphBuilder b_;
  const DimOverrides& overrides_;
  size_t axis_rank_ = 0;  // the rank of the operand whose axes are being parsed (messages)
  std::string graph_name_;
  std::unordered_map<std::string, Binding> scope_;
  std::unordered_map<std::string, uint32_t> output_lines_;
};

}  // namespace

Graph parse_graph(std::string_view text, const std::string& file, const DimOverrides& dim_overrides) {
  // A UTF-8 byte-order mark (some editors write one) is not part of the text. Columns on the
  // first line then count from after it.
  text = without_bom(text);
  Parser p(text, file, dim_overrides);
  return p.run();
}

std::string not_regular_file(unsigned mode) {
  if (S_ISDIR(mode)) return "it is a directory";
  if (S_ISFIFO(mode)) return "it is a FIFO (named pipe), not a regular file";
  if (S_ISCHR(mode)) return "it is a character device (like /dev/zero), not a regular file";
  if (S_ISBLK(mode)) return "it is a block device, not a regular file";
  if (S_ISSOCK(mode)) return "it is a socket, not a regular file";
  return "it is not a regular file";
}

namespace {

// `size` is the file's size, or 0 when only "more than the limit" is known.
std::string too_large(const std::string& path, uint64_t size, const FileKind& kind) {
  return fmt::format("{} '{}' has {} bytes; fusejit reads {} of at most {} MiB", kind.what, path,
                     size ? std::to_string(size) : "more than " + std::to_string(kind.max_bytes), kind.plural,
                     kind.max_bytes >> 20);
}

// The error for an opened file before reading it ("" if none): not a regular file, or too large.
std::string open_problem(int fd, const std::string& path, const FileKind& kind, struct stat& st) {
  if (::fstat(fd, &st) != 0)
    return fmt::format("cannot read {} '{}': cannot inspect it: {}", kind.what, path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fmt::format("cannot read {} '{}': {}", kind.what, path, not_regular_file(st.st_mode));
  if (static_cast<uint64_t>(st.st_size) > kind.max_bytes) return too_large(path, static_cast<uint64_t>(st.st_size), kind);
  return "";
}
}  // namespace

std::string_view without_bom(std::string_view text) {
  return text.starts_with("\xEF\xBB\xBF") ? text.substr(3) : text;
}

std::string read_text_file(const std::string& path) {
  return read_checked_file(path, {"graph file", "graph files", kMaxGraphFileBytes});
}

void check_path(std::string_view path, std::string_view what) {
  if (path.find('\0') == std::string_view::npos) return;
  std::string shown;
  for (char c : path) shown += c ? std::string(1, c) : "\\0";
  throw UserError(fmt::format("{} '{}' holds a NUL byte (\\0), which no file name can", what, shown));
}

std::string read_checked_file(const std::string& path, const FileKind& kind) {
  check_path(path, kind.what);
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below, never read).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    struct stat st;  // a socket cannot be opened at all: say what it is
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw UserError(fmt::format("cannot read {} '{}': {}", kind.what, path, not_regular_file(st.st_mode)));
    throw UserError(fmt::format("cannot open {} '{}': {}", kind.what, path, std::strerror(err)));
  }
  struct stat st;
  if (const std::string problem = open_problem(fd, path, kind, st); !problem.empty()) {
    ::close(fd);
    throw UserError(problem);
  }
  // Read at most one byte past the limit: the file may have grown since fstat.
  std::string text(static_cast<size_t>(st.st_size) + 1, '\0');
  size_t done = 0;
  for (;;) {
    if (done == text.size()) {
      if (text.size() > kind.max_bytes) break;
      text.resize(std::min<size_t>(text.size() * 2, kind.max_bytes + 1));
    }
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw UserError(fmt::format("cannot read {} '{}': {}", kind.what, path, std::strerror(err)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (done > kind.max_bytes) throw UserError(too_large(path, 0, kind));
  text.resize(done);
  return text;
}

std::string replace_file(const std::string& path, std::initializer_list<std::string_view> pieces, unsigned mode) {
  static std::atomic<unsigned> counter{0};
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string tail = fmt::format(".{}.{}.tmp", ::getpid(), counter++);
  const std::string name = path.substr(dir.size());
  const std::string tmp = dir + (name.size() + tail.size() + 1 <= NAME_MAX ? "." + name : std::string(".fj")) + tail;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  bool ok = fd >= 0;
  for (std::string_view bytes : pieces)
    for (size_t done = 0; ok && done < bytes.size();) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      ok = n > 0;
      done += ok ? static_cast<size_t>(n) : 0;
    }
  const int err = errno;
  if (fd >= 0) ok = (::close(fd) == 0) && ok;
  if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) return "";
  const std::string why = std::strerror(ok ? errno : err);
  ::unlink(tmp.c_str());
  return why;
}

std::string make_folders(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec, ignored;
  fs::create_directories(path, ec);
  if (!ec) return "";
  // The first piece of the path that cannot be a folder ("a/link/b/", a dangling link "link").
  fs::path prefix;
  for (const fs::path& piece : fs::path(path)) {
    if (piece.empty()) continue;  // the empty last piece of "a/b/"
    prefix /= piece;
    const fs::file_status link = fs::symlink_status(prefix, ignored), target = fs::status(prefix, ignored);
    const std::string named = prefix == fs::path(path) || prefix / "" == fs::path(path) ? "" : "'" + prefix.string() + "' is ";
    if (fs::is_symlink(link) && !fs::exists(target))
      return fmt::format("{}a symbolic link to '{}', which does not exist", named,
                         fs::read_symlink(prefix, ignored).string());
    if (fs::exists(target) && !fs::is_directory(target)) return named + "a file, not a folder";
  }
  return ec.message();
}

Graph parse_graph_file(const std::string& path, const DimOverrides& dim_overrides) {
  std::string text = read_text_file(path);
  return parse_graph(text, path, dim_overrides);
}

}  // namespace fusejit::ir
