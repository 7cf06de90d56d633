/* tests/checks/headers/ptx_hopper_bwd.cu: the wrappers of reference/include/ptx_hopper_bwd.h (made
 * from solution 13's marked regions by make starters) instantiated once, so that make check-13 sees
 * ptxas accept them for sm_90a. Compiled, never run. */
#include "ptx_mma.h"
#include "ptx_hopper_bwd.h"
__global__ void k(float *o, float *g) {
    float d[32] = {};
    wgmma_fence();
    wgmma_ss_mn<__half, 64>(d, 0, 0, 0);
    wgmma_ss_mn<__nv_bfloat16, 64>(d, 0, 0, 1);
    wgmma_commit(); wgmma_wait<0>(); fence_acc(d);
    bulk_load_1d(0, o, 16, 8); bulk_reduce_add_f32(g, 0, 16); bulk_commit(); bulk_wait_read<0>();
    o[threadIdx.x] = d[0] + ld_shared_f32x2(0).x;
}
