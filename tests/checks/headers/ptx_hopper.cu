/* tests/checks/headers/ptx_hopper.cu: the wrappers of reference/include/ptx_hopper.h (made from
 * solution 09's marked regions by make starters) instantiated once, so that make check-09 sees ptxas
 * accept them for sm_90a. Compiled, never run. */
#include "ptx_mma.h"
#include "ptx_hopper.h"
__global__ void k(float *o) {
    float d[64] = {};
    uint32_t a[4] = {};
    wgmma_fence();
    wgmma_ss<__half, 128>(d, 0, 0, 0);
    wgmma_rs<__nv_bfloat16, 128>(d, a, 0, 1);
    wgmma_commit(); wgmma_wait<0>(); fence_acc(d);
    mbar_wait(0, 0); named_sync(1, 256);
    o[threadIdx.x] = d[0] + desc_kmajor<128>(0, 0, 1) + desc_mnmajor<64>(0, 1);
}
