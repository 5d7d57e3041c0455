/*
 * tunnel.c - the byte splice of CONNECT tunnels and WebSockets (see tunnel.h).
 *
 * Guarantees: bytes go through in order, each side's output capped at VG_CONN_OUT_CAP (past it
 * the other side is not read until half of it drained); an EOF on one side passes on what is
 * left and the tunnel ends once both outputs are empty (FIN, not RST); each side idles out after
 * TUNNEL_T_IDLE. A credentialed WebSocket's server bytes reach the client only through its
 * masker; a server that breaks the protocol gets the client a 1002 close and is cut.
 */
#include "proxy/tunnel.h"
#include "audit/log.h"
#include "common/caps.h"
#include "common/defer.h"
#include "common/hostname.h"
#include "proxy/bevio.h"
#include "proxy/listen.h"
#include "proxy/worker.h"
#include "mask/wsmask.h"

#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>

#define TUNNEL_T_IDLE 300

enum tunnel_side { TUNNEL_CLIENT = 0, TUNNEL_UP = 1 };

struct tunnel {
    struct worker_link link;
    struct worker *w;
    struct bufferevent *bev[2];
    bool paused[2];     /* reading stopped: the other side's output is over its cap */
    struct wsmask *wsm; /* a credentialed WebSocket: the server side's masker */
    bool winding_down;  /* one side closed: flushing the other */
    struct defer defer; /* callbacks on the stack; freed at depth 0 after tunnel_close */
    uint64_t id;
    char client_addr[64];
    const struct listen_addr *la;
    char host[HOSTNAME_BUFSZ];
    bool route_tunnel, inject;
    int64_t bytes[2]; /* read from each side */
    struct timespec t_start;
};

static double tunnel_elapsed(const struct timespec *t0)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void tunnel_free(struct tunnel *t)
{
    for (int i = 0; i < 2; i++) {
        if (t->bev[i] != NULL) {
            bufferevent_setcb(t->bev[i], NULL, NULL, NULL, NULL);
            bufferevent_free(t->bev[i]);
        }
    }
    wsmask_free(&t->wsm);
    free(t);
}

/* The only teardown: the log line, both sockets closed (FIN), the struct freed now or when the
 * outermost callback on the stack returns. */
static void tunnel_close(struct tunnel *t, const char *reason)
{
    struct log_fields f = LOG_FIELDS_INIT;
    bool now;

    if (defer_freed(&t->defer))
        return;
    now = defer_free(&t->defer); /* closed from here on, for whatever runs below */
    f.conn = t->id;
    f.client = t->client_addr;
    f.listener = t->la->label;
    f.host = t->host;
    f.route = t->route_tunnel ? "tunnel" : "direct";
    f.decision = t->inject ? "inject" : "allow";
    f.bytes_in = t->bytes[TUNNEL_CLIENT];
    f.bytes_out = t->bytes[TUNNEL_UP];
    f.duration = tunnel_elapsed(&t->t_start);
    f.reason = reason;
    log_event(LOG_INFO, "tunnel", &f);
    for (int i = 0; i < 2; i++) {
        if (t->bev[i] != NULL)
            bufferevent_disable(t->bev[i], EV_READ | EV_WRITE);
    }
    worker_detach(t->w, &t->link);
    if (now)
        tunnel_free(t);
}

static void tunnel_enter(struct tunnel *t)
{
    defer_enter(&t->defer);
}

static void tunnel_leave(struct tunnel *t)
{
    if (defer_leave(&t->defer))
        tunnel_free(t);
}

static enum tunnel_side side_of(const struct tunnel *t, const struct bufferevent *bev)
{
    return bev == t->bev[TUNNEL_CLIENT] ? TUNNEL_CLIENT : TUNNEL_UP;
}

/* Pending output of one side (0 once that side is gone). */
static size_t tunnel_out(const struct tunnel *t, enum tunnel_side s)
{
    return t->bev[s] != NULL ? evbuffer_get_length(bufferevent_get_output(t->bev[s])) : 0;
}

/* Stops reading both sides; the tunnel ends once what is queued for either side is out. */
static void tunnel_wind_down(struct tunnel *t, const char *reason)
{
    t->winding_down = true;
    for (int i = 0; i < 2; i++) {
        if (t->bev[i] != NULL)
            bufferevent_disable(t->bev[i], EV_READ);
    }
    if (tunnel_out(t, TUNNEL_CLIENT) == 0 && tunnel_out(t, TUNNEL_UP) == 0)
        tunnel_close(t, reason);
}

/* Cuts the upstream at once (RST): nothing more of it may reach the client. */
static void tunnel_cut_upstream(struct tunnel *t)
{
    struct bufferevent *up = t->bev[TUNNEL_UP];
    evutil_socket_t fd;

    if (up == NULL)
        return;
    fd = bufferevent_getfd(up);
    if (fd >= 0) {
        struct linger lg = {1, 0};

        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    bufferevent_setcb(up, NULL, NULL, NULL, NULL);
    bufferevent_free(up);
    t->bev[TUNNEL_UP] = NULL;
}

/*
 * The server of a credentialed WebSocket broke the protocol (or went away inside a message):
 * the client gets the frames begun completed with '*' and a 1002 close, the upstream is cut.
 */
static void tunnel_ws_fail(struct tunnel *t)
{
    struct log_fields f = LOG_FIELDS_INIT;

    f.conn = t->id;
    f.host = t->host;
    f.reason = "upstream_protocol";
    log_event(LOG_INFO, "websocket_closed", &f);
    tunnel_cut_upstream(t);
    if (wsmask_fail(t->wsm, bufferevent_get_output(t->bev[TUNNEL_CLIENT])) < 0) {
        tunnel_close(t, "tunnel_error");
        return;
    }
    tunnel_wind_down(t, "websocket_protocol");
}

/* Server-to-client bytes of a credentialed WebSocket, through its masker. 0 or -1. */
static int tunnel_mask(struct tunnel *t, struct evbuffer *in, struct evbuffer *out)
{
    while (evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;

        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 ||
            wsmask_feed(t->wsm, v.iov_base, v.iov_len, out) < 0)
            return -1;
        evbuffer_drain(in, v.iov_len);
    }
    return 0;
}

static void tunnel_read_cb(struct bufferevent *bev, void *arg)
{
    struct tunnel *t = arg;
    enum tunnel_side s = side_of(t, bev), o = s == TUNNEL_CLIENT ? TUNNEL_UP : TUNNEL_CLIENT;
    struct evbuffer *in = bufferevent_get_input(bev), *out;
    size_t n;

    tunnel_enter(t);
    bevio_pull(bev);
    n = evbuffer_get_length(in);
    if (t->bev[o] == NULL) {
        evbuffer_drain(in, n); /* winding down: the other side is gone */
        goto out;
    }
    out = bufferevent_get_output(t->bev[o]);
    t->bytes[s] += (int64_t)n;
    if (t->wsm != NULL && s == TUNNEL_UP) {
        if (tunnel_mask(t, in, out) < 0) {
            tunnel_ws_fail(t);
            goto out;
        }
    } else {
        evbuffer_add_buffer(out, in);
    }
    if (evbuffer_get_length(out) >= VG_CONN_OUT_CAP) {
        /* backpressure: stop reading this side until the other one drains */
        t->paused[s] = true;
        bufferevent_disable(bev, EV_READ);
        bufferevent_setwatermark(t->bev[o], EV_WRITE, VG_CONN_OUT_CAP / 2, 0);
    }
out:
    tunnel_leave(t);
}

static void tunnel_write_cb(struct bufferevent *bev, void *arg)
{
    struct tunnel *t = arg;
    enum tunnel_side s = side_of(t, bev), o = s == TUNNEL_CLIENT ? TUNNEL_UP : TUNNEL_CLIENT;

    tunnel_enter(t);
    if (t->paused[o] && t->bev[o] != NULL) {
        t->paused[o] = false;
        bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
        if (!t->winding_down)
            bufferevent_enable(t->bev[o], EV_READ);
    }
    if (t->winding_down && tunnel_out(t, TUNNEL_CLIENT) == 0 && tunnel_out(t, TUNNEL_UP) == 0)
        tunnel_close(t, "tunnel_closed");
    tunnel_leave(t);
}

static void tunnel_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct tunnel *t = arg;

    tunnel_enter(t);
    if (what & BEV_EVENT_EOF) {
        /* pass on what is left, then end once the other side has it all */
        tunnel_read_cb(bev, arg);
        if (defer_freed(&t->defer))
            goto out;
        if (t->wsm != NULL && bev == t->bev[TUNNEL_UP] && wsmask_in_message(t->wsm)) {
            /* the server went away inside a frame or message: what is held never leaves */
            tunnel_ws_fail(t);
            goto out;
        }
        tunnel_wind_down(t, "tunnel_closed");
    } else {
        tunnel_close(t, (what & BEV_EVENT_TIMEOUT) ? "tunnel_idle" : "tunnel_error");
    }
out:
    tunnel_leave(t);
}

static void tunnel_drain(struct worker_link *l)
{
    (void)l; /* a tunnel has no request boundary: it goes on until it ends or the grace ends */
}

static void tunnel_abort(struct worker_link *l)
{
    tunnel_close((struct tunnel *)l, "shutdown");
}

static const struct worker_link_ops tunnel_link_ops = {tunnel_drain, tunnel_abort};

int tunnel_start(struct worker *w, struct worker_link *from, struct bufferevent *client,
                 struct bufferevent *up, struct wsmask *wsm, bool ws_fail,
                 const struct tunnel_info *info)
{
    struct timeval idle = {TUNNEL_T_IDLE, 0};
    struct tunnel *t = calloc(1, sizeof(*t));

    if (t == NULL) {
        bufferevent_free(client);
        bufferevent_free(up);
        wsmask_free(&wsm);
        return -1;
    }
    t->w = w;
    t->bev[TUNNEL_CLIENT] = client;
    t->bev[TUNNEL_UP] = up;
    t->wsm = wsm;
    t->id = info->id;
    snprintf(t->client_addr, sizeof(t->client_addr), "%s", info->client_addr);
    t->la = info->la;
    snprintf(t->host, sizeof(t->host), "%s", info->host);
    t->route_tunnel = info->route_tunnel;
    t->inject = info->inject;
    t->t_start = info->t_start;
    worker_replace(w, from, &t->link, &tunnel_link_ops);
    for (int i = 0; i < 2; i++) {
        bevio_release_always(t->bev[i]);
        bufferevent_setcb(t->bev[i], tunnel_read_cb, tunnel_write_cb, tunnel_event_cb, t);
        bufferevent_set_timeouts(t->bev[i], &idle, &idle);
        bufferevent_setwatermark(t->bev[i], EV_READ, 0, VG_CONN_IN_MAX);
        bufferevent_setwatermark(t->bev[i], EV_WRITE, 0, 0);
        bufferevent_enable(t->bev[i], EV_READ | EV_WRITE);
    }
    tunnel_enter(t);
    if (ws_fail && t->wsm != NULL) {
        /* refused from the start: no byte of the server's reaches the client */
        tunnel_cut_upstream(t);
        wsmask_close_frame(bufferevent_get_output(client), WSMASK_CLOSE_PROTOCOL);
        tunnel_wind_down(t, "websocket_extension");
    } else {
        tunnel_read_cb(t->bev[TUNNEL_CLIENT], t);
        if (!defer_freed(&t->defer))
            tunnel_read_cb(t->bev[TUNNEL_UP], t);
    }
    tunnel_leave(t);
    return 0;
}
