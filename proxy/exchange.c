/*
 * exchange.c - one request as its transport sees it (exchange.h): the checks of SPEC §4, the
 * policy decision, the rewrite and injection, the request relay. It calls down to
 * exchange_cred.c (the credential), exchange_resp.c (the upstream and the response) and
 * exchange_life.c (states, answers, log lines, the end), never the other way round.
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
#include "http/http1.h"
#include "proxy/listen.h"
#include "proxy/origin.h"
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

/* The one name vaultgate answers itself (SPEC §9, `vaultgate probe`). */
#define EXCH_PROBE_HOST "probe.vaultgate.invalid"

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
    exch_set_resp(x, EXCH_RESP_DONE);
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

void exchange_request(struct exchange *x, struct http1_msg *req)
{
    struct http_head *h = &req->head;
    struct policy_decision dec;

    exch_enter(x);
    x->req = req;
    x->mdec = METRICS_D_ERROR;
    if (x->cc->host_fixed) {
        size_t n = strlen(x->cc->host); /* under HOSTNAME_BUFSZ: exch_conn_names */

        memcpy(x->host, x->cc->host, n + 1);
    }
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
    int rc;

    if (x->req_state == EXCH_REQ_SIGN) {
        exch_enter(x);
        rc = exch_cred_body(x, data, len);
        exch_leave(x);
        return rc;
    }
    if (!exch_relaying(x) || x->o == NULL)
        return -1;
    rc = origin_body(x->o, data, len);
    if (rc < 0) {
        exch_enter(x);
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        exch_leave(x);
    }
    return rc; /* 1: the transport waits for ops->more */
}

int exchange_body_end(struct exchange *x)
{
    int rc;

    if (x->req_state == EXCH_REQ_SIGN) {
        exch_enter(x);
        rc = exch_cred_body_end(x);
        exch_leave(x);
        return rc;
    }
    if (!exch_relaying(x) || x->o == NULL)
        return -1;
    if (origin_body_end(x->o) < 0) {
        exch_enter(x);
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        exch_leave(x);
        return -1;
    }
    exch_set_req(x, EXCH_REQ_SENT);
    return 0;
}

void exchange_flush(struct exchange *x)
{
    if (exch_relaying(x) && x->o != NULL)
        origin_flush(x->o);
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
    if (x->req_state != EXCH_REQ_HEAD && x->req_state != EXCH_REQ_ENDED)
        exch_log_request(x, NULL, reason);
}

bool exchange_responding(const struct exchange *x)
{
    return x->resp_state != EXCH_RESP_NONE;
}

bool exchange_sent(const struct exchange *x)
{
    return x->req_state == EXCH_REQ_SENT;
}

void exchange_take_upgrade(struct exchange *x, struct bufferevent **up, struct wsmask **wsm,
                           bool *bad_ext, bool *route_tunnel)
{
    *up = x->o != NULL ? origin_take(&x->o) : NULL;
    *wsm = x->rf.wsm;
    *bad_ext = x->ws_bad_ext;
    *route_tunnel = x->route_tunnel;
    x->rf.wsm = NULL;
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
    struct exchange *x = exch_spare_take(cc->w);

    if (x == NULL)
        return NULL;
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

void exchange_free(struct exchange **xp)
{
    struct exchange *x = *xp;
    struct mask *m;
    bool clean;

    if (x == NULL)
        return;
    *xp = NULL;
    /* ended: any origin left is a switched one the transport did not take */
    clean = x->req_state == EXCH_REQ_ENDED ||
            (x->req_state == EXCH_REQ_SENT && x->resp_state == EXCH_RESP_DONE);
    exch_cred_detach(x);
    exch_cred_free(x); /* nothing of the credential is used once the transport let go */
    exch_drop_upstream(x, !clean);
    dlq_del(&x->timer);
    /* the masker goes to the worker's cache when it finished its stream cleanly */
    if (!exch_cred_dynamic(x) && (m = exch_filter_keep(&x->rf)) != NULL)
        exch_mask_give(x->w, &m, x->rule, x->policy_gen);
    x->req_state = EXCH_REQ_ENDED; /* not logged: the transport let go */
    x->cc = NULL;
    x->ops = NULL;
    x->t = NULL;
    if (defer_free(&x->defer))
        exch_destroy(x);
}

void exch_conn_release(struct exch_conn *cc)
{
    policy_unref(&cc->policy);
    free(cc->client_addr);
    cc->client_addr = cc->host = NULL;
}

int exch_conn_names(struct exch_conn *cc, const char *client, const char *host)
{
    size_t cn = client != NULL ? strnlen(client, EXCH_CLIENT_MAX) : 0;
    size_t hn = host != NULL ? strnlen(host, HOSTNAME_BUFSZ - 1) : 0; /* as a host[] held */
    char *b = malloc(cn + hn + 2);

    if (b == NULL)
        return -1;
    if (cn > 0)
        memcpy(b, client, cn);
    b[cn] = '\0';
    if (hn > 0)
        memcpy(b + cn + 1, host, hn);
    b[cn + 1 + hn] = '\0';
    free(cc->client_addr);
    cc->client_addr = b;
    cc->host = b + cn + 1;
    return 0;
}

int exch_conn_set_host(struct exch_conn *cc, const char *host)
{
    return exch_conn_names(cc, cc->client_addr, host);
}

void exch_conn_take(struct exch_conn *dst, struct exch_conn *src)
{
    *dst = *src;
    src->policy = NULL;
    src->client_addr = src->host = NULL;
}

void exch_conn_log(const struct exch_conn *cc, enum log_level lvl, const char *event,
                   const char *reason, const char *detail)
{
    struct log_fields f = LOG_FIELDS_INIT;

    if (!log_enabled(lvl))
        return;
    f.conn = cc->id;
    f.client = cc->client_addr;
    f.listener = cc->la->label;
    f.host = cc->host != NULL && cc->host[0] != '\0' ? cc->host : NULL;
    f.reason = reason;
    f.detail = detail;
    log_event(lvl, event, &f);
}
