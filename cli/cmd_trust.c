/*
 * cmd_trust.c - `vaultgate trust`: make a sandbox trust the per-run root (SPEC §2).
 *
 * Most runtimes replace their trust store with the file an environment variable names rather
 * than adding to it, so this writes a bundle (the per-run root first, then the system roots)
 * and prints the lines that point each runtime at it; Node's NODE_EXTRA_CA_CERTS does add to
 * Node's own store, so it names the root alone. The root file is checked to hold exactly one
 * self-signed CA certificate and nothing else (no key material ever goes into a bundle).
 */
#include "cli/cli.h"

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
#include <openssl/x509v3.h>

#define TRUST_DEFAULT_ROOTS   "/etc/ssl/certs/ca-certificates.crt"
#define TRUST_CA_MAX_BYTES    (1024 * 1024)
#define TRUST_ROOTS_MAX_BYTES (64 * 1024 * 1024)

struct trust_opts {
    const char *ca;
    const char *bundle;
    const char *roots;
};

static void trust_usage(FILE *out)
{
    fprintf(
        out,
        "usage: vaultgate trust --ca FILE [--bundle-out FILE] [--system-roots FILE]\n"
        "\n"
        "Writes, in the directory of the bundle (mode 0644 each, atomically): the bundle (the\n"
        "per-run root from --ca first, then the system roots), ca.pem (the root alone, when\n"
        "--ca is elsewhere), truststore.p12 (every bundle certificate as a trusted entry, for\n"
        "Java) and wgetrc; then prints shell lines that make runtimes in a sandbox use them:\n"
        "  eval \"$(vaultgate trust --ca /run/vaultgate/ca.pem)\"\n"
        "\n"
        "  --ca FILE            the per-run root certificate (vaultgate run --ca-out)\n"
        "  --bundle-out FILE    where to write the bundle [<directory of --ca>/bundle.pem];\n"
        "                       a directory sandbox users can reach (the state dir, 0711, lets "
        "them read by name)\n"
        "  --system-roots FILE  system trust anchors to append [" TRUST_DEFAULT_ROOTS "]\n"
        "\n"
        "SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO, PIP_CERT,\n"
        "AWS_CA_BUNDLE, CARGO_HTTP_CAINFO, DENO_CERT, CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE,\n"
        "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (gRPC core: Python, Ruby, PHP, C++) and\n"
        "NPM_CONFIG_CAFILE name the bundle; NODE_EXTRA_CA_CERTS names the root alone (Node\n"
        "adds it to its own store); WGETRC names the wgetrc (Debian's wget reads no variable);\n"
        "JAVA_TOOL_OPTIONS makes a JVM use the truststore and nothing else.\n"
        "\n"
        "exit status: 0 done, 1 a file could not be read or written, 2 usage error\n");
}

#define TRUST_OPT(field) offsetof(struct trust_opts, field)

static const struct cli_opt trust_table[] = {
    {"--ca", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = TRUST_OPT(ca), .what = "a FILE"},
    {"--bundle-out", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = TRUST_OPT(bundle),
     .what = "a FILE"},
    {"--system-roots", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = TRUST_OPT(roots),
     .what = "a FILE"},
    {0},
};

/* The words trust has always used: "unknown argument '--x'", "--ca given twice". */
static const struct cli_words trust_words = {.unknown = "unknown argument",
                                             .stray = "unknown argument",
                                             .repeated = "given twice",
                                             .whole = true,
                                             .empty_needs = true};

/* Parses argv into o. Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, struct trust_opts *o)
{
    static const struct cli_spec spec = {"trust", trust_table, trust_usage, NULL, &trust_words};
    int rc;

    if (cli_parse(&spec, argc, argv, o, &rc) < 0)
        return rc;
    if (o->ca == NULL)
        return cli_usage_error("trust", "--ca FILE is required");
    return -1;
}

/* Reads at most max bytes of path into a NUL-terminated buffer. NULL + err. */
static char *read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen)
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

/* 0 when pem holds exactly one PEM block, a self-signed CA certificate. */
static int check_root(const char *path, const char *pem, size_t len, char *err, size_t errlen)
{
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    char *name = NULL, *header = NULL;
    unsigned char *data = NULL;
    long dlen = 0;
    int blocks = 0, rc = -1;
    X509 *x = NULL;

    if (bio == NULL) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    while (PEM_read_bio(bio, &name, &header, &data, &dlen) == 1) {
        blocks++;
        if (blocks == 1 && strcmp(name, "CERTIFICATE") == 0) {
            const unsigned char *p = data;

            x = d2i_X509(NULL, &p, dlen);
        } else if (strstr(name, "PRIVATE KEY") != NULL) {
            snprintf(err, errlen, "%s: holds a private key; give the root certificate alone", path);
            blocks = -1000;
        }
        OPENSSL_free(name);
        OPENSSL_free(header);
        OPENSSL_free(data);
        name = header = NULL;
        data = NULL;
        if (blocks < 0)
            goto out;
    }
    if (blocks == 0)
        snprintf(err, errlen, "%s: no PEM certificate", path);
    else if (blocks > 1)
        snprintf(err, errlen, "%s: holds %d PEM blocks; expected the one root certificate", path,
                 blocks);
    else if (x == NULL)
        snprintf(err, errlen, "%s: not a parseable X.509 certificate", path);
    else if (X509_check_ca(x) < 1 || X509_self_signed(x, 1) != 1)
        snprintf(err, errlen, "%s: not a self-signed CA certificate", path);
    else
        rc = 0;
out:
    ERR_clear_error();
    X509_free(x);
    BIO_free(bio);
    return rc;
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
static char *beside(const char *path, const char *name)
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

/*
 * A note on stderr when a sandbox user other than the owner could not read path: a directory
 * above it that others cannot search (the state directory is 0700), or the file itself.
 */
static void note_unreadable(const char *path)
{
    char dir[PATH_MAX];
    struct stat st;
    char *slash;

    if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir))
        return;
    if (stat(dir, &st) == 0 && (st.st_mode & S_IROTH) == 0) {
        fprintf(stderr, "vaultgate trust: note: %s is not readable by other users\n", path);
        return;
    }
    while ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
        *slash = '\0';
        if (stat(dir, &st) == 0 && (st.st_mode & S_IXOTH) == 0) {
            fprintf(stderr,
                    "vaultgate trust: note: %s (mode %04o) keeps other users out, so a sandbox "
                    "user other than its owner cannot read %s: give --bundle-out a directory "
                    "they can reach (see docs/trust.md)\n",
                    dir, (unsigned)(st.st_mode & 07777), path);
            return;
        }
    }
}

static int same_file(const char *a, const char *b)
{
    struct stat sa, sb;

    if (strcmp(a, b) == 0)
        return 1;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* Prints `export NAME=value`, single-quoting value unless it is plainly safe for sh. */
static void print_export(const char *name, const char *value)
{
    int plain = value[0] != '\0';

    for (const char *p = value; *p != '\0' && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._+-:@,",
                       *p) != NULL;
    printf("export %s=", name);
    if (plain) {
        printf("%s\n", value);
        return;
    }
    putchar('\'');
    for (const char *p = value; *p != '\0'; p++) {
        if (*p == '\'')
            fputs("'\\''", stdout);
        else
            putchar(*p);
    }
    fputs("'\n", stdout);
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

/* Everything the paths need, absolute, once the files exist. */
struct trust_paths {
    char *bundle, *ca, *p12, *wgetrc;
};

static void print_lines(const struct trust_paths *ap)
{
    char java[3 * PATH_MAX];

    for (size_t i = 0; i < sizeof(bundle_vars) / sizeof(bundle_vars[0]); i++)
        print_export(bundle_vars[i],
                     strcmp(bundle_vars[i], "NODE_EXTRA_CA_CERTS") == 0 ? ap->ca : ap->bundle);
    print_export("WGETRC", ap->wgetrc);
    snprintf(java, sizeof(java),
             "-Djavax.net.ssl.trustStore=%s -Djavax.net.ssl.trustStoreType=PKCS12", ap->p12);
    print_export("JAVA_TOOL_OPTIONS", java);
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

int cmd_trust(int argc, char **argv)
{
    struct trust_opts o = {NULL, NULL, NULL};
    char err[PATH_MAX + 256], *root = NULL, *roots = NULL, *bundle = NULL, *p12 = NULL;
    char *wgetrc = NULL, *data = NULL, *root_copy = NULL;
    struct trust_paths ap = {NULL, NULL, NULL, NULL};
    size_t rlen = 0, slen = 0;
    int rc = parse_args(argc, argv, &o);
    struct piece pc[2];

    if (rc >= 0)
        return rc;
    rc = EXIT_RUNTIME;
    if (o.roots == NULL)
        o.roots = TRUST_DEFAULT_ROOTS;
    bundle = o.bundle != NULL ? strdup(o.bundle) : beside(o.ca, "bundle.pem");
    p12 = bundle != NULL ? beside(bundle, "truststore.p12") : NULL;
    wgetrc = bundle != NULL ? beside(bundle, "wgetrc") : NULL;
    if (bundle == NULL || p12 == NULL || wgetrc == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    if (same_file(bundle, o.ca) || same_file(bundle, o.roots) || same_file(p12, o.ca) ||
        same_file(wgetrc, o.ca)) {
        rc = cli_usage_error("trust", "--bundle-out must not be the --ca or --system-roots file");
        goto out;
    }
    if ((root = read_file(o.ca, TRUST_CA_MAX_BYTES, &rlen, err, sizeof(err))) == NULL ||
        check_root(o.ca, root, rlen, err, sizeof(err)) != 0)
        goto fail;
    if ((roots = read_file(o.roots, TRUST_ROOTS_MAX_BYTES, &slen, err, sizeof(err))) == NULL)
        goto fail;
    pc[0] = (struct piece){root, rlen, true};
    pc[1] = (struct piece){roots, slen, true};
    if (write_atomic(bundle, pc, 2, err, sizeof(err)) != 0)
        goto fail;
    /* Node's line names the root alone: a copy beside the bundle when --ca lives elsewhere,
     * so one shared directory holds everything a sandbox reads */
    if ((root_copy = beside(bundle, "ca.pem")) == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    if (!same_file(root_copy, o.ca)) {
        if (same_file(root_copy, o.roots)) {
            rc = cli_usage_error("trust", "--system-roots must not be ca.pem beside the bundle");
            goto out;
        }
        if (write_atomic(root_copy, pc, 1, err, sizeof(err)) != 0)
            goto fail;
    }
    ap.bundle = realpath(bundle, NULL);
    ap.ca = realpath(root_copy, NULL);
    if (ap.bundle == NULL || ap.ca == NULL) {
        snprintf(err, sizeof(err), "%s: %s", ap.bundle == NULL ? bundle : root_copy,
                 strerror(errno));
        goto fail;
    }
    if ((data = read_file(bundle, TRUST_ROOTS_MAX_BYTES + TRUST_CA_MAX_BYTES + 2, &slen, err,
                          sizeof(err))) == NULL ||
        write_extras(bundle, ap.bundle, p12, wgetrc, data, slen, err, sizeof(err)) != 0)
        goto fail;
    ap.p12 = realpath(p12, NULL);
    ap.wgetrc = realpath(wgetrc, NULL);
    if (ap.p12 == NULL || ap.wgetrc == NULL) {
        snprintf(err, sizeof(err), "%s: %s", ap.p12 == NULL ? p12 : wgetrc, strerror(errno));
        goto fail;
    }
    note_unreadable(ap.ca);
    note_unreadable(ap.bundle);
    print_lines(&ap);
    rc = fflush(stdout) == 0 ? EXIT_OK : EXIT_RUNTIME;
    goto out;
fail:
    fprintf(stderr, "vaultgate trust: %s\n", err);
out:
    free(ap.bundle);
    free(ap.ca);
    free(ap.p12);
    free(ap.wgetrc);
    free(bundle);
    free(p12);
    free(wgetrc);
    free(root_copy);
    free(data);
    free(root);
    free(roots);
    return rc;
}
