/*
 * fuzz_wsmask.c - the WebSocket message masker (mask/wsmask.c) on server frames built from the
 * input, fed whole and in pseudo-random pieces.
 *
 * Input: byte 0 = secret length - 1 (mod 32), then the secret (each byte mapped to visible
 * ASCII other than '*'), then a frame program: per frame one flags byte (bits 0-3 opcode, bit 4
 * FIN, bit 5 one reserved or mask bit, bit 6 insert the secret, bit 7 raw bytes instead of a
 * frame), one length byte and that many payload bytes (fewer at the end of the input).
 *
 * Invariants (abort on violation):
 * - feeding in pieces gives exactly the bytes and verdict of feeding in one go;
 * - while no error, the output is a prefix of the input with only '*' where they differ, and
 *   once nothing is held (no message open) it has the input's length;
 * - the secret never appears in the output inside one message's payload, across frames;
 * - after an error, wsmask_fail completes the output to whole frames and a 1002 close frame.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "mask/wsmask.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WIRE_MAX (1 << 16)

struct built {
    unsigned char wire[WIRE_MAX];
    size_t len;
};

static void put(struct built *b, const void *p, size_t n)
{
    if (n > WIRE_MAX - b->len)
        n = WIRE_MAX - b->len;
    memcpy(b->wire + b->len, p, n);
    b->len += n;
}

/* The wire bytes of the frame program. */
static void build(const uint8_t *p, size_t n, const unsigned char *secret, size_t slen,
                  struct built *b)
{
    size_t i = 0;

    while (i + 2 <= n && b->len < WIRE_MAX - 300) {
        uint8_t flags = p[i], len = p[i + 1];
        size_t take = len <= n - i - 2 ? len : n - i - 2;
        unsigned char h[2];

        i += 2;
        if (flags & 0x80) {
            put(b, p + i, take); /* raw bytes: whatever they parse as */
            i += take;
            continue;
        }
        h[0] = (unsigned char)((flags & 0x0f) | ((flags & 0x10) ? 0x80 : 0));
        if (flags & 0x20)
            h[0] |= (unsigned char)(0x10 << (len % 3)); /* one reserved bit */
        h[1] = (unsigned char)(take + ((flags & 0x40) ? slen : 0));
        if (h[1] > 125)
            h[1] = 125;
        put(b, h, 2);
        if (flags & 0x40) {
            size_t s = slen < h[1] ? slen : h[1];

            put(b, secret, s);
            if (take > (size_t)h[1] - s)
                take = (size_t)h[1] - s;
        } else if (take > h[1]) {
            take = h[1];
        }
        put(b, p + i, take);
        i += take;
    }
}

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Feeds b whole (seed 0) or in pieces; returns the verdict and appends the output to out. */
static int run(struct wsmask *w, const struct built *b, uint64_t seed, struct evbuffer *out)
{
    size_t pos = 0;

    while (pos < b->len) {
        size_t n = b->len - pos;

        if (seed != 0)
            n = (size_t)(rng(&seed) % 9) % (n + 1);
        if (wsmask_feed(w, (const char *)b->wire + pos, n, out) < 0)
            return -1;
        pos += n;
    }
    return 0;
}

/* Checks that out is whole frames (no mask bit) ending in a 1002 close; aborts otherwise. */
static void check_closed(const unsigned char *o, size_t n)
{
    size_t pos = 0, last = 0;

    while (pos < n) {
        size_t len, h = 2;

        if (n - pos < 2 || (o[pos + 1] & 0x80) != 0)
            abort();
        len = o[pos + 1] & 0x7f;
        if (len == 126) {
            if (n - pos < 4)
                abort();
            len = ((size_t)o[pos + 2] << 8) | o[pos + 3];
            h = 4;
        } else if (len == 127) {
            if (n - pos < 10)
                abort();
            len = 0;
            for (size_t k = 2; k < 10; k++)
                len = (len << 8) | o[pos + k];
            h = 10;
        }
        if (n - pos < h + len)
            abort();
        last = pos;
        pos += h + len;
    }
    if (n < 4 || memcmp(o + last, "\x88\x02\x03\xea", 4) != 0 || last + 4 != n)
        abort();
}

/* The secret must not appear in any message's payload joined across its frames. */
static void check_no_secret(const unsigned char *o, size_t n, const unsigned char *secret,
                            size_t slen)
{
    static unsigned char msg[WIRE_MAX];
    size_t pos = 0, ml = 0;

    while (pos + 2 <= n) {
        size_t len = o[pos + 1] & 0x7f, h = 2;
        bool ctrl = (o[pos] & 0x08) != 0, fin = (o[pos] & 0x80) != 0;

        if (len == 126) {
            if (pos + 4 > n)
                return;
            len = ((size_t)o[pos + 2] << 8) | o[pos + 3];
            h = 4;
        }
        if (len == 127 || pos + h + len > n)
            return;
        if (!ctrl) {
            memcpy(msg + ml, o + pos + h, len);
            ml += len;
        }
        if (ctrl || fin) {
            const unsigned char *x = ctrl ? o + pos + h : msg;
            size_t xl = ctrl ? len : ml;

            for (size_t i = 0; i + slen <= xl; i++)
                if (memcmp(x + i, secret, slen) == 0)
                    abort();
            if (!ctrl)
                ml = 0;
        }
        pos += h + len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct built b;
    unsigned char secret[32];
    size_t slen;
    struct inject_form f;
    struct wsmask *w1 = NULL, *w2 = NULL;
    struct evbuffer *o1 = evbuffer_new(), *o2 = evbuffer_new();
    uint64_t seed;
    int r1, r2;

    if (size < 2 || o1 == NULL || o2 == NULL)
        goto out;
    slen = 1 + data[0] % 32;
    if (size < 1 + slen)
        goto out;
    for (size_t i = 0; i < slen; i++) {
        /* visible ASCII but '*', which masked output is made of */
        secret[i] = (unsigned char)(0x21 + data[1 + i] % 93);
        secret[i] += secret[i] >= '*';
    }
    seed = 0x9e3779b97f4a7c15ULL ^ size;
    b.len = 0;
    build(data + 1 + slen, size - 1 - slen, secret, slen, &b);
    f.bytes = secret;
    f.len = slen;
    f.flags = INJECT_FORM_VALUE; /* the masker adds its base64 forms */
    w1 = wsmask_new(&f, 1);
    w2 = wsmask_new(&f, 1);
    if (w1 == NULL || w2 == NULL)
        goto out;
    r1 = run(w1, &b, 0, o1);
    r2 = run(w2, &b, seed, o2);
    if (r1 != r2)
        abort();
    if (r1 == 0) {
        size_t n1 = evbuffer_get_length(o1);
        const unsigned char *p1 = evbuffer_pullup(o1, -1);

        if (n1 != evbuffer_get_length(o2) ||
            (n1 > 0 && memcmp(p1, evbuffer_pullup(o2, -1), n1) != 0))
            abort();
        if (n1 > b.len || (!wsmask_in_message(w1) && n1 != b.len))
            abort();
        for (size_t i = 0; i < n1; i++)
            if (p1[i] != b.wire[i] && p1[i] != '*')
                abort();
        check_no_secret(p1, n1, secret, slen);
    } else {
        int f1 = wsmask_fail(w1, o1), f2 = wsmask_fail(w2, o2);

        if (f1 != f2)
            abort();
        if (f1 < 0)
            goto out; /* a frame cut far from its end: closed without a close frame */
        if (evbuffer_get_length(o1) != evbuffer_get_length(o2) ||
            memcmp(evbuffer_pullup(o1, -1), evbuffer_pullup(o2, -1), evbuffer_get_length(o1)))
            abort();
        check_closed(evbuffer_pullup(o1, -1), evbuffer_get_length(o1));
        check_no_secret(evbuffer_pullup(o1, -1), evbuffer_get_length(o1), secret, slen);
    }
    /* a stream that ends inside a message is what an upstream EOF leaves: fail must close it */
    if (r1 == 0 && wsmask_in_message(w1)) {
        if (wsmask_fail(w1, o1) == 0)
            check_closed(evbuffer_pullup(o1, -1), evbuffer_get_length(o1));
    }
out:
    wsmask_free(&w1);
    wsmask_free(&w2);
    if (o1 != NULL)
        evbuffer_free(o1);
    if (o2 != NULL)
        evbuffer_free(o2);
    return 0;
}
