// Fusion group: 7 op(s), iteration space [B, V], 32-bit index math.
// Layout: r1 i32 in:[0,2):C k0.1:0.1 (docs/architecture.md, "A kernel's layout line"). Outputs: v3 (token), v9 (p).
// Inputs: v0 (logits).
// Reduction kernel: axes [1] of the iteration space, one block per row (threads share the lanes), or for a few long rows
// row_split blocks per row in several launches (fj_reduce_phase).
// Every reduction combines a row's elements in fusejit's fixed order (fj_reduce.h:
// chunks of FJ_RED_CHUNK, element i to lane
// i mod FJ_RED_LANES in index order, lanes by a halving tree), whatever the block size.
// Entry points: fj_argmax_14dac2a20a268d05 for C-contiguous tensors (stride 1 along a row: fj_fast), fj_argmax_14dac2a20a268d05_s for any strides.
template <bool fj_fast, int fj_lane_groups>
static __device__ __forceinline__ void fj_argmax_14dac2a20a268d05_rows(
    const fj_bf16* in_v0,
    long long* out_v3,
    float* out_v9,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ost_v3_0,
    unsigned long long ost_v3_1,
    unsigned long long ost_v9_0,
    unsigned long long ost_v9_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  __shared__ unsigned long long fj_lane_buf[fj_lane_groups * ((FJ_RED_LANES * 24 + 7) / 8)];
  fj_red_two<fj_red_arg<float>, float>* const fj_lanes_arg_float_float = (fj_red_two<fj_red_arg<float>, float>*)fj_lane_buf;
  float* const fj_lanes_float = (float*)fj_lane_buf;
  const float v8 = 0x1p+0f;  // v8 = const 1.0 : f32  [argmax.graph:12]
  // Strides along the row: 1 in the fast entry (C-contiguous tensors)
  const unsigned long long fj_ist_v0 = fj_fast ? 1ull : ist_v0_1;
  // The vector path: 8 elements a vector access along the row (the fast entry; vec_ok: rows of a
  // multiple of 8 elements, 16-byte aligned pointers)
  const bool fj_vector = FJ_RED_VECTOR && fj_fast && vec_ok != 0;
  // The row on chip (docs/ops.md): the inputs several passes read, copied into shared memory at
  // the start of each row when the launch gave room for them (row_cache 1 to 3; not in a split row's launches)
  FJK_DYNAMIC_SHARED(fj_row_cache);
  const bool fj_rc = row_cache != 0 && split_phase == 0;
  fj_bf16* const fj_rc_v0 = fjk_shared_region<fj_bf16>(fj_row_cache, 0, fj_rc);
  const int fj_tid = (int)threadIdx.x, fj_nt = (int)blockDim.x;
  // One block per row; row_split blocks per row in the odd launches of a split row
  const unsigned int fj_parts = (split_phase & 1) ? row_split : 1;
  for (unsigned int fj_b = blockIdx.x; fj_b < rows * fj_parts; fj_b += gridDim.x) {
    const unsigned int o = fj_b / fj_parts, fj_part = fj_b - o * fj_parts;
    unsigned int rem_o = o;
    const unsigned int c0 = rem_o;
    const unsigned long long ib_v0 = (unsigned long long)c0 * ist_v0_0;
    const unsigned long long ob_v3 = (unsigned long long)c0 * ost_v3_0;
    const unsigned long long ob_v9 = (unsigned long long)c0 * ost_v9_0;
    if (fj_rc) {  // the row on chip: copied by the whole block, then every pass reads it there
      fjk_stage_row(fj_rc_v0, in_v0 + ib_v0, (long long)row_len, fj_ist_v0, fj_tid, fj_nt);
      fjk_stage_wait();
      if (fj_nt > 1) fj_red_sync();
    }
    // The rows the passes read: on chip when the launch keeps them there, else in memory
    const fj_bf16* const fj_row_v0 = fj_rc ? fj_rc_v0 : in_v0 + ib_v0;
    const unsigned long long fj_rst_v0 = fj_rc ? 1ull : fj_ist_v0;
    // One pass for v3 (token), v4 (m): each in the fixed order of fj_reduce.h, as alone
    static_assert(sizeof(fj_red_two<fj_red_arg<float>, float>) == 24, "the lane layout ir::pass_lane_bytes sizes the workspace by");
    const fj_red_two<fj_red_arg<float>, float> fj_pass0 = fj_reduce_phase<fj_red_pair<fj_red_argmax, fj_red_max>, fj_red_two<fj_red_arg<float>, float>>(split_phase, 1, (long long)row_len, fj_part, fj_parts, fj_red_loads<8>(fj_vector && !fj_rc, [&](long long fj_i) -> fj_red_two<fj_red_arg<float>, float> {
      const fj_bf16 v0h = fj_row_v0[(unsigned long long)fj_i * fj_rst_v0];
      const float v0 = fj_load(v0h);
      const float v2 = fj_cvt_f32(v0);  // v2 (x) = cast(v0, f32) : f32  [argmax.graph:9]
      return fj_red_two<fj_red_arg<float>, float>{fj_red_arg<float>{v2, fj_i}, v2};
    },
        [&](long long fj_i, fj_red_two<fj_red_arg<float>, float>* fj_out) {
      const unsigned int fj_k = (unsigned int)fj_i;  // elements fj_k .. fj_k + 7: this thread's 8 lanes
      const fj_vec<fj_bf16, 8> x_v0 = fj_vload<fj_bf16, 8>(in_v0 + ib_v0 + fj_k);
      #pragma unroll
      for (int fj_j = 0; fj_j < 8; ++fj_j) {
        const fj_bf16 v0h = x_v0.v[fj_j];
        const float v0 = fj_load(v0h);
        const float v2 = fj_cvt_f32(v0);  // v2 (x) = cast(v0, f32) : f32  [argmax.graph:9]
        fj_out[fj_j] = fj_red_two<fj_red_arg<float>, float>{fj_red_arg<float>{v2, fj_i + fj_j}, v2};
      }
    }), fj_lanes_arg_float_float, fj_tid, fj_nt,
        fj_red_chunk_slots<fj_red_two<fj_red_arg<float>, float>>(ws, 4, 0, (long long)rows, (long long)o, (long long)row_len), fj_red_row_slot<fj_red_two<fj_red_arg<float>, float>>(ws, 0, (long long)rows, (long long)o), true, fj_lane_groups);
    // v3 (token) = argmax(v2) : i64, in the fixed order of fj_reduce.h  [argmax.graph:10]
    const long long v3 = fj_pass0.a.i;
    // v4 (m) = amax(v2) : f32, in the fixed order of fj_reduce.h  [argmax.graph:11]
    const float v4 = fj_pass0.b;
    if (split_phase == 1 || split_phase == 2) continue;  // a split row's level-1 launches
    // v7 = sum(v6) : f32, in the fixed order of fj_reduce.h  [argmax.graph:12]
    const float v7 = fj_reduce_phase<fj_red_sum, float>(split_phase, 3, (long long)row_len, fj_part, fj_parts, fj_red_loads<8>(fj_vector && !fj_rc, [&](long long fj_i) -> float {
      const fj_bf16 v0h = fj_row_v0[(unsigned long long)fj_i * fj_rst_v0];
      const float v0 = fj_load(v0h);
      const float v2 = fj_cvt_f32(v0);  // v2 (x) = cast(v0, f32) : f32  [argmax.graph:9]
      const float v5 = fj_sub(v2, v4);  // v5 = sub(v2, v4) : f32  [argmax.graph:12]
      const float v6 = fj_exp(v5);  // v6 = exp(v5) : f32  [argmax.graph:12]
      return v6;
    },
        [&](long long fj_i, float* fj_out) {
      const unsigned int fj_k = (unsigned int)fj_i;  // elements fj_k .. fj_k + 7: this thread's 8 lanes
      const fj_vec<fj_bf16, 8> x_v0 = fj_vload<fj_bf16, 8>(in_v0 + ib_v0 + fj_k);
      #pragma unroll
      for (int fj_j = 0; fj_j < 8; ++fj_j) {
        const fj_bf16 v0h = x_v0.v[fj_j];
        const float v0 = fj_load(v0h);
        const float v2 = fj_cvt_f32(v0);  // v2 (x) = cast(v0, f32) : f32  [argmax.graph:9]
        const float v5 = fj_sub(v2, v4);  // v5 = sub(v2, v4) : f32  [argmax.graph:12]
        const float v6 = fj_exp(v5);  // v6 = exp(v5) : f32  [argmax.graph:12]
        fj_out[fj_j] = v6;
      }
    }), fj_lanes_float, fj_tid, fj_nt,
        fj_red_chunk_slots<float>(ws, 4, 3, (long long)rows, (long long)o, (long long)row_len), fj_red_row_slot<float>(ws, 3, (long long)rows, (long long)o), true, fj_lane_groups);
    if (split_phase == 3) continue;  // a split row's chunk values, combined by the next launch
    const float v9 = fj_div(v8, v7);  // v9 (p) = div(v8, v7) : f32  [argmax.graph:12]
    if (fj_tid == 0 && fj_part == 0) {  // the row outputs, once per row
      out_v3[ob_v3] = v3;
      out_v9[ob_v9] = v9;
    }
    if (fj_rc && fj_nt > 1) fj_red_sync();  // the next row overwrites the row cache
  }
}
extern "C" __global__ void FJ_RED_ROW_BOUNDS fj_argmax_14dac2a20a268d05(
    const fj_bf16* in_v0,
    long long* out_v3,
    float* out_v9,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ost_v3_0,
    unsigned long long ost_v3_1,
    unsigned long long ost_v9_0,
    unsigned long long ost_v9_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  fj_argmax_14dac2a20a268d05_rows<true, 1>(in_v0, out_v3, out_v9, n, isize1, isize1_mul, isize1_shift, ist_v0_0, ist_v0_1, ost_v3_0, ost_v3_1, ost_v9_0, ost_v9_1, rows, row_len, split_phase, row_split, ws, row_cache, vec_ok);
}
extern "C" __global__ void FJ_RED_ROW_BOUNDS fj_argmax_14dac2a20a268d05_s(
    const fj_bf16* in_v0,
    long long* out_v3,
    float* out_v9,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ost_v3_0,
    unsigned long long ost_v3_1,
    unsigned long long ost_v9_0,
    unsigned long long ost_v9_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  fj_argmax_14dac2a20a268d05_rows<false, 1>(in_v0, out_v3, out_v9, n, isize1, isize1_mul, isize1_shift, ist_v0_0, ist_v0_1, ost_v3_0, ost_v3_1, ost_v9_0, ost_v9_1, rows, row_len, split_phase, row_split, ws, row_cache, vec_ok);
}

// Fusion group: 1 op(s), iteration space [16, 8], 32-bit index math.
// Layout: r1 i32 in:[0,2):C k0.1:0.1 (docs/architecture.md, "A kernel's layout line"). Outputs: v10 (col).
// Inputs: v1 (t).
// Reduction kernel: axes [0] of the iteration space, columns side by side in a block (a row, the elements one output
// reduces, is a column of the tensor), each one's lanes shared by its threads, or
// for a few groups of long columns row_split blocks per group in several launches.
// Every reduction combines a row's elements in fusejit's fixed order (fj_reduce.h:
// chunks of FJ_RED_CHUNK, element i to lane
// i mod FJ_RED_LANES in index order, lanes by a halving tree), whatever the block size.
// Entry points: fj_argmax_d08dedcb892c2ea6 for C-contiguous tensors (stride 1 along a row: fj_fast), fj_argmax_d08dedcb892c2ea6_s for any strides.
template <bool fj_fast, int fj_lane_groups>
static __device__ __forceinline__ void fj_argmax_d08dedcb892c2ea6_rows(
    const float* in_v1,
    long long* out_v10,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v1_0,
    unsigned long long ist_v1_1,
    unsigned long long ost_v10_0,
    unsigned long long ost_v10_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws) {
  __shared__ unsigned long long fj_lane_buf[8 * ((FJ_RED_LANES * 16 + 7) / 8)];
  // 8 rows (columns) per block side by side (neighbouring threads read neighbouring elements), each
  // reduced by the block's threads in turn sharing its lanes; rows per block divide the block size
  int fj_rpb = 8;
  while ((int)blockDim.x % fj_rpb != 0) fj_rpb /= 2;
  const int fj_nt = (int)blockDim.x / fj_rpb, fj_tid = (int)threadIdx.x / fj_rpb, fj_r = (int)threadIdx.x % fj_rpb;
  // Row fj_r's lane l at l * fj_rpb + fj_r (fj_red_lanes_at): a warp's rows' lanes in neighbouring words
  const fj_red_lanes_at<fj_red_arg<float>> fj_lanes_arg_float = {(fj_red_arg<float>*)fj_lane_buf + fj_r, fj_rpb};
  // Each group of fj_rpb rows in a block; row_split blocks per group in the odd launches of a split
  const unsigned int fj_parts = (split_phase & 1) ? row_split : 1, fj_groups = (rows + fj_rpb - 1) / fj_rpb;
  for (unsigned int fj_b = blockIdx.x; fj_b < fj_groups * fj_parts; fj_b += gridDim.x) {
    const unsigned int fj_o0 = fj_b / fj_parts * fj_rpb, fj_part = fj_b - fj_b / fj_parts * fj_parts;
    const bool fj_live = fj_o0 + fj_r < rows;
    const unsigned int o = fj_live ? fj_o0 + fj_r : rows - 1;
    unsigned int rem_o = o;
    const unsigned int c1 = rem_o;
    const unsigned long long ib_v1 = (unsigned long long)c1 * ist_v1_1;
    const unsigned long long ob_v10 = (unsigned long long)c1 * ost_v10_1;
    // v10 (col) = argmin(v1) : i64, in the fixed order of fj_reduce.h  [argmax.graph:13]
    const long long v10 = fj_reduce_phase<fj_red_argmin, fj_red_arg<float>>(split_phase, 1, (long long)row_len, fj_part, fj_parts, [&](long long fj_i) -> fj_red_arg<float> {
      const unsigned int k = (unsigned int)fj_i;
      unsigned int rem_k = k;
      const unsigned int c0 = rem_k;
      const unsigned long long ioff_v1 = ib_v1 + (unsigned long long)c0 * ist_v1_0;
      const float v1 = in_v1[ioff_v1];
      return fj_red_arg<float>{v1, fj_i};
    }, fj_lanes_arg_float, fj_tid, fj_nt,
        fj_red_chunk_slots<fj_red_arg<float>>(ws, 2, 0, (long long)rows, (long long)o, (long long)row_len), fj_red_row_slot<fj_red_arg<float>>(ws, 0, (long long)rows, (long long)o), fj_live).i;
    if (split_phase == 1) continue;  // a split row's chunk values, combined by the next launch
    if (fj_tid == 0 && fj_live && fj_part == 0) {  // the row outputs, once per row
      out_v10[ob_v10] = v10;
    }
  }
}
extern "C" __global__ void fj_argmax_d08dedcb892c2ea6(
    const float* in_v1,
    long long* out_v10,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v1_0,
    unsigned long long ist_v1_1,
    unsigned long long ost_v10_0,
    unsigned long long ost_v10_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws) {
  fj_argmax_d08dedcb892c2ea6_rows<true, 1>(in_v1, out_v10, n, isize1, isize1_mul, isize1_shift, ist_v1_0, ist_v1_1, ost_v10_0, ost_v10_1, rows, row_len, split_phase, row_split, ws);
}
extern "C" __global__ void fj_argmax_d08dedcb892c2ea6_s(
    const float* in_v1,
    long long* out_v10,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v1_0,
    unsigned long long ist_v1_1,
    unsigned long long ost_v10_0,
    unsigned long long ost_v10_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws) {
  fj_argmax_d08dedcb892c2ea6_rows<false, 1>(in_v1, out_v10, n, isize1, isize1_mul, isize1_shift, ist_v1_0, ist_v1_1, ost_v10_0, ost_v10_1, rows, row_len, split_phase, row_split, ws);
}

// Fusion group: 1 op(s), iteration space [16, 8], 32-bit index math.
// Layout: r1 i32 in:[0,2):C k0.1:0.1 (docs/architecture.md, "A kernel's layout line"). Outputs: v11 (flat).
// Inputs: v1 (t).
// Reduction kernel: axes [0, 1] of the iteration space, one block per row (threads share the lanes), or for a few long rows
// row_split blocks per row in several launches (fj_reduce_phase).
// Every reduction combines a row's elements in fusejit's fixed order (fj_reduce.h:
// chunks of FJ_RED_CHUNK, element i to lane
// i mod FJ_RED_LANES in index order, lanes by a halving tree), whatever the block size.
// Entry points: fj_argmax_6cc08f9e2abdbccf for C-contiguous tensors (stride 1 along a row: fj_fast), fj_argmax_6cc08f9e2abdbccf_s for any strides.
template <bool fj_fast, int fj_lane_groups>
static __device__ __forceinline__ void fj_argmax_6cc08f9e2abdbccf_rows(
    const float* in_v1,
    long long* out_v11,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v1_0,
    unsigned long long ist_v1_1,
    unsigned long long ost_v11_0,
    unsigned long long ost_v11_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    int vec_ok) {
  __shared__ unsigned long long fj_lane_buf[fj_lane_groups * ((FJ_RED_LANES * 16 + 7) / 8)];
  fj_red_arg<float>* const fj_lanes_arg_float = (fj_red_arg<float>*)fj_lane_buf;
  // Strides along the row: 1 in the fast entry (C-contiguous tensors)
  const unsigned long long fj_ist_v1 = fj_fast ? 1ull : ist_v1_1;
  // The vector path: 4 elements a vector access along the row (the fast entry; vec_ok: rows of a
  // multiple of 4 elements, 16-byte aligned pointers)
  const bool fj_vector = FJ_RED_VECTOR && fj_fast && vec_ok != 0;
  const int fj_tid = (int)threadIdx.x, fj_nt = (int)blockDim.x;
  // One block per row; row_split blocks per row in the odd launches of a split row
  const unsigned int fj_parts = (split_phase & 1) ? row_split : 1;
  for (unsigned int fj_b = blockIdx.x; fj_b < rows * fj_parts; fj_b += gridDim.x) {
    const unsigned int o = fj_b / fj_parts, fj_part = fj_b - o * fj_parts;
    const unsigned long long ib_v1 = 0ull;
    const unsigned long long ob_v11 = 0ull;
    // v11 (flat) = argmax(v1) : i64, in the fixed order of fj_reduce.h  [argmax.graph:14]
    const long long v11 = fj_reduce_phase<fj_red_argmax, fj_red_arg<float>>(split_phase, 1, (long long)row_len, fj_part, fj_parts, fj_red_loads<4>(fj_vector, [&](long long fj_i) -> fj_red_arg<float> {
      const unsigned int k = (unsigned int)fj_i;
      unsigned int rem_k = k;
      const unsigned int c1 = rem_k - fjk_udiv(rem_k, isize1_mul, isize1_shift) * isize1;
      rem_k = fjk_udiv(rem_k, isize1_mul, isize1_shift);
      const unsigned int c0 = rem_k;
      const unsigned long long ioff_v1 = ib_v1 + (fj_fast ? (unsigned long long)k : (unsigned long long)c0 * ist_v1_0 + (unsigned long long)c1 * fj_ist_v1);
      const float v1 = in_v1[ioff_v1];
      return fj_red_arg<float>{v1, fj_i};
    },
        [&](long long fj_i, fj_red_arg<float>* fj_out) {
      const unsigned int fj_k = (unsigned int)fj_i;  // elements fj_k .. fj_k + 3: this thread's 4 lanes
      const fj_vec<float, 4> x_v1 = fj_vload<float, 4>(in_v1 + ib_v1 + fj_k);
      #pragma unroll
      for (int fj_j = 0; fj_j < 4; ++fj_j) {
        const float v1 = x_v1.v[fj_j];
        fj_out[fj_j] = fj_red_arg<float>{v1, fj_i + fj_j};
      }
    }), fj_lanes_arg_float, fj_tid, fj_nt,
        fj_red_chunk_slots<fj_red_arg<float>>(ws, 2, 0, (long long)rows, (long long)o, (long long)row_len), fj_red_row_slot<fj_red_arg<float>>(ws, 0, (long long)rows, (long long)o), true, fj_lane_groups).i;
    if (split_phase == 1) continue;  // a split row's chunk values, combined by the next launch
    if (fj_tid == 0 && fj_part == 0) {  // the row outputs, once per row
      out_v11[ob_v11] = v11;
    }
  }
}
extern "C" __global__ void FJ_RED_ROW_BOUNDS fj_argmax_6cc08f9e2abdbccf(
    const float* in_v1,
    long long* out_v11,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v1_0,
    unsigned long long ist_v1_1,
    unsigned long long ost_v11_0,
    unsigned long long ost_v11_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    int vec_ok) {
  fj_argmax_6cc08f9e2abdbccf_rows<true, 1>(in_v1, out_v11, n, isize1, isize1_mul, isize1_shift, ist_v1_0, ist_v1_1, ost_v11_0, ost_v11_1, rows, row_len, split_phase, row_split, ws, vec_ok);
}
extern "C" __global__ void FJ_RED_ROW_BOUNDS fj_argmax_6cc08f9e2abdbccf_s(
    const float* in_v1,
    long long* out_v11,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v1_0,
    unsigned long long ist_v1_1,
    unsigned long long ost_v11_0,
    unsigned long long ost_v11_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    int vec_ok) {
  fj_argmax_6cc08f9e2abdbccf_rows<false, 1>(in_v1, out_v11, n, isize1, isize1_mul, isize1_shift, ist_v1_0, ist_v1_1, ost_v11_0, ost_v11_1, rows, row_len, split_phase, row_split, ws, vec_ok);
}

