/* SPDX-License-Identifier: Apache-2.0
 * cmd: the input options every subcommand that reads a model shares
 * (cmd.h, cmd_input): the pass to plan with and a rules document for MLIR,
 * so that `shardplan lint FILE --pass P --rules R` sees what
 * GET /v1/plans/{id}/lint sees for a plan made with that pass and rules. */
#include "cmd.h"

#include <string.h>

#include "cm.h"

void cmd_input_init(cmd_input *ci)
{
    memset(ci, 0, sizeof *ci);
    sp_input_opts_init(&ci->io);
}

void cmd_input_fini(cmd_input *ci)
{
    cm_free(ci->rules_text);
    memset(ci, 0, sizeof *ci);
}

int cmd_input_run(int argc, char **argv, FILE *out, FILE *errs, cmd_input_main body)
{
    cmd_input ci;
    cmd_input_init(&ci);
    int rc = body(argc, argv, out, errs, &ci);
    cmd_input_fini(&ci);
    return rc;
}

int cmd_input_option(int argc, char **argv, int *i, cmd_input *ci, const char *cmd, FILE *errs)
{
    const char *a = argv[*i];
    const char *v = NULL;
    bool pass = false;
    if (strcmp(a, "--pass") == 0 || strcmp(a, "--rules") == 0) {
        if (*i + 1 >= argc) {
            fprintf(errs, "shardplan %s: %s needs a value\n", cmd, a);
            return -1;
        }
        pass = a[2] == 'p';
        v = argv[++*i];
    } else if (strncmp(a, "--pass=", 7) == 0) {
        pass = true;
        v = a + 7;
    } else if (strncmp(a, "--rules=", 8) == 0) {
        v = a + 8;
    } else {
        return 0;
    }
    if (pass) {
        if (!sp_plan_pass_parse(v, &ci->io.pass)) {
            fprintf(errs, "shardplan %s: unknown pass '%s'\n", cmd, v);
            return -1;
        }
        return 1;
    }
    cm_error err;
    cm_error_clear(&err);
    cm_free(ci->rules_text);
    ci->rules_text = NULL;
    size_t len = 0;
    if (cm_file_read(v, &ci->rules_text, &len, &err) != CM_OK) {
        fprintf(errs, "shardplan %s: %s: %s\n", cmd, v, err.msg);
        return -1;
    }
    ci->io.rules = ci->rules_text;
    ci->io.rules_len = len;
    return 1;
}
