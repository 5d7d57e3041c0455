/*
 * cmd_health.c - `vaultgate health`: ask a running gateway's admin API whether it serves
 * (/healthz) or is ready (/readyz), for a container's HEALTHCHECK or an exec probe in an image
 * that has no shell and no HTTP client (SPEC §13).
 *
 * Guarantees: one GET over loopback or the unix socket, bounded by HEALTH_TIMEOUT_SECONDS for
 * connecting, sending and reading; exit 0 only for a `200` status line; nothing but the status
 * line is read or printed (the admin API says nothing secret, but there is no need to).
 */
#include "cli/cli.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define HEALTH_CMD             "health"
#define HEALTH_DEFAULT_ADMIN   "127.0.0.1:9090"
#define HEALTH_TIMEOUT_SECONDS 5

struct health_opts {
    const char *admin;
    bool ready;
};

static void health_usage(FILE *out)
{
    fprintf(out,
            "usage: vaultgate health [--admin ADDR] [--ready]\n\n"
            "Asks the admin API of a running `vaultgate run` for /healthz (or /readyz with\n"
            "--ready) and exits 0 when it answers 200: a HEALTHCHECK or exec probe for an image\n"
            "without a shell or an HTTP client.\n\n"
            "  --admin ADDR  the run's --admin address, host:port, [v6]:port or unix:/path\n"
            "                (" HEALTH_DEFAULT_ADMIN ")\n"
            "  --ready       ask /readyz: every listener up and the audit store reachable\n\n"
            "exit status: 0 answered 200, 1 anything else (the reason on stderr), 2 usage "
            "error\n");
}

#define HEALTH_OPT(field) offsetof(struct health_opts, field)

static const struct cli_opt health_table[] = {
    {"--admin", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = HEALTH_OPT(admin)},
    {"--ready", CLI_FLAG, .off = HEALTH_OPT(ready)},
    {0},
};

/* A socket connected to addr, with send and receive timeouts; -1 + err. */
static int dial(const char *addr, char *err, size_t errlen)
{
    struct timeval tv = {HEALTH_TIMEOUT_SECONDS, 0};
    struct addrinfo hints = {0}, *ai = NULL;
    char host[256];
    const char *port;
    int fd = -1, rc;

    if (strncmp(addr, "unix:", 5) == 0) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};

        if (strlen(addr + 5) >= sizeof(sun.sun_path)) {
            snprintf(err, errlen, "--admin: socket path too long");
            return -2;
        }
        memcpy(sun.sun_path, addr + 5, strlen(addr + 5) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
                        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
                        connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0)) {
            snprintf(err, errlen, "%s: %s", addr, strerror(errno));
            close(fd);
            return -1;
        }
        return fd;
    }
    port = strrchr(addr, ':');
    if (port == NULL || port == addr || port[1] == '\0' || (size_t)(port - addr) >= sizeof(host)) {
        snprintf(err, errlen, "--admin: expected host:port, [v6]:port or unix:/path");
        return -2;
    }
    if (addr[0] == '[' && port[-1] == ']')
        snprintf(host, sizeof(host), "%.*s", (int)(port - addr - 2), addr + 1);
    else
        snprintf(host, sizeof(host), "%.*s", (int)(port - addr), addr);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV; /* never a name lookup */
    if ((rc = getaddrinfo(host, port + 1, &hints, &ai)) != 0) {
        snprintf(err, errlen, "--admin: '%s' is not an IP address and port", addr);
        return -2;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
        connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        snprintf(err, errlen, "%s: %s", addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

int cmd_health(int argc, char **argv)
{
    static const struct cli_spec spec = {HEALTH_CMD, health_table, health_usage, NULL, NULL};
    struct health_opts o = {HEALTH_DEFAULT_ADMIN, false};
    char err[512], req[128], resp[64];
    const char *path;
    size_t got = 0;
    int fd, rc;

    if (cli_parse(&spec, argc, argv, &o, &rc) < 0)
        return rc;
    path = o.ready ? "/readyz" : "/healthz";
    fd = dial(o.admin, err, sizeof(err));
    if (fd == -2)
        return cli_usage_error(HEALTH_CMD, "%s", err);
    if (fd < 0) {
        fprintf(stderr, "vaultgate health: %s\n", err);
        return EXIT_RUNTIME;
    }
    /* the admin API serves an IP literal or localhost as Host (SPEC §7); HTTP/1.0 closes */
    snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req)) {
        fprintf(stderr, "vaultgate health: %s: send: %s\n", o.admin, strerror(errno));
        close(fd);
        return EXIT_RUNTIME;
    }
    while (got < sizeof(resp) - 1 && memchr(resp, '\n', got) == NULL) {
        ssize_t n = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    resp[got] = '\0';
    resp[strcspn(resp, "\r\n")] = '\0';
    if (strncmp(resp, "HTTP/1.", 7) == 0 && strncmp(resp + 8, " 200", 4) == 0)
        return EXIT_OK;
    if (strncmp(resp, "HTTP/1.", 7) == 0 && strlen(resp) >= 12)
        fprintf(stderr, "vaultgate health: %s %s answered %.3s\n", o.admin, path, resp + 9);
    else
        fprintf(stderr, "vaultgate health: %s %s gave no HTTP answer\n", o.admin, path);
    return EXIT_RUNTIME;
}
