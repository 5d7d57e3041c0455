/*
 * ca_test.h - hooks for the unit tests, the fuzzers and the benchmark. Production code does
 * not call these.
 */
#ifndef VG_CA_TEST_H
#define VG_CA_TEST_H

#include <stddef.h>

#include <openssl/evp.h>

#include "ca/ca.h"
#include "ca/certcache.h"

/* The root key slot of the CA: NULL once ca_new() has returned, always. */
EVP_PKEY *ca_test_root_key(const struct ca *ca);

/* The intermediate's private key (borrowed), so tests can show it is not the root's. */
EVP_PKEY *ca_test_intermediate_key(const struct ca *ca);

#ifdef VG_CA_TEST_HOOKS
/*
 * Called, when set, with the root key just before ca_new() frees it, so a test can learn the
 * private scalar and then search memory for it (tests/tools/ca_wipe_check.c). NULL otherwise.
 * Only in vgca_test, the CA library built with -DVG_CA_TEST_HOOKS for that tool: the product
 * has no way to reach the root key (the meson test no_test_hooks checks the binary).
 */
extern void (*ca_test_root_key_hook)(EVP_PKEY *root_key);
#endif

/* certcache_new() without the VG_CERTCACHE_MIN floor (capacity >= 1), to test eviction. */
struct certcache *certcache_new_for_test(const struct ca *ca, size_t capacity);

#endif
