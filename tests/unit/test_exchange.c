/*
 * test_exchange.c - the exchange (proxy/exchange.c, exchange_resp.c) driven by a fake
 * transport: a request in, the exact bytes an upstream on loopback receives, the response the
 * transport is handed back, and how the exchange ends. The upstreams are real sockets on the
 * test's own event base (plain HTTP on :80, TLS on :443 with a leaf of the product's own CA
 * module); the worker around the exchange is built by hand, without threads.
 *
 * The second case set puts a fake origin (proxy/origin.h) behind the exchange instead: no
 * socket at all, the test says when the upstream is there, what it answers and how it fails.
 *
 * The secret is a canary; failure messages never print it.
 */
#include <check.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/ssl.h>

#include "ca/ca.h"
#include "ca/certcache.h"
#include "policy/policy.h"
#include "proxy/exchange.h"
#include "http/http1.h"
#include "proxy/listen.h"
#include "proxy/metrics.h"
#include "proxy/modules.h"
#include "proxy/origin.h"
#include "proxy/upstream.h"
#include "proxy/worker.h"

#define SECRET "sk-canary-EXCHANGE-0001"

static const char vault_json[] =
    "{\"version\":1,\"run\":{\"id\":\"run-x\",\"user\":\"u\"},"
    "\"secrets\":{\"K\":{\"value\":\"" SECRET "\"}},"
    "\"rules\":[{\"host_pattern\":\"up.test\",\"secret\":\"K\",\"scheme\":\"bearer\"}],"
    "\"host_policy\":{\"default\":\"allow\",\"hosts\":{\"blocked.test\":\"block\"}}}";

/* ---- the upstream: one scripted answer per connection ----------------------------------- */

struct upserv {
    struct evconnlistener *l80, *l443;
    SSL_CTX *ctx;
    struct evbuffer *got; /* every byte received, all connections */
    const char *answer;   /* sent once a whole request head (and its body) arrived */
    size_t big;           /* or: a 200 with this many body bytes */
    int accepts;
    struct bufferevent *conns[16]; /* freed at teardown (or when the peer closes) */
};

static void up_event(struct bufferevent *bev, short what, void *arg);

static void up_read(struct bufferevent *bev, void *arg)
{
    struct upserv *u = arg;
    size_t n;
    const char *all, *end;

    evbuffer_add_buffer(u->got, bufferevent_get_input(bev));
    n = evbuffer_get_length(u->got);
    all = (const char *)evbuffer_pullup(u->got, -1);
    end = all != NULL ? memmem(all, n, "\r\n\r\n", 4) : NULL;
    if (end == NULL)
        return;
    if (memmem(all, (size_t)(end - all), "Content-Length: 5\r\n", 19) != NULL &&
        n < (size_t)(end - all) + 4 + 5)
        return;
    if (u->big > 0) {
        char *body = malloc(u->big);

        memset(body, 'b', u->big);
        evbuffer_add_printf(bufferevent_get_output(bev),
                            "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", u->big);
        evbuffer_add(bufferevent_get_output(bev), body, u->big);
        free(body);
    } else {
        evbuffer_add(bufferevent_get_output(bev), u->answer, strlen(u->answer));
    }
    bufferevent_setcb(bev, NULL, NULL, up_event, u);
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
    struct upserv *u = arg;

    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    for (int i = 0; i < 16; i++) {
        if (u->conns[i] == bev)
            u->conns[i] = NULL;
    }
    bufferevent_free(bev);
}

static void up_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int n,
                      void *arg)
{
    struct upserv *u = arg;
    struct event_base *base = evconnlistener_get_base(l);
    struct bufferevent *bev;

    u->accepts++;
    if (l == u->l443)
        bev = bufferevent_openssl_socket_new(base, fd, SSL_new(u->ctx), BUFFEREVENT_SSL_ACCEPTING,
                                             BEV_OPT_CLOSE_ON_FREE);
    else
        bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
    ck_assert_ptr_nonnull(bev);
    ck_assert_int_lt(u->accepts, 16);
    u->conns[u->accepts - 1] = bev;
    bufferevent_setcb(bev, up_read, NULL, up_event, u);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

static struct evconnlistener *listen_on(struct event_base *base, const char *ip, int port,
                                        struct upserv *u)
{
    struct sockaddr_in sin = {0};
    struct evconnlistener *l;

    sin.sin_family = AF_INET;
    sin.sin_port = htons((unsigned short)port);
    inet_pton(AF_INET, ip, &sin.sin_addr);
    l = evconnlistener_new_bind(base, up_accept, u, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16,
                                (struct sockaddr *)&sin, sizeof(sin));
    return l;
}

/* ---- the fake transport ----------------------------------------------------------------- */

struct fake {
    struct exch_conn cc;
    struct exchange *x;
    struct evbuffer *out; /* "<status>\n" per head, then body bytes */
    int status;
    int error_status;
    bool ended, more, finished, full, drain_armed;
    enum exch_end how;
};

static int f_head(void *t, struct http_head *h, enum exch_body body, uint64_t len, bool close)
{
    struct fake *f = t;

    f->status = h->status;
    evbuffer_add_printf(f->out, "%d\n", h->status);
    return 0;
}

static int f_body(void *t, struct evbuffer *buf)
{
    struct fake *f = t;

    return evbuffer_add_buffer(f->out, buf);
}

static int f_end(void *t, struct http_head *trailers)
{
    ((struct fake *)t)->ended = true;
    return 0;
}

static int f_error(void *t, int status, const char *type, const char *details, const char *host)
{
    ((struct fake *)t)->error_status = status;
    return 0;
}

static size_t f_room(void *t)
{
    struct fake *f = t;

    if (!f->full)
        return 1 << 20;
    f->drain_armed = true;
    return 0;
}

static void f_more(void *t)
{
    ((struct fake *)t)->more = true;
}

static void f_flush(void *t)
{
}

static void f_finished(void *t, enum exch_end how)
{
    struct fake *f = t;

    f->finished = true;
    f->how = how;
}

static const struct exchange_ops fake_ops = {f_head, f_body, f_end,   f_error,
                                             f_room, f_more, f_flush, f_finished};

/* ---- fixture ---------------------------------------------------------------------------- */

static struct event_base *base;
static struct worker_shared sh;
static struct worker w;
static struct upserv up;
static struct ca *ca;
static struct certcache *certs;
static struct listen_addr la_http = {.kind = LISTEN_HTTP, .port = 8080, .label = "http test"};
static struct listen_addr la_https = {.kind = LISTEN_HTTPS, .port = 8443, .label = "https test"};
static struct listen_addr la_proxy = {.kind = LISTEN_PROXY, .port = 3128, .label = "proxy test"};
static char ca_path[] = "/tmp/vg-exchange-ca-XXXXXX";
static char up_ip[32];

static void setup(void)
{
    static char pin80[96], pin443[96], pinb[96];
    static const char *pins[3];
    static struct upstream_config cfg;
    char err[256];
    X509 *leaf;
    STACK_OF(X509) *chain = sk_X509_new_null();
    int fd;

    snprintf(up_ip, sizeof(up_ip), "127.%d.%d.%d", 10 + getpid() % 200, (getpid() / 200) % 250,
             2 + (int)(random() % 250));
    base = event_base_new();
    ck_assert_ptr_nonnull(base);
    ck_assert_int_eq(metrics_init(1), 0);
    static const struct ca_names names = {.constrained = false};

    ca = ca_new("run-x", &names, err, sizeof(err));
    ck_assert_msg(ca != NULL, "%s", err);
    certs = certcache_new(ca, 16);
    leaf = certcache_get(certs, "up.test", err, sizeof(err));
    ck_assert_ptr_nonnull(leaf);
    up.ctx = SSL_CTX_new(TLS_server_method());
    sk_X509_push(chain, ca_intermediate(ca));
    ck_assert_int_eq(SSL_CTX_use_cert_and_key(up.ctx, leaf, ca_leaf_key(ca), chain, 1), 1);
    sk_X509_free(chain);
    X509_free(leaf);
    fd = mkstemp(ca_path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(ca_write_root(ca, ca_path, err, sizeof(err)), 0);
    up.got = evbuffer_new();
    up.l80 = listen_on(base, up_ip, 80, &up);
    up.l443 = listen_on(base, up_ip, 443, &up);
    ck_assert_msg(up.l80 != NULL && up.l443 != NULL, "cannot listen on %s:80/443 (root?)", up_ip);
    snprintf(pin80, sizeof(pin80), "open.test:80:%s", up_ip);
    snprintf(pin443, sizeof(pin443), "up.test:443:%s", up_ip);
    snprintf(pinb, sizeof(pinb), "open.test:443:%s", up_ip);
    pins[0] = pin80;
    pins[1] = pin443;
    pins[2] = pinb;
    cfg.pins = pins;
    cfg.npins = 3;
    cfg.ca_file = ca_path;
    cfg.connect_timeout = cfg.tls_timeout = 5;
    cfg.pool_idle_timeout = 60;
    cfg.pool_max_per_key = 4;
    pthread_mutex_init(&sh.policy_lock, NULL);
    sh.policy = policy_parse(vault_json, sizeof(vault_json) - 1, err, sizeof(err));
    ck_assert_msg(sh.policy != NULL, "%s", err);
    sh.mode = POLICY_MODE_DEFAULT;
    sh.upcfg = &cfg;
    w.base = base;
    w.sh = &sh;
    ck_assert_int_eq(modules_register(&sh, err, sizeof(err)), 0); /* the modules' slots */
    ck_assert_int_eq(exchange_timers_module.init(&w, err, sizeof(err)), 0);
    w.up = upstream_ctx_new(base, &cfg, err, sizeof(err));
    ck_assert_msg(w.up != NULL, "%s", err);
}

static void teardown(void)
{
    exchange_worker_masks(&w, true); /* the worker's maskers, as worker_free does */
    exchange_timers_module.free(&w);
    upstream_ctx_free(&w.up);
    for (int i = 0; i < 16; i++) {
        if (up.conns[i] != NULL)
            bufferevent_free(up.conns[i]);
    }
    policy_unref(&w.policy);
    policy_unref(&sh.policy);
    evconnlistener_free(up.l80);
    evconnlistener_free(up.l443);
    evbuffer_free(up.got);
    SSL_CTX_free(up.ctx);
    certcache_free(&certs);
    ca_free(&ca);
    unlink(ca_path);
    event_base_free(base);
    metrics_shutdown();
    memset(&up, 0, sizeof(up));
    memset(&w, 0, sizeof(w));
    memset(&sh, 0, sizeof(sh));
    strcpy(ca_path, "/tmp/vg-exchange-ca-XXXXXX");
}

/* ---- helpers ---------------------------------------------------------------------------- */

static struct http1_msg *parsed;

static int on_head(void *arg, struct http1_msg *msg)
{
    parsed = msg;
    return 1;
}

static const struct http1_callbacks req_cb = {on_head, NULL, NULL, NULL};

/* A request head parsed by the product's parser (the message lives in *pp). */
static struct http1_msg *parse(struct http1_parser **pp, const char *raw)
{
    *pp = http1_parser_new(HTTP1_REQUEST, &req_cb, NULL);
    parsed = NULL;
    ck_assert_int_gt(http1_feed(*pp, raw, strlen(raw)), 0);
    ck_assert_ptr_nonnull(parsed);
    return parsed;
}

static void fake_init(struct fake *f, const struct listen_addr *la, const char *host)
{
    memset(f, 0, sizeof(*f));
    f->cc.w = &w;
    f->cc.la = la;
    f->cc.id = 1;
    ck_assert_int_eq(exch_conn_names(&f->cc, "test", host), 0);
    f->cc.tls = la->kind == LISTEN_HTTPS;
    f->cc.proxy = la->kind == LISTEN_PROXY;
    f->cc.host_fixed = host != NULL;
    f->cc.default_port = f->cc.tls ? 443 : 80;
    f->out = evbuffer_new();
}

static void fake_free(struct fake *f)
{
    exchange_free(&f->x);
    exch_conn_release(&f->cc);
    evbuffer_free(f->out);
}

/* Runs the loop until cond holds (or 5 s pass). */
#define RUN_UNTIL(cond)                                                                            \
    do {                                                                                           \
        for (int _n = 0; _n < 5000 && !(cond); _n++)                                               \
            event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(1000);                    \
        ck_assert_msg((cond), "timed out waiting for " #cond);                                     \
    } while (0)

static bool out_is(struct fake *f, const char *want)
{
    size_t n = evbuffer_get_length(f->out);

    return n == strlen(want) && memcmp(evbuffer_pullup(f->out, -1), want, n) == 0;
}

static bool up_got(const char *want)
{
    size_t n = evbuffer_get_length(up.got);

    return n == strlen(want) && memcmp(evbuffer_pullup(up.got, -1), want, n) == 0;
}

/* ---- tests ------------------------------------------------------------------------------ */

/* Plain HTTP, allowed host: rewritten head upstream, the response back, the exchange done. */
START_TEST(test_allow_plain)
{
    struct fake f;
    struct http1_parser *p;

    up.answer = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello";
    fake_init(&f, &la_http, NULL);
    f.x = exchange_new(&f.cc, &fake_ops, &f, NULL);
    exchange_request(f.x, parse(&p, "GET /a?b=1 HTTP/1.1\r\nX-One: 1\r\nHost: open.test\r\n"
                                    "Connection: keep-alive, X-Gone\r\nX-Gone: 1\r\n\r\n"));
    RUN_UNTIL(f.finished);
    ck_assert_int_eq(f.how, EXCH_END_DONE);
    ck_assert(up_got("GET /a?b=1 HTTP/1.1\r\nHost: open.test\r\nX-One: 1\r\n\r\n"));
    ck_assert(out_is(&f, "200\nhello"));
    ck_assert(f.ended);
    ck_assert_str_eq(exchange_host(f.x), "open.test");
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

/* TLS, a rule's host: the secret injected, asked identity-coded, its echo masked. */
START_TEST(test_inject_and_mask)
{
    struct fake f;
    struct http1_parser *p;
    const char *want = "GET /v1 HTTP/1.1\r\nHost: up.test\r\nAuthorization: Bearer " SECRET
                       "\r\nAccept-Encoding: identity\r\n\r\n";

    up.answer = "HTTP/1.1 200 OK\r\nContent-Length: 30\r\nX-Echo: " SECRET "\r\n\r\n"
                "key=" SECRET "!!!";
    fake_init(&f, &la_https, "up.test");
    f.x = exchange_new(&f.cc, &fake_ops, &f, NULL);
    exchange_request(f.x, parse(&p, "GET /v1 HTTP/1.1\r\nHost: up.test\r\nAuthorization: Bearer "
                                    "placeholder\r\nAccept-Encoding: gzip\r\nRange: bytes=0-3"
                                    "\r\n\r\n"));
    RUN_UNTIL(f.finished);
    ck_assert_int_eq(f.how, EXCH_END_DONE);
    ck_assert_msg(up_got(want), "upstream head differs (%zu bytes)", evbuffer_get_length(up.got));
    ck_assert(out_is(&f, "200\nkey=***********************!!!"));
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

/* Refusals: a blocked host (403) and a Host naming another host (421); nothing dialled. */
START_TEST(test_refusals)
{
    static const struct {
        const struct listen_addr *la;
        const char *conn_host, *req;
        int status;
    } cases[] = {
        {&la_http, NULL, "GET / HTTP/1.1\r\nHost: blocked.test\r\n\r\n", 403},
        {&la_https, "up.test", "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", 421},
        {&la_https, "up.test", "CONNECT up.test:443 HTTP/1.1\r\nHost: up.test:443\r\n\r\n", 405},
        {&la_http, NULL, "GET http://other.test/ HTTP/1.1\r\nHost: open.test\r\n\r\n", 421},
        {&la_proxy, NULL, "GET /origin HTTP/1.1\r\nHost: open.test\r\n\r\n", 400},
        {&la_proxy, NULL, "GET http://open.test:8080/ HTTP/1.1\r\nHost: open.test:8080\r\n\r\n",
         403},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fake f;
        struct http1_parser *p;

        fake_init(&f, cases[i].la, cases[i].conn_host);
        f.x = exchange_new(&f.cc, &fake_ops, &f, NULL);
        exchange_request(f.x, parse(&p, cases[i].req));
        ck_assert_msg(f.finished && f.how == EXCH_END_CLOSE, "case %zu: not answered at once", i);
        ck_assert_msg(f.error_status == cases[i].status, "case %zu: %d", i, f.error_status);
        fake_free(&f);
        http1_parser_free(&p);
    }
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(up.accepts, 0);
}
END_TEST

/* CONNECT on the proxy listener: a verdict for the transport, not a response. */
START_TEST(test_connect_verdict)
{
    struct fake f;
    struct http1_parser *p;
    const char *host;
    int port;
    bool tunnel;

    fake_init(&f, &la_proxy, NULL);
    f.x = exchange_new(&f.cc, &fake_ops, &f, NULL);
    exchange_request(f.x, parse(&p, "CONNECT open.test:443 HTTP/1.1\r\nHost: open.test:443"
                                    "\r\n\r\n"));
    ck_assert(f.finished && f.how == EXCH_END_CONNECT);
    exchange_connect_target(f.x, &host, &port, &tunnel);
    ck_assert_str_eq(host, "open.test");
    ck_assert_int_eq(port, 443);
    ck_assert(tunnel); /* allowed, not designated, default routing: not intercepted */
    fake_free(&f);
    http1_parser_free(&p);
    fake_init(&f, &la_proxy, NULL);
    f.x = exchange_new(&f.cc, &fake_ops, &f, NULL);
    exchange_request(f.x, parse(&p, "CONNECT up.test:443 HTTP/1.1\r\nHost: up.test:443\r\n\r\n"));
    ck_assert(f.finished && f.how == EXCH_END_CONNECT);
    exchange_connect_target(f.x, &host, &port, &tunnel);
    ck_assert(!tunnel); /* a rule's host is intercepted */
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

/* A request body: fed only after ops->more, sent upstream re-framed. */
START_TEST(test_request_body)
{
    struct fake f;
    struct http1_parser *p;

    up.answer = "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
    fake_init(&f, &la_http, NULL);
    f.x = exchange_new(&f.cc, &fake_ops, &f, NULL);
    exchange_request(f.x,
                     parse(&p, "POST /p HTTP/1.1\r\nHost: open.test\r\nContent-Length: 5\r\n\r\n"));
    ck_assert(!f.more);
    RUN_UNTIL(f.more);
    ck_assert_int_eq(exchange_body(f.x, "hel", 3), 0);
    ck_assert_int_eq(exchange_body(f.x, "lo", 2), 0);
    ck_assert_int_eq(exchange_body_end(f.x), 0);
    ck_assert(exchange_sent(f.x));
    RUN_UNTIL(f.finished);
    ck_assert_int_eq(f.how, EXCH_END_DONE);
    ck_assert(up_got("POST /p HTTP/1.1\r\nHost: open.test\r\nContent-Length: 5\r\n\r\nhello"));
    ck_assert(out_is(&f, "201\n"));
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

/* A client side that is full stops the upstream reads until exchange_drained(). */
START_TEST(test_response_backpressure)
{
    struct fake f;
    struct http1_parser *p;
    size_t before;

    up.big = 4 << 20;
    fake_init(&f, &la_http, NULL);
    f.full = true;
    f.x = exchange_new(&f.cc, &fake_ops, &f, NULL);
    exchange_request(f.x, parse(&p, "GET /big HTTP/1.1\r\nHost: open.test\r\n\r\n"));
    RUN_UNTIL(f.drain_armed);
    for (int i = 0; i < 200; i++) {
        event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
        usleep(1000);
    }
    before = evbuffer_get_length(f.out);
    ck_assert_msg(before < (size_t)(2 << 20), "%zu bytes taken while full", before);
    ck_assert(!f.finished);
    f.full = false;
    exchange_drained(f.x);
    RUN_UNTIL(f.finished);
    ck_assert_int_eq(f.how, EXCH_END_DONE);
    ck_assert_uint_eq(evbuffer_get_length(f.out), 4 + (4 << 20));
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

/* The probe name is answered by the exchange itself, nothing dialled. */
START_TEST(test_probe)
{
    struct fake f;
    struct http1_parser *p;

    fake_init(&f, &la_https, "probe.vaultgate.invalid");
    f.x = exchange_new(&f.cc, &fake_ops, &f, NULL);
    exchange_request(f.x, parse(&p, "GET / HTTP/1.1\r\nHost: probe.vaultgate.invalid\r\n\r\n"));
    ck_assert(f.finished && f.how == EXCH_END_CLOSE && f.status == 204 && f.ended);
    ck_assert_int_eq(up.accepts, 0);
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

/* Freed from inside its own finished callback, the exchange waits for its stack to unwind. */
static void free_in_finished(void *t, enum exch_end how)
{
    struct fake *f = t;

    f->finished = true;
    f->how = how;
    exchange_free(&f->x);
}

START_TEST(test_free_inside_callback)
{
    struct exchange_ops ops = fake_ops;
    struct fake f;
    struct http1_parser *p;

    ops.finished = free_in_finished;
    up.answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    fake_init(&f, &la_http, NULL);
    f.x = exchange_new(&f.cc, &ops, &f, NULL);
    exchange_request(f.x, parse(&p, "GET / HTTP/1.1\r\nHost: open.test\r\n\r\n"));
    RUN_UNTIL(f.finished);
    ck_assert_ptr_null(f.x);
    ck_assert(out_is(&f, "200\nok"));
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

/* ---- a fake origin: the interface without a socket -------------------------------------- */

struct forigin {
    struct origin o;
};

/* What the fake origins saw (they are freed by the exchange). */
static struct {
    int gets, starts, releases, cancels, resumes, holds;
    bool release_req_done, body_ended;
    struct forigin *last;    /* the live one, NULL once released or cancelled */
    struct evbuffer *sent;   /* heads and bodies as submitted, every origin */
    struct http1_parser *rp; /* the response parser of the request under test */
} fo;

static struct forigin *fo_of(struct origin *o)
{
    return (struct forigin *)o;
}

static int fo_request(struct origin *o, const struct http_head *h, enum http1_body body,
                      uint64_t len, bool sensitive)
{
    (void)o, (void)sensitive;
    return http1_write_request_head(fo.sent, h, body, len);
}

static int fo_body(struct origin *o, const char *p, size_t n)
{
    (void)o;
    return evbuffer_add(fo.sent, p, n);
}

static int fo_body_take(struct origin *o, struct evbuffer *buf)
{
    (void)o;
    return evbuffer_add_buffer(fo.sent, buf);
}

static int fo_body_end(struct origin *o)
{
    (void)o;
    fo.body_ended = true;
    return 0;
}

static void fo_flush(struct origin *o)
{
    (void)o;
}

static void fo_resume(struct origin *o)
{
    (void)o;
    fo.resumes++;
}

static void fo_hold(struct origin *o)
{
    (void)o;
    fo.holds++;
}

static void fo_gone(struct origin *o)
{
    if (fo.last == fo_of(o))
        fo.last = NULL;
    free(o);
}

static struct bufferevent *fo_take(struct origin *o)
{
    fo_gone(o);
    return NULL;
}

static void fo_release(struct origin *o, bool req_done)
{
    fo.releases++;
    fo.release_req_done = req_done;
    fo_gone(o);
}

static void fo_cancel(struct origin *o, bool abort)
{
    (void)abort;
    fo.cancels++;
    fo_gone(o);
}

static const struct origin_ops fo_ops = {fo_request, fo_body, fo_body_take, fo_body_end, fo_flush,
                                         fo_resume,  fo_hold, fo_take,      fo_release,  fo_cancel};

static struct origin *fo_get(struct worker *wk, const struct origin_want *want,
                             const struct origin_cbs *cbs, void *arg)
{
    struct forigin *f = calloc(1, sizeof(*f));

    (void)wk, (void)want;
    ck_assert_ptr_nonnull(f);
    f->o.ops = &fo_ops;
    f->o.cbs = cbs;
    f->o.arg = arg;
    fo.gets++;
    fo.last = f;
    return &f->o;
}

static void fo_start(struct origin *o)
{
    (void)o;
    fo.starts++; /* the test says when it is ready */
}

static const struct origin_source fo_source = {fo_get, fo_start};

/* The live fake origin says it is connected (caps: what it carries). */
static void fo_ready(unsigned caps)
{
    ck_assert_ptr_nonnull(fo.last);
    fo.last->o.caps = caps;
    fo.last->o.cbs->ready(fo.last->o.arg, ORIGIN_UP_OK, UPSTREAM_OK);
}

/* The live fake origin's upstream answers raw (parsed by the product's HTTP/1.1 parser), then
 * the exchange's after runs, as an adapter calls them. */
static void fo_answer(const char *raw)
{
    const struct origin_cbs *cbs = fo.last->o.cbs;
    void *arg = fo.last->o.arg;

    if (fo.rp == NULL)
        fo.rp = http1_parser_new(HTTP1_RESPONSE, &cbs->resp, arg);
    ck_assert_ptr_nonnull(fo.rp);
    ck_assert_int_eq(http1_feed(fo.rp, raw, strlen(raw)), (ssize_t)strlen(raw));
    cbs->after(arg); /* may free the origin */
}

static bool fo_sent(const char *want)
{
    size_t n = evbuffer_get_length(fo.sent);

    return n == strlen(want) && memcmp(evbuffer_pullup(fo.sent, -1), want, n) == 0;
}

static void setup_fake(void)
{
    char err[256];

    base = event_base_new();
    ck_assert_ptr_nonnull(base);
    ck_assert_int_eq(metrics_init(1), 0);
    pthread_mutex_init(&sh.policy_lock, NULL);
    sh.policy = policy_parse(vault_json, sizeof(vault_json) - 1, err, sizeof(err));
    ck_assert_msg(sh.policy != NULL, "%s", err);
    sh.mode = POLICY_MODE_DEFAULT;
    w.base = base;
    w.sh = &sh;
    ck_assert_int_eq(modules_register(&sh, err, sizeof(err)), 0); /* the modules' slots */
    ck_assert_int_eq(exchange_timers_module.init(&w, err, sizeof(err)), 0);
    memset(&fo, 0, sizeof(fo));
    fo.sent = evbuffer_new();
}

static void teardown_fake(void)
{
    exchange_worker_masks(&w, true);
    exchange_timers_module.free(&w);
    policy_unref(&w.policy);
    policy_unref(&sh.policy);
    evbuffer_free(fo.sent);
    http1_parser_free(&fo.rp);
    event_base_free(base);
    metrics_shutdown();
    memset(&w, 0, sizeof(w));
    memset(&sh, 0, sizeof(sh));
    memset(&fo, 0, sizeof(fo));
}

/* A request of f's on the fake origins (the connection's host, or none). */
static void fo_request_in(struct fake *f, struct http1_parser **pp, const struct listen_addr *la,
                          const char *host, const char *raw)
{
    http1_parser_free(&fo.rp);
    fake_init(f, la, host);
    f->cc.origins = &fo_source;
    f->x = exchange_new(&f->cc, &fake_ops, f, NULL);
    exchange_request(f->x, parse(pp, raw));
}

/* A credentialed response: the head the origin got carries the secret, the body the transport
 * gets is masked, and a clean end gives the origin back with the whole request sent. */
START_TEST(test_origin_masked_body)
{
    struct fake f;
    struct http1_parser *p;

    fo_request_in(&f, &p, &la_https, "up.test",
                  "GET /v1 HTTP/1.1\r\nHost: up.test\r\nAccept-Encoding: gzip\r\n\r\n");
    ck_assert_int_eq(fo.gets, 1);
    ck_assert_int_eq(fo.starts, 1);
    ck_assert(!f.finished);
    fo_ready(0);
    ck_assert_msg(fo_sent("GET /v1 HTTP/1.1\r\nHost: up.test\r\nAuthorization: Bearer " SECRET
                          "\r\nAccept-Encoding: identity\r\n\r\n"),
                  "head differs (%zu bytes)", evbuffer_get_length(fo.sent));
    ck_assert(exchange_sent(f.x));
    fo_answer("HTTP/1.1 200 OK\r\nContent-Length: 30\r\n\r\nkey=" SECRET "!!!");
    ck_assert(f.finished && f.how == EXCH_END_DONE);
    ck_assert(out_is(&f, "200\nkey=***********************!!!"));
    ck_assert(f.ended);
    ck_assert_int_eq(fo.releases, 1);
    ck_assert(fo.release_req_done);
    ck_assert_int_eq(fo.cancels, 0);
    ck_assert_ptr_null(fo.last);
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

/* Failures before any response head: the answers of SPEC §4, the origin given up. */
START_TEST(test_origin_error_before_head)
{
    static const struct {
        enum origin_up up;
        enum upstream_err err;
        enum origin_fail fail;
        int status;
    } cases[] = {
        {ORIGIN_UP_FAILED, UPSTREAM_ERR_CONNECT, 0, 502},
        {ORIGIN_UP_FAILED, UPSTREAM_ERR_PROHIBITED, 0, 403},
        {ORIGIN_UP_FAILED, UPSTREAM_ERR_TIMEOUT, 0, 504},
        {ORIGIN_UP_NO_DIAL, UPSTREAM_OK, 0, 502},
        {ORIGIN_UP_NO_MEM, UPSTREAM_OK, 0, 500},
        {ORIGIN_UP_OK, UPSTREAM_OK, ORIGIN_FAIL_EOF, 502},
        {ORIGIN_UP_OK, UPSTREAM_OK, ORIGIN_FAIL_RESET, 502},
        {ORIGIN_UP_OK, UPSTREAM_OK, ORIGIN_FAIL_IO, 502},
        {ORIGIN_UP_OK, UPSTREAM_OK, ORIGIN_FAIL_TIMEOUT, 504},
        {ORIGIN_UP_OK, UPSTREAM_OK, ORIGIN_FAIL_PROTOCOL, 502},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fake f;
        struct http1_parser *p;

        fo.cancels = 0;
        fo_request_in(&f, &p, &la_http, NULL, "GET / HTTP/1.1\r\nHost: open.test\r\n\r\n");
        fo.last->o.cbs->ready(fo.last->o.arg, cases[i].up, cases[i].err);
        if (cases[i].up == ORIGIN_UP_OK) {
            ck_assert_msg(!f.finished, "case %zu: ended before the failure", i);
            fo.last->o.cbs->failed(fo.last->o.arg, cases[i].fail, ORIGIN_RETRY_NO, "detail");
        }
        ck_assert_msg(f.finished && f.how == EXCH_END_CLOSE, "case %zu: not answered", i);
        ck_assert_msg(f.error_status == cases[i].status, "case %zu: %d", i, f.error_status);
        ck_assert_msg(fo.cancels == 1 && fo.last == NULL, "case %zu: origin kept", i);
        fake_free(&f);
        http1_parser_free(&p);
    }
}
END_TEST

/*
 * A bodyless request whose upstream died before any answer goes once more on a new origin: a
 * GET after a connection closed (RETRY_SAFE), any method after a refused stream (RETRY_ANY);
 * a POST after a connection closed, and a second failure, are answered 502.
 */
START_TEST(test_origin_retry)
{
    struct fake f;
    struct http1_parser *p;

    fo_request_in(&f, &p, &la_http, NULL, "GET /r HTTP/1.1\r\nHost: open.test\r\n\r\n");
    fo_ready(0);
    fo.last->o.cbs->failed(fo.last->o.arg, ORIGIN_FAIL_EOF, ORIGIN_RETRY_SAFE, NULL);
    ck_assert(!f.finished);
    ck_assert_int_eq(fo.cancels, 1);
    ck_assert_int_eq(fo.gets, 2);
    ck_assert_ptr_nonnull(fo.last);
    fo_ready(0);
    fo_answer("HTTP/1.1 204 No Content\r\n\r\n");
    ck_assert(f.finished && f.how == EXCH_END_DONE);
    ck_assert(out_is(&f, "204\n"));
    ck_assert(fo_sent("GET /r HTTP/1.1\r\nHost: open.test\r\n\r\n"
                      "GET /r HTTP/1.1\r\nHost: open.test\r\n\r\n"));
    fake_free(&f);
    http1_parser_free(&p);

    /* refused unprocessed: a DELETE goes again too, but only once */
    fo.gets = fo.cancels = 0;
    fo_request_in(&f, &p, &la_http, NULL, "DELETE /d HTTP/1.1\r\nHost: open.test\r\n\r\n");
    fo_ready(0);
    fo.last->o.cbs->failed(fo.last->o.arg, ORIGIN_FAIL_RESET, ORIGIN_RETRY_SAFE, NULL);
    ck_assert(f.finished && f.error_status == 502); /* not a safe method */
    fake_free(&f);
    http1_parser_free(&p);
    fo.gets = 0;
    fo_request_in(&f, &p, &la_http, NULL, "DELETE /d HTTP/1.1\r\nHost: open.test\r\n\r\n");
    fo_ready(0);
    fo.last->o.cbs->failed(fo.last->o.arg, ORIGIN_FAIL_RESET, ORIGIN_RETRY_ANY, NULL);
    ck_assert(!f.finished);
    ck_assert_int_eq(fo.gets, 2);
    fo_ready(0);
    fo.last->o.cbs->failed(fo.last->o.arg, ORIGIN_FAIL_RESET, ORIGIN_RETRY_ANY, NULL);
    ck_assert(f.finished && f.error_status == 502);
    ck_assert_int_eq(fo.gets, 2);
    fake_free(&f);
    http1_parser_free(&p);

    /* a request with a body is never sent twice */
    fo.gets = 0;
    fo_request_in(&f, &p, &la_http, NULL,
                  "POST /p HTTP/1.1\r\nHost: open.test\r\nContent-Length: 2\r\n\r\n");
    fo_ready(0);
    ck_assert(f.more);
    ck_assert_int_eq(exchange_body(f.x, "ok", 2), 0);
    ck_assert_int_eq(exchange_body_end(f.x), 0);
    ck_assert(fo.body_ended);
    fo.last->o.cbs->failed(fo.last->o.arg, ORIGIN_FAIL_EOF, ORIGIN_RETRY_ANY, NULL);
    ck_assert(f.finished && f.error_status == 502);
    ck_assert_int_eq(fo.gets, 1);
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

/* A full client side holds the origin; exchange_drained resumes it. */
START_TEST(test_origin_hold_resume)
{
    struct fake f;
    struct http1_parser *p;
    int resumes;

    fo_request_in(&f, &p, &la_http, NULL, "GET / HTTP/1.1\r\nHost: open.test\r\n\r\n");
    fo_ready(0);
    ck_assert_int_eq(fo.holds, 0);
    f.full = true;
    resumes = fo.resumes;
    fo_answer("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello");
    ck_assert_int_eq(fo.holds, 1);
    ck_assert_int_eq(fo.resumes, resumes);
    ck_assert(f.drain_armed && !f.finished);
    ck_assert(out_is(&f, "200\nhello"));
    f.full = false;
    exchange_drained(f.x);
    ck_assert_int_eq(fo.resumes, resumes + 1);
    fo_answer("world");
    ck_assert(f.finished && f.how == EXCH_END_DONE);
    ck_assert(out_is(&f, "200\nhelloworld"));
    ck_assert_int_eq(fo.releases, 1);
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

/* gRPC over an origin that cannot carry it: a trailers-only UNAVAILABLE, the origin given back
 * unused. */
START_TEST(test_origin_grpc_needs_h2)
{
    struct fake f;
    struct http1_parser *p;

    fo_request_in(&f, &p, &la_https, "up.test",
                  "POST /svc/M HTTP/1.1\r\nHost: up.test\r\nContent-Type: application/grpc\r\n"
                  "Content-Length: 0\r\n\r\n");
    fo_ready(0);
    ck_assert(f.finished && f.how == EXCH_END_CLOSE);
    ck_assert_int_eq(f.status, 200);
    ck_assert_int_eq(fo.releases, 1);
    ck_assert_uint_eq(evbuffer_get_length(fo.sent), 0);
    fake_free(&f);
    http1_parser_free(&p);
}
END_TEST

Suite *suite_exchange(void);

Suite *suite_exchange(void)
{
    Suite *s = suite_create("exchange");
    TCase *tc = tcase_create("fake_transport");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_allow_plain);
    tcase_add_test(tc, test_inject_and_mask);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_connect_verdict);
    tcase_add_test(tc, test_request_body);
    tcase_add_test(tc, test_response_backpressure);
    tcase_add_test(tc, test_probe);
    tcase_add_test(tc, test_free_inside_callback);
    suite_add_tcase(s, tc);
    tc = tcase_create("fake_origin");
    tcase_add_checked_fixture(tc, setup_fake, teardown_fake);
    tcase_add_test(tc, test_origin_masked_body);
    tcase_add_test(tc, test_origin_error_before_head);
    tcase_add_test(tc, test_origin_retry);
    tcase_add_test(tc, test_origin_hold_resume);
    tcase_add_test(tc, test_origin_grpc_needs_h2);
    suite_add_tcase(s, tc);
    return s;
}
