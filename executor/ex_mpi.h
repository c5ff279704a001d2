/* SPDX-License-Identifier: Apache-2.0
 * executor: a run spread over MPI processes (Open MPI; docs/executor.md "On
 * a cluster"). Under mpirun, process k of n runs a contiguous share of the
 * mesh's devices as worker threads, as ex_exec_run runs all of them;
 * collectives whose device groups stay inside a process keep the
 * shared-memory path, the others go through MPI on communicators made once
 * per set of processes a group spans (MPI_Comm_split): all-reduce as a
 * local reduce, MPI_Allreduce (or a ring of point-to-point calls from
 * 1 MiB) with the partials' reduction kind and a local broadcast;
 * all-gather as MPI_Allgather; reduce-scatter as a local sum and
 * MPI_Reduce_scatter_block (or the ring); all-to-all, permutes and
 * reshards as MPI_Isend/MPI_Irecv of the pieces each device needs. The reference
 * run is process 0's; results and timers are gathered there.
 * This is the only header of MPI's wrapper module; mpi.h stays inside
 * ex_mpi.c. Thread contract: one ex_mpi per process, used by the thread
 * that made it (the workers of a run call MPI one at a time). */
#ifndef EX_MPI_H
#define EX_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "cm.h"
#include "ex_exec.h"
#include "sp_ir.h"

typedef struct ex_mpi ex_mpi;

/* Starts MPI in this process (MPI_Init_thread with MPI_THREAD_SERIALIZED)
 * and returns its handle (*out, freed by ex_mpi_fini, which ends MPI).
 * argc/argv are main's (MPI may read its own options from them). Errors:
 * CM_EIO when MPI cannot start or lacks the thread level, CM_ENOMEM. */
cm_status ex_mpi_init(int *argc, char ***argv, ex_mpi **out, cm_error *err);
void ex_mpi_fini(ex_mpi *mp);

/* This process's rank and the number of processes. */
uint32_t ex_mpi_rank(const ex_mpi *mp);
uint32_t ex_mpi_size(const ex_mpi *mp);

/* The name MPI gives process rank's host (MPI_Get_processor_name), ""
 * for a rank out of range; valid until ex_mpi_fini. */
const char *ex_mpi_host(const ex_mpi *mp, uint32_t rank);

/* Process 0's text (*text, *len there) on every process: the others get a
 * copy (cm_alloc, NUL-terminated, freed by the caller). Collective.
 * Errors: CM_ENOMEM (then every process fails). */
cm_status ex_mpi_bcast_text(ex_mpi *mp, char **text, size_t *len, cm_error *err);

/* Every process's st at once: CM_OK when all are, else the code and error
 * (into err) of the lowest failing rank, on every process. Collective. */
cm_status ex_mpi_agree(ex_mpi *mp, cm_status st, cm_error *err);

/* Per collective of the partitioned module (arrays of its n_ops entries,
 * by op id, either may be NULL): net_s, zeroed by the caller, gets the
 * seconds it spent in MPI calls (summed over the timed runs; of the
 * process that spent the least, the last to arrive, whose MPI time is the
 * closest to the transfer's), the rest of its time being local work; path how it ran
 * ("shared memory", "MPI_Allreduce", ...: static strings; NULL for ops
 * that are not collectives). */
typedef struct ex_mpi_colls {
    double *net_s;
    const char **path;
} ex_mpi_colls;

/* ex_check_modules across the processes: every process runs its share of
 * part's devices (o->n_devices, 0: the mesh size; at least one per
 * process), process 0 also runs ref on one worker and gets the gathered
 * results compared into r, the runs' wall seconds (o->iter_s: the slowest
 * process's), the per-op timers (o->op_s, as ex_check_opts, summed from
 * every process's devices) and, with c, the collectives' split. Collective;
 * the status is every process's (ex_mpi_agree). Errors: those of
 * ex_check_modules, CM_EINVAL when there are fewer devices than
 * processes, CM_EINTERNAL when devices holding the same element disagree
 * ("replicas disagree"). */
cm_status ex_mpi_check_modules(ex_mpi *mp, sp_module *part, const sp_module *ref,
                               const ex_check_opts *o, ex_report *r, ex_mpi_colls *c,
                               cm_error *err);

/* Appends ,"mpi":{"processes":N,"hosts":[...],"collectives":[...]} to b:
 * for each explicit collective of m with a path, its op id, kind, line,
 * path, mean seconds per run over the n_dev devices (op_s, summed over runs
 * runs; the list is empty when op_s is NULL), and its network and local
 * parts (docs/executor.md). CM_ENOMEM. */
cm_status ex_mpi_colls_json(const ex_mpi *mp, const sp_module *m, const double *op_s,
                            const ex_mpi_colls *c, uint32_t n_dev, uint64_t runs, cm_buf *b);

/* The network between processes 0 and 1 (`shardplan calibrate --mpi`),
 * the same figures on every process. */
typedef struct ex_mpi_link {
    double latency;         /* half the best round trip of 8 bytes, seconds */
    double stream_bw;       /* bytes/s each way, the best of 5 exchanges of `bytes` sent both
                               ways at once in the ring's message size */
    double allreduce_bw;    /* bytes/s on the wire each way of f32 sum all-reduces between the
                               two round the executor's ring, `groups` at once as a run's groups
                               of one device per process go (2(n-1)/n bytes per byte reduced):
                               the slope between `bytes` and bytes / 16 in all (medians of 5) */
    double allreduce_fixed; /* seconds each such all-reduce takes beyond its bytes at
                               allreduce_bw (the line's intercept, at least 0): the ring's
                               steps, its last chunk's combining, the handshakes */
} ex_mpi_link;

/* Measures *out between processes 0 and 1 with `bytes` (e.g. 64 MiB) in
 * all, split over `groups` buffers (1 to 64) for the all-reduces.
 * Collective. Errors: CM_EINVAL with fewer than 2 processes or groups out
 * of range, CM_EIO without MPI. */
cm_status ex_mpi_link_measure(ex_mpi *mp, size_t bytes, uint32_t groups, ex_mpi_link *out,
                              cm_error *err);

/* Every process's n doubles (mine) side by side on every process:
 * all_out[r * n + i] is process r's mine[i]; all_out has n times
 * ex_mpi_size(mp) entries, the caller's. n is the caller's (at most 4096).
 * Collective. Errors: CM_EINVAL for n over 4096, CM_EIO without MPI. */
cm_status ex_mpi_allgather_f64(ex_mpi *mp, const double *mine, size_t n, double *all_out,
                               cm_error *err);

/* The devices process rank runs out of n_dev: [*lo, *hi). */
void ex_mpi_devices(uint32_t n_dev, uint32_t rank, uint32_t size, uint32_t *lo, uint32_t *hi);

#endif /* EX_MPI_H */
