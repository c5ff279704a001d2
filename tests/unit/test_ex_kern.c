/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_kern (the compute kernels): element-wise ops,
 * convert, compare and select per type (f32, f64, integers, i1) on odd
 * sizes; strided copies (transpose tiles, broadcast, reverse, padded
 * shards); reduce against a naive sum; dot_general on every operand layout
 * against a naive product; pad, gather, scatter, dynamic_update_slice and
 * convolution against hand-computed values or naive loops, also run by the
 * executor (their partitioned runs are in test_ex_exec.c). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "ex_exec.h"
#include "ex_kern_int.h"
#include "sp_mlir.h"

/* A deterministic pseudo-random float in [-1, 1). */
static float frand(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / (float)(1u << 23) - 1.0f;
}

/* ---- element-wise ------------------------------------------------------------------- */

static void test_ex_kern_binary_f32_matches_and_propagates_nan(void **state)
{
    (void)state;
    float a[7] = {1, -2, 3.5f, NAN, 0, 7, -1}, b[7] = {2, 2, -1, 1, NAN, 7, -3}, o[7];
    assert_true(ex_kern_binary(SP_OP_ADD, SP_ELEM_F32, a, b, o, 7));
    assert_true(o[0] == 3.0f && o[1] == 0.0f && o[2] == 2.5f && o[6] == -4.0f);
    assert_true(ex_kern_binary(SP_OP_MAXIMUM, SP_ELEM_F32, a, b, o, 7));
    assert_true(o[0] == 2.0f && o[2] == 3.5f && isnan(o[3]) && isnan(o[4]) && o[6] == -1.0f);
    assert_true(ex_kern_binary(SP_OP_MINIMUM, SP_ELEM_F32, a, b, o, 7));
    assert_true(o[0] == 1.0f && isnan(o[3]) && isnan(o[4]) && o[6] == -3.0f);
    assert_true(ex_kern_binary(SP_OP_DIVIDE, SP_ELEM_F32, a, b, o, 7));
    assert_true(o[0] == 0.5f && o[1] == -1.0f);
    assert_false(ex_kern_binary(SP_OP_AND, SP_ELEM_F32, a, b, o, 7));
}

static void test_ex_kern_binary_f64_and_ints(void **state)
{
    (void)state;
    double a[3] = {1.5, -2, 4}, b[3] = {0.5, 3, -8}, o[3];
    assert_true(ex_kern_binary(SP_OP_SUBTRACT, SP_ELEM_F64, a, b, o, 3));
    assert_true(o[0] == 1.0 && o[1] == -5.0 && o[2] == 12.0);
    int32_t ia[5] = {INT32_MAX, 7, -7, INT32_MIN, 5}, ib[5] = {1, 0, 2, -1, 3}, io[5];
    assert_true(ex_kern_binary(SP_OP_ADD, SP_ELEM_I32, ia, ib, io, 5));
    assert_int_equal(io[0], INT32_MIN); /* wraps */
    assert_true(ex_kern_binary(SP_OP_DIVIDE, SP_ELEM_I32, ia, ib, io, 5));
    assert_int_equal(io[1], 0);         /* by zero */
    assert_int_equal(io[2], -3);        /* truncates */
    assert_int_equal(io[3], INT32_MIN); /* INT_MIN / -1 */
    assert_int_equal(io[4], 1);
    assert_true(ex_kern_binary(SP_OP_XOR, SP_ELEM_I32, ia, ib, io, 5));
    assert_int_equal(io[4], 6);
    uint8_t ua[3] = {250, 3, 9}, ub[3] = {10, 5, 9}, uo[3];
    assert_true(ex_kern_binary(SP_OP_ADD, SP_ELEM_UI8, ua, ub, uo, 3));
    assert_int_equal(uo[0], 4);
    assert_true(ex_kern_binary(SP_OP_SUBTRACT, SP_ELEM_UI8, ua, ub, uo, 3));
    assert_int_equal(uo[1], 254);
    int64_t la[2] = {INT64_MIN, 3}, lb[2] = {-1, -4}, lo[2];
    assert_true(ex_kern_binary(SP_OP_MULTIPLY, SP_ELEM_I64, la, lb, lo, 2));
    assert_true(lo[0] == INT64_MIN && lo[1] == -12);
    uint8_t pa[4] = {0, 1, 0, 1}, pb[4] = {0, 0, 1, 1}, po[4];
    assert_true(ex_kern_binary(SP_OP_OR, SP_ELEM_I1, pa, pb, po, 4));
    assert_true(po[0] == 0 && po[1] == 1 && po[2] == 1 && po[3] == 1);
    assert_false(ex_kern_binary(SP_OP_ADD, SP_ELEM_I1, pa, pb, po, 4));
}

static void test_ex_kern_unary_per_type(void **state)
{
    (void)state;
    float a[5] = {0, 1, -2, 4, 0.25f}, o[5];
    assert_true(ex_kern_unary(SP_OP_EXPONENTIAL, SP_ELEM_F32, a, o, 5));
    assert_true(fabsf(o[1] - 2.7182817f) < 1e-6f && o[0] == 1.0f);
    assert_true(ex_kern_unary(SP_OP_RSQRT, SP_ELEM_F32, a + 3, o, 2));
    assert_true(o[0] == 0.5f && o[1] == 2.0f);
    assert_true(ex_kern_unary(SP_OP_LOGISTIC, SP_ELEM_F32, a, o, 1));
    assert_true(o[0] == 0.5f);
    double d[2] = {-3, 9}, dout[2];
    assert_true(ex_kern_unary(SP_OP_ABS, SP_ELEM_F64, d, dout, 2));
    assert_true(dout[0] == 3.0 && dout[1] == 9.0);
    int64_t i[3] = {INT64_MIN, -5, 6}, io[3];
    assert_true(ex_kern_unary(SP_OP_NEGATE, SP_ELEM_I64, i, io, 3));
    assert_true(io[0] == INT64_MIN && io[1] == 5 && io[2] == -6);
    assert_true(ex_kern_unary(SP_OP_ABS, SP_ELEM_I64, i, io, 3));
    assert_true(io[0] == INT64_MIN && io[1] == 5 && io[2] == 6);
    assert_false(ex_kern_unary(SP_OP_TANH, SP_ELEM_I32, i, io, 1));
    uint8_t p[3] = {0, 1, 1}, po[3];
    assert_true(ex_kern_unary(SP_OP_NOT, SP_ELEM_I1, p, po, 3));
    assert_true(po[0] == 1 && po[1] == 0 && po[2] == 0);
    int16_t s[2] = {0, 5}, so[2];
    assert_true(ex_kern_unary(SP_OP_NOT, SP_ELEM_I16, s, so, 2));
    assert_true(so[0] == -1 && so[1] == -6);
}

/* The element-wise ops added for JAX programs, on the values of StableHLO's
 * interpreter tests (interpret/NAME.mlir) and hand-computed edge cases. */
static void test_ex_kern_new_unary_ops_match_the_spec(void **state)
{
    (void)state;
    double d[5] = {-2.5, 0.4, 0.5, 0.6, 2.5}, o[5];
    assert_true(ex_kern_unary(SP_OP_ROUND_NEAREST_AFZ, SP_ELEM_F64, d, o, 5));
    assert_true(o[0] == -3.0 && o[1] == 0.0 && o[2] == 1.0 && o[3] == 1.0 && o[4] == 3.0);
    assert_true(ex_kern_unary(SP_OP_ROUND_NEAREST_EVEN, SP_ELEM_F64, d, o, 5));
    assert_true(o[0] == -2.0 && o[1] == 0.0 && o[2] == 0.0 && o[3] == 1.0 && o[4] == 2.0);
    float f[4] = {-1.5f, 1.5f, -0.0f, 27.0f}, fo[4];
    assert_true(ex_kern_unary(SP_OP_CEIL, SP_ELEM_F32, f, fo, 2));
    assert_true(fo[0] == -1.0f && fo[1] == 2.0f);
    assert_true(ex_kern_unary(SP_OP_FLOOR, SP_ELEM_F32, f, fo, 2));
    assert_true(fo[0] == -2.0f && fo[1] == 1.0f);
    assert_true(ex_kern_unary(SP_OP_CBRT, SP_ELEM_F32, f + 3, fo, 1));
    assert_true(fabsf(fo[0] - 3.0f) < 1e-6f);
    /* sign keeps NaN and the sign of zero */
    double sg[5] = {NAN, -1.0, -0.0, 0.0, 7.0};
    assert_true(ex_kern_unary(SP_OP_SIGN, SP_ELEM_F64, sg, o, 5));
    assert_true(isnan(o[0]) && o[1] == -1.0 && o[2] == 0.0 && signbit(o[2]) && o[3] == 0.0 &&
                !signbit(o[3]) && o[4] == 1.0);
    double t[2] = {0.0, 1e-10};
    assert_true(ex_kern_unary(SP_OP_COSINE, SP_ELEM_F64, t, o, 1));
    assert_true(o[0] == 1.0);
    assert_true(ex_kern_unary(SP_OP_SINE, SP_ELEM_F64, t, o, 1));
    assert_true(o[0] == 0.0);
    assert_true(ex_kern_unary(SP_OP_EXPONENTIAL_MINUS_ONE, SP_ELEM_F64, t + 1, o, 1));
    assert_true(fabs(o[0] - 1e-10) < 1e-19); /* exp(x) - 1 is off by 8e-18 */
    assert_true(ex_kern_unary(SP_OP_LOG_PLUS_ONE, SP_ELEM_F64, t + 1, o, 1));
    assert_true(fabs(o[0] - 1e-10) < 1e-19);
    int64_t i[4] = {0, 1, 2, 127}, io[4];
    assert_true(ex_kern_unary(SP_OP_POPCNT, SP_ELEM_I64, i, io, 4));
    assert_true(io[0] == 0 && io[1] == 1 && io[2] == 1 && io[3] == 7);
    int8_t b[3] = {-1, 0, INT8_MIN}, bo[3];
    assert_true(ex_kern_unary(SP_OP_POPCNT, SP_ELEM_I8, b, bo, 3));
    assert_true(bo[0] == 8 && bo[1] == 0 && bo[2] == 1);
    assert_true(ex_kern_unary(SP_OP_SIGN, SP_ELEM_I8, b, bo, 3));
    assert_true(bo[0] == -1 && bo[1] == 0 && bo[2] == -1);
    uint16_t u[2] = {0, 9}, uo[2];
    assert_true(ex_kern_unary(SP_OP_SIGN, SP_ELEM_UI16, u, uo, 2));
    assert_true(uo[0] == 0 && uo[1] == 1);
    assert_false(ex_kern_unary(SP_OP_COSINE, SP_ELEM_I32, i, io, 1));
    assert_false(ex_kern_unary(SP_OP_POPCNT, SP_ELEM_F32, f, fo, 1));
    float fin[4] = {1.0f, INFINITY, -INFINITY, NAN};
    uint8_t fl[4];
    assert_true(ex_kern_is_finite(SP_ELEM_F32, fin, fl, 4));
    assert_true(fl[0] == 1 && fl[1] == 0 && fl[2] == 0 && fl[3] == 0);
    assert_false(ex_kern_is_finite(SP_ELEM_I32, i, fl, 1));
}

static void test_ex_kern_new_binary_ops_match_the_spec(void **state)
{
    (void)state;
    /* remainder: the dividend's sign; integers and floats */
    int64_t a[4] = {17, -17, 17, -17}, b[4] = {3, 3, -3, -3}, o[6];
    assert_true(ex_kern_binary(SP_OP_REMAINDER, SP_ELEM_I64, a, b, o, 4));
    assert_true(o[0] == 2 && o[1] == -2 && o[2] == 2 && o[3] == -2);
    int32_t ia[3] = {INT32_MIN, 5, -7}, ib[3] = {-1, 0, 2}, io[3];
    assert_true(ex_kern_binary(SP_OP_REMAINDER, SP_ELEM_I32, ia, ib, io, 3));
    assert_true(io[0] == 0 && io[1] == 5 && io[2] == -1);
    double fa[4] = {17.1, -17.1, 17.1, -17.1}, fb[4] = {3.0, 3.0, -3.0, -3.0}, fo[6];
    assert_true(ex_kern_binary(SP_OP_REMAINDER, SP_ELEM_F64, fa, fb, fo, 4));
    assert_true(fo[0] == 2.1000000000000014 && fo[1] == -2.1000000000000014 &&
                fo[2] == 2.1000000000000014 && fo[3] == -2.1000000000000014);
    /* power: integer exponentiation, negative exponents (interpret/power.mlir) */
    int64_t pa[6] = {-1, -1, -3, 1, -3, 0}, pb[6] = {1, 0, -3, -3, 3, 2};
    assert_true(ex_kern_binary(SP_OP_POWER, SP_ELEM_I64, pa, pb, o, 6));
    assert_true(o[0] == -1 && o[1] == 1 && o[2] == 0 && o[3] == 1 && o[4] == -27 && o[5] == 0);
    int64_t na[2] = {-1, 2}, nb[2] = {-3, 62};
    assert_true(ex_kern_binary(SP_OP_POWER, SP_ELEM_I64, na, nb, o, 2));
    assert_true(o[0] == -1 && o[1] == (int64_t)1 << 62);
    uint8_t ua[2] = {5, 2}, ub[2] = {5, 9}, uo[2];
    assert_true(ex_kern_binary(SP_OP_POWER, SP_ELEM_UI8, ua, ub, uo, 2));
    assert_true(uo[0] == (uint8_t)3125 && uo[1] == 0); /* wraps */
    double xa[2] = {-2.0, 3.0}, xb[2] = {2.0, -1.0};
    assert_true(ex_kern_binary(SP_OP_POWER, SP_ELEM_F64, xa, xb, fo, 2));
    assert_true(fo[0] == 4.0 && fo[1] == 1.0 / 3.0);
    assert_true(ex_kern_binary(SP_OP_ATAN2, SP_ELEM_F64, xa, xb, fo, 1));
    assert_true(fabs(fo[0] - atan2(-2.0, 2.0)) == 0.0);
    /* shifts: by the spec's examples, and by >= the bit width */
    int64_t sa[3] = {-1, 0, 1}, sb[3] = {1, 2, 3};
    assert_true(ex_kern_binary(SP_OP_SHIFT_LEFT, SP_ELEM_I64, sa, sb, o, 3));
    assert_true(o[0] == -2 && o[1] == 0 && o[2] == 8);
    int64_t ra[3] = {-1, 0, 8};
    assert_true(ex_kern_binary(SP_OP_SHIFT_RIGHT_LOGICAL, SP_ELEM_I64, ra, sb, o, 3));
    assert_true(o[0] == INT64_MAX && o[1] == 0 && o[2] == 1);
    assert_true(ex_kern_binary(SP_OP_SHIFT_RIGHT_ARITHMETIC, SP_ELEM_I64, ra, sb, o, 3));
    assert_true(o[0] == -1 && o[1] == 0 && o[2] == 1);
    int8_t ba[4] = {-128, 64, -3, 1}, bb[4] = {8, 9, -1, 7}, bo[4];
    assert_true(ex_kern_binary(SP_OP_SHIFT_LEFT, SP_ELEM_I8, ba, bb, bo, 4));
    assert_true(bo[0] == 0 && bo[1] == 0 && bo[2] == 0 && bo[3] == -128);
    assert_true(ex_kern_binary(SP_OP_SHIFT_RIGHT_LOGICAL, SP_ELEM_I8, ba, bb, bo, 4));
    assert_true(bo[0] == 0 && bo[1] == 0 && bo[2] == 0 && bo[3] == 0);
    assert_true(ex_kern_binary(SP_OP_SHIFT_RIGHT_ARITHMETIC, SP_ELEM_I8, ba, bb, bo, 4));
    assert_true(bo[0] == -1 && bo[1] == 0 && bo[2] == -1 && bo[3] == 0);
    uint16_t wa[2] = {0x8000, 0xFFFF}, wb[2] = {15, 16}, wo[2];
    assert_true(ex_kern_binary(SP_OP_SHIFT_RIGHT_ARITHMETIC, SP_ELEM_UI16, wa, wb, wo, 2));
    assert_true(wo[0] == 0xFFFF && wo[1] == 0xFFFF); /* the bits read as signed */
    assert_true(ex_kern_binary(SP_OP_SHIFT_LEFT, SP_ELEM_UI16, wa + 1, wb, wo, 1));
    assert_true(wo[0] == 0x8000);
    assert_false(ex_kern_binary(SP_OP_SHIFT_LEFT, SP_ELEM_F32, fa, fb, fo, 1));
    assert_false(ex_kern_binary(SP_OP_ATAN2, SP_ELEM_I64, a, b, o, 1));
}

static void test_ex_kern_clamp_scalars_and_nan(void **state)
{
    (void)state;
    int64_t lo[3] = {1, 5, -5}, x[3] = {2, 3, -1}, hi[3] = {3, 7, -3}, o[3];
    assert_true(ex_kern_clamp(SP_ELEM_I64, lo, false, x, hi, false, o, 3));
    assert_true(o[0] == 2 && o[1] == 5 && o[2] == -3);
    int64_t zero = 0, one = 1;
    assert_true(ex_kern_clamp(SP_ELEM_I64, &zero, true, x, &one, true, o, 3));
    assert_true(o[0] == 1 && o[1] == 1 && o[2] == 0);
    float flo = -0.5f, fhi = 0.75f, fx[4] = {-2.0f, 0.25f, 9.0f, NAN}, fo[4];
    assert_true(ex_kern_clamp(SP_ELEM_F32, &flo, true, fx, &fhi, true, fo, 4));
    assert_true(fo[0] == -0.5f && fo[1] == 0.25f && fo[2] == 0.75f && isnan(fo[3]));
}

/* bf16 and f16: rounding to nearest even (ties, overflow, subnormals, NaN),
 * exact widening, one rounding from f64, and kernels through f32 blocks. */
static void test_ex_kern_half_types_round_to_nearest_even(void **state)
{
    (void)state;
    float f[6] = {1.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 0.1f, -INFINITY, NAN};
    uint16_t h[6];
    ex_kern_f32_to_half(SP_ELEM_BF16, f, h, 6);
    assert_true(h[0] == 0x3F80 && h[1] == 0x3F80 && h[2] == 0x3F82 && h[3] == 0x3DCD &&
                h[4] == 0xFF80 && (h[5] & 0x7F80) == 0x7F80 && (h[5] & 0x7F) != 0);
    float g[7] = {65504.0f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-14f, 0.1f};
    uint16_t q[7];
    ex_kern_f32_to_half(SP_ELEM_F16, g, q, 7);
    assert_true(q[0] == 0x7BFF && q[1] == 0x7C00 && q[2] == 0x0001 && q[3] == 0x0000 &&
                q[4] == 0x0001 && q[5] == 0x0400 && q[6] == 0x2E66);
    uint16_t w[5] = {0x0001, 0x7C00, 0xFC00, 0x3C00, 0x8000};
    float back[5];
    ex_kern_half_to_f32(SP_ELEM_F16, w, back, 5);
    assert_true(back[0] == 0x1p-24f && isinf(back[1]) && back[1] > 0 && isinf(back[2]) &&
                back[2] < 0 && back[3] == 1.0f && back[4] == 0.0f && signbit(back[4]));
    /* f64 to bf16 rounds once: 1 + 2^-8 + 2^-40 is above the tie (through
     * f32 it would become the tie and round down to even) */
    double d[2] = {1.0 + 0x1p-8 + 0x1p-40, -1e300};
    assert_true(ex_kern_convert(SP_ELEM_F64, d, SP_ELEM_BF16, h, 2));
    assert_true(h[0] == 0x3F81 && h[1] == 0xFF80);
    int32_t iv[2] = {257, -3};
    assert_true(ex_kern_convert(SP_ELEM_I32, iv, SP_ELEM_BF16, h, 2));
    assert_true(h[0] == 0x4380 && h[1] == 0xC040); /* 257 ties to 256 */
    uint16_t hv[2] = {0x4380, 0xC040};
    int64_t io[2];
    assert_true(ex_kern_convert(SP_ELEM_BF16, hv, SP_ELEM_I64, io, 2));
    assert_true(io[0] == 256 && io[1] == -3);
    assert_true(ex_kern_convert(SP_ELEM_BF16, hv, SP_ELEM_F16, q, 2));
    assert_true(q[0] == 0x5C00 && q[1] == 0xC200);
    /* arithmetic in f32, rounded back: 1 + 2^-8 ties to 1 in bf16 */
    uint16_t one[300], eps[300], out[300];
    for (int i = 0; i < 300; i++) {
        one[i] = 0x3F80;
        eps[i] = 0x3B80; /* 2^-8 */
    }
    assert_true(ex_kern_binary(SP_OP_ADD, SP_ELEM_BF16, one, eps, out, 300));
    assert_true(out[0] == 0x3F80 && out[299] == 0x3F80);
    assert_true(ex_kern_binary(SP_OP_ADD, SP_ELEM_BF16, eps, eps, out, 300));
    assert_true(out[0] == 0x3C00 && out[299] == 0x3C00);
    assert_true(ex_kern_unary(SP_OP_NEGATE, SP_ELEM_F16, w, out, 5));
    assert_true(out[0] == 0x8001 && out[1] == 0xFC00 && out[3] == 0xBC00);
    uint8_t c[300];
    assert_true(ex_kern_compare(EX_CMP_LT, SP_ELEM_BF16, eps, one, c, 300));
    assert_true(c[0] == 1 && c[299] == 1);
    assert_true(ex_kern_is_finite(SP_ELEM_F16, w, c, 5));
    assert_true(c[0] == 1 && c[1] == 0 && c[2] == 0 && c[3] == 1);
    assert_false(ex_kern_binary(SP_OP_SHIFT_LEFT, SP_ELEM_BF16, one, eps, out, 1));
    uint16_t ta[3] = {0x8000, 0x7FC0, 0xFFC0}, tb[3] = {0x0000, 0x7F80, 0xFF80};
    assert_true(ex_kern_compare_total(EX_CMP_LT, SP_ELEM_BF16, ta, tb, c, 3));
    assert_true(c[0] == 1 && c[1] == 0 && c[2] == 1); /* -0 < +0, +NaN > +Inf, -NaN < -Inf */
}

static void test_ex_kern_convert_saturates_and_truncates(void **state)
{
    (void)state;
    float f[6] = {-2.7f, 2.7f, 1e20f, -1e20f, NAN, 0.0f};
    int32_t i[6];
    assert_true(ex_kern_convert(SP_ELEM_F32, f, SP_ELEM_I32, i, 6));
    assert_true(i[0] == -2 && i[1] == 2 && i[2] == INT32_MAX && i[3] == INT32_MIN && i[4] == 0);
    uint8_t u[6];
    assert_true(ex_kern_convert(SP_ELEM_F32, f, SP_ELEM_UI8, u, 6));
    assert_true(u[0] == 0 && u[1] == 2 && u[2] == 255);
    uint8_t b[6];
    assert_true(ex_kern_convert(SP_ELEM_F32, f, SP_ELEM_I1, b, 6));
    assert_true(b[0] == 1 && b[4] == 1 && b[5] == 0);
    int32_t src[3] = {-1, 300, 7};
    double d[3];
    assert_true(ex_kern_convert(SP_ELEM_I32, src, SP_ELEM_F64, d, 3));
    assert_true(d[0] == -1.0 && d[1] == 300.0);
    int8_t s8[3];
    assert_true(ex_kern_convert(SP_ELEM_I32, src, SP_ELEM_I8, s8, 3));
    assert_true(s8[0] == -1 && s8[1] == 44 && s8[2] == 7); /* wraps */
    float back[3];
    assert_true(ex_kern_convert(SP_ELEM_F64, d, SP_ELEM_F32, back, 3));
    assert_true(back[1] == 300.0f);
}

static void test_ex_kern_compare_and_select_odd_sizes(void **state)
{
    (void)state;
    enum { N = 13 };
    float a[N], b[N], o[N];
    double da[N], db[N];
    int16_t ia[N], ib[N];
    uint8_t c[N];
    uint32_t s = 1;
    for (int i = 0; i < N; i++) {
        a[i] = frand(&s);
        b[i] = i % 3 == 0 ? a[i] : frand(&s);
        da[i] = a[i];
        db[i] = b[i];
        ia[i] = (int16_t)(i - 6);
        ib[i] = (int16_t)(6 - i);
    }
    static const int dirs[6] = {EX_CMP_EQ, EX_CMP_NE, EX_CMP_LT, EX_CMP_LE, EX_CMP_GT, EX_CMP_GE};
    for (int d = 0; d < 6; d++) {
        assert_true(ex_kern_compare(dirs[d], SP_ELEM_F32, a, b, c, N));
        for (int i = 0; i < N; i++) {
            bool want = d == 0   ? a[i] == b[i]
                        : d == 1 ? a[i] != b[i]
                        : d == 2 ? a[i] < b[i]
                        : d == 3 ? a[i] <= b[i]
                        : d == 4 ? a[i] > b[i]
                                 : a[i] >= b[i];
            assert_int_equal(c[i], want);
        }
        assert_true(ex_kern_compare(dirs[d], SP_ELEM_F64, da, db, c, N));
        for (int i = 0; i < N; i++) {
            bool want = d == 0   ? da[i] == db[i]
                        : d == 1 ? da[i] != db[i]
                        : d == 2 ? da[i] < db[i]
                        : d == 3 ? da[i] <= db[i]
                        : d == 4 ? da[i] > db[i]
                                 : da[i] >= db[i];
            assert_int_equal(c[i], want);
        }
        assert_true(ex_kern_compare(dirs[d], SP_ELEM_I16, ia, ib, c, N));
        for (int i = 0; i < N; i++) {
            bool want = d == 0   ? ia[i] == ib[i]
                        : d == 1 ? ia[i] != ib[i]
                        : d == 2 ? ia[i] < ib[i]
                        : d == 3 ? ia[i] <= ib[i]
                        : d == 4 ? ia[i] > ib[i]
                                 : ia[i] >= ib[i];
            assert_int_equal(c[i], want);
        }
    }
    assert_true(ex_kern_compare(EX_CMP_GT, SP_ELEM_F32, a, b, c, N));
    ex_kern_select(c, false, a, b, o, N, sizeof(float));
    for (int i = 0; i < N; i++) {
        assert_true(o[i] == (a[i] > b[i] ? a[i] : b[i]));
    }
    uint8_t one = 1;
    ex_kern_select(&one, true, a, b, o, N, sizeof(float));
    assert_memory_equal(o, a, sizeof a);
    double dd[N];
    ex_kern_select(c, false, da, db, dd, N, sizeof(double));
    for (int i = 0; i < N; i++) {
        assert_true(dd[i] == (c[i] ? da[i] : db[i]));
    }
}

/* ---- strided copies ----------------------------------------------------------------- */

/* A transpose of an odd-sized 3-d array through the tiled path, per element size. */
static void check_transpose(size_t esz)
{
    int64_t sd[3] = {37, 5, 45}, dd[3] = {45, 37, 5};
    size_t n = 37 * 5 * 45;
    uint8_t *src = cm_alloc(n * esz), *dst = cm_alloc(n * esz);
    assert_non_null(src);
    assert_non_null(dst);
    for (size_t i = 0; i < n * esz; i++) {
        src[i] = (uint8_t)(i * 7 + i / 13);
    }
    /* dst[c0, c1, c2] = src[c1, c2, c0] */
    ex_amap map[3] = {{1, 1, 0}, {2, 1, 0}, {0, 1, 0}};
    ex_kern_affine(src, sd, 3, map, dst, dd, 3, esz);
    for (int64_t a = 0; a < 45; a++) {
        for (int64_t b = 0; b < 37; b++) {
            for (int64_t c = 0; c < 5; c++) {
                size_t di = (size_t)((a * 37 + b) * 5 + c), si = (size_t)((b * 5 + c) * 45 + a);
                assert_memory_equal(dst + di * esz, src + si * esz, esz);
            }
        }
    }
    cm_free(src);
    cm_free(dst);
}

static void test_ex_kern_affine_transposes_every_element_size(void **state)
{
    (void)state;
    check_transpose(1);
    check_transpose(2);
    check_transpose(4);
    check_transpose(8);
}

static void test_ex_kern_affine_broadcast_reverse_and_padding(void **state)
{
    (void)state;
    float src[6] = {1, 2, 3, 4, 5, 6}; /* 2 x 3 */
    int64_t sd[2] = {2, 3};
    /* broadcast: dst[i, j, k] = src[j, k] for i < 2 */
    int64_t bd[3] = {2, 2, 3};
    float b[12];
    ex_amap bm[2] = {{1, 1, 0}, {2, 1, 0}};
    ex_kern_affine(src, sd, 2, bm, b, bd, 3, sizeof(float));
    assert_memory_equal(b, src, sizeof src);
    assert_memory_equal(b + 6, src, sizeof src);
    /* reverse dim 1 and read rows from offset 1 (row 2 is outside: zero) */
    int64_t rd[2] = {2, 3};
    float r[6];
    ex_amap rm[2] = {{0, 1, 1}, {1, -1, 2}};
    ex_kern_affine(src, sd, 2, rm, r, rd, 2, sizeof(float));
    float want[6] = {6, 5, 4, 0, 0, 0};
    assert_memory_equal(r, want, sizeof want);
    /* a scalar broadcast to 5 elements */
    int64_t one[1] = {1}, five[1] = {5};
    int32_t s = 42, o[5];
    ex_amap sm[1] = {{-1, 0, 0}};
    ex_kern_affine(&s, one, 1, sm, o, five, 1, sizeof s);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(o[i], 42);
    }
}

/* ---- reduce --------------------------------------------------------------------------- */

static void test_ex_kern_reduce_every_pattern_f32(void **state)
{
    (void)state;
    int64_t dims[4] = {3, 5, 1, 19};
    float in[3 * 5 * 19];
    uint32_t s = 3;
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        in[i] = frand(&s);
    }
    float init = 0.5f;
    for (int mask = 0; mask < 16; mask++) {
        bool red[4];
        int64_t od[4];
        uint32_t orank = 0;
        for (int k = 0; k < 4; k++) {
            red[k] = (mask >> k) & 1;
            if (!red[k]) {
                od[orank++] = dims[k];
            }
        }
        size_t nout = 1;
        for (uint32_t k = 0; k < orank; k++) {
            nout *= (size_t)od[k];
        }
        float out[3 * 5 * 19];
        double want[3 * 5 * 19];
        for (size_t i = 0; i < nout; i++) {
            want[i] = init;
        }
        for (int64_t a = 0; a < 3; a++) {
            for (int64_t b = 0; b < 5; b++) {
                for (int64_t d = 0; d < 19; d++) {
                    int64_t c[4] = {a, b, 0, d};
                    size_t oi = 0;
                    for (int k = 0; k < 4; k++) {
                        if (!red[k]) {
                            oi = oi * (size_t)dims[k] + (size_t)c[k];
                        }
                    }
                    want[oi] += (double)in[(a * 5 + b) * 19 + d];
                }
            }
        }
        assert_int_equal(ex_kern_reduce(EX_RED_ADD, SP_ELEM_F32, in, dims, 4, red, &init, out),
                         CM_OK);
        for (size_t i = 0; i < nout; i++) {
            assert_true(fabs((double)out[i] - want[i]) < 1e-5);
        }
    }
}

static void test_ex_kern_reduce_max_min_and_ints(void **state)
{
    (void)state;
    int64_t dims[2] = {2, 17};
    bool inner[2] = {false, true}, outer[2] = {true, false};
    float f[34];
    for (int i = 0; i < 34; i++) {
        f[i] = (float)(i % 17) - (float)(i / 17);
    }
    f[20] = NAN;
    float ninf = -INFINITY, fo[17];
    assert_int_equal(ex_kern_reduce(EX_RED_MAX, SP_ELEM_F32, f, dims, 2, inner, &ninf, fo), CM_OK);
    assert_true(fo[0] == 16.0f && isnan(fo[1]));
    assert_int_equal(ex_kern_reduce(EX_RED_MAX, SP_ELEM_F32, f, dims, 2, outer, &ninf, fo), CM_OK);
    assert_true(fo[0] == 0.0f && fo[16] == 16.0f && isnan(fo[3]));
    double d[34], dinf = INFINITY, dout[2];
    for (int i = 0; i < 34; i++) {
        d[i] = (double)(i * 7 % 11);
    }
    assert_int_equal(ex_kern_reduce(EX_RED_MIN, SP_ELEM_F64, d, dims, 2, inner, &dinf, dout),
                     CM_OK);
    assert_true(dout[0] == 0.0 && dout[1] == 0.0);
    int32_t iv[34], izero = 0, iout[2];
    for (int i = 0; i < 34; i++) {
        iv[i] = i == 3 ? INT32_MAX : 1;
    }
    assert_int_equal(ex_kern_reduce(EX_RED_ADD, SP_ELEM_I32, iv, dims, 2, inner, &izero, iout),
                     CM_OK);
    assert_int_equal(iout[0], INT32_MIN + 15); /* wraps */
    assert_int_equal(iout[1], 17);
    uint8_t pv[34], pfalse = 0, pout[17];
    memset(pv, 0, sizeof pv);
    pv[18] = 1;
    assert_int_equal(ex_kern_reduce(EX_RED_OR, SP_ELEM_I1, pv, dims, 2, outer, &pfalse, pout),
                     CM_OK);
    assert_true(pout[1] == 1 && pout[0] == 0 && pout[2] == 0);
    assert_int_equal(ex_kern_reduce(EX_RED_ADD, SP_ELEM_I1, pv, dims, 2, outer, &pfalse, pout),
                     CM_EINVAL);
}

/* ---- dot_general ---------------------------------------------------------------------- */

/* The dims of a rank-r operand that are neither batch nor contracting. */
static uint32_t free_dims(uint32_t r, const int64_t *b, uint32_t nb, const int64_t *c, uint32_t nc,
                          int64_t *out)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < r; k++) {
        bool u = false;
        for (uint32_t i = 0; i < nb; i++) {
            u = u || b[i] == k;
        }
        for (uint32_t i = 0; i < nc; i++) {
            u = u || c[i] == k;
        }
        if (!u) {
            out[n++] = k;
        }
    }
    return n;
}

/* out = naive dot_general of l and r (dims and dimension numbers as ex_kern_dot). */
static void naive_dot(const double *l, const int64_t *ld, uint32_t lr, const double *r,
                      const int64_t *rd, uint32_t rr, const int64_t *lb, const int64_t *rb,
                      uint32_t nb, const int64_t *lc, const int64_t *rc, uint32_t nc, double *out,
                      size_t nout)
{
    int64_t lf[8], rf[8];
    uint32_t nlf = free_dims(lr, lb, nb, lc, nc, lf), nrf = free_dims(rr, rb, nb, rc, nc, rf);
    /* walk output coordinates [batch, lfree, rfree] and contraction */
    int64_t odims[16], cd[8];
    uint32_t orank = 0;
    for (uint32_t i = 0; i < nb; i++) {
        odims[orank++] = ld[lb[i]];
    }
    for (uint32_t i = 0; i < nlf; i++) {
        odims[orank++] = ld[lf[i]];
    }
    for (uint32_t i = 0; i < nrf; i++) {
        odims[orank++] = rd[rf[i]];
    }
    for (uint32_t i = 0; i < nc; i++) {
        cd[i] = ld[lc[i]];
    }
    int64_t oc[16] = {0};
    for (size_t o = 0; o < nout; o++) {
        double acc = 0;
        int64_t cc[8] = {0};
        for (;;) {
            int64_t lco[8], rco[8];
            for (uint32_t i = 0; i < nb; i++) {
                lco[lb[i]] = oc[i];
                rco[rb[i]] = oc[i];
            }
            for (uint32_t i = 0; i < nlf; i++) {
                lco[lf[i]] = oc[nb + i];
            }
            for (uint32_t i = 0; i < nrf; i++) {
                rco[rf[i]] = oc[nb + nlf + i];
            }
            for (uint32_t i = 0; i < nc; i++) {
                lco[lc[i]] = cc[i];
                rco[rc[i]] = cc[i];
            }
            size_t li = 0, ri = 0;
            for (uint32_t k = 0; k < lr; k++) {
                li = li * (size_t)ld[k] + (size_t)lco[k];
            }
            for (uint32_t k = 0; k < rr; k++) {
                ri = ri * (size_t)rd[k] + (size_t)rco[k];
            }
            acc += l[li] * r[ri];
            uint32_t k = nc;
            while (k-- > 0) {
                if (++cc[k] < cd[k]) {
                    break;
                }
                cc[k] = 0;
            }
            if (k == UINT32_MAX) {
                break;
            }
        }
        out[o] = acc;
        for (uint32_t k = orank; k-- > 0;) {
            if (++oc[k] < odims[k]) {
                break;
            }
            oc[k] = 0;
        }
    }
}

typedef struct dot_case {
    uint32_t lr, rr, nb, nc;
    int64_t ld[4], rd[4], lb[2], rb[2], lc[2], rc[2];
} dot_case;

static void test_ex_kern_dot_every_layout_matches_naive(void **state)
{
    (void)state;
    static const dot_case cases[] = {
        /* plain [M,K] x [K,N] */
        {2, 2, 0, 1, {5, 7}, {7, 3}, {0}, {0}, {1}, {0}},
        /* both transposed: [K,M] x [N,K] */
        {2, 2, 0, 1, {7, 5}, {3, 7}, {0}, {0}, {0}, {1}},
        /* contraction over two dims in swapped order (lhs packs) */
        {3, 3, 0, 2, {3, 4, 5}, {5, 4, 2}, {0}, {0}, {2, 1}, {0, 1}},
        /* contraction over [0, 1] x [0, 1] (the transformer's weight grads) */
        {3, 3, 0, 2, {2, 3, 5}, {2, 3, 4}, {0}, {0}, {0, 1}, {0, 1}},
        /* batch dims in the middle, strided (attention: [b, s, h, d]) */
        {4, 4, 2, 1, {2, 3, 2, 5}, {2, 4, 2, 5}, {0, 2}, {0, 2}, {3}, {3}},
        /* batch then a contraction on the rhs's middle dim */
        {4, 4, 2, 1, {2, 2, 3, 4}, {2, 4, 2, 5}, {0, 1}, {0, 2}, {3}, {1}},
        /* a vector times a matrix, and a column result */
        {1, 2, 0, 1, {6}, {6, 4}, {0}, {0}, {0}, {0}},
        {2, 1, 0, 1, {3, 6}, {6}, {0}, {0}, {1}, {0}},
        /* no contraction: an outer product */
        {1, 1, 0, 0, {4}, {3}, {0}, {0}, {0}, {0}},
    };
    uint32_t s = 11;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const dot_case *c = &cases[ci];
        size_t nl = 1, nr = 1, nout = 1;
        for (uint32_t k = 0; k < c->lr; k++) {
            nl *= (size_t)c->ld[k];
        }
        for (uint32_t k = 0; k < c->rr; k++) {
            nr *= (size_t)c->rd[k];
        }
        nout = nl * nr;
        for (uint32_t i = 0; i < c->nb; i++) {
            nout /= (size_t)c->ld[c->lb[i]];
        }
        for (uint32_t i = 0; i < c->nc; i++) {
            nout /= (size_t)(c->ld[c->lc[i]] * c->ld[c->lc[i]]);
        }
        double *l = cm_alloc(nl * 8), *r = cm_alloc(nr * 8), *want = cm_alloc(nout * 8),
               *got = cm_alloc(nout * 8);
        float *lf = cm_alloc(nl * 4), *rf = cm_alloc(nr * 4), *gotf = cm_alloc(nout * 4);
        for (size_t i = 0; i < nl; i++) {
            lf[i] = frand(&s);
            l[i] = lf[i];
        }
        for (size_t i = 0; i < nr; i++) {
            rf[i] = frand(&s);
            r[i] = rf[i];
        }
        naive_dot(l, c->ld, c->lr, r, c->rd, c->rr, c->lb, c->rb, c->nb, c->lc, c->rc, c->nc, want,
                  nout);
        assert_int_equal(ex_kern_dot(SP_ELEM_F64, l, c->ld, c->lr, r, c->rd, c->rr, c->lb, c->rb,
                                     c->nb, c->lc, c->rc, c->nc, got),
                         CM_OK);
        assert_int_equal(ex_kern_dot(SP_ELEM_F32, lf, c->ld, c->lr, rf, c->rd, c->rr, c->lb, c->rb,
                                     c->nb, c->lc, c->rc, c->nc, gotf),
                         CM_OK);
        for (size_t i = 0; i < nout; i++) {
            if (fabs(got[i] - want[i]) > 1e-12 || fabs((double)gotf[i] - want[i]) > 1e-5) {
                fail_msg("case %zu element %zu: want %g, f64 %g, f32 %g", ci, i, want[i], got[i],
                         (double)gotf[i]);
            }
        }
        cm_free(l);
        cm_free(r);
        cm_free(want);
        cm_free(got);
        cm_free(lf);
        cm_free(rf);
        cm_free(gotf);
    }
    int32_t bad = 0;
    int64_t one[1] = {1};
    assert_int_equal(
        ex_kern_dot(SP_ELEM_I32, &bad, one, 1, &bad, one, 1, NULL, NULL, 0, one, one, 0, &bad),
        CM_EINVAL);
}

/* ---- pad, place, gather, scatter, convolution ------------------------------------------ */

static void test_ex_kern_pad_negative_low_and_interior(void **state)
{
    (void)state;
    /* 1-d: [1, 2, 3], low -1, interior 2, high 1: [p, p, 2, p, p, 3, p] */
    int32_t src[3] = {1, 2, 3}, dst[7], pv = -9;
    int64_t sd[1] = {3}, dd[1] = {7}, zero[1] = {0}, lo[1] = {-1}, in[1] = {2};
    ex_kern_pad(src, sd, sd, zero, dst, dd, zero, 1, lo, in, &pv, sizeof pv);
    int32_t want[7] = {-9, -9, 2, -9, -9, 3, -9};
    assert_memory_equal(dst, want, sizeof want);
    /* the block [3, 6) of the same result, from a source block holding [1, 3) */
    int32_t part[3];
    int64_t pd[1] = {3}, poff[1] = {3}, sblk[1] = {2}, soff[1] = {1};
    ex_kern_pad(src + 1, sblk, sblk, soff, part, pd, poff, 1, lo, in, &pv, sizeof pv);
    assert_memory_equal(part, want + 3, sizeof part);
    /* 2-d f64 with interior on dim 1 */
    double s2[4] = {1, 2, 3, 4}, d2[2 * 5], p2 = 0.5;
    int64_t s2d[2] = {2, 2}, d2d[2] = {2, 5}, z2[2] = {0, 0}, lo2[2] = {0, 1}, in2[2] = {0, 1};
    ex_kern_pad(s2, s2d, s2d, z2, d2, d2d, z2, 2, lo2, in2, &p2, sizeof p2);
    double w2[10] = {0.5, 1, 0.5, 2, 0.5, 0.5, 3, 0.5, 4, 0.5};
    assert_memory_equal(d2, w2, sizeof w2);
}

static void test_ex_kern_gather_embedding_rows_with_clamping(void **state)
{
    (void)state;
    /* operand 5 x 3, indices [4, -2, 9] (clamped to 4, 0, 4) */
    float op[15];
    for (int i = 0; i < 15; i++) {
        op[i] = (float)i;
    }
    int32_t ix[3] = {4, -2, 9};
    float out[9];
    int64_t od[2] = {5, 3}, id[2] = {3, 1}, rd[2] = {3, 3}, z[2] = {0, 0};
    static const int64_t offset_dims[1] = {1}, collapsed[1] = {0}, start_map[1] = {0},
                         ss[2] = {1, 3};
    ex_gather_dims g = {offset_dims, collapsed, NULL, NULL, start_map, 1, 1, 0, 0, 1, 1, ss};
    ex_block ob = {op, SP_ELEM_F32, 2, 4, od, od, z};
    ex_block ib = {ix, SP_ELEM_I32, 2, 4, id, id, z};
    ex_block rb = {out, SP_ELEM_F32, 2, 4, rd, rd, z};
    assert_int_equal(ex_kern_gather(&g, &ob, &ib, &rb), CM_OK);
    float want[9] = {12, 13, 14, 0, 1, 2, 12, 13, 14};
    assert_memory_equal(out, want, sizeof want);
    /* the operand's block of rows [2, 5) only: rows 0, 1 read as zero */
    int64_t half[2] = {3, 3}, hoff[2] = {2, 0};
    ex_block hb = {op + 6, SP_ELEM_F32, 2, 4, half, od, hoff};
    assert_int_equal(ex_kern_gather(&g, &hb, &ib, &rb), CM_OK);
    float want2[9] = {12, 13, 14, 0, 0, 0, 12, 13, 14};
    assert_memory_equal(out, want2, sizeof want2);
    /* an indices block that does not cover the result block */
    int64_t ihalf[2] = {1, 1};
    ex_block ib2 = {ix, SP_ELEM_I32, 2, 4, ihalf, id, z};
    assert_int_equal(ex_kern_gather(&g, &ob, &ib2, &rb), CM_EINVAL);
}

static void test_ex_kern_scatter_add_replace_and_skip(void **state)
{
    (void)state;
    /* operand 4 x 2 (i32), three updates of one row: rows 1, 1 (twice), 7 (skipped) */
    int32_t out[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    int64_t ix[3] = {1, 1, 7};
    int32_t upd[6] = {10, 20, 30, 40, 50, 60};
    int64_t od[2] = {4, 2}, id[2] = {3, 1}, ud[2] = {3, 2}, z[2] = {0, 0};
    static const int64_t window[1] = {1}, inserted[1] = {0}, to_op[1] = {0};
    ex_gather_dims g = {window, inserted, NULL, NULL, to_op, 1, 1, 0, 0, 1, 1, NULL};
    ex_block ob = {out, SP_ELEM_I32, 2, 4, od, od, z};
    ex_block ib = {ix, SP_ELEM_I64, 2, 8, id, id, z};
    ex_block ub = {upd, SP_ELEM_I32, 2, 4, ud, ud, z};
    assert_int_equal(ex_kern_scatter(&g, EX_RED_ADD, &ib, &ub, &ob), CM_OK);
    int32_t want[8] = {0, 0, 41, 61, 2, 2, 3, 3};
    assert_memory_equal(out, want, sizeof want);
    double dout[8] = {0}, dupd[6] = {1, 2, 3, 4, 5, 6};
    ex_block dob = {dout, SP_ELEM_F64, 2, 8, od, od, z};
    ex_block dub = {dupd, SP_ELEM_F64, 2, 8, ud, ud, z};
    int64_t ix2[3] = {0, 3, 2};
    ex_block ib2 = {ix2, SP_ELEM_I64, 2, 8, id, id, z};
    assert_int_equal(ex_kern_scatter(&g, -1, &ib2, &dub, &dob), CM_OK);
    double dwant[8] = {1, 2, 0, 0, 5, 6, 3, 4};
    assert_memory_equal(dout, dwant, sizeof dwant);
}

static void test_ex_kern_place_clips_to_the_block(void **state)
{
    (void)state;
    float dst[12];
    for (int i = 0; i < 12; i++) {
        dst[i] = (float)i;
    }
    float src[4] = {-1, -2, -3, -4};
    int64_t dd[2] = {3, 4}, sd[2] = {2, 2}, z[2] = {0, 0}, start[2] = {2, 1};
    ex_block d = {dst, SP_ELEM_F32, 2, 4, dd, dd, z};
    ex_block s = {src, SP_ELEM_F32, 2, 4, sd, sd, z};
    ex_kern_place(&s, start, &d);
    float want[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, -1, -2, 11};
    assert_memory_equal(dst, want, sizeof want);
}

/* A naive NHWC / HWIO convolution. */
/* A 2-D convolution's window and groups (0 counts as 1 in ldil, fgc, bgc). */
typedef struct conv_case {
    int64_t stride[2], pad[2], pad_hi[2], dil[2], ldil[2];
    bool rev[2];
    int64_t fgc, bgc;
} conv_case;

static int64_t one_if_0(int64_t v)
{
    return v > 0 ? v : 1;
}

/* out[b, y, x, o] of an NHWC x HWIO -> NHWC convolution, from the spec's
 * definition: window position w of the padded, dilated input pairs with
 * kernel element w (K - 1 - w when reversed); group g reads its slice of
 * the input features (feature groups) or of the batch (batch groups). */
static double naive_conv(const double *in, const int64_t *id, const double *k, const int64_t *kd,
                         int64_t b, int64_t y, int64_t x, int64_t o, const conv_case *cc)
{
    int64_t fg = one_if_0(cc->fgc), bg = one_if_0(cc->bgc), g = o / (kd[3] / (fg * bg));
    int64_t n = bg > 1 ? g * (id[0] / bg) + b : b, c0 = fg > 1 ? g * kd[2] : 0;
    int64_t at[2] = {y, x};
    double acc = 0;
    for (int64_t wy = 0; wy < kd[0]; wy++) {
        for (int64_t wx = 0; wx < kd[1]; wx++) {
            int64_t w[2] = {wy, wx}, src[2];
            bool real = true;
            for (int d = 0; d < 2; d++) {
                int64_t ld = one_if_0(cc->ldil[d]);
                int64_t pos = at[d] * cc->stride[d] + w[d] * cc->dil[d] - cc->pad[d];
                real = real && pos >= 0 && pos % ld == 0 && pos / ld < id[1 + d];
                src[d] = pos / ld;
            }
            if (!real) {
                continue;
            }
            int64_t ky = cc->rev[0] ? kd[0] - 1 - wy : wy, kx = cc->rev[1] ? kd[1] - 1 - wx : wx;
            for (int64_t c = 0; c < kd[2]; c++) {
                acc += in[((n * id[1] + src[0]) * id[2] + src[1]) * id[3] + c0 + c] *
                       k[((ky * kd[1] + kx) * kd[2] + c) * kd[3] + o];
            }
        }
    }
    return acc;
}

/* Runs ex_kern_conv (NHWC, f64 and f32) on random data of dims id x kd
 * under cc and checks every output element against naive_conv. */
static void check_conv_case(const int64_t *id, const int64_t *kd, const conv_case *cc)
{
    int64_t od[4] = {id[0] / one_if_0(cc->bgc), 0, 0, kd[3]};
    for (int d = 0; d < 2; d++) {
        int64_t in = (id[1 + d] - 1) * one_if_0(cc->ldil[d]) + 1;
        int64_t span = (kd[d] - 1) * cc->dil[d] + 1;
        od[1 + d] = (in + cc->pad[d] + cc->pad_hi[d] - span) / cc->stride[d] + 1;
    }
    size_t ni = (size_t)(id[0] * id[1] * id[2] * id[3]),
           nk = (size_t)(kd[0] * kd[1] * kd[2] * kd[3]),
           no = (size_t)(od[0] * od[1] * od[2] * od[3]);
    double *in = malloc(ni * 8), *k = malloc(nk * 8), *out = malloc(no * 8);
    float *inf = malloc(ni * 4), *kf = malloc(nk * 4), *outf = malloc(no * 4);
    uint32_t s = 9;
    for (size_t i = 0; i < ni; i++) {
        inf[i] = frand(&s);
        in[i] = inf[i];
    }
    for (size_t i = 0; i < nk; i++) {
        kf[i] = frand(&s);
        k[i] = kf[i];
    }
    ex_conv_dims cd;
    memset(&cd, 0, sizeof cd);
    cd.ns = 2;
    cd.ifeat = cd.ko = cd.ofeat = 3;
    cd.ki = 2;
    for (int j = 0; j < 2; j++) {
        cd.is[j] = cd.os[j] = j + 1;
        cd.ks[j] = j;
        cd.stride[j] = cc->stride[j];
        cd.pad_lo[j] = cc->pad[j];
        cd.rdil[j] = cc->dil[j];
        cd.ldil[j] = cc->ldil[j];
        cd.rev[j] = cc->rev[j];
    }
    cd.fgc = cc->fgc;
    cd.bgc = cc->bgc;
    assert_int_equal(ex_kern_conv(SP_ELEM_F64, &cd, in, id, k, kd, out, od, 4), CM_OK);
    assert_int_equal(ex_kern_conv(SP_ELEM_F32, &cd, inf, id, kf, kd, outf, od, 4), CM_OK);
    for (int64_t b = 0; b < od[0]; b++) {
        for (int64_t y = 0; y < od[1]; y++) {
            for (int64_t x = 0; x < od[2]; x++) {
                for (int64_t o = 0; o < od[3]; o++) {
                    double want = naive_conv(in, id, k, kd, b, y, x, o, cc);
                    size_t at = (size_t)(((b * od[1] + y) * od[2] + x) * od[3] + o);
                    assert_true(fabs(out[at] - want) < 1e-12);
                    assert_true(fabs((double)outf[at] - want) < 1e-5);
                }
            }
        }
    }
    free(in);
    free(k);
    free(out);
    free(inf);
    free(kf);
    free(outf);
}

static void test_ex_kern_conv_nhwc_and_nchw_match_naive(void **state)
{
    (void)state;
    int64_t id[4] = {2, 7, 6, 3}, kd[4] = {3, 2, 3, 5}, stride[2] = {2, 1}, pad[2] = {1, 0},
            dil[2] = {1, 2};
    /* out spatial: (7 + 1 + 1 - 3) / 2 + 1 = 4; (6 + 0 + 0 - 3) / 1 + 1 = 4 */
    int64_t od[4] = {2, 4, 4, 5};
    double in[2 * 7 * 6 * 3], k[3 * 2 * 3 * 5], out[2 * 4 * 4 * 5];
    uint32_t s = 5;
    for (size_t i = 0; i < sizeof in / 8; i++) {
        in[i] = frand(&s);
    }
    for (size_t i = 0; i < sizeof k / 8; i++) {
        k[i] = frand(&s);
    }
    conv_case cc = {{2, 1}, {1, 0}, {1, 0}, {1, 2}, {1, 1}, {false, false}, 1, 1};
    ex_conv_dims cd;
    memset(&cd, 0, sizeof cd);
    cd.ns = 2;
    cd.ib = 0;
    cd.ifeat = 3;
    cd.is[0] = 1;
    cd.is[1] = 2;
    cd.ks[0] = 0;
    cd.ks[1] = 1;
    cd.ki = 2;
    cd.ko = 3;
    cd.ob = 0;
    cd.ofeat = 3;
    cd.os[0] = 1;
    cd.os[1] = 2;
    for (int j = 0; j < 2; j++) {
        cd.stride[j] = stride[j];
        cd.pad_lo[j] = pad[j];
        cd.rdil[j] = dil[j];
    }
    assert_int_equal(ex_kern_conv(SP_ELEM_F64, &cd, in, id, k, kd, out, od, 4), CM_OK);
    for (int64_t b = 0; b < 2; b++) {
        for (int64_t y = 0; y < 4; y++) {
            for (int64_t x = 0; x < 4; x++) {
                for (int64_t o = 0; o < 5; o++) {
                    double want = naive_conv(in, id, k, kd, b, y, x, o, &cc);
                    assert_true(fabs(out[((b * 4 + y) * 4 + x) * 5 + o] - want) < 1e-12);
                }
            }
        }
    }
    /* the same in NCHW / OIHW / NCHW, f32 */
    float inc[2 * 3 * 7 * 6], kc[5 * 3 * 3 * 2], oc[2 * 5 * 4 * 4];
    for (int64_t b = 0; b < 2; b++) {
        for (int64_t c = 0; c < 3; c++) {
            for (int64_t y = 0; y < 7; y++) {
                for (int64_t x = 0; x < 6; x++) {
                    inc[((b * 3 + c) * 7 + y) * 6 + x] = (float)in[((b * 7 + y) * 6 + x) * 3 + c];
                }
            }
        }
    }
    for (int64_t o = 0; o < 5; o++) {
        for (int64_t c = 0; c < 3; c++) {
            for (int64_t y = 0; y < 3; y++) {
                for (int64_t x = 0; x < 2; x++) {
                    kc[((o * 3 + c) * 3 + y) * 2 + x] = (float)k[((y * 2 + x) * 3 + c) * 5 + o];
                }
            }
        }
    }
    int64_t idc[4] = {2, 3, 7, 6}, kdc[4] = {5, 3, 3, 2}, odc[4] = {2, 5, 4, 4};
    cd.ifeat = 1;
    cd.is[0] = 2;
    cd.is[1] = 3;
    cd.ko = 0;
    cd.ki = 1;
    cd.ks[0] = 2;
    cd.ks[1] = 3;
    cd.ofeat = 1;
    cd.os[0] = 2;
    cd.os[1] = 3;
    assert_int_equal(ex_kern_conv(SP_ELEM_F32, &cd, inc, idc, kc, kdc, oc, odc, 4), CM_OK);
    for (int64_t b = 0; b < 2; b++) {
        for (int64_t o = 0; o < 5; o++) {
            for (int64_t y = 0; y < 4; y++) {
                for (int64_t x = 0; x < 4; x++) {
                    double want = out[((b * 4 + y) * 4 + x) * 5 + o];
                    assert_true(fabs((double)oc[((b * 5 + o) * 4 + y) * 4 + x] - want) < 1e-5);
                }
            }
        }
    }
}

/* Depthwise and grouped convolutions, batch groups (a weight gradient),
 * lhs dilation with reversal (a transposed convolution / the input gradient
 * of a strided one), against the spec's definition. */
static void test_ex_kern_conv_groups_dilation_reversal_match_naive(void **state)
{
    (void)state;
    /* depthwise: 4 features, 4 groups, 2 outputs per group; stride 2, padding */
    int64_t id1[4] = {2, 7, 6, 4}, kd1[4] = {3, 3, 1, 8};
    conv_case dw = {{2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {false, false}, 4, 1};
    check_conv_case(id1, kd1, &dw);
    /* 2 groups of 2 features, 3 outputs each; rhs dilation, one dim reversed */
    int64_t id2[4] = {1, 6, 7, 4}, kd2[4] = {2, 3, 2, 6};
    conv_case grp = {{1, 2}, {0, 2}, {1, 0}, {2, 1}, {1, 1}, {false, true}, 2, 1};
    check_conv_case(id2, kd2, &grp);
    /* batch groups: 4 batch elements in 2 groups, 2 outputs each */
    int64_t id3[4] = {4, 5, 5, 3}, kd3[4] = {2, 2, 3, 4};
    conv_case bgrp = {{1, 1}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, {false, false}, 1, 2};
    check_conv_case(id3, kd3, &bgrp);
    /* lhs dilation 2 x 3, both dims reversed, padding k - 1 on both sides */
    int64_t id4[4] = {2, 4, 3, 3}, kd4[4] = {3, 2, 3, 2};
    conv_case tr = {{1, 1}, {2, 1}, {2, 1}, {1, 1}, {2, 3}, {true, true}, 1, 1};
    check_conv_case(id4, kd4, &tr);
    /* by hand, 1-D as N=1 x H=1: input [1, 2, 3] dilated by 2 is [1, 0, 2, 0, 3];
     * kernel [1, 10] gives [1, 20, 2, 30], reversed [10, 2, 20, 3] */
    float in[3] = {1, 2, 3}, k[2] = {1, 10}, out[4];
    int64_t id[4] = {1, 1, 3, 1}, kd[4] = {1, 2, 1, 1}, od[4] = {1, 1, 4, 1};
    ex_conv_dims cd;
    memset(&cd, 0, sizeof cd);
    cd.ns = 2;
    cd.ifeat = cd.ko = cd.ofeat = 3;
    cd.ki = 2;
    cd.is[0] = cd.os[0] = 1;
    cd.is[1] = cd.os[1] = 2;
    cd.ks[1] = 1;
    cd.stride[0] = cd.stride[1] = cd.rdil[0] = cd.rdil[1] = 1;
    cd.ldil[1] = 2;
    assert_int_equal(ex_kern_conv(SP_ELEM_F32, &cd, in, id, k, kd, out, od, 4), CM_OK);
    float want[4] = {1, 20, 2, 30};
    assert_memory_equal(out, want, sizeof want);
    cd.rev[1] = true;
    assert_int_equal(ex_kern_conv(SP_ELEM_F32, &cd, in, id, k, kd, out, od, 4), CM_OK);
    float rwant[4] = {10, 2, 20, 3};
    assert_memory_equal(out, rwant, sizeof rwant);
    /* depthwise by hand: features (1, 2) and (3, 4) at two positions, kernel
     * (5, 7): each output feature scales its own input feature */
    float din[4] = {1, 2, 3, 4}, dk[2] = {5, 7}, dout[4];
    int64_t did[4] = {1, 1, 2, 2}, dkd[4] = {1, 1, 1, 2}, dod[4] = {1, 1, 2, 2};
    cd.ldil[1] = 1;
    cd.rev[1] = false;
    cd.fgc = 2;
    assert_int_equal(ex_kern_conv(SP_ELEM_F32, &cd, din, did, dk, dkd, dout, dod, 4), CM_OK);
    float dwant[4] = {5, 14, 15, 28};
    assert_memory_equal(dout, dwant, sizeof dwant);
    /* batch groups by hand: batch elements 2 and 3, kernel (10, 100) */
    float bin[2] = {2, 3}, bk[2] = {10, 100}, bout[2];
    int64_t bid[4] = {2, 1, 1, 1}, bkd[4] = {1, 1, 1, 2}, bod[4] = {1, 1, 1, 2};
    cd.fgc = 1;
    cd.bgc = 2;
    assert_int_equal(ex_kern_conv(SP_ELEM_F32, &cd, bin, bid, bk, bkd, bout, bod, 4), CM_OK);
    assert_true(bout[0] == 20 && bout[1] == 300);
    /* features that the groups do not divide */
    int64_t bad_od[4] = {2, 1, 1, 2};
    assert_int_equal(ex_kern_conv(SP_ELEM_F32, &cd, bin, bid, bk, bkd, bout, bad_od, 4), CM_EINVAL);
}

static void test_ex_gate_limits_holders(void **state)
{
    (void)state;
    ex_gate g;
    ex_gate_init(&g, 2);
    ex_gate_enter(&g);
    ex_gate_enter(&g);
    assert_int_equal(g.busy, 2);
    ex_gate_leave(&g);
    ex_gate_enter(&g);
    ex_gate_leave(&g);
    ex_gate_leave(&g);
    assert_int_equal(g.busy, 0);
    ex_gate_fini(&g);
    ex_gate_enter(NULL); /* no gate: nothing to do */
    ex_gate_leave(NULL);
    assert_true(ex_kern_cores() >= 1);
}

static void test_ex_kern_reduce_window_max_and_sum_pools(void **state)
{
    (void)state;
    /* 1 x 5 f32, window 2, stride 2, padding (1, 0): windows [-, 0], [1, 2], [3, 4] */
    float in[5] = {3, -1, 4, 1, -5}, ninf = -INFINITY, out[3];
    int64_t id[2] = {1, 5}, od[2] = {1, 3}, win[2] = {1, 2}, st[2] = {1, 2}, lo[2] = {0, 1};
    assert_int_equal(
        ex_kern_reduce_window(EX_RED_MAX, SP_ELEM_F32, in, id, 2, win, st, lo, &ninf, out, od),
        CM_OK);
    float want[3] = {3, 4, 1};
    assert_memory_equal(out, want, sizeof want);
    double din[5] = {1, 2, 3, 4, 5}, zero = 0, dout[3];
    assert_int_equal(
        ex_kern_reduce_window(EX_RED_ADD, SP_ELEM_F64, din, id, 2, win, st, lo, &zero, dout, od),
        CM_OK);
    double dwant[3] = {1, 5, 9};
    assert_memory_equal(dout, dwant, sizeof dwant);
    int32_t iin[5] = {0}, iz = 0, iout[3];
    assert_int_equal(
        ex_kern_reduce_window(EX_RED_ADD, SP_ELEM_I32, iin, id, 2, win, st, lo, &iz, iout, od),
        CM_EINVAL);
}

/* ---- integer dot_general -------------------------------------------------------------- */

/* Wrap-around in the result type, operands of different widths and
 * signedness, against hand-computed values. */
static void test_ex_kern_dot_int_wraps_in_the_result_type(void **state)
{
    (void)state;
    int64_t d12[2] = {1, 2}, d21[2] = {2, 1}, c1[1] = {1}, c0[1] = {0};
    int32_t a[2] = {INT32_MAX, 2}, b[2] = {2, 1}, o32;
    /* INT32_MAX * 2 + 2 = 2^32: 0 in i32 */
    assert_int_equal(ex_kern_dot_int(SP_ELEM_I32, a, d12, 2, SP_ELEM_I32, b, d21, 2, NULL, NULL, 0,
                                     c1, c0, 1, SP_ELEM_I32, &o32),
                     CM_OK);
    assert_int_equal(o32, 0);
    uint8_t ua[2] = {200, 100}, ub[2] = {2, 1}, o8;
    /* 400 + 100 = 500 = 244 mod 256 */
    assert_int_equal(ex_kern_dot_int(SP_ELEM_UI8, ua, d12, 2, SP_ELEM_UI8, ub, d21, 2, NULL, NULL,
                                     0, c1, c0, 1, SP_ELEM_UI8, &o8),
                     CM_OK);
    assert_int_equal(o8, 244);
    int8_t sa[2] = {127, -128}, sb[2] = {127, -128};
    int32_t wide;
    int8_t narrow;
    /* i8 x i8 -> i32: 16129 + 16384 exactly; -> i8: 32513 mod 256 = 1 */
    assert_int_equal(ex_kern_dot_int(SP_ELEM_I8, sa, d12, 2, SP_ELEM_I8, sb, d21, 2, NULL, NULL, 0,
                                     c1, c0, 1, SP_ELEM_I32, &wide),
                     CM_OK);
    assert_int_equal(wide, 32513);
    assert_int_equal(ex_kern_dot_int(SP_ELEM_I8, sa, d12, 2, SP_ELEM_I8, sb, d21, 2, NULL, NULL, 0,
                                     c1, c0, 1, SP_ELEM_I8, &narrow),
                     CM_OK);
    assert_int_equal(narrow, 1);
    int64_t la[2] = {INT64_MAX, 0}, lb[2] = {2, 5}, o64;
    assert_int_equal(ex_kern_dot_int(SP_ELEM_I64, la, d12, 2, SP_ELEM_I64, lb, d21, 2, NULL, NULL,
                                     0, c1, c0, 1, SP_ELEM_I64, &o64),
                     CM_OK);
    assert_true(o64 == -2);
    /* ui16 65535 is zero-extended, i8 -1 sign-extended: -65535 - 3 */
    uint16_t wa[2] = {65535, 3};
    int8_t wb[2] = {-1, -1};
    assert_int_equal(ex_kern_dot_int(SP_ELEM_UI16, wa, d12, 2, SP_ELEM_I8, wb, d21, 2, NULL, NULL,
                                     0, c1, c0, 1, SP_ELEM_I64, &o64),
                     CM_OK);
    assert_true(o64 == -65538);
    float f[2] = {1, 2};
    assert_int_equal(ex_kern_dot_int(SP_ELEM_F32, f, d12, 2, SP_ELEM_I32, b, d21, 2, NULL, NULL, 0,
                                     c1, c0, 1, SP_ELEM_I32, &o32),
                     CM_EINVAL);
}

/* Batch and contracting dims in unusual places (lhs [c, b, m], rhs [b, n,
 * c]) and an empty contraction, against a naive loop. */
static void test_ex_kern_dot_int_batched_layout_matches_naive(void **state)
{
    (void)state;
    int16_t l[3 * 2 * 4], r[2 * 5 * 3];
    uint32_t seed = 5;
    for (size_t i = 0; i < 24; i++) {
        l[i] = (int16_t)(frand(&seed) * 30000.0f);
    }
    for (size_t i = 0; i < 30; i++) {
        r[i] = (int16_t)(frand(&seed) * 30000.0f);
    }
    int64_t ld[3] = {3, 2, 4}, rd[3] = {2, 5, 3}, lb[1] = {1}, rb[1] = {0}, lc[1] = {0},
            rc[1] = {2};
    int32_t out[2 * 4 * 5];
    assert_int_equal(ex_kern_dot_int(SP_ELEM_I16, l, ld, 3, SP_ELEM_I16, r, rd, 3, lb, rb, 1, lc,
                                     rc, 1, SP_ELEM_I32, out),
                     CM_OK);
    for (int b = 0; b < 2; b++) {
        for (int m = 0; m < 4; m++) {
            for (int n = 0; n < 5; n++) {
                int64_t sum = 0;
                for (int c = 0; c < 3; c++) {
                    sum += (int64_t)l[(c * 2 + b) * 4 + m] * r[(b * 5 + n) * 3 + c];
                }
                assert_int_equal(out[(b * 4 + m) * 5 + n], (int32_t)(uint32_t)(uint64_t)sum);
            }
        }
    }
    /* contracting over a zero-sized dim gives zeros */
    int64_t ez[2] = {2, 0}, ze[2] = {0, 3}, c1[1] = {1};
    uint32_t zo[6] = {9, 9, 9, 9, 9, 9}, zwant[6] = {0};
    assert_int_equal(ex_kern_dot_int(SP_ELEM_UI32, l, ez, 2, SP_ELEM_UI32, r, ze, 2, NULL, NULL, 0,
                                     c1, lc, 1, SP_ELEM_UI32, zo),
                     CM_OK);
    assert_memory_equal(zo, zwant, sizeof zwant);
}

/* ---- sort and select_and_scatter ---------------------------------------------------- */

/* One key on operand 0 and an i32 payload: equal keys keep their order, both
 * ways. */
static void test_ex_kern_sort_is_stable_with_equal_keys(void **state)
{
    (void)state;
    float k[6] = {3, 1, 2, 1, 3, 0}, ko[6];
    int32_t v[6] = {0, 1, 2, 3, 4, 5}, vo[6];
    sp_elem el[2] = {SP_ELEM_F32, SP_ELEM_I32};
    const void *in[2] = {k, v};
    void *out[2] = {ko, vo};
    int64_t dims[1] = {6};
    ex_sort_key asc = {0, false, false}, desc = {0, true, true};
    assert_int_equal(ex_kern_sort(2, el, in, out, dims, 1, 0, &asc, 1), CM_OK);
    float kwant[6] = {0, 1, 1, 2, 3, 3};
    int32_t vwant[6] = {5, 1, 3, 2, 0, 4};
    assert_memory_equal(ko, kwant, sizeof kwant);
    assert_memory_equal(vo, vwant, sizeof vwant);
    assert_int_equal(ex_kern_sort(2, el, in, out, dims, 1, 0, &desc, 1), CM_OK);
    float kdesc[6] = {3, 3, 2, 1, 1, 0};
    int32_t vdesc[6] = {0, 4, 2, 1, 3, 5};
    assert_memory_equal(ko, kdesc, sizeof kdesc);
    assert_memory_equal(vo, vdesc, sizeof vdesc);
}

/* TOTALORDER: -NaN < -inf < -0 < +0 < 1 < inf < NaN; FLOAT: -0 == +0 (stable). */
static void test_ex_kern_sort_total_order_nans_and_zeros(void **state)
{
    (void)state;
    float k[7] = {NAN, -0.0f, 1, -NAN, 0.0f, -INFINITY, INFINITY}, ko[7];
    sp_elem el[1] = {SP_ELEM_F32};
    const void *in[1] = {k};
    void *out[1] = {ko};
    int64_t dims[1] = {7};
    ex_sort_key tot = {0, false, true};
    assert_int_equal(ex_kern_sort(1, el, in, out, dims, 1, 0, &tot, 1), CM_OK);
    assert_true(isnan(ko[0]) && signbit(ko[0]));
    assert_true(ko[1] == -INFINITY);
    assert_true(ko[2] == 0.0f && signbit(ko[2]));
    assert_true(ko[3] == 0.0f && !signbit(ko[3]));
    assert_true(ko[4] == 1.0f && ko[5] == INFINITY);
    assert_true(isnan(ko[6]) && !signbit(ko[6]));
    /* the same in f64, descending */
    double d[4] = {-NAN, 0.0, -0.0, NAN}, dout[4];
    sp_elem el64[1] = {SP_ELEM_F64};
    const void *din[1] = {d};
    void *dout_[1] = {dout};
    int64_t d4[1] = {4};
    ex_sort_key totd = {0, true, true};
    assert_int_equal(ex_kern_sort(1, el64, din, dout_, d4, 1, 0, &totd, 1), CM_OK);
    assert_true(isnan(dout[0]) && !signbit(dout[0]));
    assert_true(dout[1] == 0.0 && !signbit(dout[1]) && signbit(dout[2]));
    assert_true(isnan(dout[3]) && signbit(dout[3]));
    /* FLOAT: +0 and -0 are equal, so they keep their order */
    float z[3] = {0.0f, -0.0f, -1.0f}, zo[3];
    const void *zin[1] = {z};
    void *zout[1] = {zo};
    int64_t d3[1] = {3};
    ex_sort_key flt = {0, false, false};
    assert_int_equal(ex_kern_sort(1, el, zin, zout, d3, 1, 0, &flt, 1), CM_OK);
    assert_true(zo[0] == -1.0f && !signbit(zo[1]) && signbit(zo[2]));
    assert_int_equal(ex_kern_sort(1, el, zin, zout, d3, 1, 0, &tot, 1), CM_OK);
    assert_true(zo[0] == -1.0f && signbit(zo[1]) && !signbit(zo[2]));
}

/* Two keys (i32 ascending, then ui8 descending) along dim 0 of a 3 x 2
 * array: each column is one slice. */
static void test_ex_kern_sort_two_keys_along_dim_0(void **state)
{
    (void)state;
    int32_t a[6] = {2, 9, 1, 8, 2, 7}, ao[6];
    uint8_t b[6] = {5, 1, 6, 2, 7, 3}, bo[6];
    sp_elem el[2] = {SP_ELEM_I32, SP_ELEM_UI8};
    const void *in[2] = {a, b};
    void *out[2] = {ao, bo};
    int64_t dims[2] = {3, 2};
    ex_sort_key keys[2] = {{0, false, false}, {1, true, false}};
    assert_int_equal(ex_kern_sort(2, el, in, out, dims, 2, 0, keys, 2), CM_OK);
    int32_t awant[6] = {1, 7, 2, 8, 2, 9};
    uint8_t bwant[6] = {6, 3, 7, 2, 5, 1};
    assert_memory_equal(ao, awant, sizeof awant);
    assert_memory_equal(bo, bwant, sizeof bwant);
    /* unsigned 64-bit values above INT64_MAX, along dim 1 */
    uint64_t u[3] = {UINT64_MAX, 0, (uint64_t)1 << 63}, uo[3];
    sp_elem ue[1] = {SP_ELEM_UI64};
    const void *uin[1] = {u};
    void *uout[1] = {uo};
    int64_t ud[2] = {1, 3};
    assert_int_equal(ex_kern_sort(1, ue, uin, uout, ud, 2, 1, keys, 1), CM_OK);
    assert_true(uo[0] == 0 && uo[1] == (uint64_t)1 << 63 && uo[2] == UINT64_MAX);
    /* no kernel: a complex key, a dim past the rank */
    sp_elem bf[1] = {SP_ELEM_C64};
    assert_int_equal(ex_kern_sort(1, bf, uin, uout, ud, 2, 1, keys, 1), CM_EINVAL);
    assert_int_equal(ex_kern_sort(1, ue, uin, uout, ud, 2, 2, keys, 1), CM_EINVAL);
}

typedef struct keyed {
    double k;
    int32_t i;
} keyed;

static int keyed_cmp(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    if (x->k != y->k) {
        return x->k < y->k ? -1 : 1;
    }
    return x->i < y->i ? -1 : (x->i > y->i);
}

/* 1000 keys with many repeats (merge passes past the insertion runs) against
 * qsort ordered by (key, original index), i.e. a stable sort. */
static void test_ex_kern_sort_long_slices_match_naive(void **state)
{
    (void)state;
    enum { N = 1000 };
    double *k = malloc(sizeof(double) * N), *ko = malloc(sizeof(double) * N);
    int32_t *v = malloc(sizeof(int32_t) * N), *vo = malloc(sizeof(int32_t) * N);
    keyed *want = malloc(sizeof(keyed) * N);
    uint32_t seed = 11;
    for (int32_t i = 0; i < N; i++) {
        k[i] = (double)(int)(frand(&seed) * 7.0f);
        v[i] = i;
        want[i] = (keyed){k[i], i};
    }
    qsort(want, N, sizeof *want, keyed_cmp);
    sp_elem el[2] = {SP_ELEM_F64, SP_ELEM_I32};
    const void *in[2] = {k, v};
    void *out[2] = {ko, vo};
    int64_t dims[1] = {N};
    ex_sort_key key = {0, false, false};
    assert_int_equal(ex_kern_sort(2, el, in, out, dims, 1, 0, &key, 1), CM_OK);
    for (int32_t i = 0; i < N; i++) {
        assert_true(ko[i] == want[i].k);
        assert_int_equal(vo[i], want[i].i);
    }
    free(k);
    free(ko);
    free(v);
    free(vo);
    free(want);
}

/* The spec's example (in f64): window 3 x 1, strides 2 x 1, one row of high
 * padding: overlapping windows add up at row 2. */
static void test_ex_kern_select_scatter_spec_example(void **state)
{
    (void)state;
    double op[8] = {1, 5, 2, 5, 3, 6, 4, 4}, src[4] = {5, 6, 7, 8}, zero = 0, out[8];
    int64_t id[2] = {4, 2}, sd[2] = {2, 2}, win[2] = {3, 1}, st[2] = {2, 1}, lo[2] = {0, 0};
    assert_int_equal(ex_kern_select_scatter(SP_ELEM_F64, EX_CMP_GE, false, EX_RED_ADD, op, id, 2,
                                            src, sd, win, st, lo, &zero, out),
                     CM_OK);
    double want[8] = {0, 0, 0, 0, 5, 14, 7, 0};
    assert_memory_equal(out, want, sizeof want);
}

/* Ties (GE keeps the first, GT takes the last), NaN (FLOAT: a NaN loses to
 * whatever follows it; TOTALORDER: it is the largest), a window wholly in the
 * padding (its source value is dropped), and the types without a kernel. */
static void test_ex_kern_select_scatter_ties_nans_and_padding(void **state)
{
    (void)state;
    float op[4] = {2, 2, 1, 2}, src[3] = {1, 10, 100}, zero = 0, out[4];
    int64_t id[1] = {4}, sd[1] = {3}, win[1] = {2}, st[1] = {1}, lo[1] = {0};
    assert_int_equal(ex_kern_select_scatter(SP_ELEM_F32, EX_CMP_GE, false, EX_RED_ADD, op, id, 1,
                                            src, sd, win, st, lo, &zero, out),
                     CM_OK);
    float ge[4] = {1, 10, 0, 100};
    assert_memory_equal(out, ge, sizeof ge);
    assert_int_equal(ex_kern_select_scatter(SP_ELEM_F32, EX_CMP_GT, false, EX_RED_ADD, op, id, 1,
                                            src, sd, win, st, lo, &zero, out),
                     CM_OK);
    float gt[4] = {0, 11, 0, 100};
    assert_memory_equal(out, gt, sizeof gt);
    float nan_op[3] = {1, NAN, 3}, five = 5;
    int64_t id3[1] = {3}, sd1[1] = {1}, win3[1] = {3};
    assert_int_equal(ex_kern_select_scatter(SP_ELEM_F32, EX_CMP_GE, false, EX_RED_ADD, nan_op, id3,
                                            1, &five, sd1, win3, st, lo, &zero, out),
                     CM_OK);
    assert_true(out[0] == 0 && out[1] == 0 && out[2] == 5);
    assert_int_equal(ex_kern_select_scatter(SP_ELEM_F32, EX_CMP_GE, true, EX_RED_ADD, nan_op, id3,
                                            1, &five, sd1, win3, st, lo, &zero, out),
                     CM_OK);
    assert_true(out[0] == 0 && out[1] == 5 && out[2] == 0);
    /* padding 1 low: window 0 sees only padding; init -1, scatter max */
    double dop[2] = {1, 2}, dsrc[3] = {7, 8, 9}, minus = -1, dout[2];
    int64_t id2[1] = {2}, sd3[1] = {3}, w1[1] = {1}, lo1[1] = {1};
    assert_int_equal(ex_kern_select_scatter(SP_ELEM_F64, EX_CMP_GE, false, EX_RED_MAX, dop, id2, 1,
                                            dsrc, sd3, w1, st, lo1, &minus, dout),
                     CM_OK);
    assert_true(dout[0] == 8 && dout[1] == 9);
    int32_t iop[2] = {0, 0}, isrc[3] = {0}, iz = 0, iout[2];
    assert_int_equal(ex_kern_select_scatter(SP_ELEM_I32, EX_CMP_GE, false, EX_RED_ADD, iop, id2, 1,
                                            isrc, sd3, w1, st, lo1, &iz, iout),
                     CM_EINVAL);
    assert_int_equal(ex_kern_select_scatter(SP_ELEM_F64, EX_CMP_EQ, false, EX_RED_ADD, dop, id2, 1,
                                            dsrc, sd3, w1, st, lo1, &minus, dout),
                     CM_EINVAL);
}

/* ---- through the executor (partitioned runs: test_ex_exec.c) ----------------------------- */

/* Runs text on one device and returns its n_res results (freed by the caller). */
static ex_tensor *run_many(const char *text, const ex_tensor *args, uint32_t n_args, uint32_t n_res)
{
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_mlir_read(text, strlen(text), 0, &m, &err), CM_OK);
    ex_exec_opts o = {.n_devices = 1, .replicated = true, .iters = 1};
    ex_tensor *res = NULL;
    uint32_t n = 0;
    cm_status st = ex_exec_run(m, &o, args, n_args, &res, &n, &err);
    sp_module_destroy(m);
    if (st != CM_OK) {
        fail_msg("ex_exec_run: %s at %s: %s", cm_status_name(err.code), err.path, err.msg);
    }
    assert_int_equal(n, n_res);
    return res;
}

/* Runs text on one device and returns result 0 (freed by the caller). */
static ex_tensor *run_one(const char *text, const ex_tensor *args, uint32_t n_args)
{
    return run_many(text, args, n_args, 1);
}

/* Constants are decoded exactly (sp_mlir_dense_values): i64 and ui64 beyond
 * 2^53, hex bodies (raw little-endian bytes) and hex float literals; then
 * the interpreter tests' values for a few of the new ops, through the
 * executor, on a main without arguments. */
static void test_ex_exec_run_exact_constants_and_new_ops(void **state)
{
    (void)state;
    static const char mod[] =
        "func.func @main() -> (tensor<3xi64>, tensor<2xui64>, tensor<4xf32>, tensor<3xf64>) {\n"
        "  %0 = stablehlo.constant dense<[9007199254740993, -9223372036854775808, "
        "9223372036854775807]> : tensor<3xi64>\n"
        "  %1 = stablehlo.constant dense<[18446744073709551615, 0]> : tensor<2xui64>\n"
        "  %2 = stablehlo.constant dense<\"0x0000003F0000C0FF0000807F01000000\"> : "
        "tensor<4xf32>\n"
        "  %3 = stablehlo.constant dense<[0x7FF8000000000000, -0.0, 0.1]> : tensor<3xf64>\n"
        "  return %0, %1, %2, %3 : tensor<3xi64>, tensor<2xui64>, tensor<4xf32>, "
        "tensor<3xf64>\n}\n";
    ex_tensor *res = run_many(mod, NULL, 0, 4);
    const int64_t *i = res[0].data;
    assert_true(i[0] == 9007199254740993LL && i[1] == INT64_MIN && i[2] == INT64_MAX);
    const uint64_t *u = res[1].data;
    assert_true(u[0] == UINT64_MAX && u[1] == 0);
    uint32_t fb[4];
    memcpy(fb, res[2].data, sizeof fb);
    assert_true(fb[0] == 0x3F000000u && fb[1] == 0xFFC00000u && fb[2] == 0x7F800000u &&
                fb[3] == 1u);
    const double *d = res[3].data;
    assert_true(isnan(d[0]) && d[1] == 0.0 && signbit(d[1]) && d[2] == 0.1);
    ex_tensors_free(res, 4);

    static const char ops[] =
        "func.func @main() -> (tensor<3x2xi64>, tensor<3xi64>, tensor<6xi64>, tensor<4xi64>, "
        "tensor<5xf64>, tensor<3xi1>) {\n"
        "  %a = stablehlo.constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>\n"
        "  %0 = stablehlo.reverse %a, dims = [1, 0] : tensor<3x2xi64>\n"
        "  %mn = stablehlo.constant dense<[0, 0, -2]> : tensor<3xi64>\n"
        "  %x = stablehlo.constant dense<[2, 3, -1]> : tensor<3xi64>\n"
        "  %mx = stablehlo.constant dense<1> : tensor<i64>\n"
        "  %1 = stablehlo.clamp %mn, %x, %mx : (tensor<3xi64>, tensor<3xi64>, tensor<i64>) -> "
        "tensor<3xi64>\n"
        "  %pl = stablehlo.constant dense<[-1, -1, -3, 1, -3, 0]> : tensor<6xi64>\n"
        "  %pr = stablehlo.constant dense<[1, 0, -3, -3, 3, 2]> : tensor<6xi64>\n"
        "  %2 = stablehlo.power %pl, %pr : tensor<6xi64>\n"
        "  %sl = stablehlo.constant dense<[-1, 0, 8, 5]> : tensor<4xi64>\n"
        "  %sr = stablehlo.constant dense<[1, 2, 3, 64]> : tensor<4xi64>\n"
        "  %3 = stablehlo.shift_right_logical %sl, %sr : tensor<4xi64>\n"
        "  %r = stablehlo.constant dense<[-2.5, 0.4, 0.5, 0.6, 2.5]> : tensor<5xf64>\n"
        "  %4 = stablehlo.round_nearest_afz %r : tensor<5xf64>\n"
        "  %f = stablehlo.constant dense<[1.0, 0x7FF0000000000000, 0x7FF8000000000000]> : "
        "tensor<3xf64>\n"
        "  %5 = stablehlo.is_finite %f : (tensor<3xf64>) -> tensor<3xi1>\n"
        "  return %0, %1, %2, %3, %4, %5 : tensor<3x2xi64>, tensor<3xi64>, tensor<6xi64>, "
        "tensor<4xi64>, tensor<5xf64>, tensor<3xi1>\n}\n";
    res = run_many(ops, NULL, 0, 6);
    static const int64_t rev[6] = {6, 5, 4, 3, 2, 1}, cl[3] = {1, 1, -1},
                         pw[6] = {-1, 1, 0, 1, -27, 0}, sh[4] = {INT64_MAX, 0, 1, 0};
    static const double afz[5] = {-3.0, 0.0, 1.0, 1.0, 3.0};
    static const uint8_t fin[3] = {1, 0, 0};
    assert_memory_equal(res[0].data, rev, sizeof rev);
    assert_memory_equal(res[1].data, cl, sizeof cl);
    assert_memory_equal(res[2].data, pw, sizeof pw);
    assert_memory_equal(res[3].data, sh, sizeof sh);
    assert_memory_equal(res[4].data, afz, sizeof afz);
    assert_memory_equal(res[5].data, fin, sizeof fin);
    ex_tensors_free(res, 6);
}

/* A bf16 sort under TOTALORDER (-0 before +0, NaN last) and an f16 one
 * under IEEE comparisons, by hand. */
static void test_ex_exec_run_half_sort_by_hand(void **state)
{
    (void)state;
    static const char mod[] =
        "func.func @main() -> (tensor<6xbf16>, tensor<4xf16>) {\n"
        "  %a = stablehlo.constant dense<[2.0, -1.0, 0x7FC0, 0.0, -0.0, 1.5]> : tensor<6xbf16>\n"
        "  %0 = \"stablehlo.sort\"(%a) ({\n"
        "  ^bb0(%x: tensor<bf16>, %y: tensor<bf16>):\n"
        "    %c = stablehlo.compare LT, %x, %y, TOTALORDER : (tensor<bf16>, tensor<bf16>) -> "
        "tensor<i1>\n"
        "    stablehlo.return %c : tensor<i1>\n"
        "  }) {dimension = 0 : i64, is_stable = true} : (tensor<6xbf16>) -> tensor<6xbf16>\n"
        "  %b = stablehlo.constant dense<[3.0, -2.0, 65504.0, 0.5]> : tensor<4xf16>\n"
        "  %1 = \"stablehlo.sort\"(%b) ({\n"
        "  ^bb0(%x: tensor<f16>, %y: tensor<f16>):\n"
        "    %c = stablehlo.compare GT, %x, %y : (tensor<f16>, tensor<f16>) -> tensor<i1>\n"
        "    stablehlo.return %c : tensor<i1>\n"
        "  }) {dimension = 0 : i64} : (tensor<4xf16>) -> tensor<4xf16>\n"
        "  return %0, %1 : tensor<6xbf16>, tensor<4xf16>\n}\n";
    ex_tensor *res = run_many(mod, NULL, 0, 2);
    static const uint16_t want0[6] = {0xBF80, 0x8000, 0x0000, 0x3FC0, 0x4000, 0x7FC0};
    static const uint16_t want1[4] = {0x7BFF, 0x4200, 0x3800, 0xC000};
    assert_memory_equal(res[0].data, want0, sizeof want0);
    assert_memory_equal(res[1].data, want1, sizeof want1);
    ex_tensors_free(res, 2);
}

static void test_ex_exec_run_new_ops_by_hand(void **state)
{
    (void)state;
    static const char mod[] =
        "func.func @main(%arg0: tensor<3x2xi32>, %arg1: tensor<2xi64>) -> tensor<5x2xi32> {\n"
        "  %c = stablehlo.constant dense<-1> : tensor<i32>\n"
        "  %0 = stablehlo.pad %arg0, %c, low = [1, 0], high = [1, 0], interior = [0, 0] : "
        "(tensor<3x2xi32>, tensor<i32>) -> tensor<5x2xi32>\n"
        "  %1 = stablehlo.slice %arg1 [0:1] : (tensor<2xi64>) -> tensor<1xi64>\n"
        "  %2 = stablehlo.reshape %1 : (tensor<1xi64>) -> tensor<i64>\n"
        "  %c0 = stablehlo.constant dense<0> : tensor<i64>\n"
        "  %3 = stablehlo.dynamic_slice %arg0, %2, %c0, sizes = [1, 2] : (tensor<3x2xi32>, "
        "tensor<i64>, tensor<i64>) -> tensor<1x2xi32>\n"
        "  %4 = stablehlo.dynamic_update_slice %0, %3, %2, %c0 : (tensor<5x2xi32>, "
        "tensor<1x2xi32>, tensor<i64>, tensor<i64>) -> tensor<5x2xi32>\n"
        "  return %4 : tensor<5x2xi32>\n}\n";
    int32_t a[6] = {1, 2, 3, 4, 5, 6};
    int64_t idx[2] = {2, 0};
    ex_tensor args[2] = {{SP_ELEM_I32, 2, {3, 2}, 6, a}, {SP_ELEM_I64, 1, {2}, 2, idx}};
    ex_tensor *res = run_one(mod, args, 2);
    /* pad: [-1 -1; 1 2; 3 4; 5 6; -1 -1]; row 2 of it replaced by row 2 of arg0 */
    int32_t want[10] = {-1, -1, 1, 2, 5, 6, 5, 6, -1, -1};
    assert_memory_equal(res[0].data, want, sizeof want);
    ex_tensors_free(res, 1);
}

static void test_ex_exec_run_gather_scatter_conv_by_hand(void **state)
{
    (void)state;
    static const char gs[] =
        "func.func @main(%arg0: tensor<4x2xf64>, %arg1: tensor<3x1xi32>) -> tensor<4x2xf64> {\n"
        "  %0 = \"stablehlo.gather\"(%arg0, %arg1) {dimension_numbers = "
        "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = "
        "[0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, "
        "2>} : (tensor<4x2xf64>, tensor<3x1xi32>) -> tensor<3x2xf64>\n"
        "  %1 = \"stablehlo.scatter\"(%arg0, %arg1, %0) ({\n"
        "  ^bb0(%a: tensor<f64>, %b: tensor<f64>):\n"
        "    %s = stablehlo.add %a, %b : tensor<f64>\n"
        "    stablehlo.return %s : tensor<f64>\n"
        "  }) {indices_are_sorted = false, scatter_dimension_numbers = "
        "#stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], "
        "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false} : "
        "(tensor<4x2xf64>, tensor<3x1xi32>, tensor<3x2xf64>) -> tensor<4x2xf64>\n"
        "  return %1 : tensor<4x2xf64>\n}\n";
    double a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int32_t ix[3] = {3, 0, 3};
    ex_tensor args[2] = {{SP_ELEM_F64, 2, {4, 2}, 8, a}, {SP_ELEM_I32, 2, {3, 1}, 3, ix}};
    ex_tensor *res = run_one(gs, args, 2);
    /* rows 3, 0, 3 gathered and added back: row 0 doubled, row 3 tripled */
    double want[8] = {2, 4, 3, 4, 5, 6, 21, 24};
    assert_memory_equal(res[0].data, want, sizeof want);
    ex_tensors_free(res, 1);
    static const char conv[] =
        "func.func @main(%arg0: tensor<1x3x3x1xf32>, %arg1: tensor<2x2x1x1xf32>) -> "
        "tensor<1x2x2x1xf32> {\n"
        "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, "
        "o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [0, 0]], rhs_dilate = [1, "
        "1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : "
        "(tensor<1x3x3x1xf32>, tensor<2x2x1x1xf32>) -> tensor<1x2x2x1xf32>\n"
        "  return %0 : tensor<1x2x2x1xf32>\n}\n";
    float img[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, ker[4] = {1, 0, 0, -1};
    ex_tensor cargs[2] = {{SP_ELEM_F32, 4, {1, 3, 3, 1}, 9, img},
                          {SP_ELEM_F32, 4, {2, 2, 1, 1}, 4, ker}};
    res = run_one(conv, cargs, 2);
    float cwant[4] = {-4, -4, -4, -4};
    assert_memory_equal(res[0].data, cwant, sizeof cwant);
    ex_tensors_free(res, 1);
}

/* JAX's argsort-by-two-keys comparator (lt0 or (eq0 and lt1), TOTALORDER on
 * the floats), written with the operands of or and and swapped, along dim 1. */
static void test_ex_exec_run_sort_jax_comparators_by_hand(void **state)
{
    (void)state;
    static const char mod[] =
        "func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<2x4xi32>) -> (tensor<2x4xf32>, "
        "tensor<2x4xi32>) {\n"
        "  %0:2 = \"stablehlo.sort\"(%arg0, %arg1) ({\n"
        "  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):\n"
        "    %lt0 = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> "
        "tensor<i1>\n"
        "    %eq0 = stablehlo.compare EQ, %b, %a, TOTALORDER : (tensor<f32>, tensor<f32>) -> "
        "tensor<i1>\n"
        "    %gt1 = stablehlo.compare GT, %c, %d, SIGNED : (tensor<i32>, tensor<i32>) -> "
        "tensor<i1>\n"
        "    %and = stablehlo.and %gt1, %eq0 : tensor<i1>\n"
        "    %or = stablehlo.or %and, %lt0 : tensor<i1>\n"
        "    stablehlo.return %or : tensor<i1>\n"
        "  }) {dimension = -1 : i64, is_stable = true} : (tensor<2x4xf32>, tensor<2x4xi32>) -> "
        "(tensor<2x4xf32>, tensor<2x4xi32>)\n"
        "  return %0#0, %0#1 : tensor<2x4xf32>, tensor<2x4xi32>\n}\n";
    float a[8] = {2, NAN, 2, -1, 0.5f, 0.5f, 0.5f, -3};
    int32_t b[8] = {1, 0, 3, 4, -7, 9, 2, 0};
    ex_tensor args[2] = {{SP_ELEM_F32, 2, {2, 4}, 8, a}, {SP_ELEM_I32, 2, {2, 4}, 8, b}};
    ex_tensor *res = run_many(mod, args, 2, 2);
    /* row 0: -1, then the two 2s with b descending, NaN last; row 1: -3, then
     * the 0.5s with b descending */
    const float *ka = res[0].data;
    const int32_t *kb = res[1].data;
    assert_true(ka[0] == -1 && ka[1] == 2 && ka[2] == 2 && isnan(ka[3]));
    assert_true(ka[4] == -3 && ka[5] == 0.5f && ka[6] == 0.5f && ka[7] == 0.5f);
    int32_t bwant[8] = {4, 3, 1, 0, 0, 9, 2, -7};
    assert_memory_equal(kb, bwant, sizeof bwant);
    ex_tensors_free(res, 2);
}

/* compare with TOTALORDER in main: -0 < +0, NaN == NaN (same bits), NaN
 * above 1 and -NaN below it; the same compares as FLOAT for contrast. */
static void test_ex_exec_run_compare_total_order_by_hand(void **state)
{
    (void)state;
    static const char mod[] =
        "func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xi1>, "
        "tensor<4xi1>, tensor<4xi1>) {\n"
        "  %0 = stablehlo.compare LT, %arg0, %arg1, TOTALORDER : (tensor<4xf32>, tensor<4xf32>) "
        "-> tensor<4xi1>\n"
        "  %1 = stablehlo.compare EQ, %arg0, %arg1, TOTALORDER : (tensor<4xf32>, tensor<4xf32>) "
        "-> tensor<4xi1>\n"
        "  %2 = stablehlo.compare EQ, %arg0, %arg1, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> "
        "tensor<4xi1>\n"
        "  return %0, %1, %2 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>\n}\n";
    float a[4] = {-0.0f, NAN, 1, -NAN}, b[4] = {0.0f, NAN, NAN, 1};
    ex_tensor args[2] = {{SP_ELEM_F32, 1, {4}, 4, a}, {SP_ELEM_F32, 1, {4}, 4, b}};
    ex_tensor *res = run_many(mod, args, 2, 3);
    uint8_t lt[4] = {1, 0, 1, 1}, eq[4] = {0, 1, 0, 0}, feq[4] = {1, 0, 0, 0};
    assert_memory_equal(res[0].data, lt, 4);
    assert_memory_equal(res[1].data, eq, 4);
    assert_memory_equal(res[2].data, feq, 4);
    ex_tensors_free(res, 3);
    double d[2] = {-INFINITY, -0.0}, e[2] = {-NAN, -0.0};
    uint8_t o[2];
    assert_true(ex_kern_compare_total(EX_CMP_GT, SP_ELEM_F64, d, e, o, 2));
    assert_true(o[0] == 1 && o[1] == 0);
    assert_true(ex_kern_compare_total(EX_CMP_GE, SP_ELEM_F64, d, e, o, 2));
    assert_true(o[0] == 1 && o[1] == 1);
    assert_false(ex_kern_compare_total(EX_CMP_LT, SP_ELEM_I32, d, e, o, 2));
}

/* A 2 x 2 max pool's gradient on a 1 x 4 x 4 x 1 image (JAX's form: select
 * GE, scatter add), stride 2 and one padded column at the right. */
static void test_ex_exec_run_select_and_scatter_by_hand(void **state)
{
    (void)state;
    static const char mod[] =
        "func.func @main(%arg0: tensor<1x4x3x1xf32>, %arg1: tensor<1x2x2x1xf32>) -> "
        "tensor<1x4x3x1xf32> {\n"
        "  %z = stablehlo.constant dense<0.000000e+00> : tensor<f32>\n"
        "  %0 = \"stablehlo.select_and_scatter\"(%arg0, %arg1, %z) ({\n"
        "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
        "    %c = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> "
        "tensor<i1>\n"
        "    stablehlo.return %c : tensor<i1>\n"
        "  }, {\n"
        "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
        "    %s = stablehlo.add %a, %b : tensor<f32>\n"
        "    stablehlo.return %s : tensor<f32>\n"
        "  }) {padding = dense<[[0, 0], [0, 0], [0, 1], [0, 0]]> : tensor<4x2xi64>, "
        "window_dimensions = array<i64: 1, 2, 2, 1>, window_strides = array<i64: 1, 2, 2, 1>} "
        ": (tensor<1x4x3x1xf32>, tensor<1x2x2x1xf32>, tensor<f32>) -> tensor<1x4x3x1xf32>\n"
        "  return %0 : tensor<1x4x3x1xf32>\n}\n";
    float img[12] = {1, 7, 3, 4, 2, 9, 5, 5, 0, 5, 1, 8}, g[4] = {10, 20, 30, 40};
    ex_tensor args[2] = {{SP_ELEM_F32, 4, {1, 4, 3, 1}, 12, img},
                         {SP_ELEM_F32, 4, {1, 2, 2, 1}, 4, g}};
    ex_tensor *res = run_one(mod, args, 2);
    /* windows: rows 0-1 x cols 0-1 {1, 7, 4, 2}: 7; rows 0-1 x col 2 (+pad)
     * {3, 9}: 9; rows 2-3 x cols 0-1 {5, 5, 5, 1}: the first 5; rows 2-3 x
     * col 2 {0, 8}: 8 */
    float want[12] = {0, 10, 0, 0, 0, 20, 30, 0, 0, 0, 0, 40};
    assert_memory_equal(res[0].data, want, sizeof want);
    ex_tensors_free(res, 1);
}

/* A depthwise convolution (feature_group_count 2) and a transposed one
 * (lhs_dilate, reverse) read from MLIR text. */
static void test_ex_exec_run_grouped_and_dilated_conv_by_hand(void **state)
{
    (void)state;
    static const char dw[] =
        "func.func @main(%arg0: tensor<1x1x2x2xf32>, %arg1: tensor<1x1x1x2xf32>) -> "
        "tensor<1x1x2x2xf32> {\n"
        "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, "
        "o]->[b, 0, 1, f], window = {stride = [1, 1]} {batch_group_count = 1 : i64, "
        "feature_group_count = 2 : i64} : (tensor<1x1x2x2xf32>, tensor<1x1x1x2xf32>) -> "
        "tensor<1x1x2x2xf32>\n"
        "  return %0 : tensor<1x1x2x2xf32>\n}\n";
    float img[4] = {1, 2, 3, 4}, ker[2] = {5, 7};
    ex_tensor args[2] = {{SP_ELEM_F32, 4, {1, 1, 2, 2}, 4, img},
                         {SP_ELEM_F32, 4, {1, 1, 1, 2}, 2, ker}};
    ex_tensor *res = run_one(dw, args, 2);
    float want[4] = {5, 14, 15, 28};
    assert_memory_equal(res[0].data, want, sizeof want);
    ex_tensors_free(res, 1);
    static const char tr[] =
        "func.func @main(%arg0: tensor<1x1x3x1xf32>, %arg1: tensor<1x2x1x1xf32>) -> "
        "tensor<1x1x5x1xf32> {\n"
        "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, "
        "o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[0, 0], [1, 0]], lhs_dilate = [1, "
        "2], rhs_dilate = [1, 1], reverse = [false, true]} {batch_group_count = 1 : i64, "
        "feature_group_count = 1 : i64} : (tensor<1x1x3x1xf32>, tensor<1x2x1x1xf32>) -> "
        "tensor<1x1x5x1xf32>\n"
        "  return %0 : tensor<1x1x5x1xf32>\n}\n";
    float in[3] = {1, 2, 3}, k[2] = {1, 10};
    ex_tensor targs[2] = {{SP_ELEM_F32, 4, {1, 1, 3, 1}, 3, in},
                          {SP_ELEM_F32, 4, {1, 2, 1, 1}, 2, k}};
    res = run_one(tr, targs, 2);
    /* padded and dilated: [0, 1, 0, 2, 0, 3]; windows of 2 with the kernel
     * reversed (10, 1): 1, 10, 2, 20, 3 */
    float twant[5] = {1, 10, 2, 20, 3};
    assert_memory_equal(res[0].data, twant, sizeof twant);
    ex_tensors_free(res, 1);
}

/* A 1-D select_and_scatter module of element type T: operand tensor<4xT>,
 * source tensor<NxT>, select `compare DIR`, scatter add, window 2, stride 2. */
#define SAS_1D(T, N, DIR, ZERO)                                                                    \
    "func.func @main(%arg0: tensor<4x" T ">, %arg1: tensor<" N "x" T ">) -> tensor<4x" T "> {\n"   \
    "  %z = stablehlo.constant dense<" ZERO "> : tensor<" T ">\n"                                  \
    "  %0 = \"stablehlo.select_and_scatter\"(%arg0, %arg1, %z) ({\n"                               \
    "  ^bb0(%a: tensor<" T ">, %b: tensor<" T ">):\n"                                              \
    "    %c = stablehlo.compare " DIR ", %a, %b : (tensor<" T ">, tensor<" T ">) -> tensor<i1>\n"  \
    "    stablehlo.return %c : tensor<i1>\n"                                                       \
    "  }, {\n"                                                                                     \
    "  ^bb0(%a: tensor<" T ">, %b: tensor<" T ">):\n"                                              \
    "    %s = stablehlo.add %a, %b : tensor<" T ">\n"                                              \
    "    stablehlo.return %s : tensor<" T ">\n"                                                    \
    "  }) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>} : (tensor<4x" T      \
    ">, tensor<" N "x" T ">, tensor<" T ">) -> tensor<4x" T ">\n"                                  \
    "  return %0 : tensor<4x" T ">\n}\n"

/* ex_check_text on text must fail with CM_EINVAL at path, msg containing what. */
static void assert_rejected(const char *text, const char *path, const char *what)
{
    ex_check_opts o = {.n_devices = 1, .iters = 1, .seed = 1};
    ex_report r;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(ex_check_text(text, strlen(text), &o, &r, &err), CM_EINVAL);
    assert_string_equal(err.path, path);
    if (strstr(err.msg, what) == NULL) {
        fail_msg("message '%s' lacks '%s'", err.msg, what);
    }
}

static void test_ex_exec_run_bad_new_ops_are_clear_errors(void **state)
{
    (void)state;
    /* gather whose start_index_map names operand dim 5 of a rank-2 operand */
    assert_rejected(
        "func.func @main(%arg0: tensor<10x6xf32>, %arg1: tensor<4x1xi32>) -> tensor<4x6xf32> {\n"
        "  %0 = \"stablehlo.gather\"(%arg0, %arg1) {dimension_numbers = "
        "#stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [5], "
        "index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 6>} : "
        "(tensor<10x6xf32>, tensor<4x1xi32>) -> tensor<4x6xf32>\n"
        "  return %0 : tensor<4x6xf32>\n}\n",
        "2:3", "index map dimension 5 is out of range"); /* the input loader's verifier */
    /* a convolution with both feature and batch groups (the spec forbids it) */
    assert_rejected(
        "func.func @main(%arg0: tensor<2x4x4x2xf32>, %arg1: tensor<1x1x1x2xf32>) -> "
        "tensor<1x4x4x2xf32> {\n"
        "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, "
        "o]->[b, 0, 1, f], window = {stride = [1, 1]} {batch_group_count = 2 : i64, "
        "feature_group_count = 2 : i64} : (tensor<2x4x4x2xf32>, tensor<1x1x1x2xf32>) -> "
        "tensor<1x4x4x2xf32>\n"
        "  return %0 : tensor<1x4x4x2xf32>\n}\n",
        "2:3", "shapes or types the executor cannot run");
    /* an lhs dilation so large that the dilated extent overflows */
    assert_rejected(
        "func.func @main(%arg0: tensor<1x4x4x2xf32>, %arg1: tensor<1x1x2x2xf32>) -> "
        "tensor<1x4x4x2xf32> {\n"
        "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, "
        "o]->[b, 0, 1, f], window = {stride = [1, 1], lhs_dilate = [4611686018427387904, 1]} "
        "{batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x4x2xf32>, "
        "tensor<1x1x2x2xf32>) -> tensor<1x4x4x2xf32>\n"
        "  return %0 : tensor<1x4x4x2xf32>\n}\n",
        "2:3", "window attributes the executor cannot read");
    assert_rejected(
        "func.func @main(%arg0: tensor<1x4x4x2xf32>, %arg1: tensor<1x1x2x2xf32>) -> "
        "tensor<1x4x4x2xf32> {\n"
        "  %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, "
        "o]->[b, 0, 1, f], window = {stride = [1, 1], lhs_dilate = [1152921504606846976, 1]} "
        "{batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x4x2xf32>, "
        "tensor<1x1x2x2xf32>) -> tensor<1x4x4x2xf32>\n"
        "  return %0 : tensor<1x4x4x2xf32>\n}\n",
        "2:3", "shapes or types the executor cannot run");
    /* a pad whose result type does not follow from its padding */
    assert_rejected("func.func @main(%arg0: tensor<3xf32>) -> tensor<9xf32> {\n"
                    "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
                    "  %0 = stablehlo.pad %arg0, %c, low = [1], high = [1], interior = [0] : "
                    "(tensor<3xf32>, tensor<f32>) -> tensor<9xf32>\n"
                    "  return %0 : tensor<9xf32>\n}\n",
                    "3:3", "operands or attributes the executor cannot run");
    /* a dot contracting a dim the operand does not have */
    assert_rejected("func.func @main(%arg0: tensor<4x3xf32>, %arg1: tensor<3x5xf32>) -> "
                    "tensor<4x5xf32> {\n"
                    "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [7] x [0] : "
                    "(tensor<4x3xf32>, tensor<3x5xf32>) -> tensor<4x5xf32>\n"
                    "  return %0 : tensor<4x5xf32>\n}\n",
                    "2:3", "lhs contracting dimension 7 is out of range"); /* the verifier */
    /* a dot mixing float and integer operands */
    assert_rejected("func.func @main(%arg0: tensor<4x3xf32>, %arg1: tensor<3x5xi32>) -> "
                    "tensor<4x5xf32> {\n"
                    "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
                    "(tensor<4x3xf32>, tensor<3x5xi32>) -> tensor<4x5xf32>\n"
                    "  return %0 : tensor<4x5xf32>\n}\n",
                    "2:3", "on these element types cannot be executed yet");
    /* sort comparators other than LT/GT (combined lexicographically) */
    assert_rejected("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
                    "  %0 = \"stablehlo.sort\"(%arg0) ({\n"
                    "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
                    "    %c = stablehlo.compare LE, %a, %b : (tensor<f32>, tensor<f32>) -> "
                    "tensor<i1>\n"
                    "    stablehlo.return %c : tensor<i1>\n"
                    "  }) {dimension = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>\n"
                    "  return %0 : tensor<4xf32>\n}\n",
                    "2:3", "stablehlo.sort with this comparator cannot be executed yet");
    assert_rejected("func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> "
                    "tensor<4xf32> {\n"
                    "  %0:2 = \"stablehlo.sort\"(%arg0, %arg1) ({\n"
                    "  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<f32>, %d: "
                    "tensor<f32>):\n"
                    "    %x = stablehlo.compare LT, %a, %d : (tensor<f32>, tensor<f32>) -> "
                    "tensor<i1>\n"
                    "    stablehlo.return %x : tensor<i1>\n"
                    "  }) {dimension = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> "
                    "(tensor<4xf32>, tensor<4xf32>)\n"
                    "  return %0#1 : tensor<4xf32>\n}\n",
                    "2:3", "with this comparator cannot be executed yet");
    assert_rejected("func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n"
                    "  %0 = \"stablehlo.sort\"(%arg0) ({\n"
                    "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
                    "    %c = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>) -> "
                    "tensor<i1>\n"
                    "    stablehlo.return %c : tensor<i1>\n"
                    "  }) {dimension = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>\n"
                    "  return %0 : tensor<4xf32>\n}\n",
                    "2:3", "dimension the executor cannot read");
    /* a type whose byte size overflows, a window of more than 2^32 elements */
    assert_rejected("func.func @main(%arg0: tensor<4611686018427387904x8xf32>) -> "
                    "tensor<4611686018427387904x8xf32> {\n"
                    "  return %arg0 : tensor<4611686018427387904x8xf32>\n}\n",
                    "1:1", "more elements (or bytes) than fit in 64 bits");
    assert_rejected("func.func @main(%arg0: tensor<4xf32>) -> tensor<1xf32> {\n"
                    "  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
                    "  %0 = \"stablehlo.reduce_window\"(%arg0, %c) ({\n"
                    "  ^bb0(%a: tensor<f32>, %b: tensor<f32>):\n"
                    "    %m = stablehlo.add %a, %b : tensor<f32>\n"
                    "    stablehlo.return %m : tensor<f32>\n"
                    "  }) {padding = dense<[[0, 8589934592]]> : tensor<1x2xi64>, "
                    "window_dimensions = array<i64: 8589934592>} : (tensor<4xf32>, tensor<f32>) "
                    "-> tensor<1xf32>\n"
                    "  return %0 : tensor<1xf32>\n}\n",
                    "3:3", "attributes the executor cannot read");
    /* select_and_scatter: an i32 operand, a source of the wrong size, a
     * select body that is not an ordering */
    assert_rejected(SAS_1D("i32", "2", "GE", "0"), "3:3", "f32, f64, bf16 and f16 only");
    assert_rejected(SAS_1D("f32", "3", "GE", "0.0"), "3:3", "attributes the executor cannot read");
    assert_rejected(SAS_1D("f32", "2", "EQ", "0.0"), "3:3",
                    "with this select body cannot be executed yet");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_kern_binary_f32_matches_and_propagates_nan),
        cmocka_unit_test(test_ex_kern_binary_f64_and_ints),
        cmocka_unit_test(test_ex_kern_unary_per_type),
        cmocka_unit_test(test_ex_kern_new_unary_ops_match_the_spec),
        cmocka_unit_test(test_ex_kern_new_binary_ops_match_the_spec),
        cmocka_unit_test(test_ex_kern_clamp_scalars_and_nan),
        cmocka_unit_test(test_ex_kern_half_types_round_to_nearest_even),
        cmocka_unit_test(test_ex_kern_convert_saturates_and_truncates),
        cmocka_unit_test(test_ex_kern_compare_and_select_odd_sizes),
        cmocka_unit_test(test_ex_kern_affine_transposes_every_element_size),
        cmocka_unit_test(test_ex_kern_affine_broadcast_reverse_and_padding),
        cmocka_unit_test(test_ex_kern_reduce_every_pattern_f32),
        cmocka_unit_test(test_ex_kern_reduce_max_min_and_ints),
        cmocka_unit_test(test_ex_kern_dot_every_layout_matches_naive),
        cmocka_unit_test(test_ex_kern_pad_negative_low_and_interior),
        cmocka_unit_test(test_ex_kern_gather_embedding_rows_with_clamping),
        cmocka_unit_test(test_ex_kern_scatter_add_replace_and_skip),
        cmocka_unit_test(test_ex_kern_place_clips_to_the_block),
        cmocka_unit_test(test_ex_kern_conv_nhwc_and_nchw_match_naive),
        cmocka_unit_test(test_ex_kern_conv_groups_dilation_reversal_match_naive),
        cmocka_unit_test(test_ex_kern_reduce_window_max_and_sum_pools),
        cmocka_unit_test(test_ex_kern_dot_int_wraps_in_the_result_type),
        cmocka_unit_test(test_ex_kern_dot_int_batched_layout_matches_naive),
        cmocka_unit_test(test_ex_kern_sort_is_stable_with_equal_keys),
        cmocka_unit_test(test_ex_kern_sort_total_order_nans_and_zeros),
        cmocka_unit_test(test_ex_kern_sort_two_keys_along_dim_0),
        cmocka_unit_test(test_ex_kern_sort_long_slices_match_naive),
        cmocka_unit_test(test_ex_kern_select_scatter_spec_example),
        cmocka_unit_test(test_ex_kern_select_scatter_ties_nans_and_padding),
        cmocka_unit_test(test_ex_gate_limits_holders),
        cmocka_unit_test(test_ex_exec_run_new_ops_by_hand),
        cmocka_unit_test(test_ex_exec_run_exact_constants_and_new_ops),
        cmocka_unit_test(test_ex_exec_run_half_sort_by_hand),
        cmocka_unit_test(test_ex_exec_run_gather_scatter_conv_by_hand),
        cmocka_unit_test(test_ex_exec_run_sort_jax_comparators_by_hand),
        cmocka_unit_test(test_ex_exec_run_compare_total_order_by_hand),
        cmocka_unit_test(test_ex_exec_run_select_and_scatter_by_hand),
        cmocka_unit_test(test_ex_exec_run_grouped_and_dilated_conv_by_hand),
        cmocka_unit_test(test_ex_exec_run_bad_new_ops_are_clear_errors),
    };
    return cmocka_run_group_tests_name("ex_kern", tests, NULL, NULL);
}
