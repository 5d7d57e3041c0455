/*
 * exchange_resp.c - the upstream half of an exchange (see exchange.c): the connection handed
 * over by upstream_get(), the serialised request head, the response parsed and handed to the
 * transport, reflection masking of credentialed responses, keep-alive recycling and the one
 * retry on a pooled connection that died.
 *
 * Guarantees: a response is parsed only from the upstream connection of the request it answers;
 * a credentialed response never reaches the transport unscanned (identity requested,
 * gzip/deflate decoded under backpressure, anything else refused with 502); an upstream
 * connection returns to the pool only after a clean, complete exchange with nothing buffered
 * either way.
 */
#include "proxy/exchange_int.h"
#include "audit/audit.h"
#include "common/caps.h"
#include "policy/inject.h"
#include "mask/grpcmask.h"
#include "proxy/h2up.h"
#include "mask/mask.h"
#include "proxy/reason.h"
#include "proxy/worker.h"
#include "mask/wsmask.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/ssl.h>

static int resp_on_head(void *arg, struct http1_msg *msg);
static int resp_on_body(void *arg, const char *data, size_t len);
static int resp_on_done(void *arg);
static int resp_on_trailers(void *arg, struct http_head *t);
static int exch_send_head(struct exchange *x, bool no_body);
static void exch_grpc_unavailable(struct exchange *x);
static const struct http1_callbacks resp_callbacks = {resp_on_head, resp_on_body, resp_on_done,
                                                      resp_on_trailers};

/* ---- masking state ---------------------------------------------------------------------- */

/* Frees the per-request masking state (wiping what it held). */
void exch_drop_mask(struct exchange *x)
{
    x->masking = false;
    mask_free(&x->mask);
    mask_decoder_free(&x->dec);
    wsmask_free(&x->wsm);
    grpcmask_free(&x->gm);
    for (int i = 0; i < 3; i++) {
        struct evbuffer **b = i == 0 ? &x->scratch : i == 1 ? &x->zpend : &x->plain;

        if (*b != NULL)
            evbuffer_free(*b);
        *b = NULL;
    }
}

/*
 * A request that carries a secret asks for an identity-coded representation and gets a masker
 * for every form the secret was sent in, so an upstream echoing it cannot hand it back. It asks
 * for the whole representation (no Range/If-Range: slices masked one by one could be put back
 * together into the secret) unless keep_ranges: SigV4, whose secret never travels (SPEC §3), so
 * ranged downloads get the bytes they ask for. A masker of the worker's for the same rule and
 * snapshot is reused. 0 or -1.
 */
int exch_mask_setup(struct exchange *x, struct http_head *h, bool keep_ranges)
{
    size_t n;
    const struct inject_form *forms = exch_forms(x, &n);

    if (!keep_ranges) {
        httphead_remove(h, "Range");
        httphead_remove(h, "If-Range");
    }
    httphead_remove(h, "Accept-Encoding");
    if (x->grpc) {
        /* gRPC compresses per message with its own flag: ask for none, the masker reads them */
        httphead_remove(h, "grpc-accept-encoding");
        if (httphead_add(h, "grpc-accept-encoding", 20, "identity", 8) < 0)
            return -1;
    }
    if (n == 0 || httphead_add(h, "Accept-Encoding", 15, "identity", 8) < 0)
        return -1;
    if (!x->forms_dynamic)
        x->mask = exch_mask_take(x->w, x->rule, x->policy_gen);
    if (x->mask == NULL)
        x->mask = mask_new(forms, n);
    x->masking = true;
    if (x->scratch == NULL)
        x->scratch = evbuffer_new();
    return x->mask != NULL && x->scratch != NULL ? 0 : -1;
}

/* ---- response head ---------------------------------------------------------------------- */

/* Stops parsing the response with an answer for the client (502 unless set otherwise). */
static int resp_abort(struct exchange *x, int status, const char *type, const char *details)
{
    x->resp_err_status = status;
    x->resp_err_type = type;
    x->resp_err_details = details;
    return -1;
}

/*
 * A 101 for the WebSocket the client asked for: passed on; the splice starts after it. A
 * credentialed one is masked message by message (wsmask.c); vaultgate offered no extension, so
 * a 101 that names one is passed on without it and the connection is then closed with 1002.
 */
static int resp_ws_head(struct exchange *x, struct http_head *h)
{
    if (x->masking) {
        size_t n;
        const struct inject_form *forms = exch_forms(x, &n);

        mask_head(x->mask, h);
        x->ws_bad_ext = httphead_get(h, "Sec-WebSocket-Extensions") != NULL;
        httphead_remove(h, "Sec-WebSocket-Extensions");
        x->wsm = wsmask_new(forms, n);
        if (x->wsm == NULL)
            return -1;
    }
    http1_strip_hop_by_hop(h, true);
    x->status = 101;
    x->ws_switch = true;
    if (x->ops->head(x->t, h, EXCH_BODY_NONE, 0, false) < 0)
        return -1;
    x->resp_started = true;
    if (x->timer != NULL)
        evtimer_del(x->timer);
    return 0;
}

/*
 * Content coding of a credentialed response: identity passes, gzip/deflate are decoded (the
 * body's length becomes unknown), anything else aborts with 502. 0 or -1.
 */
static int resp_coding(struct exchange *x, struct http_head *h, enum exch_body *body)
{
    const struct http_field *f = httphead_get(h, "Content-Encoding");
    enum mask_coding coding = httphead_count(h, "Content-Encoding") > 1
                                  ? MASK_CODING_UNSUPPORTED
                                  : mask_coding_parse(f != NULL ? f->value : NULL);

    if (coding == MASK_CODING_UNSUPPORTED) {
        /* a secret never crosses back unscanned: refuse what cannot be decoded */
        return resp_abort(x, 502, VG_PS_CONTENT_CODING,
                          "unsupported content coding on a credentialed response");
    }
    if (coding != MASK_CODING_IDENTITY) {
        x->dec = mask_decoder_new(coding);
        x->zpend = evbuffer_new();
        x->plain = evbuffer_new();
        if (x->dec == NULL || x->zpend == NULL || x->plain == NULL)
            return -1;
        httphead_remove(h, "Content-Encoding");
        *body = EXCH_BODY_UNKNOWN;
    }
    return 0;
}

/* How the body of a final response reaches the transport. */
static enum exch_body resp_body_kind(const struct exchange *x, const struct http1_msg *msg,
                                     uint64_t *len)
{
    const struct http_head *h = &msg->head;
    const struct http_field *f;

    *len = msg->content_length;
    if (strcmp(x->req->head.method, "HEAD") == 0 && (f = httphead_get(h, "Content-Length")) &&
        h->status != 204 && h->status != 304) {
        /* HEAD: keep the length the upstream announced, no body follows */
        char *e = NULL;
        unsigned long long v = strtoull(f->value, &e, 10);

        if (e != NULL && *e == '\0' && f->value_len > 0) {
            *len = v;
            return EXCH_BODY_LENGTH;
        }
    }
    switch (msg->body) {
    case HTTP1_BODY_NONE:
        return EXCH_BODY_NONE;
    case HTTP1_BODY_LENGTH:
        return EXCH_BODY_LENGTH;
    default:
        return EXCH_BODY_UNKNOWN;
    }
}

/*
 * Whether a response is read as gRPC messages is the response's word alone (SPEC §10): an HTTP/2
 * upstream's content-type application/grpc... A request's claim never decides it: a sandbox
 * that says gRPC and forges a message prefix in a body an upstream echoes would otherwise end a
 * "message" inside a secret and have its held-back prefix released.
 */
static bool resp_is_grpc(const struct exchange *x, const struct http_head *h)
{
    const struct http_field *ct = httphead_get(h, "Content-Type");

    return x->h2s != NULL && ct != NULL && ct->value_len >= 16 &&
           strncasecmp(ct->value, "application/grpc", 16) == 0;
}

static int resp_on_head(void *arg, struct http1_msg *msg)
{
    struct exchange *x = arg;
    struct http_head *h = &msg->head;
    enum exch_body body;
    uint64_t len = 0;
    struct timeval idle = {EXCH_T(x, VG_T_BODY_IDLE), 0};

    x->resp = msg;
    if (h->status == 101 && x->ws && httphead_has_token(h, "Upgrade", "websocket"))
        return resp_ws_head(x, h);
    if (h->status == 101)
        return resp_abort(x, 502, VG_PS_PROTOCOL_ERROR, "unexpected 101 from upstream");
    if (h->status == 401 && x->otok != NULL)
        oauth_reject(x->osrc, x->otok); /* a new token for later requests (SPEC §3) */
    if (x->masking)
        mask_head(x->mask, h);
    if (h->status < 200) {
        /* 1xx: passed on (the transport knows who may see it); the final head follows */
        http1_strip_hop_by_hop(h, false);
        return x->ops->head(x->t, h, EXCH_BODY_NONE, 0, false);
    }
    body = resp_body_kind(x, msg, &len);
    if (x->masking && msg->body != HTTP1_BODY_NONE && resp_coding(x, h, &body) < 0)
        return -1;
    if (x->masking && resp_is_grpc(x, h) && msg->body != HTTP1_BODY_NONE && x->gm == NULL) {
        size_t n;
        const struct inject_form *forms = exch_forms(x, &n);

        if (x->dec != NULL)
            return resp_abort(x, 502, VG_PS_CONTENT_CODING,
                              "content coding on a credentialed gRPC response");
        if ((x->gm = grpcmask_new(forms, n)) == NULL)
            return -1;
    }
    http1_strip_hop_by_hop(h, false);
    x->status = h->status;
    if (x->ops->head(x->t, h, body, len, false) < 0)
        return -1;
    x->resp_started = true;
    /* the head arrived: from now on only body idleness counts */
    if (x->timer != NULL)
        evtimer_del(x->timer);
    if (x->up.bev != NULL)
        bufferevent_set_timeouts(x->up.bev, &idle, &idle);
    return 0;
}

/* ---- response body ---------------------------------------------------------------------- */

/* Hands what x->scratch holds to the transport. 0 or -1. */
static int exch_emit(struct exchange *x)
{
    size_t n = evbuffer_get_length(x->scratch);

    if (n == 0)
        return 0;
    x->bytes_out += (int64_t)n;
    return x->ops->body(x->t, x->scratch);
}

/* Masks what x->plain holds (decoded bytes) and hands it on. 0 or -1. */
static int exch_mask_plain(struct exchange *x)
{
    while (evbuffer_get_length(x->plain) > 0) {
        struct evbuffer_iovec v;

        if (evbuffer_peek(x->plain, -1, NULL, &v, 1) < 1 ||
            mask_feed(x->mask, v.iov_base, v.iov_len, x->scratch) < 0)
            return -1;
        evbuffer_drain(x->plain, v.iov_len);
    }
    return exch_emit(x);
}

/* 1 while decoded output of a compressed response waits for the client to drain. */
static bool exch_inflate_blocked(const struct exchange *x)
{
    return x->dec != NULL && (x->zmore || evbuffer_get_length(x->zpend) > 0);
}

/*
 * Decodes what waits in x->zpend, masks it and hands it on, while the client side has room: a
 * small body that inflates to gigabytes never holds more than that for a client that does not
 * read (SPEC §4). 0 or -1 (corrupt input, over the decode cap).
 */
static int exch_inflate(struct exchange *x)
{
    while (exch_inflate_blocked(x)) {
        size_t room = x->ops->room(x->t), used = 0;
        struct evbuffer_iovec v = {NULL, 0};
        int rc;

        if (room == 0)
            return 0;
        if (evbuffer_get_length(x->zpend) > 0 && evbuffer_peek(x->zpend, -1, NULL, &v, 1) < 1)
            return -1;
        rc = mask_decoder_feed_some(x->dec, v.iov_base, v.iov_len, x->plain, room, &used);
        if (rc < 0)
            return -1;
        evbuffer_drain(x->zpend, used);
        x->zmore = rc == 1;
        if (exch_mask_plain(x) < 0)
            return -1;
    }
    return 0;
}

/* Decodes (gzip/deflate) and masks len bytes of a credentialed response body. 0, 1 when the
 * client must drain before more is parsed, or -1. */
static int exch_mask_body(struct exchange *x, const char *data, size_t len)
{
    if (x->gm != NULL) {
        if (grpcmask_feed(x->gm, data, len, x->scratch) < 0)
            return -1;
        return exch_emit(x);
    }
    if (x->dec == NULL) {
        if (mask_feed(x->mask, data, len, x->scratch) < 0)
            return -1;
        return exch_emit(x);
    }
    if (evbuffer_add(x->zpend, data, len) < 0 || exch_inflate(x) < 0)
        return -1;
    return exch_inflate_blocked(x) ? 1 : 0;
}

static int resp_on_body(void *arg, const char *data, size_t len)
{
    struct exchange *x = arg;

    if (x->masking)
        return exch_mask_body(x, data, len);
    if (x->scratch == NULL && (x->scratch = evbuffer_new()) == NULL)
        return -1;
    if (evbuffer_add(x->scratch, data, len) < 0)
        return -1;
    return exch_emit(x);
}

/* The response body is complete: the decoder's end, the masker's tail, then the end. */
static int exch_body_end(struct exchange *x)
{
    if (x->masking && x->resp_started && !x->ws_switch) {
        if (x->dec != NULL && mask_decoder_finish(x->dec, x->plain) < 0)
            return -1;
        if (x->gm != NULL && grpcmask_finish(x->gm, x->scratch) < 0)
            return -1;
        if (mask_finish(x->mask, x->scratch) < 0 || exch_emit(x) < 0)
            return -1;
        x->mask_clean = true;
    }
    if (!x->ws_switch && x->ops->end(x->t, x->trailers) < 0)
        return -1;
    x->zdone = false;
    x->resp_done = true;
    return 0;
}

/* Trailers of a chunked response: masked like a head, kept for the end of the body. */
static int resp_on_trailers(void *arg, struct http_head *t)
{
    struct exchange *x = arg;

    if (x->masking)
        mask_head(x->mask, t);
    http1_trailers_filter(t);
    x->trailers = t->nfields > 0 ? t : NULL;
    return 0;
}

static int resp_on_done(void *arg)
{
    struct exchange *x = arg;

    if (exch_inflate_blocked(x)) {
        /* decoded output still waits for the client: the end follows in exch_inflate_resume */
        x->zdone = true;
        return 1;
    }
    return exch_body_end(x) < 0 ? -1 : 1;
}

/*
 * The client drained: decode on. 0 when the parser may be fed again (the response may have
 * ended meanwhile), 1 while still waiting for the client, -1 on a decoding error.
 */
static int exch_inflate_resume(struct exchange *x)
{
    if (x->dec == NULL || (!exch_inflate_blocked(x) && !x->zdone))
        return 0;
    if (exch_inflate(x) < 0)
        return -1;
    if (exch_inflate_blocked(x))
        return 1;
    if (x->zdone)
        return exch_body_end(x);
    /* a body that ended right after the last bytes: let the parser see its end */
    if (x->parser == NULL)
        return 0; /* HTTP/2: the end comes as its own event */
    return http1_feed(x->parser, "", 0) < 0 ? -1 : 0;
}

/* ---- the end of a response -------------------------------------------------------------- */

/* The egress_route_log route of a forwarded request: reported (SPEC §12), tunnel or direct. */
static enum audit_route exch_route(const struct exchange *x)
{
    if (x->reported)
        return AUDIT_ROUTE_REPORTED;
    return x->route_tunnel ? AUDIT_ROUTE_TUNNEL : AUDIT_ROUTE_DIRECT;
}

/* The response ended cleanly: account, recycle the upstream, report to the transport. */
static void exch_response_done(struct exchange *x)
{
    struct worker *w = x->w;
    struct bufferevent *ub = x->up.bev;
    bool reuse;

    metrics_request(w->id, x->mdec, x->status, exch_elapsed(&x->t_start));
    audit_route(w->sh->audit, w->id, x->host, exch_route(x));
    exch_log_request(x, audit_route_name(exch_route(x)), NULL);
    reuse = ub != NULL && x->req_done && x->resp != NULL && x->resp->keep_alive &&
            !bevio_has_input(ub) && bevio_pending(&x->up) == 0;
    if (reuse) {
        bufferevent_setcb(ub, NULL, NULL, NULL, NULL);
        bufferevent_set_timeouts(ub, NULL, NULL);
        bufferevent_setwatermark(ub, EV_WRITE, 0, 0);
        x->up.bev = NULL;
        upstream_release(w->up, x->host, x->up_port, x->up_tls, ub);
    }
    exch_drop_upstream(x, !reuse && !x->req_done);
    exch_finish(x, x->req_done ? EXCH_END_DONE : EXCH_END_CLOSE);
}

/* A 101 passed: the transport takes the upstream over (WebSocket splice). */
static void exch_upgraded(struct exchange *x)
{
    metrics_request(x->w->id, x->mdec, 101, exch_elapsed(&x->t_start));
    audit_route(x->w->sh->audit, x->w->id, x->host, exch_route(x));
    exch_log_request(x, audit_route_name(exch_route(x)),
                     x->ws_bad_ext ? VG_R_WEBSOCKET_EXT : VG_R_WEBSOCKET);
    exch_finish(x, EXCH_END_UPGRADE);
}

/* Answers 502 for a response that cannot be relayed (the reason a callback left, if any). */
static void exch_protocol_error(struct exchange *x)
{
    metrics_upstream_error(x->w->id, METRICS_UE_PROTOCOL);
    if (x->resp_err_status != 0)
        exch_fail(x, x->resp_err_status, x->resp_err_type, x->resp_err_details,
                  VG_R_UPSTREAM_PROTOCOL);
    else
        exch_fail(x, 502, VG_PS_PROTOCOL_ERROR, "malformed upstream response",
                  VG_R_UPSTREAM_PROTOCOL);
}

/* Reads the upstream while the response goes on and the client side has room. */
static void exch_up_reading(struct exchange *x)
{
    if (x->up.bev == NULL)
        return;
    if (x->state == EXCH_S_RELAY && !x->up_paused && !x->resp_done)
        bufferevent_enable(x->up.bev, EV_READ);
    else
        bufferevent_disable(x->up.bev, EV_READ);
}

/* Feeds the upstream's buffered bytes to the response parser. */
void exch_up_input(struct exchange *x)
{
    struct evbuffer *in = bufferevent_get_input(x->up.bev);
    int zr = x->state == EXCH_S_RELAY ? exch_inflate_resume(x) : 0;

    bevio_pull(x->up.bev);
    if (zr < 0) {
        exch_protocol_error(x);
        return;
    }
    while (x->state == EXCH_S_RELAY && !x->resp_done && !x->zdone && zr == 0) {
        struct evbuffer_iovec v;
        ssize_t r;

        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
            break;
        r = http1_feed(x->parser, v.iov_base, v.iov_len);
        if (x->state != EXCH_S_RELAY)
            return;
        if (r < 0) {
            exch_protocol_error(x);
            return;
        }
        evbuffer_drain(in, (size_t)r);
        x->resp_bytes += (uint64_t)r;
        x->ops->flush(x->t);
        if (x->resp_done || x->zdone || (size_t)r < v.iov_len || exch_inflate_blocked(x))
            break;
    }
    if (x->state != EXCH_S_RELAY)
        return;
    x->ops->flush(x->t);
    if (x->resp_done) {
        if (x->ws_switch)
            exch_upgraded(x);
        else
            exch_response_done(x);
        return;
    }
    /* the client must drain first: room() arms exchange_drained() */
    x->up_paused = exch_inflate_blocked(x) || x->zdone || x->ops->room(x->t) == 0;
    exch_up_reading(x);
}

static void exch_h2_after(void *arg, bool err);

void exchange_drained(struct exchange *x)
{
    exch_enter(x);
    if (x->state == EXCH_S_RELAY && x->up_paused && x->h2s != NULL) {
        x->up_paused = false;
        exch_h2_after(x, false);
    } else if (x->state == EXCH_S_RELAY && x->up_paused && x->up.bev != NULL) {
        x->up_paused = false;
        exch_up_input(x);
    }
    exch_leave(x);
}

/* ---- upstream events -------------------------------------------------------------------- */

/*
 * Acknowledges upstream data at once instead of after the delayed-ACK timer (40 ms). An
 * upstream with Nagle on holds a small write (the first server-sent event after the head, the
 * head after TLS 1.3 session tickets) until its previous segment is acknowledged; a receiver
 * that has nothing to send back would otherwise delay that ACK. Linux forgets the setting as
 * soon as it sees request/response traffic again, so it is set after each request is sent
 * and after each read of a response still streaming.
 */
static void exch_quickack(struct bufferevent *bev)
{
    evutil_socket_t fd = bufferevent_getfd(bev);
    int one = 1;

    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

static void up_read_cb(struct bufferevent *bev, void *arg)
{
    struct exchange *x = arg;

    exch_enter(x);
    exch_up_input(x);
    if (x->state == EXCH_S_RELAY && x->resp_started && !x->resp_done) {
        /* a response is streaming (one read whole costs nothing): no buffers held between its
         * reads, however long it lasts (the pool takes the mode off again) */
        exch_quickack(bev);
        bevio_release_always(bev);
    }
    exch_leave(x);
}

static void up_write_cb(struct bufferevent *bev, void *arg)
{
    struct exchange *x = arg;

    exch_enter(x);
    if (x->body_paused && evbuffer_get_length(bufferevent_get_output(bev)) <= VG_CONN_OUT_CAP / 2) {
        x->body_paused = false;
        bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
        x->ops->more(x->t);
    }
    exch_leave(x);
}

/*
 * A pooled connection can die just as it is reused (the upstream closed it while idle). A
 * bodyless GET/HEAD/OPTIONS that got no byte of answer is then sent once more on a fresh
 * connection, as nginx does. exch_retryable: the request could be (the pool may then hand out
 * a connection without its liveness peek); exch_retry returns 1 when a retry started.
 */
bool exch_retryable(const struct exchange *x)
{
    const struct http1_msg *req = x->req;
    const char *m;

    if (req == NULL || x->h2s != NULL || x->retried)
        return false;
    m = req->head.method;
    return (req->body == HTTP1_BODY_NONE ||
            (req->body == HTTP1_BODY_LENGTH && req->content_length == 0)) &&
           (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0);
}

static int exch_retry(struct exchange *x)
{
    if (x->state != EXCH_S_RELAY || x->resp_started || x->resp_bytes > 0 || !exch_retryable(x))
        return 0;
    x->retried = true;
    exch_drop_upstream(x, true);
    x->req_done = false;
    exch_log(x, LOG_DEBUG, "upstream_retry", "pooled_connection_closed", NULL);
    exch_get_upstream(x);
    return 1;
}

/* The upstream closed: the end of a close-delimited body, a retry, or a cut response. */
static void up_eof(struct exchange *x)
{
    exch_up_input(x);
    if (x->state != EXCH_S_RELAY && x->state != EXCH_S_UP_CONNECT)
        return;
    if (x->state == EXCH_S_RELAY && x->zdone)
        return; /* the body is complete; its decoded rest waits for the client */
    if (x->state == EXCH_S_RELAY && !x->resp_done && x->parser != NULL &&
        http1_in_message(x->parser) && x->resp_started && http1_feed_eof(x->parser) == 0 &&
        (x->resp_done || x->zdone)) {
        if (x->resp_done)
            exch_response_done(x);
        return;
    }
    if (exch_retry(x))
        return;
    metrics_upstream_error(x->w->id, METRICS_UE_PROTOCOL);
    exch_fail(x, 502, VG_PS_INCOMPLETE, "upstream closed the connection", VG_R_UPSTREAM_EOF);
}

static void up_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct exchange *x = arg;
    char detail[256];

    exch_enter(x);
    if (what & BEV_EVENT_EOF) {
        up_eof(x);
    } else if (what & BEV_EVENT_TIMEOUT) {
        metrics_upstream_error(x->w->id, METRICS_UE_TIMEOUT);
        exch_fail(x, 504, VG_PS_RESPONSE_TIMEOUT, "upstream timed out", VG_R_UPSTREAM_TIMEOUT);
    } else if ((what & BEV_EVENT_ERROR) && !exch_retry(x)) {
        unsigned long e = bufferevent_get_openssl_error(bev);

        snprintf(detail, sizeof(detail), "%s",
                 e != 0 ? exch_tls_reason(e) : strerror(EVUTIL_SOCKET_ERROR()));
        exch_log(x, LOG_INFO, "upstream_error", VG_R_UPSTREAM_IO, detail);
        metrics_upstream_error(x->w->id, METRICS_UE_CONNECT);
        exch_fail(x, 502, VG_PS_TERMINATED, "upstream connection failed", VG_R_UPSTREAM_IO);
    }
    exch_leave(x);
}

/* ---- an HTTP/2 upstream (h2up.c) ------------------------------------------------------ */

static void exch_h2_more(void *arg)
{
    struct exchange *x = arg;

    exch_enter(x);
    if (x->state == EXCH_S_RELAY && x->body_paused) {
        x->body_paused = false;
        x->ops->more(x->t);
    }
    exch_leave(x);
}

/* A request that waited for a connection being made learns its place. */
static void exch_h2_placed(void *arg, enum h2up_placed p, enum upstream_err err)
{
    struct exchange *x = arg;

    exch_enter(x);
    if (p != H2UP_PLACED_OPEN)
        x->h2s = NULL; /* freed by h2up.c */
    if (x->state != EXCH_S_UP_CONNECT) {
        h2up_close(&x->h2s);
        goto out;
    }
    switch (p) {
    case H2UP_PLACED_OPEN:
        exch_h2_started(x);
        break;
    case H2UP_PLACED_RETRY:
        exch_get_upstream(x);
        break;
    case H2UP_PLACED_H1:
        exch_dial(x);
        break;
    case H2UP_PLACED_FAILED:
        exch_upstream_failed(x, err);
        break;
    }
out:
    exch_leave(x);
}

static const struct h2up_ops h2_ops = {
    {resp_on_head, resp_on_body, resp_on_done, resp_on_trailers},
    exch_h2_after,
    exch_h2_more,
    exch_h2_placed,
};

/*
 * The server refused the stream unprocessed (REFUSED_STREAM, or above a GOAWAY's last stream):
 * a request without a body that got no answer yet goes once more, on another stream. 1 when
 * it did.
 */
static int exch_h2_retry(struct exchange *x)
{
    if (x->retried || x->resp_started || x->h2s == NULL || !h2up_refused(x->h2s) ||
        !(x->req->body == HTTP1_BODY_NONE ||
          (x->req->body == HTTP1_BODY_LENGTH && x->req->content_length == 0)))
        return 0;
    x->retried = true;
    h2up_close(&x->h2s);
    x->req_done = false;
    exch_log(x, LOG_DEBUG, "upstream_retry", "h2_stream_refused", NULL);
    exch_get_upstream(x);
    return 1;
}

/*
 * After a batch of the stream's frames went through the response callbacks: the end, a
 * failure, or the window given back while the client side has room (else held until
 * exchange_drained: a slow client stalls only this stream).
 */
static void exch_h2_after(void *arg, bool err)
{
    struct exchange *x = arg;
    int zr;

    exch_enter(x);
    if (x->state != EXCH_S_RELAY)
        goto out;
    if (err && !x->resp_done && !x->zdone) {
        if (exch_h2_retry(x))
            goto out;
        metrics_upstream_error(x->w->id, METRICS_UE_PROTOCOL);
        if (x->resp_err_status != 0)
            exch_protocol_error(x);
        else
            exch_fail(x, 502, VG_PS_INCOMPLETE, "upstream stream reset", VG_R_UPSTREAM_EOF);
        goto out;
    }
    zr = exch_inflate_resume(x);
    if (zr < 0) {
        exch_protocol_error(x);
        goto out;
    }
    x->ops->flush(x->t);
    if (x->resp_done) {
        exch_response_done(x);
        goto out;
    }
    x->up_paused = exch_inflate_blocked(x) || x->zdone || x->ops->room(x->t) == 0;
    if (!x->up_paused)
        h2up_consume(x->h2s);
out:
    exch_leave(x);
}

/* A stream on a pooled HTTP/2 connection to this request's upstream, or in the queue of one
 * being made (*how, an enum h2up_how). */
struct h2up_stream *exch_h2_open(struct exchange *x, int *how)
{
    enum h2up_how h;
    struct h2up_stream *s = h2up_open(x->w, x->host, x->up_port, &h2_ops, x, &h);

    *how = (int)h;
    return s;
}

/*
 * A gRPC request whose upstream does not speak HTTP/2: a trailers-only answer with
 * grpc-status 14 (UNAVAILABLE) and Proxy-Status, at once (SPEC §10).
 */
static void exch_grpc_unavailable(struct exchange *x)
{
    static const char ps[] = "vaultgate; error=http_protocol_error; details=\"upstream does "
                             "not speak HTTP/2, which gRPC needs\"";
    static const char msg[] = "upstream does not speak HTTP/2";
    struct http_head h;
    int rc;

    metrics_upstream_error(x->w->id, METRICS_UE_PROTOCOL);
    httphead_init(&h);
    rc = httphead_set_status_line(&h, 1, 200, "OK", 2) < 0 ||
                 httphead_add(&h, "Content-Type", 12, "application/grpc", 16) < 0 ||
                 httphead_add(&h, "grpc-status", 11, "14", 2) < 0 ||
                 httphead_add(&h, "grpc-message", 12, msg, sizeof(msg) - 1) < 0 ||
                 httphead_add(&h, "Proxy-Status", 12, ps, sizeof(ps) - 1) < 0 ||
                 x->ops->head(x->t, &h, EXCH_BODY_NONE, 0, false) < 0 || x->ops->end(x->t, NULL) < 0
             ? -1
             : 0;
    httphead_reset(&h);
    x->status = 200;
    x->resp_started = x->resp_done = true;
    if (rc < 0) {
        exch_finish(x, EXCH_END_ABORT);
        return;
    }
    metrics_request(x->w->id, x->mdec, 200, exch_elapsed(&x->t_start));
    exch_log_request(x, x->route_tunnel ? "tunnel" : "direct", "grpc_needs_h2");
    exch_finish(x, EXCH_END_CLOSE);
}

/* The request's stream is there: head out, then the body, then the response. */
void exch_h2_started(struct exchange *x)
{
    uint64_t len;
    bool no_body = exch_req_body(x, &len) == HTTP1_BODY_NONE;

    exch_enter(x);
    x->route_tunnel = h2up_route_tunnel(x->h2s);
    if (exch_send_head(x, no_body) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "request head too large", VG_R_HEAD);
        goto out;
    }
    x->req_done = no_body;
    x->state = EXCH_S_RELAY;
    exch_arm(x, EXCH_T(x, VG_T_RESPONSE_HEAD));
    if (exch_cred_body_out(x) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        goto out;
    }
    if (!x->req_done)
        x->ops->more(x->t);
out:
    exch_leave(x);
}

/* ---- the upstream connection ------------------------------------------------------------ */

/* upstream_get() failed: the answer of SPEC §4 for that failure. */
void exch_upstream_failed(struct exchange *x, enum upstream_err err)
{
    const char *type = upstream_err_type(err);

    metrics_upstream_error(x->w->id, metrics_upstream_kind(err));
    if (err == UPSTREAM_ERR_PROHIBITED) {
        x->mdec = METRICS_D_BLOCK;
        exch_record_refusal(x);
    }
    exch_fail(x, upstream_err_status(err), type,
              err == UPSTREAM_ERR_PROHIBITED ? "destination address prohibited"
                                             : "upstream unavailable",
              type);
}

/* Takes bev as this request's upstream: callbacks, limits, a reset response parser. 0 or -1. */
static int exch_attach(struct exchange *x, struct bufferevent *bev, bool route_tunnel)
{
    x->up.bev = bev;
    x->route_tunnel = route_tunnel;
    /* many servers close without close_notify; truncation of a Content-Length or chunked body
     * is still caught by the parser, and an EOF-delimited body can only end this way */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    if (bufferevent_openssl_get_ssl(bev) != NULL)
        SSL_set_options(bufferevent_openssl_get_ssl(bev), SSL_OP_IGNORE_UNEXPECTED_EOF);
    bufferevent_setcb(bev, up_read_cb, up_write_cb, up_event_cb, x);
    bufferevent_setwatermark(bev, EV_READ, 0, VG_CONN_IN_MAX);
    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    bufferevent_set_timeouts(bev, NULL, NULL);
    /* a fresh parser for each upstream connection (one that ended stays stopped) */
    http1_parser_free(&x->parser);
    x->parser = http1_parser_new(HTTP1_RESPONSE, &resp_callbacks, x);
    if (x->parser == NULL)
        return -1;
    http1_parser_set_request_method(x->parser, x->req->head.method);
    return 0;
}

/* Serialises the rewritten head for the upstream (a head with a secret in a wiped block). */
static int exch_send_head(struct exchange *x, bool no_body)
{
    const struct http1_msg *req = x->req;
    uint64_t len = 0;
    enum http1_body body = exch_req_body(x, &len);

    if (x->h2s != NULL) {
        if (h2up_request(x->h2s, &req->head, no_body, body == HTTP1_BODY_LENGTH, len,
                         x->rule >= 0) < 0)
            return -1;
    } else {
        x->up.nocopy = x->rule >= 0;
        if ((x->rule >= 0 ? http1_write_request_head_wiped : http1_write_request_head)(
                x->up.stage, &req->head, no_body ? HTTP1_BODY_NONE : body, len) < 0)
            return -1;
    }
    if (x->rule >= 0) {
        struct policy_rule_info ri;

        policy_rule_info(x->policy, (size_t)x->rule, &ri);
        metrics_injection(x->w->id, ri.secret_name);
    }
    return 0;
}

/*
 * upstream_get()'s callback: the rewritten head goes out (the parsed head, with the secret, is
 * wiped when the transport resets its parser), then the body and the response stream.
 */
void exch_up_ready(void *arg, struct bufferevent *bev, enum upstream_err err, bool route_tunnel)
{
    struct exchange *x = arg;
    uint64_t len;
    bool no_body = exch_req_body(x, &len) == HTTP1_BODY_NONE;

    exch_enter(x);
    x->upreq = NULL;
    if (x->state != EXCH_S_UP_CONNECT) {
        h2up_dial_end(&x->h2dial, H2UP_PLACED_RETRY, UPSTREAM_OK);
        if (bev != NULL)
            bufferevent_free(bev);
        goto out;
    }
    if (bev == NULL) {
        /* the requests waiting for this dial get the same answer */
        h2up_dial_end(&x->h2dial, H2UP_PLACED_FAILED, err);
        exch_upstream_failed(x, err);
        goto out;
    }
    if (x->up_tls == UPSTREAM_TLS_H2 && upstream_alpn_h2(bev)) {
        x->route_tunnel = route_tunnel;
        x->h2s = h2up_attach(x->w, &x->h2dial, x->host, x->up_port, bev, route_tunnel, &h2_ops, x);
        if (x->h2s == NULL)
            exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        else
            exch_h2_started(x);
        goto out;
    }
    h2up_dial_end(&x->h2dial, H2UP_PLACED_H1, UPSTREAM_OK); /* each waiting request dials */
    if (x->grpc) {
        /* gRPC needs HTTP/2 end to end: never translated to HTTP/1.1 (SPEC §10) */
        upstream_release(x->w->up, x->host, x->up_port, x->up_tls, bev);
        exch_grpc_unavailable(x);
        goto out;
    }
    if (exch_attach(x, bev, route_tunnel) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        goto out;
    }
    if (exch_send_head(x, no_body) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "request head too large", VG_R_HEAD);
        goto out;
    }
    x->req_done = no_body;
    x->state = EXCH_S_RELAY;
    exch_arm(x, EXCH_T(x, VG_T_RESPONSE_HEAD));
    if (exch_cred_body_out(x) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        goto out;
    }
    bevio_push(&x->up);
    /* the answer is next: acknowledge at once what arrives now (see exch_quickack) */
    exch_quickack(bev);
    if (!x->req_done)
        x->ops->more(x->t);
    if (x->state == EXCH_S_RELAY)
        exch_up_input(x);
out:
    exch_leave(x);
}
