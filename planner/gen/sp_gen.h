/* SPDX-License-Identifier: Apache-2.0
 * planner: synthetic transformer modules for benchmarks and tests. Builds,
 * through the IR API, a StableHLO + sdy module shaped like a JAX training
 * step: pre-norm attention + MLP blocks, optionally their backward pass and
 * an SGD update, with parameters as function arguments sharded
 * Megatron-style on a ("data", "model") mesh and the input batch-sharded on
 * "data". The output prints with sp_mlir_print and reads back with
 * sp_mlir_read. A function has 1 + 11 * layers arguments and function types
 * take at most 4096 inputs, so a function holds at most 372 layers.
 * Ownership: the caller destroys the module with sp_module_destroy.
 * Thread contract: reentrant; each call builds its own module. */
#ifndef SP_GEN_H
#define SP_GEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "sp_ir.h"
#include "sp_mlir.h"

typedef enum sp_gen_act {
    SP_GEN_ACT_RELU = 0, /* stablehlo.maximum with a broadcast zero */
    SP_GEN_ACT_TANH      /* stablehlo.tanh */
} sp_gen_act;

typedef struct sp_gen_opts {
    uint32_t n_layers;        /* layers in total; 0: as many as target_ops needs */
    uint32_t layers_per_func; /* layers per func.func (<= 372); 0: all in one function */
    int64_t batch;            /* tensor sizes, elements; all > 0 */
    int64_t seq;
    int64_t d_model; /* a multiple of heads */
    int64_t heads;
    int64_t d_ff;      /* MLP width; 0: 4 * d_model */
    int64_t mesh_data; /* sizes of the "data" and "model" axes of @mesh, > 0 */
    int64_t mesh_model;
    sp_gen_act act;
    bool backward;    /* add the backward pass, a loss and an SGD update of every parameter */
    bool constraints; /* sdy.sharding_constraint on q, on the MLP hidden and output states */
} sp_gen_opts;

/* What was built. */
typedef struct sp_gen_info {
    uint32_t n_layers;
    uint32_t n_funcs;
    uint32_t n_ops;         /* m->n_ops: every op, nested and terminators included */
    uint32_t ops_per_layer; /* forward (+ backward and update) ops of one layer */
} sp_gen_info;

/* Defaults: batch 8, seq 128, d_model 512, 8 heads, d_ff 2048, mesh data=2
 * model=4, relu, backward pass, constraints, 16 layers per function. */
void sp_gen_opts_init(sp_gen_opts *o);

/* Builds a transformer module. With o->n_layers = 0 the layer count is the
 * smallest that gives at least target_ops ops (at least one layer); else
 * target_ops is ignored. info_out may be NULL. On success *out is a new
 * module the caller destroys. Errors: CM_EINVAL for bad options (err->path
 * names the field, e.g. "/d_model"), including a function of more than 372
 * layers ("/layers_per_func", or "/n_layers" when layers_per_func is 0);
 * CM_ENOMEM. *out is NULL on error. */
cm_status sp_gen_transformer(const sp_gen_opts *o, size_t target_ops, sp_module **out,
                             sp_gen_info *info_out, cm_error *err);

#endif /* SP_GEN_H */
