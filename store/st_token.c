/* SPDX-License-Identifier: Apache-2.0
 * store: the tokens table (st_db.h, "API tokens"): only SHA-256(token) and a
 * display prefix are stored; checks compare hashes in constant time. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "st_db.h"
#include "st_int.h"

/* ---- API tokens ----------------------------------------------------------------------------- */

static const char *const scope_names[] = {"", "read", "write", "admin"};

const char *st_scope_name(st_scope s)
{
    return s >= ST_SCOPE_READ && s <= ST_SCOPE_ADMIN ? scope_names[s] : "unknown";
}

bool st_scope_parse(const char *s, st_scope *out)
{
    for (int i = ST_SCOPE_READ; s != NULL && i <= ST_SCOPE_ADMIN; i++) {
        if (strcmp(s, scope_names[i]) == 0) {
            *out = (st_scope)i;
            return true;
        }
    }
    return false;
}

void st_token_query_init(st_token_query *q)
{
    memset(q, 0, sizeof *q);
}

#define TOKEN_COLS "id, prefix, scope, label, created_at"

/* Row: TOKEN_COLS, for gets and lists alike (a token has no body). */
static cm_status token_row(sqlite3_stmt *s, void *item, bool full, cm_error *err)
{
    (void)full;
    st_token *t = item;
    t->id = (int64_t)sqlite3_column_int64(s, 0);
    st_sql_col_copy(s, 1, t->prefix, sizeof t->prefix);
    const unsigned char *sc = sqlite3_column_text(s, 2);
    cm_status st = CM_OK;
    if (sc == NULL || !st_scope_parse((const char *)sc, &t->scope)) {
        st = cm_error_set(err, CM_EINTERNAL, NULL, "token %lld has a bad scope", (long long)t->id);
    }
    if (st == CM_OK) {
        st = st_sql_col_dup(s, 3, &t->label, NULL, err);
    }
    t->created_at = (int64_t)sqlite3_column_int64(s, 4);
    return st;
}

static const st_rows token_rows = {sizeof(st_token), token_row, {offsetof(st_token, label)}, 1};

void st_token_fini(st_token *t)
{
    st_rows_fini(&token_rows, t);
}

void st_token_list_fini(st_token_list *l)
{
    if (l != NULL) {
        st_rows_free(&token_rows, l->items, l->n_items);
        memset(l, 0, sizeof *l);
    }
}

/* Constant-time comparison of n bytes. */
static bool ct_equal(const char *a, const char *b, size_t n)
{
    volatile unsigned char d = 0;
    for (size_t i = 0; i < n; i++) {
        d |= (unsigned char)(a[i] ^ b[i]);
    }
    return d == 0;
}

static void token_hash(const char *token, char hex[ST_HASH_HEX_LEN + 1])
{
    cm_sha256_hex(token, strlen(token), hex);
}

static bool token_text_ok(const char *t, size_t min_len)
{
    size_t n = t != NULL ? strlen(t) : 0;
    if (n < min_len || n > ST_TOKEN_MAX_LEN) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (t[i] <= ' ' || t[i] > '~') {
            return false;
        }
    }
    return true;
}

/* Inserts a token by text. Takes the lock itself. */
static cm_status token_insert(st_db *db, const char *token, st_scope scope, const char *label,
                              int64_t *id_out, cm_error *err)
{
    char hex[ST_HASH_HEX_LEN + 1];
    token_hash(token, hex);
    char prefix[ST_TOKEN_PREFIX_LEN + 1];
    snprintf(prefix, sizeof prefix, "%s", token);
    int64_t id = 0;
    st_db_lock(db);
    cm_status st = st_sql_begin(db, err);
    if (st == CM_OK) {
        st = st_sql_id_by_hash(db, "tokens", hex, &id, err);
    }
    if (st == CM_OK && id != 0) {
        st = cm_error_set(err, CM_ECONFLICT, "/token", "token already stored");
    }
    if (st == CM_OK) {
        st = st_sql_write(db, &id, err,
                          "INSERT INTO tokens (prefix, hash, scope, label, created_at) "
                          "VALUES (?1, ?2, ?3, ?4, ?5)",
                          "tttti", prefix, hex, st_scope_name(scope), label != NULL ? label : "",
                          st_db_now(db));
    }
    return st_sql_put_done(db, st, id, false, id_out, NULL, err);
}

static cm_status check_scope_label(st_scope scope, const char *label, cm_error *err)
{
    if (scope < ST_SCOPE_READ || scope > ST_SCOPE_ADMIN) {
        return cm_error_set(err, CM_EINVAL, "/scope", "must be read, write or admin");
    }
    if (label != NULL && label[0] != '\0') {
        return st_check_name(label, "/label", err);
    }
    return CM_OK;
}

static cm_status random_bytes(unsigned char *buf, size_t n, cm_error *err)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return cm_error_set(err, CM_EIO, NULL, "/dev/urandom: %s", strerror(errno));
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            close(fd);
            return cm_error_set(err, CM_EIO, NULL, "/dev/urandom: %s", strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
    return CM_OK;
}

cm_status st_token_create(st_db *db, st_scope scope, const char *label,
                          char token_out[ST_TOKEN_LEN + 1], int64_t *id_out, cm_error *err)
{
    token_out[0] = '\0';
    if (id_out != NULL) {
        *id_out = 0;
    }
    cm_status st = check_scope_label(scope, label, err);
    if (st != CM_OK) {
        return st;
    }
    unsigned char rnd[20];
    st = random_bytes(rnd, sizeof rnd, err);
    if (st != CM_OK) {
        return st;
    }
    char tok[ST_TOKEN_LEN + 1];
    static const char hexd[] = "0123456789abcdef";
    memcpy(tok, "spt_", 4);
    for (size_t i = 0; i < sizeof rnd; i++) {
        tok[4 + 2 * i] = hexd[rnd[i] >> 4];
        tok[5 + 2 * i] = hexd[rnd[i] & 15];
    }
    tok[ST_TOKEN_LEN] = '\0';
    st = token_insert(db, tok, scope, label, id_out, err);
    if (st == CM_OK) {
        memcpy(token_out, tok, sizeof tok);
    }
    memset(tok, 0, sizeof tok);
    return st;
}

cm_status st_token_put(st_db *db, const char *token, st_scope scope, const char *label,
                       int64_t *id_out, cm_error *err)
{
    if (id_out != NULL) {
        *id_out = 0;
    }
    cm_status st = check_scope_label(scope, label, err);
    if (st != CM_OK) {
        return st;
    }
    if (!token_text_ok(token, ST_TOKEN_MIN_LEN)) {
        return cm_error_set(err, CM_EINVAL, "/token",
                            "must be %d..%d printable ASCII characters without spaces",
                            ST_TOKEN_MIN_LEN, ST_TOKEN_MAX_LEN);
    }
    return token_insert(db, token, scope, label, id_out, err);
}

cm_status st_token_check(st_db *db, const char *presented, st_scope *scope_out, int64_t *id_out,
                         cm_error *err)
{
    if (scope_out != NULL) {
        *scope_out = ST_SCOPE_READ;
    }
    if (id_out != NULL) {
        *id_out = 0;
    }
    if (!token_text_ok(presented, ST_TOKEN_PREFIX_LEN)) {
        return cm_error_set(err, CM_ENOTFOUND, NULL, "unknown token");
    }
    char hex[ST_HASH_HEX_LEN + 1];
    token_hash(presented, hex);
    char prefix[ST_TOKEN_PREFIX_LEN + 1];
    snprintf(prefix, sizeof prefix, "%s", presented);
    st_db_lock(db);
    sqlite3_stmt *s = NULL;
    cm_status st =
        st_sql_prepare(db, "SELECT id, hash, scope FROM tokens WHERE prefix = ?1", &s, err);
    if (st == CM_OK) {
        st = st_sql_bind(db, s, err, "t", prefix);
    }
    bool matched = false;
    int64_t id = 0;
    st_scope scope = ST_SCOPE_READ;
    while (st == CM_OK) {
        bool row = false;
        st = st_sql_step(db, s, &row, err);
        if (st != CM_OK || !row) {
            break;
        }
        char stored[ST_HASH_HEX_LEN + 1];
        st_sql_col_copy(s, 1, stored, sizeof stored);
        if (strlen(stored) == ST_HASH_HEX_LEN && ct_equal(stored, hex, ST_HASH_HEX_LEN)) {
            const unsigned char *sc = sqlite3_column_text(s, 2);
            if (sc == NULL || !st_scope_parse((const char *)sc, &scope)) {
                st = cm_error_set(err, CM_EINTERNAL, NULL, "token has a bad scope");
                break;
            }
            matched = true;
            id = (int64_t)sqlite3_column_int64(s, 0);
        }
    }
    st_sql_release(db, s);
    st_db_unlock(db);
    if (st == CM_OK && !matched) {
        st = cm_error_set(err, CM_ENOTFOUND, NULL, "unknown token");
    }
    if (st == CM_OK) {
        if (scope_out != NULL) {
            *scope_out = scope;
        }
        if (id_out != NULL) {
            *id_out = id;
        }
    }
    return st;
}

cm_status st_token_get(st_db *db, int64_t id, st_token *out, cm_error *err)
{
    return st_sql_get_id(db, &token_rows, "token",
                         "SELECT " TOKEN_COLS " FROM tokens WHERE id = ?1", id, out, err);
}

cm_status st_token_list_query(st_db *db, const st_token_query *q, st_token_list *out, cm_error *err)
{
    memset(out, 0, sizeof *out);
    size_t limit = 0;
    cm_status st = st_check_limit(q->limit, q->after_id, &limit, err);
    if (st != CM_OK) {
        return st;
    }
    void *items = NULL;
    st_db_lock(db);
    st = st_sql_list(db, &token_rows, limit, &items, &out->n_items, &out->next_after, err,
                     "SELECT " TOKEN_COLS " FROM tokens WHERE id > ?1 ORDER BY id LIMIT ?2", "i",
                     q->after_id);
    st_db_unlock(db);
    out->items = items;
    return st;
}

cm_status st_token_delete(st_db *db, int64_t id, cm_error *err)
{
    return st_sql_delete_id(db, "tokens", "token", id, err);
}
