/* tests/ring/ring_fake_cuda.cpp: the CUDA runtime (and NCCL) below lesson 15's ring, faked on the CPU
 * for tests/ring/ring_hostrun.cu (make ring-hostrun), so that the ring's host code runs for real on a
 * machine without a GPU: memory is host memory, every call is synchronous (streams and events
 * are names; a wait is a no-op), P fake devices; a kernel launch calls the CPU handler
 * registered for that kernel (fake_on_launch); ncclSend/ncclRecv of a group are matched and
 * copied at ncclGroupEnd. What it checks: the data flow (buffers, offsets, strides, which block
 * a rank computes on, the merges). What it cannot: anything about order between streams (all
 * runs in issue order), speed. Linked with nvcc -cudart none; lesson 09's library is not linked
 * (ring_hostrun.cu defines a CPU stand-in of its API). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <map>
#include <vector>
#ifdef RING_NCCL
#include <nccl.h>
#endif
#include "ring_fake_cuda.h"

static int g_devices = 2, g_current = 0;
static std::map<const void *, fake_kernel_fn> g_kernels;
static dim3 g_grid, g_block;
static size_t g_smem;
static void *g_stream;
static std::map<void *, size_t> g_allocs;

void fake_set_devices(int n) { g_devices = n; }
void fake_on_launch(const void *kernel, fake_kernel_fn fn) { g_kernels[kernel] = fn; }
size_t fake_bytes_allocated(void) {
    size_t n = 0;
    for (auto &a : g_allocs) n += a.second;
    return n;
}

extern "C" {
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
    auto it = g_kernels.find((const void *)k);
    if (it == g_kernels.end()) {
        fprintf(stderr, "fake CUDA: a kernel with no CPU handler was launched\n");
        abort();
    }
    it->second(grid, block, args);
    return cudaSuccess;
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t s, cudaStream_t st) {
    return __cudaLaunchKernel(k, grid, block, args, s, st);
}

cudaError_t cudaMalloc(void **p, size_t n) {
    *p = malloc(n ? n : 1);
    memset(*p, 0xff, n);  // NaN in every float type: a read before any write shows
    g_allocs[*p] = n;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    g_allocs.erase(p);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind, cudaStream_t) {
    memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p, cudaStream_t) {
    if (p->extent.depth != 1 || p->srcPtr.pitch < p->extent.width || p->dstPtr.pitch < p->extent.width) {
        fprintf(stderr, "fake CUDA: cudaMemcpy3DPeerAsync with a depth or pitch it does not fake\n");
        abort();
    }
    for (size_t y = 0; y < p->extent.height; ++y)
        memmove((char *)p->dstPtr.ptr + y * p->dstPtr.pitch, (const char *)p->srcPtr.ptr + y * p->srcPtr.pitch,
                p->extent.width);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) { memset(p, v, n); return cudaSuccess; }
cudaError_t cudaGetDevice(int *d) { *d = g_current; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= g_devices) return cudaErrorInvalidDevice;
    g_current = d;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int *n) { *n = g_devices; return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = (cudaStream_t)malloc(1); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = (cudaEvent_t)malloc(1); return cudaSuccess; }
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "fake CUDA error"; }
cudaError_t cudaDeviceCanAccessPeer(int *can, int, int) { *can = 1; return cudaSuccess; }
cudaError_t cudaDeviceEnablePeerAccess(int, unsigned) { return cudaSuccess; }

#ifdef RING_NCCL
/* A group's sends and receives, matched by (sender, receiver) and copied at ncclGroupEnd. A comm
 * is its rank number + 1. */
struct P2p { const void *src; void *dst; size_t bytes; int me, peer; };
static std::vector<P2p> g_sends, g_recvs;
static int g_comms = 0;
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int n, const int *) {
    for (int r = 0; r < n; ++r) comm[r] = (ncclComm_t)(intptr_t)(r + 1);
    g_comms = n;
    return ncclSuccess;
}
ncclResult_t ncclGroupStart(void) { g_sends.clear(); g_recvs.clear(); return ncclSuccess; }
ncclResult_t ncclSend(const void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t) {
    if (t != ncclUint8 && t != ncclInt8) return ncclInvalidArgument;
    g_sends.push_back({buf, NULL, n, (int)(intptr_t)c - 1, peer});
    return ncclSuccess;
}
ncclResult_t ncclRecv(void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t) {
    if (t != ncclUint8 && t != ncclInt8) return ncclInvalidArgument;
    g_recvs.push_back({NULL, buf, n, (int)(intptr_t)c - 1, peer});
    return ncclSuccess;
}
ncclResult_t ncclGroupEnd(void) {
    std::vector<std::vector<char>> staged;  // every send reads before any receive writes
    for (auto &s : g_sends) staged.emplace_back((const char *)s.src, (const char *)s.src + s.bytes);
    if (g_sends.size() != g_recvs.size()) return ncclInvalidUsage;
    for (auto &r : g_recvs) {
        size_t k = 0;
        while (k < g_sends.size() && !(g_sends[k].me == r.peer && g_sends[k].peer == r.me)) ++k;
        if (k == g_sends.size() || g_sends[k].bytes != r.bytes) return ncclInvalidUsage;
        memcpy(r.dst, staged[k].data(), r.bytes);
    }
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t) { return "fake NCCL error"; }
#endif
}
