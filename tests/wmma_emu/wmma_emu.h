/* wmma_emu.h: run lesson 06's kernel on the CPU to check its index math, masks and
 * barriers without a GPU, on the emulator core (tests/emu/core.h: one fiber per CUDA thread,
 * run until it waits, so a missing barrier shows every time); __syncthreads and __syncwarp
 * are the core's barriers; nvcuda::wmma is reimplemented with a deliberately scrambled element order
 * (a different bijection for A, B and accumulator fragments), so a kernel that assumed the
 * real register layout of a fragment would fail here. Every wmma call also checks the
 * documented contract: 32-byte aligned pointer, ldm a multiple of 16 bytes, and the same
 * pointer, ldm and layout in all 32 lanes.
 *
 * Not checked: bank conflicts, real timing, memory ordering beyond the barriers. */
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <vector>
#include <memory>
#include <type_traits>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "../emu/core.h"

#define __launch_bounds__(...)
inline emu::Idx emu_grid;
#define threadIdx (emu::tid())
#define blockIdx (emu::bid())
#define gridDim emu_grid
using std::min;

struct EmuBlock {
    emu::Barrier block{128, "__syncthreads"};
    emu::Barrier warp[4]{emu::Barrier(32, "__syncwarp or a warp-collective wmma call", 0),
                         emu::Barrier(32, "__syncwarp or a warp-collective wmma call", 1),
                         emu::Barrier(32, "__syncwarp or a warp-collective wmma call", 2),
                         emu::Barrier(32, "__syncwarp or a warp-collective wmma call", 3)};
    float shfl[4][32];
    float mat[4][3][256];           // per-warp operands of one mma
    const void *arg_ptr[4][32];     // per-lane arguments of one wmma call
    unsigned arg_ldm[4][32];
};
inline EmuBlock *emu_block;
/* The block's dynamic shared memory: the lesson's kernel declares it `extern __shared__
 * __align__(128) unsigned char smem[];`, which g++ reads as this array (blocks run one after
 * another, so one array serves them all). */
constexpr size_t EMU_SMEM_BYTES = 227 * 1024;
alignas(128) unsigned char smem[EMU_SMEM_BYTES];
inline int emu_warp() { return emu::tid().x / 32; }
inline int emu_lane() { return emu::tid().x % 32; }

inline void __syncthreads() { emu_block->block.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_block->warp[emu_warp()].arrive_and_wait(); }
/* The warp shuffles a lesson may write (any 4-byte type), each a rendezvous of the warp's 32 lanes:
 * the value of lane `src` (idx), lane ^ m (xor), lane + d (down, own value past the end), lane - d (up). */
template <class T> inline T emu_shfl(T v, int from) {
    static_assert(sizeof(T) == 4, "the emulator's shuffles move 4-byte values");
    float bits;
    memcpy(&bits, &v, 4);
    emu_block->shfl[emu_warp()][emu_lane()] = bits;
    __syncwarp();
    bits = emu_block->shfl[emu_warp()][from & 31];
    __syncwarp();
    T r;
    memcpy(&r, &bits, 4);
    return r;
}
template <class T> inline T __shfl_xor_sync(unsigned, T v, int m) { return emu_shfl(v, emu_lane() ^ m); }
template <class T> inline T __shfl_sync(unsigned, T v, int src) { return emu_shfl(v, src); }
template <class T> inline T __shfl_down_sync(unsigned, T v, unsigned d) {
    return emu_shfl(v, emu_lane() + (int)d < 32 ? emu_lane() + (int)d : emu_lane());
}
template <class T> inline T __shfl_up_sync(unsigned, T v, unsigned d) {
    return emu_shfl(v, emu_lane() >= (int)d ? emu_lane() - (int)d : emu_lane());
}
inline void __trap() { fprintf(stderr, "__trap()\n"); abort(); }

inline float emu_f(float x) { return x; }
inline float emu_f(__half x) { return __half2float(x); }
inline float emu_f(__nv_bfloat16 x) { return __bfloat162float(x); }

namespace nvcuda { namespace wmma {
struct row_major {}; struct col_major {};
struct matrix_a {}; struct matrix_b {}; struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

/* Element e of lane `lane` holds matrix element idx = row * 16 + col. */
template <class Use> inline int emu_map(int lane, int e) {
    const int mul = std::is_same<Use, matrix_a>::value ? 37 : std::is_same<Use, matrix_b>::value ? 101 : 77;
    return ((lane * 8 + e) * mul + 11) % 256;
}
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulator knows 16x16x16 only");
    enum { num_elements = 8 };
    T x[8];
};

/* The contract of every wmma call: same arguments in all 32 lanes, 256-bit aligned
 * pointer, ldm a multiple of 16 bytes. */
inline void emu_contract(const void *p, unsigned ldm, size_t elem, const char *what) {
    EmuBlock *b = emu_block;
    const int w = emu_warp();
    b->arg_ptr[w][emu_lane()] = p;
    b->arg_ldm[w][emu_lane()] = ldm;
    __syncwarp();
    if (emu_lane() == 0) {
        for (int l = 1; l < 32; ++l)
            if (b->arg_ptr[w][l] != p || b->arg_ldm[w][l] != ldm) {
                fprintf(stderr, "%s: lanes disagree on pointer or ldm, or not every lane of the warp made this "
                        "call (a wmma call inside a branch that some lanes skip: every lane must take part)\n",
                        what);
                abort();
            }
        if ((uintptr_t)p % 32) { fprintf(stderr, "%s: pointer not 32-byte aligned\n", what); abort(); }
        if (ldm * elem % 16) { fprintf(stderr, "%s: ldm not a multiple of 16 bytes\n", what); abort(); }
    }
    __syncwarp();
}
inline int emu_at(int r, int c, unsigned ldm, bool row_major) { return row_major ? r * ldm + c : c * ldm + r; }

template <class Use, class T, class Lay>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Lay> &f, const T *p, unsigned ldm) {
    emu_contract(p, ldm, sizeof(T), "load_matrix_sync(a/b)");
    for (int e = 0; e < 8; ++e) {
        const int idx = emu_map<Use>(emu_lane(), e);
        f.x[e] = p[emu_at(idx / 16, idx % 16, ldm, std::is_same<Lay, row_major>::value)];
    }
    __syncwarp();
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm,
                             layout_t l) {
    emu_contract(p, ldm, 4, "load_matrix_sync(acc)");
    for (int e = 0; e < 8; ++e) {
        const int idx = emu_map<accumulator>(emu_lane(), e);
        f.x[e] = p[emu_at(idx / 16, idx % 16, ldm, l == mem_row_major)];
    }
    __syncwarp();
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm,
                              layout_t l) {
    emu_contract(p, ldm, 4, "store_matrix_sync");
    for (int e = 0; e < 8; ++e) {
        const int idx = emu_map<accumulator>(emu_lane(), e);
        p[emu_at(idx / 16, idx % 16, ldm, l == mem_row_major)] = f.x[e];
    }
    __syncwarp();
}
template <class F, class V> inline void fill_fragment(F &f, V v) {
    for (auto &x : f.x) x = v;
}
template <class T, class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c) {
    float(*m)[256] = emu_block->mat[emu_warp()];
    __syncwarp();
    for (int e = 0; e < 8; ++e) {
        m[0][emu_map<matrix_a>(emu_lane(), e)] = emu_f(a.x[e]);
        m[1][emu_map<matrix_b>(emu_lane(), e)] = emu_f(b.x[e]);
        m[2][emu_map<accumulator>(emu_lane(), e)] = c.x[e];
    }
    __syncwarp();
    float out[8];
    for (int e = 0; e < 8; ++e) {
        const int idx = emu_map<accumulator>(emu_lane(), e), r = idx / 16, col = idx % 16;
        float acc = m[2][idx];
        for (int k = 0; k < 16; ++k) acc += m[0][r * 16 + k] * m[1][k * 16 + col];
        out[e] = acc;
    }
    __syncwarp();
    for (int e = 0; e < 8; ++e) d.x[e] = out[e];
}
}}  // namespace nvcuda::wmma

/* kernel<<<grid, threads, bytes, stream>>>(args) as tests/emu/prep.py rewrites it: the blocks one
 * after another on the emulator core, shared memory filled with 0xff first (NaN in every
 * fp32/fp16/bf16 reading, so reading what nobody wrote shows). */
template <class F>
inline void emu_launch(dim3 grid, int threads, size_t bytes, const F &fn) {
    if (threads != 128) { fprintf(stderr, "wmma_emu: %d threads per block; the emulator models 4 warps\n", threads); abort(); }
    if (bytes > EMU_SMEM_BYTES) { fprintf(stderr, "wmma_emu: %zu bytes of shared memory\n", bytes); abort(); }
    emu_grid = {grid.x, grid.y, grid.z};
    std::unique_ptr<EmuBlock> blk;
    emu::Hooks h;
    h.block_begin = [&] {
        memset(smem, 0xff, bytes);
        blk = std::make_unique<EmuBlock>();
        emu_block = blk.get();
    };
    h.thread = [&](int) { fn(); };
    emu::run_grid(emu::Idx{grid.x, grid.y, grid.z}, threads, h);
    emu_block = nullptr;
}
