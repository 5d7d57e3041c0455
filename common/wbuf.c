/*
 * wbuf.c - the growable buffer that wipes what it drops (wbuf.h).
 *
 * Guarantees: no byte ever appended is left in freed memory: growing copies into a new block and
 * wipes the old one with OPENSSL_cleanse, wbuf_free wipes the whole block (cap bytes, not only
 * len). Capacity starts at 256 and doubles; a size that would overflow fails the buffer.
 */
#include "common/wbuf.h"

#include "common/pct.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

/* Room for more bytes plus the NUL: the place to write them, or NULL (b->fail set). */
static char *wbuf_room(struct wbuf *b, size_t more)
{
    size_t cap = b->cap > 0 ? b->cap : 256;
    char *n;

    if (b->fail)
        return NULL;
    if (more > SIZE_MAX - 1 - b->len) {
        b->fail = true;
        return NULL;
    }
    if (b->len + more + 1 <= b->cap)
        return b->p + b->len;
    while (cap < b->len + more + 1) {
        if (cap > SIZE_MAX / 4) {
            b->fail = true;
            return NULL;
        }
        cap *= 2;
    }
    if ((n = malloc(cap)) == NULL) {
        b->fail = true;
        return NULL;
    }
    if (b->p != NULL) {
        memcpy(n, b->p, b->len);
        OPENSSL_cleanse(b->p, b->cap);
        free(b->p);
    }
    b->p = n;
    b->cap = cap;
    return b->p + b->len;
}

/* Counts n bytes written at the room as added. */
static void wbuf_grow(struct wbuf *b, size_t n)
{
    b->len += n;
    b->p[b->len] = '\0';
}

void wbuf_add(struct wbuf *b, const void *s, size_t n)
{
    char *w = wbuf_room(b, n);

    if (w == NULL)
        return;
    if (n > 0)
        memcpy(w, s, n);
    wbuf_grow(b, n);
}

void wbuf_str(struct wbuf *b, const char *s)
{
    wbuf_add(b, s, strlen(s));
}

void wbuf_char(struct wbuf *b, char c)
{
    wbuf_add(b, &c, 1);
}

void wbuf_pct_encode(struct wbuf *b, const char *s, size_t n, unsigned flags)
{
    char *w;

    if (n == 0)
        return;
    if (n > SIZE_MAX / 3) {
        b->fail = true;
        return;
    }
    if ((w = wbuf_room(b, PCT_ENCODED_MAX(n))) != NULL)
        wbuf_grow(b, pct_encode(w, s, n, flags));
}

void wbuf_pct_decode(struct wbuf *b, const char *s, size_t n, unsigned flags)
{
    char *w;

    if (n == 0)
        return;
    if ((w = wbuf_room(b, n)) != NULL)
        wbuf_grow(b, pct_decode(w, s, n, flags));
}

void wbuf_free(struct wbuf *b)
{
    if (b->p != NULL) {
        OPENSSL_cleanse(b->p, b->cap);
        free(b->p);
    }
    memset(b, 0, sizeof(*b));
}
