/* tests/ring/fake_nccl.cpp: NCCL below lesson 15's ring, faked on the CPU for tests/ring/ring_hostrun.cu
 * (beside the fake CUDA runtime, tests/fake_cuda): ncclSend/ncclRecv of a group are matched and
 * copied at ncclGroupEnd. Built only for the NCCL ring (RING_NCCL). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>
#include <vector>
#include <nccl.h>

extern "C" {
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
}
