/* SPDX-License-Identifier: Apache-2.0
 * cmd: helpers the subcommands share (cmd_util.h). */
#include "cmd_util.h"

#include <stdlib.h>
#include <string.h>

#include "cm_json.h"

bool cmd_parse_u64(const char *s, uint64_t *out)
{
    char *end = NULL;
    if (s == NULL || s[0] < '0' || s[0] > '9') {
        return false;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0') {
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

int cmd_double_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int cmd_write_out(const cm_buf *b, const char *cmd, FILE *out, FILE *errs)
{
    if (b->oom) {
        fprintf(errs, "shardplan %s: out of memory\n", cmd);
        return 1;
    }
    if (b->len > 0 && fwrite(b->data, 1, b->len, out) != b->len) {
        fprintf(errs, "shardplan %s: write error\n", cmd);
        return 1;
    }
    return 0;
}

bool cmd_file_sink(void *ctx, const char *data, size_t len)
{
    return fwrite(data, 1, len, (FILE *)ctx) == len;
}

bool cmd_discard_sink(void *ctx, const char *data, size_t len)
{
    (void)ctx;
    (void)data;
    (void)len;
    return true;
}

bool cmd_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            return false;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            return true;
        }
    }
    return false;
}

bool cmd_is_json_flag(int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    if (strcmp(a, "--json") == 0 || strcmp(a, "--format=json") == 0) {
        return true;
    }
    if (strcmp(a, "--format") == 0 && *i + 1 < argc && strcmp(argv[*i + 1], "json") == 0) {
        (*i)++;
        return true;
    }
    return false;
}

void cmd_report(FILE *errs, bool json, const char *cmd, const char *file, const cm_error *e)
{
    if (!json) {
        fprintf(errs, "shardplan %s: %s%s%s%s%s: %s\n", cmd, file != NULL ? file : "",
                file != NULL ? ": " : "", cm_status_name(e->code), e->path[0] != '\0' ? " at " : "",
                e->path, e->msg);
        return;
    }
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "{\"error\":{");
    cm_json_put_kv_str(&b, "command", cmd);
    if (file != NULL) {
        cm_json_put_kv_str(&b, "file", file);
    }
    cm_json_put_kv_str(&b, "code", cm_status_name(e->code));
    cm_json_put_kv_str(&b, "message", e->msg);
    cm_json_put_kv_str(&b, "path", e->path);
    cm_buf_puts(&b, "}}\n");
    if (b.oom) {
        fprintf(errs, "{\"error\":{\"command\":\"%s\",\"code\":\"%s\"}}\n", cmd,
                cm_status_name(e->code));
    } else {
        fwrite(b.data, 1, b.len, errs);
    }
    cm_buf_fini(&b);
}
