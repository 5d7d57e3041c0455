/*
 * test_hostmatch.c - host patterns (policy/hostmatch.c): exact, wildcard, regex and IP patterns,
 * their errors, the length and match limits, too-broad detection.
 */
#include <check.h>
#include <string.h>

#include "policy/hostmatch.h"
#include "tests/unit/guard.h"

static const struct {
    const char *pattern;
    const char *host; /* normalised */
    int match;
} match_cases[] = {
    /* exact */
    {"api.example.com", "api.example.com", 1},
    {"API.Example.COM.", "api.example.com", 1},
    {"api.example.com", "api.example.com.evil.net", 0},
    {"api.example.com", "xapi.example.com", 0},
    {"api.example.com", "example.com", 0},
    /* wildcard: any depth below, never the apex, never a look-alike */
    {"*.example.com", "a.example.com", 1},
    {"*.example.com", "a.b.c.example.com", 1},
    {"*.example.com", "example.com", 0},
    {"*.example.com", "evilexample.com", 0},
    {"*.example.com", "a.evilexample.com", 0},
    {"*.example.com", "example.com.evil.net", 0},
    {"*.example.com", "a.example.com.evil.net", 0},
    {"*.Example.COM.", "www.example.com", 1},
    {"*", "anything.example", 1},
    {"*", "10.0.0.1", 1},
    /* regex: anchored at both ends, caseless */
    {"re:api\\.example\\.com", "api.example.com", 1},
    {"re:api\\.example\\.com", "api.example.com.evil.net", 0},
    {"re:api\\.example\\.com", "xapi.example.com", 0},
    {"re:API\\.EXAMPLE\\.com", "api.example.com", 1},
    {"re:api|example\\.com", "api", 1},
    {"re:api|example\\.com", "apix", 0},
    {"re:api|example\\.com", "xexample.com", 0},
    {"re:[a-z]+-[0-9]+\\.example\\.com", "eu-1.example.com", 1},
    {"re:[a-z]+-[0-9]+\\.example\\.com", "eu-1.example.com.au", 0},
    {"re:.*\\.example\\.com", "a.example.com", 1},
    {"re:.*\\.example\\.com", "a.example.com\n", 0},
    /* IP literals */
    {"10.0.0.1", "10.0.0.1", 1},
    {"10.0.0.1", "10.0.0.10", 0},
    {"[::1]", "::1", 1},
    {"2001:DB8::1", "2001:db8::1", 1},
    {"2001:db8::1", "2001:db8::2", 0},
};

START_TEST(test_hostmatch_table)
{
    char err[256] = "";
    struct hostmatch *m = hostmatch_compile(match_cases[_i].pattern, err, sizeof(err));

    ck_assert_msg(m != NULL, "case %d: %s", _i, err);
    ck_assert_msg(hostmatch_match(m, match_cases[_i].host) == match_cases[_i].match,
                  "case %d: %s vs %s", _i, match_cases[_i].pattern, match_cases[_i].host);
    hostmatch_free(&m);
    ck_assert_ptr_null(m);
}
END_TEST

static const struct {
    const char *pattern;
    enum hostmatch_kind kind;
    const char *text;
} kind_cases[] = {
    {"Api.Example.com.", HOSTMATCH_EXACT, "api.example.com"},
    {"*.Example.com", HOSTMATCH_WILDCARD, "example.com"},
    {"*", HOSTMATCH_WILDCARD, ""},
    {"re:a\\.b", HOSTMATCH_REGEX, "a\\.b"},
    {"192.0.2.1", HOSTMATCH_IP, "192.0.2.1"},
    {"[2001:db8::1]", HOSTMATCH_IP, "2001:db8::1"},
};

START_TEST(test_hostmatch_kinds)
{
    char err[256];
    struct hostmatch *m = hostmatch_compile(kind_cases[_i].pattern, err, sizeof(err));

    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(hostmatch_kind(m), kind_cases[_i].kind);
    ck_assert_str_eq(hostmatch_text(m), kind_cases[_i].text);
    hostmatch_free(&m);
}
END_TEST

static const struct {
    const char *pattern;
    const char *err;
} bad_patterns[] = {
    {"", "empty host pattern"},
    {"*.*.example.com", "expected a host name, *.domain wildcard, IP literal or re:<regex>"},
    {"foo*.example.com", "expected a host name, *.domain wildcard, IP literal or re:<regex>"},
    {"*example.com", "expected a host name, *.domain wildcard, IP literal or re:<regex>"},
    {"a..example.com", "expected a host name, *.domain wildcard, IP literal or re:<regex>"},
    {"api.example.com:443", "expected a host name, *.domain wildcard, IP literal or re:<regex>"},
    {"*.10.0.0.1", "expected a host name, *.domain wildcard, IP literal or re:<regex>"},
    {"*.[::1]", "expected a host name, *.domain wildcard, IP literal or re:<regex>"},
    {"a b.com", "expected a host name, *.domain wildcard, IP literal or re:<regex>"},
    {"a\tb.com", "host pattern must be 1-1024 printable ASCII characters"},
    {"re:", "empty regular expression after \"re:\""},
    {"re:(", "bad regular expression at offset 1: missing closing parenthesis"},
    {"re:a{2,1}", "bad regular expression at offset 5: numbers out of order in {} quantifier"},
    {"re:\\C", "bad regular expression at offset 2: using \\C is disabled by the application"},
};

START_TEST(test_hostmatch_errors)
{
    char err[256] = "";
    struct hostmatch *m = hostmatch_compile(bad_patterns[_i].pattern, err, sizeof(err));

    ck_assert_msg(m == NULL, "case %d accepted", _i);
    ck_assert_str_eq(err, bad_patterns[_i].err);
}
END_TEST

START_TEST(test_hostmatch_too_long)
{
    char pattern[1100], err[256] = "";
    struct hostmatch *m;

    memcpy(pattern, "re:", 3);
    memset(pattern + 3, 'a', 1022);
    pattern[1025] = '\0';
    m = hostmatch_compile(pattern, err, sizeof(err));
    ck_assert_ptr_null(m);
    ck_assert_str_eq(err, "host pattern must be 1-1024 printable ASCII characters");
    pattern[1024] = '\0'; /* exactly 1024 characters */
    m = hostmatch_compile(pattern, err, sizeof(err));
    ck_assert_ptr_nonnull(m);
    hostmatch_free(&m);
}
END_TEST

static const struct {
    const char *pattern;
    int broad;
    const char *why;
} broad_cases[] = {
    {"*", 1, "\"*\" matches every host"},
    {"*.com", 1, "\"*.com\" matches a whole top-level domain"},
    {"*.COM.", 1, "\"*.com\" matches a whole top-level domain"},
    {"*.test", 1, "\"*.test\" matches a whole top-level domain"},
    {"*.co.uk", 1, "\"*.co.uk\" matches a whole public suffix"},
    {"*.github.io", 1, "\"*.github.io\" matches a whole public suffix"},
    {"re:.*", 1, "regular expression matches every single-label name tried"},
    {"re:.+", 1, "regular expression matches every single-label name tried"},
    {"re:[a-z0-9.-]+", 1, "regular expression matches every single-label name tried"},
    {"re:.+\\.com", 1, "regular expression matches every name tried under .com"},
    {"re:[^.]+\\.net", 1, "regular expression matches every name tried under .net"},
    {"re:(?:[a-z0-9-]+\\.)+org", 1, "regular expression matches every name tried under .org"},
    {"re:[a-z0-9-]+\\.[a-z0-9-]+\\.io", 1, "regular expression matches every name tried under .io"},
    {"re:.*\\.co\\.uk", 1, "regular expression matches every name tried under .co.uk"},
    {"*.example.com", 0, NULL},
    {"*.api.example.co.uk", 0, NULL},
    {"api.example.com", 0, NULL},
    {"com", 0, NULL},
    {"10.0.0.1", 0, NULL},
    {"re:api\\.example\\.com", 0, NULL},
    {"re:.*\\.example\\.com", 0, NULL},
    {"re:[a-z]+-[0-9]+\\.api\\.example\\.com", 0, NULL},
};

START_TEST(test_hostmatch_too_broad)
{
    char err[256], why[256] = "";
    struct hostmatch *m = hostmatch_compile(broad_cases[_i].pattern, err, sizeof(err));

    ck_assert_ptr_nonnull(m);
    ck_assert_msg(hostmatch_too_broad(m, why, sizeof(why)) == broad_cases[_i].broad, "case %d: %s",
                  _i, broad_cases[_i].pattern);
    if (broad_cases[_i].broad)
        ck_assert_str_eq(why, broad_cases[_i].why);
    hostmatch_free(&m);
}
END_TEST

START_TEST(test_hostmatch_match_limit)
{
    char err[256], host[64];
    struct hostmatch *m = hostmatch_compile("re:(a|aa)+(b|bb)+c", err, sizeof(err));

    ck_assert_ptr_nonnull(m);
    memset(host, 'a', 40);
    memset(host + 40, 'b', 20);
    memcpy(host + 60, "xc", 3); /* holds the required 'c', so only backtracking can refuse it */
    /* catastrophic backtracking stops at the match limit: -1, quickly, never a hang */
    ck_assert_int_eq(hostmatch_match(m, host), -1);
    hostmatch_free(&m);
    hostmatch_free(&m); /* NULL-safe */
}
END_TEST

Suite *suite_hostmatch(void);

Suite *suite_hostmatch(void)
{
    Suite *s = suite_create("hostmatch");
    TCase *tc = tcase_create("match");

    tcase_add_loop_test(tc, test_hostmatch_table, 0,
                        (int)(sizeof(match_cases) / sizeof(match_cases[0])));
    tcase_add_loop_test(tc, test_hostmatch_kinds, 0,
                        (int)(sizeof(kind_cases) / sizeof(kind_cases[0])));
    tcase_add_loop_test(tc, test_hostmatch_errors, 0,
                        (int)(sizeof(bad_patterns) / sizeof(bad_patterns[0])));
    tcase_add_test(tc, test_hostmatch_too_long);
    tcase_add_loop_test(tc, test_hostmatch_too_broad, 0,
                        (int)(sizeof(broad_cases) / sizeof(broad_cases[0])));
    tcase_add_test(tc, test_hostmatch_match_limit);
    suite_add_tcase(s, tc);
    return s;
}
