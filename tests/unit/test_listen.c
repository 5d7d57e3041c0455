/*
 * test_listen.c - the pure parts of the connection path: listener address parsing and the
 * accept budget and back-off (proxy/listen.c), and the SNI extension parser of the ClientHello
 * callback (proxy/tls.c).
 */
#include "proxy/listen.h"
#include "proxy/tls.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

struct addr_case {
    const char *in;
    int ok;
    const char *label; /* expected label when ok */
    int port;
};

static const struct addr_case addr_cases[] = {
    {"127.0.0.1:8443", 1, "https 127.0.0.1:8443", 8443},
    {"0.0.0.0:443", 1, "https 0.0.0.0:443", 443},
    {"[::1]:8443", 1, "https [::1]:8443", 8443},
    {"[::]:1", 1, "https [::]:1", 1},
    {"127.0.0.1:65535", 1, "https 127.0.0.1:65535", 65535},
    {"127.0.0.1:0", 0, NULL, 0},
    {"127.0.0.1:65536", 0, NULL, 0},
    {"127.0.0.1:-1", 0, NULL, 0},
    {"127.0.0.1:+80", 0, NULL, 0},
    {"127.0.0.1:80x", 0, NULL, 0},
    {"127.0.0.1:", 0, NULL, 0},
    {"127.0.0.1", 0, NULL, 0},
    {":8443", 0, NULL, 0},
    {"localhost:8443", 0, NULL, 0}, /* never resolved */
    {"::1:8443", 0, NULL, 0},       /* v6 needs brackets */
    {"[::1]8443", 0, NULL, 0},
    {"[::1]", 0, NULL, 0},
    {"[127.0.0.1]:80", 0, NULL, 0},
    {"256.0.0.1:80", 0, NULL, 0},
    {"", 0, NULL, 0},
};

START_TEST(test_parse_addr)
{
    const struct addr_case *tc = &addr_cases[_i];
    struct listen_addr la;
    char err[256] = "";
    int r = listen_parse_addr(tc->in, LISTEN_HTTPS, &la, err, sizeof(err));

    if (tc->ok) {
        ck_assert_msg(r == 0, "%s: %s", tc->in, err);
        ck_assert_str_eq(la.label, tc->label);
        ck_assert_int_eq(la.port, tc->port);
        ck_assert_int_eq(la.kind, LISTEN_HTTPS);
        ck_assert(la.fds == NULL);
    } else {
        ck_assert_msg(r < 0, "%s accepted", tc->in);
        ck_assert_msg(err[0] != '\0', "%s: no reason", tc->in);
    }
}
END_TEST

START_TEST(test_parse_addr_kinds)
{
    struct listen_addr la;
    char err[256];

    ck_assert_int_eq(listen_parse_addr("127.0.0.1:8080", LISTEN_HTTP, &la, err, sizeof(err)), 0);
    ck_assert_str_eq(la.label, "http 127.0.0.1:8080");
    ck_assert_int_eq(listen_parse_addr("[::1]:3128", LISTEN_PROXY, &la, err, sizeof(err)), 0);
    ck_assert_str_eq(la.label, "proxy [::1]:3128");
    ck_assert_int_eq(la.ss.ss_family, AF_INET6);
    ck_assert_int_eq(listen_parse_addr("127.0.0.1:53", LISTEN_DNS, &la, err, sizeof(err)), 0);
    ck_assert_str_eq(la.label, "dns 127.0.0.1:53");
    ck_assert_int_eq(la.udp_fd, -1);
}
END_TEST

/*
 * A port whose TCP and UDP sides this process holds: TCP bound with SO_REUSEADDR and not
 * listening (the listener's own SO_REUSEADDR binds may join it; no other socket's connect or
 * bind of port 0 may take the port meanwhile), UDP bound plain. Returns the port; *tcp, *udp.
 */
static int hold_port(int *tcp, int *udp)
{
    for (int tries = 0; tries < 100; tries++) {
        struct sockaddr_in sin;
        socklen_t sl = sizeof(sin);
        int one = 1;

        memset(&sin, 0, sizeof(sin));
        sin.sin_family = AF_INET;
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        *tcp = socket(AF_INET, SOCK_STREAM, 0);
        *udp = socket(AF_INET, SOCK_DGRAM, 0);
        ck_assert(*tcp >= 0 && *udp >= 0);
        ck_assert_int_eq(setsockopt(*tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)), 0);
        ck_assert_int_eq(bind(*tcp, (struct sockaddr *)&sin, sizeof(sin)), 0);
        ck_assert_int_eq(getsockname(*tcp, (struct sockaddr *)&sin, &sl), 0);
        if (bind(*udp, (struct sockaddr *)&sin, sizeof(sin)) == 0)
            return ntohs(sin.sin_port);
        close(*tcp); /* that UDP port is taken: another */
        close(*udp);
    }
    ck_abort_msg("no port free for both TCP and UDP");
    return -1;
}

/* A DNS listener binds TCP and one UDP socket; a UDP port another socket holds fails it, naming
 * the listener, and leaves nothing bound. */
START_TEST(test_bind_dns)
{
    struct listen_addr la;
    char err[256], addr[64];
    int tcp, udp;
    int port = hold_port(&tcp, &udp);

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    ck_assert_int_eq(listen_parse_addr(addr, LISTEN_DNS, &la, err, sizeof(err)), 0);
    err[0] = '\0';
    ck_assert_int_eq(listen_bind_all(&la, 1, 2, err, sizeof(err)), -1);
    ck_assert_msg(strstr(err, la.label) != NULL && strstr(err, "already") != NULL, "%s", err);
    ck_assert_ptr_null(la.fds);
    ck_assert_int_eq(la.udp_fd, -1);
    close(udp); /* now free: TCP for each worker and the one UDP socket */
    close(tcp);
    ck_assert_int_eq(listen_bind_all(&la, 1, 2, err, sizeof(err)), 0);
    ck_assert_int_ge(la.udp_fd, 0);
    ck_assert_int_eq(listen_udp_worker(0, 2), 0);
    ck_assert_int_eq(listen_udp_worker(3, 2), 1);
    listen_close_fds(&la, 1, 2);
    ck_assert_int_eq(la.udp_fd, -1);
}
END_TEST

/* server_name extension bodies: list length, then (type, length, name) entries. */
struct sni_case {
    const char *name;
    const unsigned char *ext;
    size_t len;
    const char *want; /* NULL: none */
};

static const unsigned char sni_ok[] = {0, 8, 0, 0, 5, 'a', '.', 'b', 'c', 'd'};
static const unsigned char sni_second[] = {0, 10, 9, 0, 1, 'x', 0, 0, 3, 'a', 'b', 'c'};
static const unsigned char sni_short_list[] = {0, 7, 0, 0, 5, 'a', '.', 'b', 'c', 'd'};
static const unsigned char sni_long_name[] = {0, 8, 0, 0, 6, 'a', '.', 'b', 'c', 'd'};
static const unsigned char sni_other_type[] = {0, 4, 1, 0, 1, 'x'};
static const unsigned char sni_empty_list[] = {0, 0};
static const unsigned char sni_one_byte[] = {0};
static const unsigned char sni_truncated_entry[] = {0, 2, 0, 0};

static const struct sni_case sni_cases[] = {
    {"one name", sni_ok, sizeof(sni_ok), "a.bcd"},
    {"name after another type", sni_second, sizeof(sni_second), "abc"},
    {"list length too short", sni_short_list, sizeof(sni_short_list), NULL},
    {"name longer than the list", sni_long_name, sizeof(sni_long_name), NULL},
    {"no host_name entry", sni_other_type, sizeof(sni_other_type), NULL},
    {"empty list", sni_empty_list, sizeof(sni_empty_list), NULL},
    {"one byte", sni_one_byte, sizeof(sni_one_byte), NULL},
    {"truncated entry", sni_truncated_entry, sizeof(sni_truncated_entry), NULL},
    {"nothing", sni_ok, 0, NULL},
};

START_TEST(test_sni_from_ext)
{
    const struct sni_case *tc = &sni_cases[_i];
    const unsigned char *name = NULL;
    size_t n = tls_sni_from_ext(tc->ext, tc->len, &name);

    if (tc->want == NULL) {
        ck_assert_msg(n == 0, "%s: got %zu bytes", tc->name, n);
    } else {
        ck_assert_msg(n == strlen(tc->want), "%s: %zu bytes", tc->name, n);
        ck_assert_msg(memcmp(name, tc->want, n) == 0, "%s", tc->name);
        ck_assert(name >= tc->ext && name + n <= tc->ext + tc->len);
    }
}
END_TEST

/* A minimal ClientHello handshake message with the given extensions block. */
static size_t make_hello(unsigned char *out, const unsigned char *ext, size_t extlen)
{
    size_t pos = 4, body;

    out[pos++] = 3; /* version 3.3 */
    out[pos++] = 3;
    memset(out + pos, 0x5a, 32); /* random */
    pos += 32;
    out[pos++] = 0; /* session id */
    out[pos++] = 0; /* cipher suites: one */
    out[pos++] = 2;
    out[pos++] = 0x13;
    out[pos++] = 0x01;
    out[pos++] = 1; /* compression: null */
    out[pos++] = 0;
    out[pos++] = (unsigned char)(extlen >> 8);
    out[pos++] = (unsigned char)extlen;
    memcpy(out + pos, ext, extlen);
    pos += extlen;
    body = pos - 4;
    out[0] = 1;
    out[1] = (unsigned char)(body >> 16);
    out[2] = (unsigned char)(body >> 8);
    out[3] = (unsigned char)body;
    return pos;
}

START_TEST(test_sni_from_client_hello)
{
    /* an unrelated extension (ALPN-ish type 16), then server_name */
    static const unsigned char ext[] = {0, 16, 0, 3, 2, 'h', '2', 0,   0,   0,  10,
                                        0, 8,  0, 0, 5, 'a', '.', 'b', 'c', 'd'};
    static const unsigned char noext[] = {0, 16, 0, 3, 2, 'h', '2'};
    unsigned char hello[256];
    const unsigned char *name = NULL;
    size_t n = make_hello(hello, ext, sizeof(ext));

    ck_assert_uint_eq(tls_sni_from_client_hello(hello, n, &name), 5);
    ck_assert(memcmp(name, "a.bcd", 5) == 0);
    /* every truncation is refused, never read past the end */
    for (size_t cut = 0; cut < n; cut++)
        ck_assert_uint_eq(tls_sni_from_client_hello(hello, cut, &name), 0);
    hello[0] = 2; /* ServerHello */
    ck_assert_uint_eq(tls_sni_from_client_hello(hello, n, &name), 0);
    n = make_hello(hello, noext, sizeof(noext));
    ck_assert_uint_eq(tls_sni_from_client_hello(hello, n, &name), 0);
    /* extensions length larger than the message */
    n = make_hello(hello, ext, sizeof(ext));
    hello[4 + 2 + 32 + 1 + 4 + 2] = 0xff;
    ck_assert_uint_eq(tls_sni_from_client_hello(hello, n, &name), 0);
}
END_TEST

/* ---- accept: the budget per readiness and the errors that pause ---- */

struct accepted {
    int fds[8];
    int n;
};

static void on_accept(void *arg, int fd, const struct sockaddr *sa, socklen_t salen)
{
    struct accepted *a = arg;

    ck_assert_int_eq(sa->sa_family, AF_INET);
    ck_assert_uint_eq(salen, sizeof(struct sockaddr_in));
    ck_assert_int_ne(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_ne(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
    ck_assert_int_lt(a->n, 8);
    a->fds[a->n++] = fd;
}

/* A non-blocking loopback listening socket; its address in sin. */
static int loopback_listener(struct sockaddr_in *sin)
{
    socklen_t sl = sizeof(*sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

    ck_assert_int_ge(fd, 0);
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)sin, sizeof(*sin)), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)sin, &sl), 0);
    return fd;
}

static int loopback_client(const struct sockaddr_in *sin)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (const struct sockaddr *)sin, sizeof(*sin)), 0);
    return fd;
}

/* Three connections queued: a budget of 2 takes two, the next readiness the third and stops at
 * the empty queue without an error, and an empty queue takes nothing. */
START_TEST(test_accept_budget)
{
    struct sockaddr_in sin;
    struct accepted a = {.n = 0};
    int lfd = loopback_listener(&sin), c[3], e = -1;

    for (int i = 0; i < 3; i++)
        c[i] = loopback_client(&sin);
    ck_assert_int_eq(listen_accept_batch(lfd, 2, on_accept, &a, &e), 2);
    ck_assert_int_eq(e, 0);
    ck_assert_int_eq(listen_accept_batch(lfd, 2, on_accept, &a, &e), 1);
    ck_assert_int_eq(e, 0);
    ck_assert_int_eq(listen_accept_batch(lfd, 2, on_accept, &a, &e), 0);
    ck_assert_int_eq(e, 0);
    ck_assert_int_eq(a.n, 3);
    /* the default: one per readiness */
    ck_assert_int_eq(LISTEN_ACCEPT_BUDGET, 1);
    for (int i = 0; i < 3; i++) {
        close(c[i]);
        close(a.fds[i]);
    }
    close(lfd);
}
END_TEST

/* Out of descriptors: nothing accepted, EMFILE reported (a pause), the connection stays queued
 * and is taken once descriptors are free again. */
START_TEST(test_accept_emfile)
{
    struct sockaddr_in sin;
    struct accepted a = {.n = 0};
    struct rlimit old, low;
    int lfd = loopback_listener(&sin), c = loopback_client(&sin), top = dup(0), e = 0;

    ck_assert_int_ge(top, 0); /* every descriptor below top is open: none left under top + 1 */
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)top + 1;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    ck_assert_int_eq(listen_accept_batch(lfd, 4, on_accept, &a, &e), 0);
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
    ck_assert_int_eq(e, EMFILE);
    ck_assert(listen_accept_pauses(e));
    ck_assert_int_eq(listen_accept_batch(lfd, 4, on_accept, &a, &e), 1);
    ck_assert_int_eq(e, 0);
    close(a.fds[0]);
    close(c);
    close(top);
    close(lfd);
}
END_TEST

START_TEST(test_accept_pauses)
{
    static const int pause[] = {EMFILE, ENFILE, ENOBUFS, ENOMEM};
    static const int other[] = {0, EINVAL, EBADF, ENOTSOCK, EPERM};

    for (size_t i = 0; i < sizeof(pause) / sizeof(pause[0]); i++)
        ck_assert(listen_accept_pauses(pause[i]));
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
        ck_assert(!listen_accept_pauses(other[i]));
}
END_TEST

Suite *suite_listen(void);

Suite *suite_listen(void)
{
    Suite *s = suite_create("listen");
    TCase *tc = tcase_create("parse_addr");

    tcase_add_loop_test(tc, test_parse_addr, 0, (int)(sizeof(addr_cases) / sizeof(addr_cases[0])));
    tcase_add_test(tc, test_parse_addr_kinds);
    tcase_add_test(tc, test_bind_dns);
    suite_add_tcase(s, tc);
    tc = tcase_create("accept");
    tcase_add_test(tc, test_accept_budget);
    tcase_add_test(tc, test_accept_emfile);
    tcase_add_test(tc, test_accept_pauses);
    suite_add_tcase(s, tc);
    tc = tcase_create("tls_sni");
    tcase_add_loop_test(tc, test_sni_from_ext, 0, (int)(sizeof(sni_cases) / sizeof(sni_cases[0])));
    tcase_add_test(tc, test_sni_from_client_hello);
    suite_add_tcase(s, tc);
    return s;
}
