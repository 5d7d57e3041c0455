/*
 * fuzz_h2.c - the HTTP/2 client transport (proxy/h2conn.c, h2msg.c, grpcmask.c) and the exchange
 * behind it, fed arbitrary bytes as a client's side of one connection. The worker is built by
 * hand on one event base. Two upstreams on loopback (127.x.y.z:443, root) answer every request
 * with a response echoing the secret in a header, in body pieces that cut it apart, and in a
 * trailer: up.test speaks HTTP/1.1 only, h2.test chooses "h2" by ALPN (an nghttp2 server
 * session; gRPC requests get a gRPC message and grpc-message carrying the secret).
 *
 * Input: byte 0 = options (bit 0: prepend the client preface and an empty SETTINGS frame; bit 1:
 * feed the rest in pieces of (byte 1 % 61) + 1 bytes; bit 2: the connection is over the limit
 * (busy); bit 3: half-close the client side after the input; bit 4: the connection's host is
 * h2.test), then the client's bytes.
 *
 * Invariants (abort on violation):
 * - nothing crashes and nothing leaks (LeakSanitizer, after every input the connection is gone);
 * - the secret never appears in what the client receives: not in DATA, not in a header block
 *   once HPACK-decoded (Huffman included), not in the raw bytes; nor in the log (captured).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>

#include "audit/log.h"
#include "ca/ca.h"
#include "ca/certcache.h"
#include "policy/policy.h"
#include "proxy/exchange.h"
#include "proxy/h2conn.h"
#include "proxy/listen.h"
#include "proxy/metrics.h"
#include "proxy/modules.h"
#include "proxy/upstream.h"
#include "proxy/worker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SECRET "sk-canary-H2FUZZ-0001"

static const char vault_json[] =
    "{\"version\":1,\"run\":{\"id\":\"run-f\",\"user\":\"u\"},"
    "\"secrets\":{\"K\":{\"value\":\"" SECRET "\"}},"
    "\"rules\":[{\"host_pattern\":\"up.test\",\"secret\":\"K\",\"scheme\":\"bearer\"},"
    "{\"host_pattern\":\"h2.test\",\"secret\":\"K\",\"scheme\":\"bearer\"}],"
    "\"host_policy\":{\"default\":\"allow\",\"hosts\":{\"blocked.test\":\"block\"}}}";

/* Head, body in chunks that split the secret, trailers with it: what masking must cover. */
static const char answer[] = "HTTP/1.1 200 OK\r\n"
                             "Content-Type: text/plain\r\n"
                             "X-Echo: Bearer " SECRET "\r\n"
                             "Transfer-Encoding: chunked\r\n"
                             "Trailer: X-T\r\n"
                             "\r\n"
                             "8\r\nsk-canar\r\n"
                             "d\r\ny-H2FUZZ-0001\r\n"
                             "0\r\nX-T: " SECRET "\r\n\r\n";

/* The h2 upstream's bodies, sent in two DATA frames cut inside the secret. */
static const char h2_body[] = "echo sk-canary-H2FUZZ-0001 done";
static const char grpc_body[] = "\0\0\0\0\x15" SECRET "\0\0\0\0\x03"
                                "abc";

static struct event_base *base;
static struct worker_shared sh;
static struct worker w;
static struct upstream_config cfg;
static struct listen_addr la = {.kind = LISTEN_HTTPS, .port = 8443, .label = "https fuzz"};
static SSL_CTX *up_ctx, *up2_ctx;
static struct evconnlistener *up_l, *up2_l;
static struct evbuffer *up_got[64];
static struct bufferevent *up_conns[64];
static size_t up_bytes;
static int log_fd = -1;

/* ---- the upstream ---------------------------------------------------------------------- */

/* Every write leaves at once: with Nagle, a second small write waits for a delayed ACK
 * (40 ms on loopback), far longer than pump() waits. */
static void nodelay(evutil_socket_t fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
    (void)arg;
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    for (int i = 0; i < 64; i++) {
        if (up_conns[i] == bev) {
            evbuffer_free(up_got[i]);
            up_got[i] = NULL;
            up_conns[i] = NULL;
        }
    }
    bufferevent_free(bev);
}

static void up_read(struct bufferevent *bev, void *arg)
{
    struct evbuffer *got = arg;
    struct evbuffer_ptr end;

    up_bytes += evbuffer_get_length(bufferevent_get_input(bev));
    evbuffer_add_buffer(got, bufferevent_get_input(bev));
    for (;;) {
        end = evbuffer_search(got, "\r\n\r\n", 4, NULL);
        if (end.pos < 0)
            break;
        evbuffer_add(bufferevent_get_output(bev), answer, sizeof(answer) - 1);
        evbuffer_drain(got, (size_t)end.pos + 4);
    }
}

/* ---- the HTTP/2 upstream ---------------------------------------------------------------- */

struct up2 {
    struct bufferevent *bev;
    nghttp2_session *ng;
};

struct up2_stream {
    bool grpc;
    size_t sent;
};

static struct up2 *up2_conns[16];

static void up2_free(struct up2 *u)
{
    for (int i = 0; i < 16; i++) {
        if (up2_conns[i] == u)
            up2_conns[i] = NULL;
    }
    nghttp2_session_del(u->ng);
    bufferevent_free(u->bev);
    free(u);
}

static ssize_t up2_read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
                             uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct up2_stream *st = src->ptr;
    const char *body = st->grpc ? grpc_body : h2_body;
    size_t total = st->grpc ? sizeof(grpc_body) - 1 : sizeof(h2_body) - 1;
    size_t n = st->sent == 0 ? 12 : total - st->sent;
    const nghttp2_nv trailers[] = {
        {(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"grpc-message", (uint8_t *)SECRET, 12, sizeof(SECRET) - 1,
         NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"x-t", (uint8_t *)SECRET, 3, sizeof(SECRET) - 1, NGHTTP2_NV_FLAG_NONE},
    };

    (void)user;
    if (n > len)
        n = len;
    memcpy(buf, body + st->sent, n);
    st->sent += n;
    if (st->sent == total) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        if (st->grpc)
            nghttp2_submit_trailer(ng, id, trailers, 2);
        else
            nghttp2_submit_trailer(ng, id, trailers + 2, 1);
    }
    return (ssize_t)n;
}

static int up2_on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                         size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                         void *user)
{
    struct up2_stream *st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);

    (void)flags;
    (void)user;
    if (st != NULL && namelen == 12 && memcmp(name, "content-type", 12) == 0 && valuelen >= 16 &&
        memcmp(value, "application/grpc", 16) == 0)
        st->grpc = true;
    return 0;
}

static int up2_on_begin(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    struct up2_stream *st;

    (void)user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    st = calloc(1, sizeof(*st));
    if (st == NULL)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, st);
    return 0;
}

static int up2_on_frame(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    struct up2_stream *st = nghttp2_session_get_stream_user_data(ng, f->hd.stream_id);
    nghttp2_data_provider dp = {.source.ptr = st, .read_callback = up2_read_body};
    nghttp2_nv grpc[] = {
        {(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE}};
    nghttp2_nv plain[] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
                          {(uint8_t *)"x-echo", (uint8_t *)"Bearer " SECRET, 6, sizeof(SECRET) + 6,
                           NGHTTP2_NV_FLAG_NONE}};

    (void)user;
    if (st == NULL || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
        (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA))
        return 0;
    if (st->grpc)
        nghttp2_submit_response(ng, f->hd.stream_id, grpc, 2, &dp);
    else
        nghttp2_submit_response(ng, f->hd.stream_id, plain, 2, &dp);
    return 0;
}

static int up2_on_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
    (void)code;
    (void)user;
    free(nghttp2_session_get_stream_user_data(ng, id));
    return 0;
}

static void up2_flush(struct up2 *u)
{
    for (;;) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(u->ng, &p);

        if (n <= 0)
            break;
        bufferevent_write(u->bev, p, (size_t)n);
    }
}

static void up2_read(struct bufferevent *bev, void *arg)
{
    struct up2 *u = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t n = evbuffer_get_length(in);

    up_bytes += n;
    if (nghttp2_session_mem_recv(u->ng, evbuffer_pullup(in, -1), n) < 0) {
        up2_free(u);
        return;
    }
    evbuffer_drain(in, n);
    up2_flush(u);
}

/* The server's SETTINGS go once the handshake is done: written while accepting, libevent would
 * leave them (and all after) in the output until the next read. */
static void up2_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        up2_free(arg);
    else if (what & BEV_EVENT_CONNECTED)
        up2_flush(arg);
}

static void up2_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int n,
                       void *arg)
{
    nghttp2_session_callbacks *cb;
    struct up2 *u = calloc(1, sizeof(*u));
    int i;

    (void)l;
    (void)sa;
    (void)n;
    (void)arg;
    nodelay(fd);
    for (i = 0; i < 16 && up2_conns[i] != NULL; i++)
        ;
    if (u == NULL || i == 16 || nghttp2_session_callbacks_new(&cb) != 0) {
        free(u);
        close(fd);
        return;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, up2_on_begin);
    nghttp2_session_callbacks_set_on_header_callback(cb, up2_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, up2_on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, up2_on_close);
    nghttp2_session_server_new(&u->ng, cb, u);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(u->ng, NGHTTP2_FLAG_NONE, NULL, 0);
    u->bev = bufferevent_openssl_socket_new(base, fd, SSL_new(up2_ctx), BUFFEREVENT_SSL_ACCEPTING,
                                            BEV_OPT_CLOSE_ON_FREE);
    up2_conns[i] = u;
    bufferevent_setcb(u->bev, up2_read, NULL, up2_event, u);
    bufferevent_enable(u->bev, EV_READ | EV_WRITE);
}

static int up2_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                    const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    if (nghttp2_select_next_protocol((unsigned char **)out, outlen, in, inlen) != 1)
        return SSL_TLSEXT_ERR_NOACK;
    return SSL_TLSEXT_ERR_OK;
}

static void up_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int n,
                      void *arg)
{
    int i;
    struct bufferevent *bev;

    (void)l;
    (void)sa;
    (void)n;
    (void)arg;
    nodelay(fd);
    for (i = 0; i < 64 && up_conns[i] != NULL; i++)
        ;
    bev = i < 64 ? bufferevent_openssl_socket_new(base, fd, SSL_new(up_ctx),
                                                  BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)
                 : NULL;
    if (bev == NULL) {
        close(fd);
        return;
    }
    up_conns[i] = bev;
    up_got[i] = evbuffer_new();
    bufferevent_setcb(bev, up_read, NULL, up_event, up_got[i]);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

/* ---- setup, once ---------------------------------------------------------------------- */

static void die(const char *what, const char *err)
{
    fprintf(stderr, "fuzz_h2: %s: %s\n", what, err);
    abort();
}

/* A TLS server context for host with a leaf of the fuzz CA; h2: choose "h2" by ALPN. */
static SSL_CTX *server_ctx(struct certcache *certs, struct ca *ca, const char *host, bool h2)
{
    char err[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    X509 *leaf = certcache_get(certs, host, err, sizeof(err));
    STACK_OF(X509) *chain = sk_X509_new_null();

    if (ctx == NULL || leaf == NULL || chain == NULL)
        die("upstream certificate", err);
    sk_X509_push(chain, ca_intermediate(ca));
    if (SSL_CTX_use_cert_and_key(ctx, leaf, ca_leaf_key(ca), chain, 1) != 1)
        die("upstream", "certificate");
    sk_X509_free(chain);
    X509_free(leaf);
    if (h2)
        SSL_CTX_set_alpn_select_cb(ctx, up2_alpn, NULL);
    return ctx;
}

static struct evconnlistener *listen_443(const char *ip, evconnlistener_cb cb)
{
    struct sockaddr_in sin = {0};
    struct evconnlistener *l;

    sin.sin_family = AF_INET;
    sin.sin_port = htons(443);
    inet_pton(AF_INET, ip, &sin.sin_addr);
    l = evconnlistener_new_bind(base, cb, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 64,
                                (struct sockaddr *)&sin, sizeof(sin));
    if (l == NULL)
        die("listen", "cannot listen on 127.x:443 (root?)");
    return l;
}

static void setup(void)
{
    static char ca_path[] = "/tmp/vg-fuzz-h2-ca-XXXXXX";
    static char pin[2][96], ip[2][32];
    static const char *pins[2];
    static const struct ca_names names = {.constrained = false};
    char err[256];
    struct ca *ca;
    struct certcache *certs;
    int fd;

    for (int i = 0; i < 2; i++)
        snprintf(ip[i], sizeof(ip[i]), "127.%d.%d.%d", 10 + getpid() % 200, (getpid() / 200) % 250,
                 2 * (1 + getpid() % 120) + i);
    base = event_base_new();
    if (base == NULL || metrics_init(1) != 0)
        die("setup", "event base or metrics");
    ca = ca_new("run-f", &names, err, sizeof(err));
    if (ca == NULL)
        die("ca_new", err);
    certs = certcache_new(ca, 4);
    up_ctx = server_ctx(certs, ca, "up.test", false);
    up2_ctx = server_ctx(certs, ca, "h2.test", true);
    fd = mkstemp(ca_path);
    if (fd < 0 || ca_write_root(ca, ca_path, err, sizeof(err)) != 0)
        die("ca file", err);
    close(fd);
    up_l = listen_443(ip[0], up_accept);
    up2_l = listen_443(ip[1], up2_accept);
    snprintf(pin[0], sizeof(pin[0]), "up.test:443:%s", ip[0]);
    snprintf(pin[1], sizeof(pin[1]), "h2.test:443:%s", ip[1]);
    pins[0] = pin[0];
    pins[1] = pin[1];
    cfg.pins = pins;
    cfg.npins = 2;
    cfg.ca_file = ca_path;
    cfg.connect_timeout = cfg.tls_timeout = 5;
    cfg.pool_idle_timeout = 60;
    cfg.pool_max_per_key = 4;
    pthread_mutex_init(&sh.policy_lock, NULL);
    sh.policy = policy_parse(vault_json, sizeof(vault_json) - 1, err, sizeof(err));
    if (sh.policy == NULL)
        die("policy", err);
    sh.mode = POLICY_MODE_DEFAULT;
    sh.upcfg = &cfg;
    sh.max_conns = 1000;
    w.base = base;
    w.sh = &sh;
    if (modules_register(&sh, err, sizeof(err)) < 0) /* the modules' slots, as `run` has them */
        die("modules", err);
    w.up = upstream_ctx_new(base, &cfg, err, sizeof(err));
    if (w.up == NULL)
        die("upstream ctx", err);
    unlink(ca_path);
    certcache_free(&certs);
    ca_free(&ca);
    log_set_level(LOG_DEBUG);
    log_fd = memfd_create("fuzz_h2_log", 0);
    if (log_fd < 0)
        die("memfd", "log capture");
}

/* ---- what the client receives ---------------------------------------------------------- */

static void secret_absent(const void *p, size_t n, const char *where)
{
    if (n >= sizeof(SECRET) - 1 && memmem(p, n, SECRET, sizeof(SECRET) - 1) != NULL)
        die("the secret reached the client", where);
}

/* Decodes the server's frames (our own output, so well formed) and checks every header field
 * and DATA payload; the HPACK inflater follows the server's dynamic table. */
static void check_output(const unsigned char *p, size_t n)
{
    nghttp2_hd_inflater *inf;
    size_t off = 24 <= n && memcmp(p, "PRI", 3) == 0 ? 24 : 0;

    secret_absent(p, n, "raw bytes");
    if (nghttp2_hd_inflate_new(&inf) != 0)
        die("inflater", "out of memory");
    while (off + 9 <= n) {
        size_t len = ((size_t)p[off] << 16) | ((size_t)p[off + 1] << 8) | p[off + 2];
        uint8_t type = p[off + 3], flags = p[off + 4];
        const unsigned char *pl = p + off + 9;

        if (off + 9 + len > n)
            break;
        if (type == NGHTTP2_DATA) {
            secret_absent(pl, len, "DATA");
        } else if (type == NGHTTP2_HEADERS || type == NGHTTP2_CONTINUATION) {
            size_t skip = 0, pad = 0, left;

            if (type == NGHTTP2_HEADERS && (flags & NGHTTP2_FLAG_PADDED) && len > 0)
                pad = pl[skip++];
            if (type == NGHTTP2_HEADERS && (flags & NGHTTP2_FLAG_PRIORITY))
                skip += 5;
            left = len > skip + pad ? len - skip - pad : 0;
            pl += skip;
            while (left > 0 || (flags & NGHTTP2_FLAG_END_HEADERS)) {
                nghttp2_nv nv;
                int out = 0;
                ssize_t r = nghttp2_hd_inflate_hd2(inf, &nv, &out, pl, left,
                                                   (flags & NGHTTP2_FLAG_END_HEADERS) != 0);

                if (r < 0)
                    die("server header block", nghttp2_strerror((int)r));
                pl += r;
                left -= (size_t)r;
                if (out & NGHTTP2_HD_INFLATE_EMIT) {
                    secret_absent(nv.name, nv.namelen, "header name");
                    secret_absent(nv.value, nv.valuelen, "header value");
                }
                if (out & NGHTTP2_HD_INFLATE_FINAL) {
                    nghttp2_hd_inflate_end_headers(inf);
                    break;
                }
                if (r == 0 && !(out & NGHTTP2_HD_INFLATE_EMIT))
                    break;
            }
        }
        off += 9 + len;
    }
    nghttp2_hd_inflate_del(inf);
}

/* ---- one input ------------------------------------------------------------------------- */

static void noop_link(struct worker_link *l)
{
    (void)l;
}

static const struct worker_link_ops accept_ops = {noop_link, noop_link};

/* Runs the loop while something moves (client output or upstream input): loopback and the
 * upstream on the same base make every step ready at once. */
static void pump(struct bufferevent *client)
{
    size_t last = (size_t)-1, last_up = (size_t)-1;
    int idle = 0;

    for (int turn = 0; turn < 200 && idle < 4; turn++) {
        size_t now = evbuffer_get_length(bufferevent_get_input(client));

        idle = now == last && up_bytes == last_up ? idle + 1 : 0;
        last = now;
        last_up = up_bytes;
        event_base_loop(base, EVLOOP_NONBLOCK);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                           "\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    struct bufferevent *pair[2];
    struct worker_link from = {0};
    struct exch_conn cc = {0};
    uint8_t opt, piece;
    struct evbuffer *seen;
    int saved_err;
    off_t loglen;

    if (base == NULL)
        setup();
    if (size < 2)
        return 0;
    opt = data[0];
    piece = (uint8_t)(data[1] % 61 + 1);
    data += 2;
    size -= 2;

    saved_err = dup(STDERR_FILENO);
    dup2(log_fd, STDERR_FILENO);

    if (bufferevent_pair_new(base, 0, pair) != 0)
        die("pair", "out of memory");
    cc.w = &w;
    cc.la = &la;
    if (exch_conn_names(&cc, "fuzz", (opt & 16) ? "h2.test" : "up.test") < 0)
        die("names", "out of memory");
    cc.tls = true;
    cc.host_fixed = true;
    cc.default_port = 443;
    cc.id = worker_attach(&w, &from, &accept_ops);
    seen = evbuffer_new();
    bufferevent_enable(pair[1], EV_READ | EV_WRITE);
    if (opt & 1)
        bufferevent_write(pair[1], preface, sizeof(preface) - 1);
    if (!(opt & 2))
        bufferevent_write(pair[1], data, size);
    if (h2conn_start(&from, &cc, pair[0], (opt & 4) != 0) < 0) {
        worker_detach(&w, &from);
        exch_conn_release(&cc); /* not taken over */
    } else {
        for (size_t off = 0; (opt & 2) && off < size; off += piece) {
            bufferevent_write(pair[1], data + off, size - off < piece ? size - off : piece);
            pump(pair[1]);
        }
        if (opt & 8)
            bufferevent_flush(pair[1], EV_WRITE, BEV_FINISHED);
        pump(pair[1]);
    }
    evbuffer_add_buffer(seen, bufferevent_get_input(pair[1]));
    /* the connection ends (streams mid-flight included); the client side last */
    worker_abort(&w);
    w.draining = false;
    event_base_loop(base, EVLOOP_NONBLOCK);
    evbuffer_add_buffer(seen, bufferevent_get_input(pair[1]));
    bufferevent_free(pair[1]);
    event_base_loop(base, EVLOOP_NONBLOCK);
    if (w.nconns != 0)
        die("connection", "still attached after abort");
    log_flush();
    dup2(saved_err, STDERR_FILENO);
    close(saved_err);
    check_output(evbuffer_pullup(seen, -1), evbuffer_get_length(seen));
    evbuffer_free(seen);
    loglen = lseek(log_fd, 0, SEEK_END);
    if (loglen > 0) {
        char *logs = mmap(NULL, (size_t)loglen, PROT_READ, MAP_SHARED, log_fd, 0);

        if (logs == MAP_FAILED)
            die("log", "mmap");
        secret_absent(logs, (size_t)loglen, "log");
        munmap(logs, (size_t)loglen);
    }
    if (ftruncate(log_fd, 0) != 0 || lseek(log_fd, 0, SEEK_SET) != 0)
        die("log", "truncate");
    return 0;
}
