/* SPDX-License-Identifier: Apache-2.0
 * planner: the in-memory IR of a module — sdy.mesh symbols, functions, ops
 * with operands, results, attributes and nested regions — and its MLIR text
 * reader and printer.
 *
 * Layout: everything lives in the module's arena and in a few growable
 * tables indexed by 32-bit ids (values, ops, blocks, types), so passes can
 * keep side tables as plain arrays. Results of one op are consecutive value
 * ids. Types are interned: equal types have equal ids.
 * Attributes are kept in their canonical (generic-form) names whatever syntax
 * the input used, so `stablehlo.broadcast_in_dim %x, dims = [0]` carries
 * `broadcast_dimensions = array<i64: 0>`; the printer writes the pretty form
 * back.
 * Ownership: sp_module_destroy frees everything. Thread contract: a module is
 * used by one thread at a time. */
#ifndef SP_IR_H
#define SP_IR_H

#include "cm.h"
#include "cm_map.h"
#include "sp_shard.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SP_NONE        UINT32_MAX
#define SP_DIM_DYNAMIC INT64_MIN /* a `?` dimension */
#define SP_MAX_RANK    64        /* limits enforced by the reader */

/* ---- types ------------------------------------------------------------------ */

typedef enum sp_elem {
    SP_ELEM_OTHER = 0, /* kept verbatim in sp_type.text */
    SP_ELEM_I1,
    SP_ELEM_I2,
    SP_ELEM_I4,
    SP_ELEM_I8,
    SP_ELEM_I16,
    SP_ELEM_I32,
    SP_ELEM_I64,
    SP_ELEM_UI2,
    SP_ELEM_UI4,
    SP_ELEM_UI8,
    SP_ELEM_UI16,
    SP_ELEM_UI32,
    SP_ELEM_UI64,
    SP_ELEM_BF16,
    SP_ELEM_F16,
    SP_ELEM_F32,
    SP_ELEM_F64,
    SP_ELEM_F8E4M3FN,
    SP_ELEM_F8E5M2,
    SP_ELEM_F4E2M1FN, /* the other small floats (sp_float.h) */
    SP_ELEM_F6E2M3FN,
    SP_ELEM_F6E3M2FN,
    SP_ELEM_F8E3M4,
    SP_ELEM_F8E4M3,
    SP_ELEM_F8E4M3B11FNUZ,
    SP_ELEM_F8E4M3FNUZ,
    SP_ELEM_F8E5M2FNUZ,
    SP_ELEM_F8E8M0FNU,
    SP_ELEM_C64,  /* complex<f32> */
    SP_ELEM_C128, /* complex<f64> */
    SP_ELEM_INDEX
} sp_elem;

typedef enum sp_type_kind {
    SP_TYPE_TENSOR, /* ranked tensor */
    SP_TYPE_TOKEN,  /* !stablehlo.token */
    SP_TYPE_FUNC,   /* (inputs) -> results */
    SP_TYPE_OTHER   /* tuples, unranked tensors, scalars: verbatim only */
} sp_type_kind;

typedef struct sp_type {
    sp_type_kind kind;
    sp_elem elem;        /* for tensors */
    uint32_t rank;       /* for tensors */
    const int64_t *dims; /* rank entries, SP_DIM_DYNAMIC for '?' */
    const char *text;    /* canonical MLIR text, NUL-terminated */
    uint32_t text_len;
    const char *encoding;/* text of a tensor encoding attribute, or NULL */
    const uint32_t *inputs;  /* SP_TYPE_FUNC: input type ids */
    uint32_t n_inputs;
    const uint32_t *results; /* SP_TYPE_FUNC: result type ids */
    uint32_t n_results;
} sp_type;

/* Bytes per element (0 for OTHER; i1 counts as 1 byte, sub-byte as 1). */
size_t sp_elem_bytes(sp_elem e);
const char *sp_elem_name(sp_elem e);
/* The element type spelled s[0..n) ("f32", "f8E4M3FN"), or SP_ELEM_OTHER. */
sp_elem sp_elem_of_name(const char *s, size_t n);

/* ---- attributes ------------------------------------------------------------- */

typedef enum sp_attr_kind {
    SP_ATTR_UNIT,          /* a present-without-value attribute */
    SP_ATTR_BOOL,          /* true / false */
    SP_ATTR_INT,           /* 42 : i64 (type may be absent) */
    SP_ATTR_FLOAT,         /* 1.0e-3 : f32 */
    SP_ATTR_STRING,        /* "..." */
    SP_ATTR_SYMBOL,        /* @name */
    SP_ATTR_TYPE,          /* a type used as an attribute */
    SP_ATTR_ARRAY,         /* [a, b, c] */
    SP_ATTR_DENSE_ARRAY,   /* array<i64: 1, 2> */
    SP_ATTR_DICT,          /* {k = v, ...} */
    SP_ATTR_DENSE,         /* dense<...> : tensor<...> (body kept verbatim, ints decoded) */
    SP_ATTR_PARAMS,        /* #dialect.name<k = v, ...> with parsed parameters */
    SP_ATTR_ENUM,          /* #stablehlo<fft_type RFFT>, or a bare enum keyword */
    SP_ATTR_OPAQUE,        /* anything else, kept verbatim */
    SP_ATTR_MESH,          /* #sdy.mesh<...> or the mesh of an sdy.mesh op */
    SP_ATTR_SHARDING,      /* #sdy.sharding<...> */
    SP_ATTR_SHARDING_LIST, /* #sdy.sharding_per_value<[...]> */
    SP_ATTR_RULE,          /* #sdy.op_sharding_rule<...> */
    SP_ATTR_AXIS_LIST,     /* {"x", "y":(1)2}: sdy AxisRefListAttr / ManualAxesAttr */
    SP_ATTR_AXIS_LISTS,    /* [{"x"}, {}]: sdy ListOfAxisRefListsAttr, one list per dimension */
    SP_ATTR_ALL_TO_ALL     /* [{"x"}: 0->1, ...]: sdy AllToAllParamListAttr */
} sp_attr_kind;

/* A list of sdy axis refs (names are arena strings; size is 0 for a full
 * axis until resolved against a mesh). */
typedef struct sp_axis_list {
    sp_axis_ref *axes;
    uint32_t n;
    bool manual; /* as an attribute: sdy ManualAxesAttr (#sdy<manual_axes{..}>) */
} sp_axis_list;

/* One `{"x"}: 0->1` parameter of sdy.all_to_all. */
typedef struct sp_all_to_all_param {
    sp_axis_list axes;
    int64_t src_dim;
    int64_t tgt_dim;
} sp_all_to_all_param;

typedef struct sp_attr sp_attr;

typedef struct sp_named_attr {
    const char *name; /* NUL-terminated */
    sp_attr *value;
} sp_named_attr;

struct sp_attr {
    sp_attr_kind kind;
    union {
        bool b;
        struct {
            int64_t v;
            const char *type; /* "i64", "i32", ... or NULL */
        } i;
        struct {
            double v;
            const char *lit;  /* the literal as written, e.g. "1.000000e-03" */
            const char *type; /* or NULL */
        } f;
        struct {
            const char *s; /* decoded bytes, NUL-terminated */
            size_t len;
        } str;
        const char *sym;  /* symbol without '@' */
        uint32_t type;    /* SP_ATTR_TYPE: type id */
        struct {
            sp_attr **items;
            uint32_t n;
        } arr;
        struct {
            const char *elem; /* "i64", "i1", ... */
            int64_t *v;
            uint32_t n;
        } darr;
        struct {
            sp_named_attr *items;
            uint32_t n;
        } dict;
        struct {
            const char *body;  /* text between dense< and >, verbatim */
            uint32_t type;     /* type id of the `: type` */
            int64_t *ints;     /* flattened integer values when all are ints, else NULL */
            uint32_t n_ints;
        } dense;
        struct {
            const char *name;  /* "stablehlo.gather", "stablehlo.dot", ... (no '#') */
            sp_named_attr *items;
            uint32_t n;
        } params;
        struct {
            const char *text;  /* verbatim, including any '#' prefix */
        } opaque;
        struct {
            const char *dialect; /* "stablehlo" */
            const char *kind;    /* "fft_type", "comparison_direction", "transpose" */
            const char *value;   /* "RFFT", "GT", "TRANSPOSE" */
        } enm;
        sp_mesh *mesh;
        sp_sharding *sharding;
        struct {
            sp_sharding **items;
            uint32_t n;
        } shardings;
        sp_rule *rule;
        sp_axis_list axes; /* SP_ATTR_AXIS_LIST */
        struct {
            sp_axis_list *items; /* one per tensor dimension */
            uint32_t n;
        } axis_lists;            /* SP_ATTR_AXIS_LISTS */
        struct {
            sp_all_to_all_param *items;
            uint32_t n;
        } a2a;                   /* SP_ATTR_ALL_TO_ALL */
    } u;
};

/* Finds a named attribute in a list; NULL when absent. */
const sp_attr *sp_attrs_get(const sp_named_attr *attrs, uint32_t n, const char *name);
/* Reads integers from an attribute that is an int, a dense array, an array
 * of ints or an integer dense<>; returns false when it is none of these. */
bool sp_attr_ints(const sp_attr *a, const int64_t **v_out, uint32_t *n_out, cm_arena *scratch);
/* Structural equality of two attributes as written: same kind and same
 * value, element by element (dictionaries and parameters in order, names
 * compared). Mesh, sharding, rule and the other sdy kinds compare equal
 * only when they are the same object, and nesting deeper than 8 levels
 * compares unequal, so callers that cache by attribute (rule caches) never
 * share a result they should not. */
bool sp_attr_equal(const sp_attr *a, const sp_attr *b);
/* A hash consistent with sp_attr_equal: equal attributes hash equally (the
 * sdy kinds hash by kind only; levels below the 8th are not looked at).
 * Deterministic within a process, for hash maps, not for storage. */
uint64_t sp_attr_hash(const sp_attr *a);

/* ---- locations ----------------------------------------------------------------
 * MLIR's source locations as the reader resolved them (aliases `#locN`
 * followed): what JAX writes with debug info. The text as written stays in
 * sp_op.loc / sp_block.arg_locs / sp_module.loc for printing; these are for
 * use (value names, Python source lines). Arena-owned, shared. */

typedef enum sp_loc_kind {
    SP_LOC_UNKNOWN,  /* loc(unknown) */
    SP_LOC_FILE,     /* "file":line:col (a ` to ...` range end is dropped) */
    SP_LOC_NAME,     /* "name" or "name"(child) */
    SP_LOC_CALLSITE, /* callsite(callee at caller): kids[0] callee, kids[1] caller */
    SP_LOC_FUSED     /* fused[a, b] or fused<metadata>[a, b] */
} sp_loc_kind;

typedef struct sp_loc sp_loc;
struct sp_loc {
    sp_loc_kind kind;
    const char *str;            /* FILE: the file; NAME: the name; FUSED: metadata text or NULL */
    uint32_t line, col;         /* FILE: 1-based line, column as written */
    const sp_loc *const *kids;  /* NAME: 0 or 1 child; CALLSITE: 2; FUSED: the members */
    uint32_t n_kids;
};

/* The name a location gives: a name location's own name, through callsites
 * (the callee first) and fused locations (the first member that has one);
 * NULL when none. */
const char *sp_loc_name(const sp_loc *l);
/* The file location inside l, callee before caller and the first fused
 * member that has one; NULL when none. */
const sp_loc *sp_loc_file(const sp_loc *l);

/* ---- values, ops, blocks, regions ------------------------------------------ */

typedef struct sp_value {
    uint32_t type;  /* type id */
    uint32_t def;   /* defining op id, or SP_NONE for a block argument */
    uint32_t index; /* result number, or argument number */
    uint32_t block; /* owning block id for a block argument, else SP_NONE */
} sp_value;

typedef struct sp_region {
    uint32_t *blocks; /* block ids */
    uint32_t n_blocks;
} sp_region;

typedef struct sp_block {
    uint32_t first_arg; /* value id of argument 0 */
    uint32_t n_args;
    uint32_t *ops;      /* op ids in order */
    uint32_t n_ops;
    uint32_t cap_ops;
    uint32_t parent_op; /* op owning the region of this block, SP_NONE for the module body */
    const char *label;  /* "bb0" as written, or NULL */
    const char **arg_locs; /* per-argument loc text or NULL */
    const sp_loc **arg_where; /* per-argument resolved location (entries may be NULL), or NULL */
} sp_block;

typedef struct sp_op {
    const char *name;       /* interned: "stablehlo.add", "func.func", "sdy.mesh" */
    uint32_t kind;          /* sp_op_kind (sp_ops.h), SP_OP_UNKNOWN when not known */
    uint32_t *operands;     /* value ids */
    uint32_t n_operands;
    uint32_t first_result;  /* value id of result 0 */
    uint32_t n_results;
    sp_named_attr *attrs;   /* in order of appearance (canonical names), module arena */
    uint32_t n_attrs;
    sp_region *regions;
    uint32_t n_regions;
    uint32_t parent_block;  /* block id */
    uint32_t line, col;     /* 1-based source position of the op, 0 when built */
    const char *loc;        /* text inside loc(...) or NULL */
    const sp_loc *where;    /* loc resolved (sp_loc), or NULL */
} sp_op;

typedef struct sp_module sp_module;

/* A top-level attribute alias definition `#name = value`, kept so that types
 * that mention it (`tensor<4xf32, #CSR>`) print back with their definition. */
typedef struct sp_alias {
    const char *name;  /* without '#' */
    const char *text;  /* the value, whitespace-normalised */
    sp_attr *value;    /* the parsed value */
} sp_alias;

struct sp_module {
    cm_arena arena;
    sp_value *values;
    uint32_t n_values, cap_values;
    sp_op *ops;
    uint32_t n_ops, cap_ops;
    sp_block *blocks;
    uint32_t n_blocks, cap_blocks;
    sp_type *types;
    uint32_t n_types, cap_types;
    cm_map type_ids;       /* uint32_t type ids, by the hash of their canonical text */
    uint32_t body;         /* block id of the module body */
    const char *sym_name;  /* `module @name`, or NULL */
    sp_named_attr *attrs;  /* `module attributes {...}` */
    uint32_t n_attrs;
    bool had_module_op;    /* input was wrapped in `module { }` */
    sp_alias *aliases;     /* `#name = ...` definitions in input order (arena) */
    uint32_t n_aliases;
    const char *loc;       /* text inside the module's trailing loc(...), or NULL */
};

sp_module *sp_module_create(void);
void sp_module_destroy(sp_module *m);

/* Interns a type given its canonical text; the reader is the usual caller. */
cm_status sp_module_intern_type(sp_module *m, const char *text, size_t len, uint32_t *id_out,
                                cm_error *err);
/* Builds and interns a ranked tensor type. */
cm_status sp_module_tensor_type(sp_module *m, sp_elem elem, const int64_t *dims, uint32_t rank,
                                uint32_t *id_out, cm_error *err);

/* Creating IR (used by the reader, passes and generators). */
cm_status sp_module_new_block(sp_module *m, uint32_t parent_op, uint32_t *id_out);
cm_status sp_module_add_block_arg(sp_module *m, uint32_t block, uint32_t type, uint32_t *value_out);
/* Creates an op appended to block (SP_NONE: detached) with n_results results
 * of the given types; operands are copied. */
cm_status sp_module_new_op(sp_module *m, uint32_t block, const char *name,
                           const uint32_t *operands, uint32_t n_operands,
                           const uint32_t *result_types, uint32_t n_results, uint32_t *op_out);
/* Inserts a detached op (created with block SP_NONE) into block at index
 * (n_ops appends). */
cm_status sp_block_insert_op(sp_module *m, uint32_t block, uint32_t index, uint32_t op);
/* Removes the op at index from block (the op stays in the table, detached). */
void sp_block_remove_op(sp_module *m, uint32_t block, uint32_t index);
/* Index of op in its parent block, or SP_NONE. */
uint32_t sp_op_index_in_block(const sp_module *m, uint32_t op);
/* Copies op (attributes shared, no regions) as a detached op with fresh results. */
cm_status sp_op_clone_detached(sp_module *m, uint32_t op, uint32_t *clone_out);
/* A value renaming for deep clones, like MLIR's IRMapping: a hash map from
 * value to replacement, sized by what it holds. Zero-initialise; free with
 * sp_value_map_free. */
typedef struct sp_value_map {
    cm_map map; /* entries: uint32_t from, to */
} sp_value_map;
/* Maps from to to. Errors: CM_ENOMEM. */
cm_status sp_value_map_set(sp_value_map *map, uint32_t from, uint32_t to);
/* The value v maps to, or SP_NONE when unmapped. */
uint32_t sp_value_map_get(const sp_value_map *map, uint32_t v);
void sp_value_map_free(sp_value_map *map);
/* Copies op with its regions, blocks and nested ops as a detached op
 * (attributes shared): operands mapped by map are replaced, and the clone's
 * results and block arguments are added to map as the originals' images.
 * Errors: CM_ENOMEM; CM_EINVAL for an op with more than 64 results. */
cm_status sp_op_clone_deep(sp_module *m, uint32_t op, sp_value_map *map, uint32_t *clone_out);
/* Sets (replaces or appends) attribute name on op. */
cm_status sp_op_set_attr(sp_module *m, uint32_t op, const char *name, sp_attr *value);
const sp_attr *sp_op_attr(const sp_module *m, uint32_t op, const char *name);
bool sp_op_remove_attr(sp_module *m, uint32_t op, const char *name);
/* Allocates regions for an op. */
cm_status sp_op_add_regions(sp_module *m, uint32_t op, uint32_t n_regions);
cm_status sp_region_add_block(sp_module *m, uint32_t op, uint32_t region, uint32_t block);
/* Interns a string in the module arena (no dedup guarantee). */
const char *sp_module_str(sp_module *m, const char *s, size_t len);
sp_attr *sp_attr_new(sp_module *m, sp_attr_kind kind);

static inline const sp_type *sp_value_type(const sp_module *m, uint32_t v)
{
    return &m->types[m->values[v].type];
}

/* ---- shardings attached to values ----------------------------------------------
 * A function argument carries its sharding in the function's arg_attrs, an op
 * result in the op's `sdy.sharding` list, a sharding constraint's result in
 * the op's `sharding`; function results in res_attrs. NULL: no sharding. The
 * getters return the module's own sharding, which other values and
 * attributes may share: set a new one rather than change it. */
sp_sharding *sp_value_sharding(const sp_module *m, uint32_t v);
/* The sharding of v in a partitioned module: like sp_value_sharding, but the
 * result of an sdy collective is its `out_sharding`, of sdy.reshard its
 * `sharding`, of a manual or named computation its `out_shardings` entry
 * (when given), and a while body's argument is sharded as the while's
 * result. */
sp_sharding *sp_value_sharding_partitioned(const sp_module *m, uint32_t v);
/* Sets the sharding of v (an op result or a function entry argument); for an
 * op result whose siblings have no sharding yet they become fully open. */
cm_status sp_value_set_sharding(sp_module *m, uint32_t v, sp_sharding *s);
sp_sharding *sp_func_result_sharding(const sp_module *m, uint32_t func, uint32_t i);
cm_status sp_func_set_result_sharding(sp_module *m, uint32_t func, uint32_t i, sp_sharding *s);
/* Sets (value NULL: removes) key in the attribute dict of argument or result i. */
cm_status sp_func_set_arg_attr(sp_module *m, uint32_t func, uint32_t i, const char *key,
                               sp_attr *value);
cm_status sp_func_set_result_attr(sp_module *m, uint32_t func, uint32_t i, const char *key,
                                  sp_attr *value);
/* The function type of a func.func op, or NULL. */
const sp_type *sp_func_type(const sp_module *m, uint32_t func);

/* The location of value v: a block argument's own, an op result's op's;
 * NULL when it has none. */
const sp_loc *sp_value_loc(const sp_module *m, uint32_t v);
/* The name of value v as the producer gave it: the name of a block
 * argument's location (`loc("params['w1']")`) or of its op's location when
 * that is a bare name (`loc("x")`, no child); NULL when none. */
const char *sp_value_name(const sp_module *m, uint32_t v);
/* The name JAX gives result i of func.func op func: its `jax.result_info`
 * result attribute when that is a non-empty string, else NULL. */
const char *sp_func_result_name(const sp_module *m, uint32_t func, uint32_t i);
/* Writes where op comes from as `FILE:LINE` (the file location of its
 * location) into buf (NUL-terminated, cut to n bytes); returns false and
 * writes "" when it has none. */
bool sp_op_source(const sp_module *m, uint32_t op, char *buf, size_t n);

/* Finds the mesh named name (sdy.mesh symbol) in the module body; NULL when absent. */
const sp_mesh *sp_module_mesh(const sp_module *m, const char *name);
/* Finds the func.func named name; SP_NONE when absent. */
uint32_t sp_module_func(const sp_module *m, const char *name);
/* True when m holds explicit sdy collectives or reshards: it has been
 * partitioned (-sdy-insert-explicit-reshards, -sdy-reshard-to-collectives)
 * and is not propagated again. */
bool sp_module_is_partitioned(const sp_module *m);

#endif /* SP_IR_H */
