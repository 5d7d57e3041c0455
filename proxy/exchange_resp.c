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
#include "proxy/reason.h"
#include "proxy/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

static int resp_on_head(void *arg, struct http1_msg *msg);
static int resp_on_body(void *arg, const char *data, size_t len);
static int resp_on_done(void *arg);
static int resp_on_trailers(void *arg, struct http_head *t);

/* ---- masking state ---------------------------------------------------------------------- */

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
    const struct inject_form *forms = exch_cred_forms(x, &n);

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
    return exch_filter_start(
        &x->rf,
        exch_cred_dynamic(x) ? NULL : exch_mask_take(x->w, x->rule, x->policy_gen, forms, n), forms,
        n);
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
    if (x->rf.on) {
        size_t n;
        const struct inject_form *forms = exch_cred_forms(x, &n);

        if (exch_filter_ws(&x->rf, h, forms, n, &x->ws_bad_ext) < 0)
            return -1;
    }
    http1_strip_hop_by_hop(h, true);
    x->status = 101;
    if (x->ops->head(x->t, h, EXCH_BODY_NONE, 0, false) < 0)
        return -1;
    exch_set_resp(x, EXCH_RESP_SWITCHING);
    dlq_del(&x->timer);
    return 0;
}

/*
 * Content coding of a credentialed response: identity passes, gzip/deflate are decoded (the
 * body's length becomes unknown), anything else aborts with 502. 0 or -1.
 */
static int resp_coding(struct exchange *x, struct http_head *h, enum exch_body *body)
{
    bool decoded;
    int rc = exch_filter_coding(&x->rf, h, &decoded);

    if (rc == -2) {
        /* a secret never crosses back unscanned: refuse what cannot be decoded */
        return resp_abort(x, 502, VG_PS_CONTENT_CODING,
                          "unsupported content coding on a credentialed response");
    }
    if (decoded)
        *body = EXCH_BODY_UNKNOWN;
    return rc;
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

    return x->o != NULL && (x->o->caps & ORIGIN_CAP_GRPC) != 0 && ct != NULL &&
           ct->value_len >= 16 && strncasecmp(ct->value, "application/grpc", 16) == 0;
}

static int resp_on_head(void *arg, struct http1_msg *msg)
{
    struct exchange *x = arg;
    struct http_head *h = &msg->head;
    enum exch_body body;
    uint64_t len = 0;

    if (h->status == 101 && x->ws && httphead_has_token(h, "Upgrade", "websocket"))
        return resp_ws_head(x, h);
    if (h->status == 101)
        return resp_abort(x, 502, VG_PS_PROTOCOL_ERROR, "unexpected 101 from upstream");
    if (h->status == 401)
        exch_cred_rejected(x);
    exch_filter_head(&x->rf, h);
    if (h->status < 200) {
        /* 1xx: passed on (the transport knows who may see it); the final head follows */
        http1_strip_hop_by_hop(h, false);
        return x->ops->head(x->t, h, EXCH_BODY_NONE, 0, false);
    }
    body = resp_body_kind(x, msg, &len);
    if (x->rf.on && msg->body != HTTP1_BODY_NONE && resp_coding(x, h, &body) < 0)
        return -1;
    if (x->rf.on && resp_is_grpc(x, h) && msg->body != HTTP1_BODY_NONE) {
        size_t n;
        const struct inject_form *forms = exch_cred_forms(x, &n);
        int rc = exch_filter_grpc(&x->rf, forms, n);

        if (rc == -2)
            return resp_abort(x, 502, VG_PS_CONTENT_CODING,
                              "content coding on a credentialed gRPC response");
        if (rc < 0)
            return -1;
    }
    http1_strip_hop_by_hop(h, false);
    x->status = h->status;
    if (x->ops->head(x->t, h, body, len, false) < 0)
        return -1;
    exch_set_resp(x, EXCH_RESP_BODY);
    /* the head arrived: from now on only body idleness counts (the origin's own timeout) */
    dlq_del(&x->timer);
    return 0;
}

/* ---- response body ---------------------------------------------------------------------- */

/* The transport as the filter's sink: its room, and body bytes counted for the log line. */
static size_t exch_sink_room(void *arg)
{
    struct exchange *x = arg;

    return x->ops->room(x->t);
}

static int exch_sink_emit(void *arg, struct evbuffer *buf)
{
    struct exchange *x = arg;
    size_t n = evbuffer_get_length(buf);

    if (n == 0)
        return 0;
    x->bytes_out += (int64_t)n;
    return x->ops->body(x->t, buf);
}

static struct exch_sink exch_sink(struct exchange *x)
{
    struct exch_sink s = {exch_sink_room, exch_sink_emit, x};

    return s;
}

static int resp_on_body(void *arg, const char *data, size_t len)
{
    struct exchange *x = arg;
    struct exch_sink s = exch_sink(x);

    return exch_filter_body(&x->rf, data, len, &s);
}

/* The response body is complete: the decoder's end, the masker's tail, then the end. */
static int exch_body_end(struct exchange *x)
{
    bool switching = x->resp_state == EXCH_RESP_SWITCHING;
    struct exch_sink s = exch_sink(x);

    if (!switching && exch_filter_end(&x->rf, &s) < 0)
        return -1;
    if (!switching && x->ops->end(x->t, x->trailers) < 0)
        return -1;
    exch_set_resp(x, switching ? EXCH_RESP_SWITCHED : EXCH_RESP_DONE);
    return 0;
}

/* Trailers of a chunked response: masked like a head, kept for the end of the body. */
static int resp_on_trailers(void *arg, struct http_head *t)
{
    struct exchange *x = arg;

    exch_filter_head(&x->rf, t);
    http1_trailers_filter(t);
    x->trailers = t->nfields > 0 ? t : NULL;
    return 0;
}

static int resp_on_done(void *arg)
{
    struct exchange *x = arg;

    if (exch_filter_blocked(&x->rf)) {
        /* decoded output still waits for the client: the end follows in exch_inflate_resume */
        exch_set_resp(x, EXCH_RESP_DRAIN);
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
    struct exch_sink s = exch_sink(x);

    if (x->rf.dec == NULL || (!exch_filter_blocked(&x->rf) && x->resp_state != EXCH_RESP_DRAIN))
        return 0;
    if (exch_filter_drain(&x->rf, &s) < 0)
        return -1;
    if (exch_filter_blocked(&x->rf))
        return 1;
    if (x->resp_state == EXCH_RESP_DRAIN)
        return exch_body_end(x);
    return 0; /* a body that ended right after the last bytes: resume lets the origin see it */
}

/* ---- the end of a response -------------------------------------------------------------- */

/* The egress_route_log route of a forwarded request: reported (SPEC §12), tunnel or direct. */
static enum audit_route exch_route(const struct exchange *x)
{
    if (x->reported)
        return AUDIT_ROUTE_REPORTED;
    return x->route_tunnel ? AUDIT_ROUTE_TUNNEL : AUDIT_ROUTE_DIRECT;
}

/* The response ended cleanly: account, give the upstream back, report to the transport. */
static void exch_response_done(struct exchange *x)
{
    struct worker *w = x->w;

    metrics_request(w->id, x->mdec, x->status, exch_elapsed(&x->t_start));
    audit_route(w->sh->audit, w->id, x->host, exch_route(x));
    exch_log_request(x, audit_route_name(exch_route(x)), NULL);
    bool sent = x->req_state == EXCH_REQ_SENT;

    origin_release(&x->o, sent);
    exch_finish(x, sent ? EXCH_END_DONE : EXCH_END_CLOSE);
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

/*
 * After a batch of response input went through the callbacks (and when the client drained): the
 * decoder's pending output, one write to the client, the end, or more input while the client
 * side has room (else held until exchange_drained: a slow client stalls only this upstream).
 */
static void exch_after(struct exchange *x)
{
    int zr;

    if (!exch_relaying(x))
        return;
    zr = exch_inflate_resume(x);
    if (zr < 0) {
        exch_protocol_error(x);
        return;
    }
    x->ops->flush(x->t);
    if (x->resp_state == EXCH_RESP_SWITCHED) {
        exch_upgraded(x);
        return;
    }
    if (x->resp_state == EXCH_RESP_DONE) {
        exch_response_done(x);
        return;
    }
    /* the client must drain first: room() arms exchange_drained() */
    if (exch_filter_blocked(&x->rf) || x->resp_state == EXCH_RESP_DRAIN || x->ops->room(x->t) == 0)
        origin_hold(x->o);
    else
        origin_resume(x->o);
}

static void exch_origin_after(void *arg)
{
    struct exchange *x = arg;

    exch_enter(x);
    exch_after(x);
    exch_leave(x);
}

void exchange_drained(struct exchange *x)
{
    exch_enter(x);
    /* the origin is held, or will find the client side open on its next batch */
    if (exch_relaying(x) && x->o != NULL)
        exch_after(x);
    exch_leave(x);
}

/* ---- upstream events -------------------------------------------------------------------- */

static bool exch_bodyless(const struct http1_msg *req)
{
    return req->body == HTTP1_BODY_NONE ||
           (req->body == HTTP1_BODY_LENGTH && req->content_length == 0);
}

/*
 * A pooled connection can die just as it is reused (the upstream closed it while idle), and a
 * server may refuse a stream unprocessed. A bodyless request that got no byte of answer is then
 * sent once more, on a fresh connection or another stream, as nginx does: any method when the
 * origin says it was refused unprocessed, else only GET/HEAD/OPTIONS. exch_retryable: the
 * request could be (the pool may then hand out a connection without its liveness peek);
 * exch_retry returns 1 when a retry started.
 */
static bool exch_retryable(const struct exchange *x)
{
    const struct http1_msg *req = x->req;
    const char *m;

    if (req == NULL || x->retried)
        return false;
    m = req->head.method;
    return exch_bodyless(req) &&
           (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0);
}

static int exch_retry(struct exchange *x, enum origin_retry retry)
{
    if (retry == ORIGIN_RETRY_NO || x->retried || x->resp_state != EXCH_RESP_NONE ||
        !exch_bodyless(x->req) || (retry == ORIGIN_RETRY_SAFE && !exch_retryable(x)))
        return 0;
    x->retried = true;
    exch_drop_upstream(x, true);
    exch_log(x, LOG_DEBUG, "upstream_retry",
             retry == ORIGIN_RETRY_ANY ? "h2_stream_refused" : "pooled_connection_closed", NULL);
    exch_get_upstream(x);
    return 1;
}

/* The response cannot go on: a retry, or the answer of SPEC §4 for the failure. */
static void exch_origin_failed(void *arg, enum origin_fail f, enum origin_retry retry,
                               const char *detail)
{
    struct exchange *x = arg;

    exch_enter(x);
    if (!exch_relaying(x) || exch_retry(x, retry))
        goto out;
    switch (f) {
    case ORIGIN_FAIL_EOF:
        metrics_upstream_error(x->w->id, METRICS_UE_PROTOCOL);
        exch_fail(x, 502, VG_PS_INCOMPLETE, "upstream closed the connection", VG_R_UPSTREAM_EOF);
        break;
    case ORIGIN_FAIL_RESET:
        metrics_upstream_error(x->w->id, METRICS_UE_PROTOCOL);
        if (x->resp_err_status != 0)
            exch_protocol_error(x);
        else
            exch_fail(x, 502, VG_PS_INCOMPLETE, "upstream stream reset", VG_R_UPSTREAM_EOF);
        break;
    case ORIGIN_FAIL_IO:
        exch_log(x, LOG_INFO, "upstream_error", VG_R_UPSTREAM_IO, detail);
        metrics_upstream_error(x->w->id, METRICS_UE_CONNECT);
        exch_fail(x, 502, VG_PS_TERMINATED, "upstream connection failed", VG_R_UPSTREAM_IO);
        break;
    case ORIGIN_FAIL_TIMEOUT:
        metrics_upstream_error(x->w->id, METRICS_UE_TIMEOUT);
        exch_fail(x, 504, VG_PS_RESPONSE_TIMEOUT, "upstream timed out", VG_R_UPSTREAM_TIMEOUT);
        break;
    case ORIGIN_FAIL_PROTOCOL:
        exch_protocol_error(x);
        break;
    }
out:
    exch_leave(x);
}

/* The request body may flow again. */
static void exch_origin_more(void *arg)
{
    struct exchange *x = arg;

    exch_enter(x);
    if (exch_relaying(x))
        x->ops->more(x->t);
    exch_leave(x);
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
    exch_set_resp(x, EXCH_RESP_DONE);
    if (rc < 0) {
        exch_finish(x, EXCH_END_ABORT);
        return;
    }
    metrics_request(x->w->id, x->mdec, 200, exch_elapsed(&x->t_start));
    exch_log_request(x, x->route_tunnel ? "tunnel" : "direct", "grpc_needs_h2");
    exch_finish(x, EXCH_END_CLOSE);
}

/*
 * Asks for the upstream of this request (again, after a connection died or a stream was
 * refused): origin.c finds or makes it, and exch_origin_cbs.ready follows.
 */
void exch_get_upstream(struct exchange *x)
{
    const struct origin_source *src = x->cc->origins != NULL ? x->cc->origins : &origin_upstreams;
    struct origin_want want = {x->host,           x->up_port, x->up_tls,
                               exch_retryable(x), x->w->up,   EXCH_T(x, VG_T_BODY_IDLE)};

    exch_set_req(x, EXCH_REQ_CONNECT);
    exch_arm(x, EXCH_T_UP_GET(x), NULL);
    x->o = src->get(x->w, &want, &exch_origin_cbs, x);
    if (x->o == NULL) {
        exch_fail(x, 502, VG_PS_INTERNAL_ERROR, "upstream connection failed", VG_R_UPSTREAM_GET);
        return;
    }
    src->start(x->o);
}

/* ---- the upstream connection ------------------------------------------------------------ */

/* Getting the upstream failed: the answer of SPEC §4 for that failure. */
static void exch_upstream_failed(struct exchange *x, enum upstream_err err)
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

/* Sends the rewritten head (a head with a secret goes in wiped buffers, never indexed). */
static int exch_send_head(struct exchange *x, bool no_body)
{
    uint64_t len = 0;
    enum http1_body body = exch_req_body(x, &len);

    if (origin_request(x->o, &x->req->head, no_body ? HTTP1_BODY_NONE : body, len, x->rule >= 0) <
        0)
        return -1;
    if (x->rule >= 0) {
        struct policy_rule_info ri;

        policy_rule_info(x->policy, (size_t)x->rule, &ri);
        metrics_injection(x->w->id, ri.secret_name);
    }
    return 0;
}

/* The upstream is there, or will not be: the answer of SPEC §4 for a failure, else the head. */
static int exch_origin_check(struct exchange *x, enum origin_up up, enum upstream_err err)
{
    switch (up) {
    case ORIGIN_UP_OK:
        break;
    case ORIGIN_UP_FAILED:
        exch_upstream_failed(x, err);
        return -1;
    case ORIGIN_UP_NO_DIAL:
        exch_fail(x, 502, VG_PS_INTERNAL_ERROR, "upstream connection failed", VG_R_UPSTREAM_GET);
        return -1;
    case ORIGIN_UP_NO_MEM:
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        return -1;
    }
    x->route_tunnel = x->o->route_tunnel;
    if (x->grpc && (x->o->caps & ORIGIN_CAP_GRPC) == 0) {
        /* gRPC needs HTTP/2 end to end: never translated to HTTP/1.1 (SPEC §10) */
        origin_release(&x->o, true);
        exch_grpc_unavailable(x);
        return -1;
    }
    return 0;
}

/*
 * The origin's ready: the rewritten head goes out (the parsed head, with the secret, is wiped
 * when the transport resets its parser), then the body and the response stream.
 */
static void exch_origin_ready(void *arg, enum origin_up up, enum upstream_err err)
{
    struct exchange *x = arg;
    uint64_t len;
    bool no_body = exch_req_body(x, &len) == HTTP1_BODY_NONE;

    exch_enter(x);
    if (x->req_state != EXCH_REQ_CONNECT || exch_origin_check(x, up, err) < 0)
        goto out;
    if (exch_send_head(x, no_body) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "request head too large", VG_R_HEAD);
        goto out;
    }
    exch_set_req(x, no_body ? EXCH_REQ_SENT : EXCH_REQ_BODY);
    exch_arm(x, EXCH_T(x, VG_T_RESPONSE_HEAD), NULL);
    if (exch_cred_buffered(x) != NULL) {
        /* the buffered body follows, moved without a copy */
        exch_set_req(x, EXCH_REQ_SENT);
        if (origin_body_take(x->o, exch_cred_buffered(x)) < 0 || origin_body_end(x->o) < 0) {
            exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
            goto out;
        }
    }
    origin_flush(x->o);
    if (x->req_state == EXCH_REQ_BODY)
        x->ops->more(x->t);
    if (exch_relaying(x) && x->o != NULL)
        origin_resume(x->o); /* the response may already be there */
out:
    exch_leave(x);
}

const struct origin_cbs exch_origin_cbs = {
    {resp_on_head, resp_on_body, resp_on_done, resp_on_trailers},
    exch_origin_ready,
    exch_origin_after,
    exch_origin_failed,
    exch_origin_more,
};
