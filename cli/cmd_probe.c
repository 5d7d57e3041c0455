/*
 * cmd_probe.c - `vaultgate probe`: run inside a sandbox to prove egress is enforced (SPEC §9).
 *
 * Passes (exit 0) only if both hold:
 *   (a) a TLS connection to --target:443 with SNI probe.vaultgate.invalid reaches vaultgate,
 *       which answers GET / for that reserved name itself with 204 and a Proxy-Status naming
 *       vaultgate and the run;
 *   (b) a TCP connection to --target:22 fails (refused, unreachable or timed out).
 * With --dns (SPEC §12) two more, and one line per check:
 *   (c) a DNS query for probe.vaultgate.invalid TXT to --target:53 (UDP) is answered with the run
 *       id (the one (a)'s Proxy-Status names, when (a) got one): vaultgate holds DNS;
 *   (d) a UDP datagram to --target:443 is refused at once - an ICMP error comes back (port
 *       unreachable, administratively prohibited) - so QUIC clients fall back to TCP; an answer,
 *       or silence until the timeout, fails.
 * The target defaults to 192.0.2.1 (TEST-NET-1, never routed): in a correctly wired sandbox the
 * redirect takes the connection to vaultgate, and nothing answers on port 22. Otherwise a
 * one-line reason and exit 1. This is a short-lived client: blocking I/O with poll() timeouts;
 * libldns writes the query and reads the answer.
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

#include <ldns/ldns.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

#define PROBE_HOST     "probe.vaultgate.invalid"
#define PROBE_RESP_MAX 4096
#define PROBE_RUN_MAX  256 /* a run id as (a) and (c) report it */
#define PROBE_PS_RUN   "probe answered for run "

struct probe_opts {
    struct sockaddr_storage target;
    socklen_t target_len;
    char target_text[INET6_ADDRSTRLEN];
    double timeout;
    const char *ca;
    bool dns; /* --dns: checks (c) and (d) as well */
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

/* The run id in the Proxy-Status of resp into run (PROBE_RUN_MAX), or "" when there is none. */
static void proxy_status_run(const char *resp, char *run)
{
    const char *p = strstr(resp, PROBE_PS_RUN);
    size_t n = 0;

    if (p != NULL) {
        p += strlen(PROBE_PS_RUN);
        while (p[n] != '\0' && p[n] != '"' && p[n] != '\r' && n + 1 < PROBE_RUN_MAX)
            n++;
        memcpy(run, p, n);
    }
    run[n] = '\0';
}

/*
 * Handshakes, sends the probe request and reads the answer (until the peer closes, the buffer
 * is full or the deadline) into resp (PROBE_RESP_MAX + 1, NUL-terminated). 0, or -1 when the
 * handshake or the request did not get through.
 */
static int probe_converse(SSL *ssl, int fd, double deadline, char *resp)
{
    const char *req = "GET / HTTP/1.1\r\nHost: " PROBE_HOST "\r\nConnection: close\r\n\r\n";
    size_t got = 0, sent = 0;
    int n;

    while ((n = SSL_connect(ssl)) != 1) {
        if (wait_ssl(ssl, n, fd, deadline) != 0)
            return -1;
    }
    while (sent < strlen(req)) {
        n = SSL_write(ssl, req + sent, (int)(strlen(req) - sent));
        if (n > 0)
            sent += (size_t)n;
        else if (wait_ssl(ssl, n, fd, deadline) != 0)
            return -1;
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
    return 0;
}

/* Whether resp is vaultgate's answer to the probe: a 204 with its Proxy-Status. 0, or -1 with
 * reason. */
static int probe_answer(const struct probe_opts *o, const char *resp, char *reason, size_t rlen)
{
    int status = 0;

    if (sscanf(resp, "HTTP/1.%*1[01] %3d", &status) != 1 || status != 204) {
        snprintf(reason, rlen, "TLS to %s:443 was answered, but not by vaultgate (no 204 for %s)",
                 o->target_text, PROBE_HOST);
        return -1;
    }
    if (strcasestr(resp, "\r\nProxy-Status: vaultgate") == NULL) {
        snprintf(reason, rlen, "TLS to %s:443: a 204 without vaultgate's Proxy-Status",
                 o->target_text);
        return -1;
    }
    return 0;
}

/* Check (a); the run id vaultgate named goes to run (PROBE_RUN_MAX). 0 pass, else -1 with
 * reason. */
static int probe_tls(const struct probe_opts *o, char *run, char *reason, size_t rlen)
{
    SSL_CTX *ctx = NULL;
    SSL *ssl = NULL;
    char resp[PROBE_RESP_MAX + 1];
    double deadline = now_s() + o->timeout;
    int fd = -1, rc = -1;

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
    if (probe_converse(ssl, fd, deadline, resp) != 0)
        goto fail_tls;
    if (probe_answer(o, resp, reason, rlen) != 0)
        goto out;
    proxy_status_run(resp, run);
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

/* A UDP socket connected to the target's port: errors the network sends back (ICMP) reach it. */
static int udp_connect(const struct probe_opts *o, int port)
{
    struct sockaddr_storage sa = o->target;
    int fd;

    if (sa.ss_family == AF_INET)
        ((struct sockaddr_in *)&sa)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)&sa)->sin6_port = htons((uint16_t)port);
    fd = socket(sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, o->target_len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The query of check (c) in wire form (free() it), with id. NULL when it cannot be built. */
static uint8_t *dns_query_wire(uint16_t id, size_t *len)
{
    ldns_rdf *name = ldns_dname_new_frm_str(PROBE_HOST ".");
    ldns_pkt *q = NULL;
    uint8_t *wire = NULL;

    if (name == NULL)
        return NULL;
    q = ldns_pkt_query_new(name, LDNS_RR_TYPE_TXT, LDNS_RR_CLASS_IN, LDNS_RD); /* takes name */
    if (q != NULL) {
        ldns_pkt_set_id(q, id);
        if (ldns_pkt2wire(&wire, q, len) != LDNS_STATUS_OK)
            wire = NULL;
    }
    ldns_pkt_free(q);
    return wire;
}

/* The TXT string of an answer to query id into txt (PROBE_RUN_MAX). 0, or -1 + reason. */
static int dns_answer_txt(const uint8_t *buf, size_t n, uint16_t id, char *txt, char *reason,
                          size_t rlen)
{
    ldns_pkt *a = NULL;
    ldns_rr *rr;
    const ldns_rdf *rd;
    int rc = -1;

    if (ldns_wire2pkt(&a, buf, n) != LDNS_STATUS_OK || ldns_pkt_id(a) != id || !ldns_pkt_qr(a)) {
        snprintf(reason, rlen, "not a DNS answer to the query");
        goto out;
    }
    if (ldns_pkt_get_rcode(a) != LDNS_RCODE_NOERROR || ldns_pkt_ancount(a) != 1 ||
        (rr = ldns_rr_list_rr(ldns_pkt_answer(a), 0)) == NULL ||
        ldns_rr_get_type(rr) != LDNS_RR_TYPE_TXT || ldns_rr_rd_count(rr) != 1) {
        snprintf(reason, rlen, "answered without one TXT record (rcode %d): another resolver",
                 (int)ldns_pkt_get_rcode(a));
        goto out;
    }
    rd = ldns_rr_rdf(rr, 0);
    if (ldns_rdf_size(rd) < 1 || ldns_rdf_data(rd)[0] + 1U != ldns_rdf_size(rd) ||
        ldns_rdf_size(rd) > PROBE_RUN_MAX) {
        snprintf(reason, rlen, "the TXT record is not one run id");
        goto out;
    }
    memcpy(txt, ldns_rdf_data(rd) + 1, ldns_rdf_size(rd) - 1);
    txt[ldns_rdf_size(rd) - 1] = '\0';
    rc = 0;
out:
    ldns_pkt_free(a);
    return rc;
}

/* Check (c): run is what (a) learned ("" when nothing). 0 pass, else -1 with reason. */
static int probe_dns(const struct probe_opts *o, const char *run, char *got, char *reason,
                     size_t rlen)
{
    uint8_t *wire = NULL, buf[4096];
    char why[160];
    uint16_t id = 0;
    size_t len = 0;
    double deadline = now_s() + o->timeout;
    int fd = udp_connect(o, 53), rc = -1;

    if (fd < 0 || RAND_bytes((unsigned char *)&id, sizeof(id)) != 1 ||
        (wire = dns_query_wire(id, &len)) == NULL || send(fd, wire, len, 0) != (ssize_t)len) {
        snprintf(reason, rlen, "DNS to %s:53: cannot send the query (%s)", o->target_text,
                 strerror(errno));
        goto out;
    }
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        double left = deadline - now_s();
        ssize_t n;

        if (left <= 0 || poll(&pfd, 1, (int)(left * 1000) + 1) <= 0) {
            snprintf(reason, rlen, "DNS to %s:53: no answer within %g s", o->target_text,
                     o->timeout);
            goto out;
        }
        n = recv(fd, buf, sizeof(buf), 0);
        if (n < 0) {
            snprintf(reason, rlen, "DNS to %s:53: %s: the gateway does not hold DNS",
                     o->target_text, strerror(errno));
            goto out;
        }
        if (dns_answer_txt(buf, (size_t)n, id, got, why, sizeof(why)) == 0)
            break;
        if (strcmp(why, "not a DNS answer to the query") != 0) {
            snprintf(reason, rlen, "DNS to %s:53: %s TXT %s", o->target_text, PROBE_HOST, why);
            goto out;
        }
    }
    if (run[0] != '\0' && strcmp(run, got) != 0) {
        snprintf(reason, rlen, "DNS to %s:53: %s TXT is '%s', not this run's '%s'", o->target_text,
                 PROBE_HOST, got, run);
        goto out;
    }
    rc = 0;
out:
    free(wire);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Check (d): an ICMP error must come back for a datagram to 443. 0 pass (the error's text in
 * how), else -1 with reason. */
static int probe_udp443(const struct probe_opts *o, char *how, size_t hlen, char *reason,
                        size_t rlen)
{
    static const char payload[] = "vaultgate probe: is UDP refused?";
    struct pollfd pfd = {.events = POLLIN};
    char buf[512];
    int fd = udp_connect(o, 443), rc = -1, e;

    if (fd < 0) {
        snprintf(reason, rlen, "UDP to %s:443: %s", o->target_text, strerror(errno));
        return -1;
    }
    pfd.fd = fd;
    if (send(fd, payload, sizeof(payload) - 1, 0) < 0) {
        e = errno; /* a local reject rule answers at once, in send() itself */
        goto error;
    }
    if (poll(&pfd, 1, (int)(o->timeout * 1000)) <= 0) {
        snprintf(reason, rlen,
                 "UDP to %s:443: no answer and no error within %g s: dropped silently, so QUIC "
                 "clients wait before they fall back to TCP",
                 o->target_text, o->timeout);
        goto out;
    }
    if (recv(fd, buf, sizeof(buf), 0) >= 0) {
        snprintf(reason, rlen, "UDP to %s:443 was answered: UDP leaves the sandbox",
                 o->target_text);
        goto out;
    }
    e = errno;
error:
    if (e != ECONNREFUSED && e != EHOSTUNREACH && e != ENETUNREACH && e != EACCES && e != EPERM) {
        snprintf(reason, rlen, "UDP to %s:443: %s", o->target_text, strerror(e));
        goto out;
    }
    snprintf(how, hlen, "%s", strerror(e));
    rc = 0;
out:
    close(fd);
    return rc;
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
            "usage: vaultgate probe [--target IP] [--timeout S] [--ca FILE] [--dns]\n"
            "\n"
            "Run inside a sandbox after wiring it: exits 0 only if TLS to TARGET:443\n"
            "reaches vaultgate (it answers " PROBE_HOST " with 204) and TCP to TARGET:22 fails.\n"
            "With --dns also: " PROBE_HOST " TXT to TARGET:53 is answered with the run id,\n"
            "and UDP to TARGET:443 is refused at once. One line per check.\n"
            "  --target IP   an address that is never routed (default 192.0.2.1)\n"
            "  --timeout S   seconds for each check (default 3)\n"
            "  --ca FILE     also verify vaultgate's certificate against this CA\n"
            "  --dns         also check that the gateway holds DNS and refuses UDP\n");
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
    {"--dns", CLI_FLAG, .off = offsetof(struct probe_opts, dns)},
    {0},
};

/* One line for a check: "ok" and what held on stdout, or "FAIL" and why on stderr. */
static int report(char check, int rc, const char *ok, const char *reason)
{
    if (rc == 0)
        printf("vaultgate probe: (%c) ok: %s\n", check, ok);
    else
        fprintf(stderr, "vaultgate probe: (%c) FAIL: %s\n", check, reason);
    return rc;
}

/* --dns: all four checks, each reported; exit 0 only if all hold. */
static int probe_all(const struct probe_opts *o)
{
    char reason[512], ok[512], run[PROBE_RUN_MAX] = "", got[PROBE_RUN_MAX] = "", how[128] = "";
    int bad = 0, rc;

    snprintf(ok, sizeof(ok), "%s:443 reaches vaultgate", o->target_text);
    bad |= report('a', probe_tls(o, run, reason, sizeof(reason)), ok, reason);
    snprintf(ok, sizeof(ok), "%s:22 is unreachable", o->target_text);
    bad |= report('b', probe_port22(o, reason, sizeof(reason)), ok, reason);
    rc = probe_dns(o, run, got, reason, sizeof(reason));
    snprintf(ok, sizeof(ok), "DNS to %s:53 is held by vaultgate (%s TXT: run %s)", o->target_text,
             PROBE_HOST, got);
    bad |= report('c', rc, ok, reason);
    rc = probe_udp443(o, how, sizeof(how), reason, sizeof(reason));
    snprintf(ok, sizeof(ok), "UDP to %s:443 is refused at once (%s)", o->target_text, how);
    bad |= report('d', rc, ok, reason);
    return bad == 0 ? EXIT_OK : EXIT_RUNTIME;
}

int cmd_probe(int argc, char **argv)
{
    static const struct cli_words words = {.whole = true};
    static const struct cli_spec spec = {"probe", probe_table, usage, NULL, &words};
    struct probe_opts o = {.timeout = 3.0};
    char reason[512], run[PROBE_RUN_MAX] = "";
    int rc;

    /* A peer that closes early must give a reason line, not a death by SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    parse_target("192.0.2.1", &o);
    if (cli_parse(&spec, argc, argv, &o, &rc) < 0)
        return rc;
    if (o.dns)
        return probe_all(&o);
    if (probe_tls(&o, run, reason, sizeof(reason)) != 0 ||
        probe_port22(&o, reason, sizeof(reason)) != 0) {
        fprintf(stderr, "vaultgate probe: FAIL: %s\n", reason);
        return EXIT_RUNTIME;
    }
    printf("vaultgate probe: ok: %s:443 reaches vaultgate, %s:22 is unreachable\n", o.target_text,
           o.target_text);
    return EXIT_OK;
}
