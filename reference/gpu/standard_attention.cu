/* standard_attention.cu: the unfused baseline every flash lesson is compared to.
 *
 * Three steps, each a round trip through device memory (HBM), as in the
 * "standard attention implementation" the FlashAttention paper starts from
 * (Dao et al., 2022, Algorithm 0):
 *   1. S = scale * Q K^T          cuBLAS GEMM, S written to HBM   [B*H, N, N]
 *   2. P = softmax(S [+ mask])    one kernel, reads S, writes P   [B*H, N, N]
 *                                 (and L = m + log l, the logsumexp)
 *   3. O = P V                    cuBLAS GEMM, reads P from HBM   [B*H, N, d]
 * It implements the lesson interface (attention.h), so the same harness grades
 * it against float64 and times it: `make standard && ./standard`.
 *
 * Precision, per dtype:
 *   fp32       Q, K, V, S, P, O fp32; CUBLAS_COMPUTE_32F with the default math
 *              mode, i.e. true fp32 FMA on the CUDA cores, NO TF32 tensor cores
 *              (so fp32 numbers here are not comparable to TF32 numbers).
 *   fp16/bf16  Q, K, V, O 16-bit; tensor-core GEMMs with fp32 accumulation;
 *              S stored fp32 (the softmax input keeps full precision), P stored
 *              in the 16-bit type (as PyTorch's matmul-softmax-matmul does) so
 *              that P V runs on the 16-bit tensor cores.
 * Memory: S and P are separate B*H*N*N buffers (4 + 4 bytes per score in fp32,
 * 4 + 2 in fp16/bf16). That N^2 workspace is the whole point of the baseline;
 * when it does not fit, attention_forward returns ATTN_OUT_OF_MEMORY and says
 * how many bytes it needed. Causal attention still computes the full N x N
 * GEMMs (the masked half is zeroed in P), as an unfused implementation does.
 */
#include <math.h>
#include <stdio.h>
#include "attention.h"
#include "standard_common.h"

const lesson_info LESSON = {
    0,
    "standard",
    "standard attention (cuBLAS, S and P in HBM)",
    DTYPE_BIT(DTYPE_FP32) | DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16),
    1,
    {32, 64, 128, 0},
};

/* ---- step 2: row softmax ---- */

/* Online (running max, running sum) pair of one row segment; combining two
 * of them is FlashAttention-2's m/l recurrence. A pair that has seen no
 * visible score is (-inf, 0); it must not produce exp(-inf - -inf) = NaN. */
struct ml_pair {
    float m, l;
};

__device__ __forceinline__ ml_pair ml_combine(ml_pair a, ml_pair b) {
    if (a.m == -INFINITY) return b;
    if (b.m == -INFINITY) return a;
    float m = fmaxf(a.m, b.m);
    return {m, a.l * expf(a.m - m) + b.l * expf(b.m - m)};
}

/* One thread block per row of S (row index r = (b*H + h)*N + i, so the query
 * index is i = r % N). Reads the row twice: pass 1 keeps a per-thread running
 * (m, l) over the visible keys (j <= i when causal, all j otherwise), reduced
 * across the block; pass 2 writes P_ij = exp(S_ij - m) / l, and 0 for masked
 * keys, so the P V GEMM can run over the full row. Also writes
 * L_i = m + log(l) (natural log), the logsumexp the interface asks for.
 * S: [B*H*N, N] fp32 row-major, already scaled. P: same shape, type TP.
 * Every row has at least one visible key (j = 0 <= i), so l >= 1 and m is finite
 * (for finite S). blockDim.x: a multiple of 32, at most 1024. */
template <typename TP>
__global__ void softmax_rows(const float *__restrict__ S, TP *__restrict__ P, float *__restrict__ L,
                             int N, int causal) {
    const size_t r = blockIdx.x;
    const int i = (int)(r % (size_t)N);
    const int visible = causal ? i + 1 : N; /* keys 0..visible-1 take part */
    const float *s = S + r * (size_t)N;
    TP *p = P + r * (size_t)N;

    ml_pair acc = {-INFINITY, 0.f};
    for (int j = threadIdx.x; j < visible; j += blockDim.x) {
        float x = s[j];
        if (x > acc.m) {
            acc.l = acc.l * expf(acc.m - x) + 1.f; /* acc.m = -inf gives 0 * 0 + 1 */
            acc.m = x;
        } else {
            acc.l += expf(x - acc.m);
        }
    }
    /* Reduce (m, l) over the warp, then over the warps through shared memory. */
    for (int off = 16; off > 0; off >>= 1) {
        ml_pair o = {__shfl_xor_sync(0xffffffffu, acc.m, off), __shfl_xor_sync(0xffffffffu, acc.l, off)};
        acc = ml_combine(acc, o);
    }
    __shared__ ml_pair warp_acc[32];
    __shared__ ml_pair row;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nwarps = blockDim.x / 32;
    if (lane == 0) warp_acc[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < nwarps ? warp_acc[lane] : ml_pair{-INFINITY, 0.f};
        for (int off = 16; off > 0; off >>= 1) {
            ml_pair o = {__shfl_xor_sync(0xffffffffu, acc.m, off), __shfl_xor_sync(0xffffffffu, acc.l, off)};
            acc = ml_combine(acc, o);
        }
        if (lane == 0) {
            row = acc;
            L[r] = acc.m + logf(acc.l);
        }
    }
    __syncthreads();

    const float m = row.m, inv_l = 1.f / row.l;
    for (int j = threadIdx.x; j < N; j += blockDim.x)
        p[j] = from_f<TP>(j < visible ? expf(s[j] - m) * inv_l : 0.f);
}

/* ---- the forward pass ---- */

/* Q, K, V, O: [B, H, N, d] row-major of a->dtype; L: [B, H, N] fp32.
 * cuBLAS is column-major: a row-major [rows, cols] matrix with leading
 * dimension cols is, to cuBLAS, its transpose [cols, rows]. So per (b, h):
 *   Q, K, V row-major [N, d]  = column-major Q^T, K^T, V^T  [d, N], ld = d
 *   S, P    row-major [N, N]  = column-major S^T, P^T       [N, N], ld = N
 *   O       row-major [N, d]  = column-major O^T            [d, N], ld = d
 * and the two products become
 *   S^T = scale * K Q^T : op(A) = K   = transpose of the stored K^T (OP_T),
 *                         op(B) = Q^T = the stored Q^T (OP_N); m = n = N, k = d
 *   O^T = V^T P^T       : op(A) = V^T (OP_N), op(B) = P^T (OP_N); m = d, n = N, k = N
 * each strided-batched over the B*H heads (strides in elements, 64-bit). */
int attention_forward(const attn_args *a) {
    const int B = a->B, H = a->H, N = a->N, d = a->d;
    const cudaStream_t stream = (cudaStream_t)a->stream;

    cudaDataType_t io_type;
    size_t p_elem; /* bytes per element of P (= of the inputs) */
    if (!cublas_type_of(a->dtype, &io_type, &p_elem)) return ATTN_UNSUPPORTED;
    const long long batch = (long long)B * H;
    const long long nn = (long long)N * N, nd = (long long)N * d;
    if (batch > 2147483647LL || batch * N > 2147483647LL) return ATTN_UNSUPPORTED; /* grid.x, batchCount */

    int rc = standard_handle(stream); /* the handle first (standard_common.h says why) */
    if (rc == ATTN_OK)
        rc = ensure_workspace("standard attention", "S and P", B, H, N, (size_t)batch * nn * 4,
                              (size_t)batch * nn * p_elem, p_elem);
    if (rc != ATTN_OK) return rc;

    /* Step 1: S^T = scale * K Q^T (S stored fp32 for every dtype). */
    const float alpha = a->scale, beta = 0.f;
    CUBLAS_TRY(cublasGemmStridedBatchedEx(g_handle, CUBLAS_OP_T, CUBLAS_OP_N, N, N, d, &alpha,
                                          a->K, io_type, d, nd, /* A: K^T stored [d, N] */
                                          a->Q, io_type, d, nd, /* B: Q^T stored [d, N] */
                                          &beta, g_S, CUDA_R_32F, N, nn, (int)batch,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));

    /* Step 2: P = softmax(S) row by row; L = logsumexp. */
    const int threads = N >= 2048 ? 512 : N >= 512 ? 256 : 128;
    const unsigned rows = (unsigned)(batch * N);
    switch (a->dtype) {
    case DTYPE_FP32:
        softmax_rows<float><<<rows, threads, 0, stream>>>((const float *)g_S, (float *)g_P, a->L, N, a->causal);
        break;
    case DTYPE_FP16:
        softmax_rows<__half><<<rows, threads, 0, stream>>>((const float *)g_S, (__half *)g_P, a->L, N, a->causal);
        break;
    default:
        softmax_rows<__nv_bfloat16>
            <<<rows, threads, 0, stream>>>((const float *)g_S, (__nv_bfloat16 *)g_P, a->L, N, a->causal);
        break;
    }

    /* Step 3: O^T = V^T P^T (P in the input type, fp32 accumulation, O in the input type). */
    const float one = 1.f;
    CUBLAS_TRY(cublasGemmStridedBatchedEx(g_handle, CUBLAS_OP_N, CUBLAS_OP_N, d, N, N, &one,
                                          a->V, io_type, d, nd, /* A: V^T stored [d, N] */
                                          g_P, io_type, N, nn,  /* B: P^T stored [N, N] */
                                          &beta, a->O, io_type, d, nd, (int)batch,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return ATTN_OK;
}
