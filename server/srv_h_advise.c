/* SPDX-License-Identifier: Apache-2.0
 * server: the advisor handlers (planner/advise, docs/advisor.md): a plan's
 * lint findings and collectives, suggestions, what-if edits (optionally
 * saved as a new plan), the mesh/strategy sweep, and the comparison of
 * stored plans. Profiles come from the store by name, else shipped ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sp_lint.h"
#include "sp_suggest.h"
#include "sp_sweep.h"
#include "sp_whatif.h"
#include "sp_compare.h"
#include "sp_cost.h"
#include "sp_input.h"
#include "sp_profile_json.h"
#include "srv_int.h"

/* ---- plan-scoped advisors -------------------------------------------------------------------- */

static bool named_profile(srv_app *, srv_req *, route_args *, const char *, sp_profile *, bool *);
static bool query_profile(srv_app *, srv_req *, route_args *, sp_profile *, bool *);

/* GET /v1/plans/{id}/lint and /collectives (planner/advise/sp_lint.h, docs/advisor.md):
 * the plan's input, loaded with its pass and rules (srv_plan_input_get), is linted (or its collectives listed) with the
 * query's profile (a stored profile by name, else a shipped one; default
 * cpu-local), mesh and min_bytes. */
void srv_h_plan_advise(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id = a->id;
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
    srv_plan_input pi;
    sp_advise *adv = NULL;
    if (!srv_plan_input_get(app, r, a, id, &pi)) {
        /* replied */
    } else if (sp_advise_run(pi.text, pi.len, &pi.io, &o, &adv, &e) != CM_OK) {
        /* a bad mesh name is the client's; anything else about stored data is ours */
        if (e.code == CM_EINVAL && strcmp(e.path, "/mesh") == 0) {
            srv_reply_cm(app, r, &e);
        } else {
            srv_reply_ours(app, r, &e);
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
    srv_plan_input_fini(&pi);
}

/* ---- stopping long computations ------------------------------------------------------------ */

/* A computation's stop hook (srv_stop, srv_int.h) with the request's
 * compute deadline (--compute-timeout). */
static void compute_stop_init(srv_stop *cs, srv_app *app, srv_req *r)
{
    srv_stop_init(cs, app, r, app->cfg.compute_timeout_s);
}

/* The reply of a computation that failed with e: why it was stopped when
 * it was, else e as ours (is_ours) or the client's. */
static void reply_stopped_or(srv_app *app, srv_req *r, srv_stop *cs, const char *what,
                             const cm_error *e, bool is_ours)
{
    switch (atomic_load(&cs->why)) {
    case SRV_STOP_DEADLINE:
        srv_reply_err(app, r, E_TIMEOUT, NULL,
                      "%s stopped at its %g s limit (--compute-timeout); ask for less "
                      "(suggest: max_candidates, k; sweep: devices) or raise the limit",
                      what, app->cfg.compute_timeout_s);
        return;
    case SRV_STOP_SHUTDOWN:
        srv_reply_err(app, r, E_UNAVAILABLE, NULL, "%s stopped: the server is shutting down",
                      what);
        return;
    case SRV_STOP_GONE:
        srv_reply_err(app, r, E_UNAVAILABLE, NULL, "%s stopped: the client has gone", what);
        return;
    default:
        break;
    }
    if (is_ours) {
        srv_reply_ours(app, r, e);
    } else {
        srv_reply_cm(app, r, e);
    }
}

/* GET /v1/plans/{id}/suggest?objective=time|memory&k=5&profile=&max_candidates=
 * (planner/advise/sp_suggest.h, docs/advisor.md "Suggest"): constraints for the
 * unannotated tensors of the plan's input (with its pass and rules) that cut the predicted step
 * time or peak memory, each scored by a full plan + partition + cost on the
 * machine's cores. max_candidates (default 48) is capped at 256 so that one
 * request stays in the seconds. */
void srv_h_plan_suggest(srv_app *app, srv_req *r, route_args *a)
{
    int64_t id = a->id, k = 5, maxc = 48;
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
    srv_stop cs;
    compute_stop_init(&cs, app, r);
    o.cancel = srv_stop_poll;
    o.cancel_ctx = &cs;
    cm_error e;
    cm_error_clear(&e);
    srv_plan_input pi;
    sp_suggest *sg = NULL;
    if (!srv_plan_input_get(app, r, a, id, &pi)) {
        /* replied */
    } else if (sp_suggest_run(pi.text, pi.len, &pi.io, &o, &sg, &e) != CM_OK) {
        /* the options were checked above: anything else is about stored data */
        reply_stopped_or(app, r, &cs, "suggest", &e, true);
    } else {
        cm_buf b;
        cm_buf_init(&b);
        sp_suggest_write_json(sg, &b);
        cm_buf_putc(&b, '\n');
        srv_reply_buf(app, r, 200, &b);
    }
    sp_suggest_destroy(sg);
    srv_plan_input_fini(&pi);
}

/* GET /v1/plans/{id}/sweep?devices=&mesh=&profile=&logical_rules=
 * (planner/advise/sp_sweep.h, docs/advisor.md "Sweep"): the plan's own input
 * over every mesh of a device count (default: its mesh's own), axis names
 * and order kept, or with logical_rules=true over its logical-axis-rule
 * variants (a Flax graph), each variant planned with the plan's pass and
 * rules and ranked. At most
 * SP_SWEEP_MAX_VARIANTS meshes; the compute deadline and a client that
 * leaves stop it. */
void srv_h_plan_sweep(srv_app *app, srv_req *r, route_args *a)
{
    sp_sweep_opts o;
    sp_sweep_opts_init(&o);
    o.devices = 0;
    const char *dv = srv_req_query(r, "devices");
    if (dv != NULL && (!srv_parse_i64(dv, 1, &o.devices) || o.devices > 4096)) {
        srv_reply_err(app, r, E_INVALID, "/devices", "'%s' is not in [1, 4096]", dv);
        return;
    }
    const char *mesh = srv_req_query(r, "mesh");
    const char *lr = srv_req_query(r, "logical_rules");
    if (lr != NULL && strcmp(lr, "true") != 0 && strcmp(lr, "false") != 0) {
        srv_reply_err(app, r, E_INVALID, "/logical_rules", "give true or false");
        return;
    }
    bool logical = lr != NULL && strcmp(lr, "true") == 0;
    if (logical && dv != NULL) {
        srv_reply_err(app, r, E_INVALID, "/devices",
                      "a logical-rules sweep keeps the plan's mesh: give no devices");
        return;
    }
    sp_profile prof;
    bool have_prof;
    if (!query_profile(app, r, a, &prof, &have_prof)) {
        return;
    }
    o.profile = have_prof ? &prof : NULL;
    srv_stop cs;
    compute_stop_init(&cs, app, r);
    o.cancel = srv_stop_poll;
    o.cancel_ctx = &cs;
    cm_error e;
    cm_error_clear(&e);
    srv_plan_input pi;
    if (!srv_plan_input_get(app, r, a, a->id, &pi)) {
        return; /* replied */
    }
    sp_sweep_result res;
    if ((logical ? sp_sweep_rules_run(pi.text, pi.len, &pi.io, mesh, &o, &res, &e)
                 : sp_sweep_module_run(pi.text, pi.len, &pi.io, mesh, &o, &res, &e)) != CM_OK) {
        /* the mesh, the device count and asking a rules sweep of a plan that
         * has no logical names are the client's; the rest is about stored data */
        bool theirs = e.code == CM_EINVAL &&
                      (strcmp(e.path, "/mesh") == 0 || strcmp(e.path, "/devices") == 0 ||
                       strcmp(e.path, "/logical_axis_rules") == 0);
        reply_stopped_or(app, r, &cs, "sweep", &e, !theirs);
        srv_plan_input_fini(&pi);
        return;
    }
    srv_plan_input_fini(&pi);
    cm_buf b;
    cm_buf_init(&b);
    sp_sweep_write_json(&res, &b);
    cm_buf_putc(&b, '\n');
    sp_sweep_result_fini(&res);
    srv_reply_buf(app, r, 200, &b);
}

/* POST /v1/plans/{id}/whatif (planner/advise/sp_whatif.h, docs/advisor.md "What-if"):
 * the plan's input (with its pass and rules) with the body's edits,
 * re-propagated incrementally and diffed; with "save": true the edited module
 * is planned with the same pass and stored as POST /v1/plans stores an MLIR
 * body (201 + Location, "plan_id"). */
void srv_h_plan_whatif(srv_app *app, srv_req *r, route_args *a)
{
    double deadline = srv_req_ready_at(r) + app->cfg.request_timeout_s;
    int64_t id = a->id;
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
    srv_plan_input pi;
    memset(&pi, 0, sizeof pi);
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
    srv_stop cs;
    compute_stop_init(&cs, app, r);
    o.cancel = srv_stop_poll;
    o.cancel_ctx = &cs;
    if (!srv_plan_input_get(app, r, a, id, &pi)) {
        goto out;
    }
    if (sp_whatif_run(pi.text, pi.len, &pi.io, &l, &o, &w, &e) != CM_OK) {
        /* a bad edit is the client's; anything else about stored data is ours */
        reply_stopped_or(app, r, &cs, "what-if", &e,
                         !(e.code == CM_EINVAL && strncmp(e.path, "/edits", 6) == 0));
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
        pr.pass = pi.pass[0] != '\0' ? pi.pass : NULL;
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
    srv_plan_input_fini(&pi);
}

/* The plan's cost as it runs (its input loaded with its pass and rules,
 * partitioned, costed with the query's profile), replied as the cost
 * document or, with memory, as the memory timeline of at most max_points
 * points. */
static void plan_cost_reply(srv_app *app, srv_req *r, route_args *a, bool memory,
                            uint32_t max_points)
{
    int64_t id = a->id;
    sp_profile prof;
    bool have_prof;
    if (!query_profile(app, r, a, &prof, &have_prof)) {
        return;
    }
    srv_plan_input pi;
    if (!srv_plan_input_get(app, r, a, id, &pi)) {
        srv_plan_input_fini(&pi);
        return;
    }
    cm_error e;
    cm_error_clear(&e);
    sp_input in;
    memset(&in, 0, sizeof in);
    sp_cost *c = NULL;
    sp_cost_opts co;
    sp_cost_opts_init(&co);
    co.profile = have_prof ? &prof : NULL;
    co.timeline = memory;
    cm_status st = sp_input_read(pi.text, pi.len, &pi.io, &in, &e);
    if (st == CM_OK) {
        st = sp_input_partition(&in, &e);
    }
    if (st == CM_OK) {
        co.custom = in.custom;
        if (in.g != NULL) {
            co.value_names = sp_graph_value_names(in.g, &co.n_value_names);
        }
        st = sp_cost_compute(in.m, &co, &c, &e);
    }
    if (st != CM_OK) {
        /* the input is our stored data: a failure to cost it is ours */
        srv_reply_ours(app, r, &e);
    } else {
        cm_buf b;
        cm_buf_init(&b);
        if (memory) {
            sp_cost_write_memory_json(c, in.m, max_points, true, &b);
        } else {
            sp_cost_write_json(c, in.m, &b);
        }
        cm_buf_putc(&b, '\n');
        srv_reply_buf(app, r, 200, &b);
    }
    sp_cost_destroy(c);
    sp_input_fini(&in);
    srv_plan_input_fini(&pi);
}

/* GET /v1/plans/{id}/cost?profile= (planner/cost/sp_cost.h, docs/cost-model.md):
 * the per-device cost of the plan as it runs: its input loaded with its pass
 * and rules, partitioned (explicit reshards and collectives) and costed; the
 * same as `shardplan cost INPUT --pass P [--rules R] --partition --format
 * json` on the plan's input. */
void srv_h_plan_cost(srv_app *app, srv_req *r, route_args *a)
{
    plan_cost_reply(app, r, a, false, 0);
}

/* GET /v1/plans/{id}/memory?profile=&points= (docs/cost-model.md, "Memory
 * over program order"): the same costing, answered with live bytes per
 * device at each op (at most points points, default 10000, 1..100000), the
 * peak, the op there with its source location and the largest buffers live
 * there. */
void srv_h_plan_memory(srv_app *app, srv_req *r, route_args *a)
{
    int64_t points = 10000;
    if (!srv_query_i64(app, r, "points", 1, &points)) {
        return;
    }
    if (points > 100000) {
        points = 100000;
    }
    plan_cost_reply(app, r, a, true, (uint32_t)points);
}

/* A stored profile by name, else a shipped one; false (reply sent) when neither. */
static bool named_profile(srv_app *app, srv_req *r, route_args *a, const char *pname,
                          sp_profile *prof, bool *set);

static bool query_profile(srv_app *app, srv_req *r, route_args *a, sp_profile *prof, bool *set)
{
    return named_profile(app, r, a, srv_req_query(r, "profile"), prof, set);
}

/* Profile pname (NULL: none, *set false): a stored one, else a built-in one
 * (srv_builtin_profiles); never a file. False (reply sent) when neither. */
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
    } else if (st == CM_ENOTFOUND) {
        const srv_builtin_profile *b = srv_builtin_profiles;
        while (b->name != NULL && strcmp(b->name, pname) != 0) {
            b++;
        }
        if (b->name != NULL) {
            cm_error_clear(&e);
            st = sp_profile_decode(b->json, b->len, prof, &e);
        } else {
            char names[256] = "";
            for (b = srv_builtin_profiles; b->name != NULL; b++) {
                size_t n = strlen(names);
                snprintf(names + n, sizeof names - n, "%s%s", n > 0 ? ", " : "", b->name);
            }
            st_doc_fini(&d);
            srv_reply_err(app, r, E_INVALID, "/profile",
                          "no profile '%s': none stored by that name and none built in (%s)",
                          pname, names);
            return false;
        }
    }
    st_doc_fini(&d);
    if (st != CM_OK) {
        srv_reply_err(app, r, E_INVALID, "/profile", "profile '%s': %s", pname, e.msg);
        return false;
    }
    *set = true;
    return true;
}

bool srv_profile_by_name(srv_app *app, srv_req *r, route_args *a, const char *pname,
                         sp_profile *prof, bool *set)
{
    return named_profile(app, r, a, pname, prof, set);
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
    srv_stop cs;
    compute_stop_init(&cs, app, r);
    o.cancel = srv_stop_poll;
    o.cancel_ctx = &cs;
    cm_error e;
    cm_error_clear(&e);
    sp_sweep_result res;
    if (sp_sweep_run(&o, &res, &e) != CM_OK) {
        reply_stopped_or(app, r, &cs, "sweep", &e, false);
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
    /* each plan as it was made: its input, pass and rules (srv_plan_input_get) */
    srv_plan_input pi[4];
    memset(pi, 0, sizeof pi);
    sp_compare_input in[4];
    char labels[4][32];
    cm_error e;
    cm_error_clear(&e);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        if (srv_plan_input_load(a->db, ids[i], &pi[i], &e) != CM_OK) {
            char path[32];
            snprintf(path, sizeof path, "/plans/%zu", i);
            srv_reply_err(app, r, srv_err_of_status(e.code), e.code == CM_ENOTFOUND ? path : NULL,
                          "%s", e.msg);
            ok = false;
            break;
        }
        snprintf(labels[i], sizeof labels[i], "plans/%lld", (long long)ids[i]);
        in[i].label = labels[i];
        in[i].text = pi[i].text;
        in[i].len = pi[i].len;
        in[i].in_opts = &pi[i].io;
    }
    sp_profile prof;
    bool have_prof = false;
    sp_compare_opts o;
    sp_compare_opts_init(&o);
    if (ok && !query_profile(app, r, a, &prof, &have_prof)) {
        ok = false;
    }
    o.profile = have_prof ? &prof : NULL;
    srv_stop cs;
    compute_stop_init(&cs, app, r);
    o.cancel = srv_stop_poll;
    o.cancel_ctx = &cs;
    sp_compare *c = NULL;
    if (ok && sp_compare_run(in, (uint32_t)n, &o, &c, &e) != CM_OK) {
        /* the inputs are our stored data: a failure to compare them is ours */
        reply_stopped_or(app, r, &cs, "compare", &e, true);
        ok = false;
    }
    if (ok) {
        cm_buf b;
        cm_buf_init(&b);
        sp_compare_write_json(c, &b);
        srv_reply_buf(app, r, 200, &b);
    }
    sp_compare_destroy(c);
    for (size_t i = 0; i < n; i++) {
        srv_plan_input_fini(&pi[i]);
    }
}
