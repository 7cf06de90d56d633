/* tests/hopper_emu/ptx_mma.h: the Hopper emulator's stand-in for reference/include/ptx_mma.h,
 * first on the include path of emulator builds (see ptx_hopper.h here): smem_u32 and ex2 come
 * from hemu.h; pack2 and swz, plain arithmetic, come from tests/emu/ptx_mma_arith.h. Of lesson 07's
 * instructions only ldmatrix_x4_trans is here (lesson 14's transpose of V); its mma.sync and the
 * plain ldmatrix are tests/warp_emu's. */
#pragma once
#include "hemu.h"
#ifndef FA_SM80
#define FA_SM80 1
#endif

#include "../emu/ptx_mma_arith.h"  // pack2, swz: the same arithmetic as the real header

/* ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: lanes 8 i .. 8 i + 7 give the addresses of the 8
 * rows (16 bytes each) of matrix i; lane 4 g + t gets in r[i] the 16-bit elements (row 2 t, column
 * g) and (row 2 t + 1, column g) of matrix i, the first in the low half. Each lane's row is checked
 * (alignment, bounds, a read that races a write) as an ld.shared of 16 bytes. */
static void ldmatrix_x4_trans(uint32_t r[4], uint32_t addr) {
    emu_progress++;
    EmuWarp &w = emu_blk->warps[emu_me()->warp];
    const int lane = emu_me()->lane;
    bool ok = true;
    if (addr % 16) {
        emu_fail("ldmatrix row address not 16-byte aligned");
        ok = false;
    } else if (!emu_smem_ok(addr, 16, "ldmatrix")) {
        ok = false;
    } else {
        emu_check_read(addr / 16, false, "ldmatrix");
        emu_record_read(addr / 16);
    }
    w.u[lane][0] = ok ? addr : UINT32_MAX;
    w.bar.arrive_and_wait();
    const int g = lane >> 2, t = lane & 3;
    for (int i = 0; i < 4; ++i) {
        uint16_t e[2] = {0, 0};
        for (int h = 0; h < 2; ++h) {
            const uint32_t a = w.u[8 * i + 2 * t + h][0];
            if (a != UINT32_MAX) memcpy(&e[h], fa_smem + a + 2 * g, 2);
        }
        r[i] = e[0] | (uint32_t)e[1] << 16;
    }
    w.bar.arrive_and_wait();
}
