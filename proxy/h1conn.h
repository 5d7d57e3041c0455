/*
 * h1conn.h - the HTTP/1.1 client transport: one client connection of a TLS, plain-HTTP or
 * explicit-proxy listener, from the moment ingress (ingress.h) hands it over to its close
 * (ARCHITECTURE.md "One request"). It owns the socket from then on, the request parser, the
 * framing of responses and the connection's timers, and hands each request to an exchange
 * (exchange.h); a CONNECT or a WebSocket turns it into a tunnel (tunnel.h), an intercepted
 * CONNECT goes back to TLS through its starter's hook.
 *
 * A connection lives on the worker that accepted it; h1_close() is its only teardown.
 */
#ifndef VG_H1CONN_H
#define VG_H1CONN_H

#include <stdbool.h>

struct cio;
struct worker_link;
struct worker_module;
struct exch_conn;

/* What the transport asks of the module that started it. */
struct h1conn_hooks {
    /*
     * An intercepted CONNECT: TLS is to be accepted on the connection, whose plain client I/O
     * (callbacks cleared; the client's early bytes in its input, the 200 perhaps still queued)
     * is the hook's from the call on, even when it fails. On 0 the hook has taken `from`'s place
     * in the worker's list and the connection's context (copied; its caches move); on -1 nothing
     * but the client I/O was taken and `from` closes as it would.
     */
    int (*tls)(struct worker_link *from, struct exch_conn *cc, struct cio *plain);
};

/*
 * Takes over a client connection that speaks HTTP/1.1: the client I/O (cio.h: plain, or TLS
 * after its handshake; callbacks replaced), the connection's context (copied; its caches move)
 * and its place in the worker's list (`from`), or a new place (from NULL: the connection joins
 * the worker here and gets its id). busy: over the connection limit, the first answer is 503 and
 * the connection ends. hooks (static, may be NULL: an intercepted CONNECT is then closed) serve
 * an intercepted CONNECT. Returns 0, or -1 (out of memory: io freed; `from` must close as it
 * would).
 */
int h1conn_start(struct worker_link *from, struct exch_conn *cc, struct cio *io, bool busy,
                 const struct h1conn_hooks *hooks);

/* The request parsers and stage buffers a worker keeps for its connections' next requests;
 * freed at the worker's end. */
extern const struct worker_module h1conn_worker_module;

/* The connections' timers: the worker's deadline queues (dlq.h), one per duration its HTTP/1.1
 * connections wait, made at the worker's start from the run's timeouts. */
extern const struct worker_module h1timer_worker_module;

#endif
