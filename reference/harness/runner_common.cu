/* runner_common.cu: shared by every runner (runner_common.h). */
#include "runner_common.h"
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <algorithm>
#include "attention_ranks.h"
#include "cuda_check.h"
extern "C" {
#include "rng.h"
#include "serving.h"
}

/* Defined by a lesson that runs over ranks only (attention_ranks.h): weak, so that every other
 * lesson links without it and the harness sees a null address. */
extern "C" int attention_set_ranks(int P) __attribute__((weak));
extern "C" int attention_set_transport(int transport) __attribute__((weak));
extern "C" int attention_set_ring_delay(int delay_us) __attribute__((weak));

const char *runner_prog = "lessonN";

shape_case normalized(shape_case c) {
    if (!c.seqlens_q.empty()) { /* a packed batch: B sequences, N and N_kv the longest */
        if (c.seqlens_k.empty()) c.seqlens_k = c.seqlens_q;
        c.B = (int)c.seqlens_q.size();
        c.N = *std::max_element(c.seqlens_q.begin(), c.seqlens_q.end());
        c.N_kv = *std::max_element(c.seqlens_k.begin(), c.seqlens_k.end());
        c.ragged = 0;
    }
    if (c.N_kv <= 0) c.N_kv = c.N;
    if (c.H_kv <= 0) c.H_kv = c.H;
    return c;
}

bool is_varlen(const shape_case &c) { return !c.seqlens_q.empty(); }
bool is_paged(const shape_case &c) { return c.page_size > 0; }

bool is_decode(const shape_case &c0) {
    const shape_case c = normalized(c0);
    return c.N_kv != c.N || c.H_kv != c.H || c.ragged || c.page_size;
}

bool decode_lesson() { return (LESSON.flags & (LESSON_DECODE | LESSON_PAGED_KV)) != 0; }
bool paged_lesson() { return (LESSON.flags & LESSON_PAGED_KV) != 0; }
bool varlen_lesson() { return (LESSON.flags & LESSON_VARLEN) != 0; }

bool fp8_lesson() { return (LESSON.dtypes & DTYPE_BIT(DTYPE_E4M3)) != 0; }

bool ranks_lesson() { return attention_set_ranks != NULL; }

bool lesson_supports_d(int d) {
    for (int k = 0; k < 8 && LESSON.head_dims[k]; ++k)
        if (LESSON.head_dims[k] == d) return true;
    return false;
}

std::string lesson_head_dims() {
    std::string s;
    for (int k = 0; k < 8 && LESSON.head_dims[k]; ++k) s += (k ? ", " : "") + std::to_string(LESSON.head_dims[k]);
    return s;
}

std::string lesson_dtypes() {
    std::string s;
    for (int t = 0; t < DTYPE_COUNT; ++t)
        if (LESSON.dtypes & DTYPE_BIT(t)) s += std::string(s.empty() ? "" : ", ") + dtype_name(t);
    return s;
}

/* The number of head dims the lesson declares, and the smallest (first) and largest (last). */
static int head_dim_range(int *d0, int *d1) {
    int nd = 0;
    while (nd < 8 && LESSON.head_dims[nd]) ++nd;
    *d0 = LESSON.head_dims[0];
    *d1 = nd ? LESSON.head_dims[nd - 1] : *d0;
    return nd;
}

int runner_options(int argc, char **argv, options &o, const char *causal_from, const char *help_note) {
    char err[512] = "";
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    runner_prog = prog;
    const int pr = parse_options(argc, argv, &o, err, sizeof err);
    if (pr == 1) {
        print_usage(prog, 0);
        if (help_note) printf("%s", help_note);
        return 0;
    }
    if (pr == 2) { fprintf(stderr, "%s: %s\n", prog, err); return EXIT_USAGE; }
    if (o.causal && !LESSON.causal) {
        fprintf(stderr, "%s: lesson %02d does not support --causal (causal masking starts in %s)\n", prog,
                LESSON.number, causal_from);
        return EXIT_USAGE;
    }
    /* a varlen lesson's packed batch takes --kv-heads (grouped-query attention); resolve_varlen says the rest */
    const unsigned decode_given = o.given & (varlen_lesson() && (o.given & GIVEN_VARLEN) ? GIVEN_DECODE & ~GIVEN_HKV
                                                                                          : GIVEN_DECODE);
    if (decode_given && !decode_lesson()) {
        fprintf(stderr, "%s: lesson %02d does not take decode shapes (--kv-seq, --kv-heads, --ragged): its kernel "
                "assumes N_kv = N keys and H_kv = H K/V heads; lesson 12 (flash decoding) takes them%s\n", prog,
                LESSON.number, varlen_lesson() ? " (--kv-heads also goes with a packed batch: --varlen, --seqlens)" : "");
        return EXIT_USAGE;
    }
    if ((o.given & GIVEN_FP8) && !fp8_lesson()) {
        fprintf(stderr, "%s: lesson %02d does not take FP8 inputs (--quant, --hadamard, --outliers, --peaked): lesson 14 "
                "(FP8 attention) takes them\n", prog, LESSON.number);
        return EXIT_USAGE;
    }
    if (o.ranks && !ranks_lesson()) {
        fprintf(stderr, "%s: lesson %02d does not run over ranks (--ranks): lesson 15 (ring attention) does\n", prog,
                LESSON.number);
        return EXIT_USAGE;
    }
    if ((o.transport && !attention_set_transport) || (o.ring_delay_us >= 0 && !attention_set_ring_delay)) {
        fprintf(stderr, "%s: lesson %02d does not move blocks between ranks (--transport, --ring-delay-us): lesson 15 "
                "(ring attention) does\n", prog, LESSON.number);
        return EXIT_USAGE;
    }
    if ((o.given & GIVEN_PAGED) && !paged_lesson()) {
        fprintf(stderr, "%s: lesson %02d does not read a paged KV cache (--paged PAGE_SIZE, a power of two in %d..%d): its "
                "kernel reads K and V as [B, H_kv, N_kv, d]; only a lesson that declares LESSON_PAGED_KV takes it\n",
                prog, LESSON.number, ATTN_PAGE_MIN, ATTN_PAGE_MAX);
        return EXIT_USAGE;
    }
    if ((o.given & GIVEN_VARLEN) && !varlen_lesson()) {
        fprintf(stderr, "%s: lesson %02d does not take packed batches (--varlen, --seqlens): its kernel takes B "
                "sequences of N tokens ([B, H, N, d]); only a lesson that declares LESSON_VARLEN takes them\n", prog,
                LESSON.number);
        return EXIT_USAGE;
    }
    const int shape_rc = (o.given & GIVEN_VARLEN)
                             ? resolve_varlen(&o, lesson_supports_d(VARLEN_BENCH_D) ? VARLEN_BENCH_D : LESSON.head_dims[0],
                                              err, sizeof err)
                             : resolve_shape(&o, decode_lesson(), err, sizeof err);
    if (shape_rc) { fprintf(stderr, "%s: %s\n", prog, err); return EXIT_USAGE; }
    if (o.dtype >= 0 && !(LESSON.dtypes & DTYPE_BIT(o.dtype))) {
        fprintf(stderr, "%s: --dtype %s is not supported by lesson %02d: expected one of %s\n", prog,
                dtype_name(o.dtype), LESSON.number, lesson_dtypes().c_str());
        return EXIT_USAGE;
    }
    if ((o.shape_given || decode_lesson()) && !lesson_supports_d(o.d)) {
        fprintf(stderr, "%s: --dim %d is not supported by lesson %02d: expected one of %s\n", prog, o.d,
                LESSON.number, lesson_head_dims().c_str());
        return EXIT_USAGE;
    }
    return -1;
}

size_t runner_gpu_init(gpu_env &g, const options &o) {
    gpu_init(&g, o.csv && o.bench_only);
    gpu_require_cc(&g, LESSON.number, LESSON.needs_cc);
    size_t free_b = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    return free_b;
}

rank_plan runner_ranks(const options &o) {
    rank_plan plan = {{0}, 0};
    if (!ranks_lesson()) return plan;
    static const int graded[] = ATTN_RANKS_GRADED;
    const std::vector<int> asked =
        o.ranks ? std::vector<int>{o.ranks} : std::vector<int>(graded, graded + sizeof graded / sizeof *graded);
    plan.P.clear();
    if (attention_set_transport && attention_set_transport(o.transport) < 0) {
        fprintf(stderr, "%s: lesson %02d cannot move its blocks%s here (above)\n", runner_prog, LESSON.number,
                o.transport == ATTN_TRANSPORT_NCCL ? " by NCCL" : o.transport == ATTN_TRANSPORT_CE ? " by the copy engines" : "");
        exit(o.transport ? EXIT_USAGE : EXIT_FAILED);
    }
    for (int P : asked) {
        const int n = attention_set_ranks(P);
        if (n < 1) {
            fprintf(stderr, "%s: lesson %02d cannot run on %d ranks (attention_set_ranks returned %d)\n", runner_prog,
                    LESSON.number, P, n);
            exit(EXIT_FAILED);
        }
        if (n != P) { /* the transport's own ranks, one per GPU: nothing to choose */
            if (o.ranks) {
                fprintf(stderr, "%s: --ranks %d: lesson %02d runs here on %d ranks, one per GPU; --ranks sets the ranks "
                        "of its virtual ring (all on one GPU), which runs where one GPU is visible "
                        "(CUDA_VISIBLE_DEVICES=0 ./%s --ranks %d) or in a build without NCCL (make lesson%d RING=virtual)\n",
                        runner_prog, P, LESSON.number, n, runner_prog, P, LESSON.number);
                exit(EXIT_USAGE);
            }
            return {{0}, n};
        }
        plan.P.push_back(P);
    }
    return plan;
}

void set_ring_faults(const options &o, bool grading) {
    if (!attention_set_ring_delay) return;
    const int us = !grading ? 0 : o.ring_delay_us >= 0 ? o.ring_delay_us : ATTN_RING_DELAY_GRADED;
    if (attention_set_ring_delay(us)) {
        fprintf(stderr, "%s: lesson %02d refused the fault mode's delay of %d us (attention_set_ring_delay)\n",
                runner_prog, LESSON.number, us);
        exit(EXIT_FAILED);
    }
}

std::string ring_fault_text(const options &o) {
    const int us = o.ring_delay_us >= 0 ? o.ring_delay_us : ATTN_RING_DELAY_GRADED;
    if (!attention_set_ring_delay || !us) return "";
    return ", transfers delayed " + std::to_string(us) + " us (--ring-delay-us)";
}

void set_ranks(int P) {
    if (P > 0 && attention_set_ranks(P) != P) {
        fprintf(stderr, "%s: lesson %02d no longer takes %d ranks (attention_set_ranks)\n", runner_prog, LESSON.number, P);
        exit(EXIT_FAILED);
    }
}

shape_case bench_shape(const options &o) {
    shape_case b = {"bench", o.B, o.H, o.N, o.shape_given ? o.d : (lesson_supports_d(BENCH_D) ? BENCH_D : LESSON.head_dims[0]),
                    o.causal, 1.f, 0, 0, 0};
    if (decode_lesson()) b = {"bench", o.B, o.H, o.N, o.d, o.causal, 1.f, o.N_kv, o.H_kv, o.ragged};
    if (o.n_seqs) { /* --varlen, --seqlens (resolve_varlen) */
        b = {"bench", o.B, o.H, o.N, o.d, o.causal, 1.f, o.N_kv, o.H_kv, 0};
        b.seqlens_q.assign(o.seqlen_q, o.seqlen_q + o.n_seqs);
        b.seqlens_k.assign(o.seqlen_k, o.seqlen_k + o.n_seqs);
    } else if (varlen_lesson() && !decode_lesson() && !o.shape_given) { /* FlashAttention's varlen benchmark */
        std::vector<int> len(MAX_B);
        const int n = varlen_draw(VARLEN_BENCH_MAX, (long)VARLEN_BENCH_B * VARLEN_BENCH_N, o.seed, len.data(), MAX_B);
        b = {"bench", n, VARLEN_BENCH_H, 0, lesson_supports_d(VARLEN_BENCH_D) ? VARLEN_BENCH_D : LESSON.head_dims[0],
             o.causal, 1.f, 0, 0, 0};
        b.seqlens_q.assign(len.begin(), len.begin() + n);
    }
    b.page_size = o.page_size ? o.page_size : paged_lesson() && !o.shape_given ? PAGED_BENCH_PAGE : 0;
    b.qscale = o.logit_scale;
    b.outliers = o.outliers;
    b.peaked = o.peaked;
    b.fp8_tensor = o.quant_tensor;
    b.hadamard = o.hadamard;
    return normalized(b);
}

/* Fields: name, B, H, N, d, causal, qscale, N_kv, H_kv, ragged. */
static std::vector<shape_case> decode_case_matrix() {
    int d0, d1;
    head_dim_range(&d0, &d1);
    const int db = lesson_supports_d(DECODE_BENCH_D) ? DECODE_BENCH_D : d1;
    std::vector<shape_case> m = {
        {"kv=1", 2, 4, 1, d0, 0, 1.f, 1, 4, 0},           /* one key: O is V_0, L is the score */
        {"kv=1", 1, 8, 1, d1, 1, 1.f, 1, 1, 0},           /* one K/V head for 8 query heads */
        {"mha", 2, 6, 1, d1, 0, 1.f, 777, 6, 0},          /* G = 1 */
        {"gqa4", 2, 8, 1, d1, 0, 1.f, 1000, 2, 0},        /* G = 4 */
        {"gqa8", 3, 16, 1, d0, 0, 1.f, 4099, 2, 0},       /* G = 8 */
        {"long", 1, 4, 1, d1, 0, 1.f, 70001, 1, 0},       /* one group, many splits */
        {"nq=16", 2, 8, 16, d1, 1, 1.f, 3001, 2, 0},      /* 16 queries x 4 heads per group */
        {"nq=16", 1, 16, 16, d0, 0, 1.f, 333, 2, 0},      /* 128 rows per group */
        {"nq=5", 2, 4, 5, d0, 1, 1.f, 5, 4, 0},           /* causal with N_kv = N: j <= i */
        {"ragged", 4, 8, 1, d1, 0, 1.f, 5000, 2, 1},
        {"ragged", 5, 16, 12, d0, 1, 1.f, 2500, 1, 1},   /* causal, 192 rows a group: a block's rows span heads */
        {"ragged", 3, 2, 1, d0, 0, 1.f, 300, 2, 1},       /* lengths down to 1 */
        {"x30", 2, 8, 1, d1, 0, 30.f, 9000, 2, 0},        /* split and combined: the combine needs the max */
        {"x30", 2, 4, 4, d0, 1, 30.f, 2000, 4, 1},
        {"N=77", 2, 3, 77, d0, 0, 1.f, 0, 0, 0},          /* ordinary shapes: N_kv = N, H_kv = H */
        {"N=200", 1, 2, 200, d1, 1, 1.f, 0, 0, 0},
        {"N=130", 1, 4, 130, d1, 1, 1.f, 130, 2, 0},      /* a prefill with GQA */
        {"bench", DECODE_BENCH_B, DECODE_BENCH_H, DECODE_BENCH_N, db, 0, 1.f, DECODE_BENCH_NKV, DECODE_BENCH_HKV, 0},
    };
    for (shape_case &c : m) c = normalized(c);
    return m;
}

/* A paged version of a decode shape (fields as decode_case_matrix's), in pages of page_size keys. */
static shape_case paged(shape_case c, int page_size) {
    c.page_size = page_size;
    return normalized(c);
}

/* The paged cases of a paged lesson. The runner shuffles the pool and fills the rows past each
 * sequence's length with NaN; these shapes make the mistakes a page lookup can make visible. */
static std::vector<shape_case> paged_cases(int d0, int d1) {
    return {
        paged({"paged", 4, 8, 1, d0, 0, 1.f, 300, 2, 1}, 16),     /* ragged lengths, most end inside a page */
        paged({"paged", 3, 4, 1, d1, 0, 1.f, 1000, 4, 0}, 64),    /* 1000 = 15 pages + 40 keys: a partial last page */
        paged({"paged", 2, 8, 40, d1, 1, 1.f, 200, 1, 1}, 8),     /* causal queries whose keys end in different pages */
        paged({"paged", 2, 2, 1, d0, 0, 1.f, 2000, 1, 1}, 256),
        paged({"paged", 2, 4, 1, d0, 0, 1.f, 1, 2, 0}, 16),       /* one key, in a page of 16 */
        paged({"paged", 3, 16, 16, d1, 1, 1.f, 3001, 2, 1}, 32),  /* G = 8, 16 queries each */
        paged({"x30", 1, 4, 4, d1, 1, 30.f, 5000, 2, 0}, 1024),
        paged({"x30", 2, 4, 1, d0, 0, 30.f, 700, 4, 1}, 64),  /* pages half a d = 64 tile (128 keys) */
    };
}

/* A packed batch of sequences of len_q[b] queries and len_k[b] keys (len_k empty: as many as queries). */
static shape_case varlen(const char *name, int H, int H_kv, int d, int causal, float qscale, std::vector<int> len_q,
                         std::vector<int> len_k = {}) {
    shape_case c = {name, 0, H, 0, d, causal, qscale, 0, H_kv, 0};
    c.seqlens_q = len_q;
    c.seqlens_k = len_k.empty() ? len_q : len_k;
    return normalized(c);
}

/* The packed batches of a varlen lesson: lengths from 1 to 2000 in one batch (tiles that end
 * anywhere, a sequence of one token), GQA, causal, chunked prefill (a sequence's queries the last
 * of its keys; causal aligned bottom-right, where the query and key offsets differ), x30, and 40
 * short sequences of fixed draws. */
static std::vector<shape_case> varlen_cases(int d0, int d1) {
    const bool causal = LESSON.causal;
    std::vector<shape_case> m = {
        varlen("varlen", 2, 2, d0, 0, 1.f, {77, 1, 130, 16, 300}),
        varlen("varlen", 4, 2, d1, causal, 1.f, {77, 1, 130, 16, 300}),
        varlen("chunk", 2, 1, d1, causal, 1.f, {200, 1, 100, 7}, {329, 1, 100, 300}), /* 329 - 200 = B_r + 1, two query tiles */
        varlen("chunk", 4, 4, d0, 0, 1.f, {33, 5, 64}, {64, 260, 64}),
        varlen("x30", 2, 2, d1, causal, 30.f, {300, 17, 64}),
        varlen("long", 2, 1, d0, causal, 1.f, {2000, 3, 600}),
    };
    std::vector<int> q(40), k(40);
    rng_t r;
    rng_seed(&r, 0x5e9); /* the same 40 lengths in every run, log-uniform in 1..200 */
    for (int b = 0; b < 40; ++b) {
        q[b] = std::min(200, (int)exp(rng_uniform(&r) * log(201.0)));
        k[b] = q[b] + (b % 3 == 0 ? 7 * b : 0); /* every third sequence chunked */
    }
    m.push_back(varlen("many", 4, 2, d0, causal, 1.f, q, k));
    return m;
}

std::vector<shape_case> case_matrix(bool causal_edges) {
    int dp0, dp1;
    head_dim_range(&dp0, &dp1);
    if (decode_lesson()) {
        std::vector<shape_case> m = decode_case_matrix();
        if (paged_lesson())
            for (const shape_case &c : paged_cases(dp0, dp1)) m.push_back(c);
        if (varlen_lesson())
            for (const shape_case &c : varlen_cases(dp0, dp1)) m.push_back(c);
        return m;
    }
    int d0, d1;
    head_dim_range(&d0, &d1);
    const int db = lesson_supports_d(BENCH_D) ? BENCH_D : d0;
    std::vector<shape_case> m = {
        {"tiny", 1, 1, 4, d0, 0, 1.f},      {"N=1", 1, 2, 1, d0, 0, 1.f},
        {"N=77", 2, 3, 77, d0, 0, 1.f},     {"B*H", 3, 5, 255, d1, 0, 1.f},
        {"N=1000", 1, 2, 1000, d1, 0, 1.f}, {"x30", 1, 2, 300, d0, 0, 30.f},
        {"bench", BENCH_B, BENCH_H, BENCH_N, db, 0, 1.f},
    };
    if (d1 != d0) m.push_back({"x30", 1, 2, 300, d1, 0, 30.f});
    if (LESSON.causal) {
        m.push_back({"tiny", 1, 1, 4, d0, 1, 1.f});
        if (causal_edges) m.push_back({"N=1", 1, 2, 1, d0, 1, 1.f});
        m.push_back({"N=77", 2, 3, 77, d0, 1, 1.f});
        if (causal_edges && d1 != d0) m.push_back({"N=77", 2, 3, 77, d1, 1, 1.f});
        m.push_back({"N=1000", 1, 2, 1000, d1, 1, 1.f});
        m.push_back({"x30", 1, 2, 300, d1, 1, 30.f});
        m.push_back({"bench", BENCH_B, BENCH_H, BENCH_N, db, 1, 1.f});
    }
    if (ranks_lesson()) { /* 1680 = 2^4 3 5 7: 2P divides it for every P up to 8 */
        static_assert(ATTN_MAX_RANKS <= 8, "the ring case's N must be a multiple of 2P for every P");
        m.push_back({"ring", 1, 2, 1680, d0, 0, 1.f});
        if (LESSON.causal) m.push_back({"ring", 1, 2, 1680, d0, 1, 1.f});
    }
    if (fp8_lesson()) { /* FlashAttention-3's FP8 test inputs: N(0, 1) with 0.1% of them x10 */
        shape_case o = {"outlier", 1, 4, 1024, d1, 0, 1.f};
        o.outliers = 1;
        m.push_back(o);
        /* most of each row's other probabilities below 2^-9: P needs its own scale (fp8_peak_at_key0) */
        shape_case pk = {"peaked", 1, 4, 1024, d1, 0, 1.f};
        pk.peaked = 1;
        m.push_back(pk);
    }
    if (varlen_lesson())
        for (const shape_case &c : varlen_cases(d0, d1)) m.push_back(c);
    for (shape_case &c : m) c = normalized(c);
    return m;
}

static std::vector<shape_case> decode_fuzz_shapes(int K, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed ^ 0xdec0de);
    int d0, d1;
    const int nd = head_dim_range(&d0, &d1);
    std::vector<shape_case> v;
    for (int k = 0; k < K; ++k) {
        shape_case c = {"fuzz", 1 + (int)(rng_next(&r) % 4), 0, 1, LESSON.head_dims[rng_next(&r) % nd],
                        LESSON.causal ? (int)(rng_next(&r) % 2) : 0, rng_uniform(&r) < 0.15 ? 30.f : 1.f, 0, 0, 0};
        c.H_kv = 1 + (int)(rng_next(&r) % 4);
        c.H = c.H_kv * (1 << (rng_next(&r) % 4));
        if (rng_uniform(&r) < 0.75) {
            c.N = std::min(16, (int)exp(rng_uniform(&r) * log(17.0)));
            c.N_kv = std::min(32768, (int)exp(rng_uniform(&r) * log(32769.0)));
            if (c.causal && c.N_kv < c.N) c.N_kv = c.N;
        } else {
            c.N = c.N_kv = std::min(512, (int)exp(rng_uniform(&r) * log(513.0)));
        }
        c.ragged = rng_uniform(&r) < 0.4;
        if (paged_lesson() && rng_uniform(&r) < 0.4) c.page_size = ATTN_PAGE_MIN << (rng_next(&r) % 6); /* 8..256 */
        v.push_back(normalized(c));
    }
    return v;
}

/* A varlen lesson's fuzz: one shape in three replaced by a packed batch (fuzz_shapes). */
static void varlen_fuzz_shapes(std::vector<shape_case> &v, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed ^ 0x7a41e7);
    int d0, d1;
    const int nd = head_dim_range(&d0, &d1);
    for (shape_case &c : v) {
        if (rng_uniform(&r) >= 1.0 / 3) continue;
        const int B = 1 + (int)(rng_next(&r) % 6), H_kv = 1 + (int)(rng_next(&r) % 4);
        const int G = 1 << (rng_next(&r) % 3), causal = LESSON.causal ? (int)(rng_next(&r) % 2) : 0;
        const int d = LESSON.head_dims[rng_next(&r) % nd];
        const float qscale = rng_uniform(&r) < 0.15 ? 30.f : 1.f;
        std::vector<int> q(B), k(B);
        for (int b = 0; b < B; ++b) {
            q[b] = std::min(2048, (int)exp(rng_uniform(&r) * log(2049.0)));
            k[b] = q[b] + (rng_uniform(&r) < 1.0 / 3 ? std::min(2048, (int)exp(rng_uniform(&r) * log(2049.0))) : 0);
        }
        c = varlen("fuzz", H_kv * G, H_kv, d, causal, qscale, q, k);
    }
}

static std::vector<shape_case> plain_fuzz_shapes(int K, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed ^ 0xf122);
    int d0, d1;
    const int nd = head_dim_range(&d0, &d1);
    std::vector<shape_case> v;
    for (int k = 0; k < K; ++k) {
        shape_case c = {"fuzz", 1 + (int)(rng_next(&r) % 4), 1 + (int)(rng_next(&r) % 6),
                        (int)exp(rng_uniform(&r) * log(4096.0)) + (int)(rng_next(&r) % 2),
                        LESSON.head_dims[rng_next(&r) % nd], LESSON.causal ? (int)(rng_next(&r) % 2) : 0,
                        rng_uniform(&r) < 0.15 ? 30.f : 1.f, 0, 0, 0};
        if (c.N > 4096) c.N = 4096;
        v.push_back(normalized(c));
    }
    return v;
}

std::vector<shape_case> fuzz_shapes(int K, uint64_t seed) {
    std::vector<shape_case> v = decode_lesson() ? decode_fuzz_shapes(K, seed) : plain_fuzz_shapes(K, seed);
    if (varlen_lesson()) varlen_fuzz_shapes(v, seed);
    return v;
}

uint64_t case_seed(uint64_t run_seed, const shape_case &c0, int t) {
    const shape_case c = normalized(c0);
    uint64_t key = ((uint64_t)c.B << 40) ^ ((uint64_t)c.H << 28) ^ ((uint64_t)c.N << 8) ^ c.d ^
                   ((uint64_t)c.causal << 62) ^ ((uint64_t)t << 60) ^ (c.qscale != 1.f);
    if (c.peaked) key = rng_mix(key, 0x9eaced);
    if (is_decode(c)) key = rng_mix(key, ((uint64_t)c.N_kv << 24) ^ ((uint64_t)c.H_kv << 4) ^ (uint64_t)c.ragged);
    if (is_paged(c)) key = rng_mix(key, 0x9a9e00000000ULL ^ (uint64_t)c.page_size);
    if (is_varlen(c)) /* the lengths, whether drawn (--varlen) or listed (--seqlens, the rerun line) */
        for (int b = 0; b < c.B; ++b)
            key = rng_mix(key, ((uint64_t)c.seqlens_q[b] << 32) ^ (uint64_t)c.seqlens_k[b]);
    return rng_mix(run_seed, key);
}

/* "77,1,130:260": the lengths as --seqlens takes them, LEN_Q:LEN_K where they differ; the first
 * `most` items, then ",..." (most < 0: all). */
static std::string seqlens_text(const shape_case &c, int most) {
    std::string s;
    for (int b = 0; b < c.B; ++b) {
        if (most >= 0 && b == most) return s + ",...";
        s += (b ? "," : "") + std::to_string(c.seqlens_q[b]);
        if (c.seqlens_k[b] != c.seqlens_q[b]) s += ":" + std::to_string(c.seqlens_k[b]);
    }
    return s;
}

std::string shape_text(const shape_case &c0) {
    const shape_case c = normalized(c0);
    char buf[160];
    if (is_varlen(c)) {
        long tq = 0, tk = 0;
        for (int b = 0; b < c.B; ++b) { tq += c.seqlens_q[b]; tk += c.seqlens_k[b]; }
        snprintf(buf, sizeof buf, "B=%d H=%d%s d=%d packed: %ld queries, %ld keys, seqlens ", c.B, c.H,
                 c.H_kv != c.H ? (" H_kv=" + std::to_string(c.H_kv)).c_str() : "", c.d, tq, tk);
        return buf + seqlens_text(c, 8);
    }
    snprintf(buf, sizeof buf, "B=%d H=%d N=%d d=%d", c.B, c.H, c.N, c.d);
    std::string s = buf;
    if (is_decode(c)) {
        snprintf(buf, sizeof buf, " N_kv=%d H_kv=%d%s", c.N_kv, c.H_kv, c.ragged ? " ragged" : "");
        s += buf;
    }
    if (is_paged(c)) s += " paged " + std::to_string(c.page_size);
    return s;
}

std::string ranks_text(const shape_case &c) { return c.ranks ? " on " + std::to_string(c.ranks) + " ranks" : ""; }

case_outcome outcome_of(const shape_case &c0, bool pass) {
    const shape_case c = normalized(c0);
    int aligned = !c.ragged && c.N_kv % 16 == 0, chunked = 0;
    for (int b = 0; b < (is_varlen(c) ? c.B : 0); ++b) {
        aligned &= c.seqlens_k[b] % 16 == 0;
        chunked |= c.seqlens_k[b] != c.seqlens_q[b];
    }
    return {c.N, c.causal, pass, c.H_kv < c.H, c.ragged, is_decode(c) && !is_varlen(c), aligned, c.N_kv, c.ranks,
            is_paged(c), is_varlen(c), chunked, c.peaked};
}

/* Does every failing case have the property, and some case without it pass? */
template <typename F>
static bool only_with(const std::vector<case_outcome> &v, F has) {
    int fail_without = 0, pass_without = 0;
    for (const case_outcome &o : v)
        if (!has(o)) { fail_without += !o.pass; pass_without += o.pass; }
    return fail_without == 0 && pass_without > 0;
}

/* The shortest KV length of a failing case, when every case shorter than it passes, at least
 * two of them, and it is longer than any K/V tile (256 keys); else 0. */
static int long_only(const std::vector<case_outcome> &v) {
    int x = 1 << 30, below = 0;
    for (const case_outcome &o : v)
        if (!o.pass && o.N_kv < x) x = o.N_kv;
    if (x == 1 << 30 || x <= 256) return 0;
    for (const case_outcome &o : v)
        if (o.N_kv < x) below += o.pass;
    return below >= 2 ? x : 0;
}

/* The decode lesson's patterns (print_failure_pattern), most specific first. */
static void print_decode_pattern(const std::vector<case_outcome> &v, int fail, bool only_causal) {
    if (only_with(v, [](const case_outcome &o) { return o.gqa != 0; }))
        printf("diagnosis: only the grouped-query cases (H_kv < H) fail, every H_kv = H case passes: query head h "
               "must read K/V head h / (H / H_kv): the G = H / H_kv query heads of a group are neighbours "
               "(h = h_kv G .. h_kv G + G - 1), and K, V are [B, H_kv, N_kv, d] (batch stride H_kv N_kv d)\n");
    else if (only_with(v, [](const case_outcome &o) { return o.ragged != 0; }))
        printf("diagnosis: only the cases with per-sequence KV lengths (seqlens_kv, ragged) fail: sequence b has "
               "seqlens_kv[b] keys (key rows past it hold NaN: never read them, not even to mask them), the "
               "split bounds and the combine count follow that length, and causal query i sees keys "
               "j <= seqlens_kv[b] - N + i\n");
    else if (only_causal)
        printf("diagnosis: only the causal cases fail, every non-causal one passes: check the causal mask, "
               "aligned to the end of the cache: key j is visible to query i iff j <= N_kv - N + i "
               "(seqlens_kv[b] in place of N_kv when given), which is j <= i when N_kv = N\n");
    else if (long_only(v))
        printf("diagnosis: only the cases with at least %d keys fail, every shorter one passes: what only long "
               "sequences exercise is the split of the keys: check the split bounds (every key in exactly one "
               "split), each split's partial O and logsumexp L_s, and their merge (L = log sum_s exp(L_s), "
               "O = sum_s exp(L_s - L) O_s)\n", long_only(v));
    else if (only_with(v, [](const case_outcome &o) { return o.decode != 0; }))
        printf("diagnosis: only the decode shapes fail (N != N_kv, H_kv < H or ragged), the ordinary ones "
               "(N = N_kv, H_kv = H) pass: K and V are [B, H_kv, N_kv, d], Q and O [B, H, N, d]; check every "
               "place that uses N for the keys or H for the K/V heads\n");
    else if (only_with(v, [](const case_outcome &o) { return !o.keys_aligned; }) && fail > 1)
        printf("diagnosis: only the cases whose KV length is not a multiple of 16 fail: check the last, partial "
               "K/V tile of a sequence and of each split: keys past the end need a score of -inf and must not "
               "be read\n");
}

/* The serving layouts' patterns (print_failure_pattern): true when one was printed. */
static bool print_serving_pattern(const std::vector<case_outcome> &v) {
    if (paged_lesson() && only_with(v, [](const case_outcome &o) { return o.paged != 0; })) {
        printf("diagnosis: only the paged cases (K and V read through block_table) fail, every contiguous one passes: "
               "key j of sequence b is row j %% page_size of pool page block_table[b * max_pages + j / page_size], "
               "its K/V head h_kv at ((page * page_size + j %% page_size) * H_kv + h_kv) * d (the heads inside each "
               "key row of a page, [num_pages, page_size, H_kv, d]); a sequence's pages are anywhere in the pool, in "
               "any order, and its last page ends at seqlens_kv[b] (the rows past it hold NaN)\n");
        return true;
    }
    if (!varlen_lesson()) return false;
    if (only_with(v, [](const case_outcome &o) { return o.chunked != 0; })) {
        printf("diagnosis: only the chunked-prefill batches (a sequence with more keys than queries) fail: its "
               "seqlen_q queries are the last of its seqlen_k keys, so query i of sequence b is token "
               "cu_seqlens_q[b] + i of Q but sits at key position seqlen_k - seqlen_q + i: with causal it sees keys "
               "j <= seqlen_k - seqlen_q + i (aligned bottom-right); the query and key offsets, cu_seqlens_q[b] and "
               "cu_seqlens_k[b], differ\n");
        return true;
    }
    if (only_with(v, [](const case_outcome &o) { return o.varlen != 0; })) {
        printf("diagnosis: only the packed batches (cu_seqlens) fail, every rectangular case passes: sequence b's "
               "queries are tokens cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 of Q and O ([total_q, H, d]: a token "
               "is H d elements), its keys tokens cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 of K and V "
               "([total_k, H_kv, d]), L is [H, total_q]; tiles end at each sequence's end, and causal positions "
               "count from each sequence's start\n");
        return true;
    }
    return false;
}

void print_failure_pattern(const std::vector<case_outcome> &v, const char *what_causal, const char *what_ragged) {
    int fail = 0, fail_nc = 0, pass_nc = 0, fail_c = 0, pass_c = 0, fail_aligned = 0, pass_aligned = 0;
    for (const case_outcome &o : v) {
        fail += !o.pass;
        if (!o.causal) { fail_nc += !o.pass; pass_nc += o.pass; }
        else { fail_c += !o.pass; pass_c += o.pass; }
        if (o.N % 16 == 0) { fail_aligned += !o.pass; pass_aligned += o.pass; }
    }
    if (fail == 0) return;
    int least = 0; /* the fewest ranks among the failing cases, when every case on fewer passes */
    for (const case_outcome &o : v)
        if (!o.pass && o.ranks > 0 && (!least || o.ranks < least)) least = o.ranks;
    if (least > 2 && only_with(v, [least](const case_outcome &o) { return o.ranks >= least; }))
        printf("diagnosis: only the rings of %d or more ranks fail, every case on fewer passes: on two ranks the rank "
               "before and the rank after are the same (r - s = r + s mod 2), so a ring that sends the wrong way, or "
               "takes the block it holds at step s for another rank's, still gets two ranks right; check which rank's "
               "block each rank holds at each step, the chunks that block carries, and where each rank sends\n", least);
    if (print_serving_pattern(v)) return;
    if (only_with(v, [](const case_outcome &o) { return o.peaked; })) {
        printf("diagnosis: only the peaked inputs fail (each query's scores peak at key 0; most other probabilities "
               "exp(S - m) lie between 2^-16 and 2^-8, O is their share alone): are they lost in P's rounding? "
               "Multiply P by its scale before rounding it to e4m3 (below 2^-6 e4m3 has only subnormals, steps of "
               "2^-9) and divide O's sum by it\n");
        return;
    }
    if (decode_lesson()) {
        print_decode_pattern(v, fail, fail_nc == 0 && pass_nc > 0);
        return;
    }
    if (!what_causal)
        what_causal = "check the causal mask (key j is visible to query i iff j <= i, the diagonal included), which "
                      "K/V tiles are skipped above the diagonal, and which tiles get the element-wise mask";
    if (!what_ragged)
        what_ragged = "check the last, partial tiles: keys >= N need a score of -inf, rows >= N must not be read "
                      "or written";
    const bool only_non_causal = fail_c == 0 && pass_c > 0;
    const bool only_ragged = fail_aligned == 0 && pass_aligned > 0 && fail > 1;
    if (fail_nc == 0 && pass_nc > 0)
        printf("diagnosis: only the causal cases fail, every non-causal one passes: %s\n", what_causal);
    else if (only_non_causal && only_ragged)
        printf("diagnosis: only the non-causal cases whose N is not a multiple of 16 fail (every causal case and "
               "every N that is pass): the keys >= N of the last, partial key tile are not masked when causal is 0 "
               "(with causal on, the test key > row masks them for every row < N); they need a score of -inf "
               "whatever causal is\n");
    else if (only_non_causal)
        printf("diagnosis: only the non-causal cases fail, every causal one passes: does code meant for causal "
               "attention run when causal is 0 (a mask or a skipped tile without its causal test)? Non-causal, "
               "every row sees every key < N: only keys >= N of the last tile are masked\n");
    else if (only_ragged)
        printf("diagnosis: only the cases whose N is not a multiple of 16 fail (those whose N is pass): %s\n",
               what_ragged);
}

std::string logits_text(const shape_case &c) {
    if (c.qscale == 1.f) return "";
    char b[40];
    snprintf(b, sizeof b, " x%g logits", c.qscale);
    return b;
}

void print_rerun(const shape_case &c0, int dt, uint64_t run_seed) {
    const shape_case c = normalized(c0);
    char scale[48] = "";
    if (c.qscale != 1.f) snprintf(scale, sizeof scale, " --logit-scale %g", c.qscale);
    const std::string more = std::string(scale) + (c.outliers ? " --outliers" : "") + (c.peaked ? " --peaked" : "") +
                             (c.fp8_tensor ? " --quant tensor" : "") + (c.hadamard ? " --hadamard" : "") +
                             (c.ranks ? " --ranks " + std::to_string(c.ranks) : "");
    if (is_varlen(c))
        printf("          rerun: ./%s --seqlens %s -H %d%s -d %d --dtype %s%s%s --seed %llu --check-only\n", runner_prog,
               seqlens_text(c, -1).c_str(), c.H, c.H_kv != c.H ? (" --kv-heads " + std::to_string(c.H_kv)).c_str() : "",
               c.d, dtype_name(dt), c.causal ? " --causal" : "", scale, (unsigned long long)run_seed);
    else if (!is_decode(c))
        printf("          rerun: ./%s -b %d -H %d -n %d -d %d --dtype %s%s%s --seed %llu --check-only\n", runner_prog,
               c.B, c.H, c.N, c.d, dtype_name(dt), c.causal ? " --causal" : "", more.c_str(),
               (unsigned long long)run_seed);
    else
        printf("          rerun: ./%s -b %d -H %d -n %d -d %d --kv-seq %d --kv-heads %d%s%s --dtype %s%s%s --seed %llu "
               "--check-only\n", runner_prog, c.B, c.H, c.N, c.d, c.N_kv, c.H_kv, c.ragged ? " --ragged" : "",
               c.page_size ? (" --paged " + std::to_string(c.page_size)).c_str() : "", dtype_name(dt),
               c.causal ? " --causal" : "", scale, (unsigned long long)run_seed);
}

void print_case_line(bool ok, const shape_case &c, int dt, const std::string &detail, uint64_t run_seed) {
    if (ok)
        printf("    pass  %-6s %s  %s%s%s%s%s  %s\n", c.name, dtype_name(dt), shape_text(c).c_str(),
               c.causal ? " causal" : "", logits_text(c).c_str(), c.outliers ? " outliers" : "",
               (ranks_text(c) + (c.peaked ? " peaked" : "")).c_str(), detail.c_str());
    else
        print_rerun(c, dt, run_seed);
    fflush(stdout);
}

void report_entry_rc(int rc, const char *entry) {
    if (rc == ATTN_NOT_IMPLEMENTED) return;
    if (rc == ATTN_OUT_OF_MEMORY) {
        fprintf(stderr, "out of memory (the method's message is above)\n");
        exit(EXIT_OOM);
    }
    if (rc != ATTN_OK) {
        fprintf(stderr, "%s returned %d (%s)\n", entry, rc,
                rc == ATTN_UNSUPPORTED ? "unsupported shape or dtype" : "unknown code");
        exit(EXIT_FAILED);
    }
}

void print_causal_ratio(const run_timing &causal, double noncausal_ms) {
    printf("Causal: %.3f ms, %.2f TFLOP/s; non-causal time / causal time = %.2fx "
           "(2x is the most skipping can give)\n", causal.ms, causal.tflops, noncausal_ms / causal.ms);
}

/* The columns CSV_HEADER has beyond the first 14 (columns are only ever added at the end), by
 * name: N_kv, H_kv and ragged from the shape, kv_gbps when measured; a column this runner does
 * not know stays empty. */
static std::string extra_columns(const shape_case &c0, bool timed, double kv_gbps) {
    const shape_case c = normalized(c0);
    std::string h = CSV_HEADER, out;
    size_t at = 0;
    for (int k = 0; k < 14 && at != std::string::npos; ++k) at = h.find(',', at + (k ? 1 : 0));
    while (at != std::string::npos) {
        const size_t next = h.find(',', at + 1);
        const std::string col = h.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
        char gbps[32] = "";
        if (col == "kv_gbps" && timed && kv_gbps >= 0) snprintf(gbps, sizeof gbps, "%.1f", kv_gbps);
        out += "," + (col == "N_kv" ? std::to_string(c.N_kv) : col == "H_kv" ? std::to_string(c.H_kv)
                      : col == "ragged" ? std::to_string(c.ragged) : std::string(gbps));
        at = next;
    }
    return out;
}

void print_csv_row(const char *status, int passed, int total, int dt, const shape_case &c, double ms,
                   double tflops, double pct, size_t mem, double kv_gbps) {
    printf("%s\n", CSV_HEADER);
    if (ms >= 0)
        printf("%s,%s,%d,%d,%s,%d,%d,%d,%d,%d,%.4f,%.2f,%.1f,%zu%s\n", LESSON.name, status, passed, total,
               dtype_name(dt), c.B, c.H, c.N, c.d, c.causal, ms, tflops, pct, mem,
               extra_columns(c, true, kv_gbps).c_str());
    else
        printf("%s,%s,%d,%d,%s,%d,%d,%d,%d,%d,,,,%s\n", LESSON.name, status, passed, total, dtype_name(dt), c.B,
               c.H, c.N, c.d, c.causal, extra_columns(c, false, -1).c_str());
}

void require_memory(const shape_case &c0, int dt, size_t device_bytes, size_t host_bytes, const char *what) {
    const shape_case c = normalized(c0);
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (device_bytes > free_b) {
        char kv[64] = "";
        if (is_decode(c)) snprintf(kv, sizeof kv, " N_kv=%d H_kv=%d", c.N_kv, c.H_kv);
        fprintf(stderr, "out of memory: B=%d H=%d N=%d d=%d%s %s needs %.2f GiB of device memory for %s; the GPU has "
                "%.2f GiB free. Use a smaller --batch/%s.\n", c.B, c.H, c.N, c.d, kv, dtype_name(dt),
                device_bytes / 1073741824.0, what, free_b / 1073741824.0,
                is_decode(c) ? "--kv-heads/--kv-seq" : "--heads/--seq");
        exit(EXIT_OOM);
    }
    const size_t host_total = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    if (host_bytes > host_total) {
        fprintf(stderr, "out of memory: B=%d H=%d N=%d d=%d %s needs %.2f GiB of host memory to grade; this "
                "machine has %.2f GiB. Use a smaller --batch/--heads/--seq%s.\n", c.B, c.H, c.N, c.d, dtype_name(dt),
                host_bytes / 1073741824.0, host_total / 1073741824.0, decode_lesson() ? "/--kv-seq" : "");
        exit(EXIT_OOM);
    }
}

void guarded_alloc_or_exit(guarded_buf *b, size_t n, int es, uint32_t pattern, const shape_case &c, int dt,
                           const char *what) {
    if (guarded_alloc(b, n, es, pattern) == cudaSuccess) return;
    fprintf(stderr, "out of memory: B=%d H=%d N=%d d=%d %s: %s needs %.1f MiB; use a smaller --batch/--heads/--seq%s\n",
            c.B, c.H, c.N, c.d, dtype_name(dt), what, n * es / 1048576.0, decode_lesson() ? "/--kv-seq" : "");
    exit(EXIT_OOM);
}
