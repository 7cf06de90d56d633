/* ring_block.h: the block computation of lesson 15 (given code). One (query chunk, key chunk)
 * pair of the ring is ordinary attention of two equal-length chunks, so lesson 09's kernel does
 * it unchanged: this header includes lesson 09's solution, renamed, and adds what running it on
 * several GPUs at once needs.
 *
 *   block_attention(...)      one pair: Q, K, V, O [B, H, c, d] on the current device, L [B, H, c]
 *   block_prepare_device(dev) once per device, before its first block_attention
 *
 * Two things in lesson 09 assume one GPU, and the ring lives with both:
 * - Step 7's tile counter (lesson 09, "Step 7") is one 8-byte global per kernel instantiation,
 *   allocated on the first GPU that runs it and shared by every later launch. Two GPUs, or two
 *   ranks' streams on one GPU, would then claim work items from the same counter. So the ring
 *   runs step 6 (work items by stride, no counter): FA9_STEP below.
 * - cudaFuncSetAttribute (the opt-in to more than 48 KiB of shared memory) acts on the current
 *   device only, and lesson 09 calls it once: block_prepare_device repeats it on every device.
 * Its tensor-map cache keys on the Q, K, V, O pointers and the shape. Every rank's buffers have
 * their own addresses (one address space over all GPUs), so a map is never reused for another
 * GPU's buffer; the ring's double buffers make it re-encode the maps of most calls, which costs
 * microseconds of host time per call against milliseconds of kernel time. */
#ifndef RING_BLOCK_H
#define RING_BLOCK_H
#include "attention.h"  // first: lesson 15's own LESSON and attention_forward keep their names

#ifndef FA9_STEP
#define FA9_STEP 6  // see above: step 7's counter is one per process, not one per GPU
#endif
/* RING_SMS_LEFT: SMs lesson 09's persistent grid leaves free. NCCL moves data with kernels, and
 * a kernel that holds every SM (one block each, every register) lets them start only when it
 * ends, so the transfer would wait for the compute instead of running beside it. Lesson 09 sizes
 * its grid by the SM count it reads; the ring answers that question with RING_SMS_LEFT fewer. */
#ifndef RING_SMS_LEFT
#define RING_SMS_LEFT 0
#endif
#include <cuda_runtime.h>
static cudaError_t ring_device_get_attribute(int *v, cudaDeviceAttr attr, int dev) {
    cudaError_t e = cudaDeviceGetAttribute(v, attr, dev);
    if (e == cudaSuccess && attr == cudaDevAttrMultiProcessorCount && *v > RING_SMS_LEFT) *v -= RING_SMS_LEFT;
    return e;
}
#define LESSON fa09_lesson
#define attention_forward fa09_forward
#define cudaDeviceGetAttribute ring_device_get_attribute
#include "../../solutions/09-hopper-wgmma/hopper.cu"
#undef cudaDeviceGetAttribute
#undef attention_forward
#undef LESSON
static_assert(!Step<FA9_STEP>::DYNAMIC, "the ring needs a step without step 7's global tile counter (FA9_STEP <= 6)");

/* Lesson 09's shared-memory opt-in for one kernel instantiation, on the current device. */
template <typename T, int D, int BC, int STAGES, int NC>
static cudaError_t block_allow_smem() {
    using C = Config<T, D, BC, STAGES, FA9_STEP, NC>;
    return cudaFuncSetAttribute(fa3_forward_kernel<T, D, BC, STAGES, FA9_STEP, NC>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, (int)C::SL::ALLOC);
}

/* Makes device `dev` current and lets every kernel fa09_forward may launch there use its shared
 * memory (the instantiations of lesson 09's attention_forward and launch64). Returns 0, or -1
 * (printed why). */
static int block_prepare_device(int dev) {
    cudaError_t e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = block_allow_smem<__half, 64, FA64_BC, FA64_STAGES, 2>();
    if (e == cudaSuccess) e = block_allow_smem<__half, 64, FA64_BC, FA64_STAGES, 3>();
    if (e == cudaSuccess) e = block_allow_smem<__half, 128, FA128_BC, FA128_STAGES, 2>();
    if (e == cudaSuccess) e = block_allow_smem<__nv_bfloat16, 64, FA64_BC, FA64_STAGES, 2>();
    if (e == cudaSuccess) e = block_allow_smem<__nv_bfloat16, 64, FA64_BC, FA64_STAGES, 3>();
    if (e == cudaSuccess) e = block_allow_smem<__nv_bfloat16, 128, FA128_BC, FA128_STAGES, 2>();
    if (e != cudaSuccess) {
        fprintf(stderr, "%s:%d: device %d: cudaFuncSetAttribute for lesson 09's kernels: %s\n"
                "  hint: lesson 15 needs Hopper GPUs (compute capability 9.0) on every rank\n",
                __FILE__, __LINE__, dev, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* Attention of one query chunk against one key chunk, both c rows: O = softmax(scale Q K^T
 * [+ mask]) V and L = its natural-log logsumexp, as lesson 09 computes them. Q, K, V, O:
 * [B, H, c, d] of dt; L: [B, H, c] fp32; all on the current device, launched on `stream`.
 * causal = 1 for the diagonal pair only (the two chunks cover the same positions, so lesson
 * 05's mask j <= i is the right one). Returns lesson 09's code (ATTN_OK, ATTN_UNSUPPORTED, ...). */
static inline int block_attention(const void *Q, const void *K, const void *V, void *O, float *L, int B, int H, int c,
                                  int d, dtype_t dt, float scale, int causal, cudaStream_t stream) {
    attn_args a = {};
    a.B = B; a.H = H; a.N = c; a.d = d;
    a.causal = causal; a.scale = scale; a.dtype = dt;
    a.Q = Q; a.K = K; a.V = V; a.O = O; a.L = L;
    a.stream = stream;
    a.N_kv = c; a.H_kv = H; a.seqlens_kv = NULL;
    return fa09_forward(&a);
}
#endif
