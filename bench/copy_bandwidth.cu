/* bench/copy_bandwidth.cu: the roofline of a memory-bound kernel, measured: a device-to-device
 * copy (cudaMemcpyAsync) of a large buffer, timed like the course's harness (CUDA events, warm-up
 * launches, the median of the timed ones, L2 flushed before each by overwriting a 2 x L2
 * buffer outside the events). Bandwidth = (bytes read + bytes written) / time.
 *
 *   build/copy_bandwidth [MiB] [reps]     default 1024 MiB, 20 reps
 * Prints one CSV line: copy,<bytes copied>,<median ms>,<GB/s read + write>.
 * Exit status: 0, 2 bad arguments, 4 no GPU, 5 CUDA error, 7 out of memory. Built and run by
 * bench/decode.sh (make bench-decode), which draws this bandwidth as the roofline. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <algorithm>
#include <vector>
#include "cuda_check.h"

int main(int argc, char **argv) {
    const long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 1024, reps = argc > 2 ? strtol(argv[2], NULL, 10) : 20;
    if (mib < 64 || mib > (1 << 20) || reps < 1 || reps > 1000) {
        fprintf(stderr, "usage: %s [MiB 64..1048576] [reps 1..1000]\n", argv[0]);
        return EXIT_USAGE;
    }
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    const size_t bytes = (size_t)mib << 20, flush_bytes = std::max<size_t>(2 * (size_t)prop.l2CacheSize, 64u << 20);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (2 * bytes + flush_bytes > free_b) {
        fprintf(stderr, "out of memory: a copy of %ld MiB needs %.1f GiB; the GPU has %.1f GiB free\n", mib,
                (2 * bytes + flush_bytes) / 1073741824.0, free_b / 1073741824.0);
        return EXIT_OOM;
    }
    void *src, *dst, *flush;
    CUDA_CHECK(cudaMalloc(&src, bytes));
    CUDA_CHECK(cudaMalloc(&dst, bytes));
    CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
    CUDA_CHECK(cudaMemset(src, 1, bytes));
    cudaStream_t s;
    cudaEvent_t a, b;
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    std::vector<float> ms(reps);
    for (long i = 0; i < reps; ++i) {
        CUDA_CHECK(cudaMemsetAsync(flush, (int)(i & 0xff), flush_bytes, s));
        CUDA_CHECK(cudaEventRecord(a, s));
        CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
        CUDA_CHECK(cudaEventRecord(b, s));
        CUDA_CHECK(cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
    }
    std::sort(ms.begin(), ms.end());
    const double med = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
    printf("copy,%zu,%.4f,%.1f\n", bytes, med, 2.0 * bytes / (med * 1e-3) / 1e9);
    return 0;
}
