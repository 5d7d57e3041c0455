/*
 * test_mask.c - reflection masking (mask/mask.c): streaming masking over arbitrary feeds,
 * the hold-back rule, head masking, Content-Encoding parsing and the gzip/deflate decoder.
 *
 * Forms are canary strings. Failure messages name case numbers, lengths and offsets, never the
 * bytes of a form.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/evp.h>
#include <zlib.h>

#include "common/caps.h"
#include "mask/mask.h"
#include "mask/mask_spell.h"
#include "tests/unit/guard.h"

struct mcase {
    const char *forms[INJECT_MAX_FORMS];
    const char *in;
    const char *want;
};

/* '*' in want marks bytes that must come out starred. */
static const struct mcase mcases[] = {
    {{"SeCrEt"}, "SeCrEt and more", "****** and more"},
    {{"SeCrEt"}, "head SeCrEt tail", "head ****** tail"},
    {{"SeCrEt"}, "ends with SeCrEt", "ends with ******"},
    {{"SeCrEt"}, "SeCrEtSeCrEt", "************"},
    {{"SeCrEt"}, "xSeCrEtSeCrEtx", "x************x"},
    {{"SeCrEt"}, "SeCrE SeCr eCrEt", "SeCrE SeCr eCrEt"},
    {{"SeCrEt"}, "SeCrESeCrEt", "SeCrE******"},
    {{"SeCrEt"}, "", ""},
    {{"SeCrEt"}, "SeC", "SeC"},
    {{"aa"}, "aaa", "***"},
    {{"aa"}, "baaab", "b***b"},
    {{"aa"}, "abab", "abab"},
    {{"aba"}, "ababa", "*****"},
    {{"aab"}, "aaab", "a***"},
    {{"abcabd"}, "abcabcabd", "abc******"},
    {{"x"}, "axbxx", "a*b**"},
    {{"abcdef", "abc"}, "abcdef abc abcde", "****** *** ***de"},
    {{"abc", "abcdef"}, "zabcdefz", "z******z"},
    {{"abcdef", "cd"}, "abcdxf abcdef", "ab**xf ******"},
    {{"abcdef", "b"}, "abcdef", "******"},
    {{"tok", "dG9r", "t%6Fk"}, "a=tok&b=dG9r&c=t%6Fk", "a=***&b=****&c=*****"},
    {{"12", "23", "34"}, "012345", "0****5"},
    {{"", "q"}, "qq", "**"},
    /* every spelling alone, next to near misses that must stay */
    {{"k-A"}, "<k-%41|k-%4|k-%42|k-%%41>", "<*****|k-%4|k-%42|k-%%41>"},
    {{"k-J"}, "<k-%4a|k-%4A|k-%4j|k-%4a>", "<*****|*****|k-%4j|*****>"},
    {{"k J"}, "<k+J|k%20J|k J|k++J|k%2BJ>", "<***|*****|***|k++J|k%2BJ>"},
    {{"k+J"}, "<k+J|k%2bJ|k J|k%20J>", "<***|*****|k J|k%20J>"},
    {{"k-A"}, "<k-\\u0041|k-\\u041|k-\\U0041>", "<********|k-\\u041|k-\\U0041>"},
    {{"k-J"}, "<k-\\u004A|k-\\u004a|k-\\u004z>", "<********|********|k-\\u004z>"},
    {{"k/J"}, "<k\\/J|k%2fJ|k%2FJ|k/J|k\\\\J>", "<****|*****|*****|***|k\\\\J>"},
    {{"k\\J"}, "<k\\\\J|k\\J|k%5cJ|k\\u005CJ>", "<****|***|*****|********>"},
    {{"k\"J"}, "<k\\\"J|k\"J|k\\u0022J|k\\'J>", "<****|***|********|k\\'J>"},
    /* one occurrence, every byte spelled another way */
    {{"a/b c\"d\\e"}, "[a\\/b+c\\u0022d%5Ce]", "[*****************]"},
    {{"a/b c\"d\\e"}, "[%61/b%20c\"\\u0064\\\\%65]", "[*********************]"},
    /* overlapping occurrences, spelled differently */
    {{"aXa"}, "a%58a%58%61", "***********"},
    {{"aXa"}, "aXa\\u0058a", "**********"},
    /* the percent-encoded query value is one spelling of the raw secret */
    {{"qk/v+Q=1&2 3~x"}, "k=qk%2Fv%2BQ%3D1%262%203~x&", "k=************************&"},
    /* a base64 form with its '+', '/' and '=' escaped */
    {{"ab+c/d=="}, "(ab%2Bc\\/d%3D\\u003d)(ab+c/d==)", "(******************)(********)"},
    /* escapes are read afresh inside other escapes and after broken ones */
    {{"A"}, "%%41 \\%41 %4%41 \\u00%41", "%*** \\*** %4*** \\u00***"},
    {{"1"}, "%31 \\u0031", "*** ******"},
    /* a secret holding '%' and '\\', read raw and escaped: both readings are followed */
    {{"a%41"}, "<a%41|a%2541|aA|a%%41|a\\u002541>", "<****|******|aA|a%%41|*********>"},
    {{"\\\\\\"}, "x\\\\x\\\\\\\\x\\\\\\\\\\\\x", "x\\\\x****x******x"},
};
#define NMCASES (sizeof(mcases) / sizeof(mcases[0]))

static struct mask *case_mask(const struct mcase *c)
{
    struct inject_form f[INJECT_MAX_FORMS];
    size_t n = 0;

    for (; n < INJECT_MAX_FORMS && c->forms[n] != NULL; n++) {
        f[n].bytes = (const unsigned char *)c->forms[n];
        f[n].len = strlen(c->forms[n]);
        f[n].flags = 0;
    }
    return mask_new(f, n);
}

/* Index of the first differing byte, or -1 when equal (lengths checked by the caller). */
static long first_diff(const unsigned char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != (unsigned char)b[i])
            return (long)i;
    return -1;
}

/* Feeds in[] cut at the given offsets (ascending), then finishes; checks against want. */
static void run_cuts(size_t ci, struct mask *m, const char *in, const char *want,
                     const size_t *cuts, size_t ncuts)
{
    size_t len = strlen(in), prev = 0;
    struct evbuffer *out = evbuffer_new();
    char *g = guard_copy(in, len);
    long d;

    ck_assert_ptr_nonnull(out);
    for (size_t k = 0; k <= ncuts; k++) {
        size_t at = k < ncuts ? cuts[k] : len;

        ck_assert_int_eq(mask_feed(m, g + prev, at - prev, out), 0);
        prev = at;
    }
    ck_assert_int_eq(mask_finish(m, out), 0);
    ck_assert_msg(evbuffer_get_length(out) == len, "case %zu: %zu bytes out for %zu in", ci,
                  evbuffer_get_length(out), len);
    d = first_diff(evbuffer_pullup(out, -1), want, len);
    ck_assert_msg(d < 0, "case %zu (%zu cuts): output differs at offset %ld", ci, ncuts, d);
    guard_free(g, len);
    evbuffer_free(out);
}

/* Maskers made from one set (mask_new_from) mask alike, each with its own stream state, and
 * outlive the set's own reference: the last masker frees it. */
START_TEST(test_table_shared_set)
{
    const struct mcase *c = &mcases[_i];
    struct inject_form f[INJECT_MAX_FORMS];
    size_t n = 0, len = strlen(c->in), cut = len / 2;
    struct mask_set *set;
    struct mask *a, *b;

    for (; n < INJECT_MAX_FORMS && c->forms[n] != NULL; n++) {
        f[n].bytes = (const unsigned char *)c->forms[n];
        f[n].len = strlen(c->forms[n]);
        f[n].flags = 0;
    }
    set = mask_set_new(f, n);
    ck_assert_ptr_nonnull(set);
    a = mask_new_from(set);
    b = mask_new_from(set);
    mask_set_free(&set);
    ck_assert_ptr_null(set);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    run_cuts(_i, a, c->in, c->want, &cut, 1);
    run_cuts(_i, b, c->in, c->want, NULL, 0);
    mask_free(&a);
    run_cuts(_i, b, c->in, c->want, &cut, 1);
    mask_free(&b);
}
END_TEST

START_TEST(test_table_whole_and_splits)
{
    const struct mcase *c = &mcases[_i];
    struct mask *m = case_mask(c);
    size_t len = strlen(c->in);
    size_t cuts[2];

    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(strlen(c->want), len);
    run_cuts(_i, m, c->in, c->want, NULL, 0);
    /* every single split point, then every pair of split points (mask reused after finish) */
    for (size_t a = 0; a <= len; a++) {
        cuts[0] = a;
        run_cuts(_i, m, c->in, c->want, cuts, 1);
        for (size_t b = a; b <= len; b++) {
            cuts[1] = b;
            run_cuts(_i, m, c->in, c->want, cuts, 2);
        }
    }
    mask_free(&m);
    ck_assert_ptr_null(m);
}
END_TEST

START_TEST(test_table_byte_feeds)
{
    const struct mcase *c = &mcases[_i];
    struct mask *m = case_mask(c);
    size_t len = strlen(c->in);
    size_t *cuts = calloc(len + 1, sizeof(*cuts));

    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(cuts);
    for (size_t k = 0; k < len; k++)
        cuts[k] = k;
    run_cuts(_i, m, c->in, c->want, cuts, len);
    free(cuts);
    mask_free(&m);
}
END_TEST

/* One feed and the total the masker must have emitted right after it. */
struct feed_step {
    const char *feed;
    size_t out_after;
};

static void run_feed_steps(struct mask *m, struct evbuffer *out, const struct feed_step *steps,
                           size_t n)
{
    ck_assert_ptr_nonnull(m);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(mask_feed(m, steps[i].feed, strlen(steps[i].feed), out), 0);
        ck_assert_msg(evbuffer_get_length(out) == steps[i].out_after,
                      "step %zu: %zu bytes out, want %zu", i, evbuffer_get_length(out),
                      steps[i].out_after);
    }
}

/* Bytes that cannot start a form leave in the same feed; a possible prefix waits. */
START_TEST(test_no_false_holdback)
{
    static const unsigned char form[] = "tok_LONGCANARY";
    struct inject_form f = {form, sizeof(form) - 1, 0};
    struct mask *m = mask_new(&f, 1);
    struct evbuffer *out = evbuffer_new();
    static const struct feed_step steps[] = {
        {"data: {\"a\":1}\n\n", 15},
        {"data: x\n\n", 24},
        {"data: tok", 30},      /* "tok" could start the form */
        {"_LONG", 30},          /* still a prefix */
        {"!\n\n", 41},          /* not any more: everything leaves */
        {"t", 41},              /* one byte prefix */
        {"tok_LONGCANARY", 56}, /* a whole form leaves at once, starred */
        {"\n", 57},
        {"ttok", 58}, /* the first t cannot start the form any more */
    };

    run_feed_steps(m, out, steps, sizeof(steps) / sizeof(steps[0]));
    ck_assert_int_eq(mask_finish(m, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 61);
    ck_assert_int_eq(memcmp(evbuffer_pullup(out, -1) + 42, "**************\n", 15), 0);
    ck_assert_uint_eq(mask_count(m), 1);
    mask_free(&m);
    evbuffer_free(out);
}
END_TEST

/* The same for spellings: a possible beginning of a spelling waits (and mask_finish lets it
 * go), anything that cannot begin one leaves at once. */
START_TEST(test_spelled_holdback)
{
    static const unsigned char form[] = "k-A";
    struct inject_form f = {form, 3, 0};
    struct mask *m = mask_new(&f, 1);
    struct evbuffer *out = evbuffer_new();
    static const struct feed_step steps[] = {
        {"data: ", 6},
        {"k-%4", 6},              /* "%4" may still become "%41" */
        {"1\n", 12},              /* a whole spelling leaves at once, starred */
        {"%", 12},                /* '%' may begin "%6B" ('k') */
        {"5", 14},                /* "%5" cannot: both leave */
        {"\\u006", 14},           /* may begin the JSON escape of 'k' */
        {"C", 20},                /* the escape of 'l': everything leaves */
        {"\\u006b-\\u0041.", 34}, /* mixed spelling, starred */
        {"\\", 34},               /* a backslash may begin an escape */
        {"/", 36},                /* the escaped '/' cannot begin "k-A" */
        {"k-\\u00", 36},          /* held until the unit ends */
    };

    run_feed_steps(m, out, steps, sizeof(steps) / sizeof(steps[0]));
    ck_assert_int_eq(mask_finish(m, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 42);
    ck_assert_int_eq(
        memcmp(evbuffer_pullup(out, -1), "data: *****\n%5\\u006C*************.\\/k-\\u00", 42), 0);
    ck_assert_uint_eq(mask_count(m), 2);
    /* after mask_finish the masker starts a new stream: nothing carried over */
    ck_assert_int_eq(mask_feed(m, "41", 2, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 44);
    ck_assert_uint_eq(mask_count(m), 2);
    mask_free(&m);
    evbuffer_free(out);
}
END_TEST

/* Deterministic generator for the long and random cases. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Slow reference: star every occurrence of every form over the whole input. */
static void ref_mask(const struct inject_form *f, size_t nf, const unsigned char *in, size_t len,
                     unsigned char *want)
{
    memcpy(want, in, len);
    for (size_t k = 0; k < nf; k++) {
        if (f[k].len == 0 || f[k].len > len)
            continue;
        for (size_t i = 0; i + f[k].len <= len; i++)
            if (memcmp(in + i, f[k].bytes, f[k].len) == 0)
                memset(want + i, '*', f[k].len);
    }
}

/* Feeds in[] in pieces of `step` bytes (0: pseudo-random sizes up to 3 * maxlen). */
static void run_stream(struct mask *m, const unsigned char *in, size_t len,
                       const unsigned char *want, size_t step, uint64_t *seed, size_t maxlen)
{
    struct evbuffer *out = evbuffer_new();
    size_t at = 0;
    long d;

    ck_assert_ptr_nonnull(out);
    while (at < len) {
        size_t n = step != 0 ? step : (size_t)(rng_next(seed) % (3 * maxlen + 2));

        if (n > len - at)
            n = len - at;
        ck_assert_int_eq(mask_feed(m, (const char *)in + at, n, out), 0);
        at += n;
        ck_assert_msg(evbuffer_get_length(out) + maxlen > at, "held back %zu >= %zu bytes",
                      at - evbuffer_get_length(out), maxlen);
    }
    ck_assert_int_eq(mask_finish(m, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), len);
    d = first_diff(evbuffer_pullup(out, -1), (const char *)want, len);
    ck_assert_msg(d < 0, "step %zu: output differs at offset %ld of %zu", step, d, len);
    evbuffer_free(out);
}

/* 8192-byte secret and a base64-sized form in 600 KiB of text; the secret also occurs
 * percent-encoded (3x as long), which the raw form's masker finds as one of its spellings. */
START_TEST(test_long_forms)
{
    const size_t slen = VG_SECRET_MAX_BYTES, plen = 3 * VG_SECRET_MAX_BYTES, blen = 10924;
    const size_t len = 600 * 1024; /* more than two of mask.c's 256 KiB slices */
    unsigned char *sec = malloc(slen), *pct = malloc(plen), *b64 = malloc(blen);
    unsigned char *in = malloc(len), *want = malloc(len);
    static const size_t steps[] = {0,    1,     7,     4096,  8191,   8192,
                                   8193, 24575, 24576, 65536, 262144, 600 * 1024};
    static const char hex[] = "0123456789ABCDEF";
    struct inject_form f[3];
    uint64_t seed = 0x9e3779b97f4a7c15u;
    struct mask *m;

    ck_assert(sec && pct && b64 && in && want);
    for (size_t i = 0; i < slen; i++)
        sec[i] = (unsigned char)('a' + rng_next(&seed) % 26);
    for (size_t i = 0; i < slen; i++) {
        pct[3 * i] = '%';
        pct[3 * i + 1] = (unsigned char)hex[sec[i] >> 4];
        pct[3 * i + 2] = (unsigned char)hex[sec[i] & 15];
    }
    for (size_t i = 0; i < blen; i++)
        b64[i] = (unsigned char)('A' + rng_next(&seed) % 26);
    for (size_t i = 0; i < len; i++)
        in[i] = (unsigned char)('a' + rng_next(&seed) % 26);
    /* occurrences: at 0, straddling 64 KiB, two overlapping-by-none adjacent, at the end; a
     * near miss (the secret with its last byte changed) */
    memcpy(in, sec, slen);
    memcpy(in + 65536 - 100, pct, plen);
    memcpy(in + 100000, b64, blen);
    memcpy(in + 100000 + blen, sec, slen);
    memcpy(in + 150000, sec, slen);
    in[150000 + slen - 1] ^= 1;
    memcpy(in + 262144 - 4000, sec, slen); /* across the first slice boundary */
    memcpy(in + len - slen, sec, slen);
    f[0] = (struct inject_form){sec, slen, 0};
    f[1] = (struct inject_form){b64, blen, 0};
    f[2] = (struct inject_form){pct, plen, 0}; /* for the reference only */
    ref_mask(f, 3, in, len, want);
    ck_assert_int_eq(want[150000], in[150000]); /* the near miss stays */
    m = mask_new(f, 2);
    ck_assert_ptr_nonnull(m);
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        run_stream(m, in, len, want, steps[i], &seed, plen);
    ck_assert_uint_eq(mask_count(m), 6 * (sizeof(steps) / sizeof(steps[0])));
    mask_free(&m);
    free(sec);
    free(pct);
    free(b64);
    free(in);
    free(want);
}
END_TEST

/* A form of 8192 identical bytes in a run of them: every byte completes a match (linear time
 * matters here: a naive starring would write 8192 bytes per input byte). */
START_TEST(test_long_periodic_form)
{
    const size_t flen = VG_SECRET_MAX_BYTES, len = 1024 * 1024;
    unsigned char *form = malloc(flen), *in = malloc(len), *want = malloc(len);
    struct inject_form f;
    uint64_t seed = 7;
    struct mask *m;

    ck_assert(form && in && want);
    memset(form, 'a', flen);
    memset(in, 'a', len);
    in[len / 2] = 'b';
    f = (struct inject_form){form, flen, 0};
    memset(want, '*', len); /* the reference would take flen * len steps here */
    want[len / 2] = 'b';
    m = mask_new(&f, 1);
    ck_assert_ptr_nonnull(m);
    run_stream(m, in, len, want, 1, &seed, flen);
    run_stream(m, in, len, want, 4093, &seed, flen);
    run_stream(m, in, len, want, 0, &seed, flen);
    mask_free(&m);
    free(form);
    free(in);
    free(want);
}
END_TEST

/* The same form spelled: each 'a' of the body raw, "%61" or the JSON escape at random. The
 * main reading decodes escapes, so this stays linear as well. */
START_TEST(test_long_periodic_spelled)
{
    static const char *const tok[] = {"a", "%61", "\\u0061", "a"};
    const size_t flen = VG_SECRET_MAX_BYTES, cap = 1024 * 1024;
    unsigned char *form = malloc(flen), *in = malloc(cap + 8), *want = malloc(cap + 8);
    struct inject_form f;
    uint64_t seed = 11;
    size_t len = 0, mid = 0;
    struct mask *m;

    ck_assert(form && in && want);
    memset(form, 'a', flen);
    while (len < cap) {
        const char *t = tok[rng_next(&seed) % 4];

        if (mid == 0 && len >= cap / 2) {
            mid = len;
            t = "b";
        }
        memcpy(in + len, t, strlen(t));
        len += strlen(t);
    }
    memset(want, '*', len);
    want[mid] = 'b';
    f = (struct inject_form){form, flen, 0};
    m = mask_new(&f, 1);
    ck_assert_ptr_nonnull(m);
    run_stream(m, in, len, want, 1, &seed, 6 * flen);
    run_stream(m, in, len, want, 4093, &seed, 6 * flen);
    run_stream(m, in, len, want, 0, &seed, 6 * flen);
    mask_free(&m);
    free(form);
    free(in);
    free(want);
}
END_TEST

/* A form of backslashes in a run of them: every byte can be read raw or as half of "\\", so
 * many partial spellings are alive at once (threads). The whole run is one masked stretch. */
START_TEST(test_periodic_backslashes)
{
    const size_t flen = 64, len = 16 * 1024;
    unsigned char form[64], *in = malloc(len), *want = malloc(len);
    struct inject_form f = {form, flen, 0};
    uint64_t seed = 5;
    struct mask *m;

    ck_assert(in && want);
    memset(form, '\\', flen);
    memset(in, '\\', len);
    memset(want, '*', len);
    memset(in + 1000, 'x', 1);
    memset(want + 1000, 'x', 1);
    memcpy(in + 2000, "x\\\\\\x", 5); /* a short run (3) stays */
    memcpy(want + 2000, "x\\\\\\x", 5);
    m = mask_new(&f, 1);
    ck_assert_ptr_nonnull(m);
    run_stream(m, in, len, want, 1, &seed, 6 * flen);
    run_stream(m, in, len, want, 0, &seed, 6 * flen);
    mask_free(&m);
    free(in);
    free(want);
}
END_TEST

/* Random small alphabets, random forms (often prefixes/overlaps of each other), random feeds. */
START_TEST(test_random_against_reference)
{
    uint64_t seed = 0x1234567u + (uint64_t)_i;
    unsigned char fb[INJECT_MAX_FORMS][12], in[600], want[600];

    for (int round = 0; round < 150; round++) {
        struct inject_form f[INJECT_MAX_FORMS];
        size_t nf = 1 + rng_next(&seed) % INJECT_MAX_FORMS, maxlen = 0;
        size_t alpha = 2 + rng_next(&seed) % 3, len = rng_next(&seed) % sizeof(in);
        struct mask *m;

        for (size_t k = 0; k < nf; k++) {
            f[k].len = 1 + rng_next(&seed) % sizeof(fb[k]);
            for (size_t i = 0; i < f[k].len; i++)
                fb[k][i] = (unsigned char)('a' + rng_next(&seed) % alpha);
            f[k].bytes = fb[k];
            f[k].flags = 0;
            if (f[k].len > maxlen)
                maxlen = f[k].len;
        }
        for (size_t i = 0; i < len; i++)
            in[i] = (unsigned char)('a' + rng_next(&seed) % alpha);
        ref_mask(f, nf, in, len, want);
        m = mask_new(f, nf);
        ck_assert_ptr_nonnull(m);
        run_stream(m, in, len, want, 0, &seed, maxlen);
        run_stream(m, in, len, want, 1, &seed, maxlen);
        mask_free(&m);
    }
}
END_TEST

/* Random bytes of the whole range (a download), the forms planted at every alignment: the fast
 * path passes most blocks unread (32 bytes at a time with AVX2) and must stop at each one. */
START_TEST(test_random_binary_planted)
{
    uint64_t seed = 0x51ab1e5u + (uint64_t)_i;
    unsigned char fb[2][12], in[4096], want[4096];

    for (int round = 0; round < 64; round++) {
        struct inject_form f[2];
        size_t nf = 1 + (size_t)round % 2, len = 2048 + rng_next(&seed) % 2048, maxlen = 0;
        struct mask *m;

        for (size_t k = 0; k < nf; k++) {
            f[k].len = 8 + rng_next(&seed) % 5;
            for (size_t i = 0; i < f[k].len; i++)
                fb[k][i] = (unsigned char)('a' + rng_next(&seed) % 26);
            f[k].bytes = fb[k];
            f[k].flags = 0;
            if (f[k].len > maxlen)
                maxlen = f[k].len;
        }
        for (size_t i = 0; i < len; i++)
            in[i] = (unsigned char)(rng_next(&seed) >> 24);
        /* one form at offsets round, round + 33, ... (every alignment over the rounds), and at
         * the very end */
        for (size_t at = (size_t)round; at + f[0].len <= len; at += 33 + rng_next(&seed) % 200)
            memcpy(in + at, f[nf - 1].bytes, f[nf - 1].len);
        memcpy(in + len - f[0].len, f[0].bytes, f[0].len);
        ref_mask(f, nf, in, len, want);
        m = mask_new(f, nf);
        ck_assert_ptr_nonnull(m);
        run_stream(m, in, len, want, len, &seed, maxlen);
        run_stream(m, in, len, want, 0, &seed, maxlen);
        mask_free(&m);
    }
}
END_TEST

/* One byte for the filter test: mostly bytes that begin or continue a spelling ('%', '\\', '+',
 * ' ', hex digits, 'u', bytes of the forms), sometimes any byte. */
static unsigned char filter_byte(uint64_t *seed, const unsigned char *pool, size_t npool)
{
    uint64_t r = rng_next(seed);

    if (r % 4 == 0)
        return (unsigned char)(r >> 8);
    return pool[(r >> 8) % npool];
}

/* The several-forms filter (mask_filter_skip, AVX2) against its definition: from any start it
 * returns the first position where mask_spell_can_begin() holds for one of the forms (the last
 * byte judged alone), or n; on random forms and bodies of every length around its 64-byte
 * blocks, with bytes of the whole range; runs 1 and 3 with the AVX2 code. */
START_TEST(test_filter_against_definition)
{
    static const unsigned char special[] = "%\\+ /\"u0123456789abcdefABCDEF";
    uint64_t seed = 0xf17e5u + (uint64_t)_i;
    unsigned char fb[8][12], pool[128], in[700];

    if (!mask_filter_usable())
        return;
    for (int round = 0; round < 300; round++) {
        struct mask_spell *sp[8];
        size_t nf = 1 + rng_next(&seed) % 8, npool = sizeof(special) - 1;
        size_t len = rng_next(&seed) % sizeof(in);
        struct mask_filter *f;

        memcpy(pool, special, npool);
        for (size_t k = 0; k < nf; k++) {
            size_t flen = 1 + rng_next(&seed) % sizeof(fb[k]);

            for (size_t i = 0; i < flen; i++) {
                uint64_t r = rng_next(&seed);

                fb[k][i] = (unsigned char)(r % 3 == 0 ? r >> 8
                                                      : special[(r >> 8) % (sizeof(special) - 1)]);
                if (r % 3 == 1)
                    fb[k][i] = (unsigned char)(0x20 + (r >> 16) % 0x60);
                if (npool < sizeof(pool))
                    pool[npool++] = fb[k][i];
            }
            sp[k] = mask_spell_new(fb[k], flen);
            ck_assert_ptr_nonnull(sp[k]);
        }
        f = mask_filter_new(sp, nf);
        ck_assert_ptr_nonnull(f);
        if (_i % 2 == 1)
            mask_filter_narrow(f); /* the AVX2 code where the CPU has AVX-512BW */
        for (size_t i = 0; i < len; i++)
            in[i] = filter_byte(&seed, pool, round % 2 == 0 ? npool : 1 + rng_next(&seed) % npool);
        for (size_t from = rng_next(&seed) % 70; from <= len;) {
            size_t want = from, got = mask_filter_skip(f, in, from, len);

            for (bool hit = false; want < len && !hit; want += hit ? 0 : 1) {
                for (size_t k = 0; k < nf && !hit; k++)
                    hit = mask_spell_can_begin(sp[k], in, want, len);
            }
            ck_assert_msg(got == want, "round %d: from %zu of %zu: %zu, want %zu", round, from, len,
                          got, want);
            from = got + 1 + (rng_next(&seed) % 8 == 0 ? rng_next(&seed) % 80 : 0);
        }
        mask_filter_free(&f);
        for (size_t k = 0; k < nf; k++)
            mask_spell_free(&sp[k]);
    }
}
END_TEST

/* More forms than one credential has (a secret's earlier values): each one masked, in bodies
 * and in heads. */
START_TEST(test_many_forms)
{
    enum { N = INJECT_MAX_FORMS + 7 };
    char vals[N][16], body[N * 20 + 1] = "", want[N * 20 + 1] = "";
    struct inject_form f[N];
    struct evbuffer *out = evbuffer_new();
    struct http_head h;
    struct mask *m;
    size_t len;

    for (int i = 0; i < N; i++) {
        int n = snprintf(vals[i], sizeof(vals[i]), "old-value-%02d", i);

        f[i] = (struct inject_form){(const unsigned char *)vals[i], (size_t)n, 0};
        snprintf(body + strlen(body), sizeof(body) - strlen(body), "%s, ", vals[i]);
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "%.*s, ", n, "****************");
    }
    m = mask_new(f, N);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(mask_feed(m, body, strlen(body), out), 0);
    ck_assert_int_eq(mask_finish(m, out), 0);
    len = evbuffer_get_length(out);
    ck_assert_uint_eq(len, strlen(want));
    ck_assert(memcmp(evbuffer_pullup(out, -1), want, len) == 0);
    httphead_init(&h);
    ck_assert_int_eq(httphead_set_status_line(&h, 1, 200, "OK", 2), 0);
    ck_assert_int_eq(httphead_add(&h, "X-Echo", 6, vals[N - 1], strlen(vals[N - 1])), 0);
    ck_assert_uint_eq(mask_head(m, &h), 1);
    ck_assert_str_eq(httphead_get(&h, "X-Echo")->value, "************");
    httphead_reset(&h);
    mask_free(&m);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_new_limits)
{
    static const unsigned char a[] = "abc";
    unsigned char *big = calloc(1, VG_MASK_FORM_MAX + 1);
    struct inject_form f[1], *many = calloc(VG_MASK_FORMS_MAX + 1, sizeof(*many));
    struct evbuffer *out = evbuffer_new();
    struct mask *m;

    ck_assert_ptr_nonnull(big);
    ck_assert_ptr_nonnull(many);
    for (size_t i = 0; i <= VG_MASK_FORMS_MAX; i++)
        many[i] = (struct inject_form){a, 3, 0};
    ck_assert_ptr_null(mask_new(many, VG_MASK_FORMS_MAX + 1));
    free(many);
    f[0] = (struct inject_form){big, VG_MASK_FORM_MAX + 1, 0};
    ck_assert_ptr_null(mask_new(f, 1));
    f[0].len = VG_MASK_FORM_MAX;
    m = mask_new(f, 1);
    ck_assert_ptr_nonnull(m);
    mask_free(&m);
    /* no forms: a pass-through */
    m = mask_new(NULL, 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(mask_feed(m, "abc", 3, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 3);
    ck_assert_int_eq(mask_finish(m, out), 0);
    mask_free(&m);
    mask_free(&m);
    mask_free(NULL);
    free(big);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_head)
{
    static const unsigned char sec[] = "sk-CANARY", b64[] = "dXNlcjpzay1DQU5BUlk=";
    struct inject_form f[2] = {{sec, 9, 0}, {b64, 20, 0}};
    char reason[] = "OK sk-CANARY";
    char n0[] = "X-Echo", v0[] = "Bearer sk-CANARY, sk-CANARYsk-CANARY";
    char n1[] = "X-Basic", v1[] = "Basic dXNlcjpzay1DQU5BUlk=";
    char n2[] = "X-sk-CANARY", v2[] = "sk-CANAR";
    char n3[] = "X-Split", v3[] = "Y";
    struct http_field fields[] = {
        {n0, 6, v0, sizeof(v0) - 1},
        {n1, 7, v1, sizeof(v1) - 1},
        {n2, 11, v2, sizeof(v2) - 1},
        {n3, 7, v3, sizeof(v3) - 1},
    };
    struct http_head h = {.status = 200, .reason = reason, .fields = fields, .nfields = 4};
    struct mask *m = mask_new(f, 2);

    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(mask_head(m, &h), 6);
    ck_assert_int_eq(memcmp(reason, "OK *********", 13), 0);
    ck_assert_int_eq(memcmp(v0, "Bearer *********, ******************", sizeof(v0)), 0);
    ck_assert_int_eq(memcmp(v1, "Basic ********************", sizeof(v1)), 0);
    ck_assert_int_eq(memcmp(n2, "X-*********", sizeof(n2)), 0);
    /* each value on its own: a prefix at the end of one is not joined to the next */
    ck_assert_int_eq(memcmp(v2, "sk-CANAR", sizeof(v2)), 0);
    ck_assert_int_eq(memcmp(v3, "Y", sizeof(v3)), 0);
    ck_assert_int_eq(memcmp(n0, "X-Echo", sizeof(n0)), 0);
    /* the head masking leaves the stream state alone */
    ck_assert_uint_eq(mask_count(m), 0);
    h.reason = NULL;
    ck_assert_uint_eq(mask_head(m, &h), 0);
    mask_free(&m);
}
END_TEST

/* mask_head keeps its matchers with the masker: a second head, and one between body feeds,
 * are masked exactly like the first, and the body stream is not disturbed. */
START_TEST(test_mask_head_again)
{
    static const unsigned char sec[] = "sk-CANARY";
    struct inject_form f[1] = {{sec, 9, 0}};
    struct mask *m = mask_new(f, 1);
    struct evbuffer *out = evbuffer_new();
    static const char body[] = "a sk-CAN"
                               "ARY b";

    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(out);
    for (int round = 0; round < 3; round++) {
        char v[] = "x sk-CANARY %73k-CANARY sk-CANAR";
        char n[] = "X-sk-CANARY";
        struct http_field fields[] = {{n, sizeof(n) - 1, v, sizeof(v) - 1}};
        struct http_head h = {.status = 200, .fields = fields, .nfields = 1};

        if (round == 2)
            ck_assert_int_eq(mask_feed(m, body, 8, out), 0);
        ck_assert_uint_eq(mask_head(m, &h), 3);
        ck_assert_int_eq(memcmp(v, "x ********* *********** sk-CANAR", sizeof(v)), 0);
        ck_assert_int_eq(memcmp(n, "X-*********", sizeof(n)), 0);
    }
    ck_assert_int_eq(mask_feed(m, body + 8, sizeof(body) - 1 - 8, out), 0);
    ck_assert_int_eq(mask_finish(m, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), sizeof(body) - 1);
    ck_assert(memcmp(evbuffer_pullup(out, -1), "a ********* b", sizeof(body) - 1) == 0);
    ck_assert_uint_eq(mask_count(m), 1);
    mask_free(&m);
    evbuffer_free(out);
}
END_TEST

/* Header values echo the secret in every spelling, and the base64 form of basic with its '/',
 * '+' and '=' escaped; a long value takes mask_head's heap copy. */
START_TEST(test_head_spellings)
{
    static const unsigned char sec[] = "sk-??CAN?>AR", b64[] = "dXNlcjpzay0/P0NBTj8+QVI=";
    static const struct {
        const char *value, *want;
    } t[] = {
        {"sk%2d%3F%3fCAN%3F%3EAR", "**********************"},
        {"{\"k\":\"sk-\\u003F?CAN?>AR\"}", "{\"k\":\"*****************\"}"},
        {"sk-??can?>AR sk-??CAN?>A", "sk-??can?>AR sk-??CAN?>A"},
        {"Basic dXNlcjpzay0\\/P0NBTj8%2BQVI%3D", "Basic *****************************"},
        {"Basic dXNlcjpzay0%2fP0NBTj8\\u002bQVI\\u003d!",
         "Basic ************************************!"},
    };
    struct inject_form f[2] = {{sec, 12, 0}, {b64, 24, 0}};
    char names[5][8], values[5][64], *big = malloc(1000);
    struct http_field fields[6];
    struct http_head h = {.status = 200, .fields = fields, .nfields = 6};
    struct mask *m = mask_new(f, 2);
    size_t hits;

    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < 5; i++) {
        snprintf(names[i], sizeof(names[i]), "X-E%zu", i);
        snprintf(values[i], sizeof(values[i]), "%s", t[i].value);
        fields[i] = (struct http_field){names[i], strlen(names[i]), values[i], strlen(values[i])};
    }
    memset(big, '.', 1000);
    memcpy(big + 500, "%73k-??CAN?>AR", 14);
    memcpy(big + 987, "sk-%3F?CAN?>A", 13); /* cut off by the end of the value: stays */
    fields[5] = (struct http_field){names[0], 4, big, 1000};
    hits = mask_head(m, &h);
    for (size_t i = 0; i < 5; i++)
        ck_assert_msg(strcmp(values[i], t[i].want) == 0, "value %zu differs", i);
    ck_assert_int_eq(memcmp(big + 499, ".**************.", 16), 0);
    ck_assert_int_eq(memcmp(big + 987, "sk-%3F?CAN?>A", 13), 0);
    ck_assert_uint_eq(hits, 5);
    mask_free(&m);
    free(big);
}
END_TEST

/* ---- base64 spellings of a value (SPEC §4) ---- */

/* base64 of in[0..n) in the standard or URL-safe alphabet, padded or not, NUL-terminated. */
static size_t b64_text(const unsigned char *in, size_t n, bool url, bool pad, char *out)
{
    size_t len = (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);

    while (!pad && len > 0 && out[len - 1] == '=')
        out[--len] = '\0';
    for (size_t i = 0; url && i < len; i++)
        out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
    return len;
}

/*
 * A value reflected in base64 inside JSON, behind 0-5 foreign bytes (every alignment) and
 * before 0-2, in both alphabets, padded or not, '/' also as "\/": exactly the characters that
 * depend on the value's bytes alone are starred, in one feed and in feeds of one byte. The
 * value's bytes give base64 with '+' and '/' at every alignment, so the alphabets differ.
 */
START_TEST(test_b64_value_alignments)
{
    static const unsigned char sec[] = "sk-CANARY\xef\xfb~?>~b64";
    const size_t n = sizeof(sec) - 1;
    struct inject_form f = {sec, n, INJECT_FORM_VALUE};
    struct mask *m = mask_new(&f, 1);
    uint64_t seed = 77;
    unsigned int seen_std = 0;

    ck_assert_ptr_nonnull(m);
    for (size_t pre = 0; pre < 6; pre++) {
        for (size_t post = 0; post < 3; post++) {
            for (int v = 0; v < 8; v++) {
                bool url = v & 1, pad = v & 2, esc = v & 4;
                unsigned char plain[64];
                char b64[128], in[512], want[512];
                size_t blen, from = (8 * pre + 5) / 6, to = (8 * (pre + n)) / 6, o = 0, w = 0;

                memset(plain, 'Q', pre);
                memcpy(plain + pre, sec, n);
                memset(plain + pre + n, 'z', post);
                blen = b64_text(plain, pre + n + post, url, pad, b64);
                if (!url && memchr(b64 + from, '/', to - from) != NULL &&
                    memchr(b64 + from, '+', to - from) != NULL)
                    seen_std |= 1u << (pre % 3);
                o = w = (size_t)snprintf(in, sizeof(in), "{\"v\":\"");
                memcpy(want, in, o);
                for (size_t i = 0; i < blen; i++) {
                    bool star = i >= from && i < to;

                    if (esc && b64[i] == '/') {
                        in[o++] = '\\';
                        want[w++] = star ? '*' : '\\';
                    }
                    in[o++] = b64[i];
                    want[w++] = star ? '*' : b64[i];
                }
                memcpy(in + o, "\"}", 2);
                memcpy(want + w, "\"}", 2);
                o += 2;
                run_stream(m, (unsigned char *)in, o, (unsigned char *)want, o, &seed, 400);
                run_stream(m, (unsigned char *)in, o, (unsigned char *)want, 1, &seed, 400);
            }
        }
    }
    ck_assert_uint_eq(seen_std, 7); /* '+' and '/' at every alignment */
    mask_free(&m);
}
END_TEST

/* The base64 of a wire form (basic's, flags 0) is not looked for; a value's short base64 forms
 * (under 4 characters) are left out; identical forms are one (the count says so). */
START_TEST(test_b64_flags_floor_dedup)
{
    static const unsigned char wire[] = "dXNlcjpzay1DQU5BUlk=", tiny[] = "k9", three[] = "ab3";
    static const unsigned char alnum[] = "CANARY12"; /* base64 without '+' or '/' */
    struct inject_form f = {wire, sizeof(wire) - 1, 0};
    char b64[64], want[64];
    size_t len;
    uint64_t seed = 5;
    struct mask *m = mask_new(&f, 1);

    ck_assert_ptr_nonnull(m);
    len = b64_text(wire, sizeof(wire) - 1, false, true, b64);
    run_stream(m, (unsigned char *)b64, len, (unsigned char *)b64, len, &seed, 200);
    mask_free(&m);

    /* a 2-byte value: every base64 form is under 4 characters */
    f = (struct inject_form){tiny, 2, INJECT_FORM_VALUE};
    m = mask_new(&f, 1);
    ck_assert_ptr_nonnull(m);
    len = b64_text(tiny, 2, false, false, b64);
    run_stream(m, (unsigned char *)b64, len, (unsigned char *)b64, len, &seed, 200);
    mask_free(&m);

    /* a 3-byte value: at alignment 0 four characters (masked), at 1 and 2 three (not) */
    f = (struct inject_form){three, 3, INJECT_FORM_VALUE};
    m = mask_new(&f, 1);
    ck_assert_ptr_nonnull(m);
    len = b64_text(three, 3, false, true, b64);
    run_stream(m, (unsigned char *)b64, len, (unsigned char *)"****", len, &seed, 200);
    {
        const unsigned char pre[] = "Xab3";

        len = b64_text(pre, 4, false, true, b64); /* alignment 1: 3 characters of "ab3" */
        memcpy(want, b64, len);
        run_stream(m, (unsigned char *)b64, len, (unsigned char *)want, len, &seed, 200);
    }
    mask_free(&m);

    /* standard and URL-safe coincide: one form per alignment, one count per occurrence */
    f = (struct inject_form){alnum, 8, INJECT_FORM_VALUE};
    m = mask_new(&f, 1);
    ck_assert_ptr_nonnull(m);
    len = b64_text(alnum, 8, false, false, b64);
    ck_assert_ptr_null(memchr(b64, '+', len));
    ck_assert_ptr_null(memchr(b64, '/', len));
    memset(want, '*', 10);
    memcpy(want + 10, b64 + 10, len - 10); /* the 11th character mixes in the padding bits */
    run_stream(m, (unsigned char *)b64, len, (unsigned char *)want, len, &seed, 200);
    ck_assert_uint_eq(mask_count(m), 1);
    mask_free(&m);
}
END_TEST

/* Decodes standard base64 (padding optional) into out; returns the byte count. */
static size_t b64_bytes(const char *s, size_t len, unsigned char *out)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned int acc = 0, bits = 0;
    size_t o = 0;

    for (size_t i = 0; i < len && s[i] != '='; i++) {
        const char *p = strchr(a, s[i]);

        ck_assert_ptr_nonnull(p);
        acc = acc << 6 | (unsigned int)(p - a);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    return o;
}

/*
 * Binary metadata (`-bin` fields, gRPC): the value is decoded, masked and encoded again with
 * the padding it had, so the client decodes '*' bytes where the secret was, every other byte
 * as sent; a value that is no base64 is masked as text, its base64 spellings included.
 */
START_TEST(test_head_bin)
{
    static const unsigned char sec[] = "sk-CANARY-bin7Zq";
    const size_t n = sizeof(sec) - 1;
    struct inject_form f = {sec, n, INJECT_FORM_VALUE};
    struct mask *m = mask_new(&f, 1);

    ck_assert_ptr_nonnull(m);
    for (size_t pre = 0; pre < 9; pre++) {
        for (int pad = 0; pad < 2; pad++) {
            unsigned char plain[64], got[64];
            char n0[] = "X-Debug-Bin", n1[] = "grpc-status-details-bin", v0[128], v1[128];
            struct http_field fields[2];
            struct http_head h = {.status = 200, .fields = fields, .nfields = 2};
            size_t l0, l1, nb;

            memcpy(plain, "Bearer \x01\x02", pre < 9 ? pre : 9);
            memcpy(plain + pre, sec, n);
            plain[pre + n] = 0xfe;
            l0 = b64_text(plain, pre + n + 1, false, pad, v0);
            l1 = b64_text(plain, pre + n, false, pad, v1);
            fields[0] = (struct http_field){n0, sizeof(n0) - 1, v0, l0};
            fields[1] = (struct http_field){n1, sizeof(n1) - 1, v1, l1};
            ck_assert_uint_ge(mask_head(m, &h), 2);
            ck_assert_uint_eq(strlen(v0), l0);
            ck_assert_uint_eq(strlen(v1), l1);
            ck_assert_int_eq(v0[l0 - 1] == '=', pad && (pre + n + 1) % 3 != 0);
            ck_assert_int_eq(v1[l1 - 1] == '=', pad && (pre + n) % 3 != 0);
            nb = b64_bytes(v0, l0, got);
            ck_assert_uint_eq(nb, pre + n + 1);
            ck_assert_int_eq(memcmp(got, plain, pre), 0);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(got[pre + i] == '*', "byte %zu at %zu not starred", i, pre);
            ck_assert_uint_eq(got[pre + n], 0xfe);
            nb = b64_bytes(v1, l1, got);
            ck_assert_uint_eq(nb, pre + n);
            ck_assert_int_eq(memcmp(got, plain, pre), 0);
            for (size_t i = 0; i < n; i++)
                ck_assert_msg(got[pre + i] == '*', "byte %zu at %zu not starred", i, pre);
        }
    }
    {
        /* not base64 (a ':'): masked as text, the raw secret and its URL-safe base64 alike */
        char n0[] = "x-echo-BIN", v0[128], want[128];
        struct http_field fld = {n0, sizeof(n0) - 1, v0, 0};
        struct http_head h = {.status = 200, .fields = &fld, .nfields = 1};
        size_t l;

        l = (size_t)snprintf(v0, sizeof(v0), "a:%s:", (const char *)sec);
        l += b64_text(sec, n, true, false, v0 + l);
        fld.value_len = l;
        memset(want, '*', l);
        memcpy(want, "a:", 2);
        want[2 + n] = ':';
        want[l - 1] = v0[l - 1]; /* 16 bytes: the last character holds 4 bits of padding */
        ck_assert_uint_eq(mask_head(m, &h), 2);
        ck_assert_int_eq(memcmp(v0, want, l), 0);
    }
    {
        /* a field that is not binary keeps base64 text as text: its spellings masked */
        char n0[] = "x-bin-not", v0[128];
        struct http_field fld = {n0, sizeof(n0) - 1, v0, 0};
        struct http_head h = {.status = 200, .fields = &fld, .nfields = 1};
        size_t l = b64_text(sec, n, false, true, v0);

        fld.value_len = l;
        ck_assert_uint_eq(mask_head(m, &h), 1);
        for (size_t i = 0; i < 21; i++)
            ck_assert_msg(v0[i] == '*', "character %zu not starred", i);
    }
    mask_free(&m);
}
END_TEST

START_TEST(test_coding_parse)
{
    static const struct {
        const char *v;
        enum mask_coding c;
    } t[] = {
        {NULL, MASK_CODING_IDENTITY},
        {"", MASK_CODING_IDENTITY},
        {" \t ", MASK_CODING_IDENTITY},
        {"identity", MASK_CODING_IDENTITY},
        {"IDENTITY", MASK_CODING_IDENTITY},
        {"gzip", MASK_CODING_GZIP},
        {" GZip\t", MASK_CODING_GZIP},
        {"x-gzip", MASK_CODING_GZIP},
        {"X-GZIP ", MASK_CODING_GZIP},
        {"deflate", MASK_CODING_DEFLATE},
        {"\tDeflate", MASK_CODING_DEFLATE},
        {"br", MASK_CODING_UNSUPPORTED},
        {"zstd", MASK_CODING_UNSUPPORTED},
        {"compress", MASK_CODING_UNSUPPORTED},
        {"gzip, gzip", MASK_CODING_UNSUPPORTED},
        {"deflate,gzip", MASK_CODING_UNSUPPORTED},
        {"gzip;q=1", MASK_CODING_UNSUPPORTED},
        {"gzipx", MASK_CODING_UNSUPPORTED},
        {"gzi", MASK_CODING_UNSUPPORTED},
        {"g zip", MASK_CODING_UNSUPPORTED},
        {"identity, gzip", MASK_CODING_UNSUPPORTED},
    };

    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        ck_assert_msg(mask_coding_parse(t[i].v) == t[i].c, "case %zu", i);
}
END_TEST

/* Compresses in[] with zlib: wbits 31 gzip, 15 zlib, -15 raw. Returns a malloc'd buffer. */
static unsigned char *zpack(const void *in, size_t len, int wbits, size_t *outlen)
{
    z_stream z;
    size_t cap = compressBound((uLong)len) + 64;
    unsigned char *buf = malloc(cap);

    ck_assert_ptr_nonnull(buf);
    memset(&z, 0, sizeof(z));
    ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_in = (unsigned char *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    z.next_out = buf;
    z.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    *outlen = cap - z.avail_out;
    deflateEnd(&z);
    return buf;
}

/* Decodes enc[] fed in pieces of `step` bytes; returns feed/finish result, output in out. */
static int zdecode(enum mask_coding c, size_t cap, const unsigned char *enc, size_t len,
                   size_t step, struct evbuffer *out)
{
    struct mask_decoder *d = cap ? mask_decoder_new_capped(c, cap) : mask_decoder_new(c);
    int rc = 0;

    ck_assert_ptr_nonnull(d);
    for (size_t at = 0; at < len && rc == 0; at += step) {
        size_t n = len - at < step ? len - at : step;
        char *g = guard_copy(enc + at, n);

        rc = mask_decoder_feed(d, g, n, out);
        guard_free(g, n);
    }
    if (rc == 0)
        rc = mask_decoder_finish(d, out);
    mask_decoder_free(&d);
    ck_assert_ptr_null(d);
    return rc;
}

static unsigned char *text_body(size_t len)
{
    unsigned char *b = malloc(len);
    uint64_t seed = 99;

    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < len; i++)
        b[i] = (unsigned char)(rng_next(&seed) % 4 == 0 ? ' ' : 'a' + (i * 7 + i / 13) % 26);
    return b;
}

static const struct {
    enum mask_coding coding;
    int wbits;
} zkinds[] = {
    {MASK_CODING_GZIP, 16 + MAX_WBITS},
    {MASK_CODING_DEFLATE, MAX_WBITS},
    {MASK_CODING_DEFLATE, -MAX_WBITS},
};

START_TEST(test_decode_roundtrip)
{
    static const size_t lens[] = {0, 1, 2, 100, 70000};
    static const size_t steps[] = {1, 2, 3, 1000, 1 << 20};

    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        unsigned char *body = text_body(lens[li] + 1), *enc;
        size_t elen;

        enc = zpack(body, lens[li], zkinds[_i].wbits, &elen);
        for (size_t si = 0; si < sizeof(steps) / sizeof(steps[0]); si++) {
            struct evbuffer *out;

            if (lens[li] > 100 && steps[si] == 1 && _i != 0)
                continue; /* 1-byte feeds of the big body: once is enough */
            out = evbuffer_new();
            ck_assert_msg(zdecode(zkinds[_i].coding, 0, enc, elen, steps[si], out) == 0,
                          "len %zu step %zu", lens[li], steps[si]);
            ck_assert_uint_eq(evbuffer_get_length(out), lens[li]);
            ck_assert(lens[li] == 0 || memcmp(evbuffer_pullup(out, -1), body, lens[li]) == 0);
            evbuffer_free(out);
        }
        free(body);
        free(enc);
    }
}
END_TEST

START_TEST(test_decode_multimember_gzip)
{
    unsigned char *body = text_body(5000), *a, *b, *c, *all;
    size_t al, bl, cl;
    struct evbuffer *out = evbuffer_new();

    a = zpack(body, 3000, 31, &al);
    b = zpack(body, 0, 31, &bl);
    c = zpack(body + 3000, 2000, 31, &cl);
    all = malloc(al + bl + cl);
    ck_assert_ptr_nonnull(all);
    memcpy(all, a, al);
    memcpy(all + al, b, bl);
    memcpy(all + al + bl, c, cl);
    for (size_t step = 1; step <= al + bl + cl; step = step * 3 + 1) {
        evbuffer_drain(out, evbuffer_get_length(out));
        ck_assert_int_eq(zdecode(MASK_CODING_GZIP, 0, all, al + bl + cl, step, out), 0);
        ck_assert_uint_eq(evbuffer_get_length(out), 5000);
        ck_assert_int_eq(memcmp(evbuffer_pullup(out, -1), body, 5000), 0);
    }
    /* a second member cut short is a truncated stream */
    ck_assert_int_eq(zdecode(MASK_CODING_GZIP, 0, all, al + bl + cl - 3, 5, out), -1);
    /* trailing garbage after the last member */
    all[al + bl] = 0;
    ck_assert_int_eq(zdecode(MASK_CODING_GZIP, 0, all, al + bl + 1, 7, out), -1);
    free(body);
    free(a);
    free(b);
    free(c);
    free(all);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_decode_corrupt_truncated)
{
    unsigned char *body = text_body(20000), *enc;
    size_t elen;
    struct evbuffer *out = evbuffer_new();

    enc = zpack(body, 20000, zkinds[_i].wbits, &elen);
    /* truncated anywhere: feeding succeeds or fails, finish must fail */
    for (size_t cut = 1; cut < elen; cut += cut < 20 ? 1 : 97)
        ck_assert_msg(zdecode(zkinds[_i].coding, 0, enc, cut, 4096, out) == -1, "cut %zu", cut);
    /* a corrupted checksum (last bytes: CRC32/ISIZE for gzip, Adler-32 for zlib) */
    if (zkinds[_i].wbits > 0) {
        enc[elen - 1] ^= 0x55;
        ck_assert_int_eq(zdecode(zkinds[_i].coding, 0, enc, elen, 4096, out), -1);
        enc[elen - 1] ^= 0x55;
    }
    /* garbage in the block headers, and data after the end of a zlib/raw stream */
    {
        unsigned char *bad = malloc(elen + 1);

        ck_assert_ptr_nonnull(bad);
        memcpy(bad, enc, elen);
        bad[elen] = 'x';
        ck_assert_int_eq(zdecode(zkinds[_i].coding, 0, bad, elen + 1, 4096, out), -1);
        memset(bad + elen / 3, 0xff, 16);
        ck_assert_int_eq(zdecode(zkinds[_i].coding, 0, bad, elen, 3, out), -1);
        free(bad);
    }
    /* not compressed at all */
    ck_assert_int_eq(zdecode(zkinds[_i].coding, 0, body, 20000, 512, out), -1);
    /* a decoder that failed stays failed */
    {
        struct mask_decoder *d = mask_decoder_new(zkinds[_i].coding);

        ck_assert_int_eq(mask_decoder_feed(d, "\xff\xff\xff\xff\xff\xff", 6, out), -1);
        ck_assert_int_eq(mask_decoder_feed(d, (const char *)enc, elen, out), -1);
        ck_assert_int_eq(mask_decoder_finish(d, out), -1);
        mask_decoder_free(&d);
    }
    free(body);
    free(enc);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_decode_misc)
{
    struct evbuffer *out = evbuffer_new();
    unsigned char *enc;
    size_t elen;

    ck_assert_ptr_null(mask_decoder_new(MASK_CODING_IDENTITY));
    ck_assert_ptr_null(mask_decoder_new(MASK_CODING_UNSUPPORTED));
    mask_decoder_free(NULL);
    /* an empty body is a clean end; one byte of deflate is not */
    ck_assert_int_eq(zdecode(MASK_CODING_GZIP, 0, (const unsigned char *)"", 0, 1, out), 0);
    ck_assert_int_eq(zdecode(MASK_CODING_DEFLATE, 0, (const unsigned char *)"x", 1, 1, out), -1);
    /* gzip data is not deflate and vice versa */
    enc = zpack("hello", 5, 31, &elen);
    ck_assert_int_eq(zdecode(MASK_CODING_DEFLATE, 0, enc, elen, 1, out), -1);
    free(enc);
    enc = zpack("hello", 5, 15, &elen);
    ck_assert_int_eq(zdecode(MASK_CODING_GZIP, 0, enc, elen, 1, out), -1);
    free(enc);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_decode_cap)
{
    unsigned char *zeros = calloc(1, 100000), *enc;
    size_t elen;
    struct evbuffer *out = evbuffer_new();

    ck_assert_ptr_nonnull(zeros);
    enc = zpack(zeros, 100000, zkinds[_i].wbits, &elen);
    ck_assert_int_eq(zdecode(zkinds[_i].coding, 100000, enc, elen, 1, out), 0);
    evbuffer_drain(out, evbuffer_get_length(out));
    ck_assert_int_eq(zdecode(zkinds[_i].coding, 99999, enc, elen, 100, out), -1);
    ck_assert_int_eq(zdecode(zkinds[_i].coding, 99999, enc, elen, elen, out), -1);
    ck_assert_uint_le(evbuffer_get_length(out), 2 * 99999);
    free(zeros);
    free(enc);
    evbuffer_free(out);
}
END_TEST

/* The default cap: VG_MASK_DECODE_MAX bytes decode, one more does not. */
START_TEST(test_decode_default_cap)
{
    const size_t blk = 1 << 20;
    unsigned char *zeros = calloc(1, blk), *enc;
    size_t cap = 8 << 20, elen;
    struct evbuffer *out = evbuffer_new();
    struct mask_decoder *d;
    z_stream z;
    int rc = 0;

    ck_assert_ptr_nonnull(zeros);
    enc = malloc(cap);
    ck_assert_ptr_nonnull(enc);
    memset(&z, 0, sizeof(z));
    ck_assert_int_eq(deflateInit2(&z, 1, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
    z.next_out = enc;
    z.avail_out = (uInt)cap;
    for (size_t done = 0; done <= (size_t)VG_MASK_DECODE_MAX; done += blk) {
        z.next_in = zeros;
        z.avail_in = done + blk > (size_t)VG_MASK_DECODE_MAX ? 1 : (uInt)blk;
        ck_assert_int_eq(deflate(&z, Z_NO_FLUSH), Z_OK);
    }
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    elen = cap - z.avail_out;
    deflateEnd(&z);
    d = mask_decoder_new(MASK_CODING_GZIP);
    ck_assert_ptr_nonnull(d);
    for (size_t at = 0; at < elen && rc == 0; at += 4096) {
        rc = mask_decoder_feed(d, (const char *)enc + at, elen - at < 4096 ? elen - at : 4096, out);
        ck_assert_uint_le(evbuffer_get_length(out), (size_t)VG_MASK_DECODE_MAX);
        evbuffer_drain(out, evbuffer_get_length(out));
    }
    ck_assert_int_eq(rc, -1);
    ck_assert_int_eq(mask_decoder_finish(d, out), -1);
    mask_decoder_free(&d);
    free(zeros);
    free(enc);
    evbuffer_free(out);
}
END_TEST

/* Backpressure: at most out_max decoded bytes per call; the caller resumes where it stopped. */
START_TEST(test_decode_feed_some)
{
    const size_t blen = 200000;
    unsigned char *body = text_body(blen), *enc;
    size_t elen, at = 0, calls = 0;
    struct evbuffer *out = evbuffer_new();
    struct mask_decoder *d = mask_decoder_new(zkinds[_i].coding);

    ck_assert_ptr_nonnull(d);
    enc = zpack(body, blen, zkinds[_i].wbits, &elen);
    while (at < elen) {
        size_t n = elen - at < 777 ? elen - at : 777, used;
        int rc;

        do {
            size_t had = evbuffer_get_length(out);

            rc = mask_decoder_feed_some(d, (const char *)enc + at, n, out, 1000, &used);
            ck_assert_int_ge(rc, 0);
            ck_assert_uint_le(used, n);
            ck_assert_uint_le(evbuffer_get_length(out) - had, 1000);
            at += used;
            n -= used;
            calls++;
        } while (rc == 1);
        ck_assert_uint_eq(n, 0);
    }
    ck_assert_int_eq(mask_decoder_finish(d, out), 0);
    ck_assert_uint_ge(calls, blen / 1000);
    ck_assert_uint_eq(evbuffer_get_length(out), blen);
    ck_assert_int_eq(memcmp(evbuffer_pullup(out, -1), body, blen), 0);
    mask_decoder_free(&d);
    free(body);
    free(enc);
    evbuffer_free(out);
}
END_TEST

/* A gzip body echoing the secret: decode in odd pieces, mask the decoded stream. */
START_TEST(test_mask_decoded)
{
    static const unsigned char sec[] = "vg-canary-7f3a9c", b64[] = "dXNlcjp2Zy1jYW5hcnk=";
    struct inject_form f[2] = {{sec, 16, 0}, {b64, 20, 0}};
    const char *parts[] = {"{\"echo\":\"", (const char *)sec, "\",\"auth\":\"Basic ",
                           (const char *)b64, "\",\"x\":\"vg-canary-7f3a9\"}"};
    unsigned char body[256], *enc;
    size_t blen = 0, elen;
    struct evbuffer *dec = evbuffer_new(), *out = evbuffer_new();
    struct mask_decoder *d;
    struct mask *m = mask_new(f, 2);
    const unsigned char *o;

    for (size_t i = 0; i < 5; i++) {
        memcpy(body + blen, parts[i], strlen(parts[i]));
        blen += strlen(parts[i]);
    }
    for (size_t k = 0; k < 3; k++) {
        enc = zpack(body, blen, zkinds[k].wbits, &elen);
        d = mask_decoder_new(zkinds[k].coding);
        ck_assert_ptr_nonnull(d);
        for (size_t at = 0; at < elen; at += 5) {
            size_t n = elen - at < 5 ? elen - at : 5;

            ck_assert_int_eq(mask_decoder_feed(d, (const char *)enc + at, n, dec), 0);
            while (evbuffer_get_length(dec) > 0) {
                char piece[3];
                size_t got = (size_t)evbuffer_remove(dec, piece, sizeof(piece));

                ck_assert_int_eq(mask_feed(m, piece, got, out), 0);
            }
        }
        ck_assert_int_eq(mask_decoder_finish(d, dec), 0);
        ck_assert_uint_eq(evbuffer_get_length(dec), 0);
        ck_assert_int_eq(mask_finish(m, out), 0);
        ck_assert_uint_eq(evbuffer_get_length(out), blen);
        o = evbuffer_pullup(out, -1);
        ck_assert_int_eq(memcmp(o, "{\"echo\":\"****************\",\"auth\":\"Basic ", 41), 0);
        ck_assert_int_eq(memcmp(o + 41, "********************\",\"x\":\"vg-canary-7f3a9\"}", 44),
                         0);
        evbuffer_drain(out, blen);
        mask_decoder_free(&d);
        free(enc);
    }
    ck_assert_uint_eq(mask_count(m), 6);
    mask_free(&m);
    evbuffer_free(dec);
    evbuffer_free(out);
}
END_TEST

Suite *suite_mask(void);

Suite *suite_mask(void)
{
    Suite *s = suite_create("mask");
    TCase *tc = tcase_create("stream");
    TCase *tz = tcase_create("decode");

    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_table_whole_and_splits, 0, NMCASES);
    tcase_add_loop_test(tc, test_table_byte_feeds, 0, NMCASES);
    tcase_add_loop_test(tc, test_table_shared_set, 0, NMCASES);
    tcase_add_test(tc, test_no_false_holdback);
    tcase_add_test(tc, test_spelled_holdback);
    tcase_add_test(tc, test_long_forms);
    tcase_add_test(tc, test_long_periodic_form);
    tcase_add_test(tc, test_long_periodic_spelled);
    tcase_add_test(tc, test_periodic_backslashes);
    tcase_add_loop_test(tc, test_random_against_reference, 0, 8);
    tcase_add_loop_test(tc, test_random_binary_planted, 0, 4);
    tcase_add_loop_test(tc, test_filter_against_definition, 0, 4);
    tcase_add_test(tc, test_new_limits);
    tcase_add_test(tc, test_many_forms);
    tcase_add_test(tc, test_head);
    tcase_add_test(tc, test_mask_head_again);
    tcase_add_test(tc, test_head_spellings);
    tcase_add_test(tc, test_b64_value_alignments);
    tcase_add_test(tc, test_b64_flags_floor_dedup);
    tcase_add_test(tc, test_head_bin);
    tcase_add_test(tc, test_coding_parse);
    suite_add_tcase(s, tc);
    tcase_set_timeout(tz, 120);
    tcase_add_loop_test(tz, test_decode_roundtrip, 0, 3);
    tcase_add_test(tz, test_decode_multimember_gzip);
    tcase_add_loop_test(tz, test_decode_corrupt_truncated, 0, 3);
    tcase_add_test(tz, test_decode_misc);
    tcase_add_loop_test(tz, test_decode_cap, 0, 3);
    tcase_add_test(tz, test_decode_default_cap);
    tcase_add_loop_test(tz, test_decode_feed_some, 0, 3);
    tcase_add_test(tz, test_mask_decoded);
    suite_add_tcase(s, tz);
    return s;
}
