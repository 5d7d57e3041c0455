/*
 * conn.c - one client connection of a TLS or plain-HTTP listener, from accept to close: the
 * TLS accept and ClientHello decision, request parsing and checks, the policy decision and
 * rewrite, teardown and timers. The upstream half (response relay, masking) is conn_relay.c.
 *
 * Guarantees:
 * - Requests are handled one at a time: the parser pauses at each head, the head is checked
 *   (Host vs SNI, target form, method), decided against the policy snapshot taken for that
 *   request, rewritten (hop-by-hop fields stripped, then the rule's secret injected) and
 *   serialised anew; the client's own head and chunk lines are never forwarded.
 * - A secret only goes into a head bound for upstream_get(host, 443, TLS) of a rule that
 *   matched that host (the SNI host, or on the plain-HTTP listener the request's Host).
 * - A response is written only to the connection whose request it answers, and only after
 *   that request's head was sent; pipelined requests wait until the response before them ends.
 * - Bodies stream both ways re-framed, without buffering whole messages; each side's output is
 *   capped (VG_CONN_OUT_CAP): past it, reading from the other side stops until it drains.
 * - conn_close() is the only teardown; a close requested inside a callback frees the struct
 *   when the outermost callback returns.
 * - Logs carry host, decision, rule, secret name, status, sizes and times: never a path, query,
 *   header value, body or secret.
 */
#include "proxy/conn.h"
#include "proxy/conn_int.h"
#include "audit/audit.h"
#include "audit/log.h"
#include "ca/ca.h"
#include "ca/certcache.h"
#include "common/caps.h"
#include "common/hostname.h"
#include "policy/inject.h"
#include "proxy/http1.h"
#include "proxy/mask.h"
#include "proxy/metrics.h"
#include "proxy/upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h> /* ev_write, for conn_push() */
#include <event2/event.h>
#include <openssl/err.h>

static void conn_free(struct conn *c);

static const char *const state_names[] = {
    "tls_accept", "req_head",    "up_connect", "relay",  "flush_close",
    "linger",     "tunnel_peek", "tunnel",     "closed",
};

/* ---- small helpers ---------------------------------------------------------------------- */

double conn_elapsed(const struct timespec *t0)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static void conn_fields(const struct conn *c, struct log_fields *f)
{
    f->conn = c->id;
    f->client = c->client_addr;
    f->listener = c->la->label;
    f->host = c->host[0] != '\0' ? c->host : NULL;
}

void conn_log(const struct conn *c, enum log_level lvl, const char *event, const char *reason,
              const char *detail)
{
    struct log_fields f = LOG_FIELDS_INIT;

    if (!log_enabled(lvl))
        return;
    conn_fields(c, &f);
    f.reason = reason;
    f.detail = detail;
    log_event(lvl, event, &f);
}

void conn_set_state(struct conn *c, enum conn_state s)
{
    if (log_enabled(LOG_DEBUG) && c->state != s) {
        char d[64];

        snprintf(d, sizeof(d), "%s -> %s", state_names[c->state], state_names[s]);
        conn_log(c, LOG_DEBUG, "conn_state", "state", d);
    }
    c->state = s;
}

void conn_arm(struct conn *c, int seconds)
{
    struct timeval tv = {seconds, 0};

    evtimer_add(c->timer, &tv);
}

void conn_enter(struct conn *c)
{
    c->depth++;
}

void conn_leave(struct conn *c)
{
    if (--c->depth == 0 && c->free_pending)
        conn_free(c);
}

/*
 * Sends what was staged for one side. libevent's socket-mode TLS bufferevent writes only from
 * its write event: every response would cost an EPOLLOUT round trip and two epoll_ctl calls.
 * So when nothing is queued in the bufferevent, the staged bytes go out with SSL_write right
 * away (up to 16 KiB per record); whatever the socket does not take - and everything when
 * bytes are already queued, to keep the order - is handed to the bufferevent. After a
 * WANT_WRITE the same bytes lead the bufferevent's output, as OpenSSL requires for the retry
 * (the bufferevent sets SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER).
 */
void conn_push(struct conn_end *e)
{
    struct evbuffer *out;
    SSL *ssl;
    size_t n;

    if (e->bev == NULL || (n = evbuffer_get_length(e->stage)) == 0)
        return;
    out = bufferevent_get_output(e->bev);
    ssl = bufferevent_openssl_get_ssl(e->bev);
    while (ssl != NULL && n > 0 && evbuffer_get_length(out) == 0) {
        size_t len = n < 16384 ? n : 16384;
        unsigned char *p;
        int w;

        if (e->nocopy) {
            /* a pullup would copy the secret into a chain freed unwiped: chain by chain */
            struct evbuffer_iovec v;

            if (evbuffer_peek(e->stage, -1, NULL, &v, 1) < 1)
                break;
            p = v.iov_base;
            len = v.iov_len < len ? v.iov_len : len;
        } else {
            p = evbuffer_pullup(e->stage, (ev_ssize_t)len);
        }
        if (p == NULL)
            break;
        w = SSL_write(ssl, p, (int)len);
        if (w <= 0) {
            ERR_clear_error();
            break;
        }
        evbuffer_drain(e->stage, (size_t)w);
        n -= (size_t)w;
    }
    if (ssl == NULL && n > 0 && evbuffer_get_length(out) == 0) {
        /* plain socket: the same shortcut with writev */
        evutil_socket_t fd = bufferevent_getfd(e->bev);
        int w = fd >= 0 ? evbuffer_write(e->stage, fd) : -1;

        if (w > 0)
            n -= (size_t)w;
    }
    e->nocopy = false; /* the stage is empty now, or moved on whole (chains, not copies) */
    if (n > 0) {
        evbuffer_add_buffer(out, e->stage);
    } else if (evbuffer_get_length(out) == 0 && event_pending(&e->bev->ev_write, EV_WRITE, NULL)) {
        /* nothing left for the write event: drop it now (with the worker's epoll changelist a
         * pending add is cancelled without a system call) instead of waking for EPOLLOUT */
        event_del(&e->bev->ev_write);
    }
}

/* Bytes waiting for one side: staged plus queued in its bufferevent. */
size_t conn_pending(const struct conn_end *e)
{
    return evbuffer_get_length(e->stage) +
           (e->bev != NULL ? evbuffer_get_length(bufferevent_get_output(e->bev)) : 0);
}

const char *conn_tls_reason(unsigned long e)
{
    const char *r = ERR_reason_error_string(e);

    return r != NULL ? r : "TLS error";
}

static const char *decision_name(enum metrics_decision d)
{
    static const char *const names[] = {"inject", "allow", "block", "error"};

    return d < METRICS_D_COUNT ? names[d] : "error";
}

enum metrics_upstream_error conn_upstream_metric(enum upstream_err e)
{
    switch (e) {
    case UPSTREAM_ERR_DNS:
        return METRICS_UE_DNS;
    case UPSTREAM_ERR_TLS:
        return METRICS_UE_TLS;
    case UPSTREAM_ERR_TIMEOUT:
        return METRICS_UE_TIMEOUT;
    case UPSTREAM_ERR_CONNECT:
    case UPSTREAM_ERR_PROXY:
    case UPSTREAM_ERR_PROHIBITED:
        return METRICS_UE_CONNECT;
    default:
        return METRICS_UE_PROTOCOL;
    }
}

/* Frees the upstream side. abort: the peer must not take what it got as a complete message. */
void conn_drop_upstream(struct conn *c, bool abort)
{
    if (c->upreq != NULL)
        upstream_cancel(&c->upreq);
    if (c->upstream.bev != NULL) {
        evutil_socket_t fd = bufferevent_getfd(c->upstream.bev);

        if (abort && fd >= 0) {
            struct linger lg = {1, 0};

            /* RST: a half-sent request never looks complete to the upstream */
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        bufferevent_setcb(c->upstream.bev, NULL, NULL, NULL, NULL);
        bufferevent_free(c->upstream.bev);
        c->upstream.bev = NULL;
    }
    c->upstream.paused = false;
    c->upstream.nocopy = false;
    if (c->upstream.stage != NULL)
        evbuffer_drain(c->upstream.stage, evbuffer_get_length(c->upstream.stage));
    http1_parser_free(&c->upstream.parser);
    c->resp = NULL;
}

/* ---- teardown --------------------------------------------------------------------------- */

/* Frees everything of c. Only conn_close() and conn_leave() call this. */
static void conn_free(struct conn *c)
{
    struct listen_worker *w = c->w;

    conn_drop_upstream(c, true);
    if (c->client.bev != NULL) {
        SSL *ssl = bufferevent_openssl_get_ssl(c->client.bev);

        tls_server_ssl_detach(ssl);
        bufferevent_setcb(c->client.bev, NULL, NULL, NULL, NULL);
        bufferevent_free(c->client.bev);
    }
    http1_parser_free(&c->client.parser);
    conn_drop_mask(c);
    for (int i = 0; i < 2; i++) {
        struct evbuffer *st = i == 0 ? c->client.stage : c->upstream.stage;

        if (st != NULL)
            evbuffer_free(st);
    }
    if (c->timer != NULL)
        event_free(c->timer);
    policy_unref(&c->policy);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    w->nconns--;
    atomic_fetch_sub(&w->sh->active_conns, 1);
    metrics_conn_close(w->id);
    free(c);
    if (w->draining && w->nconns == 0)
        event_base_loopexit(w->base, NULL);
}

/*
 * The only teardown: stops both sides at once; the struct itself is freed now, or when the
 * outermost callback on the stack returns. reason is a fixed code, logged at debug.
 */
void conn_close(struct conn *c, const char *reason)
{
    if (c->state == CONN_S_CLOSED)
        return;
    conn_log(c, LOG_DEBUG, "conn_close", reason, NULL);
    conn_set_state(c, CONN_S_CLOSED);
    evtimer_del(c->timer);
    conn_drop_upstream(c, !c->graceful);
    if (c->client.bev != NULL)
        bufferevent_disable(c->client.bev, EV_READ | EV_WRITE);
    if (c->depth > 0)
        c->free_pending = true;
    else
        conn_free(c);
}

/* Sends close_notify and FIN, then discards input for a short while, so that a client still
 * sending does not get an RST that destroys the response it has not read yet. */
static void conn_linger(struct conn *c)
{
    SSL *ssl = bufferevent_openssl_get_ssl(c->client.bev);
    evutil_socket_t fd = bufferevent_getfd(c->client.bev);
    bool filter = bufferevent_get_underlying(c->client.bev) != NULL;

    if (ssl != NULL && c->handshake_done)
        SSL_shutdown(ssl);
    conn_set_state(c, CONN_S_LINGER);
    conn_arm(c, CONN_T_LINGER);
    bufferevent_setwatermark(c->client.bev, EV_WRITE, 0, 0);
    if (filter) {
        /* A TLS filter (CONNECT with early data) still flushes through the plain bufferevent
         * under it: no FIN yet, leave both alone until the linger timer closes them. */
        return;
    }
    if (fd >= 0)
        shutdown(fd, SHUT_WR);
    bufferevent_disable(c->client.bev, EV_WRITE);
    bufferevent_enable(c->client.bev, EV_READ);
}

/* Close once the client's output has drained (the final response is on its way). */
void conn_flush_close(struct conn *c)
{
    conn_push(&c->client);
    conn_drop_upstream(c, !c->resp_done || !c->req_done);
    conn_set_state(c, CONN_S_FLUSH_CLOSE);
    conn_arm(c, CONN_T_FLUSH);
    bufferevent_set_timeouts(c->client.bev, NULL, NULL);
    bufferevent_setwatermark(c->client.bev, EV_WRITE, 0, 0);
    bufferevent_disable(c->client.bev, EV_READ);
    bufferevent_enable(c->client.bev, EV_WRITE);
    if (evbuffer_get_length(bufferevent_get_output(c->client.bev)) == 0)
        conn_linger(c);
}

/* ---- request accounting ----------------------------------------------------------------- */

void conn_log_request(struct conn *c, const char *route, const char *reason)
{
    struct log_fields f = LOG_FIELDS_INIT;
    struct policy_rule_info ri;

    if (!log_enabled(LOG_INFO))
        return;
    conn_fields(c, &f);
    f.route = route;
    f.decision = decision_name(c->mdec);
    if (c->rule >= 0 && c->policy != NULL) {
        policy_rule_info(c->policy, (size_t)c->rule, &ri);
        f.rule = c->rule;
        f.secret = ri.secret_name;
    }
    f.status = c->status;
    f.bytes_in = c->bytes_in;
    f.bytes_out = c->bytes_out;
    f.duration = conn_elapsed(&c->t_start);
    f.reason = reason;
    log_event(LOG_INFO, "request", &f);
}

/*
 * Answers the current request with a response of vaultgate's own (SPEC §4) and closes the
 * connection after it. Nothing more is forwarded in either direction.
 */
void conn_respond_error(struct conn *c, int status, const char *type, const char *details,
                        const char *reason)
{
    struct evbuffer *out = bufferevent_get_output(c->client.bev);

    conn_drop_upstream(c, true);
    if (c->resp_started) {
        /* a response is already on its way: cutting the connection is all we can do */
        conn_log_request(c, NULL, reason);
        conn_close(c, reason);
        return;
    }
    c->status = status;
    if (http1_write_error(out, status, type, details, c->host[0] != '\0' ? c->host : NULL, true) <
        0) {
        conn_close(c, "write_error");
        return;
    }
    c->resp_started = true;
    c->resp_done = true;
    metrics_request(c->w->id, c->mdec, status, conn_elapsed(&c->t_start));
    conn_log_request(c, c->mdec == METRICS_D_BLOCK ? "refused" : NULL, reason);
    conn_flush_close(c);
}

void conn_record_refusal(struct conn *c, const char *host)
{
    struct listen_worker *w = c->w;

    audit_blocked(w->sh->audit, w->id, host);
    audit_route(w->sh->audit, w->id, host, AUDIT_ROUTE_REFUSED);
    metrics_blocked(w->id);
}

/* ---- request side ----------------------------------------------------------------------- */

static int req_on_head(void *arg, struct http1_msg *msg)
{
    struct conn *c = arg;

    c->req = msg;
    c->head_ready = true;
    c->parse_stop = true;
    return 1;
}

static int req_on_body(void *arg, const char *data, size_t len)
{
    struct conn *c = arg;
    struct evbuffer *out;

    if (c->upstream.bev == NULL)
        return -1;
    out = c->upstream.stage;
    if (c->req->body == HTTP1_BODY_CHUNKED)
        return http1_write_chunk(out, data, len) == 0 ? 0 : -1;
    return evbuffer_add(out, data, len) == 0 ? 0 : -1;
}

static int req_on_done(void *arg)
{
    struct conn *c = arg;

    if (c->upstream.bev != NULL && c->req->body == HTTP1_BODY_CHUNKED &&
        http1_write_last_chunk(c->upstream.stage) < 0)
        return -1;
    c->req_done = true;
    c->parse_stop = true;
    return 1;
}

static const struct http1_callbacks req_callbacks = {req_on_head, req_on_body, req_on_done};

/* Puts Host: <connection host> first in h, replacing every Host field. 0 or -1. */
static int conn_set_host(struct conn *c, struct http_head *h)
{
    char v[HOSTNAME_BUFSZ + 2];
    struct http_field f;
    size_t n = strlen(c->host);

    if (memchr(c->host, ':', n) != NULL) {
        v[0] = '[';
        memcpy(v + 1, c->host, n);
        v[n + 1] = ']';
        n += 2;
    } else {
        memcpy(v, c->host, n);
    }
    httphead_remove(h, "Host");
    if (httphead_add(h, "Host", 4, v, n) < 0)
        return -1;
    f = h->fields[h->nfields - 1];
    memmove(h->fields + 1, h->fields, (h->nfields - 1) * sizeof(h->fields[0]));
    h->fields[0] = f;
    return 0;
}

/* 1 when authority (host[:port]) names the connection's host on an acceptable port. */
static int conn_authority_ok(const struct conn *c, const char *a, size_t len)
{
    char host[HOSTNAME_BUFSZ];
    int port = 0;

    /* byte for byte the connection's host: no need to normalise it again */
    if (http1_authority_is(a, len, c->host, &port) != 1) {
        if (http1_split_authority(a, len, host, sizeof(host), &port) < 0)
            return -1;
        if (strcmp(host, c->host) != 0)
            return 0;
    }
    return port == 0 || port == c->default_port || port == c->la->port;
}

/*
 * Host and target checks of SPEC §4. Returns 0, or the status to answer (400/421) with *why.
 * An absolute-form target becomes origin-form.
 */
static int conn_check_target(struct conn *c, struct http_head *h, const char **why)
{
    size_t nhost = httphead_count(h, "Host");
    const struct http_field *hf = httphead_get(h, "Host");
    const char *t = h->target, *auth, *end;
    int r;

    if (nhost > 1 || (nhost == 0 && (h->version_minor != 0 || !c->host_fixed))) {
        *why = nhost > 1 ? "several Host fields" : "missing Host";
        return 400;
    }
    if (!c->host_fixed) {
        /* plain HTTP: the request's Host names the host (each request on its own) */
        int port = 0;

        if (http1_split_authority(hf->value, hf->value_len, c->host, sizeof(c->host), &port) < 0) {
            c->host[0] = '\0';
            *why = "malformed Host";
            return 400;
        }
    }
    if (hf != NULL) {
        r = conn_authority_ok(c, hf->value, hf->value_len);
        if (r != 1) {
            *why = r < 0 ? "malformed Host"
                         : (c->host_fixed ? "Host does not match the connection's host"
                                          : "Host names another port");
            return r < 0 ? 400 : 421;
        }
    }
    if (t[0] == '/' || (t[0] == '*' && t[1] == '\0' && strcmp(h->method, "OPTIONS") == 0))
        return 0;
    if (strncasecmp(t, "https://", 8) == 0)
        auth = t + 8;
    else if (strncasecmp(t, "http://", 7) == 0)
        auth = t + 7;
    else {
        *why = "unsupported request target form";
        return 400;
    }
    end = auth + strcspn(auth, "/?#");
    if (memchr(auth, '@', (size_t)(end - auth)) != NULL) {
        *why = "userinfo in the request target";
        return 400;
    }
    r = conn_authority_ok(c, auth, (size_t)(end - auth));
    if (r != 1) {
        *why = r < 0 ? "malformed request target" : "request target names another host";
        return r < 0 ? 400 : 421;
    }
    if (*end == '#') {
        *why = "fragment in the request target";
        return 400;
    }
    {
        /* copied first: the new target replaces the arena string end points into */
        char tmp[VG_HEAD_MAX_BYTES];
        size_t rest = h->target_len - (size_t)(end - t);
        int n = snprintf(tmp, sizeof(tmp), "%s%.*s", *end == '/' ? "" : "/", (int)rest, end);

        r = (n > 0 && (size_t)n < sizeof(tmp)) ? httphead_set_target(h, tmp, (size_t)n) : -1;
    }
    if (r < 0) {
        *why = "request target too long";
        return 400;
    }
    return 0;
}

/*
 * `vaultgate probe` (SPEC §9) proves from inside a sandbox that its TLS reaches this process:
 * the reserved name is answered here with 204 and a Proxy-Status naming the run, never
 * forwarded, and the connection closes (the probe reads until the end).
 */
static void conn_answer_probe(struct conn *c)
{
    struct policy *p = listen_worker_policy(c->w);

    c->mdec = METRICS_D_ALLOW;
    c->status = 204;
    evbuffer_add_printf(c->client.stage,
                        "HTTP/1.1 204 No Content\r\nProxy-Status: vaultgate; "
                        "details=\"probe answered for run %s\"\r\nCache-Control: no-store\r\n"
                        "Connection: close\r\n\r\n",
                        policy_run_id(p));
    c->resp_started = c->resp_done = true;
    metrics_request(c->w->id, c->mdec, 204, conn_elapsed(&c->t_start));
    conn_log_request(c, NULL, "probe");
    conn_flush_close(c);
}

/*
 * Method, target and upgrade checks of one request head. Returns 0 when the request may go on
 * to the policy decision; otherwise it has been answered (or taken over by CONNECT/the probe).
 */
static int conn_request_checks(struct conn *c, struct http_head *h)
{
    const char *why = NULL;
    int st;

    if (c->proxy && !c->host_fixed && strcmp(h->method, "CONNECT") == 0) {
        conn_proxy_connect(c);
        return -1;
    }
    if (strcmp(h->method, "TRACE") == 0 || strcmp(h->method, "CONNECT") == 0) {
        conn_respond_error(c, 405, "http_request_denied", "method not allowed", "method");
        return -1;
    }
    st = c->proxy && !c->host_fixed ? conn_proxy_target(c, h, &why) : conn_check_target(c, h, &why);
    if (st != 0) {
        conn_respond_error(c, st, "http_request_error", why,
                           st == 421 ? "misdirected" : "bad_request");
        return -1;
    }
    c->ws = false;
    if (c->req->upgrade) {
        /* WebSocket only: a bodyless GET naming websocket in Upgrade (SPEC §4) */
        if (strcmp(h->method, "GET") != 0 || c->req->body != HTTP1_BODY_NONE ||
            !httphead_has_token(h, "Upgrade", "websocket")) {
            conn_respond_error(c, 501, "http_upgrade_failed",
                               "only WebSocket upgrades are supported", "upgrade");
            return -1;
        }
        c->ws = true;
    }
    if (c->tls && strcmp(c->host, CONN_PROBE_HOST) == 0) {
        conn_answer_probe(c);
        return -1;
    }
    return 0;
}

/*
 * The head as it will be sent: hop-by-hop fields stripped first (so the client cannot strip
 * what vaultgate adds), Host set to the upstream's authority, then the secret for an inject
 * decision. 0, or -1 after answering 500.
 */
static int conn_request_rewrite(struct conn *c, struct http_head *h,
                                const struct policy_decision *dec)
{
    http1_strip_hop_by_hop(h, c->ws);
    h->version_minor = 1;
    if (conn_set_host(c, h) < 0) {
        conn_respond_error(c, 500, "proxy_internal_error", "request head too large", "head");
        return -1;
    }
    if (dec->verdict != POLICY_INJECT) {
        c->mdec = METRICS_D_ALLOW;
        return 0;
    }
    c->mdec = METRICS_D_INJECT;
    c->rule = dec->rule;
    /* a credentialed WebSocket gets no compression extension: the masker must see the
     * server's bytes as they are */
    if (c->ws)
        httphead_remove(h, "Sec-WebSocket-Extensions");
    if (inject_apply(h, c->policy, dec->rule) < 0 || conn_mask_setup(c, h) < 0) {
        conn_respond_error(c, 500, "proxy_internal_error", "credential injection failed", "inject");
        return -1;
    }
    return 0;
}

int conn_decide(struct conn *c, struct policy_decision *dec)
{
    struct listen_worker *w = c->w;

    /* the snapshot this request keeps until it ends */
    if (c->policy != listen_worker_policy(w)) {
        /* only after a reload: the same snapshot needs no unref/ref pair (two atomics) */
        policy_unref(&c->policy);
        c->policy = policy_ref(w->policy);
    }
    c->policy_gen = w->policy_gen;
    policy_decide(c->policy, c->host, dec);
    if (dec->verdict != POLICY_BLOCK)
        return 0;
    c->mdec = METRICS_D_BLOCK;
    conn_record_refusal(c, c->host);
    conn_respond_error(c, 403, "http_request_denied", "host blocked by policy", "blocked");
    return -1;
}

/* A request head arrived: check, decide, rewrite, then ask for an upstream connection. */
static void conn_request_head(struct conn *c)
{
    struct http_head *h = &c->req->head;
    struct listen_worker *w = c->w;
    struct policy_decision dec;

    c->head_ready = false;
    c->req_keep_alive = c->req->keep_alive && !c->draining;
    c->req_minor = h->version_minor;
    c->mdec = METRICS_D_ERROR;
    if (conn_request_checks(c, h) < 0)
        return;
    if (conn_decide(c, &dec) < 0)
        return;
    if (c->proxy && !c->host_fixed && c->target_port != CONN_HTTP_PORT &&
        dec.verdict != POLICY_INJECT) {
        /* absolute-form to another port of a host without a rule: a refusal by policy (SPEC
         * §6); a rule's host is reached over TLS on 443 whatever port the request names */
        c->mdec = METRICS_D_BLOCK;
        conn_record_refusal(c, c->host);
        conn_respond_error(c, 403, "http_request_denied", "port not allowed for plain HTTP",
                           "forbidden_port");
        return;
    }
    if (conn_request_rewrite(c, h, &dec) < 0)
        return;
    /* a rule's host is only ever reached over TLS on 443, whatever listener it came in on */
    c->up_tls = c->tls || dec.verdict == POLICY_INJECT;
    c->up_port = c->up_tls ? CONN_HTTPS_PORT : CONN_HTTP_PORT;
    conn_set_state(c, CONN_S_UP_CONNECT);
    conn_update_reading(c);
    conn_arm(c, CONN_T_UP_GET);
    c->upreq = upstream_get(w->up, c->host, c->up_port, c->up_tls, conn_up_ready, c);
    if (c->upreq == NULL)
        conn_respond_error(c, 502, "proxy_internal_error", "upstream connection failed",
                           "upstream_get");
}

void conn_start_request(struct conn *c)
{
    if (!c->host_fixed)
        c->host[0] = '\0'; /* plain HTTP: each request names its host */
    /* a masker that finished its last stream cleanly is kept for the next request */
    if (!c->mask_clean)
        conn_drop_mask(c);
    conn_drop_decoder(c);
    c->masking = false;
    c->resp_err_status = 0;
    c->req = NULL;
    c->rule = -1;
    c->status = 0;
    c->mdec = METRICS_D_ERROR;
    c->req_done = c->resp_started = c->resp_done = false;
    c->resp_chunked = c->resp_close = c->route_tunnel = c->retried = false;
    c->resp_bytes = 0;
    c->bytes_in = c->bytes_out = 0;
    clock_gettime(CLOCK_MONOTONIC, &c->t_start);
}

/* Feeds the client's buffered bytes to the request parser while the state allows it. */
void conn_client_input(struct conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->client.bev);

    if (c->state == CONN_S_LINGER) {
        evbuffer_drain(in, evbuffer_get_length(in));
        return;
    }
    if (c->state == CONN_S_TUNNEL_PEEK) {
        conn_proxy_peek(c);
        return;
    }
    while (c->state == CONN_S_REQ_HEAD || (c->state == CONN_S_RELAY && !c->req_done)) {
        struct evbuffer_iovec v;
        ssize_t r;

        if (c->client.paused || evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
            break;
        if (c->state == CONN_S_REQ_HEAD && c->idle) {
            c->idle = false;
            conn_start_request(c);
            conn_arm(c, CONN_T_HEAD);
        }
        c->parse_stop = false;
        r = http1_feed(c->client.parser, v.iov_base, v.iov_len);
        if (c->state == CONN_S_CLOSED)
            return;
        if (r < 0) {
            const char *why = NULL;
            int st = http1_error(c->client.parser, &why);

            c->mdec = METRICS_D_ERROR;
            conn_respond_error(c, st, st == 405 ? "http_request_denied" : "http_request_error",
                               why != NULL ? why : "malformed request", "protocol_error");
            return;
        }
        evbuffer_drain(in, (size_t)r);
        c->bytes_in += r;
        conn_push(&c->upstream);
        if (c->head_ready) {
            conn_request_head(c);
            return;
        }
        if (c->upstream.bev != NULL && conn_pending(&c->upstream) >= VG_CONN_OUT_CAP) {
            c->client.paused = true;
            bufferevent_setwatermark(c->upstream.bev, EV_WRITE, VG_CONN_OUT_CAP / 2, 0);
            break;
        }
        if (c->parse_stop || (size_t)r < v.iov_len)
            break;
    }
    if (c->state == CONN_S_RELAY && c->req_done && c->resp_done)
        return;
    conn_update_reading(c);
}

/* Which side may read now, from the state and the backpressure flags. */
void conn_update_reading(struct conn *c)
{
    bool client_read, up_read;

    if (c->state == CONN_S_CLOSED || c->state == CONN_S_TUNNEL)
        return; /* a tunnel manages both sides itself (conn_proxy.c) */
    /* The client side keeps reading while a request is in flight (bytes of a pipelined
     * request wait in its input, bounded by the read watermark, and are parsed only after the
     * response): toggling EV_READ per request would cost two epoll_ctl calls. */
    client_read =
        c->state == CONN_S_REQ_HEAD || c->state == CONN_S_LINGER || c->state == CONN_S_UP_CONNECT ||
        ((c->state == CONN_S_RELAY || c->state == CONN_S_TUNNEL_PEEK) && !c->client.paused);
    if (c->client.bev != NULL) {
        if (client_read)
            bufferevent_enable(c->client.bev, EV_READ);
        else
            bufferevent_disable(c->client.bev, EV_READ);
    }
    up_read = c->state == CONN_S_RELAY && !c->upstream.paused && !c->resp_done;
    if (c->upstream.bev != NULL) {
        if (up_read)
            bufferevent_enable(c->upstream.bev, EV_READ);
        else
            bufferevent_disable(c->upstream.bev, EV_READ);
    }
}

/* ---- client callbacks ------------------------------------------------------------------- */

static void client_read_cb(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;

    conn_enter(c);
    conn_client_input(c);
    conn_leave(c);
}

static void client_write_cb(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    size_t left = evbuffer_get_length(bufferevent_get_output(bev));

    conn_enter(c);
    if (c->state == CONN_S_FLUSH_CLOSE && left == 0) {
        conn_linger(c);
    } else if (c->upstream.paused && left <= VG_CONN_OUT_CAP / 2) {
        c->upstream.paused = false;
        bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
        if (c->upstream.bev != NULL)
            conn_upstream_input(c);
        conn_update_reading(c);
    }
    conn_leave(c);
}

/* Ready for the first request (after the TLS handshake, or at accept for plain HTTP). */
void conn_begin(struct conn *c)
{
    if (c->client.parser != NULL)
        http1_parser_reset(c->client.parser);
    else
        c->client.parser = http1_parser_new(HTTP1_REQUEST, &req_callbacks, c);
    if (c->client.parser == NULL) {
        conn_close(c, "oom");
        return;
    }
    if (c->draining) {
        conn_close(c, "draining");
        return;
    }
    conn_start_request(c);
    c->idle = true;
    conn_set_state(c, CONN_S_REQ_HEAD);
    conn_arm(c, CONN_T_HEAD);
    conn_update_reading(c);
    conn_client_input(c);
}

static void conn_handshake_done(struct conn *c)
{
    c->handshake_done = true;
    metrics_tls_handshake(c->w->id);
    conn_begin(c);
}

static void client_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    char detail[256];

    conn_enter(c);
    if (what & BEV_EVENT_CONNECTED) {
        if (c->state == CONN_S_TLS_ACCEPT)
            conn_handshake_done(c);
    } else if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        if (c->state == CONN_S_TLS_ACCEPT) {
            unsigned long e = bufferevent_get_openssl_error(bev);

            snprintf(detail, sizeof(detail), "%s",
                     e != 0 ? conn_tls_reason(e) : "connection closed");
            conn_log(c, LOG_DEBUG, "tls_handshake_failed", "handshake", detail);
            conn_close(c, "handshake_failed");
        } else if (c->state == CONN_S_RELAY && c->req_done && !c->resp_done &&
                   (what & BEV_EVENT_EOF)) {
            /* the client closed after sending its request: nobody is left to read the
             * response (TLS clients do not half-close), so both sides go */
            conn_close(c, "client_eof");
        } else {
            if (c->state == CONN_S_RELAY || c->state == CONN_S_UP_CONNECT)
                conn_log_request(c, NULL, "client_closed");
            if ((what & BEV_EVENT_ERROR) && log_enabled(LOG_DEBUG)) {
                unsigned long e = bufferevent_get_openssl_error(bev);

                snprintf(detail, sizeof(detail), "%s",
                         e != 0 ? conn_tls_reason(e) : strerror(EVUTIL_SOCKET_ERROR()));
                conn_log(c, LOG_DEBUG, "client_error", "client_io", detail);
            }
            conn_close(c, (what & BEV_EVENT_EOF) ? "client_eof" : "client_error");
        }
    } else if (what & BEV_EVENT_TIMEOUT) {
        conn_close(c, "client_timeout");
    }
    conn_leave(c);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;

    conn_enter(c);
    switch (c->state) {
    case CONN_S_UP_CONNECT:
    case CONN_S_RELAY:
        metrics_upstream_error(c->w->id, METRICS_UE_TIMEOUT);
        conn_respond_error(
            c, 504, c->state == CONN_S_RELAY ? "http_response_timeout" : "connection_timeout",
            "upstream timed out", "upstream_timeout");
        break;
    case CONN_S_TLS_ACCEPT:
        conn_close(c, "handshake_timeout");
        break;
    case CONN_S_REQ_HEAD:
        conn_close(c, c->idle ? "idle_timeout" : "head_timeout");
        break;
    default:
        conn_close(c, "timeout");
        break;
    }
    conn_leave(c);
}

/* The client-side callbacks of the connection state machine on c->client.bev. */
void conn_client_setcb(struct conn *c)
{
    bufferevent_setcb(c->client.bev, client_read_cb, client_write_cb, client_event_cb, c);
}

/* ---- accept and ClientHello ------------------------------------------------------------- */

/* The host a no-SNI refusal is recorded under: "(no-sni)", or the original destination. */
static void conn_nosni_host(struct conn *c, char *out, size_t outsz)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    evutil_socket_t fd = bufferevent_getfd(c->client.bev);

    snprintf(out, outsz, "(no-sni)");
    if (c->w->sh->mode != POLICY_MODE_CATCHALL || fd < 0)
        return;
    if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &ss, &len) == 0 && ss.ss_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)outsz);
}

int conn_client_hello(struct conn *c, const char *host, struct tls_leaf *out, int *alert)
{
    struct listen_shared *sh = c->w->sh;
    char err[256], nosni[HOSTNAME_BUFSZ];
    X509 *cert;

    if (host == NULL && c->proxy)
        host = c->host; /* intercepted CONNECT without SNI: the CONNECT host names it */
    if (host == NULL) {
        conn_nosni_host(c, nosni, sizeof(nosni));
        snprintf(c->host, sizeof(c->host), "%s", nosni);
        conn_record_refusal(c, nosni);
        conn_log(c, LOG_INFO, "tls_refused", "no_sni", NULL);
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return -1;
    }
    if (c->proxy) {
        /* intercepted CONNECT: the certificate is for the CONNECT host, and the SNI must be it */
        if (strcmp(host, c->host) != 0) {
            conn_log(c, LOG_INFO, "tls_refused", "sni_not_connect_host", NULL);
            *alert = SSL_AD_UNRECOGNIZED_NAME;
            return -1;
        }
    }
    if (host != c->host)
        snprintf(c->host, sizeof(c->host), "%s", host);
    /* the probe name is answered by vaultgate itself; under .invalid it impersonates nothing */
    if (sh->mode == POLICY_MODE_DEFAULT && !ca_permits(sh->ca, host) &&
        strcmp(host, CONN_PROBE_HOST) != 0) {
        /* no certificate this CA can sign would verify: refuse plainly instead of minting */
        conn_log(c, LOG_WARN, "tls_refused", "host_outside_ca", NULL);
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return -1;
    }
    cert = certcache_get(sh->certs, host, err, sizeof(err));
    if (cert == NULL) {
        conn_log(c, LOG_ERROR, "tls_refused", "leaf_mint", err);
        *alert = SSL_AD_INTERNAL_ERROR;
        return -1;
    }
    out->cert = cert;
    out->key = ca_leaf_key(sh->ca);
    out->chain = ca_intermediate(sh->ca);
    return 0;
}

static void conn_addr_text(const struct sockaddr *sa, char *out, size_t outsz)
{
    char ip[INET6_ADDRSTRLEN] = "?";

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
        snprintf(out, outsz, "%s:%u", ip, ntohs(s4->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
        snprintf(out, outsz, "[%s]:%u", ip, ntohs(s6->sin6_port));
    } else {
        snprintf(out, outsz, "unix");
    }
}

/* A plain-HTTP listener's connection: no handshake, the first request may start at once. */
static void conn_accept_plain(struct conn *c, const struct listen_addr *la, evutil_socket_t fd)
{
    c->proxy = la->kind == LISTEN_PROXY;
    c->default_port = CONN_HTTP_PORT;
    c->client.bev = bufferevent_socket_new(c->w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (c->client.bev == NULL) {
        evutil_closesocket(fd);
        conn_close(c, "oom");
        return;
    }
    conn_client_setcb(c);
    bufferevent_setwatermark(c->client.bev, EV_READ, 0, VG_CONN_IN_MAX);
    bufferevent_enable(c->client.bev, EV_READ | EV_WRITE);
    conn_enter(c);
    conn_begin(c);
    conn_leave(c);
}

void conn_accept(struct listen_worker *w, const struct listen_addr *la, evutil_socket_t fd,
                 const struct sockaddr *sa, int salen)
{
    struct conn *c = NULL;
    SSL *ssl = NULL;
    int one = 1;

    (void)salen;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        evutil_closesocket(fd);
        log_eventf(LOG_ERROR, "accept", "oom", "out of memory");
        return;
    }
    c->w = w;
    c->la = la;
    c->id = ((uint64_t)w->id << 48) | ++w->next_conn_id;
    c->rule = -1;
    conn_addr_text(sa, c->client_addr, sizeof(c->client_addr));
    c->next = w->conns;
    if (w->conns != NULL)
        w->conns->prev = c;
    w->conns = c;
    w->nconns++;
    atomic_fetch_add(&w->sh->active_conns, 1);
    metrics_conn_open(w->id);
    c->policy = policy_ref(listen_worker_policy(w));
    c->timer = evtimer_new(w->base, timer_cb, c);
    c->client.stage = evbuffer_new();
    c->upstream.stage = evbuffer_new();
    if (c->timer == NULL || c->client.stage == NULL || c->upstream.stage == NULL) {
        evutil_closesocket(fd);
        conn_close(c, "oom");
        return;
    }
    if (la->kind != LISTEN_HTTPS) {
        conn_accept_plain(c, la, fd);
        return;
    }
    c->tls = c->host_fixed = true;
    c->default_port = CONN_HTTPS_PORT;
    ssl = tls_server_ssl_new(w->ssl_ctx, c);
    if (ssl == NULL) {
        evutil_closesocket(fd);
        conn_close(c, "oom");
        return;
    }
    /* from here the bufferevent owns ssl and fd, even when its creation fails */
    c->client.bev = bufferevent_openssl_socket_new(w->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                   BEV_OPT_CLOSE_ON_FREE);
    if (c->client.bev == NULL) {
        conn_close(c, "oom");
        return;
    }
    bufferevent_openssl_set_allow_dirty_shutdown(c->client.bev, 1);
    conn_client_setcb(c);
    bufferevent_setwatermark(c->client.bev, EV_READ, 0, VG_CONN_IN_MAX);
    conn_set_state(c, CONN_S_TLS_ACCEPT);
    conn_arm(c, CONN_T_HANDSHAKE);
    bufferevent_enable(c->client.bev, EV_READ | EV_WRITE);
}

/* ---- the worker's log batch ------------------------------------------------------------ */

/*
 * A worker's request lines are written once per loop turn, not one write(2) each: the first
 * line of a turn activates this event, which libevent runs after the callbacks already due in
 * that turn, and it writes the batch (audit/log.c). Errors and warnings are never held back.
 */
static _Thread_local struct event *log_flush_ev;

static void log_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    log_flush();
}

static void log_wake(void *arg)
{
    event_active(arg, EV_TIMEOUT, 1);
}

void conn_worker_begin(struct listen_worker *w)
{
    log_flush_ev = event_new(w->base, -1, 0, log_flush_cb, NULL);
    if (log_flush_ev != NULL)
        log_batch_begin(log_wake, log_flush_ev);
}

void conn_worker_end(struct listen_worker *w)
{
    (void)w;
    log_batch_end();
    if (log_flush_ev != NULL)
        event_free(log_flush_ev);
    log_flush_ev = NULL;
}

/* ---- stop ------------------------------------------------------------------------------- */

void conn_drain_all(struct listen_worker *w)
{
    struct conn *c = w->conns, *next;

    while (c != NULL) {
        next = c->next;
        c->draining = true;
        if (c->state == CONN_S_TLS_ACCEPT || c->state == CONN_S_TUNNEL_PEEK ||
            (c->state == CONN_S_REQ_HEAD && c->idle))
            conn_close(c, "draining");
        c = next;
    }
}

void conn_abort_all(struct listen_worker *w)
{
    while (w->conns != NULL)
        conn_close(w->conns, "shutdown");
}

/* ---- over the connection limit (listen.c) ----------------------------------------------- */

/* TLS handshake of an over-limit connection done: answer 503 and close; anything else is the
 * ordinary client event handling. */
static void busy_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;

    if (!(what & BEV_EVENT_CONNECTED) || c->state != CONN_S_TLS_ACCEPT) {
        client_event_cb(bev, what, arg);
        return;
    }
    conn_enter(c);
    c->handshake_done = true;
    metrics_tls_handshake(c->w->id);
    conn_client_setcb(c);
    conn_start_request(c);
    conn_set_state(c, CONN_S_REQ_HEAD);
    conn_respond_error(c, 503, "connection_limit_reached", "too many connections, retry later",
                       "connection_limit");
    conn_leave(c);
}

void conn_accept_busy(struct listen_worker *w, const struct listen_addr *la, evutil_socket_t fd,
                      const struct sockaddr *sa, int salen)
{
    size_t before = w->nconns;
    struct conn *c;

    conn_accept(w, la, fd, sa, salen);
    if (w->nconns <= before)
        return;   /* conn_accept failed and closed fd */
    c = w->conns; /* conn_accept puts the new connection first */
    if (c->state == CONN_S_TLS_ACCEPT) {
        bufferevent_setcb(c->client.bev, NULL, NULL, busy_event_cb, c);
        return;
    }
    conn_enter(c);
    conn_respond_error(c, 503, "connection_limit_reached", "too many connections, retry later",
                       "connection_limit");
    conn_leave(c);
}
