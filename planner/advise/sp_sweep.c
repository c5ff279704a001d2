/* SPDX-License-Identifier: Apache-2.0
 * planner: `shardplan sweep` (sp_sweep.h, docs/advisor.md). The transformer
 * template of sp_example over every 2-D factorisation data x model of a
 * device count and every strategy: each variant is generated, decoded,
 * propagated (-sdy-propagation-pipeline) and costed (implied mode) on its own
 * module, on a pool of pthreads pulling job indices from an atomic counter.
 * Work is reused: the graph document of a strategy is generated and decoded
 * once and printed as MLIR; each variant is that text with its own mesh line
 * (logical names resolve to axis names, not sizes), read by the MLIR reader,
 * which is several times faster than the JSON decoder; the texts are kept for
 * repeated jobs and the profile is shared read-only. */
#include "sp_sweep.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cm_json.h"
#include "sp_advise_int.h"
#include "sp_example.h"
#include "sp_graph_json.h"
#include "sp_pipeline.h"
#include "sp_profile_json.h"
#include "sp_diag.h"
#include "sp_mlir.h"

void sp_sweep_opts_init(sp_sweep_opts *o)
{
    memset(o, 0, sizeof *o);
    o->devices = 8;
    o->layers = 4;
    o->d_model = 1024;
    o->heads = 8;
    o->seq = 128;
    o->batch = 8;
    o->train = true;
}

typedef struct variant {
    uint32_t strat; /* index into pool.tpl */
    cm_buf text;    /* the module's MLIR with this variant's mesh, reused by repeats */
    uint32_t row;   /* index in the result */
} variant;

/* One strategy's module: the template's graph decoded once and printed as
 * MLIR; variants differ from it only in the mesh line. */
typedef struct tmpl {
    sp_example_opts eo;
    cm_buf mlir;
    size_t mesh_at, mesh_len; /* the `<[...]>` of `sdy.mesh @mesh = ` in mlir */
    char error[CM_ERROR_PATH_LEN + CM_ERROR_MSG_LEN + 4];
} tmpl;

typedef struct pool {
    tmpl *tpl;
    uint32_t n_tpl;
    variant *v;
    uint32_t n_v;
    uint32_t n_jobs; /* n_v * repeat */
    atomic_uint next;
    const sp_profile *profile;
    sp_sweep_row *rows;
    atomic_uint n_ops;
    bool generate; /* phase 1: generate texts; phase 2: plan and cost */
    cm_cancel stop; /* the caller's stop hook, polled here and inside propagation */
    atomic_bool stopped;
} pool;

/* Phase 1: a strategy's graph document, decoded and printed as MLIR (the
 * JSON decode is the dearest step and does not depend on axis sizes: logical
 * names resolve to axis names). */
static void gen_template(tmpl *t)
{
    cm_error err;
    cm_error_clear(&err);
    cm_buf json;
    cm_buf_init(&json);
    sp_graph *g = NULL;
    if (sp_example_graph_json(&t->eo, &json, &err) == CM_OK &&
        sp_graph_decode(json.data, json.len, NULL, &g, &err) == CM_OK) {
        sp_print_opts po = {false, false};
        sp_mlir_print(sp_graph_module(g), &po, &t->mlir);
        const char *key = "sdy.mesh @mesh = ";
        const char *at = t->mlir.oom ? NULL : strstr(t->mlir.data, key);
        const char *end = at != NULL ? strchr(at, '\n') : NULL;
        if (at == NULL || end == NULL) {
            cm_error_set(&err, t->mlir.oom ? CM_ENOMEM : CM_EINTERNAL, NULL,
                         "template module without its mesh");
        } else {
            t->mesh_at = (size_t)(at - t->mlir.data) + strlen(key);
            t->mesh_len = (size_t)(end - t->mlir.data) - t->mesh_at;
        }
    }
    if (err.code != CM_OK) {
        snprintf(t->error, sizeof t->error, "%s%s%s", err.path, err.path[0] ? ": " : "", err.msg);
        cm_buf_reset(&t->mlir);
    }
    sp_graph_destroy(g);
    cm_buf_fini(&json);
}

/* A variant's row from its outcome: the error when st failed, else the
 * cost's figures (and m's op count into n_ops). */
static void row_fill(sp_sweep_row *r, cm_status st, const cm_error *err, const sp_cost *c,
                     const sp_module *m, atomic_uint *n_ops)
{
    if (st != CM_OK) {
        snprintf(r->error, sizeof r->error, "%s%s%s", err->path, err->path[0] ? ": " : "",
                 err->msg);
        return;
    }
    const sp_cost_summary *s = sp_cost_get_summary(c);
    r->ok = true;
    r->step_s = s->step_s;
    r->peak_bytes = s->peak_bytes;
    r->comm_bytes = s->comm_bytes;
    r->flops = s->flops;
    r->fits = s->fits;
    r->capacity_bytes = s->capacity_bytes;
    atomic_store(n_ops, m->n_ops);
}

/* Phase 2: plan and cost a variant; repeats (own == false) compute into a
 * scratch row so that rows are written once. */
static void run_variant(pool *p, variant *v, bool own)
{
    sp_sweep_row scratch;
    sp_sweep_row *r = own ? &p->rows[v->row] : &scratch;
    cm_error err;
    cm_error_clear(&err);
    if (v->text.len == 0) {
        return; /* generation failed; the row says why */
    }
    r->ok = false;
    sp_module *m = NULL;
    sp_cost *c = NULL;
    cm_status st = sp_mlir_read(v->text.data, v->text.len, 0, &m, &err);
    if (st == CM_OK) {
        sp_prop_opts po;
        sp_prop_opts_init(&po, SP_PROP_USER_PRIORITY);
        po.keep_sharding_rules = true;
        po.cancel = &p->stop;
        sp_diags d;
        sp_diags_init(&d);
        st = sp_pass_propagation_pipeline(m, &po, &d, &err);
        sp_diags_fini(&d);
    }
    if (st == CM_OK) {
        /* parameters and inputs are told apart by structure, as in the plan
         * document; their sum, the peak and the time do not depend on it */
        sp_cost_opts co;
        sp_cost_opts_init(&co);
        co.profile = p->profile;
        co.mode = SP_COST_IMPLIED;
        st = sp_cost_compute(m, &co, &c, &err);
    }
    row_fill(r, st, &err, c, m, &p->n_ops);
    sp_cost_destroy(c);
    sp_module_destroy(m);
}

static void *worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        unsigned j = atomic_fetch_add(&p->next, 1u);
        if (atomic_load(&p->stopped) || cm_cancelled(&p->stop)) {
            atomic_store(&p->stopped, true);
            return NULL;
        }
        if (p->generate) {
            if (j >= p->n_tpl) {
                return NULL;
            }
            gen_template(&p->tpl[j]);
            continue;
        }
        if (j >= p->n_jobs) {
            return NULL;
        }
        run_variant(p, &p->v[j % p->n_v], j < p->n_v);
    }
}

/* Runs worker on nt threads (the caller's included) until the jobs are done. */
static void run_pool(pool *p, uint32_t nt)
{
    atomic_store(&p->next, 0u);
    sp_advise_threads_run(worker, p, nt);
}

/* CPU seconds of the whole process (every thread). */
static double cpu_now(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) {
        return 0;
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int row_cmp(const void *pa, const void *pb)
{
    const sp_sweep_row *a = pa, *b = pb;
    int ga = a->ok ? (a->fits ? 0 : 1) : 2, gb = b->ok ? (b->fits ? 0 : 1) : 2;
    if (ga != gb) {
        return ga < gb ? -1 : 1;
    }
    if (a->step_s != b->step_s) {
        return a->step_s < b->step_s ? -1 : 1;
    }
    return a->peak_bytes < b->peak_bytes ? -1 : a->peak_bytes > b->peak_bytes ? 1 : 0;
}

/* The Pareto front over (peak_bytes, step_s) of res's rows (no other ok
 * row is at least as good in both and better in one), then the rows sorted
 * and ranked: fitting first by step time, 1 = fastest that fits. */
static void rank_rows(sp_sweep_result *res)
{
    uint32_t n = res->n_rows;
    for (uint32_t i = 0; i < n; i++) {
        sp_sweep_row *a = &res->rows[i];
        a->pareto = a->ok;
        for (uint32_t j = 0; j < n && a->pareto; j++) {
            const sp_sweep_row *b = &res->rows[j];
            if (j != i && b->ok && b->peak_bytes <= a->peak_bytes && b->step_s <= a->step_s &&
                (b->peak_bytes < a->peak_bytes || b->step_s < a->step_s)) {
                a->pareto = false;
            }
        }
    }
    qsort(res->rows, n, sizeof *res->rows, row_cmp);
    uint32_t rank = 0;
    for (uint32_t i = 0; i < n; i++) {
        res->rows[i].rank = res->rows[i].ok && res->rows[i].fits ? ++rank : 0;
    }
}

cm_status sp_sweep_run(const sp_sweep_opts *o, sp_sweep_result *res, cm_error *err)
{
    memset(res, 0, sizeof *res);
    if (o->devices < 1 || o->devices > 65536) {
        return cm_error_set(err, CM_EINVAL, "/devices", "must be in [1, 65536]");
    }
    uint32_t mask = o->strategies != 0 ? o->strategies & 15u : 15u;
    if (mask == 0) {
        return cm_error_set(err, CM_EINVAL, "/strategies", "no known strategy selected");
    }
    uint32_t n_fact = 0;
    for (int64_t d = 1; d <= o->devices; d++) {
        n_fact += o->devices % d == 0;
    }
    uint32_t n_strat = (uint32_t)__builtin_popcount(mask);
    uint32_t n_v = n_fact * n_strat;
    variant *v = cm_calloc(n_v, sizeof *v);
    tmpl *tpl = cm_calloc(4, sizeof *tpl);
    res->rows = cm_calloc(n_v, sizeof *res->rows);
    if (v == NULL || tpl == NULL || res->rows == NULL) {
        cm_free(v);
        cm_free(tpl);
        sp_sweep_result_fini(res);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in sweep");
    }
    uint32_t n_tpl = 0, tpl_of[4] = {0, 0, 0, 0};
    for (int s = 0; s < 4; s++) {
        if ((mask & (1u << s)) == 0) {
            continue;
        }
        sp_example_opts *eo = &tpl[n_tpl].eo;
        sp_example_opts_init(eo);
        eo->model = SP_EXAMPLE_TRANSFORMER;
        eo->strategy = (sp_example_strategy)s;
        eo->layers = o->layers;
        eo->d_model = o->d_model;
        eo->heads = o->heads;
        eo->seq = o->seq;
        eo->batch = o->batch;
        eo->train = o->train;
        eo->n_axes = 2;
        snprintf(eo->axis_names[0], sizeof eo->axis_names[0], "data");
        snprintf(eo->axis_names[1], sizeof eo->axis_names[1], "model");
        eo->axis_sizes[0] = 1; /* sizes are set per variant in the MLIR text */
        eo->axis_sizes[1] = 1;
        cm_buf_init(&tpl[n_tpl].mlir);
        tpl_of[s] = n_tpl++;
    }
    uint32_t k = 0;
    for (int64_t d = 1; d <= o->devices; d++) {
        if (o->devices % d != 0) {
            continue;
        }
        for (int s = 0; s < 4; s++) {
            if ((mask & (1u << s)) == 0) {
                continue;
            }
            cm_buf_init(&v[k].text);
            v[k].strat = tpl_of[s];
            v[k].row = k;
            res->rows[k].data = d;
            res->rows[k].model = o->devices / d;
            res->rows[k].sizes[0] = d;
            res->rows[k].sizes[1] = o->devices / d;
            res->rows[k].strategy = s;
            k++;
        }
    }
    sp_profile defp;
    if (o->profile == NULL) {
        sp_profile_default(&defp);
    }
    pool p;
    memset(&p, 0, sizeof p);
    p.tpl = tpl;
    p.n_tpl = n_tpl;
    p.v = v;
    p.n_v = n_v;
    p.n_jobs = o->jobs > 0 ? o->jobs : n_v;
    atomic_init(&p.next, 0u);
    atomic_init(&p.n_ops, 0u);
    atomic_init(&p.stopped, false);
    p.stop = (cm_cancel){o->cancel, o->cancel_ctx};
    p.profile = o->profile != NULL ? o->profile : &defp;
    snprintf(res->profile, sizeof res->profile, "%s", p.profile->name);
    res->n_axes = 2;
    snprintf(res->axes[0], sizeof res->axes[0], "data");
    snprintf(res->axes[1], sizeof res->axes[1], "model");
    p.rows = res->rows;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t nt = o->threads > 0 ? o->threads : cores > 0 ? (uint32_t)cores : 1;
    nt = nt > 64 ? 64 : nt;
    /* phase 1 decodes one module per strategy (in parallel) and prints it;
     * each variant's text is that module with its mesh line; phase 2 plans
     * every job (cycling over the variants when o->jobs asks for more).
     * Threads share only the counter; a row is written by its first job. */
    double t0 = cm_now(), c0 = cpu_now();
    p.generate = true;
    run_pool(&p, nt < n_tpl ? nt : n_tpl);
    bool oom = false;
    for (uint32_t i = 0; i < n_v; i++) {
        const tmpl *t = &tpl[v[i].strat];
        sp_sweep_row *r = &res->rows[v[i].row];
        if (t->mlir.len == 0) {
            snprintf(r->error, sizeof r->error, "%s", t->error);
            continue;
        }
        cm_buf_append(&v[i].text, t->mlir.data, t->mesh_at);
        cm_buf_printf(&v[i].text, "<[\"data\"=%lld, \"model\"=%lld]>", (long long)r->data,
                      (long long)r->model);
        cm_buf_append(&v[i].text, t->mlir.data + t->mesh_at + t->mesh_len,
                      t->mlir.len - t->mesh_at - t->mesh_len);
        oom = oom || v[i].text.oom;
    }
    if (!oom) {
        p.generate = false;
        run_pool(&p, nt);
    }
    res->seconds = cm_now() - t0;
    res->cpu_seconds = cpu_now() - c0;
    res->n_jobs = p.n_jobs;
    res->n_ops = atomic_load(&p.n_ops);
    for (uint32_t i = 0; i < n_v; i++) {
        cm_buf_fini(&v[i].text);
    }
    for (uint32_t i = 0; i < n_tpl; i++) {
        cm_buf_fini(&tpl[i].mlir);
    }
    cm_free(v);
    cm_free(tpl);
    if (oom) {
        sp_sweep_result_fini(res);
        return cm_error_set(err, CM_ENOMEM, NULL, "out of memory in sweep");
    }
    if (atomic_load(&p.stopped)) {
        sp_sweep_result_fini(res);
        return cm_error_set(err, CM_EIO, NULL, "sweep stopped before its end (cancelled)");
    }
    res->n_rows = n_v;
    rank_rows(res);
    return CM_OK;
}

void sp_sweep_result_fini(sp_sweep_result *res)
{
    cm_free(res->rows);
    memset(res, 0, sizeof *res);
}

/* The row's mesh as "data=2,model=4" (text) into buf. */
static void mesh_label(const sp_sweep_result *res, const sp_sweep_row *r, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (uint32_t k = 0; k < res->n_axes && at < cap; k++) {
        int n = snprintf(buf + at, cap - at, "%s%s=%lld", k > 0 ? "," : "", res->axes[k],
                         (long long)r->sizes[k]);
        at += n > 0 ? (size_t)n : 0;
    }
}

/* A rules row as "batch=data embed=- mlp=model" (a list target as
 * "a+b"), its own rules marked "(own) ", into buf. */
static void rules_label(const sp_sweep_row *r, char *buf, size_t cap)
{
    json_t *j = json_loads(r->rules, 0, NULL);
    size_t at = 0, i;
    json_t *x;
    buf[0] = '\0';
    if (r->own) {
        at = (size_t)snprintf(buf, cap, "(own) ");
    }
    json_array_foreach(j, i, x)
    {
        const json_t *t = json_array_get(x, 1);
        char tgt[96] = "-";
        if (json_is_string(t)) {
            snprintf(tgt, sizeof tgt, "%s", json_string_value(t));
        } else if (json_is_array(t)) {
            size_t k, n = 0;
            json_t *a;
            tgt[0] = '\0';
            json_array_foreach(t, k, a)
            {
                int w = snprintf(tgt + n, sizeof tgt - n, "%s%s", k > 0 ? "+" : "",
                                 json_is_string(a) ? json_string_value(a) : "?");
                n += w > 0 && (size_t)w < sizeof tgt - n ? (size_t)w : 0;
            }
        }
        const json_t *nm = json_array_get(x, 0);
        int w = at < cap ? snprintf(buf + at, cap - at, "%s%s=%s", i > 0 ? " " : "",
                                    json_is_string(nm) ? json_string_value(nm) : "?", tgt)
                         : 0;
        at += w > 0 ? (size_t)w : 0;
    }
    json_decref(j);
}

void sp_sweep_write_json(const sp_sweep_result *res, cm_buf *b)
{
    cm_buf_printf(b, "{\"variants\":%u,\"ops_per_variant\":%u,\"plans\":%u", res->n_rows,
                  res->n_ops, res->n_jobs);
    cm_json_put_key(b, "seconds");
    cm_json_put_g(b, res->seconds, 6);
    cm_json_put_key(b, "cpu_seconds");
    cm_json_put_g(b, res->cpu_seconds, 6);
    cm_json_put_kv_str(b, "profile", res->profile);
    if (res->of_module || res->of_rules) {
        cm_json_put_kv_str(b, "mesh_name", res->mesh);
        cm_json_put_kv_bool(b, "device_ids_dropped", res->dropped_device_ids);
    }
    if (res->of_rules) {
        cm_buf_printf(b, ",\"logical_names\":%u", res->n_logical);
        cm_json_put_kv_str(b, "variants_of", res->neighbours ? "one name at a time" : "every assignment");
    }
    cm_buf_puts(b, ",\"rows\":[");
    for (uint32_t i = 0; i < res->n_rows; i++) {
        const sp_sweep_row *r = &res->rows[i];
        cm_buf_puts(b, i > 0 ? ",\n{\"mesh\":{" : "\n{\"mesh\":{");
        for (uint32_t k = 0; k < res->n_axes; k++) {
            cm_json_put_kv_i64(b, res->axes[k], r->sizes[k]);
        }
        cm_buf_putc(b, '}');
        if (r->strategy >= 0) {
            cm_json_put_kv_str(b, "strategy",
                               sp_example_strategy_name((sp_example_strategy)r->strategy));
        }
        if (res->of_rules) {
            cm_buf_puts(b, ",\"rules\":");
            cm_buf_puts(b, r->rules); /* JSON text made by rules_text */
            cm_json_put_kv_bool(b, "own", r->own);
        }
        cm_json_put_kv_bool(b, "ok", r->ok);
        if (r->ok) {
            cm_buf_printf(b, ",\"rank\":%u", r->rank);
            cm_json_put_key(b, "step_s");
            cm_json_put_g(b, r->step_s, 6);
            cm_json_put_key(b, "peak_bytes");
            cm_json_put_f64(b, r->peak_bytes); /* counts: exact, shortest */
            cm_json_put_key(b, "comm_bytes");
            cm_json_put_f64(b, r->comm_bytes);
            cm_json_put_key(b, "flops");
            cm_json_put_f64(b, r->flops);
            cm_json_put_kv_bool(b, "fits", r->fits);
            cm_json_put_key(b, "capacity_bytes");
            cm_json_put_f64(b, r->capacity_bytes);
            cm_json_put_kv_bool(b, "pareto", r->pareto);
        } else {
            cm_json_put_kv_str(b, "error", r->error);
        }
        cm_buf_putc(b, '}');
    }
    cm_buf_puts(b, "]}");
}

void sp_sweep_write_text(const sp_sweep_result *res, cm_buf *b)
{
    int w = res->of_rules ? 40 : res->of_module ? 24 : 12;
    /* a module sweep has no strategy column; a rules sweep shows rules for the mesh */
    cm_buf_printf(b, "%-5s %-*s %s%12s %14s %14s %-5s %s\n", "rank", w,
                  res->of_rules ? "logical_axis_rules" : "mesh",
                  res->of_module || res->of_rules ? "" : "strat  ", "step", "peak/device",
                  "comm/device", "fits", "pareto");
    for (uint32_t i = 0; i < res->n_rows; i++) {
        const sp_sweep_row *r = &res->rows[i];
        char mesh[SP_SWEEP_RULES_LEN];
        if (res->of_rules) {
            rules_label(r, mesh, sizeof mesh);
        } else if (res->of_module) {
            mesh_label(res, r, mesh, sizeof mesh);
        } else {
            snprintf(mesh, sizeof mesh, "%lldx%lld", (long long)r->data, (long long)r->model);
        }
        char strat[16] = "";
        if (r->strategy >= 0) {
            snprintf(strat, sizeof strat, "%-6s ",
                     sp_example_strategy_name((sp_example_strategy)r->strategy));
        }
        if (!r->ok) {
            cm_buf_printf(b, "%-5s %-*s %sfailed: %s\n", "-", w, mesh, strat, r->error);
            continue;
        }
        char rk[16];
        snprintf(rk, sizeof rk, "%u", r->rank);
        cm_buf_printf(b, "%-5s %-*s %s%10.4g s %12.4g MiB %12.4g MiB %-5s %s\n",
                      r->rank > 0 ? rk : "-", w, mesh, strat, r->step_s,
                      r->peak_bytes / 1048576.0, r->comm_bytes / 1048576.0, r->fits ? "yes" : "NO",
                      r->pareto ? "*" : "");
    }
    if (res->of_rules) {
        cm_buf_printf(b,
                      "%u logical-axis-rule variants (%s of %u names over @%s's axes or none), "
                      "%u ops each, %u plans in %.3f s (%.3f s CPU)\n",
                      res->n_rows, res->neighbours ? "one name moved at a time" : "every assignment",
                      res->n_logical, res->mesh, res->n_ops, res->n_jobs, res->seconds,
                      res->cpu_seconds);
        return;
    }
    if (res->of_module) {
        cm_buf_printf(b, "%u meshes of @%s, %u ops each, %u plans in %.3f s (%.3f s CPU)%s\n",
                      res->n_rows, res->mesh, res->n_ops, res->n_jobs, res->seconds,
                      res->cpu_seconds,
                      res->dropped_device_ids ? "; the mesh's device_ids were dropped" : "");
        return;
    }
    cm_buf_printf(
        b, "%u variants (data x model x strategy), %u ops each, %u plans in %.3f s (%.3f s CPU)\n",
        res->n_rows, res->n_ops, res->n_jobs, res->seconds, res->cpu_seconds);
}

/* ---- the user's module over the meshes of a device count --------------------------------------- */

typedef struct mvariant {
    cm_buf text; /* the module's MLIR with this variant's mesh line */
} mvariant;

typedef struct mpool {
    mvariant *v;           /* the variants' texts; NULL for a rules sweep */
    const char *doc;       /* a rules sweep: the graph document each row's rules go into */
    size_t doc_len;
    const sp_graph_limits *limits; /* a rules sweep: the input's decoder limits */
    uint32_t n_v;
    sp_sweep_row *rows;
    sp_plan_pass pass;
    const sp_custom_rules *custom;
    const sp_profile *profile;
    atomic_uint next;
    atomic_uint n_ops;
    cm_cancel stop; /* the caller's stop hook, polled here and inside propagation */
    atomic_bool stopped;
} mpool;

/* The graph document doc with its logical_axis_rules replaced by rules
 * (JSON text), compact, into out. Errors: CM_EINVAL (doc or rules not
 * JSON: the caller read both before), CM_ENOMEM. */
static cm_status with_rules(const char *doc, size_t len, const char *rules, cm_buf *out,
                            cm_error *err)
{
    json_t *root = json_loadb(doc, len, 0, NULL), *r = json_loads(rules, 0, NULL);
    cm_status st = root == NULL || r == NULL || !json_is_object(root)
                       ? cm_error_set(err, CM_EINVAL, "/logical_axis_rules", "not a graph document")
                       : CM_OK;
    char *txt = NULL;
    if (st == CM_OK && json_object_set(root, "logical_axis_rules", r) == 0) {
        txt = json_dumps(root, JSON_COMPACT);
    }
    if (st == CM_OK && txt == NULL) {
        st = cm_error_oom(err);
    }
    if (txt != NULL) {
        cm_buf_puts(out, txt);
        free(txt);
        st = out->oom ? cm_error_oom(err) : CM_OK;
    }
    json_decref(root);
    json_decref(r);
    return st;
}

/* Reads, propagates with the input's pass, partitions and costs variant i. */
static void run_module_variant(mpool *p, uint32_t i)
{
    sp_sweep_row *r = &p->rows[i];
    cm_error err;
    cm_error_clear(&err);
    sp_cost *c = NULL;
    /* read and verified as any input is: a resized axis can break the
     * module's own shardings (a sub-axis that no longer divides it) */
    sp_input_opts vo;
    sp_input_opts_init(&vo);
    vo.propagate = false;
    vo.limits = p->limits;
    sp_input vin;
    cm_buf doc;
    cm_buf_init(&doc);
    cm_status st = p->doc != NULL ? with_rules(p->doc, p->doc_len, r->rules, &doc, &err) : CM_OK;
    const cm_buf *t = p->doc != NULL ? &doc : &p->v[i].text;
    if (st == CM_OK) {
        st = sp_input_read(t->data, t->len, &vo, &vin, &err);
    }
    cm_buf_fini(&doc);
    sp_module *m = st == CM_OK ? vin.m : NULL;
    if (st == CM_OK) {
        sp_diags d;
        sp_diags_init(&d);
        st = sp_input_propagate(m, p->pass, p->custom, false, &p->stop, &d, &err);
        sp_diags_fini(&d);
    }
    if (st == CM_OK) {
        st = sp_advise_partition_cost(m, false, p->profile, -1, p->custom, NULL, &c, &err);
    }
    row_fill(r, st, &err, c, m, &p->n_ops);
    sp_cost_destroy(c);
    if (m != NULL) {
        sp_input_fini(&vin);
    }
}

static void *module_worker(void *arg)
{
    mpool *p = arg;
    for (;;) {
        unsigned j = atomic_fetch_add(&p->next, 1u);
        if (j >= p->n_v) {
            return NULL;
        }
        if (atomic_load(&p->stopped) || cm_cancelled(&p->stop)) {
            atomic_store(&p->stopped, true);
            return NULL;
        }
        run_module_variant(p, j);
    }
}

/* The divisors of n (n <= 65536 has at most 120), ascending, into d; their count. */
static uint32_t divisors(int64_t n, int64_t *d, uint32_t cap)
{
    uint32_t lo = 0, hi = 0;
    int64_t big[128];
    for (int64_t k = 1; k * k <= n && lo < cap; k++) {
        if (n % k == 0) {
            d[lo++] = k;
            if (k * k != n && hi < 128) {
                big[hi++] = n / k;
            }
        }
    }
    while (hi > 0 && lo < cap) {
        d[lo++] = big[--hi];
    }
    return lo;
}

/* Every assignment of sizes to axes k..n (in order) whose product is rest,
 * each a divisor of the device count (div[0..n_div)), appended to rows from
 * *n_rows on with sizes[0..k) as fixed by the caller; false once more than
 * cap rows would be needed. */
static bool factorings(int64_t rest, uint32_t k, uint32_t n, const int64_t *div, uint32_t n_div,
                       int64_t *sizes, sp_sweep_row *rows, uint32_t cap, uint32_t *n_rows)
{
    if (k + 1 == n) {
        if (*n_rows >= cap) {
            return false;
        }
        sizes[k] = rest;
        sp_sweep_row *r = &rows[(*n_rows)++];
        memcpy(r->sizes, sizes, n * sizeof *sizes);
        r->strategy = -1;
        return true;
    }
    for (uint32_t i = 0; i < n_div && div[i] <= rest; i++) {
        if (rest % div[i] != 0) {
            continue;
        }
        sizes[k] = div[i];
        if (!factorings(rest / div[i], k + 1, n, div, n_div, sizes, rows, cap, n_rows)) {
            return false;
        }
    }
    return true;
}

/* Where the mesh line `sdy.mesh @NAME = <...>` of the printed module is:
 * [*at, *at + *n) is its `<...>`; false when absent. */
static bool find_mesh_line(const cm_buf *t, const char *name, size_t *at, size_t *n)
{
    char key[96];
    snprintf(key, sizeof key, "sdy.mesh @%s = ", name);
    size_t kl = strlen(key);
    for (const char *p = t->data; p != NULL && (p = strstr(p, key)) != NULL; p += kl) {
        bool line_start = p == t->data || p[-1] == '\n' || p[-1] == ' ';
        const char *end = strchr(p, '\n');
        if (line_start && end != NULL) {
            *at = (size_t)(p - t->data) + kl;
            *n = (size_t)(end - t->data) - *at;
            return true;
        }
    }
    return false;
}

/* The mesh a module sweep varies: mesh_name, or the module's main mesh;
 * checked (1 to SP_SWEEP_MAX_AXES axes, names that fit res) and its name and
 * axis names copied into res. Errors: CM_EINVAL at /mesh. */
static cm_status pick_mesh(const sp_module *m, const char *mesh_name, const sp_mesh **mesh_out,
                           const char **name_out, sp_sweep_result *res, cm_error *err)
{
    const char *mname = mesh_name != NULL ? mesh_name : sp_advise_main_mesh(m);
    const sp_mesh *mesh = mname != NULL ? sp_module_mesh(m, mname) : NULL;
    if (mesh == NULL) {
        return mesh_name != NULL
                   ? cm_error_set(err, CM_EINVAL, "/mesh", "the module has no mesh @%.64s",
                                  mesh_name)
                   : cm_error_set(err, CM_EINVAL, "/mesh", "the module declares no mesh to sweep");
    }
    if (mesh->n_axes == 0 || mesh->n_axes > SP_SWEEP_MAX_AXES) {
        return cm_error_set(err, CM_EINVAL, "/mesh",
                            "mesh @%.64s has %u axes; a sweep redistributes 1 to %d", mname,
                            mesh->n_axes, SP_SWEEP_MAX_AXES);
    }
    if (strlen(mname) >= sizeof res->mesh) {
        return cm_error_set(err, CM_EINVAL, "/mesh", "mesh name longer than %zu bytes",
                            sizeof res->mesh - 1);
    }
    for (uint32_t k = 0; k < mesh->n_axes; k++) {
        if (strlen(mesh->axes[k].name) >= sizeof res->axes[k]) {
            return cm_error_set(err, CM_EINVAL, "/mesh", "axis name longer than %zu bytes",
                                sizeof res->axes[k] - 1);
        }
    }
    snprintf(res->mesh, sizeof res->mesh, "%s", mname);
    res->dropped_device_ids = mesh->device_ids != NULL;
    res->n_axes = mesh->n_axes;
    for (uint32_t k = 0; k < mesh->n_axes; k++) {
        snprintf(res->axes[k], sizeof res->axes[k], "%s", mesh->axes[k].name);
    }
    *mesh_out = mesh;
    *name_out = mname;
    return CM_OK;
}

/* Plans and costs the variants v (one per row of res), or, with doc, the
 * graph document doc under each row's rules (read with limits, NULL: the
 * defaults), on o->threads threads with
 * the input's pass and custom rules, and ranks the rows;
 * fills res's profile, times and counts. Errors: CM_EIO when o->cancel
 * stopped it. */
static cm_status run_module_pool(sp_sweep_result *res, mvariant *v, const char *doc,
                                 size_t doc_len, const sp_graph_limits *limits, sp_plan_pass pass,
                                 const sp_custom_rules *custom, const sp_sweep_opts *o,
                                 cm_error *err)
{
    sp_profile defp;
    if (o->profile == NULL) {
        sp_profile_default(&defp);
    }
    const sp_profile *prof = o->profile != NULL ? o->profile : &defp;
    snprintf(res->profile, sizeof res->profile, "%s", prof->name);
    double t0 = cm_now(), c0 = cpu_now();
    mpool p;
    memset(&p, 0, sizeof p);
    p.v = v;
    p.doc = doc;
    p.doc_len = doc_len;
    p.limits = limits;
    p.n_v = res->n_rows;
    p.rows = res->rows;
    p.pass = pass;
    p.custom = custom;
    p.profile = prof;
    atomic_init(&p.next, 0u);
    atomic_init(&p.n_ops, 0u);
    atomic_init(&p.stopped, false);
    p.stop = (cm_cancel){o->cancel, o->cancel_ctx};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t nt = o->threads > 0 ? o->threads : cores > 0 ? (uint32_t)cores : 1;
    nt = nt > 64 ? 64 : nt;
    sp_advise_threads_run(module_worker, &p, nt < p.n_v ? nt : p.n_v);
    res->seconds = cm_now() - t0;
    res->cpu_seconds = cpu_now() - c0;
    res->n_jobs = res->n_rows;
    res->n_ops = atomic_load(&p.n_ops);
    if (atomic_load(&p.stopped)) {
        return cm_error_set(err, CM_EIO, NULL, "sweep stopped before its end (cancelled)");
    }
    rank_rows(res);
    return CM_OK;
}

/* text read as in_opts says (NULL: the defaults) but not propagated, into
 * *in, and the pass it asks for into *pass. Errors: those of
 * sp_input_read. */
static cm_status read_unpropagated(const char *text, size_t len, const sp_input_opts *in_opts,
                                   sp_plan_pass *pass, sp_input *in, cm_error *err)
{
    sp_input_opts ro;
    if (in_opts != NULL) {
        ro = *in_opts;
    } else {
        sp_input_opts_init(&ro);
    }
    *pass = ro.pass;
    ro.propagate = false;
    return sp_input_read(text, len, &ro, in, err);
}

cm_status sp_sweep_module_run(const char *text, size_t len, const sp_input_opts *in_opts,
                              const char *mesh_name, const sp_sweep_opts *o,
                              sp_sweep_result *res, cm_error *err)
{
    memset(res, 0, sizeof *res);
    if (o->devices < 0 || o->devices > 65536) {
        return cm_error_set(err, CM_EINVAL, "/devices", "must be in [1, 65536] (0: the mesh's own)");
    }
    sp_plan_pass pass;
    sp_input in;
    cm_status st = read_unpropagated(text, len, in_opts, &pass, &in, err);
    if (st != CM_OK) {
        return st;
    }
    const sp_mesh *mesh = NULL;
    const char *mname = NULL;
    st = pick_mesh(in.m, mesh_name, &mesh, &mname, res, err);
    int64_t devices = o->devices;
    if (st == CM_OK && devices == 0) {
        devices = 1;
        for (uint32_t k = 0; k < mesh->n_axes && devices <= 65536; k++) {
            devices *= mesh->axes[k].size;
        }
        if (devices > 65536) {
            st = cm_error_set(err, CM_EINVAL, "/devices",
                              "mesh @%.64s has more than 65536 devices; give a count", mname);
        }
    }
    cm_buf mlir;
    cm_buf_init(&mlir);
    size_t mesh_at = 0, mesh_len = 0;
    if (st == CM_OK) {
        res->of_module = true;
        sp_print_opts po = {false, false};
        sp_mlir_print(in.m, &po, &mlir);
        if (mlir.oom) {
            st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory in sweep");
        } else if (!find_mesh_line(&mlir, mname, &mesh_at, &mesh_len)) {
            st = cm_error_set(err, CM_EINTERNAL, "/mesh", "mesh @%.64s not found in the printed module",
                              mname);
        }
    }
    if (st == CM_OK) {
        res->rows = cm_calloc(SP_SWEEP_MAX_VARIANTS, sizeof *res->rows);
        int64_t sizes[SP_SWEEP_MAX_AXES] = {0}, div[256];
        uint32_t n_div = divisors(devices, div, 256);
        if (res->rows == NULL) {
            st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory in sweep");
        } else if (!factorings(devices, 0, res->n_axes, div, n_div, sizes, res->rows,
                               SP_SWEEP_MAX_VARIANTS, &res->n_rows)) {
            st = cm_error_set(err, CM_EINVAL, "/devices",
                              "%lld devices over %u axes make more than %d meshes; give fewer "
                              "devices or a mesh with fewer axes",
                              (long long)devices, res->n_axes, SP_SWEEP_MAX_VARIANTS);
        }
    }
    mvariant *v = st == CM_OK ? cm_calloc(res->n_rows, sizeof *v) : NULL;
    if (st == CM_OK && v == NULL) {
        st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory in sweep");
    }
    bool oom = false;
    for (uint32_t i = 0; st == CM_OK && i < res->n_rows; i++) {
        const sp_sweep_row *r = &res->rows[i];
        cm_buf *t = &v[i].text;
        cm_buf_init(t);
        cm_buf_append(t, mlir.data, mesh_at);
        cm_buf_putc(t, '<');
        cm_buf_putc(t, '[');
        for (uint32_t k = 0; k < res->n_axes; k++) {
            cm_buf_puts(t, k > 0 ? ", " : "");
            cm_json_put_str(t, res->axes[k], strlen(res->axes[k]));
            cm_buf_printf(t, "=%lld", (long long)r->sizes[k]);
        }
        cm_buf_puts(t, "]>");
        cm_buf_append(t, mlir.data + mesh_at + mesh_len, mlir.len - mesh_at - mesh_len);
        oom = oom || t->oom;
    }
    if (st == CM_OK && oom) {
        st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory in sweep");
    }
    if (st == CM_OK) {
        st = run_module_pool(res, v, NULL, 0, NULL, pass, in.custom, o, err);
    }
    for (uint32_t i = 0; v != NULL && i < res->n_rows; i++) {
        cm_buf_fini(&v[i].text);
    }
    cm_free(v);
    cm_buf_fini(&mlir);
    sp_input_fini(&in);
    if (st != CM_OK) {
        sp_sweep_result_fini(res);
    }
    return st;
}

/* ---- a Flax graph's logical-axis-rule variants ------------------------------------------------ */

typedef struct lnames {
    char name[SP_SWEEP_MAX_LOGICAL][64];
    uint32_t n;
    bool too_many, too_long;
} lnames;

static void lname_add(lnames *l, const char *s)
{
    if (strlen(s) >= sizeof l->name[0]) {
        l->too_long = true;
        return;
    }
    for (uint32_t i = 0; i < l->n; i++) {
        if (strcmp(l->name[i], s) == 0) {
            return;
        }
    }
    if (l->n == SP_SWEEP_MAX_LOGICAL) {
        l->too_many = true;
        return;
    }
    snprintf(l->name[l->n++], sizeof l->name[0], "%s", s);
}

/* The logical names of every "logical_axes" member under v (a list, or
 * {"mesh", "logical": [...]}), in document order. */
static void lnames_walk(const json_t *v, lnames *l, int depth)
{
    if (depth > 64) {
        return; /* the decoder bounds nesting far below this */
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            lnames_walk(x, l, depth + 1);
        }
        return;
    }
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)(uintptr_t)v, k, x)
    {
        if (strcmp(k, "logical_axes") != 0) {
            lnames_walk(x, l, depth + 1);
            continue;
        }
        const json_t *names = json_is_object(x) ? json_object_get(x, "logical") : x;
        size_t i;
        json_t *n;
        json_array_foreach(names, i, n)
        {
            if (json_is_string(n)) {
                lname_add(l, json_string_value(n));
            }
        }
    }
}

/* Name i's choice in the document's rules: 0 none (no rule, or null), 1 + k
 * mesh axis k; -1 when a list of axes or an axis not of the mesh. *simple
 * goes false for such a choice or a name with several rules (fallbacks). */
static int own_choice(const json_t *rules, const char *name, const sp_sweep_result *res,
                      bool *simple)
{
    int got = 0, seen = 0;
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        const json_t *n = json_array_get(r, 0), *t = json_array_get(r, 1);
        if (!json_is_string(n) || strcmp(json_string_value(n), name) != 0 || seen++ > 0) {
            continue;
        }
        got = json_is_null(t) ? 0 : -1;
        for (uint32_t k = 0; json_is_string(t) && k < res->n_axes; k++) {
            got = strcmp(json_string_value(t), res->axes[k]) == 0 ? (int)k + 1 : got;
        }
    }
    *simple = *simple && got >= 0 && seen <= 1;
    return got;
}

/* Row r's rules: each name with its choice (choice[i]; -1 keeps the
 * document's rules for that name, copied from rules), as JSON text. false
 * when longer than SP_SWEEP_RULES_LEN. */
static bool rules_text(const lnames *l, const int *choice, const json_t *rules,
                       const sp_sweep_result *res, sp_sweep_row *r)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '[');
    bool first = true;
    size_t j;
    json_t *x;
    json_array_foreach(rules, j, x)
    {
        const json_t *n = json_array_get(x, 0);
        for (uint32_t i = 0; json_is_string(n) && i < l->n; i++) {
            if (choice[i] < 0 && strcmp(json_string_value(n), l->name[i]) == 0) {
                char *t = json_dumps(x, JSON_COMPACT);
                cm_buf_puts(&b, first ? "" : ",");
                cm_buf_puts(&b, t != NULL ? t : "");
                b.oom = b.oom || t == NULL;
                free(t);
                first = false;
            }
        }
    }
    for (uint32_t i = 0; i < l->n; i++) {
        if (choice[i] < 0) {
            continue;
        }
        cm_buf_puts(&b, first ? "[" : ",[");
        cm_json_put_str(&b, l->name[i], strlen(l->name[i]));
        cm_buf_putc(&b, ',');
        if (choice[i] == 0) {
            cm_buf_puts(&b, "null");
        } else {
            const char *ax = res->axes[choice[i] - 1];
            cm_json_put_str(&b, ax, strlen(ax));
        }
        cm_buf_putc(&b, ']');
        first = false;
    }
    cm_buf_putc(&b, ']');
    bool ok = !b.oom && b.len < sizeof r->rules;
    if (ok) {
        memcpy(r->rules, b.data, b.len + 1);
    }
    cm_buf_fini(&b);
    return ok;
}

cm_status sp_sweep_rules_run(const char *text, size_t len, const sp_input_opts *in_opts,
                             const char *mesh_name, const sp_sweep_opts *o, sp_sweep_result *res,
                             cm_error *err)
{
    memset(res, 0, sizeof *res);
    sp_plan_pass pass;
    sp_input in;
    cm_status st = read_unpropagated(text, len, in_opts, &pass, &in, err);
    if (st != CM_OK) {
        return st;
    }
    json_t *root = NULL;
    if (in.g == NULL) {
        st = cm_error_set(err, CM_EINVAL, "/logical_axis_rules",
                          "logical-axis-rule variants need a Flax graph document (JSON with "
                          "logical_axes and logical_axis_rules); this input is MLIR");
    } else {
        const sp_mesh *mesh = NULL;
        const char *mname = NULL;
        st = pick_mesh(in.m, mesh_name, &mesh, &mname, res, err);
        root = st == CM_OK ? json_loadb(text, len, 0, NULL) : NULL;
        if (st == CM_OK && root == NULL) {
            st = cm_error_set(err, CM_EINVAL, "/logical_axis_rules", "not a graph document");
        }
    }
    json_t *rules = root != NULL ? json_object_get(root, "logical_axis_rules") : NULL;
    json_t *empty = json_array();
    rules = json_is_array(rules) ? rules : empty;
    lnames l;
    memset(&l, 0, sizeof l);
    if (st == CM_OK) {
        size_t i;
        json_t *r;
        json_array_foreach(rules, i, r)
        {
            if (json_is_string(json_array_get(r, 0))) {
                lname_add(&l, json_string_value(json_array_get(r, 0)));
            }
        }
        lnames_walk(root, &l, 0);
        if (l.n == 0) {
            st = cm_error_set(err, CM_EINVAL, "/logical_axis_rules",
                              "the document uses no logical axis names: nothing to vary");
        } else if (l.too_many || l.too_long) {
            st = cm_error_set(err, CM_EINVAL, "/logical_axis_rules",
                              l.too_many ? "more than %d logical axis names to vary"
                                         : "a logical axis name longer than 63 bytes",
                              SP_SWEEP_MAX_LOGICAL);
        }
    }
    int own[SP_SWEEP_MAX_LOGICAL], choice[SP_SWEEP_MAX_LOGICAL];
    bool simple = true;
    for (uint32_t i = 0; st == CM_OK && i < l.n; i++) {
        own[i] = own_choice(rules, l.name[i], res, &simple);
    }
    /* the full product of (axes + none) over the names, if small enough */
    uint32_t choices = res->n_axes + 1u;
    uint64_t total = 1;
    for (uint32_t i = 0; st == CM_OK && i < l.n && total < SP_SWEEP_MAX_VARIANTS; i++) {
        total *= choices;
    }
    res->neighbours = total > SP_SWEEP_MAX_VARIANTS - 1u;
    if (st == CM_OK) {
        res->rows = cm_calloc(SP_SWEEP_MAX_VARIANTS, sizeof *res->rows);
        if (res->rows == NULL) {
            st = cm_error_set(err, CM_ENOMEM, NULL, "out of memory in sweep");
        }
    }
    bool too_long = false;
    if (st == CM_OK) {
        /* row 0: the document's own rules, kept as written */
        for (uint32_t i = 0; i < l.n; i++) {
            choice[i] = -1;
        }
        res->rows[0].own = true;
        too_long = !rules_text(&l, choice, rules, res, &res->rows[0]);
        res->n_rows = 1;
    }
    uint64_t n_var = res->neighbours ? (uint64_t)l.n * choices : total;
    for (uint64_t idx = 0; st == CM_OK && !too_long && idx < n_var; idx++) {
        bool same = simple;
        if (res->neighbours) {
            /* name idx / choices moved to choice idx % choices, the rest kept */
            uint32_t at = (uint32_t)(idx / choices);
            int c = (int)(idx % choices);
            if (c == own[at]) {
                continue;
            }
            for (uint32_t i = 0; i < l.n; i++) {
                choice[i] = i == at ? c : (simple ? own[i] : -1);
            }
            same = false;
        } else {
            uint64_t rest = idx;
            for (uint32_t i = 0; i < l.n; i++) {
                choice[i] = (int)(rest % choices);
                rest /= choices;
                same = same && choice[i] == own[i];
            }
        }
        if (same) {
            continue; /* the document's own assignment: row 0 */
        }
        too_long = !rules_text(&l, choice, rules, res, &res->rows[res->n_rows++]);
    }
    if (st == CM_OK && too_long) {
        st = cm_error_set(err, CM_EINVAL, "/logical_axis_rules",
                          "a variant's rules are longer than %d bytes", SP_SWEEP_RULES_LEN - 1);
    }
    if (st == CM_OK) {
        const sp_mesh *mesh = sp_module_mesh(in.m, res->mesh);
        res->of_rules = true;
        res->n_logical = l.n;
        for (uint32_t i = 0; i < res->n_rows; i++) {
            res->rows[i].strategy = -1;
            for (uint32_t k = 0; k < res->n_axes; k++) {
                res->rows[i].sizes[k] = mesh->axes[k].size;
            }
        }
        st = run_module_pool(res, NULL, text, len, in_opts != NULL ? in_opts->limits : NULL, pass,
                             in.custom, o, err);
    }
    json_decref(empty);
    json_decref(root);
    sp_input_fini(&in);
    if (st != CM_OK) {
        sp_sweep_result_fini(res);
    }
    return st;
}
