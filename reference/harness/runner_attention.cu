/* runner_attention.cu: the forward and the decode kinds of the runner (runner_main.h): how a
 * lesson's attention_forward is set up, graded and timed. Per case: fresh seeded inputs,
 * poisoned outputs, guarded inputs, the float64 reference on a sample of rows, a determinism
 * re-run, and for causal cases a future-key test; then the bench shape is timed.
 *
 * Lessons that declare LESSON_DECODE (lesson 12) are the decode kind (attention.h): N queries
 * per sequence against N_kv keys, H_kv K/V heads shared by groups of H / H_kv query heads,
 * per-sequence KV lengths (seqlens_kv; key rows past a sequence's length hold NaN), and causal
 * queries aligned to the end of the cache. Their timing reports the bandwidth at which K and V
 * were read next to this GPU's device-to-device copy, measured in the same run.
 *
 * Lessons that declare LESSON_PAGED_KV also get decode shapes whose K and V lie in a paged KV
 * cache (attention.h, block_table; --paged): the same K and V are drawn, then scattered into a
 * pool of pages in an order drawn from the case seed (a sequence's neighbouring pages are not
 * neighbours in the pool), with spare pages, and the rows past each sequence's length in its
 * last page, NaN; the table is checked (attn_check_paged) before the lesson sees it, and the
 * float64 reference reads the contiguous K and V. A failure names the sequences and what their
 * rows match (runner_serving.cu). A paged lesson that also defines attention_append_kv
 * (attention_serving.h) has its append graded in every graded paged case: the pools go up without
 * each sequence's last n_new keys (NaN there), the launch is the append then the decode, and the
 * pools are checked against what they should hold after it (runner_serving.cu names a row written
 * wrong by sequence, key and page). Lessons that declare LESSON_VARLEN also get packed batches,
 * problems of their own (runner_varlen.cu), which the kinds below hand those cases to.
 *
 * Lessons that declare DTYPE_E4M3 (lesson 14) get FP8 inputs in that dtype (attention.h, attn_fp8;
 * fp8.h): Q, K, V drawn in float (the outlier case: 0.1% of them x10; the peaked case: every
 * query's scores peaked at key 0), Q and K rotated by the Hadamard matrix with --hadamard,
 * quantized per block of FP8_BLOCK_ROWS rows (or per tensor with --quant tensor); the kernel gets
 * the codes and the descale factors and writes O in bf16. The grade is against the float64
 * attention of the dequantized inputs, within twice the error of a plain FP8 attention
 * (cpu_reference.h); the pass line also reports the RMSE of O against the float64 attention of the
 * unquantized inputs: what FP8 costs. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <algorithm>
#include <string>
#include <vector>
#include "buffers.h"
#include "cuda_check.h"
#include "gpu_env.h"
#include "runner_common.h"
#include "runner_grade.h"
#include "runner_main.h"
#include "runner_serving.h"
extern "C" {
#include "cli.h"
#include "cpu_reference.h"
#include "diagnose.h"
#include "fp8.h"
#include "grade.h"
#include "rng.h"
}

/* Defined by a paged lesson that appends a step's keys to its cache (attention_serving.h): weak, so
 * that every other lesson links without it. */
extern "C" int attention_append_kv(const attn_append_args *a) __attribute__((weak));

/* ---- the problem: inputs, outputs, arguments ---- */

enum { OUT_O, OUT_L }; /* the outputs, in problem_core's out[] */

struct Problem : problem_core {
    size_t n;   /* B*H*N*d: Q and O */
    size_t nkv; /* B*H_kv*N_kv*d: K and V */
    bool host;  /* the host keeps the inputs (graded); false: filled on the device, timing only */
    std::vector<float> Q, K, V; /* the exact values stored on the device (NaN past a sequence's end) */
    std::vector<int> seqlens;   /* [B] keys of sequence b: N_kv, or drawn when ragged */
    guarded_buf in[3];          /* Q, K, V between NaN guards */
    guarded_buf lens;           /* seqlens on the device (ragged cases only) */
    /* FP8 inputs (dt == DTYPE_E4M3): Q, K, V above are the dequantized values the kernel sees;
     * raw holds the draws before quantization (and before the Hadamard rotation), codes what is
     * uploaded, descale the factors per tensor or per block (attn_fp8), on the device in scales. */
    std::vector<float> raw[3];
    std::vector<uint8_t> codes[3];
    std::vector<float> descale[3];
    guarded_buf scales[3];
    /* A paged KV cache (c.page_size > 0): in[1], in[2] hold the K and V pools [num_pages,
     * page_size, H_kv, d] and pool[0], pool[1] their values as uploaded (K, V scattered through
     * the page map; NaN where no key is); the block table [B, max_pages] on the device in table. */
    page_map pages;
    std::vector<float> pool[2];
    guarded_buf table;
    size_t npool; /* elements of each pool */
    /* The append (a graded paged case of a lesson that defines attention_append_kv; n_new 0
     * otherwise): the last n_new keys of every sequence are NaN in the pools as uploaded and come
     * from knew[0], knew[1] ([B, n_new, H_kv, d]), which the lesson's append writes into the pools
     * before every run; pool[] holds what the pools must hold after it. */
    int n_new;
    guarded_buf knew[2];
    attn_append_args app;
    attn_args args;
};
static const int N_BUFFERS = 5; /* guarded arrays per problem, for the memory count (+1 when ragged or paged, +3 FP8) */

static Problem &fwd(problem_core &p) { return static_cast<Problem &>(p); }
static const Problem &fwd(const problem_core &p) { return static_cast<const Problem &>(p); }

static int esize(dtype_t t) { return dtype_size(t); }
/* The element type of O: the dtype's, bf16 for FP8 inputs. */
static dtype_t out_dtype(dtype_t t) { return t == DTYPE_E4M3 ? DTYPE_BF16 : t; }

static std::vector<float> &input(Problem &p, int which) { return which == 0 ? p.Q : which == 1 ? p.K : p.V; }

/* FP8 input `which` (0 Q, 1 K, 2 V) from its raw draw: rotated along d when the case asks for
 * it (Q and K only: Q K^T is unchanged), quantized (fresh scales, or the ones the kernel already
 * has, for rows redrawn by the causal test), and the dequantized values into Q, K or V. */
static void quantize_input(Problem &p, int which, bool fresh) {
    const shape_case &c = p.c;
    const int S = which ? c.B * c.H_kv : c.B * c.H, N = which ? c.N_kv : c.N;
    const int rows = c.fp8_tensor ? 0 : FP8_BLOCK_ROWS;
    std::vector<float> X = p.raw[which];
    if (c.hadamard && which < 2) fp8_hadamard_rows(X.data(), (size_t)S * N, c.d);
    if (fresh) p.descale[which].assign(fp8_scale_count(S, N, rows), 0.f);
    p.codes[which].resize(X.size());
    fp8_quantize(X.data(), S, N, c.d, rows, fresh, p.descale[which].data(), p.codes[which].data(),
                 input(p, which).data());
}

/* The append's inputs for K (which 1) or V (2): fresh = the last n_new keys of every sequence,
 * [B, n_new, H_kv, d] (token t of sequence b is its key len_b - n_new + t), taken from the
 * contiguous draw; and those rows set to NaN in pool, the pool as uploaded before the append. */
static void append_split(const Problem &p, int which, std::vector<float> &pool, std::vector<float> &fresh) {
    const shape_case &c = p.c;
    const std::vector<float> &X = which == 1 ? p.K : p.V;
    fresh.assign((size_t)c.B * p.n_new * c.H_kv * c.d, 0.f);
    for (int b = 0; b < c.B; ++b)
        for (int t = 0; t < p.n_new; ++t)
            for (int h = 0; h < c.H_kv; ++h) {
                const int j = p.seqlens[b] - p.n_new + t;
                const float *src = &X[(((size_t)b * c.H_kv + h) * c.N_kv + j) * c.d];
                std::copy(src, src + c.d, &fresh[(((size_t)b * p.n_new + t) * c.H_kv + h) * c.d]);
                std::fill_n(&pool[page_map_offset(&p.pages, b, j, h, c.H_kv, c.d)], c.d, NAN);
            }
}

static void upload(Problem &p, int which) {
    if (p.dt == DTYPE_E4M3) {
        guarded_upload(&p.in[which], p.codes[which].data());
        guarded_upload(&p.scales[which], p.descale[which].data());
        return;
    }
    if (which > 0 && is_paged(p.c)) { /* K, V: their pools */
        std::vector<float> &pool = p.pool[which - 1];
        pool.resize(p.npool);
        page_map_scatter(&p.pages, input(p, which).data(), p.seqlens.data(), p.c.H_kv, p.c.N_kv, p.c.d, pool.data());
        std::vector<char> buf(p.npool * esize(p.dt));
        if (p.n_new) { /* the step's new keys: NaN in the pool, in knew for the lesson's append */
            std::vector<float> before = pool, fresh;
            append_split(p, which, before, fresh);
            encode_values(before.data(), buf.data(), p.npool, p.dt);
            std::vector<char> nb(fresh.size() * esize(p.dt));
            encode_values(fresh.data(), nb.data(), fresh.size(), p.dt);
            guarded_upload(&p.knew[which - 1], nb.data());
        } else {
            encode_values(pool.data(), buf.data(), p.npool, p.dt);
        }
        guarded_upload(&p.in[which], buf.data());
        return;
    }
    const std::vector<float> &X = input(p, which);
    std::vector<char> buf(X.size() * esize(p.dt));
    encode_values(X.data(), buf.data(), X.size(), p.dt);
    guarded_upload(&p.in[which], buf.data());
}

/* The keys query row i of sequence b sees (attention.h): all seqlens[b], or with causal the
 * prefix j <= seqlens[b] - N + i (aligned to the end; N + i for an ordinary shape's i + 1). */
static int visible_keys(const Problem &p, int b, int i) {
    const int len = p.seqlens[b];
    return p.c.causal ? len - p.c.N + i + 1 : len;
}

/* Sequence lengths [B]: N_kv each, or with ragged drawn in [lo, N_kv] (lo = N with causal: every
 * query sees a key), the first sequence the longest and the last the shortest when there are two. */
static std::vector<int> draw_seqlens(const shape_case &c, uint64_t seed) {
    std::vector<int> len(c.B, c.N_kv);
    if (!c.ragged) return len;
    rng_t r;
    rng_seed(&r, rng_mix(seed, 9));
    const int lo = c.causal ? c.N : 1;
    for (int b = 0; b < c.B; ++b) len[b] = lo + (int)(rng_next(&r) % (uint64_t)(c.N_kv - lo + 1));
    if (c.B >= 2) { len[0] = c.N_kv; len[c.B - 1] = lo; }
    return len;
}

/* Q, K, V drawn on the host, kept for grading and uploaded; key rows past a sequence's end hold
 * NaN: a kernel that reads them fails. */
static void fill_inputs_on_host(Problem &p, uint64_t seed) {
    const shape_case &c = p.c;
    p.Q.assign(p.n, 0.f); p.K.assign(p.nkv, 0.f); p.V.assign(p.nkv, 0.f);
    const dtype_t drawn = p.dt == DTYPE_E4M3 ? DTYPE_FP32 : p.dt; /* FP8: quantized below */
    random_slices(p.Q, c.B * c.H, c.N, c.d, 0, c.N, c.qscale, drawn, rng_mix(seed, 1));
    random_slices(p.K, c.B * c.H_kv, c.N_kv, c.d, 0, c.N_kv, 1.f, drawn, rng_mix(seed, 2));
    random_slices(p.V, c.B * c.H_kv, c.N_kv, c.d, 0, c.N_kv, 1.f, drawn, rng_mix(seed, 3));
    if (c.peaked) {
        for (int bh = 0; bh < c.B * c.H; ++bh)
            fp8_peak_at_key0(&p.Q[(size_t)bh * c.N * c.d], c.N, NULL, NULL, 0, c.d, FP8_PEAK_GAP);
        for (int bh = 0; bh < c.B * c.H_kv; ++bh) {
            const size_t at = (size_t)bh * c.N_kv * c.d;
            fp8_peak_at_key0(NULL, 0, &p.K[at], &p.V[at], c.N_kv, c.d, FP8_PEAK_GAP);
        }
        for (int k = 0; k < 3; ++k)
            for (float &x : input(p, k)) x = round_value(x, drawn);
    }
    if (c.outliers)
        for (int k = 0; k < 3; ++k) {
            std::vector<float> &X = input(p, k);
            fp8_add_outliers(X.data(), X.size(), rng_mix(seed, 20 + k));
            for (float &x : X) x = round_value(x, drawn);
        }
    for (int b = 0; b < c.B; ++b)
        for (int h = 0; h < c.H_kv; ++h)
            for (size_t e = (size_t)p.seqlens[b] * c.d; e < (size_t)c.N_kv * c.d; ++e) {
                const size_t at = ((size_t)b * c.H_kv + h) * c.N_kv * c.d + e;
                p.K[at] = p.V[at] = NAN;
            }
    if (p.dt == DTYPE_E4M3)
        for (int k = 0; k < 3; ++k) {
            p.raw[k] = input(p, k);
            quantize_input(p, k, true);
        }
    for (int k = 0; k < 3; ++k) upload(p, k);
}

/* Q, K, V drawn on the device (timing a decode lesson: its KV cache can be tens of GiB), with
 * the same NaN rows past each sequence's end. */
static void fill_inputs_on_device(Problem &p, uint64_t seed) {
    const shape_case &c = p.c;
    const int es = esize(p.dt);
    if (is_paged(c)) { /* the pools: NaN where no key is (spare pages, rows past a length in a last page) */
        device_fill_random(p.in[0].data, p.n, p.dt, rng_mix(seed, 1), c.qscale, 0);
        const page_map &m = p.pages;
        const size_t row = (size_t)c.H_kv * c.d; /* elements of one key row of a page */
        for (int k = 1; k < 3; ++k) {
            char *pool = (char *)p.in[k].data;
            device_fill_random(pool, p.npool, p.dt, rng_mix(seed, 1 + k), 1.f, 0);
            for (int b = 0; b < c.B; ++b) {
                const int len = p.seqlens[b], last = (len - 1) / m.page_size, end = (last + 1) * m.page_size;
                if (len < end)
                    fill_pattern(pool + page_map_offset(&m, b, len, 0, c.H_kv, c.d) * es, (size_t)(end - len) * row, es,
                                 nan_of(es), 0);
            }
            std::vector<char> used(m.num_pages, 0);
            for (int b = 0; b < c.B; ++b)
                for (int pg = 0; pg <= (p.seqlens[b] - 1) / m.page_size; ++pg)
                    used[m.table[(size_t)b * m.max_pages + pg]] = 1;
            for (int pg = 0; pg < m.num_pages; ++pg)
                if (!used[pg])
                    fill_pattern(pool + (size_t)pg * m.page_size * row * es, m.page_size * row, es, nan_of(es), 0);
        }
        CUDA_CHECK(cudaDeviceSynchronize());
        return;
    }
    device_fill_random(p.in[0].data, p.n, p.dt, rng_mix(seed, 1), c.qscale, 0);
    device_fill_random(p.in[1].data, p.nkv, p.dt, rng_mix(seed, 2), 1.f, 0);
    device_fill_random(p.in[2].data, p.nkv, p.dt, rng_mix(seed, 3), 1.f, 0);
    for (int b = 0; b < c.B; ++b)
        for (int h = 0; h < c.H_kv && p.seqlens[b] < c.N_kv; ++h)
            for (int k = 1; k < 3; ++k)
                fill_pattern((char *)p.in[k].data + (((size_t)b * c.H_kv + h) * c.N_kv + p.seqlens[b]) * c.d * es,
                             (size_t)(c.N_kv - p.seqlens[b]) * c.d, es, nan_of(es), 0);
    CUDA_CHECK(cudaDeviceSynchronize());
}

/* The lesson's launch: the append first when the case grades it (both on the problem's stream). */
static int launch(problem_core *pc) {
    Problem &p = fwd(*pc);
    if (p.n_new) {
        const int rc = attention_append_kv(&p.app);
        if (rc != ATTN_OK) return rc;
    }
    return attention_forward(&p.args);
}

/* A problem of shape c0 (normalized here) in dtype dt, inputs from seed: on the host when
 * host (graded), else on the device (timing only). Exits EXIT_OOM, with what did not fit,
 * before anything is allocated when the shape is beyond the GPU's or the host's memory. */
static Problem *problem_new(const shape_case &c0, dtype_t dt, uint64_t seed, bool host) {
    Problem *pp = new Problem();
    Problem &p = *pp;
    const shape_case c = normalized(c0);
    p.c = c;
    p.dt = dt;
    p.host = host;
    p.n = (size_t)c.B * c.H * c.N * c.d;
    p.nkv = (size_t)c.B * c.H_kv * c.N_kv * c.d;
    const bool fp8 = dt == DTYPE_E4M3, paged = is_paged(c);
    const int oes = esize(out_dtype(dt));
    p.guarded_arrays = N_BUFFERS + (c.ragged ? 1 : 0) + (paged ? 1 : 0) + (fp8 ? 3 : 0);
    p.launch = launch;
    p.kernels = "the lesson's kernel";
    p.seqlens = draw_seqlens(c, seed);
    p.npool = 0;
    if (paged) { /* the page map, checked as the lesson will get it */
        if (fp8) {
            fprintf(stderr, "%s: FP8 inputs (e4m3) in a paged KV cache are not something the harness builds: give "
                    "--dtype fp16, bf16 or fp32 with --paged\n", runner_prog);
            exit(EXIT_USAGE);
        }
        if (page_map_make(&p.pages, p.seqlens.data(), c.B, c.N_kv, c.page_size, rng_mix(seed, 31))) {
            fprintf(stderr, "out of memory: %s: the block table of a pool of pages of %d keys does not fit\n",
                    shape_text(c).c_str(), c.page_size);
            exit(EXIT_OOM);
        }
        char err[600];
        if (attn_check_paged(p.pages.table, c.ragged ? p.seqlens.data() : NULL, c.B, c.N_kv, c.page_size,
                             p.pages.max_pages, p.pages.num_pages, err, sizeof err)) {
            fprintf(stderr, "%s: the lesson is not called with this block table: %s\n", runner_prog, err);
            exit(EXIT_USAGE);
        }
        p.npool = (size_t)p.pages.num_pages * c.page_size * c.H_kv * c.d;
    }
    /* the append: graded paged cases of a lesson that defines it, the last min(N, shortest length)
     * keys of every sequence (a step's N new tokens, or as many as every sequence has) */
    p.n_new = paged && host && attention_append_kv ? std::min(c.N, *std::min_element(p.seqlens.begin(), p.seqlens.end()))
                                                   : 0;
    const size_t nnew = (size_t)c.B * p.n_new * c.H_kv * c.d;
    p.guarded_arrays += p.n_new ? 2 : 0;
    const size_t nkv_dev = paged ? p.npool : p.nkv; /* elements of each of K and V on the device */
    /* device: Q, K, V, O, L and their guards (and seqlens_kv, block_table); host: Q, K, V in fp32
     * (and the K, V pools), an upload buffer and two copies of O, or only the two copies when the
     * device fills the inputs. Checked first: the fp32 host copies would otherwise fail first,
     * with an uncaught bad_alloc. */
    require_memory(c, dt,
                   (p.n + 2 * nkv_dev) * esize(dt) + p.n * oes + sizeof(float) * (size_t)c.B * c.H * c.N +
                       N_BUFFERS * 2 * GUARD_BYTES + (c.ragged ? 2 * GUARD_BYTES + 4 * (size_t)c.B : 0) +
                       (paged ? 2 * GUARD_BYTES + 4 * (size_t)c.B * p.pages.max_pages : 0) +
                       (fp8 ? 3 * 2 * GUARD_BYTES + sizeof(float) * (p.n + 2 * p.nkv) / FP8_BLOCK_ROWS : 0) +
                       (p.n_new ? 2 * (2 * GUARD_BYTES + nnew * esize(dt)) : 0),
                   host ? (p.n + 2 * p.nkv + 2 * p.npool) * sizeof(float) * (fp8 ? 2 : 1) +
                              std::max(p.n, nkv_dev) * esize(dt) + 2 * p.n * oes
                        : 2 * p.n * oes,
                   "Q, K, V, O and L");
    for (int k = 0; k < 3; ++k)
        guarded_alloc_or_exit(&p.in[k], k ? nkv_dev : p.n, esize(dt), nan_of(esize(dt)), c, dt,
                              k ? (paged ? "each of the K, V pools" : "each of K, V") : "Q");
    for (int k = 0; k < 3; ++k) {
        p.scales[k].raw = NULL;
        p.scales[k].data = NULL;
        if (fp8) /* NaN guards: a descale read past either end makes NaN */
            guarded_alloc_or_exit(&p.scales[k], fp8_scale_count(k ? c.B * c.H_kv : c.B * c.H, k ? c.N_kv : c.N,
                                                                c.fp8_tensor ? 0 : FP8_BLOCK_ROWS),
                                  4, NAN32, c, dt, "the descale factors");
    }
    for (int w = 0; w < 2; ++w) {
        p.knew[w].raw = NULL;
        p.knew[w].data = NULL;
        if (p.n_new)
            guarded_alloc_or_exit(&p.knew[w], nnew, esize(dt), nan_of(esize(dt)), c, dt, "the new keys and values");
    }
    if (host) fill_inputs_on_host(p, seed);
    else fill_inputs_on_device(p, seed);
    add_output(p, "O", out_dtype(dt), c.d);
    add_output(p, "L", DTYPE_FP32, 1);
    p.lens.raw = NULL;
    p.lens.data = NULL;
    if (c.ragged) {
        guarded_alloc_or_exit(&p.lens, c.B, 4, POISON32, c, dt, "seqlens_kv");
        guarded_upload(&p.lens, p.seqlens.data());
    }
    p.table.raw = NULL;
    p.table.data = NULL;
    if (paged) { /* poison guards: an entry read past either end is a negative page */
        guarded_alloc_or_exit(&p.table, (size_t)c.B * p.pages.max_pages, 4, POISON32, c, dt, "block_table");
        guarded_upload(&p.table, p.pages.table);
    }
    CUDA_CHECK(cudaStreamCreate(&p.stream));
    attn_args &a = p.args;
    a.B = c.B; a.H = c.H; a.N = c.N; a.d = c.d; a.causal = c.causal;
    a.scale = 1.0f / sqrtf((float)c.d);
    a.dtype = dt;
    a.Q = p.in[0].data; a.K = p.in[1].data; a.V = p.in[2].data;
    a.O = p.out[OUT_O].buf.data; a.L = (float *)p.out[OUT_L].buf.data; a.stream = p.stream;
    a.N_kv = c.N_kv; a.H_kv = c.H_kv; a.seqlens_kv = c.ragged ? (const int *)p.lens.data : NULL;
    if (paged) {
        a.block_table = (const int *)p.table.data;
        a.page_size = c.page_size;
        a.max_pages = p.pages.max_pages;
        a.num_pages = p.pages.num_pages;
    }
    if (p.n_new) {
        attn_append_args &w = p.app;
        w = attn_append_args();
        w.B = c.B; w.H_kv = c.H_kv; w.d = c.d; w.dtype = dt; w.n_new = p.n_new;
        w.K_new = p.knew[0].data; w.V_new = p.knew[1].data;
        w.K = p.in[1].data; w.V = p.in[2].data;
        w.block_table = a.block_table; w.page_size = a.page_size; w.max_pages = a.max_pages; w.num_pages = a.num_pages;
        w.seqlens_kv = a.seqlens_kv; w.N_kv = c.N_kv; w.stream = p.stream;
    }
    if (fp8) {
        a.fp8.q_rows = a.fp8.kv_rows = c.fp8_tensor ? 0 : FP8_BLOCK_ROWS;
        a.fp8.hadamard = c.hadamard;
        a.fp8.descale_q = (const float *)p.scales[0].data;
        a.fp8.descale_k = (const float *)p.scales[1].data;
        a.fp8.descale_v = (const float *)p.scales[2].data;
    }
    return pp;
}

/* The forward kind keeps its inputs on the host even when only timing; the decode kind draws a
 * timed shape's inputs on the device. A packed batch is runner_varlen.cu's problem. */
static problem_core *forward_alloc(const shape_case &c, dtype_t dt, uint64_t seed, bool graded) {
    return is_varlen(c) ? varlen_alloc(c, dt, seed, graded) : problem_new(c, dt, seed, true);
}
static problem_core *decode_alloc(const shape_case &c, dtype_t dt, uint64_t seed, bool graded) {
    return is_varlen(c) ? varlen_alloc(c, dt, seed, graded) : problem_new(c, dt, seed, graded);
}

static void release(problem_core *pc) {
    if (is_varlen(pc->c)) return varlen_release(pc);
    Problem &p = fwd(*pc);
    for (int k = 0; k < 3; ++k) guarded_free(&p.in[k]);
    for (int k = 0; k < 3; ++k) guarded_free(&p.scales[k]);
    free_outputs(p);
    guarded_free(&p.lens);
    guarded_free(&p.table);
    for (int w = 0; w < 2; ++w) guarded_free(&p.knew[w]);
    page_map_free(&p.pages);
    CUDA_CHECK(cudaStreamDestroy(p.stream));
    delete &p;
}

/* ---- the float64 reference and the tolerance ---- */

/* Which (bh, row) pairs get the float64 reference: all of them when cheap,
 * else every slice's first and last row plus random ones, within a budget of
 * about 3e8 multiply-adds so a case grades in about a second (a row costs N_kv d). */
static std::vector<std::pair<int, int>> pick_rows(const shape_case &c, rng_t *r) {
    long BH = (long)c.B * c.H, total = BH * c.N;
    long budget = std::max(64L, (long)(3e8 / ((double)c.N_kv * c.d)));
    std::vector<std::pair<int, int>> rows;
    if (total <= budget) {
        for (int bh = 0; bh < BH; ++bh)
            for (int i = 0; i < c.N; ++i) rows.push_back({bh, i});
        return rows;
    }
    std::vector<char> taken(total, 0);
    auto take = [&](int bh, int i) { if (!taken[(long)bh * c.N + i]) { taken[(long)bh * c.N + i] = 1; rows.push_back({bh, i}); } };
    if (2 * BH <= budget / 2)
        for (int bh = 0; bh < BH; ++bh) { take(bh, 0); take(bh, c.N - 1); }
    while ((long)rows.size() < budget) take((int)(rng_next(r) % BH), (int)(rng_next(r) % c.N));
    std::sort(rows.begin(), rows.end());
    return rows;
}

/* Where query row i of (b, h) = bh finds its inputs: its q, and the K/V slice of its group,
 * (b, h / (H / H_kv)) of [B, H_kv, N_kv, d]. */
static const float *q_row(const Problem &p, int bh, int i) { return &p.Q[((size_t)bh * p.c.N + i) * p.c.d]; }
static size_t kv_slice(const Problem &p, int bh) {
    const int b = bh / p.c.H, h = bh % p.c.H;
    return ((size_t)b * p.c.H_kv + h / (p.c.H / p.c.H_kv)) * p.c.N_kv * p.c.d;
}
static double row_max(const Problem &p, int bh, int i) {
    return attention_prefix_max_f64(q_row(p, bh, i), &p.K[kv_slice(p, bh)], visible_keys(p, bh / p.c.H, i), p.c.d,
                                    p.args.scale);
}

/* O and L of the picked rows in float64 (attention_prefix_f64) and as a plain same-precision
 * attention computes them (attention_prefix_lowp), over the keys each row sees. */
static graded_rows forward_reference(const Problem &p, uint64_t seed) {
    const shape_case &c = p.c;
    rng_t r;
    rng_seed(&r, seed ^ 0x5eed);
    return forward_rows(pick_rows(c, &r), c.d, p.args.scale, p.dt, [&p, &c](int bh, int i) {
        const size_t kv = kv_slice(p, bh);
        return attention_row{q_row(p, bh, i), &p.K[kv], &p.V[kv], visible_keys(p, bh / c.H, i)};
    });
}

/* The tolerances of O and L from the plain attention's error on these very inputs
 * (tolerance_from_plain), and the rule of O in words for the report. */
static void forward_tolerances(const Problem &p, const graded_rows &g, tolerance tol[2], char *desc, size_t cap) {
    const double eO = plain_error(g, OUT_O), eL = plain_error(g, OUT_L);
    tol[OUT_O] = tolerance_from_plain(&TOL_RULE_OUTPUT, p.dt, eO, 1.0);
    tol[OUT_L] = tolerance_from_plain(&TOL_RULE_LSE, p.dt, eL, 1.0);
    if (p.dt == DTYPE_FP32)
        snprintf(desc, cap, "|err| <= 1e-5 + 3 x %.2g (plain fp32 reference's max error) + 1e-4*|ref|", eO);
    else /* FlashAttention's test rule: at most 2x the error of a same-precision reference */
        snprintf(desc, cap, "|err| <= 2 x %.2g (%s reference's max error) + %.0e", eO,
                 p.dt == DTYPE_E4M3 ? "plain FP8" : dtype_name(p.dt), tolerance_abs_term(&TOL_RULE_OUTPUT, p.dt));
}

/* ---- the diagnosis when one of O and L is right ---- */

/* The graded rows (indices into g.rows) where output k of run r has an element out of tol. */
static std::vector<size_t> failing_rows(const Problem &p, const graded_rows &g, const run_result &r, int k,
                                        tolerance tol) {
    const int w = p.out[k].width;
    std::vector<size_t> bad;
    for (size_t q = 0; q < g.rows.size(); ++q) {
        const int bh = g.rows[q].first, i = g.rows[q].second;
        int po, fail = 0;
        for (int col = 0; col < w && !fail; ++col)
            fail = grade_element(g.ref[k][q * w + col],
                                 decode_value(r.out[k].data(), ((size_t)bh * p.c.N + i) * w + col, p.out[k].dt, &po),
                                 0, tol) != ELEM_OK;
        if (fail) bad.push_back(q);
    }
    return bad;
}

/* The diagnosis (diagnose.h) when output k (O or L) fails and the other passes: the passing one
 * pins down half the kernel, and how the failing one is off on its bad rows names the bug. */
static std::string diagnose_one_wrong(const Problem &p, const graded_rows &g, const run_result &r, int k,
                                      tolerance tol) {
    const shape_case &c = p.c;
    const size_t d = c.d;
    const std::vector<size_t> bad = failing_rows(p, g, r, k, tol);
    if (bad.empty()) return "";
    std::vector<double> m(bad.size());
#pragma omp parallel for schedule(dynamic, 8)
    for (long q = 0; q < (long)bad.size(); ++q) m[q] = row_max(p, g.rows[bad[q]].first, g.rows[bad[q]].second);
    char buf[1024];
    int po;
    if (k == OUT_L) {
        std::vector<l_row> lr;
        for (size_t q = 0; q < bad.size(); ++q) {
            const int bh = g.rows[bad[q]].first, i = g.rows[bad[q]].second;
            const double got = decode_value(r.out[OUT_L].data(), (size_t)bh * c.N + i, DTYPE_FP32, &po);
            lr.push_back({g.ref[OUT_L][bad[q]], got, m[q], (double)p.args.scale});
        }
        diagnose_L(lr.data(), (int)lr.size(), buf, sizeof buf);
    } else {
        std::vector<double> got(bad.size() * d);
        std::vector<o_row> orow;
        for (size_t q = 0; q < bad.size(); ++q) {
            const int bh = g.rows[bad[q]].first, i = g.rows[bad[q]].second;
            for (size_t col = 0; col < d; ++col)
                got[q * d + col] = decode_value(r.out[OUT_O].data(), ((size_t)bh * c.N + i) * d + col,
                                                p.out[OUT_O].dt, &po);
            orow.push_back({&g.ref[OUT_O][bad[q] * d], &got[q * d], c.d, exp(g.ref[OUT_L][bad[q]] - m[q])});
        }
        diagnose_O(orow.data(), (int)orow.size(), buf, sizeof buf);
    }
    return buf;
}

/* ---- grading one run ---- */

/* The lines of a failing case's FAIL block: writes outside the outputs, then per output its
 * count of bad elements and diagnosis (only[k]: diagnose_one_wrong's sentence, or ""), "passes"
 * for the right one when the other was diagnosed alone. */
static std::string forward_report(const std::string &outside, const grade_report rep[2], const std::string only[2],
                                  const char *tol_desc) {
    const grade_report &rO = rep[OUT_O], &rL = rep[OUT_L];
    const std::string &onlyO = only[OUT_O], &onlyL = only[OUT_L];
    std::string why;
    char buf[2400];
    if (!outside.empty()) why += "diagnosis: " + outside + "\n      ";
    char err[160];
    if (rO.bad) {
        snprintf(buf, sizeof buf, "O: %ld of %ld checked elements bad (%.2f%%), %s, max rel err %.3g; %s\n      diagnosis: %s%s%s\n      ",
                 rO.bad, rO.checked, 100.0 * rO.bad / rO.checked, grade_max_abs_text(&rO, err, sizeof err), rO.max_rel,
                 tol_desc, onlyO.c_str(),
                 onlyO.empty() || !rO.summary[0] ? "" : "; ", rO.summary);
        why += buf;
    } else if (!onlyL.empty()) {
        why += "O: passes\n      ";
    }
    if (rL.bad) {
        snprintf(buf, sizeof buf, "L (logsumexp): %ld of %ld bad, %s\n      diagnosis: %s%s%s\n      ",
                 rL.bad, rL.checked, grade_max_abs_text(&rL, err, sizeof err), onlyL.c_str(), onlyL.empty() || !rL.summary[0] ? "" : "; ",
                 rL.summary);
        why += buf;
    } else if (!onlyO.empty()) {
        why += "L (logsumexp): passes\n      ";
    }
    while (!why.empty() && why.back() == ' ') why.pop_back();
    return why;
}

/* What FP8 costs, for the pass line: the RMSE of run r's O, and of the plain FP8 attention's,
 * against the float64 attention of the unquantized (raw) inputs on the graded rows. */
static std::string fp8_cost(const Problem &p, const graded_rows &g, const run_result &r) {
    const shape_case &c = p.c;
    const size_t R = g.rows.size(), d = c.d;
    std::vector<double> ref(R * d);
#pragma omp parallel for schedule(dynamic, 8)
    for (long k = 0; k < (long)R; ++k) {
        const int bh = g.rows[k].first, i = g.rows[k].second;
        const size_t kv = kv_slice(p, bh);
        double L;
        attention_prefix_f64(&p.raw[0][((size_t)bh * c.N + i) * d], &p.raw[1][kv], &p.raw[2][kv],
                             visible_keys(p, bh / c.H, i), c.d, p.args.scale, &ref[k * d], &L);
    }
    double se = 0, se_plain = 0;
    int po;
    for (size_t k = 0; k < R; ++k)
        for (size_t col = 0; col < d; ++col) {
            const size_t at = ((size_t)g.rows[k].first * c.N + g.rows[k].second) * d + col;
            const double e = decode_value(r.out[OUT_O].data(), at, p.out[OUT_O].dt, &po) - ref[k * d + col];
            const double ep = g.plain[OUT_O][k * d + col] - ref[k * d + col];
            se += e * e;
            se_plain += ep * ep;
        }
    char buf[200];
    snprintf(buf, sizeof buf, "; vs unquantized inputs (%s%s): O rmse %.3g, plain FP8 %.3g",
             c.fp8_tensor ? "per-tensor scales" : "block scales", c.hadamard ? ", Hadamard" : "",
             sqrt(se / (R * d)), sqrt(se_plain / (R * d)));
    return buf;
}

/* The paged diagnosis (runner_serving.cu) of run r on the graded rows g: each row's O and L as
 * the kernel wrote them, and whether either is out of its tolerance. */
static std::string paged_text(const Problem &p, const graded_rows &g, const run_result &r, const tolerance tol[2]) {
    const shape_case &c = p.c;
    const size_t R = g.rows.size(), d = c.d;
    std::vector<double> O(R * d);
    graded_run run;
    run.rows = g.rows;
    run.bad.assign(R, 0);
    for (size_t q = 0; q < R; ++q) {
        const size_t row = (size_t)g.rows[q].first * c.N + g.rows[q].second;
        int po;
        bool bad = false;
        for (size_t col = 0; col < d; ++col) {
            O[q * d + col] = decode_value(r.out[OUT_O].data(), row * d + col, p.out[OUT_O].dt, &po);
            bad |= grade_element(g.ref[OUT_O][q * d + col], O[q * d + col], po, tol[OUT_O]) != ELEM_OK;
        }
        const double L = decode_value(r.out[OUT_L].data(), row, DTYPE_FP32, &po);
        bad |= grade_element(g.ref[OUT_L][q], L, po, tol[OUT_L]) != ELEM_OK;
        run.bad[q] = bad;
        run.got.push_back({&O[q * d], L, c.d, tol[OUT_O], tol[OUT_L], (double)p.args.scale});
    }
    const paged_case pc = {&c, &p.pages, p.Q.data(), {p.pool[0].data(), p.pool[1].data()}, p.seqlens.data(),
                           (double)p.args.scale};
    return paged_diagnosis(pc, run);
}

/* After a run of a case that grades the append: the pools as the device holds them against what
 * they must hold (pool[]), bit for bit (the append copies), and the writes outside them;
 * append_diagnosis's lines, "" when both are right. */
static std::string append_text(const Problem &p) {
    if (!p.n_new) return "";
    std::vector<char> want[2], got[2];
    append_case ac = {&p.c, &p.pages, p.seqlens.data(), p.n_new, p.dt, esize(p.dt), {}, {}, {}};
    for (int w = 0; w < 2; ++w) {
        want[w].resize(p.npool * ac.es);
        encode_values(p.pool[w].data(), want[w].data(), p.npool, p.dt);
        got[w].resize(want[w].size());
        CUDA_CHECK(cudaMemcpy(got[w].data(), p.in[1 + w].data, got[w].size(), cudaMemcpyDeviceToHost));
        ac.want[w] = &want[w];
        ac.got[w] = &got[w];
        ac.hit[w] = guarded_check(&p.in[1 + w]);
    }
    return append_diagnosis(ac);
}

/* Causal: the graded rows that see exactly one key (row 0 of an ordinary shape sees key 0 alone) are
 * NaN or Inf in O or L, and some row that sees more keys is finite: the diagonal itself is masked
 * (j < i where j <= i belongs), so those rows have no key at all. "" when the pattern is not there. */
static std::string single_key_rows_text(const Problem &p, const graded_rows &g, const run_result &r) {
    const shape_case &c = p.c;
    if (!c.causal) return "";
    int po, single = 0, single_bad = 0, wider_ok = 0;
    for (const auto &row : g.rows) {
        const int bh = row.first, i = row.second, nk = visible_keys(p, bh / c.H, i);
        if (nk < 1) continue;
        bool finite = isfinite(decode_value(r.out[OUT_L].data(), (size_t)bh * c.N + i, p.out[OUT_L].dt, &po));
        for (int col = 0; col < c.d && finite; ++col)
            finite = isfinite(decode_value(r.out[OUT_O].data(), ((size_t)bh * c.N + i) * c.d + col, p.out[OUT_O].dt, &po));
        if (nk == 1) ++single, single_bad += !finite;
        else wider_ok += finite;
    }
    if (!single || single_bad < single || !wider_ok) return "";
    char buf[400];
    snprintf(buf, sizeof buf, "causal: every graded row that sees a single key (%d, row 0 among them: key 0 alone) is "
             "NaN or Inf, and rows that see more keys are finite: is the diagonal masked? Key j is visible to query "
             "i iff j <= i, the key at j = i included; a row with no visible key gets m = -inf and NaN", single);
    return buf;
}

/* Grades O and L of run r on the picked rows (every other element must be written), and the
 * pools when the case grades the append, and prints the FAIL block when a bad element, a write
 * outside them or a wrong row of a pool shows. */
static verdict grade(problem_core &pc, const run_result &r, uint64_t seed) {
    if (is_varlen(pc.c)) return varlen_grade(pc, r, seed);
    const Problem &p = fwd(pc);
    const graded_rows g = forward_reference(p, seed);
    tolerance tol[2];
    char tol_desc[160];
    forward_tolerances(p, g, tol, tol_desc, sizeof tol_desc);
    grader *gr[2];
    grade_report rep[2];
    for (int k = 0; k < 2; ++k) {
        gr[k] = check_output(p, k, g, r.out[k], tol[k]);
        grader_finish(gr[k], &rep[k]);
    }
    /* One of O and L right and the other wrong (and no poison, no NaN): the right one pins
     * down half the kernel, and how the wrong one is off names the bug (diagnose.h). The
     * "every row is wrong: check m, l, ..." clause would point the wrong way then. Writes
     * outside the outputs come first: the bad rows are their echo, so they are said alone. */
    std::string only[2];
    const std::string outside = outside_writes(p);
    for (int k = 0; k < 2 && outside.empty(); ++k) {
        const grade_report &other = rep[1 - k];
        if (other.bad == 0 && rep[k].bad > 0 && rep[k].unwritten == 0 && rep[k].nonfinite == 0) {
            only[k] = diagnose_one_wrong(p, g, r, k, tol[k]);
            grader_finish_ex(gr[k], &rep[k], "");
        }
    }
    for (int k = 0; k < 2; ++k) grader_free(gr[k]);
    const std::string appended = append_text(p);
    verdict v = {rep[OUT_O].bad == 0 && rep[OUT_L].bad == 0 && outside.empty() && appended.empty(), ""};
    if (v.pass) {
        char buf[256];
        snprintf(buf, sizeof buf, "max err O %.2g, L %.2g (%s)", rep[OUT_O].max_abs, rep[OUT_L].max_abs, tol_desc);
        v.detail = buf;
        if (p.dt == DTYPE_E4M3) v.detail += fp8_cost(p, g, r);
        return v;
    }
    std::string why = forward_report(outside, rep, only, tol_desc);
    const std::string diagonal = single_key_rows_text(p, g, r);
    if (!diagonal.empty()) {
        if (!why.empty() && why.back() != '\n') why += "\n";
        why += "      " + diagonal + "\n";
    }
    /* FP8: a wrong descale looks like a wrong loop to the checks above; name the FP8 suspects */
    /* not when O is all 0 or L all -inf: something is not written yet, whatever the scales */
    if (p.dt == DTYPE_E4M3 && rep[OUT_O].bad && rep[OUT_O].zero < rep[OUT_O].bad &&
        !(rep[OUT_L].bad && rep[OUT_L].neginf == rep[OUT_L].bad)) {
        if (!why.empty() && why.back() != '\n') why += "\n";
        why += "      FP8: also check the descales: each key tile's score scale (the softmax scale times "
               "Q's descale times that tile's K descale), and O's units when V's descale changes from one key "
               "tile to the next (block scales; blocks that differ, as with --outliers, show it)\n";
    }
    if (!appended.empty()) { /* the decode read what the append left: the append is said first, alone */
        why = appended + "\n" + (why.empty() ? "" : "      " + why);
    } else if (is_paged(p.c) && outside.empty()) {
        if (!why.empty() && why.back() != '\n') why += "\n";
        why += "      " + paged_text(p, g, r, tol) + "\n";
    }
    print_fail_block(p, false, why, rep);
    return v;
}

/* ---- the checks that take more runs ---- */

/* A second launch on the same input must give the same bits. */
static bool rerun_check(Problem &p, const run_result &r1, const options &o) {
    const shape_case &c = p.c;
    run_result r2;
    run_once(p, o.timeout_s, r2);
    const tolerance exact = {0, 0};
    const long nd = count_differences(p, OUT_O, r1.out[OUT_O], r2.out[OUT_O], 0, c.N, false, exact, NULL) +
                    count_differences(p, OUT_L, r1.out[OUT_L], r2.out[OUT_L], 0, c.N, false, exact, NULL);
    if (!nd) return true;
    const bool outside = !outside_writes(p).empty();
    /* a block's own race, or state one launch leaves for the next: both make two launches differ */
    const char *kept = ". Or state the kernel keeps in global memory from one launch to the next (a counter or "
                       "flag it does not reset)";
    printf("    FAIL  %-6s %s%s%s: race suspected: two launches on the same input differ in %ld elements "
           "(%s%s)\n", c.name, dtype_name(p.dt), c.causal ? " causal" : "", ranks_text(c).c_str(), nd,
           outside ? "blocks that write outside their rows (above) race with the blocks that own those rows"
                   : c.ranks ? "a wait between the ranks' streams missing or on the wrong event? the fault mode "
                               "names most such races' rank and step; a longer delay (--ring-delay-us 20000) more"
                   : LESSON.needs_cc >= 90
                       ? "a wait on a full or empty mbarrier missing, or a wrong phase? racecheck cannot see "
                         "mbarrier ordering; `make emu-09 EMU09_SRC=<your file>` checks every shared access"
                       : "a missing __syncthreads()? `make sanitize-lessonN` runs racecheck",
           outside || c.ranks ? "" : kept);
    return false;
}

/* Causal: the future must not leak. Three split points q among the N query rows, largest
 * first (each one re-draws K and V from its point on, so the rows before it still see the
 * keys of the first run): the last row, the middle, and row 1 (row 0 may see its first key
 * only, which catches a diagonal tile left unmasked wherever the tiles start). Query i of
 * sequence b sees keys j <= len_b - N + i (len_b = N for an ordinary shape: j <= i), so the
 * keys from len_b - N + q on are re-drawn and rows < q must not change (bitwise). */
static bool causal_check(Problem &p, const run_result &r1, uint64_t seed, const options &o) {
    const shape_case &c = p.c;
    if (!c.causal || c.N < 2) return true;
    const int splits[3] = {c.N - 1, c.N / 2 + 1 < c.N ? c.N / 2 + 1 : c.N - 1, 1};
    const tolerance exact = {0, 0};
    run_result r2;
    for (int k = 0; k < 3; ++k) {
        const int pos = splits[k];
        if (k > 0 && pos >= splits[k - 1]) continue;
        std::vector<int> from(c.B);
        for (int b = 0; b < c.B; ++b) from[b] = p.seqlens[b] - c.N + pos;
        const bool fp8 = p.dt == DTYPE_E4M3; /* redraw the raw values, quantize with the kernel's scales */
        const dtype_t drawn = fp8 ? DTYPE_FP32 : p.dt;
        random_slice_rows(fp8 ? p.raw[1] : p.K, c.B * c.H_kv, c.N_kv, c.d, c.H_kv, from.data(), p.seqlens.data(),
                          1.f, drawn, rng_mix(seed, 4 + 2 * k));
        random_slice_rows(fp8 ? p.raw[2] : p.V, c.B * c.H_kv, c.N_kv, c.d, c.H_kv, from.data(), p.seqlens.data(),
                          1.f, drawn, rng_mix(seed, 5 + 2 * k));
        for (int w = 1; w < 3 && fp8; ++w) quantize_input(p, w, false);
        upload(p, 1);
        upload(p, 2);
        run_once(p, o.timeout_s, r2);
        const long leaks = count_differences(p, OUT_O, r1.out[OUT_O], r2.out[OUT_O], 0, pos, false, exact, NULL) +
                           count_differences(p, OUT_L, r1.out[OUT_L], r2.out[OUT_L], 0, pos, false, exact, NULL);
        if (!leaks) continue;
        if (!is_decode(c))
            printf("    FAIL  %-6s %s causal%s: future keys influence the output: changing K and V at "
                   "positions >= %d changed %ld elements of rows < %d\n", c.name, dtype_name(p.dt),
                   ranks_text(c).c_str(), pos, leaks, pos);
        else
            printf("    FAIL  %-6s %s causal: future keys influence the output: changing the last %d keys of "
                   "each sequence changed %ld elements of query rows < %d (query i sees keys j <= "
                   "seqlens_kv[b] - N + i)\n", c.name, dtype_name(p.dt), c.N - pos, leaks, pos);
        return false;
    }
    return true;
}

/* FP8 with block scales failed: grade the same raw inputs with one scale per tensor. When that
 * passes, the bug is in what changes from one key tile to the next (the descales), and saying so
 * saves the student from searching the loop. Prints one diagnosis line, or nothing. */
static void fp8_without_blocks(const shape_case &c, dtype_t dt, uint64_t seed, const options &o) {
    if ((double)c.B * c.H * c.N * c.d > (double)(1 << 26)) return;  // a second problem beside the first must fit
    shape_case tc = c;
    tc.fp8_tensor = 1;
    Problem *p = problem_new(tc, dt, seed, true);
    run_result r;
    bool pass = false;
    if (run_once(*p, o.timeout_s, r) == ATTN_OK) {
        const graded_rows g = forward_reference(*p, seed);
        tolerance tol[2];
        char desc[160];
        forward_tolerances(*p, g, tol, desc, sizeof desc);
        pass = outside_writes(*p).empty();
        for (int k = 0; k < 2; ++k) {
            grader *gr = check_output(*p, k, g, r.out[k], tol[k]);
            grade_report rep;
            grader_finish_ex(gr, &rep, "");
            grader_free(gr);
            if (rep.bad) pass = false;
        }
    }
    if (pass)
        printf("      diagnosis: the same inputs with one scale per tensor (--quant tensor) pass: the bug is in "
               "what changes from one key tile to the next: the tile's K descale in the score scale, O's units "
               "when V's descale changes (dv_old / dv_new) and the epilogue's last dv, or which scale block a "
               "tile's rows fall in\n");
    release(p);
}

static bool more_checks(problem_core &pc, verdict &v, const run_result &r1, uint64_t seed, const options &o) {
    if (is_varlen(pc.c)) return varlen_more_checks(pc, v, r1, seed, o);
    Problem &p = fwd(pc);
    const bool same = rerun_check(p, r1, o);
    const bool ok = causal_check(p, r1, seed, o) && same;
    if (!v.pass && p.dt == DTYPE_E4M3 && !p.c.fp8_tensor) fp8_without_blocks(p.c, p.dt, seed, o);
    return ok;
}

/* ---- timing ---- */

/* 4 B H N^2 d: S = Q K^T and O = P V, halved when causal. */
static double forward_flops(const problem_core &p) {
    if (is_varlen(p.c)) return varlen_flops(p);
    const shape_case &c = p.c;
    return 4.0 * c.B * c.H * (double)c.N * c.N * c.d * (c.causal ? 0.5 : 1.0);
}

/* Multiply-adds of S = Q K^T and O = P V over the visible keys, times 2 (FLOPs). */
static double decode_flops(const problem_core &pc) {
    if (is_varlen(pc.c)) return varlen_flops(pc);
    const Problem &p = fwd(pc);
    double keys = 0;
    for (int b = 0; b < p.c.B; ++b)
        for (int i = 0; i < p.c.N; ++i) keys += visible_keys(p, b, i);
    return 4.0 * keys * p.c.H * p.c.d;
}

/* Bytes of K and V a decode step reads: every key some query of the sequence sees (the last
 * query sees them all), once, for each K/V head: what a kernel that loads each K/V tile once
 * per group must move at least. */
static double kv_bytes(const problem_core &pc) {
    if (is_varlen(pc.c)) return varlen_kv_bytes(pc);
    const Problem &p = fwd(pc);
    double keys = 0;
    for (int b = 0; b < p.c.B; ++b) keys += visible_keys(p, b, p.c.N - 1);
    return 2.0 * keys * p.c.H_kv * p.c.d * esize(p.dt);
}

/* The roofline of a memory-bound kernel on this GPU, measured now: a device-to-device copy of
 * up to 1 GiB (a quarter of the free memory at most), timed like a lesson (time_launches:
 * warm-up, median, L2 flushed before each), as (bytes read + bytes written) / time in GB/s.
 * 0 when there is not room for a copy of at least 64 MiB. */
struct Copy { void *dst, *src; size_t bytes; cudaStream_t s; };
static int copy_once(void *arg) {
    Copy *c = (Copy *)arg;
    CUDA_CHECK(cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, c->s));
    return 0;
}
static double copy_gbps(const options &o, const gpu_env &g) {
    size_t free_b = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total));
    Copy c = {NULL, NULL, std::min<size_t>(1u << 30, free_b / 4) & ~(size_t)0xfffff, 0};
    if (c.bytes < (64u << 20)) return 0;
    CUDA_CHECK(cudaMalloc(&c.src, c.bytes));
    CUDA_CHECK(cudaMalloc(&c.dst, c.bytes));
    CUDA_CHECK(cudaStreamCreate(&c.s));
    CUDA_CHECK(cudaMemsetAsync(c.src, 1, c.bytes, c.s));
    const double ms = time_launches(copy_once, &c, c.s, 2, std::min(o.reps, 20), o.timeout_s, &g);
    CUDA_CHECK(cudaStreamDestroy(c.s));
    CUDA_CHECK(cudaFree(c.src));
    CUDA_CHECK(cudaFree(c.dst));
    return 2.0 * c.bytes / (ms * 1e-3) / 1e9;
}

static void forward_print_time(const run_timing &tm, const shape_case &bench, dtype_t dt, const options &,
                               const gpu_env &g) {
    const std::string shape = is_varlen(bench) ? shape_text(bench)
                                               : "B=" + std::to_string(bench.B) + " H=" + std::to_string(bench.H) +
                                                     " N=" + std::to_string(bench.N) + " d=" + std::to_string(bench.d);
    printf("Time: %s %s%s%s: %.3f ms, %.2f TFLOP/s, %.1f%% of %s peak %.0f TFLOP/s (%s); "
           "device memory %.1f MiB\n", dtype_name(dt), shape.c_str(),
           bench.causal ? " causal" : "", ranks_text(bench).c_str(), tm.ms, tm.tflops, tm.pct,
           dt == DTYPE_FP32 ? "fp32" : "tensor-core", gpu_peak(&g, dt), g.peak_source, tm.mem / 1048576.0);
}

static void decode_print_time(const run_timing &tm, const shape_case &bench, dtype_t dt, const options &o,
                              const gpu_env &g) {
    const double copy = copy_gbps(o, g);
    char roof[160] = "";
    if (copy > 0)
        snprintf(roof, sizeof roof, ", %.0f%% of this GPU's device-to-device copy (%.0f GB/s read + write, "
                 "measured now)", 100.0 * tm.gbps / copy, copy);
    printf("Time: %s %s%s: %.4f ms; K and V read at %.0f GB/s%s; %.2f TFLOP/s; device memory %.1f MiB\n",
           dtype_name(dt), shape_text(bench).c_str(), bench.causal ? " causal" : "", tm.ms, tm.gbps, roof, tm.tflops,
           tm.mem / 1048576.0);
}

/* ---- the two kinds ---- */

static const runner_kind FORWARD = {
    "attention_forward", NULL, "", false, NULL, NULL,
    forward_alloc, release, grade, more_checks,
    forward_flops, NULL, forward_print_time, true, false};

static const runner_kind DECODE = {
    "attention_forward", NULL, "", false, NULL, NULL,
    decode_alloc, release, grade, more_checks,
    decode_flops, kv_bytes, decode_print_time, false, true};

const runner_kind &lesson_runner_kind() { return decode_lesson() ? DECODE : FORWARD; }
