// fj_reduce.h: the ONE fixed reduction order of fusejit (docs/ops.md, "Reductions"), shared by
// the reference evaluator (host C++) and every generated reduction kernel (embedded after
// fj_scalar.h, compiled by NVRTC for the GPU or by the host compiler for the CPU path).
//
// The order depends only on the reduction length n, never on the GPU, block size or grid:
//  1. The n elements (index order of the reduced axes, row-major) are split into chunks of
//     FJ_RED_CHUNK consecutive elements; the last chunk may be shorter.
//  2. Within a chunk, element i goes to lane i mod FJ_RED_LANES; each lane starts from the
//     op's identity and combines its elements in increasing index order.
//  3. The lanes of a chunk are combined by a fixed binary tree: for h = LANES/2, LANES/4, ..., 1,
//     lane l (l < h) becomes op(lane l, lane l + h). Lane 0 holds the chunk's value.
//  4. Chunk values are combined by the binary tree that pairs neighbours level by level (an odd
//     last value passes up unchanged), computed with a stack as chunks arrive.
// fj_reduce_fixed() is that order, written once: a kernel calls it with its thread index and block
// size (threads share the lane array in __shared__ memory and fj_red_sync() is __syncthreads()),
// the host with (0, 1) (fj_red_sync() does nothing). Whatever the thread count, every lane and tree
// step computes the same operations on the same values, so the bits never change.
//
// Constraints as fj_scalar.h (no includes under NVRTC; fj_/FJ_ prefixes); include it after it.
#ifndef FJ_REDUCE_H
#define FJ_REDUCE_H

// Functions in structs and template specialisations cannot be `static` (FJ_FN on the host).
#ifdef FJ_DEVICE_CODE
#define FJ_RFN __device__ __forceinline__
#else
#define FJ_RFN inline
#endif

#define FJ_RED_LANES 256
#define FJ_RED_CHUNK 8192
// The most lane groups a block may split into (fj_red_chunk_range): a block of 1,024 threads reduces
// four chunks of a row at once, 256 threads each.
#define FJ_RED_MAX_GROUPS 4
// Deepest chunk stack: log2 of the most chunks a reduction may have (2^63 / FJ_RED_CHUNK) + 1.
// Every thread keeps one in local memory, which the driver reserves for every resident thread of
// the GPU: a kernel with 32-bit indexing (fewer than 2^31 elements, so at most 2^18 chunks and a
// stack of at most 19) defines it as 20 first (jit/codegen). The depth never changes the bits.
#ifndef FJ_RED_STACK
#define FJ_RED_STACK 52
#endif

// The block barrier between lane writes and tree steps. Host: nothing (one thread), unless a test
// defines FJ_RED_HOST_SYNC() to run several host threads as one block. Called only when the
// calling threads are more than one (a uniform condition in a block): a kernel whose threads each
// reduce a row of their own (nthreads == 1) must not meet at a block barrier, since its threads
// run different rows and some none.
#ifdef FJ_DEVICE_CODE
FJ_FN void fj_red_sync() { __syncthreads(); }
#elif defined(FJ_RED_HOST_SYNC)
FJ_FN void fj_red_sync() { FJ_RED_HOST_SYNC(); }
#else
FJ_FN void fj_red_sync() {}
#endif

// Lane l of a lane array at p[l * stride]: a column kernel's rows (jit/codegen) interleave their
// lane arrays, lane l of row r at l * rows + r, so a warp's threads (neighbouring rows, one lane
// each) touch neighbouring words of shared memory instead of one bank 32 times (arrays of 256
// lanes side by side put lane l of every row in one bank). Every function below takes it where it
// takes a T* (lanes[l], lanes + k); the order of the operations, so the bits, stay the same.
template <class T> struct fj_red_lanes_at {
  T* p;
  int stride;
  FJ_RFN T& operator[](long long l) const { return p[l * stride]; }
  FJ_RFN fj_red_lanes_at operator+(long long l) const { return fj_red_lanes_at{p + l * stride, stride}; }
};

// Largest and smallest values of each compute type: the identities of amin and amax.
template <class T> struct fj_red_lim;
template <> struct fj_red_lim<bool> {
  FJ_RFN static bool lo() { return false; }
  FJ_RFN static bool hi() { return true; }
};
template <> struct fj_red_lim<signed char> {
  FJ_RFN static signed char lo() { return -128; }
  FJ_RFN static signed char hi() { return 127; }
};
template <> struct fj_red_lim<unsigned char> {
  FJ_RFN static unsigned char lo() { return 0; }
  FJ_RFN static unsigned char hi() { return 255; }
};
template <> struct fj_red_lim<int> {
  FJ_RFN static int lo() { return -2147483647 - 1; }
  FJ_RFN static int hi() { return 2147483647; }
};
template <> struct fj_red_lim<long long> {
  FJ_RFN static long long lo() { return -9223372036854775807LL - 1; }
  FJ_RFN static long long hi() { return 9223372036854775807LL; }
};
template <> struct fj_red_lim<float> {
  FJ_RFN static float lo() { return fj_u2f(0xff800000u); }
  FJ_RFN static float hi() { return fj_u2f(0x7f800000u); }
};
template <> struct fj_red_lim<double> {
  FJ_RFN static double lo() { return fj_u2d(0xfff0000000000000ull); }
  FJ_RFN static double hi() { return fj_u2d(0x7ff0000000000000ull); }
};

// The combining ops: op() is the op's fj_scalar.h function (wrapping integer arithmetic, NaN-
// propagating maximum/minimum); id() starts every lane, empty() is the result of no elements. The
// float sum starts from +0.0, as NumPy's and PyTorch's do (their sum of -0.0 values is +0.0;
// PyTorch's CPU cascade_sum fills its accumulators and output with 0): so a float sum is never
// -0.0, and -0.0, the additive identity of IEEE 754, would differ from both.
struct fj_red_sum {
  template <class T> FJ_RFN static T id() { return (T)0; }
  template <class T> FJ_RFN static T empty() { return (T)0; }
  template <class T> FJ_RFN static T op(T a, T b) { return fj_add(a, b); }
};
struct fj_red_prod {
  template <class T> FJ_RFN static T id() { return (T)1; }
  template <class T> FJ_RFN static T empty() { return (T)1; }
  template <class T> FJ_RFN static T op(T a, T b) { return fj_mul(a, b); }
};
// amax/amin of nothing is refused before any kernel runs; empty() is never used.
struct fj_red_max {
  template <class T> FJ_RFN static T id() { return fj_red_lim<T>::lo(); }
  template <class T> FJ_RFN static T empty() { return fj_red_lim<T>::lo(); }
  template <class T> FJ_RFN static T op(T a, T b) { return fj_maximum(a, b); }
};
struct fj_red_min {
  template <class T> FJ_RFN static T id() { return fj_red_lim<T>::hi(); }
  template <class T> FJ_RFN static T empty() { return fj_red_lim<T>::hi(); }
  template <class T> FJ_RFN static T op(T a, T b) { return fj_minimum(a, b); }
};

// argmax/argmin: a lane holds an element's value and its index in the row (row-major over the
// reduced axes). The combine keeps the larger (argmax) or smaller (argmin) value, a NaN before any
// number (NumPy's and PyTorch's argmax and argmin both return the first NaN), and of equal values
// (-0.0 == +0.0) the smaller index: the best element by a total order, so every combining order
// gives the same index (the fixed order is kept all the same). The identity's index is past every
// element's, so an element equal to it wins. Zero elements are refused before any kernel runs.
template <class V> struct fj_red_arg {
  typedef V value_type;
  V v;
  long long i;
};
template <bool Max> struct fj_red_argbest {
  template <class T> FJ_RFN static T id() {
    typedef typename T::value_type V;
    return T{Max ? fj_red_lim<V>::lo() : fj_red_lim<V>::hi(), 9223372036854775807LL};
  }
  template <class T> FJ_RFN static T empty() { return id<T>(); }
  template <class T> FJ_RFN static T op(T a, T b) {
    const bool an = fj_isnan(a.v), bn = fj_isnan(b.v);
    if (an != bn) return an ? a : b;
    if (!an && a.v != b.v) return (Max ? b.v < a.v : a.v < b.v) ? a : b;
    return a.i <= b.i ? a : b;
  }
};
typedef fj_red_argbest<true> fj_red_argmax;
typedef fj_red_argbest<false> fj_red_argmin;

// Several reductions in one pass over a row (ir/reduce_group.h, ReduceGroupInfo::passes): a lane
// holds one value per reduction, fj_red_two<A, fj_red_two<B, C>> for three, and fj_red_pair
// combines each member with its own op at the same step of the order, so each member's result is
// the bits it has alone.
template <class A, class B> struct fj_red_two {
  typedef A first_type;
  typedef B second_type;
  A a;
  B b;
};
template <class RA, class RB> struct fj_red_pair {
  template <class T> FJ_RFN static T id() {
    return T{RA::template id<typename T::first_type>(), RB::template id<typename T::second_type>()};
  }
  template <class T> FJ_RFN static T empty() {
    return T{RA::template empty<typename T::first_type>(), RB::template empty<typename T::second_type>()};
  }
  template <class T> FJ_RFN static T op(T x, T y) {
    return T{RA::template op<typename T::first_type>(x.a, y.a), RB::template op<typename T::second_type>(x.b, y.b)};
  }
};

// Step 3 in whole warps (a GPU block of a multiple of 32 threads, or host threads acting as warps):
// warp 0 does the whole tree with two block barriers instead of nine. Lane `l` < 32 first does
// the steps h = 128, 64, 32 over its subtree, lanes l + 32 j (the same ops on the same values as
// the halving tree), then h = 16, ..., 1 exchange values with fj_red_shfl_down: lane l < h gets
// lane l + h's value (lanes >= h compute values nobody reads). -DFJ_RED_NO_WARP_TREE (an NVRTC
// option) turns it off to measure it.
#if defined(FJ_DEVICE_CODE) && !defined(FJ_RED_NO_WARP_TREE)
#define FJ_RED_WARP_TREE 1
#define FJ_RED_BLOCK_SHARED __shared__
// Lane `lane`'s value `v` of warp 0 exchanged with lane + h's (CUDA's __shfl_down_sync, one 4-byte
// word at a time: any lane type, pairs included).
template <class T>
__device__ __forceinline__ T fj_red_shfl_down(T v, int h, int lane) {
  (void)lane;
  union Words {
    T t;
    unsigned int w[(sizeof(T) + 3) / 4];
  } u;
  u.t = v;
  for (int j = 0; j < (int)((sizeof(T) + 3) / 4); ++j) u.w[j] = __shfl_down_sync(0xffffffffu, u.w[j], h);
  return u.t;
}
// Whole warps: the calling threads are the block (or one of its `groups` equal lane groups:
// fj_red_chunk_range), each a multiple of 32 threads.
FJ_FN bool fj_red_whole_warps(int nthreads, int groups) {
  return nthreads * groups == (int)blockDim.x && nthreads % 32 == 0;
}
#elif defined(FJ_RED_HOST_SHFL_DOWN) && !defined(FJ_DEVICE_CODE)
// A test runs host threads as warps: it defines FJ_RED_HOST_SHFL_DOWN(v, h, lane) too, and
// FJ_RED_HOST_WHOLE_WARPS(n) where the device's rule applies (host builds of generated kernels run
// with threads as blocks: jit/host_compile's block_threads), else the calling threads are a block.
#define FJ_RED_WARP_TREE 1
#define FJ_RED_BLOCK_SHARED static
template <class T> inline T fj_red_shfl_down(T v, int h, int lane) { return FJ_RED_HOST_SHFL_DOWN(v, h, lane); }
#ifdef FJ_RED_HOST_WHOLE_WARPS
inline bool fj_red_whole_warps(int nthreads, int groups) {
  return nthreads % 32 == 0 && FJ_RED_HOST_WHOLE_WARPS(nthreads * groups);
}
#else
inline bool fj_red_whole_warps(int nthreads, int) { return nthreads % 32 == 0; }
#endif
#endif

// Block-wide scratch of the lane groups (fj_red_chunk_range) without the warp tree: __shared__ on a
// GPU; on the host a static, which only a block of host threads (tests) ever shares.
#ifndef FJ_RED_BLOCK_SHARED
#ifdef FJ_DEVICE_CODE
#define FJ_RED_BLOCK_SHARED __shared__
#else
#define FJ_RED_BLOCK_SHARED static
#endif
#endif

#ifdef FJ_RED_WARP_TREE
template <class R, class T, class L>
FJ_FN T fj_red_lane_tree_warps(L lanes, int tid, int group) {
  static_assert(FJ_RED_LANES == 256, "the warp tree's first steps assume 256 lanes");
  FJ_RED_BLOCK_SHARED T fj_red_result[FJ_RED_MAX_GROUPS];  // each lane group's warp 0's result
  if (tid < 32) {
    T x[8];  // lanes tid + 32 j
    for (int j = 0; j < 8; ++j) x[j] = lanes[tid + 32 * j];
    for (int h = 4; h >= 1; h /= 2)  // h = 128, 64, 32 lanes: lane tid + 32 j < 32 h
      for (int j = 0; j < h; ++j) x[j] = R::template op<T>(x[j], x[j + h]);
    T v = x[0];
    for (int h = 16; h >= 1; h /= 2) v = R::template op<T>(v, fj_red_shfl_down(v, h, tid));
    if (tid == 0) fj_red_result[group] = v;
  }
  fj_red_sync();  // lanes[] is free for the next chunk; fj_red_result is written only after the next
  return fj_red_result[group];  // chunk's first barrier, which every thread reaches after reading this
}
#endif

// Step 3: the lane tree over lanes[0..FJ_RED_LANES). Thread `tid` of `nthreads` does lanes tid,
// tid + nthreads, ...; every thread returns lanes[0]. `group` of `groups`: the calling threads are
// one of a block's equal lane groups, each with its own lanes (fj_red_chunk_range), all of which
// call this together (its barriers are the block's).
template <class R, class T, class L>
FJ_FN T fj_red_lane_tree(L lanes, int tid, int nthreads, int group = 0, int groups = 1) {
#ifdef FJ_RED_WARP_TREE
  if (fj_red_whole_warps(nthreads, groups)) return fj_red_lane_tree_warps<R, T>(lanes, tid, group);
#else
  (void)group;
  (void)groups;
#endif
  for (int h = FJ_RED_LANES / 2; h >= 1; h /= 2) {
    for (int l = tid; l < h; l += nthreads) lanes[l] = R::template op<T>(lanes[l], lanes[l + h]);
    if (nthreads * groups > 1) fj_red_sync();
  }
  T v = lanes[0];
  if (nthreads * groups > 1) fj_red_sync();  // lanes[] is reused by the next chunk
  return v;
}

// Step 4, one chunk value arriving: push it, then merge the top two while the chunk count
// (1-based) has a trailing zero bit, so equal-sized subtrees pair as the level-by-level tree does.
template <class R, class T>
FJ_FN void fj_red_push(T* stack, int& depth, long long count, T v) {
  stack[depth++] = v;
  for (long long k = count; (k & 1) == 0; k >>= 1, --depth)
    stack[depth - 2] = R::template op<T>(stack[depth - 2], stack[depth - 1]);
}

// Steps 2-3 for the chunk of elements [c0, c0 + m): lanes, then the lane tree. Every thread
// returns the chunk's value. A lane's elements are loaded FJ_RED_BATCH at a time before they are
// combined (in index order all the same): a memory-bound pass keeps that many loads in flight per
// thread, not only as many as the compiler's unrolling would overlap.
#define FJ_RED_BATCH 8
template <class R, class T, class Load, class L>
FJ_FN T fj_red_chunk(long long c0, long long m, Load& load, L lanes, int tid, int nthreads, int group = 0,
                     int groups = 1) {
  for (int l = tid; l < FJ_RED_LANES; l += nthreads) {
    T a = R::template id<T>();
    long long i = l;
    for (; i + (FJ_RED_BATCH - 1) * FJ_RED_LANES < m; i += FJ_RED_BATCH * FJ_RED_LANES) {
      T v[FJ_RED_BATCH];
      for (int u = 0; u < FJ_RED_BATCH; ++u) v[u] = load(c0 + i + u * FJ_RED_LANES);
      for (int u = 0; u < FJ_RED_BATCH; ++u) a = R::template op<T>(a, v[u]);
    }
    for (; i < m; i += FJ_RED_LANES) a = R::template op<T>(a, load(c0 + i));
    lanes[l] = a;
  }
  if (nthreads * groups > 1) fj_red_sync();
  return fj_red_lane_tree<R, T>(lanes, tid, nthreads, group, groups);
}

// A pass's element loads with a vector path (the fast entry of a row kernel, jit/codegen.cpp):
// one(i) is element i; vec(i, out) writes elements i .. i + V - 1 to out[0 .. V) (i a multiple of
// V, all in the row) with V-wide memory accesses. When `on`, fj_red_chunk gives each thread V
// consecutive lanes, so one vector load feeds V lanes; every lane still combines the same elements
// in the same order, so the bits do not change. Off (unaligned rows, a strided view): one(i) only.
template <int V, class One, class Vec>
struct fj_red_vec_load {
  bool on;
  One one;
  Vec vec;
};
template <int V, class One, class Vec>
FJ_RFN fj_red_vec_load<V, One, Vec> fj_red_loads(bool on, One one, Vec vec) {
  return fj_red_vec_load<V, One, Vec>{on, one, vec};
}
#define FJ_RED_VBATCH 4  // vector loads in flight per thread (16 bytes each at most)
// Generated kernels take their vector path only where FJ_RED_VECTOR is 1: -DFJ_RED_NO_VECTOR (an
// NVRTC option) keeps the scalar loop to measure the difference (scripts/device-check.sh).
#ifdef FJ_RED_NO_VECTOR
#define FJ_RED_VECTOR 0
#else
#define FJ_RED_VECTOR 1
#endif
// Likewise kept values (docs/ops.md, "The row on chip"): -DFJ_RED_NO_KEPT compiles their reads and
// writes out (the epilogue computes them again, as with row_cache 1: the same bits), to measure both
// the compute they save and the registers their second epilogue takes (ptxas: 56 against 44 for
// the fast entry of the strict bf16 softmax on sm_90).
#ifdef FJ_RED_NO_KEPT
#define FJ_RED_KEPT 0
#else
#define FJ_RED_KEPT 1
#endif

// Steps 2-3 as fj_red_chunk, each thread taking lane groups g (lanes gV .. gV + V - 1) in turn.
// Lane gV + j's elements are i + j for i = gV, gV + LANES, ... (< m): the vector at i, and at the
// chunk's end, where fewer than V elements are left, one(i + j) for those there are.
template <class R, class T, int V, class One, class Vec, class L>
FJ_FN T fj_red_chunk(long long c0, long long m, fj_red_vec_load<V, One, Vec>& load, L lanes, int tid, int nthreads,
                     int group = 0, int groups = 1) {
  static_assert(FJ_RED_LANES % V == 0, "a thread's V lanes must tile the lanes");
  if (!load.on) return fj_red_chunk<R, T>(c0, m, load.one, lanes, tid, nthreads, group, groups);
  for (int g = tid; g < FJ_RED_LANES / V; g += nthreads) {
    T a[V];
    for (int j = 0; j < V; ++j) a[j] = R::template id<T>();
    long long i = (long long)g * V;
    for (; i + (FJ_RED_VBATCH - 1) * FJ_RED_LANES + V <= m; i += FJ_RED_VBATCH * FJ_RED_LANES) {
      T v[FJ_RED_VBATCH][V];
      for (int u = 0; u < FJ_RED_VBATCH; ++u) load.vec(c0 + i + u * FJ_RED_LANES, v[u]);
      for (int u = 0; u < FJ_RED_VBATCH; ++u)
        for (int j = 0; j < V; ++j) a[j] = R::template op<T>(a[j], v[u][j]);
    }
    for (; i + V <= m; i += FJ_RED_LANES) {
      T v[V];
      load.vec(c0 + i, v);
      for (int j = 0; j < V; ++j) a[j] = R::template op<T>(a[j], v[j]);
    }
    for (int j = 0; j < V; ++j)
      if (i + j < m) a[j] = R::template op<T>(a[j], load.one(c0 + i + j));
    for (int j = 0; j < V; ++j) lanes[g * V + j] = a[j];
  }
  if (nthreads * groups > 1) fj_red_sync();
  return fj_red_lane_tree<R, T>(lanes, tid, nthreads, group, groups);
}

// -DFJ_RED_MIN_BLOCKS=k (an NVRTC option, to measure: scripts/device-check.sh) gives the fast and
// strided entries of row kernels __launch_bounds__(256, k): ptxas keeps their registers to what k
// blocks of 256 threads an SM allow (40 for k = 6), spilling if it must, instead of its own choice.
// Their launches never pass 256 threads (jit::kReduceMaxBlock); the block size comes from the
// occupancy API, which respects the bound.
#if defined(FJ_DEVICE_CODE) && defined(FJ_RED_MIN_BLOCKS)
#define FJ_RED_ROW_BOUNDS __launch_bounds__(256, FJ_RED_MIN_BLOCKS)
#else
#define FJ_RED_ROW_BOUNDS
#endif

// Number of chunks of a reduction of length n.
FJ_FN long long fj_red_chunks(long long n) { return (n + FJ_RED_CHUNK - 1) / FJ_RED_CHUNK; }
// Length of the chunk that starts at element e0 < n.
FJ_FN long long fj_red_chunk_len(long long n, long long e0) { return n - e0 < FJ_RED_CHUNK ? n - e0 : FJ_RED_CHUNK; }

// Step 4 over chunk values that are already computed: values[0..chunks) combined by the tree of
// fj_reduce_fixed, so the result is the same bits; chunks == 0 gives R::empty(). The calling
// threads share the work (`lanes`, tid and nthreads as in fj_red_chunk): the values come
// FJ_RED_LANES at a time into `lanes`, all threads loading at once (one value per thread and
// memory latency, as a serial loop over the workspace would take, cost a split row 0.26 ms for
// 2,048 chunks on an H200). A group of FJ_RED_LANES values is a whole subtree of the level-by-level
// tree, computed by pairing neighbours at strides 1, 2, 4, ... and pushed as fj_red_push does; a
// last, partial group's levels pass an odd last value up as the tree does, and its value joins the
// stack's final right-nested merge, which is where the tree puts it.
template <class R, class T, class L>
FJ_FN T fj_red_combine_chunks(long long chunks, const T* values, L lanes, int tid, int nthreads) {
  if (chunks == 0) return R::template empty<T>();
  T stack[FJ_RED_STACK];
  int depth = 0;
  long long groups = 0;
  for (long long c0 = 0; c0 < chunks; c0 += FJ_RED_LANES) {
    const int m = chunks - c0 < FJ_RED_LANES ? (int)(chunks - c0) : FJ_RED_LANES;
    for (int l = tid; l < m; l += nthreads) lanes[l] = values[c0 + l];
    if (nthreads > 1) fj_red_sync();
    for (int s = 1; s < m; s *= 2) {
      for (int l = 2 * s * tid; l + s < m; l += 2 * s * nthreads) lanes[l] = R::template op<T>(lanes[l], lanes[l + s]);
      if (nthreads > 1) fj_red_sync();
    }
    const T v = lanes[0];
    if (nthreads > 1) fj_red_sync();  // every thread has read lanes[0] before the next group
    if (m == FJ_RED_LANES) {
      fj_red_push<R, T>(stack, depth, ++groups, v);
    } else {
      stack[depth++] = v;
    }
  }
  for (; depth > 1; --depth) stack[depth - 2] = R::template op<T>(stack[depth - 2], stack[depth - 1]);
  return stack[0];
}

// Steps 2-4 over chunks [c0, c1) of a reduction of n elements: the one place a generated kernel
// reduces chunks, so each of its reductions inlines the chunk loop once (NVRTC's time and the
// code size grow with every inlined copy of a pass's loads). `to_values` (a split row's chunk-value
// phase, fj_reduce_phase): thread 0 writes chunk c's value to values[c] (`live` only) and every
// thread returns R::id(). Otherwise the chunk values are combined by step 4's tree as they arrive
// and every thread returns the result. With `groups` > 1 (whole chunks: not with `to_values`) the
// block splits into that many equal lane groups: group g reduces chunks g, g + groups, ... into
// its own lanes, so that many chunks are reduced at once, and a round's chunk values join the
// stack in index order. Each chunk is the same operations on the same elements as with one group,
// so the bits are the same. A pass over a row on chip with FJ_RED_LANES lanes keeps 256 threads
// busy: a block of 1,024 (a long row's, jit/gpu_runner) had three quarters of its threads idle in
// every pass. Every thread of the block calls this (the groups meet at the same barriers: a group
// without a chunk in the last round reduces nothing).
template <class R, class T, class Load, class L>
FJ_FN T fj_red_chunk_range(long long n, long long c0, long long c1, Load& load, L lanes, int tid, int nthreads,
                           int groups, bool to_values, T* values, bool live) {
  FJ_RED_BLOCK_SHARED T fj_red_gvals[FJ_RED_MAX_GROUPS];  // a round's chunk values (groups > 1)
  // groups == 1 spelled out: the compiler cannot see tid / nthreads == 0, and the fast and
  // strided entries (one lane array) would carry the group arithmetic in registers
  const int per = groups > 1 ? nthreads / groups : nthreads, g = groups > 1 ? tid / per : 0;
  const int gtid = groups > 1 ? tid - g * per : tid;
  T stack[FJ_RED_STACK];
  int depth = 0;
  long long count = 0;
  for (long long r0 = c0; r0 < c1; r0 += groups) {
    const long long c = r0 + g, e0 = c * FJ_RED_CHUNK;
    const long long m = c < c1 ? fj_red_chunk_len(n, e0) : 0;  // a group past the range: nothing
    const T v = fj_red_chunk<R, T>(e0, m, load, lanes + g * FJ_RED_LANES, gtid, per, g, groups);
    if (to_values) {
      if (tid == 0 && live) values[c] = v;
    } else if (groups == 1) {
      fj_red_push<R, T>(stack, depth, ++count, v);
    } else {
      if (gtid == 0) fj_red_gvals[g] = v;  // read below by every thread before the next round's
      fj_red_sync();                       // first barrier, after which it is written again
      for (int j = 0; j < groups && r0 + j < c1; ++j) fj_red_push<R, T>(stack, depth, ++count, fj_red_gvals[j]);
    }
  }
  if (to_values) return R::template id<T>();
  for (; depth > 1; --depth) stack[depth - 2] = R::template op<T>(stack[depth - 2], stack[depth - 1]);
  return stack[0];
}

// The lane groups fj_reduce_fixed splits a block of `nthreads` into for `chunks` chunks, with room
// for `lane_groups` lane arrays: one per FJ_RED_LANES threads, no more than the chunks, whole warps
// each. -DFJ_RED_NO_GROUPS (an NVRTC option) keeps one, to measure the difference.
FJ_FN int fj_red_groups(long long chunks, int nthreads, int lane_groups) {
#ifdef FJ_RED_NO_GROUPS
  (void)chunks;
  (void)nthreads;
  (void)lane_groups;
  return 1;
#else
  int g = lane_groups < FJ_RED_MAX_GROUPS ? lane_groups : FJ_RED_MAX_GROUPS;
  if (g > nthreads / FJ_RED_LANES) g = nthreads / FJ_RED_LANES;
  if (g > chunks) g = (int)chunks;
  while (g > 1 && nthreads % (32 * g) != 0) --g;
  return g > 1 ? g : 1;
#endif
}

// ---- A row split over blocks (docs/ops.md, "A row split over blocks") ----
// A kernel launched several times on one stream, `phase` 1, 2, ... (0: not split, one block per
// row). The reductions of level j (ir/reduce_group.h) use phases 2j - 1 (`row_split` blocks per
// row each compute the values of their consecutive chunks) and 2j (one block per row combines
// them and keeps the row's value); a last odd phase writes the element outputs, each block its
// chunks' elements. The workspace `ws` holds, in 8-byte slots (every compute type fits one), the
// row values of the `nslots` reductions (nslots * rows slots), then their chunk values. A pass's
// value wider than a slot (fj_red_two of 8-byte members) takes fj_red_words<T>::n consecutive
// slots: its slot numbers are `slot` to `slot + n - 1`, and `nslots` counts them all.

// Chunks [c0, c1) of part `part` of `parts` of a row of `chunks` chunks: ceil(chunks / parts)
// consecutive chunks each (the last parts may have fewer or none).
FJ_FN void fj_red_part_chunks(long long chunks, long long part, long long parts, long long& c0, long long& c1) {
  const long long per = (chunks + parts - 1) / parts;
  c0 = part * per < chunks ? part * per : chunks;
  c1 = c0 + per < chunks ? c0 + per : chunks;
}

// The elements [k0, k1) a block writes in the element phase: its part's chunks (phase > 0), or the
// whole row of n elements (phase 0).
FJ_FN void fj_red_part_elements(int phase, long long n, long long part, long long parts, long long& k0, long long& k1) {
  k0 = 0;
  k1 = n;
  if (phase == 0) return;
  fj_red_part_chunks(fj_red_chunks(n), part, parts, k0, k1);
  k0 = k0 * FJ_RED_CHUNK < n ? k0 * FJ_RED_CHUNK : n;
  k1 = k1 * FJ_RED_CHUNK < n ? k1 * FJ_RED_CHUNK : n;
}

// The 8-byte slots a value of type T takes in the workspace.
template <class T> struct fj_red_words {
  enum { n = (int)((sizeof(T) + 7) / 8) };
};

// The slot of reduction `slot`'s value for row `row`, and the first of its chunk values; null
// without a workspace (phase 0).
template <class T>
FJ_FN T* fj_red_row_slot(unsigned long long* ws, long long slot, long long rows, long long row) {
  return ws ? (T*)(ws + slot * rows + row * fj_red_words<T>::n) : (T*)0;
}
template <class T>
FJ_FN T* fj_red_chunk_slots(unsigned long long* ws, long long nslots, long long slot, long long rows, long long row,
                            long long n) {
  return ws ? (T*)(ws + nslots * rows + (slot * rows + row * fj_red_words<T>::n) * fj_red_chunks(n)) : (T*)0;
}

// One reduction of a row whose chunk values are computed in phase `first`: phase 0 reduces the
// whole row (as fj_reduce_fixed, with `lane_groups` lane arrays in `lanes`); phase `first`
// computes the values of this part's chunks into values[] (thread 0 writes them) and returns
// R::id() (unused); phase first + 1 combines them
// (step 4, the same tree as fj_reduce_fixed, so the same bits) and keeps the result in *kept;
// later phases return *kept. Each chunk value is the same operations on the same elements as in one
// block, so the bits never depend on the split. `live` false: the calling threads repeat another
// row only to meet the block's barriers (a column kernel's rows past the end) and write nothing.
// Phases 0 and `first` share one fj_red_chunk_range call: one inlined copy of the pass's loads.
template <class R, class T, class Load, class L>
FJ_FN T fj_reduce_phase(int phase, int first, long long n, long long part, long long parts, Load load, L lanes,
                        int tid, int nthreads, T* values, T* kept, bool live = true, int lane_groups = 1) {
  if (phase == 0 && n == 0) return R::template empty<T>();
  if (phase > first + 1) return *kept;
  if (phase == first + 1) {
    const T v = fj_red_combine_chunks<R, T>(fj_red_chunks(n), values, lanes, tid, nthreads);
    if (tid == 0 && live) *kept = v;
    return v;
  }
  long long c0 = 0, c1 = fj_red_chunks(n);
  int groups = 1;
  if (phase != 0) {
    fj_red_part_chunks(c1, part, parts, c0, c1);
  } else if (lane_groups > 1) {  // a constant where the kernel's entry is inlined: the others compile without it
    groups = fj_red_groups(c1, nthreads, lane_groups);
  }
  return fj_red_chunk_range<R, T>(n, c0, c1, load, lanes, tid, nthreads, groups, phase != 0, values, live);
}

// Reduces elements 0..n-1, element i being load(i) (a compute-type value), in the fixed order.
// `lanes`: lane_groups * FJ_RED_LANES values of scratch shared by the `nthreads` threads calling
// together (each with its own `tid`); every thread returns the result. n == 0 gives R::empty().
// With more than one lane array, a block of at least 512 threads reduces several chunks at once
// (fj_red_chunk_range's lane groups).
template <class R, class T, class Load>
FJ_FN T fj_reduce_fixed(long long n, Load load, T* lanes, int tid, int nthreads, int lane_groups = 1) {
  return fj_reduce_phase<R, T>(0, 1, n, 0, 1, load, lanes, tid, nthreads, (T*)0, (T*)0, true, lane_groups);
}

// mean = sum / n, n converted to the compute type (rounded for n > 2^24 in f32, as PyTorch does);
// n == 0 gives NaN (0/0), as torch.mean of nothing.
FJ_FN float fj_red_mean(float sum, long long n) { return sum / (float)n; }
FJ_FN double fj_red_mean(double sum, long long n) { return sum / (double)n; }
// The divisor of a mean with a correction c (PyTorch's var/std: `correction`, ATen's
// WelfordOps: `nf > correction ? nf - correction : 0`): a sum of squared deviations over n - c,
// and over 0 (inf or NaN, as torch) when n <= c.
FJ_FN long long fj_red_divisor(long long n, long long c) { return n > c ? n - c : 0; }

#endif  // FJ_REDUCE_H
