/*
 * cred_sigv4.c - scheme "sigv4" (SPEC §3 "AWS Signature Version 4"): each request is signed
 * (policy/sigv4.c) after the exchange hashed its body, so there is no fixed wire value and no
 * apply. Fields access_key_id (1-128), region and service (1-64 each) of [A-Za-z0-9._-],
 * required; session_token optional, the name of a static secret. The secret itself must hold a
 * value. The masker looks for the secret key and the session token, to which the exchange adds
 * each request's signature.
 */
#include "policy/cred.h"
#include "policy/credwire.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A word of a SigV4 credential scope: 1-max of [A-Za-z0-9._-]. */
static int word_ok(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n < 1 || n > max)
        return 0;
    for (; *s != '\0'; s++) {
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '.' || *s == '_'))
            return 0;
    }
    return 1;
}

static const char *key_id_check(const char *s)
{
    return word_ok(s, 128) ? NULL : "expected 1-128 characters of [A-Za-z0-9._-]";
}

static const char *scope_word_check(const char *s)
{
    return word_ok(s, 64) ? NULL : "expected 1-64 characters of [A-Za-z0-9._-]";
}

static const struct cred_field sigv4_fields[] = {
    {"access_key_id", CRED_FIELD_STRING, true, offsetof(struct vault_rule, access_key_id),
     key_id_check},
    {"region", CRED_FIELD_STRING, true, offsetof(struct vault_rule, region), scope_word_check},
    {"service", CRED_FIELD_STRING, true, offsetof(struct vault_rule, service), scope_word_check},
    {"session_token", CRED_FIELD_SECRET, false, offsetof(struct vault_rule, session_token), NULL},
};

/* No fixed header value: each request is signed (sigv4_sign). */
static int sigv4_wire(const struct vault_rule *r, const char *secret, size_t slen, char **value,
                      size_t *len)
{
    (void)r;
    (void)secret;
    (void)slen;
    return cred_concat("", "", 0, value, len);
}

static void sigv4_forms(const struct vault *v, const struct vault_rule *r, struct policy_wire *w)
{
    if (r->session_token != SIZE_MAX)
        cred_add_form(w, v->secrets[r->session_token].value, v->secrets[r->session_token].len,
                      INJECT_FORM_VALUE);
}

static int sigv4_rule_sign(struct http_head *h, const struct vault *v, const struct vault_rule *r,
                           const char *payload_hash, time_t now, char sig_hex[SIGV4_HEX_LEN + 1])
{
    struct sigv4_key k;

    k.access_key_id = r->access_key_id;
    k.secret = v->secrets[r->secret].value;
    k.secret_len = v->secrets[r->secret].len;
    k.region = r->region;
    k.service = r->service;
    k.token = r->session_token != SIZE_MAX ? v->secrets[r->session_token].value : NULL;
    k.token_len = r->session_token != SIZE_MAX ? v->secrets[r->session_token].len : 0;
    return sigv4_sign(h, &k, payload_hash, now, sig_hex);
}

static void sigv4_describe(const struct vault_rule *r, char *buf, size_t len)
{
    snprintf(buf, len, " %s %s%s", r->service, r->region,
             r->session_token != SIZE_MAX ? " with session token" : "");
}

static void sigv4_json(const struct vault_rule *r, cJSON *o)
{
    cJSON_AddStringToObject(o, "service", r->service);
    cJSON_AddStringToObject(o, "region", r->region);
}

const struct cred_kind cred_sigv4 = {
    .name = "sigv4",
    .fields = sigv4_fields,
    .nfields = sizeof(sigv4_fields) / sizeof(sigv4_fields[0]),
    .static_secret = true,
    .wire = sigv4_wire,
    .forms = sigv4_forms,
    .sign = sigv4_rule_sign,
    .describe = sigv4_describe,
    .json = sigv4_json,
};
