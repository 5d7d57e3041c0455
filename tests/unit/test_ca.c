/*
 * test_ca.c - the per-run CA and leaf minting (ca/ca.c, ca/leaf.c); the certificate cache is
 * test_certcache.c.
 *
 * Every key and certificate is generated here at test time. Chains are checked the way a
 * strict TLS client checks them: X509_verify_cert with the root as the only trust anchor, the
 * intermediate as untrusted, X509_V_FLAG_X509_STRICT, purpose sslserver and a host (or IP)
 * check, on DER round-tripped copies (what goes over the wire).
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "ca/ca_test.h"
#include "ca/certcache.h"
#include "ca/leaf.h"
#include "common/caps.h"
#include "common/hostname.h"
#include "tests/unit/testca.h"

Suite *suite_ca(void);

static const char *const names_dns[] = {"example.com", "api.example.com", "other.org"};
static const char *const names_ip[] = {"192.0.2.1", "2001:db8::1"};

static struct ca *listed_ca(void)
{
    return testca_new(true, names_dns, 3, names_ip, 2);
}

static X509 *mint(const struct ca *ca, const char *host)
{
    char err[512] = "";
    X509 *x = leaf_mint(ca, host, err, sizeof(err));

    ck_assert_msg(x != NULL, "leaf_mint(%s): %s", host, err);
    return x;
}

static void *ext_d2i(const X509 *x, int nid, int *crit)
{
    int c = -2;
    void *v = X509_get_ext_d2i(x, nid, &c, NULL);

    if (crit != NULL)
        *crit = c;
    return v;
}

static int key_usage_bits(const X509 *x, int *crit)
{
    ASN1_BIT_STRING *ku = ext_d2i(x, NID_key_usage, crit);
    int bits = 0;

    ck_assert_ptr_nonnull(ku);
    for (int i = 0; i < 9; i++)
        if (ASN1_BIT_STRING_get_bit(ku, i))
            bits |= 1 << i;
    ASN1_BIT_STRING_free(ku);
    return bits; /* bit 0 digitalSignature ... bit 5 keyCertSign, bit 6 cRLSign */
}

static void check_p256(EVP_PKEY *pk)
{
    char group[64] = "";
    size_t glen = 0;

    ck_assert_ptr_nonnull(pk);
    ck_assert_int_eq(EVP_PKEY_get_base_id(pk), EVP_PKEY_EC);
    ck_assert_int_eq(EVP_PKEY_get_group_name(pk, group, sizeof(group), &glen), 1);
    ck_assert_str_eq(group, "prime256v1");
}

static void check_serial(const X509 *x)
{
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);

    ck_assert_ptr_nonnull(bn);
    ck_assert(!BN_is_negative(bn));
    ck_assert(!BN_is_zero(bn));
    ck_assert_int_le(BN_num_bits(bn), 128);
    BN_free(bn);
}

static void check_ski_matches_key(X509 *x)
{
    const ASN1_OCTET_STRING *ski = X509_get0_subject_key_id(x);
    X509_PUBKEY *xpk = X509_get_X509_PUBKEY(x);
    const unsigned char *bits;
    unsigned char md[20];
    int blen;
    ASN1_OCTET_STRING *crit_probe;
    int crit;

    ck_assert_ptr_nonnull(ski);
    ck_assert_int_eq(X509_PUBKEY_get0_param(NULL, &bits, &blen, NULL, xpk), 1);
    ck_assert_int_eq(EVP_Digest(bits, (size_t)blen, md, NULL, EVP_sha1(), NULL), 1);
    ck_assert_int_eq(ASN1_STRING_length(ski), 20);
    ck_assert_mem_eq(ASN1_STRING_get0_data(ski), md, 20);
    crit_probe = ext_d2i(x, NID_subject_key_identifier, &crit);
    ck_assert_int_eq(crit, 0);
    ASN1_OCTET_STRING_free(crit_probe);
}

static void check_aki(X509 *x, X509 *issuer)
{
    const ASN1_OCTET_STRING *aki = X509_get0_authority_key_id(x);
    AUTHORITY_KEYID *ak;
    int crit;

    ck_assert_ptr_nonnull(aki);
    ck_assert_int_eq(ASN1_OCTET_STRING_cmp(aki, X509_get0_subject_key_id(issuer)), 0);
    ak = ext_d2i(x, NID_authority_key_identifier, &crit);
    ck_assert_int_eq(crit, 0);
    ck_assert_ptr_null(ak->issuer);
    ck_assert_ptr_null(ak->serial);
    AUTHORITY_KEYID_free(ak);
}

static void name_entry(const X509_NAME *nm, int nid, char *out, size_t outsz)
{
    out[0] = '\0';
    X509_NAME_get_text_by_NID(nm, nid, out, (int)outsz);
}

static int within(const X509 *inner, const X509 *outer)
{
    return ASN1_TIME_compare(X509_get0_notBefore(inner), X509_get0_notBefore(outer)) >= 0 &&
           ASN1_TIME_compare(X509_get0_notAfter(inner), X509_get0_notAfter(outer)) <= 0;
}

/* --- ca suite -------------------------------------------------------------------------- */

START_TEST(test_root_fields)
{
    struct ca *ca = listed_ca();
    X509 *root = ca_root(ca);
    BASIC_CONSTRAINTS *bc;
    int crit, day;
    int sec;
    char text[256];
    time_t now = time(NULL);

    ck_assert_int_eq(X509_get_version(root), X509_VERSION_3);
    ck_assert_int_eq(X509_NAME_cmp(X509_get_subject_name(root), X509_get_issuer_name(root)), 0);
    ck_assert_int_eq(X509_verify(root, X509_get0_pubkey(root)), 1);
    name_entry(X509_get_subject_name(root), NID_commonName, text, sizeof(text));
    ck_assert_str_eq(text, "vaultgate run run-42");
    name_entry(X509_get_subject_name(root), NID_organizationName, text, sizeof(text));
    ck_assert_str_eq(text, "vaultgate");
    bc = ext_d2i(root, NID_basic_constraints, &crit);
    ck_assert_ptr_nonnull(bc);
    ck_assert_int_eq(crit, 1);
    ck_assert(bc->ca);
    BASIC_CONSTRAINTS_free(bc);
    ck_assert_int_eq(key_usage_bits(root, &crit), (1 << 5) | (1 << 6));
    ck_assert_int_eq(crit, 1);
    check_serial(root);
    check_ski_matches_key(root);
    check_p256(X509_get0_pubkey(root));
    ck_assert_int_eq(X509_get_signature_nid(root), NID_ecdsa_with_SHA256);
    /* valid from one hour ago for 7 days */
    ck_assert_int_eq(
        ASN1_TIME_diff(&day, &sec, X509_get0_notBefore(root), X509_get0_notAfter(root)), 1);
    ck_assert_int_eq(day, 7);
    ck_assert_int_eq(sec, 0);
    ck_assert_int_eq(X509_cmp_time(X509_get0_notBefore(root), &(time_t){now - 3600 + 60}), -1);
    ck_assert_int_eq(X509_cmp_time(X509_get0_notBefore(root), &(time_t){now - 3600 - 60}), 1);
    ck_assert_ptr_null(ext_d2i(root, NID_name_constraints, NULL));
    ca_free(&ca);
    ck_assert_ptr_null(ca);
}
END_TEST

START_TEST(test_root_serials_random)
{
    struct ca *a = listed_ca(), *b = listed_ca();
    char fa[65], fb[65];

    ck_assert_int_ne(
        ASN1_INTEGER_cmp(X509_get0_serialNumber(ca_root(a)), X509_get0_serialNumber(ca_root(b))),
        0);
    ca_root_sha256(a, fa);
    ca_root_sha256(b, fb);
    ck_assert_str_ne(fa, fb);
    ca_free(&a);
    ca_free(&b);
}
END_TEST

START_TEST(test_intermediate_fields)
{
    struct ca *ca = listed_ca();
    X509 *root = ca_root(ca), *inter = ca_intermediate(ca);
    BASIC_CONSTRAINTS *bc;
    NAME_CONSTRAINTS *nc;
    int crit;

    ck_assert(ca_constrained(ca));
    ck_assert_int_eq(X509_get_version(inter), X509_VERSION_3);
    ck_assert_int_eq(X509_NAME_cmp(X509_get_issuer_name(inter), X509_get_subject_name(root)), 0);
    ck_assert_int_eq(X509_verify(inter, X509_get0_pubkey(root)), 1);
    bc = ext_d2i(inter, NID_basic_constraints, &crit);
    ck_assert_int_eq(crit, 1);
    ck_assert(bc->ca);
    ck_assert_ptr_nonnull(bc->pathlen);
    ck_assert_int_eq(ASN1_INTEGER_get(bc->pathlen), 0);
    BASIC_CONSTRAINTS_free(bc);
    ck_assert_int_eq(key_usage_bits(inter, &crit), (1 << 5) | (1 << 6));
    ck_assert_int_eq(crit, 1);
    check_serial(inter);
    check_ski_matches_key(inter);
    check_aki(inter, root);
    check_p256(X509_get0_pubkey(inter));
    ck_assert_int_eq(X509_get_signature_nid(inter), NID_ecdsa_with_SHA256);
    ck_assert(within(inter, root));
    nc = ext_d2i(inter, NID_name_constraints, &crit);
    ck_assert_ptr_nonnull(nc);
    ck_assert_int_eq(crit, 1);
    /* 3 DNS names + 2 IPs permitted; ".api.example.com" and ".other.org" excluded (not
     * ".example.com": api.example.com is listed below it); both IP families are listed. */
    ck_assert_int_eq(sk_GENERAL_SUBTREE_num(nc->permittedSubtrees), 5);
    ck_assert_int_eq(sk_GENERAL_SUBTREE_num(nc->excludedSubtrees), 2);
    NAME_CONSTRAINTS_free(nc);
    ca_free(&ca);
}
END_TEST

START_TEST(test_unconstrained_has_no_name_constraints)
{
    struct ca *ca = testca_new(false, names_dns, 3, NULL, 0);
    X509 *leaf = mint(ca, "anything.example.net");

    ck_assert(!ca_constrained(ca));
    ck_assert_ptr_null(ext_d2i(ca_intermediate(ca), NID_name_constraints, NULL));
    ck_assert_int_eq(testca_verify(ca, leaf, "anything.example.net"), X509_V_OK);
    ck_assert(ca_permits(ca, "anything.example.net"));
    ck_assert(ca_permits(ca, "203.0.113.9"));
    ck_assert(!ca_permits(ca, "Not.Normalised"));
    X509_free(leaf);
    ca_free(&ca);
}
END_TEST

START_TEST(test_root_key_gone)
{
    struct ca *ca = listed_ca();
    X509 *root = ca_root(ca);
    X509 *leaf = mint(ca, "api.example.com");

    /* The slot is empty, and neither private key the CA still holds is the root's. */
    ck_assert_ptr_null(ca_test_root_key(ca));
    ck_assert_ptr_nonnull(ca_test_intermediate_key(ca));
    ck_assert_int_eq(X509_check_private_key(root, ca_test_intermediate_key(ca)), 0);
    ck_assert_int_eq(X509_check_private_key(root, ca_leaf_key(ca)), 0);
    ck_assert_int_eq(X509_check_private_key(ca_intermediate(ca), ca_test_intermediate_key(ca)), 1);
    /* The only signing API signs with the intermediate: the root's key verifies nothing. */
    ck_assert_int_ne(X509_verify(leaf, X509_get0_pubkey(root)), 1);
    ck_assert_int_eq(X509_verify(leaf, X509_get0_pubkey(ca_intermediate(ca))), 1);
    ERR_clear_error();
    X509_free(leaf);
    ca_free(&ca);
}
END_TEST

/* No certificate pins a private key through its cached public key. */
START_TEST(test_certs_hold_no_private_key)
{
    struct ca *ca = listed_ca();
    X509 *leaf = mint(ca, "api.example.com");
    X509 *certs[] = {ca_root(ca), ca_intermediate(ca), leaf};

    /* positive control: the run's leaf key does have a private part */
    ck_assert_int_gt(i2d_PrivateKey(ca_leaf_key(ca), NULL), 0);
    for (size_t i = 0; i < 3; i++) {
        EVP_PKEY *pk = X509_get0_pubkey(certs[i]);

        ck_assert_ptr_nonnull(pk);
        ck_assert_msg(i2d_PrivateKey(pk, NULL) <= 0, "certificate %zu holds a private key", i);
    }
    ERR_clear_error();
    X509_free(leaf);
    ca_free(&ca);
}
END_TEST

START_TEST(test_leaf_fields)
{
    struct ca *ca = listed_ca();
    X509 *leaf = mint(ca, "api.example.com"), *leaf2 = mint(ca, "other.org");
    GENERAL_NAMES *san;
    const GENERAL_NAME *gn;
    EXTENDED_KEY_USAGE *eku;
    BASIC_CONSTRAINTS *bc;
    int crit;
    char text[256];

    ck_assert_int_eq(X509_get_version(leaf), X509_VERSION_3);
    san = ext_d2i(leaf, NID_subject_alt_name, &crit);
    ck_assert_ptr_nonnull(san);
    ck_assert_int_eq(crit, 0);
    ck_assert_int_eq(sk_GENERAL_NAME_num(san), 1);
    gn = sk_GENERAL_NAME_value(san, 0);
    ck_assert_int_eq(gn->type, GEN_DNS);
    ck_assert_int_eq(ASN1_STRING_length(gn->d.dNSName), 15);
    ck_assert_mem_eq(ASN1_STRING_get0_data(gn->d.dNSName), "api.example.com", 15);
    GENERAL_NAMES_free(san);
    eku = ext_d2i(leaf, NID_ext_key_usage, &crit);
    ck_assert_int_eq(crit, 0);
    ck_assert_int_eq(sk_ASN1_OBJECT_num(eku), 1);
    ck_assert_int_eq(OBJ_obj2nid(sk_ASN1_OBJECT_value(eku, 0)), NID_server_auth);
    sk_ASN1_OBJECT_pop_free(eku, ASN1_OBJECT_free);
    bc = ext_d2i(leaf, NID_basic_constraints, &crit);
    ck_assert_int_eq(crit, 1);
    ck_assert(!bc->ca);
    ck_assert_ptr_null(bc->pathlen);
    BASIC_CONSTRAINTS_free(bc);
    ck_assert_int_eq(key_usage_bits(leaf, &crit), 1 << 0);
    ck_assert_int_eq(crit, 1);
    check_ski_matches_key(leaf);
    check_aki(leaf, ca_intermediate(ca));
    check_serial(leaf);
    check_p256(X509_get0_pubkey(leaf));
    ck_assert_int_eq(X509_check_private_key(leaf, ca_leaf_key(ca)), 1);
    ck_assert_int_eq(X509_get_signature_nid(leaf), NID_ecdsa_with_SHA256);
    ck_assert(within(leaf, ca_intermediate(ca)));
    name_entry(X509_get_subject_name(leaf), NID_commonName, text, sizeof(text));
    ck_assert_str_eq(text, "api.example.com");
    ck_assert_int_eq(
        X509_NAME_cmp(X509_get_issuer_name(leaf), X509_get_subject_name(ca_intermediate(ca))), 0);
    /* one key per run, a fresh serial per certificate */
    ck_assert_int_eq(EVP_PKEY_eq(X509_get0_pubkey(leaf), X509_get0_pubkey(leaf2)), 1);
    ck_assert_int_ne(ASN1_INTEGER_cmp(X509_get0_serialNumber(leaf), X509_get0_serialNumber(leaf2)),
                     0);
    ck_assert_int_eq(X509_get_ext_count(leaf), 6);
    X509_free(leaf);
    X509_free(leaf2);
    ca_free(&ca);
}
END_TEST

START_TEST(test_leaf_verifies)
{
    struct ca *ca = listed_ca();
    X509 *leaf = mint(ca, "api.example.com");

    ck_assert_int_eq(testca_verify(ca, leaf, "api.example.com"), X509_V_OK);
    /* the host check is real: the same chain for another name fails */
    ck_assert_int_eq(testca_verify(ca, leaf, "example.com"), X509_V_ERR_HOSTNAME_MISMATCH);
    X509_free(leaf);
    ca_free(&ca);
}
END_TEST

START_TEST(test_leaf_ip)
{
    struct ca *ca = listed_ca();
    X509 *v4 = mint(ca, "192.0.2.1"), *v6 = mint(ca, "2001:db8::1");
    GENERAL_NAMES *san = ext_d2i(v4, NID_subject_alt_name, NULL);
    const GENERAL_NAME *gn = sk_GENERAL_NAME_value(san, 0);
    char text[256];

    ck_assert_int_eq(sk_GENERAL_NAME_num(san), 1);
    ck_assert_int_eq(gn->type, GEN_IPADD);
    ck_assert_int_eq(ASN1_STRING_length(gn->d.iPAddress), 4);
    ck_assert_mem_eq(ASN1_STRING_get0_data(gn->d.iPAddress), "\xc0\x00\x02\x01", 4);
    GENERAL_NAMES_free(san);
    san = ext_d2i(v6, NID_subject_alt_name, NULL);
    ck_assert_int_eq(ASN1_STRING_length(sk_GENERAL_NAME_value(san, 0)->d.iPAddress), 16);
    GENERAL_NAMES_free(san);
    name_entry(X509_get_subject_name(v4), NID_commonName, text, sizeof(text));
    ck_assert_str_eq(text, "");
    ck_assert_int_eq(testca_verify(ca, v4, "192.0.2.1"), X509_V_OK);
    ck_assert_int_eq(testca_verify(ca, v6, "2001:db8::1"), X509_V_OK);
    ck_assert_int_eq(testca_verify(ca, v4, "192.0.2.2"), X509_V_ERR_IP_ADDRESS_MISMATCH);
    X509_free(v4);
    X509_free(v6);
    ca_free(&ca);
}
END_TEST

static void expect_rejected(const struct ca *ca, const char *host)
{
    X509 *leaf = mint(ca, host); /* leaf_mint does not consult the constraints */
    int rc = testca_verify(ca, leaf, host);

    ck_assert_msg(rc == X509_V_ERR_PERMITTED_VIOLATION || rc == X509_V_ERR_EXCLUDED_VIOLATION,
                  "%s: verify gave %d (%s)", host, rc, X509_verify_cert_error_string(rc));
    ck_assert_msg(!ca_permits(ca, host), "ca_permits(%s)", host);
    X509_free(leaf);
}

START_TEST(test_constraints_reject_outside)
{
    struct ca *ca = listed_ca();

    expect_rejected(ca, "evil.com");
    expect_rejected(ca, "xexample.com");
    expect_rejected(ca, "example.co");
    expect_rejected(ca, "sub.api.example.com"); /* excluded subtree */
    expect_rejected(ca, "a.other.org");
    expect_rejected(ca, "x.invalid");
    expect_rejected(ca, "192.0.2.2");
    expect_rejected(ca, "2001:db8::2");
    ca_free(&ca);
}
END_TEST

/*
 * An IPv6 spelling of an IPv4 host is that host: a constraint written as ::ffff:192.0.2.9 is the
 * iPAddress 192.0.2.9/32, the CA permits the IPv4 form only, and no leaf is ever minted for the
 * IPv6 spelling (leaf_mint takes normalised hosts), so no leaf carries an IPv6 SAN that the
 * IPv4 constraint would not cover.
 */
START_TEST(test_constraints_v4_in_v6)
{
    static const char *const ips[] = {"::ffff:192.0.2.9", "[64:ff9b::c000:20a]"};
    struct ca *ca = testca_new(true, NULL, 0, ips, 2);
    X509 *leaf = mint(ca, "192.0.2.9");
    char err[256];

    ck_assert(ca_permits(ca, "192.0.2.9"));
    ck_assert(ca_permits(ca, "192.0.2.10"));
    ck_assert_int_eq(testca_verify(ca, leaf, "192.0.2.9"), X509_V_OK);
    ck_assert(!ca_permits(ca, "::ffff:192.0.2.9"));
    ck_assert_ptr_null(leaf_mint(ca, "::ffff:192.0.2.9", err, sizeof(err)));
    expect_rejected(ca, "192.0.2.1");
    X509_free(leaf);
    ERR_clear_error();
    ca_free(&ca);
}
END_TEST

START_TEST(test_constraints_no_names)
{
    struct ca *ca = testca_new(true, NULL, 0, NULL, 0);

    expect_rejected(ca, "example.com");
    expect_rejected(ca, "com");
    expect_rejected(ca, "192.0.2.1");
    expect_rejected(ca, "::1");
    ca_free(&ca);
}
END_TEST

START_TEST(test_constraints_one_family)
{
    /* DNS names only: every address is excluded; one IPv4 only: IPv6 is excluded. */
    static const char *const dns[] = {"a.example"};
    static const char *const ip[] = {"198.51.100.7"};
    struct ca *ca = testca_new(true, dns, 1, NULL, 0);

    expect_rejected(ca, "198.51.100.7");
    expect_rejected(ca, "::1");
    ca_free(&ca);
    ca = testca_new(true, NULL, 0, ip, 1);
    expect_rejected(ca, "a.example");
    expect_rejected(ca, "2001:db8::7");
    expect_rejected(ca, "198.51.100.8");
    ca_free(&ca);
}
END_TEST

/* ca_permits() and a strict verifier agree, name by name. */
START_TEST(test_permits_matches_verifier)
{
    static const struct {
        const char *host;
        int permitted;
    } cases[] = {
        {"example.com", 1},
        {"api.example.com", 1},
        {"other.org", 1},
        {"www.example.com", 1}, /* example.com has a listed subdomain: no exclusion */
        {"a.b.example.com", 1},
        {"x.api.example.com", 0},
        {"a.other.org", 0},
        {"evil.com", 0},
        {"com", 0},
        {"org", 0},
        {"192.0.2.1", 1},
        {"192.0.2.10", 0},
        {"2001:db8::1", 1},
        {"2001:db8::", 0},
        {"::1", 0},
        {"10.0.0.1", 0},
    };
    struct ca *ca = listed_ca();

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        X509 *leaf = mint(ca, cases[i].host);
        int rc = testca_verify(ca, leaf, cases[i].host);

        ck_assert_msg((rc == X509_V_OK) == cases[i].permitted, "%s: verify %d (%s)", cases[i].host,
                      rc, X509_verify_cert_error_string(rc));
        ck_assert_msg(ca_permits(ca, cases[i].host) == cases[i].permitted, "ca_permits(%s)",
                      cases[i].host);
        X509_free(leaf);
    }
    ck_assert(!ca_permits(ca, "EXAMPLE.com"));
    ck_assert(!ca_permits(ca, "example.com."));
    ck_assert(!ca_permits(ca, NULL));
    ca_free(&ca);
}
END_TEST

START_TEST(test_hostile_hosts_refused)
{
    static const char *const bad[] = {
        "",
        "a,DNS:evil.com",
        "good.com,DNS:evil.com",
        "evil.com/",
        "a..b",
        "..",
        ".",
        ".example.com",
        "example.com.", /* trailing dot: valid input, but not normalised */
        "EXAMPLE.com",
        "Api.Example.Com",
        "-a.com",
        "a-.com",
        "a b.com",
        "a\tb.com",
        "*.example.com",
        "example.com:443",
        "[::1]",
        "::FFFF:192.0.2.1",
        "1.2.3.04",
        "1.2.3",
        "123",
        "ex\xc3\xa4mple.com",
        "a_b.com",
        "evil.com\r\nX: y",
        "a=b",
        "CN=evil.com",
    };
    struct ca *ca = testca_new(false, NULL, 0, NULL, 0);
    char long_label[300 + 5], long_name[VG_HOST_MAX + 8], l64[70];
    char err[256];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_msg(leaf_mint(ca, bad[i], err, sizeof(err)) == NULL, "accepted '%s'", bad[i]);
        ck_assert_msg(err[0] != '\0', "no reason for '%s'", bad[i]);
        ck_assert(!ca_permits(ca, bad[i]));
    }
    memset(long_label, 'a', 300);
    memcpy(long_label + 300, ".com", 5);
    ck_assert_ptr_null(leaf_mint(ca, long_label, err, sizeof(err)));
    memset(l64, 'b', 64);
    memcpy(l64 + 64, ".com", 5);
    ck_assert_ptr_null(leaf_mint(ca, l64, err, sizeof(err)));
    /* 254 characters of valid labels: one over the limit */
    for (size_t i = 0; i < 254; i++)
        long_name[i] = (i % 2 == 1) ? '.' : 'a';
    long_name[253] = 'z';
    long_name[254] = '\0';
    ck_assert_ptr_null(leaf_mint(ca, long_name, err, sizeof(err)));
    ck_assert_ptr_null(leaf_mint(ca, NULL, err, sizeof(err)));
    ca_free(&ca);
}
END_TEST

/* A NUL inside a host never reaches leaf_mint: hostname_normalize sees the full length. */
START_TEST(test_embedded_nul_refused)
{
    static const char host[] = "evil.com\0.good.com";
    char out[HOSTNAME_BUFSZ];

    ck_assert_int_eq(hostname_normalize(host, sizeof(host) - 1, out, sizeof(out)), -1);
    ck_assert_int_eq(hostname_normalize("a\0", 2, out, sizeof(out)), -1);
    ck_assert_int_eq(hostname_normalize("1.2.3.4\0", 8, out, sizeof(out)), -1);
}
END_TEST

START_TEST(test_long_names_accepted)
{
    struct ca *ca = testca_new(false, NULL, 0, NULL, 0);
    char name[VG_HOST_MAX + 1], l63[70], text[300];
    X509 *leaf;
    GENERAL_NAMES *san;

    /* 253 characters: the longest name; no CN (over ub-common-name), SAN only */
    for (size_t i = 0; i < VG_HOST_MAX; i++)
        name[i] = (i % 2 == 1) ? '.' : 'a';
    name[VG_HOST_MAX] = '\0';
    leaf = mint(ca, name);
    san = ext_d2i(leaf, NID_subject_alt_name, NULL);
    ck_assert_int_eq(ASN1_STRING_length(sk_GENERAL_NAME_value(san, 0)->d.dNSName), VG_HOST_MAX);
    GENERAL_NAMES_free(san);
    name_entry(X509_get_subject_name(leaf), NID_commonName, text, sizeof(text));
    ck_assert_str_eq(text, "");
    ck_assert_int_eq(testca_verify(ca, leaf, name), X509_V_OK);
    X509_free(leaf);
    memset(l63, 'c', 63);
    memcpy(l63 + 63, ".com", 5);
    leaf = mint(ca, l63);
    ck_assert_int_eq(testca_verify(ca, leaf, l63), X509_V_OK);
    X509_free(leaf);
    ca_free(&ca);
}
END_TEST

START_TEST(test_ca_new_errors)
{
    static const char *const bad_dns[] = {"Example.com"};
    static const char *const wild_dns[] = {"*.example.com"};
    static const char *const bad_ip[] = {"not-an-ip"};
    static const char *const ip_in_dns[] = {"192.0.2.1"};
    struct ca_names n = {true, bad_dns, 1, NULL, 0};
    char err[256], id[VG_RUN_ID_MAX + 2];

    err[0] = '\0';
    ck_assert_ptr_null(ca_new("run", &n, err, sizeof(err)));
    ck_assert_str_eq(err, "names.dns[0]: not a normalised DNS name");
    n.dns = wild_dns;
    ck_assert_ptr_null(ca_new("run", &n, err, sizeof(err)));
    n.dns = ip_in_dns;
    ck_assert_ptr_null(ca_new("run", &n, err, sizeof(err)));
    n.dns = NULL;
    n.ndns = 0;
    n.ip = bad_ip;
    n.nip = 1;
    ck_assert_ptr_null(ca_new("run", &n, err, sizeof(err)));
    ck_assert_str_eq(err, "names.ip[0]: not an IP literal");
    n.nip = 0;
    ck_assert_ptr_null(ca_new("", &n, err, sizeof(err)));
    ck_assert_ptr_null(ca_new(NULL, &n, err, sizeof(err)));
    ck_assert_ptr_null(ca_new("a b", &n, err, sizeof(err)));
    ck_assert_ptr_null(ca_new("a/b", &n, err, sizeof(err)));
    ck_assert_ptr_null(ca_new("run", NULL, err, sizeof(err)));
    memset(id, 'r', VG_RUN_ID_MAX + 1);
    id[VG_RUN_ID_MAX + 1] = '\0';
    ck_assert_ptr_null(ca_new(id, &n, err, sizeof(err)));
    ck_assert_ptr_null(ca_new(id, &n, NULL, 0)); /* no error buffer: still fails cleanly */
}
END_TEST

START_TEST(test_long_run_id)
{
    struct ca_names n = {false, NULL, 0, NULL, 0};
    char id[VG_RUN_ID_MAX + 1], cn[300], want[300], err[256] = "";
    struct ca *ca;
    X509 *leaf;

    for (size_t i = 0; i < VG_RUN_ID_MAX; i++)
        id[i] = "abc.DEF_9:-"[i % 11];
    id[VG_RUN_ID_MAX] = '\0';
    ca = ca_new(id, &n, err, sizeof(err));
    ck_assert_msg(ca != NULL, "%s", err);
    name_entry(X509_get_subject_name(ca_root(ca)), NID_commonName, cn, sizeof(cn));
    snprintf(want, sizeof(want), "vaultgate run %s", id);
    ck_assert_str_eq(cn, want);
    leaf = mint(ca, "example.com");
    ck_assert_int_eq(testca_verify(ca, leaf, "example.com"), X509_V_OK);
    X509_free(leaf);
    ca_free(&ca);
}
END_TEST

START_TEST(test_write_root)
{
    struct ca *ca = listed_ca();
    char dir[] = "/tmp/vg-ca-test-XXXXXX", path[128], err[256], *pem = NULL, fp[65];
    char hex[65];
    unsigned char md[32];
    unsigned int mdlen = 0;
    size_t len = 0;
    struct stat st;
    FILE *f;
    X509 *back;
    char buf[8192];
    size_t n;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/ca.pem", dir);
    ck_assert_msg(ca_write_root(ca, path, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0644);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    rewind(f);
    back = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    ck_assert_ptr_nonnull(back);
    ck_assert_int_eq(X509_cmp(back, ca_root(ca)), 0);
    X509_free(back);
    ck_assert_ptr_null(strstr(buf, "PRIVATE"));
    ck_assert_int_eq(ca_root_pem(ca, &pem, &len), 0);
    ck_assert_uint_eq(len, n);
    ck_assert_mem_eq(pem, buf, n);
    free(pem);
    /* rewriting replaces atomically; no temp file is left */
    ck_assert_int_eq(ca_write_root(ca, path, err, sizeof(err)), 0);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
    snprintf(path, sizeof(path), "%s/missing/ca.pem", dir);
    err[0] = '\0';
    ck_assert_int_eq(ca_write_root(ca, path, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "No such file"));
    ck_assert_int_eq(X509_digest(ca_root(ca), EVP_sha256(), md, &mdlen), 1);
    for (unsigned int i = 0; i < mdlen; i++)
        snprintf(hex + 2 * i, 3, "%02x", md[i]);
    ca_root_sha256(ca, fp);
    ck_assert_str_eq(fp, hex);
    ca_free(&ca);
}
END_TEST

START_TEST(test_too_many_names)
{
    enum { N = 4000 };
    char **store = calloc(N, sizeof(char *));
    struct ca_names n = {true, NULL, N, NULL, 0};
    char err[512] = "";
    struct ca *ca;

    for (size_t i = 0; i < N; i++) {
        store[i] = malloc(48);
        snprintf(store[i], 48, "host-%zu.some-long-example-domain.com", i);
    }
    n.dns = (const char *const *)store;
    ca = ca_new("run", &n, err, sizeof(err));
    ck_assert_ptr_null(ca);
    ck_assert_ptr_nonnull(strstr(err, "name constraints too large"));
    n.ndns = 500; /* comfortably fits, and still verifies */
    ca = ca_new("run", &n, err, sizeof(err));
    ck_assert_msg(ca != NULL, "%s", err);
    {
        X509 *leaf = mint(ca, store[499]);

        ck_assert_int_eq(testca_verify(ca, leaf, store[499]), X509_V_OK);
        X509_free(leaf);
    }
    expect_rejected(ca, "host-500.some-long-example-domain.com");
    ca_free(&ca);
    for (size_t i = 0; i < N; i++)
        free(store[i]);
    free(store);
}
END_TEST

START_TEST(test_duplicates_and_free_null)
{
    static const char *const dns[] = {"b.example", "a.example", "b.example"};
    static const char *const ip[] = {"192.0.2.1", "192.0.2.1"};
    struct ca *ca = testca_new(true, dns, 3, ip, 2);
    NAME_CONSTRAINTS *nc = ext_d2i(ca_intermediate(ca), NID_name_constraints, NULL);

    /* a.example, b.example, 192.0.2.1; excluded: .a.example, .b.example, ::/0 */
    ck_assert_int_eq(sk_GENERAL_SUBTREE_num(nc->permittedSubtrees), 3);
    ck_assert_int_eq(sk_GENERAL_SUBTREE_num(nc->excludedSubtrees), 3);
    NAME_CONSTRAINTS_free(nc);
    ca_free(&ca);
    ca_free(&ca);
    ca_free(NULL);
}
END_TEST

Suite *suite_ca(void)
{
    Suite *s = suite_create("ca");
    TCase *tc = tcase_create("ca");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_root_fields);
    tcase_add_test(tc, test_root_serials_random);
    tcase_add_test(tc, test_intermediate_fields);
    tcase_add_test(tc, test_unconstrained_has_no_name_constraints);
    tcase_add_test(tc, test_root_key_gone);
    tcase_add_test(tc, test_certs_hold_no_private_key);
    tcase_add_test(tc, test_leaf_fields);
    tcase_add_test(tc, test_leaf_verifies);
    tcase_add_test(tc, test_leaf_ip);
    tcase_add_test(tc, test_constraints_reject_outside);
    tcase_add_test(tc, test_constraints_v4_in_v6);
    tcase_add_test(tc, test_constraints_no_names);
    tcase_add_test(tc, test_constraints_one_family);
    tcase_add_test(tc, test_permits_matches_verifier);
    tcase_add_test(tc, test_hostile_hosts_refused);
    tcase_add_test(tc, test_embedded_nul_refused);
    tcase_add_test(tc, test_long_names_accepted);
    tcase_add_test(tc, test_ca_new_errors);
    tcase_add_test(tc, test_long_run_id);
    tcase_add_test(tc, test_write_root);
    tcase_add_test(tc, test_too_many_names);
    tcase_add_test(tc, test_duplicates_and_free_null);
    suite_add_tcase(s, tc);
    return s;
}
