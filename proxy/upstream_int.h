/*
 * upstream_int.h - what upstream.c, upstream_rules.c and upstream_pool.c share: option parsing
 * (done once at start-up), the destination rules for one address, and the pool of idle
 * connections. Not for other modules.
 */
#ifndef VG_UPSTREAM_INT_H
#define VG_UPSTREAM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/bufferevent.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "common/hostname.h"
#include "proxy/addr.h"

/* Own endpoints kept: listener address x port, and wildcard listeners by family x port. */
#define UPSTREAM_OWN_MAX 1024

struct localaddr;

union upstream_sa {
    struct sockaddr sa;
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
};

struct upstream_pin {
    char host[HOSTNAME_BUFSZ];
    int port;
    union upstream_sa addr;
};

/* An IP literal (v4, v6 or [v6]) of len bytes into *out with port. 0 or -1. */
int upstream_parse_ip(const char *s, size_t len, int port, union upstream_sa *out);

/* --dns-server: "IP", "IP:PORT", "[v6]", "[v6]:PORT" or a bare v6 address. 0 or -1. */
int upstream_parse_ip_port(const char *s, int defport, union upstream_sa *out);

/* --resolve HOST:PORT:ADDR (HOST normalised, ADDR may be [v6]). 0 or -1. */
int upstream_parse_pin(const char *s, struct upstream_pin *out);

/* --upstream-proxy http://HOST[:PORT][/] (port 80 when absent); host normalised. 0 or -1. */
int upstream_parse_proxy_url(const char *s, char *host, int *port);

/*
 * The destination rules for one address about to be dialled (logs a skipped address at debug
 * level, naming host). exempt: pinned, or the operator's proxy. vaultgate's own listener
 * endpoints are refused even then: dialling them would loop. local: the calling worker's set of
 * the machine's addresses, whose other addresses are refused unless exempt or allow-listed.
 */
bool upstream_dest_allowed(const struct addr_cidr *allow, size_t nallow, struct localaddr *local,
                           const char *host, const union upstream_sa *a, bool exempt);

/* FNV-1a over a string, continuing from h (start with 2166136261u). */
static inline uint32_t upstream_hash(const char *s, uint32_t h)
{
    for (; *s != '\0'; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* ---- pool of idle connections (upstream_pool.c) ---- */

struct upstream_pool;

/* max_per_key idle connections per (host, port, tls), each kept at most idle. NULL on ENOMEM. */
struct upstream_pool *upstream_pool_new(size_t max_per_key, const struct timeval *idle);

/* Frees the pool and every idle connection in it. */
void upstream_pool_free(struct upstream_pool **pp);

/*
 * Takes bev (host normalised) if it is clean and there is room: returns 0 and the pool owns bev
 * (and frees it when it closes or idles out). Returns -1 and the caller still owns bev.
 */
int upstream_pool_put(struct upstream_pool *p, const char *host, int port, bool tls,
                      struct bufferevent *bev);

/* A live idle connection for the key, with no callbacks or timeouts; the caller owns it. */
struct bufferevent *upstream_pool_get(struct upstream_pool *p, const char *host, int port,
                                      bool tls);

size_t upstream_pool_idle(const struct upstream_pool *p);

#endif
