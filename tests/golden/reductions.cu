// Fusion group: 15 op(s), iteration space [N, C], 32-bit index math.
// Layout: r1 i32 in:[0,2):C k0.1:0.1 (docs/architecture.md, "A kernel's layout line"). Outputs: v6 (p), v18 (lse).
// Inputs: v0 (x).
// Reduction kernel: axes [1] of the iteration space, one block per row (threads share the lanes), or for a few long rows
// row_split blocks per row in several launches (fj_reduce_phase).
// Every reduction combines a row's elements in fusejit's fixed order (fj_reduce.h:
// chunks of FJ_RED_CHUNK, element i to lane
// i mod FJ_RED_LANES in index order, lanes by a halving tree), whatever the block size.
// Entry points: fj_reductions_b021a450fc48c3f9 for C-contiguous tensors (stride 1 along a row: fj_fast), fj_reductions_b021a450fc48c3f9_s for any strides,
// fj_reductions_b021a450fc48c3f9_l as fj_reductions_b021a450fc48c3f9 for long rows on chip: a block of 256 k threads reduces up to min(k, 4) chunks at once, in lane groups.
template <bool fj_fast, int fj_lane_groups>
static __device__ __forceinline__ void fj_reductions_b021a450fc48c3f9_rows(
    const float* in_v0,
    float* out_v6,
    float* out_v18,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ost_v6_0,
    unsigned long long ost_v6_1,
    unsigned long long ost_v18_0,
    unsigned long long ost_v18_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  __shared__ unsigned long long fj_lane_buf[fj_lane_groups * ((FJ_RED_LANES * 8 + 7) / 8)];
  float* const fj_lanes_float = (float*)fj_lane_buf;
  fj_red_two<float, float>* const fj_lanes_float_float = (fj_red_two<float, float>*)fj_lane_buf;
  const float v9 = 0x0p+0f;  // v9 = const 0.0 : f32  [reductions.graph:10]
  // Strides along the row: 1 in the fast entry (C-contiguous tensors)
  const unsigned long long fj_ist_v0 = fj_fast ? 1ull : ist_v0_1;
  const unsigned long long fj_ost_v6 = fj_fast ? 1ull : ost_v6_1;
  // The vector path: 4 elements a vector access along the row (the fast entry; vec_ok: rows of a
  // multiple of 4 elements, 16-byte aligned pointers)
  const bool fj_vector = FJ_RED_VECTOR && fj_fast && vec_ok != 0;
  // The row on chip (docs/ops.md): the inputs several passes read, copied into shared memory at
  // the start of each row when the launch gave room for them (row_cache 1 to 3; not in a split row's launches)
  FJK_DYNAMIC_SHARED(fj_row_cache);
  const bool fj_rc = row_cache != 0 && split_phase == 0;
  float* const fj_rc_v0 = fjk_shared_region<float>(fj_row_cache, 0, fj_rc);
  // and, with row_cache 2, the values a pass computes and the epilogue reads again (kept values)
  // (read by the vector loop only: a launch without it neither writes nor reads them)
  const bool fj_rv = FJ_RED_KEPT && fj_rc && row_cache == 2 && fj_vector;
  float* const fj_rv_v4 = fjk_shared_region<float>(fj_row_cache, 0 + ((unsigned long long)row_len * 4 + 15) / 16 * 16, fj_rv);
  const int fj_tid = (int)threadIdx.x, fj_nt = (int)blockDim.x;
  // One block per row; row_split blocks per row in the odd launches of a split row
  const unsigned int fj_parts = (split_phase & 1) ? row_split : 1;
  for (unsigned int fj_b = blockIdx.x; fj_b < rows * fj_parts; fj_b += gridDim.x) {
    const unsigned int o = fj_b / fj_parts, fj_part = fj_b - o * fj_parts;
    unsigned int rem_o = o;
    const unsigned int c0 = rem_o;
    const unsigned long long ib_v0 = (unsigned long long)c0 * ist_v0_0;
    const unsigned long long ob_v6 = (unsigned long long)c0 * ost_v6_0;
    const unsigned long long ob_v18 = (unsigned long long)c0 * ost_v18_0;
    if (fj_rc) {  // the row on chip: copied by the whole block, then every pass reads it there
      fjk_stage_row(fj_rc_v0, in_v0 + ib_v0, (long long)row_len, fj_ist_v0, fj_tid, fj_nt);
      fjk_stage_wait();
      if (fj_nt > 1) fj_red_sync();
    }
    // The rows the passes read: on chip when the launch keeps them there, else in memory
    const float* const fj_row_v0 = fj_rc ? fj_rc_v0 : in_v0 + ib_v0;
    const unsigned long long fj_rst_v0 = fj_rc ? 1ull : fj_ist_v0;
    // v2 = amax(v0) : f32, in the fixed order of fj_reduce.h  [reductions.graph:8]
    const float v2 = fj_reduce_phase<fj_red_max, float>(split_phase, 1, (long long)row_len, fj_part, fj_parts, fj_red_loads<4>(fj_vector && !fj_rc, [&](long long fj_i) -> float {
      const float v0 = fj_row_v0[(unsigned long long)fj_i * fj_rst_v0];
      return v0;
    },
        [&](long long fj_i, float* fj_out) {
      const unsigned int fj_k = (unsigned int)fj_i;  // elements fj_k .. fj_k + 3: this thread's 4 lanes
      const fj_vec<float, 4> x_v0 = fj_vload<float, 4>(in_v0 + ib_v0 + fj_k);
      #pragma unroll
      for (int fj_j = 0; fj_j < 4; ++fj_j) {
        const float v0 = x_v0.v[fj_j];
        fj_out[fj_j] = v0;
      }
    }), fj_lanes_float, fj_tid, fj_nt,
        fj_red_chunk_slots<float>(ws, 2, 0, (long long)rows, (long long)o, (long long)row_len), fj_red_row_slot<float>(ws, 0, (long long)rows, (long long)o), true, fj_lane_groups);
    // v15 = amax(v0) : f32, the row values of v2 (only keepdim differs)  [reductions.graph:10]
    const float v15 = v2;
    if (split_phase == 1 || split_phase == 2) continue;  // a split row's level-1 launches
    const bool v8 = fj_isinf(v2);  // v8 = isinf(v2) : bool  [reductions.graph:10]
    const float v10 = fj_where(v8, v9, v2);  // v10 = where(v8, v9, v2) : f32  [reductions.graph:10]
    // One pass for v5, v13: each in the fixed order of fj_reduce.h, as alone
    static_assert(sizeof(fj_red_two<float, float>) == 8, "the lane layout ir::pass_lane_bytes sizes the workspace by");
    const fj_red_two<float, float> fj_pass1 = fj_reduce_phase<fj_red_pair<fj_red_sum, fj_red_sum>, fj_red_two<float, float>>(split_phase, 3, (long long)row_len, fj_part, fj_parts, fj_red_loads<4>(fj_vector && !fj_rc, [&](long long fj_i) -> fj_red_two<float, float> {
      const float v0 = fj_row_v0[(unsigned long long)fj_i * fj_rst_v0];
      const float v3 = fj_sub(v0, v2);  // v3 = sub(v0, v2) : f32  [reductions.graph:8]
      const float v4 = fj_exp(v3);  // v4 = exp(v3) : f32  [reductions.graph:8]
      const float v11 = fj_sub(v0, v10);  // v11 = sub(v0, v10) : f32  [reductions.graph:10]
      const float v12 = fj_exp(v11);  // v12 = exp(v11) : f32  [reductions.graph:10]
      if (fj_rv) fj_rv_v4[fj_i] = v4;  // kept on chip for the epilogue
      return fj_red_two<float, float>{v4, v12};
    },
        [&](long long fj_i, fj_red_two<float, float>* fj_out) {
      const unsigned int fj_k = (unsigned int)fj_i;  // elements fj_k .. fj_k + 3: this thread's 4 lanes
      const fj_vec<float, 4> x_v0 = fj_vload<float, 4>(in_v0 + ib_v0 + fj_k);
      #pragma unroll
      for (int fj_j = 0; fj_j < 4; ++fj_j) {
        const float v0 = x_v0.v[fj_j];
        const float v3 = fj_sub(v0, v2);  // v3 = sub(v0, v2) : f32  [reductions.graph:8]
        const float v4 = fj_exp(v3);  // v4 = exp(v3) : f32  [reductions.graph:8]
        const float v11 = fj_sub(v0, v10);  // v11 = sub(v0, v10) : f32  [reductions.graph:10]
        const float v12 = fj_exp(v11);  // v12 = exp(v11) : f32  [reductions.graph:10]
        fj_out[fj_j] = fj_red_two<float, float>{v4, v12};
      }
    }), fj_lanes_float_float, fj_tid, fj_nt,
        fj_red_chunk_slots<fj_red_two<float, float>>(ws, 2, 1, (long long)rows, (long long)o, (long long)row_len), fj_red_row_slot<fj_red_two<float, float>>(ws, 1, (long long)rows, (long long)o), true, fj_lane_groups);
    // v5 = sum(v4) : f32, in the fixed order of fj_reduce.h  [reductions.graph:8]
    const float v5 = fj_pass1.a;
    // v13 = sum(v12) : f32, in the fixed order of fj_reduce.h  [reductions.graph:10]
    const float v13 = fj_pass1.b;
    if (split_phase == 3 || split_phase == 4) continue;  // a split row's level-2 launches
    const float v14 = fj_log(v13);  // v14 = log(v13) : f32  [reductions.graph:10]
    const bool v16 = fj_isinf(v15);  // v16 = isinf(v15) : bool  [reductions.graph:10]
    const float v17 = fj_where(v16, v9, v15);  // v17 = where(v16, v9, v15) : f32  [reductions.graph:10]
    const float v18 = fj_add(v14, v17);  // v18 (lse) = add(v14, v17) : f32  [reductions.graph:10]
    if (fj_tid == 0 && fj_part == 0) {  // the row outputs, once per row
      out_v18[ob_v18] = v18;
    }
    long long fj_k0, fj_k1;  // the row, or this part's chunks of it in a split row's last launch
    fj_red_part_elements(split_phase, (long long)row_len, fj_part, fj_parts, fj_k0, fj_k1);
    unsigned int fj_ks = (unsigned int)fj_k0;  // where the scalar loop starts
    if (fj_vector) {  // vector loads and stores: 4 elements a thread and iteration
      const unsigned int fj_kv = (unsigned int)fj_k0 + (unsigned int)(fj_k1 - fj_k0) / 4 * 4;
      if (fj_rv) {  // the kept values on chip: read, not computed again
        for (unsigned int fj_k = (unsigned int)fj_k0 + 4 * (unsigned int)fj_tid; fj_k < fj_kv; fj_k += 4 * (unsigned int)fj_nt) {
          const fj_vec<float, 4> x_v4 = fj_vload<float, 4>(fj_rv_v4 + fj_k);  // v4, kept on chip
          fj_vec<float, 4> y_v6;
          #pragma unroll
          for (int fj_j = 0; fj_j < 4; ++fj_j) {
            const float v4 = x_v4.v[fj_j];
            const float v6 = fj_div(v4, v5);  // v6 (p) = div(v4, v5) : f32  [reductions.graph:8]
            y_v6.v[fj_j] = v6;
          }
          fj_vstore<float, 4>(out_v6 + ob_v6 + fj_k, y_v6);
        }
      } else {
        for (unsigned int fj_k = (unsigned int)fj_k0 + 4 * (unsigned int)fj_tid; fj_k < fj_kv; fj_k += 4 * (unsigned int)fj_nt) {
          const fj_vec<float, 4> x_v0 = fj_vload<float, 4>(fj_row_v0 + fj_k);
          fj_vec<float, 4> y_v6;
          #pragma unroll
          for (int fj_j = 0; fj_j < 4; ++fj_j) {
            const float v0 = x_v0.v[fj_j];
            const float v3 = fj_sub(v0, v2);  // v3 = sub(v0, v2) : f32  [reductions.graph:8]
            const float v4 = fj_exp(v3);  // v4 = exp(v3) : f32  [reductions.graph:8]
            const float v6 = fj_div(v4, v5);  // v6 (p) = div(v4, v5) : f32  [reductions.graph:8]
            y_v6.v[fj_j] = v6;
          }
          fj_vstore<float, 4>(out_v6 + ob_v6 + fj_k, y_v6);
        }
      }
      fj_ks = fj_kv;
    }
    for (unsigned int k = fj_ks + fj_tid; k < (unsigned int)fj_k1; k += fj_nt) {  // the element outputs
      unsigned int rem_k = k;
      const unsigned int c1 = rem_k;
      const float v0 = fj_row_v0[(unsigned long long)k * fj_rst_v0];
      const float v3 = fj_sub(v0, v2);  // v3 = sub(v0, v2) : f32  [reductions.graph:8]
      const float v4 = fj_exp(v3);  // v4 = exp(v3) : f32  [reductions.graph:8]
      const float v6 = fj_div(v4, v5);  // v6 (p) = div(v4, v5) : f32  [reductions.graph:8]
      out_v6[ob_v6 + (unsigned long long)c1 * fj_ost_v6] = v6;
    }
    if (fj_rc && fj_nt > 1) fj_red_sync();  // the next row overwrites the row cache
  }
}
extern "C" __global__ void FJ_RED_ROW_BOUNDS fj_reductions_b021a450fc48c3f9(
    const float* in_v0,
    float* out_v6,
    float* out_v18,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ost_v6_0,
    unsigned long long ost_v6_1,
    unsigned long long ost_v18_0,
    unsigned long long ost_v18_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  fj_reductions_b021a450fc48c3f9_rows<true, 1>(in_v0, out_v6, out_v18, n, isize1, isize1_mul, isize1_shift, ist_v0_0, ist_v0_1, ost_v6_0, ost_v6_1, ost_v18_0, ost_v18_1, rows, row_len, split_phase, row_split, ws, row_cache, vec_ok);
}
extern "C" __global__ void FJ_RED_ROW_BOUNDS fj_reductions_b021a450fc48c3f9_s(
    const float* in_v0,
    float* out_v6,
    float* out_v18,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ost_v6_0,
    unsigned long long ost_v6_1,
    unsigned long long ost_v18_0,
    unsigned long long ost_v18_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  fj_reductions_b021a450fc48c3f9_rows<false, 1>(in_v0, out_v6, out_v18, n, isize1, isize1_mul, isize1_shift, ist_v0_0, ist_v0_1, ost_v6_0, ost_v6_1, ost_v18_0, ost_v18_1, rows, row_len, split_phase, row_split, ws, row_cache, vec_ok);
}
extern "C" __global__ void fj_reductions_b021a450fc48c3f9_l(
    const float* in_v0,
    float* out_v6,
    float* out_v18,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ost_v6_0,
    unsigned long long ost_v6_1,
    unsigned long long ost_v18_0,
    unsigned long long ost_v18_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  fj_reductions_b021a450fc48c3f9_rows<true, 4>(in_v0, out_v6, out_v18, n, isize1, isize1_mul, isize1_shift, ist_v0_0, ist_v0_1, ost_v6_0, ost_v6_1, ost_v18_0, ost_v18_1, rows, row_len, split_phase, row_split, ws, row_cache, vec_ok);
}

// Fusion group: 1 op(s), iteration space [N, C], 32-bit index math.
// Layout: r1 i32 in:[0,2):C k0.1:0.1 (docs/architecture.md, "A kernel's layout line"). Outputs: v7 (col).
// Inputs: v0 (x).
// Reduction kernel: axes [0] of the iteration space, columns side by side in a block (a row, the elements one output
// reduces, is a column of the tensor), each one's lanes shared by its threads, or
// for a few groups of long columns row_split blocks per group in several launches.
// Every reduction combines a row's elements in fusejit's fixed order (fj_reduce.h:
// chunks of FJ_RED_CHUNK, element i to lane
// i mod FJ_RED_LANES in index order, lanes by a halving tree), whatever the block size.
// Entry points: fj_reductions_08c84a7be79af0f5 for C-contiguous tensors (stride 1 along a row: fj_fast), fj_reductions_08c84a7be79af0f5_s for any strides.
template <bool fj_fast, int fj_lane_groups>
static __device__ __forceinline__ void fj_reductions_08c84a7be79af0f5_rows(
    const float* in_v0,
    float* out_v7,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ost_v7_0,
    unsigned long long ost_v7_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws) {
  __shared__ unsigned long long fj_lane_buf[32 * ((FJ_RED_LANES * 4 + 7) / 8)];
  // 32 rows (columns) per block side by side (neighbouring threads read neighbouring elements), each
  // reduced by the block's threads in turn sharing its lanes; rows per block divide the block size
  int fj_rpb = 32;
  while ((int)blockDim.x % fj_rpb != 0) fj_rpb /= 2;
  const int fj_nt = (int)blockDim.x / fj_rpb, fj_tid = (int)threadIdx.x / fj_rpb, fj_r = (int)threadIdx.x % fj_rpb;
  // Row fj_r's lane l at l * fj_rpb + fj_r (fj_red_lanes_at): a warp's rows' lanes in neighbouring words
  const fj_red_lanes_at<float> fj_lanes_float = {(float*)fj_lane_buf + fj_r, fj_rpb};
  // Each group of fj_rpb rows in a block; row_split blocks per group in the odd launches of a split
  const unsigned int fj_parts = (split_phase & 1) ? row_split : 1, fj_groups = (rows + fj_rpb - 1) / fj_rpb;
  for (unsigned int fj_b = blockIdx.x; fj_b < fj_groups * fj_parts; fj_b += gridDim.x) {
    const unsigned int fj_o0 = fj_b / fj_parts * fj_rpb, fj_part = fj_b - fj_b / fj_parts * fj_parts;
    const bool fj_live = fj_o0 + fj_r < rows;
    const unsigned int o = fj_live ? fj_o0 + fj_r : rows - 1;
    unsigned int rem_o = o;
    const unsigned int c1 = rem_o;
    const unsigned long long ib_v0 = (unsigned long long)c1 * ist_v0_1;
    const unsigned long long ob_v7 = (unsigned long long)c1 * ost_v7_1;
    // v7 (col) = sum(v0) : f32, in the fixed order of fj_reduce.h  [reductions.graph:9]
    const float v7 = fj_reduce_phase<fj_red_sum, float>(split_phase, 1, (long long)row_len, fj_part, fj_parts, [&](long long fj_i) -> float {
      const unsigned int k = (unsigned int)fj_i;
      unsigned int rem_k = k;
      const unsigned int c0 = rem_k;
      const unsigned long long ioff_v0 = ib_v0 + (unsigned long long)c0 * ist_v0_0;
      const float v0 = in_v0[ioff_v0];
      return v0;
    }, fj_lanes_float, fj_tid, fj_nt,
        fj_red_chunk_slots<float>(ws, 1, 0, (long long)rows, (long long)o, (long long)row_len), fj_red_row_slot<float>(ws, 0, (long long)rows, (long long)o), fj_live);
    if (split_phase == 1) continue;  // a split row's chunk values, combined by the next launch
    if (fj_tid == 0 && fj_live && fj_part == 0) {  // the row outputs, once per row
      out_v7[ob_v7] = v7;
    }
  }
}
extern "C" __global__ void fj_reductions_08c84a7be79af0f5(
    const float* in_v0,
    float* out_v7,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ost_v7_0,
    unsigned long long ost_v7_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws) {
  fj_reductions_08c84a7be79af0f5_rows<true, 1>(in_v0, out_v7, n, isize1, isize1_mul, isize1_shift, ist_v0_0, ist_v0_1, ost_v7_0, ost_v7_1, rows, row_len, split_phase, row_split, ws);
}
extern "C" __global__ void fj_reductions_08c84a7be79af0f5_s(
    const float* in_v0,
    float* out_v7,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ost_v7_0,
    unsigned long long ost_v7_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws) {
  fj_reductions_08c84a7be79af0f5_rows<false, 1>(in_v0, out_v7, n, isize1, isize1_mul, isize1_shift, ist_v0_0, ist_v0_1, ost_v7_0, ost_v7_1, rows, row_len, split_phase, row_split, ws);
}

// Fusion group: 1 op(s), iteration space [4, N, C], 32-bit index math.
// Layout: r1 i32 in:[0,3):C k0.1.2:0.1.2 (docs/architecture.md, "A kernel's layout line"). Outputs: v19 (m).
// Inputs: v1 (t).
// Reduction kernel: axes [0, 2] of the iteration space, one block per row (threads share the lanes), or for a few long rows
// row_split blocks per row in several launches (fj_reduce_phase).
// Every reduction combines a row's elements in fusejit's fixed order (fj_reduce.h:
// chunks of FJ_RED_CHUNK, element i to lane
// i mod FJ_RED_LANES in index order, lanes by a halving tree), whatever the block size.
// Entry points: fj_reductions_4be56fcbb1931569 for C-contiguous tensors (stride 1 along a row: fj_fast), fj_reductions_4be56fcbb1931569_s for any strides.
template <bool fj_fast, int fj_lane_groups>
static __device__ __forceinline__ void fj_reductions_4be56fcbb1931569_rows(
    const float* in_v1,
    float* out_v19,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned int isize2,
    unsigned int isize2_mul,
    unsigned int isize2_shift,
    unsigned long long ist_v1_0,
    unsigned long long ist_v1_1,
    unsigned long long ist_v1_2,
    unsigned long long ost_v19_0,
    unsigned long long ost_v19_1,
    unsigned long long ost_v19_2,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws) {
  __shared__ unsigned long long fj_lane_buf[fj_lane_groups * ((FJ_RED_LANES * 4 + 7) / 8)];
  float* const fj_lanes_float = (float*)fj_lane_buf;
  // Strides along the row: 1 in the fast entry (C-contiguous tensors)
  const unsigned long long fj_ist_v1 = fj_fast ? 1ull : ist_v1_2;
  const int fj_tid = (int)threadIdx.x, fj_nt = (int)blockDim.x;
  // One block per row; row_split blocks per row in the odd launches of a split row
  const unsigned int fj_parts = (split_phase & 1) ? row_split : 1;
  for (unsigned int fj_b = blockIdx.x; fj_b < rows * fj_parts; fj_b += gridDim.x) {
    const unsigned int o = fj_b / fj_parts, fj_part = fj_b - o * fj_parts;
    unsigned int rem_o = o;
    const unsigned int c1 = rem_o;
    const unsigned long long ib_v1 = (unsigned long long)c1 * ist_v1_1;
    const unsigned long long ob_v19 = (unsigned long long)c1 * ost_v19_1;
    // v19 (m) = amax(v1) : f32, in the fixed order of fj_reduce.h  [reductions.graph:11]
    const float v19 = fj_reduce_phase<fj_red_max, float>(split_phase, 1, (long long)row_len, fj_part, fj_parts, [&](long long fj_i) -> float {
      const unsigned int k = (unsigned int)fj_i;
      unsigned int rem_k = k;
      const unsigned int c2 = rem_k - fjk_udiv(rem_k, isize2_mul, isize2_shift) * isize2;
      rem_k = fjk_udiv(rem_k, isize2_mul, isize2_shift);
      const unsigned int c0 = rem_k;
      const unsigned long long ioff_v1 = ib_v1 + (unsigned long long)c0 * ist_v1_0 + (unsigned long long)c2 * fj_ist_v1;
      const float v1 = in_v1[ioff_v1];
      return v1;
    }, fj_lanes_float, fj_tid, fj_nt,
        fj_red_chunk_slots<float>(ws, 1, 0, (long long)rows, (long long)o, (long long)row_len), fj_red_row_slot<float>(ws, 0, (long long)rows, (long long)o), true, fj_lane_groups);
    if (split_phase == 1) continue;  // a split row's chunk values, combined by the next launch
    if (fj_tid == 0 && fj_part == 0) {  // the row outputs, once per row
      out_v19[ob_v19] = v19;
    }
  }
}
extern "C" __global__ void FJ_RED_ROW_BOUNDS fj_reductions_4be56fcbb1931569(
    const float* in_v1,
    float* out_v19,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned int isize2,
    unsigned int isize2_mul,
    unsigned int isize2_shift,
    unsigned long long ist_v1_0,
    unsigned long long ist_v1_1,
    unsigned long long ist_v1_2,
    unsigned long long ost_v19_0,
    unsigned long long ost_v19_1,
    unsigned long long ost_v19_2,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws) {
  fj_reductions_4be56fcbb1931569_rows<true, 1>(in_v1, out_v19, n, isize1, isize1_mul, isize1_shift, isize2, isize2_mul, isize2_shift, ist_v1_0, ist_v1_1, ist_v1_2, ost_v19_0, ost_v19_1, ost_v19_2, rows, row_len, split_phase, row_split, ws);
}
extern "C" __global__ void FJ_RED_ROW_BOUNDS fj_reductions_4be56fcbb1931569_s(
    const float* in_v1,
    float* out_v19,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned int isize2,
    unsigned int isize2_mul,
    unsigned int isize2_shift,
    unsigned long long ist_v1_0,
    unsigned long long ist_v1_1,
    unsigned long long ist_v1_2,
    unsigned long long ost_v19_0,
    unsigned long long ost_v19_1,
    unsigned long long ost_v19_2,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws) {
  fj_reductions_4be56fcbb1931569_rows<false, 1>(in_v1, out_v19, n, isize1, isize1_mul, isize1_shift, isize2, isize2_mul, isize2_shift, ist_v1_0, ist_v1_1, ist_v1_2, ost_v19_0, ost_v19_1, ost_v19_2, rows, row_len, split_phase, row_split, ws);
}

