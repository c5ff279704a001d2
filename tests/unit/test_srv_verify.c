/* SPDX-License-Identifier: Apache-2.0
 * Integration tests of issue 18's bad inputs through HTTP on a real server
 * (tests/unit/tu_http.h): each input that crashed the planner (a mesh axis of
 * size 0, a return of more values than the function has results) or was
 * planned although invalid (negative dimension and mesh axis, 64 axes of
 * size 2, 2^62 x 2^62 elements, a dot_general with the wrong result shape)
 * is answered 400 "invalid" with its LINE:COL, whether posted as text/plain
 * or as {"mlir": ...} to /v1/plans or stored with /v1/graphs; a graph
 * document's shape error gets its JSON Pointer; the server still answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cm.h"
#include "tu_http.h"
#include "srv_app.h"

static int setup(void **state)
{
    tu_server *f = calloc(1, sizeof *f);
    if (f == NULL || tu_server_init(f, "test_srv_verify") != 0) {
        free(f);
        return -1;
    }
    srv_config c;
    tu_config_default(f, &c);
    tu_server_start(f, &c);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    tu_server *f = *state;
    tu_server_fini(f);
    free(f);
    return 0;
}

#define FN(MESH, T, BODY)                                                                      \
    "sdy.mesh @mesh = <" MESH ">\n"                                                            \
    "func.func @main(%arg0: " T " {sdy.sharding = #sdy.sharding<@mesh, [{\"m\"}, {}]>}) -> " T \
    " {\n" BODY "}\n"
#define ADD(T) "  %0 = stablehlo.add %arg0, %arg0 : " T "\n  return %0 : " T "\n"
#define HUGE   "tensor<4611686018427387904x4611686018427387904xf32>"

typedef struct bad_input {
    const char *text;
    const char *path; /* LINE:COL */
    const char *msg;  /* a substring of the message */
} bad_input;

static char axes64[4096];

static const bad_input *inputs(size_t *n)
{
    static bad_input v[] = {
        {FN("[\"m\"=0]", "tensor<8x16xf32>", ADD("tensor<8x16xf32>")), "1:1",
         "axis size must be at least 1, got: 0"},
        {FN("[\"m\"=2]", "tensor<8x16xf32>",
            "  %0 = stablehlo.add %arg0, %arg0 : tensor<8x16xf32>\n"
            "  return %0, %arg0 : tensor<8x16xf32>, tensor<8x16xf32>\n"),
         "4:3", "has 2 operands, but enclosing function (@main) returns 1"},
        {FN("[\"m\"=2]", "tensor<-8x16xf32>", ADD("tensor<-8x16xf32>")), "3:3",
         "invalid tensor type 'tensor<-8x16xf32>'"},
        {FN("[\"m\"=-2]", "tensor<8x16xf32>", ADD("tensor<8x16xf32>")), "1:1",
         "axis size must be at least 1, got: -2"},
        {FN("[\"m\"=2]", HUGE, ADD(HUGE)), "3:3", "more elements (or bytes) than fit in 64 bits"},
        {"func.func @main(%arg0: tensor<8x1024xf32>, %arg1: tensor<1024x1024xf32>) -> "
         "tensor<8x512xf32> {\n"
         "  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : "
         "(tensor<8x1024xf32>, tensor<1024x1024xf32>) -> tensor<8x512xf32>\n"
         "  return %0 : tensor<8x512xf32>\n}\n",
         "2:3", "inferred shape '8x1024' is incompatible"},
        {axes64, "1:1", "the product of axis sizes overflows 64 bits"},
    };
    if (axes64[0] == '\0') {
        strcpy(axes64, "sdy.mesh @mesh = <[");
        for (int i = 0; i < 64; i++) {
            char ax[16];
            snprintf(ax, sizeof ax, "%s\"m%d\"=2", i ? ", " : "", i);
            strcat(axes64, ax);
        }
        strcat(axes64, "]>\nfunc.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = "
                       "#sdy.sharding<@mesh, [{\"m0\"}, {}]>}) -> tensor<8x16xf32> {\n" ADD(
                           "tensor<8x16xf32>") "}\n");
    }
    *n = sizeof v / sizeof v[0];
    return v;
}

static void expect_400(const tu_resp *r, const bad_input *b)
{
    tu_expect_error(r, 400, "invalid", b->path);
    const char *msg = tu_jstr(json_object_get(r->json, "error"), "message");
    if (strstr(msg, b->msg) == NULL) {
        fprintf(stderr, "message '%s' lacks '%s'\n", msg, b->msg);
    }
    assert_non_null(strstr(msg, b->msg));
}

static void test_srv_plans_rejects_bad_mlir_with_line_col(void **state)
{
    tu_server *f = *state;
    size_t n;
    const bad_input *v = inputs(&n);
    for (size_t i = 0; i < n; i++) {
        tu_resp r;
        tu_http(f, "POST", "/v1/plans", "text/plain", v[i].text, &r);
        expect_400(&r, &v[i]);
        tu_resp_fini(&r);
        /* the same as {"mlir": ...} */
        json_t *j = json_pack("{s:s}", "mlir", v[i].text);
        char *body = json_dumps(j, JSON_COMPACT);
        tu_http(f, "POST", "/v1/plans", "application/json", body, &r);
        expect_400(&r, &v[i]);
        tu_resp_fini(&r);
        free(body);
        json_decref(j);
    }
    tu_resp r;
    tu_http(f, "GET", "/healthz", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    tu_resp_fini(&r);
}

static void test_srv_graphs_rejects_bad_mlir_with_line_col(void **state)
{
    tu_server *f = *state;
    size_t n;
    const bad_input *v = inputs(&n);
    for (size_t i = 0; i < n; i++) {
        tu_resp r;
        tu_http(f, "POST", "/v1/graphs", "text/plain", v[i].text, &r);
        expect_400(&r, &v[i]);
        tu_resp_fini(&r);
    }
}

static void test_srv_plans_graph_shape_error_has_json_pointer(void **state)
{
    tu_server *f = *state;
    static const char *const doc =
        "{\"inputs\":[{\"name\":\"x\",\"type\":\"tensor<4xf32>\"}],"
        "\"ops\":[{\"op\":\"stablehlo.add\",\"operands\":[\"%x\",\"%x\"],"
        "\"results\":[{\"name\":\"%b\",\"type\":\"tensor<8xf32>\"}]}],\"outputs\":[\"%x\"]}";
    tu_resp r;
    tu_http(f, "POST", "/v1/plans", "application/json", doc, &r);
    tu_expect_error(&r, 400, "invalid", "/ops/0");
    tu_resp_fini(&r);
    tu_http(f, "POST", "/v1/graphs", "application/json", doc, &r);
    tu_expect_error(&r, 400, "invalid", "/ops/0");
    tu_resp_fini(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_srv_plans_rejects_bad_mlir_with_line_col),
        cmocka_unit_test(test_srv_graphs_rejects_bad_mlir_with_line_col),
        cmocka_unit_test(test_srv_plans_graph_shape_error_has_json_pointer),
    };
    return cmocka_run_group_tests_name("srv_verify", tests, setup, teardown);
}
