/*
 * mask_filter.c - the spelling matcher's fast-path filter (see mask_spell_int.h): where a
 * spelling of a form can begin, judged by a byte and the next, so that the matcher passes over
 * every other position without stepping its automaton.
 *
 * Guarantees:
 * - ms_skip() never passes a position where a spelling can begin (ms_can_begin() is the
 *   definition; the SSE2 and AVX2 versions compute the same test on 16 or 32 positions).
 * - AVX2 is used only when the CPU has it (asked once per form); the code is built with
 *   target("avx2") for that function alone, so the binary runs on any x86-64.
 * - mask_filter_skip() (several forms) never passes a position where ms_can_begin() holds for
 *   one of them: its byte-pair table is filled from ms_can_begin() itself, and the SIMD
 *   prefilter (the sets of first and of second bytes of those pairs) only narrows the positions
 *   that get the exact pair test. It takes 64 positions per step, with AVX-512BW when the CPU
 *   has it (asked once per filter; mask_filter_narrow() keeps the AVX2 code, for the tests).
 */
#include "mask/mask_spell_int.h"
#include "mask/mask_spell.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/secmem.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define MS_AVX2 1 /* ms_skip32 is built for AVX2 and used when the CPU has it */
#endif

/* The two-byte filter of ms_skip (see struct mask_spell). */
void ms_build_filter(struct mask_spell *s)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char p0 = s->p[0], p1 = s->n > 1 ? s->p[1] : p0;
    bool bs0 = p0 == '/' || p0 == '\\' || p0 == '"';

#if defined(MS_AVX2)
    s->avx2 = __builtin_cpu_supports("avx2");
#endif
    s->lead[0] = p0;
    s->lead[1] = p0 == ' ' ? '+' : p0;
    s->next[0] = p1;
    s->next[1] = '%';
    s->next[2] = p1 < 0x80 ? '\\' : p1;
    s->next[3] = p1 == ' ' ? '+' : p1;
    s->pct[0] = (unsigned char)hex[p0 >> 4];
    s->pct[1] = (unsigned char)(hex[p0 >> 4] & ~0x20);
    if (s->pct[1] < 'A')
        s->pct[1] = s->pct[0]; /* a digit has one case */
    s->bs[0] = p0 < 0x80 ? 'u' : p0;
    s->bs[1] = bs0 ? p0 : s->bs[0];
    for (size_t i = 0; i < 4; i++) {
        s->nexts[s->next[i]] = true;
        s->starts[i < 2 ? s->lead[i] : "%\\"[i - 2]] = true;
    }
    if (p0 >= 0x80)
        s->starts['\\'] = false;
#if defined(__SSE2__)
    {
        const unsigned char b[13] = {s->lead[0], s->lead[1], s->n == 1 ? 0xff : 0,
                                     s->next[0], s->next[1], s->next[2],
                                     s->next[3], '%',        s->pct[0],
                                     s->pct[1],  '\\',       s->bs[0],
                                     s->bs[1]};

        for (size_t i = 0; i < 13; i++)
            s->vec[i] = _mm_set1_epi8((char)b[i]);
    }
#endif
}

/* Whether a spelling can begin at p[i], judged by p[i] and p[i + 1] (when there is one). */
bool ms_can_begin(const struct mask_spell *s, const unsigned char *p, size_t i, size_t n)
{
    unsigned char c = p[i], d;

    if (!s->starts[c])
        return false;
    if (i + 1 == n)
        return true;
    d = p[i + 1];
    if ((c == s->lead[0] || c == s->lead[1]) && (s->n == 1 || s->nexts[d]))
        return true;
    if (c == '%')
        return d == s->pct[0] || d == s->pct[1];
    return c == '\\' && (d == s->bs[0] || d == s->bs[1]);
}

#if defined(__SSE2__)
/* ms_can_begin for the 16 positions p[0..16), each with the byte after it: one bit each. */
static unsigned int ms_begin16(const struct mask_spell *s, const unsigned char *p)
{
    const __m128i *v = s->vec;
    __m128i a = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 1));
    __m128i raw = _mm_and_si128(
        _mm_or_si128(_mm_cmpeq_epi8(a, v[0]), _mm_cmpeq_epi8(a, v[1])),
        _mm_or_si128(_mm_or_si128(v[2], _mm_cmpeq_epi8(b, v[3])),
                     _mm_or_si128(_mm_cmpeq_epi8(b, v[4]),
                                  _mm_or_si128(_mm_cmpeq_epi8(b, v[5]), _mm_cmpeq_epi8(b, v[6])))));
    __m128i pct = _mm_and_si128(_mm_cmpeq_epi8(a, v[7]),
                                _mm_or_si128(_mm_cmpeq_epi8(b, v[8]), _mm_cmpeq_epi8(b, v[9])));
    __m128i esc = _mm_and_si128(_mm_cmpeq_epi8(a, v[10]),
                                _mm_or_si128(_mm_cmpeq_epi8(b, v[11]), _mm_cmpeq_epi8(b, v[12])));

    return (unsigned int)_mm_movemask_epi8(_mm_or_si128(raw, _mm_or_si128(pct, esc)));
}
#endif

#if defined(MS_AVX2)
#define MS_SET32(c)   _mm256_set1_epi8((char)(c))
#define MS_EQ32(a, c) _mm256_cmpeq_epi8((a), MS_SET32(c))

/*
 * ms_skip's filter 32 positions at a time: a block where no byte can begin a spelling (neither
 * the form's first byte nor '+' standing for it, '%' or '') is passed after four compares; the
 * others get the byte-pair test of ms_begin16. Returns the first position at or after i that
 * can begin a spelling, or SIZE_MAX with *stop where fewer than 33 bytes remained.
 */
__attribute__((target("avx2"))) static size_t
ms_skip32(const struct mask_spell *s, const unsigned char *p, size_t i, size_t n, size_t *stop)
{
    const __m256i any = MS_SET32(s->n == 1 ? 0xff : 0);

    for (; i + 33 <= n; i += 32) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(p + i));
        __m256i lead = _mm256_or_si256(MS_EQ32(a, s->lead[0]), MS_EQ32(a, s->lead[1]));
        __m256i pct = MS_EQ32(a, '%'), esc = MS_EQ32(a, '\\'), b, hit;
        __m256i first = _mm256_or_si256(lead, _mm256_or_si256(pct, esc));
        unsigned int bits;

        if (_mm256_testz_si256(first, first))
            continue;
        b = _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 1));
        hit = _mm256_and_si256(
            lead, _mm256_or_si256(_mm256_or_si256(any, MS_EQ32(b, s->next[0])),
                                  _mm256_or_si256(MS_EQ32(b, s->next[1]),
                                                  _mm256_or_si256(MS_EQ32(b, s->next[2]),
                                                                  MS_EQ32(b, s->next[3])))));
        hit = _mm256_or_si256(hit, _mm256_and_si256(pct, _mm256_or_si256(MS_EQ32(b, s->pct[0]),
                                                                         MS_EQ32(b, s->pct[1]))));
        hit = _mm256_or_si256(hit, _mm256_and_si256(esc, _mm256_or_si256(MS_EQ32(b, s->bs[0]),
                                                                         MS_EQ32(b, s->bs[1]))));
        bits = (unsigned int)_mm256_movemask_epi8(hit);
        if (bits != 0)
            return i + (size_t)__builtin_ctz(bits);
    }
    *stop = i;
    return SIZE_MAX;
}
#endif

/*
 * Index of the first position at or after i where a spelling can begin (ms_can_begin), or n.
 * With SSE2 sixteen positions are judged at once; the last positions of p are judged in the
 * window of the last 17 bytes, the very last one (whose next byte is not known) on its own.
 */
size_t ms_skip(const struct mask_spell *s, const unsigned char *p, size_t i, size_t n)
{
#if defined(MS_AVX2)
    if (s->avx2) {
        size_t at = ms_skip32(s, p, i, n, &i);

        if (at != SIZE_MAX)
            return at;
    }
#endif
#if defined(__SSE2__)
    unsigned int bits;

    for (; i + 17 <= n; i += 16) {
        if ((bits = ms_begin16(s, p + i)) != 0)
            return i + (size_t)__builtin_ctz(bits);
    }
    if (n >= 17 && i + 1 < n) {
        bits = ms_begin16(s, p + n - 17) >> (i - (n - 17));
        if (bits != 0)
            return i + (size_t)__builtin_ctz(bits);
        i = n - 1;
    }
#endif
    for (; i < n; i++) {
        if (ms_can_begin(s, p, i, n))
            return i;
    }
    return n;
}

/* ---- several forms at once ---- */

struct mask_filter {
    uint64_t pair[65536 / 64]; /* bit (c << 8 | d): a spelling of some form can begin at c, d */
    bool starts[256];          /* ... at c when it is the last byte in view */
    bool second[256];          /* d is the second byte of some pair */
    /* For the byte shuffles, in both 128-bit lanes: the set of first bytes (set 0, starts[]) and
     * of second bytes (set 1, every d of the pairs). Byte c is in set x when
     * lo[x][c >> 7][c & 15] & hi[x][c >> 7][c >> 4] != 0; high[x]: some byte >= 0x80 is. */
    unsigned char lo[2][2][32], hi[2][2][32];
    bool high[2];
    bool avx512; /* the CPU has AVX-512BW: mf_skip512 */
};

/* Adds byte c to shuffle set x. */
static void mf_set_add(struct mask_filter *f, unsigned int x, unsigned int c)
{
    unsigned int half = c >> 7, h = (c >> 4) & 7;

    f->high[x] |= half == 1;
    for (unsigned int lane = 0; lane < 32; lane += 16) {
        f->lo[x][half][lane + (c & 15)] |= (unsigned char)(1u << h);
        f->hi[x][half][lane + (c >> 4)] = (unsigned char)(1u << h);
    }
}

bool mask_filter_usable(void)
{
#if defined(MS_AVX2)
    return __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

static bool mf_pair(const struct mask_filter *f, unsigned char c, unsigned char d)
{
    unsigned int k = (unsigned int)c << 8 | d;

    return (f->pair[k >> 6] >> (k & 63)) & 1;
}

struct mask_filter *mask_filter_new(struct mask_spell *const *s, size_t n)
{
    struct mask_filter *f = calloc(1, sizeof(*f));

    if (f == NULL)
        return NULL;
    for (size_t k = 0; k < n; k++) {
        for (unsigned int c = 0; c < 256; c++) {
            if (!s[k]->starts[c])
                continue;
            f->starts[c] = true;
            for (unsigned int d = 0; d < 256; d++) {
                const unsigned char two[2] = {(unsigned char)c, (unsigned char)d};
                unsigned int bit = c << 8 | d;

                if (ms_can_begin(s[k], two, 0, 2)) {
                    f->pair[bit >> 6] |= (uint64_t)1 << (bit & 63);
                    f->second[d] = true;
                }
            }
        }
    }
    for (unsigned int c = 0; c < 256; c++) {
        if (f->starts[c])
            mf_set_add(f, 0, c);
        if (f->second[c])
            mf_set_add(f, 1, c);
    }
#if defined(MS_AVX2)
    f->avx512 = __builtin_cpu_supports("avx512bw");
#endif
    return f;
}

void mask_filter_narrow(struct mask_filter *f)
{
    f->avx512 = false;
}

void mask_filter_free(struct mask_filter **fp)
{
    secmem_free(fp, sizeof(**fp));
}

#if defined(MS_AVX2)
/* Which of the 32 bytes whose low nibbles are lo and high nibbles hi are in shuffle set x of f:
 * one bit each. */
__attribute__((target("avx2"))) static inline uint32_t mf_in(const struct mask_filter *f,
                                                             unsigned int x, __m256i lo, __m256i hi)
{
    __m256i in = _mm256_and_si256(
        _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(const void *)f->lo[x][0]), lo),
        _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(const void *)f->hi[x][0]), hi));

    if (f->high[x])
        in = _mm256_or_si256(
            in, _mm256_and_si256(
                    _mm256_shuffle_epi8(
                        _mm256_loadu_si256((const __m256i *)(const void *)f->lo[x][1]), lo),
                    _mm256_shuffle_epi8(
                        _mm256_loadu_si256((const __m256i *)(const void *)f->hi[x][1]), hi)));
    return ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(in, _mm256_setzero_si256()));
}

/* The bytes p[0..64) in shuffle sets 0 and 1 of f: bit j for p[j]. The nibbles are split once
 * for both sets. */
__attribute__((target("avx2"))) static inline void
mf_in64(const struct mask_filter *f, const unsigned char *p, uint64_t *set0, uint64_t *set1)
{
    const __m256i nib = _mm256_set1_epi8(0x0f);
    __m256i a0 = _mm256_loadu_si256((const __m256i *)(const void *)p);
    __m256i a1 = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32));
    __m256i lo0 = _mm256_and_si256(a0, nib), hi0 = _mm256_and_si256(_mm256_srli_epi16(a0, 4), nib);
    __m256i lo1 = _mm256_and_si256(a1, nib), hi1 = _mm256_and_si256(_mm256_srli_epi16(a1, 4), nib);

    *set0 = mf_in(f, 0, lo0, hi0) | (uint64_t)mf_in(f, 0, lo1, hi1) << 32;
    *set1 = mf_in(f, 1, lo0, hi0) | (uint64_t)mf_in(f, 1, lo1, hi1) << 32;
}

/*
 * mask_filter_skip 64 positions at a time: the positions whose byte is a first byte and whose
 * next byte a second byte of some pair (two nibble lookups per set on the same 64 bytes; the
 * second bytes' bits are shifted by one, the 65th byte looked up in a table), with no branch
 * until both tests are done; then the exact pair test for each of them. Returns the first
 * position at or after i that can begin a spelling, or SIZE_MAX with *stop where fewer than 65
 * bytes remained.
 */
__attribute__((target("avx2"))) static size_t
mf_skip64(const struct mask_filter *f, const unsigned char *p, size_t i, size_t n, size_t *stop)
{
    for (; i + 65 <= n; i += 64) {
        uint64_t first, second, bits;

        mf_in64(f, p + i, &first, &second);
        bits = first & (second >> 1 | (uint64_t)f->second[p[i + 64]] << 63);
        for (; bits != 0; bits &= bits - 1) {
            size_t j = i + (size_t)__builtin_ctzll(bits);

            if (mf_pair(f, p[j], p[j + 1]))
                return j;
        }
    }
    *stop = i;
    return SIZE_MAX;
}

/* Which of the 64 bytes whose nibbles are lo and hi are in shuffle set x of f (as mf_in): one
 * vptestmb gives the bits. */
__attribute__((target("avx512bw"))) static inline uint64_t
mf_in512(const struct mask_filter *f, unsigned int x, __m512i lo, __m512i hi)
{
    uint64_t in = 0;

    for (unsigned int half = 0; half < (f->high[x] ? 2u : 1u); half++) {
        __m512i lt = _mm512_broadcast_i64x4(
            _mm256_loadu_si256((const __m256i *)(const void *)f->lo[x][half]));
        __m512i ht = _mm512_broadcast_i64x4(
            _mm256_loadu_si256((const __m256i *)(const void *)f->hi[x][half]));

        in |= _mm512_test_epi8_mask(_mm512_shuffle_epi8(lt, lo), _mm512_shuffle_epi8(ht, hi));
    }
    return in;
}

/* mf_skip64 with AVX-512BW: the same test on 64 bytes in one register. */
__attribute__((target("avx512bw"))) static size_t
mf_skip512(const struct mask_filter *f, const unsigned char *p, size_t i, size_t n, size_t *stop)
{
    const __m512i nib = _mm512_set1_epi8(0x0f);

    for (; i + 65 <= n; i += 64) {
        __m512i a = _mm512_loadu_si512((const void *)(p + i));
        __m512i lo = _mm512_and_si512(a, nib), hi = _mm512_and_si512(_mm512_srli_epi16(a, 4), nib);
        uint64_t bits = mf_in512(f, 0, lo, hi) &
                        (mf_in512(f, 1, lo, hi) >> 1 | (uint64_t)f->second[p[i + 64]] << 63);

        for (; bits != 0; bits &= bits - 1) {
            size_t j = i + (size_t)__builtin_ctzll(bits);

            if (mf_pair(f, p[j], p[j + 1]))
                return j;
        }
    }
    *stop = i;
    return SIZE_MAX;
}
#endif

size_t mask_filter_skip(const struct mask_filter *f, const unsigned char *p, size_t i, size_t n)
{
#if defined(MS_AVX2)
    size_t at = f->avx512 ? mf_skip512(f, p, i, n, &i) : mf_skip64(f, p, i, n, &i);

    if (at != SIZE_MAX)
        return at;
#endif
    for (; i < n; i++) {
        if (f->starts[p[i]] && (i + 1 == n || mf_pair(f, p[i], p[i + 1])))
            return i;
    }
    return n;
}
