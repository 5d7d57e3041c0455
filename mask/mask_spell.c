/*
 * mask_spell.c - the spelling matcher of reflection masking (SPEC §4; see mask_spell.h).
 *
 * A spelling of a form P writes each byte P[k] as one of: the raw byte; `%hh` (hex digits of
 * either case); `+` when P[k] is a space; `\u00hh` when P[k] is ASCII; `\/`, `\\`, `\"` for
 * `/`, `\`, `"`. The choice is free at every byte, so one form has a great many spellings; the
 * matcher follows them all at once instead of listing them.
 *
 * Guarantees:
 * - Every spelling that ends in a scanned byte is found and all of its bytes starred (the
 *   union of all spellings, overlapping ones included), however the stream is cut into scans;
 *   no other byte is written.
 * - mask_spell_hold() is exact: the earliest byte of a partial spelling that can still be
 *   completed, and nothing earlier.
 * - Cost: the main reading (escapes decoded) is one KMP automaton, O(1) amortised per byte,
 *   periodic forms included. Partial spellings that leave it - the raw reading of an escape's
 *   first byte when the form holds it and the escape goes on, '+' read as a space as well,
 *   spellings that begin inside an escape - are threads, one step each per byte, at most 8
 *   per byte of the form after merging and usually none. While nothing is partly matched, a
 *   two-byte filter passes over positions where no spelling can begin, 16 or 32 at a time
 *   (mask_filter.c).
 * - Tables (they reveal the form) and partial-spelling state are wiped on free. Nothing logs.
 *
 * docs/internals/mask.md explains the main reading, the threads and the bounds.
 */
#include "mask/mask_spell.h"
#include "mask/mask_spell_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "common/caps.h"
#include "common/pct.h"
#include "common/secmem.h"

#define MS_NONE 0xffffu
_Static_assert(VG_MASK_FORM_MAX < MS_NONE, "form positions fit in uint16_t");

/* Where a reading stands inside the spelling of one byte of the form. */
enum ms_sub {
    MS_BOUND = 0, /* between two bytes of the form */
    MS_PCT1,      /* read '%' */
    MS_PCT2,      /* read '%' and the high hex digit */
    MS_BS1,       /* read '\' */
    MS_U1,        /* read '\u' */
    MS_U2,        /* read '\u0' */
    MS_U3,        /* read '\u00' */
    MS_U4,        /* read '\u00' and the high hex digit */
};

/* A partial spelling off the main reading. */
struct ms_thread {
    uint64_t s;   /* offset of its first byte */
    uint32_t tag; /* the main reading's escape it began in (see ms_main_undo), or 0 */
    uint16_t k;   /* bytes of the form spelled */
    uint16_t sub; /* enum ms_sub */
};

struct ms_threads {
    struct ms_thread *t; /* wiped on free */
    size_t n, cap;
};

struct mask_spell_run {
    /* The main reading: escapes decoded, '+' as s->plus, KMP over the form. Its partial
     * spellings are chain(a) (a and its borders); ring[] holds the offsets of its last n + 1
     * boundaries, so the one k bytes of the form back is ring_at(k). */
    uint32_t a;
    uint8_t sub, hi; /* inside an escape: how far, and its high hex digit */
    uint64_t head;   /* offset of the last boundary (ring_at(0)); inside an escape, its start */
    /* Inside an escape: the state before it, its first byte and the bytes after that, and
     * its tag (threads that began with it carry the tag). */
    uint32_t a0, esc;
    unsigned char lead, pend[5];
    uint8_t npend;
    uint32_t *ring; /* low 32 bits of offsets (a spelling spans less than 2^32 bytes) */
    size_t rlen, top;
    struct ms_threads thr[2]; /* thr[c] alive, thr[c ^ 1] built by the step under way */
    unsigned int c;
    uint32_t *slot; /* ms_merge's index by (k, sub), 8 (n + 1) entries, or NULL */
    /* The starred block [lo, hi_end) that ends where the last spelling ended. */
    uint64_t lo, hi_end;
};

/* One scan step's context. */
struct ms_ctx {
    const struct mask_spell *s;
    struct mask_spell_run *r;
    uint64_t best; /* earliest start of a spelling ending at this byte, or UINT64_MAX */
    bool again;    /* nothing is partly matched: read this byte again on the fast path */
    bool oom;
};

/* ---- tables ---- */

static void ms_fail_build(const unsigned char *p, size_t n, uint16_t *fail)
{
    size_t k = 0;

    fail[0] = 0;
    fail[1] = 0;
    for (size_t q = 1; q < n; q++) {
        while (k > 0 && p[q] != p[k])
            k = fail[k];
        if (p[q] == p[k])
            k++;
        fail[q + 1] = (uint16_t)k;
    }
}

/* z[i] = length of the longest common prefix of p and p + i (Z-algorithm, linear). */
static void ms_z_build(const unsigned char *p, size_t n, uint16_t *z)
{
    size_t l = 0, r = 0;

    z[0] = (uint16_t)n;
    z[n] = 0;
    for (size_t i = 1; i < n; i++) {
        size_t k = 0;

        if (i < r)
            k = r - i < z[i - l] ? r - i : z[i - l];
        while (i + k < n && p[k] == p[i + k])
            k++;
        z[i] = (uint16_t)k;
        if (i + k > r) {
            l = i;
            r = i + k;
        }
    }
}

/* The byte each alternative table is about; whether the form needs it (ms_build). */
static const unsigned char ms_altc[MS_NALT] = {'%', '\\', ' '};

static bool ms_alt_needed(int x, const bool *has)
{
    return has[ms_altc[x]] && (x != MS_ALT_SP || has['+']);
}

/* Fills the tables; tab holds fail, z, nxt and one table per alternative the form needs. */
static void ms_build(struct mask_spell *s, const bool *has)
{
    const unsigned char *p = s->p;
    size_t n = s->n;
    uint16_t *fail = s->tab, *z = s->tab + (n + 1), *nxt = s->tab + 2 * (n + 1);
    uint16_t *t = s->tab + 3 * (n + 1);

    ms_fail_build(p, n, fail);
    ms_z_build(p, n, z);
    /* Knuth's refinement: a mismatch on p[q] mismatches on every border followed by p[q] */
    for (size_t q = 1; q < n; q++)
        nxt[q] = p[fail[q]] == p[q] ? nxt[fail[q]] : fail[q];
    s->fail = fail;
    s->z = z;
    s->nxt = nxt;
    s->plus = has[' '] && !has['+'] ? ' ' : '+';
    for (int x = 0; x < MS_NALT; x++) {
        if (!ms_alt_needed(x, has))
            continue;
        t[0] = p[0] == ms_altc[x] ? 0 : MS_NONE;
        for (size_t a = 1; a < n; a++)
            t[a] = p[a] == ms_altc[x] ? (uint16_t)a : t[fail[a]];
        s->alt[x] = t;
        t += n + 1;
    }
    for (int c = 0; c < 256; c++)
        s->plain[c] = (int16_t)c;
    s->plain['%'] = s->plain['\\'] = -1;
    s->plain['+'] = s->alt[MS_ALT_SP] != NULL ? -1 : s->plus;
    ms_build_filter(s);
}

struct mask_spell *mask_spell_new(const unsigned char *form, size_t len)
{
    struct mask_spell *s = NULL, *ret = NULL;
    bool has[256] = {false};
    size_t ntab = 3;

    if (form == NULL || len == 0 || len > VG_MASK_FORM_MAX)
        return NULL;
    for (size_t i = 0; i < len; i++)
        has[form[i]] = true;
    for (int x = 0; x < MS_NALT; x++)
        ntab += ms_alt_needed(x, has);
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        goto out;
    s->n = len;
    s->tab_len = (len + 1) * ntab;
    s->p = (unsigned char *)secmem_dup(form, len);
    s->tab = calloc(s->tab_len, sizeof(*s->tab));
    if (s->p == NULL || s->tab == NULL)
        goto out;
    ms_build(s, has);
    ret = s;
    s = NULL;
out:
    OPENSSL_cleanse(has, sizeof(has));
    mask_spell_free(&s);
    return ret;
}

void mask_spell_free(struct mask_spell **sp)
{
    struct mask_spell *s;

    if (sp == NULL || *sp == NULL)
        return;
    s = *sp;
    secmem_free(&s->p, s->n + 1);
    secmem_free(&s->tab, s->tab_len * sizeof(*s->tab));
    secmem_free(sp, sizeof(*s));
}

bool mask_spell_is(const struct mask_spell *s, const unsigned char *form, size_t len)
{
    return s->n == len && memcmp(s->p, form, len) == 0;
}

size_t mask_spell_max_hold(const struct mask_spell *s)
{
    return 6 * s->n - 1;
}

/* ---- runs ---- */

size_t mask_spell_run_size(const struct mask_spell *s)
{
    size_t n = sizeof(struct mask_spell_run) + (s->n + 1) * sizeof(uint32_t);

    return (n + 7) & ~(size_t)7;
}

struct mask_spell_run *mask_spell_run_init(void *mem, const struct mask_spell *s)
{
    struct mask_spell_run *r = mem; /* the ring after the struct */

    r->rlen = s->n + 1;
    r->ring = (uint32_t *)(void *)(r + 1);
    return r;
}

void mask_spell_run_fini(struct mask_spell_run *r)
{
    if (r == NULL)
        return;
    for (int i = 0; i < 2; i++)
        secmem_free(&r->thr[i].t, r->thr[i].cap * sizeof(*r->thr[i].t));
    free(r->slot);
    r->slot = NULL;
    OPENSSL_cleanse(r->ring, r->rlen * sizeof(*r->ring));
}

struct mask_spell_run *mask_spell_run_new(const struct mask_spell *s)
{
    void *mem = calloc(1, mask_spell_run_size(s));

    return mem != NULL ? mask_spell_run_init(mem, s) : NULL;
}

void mask_spell_run_free(struct mask_spell_run **rp)
{
    struct mask_spell_run *r;

    if (rp == NULL || *rp == NULL)
        return;
    r = *rp;
    mask_spell_run_fini(r);
    secmem_free(rp, sizeof(*r) + r->rlen * sizeof(*r->ring));
}

void mask_spell_run_reset(struct mask_spell_run *r)
{
    struct ms_threads *cur = &r->thr[r->c];

    if (cur->n > 0)
        OPENSSL_cleanse(cur->t, cur->n * sizeof(*cur->t));
    r->thr[0].n = r->thr[1].n = 0;
    r->a = 0;
    r->sub = MS_BOUND;
    r->head = r->lo = r->hi_end = 0;
    r->top = 0;
    r->ring[0] = 0;
}

/* Offset of the main reading's boundary k bytes of the form back (k <= n). */
static uint64_t ms_ring_at(const struct mask_spell_run *r, size_t k)
{
    size_t i = r->top >= k ? r->top - k : r->top + r->rlen - k;

    return r->head - (uint32_t)((uint32_t)r->head - r->ring[i]);
}

static void ms_ring_push(struct mask_spell_run *r, uint64_t pos)
{
    r->top = r->top + 1 == r->rlen ? 0 : r->top + 1;
    r->ring[r->top] = (uint32_t)pos;
    r->head = pos;
}

/* The main reading holds nothing partial and stands at boundary pos. */
static void ms_main_reset(struct mask_spell_run *r, uint64_t pos)
{
    r->a = 0;
    r->sub = MS_BOUND;
    r->ring[r->top] = (uint32_t)pos;
    r->head = pos;
}

/* ---- threads ---- */

static int ms_grow(struct ms_threads *q)
{
    size_t cap = q->cap > 0 ? 2 * q->cap : 16;
    struct ms_thread *t = malloc(cap * sizeof(*t));

    if (t == NULL)
        return -1;
    if (q->n > 0)
        memcpy(t, q->t, q->n * sizeof(*t));
    secmem_free(&q->t, q->cap * sizeof(*t));
    q->t = t;
    q->cap = cap;
    return 0;
}

/* A reading that has spelled k bytes of the form from offset start: a whole spelling when
 * k == n, otherwise a thread for the next byte. */
static void ms_push(struct ms_ctx *x, size_t k, unsigned int sub, uint64_t start, uint32_t tag)
{
    struct ms_threads *q = &x->r->thr[x->r->c ^ 1];

    if (k == x->s->n) {
        if (start < x->best)
            x->best = start;
        return;
    }
    if (q->n == q->cap && ms_grow(q) != 0) {
        x->oom = true;
        return;
    }
    q->t[q->n++] = (struct ms_thread){start, tag, (uint16_t)k, (uint16_t)sub};
}

/* One byte for one thread: every reading of c that continues its spelling. */
static void ms_thread_step(struct ms_ctx *x, const struct ms_thread *t, unsigned char c)
{
    unsigned char pc = x->s->p[t->k];

    switch (t->sub) {
    case MS_BOUND:
        if (c == pc || (c == '+' && pc == ' '))
            ms_push(x, t->k + 1, MS_BOUND, t->s, t->tag);
        if (c == '%')
            ms_push(x, t->k, MS_PCT1, t->s, t->tag);
        else if (c == '\\' && pc < 0x80)
            ms_push(x, t->k, MS_BS1, t->s, t->tag);
        return;
    case MS_PCT1:
    case MS_U3:
        if (pct_hexval(c) == pc >> 4)
            ms_push(x, t->k, t->sub + 1, t->s, t->tag);
        return;
    case MS_PCT2:
    case MS_U4:
        if (pct_hexval(c) == (pc & 15))
            ms_push(x, t->k + 1, MS_BOUND, t->s, t->tag);
        return;
    case MS_BS1:
        if (c == 'u')
            ms_push(x, t->k, MS_U1, t->s, t->tag);
        else if (c == pc && (c == '/' || c == '\\' || c == '"'))
            ms_push(x, t->k + 1, MS_BOUND, t->s, t->tag);
        return;
    default: /* MS_U1, MS_U2 */
        if (c == '0')
            ms_push(x, t->k, t->sub + 1, t->s, t->tag);
        return;
    }
}

static int ms_thread_cmp(const struct ms_thread *a, const struct ms_thread *b)
{
    if (a->k != b->k)
        return a->k < b->k ? -1 : 1;
    if (a->sub != b->sub)
        return a->sub < b->sub ? -1 : 1;
    return a->s < b->s ? -1 : a->s > b->s;
}

/*
 * Threads at the same place in the form behave alike from here on: keeps the earliest of
 * each. A few are sorted in place; many are merged through slot[] (one entry per (k, sub),
 * allocated the first time), so the cost stays linear in the number of threads. 0 or -1.
 */
static int ms_merge(struct mask_spell_run *r, struct ms_threads *q)
{
    size_t o = 1;

    if (q->n <= 16) {
        for (size_t i = 1; i < q->n; i++) {
            struct ms_thread t = q->t[i];
            size_t j = i;

            for (; j > 0 && ms_thread_cmp(&q->t[j - 1], &t) > 0; j--)
                q->t[j] = q->t[j - 1];
            q->t[j] = t;
        }
        for (size_t i = 1; i < q->n; i++) {
            if (q->t[i].k != q->t[o - 1].k || q->t[i].sub != q->t[o - 1].sub)
                q->t[o++] = q->t[i];
        }
        q->n = o;
        return 0;
    }
    if (r->slot == NULL && (r->slot = calloc(8 * r->rlen, sizeof(*r->slot))) == NULL)
        return -1;
    o = 0;
    for (size_t i = 0; i < q->n; i++) {
        struct ms_thread t = q->t[i];
        uint32_t *slot = &r->slot[(size_t)t.k * 8 + t.sub];

        if (*slot == 0) {
            q->t[o++] = t;
            *slot = (uint32_t)o;
        } else if (t.s < q->t[*slot - 1].s) {
            q->t[*slot - 1] = t;
        }
    }
    for (size_t i = 0; i < o; i++)
        r->slot[(size_t)q->t[i].k * 8 + q->t[i].sub] = 0;
    q->n = o;
    return 0;
}

/*
 * Drops threads the main reading covers: a thread between bytes with k in chain(a) and a start
 * no earlier than the main reading's for k follows the same bytes of the form from the same
 * offset, so every spelling it could complete the main reading (or a thread it hands off)
 * completes too, with a start no later.
 */
static void ms_drop_covered(const struct mask_spell *s, struct mask_spell_run *r)
{
    struct ms_threads *q = &r->thr[r->c];
    size_t o = 0, a = r->a;

    for (size_t i = 0; i < q->n; i++) {
        const struct ms_thread *t = &q->t[i];
        bool chain = t->sub == MS_BOUND && t->k <= a && (t->k == a || s->z[a - t->k] >= t->k);

        if (!chain || ms_ring_at(r, t->k) > t->s)
            q->t[o++] = *t;
    }
    q->n = o;
}

/* ---- the main reading ---- */

/* KMP: the state after reading byte ch of the form in state k (k < n). */
static size_t ms_kmp(const struct mask_spell *s, size_t k, unsigned char ch)
{
    while (k > 0 && s->p[k] != ch)
        k = s->nxt[k];
    return s->p[k] == ch ? k + 1 : 0;
}

/* The main reading completes byte ch of the form at offset end. */
static void ms_main_byte(struct ms_ctx *x, unsigned char ch, uint64_t end)
{
    const struct mask_spell *s = x->s;
    struct mask_spell_run *r = x->r;
    size_t k = ms_kmp(s, r->a, ch);

    ms_ring_push(r, end);
    if (k == s->n) {
        uint64_t start = ms_ring_at(r, k);

        if (start < x->best)
            x->best = start;
        k = s->fail[k];
    }
    r->a = (uint32_t)k;
    r->sub = MS_BOUND;
}

/*
 * A '+' read as a space when the form has both: hands that reading to threads, for every
 * partial spelling of the main reading whose next byte of the form is a space.
 */
static void ms_main_alt_space(struct ms_ctx *x)
{
    const uint16_t *alt = x->s->alt[MS_ALT_SP];

    if (alt == NULL)
        return;
    for (size_t k = alt[x->r->a]; k != MS_NONE; k = k > 0 ? alt[x->s->fail[k]] : MS_NONE)
        ms_push(x, k + 1, MS_BOUND, ms_ring_at(x->r, k), 0);
}

/*
 * Inside an escape: keeps only the partial spellings whose next byte of the form the escape
 * can still spell (hi: its high hex digit, or -1 for any ASCII byte). Like a KMP failure walk
 * it only lowers a. false when none is left.
 */
static bool ms_main_walk(const struct mask_spell *s, struct mask_spell_run *r, int hi)
{
    size_t k = r->a;

    for (;;) {
        unsigned char pc = s->p[k];

        if (hi < 0 ? pc < 0x80 : pc >> 4 == hi) {
            r->a = (uint32_t)k;
            return true;
        }
        if (k == 0)
            return false;
        k = s->fail[k];
    }
}

/* The state after the main reading's partial spellings read the escape's first byte raw
 * (a match this completes was reported when the byte was read). */
static size_t ms_main_raw_lead(const struct mask_spell *s, const struct mask_spell_run *r)
{
    const uint16_t *alt = s->alt[r->lead == '%' ? MS_ALT_PCT : MS_ALT_BS];
    size_t k;

    if (alt == NULL || alt[r->a0] == MS_NONE)
        return 0;
    k = (size_t)alt[r->a0] + 1;
    return k == s->n ? s->fail[k] : k;
}

/* The main reading at a boundary reads c (at offset v). */
static void ms_main_bound(struct ms_ctx *x, unsigned char c, uint64_t v)
{
    const struct mask_spell *s = x->s;
    struct mask_spell_run *r = x->r;
    const uint16_t *alt;

    switch (c) {
    case '%':
    case '\\':
        r->a0 = r->a;
        if (c == '\\' && !ms_main_walk(s, r, -1)) {
            ms_main_byte(x, c, v + 1); /* no escape can help: the byte is only itself */
            return;
        }
        r->sub = c == '%' ? MS_PCT1 : MS_BS1;
        r->lead = c;
        r->npend = 0;
        if (++r->esc == 0)
            r->esc = 1;
        /* Read raw, the byte may end a spelling now; the rest of that reading waits for the
         * next byte (ms_main_fork), or is replayed if no escape follows (ms_main_undo). */
        alt = s->alt[c == '%' ? MS_ALT_PCT : MS_ALT_BS];
        if (alt != NULL && alt[r->a0] == s->n - 1 && ms_ring_at(r, s->n - 1) < x->best)
            x->best = ms_ring_at(r, s->n - 1);
        return;
    case '+':
        ms_main_alt_space(x);
        ms_main_byte(x, s->plus, v + 1);
        return;
    default:
        ms_main_byte(x, c, v + 1);
        return;
    }
}

/*
 * The byte c1 after the escape's first byte continues the escape: from here on the raw
 * reading of the first byte, followed by c1, goes its own way as threads (tagged with the
 * escape). The KMP state after both bytes read raw gives them at once: every border of it
 * longer than 1 is such a thread. When c1 is a '\' (the escape "\\"), it may also begin an
 * escape of its own after the raw first byte.
 */
static void ms_main_fork(struct ms_ctx *x, unsigned char c1)
{
    const struct mask_spell *s = x->s;
    struct mask_spell_run *r = x->r;
    size_t b1 = ms_main_raw_lead(s, r), b2;

    if (b1 == 0)
        return;
    b2 = ms_kmp(s, b1, c1);
    if (b2 == s->n) {
        if (ms_ring_at(r, b2 - 2) < x->best)
            x->best = ms_ring_at(r, b2 - 2);
        b2 = s->fail[b2];
    }
    for (; b2 >= 2; b2 = s->fail[b2])
        ms_push(x, b2, MS_BOUND, ms_ring_at(r, b2 - 2), r->esc);
    for (; c1 == '\\' && b1 >= 1; b1 = s->fail[b1]) {
        if (s->p[b1] < 0x80)
            ms_push(x, b1, MS_BS1, ms_ring_at(r, b1 - 1), r->esc);
    }
}

/*
 * No escape began at the main reading's escape byte after all: drops the threads that began
 * in it and replays its bytes raw from the state before it. Every spelling the replay
 * completes ends before this step and was reported by those threads, so none is reported.
 */
static void ms_main_undo(struct ms_ctx *x)
{
    struct mask_spell_run *r = x->r;
    struct ms_threads *q = &r->thr[r->c ^ 1];
    uint64_t best = x->best, u = r->head;
    size_t o = 0;

    for (size_t i = 0; i < q->n; i++) {
        if (q->t[i].tag != r->esc)
            q->t[o++] = q->t[i];
    }
    q->n = o;
    r->a = r->a0;
    ms_main_byte(x, r->lead, u + 1);
    for (size_t i = 0; i < r->npend; i++)
        ms_main_byte(x, r->pend[i], u + 2 + i);
    x->best = best;
}

enum { MS_GO, MS_DONE, MS_FAIL };

/* The main reading inside an escape reads c: GO (still in it), DONE (c completed it; *d the
 * byte it spells) or FAIL (no escape that spells a byte it waits for began where it began). */
static int ms_main_escape(struct ms_ctx *x, unsigned char c, int *d)
{
    struct mask_spell_run *r = x->r;
    int h = pct_hexval(c);

    switch (r->sub) {
    case MS_PCT1:
    case MS_U3:
        if (h < 0 || (r->sub == MS_U3 && h > 7) || !ms_main_walk(x->s, r, h))
            return MS_FAIL;
        r->hi = (uint8_t)h;
        r->sub++;
        return MS_GO;
    case MS_PCT2:
    case MS_U4:
        *d = r->hi << 4 | h;
        return h < 0 ? MS_FAIL : MS_DONE;
    case MS_BS1:
        *d = c;
        if (c == '/' || c == '\\' || c == '"')
            return MS_DONE;
        if (c != 'u')
            return MS_FAIL;
        r->sub = MS_U1;
        return MS_GO;
    default: /* MS_U1, MS_U2 */
        if (c != '0')
            return MS_FAIL;
        r->sub++;
        return MS_GO;
    }
}

/* ---- scanning ---- */

/* The main reading inside an escape reads c at offset v. */
static void ms_main_inside(struct ms_ctx *x, unsigned char c, uint64_t v)
{
    struct mask_spell_run *r = x->r;
    struct ms_thread nb = {v, r->esc, 0, MS_BOUND};
    int d = 0, rc = ms_main_escape(x, c, &d);

    if (rc == MS_FAIL) {
        ms_main_undo(x);
        if (r->a == 0 && x->best == UINT64_MAX && r->thr[r->c ^ 1].n == 0) {
            /* nothing partial is left: the fast path judges c (a run of '%' stays on it) */
            ms_main_reset(r, v);
            x->again = true;
            return;
        }
        ms_main_bound(x, c, v);
        return;
    }
    if (r->npend == 0)
        ms_main_fork(x, c);
    ms_thread_step(x, &nb, c); /* a spelling may begin inside the escape */
    if (rc == MS_DONE)
        ms_main_byte(x, (unsigned char)d, v + 1);
    else
        r->pend[r->npend++] = c;
}

/* One byte c at offset v for the threads and the main reading. */
static void ms_step(struct ms_ctx *x, unsigned char c, uint64_t v)
{
    struct mask_spell_run *r = x->r;
    struct ms_threads *cur = &r->thr[r->c];

    for (size_t i = 0; i < cur->n; i++)
        ms_thread_step(x, &cur->t[i], c);
    if (r->sub == MS_BOUND)
        ms_main_bound(x, c, v);
    else
        ms_main_inside(x, c, v);
    cur->n = 0;
    r->c ^= 1;
    cur = &r->thr[r->c];
    if (cur->n > 1 && ms_merge(r, cur) != 0)
        x->oom = true;
    if (cur->n > 0 && r->sub == MS_BOUND)
        ms_drop_covered(x->s, r);
}

/* Stars [start, end) in dst. The block [lo, hi_end) is starred already and end passes it, so
 * only what lies outside it is written: about once per byte. */
static void ms_star(struct mask_spell_run *r, unsigned char *dst, uint64_t dst_at, uint64_t start,
                    uint64_t end)
{
    uint64_t from = r->hi_end;

    if (start > r->hi_end) {
        from = start;
        r->lo = start;
    } else if (start < r->lo) {
        memset(dst + (start - dst_at), '*', (size_t)(r->lo - start));
        r->lo = start;
    }
    if (end - from == 1)
        dst[from - dst_at] = '*';
    else
        memset(dst + (from - dst_at), '*', (size_t)(end - from));
    r->hi_end = end;
}

/*
 * The fast path meets a '%', '\' or a '+' read two ways at src[i]. When the main reading alone
 * can take it - the form does not hold the lead byte (no raw reading to hand off), no spelling
 * can begin inside the escape, and the escape is wholly in view - returns the escape's length
 * with *d the byte it spells, or 1 when no escape begins there (the lead byte then spells
 * nothing the form holds). 0 when the general step must decide.
 */
static size_t ms_plain_escape(const struct mask_spell *s, const unsigned char *src, size_t i,
                              size_t n, int *d)
{
    size_t len = 3;
    int h, l;

    if (src[i] == '+' || s->alt[src[i] == '%' ? MS_ALT_PCT : MS_ALT_BS] != NULL)
        return 0;
    if (src[i] == '%') {
        if (i + 3 > n)
            return 0;
        h = pct_hexval(src[i + 1]);
        l = pct_hexval(src[i + 2]);
    } else if (i + 2 > n) {
        return 0;
    } else if (src[i + 1] == '/' || src[i + 1] == '\\' || src[i + 1] == '"') {
        len = 2;
        h = src[i + 1] >> 4;
        l = src[i + 1] & 15;
    } else if (src[i + 1] != 'u') {
        return 1;
    } else if (i + 6 > n) {
        return 0;
    } else {
        len = 6;
        h = src[i + 2] == '0' && src[i + 3] == '0' ? pct_hexval(src[i + 4]) : -1;
        l = pct_hexval(src[i + 5]);
        if (h > 7)
            h = -1;
    }
    if (h < 0 || l < 0)
        return 1;
    for (size_t k = 1; k < len; k++) {
        if (ms_can_begin(s, src, i + k, n))
            return 0;
    }
    *d = h << 4 | l;
    return len;
}

/*
 * The fast path, while no thread is alive and the main reading stands between bytes: skips
 * positions where no spelling can begin and steps the KMP automaton over bytes and escapes
 * that need no other reading. Returns the index of the first byte that needs ms_step (or n).
 */
static size_t ms_plain(const struct mask_spell *s, struct mask_spell_run *r,
                       const unsigned char *src, size_t n, size_t i, uint64_t at,
                       unsigned char *dst, uint64_t dst_at, uint64_t *hits, size_t idle_after)
{
    size_t a = r->a;

    while (i < n) {
        size_t len = 1;
        int c;

        if (a == 0) {
            if (i > idle_after)
                break; /* mask_spell_scan_some: idle again */
            i = ms_skip(s, src, i, n);
            if (i == n)
                break;
            ms_main_reset(r, at + i);
        }
        if ((c = s->plain[src[i]]) < 0 && (len = ms_plain_escape(s, src, i, n, &c)) < 2) {
            if (len == 0)
                break;
            a = 0;
            i++;
            continue;
        }
        while (a > 0 && s->p[a] != c)
            a = s->fail[a];
        if (s->p[a] == c)
            a++;
        i += len;
        if (a == 0)
            continue;
        ms_ring_push(r, at + i);
        if (a == s->n) {
            ms_star(r, dst, dst_at, ms_ring_at(r, a), at + i);
            (*hits)++;
            a = s->fail[a];
        }
    }
    r->a = (uint32_t)a;
    if (i < n && a == 0)
        ms_main_reset(r, at + i);
    return i;
}

/* mask_spell_scan, stopping at the first byte boundary after src[idle_after] where the run is
 * idle (SIZE_MAX: never). Returns the bytes read, or SIZE_MAX when memory ran out. */
static size_t ms_scan(const struct mask_spell *s, struct mask_spell_run *r,
                      const unsigned char *src, size_t len, uint64_t at, unsigned char *dst,
                      uint64_t dst_at, uint64_t *hits, size_t idle_after)
{
    struct ms_ctx x = {s, r, UINT64_MAX, false, false};
    size_t i = 0;

    while (i < len) {
        if (r->thr[r->c].n == 0 && r->sub == MS_BOUND) {
            if (r->a == 0 && i > idle_after)
                break;
            i = ms_plain(s, r, src, len, i, at, dst, dst_at, hits, idle_after);
            if (i == len || (r->a == 0 && i > idle_after))
                break;
        }
        x.best = UINT64_MAX;
        x.again = false;
        ms_step(&x, src[i], at + i);
        if (x.oom)
            return SIZE_MAX;
        if (x.best != UINT64_MAX) {
            ms_star(r, dst, dst_at, x.best, at + i + 1);
            (*hits)++;
        }
        if (!x.again)
            i++;
    }
    return i;
}

int mask_spell_scan(const struct mask_spell *s, struct mask_spell_run *r, const unsigned char *src,
                    size_t len, uint64_t at, unsigned char *dst, uint64_t dst_at, uint64_t *hits)
{
    return ms_scan(s, r, src, len, at, dst, dst_at, hits, SIZE_MAX) == SIZE_MAX ? -1 : 0;
}

int mask_spell_scan_some(const struct mask_spell *s, struct mask_spell_run *r,
                         const unsigned char *src, size_t len, uint64_t at, unsigned char *dst,
                         uint64_t dst_at, uint64_t *hits, size_t *used)
{
    *used = ms_scan(s, r, src, len, at, dst, dst_at, hits, 0);
    return *used == SIZE_MAX ? -1 : 0;
}

uint64_t mask_spell_hold(const struct mask_spell_run *r)
{
    uint64_t h = UINT64_MAX;

    if (r->sub != MS_BOUND || r->a > 0)
        h = ms_ring_at(r, r->a);
    for (size_t i = 0; i < r->thr[r->c].n; i++) {
        if (r->thr[r->c].t[i].s < h)
            h = r->thr[r->c].t[i].s;
    }
    return h;
}

bool mask_spell_idle(const struct mask_spell_run *r)
{
    return r->a == 0 && r->sub == MS_BOUND && r->thr[r->c].n == 0;
}

bool mask_spell_can_begin(const struct mask_spell *s, const unsigned char *p, size_t i, size_t n)
{
    return ms_can_begin(s, p, i, n);
}
