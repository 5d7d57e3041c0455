/*
 * ca_serve.c - test tool: a per-run CA from ca/ and a TLS server for one minted leaf.
 *
 *   ca_serve --root-out FILE --host HOST [--dns NAME]... [--ip IP]... [--unconstrained]
 *            [--force] [--max-conns N] [--idle SECONDS]
 *
 * Creates a CA (name-constrained to the --dns/--ip names unless --unconstrained), writes the
 * root certificate (public part only; no key is ever written) to --root-out, mints the leaf for
 * --host and serves TLS on 127.0.0.1, an ephemeral port, printed as "port N" on stdout. Each
 * connection gets "HTTP/1.1 200 OK" and "ok\n" after its request head. A host outside the
 * constraints is refused (exit 3) unless --force, which serves the leaf anyway so a test can
 * watch clients reject it. Stops after --max-conns connections [50] or --idle seconds without
 * one [60], whichever comes first.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "ca/ca.h"
#include "ca/leaf.h"

#define MAX_NAMES 64

struct serve_opts {
    const char *root_out;
    const char *host;
    const char *dns[MAX_NAMES];
    size_t ndns;
    const char *ip[MAX_NAMES];
    size_t nip;
    int unconstrained;
    int force;
    int max_conns;
    int idle;
};

static int usage(const char *msg)
{
    fprintf(stderr, "ca_serve: %s\n", msg);
    return 2;
}

static int parse(int argc, char **argv, struct serve_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--unconstrained") == 0) {
            o->unconstrained = 1;
            continue;
        }
        if (strcmp(a, "--force") == 0) {
            o->force = 1;
            continue;
        }
        if (v == NULL)
            return -1;
        i++;
        if (strcmp(a, "--root-out") == 0)
            o->root_out = v;
        else if (strcmp(a, "--host") == 0)
            o->host = v;
        else if (strcmp(a, "--dns") == 0 && o->ndns < MAX_NAMES)
            o->dns[o->ndns++] = v;
        else if (strcmp(a, "--ip") == 0 && o->nip < MAX_NAMES)
            o->ip[o->nip++] = v;
        else if (strcmp(a, "--max-conns") == 0)
            o->max_conns = atoi(v);
        else if (strcmp(a, "--idle") == 0)
            o->idle = atoi(v);
        else
            return -1;
    }
    return o->root_out != NULL && o->host != NULL && o->max_conns > 0 && o->idle > 0 ? 0 : -1;
}

static SSL_CTX *server_ctx(const struct ca *ca, X509 *leaf)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (ctx == NULL || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
        SSL_CTX_use_certificate(ctx, leaf) != 1 ||
        SSL_CTX_add1_chain_cert(ctx, ca_intermediate(ca)) != 1 ||
        SSL_CTX_use_PrivateKey(ctx, ca_leaf_key(ca)) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        ERR_print_errors_fp(stderr);
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

static int listen_loopback(int *port)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        perror("ca_serve: listen");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

static void serve_one(SSL_CTX *ctx, int fd)
{
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Type: text/plain"
                               "\r\nConnection: close\r\n\r\nok\n";
    struct timeval tv = {5, 0};
    SSL *ssl = SSL_new(ctx);
    char buf[4096];
    size_t got = 0;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (ssl == NULL || SSL_set_fd(ssl, fd) != 1 || SSL_accept(ssl) != 1)
        goto out;
    while (got < sizeof(buf) - 1) {
        int n = SSL_read(ssl, buf + got, (int)(sizeof(buf) - 1 - got));

        if (n <= 0)
            goto out;
        got += (size_t)n;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\n") != NULL)
            break;
    }
    SSL_write(ssl, resp, (int)sizeof(resp) - 1);
    SSL_shutdown(ssl);
out:
    ERR_clear_error();
    SSL_free(ssl);
    close(fd);
}

int main(int argc, char **argv)
{
    struct serve_opts o = {.max_conns = 50, .idle = 60};
    struct ca_names names = {0};
    struct ca *ca = NULL;
    X509 *leaf = NULL;
    SSL_CTX *ctx = NULL;
    char err[512] = "";
    int lfd = -1, port = 0, rc = 1;

    /* A client that closes early (curl rejecting the chain, s_client at stdin EOF) turns the
     * TLS 1.3 session tickets written after the handshake into EPIPE: never die of SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    if (parse(argc, argv, &o) != 0)
        return usage("usage: ca_serve --root-out FILE --host HOST [--dns NAME]... [--ip IP]... "
                     "[--unconstrained] [--force] [--max-conns N] [--idle SECONDS]");
    names.constrained = !o.unconstrained;
    names.dns = o.dns;
    names.ndns = o.ndns;
    names.ip = o.ip;
    names.nip = o.nip;
    if ((ca = ca_new("ca-serve", &names, err, sizeof(err))) == NULL) {
        fprintf(stderr, "ca_serve: ca_new: %s\n", err);
        goto out;
    }
    if (ca_write_root(ca, o.root_out, err, sizeof(err)) != 0) {
        fprintf(stderr, "ca_serve: %s\n", err);
        goto out;
    }
    if (!ca_permits(ca, o.host) && !o.force) {
        fprintf(stderr, "ca_serve: %s is outside the name constraints (--force serves it)\n",
                o.host);
        rc = 3;
        goto out;
    }
    if ((leaf = leaf_mint(ca, o.host, err, sizeof(err))) == NULL) {
        fprintf(stderr, "ca_serve: %s\n", err);
        goto out;
    }
    if ((ctx = server_ctx(ca, leaf)) == NULL || (lfd = listen_loopback(&port)) < 0)
        goto out;
    printf("port %d\n", port);
    fflush(stdout);
    for (int served = 0; served < o.max_conns; served++) {
        struct pollfd p = {lfd, POLLIN, 0};
        int cfd;

        if (poll(&p, 1, o.idle * 1000) <= 0)
            break;
        if ((cfd = accept(lfd, NULL, NULL)) >= 0)
            serve_one(ctx, cfd);
    }
    rc = 0;
out:
    if (lfd >= 0)
        close(lfd);
    SSL_CTX_free(ctx);
    X509_free(leaf);
    ca_free(&ca);
    return rc;
}
