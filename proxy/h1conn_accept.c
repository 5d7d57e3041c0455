/*
 * h1conn_accept.c - the HTTP/1.1 transport's start (see h1conn.h): accepting a socket of a
 * listener (plain, proxy or TLS), joining the worker, and the ClientHello decision of a TLS
 * accept (the SNI, the leaf).
 *
 * Guarantees:
 * - A connection is joined to its worker and has its timer before anything can close it; a
 *   failure closes the socket and leaves nothing behind.
 * - No certificate is minted for a name the CA may not sign, for a connection without SNI, or,
 *   on an intercepted CONNECT, for a name other than the CONNECT host.
 */
#include "proxy/h1conn.h"
#include "proxy/h1conn_int.h"
#include "ca/ca.h"
#include "ca/certcache.h"
#include "common/hostname.h"
#include "proxy/listen.h"
#include "proxy/tls.h"

#include <arpa/inet.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>

/* The one name vaultgate answers itself (SPEC §9): no policy decides its certificate. */
#define H1_PROBE_HOST "probe.vaultgate.invalid"
#define H1_HTTPS_PORT 443
#define H1_HTTP_PORT  80

/* ---- accept and ClientHello ------------------------------------------------------------- */

/* The host a no-SNI refusal is recorded under: "(no-sni)", or the original destination. */
static void h1_nosni_host(struct h1conn *c, char *out, size_t outsz)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    evutil_socket_t fd = bufferevent_getfd(c->io.bev);

    snprintf(out, outsz, "(no-sni)");
    if (c->cc.w->sh->mode != POLICY_MODE_CATCHALL || fd < 0)
        return;
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &len) == 0 && ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)outsz);
}

int h1conn_client_hello(struct h1conn *c, const char *host, struct tls_leaf *out, int *alert)
{
    struct worker_shared *sh = c->cc.w->sh;
    char err[256], nosni[HOSTNAME_BUFSZ];
    X509 *cert;

    if (host == NULL && c->cc.proxy)
        host = c->cc.host; /* intercepted CONNECT without SNI: the CONNECT host names it */
    if (host == NULL) {
        h1_nosni_host(c, nosni, sizeof(nosni));
        snprintf(c->cc.host, sizeof(c->cc.host), "%s", nosni);
        h1_record_refusal(c, nosni);
        h1_log(c, LOG_INFO, "tls_refused", "no_sni", NULL);
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return -1;
    }
    if (c->cc.proxy && strcmp(host, c->cc.host) != 0) {
        /* intercepted CONNECT: the certificate is for the CONNECT host, and the SNI must be it */
        h1_log(c, LOG_INFO, "tls_refused", "sni_not_connect_host", NULL);
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return -1;
    }
    if (host != c->cc.host)
        snprintf(c->cc.host, sizeof(c->cc.host), "%s", host);
    /* the probe name is answered by vaultgate itself; under .invalid it impersonates nothing */
    if (sh->mode == POLICY_MODE_DEFAULT && !ca_permits(sh->ca, host) &&
        strcmp(host, H1_PROBE_HOST) != 0) {
        /* no certificate this CA can sign would verify: refuse plainly instead of minting */
        h1_log(c, LOG_WARN, "tls_refused", "host_outside_ca", NULL);
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return -1;
    }
    cert = certcache_get(sh->certs, host, err, sizeof(err));
    if (cert == NULL) {
        h1_log(c, LOG_ERROR, "tls_refused", "leaf_mint", err);
        *alert = SSL_AD_INTERNAL_ERROR;
        return -1;
    }
    out->cert = cert;
    out->key = ca_leaf_key(sh->ca);
    out->chain = ca_intermediate(sh->ca);
    return 0;
}

static void h1_addr_text(const struct sockaddr *sa, char *out, size_t outsz)
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

/* A new connection on w: joined to the worker, its buffers and timer made. NULL (fd closed). */
static struct h1conn *h1_new(struct worker *w, const struct listen_addr *la, evutil_socket_t fd,
                             const struct sockaddr *sa)
{
    struct h1conn *c = calloc(1, sizeof(*c));
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (c == NULL) {
        evutil_closesocket(fd);
        log_eventf(LOG_ERROR, "accept", "oom", "out of memory");
        return NULL;
    }
    c->cc.w = w;
    c->cc.la = la;
    c->cc.proxy = la->kind == LISTEN_PROXY;
    c->cc.proto = "http/1.1";
    c->cc.default_port = la->kind == LISTEN_HTTPS ? H1_HTTPS_PORT : H1_HTTP_PORT;
    h1_addr_text(sa, c->cc.client_addr, sizeof(c->cc.client_addr));
    if (h1_attach(c) < 0) {
        evutil_closesocket(fd);
        h1_close(c, "oom");
        return NULL;
    }
    return c;
}

/* The socket of a plain-HTTP or proxy listener; then the first request may start at once. */
static int h1_accept_plain(struct h1conn *c, evutil_socket_t fd)
{
    c->io.bev = bufferevent_socket_new(c->cc.w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (c->io.bev == NULL) {
        evutil_closesocket(fd);
        h1_close(c, "oom");
        return -1;
    }
    h1_setcb(c);
    bufferevent_setwatermark(c->io.bev, EV_READ, 0, VG_CONN_IN_MAX);
    bufferevent_enable(c->io.bev, EV_READ | EV_WRITE);
    return 0;
}

/* The TLS accept of a TLS listener's socket. */
static int h1_accept_tls(struct h1conn *c, evutil_socket_t fd)
{
    SSL *ssl = tls_server_ssl_new(c->cc.w->ssl_ctx, c);

    c->cc.tls = c->cc.host_fixed = true;
    if (ssl == NULL) {
        evutil_closesocket(fd);
        h1_close(c, "oom");
        return -1;
    }
    /* from here the bufferevent owns ssl and fd, even when its creation fails */
    c->io.bev = bufferevent_openssl_socket_new(c->cc.w->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                               BEV_OPT_CLOSE_ON_FREE);
    if (c->io.bev == NULL) {
        h1_close(c, "oom");
        return -1;
    }
    bufferevent_openssl_set_allow_dirty_shutdown(c->io.bev, 1);
    h1_setcb(c);
    bufferevent_setwatermark(c->io.bev, EV_READ, 0, VG_CONN_IN_MAX);
    h1_set_state(c, H1_S_TLS_ACCEPT);
    h1_arm(c, H1_T(c, VG_T_HANDSHAKE));
    bufferevent_enable(c->io.bev, EV_READ | EV_WRITE);
    return 0;
}

/* Accepts fd on la; busy: answer 503 and close. */
static void h1_accept(struct worker *w, const struct listen_addr *la, evutil_socket_t fd,
                      const struct sockaddr *sa, bool busy)
{
    struct h1conn *c = h1_new(w, la, fd, sa);

    if (c == NULL)
        return;
    c->busy = busy;
    if (la->kind == LISTEN_HTTPS) {
        h1_accept_tls(c, fd);
        return;
    }
    if (h1_accept_plain(c, fd) < 0)
        return;
    h1_enter(c);
    if (busy)
        h1_busy(c);
    else
        h1_begin(c);
    h1_leave(c);
}

void h1conn_accept(struct worker *w, const struct listen_addr *la, evutil_socket_t fd,
                   const struct sockaddr *sa, int salen)
{
    (void)salen;
    h1_accept(w, la, fd, sa, false);
}

void h1conn_accept_busy(struct worker *w, const struct listen_addr *la, evutil_socket_t fd,
                        const struct sockaddr *sa, int salen)
{
    (void)salen;
    h1_accept(w, la, fd, sa, true);
}
