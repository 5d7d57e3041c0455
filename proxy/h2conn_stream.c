/*
 * h2conn_stream.c - the streams of the HTTP/2 client transport (see h2conn.h, h2conn_int.h):
 * one struct h2s and one exchange per stream, the exchange's callbacks (struct exchange_ops),
 * the response's DATA provider, and the helpers the connection's file shares with it.
 *
 * Guarantees:
 * - A request reaches an exchange only once h2msg.c found its field section well-formed; a
 *   malformed one resets the stream, nothing of it goes upstream.
 * - Request DATA is given back to the client's stream window only once the exchange took it;
 *   a response waits in at most VG_H2_STREAM_OUT_CAP bytes per stream (room() says stop), and
 *   no stream gets room while the connection holds VG_CONN_OUT_CAP.
 * - The exchange is never called from inside its own callbacks for what it did not ask for:
 *   body bytes, body ends and drain notices wait on the connection's queue for the loop.
 * - h2s_free() is a stream's only teardown, and it frees the exchange first.
 */
#include "proxy/h2conn_int.h"
#include "proxy/h2conn.h"
#include "common/caps.h"
#include "proxy/reason.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define H2_NV_MAX (VG_HEAD_MAX_FIELDS * 2 + 8)

/* ---- helpers the connection shares ------------------------------------------------------ */

void h2_log(const struct h2conn *c, enum log_level lvl, const char *event, const char *reason)
{
    exch_conn_log(&c->cc, lvl, event, reason, NULL);
}

time_t h2_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

void h2s_unqueue(struct h2s *s)
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
void h2s_queue(struct h2s *s)
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
void h2_goaway(struct h2conn *c, uint32_t code, const char *reason)
{
    if (c->calm)
        return;
    h2_log(c, LOG_WARN, "h2_goaway", reason);
    c->calm = code != NGHTTP2_NO_ERROR;
    nghttp2_session_terminate_session(c->ng, code);
}

/* ---- streams ---------------------------------------------------------------------------- */

/*
 * The worker's spare streams: a stream's memory with its two buffers (empty) and its request's
 * head storage (wiped, kept within httphead_clear's bounds), kept for the next stream of any
 * HTTP/2 connection of the worker, at most VG_WORKER_H2_STREAMS (a stack; beyond that freed).
 */
struct h2s_spares {
    size_t n;
    struct h2s *s[VG_WORKER_H2_STREAMS];
};

static struct h2s_spares *h2s_spares(struct worker *w)
{
    void **st = w != NULL ? worker_module_state(w, &h2stream_worker_module) : NULL;

    return st != NULL ? *st : NULL;
}

/* Frees a stream's memory and what it holds (its request wiped). */
static void h2s_release(struct h2s *s)
{
    h2req_free(&s->req);
    if (s->in != NULL)
        evbuffer_free(s->in);
    if (s->out != NULL)
        evbuffer_free(s->out);
    free(s->tnv);
    free(s->tbuf);
    free(s);
}

/* A stream's memory: a spare, or a new one with its buffers. NULL when out of memory. */
static struct h2s *h2s_take(struct worker *w)
{
    struct h2s_spares *sp = h2s_spares(w);
    struct h2s *s;

    if (sp != NULL && sp->n > 0)
        return sp->s[--sp->n];
    if ((s = calloc(1, sizeof(*s))) == NULL)
        return NULL;
    h2req_init(&s->req);
    s->in = evbuffer_new();
    s->out = evbuffer_new();
    if (s->in == NULL || s->out == NULL) {
        h2s_release(s);
        return NULL;
    }
    return s;
}

/* Keeps a stream's memory among the spares (zeroed but for the emptied buffers and the cleared
 * request), or frees it. */
static void h2s_give(struct worker *w, struct h2s *s)
{
    struct h2s_spares *sp = h2s_spares(w);
    struct evbuffer *in = s->in, *out = s->out;
    struct h2req req;

    if (sp == NULL || sp->n >= VG_WORKER_H2_STREAMS || evbuffer_get_length(in) > 0 ||
        evbuffer_get_length(out) > 0) {
        h2s_release(s);
        return;
    }
    free(s->tnv);
    free(s->tbuf);
    h2req_clear(&s->req);
    req = s->req;
    memset(s, 0, sizeof(*s));
    s->req = req;
    s->in = in;
    s->out = out;
    sp->s[sp->n++] = s;
}

static int h2s_spares_init(struct worker *w, char *err, size_t errlen)
{
    void **st = worker_module_state(w, &h2stream_worker_module);

    (void)err, (void)errlen;
    if (st != NULL && *st == NULL)
        *st = calloc(1, sizeof(struct h2s_spares));
    return 0; /* without spares every stream is allocated and freed: slower, never wrong */
}

static void h2s_spares_free(struct worker *w)
{
    void **st = worker_module_state(w, &h2stream_worker_module);
    struct h2s_spares *sp = st != NULL ? *st : NULL;

    if (sp == NULL)
        return;
    *st = NULL; /* a stream freed later is freed, not kept */
    while (sp->n > 0)
        h2s_release(sp->s[--sp->n]);
    free(sp);
}

const struct worker_module h2stream_worker_module = {
    .name = "h2-streams",
    .init = h2s_spares_init,
    .free = h2s_spares_free,
};

struct h2s *h2s_new(struct h2conn *c, int32_t id)
{
    struct h2s *s = h2s_take(c->cc.w);

    if (s == NULL)
        return NULL;
    s->c = c;
    s->id = id;
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
void h2s_free(struct h2s *s)
{
    struct h2conn *c = s->c;

    h2s_unqueue(s);
    exchange_free(&s->x);
    h2s_unqueue(s); /* the exchange's last report may have queued it */
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    c->nstreams--;
    if (c->nstreams == 0)
        c->idle_since = h2_now();
    c->out_bytes -= evbuffer_get_length(s->out);
    h2s_give(c->cc.w, s);
}

/* Gives n bytes of a stream's DATA back to the client's stream window. */
void h2s_consumed(struct h2s *s, size_t n)
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

static int h2_resp_body(void *t, struct evbuffer *buf)
{
    struct h2s *s = t;
    size_t n = evbuffer_get_length(buf);

    s->last_io = h2_now();
    if (evbuffer_add_buffer(s->out, buf) < 0)
        return -1;
    s->c->out_bytes += n;
    h2glue_resume(s->c->ng, s->id, &s->deferred);
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
    h2glue_resume(s->c->ng, s->id, &s->deferred);
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
    h2s_queue(s); /* what waits in s->in goes in from the loop */
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
    h2s_queue(s); /* the bytes go out from the loop */
}

static const struct exchange_ops h2_exchange_ops = {
    h2_resp_head, h2_resp_body, h2_resp_end, h2_resp_error, h2_room, h2_more, h2_flush, h2_finished,
};

/* nghttp2 asks for the next DATA of a response; the trailers follow the last byte. */
static ssize_t h2_data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len,
                            uint32_t *flags, nghttp2_data_source *src, void *user)
{
    struct h2s *s = src->ptr;
    ssize_t n = h2glue_data(s->out, s->out_eof, &s->deferred, buf, len, flags);

    (void)user;
    if (n < 0)
        return n;
    s->c->out_bytes -= (size_t)n;
    s->last_io = h2_now();
    if (s->want_drain && evbuffer_get_length(s->out) <= VG_H2_STREAM_OUT_CAP / 2)
        h2s_queue(s);
    if ((*flags & NGHTTP2_DATA_FLAG_EOF) && s->ntnv > 0) {
        *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_submit_trailer(ng, id, s->tnv, s->ntnv);
    }
    return n;
}

/* ---- requests --------------------------------------------------------------------------- */

/* The request's field section is complete: its exchange takes it, or it is refused. */
void h2s_request(struct h2s *s, bool end_stream)
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
void h2s_feed(struct h2s *s)
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
