/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for store/st_db: every resource's put/get/list/delete, paging,
 * filters, content-hash dedup, migrations of hand-made older files, errors
 * with code and path, OOM loops (SQLite's allocations included) and a crash
 * test: a child writing in a loop is killed with SIGKILL, and every write it
 * saw acknowledged must be in the reopened, intact database. SQLite is used
 * directly here only to build and inspect fixture files. Files live in a
 * mkdtemp directory under /tmp that each test removes. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "cm.h"
#include "st_db.h"
#include "st_int.h"
#include "tu_fs.h"

/* ---- fixture ------------------------------------------------------------------------------ */

typedef struct fx {
    char dir[64];   /* mkdtemp directory */
    char path[128]; /* dir/test.db */
    st_db *db;      /* open on path */
} fx;

static void fx_path(const fx *f, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", f->dir, name);
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/st_db_test.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    fx_path(f, "test.db", f->path, sizeof f->path);
    cm_error err;
    cm_error_clear(&err);
    cm_status st = st_db_open(f->path, &f->db, &err);
    if (st != CM_OK) {
        fprintf(stderr, "open: %s\n", err.msg);
    }
    assert_int_equal(st, CM_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    st_db_close(f->db);
    tu_dir_remove(f->dir);
    free(f);
    return 0;
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        cm_error e_;                                                                               \
        cm_error_clear(&e_);                                                                       \
        cm_status s_ = (call);                                                                     \
        if (s_ != CM_OK) {                                                                         \
            fprintf(stderr, "%s: %s at '%s': %s\n", #call, cm_status_name(s_), e_.path, e_.msg);   \
        }                                                                                          \
        assert_int_equal(s_, CM_OK);                                                               \
    } while (0)

/* Expects call (which takes &e_ as its error) to fail with code at path. */
#define FAILS(want_code, want_path, call)                                                          \
    do {                                                                                           \
        cm_error e_;                                                                               \
        cm_error_clear(&e_);                                                                       \
        cm_status s_ = (call);                                                                     \
        if (s_ != (want_code) || strcmp(e_.path, (want_path)) != 0) {                              \
            fprintf(stderr, "%s: %s at '%s': %s\n", #call, cm_status_name(s_), e_.path, e_.msg);   \
        }                                                                                          \
        assert_int_equal(s_, (want_code));                                                         \
        assert_int_equal(e_.code, (want_code));                                                    \
        assert_string_equal(e_.path, (want_path));                                                 \
    } while (0)

static st_graph_in graph_in(const char *name, st_graph_format fmt, const char *body)
{
    st_graph_in in;
    memset(&in, 0, sizeof in);
    in.name = name;
    in.format = fmt;
    in.body = body;
    in.body_len = strlen(body);
    return in;
}

static int64_t put_graph(st_db *db, const char *name, st_graph_format fmt, const char *body)
{
    st_graph_in in = graph_in(name, fmt, body);
    int64_t id = 0;
    bool existed = true;
    OK(st_graph_put(db, &in, &id, &existed, &e_));
    assert_false(existed);
    assert_true(id > 0);
    return id;
}

static void hash_of(const char *s, char hex[ST_HASH_HEX_LEN + 1])
{
    cm_sha256_hex(s, strlen(s), hex);
}

static int64_t put_plan(st_db *db, const char *key, int64_t graph_id, int64_t mesh_id)
{
    char h[ST_HASH_HEX_LEN + 1];
    hash_of(key, h);
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = h;
    in.graph_id = graph_id;
    in.mesh_id = mesh_id;
    in.options = "{\"pass\":\"pipeline\"}";
    in.options_len = strlen(in.options);
    in.body = "{\"plan\":1}";
    in.body_len = strlen(in.body);
    int64_t id = 0;
    OK(st_plan_put(db, &in, &id, NULL, &e_));
    return id;
}

/* Runs a raw SQL script on a file with SQLite directly (fixtures only). */
static void raw_exec(const char *path, const char *sql)
{
    sqlite3 *c = NULL;
    assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(c, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "raw_exec: %s\n", msg != NULL ? msg : "?");
    }
    sqlite3_free(msg);
    assert_int_equal(rc, SQLITE_OK);
    assert_int_equal(sqlite3_close(c), SQLITE_OK);
}

/* The first column of the first row of a query, as text (fixtures only). */
/* Every plan, oldest first (one page of a default list), expecting n. */
static void list_plans(st_db *db, st_plan_list *l, size_t n)
{
    st_plan_query q;
    st_plan_query_init(&q);
    OK(st_plan_list_query(db, &q, l, &e_));
    assert_int_equal(l->n_items, n);
}

static void raw_text(const char *path, const char *sql, char *out, size_t cap)
{
    sqlite3 *c = NULL;
    assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    assert_int_equal(sqlite3_prepare_v2(c, sql, -1, &s, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(s), SQLITE_ROW);
    const unsigned char *t = sqlite3_column_text(s, 0);
    snprintf(out, cap, "%s", t != NULL ? (const char *)t : "");
    sqlite3_finalize(s);
    assert_int_equal(sqlite3_close(c), SQLITE_OK);
}

/* ---- open, pragmas, migrations ----------------------------------------------------------- */

static void test_st_db_open_sets_wal_and_schema(void **state)
{
    fx *f = *state;
    int64_t v = 0;
    OK(st_db_schema_version(f->db, &v, &e_));
    assert_int_equal(v, ST_DB_SCHEMA_VERSION);
    OK(st_db_integrity_check(f->db, &e_));
    char t[64];
    raw_text(f->path, "PRAGMA journal_mode", t, sizeof t);
    assert_string_equal(t, "wal");
    raw_text(f->path, "SELECT count(*) FROM schema_version", t, sizeof t);
    assert_int_equal(atoi(t), ST_DB_SCHEMA_VERSION);
    raw_text(f->path, "PRAGMA page_size", t, sizeof t);
    assert_string_equal(t, "4096");
    assert_int_equal(f->db->page_size, 4096);
    /* A file made with other pages keeps them, and the handle knows their size. */
    char p16[192];
    fx_path(f, "p16.db", p16, sizeof p16);
    raw_exec(p16, "PRAGMA page_size=16384; CREATE TABLE t (x)");
    st_db *db16 = NULL;
    OK(st_db_open(p16, &db16, &e_));
    assert_int_equal(db16->page_size, 16384);
    st_db_close(db16);
    /* A second handle on the same file sees the same schema, nothing re-applied. */
    st_db *db2 = NULL;
    OK(st_db_open(f->path, &db2, &e_));
    OK(st_db_schema_version(db2, &v, &e_));
    assert_int_equal(v, ST_DB_SCHEMA_VERSION);
    st_db_close(db2);
    raw_text(f->path, "SELECT count(*) FROM schema_version", t, sizeof t);
    assert_int_equal(atoi(t), ST_DB_SCHEMA_VERSION);
    st_db_close(NULL);
}

static void test_st_db_open_rejects_bad_files(void **state)
{
    fx *f = *state;
    st_db *db = (st_db *)1;
    FAILS(CM_EINVAL, "/path", st_db_open("", &db, &e_));
    assert_null(db);
    char p[256];
    fx_path(f, "garbage.db", p, sizeof p);
    FILE *g = fopen(p, "wb");
    assert_non_null(g);
    for (int i = 0; i < 512; i++) {
        fputs("this is not a database ", g);
    }
    fclose(g);
    FAILS(CM_EIO, "", st_db_open(p, &db, &e_));
    assert_null(db);
    fx_path(f, "no/such/dir.db", p, sizeof p);
    FAILS(CM_EIO, "/path", st_db_open(p, &db, &e_));
    assert_null(db);
}

static void test_st_db_open_rejects_newer_schema(void **state)
{
    fx *f = *state;
    char p[256];
    fx_path(f, "newer.db", p, sizeof p);
    raw_exec(p, "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " applied_at INTEGER NOT NULL);"
                "INSERT INTO schema_version VALUES (99, 'future', 0);");
    st_db *db = NULL;
    FAILS(CM_ECONFLICT, "", st_db_open(p, &db, &e_));
    assert_null(db);
}

/* The v1 schema exactly as version 1 shipped it, with data, built by hand. */
static const char V1_SQL[] =
    "CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    " applied_at INTEGER NOT NULL);"
    "INSERT INTO schema_version VALUES (1, 'graphs, meshes, plans', 1700000000);"
    "CREATE TABLE graphs (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL,"
    " format TEXT NOT NULL CHECK (format IN ('json', 'mlir')), hash TEXT NOT NULL UNIQUE,"
    " body BLOB NOT NULL, created_at INTEGER NOT NULL);"
    "CREATE INDEX graphs_name ON graphs (name);"
    "CREATE INDEX graphs_created ON graphs (created_at);"
    "CREATE TABLE meshes (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE,"
    " body BLOB NOT NULL, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);"
    "CREATE TABLE plans (id INTEGER PRIMARY KEY AUTOINCREMENT, hash TEXT NOT NULL UNIQUE,"
    " graph_id INTEGER NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,"
    " mesh_id INTEGER REFERENCES meshes (id) ON DELETE SET NULL, options BLOB NOT NULL,"
    " body BLOB NOT NULL, created_at INTEGER NOT NULL);"
    "CREATE INDEX plans_graph ON plans (graph_id);"
    "CREATE INDEX plans_mesh ON plans (mesh_id);"
    "CREATE INDEX plans_created ON plans (created_at);"
    "INSERT INTO graphs VALUES (7, 'old', 'mlir',"
    " 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',"
    " CAST('module {}' AS BLOB), 1700000000);"
    "INSERT INTO meshes VALUES (3, 'm', CAST('{\"axes\":[[\"x\",2]]}' AS BLOB), 1700000000,"
    " 1700000000);"
    "INSERT INTO plans VALUES (5, "
    "'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb',"
    " 7, 3, CAST('{}' AS BLOB), CAST('{\"p\":1}' AS BLOB), 1700000000);";

/* Builds at path the file an older build left at schema version: V1_SQL,
 * then migrations 2..version as released (they are never edited), each
 * recorded in schema_version, without st_db_open. */
static void make_old_file(const char *path, int64_t version)
{
    assert_true(version >= 1 && version < ST_DB_SCHEMA_VERSION);
    raw_exec(path, V1_SQL);
    for (int64_t v = 2; v <= version; v++) {
        const st_migration *m = &st_migrations[v - 1];
        raw_exec(path, m->sql);
        char sql[256];
        snprintf(sql, sizeof sql, "INSERT INTO schema_version VALUES (%lld, '%s', 1700000000);",
                 (long long)m->version, m->name);
        raw_exec(path, sql);
    }
}

/* The status of running sql on a file with SQLite directly (fixtures only). */
static int raw_exec_rc(const char *path, const char *sql)
{
    sqlite3 *c = NULL;
    assert_int_equal(sqlite3_open(path, &c), SQLITE_OK);
    int rc = sqlite3_exec(c, sql, NULL, NULL, NULL);
    assert_int_equal(sqlite3_close(c), SQLITE_OK);
    return rc;
}

static void test_st_db_open_migrates_v1_file(void **state)
{
    fx *f = *state;
    char p[256];
    fx_path(f, "v1.db", p, sizeof p);
    raw_exec(p, V1_SQL);
    st_db *db = NULL;
    OK(st_db_open(p, &db, &e_));
    int64_t v = 0;
    OK(st_db_schema_version(db, &v, &e_));
    assert_int_equal(v, ST_DB_SCHEMA_VERSION);
    OK(st_db_integrity_check(db, &e_));
    /* Old rows intact. */
    st_graph g;
    OK(st_graph_get(db, 7, &g, &e_));
    assert_string_equal(g.name, "old");
    assert_int_equal(g.format, ST_GRAPH_MLIR);
    assert_string_equal(g.body, "module {}");
    assert_int_equal(g.body_len, 9);
    st_graph_fini(&g);
    st_plan pl;
    OK(st_plan_get(db, 5, &pl, &e_));
    assert_int_equal(pl.graph_id, 7);
    assert_int_equal(pl.mesh_id, 3);
    assert_string_equal(pl.body, "{\"p\":1}");
    assert_null(pl.input); /* stored before plans kept their input */
    assert_null(pl.rules);
    st_plan_fini(&pl);
    /* Tables of v2 and v3 exist and work. */
    const char *rule = "{\"rule\":\"i,j->i\"}";
    OK(st_rule_put(db, "my_call", rule, strlen(rule), false, NULL, NULL, &e_));
    OK(st_profile_put(db, "a100", "{}", 2, false, NULL, NULL, &e_));
    int64_t bid = 0;
    OK(st_bench_create(db, 5, "{}", 2, NULL, &bid, &e_));
    char tok[ST_TOKEN_LEN + 1];
    OK(st_token_create(db, ST_SCOPE_READ, NULL, tok, NULL, &e_));
    /* New ids continue after the old ones (AUTOINCREMENT kept). */
    int64_t gid = put_graph(db, "new", ST_GRAPH_JSON, "{}");
    assert_true(gid > 7);
    st_db_close(db);
    char t[64];
    raw_text(p, "SELECT group_concat(version) FROM schema_version", t, sizeof t);
    assert_string_equal(t, "1,2,3,4,5,6,7,8,9,10");
    raw_text(p, "PRAGMA journal_mode", t, sizeof t);
    assert_string_equal(t, "wal");
    /* version 9 dropped the indexes no statement used; the foreign keys' stay */
    raw_text(p,
             "SELECT group_concat(name) FROM (SELECT name FROM sqlite_master WHERE type = 'index'"
             " AND tbl_name IN ('graphs', 'plans') AND name NOT LIKE 'sqlite_autoindex%'"
             " ORDER BY name)",
             t, sizeof t);
    assert_string_equal(t, "plans_graph,plans_mesh");
    /* version 10: plans_mesh holds the plans with a stored mesh only */
    char sql[256];
    raw_text(p, "SELECT sql FROM sqlite_master WHERE name = 'plans_mesh'", sql, sizeof sql);
    assert_non_null(strstr(sql, "WHERE mesh_id IS NOT NULL"));
}

/* A v3 file with benchmark runs: version 4 renames "done" to "succeeded",
 * keeps every row, id and index, and allows "canceled". */
static void test_st_db_migrates_v3_bench_status(void **state)
{
    fx *f = *state;
    char p[256];
    fx_path(f, "v3.db", p, sizeof p);
    make_old_file(p, 3);
    char t[1024];
    raw_text(p, "SELECT sql FROM sqlite_master WHERE name = 'bench_runs'", t, sizeof t);
    assert_non_null(strstr(t, "'done'")); /* the v3 CHECK */
    raw_exec(p, "INSERT INTO bench_runs VALUES (11, 5, CAST('{}' AS BLOB), 'done', 1,"
                " CAST('{\"x\":1}' AS BLOB), NULL, NULL, 1700000000, 1700000000);"
                "INSERT INTO bench_runs VALUES (12, 5, CAST('{}' AS BLOB), 'queued', 0,"
                " NULL, NULL, 'http://127.0.0.1:9/h', 1700000000, 1700000000);");
    st_db *db = NULL;
    OK(st_db_open(p, &db, &e_));
    OK(st_db_integrity_check(db, &e_));
    st_bench b;
    OK(st_bench_get(db, 11, &b, &e_));
    assert_int_equal(b.status, ST_BENCH_SUCCEEDED);
    assert_string_equal(b.results, "{\"x\":1}");
    assert_int_equal(b.plan_id, 5);
    st_bench_fini(&b);
    st_bench_update u = {ST_BENCH_CANCELED, 0, NULL, 0, "canceled"};
    OK(st_bench_set(db, 12, &u, &e_));
    OK(st_bench_get(db, 12, &b, &e_));
    assert_int_equal(b.status, ST_BENCH_CANCELED);
    assert_string_equal(b.webhook_url, "http://127.0.0.1:9/h");
    st_bench_fini(&b);
    int64_t id = 0;
    OK(st_bench_create(db, 5, "{}", 2, NULL, &id, &e_));
    assert_true(id > 12);
    st_db_close(db);
    raw_text(p, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'bench_runs%'", t, sizeof t);
    assert_string_equal(t, "3"); /* the table and its two indexes */
}

/* The frozen copy above matches migration 1 as the code has it. */
static void test_st_db_migration_list_is_ordered(void **state)
{
    (void)state;
    assert_int_equal(st_n_migrations, ST_DB_SCHEMA_VERSION);
    for (size_t i = 0; i < st_n_migrations; i++) {
        assert_int_equal(st_migrations[i].version, (int64_t)i + 1);
        assert_true(st_migrations[i].name[0] != '\0');
        assert_true(strstr(st_migrations[i].sql, "CREATE TABLE") != NULL ||
                    strstr(st_migrations[i].sql, "ALTER TABLE") != NULL ||
                    strstr(st_migrations[i].sql, "DROP INDEX") != NULL);
    }
    assert_non_null(strstr(st_migrations[0].sql, "CREATE TABLE plans"));
    assert_non_null(strstr(st_migrations[4].sql, "ALTER TABLE plans ADD COLUMN input BLOB"));
}

/* A v4 file (made before plans kept their input): version 5 adds input,
 * input_format and rules to plans. Old rows and what references them stay;
 * old plans read back without input; new ones keep theirs; the new columns'
 * CHECKs hold on the migrated table. */
static void test_st_db_migrates_v4_plan_input(void **state)
{
    fx *f = *state;
    char p[256];
    fx_path(f, "v4.db", p, sizeof p);
    make_old_file(p, 4);
    char t[1024];
    raw_text(p, "SELECT count(*) FROM pragma_table_info('plans') WHERE name = 'input'", t,
             sizeof t);
    assert_string_equal(t, "0");
    raw_exec(p, "INSERT INTO bench_runs VALUES (11, 5, CAST('{}' AS BLOB), 'succeeded', 1,"
                " NULL, NULL, NULL, 1700000000, 1700000000);");
    st_db *db = NULL;
    OK(st_db_open(p, &db, &e_));
    int64_t v = 0;
    OK(st_db_schema_version(db, &v, &e_));
    assert_int_equal(v, ST_DB_SCHEMA_VERSION);
    OK(st_db_integrity_check(db, &e_));
    st_plan pl;
    OK(st_plan_get(db, 5, &pl, &e_));
    assert_int_equal(pl.graph_id, 7);
    assert_int_equal(pl.mesh_id, 3);
    assert_string_equal(pl.body, "{\"p\":1}");
    assert_null(pl.input);
    assert_int_equal(pl.input_len, 0);
    assert_false(pl.input_is_mlir);
    assert_null(pl.rules);
    assert_int_equal(pl.rules_len, 0);
    st_plan_fini(&pl);
    st_bench b;
    OK(st_bench_get(db, 11, &b, &e_));
    assert_int_equal(b.plan_id, 5);
    st_bench_fini(&b);
    /* A plan stored after the migration keeps its input and rules. */
    char h[ST_HASH_HEX_LEN + 1];
    hash_of("after-v5", h);
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = h;
    in.graph_id = 7;
    in.body = "{}";
    in.body_len = 2;
    in.input = "module {}";
    in.input_len = 9;
    in.input_is_mlir = true;
    in.rules = "{\"custom_rules\":{}}";
    in.rules_len = strlen(in.rules);
    int64_t id = 0;
    OK(st_plan_put(db, &in, &id, NULL, &e_));
    assert_true(id > 5);
    OK(st_plan_get(db, id, &pl, &e_));
    assert_string_equal(pl.input, "module {}");
    assert_true(pl.input_is_mlir);
    assert_string_equal(pl.rules, "{\"custom_rules\":{}}");
    st_plan_fini(&pl);
    st_db_close(db);
    raw_text(p, "SELECT group_concat(version) FROM schema_version", t, sizeof t);
    assert_string_equal(t, "1,2,3,4,5,6,7,8,9,10");
    /* A format without an input, an input without a format, an unknown
     * format, rules with a JSON input: each breaks a CHECK. */
    assert_int_equal(raw_exec_rc(p, "UPDATE plans SET input_format = 'json' WHERE id = 5"),
                     SQLITE_CONSTRAINT);
    assert_int_equal(raw_exec_rc(p, "UPDATE plans SET input = CAST('x' AS BLOB) WHERE id = 5"),
                     SQLITE_CONSTRAINT);
    assert_int_equal(raw_exec_rc(p, "UPDATE plans SET input = CAST('x' AS BLOB),"
                                    " input_format = 'xml' WHERE id = 5"),
                     SQLITE_CONSTRAINT);
    assert_int_equal(raw_exec_rc(p, "UPDATE plans SET input = CAST('{}' AS BLOB),"
                                    " input_format = 'json', rules = CAST('{}' AS BLOB)"
                                    " WHERE id = 5"),
                     SQLITE_CONSTRAINT);
    assert_int_equal(raw_exec_rc(p, "UPDATE plans SET input = CAST('{}' AS BLOB),"
                                    " input_format = 'json' WHERE id = 5"),
                     SQLITE_OK);
}

/* ---- graphs ---------------------------------------------------------------------------------- */

static void test_st_graph_put_dedups_by_content(void **state)
{
    fx *f = *state;
    int64_t id = put_graph(f->db, "mlp", ST_GRAPH_JSON, "{\"ops\":[]}");
    st_graph_in in = graph_in("other name", ST_GRAPH_JSON, "{\"ops\":[]}");
    int64_t id2 = 0;
    bool existed = false;
    bool aliased = false;
    OK(st_graph_put_named(f->db, &in, &id2, &existed, &aliased, &e_));
    assert_true(existed);
    assert_true(aliased); /* the new name is kept beside the first */
    assert_int_equal(id2, id);
    OK(st_graph_put_named(f->db, &in, &id2, &existed, &aliased, &e_));
    assert_false(aliased); /* once */
    in.name = "mlp";
    OK(st_graph_put_named(f->db, &in, &id2, &existed, &aliased, &e_));
    assert_false(aliased); /* the row's own name is no alias */
    in.name = "other name";
    st_graph ga;
    memset(&ga, 0, sizeof ga);
    OK(st_graph_get(f->db, id, &ga, &e_));
    assert_string_equal(ga.name, "mlp");
    assert_string_equal(ga.aliases, "other name");
    st_graph_fini(&ga);
    st_graph_query q;
    st_graph_query_init(&q);
    q.name = "other name";
    st_graph_list l;
    OK(st_graph_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 1);
    assert_int_equal(l.items[0].id, id);
    st_graph_list_fini(&l);
    /* Same bytes in another format are another graph. */
    in.format = ST_GRAPH_MLIR;
    OK(st_graph_put(f->db, &in, &id2, &existed, &e_));
    assert_false(existed);
    assert_true(id2 != id);
    /* A caller-chosen hash (upper case folded) dedups different bytes. */
    char h[ST_HASH_HEX_LEN + 1];
    hash_of("module-hash", h);
    char hu[ST_HASH_HEX_LEN + 1];
    for (size_t i = 0; i <= ST_HASH_HEX_LEN; i++) {
        hu[i] = h[i] >= 'a' && h[i] <= 'f' ? (char)(h[i] - 'a' + 'A') : h[i];
    }
    st_graph_in a = graph_in("a", ST_GRAPH_JSON, "{\"x\":1}");
    a.hash = h;
    st_graph_in b = graph_in("b", ST_GRAPH_MLIR, "module {}");
    b.hash = hu;
    int64_t ia = 0, ib = 0;
    OK(st_graph_put(f->db, &a, &ia, &existed, &e_));
    assert_false(existed);
    OK(st_graph_put(f->db, &b, &ib, &existed, &e_));
    assert_true(existed);
    assert_int_equal(ia, ib);

    st_graph g;
    OK(st_graph_get(f->db, id, &g, &e_));
    assert_int_equal(g.id, id);
    assert_string_equal(g.name, "mlp");
    assert_int_equal(g.format, ST_GRAPH_JSON);
    assert_string_equal(g.body, "{\"ops\":[]}");
    assert_int_equal(g.body_len, 10);
    assert_int_equal(strlen(g.hash), ST_HASH_HEX_LEN);
    assert_true(g.created_at > 1600000000);
    char hash_copy[ST_HASH_HEX_LEN + 1];
    memcpy(hash_copy, g.hash, sizeof hash_copy);
    st_graph_fini(&g);
    st_graph_fini(&g); /* fini twice is harmless */
    OK(st_graph_get_by_hash(f->db, hash_copy, &g, &e_));
    assert_int_equal(g.id, id);
    st_graph_fini(&g);
    OK(st_graph_get_by_hash(f->db, hu, &g, &e_));
    assert_int_equal(g.id, ia);
    assert_string_equal(g.name, "a");
    st_graph_fini(&g);
}

static void test_st_graph_put_rejects_bad_input(void **state)
{
    fx *f = *state;
    st_graph_in in = graph_in("", ST_GRAPH_JSON, "{}");
    FAILS(CM_EINVAL, "/name", st_graph_put(f->db, &in, NULL, NULL, &e_));
    in.name = "tab\there";
    FAILS(CM_EINVAL, "/name", st_graph_put(f->db, &in, NULL, NULL, &e_));
    in.name = "bad\xff utf8";
    FAILS(CM_EINVAL, "/name", st_graph_put(f->db, &in, NULL, NULL, &e_));
    char longname[ST_NAME_MAX_LEN + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    in.name = longname;
    FAILS(CM_EINVAL, "/name", st_graph_put(f->db, &in, NULL, NULL, &e_));
    in.name = "caf\xc3\xa9"; /* UTF-8 is fine */
    OK(st_graph_put(f->db, &in, NULL, NULL, &e_));
    in.format = (st_graph_format)7;
    FAILS(CM_EINVAL, "/format", st_graph_put(f->db, &in, NULL, NULL, &e_));
    in.format = ST_GRAPH_MLIR;
    in.body_len = 0;
    FAILS(CM_EINVAL, "/body", st_graph_put(f->db, &in, NULL, NULL, &e_));
    in.body_len = 2;
    in.hash = "abc";
    FAILS(CM_EINVAL, "/hash", st_graph_put(f->db, &in, NULL, NULL, &e_));
    in.hash = "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz";
    FAILS(CM_EINVAL, "/hash", st_graph_put(f->db, &in, NULL, NULL, &e_));
    st_graph g;
    FAILS(CM_ENOTFOUND, "/id", st_graph_get(f->db, 12345, &g, &e_));
    assert_null(g.name);
    FAILS(CM_EINVAL, "/id", st_graph_get(f->db, 0, &g, &e_));
    FAILS(CM_EINVAL, "/hash", st_graph_get_by_hash(f->db, "nope", &g, &e_));
    char h[ST_HASH_HEX_LEN + 1];
    hash_of("absent", h);
    FAILS(CM_ENOTFOUND, "/hash", st_graph_get_by_hash(f->db, h, &g, &e_));
    FAILS(CM_ENOTFOUND, "/id", st_graph_delete(f->db, 999, &e_));
    st_graph_format fmt;
    assert_true(st_graph_format_parse("mlir", &fmt));
    assert_int_equal(fmt, ST_GRAPH_MLIR);
    assert_false(st_graph_format_parse("yaml", &fmt));
    assert_string_equal(st_graph_format_name(ST_GRAPH_JSON), "json");
}

static void test_st_graph_list_pages_and_filters(void **state)
{
    fx *f = *state;
    int64_t ids[10];
    char body[64];
    for (int i = 0; i < 10; i++) {
        st_db_set_time(f->db, 1000 + i * 10);
        snprintf(body, sizeof body, "{\"i\":%d}", i);
        ids[i] = put_graph(f->db, i % 2 == 0 ? "even" : "odd",
                           i % 3 == 0 ? ST_GRAPH_MLIR : ST_GRAPH_JSON, body);
    }
    st_db_set_time(f->db, 0);
    /* Pages of 4: 4 + 4 + 2, cursors chain. */
    st_graph_query q;
    st_graph_query_init(&q);
    q.limit = 4;
    st_graph_list l;
    int seen = 0;
    for (int page = 0;; page++) {
        OK(st_graph_list_query(f->db, &q, &l, &e_));
        for (size_t i = 0; i < l.n_items; i++) {
            assert_int_equal(l.items[i].id, ids[seen]);
            assert_null(l.items[i].body);
            assert_true(l.items[i].body_len > 0);
            assert_int_equal(l.items[i].created_at, 1000 + seen * 10);
            seen++;
        }
        int64_t next = l.next_after;
        size_t n = l.n_items;
        st_graph_list_fini(&l);
        if (next == 0) {
            assert_int_equal(page, 2);
            assert_int_equal(n, 2);
            break;
        }
        assert_int_equal(n, 4);
        assert_int_equal(next, ids[seen - 1]);
        q.after_id = next;
    }
    assert_int_equal(seen, 10);
    /* An exact page end says there is no next page. */
    st_graph_query_init(&q);
    q.limit = 10;
    OK(st_graph_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 10);
    assert_int_equal(l.next_after, 0);
    st_graph_list_fini(&l);
    /* Filters: name, format, created range, combined. */
    st_graph_query_init(&q);
    q.name = "odd";
    OK(st_graph_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 5);
    for (size_t i = 0; i < l.n_items; i++) {
        assert_string_equal(l.items[i].name, "odd");
    }
    st_graph_list_fini(&l);
    q.has_format = true;
    q.format = ST_GRAPH_MLIR; /* odd and i % 3 == 0: 3, 9 */
    OK(st_graph_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 2);
    assert_int_equal(l.items[0].id, ids[3]);
    assert_int_equal(l.items[1].id, ids[9]);
    st_graph_list_fini(&l);
    st_graph_query_init(&q);
    q.created_after = 1020;
    q.created_before = 1050; /* i = 2, 3, 4 */
    OK(st_graph_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 3);
    assert_int_equal(l.items[0].id, ids[2]);
    assert_int_equal(l.items[2].id, ids[4]);
    st_graph_list_fini(&l);
    q.name = "nobody";
    OK(st_graph_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 0);
    assert_null(l.items);
    st_graph_list_fini(&l);
    /* Bad queries. */
    st_graph_query_init(&q);
    q.limit = ST_LIST_MAX_LIMIT + 1;
    FAILS(CM_EINVAL, "/limit", st_graph_list_query(f->db, &q, &l, &e_));
    q.limit = 0;
    q.after_id = -1;
    FAILS(CM_EINVAL, "/after", st_graph_list_query(f->db, &q, &l, &e_));
    q.after_id = 0;
    q.created_after = -5;
    FAILS(CM_EINVAL, "/created_after", st_graph_list_query(f->db, &q, &l, &e_));
    q.created_after = 0;
    q.has_format = true;
    q.format = (st_graph_format)9;
    FAILS(CM_EINVAL, "/format", st_graph_list_query(f->db, &q, &l, &e_));
}

static void test_st_graph_delete_cascades_to_plans(void **state)
{
    fx *f = *state;
    int64_t g = put_graph(f->db, "g", ST_GRAPH_JSON, "{}");
    int64_t p = put_plan(f->db, "req-1", g, 0);
    OK(st_graph_delete(f->db, g, &e_));
    st_plan pl;
    FAILS(CM_ENOTFOUND, "/id", st_plan_get(f->db, p, &pl, &e_));
    st_graph gr;
    FAILS(CM_ENOTFOUND, "/id", st_graph_get(f->db, g, &gr, &e_));
    /* Ids are not reused after a delete. */
    int64_t g2 = put_graph(f->db, "g", ST_GRAPH_JSON, "{}");
    assert_true(g2 > g);
    OK(st_db_integrity_check(f->db, &e_));
}

/* ---- named documents ------------------------------------------------------------------------- */

static void test_st_mesh_put_replace_and_conflict(void **state)
{
    fx *f = *state;
    const char *m1 = "{\"axes\":[[\"data\",2],[\"model\",4]]}";
    const char *m2 = "{\"axes\":[[\"data\",8]]}";
    st_db_set_time(f->db, 5000);
    int64_t id = 0, id2 = 0;
    bool existed = true;
    OK(st_mesh_put(f->db, "mesh", m1, strlen(m1), false, &id, &existed, &e_));
    assert_false(existed);
    OK(st_mesh_put(f->db, "mesh", m1, strlen(m1), false, &id2, &existed, &e_));
    assert_true(existed);
    assert_int_equal(id2, id);
    FAILS(CM_ECONFLICT, "/name",
          st_mesh_put(f->db, "mesh", m2, strlen(m2), false, NULL, NULL, &e_));
    st_db_set_time(f->db, 6000);
    OK(st_mesh_put(f->db, "mesh", m2, strlen(m2), true, &id2, &existed, &e_));
    assert_true(existed);
    assert_int_equal(id2, id);
    st_doc d;
    OK(st_mesh_get(f->db, "mesh", &d, &e_));
    assert_int_equal(d.id, id);
    assert_string_equal(d.name, "mesh");
    assert_string_equal(d.body, m2);
    assert_int_equal(d.body_len, strlen(m2));
    assert_int_equal(d.created_at, 5000);
    assert_int_equal(d.updated_at, 6000);
    st_doc_fini(&d);
    OK(st_mesh_get_id(f->db, id, &d, &e_));
    assert_string_equal(d.name, "mesh");
    st_doc_fini(&d);
    FAILS(CM_EINVAL, "/body", st_mesh_put(f->db, "m2", "{not json", 9, false, NULL, NULL, &e_));
    FAILS(CM_EINVAL, "/body", st_mesh_put(f->db, "m2", "", 0, false, NULL, NULL, &e_));
    FAILS(CM_EINVAL, "/name", st_mesh_put(f->db, NULL, "{}", 2, false, NULL, NULL, &e_));
    FAILS(CM_ENOTFOUND, "/name", st_mesh_get(f->db, "absent", &d, &e_));
    FAILS(CM_ENOTFOUND, "/id", st_mesh_get_id(f->db, 777, &d, &e_));
    FAILS(CM_EINVAL, "/name", st_mesh_get(f->db, NULL, &d, &e_));
    /* A plan using the mesh keeps existing when the mesh goes; mesh_id 0. */
    int64_t g = put_graph(f->db, "g", ST_GRAPH_JSON, "{}");
    int64_t p = put_plan(f->db, "req", g, id);
    OK(st_mesh_delete(f->db, "mesh", &e_));
    FAILS(CM_ENOTFOUND, "/name", st_mesh_delete(f->db, "mesh", &e_));
    st_plan pl;
    OK(st_plan_get(f->db, p, &pl, &e_));
    assert_int_equal(pl.mesh_id, 0);
    st_plan_fini(&pl);
}

/* put/get/list/delete of one named-document kind through function pointers. */
typedef cm_status (*doc_put_fn)(st_db *, const char *, const char *, size_t, bool, int64_t *,
                                bool *, cm_error *);
typedef cm_status (*doc_get_fn)(st_db *, const char *, st_doc *, cm_error *);
typedef cm_status (*doc_list_fn)(st_db *, const st_doc_query *, st_doc_list *, cm_error *);
typedef cm_status (*doc_del_fn)(st_db *, const char *, cm_error *);

static void check_doc_kind(st_db *db, doc_put_fn put, doc_get_fn get, doc_list_fn list,
                           doc_del_fn del)
{
    char name[32], body[64];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "n%d", i);
        snprintf(body, sizeof body, "{\"k\":%d}", i);
        bool existed = true;
        OK(put(db, name, body, strlen(body), false, NULL, &existed, &e_));
        assert_false(existed);
    }
    /* PUT semantics: replace = true upserts. */
    bool existed = false;
    OK(put(db, "n1", "{\"k\":\"new\"}", 11, true, NULL, &existed, &e_));
    assert_true(existed);
    st_doc d;
    OK(get(db, "n1", &d, &e_));
    assert_string_equal(d.body, "{\"k\":\"new\"}");
    st_doc_fini(&d);
    st_doc_query q;
    st_doc_query_init(&q);
    q.limit = 3;
    st_doc_list l;
    OK(list(db, &q, &l, &e_));
    assert_int_equal(l.n_items, 3);
    assert_string_equal(l.items[0].name, "n0");
    assert_null(l.items[0].body);
    assert_int_equal(l.items[0].body_len, 7);
    assert_true(l.next_after > 0);
    q.after_id = l.next_after;
    st_doc_list_fini(&l);
    OK(list(db, &q, &l, &e_));
    assert_int_equal(l.n_items, 2);
    assert_string_equal(l.items[1].name, "n4");
    assert_int_equal(l.next_after, 0);
    st_doc_list_fini(&l);
    OK(del(db, "n2", &e_));
    FAILS(CM_ENOTFOUND, "/name", get(db, "n2", &d, &e_));
    FAILS(CM_ENOTFOUND, "/name", del(db, "n2", &e_));
    FAILS(CM_EINVAL, "/body", put(db, "n9", "[1,", 3, true, NULL, NULL, &e_));
    FAILS(CM_EINVAL, "/name", put(db, "", "{}", 2, true, NULL, NULL, &e_));
    FAILS(CM_EINVAL, "/name", del(db, "", &e_));
    q.limit = 5000;
    FAILS(CM_EINVAL, "/limit", list(db, &q, &l, &e_));
}

static void test_st_rule_put_get_list_delete(void **state)
{
    fx *f = *state;
    check_doc_kind(f->db, st_rule_put, st_rule_get, st_rule_list, st_rule_delete);
}

static void test_st_profile_put_get_list_delete(void **state)
{
    fx *f = *state;
    check_doc_kind(f->db, st_profile_put, st_profile_get, st_profile_list, st_profile_delete);
}

static void test_st_mesh_put_get_list_delete(void **state)
{
    fx *f = *state;
    check_doc_kind(f->db, st_mesh_put, st_mesh_get, st_mesh_list, st_mesh_delete);
}

/* ---- plans --------------------------------------------------------------------------------------
 */

static void test_st_plan_put_dedups_by_hash(void **state)
{
    fx *f = *state;
    int64_t g = put_graph(f->db, "g", ST_GRAPH_JSON, "{}");
    int64_t mesh = 0;
    OK(st_mesh_put(f->db, "m", "{}", 2, false, &mesh, NULL, &e_));
    char h[ST_HASH_HEX_LEN + 1];
    hash_of("request", h);
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = h;
    in.graph_id = g;
    in.mesh_id = mesh;
    in.body = "{\"plan\":true}";
    in.body_len = strlen(in.body);
    int64_t id = 0, id2 = 0;
    bool existed = true;
    OK(st_plan_put(f->db, &in, &id, &existed, &e_));
    assert_false(existed);
    OK(st_plan_put(f->db, &in, &id2, &existed, &e_));
    assert_true(existed);
    assert_int_equal(id, id2);
    st_plan p;
    OK(st_plan_get_by_hash(f->db, h, &p, &e_));
    assert_int_equal(p.id, id);
    assert_string_equal(p.hash, h);
    assert_int_equal(p.graph_id, g);
    assert_int_equal(p.mesh_id, mesh);
    assert_string_equal(p.options, "{}");
    assert_string_equal(p.body, "{\"plan\":true}");
    assert_int_equal(p.body_len, 13);
    st_plan_fini(&p);
    OK(st_plan_get(f->db, id, &p, &e_));
    assert_int_equal(p.id, id);
    st_plan_fini(&p);
    /* Errors. */
    char h2[ST_HASH_HEX_LEN + 1];
    hash_of("request-2", h2);
    in.hash = h2;
    in.graph_id = 4242;
    FAILS(CM_ENOTFOUND, "/graph_id", st_plan_put(f->db, &in, NULL, NULL, &e_));
    in.graph_id = g;
    in.mesh_id = 4242;
    FAILS(CM_ENOTFOUND, "/mesh_id", st_plan_put(f->db, &in, NULL, NULL, &e_));
    in.mesh_id = -1;
    FAILS(CM_EINVAL, "/mesh_id", st_plan_put(f->db, &in, NULL, NULL, &e_));
    in.mesh_id = 0;
    in.options = "{bad";
    in.options_len = 4;
    FAILS(CM_EINVAL, "/options", st_plan_put(f->db, &in, NULL, NULL, &e_));
    in.options = NULL;
    in.hash = NULL;
    FAILS(CM_EINVAL, "/hash", st_plan_put(f->db, &in, NULL, NULL, &e_));
    in.hash = h2;
    in.graph_id = 0;
    FAILS(CM_EINVAL, "/graph_id", st_plan_put(f->db, &in, NULL, NULL, &e_));
    in.graph_id = g;
    in.body_len = 0;
    FAILS(CM_EINVAL, "/body", st_plan_put(f->db, &in, NULL, NULL, &e_));
    FAILS(CM_ENOTFOUND, "/hash", st_plan_get_by_hash(f->db, h2, &p, &e_));
    FAILS(CM_ENOTFOUND, "/id", st_plan_get(f->db, 999, &p, &e_));
    FAILS(CM_ENOTFOUND, "/id", st_plan_delete(f->db, 999, &e_));
    /* Nothing was written by the failed puts. */
    st_plan_list l;
    list_plans(f->db, &l, 1);
    st_plan_list_fini(&l);
    OK(st_plan_delete(f->db, id, &e_));
    FAILS(CM_ENOTFOUND, "/id", st_plan_get(f->db, id, &p, &e_));
}

static void test_st_plan_list_filters(void **state)
{
    fx *f = *state;
    int64_t g1 = put_graph(f->db, "g1", ST_GRAPH_JSON, "{\"a\":1}");
    int64_t g2 = put_graph(f->db, "g2", ST_GRAPH_JSON, "{\"a\":2}");
    int64_t m = 0;
    OK(st_mesh_put(f->db, "m", "{}", 2, false, &m, NULL, &e_));
    char key[32];
    for (int i = 0; i < 9; i++) {
        st_db_set_time(f->db, 100 + i);
        snprintf(key, sizeof key, "req-%d", i);
        put_plan(f->db, key, i < 6 ? g1 : g2, i % 2 == 0 ? m : 0);
    }
    st_plan_query q;
    st_plan_query_init(&q);
    st_plan_list l;
    q.graph_id = g1;
    q.limit = 4;
    OK(st_plan_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 4);
    assert_true(l.next_after != 0);
    assert_null(l.items[0].body);
    assert_string_equal(l.items[0].options, "{\"pass\":\"pipeline\"}");
    q.after_id = l.next_after;
    st_plan_list_fini(&l);
    OK(st_plan_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 2);
    assert_int_equal(l.next_after, 0);
    st_plan_list_fini(&l);
    st_plan_query_init(&q);
    q.mesh_id = m; /* i = 0, 2, 4, 6, 8 */
    OK(st_plan_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 5);
    st_plan_list_fini(&l);
    q.graph_id = g2; /* 6, 8 */
    OK(st_plan_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 2);
    st_plan_list_fini(&l);
    st_plan_query_init(&q);
    q.created_after = 103;
    q.created_before = 105;
    OK(st_plan_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 2);
    assert_int_equal(l.items[0].created_at, 103);
    st_plan_list_fini(&l);
    q.created_before = -1;
    FAILS(CM_EINVAL, "/created_before", st_plan_list_query(f->db, &q, &l, &e_));
    st_plan_query_init(&q);
    q.graph_id = -3;
    FAILS(CM_EINVAL, "/graph_id", st_plan_list_query(f->db, &q, &l, &e_));
}

/* Runs sql on the handle's own connection (fixtures only). */
static void conn_exec(st_db *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db->conn, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "conn_exec: %s\n", msg != NULL ? msg : "?");
    }
    sqlite3_free(msg);
    assert_int_equal(rc, SQLITE_OK);
}

/* A list filtered by graph, mesh, plan or status walks that key's index,
 * not every row after the cursor: with 4,000 plans and runs of one key, a
 * filter matching one row (or none) costs a few SQLite steps. Before, each
 * such query stepped through the whole table (about 60,000 steps here; a
 * second a query on a server with 130,000 plans). */
static void test_st_lists_walk_their_index(void **state)
{
    fx *f = *state;
    int64_t g1 = put_graph(f->db, "g1", ST_GRAPH_JSON, "{\"a\":1}");
    int64_t g2 = put_graph(f->db, "g2", ST_GRAPH_JSON, "{\"a\":2}");
    int64_t m = 0;
    OK(st_mesh_put(f->db, "m", "{}", 2, false, &m, NULL, &e_));
    char sql[1024];
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000)"
             " INSERT INTO plans (hash, graph_id, mesh_id, options, body, created_at)"
             " SELECT printf('%%064d', i), %lld, NULL, '{}', '{}', 100 FROM n;"
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000)"
             " INSERT INTO bench_runs (plan_id, spec, status, created_at, updated_at)"
             " SELECT 1, '{}', 'succeeded', 100, 100 FROM n;",
             (long long)g1);
    conn_exec(f->db, sql);
    int64_t last = put_plan(f->db, "the-one", g2, m);
    st_plan_query q;
    st_plan_list l;
    const int64_t graphs[] = {g2, 0, 999};
    const int64_t meshes[] = {0, m, m};
    for (size_t i = 0; i < 3; i++) {
        st_plan_query_init(&q);
        q.graph_id = graphs[i];
        q.mesh_id = meshes[i];
        OK(st_plan_list_query(f->db, &q, &l, &e_));
        assert_int_equal(l.n_items, i < 2 ? 1 : 0);
        if (l.n_items == 1) {
            assert_int_equal(l.items[0].id, last);
        }
        st_plan_list_fini(&l);
        if (f->db->list_steps > 500) {
            fprintf(stderr, "plan list %zu: %d SQLite steps\n", i, f->db->list_steps);
        }
        assert_true(f->db->list_steps <= 500);
    }
    /* the graph's own list still pages through its 4,000 in id order */
    st_plan_query_init(&q);
    q.graph_id = g1;
    q.after_id = 3990;
    OK(st_plan_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 10);
    assert_int_equal(l.items[0].id, 3991);
    assert_int_equal(l.items[9].id, 4000);
    st_plan_list_fini(&l);
    /* benchmark runs by plan and by status */
    int64_t run = 0;
    OK(st_bench_create(f->db, last, "{}", 2, NULL, &run, &e_));
    st_bench_query bq;
    st_bench_list bl;
    for (int i = 0; i < 2; i++) {
        st_bench_query_init(&bq);
        if (i == 0) {
            bq.plan_id = last;
        } else {
            bq.has_status = true;
            bq.status = ST_BENCH_QUEUED;
        }
        OK(st_bench_list_query(f->db, &bq, &bl, &e_));
        assert_int_equal(bl.n_items, 1);
        assert_int_equal(bl.items[0].id, run);
        st_bench_list_fini(&bl);
        if (f->db->list_steps > 500) {
            fprintf(stderr, "bench list %d: %d SQLite steps\n", i, f->db->list_steps);
        }
        assert_true(f->db->list_steps <= 500);
    }
}

/* Follows a plan list (q's filters) page by page; returns the ids found
 * (at most cap, in *ids) and the most SQLite steps one page took. */
static size_t plan_pages(st_db *db, st_plan_query q, int64_t *ids, size_t cap, int *max_steps,
                         int *pages)
{
    size_t n = 0;
    *max_steps = 0;
    *pages = 0;
    for (;;) {
        st_plan_list l;
        OK(st_plan_list_query(db, &q, &l, &e_));
        for (size_t i = 0; i < l.n_items && n < cap; i++) {
            ids[n++] = l.items[i].id;
        }
        *max_steps = db->list_steps > *max_steps ? db->list_steps : *max_steps;
        (*pages)++;
        q.after_id = l.next_after;
        st_plan_list_fini(&l);
        if (q.after_id == 0) {
            return n;
        }
    }
}

/* A filter no index serves examines at most ST_LIST_SCAN_ROWS rows a page:
 * over 50,000 plans (or graphs) of which the last matches, the pages before
 * it come back empty with a cursor, each bounded, and following them finds
 * it. Before, the first page walked every row (a second over 130,000). */
static void test_st_unindexed_filters_are_bounded(void **state)
{
    fx *f = *state;
    int64_t g = put_graph(f->db, "g", ST_GRAPH_JSON, "{\"a\":1}");
    char sql[1024];
    snprintf(sql, sizeof sql,
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000)"
             " INSERT INTO plans (hash, graph_id, mesh_id, options, body, created_at)"
             " SELECT printf('%%064d', i), %lld, NULL, '{}', '{}', 100 FROM n;"
             "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000)"
             " INSERT INTO graphs (name, format, hash, body, created_at)"
             " SELECT 'hay', 'json', printf('%%064d', i), '{}', 100 FROM n;",
             (long long)g);
    conn_exec(f->db, sql);
    st_db_set_time(f->db, 200);
    int64_t last = put_plan(f->db, "needle", g, 0);
    int64_t glast = put_graph(f->db, "needle", ST_GRAPH_MLIR, "module {}");
    st_plan_query q;
    st_plan_query_init(&q);
    q.created_after = 150;
    int64_t ids[4];
    int steps = 0, pages = 0;
    assert_int_equal(plan_pages(f->db, q, ids, 4, &steps, &pages), 1);
    assert_int_equal(ids[0], last);
    assert_true(pages >= 3);
    if (steps > 8 * ST_LIST_SCAN_ROWS) {
        fprintf(stderr, "a plan page took %d SQLite steps\n", steps);
    }
    assert_true(steps <= 8 * ST_LIST_SCAN_ROWS); /* about 6 a row */
    q.graph_id = g;                              /* with the graph index walked too */
    assert_int_equal(plan_pages(f->db, q, ids, 4, &steps, &pages), 1);
    assert_int_equal(ids[0], last);
    assert_true(steps <= 8 * ST_LIST_SCAN_ROWS);
    /* every page of an unfiltered list is still full */
    st_plan_query_init(&q);
    q.limit = 1000;
    st_plan_list l;
    OK(st_plan_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 1000);
    assert_int_equal(l.next_after, l.items[999].id);
    st_plan_list_fini(&l);
    /* graphs by name and by format */
    for (int i = 0; i < 2; i++) {
        st_graph_query gq;
        st_graph_query_init(&gq);
        if (i == 0) {
            gq.name = "needle";
        } else {
            gq.has_format = true;
            gq.format = ST_GRAPH_MLIR;
        }
        int64_t found = 0;
        int gpages = 0, gsteps = 0;
        for (;;) {
            st_graph_list gl;
            OK(st_graph_list_query(f->db, &gq, &gl, &e_));
            if (gl.n_items > 0) {
                found = gl.items[0].id;
            }
            gsteps = f->db->list_steps > gsteps ? f->db->list_steps : gsteps;
            gpages++;
            gq.after_id = gl.next_after;
            st_graph_list_fini(&gl);
            if (gq.after_id == 0) {
                break;
            }
        }
        assert_int_equal(found, glast);
        assert_true(gpages >= 3);
        if (gsteps > 25 * ST_LIST_SCAN_ROWS) {
            fprintf(stderr, "a graph page took %d SQLite steps\n", gsteps);
        }
        assert_true(gsteps <= 25 * ST_LIST_SCAN_ROWS); /* about 20 a row by name, 6 by format */
    }
}

/* A plan keeps what it was planned from: a merged graph document, or MLIR
 * text with a rules document; one stored without an input reads back NULL;
 * lists give lengths but no text; a second put of a stored hash stores
 * nothing; bad inputs and rules fail at their paths and write nothing. */
/* A plan put with its graph stores both in one transaction: a new graph
 * is inserted, a known one found (its new name an alias), and a bad graph
 * or a graph_id beside it writes nothing. */
static void test_st_plan_put_with_graph(void **state)
{
    fx *f = *state;
    char h1[ST_HASH_HEX_LEN + 1], h2[ST_HASH_HEX_LEN + 1], h3[ST_HASH_HEX_LEN + 1];
    hash_of("with-graph-1", h1);
    hash_of("with-graph-2", h2);
    hash_of("with-graph-3", h3);
    st_graph_in gi = graph_in("inline", ST_GRAPH_JSON, "{\"inline\":1}");
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = h1;
    in.body = "{\"plan\":1}";
    in.body_len = strlen(in.body);
    in.graph = &gi;
    int64_t id1 = 0, id2 = 0;
    OK(st_plan_put(f->db, &in, &id1, NULL, &e_));
    st_plan p;
    OK(st_plan_get(f->db, id1, &p, &e_));
    int64_t g1 = p.graph_id;
    st_plan_fini(&p);
    st_graph g;
    OK(st_graph_get(f->db, g1, &g, &e_));
    assert_string_equal(g.body, "{\"inline\":1}");
    assert_string_equal(g.name, "inline");
    st_graph_fini(&g);
    /* same content under another name: the same graph row */
    st_graph_in gi2 = graph_in("again", ST_GRAPH_JSON, "{\"inline\":1}");
    in.hash = h2;
    in.graph = &gi2;
    OK(st_plan_put(f->db, &in, &id2, NULL, &e_));
    OK(st_plan_get(f->db, id2, &p, &e_));
    assert_int_equal(p.graph_id, g1);
    st_plan_fini(&p);
    /* a graph beside a graph id, and a graph with no body, are refused */
    in.hash = h3;
    in.graph_id = g1;
    FAILS(CM_EINVAL, "/graph_id", st_plan_put(f->db, &in, NULL, NULL, &e_));
    st_graph_in bad = graph_in("bad", ST_GRAPH_JSON, "");
    in.graph_id = 0;
    in.graph = &bad;
    FAILS(CM_EINVAL, "/body", st_plan_put(f->db, &in, NULL, NULL, &e_));
    FAILS(CM_ENOTFOUND, "/hash", st_plan_get_by_hash(f->db, h3, &p, &e_));
}

/* An input equal to the body of the graph stored in the same put (an inline
 * graph document with nothing merged in) is kept once, in the graph row, and
 * reads back the same through get, get-by-hash and list; an input that
 * differs from its graph by one byte, or is in the other format, or comes
 * with rules, keeps its own copy. */
static void test_st_plan_put_shares_input_with_graph(void **state)
{
    fx *f = *state;
    const char *doc = "{\"format\":\"shardplan.graph/v1\",\"ops\":[]}";
    const char *mlir = "module {\n}\n";
    const char *rules = "{\"custom_rules\":{}}";
    char h[4][ST_HASH_HEX_LEN + 1];
    hash_of("shared", h[0]);
    hash_of("differs", h[1]);
    hash_of("mlir-shared", h[2]);
    hash_of("mlir-rules", h[3]);
    st_graph_in g = graph_in("inline", ST_GRAPH_JSON, doc);
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = h[0];
    in.graph = &g;
    in.body = "{\"plan\":1}";
    in.body_len = strlen(in.body);
    in.input = doc;
    in.input_len = strlen(doc);
    int64_t id[4] = {0};
    OK(st_plan_put(f->db, &in, &id[0], NULL, &e_));
    /* the same graph content again (found by hash), a different input */
    char other[128];
    snprintf(other, sizeof other, "%s ", doc);
    in.hash = h[1];
    in.input = other;
    in.input_len = strlen(other);
    OK(st_plan_put(f->db, &in, &id[1], NULL, &e_));
    st_graph_in gm = graph_in("mod", ST_GRAPH_MLIR, mlir);
    in.graph = &gm;
    in.hash = h[2];
    in.input = mlir;
    in.input_len = strlen(mlir);
    in.input_is_mlir = true;
    OK(st_plan_put(f->db, &in, &id[2], NULL, &e_));
    in.hash = h[3];
    in.rules = rules;
    in.rules_len = strlen(rules);
    OK(st_plan_put(f->db, &in, &id[3], NULL, &e_));

    char t[64], sql[160];
    const char *want_flag[4] = {"1|", "0|json", "1|", "0|mlir"};
    for (int i = 0; i < 4; i++) {
        snprintf(sql, sizeof sql,
                 "SELECT input_is_graph || '|' || COALESCE(input_format, '') FROM plans "
                 "WHERE id = %lld",
                 (long long)id[i]);
        raw_text(f->path, sql, t, sizeof t);
        assert_string_equal(t, want_flag[i]);
    }
    const char *want_input[4] = {doc, other, mlir, mlir};
    const bool want_mlir[4] = {false, false, true, true};
    for (int i = 0; i < 4; i++) {
        st_plan p;
        OK(i % 2 == 0 ? st_plan_get(f->db, id[i], &p, &e_)
                      : st_plan_get_by_hash(f->db, h[i], &p, &e_));
        assert_int_equal(p.id, id[i]);
        assert_string_equal(p.input, want_input[i]);
        assert_int_equal(p.input_len, strlen(want_input[i]));
        assert_int_equal(p.input_is_mlir, want_mlir[i]);
        if (i == 3) {
            assert_string_equal(p.rules, rules);
        } else {
            assert_null(p.rules);
        }
        st_plan_fini(&p);
    }
    st_plan_list l;
    list_plans(f->db, &l, 4);
    for (size_t i = 0; i < l.n_items; i++) {
        assert_int_equal(l.items[i].id, id[i]);
        assert_int_equal(l.items[i].input_len, strlen(want_input[i]));
        assert_int_equal(l.items[i].input_is_mlir, want_mlir[i]);
        assert_null(l.items[i].input);
    }
    st_plan_list_fini(&l);
    /* the marker needs an empty input and no rules (a CHECK) */
    snprintf(sql, sizeof sql, "UPDATE plans SET input_is_graph = 1 WHERE id = %lld",
             (long long)id[1]);
    assert_int_not_equal(raw_exec_rc(f->path, sql), SQLITE_OK);
    OK(st_db_integrity_check(f->db, &e_));
}

/* A JSON document of about n bytes (n + 64 of room at d), repetitive like
 * a plan document. */
static void doc_into(char *d, size_t n, int salt)
{
    size_t len = (size_t)snprintf(d, 64, "{\"salt\":%d,\"ops\":[", salt);
    while (len + 40 < n) {
        len += (size_t)snprintf(d + len, 40, "{\"op\":\"stablehlo.add\",\"i\":%zu},", len);
    }
    memcpy(d + len, "{}]}", 5);
}

static char *doc_of(size_t n, int salt)
{
    char *d = cm_alloc(n + 64);
    assert_non_null(d);
    doc_into(d, n, salt);
    return d;
}

/* Large graph and plan bodies are kept zstd-coded and read back as put
 * through get, get-by-hash and list (sizes as put); small and incompressible
 * ones stay as they are; a damaged coded row is an error naming it, and the
 * other rows still read. */
static void test_st_bodies_are_coded(void **state)
{
    fx *f = *state;
    char *big = doc_of(20000, 1), *plan = doc_of(30000, 2);
    char noise[2048];
    uint64_t x = 88172645463325252u;
    for (size_t i = 0; i < sizeof noise - 1; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        noise[i] = (char)(unsigned char)(1u + x % 255u); /* no NUL, ~8 bits a byte */
    }
    noise[sizeof noise - 1] = '\0';
    int64_t g_big = put_graph(f->db, "big", ST_GRAPH_JSON, big);
    int64_t g_small = put_graph(f->db, "small", ST_GRAPH_JSON, "{\"ops\":[]}");
    int64_t g_noise = put_graph(f->db, "noise", ST_GRAPH_MLIR, noise);
    char h[ST_HASH_HEX_LEN + 1];
    hash_of("coded plan", h);
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = h;
    in.graph_id = g_big;
    in.body = plan;
    in.body_len = strlen(plan);
    int64_t pid = 0;
    OK(st_plan_put(f->db, &in, &pid, NULL, &e_));

    char t[128], sql[200];
    const int64_t gids[3] = {g_big, g_small, g_noise};
    const char *want[3] = {"1", "0", "0"};
    for (int i = 0; i < 3; i++) {
        snprintf(sql, sizeof sql, "SELECT body_coding FROM graphs WHERE id = %lld",
                 (long long)gids[i]);
        raw_text(f->path, sql, t, sizeof t);
        assert_string_equal(t, want[i]);
    }
    snprintf(sql, sizeof sql,
             "SELECT body_coding || ' ' || (length(body) * 5 < %zu) FROM plans WHERE id = %lld",
             strlen(plan), (long long)pid);
    raw_text(f->path, sql, t, sizeof t);
    assert_string_equal(t, "1 1"); /* coded, and to less than a fifth */

    st_graph g;
    OK(st_graph_get(f->db, g_big, &g, &e_));
    assert_int_equal(g.body_len, strlen(big));
    assert_memory_equal(g.body, big, g.body_len);
    st_graph_fini(&g);
    OK(st_graph_get(f->db, g_noise, &g, &e_));
    assert_string_equal(g.body, noise);
    assert_int_equal(g.format, ST_GRAPH_MLIR);
    st_graph_fini(&g);
    st_plan p;
    OK(st_plan_get_by_hash(f->db, h, &p, &e_));
    assert_int_equal(p.body_len, strlen(plan));
    assert_string_equal(p.body, plan);
    st_plan_fini(&p);
    st_graph_query gq;
    st_graph_query_init(&gq);
    st_graph_list gl;
    OK(st_graph_list_query(f->db, &gq, &gl, &e_));
    assert_int_equal(gl.n_items, 3);
    assert_int_equal(gl.items[0].body_len, strlen(big));
    assert_int_equal(gl.items[2].body_len, strlen(noise));
    st_graph_list_fini(&gl);
    st_plan_list pl;
    list_plans(f->db, &pl, 1);
    assert_int_equal(pl.items[0].body_len, strlen(plan));
    st_plan_list_fini(&pl);

    /* a damaged coded body: its reads fail and say so; the rest read */
    snprintf(sql, sizeof sql,
             "UPDATE graphs SET body = substr(body, 1, length(body) / 2) WHERE id = %lld",
             (long long)g_big);
    assert_int_equal(raw_exec_rc(f->path, sql), SQLITE_OK);
    cm_error de;
    cm_error_clear(&de);
    assert_int_not_equal(st_graph_get(f->db, g_big, &g, &de), CM_OK);
    assert_non_null(strstr(de.msg, "damaged"));
    snprintf(sql, sizeof sql, "UPDATE graphs SET body = X'00' WHERE id = %lld", (long long)g_big);
    assert_int_equal(raw_exec_rc(f->path, sql), SQLITE_OK);
    cm_error_clear(&de);
    assert_int_not_equal(st_graph_get(f->db, g_big, &g, &de), CM_OK);
    assert_non_null(strstr(de.msg, "damaged"));
    OK(st_graph_get(f->db, g_small, &g, &e_));
    assert_string_equal(g.body, "{\"ops\":[]}");
    st_graph_fini(&g);
    cm_free(big);
    cm_free(plan);
}

typedef struct wal_reader {
    const char *path;
    _Atomic bool stop;
    long reads;
} wal_reader;

/* A reader nearly always on the WAL: read transactions of 5 ms each, back
 * to back, on a connection of its own. */
static void *wal_read_loop(void *arg)
{
    wal_reader *r = arg;
    sqlite3 *c = NULL;
    assert_int_equal(sqlite3_open_v2(r->path, &c, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_busy_timeout(c, 5000);
    while (!atomic_load(&r->stop)) {
        if (sqlite3_exec(c, "BEGIN; SELECT count(*) FROM graphs;", NULL, NULL, NULL) == SQLITE_OK) {
            r->reads++;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
        (void)sqlite3_exec(c, "COMMIT", NULL, NULL, NULL);
    }
    sqlite3_close(c);
    return NULL;
}

/* Sustained writes beside a reader that is nearly always on the WAL (in a
 * read transaction): the checkpoints still start the WAL over, so its file stays near the
 * checkpoint window (passive checkpoints alone let it grow with the writes:
 * 112-267 MiB in 15 s of plan POSTs). About 120 MB of incompressible graph
 * bodies (some 330 MB of WAL frames with the index pages) go through a
 * 32 MiB window. */
static void test_st_db_wal_stays_bounded_beside_readers(void **state)
{
    fx *f = *state;
    wal_reader r = {.path = f->path};
    put_graph(f->db, "first", ST_GRAPH_JSON, "{}");
    atomic_init(&r.stop, false);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wal_read_loop, &r), 0);
    enum { N = 6000, LEN = 20000 };
    char *body = cm_alloc(LEN + 1);
    assert_non_null(body);
    uint64_t x = 0x9E3779B97F4A7C15u;
    char path[512];
    snprintf(path, sizeof path, "%s-wal", f->path);
    long max_wal = 0;
    double t0 = cm_now();
    for (int i = 0; i < N; i++) {
        for (size_t k = 0; k < LEN; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            body[k] = (char)(unsigned char)(1u + x % 255u);
        }
        body[LEN] = '\0';
        char name[32];
        snprintf(name, sizeof name, "g%d", i);
        put_graph(f->db, name, ST_GRAPH_MLIR, body);
        struct stat sb;
        if (stat(path, &sb) == 0 && (long)sb.st_size > max_wal) {
            max_wal = (long)sb.st_size;
        }
    }
    atomic_store(&r.stop, true);
    pthread_join(th, NULL);
    cm_free(body);
    print_message("WAL file at most %.1f MiB over %d puts of %d bytes in %.1f s; %ld reads "
                  "beside\n",
                  (double)max_wal / 1048576.0, N, LEN, cm_now() - t0, r.reads);
    assert_true(r.reads > 0);
    /* the 32 MiB window, what the writer adds while the checkpoint thread
     * copies, and a retry or two; passive checkpoints reach the 256 MiB
     * hard limit here */
    assert_true(max_wal < 128L * 1024 * 1024);
    /* and the checkpoint thread copied most of it beside the writes, not
     * while holding the handle (its connection once copied nothing, having
     * never read the file, so the whole window was copied under the lock) */
    int64_t bulk = 0, final = 0;
    st_db_checkpoint_stats(f->db, &bulk, &final);
    print_message("checkpoints copied %lld pages beside the writes, %lld holding the handle\n",
                  (long long)bulk, (long long) final);
    assert_true(bulk > 0);
    assert_true(bulk > 2 * final);
    OK(st_db_integrity_check(f->db, &e_));
}

/* st_plan_put_row's row is the one a list returns, field for field: for a
 * new plan (not read back) and for a hash stored already (read back). */
static void assert_same_row(const st_plan *a, const st_plan *b)
{
    assert_int_equal(a->id, b->id);
    assert_string_equal(a->hash, b->hash);
    assert_int_equal(a->graph_id, b->graph_id);
    assert_int_equal(a->mesh_id, b->mesh_id);
    assert_int_equal(a->options_len, b->options_len);
    assert_memory_equal(a->options, b->options, a->options_len);
    assert_int_equal(a->body_len, b->body_len);
    assert_int_equal(a->created_at, b->created_at);
    assert_int_equal(a->input_len, b->input_len);
    assert_int_equal(a->input_is_mlir, b->input_is_mlir);
    assert_int_equal(a->rules_len, b->rules_len);
    assert_null(a->body);
    assert_null(a->input);
    assert_null(a->rules);
}

static void test_st_plan_put_row_is_the_listed_row(void **state)
{
    fx *f = *state;
    st_db_set_time(f->db, 1700000000);
    const char *doc = "{\"format\":\"shardplan.graph/v1\",\"ops\":[]}";
    const char *mlir = "module {\n}\n";
    const char *rules = "{\"custom_rules\":{}}";
    st_graph_in g = graph_in("inline", ST_GRAPH_JSON, doc);
    int64_t gm = put_graph(f->db, "mod", ST_GRAPH_MLIR, mlir);
    char h1[ST_HASH_HEX_LEN + 1], h2[ST_HASH_HEX_LEN + 1];
    hash_of("row one", h1);
    hash_of("row two", h2);
    for (size_t i = 0; h2[i] != '\0'; i++) { /* upper case is folded */
        h2[i] = h2[i] >= 'a' && h2[i] <= 'f' ? (char)(h2[i] - 'a' + 'A') : h2[i];
    }
    st_plan_in in[2];
    memset(in, 0, sizeof in);
    in[0].hash = h1;
    in[0].graph = &g;
    in[0].body = "{\"plan\":1}";
    in[0].body_len = strlen(in[0].body);
    in[0].input = doc;
    in[0].input_len = strlen(doc);
    in[1].hash = h2;
    in[1].graph_id = gm;
    in[1].options = "{\"pass\":\"x\"}";
    in[1].options_len = strlen(in[1].options);
    in[1].body = "{\"plan\":2}";
    in[1].body_len = strlen(in[1].body);
    in[1].input = mlir;
    in[1].input_len = strlen(mlir);
    in[1].input_is_mlir = true;
    in[1].rules = rules;
    in[1].rules_len = strlen(rules);
    st_plan row[2], again;
    bool existed = true;
    for (int i = 0; i < 2; i++) {
        OK(st_plan_put_row(f->db, &in[i], &row[i], &existed, &e_));
        assert_false(existed);
    }
    OK(st_plan_put_row(f->db, &in[1], &again, &existed, &e_));
    assert_true(existed);
    st_plan_list l;
    list_plans(f->db, &l, 2);
    for (int i = 0; i < 2; i++) {
        assert_same_row(&row[i], &l.items[i]);
        st_plan_fini(&row[i]);
    }
    assert_same_row(&again, &l.items[1]);
    st_plan_fini(&again);
    st_plan_list_fini(&l);
    in[0].hash = "not a hash";
    FAILS(CM_EINVAL, "/hash", st_plan_put_row(f->db, &in[0], &again, NULL, &e_));
    assert_null(again.options);
}

static void test_st_plan_put_keeps_input(void **state)
{
    fx *f = *state;
    int64_t g = put_graph(f->db, "g", ST_GRAPH_JSON, "{}");
    const char *merged = "{\"ops\":[],\"meshes\":{\"m\":[[\"x\",8]]},\"custom_rules\":{}}";
    const char *mlir = "module {\n  func.func @main() {\n    return\n  }\n}\n";
    const char *rules = "{\"custom_rules\":{\"my_call\":{\"rule\":\"i,j->i\"}}}";
    char h1[ST_HASH_HEX_LEN + 1], h2[ST_HASH_HEX_LEN + 1], h3[ST_HASH_HEX_LEN + 1];
    hash_of("json-input", h1);
    hash_of("mlir-input", h2);
    hash_of("bad-input", h3);
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = h1;
    in.graph_id = g;
    in.body = "{\"plan\":1}";
    in.body_len = strlen(in.body);
    in.input = merged;
    in.input_len = strlen(merged);
    int64_t id1 = 0, id2 = 0, again = 0;
    bool existed = true;
    OK(st_plan_put(f->db, &in, &id1, &existed, &e_));
    assert_false(existed);
    in.hash = h2;
    in.input = mlir;
    in.input_len = strlen(mlir);
    in.input_is_mlir = true;
    in.rules = rules;
    in.rules_len = strlen(rules);
    OK(st_plan_put(f->db, &in, &id2, NULL, &e_));
    int64_t id3 = put_plan(f->db, "no-input", g, 0);

    st_plan p;
    OK(st_plan_get(f->db, id1, &p, &e_));
    assert_string_equal(p.body, "{\"plan\":1}");
    assert_string_equal(p.input, merged);
    assert_int_equal(p.input_len, strlen(merged));
    assert_false(p.input_is_mlir);
    assert_null(p.rules);
    assert_int_equal(p.rules_len, 0);
    st_plan_fini(&p);
    OK(st_plan_get_by_hash(f->db, h2, &p, &e_));
    assert_int_equal(p.id, id2);
    assert_string_equal(p.input, mlir);
    assert_int_equal(p.input_len, strlen(mlir));
    assert_true(p.input_is_mlir);
    assert_string_equal(p.rules, rules);
    assert_int_equal(p.rules_len, strlen(rules));
    st_plan_fini(&p);
    assert_null(p.input); /* fini leaves it zeroed */
    OK(st_plan_get(f->db, id3, &p, &e_));
    assert_string_equal(p.body, "{\"plan\":1}");
    assert_null(p.input);
    assert_int_equal(p.input_len, 0);
    assert_false(p.input_is_mlir);
    assert_null(p.rules);
    st_plan_fini(&p);

    st_plan_list l;
    list_plans(f->db, &l, 3);
    for (size_t i = 0; i < l.n_items; i++) {
        assert_null(l.items[i].body);
        assert_null(l.items[i].input);
        assert_null(l.items[i].rules);
    }
    assert_int_equal(l.items[0].input_len, strlen(merged));
    assert_false(l.items[0].input_is_mlir);
    assert_int_equal(l.items[1].input_len, strlen(mlir));
    assert_true(l.items[1].input_is_mlir);
    assert_int_equal(l.items[1].rules_len, strlen(rules));
    assert_int_equal(l.items[2].input_len, 0);
    st_plan_list_fini(&l);

    /* The stored plan wins over a second put of its hash. */
    in.hash = h1;
    OK(st_plan_put(f->db, &in, &again, &existed, &e_));
    assert_true(existed);
    assert_int_equal(again, id1);
    OK(st_plan_get(f->db, id1, &p, &e_));
    assert_string_equal(p.input, merged);
    assert_null(p.rules);
    st_plan_fini(&p);

    /* Errors. */
    in.hash = h3;
    in.input = NULL;
    FAILS(CM_EINVAL, "/rules", st_plan_put(f->db, &in, NULL, NULL, &e_));
    in.input = merged;
    in.input_len = strlen(merged);
    in.input_is_mlir = false;
    FAILS(CM_EINVAL, "/rules", st_plan_put(f->db, &in, NULL, NULL, &e_));
    in.input = mlir;
    in.input_len = strlen(mlir);
    in.input_is_mlir = true;
    in.rules = "{bad";
    in.rules_len = 4;
    FAILS(CM_EINVAL, "/rules", st_plan_put(f->db, &in, NULL, NULL, &e_));
    in.rules_len = 0;
    FAILS(CM_EINVAL, "/rules", st_plan_put(f->db, &in, NULL, NULL, &e_));
    in.rules = NULL;
    in.input_len = 0;
    FAILS(CM_EINVAL, "/input", st_plan_put(f->db, &in, NULL, NULL, &e_));
    FAILS(CM_ENOTFOUND, "/hash", st_plan_get_by_hash(f->db, h3, &p, &e_));
    assert_null(p.input);
    list_plans(f->db, &l, 3);
    st_plan_list_fini(&l);
}

/* ---- benchmark runs -------------------------------------------------------------------------- */

/* Migration reports (schema 7): stored once per hash, read back whole,
 * listed without bodies, bad fields refused at their path. */
static void test_st_migreport_put_get_list(void **state)
{
    fx *f = *state;
    char h[ST_HASH_HEX_LEN + 1], h2[ST_HASH_HEX_LEN + 1];
    hash_of("migration", h);
    hash_of("migration 2", h2);
    st_migreport_in in = {h, "model.mlir", "cpu-local", "module {}", 9, "{\"divergences\":[]}", 18};
    int64_t id = 0, id2 = 0;
    bool existed = true;
    OK(st_migreport_put(f->db, &in, &id, &existed, &e_));
    assert_false(existed);
    OK(st_migreport_put(f->db, &in, &id2, &existed, &e_));
    assert_true(existed);
    assert_int_equal(id, id2);
    in.hash = h2;
    OK(st_migreport_put(f->db, &in, &id2, &existed, &e_));
    assert_true(id2 > id);
    st_migreport r;
    OK(st_migreport_get(f->db, id, &r, &e_));
    assert_string_equal(r.hash, h);
    assert_string_equal(r.name, "model.mlir");
    assert_string_equal(r.profile, "cpu-local");
    assert_string_equal(r.input, "module {}");
    assert_string_equal(r.body, "{\"divergences\":[]}");
    assert_int_equal(r.body_len, 18);
    st_migreport_fini(&r);
    OK(st_migreport_get_by_hash(f->db, h2, &r, &e_));
    assert_int_equal(r.id, id2);
    st_migreport_fini(&r);
    FAILS(CM_ENOTFOUND, "/id", st_migreport_get(f->db, id2 + 5, &r, &e_));
    st_migreport_list l;
    OK(st_migreport_list_query(f->db, 1, 0, &l, &e_));
    assert_int_equal(l.n_items, 1);
    assert_int_equal(l.items[0].id, id);
    assert_null(l.items[0].body);
    assert_int_equal(l.items[0].input_len, 9);
    assert_int_equal(l.next_after, id);
    st_migreport_list_fini(&l);
    OK(st_migreport_list_query(f->db, 10, id, &l, &e_));
    assert_int_equal(l.n_items, 1);
    assert_int_equal(l.items[0].id, id2);
    assert_int_equal(l.next_after, 0);
    st_migreport_list_fini(&l);
    in.name = "";
    FAILS(CM_EINVAL, "/name", st_migreport_put(f->db, &in, NULL, NULL, &e_));
    in.name = "x";
    in.body_len = 0;
    FAILS(CM_EINVAL, "/body", st_migreport_put(f->db, &in, NULL, NULL, &e_));
}

static void test_st_bench_lifecycle(void **state)
{
    fx *f = *state;
    int64_t g = put_graph(f->db, "g", ST_GRAPH_JSON, "{}");
    int64_t p = put_plan(f->db, "r", g, 0);
    int64_t b1 = 0, b2 = 0, b3 = 0;
    OK(st_bench_create(f->db, p, "{\"steps\":10}", 12, "https://example.com/hook", &b1, &e_));
    OK(st_bench_create(f->db, 0, "{}", 2, NULL, &b2, &e_));
    OK(st_bench_create(f->db, p, "{}", 2, NULL, &b3, &e_));
    st_bench b;
    OK(st_bench_get(f->db, b1, &b, &e_));
    assert_int_equal(b.status, ST_BENCH_QUEUED);
    assert_int_equal(b.plan_id, p);
    assert_string_equal(b.spec, "{\"steps\":10}");
    assert_string_equal(b.webhook_url, "https://example.com/hook");
    assert_null(b.results);
    assert_null(b.error);
    assert_true(b.progress == 0.0);
    st_bench_fini(&b);
    /* Claims go oldest first, each once. */
    int64_t c = 0;
    OK(st_bench_claim(f->db, &c, &e_));
    assert_int_equal(c, b1);
    st_bench_update u;
    memset(&u, 0, sizeof u);
    u.status = ST_BENCH_RUNNING;
    u.progress = 0.5;
    OK(st_bench_set(f->db, b1, &u, &e_));
    u.status = ST_BENCH_SUCCEEDED;
    u.progress = 1.0;
    u.results = "{\"step_ms\":12.5}";
    u.results_len = strlen(u.results);
    OK(st_bench_set(f->db, b1, &u, &e_));
    OK(st_bench_get(f->db, b1, &b, &e_));
    assert_int_equal(b.status, ST_BENCH_SUCCEEDED);
    assert_true(b.progress == 1.0);
    assert_string_equal(b.results, "{\"step_ms\":12.5}");
    st_bench_fini(&b);
    /* A final run keeps its status; its results may still be completed. */
    u.results = "{\"step_ms\":12.5,\"webhook\":null}";
    u.results_len = strlen(u.results);
    OK(st_bench_set(f->db, b1, &u, &e_));
    OK(st_bench_get(f->db, b1, &b, &e_));
    assert_int_equal(b.status, ST_BENCH_SUCCEEDED);
    assert_string_equal(b.results, "{\"step_ms\":12.5,\"webhook\":null}");
    st_bench_fini(&b);
    u.status = ST_BENCH_RUNNING;
    u.results = NULL;
    FAILS(CM_ECONFLICT, "/status", st_bench_set(f->db, b1, &u, &e_));
    u.status = ST_BENCH_CANCELED;
    FAILS(CM_ECONFLICT, "/status", st_bench_set(f->db, b1, &u, &e_)); /* final */
    /* queued -> failed with a message. */
    u.status = ST_BENCH_FAILED;
    u.progress = 0;
    u.error = "cancelled";
    OK(st_bench_set(f->db, b2, &u, &e_));
    OK(st_bench_get(f->db, b2, &b, &e_));
    assert_string_equal(b.error, "cancelled");
    assert_int_equal(b.plan_id, 0);
    st_bench_fini(&b);
    u.error = NULL;
    u.status = ST_BENCH_SUCCEEDED;
    FAILS(CM_ECONFLICT, "/status", st_bench_set(f->db, b3, &u, &e_)); /* queued -> succeeded */
    u.status = ST_BENCH_RUNNING;
    u.progress = 1.5;
    FAILS(CM_EINVAL, "/progress", st_bench_set(f->db, b3, &u, &e_));
    u.progress = 0.1;
    u.results = "nope";
    u.results_len = 4;
    FAILS(CM_EINVAL, "/results", st_bench_set(f->db, b3, &u, &e_));
    u.results = NULL;
    FAILS(CM_ENOTFOUND, "/id", st_bench_set(f->db, 999, &u, &e_));
    /* Lists by status and plan. */
    st_bench_query q;
    st_bench_query_init(&q);
    q.has_status = true;
    q.status = ST_BENCH_QUEUED;
    st_bench_list l;
    OK(st_bench_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 1);
    assert_int_equal(l.items[0].id, b3);
    st_bench_list_fini(&l);
    st_bench_query_init(&q);
    q.plan_id = p;
    OK(st_bench_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 2);
    assert_null(l.items[0].results);
    assert_int_equal(l.items[0].results_len, 31); /* {"step_ms":12.5,"webhook":null} */
    st_bench_list_fini(&l);
    OK(st_bench_claim(f->db, &c, &e_));
    assert_int_equal(c, b3);
    FAILS(CM_ENOTFOUND, "", st_bench_claim(f->db, &c, &e_));
    /* Bad creates. */
    FAILS(CM_EINVAL, "/webhook_url", st_bench_create(f->db, 0, "{}", 2, "ftp://x", NULL, &e_));
    FAILS(CM_EINVAL, "/spec", st_bench_create(f->db, 0, "{", 1, NULL, NULL, &e_));
    FAILS(CM_ENOTFOUND, "/plan_id", st_bench_create(f->db, 999, "{}", 2, NULL, NULL, &e_));
    FAILS(CM_EINVAL, "/plan_id", st_bench_create(f->db, -1, "{}", 2, NULL, NULL, &e_));
    /* Deleting the plan keeps the run, plan_id 0. */
    OK(st_plan_delete(f->db, p, &e_));
    OK(st_bench_get(f->db, b1, &b, &e_));
    assert_int_equal(b.plan_id, 0);
    st_bench_fini(&b);
    OK(st_bench_delete(f->db, b1, &e_));
    FAILS(CM_ENOTFOUND, "/id", st_bench_get(f->db, b1, &b, &e_));
    st_bench_status s;
    assert_true(st_bench_status_parse("running", &s));
    assert_int_equal(s, ST_BENCH_RUNNING);
    assert_false(st_bench_status_parse("paused", &s));
    assert_string_equal(st_bench_status_name(ST_BENCH_FAILED), "failed");
}

/* ---- tokens ---------------------------------------------------------------------------------- */

static void test_st_token_create_and_check(void **state)
{
    fx *f = *state;
    char tok[ST_TOKEN_LEN + 1];
    int64_t id = 0;
    OK(st_token_create(f->db, ST_SCOPE_WRITE, "ci", tok, &id, &e_));
    assert_int_equal(strlen(tok), ST_TOKEN_LEN);
    assert_memory_equal(tok, "spt_", 4);
    st_scope sc = ST_SCOPE_READ;
    int64_t got = 0;
    OK(st_token_check(f->db, tok, &sc, &got, &e_));
    assert_int_equal(sc, ST_SCOPE_WRITE);
    assert_int_equal(got, id);
    /* Same prefix, other tail; truncated; empty; NULL. */
    char wrong[ST_TOKEN_LEN + 1];
    memcpy(wrong, tok, sizeof wrong);
    wrong[ST_TOKEN_LEN - 1] = wrong[ST_TOKEN_LEN - 1] == '0' ? '1' : '0';
    FAILS(CM_ENOTFOUND, "", st_token_check(f->db, wrong, &sc, NULL, &e_));
    wrong[20] = '\0';
    FAILS(CM_ENOTFOUND, "", st_token_check(f->db, wrong, &sc, NULL, &e_));
    FAILS(CM_ENOTFOUND, "", st_token_check(f->db, "", &sc, NULL, &e_));
    FAILS(CM_ENOTFOUND, "", st_token_check(f->db, NULL, &sc, NULL, &e_));
    /* The hash, not the token, is stored. */
    char t[128];
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM tokens WHERE hash = '%s' OR prefix = '%s'", tok,
             tok);
    raw_text(f->path, sql, t, sizeof t);
    assert_string_equal(t, "0");
    char h[ST_HASH_HEX_LEN + 1];
    hash_of(tok, h);
    snprintf(sql, sizeof sql, "SELECT scope FROM tokens WHERE hash = '%s'", h);
    raw_text(f->path, sql, t, sizeof t);
    assert_string_equal(t, "write");
    /* Caller-chosen tokens. */
    const char *admin = "bootstrap-admin-token-0123456789abcdef";
    int64_t aid = 0;
    OK(st_token_put(f->db, admin, ST_SCOPE_ADMIN, NULL, &aid, &e_));
    OK(st_token_check(f->db, admin, &sc, NULL, &e_));
    assert_int_equal(sc, ST_SCOPE_ADMIN);
    FAILS(CM_ECONFLICT, "/token", st_token_put(f->db, admin, ST_SCOPE_READ, NULL, NULL, &e_));
    FAILS(CM_EINVAL, "/token", st_token_put(f->db, "short", ST_SCOPE_READ, NULL, NULL, &e_));
    FAILS(
        CM_EINVAL, "/token",
        st_token_put(f->db, "has a space in it 0123456789abcdef", ST_SCOPE_READ, NULL, NULL, &e_));
    FAILS(CM_EINVAL, "/scope", st_token_create(f->db, (st_scope)0, NULL, tok, NULL, &e_));
    FAILS(CM_EINVAL, "/label", st_token_create(f->db, ST_SCOPE_READ, "a\nb", tok, NULL, &e_));
    /* List and get show prefixes and labels, never hashes. */
    st_token_query q;
    st_token_query_init(&q);
    st_token_list l;
    OK(st_token_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 2);
    assert_int_equal(strlen(l.items[0].prefix), ST_TOKEN_PREFIX_LEN);
    assert_memory_equal(l.items[0].prefix, "spt_", 4);
    assert_string_equal(l.items[0].label, "ci");
    assert_int_equal(l.items[0].scope, ST_SCOPE_WRITE);
    assert_string_equal(l.items[1].prefix, "bootstrap-ad");
    assert_string_equal(l.items[1].label, "");
    st_token_list_fini(&l);
    st_token tk;
    OK(st_token_get(f->db, aid, &tk, &e_));
    assert_int_equal(tk.scope, ST_SCOPE_ADMIN);
    st_token_fini(&tk);
    /* Revoked tokens no longer pass. */
    OK(st_token_delete(f->db, id, &e_));
    FAILS(CM_ENOTFOUND, "", st_token_check(f->db, tok, &sc, NULL, &e_));
    FAILS(CM_ENOTFOUND, "/id", st_token_delete(f->db, id, &e_));
    FAILS(CM_ENOTFOUND, "/id", st_token_get(f->db, id, &tk, &e_));
    assert_true(st_scope_parse("admin", &sc));
    assert_int_equal(sc, ST_SCOPE_ADMIN);
    assert_false(st_scope_parse("root", &sc));
    assert_string_equal(st_scope_name(ST_SCOPE_READ), "read");
}

/* ---- concurrency ------------------------------------------------------------------------------
 */

typedef struct writer_arg {
    const char *path; /* open an own handle when db is NULL */
    st_db *db;        /* shared handle, or NULL */
    int tag;
    int n;
    int ok;
} writer_arg;

static void *writer(void *p)
{
    writer_arg *a = p;
    st_db *db = a->db;
    cm_error err;
    cm_error_clear(&err);
    if (db == NULL && st_db_open(a->path, &db, &err) != CM_OK) {
        return NULL;
    }
    char body[64];
    for (int i = 0; i < a->n; i++) {
        snprintf(body, sizeof body, "{\"t\":%d,\"i\":%d}", a->tag, i);
        st_graph_in in = graph_in("w", ST_GRAPH_JSON, body);
        int64_t id;
        if (st_graph_put(db, &in, &id, NULL, &err) == CM_OK) {
            st_graph g;
            if (st_graph_get(db, id, &g, &err) == CM_OK && strcmp(g.body, body) == 0) {
                a->ok++;
            }
            st_graph_fini(&g);
        } else {
            fprintf(stderr, "writer %d: %s\n", a->tag, err.msg);
        }
    }
    if (a->db == NULL) {
        st_db_close(db);
    }
    return NULL;
}

static void test_st_db_handles_in_parallel_threads(void **state)
{
    fx *f = *state;
    enum { N = 150 };
    writer_arg a[4] = {
        {f->path, NULL, 1, N, 0},
        {f->path, NULL, 2, N, 0},
        {f->path, f->db, 3, N, 0}, /* two threads share f->db */
        {f->path, f->db, 4, N, 0},
    };
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, writer, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].ok, N);
    }
    st_graph_query q;
    st_graph_query_init(&q);
    q.limit = ST_LIST_MAX_LIMIT;
    st_graph_list l;
    OK(st_graph_list_query(f->db, &q, &l, &e_));
    assert_int_equal(l.n_items, 4 * N);
    st_graph_list_fini(&l);
    OK(st_db_integrity_check(f->db, &e_));
}

/* ---- group commit ------------------------------------------------------------------------------
 */

/* A write for st_group_run: stores a graph (st_graph_write, as a plan put
 * does), then fails as told: 0 not at all, 1 with CM_ECONFLICT at /x, 2 by
 * ending the transaction itself (as SQLite does on some I/O errors) and
 * failing with CM_EIO. */
typedef struct gw {
    st_graph_in in;
    char hash[ST_HASH_HEX_LEN + 1];
    int fail;
    int64_t id;
    bool existed;
    cm_error err;
    st_group_entry e;
} gw;

static cm_status gw_write(st_db *db, void *ctx, cm_error *err)
{
    gw *w = ctx;
    st_packed body = {.data = w->in.body, .len = w->in.body_len, .coding = ST_CODING_RAW};
    cm_status st =
        st_graph_write(db, &w->in, &body, w->hash, st_db_now(db), &w->id, &w->existed, NULL, err);
    if (st == CM_OK && w->fail == 1) {
        st = cm_error_set(err, CM_ECONFLICT, "/x", "told to fail");
    }
    if (st == CM_OK && w->fail == 2) {
        assert_int_equal(st_sql_run(db, "ROLLBACK", err), CM_OK);
        st = cm_error_set(err, CM_EIO, NULL, "transaction lost");
    }
    return st;
}

static void gw_init(gw *w, const char *body, int fail)
{
    memset(w, 0, sizeof *w);
    w->in = graph_in("g", ST_GRAPH_JSON, body);
    w->fail = fail;
    cm_error_clear(&w->err);
    cm_error e;
    cm_error_clear(&e);
    assert_int_equal(st_graph_check_in(&w->in, w->hash, &e), CM_OK);
    w->e = (st_group_entry){gw_write, w, &w->err, CM_OK, false, NULL};
}

/* Runs the n writes of w as one batch on db. */
static size_t gw_run(st_db *db, gw *w, size_t n)
{
    st_group_entry *e[8];
    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++) {
        e[i] = &w[i].e;
    }
    st_db_lock(db);
    size_t n_tx = st_group_run(db, e, n);
    st_db_unlock(db);
    return n_tx;
}

/* Whether a graph with that body is stored. */
static bool graph_stored(fx *f, const char *body)
{
    char sql[256], out[32];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM graphs WHERE body = CAST('%s' AS BLOB)", body);
    raw_text(f->path, sql, out, sizeof out);
    return strcmp(out, "1") == 0;
}

static void test_st_group_run_undoes_a_failing_write_alone(void **state)
{
    fx *f = *state;
    gw w[4];
    gw_init(&w[0], "{\"a\":1}", 0);
    gw_init(&w[1], "{\"a\":1}", 0); /* the same content: found in the same transaction */
    gw_init(&w[2], "{\"x\":1}", 1); /* writes, then fails: undone alone */
    gw_init(&w[3], "{\"c\":1}", 0);
    assert_int_equal(gw_run(f->db, w, 4), 1);
    assert_int_equal(w[0].e.st, CM_OK);
    assert_false(w[0].existed);
    assert_int_equal(w[1].e.st, CM_OK);
    assert_true(w[1].existed);
    assert_int_equal(w[1].id, w[0].id);
    assert_int_equal(w[2].e.st, CM_ECONFLICT);
    assert_string_equal(w[2].err.path, "/x");
    assert_int_equal(w[3].e.st, CM_OK);
    assert_true(graph_stored(f, "{\"a\":1}"));
    assert_false(graph_stored(f, "{\"x\":1}"));
    assert_true(graph_stored(f, "{\"c\":1}"));
    /* a batch of one runs without a savepoint, and fails as wholly */
    gw_init(&w[0], "{\"x\":2}", 1);
    assert_int_equal(gw_run(f->db, w, 1), 1);
    assert_int_equal(w[0].e.st, CM_ECONFLICT);
    assert_false(graph_stored(f, "{\"x\":2}"));
    OK(st_db_integrity_check(f->db, &e_));
}

static void test_st_group_run_fails_writes_of_a_lost_transaction(void **state)
{
    fx *f = *state;
    gw w[3];
    gw_init(&w[0], "{\"d\":1}", 0); /* succeeds, but its transaction is lost */
    gw_init(&w[1], "{\"y\":1}", 2);
    gw_init(&w[2], "{\"e\":1}", 0); /* goes on in a new transaction */
    assert_int_equal(gw_run(f->db, w, 3), 2);
    assert_int_equal(w[0].e.st, CM_EIO);
    assert_int_equal(w[0].err.code, CM_EIO);
    assert_non_null(strstr(w[0].err.msg, "transaction lost"));
    assert_int_equal(w[1].e.st, CM_EIO);
    assert_int_equal(w[2].e.st, CM_OK);
    assert_false(graph_stored(f, "{\"d\":1}"));
    assert_false(graph_stored(f, "{\"y\":1}"));
    assert_true(graph_stored(f, "{\"e\":1}"));
    OK(st_db_integrity_check(f->db, &e_));
}

typedef struct group_arg {
    const char *path;
    st_group *g;
    int tag;
    int n;
    int ok;
    int64_t shared_ids[8]; /* the ids of the plans every thread puts */
} group_arg;

/* Puts n plans of its own, each with its graph, and the 8 shared plans,
 * through a handle of its own joined to g; counts the puts that read back. */
static void *group_writer(void *p)
{
    group_arg *a = p;
    st_db *db = NULL;
    cm_error err;
    cm_error_clear(&err);
    if (st_db_open(a->path, &db, &err) != CM_OK) {
        return NULL;
    }
    st_db_join_group(db, a->g);
    char key[32], body[64];
    for (int i = 0; i < a->n + 8; i++) {
        bool shared = i >= a->n;
        if (shared) {
            snprintf(key, sizeof key, "shared-%d", i - a->n);
        } else {
            snprintf(key, sizeof key, "own-%d-%d", a->tag, i);
        }
        snprintf(body, sizeof body, "{\"graph\":\"%s\"}", key);
        char h[ST_HASH_HEX_LEN + 1];
        hash_of(key, h);
        st_graph_in gi = graph_in("gw", ST_GRAPH_JSON, body);
        st_plan_in in;
        memset(&in, 0, sizeof in);
        in.hash = h;
        in.graph = &gi;
        in.body = key;
        in.body_len = strlen(key);
        int64_t id = 0;
        if (st_plan_put(db, &in, &id, NULL, &err) != CM_OK) {
            fprintf(stderr, "group writer %d: %s\n", a->tag, err.msg);
            continue;
        }
        st_plan pl;
        if (st_plan_get(db, id, &pl, &err) == CM_OK && strcmp(pl.body, key) == 0) {
            a->ok++;
            if (shared) {
                a->shared_ids[i - a->n] = id;
            }
        }
        st_plan_fini(&pl);
    }
    st_db_close(db);
    return NULL;
}

/* T threads put through one group (with its own writer handle or not):
 * every put reads back, the shared ones once. */
static void group_threads(fx *f, bool writer)
{
    enum { T = 6, N = 60 };
    st_group *g = NULL;
    OK(st_group_create(&g, &e_));
    if (writer) {
        OK(st_group_open_writer(g, f->path, &e_));
    }
    group_arg a[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        a[i] = (group_arg){f->path, g, i, N, 0, {0}};
        assert_int_equal(pthread_create(&th[i], NULL, group_writer, &a[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(a[i].ok, N + 8);
    }
    for (int k = 0; k < 8; k++) {
        for (int i = 1; i < T; i++) {
            assert_int_equal(a[i].shared_ids[k], a[0].shared_ids[k]);
        }
    }
    char out[32];
    raw_text(f->path, "SELECT count(*) FROM plans", out, sizeof out);
    assert_int_equal(atoi(out), T * N + 8);
    uint64_t commits = 0, writes = 0;
    st_group_stats(g, &commits, &writes);
    assert_int_equal(writes, T * (N + 8));
    assert_true(commits >= 1 && commits <= writes);
    st_group_destroy(g);
    OK(st_db_integrity_check(f->db, &e_));
}

static void test_st_group_write_from_threads(void **state)
{
    group_threads(*state, false);
}

static void test_st_group_write_on_its_writer(void **state)
{
    group_threads(*state, true);
}

/* A put through a group's writer is created at the time of the handle it
 * was made on (its test clock), not the writer's; its graph too. */
static void test_st_group_writer_keeps_the_callers_time(void **state)
{
    fx *f = *state;
    st_group *g = NULL;
    OK(st_group_create(&g, &e_));
    OK(st_group_open_writer(g, f->path, &e_));
    st_db_join_group(f->db, g);
    st_db_set_time(f->db, 1234567);
    char h[ST_HASH_HEX_LEN + 1];
    hash_of("timed", h);
    st_graph_in gi = graph_in("timed", ST_GRAPH_JSON, "{\"g\":1}");
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = h;
    in.graph = &gi;
    in.body = "{}";
    in.body_len = 2;
    st_plan row;
    bool existed = true;
    OK(st_plan_put_row(f->db, &in, &row, &existed, &e_));
    assert_false(existed);
    assert_int_equal(row.created_at, 1234567);
    st_plan got;
    OK(st_plan_get(f->db, row.id, &got, &e_));
    assert_int_equal(got.created_at, 1234567);
    char out[32];
    raw_text(f->path, "SELECT created_at FROM graphs WHERE name = 'timed'", out, sizeof out);
    assert_string_equal(out, "1234567");
    st_plan_fini(&got);
    st_plan_fini(&row);
    st_db_join_group(f->db, NULL);
    st_db_set_time(f->db, 0);
    st_group_destroy(g);
}

/* ---- OOM loops --------------------------------------------------------------------------------
 */

typedef cm_status (*oom_fn)(fx *f, long n, cm_error *err);

/* Fails the store's allocation n = 0, 1, ... until a call completes without
 * the injected failure being reached; each call must succeed (the failure
 * was benign inside SQLite) or fail with CM_ENOMEM. ASan checks for leaks. */
static long oom_loop(fx *f, oom_fn fn)
{
    long n = 0;
    for (;; n++) {
        assert_true(n < 200000);
        cm_error err;
        cm_error_clear(&err);
        unsigned long before = st_alloc_failures();
        cm_alloc_fail_after(n);
        cm_status st = fn(f, n, &err);
        cm_alloc_fail_after(-1);
        bool fired = st_alloc_failures() != before;
        if (st != CM_OK && st != CM_ENOMEM) {
            fprintf(stderr, "n=%ld: %s: %s\n", n, cm_status_name(st), err.msg);
        }
        if (!fired) {
            assert_int_equal(st, CM_OK);
            break;
        }
        assert_true(st == CM_OK || st == CM_ENOMEM);
        if (st == CM_ENOMEM) {
            assert_int_equal(err.code, CM_ENOMEM);
        }
    }
    return n;
}

static cm_status oom_open(fx *f, long n, cm_error *err)
{
    (void)n;
    char p[256];
    fx_path(f, "oom-open.db", p, sizeof p);
    st_db *db = NULL;
    cm_status st = st_db_open(p, &db, err);
    if (st == CM_OK) {
        int64_t v = 0;
        cm_alloc_fail_after(-1);
        assert_int_equal(st_db_schema_version(db, &v, NULL), CM_OK);
        assert_int_equal(v, ST_DB_SCHEMA_VERSION);
    } else {
        assert_null(db);
    }
    st_db_close(db);
    return st;
}

static long oom_puts_ok;

static cm_status oom_graph_put(fx *f, long n, cm_error *err)
{
    char body[64];
    snprintf(body, sizeof body, "{\"oom\":%ld}", n);
    st_graph_in in = graph_in("oom", ST_GRAPH_JSON, body);
    int64_t id = 0;
    cm_status st = st_graph_put(f->db, &in, &id, NULL, err);
    if (st == CM_OK) {
        oom_puts_ok++;
    }
    return st;
}

/* A graph big enough to be zstd-coded, put and read back: whatever
 * allocation fails, the put either stores it (coded or, when the coding
 * buffer could not be had, as given) or fails with CM_ENOMEM, and a read
 * gives the bytes as put or CM_ENOMEM. */
static cm_status oom_coded_round_trip(fx *f, long n, cm_error *err)
{
    static char body[4000 + 64]; /* not allocated: the loop fails allocations */
    doc_into(body, 4000, (int)n);
    st_graph_in in = graph_in("coded", ST_GRAPH_JSON, body);
    int64_t id = 0;
    cm_status st = st_graph_put(f->db, &in, &id, NULL, err);
    if (st == CM_OK) {
        st_graph g;
        st = st_graph_get(f->db, id, &g, err);
        if (st == CM_OK) {
            assert_string_equal(g.body, body);
            assert_int_equal(g.body_len, strlen(body));
        }
        st_graph_fini(&g);
    }
    return st;
}

static cm_status oom_graph_get(fx *f, long n, cm_error *err)
{
    (void)n;
    st_graph g;
    cm_status st = st_graph_get(f->db, 1, &g, err);
    if (st == CM_OK) {
        assert_string_equal(g.name, "oom-get");
    } else {
        assert_null(g.name);
        assert_null(g.body);
    }
    st_graph_fini(&g);
    return st;
}

static cm_status oom_graph_list(fx *f, long n, cm_error *err)
{
    (void)n;
    st_graph_query q;
    st_graph_query_init(&q);
    st_graph_list l;
    cm_status st = st_graph_list_query(f->db, &q, &l, err);
    if (st == CM_OK) {
        assert_int_equal(l.n_items, 12);
    } else {
        assert_null(l.items);
    }
    st_graph_list_fini(&l);
    return st;
}

static cm_status oom_mesh_put(fx *f, long n, cm_error *err)
{
    char body[64];
    snprintf(body, sizeof body, "{\"v\":%ld}", n);
    return st_mesh_put(f->db, "m", body, strlen(body), true, NULL, NULL, err);
}

static cm_status oom_plan_put(fx *f, long n, cm_error *err)
{
    char h[ST_HASH_HEX_LEN + 1];
    char key[32];
    snprintf(key, sizeof key, "oom-%ld", n);
    hash_of(key, h);
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = h;
    in.graph_id = 1;
    in.options = "{\"a\":1}";
    in.options_len = 7;
    in.body = "{}";
    in.body_len = 2;
    return st_plan_put(f->db, &in, NULL, NULL, err);
}

/* A plan with an MLIR input and rules, stored and read back whole. */
static cm_status oom_plan_input(fx *f, long n, cm_error *err)
{
    char h[ST_HASH_HEX_LEN + 1];
    char key[32];
    snprintf(key, sizeof key, "oom-input-%ld", n);
    hash_of(key, h);
    const char *rules = "{\"custom_rules\":{\"c\":{\"rule\":\"i->i\"}}}";
    st_plan_in in;
    memset(&in, 0, sizeof in);
    in.hash = h;
    in.graph_id = 1;
    in.body = "{}";
    in.body_len = 2;
    in.input = "module {}";
    in.input_len = 9;
    in.input_is_mlir = true;
    in.rules = rules;
    in.rules_len = strlen(rules);
    int64_t id = 0;
    cm_status st = st_plan_put(f->db, &in, &id, NULL, err);
    st_plan p;
    memset(&p, 0, sizeof p);
    if (st == CM_OK) {
        st = st_plan_get(f->db, id, &p, err);
    }
    if (st == CM_OK) {
        assert_string_equal(p.input, "module {}");
        assert_true(p.input_is_mlir);
        assert_string_equal(p.rules, rules);
    } else {
        assert_null(p.input);
        assert_null(p.rules);
    }
    st_plan_fini(&p);
    return st;
}

static cm_status oom_token(fx *f, long n, cm_error *err)
{
    (void)n;
    char tok[ST_TOKEN_LEN + 1];
    cm_status st = st_token_create(f->db, ST_SCOPE_READ, "oom", tok, NULL, err);
    if (st == CM_OK) {
        st = st_token_check(f->db, tok, NULL, NULL, err);
    }
    return st;
}

static cm_status oom_bench(fx *f, long n, cm_error *err)
{
    (void)n;
    int64_t id = 0;
    cm_status st = st_bench_create(f->db, 0, "{}", 2, "http://h/x", &id, err);
    st_bench b;
    memset(&b, 0, sizeof b);
    if (st == CM_OK) {
        st = st_bench_get(f->db, id, &b, err);
    }
    st_bench_fini(&b);
    if (st == CM_OK) {
        st_bench_query q;
        st_bench_query_init(&q);
        st_bench_list l;
        st = st_bench_list_query(f->db, &q, &l, err);
        st_bench_list_fini(&l);
    }
    return st;
}

static void test_st_db_oom_loops(void **state)
{
    fx *f = *state;
    long n = oom_loop(f, oom_open);
    print_message("st_db_open: %ld allocations failed in turn\n", n);

    int64_t gid = put_graph(f->db, "oom-get", ST_GRAPH_JSON, "{\"g\":0}");
    assert_int_equal(gid, 1);
    oom_puts_ok = 0;
    n = oom_loop(f, oom_graph_put);
    print_message("st_graph_put: %ld\n", n);
    /* Exactly the successful puts were written. */
    st_graph_query q;
    st_graph_query_init(&q);
    q.name = "oom";
    q.limit = ST_LIST_MAX_LIMIT;
    st_graph_list l;
    OK(st_graph_list_query(f->db, &q, &l, &e_));
    assert_int_equal((long)l.n_items, oom_puts_ok);
    st_graph_list_fini(&l);
    /* Make the list test see 12 rows: delete the surplus, add to reach 12. */
    st_graph_query_init(&q);
    q.limit = ST_LIST_MAX_LIMIT;
    OK(st_graph_list_query(f->db, &q, &l, &e_));
    for (size_t i = 12; i < l.n_items; i++) {
        OK(st_graph_delete(f->db, l.items[i].id, &e_));
    }
    for (size_t i = l.n_items; i < 12; i++) {
        char body[32];
        snprintf(body, sizeof body, "{\"fill\":%zu}", i);
        put_graph(f->db, "fill", ST_GRAPH_JSON, body);
    }
    st_graph_list_fini(&l);
    n = oom_loop(f, oom_graph_get);
    print_message("st_graph_get: %ld\n", n);
    n = oom_loop(f, oom_graph_list);
    print_message("st_graph_list_query: %ld\n", n);
    n = oom_loop(f, oom_mesh_put);
    print_message("st_mesh_put: %ld\n", n);
    n = oom_loop(f, oom_plan_put);
    print_message("st_plan_put: %ld\n", n);
    n = oom_loop(f, oom_coded_round_trip);
    print_message("st_graph_put + get of a zstd-coded body: %ld\n", n);
    n = oom_loop(f, oom_plan_input);
    print_message("st_plan_put + get with input and rules: %ld\n", n);
    n = oom_loop(f, oom_token);
    print_message("st_token_create + check: %ld\n", n);
    n = oom_loop(f, oom_bench);
    print_message("st_bench create/get/list: %ld\n", n);
    OK(st_db_integrity_check(f->db, &e_));
}

/* ---- crash test -------------------------------------------------------------------------------
 */

typedef struct ack {
    int64_t graph_id;
    int64_t plan_id;
    int64_t seq;
} ack;

#define CRASH_MAX_WRITES 100000
#define CRASH_KILL_AFTER 0.3 /* seconds */
#define CRASH_BOUND      2.0 /* seconds */

/* The child: writes graph + plan pairs, each put its own transaction, and
 * reports every acknowledged pair. Never returns. */
static void crash_child(const char *path, int fd, int64_t seq0)
{
    st_db *db = NULL;
    if (st_db_open(path, &db, NULL) != CM_OK) {
        _exit(2);
    }
    char body[1200];
    char key[64];
    char h[ST_HASH_HEX_LEN + 1];
    for (int64_t i = seq0; i < seq0 + CRASH_MAX_WRITES; i++) {
        int k = snprintf(body, sizeof body, "{\"seq\":%lld,\"pad\":\"", (long long)i);
        memset(body + k, 'x', 1000);
        snprintf(body + k + 1000, sizeof body - (size_t)k - 1000, "\"}");
        st_graph_in in = graph_in("crash", ST_GRAPH_JSON, body);
        ack a = {0, 0, i};
        if (st_graph_put(db, &in, &a.graph_id, NULL, NULL) != CM_OK) {
            _exit(3);
        }
        snprintf(key, sizeof key, "crash-%lld", (long long)i);
        hash_of(key, h);
        st_plan_in p;
        memset(&p, 0, sizeof p);
        p.hash = h;
        p.graph_id = a.graph_id;
        p.body = body;
        p.body_len = strlen(body);
        if (st_plan_put(db, &p, &a.plan_id, NULL, NULL) != CM_OK) {
            _exit(4);
        }
        if (write(fd, &a, sizeof a) != (ssize_t)sizeof a) {
            _exit(5);
        }
    }
    _exit(0);
}

static void test_st_db_survives_kill_9_during_writes(void **state)
{
    fx *f = *state;
    char p[256];
    fx_path(f, "crash.db", p, sizeof p);
    size_t total_acked = 0;
    int64_t seq = 0;
    for (int round = 0; round < 3; round++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            crash_child(p, fds[1], seq);
        }
        close(fds[1]);
        size_t cap = 1024, n = 0;
        ack *acks = malloc(cap * sizeof *acks);
        assert_non_null(acks);
        double t0 = cm_now();
        bool killed = false;
        for (;;) {
            double el = cm_now() - t0;
            if (!killed && el >= CRASH_KILL_AFTER) {
                kill(pid, SIGKILL);
                killed = true;
            }
            assert_true(el < CRASH_BOUND + 5.0);
            struct pollfd pf = {fds[0], POLLIN, 0};
            int pr = poll(&pf, 1, killed ? 1000 : 10);
            if (pr <= 0) {
                continue;
            }
            ack a;
            ssize_t r = read(fds[0], &a, sizeof a);
            if (r == 0) {
                break; /* child gone, pipe drained */
            }
            if (r < 0 && errno == EINTR) {
                continue;
            }
            assert_int_equal(r, (ssize_t)sizeof a);
            if (n == cap) {
                cap *= 2;
                acks = realloc(acks, cap * sizeof *acks);
                assert_non_null(acks);
            }
            acks[n++] = a;
        }
        close(fds[0]);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        /* Killed by us, or finished its bounded loop. */
        assert_true((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                    (WIFEXITED(status) && WEXITSTATUS(status) == 0));

        st_db *db = NULL;
        OK(st_db_open(p, &db, &e_));
        OK(st_db_integrity_check(db, &e_));
        for (size_t i = 0; i < n; i++) {
            st_graph g;
            OK(st_graph_get(db, acks[i].graph_id, &g, &e_));
            char want[32];
            snprintf(want, sizeof want, "{\"seq\":%lld,", (long long)acks[i].seq);
            assert_memory_equal(g.body, want, strlen(want));
            st_graph_fini(&g);
            st_plan pl;
            OK(st_plan_get(db, acks[i].plan_id, &pl, &e_));
            assert_int_equal(pl.graph_id, acks[i].graph_id);
            st_plan_fini(&pl);
        }
        /* Stored rows: every acknowledged one, plus at most one pair that
         * committed before its acknowledgement was sent. */
        st_graph_query q;
        st_graph_query_init(&q);
        q.name = "crash";
        q.limit = ST_LIST_MAX_LIMIT;
        size_t stored = 0;
        for (;;) {
            st_graph_list l;
            OK(st_graph_list_query(db, &q, &l, &e_));
            stored += l.n_items;
            q.after_id = l.next_after;
            st_graph_list_fini(&l);
            if (q.after_id == 0) {
                break;
            }
        }
        print_message("crash round %d: %zu writes acknowledged before kill -9, all present; "
                      "%zu graphs stored in total\n",
                      round, n, stored);
        assert_true(stored >= total_acked + n);
        assert_true(stored <= total_acked + n + 1);
        total_acked = stored;
        seq += CRASH_MAX_WRITES;
        st_db_close(db);
        free(acks);
    }
}

int main(void)
{
    /* Route SQLite's allocations through cm_alloc before any fixture touches
     * SQLite directly: the first st_db_open configures it. */
    char dir[] = "/tmp/st_db_init.XXXXXX";
    if (mkdtemp(dir) == NULL) {
        return 1;
    }
    char p[64];
    snprintf(p, sizeof p, "%s/init.db", dir);
    st_db *db = NULL;
    if (st_db_open(p, &db, NULL) != CM_OK) {
        return 1;
    }
    st_db_close(db);
    tu_dir_remove(dir);

    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_st_db_open_sets_wal_and_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_db_open_rejects_bad_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_db_open_rejects_newer_schema, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_db_migrates_v3_bench_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_db_open_migrates_v1_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_db_migrates_v4_plan_input, setup, teardown),
        cmocka_unit_test(test_st_db_migration_list_is_ordered),
        cmocka_unit_test_setup_teardown(test_st_graph_put_dedups_by_content, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_graph_put_rejects_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_graph_list_pages_and_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_graph_delete_cascades_to_plans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_mesh_put_replace_and_conflict, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_mesh_put_get_list_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_rule_put_get_list_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_profile_put_get_list_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_plan_put_dedups_by_hash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_plan_list_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_lists_walk_their_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_unindexed_filters_are_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_plan_put_keeps_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_plan_put_shares_input_with_graph, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_bodies_are_coded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_plan_put_row_is_the_listed_row, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_db_wal_stays_bounded_beside_readers, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_st_plan_put_with_graph, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_migreport_put_get_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_bench_lifecycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_token_create_and_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_db_handles_in_parallel_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_group_run_undoes_a_failing_write_alone, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_st_group_run_fails_writes_of_a_lost_transaction, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_st_group_write_from_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_group_write_on_its_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_group_writer_keeps_the_callers_time, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_st_db_oom_loops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_db_survives_kill_9_during_writes, setup, teardown),
    };
    return cmocka_run_group_tests_name("st_db", tests, NULL, NULL);
}
