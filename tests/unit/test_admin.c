/*
 * test_admin.c - the admin API's address check (proxy/admin.c, admin_addr_check): which --admin
 * values are taken, loopback or with --admin-allow-remote, and that every refusal is one line.
 * The API itself is driven over sockets by tests/integration/cases/test_admin_api.py.
 */
#include "proxy/admin.h"

#include <check.h>
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

Suite *suite_admin(void);
Suite *suite_admin(void)
{
    Suite *s = suite_create("admin");
    TCase *ad = tcase_create("admin_addr");

    tcase_add_test(ad, admin_addr_table);
    suite_add_tcase(s, ad);
    return s;
}
