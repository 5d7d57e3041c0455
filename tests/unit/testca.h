/*
 * testca.h - for the ca and certcache suites: a CA made at test time, and a leaf checked the way
 * a strict TLS client checks it: X509_verify_cert with the root as the only trust anchor, the
 * intermediate as untrusted, X509_V_FLAG_X509_STRICT, purpose sslserver and a host (or IP)
 * check, on DER round-tripped copies (what goes over the wire).
 */
#ifndef VG_TEST_TESTCA_H
#define VG_TEST_TESTCA_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/x509.h>

#include "ca/ca.h"

/* ca_new() for run "run-42" with these names; the test fails if it refuses. */
struct ca *testca_new(bool constrained, const char *const *dns, size_t ndns, const char *const *ip,
                      size_t nip);

/* A copy of x through DER; the caller frees it. */
X509 *testca_roundtrip(X509 *x);

/* X509_V_OK when leaf chains to the root of ca and matches host; else the verify error. */
int testca_verify(const struct ca *ca, X509 *leaf, const char *host);

#endif
