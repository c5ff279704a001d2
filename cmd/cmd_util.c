/* SPDX-License-Identifier: Apache-2.0
 * cmd: helpers the subcommands share (cmd_util.h). */
#include "cmd_util.h"

#include <stdlib.h>

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
