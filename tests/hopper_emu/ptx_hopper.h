/* tests/hopper_emu/ptx_hopper.h: the Hopper emulator's stand-in for reference/include/
 * ptx_hopper.h. Emulator builds put tests/hopper_emu before reference/include on the include
 * path and define FA_EMULATOR, so lesson 09 leaves its own PTX wrappers out and these, from
 * hemu.h, take their place: shared loads and stores, fence.proxy.async, named barriers,
 * setmaxnreg, mbarriers, TMA loads and stores with their bulk groups, wgmma (ss, rs, fence,
 * commit, wait, fence_acc), each as the PTX ISA defines it, with the hazard and protocol checks
 * hemu.h describes.
 * Not here: what the real header writes in plain C++ (mbar_wait's loop, the descriptors). Lesson
 * 09 compiles its own, which is what its emulator checks; a lesson that includes ptx_hopper.h
 * instead will need them here too (the real header's text, which runs as is on the CPU). */
#pragma once
#include "hemu.h"
