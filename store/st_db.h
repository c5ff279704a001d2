/* SPDX-License-Identifier: Apache-2.0
 * store: the service's durable state in one SQLite file (docs/store.md):
 * graphs, meshes, custom rules, plans, device profiles, benchmark runs and
 * API tokens. st_db is the only module that talks to SQLite; callers see
 * plain C structs and cm_status codes, never SQLite codes.
 *
 * Durability: WAL journal, synchronous=NORMAL, every write one IMMEDIATE
 * transaction. A call that returned CM_OK has committed: the write survives
 * the process being killed (not a power cut; see docs/store.md).
 *
 * Ownership: get functions fill caller storage (st_graph, st_plan, ...) whose
 * strings are heap-owned by that struct and freed with the matching st_*_fini;
 * on error the struct is left zeroed, and fini of a zeroed struct is a no-op.
 * List functions fill an st_*_list likewise. Input strings are borrowed for
 * the duration of the call.
 *
 * Paging: lists return rows in ascending id order with id > after_id, at most
 * limit of them (0 = ST_LIST_DEFAULT_LIMIT; more than ST_LIST_MAX_LIMIT is
 * CM_EINVAL at "/limit"). next_after is the cursor for the next page: the last
 * returned id when more rows match, 0 when this page is the last. A filter
 * no index serves (a time range, a graph's name or format) examines at most
 * ST_LIST_SCAN_ROWS rows a page: the page may then hold fewer than limit
 * rows, or none, and next_after is the last row examined.
 *
 * Errors (err may be NULL everywhere): CM_EINVAL for bad arguments, with
 * err->path naming the argument as a JSON Pointer ("/name", "/body",
 * "/limit", ...); CM_ENOTFOUND when an id or name does not exist (path names
 * it too); CM_ECONFLICT when the call contradicts stored state; CM_ENOMEM;
 * CM_EIO when the file cannot be opened, read or written or stays locked
 * longer than ST_DB_BUSY_TIMEOUT_MS; CM_EINTERNAL for a corrupt file or a bug.
 * After any error nothing was written.
 *
 * Thread contract: every function may be called from any thread. Calls on one
 * st_db are serialized by an internal mutex, so a single shared handle is
 * safe but runs one statement at a time. For parallel requests open one
 * st_db per worker thread on the same path (recommended for the server's
 * thread pool): WAL lets readers proceed while one writer commits, and
 * writers wait for each other up to the busy timeout. Handles on the same
 * file may also live in different processes. Do not carry an open st_db
 * across fork(); open a new one in the child. */
#ifndef ST_DB_H
#define ST_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"

typedef struct st_db st_db;

#define ST_DB_SCHEMA_VERSION  10   /* schema version this build migrates to */
#define ST_DB_BUSY_TIMEOUT_MS 5000 /* how long a write waits for the lock, ms */
#define ST_LIST_DEFAULT_LIMIT 50   /* page size when a query says limit = 0 */
#define ST_LIST_MAX_LIMIT     1000 /* largest page size accepted */
#define ST_NAME_MAX_LEN       256  /* bytes, for names and labels */
#define ST_HASH_HEX_LEN       64   /* SHA-256 as lower-case hex, without the NUL */

/* ---- the database ------------------------------------------------------------ */

/* Opens (creating if needed) the database file at path, switches it to WAL,
 * sets synchronous=NORMAL, busy_timeout=ST_DB_BUSY_TIMEOUT_MS and
 * foreign_keys=ON, and applies pending schema migrations in one transaction
 * (concurrent openers of the same file wait for each other). On success *out
 * is a new handle the caller closes with st_db_close; on error *out is NULL.
 * Errors: CM_EINVAL for an empty path; CM_EIO when the file cannot be opened
 * or is not a database or cannot use WAL; CM_ECONFLICT when the file's schema
 * is newer than ST_DB_SCHEMA_VERSION; CM_ENOMEM. */
cm_status st_db_open(const char *path, st_db **out, cm_error *err);

/* Closes the handle (the last one on a file checkpoints the WAL). NULL is a
 * no-op. The handle must not be in use by another thread. */
void st_db_close(st_db *db);

/* The schema version recorded in the file (ST_DB_SCHEMA_VERSION once open). */
cm_status st_db_schema_version(st_db *db, int64_t *version_out, cm_error *err);

/* Runs PRAGMA integrity_check and the foreign-key check. CM_OK when the file
 * is sound; CM_EINTERNAL with the first problem in err->msg otherwise. */
cm_status st_db_integrity_check(st_db *db, cm_error *err);

/* Runs PRAGMA quick_check (the b-trees' structure, not the index contents):
 * cheaper than st_db_integrity_check, for a check at start. CM_OK when the
 * file is sound; CM_EINTERNAL with the first problem in err->msg otherwise;
 * CM_EIO when the file cannot be read. */
cm_status st_db_quick_check(st_db *db, cm_error *err);
/* Makes the statement running on db (a quick_check, say) stop soon with an
 * error; any thread, while db is open; a no-op when nothing runs. */
void st_db_interrupt(st_db *db);

/* Readiness: commits one write that changes nothing (the schema version's
 * row rewritten as it is), so that a file that has become read-only, a full
 * disk or a corrupt page on the write path shows now rather than on a
 * client's write. Errors: CM_EIO with SQLite's reason ("attempt to write a
 * readonly database", "database or disk is full", ...); CM_EINTERNAL for a
 * corrupt file. */
cm_status st_db_probe_write(st_db *db, cm_error *err);

/* PRAGMA data_version of this handle: a number that changes whenever another
 * connection (in this process or another) has committed to the file since
 * the handle last asked. Cheap: no I/O when nothing changed. */
cm_status st_db_data_version(st_db *db, int64_t *out, cm_error *err);

/* WAL pages this handle's checkpoints have copied into the file: *bulk_out
 * on the checkpoint thread's own connection while requests go on, *final_out
 * afterwards, holding the handle while the WAL restarts (the frames
 * committed during the bulk copy). Most should be bulk: the final step holds
 * every write of the handle. Any thread. */
void st_db_checkpoint_stats(st_db *db, int64_t *bulk_out, int64_t *final_out);

/* Tests only: from now on this handle stamps created/updated times with
 * unix_s instead of the wall clock; 0 restores the wall clock. */
void st_db_set_time(st_db *db, int64_t unix_s);

/* ---- group commit -------------------------------------------------------------
 *
 * Handles of one process on one file may join an st_group: their plan puts
 * (st_plan_put) then share transactions. A put queues on the group; the
 * caller that finds no commit running runs every queued put (its own among
 * them) on its own connection (or the group's writer, below) in one BEGIN
 * IMMEDIATE ... COMMIT, each put in
 * a savepoint of its own, and the other callers wait. Each put still
 * returns CM_OK only once the transaction holding it has committed, with
 * the durability above, and after an error nothing of that put was
 * written (a put failing alone leaves the others' rows in). Under
 * concurrent puts this writes the shared pages (indexes, the id sequence)
 * once per transaction instead of once per put, and the handles of the
 * group stop waiting for each other on the file's write lock.
 * Thread contract: st_group's functions may be called from any thread. */

typedef struct st_group st_group;

/* Creates an empty group; the caller destroys it with st_group_destroy
 * after closing every handle that joined it. Errors: CM_ENOMEM. */
cm_status st_group_create(st_group **out, cm_error *err);
/* Destroys g (NULL is a no-op), closing its writer. No handle may still
 * use it. */
void st_group_destroy(st_group *g);
/* Gives g a handle of its own on the file at path (opened as st_db_open
 * opens one, and used for nothing else): every transaction of g then runs
 * on it, whoever leads it, instead of on the leader's handle. No other
 * connection commits between two of them, so the pages the last one read
 * (the indexes' upper levels, the tables' last leaves) are still in its
 * page cache for the next, where each leader's handle had to read them
 * again from the WAL after the others' commits (distinct plan puts through
 * the server: about 6% more a second, and a shorter tail; docs/store.md).
 * Call once, before g's handles put anything. Errors: those of st_db_open. */
cm_status st_group_open_writer(st_group *g, const char *path, cm_error *err);
/* g's writer handle (for its st_db_checkpoint_stats), or NULL. */
st_db *st_group_writer(st_group *g);
/* Makes db's plan puts go through g from now on (NULL: alone again). Call
 * before sharing db with other threads. g must outlive db's use of it. */
void st_db_join_group(st_db *db, st_group *g);
/* The transactions g has run and the puts in them, since its creation. */
void st_group_stats(st_group *g, uint64_t *commits_out, uint64_t *writes_out);

/* ---- graphs ------------------------------------------------------------------
 * A graph document as posted, JSON (docs/graph-format.md) or MLIR text.
 * Deduplicated by content hash: posting the same content again returns the
 * first row (its name included) with existed = true; a new name it came
 * under is kept as an alias of that row. */

typedef enum st_graph_format { ST_GRAPH_JSON = 0, ST_GRAPH_MLIR = 1 } st_graph_format;

/* "json" / "mlir". */
const char *st_graph_format_name(st_graph_format f);
/* Parses "json" or "mlir"; false otherwise. */
bool st_graph_format_parse(const char *s, st_graph_format *out);

typedef struct st_graph {
    int64_t id; /* > 0 */
    char *name; /* heap, NUL-terminated: the first name its content came under */
    char *aliases; /* heap: the other names, by name, one a line ('\n' between), or NULL */
    st_graph_format format;
    char *body;                     /* heap, NUL-terminated; NULL in list results */
    size_t body_len;                /* bytes, also set in list results */
    char hash[ST_HASH_HEX_LEN + 1]; /* content hash, lower-case hex */
    int64_t created_at;             /* unix seconds, UTC */
} st_graph;

typedef struct st_graph_in {
    const char *name; /* 1..ST_NAME_MAX_LEN bytes, no control characters */
    st_graph_format format;
    const char *body; /* body_len bytes, need not be NUL-terminated */
    size_t body_len;  /* > 0 */
    const char *hash; /* 64 hex digits chosen by the caller (e.g. the planner's
                       * module hash, so JSON and MLIR of one module dedup), or
                       * NULL: SHA-256 of the format name, a NUL, and the body */
} st_graph_in;

typedef struct st_graph_query {
    size_t limit;     /* 0 = ST_LIST_DEFAULT_LIMIT */
    int64_t after_id; /* cursor: rows with id > after_id; 0 = from the start */
    const char *name; /* exact name or alias, or NULL for any */
    bool has_format;  /* filter by format */
    st_graph_format format;
    int64_t created_after;  /* created_at >= this, unix seconds; 0 = no bound */
    int64_t created_before; /* created_at < this, unix seconds; 0 = no bound */
} st_graph_query;

typedef struct st_graph_list {
    st_graph *items; /* heap array of n_items; bodies are NULL */
    size_t n_items;
    int64_t next_after; /* cursor for the next page, 0 when none */
} st_graph_list;

void st_graph_query_init(st_graph_query *q);
void st_graph_fini(st_graph *g);
void st_graph_list_fini(st_graph_list *l);

/* Stores a graph, or finds the stored one with the same hash: *id_out gets
 * the id, *existed_out (either may be NULL) whether it was already there.
 * Errors: CM_EINVAL at /name, /body, /format or /hash. */
cm_status st_graph_put(st_db *db, const st_graph_in *in, int64_t *id_out, bool *existed_out,
                       cm_error *err);
/* st_graph_put, telling too whether in->name was new for content already
 * stored under another name and so recorded as an alias (*aliased_out, may
 * be NULL). */
cm_status st_graph_put_named(st_db *db, const st_graph_in *in, int64_t *id_out, bool *existed_out,
                             bool *aliased_out, cm_error *err);
/* Errors: CM_ENOTFOUND at /id. */
cm_status st_graph_get(st_db *db, int64_t id, st_graph *out, cm_error *err);
/* Errors: CM_EINVAL at /hash, CM_ENOTFOUND at /hash. */
cm_status st_graph_get_by_hash(st_db *db, const char *hash, st_graph *out, cm_error *err);
cm_status st_graph_list_query(st_db *db, const st_graph_query *q, st_graph_list *out,
                              cm_error *err);
/* Deletes the graph and, by cascade, its plans. Errors: CM_ENOTFOUND at /id. */
cm_status st_graph_delete(st_db *db, int64_t id, cm_error *err);

/* ---- named documents: meshes, custom rules, device profiles -------------------
 * Each is a JSON document under a unique name: meshes by mesh name, custom
 * rules by custom-call target name (the body is the JSON rule spec), device
 * profiles by profile name. Bodies must be valid JSON (CM_EINVAL at /body).
 *
 * put: when no row has that name, inserts one (existed = false). When one
 * does: identical body -> nothing changes (existed = true); different body ->
 * replaced when replace is true (same id, updated_at set, existed = true),
 * CM_ECONFLICT at /name when replace is false. */

typedef struct st_doc {
    int64_t id;         /* > 0, stable across replacements */
    char *name;         /* heap */
    char *body;         /* heap, NUL-terminated JSON; NULL in list results */
    size_t body_len;    /* bytes */
    int64_t created_at; /* unix seconds */
    int64_t updated_at; /* unix seconds, = created_at until replaced */
} st_doc;

typedef struct st_doc_query {
    size_t limit;     /* 0 = ST_LIST_DEFAULT_LIMIT */
    int64_t after_id; /* cursor */
} st_doc_query;

typedef struct st_doc_list {
    st_doc *items; /* heap array; bodies are NULL */
    size_t n_items;
    int64_t next_after;
} st_doc_list;

void st_doc_query_init(st_doc_query *q);
void st_doc_fini(st_doc *d);
void st_doc_list_fini(st_doc_list *l);

/* Meshes. Deleting a mesh leaves plans that used it with mesh_id = 0. */
cm_status st_mesh_put(st_db *db, const char *name, const char *body, size_t body_len, bool replace,
                      int64_t *id_out, bool *existed_out, cm_error *err);
cm_status st_mesh_get(st_db *db, const char *name, st_doc *out, cm_error *err);
cm_status st_mesh_get_id(st_db *db, int64_t id, st_doc *out, cm_error *err);
cm_status st_mesh_list(st_db *db, const st_doc_query *q, st_doc_list *out, cm_error *err);
cm_status st_mesh_delete(st_db *db, const char *name, cm_error *err);

/* Custom partitioning rules, by call-target name. */
cm_status st_rule_put(st_db *db, const char *name, const char *body, size_t body_len, bool replace,
                      int64_t *id_out, bool *existed_out, cm_error *err);
cm_status st_rule_get(st_db *db, const char *name, st_doc *out, cm_error *err);
cm_status st_rule_list(st_db *db, const st_doc_query *q, st_doc_list *out, cm_error *err);
cm_status st_rule_delete(st_db *db, const char *name, cm_error *err);

/* Device profiles (docs/device-profiles.md), by profile name. */
cm_status st_profile_put(st_db *db, const char *name, const char *body, size_t body_len,
                         bool replace, int64_t *id_out, bool *existed_out, cm_error *err);
cm_status st_profile_get(st_db *db, const char *name, st_doc *out, cm_error *err);
cm_status st_profile_list(st_db *db, const st_doc_query *q, st_doc_list *out, cm_error *err);
cm_status st_profile_delete(st_db *db, const char *name, cm_error *err);

/* ---- plans -------------------------------------------------------------------
 * A plan document computed for (graph, mesh, options), keyed by a content
 * hash of the request that the caller computes (e.g. SHA-256 over the
 * planner's module hash, the mesh body and the canonical options). The same
 * request twice: look it up with st_plan_get_by_hash before planning; a put
 * with a stored hash returns the stored plan's id with existed = true (and
 * stores nothing of the second put, its input included).
 *
 * A plan also keeps what it was planned from, so later consumers load that
 * rather than re-planning the graph: input is the model text exactly as
 * planned (a graph document with the mesh and stored rules merged in, or
 * MLIR text), and rules, for an MLIR input planned with stored rules, a graph
 * document holding only custom_rules. Plans stored without an input (by a
 * caller that has none, or before schema 5) read back with input and rules
 * NULL. An input equal byte for byte to the body of the graph the same put
 * stores (and in its format, without rules) is kept once: the row marks it
 * (input_is_graph, schema 8) and reads back the graph's body and format, so
 * callers see no difference. */

typedef struct st_plan {
    int64_t id;
    char hash[ST_HASH_HEX_LEN + 1]; /* request hash, lower-case hex */
    int64_t graph_id;               /* the graph planned */
    int64_t mesh_id;                /* stored mesh used, 0 if none / deleted */
    char *options;                  /* heap JSON object */
    size_t options_len;
    char *body; /* heap plan JSON; NULL in list results */
    size_t body_len;
    int64_t created_at;
    char *input;        /* heap, NUL-terminated: the model text as planned; NULL in list
                         * results and when the plan was stored without one */
    size_t input_len;   /* bytes, also set in list results; 0 when no input */
    bool input_is_mlir; /* input is MLIR text, else a graph document (JSON); false when none */
    char *rules;        /* heap, NUL-terminated graph document with only custom_rules (an
                         * MLIR input planned with stored rules); NULL otherwise and in
                         * list results */
    size_t rules_len;   /* bytes, also set in list results; 0 when no rules */
} st_plan;

typedef struct st_plan_in {
    const char *hash;    /* required: 64 hex digits (upper case is folded) */
    int64_t graph_id;    /* must exist (CM_ENOTFOUND at /graph_id) */
    int64_t mesh_id;     /* 0, or must exist (CM_ENOTFOUND at /mesh_id) */
    const char *options; /* JSON, or NULL for "{}" */
    size_t options_len;
    const char *body; /* the plan JSON, body_len > 0 bytes */
    size_t body_len;
    /* What the plan was planned from (see above; schema 5). All zero = no
     * input. Appended so the fields above keep their positions. */
    const char *input; /* the model text exactly as planned, input_len > 0 bytes
                        * (CM_EINVAL at /input), or NULL when the caller has none */
    size_t input_len;
    bool input_is_mlir; /* input is MLIR text, else a graph document */
    const char *rules;  /* JSON graph document with only custom_rules, rules_len > 0 bytes,
                         * for an MLIR input planned with stored rules; NULL otherwise.
                         * CM_EINVAL at /rules without an MLIR input or when not JSON */
    size_t rules_len;
    /* The plan's graph to store with it in one transaction (schema
     * unchanged): when set, graph_id must be 0 and the graph row is found
     * or inserted as st_graph_put would (with its errors). */
    const st_graph_in *graph;
} st_plan_in;

typedef struct st_plan_query {
    size_t limit;
    int64_t after_id;
    int64_t graph_id;       /* 0 = any */
    int64_t mesh_id;        /* 0 = any */
    int64_t created_after;  /* >=, 0 = no bound */
    int64_t created_before; /* <, 0 = no bound */
} st_plan_query;

typedef struct st_plan_list {
    st_plan *items; /* bodies, inputs and rules NULL, options set */
    size_t n_items;
    int64_t next_after;
} st_plan_list;

void st_plan_query_init(st_plan_query *q);
void st_plan_fini(st_plan *p);
void st_plan_list_fini(st_plan_list *l);

/* The plan body and input are not re-validated (they can be large and come
 * from our own planner and decoder); options and rules are checked as JSON. */
cm_status st_plan_put(st_db *db, const st_plan_in *in, int64_t *id_out, bool *existed_out,
                      cm_error *err);
/* st_plan_put that also fills *row with the stored row as st_plan_list_query
 * returns it (no body, input or rules; options heap, freed by st_plan_fini):
 * the new row from what was put, without reading it back, or, when the hash
 * was stored already (*existed_out true; may be NULL), that row read back
 * (CM_ENOTFOUND at /id if it was deleted meanwhile). *row is zeroed on
 * error. */
cm_status st_plan_put_row(st_db *db, const st_plan_in *in, st_plan *row, bool *existed_out,
                          cm_error *err);
/* Both fill *out with the body, input and rules as stored (heap, freed by
 * st_plan_fini). Errors: CM_ENOTFOUND at /id or /hash; CM_EINVAL at /hash. */
cm_status st_plan_get(st_db *db, int64_t id, st_plan *out, cm_error *err);
cm_status st_plan_get_by_hash(st_db *db, const char *hash, st_plan *out, cm_error *err);
cm_status st_plan_list_query(st_db *db, const st_plan_query *q, st_plan_list *out, cm_error *err);
cm_status st_plan_delete(st_db *db, int64_t id, cm_error *err);

/* ---- migration reports -------------------------------------------------------
 * A GSPMD -> Shardy migration report (planner/advise/sp_migrate.h) computed
 * for a module and a device profile, keyed by the caller's request hash
 * like plans: a put with a stored hash returns that row's id with
 * existed = true and changes nothing. The input (the module text) and the
 * body (the report JSON) are kept whole. Schema 7. */

typedef struct st_migreport {
    int64_t id;
    char hash[ST_HASH_HEX_LEN + 1];
    char name[ST_NAME_MAX_LEN + 1]; /* the caller's label for the module */
    char profile[ST_NAME_MAX_LEN + 1];
    char *input;      /* heap module text; NULL in list results */
    size_t input_len; /* bytes (also in list results) */
    char *body;       /* heap report JSON; NULL in list results */
    size_t body_len;  /* bytes (also in list results) */
    int64_t created_at;
} st_migreport;

typedef struct st_migreport_in {
    const char *hash;    /* 64 hex digits */
    const char *name;    /* 1..ST_NAME_MAX_LEN bytes */
    const char *profile; /* 1..ST_NAME_MAX_LEN bytes */
    const char *input;   /* input_len > 0 bytes */
    size_t input_len;
    const char *body; /* body_len > 0 bytes of JSON (not re-validated) */
    size_t body_len;
} st_migreport_in;

typedef struct st_migreport_list {
    st_migreport *items; /* inputs and bodies NULL */
    size_t n_items;
    int64_t next_after; /* cursor for the next page; 0 at the end */
} st_migreport_list;

void st_migreport_fini(st_migreport *r);
void st_migreport_list_fini(st_migreport_list *l);
/* Stores a report. Errors: CM_EINVAL at /hash, /name, /profile, /input or
 * /body for a missing or oversized field; CM_EIO; CM_ENOMEM. */
cm_status st_migreport_put(st_db *db, const st_migreport_in *in, int64_t *id_out, bool *existed_out,
                           cm_error *err);
/* Fills *out (zeroed first; free with st_migreport_fini). Errors:
 * CM_ENOTFOUND at /id or /hash; CM_EINVAL at /id or /hash. */
cm_status st_migreport_get(st_db *db, int64_t id, st_migreport *out, cm_error *err);
cm_status st_migreport_get_by_hash(st_db *db, const char *hash, st_migreport *out, cm_error *err);
/* A page of reports, oldest first, ids above after_id, at most limit (0:
 * the default page; st_db.h, "Paging"). */
cm_status st_migreport_list_query(st_db *db, size_t limit, int64_t after_id, st_migreport_list *out,
                                  cm_error *err);

/* Rows a list page examines at most for the filters no index serves. */
#define ST_LIST_SCAN_ROWS 10000

/* ---- benchmark runs -----------------------------------------------------------
 * Created queued by the API, run later by the executor. Status moves
 * queued -> running -> succeeded | failed | canceled (queued -> failed and
 * queued -> canceled also allowed). succeeded, failed and canceled are final:
 * a final run keeps its status, but its results and error may still be
 * updated (e.g. with the webhook's delivery record). */

typedef enum st_bench_status {
    ST_BENCH_QUEUED = 0,
    ST_BENCH_RUNNING,
    ST_BENCH_SUCCEEDED,
    ST_BENCH_FAILED,
    ST_BENCH_CANCELED,
    ST_BENCH_N_STATUS
} st_bench_status;

/* "queued", "running", "succeeded", "failed", "canceled". */
const char *st_bench_status_name(st_bench_status s);
bool st_bench_status_parse(const char *s, st_bench_status *out);

typedef struct st_bench {
    int64_t id;
    int64_t plan_id; /* 0 if none / deleted */
    char *spec;      /* heap JSON: the request as accepted */
    size_t spec_len;
    st_bench_status status;
    double progress; /* 0..1 */
    char *results;   /* heap JSON, NULL until set; NULL in list results */
    size_t results_len;
    char *error;        /* heap message, NULL unless failed with one */
    char *webhook_url;  /* heap, NULL if none */
    int64_t created_at; /* unix seconds */
    int64_t updated_at; /* unix seconds */
} st_bench;

typedef struct st_bench_update {
    st_bench_status status; /* new status; may equal the current one */
    double progress;        /* 0..1 (CM_EINVAL at /progress otherwise) */
    const char *results;    /* JSON, or NULL to keep */
    size_t results_len;
    const char *error; /* message, or NULL to keep */
} st_bench_update;

typedef struct st_bench_query {
    size_t limit;
    int64_t after_id;
    bool has_status; /* filter by status */
    st_bench_status status;
    int64_t plan_id; /* 0 = any */
} st_bench_query;

typedef struct st_bench_list {
    st_bench *items; /* results NULL */
    size_t n_items;
    int64_t next_after;
} st_bench_list;

void st_bench_query_init(st_bench_query *q);
void st_bench_fini(st_bench *b);
void st_bench_list_fini(st_bench_list *l);

/* Creates a queued run. plan_id 0 or an existing plan (CM_ENOTFOUND at
 * /plan_id); spec is JSON (CM_EINVAL at /spec); webhook_url NULL or an
 * http:// or https:// URL (CM_EINVAL at /webhook_url). */
cm_status st_bench_create(st_db *db, int64_t plan_id, const char *spec, size_t spec_len,
                          const char *webhook_url, int64_t *id_out, cm_error *err);
cm_status st_bench_get(st_db *db, int64_t id, st_bench *out, cm_error *err);
cm_status st_bench_list_query(st_db *db, const st_bench_query *q, st_bench_list *out,
                              cm_error *err);
/* Applies u. Errors: CM_ENOTFOUND at /id; CM_ECONFLICT at /status for a
 * transition not listed above; CM_EINVAL at /progress or /results. */
cm_status st_bench_set(st_db *db, int64_t id, const st_bench_update *u, cm_error *err);
/* Atomically marks the oldest queued run running and returns its id; among
 * several workers each run is claimed once. CM_ENOTFOUND when none queued. */
cm_status st_bench_claim(st_db *db, int64_t *id_out, cm_error *err);
cm_status st_bench_delete(st_db *db, int64_t id, cm_error *err);

/* ---- API tokens ------------------------------------------------------------------
 * Only SHA-256(token) and a display prefix are stored. Generated tokens are
 * "spt_" + 40 hex digits (160 random bits from /dev/urandom). */

typedef enum st_scope {
    ST_SCOPE_READ = 1, /* ordered: a scope includes the ones below it */
    ST_SCOPE_WRITE = 2,
    ST_SCOPE_ADMIN = 3
} st_scope;

#define ST_TOKEN_LEN        44 /* generated token length, without the NUL */
#define ST_TOKEN_MIN_LEN    32 /* shortest token st_token_put accepts */
#define ST_TOKEN_MAX_LEN    256
#define ST_TOKEN_PREFIX_LEN 12 /* display prefix, e.g. "spt_1a2b3c4d" */

/* "read", "write", "admin". */
const char *st_scope_name(st_scope s);
bool st_scope_parse(const char *s, st_scope *out);

typedef struct st_token {
    int64_t id;
    char prefix[ST_TOKEN_PREFIX_LEN + 1]; /* first characters of the token */
    st_scope scope;
    char *label;        /* heap, "" if none */
    int64_t created_at; /* unix seconds */
} st_token;

typedef struct st_token_query {
    size_t limit;
    int64_t after_id;
} st_token_query;

typedef struct st_token_list {
    st_token *items;
    size_t n_items;
    int64_t next_after;
} st_token_list;

void st_token_query_init(st_token_query *q);
void st_token_fini(st_token *t);
void st_token_list_fini(st_token_list *l);

/* Generates a new token, stores its hash and prefix with scope and label
 * (NULL = ""), and writes the token text (shown once, never stored) to
 * token_out. Errors: CM_EINVAL at /scope or /label; CM_EIO when no random
 * bytes could be read. */
cm_status st_token_create(st_db *db, st_scope scope, const char *label,
                          char token_out[ST_TOKEN_LEN + 1], int64_t *id_out, cm_error *err);
/* Stores a caller-chosen token (e.g. a bootstrap admin token from the
 * environment): printable ASCII without spaces, ST_TOKEN_MIN_LEN..
 * ST_TOKEN_MAX_LEN bytes (CM_EINVAL at /token). A token already stored is
 * CM_ECONFLICT at /token. */
cm_status st_token_put(st_db *db, const char *token, st_scope scope, const char *label,
                       int64_t *id_out, cm_error *err);
/* Checks a presented token: hashes it and compares against the stored hashes
 * with the same prefix in constant time. On a match *scope_out and *id_out
 * (either may be NULL) are set; otherwise CM_ENOTFOUND with no path and a
 * message that says nothing about which part was wrong. */
cm_status st_token_check(st_db *db, const char *presented, st_scope *scope_out, int64_t *id_out,
                         cm_error *err);
cm_status st_token_get(st_db *db, int64_t id, st_token *out, cm_error *err);
cm_status st_token_list_query(st_db *db, const st_token_query *q, st_token_list *out,
                              cm_error *err);
/* Revokes (deletes) a token. Errors: CM_ENOTFOUND at /id. */
cm_status st_token_delete(st_db *db, int64_t id, cm_error *err);

/* ---- online backup ------------------------------------------------------------------
 * Added for docker/ and docs/operations.md; self-contained. */

/* Copies the database behind db into the file dest with SQLite's online
 * backup API, while other handles (this process or a running server) keep
 * reading and writing the source: in WAL mode the copy reads one consistent
 * snapshot and never blocks writers, and commits made after the snapshot
 * began are not in the copy. The pages go to "dest.partial" through a
 * separate connection, which is synced, then renamed over dest, so dest is
 * either the old file or a complete backup, never half written. The copy is
 * a normal database file: st_db_open (or `shardplan serve --db dest`) opens
 * it directly.
 * Errors: CM_EINVAL at /dest for an empty or too long name, or when dest is
 * the database file itself; CM_EIO when dest cannot be written or the source
 * stays busy for ST_DB_BUSY_TIMEOUT_MS; CM_ENOMEM. On error dest is left as
 * it was and the partial file is removed.
 * Thread safety: holds this handle for the duration of the copy (one pass);
 * other handles on the same file are not held up. */
cm_status st_db_backup(st_db *db, const char *dest, cm_error *err);

#endif /* ST_DB_H */
