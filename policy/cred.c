/*
 * cred.c - the table of credential kinds (policy/cred.h): one row per enum policy_scheme
 * value, in its order, which is also the order the vault's error message lists them in.
 *
 * Guarantees: every scheme has a kind (checked at compile time); lookups never fail on a
 * value that is no scheme, they return NULL.
 */
#include "policy/cred.h"

#include <stdio.h>
#include <string.h>

static const struct cred_kind *const kinds[] = {
    [POLICY_SCHEME_BEARER] = &cred_bearer, [POLICY_SCHEME_BASIC] = &cred_basic,
    [POLICY_SCHEME_HEADER] = &cred_header, [POLICY_SCHEME_QUERY] = &cred_query,
    [POLICY_SCHEME_SIGV4] = &cred_sigv4,
};

_Static_assert(sizeof(kinds) / sizeof(kinds[0]) == POLICY_SCHEME_COUNT,
               "every credential scheme needs a row in the kind table");

size_t cred_kind_count(void)
{
    return sizeof(kinds) / sizeof(kinds[0]);
}

const struct cred_kind *cred_kind_of(enum policy_scheme s)
{
    if ((size_t)s >= cred_kind_count())
        return NULL;
    return kinds[s];
}

const struct cred_kind *cred_kind_find(const char *name, enum policy_scheme *s)
{
    for (size_t i = 0; i < cred_kind_count(); i++) {
        if (strcmp(kinds[i]->name, name) == 0) {
            *s = (enum policy_scheme)i;
            return kinds[i];
        }
    }
    return NULL;
}

void cred_kind_list(char *buf, size_t len)
{
    size_t o = 0;
    int n;

    if (len == 0)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < cred_kind_count() && o < len; i++) {
        n = snprintf(buf + o, len - o, "%s%s", i > 0 ? ", " : "", kinds[i]->name);
        if (n < 0)
            return;
        o += (size_t)n;
    }
}

const struct cred_field *cred_kind_field(const struct cred_kind *k, const char *key)
{
    for (size_t i = 0; i < k->nfields; i++) {
        if (strcmp(k->fields[i].key, key) == 0)
            return &k->fields[i];
    }
    return NULL;
}
