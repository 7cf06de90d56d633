/* Lesson 12 (flash decoding) without a GPU: the math of merging splits, the float64
 * reference over a visible prefix, the decode command line, and the split plan of
 * DECODE_SRC (the solution by default; its "config" and "plan" regions, plain C, extracted
 * into build/unit/12/fd_plan.h by make test-unit-12, from lesson 12's descriptor). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cpu_reference.h"
#include "fd_plan.h"

/* The merge of lesson 12 (and of lesson 01's online softmax, on logsumexps): partials
 * (O_s, L_s) of S splits of one row -> O, L. With `use_max` = 0 it sums exp(L_s) directly,
 * the bug of tests/mutants/12/combine-without-max.mut. In float, like the kernel. */
static void merge(const float *Ls, const float *Os, int S, int d, int use_max, float *L, float *O) {
    float M = -INFINITY, sum = 0.f;
    if (use_max)
        for (int s = 0; s < S; ++s) M = fmaxf(M, Ls[s]);
    for (int s = 0; s < S; ++s) sum += use_max ? (Ls[s] == -INFINITY ? 0.f : expf(Ls[s] - M)) : expf(Ls[s]);
    *L = use_max ? (M == -INFINITY ? -INFINITY : M + logf(sum)) : logf(sum);
    for (int c = 0; c < d; ++c) O[c] = 0.f;
    for (int s = 0; s < S; ++s) {
        const float w = *L == -INFINITY ? 0.f : expf(Ls[s] - *L);
        for (int c = 0; c < d; ++c) O[c] += w * Os[s * d + c];
    }
}

/* One row q against nk keys, split at the given bounds: each split's partial from the
 * float64 reference over its own keys, merged, compared with the reference over all keys. */
static void check_split_row(int nk, int d, float qscale, const int *bounds, int S, int use_max, double *errO,
                            double *errL, int *finite) {
    float *q = malloc(sizeof(float) * d), *K = malloc(sizeof(float) * nk * d), *V = malloc(sizeof(float) * nk * d);
    srand(7);
    for (int c = 0; c < d; ++c) q[c] = qscale * ((float)rand() / RAND_MAX * 2 - 1) * 1.7f;
    for (int k = 0; k < nk * d; ++k) {
        K[k] = ((float)rand() / RAND_MAX * 2 - 1) * 1.7f;
        V[k] = ((float)rand() / RAND_MAX * 2 - 1) * 1.7f;
    }
    const double scale = 1.0 / sqrt((double)d);
    double *ref = malloc(sizeof(double) * d), refL, *tmp = malloc(sizeof(double) * d), tmpL;
    attention_prefix_f64(q, K, V, nk, d, scale, ref, &refL);
    float *Os = malloc(sizeof(float) * S * d), *Ls = malloc(sizeof(float) * S), *O = malloc(sizeof(float) * d), L;
    for (int s = 0; s < S; ++s) { /* split s: keys [bounds[s], bounds[s + 1]) */
        attention_prefix_f64(q, K + (size_t)bounds[s] * d, V + (size_t)bounds[s] * d, bounds[s + 1] - bounds[s], d,
                             scale, tmp, &tmpL);
        for (int c = 0; c < d; ++c) Os[s * d + c] = (float)tmp[c];
        Ls[s] = (float)tmpL;
    }
    merge(Ls, Os, S, d, use_max, &L, O);
    *finite = isfinite(L);
    *errL = fabs(L - refL);
    *errO = 0;
    for (int c = 0; c < d; ++c) {
        *finite &= isfinite(O[c]);
        if (fabs(O[c] - ref[c]) > *errO) *errO = fabs(O[c] - ref[c]);
    }
    free(q); free(K); free(V); free(ref); free(tmp); free(Os); free(Ls); free(O);
}

Test(decode, merged_splits_equal_the_whole_row) {
    const int bounds[] = {0, 64, 128, 192, 200};
    double eO, eL;
    int fin;
    check_split_row(200, 64, 1.f, bounds, 4, 1, &eO, &eL, &fin);
    cr_assert(fin);
    cr_assert(eO < 1e-5 && eL < 1e-5, "O err %g, L err %g", eO, eL);
}

Test(decode, merge_needs_the_max_with_large_logits) {
    const int bounds[] = {0, 100, 300};
    double eO, eL;
    int fin;
    check_split_row(300, 128, 45.f, bounds, 2, 1, &eO, &eL, &fin); /* logits up to ~120: exp overflows fp32 */
    cr_assert(fin, "with the max the merge stays finite");
    cr_assert(eO < 1e-5 && eL < 1e-4, "O err %g, L err %g", eO, eL);
    check_split_row(300, 128, 45.f, bounds, 2, 0, &eO, &eL, &fin);
    cr_assert(!fin, "sum_s exp(L_s) without the max must overflow here (else this test shows nothing)");
}

Test(decode, a_split_that_sees_no_key_has_no_weight) {
    /* causal rows can have a split whose keys are all in their future: L_s = -inf, O_s = 0 */
    float Ls[3] = {1.5f, -INFINITY, 0.25f}, Os[3 * 2] = {1, 2, 99, 99, -1, 4}, L, O[2];
    merge(Ls, Os, 3, 2, 1, &L, O);
    const double w0 = exp(1.5) / (exp(1.5) + exp(0.25)), w2 = 1 - w0;
    cr_assert_float_eq(L, log(exp(1.5) + exp(0.25)), 1e-6);
    cr_assert_float_eq(O[0], w0 * 1 + w2 * -1, 1e-6);
    cr_assert_float_eq(O[1], w0 * 2 + w2 * 4, 1e-6);
    float Lm[2] = {-INFINITY, -INFINITY}, Om[4] = {0, 0, 0, 0};
    merge(Lm, Om, 2, 2, 1, &L, O);
    cr_assert(L == -INFINITY && O[0] == 0.f && O[1] == 0.f, "no visible key at all: O = 0, L = -inf");
}

Test(decode, prefix_reference_and_the_row_wrappers_agree) {
    float Q[6] = {0.3f, -1, 2, 0.5f, 0.25f, -0.75f}, K[6] = {1, 2, -1, 0.5f, 3, 1}, V[6] = {1, 0, 0, 1, 2, -2};
    double a[2], b[2], La, Lb;
    attention_row_f64(Q, K, V, 3, 2, 1, 0.7, 1, a, &La); /* causal row 1 sees keys 0, 1 */
    attention_prefix_f64(Q + 2, K, V, 2, 2, 0.7, b, &Lb);
    cr_assert(a[0] == b[0] && a[1] == b[1] && La == Lb);
    attention_prefix_f64(Q, K, V, 0, 2, 0.7, b, &Lb);
    cr_assert(b[0] == 0 && b[1] == 0 && Lb == -INFINITY, "a row that sees no key: O = 0, L = -inf");
    cr_assert(attention_prefix_max_f64(Q, K, 0, 2, 0.7) == -INFINITY);
}

static int parse_resolve(options *o, char *err, int decode, int argc, const char **args) {
    char *argv[16] = {"lesson12"};
    for (int k = 0; k < argc; ++k) argv[k + 1] = (char *)args[k];
    int rc = parse_options(argc + 1, argv, o, err, 512);
    return rc ? rc : resolve_shape(o, decode, err, 512);
}

Test(decode, command_line_defaults_and_refusals) {
    options o;
    char err[512];
    cr_assert_eq(parse_resolve(&o, err, 1, 0, NULL), 0);
    cr_assert(o.B == DECODE_BENCH_B && o.H == DECODE_BENCH_H && o.H_kv == DECODE_BENCH_HKV && o.N == DECODE_BENCH_N &&
              o.N_kv == DECODE_BENCH_NKV && o.d == DECODE_BENCH_D && !o.shape_given);
    const char *a1[] = {"-H", "12"};
    cr_assert_eq(parse_resolve(&o, err, 1, 2, a1), 0);
    cr_assert(o.H == 12 && o.H_kv == 12, "-H alone: H_kv = H (%d)", o.H_kv);
    const char *a2[] = {"-n", "77"};
    cr_assert_eq(parse_resolve(&o, err, 1, 2, a2), 0);
    cr_assert(o.N == 77 && o.N_kv == 77, "-n alone: N_kv = N");
    const char *a3[] = {"-H", "8", "--kv-heads", "3"};
    cr_assert_eq(parse_resolve(&o, err, 1, 4, a3), 2);
    cr_assert(strstr(err, "--kv-heads 3 does not divide --heads 8") != NULL, "%s", err);
    const char *a4[] = {"--kv-heads", "5"}; /* the default H = 32 */
    cr_assert_eq(parse_resolve(&o, err, 1, 2, a4), 2);
    const char *a5[] = {"-n", "16", "--kv-seq", "8", "--causal"};
    cr_assert_eq(parse_resolve(&o, err, 1, 5, a5), 2);
    cr_assert(strstr(err, "--kv-seq must be") != NULL || strstr(err, "give --kv-seq >= 16") != NULL, "%s", err);
    const char *a6[] = {"-n", "16", "--kv-seq", "16", "--causal", "--ragged"};
    cr_assert_eq(parse_resolve(&o, err, 1, 6, a6), 0);
    cr_assert(o.ragged && o.shape_given);
    const char *a7[] = {"--kv-seq", "0"};
    cr_assert_eq(parse_resolve(&o, err, 1, 2, a7), 2);
    cr_assert(strstr(err, "--kv-seq '0' is not valid: expected an integer in 1..1048576") != NULL, "%s", err);
    const char *a8[] = {"--kv-heads", "-2"};
    cr_assert_eq(parse_resolve(&o, err, 1, 2, a8), 2);
    const char *a9[] = {"--fuzz", "5", "--ragged"};
    cr_assert_eq(parse_resolve(&o, err, 1, 3, a9), 2);
    /* an ordinary lesson: N_kv = N, H_kv = H, whatever it was given (its runner refuses the
     * decode options before, naming lesson 12) */
    const char *a10[] = {"-n", "5", "-H", "3"};
    cr_assert_eq(parse_resolve(&o, err, 0, 4, a10), 0);
    cr_assert(o.N_kv == 5 && o.H_kv == 3 && !o.ragged);
    cr_assert(o.given & GIVEN_N && !(o.given & GIVEN_DECODE));
}

/* The solution's split plan: every key in exactly one split, no empty split, whatever the
 * slot count; the rule's choices on an H100 (132 SMs: the host passes one slot per SM) and,
 * for the lesson's comparison with the first rule, over every resident block (264). */
Test(decode, split_plan) {
    for (long long slots = 132; slots <= 264; slots += 132)
        for (int nkv = 1; nkv <= 140000; nkv = nkv * 3 + 7)
            for (int units = 1; units <= 600; units *= 5)
                for (int R = 1; R <= 130; R *= 4) {
                    FdPlan p = fd_make_plan(units, 1, R, nkv, 64, slots, 0);
                    cr_assert(p.S >= 1 && p.S <= FD_MAX_SPLITS);
                    cr_assert(p.chunk % 64 == 0 && p.chunk > 0);
                    cr_assert((long long)p.S * p.chunk >= nkv, "keys past the last split (N_kv %d S %d chunk %d)",
                              nkv, p.S, p.chunk);
                    cr_assert((long long)(p.S - 1) * p.chunk < nkv, "an empty split (N_kv %d S %d chunk %d)",
                              nkv, p.S, p.chunk);
                    cr_assert(p.RB >= 16 && p.n_rc * p.RB >= R);
                }
    const long long slots = 264;
    /* 8 groups of one query row, 128k keys: about one wave of 264 blocks */
    FdPlan a = fd_make_plan(1, 8, 1, 131072, 64, slots, 0);
    cr_assert(a.blocks >= 0.9 * slots && a.blocks <= slots, "%lld blocks", a.blocks);
    /* 512 groups: already ~2 waves, no split */
    FdPlan b = fd_make_plan(64, 8, 4, 16384, 64, slots, 0);
    cr_assert_eq(b.S, 1);
    /* a short sequence is not cut below 2 tiles */
    FdPlan c = fd_make_plan(1, 1, 1, 300, 64, slots, 0);
    cr_assert(c.chunk >= 128);
    /* forced (-DFD_SPLITS): that many, at most one split per tile */
    FdPlan f = fd_make_plan(2, 4, 4, 1000, 64, slots, 1);
    cr_assert(f.S == 1 && f.chunk >= 1000);
    FdPlan g = fd_make_plan(2, 4, 4, 1000, 64, slots, 1000);
    cr_assert(g.S == 16 && g.chunk == 64, "at most one split per tile: S %d chunk %d", g.S, g.chunk);
    /* over every resident block (264, the lesson's first rule): 8 groups, 4096 keys (64
     * tiles): the rule's 29 splits round to 22 (3 tiles each, 176 blocks); 30 at 128k keys */
    cr_assert_eq(fd_make_plan(1, 8, 1, 4096, 64, slots, 0).S, 22);
    cr_assert_eq(fd_make_plan(1, 8, 1, 32768, 64, slots, 0).S, 29);
    cr_assert_eq(fd_make_plan(1, 8, 1, 131072, 64, slots, 0).S, 30);
    /* what the solution's host passes: one slot per SM (132). 8 groups: 15 splits by the
     * rule (120 blocks), 13 once rounded to whole tiles at 4096 keys (5 tiles each, 104
     * blocks); 32 groups: 4 (128 blocks); 128 groups (B = 16): no split */
    cr_assert_eq(fd_make_plan(1, 8, 1, 4096, 64, 132, 0).S, 13);
    cr_assert_eq(fd_make_plan(1, 8, 1, 32768, 64, 132, 0).S, 15);
    cr_assert_eq(fd_make_plan(4, 8, 4, 4096, 64, 132, 0).S, 4);
    cr_assert_eq(fd_make_plan(16, 8, 4, 4096, 64, 132, 0).S, 1);
}
