/*
 * test_policy.c - the policy over a loaded vault (policy/policy.c): decisions, routing mode,
 * warnings, notes, names, reference counting, the example vaults of conf/. The vault's
 * validation is test_vault.c.
 *
 * Secret values in these tests are canaries ("CANARY-..."); no assertion prints a secret.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/caps.h"
#include "common/hostname.h"
#include "policy/inject.h"
#include "policy/policy.h"
#include "tests/unit/vaultq.h"

#define ERRSZ 1024

/* one secret, A, for the rules below (test_vault.c uses the same) */
#define SEC "'secrets':{'A':{'value':'CANARY-a'}}"

static const char *decide_vault =
    "{'version':1,'secrets':{'A':{'value':'CANARY-a'},'B':{'value':'CANARY-b'}},"
    "'rules':["
    "{'host_pattern':'api.example.com','secret':'A','scheme':'bearer'},"
    "{'host_pattern':'*.svc.example.com','secret':'B','scheme':'header','name':'x-api-key'},"
    "{'host_pattern':'deep.svc.example.com','secret':'A','scheme':'bearer'},"
    "{'host_pattern':'re:eu-[0-9]+\\\\.example\\\\.net','secret':'A','scheme':'query',"
    "'name':'key'},"
    "{'host_pattern':'blocked.example.com','secret':'A','scheme':'bearer'},"
    "{'host_pattern':'10.1.2.3','secret':'B','scheme':'basic','username':'u'}],"
    "'host_policy':{'default':'block','hosts':{"
    "'blocked.example.com':'block','*.bad.example.com':'block','re:track[0-9]+\\\\.example\\\\.org'"
    ":"
    "'block','x.svc.example.com':'block','pypi.org':'allow','*.pythonhosted.org':'allow',"
    "'re:mirror[0-9]\\\\.example\\\\.org':'allow','mirror1.example.org':'block'}}}";

static const struct {
    const char *host;
    enum policy_verdict verdict;
    int rule;
    bool designated;
} decide_cases[] = {
    {"api.example.com", POLICY_INJECT, 0, true}, /* implicit allow under a block default */
    {"a.svc.example.com", POLICY_INJECT, 1, true},
    {"deep.svc.example.com", POLICY_INJECT, 1, true}, /* first matching rule wins */
    {"svc.example.com", POLICY_BLOCK, -1, false},     /* wildcard is not the apex */
    {"eu-12.example.net", POLICY_INJECT, 3, true},
    {"eu-12.example.net.evil.com", POLICY_BLOCK, -1, false},
    {"blocked.example.com", POLICY_BLOCK, -1, true}, /* block wins over a rule */
    {"x.svc.example.com", POLICY_BLOCK, -1, true},   /* block wins over a wildcard rule */
    {"a.b.bad.example.com", POLICY_BLOCK, -1, true},
    {"track77.example.org", POLICY_BLOCK, -1, true},
    {"10.1.2.3", POLICY_INJECT, 5, true},
    {"pypi.org", POLICY_ALLOW, -1, false},
    {"files.pythonhosted.org", POLICY_ALLOW, -1, false},
    {"pythonhosted.org", POLICY_BLOCK, -1, false},
    {"mirror2.example.org", POLICY_ALLOW, -1, false},
    {"mirror1.example.org", POLICY_BLOCK, -1, true}, /* block beats a matching allow */
    {"unknown.example", POLICY_BLOCK, -1, false},    /* the default */
    {"", POLICY_BLOCK, -1, false},
};

START_TEST(test_policy_decide)
{
    struct policy *p = vaultq_parse_ok(decide_vault);
    struct policy_decision d;

    policy_decide(p, decide_cases[_i].host, &d);
    ck_assert_msg(d.verdict == decide_cases[_i].verdict, "%s: verdict %d", decide_cases[_i].host,
                  d.verdict);
    ck_assert_int_eq(d.rule, decide_cases[_i].rule);
    ck_assert_int_eq(d.designated, decide_cases[_i].designated);
    policy_unref(&p);
}
END_TEST

START_TEST(test_policy_default_allow)
{
    struct policy *p =
        vaultq_parse_ok("{'version':1,'host_policy':{'hosts':{'evil.example':'block'}}}");
    struct policy_decision d;

    policy_decide(p, "anything.example", &d);
    ck_assert_int_eq(d.verdict, POLICY_ALLOW);
    ck_assert(!d.designated);
    policy_decide(p, "evil.example", &d);
    ck_assert_int_eq(d.verdict, POLICY_BLOCK);
    ck_assert(d.designated);
    policy_decide(p, NULL, &d);
    ck_assert_int_eq(d.verdict, POLICY_ALLOW);
    policy_unref(&p);
}
END_TEST

/*
 * Report-only (SPEC §12): every block becomes a reported allow without a rule, whatever made it
 * a block (an entry, the scope of a host's rules, a method override, the default); injection and
 * allows are unchanged; a non-canonical path on a path-scoped host is still 400.
 */
static const char *report_vault =
    "{'version':1," SEC ",'rules':["
    "{'host_pattern':'api.example.com','secret':'A','scheme':'bearer','methods':['GET'],"
    "'paths':['/v1']},"
    "{'host_pattern':'both.example.com','secret':'A','scheme':'bearer'}],"
    "'host_policy':{'default':'block','enforce':false,'hosts':{'evil.example':'block',"
    "'both.example.com':'block','pypi.org':'allow'}}}";

static const struct {
    const char *host, *method, *target;
    bool override;
    int status; /* 0, or the refusal that is not policy */
    enum policy_verdict verdict;
    int rule;
    bool reported, out_of_scope, rule_host, designated;
} report_cases[] = {
    {"api.example.com", "GET", "/v1/x", false, 0, POLICY_INJECT, 0, false, false, true, true},
    {"api.example.com", "POST", "/v1/x", false, 0, POLICY_ALLOW, -1, true, true, true, true},
    {"api.example.com", "GET", "/v2", false, 0, POLICY_ALLOW, -1, true, true, true, true},
    {"api.example.com", "GET", "/v1", true, 0, POLICY_ALLOW, -1, true, true, true, true},
    {"api.example.com", "GET", "/v1/../x", false, 400, POLICY_BLOCK, -1, false, false, false,
     false},
    {"api.example.com", "GET", "/v1#x", false, 400, POLICY_BLOCK, -1, false, false, false, false},
    {"evil.example", "GET", "/", false, 0, POLICY_ALLOW, -1, true, false, false, true},
    {"both.example.com", "GET", "/", false, 0, POLICY_ALLOW, -1, true, false, true, true},
    {"pypi.org", "GET", "/", false, 0, POLICY_ALLOW, -1, false, false, false, false},
    {"unknown.example", "GET", "/", false, 0, POLICY_ALLOW, -1, true, false, false, false},
};

START_TEST(test_policy_report_only)
{
    struct policy *p = vaultq_parse_ok(report_vault);
    struct policy_decision d = {.verdict = POLICY_BLOCK, .rule = -1};
    const char *why = NULL;
    int st = policy_decide_request(p, report_cases[_i].host, report_cases[_i].method,
                                   report_cases[_i].target, strlen(report_cases[_i].target),
                                   report_cases[_i].override, &d, &why);

    ck_assert(policy_report_only(p));
    ck_assert_msg(st == report_cases[_i].status, "%s %s%s: %d", report_cases[_i].method,
                  report_cases[_i].host, report_cases[_i].target, st);
    ck_assert_msg(d.verdict == report_cases[_i].verdict, "%s %s%s: verdict %d",
                  report_cases[_i].method, report_cases[_i].host, report_cases[_i].target,
                  d.verdict);
    ck_assert_int_eq(d.rule, report_cases[_i].rule);
    ck_assert_int_eq(d.reported, report_cases[_i].reported);
    ck_assert_int_eq(d.out_of_scope, report_cases[_i].out_of_scope);
    ck_assert_int_eq(d.rule_host, report_cases[_i].rule_host);
    ck_assert_int_eq(d.designated, report_cases[_i].designated);
    policy_unref(&p);
}
END_TEST

/* The same vault enforced refuses all of that; the host-only decision reports the same way. */
START_TEST(test_policy_report_only_enforced)
{
    char *json = vaultq_json(report_vault), *at = strstr(json, "\"enforce\":false");
    struct policy *p;
    struct policy_decision d;
    const char *why = NULL;
    char err[ERRSZ];

    ck_assert_ptr_nonnull(at);
    memcpy(at, "\"enforce\":true ", 15);
    p = policy_parse(json, strlen(json), err, sizeof(err));
    ck_assert_msg(p != NULL, "%s", err);
    ck_assert(!policy_report_only(p));
    ck_assert_int_eq(policy_decide_request(p, "api.example.com", "POST", "/v1", 3, false, &d, &why),
                     0);
    ck_assert(d.verdict == POLICY_BLOCK && d.out_of_scope && !d.reported && d.rule_host);
    policy_decide(p, "evil.example", &d);
    ck_assert(d.verdict == POLICY_BLOCK && !d.reported);
    policy_unref(&p);
    free(json);
    p = vaultq_parse_ok(report_vault);
    {
        size_t n;
        const char *const *m = policy_notes(p, &n);
        bool found = false;

        for (size_t i = 0; i < n; i++)
            found = found || strcmp(m[i], "report-only: refusals are recorded, not enforced") == 0;
        ck_assert_msg(found, "no report-only note");
    }
    policy_decide(p, "evil.example", &d);
    ck_assert(d.verdict == POLICY_ALLOW && d.reported && d.designated && d.rule == -1);
    policy_decide(p, "api.example.com", &d);
    ck_assert(d.verdict == POLICY_INJECT && !d.reported && d.rule == 0);
    policy_unref(&p);
}
END_TEST

#define R0 "{'host_pattern':'api.example.com','secret':'A','scheme':'bearer'}"
static const struct {
    const char *json;
    enum policy_mode mode;
    const char *reason;
} mode_cases[] = {
    {"{'version':1," SEC ",'rules':[" R0 "]}", POLICY_MODE_DEFAULT,
     "every designated host is an exact name or IP literal"},
    {"{'version':1," SEC ",'rules':[" R0 "],'host_policy':{'default':'block'}}",
     POLICY_MODE_CATCHALL, "host_policy.default is \"block\""},
    {"{'version':1," SEC ",'rules':[" R0 "],'host_policy':{'hosts':{'*.evil.example':'block'}}}",
     POLICY_MODE_CATCHALL, "host_policy.hosts[\"*.evil.example\"] is a wildcard block entry"},
    {"{'version':1,'host_policy':{'hosts':{'re:evil[0-9]\\\\.example':'block'}}}",
     POLICY_MODE_CATCHALL,
     "host_policy.hosts[\"re:evil[0-9]\\\\.example\"] is a regular expression block entry"},
    {"{'version':1," SEC ",'rules':[" R0 ",{'host_pattern':'*.api.example.com','secret':'A',"
     "'scheme':'bearer'}]}",
     POLICY_MODE_CATCHALL, "rules[1].host_pattern \"*.api.example.com\" is a wildcard"},
    {"{'version':1," SEC ",'rules':[{'host_pattern':'re:api[0-9]\\\\.example\\\\.com',"
     "'secret':'A','scheme':'bearer'}]}",
     POLICY_MODE_CATCHALL,
     "rules[0].host_pattern \"re:api[0-9]\\\\.example\\\\.com\" is a regular expression"},
    /* allow wildcards and exact blocks keep default routing */
    {"{'version':1,'host_policy':{'hosts':{'*.pypi.org':'allow','re:x.*':'allow',"
     "'evil.example':'block','10.0.0.1':'block'}}}",
     POLICY_MODE_DEFAULT, "every designated host is an exact name or IP literal"},
    /* the first reason in SPEC order: the default before entries before rules */
    {"{'version':1," SEC ",'rules':[{'host_pattern':'*.api.example.com','secret':'A',"
     "'scheme':'bearer'}],'host_policy':{'default':'block','hosts':{'*.x.example':'block'}}}",
     POLICY_MODE_CATCHALL, "host_policy.default is \"block\""},
    {"{'version':1," SEC ",'rules':[{'host_pattern':'*.api.example.com','secret':'A',"
     "'scheme':'bearer'}],'host_policy':{'hosts':{'*.x.example':'block'}}}",
     POLICY_MODE_CATCHALL, "host_policy.hosts[\"*.x.example\"] is a wildcard block entry"},
};

START_TEST(test_policy_mode)
{
    struct policy *p = vaultq_parse_ok(mode_cases[_i].json);
    const char *reason = NULL;
    size_t n;
    const char *const *w = policy_notes(p, &n);
    bool unconstrained = false;

    ck_assert_int_eq(policy_mode(p, &reason), mode_cases[_i].mode);
    ck_assert_str_eq(reason, mode_cases[_i].reason);
    ck_assert_int_eq(policy_mode(p, NULL), mode_cases[_i].mode);
    for (size_t i = 0; i < n; i++)
        unconstrained = unconstrained || strcmp(w[i], "CA unconstrained (catch-all routing)") == 0;
    ck_assert_int_eq(unconstrained, mode_cases[_i].mode == POLICY_MODE_CATCHALL);
    /* a note, never a warning: a catch-all run is not degraded by its routing (SPEC §7) */
    w = policy_warnings(p, &n);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_ne(w[i], "CA unconstrained (catch-all routing)");
    policy_unref(&p);
}
END_TEST

START_TEST(test_policy_messages)
{
    struct policy *p = vaultq_parse_ok(
        "{'version':1,'secrets':{'A':{'value':'CANARY-a'},'UNUSED':{'value':'CANARY-u'}},"
        "'rules':[" R0 "]}");
    size_t n;
    const char *const *m = policy_warnings(p, &n);

    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(m[0], "secret UNUSED is not used by any rule");
    policy_notes(p, &n);
    ck_assert_uint_eq(n, 0);
    policy_unref(&p);

    p = vaultq_parse_ok("{'version':1,'host_policy':{'hosts':{'pypi.org':'allow'}}}");
    m = policy_notes(p, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(m[0], "nothing to enforce: no rules, no block entries and an allow default");
    policy_warnings(p, &n);
    ck_assert_uint_eq(n, 0);
    policy_unref(&p);

    /* a block entry or a block default is something to enforce */
    p = vaultq_parse_ok("{'version':1,'host_policy':{'hosts':{'evil.example':'block'}}}");
    policy_notes(p, &n);
    ck_assert_uint_eq(n, 0);
    policy_unref(&p);
    p = vaultq_parse_ok("{'version':1,'host_policy':{'default':'block'}}");
    m = policy_notes(p, &n);
    ck_assert_uint_eq(n, 1); /* only catch-all routing's own note */
    ck_assert_str_eq(m[0], "CA unconstrained (catch-all routing)");
    policy_unref(&p);
}
END_TEST

START_TEST(test_policy_names)
{
    struct policy *p = vaultq_parse_ok(
        "{'version':1," SEC ",'rules':[" R0 ",{'host_pattern':'API.example.com.','secret':'A',"
        "'scheme':'bearer'},{'host_pattern':'*.w.example.com','secret':'A','scheme':'bearer'},"
        "{'host_pattern':'[2001:db8::1]','secret':'A','scheme':'bearer'}],"
        "'host_policy':{'hosts':{'evil.example':'block','api.example.com':'allow',"
        "'pypi.org':'allow','re:x.*':'block','192.0.2.7':'block'}}}");
    size_t n;
    const struct policy_name *nm = policy_names(p, &n);
    struct policy_rule_info ri;

    ck_assert_uint_eq(n, 5);
    ck_assert_str_eq(nm[0].name, "api.example.com");
    ck_assert(nm[0].rule && nm[0].allow && !nm[0].block && !nm[0].ip);
    ck_assert_str_eq(nm[1].name, "2001:db8::1");
    ck_assert(nm[1].rule && nm[1].ip);
    ck_assert_str_eq(nm[2].name, "evil.example");
    ck_assert(!nm[2].rule && nm[2].block && !nm[2].allow);
    ck_assert_str_eq(nm[3].name, "pypi.org");
    ck_assert(!nm[3].rule && nm[3].allow && !nm[3].block);
    ck_assert_str_eq(nm[4].name, "192.0.2.7");
    ck_assert(nm[4].ip && nm[4].block);
    policy_rule_info(p, 1, &ri);
    ck_assert_str_eq(ri.host_pattern, "API.example.com.");
    ck_assert_str_eq(ri.secret_name, "A");
    ck_assert_int_eq(ri.scheme, POLICY_SCHEME_BEARER);
    ck_assert_ptr_null(ri.name);
    ck_assert_ptr_null(ri.username);
    ck_assert_str_eq(policy_scheme_name(POLICY_SCHEME_QUERY), "query");
    ck_assert_str_eq(policy_mode_name(POLICY_MODE_CATCHALL), "catch-all");
    ck_assert_str_eq(policy_mode_name(POLICY_MODE_DEFAULT), "default");
    policy_unref(&p);
}
END_TEST

/*
 * An IPv4 host written as an IPv6 literal (mapped, compatible, NAT64, local-use NAT64, 6to4) is
 * that host for every match: block entries, rules and allow entries, whichever form the vault
 * and the client each used. Hosts reach policy_decide normalised, as the proxy normalises them.
 */
static const struct {
    const char *raw; /* as a client writes it */
    enum policy_verdict verdict;
    int rule;
} v4_form_cases[] = {
    {"11.0.0.2", POLICY_BLOCK, -1},
    {"[::ffff:11.0.0.2]", POLICY_BLOCK, -1},
    {"[::11.0.0.2]", POLICY_BLOCK, -1},
    {"[64:ff9b::b00:2]", POLICY_BLOCK, -1},
    {"[64:ff9b:1:b00:0:200::]", POLICY_BLOCK, -1},
    {"[2002:b00:2:99::1]", POLICY_BLOCK, -1},
    {"11.0.0.3", POLICY_INJECT, 0},
    {"[::ffff:b00:3]", POLICY_INJECT, 0},
    {"[64:ff9b::11.0.0.3]", POLICY_INJECT, 0},
    {"[2002:b00:3::]", POLICY_INJECT, 0},
    {"11.0.0.4", POLICY_ALLOW, -1},
    {"[::ffff:11.0.0.4]", POLICY_ALLOW, -1},
    {"[64:ff9b:1:b00:0:400::]", POLICY_ALLOW, -1},
    {"[::ffff:11.0.0.5]", POLICY_BLOCK, -1}, /* the default */
    {"[2001:db8::b00:2]", POLICY_BLOCK, -1}, /* not an embedding form: the default */
};

START_TEST(test_policy_v4_forms)
{
    struct policy *p = vaultq_parse_ok(
        "{'version':1," SEC ",'rules':[{'host_pattern':'[::ffff:11.0.0.3]','secret':'A',"
        "'scheme':'bearer'}],'host_policy':{'default':'block','hosts':{"
        "'[64:ff9b::b00:2]':'block','2002:b00:4::':'allow'}}}");
    char host[HOSTNAME_BUFSZ];
    const char *raw = v4_form_cases[_i].raw;
    struct policy_decision d;
    const struct policy_name *nm;
    size_t n;

    ck_assert_int_gt(hostname_normalize(raw, strlen(raw), host, sizeof(host)), 0);
    policy_decide(p, host, &d);
    ck_assert_msg(d.verdict == v4_form_cases[_i].verdict, "%s: verdict %d", raw, d.verdict);
    ck_assert_int_eq(d.rule, v4_form_cases[_i].rule);
    /* the names the CA constrains to and the hosts command print: IPv4, once each */
    nm = policy_names(p, &n);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(nm[0].name, "11.0.0.3");
    ck_assert(nm[0].ip && nm[0].rule);
    ck_assert_str_eq(nm[1].name, "11.0.0.2");
    ck_assert(nm[1].ip && nm[1].block);
    ck_assert_str_eq(nm[2].name, "11.0.0.4");
    ck_assert(nm[2].ip && nm[2].allow);
    policy_unref(&p);
}
END_TEST

START_TEST(test_policy_refcount)
{
    struct policy *p = vaultq_parse_ok("{'version':1}"), *q = policy_ref(p);

    ck_assert_ptr_eq(p, q);
    policy_unref(&p);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(policy_run_id(q), ""); /* still alive through q */
    policy_unref(&q);
    ck_assert_ptr_null(q);
    policy_unref(&q);
    policy_unref(NULL);
    ck_assert_ptr_null(policy_ref(NULL));
}
END_TEST

/* Path of a file of the source tree, found from __FILE__ or the working directory. */
static const char *source_file(const char *rel, char *buf, size_t bufsz)
{
    static const char self[] = "tests/unit/test_policy.c";
    const char *prefixes[] = {"", "", "../", "../../"};
    size_t flen = strlen(__FILE__), slen = strlen(self);
    char pre[512] = "";

    if (flen >= slen && flen - slen < sizeof(pre)) {
        memcpy(pre, __FILE__, flen - slen);
        pre[flen - slen] = '\0';
        prefixes[0] = pre;
    }
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        snprintf(buf, bufsz, "%s%s", prefixes[i], rel);
        if (access(buf, R_OK) == 0)
            return buf;
    }
    ck_abort_msg("cannot find %s in the source tree", rel);
    return NULL;
}

START_TEST(test_policy_example_files)
{
    char err[ERRSZ], path[600];
    struct policy *p =
        policy_load(source_file("conf/vault.example.json", path, sizeof(path)), err, sizeof(err));
    struct policy_decision d;

    ck_assert_msg(p != NULL, "%s", err);
    ck_assert_int_eq(policy_mode(p, NULL), POLICY_MODE_DEFAULT);
    policy_decide(p, "api.example.test", &d);
    ck_assert_int_eq(d.verdict, POLICY_INJECT);
    ck_assert_int_eq(d.rule, 0);
    policy_unref(&p);
    p = policy_load(source_file("conf/vault.catchall.example.json", path, sizeof(path)), err,
                    sizeof(err));
    ck_assert_msg(p != NULL, "%s", err);
    ck_assert_int_eq(policy_mode(p, NULL), POLICY_MODE_CATCHALL);
    policy_unref(&p);
}
END_TEST

Suite *suite_policy(void);

Suite *suite_policy(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = tcase_create("decide");

    tcase_add_loop_test(tc, test_policy_decide, 0,
                        (int)(sizeof(decide_cases) / sizeof(decide_cases[0])));
    tcase_add_test(tc, test_policy_default_allow);
    tcase_add_loop_test(tc, test_policy_report_only, 0,
                        (int)(sizeof(report_cases) / sizeof(report_cases[0])));
    tcase_add_test(tc, test_policy_report_only_enforced);
    tcase_add_loop_test(tc, test_policy_mode, 0, (int)(sizeof(mode_cases) / sizeof(mode_cases[0])));
    tcase_add_test(tc, test_policy_messages);
    tcase_add_test(tc, test_policy_names);
    tcase_add_loop_test(tc, test_policy_v4_forms, 0,
                        (int)(sizeof(v4_form_cases) / sizeof(v4_form_cases[0])));
    tcase_add_test(tc, test_policy_refcount);
    tcase_add_test(tc, test_policy_example_files);
    suite_add_tcase(s, tc);
    return s;
}
