/* SPDX-License-Identifier: Apache-2.0
 * server: the migration reports (issue 20, docs/migration.md). POST
 * /v1/migrations takes a module as GSPMD left it (MLIR text, or
 * {"mlir": ..., "name": ..., "profile": ...}), builds the report `shardplan
 * migrate --json` prints (planner/advise/sp_migrate.h) and stores it with
 * its module (store: migration_reports); GET /v1/migrations lists them and
 * GET /v1/migrations/{id} returns one with its report and module. */
#include <stdio.h>
#include <string.h>

#include "cm_json.h"
#include "sp_cost.h"
#include "sp_migrate.h"
#include "srv_int.h"
#include "srv_json.h"

#define MIG_DEFAULT_PROFILE "cpu-local" /* as `shardplan migrate` */

/* A stored report's object; with_body adds "report" and "mlir". */
static void mig_json(cm_buf *b, const st_migreport *m, bool with_body)
{
    cm_buf_putc(b, '{');
    cm_json_put_kv_i64(b, "id", m->id);
    cm_json_put_kv_str(b, "name", m->name);
    cm_json_put_kv_str(b, "profile", m->profile);
    cm_json_put_kv_str(b, "hash", m->hash);
    cm_json_put_kv_i64(b, "size", (int64_t)m->input_len);
    cm_json_put_kv_i64(b, "created_at", m->created_at);
    if (with_body && m->body != NULL && m->input != NULL) {
        size_t n = m->body_len;
        while (n > 0 && (m->body[n - 1] == '\n' || m->body[n - 1] == ' ')) {
            n--;
        }
        cm_json_put_key(b, "report");
        cm_buf_append(b, m->body, n);
        cm_json_put_key(b, "mlir");
        cm_json_put_str(b, m->input, m->input_len);
    }
    cm_buf_putc(b, '}');
}

static void reply_mig(srv_app *app, srv_req *r, st_db *db, int64_t id, unsigned status,
                      bool existed)
{
    st_migreport m;
    memset(&m, 0, sizeof m);
    cm_error e;
    cm_error_clear(&e);
    if (st_migreport_get(db, id, &m, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    mig_json(&b, &m, true);
    if (existed) {
        b.len--; /* reopen the object */
        cm_json_put_kv_bool(&b, "existed", true);
        cm_buf_putc(&b, '}');
    }
    cm_buf_putc(&b, '\n');
    st_migreport_fini(&m);
    if (status == 201 || existed) {
        srv_set_location(r, "migrations", id);
    }
    srv_reply_buf(app, r, status, &b);
}

void srv_h_migration_post(srv_app *app, srv_req *r, route_args *a)
{
    size_t len;
    const char *body = srv_req_body(r, &len);
    body_kind k;
    if (!srv_body_kind_of(app, r, true, &k)) {
        return;
    }
    if (len == 0) {
        srv_reply_err(app, r, E_INVALID, "",
                      "empty body: send a module with GSPMD shardings as MLIR text, or "
                      "{\"mlir\": ...}");
        return;
    }
    cm_arena *arena = srv_req_arena(r);
    const char *text = body, *name = srv_req_query(r, "name");
    const char *pname = srv_req_query(r, "profile");
    size_t text_len = len;
    if (k == BODY_JSON) {
        cm_error je;
        cm_error_clear(&je);
        if (srv_json_check(body, len, true, &je) != CM_OK) {
            srv_reply_cm(app, r, &je);
            return;
        }
        text = srv_json_get_string(body, len, "mlir", arena);
        if (text == NULL || text[0] == '\0') {
            srv_reply_err(app, r, E_INVALID, "/mlir",
                          "missing: the module's MLIR text as the string member \"mlir\"");
            return;
        }
        text_len = strlen(text);
        if (name == NULL) {
            name = srv_json_get_name(body, len, arena);
        }
        if (pname == NULL) {
            pname = srv_json_get_string(body, len, "profile", arena);
        }
    }
    if (name == NULL || name[0] == '\0') {
        name = "module";
    }
    if (pname == NULL || pname[0] == '\0') {
        pname = MIG_DEFAULT_PROFILE;
    }
    /* the same request twice is one report: hash what the report depends on */
    cm_sha256 h;
    cm_sha256_init(&h);
    cm_sha256_update(&h, "migration", sizeof "migration");
    cm_sha256_update(&h, name, strlen(name) + 1);
    cm_sha256_update(&h, pname, strlen(pname) + 1);
    cm_sha256_update(&h, text, text_len);
    uint8_t dg[CM_SHA256_LEN];
    char hex[2 * CM_SHA256_LEN + 1];
    cm_sha256_final(&h, dg);
    cm_sha256_to_hex(dg, hex);
    cm_error e;
    cm_error_clear(&e);
    st_migreport old;
    memset(&old, 0, sizeof old);
    cm_status st = st_migreport_get_by_hash(a->db, hex, &old, &e);
    if (st == CM_OK) {
        int64_t id = old.id;
        st_migreport_fini(&old);
        reply_mig(app, r, a->db, id, 200, true);
        return;
    }
    if (st != CM_ENOTFOUND) {
        srv_reply_cm(app, r, &e);
        return;
    }
    cm_error_clear(&e);
    sp_profile prof;
    bool have_prof = false;
    if (!srv_profile_by_name(app, r, a, pname, &prof, &have_prof)) {
        return;
    }
    cm_buf rep;
    cm_buf_init(&rep);
    if (sp_migrate_report(text, text_len, name, have_prof ? &prof : NULL, true, &rep, &e) !=
        CM_OK) {
        cm_buf_fini(&rep);
        srv_reply_cm(app, r, &e);
        return;
    }
    st_migreport_in in = {hex, name, pname, text, text_len, rep.data, rep.len};
    int64_t id = 0;
    bool existed = false;
    st = st_migreport_put(a->db, &in, &id, &existed, &e);
    cm_buf_fini(&rep);
    if (st != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    reply_mig(app, r, a->db, id, existed ? 200 : 201, existed);
}

static void mig_item(cm_buf *b, const void *item, const void *ctx)
{
    (void)ctx;
    mig_json(b, item, false);
}

void srv_h_migration_list(srv_app *app, srv_req *r, route_args *a)
{
    size_t limit = 0;
    int64_t after = 0;
    if (!srv_query_paging(app, r, &limit, &after)) {
        return;
    }
    st_migreport_list l;
    cm_error e;
    cm_error_clear(&e);
    cm_status st = st_migreport_list_query(a->db, limit, after, &l, &e);
    SRV_REPLY_LIST(app, r, st, &e, l, mig_item, NULL);
    st_migreport_list_fini(&l);
}

void srv_h_migration_get(srv_app *app, srv_req *r, route_args *a)
{
    reply_mig(app, r, a->db, a->id, 200, false);
}
