/*
 * exchange.c - one request: the checks of SPEC §4, the policy decision, the rewrite and
 * injection, the upstream connection, the request relay, and the request's audit counts,
 * metrics and log line. The response relay and masking are exchange_resp.c.
 *
 * Guarantees:
 * - The head is checked (Host vs the connection's host, target form, method, upgrade), decided
 *   against the policy snapshot taken for this request, rewritten (hop-by-hop fields stripped,
 *   then the rule's secret injected) and serialised anew; the client's own head and chunk lines
 *   are never forwarded.
 * - A secret only goes into a head bound for upstream_get(host, 443, TLS) of a rule that
 *   matched that host.
 * - Every request ends in exactly one report to the transport (ops->finished), after exactly
 *   one log line (or none when the client went away first) and its metrics.
 * - Logs carry host, decision, rule, secret name, status, sizes and times: never a path, query,
 *   header value, body or secret.
 */
#include "proxy/exchange.h"
#include "proxy/exchange_int.h"
#include "audit/audit.h"
#include "common/caps.h"
#include "policy/inject.h"
#include "policy/policy.h"
#include "proxy/h2up.h"
#include "http/http1.h"
#include "proxy/listen.h"
#include "mask/mask.h"
#include "proxy/reason.h"
#include "mask/wsmask.h"
#include "proxy/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/err.h>

/* The one name vaultgate answers itself (SPEC §9, `vaultgate probe`). */
#define EXCH_PROBE_HOST "probe.vaultgate.invalid"

/* ---- small helpers ---------------------------------------------------------------------- */

double exch_elapsed(const struct timespec *t0)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

const char *exch_tls_reason(unsigned long e)
{
    const char *r = ERR_reason_error_string(e);

    return r != NULL ? r : "TLS error";
}

static const char *decision_name(enum metrics_decision d)
{
    static const char *const names[] = {"inject", "allow", "block", "error"};

    return d < METRICS_D_COUNT ? names[d] : "error";
}

static void exch_fields(const struct exchange *x, struct log_fields *f)
{
    const struct exch_conn *cc = x->cc;

    f->conn = cc->id;
    f->client = cc->client_addr;
    f->listener = cc->la->label;
    f->host = x->host[0] != '\0' ? x->host : NULL;
}

void exch_log(const struct exchange *x, enum log_level lvl, const char *event, const char *reason,
              const char *detail)
{
    struct log_fields f = LOG_FIELDS_INIT;

    if (!log_enabled(lvl) || x->cc == NULL)
        return;
    exch_fields(x, &f);
    f.reason = reason;
    f.detail = detail;
    log_event(lvl, event, &f);
}

void exch_log_request(struct exchange *x, const char *route, const char *reason)
{
    struct log_fields f = LOG_FIELDS_INIT;
    struct policy_rule_info ri;

    if (!log_enabled(LOG_INFO) || x->cc == NULL)
        return;
    exch_fields(x, &f);
    f.route = route;
    f.proto = x->cc->proto;
    f.decision = decision_name(x->mdec);
    if (x->rule >= 0 && x->policy != NULL) {
        policy_rule_info(x->policy, (size_t)x->rule, &ri);
        f.rule = x->rule;
        f.secret = ri.secret_name;
    }
    f.status = x->status;
    f.bytes_in = x->bytes_in;
    f.bytes_out = x->bytes_out;
    f.duration = exch_elapsed(&x->t_start);
    f.reason = reason;
    log_event(LOG_INFO, "request", &f);
}

void exch_enter(struct exchange *x)
{
    defer_enter(&x->defer);
}

static void exch_destroy(struct exchange *x);

void exch_leave(struct exchange *x)
{
    if (defer_leave(&x->defer))
        exch_destroy(x);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct exchange *x = arg;

    exch_enter(x);
    if (x->state == EXCH_S_TOKEN) {
        exch_cred_token_timeout(x);
        exch_leave(x);
        return;
    }
    metrics_upstream_error(x->w->id, METRICS_UE_TIMEOUT);
    exch_fail(x, 504, x->state == EXCH_S_RELAY ? VG_PS_RESPONSE_TIMEOUT : VG_PS_CONNECTION_TIMEOUT,
              "upstream timed out", VG_R_UPSTREAM_TIMEOUT);
    exch_leave(x);
}

void exch_arm(struct exchange *x, int seconds)
{
    struct timeval tv = {seconds, 0};

    if (x->timer == NULL)
        x->timer = evtimer_new(x->w->base, timer_cb, x);
    if (x->timer != NULL)
        evtimer_add(x->timer, &tv);
}

void exch_record_refusal(struct exchange *x)
{
    struct worker *w = x->w;

    audit_blocked(w->sh->audit, w->id, x->host);
    audit_route(w->sh->audit, w->id, x->host, AUDIT_ROUTE_REFUSED);
    metrics_blocked(w->id);
}

/* ---- the end of an exchange ------------------------------------------------------------ */

/* Reports how the exchange ended: its last word to the transport. */
void exch_finish(struct exchange *x, enum exch_end how)
{
    if (x->state == EXCH_S_ENDED || defer_freed(&x->defer))
        return;
    x->state = EXCH_S_ENDED;
    if (x->timer != NULL)
        evtimer_del(x->timer);
    x->ops->finished(x->t, how);
}

/* Frees the upstream side. abort: the peer must not take what it got as a complete message. */
void exch_drop_upstream(struct exchange *x, bool abort)
{
    if (x->upreq != NULL)
        upstream_cancel(&x->upreq);
    h2up_dial_end(&x->h2dial, H2UP_PLACED_RETRY, UPSTREAM_OK); /* those waiting dial anew */
    h2up_close(&x->h2s); /* a stream not yet complete is reset */
    if (x->up.bev != NULL) {
        evutil_socket_t fd = bufferevent_getfd(x->up.bev);

        if (abort && fd >= 0) {
            struct linger lg = {1, 0};

            /* RST: a half-sent request never looks complete to the upstream */
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        bufferevent_setcb(x->up.bev, NULL, NULL, NULL, NULL);
        bufferevent_free(x->up.bev);
        x->up.bev = NULL;
    }
    x->up_paused = false;
    x->up.nocopy = false;
    if (x->up.stage != NULL)
        evbuffer_drain(x->up.stage, evbuffer_get_length(x->up.stage));
}

/*
 * Answers the request with a response of vaultgate's own (SPEC §4) and ends the exchange: the
 * connection closes after it. Nothing more is forwarded in either direction. When a response
 * is already on its way, cutting the connection is all that is left.
 */
void exch_fail(struct exchange *x, int status, const char *type, const char *details,
               const char *reason)
{
    if (x->state == EXCH_S_ENDED || defer_freed(&x->defer))
        return;
    exch_drop_upstream(x, true);
    if (x->resp_started) {
        exch_log_request(x, NULL, reason);
        exch_finish(x, EXCH_END_ABORT);
        return;
    }
    x->status = status;
    x->resp_started = x->resp_done = true;
    if (x->ops->error(x->t, status, type, details, x->host[0] != '\0' ? x->host : NULL) < 0) {
        exch_finish(x, EXCH_END_ABORT);
        return;
    }
    metrics_request(x->w->id, x->mdec, status, exch_elapsed(&x->t_start));
    exch_log_request(x, x->mdec == METRICS_D_BLOCK ? "refused" : NULL, reason);
    exch_finish(x, EXCH_END_CLOSE);
}

/* ---- target and Host checks ------------------------------------------------------------ */

/* Puts Host: <request host> first in h, replacing every Host field. 0 or -1. */
static int exch_set_host(struct exchange *x, struct http_head *h)
{
    char v[HOSTNAME_BUFSZ + 2];
    struct http_field f;
    size_t n = strlen(x->host);

    if (memchr(x->host, ':', n) != NULL) {
        v[0] = '[';
        memcpy(v + 1, x->host, n);
        v[n + 1] = ']';
        n += 2;
    } else {
        memcpy(v, x->host, n);
    }
    httphead_remove(h, "Host");
    if (httphead_add(h, "Host", 4, v, n) < 0)
        return -1;
    f = h->fields[h->nfields - 1];
    memmove(h->fields + 1, h->fields, (h->nfields - 1) * sizeof(h->fields[0]));
    h->fields[0] = f;
    return 0;
}

/* 1 when authority (host[:port]) names the request's host on an acceptable port, 0 when it
 * names another, -1 when it is malformed. */
static int exch_authority_ok(const struct exchange *x, const char *a, size_t len)
{
    char host[HOSTNAME_BUFSZ];
    int port = 0;

    /* byte for byte the host: no need to normalise it again */
    if (http1_authority_is(a, len, x->host, &port) != 1) {
        if (http1_split_authority(a, len, host, sizeof(host), &port) < 0)
            return -1;
        if (strcmp(host, x->host) != 0)
            return 0;
    }
    return port == 0 || port == x->cc->default_port || port == x->cc->la->port;
}

/*
 * An absolute-form target "scheme://authority[/...]" (http always, https when https_ok): the
 * authority is [*auth, *end). 0, or -1 when the target is not of that form.
 */
static int exch_absolute(const struct http_head *h, bool https_ok, const char **auth,
                         const char **end)
{
    const char *t = h->target;

    if (https_ok && strncasecmp(t, "https://", 8) == 0)
        *auth = t + 8;
    else if (strncasecmp(t, "http://", 7) == 0)
        *auth = t + 7;
    else
        return -1;
    *end = *auth + strcspn(*auth, "/?#");
    return 0;
}

/* The absolute-form target of h, whose authority ends at end, becomes origin-form. 0 or the
 * status to answer with *why. */
static int exch_origin_form(struct http_head *h, const char *end, const char **why)
{
    /* copied first: the new target replaces the arena string end points into */
    char tmp[VG_HEAD_MAX_BYTES];
    size_t rest = h->target_len - (size_t)(end - h->target);
    int n;

    n = snprintf(tmp, sizeof(tmp), "%s%.*s", *end == '/' ? "" : "/", (int)rest, end);
    if (n <= 0 || (size_t)n >= sizeof(tmp) || httphead_set_target(h, tmp, (size_t)n) < 0) {
        *why = "request target too long";
        return 400;
    }
    return 0;
}

/*
 * Host and target checks of SPEC §4 on a TLS or plain-HTTP connection. Returns 0, or the
 * status to answer (400/421) with *why. An absolute-form target becomes origin-form.
 */
static int exch_check_target(struct exchange *x, struct http_head *h, const char **why)
{
    const struct exch_conn *cc = x->cc;
    size_t nhost = httphead_count(h, "Host");
    const struct http_field *hf = httphead_get(h, "Host");
    const char *auth, *end;
    int r, port = 0;

    if (nhost > 1 || (nhost == 0 && (h->version_minor != 0 || !cc->host_fixed))) {
        *why = nhost > 1 ? "several Host fields" : "missing Host";
        return 400;
    }
    if (!cc->host_fixed &&
        http1_split_authority(hf->value, hf->value_len, x->host, sizeof(x->host), &port) < 0) {
        /* plain HTTP: the request's Host names the host (each request on its own) */
        x->host[0] = '\0';
        *why = "malformed Host";
        return 400;
    }
    if (hf != NULL && (r = exch_authority_ok(x, hf->value, hf->value_len)) != 1) {
        *why = r < 0 ? "malformed Host"
                     : (cc->host_fixed ? "Host does not match the connection's host"
                                       : "Host names another port");
        return r < 0 ? 400 : 421;
    }
    if (h->target[0] == '/' ||
        (h->target[0] == '*' && h->target[1] == '\0' && strcmp(h->method, "OPTIONS") == 0))
        return 0;
    if (exch_absolute(h, true, &auth, &end) < 0) {
        *why = "unsupported request target form";
        return 400;
    }
    if (memchr(auth, '@', (size_t)(end - auth)) != NULL) {
        *why = "userinfo in the request target";
        return 400;
    }
    r = exch_authority_ok(x, auth, (size_t)(end - auth));
    if (r != 1) {
        *why = r < 0 ? "malformed request target" : "request target names another host";
        return r < 0 ? 400 : 421;
    }
    return exch_origin_form(h, end, why);
}

/*
 * Absolute-form http:// requests on the proxy listener: the target names the host and port, Host
 * must name the same host (and port, when it names one other than 80). Returns 0 (x->host and
 * x->target_port set, target now origin-form) or the status to answer with *why. Whether a port
 * other than 80 may be used is decided after the policy decision: a rule's host is reached over
 * TLS on 443 whatever port the request names; any other host only on 80 (SPEC §4).
 */
static int exch_proxy_target(struct exchange *x, struct http_head *h, const char **why)
{
    const struct http_field *hf = httphead_get(h, "Host");
    const char *auth, *end;
    char host[HOSTNAME_BUFSZ];
    int port = 0, hport = 0;

    if (exch_absolute(h, false, &auth, &end) < 0) {
        *why = "a proxy request needs an absolute http:// target (or CONNECT)";
        return 400;
    }
    if (memchr(auth, '@', (size_t)(end - auth)) != NULL ||
        http1_split_authority(auth, (size_t)(end - auth), x->host, sizeof(x->host), &port) < 0) {
        x->host[0] = '\0';
        *why = "malformed request target";
        return 400;
    }
    x->target_port = port == 0 ? EXCH_HTTP_PORT : port;
    if (httphead_count(h, "Host") > 1 ||
        (hf != NULL &&
         http1_split_authority(hf->value, hf->value_len, host, sizeof(host), &hport) < 0)) {
        *why = "malformed Host";
        return 400;
    }
    if (hf != NULL && (strcmp(host, x->host) != 0 || (hport != 0 && hport != x->target_port))) {
        *why = "Host does not match the request target";
        return 421;
    }
    return exch_origin_form(h, end, why);
}

/* ---- decision --------------------------------------------------------------------------- */

/* 1 when h carries a field that asks a server to act on another method than its own (SPEC §3
 * "Scope"), in any letter case of the name. */
static bool exch_method_override(const struct http_head *h)
{
    return httphead_get(h, "X-HTTP-Method-Override") != NULL ||
           httphead_get(h, "X-HTTP-Method") != NULL || httphead_get(h, "X-Method-Override") != NULL;
}

/*
 * The decision for x->host on the worker's current policy snapshot, which the connection keeps
 * (only a reload costs a new reference): for the request h, with the rules' scopes (SPEC §3), or
 * for the host alone when h is NULL (CONNECT). A refusal is answered here and -1 returned: 403
 * for a blocked host or a request outside every rule's scope, a method override on a host with
 * method scopes included (both recorded), 400 for a path that is not canonical on a host with
 * path scopes. Else 0 with *dec filled.
 */
static int exch_decide(struct exchange *x, const struct http_head *h, struct policy_decision *dec)
{
    struct exch_conn *cc = x->cc;
    struct worker *w = x->w;
    const char *why = NULL;
    int st = 0;

    if (cc->policy != worker_policy(w)) {
        policy_unref(&cc->policy);
        cc->policy = policy_ref(w->policy);
    }
    cc->policy_gen = w->policy_gen;
    /* the request keeps its own snapshot: an HTTP/2 connection may take a newer one for its
     * next stream while this one is in flight */
    policy_unref(&x->policy);
    x->policy = policy_ref(cc->policy);
    x->policy_gen = cc->policy_gen;
    if (h == NULL)
        policy_decide(cc->policy, x->host, dec);
    else
        st = policy_decide_request(cc->policy, x->host, h->method, h->target, h->target_len,
                                   exch_method_override(h), dec, &why);
    if (st != 0) {
        exch_fail(x, st, st == 400 ? VG_PS_REQUEST_ERROR : VG_PS_INTERNAL_ERROR, why,
                  st == 400 ? VG_R_NONCANONICAL : VG_R_OOM);
        return -1;
    }
    if (dec->reported && h != NULL) {
        /* report-only (SPEC §12): forwarded as an allowed host; the requests of a CONNECT are
         * counted one by one inside it */
        x->reported = true;
        metrics_reported(w->id);
    }
    if (dec->verdict != POLICY_BLOCK)
        return 0;
    x->mdec = METRICS_D_BLOCK;
    exch_record_refusal(x);
    if (dec->out_of_scope)
        exch_fail(x, 403, VG_PS_REQUEST_DENIED, "outside the scope of the rules for this host",
                  VG_R_OUT_OF_SCOPE);
    else
        exch_fail(x, 403, VG_PS_REQUEST_DENIED, "host blocked by policy", VG_R_BLOCKED);
    return -1;
}

/*
 * CONNECT on the explicit-proxy listener (SPEC §4): a port other than 443 or 80, or a blocked
 * host, is answered 403 and recorded; otherwise the transport is told where to go on.
 */
static void exch_connect(struct exchange *x, struct http_head *h)
{
    struct policy_decision dec;
    int port = 0;

    if (http1_split_authority(h->target, h->target_len, x->host, sizeof(x->host), &port) < 0 ||
        port == 0) {
        x->host[0] = '\0';
        exch_fail(x, 400, VG_PS_REQUEST_ERROR, "malformed CONNECT target", VG_R_CONNECT);
        return;
    }
    if (port != EXCH_HTTPS_PORT && port != EXCH_HTTP_PORT) {
        x->mdec = METRICS_D_BLOCK;
        exch_record_refusal(x);
        exch_fail(x, 403, VG_PS_REQUEST_DENIED, "CONNECT port not allowed", VG_R_CONNECT_PORT);
        return;
    }
    if (exch_decide(x, NULL, &dec) < 0)
        return;
    x->target_port = port;
    x->connect_tunnel = port == EXCH_HTTPS_PORT && x->w->sh->mode == POLICY_MODE_DEFAULT &&
                        dec.verdict == POLICY_ALLOW && !dec.designated && !dec.reported;
    exch_finish(x, EXCH_END_CONNECT);
}

/* ---- checks and rewrite ----------------------------------------------------------------- */

/*
 * `vaultgate probe` (SPEC §9) proves from inside a sandbox that its TLS reaches this process:
 * the reserved name is answered here with 204 and a Proxy-Status naming the run, never
 * forwarded, and the connection closes (the probe reads until the end).
 */
static void exch_answer_probe(struct exchange *x)
{
    struct http_head h;
    char ps[160];
    int n = snprintf(ps, sizeof(ps), "vaultgate; details=\"probe answered for run %s\"",
                     policy_run_id(worker_policy(x->w)));
    int rc;

    x->mdec = METRICS_D_ALLOW;
    x->status = 204;
    x->resp_started = x->resp_done = true;
    httphead_init(&h);
    rc = httphead_set_status_line(&h, 1, 204, "No Content", 10) < 0 ||
                 httphead_add(&h, "Proxy-Status", 12, ps, (size_t)n) < 0 ||
                 httphead_add(&h, "Cache-Control", 13, "no-store", 8) < 0 ||
                 x->ops->head(x->t, &h, EXCH_BODY_NONE, 0, true) < 0 || x->ops->end(x->t, NULL) < 0
             ? -1
             : 0;
    httphead_reset(&h);
    if (rc < 0) {
        exch_finish(x, EXCH_END_ABORT);
        return;
    }
    metrics_request(x->w->id, x->mdec, 204, exch_elapsed(&x->t_start));
    exch_log_request(x, NULL, "probe");
    exch_finish(x, EXCH_END_CLOSE);
}

/*
 * Method, target and upgrade checks of one request head. Returns 0 when the request may go on
 * to the policy decision; otherwise it has been answered (or taken over by CONNECT/the probe).
 */
static int exch_checks(struct exchange *x, struct http_head *h)
{
    const struct exch_conn *cc = x->cc;
    const char *why = NULL;
    int st;

    if (cc->proxy && !cc->host_fixed && strcmp(h->method, "CONNECT") == 0) {
        exch_connect(x, h);
        return -1;
    }
    if (strcmp(h->method, "TRACE") == 0 || strcmp(h->method, "CONNECT") == 0) {
        exch_fail(x, 405, VG_PS_REQUEST_DENIED, "method not allowed", VG_R_METHOD);
        return -1;
    }
    st = cc->proxy && !cc->host_fixed ? exch_proxy_target(x, h, &why)
                                      : exch_check_target(x, h, &why);
    if (st == 0 && memchr(h->target, '#', h->target_len) != NULL) {
        /* RFC 9112 §3.2 has no fragment in a request target; every host, every listener */
        st = 400;
        why = "fragment in the request target";
    }
    if (st != 0) {
        exch_fail(x, st, VG_PS_REQUEST_ERROR, why, st == 421 ? VG_R_MISDIRECTED : VG_R_BAD_REQUEST);
        return -1;
    }
    if (x->req->upgrade) {
        /* WebSocket only: a bodyless GET naming websocket in Upgrade (SPEC §4) */
        if (strcmp(h->method, "GET") != 0 || x->req->body != HTTP1_BODY_NONE ||
            !httphead_has_token(h, "Upgrade", "websocket")) {
            exch_fail(x, 501, VG_PS_UPGRADE_FAILED, "only WebSocket upgrades are supported",
                      VG_R_UPGRADE);
            return -1;
        }
        x->ws = true;
    }
    if (cc->tls && strcmp(x->host, EXCH_PROBE_HOST) == 0) {
        exch_answer_probe(x);
        return -1;
    }
    return 0;
}

/*
 * The head as it will be sent: hop-by-hop fields stripped first (so the client cannot strip
 * what vaultgate adds), Host set to the upstream's authority, then the credential of an inject
 * decision (exchange_cred.c). 0 (go on), 1 (the credential waits for the body), or -1 after
 * answering.
 */
static int exch_rewrite(struct exchange *x, struct http_head *h, const struct policy_decision *dec)
{
    http1_strip_hop_by_hop(h, x->ws);
    h->version_minor = 1;
    if (exch_set_host(x, h) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "request head too large", VG_R_HEAD);
        return -1;
    }
    if (dec->verdict != POLICY_INJECT) {
        x->mdec = METRICS_D_ALLOW;
        return 0;
    }
    x->mdec = METRICS_D_INJECT;
    x->rule = dec->rule;
    /* a credentialed WebSocket gets no compression extension: the masker must see the
     * server's bytes as they are */
    if (x->ws)
        httphead_remove(h, "Sec-WebSocket-Extensions");
    return exch_cred_apply(x, h);
}

/*
 * Asks for the upstream of this request (again, after a pooled connection died): a stream on a
 * pooled HTTP/2 connection with room, a place in the queue of one being made, or a dial of its
 * own, announced so that the requests coming meanwhile wait for it rather than dial too.
 */
void exch_get_upstream(struct exchange *x)
{
    int how = H2UP_NONE;

    x->state = EXCH_S_UP_CONNECT;
    exch_arm(x, EXCH_T_UP_GET(x));
    if (x->up_tls == UPSTREAM_TLS_H2) {
        x->h2s = exch_h2_open(x, &how);
        if (how == H2UP_OPENED) {
            exch_h2_started(x); /* a pooled HTTP/2 connection had room for one more stream */
            return;
        }
        if (how == H2UP_WAITING)
            return; /* exch_h2_placed follows */
        x->h2dial = h2up_dial(x->w, x->host, x->up_port);
    }
    exch_dial(x);
}

/* Dials (or takes a pooled connection) for this request alone. */
void exch_dial(struct exchange *x)
{
    x->upreq =
        upstream_get(x->w->up, x->host, x->up_port, x->up_tls, exch_retryable(x), exch_up_ready, x);
    if (x->upreq == NULL) {
        h2up_dial_end(&x->h2dial, H2UP_PLACED_RETRY, UPSTREAM_OK);
        exch_fail(x, 502, VG_PS_INTERNAL_ERROR, "upstream connection failed", VG_R_UPSTREAM_GET);
    }
}

void exchange_request(struct exchange *x, struct http1_msg *req)
{
    struct http_head *h = &req->head;
    struct policy_decision dec;

    exch_enter(x);
    x->req = req;
    x->mdec = METRICS_D_ERROR;
    if (x->cc->host_fixed)
        memcpy(x->host, x->cc->host, sizeof(x->host));
    if (exch_checks(x, h) < 0 || exch_decide(x, h, &dec) < 0)
        goto out;
    if (x->cc->proxy && !x->cc->host_fixed && x->target_port != EXCH_HTTP_PORT &&
        dec.verdict != POLICY_INJECT && !dec.rule_host) {
        /* absolute-form to another port of a host without a rule: a refusal by policy (SPEC
         * §6); a rule's host is reached over TLS on 443 whatever port the request names */
        x->mdec = METRICS_D_BLOCK;
        exch_record_refusal(x);
        exch_fail(x, 403, VG_PS_REQUEST_DENIED, "port not allowed for plain HTTP",
                  VG_R_FORBIDDEN_PORT);
        goto out;
    }
    /* a rule's host is only ever reached over TLS on 443, whatever listener it came in on; over
     * TLS the upstream may pick HTTP/2 (a WebSocket needs HTTP/1.1's Upgrade) */
    x->up_tls = !(x->cc->tls || dec.verdict == POLICY_INJECT || dec.rule_host) ? UPSTREAM_PLAIN
                : x->ws                                                        ? UPSTREAM_TLS
                                                                               : UPSTREAM_TLS_H2;
    x->up_port = x->up_tls != UPSTREAM_PLAIN ? EXCH_HTTPS_PORT : EXCH_HTTP_PORT;
    {
        const struct http_field *ct = httphead_get(h, "Content-Type");

        x->grpc = ct != NULL && strncasecmp(ct->value, "application/grpc", 16) == 0;
    }
    if (exch_rewrite(x, h, &dec) != 0)
        goto out; /* answered, or the credential asks for the upstream itself later */
    exch_get_upstream(x);
out:
    exch_leave(x);
}

/* ---- request body ----------------------------------------------------------------------- */

int exchange_body(struct exchange *x, const char *data, size_t len)
{
    struct evbuffer *out = x->up.stage;
    int rc;

    if (x->state == EXCH_S_BODY) {
        exch_enter(x);
        rc = exch_cred_body(x, data, len);
        exch_leave(x);
        return rc;
    }
    if (x->state == EXCH_S_RELAY && x->h2s != NULL) {
        rc = h2up_body(x->h2s, data, len);
        x->body_paused = rc == 1;
        return rc;
    }
    if (x->state != EXCH_S_RELAY || x->up.bev == NULL)
        return -1;
    rc = x->req->body == HTTP1_BODY_CHUNKED ? http1_write_chunk(out, data, len)
                                            : evbuffer_add(out, data, len);
    if (rc < 0) {
        exch_enter(x);
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        exch_leave(x);
        return -1;
    }
    if (bevio_pending(&x->up) < VG_CONN_OUT_CAP)
        return 0;
    /* the upstream takes no more for now: the transport waits for ops->more */
    bevio_push(&x->up);
    x->body_paused = true;
    bufferevent_setwatermark(x->up.bev, EV_WRITE, VG_CONN_OUT_CAP / 2, 0);
    return 1;
}

int exchange_body_end(struct exchange *x)
{
    int rc;

    if (x->state == EXCH_S_BODY) {
        exch_enter(x);
        rc = exch_cred_body_end(x);
        exch_leave(x);
        return rc;
    }
    if (x->state == EXCH_S_RELAY && x->h2s != NULL) {
        x->req_done = true;
        return h2up_body_end(x->h2s);
    }
    if (x->state != EXCH_S_RELAY || x->up.bev == NULL)
        return -1;
    if (x->req->body == HTTP1_BODY_CHUNKED && http1_write_last_chunk(x->up.stage) < 0) {
        exch_enter(x);
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        exch_leave(x);
        return -1;
    }
    x->req_done = true;
    bevio_push(&x->up);
    return 0;
}

void exchange_flush(struct exchange *x)
{
    if (x->state == EXCH_S_RELAY && x->h2s == NULL)
        bevio_push(&x->up);
}

void exchange_reject(struct exchange *x, int status, const char *type, const char *details,
                     const char *reason)
{
    exch_enter(x);
    x->mdec = METRICS_D_ERROR;
    exch_fail(x, status, type, details, reason);
    exch_leave(x);
}

void exchange_count_in(struct exchange *x, size_t n)
{
    x->bytes_in += (int64_t)n;
}

const char *exchange_host(const struct exchange *x)
{
    return x->host;
}

void exchange_client_gone(struct exchange *x, const char *reason)
{
    if (x->state == EXCH_S_RELAY || x->state == EXCH_S_UP_CONNECT || x->state == EXCH_S_BODY ||
        x->state == EXCH_S_TOKEN)
        exch_log_request(x, NULL, reason);
}

bool exchange_responding(const struct exchange *x)
{
    return x->resp_started;
}

bool exchange_sent(const struct exchange *x)
{
    return x->state == EXCH_S_RELAY && x->req_done;
}

void exchange_take_upgrade(struct exchange *x, struct bufferevent **up, struct wsmask **wsm,
                           bool *bad_ext, bool *route_tunnel)
{
    *up = x->up.bev;
    *wsm = x->wsm;
    *bad_ext = x->ws_bad_ext;
    *route_tunnel = x->route_tunnel;
    if (x->up.bev != NULL)
        bufferevent_setcb(x->up.bev, NULL, NULL, NULL, NULL);
    x->up.bev = NULL;
    x->wsm = NULL;
    x->upgrade_taken = true;
}

void exchange_connect_target(const struct exchange *x, const char **host, int *port, bool *tunnel)
{
    *host = x->host;
    *port = x->target_port;
    *tunnel = x->connect_tunnel;
}

/* ---- life ------------------------------------------------------------------------------- */

struct exchange *exchange_new(struct exch_conn *cc, const struct exchange_ops *ops, void *t,
                              const struct timespec *t0)
{
    struct exchange *x = calloc(1, sizeof(*x));

    if (x == NULL)
        return NULL;
    x->up.stage = evbuffer_new();
    if (x->up.stage == NULL) {
        free(x);
        return NULL;
    }
    x->cc = cc;
    x->ops = ops;
    x->t = t;
    x->w = cc->w;
    x->rule = -1;
    x->mdec = METRICS_D_ERROR;
    if (t0 != NULL)
        x->t_start = *t0;
    else
        clock_gettime(CLOCK_MONOTONIC, &x->t_start);
    return x;
}

/* Frees the memory of x (everything the connection lent was given back by exchange_free). */
static void exch_destroy(struct exchange *x)
{
    exch_drop_mask(x);
    exch_cred_free(x);
    policy_unref(&x->policy);
    http1_parser_free(&x->parser);
    if (x->timer != NULL)
        event_free(x->timer);
    if (x->up.stage != NULL)
        evbuffer_free(x->up.stage);
    free(x);
}

void exchange_free(struct exchange **xp)
{
    struct exchange *x = *xp;
    bool clean;

    if (x == NULL)
        return;
    *xp = NULL;
    clean = x->resp_done && x->req_done;
    exch_cred_detach(x);
    exch_drop_upstream(x, !clean);
    if (x->timer != NULL)
        evtimer_del(x->timer);
    /* the masker goes to the worker's cache when it finished its stream cleanly */
    if (x->mask != NULL && x->mask_clean && !x->forms_dynamic)
        exch_mask_give(x->w, &x->mask, x->rule, x->policy_gen);
    x->state = EXCH_S_ENDED;
    x->cc = NULL;
    x->ops = NULL;
    x->t = NULL;
    if (defer_free(&x->defer))
        exch_destroy(x);
}

void exch_conn_release(struct exch_conn *cc)
{
    policy_unref(&cc->policy);
}

/* ---- the worker's maskers ---------------------------------------------------------------- */

/*
 * A masker is built for one rule's forms of one snapshot. It is no connection's: an idle
 * connection would hold ~2 KiB for it. The worker keeps up to VG_WORKER_MASKS of them for the
 * next credentialed requests of any connection (LIFO, so the most recently used stay warm);
 * one of an older snapshot is freed (wiped) as soon as it is seen, and all of them when the
 * worker takes a new snapshot.
 */
struct exch_masks {
    size_t n;
    struct {
        struct mask *m;
        int rule;
        uint64_t gen;
    } e[VG_WORKER_MASKS];
};

/* Frees entry i (wiped), the last one taking its place. */
static void exch_masks_drop(struct exch_masks *c, size_t i)
{
    mask_free(&c->e[i].m);
    c->e[i] = c->e[--c->n];
}

struct mask *exch_mask_take(struct worker *w, int rule, uint64_t gen)
{
    struct exch_masks *c = w->masks;
    struct mask *m;

    if (c == NULL)
        return NULL;
    for (size_t i = c->n; i-- > 0;) {
        if (c->e[i].gen != w->policy_gen) {
            exch_masks_drop(c, i);
            continue;
        }
        if (c->e[i].rule != rule || c->e[i].gen != gen)
            continue;
        m = c->e[i].m;
        c->e[i] = c->e[--c->n];
        return m;
    }
    return NULL;
}

void exch_mask_give(struct worker *w, struct mask **mp, int rule, uint64_t gen)
{
    struct exch_masks *c = w->masks;

    if (gen != w->policy_gen || (c == NULL && (c = w->masks = calloc(1, sizeof(*c))) == NULL) ||
        c->n == VG_WORKER_MASKS) {
        mask_free(mp);
        return;
    }
    c->e[c->n].m = *mp;
    c->e[c->n].rule = rule;
    c->e[c->n].gen = gen;
    c->n++;
    *mp = NULL;
}

void exchange_worker_masks(struct worker *w, bool all)
{
    struct exch_masks *c = w->masks;

    if (c == NULL)
        return;
    for (size_t i = c->n; i-- > 0;) {
        if (all || c->e[i].gen != w->policy_gen)
            exch_masks_drop(c, i);
    }
    if (all) {
        free(c);
        w->masks = NULL;
    }
}

static void exch_worker_refresh(struct worker *w)
{
    exchange_worker_masks(w, false);
}

static void exch_worker_free(struct worker *w)
{
    exchange_worker_masks(w, true);
}

const struct worker_module exchange_worker_module = {
    .name = "exchange",
    .refresh = exch_worker_refresh,
    .wake = exchange_oauth_wake,
    .free = exch_worker_free,
};
