/*
 * evmem.c - libevent's allocator: the buffer blocks a worker frees kept for its next ones.
 *
 * libevent allocates an evbuffer's chains as blocks of a power of two from 1 KiB (a chain's
 * header and its data in one block), and frees a chain as soon as it is drained. A worker with
 * a thousand requests in flight takes and gives such blocks several times per request: the
 * 32 KiB block an SSL bufferevent reserves for each read into an empty input (16 KiB to read,
 * plus the header, rounded up), the 1 KiB chains of small writes and of references. Past glibc's
 * per-thread cache (seven blocks per size) each goes through the heap's bins, and the 32 KiB
 * one is coalesced with its neighbours on every free and split again on the next malloc.
 *
 * Guarantees:
 * - Every block is an ordinary malloc block: a block taken from libc before the install, or
 *   by a thread that keeps nothing, can be freed here and the other way round.
 * - A thread keeps blocks only between evmem_thread_begin and evmem_thread_end, at most
 *   EVMEM_CLASS_KEPT bytes of each size; under ASan nothing is kept.
 * - A kept block holds what the freed chain held, as a freed heap block would: chains that
 *   carry a secret are wiped by their owners (reference blocks cleansed on release), not here.
 */
#include "proxy/evmem.h"
#include "common/asan.h"

#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include <event2/event.h>

#define EVMEM_MIN_SHIFT  10 /* 1 KiB: libevent's smallest chain block */
#define EVMEM_MAX_SHIFT  15 /* 32 KiB: a 16 KiB read's chain */
#define EVMEM_CLASSES    (EVMEM_MAX_SHIFT - EVMEM_MIN_SHIFT + 1)
#define EVMEM_CLASS_KEPT (64 * 1024) /* per class: a burst of small chains keeps no read's */

#define EVMEM_KEEP (!VG_ASAN)

struct evmem_free {
    struct evmem_free *next;
};

static _Thread_local struct {
    bool on;
    size_t bytes;                 /* of all classes */
    size_t cbytes[EVMEM_CLASSES]; /* of each */
    struct evmem_free *head[EVMEM_CLASSES];
} kept;

/* The class of a request of n bytes: a chain's block (a power of two within the classes), or
 * -1 for anything else libevent allocates (its structs stay at their own size). */
static int class_of_request(size_t n)
{
    int c = 0;

    if (n < (1u << EVMEM_MIN_SHIFT) || n > (1u << EVMEM_MAX_SHIFT) || (n & (n - 1)) != 0)
        return -1;
    while (((size_t)1 << (EVMEM_MIN_SHIFT + c)) < n)
        c++;
    return c;
}

/* The class a block of usable size u serves (the largest power of two within it), or -1. */
static int class_of_block(size_t u)
{
    int c = EVMEM_CLASSES - 1;

    if (u < (1u << EVMEM_MIN_SHIFT) || u >= (2u << EVMEM_MAX_SHIFT))
        return -1;
    while (c > 0 && ((size_t)1 << (EVMEM_MIN_SHIFT + c)) > u)
        c--;
    return c;
}

static void *evmem_malloc(size_t n)
{
    int c = kept.on ? class_of_request(n) : -1;
    struct evmem_free *f;

    if (c < 0)
        return malloc(n);
    if ((f = kept.head[c]) == NULL)
        return malloc(n);
    kept.head[c] = f->next;
    kept.bytes -= (size_t)1 << (EVMEM_MIN_SHIFT + c);
    kept.cbytes[c] -= (size_t)1 << (EVMEM_MIN_SHIFT + c);
    return f;
}

static void evmem_free(void *p)
{
    struct evmem_free *f = p;
    int c;
    size_t sz;

    if (p == NULL)
        return;
    c = kept.on ? class_of_block(malloc_usable_size(p)) : -1;
    sz = c < 0 ? 0 : (size_t)1 << (EVMEM_MIN_SHIFT + c);
    if (c < 0 || kept.cbytes[c] + sz > EVMEM_CLASS_KEPT) {
        free(p);
        return;
    }
    f->next = kept.head[c];
    kept.head[c] = f;
    kept.bytes += sz;
    kept.cbytes[c] += sz;
}

static void *evmem_realloc(void *p, size_t n)
{
    return realloc(p, n);
}

static void install_once(void)
{
    event_set_mem_functions(evmem_malloc, evmem_realloc, evmem_free);
}

void evmem_install(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    if (EVMEM_KEEP)
        pthread_once(&once, install_once);
}

void evmem_thread_begin(void)
{
    kept.on = EVMEM_KEEP;
}

void evmem_thread_end(void)
{
    kept.on = false;
    for (int c = 0; c < EVMEM_CLASSES; c++) {
        while (kept.head[c] != NULL) {
            struct evmem_free *f = kept.head[c];

            kept.head[c] = f->next;
            free(f);
        }
        kept.cbytes[c] = 0;
    }
    kept.bytes = 0;
}

size_t evmem_kept_bytes(void)
{
    return kept.bytes;
}
