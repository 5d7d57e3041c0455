/*
 * audit.c - aggregates blocked hosts and egress routes per worker and writes them to the store.
 *
 * Guarantees:
 * - A worker only ever takes its own slot's mutex, which the writer holds just long enough to
 *   swap two table pointers: no worker waits on the store, on I/O or on another worker.
 * - A host's first block in this process wakes the writer, which writes it at once; everything
 *   else is written at least every AUDIT_FLUSH_MS, and audit_close flushes what is left (giving
 *   up after AUDIT_CLOSE_WAIT_MS with a log line).
 * - A failed write keeps every count pending and is retried with backoff (AUDIT_BACKOFF_MIN_MS
 *   doubling to AUDIT_BACKOFF_MAX_MS); audit_status reports healthy=false and the pending count.
 * - Memory is bounded: past VG_AUDIT_MAX_PENDING_KEYS distinct keys in one table, new hosts
 *   count under the host "(overflow)", so totals stay exact while the host name is lost.
 * - Only host names, routes, counts, times, user/run ids and the source reach the store; host
 *   bytes outside visible ASCII are replaced by '?' so one odd name cannot poison a flush.
 */
#include "audit/audit.h"
#include "audit/log.h"
#include "audit/store.h"
#include "common/caps.h"
#include "common/timefmt.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define AUDIT_FLUSH_MS       1000
#define AUDIT_BACKOFF_MIN_MS 250
#define AUDIT_BACKOFF_MAX_MS 5000
#define AUDIT_CLOSE_WAIT_MS  5000
#define AUDIT_OVERFLOW_HOST  "(overflow)"
#define AGG_INITIAL_BUCKETS  64

/* Key kinds: blocked_host_log, then one per route of egress_route_log. */
enum agg_kind {
    AGG_BLOCKED = 0,
    AGG_ROUTE_DIRECT,
    AGG_ROUTE_TUNNEL,
    AGG_ROUTE_REFUSED,
    AGG_ROUTE_REPORTED,
    AGG_NKINDS,
};

struct agg_entry {
    struct agg_entry *next;
    uint64_t hash;
    uint64_t count;
    int64_t first_ms;
    int64_t last_ms;
    enum agg_kind kind;
    char host[];
};

/* A chained hash of counts; overflow[] takes what does not fit (cap reached, or no memory). */
struct agg_table {
    struct agg_entry **buckets;
    size_t nbuckets; /* power of two */
    size_t nkeys;
    struct agg_entry *overflow[AGG_NKINDS];
};

/* Open-addressing set of host hashes: which blocked hosts this process has already seen. */
struct hash_set {
    uint64_t *slots; /* 0 = empty */
    size_t cap;      /* power of two */
    size_t n;
};

/* One per worker (plus one shared slot for callers outside 0..nworkers-1). */
struct audit_slot {
    pthread_mutex_t mu;
    struct agg_table *tab;   /* the worker writes here, under mu */
    struct agg_table *spare; /* writer-owned, empty, swapped in next time */
    struct hash_set seen;    /* blocked hosts this slot already announced, under mu */
    _Atomic uint64_t recorded;
} __attribute__((aligned(64)));

struct audit {
    const struct store_ops *ops; /* NULL for `off` */
    struct store *st;
    char *url;
    char display[512];
    char *user_id;
    char *run_id;
    enum audit_source source;
    int nslots;
    struct audit_slot *slots;

    pthread_t thread;
    bool started;
    pthread_mutex_t wake_mu;
    pthread_cond_t wake_cv;
    bool wake; /* under wake_mu */
    bool stop; /* under wake_mu */

    /* Writer-owned. */
    struct agg_table *pending;
    struct hash_set known;
    bool overflow_logged;
    int backoff_ms;

    _Atomic bool healthy;
    _Atomic uint64_t written;
};

int store_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err != NULL && errlen > 0) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

const char *audit_route_name(enum audit_route r)
{
    switch (r) {
    case AUDIT_ROUTE_DIRECT:
        return "direct";
    case AUDIT_ROUTE_TUNNEL:
        return "tunnel";
    case AUDIT_ROUTE_REFUSED:
        return "refused";
    case AUDIT_ROUTE_REPORTED:
        return "reported";
    }
    return "unknown";
}

const char *audit_source_name(enum audit_source s)
{
    return s == AUDIT_SOURCE_LOCAL_EGRESS ? "local-egress" : "proxy";
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- count tables ---- */

static uint64_t agg_hash(enum agg_kind kind, const char *host)
{
    uint64_t h = 14695981039346656037ULL ^ (uint64_t)kind;

    for (const unsigned char *p = (const unsigned char *)host; *p != '\0'; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    return h != 0 ? h : 1;
}

static struct agg_entry *entry_new(enum agg_kind kind, const char *host, uint64_t hash)
{
    size_t n = strlen(host);
    struct agg_entry *e = malloc(sizeof(*e) + n + 1);

    if (e == NULL)
        return NULL;
    memset(e, 0, sizeof(*e));
    e->kind = kind;
    e->hash = hash;
    memcpy(e->host, host, n + 1);
    return e;
}

static void agg_free(struct agg_table **tp)
{
    struct agg_table *t = *tp;

    if (t == NULL)
        return;
    for (size_t i = 0; t->buckets != NULL && i < t->nbuckets; i++) {
        for (struct agg_entry *e = t->buckets[i], *next; e != NULL; e = next) {
            next = e->next;
            free(e);
        }
    }
    for (int k = 0; k < AGG_NKINDS; k++)
        free(t->overflow[k]);
    free(t->buckets);
    free(t);
    *tp = NULL;
}

static struct agg_table *agg_new(void)
{
    struct agg_table *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->nbuckets = AGG_INITIAL_BUCKETS;
    t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
    if (t->buckets == NULL)
        goto fail;
    for (int k = 0; k < AGG_NKINDS; k++) {
        t->overflow[k] = entry_new((enum agg_kind)k, AUDIT_OVERFLOW_HOST,
                                   agg_hash((enum agg_kind)k, AUDIT_OVERFLOW_HOST));
        if (t->overflow[k] == NULL)
            goto fail;
    }
    return t;
fail:
    agg_free(&t);
    return NULL;
}

/* Empties t, keeping its bucket array and overflow entries for reuse. */
static void agg_clear(struct agg_table *t)
{
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (struct agg_entry *e = t->buckets[i], *next; e != NULL; e = next) {
            next = e->next;
            free(e);
        }
        t->buckets[i] = NULL;
    }
    t->nkeys = 0;
    for (int k = 0; k < AGG_NKINDS; k++) {
        t->overflow[k]->count = 0;
        t->overflow[k]->first_ms = t->overflow[k]->last_ms = 0;
    }
}

/* Doubles the bucket array; on allocation failure the table just keeps longer chains. */
static void agg_grow(struct agg_table *t)
{
    size_t n = t->nbuckets * 2;
    struct agg_entry **b = calloc(n, sizeof(*b));

    if (b == NULL)
        return;
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (struct agg_entry *e = t->buckets[i], *next; e != NULL; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

static void entry_merge(struct agg_entry *e, uint64_t count, int64_t first_ms, int64_t last_ms)
{
    if (e->count == 0 || first_ms < e->first_ms)
        e->first_ms = first_ms;
    if (e->count == 0 || last_ms > e->last_ms)
        e->last_ms = last_ms;
    e->count += count;
}

/*
 * Adds count to (kind, host). Returns 1 when a new key was made, 0 when it existed or went to
 * the overflow entry.
 */
static int agg_add(struct agg_table *t, enum agg_kind kind, const char *host, uint64_t hash,
                   uint64_t count, int64_t first_ms, int64_t last_ms)
{
    struct agg_entry *e;

    for (e = t->buckets[hash & (t->nbuckets - 1)]; e != NULL; e = e->next) {
        if (e->hash == hash && e->kind == kind && strcmp(e->host, host) == 0) {
            entry_merge(e, count, first_ms, last_ms);
            return 0;
        }
    }
    e = t->nkeys < VG_AUDIT_MAX_PENDING_KEYS ? entry_new(kind, host, hash) : NULL;
    if (e == NULL) {
        entry_merge(t->overflow[kind], count, first_ms, last_ms);
        return 0;
    }
    entry_merge(e, count, first_ms, last_ms);
    e->next = t->buckets[hash & (t->nbuckets - 1)];
    t->buckets[hash & (t->nbuckets - 1)] = e;
    if (++t->nkeys > t->nbuckets && t->nbuckets < VG_AUDIT_MAX_PENDING_KEYS)
        agg_grow(t);
    return 1;
}

/* Calls fn for every key with a count, overflow entries included. */
static void agg_each(struct agg_table *t, void (*fn)(struct agg_entry *e, void *arg), void *arg)
{
    for (size_t i = 0; i < t->nbuckets; i++) {
        for (struct agg_entry *e = t->buckets[i]; e != NULL; e = e->next)
            fn(e, arg);
    }
    for (int k = 0; k < AGG_NKINDS; k++) {
        if (t->overflow[k]->count > 0)
            fn(t->overflow[k], arg);
    }
}

/* ---- the set of blocked hosts already seen ---- */

/* Returns 1 when h was not in the set (and is now, if there was room). */
static int hash_set_add(struct hash_set *s, uint64_t h)
{
    size_t i;

    if (s->n * 2 >= s->cap) {
        size_t ncap = s->cap != 0 ? s->cap * 2 : 1024;
        uint64_t *ns;

        if (s->n >= VG_AUDIT_MAX_PENDING_KEYS || (ns = calloc(ncap, sizeof(*ns))) == NULL)
            return 0; /* full: the host is written by the periodic flush instead */
        for (size_t j = 0; j < s->cap; j++) {
            if (s->slots[j] == 0)
                continue;
            for (i = s->slots[j] & (ncap - 1); ns[i] != 0; i = (i + 1) & (ncap - 1))
                ;
            ns[i] = s->slots[j];
        }
        free(s->slots);
        s->slots = ns;
        s->cap = ncap;
    }
    for (i = h & (s->cap - 1); s->slots[i] != 0; i = (i + 1) & (s->cap - 1)) {
        if (s->slots[i] == h)
            return 0;
    }
    s->slots[i] = h;
    s->n++;
    return 1;
}

/* ---- URL display ---- */

struct outbuf {
    char *p;
    size_t sz, len;
};

static void out_put(struct outbuf *o, const char *s, size_t n)
{
    size_t room = o->sz - 1 - o->len;

    if (n > room)
        n = room;
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static int is_password_key(const char *k, size_t n)
{
    return (n == 8 && strncasecmp(k, "password", 8) == 0) ||
           (n == 11 && strncasecmp(k, "sslpassword", 11) == 0);
}

/* URI form: scheme://[user[:password]@]host.../path?k=v&password=x */
static void display_uri(struct outbuf *o, const char *url, const char *auth)
{
    size_t alen = strcspn(auth, "/?#");
    const char *at = NULL, *q;

    out_put(o, url, (size_t)(auth - url));
    for (const char *p = auth; p < auth + alen; p++) {
        if (*p == '@')
            at = p;
    }
    if (at != NULL) {
        const char *colon = memchr(auth, ':', (size_t)(at - auth));

        if (colon != NULL) {
            out_put(o, auth, (size_t)(colon - auth));
            out_put(o, ":***", 4);
            out_put(o, at, (size_t)(auth + alen - at));
        } else {
            out_put(o, auth, alen);
        }
    } else {
        out_put(o, auth, alen);
    }
    q = auth + alen;
    while (*q != '\0') {
        size_t n = strcspn(q + 1, "&#");
        const char *eq = memchr(q + 1, '=', n);

        /* q points at '/', '?', '&' or '#'; the segment runs to the next '&' or '#'. */
        if (*q != '/' && *q != '#' && eq != NULL && is_password_key(q + 1, (size_t)(eq - q - 1))) {
            out_put(o, q, (size_t)(eq - q) + 1);
            out_put(o, "***", 3);
        } else {
            out_put(o, q, n + 1);
        }
        q += n + 1;
    }
}

/* Keyword form: host=h user=u password='p w' dbname=d */
static void display_keywords(struct outbuf *o, const char *s)
{
    while (*s != '\0') {
        size_t ws = strspn(s, " \t\r\n"), klen, vlen = 0;
        const char *k, *v;

        out_put(o, s, ws);
        s += ws;
        k = s;
        klen = strcspn(s, "= \t\r\n");
        s += klen;
        ws = strspn(s, " \t\r\n");
        if (s[ws] != '=') {
            out_put(o, k, (size_t)(s - k));
            continue;
        }
        s += ws + 1;
        s += strspn(s, " \t\r\n");
        out_put(o, k, (size_t)(s - k));
        v = s;
        if (*v == '\'') {
            for (vlen = 1; v[vlen] != '\0' && v[vlen] != '\''; vlen++) {
                if (v[vlen] == '\\' && v[vlen + 1] != '\0')
                    vlen++;
            }
            if (v[vlen] == '\'')
                vlen++;
        } else {
            vlen = strcspn(v, " \t\r\n");
        }
        if (is_password_key(k, klen))
            out_put(o, "***", 3);
        else
            out_put(o, v, vlen);
        s = v + vlen;
    }
}

void audit_url_display(const char *url, char *out, size_t outsz)
{
    struct outbuf o = {out, outsz, 0};
    const char *sep;

    if (outsz == 0)
        return;
    out[0] = '\0';
    if (url == NULL)
        return;
    if (strncmp(url, "sqlite:", 7) == 0 || strcmp(url, "off") == 0)
        out_put(&o, url, strlen(url));
    else if ((sep = strstr(url, "://")) != NULL && strcspn(url, "=") > (size_t)(sep - url))
        display_uri(&o, url, sep + 3);
    else if (strchr(url, '=') != NULL)
        display_keywords(&o, url);
    else
        out_put(&o, url, strlen(url));
}

/* ---- open, record, status ---- */

const struct store_ops *store_for_url(const char *url)
{
    if (strncmp(url, "sqlite:", 7) == 0)
        return &store_sqlite_ops;
    if (strncmp(url, "postgresql://", 13) == 0 || strncmp(url, "postgres://", 11) == 0)
        return &store_pg_ops;
    return NULL;
}

/* Copies s with every byte outside visible ASCII replaced by '?', at most max bytes. */
static void sanitize(char *dst, const char *s, size_t max)
{
    size_t n = 0;

    for (; s != NULL && s[n] != '\0' && n < max; n++) {
        unsigned char c = (unsigned char)s[n];

        dst[n] = (c > 0x20 && c < 0x7f) ? (char)c : '?';
    }
    dst[n] = '\0';
}

static char *sanitized_dup(const char *s, size_t max)
{
    char *d = malloc(max + 1);

    if (d != NULL)
        sanitize(d, s != NULL ? s : "", max);
    return d;
}

static void audit_free(struct audit *a)
{
    if (a->slots != NULL) {
        for (int i = 0; i < a->nslots; i++) {
            agg_free(&a->slots[i].tab);
            agg_free(&a->slots[i].spare);
            free(a->slots[i].seen.slots);
            pthread_mutex_destroy(&a->slots[i].mu);
        }
        free(a->slots);
    }
    if (a->st != NULL)
        a->ops->close(&a->st);
    agg_free(&a->pending);
    free(a->known.slots);
    pthread_mutex_destroy(&a->wake_mu);
    pthread_cond_destroy(&a->wake_cv);
    free(a->url);
    free(a->user_id);
    free(a->run_id);
    free(a);
}

struct audit *audit_open_ops(const struct store_ops *ops, const char *url, enum audit_source source,
                             const char *user_id, const char *run_id, int nworkers, char *err,
                             size_t errlen)
{
    struct audit *a = NULL;
    pthread_condattr_t ca;
    int ninit = 0;

    if (nworkers < 1) {
        store_fail(err, errlen, "audit: at least one worker slot is needed");
        goto fail;
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL)
        goto oom;
    pthread_mutex_init(&a->wake_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->wake_cv, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&a->healthy, true);
    atomic_init(&a->written, 0);
    a->ops = ops;
    a->source = source;
    a->backoff_ms = AUDIT_BACKOFF_MIN_MS;
    audit_url_display(url, a->display, sizeof(a->display));
    a->url = strdup(url);
    a->user_id = sanitized_dup(user_id, VG_RUN_ID_MAX);
    a->run_id = sanitized_dup(run_id, VG_RUN_ID_MAX);
    if (a->url == NULL || a->user_id == NULL || a->run_id == NULL)
        goto oom;
    a->nslots = nworkers + 1;
    a->slots = aligned_alloc(64, sizeof(*a->slots) * (size_t)a->nslots);
    if (a->slots == NULL)
        goto oom;
    memset(a->slots, 0, sizeof(*a->slots) * (size_t)a->nslots);
    for (ninit = 0; ninit < a->nslots; ninit++) {
        struct audit_slot *s = &a->slots[ninit];

        pthread_mutex_init(&s->mu, NULL);
        atomic_init(&s->recorded, 0);
        if (ops == NULL)
            continue; /* off: nothing is ever counted */
        s->tab = agg_new();
        s->spare = agg_new();
        if (s->tab == NULL || s->spare == NULL) {
            ninit++;
            goto oom;
        }
    }
    if (ops != NULL) {
        a->pending = agg_new();
        if (a->pending == NULL)
            goto oom;
        a->st = ops->open(url, err, errlen);
        if (a->st == NULL)
            goto fail;
    }
    return a;
oom:
    store_fail(err, errlen, "audit: out of memory");
fail:
    if (a != NULL) {
        if (a->slots != NULL && ninit < a->nslots)
            a->nslots = ninit; /* only the initialised slots are torn down */
        audit_free(a);
    }
    return NULL;
}

struct audit *audit_open(const char *url, enum audit_source source, const char *user_id,
                         const char *run_id, int nworkers, char *err, size_t errlen)
{
    const struct store_ops *ops = NULL;

    if (url == NULL || strcmp(url, "off") != 0) {
        char shown[512];

        ops = url != NULL ? store_for_url(url) : NULL;
        if (ops == NULL) {
            audit_url_display(url, shown, sizeof(shown));
            store_fail(err, errlen,
                       "audit store '%s': expected sqlite:PATH, postgresql://... or off", shown);
            return NULL;
        }
    }
    return audit_open_ops(ops, url, source, user_id, run_id, nworkers, err, errlen);
}

static void writer_wake(struct audit *a)
{
    pthread_mutex_lock(&a->wake_mu);
    a->wake = true;
    pthread_cond_signal(&a->wake_cv);
    pthread_mutex_unlock(&a->wake_mu);
}

static void record(struct audit *a, int worker, enum agg_kind kind, const char *host)
{
    char h[VG_HOST_MAX + 1];
    struct audit_slot *s;
    uint64_t hash;
    int64_t now;
    int fresh, announce;

    if (a == NULL || a->ops == NULL)
        return;
    s = &a->slots[(worker >= 0 && worker < a->nslots - 1) ? worker : a->nslots - 1];
    sanitize(h, host != NULL && host[0] != '\0' ? host : "(none)", VG_HOST_MAX);
    hash = agg_hash(kind, h);
    now = timefmt_now_ms();
    pthread_mutex_lock(&s->mu);
    fresh = agg_add(s->tab, kind, h, hash, 1, now, now);
    /* Wake the writer once per host and slot, not once per flush period. */
    announce = fresh && kind == AGG_BLOCKED && hash_set_add(&s->seen, hash);
    pthread_mutex_unlock(&s->mu);
    atomic_fetch_add_explicit(&s->recorded, 1, memory_order_relaxed);
    if (announce)
        writer_wake(a);
}

void audit_blocked(struct audit *a, int worker, const char *host)
{
    record(a, worker, AGG_BLOCKED, host);
}

void audit_route(struct audit *a, int worker, const char *host, enum audit_route route)
{
    enum agg_kind kind = AGG_ROUTE_REFUSED;

    if (route == AUDIT_ROUTE_DIRECT)
        kind = AGG_ROUTE_DIRECT;
    else if (route == AUDIT_ROUTE_TUNNEL)
        kind = AGG_ROUTE_TUNNEL;
    else if (route == AUDIT_ROUTE_REPORTED)
        kind = AGG_ROUTE_REPORTED;
    record(a, worker, kind, host);
}

void audit_status(struct audit *a, struct audit_status *out)
{
    uint64_t recorded = 0, written;

    memset(out, 0, sizeof(*out));
    if (a == NULL) {
        snprintf(out->store, sizeof(out->store), "off");
        out->healthy = true;
        return;
    }
    written = atomic_load(&a->written);
    for (int i = 0; i < a->nslots; i++)
        recorded += atomic_load_explicit(&a->slots[i].recorded, memory_order_relaxed);
    out->enabled = a->ops != NULL;
    out->healthy = atomic_load(&a->healthy);
    out->pending = recorded > written ? recorded - written : 0;
    snprintf(out->store, sizeof(out->store), "%s", a->display);
}

/* ---- the writer ---- */

struct merge_ctx {
    struct audit *a;
    bool new_host;
};

static void merge_one(struct agg_entry *e, void *arg)
{
    struct merge_ctx *m = arg;
    struct agg_table *p = m->a->pending;

    if (p->nkeys >= VG_AUDIT_MAX_PENDING_KEYS && !m->a->overflow_logged) {
        m->a->overflow_logged = true;
        log_eventf(LOG_WARN, "audit_overflow", "pending_cap",
                   "more than %d distinct hosts pending; new ones count as %s",
                   VG_AUDIT_MAX_PENDING_KEYS, AUDIT_OVERFLOW_HOST);
    }
    agg_add(p, e->kind, e->host, e->hash, e->count, e->first_ms, e->last_ms);
    if (e->kind == AGG_BLOCKED && hash_set_add(&m->a->known, e->hash))
        m->new_host = true;
}

/* Swaps every worker's table out and merges it into pending. True when a new blocked host came. */
static bool collect(struct audit *a)
{
    struct merge_ctx m = {a, false};

    for (int i = 0; i < a->nslots; i++) {
        struct audit_slot *s = &a->slots[i];
        struct agg_table *full;

        pthread_mutex_lock(&s->mu);
        full = s->tab;
        s->tab = s->spare;
        pthread_mutex_unlock(&s->mu);
        agg_each(full, merge_one, &m);
        agg_clear(full);
        s->spare = full;
    }
    return m.new_host;
}

struct flush_ctx {
    struct agg_entry **v;
    size_t n;
};

static void gather(struct agg_entry *e, void *arg)
{
    struct flush_ctx *f = arg;

    f->v[f->n++] = e;
}

/* Same order in every instance, so concurrent writers lock rows in the same order. */
static int entry_cmp(const void *x, const void *y)
{
    const struct agg_entry *a = *(const struct agg_entry *const *)x;
    const struct agg_entry *b = *(const struct agg_entry *const *)y;
    int c = strcmp(a->host, b->host);

    return c != 0 ? c : (int)a->kind - (int)b->kind;
}

static int write_entry(struct audit *a, const struct agg_entry *e, char *err, size_t errlen)
{
    static const char *const routes[] = {"", "direct", "tunnel", "refused", "reported"};

    if (e->kind == AGG_BLOCKED) {
        struct store_blocked_row r = {
            a->user_id, a->run_id,   e->host,   audit_source_name(a->source),
            e->count,   e->first_ms, e->last_ms};

        return a->ops->upsert_blocked(a->st, &r, err, errlen);
    } else {
        struct store_route_row r = {a->run_id, e->host,     routes[e->kind],
                                    e->count,  e->first_ms, e->last_ms};

        return a->ops->upsert_route(a->st, &r, err, errlen);
    }
}

/* Writes everything pending in one transaction. 0, or -1 + err with everything still pending. */
static int flush_pending(struct audit *a, char *err, size_t errlen)
{
    struct flush_ctx f = {NULL, 0};
    uint64_t total = 0;
    int ret = -1;

    f.v = malloc(sizeof(*f.v) * (a->pending->nkeys + AGG_NKINDS));
    if (f.v == NULL) {
        store_fail(err, errlen, "out of memory");
        goto out;
    }
    agg_each(a->pending, gather, &f);
    if (f.n == 0) {
        ret = 0;
        goto out;
    }
    qsort(f.v, f.n, sizeof(*f.v), entry_cmp);
    if (a->ops->begin(a->st, err, errlen) < 0)
        goto fail;
    for (size_t i = 0; i < f.n; i++) {
        if (write_entry(a, f.v[i], err, errlen) < 0)
            goto fail;
        total += f.v[i]->count;
    }
    if (a->ops->commit(a->st, err, errlen) < 0)
        goto fail;
    agg_clear(a->pending);
    a->overflow_logged = false;
    atomic_fetch_add(&a->written, total);
    ret = 0;
    goto out;
fail:
    a->ops->rollback(a->st);
out:
    free(f.v);
    return ret;
}

/* One flush attempt with health bookkeeping; returns 0 on success. */
static int flush_once(struct audit *a)
{
    char err[512] = "";

    if (flush_pending(a, err, sizeof(err)) == 0) {
        if (!atomic_exchange(&a->healthy, true))
            log_eventf(LOG_INFO, "audit_store_recovered", "store_ok", "%s", a->display);
        a->backoff_ms = AUDIT_BACKOFF_MIN_MS;
        return 0;
    }
    if (atomic_exchange(&a->healthy, false))
        log_eventf(LOG_WARN, "audit_store_failed", "store_write", "%s", err);
    else
        log_eventf(LOG_DEBUG, "audit_store_failed", "store_write", "%s", err);
    return -1;
}

static void next_backoff(struct audit *a)
{
    a->backoff_ms *= 2;
    if (a->backoff_ms > AUDIT_BACKOFF_MAX_MS)
        a->backoff_ms = AUDIT_BACKOFF_MAX_MS;
}

/* Waits until deadline (monotonic ms), a wake-up or stop. Returns true when stop is set. */
static bool writer_wait(struct audit *a, int64_t deadline)
{
    bool stop;

    pthread_mutex_lock(&a->wake_mu);
    while (!a->wake && !a->stop) {
        int64_t left = deadline - mono_ms();
        struct timespec ts;

        if (left <= 0)
            break;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += left / 1000;
        ts.tv_nsec += (left % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        if (pthread_cond_timedwait(&a->wake_cv, &a->wake_mu, &ts) == ETIMEDOUT)
            break;
    }
    a->wake = false;
    stop = a->stop;
    pthread_mutex_unlock(&a->wake_mu);
    return stop;
}

/* Final flush for audit_close: keep trying until nothing is pending or the wait is over. */
static void writer_drain(struct audit *a)
{
    int64_t give_up = mono_ms() + AUDIT_CLOSE_WAIT_MS;
    struct audit_status st;

    collect(a);
    while (flush_once(a) < 0) {
        int64_t left = give_up - mono_ms(), nap;
        struct timespec ts;

        if (left <= 0)
            break;
        nap = a->backoff_ms < left ? a->backoff_ms : left;
        ts.tv_sec = nap / 1000;
        ts.tv_nsec = (nap % 1000) * 1000000;
        nanosleep(&ts, NULL);
        next_backoff(a);
        collect(a);
    }
    audit_status(a, &st);
    if (st.pending > 0)
        log_eventf(LOG_ERROR, "audit_flush_incomplete", "store_unavailable",
                   "%llu counts could not be written to %s before exit",
                   (unsigned long long)st.pending, a->display);
}

static void *writer_main(void *arg)
{
    struct audit *a = arg;
    int64_t next_flush = mono_ms() + AUDIT_FLUSH_MS, retry_at = 0;

    for (;;) {
        int64_t deadline = atomic_load(&a->healthy) ? next_flush : retry_at;
        bool stop = writer_wait(a, deadline), new_host, due;
        int64_t now;

        if (stop)
            break;
        new_host = collect(a);
        now = mono_ms();
        if (atomic_load(&a->healthy))
            due = new_host || now >= next_flush;
        else
            due = now >= retry_at;
        if (!due)
            continue;
        if (flush_once(a) == 0) {
            if (now >= next_flush)
                next_flush = now + AUDIT_FLUSH_MS;
        } else {
            retry_at = mono_ms() + a->backoff_ms;
            next_backoff(a);
        }
    }
    writer_drain(a);
    return NULL;
}

int audit_start(struct audit *a, char *err, size_t errlen)
{
    sigset_t all, old;
    int rc;

    if (a->ops == NULL || a->started)
        return 0;
    /* Signals belong to the main thread. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&a->thread, NULL, writer_main, a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return store_fail(err, errlen, "audit: cannot start the writer thread: %s", strerror(rc));
    a->started = true;
    return 0;
}

void audit_close(struct audit **ap)
{
    struct audit *a = *ap;

    if (a == NULL)
        return;
    if (a->started) {
        pthread_mutex_lock(&a->wake_mu);
        a->stop = true;
        pthread_cond_signal(&a->wake_cv);
        pthread_mutex_unlock(&a->wake_mu);
        pthread_join(a->thread, NULL);
    } else if (a->ops != NULL) {
        writer_drain(a);
    }
    audit_free(a);
    *ap = NULL;
}

int audit_query(const char *url, enum audit_table table, const char *run_id, cJSON **rows,
                char *err, size_t errlen)
{
    const struct store_ops *ops;

    if (url != NULL && strcmp(url, "off") == 0) {
        cJSON *empty = cJSON_CreateArray();

        if (empty == NULL)
            return store_fail(err, errlen, "out of memory");
        *rows = empty;
        return 0;
    }
    ops = url != NULL ? store_for_url(url) : NULL;
    if (ops == NULL)
        return store_fail(err, errlen, "audit store: expected sqlite:PATH or postgresql://...");
    return ops->query(url, table, run_id, rows, err, errlen);
}
