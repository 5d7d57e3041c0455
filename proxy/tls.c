/*
 * tls.c - server-side TLS of the proxy listeners.
 *
 * Guarantees: TLS 1.2 and 1.3 only; every ClientHello's SNI, validated and normalised by
 * hostname_normalize(), is put to the connection's own decision (struct tls_hello, reached
 * through the SSL's ex_data: this file calls no transport or ingress function), resumed
 * handshakes included; an SSL without one aborts the handshake. The certificate for the accepted
 * name is asked for only when the handshake sends one (the certificate callback: full
 * handshakes, never resumed ones). One SSL_CTX per worker, built at start, never per connection;
 * the leaf is switched in per full handshake with SSL_use_cert_and_key (measured against a cached
 * per-leaf SSL_CTX in docs/internals/proxy.md).
 */
#include "proxy/tls.h"
#include "common/hostname.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/tls1.h>
#include <openssl/x509v3.h>

static int conn_ex_index = -1;
static pthread_once_t ex_once = PTHREAD_ONCE_INIT;

static void ex_init(void)
{
    conn_ex_index = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

const char *tls_error_text(char *buf, size_t len)
{
    unsigned long e, last = 0;

    while ((e = ERR_get_error()) != 0)
        last = e;
    if (last == 0)
        snprintf(buf, len, "unknown TLS error");
    else
        ERR_error_string_n(last, buf, len);
    return buf;
}

size_t tls_sni_from_ext(const unsigned char *p, size_t len, const unsigned char **name)
{
    size_t list_len, pos, n;

    if (len < 2)
        return 0;
    list_len = ((size_t)p[0] << 8) | p[1];
    if (list_len + 2 != len)
        return 0;
    pos = 2;
    while (pos + 3 <= len) {
        unsigned type = p[pos];

        n = ((size_t)p[pos + 1] << 8) | p[pos + 2];
        pos += 3;
        if (pos + n > len)
            return 0;
        if (type == TLSEXT_NAMETYPE_host_name) {
            *name = p + pos;
            return n;
        }
        pos += n;
    }
    return 0;
}

size_t tls_sni_from_client_hello(const unsigned char *hs, size_t len, const unsigned char **name)
{
    size_t pos, end, n;

    /* type 1, uint24 length, version (2), random (32) */
    if (len < 4 + 34 || hs[0] != 1)
        return 0;
    end = 4 + (((size_t)hs[1] << 16) | ((size_t)hs[2] << 8) | hs[3]);
    if (end > len)
        return 0;
    pos = 4 + 34;
    if (pos + 1 > end || (pos += 1 + hs[pos]) + 2 > end) /* session id */
        return 0;
    if ((pos += 2 + (((size_t)hs[pos] << 8) | hs[pos + 1])) + 1 > end) /* cipher suites */
        return 0;
    if ((pos += 1 + hs[pos]) + 2 > end) /* compression methods */
        return 0;
    n = ((size_t)hs[pos] << 8) | hs[pos + 1];
    pos += 2;
    if (pos + n > end)
        return 0;
    end = pos + n;
    while (pos + 4 <= end) {
        unsigned type = ((unsigned)hs[pos] << 8) | hs[pos + 1];

        n = ((size_t)hs[pos + 2] << 8) | hs[pos + 3];
        pos += 4;
        if (pos + n > end)
            return 0;
        if (type == TLSEXT_TYPE_server_name)
            return tls_sni_from_ext(hs + pos, n, name);
        pos += n;
    }
    return 0;
}

static int client_hello_cb(SSL *ssl, int *al, void *arg)
{
    struct tls_hello *h = SSL_get_ex_data(ssl, conn_ex_index);
    const unsigned char *ext = NULL, *raw = NULL;
    char host[HOSTNAME_BUFSZ];
    size_t extlen = 0, n = 0;

    (void)arg;
    if (h == NULL) {
        *al = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &extlen) == 1)
        n = tls_sni_from_ext(ext, extlen, &raw);
    /* An SNI must be a DNS name; an IP literal there is against RFC 6066 but harmless. No SNI
     * (or one that is not a host name) is the decision's to refuse (ingress.c refuses it, except
     * after a CONNECT, where the CONNECT host names the certificate). */
    *al = SSL_AD_UNRECOGNIZED_NAME;
    if (n == 0 || hostname_normalize((const char *)raw, n, host, sizeof(host)) < 0)
        n = 0;
    if (h->decide(h, n > 0 ? host : NULL, al) < 0)
        return SSL_CLIENT_HELLO_ERROR;
    return SSL_CLIENT_HELLO_SUCCESS;
}

/*
 * The certificate callback: OpenSSL calls it only when the handshake sends a certificate (a
 * full one), after the ClientHello callback accepted the name; a resumed handshake never
 * builds or installs a leaf. 1, or 0 (the handshake ends with internal_error).
 */
static int cert_cb(SSL *ssl, void *arg)
{
    struct tls_hello *h = SSL_get_ex_data(ssl, conn_ex_index);
    struct tls_leaf leaf = {0};
    STACK_OF(X509) *chain = NULL;
    int ok = 0;

    (void)arg;
    if (h == NULL || h->leaf(h, &leaf) < 0)
        return 0;
    /* one call: SSL_use_certificate + SSL_use_PrivateKey + SSL_add1_chain_cert cost ~10 us
     * (the separate key/certificate match check), this ~3 us (docs/internals/proxy.md) */
    chain = sk_X509_new_reserve(NULL, 1);
    if (chain != NULL && sk_X509_push(chain, leaf.chain) == 1 &&
        SSL_use_cert_and_key(ssl, leaf.cert, leaf.key, chain, 1) == 1)
        ok = 1;
    sk_X509_free(chain);
    X509_free(leaf.cert);
    if (!ok)
        ERR_clear_error();
    return ok;
}

static int alpn_select_cb(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                          const unsigned char *in, unsigned int inlen, void *arg)
{
    /* ours, in order of preference (SPEC §10): h2 when the client offers it */
    static const unsigned char ours[] = "\x02h2\x08http/1.1";
    unsigned char *sel = NULL;
    unsigned char sellen = 0;

    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto(&sel, &sellen, ours, sizeof(ours) - 1, in, inlen) ==
        OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        *outlen = sellen;
        return SSL_TLSEXT_ERR_OK;
    }
    /* Nothing we speak on offer: answer without ALPN; the client then speaks HTTP/1.1 or gives
     * up. */
    return SSL_TLSEXT_ERR_NOACK;
}

SSL_CTX *tls_server_ctx_new(const unsigned char ticket_keys[80], char *err, size_t errlen)
{
    static const unsigned char sid_ctx[] = "vaultgate";
    SSL_CTX *ctx = NULL, *ret = NULL;
    char ebuf[256];

    pthread_once(&ex_once, ex_init);
    if (conn_ex_index < 0)
        goto out;
    ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL)
        goto out;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) != 1)
        goto out;
    /* a client closing without close_notify is an ordinary close, not an error */
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA |
                                 SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* The leaf key is ECDSA P-256: only ECDHE-ECDSA suites can be served under TLS 1.2. */
    if (SSL_CTX_set_cipher_list(ctx, "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
                                     "ECDHE-ECDSA-CHACHA20-POLY1305") != 1)
        goto out;
    if (SSL_CTX_set_ciphersuites(ctx, TLS_SUITES_13) != 1)
        goto out;
    if (SSL_CTX_set1_groups_list(ctx, "X25519:P-256") != 1)
        goto out;
    /* no SSL_MODE_RELEASE_BUFFERS: an HTTP/1.1 connection keeps its record buffers while it
     * is busy and releases them once quiet (h1_arm_idle); others get the mode when handed on
     * (bevio_release_always) */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* the client I/O decrypts every record read ahead on each readiness (cio.c); a connection
     * handed on to a bufferevent is read with bevio_pull() (bevio.h) */
    SSL_CTX_set_read_ahead(ctx, 1);
    /* Stateless tickets only: no per-context session cache (memory, a lock per handshake). */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (SSL_CTX_set_session_id_context(ctx, sid_ctx, sizeof(sid_ctx) - 1) != 1)
        goto out;
    if (SSL_CTX_set_tlsext_ticket_keys(ctx, (void *)ticket_keys, 80) != 1)
        goto out;
    SSL_CTX_set_num_tickets(ctx, 1);
    SSL_CTX_set_client_hello_cb(ctx, client_hello_cb, NULL);
    SSL_CTX_set_cert_cb(ctx, cert_cb, NULL);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select_cb, NULL);
    ret = ctx;
    ctx = NULL;
out:
    if (ret == NULL)
        snprintf(err, errlen, "server TLS context: %s", tls_error_text(ebuf, sizeof(ebuf)));
    SSL_CTX_free(ctx);
    return ret;
}

SSL *tls_server_ssl_new(SSL_CTX *ctx, struct tls_hello *h)
{
    SSL *ssl = SSL_new(ctx);

    if (ssl == NULL)
        return NULL;
    if (SSL_set_ex_data(ssl, conn_ex_index, h) != 1) {
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

void tls_server_ssl_detach(SSL *ssl)
{
    if (ssl != NULL)
        SSL_set_ex_data(ssl, conn_ex_index, NULL);
}
