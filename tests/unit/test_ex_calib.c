/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for executor/ex_calib's ranking check: Kendall tau over the
 * plans of each model, pairs ordered differently within the measurement
 * spread, predictions within 15% of the measured step, and the printed
 * report. (The suite itself runs in
 * `shardplan calibrate --rank` and bench-executor: minutes, not a unit test.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ex_calib.h"

static void plan(ex_rank *r, const char *label, uint32_t model, double pred, double meas)
{
    ex_rank_plan *p = &r->plans[r->n++];
    snprintf(p->label, sizeof p->label, "%s", label);
    p->model = model;
    p->predicted_s = pred;
    p->measured_s = meas;
}

/* r's report as ex_calib_rank_print writes it, into buf. */
static void printed(const ex_rank *r, char *buf, size_t cap)
{
    FILE *f = fmemopen(buf, cap, "w");
    assert_non_null(f);
    ex_calib_rank_print(r, f);
    fclose(f);
}

static void test_ex_calib_rank_score_same_order_passes(void **state)
{
    (void)state;
    ex_rank r;
    memset(&r, 0, sizeof r);
    plan(&r, "MLP train dp", 0, 3.0, 2.5);
    plan(&r, "MLP train tp", 0, 2.0, 1.5);
    plan(&r, "MLP train dp+tp", 0, 1.0, 0.9);
    /* another model, much faster: cross-model pairs are not ranked */
    plan(&r, "transformer train dp", 1, 0.2, 0.6);
    plan(&r, "transformer train tp", 1, 0.1, 0.3);
    ex_calib_rank_score(&r);
    assert_true(r.tau == 1.0);
    assert_int_equal(r.discordant, 0);
    assert_true(r.pass);
}

static void test_ex_calib_rank_score_swapped_pair_fails(void **state)
{
    (void)state;
    ex_rank r;
    memset(&r, 0, sizeof r);
    plan(&r, "MLP train dp", 0, 3.0, 1.0); /* predicted slowest, measured fastest */
    plan(&r, "MLP train tp", 0, 2.0, 1.5);
    plan(&r, "MLP train dp+tp", 0, 1.0, 2.0);
    ex_calib_rank_score(&r);
    assert_int_equal(r.discordant, 3);
    assert_int_equal(r.close, 0);
    assert_true(r.tau == -1.0);
    assert_false(r.pass);
}

static void test_ex_calib_rank_score_close_pair_passes(void **state)
{
    (void)state;
    ex_rank r;
    memset(&r, 0, sizeof r);
    plan(&r, "transformer train dp", 0, 0.607, 0.569);
    plan(&r, "transformer train fsdp", 0, 0.604, 0.592); /* 4% apart when measured */
    plan(&r, "transformer train tp", 0, 0.313, 0.192);
    ex_calib_rank_score(&r);
    assert_int_equal(r.discordant, 1);
    assert_int_equal(r.close, 1);
    assert_true(r.tau > 0.3 && r.tau < 0.34); /* (2 - 1) / 3 */
    assert_true(r.pass);
    /* 20% apart measured is beyond the spread, but the cost model calls
     * the pair a tie (0.5% apart): still no wrong order */
    r.plans[1].measured_s = 0.569 * 1.2;
    ex_calib_rank_score(&r);
    assert_int_equal(r.discordant, 1);
    assert_int_equal(r.close, 1);
    assert_true(r.pass);
    /* apart on both sides and ordered differently: FAIL */
    r.plans[1].predicted_s = 0.4;
    ex_calib_rank_score(&r);
    assert_int_equal(r.discordant, 1);
    assert_int_equal(r.close, 0);
    assert_false(r.pass);
}

static void test_ex_calib_rank_print_shows_orders_and_verdict(void **state)
{
    (void)state;
    ex_rank r;
    memset(&r, 0, sizeof r);
    plan(&r, "MLP train dp", 0, 3.0, 1.0);
    plan(&r, "MLP train tp", 0, 2.0, 1.5);
    ex_calib_rank_score(&r);
    char buf[4096];
    printed(&r, buf, sizeof buf);
    assert_non_null(strstr(buf, "MLP order predicted: tp < dp; measured: dp < tp"));
    assert_non_null(strstr(buf, "Kendall tau -1.00"));
    assert_non_null(strstr(buf, "FAIL"));
}

static void test_ex_calib_rank_within_15_percent(void **state)
{
    (void)state;
    ex_rank r;
    memset(&r, 0, sizeof r);
    plan(&r, "MLP train dp", 0, 1.14, 1.0);  /* 14% over */
    plan(&r, "MLP train tp", 0, 0.43, 0.5);  /* 14% under */
    ex_calib_rank_score(&r);
    assert_int_equal(r.within, 2);
    assert_true(r.accurate);
    r.plans[1].predicted_s = 0.42; /* 16% under */
    ex_calib_rank_score(&r);
    assert_int_equal(r.within, 1);
    assert_false(r.accurate);
    assert_true(r.pass); /* the order is still right */
    char buf[4096];
    printed(&r, buf, sizeof buf);
    assert_non_null(strstr(buf, "0.840     0.00  (off by more than 15%)"));
    assert_non_null(strstr(buf, "1 of 2 plans predicted within 15% of their measured step: FAIL\n"));
    /* off while other processes took a core: said, still FAIL */
    r.plans[1].others_cores = 1.0;
    ex_calib_rank_score(&r);
    assert_int_equal(r.busy_off, 1);
    assert_false(r.accurate);
    printed(&r, buf, sizeof buf);
    assert_non_null(strstr(buf, "FAIL (1 of the 1 off ran while other processes took over 0.25 cores"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ex_calib_rank_score_same_order_passes),
        cmocka_unit_test(test_ex_calib_rank_score_swapped_pair_fails),
        cmocka_unit_test(test_ex_calib_rank_score_close_pair_passes),
        cmocka_unit_test(test_ex_calib_rank_print_shows_orders_and_verdict),
        cmocka_unit_test(test_ex_calib_rank_within_15_percent),
    };
    return cmocka_run_group_tests_name("ex_calib", tests, NULL, NULL);
}
