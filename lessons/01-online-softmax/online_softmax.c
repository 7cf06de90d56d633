/* Lesson 01: the online softmax on the CPU.
 * One pass over x keeps the running max m and the running sum l of exp(x - m),
 * rescaling l whenever m grows (Milakov & Gimelshein 2018; the m_i^(j), l_i^(j)
 * recurrences of FlashAttention-2, Algorithm 1 lines 8-10); a second pass writes y.
 * Blocks of `block` elements play the role of the K/V tiles of the GPU lessons.
 * Build and grade: make lesson1 && ./lesson1 */
#include <math.h>
#include "attention.h"

/* TODO(0): set to 0 when you have written TODO(1)..TODO(4); the grader then grades you. */
#define STARTER_NOT_DONE 1

int online_softmax(const float *x, float *y, int n, int block, float *m_out, float *l_out) {
    if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    float m = -INFINITY, l = 0.0f;
    for (int start = 0; start < n; start += block) {
        int end = start + block < n ? start + block : n;
        /* TODO(1): m_block = the max of x[start..end). */
        /* TODO(2): m_new = max(m, m_block). If m_new is still -inf every entry so far was
         *          masked: skip the block (exp(-inf - -inf) would be NaN). */
        /* TODO(3): l = l * exp(m - m_new) + sum over the block of exp(x[k] - m_new); m = m_new. */
        (void)end;
    }
    /* TODO(4): a fully masked row (m still -inf) gets y = 0, *m_out = -inf, *l_out = 0.
     *          Otherwise y[k] = exp(x[k] - m) / l, *m_out = m, *l_out = l. */
    (void)x; (void)y; (void)n;
    *m_out = m;
    *l_out = l;
    return ATTN_OK;
}
