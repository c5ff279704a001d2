/* SPDX-License-Identifier: Apache-2.0
 * server: the advisor handlers (planner/advise, docs/advisor.md): a plan's
 * lint findings and collectives, suggestions, what-if edits (optionally
 * saved as a new plan), the mesh/strategy sweep, and the comparison of
 * stored plans. Profiles come from the store by name, else shipped ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sp_advise.h"
#include "sp_compare.h"
#include "sp_profile_json.h"
#include "srv_int.h"

/* ---- plan-scoped advisors -------------------------------------------------------------------- */

static bool named_profile(srv_app *, srv_req *, route_args *, const char *, sp_profile *, bool *);
static bool query_profile(srv_app *, srv_req *, route_args *, sp_profile *, bool *);

/* The stored graph plan id was made from, into p and g (the caller finis
 * both, also on failure); false (reply sent) when the plan is missing or
 * its graph cannot be read. */
static bool plan_graph(srv_app *app, srv_req *r, route_args *a, int64_t id, st_plan *p, st_graph *g)
{
    cm_error e;
    cm_error_clear(&e);
    memset(p, 0, sizeof *p);
    memset(g, 0, sizeof *g);
    if (st_plan_get(a->db, id, p, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return false;
    }
    if (st_graph_get(a->db, p->graph_id, g, &e) != CM_OK) {
        srv_reply_err(app, r, E_INTERNAL, NULL, "graph of plan %lld: %s", (long long)id, e.msg);
        return false;
    }
    return true;
}

/* GET /v1/plans/{id}/lint and /collectives (planner/sp_advise.h, docs/advisor.md):
 * the plan's stored graph is linted (or its collectives listed) with the
 * query's profile (a stored profile by name, else a shipped one; default
 * cpu-local), mesh and min_bytes. */
void srv_h_plan_advise(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id;
    if (!srv_seg_id(app, r, a, &id)) {
        return;
    }
    bool lint = *(const advise_kind *)a->data == ADVISE_LINT; /* the route's data */
    cm_error e;
    cm_error_clear(&e);
    sp_profile prof;
    sp_advise_opts o;
    sp_advise_opts_init(&o);
    bool have_prof;
    if (!query_profile(app, r, a, &prof, &have_prof)) {
        return;
    }
    o.profile = have_prof ? &prof : NULL;
    o.mesh = srv_req_query(r, "mesh");
    const char *mb = srv_req_query(r, "min_bytes");
    int64_t min_bytes = 0;
    if (mb != NULL && !srv_parse_i64(mb, 0, &min_bytes)) {
        srv_reply_err(app, r, E_INVALID, "/min_bytes", "'%s' is not a byte count", mb);
        return;
    }
    o.min_bytes = (double)min_bytes;
    st_plan p;
    st_graph g;
    sp_advise *adv = NULL;
    if (!plan_graph(app, r, a, id, &p, &g)) {
        /* replied */
    } else if (sp_advise_run(g.body, g.body_len, &o, &adv, &e) != CM_OK) {
        /* a bad mesh name is the client's; anything else about stored data is ours */
        if (e.code == CM_EINVAL && strcmp(e.path, "/mesh") == 0) {
            srv_reply_cm(app, r, &e);
        } else {
            srv_reply_err(app, r, e.code == CM_ENOMEM ? E_NOMEM : E_INTERNAL, NULL, "%s", e.msg);
        }
    } else {
        cm_buf b;
        cm_buf_init(&b);
        if (lint) {
            sp_advise_write_lint_json(adv, &b);
        } else {
            sp_advise_write_colls_json(adv, &b);
        }
        cm_buf_putc(&b, '\n');
        srv_reply_buf(app, r, 200, &b);
    }
    sp_advise_destroy(adv);
    st_plan_fini(&p);
    st_graph_fini(&g);
}

/* GET /v1/plans/{id}/suggest?objective=time|memory&k=5&profile=&max_candidates=
 * (planner/sp_advise.h, docs/advisor.md "Suggest"): constraints for the
 * unannotated tensors of the plan's stored graph that cut the predicted step
 * time or peak memory, each scored by a full plan + partition + cost on the
 * machine's cores. max_candidates (default 48) is capped at 256 so that one
 * request stays in the seconds. */
void srv_h_plan_suggest(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id, k = 5, maxc = 48;
    if (!srv_seg_id(app, r, a, &id)) {
        return;
    }
    sp_suggest_opts o;
    sp_suggest_opts_init(&o);
    const char *obj = srv_req_query(r, "objective");
    if (obj != NULL && !sp_suggest_objective_parse(obj, &o.objective)) {
        srv_reply_err(app, r, E_INVALID, "/objective", "'%s' is not time or memory", obj);
        return;
    }
    if (!srv_query_i64(app, r, "k", 1, &k) || !srv_query_i64(app, r, "max_candidates", 1, &maxc)) {
        return;
    }
    if (k > 100) {
        srv_reply_err(app, r, E_INVALID, "/k", "k is at most 100");
        return;
    }
    if (maxc > 256) {
        srv_reply_err(app, r, E_INVALID, "/max_candidates", "max_candidates is at most 256");
        return;
    }
    o.k = (uint32_t)k;
    o.max_candidates = (uint32_t)maxc;
    sp_profile prof;
    bool have_prof;
    if (!query_profile(app, r, a, &prof, &have_prof)) {
        return;
    }
    o.profile = have_prof ? &prof : NULL;
    cm_error e;
    cm_error_clear(&e);
    st_plan p;
    st_graph g;
    sp_suggest *sg = NULL;
    if (!plan_graph(app, r, a, id, &p, &g)) {
        /* replied */
    } else if (sp_suggest_run(g.body, g.body_len, &o, &sg, &e) != CM_OK) {
        /* the options were checked above: anything else is about stored data */
        srv_reply_err(app, r, e.code == CM_ENOMEM ? E_NOMEM : E_INTERNAL, NULL, "%s", e.msg);
    } else {
        cm_buf b;
        cm_buf_init(&b);
        sp_suggest_write_json(sg, &b);
        cm_buf_putc(&b, '\n');
        srv_reply_buf(app, r, 200, &b);
    }
    sp_suggest_destroy(sg);
    st_plan_fini(&p);
    st_graph_fini(&g);
}

/* POST /v1/plans/{id}/whatif (planner/sp_advise.h, docs/advisor.md "What-if"):
 * the plan's stored graph with the body's edits, re-propagated incrementally
 * and diffed; with "save": true the edited module is planned and stored as
 * POST /v1/plans stores an MLIR body (201 + Location, "plan_id"). */
void srv_h_plan_whatif(srv_app *app, srv_req *r, route_args *a)
{
    double deadline = cm_now() + app->cfg.request_timeout_s;
    int64_t id;
    if (!srv_seg_id(app, r, a, &id)) {
        return;
    }
    size_t len;
    const char *body = srv_req_body(r, &len);
    if (len == 0) {
        srv_reply_err(app, r, E_INVALID, "", "empty body: send {\"edits\": [...]}");
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    sp_edit_list l;
    sp_edit_list_init(&l);
    bool save = false, have_prof = false;
    char pname[128];
    sp_profile prof;
    st_plan p;
    st_graph g;
    memset(&p, 0, sizeof p);
    memset(&g, 0, sizeof g);
    sp_whatif *w = NULL;
    sp_whatif_opts o;
    sp_whatif_opts_init(&o);
    if (sp_whatif_request_decode(body, len, &l, &save, pname, sizeof pname, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        goto out;
    }
    if (!named_profile(app, r, a, pname[0] != '\0' ? pname : srv_req_query(r, "profile"), &prof,
                       &have_prof)) {
        goto out;
    }
    o.profile = have_prof ? &prof : NULL;
    if (st_plan_get(a->db, id, &p, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        goto out;
    }
    if (st_graph_get(a->db, p.graph_id, &g, &e) != CM_OK) {
        srv_reply_err(app, r, E_INTERNAL, NULL, "graph of plan %lld: %s", (long long)id, e.msg);
        goto out;
    }
    if (sp_whatif_run(g.body, g.body_len, &l, &o, &w, &e) != CM_OK) {
        /* a bad edit is the client's; anything else about stored data is ours */
        if (e.code == CM_EINVAL && strncmp(e.path, "/edits", 6) == 0) {
            srv_reply_cm(app, r, &e);
        } else {
            srv_reply_err(app, r, e.code == CM_ENOMEM ? E_NOMEM : E_INTERNAL, NULL, "%s", e.msg);
        }
        goto out;
    }
    int64_t new_id = 0;
    bool existed = false;
    if (save) {
        srv_plan_req pr;
        memset(&pr, 0, sizeof pr);
        size_t mlen;
        const char *mlir = sp_whatif_mlir(w, &mlen);
        char name[96];
        snprintf(name, sizeof name, "what-if of plan %lld", (long long)id);
        pr.mlir = cm_arena_strndup(srv_req_arena(r), mlir, mlen);
        pr.mlir_len = mlen;
        pr.name = cm_arena_strdup(srv_req_arena(r), name);
        if (pr.mlir == NULL || pr.name == NULL) {
            srv_reply_err(app, r, E_NOMEM, NULL, "out of memory");
            goto out;
        }
        if (!srv_plan_create(app, r, a, &pr, deadline, &new_id, &existed)) {
            goto out;
        }
        srv_set_location(r, "plans", new_id);
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_whatif_write_json(w, new_id, &b);
    cm_buf_putc(&b, '\n');
    srv_reply_buf(app, r, save && !existed ? 201 : 200, &b);
out:
    sp_whatif_destroy(w);
    sp_edit_list_fini(&l);
    st_plan_fini(&p);
    st_graph_fini(&g);
}

/* A stored profile by name, else a shipped one; false (reply sent) when neither. */
static bool named_profile(srv_app *app, srv_req *r, route_args *a, const char *pname,
                          sp_profile *prof, bool *set);

static bool query_profile(srv_app *app, srv_req *r, route_args *a, sp_profile *prof, bool *set)
{
    return named_profile(app, r, a, srv_req_query(r, "profile"), prof, set);
}

/* Profile pname (NULL: none, *set false): a stored one, else a shipped one;
 * false (reply sent) when neither. */
static bool named_profile(srv_app *app, srv_req *r, route_args *a, const char *pname,
                          sp_profile *prof, bool *set)
{
    *set = false;
    if (pname == NULL) {
        return true;
    }
    cm_error e;
    cm_error_clear(&e);
    st_doc d;
    memset(&d, 0, sizeof d);
    cm_status st = st_profile_get(a->db, pname, &d, &e);
    if (st == CM_OK) {
        st = sp_profile_decode(d.body, d.body_len, prof, &e);
    } else if (st == CM_ENOTFOUND && strchr(pname, '/') == NULL) {
        cm_error_clear(&e);
        st = sp_profile_load(pname, prof, &e);
    }
    st_doc_fini(&d);
    if (st != CM_OK) {
        srv_reply_err(app, r, E_INVALID, "/profile", "profile '%s': %s", pname, e.msg);
        return false;
    }
    *set = true;
    return true;
}

/* GET /v1/sweep?devices=8&layers=4&d_model=&heads=&seq=&batch=&strategies=dp,tp&train=false
 * &profile=: `shardplan sweep` (docs/advisor.md). Sizes are capped so that one
 * request stays in the seconds: devices <= 4096, layers <= 256. */
void srv_h_sweep(srv_app *app, srv_req *r, route_args *a)
{
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    static const struct {
        const char *key;
        int64_t max;
    } nums[] = {{"devices", 4096}, {"layers", 256},      {"d_model", 1 << 16},
                {"heads", 1 << 12}, {"seq", 1 << 16}, {"batch", 1 << 16}};
    int64_t *dst[] = {&o.devices, NULL, &o.d_model, &o.heads, &o.seq, &o.batch};
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const char *v = srv_req_query(r, nums[i].key);
        int64_t n = 0;
        if (v == NULL) {
            continue;
        }
        if (!srv_parse_i64(v, 1, &n) || n > nums[i].max) {
            char path[32];
            snprintf(path, sizeof path, "/%s", nums[i].key);
            srv_reply_err(app, r, E_INVALID, path, "'%s' is not in [1, %lld]", v,
                          (long long)nums[i].max);
            return;
        }
        if (dst[i] != NULL) {
            *dst[i] = n;
        } else {
            o.layers = (uint32_t)n;
        }
    }
    const char *train = srv_req_query(r, "train");
    if (train != NULL) {
        if (strcmp(train, "true") != 0 && strcmp(train, "false") != 0) {
            srv_reply_err(app, r, E_INVALID, "/train", "give true or false");
            return;
        }
        o.train = strcmp(train, "true") == 0;
    }
    const char *strat = srv_req_query(r, "strategies");
    if (strat != NULL) {
        static const char *const names[] = {"dp", "fsdp", "tp", "dp+tp"};
        o.strategies = 0;
        for (const char *s = strat; *s != '\0';) {
            size_t k = strcspn(s, ",");
            int j = 0;
            while (j < 4 && (strlen(names[j]) != k || strncmp(s, names[j], k) != 0)) {
                j++;
            }
            if (j == 4) {
                srv_reply_err(app, r, E_INVALID, "/strategies",
                              "'%.*s' is not dp, fsdp, tp or dp+tp", (int)k, s);
                return;
            }
            o.strategies |= 1u << j;
            s += k + (s[k] == ',');
        }
    }
    sp_profile prof;
    bool have_prof;
    if (!query_profile(app, r, a, &prof, &have_prof)) {
        return;
    }
    o.profile = have_prof ? &prof : NULL;
    cm_error e;
    cm_error_clear(&e);
    sp_sweep_result res;
    if (sp_sweep_run(&o, &res, &e) != CM_OK) {
        srv_reply_cm(app, r, &e);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_sweep_write_json(&res, &b);
    cm_buf_putc(&b, '\n');
    sp_sweep_result_fini(&res);
    srv_reply_buf(app, r, 200, &b);
}

/* ---- compare ---------------------------------------------------------------------------------------- */

void srv_h_compare(srv_app *app, srv_req *r, route_args *a)
{
    const char *list = srv_req_query(r, "plans");
    if (list == NULL) {
        srv_reply_err(app, r, E_INVALID, "/plans", "give plans=ID,ID[,ID,ID]");
        return;
    }
    int64_t ids[4];
    size_t n = 0;
    const char *s = list;
    while (*s != '\0') {
        const char *comma = strchr(s, ',');
        size_t k = comma != NULL ? (size_t)(comma - s) : strlen(s);
        char tmp[32];
        if (n == 4 || k == 0 || k >= sizeof tmp) {
            srv_reply_err(app, r, E_INVALID, "/plans", "give 2 to 4 plan ids separated by commas");
            return;
        }
        memcpy(tmp, s, k);
        tmp[k] = '\0';
        if (!srv_parse_i64(tmp, 1, &ids[n])) {
            srv_reply_err(app, r, E_INVALID, "/plans", "'%s' is not a plan id", tmp);
            return;
        }
        n++;
        s += k + (comma != NULL);
    }
    if (n < 2) {
        srv_reply_err(app, r, E_INVALID, "/plans", "give 2 to 4 plan ids separated by commas");
        return;
    }
    /* the planner compares files: write each plan's graph to a temporary file */
    const char *tmpdir = getenv("TMPDIR");
    char paths[5][256];
    int n_files = 0;
    cm_error e;
    cm_error_clear(&e);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        st_plan p;
        st_graph g;
        memset(&p, 0, sizeof p);
        memset(&g, 0, sizeof g);
        if (st_plan_get(a->db, ids[i], &p, &e) != CM_OK) {
            char path[32];
            snprintf(path, sizeof path, "/plans/%zu", i);
            srv_reply_err(app, r, srv_err_of_status(e.code), path, "%s", e.msg);
            ok = false;
        } else if (st_graph_get(a->db, p.graph_id, &g, &e) != CM_OK) {
            srv_reply_err(app, r, E_INTERNAL, NULL, "graph of plan %lld: %s", (long long)ids[i],
                          e.msg);
            ok = false;
        } else {
            snprintf(paths[n_files], sizeof paths[n_files], "%s/shardplan-cmp-XXXXXX",
                     tmpdir != NULL ? tmpdir : "/tmp");
            int fd = mkstemp(paths[n_files]);
            ok = fd >= 0 && write(fd, g.body, g.body_len) == (ssize_t)g.body_len;
            if (fd >= 0) {
                close(fd);
                n_files++;
            }
            if (!ok) {
                srv_reply_err(app, r, E_UNAVAILABLE, NULL, "cannot write a temporary file");
            }
        }
        st_plan_fini(&p);
        st_graph_fini(&g);
    }
    /* a stored profile by that name is passed as a file */
    const char *profile = srv_req_query(r, "profile");
    char prof_path[256] = "";
    if (ok && profile != NULL) {
        st_doc d;
        memset(&d, 0, sizeof d);
        if (st_profile_get(a->db, profile, &d, &e) == CM_OK) {
            snprintf(prof_path, sizeof prof_path, "%s/shardplan-prof-XXXXXX",
                     tmpdir != NULL ? tmpdir : "/tmp");
            int fd = mkstemp(prof_path);
            ok = fd >= 0 && write(fd, d.body, d.body_len) == (ssize_t)d.body_len;
            if (fd >= 0) {
                close(fd);
            } else {
                prof_path[0] = '\0';
            }
            if (!ok) {
                srv_reply_err(app, r, E_UNAVAILABLE, NULL, "cannot write a temporary file");
            }
        }
        st_doc_fini(&d);
    }
    if (ok) {
        char *argv[12];
        int argc = 0;
        char cmd[] = "compare", fmt_flag[] = "--format", fmt[] = "json", prof_flag[] = "--profile";
        argv[argc++] = cmd;
        for (int i = 0; i < n_files; i++) {
            argv[argc++] = paths[i];
        }
        argv[argc++] = fmt_flag;
        argv[argc++] = fmt;
        char *prof_arg = cm_arena_strdup(srv_req_arena(r),
                                         prof_path[0] != '\0' ? prof_path
                                         : profile != NULL    ? profile
                                                              : "");
        if (profile != NULL && prof_arg != NULL) {
            argv[argc++] = prof_flag;
            argv[argc++] = prof_arg;
        }
        argv[argc] = NULL;
        char *out_data = NULL, *err_data = NULL;
        size_t out_len = 0, err_len = 0;
        FILE *out = open_memstream(&out_data, &out_len);
        FILE *errs = open_memstream(&err_data, &err_len);
        int rc = out != NULL && errs != NULL ? sp_compare_main(argc, argv, out, errs) : -1;
        if (out != NULL) {
            fclose(out);
        }
        if (errs != NULL) {
            fclose(errs);
        }
        if (rc == 0 && out_data != NULL) {
            /* the report names its inputs by file: name them by plan instead,
             * so no server path reaches the client */
            cm_buf b;
            cm_buf_init(&b);
            const char *at = out_data, *end = out_data + out_len;
            while (at < end) {
                const char *next = end;
                int which = -1;
                size_t plen = 0;
                for (int i = 0; i < n_files; i++) {
                    size_t l = strlen(paths[i]);
                    const char *q = strstr(at, paths[i]);
                    if (q != NULL && q > at && q[-1] == '"' && q + l < end && q[l] == '"' &&
                        q < next) {
                        next = q;
                        which = i;
                        plen = l;
                    }
                }
                cm_buf_append(&b, at, (size_t)(next - at));
                if (which < 0) {
                    break;
                }
                cm_buf_printf(&b, "plans/%lld", (long long)ids[which]);
                at = next + plen;
            }
            srv_reply_buf(app, r, 200, &b);
        } else {
            size_t k = err_len;
            while (k > 0 && err_data[k - 1] == '\n') {
                k--;
            }
            srv_reply_err(app, r, rc == 2 ? E_INVALID : E_INTERNAL, "/plans",
                          "compare failed: %.*s", (int)(k < 200 ? k : 200),
                          err_data != NULL ? err_data : "");
        }
        free(out_data);
        free(err_data);
    }
    for (int i = 0; i < n_files; i++) {
        unlink(paths[i]);
    }
    if (prof_path[0] != '\0') {
        unlink(prof_path);
    }
}
