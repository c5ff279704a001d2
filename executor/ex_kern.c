/* SPDX-License-Identifier: Apache-2.0
 * executor: compute kernels on raw typed arrays (ex_kern_int.h). One loop
 * per element type and op, written so that the compiler vectorises it
 * (built with -O3, Makefile); strided copies move whole rows with memcpy and
 * transposes go through cache-sized tiles; dot_general calls sgemm/dgemm on
 * the operands in place whenever their layout allows it. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "ex_blas.h"
#include "ex_kern_int.h"

uint32_t ex_kern_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1u : (uint32_t)n;
}

/* ---- bf16 and f16: blocks through f32 ------------------------------------------- */

enum { HBLK = 256 }; /* elements per f32 block on the stack */

static bool is_half(sp_elem e)
{
    return e == SP_ELEM_BF16 || e == SP_ELEM_F16;
}

void ex_kern_half_to_f32(sp_elem e, const uint16_t *h, float *f, size_t n)
{
    if (e == SP_ELEM_BF16) {
        for (size_t i = 0; i < n; i++) {
            uint32_t b = (uint32_t)h[i] << 16;
            memcpy(&f[i], &b, sizeof b);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        f[i] = ex_half_float(h[i], false);
    }
}

void ex_kern_f32_to_half(sp_elem e, const float *f, uint16_t *h, size_t n)
{
    if (e == SP_ELEM_BF16) {
        for (size_t i = 0; i < n; i++) {
            h[i] = ex_bf16_from_float(f[i]);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        h[i] = ex_half_round((double)f[i], 5, 10);
    }
}

/* ---- element-wise ---------------------------------------------------------------- */

#define FLT_BINARY(NAME, T, SFX)                                                                   \
    static bool NAME(sp_op_kind k, const T *restrict a, const T *restrict b, T *restrict o,        \
                     size_t n)                                                                     \
    {                                                                                              \
        switch (k) {                                                                               \
        case SP_OP_ADD:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] + b[i];                                                                \
            return true;                                                                           \
        case SP_OP_SUBTRACT:                                                                       \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] - b[i];                                                                \
            return true;                                                                           \
        case SP_OP_MULTIPLY:                                                                       \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] * b[i];                                                                \
            return true;                                                                           \
        case SP_OP_DIVIDE:                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] / b[i];                                                                \
            return true;                                                                           \
        case SP_OP_MAXIMUM: /* NaN in either operand gives NaN */                                  \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (a[i] > b[i] || a[i] != a[i]) ? a[i] : b[i];                                \
            return true;                                                                           \
        case SP_OP_MINIMUM:                                                                        \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (a[i] < b[i] || a[i] != a[i]) ? a[i] : b[i];                                \
            return true;                                                                           \
        case SP_OP_REMAINDER: /* truncated division: the dividend's sign */                        \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = fmod##SFX(a[i], b[i]);                                                      \
            return true;                                                                           \
        case SP_OP_ATAN2:                                                                          \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = atan2##SFX(a[i], b[i]);                                                     \
            return true;                                                                           \
        case SP_OP_POWER:                                                                          \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = pow##SFX(a[i], b[i]);                                                       \
            return true;                                                                           \
        default:                                                                                   \
            return false;                                                                          \
        }                                                                                          \
    }

FLT_BINARY(binary_f32, float, f)
FLT_BINARY(binary_f64, double, )

/* Integer power by squaring, wrapping modulo 2^64 (then truncated by the
 * caller); a negative exponent gives 1 for base 1, +-1 for base -1 and 0
 * otherwise (the integer part of the exact value). */
static uint64_t int_pow(uint64_t base, uint64_t ex, bool neg_ex, bool base_minus_one)
{
    if (neg_ex) {
        return base == 1 ? 1u : base_minus_one ? ((ex & 1u) != 0 ? base : 1u) : 0u;
    }
    uint64_t r = 1;
    while (ex != 0) {
        if ((ex & 1u) != 0) {
            r *= base;
        }
        base *= base;
        ex >>= 1;
    }
    return r;
}

/* Integers: add, subtract and multiply wrap (through the unsigned type U);
 * MINV is the type's minimum (0 when unsigned) for INT_MIN / -1. */
#define INT_BINARY(NAME, T, U, S, MINV, ISNEG)                                                     \
    static bool NAME(sp_op_kind k, const T *restrict a, const T *restrict b, T *restrict o,        \
                     size_t n)                                                                     \
    {                                                                                              \
        switch (k) {                                                                               \
        case SP_OP_ADD:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(U)((uint64_t)(U)a[i] + (uint64_t)(U)b[i]);                              \
            return true;                                                                           \
        case SP_OP_SUBTRACT:                                                                       \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(U)((uint64_t)(U)a[i] - (uint64_t)(U)b[i]);                              \
            return true;                                                                           \
        case SP_OP_MULTIPLY:                                                                       \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(U)((uint64_t)(U)a[i] * (uint64_t)(U)b[i]);                              \
            return true;                                                                           \
        case SP_OP_DIVIDE:                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(b[i] == 0                           ? 0                                 \
                           : (a[i] == (MINV) && b[i] == (T)-1) ? a[i]                              \
                                                               : a[i] / b[i]);                     \
            return true;                                                                           \
        case SP_OP_MAXIMUM:                                                                        \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] > b[i] ? a[i] : b[i];                                                  \
            return true;                                                                           \
        case SP_OP_MINIMUM:                                                                        \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] < b[i] ? a[i] : b[i];                                                  \
            return true;                                                                           \
        case SP_OP_AND:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(a[i] & b[i]);                                                           \
            return true;                                                                           \
        case SP_OP_OR:                                                                             \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(a[i] | b[i]);                                                           \
            return true;                                                                           \
        case SP_OP_XOR:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(a[i] ^ b[i]);                                                           \
            return true;                                                                           \
        case SP_OP_REMAINDER: /* x % 0 is x (as XLA), INT_MIN % -1 is 0 */                         \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(b[i] == 0                           ? a[i]                              \
                           : (a[i] == (MINV) && b[i] == (T)-1) ? 0                                 \
                                                               : a[i] % b[i]);                     \
            return true;                                                                           \
        case SP_OP_POWER:                                                                          \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(U)int_pow((uint64_t)a[i], (uint64_t)(b[i]), ISNEG(b[i]),                \
                                     ISNEG(a[i]) && a[i] == (T)-1);                                \
            return true;                                                                           \
        /* shift amounts are unsigned: >= the bit width shifts everything out */                   \
        case SP_OP_SHIFT_LEFT:                                                                     \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)((uint64_t)(U)b[i] >= 8u * sizeof(T)                                     \
                               ? 0u                                                                \
                               : (U)((uint64_t)(U)a[i] << (U)b[i]));                               \
            return true;                                                                           \
        case SP_OP_SHIFT_RIGHT_LOGICAL:                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)((uint64_t)(U)b[i] >= 8u * sizeof(T)                                     \
                               ? 0u                                                                \
                               : (U)((uint64_t)(U)a[i] >> (U)b[i]));                               \
            return true;                                                                           \
        case SP_OP_SHIFT_RIGHT_ARITHMETIC: /* the bits as signed, sign-filling */                 \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(S)((uint64_t)(U)b[i] >= 8u * sizeof(T) ? ((S)a[i] < 0 ? -1 : 0)        \
                                                                   : ((S)a[i] >> (U)b[i]));        \
            return true;                                                                           \
        default:                                                                                   \
            return false;                                                                          \
        }                                                                                          \
    }

#define NEG_S(x) ((x) < 0)
#define NEG_U(x) ((void)(x), false)
INT_BINARY(binary_i8, int8_t, uint8_t, int8_t, INT8_MIN, NEG_S)
INT_BINARY(binary_i16, int16_t, uint16_t, int16_t, INT16_MIN, NEG_S)
INT_BINARY(binary_i32, int32_t, uint32_t, int32_t, INT32_MIN, NEG_S)
INT_BINARY(binary_i64, int64_t, uint64_t, int64_t, INT64_MIN, NEG_S)
INT_BINARY(binary_u8, uint8_t, uint8_t, int8_t, 0, NEG_U)
INT_BINARY(binary_u16, uint16_t, uint16_t, int16_t, 0, NEG_U)
INT_BINARY(binary_u32, uint32_t, uint32_t, int32_t, 0, NEG_U)
INT_BINARY(binary_u64, uint64_t, uint64_t, int64_t, 0, NEG_U)

bool ex_kern_binary(sp_op_kind k, sp_elem e, const void *a, const void *b, void *out, size_t n)
{
    if (is_half(e)) {
        const uint16_t *ha = a, *hb = b;
        uint16_t *ho = out;
        float fa[HBLK], fb[HBLK], fo[HBLK];
        for (size_t i = 0; i < n; i += HBLK) {
            size_t m = n - i < HBLK ? n - i : HBLK;
            ex_kern_half_to_f32(e, ha + i, fa, m);
            ex_kern_half_to_f32(e, hb + i, fb, m);
            if (!binary_f32(k, fa, fb, fo, m)) {
                return false;
            }
            ex_kern_f32_to_half(e, fo, ho + i, m);
        }
        return true;
    }
    switch (e) {
#define BINARY_CASE(E, T, S)                                                                       \
    case E:                                                                                        \
        return binary_##S(k, a, b, out, n);
        EX_ELEM_TYPES(BINARY_CASE)
#undef BINARY_CASE
    case SP_ELEM_I1: /* 0/1 bytes: only the ops that keep them 0/1 */
        if (k == SP_OP_MAXIMUM || k == SP_OP_MINIMUM || k == SP_OP_AND || k == SP_OP_OR ||
            k == SP_OP_XOR) {
            return binary_u8(k, a, b, out, n);
        }
        return false;
    default:
        return false;
    }
}

#define FLT_UNARY(NAME, T, SFX)                                             \
    static bool NAME(sp_op_kind k, const T *restrict a, T *restrict o, size_t n)                   \
    {                                                                                              \
        switch (k) {                                                                               \
        case SP_OP_NEGATE:                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = -a[i];                                                                      \
            return true;                                                                           \
        case SP_OP_ABS:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = fabs##SFX(a[i]);                                                            \
            return true;                                                                           \
        case SP_OP_EXPONENTIAL:                                                                    \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = exp##SFX(a[i]);                                                             \
            return true;                                                                           \
        case SP_OP_TANH:                                                                           \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = tanh##SFX(a[i]);                                                            \
            return true;                                                                           \
        case SP_OP_SQRT:                                                                           \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = sqrt##SFX(a[i]);                                                            \
            return true;                                                                           \
        case SP_OP_RSQRT:                                                                          \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)1 / sqrt##SFX(a[i]);                                                     \
            return true;                                                                           \
        case SP_OP_LOG:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = log##SFX(a[i]);                                                             \
            return true;                                                                           \
        case SP_OP_LOGISTIC:                                                                       \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)1 / ((T)1 + exp##SFX(-a[i]));                                            \
            return true;                                                                           \
        case SP_OP_SIGN:                                                                           \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (a[i] != a[i] || a[i] == 0) ? a[i] : a[i] > 0 ? (T)1 : (T)-1;               \
            return true;                                                                           \
        case SP_OP_CBRT:                                                                           \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = cbrt##SFX(a[i]);                                                            \
            return true;                                                                           \
        case SP_OP_CEIL:                                                                           \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = ceil##SFX(a[i]);                                                            \
            return true;                                                                           \
        case SP_OP_FLOOR:                                                                          \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = floor##SFX(a[i]);                                                           \
            return true;                                                                           \
        case SP_OP_COSINE:                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = cos##SFX(a[i]);                                                             \
            return true;                                                                           \
        case SP_OP_SINE:                                                                           \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = sin##SFX(a[i]);                                                             \
            return true;                                                                           \
        case SP_OP_EXPONENTIAL_MINUS_ONE:                                                          \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = expm1##SFX(a[i]);                                                           \
            return true;                                                                           \
        case SP_OP_LOG_PLUS_ONE:                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = log1p##SFX(a[i]);                                                           \
            return true;                                                                           \
        case SP_OP_ROUND_NEAREST_AFZ:                                                              \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = round##SFX(a[i]);                                                           \
            return true;                                                                           \
        case SP_OP_ROUND_NEAREST_EVEN:                                                             \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = rint##SFX(a[i]) /* the default mode: ties to even */;                       \
            return true;                                                                           \
        default:                                                                                   \
            return false;                                                                          \
        }                                                                                          \
    }

FLT_UNARY(unary_f32, float, f)
FLT_UNARY(unary_f64, double, )

/* ABS(x) is the absolute value expression for the type (wrapping at INT_MIN). */
#define INT_UNARY(NAME, T, U, ABS, SIGN)                                                           \
    static bool NAME(sp_op_kind k, const T *restrict a, T *restrict o, size_t n)                   \
    {                                                                                              \
        switch (k) {                                                                               \
        case SP_OP_NEGATE:                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)(U)(0u - (uint64_t)(U)a[i]);                                             \
            return true;                                                                           \
        case SP_OP_ABS:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = ABS(a[i]);                                                                  \
            return true;                                                                           \
        case SP_OP_SIGN:                                                                           \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = SIGN(a[i]);                                                                 \
            return true;                                                                           \
        case SP_OP_POPCNT:                                                                         \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)__builtin_popcountll((uint64_t)(U)a[i]);                                 \
            return true;                                                                           \
        case SP_OP_NOT:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = (T)~a[i];                                                                   \
            return true;                                                                           \
        default:                                                                                   \
            return false;                                                                          \
        }                                                                                          \
    }

#define SABS(T, U, x) ((x) < 0 ? (T)(U)(0u - (uint64_t)(U)(x)) : (x))
#define ABS_I8(x)     SABS(int8_t, uint8_t, x)
#define ABS_I16(x)    SABS(int16_t, uint16_t, x)
#define ABS_I32(x)    SABS(int32_t, uint32_t, x)
#define ABS_I64(x)    SABS(int64_t, uint64_t, x)
#define ABS_U(x)      (x)
#define SIGN_S(x)     ((x) > 0 ? 1 : (x) < 0 ? -1 : 0)
#define SIGN_U(x)     ((x) != 0)
INT_UNARY(unary_i8, int8_t, uint8_t, ABS_I8, SIGN_S)
INT_UNARY(unary_i16, int16_t, uint16_t, ABS_I16, SIGN_S)
INT_UNARY(unary_i32, int32_t, uint32_t, ABS_I32, SIGN_S)
INT_UNARY(unary_i64, int64_t, uint64_t, ABS_I64, SIGN_S)
INT_UNARY(unary_u8, uint8_t, uint8_t, ABS_U, SIGN_U)
INT_UNARY(unary_u16, uint16_t, uint16_t, ABS_U, SIGN_U)
INT_UNARY(unary_u32, uint32_t, uint32_t, ABS_U, SIGN_U)
INT_UNARY(unary_u64, uint64_t, uint64_t, ABS_U, SIGN_U)

bool ex_kern_unary(sp_op_kind k, sp_elem e, const void *a, void *out, size_t n)
{
    if (is_half(e)) {
        const uint16_t *ha = a;
        uint16_t *ho = out;
        float fa[HBLK], fo[HBLK];
        for (size_t i = 0; i < n; i += HBLK) {
            size_t m = n - i < HBLK ? n - i : HBLK;
            ex_kern_half_to_f32(e, ha + i, fa, m);
            if (!unary_f32(k, fa, fo, m)) {
                return false;
            }
            ex_kern_f32_to_half(e, fo, ho + i, m);
        }
        return true;
    }
    switch (e) {
#define UNARY_CASE(E, T, S)                                                                        \
    case E:                                                                                        \
        return unary_##S(k, a, out, n);
        EX_ELEM_TYPES(UNARY_CASE)
#undef UNARY_CASE
    case SP_ELEM_I1:
        if (k == SP_OP_NOT) {
            const uint8_t *s = a;
            uint8_t *o = out;
            for (size_t i = 0; i < n; i++) {
                o[i] = s[i] == 0;
            }
            return true;
        }
        return false;
    default:
        return false;
    }
}

/* ---- convert ---------------------------------------------------------------------- */

bool ex_kern_is_finite(sp_elem e, const void *a, uint8_t *out, size_t n)
{
    if (is_half(e)) { /* the exponent field not all ones */
        const uint16_t *h = a;
        uint16_t mask = e == SP_ELEM_BF16 ? 0x7F80u : 0x7C00u;
        for (size_t i = 0; i < n; i++) {
            out[i] = (uint8_t)((h[i] & mask) != mask ? 1 : 0);
        }
        return true;
    }
    if (e == SP_ELEM_F32) {
        const float *x = a;
        for (size_t i = 0; i < n; i++) {
            out[i] = (uint8_t)(isfinite(x[i]) ? 1 : 0);
        }
        return true;
    }
    if (e == SP_ELEM_F64) {
        const double *x = a;
        for (size_t i = 0; i < n; i++) {
            out[i] = (uint8_t)(isfinite(x[i]) ? 1 : 0);
        }
        return true;
    }
    return false;
}

/* clamp through maximum then minimum, so NaN propagates as they do */
#define FLT_CLAMP(T)                                                                               \
    {                                                                                              \
        const T *l = lo, *x = a, *h = hi;                                                          \
        T *o = out;                                                                                \
        for (size_t i = 0; i < n; i++) {                                                           \
            T v = x[i], lv = l[i * sl], hv = h[i * sh];                                            \
            v = (v > lv || v != v) ? v : lv;                                                       \
            o[i] = (v < hv || v != v) ? v : hv;                                                    \
        }                                                                                          \
        return true;                                                                               \
    }
#define INT_CLAMP(T)                                                                               \
    {                                                                                              \
        const T *l = lo, *x = a, *h = hi;                                                          \
        T *o = out;                                                                                \
        for (size_t i = 0; i < n; i++) {                                                           \
            T v = x[i], lv = l[i * sl], hv = h[i * sh];                                            \
            v = v > lv ? v : lv;                                                                   \
            o[i] = v < hv ? v : hv;                                                                \
        }                                                                                          \
        return true;                                                                               \
    }

bool ex_kern_clamp(sp_elem e, const void *lo, bool lo_scalar, const void *a, const void *hi,
                   bool hi_scalar, void *out, size_t n)
{
    size_t sl = lo_scalar ? 0u : 1u, sh = hi_scalar ? 0u : 1u;
    if (is_half(e)) {
        const uint16_t *hl = lo, *hx = a, *hh = hi;
        uint16_t *ho = out;
        float fl[HBLK], fx[HBLK], fh[HBLK], fo[HBLK];
        for (size_t i = 0; i < n; i += HBLK) {
            size_t m = n - i < HBLK ? n - i : HBLK;
            ex_kern_half_to_f32(e, hl + i * sl, fl, lo_scalar ? 1 : m);
            ex_kern_half_to_f32(e, hx + i, fx, m);
            ex_kern_half_to_f32(e, hh + i * sh, fh, hi_scalar ? 1 : m);
            (void)ex_kern_clamp(SP_ELEM_F32, fl, lo_scalar, fx, fh, hi_scalar, fo, m);
            ex_kern_f32_to_half(e, fo, ho + i, m); /* exact: clamp picks an input */
        }
        return true;
    }
    switch (e) {
    case SP_ELEM_F32:
        FLT_CLAMP(float)
    case SP_ELEM_F64:
        FLT_CLAMP(double)
    case SP_ELEM_I8:
        INT_CLAMP(int8_t)
    case SP_ELEM_I16:
        INT_CLAMP(int16_t)
    case SP_ELEM_I32:
        INT_CLAMP(int32_t)
    case SP_ELEM_I64:
        INT_CLAMP(int64_t)
    case SP_ELEM_I1:
    case SP_ELEM_UI8:
        INT_CLAMP(uint8_t)
    case SP_ELEM_UI16:
        INT_CLAMP(uint16_t)
    case SP_ELEM_UI32:
        INT_CLAMP(uint32_t)
    case SP_ELEM_UI64:
        INT_CLAMP(uint64_t)
    default:
        return false;
    }
}

#define CV_LOOP(ST, EXPR)                                                                          \
    {                                                                                              \
        const ST *s = a;                                                                           \
        for (size_t i = 0; i < n; i++) {                                                           \
            ST x = s[i];                                                                           \
            o[i] = (EXPR);                                                                         \
        }                                                                                          \
        return true;                                                                               \
    }

/* One case per integer source type, converting with EXPR (of x). */
#define CV_INT_SOURCES(EXPR)                                                                       \
    case SP_ELEM_I1:                                                                               \
    case SP_ELEM_UI8:                                                                              \
        CV_LOOP(uint8_t, EXPR)                                                                     \
    case SP_ELEM_I8:                                                                               \
        CV_LOOP(int8_t, EXPR)                                                                      \
    case SP_ELEM_I16:                                                                              \
        CV_LOOP(int16_t, EXPR)                                                                     \
    case SP_ELEM_UI16:                                                                             \
        CV_LOOP(uint16_t, EXPR)                                                                    \
    case SP_ELEM_I32:                                                                              \
        CV_LOOP(int32_t, EXPR)                                                                     \
    case SP_ELEM_UI32:                                                                             \
        CV_LOOP(uint32_t, EXPR)                                                                    \
    case SP_ELEM_I64:                                                                              \
        CV_LOOP(int64_t, EXPR)                                                                     \
    case SP_ELEM_UI64:                                                                             \
        CV_LOOP(uint64_t, EXPR)

/* Float to integer: truncation, saturating at DMIN/DMAX, NaN to 0 (C leaves
 * out-of-range conversions undefined). */
#define CV_SAT(ST, DT, DMIN, DMAX)                                                                 \
    (DT)(x != x ? (DT)0 : x <= (ST)(DMIN) ? (DT)(DMIN) : x >= (ST)(DMAX) ? (DT)(DMAX) : (DT)x)

#define CV_TO_INT(NAME, DT, DMIN, DMAX)                                                            \
    static bool NAME(sp_elem from, const void *a, DT *o, size_t n)                                 \
    {                                                                                              \
        switch (from) {                                                                            \
        case SP_ELEM_F32:                                                                          \
            CV_LOOP(float, CV_SAT(float, DT, DMIN, DMAX))                                          \
        case SP_ELEM_F64:                                                                          \
            CV_LOOP(double, CV_SAT(double, DT, DMIN, DMAX))                                        \
            CV_INT_SOURCES((DT)x)                                                                  \
        default:                                                                                   \
            return false;                                                                          \
        }                                                                                          \
    }

#define CV_TO_FLT(NAME, DT)                                                                        \
    static bool NAME(sp_elem from, const void *a, DT *o, size_t n)                                 \
    {                                                                                              \
        switch (from) {                                                                            \
        case SP_ELEM_F32:                                                                          \
            CV_LOOP(float, (DT)x)                                                                  \
        case SP_ELEM_F64:                                                                          \
            CV_LOOP(double, (DT)x)                                                                 \
            CV_INT_SOURCES((DT)x)                                                                  \
        default:                                                                                   \
            return false;                                                                          \
        }                                                                                          \
    }

CV_TO_INT(cv_i8, int8_t, INT8_MIN, INT8_MAX)
CV_TO_INT(cv_i16, int16_t, INT16_MIN, INT16_MAX)
CV_TO_INT(cv_i32, int32_t, INT32_MIN, INT32_MAX)
CV_TO_INT(cv_i64, int64_t, INT64_MIN, INT64_MAX)
CV_TO_INT(cv_u8, uint8_t, 0, UINT8_MAX)
CV_TO_INT(cv_u16, uint16_t, 0, UINT16_MAX)
CV_TO_INT(cv_u32, uint32_t, 0, UINT32_MAX)
CV_TO_INT(cv_u64, uint64_t, 0, UINT64_MAX)
CV_TO_FLT(cv_f32, float)
CV_TO_FLT(cv_f64, double)

static bool cv_i1(sp_elem from, const void *a, uint8_t *o, size_t n)
{
    switch (from) {
    case SP_ELEM_F32:
        CV_LOOP(float, (uint8_t)(x != 0))
    case SP_ELEM_F64:
        CV_LOOP(double, (uint8_t)(x != 0))
        CV_INT_SOURCES((uint8_t)(x != 0))
    default:
        return false;
    }
}

/* A convert from or to a half type, block by block: a half widens to f32
 * exactly, then converts as f32 does; f32 and f64 sources round to the half
 * in one step, integer sources go through f64 first. */
static bool convert_half(sp_elem from, const void *a, sp_elem to, void *out, size_t n)
{
    if (from == to) {
        memcpy(out, a, n * sizeof(uint16_t));
        return true;
    }
    float f[HBLK];
    double d[HBLK];
    for (size_t i = 0; i < n; i += HBLK) {
        size_t m = n - i < HBLK ? n - i : HBLK;
        if (is_half(from)) {
            ex_kern_half_to_f32(from, (const uint16_t *)a + i, f, m);
            if (is_half(to)) {
                ex_kern_f32_to_half(to, f, (uint16_t *)out + i, m);
            } else if (!ex_kern_convert(SP_ELEM_F32, f, to, (char *)out + i * sp_elem_bytes(to),
                                        m)) {
                return false;
            }
            continue;
        }
        uint16_t *h = (uint16_t *)out + i;
        if (from == SP_ELEM_F32) {
            ex_kern_f32_to_half(to, (const float *)a + i, h, m);
            continue;
        }
        const double *src = d;
        if (from == SP_ELEM_F64) {
            src = (const double *)a + i;
        } else if (!ex_kern_convert(from, (const char *)a + i * sp_elem_bytes(from), SP_ELEM_F64,
                                    d, m)) {
            return false;
        }
        for (size_t j = 0; j < m; j++) {
            h[j] = ex_half_from_double(to, src[j]);
        }
    }
    return true;
}

bool ex_kern_convert(sp_elem from, const void *a, sp_elem to, void *out, size_t n)
{
    if (is_half(from) || is_half(to)) {
        return convert_half(from, a, to, out, n);
    }
    switch (to) {
#define CONVERT_CASE(E, T, S)                                                                      \
    case E:                                                                                        \
        return cv_##S(from, a, out, n);
        EX_ELEM_TYPES(CONVERT_CASE)
#undef CONVERT_CASE
    case SP_ELEM_I1:
        return cv_i1(from, a, out, n);
    default:
        return false;
    }
}

/* ---- compare, select, fill ------------------------------------------------------------ */

#define CMP_FN(NAME, T)                                                                            \
    static void NAME(int dir, const T *restrict a, const T *restrict b, uint8_t *restrict o,       \
                     size_t n)                                                                     \
    {                                                                                              \
        switch (dir) {                                                                             \
        case EX_CMP_EQ:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] == b[i];                                                               \
            break;                                                                                 \
        case EX_CMP_NE:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] != b[i];                                                               \
            break;                                                                                 \
        case EX_CMP_LT:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] < b[i];                                                                \
            break;                                                                                 \
        case EX_CMP_LE:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] <= b[i];                                                               \
            break;                                                                                 \
        case EX_CMP_GT:                                                                            \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] > b[i];                                                                \
            break;                                                                                 \
        default:                                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                o[i] = a[i] >= b[i];                                                               \
            break;                                                                                 \
        }                                                                                          \
    }

#define CMP_DEF(E, T, S) CMP_FN(cmp_##S, T)
EX_ELEM_TYPES(CMP_DEF)
#undef CMP_DEF

bool ex_kern_compare(int dir, sp_elem e, const void *a, const void *b, uint8_t *out, size_t n)
{
    if (dir < EX_CMP_EQ || dir > EX_CMP_GE) {
        return false;
    }
    if (is_half(e)) { /* widening keeps the order and NaNs */
        const uint16_t *ha = a, *hb = b;
        float fa[HBLK], fb[HBLK];
        for (size_t i = 0; i < n; i += HBLK) {
            size_t m = n - i < HBLK ? n - i : HBLK;
            ex_kern_half_to_f32(e, ha + i, fa, m);
            ex_kern_half_to_f32(e, hb + i, fb, m);
            cmp_f32(dir, fa, fb, out + i, m);
        }
        return true;
    }
    switch (e) {
#define COMPARE_CASE(E, T, S)                                                                      \
    case E:                                                                                        \
        cmp_##S(dir, a, b, out, n);                                                                \
        return true;
        EX_ELEM_TYPES(COMPARE_CASE)
#undef COMPARE_CASE
    case SP_ELEM_I1:
        cmp_u8(dir, a, b, out, n);
        return true;
    default:
        return false;
    }
}

/* Branch-free (a mask from the predicate), so that it vectorises and
 * random predicates cost no mispredictions. */
#define SELECT_LOOP(T)                                                                             \
    {                                                                                              \
        const T *x = a, *y = b;                                                                    \
        T *o = out;                                                                                \
        for (size_t i = 0; i < n; i++) {                                                           \
            T m = (T)((T)0 - (T)(pred[i] != 0));                                                   \
            o[i] = (T)((x[i] & m) | (y[i] & (T)~m));                                               \
        }                                                                                          \
        return;                                                                                    \
    }

void ex_kern_select(const uint8_t *pred, bool scalar, const void *a, const void *b, void *out,
                    size_t n, size_t esz)
{
    if (scalar) {
        memcpy(out, pred[0] ? a : b, n * esz);
        return;
    }
    switch (esz) {
        EX_WIDTH_CASES(SELECT_LOOP)
    default:
        for (size_t i = 0; i < n; i++) {
            memcpy((char *)out + i * esz, (const char *)(pred[i] ? a : b) + i * esz, esz);
        }
    }
}

#define FILL_LOOP(T)                                                                               \
    {                                                                                              \
        T v;                                                                                       \
        memcpy(&v, val, sizeof v);                                                                 \
        T *o = out;                                                                                \
        for (size_t i = 0; i < n; i++)                                                             \
            o[i] = v;                                                                              \
        return;                                                                                    \
    }

void ex_kern_fill(void *out, size_t n, const void *val, size_t esz)
{
    switch (esz) {
        EX_WIDTH_CASES(FILL_LOOP)
    default:
        for (size_t i = 0; i < n; i++) {
            memcpy((char *)out + i * esz, val, esz);
        }
    }
}

/* ---- strided copies ------------------------------------------------------------------- */

#define ROW_LOOP(T)                                                                                \
    {                                                                                              \
        T *o = (T *)(void *)d;                                                                     \
        const T *s = (const T *)(const void *)src;                                                 \
        if (ss == 0) {                                                                             \
            T v = s[0];                                                                            \
            for (int64_t i = 0; i < n; i++)                                                        \
                o[i * ds] = v;                                                                     \
        } else if (ds == 1) {                                                                      \
            for (int64_t i = 0; i < n; i++)                                                        \
                o[i] = s[i * ss];                                                                  \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                o[i * ds] = s[i * ss];                                                             \
        }                                                                                          \
        return;                                                                                    \
    }

/* n elements from src (stride ss elements) to d (stride ds). */
static void copy_row(char *d, int64_t ds, const char *src, int64_t ss, int64_t n, size_t esz)
{
    if (ds == 1 && ss == 1) {
        memcpy(d, src, (size_t)n * esz);
        return;
    }
    switch (esz) {
        EX_WIDTH_CASES(ROW_LOOP)
    default:
        for (int64_t i = 0; i < n; i++) {
            memcpy(d + i * ds * (int64_t)esz, src + i * ss * (int64_t)esz, esz);
        }
    }
}

enum { TILE = 32 };

/* Copies the box ext (rank dims) from s (strides ss, elements) to d (strides
 * ds). Unit dims are dropped and dims that are contiguous in both merged, so
 * that a reshape-like copy is one memcpy; when the innermost destination dim
 * reads the source with a stride but another dim reads it contiguously (a
 * transpose), the two are walked in TILE x TILE tiles. */
static void copy_strided(char *d, const int64_t *ds_in, const char *s, const int64_t *ss_in,
                         const int64_t *ext_in, uint32_t rank_in, size_t esz)
{
    int64_t ext[EX_KERN_MAX_RANK], ds[EX_KERN_MAX_RANK], ss[EX_KERN_MAX_RANK];
    uint32_t rank = 0;
    for (uint32_t k = 0; k < rank_in; k++) {
        if (ext_in[k] <= 0) {
            return;
        }
        if (ext_in[k] == 1) {
            continue;
        }
        if (rank > 0 && ds[rank - 1] == ds_in[k] * ext_in[k] &&
            ss[rank - 1] == ss_in[k] * ext_in[k]) {
            ext[rank - 1] *= ext_in[k];
            ds[rank - 1] = ds_in[k];
            ss[rank - 1] = ss_in[k];
            continue;
        }
        ext[rank] = ext_in[k];
        ds[rank] = ds_in[k];
        ss[rank] = ss_in[k];
        rank++;
    }
    const int64_t e = (int64_t)esz;
    if (rank == 0) {
        memcpy(d, s, esz);
        return;
    }
    uint32_t in = rank - 1;
    int32_t tj = -1; /* the dim read contiguously, for tiles */
    if (ss[in] != 1 && ss[in] != 0 && ext[in] >= TILE / 2) {
        for (uint32_t k = 0; k < in; k++) {
            if (ss[k] == 1 && ext[k] >= TILE / 2) {
                tj = (int32_t)k;
            }
        }
    }
    int64_t c[EX_KERN_MAX_RANK] = {0};
    for (;;) {
        int64_t doff = 0, soff = 0;
        for (uint32_t k = 0; k < in; k++) {
            doff += c[k] * ds[k];
            soff += c[k] * ss[k];
        }
        if (tj < 0) {
            copy_row(d + doff * e, ds[in], s + soff * e, ss[in], ext[in], esz);
        } else {
            uint32_t j = (uint32_t)tj;
            for (int64_t jb = 0; jb < ext[j]; jb += TILE) {
                int64_t je = jb + TILE < ext[j] ? jb + TILE : ext[j];
                for (int64_t ib = 0; ib < ext[in]; ib += TILE) {
                    int64_t ni = ext[in] - ib < TILE ? ext[in] - ib : TILE;
                    for (int64_t jj = jb; jj < je; jj++) {
                        copy_row(d + (doff + jj * ds[j] + ib * ds[in]) * e, ds[in],
                                 s + (soff + jj * ss[j] + ib * ss[in]) * e, ss[in], ni, esz);
                    }
                }
            }
        }
        /* next outer coordinate (the tile dim is walked above) */
        uint32_t k = in;
        while (k-- > 0) {
            if ((int32_t)k == tj) {
                continue;
            }
            if (++c[k] < ext[k]) {
                break;
            }
            c[k] = 0;
        }
        if (k == UINT32_MAX) {
            return;
        }
    }
}

static void row_major_strides(const int64_t *dims, uint32_t rank, int64_t *st)
{
    int64_t s = 1;
    for (uint32_t k = rank; k-- > 0;) {
        st[k] = s;
        s *= dims[k];
    }
}

/* floor(a / b) and ceil(a / b) for b > 0. */
static int64_t floor_div(int64_t a, int64_t b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static int64_t ceil_div(int64_t a, int64_t b)
{
    return -floor_div(-a, b);
}

void ex_kern_affine(const void *src, const int64_t *sdims, uint32_t srank, const ex_amap *map,
                    void *dst, const int64_t *ddims, uint32_t drank, size_t esz)
{
    size_t n = 1;
    for (uint32_t k = 0; k < drank; k++) {
        n *= (size_t)ddims[k];
    }
    if (n == 0) {
        return;
    }
    int64_t sst[EX_KERN_MAX_RANK], dst_st[EX_KERN_MAX_RANK], st[EX_KERN_MAX_RANK];
    int64_t lo[EX_KERN_MAX_RANK], hi[EX_KERN_MAX_RANK];
    row_major_strides(sdims, srank, sst);
    row_major_strides(ddims, drank, dst_st);
    for (uint32_t r = 0; r < drank; r++) {
        st[r] = 0;
        lo[r] = 0;
        hi[r] = ddims[r];
    }
    int64_t base = 0;
    bool valid = true;
    for (uint32_t k = 0; k < srank && valid; k++) {
        const ex_amap *m = &map[k];
        base += m->bias * sst[k];
        if (m->rdim < 0 || m->scale == 0) {
            valid = m->bias >= 0 && m->bias < sdims[k];
            continue;
        }
        uint32_t r = (uint32_t)m->rdim;
        st[r] += m->scale * sst[k];
        /* 0 <= bias + scale * c <= sdims - 1 */
        int64_t a, b;
        if (m->scale > 0) {
            a = ceil_div(-m->bias, m->scale);
            b = floor_div(sdims[k] - 1 - m->bias, m->scale);
        } else {
            a = ceil_div(m->bias - (sdims[k] - 1), -m->scale);
            b = floor_div(m->bias, -m->scale);
        }
        lo[r] = a > lo[r] ? a : lo[r];
        hi[r] = b + 1 < hi[r] ? b + 1 : hi[r];
    }
    bool full = valid;
    int64_t ext[EX_KERN_MAX_RANK];
    for (uint32_t r = 0; r < drank && valid; r++) {
        if (lo[r] >= hi[r]) {
            valid = false;
        }
        ext[r] = hi[r] - lo[r];
        full = full && ext[r] == ddims[r];
    }
    if (!full) {
        memset(dst, 0, n * esz);
    }
    if (!valid) {
        return;
    }
    int64_t doff = 0, soff = base;
    for (uint32_t r = 0; r < drank; r++) {
        doff += lo[r] * dst_st[r];
        soff += lo[r] * st[r];
    }
    copy_strided((char *)dst + doff * (int64_t)esz, dst_st, (const char *)src + soff * (int64_t)esz,
                 st, ext, drank, esz);
}

void ex_kern_pad(const void *src, const int64_t *sdims, const int64_t *svalid, const int64_t *soff,
                 void *dst, const int64_t *ddims, const int64_t *doff, uint32_t rank,
                 const int64_t *lo, const int64_t *interior, const void *pv, size_t esz)
{
    size_t n = 1;
    for (uint32_t k = 0; k < rank; k++) {
        n *= (size_t)ddims[k];
    }
    ex_kern_fill(dst, n, pv, esz);
    if (n == 0) {
        return;
    }
    int64_t sst[EX_KERN_MAX_RANK], dst_st[EX_KERN_MAX_RANK], ds[EX_KERN_MAX_RANK];
    int64_t ext[EX_KERN_MAX_RANK];
    row_major_strides(sdims, rank, sst);
    row_major_strides(ddims, rank, dst_st);
    int64_t so = 0, dof = 0;
    for (uint32_t k = 0; k < rank; k++) {
        int64_t step = interior[k] + 1;
        /* source global index g lands at lo + g * step; keep doff <= that < doff + ddims */
        int64_t g0 = ceil_div(doff[k] - lo[k], step);
        int64_t g1 = floor_div(doff[k] + ddims[k] - 1 - lo[k], step) + 1;
        g0 = g0 > soff[k] ? g0 : soff[k];
        g1 = g1 < soff[k] + svalid[k] ? g1 : soff[k] + svalid[k];
        if (g1 <= g0) {
            return;
        }
        ext[k] = g1 - g0;
        ds[k] = dst_st[k] * step;
        so += (g0 - soff[k]) * sst[k];
        dof += (lo[k] + g0 * step - doff[k]) * dst_st[k];
    }
    copy_strided((char *)dst + dof * (int64_t)esz, ds, (const char *)src + so * (int64_t)esz, sst,
                 ext, rank, esz);
}

/* ---- reduce --------------------------------------------------------------------------- */

#define COMB_ADD(x, y)  ((x) + (y))
#define COMB_MUL(x, y)  ((x) * (y))
#define COMB_FMAX(x, y) (((y) > (x) || (y) != (y)) ? (y) : (x))
#define COMB_FMIN(x, y) (((y) < (x) || (y) != (y)) ? (y) : (x))
#define COMB_IMAX(x, y) ((y) > (x) ? (y) : (x))
#define COMB_IMIN(x, y) ((y) < (x) ? (y) : (x))
#define COMB_UADD(x, y) ((uint64_t)(x) + (uint64_t)(y))
#define COMB_UMUL(x, y) ((uint64_t)(x) * (uint64_t)(y))
#define COMB_AND(x, y)  ((x) & (y))
#define COMB_OR(x, y)   ((x) | (y))

/* The shape of a reduction after dropping unit dims and merging neighbours
 * of the same kind: rows of `inner` elements, reduced (inner_red) or kept. */
typedef struct rshape {
    uint32_t m; /* merged dims */
    int64_t ext[EX_KERN_MAX_RANK];
    size_t ost[EX_KERN_MAX_RANK]; /* output stride of each merged dim (0: reduced) */
    size_t rows, inner, nout;
    bool inner_red;
} rshape;

/* Accumulates in type A (the element type, double for float sums and
 * products, the unsigned type for integer sums and products) into acc
 * (nout entries, set to the init value first). */
#define RED_BODY(T, A, COMB)                                                                       \
    {                                                                                              \
        const T *src = in;                                                                         \
        A *acc = accp;                                                                             \
        A iv = (A) * (const T *)init;                                                              \
        for (size_t i = 0; i < rs->nout; i++)                                                      \
            acc[i] = iv;                                                                           \
        int64_t c[EX_KERN_MAX_RANK] = {0};                                                         \
        for (size_t row = 0; row < rs->rows; row++) {                                              \
            size_t oi = 0;                                                                         \
            for (uint32_t j = 0; j + 1 < rs->m; j++)                                               \
                oi += (size_t)c[j] * rs->ost[j];                                                   \
            const T *s = src + row * rs->inner;                                                    \
            size_t len = rs->inner;                                                                \
            if (rs->inner_red) {                                                                   \
                A t = acc[oi];                                                                     \
                size_t i = 0;                                                                      \
                if (len >= 16) {                                                                   \
                    A lane[8];                                                                     \
                    for (int l = 0; l < 8; l++)                                                    \
                        lane[l] = (A)s[l];                                                         \
                    for (i = 8; i + 8 <= len; i += 8)                                              \
                        for (int l = 0; l < 8; l++)                                                \
                            lane[l] = (A)COMB(lane[l], (A)s[i + (size_t)l]);                       \
                    for (int l = 0; l < 8; l++)                                                    \
                        t = (A)COMB(t, lane[l]);                                                   \
                }                                                                                  \
                for (; i < len; i++)                                                               \
                    t = (A)COMB(t, (A)s[i]);                                                       \
                acc[oi] = t;                                                                       \
            } else {                                                                               \
                A *d = acc + oi;                                                                   \
                for (size_t i = 0; i < len; i++)                                                   \
                    d[i] = (A)COMB(d[i], (A)s[i]);                                                 \
            }                                                                                      \
            for (uint32_t j = rs->m - 1; j-- > 0;) {                                               \
                if (++c[j] < rs->ext[j])                                                           \
                    break;                                                                         \
                c[j] = 0;                                                                          \
            }                                                                                      \
        }                                                                                          \
        return true;                                                                               \
    }

#define RED_FLOAT(NAME, T, A)                                                                      \
    static bool NAME(int fn, const rshape *rs, const void *in, const void *init, void *accp)       \
    {                                                                                              \
        switch (fn) {                                                                              \
        case EX_RED_ADD:                                                                           \
            RED_BODY(T, A, COMB_ADD)                                                               \
        case EX_RED_MUL:                                                                           \
            RED_BODY(T, A, COMB_MUL)                                                               \
        case EX_RED_MAX:                                                                           \
            RED_BODY(T, T, COMB_FMAX)                                                              \
        case EX_RED_MIN:                                                                           \
            RED_BODY(T, T, COMB_FMIN)                                                              \
        default:                                                                                   \
            return false;                                                                          \
        }                                                                                          \
    }

#define RED_INT(NAME, T, U)                                                                        \
    static bool NAME(int fn, const rshape *rs, const void *in, const void *init, void *accp)       \
    {                                                                                              \
        switch (fn) {                                                                              \
        case EX_RED_ADD:                                                                           \
            RED_BODY(T, U, COMB_UADD)                                                              \
        case EX_RED_MUL:                                                                           \
            RED_BODY(T, U, COMB_UMUL)                                                              \
        case EX_RED_MAX:                                                                           \
            RED_BODY(T, T, COMB_IMAX)                                                              \
        case EX_RED_MIN:                                                                           \
            RED_BODY(T, T, COMB_IMIN)                                                              \
        case EX_RED_AND:                                                                           \
            RED_BODY(T, T, COMB_AND)                                                               \
        case EX_RED_OR:                                                                            \
            RED_BODY(T, T, COMB_OR)                                                                \
        default:                                                                                   \
            return false;                                                                          \
        }                                                                                          \
    }

RED_FLOAT(red_f32, float, double)
RED_FLOAT(red_f64, double, double)
RED_INT(red_i8, int8_t, uint8_t)
RED_INT(red_i16, int16_t, uint16_t)
RED_INT(red_i32, int32_t, uint32_t)
RED_INT(red_i64, int64_t, uint64_t)
RED_INT(red_u8, uint8_t, uint8_t)
RED_INT(red_u16, uint16_t, uint16_t)
RED_INT(red_u32, uint32_t, uint32_t)
RED_INT(red_u64, uint64_t, uint64_t)

/* Bytes of the accumulator type for fn on e (0: no kernel). */
static size_t red_acc_size(int fn, sp_elem e)
{
    switch (e) {
    case SP_ELEM_F32:
        return fn == EX_RED_ADD || fn == EX_RED_MUL ? 8 : 4;
    case SP_ELEM_F64:
    case SP_ELEM_I64:
    case SP_ELEM_UI64:
        return 8;
    case SP_ELEM_I32:
    case SP_ELEM_UI32:
        return 4;
    case SP_ELEM_I16:
    case SP_ELEM_UI16:
        return 2;
    case SP_ELEM_I8:
    case SP_ELEM_UI8:
        return 1;
    case SP_ELEM_I1: /* and/or/max/min keep 0/1 */
        return fn == EX_RED_AND || fn == EX_RED_OR || fn == EX_RED_MAX || fn == EX_RED_MIN ? 1 : 0;
    default:
        return 0;
    }
}

cm_status ex_kern_reduce(int fn, sp_elem e, const void *in, const int64_t *dims, uint32_t rank,
                         const bool *red, const void *init, void *out)
{
    size_t asz = red_acc_size(fn, e), esz = sp_elem_bytes(e);
    if (asz == 0 || rank > EX_KERN_MAX_RANK) {
        return CM_EINVAL;
    }
    rshape rs;
    memset(&rs, 0, sizeof rs);
    bool rd[EX_KERN_MAX_RANK];
    size_t total = 1;
    for (uint32_t k = 0; k < rank; k++) {
        total *= (size_t)dims[k];
        if (dims[k] == 1) {
            continue;
        }
        if (rs.m > 0 && rd[rs.m - 1] == red[k]) {
            rs.ext[rs.m - 1] *= dims[k];
        } else {
            rs.ext[rs.m] = dims[k];
            rd[rs.m++] = red[k];
        }
    }
    rs.nout = 1;
    for (uint32_t k = 0; k < rank; k++) {
        rs.nout *= red[k] ? 1u : (size_t)dims[k];
    }
    if (total == 0) {
        ex_kern_fill(out, rs.nout, init, esz);
        return CM_OK;
    }
    if (rs.m == 0) {
        rs.ext[0] = 1;
        rd[0] = false;
        rs.m = 1;
    }
    size_t s = 1;
    for (uint32_t j = rs.m; j-- > 0;) {
        rs.ost[j] = rd[j] ? 0 : s;
        s *= rd[j] ? 1u : (size_t)rs.ext[j];
    }
    rs.inner = (size_t)rs.ext[rs.m - 1];
    rs.inner_red = rd[rs.m - 1];
    rs.rows = total / rs.inner;
    void *acc = out;
    if (asz != esz) {
        /* f32 sums and products accumulate in double; integer sums in the
         * unsigned type of the same width, which has the same bits */
        acc = cm_alloc(rs.nout * asz + 8u);
        if (acc == NULL) {
            return CM_ENOMEM;
        }
    }
    bool ok;
    switch (e) { /* red_acc_size let only these through */
#define REDUCE_CASE(E, T, S)                                                                       \
    case E:                                                                                        \
        ok = red_##S(fn, &rs, in, init, acc);                                                      \
        break;
        EX_ELEM_TYPES(REDUCE_CASE)
#undef REDUCE_CASE
    default: /* i1 */
        ok = red_u8(fn, &rs, in, init, acc);
        break;
    }
    if (acc != out) {
        if (e == SP_ELEM_F32 && asz == 8) {
            const double *a = acc;
            float *o = out;
            for (size_t i = 0; i < rs.nout; i++) {
                o[i] = (float)a[i];
            }
        }
        cm_free(acc);
    }
    return ok ? CM_OK : CM_EINVAL;
}

/* ---- reduce_window ------------------------------------------------------------------- */

/* The offset (*at, strides ist) in an array of dims idims of position w of
 * the window at o, o * stride - pad_lo + w; false when that is in the
 * padding. */
static bool window_at(const int64_t *o, const int64_t *w, const int64_t *stride,
                      const int64_t *pad_lo, const int64_t *idims, const int64_t *ist,
                      uint32_t rank, size_t *at)
{
    *at = 0;
    for (uint32_t k = 0; k < rank; k++) {
        int64_t x = o[k] * stride[k] - pad_lo[k] + w[k];
        if (x < 0 || x >= idims[k]) {
            return false;
        }
        *at += (size_t)(x * ist[k]);
    }
    return true;
}

#define WIN_BODY(COMB)                                                                             \
    for (size_t i = 0; i < n; i++) {                                                               \
        double acc = iv;                                                                           \
        int64_t w[EX_KERN_MAX_RANK] = {0};                                                         \
        for (size_t j = 0; j < nwin; j++) {                                                        \
            size_t at;                                                                             \
            bool inside = window_at(o, w, stride, pad_lo, idims, ist, rank, &at);                  \
            double v = !inside            ? iv                                                     \
                       : e == SP_ELEM_F32 ? (double)((const float *)in)[at]                        \
                                          : ((const double *)in)[at];                              \
            acc = COMB(acc, v);                                                                    \
            for (uint32_t k = rank; k-- > 0;) {                                                    \
                if (++w[k] < win[k]) {                                                             \
                    break;                                                                         \
                }                                                                                  \
                w[k] = 0;                                                                          \
            }                                                                                      \
        }                                                                                          \
        if (e == SP_ELEM_F32) {                                                                    \
            ((float *)out)[i] = (float)acc;                                                        \
        } else {                                                                                   \
            ((double *)out)[i] = acc;                                                              \
        }                                                                                          \
        for (uint32_t k = rank; k-- > 0;) {                                                        \
            if (++o[k] < odims[k]) {                                                               \
                break;                                                                             \
            }                                                                                      \
            o[k] = 0;                                                                              \
        }                                                                                          \
    }

cm_status ex_kern_reduce_window(int fn, sp_elem e, const void *in, const int64_t *idims,
                                uint32_t rank, const int64_t *win, const int64_t *stride,
                                const int64_t *pad_lo, const void *init, void *out,
                                const int64_t *odims)
{
    if ((e != SP_ELEM_F32 && e != SP_ELEM_F64) || rank > EX_KERN_MAX_RANK ||
        (fn != EX_RED_ADD && fn != EX_RED_MUL && fn != EX_RED_MAX && fn != EX_RED_MIN)) {
        return CM_EINVAL;
    }
    size_t n = 1, nwin = 1;
    for (uint32_t k = 0; k < rank; k++) {
        n *= (size_t)odims[k];
        nwin *= (size_t)win[k];
    }
    int64_t ist[EX_KERN_MAX_RANK], o[EX_KERN_MAX_RANK] = {0};
    row_major_strides(idims, rank, ist);
    double iv = e == SP_ELEM_F32 ? (double)*(const float *)init : *(const double *)init;
    switch (fn) {
    case EX_RED_ADD:
        WIN_BODY(COMB_ADD)
        break;
    case EX_RED_MUL:
        WIN_BODY(COMB_MUL)
        break;
    case EX_RED_MAX:
        WIN_BODY(COMB_FMAX)
        break;
    default:
        WIN_BODY(COMB_FMIN)
        break;
    }
    return CM_OK;
}

/* ---- dot_general ------------------------------------------------------------------------- */

/* One operand as a matrix per batch: element (i, j) of the [rows x cols]
 * view (rows: lhs free / rhs contract; cols: lhs contract / rhs free) sits at
 * i * srow + j * scol. */
typedef struct mview {
    int64_t rows, cols, srow, scol;
    bool ok; /* the dims collapse into one strided run each */
} mview;

/* Collapses dims d[0..n) (in this order) of an operand with strides st into
 * one run: its length and stride, or false. Unit dims are ignored. */
static bool collapse(const int64_t *dims, const int64_t *st, const int64_t *d, uint32_t n,
                     int64_t *len, int64_t *stride)
{
    *len = 1;
    *stride = 0;
    int64_t prev = -1;
    for (uint32_t i = 0; i < n; i++) {
        int64_t k = d[i];
        if (dims[k] == 1) {
            continue;
        }
        if (prev >= 0 && st[prev] != st[k] * dims[k]) {
            return false;
        }
        *len *= dims[k];
        *stride = st[k];
        prev = k;
    }
    return true;
}

/* The gemm transpose flag and leading dimension of a view, or false: row-major
 * needs unit column stride and a leading dimension of at least cols; the
 * transposed form unit row stride and at least rows. */
static bool gemm_layout(const mview *v, bool *trans, int64_t *ld)
{
    int64_t lr = v->rows == 1 ? (v->cols > 1 ? v->cols : 1) : v->srow;
    if (v->srow > INT32_MAX || v->scol > INT32_MAX) {
        return false; /* BLAS takes int leading dimensions: pack instead */
    }
    if ((v->cols == 1 || v->scol == 1) && lr >= (v->cols > 1 ? v->cols : 1)) {
        *trans = false;
        *ld = lr;
        return true;
    }
    int64_t lc = v->cols == 1 ? (v->rows > 1 ? v->rows : 1) : v->scol;
    if ((v->rows == 1 || v->srow == 1) && lc >= (v->rows > 1 ? v->rows : 1)) {
        *trans = true;
        *ld = lc;
        return true;
    }
    return false;
}

/* Copies an operand into [batch, a, b] order (dims of a, then of b). */
static void *pack(const void *x, const int64_t *dims, uint32_t rank, const int64_t *bd, uint32_t nb,
                  const int64_t *ad, uint32_t na, const int64_t *bdd, uint32_t nbb, size_t esz)
{
    size_t n = 1;
    for (uint32_t k = 0; k < rank; k++) {
        n *= (size_t)dims[k];
    }
    void *t = cm_alloc(n * esz + 8u);
    if (t == NULL) {
        return NULL;
    }
    ex_amap map[EX_KERN_MAX_RANK];
    int64_t td[EX_KERN_MAX_RANK];
    uint32_t j = 0;
    for (uint32_t i = 0; i < nb; i++, j++) {
        map[bd[i]] = (ex_amap){(int32_t)j, 1, 0};
        td[j] = dims[bd[i]];
    }
    for (uint32_t i = 0; i < na; i++, j++) {
        map[ad[i]] = (ex_amap){(int32_t)j, 1, 0};
        td[j] = dims[ad[i]];
    }
    for (uint32_t i = 0; i < nbb; i++, j++) {
        map[bdd[i]] = (ex_amap){(int32_t)j, 1, 0};
        td[j] = dims[bdd[i]];
    }
    ex_kern_affine(x, dims, rank, map, t, td, rank, esz);
    return t;
}

/* The dims of an operand of rank dims that are neither batching (b) nor
 * contracting (c), in order, into f; returns their count. */
static uint32_t free_dims(uint32_t rank, const int64_t *b, uint32_t nb, const int64_t *c,
                          uint32_t nc, int64_t *f)
{
    bool used[EX_KERN_MAX_RANK] = {false};
    for (uint32_t i = 0; i < nb; i++) {
        used[b[i]] = true;
    }
    for (uint32_t i = 0; i < nc; i++) {
        used[c[i]] = true;
    }
    uint32_t n = 0;
    for (uint32_t k = 0; k < rank; k++) {
        if (!used[k]) {
            f[n++] = k;
        }
    }
    return n;
}

cm_status ex_kern_dot(sp_elem e, const void *l, const int64_t *ldims, uint32_t lrank, const void *r,
                      const int64_t *rdims, uint32_t rrank, const int64_t *lb, const int64_t *rb,
                      uint32_t n_b, const int64_t *lc, const int64_t *rc, uint32_t n_c, void *out)
{
    if ((e != SP_ELEM_F32 && e != SP_ELEM_F64) || lrank > EX_KERN_MAX_RANK ||
        rrank > EX_KERN_MAX_RANK) {
        return CM_EINVAL;
    }
    size_t esz = sp_elem_bytes(e);
    int64_t lst[EX_KERN_MAX_RANK], rst[EX_KERN_MAX_RANK];
    int64_t lf[EX_KERN_MAX_RANK], rf[EX_KERN_MAX_RANK];
    uint32_t nlf = free_dims(lrank, lb, n_b, lc, n_c, lf),
             nrf = free_dims(rrank, rb, n_b, rc, n_c, rf);
    row_major_strides(ldims, lrank, lst);
    row_major_strides(rdims, rrank, rst);
    mview lv, rv;
    memset(&lv, 0, sizeof lv);
    memset(&rv, 0, sizeof rv);
    lv.ok = collapse(ldims, lst, lf, nlf, &lv.rows, &lv.srow) &&
            collapse(ldims, lst, lc, n_c, &lv.cols, &lv.scol);
    rv.ok = collapse(rdims, rst, rc, n_c, &rv.rows, &rv.srow) &&
            collapse(rdims, rst, rf, nrf, &rv.cols, &rv.scol);
    int64_t M = 1, N = 1, K = 1, B = 1;
    for (uint32_t i = 0; i < nlf; i++) {
        M *= ldims[lf[i]];
    }
    for (uint32_t i = 0; i < nrf; i++) {
        N *= rdims[rf[i]];
    }
    for (uint32_t i = 0; i < n_c; i++) {
        K *= ldims[lc[i]];
    }
    for (uint32_t i = 0; i < n_b; i++) {
        B *= ldims[lb[i]];
    }
    if (B * M * N == 0) {
        return CM_OK;
    }
    bool lt = false, rt = false;
    int64_t lda = 0, ldb = 0;
    void *lp = NULL, *rp = NULL;
    int64_t lbst[EX_KERN_MAX_RANK], rbst[EX_KERN_MAX_RANK], bdims[EX_KERN_MAX_RANK];
    for (uint32_t i = 0; i < n_b; i++) {
        bdims[i] = ldims[lb[i]];
        lbst[i] = lst[lb[i]];
        rbst[i] = rst[rb[i]];
    }
    if (K == 0) {
        memset(out, 0, (size_t)(B * M * N) * esz);
        return CM_OK;
    }
    if (!lv.ok || !gemm_layout(&lv, &lt, &lda)) {
        lp = pack(l, ldims, lrank, lb, n_b, lf, nlf, lc, n_c, esz);
        if (lp == NULL) {
            return CM_ENOMEM;
        }
        lt = false;
        lda = K;
        for (uint32_t i = n_b; i-- > 0;) {
            lbst[i] = i + 1 == n_b ? M * K : lbst[i + 1] * bdims[i + 1];
        }
    }
    if (!rv.ok || !gemm_layout(&rv, &rt, &ldb)) {
        rp = pack(r, rdims, rrank, rb, n_b, rc, n_c, rf, nrf, esz);
        if (rp == NULL) {
            cm_free(lp);
            return CM_ENOMEM;
        }
        rt = false;
        ldb = N;
        for (uint32_t i = n_b; i-- > 0;) {
            rbst[i] = i + 1 == n_b ? K * N : rbst[i + 1] * bdims[i + 1];
        }
    }
    const char *la = lp != NULL ? lp : l, *rbp = rp != NULL ? rp : r;
    int64_t c[EX_KERN_MAX_RANK] = {0};
    int64_t ee = (int64_t)esz;
    for (int64_t b = 0; b < B; b++) {
        int64_t lo = 0, ro = 0;
        for (uint32_t i = 0; i < n_b; i++) {
            lo += c[i] * lbst[i];
            ro += c[i] * rbst[i];
        }
        char *o = (char *)out + b * M * N * ee;
        if (e == SP_ELEM_F32) {
            ex_blas_sgemm_ex(lt, rt, M, N, K, (const float *)(const void *)(la + lo * ee), lda,
                             (const float *)(const void *)(rbp + ro * ee), ldb, (float *)(void *)o,
                             N);
        } else {
            ex_blas_dgemm_ex(lt, rt, M, N, K, (const double *)(const void *)(la + lo * ee), lda,
                             (const double *)(const void *)(rbp + ro * ee), ldb,
                             (double *)(void *)o, N);
        }
        for (uint32_t i = n_b; i-- > 0;) {
            if (++c[i] < bdims[i]) {
                break;
            }
            c[i] = 0;
        }
    }
    cm_free(lp);
    cm_free(rp);
    return CM_OK;
}

static bool is_int_type(sp_elem e)
{
    return e == SP_ELEM_I8 || e == SP_ELEM_I16 || e == SP_ELEM_I32 || e == SP_ELEM_I64 ||
           e == SP_ELEM_UI8 || e == SP_ELEM_UI16 || e == SP_ELEM_UI32 || e == SP_ELEM_UI64;
}

/* An integer operand as int64 (sign- or zero-extended) in [batch, a, b]
 * order (pack), or NULL. */
static uint64_t *pack_int(sp_elem e, const void *x, const int64_t *dims, uint32_t rank,
                          const int64_t *bd, uint32_t nb, const int64_t *ad, uint32_t na,
                          const int64_t *bdd, uint32_t nbb)
{
    size_t n = 1;
    for (uint32_t k = 0; k < rank; k++) {
        n *= (size_t)dims[k];
    }
    int64_t *wide = cm_alloc(n * sizeof *wide + 8u);
    if (wide == NULL) {
        return NULL;
    }
    ex_kern_convert(e, x, SP_ELEM_I64, wide, n);
    uint64_t *t = pack(wide, dims, rank, bd, nb, ad, na, bdd, nbb, sizeof *wide);
    cm_free(wide);
    return t;
}

cm_status ex_kern_dot_int(sp_elem le, const void *l, const int64_t *ldims, uint32_t lrank,
                          sp_elem re, const void *r, const int64_t *rdims, uint32_t rrank,
                          const int64_t *lb, const int64_t *rb, uint32_t n_b, const int64_t *lc,
                          const int64_t *rc, uint32_t n_c, sp_elem oe, void *out)
{
    if (!is_int_type(le) || !is_int_type(re) || !is_int_type(oe) || lrank > EX_KERN_MAX_RANK ||
        rrank > EX_KERN_MAX_RANK) {
        return CM_EINVAL;
    }
    int64_t lf[EX_KERN_MAX_RANK], rf[EX_KERN_MAX_RANK];
    uint32_t nlf = free_dims(lrank, lb, n_b, lc, n_c, lf),
             nrf = free_dims(rrank, rb, n_b, rc, n_c, rf);
    size_t B = 1, M = 1, N = 1, K = 1;
    for (uint32_t i = 0; i < n_b; i++) {
        B *= (size_t)ldims[lb[i]];
    }
    for (uint32_t i = 0; i < nlf; i++) {
        M *= (size_t)ldims[lf[i]];
    }
    for (uint32_t i = 0; i < nrf; i++) {
        N *= (size_t)rdims[rf[i]];
    }
    for (uint32_t i = 0; i < n_c; i++) {
        K *= (size_t)ldims[lc[i]];
    }
    if (B * M * N == 0) {
        return CM_OK;
    }
    /* lhs as [batch, free, contract], rhs as [batch, contract, free] */
    uint64_t *lp = pack_int(le, l, ldims, lrank, lb, n_b, lf, nlf, lc, n_c);
    uint64_t *rp = pack_int(re, r, rdims, rrank, rb, n_b, rc, n_c, rf, nrf);
    uint64_t *acc = cm_alloc(N * sizeof *acc + 8u);
    if (lp == NULL || rp == NULL || acc == NULL) {
        cm_free(lp);
        cm_free(rp);
        cm_free(acc);
        return CM_ENOMEM;
    }
    size_t oesz = sp_elem_bytes(oe);
    for (size_t b = 0; b < B; b++) {
        for (size_t m = 0; m < M; m++) {
            memset(acc, 0, N * sizeof *acc);
            const uint64_t *lrow = lp + (b * M + m) * K;
            for (size_t k = 0; k < K; k++) {
                uint64_t a = lrow[k];
                const uint64_t *rrow = rp + (b * K + k) * N;
                for (size_t n = 0; n < N; n++) {
                    acc[n] += a * rrow[n]; /* unsigned: wraps modulo 2^64 */
                }
            }
            ex_kern_convert(SP_ELEM_UI64, acc, oe, (char *)out + (b * M + m) * N * oesz, N);
        }
    }
    cm_free(lp);
    cm_free(rp);
    cm_free(acc);
    return CM_OK;
}

/* ---- blocks: place, gather, scatter ---------------------------------------------------- */

static int64_t valid_extent(const ex_block *b, uint32_t k)
{
    int64_t n = b->gdims[k] - b->off[k];
    return n < 0 ? 0 : (n < b->dims[k] ? n : b->dims[k]);
}

void ex_kern_place(const ex_block *src, const int64_t *gstart, const ex_block *dst)
{
    int64_t sst[EX_KERN_MAX_RANK], dstr[EX_KERN_MAX_RANK], ext[EX_KERN_MAX_RANK];
    row_major_strides(src->dims, src->rank, sst);
    row_major_strides(dst->dims, dst->rank, dstr);
    int64_t so = 0, dof = 0;
    for (uint32_t k = 0; k < src->rank; k++) {
        /* global positions in dst: [gstart + soff, gstart + soff + valid) */
        int64_t a = gstart[k] + src->off[k], b = a + valid_extent(src, k);
        int64_t da = dst->off[k], db = da + valid_extent(dst, k);
        int64_t lo = a > da ? a : da, hi = b < db ? b : db;
        if (hi <= lo) {
            return;
        }
        ext[k] = hi - lo;
        so += (lo - a) * sst[k];
        dof += (lo - da) * dstr[k];
    }
    int64_t e = (int64_t)src->esz;
    copy_strided((char *)dst->data + dof * e, dstr, (const char *)src->data + so * e, sst, ext,
                 src->rank, src->esz);
}

/* Integer element i of p as int64 (0 for non-integer types). */
static int64_t int_at(const void *p, sp_elem e, size_t i)
{
    switch (e) {
    case SP_ELEM_I8:
        return ((const int8_t *)p)[i];
    case SP_ELEM_I16:
        return ((const int16_t *)p)[i];
    case SP_ELEM_I32:
        return ((const int32_t *)p)[i];
    case SP_ELEM_I64:
        return ((const int64_t *)p)[i];
    case SP_ELEM_I1:
    case SP_ELEM_UI8:
        return ((const uint8_t *)p)[i];
    case SP_ELEM_UI16:
        return ((const uint16_t *)p)[i];
    case SP_ELEM_UI32:
        return ((const uint32_t *)p)[i];
    case SP_ELEM_UI64: {
        uint64_t v = ((const uint64_t *)p)[i];
        return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    default:
        return 0;
    }
}

static int64_t index_of(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] == x) {
            return (int64_t)i;
        }
    }
    return -1;
}

/* The start of the window of the element whose indices batch coordinates
 * are those of the non-window dims of `at` (global): start[operand dim],
 * from the index vector, and the operand batching dims. false when ix's
 * block lacks the element. */
static bool window_start(const ex_gather_dims *g, const ex_block *ix, const int64_t *at,
                         uint32_t at_rank, const int64_t *window, uint32_t n_window,
                         uint32_t op_rank, int64_t *start)
{
    int64_t icoord[EX_KERN_MAX_RANK]; /* global indices coordinates */
    uint32_t j = 0;
    for (uint32_t r = 0; r < at_rank; r++) {
        if (index_of(window, n_window, (int64_t)r) >= 0) {
            continue;
        }
        uint32_t d = (int64_t)j < g->ivd ? j : j + 1u;
        j++;
        if (d >= ix->rank) {
            return false;
        }
        icoord[d] = at[r];
    }
    for (uint32_t d = 0; d < op_rank; d++) {
        start[d] = 0;
    }
    size_t base = 0;
    int64_t ist[EX_KERN_MAX_RANK];
    row_major_strides(ix->dims, ix->rank, ist);
    for (uint32_t d = 0; d < ix->rank; d++) {
        if ((int64_t)d == g->ivd) {
            if (ix->off[d] != 0 || ix->dims[d] < (int64_t)g->n_start_map) {
                return false;
            }
            continue;
        }
        int64_t l = icoord[d] - ix->off[d];
        if (l < 0 || l >= ix->dims[d]) {
            return false;
        }
        base += (size_t)(l * ist[d]);
    }
    for (uint32_t i = 0; i < g->n_start_map; i++) {
        size_t at_i = base + ((int64_t)ix->rank > g->ivd ? (size_t)i * (size_t)ist[g->ivd] : 0u);
        start[g->start_map[i]] = int_at(ix->data, ix->elem, at_i);
    }
    for (uint32_t p = 0; p < g->n_obatch && p < g->n_ibatch; p++) {
        start[g->obatch[p]] = icoord[g->ibatch[p]];
    }
    return true;
}

cm_status ex_kern_gather(const ex_gather_dims *g, const ex_block *op, const ex_block *ix,
                         const ex_block *out)
{
    size_t n = 1;
    for (uint32_t k = 0; k < out->rank; k++) {
        n *= (size_t)out->dims[k];
    }
    if (n == 0) {
        return CM_OK;
    }
    int64_t ost[EX_KERN_MAX_RANK];
    row_major_strides(op->dims, op->rank, ost);
    /* operand dims of the window, in order: neither collapsed nor batching */
    int64_t wdim[EX_KERN_MAX_RANK];
    uint32_t nw = 0;
    for (uint32_t d = 0; d < op->rank; d++) {
        if (index_of(g->collapsed, g->n_collapsed, d) < 0 &&
            index_of(g->obatch, g->n_obatch, d) < 0) {
            wdim[nw++] = d;
        }
    }
    if (nw != g->n_offset) {
        return CM_EINVAL;
    }
    int64_t c[EX_KERN_MAX_RANK] = {0}, gr[EX_KERN_MAX_RANK], start[EX_KERN_MAX_RANK];
    char *o = out->data;
    for (size_t i = 0; i < n; i++) {
        bool in = true;
        for (uint32_t k = 0; k < out->rank; k++) {
            gr[k] = out->off[k] + c[k];
            in = in && gr[k] < out->gdims[k];
        }
        if (in &&
            !window_start(g, ix, gr, out->rank, g->offset_dims, g->n_offset, op->rank, start)) {
            return CM_EINVAL;
        }
        for (uint32_t d = 0; in && d < op->rank; d++) {
            if (index_of(g->start_map, g->n_start_map, d) >= 0) {
                int64_t hi = op->gdims[d] - g->slice_sizes[d];
                start[d] = start[d] < 0 ? 0 : (start[d] > hi ? hi : start[d]);
            }
        }
        for (uint32_t w = 0; in && w < nw; w++) {
            start[wdim[w]] += gr[g->offset_dims[w]];
        }
        size_t si = 0;
        for (uint32_t d = 0; in && d < op->rank; d++) {
            int64_t l = start[d] - op->off[d];
            in = l >= 0 && l < valid_extent(op, d);
            si += (size_t)(l * ost[d]);
        }
        if (in) {
            memcpy(o + i * out->esz, (const char *)op->data + si * op->esz, out->esz);
        } else {
            memset(o + i * out->esz, 0, out->esz);
        }
        for (uint32_t k = out->rank; k-- > 0;) {
            if (++c[k] < out->dims[k]) {
                break;
            }
            c[k] = 0;
        }
    }
    return CM_OK;
}

#define COMBINE_ONE(T)                                                                             \
    {                                                                                              \
        T *d = dst;                                                                                \
        T s = *(const T *)src;                                                                     \
        switch (combine) {                                                                         \
        case EX_RED_ADD:                                                                           \
            *d = (T)(*d + s);                                                                      \
            return true;                                                                           \
        case EX_RED_MUL:                                                                           \
            *d = (T)(*d * s);                                                                      \
            return true;                                                                           \
        case EX_RED_MAX:                                                                           \
            *d = s > *d ? s : *d;                                                                  \
            return true;                                                                           \
        case EX_RED_MIN:                                                                           \
            *d = s < *d ? s : *d;                                                                  \
            return true;                                                                           \
        default:                                                                                   \
            return false;                                                                          \
        }                                                                                          \
    }

/* *dst = *dst combine *src for one element (integers through the unsigned
 * type, so that sums wrap). */
static bool combine_one(void *dst, const void *src, sp_elem e, int combine)
{
    switch (e) {
    case SP_ELEM_F32:
        COMBINE_ONE(float)
    case SP_ELEM_F64:
        COMBINE_ONE(double)
    case SP_ELEM_I32:
    case SP_ELEM_UI32:
        if (combine == EX_RED_ADD) {
            *(uint32_t *)dst += *(const uint32_t *)src;
            return true;
        }
        if (e == SP_ELEM_I32) {
            COMBINE_ONE(int32_t)
        }
        COMBINE_ONE(uint32_t)
    case SP_ELEM_I64:
    case SP_ELEM_UI64:
        if (combine == EX_RED_ADD) {
            *(uint64_t *)dst += *(const uint64_t *)src;
            return true;
        }
        if (e == SP_ELEM_I64) {
            COMBINE_ONE(int64_t)
        }
        COMBINE_ONE(uint64_t)
    default:
        return false;
    }
}

cm_status ex_kern_scatter(const ex_gather_dims *g, int combine, const ex_block *ix,
                          const ex_block *upd, const ex_block *out)
{
    size_t n = 1;
    for (uint32_t k = 0; k < upd->rank; k++) {
        n *= (size_t)upd->dims[k];
    }
    int64_t ost[EX_KERN_MAX_RANK], wdim[EX_KERN_MAX_RANK], wsize[EX_KERN_MAX_RANK];
    row_major_strides(out->dims, out->rank, ost);
    uint32_t nw = 0;
    for (uint32_t d = 0; d < out->rank; d++) {
        wsize[d] = 1;
        if (index_of(g->collapsed, g->n_collapsed, d) < 0 &&
            index_of(g->obatch, g->n_obatch, d) < 0) {
            wdim[nw++] = d;
        }
    }
    if (nw != g->n_offset) {
        return CM_EINVAL;
    }
    for (uint32_t w = 0; w < nw; w++) {
        wsize[wdim[w]] = upd->gdims[g->offset_dims[w]];
    }
    int64_t c[EX_KERN_MAX_RANK] = {0}, gu[EX_KERN_MAX_RANK], start[EX_KERN_MAX_RANK];
    for (size_t i = 0; i < n; i++) {
        bool in = true;
        for (uint32_t k = 0; k < upd->rank; k++) {
            gu[k] = upd->off[k] + c[k];
            in = in && gu[k] < upd->gdims[k];
        }
        if (in &&
            !window_start(g, ix, gu, upd->rank, g->offset_dims, g->n_offset, out->rank, start)) {
            return CM_EINVAL;
        }
        for (uint32_t d = 0; in && d < out->rank; d++) {
            /* the whole window must fit in the operand, else it is skipped */
            in = start[d] >= 0 && start[d] + wsize[d] <= out->gdims[d];
        }
        for (uint32_t w = 0; in && w < nw; w++) {
            start[wdim[w]] += gu[g->offset_dims[w]];
        }
        size_t oi = 0;
        for (uint32_t d = 0; in && d < out->rank; d++) {
            int64_t l = start[d] - out->off[d];
            in = l >= 0 && l < valid_extent(out, d);
            oi += (size_t)(l * ost[d]);
        }
        if (in) {
            char *d = (char *)out->data + oi * out->esz;
            const char *s = (const char *)upd->data + i * upd->esz;
            if (combine < 0) {
                memcpy(d, s, out->esz);
            } else if (!combine_one(d, s, out->elem, combine)) {
                return CM_EINVAL;
            }
        }
        for (uint32_t k = upd->rank; k-- > 0;) {
            if (++c[k] < upd->dims[k]) {
                break;
            }
            c[k] = 0;
        }
    }
    return CM_OK;
}

/* ---- convolution -------------------------------------------------------------------------- */

cm_status ex_kern_conv(sp_elem e, const ex_conv_dims *cd, const void *in, const int64_t *idims,
                       const void *ker, const int64_t *kdims, void *out, const int64_t *odims,
                       uint32_t rank)
{
    if ((e != SP_ELEM_F32 && e != SP_ELEM_F64) || rank > EX_KERN_MAX_RANK || cd->ns + 2 != rank) {
        return CM_EINVAL;
    }
    size_t esz = sp_elem_bytes(e);
    int64_t fg = cd->fgc > 1 ? cd->fgc : 1, bg = cd->bgc > 1 ? cd->bgc : 1, T = fg * bg;
    int64_t ns = cd->ns, N = odims[cd->ob], C = kdims[cd->ki], O = kdims[cd->ko];
    if (idims[cd->ifeat] != C * fg || idims[cd->ib] != N * bg || O % T != 0 ||
        odims[cd->ofeat] != O) {
        return CM_EINVAL;
    }
    int64_t Og = O / T; /* output features of one group */
    int64_t KS = 1, P = 1;
    for (int64_t j = 0; j < ns; j++) {
        KS *= kdims[cd->ks[j]];
        P *= odims[cd->os[j]];
    }
    int64_t KC = KS * C;
    if (N * P * O == 0) {
        return CM_OK;
    }
    if (KC == 0) { /* nothing to sum */
        memset(out, 0, (size_t)(N * P * O) * esz);
        return CM_OK;
    }
    int64_t ist[EX_KERN_MAX_RANK], ost_[EX_KERN_MAX_RANK];
    row_major_strides(idims, rank, ist);
    row_major_strides(odims, rank, ost_);
    /* the kernel as [spatial..., in, out] */
    void *kp = cm_alloc((size_t)(KC * O) * esz + 8u);
    void *col = cm_alloc((size_t)(P * KC) * esz + 8u);
    void *tmp = cm_alloc((size_t)(P * Og) * esz + 8u);
    if (kp == NULL || col == NULL || tmp == NULL) {
        cm_free(kp);
        cm_free(col);
        cm_free(tmp);
        return CM_ENOMEM;
    }
    ex_amap map[EX_KERN_MAX_RANK];
    int64_t pd[EX_KERN_MAX_RANK];
    for (int64_t j = 0; j < ns; j++) {
        map[cd->ks[j]] = (ex_amap){(int32_t)j, 1, 0};
        pd[j] = kdims[cd->ks[j]];
    }
    map[cd->ki] = (ex_amap){(int32_t)ns, 1, 0};
    map[cd->ko] = (ex_amap){(int32_t)ns + 1, 1, 0};
    pd[ns] = C;
    pd[ns + 1] = O;
    ex_kern_affine(ker, kdims, rank, map, kp, pd, rank, esz);
    const char *ib = in;
    int64_t ee = (int64_t)esz;
    int64_t ext[EX_KERN_MAX_RANK], sst[EX_KERN_MAX_RANK], dstr[EX_KERN_MAX_RANK];
    for (int64_t j = 0; j < ns; j++) {
        ext[j] = odims[cd->os[j]];
        dstr[j] = ost_[cd->os[j]];
    }
    ext[ns] = Og;
    dstr[ns] = ost_[cd->ofeat];
    row_major_strides(ext, (uint32_t)ns + 1, sst);
    for (int64_t b = 0; b < N; b++) {
        for (int64_t t = 0; t < T; t++) {
            /* the input batch element and first feature this group reads */
            int64_t in_b = bg > 1 ? t * N + b : b, c0 = fg > 1 ? t * C : 0;
            /* im2col: row p (output position q), columns (kernel position r, c) */
            int64_t q[EX_KERN_MAX_RANK] = {0};
            char *cp = col;
            for (int64_t p = 0; p < P; p++) {
                int64_t r[EX_KERN_MAX_RANK] = {0};
                for (int64_t kk = 0; kk < KS; kk++) {
                    bool inside = true;
                    int64_t off = in_b * ist[cd->ib] + c0 * ist[cd->ifeat];
                    for (int64_t j = 0; j < ns && inside; j++) {
                        int64_t rr = cd->rev[j] ? kdims[cd->ks[j]] - 1 - r[j] : r[j];
                        int64_t ld = cd->ldil[j] > 1 ? cd->ldil[j] : 1;
                        /* position in the dilated input; real elements are ld apart */
                        int64_t xd = q[j] * cd->stride[j] - cd->pad_lo[j] + rr * cd->rdil[j];
                        inside = xd >= 0 && xd % ld == 0 && xd / ld < idims[cd->is[j]];
                        off += xd / ld * ist[cd->is[j]];
                    }
                    if (inside) {
                        copy_row(cp, 1, ib + off * ee, ist[cd->ifeat], C, esz);
                    } else {
                        memset(cp, 0, (size_t)C * esz);
                    }
                    cp += C * ee;
                    for (int64_t j = ns; j-- > 0;) {
                        if (++r[j] < kdims[cd->ks[j]]) {
                            break;
                        }
                        r[j] = 0;
                    }
                }
                for (int64_t j = ns; j-- > 0;) {
                    if (++q[j] < odims[cd->os[j]]) {
                        break;
                    }
                    q[j] = 0;
                }
            }
            /* this group's output features: columns [t Og, (t+1) Og) of kp */
            if (e == SP_ELEM_F32) {
                ex_blas_sgemm_ex(false, false, P, Og, KC, col, KC, (const float *)kp + t * Og, O,
                                 tmp, Og);
            } else {
                ex_blas_dgemm_ex(false, false, P, Og, KC, col, KC, (const double *)kp + t * Og, O,
                                 tmp, Og);
            }
            /* tmp [spatial..., Og] into out at batch b, features from t Og */
            copy_strided((char *)out + (b * ost_[cd->ob] + t * Og * ost_[cd->ofeat]) * ee, dstr,
                         tmp, sst, ext, (uint32_t)ns + 1, esz);
        }
    }
    cm_free(kp);
    cm_free(col);
    cm_free(tmp);
    return CM_OK;
}

/* ---- sort ---------------------------------------------------------------------------- */

/* Float bits in an order where unsigned comparison is IEEE-754 totalOrder:
 * negatives (sign set) reversed below the positives. */
static uint32_t total32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) != 0 ? ~u : (u | 0x80000000u);
}

static uint64_t total64(double f)
{
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x8000000000000000u) != 0 ? ~u : (u | 0x8000000000000000u);
}

#define THREE_WAY(T)                                                                               \
    {                                                                                              \
        T x = ((const T *)a)[i], y = ((const T *)a)[j];                                            \
        return x < y ? -1 : (x > y ? 1 : 0);                                                       \
    }

/* Compares elements i and j of a: -1, 0, 1, or 2 when unordered (a NaN in
 * an IEEE comparison). */
static int three_way(sp_elem e, bool total, const void *a, size_t i, size_t j)
{
    switch (e) {
    case SP_ELEM_F32: {
        float x = ((const float *)a)[i], y = ((const float *)a)[j];
        if (total) {
            uint32_t u = total32(x), v = total32(y);
            return u < v ? -1 : (u > v ? 1 : 0);
        }
        return x < y ? -1 : (x > y ? 1 : (x == y ? 0 : 2));
    }
    case SP_ELEM_F64: {
        double x = ((const double *)a)[i], y = ((const double *)a)[j];
        if (total) {
            uint64_t u = total64(x), v = total64(y);
            return u < v ? -1 : (u > v ? 1 : 0);
        }
        return x < y ? -1 : (x > y ? 1 : (x == y ? 0 : 2));
    }
    case SP_ELEM_BF16:
    case SP_ELEM_F16: {
        uint16_t hx = ((const uint16_t *)a)[i], hy = ((const uint16_t *)a)[j];
        if (total) { /* sign-magnitude bits, as total32 */
            uint16_t u = (hx & 0x8000u) != 0 ? (uint16_t)~hx : (uint16_t)(hx | 0x8000u);
            uint16_t v = (hy & 0x8000u) != 0 ? (uint16_t)~hy : (uint16_t)(hy | 0x8000u);
            return u < v ? -1 : (u > v ? 1 : 0);
        }
        float x = ex_half_float(hx, e == SP_ELEM_BF16), y = ex_half_float(hy, e == SP_ELEM_BF16);
        return x < y ? -1 : (x > y ? 1 : (x == y ? 0 : 2));
    }
    case SP_ELEM_I8:
        THREE_WAY(int8_t)
    case SP_ELEM_I16:
        THREE_WAY(int16_t)
    case SP_ELEM_I32:
        THREE_WAY(int32_t)
    case SP_ELEM_I64:
        THREE_WAY(int64_t)
    case SP_ELEM_I1:
    case SP_ELEM_UI8:
        THREE_WAY(uint8_t)
    case SP_ELEM_UI16:
        THREE_WAY(uint16_t)
    case SP_ELEM_UI32:
        THREE_WAY(uint32_t)
    default:
        THREE_WAY(uint64_t)
    }
}

#define SORT_RUN 16 /* insertion-sorted run before merging */

/* One slice being sorted: each key's array at the slice's first element, and
 * the distance between the slice's elements. */
typedef struct sort_slice {
    const ex_sort_key *keys;
    uint32_t n_keys;
    const sp_elem *elems;
    const char *kbase[EX_SORT_MAX_KEYS]; /* per key */
    size_t step;
} sort_slice;

/* The comparator: whether slice position p sorts before q. */
static bool sort_less(const sort_slice *s, size_t p, size_t q)
{
    for (uint32_t k = 0; k < s->n_keys; k++) {
        const ex_sort_key *key = &s->keys[k];
        int c =
            three_way(s->elems[key->operand], key->total, s->kbase[k], p * s->step, q * s->step);
        if (key->descending && c != 2) {
            c = -c;
        }
        if (c != 0) {
            return c == -1;
        }
    }
    return false;
}

/* Stable merge sort of the positions a[0..n) (tmp: n more), insertion-sorted
 * runs first. */
static void sort_positions(const sort_slice *s, size_t *a, size_t *tmp, size_t n)
{
    for (size_t lo = 0; lo < n; lo += SORT_RUN) {
        size_t hi = lo + SORT_RUN < n ? lo + SORT_RUN : n;
        for (size_t i = lo + 1; i < hi; i++) {
            size_t v = a[i], j = i;
            while (j > lo && sort_less(s, v, a[j - 1])) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = v;
        }
    }
    size_t *from = a, *to = tmp;
    for (size_t w = SORT_RUN; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) {
                /* the right run's element goes first only when strictly less */
                to[k++] = sort_less(s, from[j], from[i]) ? from[j++] : from[i++];
            }
            while (i < mid) {
                to[k++] = from[i++];
            }
            while (j < hi) {
                to[k++] = from[j++];
            }
        }
        size_t *t = from;
        from = to;
        to = t;
    }
    if (from != a) {
        memcpy(a, from, n * sizeof *a);
    }
}

static bool sortable(sp_elem e)
{
    return e == SP_ELEM_F32 || e == SP_ELEM_F64 || e == SP_ELEM_BF16 || e == SP_ELEM_F16 ||
           e == SP_ELEM_I1 || e == SP_ELEM_I8 ||
           e == SP_ELEM_I16 || e == SP_ELEM_I32 || e == SP_ELEM_I64 || e == SP_ELEM_UI8 ||
           e == SP_ELEM_UI16 || e == SP_ELEM_UI32 || e == SP_ELEM_UI64;
}

cm_status ex_kern_sort(uint32_t n_in, const sp_elem *elems, const void *const *in, void *const *out,
                       const int64_t *dims, uint32_t rank, uint32_t dim, const ex_sort_key *keys,
                       uint32_t n_keys)
{
    if (dim >= rank || n_keys > EX_SORT_MAX_KEYS) {
        return CM_EINVAL;
    }
    for (uint32_t k = 0; k < n_keys; k++) {
        if (keys[k].operand >= n_in || !sortable(elems[keys[k].operand])) {
            return CM_EINVAL;
        }
    }
    size_t outer = 1, inner = 1, n = (size_t)dims[dim];
    for (uint32_t k = 0; k < rank; k++) {
        if (k < dim) {
            outer *= (size_t)dims[k];
        } else if (k > dim) {
            inner *= (size_t)dims[k];
        }
    }
    if (outer * inner * n == 0) {
        return CM_OK;
    }
    size_t *pos = cm_alloc(2 * n * sizeof *pos);
    if (pos == NULL) {
        return CM_ENOMEM;
    }
    sort_slice sl;
    sl.keys = keys;
    sl.n_keys = n_keys;
    sl.elems = elems;
    sl.step = inner;
    for (size_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < inner; i++) {
            size_t base = o * n * inner + i;
            for (uint32_t k = 0; k < n_keys; k++) {
                uint32_t j = keys[k].operand;
                sl.kbase[k] = (const char *)in[j] + base * sp_elem_bytes(elems[j]);
            }
            for (size_t q = 0; q < n; q++) {
                pos[q] = q;
            }
            sort_positions(&sl, pos, pos + n, n);
            for (uint32_t j = 0; j < n_in; j++) {
                size_t esz = sp_elem_bytes(elems[j]);
                const char *src = (const char *)in[j] + base * esz;
                char *dst = (char *)out[j] + base * esz;
                for (size_t q = 0; q < n; q++) {
                    memcpy(dst + q * inner * esz, src + pos[q] * inner * esz, esz);
                }
            }
        }
    }
    cm_free(pos);
    return CM_OK;
}

/* ---- select_and_scatter ------------------------------------------------------------- */

/* Whether `x dir y` holds (dir EX_CMP_*) given their three_way comparison c
 * (2: unordered, where only NE holds). */
static bool cmp_holds(int dir, int c)
{
    switch (dir) {
    case EX_CMP_EQ:
        return c == 0;
    case EX_CMP_NE:
        return c != 0;
    case EX_CMP_LT:
        return c == -1;
    case EX_CMP_LE:
        return c == -1 || c == 0;
    case EX_CMP_GT:
        return c == 1;
    default:
        return c == 1 || c == 0;
    }
}

bool ex_kern_compare_total(int dir, sp_elem e, const void *a, const void *b, uint8_t *out, size_t n)
{
    if (dir < EX_CMP_EQ || dir > EX_CMP_GE ||
        (e != SP_ELEM_F32 && e != SP_ELEM_F64 && !is_half(e))) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        int c;
        if (is_half(e)) { /* sign-magnitude bits, as total32 */
            uint16_t hx = ((const uint16_t *)a)[i], hy = ((const uint16_t *)b)[i];
            uint16_t u = (hx & 0x8000u) != 0 ? (uint16_t)~hx : (uint16_t)(hx | 0x8000u);
            uint16_t v = (hy & 0x8000u) != 0 ? (uint16_t)~hy : (uint16_t)(hy | 0x8000u);
            c = u < v ? -1 : (u > v ? 1 : 0);
        } else if (e == SP_ELEM_F32) {
            uint32_t u = total32(((const float *)a)[i]), v = total32(((const float *)b)[i]);
            c = u < v ? -1 : (u > v ? 1 : 0);
        } else {
            uint64_t u = total64(((const double *)a)[i]), v = total64(((const double *)b)[i]);
            c = u < v ? -1 : (u > v ? 1 : 0);
        }
        out[i] = cmp_holds(dir, c);
    }
    return true;
}

#define SEL_SCATTER_BODY(T)                                                                        \
    {                                                                                              \
        const T *s = src;                                                                          \
        T *o = out;                                                                                \
        T iv = *(const T *)init;                                                                   \
        for (size_t i = 0; i < nout; i++)                                                          \
            o[i] = iv;                                                                             \
        int64_t c[EX_KERN_MAX_RANK] = {0};                                                         \
        for (size_t si = 0; si < nsrc; si++) {                                                     \
            int64_t w[EX_KERN_MAX_RANK] = {0};                                                     \
            bool have = false;                                                                     \
            size_t pick = 0;                                                                       \
            for (size_t j = 0; j < nwin; j++) {                                                    \
                size_t at;                                                                         \
                bool inside = window_at(c, w, stride, pad_lo, idims, ist, rank, &at);              \
                if (inside && (!have || !cmp_holds(sel, three_way(e, total, op, pick, at)))) {     \
                    pick = at;                                                                     \
                    have = true;                                                                   \
                }                                                                                  \
                for (uint32_t k = rank; k-- > 0;) {                                                \
                    if (++w[k] < win[k])                                                           \
                        break;                                                                     \
                    w[k] = 0;                                                                      \
                }                                                                                  \
            }                                                                                      \
            if (have) {                                                                            \
                T v = s[si];                                                                       \
                o[pick] = scatter == EX_RED_ADD   ? (T)(o[pick] + v)                               \
                          : scatter == EX_RED_MUL ? (T)(o[pick] * v)                               \
                          : scatter == EX_RED_MAX ? COMB_FMAX(o[pick], v)                          \
                                                  : COMB_FMIN(o[pick], v);                         \
            }                                                                                      \
            for (uint32_t k = rank; k-- > 0;) {                                                    \
                if (++c[k] < sdims[k])                                                             \
                    break;                                                                         \
                c[k] = 0;                                                                          \
            }                                                                                      \
        }                                                                                          \
        return CM_OK;                                                                              \
    }

cm_status ex_kern_select_scatter(sp_elem e, int sel, bool total, int scatter, const void *op,
                                 const int64_t *idims, uint32_t rank, const void *src,
                                 const int64_t *sdims, const int64_t *win, const int64_t *stride,
                                 const int64_t *pad_lo, const void *init, void *out)
{
    if ((e != SP_ELEM_F32 && e != SP_ELEM_F64) || rank > EX_KERN_MAX_RANK ||
        (sel != EX_CMP_GE && sel != EX_CMP_GT && sel != EX_CMP_LE && sel != EX_CMP_LT) ||
        (scatter != EX_RED_ADD && scatter != EX_RED_MUL && scatter != EX_RED_MAX &&
         scatter != EX_RED_MIN)) {
        return CM_EINVAL;
    }
    size_t nout = 1, nsrc = 1, nwin = 1;
    for (uint32_t k = 0; k < rank; k++) {
        nout *= (size_t)idims[k];
        nsrc *= (size_t)sdims[k];
        nwin *= (size_t)win[k];
    }
    int64_t ist[EX_KERN_MAX_RANK];
    row_major_strides(idims, rank, ist);
    if (nout == 0) {
        return CM_OK;
    }
    if (e == SP_ELEM_F32) {
        SEL_SCATTER_BODY(float)
    }
    SEL_SCATTER_BODY(double)
}

/* ---- the core gate ------------------------------------------------------------------------ */

void ex_gate_init(ex_gate *g, uint32_t n)
{
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->n = n;
    g->busy = 0;
}

void ex_gate_fini(ex_gate *g)
{
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

void ex_gate_enter(ex_gate *g)
{
    if (g == NULL || g->n == 0) {
        return;
    }
    pthread_mutex_lock(&g->mu);
    while (g->busy >= g->n) {
        pthread_cond_wait(&g->cv, &g->mu);
    }
    g->busy++;
    pthread_mutex_unlock(&g->mu);
}

void ex_gate_leave(ex_gate *g)
{
    if (g == NULL || g->n == 0) {
        return;
    }
    pthread_mutex_lock(&g->mu);
    g->busy--;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}
