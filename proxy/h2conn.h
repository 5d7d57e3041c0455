/*
 * h2conn.h - the HTTP/2 client transport (SPEC §10): a TLS connection that negotiated "h2",
 * framed by an nghttp2 server session; each stream is one request, carried by an exchange
 * (exchange.h) exactly as HTTP/1.1 requests are.
 *
 * A connection lives on the worker that accepted it; h2_close() is its only teardown, and it
 * frees every stream's exchange first.
 */
#ifndef VG_H2CONN_H
#define VG_H2CONN_H

#include <stdbool.h>

#include <event2/bufferevent.h>

struct worker_link;
struct worker_module;
struct exch_conn;

/*
 * Takes over a client connection whose TLS handshake chose "h2": the bufferevent (callbacks
 * replaced), the connection's context (copied; its caches move), and its place in the worker's
 * list. busy: over the connection limit, every request is answered 503 and the connection ends.
 * Returns 0, or -1 (out of memory: bev freed; `from` must close as it would).
 */
int h2conn_start(struct worker_link *from, struct exch_conn *cc, struct bufferevent *bev,
                 bool busy);

/* The worker's spare streams (h2conn_stream.c): made at its start, freed at its end. */
extern const struct worker_module h2stream_worker_module;

#endif
