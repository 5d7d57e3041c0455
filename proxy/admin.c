/*
 * admin.c - the admin API (SPEC §7): its address, its listening socket, its own thread and
 * event_base; admin_conn.c serves each connection, admin_routes.c decides each answer (the
 * three share proxy/admin_int.h).
 *
 * Guarantees: nothing of the admin API runs on a worker, so a slow store query or a large
 * /metrics render never stalls traffic. --admin takes IP literals and localhost only (never a
 * name resolved through DNS), and a non-loopback address only with --admin-allow-remote. A unix
 * socket is created mode 0660 before it listens and unlinked on stop only if it is still ours.
 * admin_open binds and listens (so a taken address fails the start before any traffic), but
 * nothing is answered until admin_serve starts the thread: the caller does that once every
 * listener accepts connections, and a request that came earlier waits in the backlog. The
 * thread starts with every signal blocked (signals belong to the main thread) and stops
 * through a pipe, so stopping does not depend on libevent's thread support.
 */
#include "proxy/admin_int.h"
#include "common/hostport.h"

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

#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#define ADMIN_BACKLOG 64

struct admin_addr {
    bool is_unix;
    bool loopback;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    struct sockaddr_storage ss;
    socklen_t sslen;
};

/* ---- address parsing ---- */

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
    struct hostport hp;
    char b[96];
    int rc;

    /* a port is required; "::1:9090" is refused as ambiguous (IPv6 needs brackets) */
    rc = hostport_parse(addr, strlen(addr), HOSTPORT_PORT_REQUIRED | HOSTPORT_PORT_ZERO, &hp);
    if (rc == HOSTPORT_EPORT || (rc == 0 && hp.port == 0 && !allow_port0)) {
        snprintf(err, errlen, "--admin '%s': port must be 1-65535", shown(addr, b, sizeof(b)));
        return -1;
    }
    if (rc == 0 && hp.kind == HOSTNAME_DNS && strcmp(hp.host, "localhost") == 0 && hp.rawlen == 9) {
        hp.kind = HOSTNAME_IPV4; /* the loopback address, never resolved */
        snprintf(hp.host, sizeof(hp.host), "127.0.0.1");
    }
    memset(out, 0, sizeof(*out));
    if (rc < 0 || hp.kind == HOSTNAME_DNS ||
        hostport_sockaddr(&hp, hp.port, &out->ss, &out->sslen) < 0)
        goto bad;
    if (out->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&out->ss;

        out->loopback = IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) ||
                        (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && s6->sin6_addr.s6_addr[12] == 127);
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)&out->ss;

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

/* The IPv4 or IPv6 address of ss, and whether it is the wildcard. */
static const void *inet_bytes(const struct sockaddr_storage *ss, size_t *len, bool *any)
{
    static const unsigned char zero[16];

    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

        *len = 16;
        *any = memcmp(&s6->sin6_addr, zero, 16) == 0;
        return &s6->sin6_addr;
    }
    *len = 4;
    *any = ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
    return &((const struct sockaddr_in *)ss)->sin_addr;
}

bool admin_addr_overlaps(const char *addr, const struct sockaddr_storage *ss)
{
    struct admin_addr a;
    const void *x, *y;
    size_t xl, yl;
    bool xany, yany;
    char err[256];

    if (addr_parse(addr, false, &a, err, sizeof(err)) < 0 || a.is_unix ||
        a.ss.ss_family != ss->ss_family)
        return false;
    /* the port sits at the same offset in sockaddr_in and sockaddr_in6 */
    if (((const struct sockaddr_in *)&a.ss)->sin_port != ((const struct sockaddr_in *)ss)->sin_port)
        return false;
    x = inet_bytes(&a.ss, &xl, &xany);
    y = inet_bytes(ss, &yl, &yany);
    return xany || yany || memcmp(x, y, xl) == 0;
}

/* The Host rule: localhost (any case, no trailing dot) or an IP literal, any port or none. */
bool admin_host_allowed(const char *v, size_t n)
{
    struct hostport hp;

    if (hostport_parse(v, n, HOSTPORT_PORT_ZERO, &hp) < 0)
        return false;
    if (hp.kind != HOSTNAME_DNS)
        return true;
    return hp.rawlen == 9 && strncasecmp(hp.raw, "localhost", 9) == 0;
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

/* "127.0.0.1:9090" or "[::1]:9090" for an IPv4 or IPv6 socket address. */
static void format_inet(const struct sockaddr_storage *ss, char *out, size_t outsz)
{
    char host[INET6_ADDRSTRLEN];

    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
        snprintf(out, outsz, "[%s]:%u", host, (unsigned)ntohs(s6->sin6_port));
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
        snprintf(out, outsz, "%s:%u", host, (unsigned)ntohs(s4->sin_port));
    }
}

static unsigned format_port(const struct sockaddr_storage *ss)
{
    return ntohs(((const struct sockaddr_in *)ss)->sin_port); /* same offset for v6 */
}

static int bind_inet(struct admin *ad, const struct admin_addr *a, char *err, size_t errlen)
{
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    char shown_addr[INET6_ADDRSTRLEN + 16];
    int fd, one = 1, e;

    fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (a->ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&a->ss, a->sslen) < 0 || listen(fd, ADMIN_BACKLOG) < 0 ||
        getsockname(fd, (struct sockaddr *)&bound, &blen) < 0)
        goto fail;
    format_inet(&bound, ad->address, sizeof(ad->address));
    return fd;
fail:
    e = errno;
    format_inet(&a->ss, shown_addr, sizeof(shown_addr));
    snprintf(err, errlen, "admin %s: cannot listen: %s%s", shown_addr, strerror(e),
             e == EADDRINUSE ? " (another socket already holds this address)"
             : e == EACCES && format_port(&a->ss) < 1024
                 ? " (needs root, CAP_NET_BIND_SERVICE, or a port above 1023)"
                 : "");
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

struct admin *admin_open(const char *addr, const struct admin_ops *ops, char *err, size_t errlen)
{
    struct admin *ad = NULL;
    struct admin_addr a;
    int fd = -1;

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
    return ad;
oom:
    snprintf(err, errlen, "admin: out of memory");
fail:
    admin_stop(&ad);
    return NULL;
}

int admin_serve(struct admin *ad, char *err, size_t errlen)
{
    sigset_t all, old;
    int rc;

    /* Signals belong to the main thread. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&ad->thread, NULL, admin_main, ad);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "admin: cannot start thread: %s", strerror(rc));
        return -1;
    }
    ad->running = true;
    return 0;
}

const char *admin_address(const struct admin *ad)
{
    return ad->address;
}
