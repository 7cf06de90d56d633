/* hopper_attention.h: lesson 09's forward kernel as a library, for code that runs it on pieces of
 * a larger problem (lesson 15's ring: lessons/15-ring-attention/ring_block.h). Plain C.
 * [implemented in solutions/09-hopper-wgmma/hopper.cu]
 * That file defines the two functions below, and its own attention_forward as
 * hopper_attention_forward(a, 0). Compiled with -DFA_LIBRARY_ONLY it leaves out that entry point
 * and its LESSON, so that its object links beside another lesson's (the Makefile builds it once,
 * with -DFA9_STEP=6, lesson 15's descriptor: the rung of lesson 09's ladder).
 *
 * Any number of devices and streams, driven from one host thread (its caches are not locked):
 * what it reads of a device and the shared-memory opt-in are kept per device (device numbers
 * below 64); step 7's tile counter (lesson 09, "Step 7"), which a launch leaves at 0 for the
 * next one in the same stream, is one per (device, stream), so launches on two streams or two
 * devices never share one. */
#ifndef HOPPER_ATTENTION_H
#define HOPPER_ATTENTION_H
#include "attention.h"

#ifdef __cplusplus
extern "C" {
#endif

/* O = softmax(scale Q K^T [+ causal mask: key j visible to query i when j <= i]) V, and L its
 * natural-log logsumexp, as lesson 09's attention_forward computes them
 * (reference/include/attention.h): Q, K, V, O [B, H, N, d] row-major of a->dtype (fp16 or bf16),
 * L [B, H, N] fp32, every pointer on the current device; launched on a->stream, not
 * synchronized. Keys and queries have the same length and heads: a->N_kv = N, a->H_kv = H,
 * a->seqlens_kv = NULL (the decode fields are not read).
 * sms_left: SMs its persistent grid (steps 6 and 7) leaves free for kernels of other streams,
 * e.g. NCCL's transfers, which otherwise start only when a grid that holds every SM ends: the
 * grid takes at most (SM count - sms_left) blocks. 0 <= sms_left < the device's SM count.
 * Returns ATTN_OK; ATTN_UNSUPPORTED for a dtype other than fp16 or bf16, d other than 64 or
 * 128, scale <= 0, a device that is not compute capability 9.0, sms_left out of range, or a
 * kernel that needs more shared memory than the device gives (printed: file:line, a hint);
 * ATTN_OUT_OF_MEMORY when the 8-byte tile counter of a new stream cannot be allocated
 * (printed). B, H or N below 1: ATTN_OK, nothing launched. */
int hopper_attention_forward(const attn_args *a, int sms_left);

/* Makes device `dev` current and lets every kernel hopper_attention_forward may launch there
 * use its shared memory (cudaFuncSetAttribute, which acts on the current device only). The
 * first launch on a device does the same; calling this first, once per device, reports a GPU
 * that cannot run the kernels before any work is issued. Returns ATTN_OK, or ATTN_UNSUPPORTED
 * (printed: file:line, the device, why, a hint) for a device number that is not valid (or not
 * below 64), a device that is not compute capability 9.0, or a kernel it cannot give the shared
 * memory. */
int hopper_attention_prepare_device(int dev);

#ifdef __cplusplus
}
#endif
#endif
