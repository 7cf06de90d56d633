/* runner_fill.cu: random inputs written on the device, for shapes that are only timed
 * (buffers.h, device_fill_random). A decode lesson's timed KV cache can be tens of GiB: drawn
 * on the host it would need twice that in host floats and minutes of uploads. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <algorithm>
#include <type_traits>
#include "buffers.h"
#include "cuda_check.h"

/* splitmix64 of (seed, i), its top 24 bits made uniform in [-1, 1) and scaled by sqrt(3):
 * variance 1, like the graded inputs' N(0, 1). */
__device__ __forceinline__ float hash_unit(uint64_t seed, size_t i) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return ((float)(z >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f) * 1.7320508f;
}

/* x[0..n) of type T; a grid-stride loop, so any grid covers any n. */
template <typename T>
__global__ void fill_random(T *x, size_t n, uint64_t seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = hash_unit(seed, i) * scale;
        if constexpr (sizeof(T) == 4) x[i] = v;
        else if constexpr (std::is_same<T, __half>::value) x[i] = __float2half_rn(v);
        else x[i] = __float2bfloat16_rn(v);
    }
}

void device_fill_random(void *x, size_t n, dtype_t t, uint64_t seed, float scale, cudaStream_t s) {
    const unsigned blocks = (unsigned)std::min<size_t>((n + 255) / 256, 8192);
    if (t == DTYPE_FP32) fill_random<float><<<blocks, 256, 0, s>>>((float *)x, n, seed, scale);
    else if (t == DTYPE_FP16) fill_random<__half><<<blocks, 256, 0, s>>>((__half *)x, n, seed, scale);
    else fill_random<__nv_bfloat16><<<blocks, 256, 0, s>>>((__nv_bfloat16 *)x, n, seed, scale);
    CUDA_CHECK(cudaGetLastError());
}
