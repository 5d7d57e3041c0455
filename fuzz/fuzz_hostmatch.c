/*
 * fuzz_hostmatch.c - input "PATTERN\nHOST": compile the pattern, normalise the host, match.
 * Invariants: exact and IP patterns match exactly their normalised text; `*.suffix` matches
 * exactly the names strictly below suffix; a regex answers -1, 0 or 1; a single-label wildcard
 * is always too broad; nothing crashes on raw, unnormalised hosts either.
 */
#include <stdint.h>
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
