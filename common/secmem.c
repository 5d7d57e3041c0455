/*
 * secmem.c - allocation helpers for secret bytes.
 *
 * Guarantees: memory handed out here is wiped with OPENSSL_cleanse (which the compiler cannot
 * elide) before it returns to the allocator.
 */
#include "common/secmem.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

char *secmem_dup(const void *src, size_t len)
{
    char *p = malloc(len + 1);

    if (p == NULL)
        return NULL;
    memcpy(p, src, len);
    p[len] = '\0';
    return p;
}

void secmem_free(void *pp, size_t len)
{
    void **slot = pp;

    if (slot == NULL || *slot == NULL)
        return;
    OPENSSL_cleanse(*slot, len);
    free(*slot);
    *slot = NULL;
}

int secmem_equal(const void *a, const void *b, size_t len)
{
    return CRYPTO_memcmp(a, b, len) == 0;
}
