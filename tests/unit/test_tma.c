/* test_tma.c: lesson 09's tensor-map parameters (reference/include/tma_params.h), no GPU needed.
 * What cuTensorMapEncodeTiled receives for Q, K, V of each head dimension and dtype, ragged
 * and tiny N, the refusals (each with the limit it names), and the 128-byte swizzle that
 * decides where every element lands in shared memory. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>
#include "tma_params.h"

static char g_buf[64] __attribute__((aligned(16)));
#define ALIGNED ((const void *)g_buf)

static void expect_ok(tma_tile_params *p, long long BH, long long N, int d, long long ld, dtype_t dt, int rows) {
    char err[256] = "";
    int rc = tma_tile_params_make(p, ALIGNED, BH, N, d, ld, dt, rows, err, sizeof err);
    cr_assert_eq(rc, 0, "BH=%lld N=%lld d=%d ld=%lld rows=%d refused: %s", BH, N, d, ld, rows, err);
}

static void expect_refused(const void *base, long long BH, long long N, int d, long long ld, dtype_t dt, int rows,
                           const char *needle) {
    tma_tile_params p;
    char err[256] = "";
    int rc = tma_tile_params_make(&p, base, BH, N, d, ld, dt, rows, err, sizeof err);
    cr_assert_eq(rc, -1, "BH=%lld N=%lld d=%d ld=%lld rows=%d dtype=%d was accepted", BH, N, d, ld, rows, (int)dt);
    cr_assert(strstr(err, needle) != NULL, "refusal message '%s' does not name '%s'", err, needle);
}

Test(tma_params, fp16_d64_q_tile) {
    tma_tile_params p;
    expect_ok(&p, 8 * 12, 1024, 64, 64, DTYPE_FP16, 128);
    cr_assert_eq(p.rank, 3);
    cr_assert_eq(p.dims[0], 64);
    cr_assert_eq(p.dims[1], 1024);
    cr_assert_eq(p.dims[2], 96);
    cr_assert_eq(p.strides[0], 128);           /* one row: 64 x 2 bytes */
    cr_assert_eq(p.strides[1], 1024ull * 128); /* one (b, h) slice */
    cr_assert_eq(p.box[0], 64);
    cr_assert_eq(p.box[1], 128);
    cr_assert_eq(p.box[2], 1);
    cr_assert(p.elem_strides[0] == 1 && p.elem_strides[1] == 1 && p.elem_strides[2] == 1);
    cr_assert_eq(p.esize, 2);
    cr_assert_eq(p.dtype, DTYPE_FP16);
    cr_assert_eq(p.swizzle_bytes, 128);
    cr_assert_eq(p.boxes, 1);
    cr_assert_eq(p.tile_bytes, 128u * 64 * 2);
}

Test(tma_params, bf16_d128_kv_tile_is_two_boxes) {
    tma_tile_params p;
    expect_ok(&p, 16, 4096, 128, 128, DTYPE_BF16, 176);
    cr_assert_eq(p.dims[0], 128);
    cr_assert_eq(p.strides[0], 256);
    cr_assert_eq(p.strides[1], 4096ull * 256);
    cr_assert_eq(p.box[0], 64, "a box row is 128 bytes, the swizzle span, even when d = 128");
    cr_assert_eq(p.box[1], 176);
    cr_assert_eq(p.boxes, 2);
    cr_assert_eq(p.tile_bytes, 176u * 128 * 2, "expect_tx must count both boxes");
    cr_assert_eq(p.dtype, DTYPE_BF16);
}

Test(tma_params, ragged_and_tiny_n) {
    const long long Ns[] = {1, 2, 77, 1000, 4097};
    for (int i = 0; i < 5; ++i) {
        tma_tile_params p;
        expect_ok(&p, 3, Ns[i], 64, 64, DTYPE_FP16, 128);
        cr_assert_eq(p.dims[1], (uint64_t)Ns[i], "N is its own dimension: rows past it read as zeros");
        cr_assert_eq(p.strides[1], (uint64_t)Ns[i] * 128);
        cr_assert_eq(p.strides[1] % 16, 0);
        cr_assert_eq(p.box[1], 128, "the box does not shrink with N");
    }
}

Test(tma_params, padded_rows) {
    tma_tile_params p;
    expect_ok(&p, 2, 100, 64, 72, DTYPE_FP16, 64); /* rows 144 bytes apart */
    cr_assert_eq(p.dims[0], 64);
    cr_assert_eq(p.strides[0], 144);
    cr_assert_eq(p.strides[1], 100ull * 144);
}

Test(tma_params, refusals) {
    expect_refused(ALIGNED, 1, 128, 64, 64, DTYPE_FP32, 128, "fp16 or bf16");
    expect_refused(ALIGNED, 1, 128, 96, 96, DTYPE_FP16, 128, "multiple of 64");
    expect_refused(ALIGNED, 1, 128, 32, 32, DTYPE_FP16, 128, "multiple of 64");
    expect_refused(ALIGNED, 1, 128, 0, 64, DTYPE_FP16, 128, "multiple of 64");
    expect_refused(ALIGNED, 1, 128, 320, 320, DTYPE_FP16, 128, "multiple of 64");
    expect_refused(ALIGNED, 1, 128, 64, 60, DTYPE_FP16, 128, "smaller than d");
    expect_refused(ALIGNED, 1, 128, 64, 68, DTYPE_FP16, 128, "multiple of 16"); /* 136-byte rows */
    expect_refused(ALIGNED, 1, 0, 64, 64, DTYPE_FP16, 128, "at least 1");
    expect_refused(ALIGNED, 0, 128, 64, 64, DTYPE_FP16, 128, "at least 1");
    expect_refused(ALIGNED, 1, (1LL << 32) + 1, 64, 64, DTYPE_FP16, 128, "2^32");
    expect_refused(ALIGNED, (1LL << 32) + 1, 128, 64, 64, DTYPE_FP16, 128, "2^32");
    expect_refused(ALIGNED, 1, 1LL << 31, 64, 1024, DTYPE_FP16, 128, "2^40");
    expect_refused(ALIGNED, 1, 128, 64, 64, DTYPE_FP16, 0, "multiple of 8");
    expect_refused(ALIGNED, 1, 128, 64, 64, DTYPE_FP16, 4, "multiple of 8");
    expect_refused(ALIGNED, 1, 128, 64, 64, DTYPE_FP16, 100, "multiple of 8");
    expect_refused(ALIGNED, 1, 128, 64, 64, DTYPE_FP16, 264, "multiple of 8");
    expect_refused((const char *)g_buf + 8, 1, 128, 64, 64, DTYPE_FP16, 128, "16-byte aligned");
}

Test(tma_params, limits_accepted) {
    tma_tile_params p;
    expect_ok(&p, 1, 1LL << 32, 64, 64, DTYPE_FP16, 256); /* largest N, largest box */
    cr_assert_eq(p.dims[1], 1ull << 32);
    cr_assert_eq(p.box[1], 256);
    expect_ok(&p, 1, 1, 256, 256, DTYPE_BF16, 8);
    cr_assert_eq(p.boxes, 4);
}

/* The swizzle, written out the way the CUDA documentation describes it: a box of `rows`
 * rows of 128 bytes is stored row after row; in every group of 8 rows (1024 bytes), the
 * 16-byte chunk j of row r goes to chunk j XOR (r mod 8). */
static uint32_t naive_offset(int r, int c, int rows) {
    const int box = c / 64, col = c % 64, chunk = col / 8, within = col % 8;
    return (uint32_t)(box * rows * 128 + r * 128 + ((chunk ^ (r % 8)) * 16) + within * 2);
}

Test(tma_swizzle, matches_the_documented_pattern) {
    const int shapes[][2] = {{128, 64}, {128, 128}, {176, 128}, {192, 64}, {8, 256}};
    for (int s = 0; s < 5; ++s)
        for (int r = 0; r < shapes[s][0]; ++r)
            for (int c = 0; c < shapes[s][1]; ++c)
                cr_assert_eq(tma_tile_offset(r, c, shapes[s][0]), naive_offset(r, c, shapes[s][0]),
                             "rows=%d element (%d, %d)", shapes[s][0], r, c);
}

Test(tma_swizzle, a_permutation_of_each_1024_byte_block) {
    for (uint32_t base = 0; base < 4096; base += 1024) {
        unsigned char seen[64] = {0};
        for (uint32_t a = base; a < base + 1024; a += 16) {
            const uint32_t s = tma_swizzle128(a);
            cr_assert(s >= base && s < base + 1024, "chunk %u leaves its block (-> %u)", a, s);
            cr_assert_eq(s % 16, 0);
            cr_assert_eq(seen[(s - base) / 16], 0, "two chunks land on %u", s);
            seen[(s - base) / 16] = 1;
        }
        /* bytes inside a chunk keep their order */
        cr_assert_eq(tma_swizzle128(base + 16 * 3 + 5), tma_swizzle128(base + 16 * 3) + 5);
    }
}

Test(tma_swizzle, eight_rows_of_one_column_hit_eight_bank_groups) {
    /* 16-byte chunk k of an address covers banks 4(k mod 8) .. +3: the 8 rows of a column
     * chunk (what one 8 x 8 core matrix of wgmma, or a warp's stores, touch) must differ. */
    for (int col = 0; col < 64; col += 8) {
        unsigned mask = 0;
        for (int r = 0; r < 8; ++r) mask |= 1u << ((tma_tile_offset(r, col, 128) / 16) % 8);
        cr_assert_eq(mask, 0xffu, "column %d: bank groups 0x%x", col, mask);
    }
}

Test(tma_swizzle, every_box_starts_on_1024_bytes) {
    const int rows[] = {8, 64, 128, 176, 192, 256};
    for (int i = 0; i < 6; ++i)
        for (int b = 0; b < 4; ++b)
            cr_assert_eq(tma_tile_offset(0, 64 * b, rows[i]) % 1024, 0, "rows=%d box %d", rows[i], b);
}

/* tma_tile_chunk: a row's chunk k from its chunk 0, by XOR, lands where tma_tile_offset puts column
 * c + 8 k, for every row, every column of chunk 0 (the 2-byte element), every chunk of both boxes of a
 * d = 128 tile, and a 1024-aligned base that is not 0. */
Test(tma_swizzle, chunk_from_chunk0_is_tile_offset) {
    const uint32_t base = 7 * 1024;
    const int rows_of[] = {64, 128, 176};
    for (int i = 0; i < 3; ++i) {
        const int rows = rows_of[i];
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < 8; ++c)
                for (int k = 0; k < 16; ++k) {
                    const uint32_t want = base + tma_tile_offset(r, c + 8 * k, rows);
                    const uint32_t got = tma_tile_chunk(base + tma_tile_offset(r, c, rows), k, rows);
                    cr_assert_eq(got, want, "rows %d, row %d, column %d + 8 x %d: %u, tma_tile_offset says %u", rows, r,
                                 c, k, got, want);
                }
    }
}
