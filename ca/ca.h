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

/*
 * Added by the ca/ module (not in the first contract):
 *
 * ca_new() refuses name lists whose intermediate would exceed this many DER bytes: the TLS
 * server sends leaf + intermediate, and OpenSSL clients refuse a certificate message over
 * 100 KiB by default (SSL_CTX_set_max_cert_list). About 2500 names of 15 characters fit (each
 * costs its length twice plus about 9 bytes: a permitted and an excluded subtree).
 *
 * ca_new(): names must not be NULL. With names->constrained false the lists are ignored. With
 * it true every names->dns[i] must be a normalised DNS name (hostname_normalize gives it back
 * unchanged) and every names->ip[i] an IPv4/IPv6 literal; otherwise ca_new() fails naming the
 * entry. Duplicates are fine.
 *
 * ca_permits() answers with the semantics of the certificate itself (docs/internals/ca.md):
 * a listed name is permitted; a subdomain of a listed name is permitted only when that name
 * also has a listed subdomain (an excluded subtree would hide it); with constraints but no DNS
 * names, only names under the reserved TLD "invalid" are. leaf_mint() does not consult it:
 * deciding what to serve for an unpermitted name is the caller's business.
 */
#define CA_INTERMEDIATE_MAX_DER (96 * 1024)

#endif
