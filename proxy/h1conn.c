/*
 * h1conn.c - the HTTP/1.1 client transport (see h1conn.h): its start (h1conn_start, called by
 * ingress.c once a connection speaks HTTP/1.1), request parsing, response framing, keep-alive,
 * timers and teardown. Each request is an exchange (exchange.c); CONNECT on the explicit-proxy
 * listener is proxyconn.c.
 *
 * Guarantees:
 * - Requests are handled one at a time: the parser pauses at each head and hands it to a new
 *   exchange; the body is fed only while the exchange takes it; pipelined requests wait until
 *   the response before them ends (their bytes wait in the input, bounded by its watermark).
 * - Responses are framed for the client's version: Content-Length as announced, an unknown
 *   length re-framed as chunks for HTTP/1.1 or close-delimited for HTTP/1.0; interim (1xx)
 *   responses reach HTTP/1.1 clients only (RFC 9110 §15.2).
 * - The client's output is capped (VG_CONN_OUT_CAP): past it the exchange stops reading its
 *   upstream until the client drained half of it.
 * - h1_close() is the only teardown; it frees the exchange first. A close requested inside a
 *   callback frees the struct when the outermost callback returns.
 * - Logs carry host and reason codes: never a path, query, header value, body or secret.
 */
#include "proxy/h1conn.h"
#include "proxy/h1conn_int.h"
#include "audit/audit.h"
#include "common/caps.h"
#include "common/hostname.h"
#include "proxy/listen.h"
#include "proxy/metrics.h"
#include "proxy/reason.h"
#include "proxy/tunnel.h"
#include "proxy/upstream.h"
#include "mask/wsmask.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

static const char *const state_names[] = {
    "idle", "head", "exchange", "peek", "flush", "linger", "closed",
};

static void h1_input(struct h1conn *c);
static void h1_free(struct h1conn *c);
static const struct http1_callbacks req_callbacks;

/* ---- small helpers ---------------------------------------------------------------------- */

void h1_log(const struct h1conn *c, enum log_level lvl, const char *event, const char *reason,
            const char *detail)
{
    exch_conn_log(&c->cc, lvl, event, reason, detail);
}

void h1_set_state(struct h1conn *c, enum h1_state s)
{
    if (log_enabled(LOG_DEBUG) && c->state != s) {
        char d[64];

        snprintf(d, sizeof(d), "%s -> %s", state_names[c->state], state_names[s]);
        h1_log(c, LOG_DEBUG, "conn_state", "state", d);
    }
    c->state = s;
}

/*
 * The connection's one timer is an entry in one of its worker's deadline queues (dlq.h), one
 * queue per duration h1conn waits: the record-buffer release (H1_BUF_KEEP_MS), the rest of the
 * idle and head timeouts after it, the head timeout, the flush, linger and peek waits. They are
 * made at the worker's start (h1_timers_init) from the run's timeouts, so arming never
 * allocates and never fails for want of a queue.
 */
static void h1_timer_cb(struct dlq_entry *e);

/* A queue's timer is a pre-made event: adding it fails only on a broken event base, which
 * nothing here could mend (as with the struct event each connection had before). No queue: the
 * worker's end, when no timer runs again. */
static void h1_wait(struct h1conn *c, int64_t ms)
{
    struct dlq *q = worker_dlq(c->cc.w, &h1timer_worker_module, ms);

    if (q != NULL)
        (void)dlq_add(q, &c->timer);
}

void h1_arm(struct h1conn *c, int seconds)
{
    c->buf_timer = false;
    h1_wait(c, (int64_t)seconds * 1000);
}

/*
 * Waiting for a request: the timer first fires after H1_BUF_KEEP_MS to release the TLS record
 * buffers (a client that goes on sending reuses them, with no allocation per request), then at
 * the end of the wait.
 */
void h1_arm_idle(struct h1conn *c, int seconds)
{
    c->buf_timer = true;
    c->idle_rest = seconds;
    h1_wait(c, H1_BUF_KEEP_MS);
}

/* With a request in its exchange the timer only releases the buffers, after H1_BUF_KEEP_MS
 * without a write to the client (a slow upstream, a quiet stream); the exchange keeps its own
 * timeouts. */
void h1_arm_buffers(struct h1conn *c)
{
    c->buf_timer = true;
    c->idle_rest = 0;
    h1_wait(c, H1_BUF_KEEP_MS);
}

/* The record buffers go (kept while they hold part of a record); an idle connection's timer
 * then waits for the rest of its timeout. */
static void h1_release_buffers(struct h1conn *c)
{
    if (c->io != NULL)
        cio_free_buffers(c->io);
    c->buf_timer = false;
    if (c->state != H1_S_IDLE)
        return;
    if (c->idle_rest > 0)
        h1_wait(c, (int64_t)c->idle_rest * 1000 - H1_BUF_KEEP_MS);
    else
        h1_close(c, "idle_timeout"); /* no wait was left after the release */
}

static int h1_timers_init(struct worker *w, char *err, size_t errlen)
{
    const int64_t head = (int64_t)H1_T_W(w, VG_T_HEAD) * 1000;
    const int64_t ms[] = {H1_BUF_KEEP_MS,
                          (int64_t)H1_T_W(w, VG_T_IDLE) * 1000 - H1_BUF_KEEP_MS,
                          head - H1_BUF_KEEP_MS,
                          head,
                          (int64_t)H1_T_FLUSH * 1000,
                          (int64_t)H1_T_LINGER * 1000,
                          (int64_t)H1_T_PEEK * 1000};

    return worker_dlq_init(w, &h1timer_worker_module, ms, sizeof(ms) / sizeof(ms[0]), h1_timer_cb,
                           err, errlen);
}

static void h1_timers_free(struct worker *w)
{
    worker_dlq_free(w, &h1timer_worker_module);
}

const struct worker_module h1timer_worker_module = {
    .name = "h1timer", .init = h1_timers_init, .free = h1_timers_free};

void h1_enter(struct h1conn *c)
{
    defer_enter(&c->defer);
}

void h1_leave(struct h1conn *c)
{
    if (defer_leave(&c->defer))
        h1_free(c);
}

/* Sends what is staged for the client (cio_push). */
void h1_push(struct h1conn *c)
{
    if (c->io != NULL)
        cio_push(c->io, c->stage, false);
}

/* Bytes on their way to the client: staged, or queued in its socket's output. */
static size_t h1_pending(const struct h1conn *c)
{
    return (c->stage != NULL ? evbuffer_get_length(c->stage) : 0) + cio_queued(c->io);
}

void h1_record_refusal(struct h1conn *c, const char *host)
{
    struct worker *w = c->cc.w;

    audit_blocked(w->sh->audit, w->id, host);
    audit_route(w->sh->audit, w->id, host, AUDIT_ROUTE_REFUSED);
    metrics_blocked(w->id);
}

/* Reading the client: while a request may arrive or its body flows, and while lingering. */
void h1_reading(struct h1conn *c)
{
    bool on;

    if (c->io == NULL || c->state == H1_S_CLOSED)
        return;
    /* The client side keeps reading while a request is in flight (bytes of a pipelined request
     * wait in its input, bounded by the read watermark): toggling EV_READ per request would
     * cost two epoll_ctl calls. Only a paused body stops it. */
    on = c->state != H1_S_FLUSH && !(c->state == H1_S_EXCHANGE && c->body == H1_BODY_PAUSED) &&
         !(c->state == H1_S_PEEK && c->upreq != NULL);
    cio_read(c->io, on);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    struct h1conn *c = arg;

    h1_enter(c);
    h1_input(c);
    h1_leave(c);
}

/* Runs the input handler from the event loop: bytes already buffered are parsed without
 * waiting for more to arrive, and never inside an exchange's callback. */
void h1_schedule_input(struct h1conn *c)
{
    if (c->io == NULL ||
        (!cio_has_input(c->io) && !(c->state == H1_S_EXCHANGE && c->body == H1_BODY_FLOW)))
        return;
    if (c->resume == NULL)
        c->resume = event_new(c->cc.w->base, -1, 0, resume_cb, c);
    if (c->resume != NULL)
        event_active(c->resume, EV_TIMEOUT, 1);
}

/* ---- per-request parts, lent by the worker ---------------------------------------------- */

/*
 * The request parser and the stage buffer are needed only while a request is under way: an
 * idle keep-alive connection gives them back to its worker, which keeps up to
 * VG_WORKER_SPARES of each for the next request of any of its connections (a stack: reuse is a
 * pointer move, no allocation, and the same few blocks serve every request). A parser comes
 * back reset (its buffers wiped and freed), a stage empty.
 */
struct h1_spare {
    size_t np, nb;
    struct http1_parser *p[VG_WORKER_SPARES];
    struct evbuffer *b[VG_WORKER_SPARES];
};

/* The worker's spares (made on first use when make), or NULL. */
static struct h1_spare *h1_spare(struct worker *w, bool make)
{
    void **st = worker_module_state(w, &h1conn_worker_module);

    if (st != NULL && *st == NULL && make)
        *st = calloc(1, sizeof(struct h1_spare));
    return st != NULL ? *st : NULL;
}

/* Takes a parser and a stage for the request that begins. 0 or -1 (out of memory). */
static int h1_lend(struct h1conn *c)
{
    struct h1_spare *sp = h1_spare(c->cc.w, false);

    if (c->parser == NULL) {
        if (sp != NULL && sp->np > 0) {
            c->parser = sp->p[--sp->np];
            http1_parser_set_arg(c->parser, c);
        } else {
            c->parser = http1_parser_new(HTTP1_REQUEST, &req_callbacks, c);
        }
    }
    if (c->stage == NULL)
        c->stage = sp != NULL && sp->nb > 0 ? sp->b[--sp->nb] : evbuffer_new();
    return c->parser != NULL && c->stage != NULL ? 0 : -1;
}

/* Gives parser and stage back to the worker (or frees them) once the connection is idle. */
static void h1_give_back(struct h1conn *c)
{
    struct h1_spare *sp = h1_spare(c->cc.w, true);

    if (c->parser != NULL) {
        http1_parser_reset(c->parser);
        if (sp != NULL && sp->np < VG_WORKER_SPARES)
            sp->p[sp->np++] = c->parser;
        else
            http1_parser_free(&c->parser);
        c->parser = NULL;
    }
    if (c->stage != NULL && evbuffer_get_length(c->stage) == 0) {
        if (sp != NULL && sp->nb < VG_WORKER_SPARES)
            sp->b[sp->nb++] = c->stage;
        else
            evbuffer_free(c->stage);
        c->stage = NULL;
    }
}

static void h1_worker_free(struct worker *w)
{
    void **st = worker_module_state(w, &h1conn_worker_module);
    struct h1_spare *sp = st != NULL ? *st : NULL;

    if (sp == NULL)
        return;
    while (sp->np > 0)
        http1_parser_free(&sp->p[--sp->np]);
    while (sp->nb > 0)
        evbuffer_free(sp->b[--sp->nb]);
    free(sp);
    *st = NULL;
}

const struct worker_module h1conn_worker_module = {.name = "h1conn", .free = h1_worker_free};

/* ---- teardown --------------------------------------------------------------------------- */

/* Frees everything of c. Only h1_close(), h1_handover() and h1_leave() call this. */
static void h1_free(struct h1conn *c)
{
    exchange_free(&c->x);
    if (c->upreq != NULL)
        upstream_cancel(&c->upreq);
    cio_free(&c->io);
    http1_parser_free(&c->parser);
    if (c->stage != NULL)
        evbuffer_free(c->stage);
    dlq_del(&c->timer);
    if (c->resume != NULL)
        event_free(c->resume);
    exch_conn_release(&c->cc);
    free(c);
}

/*
 * The only teardown: stops the exchange and the socket at once; the struct itself is freed now,
 * or when the outermost callback on the stack returns. reason is a fixed code, logged at debug.
 */
void h1_close(struct h1conn *c, const char *reason)
{
    if (c->state == H1_S_CLOSED)
        return;
    h1_log(c, LOG_DEBUG, "conn_close", reason, NULL);
    h1_set_state(c, H1_S_CLOSED);
    dlq_del(&c->timer);
    if (c->resume != NULL)
        event_del(c->resume);
    exchange_free(&c->x);
    if (c->io != NULL)
        cio_stop(c->io);
    worker_detach(c->cc.w, &c->link);
    if (defer_free(&c->defer))
        h1_free(c);
}

/* The socket went to a tunnel (which took c's place in the worker's list): c goes without
 * touching it. */
void h1_handover(struct h1conn *c)
{
    c->io = NULL;
    h1_set_state(c, H1_S_CLOSED);
    dlq_del(&c->timer);
    if (c->resume != NULL)
        event_del(c->resume);
    if (defer_free(&c->defer))
        h1_free(c);
}

/* Sends close_notify and FIN, then discards input for a short while, so that a client still
 * sending does not get an RST that destroys the response it has not read yet. */
static void h1_linger(struct h1conn *c)
{
    h1_set_state(c, H1_S_LINGER);
    h1_arm(c, H1_T_LINGER);
    cio_set_wlow(c->io, 0);
    cio_shutdown(c->io);
    cio_read(c->io, true);
}

/* Close once the client's output has drained (the final response is on its way). */
static void h1_flush_close(struct h1conn *c)
{
    h1_push(c);
    exchange_free(&c->x);
    h1_set_state(c, H1_S_FLUSH);
    h1_arm(c, H1_T_FLUSH);
    cio_set_timeouts(c->io, NULL, NULL);
    cio_set_wlow(c->io, 0);
    cio_read(c->io, false);
    if (cio_queued(c->io) == 0)
        h1_linger(c);
}

/* ---- the exchange's side of the connection --------------------------------------------- */

static int h1_resp_head(void *t, struct http_head *h, enum exch_body body, uint64_t len, bool close)
{
    struct h1conn *c = t;
    struct timeval idle = {H1_T(c, VG_T_BODY_IDLE), 0};
    enum http1_body fb = HTTP1_BODY_NONE;

    if (h->status == 101)
        return http1_write_response_head(c->stage, h, HTTP1_BODY_NONE, 0, false);
    if (h->status < 200) {
        /* an HTTP/1.0 client cannot tell an interim response from the answer */
        if (c->req_minor == 0)
            return 0;
        return http1_write_response_head(c->stage, h, HTTP1_BODY_NONE, 0, false);
    }
    c->framing = H1_FR_NONE;
    if (body == EXCH_BODY_LENGTH) {
        fb = HTTP1_BODY_LENGTH;
    } else if (body == EXCH_BODY_NONE && h->status != 204 && h->status != 304 &&
               (c->req == NULL || strcmp(c->req->head.method, "HEAD") != 0)) {
        /* no body where HTTP/1.1 expects one (an HTTP/2 upstream's answer that ended with its
         * head): say so, or the client reads until the connection closes */
        fb = HTTP1_BODY_LENGTH;
        len = 0;
    } else if (body == EXCH_BODY_UNKNOWN && c->req_minor >= 1) {
        fb = HTTP1_BODY_CHUNKED;
        c->framing = H1_FR_CHUNKED;
    } else if (body == EXCH_BODY_UNKNOWN) {
        fb = HTTP1_BODY_EOF;
        close = true;
    }
    c->resp_close = close || !c->keep_alive || c->cc.draining;
    if (http1_write_response_head(c->stage, h, fb, len, c->resp_close) < 0)
        return -1;
    /* from now on only body idleness counts */
    cio_set_timeouts(c->io, NULL, &idle);
    return 0;
}

static int h1_resp_body(void *t, struct evbuffer *buf)
{
    struct h1conn *c = t;
    size_t n = evbuffer_get_length(buf);

    if (c->framing == H1_FR_CHUNKED) {
        if (n == 0)
            return 0;
        if (http1_write_chunk_header(c->stage, n) < 0 || evbuffer_add_buffer(c->stage, buf) < 0)
            return -1;
        return evbuffer_add(c->stage, "\r\n", 2);
    }
    return evbuffer_add_buffer(c->stage, buf);
}

/* The end of a response; trailers go with the last chunk (other framings cannot carry them). */
static int h1_resp_end(void *t, struct http_head *trailers)
{
    struct h1conn *c = t;

    if (c->framing == H1_FR_CHUNKED && http1_write_last_chunk_trailers(c->stage, trailers) < 0)
        return -1;
    return 0;
}

static int h1_resp_error(void *t, int status, const char *type, const char *details,
                         const char *host)
{
    struct h1conn *c = t;

    c->resp_close = true;
    return http1_write_error(c->stage, status, type, details, host, true);
}

static size_t h1_room(void *t)
{
    struct h1conn *c = t;
    size_t pending = h1_pending(c);

    if (pending < VG_CONN_OUT_CAP)
        return VG_CONN_OUT_CAP - pending;
    /* what the socket takes now does not count; what stays is queued in the client I/O, whose
     * write callback then says when it has drained */
    h1_push(c);
    pending = h1_pending(c);
    if (pending < VG_CONN_OUT_CAP)
        return VG_CONN_OUT_CAP - pending;
    if (!c->want_drain) {
        c->want_drain = true;
        cio_set_wlow(c->io, VG_CONN_OUT_CAP / 2);
    }
    return 0;
}

static void h1_more(void *t)
{
    struct h1conn *c = t;
    struct timeval idle = {H1_T(c, VG_T_BODY_IDLE), 0};

    if (c->state != H1_S_EXCHANGE || c->body == H1_BODY_DONE)
        return;
    if (c->body == H1_BODY_WAIT)
        cio_set_timeouts(c->io, &idle, NULL);
    c->body = H1_BODY_FLOW;
    h1_reading(c);
    h1_schedule_input(c);
}

static void h1_flush(void *t)
{
    struct h1conn *c = t;

    h1_push(c);
    if (c->state == H1_S_EXCHANGE && !c->buf_timer)
        h1_arm_buffers(c); /* released while the answer was slow: count the quiet anew */
}

/* The request is answered and the connection stays: ready for the next request. */
static void h1_keep_alive(struct h1conn *c)
{
    exchange_free(&c->x);
    c->req = NULL;
    h1_give_back(c);
    cio_set_timeouts(c->io, NULL, NULL);
    h1_set_state(c, H1_S_IDLE);
    h1_arm_idle(c, H1_T(c, VG_T_IDLE));
    h1_reading(c);
    h1_schedule_input(c); /* a pipelined request may be waiting */
}

/* A WebSocket after its 101: the socket goes to a tunnel with the exchange's upstream. */
static void h1_upgrade(struct h1conn *c)
{
    struct tunnel_info ti = {0};
    struct bufferevent *up = NULL, *client;
    struct wsmask *wsm = NULL;
    bool bad_ext = false, route_tunnel = false;

    exchange_take_upgrade(c->x, &up, &wsm, &bad_ext, &route_tunnel);
    h1_push(c); /* the 101 first (what the socket refused is queued, and goes along) */
    ti.id = c->cc.id;
    ti.client_addr = c->cc.client_addr;
    ti.la = c->cc.la;
    ti.host = exchange_host(c->x);
    ti.route_tunnel = route_tunnel;
    ti.inject = wsm != NULL;
    ti.t_start = c->t_req;
    if (up == NULL) {
        h1_close(c, "upgrade");
        return;
    }
    dlq_del(&c->timer);
    /* the tunnel reads and writes through a bufferevent, the client's bytes read so far in it */
    client = cio_to_bufferevent(&c->io, 0);
    if (client == NULL) {
        bufferevent_free(up);
        wsmask_free(&wsm);
        h1_close(c, "oom");
        return;
    }
    if (tunnel_start(c->cc.w, &c->link, client, up, wsm, bad_ext, &ti) < 0) {
        h1_close(c, "oom");
        return;
    }
    h1_handover(c);
}

static void h1_finished(void *t, enum exch_end how)
{
    struct h1conn *c = t;

    h1_push(c);
    switch (how) {
    case EXCH_END_DONE:
        if (c->resp_close || !c->keep_alive || c->cc.draining || c->body != H1_BODY_DONE)
            h1_flush_close(c);
        else
            h1_keep_alive(c);
        break;
    case EXCH_END_CLOSE:
        h1_flush_close(c);
        break;
    case EXCH_END_UPGRADE:
        h1_upgrade(c);
        break;
    case EXCH_END_CONNECT:
        proxy_connected(c);
        break;
    default:
        h1_close(c, "aborted");
        break;
    }
}

static const struct exchange_ops h1_exchange_ops = {
    h1_resp_head, h1_resp_body, h1_resp_end, h1_resp_error, h1_room, h1_more, h1_flush, h1_finished,
};

/* ---- request side ----------------------------------------------------------------------- */

static int req_on_head(void *arg, struct http1_msg *msg)
{
    struct h1conn *c = arg;

    c->req = msg;
    c->head_ready = true;
    c->parse_stop = true;
    return 1;
}

static int req_on_body(void *arg, const char *data, size_t len)
{
    struct h1conn *c = arg;
    int rc = exchange_body(c->x, data, len);

    if (rc == 1) {
        c->body = H1_BODY_PAUSED;
        c->parse_stop = true;
    }
    return rc;
}

static int req_on_done(void *arg)
{
    struct h1conn *c = arg;

    c->body = H1_BODY_DONE;
    c->parse_stop = true;
    return exchange_body_end(c->x) < 0 ? -1 : 1;
}

static const struct http1_callbacks req_callbacks = {req_on_head, req_on_body, req_on_done, NULL};

/* A request head arrived: its exchange takes it from here. */
static void h1_request(struct h1conn *c)
{
    struct http1_msg *req = c->req;

    c->head_ready = false;
    c->keep_alive = req->keep_alive && !c->cc.draining;
    c->req_minor = req->head.version_minor;
    c->resp_close = false;
    c->framing = H1_FR_NONE;
    c->body =
        req->body == HTTP1_BODY_NONE || (req->body == HTTP1_BODY_LENGTH && req->content_length == 0)
            ? H1_BODY_DONE
            : H1_BODY_WAIT;
    h1_set_state(c, H1_S_EXCHANGE);
    h1_arm_buffers(c);
    exchange_request(c->x, req);
}

/* The first byte of a request: its exchange begins. 0 or -1 (closed). */
static int h1_request_start(struct h1conn *c)
{
    clock_gettime(CLOCK_MONOTONIC, &c->t_req);
    if (h1_lend(c) < 0 || (c->x = exchange_new(&c->cc, &h1_exchange_ops, c, &c->t_req)) == NULL) {
        h1_close(c, "oom");
        return -1;
    }
    h1_set_state(c, H1_S_HEAD);
    h1_arm(c, H1_T(c, VG_T_HEAD));
    return 0;
}

/* The parser refused the client's bytes: the exchange answers (400, 405, 431, 501). */
static void h1_parse_error(struct h1conn *c)
{
    const char *why = NULL;
    int st = http1_error(c->parser, &why);

    exchange_reject(c->x, st, st == 405 ? VG_PS_REQUEST_DENIED : VG_PS_REQUEST_ERROR,
                    why != NULL ? why : "malformed request", VG_R_PROTOCOL_ERROR);
}

/* 1 while the parser may be fed: a request may begin, its head goes on, or its body flows. */
static bool h1_parsing(const struct h1conn *c)
{
    return c->state == H1_S_IDLE || c->state == H1_S_HEAD ||
           (c->state == H1_S_EXCHANGE && c->body == H1_BODY_FLOW);
}

/* Feeds the client's buffered bytes to the request parser while the state allows it. */
static void h1_input(struct h1conn *c)
{
    struct evbuffer *in = cio_input(c->io);

    if (in == NULL) {
        h1_close(c, "oom");
        return;
    }
    if (c->state == H1_S_LINGER) {
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    if (c->state == H1_S_PEEK) {
        proxy_peek(c);
        return;
    }
    while (h1_parsing(c)) {
        struct evbuffer_iovec v;
        ssize_t r;
        bool empty = evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0;

        if (empty && !(c->state == H1_S_EXCHANGE && c->body == H1_BODY_FLOW))
            break;
        if (empty) {
            /* the body flows again after a pause that came with its last bytes: the parser
             * has yet to report its end, and no byte will come to make it */
            v.iov_base = (void *)"";
            v.iov_len = 0;
        }
        if (c->state == H1_S_IDLE && h1_request_start(c) < 0)
            return;
        c->parse_stop = false;
        r = http1_feed(c->parser, v.iov_base, v.iov_len);
        if (c->state != H1_S_HEAD && c->state != H1_S_EXCHANGE)
            return; /* answered (or closed) from inside the feed */
        if (r < 0) {
            h1_parse_error(c);
            return;
        }
        evbuffer_drain(in, (size_t)r);
        exchange_count_in(c->x, (size_t)r);
        exchange_flush(c->x);
        if (c->head_ready) {
            h1_request(c);
            return;
        }
        if (empty || c->parse_stop || (size_t)r < v.iov_len)
            break;
    }
    h1_reading(c);
}

/* Ready for a request (at the start, or after a CONNECT to port 80). */
void h1_begin(struct h1conn *c)
{
    if (c->parser != NULL)
        http1_parser_reset(c->parser);
    if (c->cc.draining) {
        h1_close(c, "draining");
        return;
    }
    h1_set_state(c, H1_S_IDLE);
    h1_arm_idle(c, H1_T(c, VG_T_HEAD));
    h1_reading(c);
    h1_schedule_input(c);
}

/* Over the connection limit: 503 as soon as anything can be said, then close. */
static void h1_busy(struct h1conn *c)
{
    clock_gettime(CLOCK_MONOTONIC, &c->t_req);
    if (h1_lend(c) < 0 || (c->x = exchange_new(&c->cc, &h1_exchange_ops, c, &c->t_req)) == NULL) {
        h1_close(c, "oom");
        return;
    }
    h1_set_state(c, H1_S_EXCHANGE);
    c->keep_alive = false;
    exchange_reject(c->x, 503, VG_PS_CONN_LIMIT, "too many connections, retry later",
                    VG_R_CONN_LIMIT);
}

/* ---- client callbacks ------------------------------------------------------------------- */

static void client_read_cb(struct cio *io, void *arg)
{
    struct h1conn *c = arg;

    (void)io;
    h1_enter(c);
    h1_input(c);
    h1_leave(c);
}

static void client_write_cb(struct cio *io, void *arg)
{
    struct h1conn *c = arg;
    size_t left = cio_queued(io);

    h1_enter(c);
    if (c->state == H1_S_FLUSH && left == 0) {
        h1_linger(c);
    } else if (c->want_drain && left <= VG_CONN_OUT_CAP / 2) {
        c->want_drain = false;
        cio_set_wlow(io, 0);
        if (c->x != NULL)
            exchange_drained(c->x);
    }
    h1_leave(c);
}

/* The client closed or failed. */
static void h1_client_gone(struct h1conn *c, short what)
{
    char detail[256];

    if (c->state == H1_S_EXCHANGE && c->x != NULL && exchange_sent(c->x) && (what & CIO_EOF)) {
        /* the client closed after sending its request: nobody is left to read the response
         * (TLS clients do not half-close), so both sides go */
        h1_close(c, "client_eof");
        return;
    }
    if (c->x != NULL)
        exchange_client_gone(c->x, VG_R_CLIENT_CLOSED);
    if ((what & CIO_ERROR) && log_enabled(LOG_DEBUG)) {
        unsigned long e = cio_ssl_error(c->io);
        const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;

        snprintf(detail, sizeof(detail), "%s",
                 e != 0 ? (r != NULL ? r : "TLS error") : strerror(cio_sys_error(c->io)));
        h1_log(c, LOG_DEBUG, "client_error", "client_io", detail);
    }
    h1_close(c, (what & CIO_EOF) ? "client_eof" : "client_error");
}

static void client_event_cb(struct cio *io, short what, void *arg)
{
    struct h1conn *c = arg;

    (void)io;
    h1_enter(c);
    if (what & (CIO_EOF | CIO_ERROR)) {
        h1_client_gone(c, what);
    } else if (what & CIO_TIMEOUT) {
        h1_close(c, "client_timeout");
    }
    h1_leave(c);
}

static void h1_timer_cb(struct dlq_entry *e)
{
    struct h1conn *c = (struct h1conn *)(void *)((char *)e - offsetof(struct h1conn, timer));

    h1_enter(c);
    switch (c->state) {
    case H1_S_IDLE:
        if (c->buf_timer)
            h1_release_buffers(c);
        else
            h1_close(c, "idle_timeout");
        break;
    case H1_S_EXCHANGE:
        if (c->buf_timer)
            h1_release_buffers(c);
        else
            h1_close(c, "timeout");
        break;
    case H1_S_HEAD:
        h1_close(c, "head_timeout");
        break;
    default:
        h1_close(c, "timeout");
        break;
    }
    h1_leave(c);
}

/* ---- the worker's view ------------------------------------------------------------------ */

static void h1_link_drain(struct worker_link *l)
{
    struct h1conn *c = (struct h1conn *)l;

    c->cc.draining = true;
    if (c->state == H1_S_PEEK || c->state == H1_S_IDLE)
        h1_close(c, "draining");
}

static void h1_link_abort(struct worker_link *l)
{
    h1_close((struct h1conn *)l, "shutdown");
}

static const struct worker_link_ops h1_link_ops = {h1_link_drain, h1_link_abort};

int h1conn_start(struct worker_link *from, struct exch_conn *cc, struct cio *io, bool busy,
                 const struct h1conn_hooks *hooks)
{
    struct h1conn *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        cio_free(&io);
        free(c);
        return -1;
    }
    exch_conn_take(&c->cc, cc);
    c->cc.proto = "http/1.1";
    c->hooks = hooks;
    c->busy = busy;
    if (from == NULL)
        c->cc.id = worker_attach(c->cc.w, &c->link, &h1_link_ops);
    else
        worker_replace(c->cc.w, from, &c->link, &h1_link_ops);
    c->io = io;
    cio_setcb(io, client_read_cb, client_write_cb, client_event_cb, c);
    cio_set_timeouts(io, NULL, NULL);
    cio_set_wlow(io, 0);
    cio_read(io, true);
    h1_enter(c);
    if (busy)
        h1_busy(c);
    else
        h1_begin(c);
    h1_leave(c);
    return 0;
}
