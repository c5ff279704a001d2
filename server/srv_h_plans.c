/* SPDX-License-Identifier: Apache-2.0
 * server: the plan handlers: POST /v1/plans (request dedup by its bytes,
 * then srv_plan_create: source, mesh, stored rules, decode, hash, plan
 * within the deadline, store), get, list, delete, and the plan response
 * envelope kept in the plan cache (srv_cache.c). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cm_json.h"
#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_mlir.h"
#include "sp_ops.h"
#include "sp_plan_json.h"
#include "srv_int.h"
#include "srv_json.h"

/* ---- plans -------------------------------------------------------------------------------------- */

/* The members a plan's response and its list item begin with: id, hash,
 * graph_id, mesh_id and the options object, after an opening '{'. */
static void plan_head(cm_buf *b, const st_plan *p)
{
    cm_buf_putc(b, '{');
    cm_json_put_kv_i64(b, "id", p->id);
    cm_json_put_kv_str(b, "hash", p->hash);
    cm_json_put_kv_i64(b, "graph_id", p->graph_id);
    cm_json_put_kv_i64(b, "mesh_id", p->mesh_id);
    cm_json_put_key(b, "options");
    if (p->options != NULL) {
        cm_buf_append(b, p->options, p->options_len);
    } else {
        cm_buf_puts(b, "{}");
    }
}

/* The response for a stored plan: an envelope around the plan document,
 * written straight into a blob of its exact size (the document, tens of KB,
 * is copied once). */
static srv_blob *plan_blob(const st_plan *p)
{
    cm_buf head;
    cm_buf_init(&head);
    plan_head(&head, p);
    cm_json_put_kv_i64(&head, "created_at", p->created_at);
    cm_json_put_key(&head, "plan");
    size_t n = 0;
    if (p->body != NULL) {
        n = p->body_len;
        while (n > 0 && (p->body[n - 1] == '\n' || p->body[n - 1] == ' ')) {
            n--;
        }
    } else {
        cm_json_put_null(&head);
    }
    static const char tail[] = "}\n";
    srv_blob *blob = head.oom ? NULL : srv_blob_create(NULL, head.len + n + sizeof tail - 1);
    if (blob != NULL) {
        memcpy(blob->data, head.data, head.len);
        if (n > 0) {
            memcpy(blob->data + head.len, p->body, n);
        }
        memcpy(blob->data + head.len + n, tail, sizeof tail - 1);
        if (p->hash[0] != '\0') {
            snprintf(blob->etag, sizeof blob->etag, "\"%s\"", p->hash);
        }
    }
    cm_buf_fini(&head);
    return blob;
}

static void plan_list_item(cm_buf *b, const st_plan *p)
{
    plan_head(b, p);
    cm_json_put_kv_i64(b, "size", (int64_t)p->body_len);
    cm_json_put_kv_i64(b, "created_at", p->created_at);
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
            cm_error_oom(e);
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

/* Whether the If-None-Match header value inm names etag: "*", or etag in a
 * comma-separated list, each entry possibly weak (W/"..."), compared weakly
 * as RFC 9110 13.1.2 asks for GET. */
static bool etag_matches(const char *inm, const char *etag)
{
    size_t el = strlen(etag);
    const char *s = inm;
    while (*s != '\0') {
        while (*s == ' ' || *s == '\t' || *s == ',') {
            s++;
        }
        if (*s == '*') {
            return true;
        }
        if (s[0] == 'W' && s[1] == '/') {
            s += 2;
        }
        const char *e = s;
        while (*e != '\0' && *e != ',') {
            e++;
        }
        const char *t = e;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t')) {
            t--;
        }
        if ((size_t)(t - s) == el && el > 0 && memcmp(s, etag, el) == 0) {
            return true;
        }
        s = e;
    }
    return false;
}

/* The plan's ETag into etag (cap bytes): its hash quoted, with suffix for
 * another representation; "" for a blob without a hash. */
static void plan_etag(const srv_blob *blob, const char *suffix, char *etag, size_t cap)
{
    size_t n = strlen(blob->etag);
    if (n < 2) {
        etag[0] = '\0';
        return;
    }
    snprintf(etag, cap, "%.*s%s\"", (int)(n - 1), blob->etag, suffix);
}

/* The validators of a successful reply: since a plan id never names other
 * content, its ETag and an immutable Cache-Control. */
static void plan_validators(srv_req *r, const char *etag)
{
    srv_req_add_header(r, "Vary", "Accept");
    if (etag[0] != '\0') {
        srv_req_add_header(r, "ETag", etag);
        srv_req_add_header(r, "Cache-Control", "private, max-age=31536000, immutable");
    }
}

/* The reply of planning that failed with st and e: why its stop hook (with
 * --plan-timeout) stopped it, else e. */
static void reply_plan_failed(srv_app *app, srv_req *r, cm_status st, const srv_stop *stop,
                              const cm_error *e)
{
    int why = st == CM_EIO ? atomic_load(&stop->why) : SRV_STOP_NO;
    if (why == SRV_STOP_DEADLINE) {
        srv_reply_err(app, r, E_TIMEOUT, NULL,
                      "planning stopped at its %g s limit (--plan-timeout); the plan is not "
                      "stored",
                      app->cfg.plan_timeout_s);
    } else if (why == SRV_STOP_SHUTDOWN) {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL, "planning stopped: the server is shutting down");
    } else if (why == SRV_STOP_GONE) {
        srv_reply_err(app, r, E_UNAVAILABLE, NULL, "planning stopped: the client has gone");
    } else {
        srv_reply_cm(app, r, e);
    }
}

/* Whether the client asks for the propagated module: Accept names
 * application/mlir, and not application/json before it. */
static bool wants_mlir(const srv_req *r)
{
    const char *acc = srv_req_header(r, "Accept");
    const char *m = acc != NULL ? strstr(acc, "application/mlir") : NULL;
    const char *j = acc != NULL ? strstr(acc, "application/json") : NULL;
    return m != NULL && (j == NULL || m < j);
}

/* The propagated module of plan id, as `shardplan plan --mlir` prints it
 * for the plan's input, pass and rules, with the validators etag. */
static void reply_plan_mlir(srv_app *app, srv_req *r, route_args *a, const char *etag)
{
    cm_error e;
    cm_error_clear(&e);
    srv_plan_input pi;
    st_db *db = a->db != NULL ? a->db : srv_app_db_acquire(app); /* the route needs none */
    cm_status st = srv_plan_input_load(db, a->id, &pi, &e);
    if (db != a->db) {
        srv_app_db_release(app, db);
    }
    if (st != CM_OK) {
        srv_plan_input_fini(&pi);
        srv_reply_cm(app, r, &e);
        return;
    }
    sp_plan *plan = NULL;
    cm_buf b;
    cm_buf_init(&b);
    srv_stop stop;
    srv_stop_init(&stop, app, r, app->cfg.plan_timeout_s);
    cm_cancel c = {srv_stop_poll, &stop};
    if (sp_plan_create(pi.text, pi.len, &pi.io, NULL, 0, &plan, &e) != CM_OK) {
        srv_reply_ours(app, r, &e);
    } else if ((st = sp_plan_write(plan, &c, &b, NULL, &e)) != CM_OK) {
        if (st == CM_EIO && atomic_load(&stop.why) != SRV_STOP_NO) {
            reply_plan_failed(app, r, st, &stop, &e);
        } else {
            srv_reply_ours(app, r, &e);
        }
    } else {
        cm_buf_reset(&b);
        sp_print_opts popts = {false, false};
        sp_mlir_print(sp_plan_input(plan)->m, &popts, &b);
        size_t len = b.len;
        char *data = b.oom ? NULL : cm_buf_take(&b);
        if (data == NULL) {
            srv_reply_err(app, r, E_NOMEM, NULL, "out of memory");
        } else {
            plan_validators(r, etag);
            srv_req_reply_take(r, 200, "application/mlir", data, len);
        }
    }
    cm_buf_fini(&b);
    sp_plan_destroy(plan);
    srv_plan_input_fini(&pi);
}

void srv_h_plan_get(srv_app *app, srv_req *r, route_args *a)
{
    cm_error e;
    cm_error_clear(&e);
    srv_blob *blob = plan_load(app, NULL, a->id, &e);
    if (blob == NULL) {
        srv_reply_cm(app, r, &e);
        return;
    }
    bool mlir = wants_mlir(r);
    char etag[sizeof blob->etag + 16];
    plan_etag(blob, mlir ? ".mlir" : "", etag, sizeof etag);
    const char *inm = srv_req_header(r, "If-None-Match");
    if (etag[0] != '\0' && inm != NULL && etag_matches(inm, etag)) {
        srv_blob_release(blob);
        plan_validators(r, etag);
        srv_req_reply(r, 304, mlir ? "application/mlir" : "application/json", "", 0);
        return;
    }
    if (mlir) {
        srv_blob_release(blob);
        if (!srv_req_defer(r)) { /* it plans again: from a handler thread */
            reply_plan_mlir(app, r, a, etag);
        }
        return;
    }
    plan_validators(r, etag);
    reply_plan(r, 200, blob, a->id);
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
    cm_error e;
    cm_error_clear(&e);
    cm_status st = st_plan_list_query(a->db, &q, &l, &e);
    SRV_REPLY_LIST(app, r, st, &e, l, plan_item, NULL);
    st_plan_list_fini(&l);
}

void srv_h_plan_delete(srv_app *app, srv_req *r, route_args *a)
{
    cm_error e;
    cm_error_clear(&e);
    cm_status st = st_plan_delete(a->db, a->id, &e);
    if (st == CM_OK) {
        srv_cache_drop(app, a->id);
    }
    srv_reply_empty(app, r, st, &e);
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
        return cm_error_oom(e);
    }
    *out = docs;
    *n_out = n;
    return st;
}

/* Whether c can be part of a call-target name as the input spells it. */
static bool is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '$' || c == '.' || c == '-';
}

/* Whether name occurs in text (len bytes) as a whole name: not inside a
 * longer one. Every way an input names a custom call's target (MLIR's
 * `custom_call @NAME`, `@"NAME"`, `call_target_name = "NAME"`, a graph
 * document's "call_target": "NAME") is such an occurrence, so a rule whose
 * name does not occur is not used by the input; one that occurs elsewhere
 * (a value named alike) is kept, which costs only a missed dedup. */
static bool names_occur(const char *text, size_t len, const char *name)
{
    size_t k = strlen(name);
    if (k == 0 || k > len) {
        return false;
    }
    for (size_t i = 0; i + k <= len; i++) {
        const char *p = memchr(text + i, name[0], len - k - i + 1);
        if (p == NULL) {
            return false;
        }
        i = (size_t)(p - text);
        if (memcmp(p, name, k) == 0 && (i == 0 || !is_name_char(p[-1])) &&
            (i + k == len || !is_name_char(p[k]))) {
            return true;
        }
    }
    return false;
}

/* Keeps, in place, the stored rules the input's custom calls can use (the
 * plan's hash covers only those, so storing a rule for another call target
 * changes no plan's hash). */
static size_t rules_used(const srv_plan_req *pr, srv_named_doc *rules, size_t n)
{
    const char *text = pr->graph != NULL ? pr->graph : pr->mlir;
    size_t len = pr->graph != NULL ? pr->graph_len : pr->mlir_len;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (text != NULL && names_occur(text, len, rules[i].name)) {
            rules[kept++] = rules[i];
        }
    }
    return kept;
}

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
    double deadline = srv_req_ready_at(r) + app->cfg.request_timeout_s;
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
    /* a body too big to plan on a polling thread (plan_is_quick) is read
     * and planned from a handler thread, not read here first */
    if (len > SRV_PLAN_HERE_BYTES && srv_req_defer(r)) {
        return;
    }
    /* 2. the request: meshes are bounded before any tree is built */
    srv_plan_req pr;
    memset(&pr, 0, sizeof pr);
    bool envelope = false;
    if (bk == BODY_JSON && srv_json_mesh_sizes_check(body, len, &envelope, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    if (bk == BODY_JSON && envelope) {
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
    /* a stored graph or a big example: their size is known only now */
    if ((pr.graph_id != 0 || pr.graph_len > SRV_PLAN_HERE_BYTES) && srv_req_defer(r)) {
        return;
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

/* ---- creating a plan: five named steps over sp_plan ------------------------------------ */

/* What a plan is made from once the request is resolved: the input text as
 * planned (the graph document with the mesh and stored rules merged in, or
 * the MLIR text), a rules document for MLIR, and the bytes of the request
 * that the module text does not show (the canonical rules). All in the
 * request's arena or in the two buffers, freed by plan_src_fini. */
typedef struct plan_src {
    const char *text; /* the input as stored with the plan */
    size_t len;
    bool is_mlir;
    cm_buf merged; /* backing store of text when merged */
    cm_buf rules;  /* rules document (MLIR inputs with stored rules), or empty */
    cm_buf extra;  /* canonical rules: part of the plan key */
    srv_named_doc mesh;
    int64_t mesh_id;
    int64_t graph_id; /* the stored graph planned, 0 for inline input */
} plan_src;

static void plan_src_fini(plan_src *s)
{
    cm_buf_fini(&s->merged);
    cm_buf_fini(&s->rules);
    cm_buf_fini(&s->extra);
}

/* 1. the source: inline or a stored graph, into pr. False when replied. */
static bool resolve_source(srv_app *app, srv_req *r, route_args *a, srv_plan_req *pr)
{
    if (pr->graph_id == 0) {
        return true;
    }
    cm_arena *arena = srv_req_arena(r);
    cm_error e;
    cm_error_clear(&e);
    st_graph sg;
    memset(&sg, 0, sizeof sg);
    if (st_graph_get(a->db, pr->graph_id, &sg, &e) != CM_OK) {
        if (e.code == CM_ENOTFOUND) {
            srv_reply_err(app, r, E_NOT_FOUND, "/graph_id", "no graph %lld",
                          (long long)pr->graph_id);
        } else {
            srv_reply_cm(app, r, &e);
        }
        return false;
    }
    if (pr->name == NULL && sg.name != NULL && sg.name[0] != '\0') {
        pr->name = cm_arena_strdup(arena, sg.name); /* the plan is named after its graph */
    }
    if (sg.format == ST_GRAPH_JSON) {
        pr->graph = cm_arena_strndup(arena, sg.body, sg.body_len);
        pr->graph_len = sg.body_len;
    } else {
        pr->mlir = cm_arena_strndup(arena, sg.body, sg.body_len);
        pr->mlir_len = sg.body_len;
    }
    st_graph_fini(&sg);
    if (pr->graph == NULL && pr->mlir == NULL) {
        srv_reply_err(app, r, E_NOMEM, NULL, "out of memory");
        return false;
    }
    return true;
}

/* 2. the mesh: inline or stored by name, into s. False when replied. */
static bool resolve_mesh(srv_app *app, srv_req *r, route_args *a, const srv_plan_req *pr,
                         plan_src *s)
{
    cm_arena *arena = srv_req_arena(r);
    cm_error e;
    cm_error_clear(&e);
    if (pr->mesh != NULL) {
        s->mesh.name = pr->mesh_name;
        s->mesh.body = pr->mesh;
        s->mesh.body_len = pr->mesh_len;
    } else if (pr->mesh_name != NULL) {
        st_doc d;
        memset(&d, 0, sizeof d);
        if (st_mesh_get(a->db, pr->mesh_name, &d, &e) != CM_OK) {
            if (e.code == CM_ENOTFOUND) {
                srv_reply_err(app, r, E_NOT_FOUND, "/mesh", "no stored mesh '%s'", pr->mesh_name);
            } else {
                srv_reply_cm(app, r, &e);
            }
            return false;
        }
        s->mesh.name = cm_arena_strdup(arena, d.name);
        s->mesh.body = cm_arena_strndup(arena, d.body, d.body_len);
        s->mesh.body_len = d.body_len;
        s->mesh_id = d.id;
        st_doc_fini(&d);
    }
    if (s->mesh.body != NULL && pr->mlir != NULL) {
        srv_reply_err(app, r, E_INVALID, "/mesh",
                      "a mesh can be applied to graph documents only; declare sdy.mesh in MLIR");
        return false;
    }
    return true;
}

/* 3. the input as planned: the mesh and every stored rule merged into a
 * graph document, or the rules as a separate document for MLIR; and the
 * canonical rules for the key. */
static cm_status merge_input(const srv_plan_req *pr, const srv_named_doc *rules, size_t n_rules,
                             plan_src *s, cm_error *e)
{
    cm_status st = CM_OK;
    if (pr->graph != NULL) {
        s->text = pr->graph;
        s->len = pr->graph_len;
        if (s->mesh.body != NULL || n_rules > 0) {
            st = srv_json_graph_merge(pr->graph, pr->graph_len,
                                      s->mesh.body != NULL ? &s->mesh : NULL, rules, n_rules,
                                      &s->merged, e);
            s->text = s->merged.data;
            s->len = s->merged.len;
        }
        if (st == CM_OK) {
            st = srv_json_rules_canon(s->text, s->len, &s->extra, e);
        }
        return st;
    }
    s->text = pr->mlir;
    s->len = pr->mlir_len;
    s->is_mlir = true;
    if (n_rules > 0) {
        st = srv_json_rules_graph(rules, n_rules, &s->rules, e);
        if (st == CM_OK) {
            st = srv_json_rules_canon(s->rules.data, s->rules.len, &s->extra, e);
        }
    }
    return st;
}

/* The errors of reading the input, as the client should see them. */
static void reply_input_error(srv_app *app, srv_req *r, const srv_plan_req *pr,
                              const plan_src *s, const cm_error *e)
{
    if (e->code == CM_EINVAL && s->mesh.body != NULL && strncmp(e->path, "/meshes", 7) == 0) {
        srv_reply_err(app, r, E_INVALID, "/mesh", "mesh does not fit the graph: %s at %s", e->msg,
                      e->path);
    } else if (e->code == CM_EINVAL && strncmp(e->path, "/rules", 6) == 0) {
        srv_reply_err(app, r, E_INTERNAL, NULL, "stored rules do not decode: %s", e->msg);
    } else if (e->code == CM_EINVAL && pr->graph_at != NULL && e->path[0] == '/') {
        /* a pointer into the envelope's graph: from the request body's root */
        char path[CM_ERROR_PATH_LEN];
        snprintf(path, sizeof path, "%s%s", pr->graph_at, e->path);
        srv_reply_err(app, r, E_INVALID, path, "%s", e->msg);
    } else {
        srv_reply_cm(app, r, e);
    }
}

/* The meshes of m as a person reads them: `data=2 x model=4`, several
 * joined by "; " (maximal meshes without axes left out). */
static void mesh_axes_text(const sp_module *m, cm_buf *b)
{
    const sp_block *body = &m->blocks[m->body];
    size_t start = b->len;
    for (uint32_t i = 0; i < body->n_ops; i++) {
        const sp_op *o = &m->ops[body->ops[i]];
        const sp_attr *ma = sp_attrs_get(o->attrs, o->n_attrs, "mesh");
        if (o->kind != SP_OP_SDY_MESH || ma == NULL || ma->kind != SP_ATTR_MESH ||
            ma->u.mesh->n_axes == 0) {
            continue;
        }
        cm_buf_puts(b, b->len > start ? "; " : "");
        for (uint32_t a = 0; a < ma->u.mesh->n_axes; a++) {
            cm_buf_printf(b, "%s%s=%lld", a > 0 ? " x " : "", ma->u.mesh->axes[a].name,
                          (long long)ma->u.mesh->axes[a].size);
        }
    }
}

/* What storing a planned input needs, resolved before planning starts:
 * borrowed from the request, or a heap copy (keep_copy) once the request
 * has left and the job stores its plan itself. */
typedef struct plan_store_in {
    const char *name; /* the name the user gave, or NULL */
    bool is_json;
    const char *body; /* the graph or module as sent, for a new graph row */
    size_t body_len;
    int64_t graph_id; /* 0: store body as a new graph */
    int64_t mesh_id;
    const char *mesh_name;
    const char *text; /* the input as planned (s->text) */
    size_t len;
    bool is_mlir;
    const char *rules;
    size_t rules_len;
} plan_store_in;

/* The name a plan is stored under: ?name= (or the envelope's), else the
 * input module's name: a graph document's "name" (its reader keeps it as
 * the module's symbol name), MLIR's `module @NAME`; NULL when none. */
static const char *plan_name(const srv_plan_req *pr, const sp_plan *plan)
{
    const char *gname = pr->name;
    if (gname == NULL) {
        gname = sp_plan_input(plan)->m->sym_name;
    }
    return gname != NULL && gname[0] != '\0' ? gname : NULL;
}

/* 5. the plan row (and, for inline input, its graph row) with the document. */
static cm_status store_plan(st_db *db, const plan_store_in *x, const sp_plan *plan,
                            const cm_buf *doc, int64_t *id_out, bool *existed, st_plan *row,
                            cm_error *e)
{
    /* inline input: its graph row is written in the plan's transaction */
    st_graph_in gi = {x->name != NULL ? x->name : (x->is_json ? "graph" : "module"),
                      x->is_json ? ST_GRAPH_JSON : ST_GRAPH_MLIR, x->body, x->body_len, NULL};
    cm_buf opts;
    cm_buf_init(&opts);
    cm_buf_putc(&opts, '{');
    cm_json_put_kv_str(&opts, "pass", sp_plan_pass_name(sp_plan_get_pass(plan)));
    if (x->mesh_name != NULL) {
        cm_json_put_kv_str(&opts, "mesh", x->mesh_name);
    }
    if (x->name != NULL) {
        cm_json_put_kv_str(&opts, "name", x->name);
    }
    cm_buf axes;
    cm_buf_init(&axes);
    mesh_axes_text(sp_plan_input(plan)->m, &axes);
    if (axes.len > 0) {
        cm_json_put_key(&opts, "mesh_axes");
        cm_json_put_str(&opts, axes.data, axes.len);
    }
    opts.oom = opts.oom || axes.oom;
    cm_buf_fini(&axes);
    cm_buf_putc(&opts, '}');
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = sp_plan_key(plan);
    in.graph_id = x->graph_id;
    in.graph = x->graph_id == 0 ? &gi : NULL;
    in.mesh_id = x->mesh_id;
    in.options = opts.data;
    in.options_len = opts.len;
    in.body = doc->data;
    in.body_len = doc->len;
    in.input = x->text;
    in.input_len = x->len;
    in.input_is_mlir = x->is_mlir;
    in.rules = x->rules;
    in.rules_len = x->rules_len;
    cm_status st = opts.oom      ? cm_error_oom(e)
                   : row != NULL ? st_plan_put_row(db, &in, row, existed, e)
                                 : st_plan_put(db, &in, id_out, existed, e);
    if (st == CM_OK && row != NULL) {
        *id_out = row->id;
    }
    cm_buf_fini(&opts);
    return st;
}

static void keep_free(void *keep)
{
    plan_store_in *x = keep;
    if (x == NULL) {
        return;
    }
    cm_free((void *)(uintptr_t)x->name);
    cm_free((void *)(uintptr_t)x->body);
    cm_free((void *)(uintptr_t)x->mesh_name);
    cm_free((void *)(uintptr_t)x->text);
    cm_free((void *)(uintptr_t)x->rules);
    cm_free(x);
}

static char *dup_n(const char *p, size_t n, bool *ok)
{
    if (p == NULL) {
        return NULL;
    }
    char *q = cm_alloc(n + 1);
    if (q == NULL) {
        *ok = false;
        return NULL;
    }
    memcpy(q, p, n);
    q[n] = '\0';
    return q;
}

/* The job's detach: a heap copy of the request's store inputs (NULL when
 * out of memory: the plan is then not stored, as before). */
static void *keep_copy(void *ctx)
{
    const plan_store_in *x = ctx;
    plan_store_in *k = cm_calloc(1, sizeof *k);
    if (k == NULL) {
        return NULL;
    }
    *k = *x;
    bool ok = true;
    k->name = dup_n(x->name, x->name != NULL ? strlen(x->name) : 0, &ok);
    k->body = dup_n(x->body, x->body_len, &ok);
    k->mesh_name = dup_n(x->mesh_name, x->mesh_name != NULL ? strlen(x->mesh_name) : 0, &ok);
    k->text = dup_n(x->text, x->len, &ok);
    k->rules = dup_n(x->rules, x->rules_len, &ok);
    if (!ok) {
        keep_free(k);
        return NULL;
    }
    return k;
}

/* Puts the response of the plan row (as the put that stored it returned
 * it) with the document doc in the plan cache, so that the request's
 * plan_load reads nothing the handler already has. Best effort: on failure
 * nothing is cached (plan_load then reads the row). */
static void cache_stored(srv_app *app, st_plan *row, const cm_buf *doc)
{
    row->body = doc->data; /* borrowed for plan_blob, given back below */
    row->body_len = doc->len;
    srv_blob *blob = plan_blob(row);
    row->body = NULL;
    if (blob != NULL) {
        srv_cache_put(app, row->id, blob);
        srv_blob_release(blob);
    }
}

/* The job's finish: store the plan its request gave up waiting for. */
static void keep_store(plan_job *j, void *keep)
{
    st_db *db = srv_app_db_acquire(j->app);
    if (db == NULL) {
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    int64_t id = 0;
    bool existed = false;
    if (store_plan(db, keep, j->plan, &j->out, &id, &existed, NULL, &e) == CM_OK) {
        atomic_fetch_add(&j->app->metrics.plans_computed, 1);
    }
    srv_app_db_release(j->app, db);
}

/* Whether the plan may be computed on the request's thread
 * (SRV_PLAN_HERE_BYTES): a small input without calls, a deadline not near. */
static bool plan_is_quick(const sp_plan *plan, size_t len, double deadline)
{
    if (len > SRV_PLAN_HERE_BYTES || deadline - cm_now() < SRV_PLAN_HERE_MIN_S) {
        return false;
    }
    const sp_module *m = sp_plan_input(plan)->m;
    for (uint32_t i = 0; i < m->n_ops; i++) {
        if (m->ops[i].kind == SP_OP_FUNC_CALL) {
            return false;
        }
    }
    return true;
}

bool srv_plan_create(srv_app *app, srv_req *r, route_args *a, const srv_plan_req *pr_in,
                     double deadline, int64_t *id_out, bool *existed)
{
    cm_arena *arena = srv_req_arena(r);
    srv_plan_req pr = *pr_in;
    cm_error e;
    cm_error_clear(&e);
    *existed = false;
    sp_input_opts io;
    sp_input_opts_init(&io);
    if (pr.pass != NULL && !sp_plan_pass_parse(pr.pass, &io.pass)) {
        srv_reply_err(app, r, E_INVALID, "/options/pass", "unknown pass '%s'", pr.pass);
        return false;
    }
    plan_src s;
    memset(&s, 0, sizeof s);
    cm_buf_init(&s.merged);
    cm_buf_init(&s.rules);
    cm_buf_init(&s.extra);
    s.graph_id = pr.graph_id;
    srv_named_doc *rules = NULL;
    size_t n_rules = 0;
    bool ok = resolve_source(app, r, a, &pr) && resolve_mesh(app, r, a, &pr, &s);
    if (ok && load_rules(a->db, arena, &rules, &n_rules, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        ok = false;
    }
    if (ok) {
        n_rules = rules_used(&pr, rules, n_rules);
    }
    if (ok && merge_input(&pr, rules, n_rules, &s, &e) != CM_OK) {
        reply_input_error(app, r, &pr, &s, &e);
        ok = false;
    }
    /* 4. read the input into a plan: its key finds an equal stored plan */
    sp_plan *plan = NULL;
    sp_graph_limits lim;
    sp_graph_limits_init(&lim);
    lim.max_bytes = app->cfg.max_body_bytes;
    io.limits = &lim;
    io.rules = s.rules.len > 0 ? s.rules.data : NULL;
    io.rules_len = s.rules.len;
    if (ok && sp_plan_create(s.text, s.len, &io, s.extra.data, s.extra.len, &plan, &e) != CM_OK) {
        reply_input_error(app, r, &pr, &s, &e);
        ok = false;
    }
    if (ok) {
        st_plan sp;
        memset(&sp, 0, sizeof sp);
        if (st_plan_get_by_hash(a->db, sp_plan_key(plan), &sp, &e) == CM_OK) {
            *id_out = sp.id;
            st_plan_fini(&sp);
            atomic_fetch_add(&app->metrics.plans_deduplicated, 1);
            *existed = true;
            sp_plan_destroy(plan);
            plan_src_fini(&s);
            return true;
        }
        if (e.code != CM_ENOTFOUND) {
            srv_reply_cm(app, r, &e);
            ok = false;
        }
        cm_error_clear(&e);
    }
    /* A plan not known to be quick is planned from a handler thread (the
     * request runs again there), so that waiting for it holds no polling
     * thread; on a handler thread it goes to a plan worker. */
    bool here = ok && !srv_req_on_handler_thread(r) && plan_is_quick(plan, s.len, deadline);
    if (ok && !here && srv_req_defer(r)) {
        ok = false;
    }
    if (!ok) {
        sp_plan_destroy(plan);
        plan_src_fini(&s);
        return false;
    }
    /* planning, bounded by the request's deadline; the job owns the plan */
    bool is_json = pr.graph != NULL;
    plan_store_in x = {plan_name(&pr, plan),
                       is_json,
                       is_json ? pr.graph : pr.mlir,
                       is_json ? pr.graph_len : pr.mlir_len,
                       s.graph_id,
                       s.mesh_id,
                       s.mesh.name,
                       s.text,
                       s.len,
                       s.is_mlir,
                       s.rules.len > 0 ? s.rules.data : NULL,
                       s.rules.len};
    plan_job *j = srv_job_create(app, plan);
    if (j == NULL) {
        sp_plan_destroy(plan);
        plan_src_fini(&s);
        srv_reply_err(app, r, E_NOMEM, NULL, "out of memory");
        return false;
    }
    j->detach = keep_copy;
    j->detach_ctx = &x;
    j->finish = keep_store;
    j->keep_free = keep_free;
    if (here && !srv_job_run_here(app, j)) {
        /* past the polling thread's bound: the request runs again on a
         * handler thread, which plans it afresh on a worker (a polling
         * thread always has handler threads to defer to) */
        if (!srv_req_defer(r)) {
            srv_reply_err(app, r, E_UNAVAILABLE, NULL, "no handler thread took the plan");
        }
        srv_job_unref(j);
        plan_src_fini(&s);
        return false;
    }
    if (!here && !srv_job_run(app, r, j, deadline)) {
        srv_job_unref(j);
        plan_src_fini(&s);
        return false;
    }
    if (j->st != CM_OK) {
        reply_plan_failed(app, r, j->st, &j->stop, &j->err);
        srv_job_unref(j);
        plan_src_fini(&s);
        return false;
    }
    atomic_fetch_add(&app->metrics.plans_computed, 1);
    st_plan row;
    memset(&row, 0, sizeof row);
    cm_status st = store_plan(a->db, &x, j->plan, &j->out, id_out, existed, &row, &e);
    if (st == CM_OK && !*existed) {
        cache_stored(app, &row, &j->out);
    }
    st_plan_fini(&row);
    srv_job_unref(j);
    plan_src_fini(&s);
    if (st != CM_OK) {
        srv_reply_cm(app, r, &e);
        return false;
    }
    return true;
}

/* ---- a stored plan's input ----------------------------------------------------------------- */

cm_status srv_plan_input_load(st_db *db, int64_t id, srv_plan_input *pi, cm_error *err)
{
    memset(pi, 0, sizeof *pi);
    sp_input_opts_init(&pi->io);
    cm_status st = st_plan_get(db, id, &pi->row, err);
    if (st != CM_OK) {
        return st;
    }
    if (pi->row.options != NULL) {
        cm_arena tmp;
        cm_arena_init(&tmp, 256);
        const char *pass = srv_json_get_string(pi->row.options, pi->row.options_len, "pass", &tmp);
        bool ok = pass == NULL || sp_plan_pass_parse(pass, &pi->io.pass);
        if (pass != NULL) {
            snprintf(pi->pass, sizeof pi->pass, "%s", pass);
        }
        cm_arena_fini(&tmp);
        if (!ok) {
            return cm_error_set(err, CM_EINTERNAL, NULL, "plan %lld: stored pass '%s' is unknown",
                                (long long)id, pi->pass);
        }
    }
    if (pi->row.input != NULL) {
        pi->text = pi->row.input;
        pi->len = pi->row.input_len;
        pi->io.rules = pi->row.rules;
        pi->io.rules_len = pi->row.rules_len;
        return CM_OK;
    }
    /* stored before plans kept their input: the graph, with the plan's pass */
    st_graph g;
    memset(&g, 0, sizeof g);
    cm_error e;
    cm_error_clear(&e);
    st = st_graph_get(db, pi->row.graph_id, &g, &e);
    if (st == CM_OK) {
        pi->graph_body = g.body; /* taken over */
        pi->text = g.body;
        pi->len = g.body_len;
        g.body = NULL;
    } else if (st == CM_ENOMEM) {
        cm_error_oom(err);
    } else {
        st = cm_error_set(err, CM_EINTERNAL, NULL, "graph of plan %lld: %s", (long long)id, e.msg);
    }
    st_graph_fini(&g);
    return st;
}

bool srv_plan_input_get(srv_app *app, srv_req *r, route_args *a, int64_t id, srv_plan_input *pi)
{
    cm_error e;
    cm_error_clear(&e);
    if (srv_plan_input_load(a->db, id, pi, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return false;
    }
    return true;
}

void srv_plan_input_fini(srv_plan_input *pi)
{
    st_plan_fini(&pi->row);
    cm_free(pi->graph_body);
    memset(pi, 0, sizeof *pi);
}
