/*
 * test_tls.c - the server context of proxy/tls.c and its session tickets, with a client in the
 * same thread over a BIO pair (real handshakes, a self-signed P-256 leaf made at test time). The
 * client keeps sessions as OpenSSL's client cache does (SSL_SESS_CACHE_CLIENT), which uses a TLS
 * 1.3 ticket once (RFC 8446 C.4): a ticket it resumed with is no longer offered.
 *
 * Covered: TLS 1.3: a full handshake issues one ticket and installs the leaf once; every resumed
 * handshake issues a new ticket, so such a client resumes every time and no leaf is asked for;
 * the used ticket is not offered again; TLS 1.2: a resumed handshake issues no ticket and the
 * same session resumes again; a ticket the keys do not open means a full handshake and a new
 * ticket; the name decision runs on resumed handshakes too and can refuse them. The suite
 * served for each kind of offer, TLS 1.3 and 1.2.
 */
#include "proxy/tls.h"

#include <check.h>
#include <stdbool.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define HOST "tickets.test"

struct hello {
    struct tls_hello h;
    int decided; /* ClientHellos seen */
    bool refuse;
    int leaves; /* certificates asked for (full handshakes) */
};

static struct {
    EVP_PKEY *key;
    X509 *cert;
    SSL_CTX *cctx;
    char suite[64];      /* the suite of the last connection that completed its handshake */
    int tickets;         /* new sessions the client received */
    SSL_SESSION *latest; /* the newest of them */
} fx;

static int decide(struct tls_hello *h, const char *host, int *alert)
{
    struct hello *o = (struct hello *)h;

    o->decided++;
    if (o->refuse || host == NULL || strcmp(host, HOST) != 0) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return -1;
    }
    return 0;
}

static int leaf(struct tls_hello *h, struct tls_leaf *out)
{
    struct hello *o = (struct hello *)h;

    o->leaves++;
    ck_assert_int_eq(X509_up_ref(fx.cert), 1);
    out->cert = fx.cert;
    out->key = fx.key;
    out->chain = fx.cert;
    return 0;
}

static int new_session(SSL *ssl, SSL_SESSION *sess)
{
    (void)ssl;
    fx.tickets++;
    SSL_SESSION_free(fx.latest);
    fx.latest = sess; /* the callback's reference is kept */
    return 1;
}

static void setup(void)
{
    X509_NAME *name;

    memset(&fx, 0, sizeof(fx));
    fx.key = EVP_EC_gen("P-256");
    fx.cert = X509_new();
    ck_assert_ptr_nonnull(fx.key);
    ck_assert_ptr_nonnull(fx.cert);
    name = X509_get_subject_name(fx.cert);
    ck_assert_int_eq(X509_set_version(fx.cert, 2), 1);
    ASN1_INTEGER_set(X509_get_serialNumber(fx.cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(fx.cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(fx.cert), 86400);
    X509_set_pubkey(fx.cert, fx.key);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)HOST, -1, -1, 0);
    X509_set_issuer_name(fx.cert, name);
    ck_assert_int_gt(X509_sign(fx.cert, fx.key, EVP_sha256()), 0);
    fx.cctx = SSL_CTX_new(TLS_client_method());
    ck_assert_ptr_nonnull(fx.cctx);
    SSL_CTX_set_verify(fx.cctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_session_cache_mode(fx.cctx,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(fx.cctx, new_session);
}

static void teardown(void)
{
    SSL_SESSION_free(fx.latest);
    SSL_CTX_free(fx.cctx);
    X509_free(fx.cert);
    EVP_PKEY_free(fx.key);
}

/* A server context with fresh random ticket keys. */
static SSL_CTX *server_ctx(void)
{
    unsigned char keys[80];
    char err[256];
    SSL_CTX *ctx;

    ck_assert_int_eq(RAND_bytes(keys, sizeof(keys)), 1);
    ctx = tls_server_ctx_new(keys, err, sizeof(err));
    ck_assert_msg(ctx != NULL, "%s", err);
    return ctx;
}

/*
 * One connection of version (TLS1_2_VERSION or TLS1_3_VERSION) offering sess (or none): the
 * handshake, then one byte from the server, read by the client (a TLS 1.3 ticket comes before
 * it). Returns 1 when the handshake resumed, 0 when it was a full one, -1 when it failed; *got
 * is the number of tickets the client received.
 */
static int connect_once(SSL_CTX *sctx, struct hello *o, int version, SSL_SESSION *sess, int *got)
{
    SSL *s = tls_server_ssl_new(sctx, &o->h), *c = SSL_new(fx.cctx);
    BIO *sb = NULL, *cb = NULL;
    int before = fx.tickets, ret = -1, cdone = 0, sdone = 0;
    char byte = 0;

    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(BIO_new_bio_pair(&sb, 0, &cb, 0), 1);
    SSL_set_bio(s, sb, sb);
    SSL_set_bio(c, cb, cb);
    SSL_set_min_proto_version(c, version);
    SSL_set_max_proto_version(c, version);
    SSL_set_tlsext_host_name(c, HOST);
    if (sess != NULL)
        ck_assert_int_eq(SSL_set_session(c, sess), 1);
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);
    for (int i = 0; i < 20 && !(cdone && sdone); i++) {
        int r;

        if (!cdone && (r = SSL_do_handshake(c)) == 1)
            cdone = 1;
        else if (!cdone && SSL_get_error(c, r) != SSL_ERROR_WANT_READ)
            goto out;
        if (!sdone && (r = SSL_do_handshake(s)) == 1)
            sdone = 1;
        else if (!sdone && SSL_get_error(s, r) != SSL_ERROR_WANT_READ)
            goto out;
    }
    if (!(cdone && sdone))
        goto out;
    ck_assert_int_eq(SSL_write(s, "x", 1), 1);
    ck_assert_int_eq(SSL_read(c, &byte, 1), 1);
    ck_assert_int_eq(byte, 'x');
    snprintf(fx.suite, sizeof(fx.suite), "%s", SSL_CIPHER_get_name(SSL_get_current_cipher(c)));
    ret = SSL_session_reused(c) ? 1 : 0;
    ck_assert_int_eq(SSL_session_reused(s), ret);
    SSL_shutdown(c); /* a session not shut down is marked not resumable when freed */
    SSL_shutdown(s);
out:
    *got = fx.tickets - before;
    tls_server_ssl_detach(s);
    SSL_free(s);
    SSL_free(c);
    ERR_clear_error();
    return ret;
}

/* The client's session from the last connection that brought a ticket (a new reference). */
static SSL_SESSION *latest(void)
{
    ck_assert_ptr_nonnull(fx.latest);
    ck_assert_int_eq(SSL_SESSION_up_ref(fx.latest), 1);
    return fx.latest;
}

static struct hello hello_new(void)
{
    struct hello o = {.h = {.decide = decide, .leaf = leaf}};

    return o;
}

START_TEST(test_tls13_ticket_per_resumption)
{
    SSL_CTX *sctx = server_ctx();
    struct hello o = hello_new();
    SSL_SESSION *sess, *used;
    int got;

    ck_assert_int_eq(connect_once(sctx, &o, TLS1_3_VERSION, NULL, &got), 0);
    ck_assert_int_eq(got, 1); /* one ticket per full handshake */
    ck_assert_int_eq(o.leaves, 1);
    sess = latest();
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(connect_once(sctx, &o, TLS1_3_VERSION, sess, &got) == 1, "resumption %d", i);
        ck_assert_int_eq(got, 1);                   /* a new ticket for the next connection */
        ck_assert(!SSL_SESSION_is_resumable(sess)); /* the client used this one */
        used = sess;
        sess = latest();
        ck_assert_ptr_ne(sess, used);
        SSL_SESSION_free(used);
    }
    ck_assert_int_eq(o.leaves, 1);  /* a resumed handshake asks for no certificate */
    ck_assert_int_eq(o.decided, 4); /* the name decided on every ClientHello */
    SSL_SESSION_free(sess);
    SSL_CTX_free(sctx);
}
END_TEST

START_TEST(test_tls12_resumed_without_ticket)
{
    SSL_CTX *sctx = server_ctx();
    struct hello o = hello_new();
    SSL_SESSION *sess;
    int got;

    ck_assert_int_eq(connect_once(sctx, &o, TLS1_2_VERSION, NULL, &got), 0);
    ck_assert_int_eq(got, 1);
    sess = latest();
    ck_assert(SSL_SESSION_has_ticket(sess));
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(connect_once(sctx, &o, TLS1_2_VERSION, sess, &got), 1);
        ck_assert_int_eq(got, 0);
    }
    ck_assert_int_eq(o.leaves, 1);
    SSL_SESSION_free(sess);
    SSL_CTX_free(sctx);
}
END_TEST

START_TEST(test_foreign_ticket_full_handshake)
{
    SSL_CTX *a = server_ctx(), *b = server_ctx();
    struct hello o = hello_new();
    SSL_SESSION *sess;
    int got;

    ck_assert_int_eq(connect_once(a, &o, TLS1_3_VERSION, NULL, &got), 0);
    sess = latest();
    /* keys that do not open it: a full handshake with a certificate, and a ticket of b's */
    ck_assert_int_eq(connect_once(b, &o, TLS1_3_VERSION, sess, &got), 0);
    ck_assert_int_eq(got, 1);
    ck_assert_int_eq(o.leaves, 2);
    SSL_SESSION_free(sess);
    sess = latest();
    ck_assert_int_eq(connect_once(b, &o, TLS1_3_VERSION, sess, &got), 1);
    ck_assert_int_eq(o.leaves, 2);
    SSL_SESSION_free(sess);
    SSL_CTX_free(a);
    SSL_CTX_free(b);
}
END_TEST

START_TEST(test_resumed_handshake_refused)
{
    SSL_CTX *sctx = server_ctx();
    struct hello o = hello_new();
    SSL_SESSION *sess;
    int got;

    ck_assert_int_eq(connect_once(sctx, &o, TLS1_3_VERSION, NULL, &got), 0);
    sess = latest();
    o.refuse = true;
    ck_assert_int_eq(connect_once(sctx, &o, TLS1_3_VERSION, sess, &got), -1);
    ck_assert_int_eq(got, 0);
    ck_assert_int_eq(o.decided, 2);
    SSL_SESSION_free(sess);
    SSL_CTX_free(sctx);
}
END_TEST

/* The suite served for what a client offers: AES-128-GCM before OpenSSL's own first choice
 * (AES-256-GCM), ChaCha20 to a client that lists it first, the client's only suite when it
 * offers one; the same under TLS 1.2. */
static const struct {
    int version;
    const char *offer; /* NULL: OpenSSL's default order */
    const char *want;
} suite_cases[] = {
    {TLS1_3_VERSION, NULL, "TLS_AES_128_GCM_SHA256"},
    {TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256"},
    {TLS1_3_VERSION, "TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256",
     "TLS_CHACHA20_POLY1305_SHA256"},
    {TLS1_3_VERSION, "TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384"},
    {TLS1_2_VERSION, NULL, "ECDHE-ECDSA-AES128-GCM-SHA256"},
    {TLS1_2_VERSION, "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256",
     "ECDHE-ECDSA-CHACHA20-POLY1305"},
};

START_TEST(test_suite_order)
{
    SSL_CTX *sctx = server_ctx();
    struct hello o = hello_new();
    int got = 0, ok;

    if (suite_cases[_i].offer != NULL && suite_cases[_i].version == TLS1_3_VERSION)
        ck_assert_int_eq(SSL_CTX_set_ciphersuites(fx.cctx, suite_cases[_i].offer), 1);
    if (suite_cases[_i].offer != NULL && suite_cases[_i].version == TLS1_2_VERSION)
        ck_assert_int_eq(SSL_CTX_set_cipher_list(fx.cctx, suite_cases[_i].offer), 1);
    ok = connect_once(sctx, &o, suite_cases[_i].version, NULL, &got);
    ck_assert_int_eq(ok, 0);
    ck_assert_msg(strcmp(fx.suite, suite_cases[_i].want) == 0, "case %d: %s, wanted %s", _i,
                  fx.suite, suite_cases[_i].want);
    SSL_CTX_free(sctx);
}
END_TEST

Suite *suite_tls(void);

Suite *suite_tls(void)
{
    Suite *s = suite_create("tls");
    TCase *tc = tcase_create("tickets");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_tls13_ticket_per_resumption);
    tcase_add_test(tc, test_tls12_resumed_without_ticket);
    tcase_add_test(tc, test_foreign_ticket_full_handshake);
    tcase_add_test(tc, test_resumed_handshake_refused);
    tcase_add_loop_test(tc, test_suite_order, 0,
                        (int)(sizeof(suite_cases) / sizeof(suite_cases[0])));
    suite_add_tcase(s, tc);
    return s;
}
