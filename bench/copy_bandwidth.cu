/* bench/copy_bandwidth.cu: the roofline of a memory-bound kernel, measured: a device-to-device
 * copy (cudaMemcpyAsync), timed like the course's harness (reference/harness/runner_device.cu,
 * time_launches: CUDA events around the one operation, warm-up first, the median of the timed
 * ones, L2 flushed before each by reading a max(2 x L2, 64 MiB) buffer outside the events).
 *
 *   build/copy_bandwidth [MiB] [reps]           a copy of MiB (64..1048576, default 1024), 20 reps
 *   build/copy_bandwidth --bytes N [--reps R] [--op copy|read] [--flush write|read]
 *
 * --bytes N (4096 .. 2^40): the size of the copy, e.g. the bytes of K and V of one decode shape:
 *   the roofline of a kernel that moves that much, with the same fixed costs (with --op read,
 *   bench/decode.sh's "read-same" rows).
 * --op read: instead of a copy, a plain streaming read of N bytes (a grid of int4 loads, nothing
 *   written): what a kernel that only reads, as a decoding step does, can reach.
 * --flush write: empty L2 by writing the flush buffer instead of reading it (reading is the
 * default and the harness's way). Writing leaves up to an L2 of dirty lines, which the timed
 * operation must write back to HBM while it reads: about 50 MB on an H100, some 17 us at
 * 3 TB/s, charged to whatever is timed next. Reading leaves L2 clean. Comparing the two
 * measures that cost (bench/decode_sweep.sh does).
 * Bandwidth = (bytes read + bytes written) / time: 2 N for a copy, N for a read.
 * Prints one CSV line: <op>,<N>,<median ms>,<GB/s>,<flush>.
 * Exit status: 0, 2 bad arguments, 4 no GPU, 5 CUDA error, 7 out of memory. Built and run by
 * bench/decode.sh (make bench-decode) and bench/decode_sweep.sh (make decode-sweep). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include "cuda_check.h"
#include "l2_read.h"

static void usage(const char *prog) {
    fprintf(stderr, "usage: %s [MiB 64..1048576] [reps 1..1000]\n"
            "       %s --bytes N (4096..2^40) [--reps R (1..1000)] [--op copy|read] [--flush write|read]\n",
            prog, prog);
}

int main(int argc, char **argv) {
    size_t bytes = (size_t)1024 << 20;
    long reps = 20;
    bool read_op = false, read_flush = true;
    if (argc > 1 && argv[1][0] == '-') {
        for (int i = 1; i < argc; ++i) {
            const char *v = i + 1 < argc ? argv[i + 1] : NULL;
            char *end = NULL;
            if (!strcmp(argv[i], "--bytes") && v) {
                const unsigned long long x = strtoull(v, &end, 10);
                if (*end || x < 4096 || x > (1ull << 40)) {
                    fprintf(stderr, "--bytes '%s' is not valid: expected an integer in 4096..%llu\n", v, 1ull << 40);
                    return EXIT_USAGE;
                }
                bytes = (size_t)x;
            } else if (!strcmp(argv[i], "--reps") && v) {
                reps = strtol(v, &end, 10);
                if (*end || reps < 1 || reps > 1000) {
                    fprintf(stderr, "--reps '%s' is not valid: expected an integer in 1..1000\n", v);
                    return EXIT_USAGE;
                }
            } else if (!strcmp(argv[i], "--op") && v) {
                if (strcmp(v, "copy") && strcmp(v, "read")) {
                    fprintf(stderr, "--op '%s' is not valid: expected copy or read\n", v);
                    return EXIT_USAGE;
                }
                read_op = !strcmp(v, "read");
            } else if (!strcmp(argv[i], "--flush") && v) {
                if (strcmp(v, "write") && strcmp(v, "read")) {
                    fprintf(stderr, "--flush '%s' is not valid: expected write or read\n", v);
                    return EXIT_USAGE;
                }
                read_flush = !strcmp(v, "read");
            } else {
                fprintf(stderr, "%s: bad option '%s'%s\n", argv[0], argv[i],
                        v ? "" : " (missing its value)");
                usage(argv[0]);
                return EXIT_USAGE;
            }
            ++i;
        }
    } else {
        const long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 1024;
        reps = argc > 2 ? strtol(argv[2], NULL, 10) : 20;
        if (mib < 64 || mib > (1 << 20) || reps < 1 || reps > 1000) {
            usage(argv[0]);
            return EXIT_USAGE;
        }
        bytes = (size_t)mib << 20;
    }
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
    const size_t flush_bytes = std::max<size_t>(2 * (size_t)prop.l2CacheSize, 64u << 20) & ~(size_t)15;
    const size_t need = (read_op ? 1 : 2) * bytes + flush_bytes;
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (need > free_b) {
        fprintf(stderr, "out of memory: a %s of %zu bytes needs %.1f GiB; the GPU has %.1f GiB free\n",
                read_op ? "read" : "copy", bytes, need / 1073741824.0, free_b / 1073741824.0);
        return EXIT_OOM;
    }
    void *src, *dst = NULL, *flush;
    int *sink;
    CUDA_CHECK(cudaMalloc(&src, bytes));
    if (!read_op) CUDA_CHECK(cudaMalloc(&dst, bytes));
    CUDA_CHECK(cudaMalloc(&flush, flush_bytes));
    CUDA_CHECK(cudaMalloc(&sink, sizeof(int)));
    CUDA_CHECK(cudaMemset(src, 1, bytes));
    CUDA_CHECK(cudaMemset(flush, 1, flush_bytes));
    cudaStream_t s;
    cudaEvent_t a, b;
    CUDA_CHECK(cudaStreamCreate(&s));
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    /* enough blocks for every SM to keep 64 KiB in flight: 8 x 256 threads x 64 bytes, however
     * small the buffer (a thread with no word to read exits at once) */
    const unsigned read_blocks = 8u * (unsigned)prop.multiProcessorCount;
    auto op = [&] {
        if (read_op) l2_read_all<<<read_blocks, 256, 0, s>>>((const int4 *)src, bytes / 16, sink);
        else CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
        CUDA_CHECK(cudaGetLastError());
    };
    auto empty_l2 = [&](long i) {
        if (read_flush) l2_read_all<<<read_blocks, 256, 0, s>>>((const int4 *)flush, flush_bytes / 16, sink);
        else CUDA_CHECK(cudaMemsetAsync(flush, (int)(i & 0xff), flush_bytes, s));
        CUDA_CHECK(cudaGetLastError());
    };
    for (int i = 0; i < 3; ++i) op();
    std::vector<float> ms(reps);
    for (long i = 0; i < reps; ++i) {
        empty_l2(i);
        CUDA_CHECK(cudaEventRecord(a, s));
        op();
        CUDA_CHECK(cudaEventRecord(b, s));
        CUDA_CHECK(cudaEventSynchronize(b));
        CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
    }
    std::sort(ms.begin(), ms.end());
    const double med = reps % 2 ? ms[reps / 2] : 0.5 * (ms[reps / 2 - 1] + ms[reps / 2]);
    const double moved = (read_op ? 1.0 : 2.0) * (double)bytes;
    printf("%s,%zu,%.4f,%.1f,%s\n", read_op ? "read" : "copy", bytes, med, moved / (med * 1e-3) / 1e9,
           read_flush ? "read" : "write");
    return 0;
}
