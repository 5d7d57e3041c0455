/*
 * origin.h - one request's upstream behind one interface, whatever protocol carries it
 * (docs/internals/upstream.md "The origin interface"). The exchange submits the request head,
 * its body and its end, takes the response through callbacks, says when it wants more of it
 * (resume) or none for now (hold), and ends with release (a clean exchange) or cancel. It never
 * learns which protocol the upstream speaks: an adapter per protocol implements struct
 * origin_ops (origin_h1.c over a struct cio and the HTTP/1.1 response parser, origin_h2.c over
 * a stream of h2up.c), and origin.c picks one once the connection is there (h2o's
 * h2o_httpclient_t, nghttpx's DownstreamConnection).
 *
 * Ownership: origin_get() returns an origin that is the caller's until release, cancel or take;
 * each of them frees it (safe inside any of the origin's callbacks). No callback runs after it.
 */
#ifndef VG_ORIGIN_H
#define VG_ORIGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "http/http1.h"
#include "proxy/upstream.h"

struct worker;
struct origin;

/* How getting the upstream ended (struct origin_cbs.ready). */
enum origin_up {
    ORIGIN_UP_OK = 0,  /* connected: the request may be submitted */
    ORIGIN_UP_FAILED,  /* the dial failed with err (SPEC §4's answer for it) */
    ORIGIN_UP_NO_DIAL, /* no dial could even start */
    ORIGIN_UP_NO_MEM,  /* out of memory taking the connection */
};

/* Why a response cannot go on (struct origin_cbs.failed). */
enum origin_fail {
    ORIGIN_FAIL_EOF,      /* the upstream closed before the response ended */
    ORIGIN_FAIL_RESET,    /* the stream was reset, or its connection failed */
    ORIGIN_FAIL_IO,       /* reading or writing failed (detail: the TLS or socket error) */
    ORIGIN_FAIL_TIMEOUT,  /* the response went idle */
    ORIGIN_FAIL_PROTOCOL, /* a malformed response, or a response callback refused it */
};

/* Whether a failed request may be sent once more on another connection or stream. */
enum origin_retry {
    ORIGIN_RETRY_NO = 0,
    ORIGIN_RETRY_SAFE, /* no byte of an answer came: a bodyless GET/HEAD/OPTIONS may go again */
    ORIGIN_RETRY_ANY,  /* refused unprocessed: any bodyless request may go again */
};

/* What an origin can carry besides plain HTTP semantics (struct origin.caps). */
#define ORIGIN_CAP_GRPC 0x1u /* gRPC end to end: its responses may be read as gRPC messages */

/* The exchange's side: every callback gets arg. The origin may be freed by any of them. */
struct origin_cbs {
    struct http1_callbacks resp; /* the response: on_head (1xx too), on_body, on_trailers,
                                  * on_done, as the HTTP/1.1 parser calls them */
    /* origin_get's outcome (err: with ORIGIN_UP_FAILED). May run inside origin_start. */
    void (*ready)(void *arg, enum origin_up up, enum upstream_err err);
    /* A batch of response input went through resp: the exchange calls resume or hold. */
    void (*after)(void *arg);
    /* The response cannot go on (and resp.on_done will not come). detail: for the log line. */
    void (*failed)(void *arg, enum origin_fail f, enum origin_retry retry, const char *detail);
    /* The request body may flow again (origin_body returned 1 before). */
    void (*more)(void *arg);
};

struct origin_ops {
    /* Sends the request head h with a body of the given framing (HTTP1_BODY_NONE: none) and
     * length; sensitive: it carries a secret (wiped buffers, never indexed). 0 or -1. */
    int (*request)(struct origin *o, const struct http_head *h, enum http1_body body, uint64_t len,
                   bool sensitive);
    /* Request body bytes: 0, 1 when the origin holds enough for now (cbs->more follows), -1. */
    int (*body)(struct origin *o, const char *p, size_t n);
    /* A whole request body already in buf moves to the origin without a copy. 0 or -1. */
    int (*body_take)(struct origin *o, struct evbuffer *buf);
    /* The request body is complete. 0 or -1. */
    int (*body_end)(struct origin *o);
    /* Sends what was submitted so far (one write per batch). */
    void (*flush)(struct origin *o);
    /* The exchange took what was delivered: more response input may come (it may come at once,
     * inside this call). */
    void (*resume)(struct origin *o);
    /* No response input until resume (the client side is full). */
    void (*hold)(struct origin *o);
    /* After a 101: the connection, now the caller's (NULL when the origin cannot hand one
     * over); the origin is freed. */
    struct bufferevent *(*take)(struct origin *o);
    /* The exchange ended cleanly (req_done: the whole request went): the connection may serve
     * another request. Frees o. */
    void (*release)(struct origin *o, bool req_done);
    /* Gives up: the dial, the stream or the connection. abort: the upstream must not take what
     * it got as a complete request. Frees o. */
    void (*cancel)(struct origin *o, bool abort);
};

/* The part of every origin the exchange sees; an adapter's struct begins with it. */
struct origin {
    const struct origin_ops *ops; /* NULL until ready (origin.c's own while connecting) */
    const struct origin_cbs *cbs;
    void *arg;
    unsigned caps;     /* ORIGIN_CAP_* */
    bool route_tunnel; /* the connection came through --upstream-proxy */
};

/* What a request asks for: host (normalised) and port, tls (UPSTREAM_PLAIN, UPSTREAM_TLS,
 * UPSTREAM_TLS_H2), whether it could be sent again should a pooled connection turn out closed
 * (upstream_get's retryable), the worker's upstream context, and how long a response body may
 * stay idle once its head arrived (seconds). */
struct origin_want {
    const char *host;
    int port;
    int tls;
    bool retryable;
    struct upstream_ctx *up;
    int body_idle;
};

/* Where an exchange's origins come from: origin_get for the worker's upstreams, or a fake. */
struct origin_source {
    /* A new origin for want (NULL when out of memory), not yet started. */
    struct origin *(*get)(struct worker *w, const struct origin_want *want,
                          const struct origin_cbs *cbs, void *arg);
    /* Starts getting the connection: cbs->ready follows, maybe inside this call. */
    void (*start)(struct origin *o);
};

/* The worker's upstreams: a stream on a pooled HTTP/2 connection, a place in the queue of one
 * being made, a pooled HTTP/1.1 connection, or a dial of its own (upstream.c, h2up.c). */
extern const struct origin_source origin_upstreams;

/* The origins' part of each worker: the memory of ended origins (with an HTTP/1.1 response
 * parser and stage) kept for the next requests, at most VG_WORKER_ORIGINS (origin_spare.c). */
struct worker_module;
extern const struct worker_module origin_worker_module;

static inline int origin_request(struct origin *o, const struct http_head *h, enum http1_body body,
                                 uint64_t len, bool sensitive)
{
    return o->ops->request(o, h, body, len, sensitive);
}

static inline int origin_body(struct origin *o, const char *p, size_t n)
{
    return o->ops->body(o, p, n);
}

static inline int origin_body_take(struct origin *o, struct evbuffer *buf)
{
    return o->ops->body_take(o, buf);
}

static inline int origin_body_end(struct origin *o)
{
    return o->ops->body_end(o);
}

static inline void origin_flush(struct origin *o)
{
    o->ops->flush(o);
}

static inline void origin_resume(struct origin *o)
{
    o->ops->resume(o);
}

static inline void origin_hold(struct origin *o)
{
    o->ops->hold(o);
}

/* take, release and cancel NULL the caller's pointer; release and cancel are NULL-safe. */
static inline struct bufferevent *origin_take(struct origin **op)
{
    struct origin *o = *op;

    *op = NULL;
    return o->ops->take(o);
}

static inline void origin_release(struct origin **op, bool req_done)
{
    struct origin *o = *op;

    *op = NULL;
    if (o != NULL)
        o->ops->release(o, req_done);
}

static inline void origin_cancel(struct origin **op, bool abort)
{
    struct origin *o = *op;

    *op = NULL;
    if (o != NULL)
        o->ops->cancel(o, abort);
}

#endif
