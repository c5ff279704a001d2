/* SPDX-License-Identifier: Apache-2.0
 * server: request and planner metrics as lock-free counters and fixed-bucket
 * histograms, written in Prometheus' text exposition format for /metrics. */
#include "srv_int.h"

#include <stdio.h>
#include <string.h>

static const double bucket_le[SRV_METRIC_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001,
                                                     0.0025, 0.005,   0.01,   0.025,
                                                     0.05,   0.1,     0.5,    2.5};

static void histo_init(srv_histo *h)
{
    for (size_t i = 0; i <= SRV_METRIC_BUCKETS; i++) {
        atomic_init(&h->buckets[i], 0);
    }
    atomic_init(&h->count, 0);
    atomic_init(&h->sum_us, 0);
}

void srv_metrics_init(srv_metrics *m)
{
    for (size_t r = 0; r < SRV_METRIC_ROUTES; r++) {
        for (size_t c = 0; c < SRV_METRIC_CLASSES; c++) {
            atomic_init(&m->requests[r][c], 0);
        }
        histo_init(&m->latency[r]);
    }
    histo_init(&m->plan_time);
    atomic_init(&m->plans_computed, 0);
    atomic_init(&m->plans_deduplicated, 0);
    atomic_init(&m->plans_here, 0);
    atomic_init(&m->plans_on_worker, 0);
    atomic_init(&m->plans_moved, 0);
    for (size_t i = 0; i < SRV_METRIC_CODES; i++) {
        atomic_init(&m->errors[i], 0);
    }
    atomic_init(&m->in_flight, 0);
}

void srv_histo_observe(srv_histo *h, double seconds)
{
    size_t i = 0;
    while (i < SRV_METRIC_BUCKETS && seconds > bucket_le[i]) {
        i++;
    }
    atomic_fetch_add_explicit(&h->buckets[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    double us = seconds * 1e6;
    atomic_fetch_add_explicit(&h->sum_us, us > 0 ? (unsigned long long)us : 0,
                              memory_order_relaxed);
}

static unsigned long long ld(const atomic_ullong *x)
{
    return atomic_load_explicit(x, memory_order_relaxed);
}

static void histo_write(const srv_histo *h, const char *name, const char *labels, cm_buf *out)
{
    unsigned long long cum = 0;
    const char *sep = labels[0] != '\0' ? "," : "";
    for (size_t i = 0; i < SRV_METRIC_BUCKETS; i++) {
        cum += ld(&h->buckets[i]);
        cm_buf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bucket_le[i], cum);
    }
    cum += ld(&h->buckets[SRV_METRIC_BUCKETS]);
    cm_buf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, cum);
    cm_buf_printf(out, "%s_sum{%s} %.6f\n", name, labels, (double)ld(&h->sum_us) / 1e6);
    cm_buf_printf(out, "%s_count{%s} %llu\n", name, labels, ld(&h->count));
}

void srv_metrics_write(const srv_metrics *m, const char *const *route_names, size_t n_routes,
                       const char *const *error_names, size_t n_errors, cm_buf *out)
{
    cm_buf_puts(out, "# HELP shardplan_http_requests_total HTTP requests by route and status "
                     "class.\n# TYPE shardplan_http_requests_total counter\n");
    for (size_t r = 0; r < n_routes && r < SRV_METRIC_ROUTES; r++) {
        for (size_t c = 0; c < SRV_METRIC_CLASSES; c++) {
            unsigned long long n = ld(&m->requests[r][c]);
            if (n > 0) {
                cm_buf_printf(out,
                              "shardplan_http_requests_total{route=\"%s\",code=\"%zuxx\"} %llu\n",
                              route_names[r], c + 1, n);
            }
        }
    }
    cm_buf_puts(out, "# HELP shardplan_http_request_duration_seconds Time from request arrival "
                     "to completion.\n# TYPE shardplan_http_request_duration_seconds "
                     "histogram\n");
    for (size_t r = 0; r < n_routes && r < SRV_METRIC_ROUTES; r++) {
        if (ld(&m->latency[r].count) == 0) {
            continue;
        }
        char labels[128];
        snprintf(labels, sizeof labels, "route=\"%s\"", route_names[r]);
        histo_write(&m->latency[r], "shardplan_http_request_duration_seconds", labels, out);
    }
    cm_buf_puts(out, "# HELP shardplan_plan_duration_seconds Planner runs (decode, propagate, "
                     "write).\n# TYPE shardplan_plan_duration_seconds histogram\n");
    histo_write(&m->plan_time, "shardplan_plan_duration_seconds", "", out);
    cm_buf_printf(out,
                  "# HELP shardplan_plans_total Plan requests by outcome.\n"
                  "# TYPE shardplan_plans_total counter\n"
                  "shardplan_plans_total{outcome=\"computed\"} %llu\n"
                  "shardplan_plans_total{outcome=\"deduplicated\"} %llu\n",
                  ld(&m->plans_computed), ld(&m->plans_deduplicated));
    cm_buf_printf(out,
                  "# HELP shardplan_plan_runs_total Planner runs by where they ran: on the "
                  "request's own thread (small inputs without calls) or on a plan worker.\n"
                  "# TYPE shardplan_plan_runs_total counter\n"
                  "shardplan_plan_runs_total{on=\"request\"} %llu\n"
                  "shardplan_plan_runs_total{on=\"worker\"} %llu\n"
                  "# HELP shardplan_plans_moved_total Plans begun on the request's thread that "
                  "ran past its bound (0.25 s) and were planned again on a plan worker.\n"
                  "# TYPE shardplan_plans_moved_total counter\n"
                  "shardplan_plans_moved_total %llu\n",
                  ld(&m->plans_here), ld(&m->plans_on_worker), ld(&m->plans_moved));
    cm_buf_puts(out, "# HELP shardplan_http_errors_total Error replies by error code.\n"
                     "# TYPE shardplan_http_errors_total counter\n");
    for (size_t i = 0; i < n_errors && i < SRV_METRIC_CODES; i++) {
        cm_buf_printf(out, "shardplan_http_errors_total{code=\"%s\"} %llu\n", error_names[i],
                      ld(&m->errors[i]));
    }
    cm_buf_printf(out,
                  "# HELP shardplan_http_in_flight Requests being served.\n"
                  "# TYPE shardplan_http_in_flight gauge\nshardplan_http_in_flight %u\n",
                  atomic_load(&m->in_flight));
}
