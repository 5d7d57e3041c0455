/*
 * admin_routes.c - what a request to the admin API gets (SPEC §7): the Host rule, the method and
 * body rules, the endpoints, and every answer with its headers.
 *
 * Guarantees: every answer - to a request that could not be parsed as well - carries the five
 * security headers (Cache-Control: no-store among them), Date, an explicit Content-Type and
 * Content-Length; HEAD gets the headers of GET and no body. A Host (or absolute-form authority)
 * that is not localhost or an IP literal is 421 and closes, before anything else is looked at:
 * a web page that rebinds its own name to the admin address cannot read the API through the
 * visitor's browser. Any method but GET and HEAD is 405 with `Allow: GET, HEAD`; an admin
 * request announcing a body is never read (GET/HEAD: 400) and the connection closes. Routing
 * looks at the path alone, so a query string never changes the answer, and nothing about a
 * request (path, query, header) is ever logged.
 */
#include "proxy/admin_int.h"
#include "proxy/admin_page.h"
#include "audit/audit.h"
#include "audit/log.h"
#include "policy/httphead.h"
#include "http/http1.h"
#include "proxy/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/util.h>

/* ---- answers ---- */

static const struct {
    const char *name, *value;
} security_headers[] = {
    {"Content-Security-Policy", "default-src 'none'"},
    {"X-Content-Type-Options", "nosniff"},
    {"X-Frame-Options", "DENY"},
    {"Referrer-Policy", "no-referrer"},
    {"Cache-Control", "no-store"},
};

static int add_field(struct http_head *h, const char *name, const char *value)
{
    return httphead_add(h, name, strlen(name), value, strlen(value));
}

/* The status page's policy: its one same-origin stylesheet, nothing else (SPEC §7). */
#define PAGE_CSP "default-src 'none'; style-src 'self'"

/*
 * Queues an answer: status line, the security headers (csp replacing the default
 * Content-Security-Policy when not NULL), Date, Content-Type, Allow for 405, Content-Length,
 * and Connection: close when c->close; then the body unless c->head_only (HEAD gets the
 * headers of GET, Content-Length included). On failure c->broken is set and the caller drops
 * the connection.
 */
static void respond_csp(struct admin_conn *c, int status, const char *ctype, const char *body,
                        size_t len, const char *csp)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    struct http_head h;
    char date[64];
    int rc;

    httphead_init(&h);
    rc = httphead_set_status_line(&h, 1, status, "", 0);
    for (size_t i = 0; rc == 0 && i < sizeof(security_headers) / sizeof(security_headers[0]); i++)
        rc = add_field(&h, security_headers[i].name,
                       i == 0 && csp != NULL ? csp : security_headers[i].value);
    if (rc == 0 && evutil_date_rfc1123(date, sizeof(date), NULL) > 0)
        rc = add_field(&h, "Date", date);
    if (rc == 0)
        rc = add_field(&h, "Content-Type", ctype);
    if (rc == 0 && status == 405)
        rc = add_field(&h, "Allow", "GET, HEAD");
    if (rc == 0)
        rc = http1_write_response_head(out, &h, HTTP1_BODY_LENGTH, len, c->close);
    if (rc == 0 && !c->head_only && len > 0)
        rc = evbuffer_add(out, body, len);
    httphead_reset(&h);
    if (rc != 0)
        c->broken = true;
}

static void respond(struct admin_conn *c, int status, const char *ctype, const char *body,
                    size_t len)
{
    respond_csp(c, status, ctype, body, len, NULL);
}

static void reply_text(struct admin_conn *c, int status, const char *text)
{
    respond(c, status, "text/plain; charset=utf-8", text, strlen(text));
}

/* Sends json (or a 500 when it could not be built) and frees it. */
static void reply_json(struct admin_conn *c, int status, cJSON *json)
{
    char *s = json != NULL ? cJSON_PrintUnformatted(json) : NULL;
    char *line = NULL;
    size_t n;

    if (s == NULL || (line = malloc((n = strlen(s)) + 2)) == NULL) {
        reply_text(c, 500, "internal error\n");
    } else {
        memcpy(line, s, n);
        line[n] = '\n';
        respond(c, status, "application/json", line, n + 1);
    }
    free(line);
    free(s);
    cJSON_Delete(json);
}

/* ---- endpoints ---- */

static void h_healthz(struct admin *ad, struct admin_conn *c)
{
    reply_text(c, 200, "ok\n");
}

static void h_readyz(struct admin *ad, struct admin_conn *c)
{
    if (ad->ops.ready == NULL || ad->ops.ready(ad->ops.arg))
        reply_text(c, 200, "ready\n");
    else
        reply_text(c, 503, "not ready\n");
}

static void h_metrics(struct admin *ad, struct admin_conn *c)
{
    struct metrics_extra extra = {0, 0};
    size_t len = 0;
    char *text;

    if (ad->ops.metrics_extra != NULL)
        ad->ops.metrics_extra(ad->ops.arg, &extra);
    text = metrics_render(&extra, &len);
    if (text == NULL) {
        reply_text(c, 500, "metrics unavailable\n");
        return;
    }
    respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}

static void h_status(struct admin *ad, struct admin_conn *c)
{
    cJSON *obj = cJSON_CreateObject();

    if (obj != NULL && ad->ops.status != NULL)
        ad->ops.status(ad->ops.arg, obj);
    reply_json(c, 200, obj);
}

/* This run's rows of table into *rows, or NULL with why (store off or unreadable). */
static cJSON *page_rows(struct admin *ad, enum audit_table table, const char **why)
{
    char err[512];
    cJSON *rows = NULL;

    if (ad->audit_url == NULL || strcmp(ad->audit_url, "off") == 0) {
        *why = "The audit store is off: refusals are not recorded.";
        return NULL;
    }
    if (audit_query(ad->audit_url, table, ad->run_id, &rows, err, sizeof(err)) != 0) {
        log_eventf(LOG_WARN, "admin_audit_query_failed", "store_read", "%s", err);
        *why = "The audit store cannot be read right now.";
        return NULL;
    }
    return rows;
}

/* The status page: the /v1/status object, the counters and this run's rows, as HTML. */
static void h_page(struct admin *ad, struct admin_conn *c)
{
    struct admin_page_input in;
    cJSON *obj = cJSON_CreateObject(), *blocked = NULL, *routes = NULL;
    char *html = NULL;
    size_t len = 0;

    memset(&in, 0, sizeof(in));
    if (obj != NULL && ad->ops.status != NULL)
        ad->ops.status(ad->ops.arg, obj);
    blocked = page_rows(ad, AUDIT_TABLE_BLOCKED, &in.rows_reason);
    if (blocked != NULL)
        routes = page_rows(ad, AUDIT_TABLE_ROUTES, &in.rows_reason);
    in.status = obj;
    in.blocked = routes != NULL ? blocked : NULL;
    in.routes = routes;
    metrics_totals(&in.totals);
    if (obj != NULL)
        html = admin_page_render(&in, &len);
    if (html == NULL)
        reply_text(c, 500, "internal error\n");
    else
        respond_csp(c, 200, "text/html; charset=utf-8", html, len, PAGE_CSP);
    free(html);
    cJSON_Delete(blocked);
    cJSON_Delete(routes);
    cJSON_Delete(obj);
}

static void h_css(struct admin *ad, struct admin_conn *c)
{
    size_t len;
    const char *css = admin_page_css(&len);

    respond(c, 200, "text/css; charset=utf-8", css, len);
}

static void audit_rows(struct admin *ad, struct admin_conn *c, enum audit_table table)
{
    char err[512];
    cJSON *rows = NULL, *e;

    if (ad->audit_url == NULL || strcmp(ad->audit_url, "off") == 0) {
        reply_json(c, 200, cJSON_CreateArray());
        return;
    }
    if (audit_query(ad->audit_url, table, ad->run_id, &rows, err, sizeof(err)) == 0) {
        reply_json(c, 200, rows);
        return;
    }
    log_eventf(LOG_WARN, "admin_audit_query_failed", "store_read", "%s", err);
    e = cJSON_CreateObject();
    if (e != NULL)
        cJSON_AddStringToObject(e, "error", "audit store unavailable");
    reply_json(c, 503, e);
}

static void h_blocked(struct admin *ad, struct admin_conn *c)
{
    audit_rows(ad, c, AUDIT_TABLE_BLOCKED);
}

static void h_routes(struct admin *ad, struct admin_conn *c)
{
    audit_rows(ad, c, AUDIT_TABLE_ROUTES);
}

static void h_ca(struct admin *ad, struct admin_conn *c)
{
    if (ad->ca_pem == NULL) {
        reply_text(c, 404, "not found\n");
        return;
    }
    respond(c, 200, "application/x-pem-file", ad->ca_pem, ad->ca_pem_len);
}

static const struct {
    const char *path;
    void (*fn)(struct admin *ad, struct admin_conn *c);
} routes[] = {
    {"/", h_page},
    {"/status.css", h_css},
    {"/healthz", h_healthz},
    {"/readyz", h_readyz},
    {"/metrics", h_metrics},
    {"/v1/status", h_status},
    {"/v1/blocked-hosts", h_blocked},
    {"/v1/egress-routes", h_routes},
    {"/ca.pem", h_ca},
};

/*
 * The parts of a target as http1 validated it: origin-form has no authority (*auth NULL) and
 * its path ends at '?' or '#'; absolute-form (http://authority/path?query) has the authority
 * up to the first '/', '?' or '#' after "scheme://", then the path. No percent-decoding.
 */
static void target_split(const char *t, size_t n, const char **auth, size_t *alen,
                         const char **path, size_t *plen)
{
    size_t s = 0, a, e;

    *auth = NULL;
    *alen = 0;
    if (n > 0 && t[0] != '/') {
        const char *sep = memchr(t, ':', n);

        s = a = sep != NULL && (size_t)(sep - t) + 3 <= n ? (size_t)(sep - t) + 3 : n;
        while (s < n && t[s] != '/' && t[s] != '?' && t[s] != '#')
            s++;
        if (sep != NULL) {
            *auth = t + a;
            *alen = s - a;
        }
    }
    for (e = s; e < n && t[e] != '?' && t[e] != '#'; e++)
        ;
    *path = t + s;
    *plen = e - s;
}

/*
 * SPEC §7 against DNS rebinding, on a TCP admin address: Host, and the authority of an
 * absolute-form target, must be localhost or an IP literal (the admin address is one of these). A
 * request without Host (HTTP/1.0; HTTP/1.1 requires it and the parser refuses one without) is
 * served: no browser sends one.
 */
static bool request_host_ok(const struct http_head *h)
{
    const struct http_field *f = httphead_get(h, "Host");
    const char *auth, *path;
    size_t alen, plen;

    target_split(h->target, h->target_len, &auth, &alen, &path, &plen);
    if (auth != NULL && !admin_host_allowed(auth, alen))
        return false;
    return f == NULL || admin_host_allowed(f->value, f->value_len);
}

static void route(struct admin_conn *c, const struct http_head *h)
{
    const char *auth, *path;
    size_t alen, plen;

    target_split(h->target, h->target_len, &auth, &alen, &path, &plen);
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (strlen(routes[i].path) == plen && memcmp(routes[i].path, path, plen) == 0) {
            routes[i].fn(c->ad, c);
            return;
        }
    }
    reply_text(c, 404, "not found\n");
}

/* ---- what a request gets ---- */

void admin_answer_too_large(struct admin_conn *c)
{
    c->close = true;
    reply_text(c, 431, "request header fields too large\n");
}

/* 405 for a method the parser does not allow or know, else the parser's own status. */
void admin_answer_parse_error(struct admin_conn *c, int status)
{
    c->close = true;
    c->head_only = false;
    if (status == 405 || status == 501)
        reply_text(c, 405, "method not allowed\n");
    else if (status == 431)
        admin_answer_too_large(c);
    else
        reply_text(c, 400, "bad request\n");
}

/*
 * A foreign Host is 421 and closes, whatever the method. Only GET and HEAD are served, and admin
 * requests have no body: a method other than GET/HEAD is 405 (with a body announced, it is not
 * read and the connection closes); GET/HEAD announcing a body is 400, and closes.
 */
void admin_answer(struct admin_conn *c, const struct http1_msg *m)
{
    const char *method = m->head.method;
    bool get = strcmp(method, "GET") == 0, head = strcmp(method, "HEAD") == 0;
    bool body =
        m->body == HTTP1_BODY_CHUNKED || (m->body == HTTP1_BODY_LENGTH && m->content_length > 0);

    c->close = !m->keep_alive || m->head.version_minor == 0 || m->upgrade || body;
    c->head_only = head;
    /* a unix socket serves any Host (SPEC §7): no web page can reach one */
    if (!c->ad->is_unix && !request_host_ok(&m->head)) {
        c->close = true;
        reply_text(c, 421,
                   "misdirected request: the admin API answers Host localhost or an IP "
                   "address\n");
    } else if (!get && !head)
        reply_text(c, 405, "method not allowed\n");
    else if (body)
        reply_text(c, 400, "request body not accepted\n");
    else
        route(c, &m->head);
}
