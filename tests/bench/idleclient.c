/*
 * idleclient.c - idle keep-alive TLS connections for tests/bench/bench_proxy.sh (not part of any
 * build).
 *
 * Opens N TLS connections one after the other (SNI set, the first session resumed on the others
 * to save client time), sends one GET on each and reads its answer (until the body "ok\n"), then
 * keeps every connection open and idle. Prints "ready <n> failed <m>" once all are open, and
 * exits (closing them all) when its standard input reaches EOF.
 * Usage: idleclient HOST PORT SNI N [handshake-only]
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int one_request(SSL *ssl, const char *sni)
{
    char req[512], buf[4096];
    size_t have = 0;
    int n = snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", sni);

    if (SSL_write(ssl, req, n) != n)
        return -1;
    while (have < sizeof(buf) - 1) {
        int r = SSL_read(ssl, buf + have, (int)(sizeof(buf) - 1 - have));

        if (r <= 0)
            return -1;
        have += (size_t)r;
        buf[have] = '\0';
        if (have >= 3 && memcmp(buf + have - 3, "ok\n", 3) == 0)
            return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    struct sockaddr_in dst = {0};
    SSL_CTX *ctx;
    SSL_SESSION *sess = NULL;
    SSL **ssls;
    int n, ok = 0, failed = 0;
    char c;

    if (argc != 5 && argc != 6)
        return fprintf(stderr, "usage: idleclient HOST PORT SNI N [handshake-only]\n"), 2;
    dst.sin_family = AF_INET;
    dst.sin_port = htons((unsigned short)atoi(argv[2]));
    inet_pton(AF_INET, argv[1], &dst.sin_addr);
    n = atoi(argv[4]);
    if (n < 1)
        n = 1;
    ssls = calloc((size_t)n, sizeof(*ssls));
    ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT);
    for (int i = 0; i < n; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        SSL *ssl;

        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0) {
            close(fd);
            failed++;
            continue;
        }
        ssl = SSL_new(ctx);
        SSL_set_tlsext_host_name(ssl, argv[3]);
        SSL_set_fd(ssl, fd);
        if (sess != NULL)
            SSL_set_session(ssl, sess);
        if (SSL_connect(ssl) != 1 || (argc == 5 && one_request(ssl, argv[3]) < 0)) {
            ERR_clear_error();
            SSL_free(ssl);
            close(fd);
            failed++;
            continue;
        }
        if (sess == NULL)
            sess = SSL_get1_session(ssl); /* TLS 1.3: the ticket arrived with the response */
        ssls[ok++] = ssl;
    }
    printf("ready %d failed %d\n", ok, failed);
    fflush(stdout);
    while (read(0, &c, 1) > 0)
        ;
    for (int i = 0; i < ok; i++) {
        int fd = SSL_get_fd(ssls[i]);

        SSL_free(ssls[i]);
        close(fd);
    }
    return 0;
}
