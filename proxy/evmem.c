/*
 * evmem.c - libevent's and OpenSSL's allocators: the blocks a worker frees kept for its next ones.
 *
 * libevent allocates an evbuffer's chains as blocks of a power of two from 1 KiB (a chain's
 * header and its data in one block), and frees a chain as soon as it is drained. A worker with
 * a thousand requests in flight takes and gives such blocks several times per request: the
 * 32 KiB block an SSL bufferevent reserves for each read into an empty input (16 KiB to read,
 * plus the header, rounded up), the 1 KiB chains of small writes and of references. Past glibc's
 * per-thread cache (seven blocks per size) each goes through the heap's bins, and the 32 KiB
 * one is coalesced with its neighbours on every free and split again on the next malloc.
 *
 * OpenSSL takes and gives small blocks inside every SSL_write and SSL_read: a TLS record's
 * writer (WPACKET) allocates its sub-packet (40 bytes) when it starts, and again for each length
 * it opens, and a TLS 1.3 record's additional data is written through another: two or three per
 * record, each freed before the call returns. Those sizes (up to EVMEM_SMALL_MAX) are kept too,
 * per usable block size, so a keep-alive request's records allocate nothing.
 *
 * Guarantees:
 * - Every block is an ordinary malloc block: a block taken from libc before the install, or
 *   by a thread that keeps nothing, can be freed here and the other way round.
 * - A thread keeps blocks only between evmem_thread_begin and evmem_thread_end, at most
 *   EVMEM_CLASS_KEPT bytes of each size; under ASan nothing is kept.
 * - A kept block holds what the freed chain held, as a freed heap block would: chains that
 *   carry a secret are wiped by their owners (reference blocks cleansed on release), not here.
 *   A kept small block of OpenSSL's is wiped when kept.
 * - OpenSSL's blocks are kept only if evmem_install_ssl ran before OpenSSL's first allocation;
 *   otherwise OpenSSL keeps its own allocator and nothing changes.
 */
#include "proxy/evmem.h"
#include "common/asan.h"

#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include <event2/event.h>
#include <openssl/crypto.h>

#define EVMEM_MIN_SHIFT 10 /* 1 KiB: libevent's smallest chain block */
#define EVMEM_MAX_SHIFT 15 /* 32 KiB: a 16 KiB read's chain */
#define EVMEM_CLASSES   (EVMEM_MAX_SHIFT - EVMEM_MIN_SHIFT + 1)
/* per class: 32 of the 32 KiB blocks a turn's upstream reads hold, 1024 of the 1 KiB chains a
 * thousand HTTP/2 streams' masked output holds */
#define EVMEM_CLASS_KEPT (1024 * 1024)

/* OpenSSL's small blocks, kept per usable size: glibc's 24, 40, 56 and 72 bytes (a block of
 * another usable size goes back to the heap, so any allocator is served correctly) */
#define EVMEM_SMALL_MIN     24
#define EVMEM_SMALL_STEP    16
#define EVMEM_SMALL_CLASSES 4
#define EVMEM_SMALL_MAX     (EVMEM_SMALL_MIN + EVMEM_SMALL_STEP * (EVMEM_SMALL_CLASSES - 1))
#define SMALL_SIZE(c)       (EVMEM_SMALL_MIN + (size_t)(c)*EVMEM_SMALL_STEP)
#define EVMEM_SMALL_KEPT    64 /* blocks per class: a write of many records frees them at once */

#define EVMEM_KEEP (!VG_ASAN)

struct evmem_free {
    struct evmem_free *next;
};

static _Thread_local struct {
    bool on;
    size_t bytes;                 /* of all classes */
    size_t cbytes[EVMEM_CLASSES]; /* of each */
    struct evmem_free *head[EVMEM_CLASSES];
    unsigned scount[EVMEM_SMALL_CLASSES]; /* OpenSSL's small blocks of each usable size */
    struct evmem_free *shead[EVMEM_SMALL_CLASSES];
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

/* The small class whose usable size serves a request of n bytes with no byte to spare (n above
 * the class below's size), or -1. */
static int small_of_request(size_t n)
{
    if (n == 0 || n > EVMEM_SMALL_MAX)
        return -1;
    if (n <= EVMEM_SMALL_MIN)
        return 0;
    return (int)((n - EVMEM_SMALL_MIN + EVMEM_SMALL_STEP - 1) / EVMEM_SMALL_STEP);
}

/* The small class of a block of usable size u: only a size a class names exactly, or -1. */
static int small_of_block(size_t u)
{
    if (u < EVMEM_SMALL_MIN || u > EVMEM_SMALL_MAX || (u - EVMEM_SMALL_MIN) % EVMEM_SMALL_STEP != 0)
        return -1;
    return (int)((u - EVMEM_SMALL_MIN) / EVMEM_SMALL_STEP);
}

static void *evmem_ssl_malloc(size_t n, const char *file, int line)
{
    int c = kept.on ? small_of_request(n) : -1;
    struct evmem_free *f;

    (void)file;
    (void)line;
    if (c < 0 || (f = kept.shead[c]) == NULL)
        return malloc(n);
    kept.shead[c] = f->next;
    kept.scount[c]--;
    kept.bytes -= SMALL_SIZE(c);
    return f;
}

static void evmem_ssl_free(void *p, const char *file, int line)
{
    struct evmem_free *f = p;
    int c;

    (void)file;
    (void)line;
    if (p == NULL)
        return;
    c = kept.on ? small_of_block(malloc_usable_size(p)) : -1;
    if (c < 0 || kept.scount[c] >= EVMEM_SMALL_KEPT) {
        free(p);
        return;
    }
    OPENSSL_cleanse(p, SMALL_SIZE(c));
    f->next = kept.shead[c];
    kept.shead[c] = f;
    kept.scount[c]++;
    kept.bytes += SMALL_SIZE(c);
}

static void *evmem_ssl_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file;
    (void)line;
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

int evmem_install_ssl(void)
{
    if (!EVMEM_KEEP)
        return 0;
    if (CRYPTO_set_mem_functions(evmem_ssl_malloc, evmem_ssl_realloc, evmem_ssl_free) != 1)
        return -1; /* OpenSSL allocated already */
    return 0;
}

void evmem_thread_begin(void)
{
    kept.on = EVMEM_KEEP;
}

/* The blocks of one list back to the heap. */
static void free_list(struct evmem_free **head)
{
    while (*head != NULL) {
        struct evmem_free *f = *head;

        *head = f->next;
        free(f);
    }
}

void evmem_thread_end(void)
{
    kept.on = false;
    for (int c = 0; c < EVMEM_CLASSES; c++) {
        free_list(&kept.head[c]);
        kept.cbytes[c] = 0;
    }
    for (int c = 0; c < EVMEM_SMALL_CLASSES; c++) {
        free_list(&kept.shead[c]);
        kept.scount[c] = 0;
    }
    kept.bytes = 0;
}

size_t evmem_kept_bytes(void)
{
    return kept.bytes;
}
