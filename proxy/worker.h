/*
 * worker.h - the worker threads of `vaultgate run`: one event loop each, the connections it
 * accepted, its reference to the policy snapshot, its log batch, and the drain and abort of a
 * stop (ARCHITECTURE.md "Threads and shared state").
 *
 * Each worker owns an event_base, an upstream context, one listening socket per listener (bound
 * by listen.c), its modules' state and every connection it accepted, from accept to close.
 * Nothing outside worker.c touches a worker's connection list: a connection joins it with
 * worker_attach() and leaves it with worker_detach() from its own teardown.
 *
 * The worker names no module above it: each one registers a struct worker_module before the
 * workers start (worker_module_add) - what it accepts on which listeners, its per-worker state
 * and the hooks the worker runs at its start, its stop, a reload, a token manager's wake-up and
 * its end.
 */
#ifndef VG_WORKER_H
#define VG_WORKER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include "common/timeouts.h"
#include "policy/policy.h"
#include "proxy/dlq.h"
#include "proxy/dns.h"
#include "proxy/listen.h"

struct event_base;
struct event;
struct upstream_config;
struct upstream_ctx;
struct certcache;
struct audit;
struct ca;
struct worker_slot;
struct worker;
struct oauth;

/* Modules a run may register (worker_module_add). */
#define WORKER_MODULES_MAX 16

/*
 * A part of the proxy that accepts on the workers' listeners or keeps state on each worker.
 * Registered once before the workers start; every hook is optional (NULL) and runs on the
 * worker's thread, except init and free, which run on the main thread before the worker's loop
 * starts and after it ended. Hooks run in the order of registration, free in the reverse order.
 */
struct worker_module {
    const char *name;
    /* The listener kinds whose sockets this module takes (bits 1u << enum listen_kind), and
     * what it does with one: fd is the module's from the call on, closed on any failure. */
    unsigned accepts;
    void (*accept)(struct worker *w, const struct listen_addr *la, int fd,
                   const struct sockaddr *sa, int salen);
    /* The worker starts (its loop and listeners exist, nothing runs yet). 0 or -1 + err. */
    int (*init)(struct worker *w, char *err, size_t errlen);
    /* The listeners close (a drain, an abort, the end); may run more than once. */
    void (*stop)(struct worker *w);
    /* The worker took a new policy snapshot after a reload. */
    void (*refresh)(struct worker *w);
    /* The token manager changed a source's state (a token arrived, its endpoint failed). */
    void (*wake)(struct worker *w);
    /* The worker's loop ended, on the worker's own thread: what the module keeps per thread
     * goes. */
    void (*end)(struct worker *w);
    /* The worker's end, after its connections and before its event base: frees the module's
     * state. Runs whether init ran or not. */
    void (*free)(struct worker *w);
};

/* State every worker reads; written only by the main thread before workers start, except the
 * policy pointer (policy_lock) and the atomics. */
struct worker_shared {
    struct ca *ca;
    struct certcache *certs;
    struct audit *audit;
    enum policy_mode mode; /* routing mode the CA was built for; fixed for the run */
    const struct upstream_config *upcfg;
    unsigned char ticket_keys[80]; /* shared session ticket keys: resumption across workers */
    struct listen_addr *addrs;
    size_t naddrs;
    int nworkers;
    int max_conns; /* connections past this are answered 503 (VG_CONN_BUSY_RESERVE), then closed */
    struct vg_timeouts timeouts; /* SPEC §4, --timeout */
    struct oauth *oauth;         /* the OAuth token manager (proxy/oauth.h), or NULL */
    struct dns_answers dns;      /* --dns-answer (proxy/dns.h) */
    const struct worker_module *modules[WORKER_MODULES_MAX]; /* worker_module_add, in order */
    size_t nmodules;

    pthread_mutex_t policy_lock;
    struct policy *policy; /* current snapshot; the shared structure holds one reference */
    _Atomic uint64_t policy_gen;
    _Atomic int active_conns; /* over all workers */
};

/*
 * What a worker can ask of a connection it holds. Both are called on the worker's thread from
 * worker.c only; the connection may detach (and free itself) inside either.
 */
struct worker_link;
struct worker_link_ops {
    /* Stop: close now if nothing is in flight, else after the current response. */
    void (*drain)(struct worker_link *l);
    /* Close now. */
    void (*abort)(struct worker_link *l);
};

/* Embedded in every connection object a worker holds. */
struct worker_link {
    struct worker_link *prev, *next;
    const struct worker_link_ops *ops;
};

struct worker {
    int id;
    struct worker_shared *sh;
    struct event_base *base;
    struct upstream_ctx *up;
    struct worker_slot *slots; /* one per listener: its socket, its read event (worker.c) */
    size_t nslots;
    struct policy *policy; /* this worker's reference to the snapshot of policy_gen */
    uint64_t policy_gen;
    struct worker_link *conns; /* every live connection */
    size_t nconns;
    uint64_t next_conn_id;
    int ctl_fd; /* eventfd: the main thread asks for a stop or a snapshot refresh */
    struct event *ctl_ev;
    _Atomic int ctl_cmd;
    int oauth_fd; /* eventfd: the token manager says a token arrived or its endpoint failed */
    struct event *oauth_ev;
    void *mstate[WORKER_MODULES_MAX]; /* each registered module's state (worker_module_state) */
    bool draining;
    struct event *log_flush_ev;
    struct worker_startup *startup; /* until the loop runs: worker_start_all waits on it */
    pthread_t thread;
    bool started;
};

/* Registers m for the workers sh starts (before worker_start_all; m outlives them). A module
 * registered twice counts once. 0, or -1 when WORKER_MODULES_MAX are registered. */
int worker_module_add(struct worker_shared *sh, const struct worker_module *m);

/* Where m keeps its state on w (NULL until the module puts something there), or NULL when m
 * is not registered. Worker thread (or the main thread in init and free). */
void **worker_module_state(struct worker *w, const struct worker_module *m);

/*
 * A module whose state is a set of deadline queues (dlq.h), one per duration its owners wait
 * (h1conn's connections, the exchanges): worker_dlq_init makes them from ms[n] in the module's
 * init hook (0, or -1 + err), worker_dlq_free frees them in its free hook, and worker_dlq gives
 * the queue of a duration: NULL once the set is freed (the worker's end, when no timer runs
 * again); a duration the set was not made with is a bug, and aborts.
 */
int worker_dlq_init(struct worker *w, const struct worker_module *m, const int64_t *ms, size_t n,
                    dlq_cb cb, char *err, size_t errlen);
void worker_dlq_free(struct worker *w, const struct worker_module *m);
struct dlq *worker_dlq(struct worker *w, const struct worker_module *m, int64_t ms);

/* Creates the workers (event base, upstream ctx, listeners on the sockets bound by listen.c,
 * each one accepted by the module that accepts its kind; every module's init) and starts their
 * threads; returns once every worker's loop runs, so each listener
 * accepts. Returns an array of sh->nworkers workers, or NULL + err. */
struct worker *worker_start_all(struct worker_shared *sh, char *err, size_t errlen);

/* Asks every worker to stop accepting and to close connections as their requests finish, then
 * waits up to grace_s seconds; connections still open then are closed. Frees the workers. */
void worker_stop_all(struct worker **wsp, int nworkers, double grace_s);

/* Asks every worker to take the current snapshot now and drop its reference to the previous
 * one (so a reloaded-away snapshot and its secrets go once the connections that hold it end,
 * even on a worker that accepts nothing new). Main thread. */
void worker_refresh_all(struct worker *ws, int nworkers);

/* Replaces the shared snapshot; takes ownership of p. Any thread. */
void worker_policy_swap(struct worker_shared *sh, struct policy *p);

/* New reference to the current snapshot. Any thread (admin status). */
struct policy *worker_policy_ref(struct worker_shared *sh);

/* The worker's current snapshot (borrowed; take policy_ref to keep it). Worker thread only. */
struct policy *worker_policy(struct worker *w);

/*
 * A new connection joins w (counted in connections_active) under a fresh id, returned. The
 * link stays valid until worker_detach(). Worker thread only.
 */
uint64_t worker_attach(struct worker *w, struct worker_link *l, const struct worker_link_ops *ops);

/* The connection of `from` goes on as `to` (a transport hands its socket to another): the same
 * place in the list, nothing counted. */
void worker_replace(struct worker *w, struct worker_link *from, struct worker_link *to,
                    const struct worker_link_ops *ops);

/* A connection leaves w for good (its teardown). A draining worker whose last connection left
 * ends its loop. */
void worker_detach(struct worker *w, struct worker_link *l);

/*
 * What a stop command runs on the worker's thread: drain closes listeners and asks every
 * connection to finish its current response (the loop ends with the last one); abort closes
 * every connection at once and ends the loop.
 */
void worker_drain(struct worker *w);
void worker_abort(struct worker *w);

#endif
