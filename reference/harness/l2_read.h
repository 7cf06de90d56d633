/* reference/harness/l2_read.h: a kernel that streams through a buffer and writes nothing, for .cu
 * files only. The harness empties L2 with it before each timed launch (runner_device.cu,
 * time_launches), and bench/copy_bandwidth.cu measures a plain read with it.
 *
 * l2_read_all reads n16 16-byte words of p, 4 independent loads per thread per step (each
 * thread keeps 64 bytes in flight), grid-stride; launch it with enough blocks to fill the GPU
 * (8 per SM of 256 threads). The XOR of everything is stored to *sink only when it equals
 * L2_READ_MAGIC, which it cannot for the buffers it is given (all zeros, or every byte equal:
 * the XOR of 4 equal words is 0): the loads stay, nothing is written. Reading, not writing,
 * is the point of the flush: a flush that writes leaves L2 full of dirty lines (about 50 MB
 * on an H100) that the timed kernel must write back to HBM while it reads, some 10 us charged
 * to it (bench/decode_sweep.sh measured it). */
#ifndef L2_READ_H
#define L2_READ_H
#include <cuda_runtime.h>
#include <stddef.h>

#define L2_READ_MAGIC 0x5eed1234

__global__ void l2_read_all(const int4 *__restrict__ p, size_t n16, int *sink) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 0;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        const int4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];
        acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n16; i += stride) {
        const int4 a = p[i];
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (acc == L2_READ_MAGIC) *sink = acc;
}
#endif
