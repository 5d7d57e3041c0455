/*
 * timefmt.h - the one time format of vaultgate's JSON, logs and SQLite rows:
 * ISO 8601 UTC with milliseconds, e.g. 2026-11-30T12:00:00.123Z.
 */
#ifndef VG_TIMEFMT_H
#define VG_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

#define TIMEFMT_BUFSZ 32

/* Milliseconds since the epoch, from the real-time clock. */
int64_t timefmt_now_ms(void);

/* Formats ms (milliseconds since the epoch) into out (>= TIMEFMT_BUFSZ). Returns out. */
char *timefmt_iso8601(int64_t ms, char *out, size_t outsz);

#endif
