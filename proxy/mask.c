/*
 * mask.c - reflection masking (SPEC §4): every occurrence of a secret's forms in a response is
 * replaced by '*' bytes of the same length before the response reaches the sandbox.
 *
 * Guarantees:
 * - Every occurrence of every form is masked, overlapping ones included, however the stream is
 *   cut into feeds; the output has exactly the length of the input.
 * - Only the longest suffix of the stream so far that is a proper prefix of some form is held
 *   back; every other byte is appended to the output in the feed that brought it (no delay for
 *   server-sent events whose tail cannot start a secret).
 * - Linear time: one KMP automaton per form (at most INJECT_MAX_FORMS) with its state carried
 *   across feeds; each input byte is copied a bounded number of times and starred at most once
 *   per form. No allocation per feed beyond evbuffer space.
 * - The forms, their failure tables and the held-back bytes live in memory that is wiped on
 *   free. Nothing here logs.
 * - gzip/deflate bodies are decoded with zlib, streaming, with the decoded size capped at
 *   VG_MASK_DECODE_MAX (common/caps.h).
 *
 * docs/internals/mask.md explains the algorithm and the hold-back rule.
 */
#define ZLIB_CONST
#include "proxy/mask.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <zlib.h>

#include "common/caps.h"
#include "common/secmem.h"

/* Largest piece of one feed copied into the output in one go (bounds contiguous reservations). */
#define MASK_SLICE (256 * 1024)

struct mask_form {
    unsigned char *bytes; /* secmem, len + 1 bytes */
    size_t len;
    uint32_t *fail; /* fail[q]: longest proper border of bytes[0..q), q in 0..len; wiped */
};

struct mask {
    struct mask_form f[INJECT_MAX_FORMS];
    size_t nforms;
    size_t maxlen;
    /* Streaming state: KMP state per form, and per form the stream offset up to which its
     * matches are already starred (matches of one form end in increasing order). */
    size_t q[INJECT_MAX_FORMS];
    uint64_t done[INJECT_MAX_FORMS];
    uint64_t matches;
    /* Held-back bytes: buf[start..end), the first of them at stream offset pos. */
    unsigned char *buf; /* 2 * maxlen bytes, wiped on free */
    size_t start, end;
    uint64_t pos;
    /* Distinct bytes the forms start with, for skipping while no form is partly matched. */
    unsigned char first[INJECT_MAX_FORMS];
    size_t nfirst;
};

_Static_assert(INJECT_MAX_FORMS == 3, "mask_scan's idle test reads three states");

/* Failure function of KMP: fail[q] = length of the longest proper border of p[0..q). */
static void mask_fail_build(const unsigned char *p, size_t len, uint32_t *fail)
{
    size_t k = 0;

    fail[0] = 0;
    if (len > 0)
        fail[1] = 0;
    for (size_t q = 1; q < len; q++) {
        while (k > 0 && p[q] != p[k])
            k = fail[k];
        if (p[q] == p[k])
            k++;
        fail[q + 1] = (uint32_t)k;
    }
}

static void mask_form_wipe(struct mask_form *f)
{
    secmem_free(&f->bytes, f->len + 1);
    secmem_free(&f->fail, (f->len + 1) * sizeof(*f->fail));
    f->len = 0;
}

struct mask *mask_new(const struct inject_form *forms, size_t nforms)
{
    struct mask *m = NULL, *ret = NULL;

    if (nforms > INJECT_MAX_FORMS || (nforms > 0 && forms == NULL))
        goto out;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        goto out;
    for (size_t i = 0; i < nforms; i++) {
        struct mask_form *f = &m->f[m->nforms];
        size_t len = forms[i].len;

        if (len == 0)
            continue; /* an empty form matches nothing worth masking */
        if (len > VG_MASK_FORM_MAX || forms[i].bytes == NULL)
            goto out;
        m->nforms++;
        f->bytes = (unsigned char *)secmem_dup(forms[i].bytes, len);
        if (f->bytes == NULL)
            goto out;
        f->len = len;
        f->fail = calloc(len + 1, sizeof(*f->fail));
        if (f->fail == NULL)
            goto out;
        mask_fail_build(f->bytes, len, f->fail);
        if (len > m->maxlen)
            m->maxlen = len;
        if (memchr(m->first, f->bytes[0], m->nfirst) == NULL)
            m->first[m->nfirst++] = f->bytes[0];
    }
    if (m->maxlen > 0) {
        m->buf = calloc(2, m->maxlen);
        if (m->buf == NULL)
            goto out;
    }
    ret = m;
    m = NULL;
out:
    mask_free(&m);
    return ret;
}

void mask_free(struct mask **mp)
{
    struct mask *m;

    if (mp == NULL || *mp == NULL)
        return;
    m = *mp;
    for (size_t i = 0; i < INJECT_MAX_FORMS; i++)
        mask_form_wipe(&m->f[i]);
    secmem_free(&m->buf, 2 * m->maxlen);
    secmem_free(mp, sizeof(*m));
}

uint64_t mask_count(const struct mask *m)
{
    return m->matches;
}

/*
 * Index of the first byte at or after i that some form starts with, or n. next[k] caches where
 * memchr last found first[k]; it is searched again only once i has passed it, so each byte of
 * p is searched at most once per distinct first byte. A stale 0 at the start only costs one
 * automaton step on a byte that starts nothing.
 */
static size_t mask_skip(const struct mask *m, const unsigned char *p, size_t i, size_t n,
                        size_t *next)
{
    size_t best = n;

    for (size_t k = 0; k < m->nfirst; k++) {
        if (next[k] < i) {
            const unsigned char *hit = memchr(p + i, m->first[k], n - i);

            next[k] = hit != NULL ? (size_t)(hit - p) : n;
        }
        if (next[k] < best)
            best = next[k];
    }
    return best;
}

/*
 * Runs the automata over p[from..n), where p[0] is at stream offset base, and stars every
 * match. States q[] and watermarks done[] are carried in and out. Every match lies inside
 * p[0..n): its first len - 1 bytes were a proper prefix of the form ending the stream, which
 * the caller held back. Returns the number of matches.
 */
static uint64_t mask_scan(const struct mask *m, size_t *q, uint64_t *done, unsigned char *p,
                          size_t from, size_t n, uint64_t base)
{
    size_t next[INJECT_MAX_FORMS] = {0};
    uint64_t hits = 0;
    size_t i = from;

    while (i < n) {
        unsigned char c;

        if ((q[0] | q[1] | q[2]) == 0) {
            i = mask_skip(m, p, i, n, next);
            if (i == n)
                break;
        }
        c = p[i]; /* read once: a match of one form may star p[i] before the next form */
        for (size_t k = 0; k < m->nforms; k++) {
            const struct mask_form *f = &m->f[k];
            size_t s = q[k];

            while (s > 0 && f->bytes[s] != c)
                s = f->fail[s];
            if (f->bytes[s] == c)
                s++;
            if (s == f->len) {
                uint64_t end = base + i + 1;
                uint64_t beg = end - f->len;

                if (beg < done[k])
                    beg = done[k];
                memset(p + (beg - base), '*', end - beg);
                done[k] = end;
                hits++;
                s = f->fail[s];
            }
            q[k] = s;
        }
        i++;
    }
    return hits;
}

/* Length of the longest suffix of the stream that is a proper prefix of some form. */
static size_t mask_hold_len(const struct mask *m)
{
    size_t h = 0;

    for (size_t k = 0; k < m->nforms; k++)
        if (m->q[k] > h)
            h = m->q[k];
    return h;
}

/* Small feed (len < maxlen): append to the held-back bytes, scan in place, emit the front. */
static int mask_feed_small(struct mask *m, const char *data, size_t len, struct evbuffer *out)
{
    size_t held = m->end - m->start, keep, emit;

    if (m->end + len > 2 * m->maxlen) {
        /* Compaction costs at most maxlen bytes, paid for by the > maxlen bytes appended
         * since the previous one. */
        memmove(m->buf, m->buf + m->start, held);
        m->start = 0;
        m->end = held;
    }
    memcpy(m->buf + m->end, data, len);
    m->matches += mask_scan(m, m->q, m->done, m->buf + m->start, held, held + len, m->pos);
    m->end += len;
    keep = mask_hold_len(m);
    emit = m->end - m->start - keep;
    if (emit > 0 && evbuffer_add(out, m->buf + m->start, emit) != 0)
        return -1;
    m->start += emit;
    m->pos += emit;
    return 0;
}

/* Large feed: build held-back bytes + data in the output's own space, scan, commit the front. */
static int mask_feed_large(struct mask *m, const char *data, size_t len, struct evbuffer *out)
{
    size_t held = m->end - m->start, total = held + len, keep, emit;
    struct evbuffer_iovec v;
    unsigned char *p;

    if (evbuffer_reserve_space(out, (ev_ssize_t)total, &v, 1) != 1 || v.iov_len < total)
        return -1;
    p = v.iov_base;
    memcpy(p, m->buf + m->start, held);
    memcpy(p + held, data, len);
    m->matches += mask_scan(m, m->q, m->done, p, held, total, m->pos);
    keep = mask_hold_len(m);
    emit = total - keep;
    memcpy(m->buf, p + emit, keep);
    OPENSSL_cleanse(p + emit, keep);
    m->start = 0;
    m->end = keep;
    m->pos += emit;
    if (emit == 0)
        return 0;
    v.iov_len = emit;
    return evbuffer_commit_space(out, &v, 1) == 0 ? 0 : -1;
}

int mask_feed(struct mask *m, const char *data, size_t len, struct evbuffer *out)
{
    if (m->maxlen == 0)
        return len == 0 ? 0 : evbuffer_add(out, data, len);
    while (len > 0) {
        size_t n = len < MASK_SLICE ? len : MASK_SLICE;
        int rc =
            n < m->maxlen ? mask_feed_small(m, data, n, out) : mask_feed_large(m, data, n, out);

        if (rc != 0)
            return -1;
        data += n;
        len -= n;
    }
    return 0;
}

int mask_finish(struct mask *m, struct evbuffer *out)
{
    size_t held = m->end - m->start;

    if (held > 0 && evbuffer_add(out, m->buf + m->start, held) != 0)
        return -1;
    if (m->buf != NULL)
        OPENSSL_cleanse(m->buf, 2 * m->maxlen);
    m->start = m->end = 0;
    m->pos = 0;
    memset(m->q, 0, sizeof(m->q));
    memset(m->done, 0, sizeof(m->done));
    return 0;
}

/* Masks one string in place, independently of any stream. Returns the number of matches. */
static size_t mask_string(const struct mask *m, char *s, size_t len)
{
    size_t q[INJECT_MAX_FORMS] = {0};
    uint64_t done[INJECT_MAX_FORMS] = {0};

    if (s == NULL || len == 0 || m->nforms == 0)
        return 0;
    return (size_t)mask_scan(m, q, done, (unsigned char *)s, 0, len, 0);
}

size_t mask_head(const struct mask *m, struct http_head *h)
{
    size_t n = 0;

    if (h->reason != NULL)
        n += mask_string(m, (char *)h->reason, strlen(h->reason));
    for (size_t i = 0; i < h->nfields; i++) {
        struct http_field *f = &h->fields[i];

        n += mask_string(m, (char *)f->name, f->name_len);
        n += mask_string(m, (char *)f->value, f->value_len);
    }
    return n;
}

enum mask_coding mask_coding_parse(const char *value)
{
    static const struct {
        const char *name;
        enum mask_coding coding;
    } table[] = {
        {"identity", MASK_CODING_IDENTITY},
        {"gzip", MASK_CODING_GZIP},
        {"x-gzip", MASK_CODING_GZIP},
        {"deflate", MASK_CODING_DEFLATE},
    };
    size_t len;

    if (value == NULL)
        return MASK_CODING_IDENTITY;
    while (*value == ' ' || *value == '\t')
        value++;
    len = strlen(value);
    while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
        len--;
    if (len == 0)
        return MASK_CODING_IDENTITY;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strlen(table[i].name) == len && strncasecmp(value, table[i].name, len) == 0)
            return table[i].coding;
    }
    return MASK_CODING_UNSUPPORTED;
}

/* ---- decoder ---- */

#define MASK_DEC_CHUNK (16 * 1024)

struct mask_decoder {
    z_stream z;
    enum mask_coding coding;
    size_t max_out;
    size_t total_out;
    unsigned char hdr[2]; /* deflate: the first two bytes, until the wrapper is known */
    size_t hdr_len, hdr_used;
    bool probed; /* deflate: zlib wrapper or raw decided */
    bool seen;   /* some input arrived */
    bool ended;  /* the current stream (gzip member) reached its end */
    bool failed; /* sticky */
};

struct mask_decoder *mask_decoder_new_capped(enum mask_coding coding, size_t max_out)
{
    struct mask_decoder *d = NULL;
    int wbits;

    if (coding == MASK_CODING_GZIP)
        wbits = 16 + MAX_WBITS;
    else if (coding == MASK_CODING_DEFLATE)
        wbits = MAX_WBITS;
    else
        return NULL;
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return NULL;
    if (inflateInit2(&d->z, wbits) != Z_OK) {
        free(d);
        return NULL;
    }
    d->coding = coding;
    d->max_out = max_out < VG_MASK_DECODE_MAX ? max_out : VG_MASK_DECODE_MAX;
    d->probed = coding != MASK_CODING_DEFLATE;
    return d;
}

struct mask_decoder *mask_decoder_new(enum mask_coding coding)
{
    return mask_decoder_new_capped(coding, VG_MASK_DECODE_MAX);
}

void mask_decoder_free(struct mask_decoder **dp)
{
    if (dp == NULL || *dp == NULL)
        return;
    inflateEnd(&(*dp)->z);
    free(*dp);
    *dp = NULL;
}

/*
 * One inflate step into fresh output space of at most *budget bytes (which it decrements).
 * 1 = call again, 0 = input used up and output flushed, -1 = error.
 */
static int mask_dec_step(struct mask_decoder *d, struct evbuffer *out, size_t *budget)
{
    size_t room = d->max_out - d->total_out + 1; /* one byte more detects passing the cap */
    struct evbuffer_iovec v;
    size_t got;
    int rc;

    if (d->ended) {
        if (d->z.avail_in == 0)
            return 0;
        if (d->coding != MASK_CODING_GZIP || inflateReset(&d->z) != Z_OK)
            return -1;    /* data after the end of a zlib/raw stream */
        d->ended = false; /* another gzip member */
    }
    if (room > MASK_DEC_CHUNK)
        room = MASK_DEC_CHUNK;
    if (room > *budget)
        room = *budget;
    if (evbuffer_reserve_space(out, (ev_ssize_t)room, &v, 1) != 1 || v.iov_len < room)
        return -1;
    d->z.next_out = v.iov_base;
    d->z.avail_out = (uInt)room;
    rc = inflate(&d->z, Z_NO_FLUSH);
    got = room - d->z.avail_out;
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        return -1; /* Z_DATA_ERROR, Z_NEED_DICT, Z_MEM_ERROR, Z_STREAM_ERROR */
    if (got > d->max_out - d->total_out)
        return -1;
    d->total_out += got;
    *budget -= got;
    v.iov_len = got;
    if (got > 0 && evbuffer_commit_space(out, &v, 1) != 0)
        return -1;
    if (rc == Z_STREAM_END) {
        d->ended = true;
        return 1;
    }
    if (rc == Z_BUF_ERROR || (d->z.avail_out > 0 && d->z.avail_in == 0))
        return 0; /* no progress possible, or everything consumed and flushed */
    return 1;
}

/*
 * Inflates in[0..len) until it is used up or *budget output bytes were produced; *used says how
 * many input bytes zlib took. 1 = stopped by the budget (output may be pending), 0 = done,
 * -1 = error.
 */
static int mask_dec_run(struct mask_decoder *d, const unsigned char *in, size_t len,
                        struct evbuffer *out, size_t *budget, size_t *used)
{
    size_t left = len;
    int rc;

    d->z.avail_in = 0;
    for (;;) {
        if (d->z.avail_in == 0 && left > 0) {
            uInt n = left > (1u << 30) ? (1u << 30) : (uInt)left;

            d->z.next_in = in + (len - left);
            d->z.avail_in = n;
            left -= n;
        }
        if (*budget == 0) {
            rc = 1;
            break;
        }
        rc = mask_dec_step(d, out, budget);
        if (rc == 0 && d->z.avail_in != 0)
            rc = -1; /* no progress with input left: cannot happen with output room */
        if (rc != 1 && !(rc == 0 && left > 0))
            break;
    }
    *used = len - left - d->z.avail_in;
    d->z.avail_in = 0;
    return rc;
}

/*
 * deflate: servers send zlib-wrapped (RFC 1950) or raw (RFC 1951) data. The two header bytes
 * decide: if they pass zlib's own header checks the stream is zlib-wrapped, otherwise zlib
 * would fail with a header error, and the stream is inflated raw from its first byte. Takes up
 * to two bytes from *data into hdr; they are inflated by the caller like any other input.
 */
static int mask_dec_probe(struct mask_decoder *d, const char **data, size_t *len)
{
    size_t take = 2 - d->hdr_len;
    unsigned int h;

    if (take > *len)
        take = *len;
    memcpy(d->hdr + d->hdr_len, *data, take);
    d->hdr_len += take;
    *data += take;
    *len -= take;
    if (d->hdr_len < 2)
        return 0;
    h = (unsigned int)d->hdr[0] << 8 | d->hdr[1];
    if (h % 31 != 0 || (d->hdr[0] & 0x0f) != Z_DEFLATED || (d->hdr[0] >> 4) + 8 > MAX_WBITS) {
        if (inflateReset2(&d->z, -MAX_WBITS) != Z_OK)
            return -1;
    }
    d->probed = true;
    return 0;
}

int mask_decoder_feed_some(struct mask_decoder *d, const char *data, size_t len,
                           struct evbuffer *out, size_t out_max, size_t *consumed)
{
    size_t left = len, used = 0, budget = out_max;
    int rc = 0;

    if (d->failed)
        return -1;
    if (len > 0)
        d->seen = true;
    if (!d->probed && mask_dec_probe(d, &data, &left) != 0)
        goto fail;
    if (d->probed && d->hdr_used < d->hdr_len) {
        rc = mask_dec_run(d, d->hdr + d->hdr_used, d->hdr_len - d->hdr_used, out, &budget, &used);
        if (rc < 0)
            goto fail;
        d->hdr_used += used;
        used = 0;
    }
    if (rc == 0 && d->probed &&
        (rc = mask_dec_run(d, (const unsigned char *)data, left, out, &budget, &used)) < 0)
        goto fail;
    *consumed = len - left + used;
    return rc;
fail:
    d->failed = true;
    return -1;
}

int mask_decoder_feed(struct mask_decoder *d, const char *data, size_t len, struct evbuffer *out)
{
    size_t consumed;

    return mask_decoder_feed_some(d, data, len, out, SIZE_MAX, &consumed) == 0 ? 0 : -1;
}

int mask_decoder_finish(struct mask_decoder *d, struct evbuffer *out)
{
    (void)out;
    if (d->failed)
        return -1;
    /* No body at all is a clean end; anything else must have reached the end of a stream. */
    return !d->seen || d->ended ? 0 : -1;
}
