/* runner_softmax.c: main() of lesson 01 (CPU only, no CUDA).
 * Grades the student's online_softmax against float64 on rows chosen to break
 * the usual mistakes, then times it against the three-pass and naive two-pass
 * softmax. Same command line and exit statuses as the GPU lessons. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "attention.h"
#include "cli.h"
#include "cpu_reference.h"
#include "grade.h"
#include "rng.h"

typedef enum { ROW_NORMAL, ROW_HUGE, ROW_SOME_MASKED, ROW_ALL_MASKED, ROW_MASKED_PREFIX, ROW_RISING, ROW_FALLING, ROW_HAND } row_kind;
typedef struct { const char *name; row_kind kind; int n, block; } row_case;

static const row_case CASES[] = {
    {"hand-checkable 1..5", ROW_HAND, 5, 2},
    {"one element", ROW_NORMAL, 1, 4},
    {"random, n=1000, block 64 (ragged)", ROW_NORMAL, 1000, 64},
    {"huge values (x1000): exp overflows without max", ROW_HUGE, 777, 32},
    {"some -inf (masked) entries", ROW_SOME_MASKED, 300, 16},
    {"fully masked row (all -inf)", ROW_ALL_MASKED, 64, 16},
    {"masked prefix: the first blocks are all -inf", ROW_MASKED_PREFIX, 100, 16},
    {"rising values: the max grows every block", ROW_RISING, 513, 8},
    {"falling values: the max never moves", ROW_FALLING, 513, 8},
    {"block of 1", ROW_NORMAL, 100, 1},
    {"block larger than the row", ROW_HUGE, 100, 4096},
    {"long row, n=100000", ROW_NORMAL, 100000, 256},
};

static void make_row(float *x, const row_case *c, rng_t *r) {
    for (int k = 0; k < c->n; ++k) {
        double g = rng_normal(r);
        switch (c->kind) {
        case ROW_HAND: x[k] = (float)(k + 1); break;
        case ROW_NORMAL: x[k] = (float)g; break;
        case ROW_HUGE: x[k] = (float)(1000.0 * g); break;
        case ROW_SOME_MASKED: x[k] = rng_uniform(r) < 0.4 ? -INFINITY : (float)(10.0 * g); break;
        case ROW_ALL_MASKED: x[k] = -INFINITY; break;
        case ROW_MASKED_PREFIX: x[k] = k < 40 ? -INFINITY : (float)g; break;
        case ROW_RISING: x[k] = (float)(-80.0 + 160.0 * k / c->n + 0.1 * g); break;
        case ROW_FALLING: x[k] = (float)(80.0 - 160.0 * k / c->n + 0.1 * g); break;
        }
    }
}

static const uint32_t POISON = 0xFFADDEADu;
static float poison_value(void) { float f; memcpy(&f, &POISON, 4); return f; }
static int is_poison(float f) { uint32_t u; memcpy(&u, &f, 4); return u == POISON; }

/* Lesson 01's own reading of a failing row: the shared grader's summary speaks of GPU inputs,
 * shared memory and (b,h) slices, none of which this lesson has. NULL: the m and l lines say it. */
static const char *row_hint(const row_case *c, const grade_report *rep, int m_ok, int l_ok, float m, float l) {
    if (m == INFINITY)
        return "m is +inf, which no element of the row holds: the runner surrounds x with +inf, so a loop read "
               "past x[n - 1] (a block ends at end = min(start + block, n): TODO(1))";
    if (rep->bad && rep->unwritten == rep->bad)
        return "y not written (it still holds the poison the runner wrote before the call): TODO(4)'s final pass "
               "writes every y[k]";
    if (rep->nonfinite || !isfinite(l)) {
        switch (c->kind) {
        case ROW_ALL_MASKED:
            return "NaN in the row with no finite entry: TODO(4) gives it y = 0, m = -inf, l = 0 instead of the "
                   "ordinary path (exp(-inf - (-inf)) is NaN)";
        case ROW_MASKED_PREFIX:
            return "NaN after blocks that are all -inf: while m is still -inf, TODO(2) skips the block (exp(-inf - "
                   "(-inf)) is NaN, and a NaN in l stays there)";
        case ROW_HUGE:
            return "Inf or NaN on huge values: exp overflows unless the running max is subtracted first (TODO(3), "
                   "TODO(4))";
        default:
            return "NaN or Inf: subtract the running max before exp (TODO(3), TODO(4)); exp(-inf - (-inf)) is NaN";
        }
    }
    if (rep->bad && m_ok && l_ok) return "m and l are right, y is not: TODO(4)'s y[k] = exp(x[k] - m) / l";
    return NULL;
}

/* Returns 1 pass, 0 fail, -1 not implemented. */
static int grade_row(const row_case *c, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed);
    /* x lies between guards of +inf: a loop that reads past the row (a block max over
     * x[start, start + block) on the last, ragged block) picks one up. +inf, not NaN:
     * fmaxf skips NaN, so NaN guards would not show in m. */
    enum { XGUARD = 4096 };
    float *xg = malloc(sizeof(float) * ((size_t)c->n + 2 * XGUARD)), *x = xg + XGUARD;
    float *y = malloc(sizeof(float) * c->n);
    for (int k = 0; k < XGUARD; ++k) xg[k] = xg[XGUARD + c->n + k] = INFINITY;
    double *ref = malloc(sizeof(double) * c->n);
    make_row(x, c, &r);
    for (int k = 0; k < c->n; ++k) y[k] = poison_value();
    float m = poison_value(), l = poison_value();
    int rc = online_softmax(x, y, c->n, c->block, &m, &l);
    if (rc == ATTN_NOT_IMPLEMENTED) { free(xg); free(y); free(ref); return -1; }
    softmax_f64(x, ref, c->n);
    double mref = -INFINITY, lref = 0.0;
    for (int k = 0; k < c->n; ++k) if (x[k] > mref) mref = x[k];
    if (mref > -INFINITY)
        for (int k = 0; k < c->n; ++k) lref += exp((double)x[k] - mref);
    tolerance ty = {1e-9, 2e-4};
    grader *g = grader_new(1, 1, 1, c->n);
    for (int k = 0; k < c->n; ++k) grader_check(g, 0, 0, k, ref[k], y[k], is_poison(y[k]), ty);
    grade_report rep;
    grader_finish_ex(g, &rep, "");
    grader_free(g);
    int m_ok = (mref == -INFINITY) ? (m == -INFINITY) : ((double)m == mref);
    int l_ok = (mref == -INFINITY) ? (l == 0.0f) : (isfinite(l) && fabs(l - lref) <= 2e-4 * lref);
    int ok = rep.bad == 0 && m_ok && l_ok && rc == ATTN_OK;
    if (ok) {
        printf("  pass  %-50s max abs err %.2g\n", c->name, rep.max_abs);
    } else {
        printf("  FAIL  %-50s (n=%d, block=%d)\n", c->name, c->n, c->block);
        char err[160];
        if (rep.bad) printf("        y: %ld of %d elements bad, %s\n", rep.bad, c->n, grade_max_abs_text(&rep, err, sizeof err));
        for (int k = 0; k < rep.nfirst; ++k)
            printf("        y[%d]: expected %.9g, got %.9g (%s)\n", rep.first[k].col, rep.first[k].expected,
                   rep.first[k].got, elem_status_name(rep.first[k].status));
        if (!m_ok) printf("        m: expected %.9g (the row max), got %.9g\n", mref, m);
        if (!l_ok) printf("        l: expected %.9g (sum of exp(x - m)), got %.9g%s\n", lref, l,
                          m_ok && isfinite(l) && !rep.nonfinite
                              ? ": with m right, is l rescaled by exp(m_old - m_new) when m grows?" : "");
        const char *hint = row_hint(c, &rep, m_ok, l_ok, m, l);
        if (hint) printf("        hint: %s\n", hint);
    }
    free(xg); free(y); free(ref);
    return ok;
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*softmax_fn)(const float *, float *, int);
static int g_block = 256;
static void online_wrapper(const float *x, float *y, int n) { float m, l; online_softmax(x, y, n, g_block, &m, &l); }

static double time_fn(softmax_fn f, const float *x, float *y, int n, int reps) {
    double *t = malloc(sizeof(double) * reps);
    f(x, y, n); /* warm-up: page in y */
    for (int i = 0; i < reps; ++i) {
        double t0 = now_ms();
        f(x, y, n);
        t[i] = now_ms() - t0;
    }
    qsort(t, reps, sizeof(double), cmp_double);
    double med = t[reps / 2];
    free(t);
    return med;
}

int main(int argc, char **argv) {
    options o;
    char err[256] = "";
    const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    int pr = parse_options(argc, argv, &o, err, sizeof err);
    if (pr == 1) { print_usage(prog, 1); return 0; }
    if (pr == 2) { fprintf(stderr, "%s: %s\n", prog, err); return EXIT_USAGE; }
    if (o.shape_given || o.causal || o.dtype > 0 || o.ranks || o.transport || o.ring_delay_us >= 0 ||
        o.logit_scale != 1.0f || (o.given & GIVEN_FP8) || o.fuzz) {
        fprintf(stderr, "%s: lesson 01 runs on one softmax row on the CPU: --batch/--heads/--seq/--dim/"
                        "--causal/--dtype/--ranks/--transport/--ring-delay-us/--logit-scale/--quant/--hadamard/"
                        "--outliers/--fuzz do not apply (only --seed, --reps, --check-only, --bench-only, --csv)\n",
                prog);
        return EXIT_USAGE;
    }
    int ncases = (int)(sizeof CASES / sizeof CASES[0]), passed = 0, ragged_fail_only = 1, full_pass = 0;
    printf("Lesson 01: online softmax on the CPU\nseed %llu (rerun with --seed %llu)\n",
           (unsigned long long)o.seed, (unsigned long long)o.seed);
    if (!o.bench_only) {
        printf("Grading against float64 softmax (y, m and l):\n");
        for (int k = 0; k < ncases; ++k) {
            int r = grade_row(&CASES[k], rng_mix(o.seed, (uint64_t)k));
            if (r < 0) {
                printf("NOT IMPLEMENTED: online_softmax says it is not written yet.\n"
                       "  Open lessons/01-online-softmax/online_softmax.c and work through TODO(1), TODO(2), ...\n");
                if (o.csv) printf(CSV_HEADER "\n01-online-softmax,not-implemented,0,%d,fp32,1,1,0,0,0,,,,,,,,\n", ncases);
                return EXIT_NOT_IMPLEMENTED;
            }
            passed += r;
            /* ragged: the last block is shorter than `block` */
            int ragged = CASES[k].n % CASES[k].block != 0;
            ragged_fail_only &= r || ragged;
            full_pass |= r && !ragged;
        }
        printf("%d of %d cases passed\n", passed, ncases);
        if (passed < ncases - 1 && ragged_fail_only && full_pass)
            printf("diagnosis: only the cases whose last block is partial (n not a multiple of block) fail: "
                   "check the last, shorter block (end = min(start + block, n)): do its elements reach m and l?\n");
    }
    int n = 1 << 22;
    double ms_online = 0;
    if (!o.check_only) {
        float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
        rng_t r;
        rng_seed(&r, o.seed);
        for (int k = 0; k < n; ++k) x[k] = (float)rng_normal(&r);
        float m, l;
        if (online_softmax(x, y, n, g_block, &m, &l) == ATTN_NOT_IMPLEMENTED) {
            printf("NOT IMPLEMENTED: online_softmax says it is not written yet.\n");
            return EXIT_NOT_IMPLEMENTED;
        }
        int reps = o.reps < 5 ? 5 : (o.reps > 50 ? 50 : o.reps);
        double t3 = time_fn(softmax_three_pass, x, y, n, reps);
        double t2 = time_fn(softmax_naive_two_pass, x, y, n, reps);
        ms_online = time_fn(online_wrapper, x, y, n, reps);
        double mb = n * 4.0 / 1e6;
        printf("Time on one row of n=%d floats (median of %d, one CPU thread):\n", n, reps);
        printf("  three-pass safe softmax  (reads x 3x): %8.3f ms  %6.2f GB/s of x read+y written\n", t3, 2 * mb / t3);
        printf("  naive two-pass (unsafe)  (reads x 2x): %8.3f ms  %6.2f GB/s\n", t2, 2 * mb / t2);
        printf("  your online softmax      (reads x 2x): %8.3f ms  %6.2f GB/s\n", ms_online, 2 * mb / ms_online);
        free(x); free(y);
    }
    int ok = o.bench_only || passed == ncases;
    if (o.csv)
        printf(CSV_HEADER "\n01-online-softmax,%s,%d,%d,fp32,1,1,%d,0,0,%.4f,,,,,,,\n", ok ? "pass" : "fail", passed,
               o.bench_only ? 0 : ncases, n, ms_online);
    else if (!o.bench_only) printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? EXIT_PASS : EXIT_FAILED;
}
