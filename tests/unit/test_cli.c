/* Command-line values: refused with the valid range, never accepted silently. */
#include <criterion/criterion.h>
#include <string.h>
#include "cli.h"

static int parse(options *o, char *err, const char *a, const char *b) {
    char *argv[4] = {"lessonX", (char *)a, (char *)b, NULL};
    int argc = b ? 3 : (a ? 2 : 1);
    return parse_options(argc, argv, o, err, 256);
}

Test(cli, defaults_are_the_bench_shape) {
    options o; char err[256];
    cr_assert_eq(parse(&o, err, NULL, NULL), 0);
    cr_assert(o.B == 8 && o.H == 12 && o.N == 1024 && o.d == 64 && !o.shape_given && o.dtype == -1);
}

Test(cli, valid_values_are_taken) {
    options o; char err[256];
    cr_assert_eq(parse(&o, err, "--seq", "77"), 0);
    cr_assert(o.N == 77 && o.shape_given);
    cr_assert_eq(parse(&o, err, "-t", "bf16"), 0);
    cr_assert_eq(o.dtype, 2);
    cr_assert_eq(parse(&o, err, "--seed", "18446744073709551615"), 0);
    cr_assert(o.seed_given && o.seed == 18446744073709551615ULL);
    cr_assert_eq(parse(&o, err, NULL, NULL), 0);
    cr_assert_eq(o.ranks, 0, "--ranks not given: 0 (the lesson's own)");
    cr_assert_eq(parse(&o, err, "--ranks", "3"), 0);
    cr_assert_eq(o.ranks, 3);
    cr_assert(o.transport == 0 && o.ring_delay_us == -1, "--transport, --ring-delay-us not given: the lesson's own");
    cr_assert_eq(parse(&o, err, "--transport", "ce"), 0);
    cr_assert_eq(o.transport, 1, "--transport ce: ATTN_TRANSPORT_CE");
    cr_assert_eq(parse(&o, err, "--transport", "nccl"), 0);
    cr_assert_eq(o.transport, 2, "--transport nccl: ATTN_TRANSPORT_NCCL");
    cr_assert_eq(parse(&o, err, "--ring-delay-us", "0"), 0);
    cr_assert_eq(o.ring_delay_us, 0, "--ring-delay-us 0: the fault mode off");
    cr_assert(o.logit_scale == 1.0f, "--logit-scale not given: 1");
    cr_assert_eq(parse(&o, err, "--logit-scale", "30"), 0);
    cr_assert(o.logit_scale == 30.0f && !o.shape_given, "--logit-scale 30: the x30 case's logits, no shape");
    cr_assert_eq(parse(&o, err, "--paged", "64"), 0);
    cr_assert(o.page_size == 64 && o.shape_given && (o.given & GIVEN_PAGED));
    cr_assert_eq(parse(&o, err, "--seqlens", "16:200,7"), 0);
    cr_assert(o.n_seqs == 2 && o.seqlen_q[0] == 16 && o.seqlen_k[0] == 200 && o.seqlen_k[1] == 7 &&
              (o.given & GIVEN_VARLEN) && o.shape_given);
    cr_assert_eq(parse(&o, err, "--varlen", "4096"), 0);
    cr_assert(o.varlen_max == 4096 && o.n_seqs == 0 && (o.given & GIVEN_VARLEN));
}

struct bad { const char *opt, *val, *expect; };
static const struct bad BAD[] = {
    {"--batch", "0", "1..4096"},       {"--batch", "-3", "1..4096"},
    {"--heads", "1025", "1..1024"},    {"--seq", "abc", "1..1048576"},
    {"--seq", "12x", "1..1048576"},    {"--seq", "99999999999999999999", "1..1048576"},
    {"--dim", "0", "1..256"},          {"--dim", "", "1..256"},
    {"--reps", "0", "1..100000"},      {"--dtype", "fp8", "fp32, fp16 or bf16"},
    {"--timeout", "0", "0.1..3600"},   {"--timeout", "nan", "0.1..3600"},
    {"--seed", "-1", "0.."},           {"--warmup", "5000", "0..1000"},
    {"--ranks", "0", "1..8"},          {"--ranks", "9", "1..8"},
    {"--transport", "mpi", "ce (the copy engines) or nccl"}, {"--ring-delay-us", "-1", "0..1000000"},
    {"--ring-delay-us", "2000000", "0..1000000"},
    {"--paged", "100", "a power of two in 8..1024"}, {"--paged", "4", "a power of two in 8..1024"},
    {"--paged", "2048", "a power of two in 8..1024"}, {"--paged", "x", "a power of two in 8..1024"},
    {"--varlen", "0", "1..1048576"},   {"--seqlens", "12,,4", "1..1048576"},
    {"--seqlens", "0", "1..1048576"},  {"--seqlens", "3:0", "1..1048576"},
    {"--logit-scale", "0.5", "1..1000"}, {"--logit-scale", "nan", "1..1000"}, {"--logit-scale", "3e9", "1..1000"},
};

Test(cli, bad_values_are_refused_with_the_range) {
    for (size_t k = 0; k < sizeof BAD / sizeof BAD[0]; ++k) {
        options o; char err[256] = "";
        cr_assert_eq(parse(&o, err, BAD[k].opt, BAD[k].val), 2, "%s %s accepted", BAD[k].opt, BAD[k].val);
        cr_assert(strstr(err, BAD[k].expect) != NULL, "%s %s: '%s'", BAD[k].opt, BAD[k].val, err);
    }
}

Test(cli, unknown_missing_and_conflicting) {
    options o; char err[256];
    cr_assert_eq(parse(&o, err, "--bogus", NULL), 2);
    cr_assert(strstr(err, "unknown option") != NULL, "%s", err);
    cr_assert_eq(parse(&o, err, "--seq", NULL), 2);
    cr_assert(strstr(err, "needs a value") != NULL, "%s", err);
    cr_assert_eq(parse(&o, err, "--check-only", "--bench-only"), 2);
    cr_assert_eq(parse(&o, err, "stray", NULL), 2);
    cr_assert_eq(parse(&o, err, "--help", NULL), 1);
}
