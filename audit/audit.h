/*
 * audit.h - audit records (SPEC §6): blocked_host_log and egress_route_log.
 *
 * Workers count into their own slots without locks held for long; one audit thread merges the
 * counts and writes them to the store (SQLite or PostgreSQL). A host's first block is written
 * at once, the rest at least every second and at audit_close(). When the store is unreachable
 * counts are kept and retried with backoff; nothing is dropped. Only hostnames, routes, counts,
 * times, user and run ids and the source are ever stored.
 */
#ifndef VG_AUDIT_H
#define VG_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

enum audit_route {
    AUDIT_ROUTE_DIRECT = 0,
    AUDIT_ROUTE_TUNNEL,
    AUDIT_ROUTE_REFUSED,
    AUDIT_ROUTE_REPORTED, /* a policy block a report-only vault forwarded (SPEC §12) */
};

enum audit_source {
    AUDIT_SOURCE_PROXY = 0,
    AUDIT_SOURCE_LOCAL_EGRESS,
};

enum audit_table {
    AUDIT_TABLE_BLOCKED = 0,
    AUDIT_TABLE_ROUTES,
    /* what `audit suggest` reads (SPEC §12): {host, route, count} summed over the runs asked
     * for, route `reported` or `refused` from egress_route_log, `blocked` from blocked_host_log */
    AUDIT_TABLE_SEEN,
};

struct audit;

/*
 * Opens the store named by url (`sqlite:PATH`, `postgresql://...` / `postgres://...`, or
 * `off`) and creates the schema if missing. nworkers slots are made for audit_blocked/route.
 * Returns NULL + err when the store cannot be opened (the caller exits 4).
 */
struct audit *audit_open(const char *url, enum audit_source source, const char *user_id,
                         const char *run_id, int nworkers, char *err, size_t errlen);

/* Starts the writer thread. 0 or -1 + err. */
int audit_start(struct audit *a, char *err, size_t errlen);

/* Flushes every pending count (bounded wait), stops the thread, frees; NULLs *ap. */
void audit_close(struct audit **ap);

/* Called by worker `worker` (0..nworkers-1) only; never blocks on the store. */
void audit_blocked(struct audit *a, int worker, const char *host);
void audit_route(struct audit *a, int worker, const char *host, enum audit_route route);

struct audit_status {
    bool enabled;     /* false for `off` */
    bool healthy;     /* last write (or open) succeeded */
    uint64_t pending; /* counts not yet in the store */
    char store[512];  /* URL without password, or "off" */
};
void audit_status(struct audit *a, struct audit_status *out);

/*
 * Reads rows of one table (for `vaultgate audit` and the admin API) with its own connection to
 * the store. run_id NULL means every run. *rows is a cJSON array of objects keyed by column name
 * (times as ISO 8601 UTC strings). 0 or -1 + err.
 */
int audit_query(const char *url, enum audit_table table, const char *run_id, cJSON **rows,
                char *err, size_t errlen);

/* URL with any password replaced by "***", into out. */
void audit_url_display(const char *url, char *out, size_t outsz);

const char *audit_route_name(enum audit_route r);
const char *audit_source_name(enum audit_source s);

#endif
