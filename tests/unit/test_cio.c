/*
 * test_cio.c - proxy/cio.c on a socketpair: plain and TLS (a self-signed certificate made at
 * test time), the peer driven by hand between non-blocking turns of the event loop.
 *
 * Covered: records read ahead all delivered in one readiness, the input high-water mark
 * (reading stops, resumes once drained), a slow peer (the write event only while output is
 * queued, the write callback when drained, made again after the idle release), read and write
 * timeouts, end of stream and half-close, the in-place TLS upgrade with early bytes and a queued
 * clear answer, the client handshake (success, a verification failure with its reason, a
 * timeout), the hand-off to a bufferevent with bytes pending both ways, an end kept for the next
 * event callback set, and a free from inside a callback.
 */
#include "common/caps.h"
#include "proxy/cio.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define PUMP_MAX 5000 /* loop turns (1 ms apart) before a wait gives up */

struct fx {
    struct event_base *base;
    int fd[2]; /* [0] the connection's, [1] the peer's */
    struct cio *io;
    SSL_CTX *sctx, *cctx;
    SSL *cssl; /* the peer's, once TLS */
    int reads, writes, events;
    short what; /* the last event */
    bool drain; /* the read callback empties the input */
    bool free_in_cb;
    struct evbuffer *got; /* what the read callback drained */
};

static struct fx fx;

/* ---- certificates and contexts ------------------------------------------------------------- */

static SSL_CTX *server_ctx(void)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *name = X509_get_subject_name(x);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    ck_assert_ptr_nonnull(key);
    ck_assert_ptr_nonnull(ctx);
    ck_assert_int_eq(X509_set_version(x, 2), 1);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"cio.test", -1, -1,
                               0);
    X509_set_issuer_name(x, name);
    ck_assert_int_gt(X509_sign(x, key, EVP_sha256()), 0);
    ck_assert_int_eq(SSL_CTX_use_certificate(ctx, x), 1);
    ck_assert_int_eq(SSL_CTX_use_PrivateKey(ctx, key), 1);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(ctx, 1); /* as the proxy's (tls.c) */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    X509_free(x);
    EVP_PKEY_free(key);
    return ctx;
}

/* ---- the fixture --------------------------------------------------------------------------- */

static void on_read(struct cio *io, void *arg)
{
    (void)arg;
    fx.reads++;
    if (fx.drain)
        evbuffer_add_buffer(fx.got, cio_input(io));
    if (fx.free_in_cb)
        cio_free(&fx.io);
}

static void on_write(struct cio *io, void *arg)
{
    (void)io;
    (void)arg;
    fx.writes++;
}

static void on_event(struct cio *io, short what, void *arg)
{
    (void)io;
    (void)arg;
    fx.events++;
    fx.what = what;
}

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    memset(&fx, 0, sizeof(fx));
    fx.base = event_base_new();
    ck_assert_ptr_nonnull(fx.base);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, fx.fd), 0);
    ck_assert_int_eq(evutil_make_socket_nonblocking(fx.fd[0]), 0);
    ck_assert_int_eq(evutil_make_socket_nonblocking(fx.fd[1]), 0);
    fx.io = cio_new(fx.base, fx.fd[0]);
    ck_assert_ptr_nonnull(fx.io);
    cio_setcb(fx.io, on_read, on_write, on_event, NULL);
    fx.got = evbuffer_new();
    fx.drain = true;
}

static void teardown(void)
{
    cio_free(&fx.io);
    cio_base_end(fx.base);
    SSL_free(fx.cssl);
    SSL_CTX_free(fx.sctx);
    SSL_CTX_free(fx.cctx);
    if (fx.fd[1] >= 0)
        close(fx.fd[1]);
    evbuffer_free(fx.got);
    event_base_free(fx.base);
}

/* One loop turn without waiting, then a millisecond. */
static void turn(void)
{
    struct timespec ms = {0, 1000000};

    event_base_loop(fx.base, EVLOOP_NONBLOCK);
    nanosleep(&ms, NULL);
}

#define PUMP_UNTIL(cond)                                                                           \
    do {                                                                                           \
        int n_ = 0;                                                                                \
        while (!(cond) && n_++ < PUMP_MAX)                                                         \
            turn();                                                                                \
        ck_assert_msg((cond), "waited in vain for " #cond);                                        \
    } while (0)

/* The peer's bytes, read raw: up to max, without waiting. */
static size_t peer_read(char *buf, size_t max)
{
    ssize_t r = read(fx.fd[1], buf, max);

    return r > 0 ? (size_t)r : 0;
}

/* The peer's handshake (on its socket) and io's run until both ended; both must succeed. */
static void tls_finish(void)
{
    int r = 0;

    for (int n = 0; n < PUMP_MAX && (r != 1 || !(fx.what & CIO_CONNECTED)); n++) {
        if (r != 1)
            r = SSL_do_handshake(fx.cssl);
        turn();
    }
    ck_assert_int_eq(r, 1);
    ck_assert(fx.what & CIO_CONNECTED);
}

/* The peer (a TLS client) handshakes against io, which accepts TLS now. */
static void tls_connect(void)
{
    fx.sctx = server_ctx();
    fx.cctx = SSL_CTX_new(TLS_client_method());
    ck_assert_int_eq(cio_accept_tls(fx.io, SSL_new(fx.sctx)), 0);
    fx.cssl = SSL_new(fx.cctx);
    SSL_set_fd(fx.cssl, fx.fd[1]);
    SSL_set_connect_state(fx.cssl);
    tls_finish();
}

/* The peer's decrypted bytes, until n arrived. */
static void tls_peer_expect(const char *want, size_t n)
{
    char buf[4096];
    size_t have = 0;

    for (int i = 0; i < PUMP_MAX && have < n; i++) {
        int r = SSL_read(fx.cssl, buf + have, (int)(sizeof(buf) - have));

        if (r > 0)
            have += (size_t)r;
        else
            turn();
    }
    ck_assert_uint_eq(have, n);
    ck_assert(memcmp(buf, want, n) == 0);
}

static void push_text(const char *s)
{
    struct evbuffer *b = evbuffer_new();

    evbuffer_add(b, s, strlen(s));
    cio_push(fx.io, b, false);
    ck_assert_uint_eq(evbuffer_get_length(b), 0);
    evbuffer_free(b);
}

/* Pushes zeros until the socket takes no more. Returns the bytes queued in io; *total: all
 * pushed, when not NULL. */
static size_t push_until_queued(size_t chunk, size_t *total)
{
    struct evbuffer *b = evbuffer_new();
    char *blob = calloc(1, chunk);
    size_t n = 0;

    for (int i = 0; i < 1000 && cio_queued(fx.io) == 0; i++) {
        evbuffer_add(b, blob, chunk);
        cio_push(fx.io, b, false);
        n += chunk;
    }
    free(blob);
    evbuffer_free(b);
    if (total != NULL)
        *total = n;
    return cio_queued(fx.io);
}

/* The peer writes (raw, or over TLS) until nothing more goes for a while. Returns the bytes
 * sent. */
static size_t peer_flood(bool tls)
{
    static char blob[16384];
    size_t sent = 0;

    for (int idle = 0, i = 0; idle < 30 && i < PUMP_MAX; i++) {
        int w =
            tls ? SSL_write(fx.cssl, blob, sizeof(blob)) : (int)write(fx.fd[1], blob, sizeof(blob));

        if (w > 0) {
            sent += (size_t)w;
            idle = 0;
        } else {
            idle++;
        }
        turn();
    }
    return sent;
}

/* ---- plain ----------------------------------------------------------------------------- */

START_TEST(test_plain_roundtrip)
{
    char buf[64];

    cio_read(fx.io, true);
    ck_assert_int_eq(write(fx.fd[1], "hello", 5), 5);
    PUMP_UNTIL(fx.reads == 1);
    ck_assert_uint_eq(evbuffer_get_length(fx.got), 5);
    push_text("world"); /* written at once: nothing queued, no write event */
    ck_assert_uint_eq(cio_queued(fx.io), 0);
    ck_assert(!cio_writing(fx.io));
    ck_assert_uint_eq(peer_read(buf, sizeof(buf)), 5);
    ck_assert(memcmp(buf, "world", 5) == 0);
}
END_TEST

/* The idle release frees the empty input and output and they come back on use; input not
 * consumed and output still queued are kept. */
START_TEST(test_idle_buffers)
{
    char buf[64];
    size_t queued;

    cio_read(fx.io, true);
    ck_assert_int_eq(write(fx.fd[1], "one", 3), 3);
    PUMP_UNTIL(fx.reads == 1);
    cio_free_buffers(fx.io);
    ck_assert(!cio_has_input(fx.io));
    ck_assert_uint_eq(cio_queued(fx.io), 0);
    ck_assert_int_eq(write(fx.fd[1], "two", 3), 3);
    PUMP_UNTIL(fx.reads == 2);
    ck_assert_uint_eq(evbuffer_get_length(fx.got), 6);
    push_text("back");
    ck_assert_uint_eq(peer_read(buf, sizeof(buf)), 4);
    fx.drain = false;
    ck_assert_int_eq(write(fx.fd[1], "xyz", 3), 3);
    PUMP_UNTIL(fx.reads == 3);
    cio_free_buffers(fx.io);
    ck_assert_uint_eq(evbuffer_get_length(cio_input(fx.io)), 3);
    queued = push_until_queued(65536, NULL);
    ck_assert_uint_gt(queued, 0);
    cio_free_buffers(fx.io);
    ck_assert_uint_eq(cio_queued(fx.io), queued);
    while (peer_read(buf, sizeof(buf)) > 0)
        turn();
}
END_TEST

/* A peer that reads slowly: the write event exists while output is queued, and the write
 * callback says when it drained; after the idle release (which frees the write event) the next
 * backpressure makes it again. */
START_TEST(test_slow_peer)
{
    char buf[65536];

    for (int round = 0; round < 2; round++) {
        size_t queued = push_until_queued(65536, NULL);

        ck_assert_uint_gt(queued, 0);
        ck_assert(cio_writing(fx.io));
        fx.writes = 0;
        turn();
        ck_assert_int_eq(fx.writes, 0); /* the peer took nothing */
        for (int i = 0; i < PUMP_MAX && (cio_queued(fx.io) > 0 || fx.writes == 0); i++) {
            (void)peer_read(buf, sizeof(buf));
            turn();
        }
        ck_assert_uint_eq(cio_queued(fx.io), 0);
        ck_assert_int_ge(fx.writes, 1);
        ck_assert(!cio_writing(fx.io));
        while (peer_read(buf, sizeof(buf)) > 0)
            ;
        cio_free_buffers(fx.io);
    }
}
END_TEST

/* Input not consumed stops reading at VG_CONN_IN_MAX; draining it resumes. */
/* What the test consumed by hand, then the rest through the read callback. */
static void drain_and_resume(size_t sent)
{
    struct evbuffer *in = cio_input(fx.io);
    size_t len = evbuffer_get_length(in), consumed = len;

    ck_assert_uint_ge(len, VG_CONN_IN_MAX);
    ck_assert_uint_lt(len, VG_CONN_IN_MAX + 16384);
    ck_assert_uint_lt(len, sent); /* the rest waits in the socket, or in OpenSSL */
    evbuffer_drain(in, len);
    PUMP_UNTIL(evbuffer_get_length(in) > 0); /* reading resumed */
    fx.drain = true;
    consumed += evbuffer_get_length(in);
    evbuffer_drain(in, evbuffer_get_length(in));
    PUMP_UNTIL(evbuffer_get_length(fx.got) + consumed >= sent);
    ck_assert_uint_eq(evbuffer_get_length(fx.got) + consumed, sent);
}

START_TEST(test_backpressure)
{
    size_t sent;

    fx.drain = false;
    cio_read(fx.io, true);
    sent = peer_flood(false);
    drain_and_resume(sent);
}
END_TEST

START_TEST(test_read_timeout)
{
    struct timeval tv = {0, 20000};

    cio_read(fx.io, true);
    cio_set_timeouts(fx.io, &tv, NULL);
    PUMP_UNTIL(fx.events == 1);
    ck_assert_int_eq(fx.what, CIO_READING | CIO_TIMEOUT);
}
END_TEST

START_TEST(test_write_timeout)
{
    struct timeval tv = {0, 20000};

    cio_set_timeouts(fx.io, NULL, &tv);
    ck_assert_uint_gt(push_until_queued(65536, NULL), 0);
    PUMP_UNTIL(fx.events == 1);
    ck_assert_int_eq(fx.what, CIO_WRITING | CIO_TIMEOUT);
}
END_TEST

/* Without a read timeout set, a quiet connection gets no event. */
START_TEST(test_no_timeout_when_off)
{
    struct timeval tv = {0, 20000};

    cio_read(fx.io, true);
    cio_set_timeouts(fx.io, &tv, NULL);
    cio_set_timeouts(fx.io, NULL, NULL);
    for (int i = 0; i < 60; i++)
        turn();
    ck_assert_int_eq(fx.events, 0);
}
END_TEST

/* The peer half-closes: its last bytes, then EOF; io can still write. */
START_TEST(test_half_close)
{
    char buf[16];

    cio_read(fx.io, true);
    ck_assert_int_eq(write(fx.fd[1], "bye", 3), 3);
    ck_assert_int_eq(shutdown(fx.fd[1], SHUT_WR), 0);
    PUMP_UNTIL(fx.events == 1);
    ck_assert_int_eq(fx.reads, 1);
    ck_assert_uint_eq(evbuffer_get_length(fx.got), 3);
    ck_assert_int_eq(fx.what, CIO_READING | CIO_EOF);
    push_text("after");
    ck_assert_uint_eq(peer_read(buf, sizeof(buf)), 5);
    cio_shutdown(fx.io);
    ck_assert_int_eq(read(fx.fd[1], buf, sizeof(buf)), 0); /* FIN */
}
END_TEST

/* The peer closes while no event callback is set (a pooled connection between its checkout
 * and its new owner): the next callback set hears the end, from the loop, once. */
START_TEST(test_end_kept_for_next_callback)
{
    cio_setcb(fx.io, NULL, NULL, NULL, NULL);
    cio_read(fx.io, true);
    ck_assert_int_eq(shutdown(fx.fd[1], SHUT_WR), 0);
    for (int i = 0; i < 20; i++)
        turn();
    ck_assert(!cio_open(fx.io));
    ck_assert_int_eq(fx.events, 0);
    cio_setcb(fx.io, on_read, on_write, on_event, NULL);
    ck_assert_int_eq(fx.events, 0); /* never from inside cio_setcb */
    PUMP_UNTIL(fx.events == 1);
    ck_assert_int_eq(fx.what, CIO_READING | CIO_EOF);
    for (int i = 0; i < 5; i++)
        turn();
    ck_assert_int_eq(fx.events, 1);
    ck_assert_int_eq(fx.reads, 0);
}
END_TEST

/* A free from inside the read callback: the rest of the turn does not touch io. */
START_TEST(test_free_in_callback)
{
    char buf[4];

    fx.free_in_cb = true;
    cio_read(fx.io, true);
    ck_assert_int_eq(write(fx.fd[1], "x", 1), 1);
    ck_assert_int_eq(shutdown(fx.fd[1], SHUT_WR), 0);
    PUMP_UNTIL(fx.io == NULL);
    for (int i = 0; i < 5; i++)
        turn();
    ck_assert_int_eq(fx.events, 0);
    ck_assert_int_eq(read(fx.fd[1], buf, sizeof(buf)), 0); /* closed */
}
END_TEST

/* ---- TLS ------------------------------------------------------------------------------- */

/* Three records sent at once arrive in one read callback (nothing waits in OpenSSL). */
START_TEST(test_tls_read_ahead)
{
    tls_connect();
    ck_assert_int_eq(SSL_write(fx.cssl, "one,", 4), 4);
    ck_assert_int_eq(SSL_write(fx.cssl, "two,", 4), 4);
    ck_assert_int_eq(SSL_write(fx.cssl, "three", 5), 5);
    fx.reads = 0;
    PUMP_UNTIL(fx.reads > 0);
    ck_assert_int_eq(fx.reads, 1);
    ck_assert_uint_eq(evbuffer_get_length(fx.got), 13);
    ck_assert(memcmp(evbuffer_pullup(fx.got, -1), "one,two,three", 13) == 0);
    push_text("ok");
    ck_assert(!cio_writing(fx.io));
    tls_peer_expect("ok", 2);
}
END_TEST

/* TLS input past the high-water mark: decrypted records wait in OpenSSL, then come. */
START_TEST(test_tls_backpressure)
{
    size_t sent;

    tls_connect();
    fx.drain = false;
    sent = peer_flood(true);
    drain_and_resume(sent);
}
END_TEST

/* A close_notify is an end of stream; cio_shutdown() answers with one. */
START_TEST(test_tls_eof)
{
    char c;

    tls_connect();
    ck_assert_int_ge(SSL_shutdown(fx.cssl), 0);
    PUMP_UNTIL(fx.events == 2);
    ck_assert_int_eq(fx.what, CIO_READING | CIO_EOF);
    cio_shutdown(fx.io);
    PUMP_UNTIL(SSL_read(fx.cssl, &c, 1) == 0);
    ck_assert_int_eq(SSL_get_error(fx.cssl, 0), SSL_ERROR_ZERO_RETURN);
}
END_TEST

/* A TLS error in the handshake is an error with OpenSSL's reason. */
START_TEST(test_tls_garbage)
{
    static const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";

    fx.sctx = server_ctx();
    ck_assert_int_eq(cio_accept_tls(fx.io, SSL_new(fx.sctx)), 0);
    ck_assert_int_eq(write(fx.fd[1], junk, sizeof(junk) - 1), (ssize_t)sizeof(junk) - 1);
    PUMP_UNTIL(fx.events == 1);
    ck_assert(fx.what & CIO_ERROR);
    ck_assert_uint_ne(cio_ssl_error(fx.io), 0);
}
END_TEST

/*
 * The in-place upgrade of an intercepted CONNECT: the clear answer still queued goes out
 * whole before any TLS byte, and the ClientHello the peer sent early (already in the input)
 * is what the handshake reads first.
 */
START_TEST(test_tls_upgrade_early)
{
    size_t queued, total, raw = 0, n;
    char buf[65536];
    BIO *hello;

    fx.drain = false;
    cio_read(fx.io, true);
    queued = push_until_queued(65536, &total); /* "the 200", larger than the socket takes */
    ck_assert_uint_gt(queued, 0);
    fx.sctx = server_ctx();
    fx.cctx = SSL_CTX_new(TLS_client_method());
    fx.cssl = SSL_new(fx.cctx);
    hello = BIO_new(BIO_s_mem());
    SSL_set_bio(fx.cssl, BIO_new(BIO_s_mem()), hello);
    SSL_set_connect_state(fx.cssl);
    ck_assert_int_eq(SSL_do_handshake(fx.cssl), -1);
    /* the ClientHello goes out before the answer is read */
    n = (size_t)BIO_read(hello, buf, sizeof(buf));
    ck_assert_int_eq(write(fx.fd[1], buf, n), (ssize_t)n);
    PUMP_UNTIL(fx.reads == 1);
    ck_assert_uint_gt(evbuffer_get_length(cio_input(fx.io)), 0);
    ck_assert_int_eq(cio_accept_tls(fx.io, SSL_new(fx.sctx)), 0);
    fx.drain = true;
    /* the peer reads the clear bytes by hand: every one of them, zeros only, before any TLS */
    for (int i = 0; i < PUMP_MAX && raw < total; i++) {
        size_t want = total - raw < sizeof(buf) ? total - raw : sizeof(buf);

        n = peer_read(buf, want);
        for (size_t k = 0; k < n; k++)
            ck_assert_int_eq(buf[k], 0);
        raw += n;
        turn();
    }
    ck_assert_uint_eq(raw, total);
    ck_assert_uint_eq(cio_queued(fx.io), 0);
    SSL_set_fd(fx.cssl, fx.fd[1]); /* the rest of the handshake on the socket */
    tls_finish();
    ck_assert_int_eq(SSL_write(fx.cssl, "GET", 3), 3);
    PUMP_UNTIL(evbuffer_get_length(fx.got) == 3);
    push_text("200");
    tls_peer_expect("200", 3);
}
END_TEST

/* cio_kick: the read callback once from the loop, input or not; none while reading is off. */
START_TEST(test_kick)
{
    fx.drain = false;
    cio_read(fx.io, true);
    cio_kick(fx.io);
    ck_assert_int_eq(fx.reads, 0); /* never inside the call */
    PUMP_UNTIL(fx.reads == 1);
    turn();
    ck_assert_int_eq(fx.reads, 1);
    cio_read(fx.io, false);
    cio_kick(fx.io);
    turn();
    turn();
    ck_assert_int_eq(fx.reads, 1);
}
END_TEST

/* ---- the client handshake (cio_connect_tls), against a peer that accepts ----------------------
 */

/* io connects with TLS as a client verifying "cio.test" (trusting the peer's certificate when
 * trust); the peer's SSL accepts on its socket. */
static void tls_client_start(bool trust)
{
    SSL *ssl;

    fx.sctx = server_ctx();
    fx.cctx = SSL_CTX_new(TLS_client_method());
    ck_assert_ptr_nonnull(fx.cctx);
    SSL_CTX_set_verify(fx.cctx, SSL_VERIFY_PEER, NULL);
    if (trust)
        ck_assert_int_eq(
            X509_STORE_add_cert(SSL_CTX_get_cert_store(fx.cctx), SSL_CTX_get0_certificate(fx.sctx)),
            1);
    ssl = SSL_new(fx.cctx);
    ck_assert_int_eq(SSL_set1_host(ssl, "cio.test"), 1);
    ck_assert_int_eq(cio_connect_tls(fx.io, ssl), 0);
    ck_assert_int_eq(fx.events, 0); /* never from inside the call */
    fx.cssl = SSL_new(fx.sctx);
    SSL_set_fd(fx.cssl, fx.fd[1]);
    SSL_set_accept_state(fx.cssl);
}

START_TEST(test_tls_client_connect)
{
    tls_client_start(true);
    tls_finish();
    ck_assert_int_eq(fx.events, 1);
    ck_assert_int_eq(SSL_get_verify_result(cio_ssl(fx.io)), X509_V_OK);
    ck_assert_ptr_nonnull(SSL_get0_peer_certificate(cio_ssl(fx.io)));
    push_text("GET");
    tls_peer_expect("GET", 3);
    ck_assert_int_eq(SSL_write(fx.cssl, "200", 3), 3);
    PUMP_UNTIL(evbuffer_get_length(fx.got) == 3);
    ck_assert(memcmp(evbuffer_pullup(fx.got, -1), "200", 3) == 0);
}
END_TEST

/* A certificate the client does not trust: an error with OpenSSL's reason, no CONNECTED. */
START_TEST(test_tls_client_verify_failure)
{
    tls_client_start(false);
    for (int n = 0; n < PUMP_MAX && fx.events == 0; n++) {
        (void)SSL_do_handshake(fx.cssl);
        ERR_clear_error();
        turn();
    }
    ck_assert_int_eq(fx.events, 1);
    ck_assert_int_eq(fx.what & (CIO_ERROR | CIO_CONNECTED), CIO_ERROR);
    ck_assert_int_eq(ERR_GET_REASON(cio_ssl_error(fx.io)), SSL_R_CERTIFICATE_VERIFY_FAILED);
    ck_assert_int_ne(SSL_get_verify_result(cio_ssl(fx.io)), X509_V_OK);
}
END_TEST

/* A peer that never answers: the read timeout ends the handshake. */
START_TEST(test_tls_client_timeout)
{
    struct timeval tv = {0, 50 * 1000};
    char buf[4096];

    cio_set_timeouts(fx.io, &tv, NULL);
    tls_client_start(true);
    PUMP_UNTIL(fx.events == 1);
    ck_assert_int_eq(fx.what, CIO_READING | CIO_TIMEOUT);
    ck_assert_uint_gt(peer_read(buf, sizeof(buf)), 0); /* the ClientHello went out */
}
END_TEST

/* The hand-off: input read so far is in the bufferevent's input, output still queued in its
 * output, and both go on from there. */
static void bev_read(struct bufferevent *bev, void *arg)
{
    (void)arg;
    evbuffer_add_buffer(fx.got, bufferevent_get_input(bev));
}

START_TEST(test_tls_handoff)
{
    struct bufferevent *bev;

    tls_connect();
    fx.drain = false;
    ck_assert_int_eq(SSL_write(fx.cssl, "abc", 3), 3);
    PUMP_UNTIL(evbuffer_get_length(cio_input(fx.io)) == 3);
    push_text("xyz");
    bev = cio_to_bufferevent(&fx.io, 0);
    ck_assert_ptr_null(fx.io);
    ck_assert_ptr_nonnull(bev);
    ck_assert_uint_eq(evbuffer_get_length(bufferevent_get_input(bev)), 3);
    bufferevent_setcb(bev, bev_read, NULL, NULL, NULL);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    ck_assert_int_eq(SSL_write(fx.cssl, "def", 3), 3);
    PUMP_UNTIL(evbuffer_get_length(fx.got) == 6);
    ck_assert(memcmp(evbuffer_pullup(fx.got, -1), "abcdef", 6) == 0);
    tls_peer_expect("xyz", 3);
    bufferevent_write(bev, "123", 3);
    tls_peer_expect("123", 3);
    bufferevent_free(bev);
}
END_TEST

START_TEST(test_plain_handoff)
{
    struct bufferevent *bev;
    size_t queued, total = 0;
    char buf[65536];

    fx.drain = false;
    cio_read(fx.io, true);
    ck_assert_int_eq(write(fx.fd[1], "early", 5), 5);
    PUMP_UNTIL(fx.reads == 1);
    queued = push_until_queued(65536, NULL);
    ck_assert_uint_gt(queued, 0);
    bev = cio_to_bufferevent(&fx.io, 0);
    ck_assert_ptr_nonnull(bev);
    ck_assert_uint_eq(evbuffer_get_length(bufferevent_get_input(bev)), 5);
    ck_assert_uint_eq(evbuffer_get_length(bufferevent_get_output(bev)), queued);
    bufferevent_setcb(bev, bev_read, NULL, NULL, NULL);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    for (int i = 0; i < PUMP_MAX && evbuffer_get_length(bufferevent_get_output(bev)) > 0; i++) {
        total += peer_read(buf, sizeof(buf));
        turn();
    }
    ck_assert_uint_eq(evbuffer_get_length(bufferevent_get_output(bev)), 0);
    ck_assert_int_eq(write(fx.fd[1], "late", 4), 4);
    PUMP_UNTIL(evbuffer_get_length(fx.got) == 9);
    ck_assert(memcmp(evbuffer_pullup(fx.got, -1), "earlylate", 9) == 0);
    bufferevent_free(bev);
    ck_assert_uint_gt(total, 0);
}
END_TEST

Suite *suite_cio(void);

Suite *suite_cio(void)
{
    Suite *s = suite_create("cio");
    TCase *tc = tcase_create("cio");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_plain_roundtrip);
    tcase_add_test(tc, test_idle_buffers);
    tcase_add_test(tc, test_slow_peer);
    tcase_add_test(tc, test_backpressure);
    tcase_add_test(tc, test_read_timeout);
    tcase_add_test(tc, test_write_timeout);
    tcase_add_test(tc, test_no_timeout_when_off);
    tcase_add_test(tc, test_half_close);
    tcase_add_test(tc, test_end_kept_for_next_callback);
    tcase_add_test(tc, test_free_in_callback);
    tcase_add_test(tc, test_tls_read_ahead);
    tcase_add_test(tc, test_tls_backpressure);
    tcase_add_test(tc, test_tls_eof);
    tcase_add_test(tc, test_tls_garbage);
    tcase_add_test(tc, test_tls_upgrade_early);
    tcase_add_test(tc, test_kick);
    tcase_add_test(tc, test_tls_client_connect);
    tcase_add_test(tc, test_tls_client_verify_failure);
    tcase_add_test(tc, test_tls_client_timeout);
    tcase_add_test(tc, test_tls_handoff);
    tcase_add_test(tc, test_plain_handoff);
    suite_add_tcase(s, tc);
    return s;
}
