/*
 * h1conn.h - the HTTP/1.1 client transport: one client connection of a TLS, plain-HTTP or
 * explicit-proxy listener, from accept to close (ARCHITECTURE.md "One request"). It owns the
 * socket, the TLS accept, the request parser, the framing of responses and the connection's
 * timers, and hands each request to an exchange (exchange.h); a CONNECT or a WebSocket turns it
 * into a tunnel (tunnel.h).
 *
 * A connection lives on the worker that accepted it; h1_close() is its only teardown.
 */
#ifndef VG_H1CONN_H
#define VG_H1CONN_H

#include <sys/socket.h>

#include <event2/util.h>

#include "proxy/tls.h"

struct worker;
struct listen_addr;
struct h1conn;

/* Takes ownership of fd (an accepted socket of listener la) and starts the TLS handshake (or
 * the first request on a plain listener). On failure the fd is closed and the failure logged. */
void h1conn_accept(struct worker *w, const struct listen_addr *la, evutil_socket_t fd,
                   const struct sockaddr *sa, int salen);

/*
 * A connection over the connection limit: takes ownership of fd like h1conn_accept(), answers
 * 503 with `Proxy-Status: vaultgate; error=connection_limit_reached` as soon as it can say
 * anything (at once on a plain listener, right after the TLS handshake on a TLS one) and
 * closes; nothing is forwarded. The handshake timeout still applies.
 */
void h1conn_accept_busy(struct worker *w, const struct listen_addr *la, evutil_socket_t fd,
                        const struct sockaddr *sa, int salen);

/*
 * ClientHello of c: host is the normalised SNI, or NULL when there is none (or it is not a
 * valid name). Takes the connection's decision on the name, fills out (out->cert a new
 * reference the caller frees) and returns 0; or returns -1 with *alert set (the handshake is
 * aborted).
 */
/* Frees the request parsers and buffers w keeps for its connections' next requests (the
 * worker's teardown). */
void h1conn_worker_free(struct worker *w);

int h1conn_client_hello(struct h1conn *c, const char *host, struct tls_leaf *out, int *alert);

#endif
