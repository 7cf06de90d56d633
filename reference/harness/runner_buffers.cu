/* runner_buffers.cu: guarded device arrays, encodings and random inputs (buffers.h). */
#include "buffers.h"
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <string.h>
#include "cuda_check.h"
#include "gpu_env.h"
extern "C" {
#include "fp8.h"
#include "rng.h"
}

int dtype_size(dtype_t t) { return t == DTYPE_FP32 ? 4 : t == DTYPE_E4M3 ? 1 : 2; }

void encode_values(const float *src, void *dst, size_t n, dtype_t t) {
    for (size_t i = 0; i < n; ++i) {
        if (t == DTYPE_FP32) ((float *)dst)[i] = src[i];
        else if (t == DTYPE_FP16) ((__half *)dst)[i] = __float2half_rn(src[i]);
        else if (t == DTYPE_E4M3) ((uint8_t *)dst)[i] = e4m3_encode(src[i]);
        else ((__nv_bfloat16 *)dst)[i] = __float2bfloat16_rn(src[i]);
    }
}

double decode_value(const void *raw, size_t i, dtype_t t, int *poisoned) {
    if (t == DTYPE_FP32) {
        uint32_t u;
        memcpy(&u, (const char *)raw + 4 * i, 4);
        *poisoned = u == POISON32;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (t == DTYPE_E4M3) {
        const uint8_t c = ((const uint8_t *)raw)[i];
        *poisoned = c == NAN8;
        return e4m3_decode(c);
    }
    uint16_t u;
    memcpy(&u, (const char *)raw + 2 * i, 2);
    *poisoned = u == POISON16;
    if (t == DTYPE_FP16) return __half2float(*(const __half *)&u);
    return __bfloat162float(*(const __nv_bfloat16 *)&u);
}

float round_value(float x, dtype_t t) {
    if (t == DTYPE_FP16) return __half2float(__float2half_rn(x));
    if (t == DTYPE_BF16) return __bfloat162float(__float2bfloat16_rn(x));
    if (t == DTYPE_E4M3) return round_e4m3(x);
    return x;
}

void random_slice_rows(std::vector<float> &X, int S, int N, int d, int per_group, const int *row0,
                       const int *row1, float scale, dtype_t t, uint64_t seed) {
#pragma omp parallel for schedule(static)
    for (int sl = 0; sl < S; ++sl) {
        const int g = sl / per_group;
        rng_t r;
        rng_seed(&r, rng_mix(seed, (uint64_t)sl));
        for (size_t i = (size_t)row0[g] * d; i < (size_t)row1[g] * d; ++i)
            X[(size_t)sl * N * d + i] = round_value((float)(rng_normal(&r) * scale), t);
    }
}

cudaError_t guarded_alloc(guarded_buf *b, size_t n, int es, uint32_t guard_pattern) {
    b->n = n;
    b->es = es;
    b->guard_pattern = guard_pattern;
    cudaError_t e = cudaMalloc(&b->raw, n * es + 2 * GUARD_BYTES);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError(); /* clear it: the caller reports and exits */
        b->raw = NULL;
        return e;
    }
    CUDA_CHECK(e);
    b->data = b->raw + GUARD_BYTES;
    fill_pattern(b->raw, (n * es + 2 * GUARD_BYTES) / es, es, guard_pattern, 0);
    CUDA_CHECK(cudaDeviceSynchronize());
    return cudaSuccess;
}

void guarded_free(guarded_buf *b) {
    if (b->raw) CUDA_CHECK(cudaFree(b->raw));
    b->raw = NULL;
    b->data = NULL;
}

void guarded_upload(guarded_buf *b, const void *host) {
    CUDA_CHECK(cudaMemcpy(b->data, host, b->n * b->es, cudaMemcpyHostToDevice));
}

void guarded_rearm(guarded_buf *b, cudaStream_t s) {
    fill_pattern(b->raw, GUARD_BYTES / b->es, b->es, b->guard_pattern, s);
    fill_pattern((char *)b->data + b->n * b->es, GUARD_BYTES / b->es, b->es, b->guard_pattern, s);
}

guard_hits guarded_check(const guarded_buf *b) {
    guard_hits h = {0, 0, -1, -1, -1, -1};
    std::vector<char> g(GUARD_BYTES);
    const long per = (long)(GUARD_BYTES / b->es);
    for (int side = 0; side < 2; ++side) {
        const char *src = side ? (const char *)b->data + b->n * b->es : b->raw;
        CUDA_CHECK(cudaMemcpy(g.data(), src, GUARD_BYTES, cudaMemcpyDeviceToHost));
        for (long k = 0; k < per; ++k) {
            uint32_t u = 0;
            memcpy(&u, &g[(size_t)k * b->es], b->es);
            if (u == b->guard_pattern) continue;
            if (side) {
                h.after++;
                if (h.after_first < 0) h.after_first = k;
                h.after_last = k;
            } else {
                const long dist = per - k; /* element k of the front guard is dist before the data */
                h.before++;
                if (h.before_farthest < 0) h.before_farthest = dist;
                h.before_nearest = dist;
            }
        }
    }
    return h;
}
