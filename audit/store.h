/*
 * store.h - the audit stores behind audit.c (internal to audit/): one small vtable per backend.
 *
 * The writer thread is the only user of a struct store; it calls begin, any number of upserts
 * and commit (or rollback) for one flush, so a flush lands in the store whole or not at all.
 * query opens its own short-lived connection and is safe from any thread.
 */
#ifndef VG_AUDIT_STORE_H
#define VG_AUDIT_STORE_H

#include "audit/audit.h"

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

struct store;

/* One blocked_host_log delta: count is added, times are merged with min/max. */
struct store_blocked_row {
    const char *user_id;
    const char *run_id;
    const char *host;
    const char *source; /* proxy | local-egress */
    uint64_t count;
    int64_t first_ms;
    int64_t last_ms;
};

/* One egress_route_log delta. */
struct store_route_row {
    const char *run_id;
    const char *host;
    const char *route; /* direct | tunnel | refused | reported */
    uint64_t count;
    int64_t first_ms;
    int64_t last_ms;
};

struct store_ops {
    const char *name;
    /* Opens (connects), creates the schema if missing. NULL + err. */
    struct store *(*open)(const char *url, char *err, size_t errlen);
    /* One transaction per flush; after a failed begin/upsert/commit, rollback is called. */
    int (*begin)(struct store *st, char *err, size_t errlen);
    int (*upsert_blocked)(struct store *st, const struct store_blocked_row *row, char *err,
                          size_t errlen);
    int (*upsert_route)(struct store *st, const struct store_route_row *row, char *err,
                        size_t errlen);
    int (*commit)(struct store *st, char *err, size_t errlen);
    void (*rollback)(struct store *st);
    /* Reads one table with its own connection; see audit_query. */
    int (*query)(const char *url, enum audit_table table, const char *run_id, cJSON **rows,
                 char *err, size_t errlen);
    /* Closes and frees; NULLs *stp. */
    void (*close)(struct store **stp);
};

extern const struct store_ops store_sqlite_ops;
extern const struct store_ops store_pg_ops;

/* The backend for url (`sqlite:` or `postgres[ql]://`), or NULL (also for `off`). */
const struct store_ops *store_for_url(const char *url);

/*
 * audit_open with an explicit backend: how audit_open itself works, and how tests put a faulty
 * store in front of a real one. ops NULL behaves like `off`.
 */
struct audit *audit_open_ops(const struct store_ops *ops, const char *url, enum audit_source source,
                             const char *user_id, const char *run_id, int nworkers, char *err,
                             size_t errlen);

/* Shared by the backends: a "%s" into err, truncated; returns -1. */
int store_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
