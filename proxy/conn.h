/*
 * conn.h - one client connection on a worker: TLS accept, strict HTTP/1.1 request handling,
 * policy decision, injection, upstream relay and keep-alive (ARCHITECTURE.md "One request").
 *
 * A connection lives on the worker that accepted it; conn_close() is its only teardown.
 */
#ifndef VG_CONN_H
#define VG_CONN_H

#include <sys/socket.h>

#include <event2/util.h>

#include "proxy/listen.h"
#include "proxy/tls.h"

struct conn;

/* Takes ownership of fd (an accepted socket of listener la) and starts the TLS handshake.
 * On failure the fd is closed and the failure logged. */
void conn_accept(struct listen_worker *w, const struct listen_addr *la, evutil_socket_t fd,
                 const struct sockaddr *sa, int salen);

/*
 * ClientHello of c: host is the normalised SNI, or NULL when there is none (or it is not a
 * valid name). Takes the connection's policy decision and fills out (out->cert a new reference
 * the caller frees) and returns 0; or returns -1 with *alert set (the handshake is aborted).
 */
int conn_client_hello(struct conn *c, const char *host, struct tls_leaf *out, int *alert);

/* Graceful stop: idle connections close now, busy ones after their current response. */
void conn_drain_all(struct listen_worker *w);

/* Closes every connection of w at once. */
void conn_abort_all(struct listen_worker *w);

/*
 * Around a worker's event loop, on its thread: begin makes the thread's log lines go out in one
 * write per loop turn (audit/log.c batching); end writes what is left and stops that.
 */
void conn_worker_begin(struct listen_worker *w);
void conn_worker_end(struct listen_worker *w);

/*
 * A connection over the connection limit (listen.c): takes ownership of fd like conn_accept(),
 * answers 503 with `Proxy-Status: vaultgate; error=connection_limit_reached` as soon as it can
 * say anything (at once on a plain listener, right after the TLS handshake on a TLS one) and
 * closes; nothing is forwarded. The handshake timeout still applies.
 */
void conn_accept_busy(struct listen_worker *w, const struct listen_addr *la, evutil_socket_t fd,
                      const struct sockaddr *sa, int salen);

#endif
