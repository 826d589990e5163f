// Fusion group: 4 op(s), iteration space [N, C, H, W], 32-bit index math, 4-wide vector path.
// Layout: r3 i32 in:[0,1)[1,2)[2,4):C,S010,S010 k0.1.2.3:0.1.2.3,-.1.-.-,-.1.-.- (docs/architecture.md, "A kernel's layout line"). Outputs: v7 (out).
// Inputs: v0 (img), v1 (mean), v2 (std).
// Entry points: fj_nchw_6c8fca4793e9f6ee for tensors in their canonical layout, fj_nchw_6c8fca4793e9f6ee_s for any strides.
static __device__ __forceinline__ void fj_nchw_6c8fca4793e9f6ee_elem(unsigned char v0, float v1, float v2, float& o_v7) {
  const float v4 = 0x1.fep+7f;  // v4 = const 255.0 : f32  [nchw.graph:11]
  const float v3 = fj_cvt_f32(v0);  // v3 = cast(v0, f32) : f32  [nchw.graph:11]
  const float v5 = fj_div(v3, v4);  // v5 (x) = div(v3, v4) : f32  [nchw.graph:11]
  const float v6 = fj_sub(v5, v1);  // v6 = sub(v5, v1) : f32  [nchw.graph:12]
  const float v7 = fj_div(v6, v2);  // v7 (out) = div(v6, v2) : f32  [nchw.graph:12]
  o_v7 = v7;
}
extern "C" __global__ void fj_nchw_6c8fca4793e9f6ee(
    const unsigned char* in_v0,
    const float* in_v1,
    const float* in_v2,
    float* out_v7,
    unsigned int n,
    unsigned int size1,
    unsigned int size1_mul,
    unsigned int size1_shift,
    unsigned int size2,
    unsigned int size2_mul,
    unsigned int size2_shift,
    unsigned int st_v1_1,
    unsigned int st_v2_1,
    int vec_ok) {
  const unsigned int tid = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int nthreads = (unsigned int)gridDim.x * blockDim.x;
  unsigned int start = 0;
  if (vec_ok) {  // every pointer 16-byte aligned and size2 % 4 == 0: 4 elements per iteration, in one row
    const unsigned int nvec = n / 4;
    for (unsigned int k = tid; k < nvec; k += nthreads) {
      const unsigned int i = k * 4;
      unsigned int rem = i;
      const unsigned int q2 = fjk_udiv(rem, size2_mul, size2_shift);  // rem / size2
      const unsigned int c2 = rem - q2 * size2;
      rem = q2;
      const unsigned int q1 = fjk_udiv(rem, size1_mul, size1_shift);  // rem / size1
      const unsigned int c1 = rem - q1 * size1;
      rem = q1;
      const unsigned int c0 = rem;
      const unsigned int off_v1 = c1 * st_v1_1;
      const unsigned int off_v2 = c1 * st_v2_1;
      const fj_vec<unsigned char, 4> x_v0 = fj_vload<unsigned char, 4>(in_v0 + i);
      const float b_v1 = in_v1[off_v1];
      const float b_v2 = in_v2[off_v2];
      fj_vec<float, 4> y_v7;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float r_v7;
        fj_nchw_6c8fca4793e9f6ee_elem(x_v0.v[j], b_v1, b_v2, r_v7);
        y_v7.v[j] = r_v7;
      }
      fj_vstore<float, 4>(out_v7 + i, y_v7);
    }
    start = nvec * 4;
  }
  for (unsigned int i = start + tid; i < n; i += nthreads) {
    unsigned int rem = i;
    const unsigned int q2 = fjk_udiv(rem, size2_mul, size2_shift);  // rem / size2
    const unsigned int c2 = rem - q2 * size2;
    rem = q2;
    const unsigned int q1 = fjk_udiv(rem, size1_mul, size1_shift);  // rem / size1
    const unsigned int c1 = rem - q1 * size1;
    rem = q1;
    const unsigned int c0 = rem;
    const unsigned int off_v1 = c1 * st_v1_1;
    const unsigned int off_v2 = c1 * st_v2_1;
    float r_v7;
    fj_nchw_6c8fca4793e9f6ee_elem(in_v0[i], in_v1[off_v1], in_v2[off_v2], r_v7);
    out_v7[i] = r_v7;
  }
}
extern "C" __global__ void fj_nchw_6c8fca4793e9f6ee_s(
    const unsigned char* in_v0,
    const float* in_v1,
    const float* in_v2,
    float* out_v7,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned int isize2,
    unsigned int isize2_mul,
    unsigned int isize2_shift,
    unsigned int isize3,
    unsigned int isize3_mul,
    unsigned int isize3_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ist_v0_2,
    unsigned long long ist_v0_3,
    unsigned long long ist_v1_1,
    unsigned long long ist_v2_1,
    unsigned long long ost_v7_0,
    unsigned long long ost_v7_1,
    unsigned long long ost_v7_2,
    unsigned long long ost_v7_3) {
  const unsigned int tid = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int nthreads = (unsigned int)gridDim.x * blockDim.x;
  for (unsigned int i = tid; i < n; i += nthreads) {
    unsigned int rem = i;
    const unsigned int q3 = fjk_udiv(rem, isize3_mul, isize3_shift);  // rem / isize3
    const unsigned int c3 = rem - q3 * isize3;
    rem = q3;
    const unsigned int q2 = fjk_udiv(rem, isize2_mul, isize2_shift);  // rem / isize2
    const unsigned int c2 = rem - q2 * isize2;
    rem = q2;
    const unsigned int q1 = fjk_udiv(rem, isize1_mul, isize1_shift);  // rem / isize1
    const unsigned int c1 = rem - q1 * isize1;
    rem = q1;
    const unsigned int c0 = rem;
    const unsigned long long ioff_v0 = (unsigned long long)c0 * ist_v0_0 + (unsigned long long)c1 * ist_v0_1 + (unsigned long long)c2 * ist_v0_2 + (unsigned long long)c3 * ist_v0_3;
    const unsigned long long ioff_v1 = (unsigned long long)c1 * ist_v1_1;
    const unsigned long long ioff_v2 = (unsigned long long)c1 * ist_v2_1;
    const unsigned long long ooff_v7 = (unsigned long long)c0 * ost_v7_0 + (unsigned long long)c1 * ost_v7_1 + (unsigned long long)c2 * ost_v7_2 + (unsigned long long)c3 * ost_v7_3;
    float r_v7;
    fj_nchw_6c8fca4793e9f6ee_elem(in_v0[ioff_v0], in_v1[ioff_v1], in_v2[ioff_v2], r_v7);
    out_v7[ooff_v7] = r_v7;
  }
}

