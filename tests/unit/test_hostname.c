/*
 * test_hostname.c - suite `hostname` (common/hostname.c): normalisation of names and IP
 * literals, the limits of RFC 1035, and the IPv6 forms that name an IPv4 host (each form, the
 * first and last address of its prefix, and the neighbours just outside it, which stay IPv6).
 */
#include <arpa/inet.h>
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

    /* IPv4-mapped ::ffff:0:0/96 is the IPv4 host */
    {"::ffff:10.0.0.1", HOSTNAME_IPV4, "10.0.0.1"},
    {"[::ffff:11.0.0.2]", HOSTNAME_IPV4, "11.0.0.2"},
    {"[::FFFF:B00:2]", HOSTNAME_IPV4, "11.0.0.2"},
    {"0:0:0:0:0:ffff:0b00:0002", HOSTNAME_IPV4, "11.0.0.2"},
    {"::ffff:0.0.0.0", HOSTNAME_IPV4, "0.0.0.0"},
    {"::ffff:255.255.255.255", HOSTNAME_IPV4, "255.255.255.255"},
    {"[::ffff:127.0.0.1]", HOSTNAME_IPV4, "127.0.0.1"},
    {"::fffe:b00:2", HOSTNAME_IPV6, "::fffe:b00:2"},
    {"::1:ffff:b00:2", HOSTNAME_IPV6, "::1:ffff:b00:2"},
    {"::ffff:0:b00:2", HOSTNAME_IPV6, "::ffff:0:b00:2"}, /* SIIT's translated form: not listed */
    /* IPv4-compatible ::/96, except :: and ::1 */
    {"[::11.0.0.2]", HOSTNAME_IPV4, "11.0.0.2"},
    {"::b00:2", HOSTNAME_IPV4, "11.0.0.2"},
    {"::2", HOSTNAME_IPV4, "0.0.0.2"},
    {"::255.255.255.255", HOSTNAME_IPV4, "255.255.255.255"},
    {"::", HOSTNAME_IPV6, "::"},
    {"[::1]", HOSTNAME_IPV6, "::1"},
    {"::1:0:0", HOSTNAME_IPV6, "::1:0:0"},
    /* NAT64 64:ff9b::/96 */
    {"[64:ff9b::11.0.0.2]", HOSTNAME_IPV4, "11.0.0.2"},
    {"64:FF9B::B00:2", HOSTNAME_IPV4, "11.0.0.2"},
    {"64:ff9b::", HOSTNAME_IPV4, "0.0.0.0"},
    {"64:ff9b::ffff:ffff", HOSTNAME_IPV4, "255.255.255.255"},
    {"64:ff9b::1:b00:2", HOSTNAME_IPV6, "64:ff9b::1:b00:2"}, /* outside the /96 */
    {"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", HOSTNAME_IPV6,
     "64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff"},
    /* local-use NAT64 64:ff9b:1::/48, RFC 6052 /48 layout: bits 48-63 and 72-87 */
    {"[64:ff9b:1:b00:0:200::]", HOSTNAME_IPV4, "11.0.0.2"},
    {"64:ff9b:1:b00:ff00:2ab:cdef:1", HOSTNAME_IPV4, "11.0.0.2"}, /* u octet and suffix ignored */
    {"64:ff9b:1::", HOSTNAME_IPV4, "0.0.0.0"},
    {"64:ff9b:1::b00:2", HOSTNAME_IPV4, "0.0.0.0"}, /* a /96 layout read as the /48 */
    {"64:ff9b:1:ffff:ffff:ffff:ffff:ffff", HOSTNAME_IPV4, "255.255.255.255"},
    {"64:ff9b:2::", HOSTNAME_IPV6, "64:ff9b:2::"},
    {"64:ff9b:0:ffff:ffff:ffff:ffff:ffff", HOSTNAME_IPV6, "64:ff9b:0:ffff:ffff:ffff:ffff:ffff"},
    /* 6to4 2002::/16: bits 16-47, whatever the subnet and interface id */
    {"2002:b00:2::", HOSTNAME_IPV4, "11.0.0.2"},
    {"[2002:0B00:0002:abcd:1:2:3:4]", HOSTNAME_IPV4, "11.0.0.2"},
    {"2002::", HOSTNAME_IPV4, "0.0.0.0"},
    {"2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", HOSTNAME_IPV4, "255.255.255.255"},
    {"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", HOSTNAME_IPV6,
     "2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff"},
    {"2003::", HOSTNAME_IPV6, "2003::"},
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

/* Every case normalised right after every other (the thread keeps the last name it
 * normalised): the same kind and name as on its own, a refused one still refused with out
 * untouched, also right after itself. */
START_TEST(test_hostname_after_another)
{
    size_t n = sizeof(norm_cases) / sizeof(norm_cases[0]);

    for (size_t a = 0; a < n; a++) {
        for (size_t b = 0; b < n; b++) {
            for (int rep = 0; rep < 2; rep++) {
                size_t i = rep == 0 ? b : a, len = strlen(norm_cases[i].in);
                char out[HOSTNAME_BUFSZ];
                int kind;

                (void)hostname_normalize(norm_cases[a].in, strlen(norm_cases[a].in), out,
                                         sizeof(out));
                strcpy(out, "untouched");
                kind = hostname_normalize(norm_cases[i].in, len, out, sizeof(out));
                ck_assert_msg(kind == norm_cases[i].kind, "%s after %s: kind %d", norm_cases[i].in,
                              norm_cases[a].in, kind);
                ck_assert_str_eq(out, kind > 0 ? norm_cases[i].out : "untouched");
            }
        }
    }
}
END_TEST

/* What is normalised stays so: the IPv4 form of an embedded host normalises to itself. */
START_TEST(test_hostname_idempotent)
{
    char out[HOSTNAME_BUFSZ], again[HOSTNAME_BUFSZ];
    int kind = hostname_normalize(norm_cases[_i].in, strlen(norm_cases[_i].in), out, sizeof(out));

    if (kind < 0)
        return;
    ck_assert_int_eq(hostname_normalize(out, strlen(out), again, sizeof(again)), kind);
    ck_assert_str_eq(again, out);
}
END_TEST

static const struct {
    const char *ip;
    enum hostname_v4_form form;
    const char *v4; /* NULL: none */
} form_cases[] = {
    {"::ffff:11.0.0.2", HOSTNAME_V4_MAPPED, "11.0.0.2"},
    {"::11.0.0.2", HOSTNAME_V4_COMPAT, "11.0.0.2"},
    {"::2", HOSTNAME_V4_COMPAT, "0.0.0.2"},
    {"64:ff9b::b00:2", HOSTNAME_V4_NAT64, "11.0.0.2"},
    {"64:ff9b:1:b00:0:200::", HOSTNAME_V4_NAT64_LOCAL, "11.0.0.2"},
    {"2002:b00:2::1", HOSTNAME_V4_6TO4, "11.0.0.2"},
    {"::", HOSTNAME_V4_NONE, NULL},
    {"::1", HOSTNAME_V4_NONE, NULL},
    {"::1:0:0:0", HOSTNAME_V4_NONE, NULL},
    {"2001:db8::b00:2", HOSTNAME_V4_NONE, NULL},
    {"fe80::ffff:b00:2", HOSTNAME_V4_NONE, NULL},
};

START_TEST(test_hostname_v4_embedded)
{
    uint8_t a[16], v4[4] = {0xA5, 0xA5, 0xA5, 0xA5}, want[4];
    enum hostname_v4_form f;

    ck_assert_int_eq(inet_pton(AF_INET6, form_cases[_i].ip, a), 1);
    f = hostname_v4_embedded(a, v4);
    ck_assert_msg(f == form_cases[_i].form, "%s: form %d", form_cases[_i].ip, f);
    if (form_cases[_i].v4 == NULL) {
        memset(want, 0xA5, 4); /* untouched */
    } else {
        ck_assert_int_eq(inet_pton(AF_INET, form_cases[_i].v4, want), 1);
    }
    ck_assert_msg(memcmp(v4, want, 4) == 0, "%s: wrong IPv4 address", form_cases[_i].ip);
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
    tcase_add_loop_test(tc, test_hostname_idempotent, 0,
                        (int)(sizeof(norm_cases) / sizeof(norm_cases[0])));
    tcase_add_test(tc, test_hostname_lengths);
    tcase_add_test(tc, test_hostname_after_another);
    suite_add_tcase(s, tc);
    tc = tcase_create("embedded");
    tcase_add_loop_test(tc, test_hostname_v4_embedded, 0,
                        (int)(sizeof(form_cases) / sizeof(form_cases[0])));
    suite_add_tcase(s, tc);
    return s;
}
