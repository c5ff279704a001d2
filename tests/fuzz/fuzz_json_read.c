/* SPDX-License-Identifier: Apache-2.0
 * libFuzzer target for the JSON reader (common/cm_json_read.c), differential
 * against jansson with the flags sp_graph_decode used before (duplicate keys
 * refused, any value as the root): the two must accept and refuse the same
 * inputs, except nesting between our 512 and jansson's 2048 levels and
 * NUL bytes (which jansson may skip), and an
 * accepted document must hold the same values in the same order, and our
 * compact rewrite of it (cm_json_put_value) must read back to them. Crashes,
 * sanitizer reports and leaks are failures. Seeds:
 * tests/fuzz/corpus/graph_json/. Build and run with `make fuzz`. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cm.h"
#include "cm_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether ours and jansson's trees hold the same values; lax compares
 * numbers as doubles whatever their kind (cm_json_put_f64 writes an
 * integral real as an integer). */
static bool same(const cm_json *a, const json_t *b, bool lax)
{
    if (lax && (cm_json_is_int(a) || cm_json_is_real(a))) {
        return json_is_number(b) && json_number_value(b) == cm_json_real(a);
    }
    switch (cm_json_kind_of(a)) {
    case CM_JSON_NULL:
        return json_is_null(b);
    case CM_JSON_TRUE:
        return json_is_true(b);
    case CM_JSON_FALSE:
        return json_is_false(b);
    case CM_JSON_INT:
        return json_is_integer(b) && json_integer_value(b) == cm_json_int(a);
    case CM_JSON_REAL:
        return json_is_real(b) && json_real_value(b) == cm_json_real(a);
    case CM_JSON_STRING:
        return json_is_string(b) && json_string_length(b) == cm_json_str_len(a) &&
               memcmp(json_string_value(b), cm_json_str(a), cm_json_str_len(a) + 1) == 0;
    case CM_JSON_ARRAY:
        if (!json_is_array(b) || json_array_size(b) != cm_json_size(a)) {
            return false;
        }
        for (size_t i = 0; i < cm_json_size(a); i++) {
            if (!same(cm_json_at(a, i), json_array_get(b, i), lax)) {
                return false;
            }
        }
        return true;
    case CM_JSON_OBJECT:
        if (!json_is_object(b) || json_object_size(b) != cm_json_size(a)) {
            return false;
        }
        for (size_t i = 0; i < cm_json_size(a); i++) {
            const char *k = cm_json_key_at(a, i, NULL);
            if (cm_json_get(a, k) != cm_json_val_at(a, i) ||
                !same(cm_json_val_at(a, i), json_object_get(b, k), lax)) {
                return false;
            }
        }
        return true;
    }
    return false;
}

/* Nesting depth of the text, brackets outside strings (an upper bound is
 * enough to tell the depth-limit case apart). */
static size_t depth_of(const uint8_t *p, size_t n)
{
    size_t d = 0, max = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        if (in_str) {
            if (p[i] == '\\') {
                i++;
            } else if (p[i] == '"') {
                in_str = false;
            }
        } else if (p[i] == '"') {
            in_str = true;
        } else if (p[i] == '[' || p[i] == '{') {
            max = ++d > max ? d : max;
        } else if ((p[i] == ']' || p[i] == '}') && d > 0) {
            d--;
        }
    }
    return max;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cm_json_doc *doc = NULL;
    cm_json_read_error e;
    cm_status st = cm_json_read((const char *)data, size, &doc, &e);
    json_error_t je;
    json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (st != CM_OK && (st != CM_EINVAL || doc != NULL || e.line == 0 || e.column == 0)) {
        fprintf(stderr, "bad failure: %d at %zu:%zu %s\n", st, e.line, e.column, e.msg);
        abort();
    }
    /* jansson's stream takes a NUL byte for the end of its read buffer and
     * may skip it (it accepts "[1,\0 2]"); we refuse every NUL outside a
     * string, as RFC 8259 does */
    bool has_nul = memchr(data, 0, size) != NULL;
    if ((st == CM_OK) != (j != NULL) && !(st != CM_OK && has_nul) &&
        !(st != CM_OK && strstr(e.msg, "nesting") != NULL && depth_of(data, size) > 512)) {
        fprintf(stderr, "disagree: ours %s (%zu:%zu %s), jansson %s (%s)\n",
                st == CM_OK ? "accepts" : "refuses", e.line, e.column, e.msg,
                j != NULL ? "accepts" : "refuses", j != NULL ? "" : je.text);
        abort();
    }
    if (st == CM_OK && j != NULL) {
        if (!same(cm_json_doc_root(doc), j, false)) {
            fprintf(stderr, "the trees differ\n");
            abort();
        }
        /* the compact rewrite reads back to the same tree */
        cm_buf b;
        cm_buf_init(&b);
        cm_json_put_value(&b, cm_json_doc_root(doc));
        cm_json_doc *again = NULL;
        if (b.oom || cm_json_read(b.data, b.len, &again, &e) != CM_OK) {
            fprintf(stderr, "the rewrite does not read back: %s\n", e.msg);
            abort();
        }
        if (!same(cm_json_doc_root(again), j, true)) {
            fprintf(stderr, "the rewrite differs\n");
            abort();
        }
        cm_json_doc_destroy(again);
        cm_buf_fini(&b);
    }
    json_decref(j);
    cm_json_doc_destroy(doc);
    return 0;
}
