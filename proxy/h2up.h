/*
 * h2up.h - HTTP/2 connections to upstreams (SPEC §10 "Upstream"): an nghttp2 client session
 * per connection, pooled per worker by host and port, carrying many exchanges' streams at once
 * up to the server's SETTINGS_MAX_CONCURRENT_STREAMS.
 *
 * An exchange opens a stream on a pooled connection (h2up_open) or on a connection just made
 * whose TLS handshake chose h2 (h2up_attach), sends its head and body, and gets the response
 * through the same callbacks the HTTP/1.1 response parser calls (struct http1_callbacks), then
 * `after` once per batch of frames. Response DATA goes back to the server's stream window only
 * when the exchange says so (h2up_consume), so a slow client stalls only its own stream.
 *
 * Requests that arrive together share one connection: while a connection to host:port is being
 * dialled (h2up_dial) or has not yet read the server's SETTINGS, h2up_open puts the stream in
 * that connection's queue instead of having the exchange dial one more, and `placed` says how
 * it ended: a stream on the connection (up to its MAX_CONCURRENT_STREAMS), or dial yourself.
 *
 * Memory nghttp2 allocates for a session (header blocks with the injected secret among them) is
 * wiped when freed; a credentialed request's fields are never put into the HPACK table.
 */
#ifndef VG_H2UP_H
#define VG_H2UP_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "http/http1.h"
#include "proxy/upstream.h"

struct worker;
struct worker_module;
struct h2up;
struct h2up_stream;

/* What became of a stream that waited for its connection (h2up_open said H2UP_WAITING). */
enum h2up_placed {
    H2UP_PLACED_OPEN,   /* a stream on the connection now: send the request */
    H2UP_PLACED_RETRY,  /* no room after all, or the connection went away: h2up_open again */
    H2UP_PLACED_H1,     /* the server chose http/1.1: dial a connection of the request's own */
    H2UP_PLACED_FAILED, /* the dial failed with err: that is this request's answer too */
};

/* What h2up_open found. */
enum h2up_how {
    H2UP_OPENED,  /* a stream on a pooled connection with room */
    H2UP_WAITING, /* a stream queued on a connection still being made; ops->placed follows */
    H2UP_NONE,    /* nothing to share: the exchange dials (and announces it, h2up_dial) */
};

struct h2up_ops {
    struct http1_callbacks cb; /* on_head (1xx too), on_body, on_trailers, on_done */
    /* After the frames of one read reached the callbacks above; err: the stream was reset or
     * the connection failed (and on_done will not come). */
    void (*after)(void *arg, bool err);
    /* The request body may flow again (h2up_body returned 1 before). */
    void (*more)(void *arg);
    /* A waiting stream's outcome. For every p but OPEN the stream is already freed: the
     * exchange forgets its handle. Called from the loop, never inside h2up_open. */
    void (*placed)(void *arg, enum h2up_placed p, enum upstream_err err);
};

/*
 * A stream for a request to host:port: on a pooled connection with room (*how OPENED), queued
 * on a connection being made (WAITING), or NULL (NONE). The handle is the exchange's in the
 * first two cases; h2up_close gives it up, queued or not.
 */
struct h2up_stream *h2up_open(struct worker *w, const char *host, int port,
                              const struct h2up_ops *ops, void *arg, enum h2up_how *how);

/* Announces a dial to host:port offering h2, so that h2up_open queues the requests that come
 * meanwhile on it. The handle goes to h2up_attach or h2up_dial_end; NULL when out of memory
 * (then nothing waits for it). */
struct h2up *h2up_dial(struct worker *w, const char *host, int port);

/* The announced dial ended without an HTTP/2 connection: p (RETRY when it was given up, H1, or
 * FAILED with err) goes to the requests queued on it, from the loop. NULLs *dp; NULL is fine. */
void h2up_dial_end(struct h2up **dp, enum h2up_placed p, enum upstream_err err);

/* A pooled connection over bev (TLS, ALPN h2, taken) - the announced dial *dp when there is one
 * (NULLed), else a new one - and a stream on it; NULL when out of memory (bev freed, the
 * queued requests told to retry). */
struct h2up_stream *h2up_attach(struct worker *w, struct h2up **dp, const char *host, int port,
                                struct bufferevent *bev, bool route_tunnel,
                                const struct h2up_ops *ops, void *arg);

/* Whether the stream's connection came through --upstream-proxy. */
bool h2up_route_tunnel(const struct h2up_stream *s);

/* Whether the server refused the stream unprocessed (REFUSED_STREAM, or above a GOAWAY's last
 * stream) before any response head: the request may be sent again. */
bool h2up_refused(const struct h2up_stream *s);

/*
 * Sends the request head: h (Host becomes :authority, the target :path, scheme https), a body
 * of len bytes (len_known) or of unknown length, or none (no_body). sensitive: never index its
 * fields (it carries a secret). 0 or -1.
 */
int h2up_request(struct h2up_stream *s, const struct http_head *h, bool no_body, bool len_known,
                 uint64_t len, bool sensitive);

/* Request body bytes: 0, or 1 when the stream holds enough for now (ops->more follows). */
int h2up_body(struct h2up_stream *s, const char *p, size_t n);
/* A whole request body already held in buf: its chains move to the stream without a copy
 * (blocks held by reference keep their cleanup). 0 or -1. */
int h2up_body_take(struct h2up_stream *s, struct evbuffer *buf);
/* The request body is complete. 0 or -1. */
int h2up_body_end(struct h2up_stream *s);

/* Gives the response bytes delivered so far back to the server's stream window. */
void h2up_consume(struct h2up_stream *s);

/* Ends the exchange's use of the stream and NULLs *sp: reset (CANCEL) while the response or
 * the request body is incomplete. */
void h2up_close(struct h2up_stream **sp);

/* Closes every connection of w (its teardown). */
void h2up_free_all(struct worker *w);

/* The worker's HTTP/2 upstream sessions, closed at its end (h2up_free_all). */
extern const struct worker_module h2up_worker_module;

#endif
