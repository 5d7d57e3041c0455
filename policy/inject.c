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
#include "policy/policy_int.h"
#include "policy/scope.h"
#include "common/secmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Replaces every field `name` by one `name: value` at the position of the first of them. */
static int set_header(struct http_head *h, const char *name, const char *value, size_t vlen)
{
    size_t first = SIZE_MAX, last, nlen = strlen(name);
    struct http_field f;

    for (size_t i = 0; i < h->nfields && first == SIZE_MAX; i++) {
        if (httphead_name_eq(h->fields[i].name, h->fields[i].name_len, name, nlen))
            first = i;
    }
    httphead_remove(h, name);
    if (httphead_add(h, name, nlen, value, vlen) != 0)
        return -1;
    last = h->nfields - 1;
    if (first != SIZE_MAX && first < last) {
        f = h->fields[last];
        memmove(&h->fields[first + 1], &h->fields[first], (last - first) * sizeof(f));
        h->fields[first] = f;
    }
    return 0;
}

/* 1 if the key of the query segment seg (up to '=') percent-decodes to name. */
static int key_is(const char *seg, size_t len, const char *name)
{
    size_t i = 0, k = 0, nlen = strlen(name);

    while (i < len && seg[i] != '=') {
        char c = seg[i];

        if (c == '%' && i + 2 < len && scope_hexval(seg[i + 1]) >= 0 &&
            scope_hexval(seg[i + 2]) >= 0) {
            c = (char)(scope_hexval(seg[i + 1]) * 16 + scope_hexval(seg[i + 2]));
            i += 3;
        } else {
            i++;
        }
        if (k >= nlen || name[k] != c)
            return 0;
        k++;
    }
    return k == nlen;
}

static void put(char *buf, size_t *o, const char *s, size_t len)
{
    memcpy(buf + *o, s, len);
    *o += len;
}

/*
 * Rewrites the query of t into buf (size >= tlen + nlen + vlen + 3): every parameter whose
 * name decodes to name is dropped, and name=value takes the place of the first (or goes last).
 */
static size_t rewrite_query(const char *t, size_t tlen, const char *name, const char *value,
                            size_t vlen, char *buf)
{
    const char *q = memchr(t, '?', tlen), *frag = memchr(t, '#', tlen);
    size_t o = 0, nlen = strlen(name), qend, i;
    char sep = '?';
    int placed = 0;

    if (frag != NULL && q != NULL && frag < q)
        q = NULL;
    qend = frag != NULL ? (size_t)(frag - t) : tlen;
    put(buf, &o, t, q != NULL ? (size_t)(q - t) : qend);
    for (i = q != NULL ? (size_t)(q - t) + 1 : qend; q != NULL && i < qend;) {
        const char *seg = t + i, *amp = memchr(seg, '&', qend - i);
        size_t slen = amp != NULL ? (size_t)(amp - seg) : qend - i;

        i += slen + 1;
        if (key_is(seg, slen, name)) {
            if (placed++)
                continue;
            buf[o++] = sep;
            put(buf, &o, name, nlen);
            buf[o++] = '=';
            put(buf, &o, value, vlen);
        } else {
            buf[o++] = sep;
            put(buf, &o, seg, slen);
        }
        sep = '&';
    }
    if (!placed) {
        buf[o++] = sep;
        put(buf, &o, name, nlen);
        buf[o++] = '=';
        put(buf, &o, value, vlen);
    }
    put(buf, &o, t + qend, tlen - qend);
    return o;
}

static int set_query(struct http_head *h, const char *name, const char *value, size_t vlen)
{
    size_t cap, len;
    char *buf;
    int rc;

    if (h->target == NULL || h->target_len == 0 || h->target[0] != '/')
        return -1;
    cap = h->target_len + strlen(name) + vlen + 3;
    buf = malloc(cap);
    if (buf == NULL)
        return -1;
    len = rewrite_query(h->target, h->target_len, name, value, vlen, buf);
    rc = httphead_set_target(h, buf, len);
    secmem_free(&buf, cap);
    return rc;
}

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

/* Puts the wire value w of the rule described by ri into h. 0 or -1. */
static int inject_wire(struct http_head *h, const struct policy_rule_info *ri,
                       const struct policy_wire *w)
{
    switch (ri->scheme) {
    case POLICY_SCHEME_BEARER:
    case POLICY_SCHEME_BASIC:
        return set_header(h, "Authorization", w->value, w->value_len);
    case POLICY_SCHEME_HEADER:
        return set_header(h, ri->name, w->value, w->value_len);
    case POLICY_SCHEME_QUERY:
        return set_query(h, ri->name, w->value, w->value_len);
    case POLICY_SCHEME_SIGV4:
        return -1; /* signed per request: inject_sigv4 */
    }
    return -1;
}

int inject_sigv4(struct http_head *h, const struct policy *p, int rule, const char *payload_hash,
                 time_t now, char sig_hex[SIGV4_HEX_LEN + 1])
{
    const struct vault *v = policy_vault(p);
    const struct vault_rule *r;
    struct sigv4_key k;

    if (h == NULL || rule < 0 || (size_t)rule >= v->nrules ||
        v->rules[rule].scheme != POLICY_SCHEME_SIGV4)
        return -1;
    r = &v->rules[rule];
    k.access_key_id = r->access_key_id;
    k.secret = v->secrets[r->secret].value;
    k.secret_len = v->secrets[r->secret].len;
    k.region = r->region;
    k.service = r->service;
    k.token = r->session_token != SIZE_MAX ? v->secrets[r->session_token].value : NULL;
    k.token_len = r->session_token != SIZE_MAX ? v->secrets[r->session_token].len : 0;
    return sigv4_sign(h, &k, payload_hash, now, sig_hex);
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
    if (ri.scheme == POLICY_SCHEME_SIGV4 || (t = inject_token_make(p, rule, token, len)) == NULL)
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
