/*
 * suggest.h - "did you mean": the known word nearest to a mistyped one, for the errors of the
 * command line (an option, a command) and of the vault (a field name).
 */
#ifndef VG_SUGGEST_H
#define VG_SUGGEST_H

#include <stddef.h>

/*
 * The candidate nearest to word by optimal string alignment distance (insertions, deletions,
 * substitutions, adjacent transpositions; letter case ignored), when it is close enough to be
 * a typo: at most 1 edit for words up to 4 characters, 2 up to 8, else 3. NULL when none is
 * (or word is shorter than 3 or longer than
 * SUGGEST_MAX characters). cands has n entries; NULL entries are skipped. Ties
 * go to the first candidate.
 */
const char *suggest_nearest(const char *word, const char *const *cands, size_t n);

#define SUGGEST_MAX 64

#endif
