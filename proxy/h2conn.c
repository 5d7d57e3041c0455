/*
 * h2conn.c - the HTTP/2 client transport (see h2conn.h): an nghttp2 server session over the
 * client's TLS bufferevent, the frames it reads and writes, the abuse limits of SPEC §10 and
 * the connection's timers. The streams and their exchanges are h2conn_stream.c's.
 *
 * Guarantees:
 * - Frames are parsed and written by nghttp2 only; its HTTP messaging checks are off and
 *   h2msg.c applies RFC 9113 §8 to every request before an exchange sees it.
 * - Flow control: a request's DATA is given back to the client's stream window only once its
 *   exchange took it, so a stream whose upstream is slow stalls only itself; nghttp2 writes
 *   DATA only while the connection's output is under VG_CONN_OUT_CAP.
 * - Abuse: at most VG_H2_MAX_STREAMS concurrent streams, an HPACK table of 4096 bytes; a client
 *   that resets streams faster than they complete, or floods CONTINUATION, SETTINGS, PING,
 *   PRIORITY or empty DATA frames gets GOAWAY (ENHANCE_YOUR_CALM) and is closed.
 * - The transport never calls an exchange from inside nghttp2's callbacks for events the
 *   exchange did not ask for: buffered body bytes and drain notices run from the loop.
 * - h2_close() is the only teardown; it frees every stream (and its exchange) first.
 */
#include "proxy/h2conn.h"
#include "proxy/h2conn_int.h"
#include "common/caps.h"
#include "proxy/reason.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/ssl.h>

/* SPEC §4's timeouts as for HTTP/1.1 (--timeout): idle with no stream open, a header block
 * begun and not finished, a stream with no DATA either way */
#define H2_T(c, k)    vg_timeout(&(c)->cc.w->sh->timeouts, (k))
#define H2_T_TICK     5             /* how often deadlines are looked at, at most */
#define H2_T_LINGER   2             /* after the last frame: input read and discarded this long */
#define H2_LINGER_MAX (1024 * 1024) /* ... or until this much of it */

static void h2_free(struct h2conn *c);
static void h2_send(struct h2conn *c);

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
        h2s_unqueue(s);
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

    c->head_room = VG_H2_HEADER_BLOCK_MAX;
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
        h2s_queue(s);
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
            h2s_queue(s);
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
    if (c->lingering == NULL && h2glue_send(c->ng, &c->io, false) < 0)
        c->calm = true;
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

/* A fatal input error: GOAWAY (ENHANCE_YOUR_CALM for a flood, PROTOCOL_ERROR else, none for a
 * client that does not speak HTTP/2); a fatal error leaves no frame queued, so it is ours. */
static void h2_input_failed(struct h2conn *c, ssize_t n)
{
    uint32_t code;
    const char *why = h2glue_recv_error(n, &code);

    if (code == NGHTTP2_ENHANCE_YOUR_CALM) {
        h2_goaway(c, code, why);
    } else if (!c->calm) {
        h2_log(c, LOG_INFO, "h2_protocol_error", why);
        c->calm = true;
        if (code != NGHTTP2_NO_ERROR)
            nghttp2_session_terminate_session(c->ng, code);
    }
}

static void h2_input(struct h2conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->io.bev);

    bevio_pull(c->io.bev);
    while (!defer_freed(&c->defer) && evbuffer_get_length(in) > 0) {
        /* what a header block under way may take on the wire is bounded (CONTINUATION flood) */
        ssize_t n = h2glue_recv(c->ng, in, c->head_since != 0 ? &c->head_room : NULL);

        if (n <= 0) {
            if (n < 0)
                h2_input_failed(c, n);
            break;
        }
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
            h2s_queue(s);
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

/* ---- start ------------------------------------------------------------------------------ */

static int h2_session_new(struct h2conn *c)
{
    static const nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, VG_H2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, VG_H2_STREAM_WINDOW},
        {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, VG_H2_HPACK_TABLE},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, VG_HEAD_MAX_BYTES + 32 * VG_HEAD_MAX_FIELDS},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    static const struct h2glue_setup how = {
        .server = true,
        .http_checks = false, /* h2msg.c's, field by field */
        .iv = iv,
        .niv = sizeof(iv) / sizeof(iv[0]),
        .deflate_table = VG_H2_HPACK_TABLE,
        .begin_headers = on_begin_headers,
        .header = on_header,
        .data_chunk = on_data_chunk,
        .frame_recv = on_frame_recv,
        .begin_frame = on_begin_frame,
        .frame_send = on_frame_send,
        .stream_close = on_stream_close,
        .error = on_session_error,
    };

    /* no wiping: a client's own header blocks carry nothing of vaultgate's secrets */
    h2glue_mem_init(&c->mem, false);
    return h2glue_session_new(&c->ng, &how, c, &c->mem);
}

int h2conn_start(struct worker_link *from, struct exch_conn *cc, struct bufferevent *bev, bool busy)
{
    struct h2conn *c = calloc(1, sizeof(*c));
    struct timeval tick = {H2_T_TICK, 0};

    if (c == NULL) {
        bufferevent_free(bev);
        return -1;
    }
    exch_conn_take(&c->cc, cc);
    c->cc.proto = "h2";
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
