/*
 * listen.c - the listening sockets (sockets only: worker.c runs the listeners).
 *
 * Guarantees: every listening socket is bound before the first worker starts, so a listener that
 * cannot bind fails the start (exit 4) before any traffic, and none listens before every other
 * enforcement piece exists; one socket per worker per listener (SO_REUSEPORT), so the kernel
 * spreads connections over workers without a shared accept lock; an address something else
 * already listens on - another vaultgate of the same user included, which SO_REUSEPORT alone
 * would let in to take a share of the connections - fails the start, with no race (see
 * bind_one and listen_listen_all); accepting takes one accept4 per connection, none to learn that
 * the queue is empty (listen_accept_batch).
 */
#include "proxy/listen.h"
#include "common/caps.h"
#include "common/hostport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netdb.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const kind_names[] = {"https", "http", "proxy", "dns"};

int listen_parse_addr(const char *s, enum listen_kind kind, struct listen_addr *out, char *err,
                      size_t errlen)
{
    struct hostport hp;
    int rc = hostport_parse(s, strlen(s), HOSTPORT_PORT_REQUIRED, &hp);

    if (rc == HOSTPORT_EPORT) {
        snprintf(err, errlen, "'%s': port must be 1-65535", s);
        return -1;
    }
    if (rc < 0) {
        snprintf(err, errlen, "'%s' is not host:port or [v6]:port", s);
        return -1;
    }
    memset(out, 0, sizeof(*out));
    if (hp.kind == HOSTNAME_DNS || hostport_sockaddr(&hp, hp.port, &out->ss, &out->sslen) < 0) {
        snprintf(err, errlen, "'%s': host must be an IPv4 address or a bracketed IPv6 address", s);
        return -1;
    }
    out->kind = kind;
    out->port = hp.port;
    snprintf(out->label, sizeof(out->label), "%s %s%.*s%s:%d", kind_names[kind],
             hp.bracketed ? "[" : "", (int)hp.rawlen, hp.raw, hp.bracketed ? "]" : "", hp.port);
    out->fds = NULL;
    out->udp_fd = -1;
    return 0;
}

/* "listener https 127.0.0.1:8443: Address already in use (...)" for the errno of a bind/listen. */
static void listen_fail(const struct listen_addr *la, int e, char *err, size_t errlen)
{
    snprintf(err, errlen, "listener %s: %s%s", la->label, strerror(e),
             e == EADDRINUSE ? " (another socket already holds this address)"
             : e == EACCES && la->port < 1024
                 ? " (needs root, CAP_NET_BIND_SERVICE, or a port above 1023)"
                 : "");
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

/*
 * The UDP socket of a DNS listener: one, bound without SO_REUSEADDR and SO_REUSEPORT, so the
 * kernel refuses it when any UDP socket holds an overlapping address and no other socket can
 * join it later. The query's destination address comes with each datagram (the answer's
 * source, and the default A record, on a wildcard address too).
 */
static int bind_udp(const struct listen_addr *la, char *err, size_t errlen)
{
    int fd, one = 1;

    fd = socket(la->ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    if (la->ss.ss_family == AF_INET6 &&
        (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0 ||
         setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one)) < 0))
        goto fail;
    if (la->ss.ss_family == AF_INET &&
        setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one)) < 0)
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

int listen_udp_worker(size_t i, int nworkers)
{
    return (int)(i % (size_t)nworkers);
}

void listen_close_fds(struct listen_addr *addrs, size_t naddrs, int nworkers)
{
    for (size_t i = 0; i < naddrs; i++) {
        struct listen_addr *la = &addrs[i];

        if (la->udp_fd >= 0)
            close(la->udp_fd);
        la->udp_fd = -1;
        if (la->fds == NULL)
            continue;
        for (int k = 0; k < nworkers; k++) {
            if (la->fds[k] >= 0)
                close(la->fds[k]);
        }
        free(la->fds);
        la->fds = NULL;
    }
}

int listen_bind_all(struct listen_addr *addrs, size_t naddrs, int nworkers, char *err,
                    size_t errlen)
{
    for (size_t i = 0; i < naddrs; i++) {
        struct listen_addr *la = &addrs[i];

        la->fds = malloc(sizeof(int) * (size_t)nworkers);
        if (la->fds == NULL) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        for (int k = 0; k < nworkers; k++)
            la->fds[k] = -1;
        for (int k = 0; k < nworkers; k++) {
            la->fds[k] = bind_one(la, k == 0, err, errlen);
            if (la->fds[k] < 0)
                goto fail;
        }
        if (la->kind == LISTEN_DNS && (la->udp_fd = bind_udp(la, err, errlen)) < 0)
            goto fail;
    }
    return 0;
fail:
    listen_close_fds(addrs, naddrs, nworkers);
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
int listen_listen_all(struct listen_addr *addrs, size_t naddrs, int nworkers, char *err,
                      size_t errlen)
{
    int one = 1;

    for (size_t i = 0; i < naddrs; i++) {
        const struct listen_addr *la = &addrs[i];

        for (int k = 0; la->fds != NULL && k < nworkers; k++) {
            if (la->fds[k] < 0)
                continue;
            if (listen(la->fds[k], VG_LISTEN_BACKLOG) < 0 ||
                (k == 0 && nworkers > 1 &&
                 setsockopt(la->fds[0], SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)) {
                listen_fail(la, errno, err, errlen);
                return -1;
            }
        }
    }
    return 0;
}

int listen_default_max_conns(size_t naddrs, int nworkers, long nofile)
{
    long n = (nofile - VG_CONN_FD_RESERVE - VG_CONN_BUSY_RESERVE - (long)naddrs * nworkers) / 2;

    if (n < 16)
        n = 16; /* a tiny descriptor limit: accept pauses on EMFILE do the rest */
    return n > VG_CONN_MAX_LIMIT ? VG_CONN_MAX_LIMIT : (int)n;
}

int listen_accept_batch(int lfd, int budget, listen_accept_fn fn, void *arg, int *err)
{
    int n = 0;

    *err = 0;
    while (n < budget) {
        struct sockaddr_storage ss;
        socklen_t sslen = sizeof(ss);
        int fd = accept4(lfd, (struct sockaddr *)&ss, &sslen, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED && errno != EINTR)
                *err = errno;
            break;
        }
        n++;
        fn(arg, fd, (const struct sockaddr *)&ss, sslen);
    }
    return n;
}

int listen_accept_pauses(int e)
{
    return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}
