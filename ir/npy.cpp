// .npy reader/writer. The header is a Python dict literal; only the subset NumPy writes is parsed
// ({'descr': STR, 'fortran_order': BOOL, 'shape': TUPLE}), with every length checked before use,
// so hostile files give an error, not a crash or a huge allocation.
#include "ir/npy.h"

#include "ir/scalar/fj_scalar.h"

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>

namespace fusejit::ir {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr uint32_t kMaxHeader = 1u << 20;

[[noreturn]] void fail(const std::string& path, const std::string& msg) {
  throw UserError(path + ": " + msg);
}

std::string descr_of(DType t, Bf16Npy bf16) {
  switch (t) {
    case DType::Bool: return "|b1";
    case DType::I8: return "|i1";
    case DType::U8: return "|u1";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::F16: return "<f2";
    case DType::BF16: return bf16 == Bf16Npy::Bits ? "<u2" : bf16 == Bf16Npy::F32 ? "<f4" : "bfloat16";
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
  }
  return "?";
}

// Maps a descr to a dtype; nullopt with `why` set when unsupported.
std::optional<DType> dtype_of(const std::string& d, std::optional<DType> expect, std::string* why) {
  if (d == "bfloat16" || d == "<V2bfloat16") return DType::BF16;
  if (d.size() < 3) { *why = "unsupported dtype '" + d + "'"; return std::nullopt; }
  char order = d[0];
  std::string kind = d.substr(1);
  bool one_byte = kind == "b1" || kind == "i1" || kind == "u1";
  if (order == '>' && !one_byte) { *why = "big-endian data ('" + d + "') is not supported; save it with .astype('<" + kind + "')"; return std::nullopt; }
  if (order != '<' && order != '|' && order != '=' && !(order == '>' && one_byte)) {
    *why = "unsupported dtype '" + d + "'";
    return std::nullopt;
  }
  if (order == '|' && !one_byte) { *why = "unsupported dtype '" + d + "'"; return std::nullopt; }
  if (kind == "b1") return DType::Bool;
  if (kind == "i1") return DType::I8;
  if (kind == "u1") return DType::U8;
  if (kind == "i4") return DType::I32;
  if (kind == "i8") return DType::I64;
  if (kind == "f2") return DType::F16;
  if (kind == "f4") return DType::F32;
  if (kind == "f8") return DType::F64;
  if (kind == "u2" && expect == DType::BF16) return DType::BF16;  // raw bf16 bits (Bf16Npy::Bits)
  *why = "unsupported dtype '" + d + "' (fusejit supports bool, i8, u8, i32, i64, f16, f32, f64, and bf16 as '<u2' bits)";
  return std::nullopt;
}

struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

// Parser of the header dict. Positions are checked against the end at every step.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& path) : s_(text), path_(path) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    ws();
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') { ++i_; break; }
      std::string key = str();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        if (have_descr) bad("duplicate key 'descr'");
        if (peek() == '[') bad("structured dtypes are not supported");
        h.descr = str();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_fortran) bad("duplicate key 'fortran_order'");
        h.fortran = boolean();
        have_fortran = true;
      } else if (key == "shape") {
        if (have_shape) bad("duplicate key 'shape'");
        h.shape = tuple();
        have_shape = true;
      } else {
        bad("unexpected key '" + key + "'");
      }
      ws();
      if (peek() == ',') { ++i_; continue; }
      if (peek() == '}') { ++i_; break; }
      bad("expected ',' or '}'");
    }
    ws();
    if (i_ != s_.size()) bad("unexpected text after the header dict");
    if (!have_descr || !have_fortran || !have_shape) bad("the header must have 'descr', 'fortran_order' and 'shape'");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& m) {
    fail(path_, "malformed .npy header (" + m + " at byte " + std::to_string(i_) + ")");
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() { while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_; }
  void expect(char c) {
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  std::string str() {
    char q = peek();
    if (q != '\'' && q != '"') bad("expected a string");
    ++i_;
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') bad("escapes are not supported");
      out += s_[i_++];
      if (out.size() > 64) bad("string too long");
    }
    if (i_ >= s_.size()) bad("unterminated string");
    ++i_;
    return out;
  }
  bool boolean() {
    if (s_.compare(i_, 4, "True") == 0) { i_ += 4; return true; }
    if (s_.compare(i_, 5, "False") == 0) { i_ += 5; return false; }
    bad("expected True or False");
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> out;
    while (true) {
      ws();
      if (peek() == ')') { ++i_; break; }
      if (peek() < '0' || peek() > '9') bad(peek() == '-' ? "negative dimension" : "expected a dimension");
      uint64_t v = 0;
      while (peek() >= '0' && peek() <= '9') {
        v = v * 10 + static_cast<uint64_t>(peek() - '0');
        if (v > static_cast<uint64_t>(INT64_MAX / 10)) bad("dimension too large");
        ++i_;
      }
      if (peek() == 'L') ++i_;  // Python 2 long suffix
      out.push_back(static_cast<int64_t>(v));
      if (out.size() > 64) bad("too many dimensions");
      ws();
      if (peek() == ',') { ++i_; continue; }
      if (peek() == ')') { ++i_; break; }
      bad("expected ',' or ')' in the shape");
    }
    return out;
  }

  const std::string& s_;
  const std::string& path_;
  size_t i_ = 0;
};

uint32_t le(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

}  // namespace

void write_npy(const std::string& path, const Tensor& t, Bf16Npy bf16) {
  // NumPy writes "(3,)" and "(3, 4)": a space after inner commas.
  std::string shape = "(";
  for (size_t k = 0; k < t.shape.size(); ++k) {
    if (k) shape += ", ";
    shape += std::to_string(t.shape[k]);
  }
  if (t.shape.size() == 1) shape += ",";
  shape += ")";
  std::string dict = "{'descr': '" + descr_of(t.dtype, bf16) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and a final newline so the data starts at a multiple of 64 bytes.
  bool v2 = dict.size() + 1 + 10 > 65535;
  size_t pre = v2 ? 12 : 10;
  size_t total = pre + dict.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  std::string header = dict + std::string(pad, ' ') + "\n";
  std::string out(kMagic, 6);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  uint32_t hl = static_cast<uint32_t>(header.size());
  for (size_t k = 0; k < (v2 ? 4u : 2u); ++k) out += static_cast<char>((hl >> (8 * k)) & 0xff);
  out += header;

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(path, std::string("cannot create file: ") + std::strerror(errno));
  f.write(out.data(), static_cast<std::streamsize>(out.size()));
  if (t.dtype == DType::BF16 && bf16 == Bf16Npy::F32) {
    std::vector<float> wide(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<float>(t.get(static_cast<int64_t>(i)).f);
    f.write(reinterpret_cast<const char*>(wide.data()), static_cast<std::streamsize>(wide.size() * 4));
  } else if (t.dtype == DType::Bool) {
    // NumPy bools are bytes 0/1; normalise any other byte.
    std::vector<char> b(t.data.size());
    for (size_t i = 0; i < b.size(); ++i) b[i] = t.data[i] != std::byte{0};
    f.write(b.data(), static_cast<std::streamsize>(b.size()));
  } else {
    f.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  }
  f.flush();
  if (!f) fail(path, std::string("write failed: ") + std::strerror(errno));
}

Tensor read_npy(const std::string& path, std::optional<DType> expect) {
  {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))  // a folder, FIFO or device would hang or mislead
      fail(path, std::filesystem::exists(path, ec) ? "cannot open file: not a regular file" : "cannot open file: no such file");
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, std::string("cannot open file: ") + std::strerror(errno));
  f.seekg(0, std::ios::end);
  std::streamoff size = f.tellg();
  f.seekg(0, std::ios::beg);
  if (size < 0) fail(path, "cannot determine the file size");
  unsigned char pre[12] = {};
  if (size < 10) fail(path, "not a .npy file (too short)");
  f.read(reinterpret_cast<char*>(pre), 10);
  if (!f || std::memcmp(pre, kMagic, 6) != 0) fail(path, "not a .npy file (bad magic)");
  int major = pre[6], minor = pre[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(path, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor));
  size_t pre_len = major == 1 ? 10 : 12;
  uint32_t hlen;
  if (major == 1) {
    hlen = le(pre + 8, 2);
  } else {
    if (size < 12) fail(path, "truncated .npy header");
    f.read(reinterpret_cast<char*>(pre + 10), 2);
    hlen = le(pre + 8, 4);
  }
  if (hlen > kMaxHeader) fail(path, "malformed .npy header (header length " + std::to_string(hlen) + " is over 1 MiB)");
  if (static_cast<uint64_t>(size) < pre_len + hlen)
    fail(path, "truncated .npy header (header length " + std::to_string(hlen) + " is beyond the end of the file)");
  std::string text(hlen, '\0');
  f.read(text.data(), hlen);
  if (!f) fail(path, "cannot read the .npy header");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) text.pop_back();
  Header h = HeaderParser(text, path).parse();
  if (h.fortran) fail(path, "fortran_order arrays are not supported; save it with np.ascontiguousarray(x)");
  std::string why;
  std::optional<DType> dt = dtype_of(h.descr, expect, &why);
  if (!dt) fail(path, why);
  int64_t n = checked_numel(h.shape), bytes = 0;
  if (n < 0 || __builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(*dt)), &bytes))
    fail(path, "shape " + tensor_type_string(*dt, h.shape) + " is too large");
  uint64_t have = static_cast<uint64_t>(size) - pre_len - hlen;
  if (have < static_cast<uint64_t>(bytes))
    fail(path, "truncated data: " + tensor_type_string(*dt, h.shape) + " needs " + std::to_string(bytes) +
                   " bytes, the file has " + std::to_string(have));
  if (have > static_cast<uint64_t>(bytes))
    fail(path, "has " + std::to_string(have - static_cast<uint64_t>(bytes)) + " bytes after the data of " +
                   tensor_type_string(*dt, h.shape));
  Tensor t(*dt, h.shape);  // the size is now bounded by the file's size
  f.read(reinterpret_cast<char*>(t.data.data()), static_cast<std::streamsize>(bytes));
  if (!f) fail(path, "cannot read the data");
  return t;
}

namespace {
std::string fmt_g17(float v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", static_cast<double>(v));
  return b;
}
}  // namespace

Tensor read_npy_input(const std::string& path, const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                      const std::string& shape_hint) {
  Tensor t = read_npy(path, dtype);
  if (dtype == DType::BF16 && t.dtype == DType::F32 && t.shape == shape) {
    // The exact-widening convention (Bf16Npy::F32): narrow back, refusing any value that would round.
    Tensor b(DType::BF16, t.shape);
    const float* src = t.as<float>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      fj_bf16 h = fj_store_bf16(src[i]);
      float back = fj_load(h);
      if (std::memcmp(&back, &src[i], 4) != 0 && !(back != back && src[i] != src[i]))
        throw UserError("input '" + name + "': " + path + " has f32 values that are not exactly representable in bf16 (element " +
                        std::to_string(i) + " = " + fmt_g17(src[i]) + "); expected bf16 (or f32 holding bf16 values)");
      b.as<fj_bf16>()[i] = h;
    }
    return b;
  }
  const bool same_dtype = t.dtype == dtype || (dtype == DType::BF16 && t.dtype == DType::F32);
  if (t.dtype != dtype || t.shape != shape)
    throw UserError("input '" + name + "': " + path + " has " + tensor_type_string(t.dtype, t.shape) + ", expected " +
                    tensor_type_string(dtype, shape) + (same_dtype && !shape_hint.empty() ? " " + shape_hint : ""));
  if (t.dtype == DType::Bool)  // NumPy reads any nonzero byte as True: store it as 1, as every path expects
    for (std::byte& b : t.data) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
  return t;
}

}  // namespace fusejit::ir
