/*
 * admin.c - the admin API (SPEC §7): libevent's evhttp on its own thread and event_base.
 *
 * Guarantees: nothing here runs on a worker, so a slow store query or a large /metrics render
 * never stalls traffic; only GET and HEAD reach a handler (other methods on a known path get
 * 405 with `Allow: GET, HEAD`, unknown paths 404); routing looks at the path alone, so a query
 * string never changes the answer, and neither the path nor the query is ever logged; every
 * response this file builds carries the five security headers and Cache-Control: no-store. A
 * unix socket is created mode 0660 and unlinked on stop only if it is still ours.
 *
 * Limits of evhttp 2.1: requests it cannot parse (a method it does not know, an oversized head)
 * are answered by evhttp itself, without the security headers; those answers carry no data.
 */
#include "proxy/admin.h"
#include "audit/audit.h"
#include "audit/log.h"
#include "common/caps.h"
#include "proxy/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#define ADMIN_TIMEOUT_S   10
#define ADMIN_BACKLOG     64
#define ADMIN_ALL_METHODS 0x1ff /* every method evhttp 2.1 parses, so we answer 405 ourselves */

struct admin_addr {
    bool is_unix;
    bool loopback;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    struct sockaddr_storage ss;
    socklen_t sslen;
};

struct admin {
    struct event_base *base;
    struct evhttp *http;
    struct event *stop_ev;
    int stop_pipe[2];
    pthread_t thread;
    bool running;
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

/* ---- address parsing ---- */

/* Decimal 0..65535 without sign, spaces or leading zeros. */
static int parse_port(const char *s, unsigned *out)
{
    unsigned v = 0;
    size_t n = strlen(s);

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
    unsigned port;
    size_t hl;

    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');

        if (close == NULL || close[1] != ':')
            goto bad;
        hl = (size_t)(close - addr - 1);
        if (hl == 0 || hl >= sizeof(host))
            goto bad;
        memcpy(host, addr + 1, hl);
        host[hl] = '\0';
        port_s = close + 2;
    } else {
        const char *colon = strrchr(addr, ':');

        if (colon == NULL || memchr(addr, ':', (size_t)(colon - addr)) != NULL)
            goto bad; /* no port, or an IPv6 address without brackets */
        hl = (size_t)(colon - addr);
        if (hl == 0 || hl >= sizeof(host))
            goto bad;
        memcpy(host, addr, hl);
        host[hl] = '\0';
        port_s = colon + 1;
    }
    if (parse_port(port_s, &port) < 0 || (port == 0 && !allow_port0)) {
        snprintf(err, errlen, "--admin '%s': port must be 1-65535", shown(addr, b, sizeof(b)));
        return -1;
    }
    memset(out, 0, sizeof(*out));
    if (addr[0] == '[') {
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

/* ---- responses ---- */

static void set_common_headers(struct evhttp_request *req, const char *ctype)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);

    evhttp_add_header(h, "Content-Security-Policy", "default-src 'none'");
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    evhttp_add_header(h, "X-Frame-Options", "DENY");
    evhttp_add_header(h, "Referrer-Policy", "no-referrer");
    evhttp_add_header(h, "Cache-Control", "no-store");
    evhttp_add_header(h, "Content-Type", ctype);
}

/* Sends body (GET) or only its length (HEAD). */
static void reply(struct evhttp_request *req, int code, const char *reason, const char *ctype,
                  const char *body, size_t len)
{
    struct evbuffer *buf = evbuffer_new();
    char clen[24];

    set_common_headers(req, ctype);
    snprintf(clen, sizeof(clen), "%zu", len);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Length", clen);
    if (buf != NULL && evhttp_request_get_command(req) != EVHTTP_REQ_HEAD)
        evbuffer_add(buf, body, len);
    evhttp_send_reply(req, code, reason, buf);
    if (buf != NULL)
        evbuffer_free(buf);
}

static void reply_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
    reply(req, code, reason, "text/plain; charset=utf-8", text, strlen(text));
}

/* Sends json (or a 500 when it could not be built) and frees it. */
static void reply_json(struct evhttp_request *req, int code, const char *reason, cJSON *json)
{
    char *s = json != NULL ? cJSON_PrintUnformatted(json) : NULL;

    if (s == NULL) {
        reply_text(req, 500, "Internal Server Error", "internal error\n");
    } else {
        size_t n = strlen(s);
        char *line = malloc(n + 2);

        if (line == NULL) {
            reply_text(req, 500, "Internal Server Error", "internal error\n");
        } else {
            memcpy(line, s, n);
            line[n] = '\n';
            reply(req, code, reason, "application/json", line, n + 1);
            free(line);
        }
    }
    free(s);
    cJSON_Delete(json);
}

/* ---- endpoints ---- */

static void h_healthz(struct admin *ad, struct evhttp_request *req)
{
    reply_text(req, 200, "OK", "ok\n");
}

static void h_readyz(struct admin *ad, struct evhttp_request *req)
{
    if (ad->ops.ready == NULL || ad->ops.ready(ad->ops.arg))
        reply_text(req, 200, "OK", "ready\n");
    else
        reply_text(req, 503, "Service Unavailable", "not ready\n");
}

static void h_metrics(struct admin *ad, struct evhttp_request *req)
{
    struct metrics_extra extra = {0, 0};
    size_t len = 0;
    char *text;

    if (ad->ops.metrics_extra != NULL)
        ad->ops.metrics_extra(ad->ops.arg, &extra);
    text = metrics_render(&extra, &len);
    if (text == NULL) {
        reply_text(req, 500, "Internal Server Error", "metrics unavailable\n");
        return;
    }
    reply(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
}

static void h_status(struct admin *ad, struct evhttp_request *req)
{
    cJSON *obj = cJSON_CreateObject();

    if (obj != NULL && ad->ops.status != NULL)
        ad->ops.status(ad->ops.arg, obj);
    reply_json(req, 200, "OK", obj);
}

static void audit_rows(struct admin *ad, struct evhttp_request *req, enum audit_table table)
{
    char err[512];
    cJSON *rows = NULL, *e;

    if (ad->audit_url == NULL || strcmp(ad->audit_url, "off") == 0) {
        reply_json(req, 200, "OK", cJSON_CreateArray());
        return;
    }
    if (audit_query(ad->audit_url, table, ad->run_id, &rows, err, sizeof(err)) == 0) {
        reply_json(req, 200, "OK", rows);
        return;
    }
    log_eventf(LOG_WARN, "admin_audit_query_failed", "store_read", "%s", err);
    e = cJSON_CreateObject();
    if (e != NULL)
        cJSON_AddStringToObject(e, "error", "audit store unavailable");
    reply_json(req, 503, "Service Unavailable", e);
}

static void h_blocked(struct admin *ad, struct evhttp_request *req)
{
    audit_rows(ad, req, AUDIT_TABLE_BLOCKED);
}

static void h_routes(struct admin *ad, struct evhttp_request *req)
{
    audit_rows(ad, req, AUDIT_TABLE_ROUTES);
}

static void h_ca(struct admin *ad, struct evhttp_request *req)
{
    if (ad->ca_pem == NULL) {
        reply_text(req, 404, "Not Found", "not found\n");
        return;
    }
    reply(req, 200, "OK", "application/x-pem-file", ad->ca_pem, ad->ca_pem_len);
}

static const struct {
    const char *path;
    void (*fn)(struct admin *ad, struct evhttp_request *req);
} routes[] = {
    {"/healthz", h_healthz},
    {"/readyz", h_readyz},
    {"/metrics", h_metrics},
    {"/v1/status", h_status},
    {"/v1/blocked-hosts", h_blocked},
    {"/v1/egress-routes", h_routes},
    {"/ca.pem", h_ca},
};

static void on_request(struct evhttp_request *req, void *arg)
{
    struct admin *ad = arg;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri != NULL ? evhttp_uri_get_path(uri) : NULL;
    enum evhttp_cmd_type m = evhttp_request_get_command(req);

    for (size_t i = 0; path != NULL && i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (strcmp(path, routes[i].path) != 0)
            continue;
        if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
            reply_text(req, 405, "Method Not Allowed", "method not allowed\n");
            return;
        }
        routes[i].fn(ad, req);
        return;
    }
    reply_text(req, 404, "Not Found", "not found\n");
}

/* ---- sockets and thread ---- */

/* A unix socket path that exists: reuse it only if it is a socket nobody listens on. */
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
    if (ad->http != NULL)
        evhttp_free(ad->http); /* closes the listening socket and open connections */
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
    ad->http = ad->base != NULL ? evhttp_new(ad->base) : NULL;
    ad->stop_ev =
        ad->base != NULL ? event_new(ad->base, ad->stop_pipe[0], EV_READ, on_stop, ad) : NULL;
    if (ad->http == NULL || ad->stop_ev == NULL || event_add(ad->stop_ev, NULL) < 0)
        goto oom;
    evhttp_set_allowed_methods(ad->http, ADMIN_ALL_METHODS);
    evhttp_set_max_headers_size(ad->http, VG_ADMIN_MAX_HEAD_BYTES);
    evhttp_set_max_body_size(ad->http, VG_ADMIN_MAX_BODY_BYTES);
    evhttp_set_timeout(ad->http, ADMIN_TIMEOUT_S);
    evhttp_set_gencb(ad->http, on_request, ad);
    fd = a.is_unix ? bind_unix(ad, &a, err, errlen) : bind_inet(ad, &a, err, errlen);
    if (fd < 0)
        goto fail;
    if (evhttp_accept_socket_with_handle(ad->http, fd) == NULL) {
        snprintf(err, errlen, "admin: cannot accept on %s", ad->address);
        close(fd);
        goto fail;
    }
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
