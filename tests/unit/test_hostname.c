/*
 * test_hostname.c - the one normaliser and validator of host names and IP literals
 * (common/hostname.c): case, trailing dot, IPv6 forms, what is refused, the label and name
 * length limits, a small output buffer. Inputs end at a guard page.
 */
#include <check.h>
#include <string.h>

#include "common/hostname.h"
#include "tests/unit/guard.h"

static const struct {
    const char *in;
    int kind; /* -1: refused */
    const char *out;
} norm_cases[] = {
    {"example.com", HOSTNAME_DNS, "example.com"},
    {"Example.COM", HOSTNAME_DNS, "example.com"},
    {"example.com.", HOSTNAME_DNS, "example.com"},
    {"API.Example.Com.", HOSTNAME_DNS, "api.example.com"},
    {"localhost", HOSTNAME_DNS, "localhost"},
    {"xn--p1ai", HOSTNAME_DNS, "xn--p1ai"},
    {"a-b.c-d.example", HOSTNAME_DNS, "a-b.c-d.example"},
    {"127.0.0.1", HOSTNAME_IPV4, "127.0.0.1"},
    {"[::1]", HOSTNAME_IPV6, "::1"},
    {"2001:DB8:0:0:0:0:0:1", HOSTNAME_IPV6, "2001:db8::1"},
    {"::ffff:10.0.0.1", HOSTNAME_IPV6, "::ffff:10.0.0.1"},
    {"", -1, NULL},
    {".", -1, NULL},
    {"example..com", -1, NULL},
    {".example.com", -1, NULL},
    {"example.com..", -1, NULL},
    {"-a.example.com", -1, NULL},
    {"a-.example.com", -1, NULL},
    {"a_b.example.com", -1, NULL},
    {"exa mple.com", -1, NULL},
    {"example.com:443", -1, NULL},
    {"[::1]:443", -1, NULL},
    {"1.2.3", -1, NULL},
    {"999.1.1.1", -1, NULL},
    {"example.123", -1, NULL},
    {"\xc3\xa9xample.com", -1, NULL},
    {"*.example.com", -1, NULL},
};

START_TEST(test_hostname_normalize)
{
    char out[HOSTNAME_BUFSZ];
    size_t len = strlen(norm_cases[_i].in);
    char *in = guard_copy(norm_cases[_i].in, len);
    int kind;

    strcpy(out, "untouched");
    kind = hostname_normalize(in, len, out, sizeof(out));
    ck_assert_msg(kind == norm_cases[_i].kind, "case %d (%s): kind %d", _i, norm_cases[_i].in,
                  kind);
    if (kind > 0)
        ck_assert_str_eq(out, norm_cases[_i].out);
    else
        ck_assert_str_eq(out, "untouched");
    guard_free(in, len);
}
END_TEST

START_TEST(test_hostname_lengths)
{
    char name[300], out[HOSTNAME_BUFSZ];

    /* a 63-character label is fine, 64 is not */
    memset(name, 'a', 63);
    strcpy(name + 63, ".com");
    ck_assert_int_eq(hostname_normalize(name, strlen(name), out, sizeof(out)), HOSTNAME_DNS);
    memset(name, 'a', 64);
    strcpy(name + 64, ".com");
    ck_assert_int_eq(hostname_normalize(name, strlen(name), out, sizeof(out)), -1);
    /* 253 characters in total is fine, 254 is not (a trailing dot does not count) */
    for (int i = 0; i < 253; i++)
        name[i] = (i % 2) ? '.' : 'a';
    name[253] = '\0';
    ck_assert_int_eq(hostname_normalize(name, 253, out, sizeof(out)), HOSTNAME_DNS);
    name[253] = '.';
    ck_assert_int_eq(hostname_normalize(name, 254, out, sizeof(out)), HOSTNAME_DNS);
    memmove(name + 1, name, 253);
    name[0] = 'b';
    ck_assert_int_eq(hostname_normalize(name, 254, out, sizeof(out)), -1);
    /* a small output buffer is refused */
    ck_assert_int_eq(hostname_normalize("a.com", 5, out, 10), -1);
}
END_TEST

Suite *suite_hostname(void);

Suite *suite_hostname(void)
{
    Suite *s = suite_create("hostname");
    TCase *tc = tcase_create("normalize");

    tcase_add_loop_test(tc, test_hostname_normalize, 0,
                        (int)(sizeof(norm_cases) / sizeof(norm_cases[0])));
    tcase_add_test(tc, test_hostname_lengths);
    suite_add_tcase(s, tc);
    return s;
}
