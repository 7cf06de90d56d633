/* tma_params.h: the tensor maps of lesson 09 (Hopper TMA), as plain C that a CUDA file and a
 * CPU test can both include (header-only; no CUDA headers needed).
 *
 * A TMA copy moves a "box" of a tensor from global to shared memory. The tensor is described
 * once, on the host, by a tensor map (cuTensorMapEncodeTiled, CUDA driver API): its element
 * type, its sizes and byte strides, the box size and the swizzle applied in shared memory.
 * This file computes those numbers for lesson 09's Q, K and V, and says where TMA puts each
 * element of a box in shared memory, so that the wgmma descriptors can be checked against it
 * (tests/unit/test_tma.c, tests/hopper_emu).
 *
 * The view: Q, K and V are [B, H, N, d] row-major with rows `ld` elements apart (ld = d in
 * the course's layout), seen as a 3-D tensor {d, N, B*H} (innermost first). A box is
 * {64, rows, 1}: 64 columns (128 bytes of a 16-bit type, the span of the 128-byte swizzle,
 * which is the widest box row TMA allows with it) of `rows` rows of one (b, h) slice. A tile
 * of d columns is d / 64 such boxes, stored one after the other in shared memory. Because N
 * is a dimension of its own, a box that runs past row N - 1 is filled with zeros by TMA
 * instead of reading the next (b, h) slice: ragged last tiles need no bounds code.
 *
 * Compiled by nvcc, it also makes the tensor map itself (tma_tensor_map_make, at the end).
 *
 * Source: CUDA driver API, cuTensorMapEncodeTiled (requirements on sizes, strides, box,
 * swizzle); PTX ISA, "Tensor copy" and the shared-memory swizzling modes. */
#ifndef TMA_PARAMS_H
#define TMA_PARAMS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "attention.h"

#if defined(__CUDACC__)
#define TMA_HD __host__ __device__
#else
#define TMA_HD
#endif

enum {
    TMA_BOX_COLS = 64,       /* columns per box: 128 bytes of a 16-bit type */
    TMA_SWIZZLE_BYTES = 128, /* CU_TENSOR_MAP_SWIZZLE_128B */
    TMA_MAX_BOX = 256        /* largest box size in any dimension */
};

/* The arguments of cuTensorMapEncodeTiled for one of Q, K, V, and what a tile load costs. */
typedef struct {
    unsigned rank;             /* 3 */
    uint64_t dims[3];          /* elements, innermost first: {d, N, B*H} */
    uint64_t strides[2];       /* bytes between consecutive indices of dims 1 and 2: {ld*2, N*ld*2} */
    uint32_t box[3];           /* {64, rows, 1} */
    uint32_t elem_strides[3];  /* {1, 1, 1}: every element of the box */
    unsigned esize;            /* bytes per element (2) */
    dtype_t dtype;             /* DTYPE_FP16 or DTYPE_BF16 */
    unsigned swizzle_bytes;    /* 128 */
    unsigned boxes;            /* d / 64: TMA copies per tile of `rows` rows */
    unsigned tile_bytes;       /* rows * d * 2: what the mbarrier of one tile expects (expect_tx) */
} tma_tile_params;

/* Fills *p for a tensor at `base` of BH slices of N rows of d columns, `ld` elements between
 * rows (ld >= d) and `slice` elements between slices, boxes of `rows` rows. The slices may
 * interleave with the rows: a packed batch [tokens, H, d] (lesson 17) is H slices of `tokens`
 * rows, ld = H d, slice = d. Returns 0, or -1 with the reason in err (the limits of
 * cuTensorMapEncodeTiled, and what lesson 09's kernel assumes). */
static inline int tma_view_params_make(tma_tile_params *p, const void *base, long long BH, long long N, int d,
                                       long long ld, long long slice, dtype_t dtype, int rows, char *err,
                                       size_t errlen) {
#define TMA_REFUSE(...) do { if (err && errlen) snprintf(err, errlen, __VA_ARGS__); return -1; } while (0)
    if (dtype != DTYPE_FP16 && dtype != DTYPE_BF16)
        TMA_REFUSE("dtype must be fp16 or bf16 (wgmma's 16-bit inputs), got %d", (int)dtype);
    if (d < TMA_BOX_COLS || d > TMA_MAX_BOX || d % TMA_BOX_COLS)
        TMA_REFUSE("d = %d: must be a multiple of %d in [%d, %d] (a tile row is d/64 boxes of 128 bytes)", d,
                   TMA_BOX_COLS, TMA_BOX_COLS, TMA_MAX_BOX);
    if (ld < d) TMA_REFUSE("row stride ld = %lld elements is smaller than d = %d", ld, d);
    if ((ld * 2) % 16) TMA_REFUSE("row stride %lld bytes is not a multiple of 16 (a TMA requirement)", ld * 2);
    if (N < 1 || BH < 1) TMA_REFUSE("N = %lld and B*H = %lld must be at least 1", N, BH);
    if (N > (1LL << 32) || BH > (1LL << 32))
        TMA_REFUSE("N = %lld or B*H = %lld exceeds 2^32, the largest TMA dimension", N, BH);
    if (slice < d || (slice * 2) % 16)
        TMA_REFUSE("slice stride %lld elements: at least d = %d and a multiple of 16 bytes (a TMA requirement)", slice, d);
    if ((double)N * (double)ld * 2.0 >= (double)(1ULL << 40) || (double)slice * 2.0 >= (double)(1ULL << 40))
        TMA_REFUSE("%lld rows of %lld bytes, slices %lld bytes apart: strides must stay below 2^40 bytes", N, ld * 2,
                   slice * 2);
    if (rows < 8 || rows > TMA_MAX_BOX || rows % 8)
        TMA_REFUSE("box of %d rows: must be a multiple of 8 in [8, %d] (each box of a tile then starts on a "
                   "1024-byte boundary, where the 128-byte swizzle pattern starts)", rows, TMA_MAX_BOX);
    if ((uintptr_t)base % 16) TMA_REFUSE("base address %p is not 16-byte aligned", base);
#undef TMA_REFUSE
    p->rank = 3;
    p->dims[0] = (uint64_t)d;
    p->dims[1] = (uint64_t)N;
    p->dims[2] = (uint64_t)BH;
    p->strides[0] = (uint64_t)ld * 2;
    p->strides[1] = (uint64_t)slice * 2;
    p->box[0] = TMA_BOX_COLS;
    p->box[1] = (uint32_t)rows;
    p->box[2] = 1;
    p->elem_strides[0] = p->elem_strides[1] = p->elem_strides[2] = 1;
    p->esize = 2;
    p->dtype = dtype;
    p->swizzle_bytes = TMA_SWIZZLE_BYTES;
    p->boxes = (unsigned)(d / TMA_BOX_COLS);
    p->tile_bytes = (unsigned)rows * (unsigned)d * 2u;
    return 0;
}
/* The course's layout [B, H, N, d] (slices N ld elements apart): tma_view_params_make. */
static inline int tma_tile_params_make(tma_tile_params *p, const void *base, long long BH, long long N, int d,
                                       long long ld, dtype_t dtype, int rows, char *err, size_t errlen) {
    return tma_view_params_make(p, base, BH, N, d, ld, N * ld, dtype, rows, err, errlen);
}

/* The 128-byte swizzle (CU_TENSOR_MAP_SWIZZLE_128B), on a shared-memory byte address: within
 * every 1024-byte block (8 rows of 128 bytes), 16-byte chunk c of row r lands at chunk c ^ r.
 * It acts on address bits, so a swizzled buffer must start at a multiple of 1024 bytes. */
static inline TMA_HD uint32_t tma_swizzle128(uint32_t addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

/* Byte offset, from the (1024-byte aligned) start of a tile, of element (r, c) of a tile of
 * `rows` rows and d columns of a 16-bit type loaded as d/64 boxes of {64, rows}: box c / 64
 * first, then row r, then the swizzled 16-byte chunk, then the element. This is the layout
 * the wgmma descriptors of lesson 09 describe (128-byte swizzle, K-major for Q and K, MN-major
 * for V). */
static inline TMA_HD uint32_t tma_tile_offset(int r, int c, int rows) {
    const uint32_t lin = (uint32_t)(c / TMA_BOX_COLS) * (uint32_t)rows * 128u + (uint32_t)r * 128u +
                         (uint32_t)(c % TMA_BOX_COLS) * 2u;
    return tma_swizzle128(lin);
}
/* Where chunk k (columns 8 k .. 8 k + 7) of a row of such a tile lies, from where its chunk 0 does:
 * `row0` = base + tma_tile_offset(r, c, rows) for a column c < 8 of row r, base a multiple of 1024
 * bytes; the result is base + tma_tile_offset(r, c + 8 k, rows). In a 1024-byte block the swizzle
 * leaves row r's chunk-0 address with r mod 8 in bits 4-6 and the chunk's own bits there 0, so the
 * chunk is one XOR (after the box's offset): an epilogue that writes a row's chunks in turn pays
 * one instruction per store instead of tma_tile_offset's four (lessons 09 and 14, worklogs). */
static inline TMA_HD uint32_t tma_tile_chunk(uint32_t row0, int k, int rows) {
    return (row0 + (uint32_t)(k / 8) * (uint32_t)rows * 128u) ^ ((uint32_t)(k % 8) * 16u);
}

#if defined(__CUDACC__)
/* ---- CUDA only: the tensor map, for a lesson's host code ---- */
#include <cuda.h> /* CUtensorMap and its enums (types only: no -lcuda, see tma_encoder) */
#include <cuda_runtime.h>

/* cuTensorMapEncodeTiled is a CUDA driver function. Asking the runtime for its address
 * (cudaGetDriverEntryPointByVersion) avoids linking with -lcuda. NULL (and printed why) when
 * the driver has none. */
typedef CUresult (*tma_encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                  const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static tma_encode_fn tma_encoder(void) {
    static tma_encode_fn fn = NULL;
    static int tried = 0;
    if (!tried) {
        tried = 1;
        void *p = NULL;
        cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSuccess;
#if CUDART_VERSION >= 12050
        cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
#else
        cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &q);
#endif
        if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !p)
            fprintf(stderr, "%s:%d: cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled) failed (%s, query %d)\n"
                    "  hint: TMA tensor maps need a CUDA 12 driver or newer (nvidia-smi shows its CUDA version)\n",
                    __FILE__, __LINE__, cudaGetErrorString(e), (int)q);
        else
            fn = (tma_encode_fn)p;
    }
    return fn;
}

// [region tensor-map]
/* The tensor map of BH slices of N rows of d columns of `dtype` at `base` (rows ld, slices `slice`
 * elements apart: tma_view_params_make) with boxes of `rows` rows, the 128-byte swizzle, rows
 * past N zero-filled (and never written by a store). Returns 0 or -1 (printed why). */
static int tma_view_map_make(CUtensorMap *map, const void *base, dtype_t dtype, long long BH, long long N, int d,
                             long long ld, long long slice, int rows) {
    tma_tile_params p;
    char err[256];
    if (tma_view_params_make(&p, base, BH, N, d, ld, slice, dtype, rows, err, sizeof err)) {
        fprintf(stderr, "%s:%d: tensor map refused: %s\n", __FILE__, __LINE__, err);
        return -1;
    }
    tma_encode_fn encode = tma_encoder();
    if (!encode) return -1;
    const CUtensorMapDataType type =
        dtype == DTYPE_FP16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    CUresult r = encode(map, type, p.rank, (void *)base, p.dims, p.strides, p.box, p.elem_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "%s:%d: cuTensorMapEncodeTiled failed (CUresult %d), dims {%llu, %llu, %llu}, box {%u, %u, 1}\n"
                "  hint: the address must be 16-byte aligned and the strides multiples of 16 bytes\n",
                __FILE__, __LINE__, (int)r, (unsigned long long)p.dims[0], (unsigned long long)p.dims[1],
                (unsigned long long)p.dims[2], p.box[0], p.box[1]);
        return -1;
    }
    return 0;
}
/* One of Q, K, V, O of a call ([B H, N, d] of a->dtype): tma_view_map_make. */
static int tma_tensor_map_make(CUtensorMap *map, const void *base, const attn_args *a, int rows) {
    return tma_view_map_make(map, base, a->dtype, (long long)a->B * a->H, a->N, a->d, a->d, (long long)a->N * a->d,
                             rows);
}
// [end tensor-map]

/* The tensor maps of Q, K, V and O of a call (boxes of rows_q, rows_kv, rows_kv and rows_o
 * rows), kept for the next call on the same buffers and shape: encoding takes microseconds, and
 * the harness times repeated launches. One cache per call site; returns NULL (printed why) when
 * a map cannot be made. */
typedef struct {
    const void *q, *k, *v, *o;
    int B, H, N, d;
    dtype_t dtype;
    CUtensorMap mq, mk, mv, mo;
} tma_qkvo_maps;
static inline const tma_qkvo_maps *tma_qkvo_maps_get(tma_qkvo_maps *c, const attn_args *a, int rows_q, int rows_kv,
                                                     int rows_o) {
    if (c->q == a->Q && c->k == a->K && c->v == a->V && c->o == a->O && c->B == a->B && c->H == a->H &&
        c->N == a->N && c->d == a->d && c->dtype == a->dtype)
        return c;
    c->q = NULL;
    if (tma_tensor_map_make(&c->mq, a->Q, a, rows_q) || tma_tensor_map_make(&c->mk, a->K, a, rows_kv) ||
        tma_tensor_map_make(&c->mv, a->V, a, rows_kv) || tma_tensor_map_make(&c->mo, a->O, a, rows_o))
        return NULL;
    c->q = a->Q; c->k = a->K; c->v = a->V; c->o = a->O;
    c->B = a->B; c->H = a->H; c->N = a->N; c->d = a->d; c->dtype = a->dtype;
    return c;
}
#endif /* __CUDACC__ */
#endif
