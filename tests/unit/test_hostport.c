/*
 * test_hostport.c - the one "host[:port]" grammar (common/hostport.c) under each caller's flags:
 * Host headers (leading zeros), listeners and the admin address (port required, port 0 for
 * tests), pins and resolvers (IP only, bare IPv6), and the socket addresses it yields.
 */
#include <check.h>
#include <netinet/in.h>
#include <string.h>

#include "common/hostport.h"
#include "tests/unit/guard.h"

#define REQ  HOSTPORT_PORT_REQUIRED
#define ZERO HOSTPORT_PORT_ZERO
#define LZ   HOSTPORT_LEADING_ZERO
#define IP   HOSTPORT_IP_ONLY
#define BARE HOSTPORT_BARE_V6

static const struct {
    const char *in;
    unsigned flags;
    int rc; /* 0, -1 or HOSTPORT_EPORT */
    const char *host;
    int port;
} cases[] = {
    {"example.com", 0, 0, "example.com", 0},
    {"Example.COM.:8443", 0, 0, "example.com", 8443},
    {"127.0.0.1:80", 0, 0, "127.0.0.1", 80},
    {"[::1]:443", 0, 0, "::1", 443},
    {"[::FFFF:127.0.0.1]", 0, 0, "127.0.0.1", 0}, /* an embedded IPv4 host is that host */
    {"[2001:DB8::1]", 0, 0, "2001:db8::1", 0},
    {"example.com:080", 0, HOSTPORT_EPORT, NULL, 0},
    {"example.com:080", LZ, 0, "example.com", 80},
    {"example.com:0", 0, HOSTPORT_EPORT, NULL, 0},
    {"example.com:0", ZERO, 0, "example.com", 0},
    {"example.com:00", ZERO, HOSTPORT_EPORT, NULL, 0},
    {"example.com:65535", 0, 0, "example.com", 65535},
    {"example.com:65536", 0, HOSTPORT_EPORT, NULL, 0},
    {"example.com:123456", LZ, HOSTPORT_EPORT, NULL, 0},
    {"example.com:+80", 0, HOSTPORT_EPORT, NULL, 0},
    {"example.com:-1", 0, HOSTPORT_EPORT, NULL, 0},
    {"example.com: 80", 0, HOSTPORT_EPORT, NULL, 0},
    {"example.com:", 0, HOSTPORT_EPORT, NULL, 0},
    {"example.com", REQ, HOSTPORT_EPORT, NULL, 0},
    {":80", 0, -1, NULL, 0},
    {"", 0, -1, NULL, 0},
    {"::1:8443", 0, -1, NULL, 0},       /* IPv6 needs brackets */
    {"[::1]8443", 0, -1, NULL, 0},      /* only ':' may follow ']' */
    {"[::1", 0, -1, NULL, 0},           /* unterminated */
    {"[127.0.0.1]:80", 0, -1, NULL, 0}, /* brackets only around IPv6 text */
    {"[example.com]", 0, -1, NULL, 0},
    {"exa_mple.com", 0, -1, NULL, 0},
    {"a@b.com:80", 0, -1, NULL, 0},
    {"example.com:80", IP, -1, NULL, 0},
    {"10.0.0.1:53", IP, 0, "10.0.0.1", 53},
    {"::1", IP | BARE, 0, "::1", 0},
    {"2001:db8::53", IP | BARE, 0, "2001:db8::53", 0},
    {"::1", IP, -1, NULL, 0},
    {"[::1]:53", IP | BARE, 0, "::1", 53},
    {"256.0.0.1:80", 0, -1, NULL, 0},
};

START_TEST(test_parse)
{
    struct hostport hp;
    size_t len = strlen(cases[_i].in);
    char *g = guard_copy(cases[_i].in, len);
    int rc = hostport_parse(g, len, cases[_i].flags, &hp);

    ck_assert_msg(rc == cases[_i].rc, "%s (flags %u): %d", cases[_i].in, cases[_i].flags, rc);
    if (rc == 0) {
        ck_assert_str_eq(hp.host, cases[_i].host);
        ck_assert_int_eq(hp.port, cases[_i].port);
        ck_assert(hp.has_port ==
                  (strrchr(cases[_i].in, ':') != NULL && (cases[_i].in[len - 1] != ']') &&
                   !(cases[_i].flags & BARE && cases[_i].in[0] != '[')));
    }
    guard_free(g, len);
}
END_TEST

/* Socket addresses: IPv4 for a dotted quad, IPv6 for bracketed text as written. */
START_TEST(test_sockaddr)
{
    struct hostport hp;
    struct sockaddr_storage ss;
    socklen_t len;

    ck_assert_int_eq(hostport_parse("127.0.0.1:8443", 14, REQ, &hp), 0);
    ck_assert_int_eq(hostport_sockaddr(&hp, hp.port, &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET);
    ck_assert_int_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 8443);
    ck_assert_int_eq(hostport_parse("[::ffff:127.0.0.1]:1", 20, REQ, &hp), 0);
    ck_assert_int_eq(hostport_sockaddr(&hp, hp.port, &ss, &len), 0);
    ck_assert_int_eq(ss.ss_family, AF_INET6);
    ck_assert_uint_eq(len, sizeof(struct sockaddr_in6));
    ck_assert_int_eq(hostport_parse("example.com:1", 13, REQ, &hp), 0);
    ck_assert_int_eq(hostport_sockaddr(&hp, hp.port, &ss, &len), -1);
}
END_TEST

Suite *suite_hostport(void);

Suite *suite_hostport(void)
{
    Suite *s = suite_create("hostport");
    TCase *tc = tcase_create("grammar");

    tcase_add_loop_test(tc, test_parse, 0, sizeof(cases) / sizeof(cases[0]));
    tcase_add_test(tc, test_sockaddr);
    suite_add_tcase(s, tc);
    return s;
}
