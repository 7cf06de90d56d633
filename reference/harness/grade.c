#include "grade.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const tolerance_rule TOL_RULE_OUTPUT = {1e-5, 1e-4, 1e-4, 8e-4, 0, 2e-3};
const tolerance_rule TOL_RULE_LSE = {1e-4, 1e-5, 1e-4, 1e-4, 1e-5, 1e-3};

double tolerance_abs_term(const tolerance_rule *rule, dtype_t dtype) {
    return dtype == DTYPE_FP32   ? rule->a_fp32
           : dtype == DTYPE_FP16 ? rule->a_fp16
           : dtype == DTYPE_E4M3 ? rule->a_e4m3
                                 : rule->a_bf16;
}

tolerance tolerance_from_plain(const tolerance_rule *rule, dtype_t dtype, double e_plain, double s) {
    if (dtype == DTYPE_FP32) return (tolerance){3 * e_plain + rule->a_fp32 * s, rule->rtol_fp32};
    return (tolerance){2 * e_plain + tolerance_abs_term(rule, dtype) * s, rule->rtol_16bit};
}

elem_status grade_element(double ref, double got, int poisoned, tolerance tol) {
    if (poisoned) return ELEM_UNWRITTEN;
    if (!isfinite(got)) return ELEM_NONFINITE;
    /* written as "is within", so a NaN anywhere makes it false */
    if (fabs(got - ref) <= tol.atol + tol.rtol * fabs(ref)) return ELEM_OK;
    return ELEM_BAD;
}

const char *elem_status_name(elem_status s) {
    switch (s) {
    case ELEM_OK: return "ok";
    case ELEM_BAD: return "wrong value";
    case ELEM_NONFINITE: return "NaN/Inf";
    case ELEM_UNWRITTEN: return "not written";
    }
    return "?";
}

struct grader {
    int BH, H, N, width;
    unsigned char *row_state; /* 0 unchecked, 1 ok, 2 bad; [BH*N] */
    long *col_bad;            /* [width] */
    grade_report r;
};

grader *grader_new(int BH, int H, int N, int width) {
    grader *g = calloc(1, sizeof *g);
    g->BH = BH; g->H = H; g->N = N; g->width = width;
    g->row_state = calloc((size_t)BH * N, 1);
    g->col_bad = calloc((size_t)width, sizeof(long));
    return g;
}

void grader_free(grader *g) {
    if (!g) return;
    free(g->row_state);
    free(g->col_bad);
    free(g);
}

void grader_check(grader *g, int bh, int row, int col, double ref, double got, int poisoned,
                  tolerance tol) {
    elem_status s = grade_element(ref, got, poisoned, tol);
    unsigned char *rs = &g->row_state[(size_t)bh * g->N + row];
    if (*rs == 0) *rs = 1;
    g->r.checked++;
    if (!poisoned && isfinite(got)) {
        double a = fabs(got - ref);
        if (a > g->r.max_abs) g->r.max_abs = a;
        double rel = a / fmax(fabs(ref), 1e-6);
        if (rel > g->r.max_rel) g->r.max_rel = rel;
    }
    if (s == ELEM_OK) return;
    *rs = 2;
    g->r.bad++;
    if (s == ELEM_NONFINITE) {
        g->r.nonfinite++;
        g->r.neginf += isinf(got) && got < 0;
    }
    if (s == ELEM_UNWRITTEN) g->r.unwritten++;
    if (s == ELEM_BAD && got == 0) g->r.zero++;
    g->col_bad[col]++;
    if (g->r.nfirst < GRADE_FIRST) g->r.first[g->r.nfirst++] = (mismatch){bh, row, col, ref, got, s};
}

static void add(char *buf, size_t cap, const char *msg) {
    size_t n = strlen(buf);
    if (n && n + 2 < cap) { strcat(buf, "; "); n += 2; }
    snprintf(buf + n, cap - n, "%s", msg);
}

/* Describes where the bad rows are: which (b,h) slices and which rows. */
static void summarize_location(const grader *g, grade_report *r, const char *every_row_msg) {
    char msg[512];
    int N = g->N, BH = g->BH;
    /* (b,h) slices */
    int slices_checked = 0, slices_bad = 0, first_slice_bad = 0, last_slice_bad = 0;
    for (int bh = 0; bh < BH; ++bh) {
        int checked = 0, bad = 0;
        for (int i = 0; i < N; ++i) {
            unsigned char s = g->row_state[(size_t)bh * N + i];
            checked |= s != 0;
            bad |= s == 2;
        }
        slices_checked += checked;
        slices_bad += bad;
        if (bh == 0) first_slice_bad = bad;
        if (bh == BH - 1) last_slice_bad = bad;
    }
    /* the slice before the NaN guard that follows the arrays: a read past row N - 1 finds NaN there only */
    const char *past_end = "a read past its row N - 1 finds the NaN guard after the array there, where in the other "
                           "slices it gets the next slice's rows";
    if (slices_checked > 1 && slices_bad > 0 && slices_bad < slices_checked) {
        if (!first_slice_bad && slices_bad == slices_checked - 1)
            snprintf(msg, sizeof msg,
                     "only (b,h) != (0,0) is wrong: batch/head stride (the slice offset) suspected%s%s",
                     slices_bad == 1 ? ", or, the last slice being the only one wrong, " : "",
                     slices_bad == 1 ? past_end : "");
        else if (slices_bad == 1 && last_slice_bad)
            snprintf(msg, sizeof msg, "only the last (b,h) slice is wrong: %s", past_end);
        else
            snprintf(msg, sizeof msg, "wrong in %d of %d (b,h) slices", slices_bad, slices_checked);
        add(r->summary, sizeof r->summary, msg);
    }
    /* rows: the lowest bad row index and whether everything below it is fine */
    int min_bad = N, max_ok_above = -1;
    long rows_checked = 0, rows_bad = 0;
    for (int bh = 0; bh < BH; ++bh)
        for (int i = 0; i < N; ++i) {
            unsigned char s = g->row_state[(size_t)bh * N + i];
            if (!s) continue;
            rows_checked++;
            if (s == 2) { rows_bad++; if (i < min_bad) min_bad = i; }
        }
    for (int bh = 0; bh < BH; ++bh)
        for (int i = min_bad; i < N; ++i)
            if (g->row_state[(size_t)bh * N + i] == 1 && i > max_ok_above) max_ok_above = i;
    r->rows_checked = rows_checked;
    r->rows_bad = rows_bad;
    if (rows_bad == 0) return;
    if (rows_bad * 10 >= rows_checked * 9 && rows_checked >= 4) {
        if (!every_row_msg)
            every_row_msg = "every row is wrong: check the running max m, the sum l, the rescaling, the K/V loop, and "
                            "S = Q K^T itself (the fragments of Q and K, the scale)";
        if (*every_row_msg && rows_bad < rows_checked && !strncmp(every_row_msg, "every row", 9)) {
            char nearly[512]; /* 90% or more, not all: the rows that pass matter too */
            snprintf(nearly, sizeof nearly, "nearly %s (%ld of %ld checked rows)", every_row_msg, rows_bad, rows_checked);
            add(r->summary, sizeof r->summary, nearly);
        } else if (*every_row_msg)
            add(r->summary, sizeof r->summary, every_row_msg);
    } else if (min_bad > 0 && max_ok_above < min_bad) {
        /* every checked row >= min_bad is bad (within the bad slices) and all rows below are fine */
        int tile = 0;
        for (int T = 128; T >= 8; T /= 2)
            if (N % T && min_bad == N / T * T) { tile = T; break; }
        if (tile)
            snprintf(msg, sizeof msg,
                     "wrong only in the last partial tile: rows %d..%d (N=%d is not a multiple of %d)",
                     min_bad, N - 1, N, tile);
        else
            snprintf(msg, sizeof msg, "wrong only in rows %d..%d (the last rows)", min_bad, N - 1);
        add(r->summary, sizeof r->summary, msg);
    } else {
        snprintf(msg, sizeof msg, "%ld of %ld checked rows wrong (first at row %d)", rows_bad,
                 rows_checked, min_bad);
        add(r->summary, sizeof r->summary, msg);
    }
    /* columns */
    if (g->width > 1 && r->bad >= 4L * g->width) { /* a pattern, not a few stray elements */
        int lo = -1, hi = -1;
        for (int c = 0; c < g->width; ++c)
            if (g->col_bad[c]) { if (lo < 0) lo = c; hi = c; }
        if ((lo > 0 || (hi >= 0 && hi < g->width - 1)) && 4 * (hi - lo + 1) <= 3 * g->width) {
            snprintf(msg, sizeof msg, "only head-dim columns %d..%d of 0..%d are wrong (a loop bound over d?)",
                     lo, hi, g->width - 1);
            add(r->summary, sizeof r->summary, msg);
        }
    }
}

void grader_finish(const grader *g, grade_report *r) { grader_finish_ex(g, r, NULL); }

void grader_finish_ex(const grader *g, grade_report *r, const char *every_row_msg) {
    *r = g->r;
    r->width = g->width;
    r->summary[0] = '\0';
    if (r->bad == 0) return;
    char msg[320];
    if (r->unwritten) {
        snprintf(msg, sizeof msg, "not written: %ld elements still hold the poison the harness wrote before the launch",
                 r->unwritten);
        add(r->summary, sizeof r->summary, msg);
    }
    if (r->nonfinite && r->neginf == r->nonfinite && r->width == 1) {  /* L: log 0 */
        snprintf(msg, sizeof msg, "-inf: %ld values are -inf, for L log 0: a row sum l that stayed 0 (no "
                 "exponential was added to it: the softmax's sums not written yet, or every key masked)", r->neginf);
        add(r->summary, sizeof r->summary, msg);
    } else if (r->nonfinite) {
        snprintf(msg, sizeof msg, "overflow/NaN: %ld elements are NaN or Inf (max not subtracted? exp(-inf - (-inf)) on a fully masked block? a read of what nobody wrote: past the inputs, which the GPU harness surrounds with NaN, or shared memory before its barrier, NaN on the CPU emulator?)",
                 r->nonfinite);
        add(r->summary, sizeof r->summary, msg);
    }
    summarize_location(g, r, every_row_msg);
    if (r->zero == r->bad && r->rows_bad == r->rows_checked) {  /* said first: the likeliest cause */
        char rest[sizeof r->summary];
        snprintf(rest, sizeof rest, "%s", r->summary);
        snprintf(r->summary, sizeof r->summary, "all %ld bad values are 0, on every checked row: nothing reached "
                 "this output (the product that writes it, or its store, not written yet?)", r->zero);
        if (rest[0]) add(r->summary, sizeof r->summary, rest);
    }
}

const char *grade_max_abs_text(const grade_report *r, char *buf, size_t cap) {
    const long left_out = r->unwritten + r->nonfinite;
    if (!left_out)
        snprintf(buf, cap, "max abs err %.3g", r->max_abs);
    else if (left_out >= r->checked)
        snprintf(buf, cap, "no value both written and finite to measure an error on");
    else
        snprintf(buf, cap, "max abs err %.3g over the written, finite values (%ld not written, %ld NaN or Inf)",
                 r->max_abs, r->unwritten, r->nonfinite);
    return buf;
}

void grade_print_first(const grade_report *r, int H, const char *what) {
    for (int k = 0; k < r->nfirst; ++k) {
        const mismatch *m = &r->first[k];
        if (r->width == 1)  /* L: one value per row */
            printf("      %s[b=%d, h=%d, row=%d]: expected %.6g, got %.6g (%s)\n", what, m->bh / H, m->bh % H,
                   m->row, m->expected, m->got, elem_status_name(m->status));
        else
            printf("      %s[b=%d, h=%d, row=%d, col=%d]: expected %.6g, got %.6g (%s)\n", what,
                   m->bh / H, m->bh % H, m->row, m->col, m->expected, m->got,
                   elem_status_name(m->status));
    }
}
