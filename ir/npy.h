// NumPy .npy files (format versions 1.0, 2.0 and 3.0; C order, little-endian), the format
// documented in numpy.lib.format. Used by `fusejit run --input NAME=FILE` and `--save-dir`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace fusejit::ir {

// How bf16 tensors are written; NumPy itself has no bfloat16 dtype.
enum class Bf16Npy {
  F32,    // descr '<f4' (default): every bf16 value widened exactly to f32, so plain NumPy shows the
          // values the report describes; read_npy_input takes it back as bf16 (exactly, see there).
  Bits,   // descr '<u2': the raw bfloat16 bits. Recover the values with
          // `x.view(ml_dtypes.bfloat16)` or `(x.astype('<u4') << 16).view('<f4')`.
  Descr,  // descr 'bfloat16' (ml_dtypes' name; ir::dtype_npy_descr): only ml_dtypes-aware readers.
};

// Writes `t` to `path` as a C-order .npy file (version 1.0, or 2.0 when the header needs more than
// 65535 bytes), header padded to a multiple of 64 bytes as NumPy does. descr per dtype: bool '|b1',
// i8 '|i1', u8 '|u1', i32 '<i4', i64 '<i8', f16 '<f2', f32 '<f4', f64 '<f8', bf16 per `bf16`.
// Throws FileError (file() = path) when it cannot be created or written.
void write_npy(const std::string& path, const Tensor& t, Bf16Npy bf16 = Bf16Npy::F32);

// Reads a .npy file. The dtype comes from the file's descr (the ones write_npy produces; '=' and
// '|' byte orders are accepted where unambiguous, and descr 'bfloat16' gives bf16); when
// `expect` is BF16, a '<u2' file is read as raw bf16 bits (the Bits convention above).
// Throws FileError (ir/error.h: file() = path, what() the problem), never crashes, never reads
// the data before the header is checked, on: a missing/unreadable file, anything but a regular
// file (a folder, FIFO or device is refused without reading it), a bad magic or
// version, a header length beyond the file or over 1 MiB, a header that is not the expected dict,
// fortran_order True ("save it with np.ascontiguousarray"), big-endian or unsupported dtypes
// (structured, object, u2..u8 other than above, complex), negative or overflowing shapes, and
// data that is shorter or longer than the shape requires.
Tensor read_npy(const std::string& path, std::optional<DType> expect = std::nullopt);

// The shape in the header of a .npy file, checked as read_npy(path, expect) checks it (FileError
// likewise, its message starting "input 'NAME': " when `input` names the graph input the file is
// for); no data is read.
std::vector<int64_t> read_npy_shape(const std::string& path, std::optional<DType> expect = std::nullopt,
                                    const std::string& input = "");

// Reads an input tensor for graph input `name`, which must have exactly `dtype` and `shape`,
// checked from the header before any data is read; otherwise FileError (file() = path) "input
// 'x': the file has f16[8, 4096], expected f32[8, 4096]". For a bf16 input
// the file may also be '<u2' (raw bits) or '<f4' whose values are all exactly representable in bf16
// (what write_npy writes by default); an f32 value that is not gives a FileError naming the element,
// never a silent rounding. `shape_hint` is appended to the message when only the shape differs
// (e.g. which --dim would make it match); `expected` is the message's text of the expected type
// ("" for dtype and shape as numbers; the graph's `bf16[T=4096, D=4096]` names its dims).
Tensor read_npy_input(const std::string& path, const std::string& name, DType dtype,
                      const std::vector<int64_t>& shape, const std::string& shape_hint = {},
                      const std::string& expected = {});

}  // namespace fusejit::ir
