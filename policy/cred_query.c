/*
 * cred_query.c - scheme "query" (SPEC §3): `<name>=<percent-encoded secret>` in the request
 * target. Field `name` (required): 1-256 characters of [A-Za-z0-9._~-]. The encoded value is
 * no form of its own: the masker finds every percent-encoding of the raw secret.
 */
#include "policy/cred.h"
#include "policy/credwire.h"
#include "common/secmem.h"

#include <stddef.h>
#include <string.h>

static const char *query_name_check(const char *s)
{
    size_t n = strlen(s);
    const char *bad = "expected 1-256 characters of [A-Za-z0-9._~-]";

    if (n < 1 || n > CRED_NAME_MAX)
        return bad;
    for (; *s != '\0'; s++) {
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '.' || *s == '_' || *s == '~'))
            return bad;
    }
    return NULL;
}

static const struct cred_field query_fields[] = {
    {"name", CRED_FIELD_STRING, true, offsetof(struct vault_rule, name), query_name_check},
};

static int query_wire(const struct vault_rule *r, const char *secret, size_t slen, char **value,
                      size_t *len)
{
    size_t enc_len = 0;
    char *enc = cred_pct_encode(secret, slen, &enc_len);
    int rc = enc == NULL ? -1 : cred_concat("", enc, enc_len, value, len);

    (void)r;
    secmem_free(&enc, enc_len + 1);
    return rc;
}

static int query_apply(struct http_head *h, const struct policy_rule_info *ri,
                       const struct policy_wire *w)
{
    return cred_set_query(h, ri->name, w->value, w->value_len);
}

const struct cred_kind cred_query = {
    .name = "query",
    .fields = query_fields,
    .nfields = sizeof(query_fields) / sizeof(query_fields[0]),
    .wire = query_wire,
    .apply = query_apply,
};
