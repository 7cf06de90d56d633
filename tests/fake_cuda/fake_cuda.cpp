/* tests/fake_cuda/fake_cuda.cpp: the one fake CUDA runtime of the tests, on the CPU, so that host code
 * written for a GPU runs for real on a machine without one: the runners (tests/hostsim, with
 * tests/hostsim/fake_device.cpp for the harness's own device functions), the student's path on the
 * emulators (tests/emu/grade.py) and lesson 15's ring (tests/ring). Memory is host memory, as
 * the allocator gives it (fresh pages are zero, as a GPU's fresh memory usually is), or filled
 * with 0xff (NaN in every float type: a read before any write shows) after
 * fake_poison_allocations(1); every call is
 * synchronous (streams and events are names, a wait is a no-op); fake_set_devices(n) devices,
 * with peer access between all; an 80 GiB device (HOSTSIM_MEM_MIB: less, so that a test that
 * copies a share of the free memory stays fast). A kernel launch of a file built by nvcc
 * -cudart none calls the CPU handler registered for it (fake_on_launch). What it cannot check:
 * order between streams, speed. The emulators describe the device itself (tests/emu/emu_device.h:
 * attributes); the emulator drivers, which run no host code, have their own refusing stand-ins. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <map>
#include "fake_cuda.h"

static int g_devices = 1, g_current = 0;
/* the CPU handlers, by kernel; made on first use, so that a test may register its handlers from a
 * static initializer of its own, whatever the order of the translation units */
static std::map<const void *, fake_kernel_fn> &kernels() {
    static std::map<const void *, fake_kernel_fn> m;
    return m;
}
static std::map<void *, size_t> g_allocs;
static size_t g_in_use = 0;
static int g_fill = 0;  // what cudaMalloc writes into new memory (0: nothing)
static dim3 g_grid, g_block;
static size_t g_smem;
static void *g_stream;
static const size_t FAKE_MEM = [] {
    const char *e = getenv("HOSTSIM_MEM_MIB");
    return e && atol(e) > 0 ? (size_t)atol(e) << 20 : (size_t)80 << 30;
}();

void fake_set_devices(int n) { g_devices = n; }
void fake_poison_allocations(int on) { g_fill = on ? 0xff : 0; }
void fake_on_launch(const void *kernel, fake_kernel_fn fn) { kernels()[kernel] = fn; }
size_t fake_bytes_allocated(void) { return g_in_use; }

extern "C" {
/* what nvcc's generated host code calls (a file built with -cudart none) */
void **__cudaRegisterFatBinary(void *) { static void *h; return &h; }
void __cudaRegisterFatBinaryEnd(void **) {}
void __cudaUnregisterFatBinary(void **) {}
char __cudaInitModule(void **) { return 1; }
void __cudaRegisterFunction(void **, const char *, char *, const char *, int, uint3 *, uint3 *, dim3 *, dim3 *, int *) {}
void __cudaRegisterVar(void **, char *, char *, const char *, int, size_t, int, int) {}
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem, struct CUstream_st *stream) {
    g_grid = grid; g_block = block; g_smem = smem; g_stream = stream;
    return 0;
}
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *smem, void *stream) {
    *grid = g_grid; *block = g_block; *smem = g_smem; *(void **)stream = g_stream;
    return cudaSuccess;
}
cudaError_t __cudaGetKernel(cudaKernel_t *k, const void *fn) { *k = (cudaKernel_t)fn; return cudaSuccess; }
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t, cudaStream_t) {
    auto it = kernels().find((const void *)k);
    if (it == kernels().end()) {
        fprintf(stderr, "fake CUDA: a kernel with no CPU handler was launched\n");
        abort();
    }
    it->second(grid, block, args);
    return cudaSuccess;
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t s, cudaStream_t st) {
    return __cudaLaunchKernel(k, grid, block, args, s, st);
}

/* memory */
cudaError_t CUDARTAPI cudaMalloc(void **p, size_t bytes) {
    if (g_in_use + bytes > FAKE_MEM) return cudaErrorMemoryAllocation;
    *p = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    if (!*p) return cudaErrorMemoryAllocation;
    if (g_fill) memset(*p, g_fill, bytes);
    g_allocs[*p] = bytes;
    g_in_use += bytes;
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaFree(void *p) {
    auto it = g_allocs.find(p);
    if (it != g_allocs.end()) { g_in_use -= it->second; g_allocs.erase(it); }
    free(p);
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemGetInfo(size_t *free_b, size_t *total) {
    *free_b = FAKE_MEM - g_in_use;
    *total = FAKE_MEM;
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind) {
    memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind, cudaStream_t) {
    memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p, cudaStream_t) {
    if (p->extent.depth != 1 || p->srcPtr.pitch < p->extent.width || p->dstPtr.pitch < p->extent.width) {
        fprintf(stderr, "fake CUDA: cudaMemcpy3DPeerAsync with a depth or pitch it does not fake\n");
        abort();
    }
    for (size_t y = 0; y < p->extent.height; ++y)
        memmove((char *)p->dstPtr.ptr + y * p->dstPtr.pitch, (const char *)p->srcPtr.ptr + y * p->srcPtr.pitch,
                p->extent.width);
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { memset(p, v, n); return cudaSuccess; }

/* devices */
cudaError_t CUDARTAPI cudaGetDevice(int *d) { *d = g_current; return cudaSuccess; }
cudaError_t CUDARTAPI cudaSetDevice(int d) {
    if (d < 0 || d >= g_devices) return cudaErrorInvalidDevice;
    g_current = d;
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGetDeviceCount(int *n) { *n = g_devices; return cudaSuccess; }
cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int *can, int, int) { *can = 1; return cudaSuccess; }
cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int, unsigned) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaDeviceSynchronize(void) { return cudaSuccess; }

/* streams and events: names */
cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = (cudaStream_t)malloc(1); return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = (cudaEvent_t)malloc(1); return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }

/* errors: none happen */
cudaError_t CUDARTAPI cudaGetLastError(void) { return cudaSuccess; }
const char *CUDARTAPI cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "fake"; }
const char *CUDARTAPI cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "fake CUDA error"; }
}
