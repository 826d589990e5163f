// Fusion group: 8 op(s), iteration space [T, D], 32-bit index math.
// Layout: r2 i32 in:[0,1)[1,2):C,S01 k0.1:0.1,-.0 (docs/architecture.md, "A kernel's layout line"). Outputs: v10 (y).
// Inputs: v0 (x), v1 (w). Params: v2 (eps).
// Reduction kernel: axes [1] of the iteration space, one block per row (threads share the lanes), or for a few long rows
// row_split blocks per row in several launches (fj_reduce_phase).
// Every reduction combines a row's elements in fusejit's fixed order (fj_reduce.h:
// chunks of FJ_RED_CHUNK, element i to lane
// i mod FJ_RED_LANES in index order, lanes by a halving tree), whatever the block size.
// Entry points: fj_rmsnorm_d218ffcdcec42a6b for C-contiguous tensors (stride 1 along a row: fj_fast), fj_rmsnorm_d218ffcdcec42a6b_s for any strides,
// fj_rmsnorm_d218ffcdcec42a6b_l as fj_rmsnorm_d218ffcdcec42a6b for long rows on chip: a block of 256 k threads reduces up to min(k, 4) chunks at once, in lane groups.
template <bool fj_fast, int fj_lane_groups>
static __device__ __forceinline__ void fj_rmsnorm_d218ffcdcec42a6b_rows(
    const fj_bf16* in_v0,
    const fj_bf16* in_v1,
    fj_bf16* out_v10,
    float p_v2,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ist_v1_1,
    unsigned long long ost_v10_0,
    unsigned long long ost_v10_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  __shared__ unsigned long long fj_lane_buf[fj_lane_groups * ((FJ_RED_LANES * 4 + 7) / 8)];
  float* const fj_lanes_float = (float*)fj_lane_buf;
  const float v2 = p_v2;
  // Strides along the row: 1 in the fast entry (C-contiguous tensors)
  const unsigned long long fj_ist_v0 = fj_fast ? 1ull : ist_v0_1;
  const unsigned long long fj_ist_v1 = fj_fast ? 1ull : ist_v1_1;
  const unsigned long long fj_ost_v10 = fj_fast ? 1ull : ost_v10_1;
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
    const unsigned long long ib_v1 = 0ull;
    const unsigned long long ob_v10 = (unsigned long long)c0 * ost_v10_0;
    if (fj_rc) {  // the row on chip: copied by the whole block, then every pass reads it there
      fjk_stage_row(fj_rc_v0, in_v0 + ib_v0, (long long)row_len, fj_ist_v0, fj_tid, fj_nt);
      fjk_stage_wait();
      if (fj_nt > 1) fj_red_sync();
    }
    // The rows the passes read: on chip when the launch keeps them there, else in memory
    const fj_bf16* const fj_row_v0 = fj_rc ? fj_rc_v0 : in_v0 + ib_v0;
    const unsigned long long fj_rst_v0 = fj_rc ? 1ull : fj_ist_v0;
    // v5 (ms) = mean(v4) : f32, in the fixed order of fj_reduce.h  [rmsnorm.graph:9]
    const float v5 = fj_red_mean(fj_reduce_phase<fj_red_sum, float>(split_phase, 1, (long long)row_len, fj_part, fj_parts, fj_red_loads<8>(fj_vector && !fj_rc, [&](long long fj_i) -> float {
      const fj_bf16 v0h = fj_row_v0[(unsigned long long)fj_i * fj_rst_v0];
      const float v0 = fj_load(v0h);
      const float v3 = fj_cvt_f32(v0);  // v3 (h) = cast(v0, f32) : f32  [rmsnorm.graph:8]
      const float v4 = fj_mul(v3, v3);  // v4 = mul(v3, v3) : f32  [rmsnorm.graph:9]
      return v4;
    },
        [&](long long fj_i, float* fj_out) {
      const unsigned int fj_k = (unsigned int)fj_i;  // elements fj_k .. fj_k + 7: this thread's 8 lanes
      const fj_vec<fj_bf16, 8> x_v0 = fj_vload<fj_bf16, 8>(in_v0 + ib_v0 + fj_k);
      #pragma unroll
      for (int fj_j = 0; fj_j < 8; ++fj_j) {
        const fj_bf16 v0h = x_v0.v[fj_j];
        const float v0 = fj_load(v0h);
        const float v3 = fj_cvt_f32(v0);  // v3 (h) = cast(v0, f32) : f32  [rmsnorm.graph:8]
        const float v4 = fj_mul(v3, v3);  // v4 = mul(v3, v3) : f32  [rmsnorm.graph:9]
        fj_out[fj_j] = v4;
      }
    }), fj_lanes_float, fj_tid, fj_nt,
        fj_red_chunk_slots<float>(ws, 1, 0, (long long)rows, (long long)o, (long long)row_len), fj_red_row_slot<float>(ws, 0, (long long)rows, (long long)o), true, fj_lane_groups), (long long)row_len);
    if (split_phase == 1 || split_phase == 2) continue;  // a split row's level-1 launches
    const float v6 = fj_add(v5, v2);  // v6 = add(v5, v2) : f32  [rmsnorm.graph:10]
    const float v7 = fj_rsqrt(v6);  // v7 = rsqrt(v6) : f32  [rmsnorm.graph:10]
    long long fj_k0, fj_k1;  // the row, or this part's chunks of it in a split row's last launch
    fj_red_part_elements(split_phase, (long long)row_len, fj_part, fj_parts, fj_k0, fj_k1);
    unsigned int fj_ks = (unsigned int)fj_k0;  // where the scalar loop starts
    if (fj_vector) {  // vector loads and stores: 8 elements a thread and iteration
      const unsigned int fj_kv = (unsigned int)fj_k0 + (unsigned int)(fj_k1 - fj_k0) / 8 * 8;
      for (unsigned int fj_k = (unsigned int)fj_k0 + 8 * (unsigned int)fj_tid; fj_k < fj_kv; fj_k += 8 * (unsigned int)fj_nt) {
        const fj_vec<fj_bf16, 8> x_v0 = fj_vload<fj_bf16, 8>(fj_row_v0 + fj_k);
        const fj_vec<fj_bf16, 8> x_v1 = fj_vload<fj_bf16, 8>(in_v1 + ib_v1 + fj_k);
        fj_vec<fj_bf16, 8> y_v10;
        #pragma unroll
        for (int fj_j = 0; fj_j < 8; ++fj_j) {
          const fj_bf16 v0h = x_v0.v[fj_j];
          const float v0 = fj_load(v0h);
          const fj_bf16 v1h = x_v1.v[fj_j];
          const float v3 = fj_cvt_f32(v0);  // v3 (h) = cast(v0, f32) : f32  [rmsnorm.graph:8]
          const float v8 = fj_mul(v3, v7);  // v8 = mul(v3, v7) : f32  [rmsnorm.graph:10]
          const fj_bf16 v9h = fj_store_bf16(v8);  // v9 = cast(v8, bf16) : bf16  [rmsnorm.graph:10]
          const fj_bf16 v10h = fj_mul_bf16(v1h, v9h);  // v10 (y) = mul(v1, v9) : bf16  [rmsnorm.graph:10]
          y_v10.v[fj_j] = v10h;
        }
        fj_vstore<fj_bf16, 8>(out_v10 + ob_v10 + fj_k, y_v10);
      }
      fj_ks = fj_kv;
    }
    for (unsigned int k = fj_ks + fj_tid; k < (unsigned int)fj_k1; k += fj_nt) {  // the element outputs
      unsigned int rem_k = k;
      const unsigned int c1 = rem_k;
      const unsigned long long ioff_v1 = ib_v1 + (unsigned long long)c1 * fj_ist_v1;
      const fj_bf16 v0h = fj_row_v0[(unsigned long long)k * fj_rst_v0];
      const float v0 = fj_load(v0h);
      const fj_bf16 v1h = in_v1[ioff_v1];
      const float v3 = fj_cvt_f32(v0);  // v3 (h) = cast(v0, f32) : f32  [rmsnorm.graph:8]
      const float v8 = fj_mul(v3, v7);  // v8 = mul(v3, v7) : f32  [rmsnorm.graph:10]
      const fj_bf16 v9h = fj_store_bf16(v8);  // v9 = cast(v8, bf16) : bf16  [rmsnorm.graph:10]
      const fj_bf16 v10h = fj_mul_bf16(v1h, v9h);  // v10 (y) = mul(v1, v9) : bf16  [rmsnorm.graph:10]
      out_v10[ob_v10 + (unsigned long long)c1 * fj_ost_v10] = v10h;
    }
    if (fj_rc && fj_nt > 1) fj_red_sync();  // the next row overwrites the row cache
  }
}
extern "C" __global__ void FJ_RED_ROW_BOUNDS fj_rmsnorm_d218ffcdcec42a6b(
    const fj_bf16* in_v0,
    const fj_bf16* in_v1,
    fj_bf16* out_v10,
    float p_v2,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ist_v1_1,
    unsigned long long ost_v10_0,
    unsigned long long ost_v10_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  fj_rmsnorm_d218ffcdcec42a6b_rows<true, 1>(in_v0, in_v1, out_v10, p_v2, n, isize1, isize1_mul, isize1_shift, ist_v0_0, ist_v0_1, ist_v1_1, ost_v10_0, ost_v10_1, rows, row_len, split_phase, row_split, ws, row_cache, vec_ok);
}
extern "C" __global__ void FJ_RED_ROW_BOUNDS fj_rmsnorm_d218ffcdcec42a6b_s(
    const fj_bf16* in_v0,
    const fj_bf16* in_v1,
    fj_bf16* out_v10,
    float p_v2,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ist_v1_1,
    unsigned long long ost_v10_0,
    unsigned long long ost_v10_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  fj_rmsnorm_d218ffcdcec42a6b_rows<false, 1>(in_v0, in_v1, out_v10, p_v2, n, isize1, isize1_mul, isize1_shift, ist_v0_0, ist_v0_1, ist_v1_1, ost_v10_0, ost_v10_1, rows, row_len, split_phase, row_split, ws, row_cache, vec_ok);
}
extern "C" __global__ void fj_rmsnorm_d218ffcdcec42a6b_l(
    const fj_bf16* in_v0,
    const fj_bf16* in_v1,
    fj_bf16* out_v10,
    float p_v2,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ist_v1_1,
    unsigned long long ost_v10_0,
    unsigned long long ost_v10_1,
    unsigned int rows,
    unsigned int row_len,
    int split_phase,
    unsigned int row_split,
    unsigned long long* ws,
    unsigned int row_cache,
    int vec_ok) {
  fj_rmsnorm_d218ffcdcec42a6b_rows<true, 4>(in_v0, in_v1, out_v10, p_v2, n, isize1, isize1_mul, isize1_shift, ist_v0_0, ist_v0_1, ist_v1_1, ost_v10_0, ost_v10_1, rows, row_len, split_phase, row_split, ws, row_cache, vec_ok);
}

