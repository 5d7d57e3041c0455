/*
 * fuzz_mask.c - reflection masking (mask/mask.c) against a slow, plain reference.
 *
 * Input: byte 0 = mode (bits 0-1: the secret's alphabet - visible ASCII and space, escape
 * characters only, any byte, or "ab"; bit 2: the data is a gzip (bit 3 clear) or deflate (bit
 * 3 set) body to decode first; otherwise bit 3 adds the base64 of the secret as a second form
 * (a wire form, as basic's); bits 4-7 seed the feed sizes); byte 1 = b: the secret's length
 * (1 + b % 40), and whether it is a value (b / 40 even: INJECT_FORM_VALUE); the secret's bytes
 * (mapped into the alphabet); 4 bytes seeding where a spelling of each form is planted in the
 * data and which spelling of each byte it uses (independently per byte), and the head's binary
 * field; then the data. The stream is fed in pseudo-random pieces (empty, single bytes, and up
 * to a few spellings long).
 *
 * The reference forms are the forms given and, for a value, its base64 forms, derived here
 * from OpenSSL's base64 of the value behind 0, 1 or 2 zero bytes: the characters from the first
 * that holds no bit of those bytes to the last that holds only bits of the value, in the
 * standard and the URL-safe alphabet, those shorter than 4 characters left out, each distinct
 * form once. The reference tries every start offset: a dynamic programme over the spelling
 * grammar (each byte of a form raw, `+` for a space, `%hh` in every letter case, `\u00hh` for
 * ASCII, `\/`, `\\`, `\"`), each spelling written out as a string and compared byte by byte.
 *
 * Invariants (abort on violation):
 * - after each feed, exactly the bytes from the earliest start of a proper prefix of a spelling
 *   are held back, nothing more (no delay) and nothing less (no partial secret leaves);
 * - the output has the input's length and equals the reference: every byte of every spelling of
 *   every form starred, every other byte unchanged; the planted spellings are starred;
 *   mask_count equals the number of (form, end offset) pairs where a spelling ends;
 * - mask_head on a head of two fields masks the names and values exactly as the reference does;
 *   the second is a binary field (`-bin`) whose value is the data in base64 (padded or not) or
 *   the data itself: the reference decodes it (standard alphabet, padding optional), masks the
 *   bytes, encodes them again over the same characters when something was masked, then masks
 *   the text;
 * - decoding in pieces (some with a small output budget per call) gives the same verdict and
 *   bytes as decoding in one feed, within the cap and the budgets.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/evp.h>

#include "policy/inject.h"
#include "mask/mask.h"

#define FUZZ_DECODE_CAP  (1 << 20)
#define FUZZ_SECRET_MAX  40
#define FUZZ_SPELL_MAX   12 /* spellings of one byte: raw, '+', 4 of %hh, 4 of \u00hh, \x */
#define FUZZ_SPELL_BYTES 6
#define FUZZ_FORMS       8 /* the two forms given, the value's six base64 forms */
#define FUZZ_B64_MIN     4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_in {
    struct inject_form f[2];           /* given to mask_new */
    struct inject_form rf[FUZZ_FORMS]; /* what the reference looks for */
    size_t nf, nrf, span;              /* span: the longest spelling of any form, plus one */
    unsigned char secret[FUZZ_SECRET_MAX], b64[2 * FUZZ_SECRET_MAX + 4];
    unsigned char derived[6][2 * FUZZ_SECRET_MAX + 8];
    uint64_t seed, plant;
};

/* What the reference knows about one stream. */
struct fuzz_ref {
    size_t len;
    uint8_t *want;   /* the input with every byte of every spelling starred */
    uint8_t *viable; /* viable[s * span + j]: in[s..s+j) is a proper prefix of a spelling */
    size_t hits;     /* (form, end offset) pairs where a spelling ends */
};

static uint64_t fuzz_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* One way to write one byte of a form. */
struct spelling {
    char b[FUZZ_SPELL_BYTES];
    size_t len;
};

static void spelling_set(struct spelling *w, const char *b, size_t len)
{
    memcpy(w->b, b, len);
    w->len = len;
}

/* Every spelling of byte c, written out; returns how many. */
static size_t ref_spellings(unsigned char c, struct spelling out[FUZZ_SPELL_MAX])
{
    static const char up[] = "0123456789ABCDEF", low[] = "0123456789abcdef";
    size_t n = 0;

    spelling_set(&out[n++], (const char *)&c, 1);
    if (c == ' ')
        spelling_set(&out[n++], "+", 1);
    for (int v = 0; v < 4; v++) {
        char hi = (v & 1 ? up : low)[c >> 4], lo = (v & 2 ? up : low)[c & 15];
        char pct[3] = {'%', hi, lo}, u[6] = {'\\', 'u', '0', '0', hi, lo};

        if (((v & 1) && hi == low[c >> 4]) || ((v & 2) && lo == low[c & 15]))
            continue; /* a digit has one case */
        spelling_set(&out[n++], pct, 3);
        if (c < 0x80)
            spelling_set(&out[n++], u, 6);
    }
    if (c == '/' || c == '\\' || c == '"') {
        char e[2] = {'\\', (char)c};

        spelling_set(&out[n++], e, 2);
    }
    return n;
}

/*
 * Every spelling of form f starting at in[s]: rows k = 0..n of the offsets (from s) where a
 * spelling of f[0..k) ends. Marks the proper prefixes in viable and the ends in ends[].
 */
static void ref_from(const struct fuzz_in *x, const struct inject_form *f, const uint8_t *in,
                     size_t len, size_t s, struct fuzz_ref *r, uint8_t *ends, size_t *rows)
{
    struct spelling sp[FUZZ_SPELL_MAX];
    size_t *cur = rows, *next = rows + x->span, ncur = 1, nnext;

    cur[0] = 0;
    for (size_t k = 0; k < f->len && ncur > 0; k++) {
        size_t nsp = ref_spellings(f->bytes[k], sp);
        size_t *t;

        nnext = 0;
        for (size_t i = 0; i < ncur; i++) {
            size_t off = cur[i];

            if (off > 0)
                r->viable[s * x->span + off] = 1;
            for (size_t w = 0; w < nsp; w++) {
                size_t wl = sp[w].len, j = 0;

                while (j < wl && s + off + j < len && in[s + off + j] == (uint8_t)sp[w].b[j])
                    j++;
                for (size_t q = 1; q <= j && q < wl; q++)
                    r->viable[s * x->span + off + q] = 1;
                if (j == wl) {
                    size_t o = off + wl, d = 0;

                    while (d < nnext && next[d] != o)
                        d++;
                    if (d == nnext)
                        next[nnext++] = o;
                }
            }
        }
        t = cur;
        cur = next;
        next = t;
        ncur = nnext;
    }
    for (size_t i = 0; i < ncur; i++) {
        memset(r->want + s, '*', cur[i]);
        ends[s + cur[i]] = 1;
    }
}

static void ref_build(const struct fuzz_in *x, const uint8_t *in, size_t len, struct fuzz_ref *r)
{
    uint8_t *ends = malloc(len + 1);
    size_t *rows = malloc(2 * x->span * sizeof(*rows));

    r->len = len;
    r->want = malloc(len + 1);
    r->viable = calloc(len + 1, x->span);
    r->hits = 0;
    if (ends == NULL || rows == NULL || r->want == NULL || r->viable == NULL)
        abort();
    if (len > 0)
        memcpy(r->want, in, len);
    for (size_t k = 0; k < x->nrf; k++) {
        memset(ends, 0, len + 1);
        for (size_t s = 0; s < len; s++)
            ref_from(x, &x->rf[k], in, len, s, r, ends, rows);
        for (size_t e = 0; e <= len; e++)
            r->hits += ends[e];
    }
    free(ends);
    free(rows);
}

static void ref_free(struct fuzz_ref *r)
{
    free(r->want);
    free(r->viable);
}

/* Bytes held back after the first `end` bytes: from the earliest start of a proper prefix. */
static size_t ref_hold(const struct fuzz_in *x, const struct fuzz_ref *r, size_t end)
{
    for (size_t s = end >= x->span ? end - x->span + 1 : 0; s < end; s++) {
        if (r->viable[s * x->span + (end - s)])
            return end - s;
    }
    return 0;
}

/* Next feed size: empty, one byte, the rest, or up to a few spellings long. */
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
        n = (size_t)(r >> 8) % (3 * x->span + 2);
        break;
    }
    return n < left ? n : left;
}

static void check_stream(struct fuzz_in *x, struct mask *m, const uint8_t *in, size_t len,
                         const size_t *planted, size_t nplanted)
{
    struct evbuffer *out = evbuffer_new();
    struct fuzz_ref r;
    const uint8_t *o;
    size_t at = 0;

    if (out == NULL)
        abort();
    ref_build(x, in, len, &r);
    while (at < len) {
        size_t n = fuzz_step(x, len - at);

        if (mask_feed(m, (const char *)in + at, n, out) != 0)
            abort();
        at += n;
        if (evbuffer_get_length(out) != at - ref_hold(x, &r, at))
            abort();
    }
    if (mask_finish(m, out) != 0 || evbuffer_get_length(out) != len)
        abort();
    o = len > 0 ? evbuffer_pullup(out, -1) : NULL;
    if (len > 0 && memcmp(o, r.want, len) != 0)
        abort();
    for (size_t i = 0; i < nplanted; i += 2) {
        for (size_t b = planted[i]; b < planted[i + 1]; b++)
            if (o[b] != '*')
                abort();
    }
    if (mask_count(m) != r.hits)
        abort();
    ref_free(&r);
    evbuffer_free(out);
}

static int ref_b64_value(uint8_t c)
{
    static const char std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c != 0 ? strchr(std, c) : NULL;

    return p != NULL ? (int)(p - std) : -1;
}

/*
 * The reference for a binary field's value v[0..len) (masked in place): decoded bit by bit
 * when it is standard base64 with or without padding, the bytes masked, written back over the
 * same characters (the bits beyond the last byte and the padding unchanged) when something
 * was masked; then the text masked. Returns the spellings' ends counted.
 */
static size_t ref_bin(const struct fuzz_in *x, uint8_t *v, size_t len)
{
    size_t n = len, pad = 0, hits = 0;
    uint8_t *bits = malloc(6 * len + 1), *bytes = malloc(len + 1);
    struct fuzz_ref r;
    int ok = len > 0;

    if (bits == NULL || bytes == NULL)
        abort();
    while (n > 0 && pad < 2 && v[n - 1] == '=' && len % 4 == 0) {
        n--;
        pad++;
    }
    if (n % 4 == 1 || (pad > 0 && (n + pad) % 4 != 0))
        ok = 0;
    for (size_t i = 0; i < n && ok; i++) {
        int d = ref_b64_value(v[i]);

        if (d < 0)
            ok = 0;
        for (int b = 0; b < 6 && ok; b++)
            bits[6 * i + (size_t)b] = (uint8_t)((d >> (5 - b)) & 1);
    }
    if (ok && 6 * n / 8 > 0) {
        size_t nb = 6 * n / 8;

        for (size_t i = 0; i < nb; i++) {
            bytes[i] = 0;
            for (int b = 0; b < 8; b++)
                bytes[i] = (uint8_t)(bytes[i] << 1 | bits[8 * i + (size_t)b]);
        }
        ref_build(x, bytes, nb, &r);
        hits = r.hits;
        if (hits > 0) {
            for (size_t i = 0; i < 8 * nb; i++)
                bits[i] = (uint8_t)((r.want[i / 8] >> (7 - i % 8)) & 1);
            for (size_t i = 0; i < n; i++) {
                int d = 0;

                for (int b = 0; b < 6; b++)
                    d = d << 1 | bits[6 * i + (size_t)b];
                v[i] =
                    (uint8_t) "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[d];
            }
        }
        ref_free(&r);
    }
    ref_build(x, v, len, &r);
    if (len > 0)
        memcpy(v, r.want, len);
    hits += r.hits;
    ref_free(&r);
    free(bits);
    free(bytes);
    return hits;
}

static void check_head(const struct fuzz_in *x, struct mask *m, const uint8_t *in, size_t len)
{
    size_t blen = len;
    char *value = malloc(len + 1), name[] = "X-Echo", bname[] = "X-Echo-Bin";
    char *bvalue = malloc(4 * (len / 3) + 8);
    uint8_t *bwant = malloc(4 * (len / 3) + 8);
    struct http_field field[2] = {{name, 6, value, len}, {bname, 10, bvalue, 0}};
    struct http_head h = {.status = 200, .fields = field, .nfields = 2};
    struct fuzz_ref rv, rn, rb;
    size_t bhits;

    if (value == NULL || bvalue == NULL || bwant == NULL)
        abort();
    if (len > 0)
        memcpy(value, in, len);
    value[len] = '\0';
    /* the binary field: the data in base64 (padded, or not), or the data as it is */
    if (x->plant & (1u << 30)) {
        blen = (size_t)EVP_EncodeBlock((unsigned char *)bvalue, in, (int)len);
        while ((x->plant & (1u << 31)) && blen > 0 && bvalue[blen - 1] == '=')
            blen--;
    } else if (len > 0) {
        memcpy(bvalue, in, len);
    }
    bvalue[blen] = '\0';
    field[1].value_len = blen;
    memcpy(bwant, bvalue, blen + 1);
    ref_build(x, in, len, &rv);
    ref_build(x, (const uint8_t *)name, sizeof(name) - 1, &rn);
    ref_build(x, (const uint8_t *)bname, sizeof(bname) - 1, &rb);
    bhits = ref_bin(x, bwant, blen);
    if (mask_head(m, &h) != rv.hits + rn.hits + rb.hits + bhits)
        abort();
    if ((len > 0 && memcmp(value, rv.want, len) != 0) || memcmp(name, rn.want, 6) != 0 ||
        memcmp(bname, rb.want, 10) != 0 || (blen > 0 && memcmp(bvalue, bwant, blen) != 0))
        abort();
    ref_free(&rv);
    ref_free(&rn);
    ref_free(&rb);
    free(value);
    free(bvalue);
    free(bwant);
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
         (evbuffer_get_length(a) > 0 &&
          memcmp(evbuffer_pullup(a, -1), evbuffer_pullup(b, -1), evbuffer_get_length(a)) != 0)))
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

/* The value's base64 forms (see the top of the file), added to the reference forms. */
static void ref_derive(struct fuzz_in *x)
{
    for (unsigned int i = 0; i < 6; i++) {
        unsigned char z[FUZZ_SECRET_MAX + 2] = {0}, enc[2 * FUZZ_SECRET_MAX + 8];
        size_t r = i / 2, n = x->f[0].len, from = (8 * r + 5) / 6, to = (8 * r + 8 * n) / 6;
        bool dup = false;

        memcpy(z + r, x->secret, n);
        EVP_EncodeBlock(enc, z, (int)(r + n));
        if (to - from < FUZZ_B64_MIN)
            continue;
        for (size_t j = from; j < to; j++) {
            unsigned char c = enc[j];

            x->derived[i][j - from] = i % 2 == 0 ? c : c == '+' ? '-' : c == '/' ? '_' : c;
        }
        for (size_t k = 0; k < x->nrf && !dup; k++)
            dup =
                x->rf[k].len == to - from && memcmp(x->rf[k].bytes, x->derived[i], to - from) == 0;
        if (!dup)
            x->rf[x->nrf++] = (struct inject_form){x->derived[i], to - from, 0};
    }
}

/* Reads the secret (mapped into the mode's alphabet) and the forms; 0, or -1 if too short. */
static int fuzz_forms(struct fuzz_in *x, uint8_t mode, const uint8_t **p, const uint8_t *end)
{
    static const char escapes[] = "%\\+ /\"u0a4Af1";
    size_t len;
    bool value;

    if (end - *p < 1)
        return -1;
    len = 1 + (size_t)(**p % FUZZ_SECRET_MAX);
    value = (**p / FUZZ_SECRET_MAX) % 2 == 0;
    (*p)++;
    if ((size_t)(end - *p) < len)
        return -1;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (*p)[i];

        switch (mode & 3) {
        case 0:
            x->secret[i] = (unsigned char)(0x20 + b % 95);
            break;
        case 1:
            x->secret[i] = (unsigned char)escapes[b % (sizeof(escapes) - 1)];
            break;
        case 2:
            x->secret[i] = b;
            break;
        default:
            x->secret[i] = (unsigned char)("ab"[b % 2]);
            break;
        }
    }
    *p += len;
    x->f[0] = (struct inject_form){x->secret, len, value ? INJECT_FORM_VALUE : 0};
    x->nf = 1;
    if ((mode & 12) == 8) {
        x->f[1].bytes = x->b64;
        x->f[1].len = (size_t)EVP_EncodeBlock(x->b64, x->secret, (int)len);
        x->f[1].flags = 0;
        x->nf = 2;
    }
    for (size_t k = 0; k < x->nf; k++)
        x->rf[x->nrf++] = x->f[k];
    if (value)
        ref_derive(x);
    for (size_t k = 0; k < x->nrf; k++) {
        if (6 * x->rf[k].len + 1 > x->span)
            x->span = 6 * x->rf[k].len + 1;
    }
    return 0;
}

/*
 * The data with one spelling of each form inserted at a pseudo-random offset, each byte of the
 * form spelled a pseudo-random way. planted[] gets each spelling's [begin, end). Returns the
 * new stream (malloc) and its length in *outlen.
 */
static uint8_t *fuzz_plant(struct fuzz_in *x, const uint8_t *data, size_t len, size_t *outlen,
                           size_t *planted)
{
    struct spelling sp[FUZZ_SPELL_MAX];
    uint8_t *s = malloc(len + x->nrf * (x->span + 1) + 1);
    size_t o = 0, from = 0;
    uint64_t rng = x->plant | 1;

    if (s == NULL)
        abort();
    for (size_t k = 0; k < x->nrf; k++) {
        size_t at = from + (size_t)(fuzz_rng(&rng) % (len - from + 1));

        memcpy(s + o, data + from, at - from);
        o += at - from;
        from = at;
        planted[2 * k] = o;
        for (size_t i = 0; i < x->rf[k].len; i++) {
            size_t n = ref_spellings(x->rf[k].bytes[i], sp), w = (size_t)(fuzz_rng(&rng) % n);

            memcpy(s + o, sp[w].b, sp[w].len);
            o += sp[w].len;
        }
        planted[2 * k + 1] = o;
    }
    memcpy(s + o, data + from, len - from);
    *outlen = o + len - from;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_in x;
    struct evbuffer *dec = NULL;
    struct mask *m = NULL;
    const uint8_t *p = data + 1, *end = data + size;
    size_t planted[2 * FUZZ_FORMS], slen;
    uint8_t mode, *stream;

    if (size < 1)
        return 0;
    memset(&x, 0, sizeof(x));
    mode = data[0];
    x.seed = 0x9e3779b97f4a7c15u ^ (uint64_t)(mode >> 4) ^ ((uint64_t)size << 32);
    if (fuzz_forms(&x, mode, &p, end) != 0 || end - p < 4)
        return 0;
    x.plant = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
    p += 4;
    m = mask_new(x.f, x.nf);
    if (m == NULL)
        abort();
    if (mode & 4) {
        dec = check_decode(&x, mode & 8 ? MASK_CODING_DEFLATE : MASK_CODING_GZIP, p,
                           (size_t)(end - p));
        if (dec != NULL) {
            size_t n = evbuffer_get_length(dec);

            check_stream(&x, m, n > 0 ? evbuffer_pullup(dec, -1) : p, n, NULL, 0);
            evbuffer_free(dec);
        }
    } else {
        stream = fuzz_plant(&x, p, (size_t)(end - p), &slen, planted);
        check_stream(&x, m, stream, slen, planted, 2 * x.nrf);
        check_head(&x, m, stream, slen);
        free(stream);
    }
    mask_free(&m);
    return 0;
}
