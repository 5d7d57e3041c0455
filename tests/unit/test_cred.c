/*
 * test_cred.c - suite `cred`: the table of credential kinds (policy/cred.c) is complete and
 * ordered as the vault's scheme error lists it, and each kind's wire value and masking forms
 * for a sample secret are the exact bytes the schemes define.
 *
 * Wire values carry a (canary) secret: they are compared with same_bytes(), which never prints.
 */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "policy/cred.h"
#include "policy/inject.h"
#include "policy/policy.h"
#include "policy/policy_int.h"
#include "vaultq.h"

#define ERRSZ 512

/* Compares without printing: the bytes may carry a (canary) secret. */
static void same_bytes(const void *got, size_t got_len, const char *want, const char *what)
{
    ck_assert_msg(got_len == strlen(want) && memcmp(got, want, got_len) == 0,
                  "%s: bytes differ from the expected ones", what);
}

START_TEST(test_cred_table_complete)
{
    for (int s = 0; s < POLICY_SCHEME_COUNT; s++) {
        const struct cred_kind *k = cred_kind_of((enum policy_scheme)s), *f;
        enum policy_scheme got = POLICY_SCHEME_COUNT;

        ck_assert_ptr_nonnull(k);
        ck_assert_ptr_nonnull(k->name);
        ck_assert(k->wire != NULL);
        ck_assert_msg((k->apply == NULL) != (k->sign == NULL),
                      "%s: a kind either applies a fixed value or signs each request", k->name);
        ck_assert_str_eq(policy_scheme_name((enum policy_scheme)s), k->name);
        f = cred_kind_find(k->name, &got);
        ck_assert_ptr_eq(f, k);
        ck_assert_int_eq(got, s);
        for (int t = 0; t < s; t++)
            ck_assert_str_ne(cred_kind_of((enum policy_scheme)t)->name, k->name);
        for (size_t i = 0; i < k->nfields; i++) {
            ck_assert_ptr_eq(cred_kind_field(k, k->fields[i].key), &k->fields[i]);
            ck_assert_msg(k->fields[i].type == CRED_FIELD_STRING || k->fields[i].check == NULL,
                          "%s.%s: only strings have a check", k->name, k->fields[i].key);
        }
    }
    ck_assert_uint_eq(cred_kind_count(), POLICY_SCHEME_COUNT);
    ck_assert_ptr_null(cred_kind_of(POLICY_SCHEME_COUNT));
    ck_assert_str_eq(policy_scheme_name(POLICY_SCHEME_COUNT), "unknown");
}
END_TEST

START_TEST(test_cred_find_unknown)
{
    enum policy_scheme s = POLICY_SCHEME_QUERY;

    ck_assert_ptr_null(cred_kind_find("digest", &s));
    ck_assert_ptr_null(cred_kind_find("Bearer", &s));
    ck_assert_ptr_null(cred_kind_find("", &s));
    ck_assert_int_eq(s, POLICY_SCHEME_QUERY); /* untouched */
    ck_assert_ptr_null(cred_kind_field(&cred_bearer, "name"));
    ck_assert_ptr_nonnull(cred_kind_field(&cred_header, "name"));
}
END_TEST

START_TEST(test_cred_list_in_order)
{
    char buf[128], small[12];
    struct policy *p;
    char err[ERRSZ] = "";

    cred_kind_list(buf, sizeof(buf));
    ck_assert_str_eq(buf, "bearer, basic, header, query, sigv4");
    cred_kind_list(small, sizeof(small));
    ck_assert_str_eq(small, "bearer, bas");
    p = vaultq_parse("{'version':1,'secrets':{'A':{'value':'CANARY-a'}},'rules':[{'host_pattern':"
                     "'a.example','secret':'A','scheme':'digest'}]}",
                     err, sizeof(err));
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, "rules[0].scheme: expected one of bearer, basic, header, query, sigv4");
}
END_TEST

/* One rule per kind, in enum order, over one sample secret (and a session token for sigv4). */
static const char *const kinds_vault =
    "{'version':1,'secrets':{'S':{'value':'CANARY-cred q/+1'},'T':{'value':'CANARY-tok'}},"
    "'rules':["
    "{'host_pattern':'b.example','secret':'S','scheme':'bearer'},"
    "{'host_pattern':'u.example','secret':'S','scheme':'basic','username':'u'},"
    "{'host_pattern':'h.example','secret':'S','scheme':'header','name':'X-Api-Key'},"
    "{'host_pattern':'q.example','secret':'S','scheme':'query','name':'key'},"
    "{'host_pattern':'s.example','secret':'S','scheme':'sigv4','access_key_id':'AKID',"
    "'region':'us-east-1','service':'s3','session_token':'T'}]}";

static const struct {
    const char *value; /* the wire value */
    size_t nforms;
    const char *forms[INJECT_MAX_FORMS];
    unsigned int flags[INJECT_MAX_FORMS];
} kind_wire[] = {
    [POLICY_SCHEME_BEARER] = {"Bearer CANARY-cred q/+1",
                              1,
                              {"CANARY-cred q/+1"},
                              {INJECT_FORM_VALUE}},
    [POLICY_SCHEME_BASIC] = {"Basic dTpDQU5BUlktY3JlZCBxLysx",
                             2,
                             {"CANARY-cred q/+1", "dTpDQU5BUlktY3JlZCBxLysx"},
                             {INJECT_FORM_VALUE, 0}},
    [POLICY_SCHEME_HEADER] = {"CANARY-cred q/+1", 1, {"CANARY-cred q/+1"}, {INJECT_FORM_VALUE}},
    [POLICY_SCHEME_QUERY] = {"CANARY-cred%20q%2F%2B1",
                             1,
                             {"CANARY-cred q/+1"},
                             {INJECT_FORM_VALUE}},
    [POLICY_SCHEME_SIGV4] = {"",
                             2,
                             {"CANARY-cred q/+1", "CANARY-tok"},
                             {INJECT_FORM_VALUE, INJECT_FORM_VALUE}},
};

START_TEST(test_cred_wire_forms)
{
    struct policy *p = vaultq_parse_ok(kinds_vault);

    ck_assert_uint_eq(sizeof(kind_wire) / sizeof(kind_wire[0]), POLICY_SCHEME_COUNT);
    ck_assert_uint_eq(policy_rule_count(p), POLICY_SCHEME_COUNT);
    for (int s = 0; s < POLICY_SCHEME_COUNT; s++) {
        const struct policy_wire *w = policy_wire(p, s);
        struct policy_rule_info ri;

        policy_rule_info(p, (size_t)s, &ri);
        ck_assert_int_eq(ri.scheme, s);
        ck_assert_int_eq(ri.per_request, cred_kind_of(ri.scheme)->sign != NULL);
        ck_assert_ptr_nonnull(w);
        same_bytes(w->value, w->value_len, kind_wire[s].value, ri.host_pattern);
        ck_assert_uint_eq(w->nforms, kind_wire[s].nforms);
        for (size_t i = 0; i < w->nforms; i++) {
            same_bytes(w->forms[i].bytes, w->forms[i].len, kind_wire[s].forms[i], ri.host_pattern);
            ck_assert_uint_eq(w->forms[i].flags, kind_wire[s].flags[i]);
        }
    }
    policy_unref(&p);
}
END_TEST

Suite *suite_cred(void);

Suite *suite_cred(void)
{
    Suite *s = suite_create("cred");
    TCase *tc = tcase_create("cred");

    tcase_add_test(tc, test_cred_table_complete);
    tcase_add_test(tc, test_cred_find_unknown);
    tcase_add_test(tc, test_cred_list_in_order);
    tcase_add_test(tc, test_cred_wire_forms);
    suite_add_tcase(s, tc);
    return s;
}
