/*
 * origin.c - getting one request's upstream (origin.h), and picking the adapter that speaks its
 * protocol: a stream on a pooled HTTP/2 connection with room, a place in the queue of an HTTP/2
 * connection being made, or a connection from upstream_get() (pooled or dialled, announced with
 * h2up_dial so that the requests coming meanwhile wait for it rather than dial too) whose ALPN
 * says h2 (origin_h2.c) or http/1.1 (origin_h1.c).
 *
 * Guarantees: cbs->ready runs exactly once unless the origin is cancelled first, and nothing of
 * a cancelled origin calls back; a dial this origin announced is always ended, so requests
 * queued on it never wait for a dial nobody makes.
 */
#include "proxy/origin.h"
#include "proxy/origin_int.h"
#include "proxy/h2up.h"

#include <string.h>

static void oup_placed(void *arg, enum h2up_placed p, enum upstream_err err);

static const struct h2up_ops up_h2_ops = {
    {origin_h2_on_head, origin_h2_on_body, origin_h2_on_done, origin_h2_on_trailers},
    origin_h2_after,
    origin_h2_more,
    oup_placed,
};

/* ---- while connecting: only cancel means anything ----------------------------------------- */

static int owait_request(struct origin *o, const struct http_head *h, enum http1_body body,
                         uint64_t len, bool sensitive)
{
    (void)o, (void)h, (void)body, (void)len, (void)sensitive;
    return -1; /* not connected: nothing can be sent */
}

static int owait_body(struct origin *o, const char *p, size_t n)
{
    (void)o, (void)p, (void)n;
    return -1;
}

static int owait_body_take(struct origin *o, struct evbuffer *buf)
{
    (void)o, (void)buf;
    return -1;
}

static int owait_body_end(struct origin *o)
{
    (void)o;
    return -1;
}

static void owait_nothing(struct origin *o)
{
    (void)o; /* nothing is read or written before the connection is there */
}

static void owait_cancel(struct origin *o, bool abort)
{
    struct origin_conn *c = (struct origin_conn *)o;

    (void)abort;
    if (c->upreq != NULL)
        upstream_cancel(&c->upreq);
    h2up_dial_end(&c->h2dial, H2UP_PLACED_RETRY, UPSTREAM_OK); /* those waiting dial anew */
    h2up_close(&c->h2s);                                       /* a queued stream leaves */
    origin_gone(c);
}

static struct bufferevent *owait_take(struct origin *o)
{
    owait_cancel(o, true);
    return NULL;
}

static void owait_release(struct origin *o, bool req_done)
{
    owait_cancel(o, !req_done);
}

static const struct origin_ops owait_ops = {
    owait_request, owait_body,    owait_body_take, owait_body_end, owait_nothing,
    owait_nothing, owait_nothing, owait_take,      owait_release,  owait_cancel,
};

/* ---- getting the connection --------------------------------------------------------------- */

static void oup_ready(struct origin_conn *c, enum origin_up up, enum upstream_err err)
{
    c->o.cbs->ready(c->o.arg, up, err);
}

static void oup_dialled(void *arg, struct cio *io, enum upstream_err err, unsigned how);

/* Dials (or takes a pooled connection) for this request alone. */
static void oup_dial(struct origin_conn *c)
{
    c->upreq = upstream_get(c->up, c->host, c->port, c->tls, c->retryable, oup_dialled, c);
    if (c->upreq == NULL) {
        h2up_dial_end(&c->h2dial, H2UP_PLACED_RETRY, UPSTREAM_OK);
        oup_ready(c, ORIGIN_UP_NO_DIAL, UPSTREAM_OK);
    }
}

/* The request's stream is open: HTTP/2 from now on. */
static void oup_opened(struct origin_conn *c)
{
    origin_h2_opened(c);
    oup_ready(c, ORIGIN_UP_OK, UPSTREAM_OK);
}

/* A stream on a pooled HTTP/2 connection with room, a place in the queue of one being made, or
 * a dial of its own, announced for others when it may turn out HTTP/2. */
static void oup_open(struct origin_conn *c)
{
    if (c->tls == UPSTREAM_TLS_H2) {
        enum h2up_how how = H2UP_NONE;

        c->h2s = h2up_open(c->w, c->host, c->port, &up_h2_ops, c, &how);
        if (how == H2UP_OPENED) {
            oup_opened(c);
            return;
        }
        if (how == H2UP_WAITING)
            return; /* oup_placed follows */
        /* a pooled connection of the key is one on which the server chose http/1.1: taking it
         * dials nothing that others could wait on */
        if (!upstream_pooled(c->up, c->host, c->port, c->tls))
            c->h2dial = h2up_dial(c->w, c->host, c->port);
    }
    oup_dial(c);
}

/* upstream_get()'s callback: the connection's ALPN picks the adapter. */
/* An HTTP/2 connection: h2up speaks through a bufferevent made from io (deferred callbacks,
 * as its writes from inside nghttp2's callbacks expect). */
static void oup_h2(struct origin_conn *c, struct cio *io, unsigned how)
{
    struct bufferevent *bev = cio_to_bufferevent(&io, BEV_OPT_DEFER_CALLBACKS);

    if (bev == NULL) {
        h2up_dial_end(&c->h2dial, H2UP_PLACED_RETRY, UPSTREAM_OK);
        oup_ready(c, ORIGIN_UP_NO_MEM, UPSTREAM_OK);
        return;
    }
    c->h2s = h2up_attach(c->w, &c->h2dial, c->host, c->port, bev, how & UPSTREAM_VIA_TUNNEL,
                         &up_h2_ops, c);
    if (c->h2s == NULL)
        oup_ready(c, ORIGIN_UP_NO_MEM, UPSTREAM_OK);
    else
        oup_opened(c);
}

static void oup_dialled(void *arg, struct cio *io, enum upstream_err err, unsigned how)
{
    struct origin_conn *c = arg;

    origin_enter(c);
    c->upreq = NULL;
    if (io == NULL) {
        /* the requests waiting for this dial get the same answer */
        h2up_dial_end(&c->h2dial, H2UP_PLACED_FAILED, err);
        oup_ready(c, ORIGIN_UP_FAILED, err);
    } else if (c->tls == UPSTREAM_TLS_H2 && upstream_alpn_h2(io)) {
        oup_h2(c, io, how);
    } else {
        h2up_dial_end(&c->h2dial, H2UP_PLACED_H1, UPSTREAM_OK); /* each waiting request dials */
        if (origin_h1_attach(c, io, how) < 0)
            oup_ready(c, ORIGIN_UP_NO_MEM, UPSTREAM_OK);
        else
            oup_ready(c, ORIGIN_UP_OK, UPSTREAM_OK);
    }
    origin_leave(c);
}

/* A request that waited for a connection being made learns its place. */
static void oup_placed(void *arg, enum h2up_placed p, enum upstream_err err)
{
    struct origin_conn *c = arg;

    origin_enter(c);
    if (p != H2UP_PLACED_OPEN)
        c->h2s = NULL; /* freed by h2up.c */
    switch (p) {
    case H2UP_PLACED_OPEN:
        oup_opened(c);
        break;
    case H2UP_PLACED_RETRY:
        oup_open(c);
        break;
    case H2UP_PLACED_H1:
        oup_dial(c);
        break;
    case H2UP_PLACED_FAILED:
        oup_ready(c, ORIGIN_UP_FAILED, err);
        break;
    }
    origin_leave(c);
}

static struct origin *oup_get(struct worker *w, const struct origin_want *want,
                              const struct origin_cbs *cbs, void *arg)
{
    struct origin_conn *c;
    size_t n = strlen(want->host);

    if (n >= sizeof(c->host) || (c = origin_spare_take(w)) == NULL)
        return NULL;
    memcpy(c->host, want->host, n + 1);
    c->o.ops = &owait_ops;
    c->o.cbs = cbs;
    c->o.arg = arg;
    c->w = w;
    c->port = want->port;
    c->tls = want->tls;
    c->retryable = want->retryable;
    c->up = want->up;
    c->body_idle = want->body_idle;
    return &c->o;
}

static void oup_start(struct origin *o)
{
    struct origin_conn *c = (struct origin_conn *)o;

    origin_enter(c);
    oup_open(c);
    origin_leave(c);
}

const struct origin_source origin_upstreams = {oup_get, oup_start};
