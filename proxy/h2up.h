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
 * Memory nghttp2 allocates for a session (header blocks with the injected secret among them) is
 * wiped when freed; a credentialed request's fields are never put into the HPACK table.
 */
#ifndef VG_H2UP_H
#define VG_H2UP_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "proxy/http1.h"

struct worker;
struct h2up_stream;

struct h2up_ops {
    struct http1_callbacks cb; /* on_head (1xx too), on_body, on_trailers, on_done */
    /* After the frames of one read reached the callbacks above; err: the stream was reset or
     * the connection failed (and on_done will not come). */
    void (*after)(void *arg, bool err);
    /* The request body may flow again (h2up_body returned 1 before). */
    void (*more)(void *arg);
};

/* A stream on a pooled HTTP/2 connection to host:port that has room for one, or NULL. */
struct h2up_stream *h2up_open(struct worker *w, const char *host, int port,
                              const struct h2up_ops *ops, void *arg);

/* A new pooled connection over bev (TLS, ALPN h2, taken), and a stream on it; NULL when out of
 * memory (bev freed). */
struct h2up_stream *h2up_attach(struct worker *w, const char *host, int port,
                                struct bufferevent *bev, bool route_tunnel,
                                const struct h2up_ops *ops, void *arg);

/* Whether the stream's connection came through --upstream-proxy. */
bool h2up_route_tunnel(const struct h2up_stream *s);

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

/* Ends the exchange's use of the stream (reset when it is still open) and NULLs *sp. */
void h2up_close(struct h2up_stream **sp);

/* Closes every connection of w (its teardown). */
void h2up_free_all(struct worker *w);

#endif
