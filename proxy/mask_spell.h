/*
 * mask_spell.h - the matcher behind reflection masking (proxy/mask.c), for that file only.
 *
 * One matcher per form of a secret finds every spelling of the form that SPEC §4 names: each
 * byte written raw or escaped, chosen independently per byte - `%hh` (either case of each hex
 * digit), `+` for a space, `\u00hh` (ASCII bytes), `\/`, `\\`, `\"`. docs/internals/mask.md
 * explains the automaton.
 */
#ifndef VG_MASK_SPELL_H
#define VG_MASK_SPELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One form's tables (derived from the secret; wiped on free). Immutable once built. */
struct mask_spell;

/* The state of one form over one stream (which bytes may still begin a spelling). */
struct mask_spell_run;

/* Tables for form[0..len), 1 <= len <= VG_MASK_FORM_MAX (copied). NULL on bad length or OOM. */
struct mask_spell *mask_spell_new(const unsigned char *form, size_t len);
void mask_spell_free(struct mask_spell **sp);

/* Whether s is the matcher of form[0..len). */
bool mask_spell_is(const struct mask_spell *s, const unsigned char *form, size_t len);

/* The most bytes a partial spelling can span: 6 per byte of the form but the last, plus an
 * unfinished escape of 5. Never more than this is held back for the form. */
size_t mask_spell_max_hold(const struct mask_spell *s);

/* A fresh run (at stream offset 0) for s; free with mask_spell_run_free (wiped). */
struct mask_spell_run *mask_spell_run_new(const struct mask_spell *s);
void mask_spell_run_free(struct mask_spell_run **rp);

/* Forgets the stream (the unit ended): the next scan starts a new stream. */
void mask_spell_run_reset(struct mask_spell_run *r);

/*
 * Reads src[0..len), the stream's bytes from offset `at` (the previous scan ended there), and
 * writes '*' over every byte of every spelling that ends in it into dst, whose dst[0] is the
 * byte at offset dst_at (dst covers [dst_at, at + len) and dst_at is at most the offset
 * mask_spell_hold gave after the previous scan). src is never written, so several forms can
 * read the same bytes while stars go to dst. Adds to *hits one per offset where a spelling
 * ends. 0, or -1 when memory for partial spellings ran out (the run is then unusable).
 */
int mask_spell_scan(const struct mask_spell *s, struct mask_spell_run *r, const unsigned char *src,
                    size_t len, uint64_t at, unsigned char *dst, uint64_t dst_at, uint64_t *hits);

/* The earliest offset where a partial spelling that can still complete begins, or UINT64_MAX
 * when none does: bytes before it can no longer change. */
uint64_t mask_spell_hold(const struct mask_spell_run *r);

#endif
