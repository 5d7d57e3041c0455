/*
 * worker.c - the worker threads: event loop, listeners, the connection list, the policy
 * snapshot reference, the log batch, drain and abort, and the registry of the modules above.
 *
 * Guarantees: a connection stays on the worker that accepted it; nothing but this file touches
 * a worker's connection list; workers never take a lock on the request path except to pick up
 * a new policy snapshot once per reload. Every listener's sockets go to the one module that
 * accepts its kind (a listener no module accepts fails the start). A drain ends the loop when
 * the last connection has left; an abort closes every connection at once. worker_start_all
 * returns only once every worker's loop runs with its listeners on it. This file names no
 * transport, exchange or listener module: it reaches them through their struct worker_module.
 */
#include "proxy/worker.h"
#include "proxy/evmem.h"
#include "audit/log.h"
#include "proxy/metrics.h"
#include "proxy/oauth.h"
#include "proxy/upstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

enum {
    WORKER_CMD_NONE = 0,
    WORKER_CMD_DRAIN,
    WORKER_CMD_ABORT,
    WORKER_CMD_POLICY, /* a reload happened: drop the old snapshot now, not at the next accept */
};

/* ---- policy snapshot -------------------------------------------------------------------- */

void worker_policy_swap(struct worker_shared *sh, struct policy *p)
{
    struct policy *old;

    pthread_mutex_lock(&sh->policy_lock);
    old = sh->policy;
    sh->policy = p;
    atomic_fetch_add(&sh->policy_gen, 1);
    pthread_mutex_unlock(&sh->policy_lock);
    policy_unref(&old);
}

struct policy *worker_policy_ref(struct worker_shared *sh)
{
    struct policy *p;

    pthread_mutex_lock(&sh->policy_lock);
    p = policy_ref(sh->policy);
    pthread_mutex_unlock(&sh->policy_lock);
    return p;
}

struct policy *worker_policy(struct worker *w)
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

/* ---- connections --------------------------------------------------------------------------- */

uint64_t worker_attach(struct worker *w, struct worker_link *l, const struct worker_link_ops *ops)
{
    l->ops = ops;
    l->prev = NULL;
    l->next = w->conns;
    if (w->conns != NULL)
        w->conns->prev = l;
    w->conns = l;
    w->nconns++;
    atomic_fetch_add(&w->sh->active_conns, 1);
    metrics_conn_open(w->id);
    return ((uint64_t)w->id << 48) | ++w->next_conn_id;
}

void worker_replace(struct worker *w, struct worker_link *from, struct worker_link *to,
                    const struct worker_link_ops *ops)
{
    to->ops = ops;
    to->prev = from->prev;
    to->next = from->next;
    if (to->prev != NULL)
        to->prev->next = to;
    else
        w->conns = to;
    if (to->next != NULL)
        to->next->prev = to;
    from->prev = from->next = NULL;
}

void worker_detach(struct worker *w, struct worker_link *l)
{
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        w->conns = l->next;
    if (l->next != NULL)
        l->next->prev = l->prev;
    l->prev = l->next = NULL;
    w->nconns--;
    atomic_fetch_sub(&w->sh->active_conns, 1);
    metrics_conn_close(w->id);
    if (w->draining && w->nconns == 0)
        event_base_loopexit(w->base, NULL);
}

/* Closes every connection of w at once. */
static void worker_abort_conns(struct worker *w)
{
    while (w->conns != NULL)
        w->conns->ops->abort(w->conns);
}

/* ---- modules ---------------------------------------------------------------------------- */

int worker_module_add(struct worker_shared *sh, const struct worker_module *m)
{
    for (size_t i = 0; i < sh->nmodules; i++) {
        if (sh->modules[i] == m)
            return 0;
    }
    if (sh->nmodules == WORKER_MODULES_MAX)
        return -1;
    sh->modules[sh->nmodules++] = m;
    return 0;
}

void **worker_module_state(struct worker *w, const struct worker_module *m)
{
    for (size_t i = 0; i < w->sh->nmodules; i++) {
        if (w->sh->modules[i] == m)
            return &w->mstate[i];
    }
    return NULL;
}

int worker_dlq_init(struct worker *w, const struct worker_module *m, const int64_t *ms, size_t n,
                    dlq_cb cb, char *err, size_t errlen)
{
    void **st = worker_module_state(w, m);

    if (st == NULL) {
        snprintf(err, errlen, "module %s is not registered", m->name);
        return -1;
    }
    if ((*st = dlq_set_new(w->base, ms, n, cb)) == NULL) {
        snprintf(err, errlen, "out of memory for the %s deadline queues", m->name);
        return -1;
    }
    return 0;
}

void worker_dlq_free(struct worker *w, const struct worker_module *m)
{
    void **st = worker_module_state(w, m);

    if (st != NULL)
        dlq_set_free((struct dlq_set **)st);
}

struct dlq *worker_dlq(struct worker *w, const struct worker_module *m, int64_t ms)
{
    void **st = worker_module_state(w, m);
    struct dlq *q;

    if (st == NULL || *st == NULL)
        return NULL;
    if ((q = dlq_set_get(*st, ms)) == NULL)
        abort(); /* every duration a module arms is one its init made */
    return q;
}

/* The module that accepts listeners of kind k, or NULL. */
static const struct worker_module *module_accepting(const struct worker_shared *sh,
                                                    enum listen_kind k)
{
    for (size_t i = 0; i < sh->nmodules; i++) {
        if ((sh->modules[i]->accepts & (1u << k)) != 0 && sh->modules[i]->accept != NULL)
            return sh->modules[i];
    }
    return NULL;
}

/* Runs hook `h` of every module that has it, in the order of registration. */
#define MODULES_RUN(w, h)                                                                          \
    do {                                                                                           \
        for (size_t mi_ = 0; mi_ < (w)->sh->nmodules; mi_++) {                                     \
            if ((w)->sh->modules[mi_]->h != NULL)                                                  \
                (w)->sh->modules[mi_]->h(w);                                                       \
        }                                                                                          \
    } while (0)

static int modules_init(struct worker *w, char *err, size_t errlen)
{
    for (size_t i = 0; i < w->sh->nmodules; i++) {
        const struct worker_module *m = w->sh->modules[i];

        if (m->init != NULL && m->init(w, err, errlen) < 0) {
            if (err[0] == '\0')
                snprintf(err, errlen, "worker %d: %s", w->id, m->name);
            return -1;
        }
    }
    return 0;
}

/* Every module's free, in the reverse order of registration. */
static void modules_free(struct worker *w)
{
    for (size_t i = w->sh != NULL ? w->sh->nmodules : 0; i-- > 0;) {
        if (w->sh->modules[i]->free != NULL)
            w->sh->modules[i]->free(w);
    }
}

/* ---- workers ---------------------------------------------------------------------------- */

struct worker_slot {
    struct worker *w;
    const struct listen_addr *la;
    const struct worker_module *m; /* the module that accepts this listener's connections */
    int fd;                        /* the listening socket, this slot's; -1 once closed */
    struct event *ev;              /* readable: connections wait in the queue */
    struct event *resume;          /* re-enables accepting after descriptors ran out */
};

#define LISTEN_PAUSE_MS 100 /* accept pause after EMFILE/ENFILE */

static void accept_one(void *arg, int fd, const struct sockaddr *sa, socklen_t salen)
{
    struct worker_slot *s = arg;

    s->m->accept(s->w, s->la, fd, sa, (int)salen);
}

/*
 * The listening socket is readable: up to LISTEN_ACCEPT_BUDGET connections, each handed to the
 * slot's module. Out of descriptors, the pending connection stays queued and every accept would
 * fail at once, so the socket leaves the loop for a moment instead of spinning (and logging).
 */
static void accept_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker_slot *s = arg;
    struct timeval pause = {0, LISTEN_PAUSE_MS * 1000};
    int e;

    (void)what;
    listen_accept_batch(fd, LISTEN_ACCEPT_BUDGET, accept_one, s, &e);
    if (e == 0)
        return;
    if (listen_accept_pauses(e)) {
        event_del(s->ev);
        evtimer_add(s->resume, &pause);
    }
    log_eventf(LOG_WARN, "accept_error", "accept", "%s on %s", strerror(e), s->la->label);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker_slot *s = arg;

    (void)fd;
    (void)what;
    event_add(s->ev, NULL);
}

static void worker_free_listeners(struct worker *w)
{
    if (w->sh != NULL)
        MODULES_RUN(w, stop);
    for (size_t i = 0; i < w->nslots; i++) {
        struct worker_slot *s = &w->slots[i];

        if (s->ev != NULL)
            event_free(s->ev);
        if (s->resume != NULL)
            event_free(s->resume);
        if (s->fd >= 0)
            close(s->fd);
    }
    free(w->slots);
    w->slots = NULL;
    w->nslots = 0;
}

void worker_drain(struct worker *w)
{
    struct worker_link *l, *next;

    if (w->draining)
        return;
    w->draining = true;
    worker_free_listeners(w);
    for (l = w->conns; l != NULL; l = next) {
        next = l->next; /* a drain closes at most its own connection */
        l->ops->drain(l);
    }
    if (w->nconns == 0)
        event_base_loopexit(w->base, NULL);
}

void worker_abort(struct worker *w)
{
    w->draining = true;
    worker_free_listeners(w);
    worker_abort_conns(w);
    event_base_loopexit(w->base, NULL);
}

static void ctl_cb(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    uint64_t v;
    ssize_t r;
    int cmd = atomic_load(&w->ctl_cmd);

    (void)what;
    r = read(fd, &v, sizeof(v));
    (void)r;
    if (cmd == WORKER_CMD_DRAIN)
        worker_drain(w);
    else if (cmd == WORKER_CMD_POLICY) {
        worker_policy(w);
        MODULES_RUN(w, refresh);
    } else if (cmd == WORKER_CMD_ABORT)
        worker_abort(w);
}

/* The token manager changed a source's state: parked requests look again. */
static void oauth_cb(evutil_socket_t fd, short what, void *arg)
{
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));

    (void)r;
    (void)what;
    MODULES_RUN((struct worker *)arg, wake);
}

/* The wake-up channel from the token manager (when the run has one). 0 or -1. */
static int worker_oauth_init(struct worker *w, char *err, size_t errlen)
{
    if (w->sh->oauth == NULL)
        return 0;
    w->oauth_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->oauth_fd < 0) {
        snprintf(err, errlen, "worker %d: eventfd: %s", w->id, strerror(errno));
        return -1;
    }
    w->oauth_ev = event_new(w->base, w->oauth_fd, EV_READ | EV_PERSIST, oauth_cb, w);
    if (w->oauth_ev == NULL || event_add(w->oauth_ev, NULL) < 0 ||
        oauth_watch(w->sh->oauth, w->oauth_fd) < 0) {
        snprintf(err, errlen, "worker %d: token manager wake-up", w->id);
        return -1;
    }
    return 0;
}

/*
 * A worker's request lines are written once per loop turn, not one write(2) each: the first
 * line of a turn activates this event, which libevent runs after the callbacks already due in
 * that turn, and it writes the batch (audit/log.c). Errors and warnings are never held back.
 */
static void log_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    log_flush();
}

static void log_wake(void *arg)
{
    event_active(arg, EV_TIMEOUT, 1);
}

/* Workers whose loops run, counted for worker_start_all (which waits for all of them). */
struct worker_startup {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int running;
};

/* The loop's first callback: the listeners were registered on this base before the thread
 * started, so from here on each one accepts. Tells worker_start_all; the pointer is not kept. */
static void on_loop_running(evutil_socket_t fd, short what, void *arg)
{
    struct worker *w = arg;
    struct worker_startup *su = w->startup;

    w->startup = NULL;
    pthread_mutex_lock(&su->lock);
    su->running++;
    pthread_cond_broadcast(&su->cond);
    pthread_mutex_unlock(&su->lock);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    evmem_thread_begin();
    w->log_flush_ev = event_new(w->base, -1, 0, log_flush_cb, NULL);
    if (w->log_flush_ev != NULL)
        log_batch_begin(log_wake, w->log_flush_ev);
    event_base_dispatch(w->base);
    MODULES_RUN(w, end);
    log_batch_end();
    if (w->log_flush_ev != NULL)
        event_free(w->log_flush_ev);
    w->log_flush_ev = NULL;
    evmem_thread_end();
    return NULL;
}

/* The worker's listeners, each handed to the module that accepts its kind. 0 or -1 + err. */
static int worker_listen(struct worker *w, char *err, size_t errlen)
{
    struct worker_shared *sh = w->sh;

    w->slots = calloc(sh->naddrs > 0 ? sh->naddrs : 1, sizeof(w->slots[0]));
    if (w->slots == NULL)
        return -1;
    for (size_t i = 0; i < sh->naddrs; i++) {
        struct worker_slot *s = &w->slots[i];

        s->w = w;
        s->la = &sh->addrs[i];
        s->fd = sh->addrs[i].fds[w->id];
        sh->addrs[i].fds[w->id] = -1; /* the slot's now, closed with it */
        w->nslots = i + 1;
        s->m = module_accepting(sh, s->la->kind);
        if (s->m == NULL) {
            snprintf(err, errlen, "worker %d: nothing accepts on %s", w->id, s->la->label);
            return -1;
        }
        s->resume = evtimer_new(w->base, resume_cb, s);
        s->ev = event_new(w->base, s->fd, EV_READ | EV_PERSIST, accept_cb, s);
        if (s->resume == NULL || s->ev == NULL || event_add(s->ev, NULL) < 0) {
            snprintf(err, errlen, "worker %d: listener %s", w->id, s->la->label);
            return -1;
        }
    }
    return 0;
}

static int worker_init(struct worker *w, struct worker_shared *sh, int id, char *err, size_t errlen)
{
    struct event_config *cfg = NULL;
    int ret = -1;

    w->id = id;
    w->sh = sh;
    w->ctl_fd = -1;
    w->oauth_fd = -1;
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
    w->ctl_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->ctl_fd < 0) {
        snprintf(err, errlen, "worker %d: eventfd: %s", id, strerror(errno));
        goto out;
    }
    w->ctl_ev = event_new(w->base, w->ctl_fd, EV_READ | EV_PERSIST, ctl_cb, w);
    if (w->ctl_ev == NULL || event_add(w->ctl_ev, NULL) < 0)
        goto out;
    if (worker_oauth_init(w, err, errlen) < 0 || worker_listen(w, err, errlen) < 0 ||
        modules_init(w, err, errlen) < 0)
        goto out;
    ret = 0;
out:
    if (ret < 0 && err[0] == '\0')
        snprintf(err, errlen, "worker %d: out of memory", id);
    if (cfg != NULL)
        event_config_free(cfg);
    return ret;
}

static void worker_free(struct worker *w)
{
    worker_abort_conns(w);
    worker_free_listeners(w);
    modules_free(w);
    upstream_ctx_free(&w->up);
    if (w->ctl_ev != NULL)
        event_free(w->ctl_ev);
    if (w->ctl_fd >= 0)
        close(w->ctl_fd);
    if (w->oauth_ev != NULL)
        event_free(w->oauth_ev);
    if (w->oauth_fd >= 0) {
        oauth_unwatch(w->sh->oauth, w->oauth_fd); /* before the number can be reused */
        close(w->oauth_fd);
    }
    policy_unref(&w->policy);
    if (w->base != NULL)
        event_base_free(w->base);
    memset(w, 0, sizeof(*w));
}

struct worker *worker_start_all(struct worker_shared *sh, char *err, size_t errlen)
{
    struct worker_startup su = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct worker *ws = calloc((size_t)sh->nworkers, sizeof(*ws)), *ret = NULL;
    int i;

    if (ws == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    err[0] = '\0';
    evmem_install();
    for (i = 0; i < sh->nworkers; i++)
        ws[i].ctl_fd = ws[i].oauth_fd = -1;
    for (i = 0; i < sh->nworkers; i++) {
        if (worker_init(&ws[i], sh, i, err, errlen) < 0)
            goto fail;
        ws[i].startup = &su;
        if (event_base_once(ws[i].base, -1, EV_TIMEOUT, on_loop_running, &ws[i], NULL) < 0) {
            snprintf(err, errlen, "worker %d: out of memory", i);
            goto fail;
        }
    }
    for (i = 0; i < sh->nworkers; i++) {
        if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0) {
            snprintf(err, errlen, "worker %d: cannot start thread", i);
            goto fail;
        }
        ws[i].started = true;
    }
    /* SPEC §7: the admin API answers only once every listener accepts, so the caller starts
     * it after this returns; a worker's loop accepts once it runs its first callback */
    pthread_mutex_lock(&su.lock);
    while (su.running < sh->nworkers)
        pthread_cond_wait(&su.cond, &su.lock);
    pthread_mutex_unlock(&su.lock);
    ret = ws;
fail:
    if (ret == NULL)
        worker_stop_all(&ws, sh->nworkers, 0); /* joins: no loop reports to su after this */
    pthread_cond_destroy(&su.cond);
    pthread_mutex_destroy(&su.lock);
    return ret;
}

static void worker_send(struct worker *w, int cmd)
{
    uint64_t one = 1;
    ssize_t r;

    if (w->ctl_fd < 0)
        return;
    atomic_store(&w->ctl_cmd, cmd);
    r = write(w->ctl_fd, &one, sizeof(one));
    (void)r;
}

void worker_refresh_all(struct worker *ws, int nworkers)
{
    for (int i = 0; ws != NULL && i < nworkers; i++) {
        if (ws[i].started && atomic_load(&ws[i].ctl_cmd) != WORKER_CMD_DRAIN)
            worker_send(&ws[i], WORKER_CMD_POLICY);
    }
}

void worker_stop_all(struct worker **wsp, int nworkers, double grace_s)
{
    struct worker *ws = *wsp;
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
            worker_send(&ws[i], WORKER_CMD_DRAIN);
    }
    for (int i = 0; i < nworkers; i++) {
        if (!ws[i].started)
            continue;
        if (pthread_timedjoin_np(ws[i].thread, NULL, &deadline) != 0) {
            log_eventf(LOG_WARN, "stop", "grace_expired",
                       "worker %d: closing connections still open after %.0f s", i, grace_s);
            worker_send(&ws[i], WORKER_CMD_ABORT);
            pthread_join(ws[i].thread, NULL);
        }
        ws[i].started = false;
    }
    for (int i = 0; i < nworkers; i++)
        worker_free(&ws[i]);
    free(ws);
    *wsp = NULL;
}
