/*
 * upstream_tunnel.c - upstream connections through --upstream-proxy (route `tunnel`): the
 * CONNECT request to the proxy and its answer, on the request's own socket, before TLS (or
 * the plain connection) starts on the tunnel. Part of upstream.c's request state machine.
 *
 * Guarantees: the proxy's answer head is bounded (UPSTREAM_PROXY_HEAD_MAX) and must be a 2xx;
 * no byte after it is lost or taken as HTTP; every step keeps the request's deadline.
 */
#include "proxy/upstream.h"
#include "audit/log.h"
#include "proxy/upstream_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/event.h>

void upstream_proxy_send(struct upstream_req *r)
{
    ssize_t n;

    if (r->state != RQ_PROXY_SEND) {
        char hp[HOSTNAME_BUFSZ + 8];
        bool v6 = r->kind == HOSTNAME_IPV6;

        snprintf(hp, sizeof(hp), "%s%s%s:%d", v6 ? "[" : "", r->host, v6 ? "]" : "", r->port);
        r->pbuf = malloc(UPSTREAM_PROXY_HEAD_MAX);
        if (r->pbuf == NULL) {
            upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
            return;
        }
        r->plen = (size_t)snprintf(r->pbuf, UPSTREAM_PROXY_HEAD_MAX,
                                   "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", hp, hp);
        r->pdone = 0;
        r->state = RQ_PROXY_SEND;
    }
    while (r->pdone < r->plen) {
        n = send(r->fd, r->pbuf + r->pdone, r->plen - r->pdone, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (n <= 0) {
            upstream_finish(r, NULL, UPSTREAM_ERR_PROXY);
            return;
        }
        r->pdone += (size_t)n;
    }
    if (r->pdone < r->plen) {
        if (upstream_wait_fd(r, EV_WRITE, &r->ctx->connect_tv) != 0)
            upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
        return;
    }
    r->state = RQ_PROXY_READ;
    r->plen = 0;
    if (upstream_wait_fd(r, EV_READ, &r->ctx->connect_tv) != 0)
        upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
}

/* 1 if the head in buf is "HTTP/1.x 2xx ...". */
static int proxy_status_ok(const char *buf, size_t len)
{
    if (len < 13 || memcmp(buf, "HTTP/1.", 7) != 0 || (buf[7] != '0' && buf[7] != '1') ||
        buf[8] != ' ')
        return 0;
    return buf[9] == '2' && buf[10] >= '0' && buf[10] <= '9' && buf[11] >= '0' && buf[11] <= '9' &&
           (buf[12] == ' ' || buf[12] == '\r');
}

/* Offset just past "\r\n\r\n" in buf[0..len), searching from `from`, or 0. */
static size_t head_end(const char *buf, size_t len, size_t from)
{
    for (size_t i = from; i + 4 <= len; i++) {
        if (memcmp(buf + i, "\r\n\r\n", 4) == 0)
            return i + 4;
    }
    return 0;
}

/*
 * Reads the proxy's answer without reading past its head: the bytes after it belong to the
 * TLS handshake. Peeks, then consumes exactly up to the end of the head.
 */
void upstream_proxy_read(struct upstream_req *r)
{
    size_t room = UPSTREAM_PROXY_HEAD_MAX - r->plen, from, end;
    ssize_t n = recv(r->fd, r->pbuf + r->plen, room, MSG_PEEK);

    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (upstream_wait_fd(r, EV_READ, &r->ctx->connect_tv) != 0)
            upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
        return;
    }
    if (n <= 0) {
        upstream_finish(r, NULL, UPSTREAM_ERR_PROXY);
        return;
    }
    from = r->plen > 3 ? r->plen - 3 : 0;
    end = head_end(r->pbuf, r->plen + (size_t)n, from);
    if (end != 0)
        n = (ssize_t)(end - r->plen);
    if (recv(r->fd, r->pbuf + r->plen, (size_t)n, 0) != n) {
        upstream_finish(r, NULL, UPSTREAM_ERR_PROXY);
        return;
    }
    r->plen += (size_t)n;
    if (end == 0) {
        if (r->plen >= UPSTREAM_PROXY_HEAD_MAX)
            upstream_finish(r, NULL, UPSTREAM_ERR_PROXY);
        else if (upstream_wait_fd(r, EV_READ, &r->ctx->connect_tv) != 0)
            upstream_finish(r, NULL, UPSTREAM_ERR_INTERNAL);
        return;
    }
    if (!proxy_status_ok(r->pbuf, r->plen)) {
        upstream_finish(r, NULL, UPSTREAM_ERR_PROXY);
        return;
    }
    event_free(r->io);
    r->io = NULL;
    free(r->pbuf);
    r->pbuf = NULL;
    upstream_connected(r);
}
