/*
 * ca.h - the per-run certificate authority (SPEC §5).
 *
 * ca_new() makes a fresh ECDSA P-256 root in memory, signs one intermediate with it, and wipes
 * the root key before returning: afterwards only the intermediate can sign. No private key is
 * ever written anywhere. Nothing here logs.
 */
#ifndef VG_CA_H
#define VG_CA_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

struct ca;

/* What the intermediate may sign for. constrained=false: any name (catch-all routing). */
struct ca_names {
    bool constrained;
    const char *const *dns; /* normalised DNS names */
    size_t ndns;
    const char *const *ip; /* IPv4/IPv6 literals in text form */
    size_t nip;
};

/*
 * Creates the CA for run_id (the root's subject CN contains it). Returns NULL and fills err on
 * failure (OpenSSL's error queue drained into that one message).
 */
struct ca *ca_new(const char *run_id, const struct ca_names *names, char *err, size_t errlen);

/* Wipes the intermediate and leaf keys and frees; NULLs *cap. NULL-safe. */
void ca_free(struct ca **cap);

/* Borrowed pointers, valid while the CA lives. */
X509 *ca_root(const struct ca *ca);
X509 *ca_intermediate(const struct ca *ca);
EVP_PKEY *ca_leaf_key(const struct ca *ca); /* the one leaf key of this run */
bool ca_constrained(const struct ca *ca);

/* 1 if name (normalised DNS name or IP literal) lies inside the intermediate's constraints. */
int ca_permits(const struct ca *ca, const char *name);

/* PEM of the root certificate (public part only). Caller frees *pem with free(). 0 or -1. */
int ca_root_pem(const struct ca *ca, char **pem, size_t *len);

/* Writes the root PEM to path, mode 0644, atomically (temp file + rename). 0 or -1 + err. */
int ca_write_root(const struct ca *ca, const char *path, char *err, size_t errlen);

/* Lower-case hex SHA-256 of the root certificate's DER, 64 chars + NUL. */
void ca_root_sha256(const struct ca *ca, char out[65]);

#endif
