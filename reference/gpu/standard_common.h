/* standard_common.h: what the two unfused cuBLAS baselines share, the forward
 * (standard_attention.cu, ./standard) and the backward (standard_attention_bwd.cu,
 * ./standard_backward): cuBLAS error checking, the element types, the cuBLAS handle, and the
 * N x N workspace (an fp32 buffer and a buffer of the input type) that makes them O(N^2) in
 * memory. Each binary includes it once (static state). CUDA C++ only. */
#ifndef STANDARD_COMMON_H
#define STANDARD_COMMON_H
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include "attention.h"

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

/* Checks one cuBLAS call; on failure prints file:line, the status and a hint, and returns
 * from the entry point: ATTN_OUT_OF_MEMORY when cuBLAS ran out of memory, else
 * ATTN_UNSUPPORTED (the interface has no generic error code; the message on stderr says what
 * actually happened). */
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

/* The cuBLAS type of a dtype and its bytes per element; false for an unknown dtype. */
static bool cublas_type_of(dtype_t t, cudaDataType_t *type, size_t *bytes) {
    switch (t) {
    case DTYPE_FP32: *type = CUDA_R_32F; *bytes = 4; return true;
    case DTYPE_FP16: *type = CUDA_R_16F; *bytes = 2; return true;
    case DTYPE_BF16: *type = CUDA_R_16BF; *bytes = 2; return true;
    default: return false;
    }
}

template <typename T> __device__ __forceinline__ float to_f(T x);
template <> __device__ __forceinline__ float to_f<float>(float x) { return x; }
template <> __device__ __forceinline__ float to_f<__half>(__half x) { return __half2float(x); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

/* ---- the cuBLAS handle and the N^2 workspace, kept across calls ---- */

/* g_S (fp32) and g_P (the input type) live for the whole process and only grow: the timed
 * launches then measure the attention, not cudaMalloc, and the harness's memory delta sees the
 * N^2 buffers the method really holds. */
static void *g_S = nullptr, *g_P = nullptr;
static size_t g_S_bytes = 0, g_P_bytes = 0;
static cublasHandle_t g_handle = nullptr;

/* The handle, created on the first call with true fp32 math (CUBLAS_DEFAULT_MATH: no TF32, so
 * fp32 numbers are not TF32 numbers), bound to `stream`. Called before the workspace is
 * allocated: with S and P taking nearly all memory, cuBLAS's own small allocations would fail
 * instead of the N^2 one that should. Returns ATTN_OK or, through CUBLAS_TRY, an error code. */
static int standard_handle(cudaStream_t stream) {
    if (!g_handle) {
        CUBLAS_TRY(cublasCreate(&g_handle));
        CUBLAS_TRY(cublasSetMathMode(g_handle, CUBLAS_DEFAULT_MATH));
    }
    CUBLAS_TRY(cublasSetStream(g_handle, stream));
    return ATTN_OK;
}

/* Makes g_S / g_P at least s_bytes / p_bytes. On failure frees both, clears cudaMalloc's
 * (non-sticky) error so that the harness does not report a CUDA error, prints the bytes needed
 * ("out of memory: <method> needs ... for <buffers> (B*H*N*N*(4+p_elem) = ...)") and returns
 * ATTN_OUT_OF_MEMORY. cudaFree synchronizes the device: that happens only when the shape
 * grows, never inside the harness's timed loop for a fixed shape. */
static int ensure_workspace(const char *method, const char *buffers, int B, int H, int N, size_t s_bytes,
                            size_t p_bytes, size_t p_elem) {
    if (g_S_bytes >= s_bytes && g_P_bytes >= p_bytes) return ATTN_OK;
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
        const size_t total = s_bytes + p_bytes;
        fprintf(stderr, "out of memory: %s needs %.0f MiB for %s (B*H*N*N*(4+%zu) = %d*%d*%d*%d*%zu = %zu bytes)\n",
                method, total / 1048576.0, buffers, p_elem, B, H, N, N, 4 + p_elem, total);
        return ATTN_OUT_OF_MEMORY;
    }
    g_S_bytes = s_bytes;
    g_P_bytes = p_bytes;
    return ATTN_OK;
}
#endif
