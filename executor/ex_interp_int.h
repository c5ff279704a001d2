/* SPDX-License-Identifier: Apache-2.0
 * executor (internal): what the interpreter's files share (ex_interp.c runs
 * the program, ex_interp_ew.c computes element by element).
 * A value is held "wide": one 64-bit slot per scalar whatever its element
 * type, integers as int64 (signed types sign-extended from their width,
 * unsigned and i1 zero-extended), floats as doubles already rounded to their
 * type (f32, f16, bf16), complex numbers as two doubles (real, imaginary).
 * Every store wraps or rounds to the element type, so each op computes as its
 * type does. Values are reference counted (iv_ref / iv_unref): SSA values
 * never change, so ops that pass a value through share it.
 * Thread contract: a value is shared read-only between the processes of a
 * run_parallel once made; counts are atomic. */
#ifndef EX_INTERP_INT_H
#define EX_INTERP_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_float.h"
#include "sp_ir.h"
#include "sp_ops.h"

typedef enum iv_kind {
    IV_TENSOR,
    IV_TOKEN,
    IV_TUPLE
} iv_kind;

typedef struct iv iv;
struct iv {
    atomic_uint refs;
    iv_kind kind;
    sp_elem elem;
    uint32_t rank;
    int64_t *dims; /* rank entries (heap, with the value) */
    size_t n;      /* elements */
    uint32_t w;    /* slots per element: 2 for complex, else 1 */
    union {
        int64_t *i; /* integers, i1 */
        double *f;  /* floats; complex as (re, im) pairs */
        void *p;
    } d;
    iv **items; /* IV_TUPLE: n_items values (owned references) */
    uint32_t n_items;
};

/* One scalar, loaded from a wide slot: i for integers, re (and im) else. */
typedef struct sv {
    int64_t i;
    double re, im;
} sv;

/* ---- element types ---------------------------------------------------------- */

static inline bool et_int(sp_elem e)
{
    return (e >= SP_ELEM_I1 && e <= SP_ELEM_UI64) || e == SP_ELEM_INDEX;
}

static inline bool et_uns(sp_elem e)
{
    return e == SP_ELEM_I1 || (e >= SP_ELEM_UI2 && e <= SP_ELEM_UI64);
}

static inline bool et_flt(sp_elem e)
{
    return sp_float_is(e); /* f64 down to f4E2M1FN */
}

static inline bool et_cpx(sp_elem e)
{
    return e == SP_ELEM_C64 || e == SP_ELEM_C128;
}

/* Bits of a type (i1 is 1; a complex type: of one component). */
unsigned et_width(sp_elem e);
/* Whether the interpreter computes on type e. */
bool et_supported(sp_elem e);
/* v wrapped to integer type e (two's complement, sign- or zero-extended). */
int64_t et_wrap(sp_elem e, int64_t v);
/* v rounded to float type e (the component type of a complex type). */
double et_round(sp_elem e, double v);

/* ---- values ----------------------------------------------------------------- */

/* A fresh tensor value (zeroed) of element type e and dims; NULL when out
 * of memory or its size overflows. */
iv *iv_new(sp_elem e, const int64_t *dims, uint32_t rank);
iv *iv_ref(iv *v);
void iv_unref(iv *v);

static inline sv iv_get(const iv *t, size_t k)
{
    sv s = {0, 0, 0};
    if (et_int(t->elem)) {
        s.i = t->d.i[k];
    } else if (t->w == 2) {
        s.re = t->d.f[2 * k];
        s.im = t->d.f[2 * k + 1];
    } else {
        s.re = t->d.f[k];
    }
    return s;
}

static inline void iv_set(iv *t, size_t k, sv s)
{
    if (et_int(t->elem)) {
        t->d.i[k] = et_wrap(t->elem, s.i);
    } else if (t->w == 2) {
        t->d.f[2 * k] = et_round(t->elem, s.re);
        t->d.f[2 * k + 1] = et_round(t->elem, s.im);
    } else {
        t->d.f[k] = et_round(t->elem, s.re);
    }
}

/* A scalar as a double (integers by their signedness, complex: real part). */
static inline double sv_num(sp_elem e, sv s)
{
    if (et_int(e)) {
        return et_uns(e) ? (double)(uint64_t)s.i : (double)s.i;
    }
    return s.re;
}

/* ---- uniform quantized types (ex_interp_q.c) ----------------------------------- */

/* A `!quant.uniform<...>` element type: its storage integer type and range,
 * its expressed float type, and its scales and zero points (one, or one per
 * index of dimension qdim). */
typedef struct iquant {
    sp_elem storage, expressed;
    int64_t smin, smax;
    int32_t qdim;   /* -1: per tensor */
    uint32_t n;     /* scales and zero points */
    double *scale;  /* n, in ar */
    int64_t *zp;    /* n, in ar */
} iquant;

/* Reads the quantized element type of tensor type text into q (arrays in
 * ar); false when text has none or it is malformed. */
bool ex_iquant_parse(const char *text, iquant *q, cm_arena *ar);
/* The expressed value of storage integer s with parameters i, and back
 * (spec.md's dequantize / quantize: rounded to the expressed type at each
 * step, clamped to the storage range, rounded to nearest even). */
double ex_iquant_dequantize(const iquant *q, int64_t s, uint32_t i);
int64_t ex_iquant_quantize(const iquant *q, double x, uint32_t i);

/* ---- element-wise math (ex_interp_ew.c) -------------------------------------- */

/* Comparison directions and types of stablehlo.compare. */
enum { IC_EQ, IC_NE, IC_GE, IC_GT, IC_LE, IC_LT };
enum { ICT_DEFAULT, ICT_FLOAT, ICT_TOTALORDER, ICT_SIGNED, ICT_UNSIGNED };

/* Whether kind is an element-wise op ex_interp_ew computes. */
bool ex_interp_ew_known(sp_op_kind kind);

/* One element of element-wise op kind: operands a (na of them, of type
 * e; select's predicate is a[0] of i1 type and e is the type of the
 * others) into *r of result type re. cmp and cmpt: compare's direction and
 * type. Returns false when the op is not defined on these types. */
bool ex_interp_ew(sp_op_kind kind, sp_elem e, sp_elem re, const sv *a, uint32_t na, int cmp,
                  int cmpt, sv *r);

/* Converts one scalar of type from to type to (stablehlo.convert). */
sv ex_interp_convert(sp_elem from, sp_elem to, sv s);

/* The bits of one scalar of type e (float types as their IEEE patterns) and
 * back: for bitcast_convert, constants and ULP distances. */
uint64_t ex_interp_bits(sp_elem e, double v);
double ex_interp_from_bits(sp_elem e, uint64_t b);

#endif /* EX_INTERP_INT_H */
