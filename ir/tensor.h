// Host tensors for the reference evaluator, .npy I/O and random inputs: a dtype, a row-major
// (C order) shape and contiguous little-endian storage, as NumPy lays out a C-contiguous array.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusejit::ir {

// Storage per element: bool 1 byte (0 or 1), i8/u8 1, i32 4, i64 8 (two's complement), f16 and
// bf16 2 (raw IEEE binary16 / bfloat16 bits), f32 4, f64 8. `data` is owned by the tensor.
struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;   // sizes, row-major; empty = 0-d (one element)
  std::vector<std::byte> data;  // numel() * dtype_size(dtype) bytes

  Tensor() = default;
  // A zero-filled tensor. Throws UserError on a negative size, or when the byte size overflows
  // 64 bits or cannot be allocated ("not enough memory for a f32[...] tensor").
  Tensor(DType dtype, std::vector<int64_t> shape);

  // Product of the sizes (1 for 0-d). Assumes the shape was checked (constructor).
  int64_t numel() const;
  size_t nbytes() const { return data.size(); }

  // Element `i` (flat, C order) as a typed scalar of this dtype (floats exact in Scalar::f;
  // bool/ints in Scalar::i). Precondition (FJ_CHECK): 0 <= i < numel().
  Scalar get(int64_t i) const;
  // Stores `v` at flat index `i`. A scalar of another dtype is converted first by the cast rules
  // (docs/ops.md), exactly as a Cast node would.
  void set(int64_t i, const Scalar& v);

  // Typed view of the storage; S must be the storage type of dtype (bool, int8_t, uint8_t, int32_t,
  // int64_t, fj_f16/fj_bf16 or uint16_t for halves, float, double): not checked.
  template <class S> S* as() { return reinterpret_cast<S*>(data.data()); }
  template <class S> const S* as() const { return reinterpret_cast<const S*>(data.data()); }
};

// One element of `dtype` at `p` (storage as Tensor documents it) as a typed scalar, and the store
// of a scalar converted first by the cast rules when its dtype differs: what Tensor::get/set do,
// for storage a Tensor does not own.
Scalar load_element(DType dtype, const std::byte* p);
void store_element(DType dtype, std::byte* p, const Scalar& value);

// Sizes of a graph shape.
std::vector<int64_t> shape_sizes(const Shape& s);
// "f32[8, 4096]" (dtype and sizes) for messages and reports; "f32[]" for 0-d.
std::string tensor_type_string(DType dtype, const std::vector<int64_t>& shape);
// Number of elements of a shape, or -1 when a size is negative or the product of the non-zero sizes
// overflows int64 (ir::element_count_overflows).
int64_t checked_numel(std::span<const int64_t> shape);

}  // namespace fusejit::ir
