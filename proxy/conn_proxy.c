/*
 * conn_proxy.c - the explicit-proxy listener (SPEC §1 "explicit proxy", §4): CONNECT and
 * absolute-form http:// requests, on top of the connection machinery of conn.c; and the byte
 * splice that CONNECT tunnels and WebSockets after 101 share (conn_tunnel_start).
 *
 * Guarantees:
 * - A CONNECT to a port other than 443 or 80, or to a blocked host, is answered 403 before any
 *   byte is relayed, and recorded in blocked_host_log; an absolute-form request to a port other
 *   than 80 likewise.
 * - CONNECT to 443 is intercepted (TLS terminated with a leaf for the CONNECT host, whose SNI
 *   must be that host) - except in default routing for an allowed host the vault does not
 *   designate, which is tunnelled byte for byte once the ClientHello's SNI was read and found
 *   equal to the CONNECT host (else the tunnel is closed and the mismatch logged).
 * - CONNECT to 80 carries plain HTTP for the CONNECT host only (another Host is 421).
 * - A secret is only ever injected into an intercepted request, and sent over TLS to 443.
 */
#include "proxy/conn_int.h"
#include "audit/audit.h"
#include "ca/ca.h"
#include "common/caps.h"
#include "proxy/mask.h"
#include "proxy/wsmask.h"
#include "proxy/tls.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>

#define PROXY_T_PEEK    10 /* the ClientHello must arrive this soon after the 200 */
#define PROXY_HELLO_MAX (16384 + 5)

static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";

/*
 * Absolute-form http:// requests on the proxy listener: the target names the host and port, Host
 * must name the same host (and port, when it names one other than 80). Returns 0 (c->host and
 * c->target_port set, target now origin-form) or the status to answer with *why. Whether a port
 * other than 80 may be used is the caller's, after the decision: a rule's host is reached over
 * TLS on 443 whatever port the request names; any other host only on 80 (SPEC §4).
 */
int conn_proxy_target(struct conn *c, struct http_head *h, const char **why)
{
    const char *t = h->target, *auth, *end;
    const struct http_field *hf = httphead_get(h, "Host");
    char host[HOSTNAME_BUFSZ], tmp[VG_HEAD_MAX_BYTES];
    int port = 0, hport = 0, n;

    if (strncasecmp(t, "http://", 7) != 0) {
        *why = "a proxy request needs an absolute http:// target (or CONNECT)";
        return 400;
    }
    auth = t + 7;
    end = auth + strcspn(auth, "/?#");
    if (memchr(auth, '@', (size_t)(end - auth)) != NULL ||
        http1_split_authority(auth, (size_t)(end - auth), c->host, sizeof(c->host), &port) < 0) {
        c->host[0] = '\0';
        *why = "malformed request target";
        return 400;
    }
    c->target_port = port == 0 ? CONN_HTTP_PORT : port;
    if (httphead_count(h, "Host") > 1 ||
        (hf != NULL &&
         http1_split_authority(hf->value, hf->value_len, host, sizeof(host), &hport) < 0)) {
        *why = "malformed Host";
        return 400;
    }
    if (hf != NULL && (strcmp(host, c->host) != 0 || (hport != 0 && hport != c->target_port))) {
        *why = "Host does not match the request target";
        return 421;
    }
    if (*end == '#') {
        *why = "fragment in the request target";
        return 400;
    }
    n = snprintf(tmp, sizeof(tmp), "%s%.*s", *end == '/' ? "" : "/",
                 (int)(h->target_len - (size_t)(end - t)), end);
    if (n <= 0 || (size_t)n >= sizeof(tmp) || httphead_set_target(h, tmp, (size_t)n) < 0) {
        *why = "request target too long";
        return 400;
    }
    return 0;
}

/* ---- tunnel without interception ------------------------------------------------------- */

static struct conn_end *other_end(struct conn *c, struct bufferevent *bev)
{
    return bev == c->client.bev ? &c->upstream : &c->client;
}

static struct conn_end *this_end(struct conn *c, struct bufferevent *bev)
{
    return bev == c->client.bev ? &c->client : &c->upstream;
}

/* Both directions flushed after one side closed: the tunnel ends without an RST. */
static void tunnel_finish(struct conn *c, const char *reason)
{
    struct log_fields f = LOG_FIELDS_INIT;

    f.conn = c->id;
    f.client = c->client_addr;
    f.listener = c->la->label;
    f.host = c->host;
    f.route = c->route_tunnel ? "tunnel" : "direct";
    f.decision = c->mdec == METRICS_D_INJECT ? "inject" : "allow";
    f.bytes_in = c->bytes_in;
    f.bytes_out = c->bytes_out;
    f.duration = conn_elapsed(&c->t_start);
    f.reason = reason;
    log_event(LOG_INFO, "tunnel", &f);
    c->graceful = true;
    conn_close(c, reason);
}

/*
 * Server-to-client bytes of a credentialed WebSocket go through its message masker
 * (wsmask.c): frames keep their headers, a secret cut across the frames of a message is
 * masked, and each message is delivered whole when it ends. 0, or -1 when the server broke the
 * protocol (nothing of that frame was passed on).
 */
static int tunnel_mask(struct conn *c, struct evbuffer *in, struct evbuffer *out)
{
    while (evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;

        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 ||
            wsmask_feed(c->wsm, v.iov_base, v.iov_len, out) < 0)
            return -1;
        evbuffer_drain(in, v.iov_len);
    }
    return 0;
}

/* Pending output of one side (0 once that side is gone). */
static size_t tunnel_out(const struct conn_end *e)
{
    return e->bev != NULL ? evbuffer_get_length(bufferevent_get_output(e->bev)) : 0;
}

/* Stops reading both sides; the tunnel ends once what is queued for either side is out. */
static void tunnel_wind_down(struct conn *c, const char *reason)
{
    c->tunnel_eof = true;
    bufferevent_disable(c->client.bev, EV_READ);
    if (c->upstream.bev != NULL)
        bufferevent_disable(c->upstream.bev, EV_READ);
    if (tunnel_out(&c->client) == 0 && tunnel_out(&c->upstream) == 0)
        tunnel_finish(c, reason);
}

/*
 * The server of a credentialed WebSocket broke the protocol (or went away inside a message):
 * the client gets the frames begun completed with '*' and a 1002 close, the upstream is cut.
 */
static void tunnel_ws_fail(struct conn *c)
{
    conn_log(c, LOG_INFO, "websocket_closed", "upstream_protocol", NULL);
    if (wsmask_fail(c->wsm, bufferevent_get_output(c->client.bev)) < 0) {
        tunnel_finish(c, "tunnel_error");
        return;
    }
    conn_drop_upstream(c, true);
    tunnel_wind_down(c, "websocket_protocol");
}

static void tunnel_read_cb(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct conn_end *dst = other_end(c, bev);
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t n = evbuffer_get_length(in);

    conn_enter(c);
    if (c->tunnel_eof && dst->bev == NULL) {
        evbuffer_drain(in, n); /* winding down: the other side is gone */
        goto out;
    }
    if (bev == c->client.bev)
        c->bytes_in += (int64_t)n;
    else
        c->bytes_out += (int64_t)n;
    if (c->wsm != NULL && bev == c->upstream.bev) {
        if (tunnel_mask(c, in, bufferevent_get_output(dst->bev)) < 0) {
            tunnel_ws_fail(c);
            goto out;
        }
    } else {
        evbuffer_add_buffer(bufferevent_get_output(dst->bev), in);
    }
    if (evbuffer_get_length(bufferevent_get_output(dst->bev)) >= VG_CONN_OUT_CAP) {
        /* backpressure: stop reading this side until the other one drains */
        this_end(c, bev)->paused = true;
        bufferevent_disable(bev, EV_READ);
        bufferevent_setwatermark(dst->bev, EV_WRITE, VG_CONN_OUT_CAP / 2, 0);
    }
out:
    conn_leave(c);
}

static void tunnel_write_cb(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct conn_end *src = other_end(c, bev);

    conn_enter(c);
    if (src->paused && src->bev != NULL) {
        src->paused = false;
        bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
        bufferevent_enable(src->bev, EV_READ);
    }
    if (c->tunnel_eof && tunnel_out(&c->client) == 0 && tunnel_out(&c->upstream) == 0)
        tunnel_finish(c, "tunnel_closed");
    conn_leave(c);
}

static void tunnel_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;

    conn_enter(c);
    if (what & BEV_EVENT_EOF) {
        /* pass on what is left, then end once the other side has it all */
        tunnel_read_cb(bev, arg);
        if (c->state == CONN_S_CLOSED)
            goto out;
        if (c->wsm != NULL && bev == c->upstream.bev && wsmask_in_message(c->wsm)) {
            /* the server went away inside a frame or message: what is held never leaves */
            tunnel_ws_fail(c);
            goto out;
        }
        tunnel_wind_down(c, "tunnel_closed");
    } else {
        tunnel_finish(c, (what & BEV_EVENT_TIMEOUT) ? "tunnel_idle" : "tunnel_error");
    }
out:
    conn_leave(c);
}

static void tunnel_up_ready(void *arg, struct bufferevent *bev, enum upstream_err err,
                            bool route_tunnel)
{
    struct conn *c = arg;

    conn_enter(c);
    c->upreq = NULL;
    if (c->state != CONN_S_TUNNEL_PEEK || bev == NULL) {
        if (bev != NULL)
            bufferevent_free(bev);
        else if (c->state == CONN_S_TUNNEL_PEEK) {
            /* the 200 is out and the client speaks TLS: closing is the only answer left */
            metrics_upstream_error(c->w->id, conn_upstream_metric(err));
            if (err == UPSTREAM_ERR_PROHIBITED)
                conn_record_refusal(c, c->host);
            conn_log(c, LOG_INFO, "tunnel_refused", upstream_err_type(err), NULL);
            conn_close(c, "tunnel_upstream");
        }
        goto out;
    }
    c->upstream.bev = bev;
    c->route_tunnel = route_tunnel;
    c->mdec = METRICS_D_ALLOW;
    audit_route(c->w->sh->audit, c->w->id, c->host,
                route_tunnel ? AUDIT_ROUTE_TUNNEL : AUDIT_ROUTE_DIRECT);
    metrics_request(c->w->id, METRICS_D_ALLOW, 200, conn_elapsed(&c->t_start));
    conn_tunnel_start(c); /* the ClientHello and whatever followed it go first */
out:
    conn_leave(c);
}

/*
 * Splices the client and the upstream byte for byte (a CONNECT tunnel, or a WebSocket after
 * 101), starting with whatever either side has buffered; backpressure as in RELAY; each side
 * idles out after CONN_T_BODY_IDLE.
 */
void conn_tunnel_start(struct conn *c)
{
    struct timeval idle = {CONN_T_BODY_IDLE, 0};
    struct bufferevent *bevs[2] = {c->client.bev, c->upstream.bev};

    conn_set_state(c, CONN_S_TUNNEL);
    evtimer_del(c->timer);
    c->client.paused = c->upstream.paused = false;
    for (int i = 0; i < 2; i++) {
        bufferevent_setcb(bevs[i], tunnel_read_cb, tunnel_write_cb, tunnel_event_cb, c);
        bufferevent_set_timeouts(bevs[i], &idle, &idle);
        bufferevent_setwatermark(bevs[i], EV_READ, 0, VG_CONN_IN_MAX);
        bufferevent_setwatermark(bevs[i], EV_WRITE, 0, 0);
        bufferevent_enable(bevs[i], EV_READ | EV_WRITE);
    }
    tunnel_read_cb(c->client.bev, c);
    if (c->state == CONN_S_TUNNEL)
        tunnel_read_cb(c->upstream.bev, c);
}

/*
 * Reads the ClientHello of a tunnelled CONNECT and checks its SNI against the CONNECT host
 * before anything is relayed. The hello waits in the client's input (bounded by its read
 * watermark); it is forwarded unchanged once the upstream is connected.
 */
void conn_proxy_peek(struct conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->client.bev);
    size_t len = evbuffer_get_length(in), need, n;
    const unsigned char *p, *name = NULL;
    char host[HOSTNAME_BUFSZ];

    if (c->upreq != NULL || len < 5)
        return;
    p = evbuffer_pullup(in, 5);
    need = 5 + (((size_t)p[3] << 8) | p[4]);
    if (p[0] != 0x16 || need > PROXY_HELLO_MAX) {
        conn_log(c, LOG_INFO, "tunnel_refused", "not_tls", NULL);
        conn_close(c, "tunnel_not_tls");
        return;
    }
    if (len < need)
        return;
    p = evbuffer_pullup(in, (ev_ssize_t)need);
    n = tls_sni_from_client_hello(p + 5, need - 5, &name);
    if (n == 0 || hostname_normalize((const char *)name, n, host, sizeof(host)) < 0 ||
        strcmp(host, c->host) != 0) {
        /* a protocol error (SPEC §4): logged, not a policy refusal */
        conn_log(c, LOG_WARN, "tunnel_refused", "sni_not_connect_host", NULL);
        conn_close(c, "tunnel_sni_mismatch");
        return;
    }
    c->client.paused = true; /* nothing more until the upstream is there */
    conn_update_reading(c);
    c->upreq = upstream_get(c->w->up, c->host, CONN_HTTPS_PORT, false, tunnel_up_ready, c);
    if (c->upreq == NULL)
        conn_close(c, "tunnel_upstream");
}

/* ---- CONNECT ---------------------------------------------------------------------------- */

/*
 * TLS on the CONNECT tunnel. Normally the 200 is out and nothing else was read: the plain
 * bufferevent lets go of the descriptor and a socket-mode TLS bufferevent takes it (the fast
 * path of the TLS listener). If the client already sent bytes, or the 200 is still queued, a
 * filter over the plain bufferevent keeps them in order instead.
 */
static void proxy_intercept(struct conn *c)
{
    SSL *ssl = tls_server_ssl_new(c->w->ssl_ctx, c);
    struct bufferevent *plain = c->client.bev, *tb;
    evutil_socket_t fd = bufferevent_getfd(plain);

    if (ssl == NULL) {
        conn_close(c, "oom");
        return;
    }
    if (fd >= 0 && evbuffer_get_length(bufferevent_get_input(plain)) == 0 &&
        evbuffer_get_length(bufferevent_get_output(plain)) == 0) {
        bufferevent_setcb(plain, NULL, NULL, NULL, NULL);
        bufferevent_setfd(plain, -1); /* keeps the descriptor open on free */
        bufferevent_free(plain);
        c->client.bev = NULL;
        /* from here the bufferevent owns ssl and fd, even when its creation fails */
        tb = bufferevent_openssl_socket_new(c->w->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                            BEV_OPT_CLOSE_ON_FREE);
    } else {
        tb = bufferevent_openssl_filter_new(c->w->base, plain, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                            BEV_OPT_CLOSE_ON_FREE);
        if (tb == NULL)
            SSL_free(ssl);
    }
    if (tb == NULL) {
        conn_close(c, "oom");
        return;
    }
    c->client.bev = tb; /* owns the plain one (or its descriptor) now */
    bufferevent_openssl_set_allow_dirty_shutdown(tb, 1);
    conn_client_setcb(c);
    bufferevent_setwatermark(tb, EV_READ, 0, VG_CONN_IN_MAX);
    c->tls = true;
    c->default_port = CONN_HTTPS_PORT;
    conn_set_state(c, CONN_S_TLS_ACCEPT);
    conn_arm(c, CONN_T_HANDSHAKE);
    bufferevent_enable(tb, EV_READ | EV_WRITE);
}

void conn_proxy_connect(struct conn *c)
{
    struct http_head *h = &c->req->head;
    struct policy_decision dec;
    int port = 0;

    c->mdec = METRICS_D_ERROR;
    if (http1_split_authority(h->target, h->target_len, c->host, sizeof(c->host), &port) < 0 ||
        port == 0) {
        c->host[0] = '\0';
        conn_respond_error(c, 400, "http_request_error", "malformed CONNECT target", "connect");
        return;
    }
    if (port != CONN_HTTPS_PORT && port != CONN_HTTP_PORT) {
        c->mdec = METRICS_D_BLOCK;
        conn_record_refusal(c, c->host);
        conn_respond_error(c, 403, "http_request_denied", "CONNECT port not allowed",
                           "connect_port");
        return;
    }
    if (conn_decide(c, &dec) < 0)
        return;
    evbuffer_add(c->client.stage, established, sizeof(established) - 1);
    conn_push(&c->client);
    c->host_fixed = true;
    c->default_port = port;
    conn_log(c, LOG_DEBUG, "connect", port == CONN_HTTP_PORT ? "plain" : "tls", NULL);
    if (port == CONN_HTTP_PORT) {
        /* plain HTTP for the CONNECT host, on this connection */
        conn_begin(c);
    } else if (c->w->sh->mode == POLICY_MODE_DEFAULT && dec.verdict == POLICY_ALLOW &&
               !dec.designated) {
        /* default routing: not ours to intercept (the CA cannot sign for it); tunnel it */
        conn_set_state(c, CONN_S_TUNNEL_PEEK);
        conn_arm(c, PROXY_T_PEEK);
        conn_update_reading(c);
        conn_proxy_peek(c);
    } else {
        proxy_intercept(c);
    }
}
