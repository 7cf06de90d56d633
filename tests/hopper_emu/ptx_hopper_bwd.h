/* tests/hopper_emu/ptx_hopper_bwd.h: the Hopper emulator's stand-in for reference/include/
 * ptx_hopper_bwd.h (the wrappers lesson 13 teaches: wgmma_ss_mn, ld_shared_f32x2, bulk_load_1d,
 * bulk_reduce_add_f32), first on the include path of emulator builds. Lesson 13 writes its own
 * (behind FA_EMULATOR) and does not include it; a later lesson that does gets hemu.h's, each as
 * the PTX ISA defines it, with the hazard checks hemu.h describes. */
#pragma once
#include "hemu.h"
