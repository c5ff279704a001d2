/* SPDX-License-Identifier: Apache-2.0
 * store: group commit (st_db.h, "Group commit"). Handles joined to one
 * st_group queue their writes on it; whichever caller finds no commit
 * running becomes the leader, takes the queue (up to ST_GROUP_MAX_BATCH
 * writes) and runs it on its own connection as one BEGIN IMMEDIATE ...
 * COMMIT, each write inside a savepoint of its own so that a failing one
 * leaves the others' rows in (on the group's own writer handle, when it has
 * one, so that the page cache of the connection committing stays valid from
 * one batch to the next). Every caller returns only once the
 * transaction holding its write has committed (or failed), so CM_OK still
 * means committed; the others wait on the group's condition meanwhile. */
#include <assert.h>
#include <pthread.h>
#include <string.h>

#include <sqlite3.h>

#include "st_db.h"
#include "st_int.h"

struct st_group {
    pthread_mutex_t mu;   /* guards everything below */
    pthread_cond_t cv;    /* broadcast when a batch is done */
    st_group_entry *head; /* queued writes, oldest first */
    st_group_entry *tail;
    bool busy;          /* a leader is running a batch */
    st_db *writer;      /* the batches' handle (st_group_open_writer), or NULL */
    uint64_t n_commits; /* transactions run (committed or not) */
    uint64_t n_writes;  /* writes run in them */
};

cm_status st_group_create(st_group **out, cm_error *err)
{
    *out = NULL;
    st_group *g = cm_calloc(1, sizeof *g);
    if (g == NULL) {
        return cm_error_oom(err);
    }
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        cm_free(g);
        return cm_error_set(err, CM_ENOMEM, NULL, "cannot create a mutex");
    }
    if (pthread_cond_init(&g->cv, NULL) != 0) {
        pthread_mutex_destroy(&g->mu);
        cm_free(g);
        return cm_error_set(err, CM_ENOMEM, NULL, "cannot create a condition variable");
    }
    *out = g;
    return CM_OK;
}

void st_group_destroy(st_group *g)
{
    if (g == NULL) {
        return;
    }
    assert(g->head == NULL && !g->busy);
    st_db_close(g->writer);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    cm_free(g);
}

cm_status st_group_open_writer(st_group *g, const char *path, cm_error *err)
{
    assert(g->writer == NULL);
    st_db *w = NULL;
    cm_status st = st_db_open(path, &w, err);
    if (st == CM_OK) {
        g->writer = w;
    }
    return st;
}

st_db *st_group_writer(st_group *g)
{
    return g->writer;
}

void st_db_join_group(st_db *db, st_group *g)
{
    st_db_lock(db);
    db->group = g;
    st_db_unlock(db);
}

void st_group_stats(st_group *g, uint64_t *commits_out, uint64_t *writes_out)
{
    pthread_mutex_lock(&g->mu);
    *commits_out = g->n_commits;
    *writes_out = g->n_writes;
    pthread_mutex_unlock(&g->mu);
}

/* Fails every write of e[from, to) that had succeeded: its transaction did
 * not commit, for the reason in why. */
static void fail_committed(st_group_entry **e, size_t from, size_t to, const cm_error *why)
{
    for (size_t j = from; j < to; j++) {
        if (e[j]->st == CM_OK) {
            e[j]->st = cm_error_set(e[j]->err, why->code != CM_OK ? why->code : CM_EINTERNAL, NULL,
                                    "not stored: its transaction failed: %s", why->msg);
        }
    }
}

size_t st_group_run(st_db *db, st_group_entry **e, size_t n)
{
    size_t n_tx = 0;
    size_t i = 0;
    while (i < n) {
        size_t start = i;
        cm_error why;
        cm_error_clear(&why);
        n_tx++;
        if (st_sql_begin(db, &why) != CM_OK) {
            for (; i < n; i++) {
                e[i]->st = cm_error_set(e[i]->err, why.code, NULL, "%s", why.msg);
            }
            break;
        }
        bool lost = false; /* the transaction is gone (SQLite rolled it back) */
        for (; i < n && !lost; i++) {
            /* a batch of one is its own transaction: no savepoint needed */
            bool use_sp = n - start > 1;
            cm_status st = use_sp ? st_sql_run(db, "SAVEPOINT st_write", e[i]->err) : CM_OK;
            bool in_sp = use_sp && st == CM_OK;
            if (st == CM_OK) {
                st = e[i]->fn(db, e[i]->ctx, e[i]->err);
            }
            if (st == CM_OK && in_sp) {
                st = st_sql_run(db, "RELEASE st_write", e[i]->err);
            } else if (st != CM_OK && in_sp && !sqlite3_get_autocommit(db->conn)) {
                /* undo this write only; its error stands */
                if (st_sql_run(db, "ROLLBACK TO st_write", NULL) != CM_OK ||
                    st_sql_run(db, "RELEASE st_write", NULL) != CM_OK) {
                    (void)st_sql_run(db, "ROLLBACK", NULL);
                }
            } else if (st != CM_OK && !sqlite3_get_autocommit(db->conn)) {
                (void)st_sql_run(db, "ROLLBACK", NULL); /* the transaction held this write only */
            }
            e[i]->st = st;
            if (sqlite3_get_autocommit(db->conn)) {
                lost = true;
                cm_error_set(&why, st != CM_OK ? st : CM_EINTERNAL, NULL,
                             "the transaction ended early");
                if (e[i]->err != NULL && e[i]->err->code != CM_OK) {
                    why = *e[i]->err;
                }
            }
        }
        if (!lost && st_sql_run(db, "COMMIT", &why) != CM_OK) {
            lost = true;
            if (!sqlite3_get_autocommit(db->conn)) {
                (void)st_sql_run(db, "ROLLBACK", NULL);
            }
        }
        if (lost) {
            fail_committed(e, start, i, &why);
        }
    }
    return n_tx;
}

/* One write in a transaction of its own, on db (no group). */
static cm_status write_alone(st_db *db, st_group_fn fn, void *ctx, cm_error *err)
{
    st_db_lock(db);
    cm_status st = st_sql_begin(db, err);
    if (st == CM_OK) {
        st = fn(db, ctx, err);
    }
    st = st_sql_finish(db, st, err);
    st_db_unlock(db);
    return st;
}

cm_status st_group_write(st_db *db, st_group_fn fn, void *ctx, cm_error *err)
{
    st_group *g = db->group;
    if (g == NULL) {
        return write_alone(db, fn, ctx, err);
    }
    st_group_entry me = {fn, ctx, err, CM_OK, false, NULL};
    st_db *on = g->writer != NULL ? g->writer : db; /* where a batch this caller leads runs */
    bool led = false;
    pthread_mutex_lock(&g->mu);
    if (g->tail != NULL) {
        g->tail->next = &me;
    } else {
        g->head = &me;
    }
    g->tail = &me;
    while (!me.done) {
        if (g->busy) {
            pthread_cond_wait(&g->cv, &g->mu);
            continue;
        }
        /* lead: take the oldest writes (this one among them) */
        g->busy = true;
        led = true;
        st_group_entry *batch[ST_GROUP_MAX_BATCH];
        size_t n = 0;
        while (g->head != NULL && n < ST_GROUP_MAX_BATCH) {
            batch[n++] = g->head;
            g->head = g->head->next;
        }
        if (g->head == NULL) {
            g->tail = NULL;
        }
        pthread_mutex_unlock(&g->mu);
        st_db_lock(on);
        size_t n_tx = st_group_run(on, batch, n);
        st_db_unlock_only(on);
        pthread_mutex_lock(&g->mu);
        for (size_t i = 0; i < n; i++) {
            batch[i]->done = true; /* a waiter may return (and its entry vanish) from here on */
        }
        g->n_commits += n_tx;
        g->n_writes += n;
        g->busy = false;
        pthread_cond_broadcast(&g->cv);
    }
    pthread_mutex_unlock(&g->mu);
    if (led) {
        st_db_checkpoint_maybe(on); /* after the waiters have their answers */
    }
    return me.st;
}
