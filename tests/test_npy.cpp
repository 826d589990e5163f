// .npy I/O: round trips of every dtype, the exact header NumPy writes, v1/v2/v3 headers, and
// malformed or hostile files (each must give a FileError naming the file, never a crash).
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <fusejit/fusejit.h>
#include <fusejit/report.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include "ir/npy.h"
#include "ir/random_fill.h"
#include "tests/support/files.h"

using namespace fusejit::ir;
namespace fs = std::filesystem;

namespace {

fs::path tmp_dir() {
  fs::path d = fs::path(FUSEJIT_BINARY_DIR) / "test-npy-tmp";
  fs::create_directories(d);
  return d;
}

std::string tmp(const std::string& name) { return (tmp_dir() / name).string(); }

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) { return fusejit::testing::read_file(path); }

// A .npy file with the given version, header text (padded by the caller or not) and data.
std::string npy(int major, const std::string& header, const std::string& data) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  uint32_t n = static_cast<uint32_t>(header.size());
  int width = major == 1 ? 2 : 4;
  for (int k = 0; k < width; ++k) out += static_cast<char>((n >> (8 * k)) & 0xff);
  return out + header + data;
}

std::string floats(std::vector<float> v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

// Expects read_npy to throw a FileError naming the file whose message contains `part`.
void expect_error(const std::string& bytes, const std::string& part, std::optional<DType> expect = std::nullopt) {
  std::string p = tmp("bad.npy");
  write_bytes(p, bytes);
  try {
    read_npy(p, expect);
    FAIL_CHECK("no error; wanted '" << part << "'");
  } catch (const FileError& e) {
    std::string m = e.what();
    CHECK_MESSAGE(e.file() == p, m);
    CHECK_MESSAGE(m.find(part) != std::string::npos, m << "  (wanted '" << part << "')");
  }
}

}  // namespace

TEST_CASE("every dtype round-trips bit for bit, with hard values") {
  const DType all[] = {DType::Bool, DType::I8, DType::U8, DType::I32, DType::I64,
                       DType::F16, DType::BF16, DType::F32, DType::F64};
  for (DType t : all) {
    for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {7}, {3, 5}, {2, 0, 4}, {2, 3, 4}}) {
      CAPTURE(tensor_type_string(t, shape));
      Tensor x(t, shape);
      random_fill(x, 42, FillSpec{std::nullopt, FillMode::Special});
      std::string p = tmp("rt.npy");
      write_npy(p, x);
      std::string bytes = read_bytes(p);
      REQUIRE(bytes.size() >= 64);
      uint32_t hlen = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
      CHECK((10 + hlen) % 64 == 0);  // data aligned as NumPy aligns it
      CHECK(bytes[10 + hlen - 1] == '\n');
      Tensor y = read_npy_input(p, "x", t, shape);  // bf16 comes back from its exact f32 widening
      CHECK(y.dtype == t);
      CHECK(y.shape == shape);
      CHECK(y.data == x.data);
      if (t == DType::BF16) {
        write_npy(p, x, Bf16Npy::Bits);
        CHECK(read_npy(p, t).data == x.data);
      }
    }
  }
}

TEST_CASE("the header is exactly NumPy's") {
  Tensor x(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) x.as<float>()[i] = static_cast<float>(i) - 2.5f;
  std::string p = tmp("hdr.npy");
  write_npy(p, x);
  std::string b = read_bytes(p);
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  CHECK(b.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(b.substr(10, dict.size()) == dict);
  CHECK(b.size() == 128 + 24);
  CHECK(b.substr(128) == floats({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f}));
  Tensor v(DType::I64, {5});
  write_npy(p, v);
  CHECK(read_bytes(p).find("'shape': (5,), }") != std::string::npos);
  Tensor s(DType::Bool, {});
  write_npy(p, s);
  CHECK(read_bytes(p).find("'descr': '|b1', 'fortran_order': False, 'shape': (), }") != std::string::npos);
}

TEST_CASE("bf16 conventions: exact f32 widening by default, '<u2' bits, or the 'bfloat16' descr") {
  Tensor x(DType::BF16, {3});
  x.set(0, Scalar{DType::F64, 1.0, 0});
  x.set(1, Scalar{DType::F64, -3.140625, 0});
  x.set(2, Scalar{DType::F64, std::numeric_limits<double>::infinity(), 0});
  std::string p = tmp("bf.npy");
  write_npy(p, x);
  CHECK(read_bytes(p).find("'descr': '<f4'") != std::string::npos);
  Tensor w = read_npy(p);
  CHECK(w.dtype == DType::F32);
  CHECK(w.as<float>()[1] == -3.140625f);
  CHECK(std::isinf(w.as<float>()[2]));
  CHECK(read_npy_input(p, "x", DType::BF16, {3}).data == x.data);  // narrowed back exactly
  Tensor f(DType::F32, {2});
  f.as<float>()[0] = 1.0f;
  f.as<float>()[1] = 0.1f;  // not a bf16 value
  write_npy(p, f);
  CHECK_THROWS_WITH_AS(read_npy_input(p, "x", DType::BF16, {2}),
                       doctest::Contains("not exactly representable in bf16 (element 1"), UserError);
  write_npy(p, x, Bf16Npy::Bits);
  CHECK(read_bytes(p).find("'descr': '<u2'") != std::string::npos);
  CHECK(read_npy(p, DType::BF16).data == x.data);
  CHECK(read_npy_input(p, "x", DType::BF16, {3}).data == x.data);
  CHECK_THROWS_WITH_AS(read_npy(p), doctest::Contains("unsupported dtype '<u2'"), UserError);
  write_npy(p, x, Bf16Npy::Descr);
  Tensor d = read_npy(p);
  CHECK(d.dtype == DType::BF16);
  CHECK(d.data == x.data);
  // np.save of an ml_dtypes bfloat16 array: 2-byte void records, read as a bf16 input's bits.
  std::string bytes = read_bytes(p);
  const size_t at = bytes.find("'descr': 'bfloat16'");
  REQUIRE(at != std::string::npos);
  bytes.replace(at, std::string("'descr': 'bfloat16'").size(), "'descr': '<V2'     ");  // same header length
  std::ofstream(p, std::ios::binary) << bytes;
  CHECK(read_npy(p, DType::BF16).data == x.data);
  CHECK_THROWS_WITH_AS(read_npy(p), doctest::Contains("ml_dtypes' '<V2'"), UserError);  // no bf16 input: refused
}

TEST_CASE("v1, v2 and v3 headers, Python 2 style, '=' and '|' byte orders") {
  std::string data = floats({1, 2, 3, 4});
  std::string h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  for (int v : {1, 2, 3}) {
    std::string p = tmp("v.npy");
    write_bytes(p, npy(v, h + std::string(10, ' ') + "\n", data));
    Tensor t = read_npy(p);
    CHECK(t.shape == std::vector<int64_t>{2, 2});
    CHECK(t.as<float>()[3] == 4.0f);
  }
  std::string p = tmp("py2.npy");
  write_bytes(p, npy(1, "{\"descr\": \"=f4\", \"shape\": (4L,), \"fortran_order\": False}\n", data));
  CHECK(read_npy(p).shape == std::vector<int64_t>{4});
  write_bytes(p, npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (4,)}", "abcd"));
  CHECK(read_npy(p).dtype == DType::U8);
  write_bytes(p, npy(1, "{'descr': '<f2', 'fortran_order': False, 'shape': ()}", std::string("\x00\x3c", 2)));
  CHECK(read_npy(p).get(0).f == 1.0);
}

TEST_CASE("malformed and hostile files give errors naming the file") {
  std::string d4 = floats({1, 2, 3, 4});
  auto hdr = [](const std::string& descr, const std::string& fortran, const std::string& shape) {
    return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n";
  };
  expect_error("", "not a .npy file");
  expect_error("hello world, not numpy", "bad magic");
  expect_error(npy(9, hdr("<f4", "False", "(4,)"), d4), "unsupported .npy version 9.0");
  expect_error(npy(1, hdr("<f4", "True", "(2, 2)"), d4), "fortran_order arrays are not supported");
  expect_error(npy(1, hdr(">f4", "False", "(4,)"), d4), "big-endian");
  expect_error(npy(1, hdr("<c8", "False", "(2,)"), d4), "unsupported dtype '<c8'");
  expect_error(npy(1, hdr("|O", "False", "(2,)"), d4), "unsupported dtype '|O' (fusejit supports bool, i8");
  expect_error(npy(1, hdr("<u4", "False", "(4,)"), d4), "unsupported dtype '<u4'");
  expect_error(npy(1, hdr(std::string("<f\0" "4", 4), "False", "(2,)"), d4), "unsupported dtype '<f\\x004' (fusejit");
  expect_error(npy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,), }", d4),
               "unsupported dtype: a structured dtype (a list as 'descr') (fusejit supports bool");
  expect_error(npy(1, hdr("<f4", "False", "(-1,)"), d4), "negative dimension");
  // What np.load refuses, as Python reads the header (a hostile tester's find: both were read as [4]).
  expect_error(npy(1, hdr("<f4", "False", "(4)"), d4), "a shape of one dimension needs its trailing comma, (4,)");
  expect_error(npy(1, hdr("<f4", "False", "(04,)"), d4), "a dimension with a leading zero");
  CHECK(read_npy([&] {  // 00 is Python's 0, as np.load reads it
          const std::string p = tmp("zeros.npy");
          write_bytes(p, npy(1, hdr("<f4", "False", "(00, 4)"), ""));
          return p;
        }()).shape == std::vector<int64_t>{0, 4});
  CHECK(read_npy([&] {
          const std::string p = tmp("zero.npy");
          write_bytes(p, npy(1, hdr("<f4", "False", "(0, 4)"), ""));
          return p;
        }()).shape == std::vector<int64_t>{0, 4});  // a lone 0 is a dimension
  expect_error(npy(1, hdr("<f4", "False", "(3,)"), d4), "has 4 bytes after the data");
  expect_error(npy(1, hdr("<f4", "False", "(5,)"), d4), "truncated data: f32[5] needs 20 bytes, the file has 16");
  expect_error(npy(1, hdr("<f4", "False", "(1000000000000,)"), d4), "truncated data");
  expect_error(npy(1, hdr("<f8", "False", "(4294967296, 4294967296)"), d4), "is too large");
  expect_error(npy(1, hdr("<f4", "False", "(99999999999999999999,)"), d4), "dimension too large");
  expect_error(npy(1, hdr("<f4", "Maybe", "(4,)"), d4), "expected True or False");
  expect_error(npy(1, "{'descr': '<f4', 'shape': (4,), }", d4), "must have 'descr', 'fortran_order' and 'shape'");
  expect_error(npy(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", d4), "duplicate key");
  expect_error(npy(1, hdr("<f4", "False", "(4,)") + "junk", d4), "unexpected text");
  expect_error(npy(1, "{'descr': '<f4, 'fortran_order': False", d4), "malformed .npy header");
  expect_error(npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", d4), "unexpected key 'extra'");
  // The byte is the file's, at the key: the header dict starts at byte 10 (12 from version 2.0).
  expect_error(npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", d4),
               "unexpected key 'extra' at byte 66 of the file");
  expect_error(npy(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}", d4), "at byte 68 of the file");
  expect_error(npy(1, "", d4), "malformed .npy header");
  // Header lengths that lie.
  std::string lie = npy(1, hdr("<f4", "False", "(4,)"), d4);
  lie[8] = '\xff';
  lie[9] = '\xff';
  expect_error(lie, "beyond the end of the file");
  std::string huge = npy(2, hdr("<f4", "False", "(4,)"), d4);
  huge[8] = huge[9] = huge[10] = huge[11] = '\xff';
  expect_error(huge, "over 1 MiB");
  expect_error(std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11), "truncated .npy header");
  expect_error(std::string("\x93NUMPY\x02", 7), "too short");
  CHECK_THROWS_WITH_AS(read_npy(tmp("does-not-exist.npy")), "cannot open file: no such file", FileError);
  // For a graph input, what() names the input too (run_graph's callers see what(), not only file()).
  CHECK_THROWS_WITH_AS(read_npy_input(tmp("does-not-exist.npy"), "x", DType::F32, {4}),
                       "input 'x': cannot open file: no such file", FileError);
  CHECK_THROWS_WITH_AS(read_npy_shape(tmp("does-not-exist.npy"), DType::F32, "x"), "input 'x': cannot open file: no such file",
                       FileError);
  try {
    (void)read_npy_shape(tmp("does-not-exist.npy"), DType::F32, "x");
    FAIL("expected an error");
  } catch (const FileError& e) {
    CHECK(e.file() == tmp("does-not-exist.npy"));
  }
  CHECK_THROWS_WITH_AS(write_npy((tmp_dir() / "no-such-dir" / "x.npy").string(), Tensor(DType::F32, {1})),
                       doctest::Contains("cannot create file"), UserError);
}

TEST_CASE("fuzzed headers and truncations never crash") {
  Tensor x(DType::I32, {3, 4});
  random_fill(x, 7);
  std::string p = tmp("fz.npy");
  write_npy(p, x);
  const std::string good = read_bytes(p);
  std::mt19937_64 rng(99);  // test-only randomness
  int errors = 0, ok = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string b = good;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % std::min<size_t>(b.size(), 80);
      b[at] = static_cast<char>(rng() % 3 == 0 ? "(),:'{} -0123456789TF"[rng() % 21] : static_cast<char>(rng()));
    }
    if (rng() % 5 == 0) b.resize(rng() % b.size());
    write_bytes(p, b);
    try {
      Tensor t = read_npy(p);
      CHECK(t.data.size() == static_cast<size_t>(t.numel()) * static_cast<size_t>(dtype_size(t.dtype)));
      ++ok;
    } catch (const UserError&) {
      ++errors;
    }
  }
  CHECK(errors > 100);
}

TEST_CASE("read_npy_input checks the input's dtype and shape") {
  Tensor x(DType::F16, {8, 4});
  std::string p = tmp("in.npy");
  write_npy(p, x);
  CHECK(read_npy_input(p, "x", DType::F16, {8, 4}).shape == std::vector<int64_t>{8, 4});
  CHECK_THROWS_WITH_AS(read_npy_input(p, "x", DType::F32, {8, 4}), "input 'x': the file has f16[8, 4], expected f32[8, 4]"
                       " (convert the file with NumPy: np.save(FILE, np.load(FILE).astype('<f4')))",
                       FileError);
  // Another rank: no dims (--dim) can fix it, and the message says so rather than suggest it.
  CHECK_THROWS_WITH_AS(read_npy_input(p, "x", DType::F16, {32}, "(--dim sets the graph's dims N)"),
                       "input 'x': the file has f16[8, 4], expected f16[32] (the file has 2 axes, the input 1: no dims "
                       "can change that)",
                       FileError);
  CHECK_THROWS_WITH_AS(read_npy_input(p, "x", DType::F16, {4, 8}), "input 'x': the file has f16[8, 4], expected f16[4, 8]",
                       FileError);
}

namespace {
// Bytes this process has read through read(2)/pread(2) so far (/proc/self/io "rchar").
uint64_t bytes_read_so_far() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:") return value;
  return 0;
}
}  // namespace

TEST_CASE("dtype and shape are checked from the header before any data is read") {
  // A 64 MiB f64 file (sparse: costs no disk) given for a 16-element f32 input.
  const std::string suffix = " (convert the file with NumPy: np.save(FILE, np.load(FILE).astype('<f4')))";
  std::string p = tmp("huge.npy");
  const int64_t n = int64_t{8} << 20;
  write_bytes(p, npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }\n", ""));
  const uint64_t header = fs::file_size(p);
  fs::resize_file(p, header + static_cast<uint64_t>(n) * 8);
  const uint64_t before = bytes_read_so_far();
  CHECK_THROWS_WITH_AS(read_npy_input(p, "x", DType::F32, {16}),
                       ("input 'x': the file has f64[" + std::to_string(n) + "], expected f32[16]" + suffix).c_str(),
                       FileError);
  CHECK(bytes_read_so_far() - before < (1u << 20));  // the header only, not 64 MiB
  // The right dtype and shape read it all, exactly once.
  Tensor t = read_npy_input(p, "x", DType::F64, {n});
  CHECK(t.numel() == n);
  fs::remove(p);
  // A FIFO or a folder is refused without waiting or reading.
  std::string fifo = tmp("pipe.npy");
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH_AS(read_npy(fifo), "cannot open file: it is a FIFO (named pipe), not a regular file", FileError);
  fs::remove(fifo);
  CHECK_THROWS_WITH_AS(read_npy(tmp_dir().string()), "cannot open file: it is a directory", FileError);
}

TEST_CASE("an .npy input's error names the .npy file, not the graph file") {
  std::string p = tmp("wrong.npy");
  write_npy(p, Tensor(DType::F64, {3}));
  fusejit::Graph g = fusejit::Graph::parse("graph t\ninput x : f32[4]\ny = x * 2\noutput y\n", "t.txt");
  fusejit::RunOptions ro;
  ro.options.backend = fusejit::Backend::Cpu;
  ro.input_files = {{"x", p}};
  try {
    fusejit::run_graph(g, ro);
    FAIL("no error");
  } catch (const fusejit::Error& e) {
    CHECK(e.kind() == fusejit::ErrorKind::User);
    CHECK(e.file() == p);
    CHECK(e.diagnostic() == p + ": error: input 'x': the file has f64[3], expected f32[4] (convert the file with NumPy: "
                                "np.save(FILE, np.load(FILE).astype('<f4')))");
  }
  // An input given twice is refused, as the command line refuses it (it read the last file).
  const std::string ok = tmp("ok4.npy");
  write_npy(ok, Tensor(DType::F32, {4}));
  ro.input_files = {{"x", ok}, {"x", ok}};
  CHECK_THROWS_WITH_AS(fusejit::run_graph(g, ro), doctest::Contains("input 'x' is given twice"), fusejit::Error);
  CHECK_THROWS_WITH_AS(fusejit::input_file_dims(g, ro.input_files), doctest::Contains("input 'x' is given twice"),
                       fusejit::Error);
}

TEST_CASE("run_graph's hints for an .npy file's shape name the API's way to set dims, not --dim") {
  // They named the command line's --dim, or a `dims` argument run_graph has not (hostile pass).
  const std::string p = tmp("three.npy"), q = tmp("three_by_one.npy");
  write_npy(p, Tensor(DType::F32, {3}));
  write_npy(q, Tensor(DType::F32, {3, 1}));
  const fusejit::Graph g = fusejit::Graph::parse("dim N = 8\ninput x : f32[N]\ny = x * 2\noutput y\n");
  fusejit::RunOptions ro;
  ro.options.backend = fusejit::Backend::Cpu;
  ro.input_files = {{"x", p}};
  CHECK_THROWS_WITH_AS(fusejit::run_graph(g, ro),
                       doctest::Contains("the file has f32[3], expected f32[N=8] (the graph's dims N can be set to "
                                         "match: Graph::with_dims, with fusejit::input_file_dims to read them from the files)"),
                       fusejit::Error);
  ro.input_files = {{"x", q}};
  CHECK_THROWS_WITH_AS(fusejit::run_graph(g, ro),
                       doctest::Contains("expected f32[N=8] (the file has 2 axes, the input 1: no dims can change that)"),
                       fusejit::Error);
  ro.input_files = {{"x", p}};
  CHECK(fusejit::run_graph(g.with_dims(fusejit::input_file_dims(g, ro.input_files)), ro).outputs.size() == 1);
}

TEST_CASE("input_file_dims: the dims the files' shapes give, conflicts named, other names left to run_graph") {
  const std::string x = tmp("dims_x.npy"), w = tmp("dims_w.npy"), w3 = tmp("dims_w3.npy"), r1 = tmp("dims_rank1.npy");
  write_npy(x, Tensor(DType::F32, {2, 3, 5}));
  write_npy(w, Tensor(DType::F32, {5}));
  write_npy(w3, Tensor(DType::F32, {3}));
  write_npy(r1, Tensor(DType::F32, {7}));
  const std::string bits = tmp("dims_bits.npy");  // a bf16 input's raw bits, as '<u2'
  write_npy(bits, Tensor(DType::BF16, {4}), Bf16Npy::Bits);
  CHECK(fusejit::input_file_dims(fusejit::Graph::parse("dim N = 1\ninput h : bf16[N]\ny = h + 1\noutput y\n"),
                                 {{"h", bits}}) == fusejit::DimValues{{"N", 4}});
  fusejit::Graph g = fusejit::Graph::parse(
      "dim B = 1\ndim T = 1\ndim C = 1\ninput x : f32[B, T, C]\ninput w : f32[C]\ny = x * w\noutput y\n", "t.txt");
  using DV = fusejit::DimValues;
  CHECK(fusejit::input_file_dims(g, {{"x", x}}) == DV{{"B", 2}, {"T", 3}, {"C", 5}});
  CHECK(fusejit::input_file_dims(g, {{"w", w}, {"x", x}}) == DV{{"C", 5}, {"B", 2}, {"T", 3}});
  CHECK(fusejit::input_file_dims(g, {{"x", r1}, {"nope", x}}).empty());  // run_graph reports these
  CHECK_THROWS_WITH_AS(fusejit::input_file_dims(g, {{"x", x}, {"w", w3}}),
                       ("dim C: " + x + " (input 'x', axis 2) has size 5 but " + w3 + " (input 'w', axis 0) has size 3")
                           .c_str(),
                       fusejit::Error);
  try {  // located at the file that disagrees, not at the graph
    fusejit::input_file_dims(g, {{"x", x}, {"w", w3}});
    FAIL("no error");
  } catch (const fusejit::Error& e) {
    CHECK(e.file() == w3);
    CHECK(e.line() == 0);
  }
  try {
    fusejit::input_file_dims(g, {{"w", tmp("dims_missing.npy")}});
    FAIL("no error");
  } catch (const fusejit::Error& e) {
    CHECK(e.kind() == fusejit::ErrorKind::User);
    CHECK(e.file() == tmp("dims_missing.npy"));
  }
}

TEST_CASE("write_npy replaces a symlink at the path, never writing through it (--save-dir)") {
  const std::string victim = tmp("victim.txt"), link = tmp("linked.npy");
  write_bytes(victim, "keep me");
  fs::remove(link);
  fs::create_symlink(victim, link);
  Tensor x(DType::F32, {3});
  write_npy(link, x);
  CHECK(read_bytes(victim) == "keep me");
  CHECK(!fs::is_symlink(link));
  CHECK(read_npy(link).shape == std::vector<int64_t>{3});
  // A folder in the way is an error naming the file, and leaves no temporary file behind.
  const std::string dir = tmp("a-folder.npy");
  fs::create_directories(dir);
  CHECK_THROWS_AS(write_npy(dir, x), FileError);
  for (const auto& e : fs::directory_iterator(tmp_dir())) CHECK(e.path().extension() != ".tmp");
}

TEST_CASE("write_npy: a file name of 250 bytes is written (its temporary file's name stays under NAME_MAX)") {
  const std::string name = std::string(246, 'n') + ".npy";
  Tensor x(DType::F32, {2});
  write_npy(tmp(name), x);
  CHECK(read_npy(tmp(name)).shape == std::vector<int64_t>{2});
  fs::remove(tmp(name));
}
