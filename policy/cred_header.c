/*
 * cred_header.c - scheme "header" (SPEC §3): `<name>: <secret>`. Field `name` (required): an
 * RFC 9110 token of 1-256 characters without '_', and no hop-by-hop, framing or routing header
 * nor one that reflection masking relies on.
 */
#include "policy/cred.h"
#include "policy/credwire.h"

#include <stddef.h>
#include <string.h>

/* Headers a vault may not set: hop-by-hop, framing, routing, and what reflection relies on. */
static const char *const forbidden_headers[] = {
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "via",
    "forwarded",
    "max-forwards",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-forwarded-port",
    "x-real-ip",
    "proxy-status",
    "accept-encoding",
    "content-encoding",
    "http2-settings",
};

static const char *header_name_check(const char *name)
{
    size_t n = strlen(name);

    if (n < 1 || n > CRED_NAME_MAX)
        return "header name must be 1-256 characters";
    for (size_t i = 0; i < n; i++) {
        if (!httphead_is_tchar((unsigned char)name[i]))
            return "header name is not an RFC 9110 token";
    }
    if (strchr(name, '_') != NULL)
        return "header name contains '_' (servers and proxies drop or rewrite such headers)";
    for (size_t i = 0; i < sizeof(forbidden_headers) / sizeof(forbidden_headers[0]); i++) {
        if (httphead_name_eq(name, n, forbidden_headers[i], strlen(forbidden_headers[i])))
            return "header name is a hop-by-hop, framing or routing header";
    }
    return NULL;
}

static const struct cred_field header_fields[] = {
    {"name", CRED_FIELD_STRING, true, offsetof(struct vault_rule, name), header_name_check},
};

static int header_wire(const struct vault_rule *r, const char *secret, size_t slen, char **value,
                       size_t *len)
{
    (void)r;
    return cred_concat("", secret, slen, value, len);
}

static int header_apply(struct http_head *h, const struct policy_rule_info *ri,
                        const struct policy_wire *w)
{
    return cred_set_header(h, ri->name, w->value, w->value_len);
}

const struct cred_kind cred_header = {
    .name = "header",
    .fields = header_fields,
    .nfields = sizeof(header_fields) / sizeof(header_fields[0]),
    .wire = header_wire,
    .apply = header_apply,
};
