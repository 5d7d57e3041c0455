/*
 * h2up.c - pooled HTTP/2 connections to upstreams (see h2up.h).
 *
 * Guarantees:
 * - One nghttp2 client session per connection, with nghttp2's HTTP checks on (it validates the
 *   upstream's responses); a connection is shared by at most the server's
 *   SETTINGS_MAX_CONCURRENT_STREAMS streams, and takes none after a GOAWAY or an error.
 * - Response DATA is given back to the stream's window only through h2up_consume (the
 *   connection's window at once), so each exchange's backpressure holds its own stream only.
 * - Every buffer nghttp2 allocates for the session is wiped when freed, and every frame written
 *   to the socket is staged in a block wiped when libevent lets go of it: header blocks carry
 *   the injected secret. A credentialed request's fields are sent never-indexed.
 * - A connection that fails or ends fails the exchanges of its open streams (after, err=true);
 *   one without streams closes after the pool's idle time, at once after a GOAWAY.
 * - Requests that come while a connection to their host is dialled, or before it read the
 *   server's SETTINGS, queue on it rather than dial their own; once the SETTINGS are in, as many
 *   as MAX_CONCURRENT_STREAMS leaves room for get streams on it and the rest dial on. So a
 *   burst of requests makes one connection, and no connection ever carries more streams than
 *   the server allows, not even before its SETTINGS arrive.
 */
#include "proxy/h2up.h"
#include "audit/log.h"
#include "common/caps.h"
#include "common/defer.h"
#include "common/hostname.h"
#include "proxy/bevio.h"
#include "proxy/worker.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>

#define H2UP_T_IDLE        60 /* a connection without streams, as the pool keeps them */
#define H2UP_STREAM_WINDOW (256 * 1024)
#define H2UP_CONN_WINDOW   (4 * 1024 * 1024)
#define H2UP_NV_MAX        (VG_HEAD_MAX_FIELDS * 2 + 8)
#define H2UP_WAIT_MAX      100 /* streams queued on a connection before its SETTINGS are in */

struct h2up {
    struct h2up *prev, *next; /* the worker's connections */
    struct worker *w;
    char host[HOSTNAME_BUFSZ];
    int port;
    bool route_tunnel;
    struct bevio io;
    nghttp2_session *ng;
    struct h2up_stream *streams;
    struct h2up_stream *touched; /* streams with news for h2up_after */
    size_t nwant_more;           /* streams whose exchange waits for body room (want_more) */
    size_t nstreams;
    bool closing;          /* GOAWAY received or sent, or failed: no new streams */
    bool dialing;          /* announced by h2up_dial: no socket or session yet */
    bool got_settings;     /* the server's first SETTINGS frame was read */
    bool settled;          /* ... and the queue was served: streams go by MAX_CONCURRENT_STREAMS */
    size_t nwaiting;       /* streams queued for the connection to settle */
    enum h2up_placed fate; /* a dial that ended without a connection: what the queue is told */
    enum upstream_err fate_err;
    bool fated;
    struct event *idle;
    struct event *resume;
    struct defer defer; /* callbacks on the stack; freed at depth 0 after h2up_close_conn */
};

struct h2up_stream {
    struct h2up_stream *prev, *next;
    struct h2up *c;
    int32_t id;
    const struct h2up_ops *ops;
    void *arg;
    struct http1_msg resp;     /* the response head as it arrives */
    struct http_head trailers; /* and its trailers */
    bool final;                /* the final head came: later HEADERS are trailers */
    bool touched;              /* a callback ran in the current batch: on c->touched */
    struct h2up_stream *tprev, *tnext;
    bool failed;          /* reset or the connection failed */
    bool ended;           /* END_STREAM from the server */
    bool closed;          /* nghttp2 closed it */
    bool detached;        /* the exchange let go (h2up_close) */
    bool waiting;         /* queued until the connection settles: not submitted */
    bool refused;         /* closed by REFUSED_STREAM before any response head */
    struct evbuffer *out; /* request body waiting for DATA frames */
    bool out_eof, deferred, want_more;
    size_t unconsumed; /* response bytes delivered, not yet given back */
};

/* ---- the wiping allocator --------------------------------------------------------------- */

#define WIPE_HDR 16

static void *wmalloc(size_t n, void *ud)
{
    unsigned char *p = n <= SIZE_MAX - WIPE_HDR ? malloc(n + WIPE_HDR) : NULL;

    (void)ud;
    if (p == NULL)
        return NULL;
    memcpy(p, &n, sizeof(n));
    return p + WIPE_HDR;
}

static void wfree(void *ptr, void *ud)
{
    unsigned char *p = ptr;
    size_t n;

    (void)ud;
    if (p == NULL)
        return;
    memcpy(&n, p - WIPE_HDR, sizeof(n));
    OPENSSL_cleanse(p, n);
    free(p - WIPE_HDR);
}

static void *wcalloc(size_t nmemb, size_t size, void *ud)
{
    void *p;

    if (size != 0 && nmemb > SIZE_MAX / size)
        return NULL;
    p = wmalloc(nmemb * size, ud);
    if (p != NULL)
        memset(p, 0, nmemb * size);
    return p;
}

static void *wrealloc(void *ptr, size_t n, void *ud)
{
    void *np;
    size_t old;

    if (ptr == NULL)
        return wmalloc(n, ud);
    memcpy(&old, (unsigned char *)ptr - WIPE_HDR, sizeof(old));
    np = wmalloc(n, ud);
    if (np == NULL)
        return NULL;
    memcpy(np, ptr, old < n ? old : n);
    wfree(ptr, ud);
    return np;
}

static nghttp2_mem wiping_mem = {NULL, wmalloc, wfree, wcalloc, wrealloc};

static void wipe_block(const void *data, size_t len, void *arg)
{
    (void)arg;
    OPENSSL_cleanse((void *)data, len);
    free((void *)data);
}

/* ---- the worker's connections ----------------------------------------------------------- */

/* The worker keeps the head of its list in w->h2up. */
static struct h2up **head_of(struct worker *w)
{
    return (struct h2up **)&w->h2up;
}

static void h2up_link(struct h2up *c)
{
    struct h2up **h = head_of(c->w);

    c->next = *h;
    if (*h != NULL)
        (*h)->prev = c;
    *h = c;
}

static void h2up_unlink(struct h2up *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        *head_of(c->w) = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

static void h2up_free(struct h2up *c);
static void h2up_send(struct h2up *c);

static void h2up_enter(struct h2up *c)
{
    defer_enter(&c->defer);
}

static void h2up_leave(struct h2up *c)
{
    if (defer_leave(&c->defer))
        h2up_free(c);
}

/* ---- streams ---------------------------------------------------------------------------- */

/* A connection without streams closes after the pool's idle time, or at once when closing. */
static void idle_arm(struct h2up *c)
{
    struct timeval idle = {c->closing ? 0 : H2UP_T_IDLE, 0};

    if (c->nstreams == 0 && !defer_freed(&c->defer) && !c->dialing)
        evtimer_add(c->idle, &idle);
}

/* Queues s for h2up_after (once per batch). */
static void touch(struct h2up_stream *s)
{
    struct h2up *c = s->c;

    if (s->touched)
        return;
    s->touched = true;
    s->tprev = NULL;
    s->tnext = c->touched;
    if (c->touched != NULL)
        c->touched->tprev = s;
    c->touched = s;
}

static void untouch(struct h2up_stream *s)
{
    if (!s->touched)
        return;
    if (s->tprev != NULL)
        s->tprev->tnext = s->tnext;
    else
        s->c->touched = s->tnext;
    if (s->tnext != NULL)
        s->tnext->tprev = s->tprev;
    s->touched = false;
    s->tprev = s->tnext = NULL;
}

static void stream_free(struct h2up_stream *s)
{
    struct h2up *c = s->c;

    untouch(s);
    if (s->want_more)
        c->nwant_more--;
    if (s->prev != NULL)
        s->prev->next = s->next;
    else
        c->streams = s->next;
    if (s->next != NULL)
        s->next->prev = s->prev;
    c->nstreams--;
    if (s->waiting)
        c->nwaiting--;
    idle_arm(c);
    httphead_reset(&s->resp.head);
    httphead_reset(&s->trailers);
    evbuffer_free(s->out);
    free(s);
}

/* The stream ends for the exchange's sake when both sides are done with it. */
static void stream_maybe_free(struct h2up_stream *s)
{
    if (s->detached && (s->closed || defer_freed(&s->c->defer)))
        stream_free(s);
}

static struct h2up_stream *stream_new(struct h2up *c, const struct h2up_ops *ops, void *arg)
{
    struct h2up_stream *s = calloc(1, sizeof(*s));

    if (s == NULL || (s->out = evbuffer_new()) == NULL) {
        free(s);
        return NULL;
    }
    s->c = c;
    s->ops = ops;
    s->arg = arg;
    s->id = -1;
    httphead_init(&s->resp.head);
    httphead_init(&s->trailers);
    s->next = c->streams;
    if (c->streams != NULL)
        c->streams->prev = s;
    c->streams = s;
    c->nstreams++;
    evtimer_del(c->idle);
    return s;
}

/*
 * Tells every stream the callbacks touched in this batch (or all, when the connection fails):
 * they wait on c->touched, so a batch costs what it touched, not the streams open. An
 * exchange's callback may touch, close or free any stream of the connection; a freed one
 * leaves the queue.
 */
static void h2up_after(struct h2up *c, bool all_failed)
{
    struct h2up_stream *s;

    for (s = c->streams; s != NULL && all_failed; s = s->next) {
        if (!s->ended)
            s->failed = true;
        if (s->failed && !s->waiting) /* the queue is told by waiters_tell */
            touch(s);
    }
    while ((s = c->touched) != NULL) {
        untouch(s);
        if (!s->detached && !s->waiting)
            s->ops->after(s->arg, s->failed);
    }
}

/* The first stream still queued on c, or NULL. */
static struct h2up_stream *first_waiting(struct h2up *c)
{
    struct h2up_stream *s;

    for (s = c->streams; s != NULL && c->nwaiting > 0; s = s->next)
        if (s->waiting && !s->detached)
            return s;
    return NULL;
}

/* Tells every stream queued on c that it gets no place there: each is freed, then told. */
static void waiters_tell(struct h2up *c, enum h2up_placed p, enum upstream_err err)
{
    struct h2up_stream *s;

    while ((s = first_waiting(c)) != NULL) {
        const struct h2up_ops *ops = s->ops;
        void *arg = s->arg;

        stream_free(s);
        ops->placed(arg, p, err);
    }
}

/*
 * The server's SETTINGS are in: the queued streams take the room MAX_CONCURRENT_STREAMS leaves
 * (in the order they came), the rest go and dial. From the loop, never inside nghttp2.
 */
static void waiters_place(struct h2up *c)
{
    struct h2up_stream *s;

    c->settled = true;
    while (!defer_freed(&c->defer) && (s = first_waiting(c)) != NULL) {
        uint32_t max =
            nghttp2_session_get_remote_settings(c->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);

        if (c->closing || c->nstreams - c->nwaiting >= max ||
            !nghttp2_session_check_request_allowed(c->ng)) {
            waiters_tell(c, H2UP_PLACED_RETRY, UPSTREAM_OK);
            break;
        }
        s->waiting = false;
        c->nwaiting--;
        s->ops->placed(s->arg, H2UP_PLACED_OPEN, UPSTREAM_OK);
    }
}

/* ---- session callbacks ------------------------------------------------------------------ */

static struct h2up_stream *stream_of(struct h2up *c, int32_t id)
{
    return nghttp2_session_get_stream_user_data(c->ng, id);
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    struct h2up_stream *s = stream_of(user, f->hd.stream_id);
    struct http_head *h;

    if (s == NULL || s->detached)
        return 0;
    h = s->final ? &s->trailers : &s->resp.head;
    if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
        int st = vlen == 3 ? (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0') : 0;

        return httphead_set_status_line(h, 1, st, "", 0) == 0
                   ? 0
                   : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (name[0] == ':')
        return 0; /* nghttp2 refused any other pseudo-header already */
    if (nlen == 14 && memcmp(name, "content-length", 14) == 0 && !s->final) {
        s->resp.content_length = strtoull((const char *)value, NULL, 10);
        s->resp.body = HTTP1_BODY_LENGTH;
    }
    return httphead_add(h, (const char *)name, nlen, (const char *)value, vlen) == 0
               ? 0
               : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

/* A HEADERS frame complete: an interim or the final response head, or trailers. */
static void on_headers(struct h2up_stream *s, bool end)
{
    int rc;

    if (s->final) {
        if (s->ops->cb.on_trailers != NULL)
            s->ops->cb.on_trailers(s->arg, &s->trailers);
        return;
    }
    if (s->resp.head.status >= 200) {
        s->final = true;
        if (end)
            s->resp.body = HTTP1_BODY_NONE;
        else if (s->resp.body != HTTP1_BODY_LENGTH)
            s->resp.body = HTTP1_BODY_CHUNKED; /* length unknown: until END_STREAM */
    }
    s->resp.keep_alive = true;
    rc = s->ops->cb.on_head(s->arg, &s->resp);
    if (rc < 0)
        s->failed = true;
    if (!s->final) { /* an interim response: the next head starts clean */
        httphead_reset(&s->resp.head);
        s->resp.body = HTTP1_BODY_NONE;
    }
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    struct h2up *c = user;
    struct h2up_stream *s = stream_of(c, f->hd.stream_id);
    bool end = (f->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;

    if (f->hd.type == NGHTTP2_GOAWAY) {
        c->closing = true;
        return 0;
    }
    if (f->hd.type == NGHTTP2_SETTINGS && (f->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
        c->got_settings = true;
        return 0;
    }
    if (s == NULL || s->detached || s->failed)
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS) {
        touch(s);
        on_headers(s, end);
    }
    if (end && (f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) && !s->failed) {
        s->ended = true;
        touch(s);
        if (s->ops->cb.on_done(s->arg) < 0)
            s->failed = true;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    struct h2up *c = user;
    struct h2up_stream *s = stream_of(c, id);

    nghttp2_session_consume_connection(ng, len);
    if (s == NULL || s->detached || s->failed) {
        nghttp2_session_consume_stream(ng, id, len);
        return 0;
    }
    touch(s);
    s->unconsumed += len;
    if (s->ops->cb.on_body(s->arg, (const char *)data, len) < 0)
        s->failed = true;
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
    struct h2up *c = user;
    struct h2up_stream *s = stream_of(c, id);

    if (s == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    s->closed = true;
    s->refused = code == NGHTTP2_REFUSED_STREAM && !s->final && s->resp.head.status == 0;
    if (!s->ended && !s->detached) {
        s->failed = true;
        touch(s);
    }
    stream_maybe_free(s);
    return 0;
}

static ssize_t data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *user)
{
    struct h2up_stream *s = src->ptr;
    size_t n = evbuffer_get_length(s->out);

    if (n == 0 && !s->out_eof) {
        s->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    if (n > len)
        n = len;
    if (n > 0 && evbuffer_remove(s->out, buf, n) != (int)n)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (s->want_more && evbuffer_get_length(s->out) <= VG_H2_STREAM_OUT_CAP / 2)
        event_active(s->c->resume, EV_TIMEOUT, 1);
    if (s->out_eof && evbuffer_get_length(s->out) == 0)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---- the connection --------------------------------------------------------------------- */

/* Frames for the upstream, each staged in a block wiped when libevent lets go of it. */
static void h2up_send(struct h2up *c)
{
    for (;;) {
        const uint8_t *p;
        ssize_t n;
        void *blk;

        if (defer_freed(&c->defer) || bevio_pending(&c->io) >= VG_CONN_OUT_CAP)
            break;
        n = nghttp2_session_mem_send(c->ng, &p);
        if (n <= 0) {
            if (n < 0)
                c->closing = true;
            break;
        }
        blk = malloc((size_t)n);
        if (blk == NULL) {
            c->closing = true;
            break;
        }
        memcpy(blk, p, (size_t)n);
        if (evbuffer_add_reference(c->io.stage, blk, (size_t)n, wipe_block, NULL) < 0) {
            wipe_block(blk, (size_t)n, NULL);
            c->closing = true;
            break;
        }
        c->io.nocopy = true;
    }
    if (defer_freed(&c->defer))
        return;
    bevio_push(&c->io);
    /* a request nghttp2 could not start (a GOAWAY came after it was submitted) was closed
     * while sending: its exchange hears of it now */
    h2up_after(c, false);
}

static void h2up_close_conn(struct h2up *c, bool failed)
{
    if (defer_freed(&c->defer))
        return;
    c->closing = true;
    waiters_tell(c, H2UP_PLACED_RETRY, UPSTREAM_OK);
    h2up_after(c, failed);
    h2up_unlink(c);
    if (defer_free(&c->defer))
        h2up_free(c);
}

static void h2up_free(struct h2up *c)
{
    struct h2up_stream *s, *next;

    for (s = c->streams; s != NULL; s = next) {
        next = s->next;
        if (s->id >= 0 && c->ng != NULL)
            nghttp2_session_set_stream_user_data(c->ng, s->id, NULL);
        stream_free(s); /* an exchange still holding one was told (after, err) */
    }
    nghttp2_session_del(c->ng);
    if (c->io.bev != NULL) {
        bufferevent_setcb(c->io.bev, NULL, NULL, NULL, NULL);
        bufferevent_free(c->io.bev);
    }
    if (c->io.stage != NULL)
        evbuffer_free(c->io.stage);
    if (c->idle != NULL)
        event_free(c->idle);
    if (c->resume != NULL)
        event_free(c->resume);
    free(c);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
    struct h2up *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    h2up_enter(c);
    bevio_pull(bev);
    while (!defer_freed(&c->defer) && evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;
        ssize_t n;

        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            break;
        n = nghttp2_session_mem_recv(c->ng, v.iov_base, v.iov_len);
        if (n < 0) {
            log_eventf(LOG_INFO, "upstream_error", "h2_protocol", "%s", nghttp2_strerror((int)n));
            h2up_close_conn(c, true);
            break;
        }
        evbuffer_drain(in, (size_t)n);
    }
    if (!defer_freed(&c->defer)) {
        h2up_after(c, false);
        if (!c->settled && (c->got_settings || c->closing))
            waiters_place(c);
        if (c->closing)
            idle_arm(c); /* after a GOAWAY, a connection without streams goes at once */
    }
    if (!defer_freed(&c->defer))
        h2up_send(c);
    h2up_leave(c);
}

static void write_cb(struct bufferevent *bev, void *arg)
{
    struct h2up *c = arg;

    h2up_enter(c);
    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    h2up_send(c);
    h2up_leave(c);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct h2up *c = arg;

    h2up_enter(c);
    h2up_close_conn(c, true);
    h2up_leave(c);
}

static void idle_cb(evutil_socket_t fd, short what, void *arg)
{
    struct h2up *c = arg;

    h2up_enter(c);
    if (c->nstreams == 0 && !c->dialing)
        h2up_close_conn(c, false);
    h2up_leave(c);
}

/* The loop gives request-body room back to the exchanges that wait for it. */
static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    struct h2up *c = arg;
    struct h2up_stream *s, *next;

    h2up_enter(c);
    if (c->fated) { /* a dial that ended without a connection: its queue learns how */
        waiters_tell(c, c->fate, c->fate_err);
        h2up_close_conn(c, false);
        h2up_leave(c);
        return;
    }
    /* the streams are walked only while one of them waits for body room */
    for (s = c->streams; s != NULL && !defer_freed(&c->defer) && c->nwant_more > 0; s = next) {
        next = s->next;
        if (s->want_more && !s->detached &&
            evbuffer_get_length(s->out) <= VG_H2_STREAM_OUT_CAP / 2) {
            s->want_more = false;
            c->nwant_more--;
            s->ops->more(s->arg);
        }
    }
    h2up_send(c);
    h2up_leave(c);
}

static int session_new(struct h2up *c)
{
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2UP_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, VG_HEAD_MAX_BYTES + 32 * VG_HEAD_MAX_FIELDS},
    };
    int rc = -1;

    if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0)
        goto out;
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_peer_max_concurrent_streams(opt, 100);
    if (nghttp2_session_client_new3(&c->ng, cb, c, opt, &wiping_mem) != 0 ||
        nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0 ||
        nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0, H2UP_CONN_WINDOW) != 0)
        goto out;
    rc = 0;
out:
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    return rc;
}

/* ---- the exchange's side ---------------------------------------------------------------- */

struct h2up_stream *h2up_open(struct worker *w, const char *host, int port,
                              const struct h2up_ops *ops, void *arg, enum h2up_how *how)
{
    struct h2up *wait_on = NULL;
    struct h2up_stream *s;

    *how = H2UP_NONE;
    for (struct h2up *c = *head_of(w); c != NULL; c = c->next) {
        uint32_t max;

        if (c->closing || c->port != port || strcmp(c->host, host) != 0)
            continue;
        if (!c->settled) { /* being made: its room is not known yet */
            if (wait_on == NULL && c->nstreams < H2UP_WAIT_MAX)
                wait_on = c;
            continue;
        }
        max = nghttp2_session_get_remote_settings(c->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
        if (c->nstreams < max && nghttp2_session_check_request_allowed(c->ng)) {
            if ((s = stream_new(c, ops, arg)) != NULL)
                *how = H2UP_OPENED;
            return s;
        }
    }
    if (wait_on == NULL || (s = stream_new(wait_on, ops, arg)) == NULL)
        return NULL;
    s->waiting = true;
    wait_on->nwaiting++;
    *how = H2UP_WAITING;
    return s;
}

/* A connection to host:port without socket or session yet, in the worker's list; or NULL. */
static struct h2up *conn_new(struct worker *w, const char *host, int port)
{
    struct h2up *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->w = w;
    snprintf(c->host, sizeof(c->host), "%s", host);
    c->port = port;
    c->io.stage = evbuffer_new();
    c->idle = evtimer_new(w->base, idle_cb, c);
    c->resume = event_new(w->base, -1, 0, resume_cb, c);
    if (c->io.stage == NULL || c->idle == NULL || c->resume == NULL) {
        h2up_free(c);
        return NULL;
    }
    h2up_link(c);
    return c;
}

struct h2up *h2up_dial(struct worker *w, const char *host, int port)
{
    struct h2up *c = conn_new(w, host, port);

    if (c != NULL)
        c->dialing = true;
    return c;
}

void h2up_dial_end(struct h2up **dp, enum h2up_placed p, enum upstream_err err)
{
    struct h2up *c = *dp;

    if (c == NULL)
        return;
    *dp = NULL;
    /* told from the loop: the exchange ending the dial may be inside its transport's teardown */
    c->closing = true;
    c->fated = true;
    c->fate = p;
    c->fate_err = err;
    event_active(c->resume, EV_TIMEOUT, 1);
}

struct h2up_stream *h2up_attach(struct worker *w, struct h2up **dp, const char *host, int port,
                                struct bufferevent *bev, bool route_tunnel,
                                const struct h2up_ops *ops, void *arg)
{
    struct h2up *c = dp != NULL ? *dp : NULL;
    struct h2up_stream *s = NULL;

    if (c != NULL)
        *dp = NULL;
    else if ((c = conn_new(w, host, port)) == NULL) {
        bufferevent_free(bev);
        return NULL;
    }
    c->dialing = false;
    c->route_tunnel = route_tunnel;
    c->io.bev = bev;
    if (session_new(c) < 0 || (s = stream_new(c, ops, arg)) == NULL) {
        c->io.bev = NULL;
        bufferevent_free(bev);
        nghttp2_session_del(c->ng);
        c->ng = NULL;
        c->dialing = true; /* no session: the queue is told from the loop */
        h2up_dial_end(&c, H2UP_PLACED_RETRY, UPSTREAM_OK);
        return NULL;
    }
    bevio_release_always(bev);
    bufferevent_setcb(bev, read_cb, write_cb, event_cb, c);
    bufferevent_setwatermark(bev, EV_READ, 0, VG_CONN_IN_MAX);
    bufferevent_set_timeouts(bev, NULL, NULL);
    bufferevent_enable(bev, EV_READ | EV_WRITE);
    /* the server's SETTINGS may have come with the end of the handshake, read ahead */
    if (bevio_has_input(bev))
        bufferevent_trigger(bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
    return s;
}

bool h2up_route_tunnel(const struct h2up_stream *s)
{
    return s->c->route_tunnel;
}

bool h2up_refused(const struct h2up_stream *s)
{
    return s->refused;
}

static void nv_set(nghttp2_nv *nv, const char *n, size_t nl, const char *v, size_t vl,
                   uint8_t flags)
{
    nv->name = (uint8_t *)n;
    nv->namelen = nl;
    nv->value = (uint8_t *)v;
    nv->valuelen = vl;
    nv->flags = flags;
}

/* The request's fields for HTTP/2: lower-case names, no Host (it is :authority), none of the
 * connection-specific fields. Returns the count, or -1. */
static int request_fields(const struct http_head *h, nghttp2_nv *nv, size_t cap, char *buf,
                          size_t bufcap, uint8_t flags, bool *grpc)
{
    static const char *const skip[] = {
        "host",    "connection", "keep-alive",        "proxy-connection",
        "upgrade", "te",         "transfer-encoding", "content-length"};
    size_t n = 0, used = 0;

    for (size_t i = 0; i < h->nfields; i++) {
        const struct http_field *f = &h->fields[i];
        bool drop = false;

        for (size_t k = 0; k < sizeof(skip) / sizeof(skip[0]); k++)
            drop |=
                f->name_len == strlen(skip[k]) && strncasecmp(f->name, skip[k], f->name_len) == 0;
        if (drop)
            continue;
        if (n == cap || used + f->name_len > bufcap)
            return -1;
        for (size_t k = 0; k < f->name_len; k++)
            buf[used + k] =
                (char)((f->name[k] >= 'A' && f->name[k] <= 'Z') ? f->name[k] + 32 : f->name[k]);
        if (f->name_len == 12 && memcmp(buf + used, "content-type", 12) == 0 &&
            strncasecmp(f->value, "application/grpc", 16) == 0)
            *grpc = true;
        nv_set(&nv[n++], buf + used, f->name_len, f->value, f->value_len, flags);
        used += f->name_len;
    }
    return (int)n;
}

int h2up_request(struct h2up_stream *s, const struct http_head *h, bool no_body, bool len_known,
                 uint64_t len, bool sensitive)
{
    const struct http_field *host = httphead_get(h, "Host");
    uint8_t flags = sensitive ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE;
    nghttp2_nv nv[H2UP_NV_MAX];
    char buf[VG_HEAD_MAX_BYTES], cl[24];
    nghttp2_data_provider dp = {{.ptr = s}, data_read};
    bool grpc = false;
    int n, k;

    if (host == NULL)
        return -1;
    nv_set(&nv[0], ":method", 7, h->method, strlen(h->method), flags);
    nv_set(&nv[1], ":scheme", 7, "https", 5, flags);
    nv_set(&nv[2], ":authority", 10, host->value, host->value_len, flags);
    nv_set(&nv[3], ":path", 5, h->target, h->target_len, flags);
    n = request_fields(h, nv + 4, H2UP_NV_MAX - 6, buf, sizeof(buf), flags, &grpc);
    if (n < 0)
        return -1;
    n += 4;
    if (grpc) /* gRPC servers ask for it; hop-by-hop on HTTP/1.1, so it was stripped */
        nv_set(&nv[n++], "te", 2, "trailers", 8, flags);
    if (len_known && !no_body) {
        k = snprintf(cl, sizeof(cl), "%llu", (unsigned long long)len);
        nv_set(&nv[n++], "content-length", 14, cl, (size_t)k, flags);
    }
    s->out_eof = no_body;
    s->id = nghttp2_submit_request(s->c->ng, NULL, nv, (size_t)n, no_body ? NULL : &dp, s);
    if (s->id < 0)
        return -1;
    event_active(s->c->resume, EV_TIMEOUT, 1); /* the frames go out from the loop */
    return 0;
}

static void stream_resume(struct h2up_stream *s)
{
    if (s->deferred && s->id >= 0) {
        s->deferred = false;
        nghttp2_session_resume_data(s->c->ng, s->id);
    }
    event_active(s->c->resume, EV_TIMEOUT, 1);
}

int h2up_body(struct h2up_stream *s, const char *p, size_t n)
{
    if (evbuffer_add(s->out, p, n) < 0)
        return -1;
    stream_resume(s);
    if (evbuffer_get_length(s->out) < VG_H2_STREAM_OUT_CAP)
        return 0;
    if (!s->want_more)
        s->c->nwant_more++;
    s->want_more = true;
    return 1;
}

int h2up_body_take(struct h2up_stream *s, struct evbuffer *buf)
{
    if (evbuffer_add_buffer(s->out, buf) < 0)
        return -1;
    stream_resume(s);
    return 0;
}

int h2up_body_end(struct h2up_stream *s)
{
    s->out_eof = true;
    stream_resume(s);
    return 0;
}

void h2up_consume(struct h2up_stream *s)
{
    if (s->unconsumed > 0 && s->id >= 0 && !s->closed) {
        nghttp2_session_consume_stream(s->c->ng, s->id, s->unconsumed);
        event_active(s->c->resume, EV_TIMEOUT, 1);
    }
    s->unconsumed = 0;
}

void h2up_close(struct h2up_stream **sp)
{
    struct h2up_stream *s = *sp;

    if (s == NULL)
        return;
    *sp = NULL;
    s->detached = true;
    if (!s->closed && !defer_freed(&s->c->defer) && s->id >= 0) {
        /* an answer still coming, or a request body that will not be completed (the server
         * answered early): either way the stream would stay open on both sides */
        if (!s->ended || !s->out_eof)
            nghttp2_submit_rst_stream(s->c->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
        event_active(s->c->resume, EV_TIMEOUT, 1);
    }
    if (s->id < 0)
        s->closed = true; /* never submitted */
    stream_maybe_free(s);
}

void h2up_free_all(struct worker *w)
{
    while (*head_of(w) != NULL) {
        struct h2up *c = *head_of(w);

        h2up_unlink(c);
        (void)defer_free(&c->defer);
        h2up_free(c);
    }
}

const struct worker_module h2up_worker_module = {.name = "h2up", .free = h2up_free_all};
