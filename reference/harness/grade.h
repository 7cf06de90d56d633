/* grade.h: compares a kernel's output with the reference, element by element,
 * and says where the bad elements are in words a student can act on.
 *
 * An element is bad when it is NaN/Inf, still holds the poison pattern the
 * harness wrote before the launch ("not written"), or |got - ref| > atol + rtol*|ref|.
 * The comparison is written so that NaN never passes. */
#ifndef GRADE_H
#define GRADE_H
#include <stddef.h>
#include "attention.h"

/* An element passes when |got - ref| <= atol + rtol |ref|. */
typedef struct { double atol, rtol; } tolerance;

/* The constants of a tolerance rule (tolerance_from_plain): the absolute terms per dtype, as a
 * multiple of the output's size, and the relative terms. */
typedef struct {
    double a_fp32, rtol_fp32;            /* fp32 */
    double a_fp16, a_bf16, rtol_16bit;   /* fp16, bf16 */
    double a_e4m3;                       /* FP8 inputs (bf16 O), with rtol_16bit */
} tolerance_rule;

/* O, and dQ, dK, dV: a = 1e-5, rtol 1e-4 in fp32; a = 1e-4 (fp16) or 8e-4 (bf16), rtol 0 in 16 bits;
 * a = 2e-3 for FP8 inputs (O in bf16: about one bf16 ulp of an O near 1). */
extern const tolerance_rule TOL_RULE_OUTPUT;
/* L (the logsumexp, fp32 in every lesson): a = 1e-4 (1e-3 for FP8 inputs); rtol 1e-5. */
extern const tolerance_rule TOL_RULE_LSE;

/* The tolerance of one output of a case, from the largest error e_plain that a plain
 * same-precision computation (cpu_reference.h, *_lowp) makes on the same inputs against the
 * same float64 reference, and the output's size s >= 1 (1, or max(1, max |ref|) for a
 * gradient, whose scale varies with the shape):
 *   fp16, bf16: FlashAttention's test rule, at most twice that error:
 *               atol = 2 e_plain + a_16 s, rtol = rtol_16bit;
 *   e4m3:       the same rule with a_e4m3, e_plain the plain FP8 attention's error on the
 *               dequantized inputs (cpu_reference.h);
 *   fp32:       atol = 3 e_plain + a_fp32 s, rtol = rtol_fp32. Fixed tolerances would not do:
 *               with x30 logits even fp32 loses ~1e-4 relative (S is ill-conditioned), which
 *               the 3 e_plain term follows. */
tolerance tolerance_from_plain(const tolerance_rule *rule, dtype_t dtype, double e_plain, double s);
/* The rule's absolute constant for dtype (a_fp32, a_fp16 or a_bf16), for the descriptions. */
double tolerance_abs_term(const tolerance_rule *rule, dtype_t dtype);

typedef enum { ELEM_OK = 0, ELEM_BAD, ELEM_NONFINITE, ELEM_UNWRITTEN } elem_status;

/* One element's verdict. `poisoned` is 1 when the stored bits still equal the poison. */
elem_status grade_element(double ref, double got, int poisoned, tolerance tol);

typedef struct {
    int bh, row, col;
    double expected, got;
    elem_status status;
} mismatch;

#define GRADE_FIRST 5
typedef struct {
    long checked, bad, nonfinite, unwritten;
    long neginf;                    /* of the bad nonfinite, those that are -inf */
    long zero;                      /* of the bad, those that are exactly 0 (written) */
    double max_abs, max_rel;        /* over elements with a finite got */
    long rows_checked, rows_bad;
    int nfirst;
    mismatch first[GRADE_FIRST];
    char summary[768];              /* "; "-separated diagnoses, empty when all good */
    int width;                      /* the grader's width: 1 (L) prints no column */
} grade_report;

/* A grader accumulates one tensor viewed as [BH, N, width] (width = d for O,
 * 1 for L). Rows may be checked sparsely; only checked rows count. */
typedef struct grader grader;
grader *grader_new(int BH, int H, int N, int width);
void grader_check(grader *g, int bh, int row, int col, double ref, double got, int poisoned,
                  tolerance tol);
/* Fills *r, including the location summary. */
void grader_finish(const grader *g, grade_report *r);
/* The same, with the "every row is wrong: check the running max m, the sum l, ..." clause
 * replaced by every_row_msg ("" drops it): for a caller that knows better, e.g. that L
 * passes, so m and l are right. NULL keeps the default. */
void grader_finish_ex(const grader *g, grade_report *r, const char *every_row_msg);
void grader_free(grader *g);
/* "max abs err X" for a report, in buf (cap bytes): the maximum leaves out the values not written
 * and the NaN or Inf ones, and the text says how many it left out ("no written, finite value" when
 * that is all of them), so that an error of 0 is never shown beside values that are all wrong. */
const char *grade_max_abs_text(const grade_report *r, char *buf, size_t cap);

/* Prints "b=..,h=.. row .. col .." style lines for the first mismatches. */
void grade_print_first(const grade_report *r, int H, const char *what);
const char *elem_status_name(elem_status s);
#endif
