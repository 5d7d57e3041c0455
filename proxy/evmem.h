/*
 * evmem.h - libevent's and OpenSSL's memory through a per-thread cache of their blocks (see
 * evmem.c).
 */
#ifndef VG_EVMEM_H
#define VG_EVMEM_H

#include <stddef.h>

/* Gives libevent evmem's allocator (event_set_mem_functions). Once per process, before the
 * first worker thread starts; later calls do nothing. */
void evmem_install(void);

/* Gives OpenSSL evmem's allocator for its small blocks (CRYPTO_set_mem_functions). Only before
 * OpenSSL's first allocation: the first thing main does. 0, or -1 when OpenSSL allocated
 * already (it then keeps its own allocator). Under ASan it does nothing and returns 0. */
int evmem_install_ssl(void);

/* The calling thread keeps the blocks libevent and OpenSSL free (a worker, while its loop runs). */
void evmem_thread_begin(void);

/* The calling thread frees what it kept and keeps nothing more. */
void evmem_thread_end(void);

/* Bytes kept by the calling thread. */
size_t evmem_kept_bytes(void);

#endif
