// solution begin
/* Lesson @NN@ solution: @TITLE@.
// solution end
//| /* Lesson @NN@: @TITLE@.
 * As `make new-lesson` wrote it: one thread per query row, the softmax in two passes over the
 * keys (the row max m, then the weights, their sum l and the output), fp32. Replace it with the
 * lesson's own kernel, and mark what the student writes (CONTRIBUTING.md, "Adding a lesson").
 * Q, K, V, O: [B, H, N, d] fp32, row-major; L: [B, H, N] fp32, the natural-log logsumexp of the
 * scaled scores (reference/include/attention.h).
 * Build and grade: make lesson@N@ && ./lesson@N@ (this lesson), make emu-lesson@N@ (no GPU). */
#include <math.h>
#include "attention.h"
#include "cuda_check.h"

const lesson_info LESSON = {@N@, "@NN@-@NAME@", "@TITLE@", DTYPE_BIT(DTYPE_FP32), 0, {64, 128, 0}};
//|
//| /* TODO(0): set to 0 when you have written TODO(1); the grader then grades you. */
//| #define STARTER_NOT_DONE 1

#define THREADS 128

template <int D> __device__ __forceinline__ float dot(const float *a, const float *b) {
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < D; ++c) s = fmaf(a[c], b[c], s);
    return s;
}

/* Row i of head slice blockIdx.y (= b H + h): S_ij = scale (q_i . k_j), m = max_j S_ij,
 * l = sum_j exp(S_ij - m), O_i = sum_j exp(S_ij - m) v_j / l, L_i = m + log l. Reads K twice
 * (the first pass finds m alone). grid (ceil(N / THREADS), B H), THREADS threads. */
template <int D>
__global__ void attention_rows(const float *__restrict__ Q, const float *__restrict__ K,
                               const float *__restrict__ V, float *__restrict__ O, float *__restrict__ L,
                               int N, float scale) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    const size_t head = (size_t)blockIdx.y * N * D;
    const float *q = Q + head + (size_t)i * D;
    // TODO(1) begin
    //| // TODO(1): the row's max score m, then its weights exp(S_ij - m), their sum l and the
    //| //   output row O_i = (sum of weight x v_j) / l; and L_i = m + log l (README, "What you write").
    //| (void)q; (void)K; (void)V; (void)O; (void)L; (void)scale;
    float m = -INFINITY;
    for (int j = 0; j < N; ++j) m = fmaxf(m, scale * dot<D>(q, K + head + (size_t)j * D));
    float l = 0.f, o[D];
#pragma unroll
    for (int c = 0; c < D; ++c) o[c] = 0.f;
    for (int j = 0; j < N; ++j) {
        const float p = expf(scale * dot<D>(q, K + head + (size_t)j * D) - m);
        const float *v = V + head + (size_t)j * D;
        l += p;
#pragma unroll
        for (int c = 0; c < D; ++c) o[c] = fmaf(p, v[c], o[c]);
    }
#pragma unroll
    for (int c = 0; c < D; ++c) O[head + (size_t)i * D + c] = o[c] / l;
    L[(size_t)blockIdx.y * N + i] = m + logf(l);
    // TODO(1) end
}

int attention_forward(const attn_args *a) {
    //| if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    const dim3 grid((a->N + THREADS - 1) / THREADS, a->B * a->H);
    cudaStream_t s = (cudaStream_t)a->stream;
    const float *Q = (const float *)a->Q, *K = (const float *)a->K, *V = (const float *)a->V;
    float *O = (float *)a->O;
    if (a->d == 64) attention_rows<64><<<grid, THREADS, 0, s>>>(Q, K, V, O, a->L, a->N, a->scale);
    else if (a->d == 128) attention_rows<128><<<grid, THREADS, 0, s>>>(Q, K, V, O, a->L, a->N, a->scale);
    else return ATTN_UNSUPPORTED;
    return ATTN_OK;
}
