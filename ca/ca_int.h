/*
 * ca_int.h - what ca.c, leaf.c and certcache.c share inside the ca/ module. Not for callers
 * outside ca/ (they use ca.h, leaf.h, certcache.h); tests use ca_test.h.
 */
#ifndef VG_CA_INT_H
#define VG_CA_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

/* One permitted DNS name; excluded: its subdomains are excluded as well (see ca.c). */
struct ca_dns {
    char *name;
    bool excluded;
};

struct ca_ip {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
};

struct ca {
    X509 *root;
    X509 *inter;
    /*
     * The root key exists only while ca_new() runs: it signs the root and the intermediate and
     * is then freed (the only reference) and this field set to NULL, before ca_new() returns.
     */
    EVP_PKEY *root_key;
    EVP_PKEY *inter_key;
    EVP_PKEY *leaf_key; /* private: the TLS server signs handshakes with it */
    EVP_PKEY *leaf_pub; /* public half only: what goes into every leaf certificate */
    ASN1_OCTET_STRING *inter_ski;
    ASN1_OCTET_STRING *leaf_ski;
    bool constrained;
    struct ca_dns *dns; /* sorted by name, no duplicates */
    size_t ndns;
    struct ca_ip *ip; /* no duplicates */
    size_t nip;
    char sha256[65];
};

/*
 * Writes "<what>: <OpenSSL errors>" (or just what) to err and empties OpenSSL's error queue of
 * this thread. err may be NULL.
 */
void ca_errf(char *err, size_t errlen, const char *what);

/* A random positive serial of up to 128 bits. 1 or 0. */
int ca_set_serial(X509 *x);

/* SHA-1 of the subjectPublicKey bits of pub (RFC 5280 4.2.1.2 method 1). NULL on failure. */
ASN1_OCTET_STRING *ca_key_id(EVP_PKEY *pub);

/* Adds an authorityKeyIdentifier holding only keyid. 1 or 0. */
int ca_add_aki(X509 *x, const ASN1_OCTET_STRING *keyid);

/* Adds basicConstraints (critical). pathlen < 0: none. 1 or 0. */
int ca_add_bc(X509 *x, bool is_ca, long pathlen);

/* Adds keyUsage (critical) with the given bits (KU_* of x509v3.h). 1 or 0. */
int ca_add_ku(X509 *x, unsigned int bits);

/*
 * The signed certificate *x as OpenSSL holds a parsed one: encoded once and decoded again, so it
 * keeps its DER (a TLS Certificate message copies it instead of re-encoding every field) and its
 * public key is a provider key (the per-handshake key type lookup and key/certificate match of
 * SSL_use_cert_and_key take the provider path, not the legacy one). Replaces *x (the old one is
 * freed). 1, or 0 with *x freed and NULL.
 */
int ca_reparse(X509 **x);

#endif
