/* tests/fp32_emu/emu_host.h: force-included (g++ -include) ahead of an fp32 lesson's source (02-05,
 * 10) when it is graded by the real runner over the fake device (tests/emu/grade.py: make
 * emu-lessonN): the emulated CUDA of cuda_runtime.h here, and what lesson 10's host code needs
 * beyond it (emu_bwd_runtime.h: float atomics, its workspace, the device queries). */
#pragma once
#include "emu_bwd_runtime.h"
