/*
 * vaultq.c - single-quoted vaults for the unit tests (vaultq.h).
 */
#include "tests/unit/vaultq.h"
#include "tests/unit/guard.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define VAULTQ_ERRSZ 1024

char *vaultq_json(const char *src)
{
    char *s = strdup(src);

    ck_assert_ptr_nonnull(s);
    for (char *p = s; *p != '\0'; p++) {
        if (*p == '\'')
            *p = '"';
    }
    return s;
}

struct policy *vaultq_parse(const char *src, char *err, size_t errlen)
{
    char *json = vaultq_json(src);
    size_t len = strlen(json);
    char *g = guard_copy(json, len);
    struct policy *p;

    err[0] = '\0';
    p = policy_parse(g, len, err, errlen);
    guard_free(g, len);
    free(json);
    return p;
}

struct policy *vaultq_parse_ok(const char *src)
{
    char err[VAULTQ_ERRSZ];
    struct policy *p = vaultq_parse(src, err, sizeof(err));

    ck_assert_msg(p != NULL, "vault refused: %s", err);
    return p;
}
