/*
 * listen.c - the listening sockets (sockets only: worker.c runs the listeners).
 *
 * Guarantees: every listening socket is bound before the first worker starts, so a listener that
 * cannot bind fails the start (exit 4) before any traffic, and none listens before every other
 * enforcement piece exists; one socket per worker per listener (SO_REUSEPORT), so the kernel
 * spreads connections over workers without a shared accept lock.
 */
#include "proxy/listen.h"
#include "common/caps.h"

#include <arpa/inet.h>
#include <errno.h>
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

static int bind_one(const struct listen_addr *la, char *err, size_t errlen)
{
    int fd, one = 1;

    fd = socket(la->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto fail;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
        goto fail;
    if (la->ss.ss_family == AF_INET6 &&
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
        goto fail;
    if (bind(fd, (const struct sockaddr *)&la->ss, la->sslen) < 0)
        goto fail;
    return fd;
fail:
    snprintf(err, errlen, "listener %s: %s", la->label, strerror(errno));
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
            la->fds[k] = bind_one(la, err, errlen);
            if (la->fds[k] < 0)
                goto fail;
        }
    }
    return 0;
fail:
    listen_close_fds(addrs, naddrs, nworkers);
    return -1;
}

int listen_listen_all(struct listen_addr *addrs, size_t naddrs, int nworkers, char *err,
                      size_t errlen)
{
    for (size_t i = 0; i < naddrs; i++) {
        const struct listen_addr *la = &addrs[i];

        for (int k = 0; la->fds != NULL && k < nworkers; k++) {
            if (la->fds[k] >= 0 && listen(la->fds[k], VG_LISTEN_BACKLOG) < 0) {
                snprintf(err, errlen, "listener %s: %s", la->label, strerror(errno));
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
