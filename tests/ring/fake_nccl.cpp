/* tests/ring/fake_nccl.cpp: NCCL below lesson 15's ring, faked on the CPU for tests/ring/ring_hostrun.cu
 * (beside the fake CUDA runtime, tests/fake_cuda): ncclSend/ncclRecv of a group are matched at
 * ncclGroupEnd and copied, at once or, under one of the fake's schedules (fake_set_schedule), on
 * the streams as NCCL does: the receive runs on its stream once the send's stream has reached
 * the send, and the send's stream goes on only once the receive is done. Built only for the
 * NCCL ring (RING_NCCL). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>
#include <vector>
#include <nccl.h>
#include "fake_cuda.h"

extern "C" {
/* A group's sends and receives, matched by (sender, receiver) and copied at ncclGroupEnd. A comm
 * is its rank number + 1. */
struct P2p { const void *src; void *dst; size_t bytes; int me, peer; cudaStream_t stream; };
static std::vector<P2p> g_sends, g_recvs;
static int g_comms = 0;
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int n, const int *) {
    for (int r = 0; r < n; ++r) comm[r] = (ncclComm_t)(intptr_t)(r + 1);
    g_comms = n;
    return ncclSuccess;
}
ncclResult_t ncclGroupStart(void) { g_sends.clear(); g_recvs.clear(); return ncclSuccess; }
ncclResult_t ncclSend(const void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    if (t != ncclUint8 && t != ncclInt8) return ncclInvalidArgument;
    g_sends.push_back({buf, NULL, n, (int)(intptr_t)c - 1, peer, s});
    return ncclSuccess;
}
ncclResult_t ncclRecv(void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s) {
    if (t != ncclUint8 && t != ncclInt8) return ncclInvalidArgument;
    g_recvs.push_back({NULL, buf, n, (int)(intptr_t)c - 1, peer, s});
    return ncclSuccess;
}
/* The send matching receive r, or -1. */
static int match(const P2p &r) {
    for (size_t k = 0; k < g_sends.size(); ++k)
        if (g_sends[k].me == r.peer && g_sends[k].peer == r.me) return g_sends[k].bytes == r.bytes ? (int)k : -1;
    return -1;
}
ncclResult_t ncclGroupEnd(void) {
    if (g_sends.size() != g_recvs.size()) return ncclInvalidUsage;
    for (auto &r : g_recvs)
        if (match(r) < 0) return ncclInvalidUsage;
    if (fake_get_schedule() == FAKE_SYNC) {
        std::vector<std::vector<char>> staged;  // every send reads before any receive writes
        for (auto &s : g_sends) staged.emplace_back((const char *)s.src, (const char *)s.src + s.bytes);
        for (auto &r : g_recvs) memcpy(r.dst, staged[match(r)].data(), r.bytes);
        return ncclSuccess;
    }
    static std::vector<cudaEvent_t> sent, received;  // one each per send: made once, reused
    while (sent.size() < g_sends.size()) {
        sent.emplace_back(); received.emplace_back();
        cudaEventCreate(&sent.back()); cudaEventCreate(&received.back());
    }
    for (size_t k = 0; k < g_sends.size(); ++k) cudaEventRecord(sent[k], g_sends[k].stream);  // the send's turn
    for (auto &r : g_recvs) {  // the receive, once the sender's stream is there
        const int k = match(r);
        cudaStreamWaitEvent(r.stream, sent[k], 0);
        const P2p s = g_sends[k], d = r;
        fake_enqueue((CUstream_st *)d.stream, 1, [s, d] { memcpy(d.dst, s.src, d.bytes); });
        cudaEventRecord(received[k], d.stream);
    }
    for (size_t k = 0; k < g_sends.size(); ++k) cudaStreamWaitEvent(g_sends[k].stream, received[k], 0);
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t) { return "fake NCCL error"; }
}
