/*
 * hostmatch.h - one host pattern of a vault (SPEC §3): an exact name, a `*.` wildcard, a
 * `re:` PCRE2 expression or an IP literal, compiled once and matched against normalised hosts
 * (common/hostname.h) from any thread.
 */
#ifndef VG_HOSTMATCH_H
#define VG_HOSTMATCH_H

#include <stddef.h>

enum hostmatch_kind {
    HOSTMATCH_EXACT = 1, /* a normalised DNS name */
    HOSTMATCH_WILDCARD,  /* `*.suffix`: any name below suffix, not suffix itself; `*`: any */
    HOSTMATCH_REGEX,     /* `re:<PCRE2>`: whole name, caseless, with match limits */
    HOSTMATCH_IP,        /* an IPv4/IPv6 literal in canonical text form */
};

struct hostmatch;

/*
 * Compiles the NUL-terminated pattern. Returns a new matcher (free with hostmatch_free), or
 * NULL with a one-line reason in err (no JSON path: the caller prefixes it).
 */
struct hostmatch *hostmatch_compile(const char *pattern, char *err, size_t errlen);

/* Frees and NULLs *mp. NULL-safe. */
void hostmatch_free(struct hostmatch **mp);

/*
 * 1 if the normalised host matches, 0 if not, -1 if a regular expression hit its match limit
 * (the caller decides which way to fail: policy treats it as a match for block entries only).
 */
int hostmatch_match(const struct hostmatch *m, const char *host);

enum hostmatch_kind hostmatch_kind(const struct hostmatch *m);

/*
 * The normalised name (EXACT, IP), the suffix without "*." (WILDCARD; "" for `*`) or the
 * expression without "re:" (REGEX). Valid while m lives.
 */
const char *hostmatch_text(const struct hostmatch *m);

/*
 * 1 if the pattern would send a secret to a whole zone or everywhere (`*`, `*.com`, a
 * single-label or well-known public suffix, a regex that matches every probe name of some
 * top-level domain), with the reason in why; else 0.
 */
int hostmatch_too_broad(const struct hostmatch *m, char *why, size_t whylen);

#endif
