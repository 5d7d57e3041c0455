/*
 * pct.h - percent-encoding (RFC 3986 §2.1) for every module: the hex-digit value, one escape,
 * decoding once, encoding with the unreserved set. Pure functions over caller buffers.
 */
#ifndef VG_PCT_H
#define VG_PCT_H

#include <stddef.h>

/* pct_decode: '+' becomes a space (application/x-www-form-urlencoded, a query's parameters). */
#define PCT_PLUS_SPACE 1u
/* pct_encode: a space becomes '+' instead of %20 (application/x-www-form-urlencoded). */
#define PCT_SPACE_PLUS 2u

/* The most bytes pct_encode() writes for n bytes: every byte as %XX. */
#define PCT_ENCODED_MAX(n) ((n)*3)

/* The value of one hex digit (either case), or -1. Inline: the masker and the chunked decoder
 * call it per byte. */
static inline int pct_hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The byte that the escape at s stands for, when s (n bytes left) starts with '%' and two hex
 * digits; else -1. */
int pct_escape(const char *s, size_t n);

/*
 * Decodes n bytes at s once into out (room for n bytes; out may be s): every %XX becomes its
 * byte, a malformed escape stays as it is, '+' becomes a space under PCT_PLUS_SPACE. Returns
 * the bytes written.
 */
size_t pct_decode(char *out, const char *s, size_t n, unsigned flags);

/*
 * Encodes n bytes at s into out (room for PCT_ENCODED_MAX(n) bytes; no NUL is added): the
 * unreserved bytes (ALPHA DIGIT - . _ ~) as they are, every other byte as %XX with upper-case
 * hex, a space as '+' under PCT_SPACE_PLUS. Returns the bytes written.
 */
size_t pct_encode(char *out, const char *s, size_t n, unsigned flags);

#endif
