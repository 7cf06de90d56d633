/* diagnose.h: what the numbers say when only one of O and L is wrong.
 *
 * The grader grades O and the logsumexp L separately. When one passes and the other fails,
 * the passing one pins down half of the kernel (O right: the online softmax inside the loop
 * works; L right: m and l are right), and the way the failing one is off names the bug:
 * a kernel L that is the reference times 1/ln 2 was left in base 2, one that is log(l) alone
 * lost the max m, an O that is the reference times l was never divided by l. These functions
 * test such hypotheses on the failing rows and write one diagnosis sentence. Plain C, no GPU:
 * tests/unit/test_grade.c checks them on synthetic rows. */
#ifndef DIAGNOSE_H
#define DIAGNOSE_H
#include <stddef.h>

/* One row whose L failed while O passed. Natural-log units throughout. */
typedef struct {
    double ref_L;  /* float64 reference: m + log(l) */
    double got_L;  /* the kernel's L (finite) */
    double m;      /* reference row max of the scaled scores, scale * max_j Q_i . K_j */
    double scale;  /* the softmax scale, for "m kept unscaled" */
} l_row;

/* Writes into out (NUL-terminated, at most cap bytes) a sentence that starts with
 * "O passes; L (logsumexp) is wrong", gives the median ratio got/ref and offset got - ref,
 * and names the hypothesis that fits at least 90% of the rows (base 2, m missing, log(l)
 * missing, m unscaled, mixed bases), or for a near-constant offset of about -ln 4 the l that
 * was not summed across the 4 lanes of a row; otherwise the usual causes. n >= 1. */
void diagnose_L(const l_row *rows, int n, char *out, size_t cap);

/* One row whose O failed while L passed. */
typedef struct {
    const double *ref;  /* [d] float64 reference */
    const double *got;  /* [d] the kernel's O (finite) */
    int d;
    double l;           /* reference row sum exp(L - m) */
} o_row;

/* Writes a sentence that starts with "L passes (so m and l are right); O is wrong" and names
 * the per-row factor between the kernel's O and the reference when there is one: l (O never
 * divided by l), 1/l (divided twice), a constant 4 or 2 (divided by one lane's partial l),
 * another constant; otherwise the usual causes (P V, the rescaling of O, the final
 * division). n >= 1. */
void diagnose_O(const o_row *rows, int n, char *out, size_t cap);
/* Writes into the guard regions around an output [B*H, N, width] (width d for O, 1 for L):
 * `after` elements changed past the end, the first and last of them after_first and
 * after_last elements past it; `before` elements changed in front of it, the nearest
 * before_nearest and the farthest before_farthest elements before element 0 (see
 * buffers.h's guard_hits). Writes past the end of the last (b, h) slice come from a row
 * index >= N; in every other slice the same bug writes into the next slice: row N of head h
 * is row 0 of head h + 1. Writes out of one output into another are not seen here (only
 * the guards are). Writes nothing (out = "") when before = after = 0. */
void describe_outside(char *out, size_t cap, const char *name, long before, long after, long after_first,
                      long after_last, long before_nearest, long before_farthest, int B, int H, int N,
                      int width);
#endif
