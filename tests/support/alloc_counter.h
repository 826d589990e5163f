// Counts the heap allocations of a process by replacing the global operator new (malloc-backed),
// so a test or benchmark can assert that a code path allocates nothing. Include it in exactly one
// .cpp file of an executable.
#pragma once

#include <atomic>
#include <cstdlib>
#include <new>

namespace alloc_counter {

inline std::atomic<bool> counting{false};
inline std::atomic<long> allocations{0};

// The allocations made while `f` runs (other threads' included).
template <class F>
long during(F&& f) {
  allocations = 0;
  counting = true;
  f();
  counting = false;
  return allocations.load();
}

}  // namespace alloc_counter

// GCC pairs the replaced operator new with free() in its mismatched-allocation check: they match.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (alloc_counter::counting.load(std::memory_order_relaxed))
    alloc_counter::allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
// The nothrow forms too (std::stable_sort's temporary buffer): else ASan sees its own operator new
// freed by the free() below (alloc-dealloc-mismatch).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (alloc_counter::counting.load(std::memory_order_relaxed))
    alloc_counter::allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop
