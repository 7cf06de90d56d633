/* tests/hostsim/forward_lesson.cpp: a stand-in forward "lesson" for the host simulation of the
 * forward runner (`make hostsim-forward`): the plain same-precision attention of
 * reference/cpu/cpu_reference.c (attention_prefix_lowp) on the CPU, in fp32, fp16 and bf16, over the
 * keys each query row sees, with grouped K/V heads, per-sequence KV lengths and causal queries
 * aligned to the end of the cache (attention.h). Its error is by construction the plain
 * attention's own, within the grader's rule, so every case of the runner's matrix passes.
 * Built three times: -DSTANDIN_DECODE=1 declares LESSON_DECODE (the decode matrix, fuzz and
 * options of lesson 12), -DSTANDIN_RANKS=1 runs over ranks as lesson 15's ring does
 * (attention_set_ranks: the P asked for, as its virtual ring; with HOSTSIM_RANKS_FIXED=n, n
 * whatever P asks, as its NCCL ring on n GPUs), neither an ordinary lesson (lessons 02-08's
 * matrix).
 *
 * HOSTSIM_BUG=<name> plants one bug, so that the runner's diagnoses run end to end:
 *   causal     the causal mask ignored: every key of the sequence is seen
 *   tail       N not a multiple of 16: the last row's O[0] off by 1
 *   L2         L in base 2 (O right, L wrong)
 *   race       every other launch changes one element of O
 *   outside    one element written just past the end of O
 *   unwritten  the last row of O and L never written
 *   gqa        query head h reads K/V head h % H_kv instead of h / (H / H_kv)
 *   ragged     seqlens_kv ignored: N_kv keys for every sequence (the NaN rows past a length)
 *   long       caches longer than 4096 keys lose their last key
 *   ranks3     on 3 ranks or more, row 0's O[0] off by 1 (a ring right only on two ranks)
 *   notimpl    returns ATTN_NOT_IMPLEMENTED */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "attention.h"
#include "attention_ranks.h"
#include "elements.h"
extern "C" {
#include "cpu_reference.h"
}

#ifndef STANDIN_DECODE
#define STANDIN_DECODE 0
#endif
#ifndef STANDIN_RANKS
#define STANDIN_RANKS 0
#endif

extern "C" const lesson_info LESSON = {
    STANDIN_DECODE ? 12 : STANDIN_RANKS ? 15 : 5,
    STANDIN_DECODE ? "hostsim-decode" : STANDIN_RANKS ? "hostsim-ring" : "hostsim-forward",
    "plain same-precision attention on the CPU (host simulation)",
    (STANDIN_RANKS ? 0u : DTYPE_BIT(DTYPE_FP32)) | DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0},
    STANDIN_DECODE ? (unsigned)LESSON_DECODE : 0u, 0};

static bool bug(const char *name) {
    const char *b = getenv("HOSTSIM_BUG");
    return b && !strcmp(b, name);
}

static int ranks = 0;  // the P last asked for (attention_set_ranks); 0: never
#if STANDIN_RANKS
extern "C" int attention_set_ranks(int P) {
    if (P < 1 || P > ATTN_MAX_RANKS) return 0;
    if (const char *fixed = getenv("HOSTSIM_RANKS_FIXED")) return atoi(fixed);
    ranks = P;
    return P;
}
#endif

extern "C" int attention_forward(const attn_args *a) {
    static int launches = 0;
    ++launches;
    if (bug("notimpl")) return ATTN_NOT_IMPLEMENTED;
    const int B = a->B, H = a->H, N = a->N, d = a->d, Nkv = a->N_kv, Hkv = a->H_kv, G = H / Hkv;
    const dtype_t t = a->dtype;
#pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; ++bh) {
        const int b = bh / H, h = bh % H, hk = bug("gqa") ? h % Hkv : h / G;
        const int len = a->seqlens_kv && !bug("ragged") ? a->seqlens_kv[b] : Nkv;
        const size_t kv = ((size_t)b * Hkv + hk) * Nkv * d;
        std::vector<float> K((size_t)len * d), V((size_t)len * d), q(d);
        for (size_t e = 0; e < (size_t)len * d; ++e) { K[e] = get(a->K, kv + e, t); V[e] = get(a->V, kv + e, t); }
        std::vector<double> o(d);
        for (int i = 0; i < N; ++i) {
            if (bug("unwritten") && i == N - 1) continue;
            const size_t row = (size_t)bh * N + i;
            for (int c = 0; c < d; ++c) q[c] = get(a->Q, row * d + c, t);
            int nk = a->causal && !bug("causal") ? len - N + i + 1 : len;
            if (bug("long") && len > 4096) --nk;
            double L;
            attention_prefix_lowp(q.data(), K.data(), V.data(), nk, d, a->scale, t, o.data(), &L);
            if (bug("tail") && N % 16 && i == N - 1) o[0] += 1;
            if (bug("ranks3") && ranks >= 3 && i == 0) o[0] += 1;
            if (bug("race") && launches % 2 == 0 && bh == 0 && i == 0) o[0] += 0.5;
            if (bug("L2")) L /= log(2.0);
            for (int c = 0; c < d; ++c) put(a->O, row * d + c, o[c], t);
            a->L[row] = (float)L;
        }
    }
    if (bug("outside")) put(a->O, (size_t)B * H * N * d, 1.0, t);
    return ATTN_OK;
}
