// Fusion group: 16 op(s), iteration space [N], 32-bit index math, 4-wide vector path.
// Layout: r1 i32 in:[0,1):C,C,C,C k0:0,0,0,0 (docs/architecture.md, "A kernel's layout line"). Outputs: v14 (m_out), v19 (v_out), v26 (p_out).
// Inputs: v0 (p), v1 (grad), v2 (m), v3 (v). Params: v4 (lr), v5 (beta1), v6 (beta2), v7 (eps), v8 (bc1), v9 (bc2).
// Entry points: fj_adam_ffb86e429b5a319a for tensors in their canonical layout, fj_adam_ffb86e429b5a319a_s for any strides.
static __device__ __forceinline__ void fj_adam_ffb86e429b5a319a_elem(float v0, float v1, float v2, float v3, float v4, float v5, float v6, float v7, float v8, float v9, float& o_v14, float& o_v19, float& o_v26) {
  const float v11 = 0x1p+0f;  // v11 = const 1.0 : f32  [adam.graph:14]
  const float v10 = fj_mul(v5, v2);  // v10 = mul(v5, v2) : f32  [adam.graph:14]
  const float v12 = fj_sub(v11, v5);  // v12 = sub(v11, v5) : f32  [adam.graph:14]
  const float v13 = fj_mul(v12, v1);  // v13 = mul(v12, v1) : f32  [adam.graph:14]
  const float v14 = fj_add(v10, v13);  // v14 (m_out) = add(v10, v13) : f32  [adam.graph:14]
  const float v15 = fj_mul(v6, v3);  // v15 = mul(v6, v3) : f32  [adam.graph:15]
  const float v16 = fj_sub(v11, v6);  // v16 = sub(v11, v6) : f32  [adam.graph:15]
  const float v17 = fj_mul(v16, v1);  // v17 = mul(v16, v1) : f32  [adam.graph:15]
  const float v18 = fj_mul(v17, v1);  // v18 = mul(v17, v1) : f32  [adam.graph:15]
  const float v19 = fj_add(v15, v18);  // v19 (v_out) = add(v15, v18) : f32  [adam.graph:15]
  const float v20 = fj_div(v19, v9);  // v20 = div(v19, v9) : f32  [adam.graph:16]
  const float v21 = fj_sqrt(v20);  // v21 = sqrt(v20) : f32  [adam.graph:16]
  const float v22 = fj_add(v21, v7);  // v22 (denom) = add(v21, v7) : f32  [adam.graph:16]
  const float v23 = fj_div(v14, v8);  // v23 = div(v14, v8) : f32  [adam.graph:17]
  const float v24 = fj_mul(v4, v23);  // v24 = mul(v4, v23) : f32  [adam.graph:17]
  const float v25 = fj_div(v24, v22);  // v25 = div(v24, v22) : f32  [adam.graph:17]
  const float v26 = fj_sub(v0, v25);  // v26 (p_out) = sub(v0, v25) : f32  [adam.graph:17]
  o_v14 = v14;
  o_v19 = v19;
  o_v26 = v26;
}
extern "C" __global__ void fj_adam_ffb86e429b5a319a(
    const float* in_v0,
    const float* in_v1,
    const float* in_v2,
    const float* in_v3,
    float* out_v14,
    float* out_v19,
    float* out_v26,
    float p_v4,
    float p_v5,
    float p_v6,
    float p_v7,
    float p_v8,
    float p_v9,
    unsigned int n,
    int vec_ok) {
  const unsigned int tid = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int nthreads = (unsigned int)gridDim.x * blockDim.x;
  unsigned int start = 0;
  if (vec_ok) {  // every pointer 16-byte aligned: 4 elements per iteration
    const unsigned int nvec = n / 4;
    for (unsigned int k = tid; k < nvec; k += nthreads) {
      const unsigned int i = k * 4;
      const fj_vec<float, 4> x_v0 = fj_vload<float, 4>(in_v0 + i);
      const fj_vec<float, 4> x_v1 = fj_vload<float, 4>(in_v1 + i);
      const fj_vec<float, 4> x_v2 = fj_vload<float, 4>(in_v2 + i);
      const fj_vec<float, 4> x_v3 = fj_vload<float, 4>(in_v3 + i);
      fj_vec<float, 4> y_v14;
      fj_vec<float, 4> y_v19;
      fj_vec<float, 4> y_v26;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float r_v14;
        float r_v19;
        float r_v26;
        fj_adam_ffb86e429b5a319a_elem(x_v0.v[j], x_v1.v[j], x_v2.v[j], x_v3.v[j], p_v4, p_v5, p_v6, p_v7, p_v8, p_v9, r_v14, r_v19, r_v26);
        y_v14.v[j] = r_v14;
        y_v19.v[j] = r_v19;
        y_v26.v[j] = r_v26;
      }
      fj_vstore<float, 4>(out_v14 + i, y_v14);
      fj_vstore<float, 4>(out_v19 + i, y_v19);
      fj_vstore<float, 4>(out_v26 + i, y_v26);
    }
    start = nvec * 4;
  }
  for (unsigned int i = start + tid; i < n; i += nthreads) {
    float r_v14;
    float r_v19;
    float r_v26;
    fj_adam_ffb86e429b5a319a_elem(in_v0[i], in_v1[i], in_v2[i], in_v3[i], p_v4, p_v5, p_v6, p_v7, p_v8, p_v9, r_v14, r_v19, r_v26);
    out_v14[i] = r_v14;
    out_v19[i] = r_v19;
    out_v26[i] = r_v26;
  }
}
extern "C" __global__ void fj_adam_ffb86e429b5a319a_s(
    const float* in_v0,
    const float* in_v1,
    const float* in_v2,
    const float* in_v3,
    float* out_v14,
    float* out_v19,
    float* out_v26,
    float p_v4,
    float p_v5,
    float p_v6,
    float p_v7,
    float p_v8,
    float p_v9,
    unsigned int n,
    unsigned long long ist_v0_0,
    unsigned long long ist_v1_0,
    unsigned long long ist_v2_0,
    unsigned long long ist_v3_0,
    unsigned long long ost_v14_0,
    unsigned long long ost_v19_0,
    unsigned long long ost_v26_0) {
  const unsigned int tid = (unsigned int)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int nthreads = (unsigned int)gridDim.x * blockDim.x;
  for (unsigned int i = tid; i < n; i += nthreads) {
    unsigned int rem = i;
    const unsigned int c0 = rem;
    const unsigned long long ioff_v0 = (unsigned long long)c0 * ist_v0_0;
    const unsigned long long ioff_v1 = (unsigned long long)c0 * ist_v1_0;
    const unsigned long long ioff_v2 = (unsigned long long)c0 * ist_v2_0;
    const unsigned long long ioff_v3 = (unsigned long long)c0 * ist_v3_0;
    const unsigned long long ooff_v14 = (unsigned long long)c0 * ost_v14_0;
    float r_v14;
    const unsigned long long ooff_v19 = (unsigned long long)c0 * ost_v19_0;
    float r_v19;
    const unsigned long long ooff_v26 = (unsigned long long)c0 * ost_v26_0;
    float r_v26;
    fj_adam_ffb86e429b5a319a_elem(in_v0[ioff_v0], in_v1[ioff_v1], in_v2[ioff_v2], in_v3[ioff_v3], p_v4, p_v5, p_v6, p_v7, p_v8, p_v9, r_v14, r_v19, r_v26);
    out_v14[ooff_v14] = r_v14;
    out_v19[ooff_v19] = r_v19;
    out_v26[ooff_v26] = r_v26;
  }
}

