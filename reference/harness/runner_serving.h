/* runner_serving.h: the serving layouts of attention.h in the forward runner. A paged KV cache is a
 * decode problem whose K and V lie in a pool (runner_attention.cu builds it, and grades a lesson's
 * append to it; runner_serving.cu says what a failure points at); a packed batch is a problem of its own (runner_varlen.cu), which
 * runner_attention.cu's kinds hand its cases to. Both files are linked into the forward runner's
 * binaries only. C++. */
#ifndef RUNNER_SERVING_H
#define RUNNER_SERVING_H
#include <functional>
#include <string>
#include <utility>
#include <vector>
#include "runner_common.h"
#include "runner_grade.h"
extern "C" {
#include "grade.h"
#include "serving.h"
}

/* ---- what a wrong row matches ---- */

/* One graded row of a kernel's run as it came back: O (d values) and L, and the tolerances of its
 * case. */
struct got_row {
    const double *O;
    double L;
    int d;
    tolerance tolO, tolL;
    double scale;
};
/* The key rows of a hypothesis: key(j, 0) points at K_j (d floats), key(j, 1) at V_j, or NULL for a
 * row the kernel would have read as NaN (past the pool, a spare page). */
typedef std::function<const float *(int j, int which)> key_rows;
/* Whether every value of row r is finite. A hypothesis is tested on finite rows only: a row of NaN
 * matches every reading that meets a NaN, which says little. */
bool finite_row(const got_row &r);
/* Whether row r is, within its tolerances, the float64 attention of q over keys 0 .. nk - 1 given
 * by key (nk < 1: O = 0, L = -inf, the course's fully masked row); a NaN where the hypothesis
 * has a NaN (or an infinity where it has one) counts as a match. */
bool row_matches(const got_row &r, const float *q, int nk, const key_rows &key);

/* ---- a paged KV cache (decode shapes; runner_attention.cu) ---- */

/* What the paged diagnosis reads of a graded decode case: its shape, page map and inputs as
 * stored: Q [B, H, N, d], the K and V pools [num_pages, page_size, H_kv, d], the lengths. */
struct paged_case {
    const shape_case *c;
    const page_map *pages;
    const float *Q;
    const float *pool[2];
    const int *seqlens;
    double scale;
};
/* The graded rows of one run: rows[r] = (b * H + h, i), bad[r] whether O or L failed there, the
 * kernel's O and L on them (got_row per row). */
struct graded_run {
    std::vector<std::pair<int, int>> rows;
    std::vector<char> bad;
    std::vector<got_row> got;
};
/* The lines a failing paged case adds to its FAIL block, each "diagnosis: ...": which sequences are
 * wrong (describe_sequences), whether they are the ones that end inside a page, what their rows
 * match (another sequence's row of block_table, the pool read in order without the table,
 * another K/V head, causal aligned top-left), where a causal sequence's rows turn wrong (the
 * first key, and page, they see that the right rows do not), and where to look. Lines joined by
 * "\n      ", no trailing newline. */
std::string paged_diagnosis(const paged_case &pc, const graded_run &run);

/* ---- the append of a decoding step's keys (attention_append_kv; runner_attention.cu) ---- */

/* A graded paged case whose pools the lesson's append wrote: its shape, page map and lengths, the
 * new keys per sequence, and per pool (0: K, 1: V) the bytes it must hold after the append (want)
 * and the bytes the device holds (got), es bytes an element, with the writes outside it (hit). */
struct append_case {
    const shape_case *c;
    const page_map *pages;
    const int *seqlens;
    int n_new;
    dtype_t dt;
    int es; /* bytes an element */
    const std::vector<char> *want[2], *got[2];
    guard_hits hit[2];
};
/* "" when both pools hold what they must; else the lines of the case's FAIL block, each
 * "diagnosis: ...": how many key rows (the d values of one key and K/V head) are wrong, a new key
 * that does not hold its values (by sequence, key, page and row; still NaN: not written), a row
 * that is no new key's but was written and whose new key it holds (a key of the same sequence
 * some keys away, another sequence's page, a page no sequence uses, another K/V head), the writes
 * outside a pool, and where new token t belongs. Lines joined by "\n      ", no trailing newline. */
std::string append_diagnosis(const append_case &ac);

/* ---- a packed batch (runner_varlen.cu) ---- */

/* The kinds' operations on a packed case (is_varlen), which runner_attention.cu's kinds call
 * for those cases: as runner_main.h's runner_kind members of the same names. */
problem_core *varlen_alloc(const shape_case &c, dtype_t dt, uint64_t seed, bool graded);
void varlen_release(problem_core *p);
verdict varlen_grade(problem_core &p, const run_result &r, uint64_t seed);
bool varlen_more_checks(problem_core &p, verdict &v, const run_result &r, uint64_t seed, const options &o);
/* 4 H d times the keys each query sees, counted as the forward kind counts a rectangular batch:
 * seqlen_q seqlen_k per sequence, less seqlen_q^2 / 2 when causal (N^2 / 2 for equal lengths). */
double varlen_flops(const problem_core &p);
/* Bytes of K and V the packed batch holds (each key read once). */
double varlen_kv_bytes(const problem_core &p);
#endif
