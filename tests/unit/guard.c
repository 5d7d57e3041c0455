/*
 * guard.c - guard-page copies of test inputs (see guard.h).
 */
#include "tests/unit/guard.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t pages_for(size_t len, size_t page)
{
    return (len + page - 1) / page + 1;
}

char *guard_copy(const void *data, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t n = pages_for(len, page);
    char *base = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *p;

    if (base == MAP_FAILED)
        abort();
    if (mprotect(base + (n - 1) * page, page, PROT_NONE) != 0)
        abort();
    p = base + (n - 1) * page - len;
    if (len > 0)
        memcpy(p, data, len);
    return p;
}

void guard_free(char *p, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t n = pages_for(len, page);
    char *base = (char *)(((uintptr_t)(p + len)) - (n - 1) * page);

    munmap(base, n * page);
}
