/* ptx_cp_async.h: the asynchronous copies lesson 08 teaches you to write, given from lesson 09 on.
 *
 *   cp_async_16      one 16-byte copy global -> shared that bypasses registers (zero-fill option)
 *   cp_async_commit  close the group of copies this thread issued since the last commit
 *   cp_async_wait<N> wait until at most N of this thread's groups are still in flight
 *
 * Source: PTX ISA, "Data Movement and Conversion Instructions: cp.async". Groups complete in
 * the order they were committed; a wait covers only the calling thread's copies, so a tile
 * other threads copied is safe to read after the wait and a __syncthreads. The code below is made
 * from lesson 08's solution, where they are written (make starters; edit them there). The CPU
 * emulator (tests/) puts its own header of this name first on the include path.
 *
 * Preconditions: sm_80 or newer (FA_SM80, see ptx_mma.h); dst and src 16-byte aligned. */
#ifndef PTX_CP_ASYNC_H
#define PTX_CP_ASYNC_H
#include <stdint.h>
#include "ptx_mma.h" /* FA_SM80 */

// [generated from solutions/08-async-pipeline/pipeline.cu, regions cp-async]
/* One 16-byte global -> shared copy that does not go through registers
 * (.cg: cache in L2 only; K and V are re-read by other blocks, not by this
 * SM's L1). With valid == false the source size is 0 and the 16 shared bytes
 * are filled with zeros: that is how rows past the end of the sequence become
 * zeros without a branch around the copy. */
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void *src, bool valid) {
#if FA_SM80
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
#endif
}
/* Close the group of copies this thread issued since the last commit. */
__device__ __forceinline__ void cp_async_commit() {
#if FA_SM80
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/* Wait until at most N of this thread's committed groups are still in flight
 * (groups complete in order). Other threads' copies need a __syncthreads. */
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if FA_SM80
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}
// [end generated]
#endif
