/*
 * trustfiles.c - the files that make a sandbox trust the per-run root, shared by `vaultgate
 * trust` and `vaultgate run --trust-out` (SPEC §2, §11, §13).
 *
 * Guarantees: every file is written 0644 and atomically (temporary file, fsync, rename), so a
 * sandbox that reads one while it is replaced sees the old file or the new one; the bundle
 * holds the per-run root first, then the system roots; the Java truststore holds every bundle
 * certificate as a trusted entry and no key; nothing secret goes into any of them (the caller
 * hands over the root certificate alone, checked or minted).
 */
#include "cli/trustfiles.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/x509.h>

/* Reads at most max bytes of path into a NUL-terminated buffer. NULL + err. */
char *trustfiles_read(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;

    if (f == NULL) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    for (;;) {
        size_t r;

        if (n == cap) {
            char *nb;

            cap = cap == 0 ? 65536 : cap * 2;
            if (cap > max + 1)
                cap = max + 1;
            if ((nb = realloc(buf, cap + 1)) == NULL) {
                snprintf(err, errlen, "%s: out of memory", path);
                goto fail;
            }
            buf = nb;
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n > max) {
            snprintf(err, errlen, "%s: larger than %zu bytes", path, max);
            goto fail;
        }
        if (r == 0)
            break;
    }
    if (ferror(f)) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto fail;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
fail:
    fclose(f);
    free(buf);
    return NULL;
}

static int write_all(FILE *f, const char *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, f) == n ? 0 : -1;
}

/* One piece of a file write_atomic() puts together; a piece not ending in '\n' gets one when
 * nl is set (PEM files), binary pieces never. */
struct piece {
    const char *p;
    size_t n;
    bool nl;
};

/* Writes the pieces to path, mode 0644, atomically (temporary file, fsync, rename): a reader
 * sees the old file or the new one, never half of one. 0 or -1 + err. */
static int write_atomic(const char *path, const struct piece *pc, size_t npc, char *err,
                        size_t errlen)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 8);
    FILE *f = NULL;
    int fd = -1, rc = -1, bad = 0;

    if (tmp == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".XXXXXX", 8);
    if ((fd = mkstemp(tmp)) < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        free(tmp);
        return -1;
    }
    if (fchmod(fd, 0644) != 0 || (f = fdopen(fd, "wb")) == NULL) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    for (size_t i = 0; i < npc && !bad; i++)
        bad = write_all(f, pc[i].p, pc[i].n) != 0 ||
              (pc[i].nl && pc[i].n > 0 && pc[i].p[pc[i].n - 1] != '\n' && write_all(f, "\n", 1));
    if (bad || fflush(f) != 0 || fsync(fileno(f)) != 0) {
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    if (fclose(f) != 0) {
        f = NULL;
        snprintf(err, errlen, "%s: %s", tmp, strerror(errno));
        goto out;
    }
    f = NULL;
    if (rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (f != NULL)
        fclose(f);
    if (fd >= 0)
        close(fd);
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

/* Java's "trusted for any purpose" attribute (Oracle's PKCS#12 trusted-key-usage, valued
 * anyExtendedKeyUsage): without it a JVM ignores a certificate that has no key beside it. */
#define TRUST_JDK_TRUST_OID "2.16.840.1.113894.746875.1.1"
#define TRUST_ANY_EKU_OID   "2.5.29.37.0"

/* One certificate bag of the truststore: alias, trusted for any purpose. 0 or -1. */
static int add_trusted(STACK_OF(PKCS12_SAFEBAG) * *bags, X509 *x, const char *alias)
{
    ASN1_OBJECT *any = OBJ_txt2obj(TRUST_ANY_EKU_OID, 1);
    PKCS12_SAFEBAG *bag = any != NULL ? PKCS12_add_cert(bags, x) : NULL;
    int rc = bag != NULL && PKCS12_add_friendlyname_asc(bag, alias, -1) == 1 &&
                     PKCS12_add1_attr_by_txt(bag, TRUST_JDK_TRUST_OID, V_ASN1_OBJECT,
                                             (const unsigned char *)any, -1) == 1
                 ? 0
                 : -1;

    ASN1_OBJECT_free(any);
    return rc;
}

/*
 * The Java truststore: PKCS#12 holding every certificate of the bundle (root first) as a
 * trusted entry, neither encrypted nor MACed, so a JVM loads it without a password (there is
 * nothing secret in it). *der is malloc'ed. 0 or -1 + err.
 */
static int truststore_der(const char *bundle, size_t blen, unsigned char **der, int *dlen,
                          char *err, size_t errlen)
{
    BIO *in = BIO_new_mem_buf(bundle, (int)blen);
    STACK_OF(PKCS12_SAFEBAG) *bags = NULL;
    STACK_OF(PKCS7) *safes = NULL;
    PKCS12 *p12 = NULL;
    X509 *x = NULL;
    char alias[32];
    int n = 0, rc = -1;

    *der = NULL;
    while (in != NULL && (x = PEM_read_bio_X509(in, NULL, NULL, NULL)) != NULL) {
        snprintf(alias, sizeof(alias), n == 0 ? "vaultgate-run-root" : "system-%d", n);
        if (add_trusted(&bags, x, alias) != 0)
            goto out;
        X509_free(x);
        x = NULL;
        n++;
    }
    if (n == 0 || PKCS12_add_safe(&safes, bags, -1, 0, NULL) != 1 ||
        (p12 = PKCS12_add_safes(safes, 0)) == NULL || (*dlen = i2d_PKCS12(p12, der)) <= 0)
        goto out;
    rc = 0;
out:
    if (rc != 0)
        snprintf(err, errlen, "truststore: cannot encode %d certificates", n);
    ERR_clear_error();
    X509_free(x);
    BIO_free(in);
    PKCS12_free(p12);
    sk_PKCS7_pop_free(safes, PKCS7_free);
    sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
    return rc;
}

/* <directory of path>/name; caller frees. */
char *trustfiles_beside(const char *path, const char *name)
{
    const char *slash = strrchr(path, '/');
    size_t dlen = slash == NULL ? 0 : (size_t)(slash - path) + 1, nlen = strlen(name);
    char *out = malloc(dlen + nlen + 1);

    if (out != NULL) {
        memcpy(out, path, dlen);
        memcpy(out + dlen, name, nlen + 1);
    }
    return out;
}

bool trustfiles_same(const char *a, const char *b)
{
    struct stat sa, sb;

    if (strcmp(a, b) == 0)
        return 1;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Prints `export NAME=value`, single-quoting value unless it is plainly safe for sh. */
static void print_export(FILE *out, const char *name, const char *value)
{
    int plain = value[0] != '\0';

    for (const char *p = value; *p != '\0' && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._+-:@,",
                       *p) != NULL;
    fprintf(out, "export %s=", name);
    if (plain) {
        fprintf(out, "%s\n", value);
        return;
    }
    fputc('\'', out);
    for (const char *p = value; *p != '\0'; p++) {
        if (*p == '\'')
            fputs("'\\''", out);
        else
            fputc(*p, out);
    }
    fputs("'\n", out);
}

/* The variables that name the bundle, in the order printed (SPEC §2, §11). */
static const char *const bundle_vars[] = {
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS", /* the root alone: Node adds it to its own store */
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "AWS_CA_BUNDLE",
    "CARGO_HTTP_CAINFO",
    "DENO_CERT",
    "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", /* gRPC core: Python, Ruby, PHP, C++ */
    "NPM_CONFIG_CAFILE",
};

int trustfiles_print_env(FILE *out, const struct trustfiles *t)
{
    char java[3 * PATH_MAX];

    for (size_t i = 0; i < sizeof(bundle_vars) / sizeof(bundle_vars[0]); i++)
        print_export(out, bundle_vars[i],
                     strcmp(bundle_vars[i], "NODE_EXTRA_CA_CERTS") == 0 ? t->ca : t->bundle);
    print_export(out, "WGETRC", t->wgetrc);
    snprintf(java, sizeof(java),
             "-Djavax.net.ssl.trustStore=%s -Djavax.net.ssl.trustStoreType=PKCS12", t->p12);
    print_export(out, "JAVA_TOOL_OPTIONS", java);
    return ferror(out) ? -1 : 0;
}

/* The truststore and the wgetrc beside the bundle. 0 or -1 + err. */
static int write_extras(const char *bundle, const char *abs_bundle, const char *p12,
                        const char *wgetrc, const char *data, size_t dlen, char *err, size_t errlen)
{
    unsigned char *der = NULL;
    char *line = NULL;
    int derlen = 0, rc = -1;
    struct piece pc;

    if (truststore_der(data, dlen, &der, &derlen, err, errlen) != 0)
        return -1;
    pc = (struct piece){(const char *)der, (size_t)derlen, false};
    if (write_atomic(p12, &pc, 1, err, errlen) != 0)
        goto out;
    /* Debian's wget (GnuTLS) reads no variable, only its wgetrc: point it at the bundle */
    if (asprintf(&line, "# written by vaultgate trust for %s\nca_certificate = %s\n", bundle,
                 abs_bundle) < 0) {
        line = NULL;
        snprintf(err, errlen, "%s: out of memory", wgetrc);
        goto out;
    }
    pc = (struct piece){line, strlen(line), false};
    rc = write_atomic(wgetrc, &pc, 1, err, errlen);
out:
    OPENSSL_free(der);
    free(line);
    return rc;
}

/* realpath() of path into *abs. 0 or -1 + err. */
static int absolute(const char *path, char **abs, char *err, size_t errlen)
{
    *abs = realpath(path, NULL);
    if (*abs != NULL)
        return 0;
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
}

int trustfiles_write(const char *root, size_t rlen, const char *root_path, const char *bundle,
                     const char *roots_path, struct trustfiles *out, char *err, size_t errlen)
{
    char *roots = NULL, *root_copy = NULL, *p12 = NULL, *wgetrc = NULL, *data = NULL;
    struct trustfiles t = {NULL, NULL, NULL, NULL};
    size_t slen = 0;
    struct piece pc[2];
    int rc = -1;

    root_copy = trustfiles_beside(bundle, "ca.pem");
    p12 = trustfiles_beside(bundle, "truststore.p12");
    wgetrc = trustfiles_beside(bundle, "wgetrc");
    if (root_copy == NULL || p12 == NULL || wgetrc == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if ((roots = trustfiles_read(roots_path, TRUSTFILES_ROOTS_MAX_BYTES, &slen, err, errlen)) ==
        NULL)
        goto out;
    pc[0] = (struct piece){root, rlen, true};
    pc[1] = (struct piece){roots, slen, true};
    if (write_atomic(bundle, pc, 2, err, errlen) != 0)
        goto out;
    /* Node's line names the root alone: a copy beside the bundle when the root lives elsewhere,
     * so one shared directory holds everything a sandbox reads */
    if ((root_path == NULL || !trustfiles_same(root_copy, root_path)) &&
        write_atomic(root_copy, pc, 1, err, errlen) != 0)
        goto out;
    if (absolute(bundle, &t.bundle, err, errlen) < 0 || absolute(root_copy, &t.ca, err, errlen) < 0)
        goto out;
    if ((data = trustfiles_read(bundle, TRUSTFILES_ROOTS_MAX_BYTES + TRUSTFILES_CA_MAX_BYTES + 2,
                                &slen, err, errlen)) == NULL ||
        write_extras(bundle, t.bundle, p12, wgetrc, data, slen, err, errlen) != 0)
        goto out;
    if (absolute(p12, &t.p12, err, errlen) < 0 || absolute(wgetrc, &t.wgetrc, err, errlen) < 0)
        goto out;
    *out = t;
    memset(&t, 0, sizeof(t));
    rc = 0;
out:
    trustfiles_free(&t);
    free(roots);
    free(root_copy);
    free(p12);
    free(wgetrc);
    free(data);
    return rc;
}

int trustfiles_write_env(const struct trustfiles *t, const char *path, char *err, size_t errlen)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    struct piece pc;
    int rc = -1, bad;

    if (mem == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    bad = trustfiles_print_env(mem, t) != 0;
    if (fclose(mem) != 0 || bad) {
        snprintf(err, errlen, "%s: out of memory", path);
        goto out;
    }
    pc = (struct piece){text, len, false};
    rc = write_atomic(path, &pc, 1, err, errlen);
out:
    free(text);
    return rc;
}

void trustfiles_free(struct trustfiles *t)
{
    free(t->bundle);
    free(t->ca);
    free(t->p12);
    free(t->wgetrc);
    memset(t, 0, sizeof(*t));
}
