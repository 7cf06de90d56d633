#include "cli.h"
#include "attention.h"
#include "attention_ranks.h"
#include "attention_serving.h"
#include "serving.h"
#include "fp8.h"
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *dtype_names[DTYPE_COUNT] = {"fp32", "fp16", "bf16", "e4m3"};

const char *dtype_name(int t) { return (t >= 0 && t < DTYPE_COUNT) ? dtype_names[t] : "all"; }

int dtype_from_name(const char *s) {
    for (int t = 0; t < DTYPE_COUNT; ++t)
        if (strcmp(s, dtype_names[t]) == 0) return t;
    return -1;
}

/* Whole-string integer in [lo, hi]; 0 on success. */
static int parse_long(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

void print_usage(const char *prog, int cpu_lesson) {
    if (cpu_lesson) {
        printf("usage: %s [--seed S] [--reps R] [--check-only] [--bench-only] [--csv]\n"
               "  Grades your online softmax against float64 and times it against the\n"
               "  three-pass (safe) and two-pass (naive) softmax.\n", prog);
        return;
    }
    static const int graded[] = ATTN_RANKS_GRADED;  /* "2, 3 and 4" */
    char graded_text[64] = "";
    const int n_graded = (int)(sizeof graded / sizeof graded[0]);
    for (int k = 0; k < n_graded; ++k)
        snprintf(graded_text + strlen(graded_text), sizeof graded_text - strlen(graded_text), "%s%d",
                 k == 0 ? "" : k + 1 < n_graded ? ", " : " and ", graded[k]);
    printf("usage: %s [options]\n"
           "  With no shape options: grade the lesson's case matrix, then time the bench\n"
           "  shape B=%d H=%d N=%d d=%d. With any shape option: grade and time that shape.\n"
           "  -b, --batch B      batch size, 1..%d\n"
           "  -H, --heads H      heads, 1..%d\n"
           "  -n, --seq N        sequence length, 1..%d\n"
           "  -d, --dim d        head dimension (the lesson lists what it supports)\n"
           "  -c, --causal       causal mask (lessons 05 and later)\n"
           "  -t, --dtype T      fp32 | fp16 | bf16 | e4m3 (default: every dtype the lesson supports;\n"
           "                     e4m3, FP8 inputs with bf16 O, is lesson 14's)\n"
           "  -s, --seed S       seed of the random inputs (default: new each run, printed)\n"
           "  -r, --reps R       timed launches, 1..%d (median reported; default 30)\n"
           "      --warmup W     untimed launches first, 0..1000 (default 3)\n"
           "      --timeout T    seconds one launch may take before it is reported as a hang,\n"
           "                     0.1..3600 (default 20)\n"
           "      --logit-scale S  Q multiplied by S, so every score is S times larger, 1..1000\n"
           "                     (default 1; the case matrix's x30 case is 30); with no shape\n"
           "                     option, for every case of the matrix\n"
           "      --check-only   grade only, no timing\n"
           "      --bench-only   time only, no grading\n"
           "      --csv          print one machine-readable row at the end\n"
           "      --fuzz K       grade K random valid shapes (B, H, N, d, causal, dtype; decode\n"
           "                     shapes too for lesson 12, paged and packed ones for a lesson\n"
           "                     that declares them) instead of the case matrix; implies --check-only\n"
           "  Decode shapes (lesson 12, and a lesson that reads a paged KV cache; K and V are\n"
           "  [B, H_kv, N_kv, d], Q and O [B, H, N, d]):\n"
           "      --kv-seq N_kv  keys in the KV cache per sequence, 1..%d (default: N; lesson 12\n"
           "                     with no shape option times N=%d queries against N_kv=%d)\n"
           "      --kv-heads H_kv  K/V heads, a divisor of H: query head h reads K/V head\n"
           "                     h / (H / H_kv) (grouped-query attention; default H)\n"
           "      --ragged       a different KV length per sequence (1..N_kv, or N..N_kv with\n"
           "                     --causal), drawn from the seed; key rows past a length hold NaN\n"
           "    With --causal, query i sees keys j <= N_kv - N + i (aligned to the end of the\n"
           "    cache), so --kv-seq must be >= --seq.\n"
           "  FP8 inputs (--dtype e4m3, lesson 14 only):\n"
           "      --quant Q      block (default): one scale per %d rows of each (b, h) slice;\n"
           "                     tensor: one scale per tensor\n"
           "      --hadamard     rotate Q and K along d by the Hadamard matrix before quantizing\n"
           "                     (incoherent processing)\n"
           "      --outliers     inputs N(0, 1) with 0.1%% of them x10 (the matrix has such a case)\n"
           "      --peaked       each query scores key 0 about %g above the other keys, whose\n"
           "                     probabilities then fall under e4m3's subnormals unless P is\n"
           "                     scaled before rounding (the matrix has such a case)\n"
           "  Serving layouts (only a lesson that declares them in its LESSON flags; every other\n"
           "  lesson refuses them):\n"
           "      --paged P      a paged KV cache (LESSON_PAGED_KV): K and V each one pool of pages of\n"
           "                     P keys, [num_pages, P, H_kv, d], read through a block table\n"
           "                     [B, max_pages]; P a power of two in %d..%d. Takes the decode shape\n"
           "                     options above; the pool's pages are shuffled, and its spare pages and\n"
           "                     the rows past each sequence's length hold NaN\n"
           "      --varlen MAX   a packed batch (LESSON_VARLEN): Q, O [total_q, H, d], K, V\n"
           "                     [total_k, H_kv, d], L [H, total_q], cu_seqlens offsets; lengths drawn\n"
           "                     log-uniform in 1..MAX (MAX 1..%d) from the seed until they hold\n"
           "                     B x N tokens (-b, -n; default %d x %d, H %d, d %d), at most %d\n"
           "                     sequences\n"
           "      --seqlens L    a packed batch of the lengths L = LEN,LEN,... (each 1..%d, at\n"
           "                     most %d of them; the list is the batch: no -b, -n); an item\n"
           "                     LEN_Q:LEN_K is a chunk of LEN_Q new queries after LEN_K - LEN_Q\n"
           "                     cached keys\n"
           "    With --causal a packed sequence's query i sees keys j <= seqlen_k - seqlen_q + i\n"
           "    (aligned bottom-right, as decode shapes are), so LEN_K must be >= LEN_Q.\n"
           "  Ranks (lesson 15 only, the ring):\n"
           "      --ranks P      the ring's ranks where they are virtual (all on one GPU), 1..%d\n"
           "                     (default: every case graded on %s ranks in turn, then timed on\n"
           "                     %d); a ring of one rank per GPU has as many ranks as GPUs\n"
           "      --transport T  ce | nccl: how the ring moves its K/V blocks, by the copy engines\n"
           "                     (device or peer copies) or by NCCL (default: the lesson's choice,\n"
           "                     which it prints)\n"
           "      --ring-delay-us U  the fault mode: every receive buffer poisoned and every\n"
           "                     transfer delayed U microseconds, 0..%d, so that a block read\n"
           "                     before its transfer completed fails every run (default: %d in\n"
           "                     grading, 0 in timing; 0: off)\n"
           "  -h, --help\n"
           "Exit status: 0 pass, 1 failed, 2 usage, 3 not implemented, 4 no GPU,\n"
           "5 CUDA error, 6 timeout, 7 out of memory.\n",
           prog, BENCH_B, BENCH_H, BENCH_N, BENCH_D, MAX_B, MAX_H, MAX_N, MAX_REPS, MAX_N, DECODE_BENCH_N,
           DECODE_BENCH_NKV, FP8_BLOCK_ROWS, (double)FP8_PEAK_GAP, ATTN_PAGE_MIN, ATTN_PAGE_MAX, MAX_N, VARLEN_BENCH_B, VARLEN_BENCH_N,
           VARLEN_BENCH_H, VARLEN_BENCH_D, MAX_B, MAX_N, MAX_B, ATTN_MAX_RANKS, graded_text, graded[0],
           ATTN_RING_DELAY_MAX_US, ATTN_RING_DELAY_GRADED);
}

int parse_options(int argc, char **argv, options *o, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    o->B = BENCH_B; o->H = BENCH_H; o->N = BENCH_N; o->d = BENCH_D;
    o->dtype = -1; o->ring_delay_us = -1; o->reps = 30; o->warmup = 3; o->timeout_s = 20.0; o->logit_scale = 1.0f;
    o->seed = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    o->seed %= 1000000007ULL; /* short enough to retype */

    enum { OPT_WARMUP = 1000, OPT_TIMEOUT, OPT_CHECK, OPT_BENCH, OPT_CSV, OPT_FUZZ, OPT_KV_SEQ, OPT_KV_HEADS,
           OPT_RAGGED, OPT_QUANT, OPT_HADAMARD, OPT_OUTLIERS, OPT_PEAKED, OPT_RANKS, OPT_PAGED, OPT_VARLEN, OPT_SEQLENS,
           OPT_TRANSPORT, OPT_RING_DELAY, OPT_LOGIT_SCALE };
    static const struct option longopts[] = {
        {"batch", required_argument, 0, 'b'}, {"heads", required_argument, 0, 'H'},
        {"seq", required_argument, 0, 'n'},   {"dim", required_argument, 0, 'd'},
        {"causal", no_argument, 0, 'c'},      {"dtype", required_argument, 0, 't'},
        {"seed", required_argument, 0, 's'},  {"reps", required_argument, 0, 'r'},
        {"warmup", required_argument, 0, OPT_WARMUP},
        {"timeout", required_argument, 0, OPT_TIMEOUT}, {"logit-scale", required_argument, 0, OPT_LOGIT_SCALE},
        {"check-only", no_argument, 0, OPT_CHECK}, {"bench-only", no_argument, 0, OPT_BENCH},
        {"csv", no_argument, 0, OPT_CSV},     {"help", no_argument, 0, 'h'},
        {"fuzz", required_argument, 0, OPT_FUZZ},
        {"kv-seq", required_argument, 0, OPT_KV_SEQ}, {"kv-heads", required_argument, 0, OPT_KV_HEADS},
        {"ragged", no_argument, 0, OPT_RAGGED},
        {"quant", required_argument, 0, OPT_QUANT}, {"hadamard", no_argument, 0, OPT_HADAMARD},
        {"outliers", no_argument, 0, OPT_OUTLIERS}, {"peaked", no_argument, 0, OPT_PEAKED},
        {"ranks", required_argument, 0, OPT_RANKS},
        {"transport", required_argument, 0, OPT_TRANSPORT}, {"ring-delay-us", required_argument, 0, OPT_RING_DELAY},
        {"paged", required_argument, 0, OPT_PAGED}, {"varlen", required_argument, 0, OPT_VARLEN},
        {"seqlens", required_argument, 0, OPT_SEQLENS},
        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    long v;
#define RANGE(name, lo, hi, dst)                                                            \
    do {                                                                                     \
        if (parse_long(optarg, lo, hi, &v)) {                                                \
            snprintf(err, errlen, "%s '%s' is not valid: expected an integer in %ld..%ld",   \
                     name, optarg, (long)(lo), (long)(hi));                                  \
            return 2;                                                                        \
        }                                                                                    \
        dst = (int)v;                                                                        \
    } while (0)
    while ((c = getopt_long(argc, argv, ":b:H:n:d:ct:s:r:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'b': RANGE("--batch", 1, MAX_B, o->B); o->shape_given = 1; o->given |= GIVEN_B; break;
        case 'H': RANGE("--heads", 1, MAX_H, o->H); o->shape_given = 1; o->given |= GIVEN_H; break;
        case 'n': RANGE("--seq", 1, MAX_N, o->N); o->shape_given = 1; o->given |= GIVEN_N; break;
        case 'd': RANGE("--dim", 1, MAX_D, o->d); o->shape_given = 1; o->given |= GIVEN_D; break;
        case OPT_KV_SEQ: RANGE("--kv-seq", 1, MAX_N, o->N_kv); o->shape_given = 1; o->given |= GIVEN_NKV; break;
        case OPT_KV_HEADS: RANGE("--kv-heads", 1, MAX_H, o->H_kv); o->shape_given = 1; o->given |= GIVEN_HKV; break;
        case OPT_RAGGED: o->ragged = 1; o->shape_given = 1; o->given |= GIVEN_RAGGED; break;
        case 'c': o->causal = 1; break;
        case OPT_QUANT:
            if (strcmp(optarg, "block") && strcmp(optarg, "tensor")) {
                snprintf(err, errlen, "--quant '%s' is not valid: expected block or tensor", optarg);
                return 2;
            }
            o->quant_tensor = !strcmp(optarg, "tensor");
            o->given |= GIVEN_FP8;
            break;
        case OPT_HADAMARD: o->hadamard = 1; o->given |= GIVEN_FP8; break;
        case OPT_OUTLIERS: o->outliers = 1; o->given |= GIVEN_FP8; break;
        case OPT_PEAKED: o->peaked = 1; o->given |= GIVEN_FP8; break;
        case OPT_RANKS: RANGE("--ranks", 1, ATTN_MAX_RANKS, o->ranks); break;
        case OPT_TRANSPORT:
            if (strcmp(optarg, "ce") && strcmp(optarg, "nccl")) {
                snprintf(err, errlen, "--transport '%s' is not valid: expected ce (the copy engines) or nccl", optarg);
                return 2;
            }
            o->transport = strcmp(optarg, "ce") ? ATTN_TRANSPORT_NCCL : ATTN_TRANSPORT_CE;
            break;
        case OPT_RING_DELAY: RANGE("--ring-delay-us", 0, ATTN_RING_DELAY_MAX_US, o->ring_delay_us); break;
        case OPT_PAGED:
            if (parse_long(optarg, ATTN_PAGE_MIN, ATTN_PAGE_MAX, &v) || !attn_page_size_valid((int)v)) {
                snprintf(err, errlen, "--paged '%s' is not valid: expected keys per page, a power of two in %d..%d "
                         "(8, 16, 32, 64, 128, 256, 512 or 1024)", optarg, ATTN_PAGE_MIN, ATTN_PAGE_MAX);
                return 2;
            }
            o->page_size = (int)v;
            o->shape_given = 1;
            o->given |= GIVEN_PAGED;
            break;
        case OPT_VARLEN:
            RANGE("--varlen", 1, MAX_N, o->varlen_max);
            o->shape_given = 1;
            o->given |= GIVEN_VARLEN;
            break;
        case OPT_SEQLENS: {
            char why[400];
            const int n = parse_seqlens(optarg, o->seqlen_q, o->seqlen_k, MAX_B, MAX_N, why, sizeof why);
            if (n < 0) {
                snprintf(err, errlen, "--seqlens '%.60s%s' is not valid: %s", optarg, strlen(optarg) > 60 ? "..." : "",
                         why);
                return 2;
            }
            o->n_seqs = n;
            o->shape_given = 1;
            o->given |= GIVEN_VARLEN;
            break;
        }
        case 't':
            o->dtype = dtype_from_name(optarg);
            if (o->dtype < 0) {
                snprintf(err, errlen, "--dtype '%s' is not valid: expected fp32, fp16 or bf16 (or e4m3, lesson 14)", optarg);
                return 2;
            }
            break;
        case 's': {
            char *end;
            errno = 0;
            unsigned long long s = strtoull(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-') {
                snprintf(err, errlen, "--seed '%s' is not valid: expected an integer in 0..%llu",
                         optarg, (unsigned long long)UINT64_MAX);
                return 2;
            }
            o->seed = s;
            o->seed_given = 1;
            break;
        }
        case 'r': RANGE("--reps", 1, MAX_REPS, o->reps); break;
        case OPT_WARMUP: RANGE("--warmup", 0, 1000, o->warmup); break;
        case OPT_TIMEOUT: {
            char *end;
            errno = 0;
            double t = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(t >= 0.1 && t <= 3600)) {
                snprintf(err, errlen, "--timeout '%s' is not valid: expected seconds in 0.1..3600", optarg);
                return 2;
            }
            o->timeout_s = t;
            break;
        }
        case OPT_LOGIT_SCALE: {
            char *end;
            errno = 0;
            double t = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(t >= 1 && t <= 1000)) {
                snprintf(err, errlen, "--logit-scale '%s' is not valid: expected a factor in 1..1000 (the case "
                         "matrix's x30 case: 30)", optarg);
                return 2;
            }
            o->logit_scale = (float)t;
            break;
        }
        case OPT_CHECK: o->check_only = 1; break;
        case OPT_BENCH: o->bench_only = 1; break;
        case OPT_CSV: o->csv = 1; break;
        case OPT_FUZZ: RANGE("--fuzz", 1, 100000, o->fuzz); o->check_only = 1; break;
        case 'h': return 1;
        case ':': snprintf(err, errlen, "option %s needs a value (see --help)", argv[optind - 1]); return 2;
        default: snprintf(err, errlen, "unknown option '%s' (see --help)", argv[optind - 1]); return 2;
        }
    }
#undef RANGE
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return 2;
    }
    if (o->fuzz && (o->bench_only || o->shape_given)) {
        snprintf(err, errlen, "--fuzz draws its own shapes: it excludes --bench-only and the shape options");
        return 2;
    }
    if (o->varlen_max && o->n_seqs) {
        snprintf(err, errlen, "--varlen draws the lengths of a packed batch and --seqlens gives them: give one of "
                 "them");
        return 2;
    }
    if (o->check_only && o->bench_only) {
        snprintf(err, errlen, "--check-only and --bench-only exclude each other");
        return 2;
    }
    return 0;
}

int resolve_shape(options *o, int decode, char *err, size_t errlen) {
    if (!decode) {
        o->N_kv = o->N;
        o->H_kv = o->H;
        o->ragged = 0;
        return 0;
    }
    if (!(o->given & GIVEN_B)) o->B = DECODE_BENCH_B;
    if (!(o->given & GIVEN_D)) o->d = DECODE_BENCH_D;
    if (!(o->given & GIVEN_H)) o->H = DECODE_BENCH_H;
    if (!(o->given & GIVEN_N)) o->N = DECODE_BENCH_N;
    if (!(o->given & GIVEN_HKV)) o->H_kv = (o->given & GIVEN_H) ? o->H : DECODE_BENCH_HKV;
    if (!(o->given & GIVEN_NKV)) o->N_kv = (o->given & GIVEN_N) ? o->N : DECODE_BENCH_NKV;
    if (o->H % o->H_kv != 0) {
        snprintf(err, errlen, "--kv-heads %d does not divide --heads %d: grouped-query attention shares each K/V "
                 "head among H / H_kv query heads (query head h reads K/V head h / (H / H_kv)); give a divisor of "
                 "%d", o->H_kv, o->H, o->H);
        return 2;
    }
    if (o->causal && o->N_kv < o->N) {
        snprintf(err, errlen, "--causal with --kv-seq %d < --seq %d: causal query i sees keys j <= N_kv - N + i "
                 "(aligned to the end of the cache), so query 0 would see none; give --kv-seq >= %d", o->N_kv, o->N,
                 o->N);
        return 2;
    }
    return 0;
}

int resolve_varlen(options *o, int default_d, char *err, size_t errlen) {
    if (o->given & (GIVEN_NKV | GIVEN_RAGGED)) {
        snprintf(err, errlen, "--kv-seq and --ragged are decode options: a packed batch (--varlen, --seqlens) gives "
                 "each sequence its own key count (--seqlens LEN_Q:LEN_K items; --varlen draws as many keys as "
                 "queries)");
        return 2;
    }
    if (o->given & GIVEN_PAGED) {
        snprintf(err, errlen, "--paged does not combine with --varlen or --seqlens: --paged takes decode shapes (K "
                 "and V [num_pages, page_size, H_kv, d]), a packed batch's K and V are [total_k, H_kv, d]");
        return 2;
    }
    if (o->n_seqs && (o->given & (GIVEN_B | GIVEN_N))) {
        snprintf(err, errlen, "--seqlens is the batch (B = the number of its items, the lengths its items): leave "
                 "out -b and -n, or draw the lengths with --varlen MAX -b B -n N (until B x N tokens)");
        return 2;
    }
    if (!o->n_seqs) {
        if (!(o->given & GIVEN_B)) o->B = VARLEN_BENCH_B;
        if (!(o->given & GIVEN_N)) o->N = VARLEN_BENCH_N;
        const long tokens = (long)o->B * o->N;
        const int n = varlen_draw(o->varlen_max, tokens, o->seed, o->seqlen_q, MAX_B);
        if (n < 0) {
            snprintf(err, errlen, "--varlen %d with -b %d -n %d (%ld tokens) draws more than %d sequences: give a "
                     "larger --varlen or fewer tokens (-b x -n)", o->varlen_max, o->B, o->N, tokens, MAX_B);
            return 2;
        }
        o->n_seqs = n;
        memcpy(o->seqlen_k, o->seqlen_q, sizeof(int) * (size_t)n);
    }
    if (!(o->given & GIVEN_H)) o->H = VARLEN_BENCH_H;
    if (!(o->given & GIVEN_D)) o->d = default_d;
    if (!(o->given & GIVEN_HKV)) o->H_kv = o->H;
    if (o->H % o->H_kv != 0) {
        snprintf(err, errlen, "--kv-heads %d does not divide --heads %d: grouped-query attention shares each K/V head "
                 "among H / H_kv query heads (query head h reads K/V head h / (H / H_kv)); give a divisor of %d",
                 o->H_kv, o->H, o->H);
        return 2;
    }
    long total_q = 0, total_k = 0;
    o->N = o->N_kv = 0;
    for (int b = 0; b < o->n_seqs; ++b) {
        if (o->causal && o->seqlen_k[b] < o->seqlen_q[b]) {
            snprintf(err, errlen, "--causal with --seqlens item %d, %d:%d (queries:keys): causal query i sees keys "
                     "j <= seqlen_k - seqlen_q + i (aligned bottom-right), so its first queries would see none; give "
                     "LEN_K >= LEN_Q", b + 1, o->seqlen_q[b], o->seqlen_k[b]);
            return 2;
        }
        total_q += o->seqlen_q[b];
        total_k += o->seqlen_k[b];
        if (o->seqlen_q[b] > o->N) o->N = o->seqlen_q[b];
        if (o->seqlen_k[b] > o->N_kv) o->N_kv = o->seqlen_k[b];
    }
    if (total_q > INT_MAX || total_k > INT_MAX) {
        snprintf(err, errlen, "the packed batch holds %ld queries and %ld keys: cu_seqlens are ints, so each total "
                 "must be at most %d", total_q, total_k, INT_MAX);
        return 2;
    }
    o->B = o->n_seqs;
    o->ragged = 0;
    return 0;
}
