#include "ir/diagnostic.h"

namespace fusejit::ir {
namespace {

constexpr size_t kMaxShown = 160;  // longest source excerpt shown, in bytes
constexpr size_t kContext = 70;    // bytes kept on each side of the column when cutting

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Replaces bytes that would garble a terminal with '?' (one byte each, so columns stay put).
// Multi-byte UTF-8 is kept only when the whole line is well formed.
std::string sanitize(std::string_view line, bool* ok_utf8) {
  std::string out(line);
  *ok_utf8 = true;
  for (size_t i = 0; i < out.size();) {
    unsigned char c = static_cast<unsigned char>(out[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t') || c == 0x7F) out[i] = '?';
      ++i;
      continue;
    }
    size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    bool good = n != 0 && i + n <= out.size();
    for (size_t k = 1; good && k < n; ++k) good = continuation(static_cast<unsigned char>(out[i + k]));
    if (!good) {
      *ok_utf8 = false;
      out[i] = '?';
      ++i;
    } else {
      i += n;
    }
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
  // Caret padding: one space per character (tabs kept so the caret lines up).
  std::string pad(prefix.size(), ' ');
  for (size_t i = from; i < col && i < shown.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(shown[i]);
    if (continuation(c)) continue;
    pad += c == '\t' ? '\t' : ' ';
  }
  return "  " + prefix + shown.substr(from, to - from) + suffix + "\n  " + pad + "^\n";
}

}  // namespace

std::string format_diagnostic(const UserError& err, const std::string& file, std::string_view src) {
  const Loc& loc = err.loc();
  std::string out = file;
  if (loc.known()) out += ':' + std::to_string(loc.line) + ':' + std::to_string(loc.col);
  out += out.empty() ? "error: " : ": error: ";
  out += err.what();
  out += "\n";
  if (!loc.known()) return out;
  const std::string_view line = source_line(src, loc.line);
  if (line.empty()) return out;  // nothing to point at (e.g. an empty file, a line past the end)
  return out + excerpt_with_caret(line, loc.col == 0 ? 0 : loc.col - 1);
}

}  // namespace fusejit::ir
