/* tests/hostsim/elements.h: element i of a device array of dtype t, read as float and written
 * from a double (rounded to nearest even), for the stand-in lessons of the host simulation
 * (lowp_lesson.cpp, forward_lesson.cpp). Their own code, not buffers.h's, so that a wrong
 * encoding in the harness does not cancel out. */
#ifndef HOSTSIM_ELEMENTS_H
#define HOSTSIM_ELEMENTS_H
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stddef.h>
#include "attention.h"

static inline float get(const void *x, size_t i, dtype_t t) {
    if (t == DTYPE_FP32) return ((const float *)x)[i];
    if (t == DTYPE_FP16) return __half2float(((const __half *)x)[i]);
    return __bfloat162float(((const __nv_bfloat16 *)x)[i]);
}
static inline void put(void *x, size_t i, double v, dtype_t t) {
    if (t == DTYPE_FP32) ((float *)x)[i] = (float)v;
    else if (t == DTYPE_FP16) ((__half *)x)[i] = __float2half_rn((float)v);
    else ((__nv_bfloat16 *)x)[i] = __float2bfloat16_rn((float)v);
}
#endif
