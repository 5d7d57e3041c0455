/*
 * evmem.h - libevent's memory through a per-thread cache of its buffer blocks (see evmem.c).
 */
#ifndef VG_EVMEM_H
#define VG_EVMEM_H

#include <stddef.h>

/* Gives libevent evmem's allocator (event_set_mem_functions). Once per process, before the
 * first worker thread starts; later calls do nothing. */
void evmem_install(void);

/* The calling thread keeps the blocks libevent frees (a worker, while its loop runs). */
void evmem_thread_begin(void);

/* The calling thread frees what it kept and keeps nothing more. */
void evmem_thread_end(void);

/* Bytes kept by the calling thread. */
size_t evmem_kept_bytes(void);

#endif
