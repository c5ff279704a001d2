/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target for the MLIR reader and printer: reads the input as one
 * module; when that succeeds, prints it in pretty and in generic form, and
 * checks that the pretty output reads back. Errors are expected; crashes,
 * sanitizer reports, leaks and a printed text that does not read back are
 * not. Seeds: tests/fuzz/corpus/mlir/. Build and run with `make fuzz`. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cm.h"
#include "sp_ir.h"
#include "sp_mlir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sp_module *m = NULL;
    cm_error err;
    cm_error_clear(&err);
    if (sp_mlir_read((const char *)data, size, 0, &m, &err) != CM_OK) {
        if (m != NULL) {
            fprintf(stderr, "sp_mlir_read failed but returned a module\n");
            abort();
        }
        return 0;
    }

    cm_buf pretty, generic;
    cm_buf_init(&pretty);
    cm_buf_init(&generic);
    sp_print_opts opts = {.generic = false, .debug_info = true};
    sp_mlir_print(m, &opts, &pretty);
    opts.generic = true;
    sp_mlir_print(m, &opts, &generic);

    /* What we print we must be able to read. */
    if (!pretty.oom) {
        sp_module *again = NULL;
        cm_error_clear(&err);
        if (sp_mlir_read(pretty.data, pretty.len, 0, &again, &err) != CM_OK) {
            fprintf(stderr, "printed text does not read back: %s: %s\n%s\n", err.path, err.msg,
                    pretty.data);
            abort();
        }
        sp_module_destroy(again);
    }

    cm_buf_fini(&generic);
    cm_buf_fini(&pretty);
    sp_module_destroy(m);
    return 0;
}
