/*
 * store_pg.c - the `postgresql://...` audit store (libpq).
 *
 * Guarantees: the schema of SPEC §6 with timestamptz times; values only ever travel as
 * parameters of prepared statements (never formatted into SQL); one flush is one transaction,
 * its upserts pipelined in batches (one round trip per PG_PIPELINE_BATCH rows, not per row);
 * a lost connection is re-established (PQreset) on the next flush and the statements prepared
 * again; every statement runs under a statement timeout so a stuck server cannot hold the
 * writer forever. Schema creation takes a transaction-scoped advisory lock, so instances that
 * start together do not race on CREATE TABLE.
 */
#include "audit/store.h"
#include "common/caps.h"
#include "common/timefmt.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#define PG_CONNECT_TIMEOUT_S   "5"
#define PG_TCP_USER_TIMEOUT_MS "15000"
#define PG_STATEMENT_TIMEOUT   "SET statement_timeout = 10000"
/* Arbitrary constant naming vaultgate's schema lock. */
#define PG_SCHEMA_LOCK_KEY "7405161702"

/* Upserts travel in pipelines of this many statements: one round trip per batch, not per row. */
#define PG_PIPELINE_BATCH 256

struct store {
    PGconn *conn;
    bool ready; /* session set up and statements prepared on this connection */
    bool piped; /* in pipeline mode (between the first upsert and commit/rollback) */
    int queued; /* statements sent since the last sync */
};

#define PG_ROUTE_CHECK "route IN ('direct', 'tunnel', 'refused', 'reported')"

static const char schema_sql[] =
    "BEGIN;"
    "SELECT pg_advisory_xact_lock(" PG_SCHEMA_LOCK_KEY ");"
    "CREATE TABLE IF NOT EXISTS blocked_host_log ("
    " user_id text NOT NULL,"
    " run_id text NOT NULL,"
    " host text NOT NULL,"
    " seen_count bigint NOT NULL CHECK (seen_count >= 0),"
    " first_seen timestamptz NOT NULL,"
    " last_seen timestamptz NOT NULL,"
    " source text NOT NULL CHECK (source IN ('proxy', 'local-egress', 'both')),"
    " PRIMARY KEY (user_id, run_id, host));"
    "CREATE TABLE IF NOT EXISTS egress_route_log ("
    " run_id text NOT NULL,"
    " host text NOT NULL,"
    " route text NOT NULL CHECK (" PG_ROUTE_CHECK "),"
    " count bigint NOT NULL CHECK (count >= 0),"
    " first_seen timestamptz NOT NULL,"
    " last_seen timestamptz NOT NULL,"
    " PRIMARY KEY (run_id, host, route));"
    /* a store made before the route `reported` (SPEC §12): its CHECK is replaced once */
    "DO $$ BEGIN"
    " IF EXISTS (SELECT 1 FROM pg_constraint"
    "  WHERE conrelid = 'egress_route_log'::regclass AND contype = 'c'"
    "  AND conname = 'egress_route_log_route_check'"
    "  AND pg_get_constraintdef(oid) NOT LIKE '%reported%') THEN"
    "  ALTER TABLE egress_route_log DROP CONSTRAINT egress_route_log_route_check;"
    "  ALTER TABLE egress_route_log ADD CONSTRAINT egress_route_log_route_check"
    "   CHECK (" PG_ROUTE_CHECK ");"
    " END IF;"
    " END $$;"
    "COMMIT;";

static const char up_blocked_sql[] =
    "INSERT INTO blocked_host_log AS t"
    " (user_id, run_id, host, seen_count, first_seen, last_seen, source)"
    " VALUES ($1, $2, $3, $4::bigint, $5::timestamptz, $6::timestamptz, $7)"
    " ON CONFLICT (user_id, run_id, host) DO UPDATE SET"
    " seen_count = t.seen_count + excluded.seen_count,"
    " first_seen = LEAST(t.first_seen, excluded.first_seen),"
    " last_seen = GREATEST(t.last_seen, excluded.last_seen),"
    " source = CASE WHEN t.source = excluded.source THEN t.source ELSE 'both' END";

static const char up_route_sql[] =
    "INSERT INTO egress_route_log AS t (run_id, host, route, count, first_seen, last_seen)"
    " VALUES ($1, $2, $3, $4::bigint, $5::timestamptz, $6::timestamptz)"
    " ON CONFLICT (run_id, host, route) DO UPDATE SET"
    " count = t.count + excluded.count,"
    " first_seen = LEAST(t.first_seen, excluded.first_seen),"
    " last_seen = GREATEST(t.last_seen, excluded.last_seen)";

#define PG_TIME(col)                                                                               \
    "to_char(" col " AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"') AS " col

static const char q_blocked_sql[] =
    "SELECT user_id, run_id, host, seen_count, " PG_TIME("first_seen") ", " PG_TIME(
        "last_seen") ", source FROM blocked_host_log WHERE $1::text IS NULL OR run_id = $1"
                     " ORDER BY host COLLATE \"C\", run_id COLLATE \"C\", user_id COLLATE \"C\" "
                     "LIMIT $2::bigint";

static const char q_route_sql[] =
    "SELECT run_id, host, route, count, " PG_TIME("first_seen") ", " PG_TIME(
        "last_seen") " FROM egress_route_log WHERE $1::text IS NULL OR run_id = $1"
                     " ORDER BY host COLLATE \"C\", route COLLATE \"C\", run_id COLLATE \"C\" "
                     "LIMIT $2::bigint";

static const char q_seen_sql[] =
    "SELECT host, route, count FROM ("
    "SELECT host, route, sum(count) AS count FROM egress_route_log"
    " WHERE route IN ('reported', 'refused') AND ($1::text IS NULL OR run_id = $1)"
    " GROUP BY host, route"
    " UNION ALL SELECT host, text 'blocked', sum(seen_count) FROM blocked_host_log"
    " WHERE $1::text IS NULL OR run_id = $1 GROUP BY host) AS seen"
    " ORDER BY host COLLATE \"C\", route COLLATE \"C\" LIMIT $2::bigint";

/* The statement that reads table for audit_query. */
static const char *query_sql(enum audit_table table)
{
    if (table == AUDIT_TABLE_BLOCKED)
        return q_blocked_sql;
    return table == AUDIT_TABLE_ROUTES ? q_route_sql : q_seen_sql;
}

/* libpq messages end in newlines and may span lines: one line for err. */
static int pg_fail(char *err, size_t errlen, const char *what, const char *msg)
{
    char line[512];
    size_t n = 0;

    /* Control characters (newlines, tabs) become one space. */
    for (; msg != NULL && *msg != '\0' && n < sizeof(line) - 1; msg++) {
        int ctl = (unsigned char)*msg < 0x20;

        if (!ctl)
            line[n++] = *msg;
        else if (n > 0 && line[n - 1] != ' ')
            line[n++] = ' ';
    }
    while (n > 0 && line[n - 1] == ' ')
        n--;
    line[n] = '\0';
    return store_fail(err, errlen, "postgresql %s: %s", what, n > 0 ? line : "failed");
}

/* Runs sql without parameters; expect COMMAND_OK or TUPLES_OK. */
static int exec_simple(PGconn *conn, const char *sql, const char *what, char *err, size_t errlen)
{
    PGresult *res = PQexec(conn, sql);
    ExecStatusType st = PQresultStatus(res);
    int ret = 0;

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        ret = pg_fail(err, errlen, what, PQerrorMessage(conn));
    PQclear(res);
    return ret;
}

/* Server notices ("relation already exists, skipping") are not errors: drop them. */
static void pg_quiet(void *arg, const char *message)
{
}

/* Connects with vaultgate's defaults; anything the URI itself sets wins (it comes last). */
static PGconn *pg_connect(const char *url, char *err, size_t errlen)
{
    /* Keepalives and tcp_user_timeout: a peer that vanished without a reset is noticed. */
    const char *const keys[] = {"connect_timeout",
                                "application_name",
                                "keepalives",
                                "keepalives_idle",
                                "keepalives_interval",
                                "keepalives_count",
                                "tcp_user_timeout",
                                "dbname",
                                NULL};
    const char *const vals[] = {PG_CONNECT_TIMEOUT_S,   "vaultgate", "1", "10", "5", "3",
                                PG_TCP_USER_TIMEOUT_MS, url,         NULL};
    PGconn *conn = PQconnectdbParams(keys, vals, 1);

    if (conn == NULL) {
        store_fail(err, errlen, "postgresql: out of memory");
        return NULL;
    }
    if (PQstatus(conn) != CONNECTION_OK) {
        pg_fail(err, errlen, "connect", PQerrorMessage(conn));
        PQfinish(conn);
        return NULL;
    }
    PQsetNoticeProcessor(conn, pg_quiet, NULL);
    if (exec_simple(conn, PG_STATEMENT_TIMEOUT, "session", err, errlen) < 0) {
        PQfinish(conn);
        return NULL;
    }
    return conn;
}

static int pg_prepare_all(struct store *st, char *err, size_t errlen)
{
    static const struct {
        const char *name, *sql;
        int nparams;
    } stmts[] = {
        {"vg_up_blocked", up_blocked_sql, 7},
        {"vg_up_route", up_route_sql, 6},
    };

    for (size_t i = 0; i < sizeof(stmts) / sizeof(stmts[0]); i++) {
        PGresult *res = PQprepare(st->conn, stmts[i].name, stmts[i].sql, stmts[i].nparams, NULL);
        int ok = PQresultStatus(res) == PGRES_COMMAND_OK;

        PQclear(res);
        if (!ok)
            return pg_fail(err, errlen, "prepare", PQerrorMessage(st->conn));
    }
    st->ready = true;
    return 0;
}

static void pg_close(struct store **stp)
{
    struct store *st = *stp;

    if (st == NULL)
        return;
    PQfinish(st->conn);
    free(st);
    *stp = NULL;
}

static struct store *pg_open(const char *url, char *err, size_t errlen)
{
    struct store *st = calloc(1, sizeof(*st));

    if (st == NULL) {
        store_fail(err, errlen, "out of memory");
        goto fail;
    }
    st->conn = pg_connect(url, err, errlen);
    if (st->conn == NULL)
        goto fail;
    if (exec_simple(st->conn, schema_sql, "schema", err, errlen) < 0 ||
        pg_prepare_all(st, err, errlen) < 0)
        goto fail;
    return st;
fail:
    pg_close(&st);
    return NULL;
}

/* Makes the connection usable again after the server went away (or restarted). */
static int pg_revive(struct store *st, char *err, size_t errlen)
{
    if (PQstatus(st->conn) != CONNECTION_OK) {
        st->ready = false;
        st->piped = false;
        st->queued = 0;
        PQreset(st->conn);
        if (PQstatus(st->conn) != CONNECTION_OK)
            return pg_fail(err, errlen, "reconnect", PQerrorMessage(st->conn));
    }
    if (!st->ready) {
        if (exec_simple(st->conn, PG_STATEMENT_TIMEOUT, "session", err, errlen) < 0)
            return -1;
        return pg_prepare_all(st, err, errlen);
    }
    return 0;
}

static int pg_begin(struct store *st, char *err, size_t errlen)
{
    if (pg_revive(st, err, errlen) < 0)
        return -1;
    if (exec_simple(st->conn, "BEGIN", "begin", err, errlen) == 0)
        return 0;
    /* A server restart is only noticed on first use: reconnect once, right away. */
    if (PQstatus(st->conn) == CONNECTION_OK)
        return -1;
    if (pg_revive(st, err, errlen) < 0)
        return -1;
    return exec_simple(st->conn, "BEGIN", "begin", err, errlen);
}

/*
 * Syncs the pipeline and reads the result of every statement sent since the last sync. The
 * first failure is reported; the server skips the rest (PIPELINE_ABORTED) up to the sync.
 */
static int pg_drain(struct store *st, char *err, size_t errlen)
{
    int ret = 0, nulls = 0;

    if (PQpipelineSync(st->conn) != 1) {
        ret = pg_fail(err, errlen, "pipeline", PQerrorMessage(st->conn));
        goto out;
    }
    for (;;) {
        PGresult *res = PQgetResult(st->conn);
        ExecStatusType rs;

        if (res == NULL) {
            /* One NULL ends each statement's results; more than that, or a dead connection,
             * means the sync will never come. */
            if (PQstatus(st->conn) != CONNECTION_OK || ++nulls > st->queued) {
                if (ret == 0)
                    ret = pg_fail(err, errlen, "pipeline", PQerrorMessage(st->conn));
                break;
            }
            continue;
        }
        rs = PQresultStatus(res);
        if (rs != PGRES_COMMAND_OK && rs != PGRES_PIPELINE_SYNC && ret == 0)
            ret = pg_fail(err, errlen, "upsert",
                          rs == PGRES_PIPELINE_ABORTED ? "aborted" : PQresultErrorMessage(res));
        PQclear(res);
        if (rs == PGRES_PIPELINE_SYNC)
            break;
    }
out:
    st->queued = 0;
    if (PQstatus(st->conn) != CONNECTION_OK)
        st->ready = false;
    return ret;
}

/* Leaves pipeline mode (reading what is still queued); errors were reported already. */
static void pg_unpipe(struct store *st)
{
    char ignored[8];

    if (!st->piped)
        return;
    if (st->queued > 0 && PQstatus(st->conn) == CONNECTION_OK)
        pg_drain(st, ignored, sizeof(ignored));
    PQexitPipelineMode(st->conn);
    st->piped = false;
    st->queued = 0;
}

static int exec_prepared(struct store *st, const char *name, int n, const char *const *vals,
                         char *err, size_t errlen)
{
    if (!st->piped) {
        if (PQenterPipelineMode(st->conn) != 1)
            return pg_fail(err, errlen, "pipeline", PQerrorMessage(st->conn));
        st->piped = true;
    }
    if (PQsendQueryPrepared(st->conn, name, n, vals, NULL, NULL, 0) != 1) {
        if (PQstatus(st->conn) != CONNECTION_OK)
            st->ready = false;
        return pg_fail(err, errlen, "upsert", PQerrorMessage(st->conn));
    }
    if (++st->queued >= PG_PIPELINE_BATCH)
        return pg_drain(st, err, errlen);
    return 0;
}

static int pg_upsert_blocked(struct store *st, const struct store_blocked_row *r, char *err,
                             size_t errlen)
{
    char count[24], first[TIMEFMT_BUFSZ], last[TIMEFMT_BUFSZ];
    const char *vals[7];

    snprintf(count, sizeof(count), "%llu", (unsigned long long)r->count);
    vals[0] = r->user_id;
    vals[1] = r->run_id;
    vals[2] = r->host;
    vals[3] = count;
    vals[4] = timefmt_iso8601(r->first_ms, first, sizeof(first));
    vals[5] = timefmt_iso8601(r->last_ms, last, sizeof(last));
    vals[6] = r->source;
    return exec_prepared(st, "vg_up_blocked", 7, vals, err, errlen);
}

static int pg_upsert_route(struct store *st, const struct store_route_row *r, char *err,
                           size_t errlen)
{
    char count[24], first[TIMEFMT_BUFSZ], last[TIMEFMT_BUFSZ];
    const char *vals[6];

    snprintf(count, sizeof(count), "%llu", (unsigned long long)r->count);
    vals[0] = r->run_id;
    vals[1] = r->host;
    vals[2] = r->route;
    vals[3] = count;
    vals[4] = timefmt_iso8601(r->first_ms, first, sizeof(first));
    vals[5] = timefmt_iso8601(r->last_ms, last, sizeof(last));
    return exec_prepared(st, "vg_up_route", 6, vals, err, errlen);
}

static int pg_commit(struct store *st, char *err, size_t errlen)
{
    PGresult *res;
    int ret = 0;

    if (st->piped) {
        if (st->queued > 0 && pg_drain(st, err, errlen) < 0)
            return -1;
        pg_unpipe(st);
    }
    res = PQexec(st->conn, "COMMIT");
    /* An aborted transaction "commits" as ROLLBACK: that is a failure too. */
    if (PQresultStatus(res) != PGRES_COMMAND_OK || strcmp(PQcmdStatus(res), "COMMIT") != 0)
        ret = pg_fail(err, errlen, "commit", PQerrorMessage(st->conn));
    PQclear(res);
    if (PQstatus(st->conn) != CONNECTION_OK)
        st->ready = false;
    return ret;
}

static void pg_rollback(struct store *st)
{
    pg_unpipe(st);
    if (PQstatus(st->conn) == CONNECTION_OK && PQtransactionStatus(st->conn) != PQTRANS_IDLE)
        PQclear(PQexec(st->conn, "ROLLBACK"));
    if (PQstatus(st->conn) != CONNECTION_OK)
        st->ready = false;
}

static int is_count_column(const char *name)
{
    return strcmp(name, "seen_count") == 0 || strcmp(name, "count") == 0;
}

/* Row i of res as an object keyed by column name; NULL when out of memory. */
static cJSON *row_object(const PGresult *res, int i)
{
    cJSON *obj = cJSON_CreateObject();
    int n = PQnfields(res);

    for (int c = 0; obj != NULL && c < n; c++) {
        const char *name = PQfname(res, c);
        const char *val = PQgetvalue(res, i, c);
        cJSON *v =
            is_count_column(name) ? cJSON_CreateNumber(strtod(val, NULL)) : cJSON_CreateString(val);

        if (v == NULL || !cJSON_AddItemToObject(obj, name, v)) {
            cJSON_Delete(v);
            cJSON_Delete(obj);
            obj = NULL;
        }
    }
    return obj;
}

static int pg_query(const char *url, enum audit_table table, const char *run_id, cJSON **rows,
                    char *err, size_t errlen)
{
    PGconn *conn = NULL;
    PGresult *res = NULL;
    cJSON *arr = NULL;
    char limit[24];
    const char *vals[2] = {run_id, limit};
    int ret = -1, n;

    /* One row past the cap tells "too many" from "exactly the cap". */
    snprintf(limit, sizeof(limit), "%d", VG_AUDIT_QUERY_MAX_ROWS + 1);
    conn = pg_connect(url, err, errlen);
    if (conn == NULL)
        goto out;
    res = PQexecParams(conn, query_sql(table), 2, NULL, vals, NULL, NULL, 0);
    if (PQresultStatus(res) != PGRES_TUPLES_OK) {
        pg_fail(err, errlen, "query", PQerrorMessage(conn));
        goto out;
    }
    n = PQntuples(res);
    if (n > VG_AUDIT_QUERY_MAX_ROWS) {
        store_fail(err, errlen, "more than %d rows; narrow the query with a run id",
                   VG_AUDIT_QUERY_MAX_ROWS);
        goto out;
    }
    arr = cJSON_CreateArray();
    for (int i = 0; arr != NULL && i < n; i++) {
        cJSON *obj = row_object(res, i);

        if (obj == NULL) {
            cJSON_Delete(arr);
            arr = NULL;
            break;
        }
        cJSON_AddItemToArray(arr, obj);
    }
    if (arr == NULL) {
        store_fail(err, errlen, "out of memory");
        goto out;
    }
    *rows = arr;
    arr = NULL;
    ret = 0;
out:
    cJSON_Delete(arr);
    PQclear(res);
    PQfinish(conn);
    return ret;
}

const struct store_ops store_pg_ops = {
    .name = "postgresql",
    .open = pg_open,
    .begin = pg_begin,
    .upsert_blocked = pg_upsert_blocked,
    .upsert_route = pg_upsert_route,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .query = pg_query,
    .close = pg_close,
};
