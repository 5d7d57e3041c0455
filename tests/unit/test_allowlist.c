/*
 * test_allowlist.c - `audit suggest`'s aggregation (audit/allowlist.c): rows in, fragment and
 * stderr lines out; the fragment pasted into a vault is valid and allows what it names.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpsl.h>

#include "audit/allowlist.h"
#include "policy/policy.h"

#define ERRSZ 1024

/* rows as audit_query(AUDIT_TABLE_SEEN) gives them: "host route count;..." */
static cJSON *rows_of(const char *spec)
{
    cJSON *arr = cJSON_CreateArray();
    char *copy = strdup(spec), *save = NULL;

    ck_assert_ptr_nonnull(arr);
    ck_assert_ptr_nonnull(copy);
    for (char *tok = strtok_r(copy, ";", &save); tok != NULL; tok = strtok_r(NULL, ";", &save)) {
        char host[300], route[32];
        double count;
        cJSON *o = cJSON_CreateObject();

        ck_assert_int_eq(sscanf(tok, "%299s %31s %lf", host, route, &count), 3);
        cJSON_AddStringToObject(o, "host", host);
        cJSON_AddStringToObject(o, "route", route);
        cJSON_AddNumberToObject(o, "count", count);
        cJSON_AddItemToArray(arr, o);
    }
    free(copy);
    return arr;
}

/* The fragment's hosts as "pattern,pattern,...", in their order. */
static void keys_of(const cJSON *frag, char *out, size_t outsz)
{
    const cJSON *hosts = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(frag, "host_policy"), "hosts");
    const cJSON *it;
    size_t n = 0;

    ck_assert_ptr_nonnull(hosts);
    out[0] = '\0';
    cJSON_ArrayForEach(it, hosts)
    {
        ck_assert_str_eq(it->valuestring, "allow");
        n += (size_t)snprintf(out + n, outsz - n, "%s%s", n > 0 ? "," : "", it->string);
    }
}

static const char *seen_rows =
    "b.example.com refused 1;a.example.com refused 3;a.example.com blocked 3;"
    "c.example.com reported 2;example.com reported 1;pypi.org refused 7;pypi.org blocked 7;"
    "10.0.0.1 refused 1;10.0.0.2 reported 1;10.0.0.3 reported 1;(no-sni) refused 4;"
    "(no-sni) blocked 4;x.b.co.uk reported 2;y.b.co.uk blocked 1;A.Example.org reported 9;"
    "d.example.com reported 1;d.example.com refused 1;d.example.com blocked 1";

static const struct {
    unsigned min_count;
    bool psl;
    const char *keys;
    const char *lines;
} suggest_cases[] = {
    {1, true, "*.example.com,pypi.org,x.b.co.uk,10.0.0.1,10.0.0.2,10.0.0.3,example.com,y.b.co.uk",
     "a.example.com 3 refused under *.example.com\n"
     "b.example.com 1 refused under *.example.com\n"
     "c.example.com 2 reported under *.example.com\n"
     "d.example.com 2 reported,refused under *.example.com\n"
     "pypi.org 7 refused\n"
     "x.b.co.uk 2 reported\n"
     "10.0.0.1 1 refused\n"
     "10.0.0.2 1 reported\n"
     "10.0.0.3 1 reported\n"
     "example.com 1 reported\n"
     "y.b.co.uk 1 refused\n"
     "(no-sni) 4 refused not a host name\n"
     "A.Example.org 9 reported not a host name\n"},
    /* the minimum first, then the collapse of the three names left under example.com */
    {2, true, "*.example.com,pypi.org,x.b.co.uk",
     "a.example.com 3 refused under *.example.com\n"
     "c.example.com 2 reported under *.example.com\n"
     "d.example.com 2 reported,refused under *.example.com\n"
     "pypi.org 7 refused\n"
     "x.b.co.uk 2 reported\n"
     "(no-sni) 4 refused not a host name\n"
     "10.0.0.1 1 refused below --min-count\n"
     "10.0.0.2 1 reported below --min-count\n"
     "10.0.0.3 1 reported below --min-count\n"
     "A.Example.org 9 reported not a host name\n"
     "b.example.com 1 refused below --min-count\n"
     "example.com 1 reported below --min-count\n"
     "y.b.co.uk 1 refused below --min-count\n"},
    /* one name left under example.com: it stays exact */
    {3, true, "pypi.org,a.example.com", NULL},
    /* without a suffix list nothing collapses */
    {1, false,
     "pypi.org,a.example.com,c.example.com,d.example.com,x.b.co.uk,10.0.0.1,10.0.0.2,"
     "10.0.0.3,b.example.com,example.com,y.b.co.uk",
     NULL},
    {3, false, "pypi.org,a.example.com", NULL},
    {100, true, "", NULL},
};

START_TEST(test_allowlist_suggest)
{
    cJSON *rows = rows_of(seen_rows), *frag = NULL;
    char *lines = NULL, keys[1024];
    const psl_ctx_t *psl = suggest_cases[_i].psl ? psl_builtin() : NULL;

    ck_assert_int_eq(allowlist_suggest(rows, suggest_cases[_i].min_count, psl, &frag, &lines), 0);
    keys_of(frag, keys, sizeof(keys));
    ck_assert_str_eq(keys, suggest_cases[_i].keys);
    if (suggest_cases[_i].lines != NULL)
        ck_assert_str_eq(lines, suggest_cases[_i].lines);
    cJSON_Delete(frag);
    cJSON_Delete(rows);
    free(lines);
}
END_TEST

/* The order of the rows does not matter. */
START_TEST(test_allowlist_row_order)
{
    cJSON *rows = rows_of(seen_rows), *rev = cJSON_CreateArray(), *f1 = NULL, *f2 = NULL;
    char *l1 = NULL, *l2 = NULL;

    for (int i = cJSON_GetArraySize(rows) - 1; i >= 0; i--)
        cJSON_AddItemToArray(rev, cJSON_Duplicate(cJSON_GetArrayItem(rows, i), 1));
    ck_assert_int_eq(allowlist_suggest(rows, 1, psl_builtin(), &f1, &l1), 0);
    ck_assert_int_eq(allowlist_suggest(rev, 1, psl_builtin(), &f2, &l2), 0);
    ck_assert(cJSON_Compare(f1, f2, 1));
    ck_assert_str_eq(l1, l2);
    cJSON_Delete(f1);
    cJSON_Delete(f2);
    cJSON_Delete(rows);
    cJSON_Delete(rev);
    free(l1);
    free(l2);
}
END_TEST

/* Pasted into a block-default vault, the fragment is valid and each host it names is allowed. */
START_TEST(test_allowlist_paste)
{
    static const char *const allowed[] = {"a.example.com", "new.example.com", "pypi.org",
                                          "10.0.0.2",      "example.com",     "y.b.co.uk"};
    cJSON *rows = rows_of(seen_rows), *frag = NULL, *vault = cJSON_CreateObject();
    char *lines = NULL, *json, err[ERRSZ];
    struct policy *p;
    struct policy_decision d;

    ck_assert_int_eq(allowlist_suggest(rows, 1, psl_builtin(), &frag, &lines), 0);
    cJSON_AddNumberToObject(vault, "version", 1);
    cJSON_AddItemToObject(vault, "host_policy", cJSON_DetachItemFromObject(frag, "host_policy"));
    cJSON_AddStringToObject(cJSON_GetObjectItem(vault, "host_policy"), "default", "block");
    json = cJSON_PrintUnformatted(vault);
    p = policy_parse(json, strlen(json), err, sizeof(err));
    ck_assert_msg(p != NULL, "%s", err);
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
        policy_decide(p, allowed[i], &d);
        ck_assert_msg(d.verdict == POLICY_ALLOW, "%s", allowed[i]);
    }
    policy_decide(p, "unseen.example.net", &d);
    ck_assert_int_eq(d.verdict, POLICY_BLOCK);
    policy_unref(&p);
    free(json);
    free(lines);
    cJSON_Delete(frag);
    cJSON_Delete(vault);
    cJSON_Delete(rows);
}
END_TEST

Suite *suite_allowlist(void);

Suite *suite_allowlist(void)
{
    Suite *s = suite_create("allowlist");
    TCase *tc = tcase_create("suggest");

    tcase_add_loop_test(tc, test_allowlist_suggest, 0,
                        (int)(sizeof(suggest_cases) / sizeof(suggest_cases[0])));
    tcase_add_test(tc, test_allowlist_row_order);
    tcase_add_test(tc, test_allowlist_paste);
    suite_add_tcase(s, tc);
    return s;
}
