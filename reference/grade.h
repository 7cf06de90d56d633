/* grade.h: compares a kernel's output with the reference, element by element,
 * and says where the bad elements are in words a student can act on.
 *
 * An element is bad when it is NaN/Inf, still holds the poison pattern the
 * harness wrote before the launch ("not written"), or |got - ref| > atol + rtol*|ref|.
 * The comparison is written so that NaN never passes. */
#ifndef GRADE_H
#define GRADE_H
#include <stddef.h>

typedef struct { double atol, rtol; } tolerance;

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
    double max_abs, max_rel;        /* over elements with a finite got */
    long rows_checked, rows_bad;
    int nfirst;
    mismatch first[GRADE_FIRST];
    char summary[640];              /* "; "-separated diagnoses, empty when all good */
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

/* Prints "b=..,h=.. row .. col .." style lines for the first mismatches. */
void grade_print_first(const grade_report *r, int H, const char *what);
const char *elem_status_name(elem_status s);
#endif
