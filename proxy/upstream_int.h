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
#include <event2/event.h>
#include <openssl/ssl.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include "common/hostname.h"
#include "proxy/addr.h"
#include "proxy/upstream.h"

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
 * Takes io (host normalised) if it is clean and there is room: returns 0 and the pool owns io
 * (and frees it when it closes or idles out). Returns -1 and the caller still owns io.
 */
int upstream_pool_put(struct upstream_pool *p, const char *host, int port, int tls, struct cio *io);

/* A live idle connection for the key, with no callbacks or timeouts and reading on; the caller
 * owns it. */
struct cio *upstream_pool_get(struct upstream_pool *p, const char *host, int port, int tls,
                              bool peek);

size_t upstream_pool_idle(const struct upstream_pool *p);
/* Idle connections kept for (host, port, tls): no check of them, no allocation. */
size_t upstream_pool_count(struct upstream_pool *p, const char *host, int port, int tls);

/* ---- the request state machine, shared by upstream.c and upstream_tunnel.c ---------------- */

/* Caps (memory per worker and per request). */
#define UPSTREAM_MAX_ADDRS      16   /* resolved addresses kept per request */
#define UPSTREAM_PROXY_HEAD_MAX 8192 /* the --upstream-proxy's CONNECT answer head */
#define UPSTREAM_SESS_SLOTS     256  /* TLS sessions cached per worker (direct-mapped) */

#define UPSTREAM_DEFAULT_CONNECT_TIMEOUT 10.0
#define UPSTREAM_DEFAULT_TLS_TIMEOUT     10.0
#define UPSTREAM_DEFAULT_IDLE_TIMEOUT    60.0
#define UPSTREAM_DEFAULT_POOL_MAX        32

struct sess_slot {
    SSL_SESSION *sess;
    char host[HOSTNAME_BUFSZ];
};

enum req_state {
    RQ_START,      /* on the ready list: dial (pin, literal) or deliver an early error */
    RQ_POOL,       /* on the ready list: deliver the pooled connection in conn */
    RQ_DNS,        /* waiting for the A / AAAA answers */
    RQ_CONNECT,    /* nonblocking connect in progress on fd */
    RQ_PROXY_SEND, /* writing the CONNECT request to the proxy */
    RQ_PROXY_READ, /* reading the proxy's answer head */
    RQ_TLS,        /* handshake in progress on conn */
};

struct dns_query {
    struct upstream_req *req; /* NULL once the request is gone: the callback frees the query */
    struct evdns_request *handle;
};

struct upstream_req {
    struct upstream_ctx *ctx;
    struct upstream_req *prev, *next;   /* in-flight list of ctx */
    struct upstream_req *rprev, *rnext; /* ready list of ctx */
    bool ready;
    unsigned rgen;
    upstream_cb cb;
    void *arg;
    enum req_state state;
    char host[HOSTNAME_BUFSZ];
    int kind; /* HOSTNAME_DNS, HOSTNAME_IPV4, HOSTNAME_IPV6 */
    int port;
    int tls; /* 0 plain, UPSTREAM_TLS (http/1.1) or UPSTREAM_TLS_H2 (h2 offered) */
    bool tunnel;
    const char *dial_host; /* host itself, or the proxy's host */
    int dial_port;
    enum upstream_err early_err; /* RQ_START with no addresses: this error */
    struct event *timer;         /* deadline of the DNS and TLS phases, created on first use */
    struct event *io;
    evutil_socket_t fd;
    struct cio *conn; /* the connection being delivered (TLS handshake, or pooled) */
    struct dns_query *q4, *q6;
    bool prohibited_seen;
    enum upstream_err last_err;
    size_t naddrs, next_addr;
    union upstream_sa addrs[UPSTREAM_MAX_ADDRS];
    char *pbuf; /* tunnel: CONNECT request, then the answer head */
    size_t plen, pdone;
};

struct upstream_ctx {
    struct event_base *base;
    struct evdns_base *dns;
    SSL_CTX *ssl_ctx;
    struct upstream_pin *pins;
    size_t npins;
    struct addr_cidr *allow;
    size_t nallow;
    struct localaddr *local; /* the machine's addresses, never dialled */
    bool have_proxy;
    char proxy_host[HOSTNAME_BUFSZ];
    int proxy_port;
    int proxy_kind;
    struct timeval connect_tv, tls_tv;
    struct upstream_pool *pool;
    struct sess_slot *sess;
    struct upstream_req *reqs;
    /* Requests whose next step must run from the loop, not inside upstream_get. */
    struct event *ready_ev;
    struct upstream_req *ready_head, *ready_tail;
    unsigned ready_gen;
    struct upstream_stats stats;
};

/* upstream.c */
void upstream_finish(struct upstream_req *r, struct cio *io, enum upstream_err err);
int upstream_wait_fd(struct upstream_req *r, short what, const struct timeval *tv);
void upstream_connected(struct upstream_req *r);

/* upstream_tunnel.c */
void upstream_proxy_send(struct upstream_req *r);
void upstream_proxy_read(struct upstream_req *r);

#endif
