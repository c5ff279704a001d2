/* SPDX-License-Identifier: Apache-2.0
 * executor: around a run (ex_exec.h): seeded arguments, the comparison of
 * two result lists, partitioning, and the check of a partitioned module
 * against a single-device run of the unpartitioned one. */
#include "ex_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ex_interp.h"
#include "sp_attrs.h"
#include "sp_cost.h"
#include "sp_input.h"

/* ---- arguments, comparison ------------------------------------------------------ */

void ex_tensors_free(ex_tensor *t, uint32_t n)
{
    if (t == NULL) {
        return;
    }
    for (uint32_t i = 0; i < n; i++) {
        cm_free(t[i].data);
    }
    cm_free(t);
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

cm_status ex_args_make(const sp_module *m, uint64_t seed, ex_tensor **args_out, uint32_t *n_out,
                       cm_error *err)
{
    *args_out = NULL;
    *n_out = 0;
    uint32_t f = sp_module_func(m, "main");
    if (f == SP_NONE || m->ops[f].n_regions != 1 || m->ops[f].regions[0].n_blocks == 0) {
        return cm_error_set(err, CM_EINVAL, NULL, "the module has no function @main");
    }
    const sp_block *b = &m->blocks[m->ops[f].regions[0].blocks[0]];
    ex_tensor *t = cm_calloc(b->n_args + 1u, sizeof(ex_tensor));
    if (t == NULL) {
        return cm_error_oom(err);
    }
    char at[32] = ""; /* errors point at @main ("LINE:COL" when it came from text) */
    if (m->ops[f].line > 0) {
        snprintf(at, sizeof at, "%u:%u", m->ops[f].line, m->ops[f].col);
    }
    for (uint32_t i = 0; i < b->n_args; i++) {
        const sp_type *ty = sp_value_type(m, b->first_arg + i);
        if (ty->kind != SP_TYPE_TENSOR || !elem_supported(ty->elem) || ty->rank > EX_MAX_RANK) {
            ex_tensors_free(t, b->n_args);
            return cm_error_set(err, CM_EINVAL, at, "argument %u: type %s cannot be executed yet",
                                i, ty->text);
        }
        size_t bytes = sp_elem_bytes(ty->elem);
        for (uint32_t k = 0; k < ty->rank; k++) {
            if (ty->dims[k] < 0) {
                ex_tensors_free(t, b->n_args);
                return cm_error_set(err, CM_EINVAL, at, "argument %u: dynamic shape", i);
            }
            if (!cm_mul_size(bytes, (size_t)ty->dims[k], &bytes) || bytes > (SIZE_MAX >> 2)) {
                ex_tensors_free(t, b->n_args);
                return cm_error_set(err, CM_EINVAL, at, "argument %u: type %s is too large", i,
                                    ty->text);
            }
        }
        t[i].elem = ty->elem;
        t[i].rank = ty->rank;
        memcpy(t[i].dims, ty->dims, sizeof(int64_t) * ty->rank);
        t[i].n = count_of(ty->dims, ty->rank);
        t[i].data = cm_calloc(t[i].n + 1u, sp_elem_bytes(ty->elem));
        if (t[i].data == NULL) {
            ex_tensors_free(t, b->n_args);
            return cm_error_oom(err);
        }
        uint64_t s = (seed ^ 0x9E3779B97F4A7C15ULL) + 0xBF58476D1CE4E5B9ULL * (i + 1u);
        if (s == 0) {
            s = 1;
        }
        double fan = ty->rank > 0 && ty->dims[0] > 0 ? (double)ty->dims[0] : 1.0;
        double scale = sqrt(3.0 / fan);
        for (size_t j = 0; j < t[i].n; j++) {
            uint64_t r = xorshift(&s);
            double u = (double)(r >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
            double v = elem_float(ty->elem) ? (2.0 * u - 1.0) * scale
                       : ty->elem == SP_ELEM_I1 ? (double)(r >> 63)
                                                : (double)(r >> 61);
            elem_store(t[i].data, ty->elem, j, v);
        }
    }
    *args_out = t;
    *n_out = b->n_args;
    return CM_OK;
}

void ex_coords_text(const ex_tensor *t, size_t idx, char *buf, size_t len)
{
    int64_t c[EX_MAX_RANK];
    for (uint32_t k = t->rank; k-- > 0;) {
        c[k] = t->dims[k] > 0 ? (int64_t)(idx % (size_t)t->dims[k]) : 0;
        idx = t->dims[k] > 0 ? idx / (size_t)t->dims[k] : 0;
    }
    size_t at = 0;
    at += (size_t)snprintf(buf, len, "[");
    for (uint32_t k = 0; k < t->rank && at < len; k++) {
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", k > 0 ? ", " : "", (long long)c[k]);
    }
    if (at < len) {
        snprintf(buf + at, len - at, "]");
    }
}

void ex_tensors_compare(const ex_tensor *expected, const ex_tensor *got, uint32_t n, int64_t k,
                        ex_mismatch *out)
{
    memset(out, 0, sizeof *out);
    out->match = true;
    double sk = sqrt((double)(k > 1 ? k : 1));
    for (uint32_t r = 0; r < n; r++) {
        const ex_tensor *e = &expected[r], *g = &got[r];
        bool same = e->elem == g->elem && e->rank == g->rank && e->n == g->n;
        for (uint32_t d = 0; same && d < e->rank; d++) {
            same = e->dims[d] == g->dims[d];
        }
        if (!same) {
            if (out->match) {
                out->match = false;
                out->result = r;
                snprintf(out->where, sizeof out->where, "(shape or type differs)");
            }
            continue;
        }
        double rel = 0, abs_ = 0;
        if (e->elem == SP_ELEM_F32) {
            rel = 1e-4 * sk;
            abs_ = 1e-5 * sk;
        } else if (e->elem == SP_ELEM_F64) {
            rel = 1e-10 * sk;
            abs_ = 1e-12 * sk;
        } else if (e->elem == SP_ELEM_BF16) {
            /* 8 significant bits (eps 2^-8): a sum of shards rounded to
             * bf16 each is off by a few eps of its terms, not of itself */
            rel = 2e-2 * sk;
            abs_ = 2e-2 * sk;
        } else if (e->elem == SP_ELEM_F16) { /* 11 bits: eps 2^-11 */
            rel = 4e-3 * sk;
            abs_ = 4e-3 * sk;
        }
        for (size_t i = 0; i < e->n; i++) {
            double a = elem_load(e->data, e->elem, i), b = elem_load(g->data, g->elem, i);
            double diff = fabs(a - b), tol = rel * fabs(a) + abs_;
            bool bad = isnan(a) != isnan(b) || diff > tol;
            if (isnan(a) && isnan(b)) {
                bad = false;
                diff = 0;
            }
            if (diff > out->max_abs_diff || (isnan(diff) && !isnan(out->max_abs_diff))) {
                out->max_abs_diff = diff;
            }
            if (bad && out->match) {
                out->match = false;
                out->result = r;
                out->index = i;
                out->expected = a;
                out->got = b;
                out->tol = tol;
                ex_coords_text(e, i, out->where, sizeof out->where);
            }
        }
    }
}

int64_t ex_module_contraction(const sp_module *m)
{
    int64_t best = 1;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        const sp_op *o = &m->ops[i];
        sp_dot_dims dd;
        if (o->kind != SP_OP_DOT_GENERAL || sp_dot_dims_get(m, i, &dd, NULL) != CM_OK) {
            continue;
        }
        const sp_type *t = sp_value_type(m, o->operands[0]);
        int64_t kk = 1;
        for (uint32_t j = 0; j < dd.n_contract; j++) {
            if (t->dims[dd.lhs_contract[j]] > 0) {
                kk *= t->dims[dd.lhs_contract[j]];
            }
        }
        best = kk > best ? kk : best;
    }
    return best;
}

/* ---- partition and check -------------------------------------------------------- */

/* True when m holds an sdy collective other than sdy.reshard: it was
 * partitioned already. A module whose only collectives are the user's
 * sdy.reshard ops (Shardy's partitioner input, as JAX's reshard writes it)
 * is not: an op between two reshards may be left partial (a dot contracting
 * over a sharded dim) or without the sharding its operands have, which the
 * partitioner's explicit reshards and all-reduces resolve. */
static bool has_lowered_collectives(const sp_module *m)
{
    for (uint32_t i = 0; i < m->n_ops; i++) {
        sp_op_kind k = (sp_op_kind)m->ops[i].kind;
        if (sp_op_is_sdy_collective(k) && k != SP_OP_SDY_RESHARD) {
            return true;
        }
    }
    return false;
}

cm_status ex_partition(sp_module *m, cm_error *err)
{
    return has_lowered_collectives(m) ? CM_OK : sp_module_partition(m, err);
}

/* The reference of a per-process main (ex_module_spmd): the interpreter's
 * run of every process of its n_rep x n_part grid on the same arguments,
 * process d's result j as (*want)[d * n_results + j]; *secs its wall time. */
static cm_status spmd_reference(const sp_module *m, uint32_t n_rep, uint32_t n_part,
                                const ex_tensor *args, uint32_t n_args, ex_tensor **want,
                                uint32_t *n_want, double *secs, cm_error *err)
{
    *want = NULL;
    *n_want = 0;
    uint32_t f = sp_module_func(m, "main");
    const sp_type *ft = f != SP_NONE ? sp_func_type(m, f) : NULL;
    if (ft == NULL || ft->n_inputs != n_args) {
        return cm_error_set(err, CM_EINVAL, NULL, "main takes other arguments");
    }
    if (n_rep == 0 || n_part == 0) {
        return cm_error_set(err, CM_EINVAL, NULL,
                            "mhlo.num_replicas or mhlo.num_partitions "
                            "is not an integer in 1..4096");
    }
    uint32_t nr = ft->n_results;
    size_t n = (size_t)n_rep * n_part * nr;
    ex_tensor *w = cm_calloc(n + 1u, sizeof(ex_tensor));
    void **outs = cm_calloc(n + 1u, sizeof(void *));
    const void **ins = cm_calloc(n_args + 1u, sizeof(void *));
    cm_status st = w == NULL || outs == NULL || ins == NULL ? cm_error_oom(err) : CM_OK;
    for (size_t i = 0; st == CM_OK && i < n; i++) {
        const sp_type *t = &m->types[ft->results[i % nr]];
        bool ok = t->kind == SP_TYPE_TENSOR && t->rank <= EX_MAX_RANK;
        for (uint32_t k = 0; ok && k < t->rank; k++) {
            ok = t->dims[k] >= 0;
        }
        if (!ok) {
            st = cm_error_set(err, CM_EINVAL, NULL, "result %zu of main is not a static tensor",
                              i % nr);
            break;
        }
        w[i].elem = t->elem;
        w[i].rank = t->rank;
        memcpy(w[i].dims, t->dims, sizeof(int64_t) * t->rank);
        w[i].n = count_of(t->dims, t->rank);
        w[i].data = cm_calloc(w[i].n + 1u, sp_elem_bytes(t->elem) + 1u);
        outs[i] = w[i].data;
        if (w[i].data == NULL) {
            st = cm_error_oom(err);
        }
    }
    for (uint32_t i = 0; st == CM_OK && i < n_args; i++) {
        ins[i] = args[i].data;
    }
    double t0 = cm_now();
    if (st == CM_OK) {
        ex_interp_report rep;
        st = ex_interp_spmd(m, n_rep, n_part, ins, outs, NULL, &rep, err);
    }
    *secs = cm_now() - t0;
    cm_free(outs);
    cm_free((void *)ins);
    if (st != CM_OK) {
        ex_tensors_free(w, (uint32_t)n);
        return st;
    }
    *want = w;
    *n_want = (uint32_t)n;
    return CM_OK;
}

cm_status ex_check_modules(sp_module *part, const sp_module *ref, const ex_check_opts *o,
                           ex_report *r, cm_error *err)
{
    memset(r, 0, sizeof *r);
    ex_tensor *args = NULL, *want = NULL, *got = NULL;
    uint32_t n_args = 0, n_want = 0, n_got = 0;
    cm_status st = ex_args_make(ref, o->seed, &args, &n_args, err);
    if (st != CM_OK) {
        return st;
    }
    ex_exec_opts eo = {.replicated = true, .iters = 1, .iter_s = &r->ref_s};
    uint32_t n_rep = 1, n_part = 1, at = SP_NONE;
    if (ex_module_spmd(ref, &n_rep, &n_part, &at) != CM_OK) {
        ex_tensors_free(args, n_args);
        return cm_error_oom(err);
    }
    bool spmd = at != SP_NONE;
    if (spmd) {
        r->ref_processes = n_rep * n_part;
        st = spmd_reference(ref, n_rep, n_part, args, n_args, &want, &n_want, &r->ref_s, err);
    } else {
        st = ex_exec_run(ref, &eo, args, n_args, &want, &n_want, err);
    }
    if (st == CM_OK) {
        eo.replicated = false;
        eo.n_devices = o->n_devices > 0             ? o->n_devices
                       : spmd && n_rep * n_part > 0 ? n_rep * n_part
                                                    : ex_module_devices(part);
        eo.iters = o->iters;
        eo.iter_s = o->iter_s;
        eo.affinity = o->affinity;
        eo.op_s = o->op_s;
        eo.op_from = o->op_from;
        eo.trace = o->trace;
        r->n_devices = eo.n_devices;
        st = ex_exec_run(part, &eo, args, n_args, &got, &n_got, err);
    }
    if (st == CM_OK) {
        if (n_got != n_want) {
            st = cm_error_set(err, CM_EINVAL, NULL, "%u results, the reference has %u", n_got,
                              n_want);
        } else {
            ex_tensors_compare(want, got, n_want, ex_module_contraction(ref), &r->mm);
        }
    }
    if (st == CM_OK && spmd && !r->mm.match && n_want > 0) {
        /* result k of n_dev * n_results: device k / n_results's result */
        uint32_t nr = n_want / (n_rep * n_part), d = r->mm.result / nr;
        char w[sizeof r->mm.where + 64];
        snprintf(w, sizeof w, "%.90s on device %u (replica %u, partition %u)", r->mm.where, d,
                 d / n_part, d % n_part);
        memcpy(r->mm.where, w, sizeof r->mm.where - 1u);
        r->mm.where[sizeof r->mm.where - 1u] = '\0';
        r->mm.result %= nr;
    }
    if (st == CM_OK) {
        sp_cost_opts co;
        sp_cost_opts_init(&co);
        sp_cost *c = NULL;
        cm_error ce;
        cm_error_clear(&ce);
        if (sp_cost_compute(part, &co, &c, &ce) == CM_OK) {
            r->flops = sp_cost_get_summary(c)->flops * (double)r->n_devices;
            sp_cost_destroy(c);
        }
    }
    ex_tensors_free(args, n_args);
    ex_tensors_free(want, n_want);
    ex_tensors_free(got, n_got);
    return st;
}

cm_status ex_check_text(const char *text, size_t len, const ex_check_opts *o, ex_report *r,
                        cm_error *err)
{
    memset(r, 0, sizeof *r);
    sp_input part, ref;
    memset(&ref, 0, sizeof ref);
    cm_status st = sp_input_read(text, len, NULL, &part, err);
    if (st == CM_OK) {
        st = sp_input_read(text, len, NULL, &ref, err);
    }
    if (st == CM_OK) {
        st = sp_input_partition(&part, err);
    }
    if (st == CM_OK) {
        st = ex_check_modules(part.m, ref.m, o, r, err);
    }
    sp_input_fini(&part);
    sp_input_fini(&ref);
    return st;
}

/* The lines of text (each "LINE:COL: ...") to out, each ending with
 * suffix. */
static void lines_suffixed(const char *text, const char *suffix, FILE *out)
{
    for (const char *l = text; l != NULL && *l != '\0';) {
        const char *eol = strchr(l, '\n');
        size_t n = eol != NULL ? (size_t)(eol - l) : strlen(l);
        fprintf(out, "%.*s%s\n", (int)n, l, suffix);
        l += n + (eol != NULL ? 1u : 0u);
    }
}

cm_status ex_check_reference(const sp_module *m, FILE *fails, uint32_t *n_checks,
                             uint32_t *n_failed, uint32_t *n_proc, cm_error *err)
{
    *n_proc = 1;
    ex_interp_report r;
    memset(&r, 0, sizeof r);
    uint32_t n_rep, n_part, at = SP_NONE;
    cm_status st = ex_module_spmd(m, &n_rep, &n_part, &at);
    if (st != CM_OK) {
        return cm_error_oom(err);
    }
    if (at != SP_NONE) {
        uint32_t f = sp_module_func(m, "main");
        const sp_type *ft = f != SP_NONE ? sp_func_type(m, f) : NULL;
        if (ft == NULL || ft->n_inputs != 0) {
            return cm_error_set(err, CM_EINVAL, NULL, "a main that takes arguments");
        }
        /* the checks run in every process; the results are not needed */
        st = n_rep == 0 || n_part == 0 ? cm_error_set(err, CM_EINVAL, NULL,
                                                      "mhlo.num_replicas or "
                                                      "mhlo.num_partitions is not an integer in "
                                                      "1..4096")
                                       : CM_OK;
        size_t n = (size_t)n_rep * n_part * ft->n_results;
        void **outs = st == CM_OK ? cm_calloc(n + 1u, sizeof(void *)) : NULL;
        if (st == CM_OK && outs == NULL) {
            st = cm_error_oom(err);
        }
        for (size_t i = 0; st == CM_OK && i < n; i++) {
            const sp_type *t = &m->types[ft->results[i % ft->n_results]];
            size_t cnt = t->kind == SP_TYPE_TENSOR ? 1 : 0;
            for (uint32_t k = 0; k < t->rank; k++) {
                cnt *= t->dims[k] > 0 ? (size_t)t->dims[k] : 0u;
            }
            outs[i] = cm_calloc(cnt + 1u, 8u);
            if (outs[i] == NULL) {
                st = cm_error_oom(err);
            }
        }
        if (st == CM_OK) {
            *n_proc = n_rep * n_part;
            st = ex_interp_spmd(m, n_rep, n_part, NULL, outs, fails, &r, err);
        }
        for (size_t i = 0; outs != NULL && i < n; i++) {
            cm_free(outs[i]);
        }
        cm_free(outs);
    } else {
        st = ex_interp_module(m, fails, &r, err);
    }
    *n_checks = r.n_checks;
    *n_failed = r.n_failed;
    return st;
}

cm_status ex_check_partitioned(const sp_module *m, uint32_t n_devices, FILE *fails,
                               uint32_t *n_checks, uint32_t *n_failed, uint32_t *n_dev_out,
                               cm_error *err)
{
    *n_checks = *n_failed = 0;
    uint32_t n_rep, n_part, at = SP_NONE;
    if (ex_module_spmd(m, &n_rep, &n_part, &at) != CM_OK) {
        return cm_error_oom(err);
    }
    bool spmd = at != SP_NONE;
    uint32_t n_dev = n_devices > 0                ? n_devices
                     : spmd && n_rep * n_part > 0 ? n_rep * n_part
                                                  : ex_module_devices(m);
    *n_dev_out = n_dev;
    ex_exec_opts eo = {.n_devices = n_dev, .iters = 1, .checks = true};
    ex_tensor *res = NULL;
    uint32_t n_res = 0;
    cm_status st = ex_exec_run(m, &eo, NULL, 0, &res, &n_res, err);
    if (st != CM_OK) {
        return st;
    }
    uint32_t mainf = sp_module_func(m, "main"), nr;
    const sp_block *b = &m->blocks[m->ops[mainf].regions[0].blocks[0]];
    uint32_t per = 0; /* values per device: main's results and check operands */
    const sp_op *ret = &m->ops[b->ops[b->n_ops - 1]];
    nr = ret->n_operands;
    per = nr;
    for (uint32_t i = 0; i < b->n_ops; i++) {
        per += ex_is_check_op(m, b->ops[i]) ? m->ops[b->ops[i]].n_operands : 0u;
    }
    uint32_t n_sets = spmd ? n_dev : 1u; /* each device's own values, or the assembled ones */
    if (per == 0 || n_res != per * n_sets) {
        ex_tensors_free(res, n_res);
        return cm_error_set(err, CM_EINTERNAL, NULL, "the run handed back %u values, not %u", n_res,
                            per * n_sets);
    }
    ex_interp_report r;
    memset(&r, 0, sizeof r);
    for (uint32_t d = 0; st == CM_OK && d < n_sets; d++) {
        uint32_t k = d * per + nr;
        for (uint32_t i = 0; st == CM_OK && i < b->n_ops; i++) {
            uint32_t op = b->ops[i];
            if (!ex_is_check_op(m, op)) {
                continue;
            }
            const sp_op *o = &m->ops[op];
            const void *ins[8];
            if (o->n_operands > 8) {
                st = sp_op_error(m, op, err, "%s: more than 8 operands", o->name);
                break;
            }
            for (uint32_t j = 0; j < o->n_operands; j++) {
                ins[j] = res[k++].data;
            }
            char *text = NULL;
            size_t len = 0;
            FILE *mem = open_memstream(&text, &len);
            if (mem == NULL) {
                st = cm_error_oom(err);
                break;
            }
            st = ex_interp_check(m, op, ins, mem, &r, err);
            fclose(mem);
            char suffix[96];
            if (spmd) {
                snprintf(suffix, sizeof suffix, " [device %u: replica %u, partition %u]", d,
                         d / n_part, d % n_part);
            } else {
                snprintf(suffix, sizeof suffix, " [partitioned, %u devices]", n_dev);
            }
            lines_suffixed(text, suffix, fails);
            free(text);
        }
    }
    ex_tensors_free(res, n_res);
    *n_checks = r.n_checks;
    *n_failed = r.n_failed;
    return st;
}
