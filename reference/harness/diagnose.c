/* diagnose.c: hypotheses about a wrong L (O right) or a wrong O (L right); see diagnose.h. */
#include "diagnose.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LN2 0.69314718055994531
#define LN4 1.3862943611198906

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of v[0..n) (reorders v). */
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- L ---- */

typedef double (*l_pred)(const l_row *);
static double pred_base2(const l_row *r) { return r->ref_L / LN2; }
static double pred_times_ln2(const l_row *r) { return r->ref_L * LN2; }
static double pred_no_m(const l_row *r) { return r->ref_L - r->m; }
static double pred_no_log_l(const l_row *r) { return r->m; }
static double pred_m_unscaled(const l_row *r) { return r->m / r->scale + (r->ref_L - r->m); }
static double pred_log2_l(const l_row *r) { return r->m + (r->ref_L - r->m) / LN2; }
static double pred_m_base2(const l_row *r) { return r->m / LN2 + (r->ref_L - r->m); }

static const struct {
    l_pred pred;
    const char *what;
} L_HYPOTHESES[] = {
    {pred_base2, "L is in base 2 (kernel L / reference = 1/ln 2 = 1.4427): a log2-sum-exp; multiply by "
                 "ln 2 = 0.693 at the end: L = (m * scale * log2(e) + log2(l)) * ln 2"},
    {pred_times_ln2, "L is ln 2 = 0.693 times the reference: multiplied by ln 2 once too often (it already "
                     "was a natural log)"},
    {pred_no_m, "L = log(l) without the row max: L = m + log(l) (m scaled like the scores)"},
    {pred_no_log_l, "L = m without log(l): L = m + log(l)"},
    {pred_m_unscaled, "the max in L is the raw max of Q.K, not multiplied by the softmax scale: "
                      "L = m * scale + log(l) when m is kept unscaled"},
    {pred_log2_l, "log2(l) added to a natural-log max: use log(l), or multiply log2(l) by ln 2"},
    {pred_m_base2, "the max in L is in base 2 (m * scale * log2(e)) while log(l) is natural: multiply the "
                   "max by ln 2"},
};

/* Fraction of rows where got is within a float-rounding tolerance of pred. */
static double fit_L(const l_row *rows, int n, l_pred pred) {
    int ok = 0;
    for (int k = 0; k < n; ++k) {
        double p = pred(&rows[k]);
        ok += fabs(rows[k].got_L - p) <= 2e-3 * (1.0 + fabs(p));
    }
    return (double)ok / n;
}

void diagnose_L(const l_row *rows, int n, char *out, size_t cap) {
    double *off = malloc(sizeof(double) * (size_t)n), *ratio = malloc(sizeof(double) * (size_t)n);
    int nr = 0;
    for (int k = 0; k < n; ++k) {
        off[k] = rows[k].got_L - rows[k].ref_L;
        if (fabs(rows[k].ref_L) > 1e-6) ratio[nr++] = rows[k].got_L / rows[k].ref_L;
    }
    double c = median(off, n), r = nr ? median(ratio, nr) : NAN;
    int near_c = 0; /* off[] is sorted now: count the rows near the median offset */
    for (int k = 0; k < n; ++k) near_c += fabs(off[k] - c) <= 0.05 + 0.05 * fabs(c);
    free(off);
    free(ratio);
    int len = snprintf(out, cap, "O passes; L (logsumexp) is wrong on %d checked rows (median kernel L / "
                       "reference = %.4g, median kernel L - reference = %.4g): ", n, r, c);
    if (len < 0 || (size_t)len >= cap) return;
    out += len;
    cap -= (size_t)len;
    for (size_t h = 0; h < sizeof L_HYPOTHESES / sizeof L_HYPOTHESES[0]; ++h)
        if (fit_L(rows, n, L_HYPOTHESES[h].pred) >= 0.9) {
            snprintf(out, cap, "%s", L_HYPOTHESES[h].what);
            return;
        }
    int one_key = 0; /* rows whose reference l is 1: one key, so O is its V whatever the score */
    for (int k = 0; k < n; ++k) one_key += fabs(rows[k].ref_L - rows[k].m) <= 1e-9;
    if (one_key == n)
        snprintf(out, cap, "every one of these rows sees a single key, so O is that key's V whatever its score and "
                 "L is the scaled score itself: S = Q K^T is wrong (the fragments of Q or K, their rows, or the "
                 "scale), not l");
    else if (c < -LN4 + 0.4 && c > -LN4 - 0.4)
        snprintf(out, cap, "L is about ln 4 = 1.39 too small, as when l is one lane's partial sum: sum l "
                 "across the 4 lanes that share a row (two xor-shuffles) before L = m + log(l)");
    else if (c < -LN2 + 0.2 && c > -LN2 - 0.2)
        snprintf(out, cap, "L is about ln 2 = 0.69 too small, as when l is summed over only 2 of the 4 lanes "
                 "of a row: add both xor-shuffles (offsets 1 and 2)");
    else if (4 * near_c >= 3 * n)
        snprintf(out, cap, "L is off by a near-constant %.4g on %d of the %d rows, so l is off by a factor "
                 "e^%.4g = %.4g: check how l is summed (all lanes, all K/V tiles) and rescaled", c, near_c, n, c,
                 exp(c));
    else
        snprintf(out, cap, "O is right, so the online softmax inside the loop works; the error is in how L "
                 "is formed at the end: L = m * scale + log(l), natural log, l summed over the lanes of "
                 "the row, one value per row < N, written at row index b*H*N + h*N + i");
}

/* ---- O ---- */

/* The kernel's O over the reference's in row k, when it is one factor for the whole row
 * (median over the columns with a clear reference value; NAN if the columns disagree). */
static double row_factor(const o_row *r) {
    double big = 0;
    for (int c = 0; c < r->d; ++c) big = fmax(big, fabs(r->ref[c]));
    if (big == 0) return NAN;
    double *f = malloc(sizeof(double) * (size_t)r->d);
    int nf = 0;
    for (int c = 0; c < r->d; ++c)
        if (fabs(r->ref[c]) > 0.05 * big) f[nf++] = r->got[c] / r->ref[c];
    double k = nf ? median(f, nf) : NAN;
    int agree = 0;
    for (int j = 0; j < nf; ++j) agree += fabs(f[j] - k) <= 0.02 * fabs(k) + 1e-3;
    free(f);
    return (nf && 10 * agree >= 9 * nf) ? k : NAN;
}

void diagnose_O(const o_row *rows, int n, char *out, size_t cap) {
    double *k = malloc(sizeof(double) * (size_t)n), *sorted = malloc(sizeof(double) * (size_t)n);
    int rowwise = 0, is_l = 0, is_inv_l = 0;
    for (int i = 0; i < n; ++i) {
        k[i] = row_factor(&rows[i]);
        if (isnan(k[i])) continue;
        sorted[rowwise++] = k[i];
        double l = rows[i].l;
        is_l += fabs(k[i] - l) <= 0.02 * l;
        is_inv_l += l > 0 && fabs(k[i] - 1 / l) <= 0.02 / l;
    }
    const char *head = "L passes (so m and l are right); O is wrong";
    if (10 * rowwise < 9 * n) { /* not one factor per row: the values themselves are wrong */
        snprintf(out, cap, "%s, and not by a factor per row: check O += P V (the V tile, which rows and "
                 "columns of V it reads), the rescaling of O by exp(m_old - m_new) when the max grows, "
                 "and the final O / l", head);
    } else if (10 * is_l >= 9 * n) {
        snprintf(out, cap, "%s: on every failing row O = reference x l (the row sum): O was never divided "
                 "by l at the end", head);
    } else if (10 * is_inv_l >= 9 * n) {
        snprintf(out, cap, "%s: on every failing row O = reference / l: O was divided by l twice", head);
    } else {
        double c = median(sorted, rowwise);
        int near = 0;
        for (int i = 0; i < n; ++i) near += !isnan(k[i]) && fabs(k[i] - c) <= 0.05 * fabs(c);
        if (10 * near < 9 * n)
            snprintf(out, cap, "%s by a factor that changes from row to row (median %.4g): the rescaling of O "
                     "by exp(m_old - m_new) when the running max grows, or the final O / l", head, c);
        else if (c == 0)
            snprintf(out, cap, "%s: O is 0 on every failing row: nothing reached it, so P (its packing into "
                     "the wgmma or mma operand), the P V product or O's store is not written yet", head);
        else if (fabs(c - 4) < 0.4)
            snprintf(out, cap, "%s: O is about 4x the reference on every failing row: it was divided by one "
                     "lane's partial l; sum l across the 4 lanes of a row first", head);
        else if (fabs(c - 2) < 0.2)
            snprintf(out, cap, "%s: O is about 2x the reference on every failing row: l summed over only 2 "
                     "of the 4 lanes of a row", head);
        else
            snprintf(out, cap, "%s: O is %.4g x the reference on every failing row: a constant factor in "
                     "the final O / l or in P", head, c);
    }
    free(k);
    free(sorted);
}

/* ---- writes outside an output ---- */

void describe_outside(char *out, size_t cap, const char *name, long before, long after, long after_first,
                      long after_last, long before_nearest, long before_farthest, int B, int H, int N,
                      int width) {
    out[0] = '\0';
    int len = 0;
    if (after > 0) {
        const long r0 = N + after_first / width, r1 = N + after_last / width;
        len = snprintf(out, cap, "wrote outside %s: %ld element%s after the end: rows %ld..%ld of the last "
                       "(b,h) slice (b=%d, h=%d), which has rows 0..%d", name, after, after == 1 ? "" : "s", r0,
                       r1, B - 1, H - 1, N - 1);
        if (len > 0 && (size_t)len < cap && B * H > 1)
            len += snprintf(out + len, cap - (size_t)len, "; in every other slice the same rows are the "
                            "first rows of the next one: row %ld of head h is row %ld of head h+1", r0,
                            r0 - N);
        if (len > 0 && (size_t)len < cap)
            len += snprintf(out + len, cap - (size_t)len, r0 == N ? ": check the row < N guard (a <= "
                            "where < belongs?)" : ": check the bounds of the last (partial) tile");
    }
    if (before > 0 && len >= 0 && (size_t)len < cap)
        snprintf(out + len, cap - (size_t)len, "%swrote outside %s: %ld element(s) before the start (%ld..%ld "
                 "elements before row 0 of (b,h) = (0,0)): a negative row or column index, or an offset "
                 "subtracted where it should be added", len ? "; " : "", name, before, before_nearest,
                 before_farthest);
}
