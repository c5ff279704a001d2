/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/advise/sp_compare (sp_compare.h) and `shardplan
 * compare` (cmd/cmd_compare.c): plans are named by their labels in the
 * report and in errors; each input is planned with its own options (a pass,
 * a rules document), so plans made differently compare as different; bad
 * inputs and options are errors with a path; OOM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cm.h"
#include "cmd.h"
#include "sp_compare.h"
#include "sp_input.h"
#include "tu_oom.h"

/* An input on an axis that does not divide its dimension: the pipeline's
 * export passes drop the axis from the function's input and output,
 * -sdy-basic-propagate keeps it. */
static const char nondiv[] =
    "sdy.mesh @mesh = <[\"x\"=4]>\n"
    "func.func @main(%arg0: tensor<6x16xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{\"x\"}, {}]>}, %arg1: tensor<6x16xf32>) -> tensor<6x16xf32> {\n"
    "  %0 = stablehlo.add %arg0, %arg1 : tensor<6x16xf32>\n"
    "  return %0 : tensor<6x16xf32>\n"
    "}\n";

/* A custom call whose rule only a rules document gives. */
static const char kernel[] =
    "sdy.mesh @mesh = <[\"data\"=4]>\n"
    "func.func @main(%arg0: tensor<8x1024xf32> {sdy.sharding = #sdy.sharding<@mesh, "
    "[{\"data\"}, {}]>}) -> tensor<8x1024xf32> {\n"
    "  %0 = stablehlo.custom_call @my_kernel(%arg0) : (tensor<8x1024xf32>) -> "
    "tensor<8x1024xf32>\n"
    "  %1 = stablehlo.negate %0 : tensor<8x1024xf32>\n"
    "  return %1 : tensor<8x1024xf32>\n"
    "}\n";

static const char rules_doc[] = "{\"custom_rules\": {\"my_kernel\": \"i j -> i j\"}, "
                                "\"inputs\": [], \"ops\": [], \"outputs\": []}";

static sp_compare_input input(const char *label, const char *text, const sp_input_opts *io)
{
    return (sp_compare_input){label, text, strlen(text), io};
}

static sp_compare *compare(const sp_compare_input *in, uint32_t n)
{
    sp_compare *c = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_compare_run(in, n, NULL, &c, &err);
    if (st != CM_OK) {
        fprintf(stderr, "compare: %s %s\n", err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    assert_non_null(c);
    return c;
}

static json_t *report_json(const sp_compare *c)
{
    cm_buf b;
    cm_buf_init(&b);
    sp_compare_write_json(c, &b);
    assert_false(b.oom);
    json_error_t je;
    json_t *j = json_loadb(b.data, b.len, 0, &je);
    assert_non_null(j);
    cm_buf_fini(&b);
    return j;
}

/* A cancel hook that says stop fails the comparison with CM_EIO. */
static bool stop_now(void *ctx)
{
    (void)ctx;
    return true;
}

static void test_sp_compare_run_cancel_hook(void **state)
{
    (void)state;
    sp_compare_input in[2] = {input("plans/1", nondiv, NULL), input("plans/2", nondiv, NULL)};
    sp_compare_opts o;
    sp_compare_opts_init(&o);
    o.cancel = stop_now;
    sp_compare *c = NULL;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(sp_compare_run(in, 2, &o, &c, &err), CM_EIO);
    assert_null(c);
    assert_non_null(strstr(err.msg, "stopped"));
}

static void test_sp_compare_run_names_plans_by_label(void **state)
{
    (void)state;
    sp_compare_input in[3] = {input("plans/1", nondiv, NULL), input("plans/2", nondiv, NULL),
                              input("plans/3", nondiv, NULL)};
    sp_compare *c = compare(in, 3);
    assert_int_equal(sp_compare_n_plans(c), 3);
    assert_true(sp_compare_n_tensors(c) > 0);
    assert_int_equal(sp_compare_n_differences(c), 0);
    assert_false(sp_compare_structure_differs(c));
    json_t *j = report_json(c);
    assert_string_equal(json_string_value(json_object_get(j, "format")), "shardplan.compare/v1");
    json_t *plans = json_object_get(j, "plans");
    assert_int_equal(json_array_size(plans), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(plans, 1), "file")),
                        "plans/2");
    assert_true(json_is_null(json_object_get(j, "first_divergence")));
    json_decref(j);
    cm_buf b;
    cm_buf_init(&b);
    sp_compare_write_text(c, &b);
    assert_non_null(strstr(b.data, "A: 1"));
    assert_non_null(strstr(b.data, "C: 3"));
    assert_non_null(strstr(b.data, "shard all"));
    cm_buf_fini(&b);
    sp_compare_destroy(c);
}

static void test_sp_compare_run_honours_each_plans_pass(void **state)
{
    (void)state;
    sp_input_opts basic;
    sp_input_opts_init(&basic);
    basic.pass = SP_PLAN_BASIC;
    sp_compare_input in[2] = {input("plans/1", nondiv, NULL), input("plans/2", nondiv, &basic)};
    sp_compare *c = compare(in, 2);
    assert_true(sp_compare_n_differences(c) > 0);
    /* the pipeline gathers the output it made replicated; basic does not */
    assert_true(sp_compare_summary(c, 0)->comm_bytes > 0);
    assert_true(sp_compare_summary(c, 1)->comm_bytes == 0);
    assert_null(sp_compare_summary(c, 2));
    json_t *j = report_json(c);
    json_t *fd = json_object_get(j, "first_divergence");
    assert_true(json_is_object(fd));
    assert_string_equal(json_string_value(json_object_get(fd, "tensor")), "@main input 0");
    json_decref(j);
    sp_compare_destroy(c);
}

static void test_sp_compare_run_honours_a_rules_document(void **state)
{
    (void)state;
    sp_input_opts rules;
    sp_input_opts_init(&rules);
    rules.rules = rules_doc;
    rules.rules_len = strlen(rules_doc);
    sp_compare_input in[2] = {input("without", kernel, NULL), input("with", kernel, &rules)};
    sp_compare *c = compare(in, 2);
    /* through the rule the call's result keeps "data" */
    assert_true(sp_compare_n_differences(c) > 0);
    assert_true(sp_compare_summary(c, 1)->peak_activation_bytes <
                sp_compare_summary(c, 0)->peak_activation_bytes);
    sp_compare_destroy(c);
}

static void test_sp_compare_run_errors_name_the_label(void **state)
{
    (void)state;
    sp_compare *c = NULL;
    cm_error err;
    cm_error_clear(&err);
    const char *bad = "func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {\n  return %nope";
    sp_compare_input in[2] = {input("plans/1", nondiv, NULL), input("plans/7", bad, NULL)};
    assert_int_equal(sp_compare_run(in, 2, NULL, &c, &err), CM_EINVAL);
    assert_null(c);
    assert_true(strncmp(err.msg, "plans/7: ", 9) == 0);
    assert_true(err.path[0] != '\0'); /* LINE:COL inside that input */
    /* a graph document's error keeps its JSON Pointer */
    in[1] = input("plans/8", "{\"ops\": 3}", NULL);
    cm_error_clear(&err);
    assert_int_equal(sp_compare_run(in, 2, NULL, &c, &err), CM_EINVAL);
    assert_true(strncmp(err.msg, "plans/8: ", 9) == 0);
    /* a bad rules document is that input's, at /rules */
    sp_input_opts rules;
    sp_input_opts_init(&rules);
    rules.rules = "{\"custom_rules\": 3}";
    rules.rules_len = strlen(rules.rules);
    in[1] = input("plans/9", kernel, &rules);
    cm_error_clear(&err);
    assert_int_equal(sp_compare_run(in, 2, NULL, &c, &err), CM_EINVAL);
    assert_string_equal(err.path, "/rules");
    assert_true(strncmp(err.msg, "plans/9: ", 9) == 0);
    /* options */
    cm_error_clear(&err);
    assert_int_equal(sp_compare_run(in, 1, NULL, &c, &err), CM_EINVAL);
    assert_string_equal(err.path, "/plans");
    sp_compare_input five[5] = {in[0], in[0], in[0], in[0], in[0]};
    cm_error_clear(&err);
    assert_int_equal(sp_compare_run(five, 5, NULL, &c, &err), CM_EINVAL);
    assert_string_equal(err.path, "/plans");
    sp_compare_opts o;
    sp_compare_opts_init(&o);
    o.overlap = 2;
    in[1] = in[0];
    cm_error_clear(&err);
    assert_int_equal(sp_compare_run(in, 2, &o, &c, &err), CM_EINVAL);
    assert_string_equal(err.path, "/overlap");
    assert_null(c);
    sp_compare_destroy(NULL);
}

/* Runs cmd_compare; returns the exit status, stdout and stderr (heap). */
static int run_cmd(char **argv, int argc, char **out, char **errs)
{
    size_t lo = 0, le = 0;
    FILE *o = open_memstream(out, &lo), *e = open_memstream(errs, &le);
    assert_non_null(o);
    assert_non_null(e);
    int rc = cmd_compare(argc, argv, o, e);
    fclose(o);
    fclose(e);
    return rc;
}

static void test_cmd_compare_names_files(void **state)
{
    (void)state;
    char a0[] = "compare", a1[] = "examples/flax_mlp.json", a2[] = "examples/flax_mlp.mlir",
         a3[] = "--format", a4[] = "json", missing[] = "/nonexistent/plan.json", ov[] = "--overlap",
         two[] = "2";
    char *out = NULL, *errs = NULL;
    char *ok[] = {a0, a1, a2, a3, a4, NULL};
    assert_int_equal(run_cmd(ok, 5, &out, &errs), 0);
    assert_non_null(strstr(out, "\"file\":\"examples/flax_mlp.mlir\""));
    assert_non_null(strstr(out, "\"first_divergence\":null"));
    free(out);
    free(errs);
    char *bad[] = {a0, a1, missing, NULL};
    assert_int_equal(run_cmd(bad, 3, &out, &errs), 1);
    assert_non_null(strstr(errs, "shardplan compare: /nonexistent/plan.json: "));
    free(out);
    free(errs);
    char *usage[] = {a0, a1, NULL};
    assert_int_equal(run_cmd(usage, 2, &out, &errs), 2);
    free(out);
    free(errs);
    char *overlap[] = {a0, a1, a2, ov, two, NULL};
    assert_int_equal(run_cmd(overlap, 5, &out, &errs), 2);
    free(out);
    free(errs);
}

/* The OOM loop's attempt (tests/unit/tu_oom.h): one comparison. */
typedef struct compare_oom {
    sp_compare_input in[2];
    sp_compare *c;
} compare_oom;

static cm_status compare_oom_run(void *ctx)
{
    compare_oom *t = ctx;
    t->c = NULL;
    cm_error err;
    cm_error_clear(&err);
    return sp_compare_run(t->in, 2, NULL, &t->c, &err);
}

static void compare_oom_done(void *ctx, cm_status st)
{
    compare_oom *t = ctx;
    if (st == CM_OK) {
        assert_true(sp_compare_n_differences(t->c) > 0);
    } else {
        assert_null(t->c);
    }
    sp_compare_destroy(t->c);
}

static void test_sp_compare_run_oom(void **state)
{
    (void)state;
    sp_input_opts basic;
    sp_input_opts_init(&basic);
    basic.pass = SP_PLAN_BASIC;
    compare_oom t = {{input("a", nondiv, NULL), input("b", nondiv, &basic)}, NULL};
    static const tu_oom loop = {NULL, compare_oom_run, compare_oom_done};
    tu_oom_loop(&loop, &t, 100000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_compare_run_names_plans_by_label),
        cmocka_unit_test(test_sp_compare_run_cancel_hook),
        cmocka_unit_test(test_sp_compare_run_honours_each_plans_pass),
        cmocka_unit_test(test_sp_compare_run_honours_a_rules_document),
        cmocka_unit_test(test_sp_compare_run_errors_name_the_label),
        cmocka_unit_test(test_cmd_compare_names_files),
        cmocka_unit_test(test_sp_compare_run_oom),
    };
    return cmocka_run_group_tests_name("sp_compare", tests, NULL, NULL);
}
