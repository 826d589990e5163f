// Host data at the API: HostTensor, Params, f16/bf16 conversions, cache outcome names.
#include <cstdlib>
#include <cstring>
#include <new>

#include "ir/scalar/fj_scalar.h"
#include "ir/tensor.h"
#include "lib/internal.h"

namespace fusejit {

uint16_t f16_from_float(float x) { return static_cast<uint16_t>(fj_f16_bits_of(x)); }
float f16_to_float(uint16_t bits) { return fj_f16_bits_to_f32(bits); }
uint16_t bf16_from_float(float x) { return static_cast<uint16_t>(fj_bf16_bits_of(x)); }
float bf16_to_float(uint16_t bits) { return fj_bf16_bits_to_f32(bits); }

std::string_view cache_outcome_name(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::Compiled: return "compiled";
    case CacheOutcome::MemoryHit: return "memory";
    case CacheOutcome::DiskHit: return "disk";
    case CacheOutcome::Loaded: return "loaded";
    case CacheOutcome::NotBuilt: return "not built";
  }
  throw Error(ErrorKind::User, "cache_outcome_name: invalid CacheOutcome value " +
                                   std::to_string(static_cast<unsigned>(outcome)) + " (one of the enum's five)");
}

// ---- HostTensor ------------------------------------------------------------------------------

void HostTensor::Free::operator()(std::byte* p) const noexcept { std::free(p); }

HostTensor::HostTensor() : HostTensor(DType::F32, {0}) {}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  check_dtype(dtype, "host tensor");
  const std::string type = ir::tensor_type_string(to_ir(dtype), shape_);
  const int64_t n = ir::checked_numel(shape_);
  int64_t bytes = 0;
  if (n < 0 || __builtin_mul_overflow(n, static_cast<int64_t>(dtype_size(dtype)), &bytes))
    throw Error(ErrorKind::User, "host tensor " + type + ": a negative size, or a byte size that overflows 64 bits");
  bytes_ = static_cast<size_t>(bytes);
  // 64-byte aligned, never a null pointer (even for 0 bytes: a kernel argument must be an address).
  const size_t alloc = (bytes_ / 64 + 1) * 64;
  mem_.reset(static_cast<std::byte*>(std::aligned_alloc(64, alloc)));
  if (!mem_)
    throw Error(ErrorKind::User, "not enough host memory for a " + type + " tensor (" + std::to_string(bytes_) + " bytes)");
  std::memset(mem_.get(), 0, alloc);
}

// A moved-from tensor (no memory: every other one has some, an empty one too) copies as shape {0}.
HostTensor::HostTensor(const HostTensor& o) : HostTensor(o.dtype_, o.mem_ ? o.shape_ : std::vector<int64_t>{0}) {
  if (bytes_ && o.mem_) std::memcpy(mem_.get(), o.mem_.get(), bytes_);  // a moved-from one has no memory
}

HostTensor& HostTensor::operator=(const HostTensor& o) {
  if (this != &o) *this = HostTensor(o);
  return *this;
}

int64_t HostTensor::elements() const { return static_cast<int64_t>(bytes_ / dtype_size(dtype_)); }

void HostTensor::check_element_size(std::size_t size) const {
  if (size != dtype_size(dtype_))
    throw Error(ErrorKind::User, "HostTensor::values: a " + std::to_string(size) + "-byte element type for a " +
                                     std::string(dtype_name(dtype_)) + " tensor (" +
                                     std::to_string(dtype_size(dtype_)) + " bytes per element)");
}

bool operator==(const HostTensor& a, const HostTensor& b) {
  return a.dtype_ == b.dtype_ && a.shape_ == b.shape_ && a.bytes_ == b.bytes_ &&
         (a.bytes_ == 0 || std::memcmp(a.mem_.get(), b.mem_.get(), a.bytes_) == 0);
}

HostTensor HostTensor::from_floats(DType dtype, std::vector<int64_t> shape, std::span<const float> values) {
  HostTensor t(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.elements())
    throw Error(ErrorKind::User, "HostTensor::from_floats: " + std::to_string(values.size()) + " values for a " +
                                     ir::tensor_type_string(to_ir(dtype), t.shape()) + " tensor (" +
                                     std::to_string(t.elements()) + " elements)");
  const size_t esz = dtype_size(dtype);
  for (size_t i = 0; i < values.size(); ++i) {
    ir::Scalar v;
    v.dtype = ir::DType::F32;
    v.f = values[i];
    ir::store_element(to_ir(dtype), t.mem_.get() + i * esz, v);  // a cast from f32, as a Cast node does
  }
  return t;
}

std::vector<float> HostTensor::to_floats() const {
  std::vector<float> out(static_cast<size_t>(elements()));
  const size_t esz = dtype_size(dtype_);
  for (size_t i = 0; i < out.size(); ++i) {
    const ir::Scalar v = ir::load_element(to_ir(dtype_), mem_.get() + i * esz);
    out[i] = ir::is_float(v.dtype) ? static_cast<float>(v.f) : static_cast<float>(v.i);
  }
  return out;
}

// ---- Params ----------------------------------------------------------------------------------

Params::Params(std::initializer_list<std::pair<std::string, Scalar>> named) {
  for (const auto& [name, value] : named) set(name, value);
}

Params::Params(const std::vector<std::pair<std::string, Scalar>>& named) {
  for (const auto& [name, value] : named) set(name, value);
}

Params& Params::set(std::string name, Scalar value) {
  for (auto& [n, v] : named_)
    if (n == name) {
      v = value;
      return *this;
    }
  named_.emplace_back(std::move(name), value);
  return *this;
}

}  // namespace fusejit
