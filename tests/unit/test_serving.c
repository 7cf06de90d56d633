/* The serving layouts without a GPU (attention.h: a paged KV cache, packed batches): the checks a
 * lesson may call too (attention_serving.h), the page map the harness draws and its scatter, the
 * lengths of a packed batch drawn or listed, the sentence naming the wrong sequences, and the
 * packed batch on the command line (resolve_varlen). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attention_serving.h"
#include "cli.h"
#include "serving.h"

Test(serving, page_sizes) {
    for (int p = 0; p <= 2048; ++p) {
        const int pow2 = p && (p & (p - 1)) == 0;
        cr_assert_eq(attn_page_size_valid(p), pow2 && p >= 8 && p <= 1024, "page size %d", p);
    }
}

/* Two sequences of 20 and 5 keys in pages of 8: 3 and 1 pages, max_pages 3, a pool of 6. */
static int T[2 * 3] = {4, 0, 2, 5, 5, 5};
static const int LEN[2] = {20, 5};

static int check(const int *table, const int *len, int max_pages, int num_pages, char *err) {
    return attn_check_paged(table, len, 2, 20, 8, max_pages, num_pages, err, 512);
}

Test(serving, check_paged_takes_a_valid_table) {
    char err[512] = "";
    cr_assert_eq(check(T, LEN, 3, 6, err), 0, "%s", err);
    /* the entries past a sequence's pages are not read: anything may be there */
    int t[6] = {4, 0, 2, 1, -7, 99};
    cr_assert_eq(check(t, LEN, 3, 6, err), 0, "%s", err);
    /* seqlens_kv NULL: N_kv keys each, 3 pages each */
    int full[6] = {4, 0, 2, 1, 3, 5};
    cr_assert_eq(check(full, NULL, 3, 6, err), 0, "%s", err);
}

Test(serving, check_paged_refuses_a_page_outside_the_pool) {
    char err[512] = "";
    int t[6] = {4, 6, 2, 5, 0, 0};
    cr_assert_eq(check(t, LEN, 3, 6, err), 1);
    cr_assert(strstr(err, "block_table[0 * max_pages + 1] = 6 (sequence 0, its page 1: keys 8..15) is not a page of the "
                          "pool: expected 0..num_pages - 1 = 0..5"), "%s", err);
    int neg[6] = {4, 0, 2, -1, 0, 0};
    cr_assert_eq(check(neg, LEN, 3, 6, err), 1);
    cr_assert(strstr(err, "sequence 1, its page 0: keys 0..4") && strstr(err, "0..5"), "%s", err);
}

Test(serving, check_paged_refuses_a_shared_page) {
    char err[512] = "";
    int t[6] = {4, 0, 2, 0, 0, 0}; /* sequence 1's page 0 is sequence 0's page 1 */
    cr_assert_eq(check(t, LEN, 3, 6, err), 1);
    cr_assert(strstr(err, "page 0 of the pool is in block_table twice: sequence 0's page 1 and sequence 1's page 0"),
              "%s", err);
    int twice[6] = {4, 0, 4, 1, 0, 0}; /* twice in one sequence */
    cr_assert_eq(check(twice, LEN, 3, 6, err), 1);
    cr_assert(strstr(err, "page 4 of the pool is in block_table twice: sequence 0's page 0 and sequence 0's page 2"),
              "%s", err);
}

Test(serving, check_paged_refuses_too_few_pages_and_bad_lengths) {
    char err[512] = "";
    cr_assert_eq(check(T, LEN, 2, 6, err), 1); /* 20 keys need 3 pages of 8 */
    cr_assert(strstr(err, "sequence 0 has 20 keys, which take 3 pages of page_size = 8 keys, but its row of block_table "
                          "has max_pages = 2 entries: give max_pages >= ceil(N_kv / page_size) = 3"), "%s", err);
    const int zero[2] = {20, 0}, long_[2] = {21, 5};
    cr_assert_eq(check(T, zero, 3, 6, err), 1);
    cr_assert(strstr(err, "seqlens_kv[1] = 0 is not valid: expected 1..N_kv = 1..20"), "%s", err);
    cr_assert_eq(check(T, long_, 3, 6, err), 1);
    cr_assert(strstr(err, "seqlens_kv[0] = 21"), "%s", err);
    cr_assert_eq(attn_check_paged(T, LEN, 2, 20, 12, 3, 6, err, 512), 1);
    cr_assert(strstr(err, "page_size 12 is not valid: expected a power of two in 8..1024"), "%s", err);
    cr_assert_eq(check(T, LEN, 3, 0, err), 1);
    cr_assert(strstr(err, "num_pages >= 1"), "%s", err);
}

static int vcheck(const int *q, const int *k, int B, int causal, char *err) {
    return attn_check_varlen(q, k, B, q[B], k[B], 100, 100, causal, err, 512);
}

Test(serving, check_varlen) {
    char err[512] = "";
    const int q[4] = {0, 16, 17, 117}, k[4] = {0, 200 - 100, 101, 201};
    cr_assert_eq(vcheck(q, k, 3, 1, err), 0, "%s", err);
    const int start[3] = {5, 10, 20};
    cr_assert_eq(vcheck(start, start, 2, 0, err), 1);
    cr_assert(strstr(err, "cu_seqlens_q[0] = 5: the offsets start at 0"), "%s", err);
    const int down[4] = {0, 60, 40, 90};
    cr_assert_eq(vcheck(down, down, 3, 0, err), 1);
    cr_assert(strstr(err, "cu_seqlens_q[2] = 40 after cu_seqlens_q[1] = 60 gives sequence 1 -20 queries: offsets must "
                          "increase, each sequence by 1..max_seqlen = 1..100 queries"), "%s", err);
    const int empty[4] = {0, 10, 10, 20};
    cr_assert_eq(vcheck(q, empty, 3, 0, err), 1);
    cr_assert(strstr(err, "cu_seqlens_k[2] = 10 after cu_seqlens_k[1] = 10 gives sequence 1 0 keys"), "%s", err);
    const int big[3] = {0, 101, 102};
    cr_assert_eq(vcheck(big, big, 2, 0, err), 1);
    cr_assert(strstr(err, "sequence 0 101 queries") && strstr(err, "1..100"), "%s", err);
    cr_assert_eq(attn_check_varlen(q, k, 3, 118, 201, 100, 100, 0, err, 512), 1);
    cr_assert(strstr(err, "cu_seqlens_q[B] = cu_seqlens_q[3] = 117, but the packed batch holds 118 tokens"), "%s", err);
    const int kq[3] = {0, 10, 20}, kk[3] = {0, 5, 15};
    cr_assert_eq(vcheck(kq, kk, 2, 0, err), 0, "non-causal: fewer keys than queries is fine: %s", err);
    cr_assert_eq(vcheck(kq, kk, 2, 1, err), 1);
    cr_assert(strstr(err, "sequence 0 has 10 queries but 5 keys") && strstr(err, "seqlen_k >= seqlen_q"), "%s", err);
    cr_assert_eq(attn_check_varlen(NULL, k, 3, 117, 201, 100, 100, 0, err, 512), 1);
}

/* The page map: valid for attn_check_paged, the entries past a sequence's pages at a spare page
 * no sequence uses, no sequence's neighbouring pages neighbours in the pool, deterministic. */
Test(serving, page_map_is_valid_shuffled_and_deterministic) {
    const int sizes[] = {8, 16, 64, 256};
    for (unsigned seed = 1; seed <= 40; ++seed)
        for (int B = 1; B <= 6; ++B) {
            const int ps = sizes[seed % 4], N_kv = 1 + (int)(seed * 977 % 3000);
            int len[6];
            for (int b = 0; b < B; ++b) len[b] = 1 + (int)((seed * 131 + b * 7919) % (unsigned)N_kv);
            page_map m, m2;
            cr_assert_eq(page_map_make(&m, len, B, N_kv, ps, seed), 0);
            char err[512] = "";
            cr_assert_eq(attn_check_paged(m.table, len, B, N_kv, ps, m.max_pages, m.num_pages, err, sizeof err), 0,
                         "seed %u B %d: %s", seed, B, err);
            cr_assert_eq(m.max_pages, (N_kv + ps - 1) / ps);
            cr_assert(m.num_pages > m.used && m.spare >= 0 && m.spare < m.num_pages);
            for (int b = 0; b < B; ++b) {
                const int pages = (len[b] + ps - 1) / ps;
                for (int p = 0; p < m.max_pages; ++p) {
                    const int page = m.table[b * m.max_pages + p];
                    if (p >= pages) cr_assert_eq(page, m.spare, "entry past the pages: the spare page");
                    else cr_assert_neq(page, m.spare);
                    if (p > 0 && p < pages && m.num_pages >= 8)
                        cr_assert(abs(page - m.table[b * m.max_pages + p - 1]) != 1,
                                  "seed %u: sequence %d's pages %d and %d are neighbours in the pool", seed, b, p - 1, p);
                }
            }
            cr_assert_eq(page_map_make(&m2, len, B, N_kv, ps, seed), 0);
            cr_assert(!memcmp(m.table, m2.table, sizeof(int) * (size_t)B * m.max_pages), "the same seed, the same map");
            page_map_free(&m);
            page_map_free(&m2);
        }
}

Test(serving, page_map_scatter_puts_each_key_at_its_place) {
    enum { B = 3, H_kv = 2, N_kv = 37, d = 4, PS = 8 };
    const int len[B] = {37, 9, 16};
    float X[B * H_kv * N_kv * d];
    for (int e = 0; e < B * H_kv * N_kv * d; ++e) X[e] = (float)e;
    page_map m;
    cr_assert_eq(page_map_make(&m, len, B, N_kv, PS, 7), 0);
    const size_t n = (size_t)m.num_pages * PS * H_kv * d;
    float *pool = malloc(sizeof(float) * n);
    page_map_scatter(&m, X, len, H_kv, N_kv, d, pool);
    size_t keys = 0;
    for (int b = 0; b < B; ++b)
        for (int h = 0; h < H_kv; ++h)
            for (int j = 0; j < len[b]; ++j, ++keys) {
                /* attention.h's formula, written out */
                const int page = m.table[b * m.max_pages + j / PS];
                const size_t at = (((size_t)page * PS + j % PS) * H_kv + h) * d;
                cr_assert_eq(at, page_map_offset(&m, b, j, h, H_kv, d));
                for (int c = 0; c < d; ++c) cr_assert_eq(pool[at + c], X[((b * H_kv + h) * N_kv + j) * d + c]);
            }
    size_t nan = 0;
    for (size_t e = 0; e < n; ++e) nan += isnan(pool[e]);
    cr_assert_eq(nan, n - keys * d, "every element that is no key is NaN");
    free(pool);
    page_map_free(&m);
}

Test(serving, varlen_draw) {
    int len[4096];
    const int n = varlen_draw(1000, 65536, 42, len, 4096);
    cr_assert(n > 1);
    long sum = 0;
    int longest = 0;
    for (int b = 0; b < n; ++b) {
        cr_assert(len[b] >= 1 && len[b] <= 1000, "length %d", len[b]);
        sum += len[b];
        if (len[b] > longest) longest = len[b];
    }
    cr_assert_eq(sum, 65536, "the lengths hold the tokens asked for");
    cr_assert(longest > 500, "log-uniform up to 1000: some long ones (%d)", longest);
    int again[4096];
    cr_assert_eq(varlen_draw(1000, 65536, 42, again, 4096), n);
    cr_assert(!memcmp(len, again, sizeof(int) * (size_t)n), "the same seed, the same lengths");
    cr_assert_eq(varlen_draw(2, 100000, 1, len, 4096), -1, "more than cap sequences");
    cr_assert_eq(varlen_draw(1, 5, 1, len, 8), 5);
}

Test(serving, parse_seqlens) {
    int q[8], k[8];
    char err[400];
    cr_assert_eq(parse_seqlens("128,4000,17", q, k, 8, 1 << 20, err, sizeof err), 3);
    cr_assert(q[0] == 128 && k[0] == 128 && q[1] == 4000 && k[2] == 17);
    cr_assert_eq(parse_seqlens("16:2000,1,300:300", q, k, 8, 1 << 20, err, sizeof err), 3);
    cr_assert(q[0] == 16 && k[0] == 2000 && q[1] == 1 && k[1] == 1 && q[2] == 300 && k[2] == 300);
    const struct { const char *text, *expect; } BAD[] = {
        {"", "the list is empty"},           {"12,,4", "item 2, '', is not a length in 1..1048576"},
        {"0,5", "item 1, '0', is not a length"}, {"5,-3", "item 2, '-3', is not a length"},
        {"5,", "it ends with a comma"},      {"5:x", "item 1, '5:x', is not LEN_Q:LEN_K"},
        {"5:6:7", "is not LEN_Q:LEN_K"},     {"1048577", "is not a length in 1..1048576"},
        {"1,2,3,4,5,6,7,8,9", "more than 8 sequences: at most 8"}, {"7x", "item 1, '7x'"},
        {" 5", "item 1"},                    {"+5", "item 1"},
    };
    for (size_t t = 0; t < sizeof BAD / sizeof BAD[0]; ++t) {
        err[0] = '\0';
        cr_assert_eq(parse_seqlens(BAD[t].text, q, k, 8, 1 << 20, err, sizeof err), -1, "'%s' accepted", BAD[t].text);
        cr_assert(strstr(err, BAD[t].expect), "'%s': %s", BAD[t].text, err);
    }
}

Test(serving, describe_sequences) {
    char out[400];
    const long checked[5] = {4, 4, 4, 4, 4};
    const long one[5] = {0, 0, 0, 3, 0}, some[5] = {0, 2, 0, 4, 1}, all[5] = {1, 1, 1, 1, 1}, none[5] = {0};
    cr_assert_eq(describe_sequences(out, sizeof out, one, checked, 5), 1);
    cr_assert_str_eq(out, "only sequence 3 is wrong (3 of its 4 graded rows), the other 4 sequences graded are right");
    cr_assert_eq(describe_sequences(out, sizeof out, some, checked, 5), 3);
    cr_assert_str_eq(out, "sequences 1, 3 and 4 are wrong, 0 and 2 are right");
    cr_assert_eq(describe_sequences(out, sizeof out, all, checked, 5), 5);
    cr_assert_str_eq(out, "every sequence is wrong (5 graded)");
    cr_assert_eq(describe_sequences(out, sizeof out, none, checked, 5), 0);
    cr_assert_str_eq(out, "");
    const long partly[5] = {4, 0, 4, 0, 4}, bad2[5] = {0, 0, 2, 0, 0};
    cr_assert_eq(describe_sequences(out, sizeof out, bad2, partly, 5), 1, "sequences with no graded row are left out");
    cr_assert_str_eq(out, "only sequence 2 is wrong (2 of its 4 graded rows), the other 2 sequences graded are right");
}

/* The packed batch on the command line: parse_options, then resolve_varlen. */
static int varlen_cli(options *o, char *err, int argc, const char *const *args) {
    char *argv[16] = {"lesson16"};
    for (int k = 0; k < argc; ++k) argv[k + 1] = (char *)args[k];
    int rc = parse_options(argc + 1, argv, o, err, 512);
    return rc ? rc : resolve_varlen(o, 128, err, 512);
}

Test(serving, command_line_packed_batches) {
    static options o; /* 32 KiB of lengths: not on Criterion's stack */
    char err[512];
    const char *a1[] = {"--seqlens", "16:200,1,100", "--causal", "-H", "8", "--kv-heads", "2"};
    cr_assert_eq(varlen_cli(&o, err, 7, a1), 0, "%s", err);
    cr_assert(o.B == 3 && o.N == 100 && o.N_kv == 200 && o.H == 8 && o.H_kv == 2 && o.d == 128 && o.shape_given);
    cr_assert(o.seqlen_q[0] == 16 && o.seqlen_k[0] == 200 && o.seqlen_k[1] == 1);
    const char *a2[] = {"--varlen", "300", "-b", "4", "-n", "200", "--seed", "9"};
    cr_assert_eq(varlen_cli(&o, err, 8, a2), 0, "%s", err);
    long tokens = 0;
    for (int b = 0; b < o.B; ++b) {
        tokens += o.seqlen_q[b];
        cr_assert(o.seqlen_q[b] == o.seqlen_k[b] && o.seqlen_q[b] <= 300);
    }
    cr_assert_eq(tokens, 800, "--varlen draws until B x N tokens");
    cr_assert(o.H == VARLEN_BENCH_H && o.H_kv == VARLEN_BENCH_H);
    const char *a3[] = {"--varlen", "16384"};
    cr_assert_eq(varlen_cli(&o, err, 2, a3), 0, "%s", err);
    tokens = 0;
    for (int b = 0; b < o.B; ++b) tokens += o.seqlen_q[b];
    cr_assert_eq(tokens, (long)VARLEN_BENCH_B * VARLEN_BENCH_N);
    const struct { int argc; const char *args[6]; const char *expect; } BAD[] = {
        {3, {"--seqlens", "10:5", "--causal"}, "give LEN_K >= LEN_Q"},
        {4, {"--seqlens", "5,6", "-b", "2"}, "--seqlens is the batch"},
        {4, {"--seqlens", "5,6", "-n", "2"}, "--seqlens is the batch"},
        {4, {"--varlen", "100", "--paged", "16"}, "--paged does not combine with --varlen or --seqlens"},
        {4, {"--varlen", "100", "--kv-seq", "16"}, "--kv-seq and --ragged are decode options"},
        {3, {"--varlen", "100", "--ragged"}, "--kv-seq and --ragged are decode options"},
        {4, {"--varlen", "100", "--seqlens", "5"}, "give one of them"},
        {6, {"--varlen", "2", "-b", "4096", "-n", "4096"}, "draws more than 4096 sequences"},
        {6, {"--seqlens", "5,6", "-H", "8", "--kv-heads", "3"}, "--kv-heads 3 does not divide --heads 8"},
        {2, {"--varlen", "0"}, "--varlen '0' is not valid: expected an integer in 1..1048576"},
        {4, {"--fuzz", "3", "--varlen", "9"}, "--fuzz draws its own shapes"},
    };
    for (size_t t = 0; t < sizeof BAD / sizeof BAD[0]; ++t) {
        err[0] = '\0';
        cr_assert_eq(varlen_cli(&o, err, BAD[t].argc, BAD[t].args), 2, "case %zu accepted", t);
        cr_assert(strstr(err, BAD[t].expect), "case %zu: %s", t, err);
    }
}
