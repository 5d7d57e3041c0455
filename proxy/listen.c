/*
 * listen.c - the listening sockets (sockets only: worker.c runs the listeners).
 *
 * Guarantees: every listening socket is bound before the first worker starts, so a listener that
 * cannot bind fails the start (exit 4) before any traffic, and none listens before every other
 * enforcement piece exists; one socket per worker per listener (SO_REUSEPORT), so the kernel
 * spreads connections over workers without a shared accept lock; an address something else
 * already listens on - another vaultgate of the same user included, which SO_REUSEPORT alone
 * would let in to take a share of the connections - fails the start, with no race (see
 * bind_one and listen_listen_all).
 */
#include "proxy/listen.h"
#include "common/caps.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

void listen_close_fds(struct listen_addr *addrs, size_t naddrs, int nworkers)
{
    for (size_t i = 0; i < naddrs; i++) {
        struct listen_addr *la = &addrs[i];

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
