/*
 * pct.c - percent-encoding (RFC 3986 §2.1), the one codec of the tree: policy's path scopes and
 * query rewrite, the SigV4 canonical request, the query-parameter wire form of a secret and the
 * OAuth token request all decode and encode with these.
 *
 * Guarantees: decoding never writes more bytes than it reads and never fails (a malformed escape
 * is kept as it is: callers that must refuse one check with pct_escape() first); encoding writes
 * at most PCT_ENCODED_MAX(n) bytes and only the unreserved set raw. No allocation.
 */
#include "common/pct.h"

#include <stdbool.h>

int pct_escape(const char *s, size_t n)
{
    int hi, lo;

    if (n < 3 || s[0] != '%')
        return -1;
    hi = pct_hexval((unsigned char)s[1]);
    lo = pct_hexval((unsigned char)s[2]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

size_t pct_decode(char *out, const char *s, size_t n, unsigned flags)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int v = pct_escape(s + i, n - i);

        if (v >= 0) {
            out[o++] = (char)v;
            i += 2;
        } else {
            out[o++] = (flags & PCT_PLUS_SPACE) && s[i] == '+' ? ' ' : s[i];
        }
    }
    return o;
}

static bool pct_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

size_t pct_encode(char *out, const char *s, size_t n, unsigned flags)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (pct_unreserved(c)) {
            out[o++] = (char)c;
        } else if (c == ' ' && (flags & PCT_SPACE_PLUS)) {
            out[o++] = '+';
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    return o;
}
