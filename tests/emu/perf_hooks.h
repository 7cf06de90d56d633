/* tests/emu/perf_hooks.h: the ordinary shared-memory loads and stores of a kernel, for the performance
 * report (perf_report.h). A kernel's plain C++ accesses (`*reinterpret_cast<uint4 *>(tile + off) = v`)
 * go through no wrapper, so the emulator cannot see them; a report build (tests/emu/grade.py with
 * EMU_REPORT on) compiles the file with g++'s address instrumentation in its kernel-sanitizer form,
 *   -fsanitize=kernel-address --param asan-instrumentation-with-call-threshold=0
 *   --param asan-stack=0 --param asan-globals=0 --param asan-memintrin=0
 * which calls __asan_{load,store}{1,2,4,8,16,N}_noabort(address) before every load and store and
 * links no sanitizer runtime: the functions below are the whole runtime. Each keeps the accesses
 * that land in the emulated shared memory, with its return address (the instruction: addr2line
 * gives its source line) and the lane's barrier count. The emulator that includes this defines,
 * before it, EMU_PERF_SMEM (the shared-memory array), EMU_PERF_SMEM_BYTES and emu_perf_sync(). */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "perf_report.h"

#define EMU_NOSAN __attribute__((no_sanitize_address, noinline))

EMU_NOSAN static void emu_perf_plain(void *p, size_t bytes, bool store, void *ret) {
    const uintptr_t off = (uintptr_t)p - (uintptr_t)EMU_PERF_SMEM;
    if (off >= (uintptr_t)EMU_PERF_SMEM_BYTES || emu::self() < 0) return;
    emu_perf::lane_access((uint64_t)(uintptr_t)ret, nullptr, 0, (uint32_t)off, (unsigned)bytes, store, emu_perf_sync());
}

extern "C" {
#define EMU_PERF_HOOK(n)                                                                                             \
    EMU_NOSAN void __asan_load##n##_noabort(void *p) { emu_perf_plain(p, n, false, __builtin_return_address(0)); }   \
    EMU_NOSAN void __asan_store##n##_noabort(void *p) { emu_perf_plain(p, n, true, __builtin_return_address(0)); }
EMU_PERF_HOOK(1)
EMU_PERF_HOOK(2)
EMU_PERF_HOOK(4)
EMU_PERF_HOOK(8)
EMU_PERF_HOOK(16)
EMU_NOSAN void __asan_loadN_noabort(void *p, size_t n) { emu_perf_plain(p, n, false, __builtin_return_address(0)); }
EMU_NOSAN void __asan_storeN_noabort(void *p, size_t n) { emu_perf_plain(p, n, true, __builtin_return_address(0)); }
/* what the instrumentation also calls: before a call that does not return, and the module's
 * registration (there is nothing to register) */
EMU_NOSAN void __asan_handle_no_return(void) {}
EMU_NOSAN void __asan_before_dynamic_init(const char *) {}
EMU_NOSAN void __asan_after_dynamic_init(void) {}
#undef EMU_PERF_HOOK
}
