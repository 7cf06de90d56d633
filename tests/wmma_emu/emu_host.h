/* tests/wmma_emu/emu_host.h: force-included (g++ -include) ahead of lesson 06's source, which is
 * compiled whole over the wmma emulator (only its launch rewritten: tests/emu/prep.py): by the
 * driver emu06.cpp (make emu-06) and by tests/emu/grade.py (make emu-lesson6, linked with the real
 * runner over the fake device of tests/hostsim, which defines cudaMalloc and the rest). Here: the
 * device queries and attributes the lesson's host code makes (tests/emu/emu_device.h). */
#pragma once
#include "wmma_emu.h"
#include "../emu/emu_device.h"  // the device the host code sees (queries, attributes)
