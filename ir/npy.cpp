// .npy reader/writer. The header is a Python dict literal; only the subset NumPy writes is parsed
// ({'descr': STR, 'fortran_order': BOOL, 'shape': TUPLE}), with every length checked before use,
// so hostile files give an error, not a crash or a huge allocation.
#include "ir/npy.h"

#include "ir/names.h"
#include "ir/parser.h"
#include "ir/scalar/fj_scalar.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdio>

#include <fmt/format.h>

namespace fusejit::ir {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr uint32_t kMaxHeader = 1u << 20;

// Every .npy problem names the .npy file (not the graph file being run).
[[noreturn]] void fail(const std::string& path, const std::string& msg) { throw FileError(msg, path); }

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

// What every unsupported dtype's message says after its name.
constexpr const char* kSupportedDtypes =
    " (fusejit supports bool, i8, u8, i32, i64, f16, f32, f64, and for a bf16 input 'bfloat16', ml_dtypes' '<V2', "
    "'<u2' bits or exactly representable '<f4')";

// Maps a descr to a dtype; nullopt with `why` set when unsupported.
std::optional<DType> dtype_of(const std::string& d, std::optional<DType> expect, std::string* why) {
  if (d == "bfloat16" || d == "<V2bfloat16") return DType::BF16;
  // np.save of an ml_dtypes bfloat16 array (the Python package's bf16) writes 2-byte void records.
  if ((d == "<V2" || d == "|V2") && expect == DType::BF16) return DType::BF16;
  const char order = d.empty() ? '?' : d[0];
  const std::string kind = d.empty() ? "" : d.substr(1);
  const bool one_byte = kind == "b1" || kind == "i1" || kind == "u1";
  if (order == '>' && !one_byte && d.size() >= 3) {
    *why = "big-endian data ('" + d + "') is not supported; save it with .astype('<" + kind + "')";
    return std::nullopt;
  }
  *why = "unsupported dtype " + quoted(d) + kSupportedDtypes;
  const bool order_ok = order == '<' || order == '=' || ((order == '|' || order == '>') && one_byte);
  if (!order_ok) return std::nullopt;
  if (kind == "b1") return DType::Bool;
  if (kind == "i1") return DType::I8;
  if (kind == "u1") return DType::U8;
  if (kind == "i4") return DType::I32;
  if (kind == "i8") return DType::I64;
  if (kind == "f2") return DType::F16;
  if (kind == "f4") return DType::F32;
  if (kind == "f8") return DType::F64;
  if (kind == "u2" && expect == DType::BF16) return DType::BF16;  // raw bf16 bits (Bf16Npy::Bits)
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
  // `base`: where the text starts in the file, so an error's byte is the file's.
  HeaderParser(const std::string& text, const std::string& path, uint64_t base) : s_(text), path_(path), base_(base) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    ws();
    expect('{');
    while (true) {
      ws();
      if (peek() == '}') { ++i_; break; }
      const size_t key_at = i_;  // a key's errors point at the key, not past its colon
      std::string key = str();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        if (have_descr) bad("duplicate key 'descr'", key_at);
        if (peek() == '[')  // a well-formed header, but no dtype fusejit has
          fail(path_, std::string("unsupported dtype: a structured dtype (a list as 'descr')") + kSupportedDtypes);
        h.descr = str();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_fortran) bad("duplicate key 'fortran_order'", key_at);
        h.fortran = boolean();
        have_fortran = true;
      } else if (key == "shape") {
        if (have_shape) bad("duplicate key 'shape'", key_at);
        h.shape = tuple();
        have_shape = true;
      } else {
        bad("unexpected key '" + key + "'", key_at);
      }
      ws();
      if (peek() == ',') { ++i_; continue; }
      if (peek() == '}') { ++i_; break; }
      bad("expected ',' or '}'");
    }
    ws();
    if (i_ != s_.size()) bad("unexpected text after the header dict");
    if (!have_descr || !have_fortran || !have_shape)  // no byte to point at
      fail(path_, "malformed .npy header (the header must have 'descr', 'fortran_order' and 'shape')");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& m) { bad(m, i_); }
  [[noreturn]] void bad(const std::string& m, size_t at) {
    fail(path_, "malformed .npy header (" + m + " at byte " + std::to_string(base_ + at) + " of the file)");
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
  // One dimension, by Python's literal rules, as np.load reads the header: 08 is a SyntaxError
  // there, 00 is 0.
  int64_t dimension() {
    if (peek() < '0' || peek() > '9') bad(peek() == '-' ? "negative dimension" : "expected a dimension");
    const size_t first = i_;
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + static_cast<uint64_t>(peek() - '0');
      if (v > static_cast<uint64_t>(INT64_MAX / 10)) bad("dimension too large");
      ++i_;
    }
    if (s_[first] == '0' && v != 0) bad("a dimension with a leading zero (Python reads none)", first);
    if (peek() == 'L') ++i_;  // Python 2 long suffix
    return static_cast<int64_t>(v);
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> out;
    while (true) {
      ws();
      if (peek() == ')') { ++i_; break; }
      out.push_back(dimension());
      if (out.size() > 64) bad("too many dimensions");
      ws();
      if (peek() == ',') { ++i_; continue; }
      if (peek() == ')' && out.size() == 1)  // (8) is the number 8 to Python, no shape: np.load refuses it
        bad("a shape of one dimension needs its trailing comma, (" + std::to_string(out[0]) + ",)");
      if (peek() == ')') { ++i_; break; }
      bad("expected ',' or ')' in the shape");
    }
    return out;
  }

  const std::string& s_;
  const std::string& path_;
  uint64_t base_;
  size_t i_ = 0;
};

uint32_t le(const unsigned char* p, int n) {
  uint32_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

}  // namespace

void write_npy(const std::string& path, const Tensor& t, Bf16Npy bf16) {
  check_path(path, ".npy file");
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

  // The data as written: bf16 widened to f32 (Bf16Npy::F32), bools as bytes 0/1, else the tensor's own bytes.
  std::vector<float> wide;
  std::string bools;
  std::string_view data(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  if (t.dtype == DType::BF16 && bf16 == Bf16Npy::F32) {
    wide.resize(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<float>(t.get(static_cast<int64_t>(i)).f);
    data = std::string_view(reinterpret_cast<const char*>(wide.data()), wide.size() * 4);
  } else if (t.dtype == DType::Bool) {
    for (std::byte b : t.data) bools += static_cast<char>(b != std::byte{0});  // NumPy bools are bytes 0/1
    data = bools;
  }
  // A new file renamed over the old: a symlink at `path` is replaced, never written through.
  if (const std::string why = replace_file(path, {out, data}, 0666); !why.empty()) fail(path, "cannot create file: " + why);
}

namespace {

// An open .npy file whose header has been read and checked; the data is not read yet.
struct NpyHeader {
  std::string path;
  int fd = -1;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t header_offset = 0;  // where the header dict starts in the file (10, or 12 from version 2.0)
  uint64_t data_offset = 0;
  int64_t data_bytes = 0;
  NpyHeader() = default;
  NpyHeader(const NpyHeader&) = delete;
  NpyHeader& operator=(const NpyHeader&) = delete;
  ~NpyHeader() {
    if (fd >= 0) ::close(fd);
  }
};

// Reads exactly `size` bytes at `offset`; false at the end of the file or on an error.
bool read_at(int fd, void* out, size_t size, uint64_t offset) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, static_cast<char*>(out) + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Opens `path` into h.fd, a regular file only (a folder, FIFO or device is refused without reading
// it); returns its size in bytes.
uint64_t open_regular(const std::string& path, NpyHeader& h) {
  h.path = path;
  h.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (h.fd < 0) fail(path, errno == ENOENT ? "cannot open file: no such file" : std::string("cannot open file: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(h.fd, &st) != 0) fail(path, std::string("cannot inspect the file: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(path, "cannot open file: " + not_regular_file(st.st_mode));
  return static_cast<uint64_t>(st.st_size);
}

// The header dict's text (trailing padding removed) after the magic, version and header length;
// sets h.data_offset to where the data starts.
std::string header_text(const std::string& path, uint64_t size, NpyHeader& h) {
  unsigned char pre[12] = {};
  if (size < 10 || !read_at(h.fd, pre, 10, 0)) fail(path, "not a .npy file (too short)");
  if (std::memcmp(pre, kMagic, 6) != 0) fail(path, "not a .npy file (bad magic)");
  const int major = pre[6], minor = pre[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    fail(path, "unsupported .npy version " + std::to_string(major) + "." + std::to_string(minor));
  const size_t pre_len = major == 1 ? 10 : 12;
  if (major != 1 && (size < 12 || !read_at(h.fd, pre + 10, 2, 10))) fail(path, "truncated .npy header");
  const uint32_t hlen = major == 1 ? le(pre + 8, 2) : le(pre + 8, 4);
  if (hlen > kMaxHeader) fail(path, "malformed .npy header (header length " + std::to_string(hlen) + " is over 1 MiB)");
  if (size < pre_len + hlen)
    fail(path, "truncated .npy header (header length " + std::to_string(hlen) + " is beyond the end of the file)");
  std::string text(hlen, '\0');
  if (!read_at(h.fd, text.data(), hlen, pre_len)) fail(path, "cannot read the .npy header");
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) text.pop_back();
  h.header_offset = pre_len;
  h.data_offset = pre_len + hlen;
  return text;
}

// Opens `path` and reads and checks its header: magic, version, header dict, dtype, shape, and that
// the file holds exactly the data the shape needs. No data is read.
void read_npy_header(const std::string& path, std::optional<DType> expect, NpyHeader& h) {
  check_path(path, ".npy file");
  const uint64_t size = open_regular(path, h);
  const std::string text = header_text(path, size, h);
  Header d = HeaderParser(text, path, h.header_offset).parse();
  if (d.fortran) fail(path, "fortran_order arrays are not supported; save it with np.ascontiguousarray(x)");
  std::string why;
  std::optional<DType> dt = dtype_of(d.descr, expect, &why);
  if (!dt) fail(path, why);
  int64_t n = checked_numel(d.shape);
  if (n < 0 || __builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(*dt)), &h.data_bytes))
    fail(path, "shape " + tensor_type_string(*dt, d.shape) + " is too large");
  h.dtype = *dt;
  h.shape = std::move(d.shape);
  const uint64_t have = size - h.data_offset, want = static_cast<uint64_t>(h.data_bytes);
  if (have < want)
    fail(path, "truncated data: " + tensor_type_string(h.dtype, h.shape) + " needs " + std::to_string(want) +
                   " bytes, the file has " + std::to_string(have));
  if (have > want) fail(path, "has " + std::to_string(have - want) + " bytes after the data of " + tensor_type_string(h.dtype, h.shape));
}

// Reads the data the header describes.
Tensor read_npy_data(const NpyHeader& h) {
  Tensor t = [&] {
    try {
      return Tensor(h.dtype, h.shape);  // the size is bounded by the file's size
    } catch (const UserError& e) {  // not enough memory: still this file's problem
      fail(h.path, e.what());
    }
  }();
  if (!read_at(h.fd, t.data.data(), static_cast<size_t>(h.data_bytes), h.data_offset)) fail(h.path, "cannot read the data");
  return t;
}

}  // namespace

Tensor read_npy(const std::string& path, std::optional<DType> expect) {
  NpyHeader h;
  read_npy_header(path, expect, h);
  return read_npy_data(h);
}

namespace {
// Runs `read`; a FileError from it names the graph input `input` too (what() as well as file()).
template <class Read>
auto for_input(const std::string& path, const std::string& input, Read read) {
  try {
    return read();
  } catch (const FileError& e) {
    if (input.empty()) throw;
    fail(path, "input '" + input + "': " + e.what());
  }
}
}  // namespace

std::vector<int64_t> read_npy_shape(const std::string& path, std::optional<DType> expect, const std::string& input) {
  return for_input(path, input, [&] {
    NpyHeader h;
    read_npy_header(path, expect, h);
    return h.shape;
  });
}

namespace {
std::string fmt_g17(float v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", static_cast<double>(v));
  return b;
}

// f32 values narrowed to bf16, refusing any value that would round (FileError).
Tensor exact_bf16(const std::string& path, const Tensor& t) {
  Tensor b(DType::BF16, t.shape);
  const float* src = t.as<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    fj_bf16 v = fj_store_bf16(src[i]);
    float back = fj_load(v);
    if (std::memcmp(&back, &src[i], 4) != 0 && !(back != back && src[i] != src[i]))
      fail(path, "the file has f32 values that are not exactly representable in bf16 (element " + std::to_string(i) +
                     " = " + fmt_g17(src[i]) + "); expected bf16 (or f32 holding bf16 values)");
    b.as<fj_bf16>()[i] = v;
  }
  return b;
}

// What to do about a file whose dtype or rank is not the input's: convert the file, or (same
// dtype and rank) set the dims with `shape_hint`.
std::string npy_input_hint(const NpyHeader& h, DType dtype, size_t rank, const std::string& shape_hint, bool same_dtype) {
  if (!same_dtype)  // bf16: exact f32 values (Bf16Npy::F32), the form .npy files take here
    return fmt::format(" (convert the file with NumPy: np.save(FILE, np.load(FILE).astype('{}')){})",
                       dtype_npy_descr(dtype == DType::BF16 ? DType::F32 : dtype),
                       dtype == DType::BF16 ? ", values exact in bf16, or ml_dtypes.bfloat16" : "");
  if (h.shape.size() != rank)
    return fmt::format(" (the file has {} ax{}, the input {}: no dims can change that)", h.shape.size(),
                       h.shape.size() == 1 ? "is" : "es", rank);
  return shape_hint.empty() ? "" : " " + shape_hint;
}
}  // namespace

Tensor read_npy_input(const std::string& path, const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                      const std::string& shape_hint, const std::string& expected) {
  // dtype and shape come from the header and are checked before any data is read (a huge file
  // given for a small input costs nothing).
  Tensor t = for_input(path, name, [&] {
    NpyHeader h;
    read_npy_header(path, dtype, h);
    const bool bf16_as_f32 = dtype == DType::BF16 && h.dtype == DType::F32;  // the Bf16Npy::F32 convention
    if ((h.dtype != dtype && !bf16_as_f32) || h.shape != shape)
      fail(path, "the file has " + tensor_type_string(h.dtype, h.shape) + ", expected " +
                     (expected.empty() ? tensor_type_string(dtype, shape) : expected) +
                     npy_input_hint(h, dtype, shape.size(), shape_hint, h.dtype == dtype || bf16_as_f32));
    return bf16_as_f32 ? exact_bf16(path, read_npy_data(h)) : read_npy_data(h);
  });
  if (t.dtype == DType::Bool)  // NumPy reads any nonzero byte as True: store it as 1, as every path expects
    for (std::byte& b : t.data) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
  return t;
}

}  // namespace fusejit::ir
