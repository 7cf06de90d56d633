/* tests/warp_emu/ptx_mma.h: the warp emulator's stand-in for reference/include/ptx_mma.h.
 * Emulator builds put tests/warp_emu before reference/include on the include path, so a
 * lesson's #include "ptx_mma.h" lands here: ldmatrix, mma, ex2 and smem_u32 come from emu.h
 * (computed as the PTX ISA defines them, with bank-conflict and hazard checks); pack2 and
 * swz, plain arithmetic, come from tests/emu/ptx_mma_arith.h. */
#pragma once
#include "emu.h"

#ifndef FA_SM80
#define FA_SM80 1 /* kernel bodies guarded by it are the ones to emulate (the real header: sm_80+) */
#endif

#include "../emu/ptx_mma_arith.h"  // pack2, swz: the same arithmetic as the real header
