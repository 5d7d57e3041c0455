/*
 * cred_basic.c - scheme "basic" (SPEC §3): `Authorization: Basic base64(<username>:<secret>)`.
 * Field `username` (required): 1-256 visible ASCII characters without ':'. The base64 is a form
 * the masker looks for besides the raw secret; it is a wire encoding, so its own base64
 * spellings are not (INJECT_FORM_VALUE unset).
 */
#include "policy/cred.h"
#include "policy/credwire.h"
#include "common/secmem.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

static const char *username_check(const char *s)
{
    size_t n = strlen(s);
    const char *bad = "expected 1-256 visible ASCII characters without ':'";

    if (n < 1 || n > CRED_NAME_MAX)
        return bad;
    for (; *s != '\0'; s++) {
        if (*s < 0x21 || *s > 0x7e || *s == ':')
            return bad;
    }
    return NULL;
}

static const struct cred_field basic_fields[] = {
    {"username", CRED_FIELD_STRING, true, offsetof(struct vault_rule, username), username_check},
};

/* base64(user ":" secret), in a new buffer of *outlen bytes plus NUL. */
static char *basic_token(const char *user, const char *secret, size_t slen, size_t *outlen)
{
    size_t ulen = strlen(user), plain_len = ulen + 1 + slen;
    char *plain = malloc(plain_len + 1);
    char *b64 = malloc(4 * ((plain_len + 2) / 3) + 1);
    char *ret = NULL;

    if (plain == NULL || b64 == NULL)
        goto out;
    memcpy(plain, user, ulen);
    plain[ulen] = ':';
    memcpy(plain + ulen + 1, secret, slen);
    *outlen = (size_t)EVP_EncodeBlock((unsigned char *)b64, (unsigned char *)plain, (int)plain_len);
    ret = b64;
    b64 = NULL;
out:
    secmem_free(&plain, plain_len + 1);
    secmem_free(&b64, 4 * ((plain_len + 2) / 3) + 1);
    return ret;
}

static int basic_wire(const struct vault_rule *r, const char *secret, size_t slen, char **value,
                      size_t *len)
{
    size_t enc_len = 0;
    char *enc = basic_token(r->username, secret, slen, &enc_len);
    int rc = enc == NULL ? -1 : cred_concat("Basic ", enc, enc_len, value, len);

    secmem_free(&enc, enc_len + 1);
    return rc;
}

/* The base64 is the tail of the value, after "Basic ". */
static void basic_forms(const struct vault *v, const struct vault_rule *r, struct policy_wire *w)
{
    (void)v;
    (void)r;
    cred_add_form(w, w->value + 6, w->value_len - 6, 0); /* a wire encoding: no base64 of it */
}

static int basic_apply(struct http_head *h, const struct policy_rule_info *ri,
                       const struct policy_wire *w)
{
    (void)ri;
    return cred_set_header(h, "Authorization", w->value, w->value_len);
}

const struct cred_kind cred_basic = {
    .name = "basic",
    .fields = basic_fields,
    .nfields = sizeof(basic_fields) / sizeof(basic_fields[0]),
    .wire = basic_wire,
    .forms = basic_forms,
    .apply = basic_apply,
};
