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
#include <openssl/x509.h>
#include <openssl/x509v3.h>

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
        "  --system-roots FILE  system trust anchors to append [" TRUSTFILES_DEFAULT_ROOTS "]\n"
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

/*
 * A note on stderr when a sandbox user other than the owner could not read path: a directory
 * above it that others cannot search (a state directory an older release made 0700), or the file
 * itself.
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

int cmd_trust(int argc, char **argv)
{
    struct trust_opts o = {NULL, NULL, NULL};
    char err[PATH_MAX + 256], *root = NULL, *bundle = NULL, *p12 = NULL, *wgetrc = NULL;
    char *root_copy = NULL;
    struct trustfiles ap = {NULL, NULL, NULL, NULL};
    size_t rlen = 0;
    int rc = parse_args(argc, argv, &o);

    if (rc >= 0)
        return rc;
    rc = EXIT_RUNTIME;
    if (o.roots == NULL)
        o.roots = TRUSTFILES_DEFAULT_ROOTS;
    bundle = o.bundle != NULL ? strdup(o.bundle) : trustfiles_beside(o.ca, "bundle.pem");
    p12 = bundle != NULL ? trustfiles_beside(bundle, "truststore.p12") : NULL;
    wgetrc = bundle != NULL ? trustfiles_beside(bundle, "wgetrc") : NULL;
    root_copy = bundle != NULL ? trustfiles_beside(bundle, "ca.pem") : NULL;
    if (bundle == NULL || p12 == NULL || wgetrc == NULL || root_copy == NULL) {
        snprintf(err, sizeof(err), "out of memory");
        goto fail;
    }
    if (trustfiles_same(bundle, o.ca) || trustfiles_same(bundle, o.roots) ||
        trustfiles_same(p12, o.ca) || trustfiles_same(wgetrc, o.ca)) {
        rc = cli_usage_error("trust", "--bundle-out must not be the --ca or --system-roots file");
        goto out;
    }
    if (!trustfiles_same(root_copy, o.ca) && trustfiles_same(root_copy, o.roots)) {
        rc = cli_usage_error("trust", "--system-roots must not be ca.pem beside the bundle");
        goto out;
    }
    if ((root = trustfiles_read(o.ca, TRUSTFILES_CA_MAX_BYTES, &rlen, err, sizeof(err))) == NULL ||
        check_root(o.ca, root, rlen, err, sizeof(err)) != 0 ||
        trustfiles_write(root, rlen, o.ca, bundle, o.roots, &ap, err, sizeof(err)) != 0)
        goto fail;
    note_unreadable(ap.ca);
    note_unreadable(ap.bundle);
    trustfiles_print_env(stdout, &ap);
    rc = fflush(stdout) == 0 ? EXIT_OK : EXIT_RUNTIME;
    goto out;
fail:
    fprintf(stderr, "vaultgate trust: %s\n", err);
out:
    trustfiles_free(&ap);
    free(bundle);
    free(p12);
    free(wgetrc);
    free(root_copy);
    free(root);
    return rc;
}
