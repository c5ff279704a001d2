/* SPDX-License-Identifier: Apache-2.0
 * planner: a tensor sharding against its mesh and type, with the checks and
 * messages of Shardy's verifier (verifiers.cc, verifyTensorShardingAttr):
 * the mesh is known; maximal meshes and non-tensor types carry only empty
 * shardings; the rank matches; priorities are sane; each axis-ref list names
 * known axes, repeats none and has no two mergeable sub-axes in a row;
 * replicated and unreduced axes are in mesh order; every sub-axis is well
 * formed, does not overlap another and is not used with its full axis. */
#include "sp_verify_int.h"

#include <stdio.h>
#include <string.h>

/* An axis ref resolved against the mesh: index, pre-size, size (a full axis
 * is (1, axis size)); full marks refs written without a sub-axis. */
typedef struct rref {
    int32_t axis; /* -1: unknown name */
    int64_t pre, size;
    bool full;
    const sp_axis_ref *r;
} rref;

static rref resolve(const sp_mesh *m, const sp_axis_ref *r)
{
    rref x = {sp_mesh_axis_index(m, r->name), 1, 0, r->pre_size == 0, r};
    if (x.full) {
        x.size = x.axis >= 0 ? m->axes[x.axis].size : 0;
    } else {
        x.pre = r->pre_size;
        x.size = r->size;
    }
    return x;
}

static bool rref_eq(const rref *a, const rref *b)
{
    return a->axis == b->axis && a->full == b->full && a->pre == b->pre && a->size == b->size;
}

/* Shardy's mesh order: by axis, then pre-size, then size. */
static bool rref_less(const rref *a, const rref *b)
{
    if (a->axis != b->axis) {
        return a->axis < b->axis;
    }
    if (a->pre != b->pre) {
        return a->pre < b->pre;
    }
    return a->size < b->size;
}

void sp_verify_ref_str(const sp_axis_ref *r, char *buf, size_t cap)
{
    if (r->pre_size != 0) {
        snprintf(buf, cap, "\"%s\":(%lld)%lld", r->name != NULL ? r->name : "?",
                 (long long)r->pre_size, (long long)r->size);
    } else {
        snprintf(buf, cap, "\"%s\"", r->name != NULL ? r->name : "?");
    }
}

/* State across the lists of one sharding (Shardy's seenAxisRefs). */
typedef struct seen {
    rref *v;
    uint32_t n, cap;
} seen;

static bool list_ok(const sp_mesh *m, const sp_axis_ref *refs, uint32_t n, seen *s, char *msg,
                    size_t cap)
{
    char b1[160], b2[160];
    const rref *prev_sub = NULL;
    for (uint32_t i = 0; i < n; i++) {
        rref x = resolve(m, &refs[i]);
        if (refs[i].name == NULL || x.axis < 0) {
            snprintf(msg, cap, "unknown axis name: \"%s\"",
                     refs[i].name != NULL ? refs[i].name : "?");
            return false;
        }
        for (uint32_t k = 0; k < s->n; k++) {
            if (rref_eq(&s->v[k], &x)) {
                sp_verify_ref_str(&refs[i], b1, sizeof b1);
                snprintf(msg, cap, "duplicate axis ref: %s", b1);
                return false;
            }
        }
        if (s->n < s->cap) {
            s->v[s->n++] = x;
        }
        if (x.full) {
            prev_sub = NULL;
            continue;
        }
        if (prev_sub != NULL && prev_sub->axis == x.axis && prev_sub->pre * prev_sub->size == x.pre) {
            sp_verify_ref_str(prev_sub->r, b1, sizeof b1);
            sp_verify_ref_str(&refs[i], b2, sizeof b2);
            snprintf(msg, cap, "two consecutive sub-axes can be merged: %s, %s", b1, b2);
            return false;
        }
        prev_sub = &s->v[s->n - 1];
    }
    return true;
}

static bool sorted_list_ok(const sp_mesh *m, const sp_axis_ref *refs, uint32_t n, seen *s,
                           const char *what, char *msg, size_t cap)
{
    for (uint32_t i = 1; i < n; i++) {
        rref a = resolve(m, &refs[i - 1]), b = resolve(m, &refs[i]);
        if (a.axis >= 0 && b.axis >= 0 && rref_less(&b, &a)) {
            snprintf(msg, cap, "%s axes are not ordered w.r.t. mesh", what);
            return false;
        }
    }
    return list_ok(m, refs, n, s, msg, cap);
}

/* The sub-axes of each mesh axis, in mesh order (Shardy's verifySubAxes). */
static bool sub_axes_ok(const sp_mesh *m, const seen *s, char *msg, size_t cap)
{
    char b1[160], b2[160];
    for (uint32_t a = 0; a < m->n_axes; a++) {
        int64_t axis_size = m->axes[a].size;
        bool has_full = false, has_sub = false;
        for (uint32_t k = 0; k < s->n; k++) {
            if (s->v[k].axis == (int32_t)a) {
                has_full = has_full || s->v[k].full;
                has_sub = has_sub || !s->v[k].full;
            }
        }
        if (has_sub && has_full) {
            snprintf(msg, cap, "both sub-axis and full-axis are used for axis name: \"%s\"",
                     m->axes[a].name);
            return false;
        }
        /* walk the sub-axes in mesh order (selection: the lists are short) */
        const rref *prev = NULL;
        for (;;) {
            const rref *next = NULL;
            for (uint32_t k = 0; k < s->n; k++) {
                const rref *x = &s->v[k];
                if (x->axis != (int32_t)a || x->full || (prev != NULL && !rref_less(prev, x))) {
                    continue;
                }
                if (next == NULL || rref_less(x, next)) {
                    next = x;
                }
            }
            if (next == NULL) {
                break;
            }
            sp_verify_ref_str(next->r, b1, sizeof b1);
            int64_t np;
            if (next->pre < 1) {
                snprintf(msg, cap, "sub-axis pre-size must be at least 1: %s", b1);
                return false;
            }
            if (next->size <= 1) {
                snprintf(msg, cap, "sub-axis sizes must be greater than 1: %s", b1);
                return false;
            }
            if (!cm_mul_i64(next->pre, next->size, &np) || axis_size % np != 0) {
                snprintf(msg, cap,
                         "sub-axis next pre-size %lld doesn't divide the size of the full axis "
                         "%lld: %s",
                         (long long)(next->pre * (next->size <= INT64_MAX / next->pre
                                                      ? next->size
                                                      : 1)),
                         (long long)axis_size, b1);
                return false;
            }
            if (next->size == axis_size) {
                snprintf(msg, cap, "sub-axis size is equal to the full axis size: %s", b1);
                return false;
            }
            if (prev != NULL && prev->pre * prev->size > next->pre) {
                sp_verify_ref_str(prev->r, b2, sizeof b2);
                snprintf(msg, cap, "overlapping sub-axes: %s, %s", b2, b1);
                return false;
            }
            prev = next;
        }
    }
    return true;
}

bool sp_verify_sharding(const sp_sharding *s, const sp_mesh *mesh, const sp_type *t, char *msg,
                        size_t cap)
{
    if (mesh == NULL) {
        snprintf(msg, cap, "unknown mesh: @%s", s->mesh_name != NULL ? s->mesh_name : "?");
        return false;
    }
    bool maximal = mesh->n_axes == 0 && mesh->n_device_ids == 1;
    bool replicated_only = s->n_replicated == 0 && s->n_unreduced == 0;
    for (uint32_t d = 0; d < s->rank && replicated_only; d++) {
        replicated_only = s->dims[d].n_axes == 0;
    }
    if (maximal || (t == NULL && replicated_only)) {
        if (s->rank != 0 || s->n_replicated != 0 || s->n_unreduced != 0) {
            snprintf(msg, cap, "a maximal sharding can only have a sharding with rank 0 and no "
                               "replicated or unreduced axes.");
            return false;
        }
        return true;
    }
    if (t == NULL || t->kind != SP_TYPE_TENSOR) {
        bool unranked = t != NULL && strncmp(t->text, "tensor<*", 8) == 0;
        if (unranked) {
            snprintf(msg, cap, "only ranked tensors can have a sharding. type: %s", t->text);
            return false;
        }
        if (s->rank != 0 || s->n_replicated != 0 || s->n_unreduced != 0) {
            snprintf(msg, cap,
                     "non-shaped tensors can only have a sharding with rank 0 and no "
                     "replicated or unreduced axes. type: %s",
                     t != NULL ? t->text : "none");
            return false;
        }
        return true;
    }
    if (s->rank != t->rank) {
        snprintf(msg, cap, "sharding doesn't match tensor rank: %u != %u", s->rank, t->rank);
        return false;
    }
    enum { MAXREFS = 256 };
    rref buf[MAXREFS];
    seen sn = {buf, 0, MAXREFS};
    for (uint32_t d = 0; d < s->rank; d++) {
        const sp_dim_sharding *ds = &s->dims[d];
        if (ds->priority >= 0 || ds->priority < -1) {
            if (ds->priority < -1) {
                snprintf(msg, cap, "dim %u has a negative priority", d);
                return false;
            }
            if (ds->is_closed && ds->n_axes == 0) {
                snprintf(msg, cap, "dim %u is empty and closed but has a priority", d);
                return false;
            }
        }
        if (!list_ok(mesh, ds->axes, ds->n_axes, &sn, msg, cap)) {
            return false;
        }
    }
    if (!sorted_list_ok(mesh, s->replicated, s->n_replicated, &sn, "replicated", msg, cap) ||
        !sorted_list_ok(mesh, s->unreduced, s->n_unreduced, &sn, "unreduced", msg, cap)) {
        return false;
    }
    return sub_axes_ok(mesh, &sn, msg, cap);
}

/* Sorts v (n entries) ascending: a heap sort, since device id lists can be
 * long. */
static void sort_i64(int64_t *v, size_t n)
{
    for (size_t start = n / 2; start-- > 0;) {
        size_t root = start;
        for (size_t child; (child = 2 * root + 1) < n; root = child) {
            if (child + 1 < n && v[child] < v[child + 1]) {
                child++;
            }
            if (v[root] >= v[child]) {
                break;
            }
            int64_t t = v[root];
            v[root] = v[child];
            v[child] = t;
        }
    }
    for (size_t end = n; end-- > 1;) {
        int64_t t = v[0];
        v[0] = v[end];
        v[end] = t;
        size_t root = 0;
        for (size_t child; (child = 2 * root + 1) < end; root = child) {
            if (child + 1 < end && v[child] < v[child + 1]) {
                child++;
            }
            if (v[root] >= v[child]) {
                break;
            }
            t = v[root];
            v[root] = v[child];
            v[child] = t;
        }
    }
}

bool sp_verify_mesh(const sp_mesh *m, char *msg, size_t cap)
{
    for (uint32_t i = 0; i < m->n_device_ids; i++) {
        if (m->device_ids[i] < 0) {
            snprintf(msg, cap, "device id must be non-negative, got: %lld",
                     (long long)m->device_ids[i]);
            return false;
        }
    }
    if (m->n_axes == 0) {
        if (m->n_device_ids > 1) {
            snprintf(msg, cap, "axes is empty and device_ids has more than one element");
            return false;
        }
        return true;
    }
    int64_t total = 1;
    for (uint32_t i = 0; i < m->n_axes; i++) {
        if (m->axes[i].size < 1) {
            snprintf(msg, cap, "axis size must be at least 1, got: %lld",
                     (long long)m->axes[i].size);
            return false;
        }
        for (uint32_t j = 0; j < i; j++) {
            if (strcmp(m->axes[j].name, m->axes[i].name) == 0) {
                snprintf(msg, cap, "duplicate axis name: \"%s\"", m->axes[i].name);
                return false;
            }
        }
        if (!cm_mul_i64(total, m->axes[i].size, &total)) {
            snprintf(msg, cap, "the product of axis sizes overflows 64 bits");
            return false;
        }
    }
    if (m->n_device_ids == 0) {
        return true;
    }
    if (total != (int64_t)m->n_device_ids) {
        snprintf(msg, cap,
                 "total product of axis sizes must match total number of device ids, got: "
                 "%lld != %u",
                 (long long)total, m->n_device_ids);
        return false;
    }
    int64_t *sorted = cm_alloc(sizeof(int64_t) * m->n_device_ids);
    if (sorted == NULL) {
        snprintf(msg, cap, "out of memory");
        return false;
    }
    memcpy(sorted, m->device_ids, sizeof(int64_t) * m->n_device_ids);
    sort_i64(sorted, m->n_device_ids);
    bool iota = true, in_order = true;
    for (uint32_t i = 0; i < m->n_device_ids; i++) {
        iota = iota && sorted[i] == (int64_t)i;
        in_order = in_order && m->device_ids[i] == (int64_t)i;
    }
    if (!iota) {
        size_t k = (size_t)snprintf(msg, cap, "sorted device ids must be iota(product(axes)), "
                                              "got: ");
        for (uint32_t i = 0; i < m->n_device_ids && k + 24 < cap; i++) {
            int w = snprintf(msg + k, cap - k, "%s%lld", i ? ", " : "", (long long)sorted[i]);
            k += w > 0 ? (size_t)w : 0;
        }
    }
    cm_free(sorted);
    if (!iota) {
        return false;
    }
    if (in_order) {
        snprintf(msg, cap, "if the ordered device ids are the same as iota(product(axes)), no "
                           "need to specify them for simplicity");
        return false;
    }
    return true;
}
