/* SPDX-License-Identifier: Apache-2.0
 * planner, private to planner/shardy/propagation/: the state of one
 * propagation run (sp_propagate), shared by the files that mirror Shardy's
 * propagation/ folder:
 *   sp_basic_propagation.c       the run: slots, rules, op steps, the
 *                                worklist to a fixed point, write-back;
 *   sp_basic_factor_propagation.c, sp_aggressive_factor_propagation.c
 *                                the two strategies that choose the axes
 *                                of each factor in an op step;
 *   sp_op_priority_propagation.c, sp_user_priority_propagation.c
 *                                the two levels above (rounds of the fixed
 *                                point, and what each round may see);
 *   sp_sharding_group_map.c      sharding groups;
 *   sp_source_sharding.c         debug-sharding-origins and
 *                                debug-edge-source-sharding.
 * Thread contract: a prop belongs to one call of sp_propagate. */
#ifndef SP_PROP_INT_H
#define SP_PROP_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cm_map.h"
#include "sp_ax.h"
#include "sp_diag.h"
#include "sp_ops.h"
#include "sp_pass.h"
#include "sp_prop.h"
#include "sp_sharding_projection.h"

#define MAXAX    SP_PROJ_MAX_AXES /* axes of one factor or dim in an op step */
#define MAXMESH  64               /* distinct meshes in a module */
#define ID_CACHE 256              /* identity-rule cache slots */
#define SP_PROP_OP_PRIORITIES 5   /* entries of Shardy's op-priority schedule */

/* ---- per-op scratch ----------------------------------------------------------- */

/* a factor's axes in one tensor of the step (sp_sharding_projection.h) */
typedef sp_factor_axes fsh;

typedef struct tens {
    uint32_t slot;
    uint32_t rank;
    const int64_t *dims;
    const sp_tensor_mapping *map;
    bool is_result; /* a result of the op (receives forward propagation) */
    bool updatable; /* may be changed by this step */
    bool changed;
    uint32_t pos;             /* operand or result number within the step's op */
    const sp_sharding *cur;   /* current sharding (may be NULL or on the empty mesh) */
    const struct meshent *me; /* sp_prop_mesh_of(cur) */
    uint32_t n_gained;        /* axes this step adds, for debug origins and edges */
    struct {
        ax a;         /* the (sub-)axis gained */
        uint32_t src; /* tensor index the axis came from */
    } gained[MAXAX];
    ax repl[MAXAX];
    uint32_t n_repl;
    /* a manual computation's data-flow edge: cur is the edge's sharding as
     * the other side sees it (xform 1: a body argument's edge seen with the
     * in sharding's manual axes in front; 2: a result's edge seen without
     * its manual axes), and a new sharding goes back through the inverse */
    uint8_t xform;
    const sp_sharding *outer; /* the in/out sharding the manual axes come from */
    const sp_attr *manual;    /* the manual_axes list */
} tens;

/* ---- propagation state -------------------------------------------------------- */

typedef struct meshent meshent;
struct meshent {
    const char *name;
    const sp_mesh *mesh;
    bool is_empty;   /* no axes and no device ids */
    bool is_maximal; /* no axes, one device id */
    uint32_t canon;  /* index of the first equal mesh */
};

typedef struct prop {
    sp_module *m;
    const sp_prop_opts *o;
    sp_diags *diags;
    cm_error *err;
    cm_status st;
    uint32_t n_slots;     /* values + function results */
    sp_sharding **sh;     /* per slot, current sharding (NULL: none) */
    sp_sharding **orig;   /* per slot, sharding before propagation */
    uint32_t *mc_first;   /* per op: first in-sharding slot of a manual computation, or SP_NONE */
    uint32_t *fres_func;  /* per function-result slot: func op (or manual computation) */
    uint32_t *fres_index; /* per function-result slot: result number */
    uint32_t *func_first; /* per op: first function-result slot of a func op (or SP_NONE) */
    sp_csr users; /* per slot: the ops to wake when its sharding changes */
    /* data-flow aliases: a block argument of a while body/cond shares the
     * slot of the while result it is a target with (alias[v] = slot) */
    uint32_t *alias;
    /* per value: the sdy.data_flow_edge whose input it is (an edge owner:
     * a result of while, case, optimization_barrier, manual or named
     * computation, or a body argument of the last two), or SP_NONE */
    uint32_t *edge_of;
    /* function data-flow edges (-sdy-add-func-data-flow-edges): per op, the
     * sources of an sdy.func_data_flow_edge (the call operands feeding a
     * function argument's edge, the callee's returned value feeding a call
     * result's edge); empty for every other op, unbuilt (n_keys 0) when
     * the module has no such edge */
    sp_csr fedge_src;
    /* sharding groups: members are kept identical (next member in ring) */
    uint32_t *group_next;
    /* rules */
    sp_rule **rules;
    uint8_t *rule_done;
    /* worklist: a stack (the last op pushed runs first) */
    uint32_t *queue;
    uint32_t q_len, q_cap;
    uint8_t *queued;
    uint32_t cur_op; /* the op being stepped (not woken by its own changes), or SP_NONE */
    const sp_mesh *step_mesh; /* the mesh of the op step under way */
    /* meshes */
    meshent meshes[MAXMESH];
    uint32_t n_meshes;
    /* scratch for one step */
    fsh *fs;
    size_t fs_cap;
    tens *ts;
    size_t ts_cap;
    /* level state */
    int op_priority;   /* -1: all ops, both directions; else 0..SP_PROP_OP_PRIORITIES-1 */
    int np_dir;        /* a dir: the current op's for its non-pass-through factors */
    uint32_t *n_uses;  /* per value: its number of uses (op priorities), or NULL */
    int user_priority; /* -1: no user priorities */
    bool aggressive;
    uint64_t steps;
    /* debug-sharding-origins: per slot a list of ((sub-)axis, origin) */
    uint32_t *org_head;
    struct org {
        ax a;
        uint32_t origin, next;
    } * orgs;
    uint32_t n_orgs, cap_orgs;
    const char **origin_names;
    uint32_t n_origin_names, cap_origin_names;
    uint32_t *origin_self; /* per slot: its own origin id (annotated slots), SP_NONE otherwise */
    /* debug-edge-source-sharding: per op a list of edges */
    uint32_t *edge_head;
    struct edge {
        ax a;
        const sp_mesh *mesh;
        uint32_t step, src, dst, next; /* src/dst: pos | (is_result << 31) */
    } * edges;
    uint32_t n_edges, cap_edges;
    uint32_t edge_step; /* Shardy's propagation step: counts the steps that changed a tensor */
    uint32_t n_virtual_ops; /* step counter for edges */
    /* identity rules by (interned dims, rank, tensor count): a direct-mapped
     * cache (a colliding entry replaces the older one). Every constraint,
     * data-flow and return step asks it (the 100k-op benchmark: 19k
     * lookups, 6 misses, ~25 instructions each, where a cm_map probe costs
     * about 70), and it needs no growth. */
    struct idc {
        const int64_t *dims;
        uint32_t rank, n;
        sp_rule *rule;
    } id_cache[ID_CACHE];
    /* rule cache: ops with equal kind, types and rule-relevant attributes
     * share a rule (struct rc entries, sp_basic_propagation.c) */
    cm_map rule_cache;
    cm_map sh_tab;    /* interned shardings: sp_sharding * entries */
    cm_arena scratch; /* one sharding under construction */
    cm_arena views;   /* this user-priority round's views (sp_prop_priority_visible) */
    uint8_t *type_ok; /* per type id: 1 static ranked tensor, 2 not */
    cm_map pc_tab;    /* projection cache: struct pc_entry * entries */
    struct cand {
        ax axes[MAXAX];
        uint32_t n;
        uint32_t src;      /* tensor the axes came from */
        int64_t order_key; /* elements of the source tensor (aggressive order) */
    } * cands;
    uint32_t cand_cap;
} prop;

typedef enum dir { DIR_NONE = 0, DIR_FORWARD = 1, DIR_BACKWARD = 2, DIR_BOTH = 3 } dir;

/* ---- small helpers (inline: they sit on the step's hot path) ---------------- */

/* The mesh entry of s's mesh name: NULL for no sharding, an inlined mesh or
 * an unknown name. */
static inline const meshent *sp_prop_mesh_of(const prop *p, const sp_sharding *s)
{
    if (s == NULL) {
        return NULL;
    }
    if (s->mesh_name == NULL) {
        return NULL; /* inlined meshes are lifted by the import passes */
    }
    for (uint32_t i = 0; i < p->n_meshes; i++) {
        if (p->meshes[i].name == s->mesh_name) {
            return &p->meshes[i];
        }
    }
    for (uint32_t i = 0; i < p->n_meshes; i++) {
        if (strcmp(p->meshes[i].name, s->mesh_name) == 0) {
            return &p->meshes[i];
        }
    }
    return NULL;
}

/* The slot of value v: a while block argument shares the while result's. */
static inline uint32_t sp_prop_canon_slot(const prop *p, uint32_t v)
{
    return v < p->m->n_values && p->alias[v] != SP_NONE ? p->alias[v] : v;
}

/* a[0..na) is a (possibly equal) prefix of b[0..nb); its last element may be
 * a sub-axis prefix of b's element at that position. */
static inline bool ax_list_prefix(const ax *a, uint32_t na, const ax *b, uint32_t nb)
{
    if (na > nb) {
        return false;
    }
    for (uint32_t i = 0; i < na; i++) {
        if (i + 1 < na ? !ax_eq(a[i], b[i]) : !ax_prefix(a[i], b[i])) {
            return false;
        }
    }
    return true;
}

/* ---- sp_basic_propagation.c ------------------------------------------------- */

/* Records CM_ENOMEM as the run's status (the first error wins) and returns it. */
cm_status sp_prop_oom(prop *p);
/* Whether the run has failed or the caller's cancel hook says stop (then
 * CM_EIO is recorded as the run's status). */
bool sp_prop_stopped(prop *p);
/* Runs the worklist to a fixed point: the ops order[0..n_order) are pushed
 * (all but the pass-through ones when only_others), then stepped until no
 * sharding changes, at the current op and user priority, polling the
 * cancel hook (sp_prop_stopped) first and every SP_PROP_POLL_STEPS steps. */
void sp_prop_fixed_point_run(prop *p, const uint32_t *order, uint32_t n_order, bool only_others);

/* ---- sp_basic_factor_propagation.c ------------------------------------------ */

/* Per factor of rule r, the compatible major axes over the source tensors
 * (in direction d) of the n tensors p->ts, whose projections are the rows of
 * p->fs: the longest axes when one tensor's are a prefix of another's, the
 * longest common prefix when they conflict, and the tensor they came from;
 * into p->cands. Factors that are blocked, or not pass-through at op
 * priority 1, get none. False when out of memory (p->st is then set). */
bool sp_prop_candidates_find(prop *p, const sp_rule *r, uint32_t n, dir d);
/* The basic strategy: a factor's candidate axes move only as far as every
 * one of the n tensors can take them; each destination tensor whose axes are
 * a prefix of them takes them (its row in p->fs changes, changed is set). */
void sp_prop_basic_factor_propagate(prop *p, const sp_rule *r, uint32_t n, dir d);
/* Truncates cand[0..*nc) (the axes proposed for factor f) so that tensor t,
 * projected as row, can hold them. */
void sp_prop_axes_truncate(const prop *p, const sp_rule *r, const fsh *row, const tens *t,
                           uint32_t f, ax *cand, uint32_t *nc);
/* Remembers which of cand[0..nc) tensor t gains beyond x's axes, and from
 * which tensor (src), for debug origins and edges. */
void sp_prop_gain_note(tens *t, const fsh *x, const ax *cand, uint32_t nc, uint32_t src);

/* ---- sp_aggressive_factor_propagation.c ------------------------------------- */

/* The aggressive strategy: conflicts between factors over an axis go to the
 * factor whose source tensor is larger, and each destination takes the
 * longest prefix of its factor's axes it can hold. op is the op stepped
 * (its element-wise-ness breaks ties between factors). */
void sp_prop_aggressive_factor_propagate(prop *p, const sp_rule *r, uint32_t n, dir d,
                                         uint32_t op);

/* ---- sp_op_priority_propagation.c ------------------------------------------- */

/* Ops whose rule passes every factor through (element-wise, reshape,
 * transpose, data flow, constraints, barriers, manual computations, return). */
bool sp_prop_is_pass_through(const sp_op *op);
/* Shardy's isElementwise (common/op_properties.cc), for the op-priority
 * schedule and the aggressive strategy's order: the element-wise kinds, a
 * bitcast_convert that keeps the shape (equal bit widths), and the sdy ops
 * propagation_barrier, sharding_constraint and reshard. */
bool sp_prop_is_elementwise(const sp_module *m, uint32_t opid);
/* The directions op propagates in at op priority p->op_priority >= 0. */
dir sp_prop_op_priority_direction(prop *p, uint32_t opid, const sp_op *op);
/* -sdy-op-priority-propagate at the current user priority: three rounds of
 * the fixed point (pass-through ops only, then every op with pass-through
 * factors only and broadcasts backward only, then everything), or one plain
 * round when run-op-priority-propagation is off. */
void sp_prop_op_priority_run(prop *p, const uint32_t *order, uint32_t n_order);

/* ---- sp_user_priority_propagation.c ----------------------------------------- */

/* sp_prop_visible at user priority p->user_priority >= 0. */
const sp_sharding *sp_prop_priority_visible(prop *p, uint32_t slot);
/* In s, a new sharding built for slot from the view seen (sp_prop_visible),
 * puts back the real sharding of every dim the current user priority hid. */
void sp_prop_hidden_dims_restore(const prop *p, uint32_t slot, const sp_sharding *seen,
                                 sp_sharding *s);
/* -sdy-user-priority-propagate: op-priority propagation once per user
 * priority present in the module, lowest number first (once when there are
 * none). */
void sp_prop_user_priority_run(prop *p, const uint32_t *order, uint32_t n_order);

/* ---- sp_sharding_group_map.c ------------------------------------------------ */

/* Before the slots are built (Shardy's syncGroupMemberShardings, its
 * conflict half): a group whose members carry different shardings (members
 * without one, or fully open and replicated, do not count) gets a warning
 * at the first member's owner, and every member is wrapped in a fully open
 * sdy.sharding_constraint that takes its place in the group and in its
 * other uses. Errors: CM_EINVAL (and an error diagnostic) when members of a
 * group differ in shape; CM_ENOMEM. */
cm_status sp_prop_groups_resolve(prop *p);

/* Links the members of each sharding group as a ring (p->group_next) and
 * gives them all the common sharding of their members (the first that is
 * neither missing nor fully open and replicated; a lone member keeps its
 * own). Errors: CM_ENOMEM. */
cm_status sp_prop_groups_setup(prop *p);

/* ---- sp_source_sharding.c --------------------------------------------------- */

/* Allocates the origin and edge lists the debug options ask for and seeds
 * the origins of annotated inputs, outputs and constraints. Errors: CM_ENOMEM. */
cm_status sp_prop_debug_setup(prop *p);
/* The origin of (sub-)axis a in slot's sharding: the one recorded for a, or
 * else for an axis containing a or contained in it (a split or merged axis);
 * SP_NONE when none. */
uint32_t sp_prop_origin_of(const prop *p, uint32_t slot, ax a);
/* Records that (sub-)axis a of slot's sharding came from origin (kept: the
 * first). */
void sp_prop_origin_add(prop *p, uint32_t slot, ax a, uint32_t origin);
/* Gives slot `to` the origins of slot `from` (sharding-group members). */
void sp_prop_origins_copy(prop *p, uint32_t from, uint32_t to);
/* Records that op's current step moved (sub-)axis a of mesh from tensor src
 * to dst. */
void sp_prop_edge_add(prop *p, uint32_t op, const sp_mesh *mesh, ax a, const tens *src,
                      const tens *dst);
/* Writes sdy.sharding_origins, sdy.sharding_origin_name and
 * sdy.propagation_edges. Errors: CM_ENOMEM. */
cm_status sp_prop_debug_write(prop *p);

/* ---- the levels' hooks in an op step (inline: the common case is cheap) --- */

/* The directions op propagates in at the current op priority
 * (sp_op_priority_propagation.c); both when op priorities are off. */
static inline dir sp_prop_op_direction(prop *p, uint32_t opid, const sp_op *op)
{
    if (p->op_priority < 0 || op->kind == SP_OP_SDY_PROPAGATION_BARRIER) {
        p->np_dir = DIR_BOTH;
        return DIR_BOTH; /* a barrier's direction: handled by the caller */
    }
    return sp_prop_op_priority_direction(p, opid, op);
}

/* The direction factor f of rule r moves in when its op moves in d: a
 * non-pass-through factor is narrowed to p->np_dir (set by
 * sp_prop_op_direction for the op of the current step). */
static inline dir sp_prop_factor_dir(const prop *p, const sp_rule *r, uint32_t f, dir d)
{
    if (p->np_dir != DIR_BOTH && r->factor_kind != NULL &&
        r->factor_kind[f] != SP_FACTOR_PASS_THROUGH) {
        return (dir)((unsigned)d & (unsigned)p->np_dir);
    }
    return d;
}

/* The sharding of a slot as the current user priority sees it
 * (sp_user_priority_propagation.c): dims with a higher priority number are
 * hidden (closed and empty). May be a copy in the module arena; on OOM p->st
 * is set and the real sharding returned. */
static inline const sp_sharding *sp_prop_visible(prop *p, uint32_t slot)
{
    return p->user_priority < 0 ? p->sh[slot] : sp_prop_priority_visible(p, slot);
}

#endif /* SP_PROP_INT_H */
