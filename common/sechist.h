/*
 * sechist.h - every value a secret has held during the run (SPEC §4 "Reflection"): an OAuth
 * access token replaced by a refresh or dropped after a 401, a static value replaced by a
 * reload. A retired value may still be valid where it was issued, so a response to a request
 * that carried the secret is masked for it as for the current value, until the process exits.
 *
 * One registry per process, keyed by secret name, append-only: a value once retired stays until
 * sechist_clear() at exit. Values live in wiped memory; nothing here logs or formats.
 * Thread-safe: one mutex, held for list walks and copies, never across a call out.
 */
#ifndef VG_SECHIST_H
#define VG_SECHIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Records that secret `name` held `len` bytes of `value` until now; the same value retired
 * twice is kept once. expires_ms is when the value stops being accepted where it was issued, on
 * the CLOCK_MONOTONIC millisecond clock (0: never, as for a static value). 0, or -1 when out of
 * memory.
 */
int sechist_retire(const char *name, const void *value, size_t len, int64_t expires_ms);

/* How many retired values of name are still within their lifetime at now_ms (static ones
 * always are). */
size_t sechist_live(const char *name, int64_t now_ms);

/* Bumped by every retirement that added a value: a masker built before a change is stale. */
uint64_t sechist_gen(void);

/* The retired values of one secret, copied out (wiped when freed). */
struct sechist_vals;

/* The retired values of name: *out is NULL when there are none. 0, or -1 when out of memory. */
int sechist_get(const char *name, struct sechist_vals **out);
size_t sechist_vals_count(const struct sechist_vals *v);
const char *sechist_vals_at(const struct sechist_vals *v, size_t i, size_t *len);
void sechist_vals_free(struct sechist_vals **vp);

/* Wipes and forgets everything: at exit, once no other thread uses the registry (tests). */
void sechist_clear(void);

#endif
