/*
 * sigv4.c - AWS Signature Version 4 for requests vaultgate re-signs (SPEC §3): classification,
 * the canonical request, the signing key and the signature.
 *
 * Guarantees: deterministic (the same head, payload hash and time give the same bytes); the
 * canonical form is AWS's (docs "Create a canonical request", as botocore computes it: the
 * published test vectors in tests/unit/test_sigv4.c hold); every intermediate that held the
 * secret, the derived keys, the session token or a canonical request is wiped before it is
 * freed; nothing here logs. Inputs come from the sandbox: every length is checked, nothing is
 * trusted to be well-formed (malformed escapes are taken literally).
 */
#include "policy/sigv4.h"
#include "policy/scope.h"
#include "common/pct.h"
#include "common/secmem.h"
#include "common/wbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

/* Appends encode(decode(s)): a query parameter's name or value. */
static void wb_reenc(struct wbuf *b, const char *s, size_t n, bool plus_space)
{
    struct wbuf d = {0};

    wbuf_pct_decode(&d, s, n, plus_space ? PCT_PLUS_SPACE : 0);
    wbuf_pct_encode(b, d.p != NULL ? d.p : "", d.len, 0);
    b->fail = b->fail || d.fail;
    wbuf_free(&d);
}

/* ---- canonical URI ---- */

struct seg {
    size_t off, len;
};

/* s3: the path exactly as forwarded. It is already encoded once (S3 encodes a key once), and
 * S3 computes its canonical URI from the bytes it receives, neither decoding nor normalising
 * them (botocore's S3SigV4Auth signs urlsplit(url).path unchanged). */
static void canon_uri_s3(struct wbuf *b, const char *p, size_t n)
{
    wbuf_add(b, p, n);
}

/* Other services: dot and empty segments resolved (RFC 3986 §5.2.4, as botocore does), then
 * each segment of the forwarded path encoded once more, '%' included: the path on the wire is
 * the first encoding, this is the second. A raw ':' becomes %3A, an %3A becomes %253A, as the
 * service computes it from what it receives; nothing is decoded first. */
static void canon_uri_other(struct wbuf *b, const char *p, size_t n)
{
    struct seg *segs = calloc(n / 2 + 2, sizeof(*segs));
    size_t ns = 0, start = 0;

    if (segs == NULL) {
        b->fail = true;
        return;
    }
    for (size_t i = 0; i <= n; i++) {
        size_t len = i - start;

        if (i < n && p[i] != '/')
            continue;
        if (len == 2 && p[start] == '.' && p[start + 1] == '.') {
            if (ns > 0)
                ns--;
        } else if (len > 0 && !(len == 1 && p[start] == '.')) {
            segs[ns].off = start;
            segs[ns++].len = len;
        }
        start = i + 1;
    }
    wbuf_char(b, '/');
    for (size_t i = 0; i < ns; i++) {
        if (i > 0)
            wbuf_char(b, '/');
        wbuf_pct_encode(b, p + segs[i].off, segs[i].len, 0);
    }
    if (ns > 0 && p[n - 1] == '/')
        wbuf_char(b, '/');
    free(segs);
}

static void canon_uri(struct wbuf *b, const char *path, size_t n, bool s3)
{
    if (n == 0)
        wbuf_char(b, '/');
    else if (s3)
        canon_uri_s3(b, path, n);
    else
        canon_uri_other(b, path, n);
}

/* ---- canonical query ---- */

struct qparam {
    char *s; /* "name\0value\0", encoded */
    size_t nlen, vlen;
};

static int qparam_cmp(const void *a, const void *b)
{
    const struct qparam *x = a, *y = b;
    int c = strcmp(x->s, y->s);

    return c != 0 ? c : strcmp(x->s + x->nlen + 1, y->s + y->nlen + 1);
}

static void canon_query(struct wbuf *b, const char *q, size_t n)
{
    struct qparam *ps = calloc(n / 2 + 2, sizeof(*ps));
    size_t np = 0, start = 0;

    if (ps == NULL) {
        b->fail = true;
        return;
    }
    for (size_t i = 0; i <= n && !b->fail; i++) {
        const char *seg = q + start, *eq;
        size_t len = i - start;
        struct wbuf one = {0};

        if (i < n && q[i] != '&')
            continue;
        start = i + 1;
        if (len == 0)
            continue; /* "a=1&&b=2": an empty parameter names nothing */
        eq = memchr(seg, '=', len);
        wb_reenc(&one, seg, eq != NULL ? (size_t)(eq - seg) : len, true);
        ps[np].nlen = one.len;
        wbuf_char(&one, '\0');
        if (eq != NULL)
            wb_reenc(&one, eq + 1, len - (size_t)(eq - seg) - 1, true);
        ps[np].vlen = one.len - ps[np].nlen - 1;
        ps[np].s = one.p;
        b->fail = b->fail || one.fail || one.p == NULL;
        if (one.p == NULL || one.fail) {
            wbuf_free(&one);
            break;
        }
        np++;
    }
    qsort(ps, np, sizeof(*ps), qparam_cmp);
    for (size_t i = 0; i < np; i++) {
        if (i > 0)
            wbuf_char(b, '&');
        wbuf_add(b, ps[i].s, ps[i].nlen);
        wbuf_char(b, '=');
        wbuf_add(b, ps[i].s + ps[i].nlen + 1, ps[i].vlen);
    }
    for (size_t i = 0; i < np; i++)
        secmem_free(&ps[i].s, ps[i].nlen + ps[i].vlen + 2);
    free(ps);
}

/* ---- canonical headers ---- */

static bool signed_name(const char *name, size_t n)
{
    return httphead_name_eq(name, n, "host", 4) || httphead_name_eq(name, n, "content-type", 12) ||
           (n > 6 && strncasecmp(name, "x-amz-", 6) == 0);
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends a header value trimmed, inner runs of spaces and tabs as one space. */
static void wb_value(struct wbuf *b, const char *v, size_t n)
{
    bool pending = false, any = false;

    for (size_t i = 0; i < n; i++) {
        if (v[i] == ' ' || v[i] == '\t') {
            pending = any;
            continue;
        }
        if (pending)
            wbuf_char(b, ' ');
        pending = false;
        any = true;
        wbuf_char(b, v[i]);
    }
}

/* The lower-cased distinct names of the signed fields of h, sorted, into names (n in *nn). */
static int signed_names(const struct http_head *h, char **names, size_t *nn)
{
    *nn = 0;
    for (size_t i = 0; i < h->nfields; i++) {
        const struct http_field *f = &h->fields[i];
        char *low;
        bool seen = false;

        if (!signed_name(f->name, f->name_len))
            continue;
        for (size_t k = 0; k < *nn && !seen; k++)
            seen = httphead_name_eq(names[k], strlen(names[k]), f->name, f->name_len);
        if (seen)
            continue;
        if (*nn == SIGV4_MAX_SIGNED_HDRS || (low = malloc(f->name_len + 1)) == NULL)
            return -1;
        for (size_t k = 0; k < f->name_len; k++)
            low[k] =
                (char)((f->name[k] >= 'A' && f->name[k] <= 'Z') ? f->name[k] + 32 : f->name[k]);
        low[f->name_len] = '\0';
        names[(*nn)++] = low;
    }
    qsort(names, *nn, sizeof(*names), name_cmp);
    return 0;
}

static int canon_headers(struct wbuf *b, const struct http_head *h, char *signed_headers)
{
    char *names[SIGV4_MAX_SIGNED_HDRS];
    size_t nn = 0, o = 0;
    int rc = -1;
    bool host = false;

    if (signed_names(h, names, &nn) < 0)
        goto out;
    signed_headers[0] = '\0';
    for (size_t k = 0; k < nn; k++) {
        size_t nl = strlen(names[k]);
        bool first = true;

        host = host || strcmp(names[k], "host") == 0;
        if (o + nl + 2 > SIGV4_SIGNED_HEADERS)
            goto out;
        o += (size_t)snprintf(signed_headers + o, SIGV4_SIGNED_HEADERS - o, "%s%s",
                              k > 0 ? ";" : "", names[k]);
        wbuf_add(b, names[k], nl);
        wbuf_char(b, ':');
        for (size_t i = 0; i < h->nfields; i++) {
            const struct http_field *f = &h->fields[i];

            if (!httphead_name_eq(f->name, f->name_len, names[k], nl))
                continue;
            if (!first)
                wbuf_char(b, ',');
            first = false;
            wb_value(b, f->value, f->value_len);
        }
        wbuf_char(b, '\n');
    }
    rc = host ? 0 : -1;
out:
    for (size_t k = 0; k < nn; k++)
        free(names[k]);
    return rc;
}

int sigv4_canonical_request(const struct http_head *h, bool s3, const char *payload_hash,
                            char **out, size_t *outlen, char *signed_headers)
{
    struct wbuf b = {0};
    const char *t = h->target != NULL ? h->target : "";
    size_t tlen = h->target_len, plen = scope_path_len(t, tlen), qend = plen;

    signed_headers[0] = '\0';
    if (h->method == NULL)
        return -1;
    while (qend < tlen && t[qend] != '#')
        qend++;
    wbuf_str(&b, h->method);
    wbuf_char(&b, '\n');
    canon_uri(&b, t, plen, s3);
    wbuf_char(&b, '\n');
    if (plen < tlen && t[plen] == '?')
        canon_query(&b, t + plen + 1, qend - plen - 1);
    wbuf_char(&b, '\n');
    if (canon_headers(&b, h, signed_headers) < 0)
        b.fail = true;
    wbuf_char(&b, '\n');
    wbuf_str(&b, signed_headers);
    wbuf_char(&b, '\n');
    wbuf_str(&b, payload_hash);
    if (b.fail || b.p == NULL) {
        wbuf_free(&b);
        return -1;
    }
    /* hand over a buffer exactly len + 1 long, so the caller can wipe it by its length */
    *out = secmem_dup(b.p, b.len);
    *outlen = b.len;
    wbuf_free(&b);
    return *out != NULL ? 0 : -1;
}

/* ---- classification ---- */

/* 1 when the decoded name of a query parameter of h is want (any case). */
static bool query_has(const struct http_head *h, const char *want)
{
    const char *t = h->target != NULL ? h->target : "";
    size_t plen = scope_path_len(t, h->target_len), qend = plen, start, wlen = strlen(want);
    bool hit = false;

    while (qend < h->target_len && t[qend] != '#')
        qend++;
    if (plen >= qend)
        return false;
    start = plen + 1;
    for (size_t i = start; i <= qend && !hit; i++) {
        struct wbuf d = {0};
        size_t nlen;

        if (i < qend && t[i] != '&')
            continue;
        nlen = strcspn(t + start, "=&#");
        wbuf_pct_decode(&d, t + start, nlen < i - start ? nlen : i - start, PCT_PLUS_SPACE);
        hit = d.p != NULL && d.len == wlen && strncasecmp(d.p, want, d.len) == 0;
        wbuf_free(&d);
        start = i + 1;
    }
    return hit;
}

/* A presigned URL: SigV4 (X-Amz-Signature) or the older SigV2 form (Signature with
 * AWSAccessKeyId), which boto3 still makes for S3 by default. */
static bool presigned(const struct http_head *h)
{
    return query_has(h, "X-Amz-Signature") ||
           (query_has(h, "Signature") && query_has(h, "AWSAccessKeyId"));
}

enum sigv4_kind sigv4_classify(const struct http_head *h)
{
    const struct http_field *sha = httphead_get(h, "X-Amz-Content-Sha256");

    if (presigned(h))
        return SIGV4_PRESIGNED;
    if (httphead_has_token(h, "Content-Encoding", "aws-chunked"))
        return SIGV4_STREAMING;
    for (size_t i = 0; i < h->nfields; i++) {
        const struct http_field *f = &h->fields[i];

        if (httphead_name_eq(f->name, f->name_len, "X-Amz-Content-Sha256", 20) &&
            strncasecmp(f->value, "STREAMING-", 10) == 0)
            return SIGV4_STREAMING;
    }
    if (sha != NULL && httphead_count(h, "X-Amz-Content-Sha256") == 1 &&
        strcmp(sha->value, SIGV4_UNSIGNED) == 0)
        return SIGV4_UNSIGNED_BODY;
    return SIGV4_BUFFER;
}

/* ---- hashing and signing ---- */

static void hexify(const unsigned char *md, size_t n, char *hex)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[2 * n] = '\0';
}

static int sha256_hex(const void *data, size_t len, char hex[SIGV4_HEX_LEN + 1])
{
    unsigned char md[32];
    unsigned int mdlen = 0;

    if (EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32)
        return -1;
    hexify(md, 32, hex);
    return 0;
}

/* out = HMAC-SHA256(key, msg). 0 or -1. */
static int hmac(const unsigned char *key, size_t klen, const char *msg, size_t mlen,
                unsigned char out[32])
{
    size_t outlen = 0;

    if (EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, klen, (const unsigned char *)msg, mlen,
                  out, 32, &outlen) == NULL ||
        outlen != 32)
        return -1;
    return 0;
}

/* The signing key: HMAC chain over date, region, service and "aws4_request". 0 or -1. */
static int signing_key(const struct sigv4_key *k, const char *date8, unsigned char key[32])
{
    size_t klen = k->secret_len + 4;
    char *ksecret = malloc(klen);
    unsigned char a[32], b[32];
    int rc = -1;

    if (ksecret == NULL)
        return -1;
    memcpy(ksecret, "AWS4", 4);
    memcpy(ksecret + 4, k->secret, k->secret_len);
    if (hmac((unsigned char *)ksecret, klen, date8, 8, a) == 0 &&
        hmac(a, 32, k->region, strlen(k->region), b) == 0 &&
        hmac(b, 32, k->service, strlen(k->service), a) == 0 &&
        hmac(a, 32, "aws4_request", 12, key) == 0)
        rc = 0;
    OPENSSL_cleanse(a, sizeof(a));
    OPENSSL_cleanse(b, sizeof(b));
    secmem_free(&ksecret, klen);
    return rc;
}

/* Removes the client's signature fields and adds the ones this signature needs. 0 or -1. */
static int sign_fields(struct http_head *h, const struct sigv4_key *k, const char *payload_hash,
                       const char *amzdate, bool s3)
{
    bool unsigned_body = strcmp(payload_hash, SIGV4_UNSIGNED) == 0;

    httphead_remove(h, "Authorization");
    httphead_remove(h, "X-Amz-Date");
    httphead_remove(h, "X-Amz-Security-Token");
    if (!unsigned_body) {
        httphead_remove(h, "X-Amz-Content-Sha256");
        if (s3 &&
            httphead_add(h, "X-Amz-Content-Sha256", 20, payload_hash, strlen(payload_hash)) < 0)
            return -1;
    }
    if (httphead_add(h, "X-Amz-Date", 10, amzdate, strlen(amzdate)) < 0)
        return -1;
    if (k->token != NULL && httphead_add(h, "X-Amz-Security-Token", 20, k->token, k->token_len) < 0)
        return -1;
    return 0;
}

int sigv4_sign(struct http_head *h, const struct sigv4_key *k, const char *payload_hash, time_t now,
               char sig_hex[SIGV4_HEX_LEN + 1])
{
    char amzdate[32], date8[9], scope[512], crhex[SIGV4_HEX_LEN + 1], sh[SIGV4_SIGNED_HEADERS];
    char *cr = NULL, *sts = NULL, *auth = NULL;
    size_t crlen = 0, stslen = 0, authlen = 0;
    unsigned char key[32], sig[32];
    bool s3 = strcmp(k->service, "s3") == 0;
    struct tm tm;
    int rc = -1, n;

    if (gmtime_r(&now, &tm) == NULL ||
        strftime(amzdate, sizeof(amzdate), "%Y%m%dT%H%M%SZ", &tm) != 16)
        return -1;
    memcpy(date8, amzdate, 8);
    date8[8] = '\0';
    n = snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date8, k->region, k->service);
    if (n < 0 || (size_t)n >= sizeof(scope) || sign_fields(h, k, payload_hash, amzdate, s3) < 0)
        return -1;
    if (sigv4_canonical_request(h, s3, payload_hash, &cr, &crlen, sh) < 0 ||
        sha256_hex(cr, crlen, crhex) < 0)
        goto out;
    stslen = 17 + 16 + 1 + strlen(scope) + 1 + SIGV4_HEX_LEN;
    authlen = 64 + strlen(k->access_key_id) + strlen(scope) + strlen(sh) + SIGV4_HEX_LEN;
    if ((sts = malloc(stslen + 1)) == NULL || (auth = malloc(authlen + 1)) == NULL)
        goto out;
    snprintf(sts, stslen + 1, "AWS4-HMAC-SHA256\n%s\n%s\n%s", amzdate, scope, crhex);
    if (signing_key(k, date8, key) < 0 || hmac(key, 32, sts, strlen(sts), sig) < 0)
        goto out;
    hexify(sig, 32, sig_hex);
    n = snprintf(auth, authlen + 1,
                 "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
                 k->access_key_id, scope, sh, sig_hex);
    if (n < 0 || (size_t)n > authlen || httphead_add(h, "Authorization", 13, auth, (size_t)n) < 0)
        goto out;
    rc = 0;
out:
    OPENSSL_cleanse(key, sizeof(key));
    OPENSSL_cleanse(sig, sizeof(sig));
    secmem_free(&cr, crlen + 1);
    secmem_free(&sts, stslen + 1);
    secmem_free(&auth, authlen + 1);
    return rc;
}

struct sigv4_hash {
    EVP_MD_CTX *ctx;
};

struct sigv4_hash *sigv4_hash_new(void)
{
    struct sigv4_hash *c = calloc(1, sizeof(*c));

    if (c == NULL)
        return NULL;
    c->ctx = EVP_MD_CTX_new();
    if (c->ctx == NULL || EVP_DigestInit_ex(c->ctx, EVP_sha256(), NULL) != 1) {
        sigv4_hash_free(&c);
        return NULL;
    }
    return c;
}

int sigv4_hash_update(struct sigv4_hash *c, const void *data, size_t len)
{
    return EVP_DigestUpdate(c->ctx, data, len) == 1 ? 0 : -1;
}

int sigv4_hash_final(struct sigv4_hash **cp, char hex[SIGV4_HEX_LEN + 1])
{
    unsigned char md[32];
    unsigned int mdlen = 0;
    int rc = EVP_DigestFinal_ex((*cp)->ctx, md, &mdlen) == 1 && mdlen == 32 ? 0 : -1;

    if (rc == 0)
        hexify(md, 32, hex);
    sigv4_hash_free(cp);
    return rc;
}

void sigv4_hash_free(struct sigv4_hash **cp)
{
    if (cp == NULL || *cp == NULL)
        return;
    EVP_MD_CTX_free((*cp)->ctx); /* EVP_MD_CTX_free cleanses the digest state */
    free(*cp);
    *cp = NULL;
}
