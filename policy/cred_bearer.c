/*
 * cred_bearer.c - scheme "bearer" (SPEC §3): `Authorization: Bearer <secret>`. No rule fields;
 * the secret may be an oauth2 source (each token goes the same way).
 */
#include "policy/cred.h"
#include "policy/credwire.h"

static int bearer_wire(const struct vault_rule *r, const char *secret, size_t slen, char **value,
                       size_t *len)
{
    (void)r;
    return cred_concat("Bearer ", secret, slen, value, len);
}

static int bearer_apply(struct http_head *h, const struct policy_rule_info *ri,
                        const struct policy_wire *w)
{
    (void)ri;
    return cred_set_header(h, "Authorization", w->value, w->value_len);
}

const struct cred_kind cred_bearer = {
    .name = "bearer",
    .wire = bearer_wire,
    .apply = bearer_apply,
};
