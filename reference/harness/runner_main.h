/* runner_main.h: the one runner skeleton (runner_main.cu: main) and the table of operations a
 * kind of lesson plugs into it. Three kinds: the forward pass and decoding (runner_attention.cu)
 * and the backward pass (runner_backward.cu); a binary links exactly one of those two files,
 * the Makefile picks it (a source that defines attention_backward gets the backward one).
 *
 * main, per run: the command line (runner_options), the GPU, the ranks of a lesson that runs
 * over ranks (runner_ranks), the banner; then per dtype and case, each on every P of those
 * ranks (grade_cases): alloc, run_once, grade, more_checks, the verdict line, release; then the
 * timed shape: alloc (graded false), run_once, time_launches, flops and kv_bytes, print_time,
 * with the causal ratio where the kind has it; the CSV row or PASS / FAIL, and the exit status
 * (attention.h). C++. */
#ifndef RUNNER_MAIN_H
#define RUNNER_MAIN_H
#include <stdint.h>
#include "gpu_env.h"
#include "runner_common.h"
#include "runner_grade.h"

struct runner_kind {
    /* wording */
    const char *entry;     /* the entry point the messages name: "attention_forward" */
    const char *help_note; /* printed after --help's usage; NULL: nothing */
    const char *banner;    /* printed between the lesson's title and the seed line ("": nothing) */
    /* the cases: case_matrix(causal_edges); what print_failure_pattern advises (NULL: the
     * forward pass's wording) */
    bool causal_edges;
    const char *what_causal, *what_ragged;
    /* A problem of shape c with fresh inputs from seed, O and L (forward) or dQ, dK, dV
     * (backward) allocated as outputs. graded: the case is graded (the host keeps its inputs
     * for the references); false: only timed (a kind may draw the inputs on the device then).
     * Exits EXIT_OOM when it does not fit. release frees all of it. */
    problem_core *(*alloc)(const shape_case &c, dtype_t dt, uint64_t seed, bool graded);
    void (*release)(problem_core *p);
    /* Grades run r of p against the float64 reference; prints the FAIL block when it fails. */
    verdict (*grade)(problem_core &p, const run_result &r, uint64_t seed);
    /* The checks that take more runs after r graded as v: a re-run on the same inputs, the
     * causal dependency tests; prints a FAIL line for each that fails, may add to v.detail.
     * Returns whether all held. */
    bool (*more_checks)(problem_core &p, verdict &v, const run_result &r, uint64_t seed, const options &o);
    /* Timing: the FLOPs of one launch; the bytes of K and V it must read (NULL: not counted);
     * the "Time: ..." line. causal_ratio: also time the causal version of a non-causal bench
     * shape and print the ratio. csv_kv_gbps: the CSV row's kv_gbps column is filled. */
    double (*flops)(const problem_core &p);
    double (*kv_bytes)(const problem_core &p);
    void (*print_time)(const run_timing &t, const shape_case &bench, dtype_t dt, const options &o, const gpu_env &g);
    bool causal_ratio;
    bool csv_kv_gbps;
};

/* The kind of the lesson this binary links: defined by runner_attention.cu (forward, or decode
 * for a LESSON_DECODE lesson) or by runner_backward.cu (backward). */
const runner_kind &lesson_runner_kind();
#endif
