#include "jit/hash.h"

#include <xxhash.h>

#include <cstring>
#include <new>

namespace fusejit::jit {

namespace {
void put_le64(unsigned char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t get_le64(const unsigned char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}
Hash128 from_xxh(XXH128_hash_t h) { return Hash128{h.low64, h.high64}; }
}  // namespace

std::string Hash128::hex() const {
  static const char digits[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[15 - i] = digits[(hi >> (4 * i)) & 0xF];
    s[31 - i] = digits[(lo >> (4 * i)) & 0xF];
  }
  return s;
}

std::optional<Hash128> Hash128::from_hex(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  Hash128 h;
  for (size_t i = 0; i < 32; ++i) {
    char c = text[i];
    uint64_t d;
    if (c >= '0' && c <= '9') d = static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f') d = static_cast<uint64_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = static_cast<uint64_t>(c - 'A' + 10);
    else return std::nullopt;
    uint64_t& half = i < 16 ? h.hi : h.lo;
    half = (half << 4) | d;
  }
  return h;
}

void Hash128::to_bytes(unsigned char out[16]) const {
  put_le64(out, lo);
  put_le64(out + 8, hi);
}

Hash128 Hash128::from_bytes(const unsigned char in[16]) { return Hash128{get_le64(in), get_le64(in + 8)}; }

Hash128 xxh3_128(std::span<const unsigned char> bytes) { return from_xxh(XXH3_128bits(bytes.data(), bytes.size())); }
Hash128 xxh3_128(std::string_view bytes) { return from_xxh(XXH3_128bits(bytes.data(), bytes.size())); }

Hasher::Hasher(uint64_t seed) : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_128bits_reset_withSeed(static_cast<XXH3_state_t*>(state_), seed);
}

Hasher::~Hasher() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Hasher::raw(const void* data, size_t size) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

// Field tags keep a string from ever hashing like an integer of the same bytes.
Hasher& Hasher::add(std::string_view s) {
  unsigned char head[9];
  head[0] = 'S';
  put_le64(head + 1, s.size());
  raw(head, sizeof head);
  raw(s.data(), s.size());
  return *this;
}

Hasher& Hasher::add_u64(uint64_t v) {
  unsigned char b[9];
  b[0] = 'U';
  put_le64(b + 1, v);
  raw(b, sizeof b);
  return *this;
}

Hasher& Hasher::add(const Hash128& h) {
  unsigned char b[17];
  b[0] = 'H';
  h.to_bytes(b + 1);
  raw(b, sizeof b);
  return *this;
}

Hash128 Hasher::digest() const { return from_xxh(XXH3_128bits_digest(static_cast<const XXH3_state_t*>(state_))); }

}  // namespace fusejit::jit
