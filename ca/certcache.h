/*
 * certcache.h - LRU cache of leaf certificates keyed by normalised host (SPEC §5).
 *
 * Thread-safe: one cache may be shared by all workers. Minting happens on a miss, under the
 * cache's lock only for the bookkeeping, never while holding it for another host's lookup.
 */
#ifndef VG_CERTCACHE_H
#define VG_CERTCACHE_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>

#include "ca/ca.h"

struct certcache;

/* capacity is raised to VG_CERTCACHE_MIN if smaller. The cache borrows ca. NULL on OOM. */
struct certcache *certcache_new(const struct ca *ca, size_t capacity);
void certcache_free(struct certcache **cp);

/* The leaf for host: a new reference the caller frees with X509_free. Mints on a miss. */
X509 *certcache_get(struct certcache *c, const char *host, char *err, size_t errlen);

struct certcache_stats {
    uint64_t hits;
    uint64_t misses;
    size_t entries;
};
void certcache_stats(struct certcache *c, struct certcache_stats *out);

#endif
