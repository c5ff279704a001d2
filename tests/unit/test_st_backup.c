/* SPDX-License-Identifier: Apache-2.0
 * Unit tests for st_db_backup (store/st_db.h): the online backup of a
 * database while another handle writes to it, restore by opening the copy,
 * errors with code and path, and an OOM loop. Files live in a mkdtemp
 * directory under /tmp that each test removes. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cm.h"
#include "st_db.h"
#include "st_int.h"
#include "tu_fs.h"

/* ---- fixture ------------------------------------------------------------------------------ */

typedef struct fx {
    char dir[64];     /* mkdtemp directory */
    char path[128];   /* dir/live.db, open as db */
    char backup[128]; /* dir/backup.db */
    st_db *db;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/st_backup.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/live.db", f->dir);
    snprintf(f->backup, sizeof f->backup, "%s/backup.db", f->dir);
    assert_int_equal(st_db_open(f->path, &f->db, NULL), CM_OK);
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

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static bool file_exists(const char *p)
{
    struct stat s;
    return stat(p, &s) == 0;
}

/* Stores graph i as {"backup":i}; returns its id. */
static int64_t put_graph(st_db *db, long i)
{
    char body[64];
    int n = snprintf(body, sizeof body, "{\"backup\":%ld}", i);
    st_graph_in in = {.name = "g", .format = ST_GRAPH_JSON, .body = body, .body_len = (size_t)n};
    int64_t id = 0;
    cm_error err;
    cm_error_clear(&err);
    cm_status st = st_graph_put(db, &in, &id, NULL, &err);
    if (st != CM_OK) {
        fprintf(stderr, "put %ld: %s\n", i, err.msg);
    }
    assert_int_equal(st, CM_OK);
    return id;
}

/* Checks that graph id holds {"backup":i}. */
static void expect_graph(st_db *db, int64_t id, long i)
{
    char body[64];
    snprintf(body, sizeof body, "{\"backup\":%ld}", i);
    st_graph g;
    assert_int_equal(st_graph_get(db, id, &g, NULL), CM_OK);
    assert_string_equal(g.body, body);
    st_graph_fini(&g);
}

/* ---- backup while another handle writes -------------------------------------------------- */

typedef struct writer {
    const char *path;
    atomic_bool stop;
    atomic_long n_written; /* graphs committed by the writer, numbered 1000.. */
} writer;

static void *writer_main(void *arg)
{
    writer *w = arg;
    st_db *db = NULL;
    assert_int_equal(st_db_open(w->path, &db, NULL), CM_OK);
    for (long i = 1000; !atomic_load(&w->stop) && i < 100000; i++) {
        put_graph(db, i);
        atomic_store(&w->n_written, i - 999);
    }
    st_db_close(db);
    return NULL;
}

static void test_st_db_backup_copies_while_another_handle_writes(void **state)
{
    fx *f = *state;
    enum { N_BEFORE = 200 };
    int64_t ids[N_BEFORE];
    for (long i = 0; i < N_BEFORE; i++) {
        ids[i] = put_graph(f->db, i);
    }
    writer w = {.path = f->path};
    atomic_init(&w.stop, false);
    atomic_init(&w.n_written, 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, writer_main, &w), 0);
    while (atomic_load(&w.n_written) < 20) { /* the writer is committing */
        sleep_ms(1);
    }
    cm_error err;
    cm_error_clear(&err);
    cm_status st = st_db_backup(f->db, f->backup, &err);
    long during = atomic_load(&w.n_written);
    sleep_ms(20); /* the writer keeps committing after the backup */
    atomic_store(&w.stop, true);
    assert_int_equal(pthread_join(t, NULL), 0);
    if (st != CM_OK) {
        fprintf(stderr, "backup: %s\n", err.msg);
    }
    assert_int_equal(st, CM_OK);
    assert_true(during >= 20);
    char partial[160];
    snprintf(partial, sizeof partial, "%s.partial", f->backup);
    assert_false(file_exists(partial));

    /* Restore = open the copy: intact, every row written before the backup,
     * a prefix of the writer's rows, and the source still writable. */
    st_db *b = NULL;
    assert_int_equal(st_db_open(f->backup, &b, NULL), CM_OK);
    assert_int_equal(st_db_integrity_check(b, NULL), CM_OK);
    int64_t v = 0;
    assert_int_equal(st_db_schema_version(b, &v, NULL), CM_OK);
    assert_int_equal(v, ST_DB_SCHEMA_VERSION);
    for (long i = 0; i < N_BEFORE; i++) {
        expect_graph(b, ids[i], i);
    }
    st_graph_query q;
    st_graph_query_init(&q);
    q.limit = ST_LIST_MAX_LIMIT;
    size_t total = 0;
    int64_t last_id = 0;
    for (;;) {
        st_graph_list l;
        assert_int_equal(st_graph_list_query(b, &q, &l, NULL), CM_OK);
        for (size_t i = 0; i < l.n_items; i++) {
            assert_true(l.items[i].id > last_id);
            last_id = l.items[i].id;
        }
        total += l.n_items;
        q.after_id = l.next_after;
        st_graph_list_fini(&l);
        if (q.after_id == 0) {
            break;
        }
    }
    /* The writer's rows are consecutive ids after ours: the copy holds a
     * snapshot, so exactly the first (total - N_BEFORE) of them, including at
     * least those committed before the backup started. */
    assert_true(total >= N_BEFORE + 20);
    assert_int_equal(last_id, ids[N_BEFORE - 1] + (int64_t)(total - N_BEFORE));
    for (int64_t id = ids[N_BEFORE - 1] + 1; id <= last_id; id++) {
        expect_graph(b, id, 1000 + (long)(id - ids[N_BEFORE - 1] - 1));
    }
    st_db_close(b);
    put_graph(f->db, 99);
}

static void test_st_db_backup_replaces_an_old_backup(void **state)
{
    fx *f = *state;
    int64_t a = put_graph(f->db, 1);
    assert_int_equal(st_db_backup(f->db, f->backup, NULL), CM_OK);
    int64_t b_id = put_graph(f->db, 2);
    assert_int_equal(st_db_backup(f->db, f->backup, NULL), CM_OK);
    st_db *b = NULL;
    assert_int_equal(st_db_open(f->backup, &b, NULL), CM_OK);
    expect_graph(b, a, 1);
    expect_graph(b, b_id, 2);
    /* The copy is independent of the source. */
    assert_int_equal(st_graph_delete(f->db, a, NULL), CM_OK);
    expect_graph(b, a, 1);
    st_db_close(b);
}

static void test_st_db_backup_rejects_bad_destinations(void **state)
{
    fx *f = *state;
    put_graph(f->db, 1);
    cm_error err;

    cm_error_clear(&err);
    assert_int_equal(st_db_backup(f->db, "", &err), CM_EINVAL);
    assert_int_equal(err.code, CM_EINVAL);
    assert_string_equal(err.path, "/dest");

    cm_error_clear(&err);
    assert_int_equal(st_db_backup(f->db, NULL, &err), CM_EINVAL);
    assert_string_equal(err.path, "/dest");

    /* The database itself, also under another name. */
    cm_error_clear(&err);
    assert_int_equal(st_db_backup(f->db, f->path, &err), CM_EINVAL);
    assert_string_equal(err.path, "/dest");
    char alias[160];
    snprintf(alias, sizeof alias, "%s/./live.db", f->dir);
    cm_error_clear(&err);
    assert_int_equal(st_db_backup(f->db, alias, &err), CM_EINVAL);
    assert_string_equal(err.path, "/dest");

    /* A directory that does not exist. */
    char missing[160];
    snprintf(missing, sizeof missing, "%s/no/such/dir/b.db", f->dir);
    cm_error_clear(&err);
    assert_int_equal(st_db_backup(f->db, missing, &err), CM_EIO);
    assert_int_equal(err.code, CM_EIO);
    assert_string_equal(err.path, "/dest");

    /* Nothing was left behind, and the source is intact and writable. */
    assert_false(file_exists(f->backup));
    assert_int_equal(st_db_integrity_check(f->db, NULL), CM_OK);
    put_graph(f->db, 2);
}

/* Fails allocation n = 0, 1, ... inside st_db_backup until it completes
 * without reaching the failure: each call succeeds or says CM_ENOMEM, leaves
 * no partial file, and ASan sees no leak. */
static void test_st_db_backup_survives_oom(void **state)
{
    fx *f = *state;
    int64_t id = put_graph(f->db, 7);
    char partial[160];
    snprintf(partial, sizeof partial, "%s.partial", f->backup);
    long n;
    for (n = 0; n < 10000; n++) {
        cm_error err;
        cm_error_clear(&err);
        unsigned long before = st_alloc_failures();
        cm_alloc_fail_after(n);
        cm_status st = st_db_backup(f->db, f->backup, &err);
        cm_alloc_fail_after(-1);
        bool fired = st_alloc_failures() != before;
        if (st != CM_OK && st != CM_ENOMEM) {
            fprintf(stderr, "n=%ld: %s: %s\n", n, cm_status_name(st), err.msg);
        }
        assert_false(file_exists(partial));
        if (!fired) {
            assert_int_equal(st, CM_OK);
            break;
        }
        assert_true(st == CM_OK || st == CM_ENOMEM);
    }
    assert_true(n > 0);
    st_db *b = NULL;
    assert_int_equal(st_db_open(f->backup, &b, NULL), CM_OK);
    assert_int_equal(st_db_integrity_check(b, NULL), CM_OK);
    expect_graph(b, id, 7);
    st_db_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_st_db_backup_copies_while_another_handle_writes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_st_db_backup_replaces_an_old_backup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_st_db_backup_rejects_bad_destinations, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_st_db_backup_survives_oom, setup, teardown),
    };
    return cmocka_run_group_tests_name("st_backup", tests, NULL, NULL);
}
