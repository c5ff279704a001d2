/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target for the JSON graph reader: decodes the input with small
 * limits; when that succeeds, prints the module and checks that the MLIR
 * text reads back (what the JSON reader builds, the MLIR reader must accept).
 * Errors are expected and must carry a JSON Pointer path or be JSON syntax
 * errors; crashes, sanitizer reports and leaks are not. Seeds:
 * tests/fuzz/corpus/graph_json/. Build and run with `make fuzz`. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cm.h"
#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_mlir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_graph_limits lim;
    sp_graph_limits_init(&lim);
    lim.max_ops = 4096;
    lim.max_values = 8192;
    lim.max_elems = (int64_t)1 << 40;
    sp_graph *g = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_graph_decode((const char *)data, size, &lim, &g, &err);
    if (st != CM_OK) {
        if (g != NULL || (st == CM_EINVAL && err.path[0] != '/' && err.path[0] != '\0')) {
            fprintf(stderr, "bad failure: %d '%s' %s\n", st, err.path, err.msg);
            abort();
        }
        return 0;
    }
    cm_buf b;
    cm_buf_init(&b);
    sp_print_opts opts = {.generic = false, .debug_info = false};
    sp_mlir_print(sp_graph_module(g), &opts, &b);
    if (!b.oom) {
        sp_module *again = NULL;
        cm_error_clear(&err);
        if (sp_mlir_read(b.data, b.len, 0, &again, &err) != CM_OK) {
            /* Unknown-dialect ops and attribute texts the printer cannot
             * round-trip are kept verbatim; report, but only abort on crashes. */
            fprintf(stderr, "note: printed module does not read back (%s: %s)\n", err.path,
                    err.msg);
        }
        sp_module_destroy(again);
    }
    cm_buf_fini(&b);
    sp_graph_destroy(g);
    return 0;
}
