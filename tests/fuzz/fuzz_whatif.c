/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target for the what-if's edit decoder and edit application
 * (planner/advise/sp_whatif_json.c, sp_whatif.c): decodes the input as edits; when
 * that succeeds, runs the what-if (costs skipped) on a small fixed module
 * with a constraint, a custom call and two inputs. Errors are expected and
 * must carry a JSON Pointer under /edits (or be JSON syntax errors, "L:C");
 * crashes, sanitizer reports and leaks are not. Seeds:
 * tests/fuzz/corpus/whatif/. Build and run with `make fuzz`. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm.h"
#include "sp_whatif.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char module[] =
    "sdy.mesh @mesh = <[\"data\"=2, \"model\"=4]>\n"
    "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"data\"}, "
    "{}]>}, %arg1: tensor<8x16xf32>) -> tensor<8x16xf32> {\n"
    "  %0 = stablehlo.add %arg0, %arg1 : tensor<8x16xf32>\n"
    "  %1 = stablehlo.custom_call @my_op(%0) : (tensor<8x16xf32>) -> tensor<8x16xf32>\n"
    "  %2 = sdy.sharding_constraint %1 <@mesh, [{}, {\"model\"}]> : tensor<8x16xf32>\n"
    "  %3 = stablehlo.negate %2 : tensor<8x16xf32>\n"
    "  return %3 : tensor<8x16xf32>\n"
    "}\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_edit_list l;
    sp_edit_list_init(&l);
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_edit_list_decode(&l, (const char *)data, size, &err);
    if (st == CM_OK) {
        sp_whatif_opts o;
        sp_whatif_opts_init(&o);
        o.no_cost = true;
        sp_whatif *w = NULL;
        st = sp_whatif_run(module, sizeof module - 1, NULL, &l, &o, &w, &err);
        if ((st == CM_OK) != (w != NULL)) {
            abort();
        }
        sp_whatif_destroy(w);
    }
    if (st == CM_EINVAL && strncmp(err.path, "/edits", 6) != 0 &&
        (err.path[0] < '0' || err.path[0] > '9')) {
        fprintf(stderr, "bad failure: '%s' %s\n", err.path, err.msg);
        abort();
    }
    sp_edit_list_fini(&l);
    return 0;
}
