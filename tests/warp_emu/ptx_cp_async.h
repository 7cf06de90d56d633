/* tests/warp_emu/ptx_cp_async.h: the warp emulator's stand-in for reference/include/
 * ptx_cp_async.h: cp_async_16, cp_async_commit and cp_async_wait come from emu.h (copies that
 * land at issue or at the retiring wait, EMU_CPASYNC, with per-chunk hazard tracking). */
#pragma once
#include "emu.h"
