/* diagnose_bwd.c: tolerance, hypotheses and diagnosis of a backward pass (diagnose_bwd.h). */
#include "diagnose_bwd.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LN2 0.69314718055994531
#define LOG2E 1.4426950408889634

const char *const BWD_NAME[3] = {"dQ", "dK", "dV"};

tolerance bwd_tolerance(dtype_t dtype, double e_plain, double max_ref, char *desc, size_t cap) {
    const double big = fmax(1.0, max_ref);
    const tolerance t = tolerance_from_plain(&TOL_RULE_OUTPUT, dtype, e_plain, big);
    if (!desc) return t;
    if (dtype == DTYPE_FP32)
        snprintf(desc, cap, "|err| <= 3 x %.2g (plain fp32 backward's max error) + 1e-5 x %.3g + 1e-4*|ref|", e_plain,
                 big);
    else
        snprintf(desc, cap, "|err| <= 2 x %.2g (plain %s backward's max error) + %.0e x %.3g", e_plain,
                 dtype == DTYPE_FP16 ? "fp16" : "bf16", tolerance_abs_term(&TOL_RULE_OUTPUT, dtype), big);
    return t;
}

static int visible(int i, int j, int causal) { return !causal || j <= i; }

/* L_i and D_i of every row of the slice, float64 (the forward's logsumexp and dO_i . O_i). */
static void forward_stats(const float *Q, const float *K, const float *V, const float *dO, int N, int d,
                          double scale, int causal, double *L, double *D) {
    double *s = malloc(sizeof(double) * (size_t)N), *o = malloc(sizeof(double) * (size_t)d);
    for (int i = 0; i < N; ++i) {
        double m = -INFINITY;
        for (int j = 0; j < N; ++j) {
            if (!visible(i, j, causal)) continue;
            double acc = 0;
            for (int c = 0; c < d; ++c) acc += (double)Q[(size_t)i * d + c] * K[(size_t)j * d + c];
            s[j] = acc * scale;
            if (s[j] > m) m = s[j];
        }
        double l = 0;
        for (int c = 0; c < d; ++c) o[c] = 0;
        for (int j = 0; j < N; ++j) {
            if (!visible(i, j, causal)) continue;
            const double p = exp(s[j] - m);
            l += p;
            for (int c = 0; c < d; ++c) o[c] += p * V[(size_t)j * d + c];
        }
        L[i] = m + log(l);
        double Di = 0;
        for (int c = 0; c < d; ++c) Di += (double)dO[(size_t)i * d + c] * (o[c] / l);
        D[i] = Di;
    }
    free(s);
    free(o);
}

/* attention_backward_slice_variant, where also the pairs (i, j) with skip_q[i] && skip_k[j] add
 * nothing (skip_q, skip_k: N flags each, or NULL for none). */
static void backward_variant(const float *Q, const float *K, const float *V, const float *dO, int N, int d,
                             double scale, int causal, bwd_variant v, const unsigned char *skip_q,
                             const unsigned char *skip_k, double *dQ, double *dK, double *dV) {
    double *L = malloc(sizeof(double) * (size_t)N), *D = malloc(sizeof(double) * (size_t)N);
    forward_stats(Q, K, V, dO, N, d, scale, causal, L, D);
    memset(dQ, 0, sizeof(double) * (size_t)N * d);
    memset(dK, 0, sizeof(double) * (size_t)N * d);
    memset(dV, 0, sizeof(double) * (size_t)N * d);
    for (int i = 0; i < N; ++i) {
        const double Di = v == BWD_NO_D ? 0.0 : D[i];
        for (int j = 0; j < N; ++j) {
            if (skip_q && skip_q[i] && skip_k[j]) continue;
            const int vis = visible(i, j, causal);
            const int for_dv = vis || v == BWD_DV_UNMASKED, for_ds = vis || v == BWD_DS_UNMASKED;
            if (!for_dv && !for_ds) continue;
            double qk = 0, dp = 0;
            for (int c = 0; c < d; ++c) {
                qk += (double)Q[(size_t)i * d + c] * K[(size_t)j * d + c];
                dp += (double)dO[(size_t)i * d + c] * V[(size_t)j * d + c];
            }
            double x; /* the exponent of P_ij under the hypothesis */
            switch (v) {
            case BWD_L_TIMES_LN2: x = qk * scale - L[i] * LN2; break;
            case BWD_L_TIMES_LOG2E: x = qk * scale - L[i] * LOG2E; break;
            case BWD_L_OF_KEY: x = qk * scale - L[j]; break;
            case BWD_S_UNSCALED: x = qk - L[i]; break;
            default: x = qk * scale - L[i]; break;
            }
            const double p = exp(x);
            const double ds = for_ds ? p * (dp - Di) * scale : 0.0;
            for (int c = 0; c < d; ++c) {
                if (for_dv) dV[(size_t)j * d + c] += p * dO[(size_t)i * d + c];
                dQ[(size_t)i * d + c] += ds * K[(size_t)j * d + c];
                dK[(size_t)j * d + c] += ds * Q[(size_t)i * d + c];
            }
        }
    }
    free(L);
    free(D);
}

void attention_backward_slice_variant(const float *Q, const float *K, const float *V, const float *dO, int N,
                                      int d, double scale, int causal, bwd_variant v, double *dQ, double *dK,
                                      double *dV) {
    backward_variant(Q, K, V, dO, N, d, scale, causal, v, NULL, NULL, dQ, dK, dV);
}

/* Flags the rows of an [N, d] gradient with an element the grader fails (grade_element);
 * returns how many rows are flagged, those flagged before included. */
static int wrong_rows(const double *got, const double *ref, int N, int d, tolerance t, unsigned char *row) {
    int count = 0;
    for (int i = 0; i < N; ++i) {
        for (int c = 0; c < d && !row[i]; ++c)
            row[i] = grade_element(ref[(size_t)i * d + c], got[(size_t)i * d + c], 0, t) != ELEM_OK;
        count += row[i];
    }
    return count;
}

double bwd_fit(const double *got, const double *ref, size_t n, tolerance t, double slack) {
    if (n == 0) return 0;
    size_t ok = 0;
    for (size_t k = 0; k < n; ++k)
        ok += isfinite(got[k]) && isfinite(ref[k]) && fabs(got[k] - ref[k]) <= slack * (t.atol + t.rtol * fabs(ref[k]));
    return (double)ok / n;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bwd_factor(const double *got, const double *ref, size_t n) {
    double big = 0;
    for (size_t k = 0; k < n; ++k)
        if (isfinite(ref[k])) big = fmax(big, fabs(ref[k]));
    if (big == 0) return NAN;
    double *f = malloc(sizeof(double) * (n ? n : 1));
    size_t nf = 0;
    for (size_t k = 0; k < n; ++k)
        if (fabs(ref[k]) > 0.05 * big && isfinite(got[k])) f[nf++] = got[k] / ref[k];
    double med = NAN;
    if (nf >= 4) {
        qsort(f, nf, sizeof *f, cmp_double);
        med = nf % 2 ? f[nf / 2] : 0.5 * (f[nf / 2 - 1] + f[nf / 2]);
        size_t agree = 0;
        for (size_t k = 0; k < nf; ++k) agree += fabs(f[k] - med) <= 0.02 * fabs(med);
        if (10 * agree < 9 * nf || fabs(med - 1) <= 0.02) med = NAN;
    }
    free(f);
    return med;
}

void bwd_facts_init(bwd_facts *f) {
    memset(f, 0, sizeof *f);
    f->swap_fit = -1;
    for (int g = 0; g < 3; ++g) f->factor[g] = NAN;
    for (int v = 0; v < BWD_VARIANT_COUNT; ++v) f->variant_fit[v] = -1;
}

void bwd_examine_slice(const float *Q, const float *K, const float *V, const float *dO, int N, int d,
                       const double *const ref[3], const double *const got[3], const tolerance tol[3], bwd_facts *f) {
    const size_t n = (size_t)N * d;
    for (int g = 0; g < 3; ++g)
        if (f->unwritten[g] || f->nonfinite[g]) return;
    const double a = bwd_fit(got[BWD_DK], ref[BWD_DV], n, tol[BWD_DV], 1),
                 b = bwd_fit(got[BWD_DV], ref[BWD_DK], n, tol[BWD_DK], 1);
    f->swap_fit = a < b ? a : b;
    for (int g = 0; g < 3; ++g)
        if (f->bad[g]) f->factor[g] = bwd_factor(got[g], ref[g], n);
    if (6.0 * N * N * d > 2e9) return;
    const int q = f->bad[BWD_DQ] > 0, k = f->bad[BWD_DK] > 0, v = f->bad[BWD_DV] > 0;
    bwd_variant try_v[BWD_VARIANT_COUNT];
    int nt = 0;
    if (q && k && !v) {
        try_v[nt++] = BWD_NO_D;
        if (f->causal) try_v[nt++] = BWD_DS_UNMASKED;
    }
    if (q && k && v) {
        try_v[nt++] = BWD_L_TIMES_LN2;
        try_v[nt++] = BWD_L_TIMES_LOG2E;
        try_v[nt++] = BWD_L_OF_KEY;
        try_v[nt++] = BWD_S_UNSCALED;
    }
    if (v && !q && !k && f->causal) try_v[nt++] = BWD_DV_UNMASKED;
    /* Some dQ rows and some dK or dV rows wrong: were their (query, key) pairs left out? */
    unsigned char *skip_q = calloc((size_t)N, 1), *skip_k = calloc((size_t)N, 1);
    if (q && (k || v)) {
        f->skip_rows[0] = wrong_rows(got[BWD_DQ], ref[BWD_DQ], N, d, tol[BWD_DQ], skip_q);
        wrong_rows(got[BWD_DK], ref[BWD_DK], N, d, tol[BWD_DK], skip_k);
        f->skip_rows[1] = wrong_rows(got[BWD_DV], ref[BWD_DV], N, d, tol[BWD_DV], skip_k); /* dK's or dV's */
        try_v[nt++] = BWD_PAIRS_SKIPPED;
    }
#pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < nt; ++t) {
        double *h = malloc(sizeof(double) * 3 * n);
        const int pairs = try_v[t] == BWD_PAIRS_SKIPPED;
        backward_variant(Q, K, V, dO, N, d, f->scale, f->causal, try_v[t], pairs ? skip_q : NULL,
                         pairs ? skip_k : NULL, h, h + n, h + 2 * n);
        double differs = 0, fit = 0;
        for (int g = 0; g < 3; ++g) {
            const double *hg = h + g * n;
            /* Matching means: close to the hypothesis as a whole (relative L2 error under 5%: a
             * hypothesis whose values are huge where the kernel's are not cannot match), and
             * element by element within 10 x the tolerance, grown by how much larger the
             * hypothesis' typical (median) value is than the reference's, + 2% of it. */
            double e2 = 0, h2 = 0;
            double *ah = malloc(sizeof(double) * n), *ar = malloc(sizeof(double) * n);
            for (size_t e = 0; e < n; ++e) {
                e2 += (got[g][e] - hg[e]) * (got[g][e] - hg[e]);
                h2 += hg[e] * hg[e];
                ah[e] = fabs(hg[e]);
                ar[e] = fabs(ref[g][e]);
            }
            qsort(ah, n, sizeof *ah, cmp_double);
            qsort(ar, n, sizeof *ar, cmp_double);
            const double grow = ar[n / 2] > 0 && ah[n / 2] > ar[n / 2] ? ah[n / 2] / ar[n / 2] : 1.0;
            free(ah);
            free(ar);
            const tolerance loose = {10 * tol[g].atol * grow, 0.02};
            differs += 1 - bwd_fit(hg, ref[g], n, tol[g], 1);
            const int close = isfinite(e2) && isfinite(h2) && e2 <= 0.05 * 0.05 * h2;
            fit += close ? bwd_fit(got[g], hg, n, loose, 1) : 0;
        }
        f->variant_fit[try_v[t]] = differs / 3 >= 0.1 / 3 ? fit / 3 : -1;
        free(h);
    }
    free(skip_q);
    free(skip_k);
}

/* The sentence for each hypothesis, when the kernel's gradients match it. */
static const char *variant_text(bwd_variant v) {
    switch (v) {
    case BWD_NO_D:
        return "dV passes, so P is right; dQ and dK match a backward whose dS has no -D term: D is missing, zero "
               "or never subtracted: D_i = rowsum(dO_i o O_i) (the preprocessing step), dS = P o (dP - D)";
    case BWD_L_TIMES_LN2:
        return "P is wrong in all three gradients: they match P = exp(S - L ln 2), a natural-log L used as if it "
               "were base 2: in base 2, P = exp2(S scale log2(e) - L log2(e))";
    case BWD_L_TIMES_LOG2E:
        return "P is wrong in all three gradients: they match P = exp(S - L log2(e)): L converted to base 2 but "
               "used with a natural exp (or converted twice)";
    case BWD_L_OF_KEY:
        return "P is wrong in all three gradients: they match P_ij = exp(S_ij - L_j), the logsumexp of the key's "
               "row: P_ij needs L_i of the query row i";
    case BWD_S_UNSCALED:
        return "P is wrong in all three gradients: they match P = exp(Q K^T - L): the scores are not multiplied by "
               "the softmax scale before P is recomputed (L was formed from scaled scores)";
    case BWD_DV_UNMASKED:
        return "causal mask missing from dV: dV matches dV += P^T dO with P not masked above the diagonal, while "
               "dQ and dK (through dS) have the mask: mask P once, before both products use it";
    case BWD_DS_UNMASKED:
        return "causal mask missing from dS: dQ and dK match a dS = P o (dP - D) whose P is not masked above the "
               "diagonal, while dV has the mask: mask P once, before both products use it";
    default: return "";
    }
}

void diagnose_bwd(const bwd_facts *f, char *out, size_t cap) {
    out[0] = '\0';
    int nbad = 0;
    for (int g = 0; g < 3; ++g) {
        if (f->unwritten[g] || f->nonfinite[g]) return;
        nbad += f->bad[g] > 0;
    }
    if (nbad == 0) return;
    /* 0. all three gradients zero: nothing reached them, and every hypothesis that leaves out terms
     * (the skipped pairs above all) would fit trivially, so say it plainly first */
    int zero = 0;
    for (int g = 0; g < 3; ++g) zero += f->bad[g] > 0 && !isnan(f->factor[g]) && fabs(f->factor[g]) < 0.02;
    if (zero == 3) {
        snprintf(out, cap, "dQ, dK and dV are all zero on most elements: nothing added into any of them. Every "
                 "gradient goes through P (dV = P^T dO; dQ and dK through dS = P o (dP - D)), so a P that is zero "
                 "everywhere does this (its exponential not computed or not stored), and so do products that never "
                 "run or are not written yet, and a loop over the tiles that never runs: check P = exp2(S scale "
                 "log2(e) - L2) first, then the products that add into dV, dK and dQ, then the tile loops");
        return;
    }
    /* 1. a hypothesis the numbers match */
    int best = -1;
    for (int v = 1; v < BWD_VARIANT_COUNT; ++v)
        if (f->variant_fit[v] >= 0.9 && (best < 0 || f->variant_fit[v] > f->variant_fit[best])) best = v;
    if (best == BWD_PAIRS_SKIPPED) {
        snprintf(out, cap, "dQ, dK and dV match a backward that leaves out every pair (query i, key j) with i "
                 "among the %d rows where dQ is wrong and j among the %d rows where dK or dV is wrong: those "
                 "(query tile, K/V tile) pairs were never computed: check the bounds of the tile loops (where "
                 "a block starts and stops, the causal skip) and which blocks the grid launches",
                 f->skip_rows[0], f->skip_rows[1]);
        return;
    }
    if (best > 0) {
        snprintf(out, cap, "%s", variant_text((bwd_variant)best));
        return;
    }
    const int q = f->bad[BWD_DQ] > 0, k = f->bad[BWD_DK] > 0, v = f->bad[BWD_DV] > 0;
    /* 2. dK and dV exchanged */
    if (k && v && f->swap_fit >= 0.9) {
        snprintf(out, cap, "dK and dV are swapped: the kernel's dK is the reference dV and its dV the reference "
                 "dK: check which accumulator is stored into which output");
        return;
    }
    /* 3. one constant factor on a gradient */
    for (int g = 0; g < 3; ++g) {
        if (!f->bad[g] || isnan(f->factor[g])) continue;
        const double c = f->factor[g], s = f->scale;
        if (g != BWD_DV && fabs(c * s - 1) < 0.02)
            snprintf(out, cap, "%s is the reference / scale (x %.4g): the softmax scale is missing from %s = scale "
                     "%s", BWD_NAME[g], c, BWD_NAME[g], g == BWD_DQ ? "dS K" : "dS^T Q");
        else if (g != BWD_DV && fabs(c / s - 1) < 0.02)
            snprintf(out, cap, "%s is the reference x scale (%.4g): the softmax scale is applied twice", BWD_NAME[g], c);
        else if (g == BWD_DV && fabs(c / s - 1) < 0.02)
            snprintf(out, cap, "dV is the reference x scale (%.4g): dV = P^T dO takes no softmax scale (only dQ and "
                     "dK do: dS is the gradient of the scaled scores)", c);
        else if (fabs(c) < 0.02)
            snprintf(out, cap, "%s is zero on most elements: the products that add into it did not run there, or "
                     "their sums never reached it (which tiles a block visits, where %s is stored%s)", BWD_NAME[g],
                     BWD_NAME[g], g == BWD_DQ ? " or accumulated" : "");
        else if (fabs(c + 1) < 0.02)
            snprintf(out, cap, "%s is minus the reference: a sign (dS = P o (dP - D), not (D - dP))", BWD_NAME[g]);
        else
            snprintf(out, cap, "%s is %.4g x the reference everywhere: a constant factor in %s", BWD_NAME[g], c,
                     g == BWD_DV ? "dV += P^T dO" : g == BWD_DQ ? "dQ += scale dS K" : "dK += scale dS^T Q");
        return;
    }
    /* 4. which gradients are wrong */
    const char *msg;
    if (q && k && v)
        msg = "all three gradients are wrong, so P = exp(scale S - L) is (every product uses it): check the "
              "scale (and log2(e) in base 2), L_i of the query row, the mask; or the Q, K, V, dO tiles read";
    else if (q && k)
        msg = "dV passes, so P is right (dV = P^T dO); dQ and dK are wrong, so dS = P o (dP - D) is not: check "
              "dP = dO V^T, D_i = rowsum(dO_i o O_i) and the -D term";
    else if (k && v)
        msg = "dQ passes, so P and dS are right; dK and dV, the two products of the key block, are wrong: "
              "dV_j sums P_ij dO_i and dK_j sums dS_ij Q_i over the query rows i (the transposes), and where "
              "dK_j, dV_j are stored";
    else if (q && v)
        msg = "dK passes, so P and dS are right; dQ and dV are wrong: dQ += scale dS K and dV += P^T dO (the K "
              "and dO rows they read)";
    else if (q)
        msg = "dK and dV pass, so P and dS are right; dQ is wrong: dQ_i += scale dS_ij K_j (the K rows it "
              "reads), or how the key blocks' partial dQ are added up (atomics, or the separate dQ pass) "
              "and turned into dQ (the fp32 accumulator: zeroed before every call, its layout; the final scale)";
    else if (k)
        msg = "dQ and dV pass, so P and dS are right; dK is wrong: dK_j += scale dS_ij Q_i (the transpose, the "
              "Q rows it reads)";
    else
        msg = "dQ and dK pass, so P and dS are right; dV is wrong: dV_j += P_ij dO_i (the transpose, the dO "
              "rows it reads)";
    snprintf(out, cap, "%s", msg);
}
