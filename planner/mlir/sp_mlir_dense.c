/* SPDX-License-Identifier: Apache-2.0
 * planner: the elements of a dense<...> attribute, decoded exactly from the
 * body the reader keeps verbatim: integers without a detour through double
 * (INT64_MAX, 2^53 + 1 and UINT64_MAX stay themselves), floats as the bit
 * patterns of their element type (a hex literal inside a list is a bit
 * pattern, as MLIR reads `dense<[0x7FC00000, 1.0]>`), complex pairs, and
 * the quoted hex form `dense<"0x...">` of raw little-endian bytes (one
 * element's bytes are a splat). See sp_mlir_dense_values in sp_mlir.h. */
#include "sp_mlir.h"
#include "sp_float.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct dec {
    const sp_type *t;
    sp_elem part;     /* element type of one scalar: the complex's part type */
    uint32_t bits;    /* width of one scalar */
    bool is_float;
    bool is_signed;
    uint64_t *out;
    size_t n, cap;    /* scalars decoded, capacity */
    cm_error *err;
} dec;

static cm_status bad(dec *d, const char *what)
{
    return cm_error_set(d->err, CM_EINVAL, NULL, "dense<...> of %s: %s", d->t->text, what);
}

static cm_status push(dec *d, uint64_t x)
{
    if (d->n == d->cap) {
        return bad(d, "more elements than its type holds");
    }
    d->out[d->n++] = x;
    return CM_OK;
}

/* The scalar at *s (decimal integer or float, hex bit pattern, true/false,
 * inf/nan), advanced past it. */
static cm_status scalar(dec *d, const char **s)
{
    const char *p = *s;
    uint64_t mask = d->bits >= 64 ? UINT64_MAX : (((uint64_t)1 << d->bits) - 1u);
    if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
        *s = p + (p[0] == 't' ? 4 : 5);
        return push(d, p[0] == 't' ? 1u : 0u);
    }
    bool neg = *p == '-';
    const char *q = neg || *p == '+' ? p + 1 : p;
    if (q[0] == '0' && (q[1] == 'x' || q[1] == 'X')) {
        /* a bit pattern (floats) or a hex integer */
        char *end;
        uint64_t v = strtoull(q + 2, &end, 16);
        if (end == q + 2) {
            return bad(d, "malformed hex literal");
        }
        *s = end;
        return push(d, (neg ? 0u - v : v) & mask);
    }
    if (!d->is_float) {
        uint64_t u = 0;
        const char *r = q;
        while (*r >= '0' && *r <= '9') {
            unsigned dv = (unsigned)(*r - '0');
            if (u > (UINT64_MAX - dv) / 10u) {
                return bad(d, "integer out of range");
            }
            u = u * 10u + dv;
            r++;
        }
        if (r == q || *r == '.' || *r == 'e' || *r == 'E') {
            return bad(d, "expected an integer element");
        }
        bool fits = neg ? (d->is_signed && (d->bits >= 64 ? u <= (uint64_t)INT64_MAX + 1u
                                                           : u <= ((uint64_t)1 << (d->bits - 1))))
                        : (d->bits >= 64 || u <= (d->is_signed && d->bits > 1
                                                      ? ((uint64_t)1 << (d->bits - 1)) - 1u
                                                      : mask));
        if (!fits) {
            return bad(d, "integer out of range of its element type");
        }
        *s = r;
        return push(d, (neg ? 0u - u : u) & mask);
    }
    char *end;
    double v = strtod(p, &end);
    if (end == p) {
        return bad(d, "expected a number");
    }
    *s = end;
    return push(d, sp_float_encode(d->part, v));
}

static cm_status hex_bytes(dec *d, const char *p, const char *e, size_t count)
{
    size_t nhex = (size_t)(e - p);
    if (nhex % 2 != 0) {
        return bad(d, "odd number of hex digits");
    }
    size_t bytes = nhex / 2, width = (d->bits + 7u) / 8u;
    size_t scalars = bytes / width;
    if (bytes % width != 0) {
        return bad(d, "hex data is not a whole number of elements");
    }
    size_t per = d->t->elem == SP_ELEM_C64 || d->t->elem == SP_ELEM_C128 ? 2 : 1;
    if (scalars != per && scalars != count * per) {
        return bad(d, "hex data size does not match the type");
    }
    for (size_t i = 0; i < scalars; i++) {
        uint64_t x = 0;
        for (size_t b = 0; b < width; b++) {
            unsigned hi, lo;
            char c1 = p[2 * (i * width + b)], c2 = p[2 * (i * width + b) + 1];
            if (sscanf((char[3]){c1, c2, 0}, "%1x%1x", &hi, &lo) != 2) {
                return bad(d, "bad hex digit");
            }
            x |= (uint64_t)(hi * 16u + lo) << (8u * b);
        }
        if (push(d, x) != CM_OK) {
            return CM_EINVAL;
        }
    }
    return CM_OK;
}

cm_status sp_mlir_dense_values(const sp_module *m, const sp_attr *a, cm_arena *arena,
                               uint64_t **out, size_t *n_out, cm_error *err)
{
    *out = NULL;
    *n_out = 0;
    if (a == NULL || a->kind != SP_ATTR_DENSE || a->u.dense.body == NULL) {
        return cm_error_set(err, CM_EINVAL, NULL, "not a dense<...> attribute");
    }
    dec d;
    memset(&d, 0, sizeof d);
    d.t = &m->types[a->u.dense.type];
    d.err = err;
    if (d.t->kind != SP_TYPE_TENSOR) {
        return bad(&d, "its type is not a ranked tensor");
    }
    sp_elem e = d.t->elem;
    d.part = e == SP_ELEM_C64 ? SP_ELEM_F32 : e == SP_ELEM_C128 ? SP_ELEM_F64 : e;
    switch (d.part) {
    case SP_ELEM_I1: d.bits = 1; break;
    case SP_ELEM_I2: d.bits = 2; d.is_signed = true; break;
    case SP_ELEM_I4: d.bits = 4; d.is_signed = true; break;
    case SP_ELEM_I8: d.bits = 8; d.is_signed = true; break;
    case SP_ELEM_I16: d.bits = 16; d.is_signed = true; break;
    case SP_ELEM_I32: d.bits = 32; d.is_signed = true; break;
    case SP_ELEM_I64: d.bits = 64; d.is_signed = true; break;
    case SP_ELEM_INDEX: d.bits = 64; d.is_signed = true; break;
    case SP_ELEM_UI2: d.bits = 2; break;
    case SP_ELEM_UI4: d.bits = 4; break;
    case SP_ELEM_UI8: d.bits = 8; break;
    case SP_ELEM_UI16: d.bits = 16; break;
    case SP_ELEM_UI32: d.bits = 32; break;
    case SP_ELEM_UI64: d.bits = 64; break;
    default:
        if (!sp_float_is(d.part)) {
            return bad(&d, "its element type is not decoded");
        }
        d.bits = sp_float_bits(d.part);
        d.is_float = true;
        break;
    }
    int64_t count = 1;
    for (uint32_t i = 0; i < d.t->rank; i++) {
        if (d.t->dims[i] < 0 || !cm_mul_i64(count, d.t->dims[i], &count) ||
            count > (int64_t)1 << 32) {
            return bad(&d, "dynamic or too many elements");
        }
    }
    size_t per = e == SP_ELEM_C64 || e == SP_ELEM_C128 ? 2 : 1;
    d.cap = (size_t)count * per;
    d.out = cm_arena_alloc(arena, sizeof(uint64_t) * (d.cap + per));
    if (d.out == NULL) {
        return cm_error_oom(err);
    }
    d.cap += per; /* room for a splat of an empty tensor */
    const char *p = a->u.dense.body;
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') {
        p++;
    }
    cm_status st = CM_OK;
    if (*p == '"') {
        const char *q = p + 1;
        const char *end = strchr(q, '"');
        if (end == NULL || q[0] != '0' || (q[1] != 'x' && q[1] != 'X')) {
            return bad(&d, "a quoted body must be \"0x\" and hex digits");
        }
        st = hex_bytes(&d, q + 2, end, (size_t)count);
    } else {
        while (st == CM_OK && *p != '\0') {
            char c = *p;
            if (c == '[' || c == ']' || c == ',' || c == ' ' || c == '\n' || c == '\t' ||
                c == '\r' || c == '(' || c == ')') {
                p++;
                continue;
            }
            st = scalar(&d, &p);
        }
    }
    if (st != CM_OK) {
        return st;
    }
    if (d.n == per && (size_t)count != 1) {
        /* a splat: every element alike (none for an empty tensor) */
        for (size_t i = per; i < (size_t)count * per; i++) {
            d.out[i] = d.out[i % per];
        }
        d.n = (size_t)count * per;
    } else if (d.n != (size_t)count * per) {
        return bad(&d, "element count does not match the type");
    }
    *out = d.out;
    *n_out = d.n;
    return CM_OK;
}
