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

/* Streams for real (tests/ring): by default every call runs when it is made (FAKE_SYNC). The
 * other two schedules queue the work of each stream and run it in stream order, a stream's
 * cudaStreamWaitEvent holding it until the work recorded before the event has run, and only
 * when something waits for the result (a synchronizing call: cudaStreamSynchronize,
 * cudaDeviceSynchronize, cudaEventSynchronize or a query, cudaMemcpy, cudaFree,
 * cudaStreamDestroy). Between two runnable streams the schedule picks: FAKE_COPIES_LAST runs
 * kernels (and fake_enqueue's work) first and a copy or memset only when nothing else can run,
 * as if every transfer were slow; FAKE_COPIES_FIRST the opposite, as if every kernel were. A
 * read not ordered after the write it needs (a missing wait, an event recorded on the wrong
 * stream) then reads the wrong data in one of the two, every time. */
enum { FAKE_SYNC = 0, FAKE_COPIES_LAST = 1, FAKE_COPIES_FIRST = 2 };
void fake_set_schedule(int schedule);
int fake_get_schedule(void);
#ifdef __cplusplus
#include <functional>
struct CUstream_st;
/* Work on a stream: run now (FAKE_SYNC) or queued; copy = 1 schedules it as a copy. A kernel's
 * CPU stand-in that wants stream order captures its arguments' values and enqueues itself on
 * fake_launch_stream(), the stream of the launch it handles. */
void fake_enqueue(CUstream_st *stream, int copy, std::function<void()> work);
CUstream_st *fake_launch_stream(void);
#endif
#endif
