/*
 * admin.c - the admin API (SPEC §7): a small HTTP/1.1 responder of our own on its own thread
 * and event_base.
 *
 * Guarantees: nothing here runs on a worker, so a slow store query or a large /metrics render
 * never stalls traffic. Every answer is built here - to requests that cannot be parsed as well -
 * and carries the five security headers (Cache-Control: no-store among them): requests go
 * through vaultgate's strict parser (http1.h); a head over VG_ADMIN_MAX_HEAD_BYTES is 431, any
 * parse error 400, and both close the connection; any method other than GET and HEAD, known to
 * the parser or not, is 405 with `Allow: GET, HEAD`; an unknown path is 404. A request whose
 * Host (or absolute-form authority) is not localhost or an IP literal, with or without a port,
 * is 421 and closes: a web page that rebinds its own name to the admin address cannot read the
 * API through the visitor's browser. Routing looks at the
 * path alone, so a query string never changes the answer, and nothing about a request (path,
 * query, header) is ever logged. Admin requests have no body: one that announces a body is not
 * read (GET/HEAD: 400) and the connection closes after the answer. Keep-alive as HTTP/1.1 says
 * (HTTP/1.0 always closes); one request at a time, so a connection buffers at most one head and
 * one answer. A head must arrive within ADMIN_IDLE_S; at most VG_ADMIN_MAX_CONNS connections, and
 * a new one is never refused for that: the connection that has waited longest for a request
 * head is closed to make room, so idle connections cannot lock out /healthz and /readyz. A
 * unix socket is created mode 0660 and unlinked on stop only if it is still ours.
 */
#include "proxy/admin.h"
#include "audit/audit.h"
#include "audit/log.h"
#include "common/caps.h"
#include "policy/httphead.h"
#include "proxy/http1.h"
#include "proxy/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#define ADMIN_BACKLOG        64
#define ADMIN_IDLE_S         30 /* a request head must arrive within this, from connect or answer */
#define ADMIN_WRITE_S        30 /* the client must take an answer within this */
#define ADMIN_LINGER_S       2  /* after an answer that closes, input is discarded this long... */
#define ADMIN_LINGER_MAX     (64 * 1024) /* ...or up to this many bytes */
#define ADMIN_ACCEPT_RETRY_S 1           /* pause after accept() fails (EMFILE) */

struct admin_addr {
    bool is_unix;
    bool loopback;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    struct sockaddr_storage ss;
    socklen_t sslen;
};

struct admin_conn;

struct admin {
    struct event_base *base;
    struct evconnlistener *lev;
    struct event *retry_ev;
    struct event *stop_ev;
    int stop_pipe[2];
    pthread_t thread;
    bool running;
    bool accept_paused;
    struct admin_conn *conns; /* every open connection, for admin_stop */
    unsigned nconns;
    uint64_t seq; /* orders the connections' state changes, for eviction at the cap */
    struct admin_ops ops;
    char *ca_pem;
    size_t ca_pem_len;
    char *audit_url;
    char *run_id;
    bool is_unix;
    char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    dev_t unix_dev;
    ino_t unix_ino;
    char address[160];
};

enum admin_conn_state {
    AC_HEAD = 0, /* reading a request head */
    AC_WRITE,    /* an answer is being written; input is not read meanwhile */
    AC_LINGER,   /* answered, write side shut: input is read and discarded until EOF */
};

/* One accepted connection; lives on the admin thread, in ad->conns. */
struct admin_conn {
    struct admin *ad;
    struct admin_conn *prev, *next;
    struct bufferevent *bev; /* owns the socket */
    struct http1_parser *parser;
    struct event *timer; /* head deadline, write deadline, or end of lingering */
    enum admin_conn_state state;
    uint64_t since;              /* ad->seq when the current state began */
    const struct http1_msg *msg; /* from admin_conn_on_head until the request is answered */
    size_t head_bytes;           /* fed to the parser towards the current head */
    size_t lingered;             /* discarded while lingering */
    bool head_only;              /* answering HEAD: no body */
    bool close;                  /* close once the answer is written */
    bool broken;                 /* the answer could not be queued: drop the connection */
};

static void admin_listener_update(struct admin *ad);

/* ---- address parsing ---- */

/* n bytes of decimal 0..65535 without sign, spaces or leading zeros. */
static int parse_port(const char *s, size_t n, unsigned *out)
{
    unsigned v = 0;

    if (n == 0 || n > 5 || (s[0] == '0' && n > 1))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (v > 65535)
        return -1;
    *out = v;
    return 0;
}

/*
 * Splits n bytes of "host[:port]" or "[v6][:port]" into host (brackets removed, NUL-terminated,
 * *v6 set for the bracketed form) and the text after ':' (*port NULL when there is none).
 * -1 when the form is wrong or host is empty or does not fit.
 */
static int split_host_port(const char *s, size_t n, char *host, size_t hostsz, bool *v6,
                           const char **port, size_t *portlen)
{
    const char *end = s + n, *hend, *rest;
    size_t hl;

    *v6 = n > 0 && s[0] == '[';
    if (*v6) {
        if ((hend = memchr(s, ']', n)) == NULL)
            return -1;
        rest = hend + 1;
        s++;
    } else {
        hend = memchr(s, ':', n);
        rest = hend = hend != NULL ? hend : end;
    }
    hl = (size_t)(hend - s);
    if (hl == 0 || hl >= hostsz)
        return -1;
    memcpy(host, s, hl);
    host[hl] = '\0';
    *port = NULL;
    *portlen = 0;
    if (rest == end)
        return 0;
    if (*rest != ':')
        return -1;
    *port = rest + 1;
    *portlen = (size_t)(end - rest - 1);
    return 0;
}

/* addr for error messages: bounded, control bytes replaced. */
static const char *shown(const char *addr, char *buf, size_t sz)
{
    size_t n = 0;

    for (; addr[n] != '\0' && n < sz - 1 && n < 80; n++)
        buf[n] = ((unsigned char)addr[n] < 0x20 || addr[n] == 0x7f) ? '?' : addr[n];
    buf[n] = '\0';
    return buf;
}

static int parse_unix(const char *addr, struct admin_addr *out, char *err, size_t errlen)
{
    const char *path = addr + 5;
    char b[96];

    if (path[0] != '/')
        goto bad;
    if (strlen(path) >= sizeof(out->path)) {
        snprintf(err, errlen, "--admin '%s': socket path longer than %zu bytes",
                 shown(addr, b, sizeof(b)), sizeof(out->path) - 1);
        return -1;
    }
    out->is_unix = true;
    out->loopback = true;
    snprintf(out->path, sizeof(out->path), "%s", path);
    return 0;
bad:
    snprintf(err, errlen, "--admin '%s': expected unix:/absolute/path", shown(addr, b, sizeof(b)));
    return -1;
}

static int parse_inet(const char *addr, bool allow_port0, struct admin_addr *out, char *err,
                      size_t errlen)
{
    char host[64], b[96];
    const char *port_s;
    size_t port_len;
    unsigned port;
    bool v6;

    /* a port is required; "::1:9090" is refused as ambiguous (the host before ':' is empty) */
    if (split_host_port(addr, strlen(addr), host, sizeof(host), &v6, &port_s, &port_len) < 0 ||
        port_s == NULL)
        goto bad;
    if (parse_port(port_s, port_len, &port) < 0 || (port == 0 && !allow_port0)) {
        snprintf(err, errlen, "--admin '%s': port must be 1-65535", shown(addr, b, sizeof(b)));
        return -1;
    }
    memset(out, 0, sizeof(*out));
    if (v6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&out->ss;

        if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
            goto bad;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        out->sslen = sizeof(*s6);
        out->loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) ||
                        (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && s6->sin6_addr.s6_addr[12] == 127);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&out->ss;

        if (strcmp(host, "localhost") == 0)
            snprintf(host, sizeof(host), "127.0.0.1");
        if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
            goto bad;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        out->sslen = sizeof(*s4);
        out->loopback = (ntohl(s4->sin_addr.s_addr) >> 24) == 127;
    }
    return 0;
bad:
    snprintf(err, errlen,
             "--admin '%s': expected IPv4:PORT, [IPv6]:PORT, localhost:PORT or unix:/path",
             shown(addr, b, sizeof(b)));
    return -1;
}

static int addr_parse(const char *addr, bool allow_port0, struct admin_addr *out, char *err,
                      size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (addr == NULL || addr[0] == '\0') {
        snprintf(err, errlen, "--admin: empty address");
        return -1;
    }
    if (strncmp(addr, "unix:", 5) == 0)
        return parse_unix(addr, out, err, errlen);
    return parse_inet(addr, allow_port0, out, err, errlen);
}

int admin_addr_check(const char *addr, bool allow_remote, char *err, size_t errlen)
{
    struct admin_addr a;
    char b[96];

    if (addr_parse(addr, false, &a, err, errlen) < 0)
        return -1;
    if (!a.loopback && !allow_remote) {
        snprintf(err, errlen,
                 "--admin '%s': not a loopback address (pass --admin-allow-remote to allow it)",
                 shown(addr, b, sizeof(b)));
        return -1;
    }
    return 0;
}

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

/*
 * Queues an answer: status line, the security headers, Date, Content-Type, Allow for 405,
 * Content-Length, and Connection: close when c->close; then the body unless c->head_only (HEAD
 * gets the headers of GET, Content-Length included). On failure c->broken is set and the
 * caller drops the connection.
 */
static void respond(struct admin_conn *c, int status, const char *ctype, const char *body,
                    size_t len)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    struct http_head h;
    char date[64];
    int rc;

    httphead_init(&h);
    rc = httphead_set_status_line(&h, 1, status, "", 0);
    for (size_t i = 0; rc == 0 && i < sizeof(security_headers) / sizeof(security_headers[0]); i++)
        rc = add_field(&h, security_headers[i].name, security_headers[i].value);
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

/* "host[:port]" where host is localhost (any case) or an IP literal ("[v6]" for IPv6). */
static bool host_allowed(const char *v, size_t n)
{
    char host[INET6_ADDRSTRLEN];
    unsigned char bin[sizeof(struct in6_addr)];
    const char *port;
    size_t port_len;
    unsigned p;
    bool v6;

    if (split_host_port(v, n, host, sizeof(host), &v6, &port, &port_len) < 0)
        return false;
    if (port != NULL && parse_port(port, port_len, &p) < 0)
        return false;
    if (v6)
        return inet_pton(AF_INET6, host, bin) == 1;
    return strcasecmp(host, "localhost") == 0 || inet_pton(AF_INET, host, bin) == 1;
}

/*
 * SPEC §7 against DNS rebinding: Host, and the authority of an absolute-form target, must be
 * localhost or an IP literal (the admin address is one of these). A request without Host
 * (HTTP/1.0; HTTP/1.1 requires it and the parser refuses one without) is served: no browser
 * sends one.
 */
static bool request_host_ok(const struct http_head *h)
{
    const struct http_field *f = httphead_get(h, "Host");
    const char *auth, *path;
    size_t alen, plen;

    target_split(h->target, h->target_len, &auth, &alen, &path, &plen);
    if (auth != NULL && !host_allowed(auth, alen))
        return false;
    return f == NULL || host_allowed(f->value, f->value_len);
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

/* ---- connections ---- */

/* Accepts unless pausing after an accept error (at the cap, on_accept makes room). */
static void admin_listener_update(struct admin *ad)
{
    if (ad->lev == NULL)
        return;
    if (!ad->accept_paused)
        evconnlistener_enable(ad->lev);
    else
        evconnlistener_disable(ad->lev);
}

static void admin_conn_free(struct admin_conn **cp)
{
    struct admin_conn *c = *cp;
    struct admin *ad;

    if (c == NULL)
        return;
    ad = c->ad;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        ad->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    ad->nconns--;
    if (c->bev != NULL)
        bufferevent_free(c->bev); /* closes the socket */
    http1_parser_free(&c->parser);
    if (c->timer != NULL)
        event_free(c->timer);
    free(c);
    *cp = NULL;
    admin_listener_update(ad);
}

static void admin_conn_arm(struct admin_conn *c, int seconds)
{
    struct timeval tv = {seconds, 0};

    evtimer_add(c->timer, &tv);
}

static void admin_conn_set_state(struct admin_conn *c, enum admin_conn_state state)
{
    c->state = state;
    c->since = ++c->ad->seq;
}

/* Ready for the next request head; the deadline for it starts now. */
static void admin_conn_await_head(struct admin_conn *c)
{
    admin_conn_set_state(c, AC_HEAD);
    c->head_bytes = 0;
    c->head_only = false;
    admin_conn_arm(c, ADMIN_IDLE_S);
    bufferevent_enable(c->bev, EV_READ);
}

/* An answer is queued: nothing more is read until it has been written (one at a time). */
static void admin_conn_start_write(struct admin_conn *c)
{
    admin_conn_set_state(c, AC_WRITE);
    bufferevent_disable(c->bev, EV_READ);
    admin_conn_arm(c, ADMIN_WRITE_S);
}

/*
 * After an answer that closes: shut the write side and read and discard what the client still
 * sends, so that closing with unread input does not reset the connection before the client has
 * read the answer. Ends at EOF, after ADMIN_LINGER_S or ADMIN_LINGER_MAX bytes.
 */
static void admin_conn_linger(struct admin_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);

    admin_conn_set_state(c, AC_LINGER);
    c->lingered = evbuffer_get_length(in);
    evbuffer_drain(in, c->lingered);
    shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    admin_conn_arm(c, ADMIN_LINGER_S);
    bufferevent_enable(c->bev, EV_READ);
}

/* A request the parser refused: 405 for a method it does not allow or know, else its status. */
static void admin_answer_parse_error(struct admin_conn *c)
{
    int status = http1_error(c->parser, NULL);

    c->close = true;
    c->head_only = false;
    if (status == 405 || status == 501)
        reply_text(c, 405, "method not allowed\n");
    else if (status == 431)
        reply_text(c, 431, "request header fields too large\n");
    else
        reply_text(c, 400, "bad request\n");
}

/*
 * A complete, valid head (paused in admin_conn_on_head). A foreign Host is 421 and closes, whatever
 * the method. Only GET and HEAD are served, and admin requests have no body: a method other than
 * GET/HEAD is 405 (with a body announced, it is not read and
 * the connection closes); GET/HEAD announcing a body is 400, and closes.
 */
static void admin_answer_request(struct admin_conn *c)
{
    const struct http1_msg *m = c->msg;
    const char *method = m->head.method;
    bool get = strcmp(method, "GET") == 0, head = strcmp(method, "HEAD") == 0;
    bool body =
        m->body == HTTP1_BODY_CHUNKED || (m->body == HTTP1_BODY_LENGTH && m->content_length > 0);

    c->close = !m->keep_alive || m->head.version_minor == 0 || m->upgrade || body;
    c->head_only = head;
    if (!request_host_ok(&m->head)) {
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
    c->msg = NULL;
    if (!c->close) {
        /* completes the message (it has no body) and frees its head */
        if (http1_feed(c->parser, "", 0) < 0)
            c->close = true;
        http1_parser_reset(c->parser);
    }
}

static int admin_conn_on_head(void *arg, struct http1_msg *msg)
{
    struct admin_conn *c = arg;

    c->msg = msg;
    return 1; /* pause: answered before anything after the head is parsed */
}

static const struct http1_callbacks parser_cb = {.on_head = admin_conn_on_head};

/*
 * Feeds buffered input to the parser, at most up to VG_ADMIN_MAX_HEAD_BYTES for one head, and
 * answers when a head is complete, invalid or over the cap. Called from the top of a callback
 * only: it may free the connection.
 */
static void admin_conn_read_head(struct admin_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t n = evbuffer_get_length(in), room = VG_ADMIN_MAX_HEAD_BYTES - c->head_bytes;
    ssize_t used = 0;

    if (n > room)
        n = room;
    if (n > 0) {
        const char *data = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);

        if (data == NULL) {
            admin_conn_free(&c);
            return;
        }
        used = http1_feed(c->parser, data, n);
        if (used < 0) {
            admin_answer_parse_error(c);
            goto answered;
        }
        evbuffer_drain(in, (size_t)used);
        c->head_bytes += (size_t)used;
    }
    if (c->msg != NULL) {
        admin_answer_request(c);
        goto answered;
    }
    if (c->head_bytes >= VG_ADMIN_MAX_HEAD_BYTES) {
        c->close = true;
        reply_text(c, 431, "request header fields too large\n");
        goto answered;
    }
    return; /* more input needed */
answered:
    if (c->broken)
        admin_conn_free(&c);
    else
        admin_conn_start_write(c);
}

static void admin_conn_on_read(struct bufferevent *bev, void *arg)
{
    struct admin_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    if (c->state == AC_HEAD) {
        admin_conn_read_head(c);
    } else if (c->state == AC_LINGER) {
        c->lingered += evbuffer_get_length(in);
        evbuffer_drain(in, evbuffer_get_length(in));
        if (c->lingered > ADMIN_LINGER_MAX)
            admin_conn_free(&c);
    }
}

/* The output has drained: the answer is written. */
static void admin_conn_on_write(struct bufferevent *bev, void *arg)
{
    struct admin_conn *c = arg;

    if (c->state != AC_WRITE)
        return;
    if (c->close) {
        admin_conn_linger(c);
        return;
    }
    admin_conn_await_head(c);
    if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
        admin_conn_read_head(c); /* a pipelined request */
}

/* EOF, a socket error: nothing more can be answered. */
static void admin_conn_on_event(struct bufferevent *bev, short what, void *arg)
{
    struct admin_conn *c = arg;

    admin_conn_free(&c);
}

/* The head did not arrive in time, the answer was not taken, or lingering ended. */
static void admin_conn_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct admin_conn *c = arg;

    admin_conn_free(&c);
}

/*
 * At VG_ADMIN_MAX_CONNS: closes the connection that has waited longest for a request head (an
 * idle keep-alive connection, or a head still arriving); when every connection is being
 * answered or lingering, the one longest in that state. false when there is none to close.
 */
static bool admin_make_room(struct admin *ad)
{
    struct admin_conn *head = NULL, *any = NULL;

    for (struct admin_conn *c = ad->conns; c != NULL; c = c->next) {
        if (c->state == AC_HEAD && (head == NULL || c->since < head->since))
            head = c;
        if (any == NULL || c->since < any->since)
            any = c;
    }
    if (any == NULL)
        return false;
    admin_conn_free(head != NULL ? &head : &any);
    return true;
}

static void admin_on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                            int salen, void *arg)
{
    struct admin *ad = arg;
    struct admin_conn *c = NULL;
    struct bufferevent *bev = NULL;

    while (ad->nconns >= VG_ADMIN_MAX_CONNS && admin_make_room(ad))
        ;
    c = calloc(1, sizeof(*c));
    bev = c != NULL ? bufferevent_socket_new(ad->base, fd, BEV_OPT_CLOSE_ON_FREE) : NULL;
    if (bev == NULL) {
        evutil_closesocket(fd);
        free(c);
        return;
    }
    c->ad = ad;
    c->bev = bev;
    c->next = ad->conns;
    if (ad->conns != NULL)
        ad->conns->prev = c;
    ad->conns = c;
    ad->nconns++;
    c->parser = http1_parser_new(HTTP1_REQUEST, &parser_cb, c);
    c->timer = evtimer_new(ad->base, admin_conn_on_timer, c);
    if (c->parser == NULL || c->timer == NULL) {
        admin_conn_free(&c);
        return;
    }
    bufferevent_setcb(bev, admin_conn_on_read, admin_conn_on_write, admin_conn_on_event, c);
    /* never more input buffered than one head may have */
    bufferevent_setwatermark(bev, EV_READ, 0, VG_ADMIN_MAX_HEAD_BYTES);
    admin_conn_await_head(c);
    admin_listener_update(ad);
}

/* accept() failed (EMFILE, ENOBUFS, ...): pause accepting for a moment instead of spinning. */
static void admin_on_accept_error(struct evconnlistener *l, void *arg)
{
    struct admin *ad = arg;
    int e = EVUTIL_SOCKET_ERROR();
    struct timeval tv = {ADMIN_ACCEPT_RETRY_S, 0};

    log_eventf(LOG_WARN, "admin_accept_error", "accept", "%s", strerror(e));
    ad->accept_paused = true;
    evtimer_add(ad->retry_ev, &tv);
    admin_listener_update(ad);
}

static void admin_on_accept_retry(evutil_socket_t fd, short what, void *arg)
{
    struct admin *ad = arg;

    ad->accept_paused = false;
    admin_listener_update(ad);
}

/* ---- sockets and thread ---- */

static int admin_fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int admin_fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* A unix socket path that exists: reuse it only if it is a socket nobody listens on. */
static int unix_clear_stale(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct stat sb;
    int fd, rc, saved;

    if (lstat(path, &sb) < 0) {
        if (errno == ENOENT)
            return 0;
        return admin_fail(err, errlen, "admin %s: %s", path, strerror(errno));
    }
    if (!S_ISSOCK(sb.st_mode))
        return admin_fail(err, errlen, "admin %s: exists and is not a socket", path);
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return admin_fail(err, errlen, "admin socket: %s", strerror(errno));
    rc = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
    saved = errno;
    close(fd);
    if (rc == 0)
        return admin_fail(err, errlen, "admin %s: another process is listening there", path);
    /* Only a socket nobody accepts on is stale; anything else (EACCES, ...) is not ours. */
    if (saved != ECONNREFUSED)
        return admin_fail(err, errlen, "admin %s: %s", path, strerror(saved));
    if (unlink(path) < 0 && errno != ENOENT)
        return admin_fail(err, errlen, "admin %s: %s", path, strerror(errno));
    return 0;
}

static int bind_unix(struct admin *ad, const struct admin_addr *a, char *err, size_t errlen)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    struct stat sb;
    int fd = -1;

    if (unix_clear_stale(a->path, err, errlen) < 0)
        goto fail;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", a->path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        snprintf(err, errlen, "admin %s: %s", a->path, strerror(errno));
        goto fail;
    }
    /* Before listen(): nobody can connect while the mode is still the umask's. */
    if (chmod(a->path, 0660) < 0 || stat(a->path, &sb) < 0 || listen(fd, ADMIN_BACKLOG) < 0) {
        snprintf(err, errlen, "admin %s: %s", a->path, strerror(errno));
        unlink(a->path);
        goto fail;
    }
    ad->is_unix = true;
    snprintf(ad->unix_path, sizeof(ad->unix_path), "%s", a->path);
    ad->unix_dev = sb.st_dev;
    ad->unix_ino = sb.st_ino;
    snprintf(ad->address, sizeof(ad->address), "unix:%s", a->path);
    return fd;
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

static int bind_inet(struct admin *ad, const struct admin_addr *a, char *err, size_t errlen)
{
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    char host[INET6_ADDRSTRLEN];
    int fd, one = 1;
    unsigned port;

    fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&a->ss, a->sslen) < 0 || listen(fd, ADMIN_BACKLOG) < 0 ||
        getsockname(fd, (struct sockaddr *)&bound, &blen) < 0)
        goto fail;
    if (bound.ss_family == AF_INET6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&bound;

        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
        port = ntohs(s6->sin6_port);
        snprintf(ad->address, sizeof(ad->address), "[%s]:%u", host, port);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&bound;

        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
        port = ntohs(s4->sin_port);
        snprintf(ad->address, sizeof(ad->address), "%s:%u", host, port);
    }
    return fd;
fail:
    snprintf(err, errlen, "admin: cannot listen: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct admin *ad = arg;

    event_base_loopbreak(ad->base);
}

static void *admin_main(void *arg)
{
    struct admin *ad = arg;

    event_base_dispatch(ad->base);
    return NULL;
}

static char *dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

void admin_stop(struct admin **ap)
{
    struct admin *ad = *ap;
    struct stat sb;

    if (ad == NULL)
        return;
    if (ad->running) {
        char c = 1;
        ssize_t w = write(ad->stop_pipe[1], &c, 1);

        (void)w;
        pthread_join(ad->thread, NULL);
    }
    while (ad->conns != NULL) {
        struct admin_conn *c = ad->conns;

        admin_conn_free(&c);
    }
    if (ad->lev != NULL)
        evconnlistener_free(ad->lev); /* closes the listening socket */
    if (ad->retry_ev != NULL)
        event_free(ad->retry_ev);
    if (ad->stop_ev != NULL)
        event_free(ad->stop_ev);
    if (ad->base != NULL)
        event_base_free(ad->base);
    for (int i = 0; i < 2; i++) {
        if (ad->stop_pipe[i] >= 0)
            close(ad->stop_pipe[i]);
    }
    if (ad->is_unix && stat(ad->unix_path, &sb) == 0 && sb.st_dev == ad->unix_dev &&
        sb.st_ino == ad->unix_ino)
        unlink(ad->unix_path);
    free(ad->ca_pem);
    free(ad->audit_url);
    free(ad->run_id);
    free(ad);
    *ap = NULL;
}

struct admin *admin_start(const char *addr, const struct admin_ops *ops, char *err, size_t errlen)
{
    struct admin *ad = NULL;
    struct admin_addr a;
    sigset_t all, old;
    int fd = -1, rc;

    if (addr_parse(addr, true, &a, err, errlen) < 0)
        goto fail;
    ad = calloc(1, sizeof(*ad));
    if (ad == NULL)
        goto oom;
    ad->stop_pipe[0] = ad->stop_pipe[1] = -1;
    ad->ops = *ops;
    ad->ops.ca_pem = NULL;
    if (ops->ca_pem != NULL) {
        ad->ca_pem = malloc(ops->ca_pem_len + 1);
        if (ad->ca_pem == NULL)
            goto oom;
        memcpy(ad->ca_pem, ops->ca_pem, ops->ca_pem_len);
        ad->ca_pem[ops->ca_pem_len] = '\0';
        ad->ca_pem_len = ops->ca_pem_len;
    }
    ad->audit_url = dup_or_null(ops->audit_url);
    ad->run_id = dup_or_null(ops->run_id);
    if ((ops->audit_url != NULL && ad->audit_url == NULL) ||
        (ops->run_id != NULL && ad->run_id == NULL))
        goto oom;
    ad->ops.audit_url = ad->audit_url;
    ad->ops.run_id = ad->run_id;
    if (pipe2(ad->stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        snprintf(err, errlen, "admin: pipe: %s", strerror(errno));
        goto fail;
    }
    ad->base = event_base_new();
    ad->stop_ev =
        ad->base != NULL ? event_new(ad->base, ad->stop_pipe[0], EV_READ, on_stop, ad) : NULL;
    ad->retry_ev = ad->base != NULL ? evtimer_new(ad->base, admin_on_accept_retry, ad) : NULL;
    if (ad->stop_ev == NULL || ad->retry_ev == NULL || event_add(ad->stop_ev, NULL) < 0)
        goto oom;
    fd = a.is_unix ? bind_unix(ad, &a, err, errlen) : bind_inet(ad, &a, err, errlen);
    if (fd < 0)
        goto fail;
    /* backlog 0: the socket is listening already */
    ad->lev = evconnlistener_new(ad->base, admin_on_accept, ad,
                                 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
    if (ad->lev == NULL) {
        snprintf(err, errlen, "admin: cannot accept on %s", ad->address);
        close(fd);
        goto fail;
    }
    evconnlistener_set_error_cb(ad->lev, admin_on_accept_error);
    /* Signals belong to the main thread. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&ad->thread, NULL, admin_main, ad);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "admin: cannot start thread: %s", strerror(rc));
        goto fail;
    }
    ad->running = true;
    return ad;
oom:
    snprintf(err, errlen, "admin: out of memory");
fail:
    admin_stop(&ad);
    return NULL;
}

const char *admin_address(const struct admin *ad)
{
    return ad->address;
}
