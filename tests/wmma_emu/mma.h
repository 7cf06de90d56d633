/* tests/wmma_emu/mma.h: the emulator's stand-in for CUDA's <mma.h> (nvcuda::wmma). Emulator builds
 * put tests/wmma_emu before the CUDA headers on the include path, so lesson 06's
 * #include <mma.h> lands here: the fragments of wmma_emu.h, with their scrambled element order. */
#pragma once
#include "wmma_emu.h"
