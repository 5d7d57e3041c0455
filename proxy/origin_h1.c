/*
 * origin_h1.c - the HTTP/1.1 adapter of origin.h: one request on a connection of its own
 * (upstream.c's, pooled or dialled), the head serialised anew, the body re-framed, the response
 * parsed by http/http1.c and handed to the exchange's callbacks; the connection goes back to the
 * pool after a clean, complete exchange, and is cut with an RST when a request was left half
 * sent.
 *
 * Guarantees: a response is parsed only from the connection of the request it answers; the
 * connection returns to the pool only with nothing buffered either way and a response that
 * allows keep-alive; a head with a secret is staged in a wiped block and never pulled up.
 */
#include "proxy/origin_int.h"
#include "common/caps.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

static struct origin_conn *oh1(struct origin *o)
{
    return (struct origin_conn *)o;
}

/* Sends what is staged: at once while nothing is queued (cio_push). */
static void oh1_push(struct origin_conn *c)
{
    if (c->io.conn == NULL || c->io.stage == NULL)
        return;
    cio_push(c->io.conn, c->io.stage, c->io.nocopy);
    c->io.nocopy = false; /* the stage is empty now, or moved on whole (chains, not copies) */
    c->quickack = false;  /* sending turns Linux's delayed ACKs on again */
}

/* Bytes waiting for the upstream: staged plus queued. */
static size_t oh1_pending(const struct origin_conn *c)
{
    return (c->io.stage != NULL ? evbuffer_get_length(c->io.stage) : 0) + cio_queued(c->io.conn);
}

/*
 * Acknowledges upstream data at once instead of after the delayed-ACK timer (40 ms). An
 * upstream with Nagle on holds a small write (the first server-sent event after the head, the
 * rest of a head written in parts, the head after TLS 1.3 session tickets) until its previous
 * segment is acknowledged; a receiver that has nothing to send back would otherwise delay that
 * ACK. The option takes the socket out of Linux's interactive ("ping-pong") mode, in which a
 * read does not acknowledge a small segment; the socket stays out of it until it sends again.
 * So it is set once per response after the request went: at the first read that leaves the
 * response unfinished (an ACK already due goes out then; every later read that empties the
 * socket acknowledges by itself), and after the first request on a connection dialled for it
 * (the tickets arrive unseen: they make no read). A response read whole in one go, the
 * keep-alive case, costs no system call and no extra segment: its ACK rides on the next
 * request; a streamed one costs one system call, not one per read.
 */
static void oh1_quickack(struct origin_conn *c)
{
    evutil_socket_t fd = cio_fd(c->io.conn);
    int one = 1;

    if (c->quickack || fd < 0)
        return;
    setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
    c->quickack = true;
}

/* ---- the response parser's callbacks: the exchange's, and what the adapter learns ---------- */

static int oh1_on_head(void *arg, struct http1_msg *msg)
{
    struct origin_conn *c = arg;
    int rc = c->o.cbs->resp.on_head(c->o.arg, msg);

    c->resp = msg;
    if (rc != 0 || defer_freed(&c->defer) || (msg->head.status < 200 && msg->head.status != 101))
        return rc;
    c->answered = true;
    if (msg->head.status >= 200 && !c->draining) {
        /* the head arrived: from now on only body idleness counts */
        struct timeval idle = {c->body_idle, 0};

        cio_set_timeouts(c->io.conn, &idle, &idle);
    }
    return 0;
}

static int oh1_on_body(void *arg, const char *data, size_t len)
{
    struct origin_conn *c = arg;

    return c->o.cbs->resp.on_body(c->o.arg, data, len);
}

static int oh1_on_trailers(void *arg, struct http_head *t)
{
    struct origin_conn *c = arg;

    return c->o.cbs->resp.on_trailers(c->o.arg, t);
}

static int oh1_on_done(void *arg)
{
    struct origin_conn *c = arg;
    int rc = c->o.cbs->resp.on_done(c->o.arg);

    c->done = rc >= 0;
    return rc;
}

static const struct http1_callbacks oh1_callbacks = {oh1_on_head, oh1_on_body, oh1_on_done,
                                                     oh1_on_trailers};

/* ---- reading the response ---------------------------------------------------------------- */

/*
 * Feeds what the connection holds to the parser, once even with nothing held (a parser paused
 * at the end of a body gets its on_done so), until the input runs out, the parser pauses or
 * the response ended. 0, or -1 when c is gone or failed.
 */
static int oh1_feed(struct origin_conn *c)
{
    struct evbuffer *in = cio_input(c->io.conn);
    bool first = true;

    if (in == NULL) {
        c->broken = true;
        c->o.cbs->failed(c->o.arg, ORIGIN_FAIL_IO, ORIGIN_RETRY_NO, "out of memory");
        return -1;
    }
    while (!c->done) {
        struct evbuffer_iovec v = {(void *)"", 0};
        ssize_t r;

        if ((evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0) && !first)
            break;
        first = false;
        r = http1_feed(c->parser, v.iov_base, v.iov_len);
        if (defer_freed(&c->defer))
            return -1;
        if (r < 0) {
            c->broken = true;
            c->o.cbs->failed(c->o.arg, ORIGIN_FAIL_PROTOCOL, ORIGIN_RETRY_NO, NULL);
            return -1;
        }
        evbuffer_drain(in, (size_t)r);
        c->resp_bytes += (uint64_t)r;
        if ((size_t)r < v.iov_len || v.iov_len == 0)
            break;
    }
    return 0;
}

/* Turns of feeding, each followed by the exchange's after, while the exchange resumes inside
 * it; then reading follows what the exchange said last. */
static void oh1_input(struct origin_conn *c)
{
    do {
        c->rd = ORIGIN_H1_FEEDING;
        if (oh1_feed(c) < 0)
            return;
        c->o.cbs->after(c->o.arg);
        if (defer_freed(&c->defer))
            return;
    } while (c->rd == ORIGIN_H1_AGAIN && cio_has_input(c->io.conn));
    if (c->rd == ORIGIN_H1_HELD) {
        cio_read(c->io.conn, false);
        return;
    }
    c->rd = ORIGIN_H1_READING;
    cio_read(c->io.conn, true);
}

static void oh1_read_cb(struct cio *io, void *arg)
{
    struct origin_conn *c = arg;

    if (c->rd == ORIGIN_H1_HELD)
        return; /* the exchange resumes when the client side drained */
    origin_enter(c);
    oh1_input(c);
    if (!defer_freed(&c->defer) && !c->done) {
        oh1_quickack(c); /* the rest is awaited: acknowledge what came */
        /* a response is streaming (one read whole costs nothing): no buffers held between its
         * reads, however long it lasts (the pool takes the mode off again) */
        if (c->answered)
            cio_release_always(io);
    }
    origin_leave(c);
}

static void oh1_write_cb(struct cio *io, void *arg)
{
    struct origin_conn *c = arg;

    origin_enter(c);
    if (c->body_paused && cio_queued(io) <= VG_CONN_OUT_CAP / 2) {
        c->body_paused = false;
        cio_set_wlow(io, 0);
        c->o.cbs->more(c->o.arg);
    }
    origin_leave(c);
}

/* The upstream closed: the end of a close-delimited body, or a cut response. */
static void oh1_eof(struct origin_conn *c)
{
    enum origin_retry retry = c->resp_bytes == 0 ? ORIGIN_RETRY_SAFE : ORIGIN_RETRY_NO;

    if (c->rd != ORIGIN_H1_HELD) {
        oh1_input(c);
        if (defer_freed(&c->defer))
            return;
    }
    if (c->done)
        return; /* the body is complete; its decoded rest waits for the client */
    if (http1_in_message(c->parser) && c->answered && http1_feed_eof(c->parser) == 0 && c->done) {
        c->o.cbs->after(c->o.arg);
        return;
    }
    if (!defer_freed(&c->defer))
        c->o.cbs->failed(c->o.arg, ORIGIN_FAIL_EOF, retry, NULL);
}

static void oh1_event_cb(struct cio *io, short what, void *arg)
{
    struct origin_conn *c = arg;
    char detail[256];

    origin_enter(c);
    c->broken = true; /* a close-delimited body ends at an EOF, and the connection with it */
    if (what & CIO_EOF) {
        oh1_eof(c);
    } else if (what & CIO_TIMEOUT) {
        c->o.cbs->failed(c->o.arg, ORIGIN_FAIL_TIMEOUT, ORIGIN_RETRY_NO, NULL);
    } else if (what & CIO_ERROR) {
        unsigned long e = cio_ssl_error(io);
        const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

        snprintf(detail, sizeof(detail), "%s",
                 e != 0 ? (r != NULL ? r : "TLS error") : strerror(cio_sys_error(io)));
        c->o.cbs->failed(c->o.arg, ORIGIN_FAIL_IO,
                         c->resp_bytes == 0 ? ORIGIN_RETRY_SAFE : ORIGIN_RETRY_NO, detail);
    }
    origin_leave(c);
}

/* ---- the interface ------------------------------------------------------------------------ */

/* Serialises the rewritten head (a head with a secret in a wiped block). */
static int oh1_request(struct origin *o, const struct http_head *h, enum http1_body body,
                       uint64_t len, bool sensitive)
{
    struct origin_conn *c = oh1(o);

    http1_parser_set_request_method(c->parser, h->method);
    c->req_body = body;
    c->head_sent = true;
    c->req_ended = body == HTTP1_BODY_NONE; /* else at origin_body_end */
    c->io.nocopy = sensitive;
    return (sensitive ? http1_write_request_head_wiped : http1_write_request_head)(c->io.stage, h,
                                                                                   body, len);
}

static int oh1_body(struct origin *o, const char *p, size_t n)
{
    struct origin_conn *c = oh1(o);
    int rc = c->req_body == HTTP1_BODY_CHUNKED ? http1_write_chunk(c->io.stage, p, n)
                                               : evbuffer_add(c->io.stage, p, n);

    if (rc < 0)
        return -1;
    if (oh1_pending(c) < VG_CONN_OUT_CAP)
        return 0;
    /* the upstream takes no more for now: the exchange waits for cbs->more */
    oh1_push(c);
    if (cio_queued(c->io.conn) <= VG_CONN_OUT_CAP / 2)
        return 0; /* the socket took it: no wait */
    c->body_paused = true;
    cio_set_wlow(c->io.conn, VG_CONN_OUT_CAP / 2);
    return 1;
}

static int oh1_body_take(struct origin *o, struct evbuffer *buf)
{
    struct origin_conn *c = oh1(o);

    c->io.nocopy = true;
    return evbuffer_add_buffer(c->io.stage, buf);
}

static int oh1_body_end(struct origin *o)
{
    struct origin_conn *c = oh1(o);

    if (c->req_body == HTTP1_BODY_CHUNKED && http1_write_last_chunk(c->io.stage) < 0)
        return -1;
    oh1_push(c);
    c->req_ended = true;
    return 0;
}

static void oh1_flush(struct origin *o)
{
    oh1_push(oh1(o));
}

static void oh1_resume(struct origin *o)
{
    struct origin_conn *c = oh1(o);

    if (c->rd == ORIGIN_H1_FEEDING || c->rd == ORIGIN_H1_AGAIN) {
        c->rd = ORIGIN_H1_AGAIN; /* oh1_input takes another turn */
        return;
    }
    if (c->rd == ORIGIN_H1_HELD && c->resp_bytes == 0 && !c->answered && c->fresh)
        oh1_quickack(c); /* the answer is next: acknowledge at once what arrives now */
    origin_enter(c);
    oh1_input(c);
    origin_leave(c);
}

static void oh1_hold(struct origin *o)
{
    oh1(o)->rd = ORIGIN_H1_HELD;
}

/* Frees the connection; abort: with an RST (a half-sent request never looks complete). */
static void oh1_close(struct origin_conn *c, bool abort)
{
    if (c->io.conn != NULL) {
        evutil_socket_t fd = cio_fd(c->io.conn);

        if (abort && fd >= 0) {
            struct linger lg = {1, 0};

            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        cio_free(&c->io.conn);
    }
    origin_gone(c);
}

/* The connection as a bufferevent (after a 101), with what was read past the head. */
static struct bufferevent *oh1_take(struct origin *o)
{
    struct origin_conn *c = oh1(o);
    struct bufferevent *bev;

    cio_setcb(c->io.conn, NULL, NULL, NULL, NULL);
    bev = cio_to_bufferevent(&c->io.conn, BEV_OPT_DEFER_CALLBACKS);
    origin_gone(c);
    return bev;
}

static void oh1_release(struct origin *o, bool req_done)
{
    struct origin_conn *c = oh1(o);
    SSL *ssl = c->io.conn != NULL ? cio_ssl(c->io.conn) : NULL;
    bool reuse = req_done && c->io.conn != NULL && !c->broken &&
                 (!c->head_sent || (c->resp != NULL && c->resp->keep_alive)) &&
                 !cio_has_input(c->io.conn) && oh1_pending(c) == 0 &&
                 (ssl == NULL || !SSL_has_pending(ssl));

    if (reuse) {
        cio_setcb(c->io.conn, NULL, NULL, NULL, NULL);
        cio_set_timeouts(c->io.conn, NULL, NULL);
        cio_set_wlow(c->io.conn, 0);
        c->parser_reusable = true; /* the response ended and the connection goes on */
        upstream_release(c->up, c->host, c->port, c->tls, &c->io.conn);
    }
    oh1_close(c, !reuse && !req_done);
}

/* ---- draining: a cancelled request's response read to its end, the connection pooled ---- */

/* The end of a drain: the connection to the pool when the response ended and allows it, else
 * closed. */
static void oh1_drain_end(struct origin_conn *c, bool ended)
{
    origin_drain_remove(c);
    c->draining = false;
    if (ended)
        oh1_release(&c->o, true);
    else
        oh1_close(c, false);
}

void origin_h1_drain_stop(struct origin_conn *c)
{
    oh1_drain_end(c, false);
}

/* The response's callbacks while draining (arg: the origin): nothing goes anywhere; a 101 or a
 * body past VG_ORIGIN_DRAIN_MAX stops the drain. */
static int drain_on_head(void *arg, struct http1_msg *msg)
{
    (void)arg;
    return msg->head.status == 101 ? -1 : 0;
}

static int drain_on_body(void *arg, const char *data, size_t len)
{
    struct origin_conn *c = arg;

    (void)data;
    c->drain_bytes += len;
    return c->drain_bytes > VG_ORIGIN_DRAIN_MAX ? -1 : 0;
}

static int drain_on_trailers(void *arg, struct http_head *t)
{
    (void)arg, (void)t;
    return 0;
}

static int drain_on_done(void *arg)
{
    (void)arg;
    return 0;
}

static void drain_ready(void *arg, enum origin_up up, enum upstream_err err)
{
    (void)arg, (void)up, (void)err;
}

static void drain_after(void *arg)
{
    struct origin_conn *c = arg;

    if (c->done)
        oh1_drain_end(c, true);
}

static void drain_failed(void *arg, enum origin_fail f, enum origin_retry retry, const char *detail)
{
    (void)f, (void)retry, (void)detail;
    oh1_drain_end(arg, false);
}

static void drain_more(void *arg)
{
    (void)arg;
}

static const struct origin_cbs drain_cbs = {
    {drain_on_head, drain_on_body, drain_on_done, drain_on_trailers},
    drain_ready,
    drain_after,
    drain_failed,
    drain_more,
};

/*
 * The exchange let go of a request that went out whole: rather than cut the connection (and
 * make the next request dial and handshake), the rest of the response is read and dropped, for
 * at most VG_ORIGIN_DRAIN_MS without input and VG_ORIGIN_DRAIN_MAX body bytes, and the
 * connection goes back to the pool at its end. A response already complete goes at once.
 * False when the connection cannot be kept.
 */
static bool oh1_drain(struct origin_conn *c)
{
    struct timeval t = {VG_ORIGIN_DRAIN_MS / 1000, (VG_ORIGIN_DRAIN_MS % 1000) * 1000};

    if (c->io.conn == NULL || !c->head_sent || !c->req_ended || c->draining || c->broken ||
        (c->resp != NULL && c->resp->head.status == 101))
        return false;
    if (c->done) {
        oh1_release(&c->o, true);
        return true;
    }
    if (!origin_drain_add(c))
        return false;
    c->draining = true;
    c->o.cbs = &drain_cbs;
    c->o.arg = c;
    cio_set_timeouts(c->io.conn, &t, &t);
    if (c->rd == ORIGIN_H1_FEEDING || c->rd == ORIGIN_H1_AGAIN) {
        c->rd = ORIGIN_H1_AGAIN; /* cancelled inside the parser loop: it goes on */
        return true;
    }
    c->rd = ORIGIN_H1_READING;
    cio_read(c->io.conn, true);
    /* what is buffered already is read from the loop, as if it had just arrived (with nothing
     * buffered, a parser paused at the end of the body gets its on_done so) */
    cio_kick(c->io.conn);
    return true;
}

static void oh1_cancel(struct origin *o, bool abort)
{
    struct origin_conn *c = oh1(o);

    if (!oh1_drain(c))
        oh1_close(c, abort);
}

static const struct origin_ops oh1_ops = {
    oh1_request, oh1_body, oh1_body_take, oh1_body_end, oh1_flush,
    oh1_resume,  oh1_hold, oh1_take,      oh1_release,  oh1_cancel,
};

int origin_h1_attach(struct origin_conn *c, struct cio *io, unsigned how)
{
    c->io.conn = io;
    c->o.ops = &oh1_ops;
    c->o.route_tunnel = (how & UPSTREAM_VIA_TUNNEL) != 0;
    c->fresh = (how & UPSTREAM_POOLED) == 0;
    c->rd = ORIGIN_H1_HELD;
    /* many servers close without close_notify (an end of stream for cio); truncation of a
     * Content-Length or chunked body is still caught by the parser, and an EOF-delimited body
     * can only end this way */
    if (cio_ssl(io) != NULL)
        SSL_set_options(cio_ssl(io), SSL_OP_IGNORE_UNEXPECTED_EOF);
    cio_setcb(io, oh1_read_cb, oh1_write_cb, oh1_event_cb, c);
    cio_set_wlow(io, 0);
    cio_set_timeouts(io, NULL, NULL);
    /* a spare origin brings a reset parser and an empty stage */
    if (c->io.stage == NULL)
        c->io.stage = evbuffer_new();
    c->parser_reusable = false; /* again once the connection goes back to the pool */
    if (c->parser != NULL)
        http1_parser_set_arg(c->parser, c);
    else
        c->parser = http1_parser_new(HTTP1_RESPONSE, &oh1_callbacks, c);
    return c->io.stage != NULL && c->parser != NULL ? 0 : -1;
}
