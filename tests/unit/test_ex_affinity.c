/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for ex_exec_opts.affinity: with it, each worker runs pinned to
 * one CPU of those the process may use (worker d on the (d mod n)-th), seen
 * from inside the run, and the result is right; without it the workers
 * keep the process's CPUs. (The Flax MLP on 8 pinned workers, with the
 * per-CPU gates in play, is checked in test_ex_exec.c.) */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT (Linux) */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "ex_exec.h"
#include "sp_ir.h"

static const char mod[] =
    "sdy.mesh @mesh = <[\"x\"=4]>\n"
    "func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"x\"}, "
    "{}]>}) -> tensor<8x16xf32> {\n"
    "  %0 = sdy.all_gather [{\"x\"}, {}] %arg0 out_sharding=<@mesh, [{}, {}]> : "
    "tensor<8x16xf32>\n"
    "  return %0 : tensor<8x16xf32>\n}\n";

/* What worker 0 sees of its own CPU set, between two runs (on its thread). */
typedef struct seen {
    int calls;
    int count;  /* CPUs in the set */
    int first;  /* the lowest CPU in it */
} seen;

static int lowest_cpu(const cpu_set_t *set)
{
    for (size_t c = 0; c < (size_t)CPU_SETSIZE; c++) {
        if (CPU_ISSET(c, set)) {
            return (int)c;
        }
    }
    return -1;
}

static void look(void *ctx)
{
    seen *s = ctx;
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    s->calls++;
    s->count = CPU_COUNT(&set);
    s->first = lowest_cpu(&set);
}

static void run_with(bool affinity, seen *s)
{
    cm_error err;
    cm_error_clear(&err);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(mod, strlen(mod), 0, &m, &err), CM_OK);
    ex_tensor *args = NULL, *res = NULL;
    uint32_t n_args = 0, n_res = 0;
    assert_int_equal(ex_args_make(m, 3, &args, &n_args, &err), CM_OK);
    ex_exec_opts o = {4, false, 2, NULL, affinity};
    memset(s, 0, sizeof *s);
    cm_status st = ex_exec_run_paced(m, &o, look, s, args, n_args, &res, &n_res, &err);
    if (st != CM_OK) {
        fail_msg("%s: %s", cm_status_name(err.code), err.msg);
    }
    /* The all-gather hands back the global tensor whole. */
    assert_int_equal(n_res, 1);
    assert_memory_equal(res[0].data, args[0].data, 8 * 16 * sizeof(float));
    ex_tensors_free(res, n_res);
    ex_tensors_free(args, n_args);
    sp_module_destroy(m);
}

static void test_ex_exec_affinity_pins_each_worker(void **state)
{
    (void)state;
    cpu_set_t mine;
    CPU_ZERO(&mine);
    assert_int_equal(sched_getaffinity(0, sizeof mine, &mine), 0);
    int lowest = lowest_cpu(&mine);
    seen s;
    run_with(true, &s);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.count, 1);
    assert_int_equal(s.first, lowest); /* worker 0: the first allowed CPU */
    run_with(false, &s);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.count, CPU_COUNT(&mine));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_exec_affinity_pins_each_worker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
