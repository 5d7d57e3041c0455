/*
 * audit_drive.c - drives audit.c from several threads for the integration cases.
 *
 * audit_drive --store URL [--source proxy|local-egress] [--user ID] [--run ID] [--threads N]
 *             [--hosts N] [--repeat N] [--rounds N] [--interval-ms N]
 *             [--route direct|tunnel|refused|reported] [--prefix P] [--suffix S]
 *             [--blocked 0|1] [--stop-file PATH]
 *
 * Each round, every thread t (worker t) records, for each host <P>NNNN.<S> (S: example),
 * `repeat` blocks and `repeat` routes. So each host ends with threads*repeat*rounds counts in
 * both tables; with --route reported (or --blocked 0) only in egress_route_log, as a
 * report-only vault records a request it forwards instead of refusing (SPEC §12). After each round
 * one JSON line with audit_status goes to stdout; at the end a line with the rounds made,
 * start_ms and end_ms (wall clock, bracketing every record) after audit_close returned. With
 * --stop-file, the rounds end early once PATH exists (a case that waits for an event, such as the
 * store's recovery, asks for many rounds and stops them when it has seen it). Exit 0, or 1 when the
 * store cannot be opened.
 */
#include "audit/audit.h"
#include "common/timefmt.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct drive {
    struct audit *audit;
    int hosts;
    int repeat;
    enum audit_route route;
    const char *prefix;
    const char *suffix;
    int blocked; /* record blocks too */
};

struct worker {
    struct drive *d;
    int index;
    pthread_t thread;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char host[128];

    for (int i = 0; i < w->d->hosts; i++) {
        snprintf(host, sizeof(host), "%s%04d.%s", w->d->prefix, i, w->d->suffix);
        for (int r = 0; r < w->d->repeat; r++) {
            if (w->d->blocked && w->d->route != AUDIT_ROUTE_REPORTED)
                audit_blocked(w->d->audit, w->index, host);
            audit_route(w->d->audit, w->index, host, w->d->route);
        }
    }
    return NULL;
}

/* The rounds, each followed by its status line; fewer once stop_file exists. Returns how many. */
static int run_rounds(struct drive *d, struct worker *ws, int threads, int rounds, int interval_ms,
                      const char *stop_file)
{
    int r;

    for (r = 0; r < rounds && (stop_file == NULL || access(stop_file, F_OK) != 0); r++) {
        struct audit_status st;

        if (r > 0 && interval_ms > 0) {
            struct timespec ts = {interval_ms / 1000, (long)(interval_ms % 1000) * 1000000};

            nanosleep(&ts, NULL);
        }
        for (int t = 0; t < threads; t++) {
            ws[t].d = d;
            ws[t].index = t;
            pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]);
        }
        for (int t = 0; t < threads; t++)
            pthread_join(ws[t].thread, NULL);
        audit_status(d->audit, &st);
        printf("{\"round\":%d,\"healthy\":%s,\"pending\":%llu,\"enabled\":%s,\"store\":\"%s\"}\n",
               r, st.healthy ? "true" : "false", (unsigned long long)st.pending,
               st.enabled ? "true" : "false", st.store);
        fflush(stdout);
    }
    return r;
}

static int usage(void)
{
    fprintf(stderr, "usage: audit_drive --store URL [--source proxy|local-egress] [--user ID] "
                    "[--run ID] [--threads N] [--hosts N] [--repeat N] [--rounds N] "
                    "[--interval-ms N] [--route direct|tunnel|refused|reported] [--prefix P] "
                    "[--suffix S] [--blocked 0|1] [--stop-file PATH]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *store = NULL, *user = "u-test", *run = "run-test", *stop_file = NULL;
    enum audit_source source = AUDIT_SOURCE_PROXY;
    struct drive d = {NULL, 10, 1, AUDIT_ROUTE_REFUSED, "h", "example", 1};
    int threads = 4, rounds = 1, interval_ms = 0, r;
    struct worker *ws;
    char err[512];
    int64_t start_ms, end_ms;

    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (v == NULL)
            return usage();
        i++;
        if (strcmp(o, "--store") == 0)
            store = v;
        else if (strcmp(o, "--source") == 0)
            source =
                strcmp(v, "local-egress") == 0 ? AUDIT_SOURCE_LOCAL_EGRESS : AUDIT_SOURCE_PROXY;
        else if (strcmp(o, "--user") == 0)
            user = v;
        else if (strcmp(o, "--run") == 0)
            run = v;
        else if (strcmp(o, "--threads") == 0)
            threads = atoi(v);
        else if (strcmp(o, "--hosts") == 0)
            d.hosts = atoi(v);
        else if (strcmp(o, "--repeat") == 0)
            d.repeat = atoi(v);
        else if (strcmp(o, "--rounds") == 0)
            rounds = atoi(v);
        else if (strcmp(o, "--interval-ms") == 0)
            interval_ms = atoi(v);
        else if (strcmp(o, "--prefix") == 0)
            d.prefix = v;
        else if (strcmp(o, "--suffix") == 0)
            d.suffix = v;
        else if (strcmp(o, "--stop-file") == 0)
            stop_file = v;
        else if (strcmp(o, "--blocked") == 0)
            d.blocked = atoi(v);
        else if (strcmp(o, "--route") == 0)
            d.route = strcmp(v, "direct") == 0     ? AUDIT_ROUTE_DIRECT
                      : strcmp(v, "tunnel") == 0   ? AUDIT_ROUTE_TUNNEL
                      : strcmp(v, "reported") == 0 ? AUDIT_ROUTE_REPORTED
                                                   : AUDIT_ROUTE_REFUSED;
        else
            return usage();
    }
    if (store == NULL || threads < 1 || threads > 256)
        return usage();
    d.audit = audit_open(store, source, user, run, threads, err, sizeof(err));
    if (d.audit == NULL || audit_start(d.audit, err, sizeof(err)) < 0) {
        fprintf(stderr, "audit_drive: %s\n", err);
        audit_close(&d.audit);
        return 1;
    }
    ws = calloc((size_t)threads, sizeof(*ws));
    if (ws == NULL)
        return 1;
    start_ms = timefmt_now_ms();
    r = run_rounds(&d, ws, threads, rounds, interval_ms, stop_file);
    end_ms = timefmt_now_ms();
    audit_close(&d.audit);
    printf("{\"done\":true,\"rounds\":%d,\"start_ms\":%lld,\"end_ms\":%lld}\n", r,
           (long long)start_ms, (long long)end_ms);
    free(ws);
    return 0;
}
