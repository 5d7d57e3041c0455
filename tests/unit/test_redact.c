/*
 * test_redact.c - the redactor (common/redact.c): which runs are credential-shaped and masked,
 * which are names and left alone, and that a masked string keeps its length.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "common/redact.h"

struct redact_case {
    const char *in;
    const char *want;
};

static const struct redact_case cases[] = {
    /* known prefixes, at the start of a run or after '.', '/', '=' inside it */
    {"sk-proj-abc", "***********"},
    {"got ghp_x1y2 here", "got ******** here"},
    {"AKIAIOSFODNN7EXAMPLE", "********************"},
    {"\"xoxb-1-2\"", "\"********\""},
    {"/run/secrets/sk-live-1", "**********************"},
    {"*.sk-proj-zz", "************"},
    {"sk-", "sk-"}, /* a prefix alone is not a credential */
    {"ask-me", "ask-me"},
    /* long runs: random ones masked, names and paths kept */
    {"0123456789abcdef0123456789abcdef", "********************************"},
    {"0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcde"},
    {"generativelanguage.googleapis.com", "generativelanguage.googleapis.com"},
    {"bedrock-runtime.us-east-1.amazonaws.com", "bedrock-runtime.us-east-1.amazonaws.com"},
    {"/var/lib/vaultgate/secrets/openai_api_key", "/var/lib/vaultgate/secrets/openai_api_key"},
    {"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "****************************************"},
    {"wJalrXUtnFEMI+K7MDENG+bPxRfiCYEXAMPLEKEY", "****************************************"},
    {"a.0123456789abcdef0123456789abcdef", "**********************************"},
    {"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.abc",
     "***********************************************************************"},
    /* key words */
    {"Authorization: Bearer abcdefgh", "Authorization: Bearer ********"},
    {"Bearer abcdefg", "Bearer abcdefg"}, /* under 8 characters */
    {"password=hunter2", "password=*******"},
    {"api_key=x", "api_key=*"},
    {"\"token\": \"abcdefghij\"", "\"token\": \"**********\""},
    {"keyboard=qwertyuiop", "keyboard=qwertyuiop"},
    /* nothing else changes */
    {"rules[0].secret: unknown secret", "rules[0].secret: unknown secret"},
    {"AB:CD:EF:01", "AB:CD:EF:01"},
    {"", ""},
};

START_TEST(test_redact_table)
{
    const struct redact_case *tc = &cases[_i];
    char buf[256];

    snprintf(buf, sizeof(buf), "%s", tc->in);
    ck_assert_ptr_eq(redact_text(buf), buf);
    ck_assert_msg(strcmp(buf, tc->want) == 0, "%s -> %s, want %s", tc->in, buf, tc->want);
    ck_assert_uint_eq(strlen(buf), strlen(tc->in));
}
END_TEST

START_TEST(test_redact_copy)
{
    char small[8], room[REDACT_TOKEN_RUN + 8];
    const char *tok = "ghp_0123456789";

    /* the copy is cut and NUL-terminated, then redacted */
    ck_assert_str_eq(redact_copy(small, sizeof(small), tok), "*******");
    ck_assert_str_eq(redact_copy(room, sizeof(room), "host a.example"), "host a.example");
    ck_assert_str_eq(redact_copy(room, 1, "x"), "");
}
END_TEST

Suite *suite_redact(void);

Suite *suite_redact(void)
{
    Suite *s = suite_create("redact");
    TCase *tc = tcase_create("redact");

    tcase_add_loop_test(tc, test_redact_table, 0, (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_test(tc, test_redact_copy);
    suite_add_tcase(s, tc);
    return s;
}
