/*
 * h2conn.c - the HTTP/2 client transport (see h2conn.h): an nghttp2 server session over the
 * client's TLS bufferevent, one exchange per stream, flow control, the abuse limits of SPEC §10
 * and the connection's timers.
 *
 * Guarantees:
 * - Frames are parsed and written by nghttp2 only; its HTTP messaging checks are off and
 *   h2msg.c applies RFC 9113 §8 to every request before an exchange sees it.
 * - Flow control: a request's DATA is given back to the client's stream window only once its
 *   exchange took it, so a stream whose upstream is slow stalls only itself; a response waits
 *   in at most VG_H2_STREAM_OUT_CAP bytes per stream, and nghttp2 writes DATA only while the
 *   connection's output is under VG_CONN_OUT_CAP.
 * - Abuse: at most VG_H2_MAX_STREAMS concurrent streams, an HPACK table of 4096 bytes; a client
 *   that resets streams faster than they complete, or floods CONTINUATION, SETTINGS, PING,
 *   PRIORITY or empty DATA frames gets GOAWAY (ENHANCE_YOUR_CALM) and is closed.
 * - The transport never calls an exchange from inside nghttp2's callbacks for events the
 *   exchange did not ask for: buffered body bytes and drain notices run from the loop.
 * - h2_close() is the only teardown; it frees every stream (and its exchange) first.
 */
#include "proxy/h2conn.h"
#include "audit/log.h"
#include "common/caps.h"
#include "common/defer.h"
#include "proxy/bevio.h"
#include "proxy/exchange.h"
#include "http/h2msg.h"
#include "proxy/listen.h"
#include "proxy/metrics.h"
#include "proxy/reason.h"
#include "proxy/tls.h"
#include "proxy/worker.h"

#include <stdint.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

/* SPEC §4's timeouts as for HTTP/1.1 (--timeout): idle with no stream open, a header block
 * begun and not finished, a stream with no DATA either way */
#define H2_T(c, k)     vg_timeout(&(c)->cc.w->sh->timeouts, (k))
#define H2_LAZY_BLOCKS 4 /* large blocks of a session kept as mappings (see h2_malloc) */
#define H2_T_TICK      5 /* how often deadlines are looked at, at most */
#define H2_T_LINGER    2 /* after the last frame: input read and discarded this long */
#define H2_LINGER_MAX  (1024 * 1024) /* ... or until this much of it */
#define H2_NV_MAX      (VG_HEAD_MAX_FIELDS * 2 + 8)

struct h2s;

struct h2conn {
    struct worker_link link; /* first: the worker's list holds &c->link */
    struct exch_conn cc;
    struct bevio io;
    nghttp2_session *ng;
    struct event *timer;  /* the tick of deadlines */
    struct event *resume; /* streams with work for their exchange, run from the loop */
    struct h2s *work;     /* ... queued for it */
    struct h2s *batch;    /* ... taken by the resume event now */
    size_t out_bytes;     /* response bytes waiting in the streams' out buffers */
    nghttp2_mem mem;      /* the session's allocator (below) */
    struct h2_lazy {
        void *p;
        size_t n;
    } lazy[H2_LAZY_BLOCKS]; /* the session's mapped blocks */
    struct h2s *streams;
    size_t nstreams;
    time_t idle_since;     /* no stream open since */
    struct defer defer;    /* callbacks on the stack; freed at depth 0 after h2_close */
    bool busy;             /* over the connection limit: 503 to each request, then GOAWAY */
    bool draining;         /* GOAWAY sent: open streams finish, then the connection closes */
    bool calm;             /* GOAWAY ENHANCE_YOUR_CALM sent: close once it is out */
    const char *lingering; /* the session is over: the close reason, input discarded */
    size_t lingered;
    /* abuse counters over the current flood window */
    time_t flood_start;
    unsigned settings, pings, priorities, empty_data, resets, completed;
    size_t head_bytes; /* bytes read while a header block is under way (CONTINUATION flood) */
    time_t head_since; /* a header block begun (0: none) */
};

enum h2s_state {
    H2S_HEADERS = 0, /* the request's field section is arriving */
    H2S_EXCHANGE,    /* its exchange has it */
    H2S_ENDED,       /* the exchange finished; DATA may still be on its way out */
};

struct h2s {
    struct h2s *prev, *next;
    struct h2conn *c;
    int32_t id;
    enum h2s_state state;
    struct h2req req;
    struct exchange *x;
    struct timespec t0;
    time_t last_io;
    struct evbuffer *in;  /* request DATA the exchange has not taken yet */
    struct evbuffer *out; /* response bytes for DATA frames */
    nghttp2_nv *tnv;      /* trailers waiting for the end of the DATA */
    size_t ntnv;
    char *tbuf;
    bool body_wanted; /* the exchange takes body bytes (ops->more came) */
    bool body_paused; /* exchange_body said stop */
    bool in_end;      /* END_STREAM from the client */
    bool body_ended;  /* exchange_body_end was called */
    bool out_eof;     /* the response is complete on the exchange's side */
    bool deferred;    /* the data provider is waiting for bytes */
    bool want_drain;  /* the exchange waits for room */
    struct h2s **wq;  /* the queue it is on (c->work or c->batch), or NULL */
    struct h2s *wprev, *wnext;
    bool resp_final; /* the final response head went out */
};

static void h2_free(struct h2conn *c);
static void h2_send(struct h2conn *c);

/* ---- small helpers ---------------------------------------------------------------------- */

static void h2_log(const struct h2conn *c, enum log_level lvl, const char *event,
                   const char *reason)
{
    struct log_fields f = LOG_FIELDS_INIT;

    if (!log_enabled(lvl))
        return;
    f.conn = c->cc.id;
    f.client = c->cc.client_addr;
    f.listener = c->cc.la->label;
    f.host = c->cc.host[0] != '\0' ? c->cc.host : NULL;
    f.reason = reason;
    log_event(lvl, event, &f);
}

/* The tick: H2_T_TICK, or half the shortest of the three timeouts it watches (>= 1 s). */
static int h2_tick(const struct h2conn *c)
{
    int t = H2_T_TICK;
    const enum vg_timeout ks[] = {VG_T_IDLE, VG_T_HEAD, VG_T_BODY_IDLE};

    for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
        if (H2_T(c, ks[i]) / 2 < t)
            t = H2_T(c, ks[i]) / 2;
    }
    return t < 1 ? 1 : t;
}

static void h2_enter(struct h2conn *c)
{
    defer_enter(&c->defer);
}

static void h2_leave(struct h2conn *c)
{
    if (defer_leave(&c->defer))
        h2_free(c);
}

static time_t h2_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

static void wq_unlink(struct h2s *s)
{
    if (s->wq == NULL)
        return;
    if (s->wprev != NULL)
        s->wprev->wnext = s->wnext;
    else
        *s->wq = s->wnext;
    if (s->wnext != NULL)
        s->wnext->wprev = s->wprev;
    s->wq = NULL;
    s->wprev = s->wnext = NULL;
}

/* Queues s for the resume event (buffered body bytes, a drain notice, a body end): the event
 * runs the streams queued, not every stream open. */
static void h2_work(struct h2s *s)
{
    struct h2conn *c = s->c;

    if (s->wq == NULL) {
        s->wq = &c->work;
        s->wprev = NULL;
        s->wnext = c->work;
        if (c->work != NULL)
            c->work->wprev = s;
        c->work = s;
    }
    if (c->resume != NULL)
        event_active(c->resume, EV_TIMEOUT, 1);
}

/* GOAWAY with code; the connection closes once it is written. */
static void h2_goaway(struct h2conn *c, uint32_t code, const char *reason)
{
    if (c->calm)
        return;
    h2_log(c, LOG_WARN, "h2_goaway", reason);
    c->calm = code != NGHTTP2_NO_ERROR;
    nghttp2_session_terminate_session(c->ng, code);
}

/* ---- streams ---------------------------------------------------------------------------- */

static struct h2s *h2s_new(struct h2conn *c, int32_t id)
{
    struct h2s *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return NULL;
    s->in = evbuffer_new();
    s->out = evbuffer_new();
    if (s->in == NULL || s->out == NULL) {
        if (s->in != NULL)
            evbuffer_free(s->in);
        if (s->out != NULL)
            evbuffer_free(s->out);
        free(s);
        return NULL;
    }
    s->c = c;
    s->id = id;
    h2req_init(&s->req);
    clock_gettime(CLOCK_MONOTONIC, &s->t0);
    s->last_io = s->t0.tv_sec;
    s->next = c->streams;
    if (c->streams != NULL)
        c->streams->prev = s;
    c->streams = s;
    c->nstreams++;
    return s;
}

/* The one teardown of a stream (nghttp2 closed it, or the connection goes). */
static void h2s_free(struct h2s *s)
{
    struct h2conn *c = s->c;

    wq_unlink(s);
    exchange_free(&s->x);
    wq_unlink(s); /* the exchange's last report may have queued it */
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    c->nstreams--;
    if (c->nstreams == 0)
        c->idle_since = h2_now();
    h2req_free(&s->req);
    evbuffer_free(s->in);
    c->out_bytes -= evbuffer_get_length(s->out);
    evbuffer_free(s->out);
    free(s->tnv);
    free(s->tbuf);
    free(s);
}

/* Gives n bytes of a stream's DATA back to the client's stream window. */
static void h2s_consumed(struct h2s *s, size_t n)
{
    if (n > 0)
        nghttp2_session_consume_stream(s->c->ng, s->id, n);
}

/* ---- the exchange's side of a stream ---------------------------------------------------- */

static ssize_t h2_data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
                            uint32_t *flags, nghttp2_data_source *src, void *user);

static int h2_resp_head(void *t, struct http_head *h, enum exch_body body, uint64_t len, bool close)
{
    struct h2s *s = t;
    nghttp2_nv nv[H2_NV_MAX];
    char buf[VG_HEAD_MAX_BYTES];
    nghttp2_data_provider dp = {{.ptr = s}, h2_data_read};
    int n = h2msg_nv(h, h->status, body == EXCH_BODY_LENGTH, len, nv, H2_NV_MAX, buf, sizeof(buf));

    (void)close;
    if (n < 0)
        return -1;
    s->last_io = h2_now();
    if (h->status < 200)
        return nghttp2_submit_headers(s->c->ng, NGHTTP2_FLAG_NONE, s->id, NULL, nv, (size_t)n,
                                      NULL) < 0
                   ? -1
                   : 0;
    s->resp_final = true;
    return nghttp2_submit_response(s->c->ng, s->id, nv, (size_t)n,
                                   body == EXCH_BODY_NONE ? NULL : &dp) < 0
               ? -1
               : 0;
}

static void h2s_resume_data(struct h2s *s)
{
    if (s->deferred) {
        s->deferred = false;
        nghttp2_session_resume_data(s->c->ng, s->id);
    }
}

static int h2_resp_body(void *t, struct evbuffer *buf)
{
    struct h2s *s = t;
    size_t n = evbuffer_get_length(buf);

    s->last_io = h2_now();
    if (evbuffer_add_buffer(s->out, buf) < 0)
        return -1;
    s->c->out_bytes += n;
    h2s_resume_data(s);
    return 0;
}

/* Keeps the trailers (copied) for the end of the DATA. 0 or -1. */
static int h2s_keep_trailers(struct h2s *s, struct http_head *trailers)
{
    nghttp2_nv nv[H2_NV_MAX];
    char buf[VG_HEAD_MAX_BYTES];
    size_t total = 0, off = 0;
    int n = h2msg_nv(trailers, -1, false, 0, nv, H2_NV_MAX, buf, sizeof(buf));

    if (n <= 0)
        return n;
    for (int i = 0; i < n; i++)
        total += nv[i].namelen + nv[i].valuelen;
    s->tnv = calloc((size_t)n, sizeof(*s->tnv));
    s->tbuf = malloc(total + 1);
    if (s->tnv == NULL || s->tbuf == NULL)
        return -1;
    for (int i = 0; i < n; i++) {
        s->tnv[i] = nv[i];
        memcpy(s->tbuf + off, nv[i].name, nv[i].namelen);
        s->tnv[i].name = (uint8_t *)s->tbuf + off;
        off += nv[i].namelen;
        memcpy(s->tbuf + off, nv[i].value, nv[i].valuelen);
        s->tnv[i].value = (uint8_t *)s->tbuf + off;
        off += nv[i].valuelen;
    }
    s->ntnv = (size_t)n;
    return 0;
}

static int h2_resp_end(void *t, struct http_head *trailers)
{
    struct h2s *s = t;

    if (trailers != NULL && h2s_keep_trailers(s, trailers) < 0)
        return -1;
    s->out_eof = true;
    h2s_resume_data(s);
    return 0;
}

/* An answer of vaultgate's own on this stream: Proxy-Status and a short text body. */
static int h2_resp_error(void *t, int status, const char *type, const char *details,
                         const char *host)
{
    struct h2s *s = t;
    struct evbuffer *ps = evbuffer_new();
    struct http_head h;
    size_t before = evbuffer_get_length(s->out);
    int rc = -1;

    httphead_init(&h);
    rc = ps == NULL ? -1 : http1_error_parts(status, type, details, host, ps, s->out);
    s->c->out_bytes += evbuffer_get_length(s->out) - before;
    if (rc < 0)
        goto out;
    rc = -1;
    if (httphead_set_status_line(&h, 2, status, "", 0) == 0 &&
        httphead_add(&h, "proxy-status", 12, (const char *)evbuffer_pullup(ps, -1),
                     evbuffer_get_length(ps)) == 0 &&
        httphead_add(&h, "content-type", 12, "text/plain; charset=utf-8", 25) == 0 &&
        httphead_add(&h, "cache-control", 13, "no-store", 8) == 0 &&
        h2_resp_head(s, &h, EXCH_BODY_LENGTH, evbuffer_get_length(s->out), false) == 0) {
        s->out_eof = true;
        rc = 0;
    }
out:
    httphead_reset(&h);
    if (ps != NULL)
        evbuffer_free(ps);
    return rc;
}

/* Room for a stream's response: below its own cap, and while the connection as a whole (every
 * stream's waiting bytes and the socket's output) holds less than VG_CONN_OUT_CAP. */
static size_t h2_room(void *t)
{
    struct h2s *s = t;
    size_t have = evbuffer_get_length(s->out), total = bevio_pending(&s->c->io) + s->c->out_bytes;
    if (have < VG_H2_STREAM_OUT_CAP && total < VG_CONN_OUT_CAP)
        return VG_H2_STREAM_OUT_CAP - have;
    s->want_drain = true;
    return 0;
}

static void h2_more(void *t)
{
    struct h2s *s = t;

    s->body_wanted = true;
    s->body_paused = false;
    h2_work(s); /* what waits in s->in goes in from the loop */
}

/* Frames go out from the loop, never inside the exchange's call: writing may end the stream
 * (nghttp2 closes it once both sides sent END_STREAM), which frees the exchange. */
static void h2_flush(void *t)
{
    struct h2s *s = t;

    if (s->c->resume != NULL)
        event_active(s->c->resume, EV_TIMEOUT, 1);
}

static void h2_finished(void *t, enum exch_end how)
{
    struct h2s *s = t;

    s->state = H2S_ENDED;
    if (how == EXCH_END_ABORT || how == EXCH_END_UPGRADE || how == EXCH_END_CONNECT)
        nghttp2_submit_rst_stream(s->c->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    else
        s->c->completed++;
    /* the exchange is done with this stream; what it produced waits in s->out */
    exchange_free(&s->x);
    if (s->c->busy)
        h2_goaway(s->c, NGHTTP2_NO_ERROR, "connection_limit");
    h2_work(s); /* the bytes go out from the loop */
}

static const struct exchange_ops h2_exchange_ops = {
    h2_resp_head, h2_resp_body, h2_resp_end, h2_resp_error, h2_room, h2_more, h2_flush, h2_finished,
};

/* nghttp2 asks for the next DATA of a response. */
static ssize_t h2_data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
                            uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct h2s *s = src->ptr;
    size_t n = evbuffer_get_length(s->out);

    if (n == 0 && !s->out_eof) {
        s->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    if (n > len)
        n = len;
    if (n > 0 && evbuffer_remove(s->out, buf, n) != (int)n)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    s->c->out_bytes -= n;
    s->last_io = h2_now();
    if (s->want_drain && evbuffer_get_length(s->out) <= VG_H2_STREAM_OUT_CAP / 2)
        h2_work(s);
    if (s->out_eof && evbuffer_get_length(s->out) == 0) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (s->ntnv > 0) {
            *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
            nghttp2_submit_trailer(ng, id, s->tnv, s->ntnv);
        }
    }
    return (ssize_t)n;
}

/* ---- requests --------------------------------------------------------------------------- */

/* The request's field section is complete: its exchange takes it, or it is refused. */
static void h2s_request(struct h2s *s, bool end_stream)
{
    struct h2conn *c = s->c;
    enum h2req_verdict v = h2req_finish(&s->req, end_stream);

    if (v == H2REQ_MALFORMED) {
        h2_log(c, LOG_INFO, "h2_stream_refused", s->req.why);
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_PROTOCOL_ERROR);
        return;
    }
    s->x = exchange_new(&c->cc, &h2_exchange_ops, s, &s->t0);
    if (s->x == NULL) {
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        return;
    }
    exchange_count_in(s->x, s->req.bytes);
    s->state = H2S_EXCHANGE;
    s->in_end = end_stream;
    s->body_ended = end_stream;
    if (c->busy)
        exchange_reject(s->x, 503, VG_PS_CONN_LIMIT, "too many connections, retry later",
                        VG_R_CONN_LIMIT);
    else if (v == H2REQ_ANSWER)
        exchange_reject(s->x, s->req.status,
                        s->req.status == 405 ? VG_PS_REQUEST_DENIED : VG_PS_REQUEST_ERROR,
                        s->req.why, s->req.status == 431 ? VG_R_BAD_REQUEST : VG_R_PROTOCOL_ERROR);
    else
        exchange_request(s->x, &s->req.msg);
}

/* Feeds what waits in s->in to the exchange while it takes it; then the end of the body. */
static void h2s_feed(struct h2s *s)
{
    while (s->x != NULL && s->body_wanted && !s->body_paused && evbuffer_get_length(s->in) > 0) {
        struct evbuffer_iovec v;
        int rc;

        if (evbuffer_peek(s->in, -1, NULL, &v, 1) < 1)
            break;
        rc = exchange_body(s->x, v.iov_base, v.iov_len);
        evbuffer_drain(s->in, v.iov_len);
        h2s_consumed(s, v.iov_len);
        if (rc < 0 || s->x == NULL)
            return;
        if (rc == 1)
            s->body_paused = true;
    }
    if (s->x != NULL)
        exchange_flush(s->x);
    if (s->x != NULL && s->in_end && !s->body_ended && evbuffer_get_length(s->in) == 0 &&
        s->body_wanted) {
        s->body_ended = true;
        exchange_body_end(s->x);
    }
}

/* The loop runs what streams left for it: body bytes, body ends, drain notices. */
static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    struct h2conn *c = arg;
    struct h2s *s;

    h2_enter(c);
    /* what is queued now; what the exchanges queue meanwhile waits for the next turn */
    c->batch = c->work;
    c->work = NULL;
    for (s = c->batch; s != NULL; s = s->wnext)
        s->wq = &c->batch;
    while (!defer_freed(&c->defer) && (s = c->batch) != NULL) {
        wq_unlink(s);
        h2s_feed(s);
        if (s->x != NULL && s->want_drain &&
            evbuffer_get_length(s->out) <= VG_H2_STREAM_OUT_CAP / 2 &&
            bevio_pending(&c->io) < VG_CONN_OUT_CAP) {
            s->want_drain = false;
            exchange_drained(s->x);
        }
    }
    if (!defer_freed(&c->defer))
        h2_send(c);
    h2_leave(c);
}

/* ---- nghttp2 callbacks ------------------------------------------------------------------ */

static struct h2s *stream_of(struct h2conn *c, int32_t id)
{
    return nghttp2_session_get_stream_user_data(c->ng, id);
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    struct h2conn *c = user;
    struct h2s *s;

    c->head_bytes = 0;
    c->head_since = h2_now();
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    s = h2s_new(c, f->hd.stream_id);
    if (s == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    nghttp2_session_set_stream_user_data(ng, f->hd.stream_id, s);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    struct h2s *s = stream_of(user, f->hd.stream_id);

    if (s == NULL)
        return 0;
    if (f->headers.cat == NGHTTP2_HCAT_REQUEST) {
        h2req_field(&s->req, name, nlen, value, vlen);
        return 0;
    }
    /* a trailer section of the request: checked, then dropped as for HTTP/1.1 */
    return h2req_trailer_field(name, nlen, value, vlen) < 0 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
                                                            : 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    struct h2conn *c = user;
    struct h2s *s = stream_of(c, id);

    nghttp2_session_consume_connection(ng, len);
    if (s == NULL || s->state != H2S_EXCHANGE || s->x == NULL) {
        if (s != NULL)
            h2s_consumed(s, len); /* answered already: the rest is discarded */
        return 0;
    }
    s->last_io = h2_now();
    exchange_count_in(s->x, len);
    if (h2req_data(&s->req, len, false) < 0)
        return nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_PROTOCOL_ERROR);
    if (evbuffer_add(s->in, data, len) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (s->body_wanted && !s->body_paused)
        h2_work(s);
    return 0;
}

/* Counts a frame of a kind a client could flood with; past the limit, GOAWAY. */
static void h2_flood(struct h2conn *c, unsigned *n, unsigned max, const char *reason)
{
    time_t now = h2_now();

    if (now - c->flood_start >= VG_H2_FLOOD_WINDOW) {
        c->flood_start = now;
        c->settings = c->pings = c->priorities = c->empty_data = c->resets = c->completed = 0;
    }
    if (++*n > max)
        h2_goaway(c, NGHTTP2_ENHANCE_YOUR_CALM, reason);
}

/* PRIORITY frames are dropped unseen once SETTINGS_NO_RFC7540_PRIORITIES is sent: counted here */
static int on_begin_frame(nghttp2_session *ng, const nghttp2_frame_hd *hd, void *user)
{
    struct h2conn *c = user;

    (void)ng;
    if (hd->type == NGHTTP2_PRIORITY)
        h2_flood(c, &c->priorities, VG_H2_MAX_PRIORITY, "priority_flood");
    return 0;
}

/* A connection error nghttp2 answers itself (GOAWAY PROTOCOL_ERROR and the like): logged with
 * nghttp2's fixed description, which quotes nothing the client sent. */
static int on_session_error(nghttp2_session *ng, int code, const char *msg, size_t len, void *user)
{
    struct h2conn *c = user;
    char why[128];

    (void)ng;
    (void)code;
    snprintf(why, sizeof(why), "%.*s", (int)(len < sizeof(why) ? len : sizeof(why) - 1), msg);
    h2_log(c, LOG_INFO, "h2_protocol_error", why);
    return 0;
}

/* A GOAWAY with an error that nghttp2 sent on its own (vaultgate's own were logged already):
 * logged with its debug data, nghttp2's fixed description. */
static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    struct h2conn *c = user;
    char why[128];
    size_t n;

    (void)ng;
    if (f->hd.type != NGHTTP2_GOAWAY || f->goaway.error_code == NGHTTP2_NO_ERROR || c->calm)
        return 0;
    n = f->goaway.opaque_data_len < sizeof(why) - 1 ? f->goaway.opaque_data_len : sizeof(why) - 1;
    memcpy(why, f->goaway.opaque_data, n);
    why[n] = '\0';
    h2_log(c, LOG_INFO, "h2_protocol_error",
           n > 0 ? why : nghttp2_http2_strerror(f->goaway.error_code));
    c->calm = true;
    return 0;
}

static void on_rst(struct h2conn *c, int32_t id)
{
    struct h2s *s = stream_of(c, id);

    if (s == NULL)
        return;
    h2_flood(c, &c->resets, UINT32_MAX, "rapid_reset");
    if (c->resets > VG_H2_MAX_RESETS && c->resets > 2 * c->completed)
        h2_goaway(c, NGHTTP2_ENHANCE_YOUR_CALM, "rapid_reset");
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    struct h2conn *c = user;
    struct h2s *s = stream_of(c, f->hd.stream_id);
    bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

    switch (f->hd.type) {
    case NGHTTP2_HEADERS:
        c->head_since = 0;
        if (s != NULL && f->headers.cat == NGHTTP2_HCAT_REQUEST)
            h2s_request(s, end);
        else if (s != NULL && end)
            s->in_end = true; /* after request trailers */
        break;
    case NGHTTP2_DATA:
        if (f->hd.length == 0 && !end)
            h2_flood(c, &c->empty_data, VG_H2_MAX_EMPTY_DATA, "empty_data_flood");
        if (s != NULL && end && s->state == H2S_EXCHANGE) {
            if (h2req_data(&s->req, 0, true) < 0)
                return nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                                 NGHTTP2_PROTOCOL_ERROR);
            s->in_end = true;
            h2_work(s);
        }
        break;
    case NGHTTP2_SETTINGS:
        if (!(f->hd.flags & NGHTTP2_FLAG_ACK))
            h2_flood(c, &c->settings, VG_H2_MAX_SETTINGS, "settings_flood");
        break;
    case NGHTTP2_PING:
        if (!(f->hd.flags & NGHTTP2_FLAG_ACK))
            h2_flood(c, &c->pings, VG_H2_MAX_PINGS, "ping_flood");
        break;
    case NGHTTP2_RST_STREAM:
        on_rst(c, f->hd.stream_id);
        break;
    default:
        break;
    }
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
    struct h2conn *c = user;
    struct h2s *s = stream_of(c, id);

    if (s == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    if (s->x != NULL)
        exchange_client_gone(s->x, VG_R_CLIENT_CLOSED);
    h2s_free(s);
    if (c->draining && c->nstreams == 0)
        nghttp2_session_terminate_session(ng, NGHTTP2_NO_ERROR);
    return 0;
}

/* ---- the session ------------------------------------------------------------------------ */

/* Frames nghttp2 has for the client, while the socket takes them (VG_CONN_OUT_CAP). */
static void h2_send(struct h2conn *c)
{
    if (c->lingering != NULL)
        return;
    for (;;) {
        const uint8_t *p;
        ssize_t n;

        if (bevio_pending(&c->io) >= VG_CONN_OUT_CAP) {
            bufferevent_setwatermark(c->io.bev, EV_WRITE, VG_CONN_OUT_CAP / 2, 0);
            break;
        }
        n = nghttp2_session_mem_send(c->ng, &p);
        if (n < 0) {
            c->calm = true;
            break;
        }
        if (n == 0)
            break;
        if (evbuffer_add(c->io.stage, p, (size_t)n) < 0)
            break;
    }
    bevio_push(&c->io);
}

/* The only teardown: every stream (and exchange) first, then the socket. */
static void h2_close(struct h2conn *c, const char *reason)
{
    if (defer_freed(&c->defer))
        return;
    h2_log(c, LOG_DEBUG, "conn_close", reason);
    while (c->streams != NULL)
        h2s_free(c->streams);
    if (c->io.bev != NULL)
        bufferevent_disable(c->io.bev, EV_READ | EV_WRITE);
    if (c->timer != NULL)
        evtimer_del(c->timer);
    if (c->resume != NULL)
        event_del(c->resume);
    worker_detach(c->cc.w, &c->link);
    if (defer_free(&c->defer))
        h2_free(c);
}

static void h2_free(struct h2conn *c)
{
    while (c->streams != NULL)
        h2s_free(c->streams);
    nghttp2_session_del(c->ng);
    if (c->io.bev != NULL) {
        bufferevent_setcb(c->io.bev, NULL, NULL, NULL, NULL);
        bufferevent_free(c->io.bev);
    }
    if (c->io.stage != NULL)
        evbuffer_free(c->io.stage);
    if (c->timer != NULL)
        event_free(c->timer);
    if (c->resume != NULL)
        event_free(c->resume);
    exch_conn_release(&c->cc);
    free(c);
}

/* Sends close_notify and FIN, then reads and discards for a short while: a client still sending
 * (a flood, a body nobody reads) would otherwise get an RST that destroys the GOAWAY unread. */
static void h2_linger(struct h2conn *c, const char *reason)
{
    SSL *ssl = bufferevent_openssl_get_ssl(c->io.bev);
    evutil_socket_t fd = bufferevent_getfd(c->io.bev);
    struct timeval t = {H2_T_LINGER, 0};

    c->lingering = reason;
    while (c->streams != NULL)
        h2s_free(c->streams);
    evbuffer_drain(bufferevent_get_input(c->io.bev),
                   evbuffer_get_length(bufferevent_get_input(c->io.bev)));
    evtimer_add(c->timer, &t);
    if (ssl != NULL)
        SSL_shutdown(ssl);
    /* under a TLS filter (intercepted CONNECT) the FIN waits for the timer's close */
    if (fd >= 0 && bufferevent_get_underlying(c->io.bev) == NULL)
        shutdown(fd, SHUT_WR);
    bufferevent_disable(c->io.bev, EV_WRITE);
    bufferevent_enable(c->io.bev, EV_READ);
}

/* After a read or write: once nghttp2 has nothing left to do and the output is out, linger. */
static void h2_maybe_close(struct h2conn *c)
{
    if (defer_freed(&c->defer) || c->lingering != NULL)
        return;
    if (!nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng) &&
        bevio_pending(&c->io) == 0)
        h2_linger(c, c->calm ? "goaway" : "session_end");
}

static void h2_input(struct h2conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->io.bev);

    bevio_pull(c->io.bev);
    while (!defer_freed(&c->defer) && evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;
        ssize_t n;

        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            break;
        /* nghttp2 1.52 reads CONTINUATION frames without a callback: what a header block may
         * take on the wire is bounded here instead (CVE-2024-27316) */
        if (c->head_since != 0 && (c->head_bytes += v.iov_len) > VG_H2_HEADER_BLOCK_MAX) {
            h2_goaway(c, NGHTTP2_ENHANCE_YOUR_CALM, "continuation_flood");
            evbuffer_drain(in, evbuffer_get_length(in));
            break;
        }
        n = nghttp2_session_mem_recv(c->ng, v.iov_base, v.iov_len);
        if (n < 0) {
            /* a fatal error leaves no frame queued: the GOAWAY is ours (Debian's 1.52 stops a
             * ninth CONTINUATION with NGHTTP2_ERR_TOO_MANY_CONTINUATIONS) */
            if (n == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS)
                h2_goaway(c, NGHTTP2_ENHANCE_YOUR_CALM, "continuation_flood");
            else if (n == NGHTTP2_ERR_FLOODED)
                h2_goaway(c, NGHTTP2_ENHANCE_YOUR_CALM, "flood");
            else if (!c->calm) {
                h2_log(c, LOG_INFO, "h2_protocol_error", nghttp2_strerror((int)n));
                c->calm = true;
                if (n != NGHTTP2_ERR_BAD_CLIENT_MAGIC)
                    nghttp2_session_terminate_session(c->ng, NGHTTP2_PROTOCOL_ERROR);
            }
            evbuffer_drain(in, evbuffer_get_length(in));
            break;
        }
        evbuffer_drain(in, (size_t)n);
    }
    if (defer_freed(&c->defer))
        return;
    h2_send(c);
    if (c->calm)
        bufferevent_disable(c->io.bev, EV_READ);
    h2_maybe_close(c);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
    struct h2conn *c = arg;

    h2_enter(c);
    if (c->lingering != NULL) {
        c->lingered += evbuffer_get_length(bufferevent_get_input(bev));
        evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
        if (c->lingered > H2_LINGER_MAX)
            h2_close(c, c->lingering);
    } else {
        h2_input(c);
    }
    h2_leave(c);
}

static void write_cb(struct bufferevent *bev, void *arg)
{
    struct h2conn *c = arg;

    h2_enter(c);
    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    h2_send(c);
    for (struct h2s *s = c->streams; s != NULL; s = s->next) {
        if (s->want_drain)
            h2_work(s);
    }
    h2_maybe_close(c);
    h2_leave(c);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct h2conn *c = arg;

    h2_enter(c);
    if (c->lingering != NULL)
        h2_close(c, c->lingering);
    else if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        h2_close(c, (what & BEV_EVENT_EOF) ? "client_eof" : "client_error");
    else if (what & BEV_EVENT_TIMEOUT)
        h2_close(c, "client_timeout");
    h2_leave(c);
}

/* The tick: idle connection, a header block that takes too long, streams idle both ways. */
static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct h2conn *c = arg;
    struct timeval tick = {h2_tick(c), 0};
    time_t now = h2_now();

    h2_enter(c);
    if (c->lingering != NULL) {
        h2_close(c, c->lingering);
        h2_leave(c);
        return;
    }
    if (c->nstreams == 0 && now - c->idle_since >= H2_T(c, VG_T_IDLE)) {
        h2_goaway(c, NGHTTP2_NO_ERROR, "idle_timeout");
        c->calm = true;
    } else if (c->head_since != 0 && now - c->head_since >= H2_T(c, VG_T_HEAD)) {
        h2_goaway(c, NGHTTP2_PROTOCOL_ERROR, "head_timeout");
    }
    for (struct h2s *s = c->streams; s != NULL; s = s->next) {
        /* body-idle while a body moves either way; waiting for the response head is the
         * exchange's response-head timeout, as for HTTP/1.1 */
        bool moving = s->state != H2S_HEADERS && (!s->in_end || s->resp_final);

        if (moving && now - s->last_io >= H2_T(c, VG_T_BODY_IDLE))
            nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
    }
    h2_send(c);
    h2_maybe_close(c);
    if (!defer_freed(&c->defer) && c->lingering == NULL)
        evtimer_add(c->timer, &tick);
    h2_leave(c);
}

/* ---- the worker's view ------------------------------------------------------------------ */

static void h2_link_drain(struct worker_link *l)
{
    struct h2conn *c = (struct h2conn *)l;

    if (c->lingering != NULL)
        return;
    c->cc.draining = true;
    c->draining = true;
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->ng),
                          NGHTTP2_NO_ERROR, NULL, 0);
    if (c->nstreams == 0)
        nghttp2_session_terminate_session(c->ng, NGHTTP2_NO_ERROR);
    h2_enter(c);
    h2_send(c);
    h2_maybe_close(c);
    h2_leave(c);
}

static void h2_link_abort(struct worker_link *l)
{
    h2_close((struct h2conn *)l, "shutdown");
}

static const struct worker_link_ops h2_link_ops = {h2_link_drain, h2_link_abort};

/* ---- session memory --------------------------------------------------------------------- */

/*
 * nghttp2 1.52 gives every session a 16 KiB output frame buffer and a 4 KiB table up front.
 * Blocks of H2_LAZY_MIN bytes and more are mapped instead of taken from the heap, and their
 * sizes kept beside the connection rather than in them: a page counts towards the process only
 * once something is written to it, so an idle connection that never sent a large frame holds
 * one page of its frame buffer, not four or five, and none of an unused table.
 */
#if defined(__SANITIZE_ADDRESS__)
#define H2_LAZY_MIN SIZE_MAX /* under ASan every block stays on the heap, where it is checked */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define H2_LAZY_MIN SIZE_MAX
#endif
#endif
#ifndef H2_LAZY_MIN
#define H2_LAZY_MIN 4096
#endif

static void *h2_malloc(size_t n, void *ud)
{
    struct h2conn *c = ud;
    void *p;

    if (n < H2_LAZY_MIN)
        return malloc(n);
    for (size_t i = 0; i < H2_LAZY_BLOCKS; i++) {
        if (c->lazy[i].p != NULL)
            continue;
        p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        c->lazy[i].p = p;
        c->lazy[i].n = n;
        return p;
    }
    return malloc(n); /* more large blocks than expected: the heap */
}

/* The slot of a mapped block, or NULL for a heap block. */
static struct h2_lazy *h2_lazy_of(struct h2conn *c, void *p)
{
    for (size_t i = 0; p != NULL && i < H2_LAZY_BLOCKS; i++) {
        if (c->lazy[i].p == p)
            return &c->lazy[i];
    }
    return NULL;
}

static void h2_free_block(void *p, void *ud)
{
    struct h2_lazy *l = h2_lazy_of(ud, p);

    if (l == NULL) {
        free(p);
        return;
    }
    munmap(l->p, l->n);
    l->p = NULL;
}

static void *h2_calloc(size_t nmemb, size_t size, void *ud)
{
    struct h2conn *c = ud;
    void *p;

    if (size != 0 && nmemb > SIZE_MAX / size)
        return NULL;
    p = h2_malloc(nmemb * size, ud);
    if (p != NULL && h2_lazy_of(c, p) == NULL)
        memset(p, 0, nmemb * size); /* a mapping is zero already, and stays untouched */
    return p;
}

static void *h2_realloc(void *p, size_t n, void *ud)
{
    struct h2_lazy *l = h2_lazy_of(ud, p);
    size_t old;
    void *np;

    if (p == NULL)
        return h2_malloc(n, ud);
    if (l == NULL && n < H2_LAZY_MIN)
        return realloc(p, n);
    old = l != NULL ? l->n : malloc_usable_size(p);
    if ((np = h2_malloc(n, ud)) == NULL)
        return NULL;
    memcpy(np, p, old < n ? old : n);
    h2_free_block(p, ud);
    return np;
}

/* ---- start ------------------------------------------------------------------------------ */

static int h2_session_new(struct h2conn *c)
{
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, VG_H2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, VG_H2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, VG_H2_HPACK_TABLE},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, VG_HEAD_MAX_BYTES + 32 * VG_HEAD_MAX_FIELDS},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    int rc = -1;

    if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0)
        goto out;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_begin_frame_callback(cb, on_begin_frame);
    nghttp2_session_callbacks_set_error_callback2(cb, on_session_error);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_option_set_no_http_messaging(opt, 1);
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, VG_H2_HPACK_TABLE);
    c->mem = (nghttp2_mem){c, h2_malloc, h2_free_block, h2_calloc, h2_realloc};
    if (nghttp2_session_server_new3(&c->ng, cb, c, opt, &c->mem) != 0)
        goto out;
    if (nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0)
        goto out;
    rc = 0;
out:
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    return rc;
}

int h2conn_start(struct worker_link *from, struct exch_conn *cc, struct bufferevent *bev, bool busy)
{
    struct h2conn *c = calloc(1, sizeof(*c));
    struct timeval tick = {H2_T_TICK, 0};

    if (c == NULL) {
        bufferevent_free(bev);
        return -1;
    }
    c->cc = *cc;
    c->cc.proto = "h2";
    cc->policy = NULL; /* the cache moved here */
    c->io.bev = bev;
    c->busy = busy;
    c->io.stage = evbuffer_new();
    c->timer = evtimer_new(c->cc.w->base, timer_cb, c);
    c->resume = event_new(c->cc.w->base, -1, 0, resume_cb, c);
    c->idle_since = c->flood_start = h2_now();
    if (c->io.stage == NULL || c->timer == NULL || c->resume == NULL || h2_session_new(c) < 0) {
        (void)defer_free(&c->defer);
        h2_free(c);
        return -1;
    }
    worker_replace(c->cc.w, from, &c->link, &h2_link_ops);
    bufferevent_setcb(bev, read_cb, write_cb, event_cb, c);
    bufferevent_setwatermark(bev, EV_READ, 0, VG_CONN_IN_MAX);
    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    bufferevent_set_timeouts(bev, NULL, NULL);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    tick.tv_sec = h2_tick(c);
    evtimer_add(c->timer, &tick);
    h2_enter(c);
    h2_input(c); /* the client's preface may already be here */
    h2_leave(c);
    return 0;
}
