/*
 * proxyconn.c - CONNECT on the explicit-proxy listener (SPEC §1 "explicit proxy", §4), after
 * its exchange allowed it: the 200, then plain HTTP for the CONNECT host, TLS interception, or
 * a byte tunnel without interception.
 *
 * Guarantees:
 * - CONNECT to 443 is intercepted (TLS terminated by ingress.c with a leaf for the CONNECT
 *   host, whose SNI must be that host) - except in default routing for an allowed host the vault
 * does not designate, which is tunnelled byte for byte once the ClientHello's SNI was read and
 * found equal to the CONNECT host (else the tunnel is closed and the mismatch logged).
 * - CONNECT to 80 carries plain HTTP for the CONNECT host only (another Host is 421).
 * - A secret is only ever injected into an intercepted request, and sent over TLS to 443.
 */
#include "proxy/h1conn_int.h"
#include "audit/audit.h"
#include "common/caps.h"
#include "common/hostname.h"
#include "proxy/listen.h"
#include "proxy/metrics.h"
#include "proxy/tls.h"
#include "proxy/tunnel.h"
#include "proxy/upstream.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#define PROXY_HELLO_MAX  (16384 + 5)
#define PROXY_HTTPS_PORT 443
#define PROXY_HTTP_PORT  80

static const char established[] = "HTTP/1.1 200 Connection established\r\n\r\n";

static double proxy_elapsed(const struct timespec *t0)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ---- tunnel without interception ------------------------------------------------------- */

static void proxy_up_ready(void *arg, struct cio *up, enum upstream_err err, unsigned how)
{
    struct h1conn *c = arg;
    struct tunnel_info ti = {0};
    struct bufferevent *client, *bev;

    h1_enter(c);
    c->upreq = NULL;
    if (c->state != H1_S_PEEK || up == NULL) {
        if (up != NULL) {
            cio_free(&up);
        } else if (c->state == H1_S_PEEK) {
            /* the 200 is out and the client speaks TLS: closing is the only answer left */
            metrics_upstream_error(c->cc.w->id, metrics_upstream_kind(err));
            if (err == UPSTREAM_ERR_PROHIBITED)
                h1_record_refusal(c, c->cc.host);
            h1_log(c, LOG_INFO, "tunnel_refused", upstream_err_type(err), NULL);
            h1_close(c, "tunnel_upstream");
        }
        goto out;
    }
    audit_route(c->cc.w->sh->audit, c->cc.w->id, c->cc.host,
                (how & UPSTREAM_VIA_TUNNEL) ? AUDIT_ROUTE_TUNNEL : AUDIT_ROUTE_DIRECT);
    metrics_request(c->cc.w->id, METRICS_D_ALLOW, 200, proxy_elapsed(&c->t_req));
    ti.id = c->cc.id;
    ti.client_addr = c->cc.client_addr;
    ti.la = c->cc.la;
    ti.host = c->cc.host;
    ti.route_tunnel = (how & UPSTREAM_VIA_TUNNEL) != 0;
    ti.t_start = c->t_req;
    dlq_del(&c->timer);
    /* the tunnel's from here, as a bufferevent; the ClientHello and whatever followed it (in
     * its input) go first */
    client = cio_to_bufferevent(&c->io, 0);
    /* the upstream as a bufferevent too, with deferred callbacks as the tunnel had them */
    bev = cio_to_bufferevent(&up, BEV_OPT_DEFER_CALLBACKS);
    if (client == NULL || bev == NULL) {
        if (client != NULL)
            bufferevent_free(client);
        if (bev != NULL)
            bufferevent_free(bev);
        h1_close(c, "oom");
    } else if (tunnel_start(c->cc.w, &c->link, client, bev, NULL, false, &ti) < 0)
        h1_close(c, "oom");
    else
        h1_handover(c);
out:
    h1_leave(c);
}

/*
 * Reads the ClientHello of a tunnelled CONNECT and checks its SNI against the CONNECT host
 * before anything is relayed. The hello waits in the client's input (bounded by its read
 * watermark); it is forwarded unchanged once the upstream is connected.
 */
void proxy_peek(struct h1conn *c)
{
    struct evbuffer *in = cio_input(c->io);
    size_t len = in != NULL ? evbuffer_get_length(in) : 0, need, n;
    const unsigned char *p, *name = NULL;
    char host[HOSTNAME_BUFSZ];

    if (in == NULL) {
        h1_close(c, "oom");
        return;
    }
    if (c->upreq != NULL || len < 5)
        return;
    p = evbuffer_pullup(in, 5);
    need = 5 + (((size_t)p[3] << 8) | p[4]);
    if (p[0] != 0x16 || need > PROXY_HELLO_MAX) {
        h1_log(c, LOG_INFO, "tunnel_refused", "not_tls", NULL);
        h1_close(c, "tunnel_not_tls");
        return;
    }
    if (len < need)
        return;
    p = evbuffer_pullup(in, (ev_ssize_t)need);
    n = tls_sni_from_client_hello(p + 5, need - 5, &name);
    if (n == 0 || hostname_normalize((const char *)name, n, host, sizeof(host)) < 0 ||
        strcmp(host, c->cc.host) != 0) {
        /* a protocol error (SPEC §4): logged, not a policy refusal */
        h1_log(c, LOG_WARN, "tunnel_refused", "sni_not_connect_host", NULL);
        h1_close(c, "tunnel_sni_mismatch");
        return;
    }
    c->upreq =
        upstream_get(c->cc.w->up, c->cc.host, PROXY_HTTPS_PORT, false, false, proxy_up_ready, c);
    if (c->upreq == NULL) {
        h1_close(c, "tunnel_upstream");
        return;
    }
    h1_reading(c); /* nothing more until the upstream is there */
}

/* ---- interception ----------------------------------------------------------------------- */

/*
 * TLS on the CONNECT tunnel: the connection goes back to whoever started this transport (its
 * hook, ingress.c), which accepts TLS on it with the CONNECT host as the certificate's name and
 * starts the transport ALPN picks once the handshake is done. Without a hook it closes (fail
 * closed: nothing is relayed in the clear).
 */
static void proxy_intercept(struct h1conn *c)
{
    struct cio *plain = c->io;

    if (c->hooks == NULL || c->hooks->tls == NULL) {
        h1_close(c, "no_tls");
        return;
    }
    c->cc.tls = true;
    c->cc.default_port = PROXY_HTTPS_PORT;
    cio_setcb(plain, NULL, NULL, NULL, NULL);
    c->io = NULL; /* the hook's from here, even when it fails */
    if (c->hooks->tls(&c->link, &c->cc, plain) < 0)
        h1_close(c, "oom");
    else
        h1_handover(c);
}

/* ---- CONNECT allowed -------------------------------------------------------------------- */

void proxy_connected(struct h1conn *c)
{
    const char *host;
    int port;
    bool tunnel;

    exchange_connect_target(c->x, &host, &port, &tunnel);
    if (exch_conn_set_host(&c->cc, host) < 0) {
        exchange_free(&c->x);
        c->req = NULL;
        h1_close(c, "oom");
        return;
    }
    exchange_free(&c->x);
    c->req = NULL;
    evbuffer_add(c->stage, established, sizeof(established) - 1);
    h1_push(c);
    c->cc.host_fixed = true;
    c->cc.default_port = port;
    h1_log(c, LOG_DEBUG, "connect", port == PROXY_HTTP_PORT ? "plain" : "tls", NULL);
    if (port == PROXY_HTTP_PORT) {
        /* plain HTTP for the CONNECT host, on this connection */
        h1_begin(c);
    } else if (tunnel) {
        /* default routing: not ours to intercept (the CA cannot sign for it); tunnel it */
        h1_set_state(c, H1_S_PEEK);
        h1_arm(c, H1_T_PEEK);
        h1_reading(c);
        h1_schedule_input(c);
    } else {
        proxy_intercept(c);
    }
}
