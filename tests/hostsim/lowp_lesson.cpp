/* tests/hostsim/lowp_lesson.cpp: a stand-in backward "lesson" for the host simulation: the plain
 * same-precision backward of reference/cpu/cpu_reference_bwd.c (attention_backward_slice_lowp), on the
 * CPU, in fp32, fp16 and bf16. Its error is by construction the plain backward's own, within the
 * grader's rule for every dtype, so `make hostsim-10` runs the runner's 16-bit paths (encodings,
 * the FlashAttention tolerance, the forward check's rounding, the dependency tests) end to end,
 * which lesson 10, fp32 only, does not reach. */
#include <vector>
#include "attention.h"
#include "elements.h"
extern "C" {
#include "cpu_reference.h"
}

extern "C" const lesson_info LESSON = {
    0, "hostsim-lowp", "plain same-precision backward on the CPU (host simulation)",
    DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16) | DTYPE_BIT(DTYPE_FP32), 1, {64, 128, 0}, 0, 0};

extern "C" int attention_backward(const attn_bwd_args *a) {
    const size_t sl = (size_t)a->N * a->d;
    std::vector<float> q(sl), k(sl), v(sl), g(sl);
    std::vector<double> dq(sl), dk(sl), dv(sl);
    for (int bh = 0; bh < a->B * a->H; ++bh) {
        for (size_t e = 0; e < sl; ++e) {
            q[e] = get(a->Q, bh * sl + e, a->dtype);
            k[e] = get(a->K, bh * sl + e, a->dtype);
            v[e] = get(a->V, bh * sl + e, a->dtype);
            g[e] = get(a->dO, bh * sl + e, a->dtype);
        }
        attention_backward_slice_lowp(q.data(), k.data(), v.data(), g.data(), a->N, a->d, a->scale, a->causal,
                                      a->dtype, dq.data(), dk.data(), dv.data());
        for (size_t e = 0; e < sl; ++e) {
            put(a->dQ, bh * sl + e, dq[e], a->dtype);
            put(a->dK, bh * sl + e, dk[e], a->dtype);
            put(a->dV, bh * sl + e, dv[e], a->dtype);
        }
    }
    return ATTN_OK;
}
