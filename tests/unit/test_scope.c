/*
 * test_scope.c - rule scopes (policy/scope.c) and the decision for one request
 * (policy_decide_request, SPEC §3 "Decision for one request"): segment-boundary prefixes after
 * percent-decoding, every non-canonical path form, methods, first-match order between scoped and
 * unscoped rules, step 3 (outside every rule's scope), fragments, method overrides on hosts with
 * method scopes, and the host-only decision left unchanged.
 *
 * The expected answers are written from SPEC §3, not from scope.c.
 */
#include <check.h>
#include <string.h>

#include "common/pct.h"
#include "policy/policy.h"
#include "policy/scope.h"
#include "tests/unit/vaultq.h"

static const struct {
    const char *path;
    int canonical;
} canon_cases[] = {
    {"/", 1},
    {"", 1},
    {"/repos/acme/x", 1},
    {"/repos/acme%20x", 1},
    {"/model/anthropic.claude-v2%3A1/invoke", 1},
    {"/a/.b", 1},      /* a dot inside a name is no dot segment */
    {"/a/..b", 1},     /* nor are two */
    {"/a/b..", 1},     /* nor at the end of a name */
    {"/a;x=1/b", 1},   /* a parameter alone is fine */
    {"/a/./b", 0},     /* dot segments, raw */
    {"/a/../b", 0},    /* */
    {"/a/..", 0},      /* */
    {"/a/.", 0},       /* */
    {".", 0},          /* */
    {"../a", 0},       /* */
    {"/a/..;/b", 0},   /* Tomcat reads ..; as .. */
    {"/a/.;x/b", 0},   /* */
    {"/a\\b", 0},      /* backslash */
    {"/a%2e%2e/b", 0}, /* encoded dot, either case */
    {"/a/%2E%2E/b", 0},
    {"/a/%2e", 0},
    {"/a%2fb", 0}, /* encoded slash */
    {"/a%2Fb", 0},
    {"/a%5cb", 0}, /* encoded backslash */
    {"/a%5Cb", 0},
    {"/a%", 0}, /* malformed escapes */
    {"/a%4", 0},
    {"/a%zz", 0},
    {"/a%g0", 0},
    {"/a%00b", 0}, /* encoded NUL: C servers stop reading there */
    {"/a/%00", 0},
};

START_TEST(test_scope_canonical)
{
    const char *why = NULL;
    const char *p = canon_cases[_i].path;
    int got = scope_path_canonical(p, strlen(p), &why);

    ck_assert_msg(got == canon_cases[_i].canonical, "%s: canonical %d", p, got);
    ck_assert(got == 1 || (why != NULL && why[0] != '\0'));
}
END_TEST

static const struct {
    const char *prefix;
    const char *path;
    int admits;
} prefix_cases[] = {
    {"/repos/acme", "/repos/acme", 1},
    {"/repos/acme", "/repos/acme/", 1},
    {"/repos/acme", "/repos/acme/x/y", 1},
    {"/repos/acme", "/repos/acme-evil", 0},
    {"/repos/acme", "/repos/acmex", 0},
    {"/repos/acme", "/repos/acm", 0},
    {"/repos/acme", "/repos", 0},
    {"/repos/acme", "/Repos/acme", 0}, /* paths are case-sensitive */
    {"/repos/acme", "//repos/acme", 0},
    {"/repos/acme/", "/repos/acme/", 1},
    {"/repos/acme/", "/repos/acme/x", 1},
    {"/repos/acme/", "/repos/acme", 0},
    {"/", "/", 1},
    {"/", "/anything/at/all", 1},
    {"/v1", "", 0},
    {"/v1", "*", 0},
};

START_TEST(test_scope_prefix)
{
    const char *pre = prefix_cases[_i].prefix, *path = prefix_cases[_i].path;

    ck_assert_msg(scope_prefix_admits(pre, strlen(pre), path, strlen(path)) ==
                      prefix_cases[_i].admits,
                  "%s vs %s", pre, path);
}
END_TEST

START_TEST(test_scope_path_len_and_decode)
{
    char out[64];
    const char *t = "/a%3Ab%20c?x=%2F#f";
    size_t n = scope_path_len(t, strlen(t));

    ck_assert_uint_eq(n, 10);
    n = pct_decode(out, t, n, 0);
    ck_assert_uint_eq(n, 6);
    ck_assert(memcmp(out, "/a:b c", 6) == 0);
    ck_assert_uint_eq(scope_path_len("/p#x?y", 6), 2);
    ck_assert_uint_eq(scope_path_len("*", 1), 1);
}
END_TEST

START_TEST(test_scope_methods)
{
    const char *why;

    ck_assert_int_eq(scope_method_ok("GET", &why), 1);
    ck_assert_int_eq(scope_method_ok("PROPFIND", &why), 1);
    ck_assert_int_eq(scope_method_ok("M-SEARCH", &why), 1);
    ck_assert_int_eq(scope_method_ok("get", &why), 0);
    ck_assert_int_eq(scope_method_ok("Get", &why), 0);
    ck_assert_int_eq(scope_method_ok("GE T", &why), 0);
    ck_assert_int_eq(scope_method_ok("CONNECT", &why), 0);
    ck_assert_int_eq(scope_method_ok("TRACE", &why), 0);
    ck_assert_int_eq(scope_method_ok("", &why), 0);
    ck_assert_int_eq(scope_method_ok("ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG", &why), 0);
}
END_TEST

/*
 * rules 0-1: a read-only GitHub token for one organisation, then a write rule for issues only;
 * 2-3: a scoped rule before an unscoped one (the scoped one wins only inside its scope);
 * 4-5: an unscoped rule before a scoped one (the scoped one never wins);
 * 6: a wildcard rule with a path scope; 7: a method scope alone (no path: no canonical check).
 */
static const char *decide_vault =
    "{'version':1,'secrets':{'A':{'value':'CANARY-a'},'B':{'value':'CANARY-b'}},"
    "'rules':["
    "{'host_pattern':'api.github.com','secret':'A','scheme':'bearer','methods':['GET','HEAD'],"
    "'paths':['/repos/acme','/orgs/acme/']},"
    "{'host_pattern':'api.github.com','secret':'B','scheme':'bearer','methods':['POST'],"
    "'paths':['/repos/acme/issues']},"
    "{'host_pattern':'scoped-first.example','secret':'A','scheme':'bearer','paths':['/v1/"
    "models:x']},"
    "{'host_pattern':'scoped-first.example','secret':'B','scheme':'bearer'},"
    "{'host_pattern':'open-first.example','secret':'B','scheme':'bearer'},"
    "{'host_pattern':'open-first.example','secret':'A','scheme':'bearer','methods':['GET']},"
    "{'host_pattern':'*.svc.example','secret':'A','scheme':'bearer','paths':['/ok']},"
    "{'host_pattern':'methods.example','secret':'A','scheme':'bearer','methods':['GET']}],"
    "'host_policy':{'default':'allow','hosts':{'blocked.example':'block'}}}";

static const struct {
    const char *host, *method, *target;
    int status; /* 0 or 400 */
    enum policy_verdict verdict;
    int rule;
    bool out_of_scope;
} request_cases[] = {
    {"api.github.com", "GET", "/repos/acme", 0, POLICY_INJECT, 0, false},
    {"api.github.com", "HEAD", "/repos/acme/x?per_page=1", 0, POLICY_INJECT, 0, false},
    {"api.github.com", "GET", "/repos/%61cme/x", 0, POLICY_INJECT, 0, false}, /* decoded */
    {"api.github.com", "GET", "/orgs/acme/members", 0, POLICY_INJECT, 0, false},
    {"api.github.com", "GET", "/orgs/acme", 0, POLICY_BLOCK, -1, true}, /* prefix ends in / */
    {"api.github.com", "GET", "/repos/acme-evil", 0, POLICY_BLOCK, -1, true},
    {"api.github.com", "GET", "/repos/other", 0, POLICY_BLOCK, -1, true},
    {"api.github.com", "DELETE", "/repos/acme", 0, POLICY_BLOCK, -1, true},
    {"api.github.com", "get", "/repos/acme", 0, POLICY_BLOCK, -1, true}, /* methods are exact */
    {"api.github.com", "POST", "/repos/acme/issues", 0, POLICY_INJECT, 1, false},
    {"api.github.com", "POST", "/repos/acme/issues/7/comments", 0, POLICY_INJECT, 1, false},
    {"api.github.com", "POST", "/repos/acme/pulls", 0, POLICY_BLOCK, -1, true},
    {"api.github.com", "OPTIONS", "*", 0, POLICY_BLOCK, -1, true},
    {"api.github.com", "GET", "/repos/acme/../other", 400, POLICY_BLOCK, -1, false},
    {"api.github.com", "GET", "/repos/acme/%2e%2e/other", 400, POLICY_BLOCK, -1, false},
    {"api.github.com", "GET", "/repos/acme%2fx", 400, POLICY_BLOCK, -1, false},
    {"api.github.com", "GET", "/repos/acme\\x", 400, POLICY_BLOCK, -1, false},
    {"api.github.com", "GET", "/repos/acme/..;/x", 400, POLICY_BLOCK, -1, false},
    {"api.github.com", "GET", "/repos/acme/x?q=../..", 0, POLICY_INJECT, 0, false}, /* query */
    {"api.github.com", "GET", "/repos/acme/%00/x", 400, POLICY_BLOCK, -1, false},
    /* a fragment is 400 on every host: the scope would end at '#', the upstream reads on */
    {"api.github.com", "GET", "/repos/acme#/../../orgs/x", 400, POLICY_BLOCK, -1, false},
    {"api.github.com", "GET", "/repos/acme?q=1#x", 400, POLICY_BLOCK, -1, false},
    {"methods.example", "GET", "/x#y", 400, POLICY_BLOCK, -1, false},
    {"blocked.example", "GET", "/#", 400, POLICY_BLOCK, -1, false},
    {"other.example", "GET", "/a#b", 400, POLICY_BLOCK, -1, false},
    {"scoped-first.example", "GET", "/v1/models:x", 0, POLICY_INJECT, 2, false},
    {"scoped-first.example", "POST", "/v1/models%3ax/y", 0, POLICY_INJECT, 2, false},
    {"scoped-first.example", "GET", "/v2", 0, POLICY_INJECT, 3, false},
    {"scoped-first.example", "GET", "/v1/./models:x", 400, POLICY_BLOCK, -1, false},
    {"open-first.example", "GET", "/x", 0, POLICY_INJECT, 4, false},
    {"open-first.example", "POST", "/x", 0, POLICY_INJECT, 4, false},
    {"open-first.example", "GET", "/a/../b", 0, POLICY_INJECT, 4, false}, /* no path scope */
    {"a.svc.example", "GET", "/ok/1", 0, POLICY_INJECT, 6, false},
    {"a.b.svc.example", "GET", "/nope", 0, POLICY_BLOCK, -1, true},
    {"a.svc.example", "GET", "/ok/%2e%2e/x", 400, POLICY_BLOCK, -1, false},
    {"methods.example", "GET", "/../x", 0, POLICY_INJECT, 7, false},
    {"methods.example", "GET", "/%00", 0, POLICY_INJECT, 7, false}, /* no path scope */
    {"methods.example", "PUT", "/x", 0, POLICY_BLOCK, -1, true},
    {"blocked.example", "GET", "/a/../b", 0, POLICY_BLOCK, -1, false}, /* block wins first */
    {"other.example", "GET", "/a/../b", 0, POLICY_ALLOW, -1, false},   /* no rule: no check */
};

START_TEST(test_scope_decide_request)
{
    struct policy *p = vaultq_parse_ok(decide_vault);
    struct policy_decision d = {.verdict = POLICY_ALLOW, .rule = -9};
    const char *why = NULL, *t = request_cases[_i].target;
    int st = policy_decide_request(p, request_cases[_i].host, request_cases[_i].method, t,
                                   strlen(t), false, &d, &why);

    ck_assert_msg(st == request_cases[_i].status, "%s %s %s: status %d", request_cases[_i].method,
                  request_cases[_i].host, t, st);
    if (st == 0) {
        ck_assert_msg(d.verdict == request_cases[_i].verdict, "%s %s: verdict %d",
                      request_cases[_i].method, t, d.verdict);
        ck_assert_int_eq(d.rule, request_cases[_i].rule);
        ck_assert_int_eq(d.out_of_scope, request_cases[_i].out_of_scope);
    } else {
        ck_assert_ptr_nonnull(why);
        ck_assert_int_eq(d.rule, -9); /* untouched */
    }
    policy_unref(&p);
}
END_TEST

/*
 * A method override field (X-HTTP-Method-Override, X-HTTP-Method, X-Method-Override) on a host
 * with a `methods` scope is outside the scope, whatever rule would have admitted the method;
 * hosts without one decide as before.
 */
static const struct {
    const char *host, *method, *target;
    int status;
    enum policy_verdict verdict;
    int rule;
    bool out_of_scope;
} override_cases[] = {
    {"api.github.com", "GET", "/repos/acme", 0, POLICY_BLOCK, -1, true},
    {"api.github.com", "POST", "/repos/acme/issues", 0, POLICY_BLOCK, -1, true},
    {"methods.example", "GET", "/x", 0, POLICY_BLOCK, -1, true},
    {"open-first.example", "GET", "/x", 0, POLICY_BLOCK, -1, true},     /* rule 5 has methods */
    {"scoped-first.example", "GET", "/v2", 0, POLICY_INJECT, 3, false}, /* paths only */
    {"a.svc.example", "GET", "/ok/1", 0, POLICY_INJECT, 6, false},
    {"other.example", "GET", "/x", 0, POLICY_ALLOW, -1, false},
    {"blocked.example", "GET", "/x", 0, POLICY_BLOCK, -1, false}, /* the host decides */
    {"api.github.com", "GET", "/repos/acme/../x", 400, POLICY_BLOCK, -1, false}, /* 400 first */
};

START_TEST(test_scope_method_override)
{
    struct policy *p = vaultq_parse_ok(decide_vault);
    struct policy_decision d = {.verdict = POLICY_ALLOW, .rule = -9};
    const char *why = NULL, *t = override_cases[_i].target;
    int st = policy_decide_request(p, override_cases[_i].host, override_cases[_i].method, t,
                                   strlen(t), true, &d, &why);

    ck_assert_msg(st == override_cases[_i].status, "%s %s: status %d", override_cases[_i].host, t,
                  st);
    if (st == 0) {
        ck_assert_msg(d.verdict == override_cases[_i].verdict, "%s %s: verdict %d",
                      override_cases[_i].host, t, d.verdict);
        ck_assert_int_eq(d.rule, override_cases[_i].rule);
        ck_assert_int_eq(d.out_of_scope, override_cases[_i].out_of_scope);
    }
    policy_unref(&p);
}
END_TEST

/* Scopes never change which hosts a connection reaches: the host-only decision. */
START_TEST(test_scope_host_decision_unchanged)
{
    struct policy *p = vaultq_parse_ok(decide_vault);
    struct policy_decision d;
    const char *reason = NULL;

    policy_decide(p, "api.github.com", &d);
    ck_assert_int_eq(d.verdict, POLICY_INJECT);
    ck_assert_int_eq(d.rule, 0);
    ck_assert(d.designated);
    ck_assert(!d.out_of_scope);
    policy_decide(p, "open-first.example", &d);
    ck_assert_int_eq(d.rule, 4);
    ck_assert_int_eq(policy_mode(p, &reason), POLICY_MODE_CATCHALL); /* the wildcard rule */
    policy_unref(&p);
}
END_TEST

START_TEST(test_scope_describe)
{
    struct policy *p = vaultq_parse_ok(decide_vault);
    char line[512];

    policy_rule_describe(p, 0, line, sizeof(line));
    ck_assert_str_eq(line, "rules[0]: \"api.github.com\" -> A (bearer); methods: GET HEAD; paths: "
                           "\"/repos/acme\" \"/orgs/acme/\"");
    policy_rule_describe(p, 3, line, sizeof(line));
    ck_assert_str_eq(line,
                     "rules[3]: \"scoped-first.example\" -> B (bearer); methods: any; paths: any");
    policy_unref(&p);
}
END_TEST

Suite *suite_scope(void);

Suite *suite_scope(void)
{
    Suite *s = suite_create("scope");
    TCase *tc = tcase_create("scope");

    tcase_add_loop_test(tc, test_scope_canonical, 0,
                        (int)(sizeof(canon_cases) / sizeof(canon_cases[0])));
    tcase_add_loop_test(tc, test_scope_prefix, 0,
                        (int)(sizeof(prefix_cases) / sizeof(prefix_cases[0])));
    tcase_add_test(tc, test_scope_path_len_and_decode);
    tcase_add_test(tc, test_scope_methods);
    tcase_add_loop_test(tc, test_scope_decide_request, 0,
                        (int)(sizeof(request_cases) / sizeof(request_cases[0])));
    tcase_add_loop_test(tc, test_scope_method_override, 0,
                        (int)(sizeof(override_cases) / sizeof(override_cases[0])));
    tcase_add_test(tc, test_scope_host_decision_unchanged);
    tcase_add_test(tc, test_scope_describe);
    suite_add_tcase(s, tc);
    return s;
}
