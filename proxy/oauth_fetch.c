/*
 * oauth_fetch.c - one request to a token endpoint (RFC 6749 §4.4 client_credentials, §6
 * refresh_token; client authentication §2.3.1): the connection through upstream.c (resolver,
 * address rules, TLS verification, --upstream-proxy), the form-encoded POST, the answer parsed
 * (at most VG_OAUTH_ANSWER_MAX bytes of body), all within the manager's fetch timeout.
 *
 * Guarantees: runs on the manager's thread only; the request (which carries the client secret
 * and the refresh token) is built in a block that is wiped when libevent lets go of it; the
 * answer is copied out of libevent's buffers, which are wiped before they are drained, and
 * OpenSSL's read buffers are cleansed too (SSL_OP_CLEANSE_PLAINTEXT); the JSON tree is wiped
 * before it is freed; failure details hold an HTTP status and the OAuth error code at most,
 * never a value.
 */
#include "proxy/oauth_int.h"
#include "common/pct.h"
#include "common/secmem.h"
#include "common/wbuf.h"
#include "proxy/bevio.h"
#include "http/http1.h"
#include "proxy/metrics.h"
#include "proxy/upstream.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#define OAUTH_DEFAULT_LIFETIME 3600
#define OAUTH_MAX_LIFETIME     (366 * 24 * 3600)

struct oauth_fetch {
    struct oauth_src *s;
    struct upstream_req *ureq;
    struct bufferevent *bev;
    struct http1_parser *parser;
    struct event *deadline;
    struct timespec t0;
    char *req; /* the request until it is handed to the bufferevent */
    size_t req_len, req_cap;
    char *body; /* the answer's body, secmem, VG_OAUTH_ANSWER_MAX + 1 */
    size_t blen;
    int status;
    bool done;
    bool route_tunnel;
    bool connected;
};

/* ---- the request ------------------------------------------------------------------------ */

static void form_param(struct wbuf *b, const char *name, const char *v, size_t n)
{
    if (b->len > 0)
        wbuf_add(b, "&", 1);
    wbuf_str(b, name);
    wbuf_add(b, "=", 1);
    wbuf_pct_encode(b, v, n, PCT_SPACE_PLUS);
}

/* The form body of the grant (o->lock held: it reads the current refresh token). */
static void form_body(struct wbuf *b, const struct oauth_src *s, bool basic)
{
    form_param(b, "grant_type", s->refresh_grant ? "refresh_token" : "client_credentials",
               s->refresh_grant ? 13 : 18);
    if (s->refresh_grant)
        form_param(b, "refresh_token", s->rt, s->rt_len);
    if (s->scope != NULL)
        form_param(b, "scope", s->scope, strlen(s->scope));
    if (s->audience != NULL)
        form_param(b, "audience", s->audience, strlen(s->audience));
    if (!basic) {
        /* client_auth post, or a public client (no secret): the id goes in the body */
        form_param(b, "client_id", s->client_id, strlen(s->client_id));
        if (s->client_secret != NULL)
            form_param(b, "client_secret", s->client_secret, s->cs_len);
    }
}

/* Authorization: Basic base64(form(client_id) ":" form(client_secret)) (RFC 6749 §2.3.1). */
static void basic_auth(struct wbuf *b, const struct oauth_src *s)
{
    struct wbuf plain = {0};
    char *b64;
    size_t cap;

    wbuf_pct_encode(&plain, s->client_id, strlen(s->client_id), PCT_SPACE_PLUS);
    wbuf_add(&plain, ":", 1);
    wbuf_pct_encode(&plain, s->client_secret, s->cs_len, PCT_SPACE_PLUS);
    if (plain.fail) {
        b->fail = true;
        wbuf_free(&plain);
        return;
    }
    cap = 4 * ((plain.len + 2) / 3) + 1;
    if ((b64 = malloc(cap)) == NULL) {
        b->fail = true;
    } else {
        int n = EVP_EncodeBlock((unsigned char *)b64, (unsigned char *)plain.p, (int)plain.len);

        wbuf_str(b, "Authorization: Basic ");
        wbuf_add(b, b64, (size_t)n);
        wbuf_str(b, "\r\n");
        secmem_free(&b64, cap);
    }
    wbuf_free(&plain);
}

/* The whole request into f->req (o->lock held). 0 or -1. */
static int build_request(struct oauth_fetch *f)
{
    const struct oauth_src *s = f->s;
    bool basic = !s->auth_post && s->client_secret != NULL;
    struct wbuf body = {0}, req = {0};
    char line[64];

    form_body(&body, s, basic);
    wbuf_str(&req, "POST ");
    wbuf_str(&req, s->target);
    wbuf_str(&req, " HTTP/1.1\r\nHost: ");
    if (strchr(s->host, ':') != NULL) {
        wbuf_str(&req, "[");
        wbuf_str(&req, s->host);
        wbuf_str(&req, "]");
    } else {
        wbuf_str(&req, s->host);
    }
    if (s->port != 443) {
        snprintf(line, sizeof(line), ":%d", s->port);
        wbuf_str(&req, line);
    }
    wbuf_str(&req, "\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                   "Accept: application/json\r\nUser-Agent: vaultgate/" VAULTGATE_VERSION "\r\n"
                   "Connection: close\r\n");
    if (basic)
        basic_auth(&req, s);
    snprintf(line, sizeof(line), "Content-Length: %zu\r\n\r\n", body.len);
    wbuf_str(&req, line);
    wbuf_add(&req, body.p != NULL ? body.p : "", body.len);
    wbuf_free(&body);
    if (req.fail || body.fail) {
        wbuf_free(&req);
        return -1;
    }
    f->req = req.p;
    f->req_len = req.len;
    f->req_cap = req.cap; /* the whole block is wiped */
    return 0;
}

/* ---- the end of a fetch ----------------------------------------------------------------- */

static double since(const struct timespec *t0)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

/* Frees f's resources (the manager's thread). */
static void fetch_free(struct oauth_fetch *f)
{
    if (f->ureq != NULL)
        upstream_cancel(&f->ureq);
    if (f->bev != NULL) {
        bufferevent_setcb(f->bev, NULL, NULL, NULL, NULL);
        bufferevent_free(f->bev);
    }
    http1_parser_free(&f->parser);
    if (f->deadline != NULL)
        event_free(f->deadline);
    secmem_free(&f->req, f->req_cap);
    secmem_free(&f->body, VG_OAUTH_ANSWER_MAX + 1);
    free(f);
}

void oauth_fetch_cancel(struct oauth_fetch **fp)
{
    if (fp == NULL || *fp == NULL)
        return;
    fetch_free(*fp);
    *fp = NULL;
}

/* Ends the fetch with r: the source learns it, f goes. */
static void fetch_end(struct oauth_fetch *f, struct oauth_result *r)
{
    struct oauth_src *s = f->s;

    r->reached = f->connected;
    r->route_tunnel = f->route_tunnel;
    r->seconds = since(&f->t0);
    r->started_ms = (int64_t)f->t0.tv_sec * 1000 + f->t0.tv_nsec / 1000000;
    if (r->status == 0)
        r->status = f->status;
    pthread_mutex_lock(&s->o->lock);
    s->f = NULL;
    pthread_mutex_unlock(&s->o->lock);
    fetch_free(f);
    oauth_fetched(s, r);
}

static void fetch_fail(struct oauth_fetch *f, const char *reason, int kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void fetch_fail(struct oauth_fetch *f, const char *reason, int kind, const char *fmt, ...)
{
    struct oauth_result r = {0};
    va_list ap;

    r.reason = reason;
    r.upstream_err_kind = kind >= 0 ? kind + 1 : 0;
    va_start(ap, fmt);
    vsnprintf(r.detail, sizeof(r.detail), fmt, ap);
    va_end(ap);
    fetch_end(f, &r);
}

/* ---- the answer ------------------------------------------------------------------------- */

/*
 * 1 when the answer holds a NUL: a raw 0x00 byte, or a \u0000 escape inside a JSON string
 * ("tok\u0000X-Injected: x"). cJSON decodes the escape into its NUL-terminated valuestring, so
 * every later strlen() would see "tok" - a token cut short, injected as if whole. Such an answer
 * is refused before it is parsed, so no tree ever holds a string longer than its strlen()
 * (which wipe_tree relies on). body is JSON text: a backslash inside a string escapes the byte
 * after it, so "\\u0000" (an escaped backslash, then "u0000") is not a NUL.
 */
static bool answer_has_nul(const char *body, size_t n)
{
    bool in_str = false;

    if (memchr(body, '\0', n) != NULL)
        return true;
    for (size_t i = 0; i < n; i++) {
        if (!in_str) {
            in_str = body[i] == '"';
        } else if (body[i] == '"') {
            in_str = false;
        } else if (body[i] == '\\') {
            if (i + 5 < n && body[i + 1] == 'u' && memcmp(body + i + 2, "0000", 4) == 0)
                return true;
            i++; /* the escaped byte ('"', '\\', 'u', ...): not the string's end */
        }
    }
    return false;
}

/* A token as vaultgate would accept a secret: 1..VG_SECRET_MAX_BYTES of visible ASCII (no
 * control character, no DEL, nothing over 0x7E). */
static bool token_ok(const char *s)
{
    size_t n = strlen(s);

    if (n < 1 || n > VG_SECRET_MAX_BYTES)
        return false;
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e)
            return false;
    }
    return true;
}

/* expires_in: a number, or a string of digits (some endpoints send one); absent: 3600. */
static int lifetime(const cJSON *e, int64_t *out)
{
    double v;

    if (e == NULL) {
        *out = OAUTH_DEFAULT_LIFETIME;
        return 0;
    }
    if (cJSON_IsString(e) && e->valuestring[0] != '\0' &&
        strspn(e->valuestring, "0123456789") == strlen(e->valuestring) &&
        strlen(e->valuestring) < 12)
        v = (double)strtoll(e->valuestring, NULL, 10);
    else if (cJSON_IsNumber(e))
        v = e->valuedouble;
    else
        return -1;
    if (!(v >= 1))
        return -1;
    *out = v > OAUTH_MAX_LIFETIME ? OAUTH_MAX_LIFETIME : (int64_t)v;
    return 0;
}

/* cJSON does not wipe: the tree holds the token. */
static void wipe_tree(cJSON *item)
{
    for (; item != NULL; item = item->next) {
        if (item->valuestring != NULL)
            OPENSSL_cleanse(item->valuestring, strlen(item->valuestring));
        wipe_tree(item->child);
    }
}

/* The OAuth error code of an error answer, when it is a plain code (RFC 6749 §5.2), into
 * code (size 65), else "". */
static void error_code(const cJSON *root, char code[65])
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");

    code[0] = '\0';
    if (cJSON_IsString(e) && strlen(e->valuestring) <= 64 &&
        strspn(e->valuestring,
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
            strlen(e->valuestring))
        snprintf(code, 65, "%s", e->valuestring);
}

/* Reads the whole answer: a token, or why not. */
static void fetch_answer(struct oauth_fetch *f)
{
    struct oauth_result r = {0};
    const char *body = f->body != NULL ? f->body : "";
    bool nul = answer_has_nul(body, f->blen);
    cJSON *root = nul ? NULL : cJSON_ParseWithLength(body, f->blen);
    const cJSON *at, *tt, *rt;
    char code[65] = "";

    r.status = f->status;
    if (root != NULL)
        error_code(root, code);
    if (f->status != 200) {
        r.reason = "oauth_http_error";
        snprintf(r.detail, sizeof(r.detail), "HTTP %d%s%s", f->status, code[0] ? ", error " : "",
                 code);
        goto out;
    }
    if (nul) {
        /* a token, token type or refresh token cut short at the NUL must not pass as whole */
        r.reason = "oauth_bad_answer";
        snprintf(r.detail, sizeof(r.detail), "a NUL in the answer");
        goto out;
    }
    at = cJSON_GetObjectItemCaseSensitive(root, "access_token");
    tt = cJSON_GetObjectItemCaseSensitive(root, "token_type");
    rt = cJSON_GetObjectItemCaseSensitive(root, "refresh_token");
    r.reason = "oauth_bad_answer";
    if (!cJSON_IsObject(root)) {
        snprintf(r.detail, sizeof(r.detail), "the answer is not a JSON object");
    } else if (!cJSON_IsString(at) || !token_ok(at->valuestring)) {
        snprintf(r.detail, sizeof(r.detail), "no usable access_token");
    } else if (!cJSON_IsString(tt) || strcasecmp(tt->valuestring, "bearer") != 0) {
        snprintf(r.detail, sizeof(r.detail), "token_type is not Bearer");
    } else if (lifetime(cJSON_GetObjectItemCaseSensitive(root, "expires_in"), &r.expires_in) < 0) {
        snprintf(r.detail, sizeof(r.detail), "expires_in is not a positive number");
    } else if (rt != NULL && (!cJSON_IsString(rt) || !token_ok(rt->valuestring))) {
        snprintf(r.detail, sizeof(r.detail), "unusable refresh_token");
    } else {
        r.token_len = strlen(at->valuestring);
        r.token = secmem_dup(at->valuestring, r.token_len);
        if (rt != NULL) {
            r.refresh_len = strlen(rt->valuestring);
            r.refresh = secmem_dup(rt->valuestring, r.refresh_len);
        }
        r.ok = r.token != NULL && (rt == NULL || r.refresh != NULL);
        r.reason = r.ok ? NULL : "oom";
    }
out:
    wipe_tree(root);
    cJSON_Delete(root);
    if (!r.ok) {
        secmem_free(&r.token, r.token_len + 1);
        secmem_free(&r.refresh, r.refresh_len + 1);
        r.upstream_err_kind = METRICS_UE_PROTOCOL + 1;
    }
    fetch_end(f, &r);
}

static int resp_head(void *arg, struct http1_msg *msg)
{
    struct oauth_fetch *f = arg;

    if (msg->head.status >= 200)
        f->status = msg->head.status;
    return 0;
}

static int resp_body(void *arg, const char *data, size_t len)
{
    struct oauth_fetch *f = arg;

    if (f->blen + len > VG_OAUTH_ANSWER_MAX)
        return -1;
    memcpy(f->body + f->blen, data, len);
    f->blen += len;
    return 0;
}

static int resp_done(void *arg)
{
    struct oauth_fetch *f = arg;

    if (f->status >= 200)
        f->done = true;
    return f->done ? 1 : 0;
}

static const struct http1_callbacks resp_cbs = {resp_head, resp_body, resp_done, NULL};

/* ---- the connection --------------------------------------------------------------------- */

static void read_cb(struct bufferevent *bev, void *arg)
{
    struct oauth_fetch *f = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    bevio_pull(bev);
    while (!f->done) {
        struct evbuffer_iovec v;
        ssize_t r;

        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
            return;
        r = http1_feed(f->parser, v.iov_base, v.iov_len);
        /* the chain held part of the answer: wiped before libevent reuses or frees it */
        OPENSSL_cleanse(v.iov_base, v.iov_len);
        evbuffer_drain(in, v.iov_len);
        if (r < 0) {
            fetch_fail(f, "oauth_bad_answer", METRICS_UE_PROTOCOL,
                       f->blen >= VG_OAUTH_ANSWER_MAX ? "answer over 64 KiB"
                                                      : "malformed HTTP answer");
            return;
        }
    }
    fetch_answer(f);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct oauth_fetch *f = arg;

    (void)bev;
    if ((what & BEV_EVENT_EOF) && !f->done && http1_feed_eof(f->parser) == 0 && f->done) {
        fetch_answer(f);
        return;
    }
    if (f->done) {
        fetch_answer(f);
        return;
    }
    fetch_fail(f, "oauth_connection", METRICS_UE_PROTOCOL, "%s",
               (what & BEV_EVENT_EOF) ? "the endpoint closed before its answer ended"
                                      : "connection error");
}

static void deadline_cb(evutil_socket_t fd, short what, void *arg)
{
    struct oauth_fetch *f = arg;

    (void)fd;
    (void)what;
    fetch_fail(f, "oauth_timeout", METRICS_UE_TIMEOUT, "no answer within %d s",
               f->s->o->fetch_timeout);
}

/* evbuffer_add_reference cleanup of the request: wiped (all of its block), freed. */
static void oauth_req_release(const void *data, size_t len, void *extra)
{
    (void)len;
    OPENSSL_cleanse((void *)data, (size_t)(uintptr_t)extra);
    free((void *)data);
}

/* upstream_get's callback: a verified TLS connection to the endpoint (or why not). */
static void connected_cb(void *arg, struct cio *io, enum upstream_err err, unsigned how)
{
    struct oauth_fetch *f = arg;
    struct bufferevent *bev;
    SSL *ssl;

    f->ureq = NULL;
    if (io == NULL) {
        fetch_fail(f, "oauth_connect", (int)metrics_upstream_kind(err), "%s",
                   upstream_err_type(err));
        return;
    }
    if ((ssl = cio_ssl(io)) != NULL)
        SSL_set_options(ssl, SSL_OP_CLEANSE_PLAINTEXT | SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* a bufferevent (dirty shutdown allowed) with deferred callbacks, as before */
    bev = cio_to_bufferevent(&io, BEV_OPT_DEFER_CALLBACKS);
    if (bev == NULL) {
        fetch_fail(f, "oom", -1, "%s", "out of memory");
        return;
    }
    f->bev = bev;
    f->connected = true;
    f->route_tunnel = (how & UPSTREAM_VIA_TUNNEL) != 0;
    bufferevent_setcb(bev, read_cb, NULL, event_cb, f);
    f->parser = http1_parser_new(HTTP1_RESPONSE, &resp_cbs, f);
    if (f->parser == NULL) {
        fetch_fail(f, "oom", -1, "%s", "out of memory");
        return;
    }
    http1_parser_set_request_method(f->parser, "POST");
    /* the request carries the client secret or the refresh token: by reference, wiped */
    if (evbuffer_add_reference(bufferevent_get_output(bev), f->req, f->req_len, oauth_req_release,
                               (void *)(uintptr_t)f->req_cap) < 0) {
        fetch_fail(f, "oom", -1, "%s", "out of memory");
        return;
    }
    f->req = NULL;
    bufferevent_enable(bev, EV_READ | EV_WRITE);
}

int oauth_fetch_start(struct oauth_src *s)
{
    struct oauth_fetch *f = calloc(1, sizeof(*f));
    struct timeval tv = {s->o->fetch_timeout, 0};

    if (f == NULL)
        return -1;
    f->s = s;
    clock_gettime(CLOCK_MONOTONIC, &f->t0);
    if (build_request(f) < 0 || (f->body = malloc(VG_OAUTH_ANSWER_MAX + 1)) == NULL ||
        (f->deadline = evtimer_new(s->o->base, deadline_cb, f)) == NULL)
        goto fail;
    f->ureq = upstream_get(s->o->up, s->host, s->port, UPSTREAM_TLS, false, connected_cb, f);
    if (f->ureq == NULL)
        goto fail;
    evtimer_add(f->deadline, &tv);
    s->f = f;
    return 0;
fail:
    fetch_free(f);
    return -1;
}
