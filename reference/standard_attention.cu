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
#include "attention.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <math.h>
#include <stdio.h>

const lesson_info LESSON = {
    0,
    "standard",
    "standard attention (cuBLAS, S and P in HBM)",
    DTYPE_BIT(DTYPE_FP32) | DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16),
    1,
    {32, 64, 128, 0},
};

/* ---- error reporting ---- */

static const char *cublas_status_name(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "unknown cuBLAS status";
    }
}

/* Why a cuBLAS call usually fails, in one line, for the message below. */
static const char *cublas_status_hint(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cublasCreate failed: is a GPU visible and the driver loaded?";
    case CUBLAS_STATUS_ALLOC_FAILED: return "cuBLAS could not allocate its own workspace: the GPU is out of memory";
    case CUBLAS_STATUS_INVALID_VALUE: return "a size, leading dimension or stride is wrong (check the column-major mapping)";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "this GPU lacks the feature (e.g. bf16 GEMM needs sm_80 or newer)";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "this type/compute-type combination is not supported by cublasGemmStridedBatchedEx";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GEMM kernel failed to launch or run; an earlier kernel may have faulted";
    default: return "see the cuBLAS documentation for this status";
    }
}

/* Checks one cuBLAS call; on failure prints file:line, the status and a hint,
 * and returns from attention_forward (OOM when cuBLAS ran out of memory).
 * The interface has no generic error code; ATTN_UNSUPPORTED is the closest,
 * and the message on stderr says what actually happened. */
#define CUBLAS_TRY(call)                                                              \
    do {                                                                              \
        cublasStatus_t st_ = (call);                                                  \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                           \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call, \
                    cublas_status_name(st_), cublas_status_hint(st_));                \
            return st_ == CUBLAS_STATUS_ALLOC_FAILED ? ATTN_OUT_OF_MEMORY             \
                                                     : ATTN_UNSUPPORTED;              \
        }                                                                             \
    } while (0)

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

template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
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
        p[j] = from_float<TP>(j < visible ? expf(s[j] - m) * inv_l : 0.f);
}

/* ---- workspace and cuBLAS handle, kept across calls ---- */

/* S and P live for the whole process and only grow: the timed launches then
 * measure the attention, not cudaMalloc, and the harness's memory delta sees
 * the N^2 buffers the method really holds. */
static void *g_S = nullptr, *g_P = nullptr;
static size_t g_S_bytes = 0, g_P_bytes = 0;
static cublasHandle_t g_handle = nullptr;

/* Makes g_S/g_P at least the requested sizes. On failure frees both, clears
 * cudaMalloc's (non-sticky) error so the harness does not report a CUDA error,
 * prints the bytes needed and returns ATTN_OUT_OF_MEMORY. */
static int ensure_workspace(const attn_args *a, size_t s_bytes, size_t p_bytes, size_t p_elem) {
    if (g_S_bytes >= s_bytes && g_P_bytes >= p_bytes) return ATTN_OK;
    /* cudaFree synchronizes the device: happens only when the shape grows,
       never inside the harness's timed loop for a fixed shape. */
    cudaFree(g_S);
    cudaFree(g_P);
    g_S = g_P = nullptr;
    g_S_bytes = g_P_bytes = 0;
    cudaError_t e1 = cudaMalloc(&g_S, s_bytes);
    cudaError_t e2 = e1 == cudaSuccess ? cudaMalloc(&g_P, p_bytes) : e1;
    if (e1 != cudaSuccess || e2 != cudaSuccess) {
        cudaGetLastError(); /* allocation errors are not sticky; clear the last-error slot */
        cudaFree(g_S);
        cudaFree(g_P);
        g_S = g_P = nullptr;
        size_t total = s_bytes + p_bytes;
        fprintf(stderr,
                "out of memory: standard attention needs %.0f MiB for S and P "
                "(B*H*N*N*(4+%zu) = %d*%d*%d*%d*%zu = %zu bytes)\n",
                total / 1048576.0, p_elem, a->B, a->H, a->N, a->N, 4 + p_elem, total);
        return ATTN_OUT_OF_MEMORY;
    }
    g_S_bytes = s_bytes;
    g_P_bytes = p_bytes;
    return ATTN_OK;
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
    switch (a->dtype) {
    case DTYPE_FP32: io_type = CUDA_R_32F; p_elem = 4; break;
    case DTYPE_FP16: io_type = CUDA_R_16F; p_elem = 2; break;
    case DTYPE_BF16: io_type = CUDA_R_16BF; p_elem = 2; break;
    default: return ATTN_UNSUPPORTED;
    }
    const long long batch = (long long)B * H;
    const long long nn = (long long)N * N, nd = (long long)N * d;
    if (batch > 2147483647LL || batch * N > 2147483647LL) return ATTN_UNSUPPORTED; /* grid.x, batchCount */

    /* The handle first: with S and P taking nearly all memory, cuBLAS's own
       small allocations would fail instead of the N^2 one that should. */
    if (!g_handle) {
        CUBLAS_TRY(cublasCreate(&g_handle));
        /* Default math: CUBLAS_COMPUTE_32F stays true fp32 (no TF32). */
        CUBLAS_TRY(cublasSetMathMode(g_handle, CUBLAS_DEFAULT_MATH));
    }
    CUBLAS_TRY(cublasSetStream(g_handle, stream));

    int rc = ensure_workspace(a, (size_t)batch * nn * 4, (size_t)batch * nn * p_elem, p_elem);
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
