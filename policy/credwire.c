/*
 * credwire.c - the helpers credential kinds share (policy/credwire.h): wire values, masking
 * forms, the percent-encoder, and setting a header or a query parameter of a request head.
 *
 * Guarantees: pure (no I/O); after cred_set_header() the head carries exactly one instance of
 * the field (at the position of the first instance the client sent, or last), after
 * cred_set_query() exactly one instance of the parameter (likewise), never the client's value
 * beside the secret. Query parameter names are compared after percent-decoding, so `k%65y=x`
 * is replaced by `key=` as well. Temporary copies of the secret are wiped.
 */
#include "policy/credwire.h"
#include "common/pct.h"
#include "common/secmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- wire values and forms ---- */

int cred_concat(const char *prefix, const char *body, size_t blen, char **out, size_t *outlen)
{
    size_t plen = strlen(prefix);
    char *buf = malloc(plen + blen + 1);

    if (buf == NULL)
        return -1;
    memcpy(buf, prefix, plen);
    memcpy(buf + plen, body, blen);
    buf[plen + blen] = '\0';
    *out = buf;
    *outlen = plen + blen;
    return 0;
}

void cred_add_form(struct policy_wire *w, const char *bytes, size_t len, unsigned int flags)
{
    for (size_t i = 0; i < w->nforms; i++) {
        if (w->forms[i].len == len && memcmp(w->forms[i].bytes, bytes, len) == 0) {
            w->forms[i].flags |= flags;
            return;
        }
    }
    w->forms[w->nforms].bytes = (const unsigned char *)bytes;
    w->forms[w->nforms].len = len;
    w->forms[w->nforms++].flags = flags;
}

char *cred_pct_encode(const char *s, size_t len, size_t *outlen)
{
    char *out = malloc(PCT_ENCODED_MAX(len) + 1);

    if (out == NULL)
        return NULL;
    *outlen = pct_encode(out, s, len, 0);
    out[*outlen] = '\0';
    return out;
}

/* ---- the head ---- */

int cred_set_header(struct http_head *h, const char *name, const char *value, size_t vlen)
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
        int v = pct_escape(seg + i, len - i);
        char c = v >= 0 ? (char)v : seg[i];

        i += v >= 0 ? 3 : 1;
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

int cred_set_query(struct http_head *h, const char *name, const char *value, size_t vlen)
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
