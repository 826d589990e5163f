// Fusion group: 9 op(s), iteration space [T, F], 32-bit index math, 4-wide vector path.
// Layout: r2 i32 in:[0,1)[1,2):C,S01,S01 k0.1:0.1,-.0,-.0 (docs/architecture.md, "A kernel's layout line"). Outputs: v11 (y), v13 (z), v14 (w).
// Inputs: v0 (x), v1 (bias), v2 (s).
// Entry points: fj_half_gelu_50b269e8b6a57a96 for tensors in their canonical layout, fj_half_gelu_50b269e8b6a57a96_s for any strides.
static __device__ __forceinline__ void fj_half_gelu_50b269e8b6a57a96_elem(fj_f16 v0h, fj_f16 v1h, fj_bf16 v2h, fj_f16& o_v11, fj_bf16& o_v13, float& o_v14) {
  const fj_f16 v4h = {(unsigned short)0x3800u};  // v4 = const 0.5 : f16  [half_gelu.graph:9]
  const fj_f16 v6h = {(unsigned short)0x39a8u};  // v6 = const 0.70703125 : f16  [half_gelu.graph:9]
  const fj_f16 v9h = {(unsigned short)0x3c00u};  // v9 = const 1.0 : f16  [half_gelu.graph:9]
  const fj_f16 v3h = fj_add_f16(v0h, v1h);  // v3 (h) = add(v0, v1) : f16  [half_gelu.graph:8]
  const float v3 = fj_load(v3h);
  const fj_f16 v5h = fj_mul_f16(v3h, v4h);  // v5 = mul(v3, v4) : f16  [half_gelu.graph:9]
  const fj_f16 v7h = fj_mul_f16(v3h, v6h);  // v7 = mul(v3, v6) : f16  [half_gelu.graph:9]
  const float v7 = fj_load(v7h);
  const fj_f16 v8h = fj_store_f16(fj_erf(v7));  // v8 = erf(v7) : f16  [half_gelu.graph:9]
  const fj_f16 v10h = fj_add_f16(v9h, v8h);  // v10 = add(v9, v8) : f16  [half_gelu.graph:9]
  const fj_f16 v11h = fj_mul_f16(v5h, v10h);  // v11 (y) = mul(v5, v10) : f16  [half_gelu.graph:9]
  const float v11 = fj_load(v11h);
  const fj_bf16 v12h = fj_store_bf16(v11);  // v12 = cast(v11, bf16) : bf16  [half_gelu.graph:14]
  const fj_bf16 v13h = fj_mul_bf16(v12h, v2h);  // v13 (z) = mul(v12, v2) : bf16  [half_gelu.graph:14]
  const float v14 = fj_cvt_f32(v3);  // v14 (w) = cast(v3, f32) : f32  [half_gelu.graph:16]
  o_v11 = v11h;
  o_v13 = v13h;
  o_v14 = v14;
}
extern "C" __global__ void fj_half_gelu_50b269e8b6a57a96(
    const fj_f16* in_v0,
    const fj_f16* in_v1,
    const fj_bf16* in_v2,
    fj_f16* out_v11,
    fj_bf16* out_v13,
    float* out_v14,
    unsigned int n,
    unsigned int size1,
    unsigned int size1_mul,
    unsigned int size1_shift,
    unsigned int st_v1_1,
    unsigned int st_v2_1,
    int vec_ok) {
  const unsigned int tid = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int nthreads = (unsigned int)gridDim.x * blockDim.x;
  unsigned int start = 0;
  if (vec_ok) {  // every pointer 16-byte aligned and size1 % 4 == 0: 4 elements per iteration, in one row
    const unsigned int nvec = n / 4;
    for (unsigned int k = tid; k < nvec; k += nthreads) {
      const unsigned int i = k * 4;
      unsigned int rem = i;
      const unsigned int q1 = fjk_udiv(rem, size1_mul, size1_shift);  // rem / size1
      const unsigned int c1 = rem - q1 * size1;
      rem = q1;
      const unsigned int c0 = rem;
      const unsigned int off_v1 = c1 * st_v1_1;
      const unsigned int off_v2 = c1 * st_v2_1;
      const fj_vec<fj_f16, 4> x_v0 = fj_vload<fj_f16, 4>(in_v0 + i);
      const fj_vec<fj_f16, 4> x_v1 = fj_vload<fj_f16, 4>(in_v1 + off_v1);
      const fj_vec<fj_bf16, 4> x_v2 = fj_vload<fj_bf16, 4>(in_v2 + off_v2);
      fj_vec<fj_f16, 4> y_v11;
      fj_vec<fj_bf16, 4> y_v13;
      fj_vec<float, 4> y_v14;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        fj_f16 r_v11;
        fj_bf16 r_v13;
        float r_v14;
        fj_half_gelu_50b269e8b6a57a96_elem(x_v0.v[j], x_v1.v[j], x_v2.v[j], r_v11, r_v13, r_v14);
        y_v11.v[j] = r_v11;
        y_v13.v[j] = r_v13;
        y_v14.v[j] = r_v14;
      }
      fj_vstore<fj_f16, 4>(out_v11 + i, y_v11);
      fj_vstore<fj_bf16, 4>(out_v13 + i, y_v13);
      fj_vstore<float, 4>(out_v14 + i, y_v14);
    }
    start = nvec * 4;
  }
  for (unsigned int i = start + tid; i < n; i += nthreads) {
    unsigned int rem = i;
    const unsigned int q1 = fjk_udiv(rem, size1_mul, size1_shift);  // rem / size1
    const unsigned int c1 = rem - q1 * size1;
    rem = q1;
    const unsigned int c0 = rem;
    const unsigned int off_v1 = c1 * st_v1_1;
    const unsigned int off_v2 = c1 * st_v2_1;
    fj_f16 r_v11;
    fj_bf16 r_v13;
    float r_v14;
    fj_half_gelu_50b269e8b6a57a96_elem(in_v0[i], in_v1[off_v1], in_v2[off_v2], r_v11, r_v13, r_v14);
    out_v11[i] = r_v11;
    out_v13[i] = r_v13;
    out_v14[i] = r_v14;
  }
}
extern "C" __global__ void fj_half_gelu_50b269e8b6a57a96_s(
    const fj_f16* in_v0,
    const fj_f16* in_v1,
    const fj_bf16* in_v2,
    fj_f16* out_v11,
    fj_bf16* out_v13,
    float* out_v14,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ist_v1_1,
    unsigned long long ist_v2_1,
    unsigned long long ost_v11_0,
    unsigned long long ost_v11_1,
    unsigned long long ost_v13_0,
    unsigned long long ost_v13_1,
    unsigned long long ost_v14_0,
    unsigned long long ost_v14_1) {
  const unsigned int tid = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int nthreads = (unsigned int)gridDim.x * blockDim.x;
  for (unsigned int i = tid; i < n; i += nthreads) {
    unsigned int rem = i;
    const unsigned int q1 = fjk_udiv(rem, isize1_mul, isize1_shift);  // rem / isize1
    const unsigned int c1 = rem - q1 * isize1;
    rem = q1;
    const unsigned int c0 = rem;
    const unsigned long long ioff_v0 = (unsigned long long)c0 * ist_v0_0 + (unsigned long long)c1 * ist_v0_1;
    const unsigned long long ioff_v1 = (unsigned long long)c1 * ist_v1_1;
    const unsigned long long ioff_v2 = (unsigned long long)c1 * ist_v2_1;
    const unsigned long long ooff_v11 = (unsigned long long)c0 * ost_v11_0 + (unsigned long long)c1 * ost_v11_1;
    fj_f16 r_v11;
    const unsigned long long ooff_v13 = (unsigned long long)c0 * ost_v13_0 + (unsigned long long)c1 * ost_v13_1;
    fj_bf16 r_v13;
    const unsigned long long ooff_v14 = (unsigned long long)c0 * ost_v14_0 + (unsigned long long)c1 * ost_v14_1;
    float r_v14;
    fj_half_gelu_50b269e8b6a57a96_elem(in_v0[ioff_v0], in_v1[ioff_v1], in_v2[ioff_v2], r_v11, r_v13, r_v14);
    out_v11[ooff_v11] = r_v11;
    out_v13[ooff_v13] = r_v13;
    out_v14[ooff_v14] = r_v14;
  }
}

