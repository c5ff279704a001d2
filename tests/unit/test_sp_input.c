/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/doc/sp_input (the one input loader) and sp_plan
 * (the plan object): graph documents and MLIR are told apart; a rules
 * document gives an MLIR custom call its rule, and its errors point at
 * /rules; the pass is the one asked for; a partitioned input is not
 * propagated again; the plan's hashes follow the module, the pass and the
 * extra key bytes, and the document's input_sha256 is the plan's; OOM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_diag.h"
#include "sp_input.h"
#include "sp_ir.h"
#include "sp_mlir.h"
#include "sp_plan.h"
#include "tu_oom.h"

/* A dot whose operands are sharded on different dimensions: the passes
 * disagree on its result (basic propagation leaves a conflict open). */
static const char *const MLIR_DOT =
    "sdy.mesh @mesh = <[\"a\"=2, \"b\"=2]>\n"
    "func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}, {}]>},"
    " %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
    "  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>\n"
    "  return %0 : tensor<8x8xf32>\n"
    "}\n";

static const char *const MLIR_CALL =
    "sdy.mesh @mesh = <[\"a\"=2]>\n"
    "func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}, {}]>})"
    " -> tensor<8x8xf32> {\n"
    "  %0 = stablehlo.custom_call @my_ew(%arg0) : (tensor<8x8xf32>) -> tensor<8x8xf32>\n"
    "  return %0 : tensor<8x8xf32>\n"
    "}\n";

/* A matmul contracting a sharded dimension: partitioning adds an all-reduce. */
static const char *const MLIR_MATMUL =
    "sdy.mesh @mesh = <[\"a\"=2]>\n"
    "func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {\"a\"}]>},"
    " %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{\"a\"}, {}]>})"
    " -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {\n"
    "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] :"
    " (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>\n"
    "  return %0 : tensor<8x8xf32>\n"
    "}\n";

static const char *const RULES = "{\"custom_rules\": {\"my_ew\": \"i j -> i j\"}, \"ops\": []}";

static const char *const GRAPH =
    "{\"meshes\": [{\"name\": \"mesh\", \"axes\": [[\"a\", 2]]}],\n"
    " \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<8x8xf32>\", \"sharding\": [\"a\", null]}],\n"
    " \"ops\": [{\"op\": \"stablehlo.abs\", \"operands\": [\"x\"], \"result\": \"y\","
    " \"type\": \"tensor<8x8xf32>\"}],\n"
    " \"outputs\": [\"y\"]}";

static void test_sp_input_looks_json_skips_blanks(void **state)
{
    (void)state;
    assert_true(sp_input_looks_json(" \n\t{", 4));
    assert_false(sp_input_looks_json("  module", 8));
    assert_false(sp_input_looks_json("   ", 3));
    assert_false(sp_input_looks_json("[1]", 3));
}

static void test_sp_plan_pass_parse_names(void **state)
{
    (void)state;
    sp_plan_pass p;
    assert_true(sp_plan_pass_parse("--sdy-basic-propagate", &p));
    assert_int_equal(p, SP_PLAN_BASIC);
    assert_string_equal(sp_plan_pass_name(p), "sdy-basic-propagate");
    assert_true(sp_plan_pass_parse("sdy-propagation-pipeline", &p));
    assert_int_equal(p, SP_PLAN_PIPELINE);
    assert_false(sp_plan_pass_parse("sdy-no-such-pass", &p));
}

static void test_sp_input_read_graph_and_mlir(void **state)
{
    (void)state;
    cm_error err;
    cm_error_clear(&err);
    sp_input in;
    assert_int_equal(sp_input_read(GRAPH, strlen(GRAPH), NULL, &in, &err), CM_OK);
    assert_non_null(in.g);
    assert_non_null(in.m);
    assert_true(in.propagated);
    assert_false(in.partitioned);
    assert_false(in.functions_form);
    sp_input_fini(&in);
    assert_null(in.m);
    assert_int_equal(sp_input_read(MLIR_DOT, strlen(MLIR_DOT), NULL, &in, &err), CM_OK);
    assert_null(in.g);
    assert_true(in.propagated);
    sp_input_fini(&in);
}

static void test_sp_input_read_rejects_bad_mlir_with_line_col(void **state)
{
    (void)state;
    cm_error err;
    cm_error_clear(&err);
    sp_input in;
    const char *bad = "func.func @main() {\n  %0 = stablehlo.add %x : \n}\n";
    assert_int_equal(sp_input_read(bad, strlen(bad), NULL, &in, &err), CM_EINVAL);
    assert_non_null(strchr(err.path, ':'));
    assert_null(in.m);
}

/* The module as printed after reading with opts o. */
static char *printed(const char *text, const sp_input_opts *o)
{
    cm_error err;
    cm_error_clear(&err);
    sp_input in;
    assert_int_equal(sp_input_read(text, strlen(text), o, &in, &err), CM_OK);
    cm_buf b;
    cm_buf_init(&b);
    sp_print_opts po = {false, false};
    sp_mlir_print(in.m, &po, &b);
    sp_input_fini(&in);
    char *s = cm_alloc(b.len + 1);
    assert_non_null(s);
    memcpy(s, b.data, b.len);
    s[b.len] = '\0';
    cm_buf_fini(&b);
    return s;
}

static void test_sp_input_read_honours_the_pass(void **state)
{
    (void)state;
    sp_input_opts o;
    sp_input_opts_init(&o);
    char *pipeline = printed(MLIR_DOT, &o);
    o.pass = SP_PLAN_BASIC;
    char *basic = printed(MLIR_DOT, &o);
    o.propagate = false;
    char *none = printed(MLIR_DOT, &o);
    /* the pipeline's export closes shardings and drops rules; basic leaves
     * the rules it kept on the ops */
    assert_string_not_equal(pipeline, basic);
    assert_string_not_equal(basic, none);
    assert_null(strstr(none, "sdy.sharding_rule"));
    assert_non_null(strstr(basic, "sdy.sharding_rule"));
    cm_free(pipeline);
    cm_free(basic);
    cm_free(none);
}

static void test_sp_input_read_rules_document_gives_custom_call_its_rule(void **state)
{
    (void)state;
    sp_input_opts o;
    sp_input_opts_init(&o);
    o.pass = SP_PLAN_BASIC;
    char *without = printed(MLIR_CALL, &o);
    o.rules = RULES;
    o.rules_len = strlen(RULES);
    char *with = printed(MLIR_CALL, &o);
    /* with the rule the result is sharded like the operand */
    assert_null(strstr(without, "%0 = stablehlo.custom_call @my_ew(%arg0) {sdy.sharding = "
                                "#sdy.sharding_per_value<[<@mesh, [{\"a\"}"));
    assert_non_null(strstr(with, "sdy.sharding_per_value<[<@mesh, [{\"a\""));
    cm_free(without);
    cm_free(with);
}

static void test_sp_input_read_rules_error_points_at_rules(void **state)
{
    (void)state;
    sp_input_opts o;
    sp_input_opts_init(&o);
    const char *bad = "{\"custom_rules\": {\"my_ew\": 3}, \"ops\": []}";
    o.rules = bad;
    o.rules_len = strlen(bad);
    cm_error err;
    cm_error_clear(&err);
    sp_input in;
    assert_int_equal(sp_input_read(MLIR_CALL, strlen(MLIR_CALL), &o, &in, &err), CM_EINVAL);
    assert_string_equal(err.path, "/rules");
    assert_null(in.m);
}

static void test_sp_input_partition_then_read_is_not_propagated(void **state)
{
    (void)state;
    cm_error err;
    cm_error_clear(&err);
    sp_input in;
    assert_int_equal(sp_input_read(MLIR_MATMUL, strlen(MLIR_MATMUL), NULL, &in, &err), CM_OK);
    assert_false(in.partitioned);
    assert_int_equal(sp_input_partition(&in, &err), CM_OK);
    assert_true(in.partitioned);
    cm_buf b;
    cm_buf_init(&b);
    sp_print_opts po = {false, false};
    sp_mlir_print(in.m, &po, &b);
    sp_input_fini(&in);
    cm_buf_putc(&b, '\0');
    assert_non_null(strstr(b.data, "sdy.all_reduce"));
    b.len--;
    sp_input again;
    assert_int_equal(sp_input_read(b.data, b.len, NULL, &again, &err), CM_OK);
    assert_true(again.partitioned);
    assert_false(again.propagated);
    sp_input_fini(&again);
    cm_buf_fini(&b);
}

static void test_sp_plan_key_follows_pass_and_extra(void **state)
{
    (void)state;
    cm_error err;
    cm_error_clear(&err);
    sp_input_opts o;
    sp_input_opts_init(&o);
    sp_plan *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    assert_int_equal(sp_plan_create(MLIR_DOT, strlen(MLIR_DOT), &o, NULL, 0, &a, &err), CM_OK);
    assert_int_equal(sp_plan_create(MLIR_DOT, strlen(MLIR_DOT), &o, "x", 1, &b, &err), CM_OK);
    o.pass = SP_PLAN_BASIC;
    assert_int_equal(sp_plan_create(MLIR_DOT, strlen(MLIR_DOT), &o, NULL, 0, &c, &err), CM_OK);
    o.pass = SP_PLAN_PIPELINE;
    assert_int_equal(sp_plan_create(MLIR_DOT, strlen(MLIR_DOT), &o, NULL, 0, &d, &err), CM_OK);
    assert_int_equal(strlen(sp_plan_key(a)), 64);
    assert_string_equal(sp_plan_key(a), sp_plan_key(d));
    assert_string_not_equal(sp_plan_key(a), sp_plan_key(b));
    assert_string_equal(sp_plan_input_sha256(a), sp_plan_input_sha256(b));
    assert_string_not_equal(sp_plan_key(a), sp_plan_key(c));
    assert_int_equal(sp_plan_get_pass(c), SP_PLAN_BASIC);
    assert_false(sp_plan_input(a)->propagated);
    sp_plan_destroy(a);
    sp_plan_destroy(b);
    sp_plan_destroy(c);
    sp_plan_destroy(d);
}

static void test_sp_plan_write_carries_the_input_hash(void **state)
{
    (void)state;
    cm_error err;
    cm_error_clear(&err);
    sp_plan *p = NULL;
    assert_int_equal(sp_plan_create(GRAPH, strlen(GRAPH), NULL, NULL, 0, &p, &err), CM_OK);
    cm_buf b;
    cm_buf_init(&b);
    assert_int_equal(sp_plan_write(p, NULL, &b, NULL, &err), CM_OK);
    cm_buf_putc(&b, '\0');
    char want[100];
    snprintf(want, sizeof want, "\"input_sha256\":\"%s\"", sp_plan_input_sha256(p));
    assert_non_null(strstr(b.data, want));
    /* the same module planned without the object: the same document */
    cm_buf b2;
    cm_buf_init(&b2);
    assert_int_equal(sp_plan_graph_json(GRAPH, strlen(GRAPH), SP_PLAN_PIPELINE, &b2, &err), CM_OK);
    cm_buf_putc(&b2, '\0');
    assert_string_equal(b.data, b2.data);
    assert_int_equal(sp_plan_write(p, NULL, &b, NULL, &err), CM_EINVAL);
    cm_buf_fini(&b);
    cm_buf_fini(&b2);
    sp_plan_destroy(p);
}

/* The OOM loop's attempt (tests/unit/tu_oom.h): a plan made and written. */
typedef struct plan_oom {
    sp_plan *p;
    cm_buf b;
} plan_oom;

static cm_status plan_oom_run(void *ctx)
{
    plan_oom *t = ctx;
    cm_error err;
    cm_error_clear(&err);
    t->p = NULL;
    cm_buf_init(&t->b);
    cm_status st = sp_plan_create(MLIR_CALL, strlen(MLIR_CALL), NULL, NULL, 0, &t->p, &err);
    return st == CM_OK ? sp_plan_write(t->p, NULL, &t->b, NULL, &err) : st;
}

static void plan_oom_done(void *ctx, cm_status st)
{
    (void)st;
    plan_oom *t = ctx;
    cm_buf_fini(&t->b);
    sp_plan_destroy(t->p);
}

static void test_sp_plan_create_oom(void **state)
{
    (void)state;
    plan_oom t;
    static const tu_oom loop = {NULL, plan_oom_run, plan_oom_done};
    tu_oom_loop(&loop, &t, 100000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_input_looks_json_skips_blanks),
        cmocka_unit_test(test_sp_plan_pass_parse_names),
        cmocka_unit_test(test_sp_input_read_graph_and_mlir),
        cmocka_unit_test(test_sp_input_read_rejects_bad_mlir_with_line_col),
        cmocka_unit_test(test_sp_input_read_honours_the_pass),
        cmocka_unit_test(test_sp_input_read_rules_document_gives_custom_call_its_rule),
        cmocka_unit_test(test_sp_input_read_rules_error_points_at_rules),
        cmocka_unit_test(test_sp_input_partition_then_read_is_not_propagated),
        cmocka_unit_test(test_sp_plan_key_follows_pass_and_extra),
        cmocka_unit_test(test_sp_plan_write_carries_the_input_hash),
        cmocka_unit_test(test_sp_plan_create_oom),
    };
    return cmocka_run_group_tests_name("sp_input", tests, NULL, NULL);
}
