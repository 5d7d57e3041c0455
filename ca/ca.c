/*
 * ca.c - the per-run certificate authority (SPEC §5).
 *
 * Guarantees:
 * - Every key is ECDSA P-256, generated in memory; no private key is written anywhere, and no
 *   certificate holds one: each gets a public-only key object (see build_root()).
 * - The root key signs the root and the intermediate and nothing else: ca_new() frees its only
 *   reference before returning. OpenSSL 3 frees an EC key through EC_KEY_free, which clears
 *   the private scalar (BN_clear_free) and the EC_KEY itself (OPENSSL_clear_free); see
 *   docs/internals/ca.md for the whole argument.
 * - In constrained mode the intermediate carries critical nameConstraints that permit the
 *   listed names and nothing else a TLS client would accept (docs/internals/ca.md explains
 *   the subtrees), and ca_permits() answers by the same rules a verifier applies.
 */
/* For the EC_KEY calls of public_only() below, and only those. */
#define OPENSSL_SUPPRESS_DEPRECATED

#include "ca/ca.h"
#include "ca/ca_int.h"
#include "ca/ca_test.h"
#include "common/caps.h"
#include "common/hostname.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#define CA_VALID_BACK_SECS 3600L            /* notBefore: one hour ago (clock skew) */
#define CA_VALID_SECS      (7L * 24 * 3600) /* then valid for 7 days */
#define CA_PLACEHOLDER_DNS "invalid"        /* RFC 6761 reserved TLD: permits no real name */

void ca_errf(char *err, size_t errlen, const char *what)
{
    unsigned long e;
    size_t used;

    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", what);
    while ((e = ERR_get_error()) != 0) {
        char buf[256];

        if (err == NULL || errlen == 0)
            continue;
        used = strlen(err);
        if (used + 3 >= errlen)
            continue;
        ERR_error_string_n(e, buf, sizeof(buf));
        snprintf(err + used, errlen - used, "%s%s", used > 0 ? ": " : "", buf);
    }
}

int ca_set_serial(X509 *x)
{
    BIGNUM *bn = BN_new();
    ASN1_INTEGER *serial = NULL;
    int ok = 0;

    if (bn == NULL)
        goto out;
    do {
        if (!BN_rand(bn, 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY))
            goto out;
    } while (BN_is_zero(bn));
    serial = BN_to_ASN1_INTEGER(bn, NULL);
    if (serial == NULL || !X509_set_serialNumber(x, serial))
        goto out;
    ok = 1;
out:
    ASN1_INTEGER_free(serial);
    BN_free(bn);
    return ok;
}

ASN1_OCTET_STRING *ca_key_id(EVP_PKEY *pub)
{
    X509_PUBKEY *xpk = NULL;
    const unsigned char *bits;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    int bitslen;
    ASN1_OCTET_STRING *id = NULL;

    if (!X509_PUBKEY_set(&xpk, pub) || !X509_PUBKEY_get0_param(NULL, &bits, &bitslen, NULL, xpk))
        goto out;
    if (!EVP_Digest(bits, (size_t)bitslen, md, &mdlen, EVP_sha1(), NULL))
        goto out;
    id = ASN1_OCTET_STRING_new();
    if (id != NULL && !ASN1_OCTET_STRING_set(id, md, (int)mdlen)) {
        ASN1_OCTET_STRING_free(id);
        id = NULL;
    }
out:
    X509_PUBKEY_free(xpk);
    return id;
}

int ca_add_aki(X509 *x, const ASN1_OCTET_STRING *keyid)
{
    AUTHORITY_KEYID *akid = AUTHORITY_KEYID_new();
    int ok = 0;

    if (akid == NULL || (akid->keyid = ASN1_OCTET_STRING_dup(keyid)) == NULL)
        goto out;
    ok = X509_add1_ext_i2d(x, NID_authority_key_identifier, akid, 0, X509V3_ADD_DEFAULT) == 1;
out:
    AUTHORITY_KEYID_free(akid);
    return ok;
}

int ca_add_bc(X509 *x, bool is_ca, long pathlen)
{
    BASIC_CONSTRAINTS *bc = BASIC_CONSTRAINTS_new();
    int ok = 0;

    if (bc == NULL)
        goto out;
    bc->ca = is_ca ? 0xff : 0;
    if (pathlen >= 0) {
        bc->pathlen = ASN1_INTEGER_new();
        if (bc->pathlen == NULL || !ASN1_INTEGER_set(bc->pathlen, pathlen))
            goto out;
    }
    ok = X509_add1_ext_i2d(x, NID_basic_constraints, bc, 1, X509V3_ADD_DEFAULT) == 1;
out:
    BASIC_CONSTRAINTS_free(bc);
    return ok;
}

int ca_add_ku(X509 *x, unsigned int bits)
{
    ASN1_BIT_STRING *ku = ASN1_BIT_STRING_new();
    int ok = 0;

    if (ku == NULL)
        goto out;
    /* KU_* values are the DER bit string's first two bytes, bit 0 = 0x80 of byte 0. */
    for (int i = 0; i < 9; i++) {
        unsigned int mask = i < 8 ? (0x80u >> i) : 0x8000u;

        if ((bits & mask) != 0 && !ASN1_BIT_STRING_set_bit(ku, i, 1))
            goto out;
    }
    ok = X509_add1_ext_i2d(x, NID_key_usage, ku, 1, X509V3_ADD_DEFAULT) == 1;
out:
    ASN1_BIT_STRING_free(ku);
    return ok;
}

/* --- name lists ------------------------------------------------------------------------ */

static int dns_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ca_dns *)a)->name, ((const struct ca_dns *)b)->name);
}

static struct ca_dns *dns_find(const struct ca *ca, const char *name)
{
    struct ca_dns key = {.name = (char *)name};

    if (ca->ndns == 0)
        return NULL;
    return bsearch(&key, ca->dns, ca->ndns, sizeof(key), dns_cmp);
}

/*
 * Copies, sorts and de-duplicates the DNS names, then marks as excluded every name none of
 * whose subdomains is itself listed: for those the intermediate also excludes ".name", so the
 * name is permitted exactly. A name with a listed subdomain cannot exclude its subtree (the
 * exclusion would win over the listed subdomain), so its other subdomains stay permitted.
 */
static int names_dns(struct ca *ca, const struct ca_names *names, char *err, size_t errlen)
{
    char norm[HOSTNAME_BUFSZ];
    size_t n = 0;

    ca->dns = calloc(names->ndns > 0 ? names->ndns : 1, sizeof(*ca->dns));
    if (ca->dns == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < names->ndns; i++) {
        const char *d = names->dns[i];

        if (d == NULL || hostname_normalize(d, strlen(d), norm, sizeof(norm)) != HOSTNAME_DNS ||
            strcmp(norm, d) != 0) {
            snprintf(err, errlen, "names.dns[%zu]: not a normalised DNS name", i);
            return -1;
        }
        if ((ca->dns[n].name = strdup(d)) == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        ca->dns[n++].excluded = true;
        ca->ndns = n;
    }
    qsort(ca->dns, n, sizeof(*ca->dns), dns_cmp);
    for (size_t i = 1, w = 1; i < n; i++) {
        if (strcmp(ca->dns[i].name, ca->dns[w - 1].name) == 0) {
            free(ca->dns[i].name);
            ca->ndns--;
            continue;
        }
        ca->dns[w++] = ca->dns[i];
    }
    for (size_t i = 0; i < ca->ndns; i++) {
        for (const char *p = strchr(ca->dns[i].name, '.'); p != NULL; p = strchr(p + 1, '.')) {
            struct ca_dns *anc = dns_find(ca, p + 1);

            if (anc != NULL)
                anc->excluded = false;
        }
    }
    return 0;
}

static int names_ip(struct ca *ca, const struct ca_names *names, char *err, size_t errlen)
{
    char norm[HOSTNAME_BUFSZ];

    ca->ip = calloc(names->nip > 0 ? names->nip : 1, sizeof(*ca->ip));
    if (ca->ip == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < names->nip; i++) {
        const char *s = names->ip[i];
        int kind = s == NULL ? -1 : hostname_normalize(s, strlen(s), norm, sizeof(norm));
        struct ca_ip ip = {0};
        bool dup = false;

        if (kind != HOSTNAME_IPV4 && kind != HOSTNAME_IPV6) {
            snprintf(err, errlen, "names.ip[%zu]: not an IP literal", i);
            return -1;
        }
        ip.family = kind == HOSTNAME_IPV4 ? AF_INET : AF_INET6;
        if (inet_pton(ip.family, norm, ip.addr) != 1) {
            snprintf(err, errlen, "names.ip[%zu]: not an IP literal", i);
            return -1;
        }
        for (size_t j = 0; j < ca->nip && !dup; j++)
            dup = ca->ip[j].family == ip.family && memcmp(ca->ip[j].addr, ip.addr, 16) == 0;
        if (!dup)
            ca->ip[ca->nip++] = ip;
    }
    return 0;
}

/* --- certificates ---------------------------------------------------------------------- */

static int name_add(X509_NAME *nm, int nid, const char *val)
{
    /*
     * A UTF8String set directly, without the ub-common-name check of the MBSTRING path: the
     * root's CN must contain the whole run id (up to 128 characters, SPEC §3).
     */
    X509_NAME_ENTRY *ne = X509_NAME_ENTRY_create_by_NID(
        NULL, nid, V_ASN1_UTF8STRING, (const unsigned char *)val, (int)strlen(val));
    int ok = ne != NULL && X509_NAME_add_entry(nm, ne, -1, 0) == 1;

    X509_NAME_ENTRY_free(ne);
    return ok;
}

static X509_NAME *subject_for(const char *prefix, const char *run_id)
{
    X509_NAME *nm = X509_NAME_new();
    char cn[160 + VG_RUN_ID_MAX];

    snprintf(cn, sizeof(cn), "%s %s", prefix, run_id);
    if (nm == NULL || !name_add(nm, NID_organizationName, "vaultgate") ||
        !name_add(nm, NID_commonName, cn)) {
        X509_NAME_free(nm);
        return NULL;
    }
    return nm;
}

/*
 * The public half of key, as a key object that holds no private part. It is deliberately a
 * legacy (EC_KEY-backed) key: X509_set_pubkey() encodes a provider key through OSSL_ENCODER,
 * which costs about 160 us on OpenSSL 3.0 - most of a leaf's minting time - while a legacy key
 * is encoded by its ASN.1 method in about 5 us (measured, docs/internals/ca.md). It is built
 * from the DER SubjectPublicKeyInfo, so no private material ever goes near it.
 */
static EVP_PKEY *public_only(EVP_PKEY *key)
{
    unsigned char *der = NULL;
    const unsigned char *p;
    int len = i2d_PUBKEY(key, &der);
    EC_KEY *ec = NULL;
    EVP_PKEY *pub = NULL;

    if (len <= 0)
        goto out;
    p = der;
    if ((ec = d2i_EC_PUBKEY(NULL, &p, len)) == NULL || (pub = EVP_PKEY_new()) == NULL)
        goto out;
    if (EVP_PKEY_assign_EC_KEY(pub, ec) != 1) {
        EVP_PKEY_free(pub);
        pub = NULL;
        goto out;
    }
    ec = NULL; /* owned by pub now */
out:
    EC_KEY_free(ec);
    OPENSSL_free(der);
    return pub;
}

int ca_reparse(X509 **x)
{
    unsigned char *der = NULL;
    const unsigned char *p;
    int len = *x != NULL ? i2d_X509(*x, &der) : -1;
    X509 *y = NULL;

    if (len > 0) {
        p = der;
        y = d2i_X509(NULL, &p, len);
    }
    OPENSSL_free(der);
    X509_free(*x);
    *x = y;
    return y != NULL;
}

static int add_ski(X509 *x, ASN1_OCTET_STRING *ski)
{
    return X509_add1_ext_i2d(x, NID_subject_key_identifier, ski, 0, X509V3_ADD_DEFAULT) == 1;
}

/*
 * Every certificate gets a public-only key object: X509_set_pubkey() keeps a reference to the
 * key it is given in the certificate, and given the root key it would keep the root's private
 * key alive (and reachable through X509_get0_pubkey) for as long as the root certificate lives.
 */
static X509 *build_root(struct ca *ca, const char *run_id, ASN1_OCTET_STRING **ski_out)
{
    X509 *x = X509_new();
    X509_NAME *nm = subject_for("vaultgate run", run_id);
    EVP_PKEY *pub = public_only(ca->root_key);
    ASN1_OCTET_STRING *ski = pub == NULL ? NULL : ca_key_id(pub);
    int ok = 0;

    if (x == NULL || nm == NULL || ski == NULL || !X509_set_version(x, X509_VERSION_3) ||
        !ca_set_serial(x) || !X509_set_subject_name(x, nm) || !X509_set_issuer_name(x, nm))
        goto out;
    if (X509_gmtime_adj(X509_getm_notBefore(x), -CA_VALID_BACK_SECS) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(x), CA_VALID_SECS - CA_VALID_BACK_SECS) == NULL)
        goto out;
    if (!X509_set_pubkey(x, pub) || !ca_add_bc(x, true, -1) ||
        !ca_add_ku(x, KU_KEY_CERT_SIGN | KU_CRL_SIGN) || !add_ski(x, ski))
        goto out;
    if (X509_sign(x, ca->root_key, EVP_sha256()) <= 0)
        goto out;
    ok = 1;
out:
    EVP_PKEY_free(pub);
    X509_NAME_free(nm);
    if (!ok) {
        X509_free(x);
        ASN1_OCTET_STRING_free(ski);
        return NULL;
    }
    *ski_out = ski;
    return x;
}

static int subtree_push(STACK_OF(GENERAL_SUBTREE) * *sk, int type, const void *data, int len)
{
    GENERAL_SUBTREE *st = GENERAL_SUBTREE_new();
    ASN1_STRING *s = type == GEN_DNS ? ASN1_IA5STRING_new() : ASN1_OCTET_STRING_new();

    if (st == NULL || s == NULL || !ASN1_STRING_set(s, data, len))
        goto fail;
    GENERAL_NAME_set0_value(st->base, type, s);
    s = NULL;
    if (*sk == NULL && (*sk = sk_GENERAL_SUBTREE_new_null()) == NULL)
        goto fail;
    if (sk_GENERAL_SUBTREE_push(*sk, st) <= 0)
        goto fail;
    return 1;
fail:
    ASN1_STRING_free(s);
    GENERAL_SUBTREE_free(st);
    return 0;
}

/* An iPAddress subtree: address followed by mask (RFC 5280 4.2.1.10). */
static int subtree_ip(STACK_OF(GENERAL_SUBTREE) * *sk, int family, const unsigned char *addr,
                      bool full)
{
    unsigned char buf[32];
    int n = family == AF_INET ? 4 : 16;

    memset(buf, 0, sizeof(buf));
    if (addr != NULL)
        memcpy(buf, addr, (size_t)n);
    memset(buf + n, full ? 0xff : 0x00, (size_t)n);
    return subtree_push(sk, GEN_IPADD, buf, 2 * n);
}

/*
 * permitted: each listed DNS name (or the reserved "invalid" when none), each listed IP /32 or
 * /128. excluded: ".name" for each name marked excluded; 0.0.0.0/0 or ::/0 for an address
 * family with no listed address.
 */
static NAME_CONSTRAINTS *build_nc(const struct ca *ca)
{
    NAME_CONSTRAINTS *nc = NAME_CONSTRAINTS_new();
    bool has4 = false, has6 = false;
    char dot[HOSTNAME_BUFSZ + 1];

    if (nc == NULL)
        return NULL;
    if (ca->ndns == 0 && !subtree_push(&nc->permittedSubtrees, GEN_DNS, CA_PLACEHOLDER_DNS,
                                       (int)strlen(CA_PLACEHOLDER_DNS)))
        goto fail;
    for (size_t i = 0; i < ca->ndns; i++) {
        const char *d = ca->dns[i].name;

        if (!subtree_push(&nc->permittedSubtrees, GEN_DNS, d, (int)strlen(d)))
            goto fail;
        if (!ca->dns[i].excluded)
            continue;
        snprintf(dot, sizeof(dot), ".%s", d);
        if (!subtree_push(&nc->excludedSubtrees, GEN_DNS, dot, (int)strlen(dot)))
            goto fail;
    }
    for (size_t i = 0; i < ca->nip; i++) {
        has4 |= ca->ip[i].family == AF_INET;
        has6 |= ca->ip[i].family == AF_INET6;
        if (!subtree_ip(&nc->permittedSubtrees, ca->ip[i].family, ca->ip[i].addr, true))
            goto fail;
    }
    if ((!has4 && !subtree_ip(&nc->excludedSubtrees, AF_INET, NULL, false)) ||
        (!has6 && !subtree_ip(&nc->excludedSubtrees, AF_INET6, NULL, false)))
        goto fail;
    return nc;
fail:
    NAME_CONSTRAINTS_free(nc);
    return NULL;
}

static X509 *build_inter(struct ca *ca, const char *run_id, const ASN1_OCTET_STRING *root_ski)
{
    X509 *x = X509_new();
    X509_NAME *nm = subject_for("vaultgate intermediate", run_id);
    EVP_PKEY *pub = public_only(ca->inter_key);
    NAME_CONSTRAINTS *nc = NULL;
    int ok = 0;

    if (x == NULL || nm == NULL || pub == NULL || !X509_set_version(x, X509_VERSION_3) ||
        !ca_set_serial(x) || !X509_set_subject_name(x, nm) ||
        !X509_set_issuer_name(x, X509_get_subject_name(ca->root)))
        goto out;
    if (!X509_set1_notBefore(x, X509_get0_notBefore(ca->root)) ||
        !X509_set1_notAfter(x, X509_get0_notAfter(ca->root)))
        goto out;
    if (!X509_set_pubkey(x, pub) || !ca_add_bc(x, true, 0) ||
        !ca_add_ku(x, KU_KEY_CERT_SIGN | KU_CRL_SIGN) || !add_ski(x, ca->inter_ski) ||
        !ca_add_aki(x, root_ski))
        goto out;
    if (ca->constrained) {
        if ((nc = build_nc(ca)) == NULL ||
            X509_add1_ext_i2d(x, NID_name_constraints, nc, 1, X509V3_ADD_DEFAULT) != 1)
            goto out;
    }
    if (X509_sign(x, ca->root_key, EVP_sha256()) <= 0 || !ca_reparse(&x))
        goto out;
    ok = 1;
out:
    EVP_PKEY_free(pub);
    NAME_CONSTRAINTS_free(nc);
    X509_NAME_free(nm);
    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static int run_id_ok(const char *id)
{
    size_t n = id == NULL ? 0 : strlen(id);

    if (n == 0 || n > VG_RUN_ID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)id[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-'))
            return 0;
    }
    return 1;
}

static int fingerprint(struct ca *ca)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    if (!X509_digest(ca->root, EVP_sha256(), md, &n) || n != 32)
        return 0;
    for (unsigned int i = 0; i < n; i++)
        snprintf(ca->sha256 + 2 * i, 3, "%02x", md[i]);
    return 1;
}

#ifdef VG_CA_TEST_HOOKS
void (*ca_test_root_key_hook)(EVP_PKEY *root_key);
#endif

/* Frees the root key, the one reference there is; see the comment at the top of the file. */
static void wipe_root_key(struct ca *ca)
{
#ifdef VG_CA_TEST_HOOKS
    if (ca_test_root_key_hook != NULL && ca->root_key != NULL)
        ca_test_root_key_hook(ca->root_key);
#endif
    EVP_PKEY_free(ca->root_key);
    ca->root_key = NULL;
}

static int make_keys_and_certs(struct ca *ca, const char *run_id, char *err, size_t errlen)
{
    ASN1_OCTET_STRING *root_ski = NULL;
    int der_len, rc = -1;

    ca->root_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    ca->inter_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    ca->leaf_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (ca->root_key == NULL || ca->inter_key == NULL || ca->leaf_key == NULL) {
        ca_errf(err, errlen, "generating P-256 keys");
        goto out;
    }
    ca->leaf_pub = public_only(ca->leaf_key);
    ca->inter_ski = ca_key_id(ca->inter_key);
    ca->leaf_ski = ca_key_id(ca->leaf_pub);
    if (ca->leaf_pub == NULL || ca->inter_ski == NULL || ca->leaf_ski == NULL) {
        ca_errf(err, errlen, "deriving key identifiers");
        goto out;
    }
    if ((ca->root = build_root(ca, run_id, &root_ski)) == NULL) {
        ca_errf(err, errlen, "building the root certificate");
        goto out;
    }
    if ((ca->inter = build_inter(ca, run_id, root_ski)) == NULL) {
        ca_errf(err, errlen, "building the intermediate certificate");
        goto out;
    }
    der_len = i2d_X509(ca->inter, NULL);
    if (der_len <= 0 || der_len > CA_INTERMEDIATE_MAX_DER) {
        snprintf(err, errlen,
                 "name constraints too large: the intermediate would be %d bytes (limit %d; "
                 "TLS clients refuse larger certificate chains); list fewer exact names",
                 der_len, CA_INTERMEDIATE_MAX_DER);
        ERR_clear_error();
        goto out;
    }
    if (!fingerprint(ca)) {
        ca_errf(err, errlen, "hashing the root certificate");
        goto out;
    }
    rc = 0;
out:
    /* Success or failure, the root key does not outlive this function. */
    wipe_root_key(ca);
    ASN1_OCTET_STRING_free(root_ski);
    return rc;
}

struct ca *ca_new(const char *run_id, const struct ca_names *names, char *err, size_t errlen)
{
    struct ca *ca = NULL;
    char scratch[8];

    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    if (!run_id_ok(run_id)) {
        snprintf(err, errlen, "run id must be 1-%d characters of [A-Za-z0-9._:-]", VG_RUN_ID_MAX);
        return NULL;
    }
    if (names == NULL) {
        snprintf(err, errlen, "no name list given");
        return NULL;
    }
    if ((ca = calloc(1, sizeof(*ca))) == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ca->constrained = names->constrained;
    if (ca->constrained &&
        (names_dns(ca, names, err, errlen) != 0 || names_ip(ca, names, err, errlen) != 0))
        goto fail;
    if (make_keys_and_certs(ca, run_id, err, errlen) != 0)
        goto fail;
    return ca;
fail:
    ca_free(&ca);
    return NULL;
}

void ca_free(struct ca **cap)
{
    struct ca *ca;

    if (cap == NULL || *cap == NULL)
        return;
    ca = *cap;
    /* EVP_PKEY_free wipes EC private keys (BN_clear_free); see the top of the file. */
    EVP_PKEY_free(ca->root_key);
    EVP_PKEY_free(ca->inter_key);
    EVP_PKEY_free(ca->leaf_key);
    EVP_PKEY_free(ca->leaf_pub);
    ASN1_OCTET_STRING_free(ca->inter_ski);
    ASN1_OCTET_STRING_free(ca->leaf_ski);
    X509_free(ca->root);
    X509_free(ca->inter);
    for (size_t i = 0; i < ca->ndns; i++)
        free(ca->dns[i].name);
    free(ca->dns);
    free(ca->ip);
    free(ca);
    *cap = NULL;
}

X509 *ca_root(const struct ca *ca)
{
    return ca->root;
}

X509 *ca_intermediate(const struct ca *ca)
{
    return ca->inter;
}

EVP_PKEY *ca_leaf_key(const struct ca *ca)
{
    return ca->leaf_key;
}

bool ca_constrained(const struct ca *ca)
{
    return ca->constrained;
}

static int permits_dns(const struct ca *ca, const char *name)
{
    int permitted = 0;

    if (ca->ndns == 0) {
        size_t n = strlen(name), p = strlen(CA_PLACEHOLDER_DNS);

        return strcmp(name, CA_PLACEHOLDER_DNS) == 0 ||
               (n > p && name[n - p - 1] == '.' && strcmp(name + n - p, CA_PLACEHOLDER_DNS) == 0);
    }
    if (dns_find(ca, name) != NULL)
        return 1;
    for (const char *p = strchr(name, '.'); p != NULL; p = strchr(p + 1, '.')) {
        const struct ca_dns *anc = dns_find(ca, p + 1);

        if (anc == NULL)
            continue;
        if (anc->excluded)
            return 0;
        permitted = 1;
    }
    return permitted;
}

int ca_permits(const struct ca *ca, const char *name)
{
    char norm[HOSTNAME_BUFSZ];
    unsigned char addr[16];
    int kind, family;

    if (ca == NULL || name == NULL)
        return 0;
    /* Only the normalised form, as leaf_mint() accepts it, gets a yes. */
    kind = hostname_normalize(name, strlen(name), norm, sizeof(norm));
    if (kind < 0 || strcmp(norm, name) != 0)
        return 0;
    if (kind == HOSTNAME_DNS)
        return !ca->constrained || permits_dns(ca, name);
    if (!ca->constrained)
        return 1;
    family = kind == HOSTNAME_IPV4 ? AF_INET : AF_INET6;
    if (inet_pton(family, norm, addr) != 1)
        return 0;
    for (size_t i = 0; i < ca->nip; i++) {
        if (ca->ip[i].family == family &&
            memcmp(ca->ip[i].addr, addr, family == AF_INET ? 4 : 16) == 0)
            return 1;
    }
    return 0;
}

int ca_root_pem(const struct ca *ca, char **pem, size_t *len)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *data, *copy = NULL;
    long n;
    int rc = -1;

    if (bio == NULL || !PEM_write_bio_X509(bio, ca->root))
        goto out;
    n = BIO_get_mem_data(bio, &data);
    if (n <= 0 || (copy = malloc((size_t)n + 1)) == NULL)
        goto out;
    memcpy(copy, data, (size_t)n);
    copy[n] = '\0';
    *pem = copy;
    if (len != NULL)
        *len = (size_t)n;
    rc = 0;
out:
    BIO_free(bio);
    ERR_clear_error();
    return rc;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int ca_write_root(const struct ca *ca, const char *path, char *err, size_t errlen)
{
    char *pem = NULL, *tmp = NULL;
    size_t len = 0, plen;
    int fd = -1, rc = -1;

    if (ca_root_pem(ca, &pem, &len) != 0) {
        snprintf(err, errlen, "%s: cannot encode the root certificate", path);
        goto out;
    }
    plen = strlen(path);
    if ((tmp = malloc(plen + 8)) == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".XXXXXX", 8);
    if ((fd = mkstemp(tmp)) < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        free(tmp);
        tmp = NULL;
        goto out;
    }
    if (fchmod(fd, 0644) != 0 || write_all(fd, pem, len) != 0 || fsync(fd) != 0) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    free(tmp);
    tmp = NULL;
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    if (tmp != NULL) {
        unlink(tmp);
        free(tmp);
    }
    free(pem);
    return rc;
}

void ca_root_sha256(const struct ca *ca, char out[65])
{
    memcpy(out, ca->sha256, 65);
}

EVP_PKEY *ca_test_root_key(const struct ca *ca)
{
    return ca->root_key;
}

EVP_PKEY *ca_test_intermediate_key(const struct ca *ca)
{
    return ca->inter_key;
}
