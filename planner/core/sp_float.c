/* SPDX-License-Identifier: Apache-2.0
 * planner/core: binary float formats (sp_float.h). Each format is described
 * as APFloat's fltSemantics describe it; one encoder and one decoder serve
 * them all. f32 and f64 go through the C types (the conversion from double
 * to float rounds to nearest even, as the default rounding mode does). */
#include "sp_float.h"

#include <math.h>
#include <string.h>

/* How a format spells its special values. */
typedef enum nan_kind {
    NAN_IEEE,  /* exponent all ones: infinity (fraction 0) or NaN */
    NAN_ONES,  /* no infinity; NaN is every bit of exponent and fraction set (FN) */
    NAN_NEGZ,  /* no infinity, no -0; NaN is the pattern of -0 (FNUZ) */
    NAN_NONE   /* finite only: no infinity, no NaN (f4, f6) */
} nan_kind;

typedef struct ffmt {
    unsigned ebits, mbits; /* exponent and stored fraction bits */
    int bias;
    nan_kind nan;
    bool sign;   /* has a sign bit (all but f8E8M0FNU) */
    bool zero;   /* has a zero (all but f8E8M0FNU) */
} ffmt;

static const ffmt *fmt_of(sp_elem e)
{
    static const ffmt bf16 = {8, 7, 127, NAN_IEEE, true, true},
                      f16 = {5, 10, 15, NAN_IEEE, true, true},
                      f8e4m3fn = {4, 3, 7, NAN_ONES, true, true},
                      f8e5m2 = {5, 2, 15, NAN_IEEE, true, true},
                      f4e2m1fn = {2, 1, 1, NAN_NONE, true, true},
                      f6e2m3fn = {2, 3, 1, NAN_NONE, true, true},
                      f6e3m2fn = {3, 2, 3, NAN_NONE, true, true},
                      f8e3m4 = {3, 4, 3, NAN_IEEE, true, true},
                      f8e4m3 = {4, 3, 7, NAN_IEEE, true, true},
                      f8e4m3b11fnuz = {4, 3, 11, NAN_NEGZ, true, true},
                      f8e4m3fnuz = {4, 3, 8, NAN_NEGZ, true, true},
                      f8e5m2fnuz = {5, 2, 16, NAN_NEGZ, true, true},
                      f8e8m0fnu = {8, 0, 127, NAN_ONES, false, false};
    switch (e) {
    case SP_ELEM_BF16: return &bf16;
    case SP_ELEM_F16: return &f16;
    case SP_ELEM_F8E4M3FN: return &f8e4m3fn;
    case SP_ELEM_F8E5M2: return &f8e5m2;
    case SP_ELEM_F4E2M1FN: return &f4e2m1fn;
    case SP_ELEM_F6E2M3FN: return &f6e2m3fn;
    case SP_ELEM_F6E3M2FN: return &f6e3m2fn;
    case SP_ELEM_F8E3M4: return &f8e3m4;
    case SP_ELEM_F8E4M3: return &f8e4m3;
    case SP_ELEM_F8E4M3B11FNUZ: return &f8e4m3b11fnuz;
    case SP_ELEM_F8E4M3FNUZ: return &f8e4m3fnuz;
    case SP_ELEM_F8E5M2FNUZ: return &f8e5m2fnuz;
    case SP_ELEM_F8E8M0FNU: return &f8e8m0fnu;
    default: return NULL;
    }
}

bool sp_float_is(sp_elem e)
{
    return e == SP_ELEM_F32 || e == SP_ELEM_F64 || fmt_of(e) != NULL;
}

unsigned sp_float_bits(sp_elem e)
{
    const ffmt *f = fmt_of(e);
    if (f != NULL) {
        return f->ebits + f->mbits + (f->sign ? 1u : 0u);
    }
    return e == SP_ELEM_F32 ? 32u : 64u;
}

int sp_float_precision(sp_elem e)
{
    const ffmt *f = fmt_of(e);
    if (f != NULL) {
        return (int)f->mbits + 1;
    }
    return e == SP_ELEM_F32 ? 24 : 53;
}

/* The largest exponent field and, at it, the largest fraction of a finite
 * value. */
static void max_fields(const ffmt *f, uint32_t *emax, uint32_t *mmax)
{
    uint32_t eall = (1u << f->ebits) - 1u, mall = (1u << f->mbits) - 1u;
    switch (f->nan) {
    case NAN_IEEE:
        *emax = eall - 1u;
        *mmax = mall;
        break;
    case NAN_ONES:
        /* with no fraction bits (E8M0) the all-ones exponent is the NaN */
        *emax = f->mbits == 0 ? eall - 1u : eall;
        *mmax = f->mbits == 0 ? 0u : mall - 1u;
        break;
    default:
        *emax = eall;
        *mmax = mall;
        break;
    }
}

double sp_float_max(sp_elem e)
{
    const ffmt *f = fmt_of(e);
    if (f == NULL) {
        return e == SP_ELEM_F32 ? (double)3.40282346638528859812e38f : 1.7976931348623157e308;
    }
    uint32_t emax, mmax;
    max_fields(f, &emax, &mmax);
    return ldexp(1.0 + ldexp((double)mmax, -(int)f->mbits), (int)emax - f->bias);
}

static uint64_t nan_bits(const ffmt *f, bool neg)
{
    uint64_t sbit = f->sign && neg ? (uint64_t)1 << (f->ebits + f->mbits) : 0u;
    switch (f->nan) {
    case NAN_IEEE: /* quiet: the top fraction bit */
        return sbit | ((((uint64_t)1 << f->ebits) - 1u) << f->mbits) |
               ((uint64_t)1 << (f->mbits - 1u));
    case NAN_ONES:
        return sbit | (((uint64_t)1 << (f->ebits + f->mbits)) - 1u);
    case NAN_NEGZ:
        return (uint64_t)1 << (f->ebits + f->mbits);
    default:
        return 0u; /* no NaN: APFloat leaves it undefined; zero */
    }
}

uint64_t sp_float_encode(sp_elem e, double v)
{
    if (e == SP_ELEM_F64) {
        uint64_t b;
        memcpy(&b, &v, sizeof b);
        return b;
    }
    if (e == SP_ELEM_F32) {
        float x = (float)v;
        uint32_t b;
        memcpy(&b, &x, sizeof b);
        return b;
    }
    const ffmt *f = fmt_of(e);
    if (f == NULL) {
        return 0u;
    }
    bool neg = signbit(v) != 0;
    if (isnan(v) || (!f->sign && neg && v != 0.0)) {
        return nan_bits(f, neg);
    }
    uint64_t sbit = f->sign && neg ? (uint64_t)1 << (f->ebits + f->mbits) : 0u;
    double a = fabs(v);
    uint32_t emax, mmax;
    max_fields(f, &emax, &mmax);
    if (isinf(a)) {
        goto overflow;
    }
    int emin = 1 - f->bias; /* exponent of the least normal */
    if (a == 0.0 || a < ldexp(1.0, emin)) {
        if (!f->zero) {
            /* no zero, no subnormals (E8M0): 2^-bias is the least value,
             * 2^emin the next; round between them (ties up, as there is no
             * fraction bit to be even) */
            return a >= ldexp(1.5, -f->bias) ? 1u : 0u;
        }
        /* subnormal: an integer count of 2^(emin - mbits) */
        double q = nearbyint(ldexp(a, (int)f->mbits - emin));
        if (q == 0.0 && f->nan == NAN_NEGZ) {
            return 0u;
        }
        /* q == 2^mbits is the least normal: its bits are the same */
        return sbit | (uint64_t)q;
    }
    int x;
    double m = frexp(a, &x); /* a = m * 2^x, m in [0.5, 1) */
    int exp = x - 1;         /* a = (2m) * 2^exp, 2m in [1, 2) */
    double frac = ldexp(2.0 * m - 1.0, (int)f->mbits), r = nearbyint(frac);
    if (f->mbits == 0 && frac == 0.5) {
        r = 1.0; /* ties: the significand's only bit is the implicit one, odd */
    }
    if (r >= ldexp(1.0, (int)f->mbits)) {
        r = 0.0;
        exp++;
    }
    if (exp + f->bias > (int)emax || (exp + f->bias == (int)emax && (uint32_t)r > mmax)) {
        goto overflow;
    }
    return sbit | ((uint64_t)(exp + f->bias) << f->mbits) | (uint64_t)r;
overflow:
    if (f->nan == NAN_IEEE) {
        return sbit | ((((uint64_t)1 << f->ebits) - 1u) << f->mbits);
    }
    if (f->nan == NAN_NONE) {
        return sbit | ((uint64_t)emax << f->mbits) | mmax;
    }
    return nan_bits(f, neg);
}

double sp_float_decode(sp_elem e, uint64_t b)
{
    if (e == SP_ELEM_F64) {
        double d;
        memcpy(&d, &b, sizeof d);
        return d;
    }
    if (e == SP_ELEM_F32) {
        uint32_t u = (uint32_t)b;
        float x;
        memcpy(&x, &u, sizeof x);
        return (double)x;
    }
    const ffmt *f = fmt_of(e);
    if (f == NULL) {
        return (double)NAN;
    }
    unsigned width = f->ebits + f->mbits + (f->sign ? 1u : 0u);
    b &= width >= 64 ? UINT64_MAX : (((uint64_t)1 << width) - 1u);
    bool neg = f->sign && ((b >> (f->ebits + f->mbits)) & 1u) != 0;
    uint32_t eall = (1u << f->ebits) - 1u, mall = (1u << f->mbits) - 1u;
    uint32_t ef = (uint32_t)(b >> f->mbits) & eall, mf = (uint32_t)b & mall;
    double mag;
    switch (f->nan) {
    case NAN_IEEE:
        if (ef == eall) {
            return mf != 0 ? (double)NAN : neg ? -(double)INFINITY : (double)INFINITY;
        }
        break;
    case NAN_ONES:
        if (ef == eall && mf == mall) {
            return (double)NAN;
        }
        break;
    case NAN_NEGZ:
        if (neg && ef == 0 && mf == 0) {
            return (double)NAN;
        }
        break;
    default:
        break;
    }
    if (!f->zero) {
        mag = ldexp(1.0, (int)ef - f->bias); /* E8M0: a power of two */
    } else if (ef == 0) {
        mag = ldexp((double)mf, 1 - f->bias - (int)f->mbits);
    } else {
        mag = ldexp(1.0 + ldexp((double)mf, -(int)f->mbits), (int)ef - f->bias);
    }
    return neg ? -mag : mag;
}

double sp_float_round(sp_elem e, double v)
{
    if (e == SP_ELEM_F64) {
        return v;
    }
    return sp_float_decode(e, sp_float_encode(e, v));
}
