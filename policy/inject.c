/*
 * inject.c - credential injection into a parsed request head (SPEC §3-§4).
 *
 * Guarantees: pure (no I/O); after a successful inject_apply() the head carries exactly one
 * instance of the injected header (at the position of the first instance the client sent, or
 * last) or exactly one instance of the query parameter (likewise), never the client's value
 * beside the secret. Query parameter names are compared after percent-decoding, so `k%65y=x`
 * is replaced by `key=` as well. Temporary copies of the secret are wiped.
 */
#include "policy/inject.h"
#include "policy/cred.h"
#include "policy/policy_int.h"
#include "common/secmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int inject_wire(struct http_head *h, const struct policy_rule_info *ri,
                       const struct policy_wire *w);

int inject_apply(struct http_head *h, const struct policy *p, int rule)
{
    const struct policy_wire *w = policy_wire(p, rule);
    struct policy_rule_info ri;

    if (h == NULL || w == NULL)
        return -1;
    policy_rule_info(p, (size_t)rule, &ri);
    if (ri.oauth >= 0)
        return -1; /* the secret is a token fetched at run time: inject_token */
    return inject_wire(h, &ri, w);
}

/* Puts the wire value w of the rule described by ri into h, as its kind does. 0 or -1 (also
 * for a kind that signs each request: inject_sigv4). */
static int inject_wire(struct http_head *h, const struct policy_rule_info *ri,
                       const struct policy_wire *w)
{
    const struct cred_kind *k = cred_kind_of(ri->scheme);

    if (k == NULL || k->apply == NULL)
        return -1;
    return k->apply(h, ri, w);
}

int inject_sigv4(struct http_head *h, const struct policy *p, int rule, const char *payload_hash,
                 time_t now, char sig_hex[SIGV4_HEX_LEN + 1])
{
    const struct vault *v = policy_vault(p);
    const struct cred_kind *k;

    if (h == NULL || rule < 0 || (size_t)rule >= v->nrules ||
        (k = cred_kind_of(v->rules[rule].scheme)) == NULL || k->sign == NULL)
        return -1;
    return k->sign(h, v, &v->rules[rule], payload_hash, now, sig_hex);
}

size_t inject_forms(const struct policy *p, int rule, struct inject_form forms[INJECT_MAX_FORMS])
{
    const struct policy_wire *w = policy_wire(p, rule);

    if (w == NULL)
        return 0;
    for (size_t i = 0; i < w->nforms; i++)
        forms[i] = w->forms[i];
    return w->nforms;
}

struct inject_token {
    char *raw; /* a copy of the token: the raw form points here */
    size_t raw_len;
    struct policy_wire w;
    size_t w_alloc;
};

void inject_token_free(struct inject_token **tp)
{
    struct inject_token *t;
    char *v;

    if (tp == NULL || *tp == NULL)
        return;
    t = *tp;
    v = (char *)t->w.value;
    secmem_free(&v, t->w_alloc);
    secmem_free(&t->raw, t->raw_len + 1);
    free(t);
    *tp = NULL;
}

struct inject_token *inject_token_make(const struct policy *p, int rule, const char *value,
                                       size_t len)
{
    struct inject_token *t = calloc(1, sizeof(*t));

    if (t == NULL || rule < 0 || (size_t)rule >= policy_rule_count(p) ||
        (t->raw = secmem_dup(value, len)) == NULL)
        goto fail;
    t->raw_len = len;
    if (policy_wire_make(p, rule, t->raw, len, &t->w, &t->w_alloc) < 0)
        goto fail;
    return t;
fail:
    inject_token_free(&t);
    return NULL;
}

struct inject_token *inject_token_apply(struct http_head *h, const struct policy *p, int rule,
                                        const char *token, size_t len)
{
    struct inject_token *t = NULL;
    struct policy_rule_info ri;

    if (h == NULL || rule < 0 || (size_t)rule >= policy_rule_count(p))
        return NULL;
    policy_rule_info(p, (size_t)rule, &ri);
    if (ri.per_request || (t = inject_token_make(p, rule, token, len)) == NULL)
        return NULL;
    if (inject_wire(h, &ri, &t->w) < 0)
        inject_token_free(&t);
    return t;
}

size_t inject_token_forms(const struct inject_token *t, struct inject_form forms[INJECT_MAX_FORMS])
{
    for (size_t i = 0; i < t->w.nforms; i++)
        forms[i] = t->w.forms[i];
    return t->w.nforms;
}

void inject_replaced_values(const struct policy *old, const struct policy *neu,
                            void (*fn)(const char *name, const char *value, size_t len, void *arg),
                            void *arg)
{
    const struct vault *a = policy_vault(old), *b = policy_vault(neu);

    for (size_t i = 0; i < a->nsecrets; i++) {
        const struct vault_secret *s = &a->secrets[i], *t = NULL;

        if (s->value == NULL || s->len == 0)
            continue; /* an oauth2 source: its tokens retire in the token manager */
        for (size_t j = 0; j < b->nsecrets && t == NULL; j++) {
            if (strcmp(b->secrets[j].name, s->name) == 0)
                t = &b->secrets[j];
        }
        if (t == NULL || t->value == NULL || t->len != s->len ||
            !secmem_equal(t->value, s->value, s->len))
            fn(s->name, s->value, s->len, arg);
    }
}
