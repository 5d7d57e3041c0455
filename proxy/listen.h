/*
 * listen.h - the listening sockets of `vaultgate run` (sockets only; worker.h runs them).
 *
 * The main thread parses listener addresses, binds one socket per worker per listener (so a
 * bind failure is known before any traffic; the first claims the address without SO_REUSEPORT,
 * the others join it with SO_REUSEPORT), and only once every other enforcement piece exists
 * puts them into the listening state and starts the workers, each of which takes its own
 * socket of every listener.
 */
#ifndef VG_LISTEN_H
#define VG_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>

enum listen_kind {
    LISTEN_HTTPS = 0,
    LISTEN_HTTP,
    LISTEN_PROXY,
    LISTEN_DNS, /* TCP on fds (per worker, like the others) and one UDP socket, udp_fd */
};

#define LISTEN_LABEL_MAX 96

struct listen_addr {
    enum listen_kind kind;
    struct sockaddr_storage ss;
    socklen_t sslen;
    int port;
    char label[LISTEN_LABEL_MAX]; /* "https 127.0.0.1:8443" */
    int *fds;                     /* one bound socket per worker, -1 once handed over */
    int udp_fd; /* LISTEN_DNS: the one UDP socket (no SO_REUSEPORT: nobody can join it), bound
                   by listen_bind_all, taken by the worker of listen_udp_worker(); else -1 */
};

/* The worker that serves the UDP socket of the i-th DNS listener. */
int listen_udp_worker(size_t i, int nworkers);

/*
 * Parses "host:port" or "[v6]:port" (host an IP literal) into out (kind, ss, port, label).
 * 0 or -1 with a reason in err.
 */
int listen_parse_addr(const char *s, enum listen_kind kind, struct listen_addr *out, char *err,
                      size_t errlen);

/* Binds nworkers sockets for every listener (the first without SO_REUSEPORT, the rest with
 * it; IPV6_V6ONLY for v6), without listen(): the kernel accepts nothing yet. An address
 * something already listens on fails here. A DNS listener also gets its UDP socket, bound
 * without SO_REUSEADDR or SO_REUSEPORT, so a UDP socket anything else holds on an overlapping
 * address fails it too; it receives the query's destination address (IP_PKTINFO,
 * IPV6_RECVPKTINFO). 0 or -1 + err (the caller exits 4); on failure
 * every socket bound so far is closed. */
int listen_bind_all(struct listen_addr *addrs, size_t naddrs, int nworkers, char *err,
                    size_t errlen);

/* listen() on every bound socket, each address's first socket first (it then takes
 * SO_REUSEPORT for the others): from here the kernel completes TCP handshakes. An address
 * another process started listening on since the bind fails here. Call it last, right before
 * worker_start_all(). 0 or -1 + err (the caller exits 4). */
int listen_listen_all(struct listen_addr *addrs, size_t naddrs, int nworkers, char *err,
                      size_t errlen);

/* The default connection limit for a descriptor limit of nofile (see VG_CONN_FD_RESERVE). */
int listen_default_max_conns(size_t naddrs, int nworkers, long nofile);

/* Connections a listening socket accepts per readiness at most (listen_accept_batch). One, as
 * nginx without multi_accept: the epoll wait is level-triggered, so a connection still queued
 * reports the socket ready again, and no accept4 is spent learning that the queue is empty. */
#define LISTEN_ACCEPT_BUDGET 1

/* What listen_accept_batch hands each accepted connection: fd is the callee's from the call on. */
typedef void (*listen_accept_fn)(void *arg, int fd, const struct sockaddr *sa, socklen_t salen);

/*
 * Accepts up to budget connections on the listening socket lfd (accept4, non-blocking and
 * close-on-exec) and hands each to fn, stopping early when the queue is empty (EAGAIN) or a
 * connection went away before it was taken (ECONNABORTED, EINTR: the socket reports ready again
 * if more wait). Returns how many were accepted; *err is 0, or the errno of an accept that
 * failed otherwise (descriptors ran out: EMFILE, ENFILE, ENOBUFS, ENOMEM; see
 * listen_accept_pauses).
 */
int listen_accept_batch(int lfd, int budget, listen_accept_fn fn, void *arg, int *err);

/* Whether accept error e means to stop accepting for a moment: descriptors or memory ran out,
 * so the connection stays queued and every accept would fail at once. */
int listen_accept_pauses(int e);

/* Closes every bound socket not yet handed to a worker, and frees the socket arrays. */
void listen_close_fds(struct listen_addr *addrs, size_t naddrs, int nworkers);

#endif
