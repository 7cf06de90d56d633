/* runner_main.cu: main() of every GPU lesson binary, the one runner skeleton (runner_main.h).
 * It grades the lesson's entry point against the float64 CPU reference on a fixed case matrix
 * (or the command line's shape, or --fuzz shapes), then times it; what differs between the
 * forward pass, decoding and the backward pass comes from the lesson's runner_kind. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <string>
#include <vector>
#include "cuda_check.h"
#include "runner_main.h"
extern "C" {
#include "rng.h"
}

static size_t g_free_at_start; /* device memory free before any case: the baseline of mem_bytes */

/* time_launches' callback: the lesson's entry point on problem arg. */
static int launch_problem(void *arg) {
    problem_core *p = (problem_core *)arg;
    return p->launch(p);
}

/* Grades one case with fresh inputs from `seed`: ATTN_OK when it passes, ATTN_NOT_IMPLEMENTED,
 * or -1 when it failed (the FAIL lines are printed, then the rerun line). */
static int grade_case(const runner_kind &K, const shape_case &c, dtype_t dt, uint64_t seed, const options &o) {
    problem_core *p = K.alloc(c, dt, seed, true);
    run_result r;
    const int rc = run_once(*p, o.timeout_s, r);
    if (rc != ATTN_OK) {
        K.release(p);
        report_entry_rc(rc, K.entry);
        return rc;
    }
    verdict v = K.grade(*p, r, seed);
    const bool ok = K.more_checks(*p, v, r, seed, o) && v.pass;
    print_case_line(ok, p->c, dt, v.detail, o.seed);
    K.release(p);
    return ok ? ATTN_OK : -1;
}

/* "", or how the cases are spread over the ranks of a ranks lesson (runner_ranks): ", each on 2,
 * 3 and 4 ranks", ", on 2, 3 and 4 ranks in turn" (--fuzz), ", on 4 ranks, one per GPU". */
static std::string plan_text(const rank_plan &R, bool fuzz) {
    if (R.fixed) return ", on " + std::to_string(R.fixed) + " ranks, one per GPU";
    if (R.P[0] == 0) return "";
    std::string s = R.P.size() > 1 && !fuzz ? ", each on " : ", on ";
    for (size_t k = 0; k < R.P.size(); ++k)
        s += (k == 0 ? "" : k + 1 < R.P.size() ? ", " : " and ") + std::to_string(R.P[k]);
    return s + " ranks" + (R.P.size() > 1 && fuzz ? " in turn" : "");
}

/* The grading part of a run: the cases (the command line's shape, --fuzz shapes, or the case
 * matrix) times the dtypes asked for, one line per case, "N of M cases passed", then what the
 * failing cases have in common (print_failure_pattern). A ranks lesson grades every case on
 * each P of R (--fuzz: shape i on the i-th P in turn), since a ring wrong only from three ranks
 * on passes on two. Returns -1 with *passed, *total filled, or
 * EXIT_NOT_IMPLEMENTED (after the message, and the CSV row with --csv). */
static int grade_cases(const runner_kind &K, const options &o, const shape_case &bench, const rank_plan &R,
                       int *passed, int *total) {
    std::vector<shape_case> cases;
    if (o.shape_given) {
        shape_case custom = bench;
        custom.name = "custom";
        cases = {custom};
    } else {
        cases = o.fuzz ? fuzz_shapes(o.fuzz, o.seed) : case_matrix(K.causal_edges);
        for (shape_case &c : cases) { /* the command line's FP8 quantization, for every case */
            c.outliers |= o.outliers;
            c.peaked |= o.peaked;
            if (o.logit_scale != 1.f) c.qscale = o.logit_scale;
            c.fp8_tensor = o.quant_tensor;
            c.hadamard = o.hadamard;
        }
    }
    printf("Grading against float64 on the CPU (%zu cases x %s%s%s):\n", cases.size(),
           o.dtype >= 0 ? dtype_name(o.dtype) : lesson_dtypes().c_str(), plan_text(R, o.fuzz).c_str(),
           ring_fault_text(o).c_str());
    std::vector<shape_case> runs; /* the cases on each P of R in turn (--fuzz: case i on the i-th P) */
    for (size_t k = 0; k < (o.fuzz ? 1 : R.P.size()); ++k)
        for (size_t i = 0; i < cases.size(); ++i) {
            runs.push_back(cases[i]);
            runs.back().ranks = R.P[o.fuzz ? i % R.P.size() : k];
        }
    std::vector<case_outcome> outcomes;
    *passed = *total = 0;
    for (int t = 0; t < DTYPE_COUNT; ++t) {
        if (!(LESSON.dtypes & DTYPE_BIT(t)) || (o.dtype >= 0 && o.dtype != t)) continue;
        for (const shape_case &c : runs) {
            set_ranks(c.ranks);
            const int rc = grade_case(K, c, (dtype_t)t, case_seed(o.seed, c, t), o);
            if (rc == ATTN_NOT_IMPLEMENTED) {
                printf("NOT IMPLEMENTED: lesson %02d's %s says it is not written yet.\n"
                       "  Open lessons/%s/ and work through TODO(1), TODO(2), ... then run ./lesson%d again.\n",
                       LESSON.number, K.entry, LESSON.name, LESSON.number);
                if (o.csv) print_csv_row("not-implemented", 0, (int)cases.size(), t, bench, -1, 0, 0, 0, -1);
                return EXIT_NOT_IMPLEMENTED;
            }
            ++*total;
            *passed += rc == ATTN_OK;
            outcomes.push_back(outcome_of(c, rc == ATTN_OK));
        }
    }
    printf("%d of %d cases passed\n", *passed, *total);
    print_failure_pattern(outcomes, K.what_causal, K.what_ragged);
    return -1;
}

/* Times shape c: one graded-style launch first (it also allocates any workspace the method
 * keeps, and every output must be written), then time_launches (median of o.reps after
 * o.warmup, L2 flushed). mem: the device memory the method holds beyond the harness' arrays.
 * A method that does not run exits: EXIT_NOT_IMPLEMENTED, or report_entry_rc's status. */
static run_timing time_shape(const runner_kind &K, const shape_case &c, dtype_t dt, const options &o,
                             const gpu_env &g, uint64_t seed) {
    problem_core *p = K.alloc(c, dt, seed, false);
    run_result r;
    const int rc = run_once(*p, o.timeout_s, r);
    if (rc != ATTN_OK) {
        K.release(p);
        report_entry_rc(rc, K.entry);
        exit(EXIT_NOT_IMPLEMENTED);
    }
    size_t free1, total;
    CUDA_CHECK(cudaMemGetInfo(&free1, &total));
    run_timing t;
    /* even when only timing, an output nobody wrote is not a result */
    t.unwritten = count_unwritten(*p, r);
    if (t.unwritten)
        fprintf(stderr, "FAIL: %zu elements of %s were not written on the timed shape\n", t.unwritten,
                output_names(*p).c_str());
    const size_t guards = p->guarded_arrays * 2 * GUARD_BYTES;
    t.mem = g_free_at_start > free1 + guards ? g_free_at_start - free1 - guards : 0;
    t.ms = time_launches(launch_problem, p, p->stream, o.warmup, o.reps, o.timeout_s, &g);
    t.tflops = K.flops(*p) / (t.ms * 1e-3) / 1e12;
    t.pct = 100.0 * t.tflops / gpu_peak(&g, dt);
    t.gbps = K.kv_bytes ? K.kv_bytes(*p) / (t.ms * 1e-3) / 1e9 : 0;
    K.release(p);
    return t;
}

/* What the failing cases have in common, for cases graded in separate runs: the CPU emulator
 * (tests/emu/grade.py) grades each case in a run of its own, then hands their outcomes back here,
 * one per line, "pass ARGS" or "fail ARGS" (ARGS: the case's command line), in the environment
 * variable EMU_CASE_OUTCOMES, so that its diagnosis is the one a GPU run of the same cases prints
 * (print_failure_pattern). Prints nothing when no pattern fits. Returns EXIT_PASS, or EXIT_USAGE
 * for a line it cannot read. */
static int print_outcomes(const runner_kind &K, const char *prog, const char *text) {
    std::vector<case_outcome> outcomes;
    const char *line = text;
    while (*line) {
        const char *end = strchr(line, '\n');
        std::string l(line, end ? (size_t)(end - line) : strlen(line));
        line = end ? end + 1 : line + l.size();
        std::vector<std::string> words;
        for (size_t i = 0, j; i < l.size(); i = j + 1) {
            j = l.find(' ', i);
            if (j == std::string::npos) j = l.size();
            if (j > i) words.push_back(l.substr(i, j - i));
        }
        if (words.empty()) continue;
        if (words[0] != "pass" && words[0] != "fail") {
            fprintf(stderr, "%s: EMU_CASE_OUTCOMES: a line starts with \"%s\", not pass or fail\n", prog,
                    words[0].c_str());
            return EXIT_USAGE;
        }
        std::vector<char *> args{(char *)prog};
        for (size_t k = 1; k < words.size(); ++k) args.push_back(&words[k][0]);
        options o;
        if (runner_options((int)args.size(), args.data(), o, "lesson 05", K.help_note) >= 0) return EXIT_USAGE;
        outcomes.push_back(outcome_of(bench_shape(o), words[0] == "pass"));
    }
    print_failure_pattern(outcomes, K.what_causal, K.what_ragged);
    return EXIT_PASS;
}

int main(int argc, char **argv) {
    const runner_kind &K = lesson_runner_kind();
    if (const char *oc = getenv("EMU_CASE_OUTCOMES"))
        return print_outcomes(K, strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0], oc);
    options o;
    if (int rc = runner_options(argc, argv, o, "lesson 05", K.help_note); rc >= 0) return rc;
    gpu_env g;
    g_free_at_start = runner_gpu_init(g, o);
    const dtype_t dt_time = o.dtype >= 0 ? (dtype_t)o.dtype : (dtype_t)__builtin_ctz(LESSON.dtypes);
    const rank_plan ranks = runner_ranks(o);
    shape_case bench = bench_shape(o);
    bench.ranks = ranks.P[0]; /* timed on the first P graded */
    if (!(o.csv && o.bench_only))
        printf("Lesson %02d: %s\n%sseed %llu (rerun with --seed %llu)\n", LESSON.number, LESSON.title, K.banner,
               (unsigned long long)o.seed, (unsigned long long)o.seed);
    int passed = 0, total = 0;
    if (!o.bench_only) {
        set_ring_faults(o, true);  /* a ring's fault mode: graded in it, timed without */
        if (int rc = grade_cases(K, o, bench, ranks, &passed, &total); rc >= 0) return rc;
        set_ring_faults(o, false);
    }
    run_timing tm = {0, 0, 0, 0, 0, 0};
    bool timed = false;
    if (!o.check_only) {
        set_ranks(bench.ranks);
        tm = time_shape(K, bench, dt_time, o, g, rng_mix(o.seed, 77));
        timed = true;
        if (!(o.csv && o.bench_only)) K.print_time(tm, bench, dt_time, o, g);
        if (K.causal_ratio && LESSON.causal && !o.causal && !o.bench_only) {
            shape_case cz = bench;
            cz.causal = 1;
            print_causal_ratio(time_shape(K, cz, dt_time, o, g, rng_mix(o.seed, 78)), tm.ms);
        }
    }
    const bool ok = passed == total && tm.unwritten == 0;
    if (o.csv)
        print_csv_row(ok ? "pass" : "fail", passed, total, dt_time, bench, timed ? tm.ms : -1, tm.tflops, tm.pct,
                      tm.mem, K.csv_kv_gbps ? tm.gbps : -1);
    else if (!o.bench_only)
        printf("%s\n", ok ? "PASS" : "FAIL");
    return ok ? EXIT_PASS : EXIT_FAILED;
}
