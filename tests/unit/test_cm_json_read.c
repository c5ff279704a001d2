/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for the JSON reader (common/cm_json_read.c): every kind of
 * value, each rejection with its line and column, int64 edges, escapes and
 * surrogate pairs, deep nesting, big objects (index lookups, duplicates),
 * the compact writer of a read value, and an OOM loop without leaks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cm.h"
#include "cm_json.h"
#include "tu_oom.h"

static cm_json_doc *read_ok(const char *text)
{
    cm_json_doc *d = NULL;
    cm_json_read_error e;
    cm_status st = cm_json_read(text, strlen(text), &d, &e);
    if (st != CM_OK) {
        print_error("unexpected error at %zu:%zu: %s\n", e.line, e.column, e.msg);
    }
    assert_int_equal(st, CM_OK);
    assert_non_null(d);
    return d;
}

/* Reads n bytes expecting CM_EINVAL at line:col with msg containing want. */
static void expect_bad_n(const char *text, size_t n, size_t line, size_t col, const char *want)
{
    cm_json_doc *d = (cm_json_doc *)(uintptr_t)1;
    cm_json_read_error e;
    cm_status st = cm_json_read(text, n, &d, &e);
    if (st != CM_EINVAL || e.line != line || e.column != col || strstr(e.msg, want) == NULL) {
        print_error("input %.*s: got %d at %zu:%zu \"%s\", want %zu:%zu \"%s\"\n", (int)n, text,
                    (int)st, e.line, e.column, e.msg, line, col, want);
    }
    assert_int_equal(st, CM_EINVAL);
    assert_null(d);
    assert_int_equal(e.code, CM_EINVAL);
    assert_int_equal(e.line, line);
    assert_int_equal(e.column, col);
    assert_non_null(strstr(e.msg, want));
}

static void expect_bad(const char *text, size_t line, size_t col, const char *want)
{
    expect_bad_n(text, strlen(text), line, col, want);
}

static void test_cm_json_read_every_kind(void **state)
{
    (void)state;
    cm_json_doc *d =
        read_ok(" {\"n\": null, \"t\": true, \"f\": false, \"i\": -42, \"r\": 2.5e3,"
                " \"s\": \"h\\u00e9llo\", \"a\": [1, [], {}], \"o\": {\"k\": \"v\"}} \n");
    const cm_json *r = cm_json_doc_root(d);
    assert_true(cm_json_is_object(r));
    assert_int_equal(cm_json_size(r), 8);
    assert_true(cm_json_is_null(cm_json_get(r, "n")));
    assert_true(cm_json_is_true(cm_json_get(r, "t")));
    assert_true(cm_json_is_bool(cm_json_get(r, "f")));
    assert_false(cm_json_is_true(cm_json_get(r, "f")));
    assert_int_equal(cm_json_kind_of(cm_json_get(r, "f")), CM_JSON_FALSE);
    assert_true(cm_json_is_int(cm_json_get(r, "i")));
    assert_true(cm_json_int(cm_json_get(r, "i")) == -42);
    assert_true(cm_json_is_real(cm_json_get(r, "r")));
    assert_true(cm_json_real(cm_json_get(r, "r")) == 2500.0);
    assert_true(cm_json_real(cm_json_get(r, "i")) == -42.0);
    assert_string_equal(cm_json_str(cm_json_get(r, "s")), "h\xc3\xa9llo");
    assert_int_equal(cm_json_str_len(cm_json_get(r, "s")), 6);
    const cm_json *a = cm_json_get(r, "a");
    assert_int_equal(cm_json_size(a), 3);
    assert_true(cm_json_int(cm_json_at(a, 0)) == 1);
    assert_true(cm_json_is_array(cm_json_at(a, 1)));
    assert_int_equal(cm_json_size(cm_json_at(a, 1)), 0);
    assert_true(cm_json_is_object(cm_json_at(a, 2)));
    assert_null(cm_json_at(a, 3));
    assert_string_equal(cm_json_str(cm_json_get(cm_json_get(r, "o"), "k")), "v");
    /* document order, keys and values */
    size_t kl = 0;
    assert_string_equal(cm_json_key_at(r, 0, &kl), "n");
    assert_int_equal(kl, 1);
    assert_string_equal(cm_json_key_at(r, 7, NULL), "o");
    assert_true(cm_json_is_object(cm_json_val_at(r, 7)));
    assert_null(cm_json_key_at(r, 8, NULL));
    assert_null(cm_json_val_at(r, 8));
    /* wrong kinds and NULL are harmless */
    assert_null(cm_json_get(r, "missing"));
    assert_null(cm_json_get(a, "n"));
    assert_null(cm_json_at(r, 0));
    assert_null(cm_json_get(NULL, "n"));
    assert_null(cm_json_str(cm_json_get(r, "i")));
    assert_int_equal(cm_json_str_len(NULL), 0);
    assert_int_equal(cm_json_size(cm_json_get(r, "s")), 0);
    assert_true(cm_json_int(cm_json_get(r, "s")) == 0);
    assert_false(cm_json_is_null(NULL));
    assert_true(cm_json_doc_bytes(d) > 0);
    cm_json_doc_destroy(d);
    cm_json_doc_destroy(NULL);
}

static void test_cm_json_read_scalar_roots(void **state)
{
    (void)state;
    const char *roots[] = {"0", "-0", "\"x\"", "null", "true", "false", " 1.5 ", "[]", "{}"};
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++) {
        cm_json_doc_destroy(read_ok(roots[i]));
    }
    cm_json_doc *d = read_ok("-0");
    assert_true(cm_json_is_int(cm_json_doc_root(d)));
    assert_true(cm_json_int(cm_json_doc_root(d)) == 0);
    cm_json_doc_destroy(d);
}

static void test_cm_json_read_int64_edges(void **state)
{
    (void)state;
    cm_json_doc *d = read_ok("[9223372036854775807, -9223372036854775808, 1e2, 1E-2, 0.0, -0.5,"
                             " 12345678901234567890.0, 1e-400]");
    const cm_json *r = cm_json_doc_root(d);
    assert_true(cm_json_int(cm_json_at(r, 0)) == INT64_MAX);
    assert_true(cm_json_int(cm_json_at(r, 1)) == INT64_MIN);
    assert_true(cm_json_is_real(cm_json_at(r, 2)));
    assert_true(cm_json_real(cm_json_at(r, 2)) == 100.0);
    assert_true(cm_json_real(cm_json_at(r, 3)) == 0.01);
    assert_true(cm_json_is_real(cm_json_at(r, 4)));
    assert_true(cm_json_real(cm_json_at(r, 5)) == -0.5);
    assert_true(cm_json_real(cm_json_at(r, 6)) == 12345678901234567890.0);
    assert_true(cm_json_real(cm_json_at(r, 7)) == 0.0); /* underflow is a real */
    cm_json_doc_destroy(d);
    expect_bad("[9223372036854775808]", 1, 2, "int64");
    expect_bad("[-9223372036854775809]", 1, 2, "int64");
    expect_bad("[1, 99999999999999999999999]", 1, 5, "int64");
    expect_bad("[1e400]", 1, 2, "real number out of range");
    expect_bad("[-1e400]", 1, 2, "real number out of range");
}

static void test_cm_json_read_number_grammar(void **state)
{
    (void)state;
    expect_bad("[01]", 1, 2, "leading zero");
    expect_bad("[-01]", 1, 3, "leading zero");
    expect_bad("[-]", 1, 3, "digit expected");
    expect_bad("[1.]", 1, 4, "after '.'");
    expect_bad("[.5]", 1, 2, "expected a value");
    expect_bad("[1e]", 1, 4, "exponent");
    expect_bad("[1e+]", 1, 5, "exponent");
    expect_bad("[+1]", 1, 2, "expected a value");
    expect_bad("[1 2]", 1, 4, "expected ',' or ']'");
    expect_bad("[0x10]", 1, 3, "expected ',' or ']'");
    expect_bad("[NaN]", 1, 2, "expected a value");
    expect_bad("[Infinity]", 1, 2, "expected a value");
    expect_bad("-", 1, 2, "unexpected end of input");
}

static void test_cm_json_read_structure_errors(void **state)
{
    (void)state;
    expect_bad("", 1, 1, "unexpected end of input");
    expect_bad("   \n  ", 2, 3, "unexpected end of input");
    expect_bad("{\"a\": 1", 1, 8, "unexpected end of input");
    expect_bad("{\"a\": 1]", 1, 8, "expected ',' or '}'");
    expect_bad("[1}", 1, 3, "expected ',' or ']'");
    expect_bad("{\"a\" 1}", 1, 6, "expected ':'");
    expect_bad("{1: 2}", 1, 2, "expected a string key");
    expect_bad("{\"a\": 1,}", 1, 9, "expected a string key");
    expect_bad("[1,]", 1, 4, "trailing comma");
    expect_bad("[1]x", 1, 4, "trailing characters");
    expect_bad("{}\n\n {}", 3, 2, "trailing characters");
    expect_bad("[tru]", 1, 2, "invalid literal");
    expect_bad("[nul", 1, 2, "invalid literal");
    expect_bad("[falsey]", 1, 7, "expected ',' or ']'");
    expect_bad("\xef\xbb\xbf{}", 1, 1, "expected a value"); /* no BOM */
    expect_bad("[\f1]", 1, 2, "expected a value");          /* only 4 whitespace bytes */
    expect_bad_n("[1,\0 2]", 7, 1, 4, "expected a value");
    /* line and column over several lines */
    expect_bad("{\n  \"a\": [1,\n        2,\n        @]}", 4, 9, "expected a value");
    expect_bad("{\r\n\"a\":\r\n  ?}", 3, 3, "expected a value");
}

static void test_cm_json_read_strings_and_escapes(void **state)
{
    (void)state;
    cm_json_doc *d =
        read_ok("[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\", \"\\u0041\\u00e9\\u20ac\","
                " \"\\ud83d\\ude00\", \"\\uD834\\uDD1E\", \"\xf0\x9f\x98\x80\xe2\x82\xac\","
                " \"\", \"\x7f\", \"\\u0001\"]");
    const cm_json *r = cm_json_doc_root(d);
    assert_string_equal(cm_json_str(cm_json_at(r, 0)), "\"\\/\b\f\n\r\t");
    assert_int_equal(cm_json_str_len(cm_json_at(r, 0)), 8);
    assert_string_equal(cm_json_str(cm_json_at(r, 1)), "A\xc3\xa9\xe2\x82\xac");
    assert_string_equal(cm_json_str(cm_json_at(r, 2)), "\xf0\x9f\x98\x80");
    assert_string_equal(cm_json_str(cm_json_at(r, 3)), "\xf0\x9d\x84\x9e");
    assert_string_equal(cm_json_str(cm_json_at(r, 4)), "\xf0\x9f\x98\x80\xe2\x82\xac");
    assert_string_equal(cm_json_str(cm_json_at(r, 5)), "");
    assert_string_equal(cm_json_str(cm_json_at(r, 6)), "\x7f");
    assert_string_equal(cm_json_str(cm_json_at(r, 7)), "\x01");
    cm_json_doc_destroy(d);

    expect_bad("[\"a\nb\"]", 1, 4, "control character");
    expect_bad("[\"a\tb\"]", 1, 4, "control character");
    expect_bad_n("[\"a\0b\"]", 7, 1, 4, "control character");
    expect_bad("[\"\\x\"]", 1, 3, "invalid escape");
    expect_bad("[\"\\'\"]", 1, 3, "invalid escape");
    expect_bad("[\"\\u12g4\"]", 1, 3, "\\u escape");
    expect_bad("[\"\\u0000\"]", 1, 3, "\\u0000 is not allowed");
    expect_bad("[\"x\\udc00\"]", 1, 4, "lone low surrogate");
    expect_bad("[\"\\ud800\"]", 1, 3, "high surrogate");
    expect_bad("[\"\\ud800x\\udc00\"]", 1, 3, "high surrogate");
    expect_bad("[\"\\ud800\\u0041\"]", 1, 3, "high surrogate");
    expect_bad("[\"\\ud800\\ud800\"]", 1, 3, "high surrogate");
    expect_bad("[\"abc", 1, 6, "unexpected end of input");
    expect_bad("[\"abc\\", 1, 7, "unexpected end of input");
    expect_bad("[\"\\u12", 1, 7, "unexpected end of input");
    /* UTF-8: overlong, surrogates, above U+10FFFF, stray and cut-off bytes */
    expect_bad("[\"\xc0\xaf\"]", 1, 3, "invalid UTF-8");
    expect_bad("[\"\xc1\xbf\"]", 1, 3, "invalid UTF-8");
    expect_bad("[\"\xe0\x9f\xbf\"]", 1, 3, "invalid UTF-8");
    expect_bad("[\"\xf0\x8f\xbf\xbf\"]", 1, 3, "invalid UTF-8");
    expect_bad("[\"ab\xed\xa0\x80\"]", 1, 5, "invalid UTF-8");
    expect_bad("[\"\xf4\x90\x80\x80\"]", 1, 3, "invalid UTF-8");
    expect_bad("[\"\xf5\x80\x80\x80\"]", 1, 3, "invalid UTF-8");
    expect_bad("[\"\x80\"]", 1, 3, "invalid UTF-8");
    expect_bad("[\"\xe2\x82\"]", 1, 3, "invalid UTF-8");
    expect_bad_n("[\"\xe2\x82", 4, 1, 3, "invalid UTF-8");
    expect_bad("[\"\xff\"]", 1, 3, "invalid UTF-8");
    /* the edges that are valid */
    d = read_ok("[\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xed\x9f\xbf\xee\x80\x80\xf0\x90\x80\x80"
                "\xf4\x8f\xbf\xbf\"]");
    assert_int_equal(cm_json_str_len(cm_json_at(cm_json_doc_root(d), 0)), 21);
    cm_json_doc_destroy(d);
}

static void test_cm_json_read_duplicate_keys(void **state)
{
    (void)state;
    expect_bad("{\"inputs\": [], \"inputs\": []}", 1, 16, "duplicate key \"inputs\"");
    /* compared unescaped */
    expect_bad("{\"a\": 1, \"\\u0061\": 2}", 1, 10, "duplicate key \"a\"");
    /* the message escapes what it quotes and cuts long keys */
    expect_bad("{\"a\\nb\\\"\": 1, \"a\\nb\\\"\": 2}", 1, 15, "duplicate key \"a\\u000ab\\\"\"");
    expect_bad("{\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": 1,"
               " \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\": 2}",
               1, 59, "duplicate key \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\"");
    /* distinct keys of one length and keys that are prefixes are fine */
    cm_json_doc_destroy(read_ok("{\"ab\": 1, \"ba\": 2, \"a\": 3, \"abc\": 4}"));
    /* same key in different objects is fine */
    cm_json_doc_destroy(read_ok("[{\"a\": 1}, {\"a\": 2, \"b\": {\"a\": 3}}]"));
}

/* An object of n keys "k0".."k<n-1>" with value i, optionally repeating
 * key dup_of at the end. */
static char *big_object(size_t n, long dup_of)
{
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_putc(&b, '{');
    for (size_t i = 0; i < n; i++) {
        cm_buf_printf(&b, "%s\"k%zu\": %zu", i ? ", " : "", i, i);
    }
    if (dup_of >= 0) {
        cm_buf_printf(&b, ", \"k%ld\": 0", dup_of);
    }
    cm_buf_putc(&b, '}');
    assert_false(b.oom);
    return cm_buf_take(&b);
}

static void test_cm_json_read_big_object_lookups(void **state)
{
    (void)state;
    size_t n = 100000;
    char *t = big_object(n, -1);
    cm_json_doc *d = read_ok(t);
    const cm_json *r = cm_json_doc_root(d);
    assert_int_equal(cm_json_size(r), n);
    char key[32];
    /* many lookups stay cheap: each is a binary search */
    for (int round = 0; round < 10; round++) {
        for (size_t i = 0; i < n; i += 7) {
            snprintf(key, sizeof key, "k%zu", i);
            assert_true(cm_json_int(cm_json_get(r, key)) == (int64_t)i);
        }
    }
    assert_null(cm_json_get(r, "k100000"));
    assert_null(cm_json_get(r, "k"));
    assert_null(cm_json_get(r, ""));
    assert_null(cm_json_getn(r, "k1\0", 3));
    assert_string_equal(cm_json_key_at(r, 12345, NULL), "k12345");
    cm_json_doc_destroy(d);
    free(t);

    /* objects just above and below the indexed size */
    for (size_t m = 1; m < 20; m++) {
        t = big_object(m, -1);
        d = read_ok(t);
        for (size_t i = 0; i < m; i++) {
            snprintf(key, sizeof key, "k%zu", i);
            assert_true(cm_json_int(cm_json_get(cm_json_doc_root(d), key)) == (int64_t)i);
        }
        assert_null(cm_json_get(cm_json_doc_root(d), "k99"));
        cm_json_doc_destroy(d);
        free(t);
        if (m > 1) {
            t = big_object(m, (long)m / 2);
            size_t col = strlen(t) - strlen(", \"k0\": 0}") + 3 - (m / 2 >= 10 ? 1 : 0);
            char want[32];
            snprintf(want, sizeof want, "duplicate key \"k%zu\"", m / 2);
            expect_bad(t, 1, col, want);
            free(t);
        }
    }
    /* a duplicate deep inside a big object is found, and reported where it is */
    t = big_object(5000, 17);
    char want[32];
    snprintf(want, sizeof want, "duplicate key \"k17\"");
    expect_bad(t, 1, strlen(t) - strlen("\"k17\": 0}") + 1, want);
    free(t);
}

static void test_cm_json_read_deep_nesting(void **state)
{
    (void)state;
    size_t n = CM_JSON_MAX_DEPTH;
    char *t = malloc(2 * n + 64);
    assert_non_null(t);
    /* exactly the limit: fine */
    memset(t, '[', n);
    memset(t + n, ']', n);
    t[2 * n] = '\0';
    cm_json_doc *d = read_ok(t);
    const cm_json *v = cm_json_doc_root(d);
    for (size_t i = 1; i < n; i++) {
        v = cm_json_at(v, 0);
    }
    assert_true(cm_json_is_array(v));
    assert_int_equal(cm_json_size(v), 0);
    cm_json_doc_destroy(d);
    /* one deeper: an error at the opening bracket too many */
    memset(t, '[', n + 1);
    memset(t + n + 1, ']', n + 1);
    t[2 * n + 2] = '\0';
    expect_bad(t, 1, n + 1, "nesting deeper than 512");
    /* objects count too, mixed with arrays */
    cm_buf b;
    cm_buf_init(&b);
    for (size_t i = 0; i < n + 1; i++) {
        cm_buf_puts(&b, i % 2 ? "[" : "{\"a\":");
    }
    expect_bad(b.data, 1, 1 + (n / 2) * 6, "nesting deeper");
    cm_buf_fini(&b);
    /* a very deep document is refused without recursion (no stack overflow) */
    size_t big = 1000000;
    char *deep = malloc(big);
    assert_non_null(deep);
    memset(deep, '[', big);
    expect_bad_n(deep, big, 1, n + 1, "nesting deeper");
    free(deep);
    free(t);
}

static void test_cm_json_put_value_compact(void **state)
{
    (void)state;
    cm_json_doc *d = read_ok("{ \"a\" : [ null , true , false , -3 , 0.5 , \"x\\ny\\u00e9\" ] ,"
                             " \"b\" : { } , \"c\" : [ ] , \"d\\\"\" : 1e2 }");
    cm_buf b;
    cm_buf_init(&b);
    cm_json_put_value(&b, cm_json_doc_root(d));
    assert_string_equal(b.data,
                        "{\"a\":[null,true,false,-3,0.5,\"x\\ny\xc3\xa9\"],\"b\":{},\"c\":[],"
                        "\"d\\\"\":100}");
    cm_buf_reset(&b);
    cm_json_put_value(&b, NULL);
    assert_string_equal(b.data, "null");
    cm_buf_fini(&b);
    cm_json_doc_destroy(d);
}

static void test_cm_json_read_error_may_be_null(void **state)
{
    (void)state;
    cm_json_doc *d = NULL;
    assert_int_equal(cm_json_read("[1,", 3, &d, NULL), CM_EINVAL);
    assert_null(d);
    assert_int_equal(cm_json_read(NULL, 0, &d, NULL), CM_EINVAL);
    assert_null(d);
    assert_int_equal(cm_json_read("[1]", 3, &d, NULL), CM_OK);
    cm_json_doc_destroy(d);
}

/* ---- out of memory ---- */

typedef struct oom_ctx {
    char *text;
    cm_json_doc *doc;
    cm_json_read_error err;
} oom_ctx;

static cm_status oom_run(void *ctx)
{
    oom_ctx *c = ctx;
    return cm_json_read(c->text, strlen(c->text), &c->doc, &c->err);
}

static void oom_done(void *ctx, cm_status st)
{
    oom_ctx *c = ctx;
    if (st == CM_OK) {
        const cm_json *r = cm_json_doc_root(c->doc);
        assert_int_equal(cm_json_size(cm_json_get(r, "big")), 3000);
        assert_string_equal(cm_json_str(cm_json_get(r, "s")), "\xe2\x82\xac");
        assert_true(cm_json_real(cm_json_get(r, "r")) == 1.0);
    } else {
        assert_null(c->doc);
        assert_int_equal(c->err.code, CM_ENOMEM);
        assert_string_equal(c->err.msg, "out of memory");
    }
    cm_json_doc_destroy(c->doc);
    c->doc = NULL;
}

static void test_cm_json_read_oom_loop(void **state)
{
    (void)state;
    /* big enough to need several blocks, scratch growth and an index sort;
     * a number longer than the stack copy takes a heap one */
    cm_buf b;
    cm_buf_init(&b);
    cm_buf_puts(&b, "{\"s\": \"\\u20ac\", \"r\": 1.00000000000000000000000000000000000000000000000"
                    "0000000000000000000000000, \"big\": ");
    char *obj = big_object(3000, -1);
    cm_buf_puts(&b, obj);
    free(obj);
    cm_buf_puts(&b, ", \"arr\": [");
    for (int i = 0; i < 5000; i++) {
        cm_buf_printf(&b, "%s[\"element %d\", %d]", i ? "," : "", i, i);
    }
    cm_buf_puts(&b, "]}");
    assert_false(b.oom);
    oom_ctx c = {.text = b.data};
    tu_oom t = {.run = oom_run, .done = oom_done};
    assert_true(tu_oom_loop(&t, &c, 1000) > 2);
    cm_buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cm_json_read_every_kind),
        cmocka_unit_test(test_cm_json_read_scalar_roots),
        cmocka_unit_test(test_cm_json_read_int64_edges),
        cmocka_unit_test(test_cm_json_read_number_grammar),
        cmocka_unit_test(test_cm_json_read_structure_errors),
        cmocka_unit_test(test_cm_json_read_strings_and_escapes),
        cmocka_unit_test(test_cm_json_read_duplicate_keys),
        cmocka_unit_test(test_cm_json_read_big_object_lookups),
        cmocka_unit_test(test_cm_json_read_deep_nesting),
        cmocka_unit_test(test_cm_json_put_value_compact),
        cmocka_unit_test(test_cm_json_read_error_may_be_null),
        cmocka_unit_test(test_cm_json_read_oom_loop),
    };
    return cmocka_run_group_tests_name("cm_json_read", tests, NULL, NULL);
}
