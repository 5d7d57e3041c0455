/*
 * leaf.h - minting one leaf certificate for one host (SPEC §5).
 */
#ifndef VG_LEAF_H
#define VG_LEAF_H

#include <stddef.h>

#include <openssl/x509.h>

#include "ca/ca.h"

/*
 * Validates host with hostname_normalize (it must already be normalised), then signs a
 * certificate for it with the intermediate: SAN exactly one dNSName (or iPAddress), EKU
 * serverAuth, CA:FALSE, SHA-256, random serial, SKI/AKI, validity inside the intermediate's,
 * public key the run's leaf key. Returns a new reference, or NULL + err.
 */
X509 *leaf_mint(const struct ca *ca, const char *host, char *err, size_t errlen);

#endif
