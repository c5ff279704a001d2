/* SPDX-License-Identifier: Apache-2.0
 * executor: the interpreter's uniform quantized element types
 * (`!quant.uniform<i8:f32, 0.1:-30>`, per axis `<i8:f32:0, {0.1:-30,0.5:-20}>`,
 * a storage range `<i8<-127:127>:f32, ...>`), as StableHLO's spec defines
 * them: a quantized value is held as its storage integer; `quantize` and
 * `dequantize` (spec.md, "Quantized computations") compute in the expressed
 * type, rounding to it after each step. */
#include "ex_interp_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n') {
        p++;
    }
    return p;
}

/* An integer at *p (optional sign), advanced past it; false when none. */
static bool read_int(const char **p, int64_t *out)
{
    const char *s = skip_ws(*p);
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s) {
        return false;
    }
    *out = v;
    *p = end;
    return true;
}

/* The storage type: iN or uN, N in 2..32. */
static bool read_storage(const char **p, iquant *q)
{
    const char *s = skip_ws(*p);
    bool uns = *s == 'u';
    if (*s != 'i' && *s != 'u') {
        return false;
    }
    s++;
    char *end;
    long w = strtol(s, &end, 10);
    if (end == s) {
        return false;
    }
    static const struct {
        long w;
        sp_elem si, su;
    } ws[] = {{2, SP_ELEM_I2, SP_ELEM_UI2}, {4, SP_ELEM_I4, SP_ELEM_UI4},
              {8, SP_ELEM_I8, SP_ELEM_UI8}, {16, SP_ELEM_I16, SP_ELEM_UI16},
              {32, SP_ELEM_I32, SP_ELEM_UI32}};
    size_t i = 0;
    while (i < sizeof ws / sizeof ws[0] && ws[i].w != w) {
        i++;
    }
    if (i == sizeof ws / sizeof ws[0]) {
        return false;
    }
    q->storage = uns ? ws[i].su : ws[i].si;
    q->smin = uns ? 0 : -((int64_t)1 << (w - 1));
    q->smax = uns ? ((int64_t)1 << w) - 1 : ((int64_t)1 << (w - 1)) - 1;
    s = end;
    if (*s == '<') { /* a narrower storage range */
        s++;
        int64_t lo, hi;
        if (!read_int(&s, &lo) || *skip_ws(s) != ':') {
            return false;
        }
        s = skip_ws(s) + 1;
        if (!read_int(&s, &hi) || *skip_ws(s) != '>' || lo > hi || lo < q->smin || hi > q->smax) {
            return false;
        }
        q->smin = lo;
        q->smax = hi;
        s = skip_ws(s) + 1;
    }
    *p = s;
    return true;
}

/* One `scale[:zero_point]` at *p. */
static bool read_param(const char **p, double *scale, int64_t *zp)
{
    const char *s = skip_ws(*p);
    char *end;
    double v = strtod(s, &end);
    if (end == s || !(v > 0.0) || !isfinite(v)) {
        return false;
    }
    *scale = v;
    *zp = 0;
    s = skip_ws(end);
    if (*s == ':') {
        s++;
        if (!read_int(&s, zp)) {
            return false;
        }
    }
    *p = s;
    return true;
}

bool ex_iquant_parse(const char *text, iquant *q, cm_arena *ar)
{
    memset(q, 0, sizeof *q);
    q->qdim = -1;
    const char *p = strstr(text, "!quant.uniform<");
    if (p == NULL) {
        return false;
    }
    p += strlen("!quant.uniform<");
    if (!read_storage(&p, q)) {
        return false;
    }
    p = skip_ws(p);
    if (*p != ':') {
        return false;
    }
    p = skip_ws(p + 1);
    size_t n = 0;
    while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= '0' && p[n] <= '9')) {
        n++;
    }
    q->expressed = sp_elem_of_name(p, n);
    if (!sp_float_is(q->expressed)) {
        return false;
    }
    p = skip_ws(p + n);
    if (*p == ':') {
        p++;
        int64_t d;
        if (!read_int(&p, &d) || d < 0 || d >= SP_MAX_RANK) {
            return false;
        }
        q->qdim = (int32_t)d;
        p = skip_ws(p);
    }
    if (*p != ',') {
        return false;
    }
    p = skip_ws(p + 1);
    bool list = *p == '{';
    /* at most one parameter per character of the list: a bounded count */
    size_t cap = list ? strlen(p) / 2u + 1u : 1u;
    q->scale = cm_arena_alloc(ar, sizeof(double) * cap);
    q->zp = cm_arena_alloc(ar, sizeof(int64_t) * cap);
    if (q->scale == NULL || q->zp == NULL) {
        return false;
    }
    if (list != (q->qdim >= 0)) {
        return false; /* per-axis parameters need a quantized dimension, and back */
    }
    if (list) {
        p++;
        for (;;) {
            if (q->n == cap || !read_param(&p, &q->scale[q->n], &q->zp[q->n])) {
                return false;
            }
            q->n++;
            p = skip_ws(p);
            if (*p != ',') {
                break;
            }
            p++;
        }
        if (*p != '}') {
            return false;
        }
    } else {
        if (!read_param(&p, &q->scale[0], &q->zp[0])) {
            return false;
        }
        q->n = 1;
    }
    for (uint32_t i = 0; i < q->n; i++) {
        if (q->zp[i] < q->smin || q->zp[i] > q->smax) {
            return false;
        }
    }
    return true;
}

double ex_iquant_dequantize(const iquant *q, int64_t s, uint32_t i)
{
    sp_elem e = q->expressed;
    double sub = et_round(e, (double)(s - q->zp[i]));
    return et_round(e, sub * et_round(e, q->scale[i]));
}

int64_t ex_iquant_quantize(const iquant *q, double x, uint32_t i)
{
    sp_elem e = q->expressed;
    double v = et_round(e, x / et_round(e, q->scale[i]));
    v = et_round(e, v + et_round(e, (double)q->zp[i]));
    double lo = et_round(e, (double)q->smin), hi = et_round(e, (double)q->smax);
    if (isnan(v)) {
        v = 0.0; /* spec: undefined; the storage zero */
    }
    v = v < lo ? lo : v > hi ? hi : v;
    return (int64_t)nearbyint(v);
}
