/*
 * h2up.c - pooled HTTP/2 connections to upstreams (see h2up.h).
 *
 * Guarantees:
 * - One nghttp2 client session per connection, with nghttp2's HTTP checks on (it validates the
 *   upstream's responses); a connection is shared by at most the server's
 *   SETTINGS_MAX_CONCURRENT_STREAMS streams, and takes none after a GOAWAY or an error.
 * - Response DATA is given back to the stream's window only through h2up_consume (the
 *   connection's window at once), so each exchange's backpressure holds its own stream only.
 * - Every heap block nghttp2 allocates for the session is wiped when freed (a mapped one goes
 *   back to the kernel whole), and every frame written to the socket is staged in a block wiped
 *   when libevent lets go of it (h2glue.c): header blocks carry the injected secret. A
 *   credentialed request's fields are sent never-indexed.
 * - A connection, a stream and its response each have one state, changed by one setter that
 *   logs at debug (docs/internals/upstream.md tables the transitions).
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
#include "proxy/h2glue.h"
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

#define H2UP_T_IDLE        60 /* a connection without streams, as the pool keeps them */
#define H2UP_STREAM_WINDOW (256 * 1024)
#define H2UP_CONN_WINDOW   (4 * 1024 * 1024)
#define H2UP_NV_MAX        (VG_HEAD_MAX_FIELDS * 2 + 8)
#define H2UP_WAIT_MAX      100 /* streams queued on a connection before its SETTINGS are in */
#define H2UP_PEER_STREAMS  100 /* streams nghttp2 allows before the server's SETTINGS say */

/* A connection's life; docs/internals/upstream.md has the transitions. */
enum h2up_state {
    H2UP_C_DIALING = 0, /* announced (h2up_dial), or being attached: no socket or session yet */
    H2UP_C_PREFACE,     /* the session is made; the server's SETTINGS are not in yet */
    H2UP_C_SETTLING,    /* the SETTINGS are in: the queue is served once this read is done */
    H2UP_C_OPEN,        /* streams go by the server's MAX_CONCURRENT_STREAMS */
    H2UP_C_GOING,       /* GOAWAY received or sent, or the output failed: no new streams */
    H2UP_C_UNDIALED,    /* the announced dial ended without a connection: the queue is told */
    H2UP_C_CLOSED,      /* h2up_close_conn ran: freed once no callback is on the stack */
};

/* A stream's place on its connection. */
enum h2up_life {
    H2UP_S_PLACED = 0, /* on the connection, the request not submitted yet */
    H2UP_S_QUEUED,     /* queued until the connection settles (ops->placed follows) */
    H2UP_S_OPEN,       /* submitted: nghttp2 carries it */
    H2UP_S_CLOSED,     /* nghttp2 closed it; the exchange still holds the handle */
    H2UP_S_DETACHED,   /* the exchange let go (h2up_close); nghttp2 has yet to close it */
};

/* How far the response came. */
enum h2up_resp {
    H2UP_R_HEAD = 0, /* no final head yet (interim ones may come) */
    H2UP_R_BODY,     /* the final head came: DATA, trailers, until END_STREAM */
    H2UP_R_DONE,     /* END_STREAM from the server: on_done was called */
    H2UP_R_FAILED,   /* reset, a callback refused it, or the connection failed */
    H2UP_R_REFUSED,  /* closed by REFUSED_STREAM before any head: may be sent again */
};

struct h2up {
    struct h2up *prev, *next; /* the worker's connections */
    struct worker *w;
    char host[HOSTNAME_BUFSZ];
    int port;
    bool route_tunnel;
    enum h2up_state state; /* set by conn_set_state only */
    struct bevio io;
    nghttp2_session *ng;
    struct h2glue_mem mem; /* the session's allocator, wiping */
    struct h2up_stream *streams;
    struct h2up_stream *touched; /* streams with news for h2up_after */
    size_t nwant_more;           /* streams whose exchange waits for body room (want_more) */
    size_t nstreams;
    size_t nwaiting;       /* streams queued for the connection to settle */
    enum h2up_placed fate; /* H2UP_C_UNDIALED: what the queue is told */
    enum upstream_err fate_err;
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
    enum h2up_life life;       /* set by stream_set_life only */
    enum h2up_resp rstate;     /* set by stream_set_resp only */
    bool touched;              /* a callback ran in the current batch: on c->touched */
    struct h2up_stream *tprev, *tnext;
    struct evbuffer *out; /* request body waiting for DATA frames */
    bool out_eof, deferred, want_more;
    size_t unconsumed; /* response bytes delivered, not yet given back */
};

/* ---- states ----------------------------------------------------------------------------- */

static const char *const conn_state_names[] = {"dialing", "preface",  "settling", "open",
                                               "going",   "undialed", "closed"};
static const char *const life_names[] = {"placed", "queued", "open", "closed", "detached"};
static const char *const resp_names[] = {"head", "body", "done", "failed", "refused"};

/* A state change at debug level: the upstream's host and the states' names, nothing else. */
static void state_log(const struct h2up *c, const char *what, int32_t id, const char *from,
                      const char *to)
{
    struct log_fields f = LOG_FIELDS_INIT;
    char d[64];

    if (id >= 0)
        snprintf(d, sizeof(d), "stream %d: %s -> %s", (int)id, from, to);
    else
        snprintf(d, sizeof(d), "%s -> %s", from, to);
    f.host = c->host;
    f.reason = what;
    f.detail = d;
    log_event(LOG_DEBUG, "h2up_state", &f);
}

static void conn_set_state(struct h2up *c, enum h2up_state st)
{
    if (c->state != st && log_enabled(LOG_DEBUG))
        state_log(c, "conn", -1, conn_state_names[c->state], conn_state_names[st]);
    c->state = st;
}

static void stream_set_life(struct h2up_stream *s, enum h2up_life l)
{
    if (s->life != l && log_enabled(LOG_DEBUG))
        state_log(s->c, "stream", s->id, life_names[s->life], life_names[l]);
    s->life = l;
}

static void stream_set_resp(struct h2up_stream *s, enum h2up_resp r)
{
    if (s->rstate != r && log_enabled(LOG_DEBUG))
        state_log(s->c, "response", s->id, resp_names[s->rstate], resp_names[r]);
    s->rstate = r;
}

/* Requests for host:port wait on it: its room is not known yet. */
static bool conn_queues(const struct h2up *c)
{
    return c->state == H2UP_C_DIALING || c->state == H2UP_C_PREFACE || c->state == H2UP_C_SETTLING;
}

/* It takes no new stream, and goes once it has none. */
static bool conn_closing(const struct h2up *c)
{
    return c->state == H2UP_C_GOING || c->state == H2UP_C_UNDIALED || c->state == H2UP_C_CLOSED;
}

/* No socket, no session: no idle timer either. */
static bool conn_unconnected(const struct h2up *c)
{
    return c->state == H2UP_C_DIALING || c->state == H2UP_C_UNDIALED;
}

/* GOAWAY, or the session failed: no new streams (a connection closing already stays so). */
static void conn_going(struct h2up *c)
{
    if (!conn_closing(c))
        conn_set_state(c, H2UP_C_GOING);
}

static bool stream_failed(const struct h2up_stream *s)
{
    return s->rstate == H2UP_R_FAILED || s->rstate == H2UP_R_REFUSED;
}

static void stream_fail(struct h2up_stream *s)
{
    if (!stream_failed(s))
        stream_set_resp(s, H2UP_R_FAILED);
}

/* ---- the worker's connections ----------------------------------------------------------- */

/* The head of the worker's list is this module's state (worker_module_state). */
static struct h2up **head_of(struct worker *w)
{
    return (struct h2up **)worker_module_state(w, &h2up_worker_module);
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
    struct timeval idle = {conn_closing(c) ? 0 : H2UP_T_IDLE, 0};

    if (c->nstreams == 0 && !defer_freed(&c->defer) && !conn_unconnected(c))
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
    if (s->life == H2UP_S_QUEUED)
        c->nwaiting--;
    idle_arm(c);
    httphead_reset(&s->resp.head);
    httphead_reset(&s->trailers);
    evbuffer_free(s->out);
    free(s);
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
        if (s->rstate != H2UP_R_DONE)
            stream_fail(s);
        if (stream_failed(s) && s->life != H2UP_S_QUEUED) /* the queue: waiters_tell */
            touch(s);
    }
    while ((s = c->touched) != NULL) {
        untouch(s);
        if (s->life != H2UP_S_DETACHED && s->life != H2UP_S_QUEUED)
            s->ops->after(s->arg, stream_failed(s));
    }
}

/* The first stream still queued on c, or NULL. */
static struct h2up_stream *first_waiting(struct h2up *c)
{
    struct h2up_stream *s;

    for (s = c->streams; s != NULL && c->nwaiting > 0; s = s->next)
        if (s->life == H2UP_S_QUEUED)
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

    if (c->state == H2UP_C_SETTLING)
        conn_set_state(c, H2UP_C_OPEN);
    while (!defer_freed(&c->defer) && (s = first_waiting(c)) != NULL) {
        uint32_t max =
            nghttp2_session_get_remote_settings(c->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);

        if (conn_closing(c) || c->nstreams - c->nwaiting >= max ||
            !nghttp2_session_check_request_allowed(c->ng)) {
            waiters_tell(c, H2UP_PLACED_RETRY, UPSTREAM_OK);
            break;
        }
        stream_set_life(s, H2UP_S_PLACED);
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

    if (s == NULL || s->life == H2UP_S_DETACHED)
        return 0;
    h = s->rstate != H2UP_R_HEAD ? &s->trailers : &s->resp.head;
    if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
        int st = vlen == 3 ? (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0') : 0;

        return httphead_set_status_line(h, 1, st, "", 0) == 0
                   ? 0
                   : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (name[0] == ':')
        return 0; /* nghttp2 refused any other pseudo-header already */
    if (nlen == 14 && memcmp(name, "content-length", 14) == 0 && s->rstate == H2UP_R_HEAD) {
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
    bool final = s->resp.head.status >= 200;

    if (s->rstate == H2UP_R_BODY) {
        if (s->ops->cb.on_trailers != NULL)
            s->ops->cb.on_trailers(s->arg, &s->trailers);
        return;
    }
    if (final) {
        stream_set_resp(s, H2UP_R_BODY);
        if (end)
            s->resp.body = HTTP1_BODY_NONE;
        else if (s->resp.body != HTTP1_BODY_LENGTH)
            s->resp.body = HTTP1_BODY_CHUNKED; /* length unknown: until END_STREAM */
    }
    s->resp.keep_alive = true;
    if (s->ops->cb.on_head(s->arg, &s->resp) < 0)
        stream_fail(s);
    if (!final) { /* an interim response: the next head starts clean */
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
        conn_going(c);
        return 0;
    }
    if (f->hd.type == NGHTTP2_SETTINGS && (f->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
        if (c->state == H2UP_C_PREFACE)
            conn_set_state(c, H2UP_C_SETTLING);
        return 0;
    }
    if (s == NULL || s->life == H2UP_S_DETACHED || stream_failed(s))
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS) {
        touch(s);
        on_headers(s, end);
    }
    if (end && (f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) && !stream_failed(s)) {
        stream_set_resp(s, H2UP_R_DONE);
        touch(s);
        if (s->ops->cb.on_done(s->arg) < 0)
            stream_fail(s);
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    struct h2up *c = user;
    struct h2up_stream *s = stream_of(c, id);

    nghttp2_session_consume_connection(ng, len);
    if (s == NULL || s->life == H2UP_S_DETACHED || stream_failed(s)) {
        nghttp2_session_consume_stream(ng, id, len);
        return 0;
    }
    touch(s);
    s->unconsumed += len;
    if (s->ops->cb.on_body(s->arg, (const char *)data, len) < 0)
        stream_fail(s);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
    struct h2up *c = user;
    struct h2up_stream *s = stream_of(c, id);

    if (s == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    if (s->life == H2UP_S_DETACHED) { /* the exchange let go already */
        stream_free(s);
        return 0;
    }
    stream_set_life(s, H2UP_S_CLOSED);
    if (code == NGHTTP2_REFUSED_STREAM && s->rstate == H2UP_R_HEAD && s->resp.head.status == 0)
        stream_set_resp(s, H2UP_R_REFUSED);
    if (s->rstate != H2UP_R_DONE) {
        stream_fail(s);
        touch(s);
    }
    return 0;
}

static ssize_t data_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t len, uint32_t *flags,
                         nghttp2_data_source *src, void *user)
{
    struct h2up_stream *s = src->ptr;
    ssize_t n = h2glue_data(s->out, s->out_eof, &s->deferred, buf, len, flags);

    if (n >= 0 && s->want_more && evbuffer_get_length(s->out) <= VG_H2_STREAM_OUT_CAP / 2)
        event_active(s->c->resume, EV_TIMEOUT, 1);
    return n;
}

/* ---- the connection --------------------------------------------------------------------- */

/* Frames for the upstream, staged in blocks wiped when libevent lets go of them. */
static void h2up_send(struct h2up *c)
{
    if (defer_freed(&c->defer))
        return;
    if (h2glue_send(c->ng, &c->io, true) < 0)
        conn_going(c);
    /* a request nghttp2 could not start (a GOAWAY came after it was submitted) was closed
     * while sending: its exchange hears of it now */
    h2up_after(c, false);
}

static void h2up_close_conn(struct h2up *c, bool failed)
{
    if (defer_freed(&c->defer))
        return;
    conn_set_state(c, H2UP_C_CLOSED);
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
        ssize_t n = h2glue_recv(c->ng, in, NULL);
        uint32_t code;

        if (n < 0) {
            log_eventf(LOG_INFO, "upstream_error", "h2_protocol", "%s",
                       h2glue_recv_error(n, &code));
            h2up_close_conn(c, true);
        }
        if (n <= 0)
            break;
    }
    if (!defer_freed(&c->defer)) {
        h2up_after(c, false);
        if (c->state == H2UP_C_SETTLING || (conn_closing(c) && c->nwaiting > 0))
            waiters_place(c);
        if (conn_closing(c))
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
    if (c->nstreams == 0 && !conn_unconnected(c))
        h2up_close_conn(c, false);
    h2up_leave(c);
}

/* The loop gives request-body room back to the exchanges that wait for it. */
static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    struct h2up *c = arg;
    struct h2up_stream *s, *next;

    h2up_enter(c);
    if (c->state == H2UP_C_UNDIALED) { /* its queue learns how the dial ended */
        waiters_tell(c, c->fate, c->fate_err);
        h2up_close_conn(c, false);
        h2up_leave(c);
        return;
    }
    /* the streams are walked only while one of them waits for body room */
    for (s = c->streams; s != NULL && !defer_freed(&c->defer) && c->nwant_more > 0; s = next) {
        next = s->next;
        if (s->want_more && s->life != H2UP_S_DETACHED &&
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
    static const nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, H2UP_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, VG_HEAD_MAX_BYTES + 32 * VG_HEAD_MAX_FIELDS},
    };
    static const struct h2glue_setup how = {
        .server = false,
        .http_checks = true, /* nghttp2 validates the upstream's responses */
        .iv = iv,
        .niv = sizeof(iv) / sizeof(iv[0]),
        .peer_max_streams = H2UP_PEER_STREAMS,
        .conn_window = H2UP_CONN_WINDOW,
        .header = on_header,
        .frame_recv = on_frame_recv,
        .data_chunk = on_data_chunk,
        .stream_close = on_stream_close,
    };

    /* wiping: header blocks carry the injected secret */
    h2glue_mem_init(&c->mem, true);
    return h2glue_session_new(&c->ng, &how, c, &c->mem);
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

        if (conn_closing(c) || c->port != port || strcmp(c->host, host) != 0)
            continue;
        if (conn_queues(c)) { /* being made: its room is not known yet */
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
    stream_set_life(s, H2UP_S_QUEUED);
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
    return conn_new(w, host, port); /* H2UP_C_DIALING */
}

void h2up_dial_end(struct h2up **dp, enum h2up_placed p, enum upstream_err err)
{
    struct h2up *c = *dp;

    if (c == NULL)
        return;
    *dp = NULL;
    /* told from the loop: the exchange ending the dial may be inside its transport's teardown */
    conn_set_state(c, H2UP_C_UNDIALED);
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
    c->route_tunnel = route_tunnel;
    c->io.bev = bev;
    if (session_new(c) < 0 || (s = stream_new(c, ops, arg)) == NULL) {
        c->io.bev = NULL;
        bufferevent_free(bev);
        nghttp2_session_del(c->ng);
        c->ng = NULL;
        h2up_dial_end(&c, H2UP_PLACED_RETRY, UPSTREAM_OK); /* the queue is told from the loop */
        return NULL;
    }
    conn_set_state(c, H2UP_C_PREFACE);
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
    return s->rstate == H2UP_R_REFUSED;
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
    stream_set_life(s, H2UP_S_OPEN);
    event_active(s->c->resume, EV_TIMEOUT, 1); /* the frames go out from the loop */
    return 0;
}

static void stream_resume(struct h2up_stream *s)
{
    if (s->id >= 0)
        h2glue_resume(s->c->ng, s->id, &s->deferred);
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
    if (s->unconsumed > 0 && s->life == H2UP_S_OPEN) {
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
    if (s->life != H2UP_S_OPEN || defer_freed(&s->c->defer)) {
        stream_free(s); /* closed, never submitted, or its connection is gone */
        return;
    }
    /* an answer still coming, or a request body that will not be completed (the server
     * answered early): either way the stream would stay open on both sides */
    if (s->rstate != H2UP_R_DONE || !s->out_eof)
        nghttp2_submit_rst_stream(s->c->ng, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
    event_active(s->c->resume, EV_TIMEOUT, 1);
    stream_set_life(s, H2UP_S_DETACHED); /* freed when nghttp2 closes it */
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

/* The loop ended: the small blocks this thread's HTTP/2 sessions (both sides) left go. */
static void h2up_thread_end(struct worker *w)
{
    (void)w;
    h2glue_cache_release();
}

const struct worker_module h2up_worker_module = {
    .name = "h2up",
    .end = h2up_thread_end,
    .free = h2up_free_all,
};
