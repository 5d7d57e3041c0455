/*
 * suggest.c - the nearest known word to a mistyped one (common/suggest.h).
 *
 * Guarantees: bounded work (words longer than SUGGEST_MAX are not compared), no allocation, and
 * a suggestion only within a few edits, so an unrelated word never gets a misleading "did you
 * mean". The word itself is never copied anywhere.
 */
#include "common/suggest.h"

#include <ctype.h>
#include <string.h>

static int lower(char c)
{
    return tolower((unsigned char)c);
}

static size_t min3(size_t a, size_t b, size_t c)
{
    size_t m = a < b ? a : b;

    return m < c ? m : c;
}

/* Optimal string alignment distance between a and b (both at most SUGGEST_MAX long). */
static size_t osa(const char *a, size_t la, const char *b, size_t lb)
{
    size_t d[SUGGEST_MAX + 1][SUGGEST_MAX + 1];

    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = lower(a[i - 1]) != lower(b[j - 1]);

            d[i][j] = min3(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
                lower(a[i - 2]) == lower(b[j - 1]) && d[i - 2][j - 2] + 1 < d[i][j])
                d[i][j] = d[i - 2][j - 2] + 1;
        }
    }
    return d[la][lb];
}

const char *suggest_nearest(const char *word, const char *const *cands, size_t n)
{
    size_t lw = word != NULL ? strlen(word) : 0, best = (size_t)-1, limit;
    const char *pick = NULL;

    if (lw < 3 || lw > SUGGEST_MAX) /* "x" is no typo of "n": too short to tell */
        return NULL;
    limit = lw <= 4 ? 1 : lw <= 8 ? 2 : 3;
    for (size_t i = 0; i < n; i++) {
        size_t lc = cands[i] != NULL ? strlen(cands[i]) : 0, dist;

        if (lc == 0 || lc > SUGGEST_MAX)
            continue;
        dist = osa(word, lw, cands[i], lc);
        if (dist <= limit && dist < best && dist < lc) {
            best = dist;
            pick = cands[i];
        }
    }
    return pick;
}
