//| /* Lesson 02: the naive kernel, one thread per query row.
// solution begin
/* Lesson 02 solution: the naive kernel, one thread per query row.
// solution end
 * Thread (b, h, i) streams every key j, keeping the online-softmax state
 * (m, l) and its output row O_i in registers (lesson 01's recurrence with a
 * vector of values instead of one number). K and V come straight from global
 * memory: every thread reads all of K_{b,h} and V_{b,h}, so the kernel moves
 // solution begin
 * about N times more bytes than it needs; lesson 03 fixes that. fp32. */
 // solution end
//|  * about N times more bytes than it needs; lesson 03 fixes that. fp32.
//|  * Build and grade: make lesson2 && ./lesson2 */
#include <math.h>
#include "attention.h"
#include "cuda_check.h"

const lesson_info LESSON = {2, "02-naive-kernel", "naive kernel, one thread per query row",
                            DTYPE_BIT(DTYPE_FP32), 0, {64, 128, 0}};
//|
//| /* TODO(0): set to 0 when you have written TODO(1)..TODO(4); the grader then grades you. */
//| #define STARTER_NOT_DONE 1

#define THREADS 128

/* Q, K, V, O: [B*H, N, D] fp32; L: [B*H, N]. grid (ceil(N/THREADS), B*H).
 * scale_log2 = scale * log2(e): exp(s - m) = exp2(s*log2e - m*log2e), so the
 * scores are kept in the log2 domain and exp2f (one MUFU.EX2) replaces expf. */
template <int D>
__global__ void naive_attention(const float *__restrict__ Q, const float *__restrict__ K,
                                const float *__restrict__ V, float *__restrict__ O,
                                float *__restrict__ L, int N, float scale_log2) {
    //| // [region setup]
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    size_t slice = (size_t)blockIdx.y * N * D;
    const float *q = Q + slice + (size_t)i * D;
    const float *Kb = K + slice, *Vb = V + slice;
    // solution begin
    // [region online-loop]
    // solution end
    float o[D];
#pragma unroll
    for (int c = 0; c < D; ++c) o[c] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    //| // [end setup]
    for (int j = 0; j < N; ++j) {
        const float *k = Kb + (size_t)j * D, *v = Vb + (size_t)j * D;
        // TODO(1) begin
        float s = 0.0f;
#pragma unroll
        for (int c = 0; c < D; ++c) s += q[c] * k[c];
        s *= scale_log2;
        float m_new = fmaxf(m, s);
        float corr = exp2f(m - m_new); /* 0 on the first key, where m = -inf */
        float p = exp2f(s - m_new);
        l = l * corr + p;
#pragma unroll
        for (int c = 0; c < D; ++c) o[c] = o[c] * corr + p * v[c];
        m = m_new;
        // TODO(1) end
        //| /* TODO(1): the score s of this row against key j, in base-2 units, from q and k (D
        //|  *          columns each). README: "exp2, with log2 e folded into the scale". */
        //| /* TODO(2): from m and s: the new running max, the factor that moves the old state to
        //|  *          it, and this key's weight, all in base 2. README: "The per-key update". */
        //| /* TODO(3): rescale l and every o[c] by that factor, add this key's weight and its
        //|  *          weighted value row v, then move the max. o must stay in registers (every
        //|  *          index a compile-time constant). README: "The per-key update". */
        //| (void)k; (void)v; (void)q;
    }
    // TODO(4) begin
    // [end online-loop]
    // [region write-out]
    float inv_l = 1.0f / l;
    float *out = O + slice + (size_t)i * D;
#pragma unroll
    for (int c = 0; c < D; ++c) out[c] = o[c] * inv_l;
    L[(size_t)blockIdx.y * N + i] = (m + log2f(l)) * 0.69314718f; /* back to natural log */
    // [end write-out]
    // TODO(4) end
    //| /* TODO(4): row i of this slice of O is o / l; L of this row, in natural-log units, goes
    //|  *          to this slice of L. README: "The logsumexp L, and why we keep it". */
    //| (void)O; (void)L; (void)m; (void)l;
}

int attention_forward(const attn_args *a) {
    //| if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    dim3 grid((a->N + THREADS - 1) / THREADS, a->B * a->H);
    float scale_log2 = a->scale * 1.4426950409f;
    cudaStream_t s = (cudaStream_t)a->stream;
    const float *Q = (const float *)a->Q, *K = (const float *)a->K, *V = (const float *)a->V;
    if (a->d == 64) naive_attention<64><<<grid, THREADS, 0, s>>>(Q, K, V, (float *)a->O, a->L, a->N, scale_log2);
    else if (a->d == 128) naive_attention<128><<<grid, THREADS, 0, s>>>(Q, K, V, (float *)a->O, a->L, a->N, scale_log2);
    else return ATTN_UNSUPPORTED;
    return ATTN_OK;
}
