/*
 * http1_int.h - private to proxy/http1.c (parser) and proxy/http1_write.c (serialisers): the
 * byte classes and the few helpers both sides check bytes with, so that what the writer accepts
 * is decided by the same table as what the parser accepts. No other module includes this.
 */
#ifndef VG_HTTP1_INT_H
#define VG_HTTP1_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <strings.h>

/* Byte classes, one table lookup per byte on the hot paths. */
#define C_TCHAR 1 /* RFC 9110 tchar */
#define C_TNAME 2 /* tchar except '_' (request field names) */
#define C_VALUE 4 /* field-value byte: HTAB, SP, VCHAR, obs-text; no other control, no DEL */
#define C_VCHAR 8 /* visible ASCII 0x21-0x7e */

/* Defined in http1.c. */
extern const uint8_t http1_cls[256];

static inline bool is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* Length of the run of bytes of class mask at the start of s. */
static inline size_t span(const char *s, size_t n, uint8_t mask)
{
    size_t i = 0;

    while (i < n && (http1_cls[(unsigned char)s[i]] & mask))
        i++;
    return i;
}

static inline bool all_vchar(const char *s, size_t n)
{
    return span(s, n, C_VCHAR) == n;
}

static inline bool all_tchar(const char *s, size_t n)
{
    return span(s, n, C_TCHAR) == n;
}

static inline bool name_is(const char *s, size_t n, const char *lit, size_t litlen)
{
    return n == litlen && strncasecmp(s, lit, n) == 0;
}

#define NAME_IS(s, n, lit) name_is((s), (n), (lit), sizeof(lit) - 1)

#endif
