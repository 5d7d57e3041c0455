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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
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
    fprintf(out,
            "usage: vaultgate trust --ca FILE [--bundle-out FILE] [--system-roots FILE]\n"
            "\n"
            "Writes a CA bundle (the per-run root from --ca first, then the system roots) and\n"
            "prints shell lines that make runtimes in a sandbox use it:\n"
            "  eval \"$(vaultgate trust --ca var/ca.pem)\"\n"
            "\n"
            "  --ca FILE            the per-run root certificate (vaultgate run --ca-out)\n"
            "  --bundle-out FILE    where to write the bundle [<directory of --ca>/bundle.pem]\n"
            "  --system-roots FILE  system trust anchors to append [" TRUST_DEFAULT_ROOTS "]\n"
            "\n"
            "SSL_CERT_FILE, REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE and GIT_SSL_CAINFO name the\n"
            "bundle; NODE_EXTRA_CA_CERTS names the root alone (Node adds it to its own store).\n");
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

/* Writes root then roots to path, mode 0644, atomically. 0 or -1 + err. */
static int write_bundle(const char *path, const char *root, size_t rlen, const char *roots,
                        size_t slen, char *err, size_t errlen)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 8);
    FILE *f = NULL;
    int fd = -1, rc = -1;

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
    if (write_all(f, root, rlen) != 0 ||
        (rlen > 0 && root[rlen - 1] != '\n' && write_all(f, "\n", 1) != 0) ||
        write_all(f, roots, slen) != 0 ||
        (slen > 0 && roots[slen - 1] != '\n' && write_all(f, "\n", 1) != 0) || fflush(f) != 0 ||
        fsync(fileno(f)) != 0) {
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

/* <directory of ca>/bundle.pem; caller frees. */
static char *default_bundle(const char *ca)
{
    const char *slash = strrchr(ca, '/');
    size_t dlen = slash == NULL ? 0 : (size_t)(slash - ca) + 1;
    char *out = malloc(dlen + sizeof("bundle.pem"));

    if (out != NULL) {
        memcpy(out, ca, dlen);
        memcpy(out + dlen, "bundle.pem", sizeof("bundle.pem"));
    }
    return out;
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

int cmd_trust(int argc, char **argv)
{
    struct trust_opts o = {NULL, NULL, NULL};
    char err[PATH_MAX + 256], *root = NULL, *roots = NULL, *bundle = NULL;
    char *abs_bundle = NULL, *abs_ca = NULL;
    size_t rlen = 0, slen = 0;
    int rc = parse_args(argc, argv, &o);

    if (rc >= 0)
        return rc;
    rc = EXIT_RUNTIME;
    if (o.roots == NULL)
        o.roots = TRUST_DEFAULT_ROOTS;
    bundle = o.bundle != NULL ? strdup(o.bundle) : default_bundle(o.ca);
    if (bundle == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    if (same_file(bundle, o.ca) || same_file(bundle, o.roots)) {
        rc = cli_usage_error("trust", "--bundle-out must not be the --ca or --system-roots file");
        goto out;
    }
    if ((root = read_file(o.ca, TRUST_CA_MAX_BYTES, &rlen, err, sizeof(err))) == NULL ||
        check_root(o.ca, root, rlen, err, sizeof(err)) != 0)
        goto fail;
    if ((roots = read_file(o.roots, TRUST_ROOTS_MAX_BYTES, &slen, err, sizeof(err))) == NULL)
        goto fail;
    if (write_bundle(bundle, root, rlen, roots, slen, err, sizeof(err)) != 0)
        goto fail;
    abs_bundle = realpath(bundle, NULL);
    abs_ca = realpath(o.ca, NULL);
    if (abs_bundle == NULL || abs_ca == NULL) {
        snprintf(err, sizeof(err), "%s: %s", abs_bundle == NULL ? bundle : o.ca, strerror(errno));
        goto fail;
    }
    print_export("SSL_CERT_FILE", abs_bundle);
    print_export("REQUESTS_CA_BUNDLE", abs_bundle);
    print_export("CURL_CA_BUNDLE", abs_bundle);
    print_export("NODE_EXTRA_CA_CERTS", abs_ca);
    print_export("GIT_SSL_CAINFO", abs_bundle);
    rc = fflush(stdout) == 0 ? EXIT_OK : EXIT_RUNTIME;
    goto out;
fail:
    fprintf(stderr, "vaultgate trust: %s\n", err);
out:
    free(abs_bundle);
    free(abs_ca);
    free(bundle);
    free(root);
    free(roots);
    return rc;
}
