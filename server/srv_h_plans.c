/* SPDX-License-Identifier: Apache-2.0
 * server: the plan handlers: POST /v1/plans (request dedup by its bytes,
 * then srv_plan_create: source, mesh, stored rules, decode, hash, plan
 * within the deadline, store), get, list, delete, and the plan response
 * envelope kept in the plan cache (srv_cache.c). */
#include <stdio.h>
#include <string.h>

#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_mlir.h"
#include "sp_ops.h"
#include "sp_plan_json.h"
#include "srv_int.h"
#include "srv_json.h"

/* ---- plans -------------------------------------------------------------------------------------- */

/* The response for a stored plan: an envelope around the plan document. */
static srv_blob *plan_blob(const st_plan *p)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '{');
    srv_put_kv_i64(&b, "id", p->id, false);
    srv_put_kv_str(&b, "hash", p->hash, true);
    srv_put_kv_i64(&b, "graph_id", p->graph_id, true);
    srv_put_kv_i64(&b, "mesh_id", p->mesh_id, true);
    cm_buf_puts(&b, ",\"options\":");
    if (p->options != NULL) {
        cm_buf_append(&b, p->options, p->options_len);
    } else {
        cm_buf_puts(&b, "{}");
    }
    srv_put_kv_i64(&b, "created_at", p->created_at, true);
    cm_buf_puts(&b, ",\"plan\":");
    if (p->body != NULL) {
        size_t n = p->body_len;
        while (n > 0 && (p->body[n - 1] == '\n' || p->body[n - 1] == ' ')) {
            n--;
        }
        cm_buf_append(&b, p->body, n);
    } else {
        cm_buf_puts(&b, "null");
    }
    cm_buf_puts(&b, "}\n");
    srv_blob *blob = b.oom ? NULL : srv_blob_create(b.data, b.len);
    cm_buf_fini(&b);
    return blob;
}

static void plan_list_item(cm_buf *b, const st_plan *p)
{
    cm_buf_putc(b, '{');
    srv_put_kv_i64(b, "id", p->id, false);
    srv_put_kv_str(b, "hash", p->hash, true);
    srv_put_kv_i64(b, "graph_id", p->graph_id, true);
    srv_put_kv_i64(b, "mesh_id", p->mesh_id, true);
    cm_buf_puts(b, ",\"options\":");
    if (p->options != NULL) {
        cm_buf_append(b, p->options, p->options_len);
    } else {
        cm_buf_puts(b, "{}");
    }
    srv_put_kv_i64(b, "size", (int64_t)p->body_len, true);
    srv_put_kv_i64(b, "created_at", p->created_at, true);
    cm_buf_putc(b, '}');
}

/* Loads plan id (cache first) and returns a new reference, or NULL with e set. */
static srv_blob *plan_load(srv_app *app, st_db *db, int64_t id, cm_error *e)
{
    srv_blob *blob = srv_cache_get(app, id);
    if (blob != NULL) {
        return blob;
    }
    bool own = db == NULL;
    if (own) {
        db = srv_app_db_acquire(app);
    }
    st_plan p;
    memset(&p, 0, sizeof p);
    if (st_plan_get(db, id, &p, e) == CM_OK) {
        blob = plan_blob(&p);
        if (blob == NULL) {
            cm_error_set(e, CM_ENOMEM, NULL, "out of memory");
        } else {
            srv_cache_put(app, id, blob);
        }
    }
    st_plan_fini(&p);
    if (own) {
        srv_app_db_release(app, db);
    }
    return blob;
}

static void reply_plan(srv_req *r, unsigned status, srv_blob *blob, int64_t id)
{
    if (status == 201) {
        srv_set_location(r, "plans", id);
    }
    srv_req_reply_shared(r, status, "application/json", blob->data, blob->len, srv_blob_release,
                         blob);
}

void srv_h_plan_get(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!srv_seg_id(app, r, a, &id)) {
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    srv_blob *blob = plan_load(app, NULL, id, &e);
    if (blob == NULL) {
        srv_reply_cm(app, r, &e);
        return;
    }
    reply_plan(r, 200, blob, id);
}

static void plan_item(cm_buf *b, const void *item, const void *ctx)
{
    (void)ctx;
    plan_list_item(b, item);
}

void srv_h_plan_list(srv_app *app, srv_req *r, route_args *a)
{
    st_plan_query q;
    st_plan_query_init(&q);
    if (!srv_query_paging(app, r, &q.limit, &q.after_id) ||
        !srv_query_i64(app, r, "graph_id", 1, &q.graph_id) ||
        !srv_query_i64(app, r, "mesh_id", 1, &q.mesh_id) ||
        !srv_query_i64(app, r, "created_after", 0, &q.created_after) ||
        !srv_query_i64(app, r, "created_before", 0, &q.created_before)) {
        return;
    }
    st_plan_list l;
    memset(&l, 0, sizeof l);
    cm_error e;
    cm_error_clear(&e);
    if (st_plan_list_query(a->db, &q, &l, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    srv_reply_items(app, r, l.items, l.n_items, sizeof l.items[0], l.next_after, plan_item, NULL);
    st_plan_list_fini(&l);
}

void srv_h_plan_delete(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!srv_seg_id(app, r, a, &id)) {
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    if (st_plan_delete(a->db, id, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    srv_cache_drop(app, id);
    srv_req_reply(r, 204, "application/json", "", 0);
}
/* Reads every stored custom rule (name and body) into the arena. */
static cm_status load_rules(st_db *db, cm_arena *arena, srv_named_doc **out, size_t *n_out,
                            cm_error *e)
{
    *out = NULL;
    *n_out = 0;
    st_doc_query q;
    st_doc_query_init(&q);
    q.limit = ST_LIST_MAX_LIMIT;
    st_doc_list l;
    memset(&l, 0, sizeof l);
    cm_status st = st_rule_list(db, &q, &l, e);
    if (st != CM_OK || l.n_items == 0) {
        st_doc_list_fini(&l);
        return st;
    }
    srv_named_doc *docs = cm_arena_zalloc(arena, l.n_items * sizeof *docs);
    size_t n = 0;
    for (size_t i = 0; docs != NULL && i < l.n_items && st == CM_OK; i++) {
        st_doc d;
        memset(&d, 0, sizeof d);
        st = st_rule_get(db, l.items[i].name, &d, e);
        if (st == CM_OK) {
            docs[n].name = cm_arena_strdup(arena, d.name);
            docs[n].body = cm_arena_strndup(arena, d.body, d.body_len);
            docs[n].body_len = d.body_len;
            n++;
        } else if (st == CM_ENOTFOUND) {
            st = CM_OK; /* deleted meanwhile */
            cm_error_clear(e);
        }
        st_doc_fini(&d);
    }
    st_doc_list_fini(&l);
    if (docs == NULL) {
        return cm_error_set(e, CM_ENOMEM, NULL, "out of memory");
    }
    *out = docs;
    *n_out = n;
    return st;
}

static const char *const pass_names[] = {"sdy-propagation-pipeline", "sdy-user-priority-propagate",
                                         "sdy-op-priority-propagate", "sdy-aggressive-propagate",
                                         "sdy-basic-propagate"};

/* Hash of a raw request: everything that can change its answer. */
static void raw_key(srv_app *app, srv_req *r, const char *body, size_t len,
                    uint8_t key[CM_SHA256_LEN])
{
    cm_sha256 c;
    cm_sha256_init(&c);
    unsigned long long gen = atomic_load(&app->generation);
    cm_sha256_update(&c, &gen, sizeof gen);
    static const char *const qs[] = {"pass", "mesh", "name"};
    for (size_t i = 0; i < 3; i++) {
        const char *v = srv_req_query(r, qs[i]);
        cm_sha256_update(&c, qs[i], strlen(qs[i]) + 1);
        if (v != NULL) {
            cm_sha256_update(&c, v, strlen(v) + 1);
        }
    }
    const char *ct = srv_req_header(r, "Content-Type");
    if (ct != NULL) {
        cm_sha256_update(&c, ct, strlen(ct) + 1);
    }
    cm_sha256_update(&c, body, len);
    cm_sha256_final(&c, key);
}

void srv_h_plan_post(srv_app *app, srv_req *r, route_args *a)
{
    double deadline = cm_now() + app->cfg.request_timeout_s;
    cm_arena *arena = srv_req_arena(r);
    size_t len;
    const char *body = srv_req_body(r, &len);
    body_kind bk;
    if (!srv_body_kind_of(app, r, true, &bk)) {
        return;
    }
    if (len == 0) {
        srv_reply_err(app, r, E_INVALID, "",
                      "empty body: send a graph document, MLIR text or "
                      "{\"graph\"|\"mlir\"|\"graph_id\": ...}");
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    /* 1. the same bytes as an earlier request: the stored plan */
    uint8_t key[CM_SHA256_LEN];
    raw_key(app, r, body, len, key);
    int64_t known = srv_cache_key_get(app, key);
    if (known != 0) {
        srv_blob *blob = plan_load(app, a->db, known, &e);
        if (blob != NULL) {
            atomic_fetch_add(&app->metrics.plans_deduplicated, 1);
            reply_plan(r, 200, blob, known);
            return;
        }
        cm_error_clear(&e);
    }
    /* 2. the request */
    srv_plan_req pr;
    memset(&pr, 0, sizeof pr);
    if (bk == BODY_JSON && srv_json_is_plan_envelope(body, len)) {
        if (srv_json_plan_req_decode(body, len, arena, &pr, &e) != CM_OK) {
            srv_reply_cm(app, r, &e);
            return;
        }
    } else if (bk == BODY_JSON) {
        pr.graph = body;
        pr.graph_len = len;
    } else {
        pr.mlir = body;
        pr.mlir_len = len;
    }
    if (pr.pass == NULL) {
        pr.pass = srv_req_query(r, "pass");
    }
    if (pr.mesh_name == NULL && pr.mesh == NULL) {
        pr.mesh_name = srv_req_query(r, "mesh");
    }
    if (pr.name == NULL) {
        pr.name = srv_req_query(r, "name");
    }
    int64_t id = 0;
    bool existed = false;
    if (!srv_plan_create(app, r, a, &pr, deadline, &id, &existed)) {
        return;
    }
    srv_blob *blob = plan_load(app, a->db, id, &e);
    if (blob == NULL) {
        srv_reply_cm(app, r, &e);
        return;
    }
    srv_cache_key_put(app, key, id);
    reply_plan(r, existed ? 200 : 201, blob, id);
}

/* Steps 3-8 of POST /v1/plans for a decoded request (also the what-if's
 * save): the source, mesh and stored rules, decoding, the request hash (an
 * equal stored plan is the answer, *existed set), planning within the
 * deadline, and storing graph and plan. True with *id set; false when a
 * reply (an error) has been sent. */
bool srv_plan_create(srv_app *app, srv_req *r, route_args *a, const srv_plan_req *pr_in,
                     double deadline, int64_t *id_out, bool *existed)
{
    cm_arena *arena = srv_req_arena(r);
    srv_plan_req pr = *pr_in;
    cm_error e;
    cm_error_clear(&e);
    *existed = false;
    sp_plan_pass pass = SP_PLAN_PIPELINE;
    if (pr.pass != NULL && !sp_plan_pass_parse(pr.pass, &pass)) {
        srv_reply_err(app, r, E_INVALID, "/options/pass", "unknown pass '%s'", pr.pass);
        return false;
    }
    /* 3. the source: inline or stored graph */
    st_graph sg;
    memset(&sg, 0, sizeof sg);
    int64_t graph_id = pr.graph_id;
    if (graph_id != 0) {
        if (st_graph_get(a->db, graph_id, &sg, &e) != CM_OK) {
            if (e.code == CM_ENOTFOUND) {
                srv_reply_err(app, r, E_NOT_FOUND, "/graph_id", "no graph %lld",
                              (long long)graph_id);
            } else {
                srv_reply_cm(app, r, &e);
            }
            return false;
        }
        if (sg.format == ST_GRAPH_JSON) {
            pr.graph = cm_arena_strndup(arena, sg.body, sg.body_len);
            pr.graph_len = sg.body_len;
        } else {
            pr.mlir = cm_arena_strndup(arena, sg.body, sg.body_len);
            pr.mlir_len = sg.body_len;
        }
        st_graph_fini(&sg);
        if (pr.graph == NULL && pr.mlir == NULL) {
            srv_reply_err(app, r, E_NOMEM, NULL, "out of memory");
            return false;
        }
    }
    /* 4. mesh and stored rules */
    srv_named_doc mesh = {NULL, NULL, 0};
    int64_t mesh_id = 0;
    if (pr.mesh != NULL) {
        mesh.name = pr.mesh_name;
        mesh.body = pr.mesh;
        mesh.body_len = pr.mesh_len;
    } else if (pr.mesh_name != NULL) {
        st_doc d;
        memset(&d, 0, sizeof d);
        if (st_mesh_get(a->db, pr.mesh_name, &d, &e) != CM_OK) {
            if (e.code == CM_ENOTFOUND) {
                srv_reply_err(app, r, E_NOT_FOUND, "/mesh", "no stored mesh '%s'", pr.mesh_name);
            } else {
                srv_reply_cm(app, r, &e);
            }
            return false;
        }
        mesh.name = cm_arena_strdup(arena, d.name);
        mesh.body = cm_arena_strndup(arena, d.body, d.body_len);
        mesh.body_len = d.body_len;
        mesh_id = d.id;
        st_doc_fini(&d);
    }
    if (mesh.body != NULL && pr.mlir != NULL) {
        srv_reply_err(app, r, E_INVALID, "/mesh",
                      "a mesh can be applied to graph documents only; declare sdy.mesh in MLIR");
        return false;
    }
    srv_named_doc *rules = NULL;
    size_t n_rules = 0;
    if (load_rules(a->db, arena, &rules, &n_rules, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return false;
    }
    /* 5. decode */
    plan_job *j = cm_calloc(1, sizeof *j);
    if (j == NULL) {
        srv_reply_err(app, r, E_NOMEM, NULL, "out of memory");
        return false;
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->app = app;
    cm_buf_init(&j->out);
    sp_plan_opts_init(&j->o);
    j->o.pass = pass;
    cm_buf doc, extra;
    cm_buf_init(&doc);
    cm_buf_init(&extra); /* what the module text does not show: the rules */
    cm_status st = CM_OK;
    if (pr.graph != NULL) {
        const char *gtext = pr.graph;
        size_t glen = pr.graph_len;
        if (mesh.body != NULL || n_rules > 0) {
            st = srv_json_graph_merge(pr.graph, pr.graph_len, mesh.body != NULL ? &mesh : NULL,
                                      rules, n_rules, &doc, &e);
            gtext = doc.data;
            glen = doc.len;
        }
        if (st == CM_OK) {
            sp_graph_limits lim;
            sp_graph_limits_init(&lim);
            lim.max_bytes = app->cfg.max_body_bytes;
            st = sp_graph_decode(gtext, glen, &lim, &j->g, &e);
        }
        if (st == CM_OK) {
            j->m = sp_graph_module(j->g);
            j->o.graph = j->g;
            j->o.custom = sp_graph_custom_rules(j->g);
            j->o.functions_form = sp_graph_has_functions(j->g);
        }
        if (st == CM_OK) {
            /* the rules (the document's and the stored ones) are part of the request */
            st = srv_json_rules_canon(gtext, glen, &extra, &e);
        }
    } else {
        st = sp_mlir_read(pr.mlir, pr.mlir_len, 0, &j->m, &e);
        if (st == CM_OK && n_rules > 0) {
            cm_buf rdoc;
            cm_buf_init(&rdoc);
            st = srv_json_rules_graph(rules, n_rules, &rdoc, &e);
            if (st == CM_OK) {
                st = sp_graph_decode(rdoc.data, rdoc.len, NULL, &j->rules_g, &e);
                if (st != CM_OK) {
                    cm_error_clear(&e);
                    st = cm_error_set(&e, CM_EINTERNAL, NULL, "stored rules do not decode");
                }
            }
            if (st == CM_OK) {
                j->o.custom = sp_graph_custom_rules(j->rules_g);
                st = srv_json_rules_canon(rdoc.data, rdoc.len, &extra, &e);
            }
            cm_buf_fini(&rdoc);
        }
        if (st == CM_OK) {
            uint32_t n_funcs = 0;
            const sp_block *top = &j->m->blocks[j->m->body];
            for (uint32_t i = 0; i < top->n_ops; i++) {
                n_funcs += j->m->ops[top->ops[i]].kind == SP_OP_FUNC_FUNC;
            }
            j->o.functions_form = n_funcs != 1;
        }
    }
    cm_buf_fini(&doc);
    if (st != CM_OK) {
        cm_buf_fini(&extra);
        srv_job_unref(j);
        if (e.code == CM_EINVAL && mesh.body != NULL && strncmp(e.path, "/meshes", 7) == 0) {
            srv_reply_err(app, r, E_INVALID, "/mesh", "mesh does not fit the graph: %s at %s",
                          e.msg, e.path);
            return false;
        }
        srv_reply_cm(app, r, &e);
        return false;
    }
    /* 6. the request hash: the module as MLIR (the planner's input hash),
     * the pass, and the rules the text does not show */
    char hash[2 * CM_SHA256_LEN + 1];
    {
        cm_buf txt;
        cm_buf_init(&txt);
        sp_print_opts popts = {false, false};
        sp_mlir_print(j->m, &popts, &txt);
        cm_buf_puts(&txt, "\n// pass: ");
        cm_buf_puts(&txt, pass_names[pass]);
        if (extra.len > 0) {
            uint8_t d[CM_SHA256_LEN];
            char hx[2 * CM_SHA256_LEN + 1];
            cm_sha256_hex(extra.data, extra.len, hx);
            (void)d;
            cm_buf_puts(&txt, "\n// document: ");
            cm_buf_puts(&txt, hx);
        }
        bool oom = txt.oom;
        if (!oom) {
            cm_sha256_hex(txt.data, txt.len, hash);
        }
        cm_buf_fini(&txt);
        cm_buf_fini(&extra);
        if (oom) {
            srv_job_unref(j);
            srv_reply_err(app, r, E_NOMEM, NULL, "out of memory hashing the module");
            return false;
        }
    }
    st_plan sp;
    memset(&sp, 0, sizeof sp);
    if (st_plan_get_by_hash(a->db, hash, &sp, &e) == CM_OK) {
        *id_out = sp.id;
        st_plan_fini(&sp);
        srv_job_unref(j);
        atomic_fetch_add(&app->metrics.plans_deduplicated, 1);
        *existed = true;
        return true;
    }
    if (e.code != CM_ENOTFOUND) {
        srv_job_unref(j);
        srv_reply_cm(app, r, &e);
        return false;
    }
    cm_error_clear(&e);
    /* 7. plan, bounded by the request's deadline */
    if (!srv_job_run(app, r, j, deadline)) {
        srv_job_unref(j);
        return false;
    }
    if (j->st != CM_OK) {
        cm_error je = j->err;
        srv_job_unref(j);
        srv_reply_cm(app, r, &je);
        return false;
    }
    atomic_fetch_add(&app->metrics.plans_computed, 1);
    /* 8. store the graph (inline input) and the plan */
    if (graph_id == 0) {
        bool is_json = pr.graph != NULL;
        const char *gname = pr.name;
        if (gname == NULL && is_json) {
            gname = srv_json_get_name(pr.graph, pr.graph_len, arena);
        }
        st_graph_in gi = {gname != NULL ? gname : (is_json ? "graph" : "module"),
                          is_json ? ST_GRAPH_JSON : ST_GRAPH_MLIR, is_json ? pr.graph : pr.mlir,
                          is_json ? pr.graph_len : pr.mlir_len, NULL};
        if (st_graph_put(a->db, &gi, &graph_id, NULL, &e) != CM_OK) {
            srv_job_unref(j);
            srv_reply_cm(app, r, &e);
            return false;
        }
    }
    cm_buf opts;
    cm_buf_init(&opts);
    cm_buf_puts(&opts, "{\"pass\":");
    srv_json_put_str(&opts, pass_names[pass]);
    if (mesh.name != NULL) {
        cm_buf_puts(&opts, ",\"mesh\":");
        srv_json_put_str(&opts, mesh.name);
    }
    cm_buf_putc(&opts, '}');
    st_plan_in in = {hash, graph_id, mesh_id, opts.data, opts.len, j->out.data, j->out.len};
    st = st_plan_put(a->db, &in, id_out, existed, &e);
    cm_buf_fini(&opts);
    srv_job_unref(j);
    if (st != CM_OK) {
        srv_reply_cm(app, r, &e);
        return false;
    }
    return true;
}
