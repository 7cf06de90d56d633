/* copy_beside_kernel.cu: does a device-to-device copy of the size of one of lesson 15's K/V blocks
 * (256 MiB: B = 1, H = 16, 32768 rows, d = 128, K and V in fp16) need SMs? It times the copy
 * (cudaMemcpyAsync on a stream of its own) alone, then issued right after a kernel that holds every
 * SM for 20 ms (two blocks of 1024 spinning threads per SM: no thread slot left), with the
 * kernel's own time. A copy done by the copy engines runs beside the kernel at about its speed
 * alone; a copy that needed SMs would wait for the kernel. Each of two ways to ask for the copy:
 * cudaMemcpyAsync, and cudaMemcpyBatchAsync with the hint cudaMemcpyFlagPreferOverlapWithCompute
 * (CUDA 12.8 and later: the copy should overlap compute). Three repetitions each.
 * Build and run on one GPU:
 *   nvcc -std=c++17 -arch=sm_90 lessons/15-ring-attention/worklog/tools/copy_beside_kernel.cu -o build/copy_beside_kernel
 *   build/copy_beside_kernel */
#include <cstdio>
#include <cuda/ptx>

#define CHECK(call)                                                                                   \
    do {                                                                                              \
        cudaError_t e_ = (call);                                                                      \
        if (e_ != cudaSuccess) {                                                                      \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));  \
            return 5;                                                                                 \
        }                                                                                             \
    } while (0)

/* Every thread spins for ns nanoseconds of the global timer. */
__global__ void hold(long long ns) {
    const unsigned long long t0 = cuda::ptx::get_sreg_globaltimer();
    while (cuda::ptx::get_sreg_globaltimer() - t0 < (unsigned long long)ns) {
    }
}

/* The copy, by cudaMemcpyAsync (batch = 0) or by cudaMemcpyBatchAsync with the overlap hint. */
static cudaError_t copy(void *dst, const void *src, size_t n, bool batch, cudaStream_t s) {
    if (!batch) return cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s);
    cudaMemcpyAttributes attr = {};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
    size_t attr_index = 0;
    void *dsts[1] = {dst};
    const void *srcs[1] = {src};
    size_t sizes[1] = {n};
    return cudaMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, &attr_index, 1, s);
}

int main() {
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const size_t n = 256ull << 20;
    void *a, *b;
    CHECK(cudaMalloc(&a, n));
    CHECK(cudaMalloc(&b, n));
    cudaStream_t s_kernel, s_copy;
    CHECK(cudaStreamCreateWithFlags(&s_kernel, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s_copy, cudaStreamNonBlocking));
    cudaEvent_t k0, k1, c0, c1;
    for (cudaEvent_t *e : {&k0, &k1, &c0, &c1}) CHECK(cudaEventCreate(e));
    for (int rep = 0; rep < 6; ++rep) {
        const bool batch = rep >= 3;
        float alone = 0, beside = 0, kernel = 0;
        CHECK(cudaEventRecord(c0, s_copy));
        CHECK(copy(b, a, n, batch, s_copy));
        CHECK(cudaEventRecord(c1, s_copy));
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaEventElapsedTime(&alone, c0, c1));
        CHECK(cudaEventRecord(k0, s_kernel));
        hold<<<2 * sms, 1024, 0, s_kernel>>>(20000000LL);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(k1, s_kernel));
        CHECK(cudaEventRecord(c0, s_copy));
        CHECK(copy(b, a, n, batch, s_copy));
        CHECK(cudaEventRecord(c1, s_copy));
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaEventElapsedTime(&beside, c0, c1));
        CHECK(cudaEventElapsedTime(&kernel, k0, k1));
        printf("%s: 256 MiB device-to-device copy alone %.3f ms (%.0f GB/s); beside a kernel holding every SM for "
               "20 ms: copy %.3f ms, kernel %.3f ms\n", batch ? "cudaMemcpyBatchAsync, PreferOverlapWithCompute" :
               "cudaMemcpyAsync", alone, n / (alone * 1e-3) / 1e9, beside, kernel);
    }
    return 0;
}
