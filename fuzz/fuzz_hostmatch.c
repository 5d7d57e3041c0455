/*
 * fuzz_hostmatch.c - input "PATTERN\nHOST": compile the pattern, normalise the host, match.
 * Invariants: exact and IP patterns match exactly their normalised text; `*.suffix` matches
 * exactly the names strictly below suffix; a regex answers -1, 0 or 1; a single-label wildcard
 * is always too broad; nothing crashes on raw, unnormalised hosts either. An IPv6 literal (host
 * or pattern) that embeds an IPv4 address normalises to that address's dotted quad, and any
 * other IPv6 literal stays IPv6: checked against a reference that reads the address as two
 * 64-bit halves instead of byte offsets.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostname.h"
#include "policy/hostmatch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int wildcard_ref(const char *suffix, const char *host)
{
    size_t sl = strlen(suffix), hl = strlen(host);

    if (sl == 0)
        return hl > 0;
    return hl > sl + 1 && host[hl - sl - 1] == '.' && strcmp(host + hl - sl, suffix) == 0;
}

/* The IPv4 address an IPv6 address embeds (SPEC §3): 1 and *v4, or 0. */
static int ref_embedded(const uint8_t *a, uint32_t *v4)
{
    uint64_t hi = 0, lo = 0;

    for (int i = 0; i < 8; i++) {
        hi = hi << 8 | a[i];
        lo = lo << 8 | a[i + 8];
    }
    if (hi == 0 && (lo >> 32) == 0xFFFF) /* mapped */
        *v4 = (uint32_t)lo;
    else if (hi == 0 && (lo >> 32) == 0 && (uint32_t)lo > 1) /* compatible, not :: or ::1 */
        *v4 = (uint32_t)lo;
    else if (hi == 0x0064FF9B00000000ull && (lo >> 32) == 0) /* NAT64 /96 */
        *v4 = (uint32_t)lo;
    else if ((hi >> 16) == 0x0064FF9B0001ull) /* local-use NAT64 /48: skip the u octet */
        *v4 = (uint32_t)(hi & 0xFFFF) << 16 | (uint32_t)((lo >> 40) & 0xFFFF);
    else if ((hi >> 48) == 0x2002) /* 6to4 */
        *v4 = (uint32_t)(hi >> 16);
    else
        return 0;
    return 1;
}

/* raw (len bytes, no NUL) as an IPv6 literal, bare or in brackets: normalised as SPEC §3 says. */
static void check_v6_literal(const char *raw, size_t len)
{
    char text[64], norm[HOSTNAME_BUFSZ], want[20];
    uint8_t a[16];
    uint32_t v4;
    int kind;

    if (len >= 2 && raw[0] == '[' && raw[len - 1] == ']') {
        raw++;
        len -= 2;
    }
    if (len >= sizeof(text) || memchr(raw, '\0', len) != NULL)
        return;
    memcpy(text, raw, len);
    text[len] = '\0';
    if (inet_pton(AF_INET6, text, a) != 1)
        return;
    kind = hostname_normalize(text, len, norm, sizeof(norm));
    if (!ref_embedded(a, &v4)) {
        if (kind != HOSTNAME_IPV6)
            abort();
        return;
    }
    snprintf(want, sizeof(want), "%u.%u.%u.%u", v4 >> 24, (v4 >> 16) & 0xFF, (v4 >> 8) & 0xFF,
             v4 & 0xFF);
    if (kind != HOSTNAME_IPV4 || strcmp(norm, want) != 0)
        abort();
}

static void check(const struct hostmatch *m, const char *host)
{
    int r = hostmatch_match(m, host);
    const char *t = hostmatch_text(m);

    switch (hostmatch_kind(m)) {
    case HOSTMATCH_EXACT:
    case HOSTMATCH_IP:
        if (r != (strcmp(t, host) == 0))
            abort();
        break;
    case HOSTMATCH_WILDCARD:
        if (r != wildcard_ref(t, host))
            abort();
        break;
    case HOSTMATCH_REGEX:
        if (r < -1 || r > 1)
            abort();
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t plen = nl != NULL ? (size_t)(nl - data) : size;
    size_t hlen = nl != NULL ? size - plen - 1 : 0;
    char *pattern = malloc(plen + 1), *raw = malloc(hlen + 1), host[HOSTNAME_BUFSZ], err[256];
    struct hostmatch *m = NULL;

    if (pattern == NULL || raw == NULL)
        goto out;
    memcpy(pattern, data, plen);
    pattern[plen] = '\0';
    if (hlen > 0)
        memcpy(raw, nl + 1, hlen);
    raw[hlen] = '\0';
    check_v6_literal(raw, hlen);
    check_v6_literal(pattern, plen);
    m = hostmatch_compile(pattern, err, sizeof(err));
    if (m == NULL) {
        if (err[0] == '\0')
            abort();
        goto out;
    }
    if (hostmatch_kind(m) == HOSTMATCH_WILDCARD && strchr(hostmatch_text(m), '.') == NULL &&
        !hostmatch_too_broad(m, err, sizeof(err)))
        abort();
    (void)hostmatch_too_broad(m, err, sizeof(err));
    (void)hostmatch_match(m, raw);
    if (hostname_normalize(raw, hlen, host, sizeof(host)) > 0) {
        check(m, host);
        if (hostmatch_kind(m) != HOSTMATCH_REGEX) {
            check(m, hostmatch_text(m));
        }
    }
out:
    hostmatch_free(&m);
    free(pattern);
    free(raw);
    return 0;
}
