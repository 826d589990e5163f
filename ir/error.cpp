#include "ir/error.h"

namespace fusejit::ir {

size_t utf8_len(std::string_view s, size_t i) {
  char32_t cp = 0;
  return utf8_decode(s, i, &cp);
}

size_t utf8_decode(std::string_view s, size_t i, char32_t* out) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  if (c < 0x80) {
    *out = c;
    return 1;
  }
  size_t n;
  uint32_t cp;
  if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  *out = cp;
  return n;
}

std::string escape_invalid_utf8(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c == 0 ? 0 : utf8_len(s, i);
    if (n == 0) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

void internal_error(const char* file, int line, const std::string& message) {
  throw InternalError("internal error at " + std::string(file) + ":" + std::to_string(line) + ": " + message);
}
}  // namespace fusejit::ir
