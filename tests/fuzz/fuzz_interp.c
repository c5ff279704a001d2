/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target for the StableHLO interpreter (`shardplan interpret`,
 * the one-device reference of `shardplan run`): the input is read as MLIR
 * and every entry function interpreted, results and checks printed to
 * /dev/null. Errors are expected; crashes, sanitizer reports, leaks and
 * hangs (a run_parallel whose processes can never meet) are not. Seeds:
 * StableHLO's interpreter tests (../shared/reference/stablehlo/interpret)
 * and tests/fuzz/corpus/mlir. Build and run with `make fuzz`. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cm.h"
#include "ex_interp.h"
#include "sp_mlir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    if (sp_mlir_read((const char *)data, size, 0, &m, &err) != CM_OK) {
        return 0;
    }
    FILE *sink = fopen("/dev/null", "w");
    if (sink != NULL) {
        ex_interp_opts o = {NULL, 0, sink, false};
        ex_interp_report r;
        cm_error_clear(&err);
        (void)ex_interp_run(m, &o, sink, &r, &err);
        fclose(sink);
    }
    sp_module_destroy(m);
    return 0;
}
