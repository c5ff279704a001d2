/* SPDX-License-Identifier: Apache-2.0
 * server: the JSON codecs of the HTTP API (the only server file that uses
 * jansson). Decoders turn request bodies into plain structs whose strings
 * live in the request's arena and report bad input as CM_EINVAL with an RFC
 * 6901 path; encoders append to a cm_buf. The client's table printer is here
 * too. Thread contract: reentrant. */
#ifndef SRV_JSON_H
#define SRV_JSON_H

#include "cm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A POST /v1/plans envelope: {"graph": {...} | "mlir": "..." | "graph_id": N,
 * "mesh": "stored name" | {"name"?, "axes": [...]}, "options": {"pass": "..."},
 * "name": "..."}. Exactly one of graph, mlir, graph_id. */
typedef struct srv_plan_req {
    const char *graph; /* the graph document re-serialized, or NULL */
    size_t graph_len;
    const char *graph_at; /* where graph sits in the request ("/graph" in an envelope,
                           * NULL for a bare document): the prefix of its error paths */
    const char *mlir; /* MLIR text, or NULL */
    size_t mlir_len;
    int64_t graph_id;      /* stored graph, or 0 */
    const char *mesh_name; /* stored mesh to apply, or NULL */
    const char *mesh;      /* inline mesh object, or NULL */
    size_t mesh_len;
    const char *pass; /* pass name, or NULL for the default */
    const char *name; /* name for the stored graph, or NULL */
} srv_plan_req;

/* True when a JSON body is a plan envelope (has "graph", "mlir", "graph_id"
 * or "example" at top level) rather than a bare graph document. It scans
 * the top level's keys without building a tree (a 144 MB graph document
 * costs no memory here); malformed JSON is not an envelope. */
bool srv_json_is_plan_envelope(const char *body, size_t len);

#define SRV_MESH_MAX_BYTES ((size_t)1 << 20) /* a mesh object's text, at most */

/* Checks, before anything parses the body into a tree, that no mesh object
 * in it is longer than SRV_MESH_MAX_BYTES of text: the envelope's "mesh",
 * the elements of "meshes" of the envelope's "graph" or of a bare graph
 * document (64 axes with their device ids fit many times over; a 14 MiB
 * mesh of 600,000 axes would cost hundreds of MiB as a tree). A scan of the
 * bytes, no allocation, in the same pass as srv_json_is_plan_envelope,
 * whose answer goes to *envelope_out (may be NULL). Errors: CM_EINVAL at
 * the mesh's JSON Pointer. */
cm_status srv_json_mesh_sizes_check(const char *body, size_t len, bool *envelope_out,
                                    cm_error *err);

/* Decodes an envelope. Strings go to arena a. Errors: CM_EINVAL with the
 * member's path, CM_ENOMEM. */
cm_status srv_json_plan_req_decode(const char *body, size_t len, cm_arena *a, srv_plan_req *out,
                                   cm_error *err);

/* A named rule or mesh body to merge into a graph document. */
typedef struct srv_named_doc {
    const char *name;
    const char *body;
    size_t body_len;
} srv_named_doc;

/* Writes graph with the mesh applied (NULL: none) and the rules added for
 * targets the document does not define itself. The mesh replaces the
 * document's mesh of the same name, else its only mesh (keeping its name),
 * else is added when the document has none. Errors: CM_EINVAL (path "/mesh"
 * when the document has several meshes and none of that name; syntax errors
 * with an empty path), CM_ENOMEM. */
cm_status srv_json_graph_merge(const char *graph, size_t len, const srv_named_doc *mesh,
                               const srv_named_doc *rules, size_t n_rules, cm_buf *out,
                               cm_error *err);

/* A graph document holding only a mesh ({"meshes":[{"name":N, ...body}],
 * "ops":[]}) or only custom rules, for validating with sp_graph_decode and
 * for building an sp_custom_rules table. Errors: CM_EINVAL when a body is not
 * a JSON object (mesh) or value (rule), CM_ENOMEM. */
cm_status srv_json_mesh_graph(const char *name, const char *body, size_t len, cm_buf *out,
                              cm_error *err);
cm_status srv_json_rules_graph(const srv_named_doc *rules, size_t n, cm_buf *out, cm_error *err);

/* True when name is a mesh name the server accepts: an MLIR bare identifier
 * [A-Za-z_][A-Za-z0-9_$.]*, 1 to 255 bytes, so that the module printed from a
 * stored plan reads back (the printer quotes other names, @"a-b", which
 * the reader does not read) and every plan-scoped route can use it. */
bool srv_json_mesh_name_ok(const char *name);

/* Appends the document's "custom_rules" member as compact JSON with sorted
 * keys (nothing when absent or empty): the part of a request that the
 * module's MLIR text does not show. It also checks that every mesh of the
 * document has a name srv_json_mesh_name_ok accepts (CM_EINVAL at
 * /meshes/N/name). Errors: CM_EINVAL (syntax, names), CM_ENOMEM. */
cm_status srv_json_rules_canon(const char *doc, size_t len, cm_buf *out, cm_error *err);

/* Checks that body is one JSON value (is_object: an object). Errors:
 * CM_EINVAL with line and column in the message. */
cm_status srv_json_check(const char *body, size_t len, bool is_object, cm_error *err);

/* The top-level "name" string of a JSON object, copied to a, or NULL. */
const char *srv_json_get_name(const char *body, size_t len, cm_arena *a);
/* The string member key of a JSON object, copied into a; NULL when the text
 * is not an object or the member is absent or not a string. */
const char *srv_json_get_string(const char *body, size_t len, const char *key, cm_arena *a);

/* POST /v1/runs: {"plan_id": N, "spec": {...}, "webhook_url": "..."}. */
typedef struct srv_run_req {
    int64_t plan_id;
    const char *spec; /* re-serialized object ("{}" when absent) */
    size_t spec_len;
    const char *webhook_url; /* or NULL */
} srv_run_req;
cm_status srv_json_run_req_decode(const char *body, size_t len, cm_arena *a, srv_run_req *out,
                                  cm_error *err);

/* A benchmark run's parameters, the members of its stored spec (docs/api.md
 * "Benchmark runs"). */
typedef struct srv_bench_spec {
    uint32_t devices; /* device workers, 1..SRV_BENCH_MAX_DEVICES; 0: the mesh size */
    uint32_t warmup;  /* untimed runs first, 0..1000 */
    uint32_t iters;   /* timed runs, 1..100000 */
    uint64_t seed;    /* argument generator seed */
    int affinity;     /* -1: default (pinned when the workers outnumber the CPUs), 0: never
                         pinned, 1: pinned (ex_exec_opts.affinity) */
    char fault[8];    /* "" or a test fault: "crash", "hang", "oom" */
} srv_bench_spec;

#define SRV_BENCH_MAX_DEVICES 256

/* Defaults: devices 0, warmup 1, iters 5, seed 1, affinity -1, no fault. */
void srv_bench_spec_init(srv_bench_spec *s);

/* POST /v1/benchmarks: {"plan_id", "devices", "warmup", "iters", "seed",
 * "affinity", "webhook_url"} (only plan_id required; "fault" only when allow_fault).
 * Fills out with the plan id, the URL and a spec object of the parameters
 * (allocated in a). Errors: CM_EINVAL with the member's path. */
cm_status srv_json_bench_req_decode(const char *body, size_t len, cm_arena *a, bool allow_fault,
                                    srv_run_req *out, cm_error *err);

/* Reads a stored spec (also one posted to /v1/runs): the members above are
 * checked, others ignored. Errors: CM_EINVAL at /spec/<member>. */
cm_status srv_json_bench_spec_decode(const char *spec, size_t len, srv_bench_spec *out,
                                     cm_error *err);

/* POST /v1/tokens: {"scope": "read|write|admin", "label": "..."}. */
typedef struct srv_token_req {
    const char *scope;
    const char *label; /* or NULL */
} srv_token_req;
cm_status srv_json_token_req_decode(const char *body, size_t len, cm_arena *a,
                                    srv_token_req *out, cm_error *err);

/* ---- client side ------------------------------------------------------------------ */

/* The message of an {"error":{...}} body ("code: message at path"), written
 * to buf; false when body is not such a document. */
bool srv_json_error_text(const char *body, size_t len, char *buf, size_t cap);

/* Prints a response readably: a list ({"items":[...]}) as a table of its
 * scalar columns, an object as "key: value" lines (nested values as compact
 * JSON), anything else as is. */
void srv_json_print_table(const char *body, size_t len, FILE *out);

/* Wraps a graph document or MLIR text as a plan envelope with options. */
cm_status srv_json_plan_envelope(const char *doc, size_t len, bool is_mlir, const char *mesh,
                                 const char *pass, cm_buf *out, cm_error *err);

#endif /* SRV_JSON_H */
