/*
 * upstream_pool.c - idle upstream connections of one worker, keyed by (host, port, tls).
 *
 * Guarantees: a pooled connection (cio.h) is open (no end of stream seen: one that saw its end
 * would never report it again), has empty buffers, reading on and callbacks that free
 * it on any data, EOF, error or idle timeout, so a server's close is noticed at once; what
 * upstream_pool_get() hands out also passed a non-blocking peek at its socket in the same loop
 * turn. Lookup is a hash over 256 buckets and allocates nothing; each key's slot array starts small
 * and doubles up to max_per_key. Single-threaded: one pool per worker.
 */
#include "proxy/upstream_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#define UPSTREAM_POOL_BUCKETS     256  /* hash buckets (fixed) */
#define UPSTREAM_POOL_MAX_KEYS    4096 /* distinct (host, port, tls) kept per worker */
#define UPSTREAM_POOL_FIRST_SLOTS 4    /* idle slots a key starts with */
#define UPSTREAM_POOL_BUF_KEEP_MS 100  /* an idle connection keeps its TLS record buffers */

struct pool_key;

struct pool_slot {
    struct cio *io;
    struct pool_key *key;
    unsigned gen; /* the pool's release generation when it came in */
    bool bufs;    /* TLS: its record buffers may still be held (pool_release_tick) */
};

struct pool_key {
    struct pool_key *next;
    struct upstream_pool *pool;
    uint32_t hash;
    int port;
    int tls; /* 0 plain, UPSTREAM_TLS (http/1.1) or UPSTREAM_TLS_H2 (h2 offered) */
    size_t n;
    size_t cap;
    struct pool_slot *slots; /* cap of them; grows by doubling up to max_per_key */
    char host[HOSTNAME_BUFSZ];
};

struct upstream_pool {
    size_t max_per_key;
    struct timeval idle_tv;
    size_t nkeys;
    size_t idle;
    size_t held;          /* slots with bufs set */
    unsigned gen;         /* advanced by each release tick */
    struct event *ticker; /* the release tick, while held > 0 */
    struct pool_key *buckets[UPSTREAM_POOL_BUCKETS];
};

static void pool_key_free(struct pool_key *k)
{
    for (size_t i = 0; i < k->n; i++)
        cio_free(&k->slots[i].io);
    free(k->slots);
    free(k);
}

static uint32_t key_hash(const char *host, int port, int tls)
{
    uint32_t h = upstream_hash(host, 2166136261u);

    h = (h ^ (uint32_t)port) * 16777619u;
    return (h ^ (unsigned)tls) * 16777619u;
}

static struct pool_key *pool_find(struct upstream_pool *p, const char *host, int port, int tls,
                                  uint32_t h)
{
    struct pool_key *k;

    for (k = p->buckets[h % UPSTREAM_POOL_BUCKETS]; k != NULL; k = k->next) {
        if (k->hash == h && k->port == port && k->tls == tls && strcmp(k->host, host) == 0)
            return k;
    }
    return NULL;
}

/* Frees every key without idle connections (when the key table is full). */
static void pool_sweep(struct upstream_pool *p)
{
    for (size_t i = 0; i < UPSTREAM_POOL_BUCKETS; i++) {
        struct pool_key **pp = &p->buckets[i];

        while (*pp != NULL) {
            struct pool_key *k = *pp;

            if (k->n == 0) {
                *pp = k->next;
                pool_key_free(k);
                p->nkeys--;
            } else {
                pp = &k->next;
            }
        }
    }
}

static struct pool_key *pool_key_get(struct upstream_pool *p, const char *host, int port, int tls)
{
    uint32_t h = key_hash(host, port, tls);
    struct pool_key *k = pool_find(p, host, port, tls, h);

    if (k != NULL)
        return k;
    if (p->nkeys >= UPSTREAM_POOL_MAX_KEYS)
        pool_sweep(p);
    if (p->nkeys >= UPSTREAM_POOL_MAX_KEYS)
        return NULL;
    k = calloc(1, sizeof(*k));
    if (k == NULL)
        return NULL;
    k->cap =
        p->max_per_key < UPSTREAM_POOL_FIRST_SLOTS ? p->max_per_key : UPSTREAM_POOL_FIRST_SLOTS;
    k->slots = calloc(k->cap, sizeof(*k->slots));
    if (k->slots == NULL) {
        free(k);
        return NULL;
    }
    k->pool = p;
    k->hash = h;
    k->port = port;
    k->tls = tls;
    snprintf(k->host, sizeof(k->host), "%s", host);
    k->next = p->buckets[h % UPSTREAM_POOL_BUCKETS];
    p->buckets[h % UPSTREAM_POOL_BUCKETS] = k;
    p->nkeys++;
    return k;
}

static void pool_read_cb(struct cio *io, void *arg);
static void pool_event_cb(struct cio *io, short what, void *arg);

/* Takes slot i out of its key (the last slot moves into its place). Returns its connection. */
static struct cio *pool_take(struct pool_key *k, size_t i)
{
    struct cio *io = k->slots[i].io;

    if (k->slots[i].bufs)
        k->pool->held--;
    k->n--;
    if (i != k->n) {
        k->slots[i] = k->slots[k->n];
        cio_setcb(k->slots[i].io, pool_read_cb, NULL, pool_event_cb, &k->slots[i]);
    }
    k->slots[k->n].io = NULL;
    k->pool->idle--;
    cio_setcb(io, NULL, NULL, NULL, NULL);
    cio_set_timeouts(io, NULL, NULL);
    return io;
}

/*
 * Takes the most recently used idle connection of k (the most likely to be alive, its buffers
 * still warm) that shows no sign of having been closed: the idle callbacks may not have run yet
 * in this loop turn, so look at the input buffer and, with peek, at the socket (one
 * non-blocking peek; a caller that can retry on a fresh connection saves that system call).
 */
static struct cio *pool_checkout(struct pool_key *k, bool peek)
{
    while (k->n > 0) {
        struct cio *io = pool_take(k, k->n - 1);
        evutil_socket_t fd = cio_fd(io);
        char b;
        ssize_t n = -1;

        errno = EAGAIN;
        if (peek)
            n = fd >= 0 ? recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) : 0;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && cio_open(io) &&
            !cio_has_input(io) && (cio_ssl(io) == NULL || !SSL_has_pending(cio_ssl(io))))
            return io;
        cio_free(&io);
    }
    return NULL;
}

/* An idle connection spoke (data, EOF, error, idle timeout): it is no longer reusable. */
static void pool_drop(struct pool_slot *slot)
{
    struct pool_key *k = slot->key;

    struct cio *io = pool_take(k, (size_t)(slot - k->slots));

    cio_free(&io);
}

static void pool_read_cb(struct cio *io, void *arg)
{
    (void)io;
    pool_drop(arg);
}

static void pool_event_cb(struct cio *io, short what, void *arg)
{
    (void)io, (void)what;
    pool_drop(arg);
}

/*
 * Every UPSTREAM_POOL_BUF_KEEP_MS while connections hold them: the TLS record buffers of those
 * that came in before the previous tick go (1-2 ticks of idleness; a connection reused sooner
 * still has them: no allocation per request). One timer per pool, not per connection: no
 * timer event per idle connection to add and delete.
 */
static void pool_release_tick(evutil_socket_t fd, short what, void *arg)
{
    struct upstream_pool *p = arg;
    struct timeval tv = {0, UPSTREAM_POOL_BUF_KEEP_MS * 1000};

    for (size_t i = 0; i < UPSTREAM_POOL_BUCKETS && p->held > 0; i++) {
        for (struct pool_key *k = p->buckets[i]; k != NULL; k = k->next) {
            for (size_t j = 0; j < k->n; j++) {
                struct pool_slot *s = &k->slots[j];

                if (!s->bufs || s->gen == p->gen)
                    continue;
                cio_free_buffers(s->io);
                s->bufs = false;
                p->held--;
            }
        }
    }
    p->gen++;
    if (p->held > 0)
        evtimer_add(p->ticker, &tv);
}

/* Doubles k's slot array (rare: only a host with many idle connections gets there). */
static int pool_grow(struct pool_key *k)
{
    size_t cap = k->cap * 2 < k->pool->max_per_key ? k->cap * 2 : k->pool->max_per_key;
    struct pool_slot *slots = realloc(k->slots, cap * sizeof(*slots));

    if (slots == NULL)
        return -1;
    k->slots = slots;
    k->cap = cap;
    /* The callbacks point at slots: re-point them at the moved array. */
    for (size_t i = 0; i < k->n; i++)
        cio_setcb(slots[i].io, pool_read_cb, NULL, pool_event_cb, &slots[i]);
    return 0;
}

int upstream_pool_put(struct upstream_pool *p, const char *host, int port, int tls, struct cio *io)
{
    struct timeval buf_tv = {0, UPSTREAM_POOL_BUF_KEEP_MS * 1000};
    struct pool_key *k;
    struct pool_slot *slot;
    SSL *ssl = cio_ssl(io);

    if (!cio_open(io) || cio_has_input(io) || cio_queued(io) != 0 ||
        (ssl != NULL && SSL_has_pending(ssl)))
        return -1; /* an ended stream would never report the upstream's close: never reused */
    k = pool_key_get(p, host, port, tls);
    if (k == NULL || k->n >= p->max_per_key || (k->n == k->cap && pool_grow(k) != 0))
        return -1;
    slot = &k->slots[k->n++];
    slot->io = io;
    slot->key = k;
    slot->gen = p->gen;
    slot->bufs = true; /* its evbuffers, and for TLS its record buffers */
    p->idle++;
    if (ssl != NULL)
        SSL_clear_mode(ssl, SSL_MODE_RELEASE_BUFFERS); /* set for a response that streamed */
    if (p->ticker == NULL)
        p->ticker = evtimer_new(cio_base(io), pool_release_tick, p);
    if (p->held++ == 0 && p->ticker != NULL)
        evtimer_add(p->ticker, &buf_tv);
    cio_set_wlow(io, 0);
    cio_setcb(io, pool_read_cb, NULL, pool_event_cb, slot);
    cio_set_timeouts(io, &p->idle_tv, NULL);
    cio_read(io, true);
    return 0;
}

struct upstream_pool *upstream_pool_new(size_t max_per_key, const struct timeval *idle)
{
    struct upstream_pool *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->max_per_key = max_per_key > 0 ? max_per_key : 1;
    p->idle_tv = *idle;
    return p;
}

void upstream_pool_free(struct upstream_pool **pp)
{
    struct upstream_pool *p = *pp;

    if (p == NULL)
        return;
    for (size_t i = 0; i < UPSTREAM_POOL_BUCKETS; i++) {
        while (p->buckets[i] != NULL) {
            struct pool_key *k = p->buckets[i];

            p->buckets[i] = k->next;
            pool_key_free(k);
        }
    }
    if (p->ticker != NULL)
        event_free(p->ticker);
    free(p);
    *pp = NULL;
}

struct cio *upstream_pool_get(struct upstream_pool *p, const char *host, int port, int tls,
                              bool peek)
{
    struct pool_key *k = pool_find(p, host, port, tls, key_hash(host, port, tls));

    return k != NULL ? pool_checkout(k, peek) : NULL;
}

size_t upstream_pool_count(struct upstream_pool *p, const char *host, int port, int tls)
{
    struct pool_key *k = pool_find(p, host, port, tls, key_hash(host, port, tls));

    return k != NULL ? k->n : 0;
}

size_t upstream_pool_idle(const struct upstream_pool *p)
{
    return p->idle;
}
