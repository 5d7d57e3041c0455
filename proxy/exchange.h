/*
 * exchange.h - one request's life, whatever carries its bytes (ARCHITECTURE.md "One request"):
 * the checks of SPEC §4, the policy decision, the rewrite and injection, the upstream
 * connection, the request and response relay, reflection masking, and the audit counts, metrics
 * and log line of that request.
 *
 * A transport (h1conn.c today; an HTTP/2 stream later) owns the client side: it parses the
 * request, creates an exchange for it, feeds it the head and the body, and writes what the
 * exchange hands back in its own framing. The exchange never calls the transport's input
 * handlers: it returns verdicts (exchange_body's pause) and reports events through struct
 * exchange_ops - a response head, body bytes, the end, an answer of its own, and how it ended.
 *
 * Ownership: the transport creates and frees the exchange (exchange_free is the only teardown,
 * safe inside any callback); a connection that closes frees its exchange first. The exchange
 * owns its upstream connection and gives it back to the pool, or to the transport on a
 * WebSocket upgrade.
 */
#ifndef VG_EXCHANGE_H
#define VG_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "audit/log.h"
#include "common/hostname.h"
#include "http/http1.h"

struct worker;
struct worker_module;
struct listen_addr;
struct policy;
struct mask;
struct wsmask;
struct exchange;
struct origin_source;

/* How the response body reaches the transport (its framing is the transport's). */
enum exch_body {
    EXCH_BODY_NONE = 0, /* no body (1xx, 204, 304; HEAD with no length announced) */
    EXCH_BODY_LENGTH,   /* exactly len bytes follow (a HEAD response: announced, none follow) */
    EXCH_BODY_UNKNOWN,  /* bytes until the end */
};

/* How an exchange ended (struct exchange_ops.finished). */
enum exch_end {
    EXCH_END_DONE = 0, /* response complete, request complete: the connection may go on */
    EXCH_END_CLOSE,    /* complete, but the connection closes once the response is flushed */
    EXCH_END_ABORT,    /* a response was under way and cannot be finished: close now */
    EXCH_END_UPGRADE,  /* 101 WebSocket: exchange_take_upgrade() hands over the upstream */
    EXCH_END_CONNECT,  /* CONNECT allowed: exchange_connect_target() says where */
};

/*
 * What exchanges know of the connection that carries them. Owned by the transport, it outlives
 * every exchange on the connection; the snapshot at the end is taken and given back by the
 * exchanges (kept across requests to spare reference counting).
 *
 * The client's address and the host are one allocated block, sized to them (exch_conn_names,
 * exch_conn_set_host). The struct owns the block and the snapshot: a connection that hands its
 * exch_conn on (ingress to a transport, an intercepted CONNECT back to ingress) moves it with
 * exch_conn_take, which leaves the source without either; exch_conn_release frees both.
 */
struct exch_conn {
    struct worker *w;
    const struct listen_addr *la;
    uint64_t id;
    char *client_addr; /* "ip:port"; the block's start, NULL before exch_conn_names */
    char *host;        /* the connection's host (SNI, CONNECT target), or "": in the block */
    bool tls;          /* TLS terminated here */
    bool proxy;        /* accepted on the explicit-proxy listener */
    bool host_fixed;   /* one host for the connection; else each request names its own */
    int default_port;  /* the port a Host may name besides none and the listener's */
    const char *proto; /* the client's protocol for log lines: "http/1.1", "h2" */
    bool draining;     /* stop requested: no new requests on this connection */
    const struct origin_source *origins; /* where the upstreams come from; NULL: the worker's */
    /* caches */
    struct policy *policy; /* snapshot of the last request (a new one only after a reload) */
    uint64_t policy_gen;
};

/* Frees the names and what the caches hold (the transport's teardown). */
void exch_conn_release(struct exch_conn *cc);

/* The longest client address kept ("[v6 address]:port" is 53 bytes). */
#define EXCH_CLIENT_MAX 63

/* Sets the client's address and the host (NULL: none) in one new block, sized to them; the old
 * block is freed (either string may point into it). 0, or -1 when out of memory (cc unchanged). */
int exch_conn_names(struct exch_conn *cc, const char *client, const char *host);

/* Changes the host, keeping the client's address (exch_conn_names). 0 or -1. */
int exch_conn_set_host(struct exch_conn *cc, const char *host);

/* dst takes src over, the names and the snapshot included: src holds neither afterwards (its
 * other fields stay as they were). */
void exch_conn_take(struct exch_conn *dst, struct exch_conn *src);

/* A log line of the connection cc (its id, client, listener and host; never a path), for the
 * transports and ingress. reason and detail may be NULL. */
void exch_conn_log(const struct exch_conn *cc, enum log_level lvl, const char *event,
                   const char *reason, const char *detail);

/* The exchange's parts of each worker (proxy/modules.c registers them): the memory of ended
 * exchanges kept for the next requests (at most VG_WORKER_EXCHANGES), the deadline queues of the
 * exchanges' timers, made at the start from the run's timeouts, and the maskers kept between
 * requests, dropped after a reload and at the end (exchange_life.c); the requests parked for a
 * token, woken by the token manager (exchange_cred.c). */
extern const struct worker_module exchange_spares_module;
extern const struct worker_module exchange_timers_module;
extern const struct worker_module exchange_masks_module;
extern const struct worker_module exchange_tokens_module;

/* The worker's maskers kept between requests: those of another snapshot than the worker's
 * current one are freed (wiped), or all of them (all: the worker's teardown). Worker thread. */
void exchange_worker_masks(struct worker *w, bool all);

/*
 * The transport's side. Every function may free nothing of the exchange; after finished the
 * transport may call exchange_free (the exchange touches nothing of the transport afterwards).
 */
struct exchange_ops {
    /* A response head (1xx included; h->status). close: the connection must close after this
     * response. The transport writes it in its framing. 0 or -1. */
    int (*head)(void *t, struct http_head *h, enum exch_body body, uint64_t len, bool close);
    /* Response body bytes: the transport takes all of buf. 0 or -1. */
    int (*body)(void *t, struct evbuffer *buf);
    /* The response body is complete; trailers (masked, filtered by http1_trailers_filter) when
     * the upstream sent any, else NULL. The transport relays them when its framing can carry
     * them. 0 or -1. */
    int (*end)(void *t, struct http_head *trailers);
    /* An answer of vaultgate's own (SPEC §4 Proxy-Status), instead of any response; the
     * connection closes after it. host may be NULL. 0 or -1. */
    int (*error)(void *t, int status, const char *type, const char *details, const char *host);
    /* Bytes the client side takes before it counts as full. 0 arms one exchange_drained() call
     * for when it has drained again. */
    size_t (*room)(void *t);
    /* The exchange takes request body bytes now (again, after exchange_body returned 1). */
    void (*more)(void *t);
    /* Sends what head/body/end produced so far (one write per batch of upstream input). */
    void (*flush)(void *t);
    /* The exchange ended. */
    void (*finished)(void *t, enum exch_end how);
};

/* A new exchange for a request whose first byte arrived at *t0 (or now when NULL). NULL when
 * out of memory. */
struct exchange *exchange_new(struct exch_conn *cc, const struct exchange_ops *ops, void *t,
                              const struct timespec *t0);

/*
 * The request head arrived (req stays the transport's, valid until it frees the exchange).
 * The exchange checks and decides; it answers at once (finished) or asks for an upstream and
 * calls ops->more when the body may flow.
 */
void exchange_request(struct exchange *x, struct http1_msg *req);

/* Request body bytes (de-framed). 0: go on; 1: staged, but stop until ops->more; -1: the
 * exchange can take no more (it answered or aborted; finished was called). */
int exchange_body(struct exchange *x, const char *data, size_t len);

/* The request body is complete. 0 or -1 as exchange_body. */
int exchange_body_end(struct exchange *x);

/* Sends what the body calls of one batch staged (one write instead of one per chunk). */
void exchange_flush(struct exchange *x);

/* The transport refuses the request itself (a malformed head: 400/405/431/501; too many
 * connections: 503): answered with the Proxy-Status type and fixed details, accounted and
 * logged with reason like any answer of the exchange, then finished. */
void exchange_reject(struct exchange *x, int status, const char *type, const char *details,
                     const char *reason);

/* Raw request bytes the transport read for this exchange (head, framing and body), for the log
 * line. */
void exchange_count_in(struct exchange *x, size_t n);

/* The request's host (normalised; "" before the head was checked). */
const char *exchange_host(const struct exchange *x);

/* The client side drained after room() returned 0. */
void exchange_drained(struct exchange *x);

/* The client went away (reason for the log line); the exchange is freed by the caller next. */
void exchange_client_gone(struct exchange *x, const char *reason);

/* True once a response (or an answer) has begun towards the client. */
bool exchange_responding(const struct exchange *x);

/* True once the whole request went to the upstream (the exchange then only waits for the
 * response). */
bool exchange_sent(const struct exchange *x);

/* After EXCH_END_UPGRADE: the upstream (now the caller's), the masker of a credentialed
 * WebSocket (or NULL; the caller's), whether the 101 named an extension never offered (the
 * WebSocket must be closed with 1002), and whether the upstream went through --upstream-proxy. */
void exchange_take_upgrade(struct exchange *x, struct bufferevent **up, struct wsmask **wsm,
                           bool *bad_ext, bool *route_tunnel);

/* After EXCH_END_CONNECT: the CONNECT target's host (normalised) and port, and whether the
 * host is designated (else, in default routing, it is tunnelled without interception). */
void exchange_connect_target(const struct exchange *x, const char **host, int *port, bool *tunnel);

/* The only teardown: cuts the upstream (with an RST when a message is incomplete), gives back
 * the caches to the connection, and frees x now or when the exchange's callback on the stack
 * returns. NULLs *xp. NULL-safe. */
void exchange_free(struct exchange **xp);

#endif
