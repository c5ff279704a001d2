/* SPDX-License-Identifier: Apache-2.0
 * common: the JSON writer and reader. Every document the tree writes by hand (plans,
 * reports, server replies) appends to a cm_buf through these functions, so a
 * string or a number serialises the same way whichever module writes it.
 * Writers append to the buffer and inherit its failure rule (after a failed
 * growth the buffer is marked oom and ignores further appends: check b->oom
 * once at the end). Nothing here allocates except through the buffer.
 * The reader (cm_json_read, below) parses a whole document into a compact
 * tree freed at once; see its section for its rules.
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

/* ---- reader ----------------------------------------------------------------
 * A strict RFC 8259 DOM reader. cm_json_read parses (text, len) into a tree
 * that lives in one block allocator owned by the returned document and is
 * freed at once by cm_json_doc_destroy. It accepts exactly RFC 8259 JSON with
 * these further rules (jansson's with JSON_REJECT_DUPLICATES, our old
 * reader): any value may be the root; integers (no fraction, no exponent)
 * must fit int64 (a number with a fraction or exponent is a real, read with
 * strtod in the "C" locale; a real that overflows to infinity is an error);
 * strings must be well-formed UTF-8 (no overlong forms, surrogates, code
 * points above U+10FFFF or cut-off sequences), their \u escapes must pair
 * surrogates, and "\u0000" is refused (every string is also NUL-terminated);
 * an object may not repeat a key (compared unescaped); nesting is at most
 * CM_JSON_MAX_DEPTH arrays and objects deep (the parser is iterative). A
 * string is at most 4 GiB - 1 bytes and a container at most 4G - 1 items.
 * Memory: 16 bytes per value, 32 per object member (plus 4 per member of an
 * object with more than 8), each string's bytes plus a NUL; nothing is
 * bounded by the input except through len.
 * Thread contract: a document is immutable once read; any number of threads
 * may read one concurrently. Nothing keeps global state. */

#define CM_JSON_MAX_DEPTH 512 /* arrays and objects, nested */

typedef enum cm_json_kind {
    CM_JSON_NULL = 0,
    CM_JSON_FALSE,
    CM_JSON_TRUE,
    CM_JSON_INT,    /* int64_t */
    CM_JSON_REAL,   /* double */
    CM_JSON_STRING, /* unescaped, counted, NUL-terminated */
    CM_JSON_ARRAY,
    CM_JSON_OBJECT /* members in document order */
} cm_json_kind;

/* One value of a document (opaque; borrowed from its document, valid until
 * cm_json_doc_destroy). */
typedef struct cm_json cm_json;
typedef struct cm_json_doc cm_json_doc;

#define CM_JSON_READ_MSG_LEN 128

/* Why a read failed: code CM_EINVAL (bad input) or CM_ENOMEM, where (line
 * and column 1-based, column and offset in bytes; offset 0-based) and a
 * short message, which never quotes input bytes except a key already checked
 * to be valid UTF-8 (escaped and shortened). Caller-owned; filling it never
 * allocates. */
typedef struct cm_json_read_error {
    cm_status code;                 /* CM_OK when no error */
    size_t line;                    /* 1-based */
    size_t column;                  /* 1-based, bytes */
    size_t offset;                  /* 0-based byte offset into the text */
    char msg[CM_JSON_READ_MSG_LEN]; /* e.g. "expected ',' or '}'" */
} cm_json_read_error;

/* Parses the len bytes at text (need not be NUL-terminated) into a new
 * document, *doc_out (the caller frees it with cm_json_doc_destroy); text
 * may be NULL when len is 0 (an empty input, an error). On
 * failure *doc_out is NULL, nothing is held, err (may be NULL) says why and
 * CM_EINVAL or CM_ENOMEM is returned. */
cm_status cm_json_read(const char *text, size_t len, cm_json_doc **doc_out,
                       cm_json_read_error *err);

/* Frees a document and every value in it; NULL is a no-op. */
void cm_json_doc_destroy(cm_json_doc *doc);

/* The root value (never NULL for a document that was read). */
const cm_json *cm_json_doc_root(const cm_json_doc *doc);

/* Bytes the document holds (its blocks), for benchmarks. */
size_t cm_json_doc_bytes(const cm_json_doc *doc);

/* Accessors. Every one accepts NULL and a value of the wrong kind, as
 * jansson's do, so that a lookup chain needs no checks in between: a
 * predicate is then false, a count 0, a lookup NULL, a scalar 0 / NULL. */
cm_json_kind cm_json_kind_of(const cm_json *v); /* NULL: CM_JSON_NULL */
bool cm_json_is_null(const cm_json *v);
bool cm_json_is_bool(const cm_json *v);
bool cm_json_is_true(const cm_json *v);
bool cm_json_is_int(const cm_json *v);
bool cm_json_is_real(const cm_json *v);
bool cm_json_is_string(const cm_json *v);
bool cm_json_is_array(const cm_json *v);
bool cm_json_is_object(const cm_json *v);

/* An integer's value (0 for anything else). */
int64_t cm_json_int(const cm_json *v);
/* A real's or an integer's value as a double (0 for anything else). */
double cm_json_real(const cm_json *v);
/* A string's bytes (NUL-terminated; NULL for anything else) and length. */
const char *cm_json_str(const cm_json *v);
size_t cm_json_str_len(const cm_json *v);

/* Elements of an array or members of an object (0 for anything else). */
size_t cm_json_size(const cm_json *v);
/* Array element i in O(1) (NULL when out of range or not an array). */
const cm_json *cm_json_at(const cm_json *a, size_t i);
/* Object member by key: a linear scan of objects of up to 8 members, a
 * binary search of an index sorted at read time above (O(log n), whatever
 * the keys). NULL when absent or o is not an object. getn takes a counted
 * key (which may hold NUL bytes, never matched since keys cannot). */
const cm_json *cm_json_get(const cm_json *o, const char *key);
const cm_json *cm_json_getn(const cm_json *o, const char *key, size_t key_len);
/* Member i of an object in document order: its key (NUL-terminated, length
 * in *len_out when len_out is not NULL) and value; NULL when out of range
 * or o is not an object. */
const char *cm_json_key_at(const cm_json *o, size_t i, size_t *len_out);
const cm_json *cm_json_val_at(const cm_json *o, size_t i);

/* Appends v as compact JSON (no whitespace) with the writers above: strings
 * as cm_json_put_str, integers exactly, reals as cm_json_put_f64. NULL
 * writes null. Recursion is bounded by CM_JSON_MAX_DEPTH. */
void cm_json_put_value(cm_buf *b, const cm_json *v);

#endif /* CM_JSON_H */
