/*
 * localaddr.c - the machine's own addresses, for the destination rules.
 *
 * Guarantees: localaddr_has() answers from a sorted copy of getifaddrs() that is never older
 * than the last address change the kernel announced before the call. The set subscribes to the
 * kernel's address notifications (rtnetlink RTMGRP_IPV4_IFADDR and RTMGRP_IPV6_IFADDR) on a
 * non-blocking socket; each check drains that socket with one recv(MSG_DONTWAIT), which costs a
 * system call and no wait, and reads the interface list again only when something arrived (or
 * the socket overflowed: notifications were lost). Without netlink (a sandbox that forbids the
 * socket) the list is read again when it is older than LOCALADDR_POLL_MS. When the list cannot
 * be read, the last one stays and the next check tries again. Never blocks, never logs a peer's
 * data.
 */
#include "proxy/localaddr.h"
#include "audit/log.h"

#include <errno.h>
#include <ifaddrs.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* Addresses kept per set (a host with more: the rest are not known; a warning says so). */
#define LOCALADDR_MAX     65536
#define LOCALADDR_POLL_MS 1000 /* re-read interval when no netlink socket could be opened */

struct local_ip {
    uint8_t len; /* 4 or 16 */
    uint8_t a[16];
};

/* Warnings logged once per process, not once per worker. */
static atomic_flag warned_polled = ATOMIC_FLAG_INIT;
static atomic_flag warned_unreadable = ATOMIC_FLAG_INIT;

struct localaddr {
    int nl;      /* rtnetlink socket subscribed to address changes, or -1 */
    bool stale;  /* the list must be read again before the next answer */
    bool capped; /* a warning about LOCALADDR_MAX was logged */
    struct timespec loaded;
    struct local_ip *ips; /* sorted by (len, a) */
    size_t n;
};

static int ip_cmp(const void *x, const void *y)
{
    const struct local_ip *a = x, *b = y;

    if (a->len != b->len)
        return a->len < b->len ? -1 : 1;
    return memcmp(a->a, b->a, a->len);
}

/* addr (len 4 or 16) as a key, IPv4-mapped reduced to IPv4. */
static void ip_set(struct local_ip *out, const uint8_t *addr, size_t len)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};

    memset(out, 0, sizeof(*out));
    if (len == 16 && memcmp(addr, mapped, 12) == 0) {
        addr += 12;
        len = 4;
    }
    out->len = (uint8_t)len;
    memcpy(out->a, addr, len);
}

/* An interface address (AF_INET or AF_INET6) as a key. 0, or -1 for other families. */
static int ip_of(const struct sockaddr *sa, struct local_ip *out)
{
    if (sa != NULL && sa->sa_family == AF_INET) {
        ip_set(out, (const uint8_t *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return 0;
    }
    if (sa != NULL && sa->sa_family == AF_INET6) {
        ip_set(out, (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
               16);
        return 0;
    }
    return -1;
}

static long ms_since(const struct timespec *t)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

/* Reads the interface list into l. 0, or -1 with the old list kept. */
static int reload(struct localaddr *l)
{
    struct ifaddrs *ifs = NULL, *i;
    struct local_ip *ips = NULL;
    size_t n = 0, cap = 0, w;

    if (getifaddrs(&ifs) != 0) {
        if (!atomic_flag_test_and_set(&warned_unreadable))
            log_eventf(LOG_WARN, "local_addresses_unreadable", "getifaddrs_failed",
                       "cannot read the machine's addresses (%s); the last list read, or only "
                       "the listener addresses, are refused until it can",
                       strerror(errno));
        return -1;
    }
    for (i = ifs; i != NULL; i = i->ifa_next)
        cap++;
    if (cap > LOCALADDR_MAX) {
        if (!l->capped)
            log_eventf(LOG_WARN, "local_addresses_capped", "resource_limit",
                       "%zu interface addresses, only the first %d are known to the "
                       "destination rules",
                       cap, LOCALADDR_MAX);
        l->capped = true;
        cap = LOCALADDR_MAX;
    }
    ips = calloc(cap > 0 ? cap : 1, sizeof(*ips));
    if (ips == NULL) {
        freeifaddrs(ifs);
        return -1;
    }
    for (i = ifs; i != NULL && n < cap; i = i->ifa_next) {
        if (ip_of(i->ifa_addr, &ips[n]) == 0)
            n++;
    }
    freeifaddrs(ifs);
    qsort(ips, n, sizeof(*ips), ip_cmp);
    for (size_t r = w = 0; r < n; r++) {
        if (w == 0 || ip_cmp(&ips[w - 1], &ips[r]) != 0)
            ips[w++] = ips[r];
    }
    free(l->ips);
    l->ips = ips;
    l->n = w;
    l->stale = false;
    clock_gettime(CLOCK_MONOTONIC, &l->loaded);
    return 0;
}

/* Opens the notification socket; -1 when the kernel or a sandbox refuses it. */
static int subscribe(void)
{
    struct sockaddr_nl sa;
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.nl_family = AF_NETLINK;
    sa.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;

        close(fd);
        errno = e; /* for the warning */
        return -1;
    }
    return fd;
}

/* Marks l stale when the kernel announced a change since the last look. Never waits. */
static void poll_changes(struct localaddr *l)
{
    char buf[4096];

    if (l->nl < 0) {
        if (ms_since(&l->loaded) >= LOCALADDR_POLL_MS)
            l->stale = true;
        return;
    }
    for (;;) {
        ssize_t got = recv(l->nl, buf, sizeof(buf), MSG_DONTWAIT);

        if (got > 0 || (got < 0 && errno == ENOBUFS)) {
            l->stale = true; /* a change, or changes lost to an overflow */
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            /* the socket broke: from now on re-read on a timer */
            close(l->nl);
            l->nl = -1;
            l->stale = true;
        }
        return;
    }
}

struct localaddr *localaddr_new(void)
{
    struct localaddr *l = calloc(1, sizeof(*l));

    if (l == NULL)
        return NULL;
    l->nl = subscribe();
    if (l->nl < 0 && !atomic_flag_test_and_set(&warned_polled))
        log_eventf(LOG_WARN, "local_addresses_polled", "netlink_unavailable",
                   "no address notifications (%s): the machine's addresses are re-read every "
                   "%d ms",
                   strerror(errno), LOCALADDR_POLL_MS);
    /* subscribed before the first read: a change after it is not missed */
    l->stale = true;
    (void)reload(l);
    return l;
}

void localaddr_free(struct localaddr **lp)
{
    if (lp == NULL || *lp == NULL)
        return;
    if ((*lp)->nl >= 0)
        close((*lp)->nl);
    free((*lp)->ips);
    free(*lp);
    *lp = NULL;
}

int localaddr_has(struct localaddr *l, const uint8_t *addr, size_t len)
{
    struct local_ip key;

    if (l == NULL || (len != 4 && len != 16))
        return 0;
    poll_changes(l);
    if (l->stale)
        (void)reload(l);
    ip_set(&key, addr, len);
    return bsearch(&key, l->ips, l->n, sizeof(*l->ips), ip_cmp) != NULL;
}
