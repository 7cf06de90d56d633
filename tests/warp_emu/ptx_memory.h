/* tests/warp_emu/ptx_memory.h: the warp emulator's stand-in for reference/include/ptx_memory.h
 * (lesson 11's shared-memory stores and loads at shared-space addresses, and its global
 * reductions). Emulator builds put tests/warp_emu before reference/include on the include path,
 * so a lesson's #include "ptx_memory.h" lands here: the same functions, computed as the PTX ISA
 * defines them, with the checks of emu.h.
 *
 *   sts32        st.shared.b32, warp-collective here (all 32 lanes call it
 *                together, as in the kernel): bounds, alignment, bank
 *                conflicts (32 words of one store must sit in 32 different
 *                banks), and the hazard shadow of emu.h: a store into a chunk
 *                another warp read since the last __syncthreads, or that
 *                another warp stored into since then, or that a cp.async is
 *                still filling, is reported; so is a later ldmatrix/load of it
 *                by another warp before a barrier (emu.h, EMU_PLAIN).
 *   lds_f32x2    ld.shared.v2.f32 and ld.shared.v4.b32: bounds, alignment, and
 *   lds_u128     the read side of the same shadow (a read of a chunk whose
 *                cp.async has not been retired by a wait_group + barrier).
 *   stmatrix_x4  stmatrix.x4 (sm_90): the same checks as sts32, per row.
 *   red_add_f32x2  red.global.add.v2.f32: two atomic float adds (std::atomic_ref),
 *                8-byte alignment checked; out-of-bounds writes show up in the
 *                driver's guard regions.
 *   red_add_f32x4  red.global.add.v4.f32: the same with four, 16-byte alignment checked.
 * FA_SM90 (and FA_SM80) are 1, as in the real headers for a host compiler: the emulator runs the
 * sm_90 paths of a kernel.
 */
#pragma once
#include "emu.h"
#include <atomic>

#ifndef FA_SM80  /* the real ptx_mma.h makes it 1 for a host compiler; so do we, in case the */
#define FA_SM80 1 /* stand-in ptx_mma.h on this path does not */
#endif
#ifndef FA_SM90
#define FA_SM90 1
#endif

static std::atomic<long> emu_sts_conflicts{0}, emu_sts_count{0};

/* This thread stores (st.shared) into chunk c. */
static void emu_track_store(uint32_t c) {
    const unsigned tid = threadIdx.x, warp = tid / 32;
    const uint64_t w = emu_wr[c].exchange(emu_wr_pack(EMU_PLAIN, tid), std::memory_order_acq_rel);
    const bool same_epoch = w && emu_wr_epoch(w) == (emu_epoch & 0xffffff);
    if (w & EMU_INFLIGHT)
        emu_hazard(c, "st.shared into it while a cp.async into it is still in flight", "issued by thread",
                   emu_wr_tid(w));
    else if (same_epoch && (w & EMU_PLAIN) && emu_wr_tid(w) / 32 != warp)
        emu_hazard(c, "two warps store into it with no __syncthreads between them", "other thread", emu_wr_tid(w));
    else if (same_epoch && !(w & EMU_PLAIN) && emu_wr_tid(w) != tid)
        emu_hazard(c, "st.shared into it with no __syncthreads after another thread's wait_group retired its cp.async",
                   "thread", emu_wr_tid(w));
    const uint64_t r = emu_rd[c].load(std::memory_order_acquire);
    if ((r >> 8) == (uint64_t)emu_epoch + 1 && (r & 0xff) != warp)
        emu_hazard(c, "st.shared into it with no __syncthreads after another warp read it", "reader warp",
                   (r & 0xff) == EMU_MANY ? -1 : (int)(r & 0xff));
}

EMU_UNCOUNTED static void sts32(uint32_t addr, uint32_t v EMU_SITE) {
    EmuWarp *w = emu_warp;
    const int l = emu_lane;
    w->u[l][0] = addr;
    w->bar.arrive_and_wait();
    if (l == 0) {  // words in the same bank but at different addresses serialise
        uint32_t a[32];
        unsigned b[32];
        for (int k = 0; k < 32; ++k) { a[k] = w->u[k][0]; b[k] = 4; }
        emu_perf::warp_request(emu_file, emu_line, "st.shared 4 B", a, b, 1, 32);
        int conf = 0;
        for (int a = 0; a < 32; ++a) {
            bool dup = false;
            for (int b = 0; b < a; ++b)
                if (w->u[b][0] / 4 == w->u[a][0] / 4) dup = true;  // same word: one access
            if (dup) continue;
            for (int b = 0; b < a; ++b)
                if ((w->u[b][0] / 4) % 32 == (w->u[a][0] / 4) % 32 && w->u[b][0] / 4 != w->u[a][0] / 4) {
                    conf++;
                    break;
                }
        }
        emu_sts_conflicts += conf;
        emu_sts_count += 1;
    }
    if (addr % 4 || addr + 4 > emu_smem_bytes) {
        emu_fail("st.shared.b32 out of bounds or misaligned");
    } else {
        emu_track_store(addr / 16);
        memcpy(fa_smem + addr, &v, 4);
    }
    w->bar.arrive_and_wait();  // lane 0 is done with w->u before anyone reuses it
}

/* stmatrix.sync.aligned.m8n8.x4.shared.b16 (sm_90), warp-collective: lanes 8i..8i+7
 * give the 16-byte row addresses of matrix i, and row j of matrix i takes r<i> of lanes
 * 4j..4j+3 (the C layout of an mma fragment). Each lane writes the row it addresses, so the
 * hazard shadow sees one 16-byte chunk per lane; bank conflicts as for ldmatrix (the 8
 * rows of one matrix in 8 different 16-byte bank groups). */
EMU_UNCOUNTED static void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3 EMU_SITE) {
    EmuWarp *w = emu_warp;
    const int l = emu_lane;
    w->u[l][0] = r0; w->u[l][1] = r1; w->u[l][2] = r2; w->u[l][3] = r3;
    w->v[l][0] = addr;
    w->bar.arrive_and_wait();
    if (l == 0) {
        uint32_t a[32];
        unsigned b[32];
        for (int k = 0; k < 32; ++k) { a[k] = w->v[k][0]; b[k] = 16; }
        emu_perf::warp_request(emu_file, emu_line, "stmatrix.x4", a, b, 4, 8);
        int conf = 0;
        for (int i = 0; i < 4; ++i) {
            unsigned seen = 0;
            for (int k = 0; k < 8; ++k) {
                const unsigned bit = 1u << ((w->v[8 * i + k][0] >> 4) & 7);
                if (seen & bit) conf++;
                seen |= bit;
            }
        }
        emu_sts_conflicts += conf;
        emu_sts_count += 1;
    }
    if (addr % 16 || addr + 16 > emu_smem_bytes) {
        emu_fail("stmatrix row address out of bounds or not 16-byte aligned");
    } else {
        emu_track_store(addr / 16);
        const int i = l >> 3, j = l & 7;
        for (int c = 0; c < 4; ++c) memcpy(fa_smem + addr + 4 * c, &w->u[4 * j + c][i], 4);
    }
    w->bar.arrive_and_wait();  // everyone is done with w->u, w->v before they are reused
}

EMU_UNCOUNTED static inline float2 lds_f32x2(uint32_t addr EMU_SITE) {
    float2 v{NAN, NAN};
    emu_perf::lane_access(0, emu_file, emu_line, addr, 8, false, (uint64_t)emu_epoch << 32 | emu_wsync);
    if (addr % 8 || addr + 8 > emu_smem_bytes) { emu_fail("ld.shared.v2.f32 out of bounds or misaligned"); return v; }
    emu_track_read(addr / 16);
    memcpy(&v, fa_smem + addr, 8);
    return v;
}
EMU_UNCOUNTED static inline uint4 lds_u128(uint32_t addr EMU_SITE) {
    uint4 v{0, 0, 0, 0};
    emu_perf::lane_access(0, emu_file, emu_line, addr, 16, false, (uint64_t)emu_epoch << 32 | emu_wsync);
    if (addr % 16 || addr + 16 > emu_smem_bytes) { emu_fail("ld.shared.v4.b32 out of bounds or misaligned"); return v; }
    emu_track_read(addr / 16);
    memcpy(&v, fa_smem + addr, 16);
    return v;
}

static inline void red_add_f32x2(float *p, float a, float b) {
    if ((uintptr_t)p % 8) { emu_fail("red.global.add.v2.f32 address not 8-byte aligned"); return; }
    std::atomic_ref<float>(p[0]).fetch_add(a, std::memory_order_relaxed);
    std::atomic_ref<float>(p[1]).fetch_add(b, std::memory_order_relaxed);
}
static inline void red_add_f32x4(float *p, float a, float b, float c, float e) {
    if ((uintptr_t)p % 16) { emu_fail("red.global.add.v4.f32 address not 16-byte aligned"); return; }
    const float v[4] = {a, b, c, e};
    for (int k = 0; k < 4; ++k) std::atomic_ref<float>(p[k]).fetch_add(v[k], std::memory_order_relaxed);
}
