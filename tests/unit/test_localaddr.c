/*
 * test_localaddr.c - suite `localaddr` (proxy/localaddr.c, and the destination rule that uses it
 * in proxy/upstream_rules.c): every address getifaddrs() lists is local; an address added to or
 * removed from an interface after the set was read is seen at the very next check, with no wait
 * (the change is made in a network namespace of the test's own, in a child process, so the test
 * machine's interfaces are never touched); and such an address is refused by
 * upstream_dest_allowed unless pinned or allow-listed, and always on a wildcard listener's port.
 */
#include "proxy/localaddr.h"
#include "proxy/upstream.h"
#include "proxy/upstream_int.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define SKIPPED 77

static void to_bin(const char *ip, uint8_t *a, size_t *len)
{
    if (inet_pton(AF_INET, ip, a) == 1) {
        *len = 4;
        return;
    }
    ck_assert(inet_pton(AF_INET6, ip, a) == 1);
    *len = 16;
}

static int has(struct localaddr *l, const char *ip)
{
    uint8_t a[16];
    size_t len;

    to_bin(ip, a, &len);
    return localaddr_has(l, a, len);
}

START_TEST(test_lists_interfaces)
{
    struct localaddr *l = localaddr_new();
    struct ifaddrs *ifs = NULL;
    int n = 0;

    ck_assert_ptr_nonnull(l);
    ck_assert_int_eq(getifaddrs(&ifs), 0);
    for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
        const struct sockaddr *sa = i->ifa_addr;

        if (sa != NULL && sa->sa_family == AF_INET) {
            ck_assert(localaddr_has(
                l, (const uint8_t *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4));
            n++;
        } else if (sa != NULL && sa->sa_family == AF_INET6) {
            ck_assert(localaddr_has(
                l, (const uint8_t *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
                16));
            n++;
        }
    }
    freeifaddrs(ifs);
    ck_assert_int_gt(n, 0);
    ck_assert(has(l, "127.0.0.1"));
    ck_assert(has(l, "::ffff:127.0.0.1")); /* the mapped form is the IPv4 address */
    ck_assert(!has(l, "192.0.2.77"));      /* documentation addresses are nobody's */
    ck_assert(!has(l, "2001:db8::77"));
    localaddr_free(&l);
    ck_assert_ptr_null(l);
    localaddr_free(&l);
}
END_TEST

START_TEST(test_bad_input)
{
    struct localaddr *l = localaddr_new();
    static const uint8_t a[16] = {127, 0, 0, 1};

    ck_assert_int_eq(localaddr_has(NULL, a, 4), 0);
    ck_assert_int_eq(localaddr_has(l, a, 0), 0);
    ck_assert_int_eq(localaddr_has(l, a, 5), 0);
    ck_assert_int_eq(localaddr_has(l, a, 4), 1);
    localaddr_free(&l);
}
END_TEST

/* ---- in a network namespace of a child process ---- */

/* The kernel's struct in6_ifreq (linux/ipv6.h clashes with netinet/in.h). */
struct vg_in6_ifreq {
    struct in6_addr addr;
    uint32_t prefixlen;
    int ifindex;
};

/* Adds (add) or removes an address on lo: IPv4 as the alias lo:7, IPv6 directly. 0 or -1. */
static int lo_addr(const char *ip, int add)
{
    struct ifreq ifr;
    struct vg_in6_ifreq r6;
    int fd, rc;

    memset(&ifr, 0, sizeof(ifr));
    if (strchr(ip, ':') == NULL) {
        struct sockaddr_in *sin = (struct sockaddr_in *)(void *)&ifr.ifr_addr;

        fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo:7");
        if (add) {
            sin->sin_family = AF_INET;
            inet_pton(AF_INET, ip, &sin->sin_addr);
            rc = ioctl(fd, SIOCSIFADDR, &ifr);
        } else {
            rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
            ifr.ifr_flags = (short)(ifr.ifr_flags & ~IFF_UP); /* takes an alias away */
            rc = rc == 0 ? ioctl(fd, SIOCSIFFLAGS, &ifr) : rc;
        }
    } else {
        fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        memset(&r6, 0, sizeof(r6));
        inet_pton(AF_INET6, ip, &r6.addr);
        r6.prefixlen = 128;
        r6.ifindex = (int)if_nametoindex("lo");
        rc = ioctl(fd, add ? SIOCSIFADDR : SIOCDIFADDR, &r6);
    }
    close(fd);
    return rc;
}

static int lo_up(void)
{
    struct ifreq ifr;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
    ifr.ifr_flags = (short)(ifr.ifr_flags | IFF_UP);
    rc = rc == 0 ? ioctl(fd, SIOCSIFFLAGS, &ifr) : rc;
    close(fd);
    return rc;
}

static bool allowed(struct localaddr *l, const struct addr_cidr *allow, size_t nallow,
                    const char *ip, int port, bool exempt)
{
    union upstream_sa sa;

    if (upstream_parse_ip(ip, strlen(ip), port, &sa) != 0)
        return false;
    return upstream_dest_allowed(allow, nallow, l, "own.example", &sa, exempt);
}

/* The child's checks; returns 0, SKIPPED, or the number of the check that failed. */
static int changes_child(void)
{
    static const char *const ips[] = {"11.0.0.7", "2a02:ffff:ffff::7"};
    struct localaddr *l;
    struct addr_cidr allow[2];
    struct sockaddr_in wild;

    if (unshare(CLONE_NEWNET) != 0 || lo_up() != 0)
        return SKIPPED;
    l = localaddr_new(); /* read before the addresses exist */
    if (l == NULL)
        return 1;
    for (size_t i = 0; i < 2; i++) {
        int base = 10 * ((int)i + 1);

        if (has(l, ips[i]) || !allowed(l, NULL, 0, ips[i], 443, false))
            return base + 1;
        if (lo_addr(ips[i], 1) != 0)
            return base + 2;
        /* seen at once, and refused on any port unless pinned or allow-listed */
        if (!has(l, ips[i]) || allowed(l, NULL, 0, ips[i], 443, false) ||
            allowed(l, NULL, 0, ips[i], 8443, false))
            return base + 3;
        if (!allowed(l, NULL, 0, ips[i], 443, true))
            return base + 4;
        if (addr_parse_cidr(ips[i], &allow[i]) != 0 ||
            !allowed(l, &allow[i], 1, ips[i], 443, false))
            return base + 5;
        if (lo_addr(ips[i], 0) != 0)
            return base + 6;
        if (has(l, ips[i]) || !allowed(l, NULL, 0, ips[i], 443, false))
            return base + 7;
    }
    /* a wildcard listener's port on an address of the machine is vaultgate itself: refused
     * even pinned, also for an address added after the listener was registered */
    memset(&wild, 0, sizeof(wild));
    wild.sin_family = AF_INET;
    wild.sin_port = htons(443);
    if (upstream_add_own_address((struct sockaddr *)&wild) != 0 || lo_addr(ips[0], 1) != 0)
        return 31;
    if (allowed(l, NULL, 0, ips[0], 443, true) || !allowed(l, NULL, 0, ips[0], 444, true))
        return 32;
    localaddr_free(&l);
    return 0;
}

START_TEST(test_follows_changes)
{
    int status = 0;
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(changes_child());
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == SKIPPED) {
        fprintf(stderr, "localaddr: no network namespace here (needs root), change test skipped\n");
        return;
    }
    ck_assert_msg(WEXITSTATUS(status) == 0, "check %d failed", WEXITSTATUS(status));
}
END_TEST

Suite *suite_localaddr(void);

Suite *suite_localaddr(void)
{
    Suite *s = suite_create("localaddr");
    TCase *tc = tcase_create("localaddr");

    tcase_add_test(tc, test_lists_interfaces);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_follows_changes);
    suite_add_tcase(s, tc);
    return s;
}
