/* SPDX-License-Identifier: Apache-2.0
 * store: folder-private declarations shared by st_db.c, st_migrate.c and the
 * store's tests. Not a public contract. */
#ifndef ST_INT_H
#define ST_INT_H

#include <stddef.h>
#include <stdint.h>

/* One schema migration: run once, in order, inside the opening transaction
 * (docs/store.md, "Migrations"). Never edit a released entry; append one. */
typedef struct st_migration {
    int64_t version;  /* 1, 2, ...; equals its index + 1 */
    const char *name; /* short description, recorded in schema_version */
    const char *sql;  /* one or more statements */
} st_migration;

extern const st_migration st_migrations[];
extern const size_t st_n_migrations;

/* Tests only: how many allocations made for the store (by SQLite or by
 * st_db.c) have failed since the process started. An OOM loop uses it to
 * tell "the injected failure was absorbed" from "the call made fewer
 * allocations than n". */
unsigned long st_alloc_failures(void);

#endif /* ST_INT_H */
