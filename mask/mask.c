/*
 * mask.c - reflection masking (SPEC §4): every occurrence of a secret's forms in a response, in
 * any spelling, is replaced by '*' bytes of the same length before the response reaches the
 * sandbox.
 *
 * Guarantees:
 * - Every spelling of every form (mask_spell.h: each byte raw, `%hh`, `+` for a space,
 *   `\u00hh`, `\/`, `\\`, `\"`, mixed freely) is masked over all of its bytes, overlapping ones
 *   included, however the stream is cut into feeds; the output has exactly the length of the
 *   input, and no byte outside a spelling changes. The forms are those given and a value's
 *   base64 forms (mask_new).
 * - A binary header field (`-bin`) that decodes as base64 comes back with the same length and
 *   padding, '*' bytes encoded where a spelling was.
 * - Only bytes from the earliest one that begins a partial spelling (one that can still be
 *   completed) are held back; every other byte is appended to the output in the feed that
 *   brought it (no delay for server-sent events whose tail cannot begin a spelling).
 * - Linear time for the main reading of each form (one KMP automaton with escapes decoded);
 *   readings off it are followed as threads, usually none (docs/internals/mask.md has the
 *   bounds). No allocation per feed beyond evbuffer space, except when threads first need room.
 * - The forms' tables, the matchers' state and the held-back bytes live in memory that is wiped
 *   on free. Nothing here logs.
 * - gzip/deflate bodies are decoded with zlib, streaming, with the decoded size capped at
 *   VG_MASK_DECODE_MAX (common/caps.h).
 *
 * docs/internals/mask.md explains the algorithm and the hold-back rule.
 */
#define ZLIB_CONST
#include "mask/mask.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <zlib.h>

#include "common/caps.h"
#include "common/secmem.h"
#include "mask/mask_spell.h"

/* Largest piece of one feed copied into the output in one go (bounds contiguous reservations). */
#define MASK_SLICE (256 * 1024)

/* Header strings up to this length are copied on the stack for mask_head. */
#define MASK_HEAD_STACK 256

/* Derived base64 forms shorter than this are not looked for (docs/internals/mask.md). */
#define MASK_B64_MIN 4

/* A value's base64 forms: three alignments in two alphabets. */
#define MASK_B64_FORMS 6

/* The shared filter is left for the rest of a feed once it has stopped more than once per this
 * many bytes (and more than this many times). */
#define MASK_SHARED_RATE 16

/* The forms' matchers and their shared filter: immutable once made, shared by the maskers made
 * from them (mask_new_from), freed with the last reference. */
struct mask_set {
    struct mask_spell **spell; /* cap each: every form given, and each value's base64 forms */
    size_t nforms, cap;
    struct mask_filter *filter; /* several forms: where any can begin (AVX2), or NULL */
    size_t maxhold;             /* the most bytes any form can hold back */
    unsigned long refs;
};

struct mask {
    struct mask_set *set;
    struct mask_spell *const *spell; /* set->spell */
    struct mask_spell_run **run;     /* nforms, then mask_head's nforms (hrun) */
    struct mask_spell_run **hrun;    /* mask_head's, made at its first call and kept, reset */
    size_t *done;                    /* mask_scan_shared's scratch */
    size_t *touched;        /* the forms whose run read bytes since the last mask_finish ... */
    unsigned char *is_used; /* ... and, per form, whether it is among them */
    size_t ntouched;
    bool head_scanned; /* mask_head's runs read a string (they are reset at its end) */
    size_t nforms;
    const struct mask_filter *filter; /* set->filter */
    size_t maxhold;                   /* set->maxhold */
    size_t size;                      /* of this block: the struct, run, done and buf */
    uint64_t matches;
    /* Held-back bytes: buf[start..end), the first of them at stream offset pos. */
    unsigned char *buf; /* 2 * maxhold bytes, wiped on free */
    size_t start, end;
    size_t dirty; /* buf[0..dirty) held bytes since the last wipe (mask_finish wipes only it) */
    uint64_t pos;
};

static const char mask_b64_std[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char mask_b64_url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/*
 * The base64 characters that depend on v[0..n) alone when v follows r foreign bytes of its
 * 3-byte group (r = 0, 1, 2) inside a longer base64 text: the characters that mix foreign bits
 * at either end are left out. Writes them to out (room for (8n + 16) / 6 bytes); returns how many.
 */
static size_t mask_b64_derive(const unsigned char *v, size_t n, unsigned int r, const char *alpha,
                              unsigned char *out)
{
    size_t j0 = (8 * (size_t)r + 5) / 6, j1 = (8 * (size_t)r + 8 * n) / 6, o = 0;

    for (size_t j = j0; j < j1; j++) {
        size_t bit = 6 * j - 8 * (size_t)r, at = bit / 8;
        unsigned int w = (unsigned int)v[at] << 8 | (at + 1 < n ? v[at + 1] : 0u);

        out[o++] = (unsigned char)alpha[(w >> (10 - bit % 8)) & 63];
    }
    return o;
}

/* Adds a matcher for form[0..len). 0 or -1. */
static int mask_add(struct mask_set *m, const unsigned char *form, size_t len)
{
    size_t k = m->nforms;

    if (len > VG_MASK_FORM_MAX || k == m->cap)
        return -1;
    m->nforms++;
    if ((m->spell[k] = mask_spell_new(form, len)) == NULL)
        return -1;
    if (mask_spell_max_hold(m->spell[k]) > m->maxhold)
        m->maxhold = mask_spell_max_hold(m->spell[k]);
    return 0;
}

/* Adds the base64 forms of the value v[0..n): each alignment in both alphabets, those shorter
 * than MASK_B64_MIN left out, each distinct form once. 0 or -1. */
static int mask_add_b64(struct mask_set *m, const unsigned char *v, size_t n)
{
    size_t cap = (8 * n + 16) / 6 + 1, len;
    unsigned char *d = malloc(cap);
    int rc = d == NULL ? -1 : 0;

    for (unsigned int i = 0; i < MASK_B64_FORMS && rc == 0; i++) {
        bool dup = false;

        len = mask_b64_derive(v, n, i / 2, i % 2 ? mask_b64_url : mask_b64_std, d);
        if (len < MASK_B64_MIN)
            continue;
        for (size_t k = 0; k < m->nforms && !dup; k++)
            dup = mask_spell_is(m->spell[k], d, len);
        if (!dup)
            rc = mask_add(m, d, len);
    }
    secmem_free(&d, cap);
    return rc;
}

struct mask_set *mask_set_new(const struct inject_form *forms, size_t nforms)
{
    struct mask_set *m = NULL, *ret = NULL;

    if (nforms > VG_MASK_FORMS_MAX || (nforms > 0 && forms == NULL))
        goto out;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        goto out;
    m->refs = 1;
    m->cap = nforms * (1 + MASK_B64_FORMS);
    if (m->cap > 0 && (m->spell = calloc(m->cap, sizeof(*m->spell))) == NULL)
        goto out;
    for (size_t i = 0; i < nforms; i++) {
        size_t len = forms[i].len;

        if (len == 0)
            continue; /* an empty form matches nothing worth masking */
        if (forms[i].bytes == NULL || mask_add(m, forms[i].bytes, len) != 0)
            goto out;
    }
    /* after every given form, so that a base64 form equal to one of them is not added twice */
    for (size_t i = 0; i < nforms; i++) {
        if ((forms[i].flags & INJECT_FORM_VALUE) && forms[i].len > 0 &&
            mask_add_b64(m, forms[i].bytes, forms[i].len) != 0)
            goto out;
    }
    if (m->nforms > 1 && mask_filter_usable() &&
        (m->filter = mask_filter_new(m->spell, m->nforms)) == NULL)
        goto out;
    ret = m;
    m = NULL;
out:
    mask_set_free(&m);
    return ret;
}

void mask_set_free(struct mask_set **sp)
{
    struct mask_set *m;

    if (sp == NULL || *sp == NULL)
        return;
    m = *sp;
    *sp = NULL;
    if (--m->refs > 0)
        return;
    for (size_t i = 0; i < m->nforms; i++)
        mask_spell_free(&m->spell[i]);
    free(m->spell);
    mask_filter_free(&m->filter);
    secmem_free(&m, sizeof(*m));
}

/* One block: the struct, the matcher pointers (nforms, then mask_head's), the shared driver's
 * scratch, the list of touched forms and their flags, each form's run (mask_spell_run_init),
 * the held-back buffer. */
struct mask *mask_new_from(struct mask_set *set)
{
    size_t n = set->nforms, runs = 2 * n * sizeof(struct mask_spell_run *);
    size_t flags = (n + 7) & ~(size_t)7;
    size_t at = sizeof(struct mask) + runs + 2 * n * sizeof(size_t) + flags, size = at;
    struct mask *m;
    unsigned char *p;

    for (size_t k = 0; k < n; k++)
        size += mask_spell_run_size(set->spell[k]);
    size += 2 * set->maxhold;
    if ((m = calloc(1, size)) == NULL)
        return NULL;
    p = (unsigned char *)m;
    set->refs++;
    m->set = set;
    m->spell = set->spell;
    m->nforms = n;
    m->filter = set->filter;
    m->maxhold = set->maxhold;
    m->size = size;
    m->run = (struct mask_spell_run **)(void *)(p + sizeof(*m));
    m->hrun = m->run + n;
    m->done = (size_t *)(void *)(p + sizeof(*m) + runs);
    m->touched = m->done + n;
    m->is_used = (unsigned char *)(m->touched + n);
    for (size_t k = 0; k < n; k++) {
        m->run[k] = mask_spell_run_init(p + at, set->spell[k]);
        at += mask_spell_run_size(set->spell[k]);
    }
    m->buf = set->maxhold > 0 ? p + at : NULL;
    return m;
}

struct mask *mask_new(const struct inject_form *forms, size_t nforms)
{
    struct mask_set *set = mask_set_new(forms, nforms);
    struct mask *m = set != NULL ? mask_new_from(set) : NULL;

    mask_set_free(&set);
    return m;
}

size_t mask_mem(const struct mask *m)
{
    size_t n = m->size;

    for (size_t k = 0; k < m->nforms; k++) {
        if (m->hrun[k] != NULL)
            n += mask_spell_run_size(m->spell[k]);
    }
    return n;
}

void mask_free(struct mask **mp)
{
    struct mask *m;

    if (mp == NULL || *mp == NULL)
        return;
    m = *mp;
    for (size_t i = 0; i < m->nforms; i++) {
        mask_spell_run_fini(m->run[i]); /* in the block */
        mask_spell_run_free(&m->hrun[i]);
    }
    mask_set_free(&m->set);
    secmem_free(mp, m->size);
}

uint64_t mask_count(const struct mask *m)
{
    return m->matches;
}

/* Form k's run is about to read bytes: it joins the touched ones (the others are as reset: idle,
 * holding nothing, nothing to wipe). */
static void mask_touch(struct mask *m, size_t k)
{
    if (!m->is_used[k]) {
        m->is_used[k] = 1;
        m->touched[m->ntouched++] = k;
    }
}

/* Form k reads src[from..) until it holds no partial spelling (or src ends); *done is where it
 * stopped. 0 or -1. */
static int mask_run_form(struct mask *m, size_t k, const unsigned char *src, size_t len,
                         size_t from, uint64_t at, unsigned char *dst, size_t *done)
{
    size_t used;

    mask_touch(m, k);
    if (mask_spell_scan_some(m->spell[k], m->run[k], src + from, len - from, at + from, dst, m->pos,
                             &m->matches, &used) != 0)
        return -1;
    *done = from + used;
    return 0;
}

/*
 * The forms over src[0..len) with the shared filter. A form that holds a partial spelling reads
 * on until it holds none; an idle form reads nothing until a position where a spelling of it
 * can begin, found by the filter for all forms at once, and from there on until it is idle
 * again. Each form so reads every byte it needs, in order, and passes the others as its own
 * fast path would. Where the filter stops more often than once per MASK_SHARED_RATE bytes (a
 * body of the secret's first bytes, of '%' or '\'), each form reads the rest on its own. 0 or
 * -1.
 */
static int mask_scan_shared(struct mask *m, const unsigned char *src, size_t len, uint64_t at,
                            unsigned char *dst)
{
    size_t *done = m->done, i = 0, stops = 0;

    memset(done, 0, m->nforms * sizeof(*done));
    for (size_t t = 0; t < m->ntouched; t++) {
        size_t k = m->touched[t]; /* only a touched form can hold a partial spelling */

        if (!mask_spell_idle(m->run[k]) && mask_run_form(m, k, src, len, 0, at, dst, &done[k]) != 0)
            return -1;
    }
    while ((i = mask_filter_skip(m->filter, src, i, len)) < len) {
        if (++stops > MASK_SHARED_RATE && stops > i / MASK_SHARED_RATE)
            break;
        for (size_t k = 0; k < m->nforms; k++) {
            if (done[k] <= i && mask_spell_can_begin(m->spell[k], src, i, len) &&
                mask_run_form(m, k, src, len, i, at, dst, &done[k]) != 0)
                return -1;
        }
        i++;
    }
    for (size_t k = 0; k < m->nforms && i < len; k++) {
        /* a form behind i is idle, and the filter passed nothing before i that it needs */
        size_t from = done[k] > i ? done[k] : i;

        mask_touch(m, k);
        if (mask_spell_scan(m->spell[k], m->run[k], src + from, len - from, at + from, dst, m->pos,
                            &m->matches) != 0)
            return -1;
    }
    return 0;
}

/*
 * Runs every form over src[0..len), the last len of the `total` bytes at dst (dst[0] at stream
 * offset m->pos), starring into dst. Each form reads src, which no form writes, so one form's
 * stars never hide bytes from another. Sets *keep to the bytes at the end of dst that may
 * still be part of a spelling. 0 or -1 (out of memory).
 */
static int mask_scan(struct mask *m, const unsigned char *src, size_t len, unsigned char *dst,
                     size_t total, size_t *keep)
{
    uint64_t at = m->pos + (total - len), from = m->pos + total;

    if (m->filter != NULL && mask_scan_shared(m, src, len, at, dst) != 0)
        return -1;
    for (size_t k = 0; m->filter == NULL && k < m->nforms; k++) {
        mask_touch(m, k);
        if (mask_spell_scan(m->spell[k], m->run[k], src, len, at, dst, m->pos, &m->matches) != 0)
            return -1;
    }
    for (size_t t = 0; t < m->ntouched; t++) {
        /* an untouched form holds nothing back */
        uint64_t h = mask_spell_hold(m->run[m->touched[t]]);

        if (h < from)
            from = h;
    }
    *keep = (size_t)(m->pos + total - from);
    return 0;
}

/* Small feed (len < maxhold): append to the held-back bytes, scan in place, emit the front. */
static int mask_feed_small(struct mask *m, const char *data, size_t len, struct evbuffer *out)
{
    size_t held = m->end - m->start, keep, emit;

    if (m->end + len > 2 * m->maxhold) {
        /* Compaction costs at most maxhold bytes, paid for by the > maxhold bytes appended
         * since the previous one. */
        memmove(m->buf, m->buf + m->start, held);
        m->start = 0;
        m->end = held;
    }
    memcpy(m->buf + m->end, data, len);
    m->end += len;
    if (m->end > m->dirty)
        m->dirty = m->end;
    if (mask_scan(m, (const unsigned char *)data, len, m->buf + m->start, held + len, &keep) != 0)
        return -1;
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
    if (mask_scan(m, (const unsigned char *)data, len, p, total, &keep) != 0) {
        OPENSSL_cleanse(p, total);
        return -1;
    }
    emit = total - keep;
    memcpy(m->buf, p + emit, keep);
    if (keep > m->dirty)
        m->dirty = keep;
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
    if (m->maxhold == 0)
        return len == 0 ? 0 : evbuffer_add(out, data, len);
    while (len > 0) {
        size_t n = len < MASK_SLICE ? len : MASK_SLICE;
        int rc =
            n < m->maxhold ? mask_feed_small(m, data, n, out) : mask_feed_large(m, data, n, out);

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
    if (m->buf != NULL && m->dirty > 0)
        OPENSSL_cleanse(m->buf, m->dirty);
    m->dirty = 0;
    m->start = m->end = 0;
    m->pos = 0;
    for (size_t t = 0; t < m->ntouched; t++) {
        mask_spell_run_reset(m->run[m->touched[t]]);
        m->is_used[m->touched[t]] = 0;
    }
    m->ntouched = 0;
    return 0;
}

/*
 * Masks one string in place, as a stream of its own, with the scratch runs given. Every form
 * reads a copy of the string, unless the shared filter finds no position in it where a spelling
 * of any form can begin (most fields of a head: then nothing is copied, reset or scanned). When
 * memory runs out the whole string is starred: it might hold a secret. Returns the number of
 * spellings' ends.
 */
static size_t mask_string(struct mask *m, struct mask_spell_run **runs, char *s, size_t len)
{
    unsigned char stack[MASK_HEAD_STACK], *copy = stack;
    uint64_t hits = 0;
    int rc = 0;

    if (s == NULL || len == 0 || m->nforms == 0)
        return 0;
    if (m->filter != NULL && mask_filter_skip(m->filter, (const unsigned char *)s, 0, len) == len)
        return 0;
    m->head_scanned = true;
    if (len > sizeof(stack))
        copy = malloc(len);
    if (copy != NULL)
        memcpy(copy, s, len);
    for (size_t k = 0; k < m->nforms && copy != NULL && rc == 0; k++) {
        if (runs[k] == NULL) {
            rc = -1;
            break;
        }
        mask_spell_run_reset(runs[k]);
        rc = mask_spell_scan(m->spell[k], runs[k], copy, len, 0, (unsigned char *)s, 0, &hits);
    }
    if (copy == NULL || rc != 0) {
        memset(s, '*', len);
        hits = 1;
    }
    if (copy != NULL)
        OPENSSL_cleanse(copy, len);
    if (copy != stack)
        free(copy);
    return (size_t)hits;
}

static int mask_b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/*
 * Standard base64 with optional padding, as gRPC reads binary metadata: s[0..len) decoded into
 * out (room for len * 3 / 4 bytes). Returns the number of bytes, or -1 when s is not base64.
 * *chars is the number of base64 characters (padding excluded).
 */
static long mask_b64_decode(const char *s, size_t len, unsigned char *out, size_t *chars)
{
    size_t n = len, o = 0;
    unsigned int acc = 0, bits = 0;

    if (n % 4 == 0 && n > 0 && s[n - 1] == '=') {
        n--;
        if (s[n - 1] == '=')
            n--;
    }
    if (n % 4 == 1)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int v = mask_b64_value((unsigned char)s[i]);

        if (v < 0)
            return -1;
        acc = (acc << 6 | (unsigned int)v) & 0xfff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    *chars = n;
    return (long)o;
}

/*
 * Writes bytes b[0..nb) back over the `chars` base64 characters at s they were decoded from.
 * The bits of the last character that belong to no byte (zero in canonical base64) are kept as
 * received, and so is the padding: only characters whose bytes changed change.
 */
static void mask_b64_encode(const unsigned char *b, size_t nb, char *s, size_t chars)
{
    for (size_t j = 0; j < chars; j++) {
        size_t bit = 6 * j, at = bit / 8;
        unsigned int w = (unsigned int)b[at] << 8 | (at + 1 < nb ? b[at + 1] : 0u);
        unsigned int v = (w >> (10 - bit % 8)) & 63;

        if (6 * j + 6 > 8 * nb) /* the last character: keep its bits beyond the last byte */
            v |= (unsigned int)mask_b64_value((unsigned char)s[j]) &
                 ((1u << (6 * j + 6 - 8 * nb)) - 1);
        s[j] = mask_b64_std[v];
    }
}

/* A binary metadata field (gRPC): its name ends in "-bin", in any case. */
static bool mask_name_bin(const char *name, size_t len)
{
    return name != NULL && len >= 4 && strncasecmp(name + len - 4, "-bin", 4) == 0;
}

/*
 * A binary field's value: decoded (standard base64, padding optional), the bytes masked like
 * any string, and encoded again in place (same length and padding) when a spelling was found,
 * so that the client decodes '*' bytes where the secret was. Then - and for a value that does
 * not decode - the text is masked as a string, which covers a value's base64 forms. Should
 * memory run out, the value is starred whole.
 */
static size_t mask_bin(struct mask *m, struct mask_spell_run **runs, char *s, size_t len)
{
    unsigned char stack[MASK_HEAD_STACK], *b = stack;
    size_t cap = len / 4 * 3 + 3, chars = 0, n = 0;
    long nb;

    if (s == NULL || len == 0 || m->nforms == 0)
        return 0;
    if (cap > sizeof(stack) && (b = malloc(cap)) == NULL) {
        memset(s, '*', len);
        return 1;
    }
    nb = mask_b64_decode(s, len, b, &chars);
    if (nb > 0) {
        n = mask_string(m, runs, (char *)b, (size_t)nb);
        if (n > 0)
            mask_b64_encode(b, (size_t)nb, s, chars);
    }
    OPENSSL_cleanse(b, cap);
    if (b != stack)
        free(b);
    return n + mask_string(m, runs, s, len);
}

size_t mask_head(struct mask *m, struct http_head *h)
{
    struct mask_spell_run **runs = m->hrun;
    size_t n = 0;

    /* matchers of its own, made at the first head and kept with the masker (which the worker
     * keeps for the next response), so later heads allocate nothing; one that cannot be made
     * stays NULL and mask_string stars the strings */
    for (size_t k = 0; k < m->nforms; k++) {
        if (runs[k] == NULL)
            runs[k] = mask_spell_run_new(m->spell[k]);
    }
    if (h->reason != NULL)
        n += mask_string(m, runs, (char *)h->reason, strlen(h->reason));
    for (size_t i = 0; i < h->nfields; i++) {
        struct http_field *f = &h->fields[i];
        bool bin = mask_name_bin(f->name, f->name_len);

        n += mask_string(m, runs, (char *)f->name, f->name_len);
        if (bin)
            n += mask_bin(m, runs, (char *)f->value, f->value_len);
        else
            n += mask_string(m, runs, (char *)f->value, f->value_len);
    }
    /* what the last string left in the matchers is wiped now, not when the masker goes */
    for (size_t k = 0; k < m->nforms && m->head_scanned; k++) {
        if (runs[k] != NULL)
            mask_spell_run_reset(runs[k]);
    }
    m->head_scanned = false;
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
