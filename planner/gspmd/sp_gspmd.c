/* SPDX-License-Identifier: Apache-2.0
 * planner: HLO sharding text in and out, tile assignments (iota and explicit
 * lists), and the conversions to and from sdy shardings that XLA's Shardy
 * import and export make (sp_gspmd.h). The iota algebra follows XLA's
 * TileAssignment: an iota is kept canonical (size-one reshape dims dropped,
 * dims that stay adjacent after the transpose merged), and its local mesh is
 * the common factor sequence of its dims and its transposed reshape dims. */
#include "sp_gspmd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ----------------------------------------------------------- */

static cm_status col_error(cm_error *err, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static cm_status col_error(cm_error *err, size_t col, const char *fmt, ...)
{
    char path[32];
    snprintf(path, sizeof path, "col %zu", col + 1);
    va_list ap;
    va_start(ap, fmt);
    cm_status rc = cm_error_setv(err, CM_EINVAL, path, fmt, ap);
    va_end(ap);
    return rc;
}

static int64_t *dup_i64(cm_arena *a, const int64_t *v, uint32_t n)
{
    int64_t *r = cm_arena_alloc(a, sizeof *r * (n + 1u));
    if (r != NULL && n > 0) {
        memcpy(r, v, sizeof *r * n);
    }
    return r;
}

static int32_t *dup_i32(cm_arena *a, const int32_t *v, uint32_t n)
{
    int32_t *r = cm_arena_alloc(a, sizeof *r * (n + 1u));
    if (r != NULL && n > 0) {
        memcpy(r, v, sizeof *r * n);
    }
    return r;
}

/* Product of n sizes, or -1 when it passes SP_HLO_MAX_DEVICES or a size is
 * not positive. */
static int64_t product(const int64_t *v, uint32_t n)
{
    int64_t p = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] <= 0 || !cm_mul_i64(p, v[i], &p) || p > SP_HLO_MAX_DEVICES) {
            return -1;
        }
    }
    return p;
}

/* ---- iota tile assignments ----------------------------------------------------- */

/* XLA's canonical iota: size-one dims removed, and dims that the transpose
 * keeps adjacent and in order merged, repeated until nothing changes; an
 * empty result is [1]. dims and perm are rewritten in place; *n updated. */
static void iota_canonicalize(int64_t *dims, int32_t *perm, uint32_t *n)
{
    if (*n <= 1) {
        if (*n == 0) {
            dims[0] = 1;
            perm[0] = 0;
            *n = 1;
        }
        return;
    }
    int32_t old_to_new[SP_HLO_MAX_DIMS];
    for (;;) {
        bool changed = false;
        uint32_t nn = 0;
        for (uint32_t i = 0; i < *n; i++) {
            old_to_new[i] = dims[i] == 1 ? -1 : (int32_t)nn++;
        }
        if (nn != *n) {
            uint32_t k = 0;
            for (uint32_t i = 0; i < *n; i++) {
                if (old_to_new[i] >= 0) {
                    dims[old_to_new[i]] = dims[i];
                }
                int32_t np = old_to_new[perm[i]];
                if (np >= 0) {
                    perm[k++] = np;
                }
            }
            *n = nn;
        }
        for (uint32_t i = 1, base = 0; i < *n; i++) {
            int32_t bd = perm[base], d = perm[i];
            if (bd + (int32_t)(i - base) == d) {
                dims[bd] *= dims[d];
                dims[d] = 1;
                changed = true;
            } else {
                base = i;
            }
        }
        if (!changed) {
            break;
        }
    }
    if (*n == 0) {
        dims[0] = 1;
        perm[0] = 0;
        *n = 1;
    }
}

int64_t sp_hlo_sharding_device(const sp_hlo_sharding *s, int64_t i)
{
    if (s->kind == SP_HLO_MAXIMAL) {
        return s->device;
    }
    if (s->devices != NULL) {
        return i >= 0 && i < s->n_devices ? s->devices[i] : -1;
    }
    /* the index in the transposed shape, then back in the reshape dims */
    int64_t idx[SP_HLO_MAX_DIMS];
    int64_t lin = i;
    for (uint32_t k = s->n_reshape; k-- > 0;) {
        int64_t size = s->reshape[s->perm[k]];
        idx[s->perm[k]] = lin % size;
        lin /= size;
    }
    int64_t v = 0;
    for (uint32_t k = 0; k < s->n_reshape; k++) {
        v = v * s->reshape[k] + idx[k];
    }
    return v;
}

/* Derives an iota for the explicit list of s when the list is one (the
 * digits of the linear index, minor first, each a constant stride, the
 * strides row-major over some reshape); leaves s unchanged otherwise. */
static cm_status iota_from_list(sp_hlo_sharding *s, cm_arena *a)
{
    int64_t n = s->n_devices;
    const int64_t *l = s->devices;
    if (n <= 0 || l[0] != 0) {
        return CM_OK;
    }
    int64_t sizes[SP_HLO_MAX_DIMS], strides[SP_HLO_MAX_DIMS];
    uint32_t nd = 0;
    int64_t pos = 1;
    while (pos < n) {
        if (nd >= SP_HLO_MAX_DIMS) {
            return CM_OK;
        }
        int64_t stride = l[pos] - l[0];
        if (stride <= 0) {
            return CM_OK;
        }
        int64_t rest = n / pos, t = 1;
        while (t < rest && l[t * pos] == t * stride) {
            t++;
        }
        while (t > 1 && rest % t != 0) {
            t--;
        }
        if (t < 2) {
            return CM_OK;
        }
        sizes[nd] = t;
        strides[nd] = stride;
        nd++;
        pos *= t;
    }
    if (pos != n) {
        return CM_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t lin = i, v = 0;
        for (uint32_t k = 0; k < nd; k++) {
            v += (lin % sizes[k]) * strides[k];
            lin /= sizes[k];
        }
        if (v != l[i]) {
            return CM_OK;
        }
    }
    /* reshape dims: the digits by descending stride, which must be row-major */
    uint32_t order[SP_HLO_MAX_DIMS];
    for (uint32_t k = 0; k < nd; k++) {
        order[k] = k;
    }
    for (uint32_t i = 1; i < nd; i++) {
        for (uint32_t j = i; j > 0 && strides[order[j]] > strides[order[j - 1]]; j--) {
            uint32_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    }
    int64_t expect = 1;
    for (uint32_t k = nd; k-- > 0;) {
        if (strides[order[k]] != expect) {
            return CM_OK;
        }
        expect *= sizes[order[k]];
    }
    int64_t reshape[SP_HLO_MAX_DIMS];
    int32_t perm[SP_HLO_MAX_DIMS], rank_of[SP_HLO_MAX_DIMS];
    for (uint32_t k = 0; k < nd; k++) {
        reshape[k] = sizes[order[k]];
        rank_of[order[k]] = (int32_t)k;
    }
    /* the transposed shape is the digits major first */
    for (uint32_t k = 0; k < nd; k++) {
        perm[k] = rank_of[nd - 1 - k];
    }
    if (nd == 0) {
        reshape[0] = 1;
        perm[0] = 0;
        nd = 1;
    }
    iota_canonicalize(reshape, perm, &nd);
    s->reshape = dup_i64(a, reshape, nd);
    s->perm = dup_i32(a, perm, nd);
    if (s->reshape == NULL || s->perm == NULL) {
        return CM_ENOMEM;
    }
    s->n_reshape = nd;
    return CM_OK;
}

/* ---- normalisation (XLA's PartialTile and Subgroup) ------------------------------- */

/* Materialises the device list of a tiled s (arena). */
static int64_t *materialize(const sp_hlo_sharding *s, cm_arena *a)
{
    int64_t *v = cm_arena_alloc(a, sizeof *v * (size_t)s->n_devices);
    if (v != NULL) {
        for (int64_t i = 0; i < s->n_devices; i++) {
            v[i] = sp_hlo_sharding_device(s, i);
        }
    }
    return v;
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Sorts each replication group of an explicit list (its last dim), as
 * PartialTile does; iota lists are already sorted within groups as XLA keeps
 * them. */
static void sort_groups(sp_hlo_sharding *s)
{
    if (s->devices == NULL || s->n_dims == 0) {
        return;
    }
    int64_t g = s->dims[s->n_dims - 1];
    for (int64_t i = 0; i + g <= s->n_devices; i += g) {
        qsort(s->devices + i, (size_t)g, sizeof(int64_t), cmp_i64);
    }
}

/* After a transpose of the devices: the iota again when there is one, and
 * printed as an iota when the input was one (XLA transposes iotas as iotas). */
static cm_status relist(sp_hlo_sharding *s, cm_arena *a, bool was_iota)
{
    cm_status rc = iota_from_list(s, a);
    if (rc == CM_OK && was_iota && s->n_reshape > 0) {
        s->devices = NULL;
    }
    return rc;
}

/* Normalises a tiled s: drops subgroup dims of size one, merges subgroups of
 * one kind (replicated last), turns an all-replicated or all-manual
 * assignment into {replicated} / {manual}. */
static cm_status normalize(sp_hlo_sharding *s, cm_arena *a)
{
    if (s->replicate_last) {
        int64_t last = s->dims[s->n_dims - 1];
        if (s->n_dims == 1 || last == s->n_devices) {
            s->kind = SP_HLO_REPLICATED;
            return CM_OK;
        }
        if (last == 1) {
            s->n_dims--;
            s->replicate_last = false;
            return CM_OK;
        }
        sort_groups(s);
        return CM_OK;
    }
    if (s->n_subgroups == 0) {
        return CM_OK;
    }
    uint32_t data = s->n_dims - s->n_subgroups;
    int64_t data_prod = 1;
    for (uint32_t i = 0; i < data; i++) {
        data_prod *= s->dims[i];
    }
    bool same = true;
    for (uint32_t i = 1; i < s->n_subgroups; i++) {
        same = same && s->subgroups[i] == s->subgroups[0];
    }
    if (same && data_prod == 1) {
        if (s->subgroups[0] == SP_HLO_SUB_MANUAL) {
            s->kind = SP_HLO_MANUAL;
            return CM_OK;
        }
        if (s->subgroups[0] == SP_HLO_SUB_REPLICATED) {
            s->kind = SP_HLO_REPLICATED;
            return CM_OK;
        }
    }
    /* group the subgroup dims by kind: manual, unreduced, then replicated */
    static const uint8_t kind_order[3] = {SP_HLO_SUB_MANUAL, SP_HLO_SUB_UNREDUCED,
                                          SP_HLO_SUB_REPLICATED};
    uint32_t src_of[SP_HLO_MAX_DIMS], n_t = 0;
    int64_t tdims[SP_HLO_MAX_DIMS], mdims[SP_HLO_MAX_DIMS];
    uint8_t mtypes[SP_HLO_MAX_DIMS];
    uint32_t n_m = data;
    bool needs = false;
    for (uint32_t i = 0; i < data; i++) {
        src_of[n_t] = i;
        tdims[n_t++] = s->dims[i];
        mdims[i] = s->dims[i];
    }
    uint32_t n_kinds = 0;
    for (uint32_t k = 0; k < 3; k++) {
        int64_t size = 1;
        uint32_t count = 0;
        for (uint32_t i = 0; i < s->n_subgroups; i++) {
            if (s->subgroups[i] != kind_order[k]) {
                continue;
            }
            if (s->dims[data + i] == 1) {
                needs = true;
                continue;
            }
            src_of[n_t] = data + i;
            tdims[n_t++] = s->dims[data + i];
            size *= s->dims[data + i];
            count++;
        }
        if (count > 0) {
            mdims[n_m] = size;
            mtypes[n_m - data] = kind_order[k];
            n_m++;
            n_kinds++;
            needs = needs || count > 1;
        }
    }
    for (uint32_t i = 0, k = 0; i < s->n_subgroups && !needs; i++) {
        if (s->dims[data + i] != 1) {
            needs = s->subgroups[i] != mtypes[k++];
        }
    }
    if (!needs) {
        if (s->n_subgroups == 1 && s->subgroups[0] == SP_HLO_SUB_REPLICATED) {
            s->n_subgroups = 0;
            s->replicate_last = true;
            return normalize(s, a);
        }
        return CM_OK;
    }
    /* transpose the assignment into (data dims, subgroup dims by kind) */
    bool was_iota = s->devices == NULL;
    int64_t *src = materialize(s, a);
    int64_t *dst = cm_arena_alloc(a, sizeof *dst * (size_t)s->n_devices);
    if (src == NULL || dst == NULL) {
        return CM_ENOMEM;
    }
    int64_t sstride[SP_HLO_MAX_DIMS];
    int64_t st = 1;
    for (uint32_t i = s->n_dims; i-- > 0;) {
        sstride[i] = st;
        st *= s->dims[i];
    }
    for (int64_t lin = 0; lin < s->n_devices; lin++) {
        int64_t rem = lin, off = 0;
        for (uint32_t k = n_t; k-- > 0;) {
            off += (rem % tdims[k]) * sstride[src_of[k]];
            rem /= tdims[k];
        }
        dst[lin] = src[off];
    }
    s->devices = dst;
    s->reshape = NULL;
    s->perm = NULL;
    s->n_reshape = 0;
    memcpy(s->dims, mdims, sizeof *mdims * n_m);
    s->n_dims = n_m;
    memcpy(s->subgroups, mtypes, n_kinds);
    s->n_subgroups = n_kinds;
    if (n_kinds == 1 && mtypes[0] == SP_HLO_SUB_MANUAL && mdims[n_m - 1] == s->n_devices) {
        s->kind = SP_HLO_MANUAL;
        return CM_OK;
    }
    if (n_kinds == 1 && mtypes[0] == SP_HLO_SUB_REPLICATED) {
        s->n_subgroups = 0;
        s->replicate_last = true;
        cm_status rc = normalize(s, a);
        if (rc == CM_OK && s->kind == SP_HLO_TILED) {
            rc = relist(s, a, was_iota);
        }
        return rc;
    }
    if (n_kinds > 0 && mtypes[n_kinds - 1] == SP_HLO_SUB_REPLICATED && !was_iota) {
        sort_groups(s);
    }
    return relist(s, a, was_iota);
}

/* ---- parser ------------------------------------------------------------------------ */

typedef struct parser {
    const char *t;
    size_t n, i;
    cm_arena *a;
    cm_error *err;
} parser;

static void skip_ws(parser *p)
{
    for (;;) {
        while (p->i < p->n && (p->t[p->i] == ' ' || p->t[p->i] == '\t' || p->t[p->i] == '\n' ||
                               p->t[p->i] == '\r')) {
            p->i++;
        }
        if (p->i + 1 < p->n && p->t[p->i] == '/' && p->t[p->i + 1] == '*') {
            size_t j = p->i + 2;
            while (j + 1 < p->n && !(p->t[j] == '*' && p->t[j + 1] == '/')) {
                j++;
            }
            p->i = j + 1 < p->n ? j + 2 : p->n;
            continue;
        }
        return;
    }
}

static bool eat(parser *p, char c)
{
    skip_ws(p);
    if (p->i < p->n && p->t[p->i] == c) {
        p->i++;
        return true;
    }
    return false;
}

static bool eat_word(parser *p, const char *w)
{
    skip_ws(p);
    size_t l = strlen(w);
    if (p->i + l > p->n || memcmp(p->t + p->i, w, l) != 0) {
        return false;
    }
    char next = p->i + l < p->n ? p->t[p->i + l] : ' ';
    if ((next >= 'a' && next <= 'z') || next == '_' || (next >= '0' && next <= '9')) {
        return false;
    }
    p->i += l;
    return true;
}

static cm_status expect(parser *p, char c)
{
    if (!eat(p, c)) {
        char what[4] = {'\'', c, '\'', '\0'};
        return col_error(p->err, p->i, "expected %s in the HLO sharding", what);
    }
    return CM_OK;
}

static cm_status parse_int(parser *p, int64_t *out)
{
    skip_ws(p);
    size_t start = p->i;
    int64_t v = 0;
    while (p->i < p->n && p->t[p->i] >= '0' && p->t[p->i] <= '9') {
        if (v > (INT64_MAX - 9) / 10) {
            return col_error(p->err, start, "%s is too large", "the number");
        }
        v = v * 10 + (p->t[p->i] - '0');
        p->i++;
    }
    if (p->i == start) {
        return col_error(p->err, start, "expected %s in the HLO sharding", "a number");
    }
    *out = v;
    return CM_OK;
}

/* `[a,b,...]` of up to cap non-negative integers. */
static cm_status parse_int_list(parser *p, int64_t *v, uint32_t cap, uint32_t *n_out,
                                const char *what)
{
    cm_status rc = expect(p, '[');
    uint32_t n = 0;
    if (rc == CM_OK && !eat(p, ']')) {
        do {
            if (n >= cap) {
                return col_error(p->err, p->i, "too many %s", what);
            }
            rc = parse_int(p, &v[n]);
            n++;
        } while (rc == CM_OK && eat(p, ','));
        if (rc == CM_OK) {
            rc = expect(p, ']');
        }
    }
    *n_out = n;
    return rc;
}

/* Skips a balanced `{...}` with quoted strings (metadata). */
static cm_status skip_braces(parser *p)
{
    size_t start = p->i;
    cm_status rc = expect(p, '{');
    int depth = 1;
    while (rc == CM_OK && depth > 0) {
        if (p->i >= p->n) {
            return col_error(p->err, start, "unterminated %s", "metadata");
        }
        char c = p->t[p->i++];
        if (c == '"') {
            while (p->i < p->n && p->t[p->i] != '"') {
                p->i += p->t[p->i] == '\\' ? 2 : 1;
            }
            p->i++;
        } else if (c == '{') {
            depth++;
        } else if (c == '}') {
            depth--;
        }
    }
    return rc;
}

static cm_status parse_devices(parser *p, sp_hlo_sharding *s)
{
    int64_t dims[SP_HLO_MAX_DIMS];
    uint32_t nd = 0;
    size_t at = p->i;
    cm_status rc = parse_int_list(p, dims, SP_HLO_MAX_DIMS, &nd, "tile assignment dims");
    if (rc != CM_OK) {
        return rc;
    }
    if (nd == 0) {
        return col_error(p->err, at, "%s has no dims", "the tile assignment");
    }
    int64_t total = product(dims, nd);
    if (total < 0) {
        return col_error(p->err, at, "%s has a non-positive dim or too many devices",
                         "the tile assignment");
    }
    s->dims = dup_i64(p->a, dims, nd);
    if (s->dims == NULL) {
        return cm_error_oom(p->err);
    }
    s->n_dims = nd;
    s->n_devices = total;
    skip_ws(p);
    if (p->i + 1 < p->n && p->t[p->i] == '<' && p->t[p->i + 1] == '=') {
        p->i += 2;
        int64_t rd[SP_HLO_MAX_DIMS];
        int32_t perm[SP_HLO_MAX_DIMS];
        uint32_t nr = 0;
        at = p->i;
        rc = parse_int_list(p, rd, SP_HLO_MAX_DIMS, &nr, "iota reshape dims");
        if (rc != CM_OK) {
            return rc;
        }
        if (nr == 0 || product(rd, nr) != total) {
            return col_error(p->err, at, "%s do not multiply to the tile assignment's devices",
                             "the iota reshape dims");
        }
        for (uint32_t k = 0; k < nr; k++) {
            perm[k] = (int32_t)k;
        }
        skip_ws(p);
        if (p->i < p->n && p->t[p->i] == 'T') {
            p->i++;
            at = p->i;
            rc = expect(p, '(');
            uint32_t np = 0;
            uint32_t seen[SP_HLO_MAX_DIMS] = {0};
            if (rc == CM_OK) {
                do {
                    int64_t v = 0;
                    rc = parse_int(p, &v);
                    if (rc == CM_OK && (np >= nr || v >= nr || seen[v])) {
                        return col_error(p->err, at, "%s is not a permutation of the reshape dims",
                                         "the iota transpose");
                    }
                    if (rc == CM_OK) {
                        seen[v] = 1;
                        perm[np++] = (int32_t)v;
                    }
                } while (rc == CM_OK && eat(p, ','));
            }
            if (rc == CM_OK) {
                rc = expect(p, ')');
            }
            if (rc == CM_OK && np != nr) {
                return col_error(p->err, at, "%s is not a permutation of the reshape dims",
                                 "the iota transpose");
            }
            if (rc != CM_OK) {
                return rc;
            }
        }
        iota_canonicalize(rd, perm, &nr);
        s->reshape = dup_i64(p->a, rd, nr);
        s->perm = dup_i32(p->a, perm, nr);
        if (s->reshape == NULL || s->perm == NULL) {
            return cm_error_oom(p->err);
        }
        s->n_reshape = nr;
        return CM_OK;
    }
    s->devices = cm_arena_alloc(p->a, sizeof *s->devices * (size_t)total);
    int64_t *sorted = cm_arena_alloc(p->a, sizeof *sorted * (size_t)total);
    if (s->devices == NULL || sorted == NULL) {
        return cm_error_oom(p->err);
    }
    for (int64_t i = 0; i < total; i++) {
        if (i > 0 && (rc = expect(p, ',')) != CM_OK) {
            return rc;
        }
        at = p->i;
        if ((rc = parse_int(p, &s->devices[i])) != CM_OK) {
            return rc;
        }
        if (s->devices[i] >= SP_HLO_MAX_DEVICES) {
            return col_error(p->err, at, "%s is out of range", "the device id");
        }
    }
    memcpy(sorted, s->devices, sizeof *sorted * (size_t)total);
    qsort(sorted, (size_t)total, sizeof *sorted, cmp_i64);
    for (int64_t i = 1; i < total; i++) {
        if (sorted[i] == sorted[i - 1]) {
            return col_error(p->err, at, "%s lists a device twice", "the tile assignment");
        }
    }
    return CM_OK;
}

static cm_status parse_single_v2(parser *p, sp_hlo_sharding *s)
{
    size_t open = p->i;
    cm_status rc = expect(p, '{');
    bool replicated = false, manual = false, unknown = false, maximal = false, have_dev = false,
         tiled = false;
    memset(s, 0, sizeof *s);
    uint8_t subs[SP_HLO_MAX_DIMS];
    uint32_t n_subs = 0;
    while (rc == CM_OK && !eat(p, '}')) {
        size_t at = p->i;
        if (p->i >= p->n) {
            return col_error(p->err, open, "unterminated %s", "HLO sharding");
        }
        if (eat_word(p, "replicated")) {
            replicated = true;
        } else if (eat_word(p, "manual")) {
            manual = true;
        } else if (eat_word(p, "unknown")) {
            unknown = true;
        } else if (eat_word(p, "maximal")) {
            maximal = true;
        } else if (eat_word(p, "device")) {
            rc = expect(p, '=');
            if (rc == CM_OK) {
                rc = parse_int(p, &s->device);
            }
            have_dev = true;
        } else if (eat_word(p, "devices")) {
            rc = expect(p, '=');
            if (rc == CM_OK) {
                rc = parse_devices(p, s);
            }
            tiled = true;
        } else if (eat_word(p, "last_tile_dim_replicate")) {
            s->replicate_last = true;
        } else if (eat_word(p, "last_tile_dims")) {
            rc = expect(p, '=');
            if (rc == CM_OK) {
                rc = expect(p, '{');
            }
            while (rc == CM_OK && !eat(p, '}')) {
                size_t wat = p->i;
                if (n_subs >= SP_HLO_MAX_DIMS) {
                    return col_error(p->err, wat, "too many %s", "last_tile_dims");
                }
                if (eat_word(p, "manual")) {
                    subs[n_subs++] = SP_HLO_SUB_MANUAL;
                } else if (eat_word(p, "replicated")) {
                    subs[n_subs++] = SP_HLO_SUB_REPLICATED;
                } else if (eat_word(p, "unreduced")) {
                    subs[n_subs++] = SP_HLO_SUB_UNREDUCED;
                } else {
                    return col_error(p->err, wat, "unknown %s (manual, replicated, unreduced)",
                                     "last_tile_dims type");
                }
                if (!eat(p, ',')) {
                    rc = expect(p, '}');
                    break;
                }
            }
        } else if (eat_word(p, "metadata")) {
            rc = expect(p, '=');
            if (rc == CM_OK) {
                rc = skip_braces(p);
            }
        } else if (eat_word(p, "shard_as") || eat_word(p, "shard_like")) {
            int64_t ignored;
            rc = parse_int(p, &ignored);
        } else {
            return col_error(p->err, at, "unexpected %s in the HLO sharding", "text");
        }
        if (rc == CM_OK) {
            (void)eat(p, ',');
        }
    }
    if (rc != CM_OK) {
        return rc;
    }
    int n_kinds = replicated + manual + unknown + maximal + tiled;
    if (n_kinds != 1) {
        return col_error(p->err, open,
                         "%s needs exactly one of replicated, manual, unknown, "
                         "maximal and devices=",
                         "an HLO sharding");
    }
    if (maximal) {
        if (!have_dev) {
            return col_error(p->err, open, "%s needs device=N", "a maximal sharding");
        }
        s->kind = SP_HLO_MAXIMAL;
        return CM_OK;
    }
    if (have_dev) {
        return col_error(p->err, open, "%s is only for a maximal sharding", "device=");
    }
    if (!tiled) {
        if (s->replicate_last || n_subs > 0) {
            return col_error(p->err, open, "%s needs devices=", "a last tile dim");
        }
        s->kind = replicated ? SP_HLO_REPLICATED : manual ? SP_HLO_MANUAL : SP_HLO_UNKNOWN;
        return CM_OK;
    }
    s->kind = SP_HLO_TILED;
    if (s->replicate_last && n_subs > 0) {
        return col_error(p->err, open, "%s",
                         "last_tile_dim_replicate and last_tile_dims cannot be combined");
    }
    if (n_subs >= s->n_dims) {
        return col_error(p->err, open, "%s name more dims than the tile assignment has",
                         "last_tile_dims");
    }
    if (n_subs > 0) {
        s->subgroups = cm_arena_memdup(p->a, subs, n_subs, 1);
        if (s->subgroups == NULL) {
            return cm_error_oom(p->err);
        }
        s->n_subgroups = n_subs;
    }
    if (normalize(s, p->a) != CM_OK ||
        (s->devices != NULL && s->n_reshape == 0 && iota_from_list(s, p->a) != CM_OK)) {
        return cm_error_oom(p->err);
    }
    return CM_OK;
}

/* ---- V3 (named) text ---------------------------------------------------------------- */

/* `'name'` into an arena string. */
static cm_status v3_name(parser *p, const char **out)
{
    skip_ws(p);
    size_t at = p->i;
    if (p->i >= p->n || p->t[p->i] != '\'') {
        return col_error(p->err, at, "expected %s", "a quoted axis name");
    }
    size_t start = ++p->i;
    while (p->i < p->n && p->t[p->i] != '\'') {
        p->i++;
    }
    if (p->i >= p->n || p->i == start) {
        return col_error(p->err, at, "unterminated or empty %s", "axis name");
    }
    *out = cm_arena_strndup(p->a, p->t + start, p->i - start);
    p->i++;
    return *out != NULL ? CM_OK : cm_error_oom(p->err);
}

/* `'a'` or `'a':(2)4`. */
static cm_status v3_ref(parser *p, sp_axis_ref *r)
{
    cm_status rc = v3_name(p, &r->name);
    r->pre_size = 0;
    r->size = 0;
    if (rc == CM_OK && eat(p, ':')) {
        rc = expect(p, '(');
        if (rc == CM_OK) {
            rc = parse_int(p, &r->pre_size);
        }
        if (rc == CM_OK) {
            rc = expect(p, ')');
        }
        if (rc == CM_OK) {
            rc = parse_int(p, &r->size);
        }
        if (rc == CM_OK && (r->pre_size < 1 || r->size < 1)) {
            return col_error(p->err, p->i, "%s", "a sub-axis needs positive sizes");
        }
    }
    return rc;
}

/* `{'a', 'b'}` (open with `?` when dims) into a new axis list. */
static cm_status v3_ref_list(parser *p, sp_axis_ref **out, uint32_t *n_out, bool *open)
{
    cm_status rc = expect(p, '{');
    sp_axis_ref refs[SP_HLO_MAX_DIMS];
    uint32_t n = 0;
    if (open != NULL) {
        *open = false;
    }
    while (rc == CM_OK && !eat(p, '}')) {
        if (open != NULL && eat(p, '?')) {
            *open = true;
        } else if (n >= SP_HLO_MAX_DIMS) {
            return col_error(p->err, p->i, "too many %s", "axes");
        } else {
            rc = v3_ref(p, &refs[n++]);
        }
        if (rc == CM_OK && !eat(p, ',')) {
            rc = expect(p, '}');
            break;
        }
    }
    if (rc != CM_OK) {
        return rc;
    }
    *out = cm_arena_memdup(p->a, refs, n, sizeof *refs);
    *n_out = n;
    return n == 0 || *out != NULL ? CM_OK : cm_error_oom(p->err);
}

/* After `{mesh`: the mesh, then the dims or `replicated` / `manual`, then
 * the named axis lists, up to the closing brace. */
static cm_status parse_v3(parser *p, sp_hlo_sharding *s)
{
    sp_mesh *mesh = cm_arena_zalloc(p->a, sizeof *mesh);
    sp_sharding *sh = cm_arena_zalloc(p->a, sizeof *sh);
    sp_mesh_axis axes[SP_HLO_MAX_DIMS];
    if (mesh == NULL || sh == NULL) {
        return cm_error_oom(p->err);
    }
    cm_status rc = expect(p, '[');
    uint32_t n_axes = 0;
    while (rc == CM_OK && !eat(p, ']')) {
        if (n_axes >= SP_HLO_MAX_DIMS) {
            return col_error(p->err, p->i, "too many %s", "mesh axes");
        }
        rc = v3_name(p, &axes[n_axes].name);
        if (rc == CM_OK) {
            rc = expect(p, '=');
        }
        if (rc == CM_OK) {
            rc = parse_int(p, &axes[n_axes].size);
        }
        if (rc == CM_OK && axes[n_axes].size < 1) {
            return col_error(p->err, p->i, "%s", "a mesh axis needs a positive size");
        }
        n_axes++;
        if (rc == CM_OK && !eat(p, ',')) {
            rc = expect(p, ']');
            break;
        }
    }
    if (rc != CM_OK) {
        return rc;
    }
    mesh->axes = cm_arena_memdup(p->a, axes, n_axes, sizeof *axes);
    mesh->n_axes = n_axes;
    if (n_axes > 0 && mesh->axes == NULL) {
        return cm_error_oom(p->err);
    }
    sh->mesh = mesh;
    s->kind = SP_HLO_NAMED;
    s->named = sh;
    bool have_dims = false;
    while (rc == CM_OK && !eat(p, '}')) {
        rc = expect(p, ',');
        skip_ws(p);
        size_t at = p->i;
        if (rc != CM_OK) {
            break;
        }
        if (eat_word(p, "device_ids")) {
            int64_t ids[4096];
            uint32_t n = 0;
            rc = expect(p, '=');
            if (rc == CM_OK) {
                rc = expect(p, '(');
            }
            while (rc == CM_OK && !eat(p, ')')) {
                if (n >= 4096) {
                    return col_error(p->err, p->i, "too many %s", "device ids");
                }
                rc = parse_int(p, &ids[n++]);
                if (rc == CM_OK && !eat(p, ',')) {
                    rc = expect(p, ')');
                    break;
                }
            }
            if (rc == CM_OK) {
                mesh->device_ids = dup_i64(p->a, ids, n);
                mesh->n_device_ids = n;
                rc = mesh->device_ids != NULL ? CM_OK : cm_error_oom(p->err);
            }
        } else if (eat_word(p, "replicated")) {
            skip_ws(p);
            if (p->i < p->n && p->t[p->i] == '=') {
                p->i++;
                rc = v3_ref_list(p, &sh->replicated, &sh->n_replicated, NULL);
            } else {
                s->named_all = true;
            }
        } else if (eat_word(p, "manual")) {
            skip_ws(p);
            if (p->i < p->n && p->t[p->i] == '=') {
                p->i++;
                rc = v3_ref_list(p, &s->manual, &s->n_manual, NULL);
            } else {
                s->named_all = true;
                s->named_manual = true;
            }
        } else if (eat_word(p, "unreduced")) {
            rc = expect(p, '=');
            if (rc == CM_OK) {
                rc = v3_ref_list(p, &sh->unreduced, &sh->n_unreduced, NULL);
            }
        } else if (p->i < p->n && p->t[p->i] == '[' && !have_dims) {
            p->i++;
            sp_dim_sharding dims[SP_HLO_MAX_DIMS];
            uint32_t rank = 0;
            while (rc == CM_OK && !eat(p, ']')) {
                if (rank >= SP_HLO_MAX_DIMS) {
                    return col_error(p->err, p->i, "too many %s", "dims");
                }
                bool open = false;
                rc = v3_ref_list(p, &dims[rank].axes, &dims[rank].n_axes, &open);
                dims[rank].is_closed = !open;
                dims[rank].priority = -1;
                rank++;
                if (rc == CM_OK && !eat(p, ',')) {
                    rc = expect(p, ']');
                    break;
                }
            }
            if (rc == CM_OK) {
                sh->dims = cm_arena_memdup(p->a, dims, rank, sizeof *dims);
                sh->rank = rank;
                have_dims = true;
                rc = rank == 0 || sh->dims != NULL ? CM_OK : cm_error_oom(p->err);
            }
        } else {
            return col_error(p->err, at, "unexpected %s in the HLO sharding", "text");
        }
    }
    if (rc == CM_OK && !have_dims && !s->named_all) {
        return col_error(p->err, p->i, "%s",
                         "a named sharding needs its dims, replicated or manual");
    }
    if (rc == CM_OK) {
        cm_error e;
        cm_error_clear(&e);
        if (sp_mesh_verify(mesh, &e) != CM_OK) {
            return cm_error_set(p->err, CM_EINVAL, "col 1", "the mesh: %s", e.msg);
        }
        if (!s->named_all && sp_sharding_verify(sh, mesh, sh->rank, NULL, &e) != CM_OK) {
            return cm_error_set(p->err, CM_EINVAL, "col 1", "%s", e.msg);
        }
    }
    return rc;
}

/* `{single_device[device_id=N]}` / `{maximal_mesh[device_id=N]}` after the word. */
static cm_status parse_v3_device(parser *p, sp_hlo_sharding *s)
{
    cm_status rc = expect(p, '[');
    if (rc == CM_OK && !eat_word(p, "device_id")) {
        return col_error(p->err, p->i, "expected %s", "device_id=");
    }
    if (rc == CM_OK) {
        rc = expect(p, '=');
    }
    if (rc == CM_OK) {
        rc = parse_int(p, &s->device);
    }
    if (rc == CM_OK) {
        rc = expect(p, ']');
    }
    if (rc == CM_OK) {
        rc = expect(p, '}');
    }
    s->kind = SP_HLO_MAXIMAL;
    return rc;
}

static cm_status parse_single(parser *p, sp_hlo_sharding *s)
{
    size_t open = p->i;
    cm_status rc = expect(p, '{');
    memset(s, 0, sizeof *s);
    if (rc == CM_OK && eat_word(p, "mesh")) {
        return parse_v3(p, s);
    }
    if (rc == CM_OK && eat_word(p, "single_device")) {
        s->single_device = true;
        return parse_v3_device(p, s);
    }
    if (rc == CM_OK && eat_word(p, "maximal_mesh")) {
        return parse_v3_device(p, s);
    }
    p->i = open;
    return parse_single_v2(p, s);
}

cm_status sp_hlo_sharding_parse(const char *text, size_t len, cm_arena *a, sp_hlo_sharding **out,
                                cm_error *err)
{
    parser p = {text, len, 0, a, err};
    sp_hlo_sharding *s = cm_arena_zalloc(a, sizeof *s);
    if (s == NULL) {
        return cm_error_oom(err);
    }
    skip_ws(&p);
    size_t open = p.i;
    cm_status rc;
    if (p.i < p.n && p.t[p.i] == '{') {
        size_t save = p.i;
        p.i++;
        skip_ws(&p);
        if (p.i < p.n && (p.t[p.i] == '{' || p.t[p.i] == '}')) {
            /* a tuple: {{...}, {...}} or the empty tuple {} */
            s->kind = SP_HLO_TUPLE;
            uint32_t cap = 0;
            rc = CM_OK;
            while (rc == CM_OK && !eat(&p, '}')) {
                if (s->n_elems >= SP_HLO_MAX_TUPLE) {
                    return col_error(err, p.i, "too many %s", "tuple elements");
                }
                if (s->n_elems == cap) {
                    uint32_t nc = cap == 0 ? 8 : cap * 2;
                    sp_hlo_sharding *ne = cm_arena_alloc(a, sizeof *ne * nc);
                    if (ne == NULL) {
                        return cm_error_oom(err);
                    }
                    if (s->n_elems > 0) {
                        memcpy(ne, s->elems, sizeof *ne * s->n_elems);
                    }
                    s->elems = ne;
                    cap = nc;
                }
                rc = parse_single(&p, &s->elems[s->n_elems]);
                s->n_elems++;
                if (rc == CM_OK && !eat(&p, ',')) {
                    rc = expect(&p, '}');
                    break;
                }
            }
        } else {
            p.i = save;
            rc = parse_single(&p, s);
        }
    } else {
        rc = col_error(err, open, "expected %s", "'{' to start the HLO sharding");
    }
    if (rc == CM_OK) {
        skip_ws(&p);
        if (p.i != p.n) {
            rc = col_error(err, p.i, "unexpected %s after the HLO sharding", "text");
        }
    }
    if (rc == CM_OK) {
        *out = s;
    }
    return rc;
}

/* ---- printer ------------------------------------------------------------------------ */

static void print_list(cm_buf *b, const int64_t *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0) {
            cm_buf_putc(b, ',');
        }
        cm_buf_put_i64(b, v[i]);
    }
}

static void v3_axis(cm_buf *b, const sp_axis_ref *r)
{
    cm_buf_printf(b, "'%s'", r->name);
    if (r->pre_size != 0) {
        cm_buf_printf(b, ":(%lld)%lld", (long long)r->pre_size, (long long)r->size);
    }
}

static void v3_axes(cm_buf *b, const char *key, const sp_axis_ref *axes, uint32_t n)
{
    cm_buf_printf(b, ", %s={", key);
    for (uint32_t i = 0; i < n; i++) {
        cm_buf_puts(b, i > 0 ? ", " : "");
        v3_axis(b, &axes[i]);
    }
    cm_buf_putc(b, '}');
}

void sp_hlo_v3_print(const sp_sharding *s, const sp_mesh *mesh, const sp_axis_ref *manual,
                     uint32_t n_manual, bool simplify, cm_buf *b)
{
    if (mesh->n_axes == 0 && mesh->n_device_ids > 0) {
        cm_buf_printf(b, "{single_device[device_id=%lld]}", (long long)mesh->device_ids[0]);
        return;
    }
    bool replicated = s->n_unreduced == 0;
    for (uint32_t d = 0; d < s->rank && replicated; d++) {
        replicated = s->dims[d].n_axes == 0 && s->dims[d].is_closed;
    }
    if (simplify && replicated) {
        cm_buf_puts(b, "{mesh[], replicated}");
        return;
    }
    cm_buf_puts(b, "{mesh[");
    for (uint32_t i = 0; i < mesh->n_axes; i++) {
        cm_buf_printf(b, "%s'%s'=%lld", i > 0 ? "," : "", mesh->axes[i].name,
                      (long long)mesh->axes[i].size);
    }
    cm_buf_putc(b, ']');
    if (mesh->n_device_ids > 0) {
        cm_buf_puts(b, ", device_ids=(");
        for (uint32_t i = 0; i < mesh->n_device_ids; i++) {
            cm_buf_printf(b, "%s%lld", i > 0 ? "," : "", (long long)mesh->device_ids[i]);
        }
        cm_buf_putc(b, ')');
    }
    /* every axis manual and nothing else: XLA's fully manual form */
    bool all_manual = n_manual == mesh->n_axes && n_manual > 0 && s->n_replicated == 0 &&
                      s->n_unreduced == 0;
    for (uint32_t d = 0; d < s->rank && all_manual; d++) {
        all_manual = s->dims[d].n_axes == 0;
    }
    for (uint32_t k = 0; k < n_manual && all_manual; k++) {
        all_manual = manual[k].pre_size == 0;
    }
    if (all_manual) {
        cm_buf_puts(b, ", manual}");
        return;
    }
    if (s->rank == 0 && n_manual == 0 && s->n_replicated == 0 && s->n_unreduced == 0) {
        cm_buf_puts(b, ", replicated}");
        return;
    }
    cm_buf_puts(b, ", [");
    for (uint32_t d = 0; d < s->rank; d++) {
        const sp_dim_sharding *ds = &s->dims[d];
        cm_buf_puts(b, d > 0 ? ", {" : "{");
        for (uint32_t k = 0; k < ds->n_axes; k++) {
            cm_buf_puts(b, k > 0 ? ", " : "");
            v3_axis(b, &ds->axes[k]);
        }
        if (!ds->is_closed) {
            cm_buf_puts(b, ds->n_axes > 0 ? ", ?" : "?");
        }
        cm_buf_putc(b, '}');
    }
    cm_buf_putc(b, ']');
    if (s->n_replicated > 0) {
        v3_axes(b, "replicated", s->replicated, s->n_replicated);
    }
    if (s->n_unreduced > 0) {
        v3_axes(b, "unreduced", s->unreduced, s->n_unreduced);
    }
    if (n_manual > 0) {
        v3_axes(b, "manual", manual, n_manual);
    }
    cm_buf_putc(b, '}');
}

/* Whether tiled s splits no data dimension and its subgroups are all
 * unreduced. */
static bool all_unreduced(const sp_hlo_sharding *s)
{
    if (s->kind != SP_HLO_TILED || s->replicate_last || s->n_subgroups == 0 ||
        s->n_subgroups > s->n_dims) {
        return false;
    }
    for (uint32_t i = 0; i < s->n_dims - s->n_subgroups; i++) {
        if (s->dims[i] != 1) {
            return false;
        }
    }
    for (uint32_t i = 0; i < s->n_subgroups; i++) {
        if (s->subgroups[i] != SP_HLO_SUB_UNREDUCED) {
            return false;
        }
    }
    return true;
}

static void print_single(const sp_hlo_sharding *s, cm_buf *b)
{
    static const char *const sub_names[] = {"replicated", "manual", "unreduced"};
    switch (s->kind) {
    case SP_HLO_REPLICATED:
        cm_buf_puts(b, "{replicated}");
        return;
    case SP_HLO_MANUAL:
        cm_buf_puts(b, "{manual}");
        return;
    case SP_HLO_UNKNOWN:
        cm_buf_puts(b, "{unknown}");
        return;
    case SP_HLO_MAXIMAL:
        cm_buf_printf(b, "{maximal device=%lld}", (long long)s->device);
        return;
    case SP_HLO_NAMED:
        if (s->named_all) {
            /* `{mesh[...], replicated}`: the mesh part, then the word */
            cm_buf t;
            cm_buf_init(&t);
            sp_sharding none = *s->named;
            none.rank = 0;
            none.n_replicated = 0;
            none.n_unreduced = 0;
            sp_hlo_v3_print(&none, s->named->mesh, NULL, 0, false, &t);
            /* rank 0 prints "{mesh[...], replicated}"; manual takes the word's place */
            size_t word = strlen("replicated}");
            if (!t.oom && t.len >= word) {
                cm_buf_append(b, t.data, t.len - word);
                cm_buf_puts(b, s->named_manual ? "manual}" : "replicated}");
            }
            cm_buf_fini(&t);
            return;
        }
        sp_hlo_v3_print(s->named, s->named->mesh, s->manual, s->n_manual, false, b);
        return;
    case SP_HLO_TILED:
    case SP_HLO_TUPLE:
        break;
    }
    if (all_unreduced(s)) {
        /* XLA keeps a tile assignment whose only split is unreduced as its
         * Unreduced sharding, as it keeps an all-manual one as Manual */
        cm_buf_puts(b, "{unreduced}");
        return;
    }
    cm_buf_puts(b, "{devices=[");
    print_list(b, s->dims, s->n_dims);
    cm_buf_putc(b, ']');
    if (s->devices != NULL) {
        print_list(b, s->devices, (uint32_t)s->n_devices);
    } else {
        cm_buf_puts(b, "<=[");
        print_list(b, s->reshape, s->n_reshape);
        cm_buf_putc(b, ']');
        if (s->n_reshape > 1) {
            cm_buf_puts(b, "T(");
            for (uint32_t i = 0; i < s->n_reshape; i++) {
                cm_buf_printf(b, "%s%d", i > 0 ? "," : "", (int)s->perm[i]);
            }
            cm_buf_putc(b, ')');
        }
    }
    if (s->replicate_last) {
        cm_buf_puts(b, " last_tile_dim_replicate");
    }
    if (s->n_subgroups > 0) {
        cm_buf_puts(b, " last_tile_dims={");
        for (uint32_t i = 0; i < s->n_subgroups; i++) {
            cm_buf_printf(b, "%s%s", i > 0 ? ", " : "", sub_names[s->subgroups[i] % 3]);
        }
        cm_buf_putc(b, '}');
    }
    cm_buf_putc(b, '}');
}

void sp_hlo_sharding_print(const sp_hlo_sharding *s, cm_buf *b)
{
    if (s->kind != SP_HLO_TUPLE) {
        print_single(s, b);
        return;
    }
    cm_buf_putc(b, '{');
    for (uint32_t i = 0; i < s->n_elems; i++) {
        if (i > 0) {
            cm_buf_puts(b, ", ");
            if (i % 5 == 0) {
                cm_buf_printf(b, "/*index=%u*/", i);
            }
        }
        print_single(&s->elems[i], b);
    }
    cm_buf_putc(b, '}');
}

/* ---- analysis -------------------------------------------------------------------------- */

uint32_t sp_hlo_common_factors(const int64_t *a, uint32_t na, const int64_t *b, uint32_t nb,
                               int64_t *out, uint32_t cap)
{
    uint32_t i1 = 0, i2 = 0, n = 0;
    int64_t s1 = 1, s2 = 1, acc = 1;
    while (i1 < na && a[i1] == 1) {
        i1++;
    }
    while (i2 < nb && b[i2] == 1) {
        i2++;
    }
    while (i1 < na || i2 < nb) {
        if (i1 < na && s1 == acc) {
            s1 *= a[i1++];
        }
        if (i2 < nb && s2 == acc) {
            s2 *= b[i2++];
        }
        int64_t f1 = s1 / acc, f2 = s2 / acc;
        int64_t small = f1 < f2 ? f1 : f2, large = f1 < f2 ? f2 : f1;
        if (small <= 1 || large % small != 0 || n >= cap) {
            return 0;
        }
        out[n++] = small;
        acc *= small;
        while (i1 < na && a[i1] == 1) {
            i1++;
        }
        while (i2 < nb && b[i2] == 1) {
            i2++;
        }
    }
    return n;
}

typedef struct sub_dim {
    int64_t tile_dim;    /* index in the tile assignment dims */
    int64_t tile_sub;    /* sub-dim within it, minor first */
    int64_t reshape_dim; /* index in the reshape dims */
    int64_t size;
} sub_dim;

/* XLA's ordered sub-dims of an iota tile assignment: the common factors of
 * its dims and transposed reshape dims, each tagged with the tile dim and
 * reshape dim it lies in, sorted by (reshape dim, tile dim). */
static uint32_t ordered_sub_dims(const sp_hlo_sharding *s, sub_dim *out)
{
    int64_t dev_shape[SP_HLO_MAX_DIMS], sizes[SP_HLO_MAX_DIMS];
    for (uint32_t i = 0; i < s->n_reshape; i++) {
        dev_shape[i] = s->reshape[s->perm[i]];
    }
    uint32_t n =
        sp_hlo_common_factors(s->dims, s->n_dims, dev_shape, s->n_reshape, sizes, SP_HLO_MAX_DIMS);
    if (n == 0) {
        return 0;
    }
    int64_t td = (int64_t)s->n_dims - 1, tp = (int64_t)s->n_reshape - 1;
    int64_t acc_t = 1, acc_d = 1, sub = 0;
    for (uint32_t k = n; k-- > 0;) {
        while (td > 0 && s->dims[td] == 1) {
            td--;
        }
        out[n - 1 - k] = (sub_dim){td, sub++, s->perm[tp], sizes[k]};
        acc_t *= sizes[k];
        acc_d *= sizes[k];
        if (s->dims[td] == acc_t) {
            td--;
            acc_t = 1;
            sub = 0;
        }
        if (tp >= 0 && dev_shape[tp] == acc_d) {
            acc_d = 1;
            tp--;
        }
        if (td < 0 && k > 0) {
            return 0;
        }
    }
    for (uint32_t i = 1; i < n; i++) {
        for (uint32_t j = i; j > 0; j--) {
            sub_dim *x = &out[j - 1], *y = &out[j];
            if (x->reshape_dim < y->reshape_dim ||
                (x->reshape_dim == y->reshape_dim && x->tile_dim <= y->tile_dim)) {
                break;
            }
            sub_dim t = *x;
            *x = *y;
            *y = t;
        }
    }
    return n;
}

static cm_status not_iota(cm_error *err)
{
    return cm_error_set(err, CM_EINVAL, NULL, "%s",
                        "the tile assignment is not an iota of mesh axes (XLA's import "
                        "cannot convert it either)");
}

cm_status sp_hlo_local_mesh(const sp_hlo_sharding *s, int64_t *sizes_out, uint32_t *n_out,
                            cm_error *err)
{
    if (s->kind != SP_HLO_TILED || s->n_reshape == 0) {
        return not_iota(err);
    }
    sub_dim sd[SP_HLO_MAX_DIMS];
    uint32_t n = ordered_sub_dims(s, sd);
    if (n == 0) {
        return not_iota(err);
    }
    for (uint32_t i = 0; i < n; i++) {
        sizes_out[i] = sd[i].size;
    }
    *n_out = n;
    return CM_OK;
}

/* ---- to sdy ------------------------------------------------------------------------------ */

static sp_sharding *new_sharding(cm_arena *a, const char *mesh_name, uint32_t rank, bool closed)
{
    sp_sharding *r = cm_arena_zalloc(a, sizeof *r);
    if (r == NULL) {
        return NULL;
    }
    r->mesh_name = mesh_name;
    r->rank = rank;
    r->dims = cm_arena_zalloc(a, sizeof *r->dims * (rank + 1u));
    if (r->dims == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < rank; i++) {
        r->dims[i].is_closed = closed;
        r->dims[i].priority = -1;
    }
    return r;
}

cm_status sp_hlo_to_sdy(const sp_hlo_sharding *s, const sp_mesh *global, const char *mesh_name,
                        const char *maximal_name, uint32_t rank, bool open_dims, cm_arena *a,
                        sp_sharding **out, cm_error *err)
{
    sp_sharding *r;
    switch (s->kind) {
    case SP_HLO_TUPLE:
        return cm_error_set(err, CM_EINVAL, NULL, "a tuple sharding has no single sdy sharding");
    case SP_HLO_MAXIMAL:
        r = new_sharding(a, maximal_name, 0, true);
        break;
    case SP_HLO_REPLICATED:
    case SP_HLO_MANUAL:
        r = new_sharding(a, mesh_name, rank, !open_dims);
        break;
    case SP_HLO_UNKNOWN:
        r = new_sharding(a, mesh_name, rank, false);
        break;
    case SP_HLO_NAMED:
        if (s->named_all) {
            r = new_sharding(a, mesh_name, rank, true);
        } else if (s->named->rank != rank) {
            return cm_error_set(err, CM_EINVAL, NULL,
                                "the sharding has %u dims but the tensor has rank %u",
                                s->named->rank, rank);
        } else {
            r = sp_sharding_clone(a, s->named);
            if (r != NULL) {
                r->mesh = NULL;
                r->mesh_name = mesh_name;
                /* the clone shares the axis names: give them a's lifetime */
                for (uint32_t d = 0; d <= r->rank && r != NULL; d++) {
                    sp_axis_ref *ax = d < r->rank ? r->dims[d].axes : r->replicated;
                    uint32_t n = d < r->rank ? r->dims[d].n_axes : r->n_replicated;
                    for (uint32_t k = 0; k < n && r != NULL; k++) {
                        ax[k].name = cm_arena_strdup(a, ax[k].name);
                        r = ax[k].name != NULL ? r : NULL;
                    }
                }
                for (uint32_t k = 0; r != NULL && k < r->n_unreduced; k++) {
                    r->unreduced[k].name = cm_arena_strdup(a, r->unreduced[k].name);
                    r = r->unreduced[k].name != NULL ? r : NULL;
                }
            }
        }
        break;
    case SP_HLO_TILED:
    default:
        r = NULL;
        break;
    }
    if (s->kind != SP_HLO_TILED) {
        if (r == NULL) {
            return cm_error_oom(err);
        }
        *out = r;
        return CM_OK;
    }
    uint32_t data = s->n_dims - s->n_subgroups - (s->replicate_last ? 1u : 0u);
    if (data != rank) {
        return cm_error_set(err, CM_EINVAL, NULL,
                            "the sharding tiles %u dims but the tensor has rank %u", data, rank);
    }
    sub_dim sd[SP_HLO_MAX_DIMS];
    uint32_t n = s->n_reshape > 0 ? ordered_sub_dims(s, sd) : 0;
    if (n == 0) {
        return not_iota(err);
    }
    int64_t local_total = 1;
    for (uint32_t i = 0; i < n; i++) {
        local_total *= sd[i].size;
    }
    if (local_total != sp_mesh_size(global)) {
        return cm_error_set(err, CM_EINVAL, NULL,
                            "the sharding spans %lld devices but the module's mesh has %lld",
                            (long long)local_total, (long long)sp_mesh_size(global));
    }
    /* 1. each local axis as global axes or sub-axes, in mesh order */
    sp_axis_ref refs[SP_HLO_MAX_DIMS * 2];
    uint32_t ref_start[SP_HLO_MAX_DIMS + 1], n_refs = 0;
    uint32_t g = 0;
    int64_t pre = 1;
    for (uint32_t l = 0; l < n; l++) {
        ref_start[l] = n_refs;
        int64_t rem = sd[l].size;
        while (rem > 1) {
            if (g >= global->n_axes) {
                return cm_error_set(err, CM_EINVAL, NULL, "the sharding does not fit the mesh");
            }
            int64_t grem = global->axes[g].size / pre;
            if (grem == 1) {
                g++;
                pre = 1;
                continue;
            }
            int64_t x = rem, y = grem;
            while (y != 0) {
                int64_t t = x % y;
                x = y;
                y = t;
            }
            if (x == 1 || n_refs >= SP_HLO_MAX_DIMS * 2) {
                return cm_error_set(err, CM_EINVAL, NULL,
                                    "incompatible local and global axis sizes: %lld vs %lld",
                                    (long long)rem, (long long)grem);
            }
            refs[n_refs].name = global->axes[g].name;
            if (x == grem && pre == 1) {
                refs[n_refs].pre_size = 0;
                refs[n_refs].size = global->axes[g].size;
            } else {
                refs[n_refs].pre_size = pre;
                refs[n_refs].size = x;
            }
            n_refs++;
            pre *= x;
            rem /= x;
        }
    }
    ref_start[n] = n_refs;
    r = new_sharding(a, mesh_name, rank, !open_dims);
    if (r == NULL) {
        return cm_error_oom(err);
    }
    /* 2. per tensor dim, its local axes from major (highest sub-dim) to minor */
    for (uint32_t d = 0; d < rank; d++) {
        int32_t by_sub[SP_HLO_MAX_DIMS];
        int64_t max_sub = -1;
        for (uint32_t l = 0; l < n; l++) {
            if (sd[l].tile_dim == (int64_t)d) {
                by_sub[sd[l].tile_sub] = (int32_t)l;
                max_sub = sd[l].tile_sub > max_sub ? sd[l].tile_sub : max_sub;
            }
        }
        uint32_t count = 0;
        for (int64_t k = max_sub; k >= 0; k--) {
            count += ref_start[by_sub[k] + 1] - ref_start[by_sub[k]];
        }
        sp_dim_sharding *ds = &r->dims[d];
        ds->axes = cm_arena_alloc(a, sizeof *ds->axes * (count + 1u));
        if (ds->axes == NULL) {
            return cm_error_oom(err);
        }
        for (int64_t k = max_sub; k >= 0; k--) {
            for (uint32_t j = ref_start[by_sub[k]]; j < ref_start[by_sub[k] + 1]; j++) {
                ds->axes[ds->n_axes++] = refs[j];
            }
        }
    }
    /* 3. the subgroup dims: replicated and unreduced axes listed (XLA picks
     * the subgroup type by the sub-dim index) */
    uint32_t n_rep = 0, n_unr = 0;
    sp_axis_ref rep[SP_HLO_MAX_DIMS * 2], unr[SP_HLO_MAX_DIMS * 2];
    for (uint32_t l = 0; l < n; l++) {
        if (sd[l].tile_dim < (int64_t)rank) {
            continue;
        }
        int64_t gi = sd[l].tile_sub;
        if (gi >= (int64_t)s->n_subgroups) {
            continue;
        }
        for (uint32_t j = ref_start[l]; j < ref_start[l + 1]; j++) {
            if (s->subgroups[gi] == SP_HLO_SUB_REPLICATED) {
                rep[n_rep++] = refs[j];
            } else if (s->subgroups[gi] == SP_HLO_SUB_UNREDUCED) {
                unr[n_unr++] = refs[j];
            }
        }
    }
    if (n_rep > 0) {
        r->replicated = cm_arena_memdup(a, rep, n_rep, sizeof *rep);
        r->n_replicated = n_rep;
    }
    if (n_unr > 0) {
        r->unreduced = cm_arena_memdup(a, unr, n_unr, sizeof *unr);
        r->n_unreduced = n_unr;
    }
    if ((n_rep > 0 && r->replicated == NULL) || (n_unr > 0 && r->unreduced == NULL)) {
        return cm_error_oom(err);
    }
    *out = r;
    return CM_OK;
}

/* ---- from sdy -------------------------------------------------------------------------- */

static bool ref_equal(const sp_axis_ref *x, const sp_axis_ref *y, const sp_mesh *m)
{
    if (strcmp(x->name, y->name) != 0) {
        return false;
    }
    int32_t ai = sp_mesh_axis_index(m, x->name);
    int64_t full = ai >= 0 ? m->axes[ai].size : 0;
    int64_t xp = x->pre_size == 0 ? 1 : x->pre_size, yp = y->pre_size == 0 ? 1 : y->pre_size;
    int64_t xs = x->pre_size == 0 ? full : x->size, ys = y->pre_size == 0 ? full : y->size;
    return xp == yp && xs == ys;
}

static int64_t ref_size(const sp_axis_ref *r, const sp_mesh *m)
{
    if (r->pre_size != 0) {
        return r->size;
    }
    int32_t ai = sp_mesh_axis_index(m, r->name);
    return ai >= 0 ? m->axes[ai].size : 0;
}

cm_status sp_hlo_from_sdy(const sp_sharding *s, const sp_mesh *mesh, const char *const *manual,
                          uint32_t n_manual, cm_arena *a, sp_hlo_sharding **out, cm_error *err)
{
    sp_hlo_sharding *h = cm_arena_zalloc(a, sizeof *h);
    if (h == NULL) {
        return cm_error_oom(err);
    }
    *out = h;
    if (mesh->n_axes == 0) {
        if (mesh->n_device_ids > 0) {
            h->kind = SP_HLO_MAXIMAL;
            h->device = mesh->device_ids[0];
        } else {
            h->kind = SP_HLO_REPLICATED;
        }
        return CM_OK;
    }
    if (n_manual == mesh->n_axes) {
        h->kind = SP_HLO_MANUAL;
        return CM_OK;
    }
    if (s->n_unreduced > 0 && n_manual > 0) {
        return cm_error_set(err, CM_EINVAL, NULL, "%s",
                            "a sharding with both unreduced and manual axes has no HLO form");
    }
    /* every axis ref the sharding places, with its position */
    enum { CAP = SP_HLO_MAX_DIMS * 2 };
    sp_axis_ref placed[CAP];
    uint32_t n_placed = 0;
    int64_t dims[SP_HLO_MAX_DIMS + 3];
    uint8_t types[3];
    uint32_t n_dims = s->rank, n_types = 0;
    if (s->rank > SP_HLO_MAX_DIMS) {
        return cm_error_set(err, CM_EINVAL, NULL, "the sharding's rank is too large");
    }
    for (uint32_t d = 0; d < s->rank; d++) {
        dims[d] = 1;
        for (uint32_t k = 0; k < s->dims[d].n_axes; k++) {
            if (n_placed >= CAP || sp_mesh_axis_index(mesh, s->dims[d].axes[k].name) < 0) {
                return cm_error_set(err, CM_EINVAL, NULL,
                                    "unknown or too many axes in the sharding");
            }
            dims[d] *= ref_size(&s->dims[d].axes[k], mesh);
            placed[n_placed++] = s->dims[d].axes[k];
        }
    }
    if (n_manual > 0) {
        types[n_types++] = SP_HLO_SUB_MANUAL;
        dims[n_dims] = 1;
        for (uint32_t k = 0; k < n_manual; k++) {
            int32_t ai = sp_mesh_axis_index(mesh, manual[k]);
            if (ai < 0 || n_placed >= CAP) {
                return cm_error_set(err, CM_EINVAL, NULL, "unknown manual axis %s", manual[k]);
            }
            dims[n_dims] *= mesh->axes[ai].size;
            placed[n_placed++] = (sp_axis_ref){mesh->axes[ai].name, 0, mesh->axes[ai].size};
        }
        n_dims++;
    }
    if (s->n_unreduced > 0) {
        types[n_types++] = SP_HLO_SUB_UNREDUCED;
        dims[n_dims] = 1;
        for (uint32_t k = 0; k < s->n_unreduced; k++) {
            if (n_placed >= CAP || sp_mesh_axis_index(mesh, s->unreduced[k].name) < 0) {
                return cm_error_set(err, CM_EINVAL, NULL, "unknown unreduced axis");
            }
            dims[n_dims] *= ref_size(&s->unreduced[k], mesh);
            placed[n_placed++] = s->unreduced[k];
        }
        n_dims++;
    }
    /* the mesh axes, each split at the sub-axis boundaries the sharding uses */
    sp_axis_ref used[CAP];
    uint32_t n_used = n_placed;
    memcpy(used, placed, sizeof *used * n_placed);
    for (uint32_t k = 0; k < s->n_replicated && n_used < CAP; k++) {
        used[n_used++] = s->replicated[k];
    }
    int64_t reshape[CAP];
    int32_t perm[CAP];
    uint32_t n_reshape = 0, shard_pos = n_placed, rep_pos = n_placed;
    int64_t rep_total = 1;
    int32_t pos_of[CAP];
    for (uint32_t i = 0; i < CAP; i++) {
        pos_of[i] = -1;
    }
    for (uint32_t ai = 0; ai < mesh->n_axes; ai++) {
        int64_t full = mesh->axes[ai].size;
        int64_t cuts[CAP + 2];
        uint32_t n_cuts = 0;
        cuts[n_cuts++] = 1;
        cuts[n_cuts++] = full;
        for (uint32_t k = 0; k < n_used; k++) {
            if (strcmp(used[k].name, mesh->axes[ai].name) != 0 || used[k].pre_size == 0 ||
                n_cuts + 2 > CAP + 2) {
                continue;
            }
            cuts[n_cuts++] = used[k].pre_size;
            cuts[n_cuts++] = used[k].pre_size * used[k].size;
        }
        qsort(cuts, n_cuts, sizeof *cuts, cmp_i64);
        for (uint32_t c = 0; c + 1 < n_cuts; c++) {
            if (cuts[c + 1] == cuts[c]) {
                continue;
            }
            if (n_reshape >= CAP || cuts[c + 1] % cuts[c] != 0) {
                return cm_error_set(err, CM_EINVAL, NULL, "overlapping sub-axes in the sharding");
            }
            sp_axis_ref piece = {
                mesh->axes[ai].name, cuts[c] == 1 && cuts[c + 1] == full ? 0 : cuts[c],
                cuts[c + 1] == full && cuts[c] == 1 ? full : cuts[c + 1] / cuts[c]};
            reshape[n_reshape] = cuts[c + 1] / cuts[c];
            int32_t where = -1;
            for (uint32_t k = 0; k < n_placed && where < 0; k++) {
                if (ref_equal(&placed[k], &piece, mesh)) {
                    where = (int32_t)k;
                }
            }
            if (where < 0) {
                if (rep_pos >= CAP) {
                    return cm_error_set(err, CM_EINVAL, NULL, "too many axes");
                }
                perm[rep_pos++] = (int32_t)n_reshape;
                rep_total *= reshape[n_reshape];
            } else {
                perm[where] = (int32_t)n_reshape;
                pos_of[where] = (int32_t)n_reshape;
            }
            n_reshape++;
        }
    }
    for (uint32_t k = 0; k < n_placed; k++) {
        if (pos_of[k] < 0) {
            return cm_error_set(err, CM_EINVAL, NULL, "a sharding axis does not match the mesh");
        }
    }
    (void)shard_pos;
    if (rep_total > 1) {
        dims[n_dims++] = rep_total;
        types[n_types++] = SP_HLO_SUB_REPLICATED;
    }
    if (rep_pos != n_reshape || n_dims > SP_HLO_MAX_DIMS || n_reshape > SP_HLO_MAX_DIMS) {
        return cm_error_set(err, CM_EINVAL, NULL, "the sharding does not cover the mesh");
    }
    h->kind = SP_HLO_TILED;
    h->n_devices = sp_mesh_size(mesh);
    h->dims = dup_i64(a, dims, n_dims);
    h->n_dims = n_dims;
    if (h->dims == NULL) {
        return cm_error_oom(err);
    }
    if (mesh->n_device_ids > 0) {
        /* the device ids laid out over the reshape dims, transposed */
        sp_hlo_sharding tmp = {0};
        tmp.kind = SP_HLO_TILED;
        tmp.reshape = reshape;
        tmp.perm = perm;
        tmp.n_reshape = n_reshape;
        h->devices = cm_arena_alloc(a, sizeof *h->devices * (size_t)h->n_devices);
        if (h->devices == NULL) {
            return cm_error_oom(err);
        }
        for (int64_t i = 0; i < h->n_devices; i++) {
            int64_t at = sp_hlo_sharding_device(&tmp, i);
            h->devices[i] = at < (int64_t)mesh->n_device_ids ? mesh->device_ids[at] : at;
        }
    } else {
        iota_canonicalize(reshape, perm, &n_reshape);
        h->reshape = dup_i64(a, reshape, n_reshape);
        h->perm = dup_i32(a, perm, n_reshape);
        h->n_reshape = n_reshape;
        if (h->reshape == NULL || h->perm == NULL) {
            return cm_error_oom(err);
        }
    }
    if (n_types > 0) {
        h->subgroups = cm_arena_memdup(a, types, n_types, 1);
        if (h->subgroups == NULL) {
            return cm_error_oom(err);
        }
        h->n_subgroups = n_types;
    }
    if (normalize(h, a) != CM_OK) {
        return cm_error_oom(err);
    }
    if (h->devices != NULL && h->n_reshape == 0 && iota_from_list(h, a) != CM_OK) {
        return cm_error_oom(err);
    }
    return CM_OK;
}
