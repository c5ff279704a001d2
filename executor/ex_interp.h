/* SPDX-License-Identifier: Apache-2.0
 * executor: a StableHLO interpreter, the equivalent of `stablehlo-translate
 * --interpret` (docs/interpret.md). It walks a module's functions op by op on
 * host tensors, evaluating regions (reduce and scatter bodies, sort
 * comparators, while/if/case) as written, the `check` dialect's assertions,
 * and `interpreter.run_parallel`, which runs a grid of programs as
 * replicas x partitions on one thread each, with StableHLO's collectives
 * (all_gather, all_reduce, reduce_scatter, all_to_all, collective_permute,
 * collective_broadcast, partition_id, replica_id) between them.
 * Heavy kernels come from ex_kern.c (dot_general, convolution).
 * Ownership: nothing returned outlives a call. Thread contract: the module is
 * only read; one call at a time per module. */
#ifndef EX_INTERP_H
#define EX_INTERP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cm.h"
#include "sp_ir.h"

/* What one interpretation found. */
typedef struct ex_interp_report {
    uint32_t n_funcs;   /* entry functions run */
    uint32_t n_checks;  /* check.* assertions evaluated */
    uint32_t n_failed;  /* of them, the ones that failed */
} ex_interp_report;

/* Runs the module's entry functions: @main when the module has one, else
 * every function that takes no arguments, in module order. Each failed check
 * is written to out as one line "LINE:COL: check.expect_eq: ..." (the check
 * op's position, the first element that differs and both values), and
 * counted in *r; the values main returns are not printed.
 * Errors: CM_EINVAL with path "LINE:COL" for an op, type or attribute the
 * interpreter cannot evaluate (the message names it), a program that fails
 * at run time (a collective whose peers never arrive, a recursive call,
 * nesting deeper than 64 levels) or an entry function that takes arguments;
 * CM_ENOMEM. r may not be NULL; on error it holds what ran before. */
cm_status ex_interp_module(const sp_module *m, FILE *out, ex_interp_report *r, cm_error *err);

/* How ex_interp_run runs a module. */
typedef struct ex_interp_opts {
    const sp_attr *const *args; /* dense attributes: @main's arguments (NULL: none) */
    uint32_t n_args;
    FILE *results; /* NULL, or where each entry's results are printed, as
                      stablehlo-translate --interpret prints them:
                      `tensor<2xi32> {\n  [3, 3]\n}` (also interpreter.print) */
    bool dense;    /* print results as dense attributes instead
                      (`dense<[3, 3]> : tensor<2xi32>`, --interpreter-print-dense) */
} ex_interp_opts;

/* ex_interp_module with options: with args, @main runs on them (their count
 * and types must be main's: CM_EINVAL "argument 1 is tensor<..>, main takes
 * tensor<..>"); with results set, every entry's results are printed there. */
cm_status ex_interp_run(const sp_module *m, const ex_interp_opts *o, FILE *out,
                        ex_interp_report *r, cm_error *err);

/* For the executor's reference run (ex_run.c): evaluates
 * sdy.manual_computation op of m, as the interpreter does (each
 * device's body instance a process, in lockstep, StableHLO's collectives
 * between them; docs/interpret.md), on its global operands: operands[i]
 * holds operand i in the executor's layout (ex_int.h: native numbers, i1 as
 * a byte, bf16/f16 as bits), and results[j], allocated by the caller with
 * result j's global type, gets result j. Errors: CM_EINVAL at the op (or
 * "device D: ..." for a body that fails), CM_ENOMEM. */
cm_status ex_interp_manual(const sp_module *m, uint32_t op, const void *const *operands,
                           void *const *results, cm_error *err);

/* For the executor's per-process programs (docs/executor.md, "Replicas and
 * top-level collectives"): runs @main of m as n_rep x n_part processes, as
 * interpreter.run_parallel would with main as every program, each process
 * taking the same arguments args[i] (executor layout, as ex_interp_manual)
 * and process d = replica * n_part + partition writing result j into
 * results[d * n_results + j], allocated by the caller with result j's type.
 * Failed checks are written to fails (NULL: stderr) and counted in *r.
 * Errors: CM_EINVAL at main or at an op ("process D (replica R, partition
 * P): ..."), more than 256 processes; CM_ENOMEM. */
cm_status ex_interp_spmd(const sp_module *m, uint32_t n_rep, uint32_t n_part,
                         const void *const *args, void *const *results, FILE *fails,
                         ex_interp_report *r, cm_error *err);

/* Whether the body of collective op (all_reduce, reduce_scatter) takes two
 * scalars of its first operand's element type and returns one, a type
 * ex_interp_fold computes on. */
bool ex_interp_fold_ok(const sp_module *m, uint32_t op);

/* acc[k] = body(acc[k], src[k]) for k < n: op's reduction body evaluated
 * by the interpreter element by element on executor arrays of its first
 * operand's element type (ex_interp_fold_ok must hold). Thread-safe: the
 * module is only read. Errors: CM_EINVAL (a body op the interpreter cannot
 * evaluate, at its position), CM_ENOMEM. */
cm_status ex_interp_fold(const sp_module *m, uint32_t op, void *acc, const void *src, size_t n,
                         cm_error *err);

/* Evaluates check op of m (check.*, custom_call @check.*) on its operands'
 * values operands[i] (executor layout), as the interpreter does: a failed
 * check is written to fails (NULL: stderr) as "LINE:COL: check....", and
 * both counted in *r (which is added to, not cleared). Errors: CM_EINVAL
 * (a check the interpreter cannot evaluate), CM_ENOMEM. */
cm_status ex_interp_check(const sp_module *m, uint32_t op, const void *const *operands, FILE *fails,
                          ex_interp_report *r, cm_error *err);

#endif /* EX_INTERP_H */
