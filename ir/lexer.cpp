#include "ir/lexer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "ir/names.h"

namespace fusejit::ir {
namespace {

bool ident_start(char c) { return is_ident_start(c); }
bool ident_char(char c) { return is_ident_char(c); }
bool digit(char c) { return c >= '0' && c <= '9'; }

std::string hex_byte(unsigned char c) {
  static const char* d = "0123456789abcdef";
  return std::string("0x") + d[c >> 4] + d[c & 15];
}


}  // namespace

std::string_view tok_description(Tok t) {
  switch (t) {
    case Tok::Ident: return "a name";
    case Tok::Temp: return "a temporary";
    case Tok::Int: return "an integer";
    case Tok::Float: return "a number";
    case Tok::Plus: return "'+'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::Slash: return "'/'";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Assign: return "'='";
    case Tok::Eq: return "'=='";
    case Tok::Ne: return "'!='";
    case Tok::Lt: return "'<'";
    case Tok::Le: return "'<='";
    case Tok::Gt: return "'>'";
    case Tok::Ge: return "'>='";
    case Tok::Amp: return "'&'";
    case Tok::Pipe: return "'|'";
    case Tok::Caret: return "'^'";
    case Tok::Tilde: return "'~'";
    case Tok::Shl: return "'<<'";
    case Tok::Shr: return "'>>'";
    case Tok::Power: return "'**'";
    case Tok::FloorDiv: return "'//'";
    case Tok::Percent: return "'%'";
    case Tok::Newline: return "end of line";
    case Tok::Eof: return "end of file";
  }
  return "?";
}

void check_text(std::string_view text) {
  if (text.starts_with("\xFF\xFE") || text.starts_with("\xFE\xFF"))
    throw UserError("graph text in UTF-16 (the file starts with a UTF-16 byte-order mark): save it as UTF-8", Loc{1, 1});
  uint32_t line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    Loc loc{line, static_cast<uint32_t>(i - line_start + 1)};
    if (c == '\n') {
      ++line;
      line_start = ++i;
      continue;
    }
    if (c == 0) throw UserError("NUL byte in graph text (is this a binary file, or UTF-16 text?)", loc);
    if (c == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))  // LF and CRLF ends only (the last line's too)
      throw UserError("a line ends in CR alone (classic Mac OS line ends): graph text takes LF or CRLF; convert "
                      "the file (e.g. tr '\\r' '\\n')", loc);
    if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7F)
      throw UserError("control byte " + hex_byte(c) + " in graph text (is this a binary file?)", loc);
    size_t n = utf8_len(text, i);
    if (n == 0) throw UserError("invalid UTF-8 byte " + hex_byte(c) + " in graph text (is this a binary file?)", loc);
    i += n;
  }
}

void Lexer::skip_blanks() {
  // Blanks and comments (a comment runs to the end of the line).
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\r') ++pos_;
    else if (c == '#') { while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_; }
    else break;
  }
}

Token Lexer::next() {
  skip_blanks();
  Token t;
  t.loc = here();
  if (pos_ >= text_.size()) { t.kind = Tok::Eof; return t; }
  char c = text_[pos_];
  if (c == '\n') {
    t.kind = Tok::Newline;
    ++pos_;
    ++line_;
    line_start_ = pos_;
    return t;
  }
  if (ident_start(c)) return identifier(t);
  if (digit(c) || (c == '.' && pos_ + 1 < text_.size() && digit(text_[pos_ + 1]))) return number(t);
  // `%12` is a temporary; any other `%` is the remainder operator (so `x %2` is x then %2).
  if (c == '%' && pos_ + 1 < text_.size() && digit(text_[pos_ + 1])) return temporary(t);
  return punctuation(t);
}

Token Lexer::identifier(Token t) {
  size_t start = pos_;
  while (pos_ < text_.size() && ident_char(text_[pos_])) ++pos_;
  t.kind = Tok::Ident;
  t.text = text_.substr(start, pos_ - start);
  return t;
}

Token Lexer::number(Token t) {
  size_t start = pos_;
  bool is_float = false;
  while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
  if (pos_ < text_.size() && text_[pos_] == '.') {
    is_float = true;
    ++pos_;
    while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
  }
  if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
    size_t e = pos_ + 1;
    if (e < text_.size() && (text_[e] == '+' || text_[e] == '-')) ++e;
    if (e < text_.size() && digit(text_[e])) {
      is_float = true;
      pos_ = e;
      while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
    }
  }
  // Trailing name characters ("2x", "1e", "0x10") make the whole word a bad number.
  size_t end = pos_;
  while (end < text_.size() && (ident_char(text_[end]) || text_[end] == '.')) ++end;
  if (end != pos_) {
    std::string word(text_.substr(start, std::min<size_t>(end - start, 40)));
    throw UserError("invalid number '" + word + (end - start > 40 ? "...'" : "'"), t.loc);
  }
  t.text = text_.substr(start, pos_ - start);
  if (is_float) {
    t.kind = Tok::Float;
    t.f = float_value(t);
  } else {
    t.kind = Tok::Int;
    t.u = int_value(t);
  }
  return t;
}

// Decimal digits with an overflow check; 2^63 itself is allowed (only valid after unary minus).
// A larger value is marked, not thrown: only the parser knows whether a minus belongs to it.
uint64_t Lexer::int_value(Token& t) {
  uint64_t v = 0;
  for (char ch : t.text) {
    uint64_t d = static_cast<uint64_t>(ch - '0');
    if (v > (UINT64_C(9223372036854775808) - d) / 10) {
      t.too_big = true;
      return UINT64_MAX;  // past every range check of the parser's, which report the text
    }
    v = v * 10 + d;
  }
  return v;
}

// The f64 nearest to the literal (std::from_chars rounds exactly).
double Lexer::float_value(const Token& t) {
  std::string buf;
  if (t.text[0] == '.') buf.push_back('0');  // from_chars rejects a leading '.'
  buf.append(t.text);
  double f = 0.0;
  auto r = std::from_chars(buf.data(), buf.data() + buf.size(), f);
  const std::string number = "number " + std::string(t.text.substr(0, 40));
  if (r.ec == std::errc::result_out_of_range) {
    // A subnormal is fine (as in Python); 0 from a nonzero number is refused as a literal that
    // rounds to 0 in its dtype is (ops.md, "Typing"), and overflow too. strtod tells them apart by
    // the magnitude it returns (HUGE_VAL on overflow, 0 on underflow to zero).
    f = std::strtod(buf.c_str(), nullptr);
    if (f == 0)
      throw UserError(number + " is too small for f64 (it would round to 0; the smallest f64 above 0 is 5e-324): write "
                      "0.0 if zero is meant", t.loc);
  }
  if (std::isinf(f))
    throw UserError(number + " is too large for f64 (the largest finite f64 is 1.7976931348623157e308; infinity is "
                    "`inf`)", t.loc);
  if ((r.ec != std::errc() && r.ec != std::errc::result_out_of_range) || r.ptr != buf.data() + buf.size())
    throw UserError("invalid number '" + std::string(t.text.substr(0, 40)) + "'", t.loc);
  return f;
}

// `%` and digits run on into a name or a number (`%12a`, `%1.5`, `%2e3`): not a temporary. A
// number after the `%` was meant as a remainder by it, written without the space it needs.
void Lexer::bad_temporary(size_t start, Loc loc) const {
  size_t end = start + 1;
  bool number = true;
  while (end < text_.size() && (ident_char(text_[end]) || text_[end] == '.' ||
                                ((text_[end] == '+' || text_[end] == '-') && (text_[end - 1] == 'e' || text_[end - 1] == 'E')))) {
    const char c = text_[end];
    number = number && (digit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-');
    ++end;
  }
  const std::string run(text_.substr(start, std::min<size_t>(end - start, 40)));
  throw UserError("'" + run + "' is not a temporary ('%' and digits, such as %12)" +
                      (number ? "; a remainder needs a space after '%' (x % " + run.substr(1) + ")" : std::string()),
                  loc);
}

Token Lexer::temporary(Token t) {
  size_t start = pos_++;
  while (pos_ < text_.size() && digit(text_[pos_])) ++pos_;
  if (pos_ < text_.size() && (ident_char(text_[pos_]) || text_[pos_] == '.')) bad_temporary(start, t.loc);
  if (pos_ - start > 11) {
    // After an operand, `x %99` is a remainder; at a line's start it can only be a temporary.
    const size_t before = start == 0 ? std::string_view::npos : text_.find_last_not_of(" \t", start - 1);
    const bool starts_line = before == std::string_view::npos || text_[before] == '\n';
    throw UserError("temporary number too long (at most 10 digits)" +
                        (starts_line ? std::string()
                                     : "; a remainder by a literal needs a space after '%' (x % " +
                                           std::string(text_.substr(start + 1, std::min<size_t>(pos_ - start - 1, 40))) + ")"),
                    t.loc);
  }
  t.kind = Tok::Temp;
  t.text = text_.substr(start, pos_ - start);
  return t;
}

Token Lexer::punctuation(Token t) {
  size_t start = pos_;
  char c = text_[pos_++];
  auto two = [&](char n) {
    if (pos_ < text_.size() && text_[pos_] == n) { ++pos_; return true; }
    return false;
  };
  switch (c) {
    case '+': t.kind = Tok::Plus; break;
    case '-': t.kind = Tok::Minus; break;
    case '*': t.kind = two('*') ? Tok::Power : Tok::Star; break;
    case '/': t.kind = two('/') ? Tok::FloorDiv : Tok::Slash; break;
    case '%': t.kind = Tok::Percent; break;
    case '(': t.kind = Tok::LParen; break;
    case ')': t.kind = Tok::RParen; break;
    case '[': t.kind = Tok::LBracket; break;
    case ']': t.kind = Tok::RBracket; break;
    case ',': t.kind = Tok::Comma; break;
    case ':': t.kind = Tok::Colon; break;
    case '=': t.kind = two('=') ? Tok::Eq : Tok::Assign; break;
    case '<': t.kind = two('=') ? Tok::Le : two('<') ? Tok::Shl : Tok::Lt; break;
    case '>': t.kind = two('=') ? Tok::Ge : two('>') ? Tok::Shr : Tok::Gt; break;
    case '&': t.kind = Tok::Amp; break;
    case '|': t.kind = Tok::Pipe; break;
    case '^': t.kind = Tok::Caret; break;
    case '~': t.kind = Tok::Tilde; break;
    case '!':
      if (two('=')) { t.kind = Tok::Ne; break; }
      throw UserError("unexpected character '!' (use logical_not(x) or '!=')", t.loc);
    default: unexpected(c, start, t.loc);
  }
  t.text = text_.substr(start, pos_ - start);
  return t;
}

void Lexer::unexpected(char c, size_t at, Loc loc) const {
  unsigned char uc = static_cast<unsigned char>(c);
  if (uc >= 0x80) {
    char32_t cp = 0;
    size_t n = utf8_decode(text_, at, &cp);
    if (n == 0) throw UserError("invalid UTF-8 byte " + hex_byte(uc) + " in graph text", loc);
    // Its code point too: a second BOM, a zero-width space or a combining accent shows as nothing.
    char code[16];
    std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(cp));
    throw UserError("unexpected character '" + std::string(text_.substr(at, n)) + "' (" + code +
                        "): graph text is ASCII outside comments (names: letters a-z A-Z, digits, '_')", loc);
  }
  if (uc < 0x20 || uc == 0x7F) throw UserError("unexpected control byte " + hex_byte(uc), loc);
  // What PyTorch or NumPy code would have here.
  const char* hint = c == '.'   ? ": graph text has no methods or attributes (write sum(x, 0), not x.sum(0))"
                     : c == '@' ? ": fusejit has no matrix product (it fuses elementwise ops and reductions)"
                                : "";
  throw UserError(std::string("unexpected character '") + c + "'" + hint, loc);
}

}  // namespace fusejit::ir
