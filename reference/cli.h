/* cli.h: the command line shared by every lesson binary. */
#ifndef CLI_H
#define CLI_H
#include <stddef.h>
#include <stdint.h>

#define BENCH_B 8    /* GPT-2 small layer: the course's default bench shape */
#define BENCH_H 12
#define BENCH_N 1024
#define BENCH_D 64

/* The --csv header every lesson binary prints; make grade, make results and make bench read it. */
#define CSV_HEADER "lesson,status,cases_passed,cases_total,dtype,B,H,N,d,causal,ms,tflops,peak_pct,mem_bytes"

typedef struct {
    int B, H, N, d;
    int shape_given;      /* any of -b/-H/-n/-d given: grade and time that one shape */
    int causal;
    int dtype;            /* -1: every dtype the lesson supports */
    uint64_t seed;
    int seed_given;
    int reps, warmup;
    double timeout_s;     /* per launch; a kernel running longer is reported as a hang */
    int check_only, bench_only, csv;
    int fuzz;             /* >0: grade this many random valid shapes instead of the matrix */
} options;

/* Limits, shown in the refusals. */
#define MAX_B 4096
#define MAX_H 1024
#define MAX_N (1 << 20)
#define MAX_D 256
#define MAX_REPS 100000

/* Parses argv into *o (defaults first). Returns 0 on success, 1 when --help was
 * printed, 2 on a bad value (a message naming the option and its valid range is
 * written to err). Never exits. */
int parse_options(int argc, char **argv, options *o, char *err, size_t errlen);
void print_usage(const char *prog, int cpu_lesson);
const char *dtype_name(int dtype);
int dtype_from_name(const char *s); /* -1 if unknown */
#endif
