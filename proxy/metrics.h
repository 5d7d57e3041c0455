/*
 * metrics.h - counters for /metrics (SPEC §7).
 *
 * Each worker writes only its own slot with relaxed atomics: nothing on the request path takes
 * a lock. The admin thread sums the slots when it renders. Labels are fixed words, secret
 * NAMES, and never a path, query, header or host.
 */
#ifndef VG_METRICS_H
#define VG_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/dnsmsg.h"

enum metrics_decision {
    METRICS_D_INJECT = 0,
    METRICS_D_ALLOW,
    METRICS_D_BLOCK,
    METRICS_D_ERROR, /* protocol errors answered before any decision */
    METRICS_D_COUNT,
};

enum metrics_upstream_error {
    METRICS_UE_DNS = 0,
    METRICS_UE_CONNECT,
    METRICS_UE_TLS,
    METRICS_UE_TIMEOUT,
    METRICS_UE_PROTOCOL,
    METRICS_UE_COUNT,
};

/* What a vault reload came to (SPEC §13): swapped in, refused, or swapped in with "relaunch
 * required" standing. */
enum metrics_reload {
    METRICS_R_OK = 0,
    METRICS_R_INVALID,
    METRICS_R_RELAUNCH,
    METRICS_R_COUNT,
};

/* Once at start, before the workers run. 0 or -1. */
int metrics_init(int nworkers);
void metrics_shutdown(void);

/* One answered request: decision, HTTP status, seconds from head to last response byte. */
void metrics_request(int worker, enum metrics_decision d, int status, double seconds);
void metrics_blocked(int worker);
/* One request a report-only vault forwarded that policy would have refused (SPEC §12). */
void metrics_reported(int worker);
/* secret is the secret's NAME (label value); at most VG_VAULT_MAX_SECRETS*4 distinct names. */
void metrics_injection(int worker, const char *secret);
void metrics_conn_open(int worker);
void metrics_conn_close(int worker);
void metrics_tls_handshake(int worker);
void metrics_upstream_error(int worker, enum metrics_upstream_error kind);
/* One answered DNS query (SPEC §12): its type and rcode, never its name. */
void metrics_dns_query(int worker, enum dnsmsg_type type, enum dnsmsg_rcode rcode);
/* One vault reload, by signal or by watch; the main thread's, so not per worker. */
void metrics_reload(enum metrics_reload result);

/* The kind an upstream_get() failure counts as (enum upstream_err of upstream.h). */
enum metrics_upstream_error metrics_upstream_kind(int upstream_err);

/* Extra values summed from elsewhere at render time (e.g. certcache_stats). */
struct metrics_extra {
    uint64_t cert_cache_hits;
    uint64_t cert_cache_misses;
};

/* The totals the status page shows: requests by decision (all status classes) and refusals. */
struct metrics_totals {
    uint64_t requests[METRICS_D_COUNT];
    uint64_t blocked;
    uint64_t reported; /* since the process started, across reloads */
};

/* Sums every slot into *out (zeros before metrics_init). */
void metrics_totals(struct metrics_totals *out);

/* Prometheus text exposition of everything. Caller frees the result with free(). */
char *metrics_render(const struct metrics_extra *extra, size_t *len);

#endif
