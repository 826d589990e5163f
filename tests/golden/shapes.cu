// Fusion group: 2 op(s), iteration space [8], 32-bit index math, 4-wide vector path.
// Layout: r1 i32 in:[0,1):C k0:0 (docs/architecture.md, "A kernel's layout line"). Outputs: v4 (sc).
// Inputs: v1 (s).
// Entry points: fj_shapes_31a50ce278de4f8f for tensors in their canonical layout, fj_shapes_31a50ce278de4f8f_s for any strides.
static __device__ __forceinline__ void fj_shapes_31a50ce278de4f8f_elem(float v1, float& o_v4) {
  const float v3 = 0x1p-1f;  // v3 = const 0.5 : f32  [shapes.graph:6]
  const float v2 = fj_exp(v1);  // v2 = exp(v1) : f32  [shapes.graph:6]
  const float v4 = fj_mul(v2, v3);  // v4 (sc) = mul(v2, v3) : f32  [shapes.graph:6]
  o_v4 = v4;
}
extern "C" __global__ void fj_shapes_31a50ce278de4f8f(
    const float* in_v1,
    float* out_v4,
    unsigned int n,
    int vec_ok) {
  const unsigned int tid = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int nthreads = (unsigned int)gridDim.x * blockDim.x;
  unsigned int start = 0;
  if (vec_ok) {  // every pointer 16-byte aligned: 4 elements per iteration
    const unsigned int nvec = n / 4;
    for (unsigned int k = tid; k < nvec; k += nthreads) {
      const unsigned int i = k * 4;
      const fj_vec<float, 4> x_v1 = fj_vload<float, 4>(in_v1 + i);
      fj_vec<float, 4> y_v4;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float r_v4;
        fj_shapes_31a50ce278de4f8f_elem(x_v1.v[j], r_v4);
        y_v4.v[j] = r_v4;
      }
      fj_vstore<float, 4>(out_v4 + i, y_v4);
    }
    start = nvec * 4;
  }
  for (unsigned int i = start + tid; i < n; i += nthreads) {
    float r_v4;
    fj_shapes_31a50ce278de4f8f_elem(in_v1[i], r_v4);
    out_v4[i] = r_v4;
  }
}
extern "C" __global__ void fj_shapes_31a50ce278de4f8f_s(
    const float* in_v1,
    float* out_v4,
    unsigned int n,
    unsigned long long ist_v1_0,
    unsigned long long ost_v4_0) {
  const unsigned int tid = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int nthreads = (unsigned int)gridDim.x * blockDim.x;
  for (unsigned int i = tid; i < n; i += nthreads) {
    unsigned int rem = i;
    const unsigned int c0 = rem;
    const unsigned long long ioff_v1 = (unsigned long long)c0 * ist_v1_0;
    const unsigned long long ooff_v4 = (unsigned long long)c0 * ost_v4_0;
    float r_v4;
    fj_shapes_31a50ce278de4f8f_elem(in_v1[ioff_v1], r_v4);
    out_v4[ooff_v4] = r_v4;
  }
}

// Fusion group: 3 op(s), iteration space [16, 8], 32-bit index math, 4-wide vector path.
// Layout: r2 i32 in:[0,1)[1,2):C,S01 k0.1:0.1,-.0 (docs/architecture.md, "A kernel's layout line"). Outputs: v7 (y), v8 (same).
// Inputs: v0 (x), v4 (sc).
// Entry points: fj_shapes_fcb088a8cf800c88 for tensors in their canonical layout, fj_shapes_fcb088a8cf800c88_s for any strides.
static __device__ __forceinline__ void fj_shapes_fcb088a8cf800c88_elem(float v0, float v4, float& o_v7, float& o_v8) {
  const float v6 = 0x1p+0f;  // v6 = const 1.0 : f32  [shapes.graph:7]
  const float v5 = fj_mul(v0, v4);  // v5 = mul(v0, v4) : f32  [shapes.graph:7]
  const float v7 = fj_add(v5, v6);  // v7 (y) = add(v5, v6) : f32  [shapes.graph:7]
  const float v8 = fj_cvt_f32(v0);  // v8 (same) = cast(v0, f32) : f32  [shapes.graph:9]
  o_v7 = v7;
  o_v8 = v8;
}
extern "C" __global__ void fj_shapes_fcb088a8cf800c88(
    const float* in_v0,
    const float* in_v4,
    float* out_v7,
    float* out_v8,
    unsigned int n,
    unsigned int size1,
    unsigned int size1_mul,
    unsigned int size1_shift,
    unsigned int st_v4_1,
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
      const unsigned int off_v4 = c1 * st_v4_1;
      const fj_vec<float, 4> x_v0 = fj_vload<float, 4>(in_v0 + i);
      const fj_vec<float, 4> x_v4 = fj_vload<float, 4>(in_v4 + off_v4);
      fj_vec<float, 4> y_v7;
      fj_vec<float, 4> y_v8;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float r_v7;
        float r_v8;
        fj_shapes_fcb088a8cf800c88_elem(x_v0.v[j], x_v4.v[j], r_v7, r_v8);
        y_v7.v[j] = r_v7;
        y_v8.v[j] = r_v8;
      }
      fj_vstore<float, 4>(out_v7 + i, y_v7);
      fj_vstore<float, 4>(out_v8 + i, y_v8);
    }
    start = nvec * 4;
  }
  for (unsigned int i = start + tid; i < n; i += nthreads) {
    unsigned int rem = i;
    const unsigned int q1 = fjk_udiv(rem, size1_mul, size1_shift);  // rem / size1
    const unsigned int c1 = rem - q1 * size1;
    rem = q1;
    const unsigned int c0 = rem;
    const unsigned int off_v4 = c1 * st_v4_1;
    float r_v7;
    float r_v8;
    fj_shapes_fcb088a8cf800c88_elem(in_v0[i], in_v4[off_v4], r_v7, r_v8);
    out_v7[i] = r_v7;
    out_v8[i] = r_v8;
  }
}
extern "C" __global__ void fj_shapes_fcb088a8cf800c88_s(
    const float* in_v0,
    const float* in_v4,
    float* out_v7,
    float* out_v8,
    unsigned int n,
    unsigned int isize1,
    unsigned int isize1_mul,
    unsigned int isize1_shift,
    unsigned long long ist_v0_0,
    unsigned long long ist_v0_1,
    unsigned long long ist_v4_1,
    unsigned long long ost_v7_0,
    unsigned long long ost_v7_1,
    unsigned long long ost_v8_0,
    unsigned long long ost_v8_1) {
  const unsigned int tid = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int nthreads = (unsigned int)gridDim.x * blockDim.x;
  for (unsigned int i = tid; i < n; i += nthreads) {
    unsigned int rem = i;
    const unsigned int q1 = fjk_udiv(rem, isize1_mul, isize1_shift);  // rem / isize1
    const unsigned int c1 = rem - q1 * isize1;
    rem = q1;
    const unsigned int c0 = rem;
    const unsigned long long ioff_v0 = (unsigned long long)c0 * ist_v0_0 + (unsigned long long)c1 * ist_v0_1;
    const unsigned long long ioff_v4 = (unsigned long long)c1 * ist_v4_1;
    const unsigned long long ooff_v7 = (unsigned long long)c0 * ost_v7_0 + (unsigned long long)c1 * ost_v7_1;
    float r_v7;
    const unsigned long long ooff_v8 = (unsigned long long)c0 * ost_v8_0 + (unsigned long long)c1 * ost_v8_1;
    float r_v8;
    fj_shapes_fcb088a8cf800c88_elem(in_v0[ioff_v0], in_v4[ioff_v4], r_v7, r_v8);
    out_v7[ooff_v7] = r_v7;
    out_v8[ooff_v8] = r_v8;
  }
}

