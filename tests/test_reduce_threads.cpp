// The fixed reduction order does not depend on the thread count: fj_reduce_fixed run by 1, 2, 3,
// 32, 256 and 512 host threads acting as one block (and 512 to 1,024 in lane groups) (a std::barrier as fj_red_sync(), the lane
// array shared, as __shared__ memory is on the GPU) gives the same bits as the one-thread run the
// reference evaluator makes, for every combining op, at chunk edges and prime lengths. And a row
// split over blocks (fj_reduce_phase: chunk values by `parts` blocks, then combined and kept)
// gives the same bits for every number of parts.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

namespace {
std::barrier<>* g_block = nullptr;  // the block being run (one at a time)
// Its warps (threads 32w .. 32w + 31), when its thread count is 32k: warp 0 of each lane group
// (fj_red_chunk_range) runs the warp tree, all groups at once.
constexpr int kMaxWarps = 1024 / 32;
std::barrier<>* g_warps[kMaxWarps] = {};
unsigned char g_warp_words[kMaxWarps][32][32];  // the values each warp exchanges
thread_local int t_thread = 0;  // the calling host thread's index in the block (threadIdx.x)

// CUDA's __shfl_down_sync(full mask, v, h) for the calling thread's warp: lane l gets lane l + h's
// value (its own where l + h >= 32), every lane taking part.
template <class T>
T host_shfl_down(T v, int h, int lane) {
  const int w = t_thread / 32;  // `lane` is t_thread % 32: fj_reduce.h passes the lane in warp 0
  static_assert(sizeof(T) <= sizeof(g_warp_words[0][0]));
  std::memcpy(g_warp_words[w][lane], &v, sizeof(T));
  g_warps[w]->arrive_and_wait();
  T got = v;
  if (lane + h < 32) std::memcpy(&got, g_warp_words[w][lane + h], sizeof(T));
  g_warps[w]->arrive_and_wait();
  return got;
}

// Runs f(t) on `nthreads` host threads acting as one block (t_thread = t): a barrier for the
// block and one per whole warp.
template <class F>
void run_block_threads(int nthreads, F f) {
  std::barrier<> block(nthreads);
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  for (int w = 0; w < nthreads / 32 && w < kMaxWarps; ++w) {
    warps.push_back(std::make_unique<std::barrier<>>(32));
    g_warps[w] = warps.back().get();
  }
  g_block = &block;
  std::vector<std::thread> threads;
  for (int t = 0; t < nthreads; ++t)
    threads.emplace_back([&, t] {
      t_thread = t;
      f(t);
    });
  for (std::thread& th : threads) th.join();
  g_block = nullptr;
  for (auto& w : g_warps) w = nullptr;
}
}  // namespace
#define FJ_RED_HOST_SYNC() g_block->arrive_and_wait()
// Thread counts of 32k run fj_reduce.h's warp tree (fj_red_lane_tree_warps) as a GPU block does.
#define FJ_RED_HOST_SHFL_DOWN(v, h, lane) host_shfl_down(v, h, lane)
#include "ir/scalar/fj_scalar.h"
#include "ir/scalar/fj_reduce.h"
#include "jit/codegen.h"

// The lane arrays codegen declares for a long-row entry are those fj_reduce.h makes room for.
static_assert(FJ_RED_MAX_GROUPS == fusejit::jit::kMaxLaneGroups, "one number of lane groups");

namespace {

// Whether two lane values have the same bits: a pass's pair member by member (its padding bytes
// are indeterminate: clang leaves them as they were, so memcmp of the whole struct may differ).
template <class T>
bool same_bits(const T& x, const T& y) {
  return std::memcmp(&x, &y, sizeof(T)) == 0;
}
template <class A, class B>
bool same_bits(const fj_red_two<A, B>& x, const fj_red_two<A, B>& y) {
  return same_bits(x.a, y.a) && same_bits(x.b, y.b);
}

// fj_reduce_fixed of n elements through `load` (a load function or fj_red_loads) by `nthreads`
// host threads acting as one block, with `lane_groups` lane arrays; every thread must return the
// same bits.
template <class R, class T, class Load>
T run_threads(long long n, Load load, int nthreads, int lane_groups = 1) {
  std::vector<T> lanes(static_cast<size_t>(FJ_RED_LANES * lane_groups));
  std::vector<T> result(static_cast<size_t>(nthreads));
  run_block_threads(nthreads, [&](int t) {
    result[static_cast<size_t>(t)] = fj_reduce_fixed<R, T>(n, load, lanes.data(), t, nthreads, lane_groups);
  });
  for (const T& r : result) CHECK(same_bits(r, result[0]));  // every thread agrees
  return result[0];
}

template <class R, class T>
T run_block(const std::vector<T>& x, int nthreads, int lane_groups = 1) {
  return run_threads<R, T>(static_cast<long long>(x.size()), [&](long long i) { return x[static_cast<size_t>(i)]; },
                           nthreads, lane_groups);
}

template <class R>
void check_thread_counts(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& f : x) f = std::ldexp(mant(rng), static_cast<int>(rng() % 41) - 20);
  if (n > 3) x[n / 3] = -0.0f;
  const float one = run_block<R, float>(x, 1);
  for (int threads : {2, 3, 32, 256, 512}) {
    CAPTURE(threads);
    const float many = run_block<R, float>(x, threads);
    CHECK(std::memcmp(&one, &many, 4) == 0);
  }
}

// fj_reduce_phase's launches for a reduction of level 2 (first = 3), each block run by `nthreads`
// threads: phase 3 by blocks 0..parts-1 (in reverse, as a GPU may schedule them), phase 4 by one
// block per row, then phase 5 (a later level's launch) reads the kept value back.
template <class R, class T>
T run_split(const std::vector<T>& x, long long parts, int nthreads) {
  const long long n = static_cast<long long>(x.size());
  std::vector<T> values(static_cast<size_t>(fj_red_chunks(n)) + 1), lanes(FJ_RED_LANES), result(static_cast<size_t>(nthreads));
  T kept{};
  auto load = [&](long long i) { return x[static_cast<size_t>(i)]; };
  auto block = [&](int phase, long long part) {
    run_block_threads(nthreads, [&](int t) {
      result[static_cast<size_t>(t)] =
          fj_reduce_phase<R, T>(phase, 3, n, part, parts, load, lanes.data(), t, nthreads, values.data(), &kept);
    });
  };
  for (long long p = parts; p-- > 0;) block(3, p);
  block(4, 0);
  for (const T& r : result) CHECK(std::memcmp(&r, &result[0], sizeof(T)) == 0);
  const T combined = result[0];
  CHECK(std::memcmp(&kept, &combined, sizeof(T)) == 0);
  block(5, parts - 1);
  CHECK(std::memcmp(&result[0], &combined, sizeof(T)) == 0);
  return combined;
}

}  // namespace

TEST_CASE("a row split over blocks: the same bits for every number of parts") {
  for (size_t n : {1u, 8192u, 8193u, 2u * 8192u, 5u * 8192u + 1u, 13u * 8192u + 4099u, 300u * 8192u + 3u}) {
    CAPTURE(n);
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
    std::vector<float> x(n);
    for (float& f : x) f = std::ldexp(mant(rng), static_cast<int>(rng() % 41) - 20);
    const float sum = run_block<fj_red_sum, float>(x, 1), mx = run_block<fj_red_max, float>(x, 1);
    for (long long parts : {1LL, 2LL, 3LL, 4LL, 7LL, 14LL, 40LL})
      for (int threads : {1, 32}) {
        CAPTURE(parts);
        CAPTURE(threads);
        const float s = run_split<fj_red_sum, float>(x, parts, threads), m = run_split<fj_red_max, float>(x, parts, threads);
        CHECK(std::memcmp(&s, &sum, 4) == 0);
        CHECK(std::memcmp(&m, &mx, 4) == 0);
      }
  }
  // An empty row (never split by the launcher) still gives the identity of an empty reduction.
  const std::vector<double> none;
  CHECK(run_split<fj_red_prod, double>(none, 3, 1) == 1.0);
}

namespace {
// The chunk tree as docs/ops.md words it, level by level: neighbours pair, an odd last value
// passing up unchanged.
float level_tree_sum(std::vector<float> v) {
  while (v.size() > 1) {
    std::vector<float> up;
    for (size_t i = 0; i + 1 < v.size(); i += 2) up.push_back(v[i] + v[i + 1]);
    if (v.size() % 2 == 1) up.push_back(v.back());
    v = std::move(up);
  }
  return v[0];
}

// fj_red_combine_chunks run by `nthreads` host threads as one block.
float combine_threads(const std::vector<float>& values, int nthreads) {
  std::vector<float> lanes(FJ_RED_LANES), result(static_cast<size_t>(nthreads));
  run_block_threads(nthreads, [&](int t) {
    result[static_cast<size_t>(t)] = fj_red_combine_chunks<fj_red_sum, float>(
        static_cast<long long>(values.size()), values.data(), lanes.data(), t, nthreads);
  });
  for (float r : result) CHECK(std::memcmp(&r, &result[0], 4) == 0);  // every thread agrees
  return result[0];
}
}  // namespace

// The combining block loads its chunk values FJ_RED_LANES at a time and pairs them in shared memory:
// the same tree as the level-by-level one, whatever the count (groups of 256 whole, partial, many).
TEST_CASE("a split row's chunk values combine by the level-by-level tree, for every thread count") {
  for (size_t chunks : {1u, 2u, 3u, 5u, 255u, 256u, 257u, 384u, 511u, 512u, 513u, 1000u, 1024u, 1283u}) {
    CAPTURE(chunks);
    std::mt19937 rng(static_cast<uint32_t>(chunks) + 17);
    std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
    std::vector<float> values(chunks);
    for (float& f : values) f = std::ldexp(mant(rng), static_cast<int>(rng() % 61) - 30);
    const float want = level_tree_sum(values);
    for (int threads : {1, 2, 3, 32, 100, 256, 300}) {
      CAPTURE(threads);
      const float got = combine_threads(values, threads);
      CHECK(std::memcmp(&got, &want, 4) == 0);
    }
  }
}

TEST_CASE("a split row's parts cover its chunks and elements once, in order") {
  for (long long n : {1LL, 8191LL, 8192LL, 8193LL, 37LL * 8192 + 5}) {
    const long long chunks = fj_red_chunks(n);
    for (long long parts : {1LL, 2LL, 3LL, 8LL, 40LL}) {
      CAPTURE(n);
      CAPTURE(parts);
      long long next_chunk = 0, next_elem = 0;
      for (long long p = 0; p < parts; ++p) {
        long long c0, c1, k0, k1;
        fj_red_part_chunks(chunks, p, parts, c0, c1);
        fj_red_part_elements(1, n, p, parts, k0, k1);
        CHECK(c0 == next_chunk);
        CHECK(c1 >= c0);
        CHECK(k0 == next_elem);
        CHECK(k1 >= k0);
        next_chunk = c1;
        next_elem = k1;
      }
      CHECK(next_chunk == chunks);
      CHECK(next_elem == n);
      long long k0, k1;
      fj_red_part_elements(0, n, 0, 1, k0, k1);  // not split: the whole row
      CHECK((k0 == 0 && k1 == n));
    }
  }
}

TEST_CASE("fixed order: the same bits for every thread count (block size)") {
  for (size_t n : {0u, 1u, 255u, 257u, 7919u, 8192u, 8193u, 3u * 8192u + 7u}) {
    CAPTURE(n);
    check_thread_counts<fj_red_sum>(n, static_cast<uint32_t>(n) + 1);
    check_thread_counts<fj_red_prod>(n, static_cast<uint32_t>(n) + 2);
    check_thread_counts<fj_red_max>(n, static_cast<uint32_t>(n) + 3);
    check_thread_counts<fj_red_min>(n, static_cast<uint32_t>(n) + 4);
  }
}

// A block of 512 or more threads with several lane arrays reduces that many chunks at once
// (fj_red_chunk_range: a long row's 1,024-thread block); the chunk values, and so the bits, are
// those of one thread. Chunk counts below, at and above the groups, partial last rounds, a pair
// lane and vector loads.
TEST_CASE("lane groups: several chunks at once, the same bits") {
  typedef fj_red_two<float, double> Pair;
  for (size_t n : {8192u + 1u, 2u * 8192u, 3u * 8192u + 5u, 4u * 8192u, 5u * 8192u + 1u, 9u * 8192u + 77u}) {
    CAPTURE(n);
    std::mt19937 rng(static_cast<uint32_t>(n) + 23);
    std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
    std::vector<float> x(n);
    for (float& f : x) f = std::ldexp(mant(rng), static_cast<int>(rng() % 41) - 20);
    // Chunk sums of 2^25, small, small, -2^25, ... (elements of at most 1 and one large one): the
    // small ones vanish next to 2^25 (its ulp is 4) or add up, as the order says.
    for (float& f : x) f = std::ldexp(f, -20);
    for (size_t c = 0; c * 8192 < n; ++c) x[c * 8192] = c % 4 == 0 ? 0x1p25f : c % 4 == 3 ? -0x1p25f : 0.0f;
    std::vector<float> xn = x;
    xn[n / 2] = std::nanf("");  // amax propagates it from whichever chunk holds it
    std::vector<Pair> xp(n);
    for (size_t i = 0; i < n; ++i) xp[i] = Pair{x[i], static_cast<double>(x[(i * 7) % n])};
    const float sum = run_block<fj_red_sum, float>(x, 1), mx = run_block<fj_red_max, float>(xn, 1);
    const Pair pair = run_block<fj_red_pair<fj_red_sum, fj_red_max>, Pair>(xp, 1);
    CHECK(fj_red_groups(fj_red_chunks(static_cast<long long>(n)), 1024, 4) == std::min<int>(4, static_cast<int>(fj_red_chunks(static_cast<long long>(n)))));
    for (int threads : {512, 640, 768, 1024}) {
      CAPTURE(threads);
      const float s = run_block<fj_red_sum, float>(x, threads, 4), m = run_block<fj_red_max, float>(xn, threads, 4);
      CHECK(std::memcmp(&s, &sum, 4) == 0);
      CHECK(std::memcmp(&m, &mx, 4) == 0);
      CHECK(same_bits(run_block<fj_red_pair<fj_red_sum, fj_red_max>, Pair>(xp, threads, 2), pair));
    }
    auto one = [&](long long i) { return x[static_cast<size_t>(i)]; };
    auto vec = [&](long long i, float* out) {
      for (int j = 0; j < 4; ++j) out[j] = x[static_cast<size_t>(i + j)];
    };
    const float sv = run_threads<fj_red_sum, float>(static_cast<long long>(n), fj_red_loads<4>(n % 4 == 0, one, vec), 1024, 4);
    CHECK(std::memcmp(&sv, &sum, 4) == 0);
  }
  // Where groups cannot run: fewer threads than two lane arrays need, one chunk, one lane array.
  CHECK(fj_red_groups(4, 256, 4) == 1);
  CHECK(fj_red_groups(1, 1024, 4) == 1);
  CHECK(fj_red_groups(8, 1024, 1) == 1);
  CHECK(fj_red_groups(8, 768, 4) == 3);  // three arrays of 256 threads
  CHECK(fj_red_groups(8, 992, 4) == 1);  // 31 warps: no equal groups of whole warps
}

namespace {
// Every thread count, for lane type T (bits compared with the one-thread run).
template <class R, class T, class Make>
void check_type(size_t n, Make make) {
  std::vector<T> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = make(i);
  const T one = run_block<R, T>(x, 1);
  for (int threads : {32, 64, 96, 256}) {
    CAPTURE(threads);
    const T many = run_block<R, T>(x, threads);
    CHECK(same_bits(one, many));
  }
}
}  // namespace

TEST_CASE("the warp tree: lane types of 1 to 16 bytes, pairs included, as one thread") {
  // Wider and narrower than the 4-byte word the warp exchange moves, and a pass of two reductions.
  typedef fj_red_two<float, double> Pair;
  for (size_t n : {1u, 33u, 256u, 4099u, 8192u + 300u}) {
    CAPTURE(n);
    std::mt19937 rng(static_cast<uint32_t>(n) + 7);
    auto real = [&](size_t) { return std::ldexp(static_cast<double>(rng() % 2001) - 1000.0, static_cast<int>(rng() % 61) - 30); };
    check_type<fj_red_sum, double>(n, real);
    check_type<fj_red_max, signed char>(n, [&](size_t) { return static_cast<signed char>(rng()); });
    check_type<fj_red_sum, long long>(n, [&](size_t) { return static_cast<long long>(rng()) << 31; });
    check_type<fj_red_pair<fj_red_sum, fj_red_max>, Pair>(n, [&](size_t i) { return Pair{static_cast<float>(real(i)), real(i)}; });
  }
}

namespace {
// fj_reduce_fixed through a vector load (fj_red_loads: V lanes per thread) by `nthreads` threads.
template <int V, class R>
float run_vector(const std::vector<float>& x, int nthreads) {
  const long long n = static_cast<long long>(x.size());
  std::atomic<bool> misaligned{false};
  auto one = [&](long long i) { return x[static_cast<size_t>(i)]; };
  auto vec = [&](long long i, float* out) {
    if (i % V != 0 || i + V > n) misaligned = true;  // aligned, whole vectors in the row
    for (int j = 0; j < V; ++j) out[j] = x[static_cast<size_t>(std::min(i + j, n - 1))];
  };
  const float r = run_threads<R, float>(n, fj_red_loads<V>(true, one, vec), nthreads);
  CHECK(!misaligned);
  return r;
}

template <int V>
void check_vector(const std::vector<float>& x, const float sum, const float mx) {
  for (int threads : {1, 3, 32, 256 / V}) {
    CAPTURE(V);
    CAPTURE(threads);
    const float s = run_vector<V, fj_red_sum>(x, threads), m = run_vector<V, fj_red_max>(x, threads);
    CHECK(std::memcmp(&s, &sum, 4) == 0);
    CHECK(std::memcmp(&m, &mx, 4) == 0);
  }
}
}  // namespace

TEST_CASE("vector loads (V lanes per thread): the same lanes, the same bits") {
  // Lengths around the vector batch (4 x 256 elements a round), the chunk and a partial vector.
  for (size_t n : {1u, 3u, 8u, 255u, 1023u, 1024u, 1025u, 4096u + 5u, 8191u, 8192u, 8193u, 2u * 8192u + 1031u}) {
    CAPTURE(n);
    std::mt19937 rng(static_cast<uint32_t>(n) + 11);
    std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
    std::vector<float> x(n);
    for (float& f : x) f = std::ldexp(mant(rng), static_cast<int>(rng() % 41) - 20);
    const float sum = run_block<fj_red_sum, float>(x, 1), mx = run_block<fj_red_max, float>(x, 1);
    check_vector<2>(x, sum, mx);
    check_vector<4>(x, sum, mx);
    check_vector<8>(x, sum, mx);
  }
}
