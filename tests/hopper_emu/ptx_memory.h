/* tests/hopper_emu/ptx_memory.h: the Hopper emulator's stand-in for reference/include/ptx_memory.h,
 * first on the include path of the Hopper emulator's builds. Only what a Hopper lesson file takes
 * from it: stmatrix_x4 (lesson 14's transpose of V) and the global vector reductions of lesson 11's dQ (red.global.add.v2/v4.f32), which lesson 13's
 * ladder rung 2 (variants/ladder-2-dq-atomics.var) uses instead of the dQ warp's bulk
 * reduce-add. Each is atomic per float (std::atomic_ref), its alignment checked, and counts as
 * progress for the core's hang detection. Fibers run on one OS thread, so atomicity costs nothing
 * here; it is kept so that the semantics read as the instruction's. */
#pragma once
#include <atomic>
#include <cstdint>
#include "hemu.h"

/* stmatrix.sync.aligned.m8n8.x4.shared.b16: lanes 8 i .. 8 i + 7 give the addresses of the 8 rows of
 * matrix i; lane 4 g + t holds in r<i> the 16-bit elements (row g, columns 2 t and 2 t + 1) of
 * matrix i. Each row is an ordinary 16-byte store of the lane that gave its address (alignment,
 * bounds, mbarriers, races and the async proxy's fence checked as for st.shared.v4). */
static void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
    emu_progress++;
    EmuWarp &w = emu_blk->warps[emu_me()->warp];
    const int lane = emu_me()->lane;
    w.u[lane][0] = r0;
    w.u[lane][1] = r1;
    w.u[lane][2] = r2;
    w.u[lane][3] = r3;
    w.bar.arrive_and_wait();
    const int i = lane >> 3, row = lane & 7;
    uint32_t v[4];
    for (int t = 0; t < 4; ++t) v[t] = w.u[4 * row + t][i];
    w.bar.arrive_and_wait();
    if (addr % 16) {
        emu_fail("stmatrix row address not 16-byte aligned");
        return;
    }
    if (!emu_smem_ok(addr, 16, "stmatrix")) return;
    if (emu_hits_mbar(addr)) emu_fail("stmatrix overwrites an mbarrier");
    emu_write(addr, 16, emu_me()->tid, emu_me()->vc, true);
    memcpy(fa_smem + addr, v, 16);
}

static inline void red_add_f32x2(float *p, float a, float b) {
    if ((uintptr_t)p % 8) { emu_fail("red.global.add.v2.f32 address not 8-byte aligned"); return; }
    emu_progress++;
    std::atomic_ref<float>(p[0]).fetch_add(a, std::memory_order_relaxed);
    std::atomic_ref<float>(p[1]).fetch_add(b, std::memory_order_relaxed);
}
static inline void red_add_f32x4(float *p, float a, float b, float c, float e) {
    if ((uintptr_t)p % 16) { emu_fail("red.global.add.v4.f32 address not 16-byte aligned"); return; }
    emu_progress++;
    const float v[4] = {a, b, c, e};
    for (int k = 0; k < 4; ++k) std::atomic_ref<float>(p[k]).fetch_add(v[k], std::memory_order_relaxed);
}
