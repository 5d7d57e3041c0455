/*
 * certcache.c - LRU cache of leaf certificates keyed by normalised host (SPEC §5).
 *
 * A chained hash table finds an entry, a doubly-linked list keeps recency: lookup, insert and
 * eviction are O(1). Host names come from SNI, which the sandbox chooses, so the table hashes
 * with SipHash-2-4 under a random per-cache key: nobody can aim many names at one bucket.
 *
 * One mutex guards everything and is held only for bookkeeping; a miss mints (one ECDSA
 * signature) outside the lock. Two threads that miss the same host at once both mint; the
 * first to insert wins and the other's certificate is dropped, so every caller of one host
 * gets the same certificate while it stays cached. Callers get their own reference.
 */
#include "ca/certcache.h"
#include "ca/ca_test.h"
#include "ca/leaf.h"
#include "common/caps.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

struct cc_entry {
    struct cc_entry *hnext; /* bucket chain */
    struct cc_entry *prev;  /* LRU list: head = most recent */
    struct cc_entry *next;
    X509 *cert;
    uint64_t hash;
    size_t len;
    char host[]; /* NUL-terminated */
};

struct certcache {
    pthread_mutex_t lock;
    const struct ca *ca;
    size_t capacity;
    size_t entries;
    size_t nbuckets; /* power of two, >= 2 * capacity */
    struct cc_entry **buckets;
    struct cc_entry *head, *tail;
    uint64_t hits, misses;
    uint64_t key[2];
};

/* --- SipHash-2-4 (Aumasson, Bernstein) ------------------------------------------------- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                                   \
    do {                                                                                           \
        v0 += v1;                                                                                  \
        v1 = ROTL(v1, 13);                                                                         \
        v1 ^= v0;                                                                                  \
        v0 = ROTL(v0, 32);                                                                         \
        v2 += v3;                                                                                  \
        v3 = ROTL(v3, 16);                                                                         \
        v3 ^= v2;                                                                                  \
        v0 += v3;                                                                                  \
        v3 = ROTL(v3, 21);                                                                         \
        v3 ^= v0;                                                                                  \
        v2 += v1;                                                                                  \
        v1 = ROTL(v1, 17);                                                                         \
        v1 ^= v2;                                                                                  \
        v2 = ROTL(v2, 32);                                                                         \
    } while (0)

static uint64_t load64(const unsigned char *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t siphash(const uint64_t key[2], const char *data, size_t len)
{
    const unsigned char *in = (const unsigned char *)data;
    uint64_t v0 = 0x736f6d6570736575ULL ^ key[0], v1 = 0x646f72616e646f6dULL ^ key[1];
    uint64_t v2 = 0x6c7967656e657261ULL ^ key[0], v3 = 0x7465646279746573ULL ^ key[1];
    uint64_t b = (uint64_t)len << 56, m;
    size_t i, left = len & 7;

    for (i = 0; i + 8 <= len; i += 8) {
        m = load64(in + i);
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    for (size_t j = 0; j < left; j++)
        b |= (uint64_t)in[i + j] << (8 * j);
    v3 ^= b;
    SIPROUND;
    SIPROUND;
    v0 ^= b;
    v2 ^= 0xff;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* --- the cache ------------------------------------------------------------------------- */

static struct certcache *cache_new(const struct ca *ca, size_t capacity)
{
    struct certcache *c;
    size_t nb = 16;

    if (ca == NULL || capacity == 0 || capacity > (SIZE_MAX / 4) / sizeof(void *))
        return NULL;
    while (nb < 2 * capacity)
        nb *= 2;
    if ((c = calloc(1, sizeof(*c))) == NULL)
        return NULL;
    c->buckets = calloc(nb, sizeof(*c->buckets));
    if (c->buckets == NULL || RAND_bytes((unsigned char *)c->key, sizeof(c->key)) != 1 ||
        pthread_mutex_init(&c->lock, NULL) != 0) {
        free(c->buckets);
        free(c);
        return NULL;
    }
    c->ca = ca;
    c->capacity = capacity;
    c->nbuckets = nb;
    return c;
}

struct certcache *certcache_new(const struct ca *ca, size_t capacity)
{
    return cache_new(ca, capacity < VG_CERTCACHE_MIN ? VG_CERTCACHE_MIN : capacity);
}

struct certcache *certcache_new_for_test(const struct ca *ca, size_t capacity)
{
    return cache_new(ca, capacity);
}

void certcache_free(struct certcache **cp)
{
    struct certcache *c;

    if (cp == NULL || *cp == NULL)
        return;
    c = *cp;
    for (struct cc_entry *e = c->head, *n; e != NULL; e = n) {
        n = e->next;
        X509_free(e->cert);
        free(e);
    }
    pthread_mutex_destroy(&c->lock);
    free(c->buckets);
    free(c);
    *cp = NULL;
}

static struct cc_entry **bucket(struct certcache *c, uint64_t h)
{
    return &c->buckets[h & (c->nbuckets - 1)];
}

/* Caller holds the lock. */
static struct cc_entry *find(struct certcache *c, const char *host, size_t len, uint64_t h)
{
    for (struct cc_entry *e = *bucket(c, h); e != NULL; e = e->hnext) {
        if (e->hash == h && e->len == len && memcmp(e->host, host, len) == 0)
            return e;
    }
    return NULL;
}

static void lru_unlink(struct certcache *c, struct cc_entry *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        c->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    else
        c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void lru_push_front(struct certcache *c, struct cc_entry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head != NULL)
        c->head->prev = e;
    c->head = e;
    if (c->tail == NULL)
        c->tail = e;
}

/* Drops the least recently used entry. Caller holds the lock. */
static void evict_one(struct certcache *c)
{
    struct cc_entry *e = c->tail, **pp;

    if (e == NULL)
        return;
    for (pp = bucket(c, e->hash); *pp != e; pp = &(*pp)->hnext)
        ;
    *pp = e->hnext;
    lru_unlink(c, e);
    c->entries--;
    X509_free(e->cert);
    free(e);
}

/* Returns a new reference to the cached certificate for host, or NULL. Takes the lock. */
static X509 *lookup(struct certcache *c, const char *host, size_t len, uint64_t h)
{
    struct cc_entry *e;
    X509 *x = NULL;

    pthread_mutex_lock(&c->lock);
    e = find(c, host, len, h);
    if (e != NULL && X509_up_ref(e->cert) == 1) {
        x = e->cert;
        c->hits++;
        if (c->head != e) {
            lru_unlink(c, e);
            lru_push_front(c, e);
        }
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->lock);
    return x;
}

/*
 * Inserts cert (taking the caller's reference) unless another thread was first; returns a new
 * reference to whichever certificate is cached for host then, or cert itself on OOM.
 */
static X509 *insert_take(struct certcache *c, const char *host, size_t len, uint64_t h, X509 *cert)
{
    struct cc_entry *e = malloc(sizeof(*e) + len + 1);
    struct cc_entry *other;

    pthread_mutex_lock(&c->lock);
    other = find(c, host, len, h);
    if (other != NULL && X509_up_ref(other->cert) == 1) {
        pthread_mutex_unlock(&c->lock);
        free(e);
        X509_free(cert);
        return other->cert;
    }
    if (e == NULL || X509_up_ref(cert) != 1) {
        pthread_mutex_unlock(&c->lock);
        free(e);
        return cert; /* served, just not cached */
    }
    e->cert = cert;
    e->hash = h;
    e->len = len;
    memcpy(e->host, host, len + 1);
    e->hnext = *bucket(c, h);
    *bucket(c, h) = e;
    lru_push_front(c, e);
    if (++c->entries > c->capacity)
        evict_one(c);
    pthread_mutex_unlock(&c->lock);
    return cert;
}

X509 *certcache_get(struct certcache *c, const char *host, char *err, size_t errlen)
{
    size_t len;
    uint64_t h;
    X509 *x;

    if (c == NULL || host == NULL) {
        snprintf(err, errlen, "certcache: no cache or no host");
        return NULL;
    }
    len = strnlen(host, VG_HOST_MAX + 1);
    if (len > VG_HOST_MAX) /* cannot be cached; leaf_mint refuses it with the reason */
        return leaf_mint(c->ca, host, err, errlen);
    h = siphash(c->key, host, len);
    if ((x = lookup(c, host, len, h)) != NULL)
        return x;
    if ((x = leaf_mint(c->ca, host, err, errlen)) == NULL)
        return NULL;
    return insert_take(c, host, len, h, x);
}

void certcache_stats(struct certcache *c, struct certcache_stats *out)
{
    pthread_mutex_lock(&c->lock);
    out->hits = c->hits;
    out->misses = c->misses;
    out->entries = c->entries;
    pthread_mutex_unlock(&c->lock);
}
