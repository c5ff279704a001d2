/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for planner/sp_graph_json: every error path reports its code and
 * JSON Pointer; the three sharding spellings (Shardy text, PartitionSpec,
 * Flax logical names with flax.linen semantics) decode to the same
 * shardings; regions, custom calls, barriers, groups and several functions
 * build the IR the MLIR reader builds; decoding survives OOM. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "sp_graph_json.h"
#include "sp_ir.h"
#include "sp_ops.h"
#include "sp_shard.h"
#include "sp_mlir.h"

#define MESH "\"meshes\": [{\"name\": \"mesh\", \"axes\": [[\"data\", 2], [\"model\", 4]]}]"

static sp_graph *decode_ok(const char *doc)
{
    sp_graph *g = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_graph_decode(doc, strlen(doc), NULL, &g, &err);
    if (st != CM_OK) {
        fprintf(stderr, "decode failed at '%s': %s\n", err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    assert_non_null(g);
    return g;
}

static void expect_error_lim(const char *doc, const sp_graph_limits *lim, cm_status code,
                             const char *path, const char *msg_part)
{
    sp_graph *g = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_graph_decode(doc, strlen(doc), lim, &g, &err);
    if (st != code || strcmp(err.path, path) != 0 ||
        (msg_part != NULL && strstr(err.msg, msg_part) == NULL)) {
        fprintf(stderr, "doc: %s\n got %d at '%s': %s\n want %d at '%s' (%s)\n", doc, st,
                err.path, err.msg, code, path, msg_part != NULL ? msg_part : "");
    }
    assert_int_equal(st, code);
    assert_string_equal(err.path, path);
    if (msg_part != NULL) {
        assert_non_null(strstr(err.msg, msg_part));
    }
    assert_null(g);
}

static void expect_error(const char *doc, const char *path, const char *msg_part)
{
    expect_error_lim(doc, NULL, CM_EINVAL, path, msg_part);
}

/* The sharding of input i of the first function. */
static const sp_sharding *input_sharding(const sp_graph *g, uint32_t i)
{
    const sp_module *m = sp_graph_module(g);
    const sp_block *body = &m->blocks[m->body];
    for (uint32_t k = 0; k < body->n_ops; k++) {
        const sp_op *o = &m->ops[body->ops[k]];
        if (o->kind == SP_OP_FUNC_FUNC) {
            const sp_block *e = &m->blocks[o->regions[0].blocks[0]];
            return sp_value_sharding(m, e->first_arg + i);
        }
    }
    return NULL;
}

static char *print_module(const sp_module *m)
{
    sp_print_opts po = {false, false};
    cm_buf b;
    cm_buf_init(&b);
    sp_mlir_print(m, &po, &b);
    assert_false(b.oom);
    return cm_buf_take(&b);
}

/* ---- error paths -------------------------------------------------------------------- */

static void test_sp_graph_decode_rejects_bad_json(void **state)
{
    (void)state;
    expect_error("{\"ops\": [", "", "invalid JSON");
    expect_error("[]", "", "expected a graph object");
    expect_error("{\"inputs\": [], \"inputs\": []}", "", "invalid JSON");
}

static void test_sp_graph_decode_syntax_errors_say_where(void **state)
{
    (void)state;
    expect_error("{\"inputs\": [],\n \"inputs\": []}", "",
                 "invalid JSON at line 2, column 2: duplicate key \"inputs\"");
    expect_error("{\"ops\": [", "", "invalid JSON at line 1, column 10: unexpected end of input");
    expect_error("{\"name\": \"a\xff\"}", "", "invalid JSON at line 1, column 12: invalid UTF-8");
    expect_error("{\"name\": \"\\u0000\"}", "", "invalid JSON at line 1, column 11: \\u0000");
    expect_error("{\"a\": 1} x", "", "invalid JSON at line 1, column 10: trailing characters");
    /* a bare scalar is no document, as with jansson before */
    expect_error("\n  3", "", "invalid JSON at line 2, column 3: expected '{' or '['");
    expect_error("\"x\"", "", "invalid JSON at line 1, column 1: expected '{' or '['");
    expect_error("", "", "invalid JSON at line 1, column 1: unexpected end of input");
}

static void test_sp_graph_decode_rejects_unknown_members(void **state)
{
    (void)state;
    expect_error("{\"bogus\": 1}", "/bogus", "unknown member");
    expect_error("{\"ops\": [{\"op\": \"stablehlo.add\", \"operandz\": []}]}", "/ops/0/operandz",
                 "unknown member");
    expect_error("{\"functions\": [], \"ops\": []}", "", "not both");
    expect_error("{\"name\": \"m\"}", "", "missing member \"functions\"");
    expect_error("{\"format\": \"v0\", \"ops\": []}", "/format", "unsupported format");
}

static void test_sp_graph_decode_rejects_unknown_value(void **state)
{
    (void)state;
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4xf32>\"}], \"ops\": ["
                 "{\"op\": \"stablehlo.negate\", \"operands\": [\"%x\"], \"result\": \"%0\", "
                 "\"type\": \"tensor<4xf32>\"},"
                 "{\"op\": \"stablehlo.add\", \"operands\": [\"%0\", \"%7\"], \"result\": \"%1\", "
                 "\"type\": \"tensor<4xf32>\"}]}",
                 "/ops/1/operands/1", "unknown value \"%7\"");
    expect_error("{\"inputs\": [], \"ops\": [], \"outputs\": [\"y\"]}", "/outputs/0",
                 "unknown value");
    expect_error("{\"outputs\": [{\"value\": \"y\"}]}", "/outputs/0/value", "unknown value");
    expect_error("{\"outputs\": [3]}", "/outputs/0", "expected an output");
    /* a name defined in a region is not visible after it */
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4xf32>\"}], \"ops\": ["
                 "{\"op\": \"stablehlo.optimization_barrier\", \"operands\": [\"x\"], "
                 "\"result\": \"b\", \"type\": \"tensor<4xf32>\", \"regions\": [{\"args\": "
                 "[{\"name\": \"inner\", \"type\": \"tensor<f32>\"}]}]},"
                 "{\"op\": \"stablehlo.negate\", \"operands\": [\"inner\"], \"result\": \"c\", "
                 "\"type\": \"tensor<4xf32>\"}]}",
                 "/ops/1/operands/0", "unknown value");
}

static void test_sp_graph_decode_rejects_duplicate_names(void **state)
{
    (void)state;
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4xf32>\"}], \"ops\": ["
                 "{\"op\": \"stablehlo.negate\", \"operands\": [\"x\"], \"result\": \"%x\", "
                 "\"type\": \"tensor<4xf32>\"}]}",
                 "/ops/0/result", "defined twice");
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4xf32>\"}, {\"name\": "
                 "\"%x\", \"type\": \"tensor<4xf32>\"}]}",
                 "/inputs/1/name", "defined twice");
    expect_error("{\"inputs\": [{\"name\": \"\", \"type\": \"tensor<4xf32>\"}]}",
                 "/inputs/0/name", "1 to 1024");
    expect_error("{\"functions\": [{\"name\": \"f\"}, {\"name\": \"f\"}]}", "/functions/1/name",
                 "defined twice");
    expect_error("{" MESH ", \"meshes\": []}", "", "invalid JSON");
    expect_error("{\"meshes\": [{\"name\": \"m\"}, {\"name\": \"m\"}], \"ops\": []}",
                 "/meshes/1/name", "defined twice");
}

static void test_sp_graph_decode_rejects_bad_ops(void **state)
{
    (void)state;
    expect_error("{\"ops\": [{\"op\": \"stablehlo.frobnicate\"}]}", "/ops/0/op", "unknown op");
    expect_error("{\"ops\": [{\"op\": \"frobnicate\"}]}", "/ops/0/op", "unknown op");
    expect_error("{\"ops\": [{\"op\": 7}]}", "/ops/0/op", "expected a string");
    expect_error("{\"ops\": [{\"operands\": []}]}", "/ops/0", "missing member \"op\"");
    expect_error("{\"ops\": [3]}", "/ops/0", "expected an op object");
    expect_error("{\"ops\": {}}", "/ops", "expected an array of ops");
    expect_error("{\"ops\": [{\"op\": \"func.func\"}]}", "/ops/0/op", "cannot appear");
    expect_error("{\"ops\": [{\"op\": \"stablehlo.add\", \"result\": \"a\"}]}", "/ops/0",
                 "missing member \"type\"");
    expect_error("{\"ops\": [{\"op\": \"stablehlo.add\", \"results\": [{\"name\": \"a\"}]}]}",
                 "/ops/0/results/0", "expected a result");
    expect_error("{\"ops\": [{\"op\": \"stablehlo.add\", \"results\": [], \"type\": "
                 "\"tensor<f32>\"}]}",
                 "/ops/0", "not both");
    expect_error("{\"ops\": [{\"op\": \"stablehlo.add\", \"call_target\": \"x\"}]}",
                 "/ops/0/call_target", "only for stablehlo.custom_call");
    expect_error("{\"ops\": [{\"op\": \"stablehlo.add\", \"group_id\": 1}]}", "/ops/0/group_id",
                 "only for sdy.sharding_group");
    expect_error("{\"ops\": [{\"op\": \"sdy.sharding_group\", \"group_id\": -1}]}",
                 "/ops/0/group_id", "out of range");
    expect_error("{\"ops\": [{\"op\": \"sdy.propagation_barrier\", \"allowed_direction\": "
                 "\"UP\"}]}",
                 "/ops/0/allowed_direction", "FORWARD");
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4xf32>\"}], \"ops\": ["
                 "{\"op\": \"sdy.sharding_constraint\", \"operands\": [\"x\"], \"result\": "
                 "\"y\"}]}",
                 "/ops/0", "missing member \"sharding\"");
    expect_error("{\"ops\": [{\"op\": \"stablehlo.add\", \"regions\": [{\"ops\": [{\"op\": "
                 "\"nope\"}]}]}]}",
                 "/ops/0/regions/0/ops/0/op", "unknown op");
    expect_error("{\"ops\": [{\"op\": \"stablehlo.add\", \"regions\": [{\"args\": [{\"name\": "
                 "\"a\"}]}]}]}",
                 "/ops/0/regions/0/args/0", "expected a block argument");
}

static void test_sp_graph_decode_rejects_bad_types(void **state)
{
    (void)state;
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4xf32\"}]}",
                 "/inputs/0/type", "expected an MLIR type");
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": 5}]}", "/inputs/0/type",
                 "expected a type");
    expect_error("{\"inputs\": [{\"name\": \"x\"}]}", "/inputs/0", "expected an input");
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": {\"shape\": [4]}}]}",
                 "/inputs/0/type", "missing member \"dtype\"");
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": {\"shape\": [4], \"dtype\": "
                 "\"f33\"}}]}",
                 "/inputs/0/type/dtype", "unknown dtype");
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": {\"shape\": [4, -1], \"dtype\": "
                 "\"f32\"}}]}",
                 "/inputs/0/type/shape/1", "out of range");
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": {\"dtype\": \"f32\"}}]}",
                 "/inputs/0/type", "missing member \"shape\"");
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x-2xf32>\"}]}",
                 "/inputs/0/type", "malformed tensor type");
}

static void test_sp_graph_decode_enforces_limits(void **state)
{
    (void)state;
    sp_graph_limits lim;
    sp_graph_limits_init(&lim);
    /* rank */
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": {\"shape\": [1,1,1,1,1,1,1,1,1,1,1,1,"
                 "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
                 "1,1,1,1,1,1,1,1,1,1,1,1], \"dtype\": \"f32\"}}]}",
                 "/inputs/0/type/shape", "rank 65");
    /* a dimension above the limit, in text and structured types */
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<2000000000000xf32>\"}]}",
                 "/inputs/0/type", "dimension 0");
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": {\"shape\": [2000000000000], "
                 "\"dtype\": \"f32\"}}]}",
                 "/inputs/0/type/shape/0", "out of range");
    /* element-count overflow */
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": {\"shape\": [1099511627776, "
                 "1099511627776, 1099511627776], \"dtype\": \"f32\"}}]}",
                 "/inputs/0/type/shape/1", "element count");
    expect_error("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<1099511627776x"
                 "1099511627776x8xf32>\"}]}",
                 "/inputs/0/type", "element count");
    /* ops */
    lim.max_ops = 2;
    expect_error_lim("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4xf32>\"}], \"ops\": ["
                     "{\"op\": \"negate\", \"operands\": [\"x\"], \"result\": \"a\", \"type\": "
                     "\"tensor<4xf32>\"},"
                     "{\"op\": \"negate\", \"operands\": [\"a\"], \"result\": \"b\", \"type\": "
                     "\"tensor<4xf32>\"},"
                     "{\"op\": \"negate\", \"operands\": [\"b\"], \"result\": \"c\", \"type\": "
                     "\"tensor<4xf32>\"}]}",
                     &lim, CM_EINVAL, "/ops/2", "too many ops");
    /* values */
    sp_graph_limits_init(&lim);
    lim.max_values = 1;
    expect_error_lim("{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4xf32>\"}, {\"name\": "
                     "\"y\", \"type\": \"tensor<4xf32>\"}]}",
                     &lim, CM_EINVAL, "/inputs/1", "too many values");
    /* region depth */
    sp_graph_limits_init(&lim);
    lim.max_depth = 1;
    expect_error_lim("{\"ops\": [{\"op\": \"stablehlo.while\", \"regions\": [{\"ops\": [{\"op\": "
                     "\"stablehlo.while\", \"regions\": [{}]}]}]}]}",
                     &lim, CM_EINVAL, "/ops/0/regions/0/ops/0/regions", "nested deeper");
    /* document size */
    sp_graph_limits_init(&lim);
    lim.max_bytes = 4;
    expect_error_lim("{\"ops\": []}", &lim, CM_EINVAL, "", "exceeds the limit");
}

static void test_sp_graph_decode_rejects_bad_attributes(void **state)
{
    (void)state;
    const char *pre = "{\"inputs\": [{\"name\": \"x\", \"type\": \"tensor<f32>\"}], \"ops\": ["
                      "{\"op\": \"broadcast_in_dim\", \"operands\": [\"x\"], \"result\": \"y\", "
                      "\"type\": \"tensor<4xf32>\", \"attributes\": {\"broadcast_dimensions\": ";
    char doc[512];
    snprintf(doc, sizeof doc, "%s\"array<i64: 0\"}}]}", pre);
    expect_error(doc, "/ops/0/attributes/broadcast_dimensions", "expected an MLIR attribute");
    snprintf(doc, sizeof doc, "%s1.5}}]}", pre);
    expect_error(doc, "/ops/0/attributes/broadcast_dimensions", "got a number");
    snprintf(doc, sizeof doc, "%s[0, \"a\"]}}]}", pre);
    expect_error(doc, "/ops/0/attributes/broadcast_dimensions/1", "expected an integer");
    snprintf(doc, sizeof doc, "%s{}}}]}", pre);
    expect_error(doc, "/ops/0/attributes/broadcast_dimensions", "got an object");
    expect_error("{\"ops\": [{\"op\": \"dot_general\", \"attributes\": {\"dot_dimension_numbers\":"
                 " {\"lhs_contracting_dimensions\": 1}}}]}",
                 "/ops/0/attributes/dot_dimension_numbers/lhs_contracting_dimensions",
                 "expected an array");
    expect_error("{\"ops\": [{\"op\": \"dot_general\", \"attributes\": {\"dot_dimension_numbers\":"
                 " {\"contracting\": [1]}}}]}",
                 "/ops/0/attributes/dot_dimension_numbers/contracting", "unknown member");
    expect_error("{\"attributes\": {\"a\": \"@\"}, \"ops\": []}", "/attributes/a",
                 "expected an MLIR attribute");
    expect_error("{\"ops\": [{\"op\": \"negate\", \"attributes\": []}]}", "/ops/0/attributes",
                 "expected an object");
}

static void test_sp_graph_decode_rejects_bad_meshes(void **state)
{
    (void)state;
    expect_error("{\"meshes\": [{\"name\": \"m\", \"axes\": [[\"a\", 0]]}], \"ops\": []}",
                 "/meshes/0/axes/0", "out of range");
    expect_error("{\"meshes\": [{\"name\": \"m\", \"axes\": [[\"a\", 2], [\"a\", 2]]}], "
                 "\"ops\": []}",
                 "/meshes/0/axes/1", "duplicate axis");
    expect_error("{\"meshes\": [{\"name\": \"m\", \"axes\": [{\"name\": \"a\"}]}], \"ops\": []}",
                 "/meshes/0/axes/0", "expected an axis");
    expect_error("{\"meshes\": [{\"name\": \"m\", \"axes\": [[\"a\", 2]], \"device_ids\": [0]}], "
                 "\"ops\": []}",
                 "/meshes/0/device_ids", NULL);
    expect_error("{\"meshes\": [{\"axes\": []}], \"ops\": []}", "/meshes/0",
                 "missing member \"name\"");
    expect_error("{\"meshes\": [{\"name\": \"a b\"}], \"ops\": []}", "/meshes/0/name",
                 "identifier");
    expect_error("{\"mesh\": \"nope\", " MESH ", \"ops\": []}", "/mesh", "unknown mesh");
}

static void test_sp_graph_decode_rejects_bad_shardings(void **state)
{
    (void)state;
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": \"<@nope, [{}, {}]>\"}]}",
                 "/inputs/0/sharding", "unknown mesh \"nope\"");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": \"<@mesh, [{}, {}\"}]}",
                 "/inputs/0/sharding", "expected a Shardy sharding");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": \"<@mesh, [{}]>\"}]}",
                 "/inputs/0/sharding", "rank");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": [\"data\", null, null]}]}",
                 "/inputs/0/sharding", "3 entries for a tensor of rank 2");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": [\"nope\", null]}]}",
                 "/inputs/0/sharding", "unknown axis");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": [\"data\", \"data\"]}]}",
                 "/inputs/0/sharding", "duplicate");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": [5, null]}]}",
                 "/inputs/0/sharding/0", "expected null, a mesh axis name");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": [[\"data\", 3], null]}]}",
                 "/inputs/0/sharding/0/1", "expected a string");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": {\"mesh\": \"nope\", \"spec\": []}}]}",
                 "/inputs/0/sharding/mesh", "unknown mesh");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": {\"spec\": [], \"logical\": []}}]}",
                 "/inputs/0/sharding", "exactly one");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": 3}]}",
                 "/inputs/0/sharding", "expected a sharding");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"sharding\": [], \"logical_axes\": []}]}",
                 "/inputs/0", "not both");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"!stablehlo.token\", "
                 "\"sharding\": []}]}",
                 "/inputs/0/sharding", "only tensors");
    /* two meshes and no default: a PartitionSpec does not say which */
    expect_error("{\"meshes\": [{\"name\": \"a\"}, {\"name\": \"b\"}], \"inputs\": [{\"name\": "
                 "\"x\", \"type\": \"tensor<4xf32>\", \"sharding\": [null]}]}",
                 "/inputs/0/sharding", "needs a mesh");
}

static void test_sp_graph_decode_rejects_bad_logical(void **state)
{
    (void)state;
    expect_error("{" MESH ", \"logical_axis_rules\": [[\"batch\"]], \"ops\": []}",
                 "/logical_axis_rules/0", "expected a rule");
    expect_error("{" MESH ", \"logical_axis_rules\": [[\"batch\", 3]], \"ops\": []}",
                 "/logical_axis_rules/0/1", "mesh axis name");
    expect_error("{" MESH ", \"logical_axis_rules\": [[\"batch\", [\"data\", 1]]], \"ops\": []}",
                 "/logical_axis_rules/0/1/1", "mesh axis name");
    expect_error("{" MESH ", \"logical_axis_rules\": {}, \"ops\": []}", "/logical_axis_rules",
                 "expected an array");
    expect_error("{" MESH ", \"logical_axis_rules\": [[\"b\", \"data\"]], \"inputs\": [{\"name\": "
                 "\"x\", \"type\": \"tensor<4x8xf32>\", \"logical_axes\": [\"b\", \"b\"]}]}",
                 "/inputs/0/logical_axes/1", "used twice");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"logical_axes\": [\"b\"]}]}",
                 "/inputs/0/logical_axes", "1 logical axis names for a tensor of rank 2");
    expect_error("{" MESH ", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\", "
                 "\"logical_axes\": [\"b\", 3]}]}",
                 "/inputs/0/logical_axes/1", "logical axis name or null");
    expect_error("{" MESH ", \"logical_axis_rules\": [[\"b\", \"nope\"]], \"inputs\": [{\"name\": "
                 "\"x\", \"type\": \"tensor<4x8xf32>\", \"logical_axes\": [\"b\", null]}]}",
                 "/inputs/0/logical_axes", "unknown axis");
}

static void test_sp_graph_decode_rejects_bad_custom_rules(void **state)
{
    (void)state;
    expect_error("{\"custom_rules\": {\"foo\": \"i j\"}, \"ops\": []}", "/custom_rules/foo",
                 NULL);
    expect_error("{\"custom_rules\": {\"a/b~c\": 3}, \"ops\": []}", "/custom_rules/a~1b~0c",
                 "expected a rule");
    expect_error("{\"custom_rules\": {\"foo\": {\"sharding_rule\": \"i -> i\", \"sdy_rule\": "
                 "\"x\"}}, \"ops\": []}",
                 "/custom_rules/foo", "exactly one");
    expect_error("{\"custom_rules\": {\"foo\": {\"sdy_rule\": \"<([i])->([i]) {i=\"}}, "
                 "\"ops\": []}",
                 "/custom_rules/foo/sdy_rule", NULL);
    expect_error("{\"custom_rules\": {\"foo\": {\"sharding_rule\": \"i -> i\", "
                 "\"reduction_factors\": \"i\"}}, \"ops\": []}",
                 "/custom_rules/foo/reduction_factors", "expected an array");
    expect_error("{\"custom_rules\": {\"foo\": {\"sharding_rule\": \"i -> i\", "
                 "\"factor_sizes\": {\"k\": 0}}}, \"ops\": []}",
                 "/custom_rules/foo/factor_sizes/k", "out of range");
    expect_error("{\"custom_rules\": {\"foo\": {\"rule\": \"i -> i\"}}, \"ops\": []}",
                 "/custom_rules/foo/rule", "unknown member");
    expect_error("{\"custom_rules\": [], \"ops\": []}", "/custom_rules", "expected an object");
}

/* ---- sharding spellings ------------------------------------------------------------ */

static void test_sp_graph_decode_sharding_spellings_agree(void **state)
{
    (void)state;
    sp_graph *g = decode_ok(
        "{" MESH ", \"logical_axis_rules\": [[\"batch\", \"data\"], [\"hidden\", \"model\"]],"
        "\"inputs\": ["
        " {\"name\": \"a\", \"type\": \"tensor<8x16xf32>\", \"sharding\": \"<@mesh, [{\\\"data\\\"}, {}]>\"},"
        " {\"name\": \"b\", \"type\": \"tensor<8x16xf32>\", \"sharding\": \"#sdy.sharding<@mesh, [{\\\"data\\\"}, {}]>\"},"
        " {\"name\": \"c\", \"type\": \"tensor<8x16xf32>\", \"sharding\": [\"data\", null]},"
        " {\"name\": \"d\", \"type\": \"tensor<8x16xf32>\", \"sharding\": [\"data\"]},"
        " {\"name\": \"e\", \"type\": \"tensor<8x16xf32>\", \"sharding\": {\"mesh\": \"mesh\", \"spec\": [[\"data\"], null]}},"
        " {\"name\": \"f\", \"type\": \"tensor<8x16xf32>\", \"logical_axes\": [\"batch\", \"embed\"]},"
        " {\"name\": \"g\", \"type\": \"tensor<8x16xf32>\", \"sharding\": {\"logical\": [\"batch\", null]}},"
        " {\"name\": \"h\", \"type\": \"tensor<8x16xf32>\", \"sharding\": [[\"data\", \"model\"], null]},"
        " {\"name\": \"i\", \"type\": \"tensor<8x16xf32>\", \"sharding\": \"<@mesh, [{\\\"data\\\", \\\"model\\\"}, {}]>\"},"
        " {\"name\": \"j\", \"type\": \"tensor<8x16xf32>\", \"sharding\": [\"?\", \"model\"]},"
        " {\"name\": \"k\", \"type\": \"tensor<8x16xf32>\", \"sharding\": \"<@mesh, [{?}, {\\\"model\\\"}]>\"},"
        " {\"name\": \"l\", \"type\": \"tensor<8x16xf32>\", \"logical_axes\": [\"batch\", \"hidden\"]},"
        " {\"name\": \"m\", \"type\": \"tensor<8x16xf32>\", \"sharding\": [\"data\", \"model\"]}"
        "]}");
    for (uint32_t i = 1; i < 7; i++) {
        assert_true(sp_sharding_equal(input_sharding(g, 0), input_sharding(g, i)));
    }
    assert_true(sp_sharding_equal(input_sharding(g, 7), input_sharding(g, 8)));
    assert_false(sp_sharding_equal(input_sharding(g, 0), input_sharding(g, 7)));
    assert_true(sp_sharding_equal(input_sharding(g, 9), input_sharding(g, 10)));
    assert_false(input_sharding(g, 9)->dims[0].is_closed);
    assert_true(sp_sharding_equal(input_sharding(g, 11), input_sharding(g, 12)));
    assert_string_equal(sp_graph_value_name(g, 0), "a");
    sp_graph_destroy(g);
}

/* flax.linen logical_to_mesh_axes: rules in order, first free mesh axis wins,
 * an assignment (even to None) is final, unmatched names replicate. */
static void test_sp_graph_decode_logical_follows_flax(void **state)
{
    (void)state;
    sp_graph *g = decode_ok(
        "{" MESH ", \"logical_axis_rules\": [[\"embed\", \"data\"], [\"batch\", \"data\"],"
        " [\"heads\", null], [\"heads\", \"model\"], [\"mlp\", [\"data\", \"model\"]],"
        " [\"kv\", \"model\"]],"
        "\"inputs\": ["
        " {\"name\": \"a\", \"type\": \"tensor<8x16xf32>\", \"logical_axes\": [\"batch\", \"embed\"]},"
        " {\"name\": \"b\", \"type\": \"tensor<8x16xf32>\", \"logical_axes\": [\"heads\", \"kv\"]},"
        " {\"name\": \"c\", \"type\": \"tensor<8x16xf32>\", \"logical_axes\": [\"mlp\", \"kv\"]},"
        " {\"name\": \"d\", \"type\": \"tensor<8x16xf32>\", \"logical_axes\": [null, \"unknown\"]},"
        " {\"name\": \"ea\", \"type\": \"tensor<8x16xf32>\", \"sharding\": [null, \"data\"]},"
        " {\"name\": \"eb\", \"type\": \"tensor<8x16xf32>\", \"sharding\": [null, \"model\"]},"
        " {\"name\": \"ec\", \"type\": \"tensor<8x16xf32>\", \"sharding\": [[\"data\", \"model\"], null]},"
        " {\"name\": \"ed\", \"type\": \"tensor<8x16xf32>\", \"sharding\": [null, null]}"
        "]}");
    /* embed's rule comes first and takes "data"; batch finds it used */
    assert_true(sp_sharding_equal(input_sharding(g, 0), input_sharding(g, 4)));
    /* heads is assigned None by its first rule, so kv gets model */
    assert_true(sp_sharding_equal(input_sharding(g, 1), input_sharding(g, 5)));
    /* mlp takes both axes, kv finds model used */
    assert_true(sp_sharding_equal(input_sharding(g, 2), input_sharding(g, 6)));
    assert_true(sp_sharding_equal(input_sharding(g, 3), input_sharding(g, 7)));
    sp_graph_destroy(g);
}

/* ---- structure ---------------------------------------------------------------------- */

static void test_sp_graph_decode_builds_regions_calls_and_sdy_ops(void **state)
{
    (void)state;
    sp_graph *g = decode_ok(
        "{" MESH ","
        "\"custom_rules\": {\"my_matmul\": {\"sharding_rule\": \"i k, k j -> i j\","
        "  \"reduction_factors\": [\"k\"]}, \"ew\": \"i -> i\","
        "  \"t\": {\"sdy_rule\": \"#sdy.op_sharding_rule<([i])->([i]) {i=4}>\"}},"
        "\"functions\": [{\"name\": \"helper\", \"visibility\": \"private\","
        "  \"inputs\": [{\"name\": \"p\", \"type\": \"tensor<4xf32>\"}],"
        "  \"ops\": [{\"op\": \"negate\", \"operands\": [\"p\"], \"result\": \"q\", \"type\": \"tensor<4xf32>\"}],"
        "  \"outputs\": [\"q\"]},"
        " {\"name\": \"main\", \"inputs\": [{\"name\": \"x\", \"type\": \"tensor<4x8xf32>\","
        "   \"sharding\": [\"data\", null]}, {\"name\": \"v\", \"type\": {\"shape\": [4], \"dtype\": \"float32\"}}],"
        "  \"ops\": ["
        "   {\"op\": \"stablehlo.constant\", \"result\": \"z\", \"type\": \"tensor<f32>\","
        "    \"attributes\": {\"value\": \"dense<0.000000e+00> : tensor<f32>\"}},"
        "   {\"op\": \"stablehlo.reduce\", \"operands\": [\"x\", \"z\"], \"result\": \"r\","
        "    \"type\": \"tensor<4xf32>\", \"attributes\": {\"dimensions\": [1]},"
        "    \"regions\": [{\"args\": [{\"name\": \"a\", \"type\": \"tensor<f32>\"},"
        "      {\"name\": \"b\", \"type\": \"tensor<f32>\"}], \"ops\": ["
        "      {\"op\": \"add\", \"operands\": [\"a\", \"b\"], \"result\": \"s\", \"type\": \"tensor<f32>\"},"
        "      {\"op\": \"stablehlo.return\", \"operands\": [\"s\"]}]}]},"
        "   {\"op\": \"func.call\", \"operands\": [\"r\"], \"result\": \"c\", \"type\": \"tensor<4xf32>\","
        "    \"attributes\": {\"callee\": \"@helper\"}},"
        "   {\"op\": \"stablehlo.custom_call\", \"call_target\": \"ew\", \"operands\": [\"c\"],"
        "    \"result\": \"cc\", \"type\": \"tensor<4xf32>\", \"sharding\": [\"model\"]},"
        "   {\"op\": \"sdy.propagation_barrier\", \"operands\": [\"cc\"], \"result\": \"pb\","
        "    \"allowed_direction\": \"FORWARD\"},"
        "   {\"op\": \"sdy.sharding_group\", \"operands\": [\"pb\"], \"group_id\": 3},"
        "   {\"op\": \"sdy.sharding_group\", \"operands\": [\"v\"], \"group_id\": 3},"
        "   {\"op\": \"sdy.sharding_constraint\", \"operands\": [\"pb\"], \"result\": \"k\","
        "    \"sharding\": \"<@mesh, [{\\\"model\\\"}]>\"},"
        "   {\"op\": \"stablehlo.sort\", \"operands\": [\"k\", \"v\"], \"results\": ["
        "     {\"name\": \"s0\", \"type\": \"tensor<4xf32>\", \"sharding\": [\"model\"]},"
        "     {\"name\": \"s1\", \"type\": \"tensor<4xf32>\"}],"
        "    \"attributes\": {\"dimension\": 0, \"is_stable\": true},"
        "    \"regions\": [{\"args\": [{\"name\": \"a\", \"type\": \"tensor<f32>\"},"
        "      {\"name\": \"b\", \"type\": \"tensor<f32>\"}, {\"name\": \"c2\", \"type\": \"tensor<f32>\"},"
        "      {\"name\": \"d\", \"type\": \"tensor<f32>\"}], \"ops\": ["
        "      {\"op\": \"compare\", \"operands\": [\"a\", \"b\"], \"result\": \"lt\", \"type\": \"tensor<i1>\","
        "       \"attributes\": {\"comparison_direction\": \"#stablehlo<comparison_direction LT>\"}},"
        "      {\"op\": \"stablehlo.return\", \"operands\": [\"lt\"]}]}]}"
        "  ],"
        "  \"outputs\": [{\"value\": \"s0\", \"sharding\": [\"model\"],"
        "    \"attributes\": {\"jax.result_info\": \"\\\"result\\\"\"}}, \"s1\"]}]}");
    const sp_module *m = sp_graph_module(g);
    assert_true(sp_graph_has_functions(g));
    assert_int_not_equal(sp_module_func(m, "helper"), SP_NONE);
    assert_int_not_equal(sp_module_func(m, "main"), SP_NONE);
    /* the printed module reads back and prints the same */
    char *text = print_module(m);
    sp_module *m2 = NULL;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = sp_mlir_read(text, strlen(text), 0, &m2, &err);
    if (st != CM_OK) {
        fprintf(stderr, "%s\nread back failed at %s: %s\n", text, err.path, err.msg);
    }
    assert_int_equal(st, CM_OK);
    char *text2 = print_module(m2);
    assert_string_equal(text, text2);
    assert_non_null(strstr(text, "sdy.propagation_barrier"));
    assert_non_null(strstr(text, "allowed_direction=FORWARD"));
    assert_non_null(strstr(text, "group_id=3"));
    assert_non_null(strstr(text, "stablehlo.custom_call @ew"));
    cm_free(text);
    cm_free(text2);
    sp_module_destroy(m2);
    sp_graph_destroy(g);
}

/* The Flax MLP JSON example and its MLIR twin print to the same module. */
static void test_sp_graph_decode_flax_example_matches_mlir(void **state)
{
    (void)state;
    char *js = NULL, *ml = NULL;
    size_t jl = 0, mlen = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_file_read("examples/flax_mlp.json", &js, &jl, &err), CM_OK);
    assert_int_equal(cm_file_read("examples/flax_mlp.mlir", &ml, &mlen, &err), CM_OK);
    sp_graph *g = decode_ok(js);
    sp_module *m = NULL;
    assert_int_equal(sp_mlir_read(ml, mlen, 0, &m, &err), CM_OK);
    char *a = print_module(sp_graph_module(g)), *b = print_module(m);
    assert_string_equal(a, b);
    cm_free(a);
    cm_free(b);
    cm_free(js);
    cm_free(ml);
    sp_module_destroy(m);
    sp_graph_destroy(g);
}

static void test_sp_graph_decode_oom(void **state)
{
    (void)state;
    char *js = NULL;
    size_t jl = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_file_read("examples/flax_mlp.json", &js, &jl, &err), CM_OK);
    for (long n = 0;; n++) {
        sp_graph *g = NULL;
        cm_error_clear(&err);
        cm_alloc_fail_after(n);
        cm_status st = sp_graph_decode(js, jl, NULL, &g, &err);
        cm_alloc_fail_after(-1);
        if (st == CM_OK) {
            sp_graph_destroy(g);
            assert_true(n > 10);
            break;
        }
        if (st != CM_ENOMEM) {
            fprintf(stderr, "n=%ld: %d at %s: %s\n", n, st, err.path, err.msg);
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_null(g);
    }
    cm_free(js);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sp_graph_decode_rejects_bad_json),
        cmocka_unit_test(test_sp_graph_decode_syntax_errors_say_where),
        cmocka_unit_test(test_sp_graph_decode_rejects_unknown_members),
        cmocka_unit_test(test_sp_graph_decode_rejects_unknown_value),
        cmocka_unit_test(test_sp_graph_decode_rejects_duplicate_names),
        cmocka_unit_test(test_sp_graph_decode_rejects_bad_ops),
        cmocka_unit_test(test_sp_graph_decode_rejects_bad_types),
        cmocka_unit_test(test_sp_graph_decode_enforces_limits),
        cmocka_unit_test(test_sp_graph_decode_rejects_bad_attributes),
        cmocka_unit_test(test_sp_graph_decode_rejects_bad_meshes),
        cmocka_unit_test(test_sp_graph_decode_rejects_bad_shardings),
        cmocka_unit_test(test_sp_graph_decode_rejects_bad_logical),
        cmocka_unit_test(test_sp_graph_decode_rejects_bad_custom_rules),
        cmocka_unit_test(test_sp_graph_decode_sharding_spellings_agree),
        cmocka_unit_test(test_sp_graph_decode_logical_follows_flax),
        cmocka_unit_test(test_sp_graph_decode_builds_regions_calls_and_sdy_ops),
        cmocka_unit_test(test_sp_graph_decode_flax_example_matches_mlir),
        cmocka_unit_test(test_sp_graph_decode_oom),
    };
    return cmocka_run_group_tests_name("sp_graph_json", tests, NULL, NULL);
}
