/*
 * testca.c - a CA for the unit tests and the chain check of a strict TLS client (testca.h).
 */
#include "tests/unit/testca.h"
#include "common/hostname.h"

#include <check.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

struct ca *testca_new(bool constrained, const char *const *dns, size_t ndns, const char *const *ip,
                      size_t nip)
{
    struct ca_names names = {constrained, dns, ndns, ip, nip};
    char err[512] = "";
    struct ca *ca = ca_new("run-42", &names, err, sizeof(err));

    ck_assert_msg(ca != NULL, "ca_new: %s", err);
    return ca;
}

X509 *testca_roundtrip(X509 *x)
{
    unsigned char *der = NULL;
    const unsigned char *p;
    int len = i2d_X509(x, &der);
    X509 *copy;

    ck_assert_int_gt(len, 0);
    p = der;
    copy = d2i_X509(NULL, &p, len);
    ck_assert_ptr_nonnull(copy);
    OPENSSL_free(der);
    return copy;
}

int testca_verify(const struct ca *ca, X509 *leaf, const char *host)
{
    X509_STORE *store = X509_STORE_new();
    STACK_OF(X509) *untrusted = sk_X509_new_null();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509 *root = testca_roundtrip(ca_root(ca)), *inter = testca_roundtrip(ca_intermediate(ca));
    X509 *l = testca_roundtrip(leaf);
    X509_VERIFY_PARAM *param;
    char norm[HOSTNAME_BUFSZ];
    int rc, verr;

    ck_assert(store != NULL && untrusted != NULL && ctx != NULL);
    ck_assert_int_eq(X509_STORE_add_cert(store, root), 1);
    ck_assert_int_gt(sk_X509_push(untrusted, inter), 0);
    ck_assert_int_eq(X509_STORE_CTX_init(ctx, store, l, untrusted), 1);
    param = X509_STORE_CTX_get0_param(ctx);
    X509_VERIFY_PARAM_set_flags(param, X509_V_FLAG_X509_STRICT);
    ck_assert_int_eq(X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER), 1);
    if (host != NULL && hostname_normalize(host, strlen(host), norm, sizeof(norm)) == HOSTNAME_DNS)
        ck_assert_int_eq(X509_VERIFY_PARAM_set1_host(param, host, 0), 1);
    else if (host != NULL)
        ck_assert_int_eq(X509_VERIFY_PARAM_set1_ip_asc(param, host), 1);
    rc = X509_verify_cert(ctx);
    verr = X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    sk_X509_pop_free(untrusted, X509_free);
    X509_STORE_free(store);
    X509_free(root);
    X509_free(l);
    ERR_clear_error();
    if (rc == 1)
        return X509_V_OK;
    return verr == X509_V_OK ? -1 : verr;
}
