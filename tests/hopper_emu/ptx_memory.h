/* tests/hopper_emu/ptx_memory.h: the Hopper emulator's stand-in for reference/include/ptx_memory.h,
 * first on the include path of emu-13's build. Only what a Hopper lesson file takes from it: the
 * global vector reductions of lesson 11's dQ (red.global.add.v2/v4.f32), which lesson 13's
 * ladder rung 2 (variants/ladder-2-dq-atomics.var) uses instead of the dQ warp's bulk
 * reduce-add. Each is atomic per float (std::atomic_ref), its alignment checked, and counts as
 * progress for the core's hang detection. Fibers run on one OS thread, so atomicity costs nothing
 * here; it is kept so that the semantics read as the instruction's. */
#pragma once
#include <atomic>
#include <cstdint>

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
