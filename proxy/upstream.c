/*
 * upstream.c - connections from vaultgate to real hosts: resolve, check, dial, verify, pool.
 *
 * Guarantees:
 * - Resolution is asynchronous (evdns, A and AAAA, no search list, never /etc/hosts). Every
 *   answer is checked against the destination rules (addr.h) and only the addresses that pass
 *   are kept; those exact sockaddrs are dialled, so the address checked is the address dialled.
 *   Pins (--resolve) and the --upstream-proxy address are exempt from the rules; --allow-private
 *   CIDRs exempt what they cover. vaultgate's own listener endpoints are never dialled, nor
 *   (unless pinned or allow-listed) any other address of the machine, read per worker
 *   (localaddr.h) and kept current as interfaces change.
 * - TLS: one client SSL_CTX per context (trust store loaded once), TLS 1.2+, SNI for DNS names,
 *   chain and host name (or IP) verified by OpenSSL during the handshake; a connection is handed
 *   out only with X509_V_OK. Sessions are cached per server name so new connections resume.
 * - The callback runs exactly once per upstream_get that returned a handle, never from inside
 *   upstream_get, and never after upstream_cancel. Every phase has a deadline.
 * - Connections are cio (cio.h), TLS handshakes run by cio_connect_tls. Idle pooled connections
 *   sit with a read callback that frees them on EOF, data or error, and a read timeout of
 *   pool_idle_timeout; what the pool hands out was alive when last checked.
 *
 * Option parsing and the destination rules for one address live in upstream_rules.c, the pool
 * of idle connections in upstream_pool.c.
 */
#include "proxy/upstream.h"
#include "proxy/reason.h"
#include "audit/log.h"
#include "common/hostname.h"
#include "proxy/addr.h"
#include "proxy/localaddr.h"
#include "proxy/tls.h"
#include "proxy/upstream_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/dns.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static void req_free(struct upstream_req *r);
static void ready_cb(evutil_socket_t fd, short what, void *arg);
static int deadline(struct upstream_req *r, const struct timeval *tv);
static void connect_next(struct upstream_req *r);
static void start_tls(struct upstream_req *r);

/* ---- TLS context and session cache -------------------------------------------------------- */

static struct sess_slot *sess_slot_for(struct upstream_ctx *c, const char *host)
{
    return &c->sess[upstream_hash(host, 2166136261u) % UPSTREAM_SESS_SLOTS];
}

/* OpenSSL hands over a new session (after the handshake, or a TLS 1.3 ticket later on). */
static int sess_new_cb(SSL *ssl, SSL_SESSION *sess)
{
    struct upstream_ctx *c = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    struct sess_slot *slot;

    if (c == NULL || name == NULL || strlen(name) >= HOSTNAME_BUFSZ)
        return 0;
    slot = sess_slot_for(c, name);
    SSL_SESSION_free(slot->sess);
    slot->sess = sess;
    snprintf(slot->host, sizeof(slot->host), "%s", name);
    return 1; /* we keep the reference */
}

/* Offers a cached session for host; TLS 1.3 tickets are used once. */
static void sess_offer(struct upstream_ctx *c, SSL *ssl, const char *host)
{
    struct sess_slot *slot = sess_slot_for(c, host);

    if (slot->sess == NULL || strcmp(slot->host, host) != 0)
        return;
    if (SSL_SESSION_is_resumable(slot->sess))
        SSL_set_session(ssl, slot->sess);
    if (!SSL_SESSION_is_resumable(slot->sess) ||
        SSL_SESSION_get_protocol_version(slot->sess) >= TLS1_3_VERSION) {
        SSL_SESSION_free(slot->sess);
        slot->sess = NULL;
    }
}

static void ssl_err_text(char *buf, size_t len)
{
    unsigned long e, first = 0;

    while ((e = ERR_get_error()) != 0) {
        if (first == 0)
            first = e;
    }
    if (first != 0)
        ERR_error_string_n(first, buf, len);
    else
        snprintf(buf, len, "unknown error");
}

/* Read-ahead buffer of an upstream TLS connection: up to four records per read(2) when an
 * answer streams faster than it is passed on. */
#define UPSTREAM_READ_BUF (4 * 16384 + 1024)

static SSL_CTX *client_ctx_new(const char *ca_file, char *err, size_t errlen)
{
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    char why[256];
    int ok;

    if (ctx == NULL)
        goto fail;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1)
        goto fail;
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    ok = ca_file != NULL ? SSL_CTX_load_verify_locations(ctx, ca_file, NULL)
                         : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1)
        goto fail;
    if (SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn) - 1) != 0)
        goto fail;
    /* the server side's order: a server that follows the client's spends less on every record */
    if (SSL_CTX_set_ciphersuites(ctx, TLS_SUITES_13) != 1)
        goto fail;
    /* no SSL_MODE_RELEASE_BUFFERS: kept while a connection is busy, released when a response
     * streams (cio_release_always) and after UPSTREAM_POOL_BUF_KEEP_MS in the pool */
    SSL_CTX_set_read_ahead(ctx, 1); /* cio reads while SSL_has_pending(); bufferevents made
                                     * from it are read by consumers that call bevio_pull() */
    SSL_CTX_set_default_read_buffer_len(ctx, UPSTREAM_READ_BUF);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, sess_new_cb);
    return ctx;
fail:
    ssl_err_text(why, sizeof(why));
    snprintf(err, errlen, "upstream TLS context%s%s: %s", ca_file != NULL ? " with " : "",
             ca_file != NULL ? ca_file : "", why);
    SSL_CTX_free(ctx);
    return NULL;
}

/* ---- context ---------------------------------------------------------------------------- */

static struct timeval tv_of(double secs, double def)
{
    struct timeval tv;

    if (secs <= 0)
        secs = def;
    tv.tv_sec = (time_t)secs;
    tv.tv_usec = (suseconds_t)((secs - (double)tv.tv_sec) * 1e6);
    return tv;
}

static int dns_setup(struct upstream_ctx *c, const struct upstream_config *cfg, char *err,
                     size_t errlen)
{
    union upstream_sa sa;
    int r;

    c->dns = evdns_base_new(c->base, EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (c->dns == NULL) {
        snprintf(err, errlen, "cannot create the DNS resolver");
        return -1;
    }
    for (size_t i = 0; i < cfg->ndns; i++) {
        if (upstream_parse_ip_port(cfg->dns_servers[i], 53, &sa) != 0 ||
            evdns_base_nameserver_sockaddr_add(
                c->dns, &sa.sa, sa.sa.sa_family == AF_INET ? sizeof(sa.sin) : sizeof(sa.sin6), 0) !=
                0) {
            snprintf(err, errlen, "--dns-server %s: cannot use it", cfg->dns_servers[i]);
            return -1;
        }
    }
    if (cfg->ndns > 0)
        return 0;
    /* Never the hosts file: the sandbox may control it, and only pins may override DNS. */
    r = evdns_base_resolv_conf_parse(c->dns, DNS_OPTIONS_ALL & ~DNS_OPTION_HOSTSFILE,
                                     "/etc/resolv.conf");
    if (r != 0 && r != 1 && r != 6) {
        snprintf(err, errlen, "/etc/resolv.conf: cannot parse it (evdns error %d)", r);
        return -1;
    }
    return 0;
}

struct upstream_ctx *upstream_ctx_new(struct event_base *base, const struct upstream_config *cfg,
                                      char *err, size_t errlen)
{
    struct upstream_ctx *c = NULL;
    struct timeval idle;

    if (upstream_config_check(cfg, err, errlen) != 0)
        return NULL;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        goto nomem;
    c->base = base;
    c->connect_tv = tv_of(cfg->connect_timeout, UPSTREAM_DEFAULT_CONNECT_TIMEOUT);
    c->tls_tv = tv_of(cfg->tls_timeout, UPSTREAM_DEFAULT_TLS_TIMEOUT);
    idle = tv_of(cfg->pool_idle_timeout, UPSTREAM_DEFAULT_IDLE_TIMEOUT);
    c->pool = upstream_pool_new(
        cfg->pool_max_per_key > 0 ? cfg->pool_max_per_key : UPSTREAM_DEFAULT_POOL_MAX, &idle);
    c->sess = calloc(UPSTREAM_SESS_SLOTS, sizeof(*c->sess));
    c->pins = calloc(cfg->npins + 1, sizeof(*c->pins));
    c->allow = calloc(cfg->nallow + 1, sizeof(*c->allow));
    c->local = localaddr_new();
    if (c->pool == NULL || c->sess == NULL || c->pins == NULL || c->allow == NULL ||
        c->local == NULL)
        goto nomem;
    for (size_t i = 0; i < cfg->npins; i++)
        upstream_parse_pin(cfg->pins[i], &c->pins[c->npins++]);
    for (size_t i = 0; i < cfg->nallow; i++)
        addr_parse_cidr(cfg->allow_private[i], &c->allow[c->nallow++]);
    if (cfg->upstream_proxy != NULL) {
        char tmp[HOSTNAME_BUFSZ];

        upstream_parse_proxy_url(cfg->upstream_proxy, tmp, &c->proxy_port);
        c->proxy_kind = hostname_normalize(tmp, strlen(tmp), c->proxy_host, sizeof(c->proxy_host));
        c->have_proxy = true;
    }
    c->ready_ev = event_new(base, -1, 0, ready_cb, c);
    if (c->ready_ev == NULL)
        goto nomem;
    if (dns_setup(c, cfg, err, errlen) != 0)
        goto fail;
    c->ssl_ctx = client_ctx_new(cfg->ca_file, err, errlen);
    if (c->ssl_ctx == NULL)
        goto fail;
    SSL_CTX_set_app_data(c->ssl_ctx, c);
    return c;
nomem:
    snprintf(err, errlen, "out of memory");
fail:
    upstream_ctx_free(&c);
    return NULL;
}

void upstream_ctx_free(struct upstream_ctx **cp)
{
    struct upstream_ctx *c = *cp;

    if (c == NULL)
        return;
    /* Requests still in flight are dropped without a callback (the caller cancels first). */
    while (c->reqs != NULL)
        req_free(c->reqs);
    if (c->ready_ev != NULL)
        event_free(c->ready_ev);
    upstream_pool_free(&c->pool);
    /* the loop ends: what the pool and the requests freed is closed now, not in a next turn */
    cio_base_end(c->base);
    if (c->dns != NULL)
        evdns_base_free(c->dns, 1); /* orphaned queries get their (freeing) callback */
    if (c->ssl_ctx != NULL) {
        /* The SSL_CTX may outlive us inside SSLs the caller still holds. */
        SSL_CTX_set_app_data(c->ssl_ctx, NULL);
        SSL_CTX_free(c->ssl_ctx);
    }
    if (c->sess != NULL) {
        for (size_t i = 0; i < UPSTREAM_SESS_SLOTS; i++)
            SSL_SESSION_free(c->sess[i].sess);
    }
    free(c->sess);
    free(c->pins);
    free(c->allow);
    localaddr_free(&c->local);
    free(c);
    *cp = NULL;
}

void upstream_ctx_stats(const struct upstream_ctx *c, struct upstream_stats *out)
{
    *out = c->stats;
    out->pool_idle = upstream_pool_idle(c->pool);
}

bool upstream_pooled(struct upstream_ctx *c, const char *host, int port, int tls)
{
    return upstream_pool_count(c->pool, host, port, tls) > 0;
}

void upstream_release(struct upstream_ctx *c, const char *host, int port, int tls, struct cio **io)
{
    char norm[HOSTNAME_BUFSZ];

    if (*io == NULL)
        return;
    if (hostname_normalize(host, strlen(host), norm, sizeof(norm)) < 0 ||
        upstream_pool_put(c->pool, norm, port, tls, *io) != 0)
        cio_free(io);
    *io = NULL;
}

/* ---- requests --------------------------------------------------------------------------- */

static void ready_unlink(struct upstream_req *r)
{
    struct upstream_ctx *c = r->ctx;

    if (r->rprev != NULL)
        r->rprev->rnext = r->rnext;
    else
        c->ready_head = r->rnext;
    if (r->rnext != NULL)
        r->rnext->rprev = r->rprev;
    else
        c->ready_tail = r->rprev;
    r->rprev = r->rnext = NULL;
    r->ready = false;
}

static void req_free(struct upstream_req *r)
{
    struct upstream_ctx *c = r->ctx;
    struct dns_query *qs[2] = {r->q4, r->q6};

    for (int i = 0; i < 2; i++) {
        if (qs[i] != NULL) {
            qs[i]->req = NULL;
            evdns_cancel_request(c->dns, qs[i]->handle);
        }
    }
    if (r->ready)
        ready_unlink(r);
    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        c->reqs = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    if (r->io != NULL)
        event_free(r->io);
    if (r->timer != NULL)
        event_free(r->timer);
    if (r->fd >= 0)
        evutil_closesocket(r->fd);
    if (r->conn != NULL) {
        /* A pooled connection that was never delivered is still good. */
        if (r->state != RQ_POOL ||
            upstream_pool_put(c->pool, r->host, r->port, r->tls, r->conn) != 0)
            cio_free(&r->conn);
    }
    free(r->pbuf);
    free(r);
}

/* Ends the request: frees it, then runs the callback (which may start new requests). */
void upstream_finish(struct upstream_req *r, struct cio *io, enum upstream_err err)
{
    upstream_cb cb = r->cb;
    void *arg = r->arg;
    unsigned how = (r->tunnel ? UPSTREAM_VIA_TUNNEL : 0) |
                   (io != NULL && r->state == RQ_POOL ? UPSTREAM_POOLED : 0);

    if (io != NULL) {
        cio_setcb(io, NULL, NULL, NULL, NULL);
        cio_set_timeouts(io, NULL, NULL);
        cio_read(io, true);
    }
    if (r->conn == io)
        r->conn = NULL;
    req_free(r);
    cb(arg, io, err, how);
}

/* The connection on r->fd is established (to the host, or through the proxy's tunnel). */
void upstream_connected(struct upstream_req *r)
{
    struct cio *io;

    if (r->tls) {
        start_tls(r);
        return;
    }
    io = cio_new(r->ctx->base, r->fd); /* owns the socket from here, even when it fails */
    r->fd = -1;
    if (io == NULL) {
        upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
        return;
    }
    upstream_finish(r, io, UPSTREAM_OK);
}

static enum upstream_err errno_err(int e)
{
    return e == ETIMEDOUT ? UPSTREAM_ERR_TIMEOUT : UPSTREAM_ERR_CONNECT;
}

static void io_cb(evutil_socket_t fd, short what, void *arg)
{
    struct upstream_req *r = arg;
    int soerr = 0;
    socklen_t sl = sizeof(soerr);

    if (r->state == RQ_CONNECT) {
        if (what & EV_TIMEOUT) {
            r->last_err = UPSTREAM_ERR_TIMEOUT;
        } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
            r->last_err = errno_err(soerr != 0 ? soerr : errno);
        } else {
            event_free(r->io);
            r->io = NULL;
            if (r->tunnel)
                upstream_proxy_send(r);
            else
                upstream_connected(r);
            return;
        }
        event_free(r->io);
        r->io = NULL;
        evutil_closesocket(r->fd);
        r->fd = -1;
        connect_next(r);
        return;
    }
    if (what & EV_TIMEOUT) {
        upstream_finish(r, NULL, UPSTREAM_ERR_TIMEOUT);
        return;
    }
    if (r->state == RQ_PROXY_SEND)
        upstream_proxy_send(r);
    else
        upstream_proxy_read(r);
}

/* Waits for what on r->fd for at most tv. */
int upstream_wait_fd(struct upstream_req *r, short what, const struct timeval *tv)
{
    if (r->io == NULL)
        r->io = event_new(r->ctx->base, r->fd, what, io_cb, r);
    else
        event_assign(r->io, r->ctx->base, r->fd, what, io_cb, r);
    return r->io != NULL && event_add(r->io, tv) == 0 ? 0 : -1;
}

/* Dials the next allowed address; when none is left, fails with the last error. */
static void connect_next(struct upstream_req *r)
{
    static const int one = 1;

    while (r->next_addr < r->naddrs) {
        const union upstream_sa *a = &r->addrs[r->next_addr++];
        socklen_t len = a->sa.sa_family == AF_INET ? sizeof(a->sin) : sizeof(a->sin6);

        r->fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (r->fd < 0) {
            r->last_err = UPSTREAM_ERR_INTERNAL;
            continue;
        }
        setsockopt(r->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        r->ctx->stats.dials++;
        r->state = RQ_CONNECT;
        if ((connect(r->fd, &a->sa, len) == 0 || errno == EINPROGRESS) &&
            upstream_wait_fd(r, EV_WRITE, &r->ctx->connect_tv) == 0)
            return;
        r->last_err = errno_err(errno);
        evutil_closesocket(r->fd);
        r->fd = -1;
    }
    upstream_finish(r, NULL, r->last_err);
}

/* ---- TLS handshake ------------------------------------------------------------------------ */

static void log_tls_failure(struct upstream_req *r, SSL *ssl, struct cio *io)
{
    struct log_fields f = LOG_FIELDS_INIT;
    char detail[300];
    long vr = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
    unsigned long e = io != NULL ? cio_ssl_error(io) : 0;

    if (!log_enabled(LOG_DEBUG)) {
        ERR_clear_error();
        return;
    }
    if (vr != X509_V_OK) {
        snprintf(detail, sizeof(detail), "certificate verify failed: %s",
                 X509_verify_cert_error_string(vr));
        f.reason = VG_PS_TLS_CERT_ERROR;
    } else {
        if (e != 0)
            ERR_error_string_n(e, detail, sizeof(detail));
        else
            ssl_err_text(detail, sizeof(detail));
        f.reason = VG_PS_TLS_PROTOCOL_ERROR;
    }
    ERR_clear_error();
    f.host = r->host;
    f.route = r->tunnel ? "tunnel" : "direct";
    f.detail = detail;
    log_event(LOG_DEBUG, "upstream_tls_failed", &f);
}

static void tls_event_cb(struct cio *io, short what, void *arg)
{
    struct upstream_req *r = arg;
    SSL *ssl = cio_ssl(io);

    if ((what & CIO_CONNECTED) && SSL_get_verify_result(ssl) == X509_V_OK &&
        SSL_get0_peer_certificate(ssl) != NULL) {
        r->ctx->stats.tls_handshakes++;
        if (SSL_session_reused(ssl))
            r->ctx->stats.tls_resumed++;
        upstream_finish(r, io, UPSTREAM_OK);
        return;
    }
    log_tls_failure(r, ssl, io);
    upstream_finish(r, NULL, UPSTREAM_ERR_TLS);
}

static void start_tls(struct upstream_req *r)
{
    struct upstream_ctx *c = r->ctx;
    SSL *ssl = SSL_new(c->ssl_ctx);
    X509_VERIFY_PARAM *vp;
    int ok;

    if (ssl == NULL) {
        ERR_clear_error();
        upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
        return;
    }
    vp = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (r->kind == HOSTNAME_DNS) {
        ok = SSL_set_tlsext_host_name(ssl, r->host) == 1 && SSL_set1_host(ssl, r->host) == 1;
        if (ok)
            sess_offer(c, ssl, r->host);
    } else {
        ok = X509_VERIFY_PARAM_set1_ip_asc(vp, r->host) == 1;
    }
    if (ok && r->tls == UPSTREAM_TLS_H2) {
        static const unsigned char h2[] = "\x02h2\x08http/1.1";

        ok = SSL_set_alpn_protos(ssl, h2, sizeof(h2) - 1) == 0;
    }
    if (!ok) {
        SSL_free(ssl);
        ERR_clear_error();
        upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
        return;
    }
    /* From here the connection owns fd, and ssl once given, even if either step fails. */
    r->conn = cio_new(c->base, r->fd);
    r->fd = -1;
    if (r->conn == NULL) {
        SSL_free(ssl);
        upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
        return;
    }
    cio_setcb(r->conn, NULL, NULL, tls_event_cb, r);
    if (cio_connect_tls(r->conn, ssl) != 0) {
        upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
        return;
    }
    r->state = RQ_TLS;
    if (deadline(r, &c->tls_tv) != 0)
        upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
}

/* ---- resolution ------------------------------------------------------------------------- */

/* Keeps the allowed addresses of one answer; IPv4 first, then IPv6. */
static void add_answer(struct upstream_req *r, int family, int count, const void *addrs)
{
    for (int i = 0; i < count && r->naddrs < UPSTREAM_MAX_ADDRS; i++) {
        union upstream_sa a;

        memset(&a, 0, sizeof(a));
        if (family == AF_INET) {
            a.sin.sin_family = AF_INET;
            a.sin.sin_port = htons((uint16_t)r->dial_port);
            memcpy(&a.sin.sin_addr, (const uint8_t *)addrs + 4 * i, 4);
        } else {
            a.sin6.sin6_family = AF_INET6;
            a.sin6.sin6_port = htons((uint16_t)r->dial_port);
            memcpy(&a.sin6.sin6_addr, (const uint8_t *)addrs + 16 * i, 16);
        }
        if (!upstream_dest_allowed(r->ctx->allow, r->ctx->nallow, r->ctx->local, r->dial_host, &a,
                                   r->tunnel)) {
            r->prohibited_seen = true;
            continue;
        }
        if (family == AF_INET) {
            size_t j = 0;

            while (j < r->naddrs && r->addrs[j].sa.sa_family == AF_INET)
                j++;
            memmove(&r->addrs[j + 1], &r->addrs[j], (r->naddrs - j) * sizeof(r->addrs[0]));
            r->addrs[j] = a;
        } else {
            r->addrs[r->naddrs] = a;
        }
        r->naddrs++;
    }
}

static void dns_cb(int result, char type, int count, int ttl, void *addresses, void *arg)
{
    struct dns_query *q = arg;
    struct upstream_req *r = q->req;

    free(q);
    if (r == NULL)
        return; /* cancelled */
    if (r->q4 == q)
        r->q4 = NULL;
    else
        r->q6 = NULL;
    if (result == DNS_ERR_NONE && type == DNS_IPv4_A)
        add_answer(r, AF_INET, count, addresses);
    else if (result == DNS_ERR_NONE && type == DNS_IPv6_AAAA)
        add_answer(r, AF_INET6, count, addresses);
    if (r->q4 != NULL || r->q6 != NULL)
        return;
    if (r->timer != NULL)
        event_del(r->timer);
    if (r->naddrs > 0) {
        connect_next(r);
        return;
    }
    upstream_finish(r, NULL, r->prohibited_seen ? UPSTREAM_ERR_PROHIBITED : UPSTREAM_ERR_DNS);
}

static struct dns_query *dns_query(struct upstream_req *r, bool v6)
{
    struct dns_query *q = calloc(1, sizeof(*q));

    if (q == NULL)
        return NULL;
    q->req = r;
    q->handle = (v6 ? evdns_base_resolve_ipv6 : evdns_base_resolve_ipv4)(
        r->ctx->dns, r->dial_host, DNS_QUERY_NO_SEARCH, dns_cb, q);
    if (q->handle == NULL) {
        free(q);
        return NULL;
    }
    r->ctx->stats.dns_queries++;
    return q;
}

/* ---- get / cancel ----------------------------------------------------------------------- */

/* Queues r's next step for the ready event (one per context, no allocation per request). */
static void ready_push(struct upstream_req *r)
{
    struct upstream_ctx *c = r->ctx;

    r->ready = true;
    r->rgen = c->ready_gen;
    r->rnext = NULL;
    r->rprev = c->ready_tail;
    if (c->ready_tail != NULL)
        c->ready_tail->rnext = r;
    else
        c->ready_head = r;
    c->ready_tail = r;
    event_active(c->ready_ev, EV_TIMEOUT, 1);
}

static void ready_cb(evutil_socket_t fd, short what, void *arg)
{
    struct upstream_ctx *c = arg;
    unsigned gen = c->ready_gen++;
    struct upstream_req *r;

    /* Only what was queued before this run: callbacks may queue more. */
    while ((r = c->ready_head) != NULL && r->rgen == gen) {
        ready_unlink(r);
        if (r->state == RQ_POOL)
            upstream_finish(r, r->conn, UPSTREAM_OK);
        else if (r->naddrs == 0)
            upstream_finish(r, NULL, r->early_err);
        else
            connect_next(r);
    }
    if (c->ready_head != NULL)
        event_active(c->ready_ev, EV_TIMEOUT, 1);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct upstream_req *r = arg;

    if (r->state == RQ_DNS) {
        /* The resolver did not answer within connect_timeout. */
        upstream_finish(r, NULL, UPSTREAM_ERR_DNS);
        return;
    }
    log_eventf(LOG_DEBUG, "upstream_tls_failed", VG_PS_CONNECTION_TIMEOUT,
               "TLS handshake with %s timed out", r->host);
    upstream_finish(r, NULL, UPSTREAM_ERR_TIMEOUT);
}

/* Arms r's deadline (DNS or TLS phase). */
static int deadline(struct upstream_req *r, const struct timeval *tv)
{
    if (r->timer == NULL && (r->timer = evtimer_new(r->ctx->base, timer_cb, r)) == NULL)
        return -1;
    return evtimer_add(r->timer, tv);
}

static const struct upstream_pin *pin_find(const struct upstream_ctx *c, const char *host, int port)
{
    for (size_t i = 0; i < c->npins; i++) {
        if (c->pins[i].port == port && strcmp(c->pins[i].host, host) == 0)
            return &c->pins[i];
    }
    return NULL;
}

/*
 * Decides where r dials: a pin, an IP literal, or a DNS lookup. Returns 1 when the addresses
 * are known (or the request already failed: naddrs 0 and early_err), 0 when DNS was started,
 * -1 when nothing could start.
 */
static int plan(struct upstream_req *r)
{
    struct upstream_ctx *c = r->ctx;
    const struct upstream_pin *pin;
    union upstream_sa a;

    r->dial_host = r->tunnel ? c->proxy_host : r->host;
    r->dial_port = r->tunnel ? c->proxy_port : r->port;
    r->early_err = UPSTREAM_ERR_PROHIBITED;
    r->last_err = UPSTREAM_ERR_CONNECT;
    if (r->tunnel && r->kind != HOSTNAME_DNS && pin_find(c, r->host, r->port) == NULL) {
        /* The proxy dials an IP-literal target as given: check it here. */
        upstream_parse_ip(r->host, strlen(r->host), r->port, &a);
        if (!upstream_dest_allowed(c->allow, c->nallow, c->local, r->host, &a, false))
            return 1;
    }
    pin = pin_find(c, r->dial_host, r->dial_port);
    if (pin != NULL) {
        if (upstream_dest_allowed(c->allow, c->nallow, c->local, r->dial_host, &pin->addr, true))
            r->addrs[r->naddrs++] = pin->addr;
        return 1;
    }
    if ((r->tunnel ? c->proxy_kind : r->kind) != HOSTNAME_DNS) {
        upstream_parse_ip(r->dial_host, strlen(r->dial_host), r->dial_port, &a);
        if (upstream_dest_allowed(c->allow, c->nallow, c->local, r->dial_host, &a, r->tunnel))
            r->addrs[r->naddrs++] = a;
        return 1;
    }
    r->state = RQ_DNS;
    r->q4 = dns_query(r, false);
    r->q6 = dns_query(r, true);
    if (r->q4 == NULL && r->q6 == NULL)
        return -1;
    return deadline(r, &c->connect_tv) == 0 ? 0 : -1;
}

struct upstream_req *upstream_get(struct upstream_ctx *c, const char *host, int port, int tls,
                                  bool retryable, upstream_cb cb, void *arg)
{
    struct upstream_req *r = NULL;
    int kind, planned;

    if (port < 1 || port > 65535 || cb == NULL)
        return NULL;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    kind = hostname_normalize(host, strlen(host), r->host, sizeof(r->host));
    if (kind < 0) {
        free(r);
        return NULL;
    }
    r->fd = -1;
    r->ctx = c;
    r->next = c->reqs;
    if (c->reqs != NULL)
        c->reqs->prev = r;
    c->reqs = r;
    r->kind = kind;
    r->port = port;
    r->tls = tls;
    r->cb = cb;
    r->arg = arg;
    r->tunnel = c->have_proxy;
    r->conn = upstream_pool_get(c->pool, r->host, port, tls, !retryable);
    if (r->conn != NULL) {
        r->state = RQ_POOL;
        c->stats.pool_hits++;
        ready_push(r);
        return r;
    }
    c->stats.pool_misses++;
    r->state = RQ_START;
    planned = plan(r);
    if (planned < 0)
        goto fail;
    if (planned == 1)
        ready_push(r);
    return r;
fail:
    req_free(r);
    return NULL;
}

void upstream_cancel(struct upstream_req **rp)
{
    if (*rp == NULL)
        return;
    req_free(*rp);
    *rp = NULL;
}

bool upstream_alpn_h2(const struct cio *io)
{
    SSL *ssl = io != NULL ? cio_ssl(io) : NULL;
    const unsigned char *p = NULL;
    unsigned int n = 0;

    if (ssl == NULL)
        return false;
    SSL_get0_alpn_selected(ssl, &p, &n);
    return n == 2 && memcmp(p, "h2", 2) == 0;
}

const char *upstream_err_type(enum upstream_err e)
{
    switch (e) {
    case UPSTREAM_OK:
        return "ok";
    case UPSTREAM_ERR_DNS:
        return VG_PS_DNS_ERROR;
    case UPSTREAM_ERR_PROHIBITED:
        return VG_PS_IP_PROHIBITED;
    case UPSTREAM_ERR_CONNECT:
        return VG_PS_CONN_REFUSED;
    case UPSTREAM_ERR_TLS:
        return VG_PS_TLS_CERT_ERROR;
    case UPSTREAM_ERR_TIMEOUT:
        return VG_PS_CONNECTION_TIMEOUT;
    case UPSTREAM_ERR_PROXY:
        return VG_PS_DEST_UNAVAILABLE;
    case UPSTREAM_ERR_INTERNAL:
        return VG_PS_INTERNAL_ERROR;
    }
    return VG_PS_INTERNAL_ERROR;
}

int upstream_err_status(enum upstream_err e)
{
    switch (e) {
    case UPSTREAM_OK:
        return 200;
    case UPSTREAM_ERR_PROHIBITED:
        return 403;
    case UPSTREAM_ERR_TIMEOUT:
        return 504;
    default:
        return 502;
    }
}
