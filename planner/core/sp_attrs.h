/* SPDX-License-Identifier: Apache-2.0
 * planner: typed accessors for the StableHLO attributes that name dimensions
 * (dot, convolution, gather and scatter dimension numbers, windows). Each one
 * decodes the attributes of one op into a caller-owned value and checks them
 * against the op's operand and result ranks, once, for the sharding-rule
 * registry, the cost model and the executor alike; what a caller needs beyond
 * that (sizes that must divide, limits of a kernel) it checks itself.
 * Errors are CM_EINVAL in the rule registry's form: message "OP: what is
 * wrong" (OP the op's name), path "LINE:COL" when the op came from text.
 * Nothing here allocates: lists are copied into the value (a valid list has
 * at most SP_MAX_RANK entries, since no rank exceeds it).
 * Thread contract: read-only on the module; no state. */
#ifndef SP_ATTRS_H
#define SP_ATTRS_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "cm.h"
#include "sp_ir.h"

/* Sets err to CM_EINVAL about op in the form above (fmt is printf's) and
 * returns CM_EINVAL. err may be NULL. */
cm_status sp_op_error(const sp_module *m, uint32_t op, cm_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
cm_status sp_op_errorv(const sp_module *m, uint32_t op, cm_error *err, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* Checks that the dimension index v of op is in [0, rank) (sp_op_dim_check),
 * or that each of the n indices at v is and none is listed twice
 * (sp_op_dims_check); what names them in the message ("lhs batching
 * dimension 3 is out of range for rank 2", "... 1 is repeated"). */
cm_status sp_op_dim_check(const sp_module *m, uint32_t op, int64_t v, uint32_t rank,
                          const char *what, cm_error *err);
cm_status sp_op_dims_check(const sp_module *m, uint32_t op, const int64_t *v, uint32_t n,
                           uint32_t rank, const char *what, cm_error *err);

/* ---- dot ------------------------------------------------------------------ */

typedef struct sp_dot_dims {
    uint32_t n_batch;                  /* batching dimension pairs */
    uint32_t n_contract;               /* contracting dimension pairs */
    int64_t lhs_batch[SP_MAX_RANK];    /* lhs_batching_dimensions */
    int64_t rhs_batch[SP_MAX_RANK];    /* rhs_batching_dimensions */
    int64_t lhs_contract[SP_MAX_RANK]; /* lhs_contracting_dimensions */
    int64_t rhs_contract[SP_MAX_RANK]; /* rhs_contracting_dimensions */
} sp_dot_dims;

/* The dimension numbers of op, a stablehlo.dot_general (its
 * dot_dimension_numbers; absent lists are empty) or a stablehlo.dot (rank-1
 * or rank-2 operands, the lhs's last dimension contracted with the rhs's
 * first). Checks, in this order: two operands and one result; the lists are
 * integer lists of equal length on both sides; paired batching dimensions
 * have the same size where both are static; every dimension is in range for
 * its operand and listed once; none is both batching and contracting; the
 * result rank is what the numbers give. On error *out is unspecified. */
cm_status sp_dot_dims_get(const sp_module *m, uint32_t op, sp_dot_dims *out, cm_error *err);

/* ---- convolution ------------------------------------------------------------ */

typedef struct sp_conv_dims {
    int64_t input_batch, input_feature;                  /* lhs dimensions */
    int64_t kernel_input_feature, kernel_output_feature; /* rhs dimensions */
    int64_t output_batch, output_feature;                /* result dimensions */
    uint32_t n_spatial;                                  /* rank - 2 */
    int64_t input_spatial[SP_MAX_RANK];
    int64_t kernel_spatial[SP_MAX_RANK];
    int64_t output_spatial[SP_MAX_RANK];
    int64_t batch_group_count, feature_group_count; /* 1 when absent */
} sp_conv_dims;

/* The dimension numbers (dimension_numbers) and group counts of op, a
 * stablehlo.convolution. Checks, in this order: two operands and one result;
 * the six single dimensions are present integers in range for their tensor;
 * the spatial lists are integer lists; the group counts are integers; lhs,
 * kernel and result have rank n_spatial + 2 and the spatial dimensions are in
 * range and listed once; both group counts are at least 1 (whether they
 * divide the sizes is the caller's question). */
cm_status sp_conv_dims_get(const sp_module *m, uint32_t op, sp_conv_dims *out, cm_error *err);

/* ---- gather and scatter ------------------------------------------------------- */

/* Gather's and scatter's dimension numbers under gather's names; scatter's
 * are update_window_dims, inserted_window_dims, input_batching_dims,
 * scatter_indices_batching_dims, scatter_dims_to_operand_dims. */
typedef struct sp_gather_dims {
    uint32_t n_offset, n_collapsed, n_operand_batch, n_indices_batch, n_index_map;
    int64_t offset[SP_MAX_RANK];        /* offset_dims: result (scatter: updates) dims */
    int64_t collapsed[SP_MAX_RANK];     /* collapsed_slice_dims: operand dims */
    int64_t operand_batch[SP_MAX_RANK]; /* operand_batching_dims */
    int64_t indices_batch[SP_MAX_RANK]; /* start_indices_batching_dims */
    int64_t index_map[SP_MAX_RANK];     /* start_index_map: operand dims */
    int64_t index_vector_dim;           /* == indices rank: the indices are scalars */
    bool decoded; /* the attribute was read (false: missing or malformed); set even
                     when a check that follows fails */
} sp_gather_dims;

/* The dimension numbers of op, a stablehlo.gather (dimension_numbers:
 * operand, start_indices, result) or stablehlo.scatter (scatter_dimension_
 * numbers: N inputs, scatter_indices, N updates; the first input and update
 * are checked). Checks, in this order: the operand counts; the lists are
 * integer lists and index_vector_dim an integer; the two batching lists have
 * the same length; every dimension is in range and listed once;
 * index_vector_dim is in [0, indices rank] and not a batching dimension; no
 * dimension is both collapsed and batching; the ranks add up (operand rank =
 * offset + collapsed + batching, result rank = offset + indices batch dims);
 * the index map has one entry per element of the index vector (when that
 * size is static). */
cm_status sp_gather_dims_get(const sp_module *m, uint32_t op, sp_gather_dims *out, cm_error *err);

/* The slice_sizes of op, a stablehlo.gather, into sizes (*n entries): present,
 * one per operand dimension, each in [0, that dimension's size] where the size
 * is static. */
cm_status sp_gather_slice_sizes_get(const sp_module *m, uint32_t op, int64_t sizes[SP_MAX_RANK],
                                    uint32_t *n, cm_error *err);

/* The reduction of op's (a stablehlo.scatter's) update computation, as
 * "stablehlo.add" etc., when every result is one add, multiply, maximum or
 * minimum (and, or on i1) of its input's two block arguments, all the same
 * op (Shardy's getCommonSupportedReductionOp); NULL otherwise. */
const char *sp_scatter_reduction(const sp_module *m, uint32_t op);

/* ---- windows ------------------------------------------------------------------- */

typedef struct sp_window {
    uint32_t n_dims, n_strides, n_base_dilations, n_window_dilations; /* 0: absent */
    uint32_t n_padding;                                               /* 0: absent */
    int64_t dims[SP_MAX_RANK];                                        /* window_dimensions */
    int64_t strides[SP_MAX_RANK];                                     /* window_strides */
    int64_t base_dilations[SP_MAX_RANK];                              /* base_dilations */
    int64_t window_dilations[SP_MAX_RANK];                            /* window_dilations */
    int64_t padding[2 * SP_MAX_RANK]; /* padding: low, high per dimension */
} sp_window;

/* The window of op, a stablehlo.reduce_window or stablehlo.select_and_scatter,
 * over its first operand of rank r. Each list is optional; present, it is an
 * integer list of r entries (padding 2r), and the window dimensions and
 * strides are at least 1. */
cm_status sp_window_get(const sp_module *m, uint32_t op, sp_window *out, cm_error *err);

#endif /* SP_ATTRS_H */
