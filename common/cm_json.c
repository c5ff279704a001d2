/* SPDX-License-Identifier: Apache-2.0
 * common: the JSON writer (see cm_json.h for the escaping and number rules).
 * Strings are copied in runs between the bytes that need work, found eight
 * bytes at a time where the text is plain ASCII and with a byte-class table
 * elsewhere, so plain text costs a few operations per word and one memcpy
 * per run. */
#include "cm_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Byte classes: what a byte needs when it starts the next unit of input. */
enum {
    PLAIN = 0, /* printable ASCII: copied */
    ESC = 1,   /* '"', '\', controls, DEL: escaped */
    LEAD2 = 2, /* C2-DF: starts a 2-byte UTF-8 sequence */
    LEAD3 = 3, /* E0-EF: 3 bytes */
    LEAD4 = 4, /* F0-F4: 4 bytes */
    BAD = 5    /* 80-C1, F5-FF: never starts a well-formed sequence */
};

static const unsigned char byte_class[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 00 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 10 */
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 20 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 30 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 40 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, /* 50 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 60 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, /* 70 */
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, /* 80 */
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, /* 90 */
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, /* a0 */
    5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, /* b0 */
    5, 5, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* c0 */
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, /* d0 */
    3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, /* e0 */
    4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, /* f0 */
};

/* The length of the well-formed sequence of want bytes at p (avail bytes
 * left), or, when it is ill-formed, the length of its maximal subpart (the
 * lead and the continuation bytes that were still valid, at least 1), which
 * is less than want. The second byte's range depends on the lead (Unicode
 * table 3-7): that excludes overlong forms, surrogates and values above
 * U+10FFFF. */
static size_t utf8_len(const unsigned char *p, size_t avail, size_t want)
{
    unsigned char lo = 0x80, hi = 0xbf;
    switch (p[0]) {
    case 0xe0:
        lo = 0xa0;
        break;
    case 0xed:
        hi = 0x9f;
        break;
    case 0xf0:
        lo = 0x90;
        break;
    case 0xf4:
        hi = 0x8f;
        break;
    default:
        break;
    }
    if (avail < 2 || p[1] < lo || p[1] > hi) {
        return 1;
    }
    for (size_t k = 2; k < want; k++) {
        if (k >= avail || (p[k] & 0xc0) != 0x80) {
            return k;
        }
    }
    return want;
}

/* Whether the 8 bytes at p are all PLAIN, tested a word at a time: no byte
 * with the high bit set, below 0x20, or equal to '"', '\' or DEL. The
 * "has a byte below k" tests are exact for the word as a whole (false
 * positives only in bytes above a true one), which is all this needs. */
static bool plain8(const unsigned char *p)
{
    const uint64_t ones = 0x0101010101010101ull;
    const uint64_t highs = 0x8080808080808080ull;
    uint64_t w;
    memcpy(&w, p, sizeof w);
    uint64_t q = w ^ (ones * '"');
    uint64_t bs = w ^ (ones * '\\');
    uint64_t del = w ^ (ones * 0x7fu);
    uint64_t bad = w | ((w - ones * 0x20u) & ~w) | ((q - ones) & ~q) | ((bs - ones) & ~bs) |
                   ((del - ones) & ~del);
    return (bad & highs) == 0;
}

/* The escape for a byte of class ESC, into e (at least 6 bytes); returns
 * its length. */
static size_t escape(unsigned char c, char *e)
{
    static const char hex[] = "0123456789abcdef";
    e[0] = '\\';
    switch (c) {
    case '"':
    case '\\':
        e[1] = (char)c;
        return 2;
    case '\b':
        e[1] = 'b';
        return 2;
    case '\t':
        e[1] = 't';
        return 2;
    case '\n':
        e[1] = 'n';
        return 2;
    case '\f':
        e[1] = 'f';
        return 2;
    case '\r':
        e[1] = 'r';
        return 2;
    default:
        break;
    }
    e[1] = 'u';
    e[2] = '0';
    e[3] = '0';
    e[4] = hex[c >> 4];
    e[5] = hex[c & 15];
    return 6;
}

void cm_json_put_str(cm_buf *b, const char *s, size_t n)
{
    static const char replacement[3] = {'\xef', '\xbf', '\xbd'}; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)s;
    cm_buf_putc(b, '"');
    size_t run = 0; /* start of the bytes not yet copied */
    size_t i = 0;
    while (i < n) {
        while (n - i >= 8 && plain8(p + i)) {
            i += 8;
        }
        /* byte by byte through at least the word that failed, then words
         * again (retrying at every byte would slow non-ASCII text down) */
        size_t stop = n - i >= 8 ? i + 8 : n;
        while (i < stop) {
            unsigned cls = byte_class[p[i]];
            if (cls == PLAIN) {
                i++;
                continue;
            }
            size_t len = 1;
            if (cls >= LEAD2 && cls <= LEAD4) {
                size_t want = cls; /* LEAD2..LEAD4 are 2..4 */
                len = utf8_len(p + i, n - i, want);
                if (len == want) {
                    i += len;
                    continue;
                }
            }
            cm_buf_append(b, s + run, i - run);
            if (cls == ESC) {
                char e[6];
                cm_buf_append(b, e, escape(p[i], e));
            } else {
                cm_buf_append(b, replacement, sizeof replacement);
            }
            i += len;
            run = i;
        }
    }
    cm_buf_append(b, s + run, n - run);
    cm_buf_putc(b, '"');
}

void cm_json_put_cstr(cm_buf *b, const char *s)
{
    if (s == NULL) {
        cm_json_put_null(b);
        return;
    }
    cm_json_put_str(b, s, strlen(s));
}

void cm_json_put_i64(cm_buf *b, int64_t v)
{
    cm_buf_put_i64(b, v);
}

void cm_json_put_u64(cm_buf *b, uint64_t v)
{
    char tmp[24];
    char *e = tmp + sizeof tmp;
    char *p = e;
    do {
        *--p = (char)('0' + v % 10u);
        v /= 10u;
    } while (v != 0);
    cm_buf_append(b, p, (size_t)(e - p));
}

void cm_json_put_bool(cm_buf *b, bool v)
{
    if (v) {
        cm_buf_append(b, "true", 4);
    } else {
        cm_buf_append(b, "false", 5);
    }
}

void cm_json_put_null(cm_buf *b)
{
    cm_buf_append(b, "null", 4);
}

/* Whole numbers that a double holds exactly and int64_t can take (the
 * bound every put_num of the tree used). */
static bool is_small_integral(double v)
{
    return v == floor(v) && fabs(v) < 9e15;
}

void cm_json_put_f64(cm_buf *b, double v)
{
    if (!isfinite(v)) {
        cm_json_put_null(b);
        return;
    }
    if (is_small_integral(v)) {
        cm_buf_put_i64(b, (int64_t)v);
        return;
    }
    char tmp[40];
    int n = 0;
    for (int digits = 15; digits <= 17; digits++) {
        n = snprintf(tmp, sizeof tmp, "%.*g", digits, v);
        if (digits == 17 || strtod(tmp, NULL) == v) {
            break;
        }
    }
    cm_buf_append(b, tmp, n > 0 ? (size_t)n : 0);
}

void cm_json_put_g(cm_buf *b, double v, int digits)
{
    if (!isfinite(v)) {
        cm_json_put_null(b);
        return;
    }
    digits = digits < 1 ? 1 : digits > 17 ? 17 : digits;
    char tmp[40];
    int n = snprintf(tmp, sizeof tmp, "%.*g", digits, v);
    cm_buf_append(b, tmp, n > 0 ? (size_t)n : 0);
}

void cm_json_put_num(cm_buf *b, double v, int digits)
{
    if (isfinite(v) && is_small_integral(v)) {
        cm_buf_put_i64(b, (int64_t)v);
        return;
    }
    cm_json_put_g(b, v, digits);
}

/* ---- members and elements ------------------------------------------------ */

/* Whether a ',' must come before the next member or element. */
static bool sep_due(const cm_buf *b)
{
    for (size_t i = b->len; i > 0; i--) {
        char c = b->data[i - 1];
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            continue;
        }
        return c != '{' && c != '[' && c != ',' && c != ':';
    }
    return false;
}

void cm_json_put_sep(cm_buf *b)
{
    if (sep_due(b)) {
        cm_buf_putc(b, ',');
    }
}

void cm_json_put_key(cm_buf *b, const char *key)
{
    cm_json_put_sep(b);
    cm_json_put_str(b, key, strlen(key));
    cm_buf_putc(b, ':');
}

void cm_json_put_kv_str(cm_buf *b, const char *key, const char *s)
{
    cm_json_put_key(b, key);
    cm_json_put_cstr(b, s);
}

void cm_json_put_kv_i64(cm_buf *b, const char *key, int64_t v)
{
    cm_json_put_key(b, key);
    cm_buf_put_i64(b, v);
}

void cm_json_put_kv_u64(cm_buf *b, const char *key, uint64_t v)
{
    cm_json_put_key(b, key);
    cm_json_put_u64(b, v);
}

void cm_json_put_kv_bool(cm_buf *b, const char *key, bool v)
{
    cm_json_put_key(b, key);
    cm_json_put_bool(b, v);
}

void cm_json_put_kv_f64(cm_buf *b, const char *key, double v)
{
    cm_json_put_key(b, key);
    cm_json_put_f64(b, v);
}

void cm_json_put_kv_num(cm_buf *b, const char *key, double v, int digits)
{
    cm_json_put_key(b, key);
    cm_json_put_num(b, v, digits);
}
