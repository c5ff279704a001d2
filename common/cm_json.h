/* SPDX-License-Identifier: Apache-2.0
 * common: the JSON writer. Every document the tree writes by hand (plans,
 * reports, server replies) appends to a cm_buf through these functions, so a
 * string or a number serialises the same way whichever module writes it.
 * Writers append to the buffer and inherit its failure rule (after a failed
 * growth the buffer is marked oom and ignores further appends: check b->oom
 * once at the end). Nothing here allocates except through the buffer.
 * Thread contract: a buffer is single-owner; the functions keep no state. */
#ifndef CM_JSON_H
#define CM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"

/* ---- values ---------------------------------------------------------------
 * Value writers append exactly the value: no separator before it. */

/* The n bytes at s as a JSON string literal, quotes included. Escaping is
 * RFC 8259's minimum and nothing else: '"' and '\' get a backslash; the
 * control characters U+0000-U+001F are \b \t \n \f \r where JSON has a short
 * form and \u00XX (lower-case hex) otherwise; DEL (0x7f) is \u007f so that
 * no invisible byte reaches a terminal. '/' and non-ASCII are not escaped:
 * well-formed UTF-8 is copied as it is. Bytes that are not well-formed UTF-8
 * (stray continuation bytes, overlong forms, surrogates, code points above
 * U+10FFFF, a sequence cut short) are replaced by U+FFFD, one per maximal
 * ill-formed subpart as Unicode 15 section 3.9 recommends, so the output is
 * always valid UTF-8 and valid JSON. Embedded NUL bytes are \u0000. */
void cm_json_put_str(cm_buf *b, const char *s, size_t n);

/* The NUL-terminated s as cm_json_put_str writes it; NULL writes null. */
void cm_json_put_cstr(cm_buf *b, const char *s);

/* Integers in decimal, exactly. */
void cm_json_put_i64(cm_buf *b, int64_t v);
void cm_json_put_u64(cm_buf *b, uint64_t v);

/* true / false, and null. */
void cm_json_put_bool(cm_buf *b, bool v);
void cm_json_put_null(cm_buf *b);

/* A double that reads back as the same double: integral values of magnitude
 * below 9e15 as integers ("3", not "3.0"; -0 as "0"), others with the fewest
 * of 15, 16 or 17 significant digits ("%.*g") that round-trip through
 * strtod. NaN and infinities, which JSON cannot spell, are null. Assumes the
 * "C" numeric locale (the tree never calls setlocale). */
void cm_json_put_f64(cm_buf *b, double v);

/* A double as printf "%.*g" with digits significant digits (clamped to
 * 1..17), non-finite as null. This is what most of today's writers emit with
 * a fixed precision: digits 6 is "%.6g", 17 is "%.17g". */
void cm_json_put_g(cm_buf *b, double v, int digits);

/* A quantity that is usually whole: integral values of magnitude below 9e15
 * exactly as integers, others as cm_json_put_g with digits, non-finite as
 * null. With digits 6 this is the cost model's and the advisors' put_num. */
void cm_json_put_num(cm_buf *b, double v, int digits);

/* ---- members and elements -------------------------------------------------
 * Separators come from what the buffer already holds: a ',' is written
 * unless the buffer is empty or its last byte other than a space, tab, CR or
 * LF is '{', '[', ',' or ':' (no JSON value ends with one of those). So a
 * writer can mix these calls with raw cm_buf_puts of structure and never
 * track "first member" flags; it must only start a document at the start of
 * a buffer or after one of those four bytes. */

/* A ',' if one is due (see above); use before each array element. */
void cm_json_put_sep(cm_buf *b);

/* A member name: separator if due, the escaped key, ':'. The value follows
 * with any value writer or raw text. */
void cm_json_put_key(cm_buf *b, const char *key);

/* "key":value members, separator included. kv_str writes null for NULL s;
 * kv_num takes cm_json_put_num's digits. */
void cm_json_put_kv_str(cm_buf *b, const char *key, const char *s);
void cm_json_put_kv_i64(cm_buf *b, const char *key, int64_t v);
void cm_json_put_kv_u64(cm_buf *b, const char *key, uint64_t v);
void cm_json_put_kv_bool(cm_buf *b, const char *key, bool v);
void cm_json_put_kv_f64(cm_buf *b, const char *key, double v);
void cm_json_put_kv_num(cm_buf *b, const char *key, double v, int digits);

#endif /* CM_JSON_H */
