/*
 * scope.c - rule scopes (SPEC §3): method tokens, path prefixes matched at segment boundaries,
 * and the canonical-path rule.
 *
 * Guarantees: a path that scope_path_canonical() accepts reads the same to vaultgate and to any
 * server that decodes percent-escapes once and resolves dot segments: it has no dot segment
 * (raw or encoded, nor "..;" as Tomcat reads it), no encoded or raw backslash, no encoded slash,
 * no encoded NUL (which C servers take for the end of the path), and no malformed escape. Prefixes
 * are compared after one round of percent-decoding, so
 * "%3A" and ":" (which servers take for the same byte) match alike, and since "%2f" is refused
 * a decoded '/' is always a real segment boundary.
 */
#include "policy/scope.h"

#include "common/pct.h"

#include <string.h>

int scope_method_ok(const char *m, const char **why)
{
    size_t n = strlen(m);

    *why = NULL;
    if (n < 1 || n > SCOPE_METHOD_MAX) {
        *why = "must be 1-32 characters";
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)m[i];

        if (c >= 'a' && c <= 'z') {
            *why = "must be upper case";
            return 0;
        }
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL))) {
            *why = "is not an RFC 9110 token";
            return 0;
        }
    }
    if (strcmp(m, "CONNECT") == 0 || strcmp(m, "TRACE") == 0) {
        *why = "never reaches a rule (CONNECT is decided per host, TRACE is refused)";
        return 0;
    }
    return 1;
}

size_t scope_path_len(const char *target, size_t len)
{
    size_t i = 0;

    while (i < len && target[i] != '?' && target[i] != '#')
        i++;
    return i;
}

/* 1 when seg (n bytes, without '/') is "." or "..", alone or before a ';' parameter. */
static int dot_segment(const char *seg, size_t n)
{
    const char *semi = memchr(seg, ';', n);

    if (semi != NULL)
        n = (size_t)(semi - seg);
    return (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.');
}

int scope_path_canonical(const char *path, size_t len, const char **why)
{
    size_t seg = 0;
    int v;

    *why = NULL;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || path[i] == '/') {
            if (dot_segment(path + seg, i - seg)) {
                *why = "dot segment in the path";
                return 0;
            }
            seg = i + 1;
            continue;
        }
        if (path[i] == '\\') {
            *why = "backslash in the path";
            return 0;
        }
        if (path[i] != '%')
            continue;
        v = pct_escape(path + i, len - i);
        if (v < 0) {
            *why = "malformed percent-escape in the path";
            return 0;
        }
        if (v == '.' || v == '/' || v == '\\') {
            *why = "encoded dot, slash or backslash in the path";
            return 0;
        }
        if (v == 0) {
            *why = "encoded NUL in the path";
            return 0;
        }
        i += 2;
    }
    return 1;
}

int scope_prefix_admits(const char *prefix, size_t plen, const char *path, size_t len)
{
    if (len < plen || memcmp(prefix, path, plen) != 0)
        return 0;
    return len == plen || (plen > 0 && prefix[plen - 1] == '/') || path[plen] == '/';
}
