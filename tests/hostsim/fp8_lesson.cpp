/* tests/hostsim/fp8_lesson.cpp: a stand-in FP8 "lesson" (dtype e4m3, lesson 14's interface,
 * attention.h's attn_fp8) for the host simulation of the forward runner (`make hostsim-forward`):
 * what lesson 14's kernel computes, on the CPU. Per query row, key tiles of FP8_BLOCK_ROWS (
 * one K and V scale per tile): S = (q codes . k codes) * descale_q * descale_k * scale in fp32,
 * an online softmax, P = exp(S - m) multiplied by FP8_P_SCALE and rounded to e4m3 (the scale kept
 * in registers), O += e4m3(P) . V codes * descale_v / FP8_P_SCALE, O / l rounded to bf16.
 * Unlike the plain reference it rounds the unnormalized P of each tile, so its error differs from
 * the plain FP8 attention's as a kernel's does, and must stay within the grader's rule.
 *
 * HOSTSIM_BUG=<name> plants one of lesson 14's bugs (its mutants' counterparts):
 *   descale2   the K descale applied twice
 *   pscale     P quantized with its scale, the scale never divided back out of O's sum
 *   blockrow   Q's block scale taken from the next block of rows
 *   hadamardq  Q rotated by the Hadamard matrix again (as if only Q were rotated)
 *   tensor     the descale of block 0 used for every block (per-tensor code on block scales)
 *   punscaled  P rounded to e4m3 without its scale (mutant 14/p-without-scale): only the peaked
 *              inputs, whose small probabilities then vanish, can see it */
#include <cuda_bf16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "attention.h"
extern "C" {
#include "fp8.h"
}

extern "C" const lesson_info LESSON = {
    14, "hostsim-fp8", "FP8 attention on the CPU (host simulation)", DTYPE_BIT(DTYPE_E4M3), 1, {64, 128, 0}, 0, 90};

static bool bug(const char *name) {
    const char *b = getenv("HOSTSIM_BUG");
    return b && !strcmp(b, name);
}

/* descale of row i of slice s (attn_fp8's layout) */
static float descale(const float *ds, int rows, int s, int N, int i) {
    if (rows <= 0 || bug("tensor")) return ds[0];
    const int nb = (N + rows - 1) / rows;
    return ds[(size_t)s * nb + i / rows];
}

extern "C" int attention_forward(const attn_args *a) {
    if (a->dtype != DTYPE_E4M3) return ATTN_UNSUPPORTED;
    const int B = a->B, H = a->H, N = a->N, d = a->d, Nkv = a->N_kv, Hkv = a->H_kv, G = H / Hkv;
    const attn_fp8 &f = a->fp8;
    const uint8_t *Q = (const uint8_t *)a->Q, *K = (const uint8_t *)a->K, *V = (const uint8_t *)a->V;
    const int T = 128; /* keys per tile */
#pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; ++bh) {
        const int b = bh / H, hk = (bh % H) / G, skv = b * Hkv + hk;
        const size_t kv = (size_t)skv * Nkv * d;
        std::vector<float> q(d), s(T), o(d);
        for (int i = 0; i < N; ++i) {
            float dq;
            if (bug("blockrow") && f.q_rows > 0) {
                const int nb = (N + f.q_rows - 1) / f.q_rows;
                dq = f.descale_q[(size_t)bh * nb + (i / f.q_rows + 1) % nb];
            } else {
                dq = descale(f.descale_q, f.q_rows, bh, N, i);
            }
            for (int c = 0; c < d; ++c) q[c] = e4m3_decode(Q[((size_t)bh * N + i) * d + c]) * dq;
            if (bug("hadamardq")) fp8_hadamard_rows(q.data(), 1, d);
            const int nk = a->causal ? i + 1 : Nkv;
            float m = -INFINITY, l = 0;
            std::fill(o.begin(), o.end(), 0.f);
            for (int j0 = 0; j0 < nk; j0 += T) {
                const int j1 = std::min(nk, j0 + T);
                float mt = m;
                for (int j = j0; j < j1; ++j) {
                    float acc = 0;
                    for (int c = 0; c < d; ++c) acc += q[c] * e4m3_decode(K[kv + (size_t)j * d + c]);
                    float dk = descale(f.descale_k, f.kv_rows, skv, Nkv, j);
                    if (bug("descale2")) dk *= dk;
                    s[j - j0] = acc * dk * a->scale;
                    mt = fmaxf(mt, s[j - j0]);
                }
                const float alpha = expf(m - mt);
                l *= alpha;
                for (int c = 0; c < d; ++c) o[c] *= alpha;
                for (int j = j0; j < j1; ++j) {
                    const float p = expf(s[j - j0] - mt);
                    l += p;
                    const float pq = bug("punscaled") ? e4m3_decode(e4m3_encode(p)) * FP8_P_SCALE
                                                      : e4m3_decode(e4m3_encode(p * FP8_P_SCALE));
                    const float w = pq * descale(f.descale_v, f.kv_rows, skv, Nkv, j) / (bug("pscale") ? 1.f : FP8_P_SCALE);
                    for (int c = 0; c < d; ++c) o[c] += w * e4m3_decode(V[kv + (size_t)j * d + c]);
                }
                m = mt;
            }
            for (int c = 0; c < d; ++c)
                ((__nv_bfloat16 *)a->O)[((size_t)bh * N + i) * d + c] = __float2bfloat16_rn(o[c] / l);
            a->L[(size_t)bh * N + i] = m + logf(l);
        }
    }
    return ATTN_OK;
}
