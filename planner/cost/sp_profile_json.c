/* SPDX-License-Identifier: Apache-2.0
 * planner: the device profile codec (see sp_profile_json.h). jansson parses;
 * every member is checked against the schema of docs/device-profiles.md and
 * errors name it by JSON Pointer. */
#include "sp_profile_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#define PROFILE_FORMAT "shardplan.device-profile/v1"

static const char *const dtype_keys[SP_COST_N_DTYPES] = {"f64",  "f32", "tf32", "bf16",
                                                        "f16",  "f8",  "int8", "int32"};

static cm_status bad(cm_error *err, const char *path, const char *msg)
{
    return cm_error_set(err, CM_EINVAL, path, "%s", msg);
}

/* A non-negative number at path (JSON integer or real). */
static cm_status number(const json_t *v, const char *path, double *out, cm_error *err)
{
    if (!json_is_number(v)) {
        return bad(err, path, "expected a number");
    }
    double d = json_number_value(v);
    if (!(d >= 0) || d > 1e30) {
        return bad(err, path, "expected a non-negative number");
    }
    *out = d;
    return CM_OK;
}

static cm_status text(const json_t *v, const char *path, char *out, size_t cap, cm_error *err)
{
    if (!json_is_string(v)) {
        return bad(err, path, "expected a string");
    }
    if (json_string_length(v) >= cap) {
        return bad(err, path, "string too long");
    }
    snprintf(out, cap, "%s", json_string_value(v));
    return CM_OK;
}

/* JSON Pointer escaping of one key (~ -> ~0, / -> ~1), appended to path. */
static void ptr_join(char *path, size_t cap, const char *base, const char *key)
{
    size_t n = (size_t)snprintf(path, cap, "%s/", base);
    for (const char *k = key; *k != '\0' && n + 3 < cap; k++) {
        if (*k == '~' || *k == '/') {
            path[n++] = '~';
            path[n++] = *k == '~' ? '0' : '1';
        } else {
            path[n++] = *k;
        }
    }
    path[n < cap ? n : cap - 1] = '\0';
}

static cm_status link_obj(const json_t *v, const char *path, sp_profile_link *l, cm_error *err)
{
    if (!json_is_object(v)) {
        return bad(err, path, "expected an object {\"bandwidth\", \"latency\"}");
    }
    const char *k;
    json_t *x;
    char p[CM_ERROR_PATH_LEN];
    bool has_bw = false;
    json_object_foreach((json_t *)(uintptr_t)v, k, x)
    {
        ptr_join(p, sizeof p, path, k);
        cm_status st = CM_OK;
        if (strcmp(k, "bandwidth") == 0) {
            st = number(x, p, &l->bandwidth, err);
            has_bw = true;
        } else if (strcmp(k, "latency") == 0) {
            st = number(x, p, &l->latency, err);
        } else if (strcmp(k, "source") == 0 || strcmp(k, "notes") == 0) {
            st = json_is_string(x) ? CM_OK : bad(err, p, "expected a string");
        } else {
            st = bad(err, p, "unknown member (bandwidth, latency, source, notes)");
        }
        if (st != CM_OK) {
            return st;
        }
    }
    if (!has_bw) {
        return bad(err, path, "missing member \"bandwidth\"");
    }
    return CM_OK;
}

/* The gemm curve at path: an array of {"n", "flops"} by strictly
 * ascending n > 0, at most SP_PROFILE_MAX_GEMM of them. */
static cm_status gemm_curve(const json_t *v, const char *path, sp_profile *p, cm_error *err)
{
    if (!json_is_array(v) || json_array_size(v) == 0) {
        return bad(err, path, "expected a non-empty array of {\"n\", \"flops\"}");
    }
    if (json_array_size(v) > SP_PROFILE_MAX_GEMM) {
        return bad(err, path, "too many points (at most 12)");
    }
    size_t i;
    json_t *pt;
    json_array_foreach(v, i, pt)
    {
        char ip[CM_ERROR_PATH_LEN], kp[CM_ERROR_PATH_LEN], idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        ptr_join(ip, sizeof ip, path, idx);
        if (!json_is_object(pt) || json_object_size(pt) != 2) {
            return bad(err, ip, "expected an object {\"n\", \"flops\"} and nothing else");
        }
        sp_profile_gemm *g = &p->gemm[i];
        ptr_join(kp, sizeof kp, ip, "n");
        cm_status st = number(json_object_get(pt, "n"), kp, &g->n, err);
        if (st == CM_OK && !(g->n > 0)) {
            st = bad(err, kp, "expected a size > 0");
        }
        if (st == CM_OK && i > 0 && !(g->n > p->gemm[i - 1].n)) {
            st = bad(err, kp, "sizes must ascend");
        }
        ptr_join(kp, sizeof kp, ip, "flops");
        if (st == CM_OK) {
            st = number(json_object_get(pt, "flops"), kp, &g->flops, err);
        }
        if (st == CM_OK && !(g->flops > 0)) {
            st = bad(err, kp, "expected FLOP/s > 0");
        }
        if (st != CM_OK) {
            return st;
        }
    }
    p->n_gemm = (uint32_t)json_array_size(v);
    return CM_OK;
}

static cm_status decode(const json_t *root, sp_profile *p, cm_error *err)
{
    if (!json_is_object(root)) {
        return bad(err, "", "a device profile is a JSON object");
    }
    const json_t *fmt = json_object_get(root, "format");
    if (fmt != NULL && (!json_is_string(fmt) || strcmp(json_string_value(fmt), PROFILE_FORMAT))) {
        return bad(err, "/format", "expected \"" PROFILE_FORMAT "\"");
    }
    bool has_name = false, has_source = false, has_peak = false;
    const char *k;
    json_t *v;
    char path[CM_ERROR_PATH_LEN];
    json_object_foreach((json_t *)(uintptr_t)root, k, v)
    {
        cm_status st = CM_OK;
        ptr_join(path, sizeof path, "", k);
        if (strcmp(k, "format") == 0 || strcmp(k, "description") == 0 ||
            strcmp(k, "notes") == 0 || strcmp(k, "calibrated") == 0) {
            if (strcmp(k, "calibrated") == 0 ? !json_is_boolean(v) : !json_is_string(v)) {
                st = bad(err, path, strcmp(k, "calibrated") == 0 ? "expected true or false"
                                                                  : "expected a string");
            }
            p->calibrated = p->calibrated || json_is_true(v);
        } else if (strcmp(k, "name") == 0) {
            st = text(v, path, p->name, sizeof p->name, err);
            has_name = true;
        } else if (strcmp(k, "source") == 0) {
            st = text(v, path, p->source, sizeof p->source, err);
            has_source = true;
        } else if (strcmp(k, "overlap") == 0) {
            st = number(v, path, &p->overlap, err);
            if (st == CM_OK && p->overlap > 1) {
                st = bad(err, path, "expected a fraction in [0, 1]");
            }
        } else if (strcmp(k, "gemm") == 0) {
            st = gemm_curve(v, path, p, err);
        } else if (strcmp(k, "transcendentals") == 0) {
            st = number(v, path, &p->transcendentals, err);
        } else if (strcmp(k, "peak_flops") == 0) {
            if (!json_is_object(v)) {
                st = bad(err, path, "expected an object of FLOP/s per dtype");
            }
            const char *dk;
            json_t *dv;
            json_object_foreach(v, dk, dv)
            {
                if (st != CM_OK) {
                    break;
                }
                char dp[CM_ERROR_PATH_LEN];
                ptr_join(dp, sizeof dp, path, dk);
                int i = 0;
                while (i < SP_COST_N_DTYPES && strcmp(dtype_keys[i], dk) != 0) {
                    i++;
                }
                if (i == SP_COST_N_DTYPES) {
                    st = bad(err, dp, "unknown dtype (f64, f32, tf32, bf16, f16, f8, int8, int32)");
                } else {
                    st = number(dv, dp, &p->peak_flops[i], err);
                    has_peak = has_peak || p->peak_flops[i] > 0;
                }
            }
        } else if (strcmp(k, "memory") == 0) {
            if (!json_is_object(v)) {
                st = bad(err, path, "expected an object {\"bytes\", \"bandwidth\", \"shared\"}");
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv)
            {
                if (st != CM_OK) {
                    break;
                }
                char mp[CM_ERROR_PATH_LEN];
                ptr_join(mp, sizeof mp, path, mk);
                if (strcmp(mk, "bytes") == 0) {
                    st = number(mv, mp, &p->mem_bytes, err);
                } else if (strcmp(mk, "bandwidth") == 0) {
                    st = number(mv, mp, &p->mem_bandwidth, err);
                } else if (strcmp(mk, "shared") == 0) {
                    st = json_is_boolean(mv) ? CM_OK : bad(err, mp, "expected true or false");
                    p->mem_shared = json_is_true(mv);
                } else if (strcmp(mk, "source") == 0 || strcmp(mk, "notes") == 0) {
                    st = json_is_string(mv) ? CM_OK : bad(err, mp, "expected a string");
                } else {
                    st = bad(err, mp, "unknown member (bytes, bandwidth, shared, source, notes)");
                }
            }
        } else if (strcmp(k, "links") == 0) {
            if (!json_is_object(v)) {
                st = bad(err, path, "expected an object of links by mesh axis name");
            }
            const char *lk;
            json_t *lv;
            bool has_default = false;
            json_object_foreach(v, lk, lv)
            {
                if (st != CM_OK) {
                    break;
                }
                char lp[CM_ERROR_PATH_LEN];
                ptr_join(lp, sizeof lp, path, lk);
                if (strcmp(lk, "default") == 0) {
                    st = link_obj(lv, lp, &p->link, err);
                    has_default = true;
                } else if (p->n_links >= SP_PROFILE_MAX_LINKS) {
                    st = bad(err, lp, "too many links (at most 16 axes)");
                } else if (strlen(lk) >= SP_PROFILE_NAME_LEN) {
                    st = bad(err, lp, "axis name too long");
                } else {
                    sp_profile_link *l = &p->links[p->n_links++];
                    snprintf(l->axis, sizeof l->axis, "%s", lk);
                    st = link_obj(lv, lp, l, err);
                }
            }
            if (st == CM_OK && !has_default) {
                st = bad(err, path, "missing member \"default\"");
            }
        } else {
            st = bad(err, path, "unknown member");
        }
        if (st != CM_OK) {
            return st;
        }
    }
    if (!has_name) {
        return bad(err, "/name", "missing member \"name\"");
    }
    if (!has_source) {
        return bad(err, "/source", "missing member \"source\": say where the figures come from");
    }
    if (!has_peak) {
        return bad(err, "/peak_flops", "missing: at least one dtype needs a peak FLOP/s");
    }
    if (json_object_get(root, "links") == NULL) {
        return bad(err, "/links", "missing member \"links\"");
    }
    if (json_object_get(root, "memory") == NULL) {
        return bad(err, "/memory", "missing member \"memory\"");
    }
    return CM_OK;
}

cm_status sp_profile_decode(const char *text_, size_t len, sp_profile *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *root = json_loadb(text_, len, JSON_REJECT_DUPLICATES, &je); /* new reference */
    if (root == NULL) {
        return cm_error_set(err, CM_EINVAL, "", "JSON syntax error at line %d column %d: %s",
                            je.line, je.column, je.text);
    }
    cm_status st = decode(root, out, err);
    json_decref(root);
    if (st != CM_OK) {
        memset(out, 0, sizeof *out);
    }
    return st;
}

static bool file_exists(const char *path)
{
    return access(path, R_OK) == 0;
}

cm_status sp_profile_load(const char *name, sp_profile *out, cm_error *err)
{
    char path[1024] = "";
    size_t n = strlen(name);
    bool is_path = strchr(name, '/') != NULL || (n > 5 && strcmp(name + n - 5, ".json") == 0);
    if (is_path) {
        snprintf(path, sizeof path, "%s", name);
    } else {
        for (const char *c = name; *c != '\0'; c++) {
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                  *c == '-' || *c == '_' || *c == '.')) {
                return cm_error_set(err, CM_EINVAL, NULL, "bad profile name '%s'", name);
            }
        }
        const char *env = getenv("SHARDPLAN_PROFILES");
        char exe[900];
        ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[el > 0 ? el : 0] = '\0';
        for (int up = 0; up < 3 && el > 0; up++) {
            char *sl = strrchr(exe, '/');
            if (sl != NULL) {
                *sl = '\0';
            }
        }
        const char *dirs[3] = {env, "profiles", el > 0 ? exe : NULL};
        for (int i = 0; i < 3 && path[0] == '\0'; i++) {
            if (dirs[i] == NULL || dirs[i][0] == '\0') {
                continue;
            }
            char cand[1024];
            snprintf(cand, sizeof cand, i == 2 ? "%s/profiles/%s.json" : "%s/%s.json", dirs[i],
                     name);
            if (file_exists(cand)) {
                snprintf(path, sizeof path, "%s", cand);
            }
        }
        if (path[0] == '\0') {
            if (strcmp(name, "cpu-local") == 0) {
                sp_profile_default(out);
                return CM_OK;
            }
            return cm_error_set(err, CM_ENOTFOUND, NULL,
                                "no profile '%s' (looked in $SHARDPLAN_PROFILES, ./profiles and "
                                "the source tree's profiles/)",
                                name);
        }
    }
    char *data = NULL;
    size_t len = 0;
    cm_status st = cm_file_read(path, &data, &len, err);
    if (st != CM_OK) {
        return st;
    }
    cm_error e2;
    cm_error_clear(&e2);
    st = sp_profile_decode(data, len, out, &e2);
    cm_free(data);
    if (st != CM_OK) {
        return cm_error_wrap(err, &e2, "%s", path);
    }
    return CM_OK;
}
