/*
 * store_sqlite.c - the `sqlite:PATH` audit store.
 *
 * Guarantees: the schema of SPEC §6 with times as ISO 8601 UTC text (which sorts like the time
 * it names, so min()/max() on the text keep the earliest and latest); WAL with synchronous=FULL,
 * so a committed flush survives a crash; every value goes through a bound parameter of a
 * statement prepared once; one flush is one BEGIN IMMEDIATE ... COMMIT, so several vaultgate
 * instances (proxy and local-egress) can share one file, each waiting up to the busy timeout.
 */
#include "audit/store.h"
#include "common/caps.h"
#include "common/timefmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#define SQLITE_BUSY_TIMEOUT_MS 5000

struct store {
    sqlite3 *db;
    sqlite3_stmt *up_blocked;
    sqlite3_stmt *up_route;
    char path[1024];
};

#define ROUTE_COLUMNS                                                                              \
    " run_id TEXT NOT NULL,"                                                                       \
    " host TEXT NOT NULL,"                                                                         \
    " route TEXT NOT NULL CHECK (route IN ('direct', 'tunnel', 'refused', 'reported')),"           \
    " count INTEGER NOT NULL CHECK (count >= 0),"                                                  \
    " first_seen TEXT NOT NULL,"                                                                   \
    " last_seen TEXT NOT NULL,"                                                                    \
    " PRIMARY KEY (run_id, host, route)"

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS blocked_host_log ("
    " user_id TEXT NOT NULL,"
    " run_id TEXT NOT NULL,"
    " host TEXT NOT NULL,"
    " seen_count INTEGER NOT NULL CHECK (seen_count >= 0),"
    " first_seen TEXT NOT NULL,"
    " last_seen TEXT NOT NULL,"
    " source TEXT NOT NULL CHECK (source IN ('proxy', 'local-egress', 'both')),"
    " PRIMARY KEY (user_id, run_id, host));"
    "CREATE TABLE IF NOT EXISTS egress_route_log (" ROUTE_COLUMNS ");";

/*
 * A store made before the route `reported` (SPEC §12) has a CHECK without it, and SQLite cannot
 * alter a constraint: the table is rebuilt under the new one, rows kept, in the schema's
 * transaction.
 */
static const char routes_has_reported_sql[] =
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'egress_route_log'"
    " AND sql LIKE '%''reported''%'";
static const char routes_migrate_sql[] =
    "CREATE TABLE egress_route_log_new (" ROUTE_COLUMNS ");"
    "INSERT INTO egress_route_log_new (run_id, host, route, count, first_seen, last_seen)"
    " SELECT run_id, host, route, count, first_seen, last_seen FROM egress_route_log;"
    "DROP TABLE egress_route_log;"
    "ALTER TABLE egress_route_log_new RENAME TO egress_route_log;";

static const char up_blocked_sql[] =
    "INSERT INTO blocked_host_log AS t"
    " (user_id, run_id, host, seen_count, first_seen, last_seen, source)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
    " ON CONFLICT (user_id, run_id, host) DO UPDATE SET"
    " seen_count = t.seen_count + excluded.seen_count,"
    " first_seen = min(t.first_seen, excluded.first_seen),"
    " last_seen = max(t.last_seen, excluded.last_seen),"
    " source = CASE WHEN t.source = excluded.source THEN t.source ELSE 'both' END";

static const char up_route_sql[] =
    "INSERT INTO egress_route_log AS t (run_id, host, route, count, first_seen, last_seen)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
    " ON CONFLICT (run_id, host, route) DO UPDATE SET"
    " count = t.count + excluded.count,"
    " first_seen = min(t.first_seen, excluded.first_seen),"
    " last_seen = max(t.last_seen, excluded.last_seen)";

static const char q_blocked_sql[] =
    "SELECT user_id, run_id, host, seen_count, first_seen, last_seen, source"
    " FROM blocked_host_log WHERE ?1 IS NULL OR run_id = ?1"
    " ORDER BY host, run_id, user_id";

static const char q_route_sql[] = "SELECT run_id, host, route, count, first_seen, last_seen"
                                  " FROM egress_route_log WHERE ?1 IS NULL OR run_id = ?1"
                                  " ORDER BY host, route, run_id";

static const char q_seen_sql[] =
    "SELECT host, route, sum(count) AS count FROM egress_route_log"
    " WHERE route IN ('reported', 'refused') AND (?1 IS NULL OR run_id = ?1)"
    " GROUP BY host, route"
    " UNION ALL SELECT host, 'blocked', sum(seen_count) FROM blocked_host_log"
    " WHERE ?1 IS NULL OR run_id = ?1 GROUP BY host"
    " ORDER BY 1, 2";

/* The statement that reads table for audit_query. */
static const char *query_sql(enum audit_table table)
{
    if (table == AUDIT_TABLE_BLOCKED)
        return q_blocked_sql;
    return table == AUDIT_TABLE_ROUTES ? q_route_sql : q_seen_sql;
}

/* Count columns are numbers in JSON; every other column is text. */
static int is_count_column(const char *name)
{
    return strcmp(name, "seen_count") == 0 || strcmp(name, "count") == 0;
}

static const char *sqlite_path(const char *url)
{
    if (strncmp(url, "sqlite:", 7) != 0 || url[7] == '\0')
        return NULL;
    return url + 7;
}

static int exec_sql(sqlite3 *db, const char *sql, const char *path, char *err, size_t errlen)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        return store_fail(err, errlen, "sqlite %s: %s", path, sqlite3_errmsg(db));
    return 0;
}

/* Rebuilds an egress_route_log whose CHECK predates `reported`. 0 or -1 + err. */
static int migrate_routes(sqlite3 *db, const char *path, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc;

    if (sqlite3_prepare_v2(db, routes_has_reported_sql, -1, &s, NULL) != SQLITE_OK)
        return store_fail(err, errlen, "sqlite %s: %s", path, sqlite3_errmsg(db));
    rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc == SQLITE_ROW)
        return 0;
    if (rc != SQLITE_DONE)
        return store_fail(err, errlen, "sqlite %s: %s", path, sqlite3_errmsg(db));
    return exec_sql(db, routes_migrate_sql, path, err, errlen);
}

static void sqlite_close(struct store **stp)
{
    struct store *st = *stp;

    if (st == NULL)
        return;
    sqlite3_finalize(st->up_blocked);
    sqlite3_finalize(st->up_route);
    sqlite3_close_v2(st->db);
    free(st);
    *stp = NULL;
}

static struct store *sqlite_open(const char *url, char *err, size_t errlen)
{
    struct store *st = NULL;
    const char *path = sqlite_path(url);
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;

    if (path == NULL) {
        store_fail(err, errlen, "sqlite store URL must be sqlite:PATH");
        goto fail;
    }
    st = calloc(1, sizeof(*st));
    if (st == NULL) {
        store_fail(err, errlen, "out of memory");
        goto fail;
    }
    snprintf(st->path, sizeof(st->path), "%s", path);
    if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
        store_fail(err, errlen, "sqlite %s: %s", path,
                   st->db != NULL ? sqlite3_errmsg(st->db) : "cannot open");
        goto fail;
    }
    sqlite3_busy_timeout(st->db, SQLITE_BUSY_TIMEOUT_MS);
    /* journal_mode answers with a row; exec discards it. */
    if (exec_sql(st->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", path, err, errlen) <
            0 ||
        exec_sql(st->db, "BEGIN IMMEDIATE", path, err, errlen) < 0)
        goto fail;
    if (exec_sql(st->db, schema_sql, path, err, errlen) < 0 ||
        migrate_routes(st->db, path, err, errlen) < 0 ||
        exec_sql(st->db, "COMMIT", path, err, errlen) < 0) {
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        goto fail;
    }
    if (sqlite3_prepare_v2(st->db, up_blocked_sql, -1, &st->up_blocked, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(st->db, up_route_sql, -1, &st->up_route, NULL) != SQLITE_OK) {
        store_fail(err, errlen, "sqlite %s: %s", path, sqlite3_errmsg(st->db));
        goto fail;
    }
    return st;
fail:
    sqlite_close(&st);
    return NULL;
}

static int sqlite_begin(struct store *st, char *err, size_t errlen)
{
    return exec_sql(st->db, "BEGIN IMMEDIATE", st->path, err, errlen);
}

static int sqlite_commit(struct store *st, char *err, size_t errlen)
{
    return exec_sql(st->db, "COMMIT", st->path, err, errlen);
}

static void sqlite_rollback(struct store *st)
{
    if (!sqlite3_get_autocommit(st->db))
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
}

/* Steps a bound upsert once and resets it, whatever happened. */
static int step_once(struct store *st, sqlite3_stmt *stmt, char *err, size_t errlen)
{
    int rc = sqlite3_step(stmt);

    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    if (rc != SQLITE_DONE)
        return store_fail(err, errlen, "sqlite %s: %s", st->path, sqlite3_errmsg(st->db));
    return 0;
}

static int sqlite_upsert_blocked(struct store *st, const struct store_blocked_row *r, char *err,
                                 size_t errlen)
{
    char first[TIMEFMT_BUFSZ], last[TIMEFMT_BUFSZ];
    sqlite3_stmt *s = st->up_blocked;

    timefmt_iso8601(r->first_ms, first, sizeof(first));
    timefmt_iso8601(r->last_ms, last, sizeof(last));
    sqlite3_bind_text(s, 1, r->user_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, r->run_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, r->host, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)r->count);
    sqlite3_bind_text(s, 5, first, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 6, last, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 7, r->source, -1, SQLITE_STATIC);
    return step_once(st, s, err, errlen);
}

static int sqlite_upsert_route(struct store *st, const struct store_route_row *r, char *err,
                               size_t errlen)
{
    char first[TIMEFMT_BUFSZ], last[TIMEFMT_BUFSZ];
    sqlite3_stmt *s = st->up_route;

    timefmt_iso8601(r->first_ms, first, sizeof(first));
    timefmt_iso8601(r->last_ms, last, sizeof(last));
    sqlite3_bind_text(s, 1, r->run_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, r->host, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, r->route, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 4, (sqlite3_int64)r->count);
    sqlite3_bind_text(s, 5, first, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 6, last, -1, SQLITE_TRANSIENT);
    return step_once(st, s, err, errlen);
}

/* One result row as a JSON object keyed by column name. NULL when out of memory. */
static cJSON *row_object(sqlite3_stmt *s)
{
    cJSON *obj = cJSON_CreateObject();
    int n = sqlite3_column_count(s);

    for (int i = 0; obj != NULL && i < n; i++) {
        const char *name = sqlite3_column_name(s, i);
        cJSON *v;

        if (is_count_column(name)) {
            v = cJSON_CreateNumber((double)sqlite3_column_int64(s, i));
        } else {
            const unsigned char *t = sqlite3_column_text(s, i);

            v = cJSON_CreateString(t != NULL ? (const char *)t : "");
        }
        if (v == NULL || !cJSON_AddItemToObject(obj, name, v)) {
            cJSON_Delete(v);
            cJSON_Delete(obj);
            obj = NULL;
        }
    }
    return obj;
}

static int sqlite_query(const char *url, enum audit_table table, const char *run_id, cJSON **rows,
                        char *err, size_t errlen)
{
    const char *path = sqlite_path(url);
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    cJSON *arr = NULL;
    size_t nrows = 0;
    int rc, ret = -1;

    if (path == NULL) {
        store_fail(err, errlen, "sqlite store URL must be sqlite:PATH");
        goto out;
    }
    /* Never create a missing file; fall back to read-only for a store owned by another user. */
    rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
    if (rc != SQLITE_OK) {
        sqlite3_close_v2(db);
        db = NULL;
        rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
    }
    if (rc != SQLITE_OK) {
        store_fail(err, errlen, "sqlite %s: %s", path,
                   db != NULL ? sqlite3_errmsg(db) : "cannot open");
        goto out;
    }
    sqlite3_busy_timeout(db, SQLITE_BUSY_TIMEOUT_MS);
    if (sqlite3_prepare_v2(db, query_sql(table), -1, &s, NULL) != SQLITE_OK) {
        store_fail(err, errlen, "sqlite %s: %s", path, sqlite3_errmsg(db));
        goto out;
    }
    if (run_id != NULL)
        sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
    arr = cJSON_CreateArray();
    if (arr == NULL) {
        store_fail(err, errlen, "out of memory");
        goto out;
    }
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        cJSON *obj;

        if (++nrows > VG_AUDIT_QUERY_MAX_ROWS) {
            store_fail(err, errlen, "more than %d rows; narrow the query with a run id",
                       VG_AUDIT_QUERY_MAX_ROWS);
            goto out;
        }
        obj = row_object(s);
        if (obj == NULL) {
            store_fail(err, errlen, "out of memory");
            goto out;
        }
        cJSON_AddItemToArray(arr, obj);
    }
    if (rc != SQLITE_DONE) {
        store_fail(err, errlen, "sqlite %s: %s", path, sqlite3_errmsg(db));
        goto out;
    }
    *rows = arr;
    arr = NULL;
    ret = 0;
out:
    cJSON_Delete(arr);
    sqlite3_finalize(s);
    sqlite3_close_v2(db);
    return ret;
}

const struct store_ops store_sqlite_ops = {
    .name = "sqlite",
    .open = sqlite_open,
    .begin = sqlite_begin,
    .upsert_blocked = sqlite_upsert_blocked,
    .upsert_route = sqlite_upsert_route,
    .commit = sqlite_commit,
    .rollback = sqlite_rollback,
    .query = sqlite_query,
    .close = sqlite_close,
};
