/* SPDX-License-Identifier: Apache-2.0
 * executor (internal): a run spread over processes, each running some of
 * the devices as worker threads (ex_mpi.h, docs/executor.md "On a
 * cluster"). The core (ex_run.c, ex_coll.c) knows the distribution only as
 * the table of hooks below, so nothing but ex_mpi.c sees MPI and binaries
 * that never run distributed never link it. Process k runs the devices
 * [lo, hi); every process prepares the same program and walks the same
 * control flow, so every process reaches every collective and vote in the
 * same order. A collective whose device groups each stay inside one process
 * runs on shared memory as without MPI (ex_coll_local); one that crosses
 * processes is moved by the first worker of each process (device lo)
 * through the hooks, while the others lend a hand with its copies (help)
 * and then wait at the collective's second barrier. Thread contract: the
 * hooks but help are called by one worker of a process at a time, between
 * barriers that order them with the others; help by every other worker
 * while lo is in coll (ex_mpi.c's crew orders them). */
#ifndef EX_MPI_INT_H
#define EX_MPI_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "cm.h"
#include "ex_exec.h"
#include "ex_int.h"

typedef struct ex_dist ex_dist;

typedef struct ex_dist_ops {
    /* Before the workers start, on every process: how each collective of
     * p runs and the communicators they use (collective over the
     * processes). Errors: CM_ENOMEM, CM_EIO (MPI refused). */
    cm_status (*prepare)(ex_dist *d, const prog *p, cm_error *err);
    /* After the workers stopped: releases what prepare made. */
    void (*release)(ex_dist *d);
    /* Whether collective (or peer_read op) x crosses processes. */
    bool (*crosses)(const ex_dist *d, const xop *x);
    /* Device me (= lo) moves collective x for every device of this
     * process, between the collective's two barriers. */
    cm_status (*coll)(ex_dist *d, const prog *p, const xop *x, shared *sh, uint32_t me,
                      cm_error *err);
    /* Device lo: gives every device of other processes a copy of its block
     * of each value of vals (n of them) in its slot of sh->bufs, until
     * unmirror; a value a device here holds no buffer of is sent as
     * zeros. Errors: CM_ENOMEM. */
    cm_status (*mirror)(ex_dist *d, shared *sh, const uint32_t *vals, uint32_t n, cm_error *err);
    void (*unmirror)(ex_dist *d, shared *sh);
    /* Device lo: the decision of every process from this one's (mine: the
     * common value of the devices here, or FLOW_FAILED/FLOW_DISAGREE of
     * ex_run.c): the common one, INT64_MIN when one failed, INT64_MIN + 1
     * when they differ. */
    int64_t (*vote)(ex_dist *d, int64_t mine);
    /* Device lo: every process meets here (before each run). */
    void (*sync)(ex_dist *d);
    /* Every other device me of this process, where lo calls coll (between
     * the same barriers, failed or not): lends a hand with lo's copies
     * (never MPI), returning once lo is done with the collective. */
    void (*help)(ex_dist *d, uint32_t me);
} ex_dist_ops;

struct ex_dist {
    const ex_dist_ops *ops;
    uint32_t lo, hi; /* the devices this process runs */
};

/* ex_run.c: ex_exec_run_paced for the devices [dist->lo, dist->hi) of a
 * run spread over processes (dist NULL: all of them, as ex_exec_run).
 * Results are assembled from the devices here only; with seen_out, each
 * result j also gets seen_out[0][j], a mask of its elements (1: filled
 * here), freed with cm_free like the array. */
cm_status ex_exec_run_dist(const sp_module *m, const ex_exec_opts *o, ex_dist *dist,
                           void (*between)(void *ctx), void *ctx, const ex_tensor *args,
                           uint32_t n_args, ex_tensor **res_out, uint32_t *n_res_out,
                           uint8_t ***seen_out, cm_error *err);

/* ex_coll.c: collective x on shared memory for the devices of this
 * process, as every worker runs it without MPI (ex_coll_run); dest_only:
 * one worker makes every result block here from the devices' operand
 * blocks (those of other processes mirrored in), never writing another
 * process's device. */
cm_status ex_coll_local(const prog *p, const xop *x, shared *sh, uint32_t me, bool dest_only,
                        cm_error *err);

/* ex_coll.c: the devices whose operand blocks device dev's result block of
 * collective x is made from (src_out: up to p->n_dev), reduce for a
 * reduce_scatter; returns their count. */
uint32_t ex_coll_sources(const prog *p, const xop *x, uint32_t dev, bool reduce, uint32_t *src_out);

/* ex_coll.c: the part of device src's operand block of x that device dev's
 * result block takes: extent and start in both blocks; false when none. */
bool ex_coll_piece(const prog *p, const xop *x, uint32_t src, uint32_t dev, int64_t *ext,
                   int64_t *sfrom, int64_t *dfrom);

/* ex_coll.c: copies the box of extent ext at so in src (dims sd) to do_ in
 * dst (dims dd). */
void ex_coll_move(const void *src, const int64_t *sd, const int64_t *so, void *dst,
                  const int64_t *dd, const int64_t *do_, const int64_t *ext, uint32_t rank,
                  size_t esz);

#endif /* EX_MPI_INT_H */
