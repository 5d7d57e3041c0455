/*
 * tls.h - the server side of vaultgate's TLS mechanics: the server SSL_CTX, the ClientHello
 * callback that reads and normalises the SNI for the connection's decision (struct tls_hello, set
 * on each SSL by the module that accepts it), the certificate callback that installs the leaf
 * that decision gives (full handshakes only), ALPN, and SNI parsing; and the TLS 1.3 suites, which
 * the upstream context offers too. It decides nothing itself and knows no transport.
 */
#ifndef VG_TLS_H
#define VG_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

/*
 * vaultgate's TLS 1.3 suites in its order of preference: served so by the server context, and
 * offered so to upstreams (upstream.c). AES-128-GCM first (TLS 1.2's order too), as Go and
 * BoringSSL order them on hardware with AES instructions - about a fifth less CPU per byte than
 * AES-256-GCM, and SHA-256 (which has its own instructions) for the handshake's hashes and keys
 * instead of SHA-384 (docs/internals/proxy.md, "TLS choices"). The server gives a client that
 * lists ChaCha20 first (one without AES instructions) ChaCha20 (SSL_OP_PRIORITIZE_CHACHA).
 */
#define TLS_SUITES_13 "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"

/* What the certificate callback serves for one host. */
struct tls_leaf {
    X509 *cert;    /* new reference, freed by the callback after use */
    EVP_PKEY *key; /* borrowed from the CA */
    X509 *chain;   /* the intermediate, borrowed */
};

/*
 * A server SSL_CTX: TLS 1.2 and 1.3 only, ECDHE X25519/P-256, ECDSA suites, ALPN h2 (preferred)
 * and http/1.1,
 * session tickets keyed by ticket_keys (80 bytes, shared by every worker so a ticket from one
 * worker resumes on another), no server-side session cache, released buffers on idle
 * connections. The name is decided per connection by the ClientHello callback, the certificate
 * installed by the certificate callback (full handshakes only: a resumed one sends none).
 * Caller frees with SSL_CTX_free. NULL + err.
 */
SSL_CTX *tls_server_ctx_new(const unsigned char ticket_keys[80], char *err, size_t errlen);

/*
 * The decision of one connection's ClientHello, embedded in whatever accepts it. Both run inside
 * the handshake, on the connection's thread.
 * decide: on every ClientHello, resumed handshakes included. host is the normalised SNI, or NULL
 * when there is none (or it is not a host name). Returns 0 (accepted), or -1 with *alert set
 * (the handshake is aborted).
 * leaf: only when the handshake sends a certificate (full handshakes), after decide accepted.
 * Fills out (out->cert a new reference, freed by the caller) and returns 0, or returns -1 (the
 * handshake ends with internal_error).
 */
struct tls_hello {
    int (*decide)(struct tls_hello *h, const char *host, int *alert);
    int (*leaf)(struct tls_hello *h, struct tls_leaf *out);
};

/* A new SSL for an accepted connection whose ClientHello h decides (h must outlive the
 * handshake, or be detached first). NULL when out of memory. */
SSL *tls_server_ssl_new(SSL_CTX *ctx, struct tls_hello *h);

/* Detaches the decision from ssl (before it is freed: the SSL may outlive it). NULL-safe. */
void tls_server_ssl_detach(SSL *ssl);

/*
 * Extracts the host_name entry of a raw server_name extension body (RFC 6066 §3). Returns its
 * length and points *name into p, or returns 0 when there is none or the body is malformed.
 */
size_t tls_sni_from_ext(const unsigned char *p, size_t len, const unsigned char **name);

/*
 * The host_name of the SNI extension of a raw ClientHello handshake message (hs: type byte,
 * 3-byte length, body), as seen on a tunnel before any TLS library touched it. Returns its
 * length and points *name into hs, or 0 when there is none or the message is malformed.
 */
size_t tls_sni_from_client_hello(const unsigned char *hs, size_t len, const unsigned char **name);

/* Reason text of the last OpenSSL error on this thread (drains the queue) into buf. */
const char *tls_error_text(char *buf, size_t len);

#endif
