/* Lesson 01 solution: the online softmax on the CPU.
 * One pass over x keeps the running max m and the running sum l of exp(x - m),
 * rescaling l whenever m grows (Milakov & Gimelshein 2018; the m_i^(j), l_i^(j)
 * recurrences of FlashAttention-2, Algorithm 1 lines 8-10); a second pass writes y.
 * Blocks of `block` elements play the role of the K/V tiles of the GPU lessons. */
#include <math.h>
#include "attention.h"

int online_softmax(const float *x, float *y, int n, int block, float *m_out, float *l_out) {
    float m = -INFINITY, l = 0.0f;
    for (int start = 0; start < n; start += block) {
        int end = start + block < n ? start + block : n;
        // [region block-update]
        float m_block = -INFINITY;
        for (int k = start; k < end; ++k) m_block = fmaxf(m_block, x[k]);
        float m_new = fmaxf(m, m_block);
        if (m_new == -INFINITY) continue; /* all masked so far: exp(-inf - -inf) would be NaN */
        float l_block = 0.0f;
        for (int k = start; k < end; ++k) l_block += expf(x[k] - m_new);
        l = l * expf(m - m_new) + l_block; /* old terms were relative to m; move them to m_new */
        m = m_new;
        // [end block-update]
    }
    // [region normalize]
    if (m == -INFINITY) { /* fully masked row: the course defines y = 0, l = 0 */
        for (int k = 0; k < n; ++k) y[k] = 0.0f;
        *m_out = m;
        *l_out = 0.0f;
        return ATTN_OK;
    }
    float inv_l = 1.0f / l;
    for (int k = 0; k < n; ++k) y[k] = expf(x[k] - m) * inv_l;
    // [end normalize]
    *m_out = m;
    *l_out = l;
    return ATTN_OK;
}
