// Lexer for the graph text format (docs/graph-format.md): turns source text into tokens with
// 1-based line/column locations. Statements are line based, so a newline is a token.
#pragma once

#include <cstdint>
#include <string_view>

#include "ir/error.h"

namespace fusejit::ir {

enum class Tok : uint8_t {
  Ident,    // [A-Za-z_][A-Za-z0-9_]*  (keywords and `inf`, `nan`, `true`, `false` included)
  Temp,     // %<digits>: an anonymous value (a printed temporary; binds no node name)
  Int,      // decimal digits; value in Token::u (may exceed INT64_MAX by one for `-9223372036854775808`)
  Float,    // 0.5, 1e-3, 2., .5; value in Token::f
  Plus, Minus, Star, Slash, LParen, RParen, LBracket, RBracket, Comma, Colon, Assign,
  Eq, Ne, Lt, Le, Gt, Ge,
  Amp, Pipe, Caret, Tilde, Shl, Shr,  // & | ^ ~ << >> (bitwise_and/or/xor/not, left/right_shift)
  Power, FloorDiv, Percent,           // ** // % (Python's pow, floordiv, mod); `%` then a digit is a Temp
  Newline,  // end of a line (comments are skipped up to it)
  Eof,
};

// Human-readable token kind for messages ("')'", "end of line", "a name").
std::string_view tok_description(Tok t);

struct Token {
  Tok kind = Tok::Eof;
  std::string_view text;  // view into the source (empty for Newline/Eof)
  Loc loc;
  uint64_t u = 0;         // Int: the value (<= 2^63, or UINT64_MAX when too_big)
  bool too_big = false;   // Int above 2^63: the parser reports it where it knows the sign and use
  double f = 0.0;         // Float: the value (exactly rounded by std::from_chars)
};

// Checks the whole text is UTF-8 without NUL or other control bytes (tab, CR and LF allowed);
// throws UserError at the first offending byte ("binary garbage" is rejected up front).
void check_text(std::string_view text);

// On-demand tokenizer. Throws UserError (with the location) on an unexpected character or a
// malformed number; an integer literal above 2^63 comes back marked too_big. Columns count bytes,
// starting at 1.
class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}
  Token next();
  // Byte offset of the next unread character (used to scan ahead for error messages).
  size_t offset() const { return pos_; }

 private:
  Loc here() const { return {line_, static_cast<uint32_t>(pos_ - line_start_ + 1)}; }
  // The pieces of next(): each scans one token kind starting at pos_ (t carries its location).
  void skip_blanks();
  Token identifier(Token t);
  Token number(Token t);
  static uint64_t int_value(Token& t);
  static double float_value(const Token& t);
  Token temporary(Token t);
  [[noreturn]] void bad_temporary(size_t start, Loc loc) const;
  Token punctuation(Token t);
  [[noreturn]] void unexpected(char c, size_t at, Loc loc) const;
  std::string_view text_;
  size_t pos_ = 0;
  size_t line_start_ = 0;
  uint32_t line_ = 1;
};

}  // namespace fusejit::ir
