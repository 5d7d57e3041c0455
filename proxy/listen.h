/*
 * listen.h - listeners and worker threads of `vaultgate run`.
 *
 * The main thread parses listener addresses, binds one socket per worker per listener (so a
 * bind failure is known before any traffic; the first claims the address without SO_REUSEPORT,
 * the others join it with SO_REUSEPORT), and only once every other enforcement piece exists
 * puts them into the listening state and starts N workers. Each worker
 * owns an event_base, an upstream context, a server SSL_CTX, its listeners and every connection
 * it accepted, from accept to close. The policy snapshot is shared: reload swaps one pointer and
 * each worker picks the new snapshot up on its next connection or request.
 */
#ifndef VG_LISTEN_H
#define VG_LISTEN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include "policy/policy.h"

struct event_base;
struct event;
struct evconnlistener;
struct upstream_config;
struct upstream_ctx;
struct certcache;
struct audit;
struct ca;
struct conn;
struct listen_slot;

enum listen_kind {
    LISTEN_HTTPS = 0,
    LISTEN_HTTP,
    LISTEN_PROXY,
};

#define LISTEN_LABEL_MAX 96

struct listen_addr {
    enum listen_kind kind;
    struct sockaddr_storage ss;
    socklen_t sslen;
    int port;
    char label[LISTEN_LABEL_MAX]; /* "https 127.0.0.1:8443" */
    int *fds;                     /* one bound socket per worker, -1 once handed over */
};

/* State every worker reads; written only by the main thread before workers start, except the
 * policy pointer (policy_lock) and the atomics. */
struct listen_shared {
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

    pthread_mutex_t policy_lock;
    struct policy *policy; /* current snapshot; the shared structure holds one reference */
    _Atomic uint64_t policy_gen;
    _Atomic int active_conns; /* over all workers */
};

struct listen_worker {
    int id;
    struct listen_shared *sh;
    struct event_base *base;
    struct upstream_ctx *up;
    SSL_CTX *ssl_ctx;
    struct evconnlistener **levs;
    struct listen_slot *slots; /* accept callback arguments, one per listener */
    size_t nlevs;
    struct policy *policy; /* this worker's reference to the snapshot of policy_gen */
    uint64_t policy_gen;
    struct conn *conns; /* every live connection, for draining */
    size_t nconns;
    uint64_t next_conn_id;
    int ctl_fd; /* eventfd: the main thread asks for a stop */
    struct event *ctl_ev;
    _Atomic int ctl_cmd;
    bool draining;
    uint64_t limit_refused; /* over-limit connections since the last conn_limit log line */
    int64_t limit_logged;   /* CLOCK_MONOTONIC second of that line */
    pthread_t thread;
    bool started;
};

/*
 * Parses "host:port" or "[v6]:port" (host an IP literal) into out (kind, ss, port, label).
 * 0 or -1 with a reason in err.
 */
int listen_parse_addr(const char *s, enum listen_kind kind, struct listen_addr *out, char *err,
                      size_t errlen);

/* Binds sh->nworkers sockets for every listener (the first without SO_REUSEPORT, the rest
 * with it; IPV6_V6ONLY for v6), without listen(): the kernel accepts nothing yet. An address
 * something already listens on fails here. 0 or -1 + err (the caller exits 4); on failure
 * every socket bound so far is closed. */
int listen_bind_all(struct listen_shared *sh, char *err, size_t errlen);

/* listen() on every bound socket, each address's first socket first (it then takes
 * SO_REUSEPORT for the others): from here the kernel completes TCP handshakes. An address
 * another process started listening on since the bind fails here. Call it last, right before
 * listen_workers_start(). 0 or -1 + err (the caller exits 4). */
int listen_listen_all(struct listen_shared *sh, char *err, size_t errlen);

/* The default connection limit for a descriptor limit of nofile (see VG_CONN_FD_RESERVE). */
int listen_default_max_conns(const struct listen_shared *sh, long nofile);

/* Closes every bound socket not yet handed to a worker. */
void listen_close_fds(struct listen_shared *sh);

/* Creates the workers (event base, upstream ctx, SSL_CTX, listeners) and starts their threads.
 * Returns an array of sh->nworkers workers, or NULL + err. */
struct listen_worker *listen_workers_start(struct listen_shared *sh, char *err, size_t errlen);

/* Asks every worker to stop accepting and to close connections as their requests finish, then
 * waits up to grace_s seconds; connections still open then are closed. Frees the workers. */
void listen_workers_stop(struct listen_worker **wsp, int nworkers, double grace_s);

/* Asks every worker to take the current snapshot now and drop its reference to the previous
 * one (so a reloaded-away snapshot and its secrets go once the connections that hold it end,
 * even on a worker that accepts nothing new). Main thread. */
void listen_workers_refresh(struct listen_worker *ws, int nworkers);

/* Replaces the shared snapshot; takes ownership of p. Any thread. */
void listen_policy_swap(struct listen_shared *sh, struct policy *p);

/* New reference to the current snapshot. Any thread (admin status). */
struct policy *listen_policy_ref(struct listen_shared *sh);

/* The worker's current snapshot (borrowed; take policy_ref to keep it). Worker thread only. */
struct policy *listen_worker_policy(struct listen_worker *w);

#endif
