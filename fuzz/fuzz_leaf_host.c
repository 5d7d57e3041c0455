/*
 * fuzz_leaf_host.c - arbitrary bytes as the host of a leaf certificate.
 *
 * Invariants (checked, abort() on violation):
 * - hostname_normalize refuses any input with a NUL in it, and what it accepts is idempotent
 *   (normalising the output gives the output) and made of [a-z0-9.:-] only.
 * - leaf_mint(s), s the input as a C string, succeeds exactly when hostname_normalize accepts
 *   s and gives it back unchanged; ca_permits of the unconstrained CA agrees.
 * - A minted certificate carries exactly one SAN, the input itself (dNSName bytes, or the
 *   iPAddress whose text form is the input), a CN equal to the input or none, and verifies
 *   under the intermediate's key.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "ca/ca.h"
#include "ca/leaf.h"
#include "common/hostname.h"

#define FUZZ_MAX_INPUT 512
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            abort();                                                                               \
    } while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct ca *fuzz_ca;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    struct ca_names names = {false, NULL, 0, NULL, 0};
    char err[256];

    fuzz_ca = ca_new("fuzz", &names, err, sizeof(err));
    CHECK(fuzz_ca != NULL);
    return 0;
}

static void check_normalized(const char *norm, int kind)
{
    char again[HOSTNAME_BUFSZ];

    for (const char *p = norm; *p != '\0'; p++)
        CHECK((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' ||
              *p == ':');
    CHECK(hostname_normalize(norm, strlen(norm), again, sizeof(again)) == kind);
    CHECK(strcmp(again, norm) == 0);
}

static void check_leaf(X509 *x, const char *host, int kind)
{
    GENERAL_NAMES *san = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    const GENERAL_NAME *gn;
    char text[HOSTNAME_BUFSZ], cn[HOSTNAME_BUFSZ];
    int cnlen;

    CHECK(san != NULL && sk_GENERAL_NAME_num(san) == 1);
    gn = sk_GENERAL_NAME_value(san, 0);
    if (kind == HOSTNAME_DNS) {
        CHECK(gn->type == GEN_DNS);
        CHECK((size_t)ASN1_STRING_length(gn->d.dNSName) == strlen(host));
        CHECK(memcmp(ASN1_STRING_get0_data(gn->d.dNSName), host, strlen(host)) == 0);
    } else {
        int len = ASN1_STRING_length(gn->d.iPAddress);

        CHECK(gn->type == GEN_IPADD);
        CHECK(len == (kind == HOSTNAME_IPV4 ? 4 : 16));
        CHECK(inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(gn->d.iPAddress), text,
                        sizeof(text)) != NULL);
        CHECK(strcmp(text, host) == 0);
    }
    GENERAL_NAMES_free(san);
    cnlen = X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, cn, sizeof(cn));
    CHECK(cnlen < 0 || strcmp(cn, host) == 0);
    CHECK(X509_verify(x, X509_get0_pubkey(ca_intermediate(fuzz_ca))) == 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char norm[HOSTNAME_BUFSZ], err[256];
    char *s;
    int kind, exact;
    X509 *x;

    if (size > FUZZ_MAX_INPUT)
        return 0;
    if (fuzz_ca == NULL)
        LLVMFuzzerInitialize(NULL, NULL);
    kind = hostname_normalize((const char *)data, size, norm, sizeof(norm));
    if (memchr(data, '\0', size) != NULL)
        CHECK(kind < 0);
    if (kind > 0)
        check_normalized(norm, kind);

    /* What leaf_mint sees: the bytes up to the first NUL. */
    s = malloc(size + 1);
    CHECK(s != NULL);
    memcpy(s, data, size);
    s[size] = '\0';
    kind = hostname_normalize(s, strlen(s), norm, sizeof(norm));
    exact = kind > 0 && strcmp(norm, s) == 0;
    x = leaf_mint(fuzz_ca, s, err, sizeof(err));
    CHECK((x != NULL) == exact);
    CHECK(ca_permits(fuzz_ca, s) == exact);
    if (x != NULL)
        check_leaf(x, s, kind);
    X509_free(x);
    free(s);
    ERR_clear_error();
    return 0;
}
