/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for common/: error wrapping and the out-of-memory helper, array
 * growth, the allocator's fail-the-Nth hook (also across threads), the JSON
 * writer (escaping, UTF-8 repair checked against jansson's decoder, numbers,
 * separators) and the hash map (find, insert, grow, remove, iteration); each
 * allocating API survives an OOM loop without leaks and unchanged. */
#include <math.h>
#include <pthread.h>
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
#include "cm_json.h"
#include "cm_map.h"

/* ---- errors -------------------------------------------------------------- */

static void test_cm_error_oom_sets_code_and_message(void **state)
{
    (void)state;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_error_oom(&err), CM_ENOMEM);
    assert_int_equal(err.code, CM_ENOMEM);
    assert_string_equal(err.msg, "out of memory");
    assert_string_equal(err.path, "");
    assert_int_equal(cm_error_oom(NULL), CM_ENOMEM);
}

static void test_cm_error_oom_first_error_wins(void **state)
{
    (void)state;
    cm_error err;
    cm_error_clear(&err);
    cm_error_set(&err, CM_EINVAL, "/a", "bad");
    assert_int_equal(cm_error_oom(&err), CM_ENOMEM);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.msg, "bad");
}

static void test_cm_error_wrap_keeps_code_and_path(void **state)
{
    (void)state;
    cm_error inner, err;
    cm_error_clear(&inner);
    cm_error_clear(&err);
    cm_error_set(&inner, CM_EINVAL, "/nodes/3/shape/1", "negative dimension %d", -2);
    assert_int_equal(cm_error_wrap(&err, &inner, "op %s", "dot"), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "/nodes/3/shape/1");
    assert_string_equal(err.msg, "op dot: negative dimension -2");
}

static void test_cm_error_wrap_first_error_wins(void **state)
{
    (void)state;
    cm_error inner, err;
    cm_error_clear(&inner);
    cm_error_clear(&err);
    cm_error_set(&inner, CM_ENOTFOUND, "/x", "no such mesh");
    cm_error_set(&err, CM_ECONFLICT, "/y", "first");
    assert_int_equal(cm_error_wrap(&err, &inner, "ignored"), CM_ENOTFOUND);
    assert_int_equal(err.code, CM_ECONFLICT);
    assert_string_equal(err.path, "/y");
    assert_string_equal(err.msg, "first");
    /* into itself: err already holds an error, so nothing changes */
    assert_int_equal(cm_error_wrap(&err, &err, "again"), CM_ECONFLICT);
    assert_string_equal(err.msg, "first");
    assert_int_equal(cm_error_wrap(NULL, &inner, "x"), CM_ENOTFOUND);
}

static void test_cm_error_wrap_without_inner_error_is_internal(void **state)
{
    (void)state;
    cm_error inner, err;
    cm_error_clear(&inner);
    cm_error_clear(&err);
    assert_int_equal(cm_error_wrap(&err, &inner, "reading %s", "f"), CM_EINTERNAL);
    assert_string_equal(err.msg, "reading f: unreported error");
    assert_string_equal(err.path, "");
    cm_error_clear(&err);
    assert_int_equal(cm_error_wrap(&err, NULL, "x"), CM_EINTERNAL);
    assert_string_equal(err.msg, "x: unreported error");
}

static void test_cm_error_wrap_empty_parts_and_truncation(void **state)
{
    (void)state;
    cm_error inner, err;
    cm_error_clear(&inner);
    cm_error_clear(&err);
    cm_error_set(&inner, CM_EIO, NULL, "%s", "");
    cm_error_wrap(&err, &inner, "prefix only");
    assert_string_equal(err.msg, "prefix only");
    cm_error_clear(&err);
    cm_error_clear(&inner);
    cm_error_set(&inner, CM_EIO, NULL, "inner");
    cm_error_wrap(&err, &inner, "%s", "");
    assert_string_equal(err.msg, "inner");
    /* a long prefix and a long inner message: truncated, still terminated */
    char longs[400];
    memset(longs, 'p', sizeof longs - 1);
    longs[sizeof longs - 1] = '\0';
    cm_error_clear(&err);
    cm_error_wrap(&err, &inner, "%s", longs);
    assert_int_equal(strlen(err.msg), CM_ERROR_MSG_LEN - 1);
    cm_error_clear(&err);
    cm_error_set(&inner, CM_EIO, NULL, "x");
    memset(inner.msg, 'i', sizeof inner.msg - 1);
    inner.msg[sizeof inner.msg - 1] = '\0';
    cm_error_wrap(&err, &inner, "outer");
    assert_int_equal(strlen(err.msg), CM_ERROR_MSG_LEN - 1);
    assert_memory_equal(err.msg, "outer: iii", 10);
    /* the message may be built from inner's own text */
    cm_error_clear(&err);
    cm_error_clear(&inner);
    cm_error_set(&inner, CM_EINVAL, "/p", "bad");
    cm_error_wrap(&err, &inner, "(%s)", inner.msg);
    assert_string_equal(err.msg, "(bad): bad");
}

/* ---- allocation and growth ----------------------------------------------- */

static void test_cm_alloc_fail_after_fails_exactly_one(void **state)
{
    (void)state;
    cm_alloc_fail_after(2);
    void *a = cm_alloc(8);
    void *b = cm_calloc(2, 8);
    void *c = cm_alloc(8);
    void *d = cm_alloc(8);
    cm_alloc_fail_after(-1);
    assert_non_null(a);
    assert_non_null(b);
    assert_null(c);
    assert_non_null(d);
    cm_free(a);
    cm_free(b);
    cm_free(d);
    cm_alloc_fail_after(0);
    void *r = cm_realloc(NULL, 8);
    assert_null(r);
    r = cm_realloc(NULL, 8);
    assert_non_null(r);
    cm_free(r);
}

#define N_THREADS    4
#define N_PER_THREAD 2000

static void *alloc_worker(void *arg)
{
    long *failures = arg;
    for (int i = 0; i < N_PER_THREAD; i++) {
        void *p = cm_alloc(16);
        if (p == NULL) {
            (*failures)++;
        }
        cm_free(p);
    }
    return NULL;
}

static void test_cm_alloc_fail_after_across_threads(void **state)
{
    (void)state;
    for (int round = 0; round < 20; round++) {
        long failures[N_THREADS] = {0};
        pthread_t t[N_THREADS];
        cm_alloc_fail_after(N_THREADS * N_PER_THREAD / 2 + round);
        for (int i = 0; i < N_THREADS; i++) {
            assert_int_equal(pthread_create(&t[i], NULL, alloc_worker, &failures[i]), 0);
        }
        long total = 0;
        for (int i = 0; i < N_THREADS; i++) {
            pthread_join(t[i], NULL);
            total += failures[i];
        }
        cm_alloc_fail_after(-1);
        assert_int_equal(total, 1);
    }
}

static void test_cm_grow_doubles_from_16(void **state)
{
    (void)state;
    int *a = NULL;
    size_t cap = 0;
    assert_int_equal(CM_GROW(a, cap, 1, NULL), CM_OK);
    assert_int_equal(cap, 16);
    a[0] = 7;
    assert_int_equal(CM_GROW(a, cap, 16, NULL), CM_OK);
    assert_int_equal(cap, 16);
    assert_int_equal(CM_GROW(a, cap, 17, NULL), CM_OK);
    assert_int_equal(cap, 32);
    assert_int_equal(CM_GROW(a, cap, 100, NULL), CM_OK);
    assert_int_equal(cap, 128);
    assert_int_equal(a[0], 7);
    for (size_t i = 0; i < cap; i++) {
        a[i] = (int)i;
    }
    cm_free(a);
}

static void test_cm_grow_rejects_overflow(void **state)
{
    (void)state;
    double *a = NULL;
    size_t cap = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(CM_GROW(a, cap, SIZE_MAX / 4, &err), CM_ENOMEM);
    assert_null(a);
    assert_int_equal(cap, 0);
    assert_int_equal(err.code, CM_ENOMEM);
    assert_string_equal(err.msg, "out of memory");
    /* the failure left nothing behind: the array still grows */
    assert_int_equal(CM_GROW(a, cap, 3, NULL), CM_OK);
    assert_int_equal(cap, 16);
    cm_free(a);
}

static void test_cm_grow_oom_leaves_array_unchanged(void **state)
{
    (void)state;
    long *a = NULL;
    size_t cap = 0, n = 0;
    for (long fail = 0;; fail++) {
        cm_error err;
        cm_error_clear(&err);
        cm_alloc_fail_after(fail);
        cm_status st = CM_OK;
        while (n < 1000 && st == CM_OK) {
            st = CM_GROW(a, cap, n + 1, &err);
            if (st == CM_OK) {
                a[n] = (long)n * 3;
                n++;
            }
        }
        cm_alloc_fail_after(-1);
        if (st == CM_OK) {
            break;
        }
        assert_int_equal(st, CM_ENOMEM);
        assert_int_equal(err.code, CM_ENOMEM);
        assert_true(cap >= n);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(a[i], (long)i * 3);
        }
        assert_true(fail < 100);
    }
    assert_int_equal(n, 1000);
    assert_int_equal(cap, 1024);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(a[i], (long)i * 3);
    }
    cm_free(a);
}

static void test_cm_grow_u32_keeps_none_free(void **state)
{
    (void)state;
    uint32_t *a = NULL;
    uint32_t cap = 0;
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(CM_GROW_U32(a, cap, UINT32_MAX, &err), CM_ENOMEM);
    assert_int_equal(err.code, CM_ENOMEM);
    assert_int_equal(cap, 0);
    assert_int_equal(CM_GROW_U32(a, cap, 20, NULL), CM_OK);
    assert_int_equal(cap, 32);
    assert_int_equal(cm_grow_u32((void **)&a, &cap, 5, sizeof *a, NULL), CM_OK);
    assert_int_equal(cap, 32);
    cm_free(a);
    /* elements so large that the byte count overflows */
    char *big = NULL;
    uint32_t bcap = 0;
    assert_int_equal(cm_grow_u32((void **)&big, &bcap, 8, SIZE_MAX / 4, NULL), CM_ENOMEM);
    assert_null(big);
    assert_int_equal(bcap, 0);
}

/* ---- JSON writer --------------------------------------------------------- */

/* The JSON string literal cm_json_put_str writes for n bytes at s. */
static char *json_of(const char *s, size_t n)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_json_put_str(&b, s, n);
    assert_false(b.oom);
    return cm_buf_take(&b);
}

static void expect_str(const char *s, size_t n, const char *want)
{
    char *got = json_of(s, n);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "got  %s\nwant %s\n", got, want);
    }
    assert_string_equal(got, want);
    cm_free(got);
}

#define EXPECT_STR(lit, want) expect_str(lit, sizeof lit - 1, want)

static void test_cm_json_put_str_escapes_rfc8259_minimum(void **state)
{
    (void)state;
    EXPECT_STR("", "\"\"");
    EXPECT_STR("plain text / slash", "\"plain text / slash\"");
    EXPECT_STR("a\"b\\c", "\"a\\\"b\\\\c\"");
    EXPECT_STR("\b\t\n\f\r", "\"\\b\\t\\n\\f\\r\"");
    EXPECT_STR("\x01\x1f\x0b", "\"\\u0001\\u001f\\u000b\"");
    EXPECT_STR("del\x7f!", "\"del\\u007f!\"");
    EXPECT_STR("nul\0mid", "\"nul\\u0000mid\"");
    EXPECT_STR("~ ", "\"~ \"");
}

static void test_cm_json_put_str_passes_utf8(void **state)
{
    (void)state;
    EXPECT_STR("caf\xc3\xa9", "\"caf\xc3\xa9\"");           /* U+00E9 */
    EXPECT_STR("\xe2\x82\xac", "\"\xe2\x82\xac\"");         /* U+20AC */
    EXPECT_STR("\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""); /* U+1F600 */
    EXPECT_STR("\xc2\x80\xdf\xbf", "\"\xc2\x80\xdf\xbf\""); /* U+0080, U+07FF */
    EXPECT_STR("\xe0\xa0\x80\xef\xbf\xbf", "\"\xe0\xa0\x80\xef\xbf\xbf\"");
    EXPECT_STR("\xed\x9f\xbf\xee\x80\x80", "\"\xed\x9f\xbf\xee\x80\x80\""); /* around surrogates */
    EXPECT_STR("\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"");                 /* U+10FFFF */
}

#define FFFD "\xef\xbf\xbd"

static void test_cm_json_put_str_replaces_invalid_utf8(void **state)
{
    (void)state;
    EXPECT_STR("a\x80z", "\"a" FFFD "z\"");      /* stray continuation */
    EXPECT_STR("\xbf\xbf", "\"" FFFD FFFD "\""); /* one per byte */
    EXPECT_STR("\xc0\xaf", "\"" FFFD FFFD "\""); /* overlong '/' */
    EXPECT_STR("\xc1\xbf", "\"" FFFD FFFD "\"");
    EXPECT_STR("\xe0\x80\xaf", "\"" FFFD FFFD FFFD "\""); /* overlong 3-byte */
    EXPECT_STR("\xed\xa0\x80", "\"" FFFD FFFD FFFD "\""); /* surrogate U+D800 */
    EXPECT_STR("\xf0\x80\x80\xaf", "\"" FFFD FFFD FFFD FFFD "\"");
    EXPECT_STR("\xf4\x90\x80\x80", "\"" FFFD FFFD FFFD FFFD "\""); /* above U+10FFFF */
    EXPECT_STR("\xf5\xff", "\"" FFFD FFFD "\"");
    /* cut short: the maximal subpart becomes one U+FFFD */
    EXPECT_STR("\xe2\x82", "\"" FFFD "\"");
    EXPECT_STR("\xe2\x82"
               "A",
               "\"" FFFD "A\"");
    EXPECT_STR("\xf0\x9f\x98"
               "\"",
               "\"" FFFD "\\\"\"");
    EXPECT_STR("\xf0\x9f", "\"" FFFD "\"");
    EXPECT_STR("\xc3", "\"" FFFD "\"");
    EXPECT_STR("\xc3\xc3\xa9", "\"" FFFD "\xc3\xa9\"");
}

/* A small deterministic generator for the property tests. */
static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Whether jansson, an independent validator, takes the n bytes as UTF-8
 * (it rejects overlong forms, surrogates and values above U+10FFFF). */
static bool is_valid_utf8(const unsigned char *p, size_t n)
{
    json_t *j = json_stringn((const char *)p, n);
    json_decref(j);
    return j != NULL;
}

/* Random byte strings, biased towards UTF-8 lead and continuation bytes:
 * jansson must accept every output, and decode it back to exactly the input
 * if and only if the input was valid UTF-8. */
static void test_cm_json_put_str_output_always_parses(void **state)
{
    (void)state;
    static const unsigned char pool[] = {'a',  'b',  'c',  'd',  'e',  'f',  'g',  'h',  'i',
                                         'j',  'a',  '"',  '\\', '\n', 0x01, 0x7f, 0x00, 0x80,
                                         0xbf, 0xc2, 0xc3, 0xe0, 0xe2, 0xed, 0xef, 0xf0, 0xf4,
                                         0xf5, 0xa0, 0x9f, 0x90, 0x8f, 0xff};
    uint64_t seed = 42;
    int n_valid = 0;
    for (int round = 0; round < 20000; round++) {
        unsigned char in[40];
        size_t n = (size_t)(rng_next(&seed) % sizeof in);
        for (size_t i = 0; i < n; i++) {
            in[i] = pool[rng_next(&seed) % sizeof pool];
        }
        cm_buf b;
        cm_buf_init(&b);
        cm_json_put_str(&b, (const char *)in, n);
        json_error_t je;
        json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        if (j == NULL) {
            fprintf(stderr, "jansson rejects %s: %s\n", b.data, je.text);
        }
        assert_non_null(j);
        assert_true(json_is_string(j));
        bool same = json_string_length(j) == n && memcmp(json_string_value(j), in, n) == 0;
        bool valid = is_valid_utf8(in, n);
        if (same != valid) {
            fprintf(stderr, "input of %zu bytes, output %s: same %d, valid %d\n", n, b.data, same,
                    valid);
        }
        assert_int_equal(same, valid);
        n_valid += valid;
        json_decref(j);
        cm_buf_fini(&b);
    }
    assert_true(n_valid > 200);
}

/* One special byte (or pair) at every position of runs of plain text, so
 * that the word-at-a-time scan meets it at every offset of a word. */
static void test_cm_json_put_str_word_boundaries(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *out;
    } specials[] = {
        {"\"", "\\\""},
        {"\\", "\\\\"},
        {"\n", "\\n"},
        {"\x01", "\\u0001"},
        {"\x1f", "\\u001f"},
        {"\x7f", "\\u007f"},
        {"\x80", FFFD},
        {" ", " "},
        {"~", "~"},
        {"\xc3\xa9", "\xc3\xa9"},
        {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"},
    };
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; k++) {
        size_t sn = strlen(specials[k].in);
        for (size_t len = 0; len <= 40; len++) {
            for (size_t at = 0; at <= len; at++) {
                char in[64], want[128];
                memset(in, 'a', at);
                memcpy(in + at, specials[k].in, sn);
                memset(in + at + sn, 'b', len - at);
                snprintf(want, sizeof want, "\"%.*s%s%.*s\"", (int)at, in, specials[k].out,
                         (int)(len - at), in + at + sn);
                expect_str(in, len + sn, want);
            }
        }
    }
}

static void test_cm_json_put_cstr_null(void **state)
{
    (void)state;
    cm_buf b;
    cm_buf_init(&b);
    cm_json_put_cstr(&b, NULL);
    cm_buf_putc(&b, ' ');
    cm_json_put_cstr(&b, "x");
    assert_string_equal(b.data, "null \"x\"");
    cm_buf_fini(&b);
}

/* What v writes with the writer fn. */
static void expect_f64(void (*fn)(cm_buf *, double), double v, const char *want)
{
    cm_buf b;
    cm_buf_init(&b);
    fn(&b, v);
    assert_false(b.oom);
    if (strcmp(b.data, want) != 0) {
        fprintf(stderr, "%.17g: got %s, want %s\n", v, b.data, want);
    }
    assert_string_equal(b.data, want);
    cm_buf_fini(&b);
}

static void test_cm_json_put_integers(void **state)
{
    (void)state;
    cm_buf b;
    cm_buf_init(&b);
    cm_json_put_i64(&b, INT64_MIN);
    cm_json_put_sep(&b);
    cm_json_put_i64(&b, 0);
    cm_json_put_sep(&b);
    cm_json_put_u64(&b, UINT64_MAX);
    cm_json_put_sep(&b);
    cm_json_put_u64(&b, 0);
    cm_json_put_sep(&b);
    cm_json_put_bool(&b, true);
    cm_json_put_sep(&b);
    cm_json_put_bool(&b, false);
    cm_json_put_sep(&b);
    cm_json_put_null(&b);
    assert_string_equal(b.data, "-9223372036854775808,0,18446744073709551615,0,true,false,null");
    cm_buf_fini(&b);
}

static void test_cm_json_put_f64_round_trips(void **state)
{
    (void)state;
    expect_f64(cm_json_put_f64, 3.0, "3");
    expect_f64(cm_json_put_f64, -0.0, "0");
    expect_f64(cm_json_put_f64, -12345.0, "-12345");
    expect_f64(cm_json_put_f64, 0.1, "0.1");
    expect_f64(cm_json_put_f64, 1.5e-7, "1.5e-07");
    expect_f64(cm_json_put_f64, 1e300, "1e+300");
    expect_f64(cm_json_put_f64, 9e15, "9e+15");
    expect_f64(cm_json_put_f64, 1.0 / 3.0, "0.3333333333333333");
    expect_f64(cm_json_put_f64, 0.1 + 0.2, "0.30000000000000004");
    expect_f64(cm_json_put_f64, NAN, "null");
    expect_f64(cm_json_put_f64, INFINITY, "null");
    expect_f64(cm_json_put_f64, -INFINITY, "null");
    uint64_t seed = 7;
    for (int i = 0; i < 20000; i++) {
        uint64_t hi = rng_next(&seed), mid = rng_next(&seed), lo = rng_next(&seed);
        uint64_t bits = hi << 33 ^ mid << 2 ^ lo;
        double v;
        memcpy(&v, &bits, sizeof v);
        if (!isfinite(v)) {
            continue;
        }
        cm_buf b;
        cm_buf_init(&b);
        cm_json_put_f64(&b, v);
        assert_true(strtod(b.data, NULL) == v);
        cm_buf_fini(&b);
    }
}

/* Today's put_num of planner/cost/sp_cost.c, the reference for put_num. */
static void old_cost_put_num(cm_buf *b, double v)
{
    if (!isfinite(v)) {
        cm_buf_puts(b, "null");
    } else if (v == floor(v) && fabs(v) < 9e15) {
        cm_buf_put_i64(b, (int64_t)v);
    } else {
        cm_buf_printf(b, "%.6g", v);
    }
}

static void test_cm_json_put_num_matches_cost_writer(void **state)
{
    (void)state;
    static const double vals[] = {0,         -0.0,    1,          -1,         2.5,   1234567,
                                  1e15,      8.99e15, 9e15,       1e16,       1e300, -1e300,
                                  0.1,       1e-9,    123.456789, 3.14159265, NAN,   INFINITY,
                                  -INFINITY, 98304,   4.2e-310,   65536.5};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        cm_buf a, b, g, f;
        cm_buf_init(&a);
        cm_buf_init(&b);
        cm_buf_init(&g);
        cm_buf_init(&f);
        cm_json_put_num(&a, vals[i], 6);
        old_cost_put_num(&b, vals[i]);
        assert_string_equal(a.data, b.data);
        cm_json_put_g(&g, vals[i], 9);
        if (isfinite(vals[i])) {
            cm_buf_printf(&f, "%.9g", vals[i]);
        } else {
            cm_buf_puts(&f, "null");
        }
        assert_string_equal(g.data, f.data);
        cm_buf_fini(&a);
        cm_buf_fini(&b);
        cm_buf_fini(&g);
        cm_buf_fini(&f);
    }
}

static void put_g6(cm_buf *b, double v)
{
    cm_json_put_g(b, v, 6);
}

static void put_g0(cm_buf *b, double v)
{
    cm_json_put_g(b, v, 0);
}

static void put_g99(cm_buf *b, double v)
{
    cm_json_put_g(b, v, 99);
}

static void test_cm_json_put_g_fixed_precision(void **state)
{
    (void)state;
    expect_f64(put_g6, 1234567, "1.23457e+06");
    expect_f64(put_g6, 0.5, "0.5");
    expect_f64(put_g6, NAN, "null");
    expect_f64(put_g0, 1234567, "1e+06");            /* clamped to 1 digit */
    expect_f64(put_g99, 0.1, "0.10000000000000001"); /* clamped to 17 */
}

/* A document with every member helper, mixed with raw structure. */
static void write_doc(cm_buf *b)
{
    cm_buf_putc(b, '{');
    cm_json_put_kv_str(b, "name", "mlp \"v2\"");
    cm_json_put_kv_i64(b, "id", -4);
    cm_json_put_kv_u64(b, "hash", 18446744073709551615u);
    cm_json_put_kv_bool(b, "ok", true);
    cm_json_put_kv_f64(b, "ratio", 0.25);
    cm_json_put_kv_num(b, "bytes", 98304, 6);
    cm_json_put_kv_str(b, "none", NULL);
    cm_json_put_key(b, "rows");
    cm_buf_puts(b, "[\n");
    for (int i = 0; i < 3; i++) {
        cm_json_put_sep(b);
        cm_buf_puts(b, "\n  {");
        cm_json_put_kv_i64(b, "i", i);
        cm_json_put_key(b, "empty");
        cm_buf_puts(b, "{}");
        cm_json_put_key(b, "list");
        cm_buf_putc(b, '[');
        for (int k = 0; k < i; k++) {
            cm_json_put_sep(b);
            cm_json_put_i64(b, k);
        }
        cm_buf_puts(b, "]}");
    }
    cm_buf_puts(b, "\n]}");
}

static const char doc_want[] =
    "{\"name\":\"mlp \\\"v2\\\"\",\"id\":-4,\"hash\":18446744073709551615,\"ok\":true,"
    "\"ratio\":0.25,\"bytes\":98304,\"none\":null,\"rows\":[\n"
    "\n  {\"i\":0,\"empty\":{},\"list\":[]},"
    "\n  {\"i\":1,\"empty\":{},\"list\":[0]},"
    "\n  {\"i\":2,\"empty\":{},\"list\":[0,1]}\n]}";

static void test_cm_json_put_key_separators(void **state)
{
    (void)state;
    cm_buf b;
    cm_buf_init(&b);
    write_doc(&b);
    assert_false(b.oom);
    assert_string_equal(b.data, doc_want);
    json_error_t je;
    /* jansson's integers are int64: the u64 member reads as a real */
    json_t *j = json_loadb(b.data, b.len, JSON_DECODE_INT_AS_REAL, &je);
    if (j == NULL) {
        fprintf(stderr, "jansson: %s\n", je.text);
    }
    assert_non_null(j);
    json_decref(j);
    /* an empty buffer needs no separator */
    cm_buf_reset(&b);
    cm_json_put_sep(&b);
    cm_json_put_key(&b, "k");
    assert_string_equal(b.data, "\"k\":");
    cm_buf_fini(&b);
}

static void test_cm_json_oom(void **state)
{
    (void)state;
    for (long n = 0;; n++) {
        cm_buf b;
        cm_buf_init(&b);
        cm_alloc_fail_after(n);
        write_doc(&b);
        char big[3000];
        memset(big, 'x', sizeof big);
        cm_json_put_str(&b, big, sizeof big);
        cm_json_put_str(&b, "\x01\x80", 2);
        cm_alloc_fail_after(-1);
        if (!b.oom) {
            assert_memory_equal(b.data, doc_want, sizeof doc_want - 1);
            cm_buf_fini(&b);
            break;
        }
        cm_buf_fini(&b);
        assert_true(n < 100);
    }
}

/* ---- hash map ------------------------------------------------------------ */

static void test_cm_hash_functions(void **state)
{
    (void)state;
    assert_true(cm_hash_bytes("abc", 3) == cm_hash_bytes("abc", 3));
    assert_true(cm_hash_bytes("abc", 3) != cm_hash_bytes("abd", 3));
    assert_true(cm_hash_bytes("", 0) != cm_hash_bytes("\0", 1));
    assert_true(cm_hash_u64(0) == 0);
    int x, y;
    assert_true(cm_hash_ptr(&x) != 0);
    assert_true(cm_hash_ptr(&x) != cm_hash_ptr(&y));
    assert_true(cm_hash_combine(cm_hash_combine(0, 1), 2) !=
                cm_hash_combine(cm_hash_combine(0, 2), 1));
    assert_true(cm_hash_combine(cm_hash_combine(0, 5), 5) != 0);
    /* low bits spread: 1024 consecutive keys fill most of 1024 buckets */
    bool used[1024] = {false};
    size_t n_used = 0;
    for (int i = 0; i < 1024; i++) {
        char k[16];
        int len = snprintf(k, sizeof k, "v%d", i);
        size_t j = (size_t)cm_hash_bytes(k, (size_t)len) & 1023u;
        n_used += !used[j];
        used[j] = true;
    }
    assert_true(n_used > 600);
}

/* Entries are indices into a caller array of names, as an intern table. */
typedef struct names {
    char text[2000][12];
} names;

typedef struct name_key {
    const names *tab;
    const char *s;
} name_key;

static bool name_eq(const void *entry, const void *key)
{
    const uint32_t *id = entry;
    const name_key *k = key;
    return strcmp(k->tab->text[*id], k->s) == 0;
}

static uint64_t name_hash(const char *s)
{
    return cm_hash_bytes(s, strlen(s));
}

static void test_cm_map_intern_grow_and_find(void **state)
{
    (void)state;
    static names tab;
    cm_map m;
    cm_map_init(&m, sizeof(uint32_t));
    assert_null(cm_map_find(&m, 1, NULL, NULL));
    for (uint32_t i = 0; i < 2000; i++) {
        snprintf(tab.text[i], sizeof tab.text[i], "n%u", i);
        name_key k = {&tab, tab.text[i]};
        void *e;
        bool found;
        assert_int_equal(cm_map_find_or_insert(&m, name_hash(k.s), name_eq, &k, &e, &found, NULL),
                         CM_OK);
        assert_false(found);
        *(uint32_t *)e = i;
    }
    assert_int_equal(m.n, 2000);
    assert_int_equal(m.cap, 4096);
    for (uint32_t i = 0; i < 2000; i++) {
        name_key k = {&tab, tab.text[i]};
        uint32_t *e = cm_map_find(&m, name_hash(k.s), name_eq, &k);
        assert_non_null(e);
        assert_int_equal(*e, i);
        void *again;
        bool found;
        assert_int_equal(
            cm_map_find_or_insert(&m, name_hash(k.s), name_eq, &k, &again, &found, NULL), CM_OK);
        assert_true(found);
        assert_ptr_equal(again, e);
    }
    name_key miss = {&tab, "absent"};
    assert_null(cm_map_find(&m, name_hash(miss.s), name_eq, &miss));
    assert_int_equal(m.n, 2000);
    cm_map_fini(&m);
}

/* Pointer identity with no equality callback, entries carrying a value. */
typedef struct ptr_val {
    const void *key;
    int val;
} ptr_val;

static void test_cm_map_pointer_keys_without_eq(void **state)
{
    (void)state;
    static int objs[500];
    cm_map m;
    cm_map_init(&m, sizeof(ptr_val));
    assert_int_equal(m.stride, 24);
    for (int i = 0; i < 500; i++) {
        void *e;
        assert_int_equal(cm_map_insert(&m, cm_hash_ptr(&objs[i]), &e, NULL), CM_OK);
        assert_null(((ptr_val *)e)->key); /* zero-filled */
        *(ptr_val *)e = (ptr_val){&objs[i], i * 2};
    }
    for (int i = 0; i < 500; i++) {
        ptr_val *e = cm_map_find(&m, cm_hash_ptr(&objs[i]), NULL, NULL);
        assert_non_null(e);
        assert_ptr_equal(e->key, &objs[i]);
        assert_int_equal(e->val, i * 2);
    }
    cm_map_fini(&m);
}

/* Every entry has the same hash (and one has hash 0): eq alone tells them
 * apart, and removal keeps the run intact. */
static bool int_eq(const void *entry, const void *key)
{
    return *(const int *)entry == *(const int *)key;
}

static void test_cm_map_collisions_and_zero_hash(void **state)
{
    (void)state;
    cm_map m;
    cm_map_init(&m, sizeof(int));
    for (int i = 0; i < 40; i++) {
        void *e;
        assert_int_equal(cm_map_insert(&m, i == 39 ? 0 : 5, &e, NULL), CM_OK);
        *(int *)e = i;
    }
    for (int i = 0; i < 40; i++) {
        int *e = cm_map_find(&m, i == 39 ? 0 : 5, int_eq, &i);
        assert_non_null(e);
        assert_int_equal(*e, i);
    }
    int gone = 10;
    cm_map_remove(&m, cm_map_find(&m, 5, int_eq, &gone));
    assert_null(cm_map_find(&m, 5, int_eq, &gone));
    for (int i = 0; i < 40; i++) {
        if (i != gone) {
            assert_non_null(cm_map_find(&m, i == 39 ? 0 : 5, int_eq, &i));
        }
    }
    assert_int_equal(m.n, 39);
    cm_map_fini(&m);
}

static void test_cm_map_remove_and_iterate(void **state)
{
    (void)state;
    enum { N = 3000 };
    static bool present[N];
    cm_map m;
    cm_map_init(&m, sizeof(uint64_t));
    for (uint64_t i = 1; i < N; i++) {
        void *e;
        assert_int_equal(cm_map_insert(&m, cm_hash_u64(i), &e, NULL), CM_OK);
        *(uint64_t *)e = i;
        present[i] = true;
    }
    /* remove a pseudo-random two thirds, checking the rest after each batch */
    uint64_t seed = 3;
    size_t n = N - 1;
    for (int round = 0; round < 2000; round++) {
        uint64_t k = 1 + rng_next(&seed) % (N - 1);
        uint64_t *e = cm_map_find(&m, cm_hash_u64(k), NULL, NULL);
        assert_int_equal(e != NULL, present[k]);
        if (e != NULL) {
            assert_true(*e == k);
            cm_map_remove(&m, e);
            present[k] = false;
            n--;
        }
        if (round % 250 == 0) {
            for (uint64_t i = 1; i < N; i++) {
                assert_int_equal(cm_map_find(&m, cm_hash_u64(i), NULL, NULL) != NULL, present[i]);
            }
        }
    }
    assert_int_equal(m.n, n);
    size_t pos = 0, seen = 0;
    for (uint64_t *e; (e = cm_map_next(&m, &pos)) != NULL;) {
        assert_true(present[*e]);
        seen++;
    }
    assert_int_equal(seen, n);
    cm_map_clear(&m);
    assert_int_equal(m.n, 0);
    pos = 0;
    assert_null(cm_map_next(&m, &pos));
    assert_null(cm_map_find(&m, cm_hash_u64(1), NULL, NULL));
    cm_map_fini(&m);
}

static void test_cm_map_reserve(void **state)
{
    (void)state;
    cm_map m;
    cm_map_init(&m, 1);
    assert_int_equal(cm_map_reserve(&m, 0, NULL), CM_OK);
    assert_null(m.slots);
    assert_int_equal(cm_map_reserve(&m, 100, NULL), CM_OK);
    assert_int_equal(m.cap, 256);
    unsigned char *slots = m.slots;
    cm_alloc_fail_after(0); /* inserting up to the reservation does not allocate */
    for (int i = 1; i <= 100; i++) {
        void *e;
        assert_int_equal(cm_map_insert(&m, cm_hash_u64((uint64_t)i), &e, NULL), CM_OK);
    }
    cm_alloc_fail_after(-1);
    assert_ptr_equal(m.slots, slots);
    cm_error err;
    cm_error_clear(&err);
    assert_int_equal(cm_map_reserve(&m, SIZE_MAX / 2, &err), CM_ENOMEM);
    assert_int_equal(err.code, CM_ENOMEM);
    assert_int_equal(m.n, 100);
    assert_int_equal(cm_map_reserve(&m, 10, NULL), CM_OK); /* never shrinks */
    assert_int_equal(m.cap, 256);
    cm_alloc_fail_after(0);
    assert_int_equal(cm_map_reserve(&m, 1000, NULL), CM_ENOMEM);
    cm_alloc_fail_after(-1);
    assert_int_equal(m.cap, 256);
    assert_ptr_equal(m.slots, slots);
    assert_non_null(cm_map_find(&m, cm_hash_u64(7), NULL, NULL));
    cm_map_fini(&m);
}

/* Fills a map through every failure point: a failed insert leaves the map
 * exactly as it was, and the loop frees everything (ASan checks). */
static void test_cm_map_oom(void **state)
{
    (void)state;
    for (long n = 0;; n++) {
        cm_map m;
        cm_map_init(&m, sizeof(uint64_t));
        cm_error err;
        cm_error_clear(&err);
        cm_status st = CM_OK;
        uint64_t i;
        cm_alloc_fail_after(n);
        for (i = 1; i <= 300 && st == CM_OK; i++) {
            size_t before_n = m.n, before_cap = m.cap;
            void *e = &e;
            bool found = true;
            st = cm_map_find_or_insert(&m, cm_hash_u64(i), NULL, NULL, &e, &found, &err);
            if (st != CM_OK) {
                assert_int_equal(st, CM_ENOMEM);
                assert_int_equal(err.code, CM_ENOMEM);
                assert_null(e);
                assert_false(found);
                assert_int_equal(m.n, before_n);
                assert_int_equal(m.cap, before_cap);
                break;
            }
            *(uint64_t *)e = i;
        }
        cm_alloc_fail_after(-1);
        for (uint64_t k = 1; k < i; k++) {
            uint64_t *e = cm_map_find(&m, cm_hash_u64(k), NULL, NULL);
            assert_non_null(e);
            assert_true(*e == k);
        }
        cm_map_fini(&m);
        if (st == CM_OK) {
            break;
        }
        assert_true(n < 100);
    }
    /* cm_map_insert fails the same way */
    cm_map m;
    cm_map_init(&m, 8);
    void *e = &e;
    cm_alloc_fail_after(0);
    assert_int_equal(cm_map_insert(&m, 1, &e, NULL), CM_ENOMEM);
    cm_alloc_fail_after(-1);
    assert_null(e);
    assert_int_equal(m.n, 0);
    assert_null(m.slots);
    cm_map_fini(&m);
}

/* ---- streaming buffers ---------------------------------------------------- */

typedef struct sink_rec {
    cm_buf got;      /* everything the sink received, in order */
    size_t calls;
    size_t max_run;  /* the longest run handed over at once */
    size_t fail_after; /* refuse once this many bytes arrived (0: never) */
} sink_rec;

static bool rec_sink(void *ctx, const char *data, size_t len)
{
    sink_rec *r = ctx;
    if (r->fail_after != 0 && r->got.len + len > r->fail_after) {
        return false;
    }
    r->calls++;
    r->max_run = len > r->max_run ? len : r->max_run;
    cm_buf_append(&r->got, data, len);
    return true;
}

/* A streaming buffer hands its bytes on in order and in runs no longer than
 * its chunk (or one append), holds at most about a chunk, and its total
 * counts every byte; what arrives equals what an ordinary buffer holds. */
static void test_cm_buf_sink_streams(void **state)
{
    (void)state;
    sink_rec r;
    memset(&r, 0, sizeof r);
    cm_buf_init(&r.got);
    cm_buf plain, b;
    cm_buf_init(&plain);
    cm_buf_init_sink(&b, rec_sink, &r);
    char big[3 * 65536];
    memset(big, 'x', sizeof big);
    for (int i = 0; i < 20000; i++) {
        cm_buf_printf(&b, "{\"i\":%d},", i);
        cm_buf_printf(&plain, "{\"i\":%d},", i);
        assert_true(b.cap <= 2 * CM_BUF_SINK_CHUNK);
        if (i == 777) {
            cm_buf_append(&b, big, sizeof big); /* larger than a chunk: one run */
            cm_buf_append(&plain, big, sizeof big);
        }
    }
    assert_int_equal(cm_buf_total(&b), plain.len);
    assert_true(cm_buf_flush(&b));
    assert_int_equal(b.len, 0);
    assert_int_equal(cm_buf_total(&b), plain.len);
    assert_int_equal(r.got.len, plain.len);
    assert_memory_equal(r.got.data, plain.data, plain.len);
    assert_true(r.calls > 4);
    assert_true(r.max_run <= sizeof big);
    assert_true(cm_buf_flush(&b)); /* nothing held: nothing to do */
    cm_buf_fini(&b);
    cm_buf_fini(&plain);
    cm_buf_fini(&r.got);
}

/* A sink that refuses marks the buffer failed (sink_failed and oom), after
 * which appends are ignored and flush says false. */
static void test_cm_buf_sink_failure(void **state)
{
    (void)state;
    sink_rec r;
    memset(&r, 0, sizeof r);
    cm_buf_init(&r.got);
    r.fail_after = 100000;
    cm_buf b;
    cm_buf_init_sink(&b, rec_sink, &r);
    for (int i = 0; i < 50000; i++) {
        cm_buf_puts(&b, "0123456789");
    }
    assert_true(b.oom);
    assert_true(b.sink_failed);
    assert_false(cm_buf_flush(&b));
    assert_true(r.got.len <= r.fail_after);
    cm_buf_fini(&b);
    cm_buf_fini(&r.got);
}

/* ---- SHA-256 ---------------------------------------------------------------------------------- */

/* FIPS 180-4's examples and the million 'a's, in one call and fed in
 * uneven pieces, with the processor's SHA extensions (when it has them)
 * and portably: both give the published digests. */
static void check_sha_vectors(void)
{
    static const struct {
        const char *msg;
        size_t repeat;
        const char *hex;
    } v[] = {
        {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", 1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"a", 1000000, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        size_t ml = strlen(v[i].msg), n = ml * v[i].repeat;
        char *buf = malloc(n + 1);
        assert_non_null(buf);
        for (size_t r = 0; r < v[i].repeat; r++) {
            memcpy(buf + r * ml, v[i].msg, ml);
        }
        char hex[2 * CM_SHA256_LEN + 1];
        cm_sha256_hex(buf, n, hex);
        assert_string_equal(hex, v[i].hex);
        /* pieces of 1, 63, 64, 65, 200, ... bytes */
        static const size_t piece[] = {1, 63, 64, 65, 200, 7, 4096};
        cm_sha256 c;
        cm_sha256_init(&c);
        size_t at = 0;
        for (size_t k = 0; at < n; k++) {
            size_t take = piece[k % 7] < n - at ? piece[k % 7] : n - at;
            cm_sha256_update(&c, buf + at, take);
            at += take;
        }
        uint8_t d[CM_SHA256_LEN];
        cm_sha256_final(&c, d);
        cm_sha256_to_hex(d, hex);
        assert_string_equal(hex, v[i].hex);
        free(buf);
    }
}

static void test_cm_sha256_vectors(void **state)
{
    (void)state;
    bool accel = cm_sha256_accelerated();
    print_message("SHA extensions: %s\n", accel ? "used" : "absent");
    check_sha_vectors();
    cm_sha256_set_portable_only(true);
    assert_false(cm_sha256_accelerated());
    check_sha_vectors();
    cm_sha256_set_portable_only(false);
    assert_int_equal(cm_sha256_accelerated(), accel);
}

/* Random lengths hash alike with and without the SHA extensions. */
static void test_cm_sha256_paths_agree(void **state)
{
    (void)state;
    enum { N = 5000 };
    unsigned char *buf = malloc(N);
    assert_non_null(buf);
    uint32_t x = 12345;
    for (size_t i = 0; i < N; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 16);
    }
    for (size_t len = 0; len < N; len += 1 + len / 3) {
        char a[2 * CM_SHA256_LEN + 1], b[2 * CM_SHA256_LEN + 1];
        cm_sha256_hex(buf, len, a);
        cm_sha256_set_portable_only(true);
        cm_sha256_hex(buf, len, b);
        cm_sha256_set_portable_only(false);
        assert_string_equal(a, b);
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cm_error_oom_sets_code_and_message),
        cmocka_unit_test(test_cm_error_oom_first_error_wins),
        cmocka_unit_test(test_cm_error_wrap_keeps_code_and_path),
        cmocka_unit_test(test_cm_error_wrap_first_error_wins),
        cmocka_unit_test(test_cm_error_wrap_without_inner_error_is_internal),
        cmocka_unit_test(test_cm_error_wrap_empty_parts_and_truncation),
        cmocka_unit_test(test_cm_alloc_fail_after_fails_exactly_one),
        cmocka_unit_test(test_cm_alloc_fail_after_across_threads),
        cmocka_unit_test(test_cm_grow_doubles_from_16),
        cmocka_unit_test(test_cm_grow_rejects_overflow),
        cmocka_unit_test(test_cm_grow_oom_leaves_array_unchanged),
        cmocka_unit_test(test_cm_grow_u32_keeps_none_free),
        cmocka_unit_test(test_cm_json_put_str_escapes_rfc8259_minimum),
        cmocka_unit_test(test_cm_json_put_str_passes_utf8),
        cmocka_unit_test(test_cm_json_put_str_replaces_invalid_utf8),
        cmocka_unit_test(test_cm_json_put_str_output_always_parses),
        cmocka_unit_test(test_cm_json_put_str_word_boundaries),
        cmocka_unit_test(test_cm_json_put_cstr_null),
        cmocka_unit_test(test_cm_json_put_integers),
        cmocka_unit_test(test_cm_json_put_f64_round_trips),
        cmocka_unit_test(test_cm_json_put_num_matches_cost_writer),
        cmocka_unit_test(test_cm_json_put_g_fixed_precision),
        cmocka_unit_test(test_cm_json_put_key_separators),
        cmocka_unit_test(test_cm_json_oom),
        cmocka_unit_test(test_cm_hash_functions),
        cmocka_unit_test(test_cm_map_intern_grow_and_find),
        cmocka_unit_test(test_cm_map_pointer_keys_without_eq),
        cmocka_unit_test(test_cm_map_collisions_and_zero_hash),
        cmocka_unit_test(test_cm_map_remove_and_iterate),
        cmocka_unit_test(test_cm_map_reserve),
        cmocka_unit_test(test_cm_map_oom),
        cmocka_unit_test(test_cm_buf_sink_streams),
        cmocka_unit_test(test_cm_buf_sink_failure),
        cmocka_unit_test(test_cm_sha256_vectors),
        cmocka_unit_test(test_cm_sha256_paths_agree),
    };
    return cmocka_run_group_tests_name("cm", tests, NULL, NULL);
}
