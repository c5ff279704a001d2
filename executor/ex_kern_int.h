/* SPDX-License-Identifier: Apache-2.0
 * executor (internal): compute kernels on raw row-major typed arrays, with
 * native loops per element type (f32, f64, the integer types, i1 as one byte
 * 0/1) that the compiler vectorises, so no element goes through a double on
 * the way. ex_prepare.c decodes ops and shards and ex_ops.c calls these;
 * they know nothing about modules, shardings or workers.
 * Types are sp_elem values; the supported ones are those of ex_int.h
 * (F32, F64, BF16, F16, I1, I8..I64, UI8..UI64; the half types computed in
 * f32 block by block, see "bf16 and f16"). A function returning bool returns
 * false, writing nothing, for a type or op it has no kernel for.
 * Thread contract: every function is reentrant; an ex_gate is shared by the
 * workers of one run. */
#ifndef EX_KERN_INT_H
#define EX_KERN_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cm.h"
#include "sp_ir.h"
#include "sp_ops.h"

/* Comparison directions and reduce bodies, in ex_int.h's order. */
enum { EX_CMP_EQ, EX_CMP_NE, EX_CMP_LT, EX_CMP_LE, EX_CMP_GT, EX_CMP_GE };
enum { EX_RED_ADD, EX_RED_MAX, EX_RED_MIN, EX_RED_MUL, EX_RED_AND, EX_RED_OR };

/* Online cores (at least 1). */
uint32_t ex_kern_cores(void);

/* ---- element-wise ---------------------------------------------------------------- */

/* out[i] = a[i] k b[i] for i < n, k one of SP_OP_ADD, SUBTRACT, MULTIPLY,
 * DIVIDE, MAXIMUM, MINIMUM, AND, OR, XOR, REMAINDER, POWER (both kinds),
 * ATAN2 (floats) and SHIFT_LEFT, SHIFT_RIGHT_LOGICAL, SHIFT_RIGHT_ARITHMETIC
 * (integers). Integers wrap; integer division by zero gives 0 and INT_MIN /
 * -1 gives INT_MIN; remainder takes the dividend's sign (x % 0 is x, INT_MIN
 * % -1 is 0); integer power by squaring, a negative exponent giving the
 * integer part of the exact value (0 unless the base is 1 or -1); shift
 * amounts are read unsigned and at least the bit width gives 0 (logical,
 * left) or the sign fill (arithmetic, which reads unsigned types' bits as
 * signed); float maximum/minimum propagate NaN. out may alias a or b. */
bool ex_kern_binary(sp_op_kind k, sp_elem e, const void *a, const void *b, void *out, size_t n);

/* out[i] = k(a[i]): NEGATE, ABS, NOT, SIGN, POPCNT (integers; NOT also i1)
 * and NEGATE, ABS, SIGN (NaN and -0 kept), EXPONENTIAL, EXPONENTIAL_MINUS_ONE,
 * TANH, SQRT, RSQRT, CBRT, LOG, LOG_PLUS_ONE, LOGISTIC, COSINE, SINE, CEIL,
 * FLOOR, ROUND_NEAREST_AFZ (ties away from zero), ROUND_NEAREST_EVEN (ties
 * to even) for floats, through the C library's functions of the type. */
bool ex_kern_unary(sp_op_kind k, sp_elem e, const void *a, void *out, size_t n);

/* out[i] = a[i] is finite, as one byte 0/1 (f32, f64). */
bool ex_kern_is_finite(sp_elem e, const void *a, uint8_t *out, size_t n);

/* stablehlo.clamp: out[i] = minimum(maximum(a[i], lo), hi) with lo and hi
 * either n elements or one (lo_scalar / hi_scalar); floats propagate NaN as
 * maximum and minimum do. Every numeric type and i1. */
bool ex_kern_clamp(sp_elem e, const void *lo, bool lo_scalar, const void *a, const void *hi,
                   bool hi_scalar, void *out, size_t n);

/* out[i] = (to)a[i]. Float to integer truncates toward zero and saturates
 * (NaN gives 0); anything to i1 is a != 0; integers wrap. */
bool ex_kern_convert(sp_elem from, const void *a, sp_elem to, void *out, size_t n);

/* out[i] = a[i] dir b[i] as one byte 0/1 (dir: EX_CMP_*). */
bool ex_kern_compare(int dir, sp_elem e, const void *a, const void *b, uint8_t *out, size_t n);

/* The same for f32/f64/bf16/f16 under compare_type TOTALORDER: IEEE totalOrder
 * (-NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN; EQ is bit equality). */
bool ex_kern_compare_total(int dir, sp_elem e, const void *a, const void *b, uint8_t *out,
                           size_t n);

/* out[i] = pred[scalar ? 0 : i] ? a[i] : b[i] for elements of esz bytes. */
void ex_kern_select(const uint8_t *pred, bool scalar, const void *a, const void *b, void *out,
                    size_t n, size_t esz);

/* Fills n elements of esz bytes with the element at val. */
void ex_kern_fill(void *out, size_t n, const void *val, size_t esz);

/* ---- element types ---------------------------------------------------------------
 * The numeric element types the executor runs, as X(SP_ELEM_*, C type,
 * suffix): each kernel family defines one function per type (binary_f32,
 * cmp_u8, ...) and dispatches on the element type with a switch built from
 * this list. i1 (bytes 0 or 1) is not in it: each family says what it does
 * with it. EX_WIDTH_CASES(LOOP) is the same for byte widths: case 1, 2, 4, 8
 * with LOOP(the unsigned type of that width), each LOOP ending in a return. */
#define EX_ELEM_TYPES(X)                                                                           \
    X(SP_ELEM_F32, float, f32)                                                                     \
    X(SP_ELEM_F64, double, f64)                                                                    \
    X(SP_ELEM_I8, int8_t, i8)                                                                      \
    X(SP_ELEM_I16, int16_t, i16)                                                                   \
    X(SP_ELEM_I32, int32_t, i32)                                                                   \
    X(SP_ELEM_I64, int64_t, i64)                                                                   \
    X(SP_ELEM_UI8, uint8_t, u8)                                                                    \
    X(SP_ELEM_UI16, uint16_t, u16)                                                                 \
    X(SP_ELEM_UI32, uint32_t, u32)                                                                 \
    X(SP_ELEM_UI64, uint64_t, u64)

#define EX_WIDTH_CASES(LOOP)                                                                       \
    case 1:                                                                                        \
        LOOP(uint8_t)                                                                              \
    case 2:                                                                                        \
        LOOP(uint16_t)                                                                             \
    case 4:                                                                                        \
        LOOP(uint32_t)                                                                             \
    case 8:                                                                                        \
        LOOP(uint64_t)

/* ---- bf16 and f16 storage -------------------------------------------------------
 * The half types are stored as their 16 bits and computed in f32: kernels
 * convert blocks of elements to f32, run the f32 loop and round back. A
 * half is rounded from a double (or a float, exactly widened) to nearest,
 * ties to even, in one step (no double rounding): overflow gives infinity,
 * values below the smallest subnormal's half give a signed zero, NaN stays
 * a (quiet) NaN with its sign. ebits/mbits: 8/7 for bf16, 5/10 for f16. */
static inline uint16_t ex_half_round(double v, uint32_t ebits, uint32_t mbits)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    uint16_t sign = (uint16_t)((b >> 63) << 15);
    uint32_t ex = (uint32_t)((b >> 52) & 0x7FFu);
    uint64_t frac = b & ((UINT64_C(1) << 52) - 1u);
    uint16_t inf = (uint16_t)(((1u << ebits) - 1u) << mbits);
    if (ex == 0x7FFu) {
        if (frac == 0) {
            return (uint16_t)(sign | inf);
        }
        /* keep the payload's top bits, force the quiet bit */
        return (uint16_t)(sign | inf | (1u << (mbits - 1u)) | (uint16_t)(frac >> (52u - mbits)));
    }
    if (ex == 0) {
        return sign; /* zero, or a double subnormal: far below any half */
    }
    int32_t e = (int32_t)ex - 1023, bias = (int32_t)(1u << (ebits - 1u)) - 1;
    if (e > bias) {
        return (uint16_t)(sign | inf);
    }
    uint64_t m = frac | (UINT64_C(1) << 52);
    int32_t shift = 52 - (int32_t)mbits;
    bool sub = e < 1 - bias;
    if (sub) {
        shift += 1 - bias - e;
    }
    if (shift > 53) {
        return sign;
    }
    uint64_t q = m >> shift, rem = m & ((UINT64_C(1) << shift) - 1u), half = UINT64_C(1)
                                                                          << (shift - 1);
    if (rem > half || (rem == half && (q & 1u) != 0)) {
        q++;
    }
    if (sub) {
        return (uint16_t)(sign | q); /* q == 1 << mbits: the smallest normal */
    }
    if (q == UINT64_C(1) << (mbits + 1u)) {
        q >>= 1;
        e++;
        if (e > bias) {
            return (uint16_t)(sign | inf);
        }
    }
    return (uint16_t)(sign | ((uint32_t)(e + bias) << mbits) | (q & ((UINT64_C(1) << mbits) - 1u)));
}

/* The float a half's bits h stand for (exact). */
static inline float ex_half_float(uint16_t h, bool bf16)
{
    uint32_t b;
    if (bf16) {
        b = (uint32_t)h << 16;
    } else {
        uint32_t sign = (uint32_t)(h >> 15) << 31, ex = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
        if (ex == 0x1F) {
            b = sign | 0x7F800000u | (m << 13);
        } else if (ex != 0) {
            b = sign | ((ex + 112u) << 23) | (m << 13);
        } else {
            float f = (float)m * 0x1p-24f; /* zero or subnormal */
            return sign != 0 ? -f : f;
        }
    }
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* bf16 from a float: the f32 bits rounded to their top 16 (ties to even). */
static inline uint16_t ex_bf16_from_float(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    if ((b & 0x7FFFFFFFu) > 0x7F800000u) {
        return (uint16_t)((b >> 16) | 0x40u);
    }
    return (uint16_t)((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}

static inline uint16_t ex_half_from_double(sp_elem e, double v)
{
    return e == SP_ELEM_BF16 ? ex_half_round(v, 8, 7) : ex_half_round(v, 5, 10);
}

/* n halves of type e (BF16 or F16) to floats, and back (rounded). */
void ex_kern_half_to_f32(sp_elem e, const uint16_t *h, float *f, size_t n);
void ex_kern_f32_to_half(sp_elem e, const float *f, uint16_t *h, size_t n);

/* ---- data movement ---------------------------------------------------------------- */

/* One source dimension of an affine gather: source index = bias + scale *
 * c[rdim] (c the destination coordinate), or bias alone when rdim < 0. */
typedef struct ex_amap {
    int32_t rdim;
    int64_t scale, bias;
} ex_amap;

/* dst[c] = src[map(c)] over dst's dims (row-major, drank <= EX_KERN_MAX_RANK);
 * destination positions whose source index falls outside src get zero (the
 * padding of a non-divisible shard). Destination dims no source dim maps to
 * are broadcast. Rows are memcpy'd, transposes go through 32 x 32 tiles. */
#define EX_KERN_MAX_RANK 16
void ex_kern_affine(const void *src, const int64_t *sdims, uint32_t srank, const ex_amap *map,
                    void *dst, const int64_t *ddims, uint32_t drank, size_t esz);

/* stablehlo.pad on a block: dst (dims ddims, global offsets doff) gets the
 * padding value pv (one element) everywhere, then src's valid elements
 * (src dims sdims, valid extents svalid, global offsets soff) at global
 * position lo + i * (interior + 1) when that lands in dst's block. */
void ex_kern_pad(const void *src, const int64_t *sdims, const int64_t *svalid, const int64_t *soff,
                 void *dst, const int64_t *ddims, const int64_t *doff, uint32_t rank,
                 const int64_t *lo, const int64_t *interior, const void *pv, size_t esz);

/* A device's block of a tensor: local row-major data, its dims, the global
 * dims and the block's global offset (the last block of a dimension that the
 * shard count does not divide is padded past the global end). */
typedef struct ex_block {
    void *data;
    sp_elem elem;
    uint32_t rank;
    size_t esz;
    const int64_t *dims;  /* local */
    const int64_t *gdims; /* global */
    const int64_t *off;   /* global offset of element 0 */
} ex_block;

/* Writes src's valid elements, whose global origin is moved to gstart (one
 * entry per dim) in dst's global coordinates, where they land in dst's
 * block (stablehlo.dynamic_update_slice once gstart is clamped). */
void ex_kern_place(const ex_block *src, const int64_t *gstart, const ex_block *dst);

/* The dimension numbers of a gather (or of a scatter: update_window_dims,
 * inserted_window_dims, input_batching_dims, scatter_indices_batching_dims,
 * scatter_dims_to_operand_dims, index_vector_dim). */
typedef struct ex_gather_dims {
    const int64_t *offset_dims, *collapsed, *obatch, *ibatch, *start_map;
    uint32_t n_offset, n_collapsed, n_obatch, n_ibatch, n_start_map;
    int64_t ivd;                /* index_vector_dim (== indices rank: none) */
    const int64_t *slice_sizes; /* gather only: one per operand dim */
} ex_gather_dims;

/* stablehlo.gather in global coordinates: each element of out's block reads
 * the operand at its clamped global position; positions outside op's block
 * give 0 (a gather sharded on a collapsed dimension adds the blocks up
 * afterwards). Indices may be any integer type.
 * Errors: CM_EINVAL when ix's block does not hold the indices out's block
 * needs (the caller reports it). */
cm_status ex_kern_gather(const ex_gather_dims *g, const ex_block *op, const ex_block *ix,
                         const ex_block *out);

/* stablehlo.scatter on out's block (which already holds the operand): each
 * valid element of upd's block goes to its global position when that lies in
 * out's block; windows that do not fit in the operand are skipped (as XLA).
 * combine: -1 replace, else EX_RED_ADD/MUL/MAX/MIN. Errors: CM_EINVAL (ix's
 * block does not hold the indices needed, or no kernel for the type). */
cm_status ex_kern_scatter(const ex_gather_dims *g, int combine, const ex_block *ix,
                          const ex_block *upd, const ex_block *out);

/* A convolution's layout, window and groups (stablehlo.convolution). */
typedef struct ex_conv_dims {
    uint32_t ns;                             /* spatial dims */
    int64_t ib, ifeat, is[EX_KERN_MAX_RANK]; /* input batch, feature, spatial */
    int64_t ki, ko, ks[EX_KERN_MAX_RANK];    /* kernel in/out feature, spatial */
    int64_t ob, ofeat, os[EX_KERN_MAX_RANK]; /* output */
    int64_t stride[EX_KERN_MAX_RANK], pad_lo[EX_KERN_MAX_RANK], rdil[EX_KERN_MAX_RANK];
    int64_t ldil[EX_KERN_MAX_RANK]; /* lhs (input) dilation; 0 counts as 1 */
    bool rev[EX_KERN_MAX_RANK];     /* window reversal: the kernel read backwards */
    int64_t fgc, bgc;               /* feature / batch group count; 0 counts as 1 */
} ex_conv_dims;

/* out = conv(in, ker) for f32/f64 by im2col and one sgemm/dgemm per output
 * batch element and group; dims are the local blocks (spatial dims whole,
 * and with groups the feature dims whole, and the batch dims too with batch
 * groups). Group g of fgc reads input features [g C/fgc, (g+1) C/fgc) and
 * writes output features [g O/fgc, (g+1) O/fgc); batch group g of bgc
 * reads input batch elements [g N/bgc, (g+1) N/bgc) and writes the same
 * output features range of O/bgc. An input dilated by ldil reads zeros
 * between its elements. Sizes must fit in an int.
 * Errors: CM_EINVAL (type, or dims that do not fit the groups), CM_ENOMEM. */
cm_status ex_kern_conv(sp_elem e, const ex_conv_dims *cd, const void *in, const int64_t *idims,
                       const void *ker, const int64_t *kdims, void *out, const int64_t *odims,
                       uint32_t rank);

/* ---- reduction and products ---------------------------------------------------------- */

/* out[kept coordinates] = init fn every in element whose reduced coordinates
 * (red[k] true) vary, for fn EX_RED_*. f32 sums and products accumulate in
 * double. out has the product of the kept dims elements.
 * Errors: CM_EINVAL (no kernel for the type and body: out untouched),
 * CM_ENOMEM. */
cm_status ex_kern_reduce(int fn, sp_elem e, const void *in, const int64_t *dims, uint32_t rank,
                         const bool *red, const void *init, void *out);

/* stablehlo.reduce_window of an f32/f64 array without dilations: out (dims
 * odims) at o combines init with in at o * stride - pad_lo + w for every
 * window position w < win (positions in the padding count as init).
 * Errors: CM_EINVAL (other types or bodies). */
cm_status ex_kern_reduce_window(int fn, sp_elem e, const void *in, const int64_t *idims,
                                uint32_t rank, const int64_t *win, const int64_t *stride,
                                const int64_t *pad_lo, const void *init, void *out,
                                const int64_t *odims);

/* A dot_general of f32 or f64 arrays: out is [batch, lhs free, rhs free]
 * row-major (dims in operand order), with lb/rb the n_b batching and lc/rc the
 * n_c contracting dimensions. Each batch is one sgemm/dgemm straight on the
 * operands (transposes and leading dimensions from their layout) when their
 * free and contracting dims each collapse into one strided run; otherwise the
 * operand is first copied to [batch, free, contract] / [batch, contract,
 * free]. Sizes must have been checked to fit in an int.
 * Errors: CM_EINVAL (other types), CM_ENOMEM. */
cm_status ex_kern_dot(sp_elem e, const void *l, const int64_t *ldims, uint32_t lrank, const void *r,
                      const int64_t *rdims, uint32_t rrank, const int64_t *lb, const int64_t *rb,
                      uint32_t n_b, const int64_t *lc, const int64_t *rc, uint32_t n_c, void *out);

/* ---- sort and select_and_scatter ------------------------------------------------------ */

/* One key of a sort comparator. Keys are compared in order: the first key
 * that orders two elements decides, a key under which they are equal passes
 * to the next (JAX's lexicographic comparators `lt0 or (eq0 and (lt1 ...))`);
 * unordered (a NaN under FLOAT) decides "not less". */
typedef struct ex_sort_key {
    uint32_t operand; /* index of the input compared */
    bool descending;  /* GT: larger first; else LT */
    bool total;       /* floats: TOTALORDER (-NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN,
                         as the bits in sign-magnitude order); else IEEE quiet comparisons */
} ex_sort_key;

#define EX_SORT_MAX_KEYS 64 /* keys of one comparator */

/* stablehlo.sort: sorts every 1-D slice along dim of the n_in arrays (each of
 * dims, rank, types elems) together by the keys, stably (a merge sort), into
 * out[j] (which must not alias in[j]).
 * Errors: CM_EINVAL (a key on a type without a kernel, dim out of range: out
 * untouched), CM_ENOMEM. */
cm_status ex_kern_sort(uint32_t n_in, const sp_elem *elems, const void *const *in, void *const *out,
                       const int64_t *dims, uint32_t rank, uint32_t dim, const ex_sort_key *keys,
                       uint32_t n_keys);

/* stablehlo.select_and_scatter of f32/f64 arrays (dims held whole): out
 * (dims idims, like the operand op) gets init everywhere; then for each source
 * element at s (dims sdims, row-major order) its window, at s * stride -
 * pad_lo + w for w < win, is walked in row-major order, positions in the
 * padding skipped: the first element is picked, and a later one replaces the
 * pick when select(pick, candidate) is false, select being `pick sel
 * candidate` (sel EX_CMP_GE/GT/LE/LT; total: TOTALORDER, else IEEE quiet);
 * out at the pick becomes scatter(out, source) (EX_RED_ADD/MUL/MAX/MIN). A
 * window wholly in the padding picks nothing.
 * Errors: CM_EINVAL (other types, directions or bodies: out untouched). */
cm_status ex_kern_select_scatter(sp_elem e, int sel, bool total, int scatter, const void *op,
                                 const int64_t *idims, uint32_t rank, const void *src,
                                 const int64_t *sdims, const int64_t *win, const int64_t *stride,
                                 const int64_t *pad_lo, const void *init, void *out);

/* dot_general of integer arrays (any of i8..i64, ui8..ui64, each operand its
 * own type) into an integer result of type oe, same layout as ex_kern_dot:
 * products and sums wrap around in the result type (computed modulo 2^64,
 * then truncated). A plain loop.
 * Errors: CM_EINVAL (a non-integer type), CM_ENOMEM. */
cm_status ex_kern_dot_int(sp_elem le, const void *l, const int64_t *ldims, uint32_t lrank,
                          sp_elem re, const void *r, const int64_t *rdims, uint32_t rrank,
                          const int64_t *lb, const int64_t *rb, uint32_t n_b, const int64_t *lc,
                          const int64_t *rc, uint32_t n_c, sp_elem oe, void *out);

/* ---- the core gate ------------------------------------------------------------------ */

/* At most n holders at a time (n = 0: no limit). With more device workers
 * than cores, each worker holds the gate while it computes (run_local), so
 * only as many sgemms as there are cores run at once, each keeping its
 * core's caches, instead of eight time-sliced ones evicting each other.
 * A worker must not hold the gate across a barrier. */
typedef struct ex_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t n, busy;
} ex_gate;

void ex_gate_init(ex_gate *g, uint32_t n);
void ex_gate_fini(ex_gate *g);
void ex_gate_enter(ex_gate *g);
void ex_gate_leave(ex_gate *g);

#endif /* EX_KERN_INT_H */
