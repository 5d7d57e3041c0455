/*
 * ingress.h - how a client connection comes in (ARCHITECTURE.md "One request"): the accepted
 * socket of a proxy listener, the connection limit (503 past it), the TLS accept with the
 * ClientHello decision (the SNI, the CA's reach, the leaf), and, once the handshake is done, the
 * transport that ALPN picked, started with the socket and what is known of the connection.
 * Plain-HTTP and explicit-proxy listeners start HTTP/1.1 at once; an intercepted CONNECT comes
 * back here for its TLS (the HTTP/1.1 transport's hook).
 *
 * A transport is one row of the table in ingress.c (its ALPN name and its start function); the
 * transports never call back into this module except through that hook.
 */
#ifndef VG_INGRESS_H
#define VG_INGRESS_H

struct worker_module;

/* Accepts on the TLS, plain-HTTP and explicit-proxy listeners; per worker: the server SSL_CTX
 * and the connection-limit notes. */
extern const struct worker_module ingress_worker_module;

/* The transport that carries a connection whose handshake selected ALPN protocol p (n bytes;
 * n == 0: none): its protocol name, "h2" or "http/1.1". */
const char *ingress_transport(const unsigned char *p, unsigned n);

#endif
