/* forward_f64.h: the forward pass the backward runner feeds its lessons, on the GPU in float64.
 *
 * A backward lesson reads O and L from a forward pass. The runner does not trust a lesson's
 * forward for that: this kernel computes them in float64 with the plainest method there is
 * (two passes over the keys per query row: the row max m, then l = sum exp(S - m) and
 * O = sum exp(S - m) V / l), then rounds O to the element type and L to fp32, which is what a
 * framework would have saved from its forward. On every graded case the runner compares its
 * output with the CPU's float64 reference (cpu_reference.h, attention_row_f64) on a sample of
 * rows, so it is itself checked; it exists because shapes of the bench (N = 16384 and more)
 * are far too big for the CPU.
 *
 * Layout as attention.h: Q, K, V, O [B, H, N, d] of dtype; L [B, H, N] fp32 (natural log).
 * Any N >= 1, d <= 256, causal or not (key j visible to query i iff j <= i). Launches on
 * `stream`, does not synchronize; CUDA errors exit through CUDA_CHECK. Cost: 3 B H N^2 d
 * float64 multiply-adds (half with causal): about a second at B = 1, H = 16, N = 32768,
 * d = 128 on an H100. */
#ifndef FORWARD_F64_H
#define FORWARD_F64_H
#include <cuda_runtime.h>
#include "attention.h"

void forward_f64(const void *Q, const void *K, const void *V, void *O, float *L, int B, int H, int N, int d,
                 float scale, int causal, dtype_t dtype, cudaStream_t stream);
#endif
