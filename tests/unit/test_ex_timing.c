/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_timing's timeline (ex_trace): the Flax MLP
 * graph document run on 8 devices records, in the chosen run only, every
 * op on every device in order, each all_reduce with its barrier wait
 * inside its span and one member per collective that waited least; the
 * progress hook is called once per run; ex_trace_json names ops by the
 * graph's value names (looking through generated ones, "v70", to what the
 * value is made of) and writes well-formed events; a trace of a run that
 * never comes records nothing; bad device counts are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cm.h"
#include "ex_exec.h"
#include "ex_timing.h"
#include "sp_example.h"
#include "sp_input.h"

typedef struct runs_seen {
    uint32_t calls;
    uint32_t last;
    uint32_t runs;
} runs_seen;

static void on_run(void *ctx, uint32_t run, uint32_t runs)
{
    runs_seen *s = ctx;
    s->calls++;
    s->last = run;
    s->runs = runs;
}

/* The MLP graph document read twice (partitioned program, reference). */
static void load_mlp(sp_input *part, sp_input *ref)
{
    char *text = NULL;
    size_t len = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_file_read("examples/flax_mlp.json", &text, &len, &err), CM_OK);
    sp_input_opts io;
    sp_input_opts_init(&io);
    memset(part, 0, sizeof *part);
    memset(ref, 0, sizeof *ref);
    assert_int_equal(sp_input_read(text, len, &io, part, &err), CM_OK);
    assert_int_equal(sp_input_read(text, len, &io, ref, &err), CM_OK);
    assert_int_equal(sp_input_partition(part, &err), CM_OK);
    cm_free(text);
}

static void test_ex_trace_records_the_chosen_run(void **state)
{
    (void)state;
    sp_input part, ref;
    load_mlp(&part, &ref);
    cm_error err;
    cm_error_clear(&err);
    ex_trace tr;
    assert_int_equal(ex_trace_init(&tr, 8, 2, &err), CM_OK);
    runs_seen seen = {0, 0, 0};
    tr.on_run = on_run;
    tr.ctx = &seen;
    ex_check_opts o = {.n_devices = 8, .iters = 3, .seed = 1, .trace = &tr};
    ex_report r;
    assert_int_equal(ex_check_modules(part.m, ref.m, &o, &r, &err), CM_OK);
    assert_true(r.mm.match);
    assert_int_equal(seen.calls, 3);
    assert_int_equal(seen.last, 2);
    assert_int_equal(seen.runs, 3);
    uint32_t n0 = tr.dev[0].n;
    assert_true(n0 > 0);
    uint32_t colls0 = 0;
    for (uint32_t d = 0; d < 8; d++) {
        const ex_trace_dev *dv = &tr.dev[d];
        assert_int_equal(dv->n, n0); /* every device runs the same ops */
        assert_int_equal(dv->dropped, 0);
        uint32_t colls = 0;
        for (uint32_t i = 0; i < dv->n; i++) {
            const ex_trace_event *e = &dv->ev[i];
            assert_true(e->op < part.m->n_ops);
            assert_true(e->end >= e->start);
            assert_true(e->start >= dv->start);
            assert_int_equal(e->op, tr.dev[0].ev[i].op);
            if (i > 0) {
                assert_true(e->start >= dv->ev[i - 1].end);
            }
            assert_true(e->wait >= 0 && e->wait <= e->end - e->start + 1e-9);
            colls += strcmp(part.m->ops[e->op].name, "sdy.all_reduce") == 0;
        }
        if (d == 0) {
            colls0 = colls;
        }
        assert_int_equal(colls, colls0);
    }
    assert_true(colls0 > 0);

    /* the JSON: ops named by value names, events well formed */
    sp_cost *c = ex_timing_cost(&part);
    ex_timing t = {part.m, part.g, c, NULL, 8, 1};
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '{');
    cm_buf_puts(&b, "\"x\":0");
    assert_int_equal(ex_trace_json(&tr, &t, &b), CM_OK);
    cm_buf_putc(&b, '}');
    json_error_t je;
    json_t *doc = json_loadb(b.data, b.len, 0, &je);
    assert_non_null(doc);
    json_t *tl = json_object_get(doc, "timeline");
    assert_int_equal(json_integer_value(json_object_get(tl, "run")), 2);
    assert_int_equal(json_integer_value(json_object_get(tl, "devices")), 8);
    json_t *ops = json_object_get(tl, "ops"), *evs = json_object_get(tl, "events");
    assert_int_equal(json_array_size(evs), (size_t)n0 * 8);
    bool named = false, coll = false;
    for (size_t i = 0; i < json_array_size(ops); i++) {
        const char *name = json_string_value(json_object_get(json_array_get(ops, i), "name"));
        assert_non_null(name);
        named = named || strcmp(name, "dot_general l0.h") == 0;
        const char *k = json_string_value(json_object_get(json_array_get(ops, i), "collective"));
        if (k != NULL) {
            assert_string_equal(k, "all_reduce");
            assert_non_null(strstr(name, "all_reduce of "));
            coll = true;
        }
    }
    assert_true(named);
    assert_true(coll);
    for (size_t i = 0; i < json_array_size(evs); i++) {
        json_t *e = json_array_get(evs, i);
        assert_int_equal(json_array_size(e), 5);
        json_int_t ref_i = json_integer_value(json_array_get(e, 1));
        assert_true(ref_i >= 0 && (size_t)ref_i < json_array_size(ops));
        assert_true(json_number_value(json_array_get(e, 2)) >= 0);
        assert_true(json_number_value(json_array_get(e, 3)) >= 0);
    }
    json_decref(doc);
    cm_buf_fini(&b);
    sp_cost_destroy(c);
    ex_trace_fini(&tr);
    sp_input_fini(&part);
    sp_input_fini(&ref);
}

static void test_ex_trace_of_a_run_that_never_comes_is_empty(void **state)
{
    (void)state;
    sp_input part, ref;
    load_mlp(&part, &ref);
    cm_error err;
    cm_error_clear(&err);
    ex_trace tr;
    assert_int_equal(ex_trace_init(&tr, 8, 5, &err), CM_OK);
    ex_check_opts o = {.n_devices = 8, .iters = 2, .seed = 1, .trace = &tr};
    ex_report r;
    assert_int_equal(ex_check_modules(part.m, ref.m, &o, &r, &err), CM_OK);
    for (uint32_t d = 0; d < 8; d++) {
        assert_int_equal(tr.dev[d].n, 0);
    }
    ex_timing t = {part.m, part.g, NULL, NULL, 8, 1};
    cm_buf b;
    cm_buf_init(&b);
    assert_int_equal(ex_trace_json(&tr, &t, &b), CM_OK);
    assert_non_null(strstr(b.data, "\"ops\":[],\"events\":[]"));
    cm_buf_fini(&b);
    ex_trace_fini(&tr);
    sp_input_fini(&part);
    sp_input_fini(&ref);
}

/* The transformer template numbers its values (v0, v1, ...): the timeline
 * names them by what they are made of instead. */
static void test_ex_trace_names_look_through_generated_names(void **state)
{
    (void)state;
    sp_example_opts eo;
    sp_example_opts_init(&eo);
    eo.model = SP_EXAMPLE_TRANSFORMER;
    eo.strategy = SP_EXAMPLE_TP;
    eo.layers = 1;
    eo.d_model = 64;
    eo.heads = 4;
    eo.seq = 8;
    eo.batch = 4;
    cm_error err;
    cm_error_clear(&err);
    cm_buf doc;
    cm_buf_init(&doc);
    assert_int_equal(sp_example_graph_json(&eo, &doc, &err), CM_OK);
    sp_input_opts io;
    sp_input_opts_init(&io);
    sp_input part, ref;
    memset(&part, 0, sizeof part);
    memset(&ref, 0, sizeof ref);
    assert_int_equal(sp_input_read(doc.data, doc.len, &io, &part, &err), CM_OK);
    assert_int_equal(sp_input_read(doc.data, doc.len, &io, &ref, &err), CM_OK);
    assert_int_equal(sp_input_partition(&part, &err), CM_OK);
    cm_buf_fini(&doc);
    ex_trace tr;
    assert_int_equal(ex_trace_init(&tr, 8, 0, &err), CM_OK);
    ex_check_opts o = {.n_devices = 8, .iters = 1, .seed = 1, .trace = &tr};
    ex_report r;
    assert_int_equal(ex_check_modules(part.m, ref.m, &o, &r, &err), CM_OK);
    ex_timing t = {part.m, part.g, NULL, NULL, 8, 1};
    cm_buf b;
    cm_buf_init(&b);
    assert_int_equal(ex_trace_json(&tr, &t, &b), CM_OK);
    assert_non_null(strstr(b.data, "\"name\":\"dot_general(x, layer0.Wq)\""));
    assert_non_null(strstr(b.data, "\"name\":\"reshape of dot_general(x, layer0.Wq)\""));
    /* no name ends in a generated one */
    json_error_t je;
    json_t *j = json_loads(b.data + 12, 0, &je); /* after ,"timeline": */
    assert_non_null(j);
    json_t *ops = json_object_get(j, "ops");
    assert_true(json_array_size(ops) > 10);
    for (size_t i = 0; i < json_array_size(ops); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(ops, i), "name"));
        const char *sp = strrchr(n, ' ');
        const char *last = sp != NULL ? sp + 1 : n;
        assert_false(last[0] == 'v' && last[1] >= '0' && last[1] <= '9');
    }
    json_decref(j);
    cm_buf_fini(&b);
    ex_trace_fini(&tr);
    sp_input_fini(&part);
    sp_input_fini(&ref);
}

static void test_ex_trace_init_refuses_bad_device_counts(void **state)
{
    (void)state;
    cm_error err;
    cm_error_clear(&err);
    ex_trace tr;
    assert_int_equal(ex_trace_init(&tr, 0, 0, &err), CM_EINVAL);
    ex_trace_fini(&tr);
    assert_int_equal(ex_trace_init(&tr, 5000, 0, &err), CM_EINVAL);
    ex_trace_fini(&tr);
    /* at least 64 events per device even when the budget is shared thin */
    assert_int_equal(ex_trace_init(&tr, 4096, 0, &err), CM_OK);
    assert_int_equal(tr.cap, 64);
    ex_trace_fini(&tr);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_trace_records_the_chosen_run),
        cmocka_unit_test(test_ex_trace_of_a_run_that_never_comes_is_empty),
        cmocka_unit_test(test_ex_trace_names_look_through_generated_names),
        cmocka_unit_test(test_ex_trace_init_refuses_bad_device_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
