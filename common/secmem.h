/*
 * secmem.h - memory that holds secrets or keys: wiped before it is freed, compared in
 * constant time.
 */
#ifndef VG_SECMEM_H
#define VG_SECMEM_H

#include <stddef.h>

/* Returns a copy of len bytes plus a NUL, or NULL. Free with secmem_free(). */
char *secmem_dup(const void *src, size_t len);

/* Wipes len bytes at *pp, frees them and NULLs *pp. NULL-safe. */
void secmem_free(void *pp, size_t len);

/* 1 when a and b hold the same len bytes; time depends on len only. */
int secmem_equal(const void *a, const void *b, size_t len);

#endif
