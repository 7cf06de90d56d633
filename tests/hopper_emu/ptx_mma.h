/* tests/hopper_emu/ptx_mma.h: the Hopper emulator's stand-in for reference/include/ptx_mma.h,
 * first on the include path of emulator builds (see ptx_hopper.h here): smem_u32 and ex2 come
 * from hemu.h; pack2 and swz, plain arithmetic, come from tests/emu/ptx_mma_arith.h. The mma.sync
 * and ldmatrix of lesson 07 are not emulated here (tests/warp_emu does). */
#pragma once
#include "hemu.h"
#ifndef FA_SM80
#define FA_SM80 1
#endif

#include "../emu/ptx_mma_arith.h"  // pack2, swz: the same arithmetic as the real header
