/*
 * hostmatch.c - compiled host patterns.
 *
 * Guarantees: exact and wildcard patterns are normalised with common/hostname.c, so they compare
 * with plain byte equality against normalised hosts; `*.suffix` matches any depth below suffix
 * but never suffix itself; `re:` expressions are anchored at both ends, caseless, ASCII-only,
 * JIT-compiled when possible and run under the match/depth limits of common/caps.h. A compiled
 * matcher is immutable and safe to use from several threads at once.
 */
#define PCRE2_CODE_UNIT_WIDTH 8

#include "policy/hostmatch.h"
#include "common/caps.h"
#include "common/hostname.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hostmatch {
    enum hostmatch_kind kind;
    char *text;
    size_t text_len;
    pcre2_code *re;
    pcre2_match_context *mctx;
};

/*
 * Two-label public suffixes that are as broad as a top-level domain for our purpose. Not the
 * whole public suffix list: enough to refuse the common mistakes (`*.co.uk`).
 */
static const char *const broad_suffixes[] = {
    "co.uk",  "org.uk", "ac.uk",  "gov.uk", "com.au", "net.au", "org.au", "co.jp",
    "ne.jp",  "or.jp",  "com.br", "com.cn", "com.mx", "co.nz",  "co.in",  "co.za",
    "com.tr", "com.tw", "co.kr",  "com.sg", "com.hk", "co.il",  "com.ar", "github.io",
};

/* Top-level domains whose every name a rule regex must not match (see too_broad_regex). */
static const char *const probe_tlds[] = {
    "com",  "net",   "org", "io", "dev", "app",  "ai",      "co",    "uk",     "de",
    "cn",   "ru",    "jp",  "fr", "br",  "in",   "xyz",     "info",  "biz",    "us",
    "site", "cloud", "me",  "tv", "eu",  "test", "invalid", "co.uk", "com.au",
};

/* Random-looking labels: no sensible regex for a real API names all of them. */
static const char *const probe_labels[] = {"q7xk2p", "zv-9m3", "b4", "wlk0rt8"};
#define PROBE_NLABELS (sizeof(probe_labels) / sizeof(probe_labels[0]))

static void set_err(char *err, size_t errlen, const char *msg)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", msg);
}

static int printable(const char *s)
{
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            return 0;
    }
    return 1;
}

static int compile_regex(struct hostmatch *m, const char *expr, char *err, size_t errlen)
{
    uint32_t opts = PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_CASELESS | PCRE2_NEVER_UTF |
                    PCRE2_NEVER_UCP | PCRE2_NEVER_BACKSLASH_C | PCRE2_DOLLAR_ENDONLY;
    PCRE2_UCHAR msg[120];
    PCRE2_SIZE off = 0;
    int code = 0;

    if (*expr == '\0') {
        set_err(err, errlen, "empty regular expression after \"re:\"");
        return -1;
    }
    m->re = pcre2_compile((PCRE2_SPTR)expr, PCRE2_ZERO_TERMINATED, opts, &code, &off, NULL);
    if (m->re == NULL) {
        pcre2_get_error_message(code, msg, sizeof(msg));
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "bad regular expression at offset %zu: %s", (size_t)off,
                     (const char *)msg);
        return -1;
    }
    (void)pcre2_jit_compile(m->re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    m->mctx = pcre2_match_context_create(NULL);
    if (m->mctx == NULL) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    pcre2_set_match_limit(m->mctx, VG_REGEX_MATCH_LIMIT);
    pcre2_set_depth_limit(m->mctx, VG_REGEX_DEPTH_LIMIT);
    return 0;
}

static int compile_name(struct hostmatch *m, const char *pattern, char *err, size_t errlen)
{
    char norm[HOSTNAME_BUFSZ];
    const char *name = pattern;
    int kind;

    if (strcmp(pattern, "*") == 0) {
        m->kind = HOSTMATCH_WILDCARD;
        norm[0] = '\0';
        goto done;
    }
    if (strncmp(pattern, "*.", 2) == 0) {
        m->kind = HOSTMATCH_WILDCARD;
        name = pattern + 2;
    }
    kind = hostname_normalize(name, strlen(name), norm, sizeof(norm));
    if (kind < 0 || (m->kind == HOSTMATCH_WILDCARD && kind != HOSTNAME_DNS)) {
        set_err(err, errlen, "expected a host name, *.domain wildcard, IP literal or re:<regex>");
        return -1;
    }
    if (m->kind == 0)
        m->kind = kind == HOSTNAME_DNS ? HOSTMATCH_EXACT : HOSTMATCH_IP;
done:
    m->text = strdup(norm);
    if (m->text == NULL) {
        set_err(err, errlen, "out of memory");
        return -1;
    }
    m->text_len = strlen(norm);
    return 0;
}

struct hostmatch *hostmatch_compile(const char *pattern, char *err, size_t errlen)
{
    struct hostmatch *m = NULL;
    int rc;

    if (pattern == NULL || *pattern == '\0') {
        set_err(err, errlen, "empty host pattern");
        return NULL;
    }
    if (strlen(pattern) > VG_PATTERN_MAX || !printable(pattern)) {
        set_err(err, errlen, "host pattern must be 1-1024 printable ASCII characters");
        return NULL;
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    if (strncmp(pattern, "re:", 3) == 0) {
        m->kind = HOSTMATCH_REGEX;
        m->text = strdup(pattern + 3);
        rc = m->text == NULL ? -1 : compile_regex(m, pattern + 3, err, errlen);
        if (m->text == NULL)
            set_err(err, errlen, "out of memory");
        else
            m->text_len = strlen(m->text);
    } else {
        rc = compile_name(m, pattern, err, errlen);
    }
    if (rc != 0)
        hostmatch_free(&m);
    return m;
}

void hostmatch_free(struct hostmatch **mp)
{
    struct hostmatch *m;

    if (mp == NULL || *mp == NULL)
        return;
    m = *mp;
    pcre2_match_context_free(m->mctx);
    pcre2_code_free(m->re);
    free(m->text);
    free(m);
    *mp = NULL;
}

static int match_regex(const struct hostmatch *m, const char *host)
{
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    int rc;

    if (md == NULL)
        return -1;
    rc = pcre2_match(m->re, (PCRE2_SPTR)host, strlen(host), 0, 0, md, m->mctx);
    pcre2_match_data_free(md);
    if (rc >= 0)
        return 1;
    return rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
}

static int match_wildcard(const struct hostmatch *m, const char *host)
{
    size_t hl = strlen(host);

    if (m->text_len == 0)
        return hl > 0;
    if (hl < m->text_len + 2)
        return 0;
    return host[hl - m->text_len - 1] == '.' &&
           memcmp(host + hl - m->text_len, m->text, m->text_len) == 0;
}

int hostmatch_match(const struct hostmatch *m, const char *host)
{
    if (m == NULL || host == NULL)
        return 0;
    switch (m->kind) {
    case HOSTMATCH_EXACT:
    case HOSTMATCH_IP:
        return strcmp(m->text, host) == 0;
    case HOSTMATCH_WILDCARD:
        return match_wildcard(m, host);
    case HOSTMATCH_REGEX:
        return match_regex(m, host);
    }
    return 0;
}

enum hostmatch_kind hostmatch_kind(const struct hostmatch *m)
{
    return m->kind;
}

const char *hostmatch_text(const struct hostmatch *m)
{
    return m->text;
}

static int too_broad_wildcard(const struct hostmatch *m, char *why, size_t whylen)
{
    if (m->text_len == 0) {
        set_err(why, whylen, "\"*\" matches every host");
        return 1;
    }
    if (strchr(m->text, '.') == NULL) {
        if (why != NULL && whylen > 0)
            snprintf(why, whylen, "\"*.%s\" matches a whole top-level domain", m->text);
        return 1;
    }
    for (size_t i = 0; i < sizeof(broad_suffixes) / sizeof(broad_suffixes[0]); i++) {
        if (strcmp(m->text, broad_suffixes[i]) == 0) {
            if (why != NULL && whylen > 0)
                snprintf(why, whylen, "\"*.%s\" matches a whole public suffix", m->text);
            return 1;
        }
    }
    return 0;
}

/* 1 when the regex matches every probe name of `depth` labels under tld (depth 0: no tld). */
static int regex_covers(const struct hostmatch *m, const char *tld, int depth)
{
    char name[HOSTNAME_BUFSZ];

    for (size_t i = 0; i < PROBE_NLABELS; i++) {
        const char *a = probe_labels[i], *b = probe_labels[(i + 1) % PROBE_NLABELS];

        if (depth == 0)
            snprintf(name, sizeof(name), "%s", a);
        else if (depth == 1)
            snprintf(name, sizeof(name), "%s.%s", a, tld);
        else
            snprintf(name, sizeof(name), "%s.%s.%s", a, b, tld);
        if (match_regex(m, name) == 0)
            return 0;
    }
    return 1;
}

static int too_broad_regex(const struct hostmatch *m, char *why, size_t whylen)
{
    if (regex_covers(m, NULL, 0)) {
        set_err(why, whylen, "regular expression matches every single-label name tried");
        return 1;
    }
    for (size_t t = 0; t < sizeof(probe_tlds) / sizeof(probe_tlds[0]); t++) {
        for (int depth = 1; depth <= 2; depth++) {
            if (!regex_covers(m, probe_tlds[t], depth))
                continue;
            if (why != NULL && whylen > 0)
                snprintf(why, whylen, "regular expression matches every name tried under .%s",
                         probe_tlds[t]);
            return 1;
        }
    }
    return 0;
}

int hostmatch_too_broad(const struct hostmatch *m, char *why, size_t whylen)
{
    if (m == NULL)
        return 0;
    if (m->kind == HOSTMATCH_WILDCARD)
        return too_broad_wildcard(m, why, whylen);
    if (m->kind == HOSTMATCH_REGEX)
        return too_broad_regex(m, why, whylen);
    return 0;
}
