/*
 * test_audit.c - the audit module (audit/audit.c, audit/store_sqlite.c): aggregation, the SQLite
 * store, URL display.
 *
 * PostgreSQL is exercised by tests/integration/cases/test_audit_store.py, which can start a
 * throwaway server; these cases need nothing but a temp dir.
 */
#include "audit/audit.h"
#include "audit/log.h"
#include "audit/store.h"
#include "common/caps.h"
#include "common/timefmt.h"

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ---- */

struct tmpstore {
    char dir[64];
    char url[128];
};

static void tmpstore_make(struct tmpstore *t)
{
    snprintf(t->dir, sizeof(t->dir), "/tmp/vg-audit-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(t->dir));
    snprintf(t->url, sizeof(t->url), "sqlite:%s/audit.db", t->dir);
}

static void tmpstore_remove(struct tmpstore *t)
{
    static const char *const names[] = {"audit.db", "audit.db-wal", "audit.db-shm"};
    char p[160];

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", t->dir, names[i]);
        unlink(p);
    }
    rmdir(t->dir);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};

    nanosleep(&ts, NULL);
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static cJSON *query(const char *url, enum audit_table table, const char *run)
{
    char err[256];
    cJSON *rows = NULL;

    ck_assert_msg(audit_query(url, table, run, &rows, err, sizeof(err)) == 0, "query: %s", err);
    ck_assert(cJSON_IsArray(rows));
    return rows;
}

/* The row whose host (and route, when route != NULL) match; NULL if none. */
static cJSON *find_row(cJSON *rows, const char *host, const char *route)
{
    cJSON *r;

    cJSON_ArrayForEach(r, rows)
    {
        const char *h = cJSON_GetStringValue(cJSON_GetObjectItem(r, "host"));
        const char *rt = cJSON_GetStringValue(cJSON_GetObjectItem(r, "route"));

        if (h != NULL && strcmp(h, host) == 0 && (route == NULL || (rt && !strcmp(rt, route))))
            return r;
    }
    return NULL;
}

static double num(cJSON *row, const char *key)
{
    cJSON *v = cJSON_GetObjectItem(row, key);

    ck_assert_msg(cJSON_IsNumber(v), "%s is not a number", key);
    return v->valuedouble;
}

static const char *str(cJSON *row, const char *key)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(row, key));

    ck_assert_msg(s != NULL, "%s is not a string", key);
    return s;
}

/* Polls until host has a blocked row with seen_count >= want; returns ms waited or -1. */
static int wait_blocked(const char *url, const char *host, double want, int max_ms)
{
    int64_t start = mono_ms();

    for (;;) {
        cJSON *rows = query(url, AUDIT_TABLE_BLOCKED, NULL);
        cJSON *r = find_row(rows, host, NULL);
        int ok = r != NULL && num(r, "seen_count") >= want;

        cJSON_Delete(rows);
        if (ok)
            return (int)(mono_ms() - start);
        if (mono_ms() - start > max_ms)
            return -1;
        sleep_ms(10);
    }
}

static struct audit *open_started(const char *url, enum audit_source src, int nworkers)
{
    char err[256];
    struct audit *a = audit_open(url, src, "u-1", "run-1", nworkers, err, sizeof(err));

    ck_assert_msg(a != NULL, "open: %s", err);
    ck_assert_msg(audit_start(a, err, sizeof(err)) == 0, "start: %s", err);
    return a;
}

/* ---- store upsert semantics ---- */

/* One flush to the store: begin, the rows given (NULL: none of that table), commit. */
static void flush_rows(struct store *st, const struct store_blocked_row *b,
                       const struct store_route_row *rt)
{
    char err[256];

    ck_assert_int_eq(store_sqlite_ops.begin(st, err, sizeof(err)), 0);
    if (b != NULL)
        ck_assert_int_eq(store_sqlite_ops.upsert_blocked(st, b, err, sizeof(err)), 0);
    if (rt != NULL)
        ck_assert_int_eq(store_sqlite_ops.upsert_route(st, rt, err, sizeof(err)), 0);
    ck_assert_int_eq(store_sqlite_ops.commit(st, err, sizeof(err)), 0);
}

START_TEST(sqlite_upsert_semantics)
{
    struct tmpstore t;
    char err[256];
    struct store *st;
    cJSON *rows, *r;
    struct store_blocked_row b = {"u-1", "run-1", "evil.example", "proxy", 2, 2000, 3000};
    struct store_route_row rt = {"run-1", "evil.example", "refused", 2, 2000, 3000};

    tmpstore_make(&t);
    st = store_sqlite_ops.open(t.url, err, sizeof(err));
    ck_assert_msg(st != NULL, "%s", err);
    flush_rows(st, &b, &rt);

    /* Counts grow; first_seen keeps the earliest, last_seen the latest. */
    b.count = 3, b.first_ms = 1000, b.last_ms = 2500;
    rt.count = 3, rt.first_ms = 2500, rt.last_ms = 9000;
    flush_rows(st, &b, &rt);

    rows = query(t.url, AUDIT_TABLE_BLOCKED, "run-1");
    ck_assert_int_eq(cJSON_GetArraySize(rows), 1);
    r = find_row(rows, "evil.example", NULL);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq((int)num(r, "seen_count"), 5);
    ck_assert_str_eq(str(r, "first_seen"), "1970-01-01T00:00:01.000Z");
    ck_assert_str_eq(str(r, "last_seen"), "1970-01-01T00:00:03.000Z");
    ck_assert_str_eq(str(r, "source"), "proxy");
    ck_assert_str_eq(str(r, "user_id"), "u-1");
    ck_assert_str_eq(str(r, "run_id"), "run-1");
    cJSON_Delete(rows);

    rows = query(t.url, AUDIT_TABLE_ROUTES, NULL);
    r = find_row(rows, "evil.example", "refused");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq((int)num(r, "count"), 5);
    ck_assert_str_eq(str(r, "first_seen"), "1970-01-01T00:00:02.000Z");
    ck_assert_str_eq(str(r, "last_seen"), "1970-01-01T00:00:09.000Z");
    cJSON_Delete(rows);

    /* A local-egress row meeting the proxy's: both; and it stays both. */
    b.source = "local-egress";
    b.count = 1;
    flush_rows(st, &b, NULL);
    b.source = "proxy";
    flush_rows(st, &b, NULL);
    rows = query(t.url, AUDIT_TABLE_BLOCKED, NULL);
    r = find_row(rows, "evil.example", NULL);
    ck_assert_str_eq(str(r, "source"), "both");
    ck_assert_int_eq((int)num(r, "seen_count"), 7);
    cJSON_Delete(rows);

    /* Another run is another row, and the run filter tells them apart. */
    b.run_id = "run-2";
    flush_rows(st, &b, NULL);
    rows = query(t.url, AUDIT_TABLE_BLOCKED, NULL);
    ck_assert_int_eq(cJSON_GetArraySize(rows), 2);
    cJSON_Delete(rows);
    rows = query(t.url, AUDIT_TABLE_BLOCKED, "run-2");
    ck_assert_int_eq(cJSON_GetArraySize(rows), 1);
    ck_assert_int_eq((int)num(cJSON_GetArrayItem(rows, 0), "seen_count"), 1);
    cJSON_Delete(rows);

    /* A rolled-back flush leaves nothing behind. */
    b.run_id = "run-3";
    ck_assert_int_eq(store_sqlite_ops.begin(st, err, sizeof(err)), 0);
    ck_assert_int_eq(store_sqlite_ops.upsert_blocked(st, &b, err, sizeof(err)), 0);
    store_sqlite_ops.rollback(st);
    rows = query(t.url, AUDIT_TABLE_BLOCKED, "run-3");
    ck_assert_int_eq(cJSON_GetArraySize(rows), 0);
    cJSON_Delete(rows);

    store_sqlite_ops.close(&st);
    ck_assert_ptr_null(st);
    tmpstore_remove(&t);
}
END_TEST

START_TEST(query_ordered_by_host_and_route)
{
    struct tmpstore t;
    struct audit *a;
    cJSON *rows;
    const char *hosts[] = {"c.example", "a.example", "b.example"};

    tmpstore_make(&t);
    a = open_started(t.url, AUDIT_SOURCE_PROXY, 1);
    for (int i = 0; i < 3; i++) {
        audit_blocked(a, 0, hosts[i]);
        audit_route(a, 0, hosts[i], AUDIT_ROUTE_REFUSED);
        audit_route(a, 0, hosts[i], AUDIT_ROUTE_DIRECT);
    }
    audit_close(&a);
    rows = query(t.url, AUDIT_TABLE_BLOCKED, NULL);
    ck_assert_int_eq(cJSON_GetArraySize(rows), 3);
    ck_assert_str_eq(str(cJSON_GetArrayItem(rows, 0), "host"), "a.example");
    ck_assert_str_eq(str(cJSON_GetArrayItem(rows, 2), "host"), "c.example");
    cJSON_Delete(rows);
    rows = query(t.url, AUDIT_TABLE_ROUTES, "run-1");
    ck_assert_int_eq(cJSON_GetArraySize(rows), 6);
    ck_assert_str_eq(str(cJSON_GetArrayItem(rows, 0), "host"), "a.example");
    ck_assert_str_eq(str(cJSON_GetArrayItem(rows, 0), "route"), "direct");
    ck_assert_str_eq(str(cJSON_GetArrayItem(rows, 1), "route"), "refused");
    ck_assert_str_eq(str(cJSON_GetArrayItem(rows, 5), "host"), "c.example");
    /* Columns of SPEC §6, nothing else. */
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetArrayItem(rows, 0)), 6);
    cJSON_Delete(rows);
    tmpstore_remove(&t);
}
END_TEST

/* ---- aggregation ---- */

struct hammer {
    struct audit *a;
    int worker;
};

#define HAMMER_HOSTS  50
#define HAMMER_REPEAT 200

static void *hammer_main(void *arg)
{
    struct hammer *h = arg;
    char host[64];

    for (int r = 0; r < HAMMER_REPEAT; r++) {
        for (int i = 0; i < HAMMER_HOSTS; i++) {
            snprintf(host, sizeof(host), "h%02d.example", i);
            audit_blocked(h->a, h->worker, host);
            audit_route(h->a, h->worker, host, (enum audit_route)(i % 3));
        }
    }
    return NULL;
}

START_TEST(aggregation_across_workers)
{
    struct tmpstore t;
    struct hammer hs[4];
    pthread_t th[4];
    struct audit *a;
    cJSON *rows, *r;
    int64_t before = timefmt_now_ms(), after;
    char first[TIMEFMT_BUFSZ], last[TIMEFMT_BUFSZ];

    tmpstore_make(&t);
    a = open_started(t.url, AUDIT_SOURCE_PROXY, 4);
    for (int i = 0; i < 4; i++) {
        /* Worker 3 passes an out-of-range index: it must count too (shared slot). */
        hs[i].a = a;
        hs[i].worker = i < 3 ? i : 99;
        pthread_create(&th[i], NULL, hammer_main, &hs[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    after = timefmt_now_ms();
    audit_close(&a);
    timefmt_iso8601(before, first, sizeof(first));
    timefmt_iso8601(after, last, sizeof(last));

    rows = query(t.url, AUDIT_TABLE_BLOCKED, "run-1");
    ck_assert_int_eq(cJSON_GetArraySize(rows), HAMMER_HOSTS);
    cJSON_ArrayForEach(r, rows)
    {
        ck_assert_int_eq((int)num(r, "seen_count"), 4 * HAMMER_REPEAT);
        ck_assert_str_le(first, str(r, "first_seen"));
        ck_assert_str_le(str(r, "first_seen"), str(r, "last_seen"));
        ck_assert_str_le(str(r, "last_seen"), last);
    }
    cJSON_Delete(rows);
    rows = query(t.url, AUDIT_TABLE_ROUTES, "run-1");
    ck_assert_int_eq(cJSON_GetArraySize(rows), HAMMER_HOSTS);
    r = find_row(rows, "h04.example", "tunnel");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq((int)num(r, "count"), 4 * HAMMER_REPEAT);
    cJSON_Delete(rows);
    tmpstore_remove(&t);
}
END_TEST

START_TEST(first_block_is_immediate)
{
    struct tmpstore t;
    struct audit *a;
    int waited;

    tmpstore_make(&t);
    a = open_started(t.url, AUDIT_SOURCE_PROXY, 2);
    /* Let the writer settle so the periodic flush (1 s) is far away. */
    sleep_ms(50);
    audit_blocked(a, 1, "first.example");
    waited = wait_blocked(t.url, "first.example", 1, 1500);
    ck_assert_msg(waited >= 0 && waited < 250, "first block took %d ms", waited);
    /* Further counts for a known host ride the periodic flush: within about a second. */
    audit_blocked(a, 0, "first.example");
    waited = wait_blocked(t.url, "first.example", 2, 3000);
    ck_assert_msg(waited >= 0 && waited <= 1300, "periodic flush took %d ms", waited);
    audit_close(&a);
    tmpstore_remove(&t);
}
END_TEST

START_TEST(flush_on_close)
{
    struct tmpstore t;
    struct audit *a;
    struct audit_status st;
    cJSON *rows;
    char err[256];

    tmpstore_make(&t);
    a = open_started(t.url, AUDIT_SOURCE_PROXY, 1);
    for (int i = 0; i < 1000; i++)
        audit_route(a, 0, "ok.example", AUDIT_ROUTE_DIRECT);
    audit_status(a, &st);
    ck_assert(st.enabled);
    ck_assert(st.healthy);
    ck_assert_str_eq(st.store, t.url);
    audit_close(&a);
    ck_assert_ptr_null(a);
    rows = query(t.url, AUDIT_TABLE_ROUTES, NULL);
    ck_assert_int_eq((int)num(find_row(rows, "ok.example", "direct"), "count"), 1000);
    cJSON_Delete(rows);

    /* Never started: close still writes what was counted. */
    a = audit_open(t.url, AUDIT_SOURCE_PROXY, "u-1", "run-1", 1, err, sizeof(err));
    ck_assert_ptr_nonnull(a);
    audit_route(a, 0, "ok.example", AUDIT_ROUTE_DIRECT);
    audit_close(&a);
    rows = query(t.url, AUDIT_TABLE_ROUTES, NULL);
    ck_assert_int_eq((int)num(find_row(rows, "ok.example", "direct"), "count"), 1001);
    cJSON_Delete(rows);
    tmpstore_remove(&t);
}
END_TEST

START_TEST(off_store)
{
    char err[256];
    struct audit *a = audit_open("off", AUDIT_SOURCE_PROXY, "u-1", "run-1", 2, err, sizeof(err));
    struct audit_status st;
    cJSON *rows;

    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(audit_start(a, err, sizeof(err)), 0);
    audit_blocked(a, 0, "x.example");
    audit_route(a, 1, "x.example", AUDIT_ROUTE_REFUSED);
    audit_status(a, &st);
    ck_assert(!st.enabled);
    ck_assert(st.healthy);
    ck_assert_uint_eq(st.pending, 0);
    ck_assert_str_eq(st.store, "off");
    audit_close(&a);
    ck_assert_int_eq(audit_query("off", AUDIT_TABLE_BLOCKED, NULL, &rows, err, sizeof(err)), 0);
    ck_assert_int_eq(cJSON_GetArraySize(rows), 0);
    cJSON_Delete(rows);
}
END_TEST

START_TEST(open_errors)
{
    char err[256] = "";
    cJSON *rows = NULL;

    ck_assert_ptr_null(
        audit_open("mysql://root:hunter2@db/x", AUDIT_SOURCE_PROXY, "u", "r", 1, err, sizeof(err)));
    ck_assert(err[0] != '\0');
    ck_assert_msg(strstr(err, "hunter2") == NULL, "password in error: %s", err);
    ck_assert_ptr_null(audit_open("sqlite:/nonexistent-dir/x/audit.db", AUDIT_SOURCE_PROXY, "u",
                                  "r", 1, err, sizeof(err)));
    ck_assert_ptr_null(audit_open("sqlite:", AUDIT_SOURCE_PROXY, "u", "r", 1, err, sizeof(err)));
    /* The reader never creates a store. */
    ck_assert_int_eq(audit_query("sqlite:/tmp/vg-audit-does-not-exist.db", AUDIT_TABLE_BLOCKED,
                                 NULL, &rows, err, sizeof(err)),
                     -1);
    ck_assert_int_eq(access("/tmp/vg-audit-does-not-exist.db", F_OK), -1);
    ck_assert_ptr_null(rows);
}
END_TEST

START_TEST(host_bytes_sanitised)
{
    struct tmpstore t;
    struct audit *a;
    cJSON *rows;

    tmpstore_make(&t);
    a = open_started(t.url, AUDIT_SOURCE_LOCAL_EGRESS, 1);
    audit_blocked(a, 0, "bad\r\nhost\x7f\xc3\xa9");
    audit_blocked(a, 0, "");
    audit_close(&a);
    rows = query(t.url, AUDIT_TABLE_BLOCKED, NULL);
    ck_assert_ptr_nonnull(find_row(rows, "bad??host???", NULL));
    ck_assert_ptr_nonnull(find_row(rows, "(none)", NULL));
    ck_assert_str_eq(str(find_row(rows, "(none)", NULL), "source"), "local-egress");
    cJSON_Delete(rows);
    tmpstore_remove(&t);
}
END_TEST

/* A store that fails every write while `failing` is set, in front of SQLite. */
static atomic_int failing;
static atomic_int begins;

static int flaky_begin(struct store *st, char *err, size_t errlen)
{
    atomic_fetch_add(&begins, 1);
    if (atomic_load(&failing))
        return store_fail(err, errlen, "flaky: store down");
    return store_sqlite_ops.begin(st, err, errlen);
}

START_TEST(write_failure_keeps_counts)
{
    struct store_ops flaky = store_sqlite_ops;
    struct tmpstore t;
    struct audit *a;
    struct audit_status st;
    char err[256];
    cJSON *rows;
    int64_t start;

    flaky.begin = flaky_begin;
    tmpstore_make(&t);
    a = audit_open_ops(&flaky, t.url, AUDIT_SOURCE_PROXY, "u-1", "run-1", 2, err, sizeof(err));
    ck_assert_msg(a != NULL, "%s", err);
    atomic_store(&failing, 1);
    ck_assert_int_eq(audit_start(a, err, sizeof(err)), 0);
    for (int i = 0; i < 10; i++)
        audit_blocked(a, i % 2, "down.example");
    sleep_ms(900);
    audit_status(a, &st);
    ck_assert(!st.healthy);
    ck_assert_uint_eq(st.pending, 10);
    /* Backoff 250, 500, ...: a handful of attempts in 0.9 s, not a busy loop. */
    ck_assert_msg(atomic_load(&begins) >= 2 && atomic_load(&begins) <= 5, "%d attempts",
                  atomic_load(&begins));
    audit_blocked(a, 0, "down.example");
    atomic_store(&failing, 0);
    start = mono_ms();
    do {
        sleep_ms(20);
        audit_status(a, &st);
    } while ((!st.healthy || st.pending > 0) && mono_ms() - start < 3000);
    ck_assert(st.healthy);
    ck_assert_uint_eq(st.pending, 0);
    audit_close(&a);
    rows = query(t.url, AUDIT_TABLE_BLOCKED, NULL);
    ck_assert_int_eq((int)num(find_row(rows, "down.example", NULL), "seen_count"), 11);
    cJSON_Delete(rows);
    tmpstore_remove(&t);
}
END_TEST

START_TEST(close_gives_up_when_store_stays_down)
{
    struct store_ops flaky = store_sqlite_ops;
    struct tmpstore t;
    struct audit *a;
    char err[256];
    int64_t start;

    flaky.begin = flaky_begin;
    tmpstore_make(&t);
    a = audit_open_ops(&flaky, t.url, AUDIT_SOURCE_PROXY, "u-1", "run-1", 1, err, sizeof(err));
    ck_assert_ptr_nonnull(a);
    atomic_store(&failing, 1);
    ck_assert_int_eq(audit_start(a, err, sizeof(err)), 0);
    audit_blocked(a, 0, "never.example");
    start = mono_ms();
    audit_close(&a);
    ck_assert_msg(mono_ms() - start < 7000, "close took %lld ms", (long long)(mono_ms() - start));
    ck_assert_ptr_null(a);
    tmpstore_remove(&t);
}
END_TEST

START_TEST(url_display)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"off", "off"},
        {"sqlite:./var/audit.db", "sqlite:./var/audit.db"},
        {"postgresql://user:pass@host/db", "postgresql://user:***@host/db"},
        {"postgres://user:p%40ss@host:5432/db?sslmode=require",
         "postgres://user:***@host:5432/db?sslmode=require"},
        {"postgresql://user@host/db", "postgresql://user@host/db"},
        {"postgresql://host/db?user=u&password=secret&sslmode=verify-full",
         "postgresql://host/db?user=u&password=***&sslmode=verify-full"},
        {"postgresql://u:a:b@c@host/db", "postgresql://u:***@host/db"},
        {"postgresql:///db?host=/run/pg&password=x", "postgresql:///db?host=/run/pg&password=***"},
        {"host=db user=vg password=secret dbname=audit",
         "host=db user=vg password=*** dbname=audit"},
        {"host=db password = 'se cret\\' x' dbname=audit", "host=db password = *** dbname=audit"},
        {"sslpassword=k host=db", "sslpassword=*** host=db"},
        {"postgresql://u:pw@host/db#frag", "postgresql://u:***@host/db#frag"},
    };
    char out[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        audit_url_display(cases[i].in, out, sizeof(out));
        ck_assert_msg(strcmp(out, cases[i].out) == 0, "%s -> %s (want %s)", cases[i].in, out,
                      cases[i].out);
    }
    /* Truncation never leaks the password. */
    audit_url_display("postgresql://user:supersecret@host/db", out, 24);
    ck_assert_ptr_null(strstr(out, "supersecret"));
    ck_assert_ptr_null(strstr(out, "super"));
    ck_assert_str_eq(audit_route_name(AUDIT_ROUTE_TUNNEL), "tunnel");
    ck_assert_str_eq(audit_source_name(AUDIT_SOURCE_LOCAL_EGRESS), "local-egress");
}
END_TEST

Suite *suite_audit(void);
Suite *suite_audit(void)
{
    Suite *s = suite_create("audit");
    TCase *store = tcase_create("store");
    TCase *agg = tcase_create("aggregate");
    TCase *misc = tcase_create("misc");

    log_set_level(LOG_ERROR);
    tcase_set_timeout(store, 30);
    tcase_set_timeout(agg, 30);
    tcase_add_test(store, sqlite_upsert_semantics);
    tcase_add_test(store, query_ordered_by_host_and_route);
    tcase_add_test(agg, aggregation_across_workers);
    tcase_add_test(agg, first_block_is_immediate);
    tcase_add_test(agg, flush_on_close);
    tcase_add_test(agg, off_store);
    tcase_add_test(agg, host_bytes_sanitised);
    tcase_add_test(agg, write_failure_keeps_counts);
    tcase_add_test(agg, close_gives_up_when_store_stays_down);
    tcase_add_test(misc, open_errors);
    tcase_add_test(misc, url_display);
    suite_add_tcase(s, store);
    suite_add_tcase(s, agg);
    suite_add_tcase(s, misc);
    return s;
}
