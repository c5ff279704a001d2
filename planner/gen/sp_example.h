/* SPDX-License-Identifier: Apache-2.0
 * planner: model templates for `shardplan example`: a Flax-style MLP or a
 * transformer written as a graph document (docs/graph-format.md) whose
 * parameters, inputs and activation constraints carry Flax logical axis
 * names, with the logical_axis_rules that the chosen strategy implies
 * (dp, fsdp, tp, dp+tp). With train, either model becomes a training step:
 * the forward pass, the loss sum(y*y)/2, the backward pass through every layer
 * and an SGD update of every parameter, whose results are the outputs (loss
 * first, then the parameters in input order, with the parameters' logical
 * names). The `shardplan example` command is cmd/cmd_example.c.
 * Thread contract: reentrant. */
#ifndef SP_EXAMPLE_H
#define SP_EXAMPLE_H

#include "cm.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum sp_example_model { SP_EXAMPLE_MLP = 0, SP_EXAMPLE_TRANSFORMER } sp_example_model;

typedef enum sp_example_strategy {
    SP_EXAMPLE_DP = 0, /* batch on "data" */
    SP_EXAMPLE_FSDP,   /* batch and parameters' embed dimension on "data" */
    SP_EXAMPLE_TP,     /* Megatron: mlp and heads on "model" */
    SP_EXAMPLE_DP_TP   /* both */
} sp_example_strategy;

#define SP_EXAMPLE_MAX_AXES 8

typedef struct sp_example_opts {
    sp_example_model model;
    sp_example_strategy strategy;
    uint32_t layers;  /* 1..100000 */
    int64_t d_model;  /* a multiple of heads */
    int64_t heads;
    int64_t seq;      /* transformer only */
    int64_t batch;
    bool train;       /* loss, backward pass and SGD update */
    uint32_t n_axes;  /* mesh */
    char axis_names[SP_EXAMPLE_MAX_AXES][32];
    int64_t axis_sizes[SP_EXAMPLE_MAX_AXES];
} sp_example_opts;

/* Defaults: MLP, dp+tp, 4 layers, d_model 1024, 8 heads, seq 128, batch 8,
 * mesh data=2,model=4, inference only. */
void sp_example_opts_init(sp_example_opts *o);

/* Appends the graph document. Errors: CM_EINVAL with err->path naming the
 * option ("/d_model"), CM_ENOMEM. */
cm_status sp_example_graph_json(const sp_example_opts *o, cm_buf *out, cm_error *err);

/* Appends the same model as MLIR: the graph document decoded by the graph
 * reader and printed (`shardplan example --format mlir`). Errors: those of
 * sp_example_graph_json, CM_ENOMEM. */
cm_status sp_example_mlir(const sp_example_opts *o, cm_buf *out, cm_error *err);

/* "dp", "fsdp", "tp", "dp+tp" ("?" for another value); the parse is false
 * for another name. */
const char *sp_example_strategy_name(sp_example_strategy s);
bool sp_example_strategy_parse(const char *name, sp_example_strategy *out);

#endif /* SP_EXAMPLE_H */
