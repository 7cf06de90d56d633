/* wgmma_e4m3.h: FP8 (e4m3) wgmma on the CPU Hopper emulator (hemu.h), for lesson 14: the functions
 * of reference/include/ptx_hopper_fp8.h that are PTX, computed as the PTX ISA defines them.
 *
 *   wgmma_ss_e4m3<N>, wgmma_rs_e4m3<N>  wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3: D (64 x N
 *       fp32, the warpgroup's accumulators in hemu.h's layout) += A (64 x 32) B (32 x N). Both
 *       operands K-major (8-bit types have no transpose), by descriptor from shared memory, or A from
 *       registers (rs). Everything else is hemu.h's wgmma: asynchronous, committed in groups, the
 *       products landing at the wait_group that retires them, the operand bytes checked against
 *       their writers (happens-before, the async proxy), EMU_WGMMA=late reading them only then.
 *   cvt_e4m3x2(hi, lo)   cvt.rn.satfinite.e4m3x2.f32: lo in bits 0-7, hi in bits 8-15, round to
 *       nearest even, saturating to +-448, NaN to 0x7F (reference/cpu/fp8.h's e4m3_encode).
 *
 * Layouts, from the PTX ISA (wgmma, "Register Fragments and Shared Memory Matrix Layouts", k = 32
 * for 8-bit types) and CUTLASS's statement of the same (cute/atom/mma_traits_sm90_gmma.hpp,
 * ALayout_64x32):
 *   - shared memory, K-major: the canonical layouts of hemu.h's emu_desc_addr counted in bytes: a
 *     row of a core matrix is 16 bytes (16 codes); with a 128-byte swizzle a row of the atom is 128
 *     bytes, 8 rows apart SBO; the k-slice of one instruction is 32 bytes of a row. The swizzle acts
 *     on the final address bits, as TMA's does.
 *   - A from registers: warp w of the warpgroup holds rows 16 w .. 16 w + 15; lane 4 g + t holds in
 *     register i (v1 = i & 1, v2 = i >> 1), byte v0 (bits 8 v0 .. 8 v0 + 7), the element of row
 *     16 w + g + 8 v1 and column k = 4 t + v0 + 16 v2. Nothing here is left unspecified or
 *     scrambled: a kernel that packs P in any other order computes a different product and fails.
 * The hook in hemu.h: EmuWgOp::chunks (this operand's 16-byte chunks) and EmuWgOp::A8 (the rs rows).
 * Included by the lesson 14 emulator builds (tests/hopper_emu/emu_host.h) after hemu.h. */
#pragma once
#include "hemu.h"
extern "C" {
#include "fp8.h"  // e4m3_encode, e4m3_decode (reference/cpu/fp8.h, plain C)
}

/* Byte address of byte kb of row mn of a K-major 8-bit operand described by `desc`. */
static uint32_t emu_desc_addr8(uint64_t desc, int mn, int kb) {
    const uint32_t start = (uint32_t)(desc & 0x3fff) << 4, lbo = (uint32_t)((desc >> 16) & 0x3fff) << 4,
                   sbo = (uint32_t)((desc >> 32) & 0x3fff) << 4;
    const int mode = (int)(desc >> 62);  // 0 none, 1 128B, 2 64B, 3 32B
    const int x = mode == 1 ? 8 : mode == 2 ? 4 : mode == 3 ? 2 : 1;
    uint32_t off;
    if (mode == 0) off = (mn % 8) * 16 + (mn / 8) * sbo + (kb % 16) + (kb / 16) * lbo;  // 8 x 16-byte core matrices
    else off = (mn % 8) * (16 * x) + (mn / 8) * sbo + kb;
    uint32_t a = start + off;
    if (mode) {
        const int bits = mode == 1 ? 3 : mode == 2 ? 2 : 1;
        a ^= ((a >> 7) & ((1u << bits) - 1)) << 4;
    }
    return a;
}
static float emu_ld_e4m3(uint32_t a) {
    if (a + 1 > emu_smem_bytes) { emu_fail("e4m3 wgmma operand outside shared memory"); return 0.f; }
    return e4m3_decode(fa_smem[a]);
}
/* The chunks this thread's part of an e4m3 wgmma reads: its 2 rows of A (ss), all of B. */
static void emu_e4m3_chunks(const EmuWgOp &op, std::vector<uint32_t> &out) {
    out.clear();
    const int g = emu_me()->lane >> 2, wq = emu_me()->warp % 4;
    if (!op.rs)
        for (int r = 0; r < 2; ++r)
            for (int kb = 0; kb < 32; kb += 16) out.push_back(emu_desc_addr8(op.da, 16 * wq + g + 8 * r, kb) / 16);
    for (int n = 0; n < op.N; ++n)
        for (int kb = 0; kb < 32; kb += 16) out.push_back(emu_desc_addr8(op.db, n, kb) / 16);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    while (!out.empty() && (size_t)out.back() * 16 + 16 > emu_smem_bytes) {
        emu_fail(emu_fmt("e4m3 wgmma operand bytes [%u, %u) lie outside the %zu bytes of shared memory (descriptor?)",
                         out.back() * 16, out.back() * 16 + 16, emu_smem_bytes));
        out.pop_back();
    }
}
/* The warp decodes B [32][N] together; each lane then forms its N / 2 products (hemu.h's layout). */
static void emu_e4m3_compute(EmuWgOp &op) {
    EmuWarp &w = emu_blk->warps[emu_me()->warp];
    w.da[emu_me()->lane] = op.da;
    w.db[emu_me()->lane] = op.db;
    w.bar.arrive_and_wait();
    if (emu_me()->lane == 0) {
        for (int l = 1; l < 32; ++l)
            if (w.db[l] != op.db || (!op.rs && w.da[l] != op.da))
                emu_fail("e4m3 wgmma: the lanes of a warp pass different descriptors");
        w.Bf.assign((size_t)32 * op.N, 0.f);
    }
    w.bar.arrive_and_wait();
    for (int i = emu_me()->lane; i < 32 * op.N; i += 32) {
        const int k = i / op.N, n = i % op.N;
        w.Bf[i] = emu_ld_e4m3(emu_desc_addr8(op.db, n, k));
    }
    w.bar.arrive_and_wait();
    const int g = emu_me()->lane >> 2, t = emu_me()->lane & 3, wq = emu_me()->warp % 4;
    float A[2][32];
    for (int r = 0; r < 2; ++r)
        for (int k = 0; k < 32; ++k)
            A[r][k] = op.rs ? e4m3_decode(op.A8[r][k]) : emu_ld_e4m3(emu_desc_addr8(op.da, 16 * wq + g + 8 * r, k));
    op.prod.assign(op.N / 2, 0.f);
    for (int j = 0; j < op.N / 8; ++j)
        for (int e = 0; e < 4; ++e) {
            const int r = e >> 1, n = 8 * j + 2 * t + (e & 1);
            float acc = 0.f;
            for (int k = 0; k < 32; ++k) acc += A[r][k] * w.Bf[(size_t)k * op.N + n];
            op.prod[4 * j + e] = acc;
        }
    w.bar.arrive_and_wait();
    op.computed = true;
}
static void emu_e4m3_issue(float *d, int N, bool rs, uint64_t da, const uint32_t *a, uint64_t db, int scale_d,
                           const char *file, int line) {
    emu_progress++;
    if (!emu_me()->wg_fenced)
        emu_fail("wgmma.mma_async (e4m3) without a wgmma.fence since this thread's last wgmma.wait_group (or since "
                 "the start): registers written by other instructions may not be seen");
    if ((da >> 49 & 7) || (db >> 49 & 7)) emu_fail("wgmma descriptor with a non-zero base offset (not emulated)");
    EmuWgOp op{d, N, rs, da, db, {}, scale_d, {}, false, emu_e4m3_compute};
    op.chunks = emu_e4m3_chunks;
    if (rs) {  // rows g and g + 8, 32 codes each, from the 4 lanes of this quad (ALayout_64x32)
        EmuWarp &w = emu_blk->warps[emu_me()->warp];
        for (int i = 0; i < 4; ++i) w.u[emu_me()->lane][i] = a[i];
        w.bar.arrive_and_wait();
        const int g = emu_me()->lane >> 2;
        for (int tq = 0; tq < 4; ++tq)
            for (int i = 0; i < 4; ++i)
                for (int v0 = 0; v0 < 4; ++v0)
                    op.A8[i & 1][4 * tq + v0 + 16 * (i >> 1)] = (uint8_t)(w.u[4 * g + tq][i] >> (8 * v0));
        w.bar.arrive_and_wait();
    }
    std::vector<uint32_t> chunks;
    emu_e4m3_chunks(op, chunks);
    for (uint32_t c : chunks) emu_check_read(c, true, "wgmma (e4m3)");
    emu_tiles_read(chunks, file, line);  // the report's ring depth
    if (!emu_wgmma_late) emu_e4m3_compute(op);
    emu_me()->uncommitted.push_back(std::move(op));
}
template <int N>
static inline void wgmma_ss_e4m3(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d EMU_SITE) {
    static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N: a multiple of 8 in [8, 256]");
    emu_e4m3_issue(d, N, false, desc_a, nullptr, desc_b, scale_d, emu_file, emu_line);
}
template <int N>
static inline void wgmma_rs_e4m3(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d EMU_SITE) {
    static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N: a multiple of 8 in [8, 256]");
    emu_e4m3_issue(d, N, true, 0, a, desc_b, scale_d, emu_file, emu_line);
}
static inline uint16_t cvt_e4m3x2(float hi, float lo) {
    return (uint16_t)((uint16_t)e4m3_encode(hi) << 8 | e4m3_encode(lo));
}
