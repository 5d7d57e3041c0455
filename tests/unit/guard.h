/*
 * guard.h - parser inputs placed at the very end of a readable page, followed by an
 * inaccessible one, so a one-byte over-read crashes the test instead of passing silently.
 */
#ifndef VG_TEST_GUARD_H
#define VG_TEST_GUARD_H

#include <stddef.h>

/* Returns a pointer to a copy of len bytes that ends at a guard page. Free with guard_free. */
char *guard_copy(const void *data, size_t len);
void guard_free(char *p, size_t len);

#endif
