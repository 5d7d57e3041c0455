/*
 * mask_spell.h - the matcher behind reflection masking (mask/mask.c), for that file only.
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

/* The same in the caller's memory: mask_spell_run_size bytes (a multiple of 8), zeroed, aligned
 * for a uint64_t; mask_spell_run_fini frees what the run allocated since and wipes the ring, not
 * the memory itself. */
size_t mask_spell_run_size(const struct mask_spell *s);
struct mask_spell_run *mask_spell_run_init(void *mem, const struct mask_spell *s);
void mask_spell_run_fini(struct mask_spell_run *r);

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

/* The same, but stops as soon as the run is idle (mask_spell_idle) at a byte boundary after
 * src[0]: *used is the number of bytes read (len when it never became idle). 0 or -1. */
int mask_spell_scan_some(const struct mask_spell *s, struct mask_spell_run *r,
                         const unsigned char *src, size_t len, uint64_t at, unsigned char *dst,
                         uint64_t dst_at, uint64_t *hits, size_t *used);

/* The earliest offset where a partial spelling that can still complete begins, or UINT64_MAX
 * when none does: bytes before it can no longer change. */
uint64_t mask_spell_hold(const struct mask_spell_run *r);

/* Whether r holds nothing (no partial spelling, no escape under way): its next scan may then
 * start at any later offset, the bytes between passed unread, provided no spelling of its form
 * can begin among them (mask_filter_skip). */
bool mask_spell_idle(const struct mask_spell_run *r);

/* Whether a spelling of s can begin at p[i], judged by p[i] and p[i + 1] (when i + 1 < n) as
 * the fast path judges it. */
bool mask_spell_can_begin(const struct mask_spell *s, const unsigned char *p, size_t i, size_t n);

/*
 * Several forms' fast-path filter in one (mask_filter.c): where a spelling of any of them can
 * begin, judged by a byte and the next exactly as each form's own filter judges them. Only
 * worth it, and only built, on a CPU with AVX2 (mask_filter_usable).
 */
struct mask_filter;
bool mask_filter_usable(void);
struct mask_filter *mask_filter_new(struct mask_spell *const *s, size_t n);
void mask_filter_free(struct mask_filter **fp);

/* Makes f use its AVX2 code even on a CPU with AVX-512BW (for the tests and mask_bench). */
void mask_filter_narrow(struct mask_filter *f);

/* Index of the first position at or after i where a spelling of one of the forms can begin
 * (the last position judged by its byte alone), or n. */
size_t mask_filter_skip(const struct mask_filter *f, const unsigned char *p, size_t i, size_t n);

#endif
