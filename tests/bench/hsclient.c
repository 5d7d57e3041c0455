/*
 * hsclient.c - full-handshake load for tests/bench/bench_proxy.sh (not part of any build).
 *
 * N threads each loop: connect, TLS handshake with SNI and no session offered (so every
 * handshake is a full one), close_notify, close. Counts handshakes and, as a check, resumed
 * ones (must stay 0). Usage: hsclient HOST PORT SNI SECONDS THREADS
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in dst;
static const char *sni;
static double seconds;
static SSL_CTX *ctx;
static _Atomic long done, resumed, failed;

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *run(void *arg)
{
    double end = now() + seconds;

    (void)arg;
    while (now() < end) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        SSL *ssl;

        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0) {
            atomic_fetch_add(&failed, 1);
            close(fd);
            continue;
        }
        ssl = SSL_new(ctx);
        SSL_set_tlsext_host_name(ssl, sni);
        SSL_set_fd(ssl, fd);
        if (SSL_connect(ssl) == 1) {
            atomic_fetch_add(&done, 1);
            if (SSL_session_reused(ssl))
                atomic_fetch_add(&resumed, 1);
            SSL_shutdown(ssl);
        } else {
            atomic_fetch_add(&failed, 1);
            ERR_clear_error();
        }
        SSL_free(ssl);
        close(fd);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th[64];
    int n;
    double t0, t1;

    if (argc != 6)
        return fprintf(stderr, "usage: hsclient HOST PORT SNI SECONDS THREADS\n"), 2;
    dst.sin_family = AF_INET;
    dst.sin_port = htons((unsigned short)atoi(argv[2]));
    inet_pton(AF_INET, argv[1], &dst.sin_addr);
    sni = argv[3];
    seconds = atof(argv[4]);
    n = atoi(argv[5]);
    if (n < 1 || n > 64)
        n = 1;
    ctx = SSL_CTX_new(TLS_client_method());
    /* no session cache on the client: nothing is ever offered for resumption */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    t0 = now();
    for (int i = 0; i < n; i++)
        pthread_create(&th[i], NULL, run, NULL);
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    t1 = now();
    printf("handshakes %ld resumed %ld failed %ld seconds %.2f rate %.0f\n", (long)done,
           (long)resumed, (long)failed, t1 - t0, (double)done / (t1 - t0));
    return 0;
}
