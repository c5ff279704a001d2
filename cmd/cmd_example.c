/* SPDX-License-Identifier: Apache-2.0
 * cmd: `shardplan example`, a model template as a graph document or MLIR
 * (planner/gen/sp_example.h). */
#include "cmd.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "cmd_util.h"
#include "sp_example.h"

static bool parse_mesh(const char *s, sp_example_opts *o)
{
    o->n_axes = 0;
    while (*s != '\0') {
        const char *eq = strchr(s, '=');
        if (eq == NULL || eq == s || (size_t)(eq - s) >= sizeof o->axis_names[0] ||
            o->n_axes >= SP_EXAMPLE_MAX_AXES) {
            return false;
        }
        char *end;
        long long v = strtoll(eq + 1, &end, 10);
        if (end == eq + 1 || v < 1 || v > 65536 || (*end != ',' && *end != '\0')) {
            return false;
        }
        memcpy(o->axis_names[o->n_axes], s, (size_t)(eq - s));
        o->axis_names[o->n_axes][eq - s] = '\0';
        o->axis_sizes[o->n_axes++] = v;
        s = *end == ',' ? end + 1 : end;
    }
    return o->n_axes > 0;
}

static bool parse_i64(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end != '\0') {
        return false;
    }
    *out = v;
    return true;
}

static void usage(FILE *f)
{
    fputs("usage: shardplan example mlp|transformer [--layers N --d-model D --heads H "
          "--seq S --batch B --mesh data=2,model=4 --strategy dp|fsdp|tp|dp+tp] "
          "[--train] [--json|--mlir]\n"
          "  writes a graph document (--json, the default) or its MLIR (--mlir) of the model's\n"
          "  forward pass (--format json|mlir is the older spelling);\n"
          "  --train: a training step instead: forward, loss sum(y*y)/2, backward "
          "pass, SGD\n"
          "  update; outputs the loss and every updated parameter\n",
          f);
}

int cmd_example(int argc, char **argv, FILE *out, FILE *errs)
{
    if (cmd_wants_help(argc, argv)) {
        usage(out);
        return 0;
    }
    sp_example_opts o;
    sp_example_opts_init(&o);
    const char *format = "json";
    bool have_model = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n = 0;
        bool ok = true;
        if (strcmp(a, "mlp") == 0 || strcmp(a, "transformer") == 0) {
            o.model = a[0] == 'm' ? SP_EXAMPLE_MLP : SP_EXAMPLE_TRANSFORMER;
            have_model = true;
            continue;
        }
        if (strcmp(a, "--train") == 0) {
            o.train = true;
            continue;
        }
        if (strcmp(a, "--json") == 0 || strcmp(a, "--mlir") == 0) {
            format = a + 2;
            continue;
        }
        if (v == NULL) {
            ok = false;
        } else if (strcmp(a, "--layers") == 0) {
            ok = parse_i64(v, &n) && n >= 1 && n <= 100000;
            o.layers = (uint32_t)(ok ? n : 1);
        } else if (strcmp(a, "--d-model") == 0) {
            ok = parse_i64(v, &o.d_model);
        } else if (strcmp(a, "--heads") == 0) {
            ok = parse_i64(v, &o.heads);
        } else if (strcmp(a, "--seq") == 0) {
            ok = parse_i64(v, &o.seq);
        } else if (strcmp(a, "--batch") == 0) {
            ok = parse_i64(v, &o.batch);
        } else if (strcmp(a, "--mesh") == 0) {
            ok = parse_mesh(v, &o);
        } else if (strcmp(a, "--format") == 0) {
            format = v;
            ok = strcmp(v, "json") == 0 || strcmp(v, "mlir") == 0;
        } else if (strcmp(a, "--strategy") == 0) {
            ok = sp_example_strategy_parse(v, &o.strategy);
        } else {
            ok = false;
        }
        if (!ok) {
            fprintf(errs, "shardplan example: bad option '%s%s%s'\n", a, v != NULL ? " " : "",
                    v != NULL ? v : "");
            have_model = false;
            break;
        }
        i++;
    }
    if (!have_model) {
        usage(errs);
        return 2;
    }
    cm_error err;
    cm_error_clear(&err);
    cm_buf b;
    cm_buf_init(&b);
    cm_status st = strcmp(format, "mlir") == 0 ? sp_example_mlir(&o, &b, &err)
                                               : sp_example_graph_json(&o, &b, &err);
    int rc = 0;
    if (st != CM_OK) {
        fprintf(errs, "shardplan example: %s%s%s: %s\n", cm_status_name(st),
                err.path[0] != '\0' ? " at " : "", err.path, err.msg);
        rc = 1;
    } else if (fwrite(b.data, 1, b.len, out) != b.len) {
        rc = 1;
    }
    cm_buf_fini(&b);
    return rc;
}
