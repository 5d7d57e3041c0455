/*
 * leaf.c - one leaf certificate for one host, signed by the run's intermediate (SPEC §5).
 *
 * Guarantees: the host is refused unless hostname_normalize() accepts it and gives it back
 * unchanged, so only [a-z0-9.-] names and canonical IP literals reach a certificate. The SAN is
 * built as one GENERAL_NAME (dNSName or iPAddress) from those bytes, never by formatting a
 * configuration string, so no input can add a second name. Every leaf: v3, random positive
 * serial, validity equal to the intermediate's, CA:FALSE, keyUsage digitalSignature, EKU
 * serverAuth, SKI/AKI, ECDSA with SHA-256, public key the run's one leaf key.
 *
 * leaf_mint() does not check the intermediate's name constraints: ca_permits() answers that,
 * and the caller decides (a leaf outside the constraints simply fails verification).
 */
#include "ca/leaf.h"
#include "ca/ca_int.h"
#include "common/hostname.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

/* RFC 5280 ub-common-name: longer DNS names go into the SAN only. */
#define LEAF_CN_MAX 64

static int add_san(X509 *x, int kind, const char *host)
{
    GENERAL_NAMES *names = GENERAL_NAMES_new();
    GENERAL_NAME *gn = GENERAL_NAME_new();
    ASN1_STRING *s = NULL;
    unsigned char addr[16];
    int ok = 0;

    if (names == NULL || gn == NULL)
        goto out;
    if (kind == HOSTNAME_DNS) {
        s = ASN1_IA5STRING_new();
        if (s == NULL || !ASN1_STRING_set(s, host, (int)strlen(host)))
            goto out;
    } else {
        int family = kind == HOSTNAME_IPV4 ? AF_INET : AF_INET6;

        s = ASN1_OCTET_STRING_new();
        if (s == NULL || inet_pton(family, host, addr) != 1 ||
            !ASN1_STRING_set(s, addr, family == AF_INET ? 4 : 16))
            goto out;
    }
    GENERAL_NAME_set0_value(gn, kind == HOSTNAME_DNS ? GEN_DNS : GEN_IPADD, s);
    s = NULL;
    if (sk_GENERAL_NAME_push(names, gn) <= 0)
        goto out;
    gn = NULL;
    ok = X509_add1_ext_i2d(x, NID_subject_alt_name, names, 0, X509V3_ADD_DEFAULT) == 1;
out:
    ASN1_STRING_free(s);
    GENERAL_NAME_free(gn);
    GENERAL_NAMES_free(names);
    return ok;
}

static int add_eku(X509 *x)
{
    EXTENDED_KEY_USAGE *eku = sk_ASN1_OBJECT_new_null();
    int ok = 0;

    /* OBJ_nid2obj returns a static object; freeing the stack's items is harmless. */
    if (eku == NULL || sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_server_auth)) <= 0)
        goto out;
    ok = X509_add1_ext_i2d(x, NID_ext_key_usage, eku, 0, X509V3_ADD_DEFAULT) == 1;
out:
    sk_ASN1_OBJECT_pop_free(eku, ASN1_OBJECT_free);
    return ok;
}

/* O=vaultgate, plus CN=host for a DNS name that fits ub-common-name. */
static int set_subject(X509 *x, int kind, const char *host)
{
    X509_NAME *nm = X509_get_subject_name(x);

    if (!X509_NAME_add_entry_by_NID(nm, NID_organizationName, MBSTRING_ASC,
                                    (const unsigned char *)"vaultgate", -1, -1, 0))
        return 0;
    /*
     * No CN for IP literals: OpenSSL checks a CN that looks like a host name against the DNS
     * constraints, and "192.0.2.1" would fail them.
     */
    if (kind != HOSTNAME_DNS || strlen(host) > LEAF_CN_MAX)
        return 1;
    return X509_NAME_add_entry_by_NID(nm, NID_commonName, MBSTRING_ASC, (const unsigned char *)host,
                                      -1, -1, 0);
}

X509 *leaf_mint(const struct ca *ca, const char *host, char *err, size_t errlen)
{
    char norm[HOSTNAME_BUFSZ];
    X509 *x = NULL;
    int kind;

    if (ca == NULL || host == NULL) {
        snprintf(err, errlen, "leaf: no CA or no host");
        return NULL;
    }
    kind = hostname_normalize(host, strlen(host), norm, sizeof(norm));
    if (kind < 0) {
        snprintf(err, errlen, "leaf: not a valid host name");
        return NULL;
    }
    if (strcmp(norm, host) != 0) {
        snprintf(err, errlen, "leaf: host name not in normalised form");
        return NULL;
    }
    x = X509_new();
    if (x == NULL || !X509_set_version(x, X509_VERSION_3) || !ca_set_serial(x) ||
        !X509_set_issuer_name(x, X509_get_subject_name(ca->inter)) || !set_subject(x, kind, host) ||
        !X509_set1_notBefore(x, X509_get0_notBefore(ca->inter)) ||
        !X509_set1_notAfter(x, X509_get0_notAfter(ca->inter)) || !X509_set_pubkey(x, ca->leaf_pub))
        goto fail;
    if (!ca_add_bc(x, false, -1) || !ca_add_ku(x, KU_DIGITAL_SIGNATURE) || !add_eku(x) ||
        !add_san(x, kind, host) ||
        X509_add1_ext_i2d(x, NID_subject_key_identifier, ca->leaf_ski, 0, X509V3_ADD_DEFAULT) !=
            1 ||
        !ca_add_aki(x, ca->inter_ski))
        goto fail;
    /* reparsed: served on every full handshake, see ca_reparse() */
    if (X509_sign(x, ca->inter_key, EVP_sha256()) <= 0 || !ca_reparse(&x))
        goto fail;
    return x;
fail:
    ca_errf(err, errlen, "leaf: cannot build the certificate");
    X509_free(x);
    return NULL;
}
