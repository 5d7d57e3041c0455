/*
 * metrics.c - counters for /metrics (SPEC §7) and their Prometheus text exposition.
 *
 * Guarantees: a worker touches only its own cache-line-aligned slot, with relaxed atomic adds,
 * and takes no lock (a secret name seen for the first time takes the label table's mutex
 * once); callers outside 0..nworkers-1 share one extra slot, so nothing is ever lost to a bad
 * index. The secret-name table is append-only and bounded (VG_METRICS_MAX_SECRETS); names
 * past the bound count under the label "(other)". Rendering sums the slots without stopping
 * anyone; label values are escaped per the exposition format.
 */
#include "proxy/metrics.h"
#include "proxy/upstream.h"
#include "common/caps.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define METRICS_CODE_CLASSES 5
/* Open-addressing table of label indexes; twice the names keeps probes short. */
#define METRICS_LABEL_SLOTS (VG_METRICS_MAX_SECRETS * 2)
#define METRICS_OTHER_LABEL "(other)"
/* A duration past this (or infinite) is clamped, so one bad value cannot wrap the sum. */
#define METRICS_MAX_SECONDS 1e6

/* Upper bounds in seconds; model APIs think for minutes, so the tail reaches 600 s. */
static const double bucket_bounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
                                       2.5,   5,    10,    30,   60,  120,  300, 600};
#define METRICS_NBUCKETS (sizeof(bucket_bounds) / sizeof(bucket_bounds[0]))

struct metrics_slot {
    _Atomic uint64_t requests[METRICS_D_COUNT][METRICS_CODE_CLASSES];
    _Atomic uint64_t blocked;
    _Atomic uint64_t reported; /* policy blocks a report-only vault forwarded (SPEC §12) */
    _Atomic uint64_t conn_open;
    _Atomic uint64_t conn_close;
    _Atomic uint64_t tls_handshakes;
    _Atomic uint64_t upstream_errors[METRICS_UE_COUNT];
    _Atomic uint64_t dns_queries[DNSMSG_T_COUNT][DNSMSG_R_COUNT];
    _Atomic uint64_t duration_buckets[METRICS_NBUCKETS + 1]; /* per bucket, last is +Inf */
    _Atomic uint64_t duration_sum_ns;
    /* index VG_METRICS_MAX_SECRETS is "(other)" */
    _Atomic uint64_t injections[VG_METRICS_MAX_SECRETS + 1];
} __attribute__((aligned(64)));

struct metrics_labels {
    pthread_mutex_t mu; /* writers only */
    _Atomic int count;
    char names[VG_METRICS_MAX_SECRETS][VG_SECRET_NAME_MAX + 1];
    _Atomic int slots[METRICS_LABEL_SLOTS]; /* name index + 1, 0 = empty */
};

static struct metrics_slot *slots;
static int nslots;
static struct metrics_labels *labels;
/* reloads happen on the main thread, a few a minute at most: one set of counters, no slots */
static _Atomic uint64_t reloads[METRICS_R_COUNT];

static const char *const decision_names[] = {"inject", "allow", "block", "error"};
static const char *const ue_names[] = {"dns", "connect", "tls", "timeout", "protocol"};
static const char *const reload_names[] = {"ok", "invalid", "relaunch"};

int metrics_init(int nworkers)
{
    size_t n;

    if (nworkers < 1 || slots != NULL)
        return -1;
    n = (size_t)nworkers + 1;
    slots = aligned_alloc(64, n * sizeof(*slots));
    labels = calloc(1, sizeof(*labels));
    if (slots == NULL || labels == NULL) {
        free(slots);
        free(labels);
        slots = NULL;
        labels = NULL;
        return -1;
    }
    memset(slots, 0, n * sizeof(*slots));
    for (int r = 0; r < METRICS_R_COUNT; r++)
        atomic_store(&reloads[r], 0);
    pthread_mutex_init(&labels->mu, NULL);
    nslots = (int)n;
    return 0;
}

void metrics_shutdown(void)
{
    if (labels != NULL)
        pthread_mutex_destroy(&labels->mu);
    free(slots);
    free(labels);
    slots = NULL;
    labels = NULL;
    nslots = 0;
}

static struct metrics_slot *slot_of(int worker)
{
    if (slots == NULL)
        return NULL;
    return &slots[(worker >= 0 && worker < nslots - 1) ? worker : nslots - 1];
}

static void inc(_Atomic uint64_t *c, uint64_t by)
{
    atomic_fetch_add_explicit(c, by, memory_order_relaxed);
}

void metrics_request(int worker, enum metrics_decision d, int status, double seconds)
{
    struct metrics_slot *s = slot_of(worker);
    int cls = status / 100 - 1;
    size_t b = 0;

    if (s == NULL)
        return;
    if ((unsigned)d >= METRICS_D_COUNT)
        d = METRICS_D_ERROR;
    /* A status vaultgate could not have sent counts as a server-side failure. */
    if (cls < 0 || cls >= METRICS_CODE_CLASSES)
        cls = METRICS_CODE_CLASSES - 1;
    inc(&s->requests[d][cls], 1);
    if (!(seconds >= 0)) /* also NaN */
        seconds = 0;
    if (seconds > METRICS_MAX_SECONDS)
        seconds = METRICS_MAX_SECONDS;
    while (b < METRICS_NBUCKETS && seconds > bucket_bounds[b])
        b++;
    inc(&s->duration_buckets[b], 1);
    inc(&s->duration_sum_ns, (uint64_t)(seconds * 1e9));
}

void metrics_blocked(int worker)
{
    struct metrics_slot *s = slot_of(worker);

    if (s != NULL)
        inc(&s->blocked, 1);
}

void metrics_reported(int worker)
{
    struct metrics_slot *s = slot_of(worker);

    if (s != NULL)
        inc(&s->reported, 1);
}

static unsigned label_hash(const char *name)
{
    unsigned h = 2166136261u;

    for (; *name != '\0'; name++)
        h = (h ^ (unsigned char)*name) * 16777619u;
    return h;
}

/* Index of name in the label table, adding it when new; VG_METRICS_MAX_SECRETS when full. */
static int label_index(const char *name)
{
    unsigned h = label_hash(name);
    int idx = VG_METRICS_MAX_SECRETS;

    if (strlen(name) > VG_SECRET_NAME_MAX)
        return VG_METRICS_MAX_SECRETS;
    for (unsigned i = 0; i < METRICS_LABEL_SLOTS; i++) {
        unsigned at = (h + i) % METRICS_LABEL_SLOTS;
        int v = atomic_load_explicit(&labels->slots[at], memory_order_acquire);

        if (v == 0)
            break;
        if (strcmp(labels->names[v - 1], name) == 0)
            return v - 1;
    }
    pthread_mutex_lock(&labels->mu);
    for (unsigned i = 0; i < METRICS_LABEL_SLOTS; i++) {
        unsigned at = (h + i) % METRICS_LABEL_SLOTS;
        int v = atomic_load_explicit(&labels->slots[at], memory_order_relaxed);
        int n = atomic_load_explicit(&labels->count, memory_order_relaxed);

        if (v != 0) {
            if (strcmp(labels->names[v - 1], name) == 0) {
                idx = v - 1;
                break;
            }
            continue;
        }
        if (n >= VG_METRICS_MAX_SECRETS)
            break;
        snprintf(labels->names[n], sizeof(labels->names[n]), "%s", name);
        /* Publish the name before anyone can find it. */
        atomic_store_explicit(&labels->count, n + 1, memory_order_release);
        atomic_store_explicit(&labels->slots[at], n + 1, memory_order_release);
        idx = n;
        break;
    }
    pthread_mutex_unlock(&labels->mu);
    return idx;
}

void metrics_injection(int worker, const char *secret)
{
    struct metrics_slot *s = slot_of(worker);

    if (s != NULL)
        inc(&s->injections[label_index(secret != NULL ? secret : "")], 1);
}

void metrics_conn_open(int worker)
{
    struct metrics_slot *s = slot_of(worker);

    if (s != NULL)
        inc(&s->conn_open, 1);
}

void metrics_conn_close(int worker)
{
    struct metrics_slot *s = slot_of(worker);

    if (s != NULL)
        inc(&s->conn_close, 1);
}

void metrics_tls_handshake(int worker)
{
    struct metrics_slot *s = slot_of(worker);

    if (s != NULL)
        inc(&s->tls_handshakes, 1);
}

void metrics_upstream_error(int worker, enum metrics_upstream_error kind)
{
    struct metrics_slot *s = slot_of(worker);

    if (s != NULL && (unsigned)kind < METRICS_UE_COUNT)
        inc(&s->upstream_errors[kind], 1);
}

void metrics_dns_query(int worker, enum dnsmsg_type type, enum dnsmsg_rcode rcode)
{
    struct metrics_slot *s = slot_of(worker);

    if (s != NULL && (unsigned)type < DNSMSG_T_COUNT && (unsigned)rcode < DNSMSG_R_COUNT)
        inc(&s->dns_queries[type][rcode], 1);
}

/* ---- rendering ---- */

struct buf {
    char *p;
    size_t len, cap;
    bool failed;
};

static void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->failed)
        return;
    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        char *np = realloc(b->p, b->cap * 2 + (size_t)n);

        if (np == NULL) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = b->cap * 2 + (size_t)n;
    }
}

/* Label value escaping of the text format: backslash, double quote and newline. */
static void buf_label_value(struct buf *b, const char *v)
{
    for (; *v != '\0'; v++) {
        if (*v == '\\')
            buf_printf(b, "\\\\");
        else if (*v == '"')
            buf_printf(b, "\\\"");
        else if (*v == '\n')
            buf_printf(b, "\\n");
        else
            buf_printf(b, "%c", *v);
    }
}

static void header(struct buf *b, const char *name, const char *type, const char *help)
{
    buf_printf(b, "# HELP vaultgate_%s %s\n# TYPE vaultgate_%s %s\n", name, help, name, type);
}

static uint64_t sum(size_t offset)
{
    uint64_t t = 0;

    for (int i = 0; i < nslots; i++)
        t += atomic_load_explicit((_Atomic uint64_t *)((char *)&slots[i] + offset),
                                  memory_order_relaxed);
    return t;
}

#define SUM(field) sum(offsetof(struct metrics_slot, field))
#define SUM_AT(field, i)                                                                           \
    sum(offsetof(struct metrics_slot, field) + (size_t)(i) * sizeof(_Atomic uint64_t))

static void render_requests(struct buf *b)
{
    header(b, "requests_total", "counter",
           "Requests answered, by policy decision and status class.");
    for (int d = 0; d < METRICS_D_COUNT; d++) {
        for (int c = 0; c < METRICS_CODE_CLASSES; c++)
            buf_printf(b, "vaultgate_requests_total{decision=\"%s\",code_class=\"%dxx\"} %llu\n",
                       decision_names[d], c + 1,
                       (unsigned long long)SUM_AT(requests, d * METRICS_CODE_CLASSES + c));
    }
}

static void render_injections(struct buf *b)
{
    int n = atomic_load_explicit(&labels->count, memory_order_acquire);
    uint64_t other = SUM_AT(injections, VG_METRICS_MAX_SECRETS);

    header(b, "injections_total", "counter", "Requests that carried an injected secret, by name.");
    for (int i = 0; i < n; i++) {
        buf_printf(b, "vaultgate_injections_total{secret=\"");
        buf_label_value(b, labels->names[i]);
        buf_printf(b, "\"} %llu\n", (unsigned long long)SUM_AT(injections, i));
    }
    if (other > 0)
        buf_printf(b, "vaultgate_injections_total{secret=\"%s\"} %llu\n", METRICS_OTHER_LABEL,
                   (unsigned long long)other);
}

static void render_dns(struct buf *b)
{
    header(b, "dns_queries_total", "counter", "DNS queries answered, by type and rcode.");
    for (int t = 0; t < DNSMSG_T_COUNT; t++) {
        for (int r = 0; r < DNSMSG_R_COUNT; r++)
            buf_printf(b, "vaultgate_dns_queries_total{type=\"%s\",rcode=\"%s\"} %llu\n",
                       dnsmsg_type_name((enum dnsmsg_type)t),
                       dnsmsg_rcode_name((enum dnsmsg_rcode)r),
                       (unsigned long long)SUM_AT(dns_queries, t * DNSMSG_R_COUNT + r));
    }
}

static void render_histogram(struct buf *b)
{
    uint64_t cum = 0;

    header(b, "request_duration_seconds", "histogram",
           "Seconds from request head to the last response byte.");
    for (size_t i = 0; i <= METRICS_NBUCKETS; i++) {
        cum += SUM_AT(duration_buckets, i);
        if (i < METRICS_NBUCKETS)
            buf_printf(b, "vaultgate_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                       bucket_bounds[i], (unsigned long long)cum);
        else
            buf_printf(b, "vaultgate_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
                       (unsigned long long)cum);
    }
    buf_printf(b, "vaultgate_request_duration_seconds_sum %.9f\n",
               (double)SUM(duration_sum_ns) / 1e9);
    buf_printf(b, "vaultgate_request_duration_seconds_count %llu\n", (unsigned long long)cum);
}

void metrics_totals(struct metrics_totals *out)
{
    memset(out, 0, sizeof(*out));
    if (slots == NULL)
        return;
    for (int d = 0; d < METRICS_D_COUNT; d++) {
        for (int c = 0; c < METRICS_CODE_CLASSES; c++)
            out->requests[d] += SUM_AT(requests, d * METRICS_CODE_CLASSES + c);
    }
    out->blocked = SUM(blocked);
    out->reported = SUM(reported);
}

char *metrics_render(const struct metrics_extra *extra, size_t *len)
{
    struct buf b = {NULL, 0, 4096, false};
    uint64_t closes, opens;

    if (slots == NULL)
        return NULL;
    b.p = malloc(b.cap);
    if (b.p == NULL)
        return NULL;
    render_requests(&b);
    header(&b, "blocked_total", "counter", "Requests and connections refused by policy.");
    buf_printf(&b, "vaultgate_blocked_total %llu\n", (unsigned long long)SUM(blocked));
    header(&b, "reported_total", "counter",
           "Requests a report-only vault forwarded that policy would have refused.");
    buf_printf(&b, "vaultgate_reported_total %llu\n", (unsigned long long)SUM(reported));
    render_injections(&b);
    /* Closes first: opens read afterwards can only be larger, so the gauge never dips below 0. */
    closes = SUM(conn_close);
    opens = SUM(conn_open);
    header(&b, "connections_active", "gauge", "Client connections open now.");
    buf_printf(&b, "vaultgate_connections_active %llu\n",
               (unsigned long long)(opens > closes ? opens - closes : 0));
    header(&b, "tls_handshakes_total", "counter", "Completed client TLS handshakes.");
    buf_printf(&b, "vaultgate_tls_handshakes_total %llu\n",
               (unsigned long long)SUM(tls_handshakes));
    header(&b, "cert_cache_hits_total", "counter", "Leaf certificates served from the cache.");
    buf_printf(&b, "vaultgate_cert_cache_hits_total %llu\n",
               (unsigned long long)(extra != NULL ? extra->cert_cache_hits : 0));
    header(&b, "cert_cache_misses_total", "counter", "Leaf certificates minted.");
    buf_printf(&b, "vaultgate_cert_cache_misses_total %llu\n",
               (unsigned long long)(extra != NULL ? extra->cert_cache_misses : 0));
    header(&b, "upstream_errors_total", "counter", "Upstream failures, by kind.");
    for (int k = 0; k < METRICS_UE_COUNT; k++)
        buf_printf(&b, "vaultgate_upstream_errors_total{kind=\"%s\"} %llu\n", ue_names[k],
                   (unsigned long long)SUM_AT(upstream_errors, k));
    render_dns(&b);
    header(&b, "vault_reloads_total", "counter",
           "Vault reloads (SIGHUP or --vault-watch), by result.");
    for (int r = 0; r < METRICS_R_COUNT; r++)
        buf_printf(&b, "vaultgate_vault_reloads_total{result=\"%s\"} %llu\n", reload_names[r],
                   (unsigned long long)atomic_load_explicit(&reloads[r], memory_order_relaxed));
    render_histogram(&b);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    if (len != NULL)
        *len = b.len;
    return b.p;
}

void metrics_reload(enum metrics_reload result)
{
    if ((unsigned)result < METRICS_R_COUNT)
        inc(&reloads[result], 1);
}

enum metrics_upstream_error metrics_upstream_kind(int upstream_err)
{
    switch ((enum upstream_err)upstream_err) {
    case UPSTREAM_ERR_DNS:
        return METRICS_UE_DNS;
    case UPSTREAM_ERR_TLS:
        return METRICS_UE_TLS;
    case UPSTREAM_ERR_TIMEOUT:
        return METRICS_UE_TIMEOUT;
    case UPSTREAM_ERR_CONNECT:
    case UPSTREAM_ERR_PROXY:
    case UPSTREAM_ERR_PROHIBITED:
        return METRICS_UE_CONNECT;
    default:
        return METRICS_UE_PROTOCOL;
    }
}
