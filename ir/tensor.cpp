#include "ir/tensor.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "ir/eval.h"
#include "ir/scalar/fj_scalar.h"

namespace fusejit::ir {

int64_t checked_numel(std::span<const int64_t> shape) {
  // As ir::element_count_overflows: [2^40, 2^40, 0] is refused whatever the order of its sizes.
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && __builtin_mul_overflow(n, d, &n))) return -1;
    empty = empty || d == 0;
  }
  return empty ? 0 : n;
}

Tensor::Tensor(DType t, std::vector<int64_t> s) : dtype(t), shape(std::move(s)) {
  int64_t n = checked_numel(shape), bytes = 0;
  if (n < 0 || __builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(t)), &bytes))
    throw UserError("tensor " + tensor_type_string(t, shape) + " is too large (its byte size overflows 64 bits)");
  try {
    data.resize(static_cast<size_t>(bytes));
  } catch (const std::bad_alloc&) {
    throw UserError("not enough memory for a " + tensor_type_string(t, shape) + " tensor (" + std::to_string(bytes) +
                    " bytes)");
  } catch (const std::length_error&) {
    throw UserError("tensor " + tensor_type_string(t, shape) + " is too large (" + std::to_string(bytes) + " bytes)");
  }
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Scalar load_element(DType dtype, const std::byte* p) {
  Scalar s;
  s.dtype = dtype;
  switch (dtype) {
    case DType::Bool: s.i = std::to_integer<uint8_t>(*p) != 0; break;
    case DType::I8: { int8_t v; std::memcpy(&v, p, 1); s.i = v; break; }
    case DType::U8: { uint8_t v; std::memcpy(&v, p, 1); s.i = v; break; }
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); s.i = v; break; }
    case DType::I64: { int64_t v; std::memcpy(&v, p, 8); s.i = v; break; }
    case DType::F16: { fj_f16 v; std::memcpy(&v.bits, p, 2); s.f = fj_load(v); break; }
    case DType::BF16: { fj_bf16 v; std::memcpy(&v.bits, p, 2); s.f = fj_load(v); break; }
    case DType::F32: { float v; std::memcpy(&v, p, 4); s.f = v; break; }
    case DType::F64: { double v; std::memcpy(&v, p, 8); s.f = v; break; }
  }
  return s;
}

void store_element(DType dtype, std::byte* p, const Scalar& value) {
  Scalar v = value;
  if (v.dtype != dtype) {
    Scalar args[1] = {value};
    v = eval_scalar(Op::Cast, dtype, args);
  }
  switch (dtype) {
    case DType::Bool: *p = std::byte{static_cast<uint8_t>(v.i != 0)}; break;
    case DType::I8: { int8_t x = static_cast<int8_t>(v.i); std::memcpy(p, &x, 1); break; }
    case DType::U8: { uint8_t x = static_cast<uint8_t>(v.i); std::memcpy(p, &x, 1); break; }
    case DType::I32: { int32_t x = static_cast<int32_t>(v.i); std::memcpy(p, &x, 4); break; }
    case DType::I64: { int64_t x = v.i; std::memcpy(p, &x, 8); break; }
    // Halves: v.f is already a value of the half type, so the (RNE) store is exact.
    case DType::F16: { fj_f16 x = fj_store_f16(static_cast<float>(v.f)); std::memcpy(p, &x.bits, 2); break; }
    case DType::BF16: { fj_bf16 x = fj_store_bf16(static_cast<float>(v.f)); std::memcpy(p, &x.bits, 2); break; }
    case DType::F32: { float x = static_cast<float>(v.f); std::memcpy(p, &x, 4); break; }
    case DType::F64: { double x = v.f; std::memcpy(p, &x, 8); break; }
  }
}

Scalar Tensor::get(int64_t i) const {
  FJ_CHECK(i >= 0 && i < numel(), "Tensor::get index out of range");
  return load_element(dtype, data.data() + static_cast<size_t>(i) * static_cast<size_t>(dtype_size(dtype)));
}

void Tensor::set(int64_t i, const Scalar& value) {
  FJ_CHECK(i >= 0 && i < numel(), "Tensor::set index out of range");
  store_element(dtype, data.data() + static_cast<size_t>(i) * static_cast<size_t>(dtype_size(dtype)), value);
}

std::vector<int64_t> shape_sizes(const Shape& s) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const Dim& d : s) out.push_back(d.size);
  return out;
}

std::string tensor_type_string(DType dtype, const std::vector<int64_t>& shape) {
  std::string out = std::string(dtype_name(dtype)) + "[";
  for (size_t k = 0; k < shape.size(); ++k) {
    if (k) out += ", ";
    out += std::to_string(shape[k]);
  }
  return out + "]";
}

}  // namespace fusejit::ir
