/*
 * listen.c - listener sockets, worker threads, and the shared policy snapshot.
 *
 * Guarantees: every listening socket is bound before the first worker starts, so a listener that
 * cannot bind fails the start (exit 4) before any traffic, and none listens before every other
 * enforcement piece exists; one socket per worker per listener (SO_REUSEPORT), so the kernel
 * spreads connections over workers without a shared accept lock; an address something else
 * already listens on - another vaultgate of the same user included, which SO_REUSEPORT alone
 * would let in to take a share of the connections - fails the start, with no race (see
 * bind_one and listen_listen_all);
 * a connection stays on the worker that accepted it. Workers never take a lock on the request
 * path except to pick up a new policy snapshot once per reload. Connections over the limit
 * (sh->max_conns) are answered 503 while VG_CONN_BUSY_RESERVE lasts, then closed at accept.
 */
#include "proxy/listen.h"
#include "audit/log.h"
#include "common/caps.h"
#include "proxy/conn.h"
#include "proxy/tls.h"
#include "proxy/upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

enum {
    LISTEN_CMD_NONE = 0,
    LISTEN_CMD_DRAIN,
    LISTEN_CMD_ABORT,
    LISTEN_CMD_POLICY, /* a reload happened: drop the old snapshot now, not at the next accept */
};

static const char *const kind_names[] = {"https", "http", "proxy"};

int listen_parse_addr(const char *s, enum listen_kind kind, struct listen_addr *out, char *err,
                      size_t errlen)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon, *h = s, *end;
    size_t hlen;
    long port;
    char *pe = NULL;
    struct addrinfo hints = {0}, *ai = NULL;

    if (s[0] == '[') {
        end = strchr(s, ']');
        if (end == NULL || end[1] != ':') {
            snprintf(err, errlen, "'%s' is not host:port or [v6]:port", s);
            return -1;
        }
        h = s + 1;
        hlen = (size_t)(end - h);
        colon = end + 1;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL || strchr(s, ':') != colon) {
            snprintf(err, errlen, "'%s' is not host:port or [v6]:port", s);
            return -1;
        }
        hlen = (size_t)(colon - s);
    }
    if (hlen == 0 || hlen >= sizeof(host)) {
        snprintf(err, errlen, "'%s': bad address", s);
        return -1;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    errno = 0;
    port = strtol(colon + 1, &pe, 10);
    if (colon[1] == '\0' || *pe != '\0' || errno != 0 || port < 1 || port > 65535 ||
        colon[1] == '+' || colon[1] == '-') {
        snprintf(err, errlen, "'%s': port must be 1-65535", s);
        return -1;
    }
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_family = s[0] == '[' ? AF_INET6 : AF_INET;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0 || ai == NULL) {
        snprintf(err, errlen, "'%s': host must be an IPv4 address or a bracketed IPv6 address", s);
        return -1;
    }
    memset(out, 0, sizeof(*out));
    memcpy(&out->ss, ai->ai_addr, ai->ai_addrlen);
    out->sslen = (socklen_t)ai->ai_addrlen;
    freeaddrinfo(ai);
    out->kind = kind;
    out->port = (int)port;
    snprintf(out->label, sizeof(out->label), "%s %s%s%s:%ld", kind_names[kind],
             s[0] == '[' ? "[" : "", host, s[0] == '[' ? "]" : "", port);
    out->fds = NULL;
    return 0;
}

/* "listener https 127.0.0.1:8443: Address already in use (...)" for the errno of a bind/listen. */
static void listen_fail(const struct listen_addr *la, int e, char *err, size_t errlen)
{
    snprintf(err, errlen, "listener %s: %s%s", la->label, strerror(e),
             e == EADDRINUSE ? " (another socket already holds this address)" : "");
}

/*
 * One socket for la, bound, not listening. The first of each address (claim) is bound without
 * SO_REUSEPORT: the kernel refuses it when anything already listens on an overlapping address
 * (a wildcard included), whatever that socket's options and owner, and it keeps refusing a
 * claim of another process for as long as this one exists. The others join it with
 * SO_REUSEPORT. SO_REUSEADDR on all: TIME_WAIT connections of a previous run do not block a
 * restart.
 */
static int bind_one(const struct listen_addr *la, bool claim, char *err, size_t errlen)
{
    int fd, one = 1;

    fd = socket(la->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        (!claim && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0))
        goto fail;
    if (la->ss.ss_family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
        goto fail;
    if (bind(fd, (const struct sockaddr *)&la->ss, la->sslen) < 0)
        goto fail;
    return fd;
fail:
    listen_fail(la, errno, err, errlen);
    if (fd >= 0)
        close(fd);
    return -1;
}

void listen_close_fds(struct listen_shared *sh)
{
    for (size_t i = 0; i < sh->naddrs; i++) {
        struct listen_addr *la = &sh->addrs[i];

        if (la->fds == NULL)
            continue;
        for (int k = 0; k < sh->nworkers; k++) {
            if (la->fds[k] >= 0)
                close(la->fds[k]);
        }
        free(la->fds);
        la->fds = NULL;
    }
}

int listen_bind_all(struct listen_shared *sh, char *err, size_t errlen)
{
    for (size_t i = 0; i < sh->naddrs; i++) {
        struct listen_addr *la = &sh->addrs[i];

        la->fds = malloc(sizeof(int) * (size_t)sh->nworkers);
        if (la->fds == NULL) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        for (int k = 0; k < sh->nworkers; k++)
            la->fds[k] = -1;
        for (int k = 0; k < sh->nworkers; k++) {
            la->fds[k] = bind_one(la, k == 0, err, errlen);
            if (la->fds[k] < 0)
                goto fail;
        }
    }
    return 0;
fail:
    listen_close_fds(sh);
    return -1;
}

/*
 * Per address, the claim socket listens first, still without SO_REUSEPORT: the kernel lets it
 * listen only when no other socket listens on the address. Two runs that bound at the same time
 * (SO_REUSEADDR lets sockets that do not listen yet share an address) race here, and only the
 * first claim to listen wins. Then the claim takes SO_REUSEPORT and the workers' sockets join
 * its group; another process's claim, which never has SO_REUSEPORT, can neither bind nor
 * listen beside them.
 */
int listen_listen_all(struct listen_shared *sh, char *err, size_t errlen)
{
    int one = 1;

    for (size_t i = 0; i < sh->naddrs; i++) {
        const struct listen_addr *la = &sh->addrs[i];

        for (int k = 0; la->fds != NULL && k < sh->nworkers; k++) {
            if (la->fds[k] < 0)
                continue;
            if (listen(la->fds[k], VG_LISTEN_BACKLOG) < 0 ||
                (k == 0 && sh->nworkers > 1 &&
                 setsockopt(la->fds[0], SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)) {
                listen_fail(la, errno, err, errlen);
                return -1;
            }
        }
    }
    return 0;
}

int listen_default_max_conns(const struct listen_shared *sh, long nofile)
{
    long n =
        (nofile - VG_CONN_FD_RESERVE - VG_CONN_BUSY_RESERVE - (long)sh->naddrs * sh->nworkers) / 2;

    if (n < 16)
        n = 16; /* a tiny descriptor limit: accept pauses on EMFILE do the rest */
    return n > VG_CONN_MAX_LIMIT ? VG_CONN_MAX_LIMIT : (int)n;
}

/* ---- policy snapshot -------------------------------------------------------------------- */

void listen_policy_swap(struct listen_shared *sh, struct policy *p)
{
    struct policy *old;

    pthread_mutex_lock(&sh->policy_lock);
    old = sh->policy;
    sh->policy = p;
    atomic_fetch_add(&sh->policy_gen, 1);
    pthread_mutex_unlock(&sh->policy_lock);
    policy_unref(&old);
}

struct policy *listen_policy_ref(struct listen_shared *sh)
{
    struct policy *p;

    pthread_mutex_lock(&sh->policy_lock);
    p = policy_ref(sh->policy);
    pthread_mutex_unlock(&sh->policy_lock);
    return p;
}

struct policy *listen_worker_policy(struct listen_worker *w)
{
    if (w->policy == NULL || atomic_load(&w->sh->policy_gen) != w->policy_gen) {
        struct policy *old = w->policy;

        pthread_mutex_lock(&w->sh->policy_lock);
        w->policy = policy_ref(w->sh->policy);
        w->policy_gen = atomic_load(&w->sh->policy_gen);
        pthread_mutex_unlock(&w->sh->policy_lock);
        policy_unref(&old);
    }
    return w->policy;
}

/* ---- workers ---------------------------------------------------------------------------- */

struct listen_slot {
    struct listen_worker *w;
    const struct listen_addr *la;
    struct evconnlistener *lev;
    struct event *resume; /* re-enables accepting after descriptors ran out */
};

#define LISTEN_PAUSE_MS 100 /* accept pause after EMFILE/ENFILE */

/* One warn line per worker per second at most while connections are over the limit. */
static void limit_note(struct listen_worker *w, int active)
{
    struct timespec now;

    w->limit_refused++;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((int64_t)now.tv_sec == w->limit_logged)
        return;
    w->limit_logged = (int64_t)now.tv_sec;
    log_eventf(LOG_WARN, "conn_limit", "connection_limit_reached",
               "%d connections open, limit %d: %llu refused", active, w->sh->max_conns,
               (unsigned long long)w->limit_refused);
    w->limit_refused = 0;
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
    struct listen_slot *s = arg;
    struct listen_shared *sh = s->w->sh;
    int active = atomic_load(&sh->active_conns);

    (void)l;
    if (active < sh->max_conns) {
        conn_accept(s->w, s->la, fd, sa, salen);
        return;
    }
    limit_note(s->w, active);
    if (active < sh->max_conns + VG_CONN_BUSY_RESERVE)
        conn_accept_busy(s->w, s->la, fd, sa, salen); /* 503, then close */
    else
        evutil_closesocket(fd);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    struct listen_slot *s = arg;

    (void)fd;
    (void)what;
    if (s->lev != NULL)
        evconnlistener_enable(s->lev);
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
    int e = EVUTIL_SOCKET_ERROR();
    struct listen_slot *s = arg;
    struct timeval pause = {0, LISTEN_PAUSE_MS * 1000};

    /* Out of descriptors: the pending connection stays queued and every accept would fail at
     * once, so stop accepting for a moment instead of spinning (and logging) in a loop. */
    if ((e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) && s->resume != NULL) {
        evconnlistener_disable(l);
        evtimer_add(s->resume, &pause);
    }
    log_eventf(LOG_WARN, "accept_error", "accept", "%s on %s", strerror(e), s->la->label);
}

static void worker_free_listeners(struct listen_worker *w)
{
    for (size_t i = 0; i < w->nlevs; i++) {
        if (w->levs[i] != NULL)
            evconnlistener_free(w->levs[i]);
    }
    for (size_t i = 0; w->slots != NULL && i < w->sh->naddrs; i++) {
        if (w->slots[i].resume != NULL)
            event_free(w->slots[i].resume);
    }
    free(w->levs);
    free(w->slots);
    w->levs = NULL;
    w->slots = NULL;
    w->nlevs = 0;
}

static void ctl_cb(evutil_socket_t fd, short what, void *arg)
{
    struct listen_worker *w = arg;
    uint64_t v;
    ssize_t r;
    int cmd = atomic_load(&w->ctl_cmd);

    (void)what;
    r = read(fd, &v, sizeof(v));
    (void)r;
    if (cmd == LISTEN_CMD_DRAIN && !w->draining) {
        w->draining = true;
        worker_free_listeners(w);
        conn_drain_all(w);
        if (w->nconns == 0)
            event_base_loopexit(w->base, NULL);
    } else if (cmd == LISTEN_CMD_POLICY) {
        listen_worker_policy(w);
    } else if (cmd == LISTEN_CMD_ABORT) {
        w->draining = true;
        worker_free_listeners(w);
        conn_abort_all(w);
        event_base_loopexit(w->base, NULL);
    }
}

static void *worker_main(void *arg)
{
    struct listen_worker *w = arg;

    conn_worker_begin(w);
    event_base_dispatch(w->base);
    conn_worker_end(w);
    return NULL;
}

static int worker_init(struct listen_worker *w, struct listen_shared *sh, int id, char *err,
                       size_t errlen)
{
    struct event_config *cfg = NULL;
    int ret = -1;

    w->id = id;
    w->sh = sh;
    w->ctl_fd = -1;
    cfg = event_config_new();
    if (cfg == NULL)
        goto out;
    /* one thread per base: no locking inside libevent; the epoll changelist folds the
     * enable/disable pairs of one loop turn into at most one epoll_ctl per descriptor */
    event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK | EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    w->base = event_base_new_with_config(cfg);
    if (w->base == NULL) {
        snprintf(err, errlen, "worker %d: event base", id);
        goto out;
    }
    w->up = upstream_ctx_new(w->base, sh->upcfg, err, errlen);
    if (w->up == NULL)
        goto out;
    w->ssl_ctx = tls_server_ctx_new(sh->ticket_keys, err, errlen);
    if (w->ssl_ctx == NULL)
        goto out;
    w->ctl_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->ctl_fd < 0) {
        snprintf(err, errlen, "worker %d: eventfd: %s", id, strerror(errno));
        goto out;
    }
    w->ctl_ev = event_new(w->base, w->ctl_fd, EV_READ | EV_PERSIST, ctl_cb, w);
    if (w->ctl_ev == NULL || event_add(w->ctl_ev, NULL) < 0)
        goto out;
    w->levs = calloc(sh->naddrs > 0 ? sh->naddrs : 1, sizeof(w->levs[0]));
    w->slots = calloc(sh->naddrs > 0 ? sh->naddrs : 1, sizeof(w->slots[0]));
    if (w->levs == NULL || w->slots == NULL)
        goto out;
    for (size_t i = 0; i < sh->naddrs; i++) {
        struct listen_slot *s = &w->slots[i];

        s->w = w;
        s->la = &sh->addrs[i];
        s->resume = evtimer_new(w->base, resume_cb, s);
        if (s->resume == NULL)
            goto out;
        w->levs[i] =
            evconnlistener_new(w->base, accept_cb, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                               0, sh->addrs[i].fds[id]);
        if (w->levs[i] == NULL) {
            snprintf(err, errlen, "worker %d: listener %s", id, sh->addrs[i].label);
            goto out;
        }
        sh->addrs[i].fds[id] = -1; /* owned by the evconnlistener now */
        s->lev = w->levs[i];
        w->nlevs = i + 1;
        evconnlistener_set_error_cb(w->levs[i], accept_error_cb);
    }
    ret = 0;
out:
    if (ret < 0 && err[0] == '\0')
        snprintf(err, errlen, "worker %d: out of memory", id);
    if (cfg != NULL)
        event_config_free(cfg);
    return ret;
}

static void worker_free(struct listen_worker *w)
{
    conn_abort_all(w);
    worker_free_listeners(w);
    upstream_ctx_free(&w->up);
    if (w->ctl_ev != NULL)
        event_free(w->ctl_ev);
    if (w->ctl_fd >= 0)
        close(w->ctl_fd);
    SSL_CTX_free(w->ssl_ctx);
    policy_unref(&w->policy);
    if (w->base != NULL)
        event_base_free(w->base);
    memset(w, 0, sizeof(*w));
}

struct listen_worker *listen_workers_start(struct listen_shared *sh, char *err, size_t errlen)
{
    struct listen_worker *ws = calloc((size_t)sh->nworkers, sizeof(*ws));
    int i;

    if (ws == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    err[0] = '\0';
    for (i = 0; i < sh->nworkers; i++)
        ws[i].ctl_fd = -1;
    for (i = 0; i < sh->nworkers; i++) {
        if (worker_init(&ws[i], sh, i, err, errlen) < 0)
            goto fail;
    }
    for (i = 0; i < sh->nworkers; i++) {
        if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0) {
            snprintf(err, errlen, "worker %d: cannot start thread", i);
            goto fail;
        }
        ws[i].started = true;
    }
    return ws;
fail:
    listen_workers_stop(&ws, sh->nworkers, 0);
    return NULL;
}

static void worker_send(struct listen_worker *w, int cmd)
{
    uint64_t one = 1;
    ssize_t r;

    if (w->ctl_fd < 0)
        return;
    atomic_store(&w->ctl_cmd, cmd);
    r = write(w->ctl_fd, &one, sizeof(one));
    (void)r;
}

void listen_workers_refresh(struct listen_worker *ws, int nworkers)
{
    for (int i = 0; ws != NULL && i < nworkers; i++) {
        if (ws[i].started && atomic_load(&ws[i].ctl_cmd) != LISTEN_CMD_DRAIN)
            worker_send(&ws[i], LISTEN_CMD_POLICY);
    }
}

void listen_workers_stop(struct listen_worker **wsp, int nworkers, double grace_s)
{
    struct listen_worker *ws = *wsp;
    struct timespec deadline;

    if (ws == NULL)
        return;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)grace_s;
    deadline.tv_nsec += (long)((grace_s - (double)(time_t)grace_s) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    for (int i = 0; i < nworkers; i++) {
        if (ws[i].started)
            worker_send(&ws[i], LISTEN_CMD_DRAIN);
    }
    for (int i = 0; i < nworkers; i++) {
        if (!ws[i].started)
            continue;
        if (pthread_timedjoin_np(ws[i].thread, NULL, &deadline) != 0) {
            log_eventf(LOG_WARN, "stop", "grace_expired",
                       "worker %d: closing connections still open after %.0f s", i, grace_s);
            worker_send(&ws[i], LISTEN_CMD_ABORT);
            pthread_join(ws[i].thread, NULL);
        }
        ws[i].started = false;
    }
    for (int i = 0; i < nworkers; i++)
        worker_free(&ws[i]);
    free(ws);
    *wsp = NULL;
}
