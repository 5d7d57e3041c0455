/*
 * test_upstream.c - proxy/upstream.c against real sockets, all on loopback.
 *
 * Each test runs its own event_base with: a TLS echo server whose certificate (for
 * upstream.test, *.upstream.test and 127.0.0.1) comes from a CA generated in memory at test
 * time; a plain echo server; a server that accepts and never answers; a UDP DNS responder
 * (libevent's evdns server API) answering from a fixed table; and a tiny CONNECT proxy. The
 * resolver under test only ever talks to that responder. "Prohibited" answers (10.0.0.1,
 * 169.254.169.254, ...) must be refused before any dial: the tests assert that no connect(2)
 * happened (stats.dials) and that no listener saw a connection.
 */
#include "proxy/upstream.h"
#include "audit/log.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define FX_MAX_CONNS 32

/* ---- certificates -------------------------------------------------------------------------- */

struct pki {
    EVP_PKEY *ca_key, *leaf_key;
    X509 *ca, *leaf;
};

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v;
    X509_EXTENSION *ext;

    X509V3_set_ctx_nodb(&v);
    X509V3_set_ctx(&v, issuer, x, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &v, nid, value);
    ck_assert_ptr_nonnull(ext);
    ck_assert_int_eq(X509_add_ext(x, ext, -1), 1);
    X509_EXTENSION_free(ext);
}

static X509 *make_cert(EVP_PKEY *key, EVP_PKEY *sign_key, X509 *issuer, const char *cn,
                       const char *san)
{
    static long serial = 1;
    X509 *x = X509_new();
    X509_NAME *name = X509_get_subject_name(x);

    ck_assert_int_eq(X509_set_version(x, 2), 1);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer != NULL ? X509_get_subject_name(issuer) : name);
    add_ext(x, issuer != NULL ? issuer : x, NID_subject_key_identifier, "hash");
    if (issuer == NULL) {
        add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
        add_ext(x, issuer, NID_authority_key_identifier, "keyid:always");
        add_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE");
        add_ext(x, issuer, NID_ext_key_usage, "serverAuth");
        add_ext(x, issuer, NID_subject_alt_name, san);
    }
    ck_assert_int_gt(X509_sign(x, sign_key, EVP_sha256()), 0);
    return x;
}

static void pki_make(struct pki *p, const char *ca_cn)
{
    p->ca_key = EVP_EC_gen("P-256");
    p->leaf_key = EVP_EC_gen("P-256");
    ck_assert_ptr_nonnull(p->ca_key);
    ck_assert_ptr_nonnull(p->leaf_key);
    p->ca = make_cert(p->ca_key, p->ca_key, NULL, ca_cn, NULL);
    p->leaf = make_cert(p->leaf_key, p->ca_key, p->ca, "upstream.test",
                        "DNS:upstream.test,DNS:*.upstream.test,IP:127.0.0.1");
}

static void pki_free(struct pki *p)
{
    X509_free(p->ca);
    X509_free(p->leaf);
    EVP_PKEY_free(p->ca_key);
    EVP_PKEY_free(p->leaf_key);
}

static void write_pem(X509 *x, char *path)
{
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");

    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(PEM_write_X509(f, x), 1);
    fclose(f);
}

/* ---- fixture ------------------------------------------------------------------------------ */

struct dns_entry {
    const char *name;
    const char *addrs[4]; /* text; NULL-terminated */
    int silent;           /* never answer */
};

static const struct dns_entry dns_table[] = {
    {"upstream.test", {"127.0.0.1"}, 0},
    {"private.upstream.test", {"10.0.0.1"}, 0},
    {"meta.upstream.test", {"169.254.169.254"}, 0},
    {"mapped.upstream.test", {"::ffff:127.0.0.1"}, 0},
    {"mixed.upstream.test", {"10.0.0.1", "127.0.0.1", "169.254.169.254"}, 0},
    {"v6only.upstream.test", {"fd00::1", "fe80::1"}, 0},
    {"slow.upstream.test", {NULL}, 1},
};

struct tproxy {
    struct bufferevent *cli, *up;
};

struct fx {
    struct event_base *base;
    struct pki pki, other;
    char ca_path[64], other_ca_path[64];
    SSL_CTX *srv_ctx;
    struct evconnlistener *tls_l, *plain_l, *silent_l, *proxy_l;
    int tls_port, plain_port, silent_port, proxy_port, dns_port, closed_port;
    int tls_accepts, plain_accepts, silent_accepts, proxy_accepts, dns_queries;
    struct bufferevent *srv[FX_MAX_CONNS];
    evutil_socket_t silent_fds[FX_MAX_CONNS];
    struct tproxy proxies[4];
    int nproxies;
    int proxy_refuse;
    char proxy_head[512];
    struct evdns_server_port *dns;
    struct upstream_ctx *ctx;
};

static struct fx fx;

static int bound_port(evutil_socket_t fd)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    return ntohs(sin.sin_port);
}

static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in sin;

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sin.sin_port = htons((uint16_t)port);
    return sin;
}

static void srv_track(struct bufferevent *bev)
{
    for (int i = 0; i < FX_MAX_CONNS; i++) {
        if (fx.srv[i] == NULL) {
            fx.srv[i] = bev;
            return;
        }
    }
    ck_abort_msg("too many server connections");
}

static void srv_close(struct bufferevent *bev)
{
    for (int i = 0; i < FX_MAX_CONNS; i++) {
        if (fx.srv[i] == bev)
            fx.srv[i] = NULL;
    }
    bufferevent_free(bev);
}

static void echo_read(struct bufferevent *bev, void *arg)
{
    evbuffer_add_buffer(bufferevent_get_output(bev), bufferevent_get_input(bev));
}

static void srv_event(struct bufferevent *bev, short what, void *arg)
{
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        srv_close(bev);
}

static void tls_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                       void *arg)
{
    SSL *ssl = SSL_new(fx.srv_ctx);
    struct bufferevent *bev = bufferevent_openssl_socket_new(
        fx.base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);

    fx.tls_accepts++;
    ck_assert_ptr_nonnull(bev);
    bufferevent_setcb(bev, echo_read, NULL, srv_event, NULL);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    srv_track(bev);
}

static void plain_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                         void *arg)
{
    struct bufferevent *bev = bufferevent_socket_new(fx.base, fd, BEV_OPT_CLOSE_ON_FREE);

    fx.plain_accepts++;
    bufferevent_setcb(bev, echo_read, NULL, srv_event, NULL);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    srv_track(bev);
}

static void silent_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                          int len, void *arg)
{
    ck_assert_int_lt(fx.silent_accepts, FX_MAX_CONNS);
    fx.silent_fds[fx.silent_accepts++] = fd;
}

/* The CONNECT proxy: one head, then a byte relay to the TLS server. */
static void relay_read(struct bufferevent *bev, void *arg)
{
    struct bufferevent *other = arg;

    evbuffer_add_buffer(bufferevent_get_output(other), bufferevent_get_input(bev));
}

static void relay_event(struct bufferevent *bev, short what, void *arg)
{
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    for (int i = 0; i < fx.nproxies; i++) {
        struct tproxy *t = &fx.proxies[i];

        if (t->cli == bev || t->up == bev) {
            bufferevent_free(t->cli);
            if (t->up != NULL)
                bufferevent_free(t->up);
            t->cli = t->up = NULL;
        }
    }
}

static void proxy_head(struct bufferevent *bev, void *arg)
{
    struct tproxy *t = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
    struct sockaddr_in sin = loopback(fx.tls_port);
    size_t n;

    if (end.pos < 0)
        return;
    n = (size_t)end.pos + 4;
    ck_assert_uint_lt(n, sizeof(fx.proxy_head));
    evbuffer_remove(in, fx.proxy_head, n);
    fx.proxy_head[n] = '\0';
    if (fx.proxy_refuse) {
        evbuffer_add_printf(bufferevent_get_output(bev),
                            "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    t->up = bufferevent_socket_new(fx.base, -1, BEV_OPT_CLOSE_ON_FREE);
    ck_assert_int_eq(bufferevent_socket_connect(t->up, (struct sockaddr *)&sin, sizeof(sin)), 0);
    bufferevent_setcb(t->up, relay_read, NULL, relay_event, t->cli);
    bufferevent_enable(t->up, EV_READ | EV_WRITE);
    bufferevent_setcb(t->cli, relay_read, NULL, relay_event, t->up);
    /* A head split over two writes, with a header line, to exercise the head reader. */
    bufferevent_write(t->cli, "HTTP/1.1 200 Connection est", 27);
    bufferevent_flush(t->cli, EV_WRITE, BEV_FLUSH);
    bufferevent_write(t->cli, "ablished\r\nVia: test-proxy\r\n\r\n", 29);
}

static void proxy_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                         void *arg)
{
    struct tproxy *t;

    ck_assert_int_lt(fx.nproxies, 4);
    t = &fx.proxies[fx.nproxies++];
    fx.proxy_accepts++;
    t->cli = bufferevent_socket_new(fx.base, fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(t->cli, proxy_head, NULL, relay_event, t);
    bufferevent_enable(t->cli, EV_READ | EV_WRITE);
}

static void dns_answer(struct evdns_server_request *req, void *arg)
{
    const struct dns_entry *e = NULL;
    int i;

    fx.dns_queries++;
    if (req->nquestions != 1) {
        evdns_server_request_respond(req, DNS_ERR_FORMAT);
        return;
    }
    for (size_t k = 0; k < sizeof(dns_table) / sizeof(dns_table[0]); k++) {
        if (strcasecmp(dns_table[k].name, req->questions[0]->name) == 0)
            e = &dns_table[k];
    }
    if (e == NULL) {
        evdns_server_request_respond(req, DNS_ERR_NOTEXIST);
        return;
    }
    if (e->silent) {
        evdns_server_request_drop(req);
        return;
    }
    for (i = 0; i < 4 && e->addrs[i] != NULL; i++) {
        unsigned char a[16];
        const char *name = req->questions[0]->name;

        if (req->questions[0]->type == EVDNS_TYPE_A && inet_pton(AF_INET, e->addrs[i], a) == 1)
            evdns_server_request_add_a_reply(req, name, 1, a, 60);
        if (req->questions[0]->type == EVDNS_TYPE_AAAA && inet_pton(AF_INET6, e->addrs[i], a) == 1)
            evdns_server_request_add_aaaa_reply(req, name, 1, a, 60);
    }
    evdns_server_request_respond(req, 0);
}

static struct evconnlistener *listen_on(evconnlistener_cb cb, int backlog, int *port)
{
    struct sockaddr_in sin = loopback(0);
    struct evconnlistener *l =
        evconnlistener_new_bind(fx.base, cb, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                backlog, (struct sockaddr *)&sin, sizeof(sin));

    ck_assert_ptr_nonnull(l);
    *port = bound_port(evconnlistener_get_fd(l));
    return l;
}

static void setup(void)
{
    struct sockaddr_in sin = loopback(0);
    evutil_socket_t fd;

    /* As in `vaultgate run`: a peer that closed must not kill the process on write. */
    signal(SIGPIPE, SIG_IGN);
    memset(&fx, 0, sizeof(fx));
    fx.base = event_base_new();
    ck_assert_ptr_nonnull(fx.base);
    pki_make(&fx.pki, "vaultgate test CA");
    pki_make(&fx.other, "some other CA");
    snprintf(fx.ca_path, sizeof(fx.ca_path), "/tmp/vg-upstream-ca-XXXXXX");
    snprintf(fx.other_ca_path, sizeof(fx.other_ca_path), "/tmp/vg-upstream-other-XXXXXX");
    write_pem(fx.pki.ca, fx.ca_path);
    write_pem(fx.other.ca, fx.other_ca_path);
    fx.srv_ctx = SSL_CTX_new(TLS_server_method());
    ck_assert_int_eq(SSL_CTX_use_certificate(fx.srv_ctx, fx.pki.leaf), 1);
    ck_assert_int_eq(SSL_CTX_use_PrivateKey(fx.srv_ctx, fx.pki.leaf_key), 1);
    fx.tls_l = listen_on(tls_accept, 16, &fx.tls_port);
    fx.plain_l = listen_on(plain_accept, 16, &fx.plain_port);
    fx.silent_l = listen_on(silent_accept, 16, &fx.silent_port);
    fx.proxy_l = listen_on(proxy_accept, 16, &fx.proxy_port);
    /* A port nobody listens on: bind, read the number, close. */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    fx.closed_port = bound_port(fd);
    close(fd);
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    evutil_make_socket_nonblocking(fd);
    fx.dns_port = bound_port(fd);
    fx.dns = evdns_add_server_port_with_base(fx.base, fd, 0, dns_answer, NULL);
    ck_assert_ptr_nonnull(fx.dns);
}

static void teardown(void)
{
    upstream_ctx_free(&fx.ctx);
    /* Let cancelled DNS queries deliver their (freeing) callbacks. */
    event_base_loop(fx.base, EVLOOP_NONBLOCK);
    for (int i = 0; i < FX_MAX_CONNS; i++) {
        if (fx.srv[i] != NULL)
            bufferevent_free(fx.srv[i]);
    }
    for (int i = 0; i < fx.silent_accepts; i++)
        close(fx.silent_fds[i]);
    for (int i = 0; i < fx.nproxies; i++) {
        if (fx.proxies[i].cli != NULL)
            bufferevent_free(fx.proxies[i].cli);
        if (fx.proxies[i].up != NULL)
            bufferevent_free(fx.proxies[i].up);
    }
    evdns_close_server_port(fx.dns);
    evconnlistener_free(fx.tls_l);
    evconnlistener_free(fx.plain_l);
    evconnlistener_free(fx.silent_l);
    evconnlistener_free(fx.proxy_l);
    SSL_CTX_free(fx.srv_ctx);
    event_base_free(fx.base);
    unlink(fx.ca_path);
    unlink(fx.other_ca_path);
    pki_free(&fx.pki);
    pki_free(&fx.other);
}

/* ---- helpers ------------------------------------------------------------------------------ */

struct opts {
    const char *pins[4];
    const char *allow[4];
    const char *ca_file; /* default: the test CA */
    const char *proxy;
    double connect_timeout, tls_timeout, idle_timeout;
    size_t pool_max;
};

static char dns_server[32];

static struct upstream_ctx *make_ctx(const struct opts *o)
{
    static const char *dns[1];
    struct upstream_config cfg;
    char err[256];
    struct upstream_ctx *c;

    memset(&cfg, 0, sizeof(cfg));
    snprintf(dns_server, sizeof(dns_server), "127.0.0.1:%d", fx.dns_port);
    dns[0] = dns_server;
    cfg.dns_servers = dns;
    cfg.ndns = 1;
    cfg.pins = o->pins;
    while (cfg.npins < 4 && o->pins[cfg.npins] != NULL)
        cfg.npins++;
    cfg.allow_private = o->allow;
    while (cfg.nallow < 4 && o->allow[cfg.nallow] != NULL)
        cfg.nallow++;
    cfg.ca_file = o->ca_file != NULL ? o->ca_file : fx.ca_path;
    cfg.upstream_proxy = o->proxy;
    cfg.connect_timeout = o->connect_timeout > 0 ? o->connect_timeout : 2;
    cfg.tls_timeout = o->tls_timeout > 0 ? o->tls_timeout : 2;
    cfg.pool_idle_timeout = o->idle_timeout > 0 ? o->idle_timeout : 30;
    cfg.pool_max_per_key = o->pool_max;
    c = upstream_ctx_new(fx.base, &cfg, err, sizeof(err));
    ck_assert_msg(c != NULL, "upstream_ctx_new: %s", err);
    fx.ctx = c;
    return c;
}

struct result {
    int calls;
    struct cio *io; /* the delivered connection */
    enum upstream_err err;
    bool tunnel;
    bool pooled;
};

static void on_result(void *arg, struct cio *io, enum upstream_err err, unsigned how)
{
    struct result *r = arg;

    r->calls++;
    r->io = io;
    r->err = err;
    r->tunnel = (how & UPSTREAM_VIA_TUNNEL) != 0;
    r->pooled = (how & UPSTREAM_POOLED) != 0;
    event_base_loopbreak(fx.base);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    event_base_loopbreak(fx.base);
}

/* Runs the loop until a loopbreak or ms milliseconds. */
static void run_for(int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    struct event *t = evtimer_new(fx.base, on_timeout, NULL);

    evtimer_add(t, &tv);
    event_base_dispatch(fx.base);
    event_free(t);
}

/* Runs the loop until r's callback ran (or 3 s), then returns its error. */
static enum upstream_err wait_result(struct result *r)
{
    for (int i = 0; i < 30 && r->calls == 0; i++)
        run_for(100);
    ck_assert_int_eq(r->calls, 1);
    if (r->err == UPSTREAM_OK) {
        /* delivered reading, with no callbacks and nothing queued */
        ck_assert_ptr_nonnull(r->io);
        ck_assert_uint_eq(cio_queued(r->io), 0);
        ck_assert(!cio_writing(r->io));
    } else {
        ck_assert_ptr_null(r->io);
    }
    return r->err;
}

static enum upstream_err get(const char *host, int port, bool tls, struct result *r)
{
    struct upstream_req *req;

    memset(r, 0, sizeof(*r));
    req = upstream_get(fx.ctx, host, port, tls, false, on_result, r);
    ck_assert_ptr_nonnull(req);
    ck_assert_int_eq(r->calls, 0); /* never from inside upstream_get */
    return wait_result(r);
}

/* Sends msg on io (cio_push) and waits for the echo. */
static void cio_send(struct cio *io, const char *msg)
{
    struct evbuffer *stage = evbuffer_new();

    ck_assert_ptr_nonnull(stage);
    evbuffer_add(stage, msg, strlen(msg));
    cio_push(io, stage, false);
    ck_assert_uint_eq(evbuffer_get_length(stage), 0);
    evbuffer_free(stage);
}

static void echo_check(struct cio *io, const char *msg)
{
    struct evbuffer *in = cio_input(io);
    char buf[64];
    size_t n = strlen(msg);

    cio_send(io, msg);
    for (int i = 0; i < 30 && evbuffer_get_length(in) < n; i++)
        run_for(50);
    ck_assert_uint_eq(evbuffer_get_length(in), n);
    evbuffer_remove(in, buf, n);
    ck_assert(memcmp(buf, msg, n) == 0);
}

static const char *pin(const char *host, int port, const char *addr)
{
    static char bufs[4][128];
    static int i;
    char *b = bufs[i++ % 4];

    snprintf(b, 128, "%s:%d:%s", host, port, addr);
    return b;
}

static struct upstream_stats stats(void)
{
    struct upstream_stats s;

    upstream_ctx_stats(fx.ctx, &s);
    return s;
}

/* ---- tests -------------------------------------------------------------------------------- */

START_TEST(test_pinned_tls_ok)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")}};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    ck_assert(!r.tunnel);
    ck_assert_int_eq(fx.tls_accepts, 1);
    ck_assert_int_eq(fx.dns_queries, 0); /* a pin needs no DNS */
    echo_check(r.io, "hello over verified TLS");
    ck_assert_uint_eq(stats().tls_handshakes, 1);
    cio_free(&r.io);
}
END_TEST

START_TEST(test_host_normalised)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "[::ffff:127.0.0.1]")}};
    struct result r;

    make_ctx(&o);
    /* Pinned addresses are exempt even when they are loopback in a mapped form. */
    ck_assert_int_eq(get("UPSTREAM.Test.", fx.tls_port, true, &r), UPSTREAM_OK);
    cio_free(&r.io);
}
END_TEST

START_TEST(test_wrong_name_tls_error)
{
    struct opts o = {.pins = {pin("wrong.test", fx.tls_port, "127.0.0.1")}};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("wrong.test", fx.tls_port, true, &r), UPSTREAM_ERR_TLS);
    ck_assert_int_eq(fx.tls_accepts, 1);
}
END_TEST

/* Runs fn with stderr (the event log) captured into buf. */
static void capture_log(void (*fn)(void), char *buf, size_t len)
{
    char path[] = "/tmp/vg-upstream-log-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    ssize_t n;

    ck_assert_int_ge(fd, 0);
    log_set_level(LOG_DEBUG);
    dup2(fd, 2);
    fn();
    dup2(saved, 2);
    close(saved);
    log_set_level(LOG_INFO);
    n = pread(fd, buf, len - 1, 0);
    ck_assert_int_ge(n, 0);
    buf[n] = '\0';
    close(fd);
    unlink(path);
}

static void wrong_name_and_private(void)
{
    struct result r;

    ck_assert_int_eq(get("wrong.test", fx.tls_port, true, &r), UPSTREAM_ERR_TLS);
    ck_assert_int_eq(get("private.upstream.test", 443, true, &r), UPSTREAM_ERR_PROHIBITED);
}

START_TEST(test_failures_logged_at_debug)
{
    struct opts o = {.pins = {pin("wrong.test", fx.tls_port, "127.0.0.1")}};
    char log[8192];

    make_ctx(&o);
    capture_log(wrong_name_and_private, log, sizeof(log));
    ck_assert_msg(strstr(log, "\"reason\":\"tls_certificate_error\"") != NULL, "%s", log);
    ck_assert_msg(strstr(log, "hostname mismatch") != NULL, "%s", log);
    ck_assert_msg(strstr(log, "\"host\":\"wrong.test\"") != NULL, "%s", log);
    ck_assert_msg(strstr(log, "10.0.0.1 private") != NULL, "%s", log);
    ck_assert_msg(strstr(log, "destination_ip_prohibited") != NULL, "%s", log);
}
END_TEST

static void untrusted(void)
{
    struct result r;

    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_ERR_TLS);
}

START_TEST(test_untrusted_logged)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")},
                     .ca_file = fx.other_ca_path};
    char log[8192];

    make_ctx(&o);
    capture_log(untrusted, log, sizeof(log));
    ck_assert_msg(strstr(log, "unable to get local issuer certificate") != NULL, "%s", log);
}
END_TEST

START_TEST(test_partial_wildcard_depth)
{
    /* *.upstream.test covers one label only. */
    struct opts o = {.pins = {pin("a.b.upstream.test", fx.tls_port, "127.0.0.1")}};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("a.b.upstream.test", fx.tls_port, true, &r), UPSTREAM_ERR_TLS);
}
END_TEST

START_TEST(test_untrusted_ca_tls_error)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")},
                     .ca_file = fx.other_ca_path};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_ERR_TLS);
}
END_TEST

START_TEST(test_ip_literal_verified_by_ip)
{
    struct opts o = {.allow = {"127.0.0.0/8"}};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("127.0.0.1", fx.tls_port, true, &r), UPSTREAM_OK);
    ck_assert_int_eq(fx.dns_queries, 0);
    echo_check(r.io, "ip");
    cio_free(&r.io);
}
END_TEST

START_TEST(test_ip_literal_prohibited)
{
    struct opts o = {0};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("127.0.0.1", fx.tls_port, true, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(get("::ffff:127.0.0.1", fx.tls_port, true, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(get("::1", fx.tls_port, true, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(get("169.254.169.254", 80, false, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(fx.tls_accepts, 0);
    ck_assert_uint_eq(stats().dials, 0);
}
END_TEST

START_TEST(test_closed_port_connect_error)
{
    struct opts o = {.pins = {pin("upstream.test", fx.closed_port, "127.0.0.1")}};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.closed_port, true, &r), UPSTREAM_ERR_CONNECT);
}
END_TEST

START_TEST(test_plain_connection)
{
    struct opts o = {.pins = {pin("plain.test", fx.plain_port, "127.0.0.1")}};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("plain.test", fx.plain_port, false, &r), UPSTREAM_OK);
    ck_assert_int_eq(fx.plain_accepts, 1);
    echo_check(r.io, "plain");
    cio_free(&r.io);
}
END_TEST

START_TEST(test_dns_loopback_prohibited_before_dial)
{
    struct opts o = {0};
    struct result r;

    make_ctx(&o);
    /* upstream.test resolves to 127.0.0.1, where the TLS server listens: never dialled. */
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_ERR_PROHIBITED);
    run_for(50);
    ck_assert_int_eq(fx.tls_accepts, 0);
    ck_assert_uint_eq(stats().dials, 0);
    ck_assert_uint_eq(stats().dns_queries, 2);
    ck_assert_int_eq(fx.dns_queries, 2);
}
END_TEST

START_TEST(test_dns_private_prohibited)
{
    struct opts o = {0};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("private.upstream.test", 443, true, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(get("meta.upstream.test", 80, false, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(get("mapped.upstream.test", fx.tls_port, true, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(get("v6only.upstream.test", 443, true, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_uint_eq(stats().dials, 0);
    ck_assert_int_eq(fx.tls_accepts, 0);
}
END_TEST

START_TEST(test_dns_allow_private)
{
    struct opts o = {.allow = {"127.0.0.0/8"}};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    ck_assert_int_eq(fx.tls_accepts, 1);
    echo_check(r.io, "allowed");
    cio_free(&r.io);
    /* The CIDR covers 127/8 only: 10.0.0.1 and the metadata address stay prohibited. */
    ck_assert_int_eq(get("private.upstream.test", 443, true, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_uint_eq(stats().dials, 1);
}
END_TEST

START_TEST(test_dns_mixed_skips_prohibited)
{
    struct opts o = {.allow = {"127.0.0.0/8"}};
    struct result r;

    make_ctx(&o);
    /* 10.0.0.1, 127.0.0.1, 169.254.169.254: only the allowed one is dialled, exactly once. */
    ck_assert_int_eq(get("mixed.upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    ck_assert_uint_eq(stats().dials, 1);
    ck_assert_int_eq(fx.tls_accepts, 1);
    cio_free(&r.io);
}
END_TEST

START_TEST(test_dns_nxdomain)
{
    struct opts o = {0};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("nx.test", 443, true, &r), UPSTREAM_ERR_DNS);
    ck_assert_uint_eq(stats().dials, 0);
}
END_TEST

START_TEST(test_dns_timeout)
{
    struct opts o = {.connect_timeout = 0.3};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("slow.upstream.test", 443, true, &r), UPSTREAM_ERR_DNS);
}
END_TEST

START_TEST(test_tls_handshake_timeout)
{
    struct opts o = {.pins = {pin("upstream.test", fx.silent_port, "127.0.0.1")},
                     .tls_timeout = 0.3};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.silent_port, true, &r), UPSTREAM_ERR_TIMEOUT);
    ck_assert_int_eq(fx.silent_accepts, 1);
}
END_TEST

START_TEST(test_connect_timeout)
{
    struct sockaddr_in sin = loopback(0);
    evutil_socket_t lfd = socket(AF_INET, SOCK_STREAM, 0), fill[4];
    struct result r;
    int port;

    /* A listener that never accepts, its backlog full: further SYNs are dropped. */
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(listen(lfd, 0), 0);
    port = bound_port(lfd);
    sin = loopback(port);
    for (int i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fill[i], (struct sockaddr *)&sin, sizeof(sin));
    }
    usleep(100 * 1000);
    {
        struct opts o = {.pins = {pin("upstream.test", port, "127.0.0.1")}, .connect_timeout = 0.3};

        make_ctx(&o);
        ck_assert_int_eq(get("upstream.test", port, true, &r), UPSTREAM_ERR_TIMEOUT);
    }
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(lfd);
}
END_TEST

START_TEST(test_pool_reuse)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")}};
    struct result r;
    struct cio *first;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    ck_assert(!r.pooled); /* dialled */
    echo_check(r.io, "one");
    first = r.io;
    upstream_release(fx.ctx, "upstream.test", fx.tls_port, true, &r.io);
    ck_assert_ptr_null(r.io);
    ck_assert_uint_eq(stats().pool_idle, 1);
    run_for(50);
    /* Another key (plain, other port) does not match. */
    ck_assert_uint_eq(stats().pool_idle, 1);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    ck_assert_ptr_eq(r.io, first);
    ck_assert(r.pooled); /* the callback says so: origin_h1 asks for no quick ACK then */
    ck_assert_int_eq(fx.tls_accepts, 1);
    ck_assert_uint_eq(stats().pool_hits, 1);
    ck_assert_uint_eq(stats().pool_idle, 0);
    echo_check(r.io, "two");
    cio_free(&r.io);
}
END_TEST

START_TEST(test_pool_drops_closed)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")}};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    echo_check(r.io, "x");
    upstream_release(fx.ctx, "upstream.test", fx.tls_port, true, &r.io);
    ck_assert_uint_eq(stats().pool_idle, 1);
    /* The server closes its side; the idle connection notices and leaves the pool. */
    for (int i = 0; i < FX_MAX_CONNS; i++) {
        if (fx.srv[i] != NULL)
            srv_close(fx.srv[i]);
    }
    for (int i = 0; i < 20 && stats().pool_idle != 0; i++)
        run_for(50);
    ck_assert_uint_eq(stats().pool_idle, 0);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    ck_assert_int_eq(fx.tls_accepts, 2);
    ck_assert_uint_eq(stats().pool_hits, 0);
    echo_check(r.io, "fresh");
    cio_free(&r.io);
}
END_TEST

START_TEST(test_pool_checkout_skips_closed)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")}};
    struct result r;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    echo_check(r.io, "x");
    upstream_release(fx.ctx, "upstream.test", fx.tls_port, true, &r.io);
    /* shutdown(2) sends the FIN now; bufferevent_free would close the fd only in the loop. */
    for (int i = 0; i < FX_MAX_CONNS; i++) {
        if (fx.srv[i] != NULL)
            shutdown(bufferevent_getfd(fx.srv[i]), SHUT_RDWR);
    }
    usleep(20 * 1000);
    /* The loop has not run: the idle callbacks have not seen the close, the checkout has. */
    ck_assert_uint_eq(stats().pool_idle, 1);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    ck_assert_uint_eq(stats().pool_hits, 0);
    ck_assert_int_eq(fx.tls_accepts, 2);
    echo_check(r.io, "fresh");
    cio_free(&r.io);
}
END_TEST

/* The owner's event callback saw the upstream's close (or a close without close_notify) and let it
 * pass (a response already complete): the connection never reads again, so the pool refuses it. */
static void count_event(struct cio *io, short what, void *arg)
{
    (void)io;
    if (what & (CIO_EOF | CIO_ERROR))
        ++*(int *)arg;
}

START_TEST(test_pool_refuses_ended)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")}};
    struct result r;
    int eofs = 0;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    echo_check(r.io, "x");
    ck_assert(cio_open(r.io));
    cio_setcb(r.io, NULL, NULL, count_event, &eofs);
    for (int i = 0; i < FX_MAX_CONNS; i++) {
        if (fx.srv[i] != NULL)
            srv_close(fx.srv[i]);
    }
    for (int i = 0; i < 20 && eofs == 0; i++)
        run_for(50);
    ck_assert_int_eq(eofs, 1);
    ck_assert(!cio_open(r.io));
    cio_setcb(r.io, NULL, NULL, NULL, NULL);
    upstream_release(fx.ctx, "upstream.test", fx.tls_port, true, &r.io);
    ck_assert_ptr_null(r.io);
    ck_assert_uint_eq(stats().pool_idle, 0);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    ck_assert(!r.pooled);
    ck_assert_int_eq(fx.tls_accepts, 2);
    echo_check(r.io, "fresh");
    cio_free(&r.io);
}
END_TEST

START_TEST(test_pool_idle_timeout_and_cap)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")},
                     .idle_timeout = 0.2,
                     .pool_max = 1};
    struct result r1, r2;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r1), UPSTREAM_OK);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r2), UPSTREAM_OK);
    upstream_release(fx.ctx, "upstream.test", fx.tls_port, true, &r1.io);
    upstream_release(fx.ctx, "upstream.test", fx.tls_port, true, &r2.io); /* over the cap */
    ck_assert_uint_eq(stats().pool_idle, 1);
    run_for(500);
    ck_assert_uint_eq(stats().pool_idle, 0);
}
END_TEST

START_TEST(test_pool_many_per_key)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")}};
    struct result r[6];
    struct cio *got[5];

    make_ctx(&o);
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r[i]), UPSTREAM_OK);
        echo_check(r[i].io, "warm");
    }
    for (int i = 0; i < 6; i++)
        upstream_release(fx.ctx, "upstream.test", fx.tls_port, true, &r[i].io);
    ck_assert_uint_eq(stats().pool_idle, 6); /* past the first slot array: it grew */
    /* One closes on the server side: it leaves the pool, the others stay usable. */
    srv_close(fx.srv[2]);
    for (int i = 0; i < 20 && stats().pool_idle != 5; i++)
        run_for(50);
    ck_assert_uint_eq(stats().pool_idle, 5);
    for (int i = 0; i < 5; i++) {
        struct result x;

        ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &x), UPSTREAM_OK);
        got[i] = x.io;
        for (int j = 0; j < i; j++)
            ck_assert_ptr_ne(got[j], got[i]);
        echo_check(got[i], "reused");
    }
    ck_assert_uint_eq(stats().pool_hits, 5);
    ck_assert_int_eq(fx.tls_accepts, 6);
    for (int i = 0; i < 5; i++)
        cio_free(&got[i]);
}
END_TEST

START_TEST(test_release_with_pending_input_frees)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")}};
    struct result r;
    struct evbuffer *in;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    in = cio_input(r.io);
    cio_send(r.io, "unread");
    for (int i = 0; i < 30 && evbuffer_get_length(in) < 6; i++)
        run_for(50);
    upstream_release(fx.ctx, "upstream.test", fx.tls_port, true, &r.io);
    ck_assert_uint_eq(stats().pool_idle, 0);
}
END_TEST

START_TEST(test_session_resumed)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")}};
    struct result r1, r2;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r1), UPSTREAM_OK);
    echo_check(r1.io, "tickets arrive after the handshake");
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r2), UPSTREAM_OK);
    ck_assert_int_eq(fx.tls_accepts, 2);
    ck_assert_uint_eq(stats().tls_handshakes, 2);
    ck_assert_uint_eq(stats().tls_resumed, 1);
    echo_check(r2.io, "resumed");
    cio_free(&r1.io);
    cio_free(&r2.io);
}
END_TEST

START_TEST(test_cancel_during_dns)
{
    struct opts o = {0};
    struct result r = {0};
    struct upstream_req *req;

    make_ctx(&o);
    req = upstream_get(fx.ctx, "slow.upstream.test", 443, true, false, on_result, &r);
    ck_assert_ptr_nonnull(req);
    run_for(50);
    upstream_cancel(&req);
    ck_assert_ptr_null(req);
    upstream_cancel(&req); /* NULL is fine */
    run_for(200);
    ck_assert_int_eq(r.calls, 0);
}
END_TEST

START_TEST(test_cancel_before_dns_answer)
{
    struct opts o = {.allow = {"127.0.0.0/8"}};
    struct result r = {0};
    struct upstream_req *req;

    make_ctx(&o);
    /* Cancelled in the same loop turn: the answers arrive for a request that is gone. */
    req = upstream_get(fx.ctx, "upstream.test", fx.tls_port, true, false, on_result, &r);
    upstream_cancel(&req);
    run_for(200);
    ck_assert_int_eq(r.calls, 0);
    ck_assert_int_eq(fx.tls_accepts, 0);
}
END_TEST

START_TEST(test_cancel_during_handshake)
{
    struct opts o = {.pins = {pin("upstream.test", fx.silent_port, "127.0.0.1")}};
    struct result r = {0};
    struct upstream_req *req;

    make_ctx(&o);
    req = upstream_get(fx.ctx, "upstream.test", fx.silent_port, true, false, on_result, &r);
    for (int i = 0; i < 20 && fx.silent_accepts == 0; i++)
        run_for(20);
    ck_assert_int_eq(fx.silent_accepts, 1);
    upstream_cancel(&req);
    run_for(100);
    ck_assert_int_eq(r.calls, 0);
}
END_TEST

START_TEST(test_cancel_pool_hit_keeps_connection)
{
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")}};
    struct result r, r2 = {0};
    struct upstream_req *req;

    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    upstream_release(fx.ctx, "upstream.test", fx.tls_port, true, &r.io);
    req = upstream_get(fx.ctx, "upstream.test", fx.tls_port, true, false, on_result, &r2);
    ck_assert_ptr_nonnull(req);
    ck_assert_int_eq(r2.calls, 0);
    upstream_cancel(&req);
    run_for(50);
    ck_assert_int_eq(r2.calls, 0);
    ck_assert_uint_eq(stats().pool_idle, 1);
}
END_TEST

START_TEST(test_tunnel_ok)
{
    char want[256];
    struct opts o = {0};
    char proxy[64];
    struct result r;

    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", fx.proxy_port);
    o.proxy = proxy;
    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_OK);
    ck_assert(r.tunnel);
    snprintf(want, sizeof(want),
             "CONNECT upstream.test:%d HTTP/1.1\r\nHost: upstream.test:%d\r\n\r\n", fx.tls_port,
             fx.tls_port);
    ck_assert_str_eq(fx.proxy_head, want);
    ck_assert_int_eq(fx.proxy_accepts, 1);
    ck_assert_int_eq(fx.dns_queries, 0); /* the proxy resolves the target */
    echo_check(r.io, "through the tunnel");
    cio_free(&r.io);
}
END_TEST

START_TEST(test_tunnel_verifies_tls)
{
    struct opts o = {0};
    char proxy[64];
    struct result r;

    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d/", fx.proxy_port);
    o.proxy = proxy;
    make_ctx(&o);
    /* The server's certificate does not name wrong.test. */
    ck_assert_int_eq(get("wrong.test", fx.tls_port, true, &r), UPSTREAM_ERR_TLS);
    ck_assert_int_eq(fx.proxy_accepts, 1);
}
END_TEST

START_TEST(test_tunnel_refused)
{
    struct opts o = {0};
    char proxy[64];
    struct result r;

    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", fx.proxy_port);
    o.proxy = proxy;
    fx.proxy_refuse = 1;
    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", 443, true, &r), UPSTREAM_ERR_PROXY);
    ck_assert_int_eq(fx.tls_accepts, 0);
}
END_TEST

START_TEST(test_tunnel_literal_target_checked)
{
    struct opts o = {0};
    char proxy[64];
    struct result r;

    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", fx.proxy_port);
    o.proxy = proxy;
    make_ctx(&o);
    /* An IP-literal target is checked here even though the proxy dials it. */
    ck_assert_int_eq(get("10.0.0.1", 443, true, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(fx.proxy_accepts, 0);
}
END_TEST

START_TEST(test_tunnel_proxy_down)
{
    struct opts o = {0};
    char proxy[64];
    struct result r;

    snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", fx.closed_port);
    o.proxy = proxy;
    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", 443, true, &r), UPSTREAM_ERR_CONNECT);
    ck_assert(r.tunnel);
}
END_TEST

START_TEST(test_own_listener_never_dialled)
{
    struct sockaddr_in sin = loopback(fx.tls_port);
    struct opts o = {.pins = {pin("upstream.test", fx.tls_port, "127.0.0.1")},
                     .allow = {"127.0.0.0/8"}};
    struct result r;

    /* Process-wide and permanent: Check runs each test in its own process. */
    ck_assert_int_eq(upstream_add_own_address((struct sockaddr *)&sin), 0);
    make_ctx(&o);
    ck_assert_int_eq(get("upstream.test", fx.tls_port, true, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(get("127.0.0.1", fx.tls_port, true, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(fx.tls_accepts, 0);
    /* Another port on the same address is not the listener, and 127/8 is allowed. */
    ck_assert_int_eq(get("127.0.0.1", fx.plain_port, false, &r), UPSTREAM_OK);
    cio_free(&r.io);
}
END_TEST

START_TEST(test_own_wildcard_listener)
{
    struct sockaddr_in sin = loopback(fx.plain_port);
    struct opts o = {.allow = {"127.0.0.0/8"}};
    struct result r;

    /* 0.0.0.0:port is reachable as 127.0.0.1:port (every interface address is registered). */
    sin.sin_addr.s_addr = htonl(INADDR_ANY);
    ck_assert_int_eq(upstream_add_own_address((struct sockaddr *)&sin), 0);
    ck_assert_int_eq(upstream_add_own_address((struct sockaddr *)&sin), 0); /* idempotent */
    make_ctx(&o);
    ck_assert_int_eq(get("127.0.0.1", fx.plain_port, false, &r), UPSTREAM_ERR_PROHIBITED);
    /* ... and as every other 127/8 address, which getifaddrs() does not list: refused before
     * dialling (a dial would give UPSTREAM_ERR_CONNECT, nothing listens there). */
    ck_assert_int_eq(get("127.0.0.9", fx.plain_port, false, &r), UPSTREAM_ERR_PROHIBITED);
    ck_assert_int_eq(fx.plain_accepts, 0);
    ck_assert_int_eq(get("127.0.0.1", fx.tls_port, true, &r), UPSTREAM_OK);
    cio_free(&r.io);
}
END_TEST

struct cfg_case {
    const char *dns, *pin, *allow, *proxy;
    int ok;
};

static const struct cfg_case cfg_cases[] = {
    {"127.0.0.1", NULL, NULL, NULL, 0},
    {"127.0.0.1:5353", NULL, NULL, NULL, 0},
    {"::1", NULL, NULL, NULL, 0},
    {"[::1]:5353", NULL, NULL, NULL, 0},
    {"[::1]", NULL, NULL, NULL, 0},
    {"127.0.0.1:0", NULL, NULL, NULL, -1},
    {"127.0.0.1:65536", NULL, NULL, NULL, -1},
    {"::1:53x", NULL, NULL, NULL, -1},
    {"localhost", NULL, NULL, NULL, -1},
    {"", NULL, NULL, NULL, -1},
    {NULL, "api.example:443:203.0.113.7", NULL, NULL, 0},
    {NULL, "api.example:443:[2001:db8::1]", NULL, NULL, 0},
    {NULL, "api.example:443:2001:db8::1", NULL, NULL, 0},
    {NULL, "[2001:db8::5]:443:127.0.0.1", NULL, NULL, 0},
    {NULL, "API.Example.:443:127.0.0.1", NULL, NULL, 0},
    {NULL, "api.example:443", NULL, NULL, -1},
    {NULL, "api.example::127.0.0.1", NULL, NULL, -1},
    {NULL, "api.example:99999:127.0.0.1", NULL, NULL, -1},
    {NULL, "api.example:443:example.com", NULL, NULL, -1},
    {NULL, "bad_host:443:127.0.0.1", NULL, NULL, -1},
    {NULL, NULL, "10.0.0.0/8", NULL, 0},
    {NULL, NULL, "10.0.0.1/8", NULL, -1},
    {NULL, NULL, "nonsense", NULL, -1},
    {NULL, NULL, NULL, "http://proxy.corp:3128", 0},
    {NULL, NULL, NULL, "HTTP://10.1.2.3:3128/", 0},
    {NULL, NULL, NULL, "http://[::1]:3128", 0},
    {NULL, NULL, NULL, "http://proxy.corp", 0},
    {NULL, NULL, NULL, "https://proxy.corp:3128", -1},
    {NULL, NULL, NULL, "http://user:pw@proxy.corp:3128", -1},
    {NULL, NULL, NULL, "http://proxy.corp:3128/path", -1},
    {NULL, NULL, NULL, "http://proxy.corp:x", -1},
    {NULL, NULL, NULL, "http://", -1},
    {NULL, NULL, NULL, "proxy.corp:3128", -1},
};

START_TEST(test_config_check)
{
    const struct cfg_case *c = &cfg_cases[_i];
    struct upstream_config cfg;
    const char *dns[1] = {c->dns}, *pins[1] = {c->pin}, *allow[1] = {c->allow};
    char err[256] = "";

    memset(&cfg, 0, sizeof(cfg));
    cfg.dns_servers = dns;
    cfg.ndns = c->dns != NULL;
    cfg.pins = pins;
    cfg.npins = c->pin != NULL;
    cfg.allow_private = allow;
    cfg.nallow = c->allow != NULL;
    cfg.upstream_proxy = c->proxy;
    ck_assert_msg(upstream_config_check(&cfg, err, sizeof(err)) == c->ok, "case %d: %s", _i, err);
    if (c->ok != 0)
        ck_assert_msg(err[0] != '\0', "case %d: no error text", _i);
}
END_TEST

START_TEST(test_bad_ca_file)
{
    struct upstream_config cfg;
    char err[256] = "";

    memset(&cfg, 0, sizeof(cfg));
    cfg.ca_file = "/nonexistent/ca.pem";
    cfg.dns_servers = (const char *const[]){"127.0.0.1:9"};
    cfg.ndns = 1;
    ck_assert_ptr_null(upstream_ctx_new(fx.base, &cfg, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/ca.pem"));
}
END_TEST

START_TEST(test_get_rejects_bad_input)
{
    struct opts o = {0};
    struct result r = {0};

    make_ctx(&o);
    ck_assert_ptr_null(upstream_get(fx.ctx, "bad host", 443, true, false, on_result, &r));
    ck_assert_ptr_null(upstream_get(fx.ctx, "upstream.test", 0, true, false, on_result, &r));
    ck_assert_ptr_null(upstream_get(fx.ctx, "upstream.test", 65536, true, false, on_result, &r));
    run_for(20);
    ck_assert_int_eq(r.calls, 0);
}
END_TEST

START_TEST(test_err_names)
{
    ck_assert_str_eq(upstream_err_type(UPSTREAM_ERR_DNS), "dns_error");
    ck_assert_str_eq(upstream_err_type(UPSTREAM_ERR_PROHIBITED), "destination_ip_prohibited");
    ck_assert_str_eq(upstream_err_type(UPSTREAM_ERR_CONNECT), "connection_refused");
    ck_assert_str_eq(upstream_err_type(UPSTREAM_ERR_TLS), "tls_certificate_error");
    ck_assert_str_eq(upstream_err_type(UPSTREAM_ERR_TIMEOUT), "connection_timeout");
    ck_assert_int_eq(upstream_err_status(UPSTREAM_ERR_PROHIBITED), 403);
    ck_assert_int_eq(upstream_err_status(UPSTREAM_ERR_TIMEOUT), 504);
    ck_assert_int_eq(upstream_err_status(UPSTREAM_ERR_DNS), 502);
    ck_assert_int_eq(upstream_err_status(UPSTREAM_ERR_CONNECT), 502);
    ck_assert_int_eq(upstream_err_status(UPSTREAM_ERR_TLS), 502);
    ck_assert_int_eq(upstream_err_status(UPSTREAM_ERR_PROXY), 502);
}
END_TEST

Suite *suite_upstream(void);

Suite *suite_upstream(void)
{
    Suite *s = suite_create("upstream");
    TCase *tc = tcase_create("connect");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pinned_tls_ok);
    tcase_add_test(tc, test_host_normalised);
    tcase_add_test(tc, test_wrong_name_tls_error);
    tcase_add_test(tc, test_partial_wildcard_depth);
    tcase_add_test(tc, test_failures_logged_at_debug);
    tcase_add_test(tc, test_untrusted_logged);
    tcase_add_test(tc, test_untrusted_ca_tls_error);
    tcase_add_test(tc, test_ip_literal_verified_by_ip);
    tcase_add_test(tc, test_ip_literal_prohibited);
    tcase_add_test(tc, test_closed_port_connect_error);
    tcase_add_test(tc, test_plain_connection);
    tcase_add_test(tc, test_dns_loopback_prohibited_before_dial);
    tcase_add_test(tc, test_dns_private_prohibited);
    tcase_add_test(tc, test_dns_allow_private);
    tcase_add_test(tc, test_dns_mixed_skips_prohibited);
    tcase_add_test(tc, test_dns_nxdomain);
    tcase_add_test(tc, test_dns_timeout);
    tcase_add_test(tc, test_tls_handshake_timeout);
    tcase_add_test(tc, test_connect_timeout);
    tcase_add_test(tc, test_get_rejects_bad_input);
    tcase_add_test(tc, test_bad_ca_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("pool");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_pool_reuse);
    tcase_add_test(tc, test_pool_drops_closed);
    tcase_add_test(tc, test_pool_checkout_skips_closed);
    tcase_add_test(tc, test_pool_refuses_ended);
    tcase_add_test(tc, test_pool_idle_timeout_and_cap);
    tcase_add_test(tc, test_pool_many_per_key);
    tcase_add_test(tc, test_release_with_pending_input_frees);
    tcase_add_test(tc, test_session_resumed);
    tcase_add_test(tc, test_cancel_during_dns);
    tcase_add_test(tc, test_cancel_before_dns_answer);
    tcase_add_test(tc, test_cancel_during_handshake);
    tcase_add_test(tc, test_cancel_pool_hit_keeps_connection);
    suite_add_tcase(s, tc);

    tc = tcase_create("tunnel");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_tunnel_ok);
    tcase_add_test(tc, test_tunnel_verifies_tls);
    tcase_add_test(tc, test_tunnel_refused);
    tcase_add_test(tc, test_tunnel_literal_target_checked);
    tcase_add_test(tc, test_tunnel_proxy_down);
    suite_add_tcase(s, tc);

    tc = tcase_create("config");
    tcase_add_test(tc, test_err_names);
    tcase_add_loop_test(tc, test_config_check, 0, (int)(sizeof(cfg_cases) / sizeof(cfg_cases[0])));
    suite_add_tcase(s, tc);

    /* Last: registering an own address is permanent for the process (matters under CK_NOFORK). */
    tc = tcase_create("own");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_own_listener_never_dialled);
    tcase_add_test(tc, test_own_wildcard_listener);
    suite_add_tcase(s, tc);
    return s;
}
