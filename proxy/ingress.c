/*
 * ingress.c - a client connection from accept to its transport (see ingress.h): the connection
 * limit, the TLS accept with the ClientHello decision, and the transport ALPN picks.
 *
 * Guarantees:
 * - Past sh->max_conns a connection is answered 503 by its transport while
 *   VG_CONN_BUSY_RESERVE lasts, then closed at accept; one conn_limit line per second at most.
 * - A connection is joined to its worker and has its timer before anything can close it; a
 *   failure closes the socket and leaves nothing behind. The handshake has its timeout.
 * - No certificate is minted for a name the CA may not sign, for a connection without SNI, or,
 *   on an intercepted CONNECT, for a name other than the CONNECT host. A refused name is
 *   recorded (audit, metrics) as a refusal.
 * - The transport starts only after the handshake, chosen from ALPN alone (transports[]); the
 *   SSL no longer points at this module's connection once it is handed on.
 */
#include "proxy/ingress.h"
#include "audit/audit.h"
#include "audit/log.h"
#include "ca/ca.h"
#include "ca/certcache.h"
#include "common/caps.h"
#include "common/hostname.h"
#include "proxy/bevio.h"
#include "proxy/cio.h"
#include "proxy/exchange.h"
#include "proxy/h1conn.h"
#include "proxy/h2conn.h"
#include "proxy/listen.h"
#include "proxy/metrics.h"
#include "proxy/reason.h"
#include "proxy/tls.h"
#include "proxy/worker.h"

#include <arpa/inet.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

/* The one name vaultgate answers itself (SPEC §9): no policy decides its certificate. */
#define INGRESS_PROBE_HOST "probe.vaultgate.invalid"
#define INGRESS_HTTPS_PORT 443
#define INGRESS_HTTP_PORT  80

/* A connection between its accept and the end of its TLS handshake. */
struct ingress_conn {
    struct worker_link link; /* first: the worker's list holds &ic->link */
    struct tls_hello hello;  /* the ClientHello decision, reached from the SSL */
    struct exch_conn cc;     /* what the transport gets */
    struct cio *io;
    struct event *timer; /* the handshake's deadline */
    bool busy;           /* over the connection limit: the transport answers 503 */
};

/* A worker's ingress state. */
struct ingress_worker {
    SSL_CTX *ssl_ctx;       /* the server context of this worker's handshakes */
    uint64_t limit_refused; /* over-limit connections since the last conn_limit log line */
    int64_t limit_logged;   /* CLOCK_MONOTONIC second of that line */
};

static int start_h1(struct worker_link *from, struct exch_conn *cc, struct cio *io, bool busy);
static int start_h2(struct worker_link *from, struct exch_conn *cc, struct cio *io, bool busy);

/* The transports, by the ALPN name the handshake selected; the last one is the default (no
 * ALPN, or a name not listed). A new transport is one row here (and its name in tls.c's ALPN
 * list). */
static const struct ingress_transport {
    const char *alpn;
    int (*start)(struct worker_link *from, struct exch_conn *cc, struct cio *io, bool busy);
} transports[] = {
    {"h2", start_h2},
    {"http/1.1", start_h1},
};

#define NTRANSPORTS (sizeof(transports) / sizeof(transports[0]))

static int ingress_tls_take(struct worker_link *from, struct exch_conn *cc, struct cio *plain);

static const struct h1conn_hooks h1_hooks = {ingress_tls_take};

/* ---- transports ------------------------------------------------------------------------- */

static const struct ingress_transport *transport_for(const unsigned char *p, unsigned n)
{
    for (size_t i = 0; i + 1 < NTRANSPORTS; i++) {
        if (n == strlen(transports[i].alpn) && memcmp(p, transports[i].alpn, n) == 0)
            return &transports[i];
    }
    return &transports[NTRANSPORTS - 1];
}

const char *ingress_transport(const unsigned char *p, unsigned n)
{
    return transport_for(p, n)->alpn;
}

static int start_h1(struct worker_link *from, struct exch_conn *cc, struct cio *io, bool busy)
{
    return h1conn_start(from, cc, io, busy, &h1_hooks);
}

/* HTTP/2 reads and writes through a bufferevent (cio.h hands the connection over) and keeps no
 * record buffers while idle (docs/internals/proxy.md, "Record buffers"). */
static int start_h2(struct worker_link *from, struct exch_conn *cc, struct cio *io, bool busy)
{
    struct bufferevent *bev = cio_to_bufferevent(&io, 0);

    if (bev == NULL)
        return -1;
    bevio_release_always(bev);
    return h2conn_start(from, cc, bev, busy);
}

/* ---- the connection --------------------------------------------------------------------- */

static struct ingress_worker *ingress_state(struct worker *w)
{
    void **st = worker_module_state(w, &ingress_worker_module);

    return st != NULL ? *st : NULL;
}

static void ingress_log(const struct ingress_conn *ic, enum log_level lvl, const char *event,
                        const char *reason, const char *detail)
{
    exch_conn_log(&ic->cc, lvl, event, reason, detail);
}

/* Frees ic; its place in the worker's list is gone already (detached or handed on). */
static void ingress_free(struct ingress_conn *ic)
{
    if (ic->io != NULL) {
        tls_server_ssl_detach(cio_ssl(ic->io));
        cio_free(&ic->io);
    }
    if (ic->timer != NULL)
        event_free(ic->timer);
    exch_conn_release(&ic->cc);
    free(ic);
}

/* The only teardown before a transport took over. reason is a fixed code, logged at debug. */
static void ingress_close(struct ingress_conn *ic, const char *reason)
{
    ingress_log(ic, LOG_DEBUG, "conn_close", reason, NULL);
    worker_detach(ic->cc.w, &ic->link);
    ingress_free(ic);
}

/* The host a no-SNI refusal is recorded under: "(no-sni)", or the original destination. */
static void nosni_host(struct ingress_conn *ic, char *out, size_t outsz)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    evutil_socket_t fd = ic->io != NULL ? cio_fd(ic->io) : -1;

    snprintf(out, outsz, "(no-sni)");
    if (ic->cc.w->sh->mode != POLICY_MODE_CATCHALL || fd < 0)
        return;
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &len) == 0 && ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)outsz);
}

/* A ClientHello without a name to serve: recorded as a refusal of that host. */
static int refuse_nosni(struct ingress_conn *ic, int *alert)
{
    struct worker *w = ic->cc.w;
    char host[HOSTNAME_BUFSZ];

    nosni_host(ic, host, sizeof(host));
    (void)exch_conn_set_host(&ic->cc, host); /* for the log line; refused either way */
    audit_blocked(w->sh->audit, w->id, host);
    audit_route(w->sh->audit, w->id, host, AUDIT_ROUTE_REFUSED);
    metrics_blocked(w->id);
    ingress_log(ic, LOG_INFO, "tls_refused", "no_sni", NULL);
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    return -1;
}

/* The ClientHello decision (struct tls_hello.decide): the name, on every handshake. */
static int ingress_decide(struct tls_hello *h, const char *host, int *alert)
{
    struct ingress_conn *ic =
        (struct ingress_conn *)(void *)((char *)h - offsetof(struct ingress_conn, hello));
    struct worker_shared *sh = ic->cc.w->sh;

    if (host == NULL && ic->cc.proxy)
        host = ic->cc.host; /* intercepted CONNECT without SNI: the CONNECT host names it */
    if (host == NULL)
        return refuse_nosni(ic, alert);
    *alert = SSL_AD_UNRECOGNIZED_NAME;
    if (ic->cc.proxy && strcmp(host, ic->cc.host) != 0) {
        /* intercepted CONNECT: the certificate is for the CONNECT host, and the SNI must be it */
        ingress_log(ic, LOG_INFO, "tls_refused", "sni_not_connect_host", NULL);
        return -1;
    }
    if (host != ic->cc.host && exch_conn_set_host(&ic->cc, host) < 0) {
        ingress_log(ic, LOG_ERROR, "tls_refused", "oom", NULL);
        return -1;
    }
    /* the probe name is answered by vaultgate itself; under .invalid it impersonates nothing */
    if (sh->mode == POLICY_MODE_DEFAULT && !ca_permits(sh->ca, host) &&
        strcmp(host, INGRESS_PROBE_HOST) != 0) {
        /* no certificate this CA can sign would verify: refuse plainly instead of minting */
        ingress_log(ic, LOG_WARN, "tls_refused", "host_outside_ca", NULL);
        return -1;
    }
    return 0;
}

/* The leaf for the name decide accepted (struct tls_hello.leaf): full handshakes only. */
static int ingress_leaf(struct tls_hello *h, struct tls_leaf *out)
{
    struct ingress_conn *ic =
        (struct ingress_conn *)(void *)((char *)h - offsetof(struct ingress_conn, hello));
    struct worker_shared *sh = ic->cc.w->sh;
    char err[256];
    X509 *cert = certcache_get(sh->certs, ic->cc.host, err, sizeof(err));

    if (cert == NULL) {
        ingress_log(ic, LOG_ERROR, "tls_refused", "leaf_mint", err);
        return -1;
    }
    out->cert = cert;
    out->key = ca_leaf_key(sh->ca);
    out->chain = ca_intermediate(sh->ca);
    return 0;
}

/* The handshake is done: the transport ALPN picked takes the connection over. */
static void ingress_handshake_done(struct ingress_conn *ic)
{
    SSL *ssl = cio_ssl(ic->io);
    const unsigned char *p = NULL;
    unsigned int n = 0;
    struct cio *io = ic->io;

    metrics_tls_handshake(ic->cc.w->id);
    SSL_get0_alpn_selected(ssl, &p, &n);
    tls_server_ssl_detach(ssl);
    evtimer_del(ic->timer);
    ic->io = NULL; /* the transport's from here, even when it cannot start */
    if (transport_for(p, n)->start(&ic->link, &ic->cc, io, ic->busy) < 0)
        ingress_close(ic, "oom");
    else
        ingress_free(ic); /* the transport took its place in the worker's list */
}

static void event_cb(struct cio *io, short what, void *arg)
{
    struct ingress_conn *ic = arg;
    char detail[256];
    unsigned long e;
    const char *r;

    if (what & CIO_CONNECTED) {
        ingress_handshake_done(ic);
        return;
    }
    if (!(what & (CIO_EOF | CIO_ERROR)))
        return;
    e = cio_ssl_error(io);
    r = e != 0 ? ERR_reason_error_string(e) : NULL;
    snprintf(detail, sizeof(detail), "%s",
             e != 0 ? (r != NULL ? r : "TLS error") : "connection closed");
    ingress_log(ic, LOG_DEBUG, "tls_handshake_failed", "handshake", detail);
    ingress_close(ic, "handshake_failed");
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ingress_close(arg, "handshake_timeout");
}

/* A stop closes a connection still in its handshake: nothing of it is in flight. */
static void link_drain(struct worker_link *l)
{
    ingress_close((struct ingress_conn *)l, "draining");
}

static void link_abort(struct worker_link *l)
{
    ingress_close((struct ingress_conn *)l, "shutdown");
}

static const struct worker_link_ops ingress_link_ops = {link_drain, link_abort};

/* ---- TLS accept ------------------------------------------------------------------------- */

/* A connection about to handshake, with its timer; not in the worker's list yet. It takes cc
 * over (exch_conn_take), or, NULL, leaves it to the caller. */
static struct ingress_conn *ingress_new(struct exch_conn *cc, bool busy)
{
    struct ingress_conn *ic = calloc(1, sizeof(*ic));

    if (ic == NULL)
        return NULL;
    ic->timer = evtimer_new(cc->w->base, timer_cb, ic);
    if (ic->timer == NULL) {
        free(ic);
        return NULL;
    }
    exch_conn_take(&ic->cc, cc);
    ic->hello.decide = ingress_decide;
    ic->hello.leaf = ingress_leaf;
    ic->busy = busy;
    return ic;
}

/* Starts the TLS accept of ic (in the worker's list) on io, which is ic's from the call on: bytes
 * the client sent early are the handshake's first, output still queued (a CONNECT's 200) goes
 * out before it (cio_accept_tls). 0, or -1 (ic closed). */
static int ingress_tls(struct ingress_conn *ic, struct cio *io)
{
    struct ingress_worker *iw = ingress_state(ic->cc.w);
    struct timeval hs = {vg_timeout(&ic->cc.w->sh->timeouts, VG_T_HANDSHAKE), 0};
    SSL *ssl = iw != NULL && io != NULL ? tls_server_ssl_new(iw->ssl_ctx, &ic->hello) : NULL;

    ic->io = io;
    if (ssl == NULL || cio_accept_tls(io, ssl) < 0) { /* takes ssl */
        ingress_close(ic, "oom");
        return -1;
    }
    cio_setcb(io, NULL, NULL, event_cb, ic);
    evtimer_add(ic->timer, &hs);
    return 0;
}

/* The HTTP/1.1 transport's hook for an intercepted CONNECT (struct h1conn_hooks.tls). */
static int ingress_tls_take(struct worker_link *from, struct exch_conn *cc, struct cio *plain)
{
    struct ingress_conn *ic = ingress_new(cc, false);

    if (ic == NULL) {
        cio_free(&plain);
        return -1;
    }
    worker_replace(ic->cc.w, from, &ic->link, &ingress_link_ops);
    (void)ingress_tls(ic, plain);
    return 0;
}

/* ---- accept ----------------------------------------------------------------------------- */

static void addr_text(const struct sockaddr *sa, char *out, size_t outsz)
{
    char ip[INET6_ADDRSTRLEN] = "?";

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
        snprintf(out, outsz, "%s:%u", ip, ntohs(s4->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
        snprintf(out, outsz, "[%s]:%u", ip, ntohs(s6->sin6_port));
    } else {
        snprintf(out, outsz, "unix");
    }
}

/* One warn line per worker per second at most while connections are over the limit. */
static void limit_note(struct worker *w, int active)
{
    struct ingress_worker *iw = ingress_state(w);
    struct timespec now;

    if (iw == NULL)
        return;
    iw->limit_refused++;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((int64_t)now.tv_sec == iw->limit_logged)
        return;
    iw->limit_logged = (int64_t)now.tv_sec;
    log_eventf(LOG_WARN, "conn_limit", VG_PS_CONN_LIMIT,
               "%d connections open, limit %d: %llu refused", active, w->sh->max_conns,
               (unsigned long long)iw->limit_refused);
    iw->limit_refused = 0;
}

/* The TLS listener's socket: the handshake first. */
static void accept_tls(struct exch_conn *cc, evutil_socket_t fd, bool busy)
{
    struct ingress_conn *ic = ingress_new(cc, busy);

    if (ic == NULL) {
        evutil_closesocket(fd);
        exch_conn_release(cc);
        log_eventf(LOG_ERROR, "accept", "oom", "out of memory");
        return;
    }
    ic->cc.tls = ic->cc.host_fixed = true;
    ic->cc.id = worker_attach(ic->cc.w, &ic->link, &ingress_link_ops);
    (void)ingress_tls(ic, cio_new(ic->cc.w->base, fd)); /* fd closed when it fails */
}

/* A plain-HTTP or explicit-proxy listener's socket: HTTP/1.1 at once. */
static void accept_plain(struct exch_conn *cc, evutil_socket_t fd, bool busy)
{
    struct cio *io = cio_new(cc->w->base, fd); /* fd closed when it fails */

    if (io == NULL || h1conn_start(NULL, cc, io, busy, &h1_hooks) < 0) {
        exch_conn_release(cc);
        log_eventf(LOG_ERROR, "accept", "oom", "out of memory");
    }
}

static void ingress_accept(struct worker *w, const struct listen_addr *la, int fd,
                           const struct sockaddr *sa, int salen)
{
    int active = atomic_load(&w->sh->active_conns), one = 1;
    struct exch_conn cc = {0};
    char client[EXCH_CLIENT_MAX + 1];
    bool busy = active >= w->sh->max_conns;

    (void)salen;
    if (busy) {
        limit_note(w, active);
        if (active >= w->sh->max_conns + VG_CONN_BUSY_RESERVE) {
            evutil_closesocket(fd);
            return;
        }
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    cc.w = w;
    cc.la = la;
    cc.proxy = la->kind == LISTEN_PROXY;
    cc.default_port = la->kind == LISTEN_HTTPS ? INGRESS_HTTPS_PORT : INGRESS_HTTP_PORT;
    addr_text(sa, client, sizeof(client));
    if (exch_conn_names(&cc, client, NULL) < 0) {
        evutil_closesocket(fd);
        log_eventf(LOG_ERROR, "accept", "oom", "out of memory");
        return;
    }
    if (la->kind == LISTEN_HTTPS)
        accept_tls(&cc, fd, busy); /* the transport answers 503 after the handshake */
    else
        accept_plain(&cc, fd, busy);
}

/* ---- the worker's part ------------------------------------------------------------------ */

static int ingress_worker_init(struct worker *w, char *err, size_t errlen)
{
    void **st = worker_module_state(w, &ingress_worker_module);
    struct ingress_worker *iw = calloc(1, sizeof(*iw));

    if (st == NULL || iw == NULL) {
        free(iw);
        snprintf(err, errlen, "worker %d: out of memory", w->id);
        return -1;
    }
    *st = iw;
    iw->ssl_ctx = tls_server_ctx_new(w->sh->ticket_keys, err, errlen);
    return iw->ssl_ctx != NULL ? 0 : -1;
}

static void ingress_worker_free(struct worker *w)
{
    void **st = worker_module_state(w, &ingress_worker_module);
    struct ingress_worker *iw = st != NULL ? *st : NULL;

    if (w->base != NULL)
        cio_base_end(w->base); /* client sockets closed in the loop's last turn */
    if (iw == NULL)
        return;
    SSL_CTX_free(iw->ssl_ctx);
    free(iw);
    *st = NULL;
}

const struct worker_module ingress_worker_module = {
    .name = "ingress",
    .accepts = (1u << LISTEN_HTTPS) | (1u << LISTEN_HTTP) | (1u << LISTEN_PROXY),
    .accept = ingress_accept,
    .init = ingress_worker_init,
    .free = ingress_worker_free,
};
