/* SPDX-License-Identifier: Apache-2.0
 * executor: runs a partitioned module for real on a pool of local "devices"
 * (one worker thread each, own buffers, shared-memory collectives with a
 * barrier) and checks it against a single-device run of the unpartitioned
 * module (docs/executor.md).
 * The module's main function must have been through -sdy-propagation-pipeline,
 * -sdy-insert-explicit-reshards and -sdy-reshard-to-collectives: every value
 * holds the local shard its sharding gives it (sp_local_shape), and the sdy
 * collectives move data between workers over sp_collective_groups.
 * Ownership: tensors returned here are heap objects freed with
 * ex_tensors_free. Thread contract: one call per module at a time; the
 * module is only read while a run is in progress. */
#ifndef EX_EXEC_H
#define EX_EXEC_H

#include "cm.h"
#include "sp_ir.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define EX_MAX_RANK 16 /* ranks above this are rejected */

struct ex_trace; /* a run's timeline recorder (ex_timing.h) */

/* A dense row-major host tensor (a function argument or result). */
typedef struct ex_tensor {
    sp_elem elem;
    uint32_t rank;
    int64_t dims[EX_MAX_RANK];
    size_t n;   /* elements */
    void *data; /* n * sp_elem_bytes(elem) bytes (cm_alloc) */
} ex_tensor;

void ex_tensors_free(ex_tensor *t, uint32_t n);

/* The arguments of m's main function filled from seed: argument i gets an
 * xorshift64* stream seeded with seed and i; floats are uniform in
 * [-sqrt(3/f), sqrt(3/f)) with f the tensor's leading dimension (unit
 * variance after a product with it), integers in [0, 8), booleans 0/1.
 * *args_out (n_out entries) is freed with ex_tensors_free. Errors: CM_EINVAL
 * (no main, dynamic or unsupported argument types), CM_ENOMEM. */
cm_status ex_args_make(const sp_module *m, uint64_t seed, ex_tensor **args_out, uint32_t *n_out,
                       cm_error *err);

/* Whether device workers are pinned to CPUs (ex_exec_opts.affinity). */
typedef enum ex_affinity {
    EX_AFFINITY_AUTO = 0, /* pinned when the workers outnumber the CPUs the process may use */
    EX_AFFINITY_OFF,      /* the scheduler places them */
    EX_AFFINITY_ON        /* always pinned */
} ex_affinity;

/* True when a run of n_dev workers with affinity a pins them on this
 * process's CPUs. */
bool ex_affinity_pins(ex_affinity a, uint32_t n_dev);

typedef struct ex_exec_opts {
    uint32_t n_devices; /* workers; 0: the size of the module's mesh (1 without a mesh) */
    bool replicated;    /* ignore shardings: one worker holds every tensor whole and the
                           collectives are identities (the reference run) */
    uint32_t iters;     /* runs back to back (0 counts as 1); results are the last run's */
    double *iter_s;     /* NULL, or iters entries: wall seconds of each run */
    ex_affinity affinity; /* pinned: worker d runs on the d-th CPU (mod their count) this
                           process may run on, and computing is gated per CPU; else the
                           scheduler places the workers and the gate counts cores. The
                           default (AUTO) pins oversubscribed pools: 8 workers on 2 cores
                           ran the transformer step ~10% faster pinned */
    double *op_s;       /* NULL, or (workers x m->n_ops) entries, zeroed, device-major:
                           wall seconds each op took on each device, summed over the runs
                           from op_from on, not counting the wait for a core when workers
                           outnumber cores; a collective's run from before its first barrier
                           to after its second (waiting for the slowest member included) */
    uint32_t op_from;   /* the first run (0-based) op_s counts */
    struct ex_trace *trace; /* NULL, or records each op's start and end on each device in
                           one run, and is told when each run ends (ex_timing.h) */
    bool checks;            /* the results are main's results followed by the operands of
                               main's check ops (check.*, custom_call @check.*; in op order),
                               assembled alike (ex_check_partitioned); without it check ops are
                               skipped */
    bool partial_inputs;    /* each device's copy of main's arguments and constants is its
                               own partial value: an sdy.all_reduce or reduce_scatter of one
                               reduces the copies (nccl-tests' buffers; bench-executor); else
                               such a reduction is refused, as summing copies of one global
                               value is no answer (the numerics check compares global values) */
} ex_exec_opts;

/* Runs main of m on the workers with the global arguments args (each worker
 * takes its shard) and assembles each result into a global tensor
 * (*res_out, n_res_out entries, freed with ex_tensors_free). A per-process
 * main (mhlo.num_replicas > 1, or StableHLO collectives outside
 * sdy.manual_computation; docs/executor.md) runs on replicas x partitions
 * workers, each taking every argument whole, and hands back each device's
 * own results, device-major (n_devices x the results); it has no
 * replicated run (CM_EINVAL). main may call
 * other functions of m (not recursively) and hold while, case and if ops,
 * sdy.named_computation and sdy.manual_computation; every device takes the
 * same branches and trip counts.
 * Errors: CM_EINVAL "op X cannot be executed yet" (path "LINE:COL" of the
 * op) for ops, types or shardings the executor does not run, and
 * "func.call: recursive call to @f cannot be executed", before any worker
 * starts; CM_EINVAL "...: the devices disagree on the loop predicate ..."
 * (or on a case index) when devices compute different control flow;
 * CM_EINVAL for arguments that do not match; CM_ENOMEM.
 * Sets the process's OpenBLAS thread count for the run: the cores shared
 * out over the workers (every core for one device, one thread each when
 * there are more workers than cores, and then only as many workers compute
 * at a time as there are cores). With o->affinity, worker d is pinned to the
 * (d mod n)-th of the n CPUs the process may run on (sched_getaffinity), and
 * the workers of a CPU compute one at a time. The workers start together
 * or not at all: CM_ENOMEM when the system is out of threads, CM_EIO when
 * a thread cannot be pinned (no worker runs then). */
cm_status ex_exec_run(const sp_module *m, const ex_exec_opts *o, const ex_tensor *args,
                      uint32_t n_args, ex_tensor **res_out, uint32_t *n_res_out, cm_error *err);

/* ex_exec_run that calls between(ctx) after every run but the last, outside
 * the timed part, while every worker waits: a benchmark measures its
 * baseline there, right next to each run (the machine drifts within
 * seconds). between may be NULL. */
cm_status ex_exec_run_paced(const sp_module *m, const ex_exec_opts *o, void (*between)(void *ctx),
                            void *ctx, const ex_tensor *args, uint32_t n_args, ex_tensor **res_out,
                            uint32_t *n_res_out, cm_error *err);

/* The first element where got differs from expected beyond the tolerance. */
typedef struct ex_mismatch {
    bool match;        /* every element within tolerance */
    uint32_t result;   /* result number of the first mismatch */
    size_t index;      /* flat row-major index in that result */
    char where[160];   /* its coordinates, "[3, 17]" */
    double expected;
    double got;
    double tol;        /* tolerance at that element */
    double max_abs_diff; /* over all results */
} ex_mismatch;

/* Compares two result lists element by element: floats within
 * rel * |expected| + abs, where for f32 rel = 1e-4 and abs = 1e-5, both
 * scaled by sqrt(k) with k the longest contraction of the module
 * (ex_module_contraction; rounding error of a sum grows like sqrt(k)); f64
 * uses 1e-10 and 1e-12 likewise, bf16 2e-2 and 2e-2, f16 4e-3 and 4e-3;
 * integers and booleans compare exactly.
 * Shapes or types that differ are a mismatch at index 0. */
void ex_tensors_compare(const ex_tensor *expected, const ex_tensor *got, uint32_t n, int64_t k,
                        ex_mismatch *out);

/* The size of m's first mesh (the default device count); 1 without one. */
uint32_t ex_module_devices(const sp_module *m);

/* The largest contraction length (product of contracting dimension sizes)
 * of any dot_general in m; 1 when there is none. */
int64_t ex_module_contraction(const sp_module *m);

/* Partitions m in place when it has no sdy collectives yet other than the
 * user's sdy.reshard ops (sp_module_partition: -sdy-insert-explicit-reshards
 * then -sdy-reshard-to-collectives). m must have been through
 * -sdy-propagation-pipeline, or hold reshards (which the input reader takes
 * for partitioned and does not propagate). Errors: those of the passes. */
cm_status ex_partition(sp_module *m, cm_error *err);

typedef struct ex_check_opts {
    uint32_t n_devices; /* 0: the mesh size */
    uint32_t iters;     /* partitioned runs (0 counts as 1) */
    uint64_t seed;
    double *iter_s;     /* NULL, or iters entries */
    ex_affinity affinity; /* ex_exec_opts.affinity of the partitioned runs */
    double *op_s;       /* ex_exec_opts.op_s of the partitioned runs (r->n_devices x ops) */
    uint32_t op_from;
    struct ex_trace *trace; /* ex_exec_opts.trace of the partitioned runs */
} ex_check_opts;

typedef struct ex_report {
    uint32_t n_devices; /* workers used */
    double flops;       /* per run over all devices, from the cost model (0: unknown) */
    double ref_s;       /* wall seconds of the reference run */
    uint32_t ref_processes; /* 0: the reference ran on one worker; else a per-process main's
                           processes the interpreter ran (docs/executor.md) */
    ex_mismatch mm;
} ex_report;

/* Runs part (partitioned) and ref (the same module unpartitioned, run
 * replicated on one worker) with the same seeded arguments and compares the
 * results into r. Errors: those of ex_args_make and ex_exec_run. */
cm_status ex_check_modules(sp_module *part, const sp_module *ref, const ex_check_opts *o,
                           ex_report *r, cm_error *err);

/* Reads the text (MLIR or a graph document) twice through the input loader
 * (sp_input_read: -sdy-propagation-pipeline unless the module already has
 * collectives), partitions one copy (sp_input_partition) and checks it
 * against the other (ex_check_modules). */
cm_status ex_check_text(const char *text, size_t len, const ex_check_opts *o, ex_report *r,
                        cm_error *err);

/* The one-device reference of a module with check ops whose main takes no
 * arguments: the interpreter's run (ex_interp.h), of every process of its
 * replicas x partitions grid for a per-process main (mhlo.num_replicas > 1
 * or StableHLO collectives at main's top level; docs/executor.md). Failed
 * checks go to fails as "LINE:COL: check...."; *n_checks and *n_failed get
 * the counts (over every process), *n_proc the processes run. Errors: those
 * of the interpreter. */
cm_status ex_check_reference(const sp_module *m, FILE *fails, uint32_t *n_checks,
                             uint32_t *n_failed, uint32_t *n_proc, cm_error *err);

/* Runs partitioned module m (main takes no arguments) on n_devices workers
 * (0: ex_module_devices) with main's top-level check ops evaluated as the
 * interpreter does on their operands' assembled global values (a
 * per-process main: on each device's own values); a failed check goes to
 * fails as "LINE:COL: check.... [partitioned, N devices]" (or "[device D:
 * replica R, partition P]"). *n_dev_out gets the device count. Errors:
 * those of ex_exec_run (a check inside a region or manual computation is
 * refused) and of the checks. */
cm_status ex_check_partitioned(const sp_module *m, uint32_t n_devices, FILE *fails,
                               uint32_t *n_checks, uint32_t *n_failed, uint32_t *n_dev_out,
                               cm_error *err);

#endif /* EX_EXEC_H */
