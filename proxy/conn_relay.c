/*
 * conn_relay.c - the upstream half of a client connection (see conn.c): the upstream
 * connection handed over by upstream_get(), the serialised request head, the response parser
 * and the response streamed back re-framed, reflection masking of credentialed responses,
 * keep-alive recycling and the one retry on a pooled connection that died.
 *
 * Guarantees: a response is parsed only from the upstream connection of the request it
 * answers and written only to that request's client, after its head; a credentialed response
 * never reaches the client unscanned (identity requested, gzip/deflate decoded, anything else
 * refused with 502); an upstream connection returns to the pool only after a clean, complete
 * exchange with nothing buffered either way.
 */
#include "proxy/conn_int.h"
#include "audit/audit.h"
#include "common/caps.h"
#include "policy/inject.h"
#include "proxy/mask.h"
#include "proxy/wsmask.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

static int resp_on_head(void *arg, struct http1_msg *msg);
static int resp_on_body(void *arg, const char *data, size_t len);
static int resp_on_done(void *arg);
static const struct http1_callbacks resp_callbacks = {resp_on_head, resp_on_body, resp_on_done};
static void conn_response_done(struct conn *c);

/* Frees the decoder of a gzip/deflate response and what waits around it. */
void conn_drop_decoder(struct conn *c)
{
    mask_decoder_free(&c->dec);
    if (c->zpend != NULL)
        evbuffer_drain(c->zpend, evbuffer_get_length(c->zpend));
    if (c->plain != NULL)
        evbuffer_drain(c->plain, evbuffer_get_length(c->plain));
    c->zmore = c->zdone = false;
}

/* Frees the per-request masking state (wiping what it held). */
void conn_drop_mask(struct conn *c)
{
    c->masking = false;
    c->mask_clean = false;
    mask_free(&c->mask);
    conn_drop_decoder(c);
    for (int i = 0; i < 2; i++) {
        struct evbuffer **b = i == 0 ? &c->zpend : &c->plain;

        if (*b != NULL)
            evbuffer_free(*b);
        *b = NULL;
    }
    wsmask_free(&c->wsm);
    if (c->scratch != NULL) {
        evbuffer_free(c->scratch);
        c->scratch = NULL;
    }
}

/*
 * A request that carries a secret asks for the whole representation, identity-coded (no
 * Range/If-Range: slices masked one by one could be put back together into the secret), and
 * gets a masker for every form the secret was sent in, so an upstream echoing it cannot hand
 * it back. 0 or -1.
 */
int conn_mask_setup(struct conn *c, struct http_head *h)
{
    struct inject_form forms[INJECT_MAX_FORMS];
    size_t n = inject_forms(c->policy, c->rule, forms);

    httphead_remove(h, "Range");
    httphead_remove(h, "If-Range");
    httphead_remove(h, "Accept-Encoding");
    if (n == 0 || httphead_add(h, "Accept-Encoding", 15, "identity", 8) < 0)
        return -1;
    if (c->mask != NULL &&
        !(c->mask_clean && c->mask_rule == c->rule && c->mask_gen == c->policy_gen))
        conn_drop_mask(c);
    if (c->mask == NULL) {
        c->mask = mask_new(forms, n);
        c->mask_rule = c->rule;
        c->mask_gen = c->policy_gen;
    }
    c->mask_clean = false;
    c->masking = true;
    if (c->scratch == NULL)
        c->scratch = evbuffer_new();
    return c->mask != NULL && c->scratch != NULL ? 0 : -1;
}

/*
 * A 101 for the WebSocket the client asked for: passed on; the splice starts after it. A
 * credentialed one is masked message by message (wsmask.c); vaultgate offered no extension, so
 * a 101 that names one is passed on without it and the connection is then closed with 1002.
 */
static int resp_ws_head(struct conn *c, struct http_head *h)
{
    if (c->masking) {
        struct inject_form forms[INJECT_MAX_FORMS];
        size_t n = inject_forms(c->policy, c->rule, forms);

        mask_head(c->mask, h);
        c->ws_bad_ext = httphead_get(h, "Sec-WebSocket-Extensions") != NULL;
        httphead_remove(h, "Sec-WebSocket-Extensions");
        c->wsm = wsmask_new(forms, n);
        if (c->wsm == NULL)
            return -1;
    }
    http1_strip_hop_by_hop(h, true);
    c->status = 101;
    c->ws_switch = true;
    if (http1_write_response_head(c->client.stage, h, HTTP1_BODY_NONE, 0, false) < 0)
        return -1;
    c->resp_started = true;
    evtimer_del(c->timer);
    return 0;
}

/*
 * Content coding of a credentialed response: identity passes, gzip/deflate are decoded (the
 * body becomes close-delimited, re-framed by the caller), anything else aborts with 502.
 * 0 or -1.
 */
static int resp_coding(struct conn *c, struct http_head *h, enum http1_body *body)
{
    const struct http_field *f = httphead_get(h, "Content-Encoding");
    enum mask_coding coding = httphead_count(h, "Content-Encoding") > 1
                                  ? MASK_CODING_UNSUPPORTED
                                  : mask_coding_parse(f != NULL ? f->value : NULL);

    if (coding == MASK_CODING_UNSUPPORTED) {
        /* a secret never crosses back unscanned: refuse what cannot be decoded */
        c->resp_err_status = 502;
        c->resp_err_type = "http_response_content_coding";
        c->resp_err_details = "unsupported content coding on a credentialed response";
        return -1;
    }
    if (coding != MASK_CODING_IDENTITY) {
        c->dec = mask_decoder_new(coding);
        if (c->zpend == NULL)
            c->zpend = evbuffer_new();
        if (c->plain == NULL)
            c->plain = evbuffer_new();
        if (c->dec == NULL || c->zpend == NULL || c->plain == NULL)
            return -1;
        httphead_remove(h, "Content-Encoding");
        *body = HTTP1_BODY_EOF;
    }
    return 0;
}

static int resp_on_head(void *arg, struct http1_msg *msg)
{
    struct conn *c = arg;
    struct http_head *h = &msg->head;
    enum http1_body body = msg->body;
    uint64_t cl = msg->content_length;
    bool close = !c->req_keep_alive;
    const struct http_field *f = NULL;
    struct timeval idle = {CONN_T_BODY_IDLE, 0};

    c->resp = msg;
    if (h->status == 101 && c->ws && httphead_has_token(h, "Upgrade", "websocket"))
        return resp_ws_head(c, h);
    if (h->status == 101) {
        c->resp_err_status = 502;
        c->resp_err_type = "http_protocol_error";
        c->resp_err_details = "unexpected 101 from upstream";
        return -1;
    }
    if (c->masking)
        mask_head(c->mask, h);
    if (h->status < 200) {
        /* 1xx: passed on to HTTP/1.1 clients only (RFC 9110 §15.2: an HTTP/1.0 client cannot
         * tell it from the final answer); the parser then reads the final response head */
        if (c->req_minor == 0)
            return 0;
        http1_strip_hop_by_hop(h, false);
        return http1_write_response_head(c->client.stage, h, HTTP1_BODY_NONE, 0, false);
    }
    if (c->masking && body != HTTP1_BODY_NONE && resp_coding(c, h, &body) < 0)
        return -1;
    if (strcmp(c->req->head.method, "HEAD") == 0 && (f = httphead_get(h, "Content-Length")) &&
        h->status != 204 && h->status != 304) {
        /* HEAD: keep the length the upstream announced, no body follows */
        char *e = NULL;
        unsigned long long v = strtoull(f->value, &e, 10);

        if (e != NULL && *e == '\0' && f->value_len > 0) {
            body = HTTP1_BODY_LENGTH;
            cl = v;
        }
    } else if (body == HTTP1_BODY_CHUNKED || body == HTTP1_BODY_EOF) {
        /* unknown length: chunked for HTTP/1.1 clients, close-delimited for HTTP/1.0 */
        if (c->req_minor >= 1) {
            body = HTTP1_BODY_CHUNKED;
            c->resp_chunked = true;
        } else {
            body = HTTP1_BODY_EOF;
            close = true;
        }
    }
    http1_strip_hop_by_hop(h, false);
    c->resp_close = close || c->draining;
    c->status = h->status;
    if (http1_write_response_head(c->client.stage, h, body, cl, c->resp_close) < 0)
        return -1;
    c->resp_started = true;
    /* the head arrived: from now on only body idleness counts */
    evtimer_del(c->timer);
    bufferevent_set_timeouts(c->upstream.bev, &idle, &idle);
    bufferevent_set_timeouts(c->client.bev, NULL, &idle);
    return 0;
}

/* Moves what is in c->scratch to the client, framed for this response. 0 or -1. */
static int conn_emit_scratch(struct conn *c)
{
    struct evbuffer *out = c->client.stage;
    size_t n = evbuffer_get_length(c->scratch);

    if (n == 0)
        return 0;
    c->bytes_out += (int64_t)n;
    if (c->resp_chunked && http1_write_chunk_header(out, n) < 0)
        return -1;
    if (evbuffer_add_buffer(out, c->scratch) < 0)
        return -1;
    return c->resp_chunked ? evbuffer_add(out, "\r\n", 2) : 0;
}

/* Masks what c->plain holds (decoded bytes) into the client's framing. 0 or -1. */
static int conn_mask_plain(struct conn *c)
{
    while (evbuffer_get_length(c->plain) > 0) {
        struct evbuffer_iovec v;

        if (evbuffer_peek(c->plain, -1, NULL, &v, 1) < 1 ||
            mask_feed(c->mask, v.iov_base, v.iov_len, c->scratch) < 0)
            return -1;
        evbuffer_drain(c->plain, v.iov_len);
    }
    return conn_emit_scratch(c);
}

/* 1 while decoded output of a compressed response waits for the client to drain. */
static bool conn_inflate_blocked(const struct conn *c)
{
    return c->dec != NULL && (c->zmore || evbuffer_get_length(c->zpend) > 0);
}

/*
 * Decodes what waits in c->zpend, masks it and sends it on, while the client's output stays
 * below VG_CONN_OUT_CAP: a small body that inflates to gigabytes never holds more than that
 * for a client that does not read (SPEC §4). 0 or -1 (corrupt input, over the decode cap).
 */
static int conn_inflate(struct conn *c)
{
    while (conn_inflate_blocked(c)) {
        size_t pending = conn_pending(&c->client), used = 0;
        struct evbuffer_iovec v = {NULL, 0};
        int rc;

        if (pending >= VG_CONN_OUT_CAP)
            return 0;
        if (evbuffer_get_length(c->zpend) > 0 && evbuffer_peek(c->zpend, -1, NULL, &v, 1) < 1)
            return -1;
        rc = mask_decoder_feed_some(c->dec, v.iov_base, v.iov_len, c->plain,
                                    VG_CONN_OUT_CAP - pending, &used);
        if (rc < 0)
            return -1;
        evbuffer_drain(c->zpend, used);
        c->zmore = rc == 1;
        if (conn_mask_plain(c) < 0)
            return -1;
        conn_push(&c->client);
    }
    return 0;
}

/* Decodes (gzip/deflate) and masks len bytes of a credentialed response body. 0, 1 when the
 * client must drain before more is parsed, or -1. */
static int conn_mask_body(struct conn *c, const char *data, size_t len)
{
    if (c->dec == NULL) {
        if (mask_feed(c->mask, data, len, c->scratch) < 0)
            return -1;
        return conn_emit_scratch(c);
    }
    if (evbuffer_add(c->zpend, data, len) < 0 || conn_inflate(c) < 0)
        return -1;
    if (!conn_inflate_blocked(c))
        return 0;
    c->parse_stop = true;
    return 1;
}

/* End of a credentialed response body: the decoder's end and the held-back bytes. 0 or -1. */
static int conn_mask_finish(struct conn *c)
{
    if (c->dec != NULL && mask_decoder_finish(c->dec, c->plain) < 0)
        return -1;
    if (mask_finish(c->mask, c->scratch) < 0)
        return -1;
    c->mask_clean = true;
    return conn_emit_scratch(c);
}

static int resp_on_body(void *arg, const char *data, size_t len)
{
    struct conn *c = arg;
    struct evbuffer *out = c->client.stage;

    if (c->masking)
        return conn_mask_body(c, data, len);
    c->bytes_out += (int64_t)len;
    if (c->resp_chunked)
        return http1_write_chunk(out, data, len) == 0 ? 0 : -1;
    return evbuffer_add(out, data, len) == 0 ? 0 : -1;
}

/* The response body is complete on both sides: the masker's tail and the last chunk. */
static int conn_body_end(struct conn *c)
{
    if (c->masking && c->resp_started && !c->ws_switch && conn_mask_finish(c) < 0)
        return -1;
    if (c->resp_chunked && http1_write_last_chunk(c->client.stage) < 0)
        return -1;
    c->zdone = false;
    c->resp_done = true;
    return 0;
}

static int resp_on_done(void *arg)
{
    struct conn *c = arg;

    c->parse_stop = true;
    if (conn_inflate_blocked(c)) {
        /* decoded output still waits for the client: the end follows in conn_inflate_resume */
        c->zdone = true;
        return 1;
    }
    if (conn_body_end(c) < 0)
        return -1;
    return 1;
}

/*
 * The client drained: decode on. 0 when the parser may be fed again (the response may have
 * ended meanwhile), 1 while still waiting for the client, -1 on a decoding error.
 */
static int conn_inflate_resume(struct conn *c)
{
    if (c->dec == NULL || (!conn_inflate_blocked(c) && !c->zdone))
        return 0;
    if (conn_inflate(c) < 0)
        return -1;
    if (conn_inflate_blocked(c))
        return 1;
    if (c->zdone)
        return conn_body_end(c);
    /* a body that ended right after the last bytes: let the parser see its end */
    return http1_feed(c->upstream.parser, "", 0) < 0 ? -1 : 0;
}

/* The response ended cleanly: account, recycle the upstream, and wait for the next request. */
static void conn_response_done(struct conn *c)
{
    struct listen_worker *w = c->w;
    const char *route = c->route_tunnel ? "tunnel" : "direct";
    struct bufferevent *ub = c->upstream.bev;
    bool reuse;

    conn_push(&c->client);
    metrics_request(w->id, c->mdec, c->status, conn_elapsed(&c->t_start));
    audit_route(w->sh->audit, w->id, c->host,
                c->route_tunnel ? AUDIT_ROUTE_TUNNEL : AUDIT_ROUTE_DIRECT);
    conn_log_request(c, route, NULL);
    reuse = ub != NULL && c->req_done && c->resp != NULL && c->resp->keep_alive &&
            evbuffer_get_length(bufferevent_get_input(ub)) == 0 && conn_pending(&c->upstream) == 0;
    if (reuse) {
        bufferevent_setcb(ub, NULL, NULL, NULL, NULL);
        bufferevent_set_timeouts(ub, NULL, NULL);
        bufferevent_setwatermark(ub, EV_WRITE, 0, 0);
        c->upstream.bev = NULL;
        upstream_release(w->up, c->host, c->up_port, c->up_tls, ub);
    }
    conn_drop_upstream(c, !reuse && !c->req_done);
    if (c->resp_close || !c->req_keep_alive || !c->req_done || c->draining) {
        conn_flush_close(c);
        return;
    }
    /* keep-alive: back to REQ_HEAD with a clean parser and released buffers */
    http1_parser_reset(c->client.parser);
    c->req = NULL;
    c->idle = true;
    bufferevent_set_timeouts(c->client.bev, NULL, NULL);
    conn_set_state(c, CONN_S_REQ_HEAD);
    conn_arm(c, CONN_T_IDLE);
    conn_update_reading(c);
    conn_client_input(c);
}

/* Answers 502 for a response that cannot be relayed (the reason a callback left, if any). */
static void conn_upstream_protocol_error(struct conn *c)
{
    metrics_upstream_error(c->w->id, METRICS_UE_PROTOCOL);
    if (c->resp_err_status != 0)
        conn_respond_error(c, c->resp_err_status, c->resp_err_type, c->resp_err_details,
                           "upstream_protocol");
    else
        conn_respond_error(c, 502, "http_protocol_error", "malformed upstream response",
                           "upstream_protocol");
}

void conn_upstream_input(struct conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->upstream.bev);
    int zr = c->state == CONN_S_RELAY ? conn_inflate_resume(c) : 0;

    if (zr < 0) {
        conn_upstream_protocol_error(c);
        return;
    }
    while (c->state == CONN_S_RELAY && !c->resp_done && !c->zdone && zr == 0) {
        struct evbuffer_iovec v;
        ssize_t r;

        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
            break;
        c->parse_stop = false;
        r = http1_feed(c->upstream.parser, v.iov_base, v.iov_len);
        if (c->state != CONN_S_RELAY)
            return;
        if (r < 0) {
            conn_upstream_protocol_error(c);
            return;
        }
        evbuffer_drain(in, (size_t)r);
        c->resp_bytes += (uint64_t)r;
        conn_push(&c->client);
        if (c->parse_stop || (size_t)r < v.iov_len || conn_inflate_blocked(c))
            break;
    }
    if (c->state != CONN_S_RELAY)
        return;
    if (c->resp_done && c->ws_switch) {
        conn_push(&c->client);
        metrics_request(c->w->id, c->mdec, 101, conn_elapsed(&c->t_start));
        audit_route(c->w->sh->audit, c->w->id, c->host,
                    c->route_tunnel ? AUDIT_ROUTE_TUNNEL : AUDIT_ROUTE_DIRECT);
        if (c->ws_bad_ext) {
            /* an extension vaultgate did not offer: the masker could not read its frames */
            conn_log_request(c, c->route_tunnel ? "tunnel" : "direct", "websocket_extension");
            wsmask_close_frame(c->client.stage, WSMASK_CLOSE_PROTOCOL);
            conn_flush_close(c);
            return;
        }
        conn_log_request(c, c->route_tunnel ? "tunnel" : "direct", "websocket");
        conn_tunnel_start(c);
        return;
    }
    if (c->resp_done) {
        conn_response_done(c);
        return;
    }
    if (conn_pending(&c->client) >= VG_CONN_OUT_CAP || conn_inflate_blocked(c) || c->zdone) {
        /* the client must drain first (conn_inflate stops only at the cap) */
        c->upstream.paused = true;
        bufferevent_setwatermark(c->client.bev, EV_WRITE, VG_CONN_OUT_CAP / 2, 0);
    }
    conn_update_reading(c);
}

/*
 * Acknowledges upstream data at once instead of after the delayed-ACK timer (40 ms). An
 * upstream with Nagle on holds a small write (the first server-sent event after the head, the
 * head after TLS 1.3 session tickets) until its previous segment is acknowledged; a receiver
 * that has nothing to send back would otherwise delay that ACK. Linux forgets the setting as
 * soon as it sees request/response traffic again, so it is set after each request is sent
 * and after each read of a response still streaming.
 */
static void conn_quickack(struct bufferevent *bev)
{
    evutil_socket_t fd = bufferevent_getfd(bev);
    int one = 1;

    if (fd >= 0)
        setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

static void up_read_cb(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;

    conn_enter(c);
    conn_upstream_input(c);
    if (c->state == CONN_S_RELAY && c->resp_started && !c->resp_done)
        conn_quickack(bev); /* a response is streaming (a response read whole costs nothing) */
    conn_leave(c);
}

static void up_write_cb(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;

    conn_enter(c);
    if (c->client.paused &&
        evbuffer_get_length(bufferevent_get_output(bev)) <= VG_CONN_OUT_CAP / 2) {
        c->client.paused = false;
        bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
        conn_client_input(c);
    }
    conn_leave(c);
}

/*
 * A pooled connection can die just as it is reused (the upstream closed it while idle). A
 * bodyless GET/HEAD/OPTIONS that got no byte of answer is then sent once more on a fresh
 * connection, as nginx does. Returns 1 when a retry started.
 */
static int conn_retry_upstream(struct conn *c)
{
    const char *m = c->req != NULL ? c->req->head.method : "";

    if (c->state != CONN_S_RELAY || c->retried || c->resp_started || c->resp_bytes > 0 ||
        !(c->req->body == HTTP1_BODY_NONE ||
          (c->req->body == HTTP1_BODY_LENGTH && c->req->content_length == 0)) ||
        (strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0 && strcmp(m, "OPTIONS") != 0))
        return 0;
    c->retried = true;
    conn_drop_upstream(c, true);
    c->req_done = false;
    conn_set_state(c, CONN_S_UP_CONNECT);
    conn_arm(c, CONN_T_UP_GET);
    conn_log(c, LOG_DEBUG, "upstream_retry", "pooled_connection_closed", NULL);
    c->upreq = upstream_get(c->w->up, c->host, c->up_port, c->up_tls, conn_up_ready, c);
    if (c->upreq == NULL)
        conn_respond_error(c, 502, "proxy_internal_error", "upstream connection failed",
                           "upstream_get");
    return 1;
}

static void up_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    char detail[256];

    conn_enter(c);
    if (what & BEV_EVENT_EOF) {
        conn_upstream_input(c);
        if (c->state == CONN_S_RELAY && c->zdone) {
            /* the body is complete; its decoded rest waits for the client */
        } else if (c->state == CONN_S_RELAY && !c->resp_done && c->upstream.parser != NULL &&
                   http1_in_message(c->upstream.parser) && c->resp_started &&
                   http1_feed_eof(c->upstream.parser) == 0 && (c->resp_done || c->zdone)) {
            if (c->resp_done)
                conn_response_done(c);
        } else if (conn_retry_upstream(c)) {
            /* sent again on a fresh connection */
        } else if (c->state == CONN_S_RELAY || c->state == CONN_S_UP_CONNECT) {
            metrics_upstream_error(c->w->id, METRICS_UE_PROTOCOL);
            conn_respond_error(c, 502, "http_response_incomplete", "upstream closed the connection",
                               "upstream_eof");
        }
    } else if (what & BEV_EVENT_TIMEOUT) {
        metrics_upstream_error(c->w->id, METRICS_UE_TIMEOUT);
        conn_respond_error(c, 504, "http_response_timeout", "upstream timed out",
                           "upstream_timeout");
    } else if ((what & BEV_EVENT_ERROR) && conn_retry_upstream(c)) {
        /* sent again on a fresh connection */
    } else if (what & BEV_EVENT_ERROR) {
        unsigned long e = bufferevent_get_openssl_error(bev);

        snprintf(detail, sizeof(detail), "%s",
                 e != 0 ? conn_tls_reason(e) : strerror(EVUTIL_SOCKET_ERROR()));
        conn_log(c, LOG_INFO, "upstream_error", "upstream_io", detail);
        metrics_upstream_error(c->w->id, METRICS_UE_CONNECT);
        conn_respond_error(c, 502, "connection_terminated", "upstream connection failed",
                           "upstream_io");
    }
    conn_leave(c);
}

/* upstream_get() failed: the answer of SPEC §4 for that failure. */
static void conn_upstream_failed(struct conn *c, enum upstream_err err)
{
    const char *type = upstream_err_type(err);

    metrics_upstream_error(c->w->id, conn_upstream_metric(err));
    if (err == UPSTREAM_ERR_PROHIBITED) {
        c->mdec = METRICS_D_BLOCK;
        conn_record_refusal(c, c->host);
    }
    conn_respond_error(c, upstream_err_status(err), type,
                       err == UPSTREAM_ERR_PROHIBITED ? "destination address prohibited"
                                                      : "upstream unavailable",
                       type);
}

/* Takes bev as this request's upstream: callbacks, limits, a reset response parser. 0 or -1. */
static int conn_upstream_attach(struct conn *c, struct bufferevent *bev, bool route_tunnel)
{
    c->upstream.bev = bev;
    c->route_tunnel = route_tunnel;
    /* many servers close without close_notify; truncation of a Content-Length or chunked body
     * is still caught by the parser, and an EOF-delimited body can only end this way */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    if (bufferevent_openssl_get_ssl(bev) != NULL)
        SSL_set_options(bufferevent_openssl_get_ssl(bev), SSL_OP_IGNORE_UNEXPECTED_EOF);
    bufferevent_setcb(bev, up_read_cb, up_write_cb, up_event_cb, c);
    bufferevent_setwatermark(bev, EV_READ, 0, VG_CONN_IN_MAX);
    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    bufferevent_set_timeouts(bev, NULL, NULL);
    if (c->upstream.parser == NULL)
        c->upstream.parser = http1_parser_new(HTTP1_RESPONSE, &resp_callbacks, c);
    else
        http1_parser_reset(c->upstream.parser);
    if (c->upstream.parser == NULL)
        return -1;
    http1_parser_set_request_method(c->upstream.parser, c->req->head.method);
    return 0;
}

/*
 * upstream_get()'s callback: the rewritten head goes out (the parsed head, with the secret, is
 * wiped when the client parser is reset), then the body and the response stream.
 */
void conn_up_ready(void *arg, struct bufferevent *bev, enum upstream_err err, bool route_tunnel)
{
    struct conn *c = arg;
    struct http1_msg *req = c->req;
    bool no_body = req->body == HTTP1_BODY_NONE ||
                   (req->body == HTTP1_BODY_LENGTH && req->content_length == 0);
    struct timeval body_idle = {CONN_T_BODY_IDLE, 0};

    conn_enter(c);
    c->upreq = NULL;
    if (c->state != CONN_S_UP_CONNECT) {
        if (bev != NULL)
            bufferevent_free(bev);
        goto out;
    }
    if (bev == NULL) {
        conn_upstream_failed(c, err);
        goto out;
    }
    if (conn_upstream_attach(c, bev, route_tunnel) < 0) {
        conn_respond_error(c, 500, "proxy_internal_error", "out of memory", "oom");
        goto out;
    }
    /* a head with a secret lives in its own block, wiped when the evbuffers let go of it */
    c->upstream.nocopy = c->rule >= 0;
    if ((c->rule >= 0 ? http1_write_request_head_wiped : http1_write_request_head)(
            c->upstream.stage, &req->head, no_body ? HTTP1_BODY_NONE : req->body,
            req->content_length) < 0) {
        conn_respond_error(c, 500, "proxy_internal_error", "request head too large", "head");
        goto out;
    }
    if (c->rule >= 0) {
        struct policy_rule_info ri;

        policy_rule_info(c->policy, (size_t)c->rule, &ri);
        metrics_injection(c->w->id, ri.secret_name);
    }
    c->req_done = no_body;
    conn_set_state(c, CONN_S_RELAY);
    conn_arm(c, CONN_T_UP_HEAD);
    bufferevent_enable(bev, EV_WRITE);
    conn_push(&c->upstream);
    /* the answer is next: acknowledge at once what arrives now (see conn_quickack) */
    conn_quickack(bev);
    /* a bodyless request: the client side has no timeouts here already (cleared at the end of
     * the previous response), so no call (it re-adds both events) */
    if (!no_body)
        bufferevent_set_timeouts(c->client.bev, &body_idle, NULL);
    conn_update_reading(c);
    if (!c->req_done)
        conn_client_input(c);
    if (c->state == CONN_S_RELAY)
        conn_upstream_input(c);
out:
    conn_leave(c);
}
