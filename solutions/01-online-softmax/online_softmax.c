//| /* Lesson 01: the online softmax on the CPU.
// solution begin
/* Lesson 01 solution: the online softmax on the CPU.
// solution end
 * One pass over x keeps the running max m and the running sum l of exp(x - m),
 * rescaling l whenever m grows (Milakov & Gimelshein 2018; the m_i^(j), l_i^(j)
 * recurrences of FlashAttention-2, Algorithm 1 lines 8-10); a second pass writes y.
 // solution begin
 * Blocks of `block` elements play the role of the K/V tiles of the GPU lessons. */
 // solution end
//|  * Blocks of `block` elements play the role of the K/V tiles of the GPU lessons.
//|  * Build and grade: make lesson1 && ./lesson1 */
#include <math.h>
#include "attention.h"

//| /* TODO(0): set to 0 when you have written TODO(1)..TODO(4); the grader then grades you. */
//| #define STARTER_NOT_DONE 1
//|
int online_softmax(const float *x, float *y, int n, int block, float *m_out, float *l_out) {
    //| if (STARTER_NOT_DONE) return ATTN_NOT_IMPLEMENTED;
    float m = -INFINITY, l = 0.0f;
    for (int start = 0; start < n; start += block) {
        int end = start + block < n ? start + block : n;
        // TODO(1) begin
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
        // TODO(1) end
        //| /* TODO(1): the largest value of this block, x[start..end). README: "The online
        //|  *          recurrence". */
        //| /* TODO(2): the new running max, from m and the block's max. While it is still -inf
        //|  *          every entry so far was masked and this block must be skipped, m and l
        //|  *          untouched. README: "The fully masked row". */
        //| /* TODO(3): move l from the old max to the new one, add the block's terms, then make
        //|  *          the new max the running one (the correction needs the old m). README: "The
        //|  *          online recurrence". */
        //| (void)end;
    }
    // TODO(4) begin
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
    // TODO(4) end
    //| /* TODO(4): the final pass: every y[k] from m and l, and m and l returned. A row with no
    //|  *          finite entry (m still -inf) gets y = 0, m = -inf, l = 0 instead. README: "The
    //|  *          fully masked row". */
    //| (void)x; (void)y; (void)n;
    *m_out = m;
    *l_out = l;
    return ATTN_OK;
}
