/*
 * upstream.h - connections from vaultgate to real hosts (SPEC §4 "Upstream", §2 options).
 *
 * One struct upstream_ctx per worker: its own evdns resolver, one client SSL_CTX (trust store
 * loaded once), and a pool of idle connections keyed by (host, port, tls). Resolution is
 * asynchronous; the address checked against the destination rules is the address dialled, with
 * no second resolution; pinned (--resolve) and --allow-private addresses are exempt.
 */
#ifndef VG_UPSTREAM_H
#define VG_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "proxy/cio.h"

struct sockaddr;

enum upstream_err {
    UPSTREAM_OK = 0,
    UPSTREAM_ERR_DNS,        /* 502 dns_error */
    UPSTREAM_ERR_PROHIBITED, /* 403 destination_ip_prohibited: every address is prohibited */
    UPSTREAM_ERR_CONNECT,    /* 502 connection_refused */
    UPSTREAM_ERR_TLS,        /* 502 tls_certificate_error (verification) or tls_protocol_error */
    UPSTREAM_ERR_TIMEOUT,    /* 504 connection_timeout */
    UPSTREAM_ERR_PROXY,      /* 502 the --upstream-proxy refused the CONNECT */
    UPSTREAM_ERR_INTERNAL,   /* 502 */
};

/* Process-wide settings, parsed once by `run` and shared read-only by every worker. */
struct upstream_config {
    const char *const *dns_servers; /* "IP" or "IP:PORT"; none = /etc/resolv.conf */
    size_t ndns;
    const char *const *pins; /* --resolve "HOST:PORT:ADDR" */
    size_t npins;
    const char *const *allow_private; /* CIDRs */
    size_t nallow;
    const char *ca_file;        /* --upstream-ca, NULL = system store */
    const char *upstream_proxy; /* --upstream-proxy http://HOST:PORT, NULL = direct */
    double connect_timeout;     /* seconds, default 10 */
    double tls_timeout;         /* default 10 */
    double pool_idle_timeout;   /* how long an idle pooled connection is kept, default 60 */
    size_t pool_max_per_key;    /* idle connections kept per (host, port, tls), default 32 */
};

/* Validates the config (pins, CIDRs, DNS addresses, proxy URL). 0 or -1 + one-line err. */
int upstream_config_check(const struct upstream_config *cfg, char *err, size_t errlen);

/* Adds one of vaultgate's own addresses (listeners) to the prohibited set. Before workers start. */
int upstream_add_own_address(const struct sockaddr *sa);

struct upstream_ctx;

struct upstream_ctx *upstream_ctx_new(struct event_base *base, const struct upstream_config *cfg,
                                      char *err, size_t errlen);
/* Frees the context, its pool and its requests, when the loop ends (the connections freed are
 * closed at once: cio_base_end). */
void upstream_ctx_free(struct upstream_ctx **cp);

/* How a delivered connection came (the flags of upstream_cb's how). */
#define UPSTREAM_VIA_TUNNEL 1u /* it went through --upstream-proxy */
#define UPSTREAM_POOLED     2u /* it served a response before: taken from the pool */

/*
 * Called once with a connected (and, for tls, verified) connection that the caller now owns
 * (cio.h: reading on, no callbacks, no timeouts; a consumer that needs a bufferevent makes one
 * with cio_to_bufferevent), or with NULL and the error; how holds UPSTREAM_VIA_TUNNEL and
 * UPSTREAM_POOLED. Never called from inside upstream_get().
 */
typedef void (*upstream_cb)(void *arg, struct cio *io, enum upstream_err err, unsigned how);

struct upstream_req;

/* The tls argument of upstream_get/upstream_release: 0 for plain TCP, or TLS offering ALPN
 * http/1.1 only, or h2 and http/1.1 (the server picks: upstream_alpn_h2 says which). Pooled
 * connections are kept apart by it. */
#define UPSTREAM_PLAIN  0
#define UPSTREAM_TLS    1
#define UPSTREAM_TLS_H2 2

/* True when the TLS connection io negotiated h2. */
bool upstream_alpn_h2(const struct cio *io);

/*
 * Gets a connection to host:port (host normalised; TLS with SNI = host and host-name
 * verification when tls). Reuses a pooled idle connection when one is alive: one that shows no
 * sign of a close, looked at with a non-blocking peek at its socket unless the caller can send
 * its request again on a fresh connection should the reused one turn out closed (retryable).
 * Returns a handle for upstream_cancel (invalid after the callback ran), or NULL if it could not
 * even start (then cb is not called).
 */
struct upstream_req *upstream_get(struct upstream_ctx *c, const char *host, int port, int tls,
                                  bool retryable, upstream_cb cb, void *arg);

/* Cancels a pending request; the callback will not run. */
void upstream_cancel(struct upstream_req **rp);

/*
 * Gives a connection that finished a response cleanly back to the pool (the pool owns it
 * afterwards and frees it when it closes or idles out; *io NULL'd). io must have nothing
 * buffered either way; one that has is freed.
 */
void upstream_release(struct upstream_ctx *c, const char *host, int port, int tls, struct cio **io);

/* Whether the pool holds an idle connection for (host, port, tls) (host as upstream_get normalises
 * it): upstream_get will then most likely be served from it. Costs a hash lookup. */
bool upstream_pooled(struct upstream_ctx *c, const char *host, int port, int tls);

/* Counters of one worker's upstream context (for metrics and tests). */
struct upstream_stats {
    uint64_t dials;          /* connect(2) calls */
    uint64_t dns_queries;    /* A and AAAA queries sent */
    uint64_t pool_hits;      /* upstream_get served from the pool */
    uint64_t pool_misses;    /* upstream_get that had to connect */
    uint64_t tls_handshakes; /* verified handshakes completed */
    uint64_t tls_resumed;    /* ... of which resumed a session */
    uint64_t pool_idle;      /* idle connections in the pool now */
};

void upstream_ctx_stats(const struct upstream_ctx *c, struct upstream_stats *out);

/* Short name of an error for Proxy-Status and metrics: "dns_error", "connection_refused", ... */
const char *upstream_err_type(enum upstream_err e);
int upstream_err_status(enum upstream_err e); /* 403, 502 or 504 */

#endif
