#include "ir/diagnostic.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include <fmt/format.h>

namespace fusejit::ir {
namespace {

constexpr size_t kMaxShown = 160;  // longest source excerpt shown, in bytes
constexpr size_t kContext = 70;    // bytes kept on each side of the column when cutting

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

bool acts_on_terminal(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
}

// Columns a terminal gives code point `cp`: 0 for combining marks of the common scripts,
// joiners, variation selectors and format characters, 2 for East Asian wide and fullwidth
// characters and emoji (Unicode UAX #11 and Emoji_Presentation; the ranges of Markus Kuhn's
// wcwidth.c widened to the emoji blocks and the BMP's wide emoji), else 1. An approximation of
// a terminal's wcwidth, for placing a caret.
int display_width(char32_t cp) {
  static constexpr std::pair<char32_t, char32_t> kZero[] = {
      {0x0300, 0x036F}, {0x0483, 0x0489}, {0x0591, 0x05BD}, {0x05BF, 0x05C7}, {0x0610, 0x061A},
      {0x064B, 0x065F}, {0x0670, 0x0670}, {0x06D6, 0x06ED}, {0x0900, 0x0902}, {0x093A, 0x093C},
      {0x0941, 0x0948}, {0x094D, 0x094D}, {0x0951, 0x0957}, {0x0962, 0x0963}, {0x0E31, 0x0E31},
      {0x0E34, 0x0E3A}, {0x0E47, 0x0E4E}, {0x1160, 0x11FF}, {0x1AB0, 0x1AFF}, {0x1DC0, 0x1DFF},
      {0x200B, 0x200F}, {0x2060, 0x2064}, {0x20D0, 0x20FF}, {0xFE00, 0xFE0F}, {0xFE20, 0xFE2F},
      {0xFEFF, 0xFEFF}, {0xE0100, 0xE01EF}};
  static constexpr std::pair<char32_t, char32_t> kWide[] = {
      {0x1100, 0x115F}, {0x231A, 0x231B}, {0x23E9, 0x23EC}, {0x23F0, 0x23F0}, {0x23F3, 0x23F3},
      {0x25FD, 0x25FE}, {0x2614, 0x2615}, {0x2648, 0x2653}, {0x267F, 0x267F}, {0x2693, 0x2693},
      {0x26A1, 0x26A1}, {0x26AA, 0x26AB}, {0x26BD, 0x26BE}, {0x26C4, 0x26C5}, {0x26CE, 0x26CE},
      {0x26D4, 0x26D4}, {0x26EA, 0x26EA}, {0x26F2, 0x26F3}, {0x26F5, 0x26F5}, {0x26FA, 0x26FA},
      {0x26FD, 0x26FD}, {0x2705, 0x2705}, {0x270A, 0x270B}, {0x2728, 0x2728}, {0x274C, 0x274C},
      {0x274E, 0x274E}, {0x2753, 0x2755}, {0x2757, 0x2757}, {0x2795, 0x2797}, {0x27B0, 0x27B0},
      {0x27BF, 0x27BF}, {0x2B1B, 0x2B1C}, {0x2B50, 0x2B50}, {0x2B55, 0x2B55}, {0x2E80, 0x303E},
      {0x3041, 0x33FF}, {0x3400, 0x4DBF}, {0x4E00, 0x9FFF}, {0xA000, 0xA4CF}, {0xAC00, 0xD7A3},
      {0xF900, 0xFAFF}, {0xFE10, 0xFE19}, {0xFE30, 0xFE6F}, {0xFF00, 0xFF60}, {0xFFE0, 0xFFE6},
      {0x1F300, 0x1F64F}, {0x1F680, 0x1F6FF}, {0x1F900, 0x1F9FF}, {0x1FA70, 0x1FAFF}, {0x20000, 0x2FFFD},
      {0x30000, 0x3FFFD}};
  const auto in = [cp](const auto& ranges) {
    return std::any_of(std::begin(ranges), std::end(ranges), [cp](auto r) { return cp >= r.first && cp <= r.second; });
  };
  return in(kZero) ? 0 : in(kWide) ? 2 : 1;
}

// Replaces bytes that would garble a terminal with '?' (one byte each, so columns stay put).
// Multi-byte UTF-8 is kept only when the whole line is well formed.
std::string sanitize(std::string_view line, bool* ok_utf8) {
  std::string out = terminal_safe(line);
  *ok_utf8 = true;
  for (size_t i = 0; i < out.size();) {
    const size_t n = utf8_len(out, i);  // RFC 3629's: a surrogate or a code point past U+10FFFF is none
    if (n == 0) *ok_utf8 = false;
    i += n ? n : 1;
  }
  if (!*ok_utf8)
    for (char& ch : out)
      if (static_cast<unsigned char>(ch) >= 0x80) ch = '?';
  return out;
}

// Line `number` (1-based) of `src` without its line end; empty when there is none.
std::string_view source_line(std::string_view src, uint32_t number) {
  size_t start = 0;
  for (uint32_t l = 1; l < number; ++l) {
    const size_t nl = src.find('\n', start);
    if (nl == std::string_view::npos) return {};
    start = nl + 1;
  }
  size_t end = src.find('\n', start);
  if (end == std::string_view::npos) end = src.size();
  std::string_view line = src.substr(start, end - start);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// The caret's indent under byte `col` of `shown` (well-formed UTF-8: sanitize) from byte `from`:
// a space per column a terminal gives each character, tabs kept so the caret lines up.
std::string caret_indent(std::string_view shown, size_t from, size_t col) {
  std::string pad;
  for (size_t i = from; i < col && i < shown.size();) {
    char32_t cp = 0;
    const size_t n = std::max<size_t>(1, utf8_decode(shown, i, &cp));
    if (shown[i] == '\t') pad += '\t';
    else pad.append(static_cast<size_t>(display_width(cp)), ' ');
    i += n;
  }
  return pad;
}

// The line as shown (sanitised; a long one cut to kContext characters either side of the
// column, never inside a UTF-8 sequence, "..." where cut) and a caret under byte `col`.
std::string excerpt_with_caret(std::string_view line, size_t col) {
  if (col > line.size()) col = line.size();
  bool utf8 = true;
  std::string shown = sanitize(line, &utf8);
  std::string prefix, suffix;
  size_t from = 0, to = shown.size();
  if (shown.size() > kMaxShown) {
    from = col > kContext ? col - kContext : 0;
    to = std::min(shown.size(), from + 2 * kContext);
    if (to - from < 2 * kContext && to == shown.size()) from = to > 2 * kContext ? to - 2 * kContext : 0;
    while (from > 0 && continuation(static_cast<unsigned char>(shown[from]))) --from;
    while (to < shown.size() && continuation(static_cast<unsigned char>(shown[to]))) ++to;
    if (from > 0) prefix = "...";
    if (to < shown.size()) suffix = "...";
  }
  const std::string pad = std::string(prefix.size(), ' ') + caret_indent(shown, from, col);
  return "  " + prefix + shown.substr(from, to - from) + suffix + "\n  " + pad + "^\n";
}

}  // namespace

std::string terminal_safe(std::string_view text, bool keep_line_feeds) {
  std::string out(text);
  for (size_t i = 0; i < out.size();) {
    const unsigned char c = static_cast<unsigned char>(out[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t' && !(keep_line_feeds && c == '\n')) || c == 0x7F) out[i] = '?';
      ++i;
      continue;
    }
    char32_t cp = 0;
    size_t n = utf8_decode(out, i, &cp);
    if (n == 0) n = 1;  // not UTF-8: kept, for the caller to escape or replace
    else if (acts_on_terminal(cp)) out.replace(i, n, n, '?');
    i += n;
  }
  return out;
}

// An undefined 100,000-byte name made a message line of 100,000 bytes while the excerpt below it
// was cut (hostile pass).
std::string shorten_quoted_names(std::string_view message) {
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    const size_t open = message.find('\'', i);
    const size_t close = open == std::string_view::npos ? open : message.find('\'', open + 1);
    if (close == std::string_view::npos) break;
    std::string_view word = message.substr(open + 1, close - open - 1);
    // A path ('/') is no name: a command to copy and run again keeps its paths whole.
    const bool cut = word.size() > kMaxShown && word.find_first_of(" \n/") == std::string_view::npos;
    out.append(message.substr(i, open + 1 - i));
    if (!cut) {
      out.append(word).push_back('\'');
    } else {
      size_t head = kContext / 2, tail = word.size() - kContext / 2;
      while (head > 0 && continuation(static_cast<unsigned char>(word[head]))) --head;
      while (tail < word.size() && continuation(static_cast<unsigned char>(word[tail]))) ++tail;
      out += fmt::format("{}...{}' ({} bytes)", word.substr(0, head), word.substr(tail), word.size());
    }
    i = close + 1;
  }
  out.append(message.substr(std::min(i, message.size())));
  return out;
}

std::string format_diagnostic(const UserError& err, const std::string& file, std::string_view src) {
  const Loc& loc = err.loc();
  std::string out = terminal_safe(file);  // a file name's ESC stays out of the terminal
  if (loc.known()) out += ':' + std::to_string(loc.line) + (loc.col ? ':' + std::to_string(loc.col) : "");
  out += out.empty() ? "error: " : ": error: ";
  out += terminal_safe(shorten_quoted_names(err.what()));
  out += "\n";
  if (!loc.known()) return out;
  const std::string_view line = source_line(src, loc.line);
  if (line.empty()) return out;  // nothing to point at (e.g. an empty file, a line past the end)
  std::string excerpt = excerpt_with_caret(line, loc.col == 0 ? 0 : loc.col - 1);
  if (loc.col == 0) excerpt.erase(excerpt.find('\n') + 1);  // a line without a column: no caret
  return out + excerpt;
}

}  // namespace fusejit::ir
