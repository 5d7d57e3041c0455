/*
 * origin_h2.c - the HTTP/2 adapter of origin.h: one request as a stream of a pooled connection
 * of h2up.c. The head goes out as HEADERS (Host as :authority), the body as DATA under the
 * stream's flow control, and the response comes through the same callbacks the HTTP/1.1 parser
 * calls. DATA goes back to the server's window only on resume, so a slow client stalls only its
 * own stream.
 *
 * Guarantees: a stream that ends before its response is complete reports failed, with
 * ORIGIN_RETRY_ANY only when the server refused it unprocessed; release and cancel reset a
 * stream whose request or response is incomplete (h2up_close).
 */
#include "proxy/origin_int.h"
#include "proxy/h2up.h"

static struct origin_conn *oh2(struct origin *o)
{
    return (struct origin_conn *)o;
}

/* ---- the stream's callbacks (h2up_ops of origin.c) ---------------------------------------- */

int origin_h2_on_head(void *arg, struct http1_msg *msg)
{
    struct origin_conn *c = arg;

    return c->o.cbs->resp.on_head(c->o.arg, msg);
}

int origin_h2_on_body(void *arg, const char *data, size_t len)
{
    struct origin_conn *c = arg;

    return c->o.cbs->resp.on_body(c->o.arg, data, len);
}

int origin_h2_on_trailers(void *arg, struct http_head *t)
{
    struct origin_conn *c = arg;

    return c->o.cbs->resp.on_trailers(c->o.arg, t);
}

int origin_h2_on_done(void *arg)
{
    struct origin_conn *c = arg;
    int rc = c->o.cbs->resp.on_done(c->o.arg);

    c->done = rc >= 0;
    return rc;
}

/* After a batch of the stream's frames: the exchange's after, or failed when the stream ended
 * (reset, or its connection gone) before the response did. */
void origin_h2_after(void *arg, bool err)
{
    struct origin_conn *c = arg;

    origin_enter(c);
    if (err && !c->done)
        c->o.cbs->failed(c->o.arg, ORIGIN_FAIL_RESET,
                         h2up_refused(c->h2s) ? ORIGIN_RETRY_ANY : ORIGIN_RETRY_NO, NULL);
    else
        c->o.cbs->after(c->o.arg);
    origin_leave(c);
}

void origin_h2_more(void *arg)
{
    struct origin_conn *c = arg;

    origin_enter(c);
    if (c->body_paused) {
        c->body_paused = false;
        c->o.cbs->more(c->o.arg);
    }
    origin_leave(c);
}

/* ---- the interface ------------------------------------------------------------------------ */

static int oh2_request(struct origin *o, const struct http_head *h, enum http1_body body,
                       uint64_t len, bool sensitive)
{
    return h2up_request(oh2(o)->h2s, h, body == HTTP1_BODY_NONE, body == HTTP1_BODY_LENGTH, len,
                        sensitive);
}

static int oh2_body(struct origin *o, const char *p, size_t n)
{
    struct origin_conn *c = oh2(o);
    int rc = h2up_body(c->h2s, p, n);

    c->body_paused = rc == 1;
    return rc;
}

static int oh2_body_take(struct origin *o, struct evbuffer *buf)
{
    return h2up_body_take(oh2(o)->h2s, buf);
}

static int oh2_body_end(struct origin *o)
{
    return h2up_body_end(oh2(o)->h2s);
}

static void oh2_flush(struct origin *o)
{
    (void)o; /* h2up.c sends at the end of each batch of its own */
}

static void oh2_resume(struct origin *o)
{
    h2up_consume(oh2(o)->h2s);
}

static void oh2_hold(struct origin *o)
{
    (void)o; /* what was delivered stays out of the window until resume */
}

static void oh2_cancel(struct origin *o, bool abort)
{
    struct origin_conn *c = oh2(o);

    (void)abort; /* h2up_close resets every stream left incomplete */
    h2up_close(&c->h2s);
    origin_gone(c);
}

static struct bufferevent *oh2_take(struct origin *o)
{
    oh2_cancel(o, true); /* a stream has no connection of its own to hand over */
    return NULL;
}

static void oh2_release(struct origin *o, bool req_done)
{
    oh2_cancel(o, !req_done);
}

static const struct origin_ops oh2_ops = {
    oh2_request, oh2_body, oh2_body_take, oh2_body_end, oh2_flush,
    oh2_resume,  oh2_hold, oh2_take,      oh2_release,  oh2_cancel,
};

void origin_h2_opened(struct origin_conn *c)
{
    c->o.ops = &oh2_ops;
    c->o.caps = ORIGIN_CAP_GRPC;
    c->o.route_tunnel = h2up_route_tunnel(c->h2s);
}
