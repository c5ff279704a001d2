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

/* ---- programs as MLIR text (sp_gen_text.c) ---------------------------------------
 * Shapes only: nothing is allocated for the tensors, so paper-sized programs
 * cost like small ones. The text reads with sp_mlir_read / sp_input_read. */

/* The Flax guide's MLP (DotReluDot: x @ W1 [d_model, depth], relu, @ W2
 * [depth, d_model]) on a ("data", "model") mesh, x batch-sharded, the
 * kernels Megatron-sharded on "model": unrolled (one kernel pair per layer,
 * as a Python for loop traces) or, with scan, as nn.scan lowers it: kernels
 * stacked on a leading layer axis and a counted stablehlo.while whose body
 * dynamic_slices layer i out of each stack. */
typedef struct sp_gen_mlp_opts {
    uint32_t layers;   /* 1..10000; unrolled at most 2047 (4096 function arguments) */
    int64_t d_model;   /* 1..2^20 */
    int64_t depth;
    int64_t batch;
    int64_t mesh_data; /* axis sizes, 1..4096 */
    int64_t mesh_model;
    bool scan;
} sp_gen_mlp_opts;

/* Defaults: 4 layers, d_model 1024, depth 4096, batch 8, data=2 x model=4,
 * unrolled. */
void sp_gen_mlp_opts_init(sp_gen_mlp_opts *o);
/* Appends the module. Errors: CM_EINVAL with err->path naming the option
 * ("/layers"), CM_ENOMEM. */
cm_status sp_gen_mlp_mlir(const sp_gen_mlp_opts *o, cm_buf *out, cm_error *err);

typedef enum sp_gen_optim {
    SP_GEN_OPTIM_NONE = 0, /* forward and backward: returns the loss and the gradients */
    SP_GEN_OPTIM_ADAM      /* and a mixed-precision Adam update (docs/cost-model.md) */
} sp_gen_optim;

/* A training step of Megatron GPT layers in the [seq, batch, hidden] layout
 * with bf16 activations: per layer a pre-norm attention block (Q, K, V and
 * output projections, softmax, dropout on the probabilities and after the
 * projection) and a GeLU MLP (dropout after it), dropout masks one byte an
 * element; the loss sum(x*x)/2 of the last layer's output, and the
 * backward pass, which reads what the forward pass stored. On a ("data",
 * "model") mesh: batch on "data"; tensor parallelism on "model" (column-
 * parallel Q/K/V/W1, row-parallel Wo/W2); with sequence_parallel the
 * residual stream, norms and dropouts are sharded along seq on "model" and
 * gathered before each column-parallel projection (again in the backward
 * pass). With Adam each parameter is a bf16 argument with an f32 master copy
 * and two f32 moments, all donated to their new values; zero_stage 1 shards
 * the optimizer states over "data", 2 the gradients too, 3 the parameters
 * too (gathered before each use). Ops carry name locations: "layerN/fwd/...",
 * "loss", "transpose(layerN)/bwd/...", "adam/layerN/NAME". */
typedef struct sp_gen_gpt_opts {
    uint32_t layers;   /* 1..1000 (and 8 parameters x 4 arrays a layer fit 4096 arguments) */
    int64_t seq, batch, hidden, heads; /* heads divides hidden */
    int64_t ffn;       /* MLP width; 0: 4 * hidden */
    int64_t mesh_data; /* divides batch */
    int64_t mesh_model; /* tensor parallelism t: divides heads, ffn (and seq with sp) */
    bool sequence_parallel;
    sp_gen_optim optimizer;
    int zero_stage;    /* 0..3 (Adam only) */
} sp_gen_gpt_opts;

/* Defaults: 2 layers, seq 128, batch 8, hidden 256, 8 heads, ffn 4*hidden,
 * data=2 x model=4, no sequence parallelism, no optimizer. */
void sp_gen_gpt_opts_init(sp_gen_gpt_opts *o);
/* Appends the module. Errors: CM_EINVAL with err->path naming the option
 * ("/heads"), CM_ENOMEM. */
cm_status sp_gen_gpt_mlir(const sp_gen_gpt_opts *o, cm_buf *out, cm_error *err);

#endif /* SP_GEN_H */
