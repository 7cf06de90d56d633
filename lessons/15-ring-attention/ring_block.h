/* ring_block.h: the block computation of lesson 15 (given code). One (query chunk, key chunk)
 * pair of the ring is ordinary attention of two equal-length chunks, so lesson 09's kernel does
 * it unchanged, through its library API (reference/include/hopper_attention.h): lesson 09's
 * solution compiled once, without its grader entry point, and linked (mk/ring.mk).
 *
 *   block_attention(...)      one pair: Q, K, V, O [B, H, c, d] on the current device, L [B, H, c]
 *   block_prepare_device(dev) once per device, before its first block_attention
 *
 * What running lesson 09 on several GPUs at once needs is the library's: it keeps the
 * shared-memory opt-in (cudaFuncSetAttribute acts on the current device only) per device, and
 * step 7's tile counter per device and stream. The ring builds lesson 09 at step 6 (work items
 * by stride, no counter: the descriptor's `library := 9 -DFA9_STEP=6`), the kernel its measurements used.
 * Lesson 09's tensor-map cache keys on the Q, K, V, O pointers and the shape. Every rank's
 * buffers have their own addresses (one address space over all GPUs), so a map is never reused
 * for another GPU's buffer; the ring's double buffers make it re-encode the maps of most calls,
 * which costs microseconds of host time per call against milliseconds of kernel time. */
#ifndef RING_BLOCK_H
#define RING_BLOCK_H
#include <cuda_runtime.h>
#include "attention.h"
#include "hopper_attention.h"

/* RING_SMS_LEFT: SMs lesson 09's persistent grid leaves free. NCCL moves data with kernels, and
 * a kernel that holds every SM (one block each, every register) lets them start only when it
 * ends, so the transfer would wait for the compute instead of running beside it. Every
 * block_attention passes it to lesson 09 (hopper_attention_forward's sms_left). */
#ifndef RING_SMS_LEFT
#define RING_SMS_LEFT 0
#endif

/* Makes device `dev` current and lets every kernel of lesson 09 that block_attention may launch
 * there use its shared memory. Returns 0, or -1 (printed why: not a Hopper GPU, ...). */
static inline int block_prepare_device(int dev) { return hopper_attention_prepare_device(dev) == ATTN_OK ? 0 : -1; }

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
    return hopper_attention_forward(&a, RING_SMS_LEFT);
}
#endif
