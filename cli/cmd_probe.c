/*
 * cmd_probe.c - `vaultgate probe`: run inside a sandbox to prove egress is enforced (SPEC §9).
 *
 * Passes (exit 0) only if both hold:
 *   (a) a TLS connection to --target:443 with SNI probe.vaultgate.invalid reaches vaultgate,
 *       which answers GET / for that reserved name itself with 204 and a Proxy-Status naming
 *       vaultgate and the run;
 *   (b) a TCP connection to --target:22 fails (refused, unreachable or timed out).
 * The target defaults to 192.0.2.1 (TEST-NET-1, never routed): in a correctly wired sandbox the
 * redirect takes the connection to vaultgate, and nothing answers on port 22. Otherwise a
 * one-line reason and exit 1. This is a short-lived client: blocking I/O with poll() timeouts.
 */
#include "cli/cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define PROBE_HOST     "probe.vaultgate.invalid"
#define PROBE_RESP_MAX 4096

struct probe_opts {
    struct sockaddr_storage target;
    socklen_t target_len;
    char target_text[INET6_ADDRSTRLEN];
    double timeout;
    const char *ca;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Nonblocking connect with a deadline. Returns the fd, or -1 with errno (ETIMEDOUT on time). */
static int connect_deadline(const struct probe_opts *o, int port, double timeout)
{
    struct sockaddr_storage sa = o->target;
    struct pollfd pfd;
    int fd, err = 0, rc;
    socklen_t len = sizeof(err);

    if (sa.ss_family == AF_INET)
        ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)port);
    fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, o->target_len) == 0)
        return fd;
    if (errno != EINPROGRESS)
        goto fail;
    pfd.fd = fd;
    pfd.events = POLLOUT;
    rc = poll(&pfd, 1, (int)(timeout * 1000));
    if (rc == 0) {
        errno = ETIMEDOUT;
        goto fail;
    }
    if (rc < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
        goto fail;
    if (err != 0) {
        errno = err;
        goto fail;
    }
    return fd;
fail:
    err = errno;
    close(fd);
    errno = err;
    return -1;
}

/* Waits until fd is ready for what SSL wants, or the deadline. 0 ready, -1 timed out. */
static int wait_ssl(SSL *ssl, int rc, int fd, double deadline)
{
    struct pollfd pfd = {.fd = fd};
    int e = SSL_get_error(ssl, rc);
    double left = deadline - now_s();

    if (e == SSL_ERROR_WANT_READ)
        pfd.events = POLLIN;
    else if (e == SSL_ERROR_WANT_WRITE)
        pfd.events = POLLOUT;
    else
        return -1;
    if (left <= 0)
        return -1;
    return poll(&pfd, 1, (int)(left * 1000) + 1) > 0 ? 0 : -1;
}

/* Check (a). 0 pass, else -1 with reason. */
static int probe_tls(const struct probe_opts *o, char *reason, size_t rlen)
{
    SSL_CTX *ctx = NULL;
    SSL *ssl = NULL;
    char resp[PROBE_RESP_MAX + 1];
    const char *req = "GET / HTTP/1.1\r\nHost: " PROBE_HOST "\r\nConnection: close\r\n\r\n";
    size_t got = 0, sent = 0;
    double deadline = now_s() + o->timeout;
    int fd = -1, rc = -1, n, status = 0;

    fd = connect_deadline(o, 443, o->timeout);
    if (fd < 0) {
        snprintf(reason, rlen, "TLS to %s:443 did not connect (%s): vaultgate is not reachable",
                 o->target_text, strerror(errno));
        return -1;
    }
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL)
        goto fail_tls;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    if (o->ca != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, o->ca, NULL) != 1) {
            snprintf(reason, rlen, "--ca %s: cannot load the CA certificate", o->ca);
            goto out;
        }
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    ssl = SSL_new(ctx);
    if (ssl == NULL || SSL_set_fd(ssl, fd) != 1 || SSL_set_tlsext_host_name(ssl, PROBE_HOST) != 1)
        goto fail_tls;
    if (o->ca != NULL && SSL_set1_host(ssl, PROBE_HOST) != 1)
        goto fail_tls;
    while ((n = SSL_connect(ssl)) != 1) {
        if (wait_ssl(ssl, n, fd, deadline) != 0)
            goto fail_tls;
    }
    while (sent < strlen(req)) {
        n = SSL_write(ssl, req + sent, (int)(strlen(req) - sent));
        if (n > 0)
            sent += (size_t)n;
        else if (wait_ssl(ssl, n, fd, deadline) != 0)
            goto fail_tls;
    }
    while (got < PROBE_RESP_MAX) {
        n = SSL_read(ssl, resp + got, (int)(PROBE_RESP_MAX - got));
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (SSL_get_error(ssl, n) == SSL_ERROR_ZERO_RETURN ||
            SSL_get_error(ssl, n) == SSL_ERROR_SYSCALL)
            break;
        if (wait_ssl(ssl, n, fd, deadline) != 0)
            break;
    }
    resp[got] = '\0';
    if (sscanf(resp, "HTTP/1.%*1[01] %3d", &status) != 1 || status != 204) {
        snprintf(reason, rlen, "TLS to %s:443 was answered, but not by vaultgate (no 204 for %s)",
                 o->target_text, PROBE_HOST);
        goto out;
    }
    if (strcasestr(resp, "\r\nProxy-Status: vaultgate") == NULL) {
        snprintf(reason, rlen, "TLS to %s:443: a 204 without vaultgate's Proxy-Status",
                 o->target_text);
        goto out;
    }
    rc = 0;
    goto out;
fail_tls:
    snprintf(reason, rlen, "TLS to %s:443 (SNI %s) failed: %s", o->target_text, PROBE_HOST,
             ERR_reason_error_string(ERR_peek_last_error()) != NULL
                 ? ERR_reason_error_string(ERR_peek_last_error())
                 : "handshake or read did not complete in time");
out:
    ERR_clear_error();
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    close(fd);
    return rc;
}

/* Check (b). 0 pass (port 22 unreachable), else -1 with reason. */
static int probe_port22(const struct probe_opts *o, char *reason, size_t rlen)
{
    int fd = connect_deadline(o, 22, o->timeout);

    if (fd < 0)
        return 0;
    close(fd);
    snprintf(reason, rlen, "TCP to %s:22 connected: traffic other than 80/443 leaves the sandbox",
             o->target_text);
    return -1;
}

/* Sets the target to the IP literal s; o is left alone when s is not one. 0 or -1. */
static int parse_target(const char *s, struct probe_opts *o)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    socklen_t len;

    if (inet_pton(AF_INET, s, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        len = sizeof(*in);
    } else if (inet_pton(AF_INET6, s, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        len = sizeof(*in6);
    } else {
        return -1;
    }
    o->target = ss;
    o->target_len = len;
    snprintf(o->target_text, sizeof(o->target_text), "%s", s);
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vaultgate probe [--target IP] [--timeout S] [--ca FILE]\n"
            "\n"
            "Run inside a sandbox after wiring it: exits 0 only if TLS to TARGET:443\n"
            "reaches vaultgate (it answers " PROBE_HOST " with 204) and TCP to TARGET:22 fails.\n"
            "  --target IP   an address that is never routed (default 192.0.2.1)\n"
            "  --timeout S   seconds for each check (default 3)\n"
            "  --ca FILE     also verify vaultgate's certificate against this CA\n");
}

static int set_target(void *arg, const char *v)
{
    if (parse_target(v, arg) != 0)
        return cli_usage_error("probe", "--target: not an IP address");
    return 0;
}

static int set_timeout(void *arg, const char *v)
{
    struct probe_opts *o = arg;
    char *end;
    double t = strtod(v, &end);

    if (*v == '\0' || *end != '\0' || !(t > 0 && t <= 300))
        return cli_usage_error("probe", "--timeout: expected seconds in (0, 300]");
    o->timeout = t;
    return 0;
}

static const struct cli_opt probe_table[] = {
    {"--target", CLI_SET, .set = set_target},
    {"--timeout", CLI_SET, .set = set_timeout},
    {"--ca", CLI_STR, .off = offsetof(struct probe_opts, ca)},
    {0},
};

int cmd_probe(int argc, char **argv)
{
    static const struct cli_words words = {.whole = true};
    static const struct cli_spec spec = {"probe", probe_table, usage, NULL, &words};
    struct probe_opts o = {.timeout = 3.0};
    char reason[512];
    int rc;

    /* A peer that closes early must give a reason line, not a death by SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    parse_target("192.0.2.1", &o);
    if (cli_parse(&spec, argc, argv, &o, &rc) < 0)
        return rc;
    if (probe_tls(&o, reason, sizeof(reason)) != 0 ||
        probe_port22(&o, reason, sizeof(reason)) != 0) {
        fprintf(stderr, "vaultgate probe: FAIL: %s\n", reason);
        return EXIT_RUNTIME;
    }
    printf("vaultgate probe: ok: %s:443 reaches vaultgate, %s:22 is unreachable\n", o.target_text,
           o.target_text);
    return EXIT_OK;
}
