/* SPDX-License-Identifier: Apache-2.0
 * store: the schema, as an append-only list of migrations. st_db_open applies
 * the ones newer than the file's recorded version, all in one IMMEDIATE
 * transaction, and records each in schema_version. Rules (docs/store.md):
 * never edit a released migration; a migration that rebuilds a table must
 * keep foreign keys valid (it runs with foreign_keys=ON, so only additive
 * changes are safe as is). Bodies are BLOBs so length() is a byte count that
 * SQLite answers without reading the content. */
#include "st_db.h"
#include "st_int.h"

const st_migration st_migrations[] = {
    {1, "graphs, meshes, plans",
     "CREATE TABLE graphs ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  name TEXT NOT NULL,"
     "  format TEXT NOT NULL CHECK (format IN ('json', 'mlir')),"
     "  hash TEXT NOT NULL UNIQUE,"
     "  body BLOB NOT NULL,"
     "  created_at INTEGER NOT NULL"
     ");"
     "CREATE INDEX graphs_name ON graphs (name);"
     "CREATE INDEX graphs_created ON graphs (created_at);"
     "CREATE TABLE meshes ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  name TEXT NOT NULL UNIQUE,"
     "  body BLOB NOT NULL,"
     "  created_at INTEGER NOT NULL,"
     "  updated_at INTEGER NOT NULL"
     ");"
     "CREATE TABLE plans ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  hash TEXT NOT NULL UNIQUE,"
     "  graph_id INTEGER NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,"
     "  mesh_id INTEGER REFERENCES meshes (id) ON DELETE SET NULL,"
     "  options BLOB NOT NULL,"
     "  body BLOB NOT NULL,"
     "  created_at INTEGER NOT NULL"
     ");"
     "CREATE INDEX plans_graph ON plans (graph_id);"
     "CREATE INDEX plans_mesh ON plans (mesh_id);"
     "CREATE INDEX plans_created ON plans (created_at);"},
    {2, "custom rules, device profiles",
     "CREATE TABLE rules ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  name TEXT NOT NULL UNIQUE,"
     "  body BLOB NOT NULL,"
     "  created_at INTEGER NOT NULL,"
     "  updated_at INTEGER NOT NULL"
     ");"
     "CREATE TABLE profiles ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  name TEXT NOT NULL UNIQUE,"
     "  body BLOB NOT NULL,"
     "  created_at INTEGER NOT NULL,"
     "  updated_at INTEGER NOT NULL"
     ");"},
    {3, "benchmark runs, API tokens",
     "CREATE TABLE bench_runs ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  plan_id INTEGER REFERENCES plans (id) ON DELETE SET NULL,"
     "  spec BLOB NOT NULL,"
     "  status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed')),"
     "  progress REAL NOT NULL DEFAULT 0 CHECK (progress >= 0 AND progress <= 1),"
     "  results BLOB,"
     "  error TEXT,"
     "  webhook_url TEXT,"
     "  created_at INTEGER NOT NULL,"
     "  updated_at INTEGER NOT NULL"
     ");"
     "CREATE INDEX bench_runs_status ON bench_runs (status, id);"
     "CREATE INDEX bench_runs_plan ON bench_runs (plan_id);"
     "CREATE TABLE tokens ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  prefix TEXT NOT NULL,"
     "  hash TEXT NOT NULL UNIQUE,"
     "  scope TEXT NOT NULL CHECK (scope IN ('read', 'write', 'admin')),"
     "  label TEXT NOT NULL DEFAULT '',"
     "  created_at INTEGER NOT NULL"
     ");"
     "CREATE INDEX tokens_prefix ON tokens (prefix);"},
    /* SQLite cannot change a CHECK in place: the table is rebuilt. Nothing
       references bench_runs, so foreign keys stay valid. */
    {4, "benchmark status names: done -> succeeded, canceled",
     "CREATE TABLE bench_runs_v4 ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  plan_id INTEGER REFERENCES plans (id) ON DELETE SET NULL,"
     "  spec BLOB NOT NULL,"
     "  status TEXT NOT NULL"
     "    CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),"
     "  progress REAL NOT NULL DEFAULT 0 CHECK (progress >= 0 AND progress <= 1),"
     "  results BLOB,"
     "  error TEXT,"
     "  webhook_url TEXT,"
     "  created_at INTEGER NOT NULL,"
     "  updated_at INTEGER NOT NULL"
     ");"
     "INSERT INTO bench_runs_v4 (id, plan_id, spec, status, progress, results, error,"
     "  webhook_url, created_at, updated_at)"
     "  SELECT id, plan_id, spec, CASE status WHEN 'done' THEN 'succeeded' ELSE status END,"
     "  progress, results, error, webhook_url, created_at, updated_at FROM bench_runs;"
     "DROP TABLE bench_runs;"
     "ALTER TABLE bench_runs_v4 RENAME TO bench_runs;"
     "CREATE INDEX bench_runs_status ON bench_runs (status, id);"
     "CREATE INDEX bench_runs_plan ON bench_runs (plan_id);"},
    /* Additive: plans stored before it keep NULL in all three (no input
       known). A column CHECK may name other columns; SQLite tests it on the
       existing rows when the column is added. */
    {5, "plans keep their input: input, input_format, rules",
     "ALTER TABLE plans ADD COLUMN input BLOB;"
     "ALTER TABLE plans ADD COLUMN input_format TEXT"
     "  CHECK (input_format IN ('json', 'mlir') AND (input IS NULL) = (input_format IS NULL));"
     "ALTER TABLE plans ADD COLUMN rules BLOB"
     "  CHECK (rules IS NULL OR input_format IS 'mlir');"},
    /* Additive: the other names a graph's content was posted under (its
       row keeps the first); they go with the graph. */
    {6, "graph aliases: the other names of a graph's content",
     "CREATE TABLE graph_aliases ("
     "  graph_id INTEGER NOT NULL REFERENCES graphs (id) ON DELETE CASCADE,"
     "  name TEXT NOT NULL,"
     "  created_at INTEGER NOT NULL,"
     "  PRIMARY KEY (graph_id, name)"
     ");"
     "CREATE INDEX graph_aliases_name ON graph_aliases (name);"},
    /* Additive: GSPMD -> Shardy migration reports (POST /v1/migrations),
       keyed like plans by a hash of their request; nothing references them. */
    {7, "migration reports",
     "CREATE TABLE migration_reports ("
     "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
     "  hash TEXT NOT NULL UNIQUE,"
     "  name TEXT NOT NULL,"
     "  profile TEXT NOT NULL,"
     "  input BLOB NOT NULL,"
     "  body BLOB NOT NULL,"
     "  created_at INTEGER NOT NULL"
     ");"
     "CREATE INDEX migration_reports_created ON migration_reports (created_at);"},
    /* Additive: a plan whose input is byte for byte its graph's body keeps
       no second copy (a graph document posted inline, with no mesh or rules
       merged in: most plans); it reads back its graph's body and format.
       Graph and plan bodies may be kept zstd-coded (st_int.h, "Body
       coding"). Rows before it keep 0 in all three: their own input (or
       none), bodies as put. */
    {8, "compact rows: plans.input_is_graph, graphs.body_coding, plans.body_coding",
     "ALTER TABLE plans ADD COLUMN input_is_graph INTEGER NOT NULL DEFAULT 0"
     "  CHECK (input_is_graph IN (0, 1)"
     "         AND (input_is_graph = 0 OR (input IS NULL AND rules IS NULL)));"
     "ALTER TABLE graphs ADD COLUMN body_coding INTEGER NOT NULL DEFAULT 0"
     "  CHECK (body_coding IN (0, 1));"
     "ALTER TABLE plans ADD COLUMN body_coding INTEGER NOT NULL DEFAULT 0"
     "  CHECK (body_coding IN (0, 1));"},
    /* Subtractive: indexes no statement uses (the lists filter on name and
       created_at beside their id order, which SQLite answers by walking the
       rows from after_id), each of them one more page written by every
       plan put (3 of about 14). plans_graph and plans_mesh stay: the
       foreign keys' ON DELETE actions look plans up by them. */
    {9, "drop unused indexes: graphs_name, graphs_created, plans_created",
     "DROP INDEX IF EXISTS graphs_name;"
     "DROP INDEX IF EXISTS graphs_created;"
     "DROP INDEX IF EXISTS plans_created;"},
    /* Compacting: plans_mesh keeps only the plans with a stored mesh. Most
       plans have none (an inline or generated mesh: mesh_id NULL), and each
       of them wrote an entry that nothing looks up: the mesh filter
       (mesh_id = ?) and ON DELETE SET NULL's lookup both imply
       mesh_id IS NOT NULL, so SQLite still walks the index for them. One
       page fewer per plan put (9% fewer bytes written by MLP-sized puts). */
    {10, "plans_mesh only for plans with a stored mesh",
     "DROP INDEX IF EXISTS plans_mesh;"
     "CREATE INDEX plans_mesh ON plans (mesh_id) WHERE mesh_id IS NOT NULL;"},
};

const size_t st_n_migrations = sizeof st_migrations / sizeof st_migrations[0];

/* The list and the header's version must agree. */
_Static_assert(sizeof st_migrations / sizeof st_migrations[0] == ST_DB_SCHEMA_VERSION,
               "ST_DB_SCHEMA_VERSION must equal the number of migrations");
