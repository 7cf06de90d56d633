/* tests/fake_cuda/fake_cuda.cpp: the one fake CUDA runtime of the tests, on the CPU, so that host code
 * written for a GPU runs for real on a machine without one: the runners (tests/hostsim, with
 * tests/hostsim/fake_device.cpp for the harness's own device functions), the student's path on the
 * emulators (tests/emu/grade.py) and lesson 15's ring (tests/ring). Memory is host memory, as
 * the allocator gives it (fresh pages are zero, as a GPU's fresh memory usually is), or filled
 * with 0xff (NaN in every float type: a read before any write shows) after
 * fake_poison_allocations(1); every call is
 * synchronous (streams and events are names, a wait is a no-op), unless a test asks for one of
 * the schedules of fake_set_schedule (fake_cuda.h: stream order and event waits for real, the
 * work run when something waits for it, copies last or first); fake_set_devices(n) devices,
 * with peer access between all; an 80 GiB device (HOSTSIM_MEM_MIB: less, so that a test that
 * copies a share of the free memory stays fast). A kernel launch of a file built by nvcc
 * -cudart none calls the CPU handler registered for it (fake_on_launch). What it cannot check:
 * speed; order between streams only under a schedule, and only for the work that goes through
 * the queues (copies, memsets, fake_enqueue). The emulators describe the device itself (tests/emu/emu_device.h:
 * attributes); the emulator drivers, which run no host code, have their own refusing stand-ins. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <deque>
#include <map>
#include <vector>
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

/* ---- streams and events (fake_set_schedule) ----
 * A stream is a queue of work; `issued` counts what was queued on it, `done` what has run. An
 * event is the position (stream, issued) of its last record: complete once the stream's done
 * reaches it. cudaStreamWaitEvent queues a wait on that position. */
struct FakeWork {
    int kind;                    // WORK, COPY or WAIT
    std::function<void()> run;   // WORK, COPY
    struct FakeStream *on;       // WAIT: until on->done >= pos
    unsigned long long pos;
};
enum { WORK, COPY, WAIT };
struct FakeStream {
    std::deque<FakeWork> q;
    unsigned long long issued = 0, done = 0;
};
struct FakeEvent {
    FakeStream *s = nullptr;
    unsigned long long pos = 0;
};
static int g_schedule = FAKE_SYNC;
static std::vector<FakeStream *> &all_streams() {  // in the order made: the schedule's tie-break
    static std::vector<FakeStream *> v{new FakeStream};  // the NULL stream first
    return v;
}
static FakeStream *stream_of(cudaStream_t s) { return s ? (FakeStream *)s : all_streams()[0]; }
static CUstream_st *g_launch_stream;

void fake_set_schedule(int schedule) { g_schedule = schedule; }
int fake_get_schedule(void) { return g_schedule; }
CUstream_st *fake_launch_stream(void) { return g_launch_stream; }
void fake_enqueue(CUstream_st *stream, int copy, std::function<void()> work) {
    if (g_schedule == FAKE_SYNC) {
        work();
        return;
    }
    FakeStream *st = stream_of(stream);
    st->q.push_back({copy ? COPY : WORK, std::move(work), nullptr, 0});
    ++st->issued;
}

/* Runs every stream's queue to its end in the schedule's order. A wait that can never be met
 * cannot happen (an event records a position already queued), so a stall is a bug of the fake. */
static void drain() {
    if (g_schedule == FAKE_SYNC) return;
    const int kinds[2] = {g_schedule == FAKE_COPIES_LAST ? WORK : COPY, g_schedule == FAKE_COPIES_LAST ? COPY : WORK};
    for (;;) {
        bool any = false, ran = false;
        for (FakeStream *st : all_streams()) {  // every wait already met
            while (!st->q.empty() && st->q.front().kind == WAIT && st->q.front().on->done >= st->q.front().pos) {
                st->q.pop_front();
                ++st->done;
                ran = true;  // which may meet the wait of a stream already passed
            }
            any |= !st->q.empty();
        }
        if (!any) return;
        for (int kind : kinds) {  // then, once no wait is left to meet, one piece of work: the schedule's kind first
            if (ran) break;
            for (FakeStream *st : all_streams())
                if (!st->q.empty() && st->q.front().kind == kind) {
                    FakeWork w = std::move(st->q.front());
                    st->q.pop_front();
                    w.run();
                    ++st->done;
                    ran = true;
                    break;
                }
        }
        if (!ran) {
            fprintf(stderr, "fake CUDA: every stream waits for another: state an earlier failure (above: an index out "
                            "of range?) corrupted, or else a bug of the fake's schedule\n");
            abort();
        }
    }
}

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
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t, cudaStream_t stream) {
    auto it = kernels().find((const void *)k);
    if (it == kernels().end()) {
        fprintf(stderr, "fake CUDA: a kernel with no CPU handler was launched\n");
        abort();
    }
    g_launch_stream = stream;  // a handler may enqueue itself there (fake_enqueue)
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
    drain();
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
    drain();
    memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind, cudaStream_t s) {
    fake_enqueue(s, 1, [=] { memmove(dst, src, n); });
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void *dst, int dst_dev, const void *src, int src_dev, size_t n, cudaStream_t s) {
    if (dst_dev < 0 || dst_dev >= g_devices || src_dev < 0 || src_dev >= g_devices) return cudaErrorInvalidDevice;
    fake_enqueue(s, 1, [=] { memmove(dst, src, n); });
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p0, cudaStream_t s) {
    const cudaMemcpy3DPeerParms p = *p0;
    if (p.extent.depth != 1 || p.srcPtr.pitch < p.extent.width || p.dstPtr.pitch < p.extent.width) {
        fprintf(stderr, "fake CUDA: cudaMemcpy3DPeerAsync with a depth or pitch it does not fake\n");
        abort();
    }
    fake_enqueue(s, 1, [=] {
        for (size_t y = 0; y < p.extent.height; ++y)
            memmove((char *)p.dstPtr.ptr + y * p.dstPtr.pitch, (const char *)p.srcPtr.ptr + y * p.srcPtr.pitch,
                    p.extent.width);
    });
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    fake_enqueue(s, 1, [=] { memset(p, v, n); });
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaMemset2DAsync(void *p, size_t pitch, int v, size_t width, size_t height, cudaStream_t s) {
    fake_enqueue(s, 1, [=] {
        for (size_t y = 0; y < height; ++y) memset((char *)p + y * pitch, v, width);
    });
    return cudaSuccess;
}

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
cudaError_t CUDARTAPI cudaDeviceSynchronize(void) { drain(); return cudaSuccess; }

/* streams and events: queues and positions in them (fake_set_schedule), or names (FAKE_SYNC) */
cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
    all_streams().push_back(new FakeStream);
    *s = (cudaStream_t)all_streams().back();
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t s) {
    drain();
    auto &v = all_streams();
    for (size_t i = 1; i < v.size(); ++i)
        if (v[i] == (FakeStream *)s) {
            delete v[i];
            v.erase(v.begin() + (long)i);
            break;
        }
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t) { drain(); return cudaSuccess; }
/* a stream's id: its address (the default stream, NULL, is 0), never reused while it lives */
cudaError_t CUDARTAPI cudaStreamGetId(cudaStream_t s, unsigned long long *id) {
    *id = (unsigned long long)(uintptr_t)s;
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t) { drain(); return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = (cudaEvent_t) new FakeEvent; return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t e) { delete (FakeEvent *)e; return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    FakeEvent *ev = (FakeEvent *)e;
    ev->s = stream_of(s);
    ev->pos = ev->s->issued;  // complete once what was queued before has run
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
    const FakeEvent *ev = (const FakeEvent *)e;
    if (g_schedule == FAKE_SYNC || !ev->s) return cudaSuccess;  // never recorded: nothing to wait for
    FakeStream *st = stream_of(s);
    st->q.push_back({WAIT, nullptr, ev->s, ev->pos});
    ++st->issued;
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t) { drain(); return cudaSuccess; }
cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t) { drain(); return cudaSuccess; }

/* errors: none happen */
cudaError_t CUDARTAPI cudaGetLastError(void) { return cudaSuccess; }
const char *CUDARTAPI cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "fake"; }
const char *CUDARTAPI cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "fake CUDA error"; }
}
