/*
 * test_admin.c - the admin API's address check (proxy/admin.c, admin_addr_check): which --admin
 * values are taken, loopback or with --admin-allow-remote, and that every refusal is one line;
 * admin_addr_overlaps: which --admin addresses would take a listener's own port.
 * The API itself is driven over sockets by tests/integration/cases/test_admin_api.py.
 */
#include "proxy/admin.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

START_TEST(admin_addr_table)
{
    static const struct {
        const char *addr;
        bool allow_remote;
        int ok;
    } cases[] = {
        {"127.0.0.1:9090", false, 1},
        {"127.8.9.10:1", false, 1},
        {"localhost:9090", false, 1},
        {"[::1]:9090", false, 1},
        {"[::ffff:127.0.0.1]:9090", false, 1},
        {"unix:/run/vaultgate/admin.sock", false, 1},
        {"0.0.0.0:9090", false, 0},
        {"0.0.0.0:9090", true, 1},
        {"10.1.2.3:9090", false, 0},
        {"10.1.2.3:9090", true, 1},
        {"[::]:9090", false, 0},
        {"[::]:9090", true, 1},
        {"[2001:db8::1]:80", true, 1},
        {"127.0.0.1", false, 0},
        {"127.0.0.1:", false, 0},
        {"127.0.0.1:0", false, 0},
        {"127.0.0.1:65536", false, 0},
        {"127.0.0.1:08080", false, 0},
        {"127.0.0.1:+80", false, 0},
        {"127.0.0.1:80x", false, 0},
        {"127.1:9090", false, 0},
        {"::1:9090", false, 0},
        {"[::1]9090", false, 0},
        {"[::1:9090", false, 0},
        {"[127.0.0.1]:9090", false, 0},
        {"admin.example:9090", true, 0},
        {" 127.0.0.1:9090", false, 0},
        {"unix:relative.sock", false, 0},
        {"unix:", false, 0},
        {"", false, 0},
        {":9090", false, 0},
    };
    char err[256], longp[200];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc;

        err[0] = '\0';
        rc = admin_addr_check(cases[i].addr, cases[i].allow_remote, err, sizeof(err));
        ck_assert_msg((rc == 0) == cases[i].ok, "'%s' (remote %d): rc %d %s", cases[i].addr,
                      cases[i].allow_remote, rc, err);
        if (rc != 0)
            ck_assert_msg(err[0] != '\0' && strchr(err, '\n') == NULL, "'%s': bad error '%s'",
                          cases[i].addr, err);
    }
    ck_assert_int_eq(admin_addr_check("0.0.0.0:9090", false, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "--admin-allow-remote"));
    memset(longp, 'a', sizeof(longp));
    memcpy(longp, "unix:/", 6);
    longp[sizeof(longp) - 1] = '\0';
    ck_assert_int_eq(admin_addr_check(longp, false, err, sizeof(err)), -1);
}
END_TEST

static struct sockaddr_storage inet_ss(const char *ip, int port)
{
    struct sockaddr_storage ss;

    memset(&ss, 0, sizeof(ss));
    if (strchr(ip, ':') != NULL) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((unsigned short)port);
        ck_assert_int_eq(inet_pton(AF_INET6, ip, &s6->sin6_addr), 1);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

        s4->sin_family = AF_INET;
        s4->sin_port = htons((unsigned short)port);
        ck_assert_int_eq(inet_pton(AF_INET, ip, &s4->sin_addr), 1);
    }
    return ss;
}

START_TEST(admin_overlap_table)
{
    static const struct {
        const char *admin, *ip;
        int port;
        bool overlaps;
    } cases[] = {
        {"127.0.0.1:8443", "127.0.0.1", 8443, true},
        {"localhost:8443", "127.0.0.1", 8443, true},
        {"127.0.0.1:8443", "0.0.0.0", 8443, true},
        {"0.0.0.0:8443", "127.0.0.2", 8443, true},
        {"[::1]:8443", "::1", 8443, true},
        {"[::]:8443", "::1", 8443, true},
        {"127.0.0.1:9090", "127.0.0.1", 8443, false},
        {"127.0.0.2:8443", "127.0.0.1", 8443, false},
        {"[::1]:8443", "127.0.0.1", 8443, false}, /* IPV6_V6ONLY: families never share */
        {"127.0.0.1:8443", "::", 8443, false},
        {"unix:/run/vaultgate/admin.sock", "127.0.0.1", 8443, false},
        {"nonsense", "127.0.0.1", 8443, false},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sockaddr_storage ss = inet_ss(cases[i].ip, cases[i].port);

        ck_assert_msg(admin_addr_overlaps(cases[i].admin, &ss) == cases[i].overlaps,
                      "%s vs %s:%d: expected %d", cases[i].admin, cases[i].ip, cases[i].port,
                      cases[i].overlaps);
    }
}
END_TEST

Suite *suite_admin(void);
Suite *suite_admin(void)
{
    Suite *s = suite_create("admin");
    TCase *ad = tcase_create("admin_addr");

    tcase_add_test(ad, admin_addr_table);
    tcase_add_test(ad, admin_overlap_table);
    suite_add_tcase(s, ad);
    return s;
}
