/* tests/gpu_fp8/scalar_fp8.cu: the FP8 path of the harness on a real GPU, before lesson 14's
 * kernel exists. A deliberately simple forward pass on FP8 inputs (--dtype e4m3; attention.h,
 * attn_fp8): one thread per query row, CUDA cores only, no tensor cores, the arithmetic of
 * tests/hostsim/fp8_lesson.cpp (which runs it on the CPU, `make hostsim-forward`): per tile of
 * 128 keys, S = (q . k codes) * descale_q * descale_k * scale in fp32, an online softmax,
 * exp(S - m) scaled by FP8_P_SCALE and rounded to e4m3, O += P . V * descale_v / FP8_P_SCALE,
 * O / l in bf16. It checks that what the harness uploads (codes, descale arrays, the bf16 O)
 * means on the device what the CPU references assume. Slow on purpose: not a lesson, not timed.
 *
 * Build and run on a Hopper (sm_90a): `make fp8-scalar` (mk/tools.mk: the runner, the harness
 * and this file in one nvcc line), then ./build/fp8scalar --check-only --seed 1 (the case matrix). */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <math.h>
#include "attention.h"
#include "cuda_check.h"
#include "fp8.h"

extern "C" const lesson_info LESSON = {
    14, "gpu-fp8-scalar", "FP8 inputs, one thread per row on CUDA cores (harness check)", DTYPE_BIT(DTYPE_E4M3), 1,
    {64, 128, 0}, 0, 0};

enum { MAX_D = 128, TILE = 128 };

__device__ static float code(const uint8_t *x, size_t i) {
    __nv_fp8_e4m3 f;
    f.__x = x[i];
    return (float)f;
}

/* the descale of row i of slice s: one per tensor (rows = 0) or per block of rows */
__device__ static float descale(const float *ds, int rows, int s, int N, int i) {
    return rows <= 0 ? ds[0] : ds[(size_t)s * ((N + rows - 1) / rows) + i / rows];
}

__global__ void scalar_fp8_forward(attn_args a) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x, bh = blockIdx.y;
    if (i >= a.N) return;
    const int d = a.d, skv = (bh / a.H) * a.H_kv + (bh % a.H) / (a.H / a.H_kv);
    const uint8_t *K = (const uint8_t *)a.K + (size_t)skv * a.N_kv * d, *V = (const uint8_t *)a.V + (size_t)skv * a.N_kv * d;
    float q[MAX_D], o[MAX_D];
    const float dq = descale(a.fp8.descale_q, a.fp8.q_rows, bh, a.N, i);
    for (int c = 0; c < d; ++c) { q[c] = code((const uint8_t *)a.Q, ((size_t)bh * a.N + i) * d + c) * dq; o[c] = 0; }
    const int nk = a.causal ? i + 1 : a.N_kv;
    float m = -INFINITY, l = 0;
    for (int j0 = 0; j0 < nk; j0 += TILE) {
        const int j1 = min(nk, j0 + TILE);
        float mt = m;
        for (int j = j0; j < j1; ++j) { /* the tile's max first; S is recomputed below */
            float s = 0;
            for (int c = 0; c < d; ++c) s += q[c] * code(K, (size_t)j * d + c);
            mt = fmaxf(mt, s * descale(a.fp8.descale_k, a.fp8.kv_rows, skv, a.N_kv, j) * a.scale);
        }
        const float alpha = expf(m - mt);
        l *= alpha;
        for (int c = 0; c < d; ++c) o[c] *= alpha;
        for (int j = j0; j < j1; ++j) {
            float s = 0;
            for (int c = 0; c < d; ++c) s += q[c] * code(K, (size_t)j * d + c);
            const float p = expf(s * descale(a.fp8.descale_k, a.fp8.kv_rows, skv, a.N_kv, j) * a.scale - mt);
            l += p;
            const float pq = (float)__nv_fp8_e4m3(p * FP8_P_SCALE);
            const float w = pq * descale(a.fp8.descale_v, a.fp8.kv_rows, skv, a.N_kv, j) / FP8_P_SCALE;
            for (int c = 0; c < d; ++c) o[c] += w * code(V, (size_t)j * d + c);
        }
        m = mt;
    }
    for (int c = 0; c < d; ++c) ((__nv_bfloat16 *)a.O)[((size_t)bh * a.N + i) * d + c] = __float2bfloat16_rn(o[c] / l);
    a.L[(size_t)bh * a.N + i] = m + logf(l);
}

extern "C" int attention_forward(const attn_args *a) {
    if (a->dtype != DTYPE_E4M3 || a->d > MAX_D) return ATTN_UNSUPPORTED;
    const dim3 grid((a->N + 63) / 64, a->B * a->H);
    scalar_fp8_forward<<<grid, 64, 0, (cudaStream_t)a->stream>>>(*a);
    return ATTN_OK;
}
