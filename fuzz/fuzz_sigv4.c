/*
 * fuzz_sigv4.c - arbitrary requests -> policy/sigv4.c. The input is one flag byte (bit 0: s3,
 * bit 1: a session token, bit 2: UNSIGNED-PAYLOAD) then lines: the method, the target, then
 * header fields "name: value". Invariants: classification and the canonical request are
 * deterministic (computed twice, byte for byte equal); signing two copies of the head at the
 * same time gives the same signature and the same fields; a signed head has exactly one
 * Authorization and one X-Amz-Date, never the secret key, and the token exactly when one was
 * given; the canonical request never holds the secret; the canonical URI is the forwarded
 * path itself for s3 and, for other services, that path encoded once more (only unreserved
 * bytes, '/' and upper-case %XX); nothing crashes or leaks.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/secmem.h"
#include "policy/httphead.h"
#include "policy/sigv4.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_SECRET "fuzzSECRETkey/0000+wJalrXUtnFEMI"
#define FZ_TOKEN  "fuzzSESSIONtoken/1111+IQoJb3Jp"
#define FZ_NOW    ((time_t)1700000000)

/* Builds h from the input lines; 0, or -1 when the head model refuses them. */
static int build(struct http_head *h, const char *s, size_t n)
{
    const char *line[3] = {NULL, NULL, NULL};
    size_t len[3] = {0, 0, 0}, k = 0, start = 0;

    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '\n')
            continue;
        if (k < 2) {
            line[k] = s + start;
            len[k++] = i - start;
        } else {
            const char *f = s + start, *colon = memchr(f, ':', i - start);
            size_t vstart;

            if (colon != NULL && colon > f) {
                vstart = (size_t)(colon - f) + 1;
                while (vstart < i - start && f[vstart] == ' ')
                    vstart++;
                if (httphead_add(h, f, (size_t)(colon - f), f + vstart, i - start - vstart) < 0)
                    return -1;
            }
        }
        start = i + 1;
    }
    if (line[0] == NULL || line[1] == NULL || len[0] == 0 || len[1] == 0)
        return -1;
    return httphead_set_request_line(h, line[0], len[0], line[1], len[1], 1);
}

/* The canonical URI (second line of c) as SPEC §3 derives it from the path of target. */
static void check_uri(const char *c, const char *target, size_t tlen, bool s3)
{
    const char *uri = strchr(c, '\n') + 1, *end = strchr(uri, '\n');
    size_t ulen = (size_t)(end - uri), plen = 0;

    while (plen < tlen && target[plen] != '?' && target[plen] != '#')
        plen++;

    if (s3) {
        if (plen == 0 ? ulen != 1 || uri[0] != '/' : ulen != plen || memcmp(uri, target, plen))
            abort();
        return;
    }
    for (size_t i = 0; i < ulen; i++) {
        char x = uri[i];

        if (x == '%') {
            if (i + 2 >= ulen || memchr("0123456789ABCDEF", uri[i + 1], 16) == NULL ||
                memchr("0123456789ABCDEF", uri[i + 2], 16) == NULL)
                abort();
            i += 2;
        } else if (!((x >= 'A' && x <= 'Z') || (x >= 'a' && x <= 'z') || (x >= '0' && x <= '9') ||
                     memchr("-._~/", x, 5) != NULL)) {
            abort();
        }
    }
}

/* input_has_secret: the client wrote the secret's bytes itself (the fuzzer finds them). */
static void check_head(const struct http_head *h, bool token, bool input_has_secret)
{
    if (httphead_count(h, "Authorization") != 1 || httphead_count(h, "X-Amz-Date") != 1 ||
        httphead_count(h, "X-Amz-Security-Token") != (token ? 1u : 0u))
        abort();
    for (size_t i = 0; i < h->nfields && !input_has_secret; i++) {
        if (strstr(h->fields[i].value, "fuzzSECRETkey") != NULL)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_head a, b;
    struct sigv4_key k = {"AKIDFUZZ", FZ_SECRET, sizeof(FZ_SECRET) - 1, "us-east-1", "service",
                          NULL,       0};
    char s1[SIGV4_HEX_LEN + 1], s2[SIGV4_HEX_LEN + 1], sh1[SIGV4_SIGNED_HEADERS],
        sh2[SIGV4_SIGNED_HEADERS], *c1 = NULL, *c2 = NULL;
    size_t l1 = 0, l2 = 0;
    const char *hash;
    int r1, r2;
    bool planted;

    if (size < 1)
        return 0;
    planted = memmem(data, size, "fuzzSECRETkey", 13) != NULL;
    httphead_init(&a);
    httphead_init(&b);
    if (data[0] & 1)
        k.service = "s3";
    if (data[0] & 2) {
        k.token = FZ_TOKEN;
        k.token_len = sizeof(FZ_TOKEN) - 1;
    }
    hash = (data[0] & 4) ? SIGV4_UNSIGNED : SIGV4_EMPTY_SHA256;
    if (build(&a, (const char *)data + 1, size - 1) < 0 ||
        build(&b, (const char *)data + 1, size - 1) < 0)
        goto out;
    if (sigv4_classify(&a) != sigv4_classify(&b))
        abort();
    r1 = sigv4_canonical_request(&a, data[0] & 1, hash, &c1, &l1, sh1);
    r2 = sigv4_canonical_request(&b, data[0] & 1, hash, &c2, &l2, sh2);
    if (r1 != r2 || (r1 == 0 && (l1 != l2 || memcmp(c1, c2, l1) != 0 || strcmp(sh1, sh2) != 0)))
        abort();
    if (r1 == 0 &&
        (memchr(c1, '\0', l1) != NULL || (!planted && strstr(c1, "fuzzSECRETkey") != NULL)))
        abort();
    if (r1 == 0)
        check_uri(c1, a.target, a.target_len, data[0] & 1);
    secmem_free(&c1, l1 + 1);
    secmem_free(&c2, l2 + 1);
    r1 = sigv4_sign(&a, &k, hash, FZ_NOW, s1);
    r2 = sigv4_sign(&b, &k, hash, FZ_NOW, s2);
    if (r1 != r2 || (r1 == 0 && strcmp(s1, s2) != 0))
        abort();
    if (r1 == 0) {
        check_head(&a, k.token != NULL, planted);
        if (a.nfields != b.nfields)
            abort();
        for (size_t i = 0; i < a.nfields; i++) {
            if (strcmp(a.fields[i].name, b.fields[i].name) != 0 ||
                strcmp(a.fields[i].value, b.fields[i].value) != 0)
                abort();
        }
    }
out:
    httphead_reset(&a);
    httphead_reset(&b);
    return 0;
}
