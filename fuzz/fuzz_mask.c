/*
 * fuzz_mask.c - reflection masking (proxy/mask.c) against a slow reference.
 *
 * Input: byte 0 = mode (bits 0-1: number of forms - 1, 3 meaning 1; bit 2: the data is a
 * gzip (bit 3 clear) or deflate (bit 3 set) body to decode first; bits 4-7 seed the feed sizes),
 * then per form one length byte (1 + b % 64) and the form's bytes, then the data. The data is
 * fed in pseudo-random pieces (empty, single bytes, and up to three times the longest form).
 *
 * Invariants (abort on violation):
 * - after each feed, exactly the longest suffix of the stream that is a proper prefix of some
 *   form is held back, nothing more (no delay) and nothing less (no partial secret leaves);
 * - the output has the input's length and equals the reference: every occurrence of every form
 *   over the whole input starred; mask_count equals the number of occurrences;
 * - mask_head on a one-field head masks the value exactly as the reference does;
 * - decoding in pieces (some with a small output budget per call) gives the same verdict and
 *   bytes as decoding in one feed, within the cap and the budgets.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "policy/inject.h"
#include "proxy/mask.h"

#define FUZZ_DECODE_CAP (1 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_in {
    struct inject_form f[INJECT_MAX_FORMS];
    size_t nf, maxlen;
    uint64_t seed;
};

static uint64_t fuzz_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Next feed size: empty, one byte, or up to three times the longest form. */
static size_t fuzz_step(struct fuzz_in *x, size_t left)
{
    uint64_t r = fuzz_rng(&x->seed);
    size_t n;

    switch (r % 4) {
    case 0:
        n = (size_t)(r >> 8) % 2;
        break;
    case 1:
        n = left;
        break;
    default:
        n = (size_t)(r >> 8) % (3 * x->maxlen + 2);
        break;
    }
    return n < left ? n : left;
}

/* Stars every occurrence of every form in want (a copy of in); returns the occurrences. */
static size_t ref_mask(const struct fuzz_in *x, const uint8_t *in, size_t len, uint8_t *want)
{
    size_t hits = 0;

    if (len > 0)
        memcpy(want, in, len);
    for (size_t k = 0; k < x->nf; k++) {
        for (size_t i = 0; i + x->f[k].len <= len; i++) {
            if (memcmp(in + i, x->f[k].bytes, x->f[k].len) == 0) {
                memset(want + i, '*', x->f[k].len);
                hits++;
            }
        }
    }
    return hits;
}

/* Longest suffix of in[0..len) that is a proper prefix of some form. */
static size_t ref_hold(const struct fuzz_in *x, const uint8_t *in, size_t len)
{
    for (size_t h = x->maxlen - 1 < len ? x->maxlen - 1 : len; h > 0; h--) {
        for (size_t k = 0; k < x->nf; k++)
            if (x->f[k].len > h && memcmp(in + len - h, x->f[k].bytes, h) == 0)
                return h;
    }
    return 0;
}

static void check_stream(struct fuzz_in *x, struct mask *m, const uint8_t *in, size_t len)
{
    struct evbuffer *out = evbuffer_new();
    uint8_t *want = malloc(len + 1);
    size_t at = 0, hits;

    if (out == NULL || want == NULL)
        abort();
    hits = ref_mask(x, in, len, want);
    while (at < len) {
        size_t n = fuzz_step(x, len - at);

        if (mask_feed(m, (const char *)in + at, n, out) != 0)
            abort();
        at += n;
        if (evbuffer_get_length(out) != at - ref_hold(x, in, at))
            abort();
    }
    if (mask_finish(m, out) != 0 || evbuffer_get_length(out) != len)
        abort();
    if (len > 0 && memcmp(evbuffer_pullup(out, -1), want, len) != 0)
        abort();
    if (mask_count(m) != hits)
        abort();
    free(want);
    evbuffer_free(out);
}

static void check_head(const struct fuzz_in *x, const struct mask *m, const uint8_t *in, size_t len)
{
    char *value = malloc(len + 1), name[] = "X-Echo";
    uint8_t *want = malloc(len + 1), scratch[sizeof(name)];
    struct http_field field = {name, 6, value, len};
    struct http_head h = {.status = 200, .fields = &field, .nfields = 1};
    size_t hits;

    if (value == NULL || want == NULL)
        abort();
    if (len > 0)
        memcpy(value, in, len);
    value[len] = '\0';
    hits = ref_mask(x, in, len, want);
    /* the name is masked too: count its occurrences as well */
    hits += ref_mask(x, (const uint8_t *)name, sizeof(name) - 1, scratch);
    if (mask_head(m, &h) != hits)
        abort();
    if (len > 0 && memcmp(value, want, len) != 0)
        abort();
    free(value);
    free(want);
}

/* Decodes in[] in one feed and in pieces; both must agree. Returns the decoded bytes or NULL. */
static struct evbuffer *check_decode(struct fuzz_in *x, enum mask_coding c, const uint8_t *in,
                                     size_t len)
{
    struct mask_decoder *one = mask_decoder_new_capped(c, FUZZ_DECODE_CAP);
    struct mask_decoder *cut = mask_decoder_new_capped(c, FUZZ_DECODE_CAP);
    struct evbuffer *a = evbuffer_new(), *b = evbuffer_new();
    int ra, rb = 0;
    size_t at = 0;

    if (one == NULL || cut == NULL || a == NULL || b == NULL)
        abort();
    ra = mask_decoder_feed(one, (const char *)in, len, a);
    if (ra == 0)
        ra = mask_decoder_finish(one, a);
    while (at < len && rb == 0) {
        size_t n = fuzz_step(x, len - at), used;

        if (fuzz_rng(&x->seed) % 2 == 0) {
            rb = mask_decoder_feed(cut, (const char *)in + at, n, b);
            at += n;
            continue;
        }
        /* with backpressure: at most out_max bytes per call, resume where it stopped */
        do {
            size_t out_max = 1 + (size_t)(fuzz_rng(&x->seed) % 64), had = evbuffer_get_length(b);

            rb = mask_decoder_feed_some(cut, (const char *)in + at, n, b, out_max, &used);
            if (rb >= 0 && (used > n || evbuffer_get_length(b) - had > out_max))
                abort();
            if (rb >= 0) {
                at += used;
                n -= used;
            }
        } while (rb == 1);
        if (rb == 0 && n != 0)
            abort();
    }
    if (rb == 0)
        rb = mask_decoder_finish(cut, b);
    if (ra != rb || evbuffer_get_length(a) > FUZZ_DECODE_CAP ||
        evbuffer_get_length(b) > FUZZ_DECODE_CAP)
        abort();
    if (ra == 0 &&
        (evbuffer_get_length(a) != evbuffer_get_length(b) ||
         memcmp(evbuffer_pullup(a, -1), evbuffer_pullup(b, -1), evbuffer_get_length(a)) != 0))
        abort();
    mask_decoder_free(&one);
    mask_decoder_free(&cut);
    evbuffer_free(b);
    if (ra != 0) {
        evbuffer_free(a);
        return NULL;
    }
    return a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in x = {0};
    struct evbuffer *dec = NULL;
    struct mask *m = NULL;
    const uint8_t *p = data + 1, *end = data + size;
    uint8_t mode;

    if (size < 1)
        return 0;
    mode = data[0];
    x.nf = (mode & 3) == 3 ? 1 : (size_t)(mode & 3) + 1;
    x.seed = 0x9e3779b97f4a7c15u ^ (uint64_t)(mode >> 4) ^ ((uint64_t)size << 32);
    for (size_t k = 0; k < x.nf; k++) {
        size_t len;

        if (p >= end)
            return 0;
        len = 1 + (size_t)(*p++ % 64);
        if ((size_t)(end - p) < len)
            return 0;
        x.f[k] = (struct inject_form){p, len};
        p += len;
        if (len > x.maxlen)
            x.maxlen = len;
    }
    m = mask_new(x.f, x.nf);
    if (m == NULL)
        abort();
    if (mode & 4) {
        dec = check_decode(&x, mode & 8 ? MASK_CODING_DEFLATE : MASK_CODING_GZIP, p,
                           (size_t)(end - p));
        if (dec != NULL) {
            size_t n = evbuffer_get_length(dec);

            check_stream(&x, m, n > 0 ? evbuffer_pullup(dec, -1) : p, n);
            evbuffer_free(dec);
        }
    } else {
        check_stream(&x, m, p, (size_t)(end - p));
        check_head(&x, m, p, (size_t)(end - p));
    }
    mask_free(&m);
    return 0;
}
