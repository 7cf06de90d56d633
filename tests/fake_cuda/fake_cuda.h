/* tests/fake_cuda/fake_cuda.h: what a test asks of the fake CUDA runtime (tests/fake_cuda/fake_cuda.cpp)
 * beyond the CUDA runtime's own calls. */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H
#include <stddef.h>
#include <vector_types.h>
/* The CPU stand-in of one kernel: its grid, block and the launch's argument pointers (args[i]
 * points to the i-th parameter, as cudaLaunchKernel gets them). */
typedef void (*fake_kernel_fn)(dim3 grid, dim3 block, void **args);
void fake_on_launch(const void *kernel, fake_kernel_fn fn);  // kernel: the __global__ function's host address
void fake_set_devices(int n);                                // cudaGetDeviceCount's answer (default 1)
size_t fake_bytes_allocated(void);                           // bytes cudaMalloc holds now
void fake_poison_allocations(int on);                        // 1: new memory is 0xff (NaN), else not written
#endif
