/* runner_grade.h: the grading pieces every runner shares (the forward and decode runner,
 * runner_attention.cu, and the backward runner, runner_backward.cu), one idea each:
 *   - a problem's outputs on the device and one graded run that fills them (run_once);
 *   - the rows a case grades, with the float64 and the plain same-precision references on
 *     them (graded_rows; each runner computes its own, the tolerance follows from them,
 *     grade.h's tolerance_from_plain);
 *   - the element check of one output against its reference, every other element checked
 *     written (check_output);
 *   - the writes outside an output (outside_writes), the differences between two runs
 *     (count_differences), the FAIL block of a case (print_fail_block).
 * What each kind of lesson makes of a failure (diagnose.h, diagnose_bwd.h) and how it words
 * its report stay in its runner. C++ (the runners are .cu files). */
#ifndef RUNNER_GRADE_H
#define RUNNER_GRADE_H
#include <cuda_runtime.h>
#include <functional>
#include <stddef.h>
#include <string>
#include <utility>
#include <vector>
#include "attention.h"
#include "buffers.h"
#include "runner_common.h"
extern "C" {
#include "grade.h"
}

enum { MAX_OUTPUTS = 3 }; /* O and L; dQ, dK and dV */

/* One output of a problem on the device: [B, H, N, width] elements of type dt (width d, or 1
 * for L), between poison guards. */
struct device_output {
    const char *name; /* as the messages name it: "O", "L", "dQ", ... */
    dtype_t dt;       /* the lesson's element type, fp32 for L */
    int width;
    guarded_buf buf;
    guard_hits hit;   /* what the last graded launch wrote outside it */
};

/* What every runner's problem holds beside its inputs (each runner derives its Problem from it):
 * the case, the outputs the grader reads back, the stream, and how to launch the lesson on it. */
struct problem_core {
    shape_case c;     /* normalized (runner_common.h) */
    dtype_t dt;       /* the element type of this case */
    int n_out;
    device_output out[MAX_OUTPUTS];
    int guarded_arrays;                 /* guarded arrays on the device, inputs and outputs: the
                                           guards are left out of the memory a method holds */
    cudaStream_t stream;
    int (*launch)(problem_core *p);     /* the lesson's entry point on this problem's arguments */
    const char *kernels;                /* what a hang names: "the lesson's kernel" */
    /* The outputs' layout, for a problem not laid out [B, H, N, width] (a packed batch,
     * runner_varlen.cu): where row i of (b, h) slice bh of output k lies, in rows of its width,
     * or NO_ROW past that slice's own length; and how many rows each output has. NULL and 0: the
     * row bh * N + i of B * H * N rows. */
    size_t (*row_at)(const problem_core &p, int k, int bh, int i) = nullptr;
    size_t rows = 0;
};
static const size_t NO_ROW = (size_t)-1;
/* Row i of slice bh of output k (problem_core's row_at), NO_ROW when that slice has no row i. */
size_t output_row(const problem_core &p, int k, int bh, int i);

/* One run's outputs as the device stored them: out[k] holds p.out[k]'s bytes. */
struct run_result {
    std::vector<char> out[MAX_OUTPUTS];
};

/* How one run of a case graded: pass, and what the pass line says after the shape. */
struct verdict {
    bool pass;
    std::string detail;
};

/* Appends output p.out[p.n_out] (name, element type, width) with B*H*N*width elements (rows*width when set), data and
 * guards poisoned. Exits EXIT_OOM with a message naming it when it does not fit
 * (guarded_alloc_or_exit). */
void add_output(problem_core &p, const char *name, dtype_t dt, int width);
void free_outputs(problem_core &p);
/* Elements in output k: B*H*N*width (rows*width when set). */
size_t output_elements(const problem_core &p, int k);
/* "O and L", "dQ, dK and dV": the outputs' names, for messages. */
std::string output_names(const problem_core &p);

/* One graded launch: poisons every output and re-arms its guards, launches (p.launch), waits
 * (a hang exits EXIT_TIMEOUT, naming p.kernels), copies each output into r.out[k] and records
 * in p.out[k].hit what the launch wrote outside it. Returns the entry point's code; r and the
 * hits are left as they were unless it is ATTN_OK. CUDA errors exit through CUDA_CHECK. */
int run_once(problem_core &p, double timeout_s, run_result &r);

/* Elements of every output of r that still hold the poison (a timed shape must write all). */
size_t count_unwritten(const problem_core &p, const run_result &r);

/* The rows a case grades against the float64 reference, and the references on them: for output
 * k, ref[k] and plain[k] hold rows.size() x p.out[k].width values, row r's from r * width on. */
struct graded_rows {
    std::vector<std::pair<int, int>> rows; /* (bh, i) with bh = b * H + h, ascending */
    std::vector<double> ref[MAX_OUTPUTS];   /* float64 (cpu_reference.h) */
    std::vector<double> plain[MAX_OUTPUTS]; /* the plain same-precision computation (*_lowp) */
};
/* The inputs of one attention row for forward_rows: q (d floats), K and V from the row's first key
 * (d floats per key), and how many keys it sees (nk < 1: none). */
struct attention_row {
    const float *q, *K, *V;
    int nk;
};
/* A forward case's graded_rows: O (output 0, d values per row) and L (output 1) of each picked row
 * (bh, i) in float64 (attention_prefix_f64) and as a plain attention in dtype computes them
 * (attention_prefix_lowp, cpu_reference.h), the rows in parallel; row_of(bh, i) gives each row's
 * inputs in the runner's own layout. */
graded_rows forward_rows(std::vector<std::pair<int, int>> rows, int d, float scale, dtype_t dtype,
                         const std::function<attention_row(int, int)> &row_of);
/* max |plain - ref| over output k's graded elements: the error tolerance_from_plain starts from. */
double plain_error(const graded_rows &g, int k);
/* max |ref| over output k's graded elements. */
double max_abs_ref(const graded_rows &g, int k);

/* The element check of output k of one run (got: r.out[k]): grader_check of every element of
 * the graded rows against g.ref[k] within tol, then every element of the other rows must have
 * been written (a poisoned one counts as bad). Returns the grader ([B*H, N, width]; grade.h);
 * the caller finishes it (grader_finish_ex: the summary's wording is the caller's) and frees it. */
grader *check_output(const problem_core &p, int k, const graded_rows &g, const std::vector<char> &got, tolerance tol);

/* "wrote outside O: ..." (diagnose.h's describe_outside) for every output whose guards the last
 * graded run wrote, joined by "\n      "; "" when none did. */
std::string outside_writes(const problem_core &p);

/* Elements of output k in rows [r0, r1) of every (b, h) slice (those it has: output_row) where runs a and b differ:
 * bitwise, or with `within` by more than tolerance t (a poisoned element always differs).
 * max_diff, when given, grows to the largest finite difference seen (within only). */
long count_differences(const problem_core &p, int k, const std::vector<char> &a, const std::vector<char> &b, int r0,
                       int r1, bool within, tolerance t, double *max_diff);

/* The FAIL block of a case: "    FAIL  NAME DTYPE[ causal][ x30 logits]" (the x30 part when
 * name_x30), then `why` (its lines indented by the caller), then the first mismatches of each
 * output (grade_print_first). rep[k] is output k's report. */
void print_fail_block(const problem_core &p, bool name_x30, const std::string &why, const grade_report *rep);
#endif
