/* standard_attention_bwd.cu: the unfused backward pass every flash backward lesson is compared
 * to (`make standard_backward && ./standard_backward`, graded and timed by the backward runner).
 *
 * What a framework without a fused kernel does, each step a round trip through device memory:
 *   1. S = scale Q K^T               cuBLAS GEMM, S written to HBM      [B*H, N, N] fp32
 *   2. P = exp(S - L) (causal: 0     one kernel, reads S, writes P      [B*H, N, N] dtype
 *      above the diagonal)           (P from the saved logsumexp L, as the flash kernels do;
 *                                    a framework would have kept P from its forward instead)
 *   3. dV = P^T dO                   cuBLAS GEMM, reads P
 *   4. dP = dO V^T                   cuBLAS GEMM, written over S        [B*H, N, N] fp32
 *   5. dS = P o (dP - D),            one kernel per row: D_i = dO_i . O_i, then dS written
 *      D = rowsum(dO o O)            over P (each element read, then overwritten, by one thread)
 *   6. dQ = scale dS K               cuBLAS GEMM
 *   7. dK = scale dS^T Q             cuBLAS GEMM
 * Precision: fp32 throughout for fp32 (true fp32 FMA, no TF32: CUBLAS_DEFAULT_MATH); for
 * fp16/bf16 the GEMMs read 16-bit operands and accumulate in fp32, S and dP are stored fp32, P
 * and dS in the 16-bit type (what feeds the tensor-core GEMMs), dQ, dK, dV in the 16-bit type.
 * Memory: an N x N fp32 buffer (S, then dP) and an N x N dtype buffer (P, then dS) per head,
 * 4 + 2 bytes per score in fp16 (8 in fp32): the O(N^2) the flash backward avoids. When they do
 * not fit, attention_backward returns ATTN_OUT_OF_MEMORY and prints the bytes it needed. Causal
 * attention still runs the full N x N GEMMs, as an unfused implementation does.
 * cuBLAS is column-major: a row-major [rows, cols] matrix is, to cuBLAS, its transpose; the
 * comment at each GEMM gives the mapping (the forward's standard_attention.cu explains it). */
#include <math.h>
#include <stdio.h>
#include "attention.h"
#include "standard_common.h"

const lesson_info LESSON = {
    0, "standard-backward", "standard attention backward (cuBLAS, S and P in HBM)",
    DTYPE_BIT(DTYPE_FP32) | DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {32, 64, 128, 0}, 0, 0};

/* Step 2. One block per row r = (b*H + h)*N + i of S ([B*H*N, N] fp32, scaled):
 * P_rj = exp(S_rj - L_r) for the visible keys (j <= i when causal), 0 for the others, so the
 * GEMMs can run over full rows. L_r is the forward's logsumexp, so the visible P of a row sum to 1. */
template <typename T>
__global__ void p_from_s(const float *__restrict__ S, const float *__restrict__ L, T *__restrict__ P, int N, int causal) {
    const size_t r = blockIdx.x;
    const int i = (int)(r % (size_t)N), visible = causal ? i + 1 : N;
    const float Lr = L[r];
    for (int j = threadIdx.x; j < N; j += blockDim.x)
        P[r * N + j] = from_f<T>(j < visible ? expf(S[r * N + j] - Lr) : 0.f);
}

/* Step 5. One block per row r: D_r = dO_r . O_r (block reduction, fp32), then
 * dS_rj = P_rj (dP_rj - D_r) written over P_rj. dP: [B*H*N, N] fp32; P/dS: [B*H*N, N] T;
 * O, dO: [B*H*N, d] T. blockDim.x a multiple of 32, at most 1024. Masked P are 0, so their dS
 * are 0 too. */
template <typename T>
__global__ void ds_from_dp(const float *__restrict__ dP, T *__restrict__ PdS, const T *__restrict__ O,
                           const T *__restrict__ dO, int N, int d) {
    const size_t r = blockIdx.x;
    float acc = 0.f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) acc += to_f<T>(dO[r * d + c]) * to_f<T>(O[r * d + c]);
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    __shared__ float part[32];
    __shared__ float D;
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int w = 0; w < (int)blockDim.x / 32; ++w) s += part[w];
        D = s;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        const size_t e = r * N + j;
        PdS[e] = from_f<T>(to_f<T>(PdS[e]) * (dP[e] - D));
    }
}

template <typename T>
static void launch_elementwise(const attn_bwd_args *a, int step, unsigned rows, cudaStream_t st) {
    const int threads = a->N >= 2048 ? 512 : a->N >= 512 ? 256 : 128;
    if (step == 2)
        p_from_s<T><<<rows, threads, 0, st>>>((const float *)g_S, a->L, (T *)g_P, a->N, a->causal);
    else
        ds_from_dp<T><<<rows, threads, 0, st>>>((const float *)g_S, (T *)g_P, (const T *)a->O, (const T *)a->dO,
                                                a->N, a->d);
}

/* Q, K, V, O, dO, dQ, dK, dV: [B, H, N, d] row-major of a->dtype; L: [B, H, N] fp32. Per head, to
 * cuBLAS (column-major), a row-major [N, d] X is X^T [d, N] with ld d, a row-major [N, N] M is
 * M^T [N, N] with ld N. Strided-batched over the B*H heads. */
int attention_backward(const attn_bwd_args *a) {
    const int N = a->N, d = a->d;
    const cudaStream_t st = (cudaStream_t)a->stream;
    cudaDataType_t io;
    size_t p_elem;
    if (!cublas_type_of(a->dtype, &io, &p_elem)) return ATTN_UNSUPPORTED;
    const long long batch = (long long)a->B * a->H, nn = (long long)N * N, nd = (long long)N * d;
    if (batch > 2147483647LL || batch * N > 2147483647LL) return ATTN_UNSUPPORTED; /* grid.x, batchCount */
    int rc = standard_handle(st); /* the handle first (standard_common.h says why) */
    if (rc == ATTN_OK)
        rc = ensure_workspace("standard attention backward", "S/dP and P/dS", a->B, a->H, N, (size_t)(batch * nn) * 4,
                              (size_t)(batch * nn) * p_elem, p_elem);
    if (rc != ATTN_OK) return rc;
    const float zero = 0.f, one = 1.f, scale = a->scale;
    const unsigned rows = (unsigned)(batch * N);

    /* 1. S^T = scale K Q^T: op(A) = K (stored K^T, OP_T), op(B) = Q^T (OP_N); m = n = N, k = d. */
    CUBLAS_TRY(cublasGemmStridedBatchedEx(g_handle, CUBLAS_OP_T, CUBLAS_OP_N, N, N, d, &scale, a->K, io, d, nd, a->Q,
                                          io, d, nd, &zero, g_S, CUDA_R_32F, N, nn, (int)batch, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
    /* 2. P = exp(S - L), masked */
    if (a->dtype == DTYPE_FP32) launch_elementwise<float>(a, 2, rows, st);
    else if (a->dtype == DTYPE_FP16) launch_elementwise<__half>(a, 2, rows, st);
    else launch_elementwise<__nv_bfloat16>(a, 2, rows, st);
    /* 3. dV^T = dO^T P: op(A) = dO^T (stored, OP_N), op(B) = P (stored P^T, OP_T); m = d, n = N, k = N. */
    CUBLAS_TRY(cublasGemmStridedBatchedEx(g_handle, CUBLAS_OP_N, CUBLAS_OP_T, d, N, N, &one, a->dO, io, d, nd, g_P, io,
                                          N, nn, &zero, a->dV, io, d, nd, (int)batch, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
    /* 4. dP^T = V dO^T: op(A) = V (stored V^T, OP_T), op(B) = dO^T (OP_N); m = n = N, k = d; over S. */
    CUBLAS_TRY(cublasGemmStridedBatchedEx(g_handle, CUBLAS_OP_T, CUBLAS_OP_N, N, N, d, &one, a->V, io, d, nd, a->dO, io,
                                          d, nd, &zero, g_S, CUDA_R_32F, N, nn, (int)batch, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
    /* 5. dS = P o (dP - D) over P */
    if (a->dtype == DTYPE_FP32) launch_elementwise<float>(a, 5, rows, st);
    else if (a->dtype == DTYPE_FP16) launch_elementwise<__half>(a, 5, rows, st);
    else launch_elementwise<__nv_bfloat16>(a, 5, rows, st);
    /* 6. dQ^T = scale K^T dS^T: op(A) = K^T (stored, OP_N), op(B) = dS^T (stored, OP_N); m = d, n = N, k = N. */
    CUBLAS_TRY(cublasGemmStridedBatchedEx(g_handle, CUBLAS_OP_N, CUBLAS_OP_N, d, N, N, &scale, a->K, io, d, nd, g_P, io,
                                          N, nn, &zero, a->dQ, io, d, nd, (int)batch, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
    /* 7. dK^T = scale Q^T dS: op(A) = Q^T (stored, OP_N), op(B) = dS (stored dS^T, OP_T); m = d, n = N, k = N. */
    CUBLAS_TRY(cublasGemmStridedBatchedEx(g_handle, CUBLAS_OP_N, CUBLAS_OP_T, d, N, N, &scale, a->Q, io, d, nd, g_P, io,
                                          N, nn, &zero, a->dK, io, d, nd, (int)batch, CUBLAS_COMPUTE_32F,
                                          CUBLAS_GEMM_DEFAULT));
    return ATTN_OK;
}
