/* tests/hostsim/serving_lesson.cpp: a stand-in "lesson" of the serving layouts (attention.h) for the
 * host simulation of the forward runner (`make hostsim-serving`, tests/hostsim/serving.py): it
 * declares LESSON_DECODE, LESSON_PAGED_KV and LESSON_VARLEN and computes on the CPU the plain
 * same-precision attention of reference/cpu/cpu_reference.c (attention_prefix_lowp) of every query
 * row over the keys it sees, reading K and V as the arguments lay them out: contiguous
 * [B, H_kv, N_kv, d], through a block table from a pool [num_pages, page_size, H_kv, d], or packed
 * [total_k, H_kv, d] with Q, O [total_q, H, d] and L [H, total_q]. Its error is the plain
 * attention's own, so every case passes; it reads only what a kernel may read, so a key read from
 * the wrong place shows (the runner fills every place no key is with NaN). It also appends a step's
 * keys to a paged cache (attention_append_kv, attention_serving.h), which the runner then grades in
 * every paged case.
 *
 * Built twice: as a lesson of all three (the decode kind of the runner) and, -DSTANDIN_FLAGS=LESSON_VARLEN,
 * as one of packed batches alone (the forward kind).
 *
 * HOSTSIM_BUG=<name> plants one bug, each a classic mistake of a serving kernel:
 *   cu_seqlens     a sequence's keys end at cu_seqlens_k[b + 1] inclusive (an off-by-one in cu_seqlens)
 *   seq3           sequence 3's keys start at cu_seqlens_k[3] + 1 (one sequence's offset wrong)
 *   packed_causal  causal masking by packed token indices (key u visible to query t iff u <= t),
 *                  not per-sequence positions
 *   topleft        causal aligned top-left (query i sees keys j <= i) instead of bottom-right
 *   other_table    sequence b's pages looked up in sequence b ^ 1's row of the block table
 *   pool_order     the block table ignored: page p of sequence b read as pool page b * max_pages + p
 *   past_page      whole pages read: the rows past a sequence's length in its last partial page too
 *   gqa_paged      in the paged path, query head h reads K/V head h % H_kv, not h / (H / H_kv)
 *   page2          sequence 1's page 2 read through the table entry of its page 3
 *   page_boundary  key j looked up in entry (j + 1) / page_size: the last key of each page in the next page
 *   append_late    the append writes token t to key seqlens_kv[b] - n_new + t + 1, one key late */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include "attention.h"
#include "attention_serving.h"
#include "elements.h"
extern "C" {
#include "cpu_reference.h"
}

/* -DSTANDIN_FLAGS=LESSON_VARLEN builds a lesson of packed batches alone (the forward kind of the
 * runner, not the decode kind) */
#ifndef STANDIN_FLAGS
#define STANDIN_FLAGS (LESSON_DECODE | LESSON_PAGED_KV | LESSON_VARLEN)
#endif

extern "C" const lesson_info LESSON = {
    16, "hostsim-serving", "plain same-precision attention over the serving layouts on the CPU (host simulation)",
    DTYPE_BIT(DTYPE_FP32) | DTYPE_BIT(DTYPE_FP16) | DTYPE_BIT(DTYPE_BF16), 1, {64, 128, 0}, (unsigned)(STANDIN_FLAGS),
    0};

static bool bug(const char *name) {
    const char *b = getenv("HOSTSIM_BUG");
    return b && !strcmp(b, name);
}

/* The first n key rows of one (sequence, K/V head) as a kernel reads them: element e of row j of K
 * at at(j) + e, of V likewise; gathered once per (b, h), so that a row reads a prefix. */
struct Keys {
    std::vector<float> K, V;
};
template <typename KeyAt>
static Keys gather(const attn_args *a, int n, KeyAt at) {
    const int d = a->d;
    Keys k;
    k.K.resize((size_t)std::max(n, 0) * d);
    k.V.resize(k.K.size());
    for (int j = 0; j < n; ++j) {
        const size_t e = at(j);
        for (int c = 0; c < d; ++c) {
            k.K[(size_t)j * d + c] = get(a->K, e + c, a->dtype);
            k.V[(size_t)j * d + c] = get(a->V, e + c, a->dtype);
        }
    }
    return k;
}

/* Decode shapes: K and V contiguous, or through the block table. */
static int decode(const attn_args *a) {
    const int B = a->B, H = a->H, N = a->N, d = a->d, Nkv = a->N_kv, Hkv = a->H_kv, G = H / Hkv;
    const int ps = a->page_size, mp = a->max_pages;
    const int *table = a->block_table;
#pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; ++bh) {
        const int b = bh / H, h = bh % H, hk = table && bug("gqa_paged") ? h % Hkv : h / G;
        int len = a->seqlens_kv ? a->seqlens_kv[b] : Nkv;
        if (table && bug("past_page")) len = (len + ps - 1) / ps * ps;
        const int trow = table && bug("other_table") && (b ^ 1) < B ? b ^ 1 : b;
        auto at = [&](int j) -> size_t {
            if (!table) return (((size_t)b * Hkv + hk) * Nkv + j) * d;
            int p = bug("page_boundary") ? std::min((j + 1) / ps, mp - 1) : j / ps;
            if (bug("page2") && b == 1 && p == 2 && p + 1 < mp) p = 3;
            const size_t page = bug("pool_order") ? (size_t)b * mp + p : (size_t)table[(size_t)trow * mp + p];
            return ((page * ps + j % ps) * Hkv + hk) * d;
        };
        const Keys k = gather(a, len, at);
        std::vector<float> q(d);
        std::vector<double> o(d);
        for (int i = 0; i < N; ++i) {
            const size_t r = (size_t)bh * N + i;
            for (int c = 0; c < d; ++c) q[c] = get(a->Q, r * d + c, a->dtype);
            const int nk = !a->causal ? len : bug("topleft") ? std::min(i + 1, len) : len - N + i + 1;
            double L;
            attention_prefix_lowp(q.data(), k.K.data(), k.V.data(), nk, d, a->scale, a->dtype, o.data(), &L);
            for (int c = 0; c < d; ++c) put(a->O, r * d + c, o[c], a->dtype);
            a->L[r] = (float)L;
        }
    }
    return ATTN_OK;
}

/* A packed batch: sequence b's queries tokens cu_q[b].., its keys tokens cu_k[b].. */
static int varlen(const attn_args *a) {
    const int B = a->B, H = a->H, d = a->d, Hkv = a->H_kv, G = H / Hkv, tq = a->total_q;
    const int *cu_q = a->cu_seqlens_q, *cu_k = a->cu_seqlens_k;
#pragma omp parallel for schedule(dynamic, 1)
    for (int bh = 0; bh < B * H; ++bh) {
        const int b = bh / H, h = bh % H, hk = h / G;
        const int lq = cu_q[b + 1] - cu_q[b], k0 = cu_k[b] + (bug("seq3") && b == 3 ? 1 : 0);
        const int lk = cu_k[b + 1] - cu_k[b] + (bug("cu_seqlens") ? 1 : 0);
        auto at = [&](int j) -> size_t { return (((size_t)k0 + j) * Hkv + hk) * d; };
        const Keys k = gather(a, lk, at);
        std::vector<float> q(d);
        std::vector<double> o(d);
        for (int i = 0; i < lq; ++i) {
            const size_t t = (size_t)cu_q[b] + i;
            for (int c = 0; c < d; ++c) q[c] = get(a->Q, (t * H + h) * d + c, a->dtype);
            int nk = lk;
            if (a->causal)
                nk = bug("topleft") ? std::min(i + 1, lk)
                     : bug("packed_causal") ? std::max(0, std::min(lk, (int)t - cu_k[b] + 1))
                                            : lk - lq + i + 1;
            double L;
            attention_prefix_lowp(q.data(), k.K.data(), k.V.data(), nk, d, a->scale, a->dtype, o.data(), &L);
            for (int c = 0; c < d; ++c) put(a->O, (t * H + h) * d + c, o[c], a->dtype);
            a->L[(size_t)h * tq + t] = (float)L;
        }
    }
    return ATTN_OK;
}

extern "C" int attention_forward(const attn_args *a) {
    return a->cu_seqlens_q ? varlen(a) : decode(a);
}

/* The append (attention_serving.h): new token t of sequence b, [B, n_new, H_kv, d], copied byte for
 * byte into its key len - n_new + t, at row j % page_size of the page its table entry j / page_size
 * names. */
extern "C" int attention_append_kv(const attn_append_args *a) {
    const int es = a->dtype == DTYPE_FP32 ? 4 : 2, ps = a->page_size, mp = a->max_pages;
    const size_t row = (size_t)a->H_kv * a->d * es; /* bytes of one token's keys, its H_kv heads */
    for (int b = 0; b < a->B; ++b)
        for (int t = 0; t < a->n_new; ++t) {
            const int len = a->seqlens_kv ? a->seqlens_kv[b] : a->N_kv;
            const int j = len - a->n_new + t + (bug("append_late") ? 1 : 0);
            if (j / ps >= mp) continue; /* append_late past the sequence's row of the table: nothing */
            const size_t page = (size_t)a->block_table[(size_t)b * mp + j / ps];
            const size_t dst = (page * ps + j % ps) * row, src = ((size_t)b * a->n_new + t) * row;
            memcpy((char *)a->K + dst, (const char *)a->K_new + src, row);
            memcpy((char *)a->V + dst, (const char *)a->V_new + src, row);
        }
    return ATTN_OK;
}
