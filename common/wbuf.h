/*
 * wbuf.h - a growable byte buffer for text that may hold a secret (a SigV4 canonical request,
 * an OAuth token request): every block it lets go of, when it grows or is freed, is wiped first.
 *
 * Start from {0}. Errors are sticky: when memory runs out or a size would overflow, fail is set
 * and later appends do nothing, so a builder checks fail once at the end. While p is not NULL
 * it holds len bytes and a NUL; cap is the size of the block (what a caller that takes p over
 * passes to secmem_free()).
 */
#ifndef VG_WBUF_H
#define VG_WBUF_H

#include <stdbool.h>
#include <stddef.h>

struct wbuf {
    char *p;
    size_t len, cap;
    bool fail;
};

/* Appends n bytes at s. */
void wbuf_add(struct wbuf *b, const void *s, size_t n);

/* Appends the string s, without its NUL. */
void wbuf_str(struct wbuf *b, const char *s);

/* Appends one byte. */
void wbuf_char(struct wbuf *b, char c);

/* Appends n bytes at s percent-encoded (pct_encode(), common/pct.h; flags PCT_SPACE_PLUS). */
void wbuf_pct_encode(struct wbuf *b, const char *s, size_t n, unsigned flags);

/* Appends n bytes at s percent-decoded once (pct_decode(), common/pct.h; flags
 * PCT_PLUS_SPACE). */
void wbuf_pct_decode(struct wbuf *b, const char *s, size_t n, unsigned flags);

/* Wipes and frees the block and zeroes *b (ready for reuse). NULL-safe on an empty buffer. */
void wbuf_free(struct wbuf *b);

#endif
