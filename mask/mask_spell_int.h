/*
 * mask_spell_int.h - what mask_spell.c (the spelling matcher) and mask_filter.c (its fast
 * path's filter of where a spelling can begin) share. Private to those two files.
 */
#ifndef VG_MASK_SPELL_INT_H
#define VG_MASK_SPELL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Bytes with a second reading beside the main reading's: '%' and '\' read raw (when the form
 * holds them), and '+' read as a space when the form has both '+' and ' '. */
enum { MS_ALT_PCT, MS_ALT_BS, MS_ALT_SP, MS_NALT };

struct mask_spell {
    unsigned char *p; /* the form, n bytes + NUL */
    size_t n;
    uint16_t *tab; /* one allocation of tab_len entries: fail, z, nxt, the alt tables */
    size_t tab_len;
    const uint16_t *fail;         /* fail[q]: longest proper border of p[0..q), q in 0..n */
    const uint16_t *nxt;          /* nxt[q]: the failure link skipping borders followed by p[q] */
    const uint16_t *z;            /* z[i]: longest common prefix of p and p + i */
    const uint16_t *alt[MS_NALT]; /* alt[x][a]: largest k in chain(a) with p[k] the byte of
                                     x ('%', '\\', ' '), or MS_NONE; NULL when unused */
    unsigned char plus;           /* what the main reading takes '+' for */
    /* Where a spelling can begin, judged by a byte and the next (repeats fill unused slots):
     * the first byte of the form (or '+' for it), followed by a byte that can begin the
     * second; '%' followed by the first byte's high hex digit; '\' followed by 'u' or by
     * the first byte itself when it is '/', '\' or '"'. */
    unsigned char lead[2], next[4], pct[2], bs[2];
    bool starts[256], nexts[256];
#if defined(__SSE2__)
    __m128i vec[13]; /* the bytes above, each in all 16 lanes, in the order ms_begin16 uses */
#endif
    bool avx2;          /* the CPU has AVX2: ms_skip32 */
    int16_t plain[256]; /* the byte of the form a byte is read as when no other reading of it
                           matters, or -1 ('%', '\\', and '+' when it is read both ways) */
};

/* mask_filter.c */

/* Fills the filter's fields of s (lead, next, pct, bs, starts, nexts, the vectors, avx2) from
 * its form. */
void ms_build_filter(struct mask_spell *s);

/* Whether a spelling can begin at p[i], judged by p[i] and p[i + 1] (when i + 1 < n). */
bool ms_can_begin(const struct mask_spell *s, const unsigned char *p, size_t i, size_t n);

/* Index of the first position at or after i where a spelling can begin, or n. */
size_t ms_skip(const struct mask_spell *s, const unsigned char *p, size_t i, size_t n);

#endif
