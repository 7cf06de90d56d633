/* runner_varlen.cu: a packed batch (attention.h, cu_seqlens_q, cu_seqlens_k; lessons that declare
 * LESSON_VARLEN) set up, graded and checked for runner_attention.cu's kinds (runner_serving.h).
 *
 * Per case: B sequences of seqlens_q[b] queries and seqlens_k[b] keys (shape_case), fresh seeded
 * inputs drawn per sequence and head and packed without padding, Q [total_q, H, d], K and V
 * [total_k, H_kv, d], between NaN guards; O [total_q, H, d] and L [H, total_q] poisoned, between
 * poison guards; the offsets checked (attn_check_varlen) before the lesson sees them. The float64
 * reference computes each sequence on its own (query i of sequence b against its keys, causal
 * aligned bottom-right). Then a re-run (bitwise), the isolation of the sequences (changing the
 * keys of every other sequence must leave the rest alone) and, when causal, the future-key test
 * per sequence. A failure names the sequences and what their rows match: one key too many or too
 * few, keys or queries one token off, causal masking by packed positions or aligned top-left,
 * another K/V head. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>
#include "buffers.h"
#include "cuda_check.h"
#include "gpu_env.h"
#include "runner_serving.h"
extern "C" {
#include "cpu_reference.h"
#include "rng.h"
}

enum { OUT_O, OUT_L };

struct Varlen : problem_core {
    int G;                           /* H / H_kv */
    int total_q, total_k;
    std::vector<int> cu_q, cu_k;     /* [B + 1] offsets, as uploaded */
    bool host;                       /* the host keeps the inputs (graded); false: filled on the device */
    std::vector<float> Q;            /* packed [total_q, H, d], as stored */
    std::vector<float> K, V;         /* sequence by sequence: (b, h_kv) slice of len_k[b] keys at kv_slice() */
    std::vector<float> Kp, Vp;       /* K and V packed [total_k, H_kv, d], as uploaded */
    guarded_buf in[3], cu[2];
    attn_args args;
};
static const int N_BUFFERS = 7; /* guarded arrays per problem: Q, K, V, O, L, the two offsets */

static Varlen &vl(problem_core &p) { return static_cast<Varlen &>(p); }
static const Varlen &vl(const problem_core &p) { return static_cast<const Varlen &>(p); }

static int len_q(const Varlen &p, int b) { return p.cu_q[b + 1] - p.cu_q[b]; }
static int len_k(const Varlen &p, int b) { return p.cu_k[b + 1] - p.cu_k[b]; }
/* The keys query i of sequence b sees: all its keys, or with causal j <= seqlen_k - seqlen_q + i. */
static int visible(const Varlen &p, int b, int i) { return p.c.causal ? len_k(p, b) - len_q(p, b) + i + 1 : len_k(p, b); }
/* Where the (b, h_kv) slice of K and V starts in p.K, p.V: sequence b's H_kv slices of len_k rows. */
static size_t kv_slice(const Varlen &p, int b, int hk) {
    return ((size_t)p.cu_k[b] * p.c.H_kv + (size_t)hk * len_k(p, b)) * p.c.d;
}
/* Query row i of sequence b, head h, in the packed Q. */
static const float *q_row(const Varlen &p, int b, int h, int i) {
    return &p.Q[(((size_t)p.cu_q[b] + i) * p.c.H + h) * p.c.d];
}

/* problem_core's row_at: O row (t, h) at t * H + h, L row (h, t) at h * total_q + t, t the
 * packed token of query i of sequence b. */
static size_t varlen_row(const problem_core &pc, int k, int bh, int i) {
    const Varlen &p = vl(pc);
    const int b = bh / p.c.H, h = bh % p.c.H;
    if (i >= len_q(p, b)) return NO_ROW;
    const size_t t = (size_t)p.cu_q[b] + i;
    return k == OUT_O ? t * p.c.H + h : (size_t)h * p.total_q + t;
}

/* Rows [from[b], len_k[b]) of every (b, h_kv) slice of X (K or V) drawn N(0, 1), rounded to the
 * dtype; each slice from its own stream. */
static void draw_keys(Varlen &p, std::vector<float> &X, uint64_t seed, const std::vector<int> &from) {
    const int d = p.c.d;
#pragma omp parallel for schedule(dynamic, 4)
    for (int s = 0; s < p.c.B * p.c.H_kv; ++s) {
        const int b = s / p.c.H_kv, hk = s % p.c.H_kv;
        rng_t r;
        rng_seed(&r, rng_mix(seed, (uint64_t)s));
        float *x = &X[kv_slice(p, b, hk)];
        for (size_t e = (size_t)from[b] * d; e < (size_t)len_k(p, b) * d; ++e)
            x[e] = round_value((float)rng_normal(&r), p.dt);
    }
}

/* K or V packed as uploaded: token t, head h_kv at (t * H_kv + h_kv) * d. */
static void upload_kv(Varlen &p, int which) {
    const std::vector<float> &X = which == 1 ? p.K : p.V;
    std::vector<float> &P = which == 1 ? p.Kp : p.Vp;
    const int d = p.c.d, Hk = p.c.H_kv;
    P.resize((size_t)p.total_k * Hk * d);
    for (int b = 0; b < p.c.B; ++b)
        for (int hk = 0; hk < Hk; ++hk)
            for (int j = 0; j < len_k(p, b); ++j)
                memcpy(&P[(((size_t)p.cu_k[b] + j) * Hk + hk) * d], &X[kv_slice(p, b, hk) + (size_t)j * d],
                       sizeof(float) * d);
    std::vector<char> buf(P.size() * dtype_size(p.dt));
    encode_values(P.data(), buf.data(), P.size(), p.dt);
    guarded_upload(&p.in[which], buf.data());
}

static void fill_inputs_on_host(Varlen &p, uint64_t seed) {
    const shape_case &c = p.c;
    const int d = c.d;
    p.Q.assign((size_t)p.total_q * c.H * d, 0.f);
#pragma omp parallel for schedule(dynamic, 4)
    for (int s = 0; s < c.B * c.H; ++s) { /* query slice (b, h) from its own stream */
        const int b = s / c.H, h = s % c.H;
        rng_t r;
        rng_seed(&r, rng_mix(rng_mix(seed, 1), (uint64_t)s));
        for (int i = 0; i < len_q(p, b); ++i)
            for (int col = 0; col < d; ++col)
                p.Q[(((size_t)p.cu_q[b] + i) * c.H + h) * d + col] = round_value((float)(rng_normal(&r) * c.qscale), p.dt);
    }
    const size_t nkv = (size_t)p.total_k * c.H_kv * d;
    p.K.assign(nkv, 0.f);
    p.V.assign(nkv, 0.f);
    const std::vector<int> zero(c.B, 0);
    draw_keys(p, p.K, rng_mix(seed, 2), zero);
    draw_keys(p, p.V, rng_mix(seed, 3), zero);
    std::vector<char> buf(p.Q.size() * dtype_size(p.dt));
    encode_values(p.Q.data(), buf.data(), p.Q.size(), p.dt);
    guarded_upload(&p.in[0], buf.data());
    upload_kv(p, 1);
    upload_kv(p, 2);
}

static int launch(problem_core *p) { return attention_forward(&vl(*p).args); }

problem_core *varlen_alloc(const shape_case &c0, dtype_t dt, uint64_t seed, bool graded) {
    Varlen *pp = new Varlen();
    Varlen &p = *pp;
    const shape_case c = normalized(c0);
    p.c = c;
    p.dt = dt;
    p.host = graded;
    p.G = c.H / c.H_kv;
    p.cu_q.assign(c.B + 1, 0);
    p.cu_k.assign(c.B + 1, 0);
    long tq = 0, tk = 0;
    for (int b = 0; b < c.B; ++b) {
        tq += c.seqlens_q[b];
        tk += c.seqlens_k[b];
        p.cu_q[b + 1] = (int)std::min<long>(tq, 0x7fffffff);
        p.cu_k[b + 1] = (int)std::min<long>(tk, 0x7fffffff);
    }
    char err[600];
    if (tq > 0x7fffffff || tk > 0x7fffffff ||
        attn_check_varlen(p.cu_q.data(), p.cu_k.data(), c.B, (int)tq, (int)tk, c.N, c.N_kv, c.causal, err, sizeof err)) {
        fprintf(stderr, "%s: the lesson is not called with these offsets: %s\n", runner_prog,
                tq > 0x7fffffff || tk > 0x7fffffff ? "a total above 2^31 - 1 tokens" : err);
        exit(EXIT_USAGE);
    }
    p.total_q = (int)tq;
    p.total_k = (int)tk;
    p.launch = launch;
    p.kernels = "the lesson's kernel";
    p.row_at = varlen_row;
    p.rows = (size_t)p.total_q * c.H;
    p.guarded_arrays = N_BUFFERS;
    const size_t nq = (size_t)p.total_q * c.H * c.d, nkv = (size_t)p.total_k * c.H_kv * c.d;
    const int es = dtype_size(dt);
    /* device: Q, K, V, O, L, the offsets and their guards; host: Q and K, V twice (by sequence
     * and packed) in fp32, an upload buffer and two copies of O and L, or only those copies */
    require_memory(c, dt, (2 * nq + 2 * nkv) * es + sizeof(float) * p.rows + N_BUFFERS * 2 * GUARD_BYTES + 8 * (size_t)c.B,
                   graded ? (nq + 4 * nkv) * sizeof(float) + std::max(nq, nkv) * es + 2 * (nq * es + 4 * p.rows)
                          : 2 * (nq * es + 4 * p.rows),
                   "the packed Q, K, V, O and L");
    for (int k = 0; k < 3; ++k)
        guarded_alloc_or_exit(&p.in[k], k ? nkv : nq, es, nan_of(es), c, dt, k ? "each of the packed K, V" : "the packed Q");
    for (int k = 0; k < 2; ++k) { /* poison guards: an offset read past either end is nonsense */
        guarded_alloc_or_exit(&p.cu[k], c.B + 1, 4, POISON32, c, dt, k ? "cu_seqlens_k" : "cu_seqlens_q");
        guarded_upload(&p.cu[k], (k ? p.cu_k : p.cu_q).data());
    }
    if (graded) {
        fill_inputs_on_host(p, seed);
    } else { /* timing only: any values, drawn where they are */
        for (int k = 0; k < 3; ++k)
            device_fill_random(p.in[k].data, k ? nkv : nq, dt, rng_mix(seed, 1 + k), k ? 1.f : c.qscale, 0);
        CUDA_CHECK(cudaDeviceSynchronize());
    }
    add_output(p, "O", dt, c.d);
    add_output(p, "L", DTYPE_FP32, 1);
    CUDA_CHECK(cudaStreamCreate(&p.stream));
    attn_args &a = p.args;
    a.B = c.B; a.H = c.H; a.N = c.N; a.d = c.d; a.causal = c.causal;
    a.scale = 1.0f / sqrtf((float)c.d);
    a.dtype = dt;
    a.Q = p.in[0].data; a.K = p.in[1].data; a.V = p.in[2].data;
    a.O = p.out[OUT_O].buf.data; a.L = (float *)p.out[OUT_L].buf.data; a.stream = p.stream;
    a.N_kv = c.N_kv; a.H_kv = c.H_kv;
    a.cu_seqlens_q = (const int *)p.cu[0].data;
    a.cu_seqlens_k = (const int *)p.cu[1].data;
    a.max_seqlen_q = c.N; a.max_seqlen_k = c.N_kv;
    a.total_q = p.total_q; a.total_k = p.total_k;
    return pp;
}

void varlen_release(problem_core *pc) {
    Varlen &p = vl(*pc);
    for (int k = 0; k < 3; ++k) guarded_free(&p.in[k]);
    for (int k = 0; k < 2; ++k) guarded_free(&p.cu[k]);
    free_outputs(p);
    CUDA_CHECK(cudaStreamDestroy(p.stream));
    delete &p;
}

/* ---- the float64 reference, each sequence on its own ---- */

/* The graded rows (b * H + h, i): all of them when the reference costs at most about 3e8
 * multiply-adds (a row costs its visible keys times d), else every slice's first and last row
 * and random rows (a random packed token and head) within that budget; ascending. */
static std::vector<std::pair<int, int>> pick_rows(const Varlen &p, rng_t *r) {
    const shape_case &c = p.c;
    const double budget = 3e8;
    double all = 0;
    for (int b = 0; b < c.B; ++b)
        for (int i = 0; i < len_q(p, b); ++i) all += (double)c.H * std::max(visible(p, b, i), 1) * c.d;
    std::vector<std::pair<int, int>> rows;
    if (all <= budget) {
        for (int b = 0; b < c.B; ++b)
            for (int h = 0; h < c.H; ++h)
                for (int i = 0; i < len_q(p, b); ++i) rows.push_back({b * c.H + h, i});
        return rows;
    }
    std::vector<std::pair<int, int>> taken;
    double cost = 0;
    auto take = [&](int b, int h, int i) {
        taken.push_back({b * c.H + h, i});
        cost += (double)std::max(visible(p, b, i), 1) * c.d;
    };
    if (2.0 * c.B * c.H <= 1000)
        for (int b = 0; b < c.B; ++b)
            for (int h = 0; h < c.H; ++h) { take(b, h, 0); if (len_q(p, b) > 1) take(b, h, len_q(p, b) - 1); }
    for (int tries = 0; cost < budget && tries < 1000000; ++tries) {
        const int t = (int)(rng_next(r) % (uint64_t)p.total_q), h = (int)(rng_next(r) % (uint64_t)c.H);
        const int b = (int)(std::upper_bound(p.cu_q.begin(), p.cu_q.end(), t) - p.cu_q.begin()) - 1;
        take(b, h, t - p.cu_q[b]);
    }
    std::sort(taken.begin(), taken.end());
    taken.erase(std::unique(taken.begin(), taken.end()), taken.end());
    return taken;
}

static graded_rows reference(const Varlen &p, uint64_t seed) {
    const shape_case &c = p.c;
    rng_t r;
    rng_seed(&r, seed ^ 0x5eed);
    return forward_rows(pick_rows(p, &r), c.d, p.args.scale, p.dt, [&p, &c](int bh, int i) {
        const int b = bh / c.H, h = bh % c.H;
        const size_t kv = kv_slice(p, b, h / p.G);
        return attention_row{q_row(p, b, h, i), &p.K[kv], &p.V[kv], visible(p, b, i)};
    });
}

/* ---- what the wrong rows match ---- */

/* A hypothesis about the rows of a packed batch: the keys, queries and count a kernel took for
 * query i of sequence b, head h, in the packed arrays. */
struct reading {
    long key0;   /* packed token of the first key */
    int nk;      /* keys */
    long q;      /* packed token of the query */
    int hk;      /* K/V head */
};
typedef reading (*hypothesis)(const Varlen &p, int b, int h, int i);
static reading right(const Varlen &p, int b, int h, int i) {
    return {p.cu_k[b], visible(p, b, i), (long)p.cu_q[b] + i, h / p.G};
}
static reading key_more(const Varlen &p, int b, int h, int i) { reading r = right(p, b, h, i); ++r.nk; return r; }
static reading key_less(const Varlen &p, int b, int h, int i) { reading r = right(p, b, h, i); --r.nk; return r; }
static reading keys_late(const Varlen &p, int b, int h, int i) { reading r = right(p, b, h, i); ++r.key0; return r; }
static reading keys_early(const Varlen &p, int b, int h, int i) { reading r = right(p, b, h, i); --r.key0; return r; }
static reading query_late(const Varlen &p, int b, int h, int i) { reading r = right(p, b, h, i); ++r.q; return r; }
static reading query_early(const Varlen &p, int b, int h, int i) { reading r = right(p, b, h, i); --r.q; return r; }
/* causal by packed token index: key token u visible to query token t iff u <= t, keys of the
 * sequence only */
static reading packed_mask(const Varlen &p, int b, int h, int i) {
    reading r = right(p, b, h, i);
    r.nk = (int)std::max<long>(0, std::min<long>(len_k(p, b), (long)p.cu_q[b] + i - p.cu_k[b] + 1));
    return r;
}
/* causal by packed position without the sequence's start: every key of the batch up to its own */
static reading packed_unbounded(const Varlen &p, int b, int h, int i) {
    reading r = right(p, b, h, i);
    r.nk = (int)(p.cu_k[b] + r.nk);
    r.key0 = 0;
    return r;
}
static reading top_left(const Varlen &p, int b, int h, int i) {
    reading r = right(p, b, h, i);
    r.nk = std::min(i + 1, len_k(p, b));
    return r;
}
static reading no_mask(const Varlen &p, int b, int h, int i) {
    reading r = right(p, b, h, i);
    r.nk = len_k(p, b);
    return r;
}

struct named_hypothesis {
    hypothesis f;
    bool causal_only;
    const char *what;
};
static const named_hypothesis HYPOTHESES[] = {
    {key_more, false, "each sees one key more than it has, key cu_seqlens_k[b + 1] (the next sequence's first, or "
                      "past the end of K and V for the last sequence): sequence b's keys are tokens cu_seqlens_k[b] .. "
                      "cu_seqlens_k[b + 1] - 1 (an end bound <= where < belongs?)"},
    {key_less, false, "each sees one key fewer than it has: sequence b's keys are tokens cu_seqlens_k[b] .. "
                      "cu_seqlens_k[b + 1] - 1, seqlen_k = cu_seqlens_k[b + 1] - cu_seqlens_k[b] of them"},
    {keys_late, false, "their keys start one token late (at cu_seqlens_k[b] + 1): an off-by-one in the key offset"},
    {keys_early, false, "their keys start one token early (at cu_seqlens_k[b] - 1): an off-by-one in the key offset"},
    {query_late, false, "they are the next query token's rows (query i read from token cu_seqlens_q[b] + i + 1): an "
                        "off-by-one in the query offset"},
    {query_early, false, "they are the previous query token's rows (query i read from token cu_seqlens_q[b] + i - 1): "
                         "an off-by-one in the query offset"},
    {packed_mask, true, "causal masked by packed positions (key token u visible to query token t iff u <= t): query "
                        "i of sequence b sees keys j <= seqlen_k - seqlen_q + i, positions within its own sequence; "
                        "the packed token indices differ by cu_seqlens_q[b] - cu_seqlens_k[b]"},
    {packed_unbounded, true, "they see every key of the batch up to their own position, those of the sequences "
                             "before theirs too: causal masking by packed position, without the sequence's start: "
                             "sequence b's queries see only its keys, tokens cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1"},
    {top_left, true, "causal aligned top-left (query i sees keys j <= i): with seqlen_q queries on seqlen_k keys "
                     "query i sees keys j <= seqlen_k - seqlen_q + i (aligned bottom-right: the chunk of new "
                     "queries comes after the cached keys)"},
    {no_mask, true, "they see every key of their sequence: the causal mask is missing"},
};

/* The row r (b, h, i) under hypothesis f: whether the kernel's row matches it. */
static bool matches(const Varlen &p, const got_row &g, int b, int h, int i, hypothesis f) {
    const reading rd = f(p, b, h, i);
    if (rd.q < 0 || rd.q >= p.total_q || rd.hk < 0 || rd.hk >= p.c.H_kv) return false;
    const int d = p.c.d, Hk = p.c.H_kv;
    const float *q = &p.Q[((size_t)rd.q * p.c.H + h) * d];
    return row_matches(g, q, rd.nk, [&](int j, int which) -> const float * {
        const long t = rd.key0 + j;
        if (t < 0 || t >= p.total_k) return NULL; /* the NaN guards */
        return &(which ? p.Vp : p.Kp)[((size_t)t * Hk + rd.hk) * d];
    });
}

/* The keys of sequence b, K/V head hk, as row_matches reads them (sequence by sequence, p.K and p.V). */
static key_rows slice_keys(const Varlen &p, int b, int hk) {
    const size_t kv = kv_slice(p, b, hk);
    return [&p, kv](int j, int w) -> const float * { return &(w ? p.V : p.K)[kv + (size_t)j * p.c.d]; };
}

/* The diagnosis lines of a failing packed case (joined by "\n      ", each "diagnosis: ..."):
 * which sequences, what their rows match, where to look. */
static std::string varlen_diagnosis(const Varlen &p, const graded_rows &g, const run_result &r, const tolerance tol[2]) {
    const shape_case &c = p.c;
    const size_t R = g.rows.size(), d = c.d;
    std::vector<double> O(R * d), L(R);
    std::vector<char> bad(R, 0);
    std::vector<long> nbad(c.B, 0), checked(c.B, 0);
    std::vector<size_t> wrong;
    for (size_t q = 0; q < R; ++q) {
        const int bh = g.rows[q].first, i = g.rows[q].second, b = bh / c.H;
        int po;
        bool b_ = false;
        const size_t ro = varlen_row(p, OUT_O, bh, i), rl = varlen_row(p, OUT_L, bh, i);
        for (size_t col = 0; col < d; ++col) {
            O[q * d + col] = decode_value(r.out[OUT_O].data(), ro * d + col, p.out[OUT_O].dt, &po);
            b_ |= grade_element(g.ref[OUT_O][q * d + col], O[q * d + col], po, tol[OUT_O]) != ELEM_OK;
        }
        L[q] = decode_value(r.out[OUT_L].data(), rl, DTYPE_FP32, &po);
        b_ |= grade_element(g.ref[OUT_L][q], L[q], po, tol[OUT_L]) != ELEM_OK;
        bad[q] = b_;
        ++checked[b];
        nbad[b] += b_;
        if (b_ && finite_row({&O[q * d], L[q], c.d, tol[OUT_O], tol[OUT_L], 0.0})) wrong.push_back(q);
    }
    std::vector<std::string> lines;
    char buf[1200];
    if (std::count(nbad.begin(), nbad.end(), 0L) == (long)c.B) return "";
    const int nseq = describe_sequences(buf, sizeof buf, nbad.data(), checked.data(), c.B);
    std::string seqs = buf;
    if (nseq == 1)
        for (int b = 0; b < c.B; ++b)
            if (nbad[b]) {
                char more[400];
                snprintf(more, sizeof more, ": check its offsets, cu_seqlens_q[%d] = %d and cu_seqlens_k[%d] = %d (its "
                         "%d queries are tokens %d..%d of Q and O, its %d keys tokens %d..%d of K and V)%s%s", b,
                         p.cu_q[b], b, p.cu_k[b], len_q(p, b), p.cu_q[b], p.cu_q[b + 1] - 1, len_k(p, b), p.cu_k[b],
                         p.cu_k[b + 1] - 1, b == c.B - 1 ? "; it is the last sequence" : "",
                         len_k(p, b) == c.N_kv && c.B > 1 ? "; it is the longest" : "");
                seqs += more;
            }
    lines.push_back(seqs);
    /* hypotheses, on up to 32 of the finite wrong rows (a row of NaN matches any reading that meets
     * a NaN) spread over them */
    const size_t step = std::max<size_t>(1, wrong.size() / 32);
    int n = 0;
    std::vector<int> fit(sizeof HYPOTHESES / sizeof HYPOTHESES[0], 0);
    std::vector<int> head_fit(c.H, -1);
    int n_head = 0, head_mod = 0;
    for (size_t k = 0; k < wrong.size(); k += step) {
        const size_t q = wrong[k];
        const int b = g.rows[q].first / c.H, h = g.rows[q].first % c.H, i = g.rows[q].second;
        const got_row gr = {&O[q * d], L[q], c.d, tol[OUT_O], tol[OUT_L], (double)p.args.scale};
        ++n;
        for (size_t hy = 0; hy < fit.size(); ++hy)
            if (!HYPOTHESES[hy].causal_only || c.causal) fit[hy] += matches(p, gr, b, h, i, HYPOTHESES[hy].f);
        for (int h2 = 0; h2 < c.H_kv && c.H_kv > 1; ++h2) { /* another K/V head: right but for hk */
            if (h2 == h / p.G) continue;
            if (row_matches(gr, q_row(p, b, h, i), visible(p, b, i), slice_keys(p, b, h2))) {
                ++n_head;
                head_fit[h] = h2;
                head_mod += h2 == h % c.H_kv;
                break;
            }
        }
    }
    auto fits = [n](int k) { return k > 0 && 10 * k >= 9 * n; };
    /* how many of the same wrong rows a reading f(b, h, i, the row as the kernel wrote it) matches */
    auto sampled = [&](auto f) {
        int k = 0;
        for (size_t s = 0; s < wrong.size(); s += step) {
            const size_t q = wrong[s];
            const got_row gr = {&O[q * d], L[q], c.d, tol[OUT_O], tol[OUT_L], (double)p.args.scale};
            k += f(g.rows[q].first / c.H, g.rows[q].first % c.H, g.rows[q].second, gr);
        }
        return k;
    };
    bool named = false;
    for (size_t hy = 0; hy < fit.size() && !named; ++hy)
        if (fits(fit[hy])) {
            lines.push_back(std::string("the wrong rows match this reading: ") + HYPOTHESES[hy].what);
            named = true;
        }
    if (!named && c.causal) { /* their last keys missing: a row matches its first K keys, K a multiple of 16 */
        const int n_cut = sampled([&](int b, int h, int i, const got_row &gr) {
            const key_rows keys = slice_keys(p, b, h / p.G);
            for (int cut = (visible(p, b, i) - 1) / 16 * 16; cut >= 16; cut -= 16)
                if (row_matches(gr, q_row(p, b, h, i), cut, keys)) return true;
            return false;
        });
        if (fits(n_cut)) {
            lines.push_back("the wrong rows match this reading: their last visible keys are missing, each row is "
                            "attention over its first K keys, K a multiple of 16 below the seqlen_k - seqlen_q + i + 1 "
                            "it sees: a causal tile's K/V tiles end too early (the last key a tile needs is at its "
                            "last row plus seqlen_k - seqlen_q, the diagonal's shift)");
            named = true;
        }
    }
    if (!named && c.B > 1) { /* O rows of sequence b that the tile of sequence b - 1 running past its end wrote */
        const int n_over = sampled([&](int b, int h, int i, got_row gr) {
            gr.tolL = {INFINITY, 0}; /* O only: L may have been written right */
            /* an earlier sequence e whose tile of up to 256 rows reaches this row: the row as e's row i0 */
            for (int e = b - 1; e >= 0 && p.cu_q[b] + i - p.cu_q[e] < 256; --e) {
                const int i0 = p.cu_q[b] + i - p.cu_q[e];
                const int nk = c.causal ? std::min(len_k(p, e), len_k(p, e) - len_q(p, e) + i0 + 1) : len_k(p, e);
                if (nk > 0 && row_matches(gr, q_row(p, b, h, i), nk, slice_keys(p, e, h / p.G))) return true;
            }
            return false;
        });
        if (fits(n_over)) {
            lines.push_back("the wrong rows match this reading: their O rows are what an earlier sequence computes for "
                            "rows past its own end (its query tile continued into this sequence's tokens, against its "
                            "keys): that sequence's last tile stored whole rows past its end (a TMA store box, or stores "
                            "without a row < seqlen_q test), over this sequence's first rows");
            named = true;
        }
    }
    if (!named && fits(n_head)) {
        std::string pairs;
        for (int h = 0, k = 0; h < c.H && k < 6; ++h)
            if (head_fit[h] >= 0) pairs += (k++ ? ", " : "") + std::to_string(h) + " reads " + std::to_string(head_fit[h]);
        snprintf(buf, sizeof buf, "the wrong rows are what another K/V head gives (query head %s%s): query head h reads "
                 "K/V head h / (H / H_kv) = h / %d; in the packed K and V the K/V head of token t is at "
                 "(t * H_kv + h_kv) * d", pairs.c_str(), head_mod == n_head ? ", which is h % H_kv" : "", p.G);
        lines.push_back(buf);
    }
    snprintf(buf, sizeof buf, "in the packed batch sequence b's queries are tokens cu_seqlens_q[b] .. cu_seqlens_q[b + 1] "
             "- 1 of Q and O ([total_q = %d, H, d]), its keys tokens cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1 of K "
             "and V ([total_k = %d, H_kv, d]), L is [H, total_q]%s", p.total_q, p.total_k,
             c.causal ? "; causal query i of sequence b sees keys j <= seqlen_k - seqlen_q + i of its own" : "");
    lines.push_back(buf);
    std::string s;
    for (const std::string &l : lines) s += (s.empty() ? "" : "\n      ") + std::string("diagnosis: ") + l;
    return s;
}

/* "wrote outside O: ..." for a packed output: O [total_q, H, d], L [H, total_q]. */
static std::string outside_text(const Varlen &p) {
    std::string s;
    char buf[600];
    for (int k = 0; k < p.n_out; ++k) {
        const guard_hits &h = p.out[k].hit;
        if (h.after > 0) {
            snprintf(buf, sizeof buf, "wrote outside %s: %ld element(s) after its end (%ld..%ld elements past it): %s",
                     p.out[k].name, h.after, h.after_first, h.after_last,
                     k == OUT_O ? "a query token at or past total_q = cu_seqlens_q[B]: the last sequence's rows end at "
                                  "token cu_seqlens_q[B] - 1 (O is [total_q, H, d])"
                                : "L is [H, total_q]: head h's row of the last sequence ends at h * total_q + "
                                  "cu_seqlens_q[B] - 1");
            s += (s.empty() ? "" : "\n      ") + std::string(buf);
        }
        if (h.before > 0) {
            snprintf(buf, sizeof buf, "wrote outside %s: %ld element(s) before its start (%ld..%ld elements before it): "
                     "a negative token index, an offset subtracted where it should be added", p.out[k].name, h.before,
                     h.before_nearest, h.before_farthest);
            s += (s.empty() ? "" : "\n      ") + std::string(buf);
        }
    }
    return s;
}

verdict varlen_grade(problem_core &pc, const run_result &r, uint64_t seed) {
    const Varlen &p = vl(pc);
    const graded_rows g = reference(p, seed);
    tolerance tol[2];
    const double eO = plain_error(g, OUT_O), eL = plain_error(g, OUT_L);
    tol[OUT_O] = tolerance_from_plain(&TOL_RULE_OUTPUT, p.dt, eO, 1.0);
    tol[OUT_L] = tolerance_from_plain(&TOL_RULE_LSE, p.dt, eL, 1.0);
    char tol_desc[200];
    if (p.dt == DTYPE_FP32)
        snprintf(tol_desc, sizeof tol_desc, "|err| <= 1e-5 + 3 x %.2g (plain fp32 reference's max error) + 1e-4*|ref|", eO);
    else
        snprintf(tol_desc, sizeof tol_desc, "|err| <= 2 x %.2g (%s reference's max error) + %.0e", eO, dtype_name(p.dt),
                 tolerance_abs_term(&TOL_RULE_OUTPUT, p.dt));
    grade_report rep[2];
    for (int k = 0; k < 2; ++k) {
        grader *gr = check_output(p, k, g, r.out[k], tol[k]);
        grader_finish(gr, &rep[k]);
        grader_free(gr);
    }
    const std::string outside = outside_text(p);
    verdict v = {rep[OUT_O].bad == 0 && rep[OUT_L].bad == 0 && outside.empty(), ""};
    char buf[2400];
    if (v.pass) {
        snprintf(buf, sizeof buf, "max err O %.2g, L %.2g (%s)", rep[OUT_O].max_abs, rep[OUT_L].max_abs, tol_desc);
        v.detail = buf;
        return v;
    }
    std::string why;
    if (!outside.empty()) why += "diagnosis: " + outside + "\n      ";
    if (rep[OUT_O].bad) {
        char err[160];
        snprintf(buf, sizeof buf, "O: %ld of %ld checked elements bad (%.2f%%), %s, max rel err %.3g; %s\n"
                 "      diagnosis: %s\n      ", rep[OUT_O].bad, rep[OUT_O].checked, 100.0 * rep[OUT_O].bad / rep[OUT_O].checked,
                 grade_max_abs_text(&rep[OUT_O], err, sizeof err), rep[OUT_O].max_rel, tol_desc, rep[OUT_O].summary);
        why += buf;
    }
    if (rep[OUT_L].bad) {
        char err[160];
        snprintf(buf, sizeof buf, "L (logsumexp): %ld of %ld bad, %s\n      diagnosis: %s\n      ",
                 rep[OUT_L].bad, rep[OUT_L].checked, grade_max_abs_text(&rep[OUT_L], err, sizeof err), rep[OUT_L].summary);
        why += buf;
    }
    if (outside.empty()) why += varlen_diagnosis(p, g, r, tol) + "\n";
    print_fail_block(p, false, why, rep);
    return v;
}

/* ---- the checks that take more runs ---- */

/* Elements of output k where runs a and b differ (bitwise) in query rows [0, upto[b]) of each
 * sequence b, counted per sequence into per_seq. */
static long differences(const Varlen &p, int k, const run_result &a, const run_result &b, const std::vector<int> &upto,
                        std::vector<long> &per_seq) {
    const int es = dtype_size(p.out[k].dt), w = p.out[k].width;
    long n = 0;
    for (int bh = 0; bh < p.c.B * p.c.H; ++bh) {
        const int s = bh / p.c.H;
        for (int i = 0; i < std::min(upto[s], len_q(p, s)); ++i) {
            const size_t at = varlen_row(p, k, bh, i) * w * es;
            if (memcmp(&a.out[k][at], &b.out[k][at], (size_t)w * es)) { ++n; ++per_seq[s]; }
        }
    }
    return n;
}

static std::string sequence_list(const std::vector<long> &per_seq) {
    std::string s;
    int k = 0;
    for (size_t b = 0; b < per_seq.size(); ++b)
        if (per_seq[b] && k++ < 8) s += (s.empty() ? "" : ", ") + std::to_string(b);
    return k > 8 ? s + ", ..." : s;
}
/* "sequence 2" or "sequences 0, 2": the sequences with a nonzero count. */
static std::string sequences_named(const std::vector<long> &per_seq) {
    const long n = (long)std::count_if(per_seq.begin(), per_seq.end(), [](long v) { return v != 0; });
    return (n == 1 ? "sequence " : "sequences ") + sequence_list(per_seq);
}

bool varlen_more_checks(problem_core &pc, verdict &, const run_result &r1, uint64_t seed, const options &o) {
    Varlen &p = vl(pc);
    const shape_case &c = p.c;
    const std::vector<int> all(c.B, c.N);
    bool ok = true;
    run_result r2;
    /* a second launch on the same input gives the same bits */
    run_once(p, o.timeout_s, r2);
    std::vector<long> per(c.B, 0);
    const long nd = differences(p, OUT_O, r1, r2, all, per) + differences(p, OUT_L, r1, r2, all, per);
    if (nd) {
        printf("    FAIL  %-6s %s%s: race suspected: two launches on the same input differ in %ld rows (sequences %s)\n",
               c.name, dtype_name(p.dt), c.causal ? " causal" : "", nd, sequence_list(per).c_str());
        ok = false;
    }
    /* the sequences are apart: new keys in every odd sequence change no row of an even one */
    if (c.B >= 2) {
        const std::vector<float> K0 = p.K, V0 = p.V;
        std::vector<int> from(c.B, 0);
        for (int b = 0; b < c.B; b += 2) from[b] = len_k(p, b); /* even sequences keep theirs */
        draw_keys(p, p.K, rng_mix(seed, 40), from);
        draw_keys(p, p.V, rng_mix(seed, 41), from);
        upload_kv(p, 1);
        upload_kv(p, 2);
        run_once(p, o.timeout_s, r2);
        std::vector<int> upto(c.B, 0);
        for (int b = 0; b < c.B; b += 2) upto[b] = c.N;
        std::fill(per.begin(), per.end(), 0);
        const long leaks = differences(p, OUT_O, r1, r2, upto, per) + differences(p, OUT_L, r1, r2, upto, per);
        if (leaks) {
            std::vector<long> odd(c.B, 0);
            for (int b = 1; b < c.B; b += 2) odd[b] = 1;
            printf("    FAIL  %-6s %s%s: the sequences leak into each other: new keys in %s changed %ld rows of %s "
                   "(sequence b's queries see only its own keys, tokens cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1)\n",
                   c.name, dtype_name(p.dt), c.causal ? " causal" : "", sequences_named(odd).c_str(), leaks,
                   sequences_named(per).c_str());
            ok = false;
        }
        p.K = K0;
        p.V = V0;
        upload_kv(p, 1);
        upload_kv(p, 2);
    }
    if (!c.causal || !ok) return ok;
    /* causal: the future must not leak. Three split points per sequence, largest first: query
     * rows < pos of sequence b see keys < seqlen_k - seqlen_q + pos only, which stay; the keys
     * from there on are drawn anew, and rows < pos must not change (bitwise). */
    for (int k = 0; k < 3; ++k) {
        std::vector<int> pos(c.B), from(c.B);
        bool any = false;
        for (int b = 0; b < c.B; ++b) {
            const int n = len_q(p, b);
            pos[b] = k == 0 ? n - 1 : k == 1 ? std::min(n - 1, n / 2 + 1) : std::min(n - 1, 1);
            pos[b] = std::max(pos[b], 0);
            from[b] = len_k(p, b) - n + pos[b];
            any |= pos[b] > 0;
        }
        if (!any) break;
        draw_keys(p, p.K, rng_mix(seed, 4 + 2 * k), from);
        draw_keys(p, p.V, rng_mix(seed, 5 + 2 * k), from);
        upload_kv(p, 1);
        upload_kv(p, 2);
        run_once(p, o.timeout_s, r2);
        std::fill(per.begin(), per.end(), 0);
        const long leaks = differences(p, OUT_O, r1, r2, pos, per) + differences(p, OUT_L, r1, r2, pos, per);
        if (!leaks) continue;
        printf("    FAIL  %-6s %s causal: future keys influence the output: new keys from position seqlen_k - seqlen_q + "
               "pos of each sequence on changed %ld of its query rows < pos (sequences %s; query i sees keys "
               "j <= seqlen_k - seqlen_q + i of its own sequence)\n", c.name, dtype_name(p.dt), leaks,
               sequence_list(per).c_str());
        return false;
    }
    return true;
}

/* ---- timing ---- */

double varlen_flops(const problem_core &pc) {
    const shape_case &c = pc.c;
    double keys = 0;
    for (int b = 0; b < c.B; ++b) {
        const double q = c.seqlens_q[b], k = c.seqlens_k[b];
        keys += q * k - (c.causal ? q * q / 2 : 0);
    }
    return 4.0 * keys * c.H * c.d;
}

double varlen_kv_bytes(const problem_core &pc) {
    const shape_case &c = pc.c;
    double keys = 0;
    for (int b = 0; b < c.B; ++b) keys += c.seqlens_k[b];
    return 2.0 * keys * c.H_kv * c.d * dtype_size(pc.dt);
}
