/*
 * hsclient.c - full-handshake load for tests/bench/bench_proxy.sh (not part of any build).
 *
 * N threads each loop: connect, TLS handshake with SNI, close_notify, close. Counts handshakes
 * and resumed ones. By default no session is offered, so every handshake is a full one (resumed
 * must stay 0). With "resume" each thread first makes one full handshake, sends a request and
 * reads the answer (a TLS 1.3 ticket arrives after the handshake), and then offers that session
 * on every connection (resumed must equal handshakes).
 * Usage: hsclient HOST PORT SNI SECONDS THREADS [resume]
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
static int resume;
static SSL_CTX *ctx;
static _Atomic long done, resumed, failed;

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A full handshake and one request on it: returns the session the server issued, or NULL. */
static SSL_SESSION *first_session(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    SSL *ssl;
    SSL_SESSION *sess = NULL;
    char req[256], buf[4096];

    if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0) {
        close(fd);
        return NULL;
    }
    ssl = SSL_new(ctx);
    SSL_set_tlsext_host_name(ssl, sni);
    SSL_set_fd(ssl, fd);
    snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", sni);
    if (SSL_connect(ssl) == 1 && SSL_write(ssl, req, (int)strlen(req)) > 0) {
        while (SSL_read(ssl, buf, sizeof(buf)) > 0)
            ;
        sess = SSL_get1_session(ssl);
        SSL_shutdown(ssl); /* a session not shut down is marked not resumable at SSL_free */
    }
    ERR_clear_error();
    SSL_free(ssl);
    close(fd);
    return sess;
}

static void *run(void *arg)
{
    double end = now() + seconds;
    SSL_SESSION *sess = NULL;

    (void)arg;
    if (resume && (sess = first_session()) == NULL) {
        atomic_fetch_add(&failed, 1);
        return NULL;
    }
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
        if (sess != NULL)
            SSL_set_session(ssl, sess);
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
    SSL_SESSION_free(sess);
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th[64];
    int n;
    double t0, t1;

    if (argc != 6 && !(argc == 7 && strcmp(argv[6], "resume") == 0))
        return fprintf(stderr, "usage: hsclient HOST PORT SNI SECONDS THREADS [resume]\n"), 2;
    resume = argc == 7;
    dst.sin_family = AF_INET;
    dst.sin_port = htons((unsigned short)atoi(argv[2]));
    inet_pton(AF_INET, argv[1], &dst.sin_addr);
    sni = argv[3];
    seconds = atof(argv[4]);
    n = atoi(argv[5]);
    if (n < 1 || n > 64)
        n = 1;
    ctx = SSL_CTX_new(TLS_client_method());
    /* no session cache on the client: only the session a thread keeps is ever offered */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (!resume)
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
