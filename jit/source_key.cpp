// Location comments of generated source; see jit/source_key.h.
#include "jit/source_key.h"

#include <algorithm>

#include "ir/error.h"

namespace fusejit::jit {

namespace {
constexpr std::string_view kOpen = "  [";

bool is_marker_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x20 && u != 0x7f && c != '[' && c != ']';
}

// Length of the location marker that ends `line` (0 when there is none).
size_t marker_length(std::string_view line) {
  if (line.size() < kOpen.size() + 4 || line.back() != ']') return 0;
  const size_t open = line.rfind(kOpen);
  if (open == std::string_view::npos) return 0;
  const size_t comment = line.find("//");
  if (comment == std::string_view::npos || comment > open) return 0;
  std::string_view inner = line.substr(open + kOpen.size(), line.size() - open - kOpen.size() - 1);  // NAME:DIGITS
  const size_t colon = inner.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == inner.size()) return 0;
  std::string_view digits = inner.substr(colon + 1);
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return 0;
  if (!std::all_of(inner.begin(), inner.end(), is_marker_char)) return 0;
  return line.size() - open;
}
}  // namespace

std::string location_comment(std::string_view file, uint32_t line) {
  std::string out(kOpen);
  // Bytes that are not UTF-8 as "\xNN": the source is text a Python str, JSON or an editor takes.
  for (char c : ir::escape_invalid_utf8(file)) out += is_marker_char(c) ? c : '?';
  out += ':';
  out += std::to_string(line);
  out += ']';
  return out;
}

std::string without_location_comments(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  while (!source.empty()) {
    const size_t nl = source.find('\n');
    std::string_view line = source.substr(0, nl);
    out.append(line.substr(0, line.size() - marker_length(line)));
    if (nl == std::string_view::npos) break;
    out += '\n';
    source.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace fusejit::jit
