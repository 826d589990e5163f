// 128-bit content keys for the kernel cache: XXH3-128 (xxHash), fed field by field with explicit
// lengths and little-endian integers so a key never depends on pointers, padding, container order
// or the host's byte order, and is therefore the same in every process and on every machine.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace fusejit::jit {

// A 128-bit hash value (XXH3-128: low and high 64-bit halves).
struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;

  // 32 lowercase hex digits, high half first (the order xxhsum prints).
  std::string hex() const;
  // Parses hex() output; nullopt for anything that is not exactly 32 hex digits.
  static std::optional<Hash128> from_hex(std::string_view text);
  // The 16 bytes of the value, little-endian lo then hi (the on-disk form).
  void to_bytes(unsigned char out[16]) const;
  static Hash128 from_bytes(const unsigned char in[16]);

  friend bool operator==(const Hash128&, const Hash128&) = default;
  friend auto operator<=>(const Hash128&, const Hash128&) = default;
};

// std::hash-compatible functor so Hash128 can key an unordered_map (the value is already uniform).
struct Hash128Hasher {
  size_t operator()(const Hash128& h) const noexcept { return static_cast<size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull)); }
};

// XXH3-128 of a byte range in one call.
Hash128 xxh3_128(std::span<const unsigned char> bytes);
Hash128 xxh3_128(std::string_view bytes);

// Streaming XXH3-128 over typed fields. Each field is framed (a tag byte and, for strings, a
// 64-bit length) so that ("ab","c") and ("a","bc") give different keys. Integers are encoded
// little-endian at a fixed width. Not copyable (owns an XXH3 state); cheap to construct.
class Hasher {
 public:
  // seed 0 gives the cache key; another seed gives an independent hash of the same fields
  // (the cache's collision check).
  explicit Hasher(uint64_t seed = 0);
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  Hasher& add(std::string_view s);           // a string field (length-prefixed)
  Hasher& add(const char* s) { return add(std::string_view(s)); }
  Hasher& add(const std::string& s) { return add(std::string_view(s)); }
  Hasher& add_u64(uint64_t v);               // an unsigned integer field
  Hasher& add_i64(int64_t v) { return add_u64(static_cast<uint64_t>(v)); }
  Hasher& add_bool(bool v) { return add_u64(v ? 1 : 0); }
  Hasher& add(const Hash128& h);             // a nested key
  Hash128 digest() const;                     // may be called more than once

 private:
  void raw(const void* data, size_t size);
  void* state_;  // XXH3_state_t*, opaque here so xxhash.h stays out of this header
};

}  // namespace fusejit::jit
