/*
 * idleclient.c - idle keep-alive TLS connections for tests/bench/bench_proxy.sh and bench_h2.sh
 * (not part of any build).
 *
 * Opens N TLS connections one after the other (SNI set, the first session resumed on the others
 * to save client time), sends one GET on each and reads its answer (until the body "ok\n"), then
 * keeps every connection open and idle. Prints "ready <n> failed <m>" once all are open, and
 * exits (closing them all) when its standard input reaches EOF.
 * Modes (fifth argument): handshake-only (no request); h2 (ALPN h2 required, then the client
 * preface and the SETTINGS exchange: the server's SETTINGS acknowledged and ours acknowledged by
 * it, no request); h2-get (the same, then one GET on stream 1 read to its END_STREAM).
 * Usage: idleclient HOST PORT SNI N [handshake-only|h2|h2-get]
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

/* The few HTTP/2 frames this client needs (RFC 9113 §4.1, §6.5), built and read here so that
 * the benchmark builds with OpenSSL alone. */
enum { H2_DATA = 0, H2_HEADERS = 1, H2_RST_STREAM = 3, H2_SETTINGS = 4, H2_GOAWAY = 7 };
enum { H2_END_STREAM = 0x1, H2_ACK = 0x1, H2_END_HEADERS = 0x4 };

static int read_full(SSL *ssl, unsigned char *buf, size_t n)
{
    size_t have = 0;

    while (have < n) {
        int r = SSL_read(ssl, buf + have, (int)(n - have));

        if (r <= 0)
            return -1;
        have += (size_t)r;
    }
    return 0;
}

static size_t h2_frame(unsigned char *out, size_t len, int type, int flags, unsigned stream)
{
    out[0] = (unsigned char)(len >> 16);
    out[1] = (unsigned char)(len >> 8);
    out[2] = (unsigned char)len;
    out[3] = (unsigned char)type;
    out[4] = (unsigned char)flags;
    out[5] = (unsigned char)(stream >> 24);
    out[6] = (unsigned char)(stream >> 16);
    out[7] = (unsigned char)(stream >> 8);
    out[8] = (unsigned char)stream;
    return 9 + len;
}

/* Preface and empty SETTINGS, plus (get) a GET / on stream 1 whose HPACK block is static-table
 * indices and a literal :authority; then frames are read until both SETTINGS are acknowledged
 * and (get) stream 1 has ended. */
static int h2_exchange(SSL *ssl, const char *authority, int get)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    unsigned char out[512], hdr[9], payload[16384], ack[9];
    size_t n = sizeof(preface) - 1, alen = strlen(authority);
    int got_settings = 0, got_ack = 0, got_resp = !get;

    if (alen > 100)
        return -1;
    memcpy(out, preface, n);
    n += h2_frame(out + n, 0, H2_SETTINGS, 0, 0);
    if (get) {
        unsigned char *b = out + n + 9;

        /* :method GET, :scheme https, :path /, :authority literal without indexing */
        b[0] = 0x82, b[1] = 0x87, b[2] = 0x84, b[3] = 0x01, b[4] = (unsigned char)alen;
        memcpy(b + 5, authority, alen);
        n += h2_frame(out + n, 5 + alen, H2_HEADERS, H2_END_STREAM | H2_END_HEADERS, 1);
    }
    if (SSL_write(ssl, out, (int)n) != (int)n)
        return -1;
    while (!got_settings || !got_ack || !got_resp) {
        size_t len;
        unsigned stream;

        if (read_full(ssl, hdr, 9) < 0)
            return -1;
        len = (size_t)hdr[0] << 16 | (size_t)hdr[1] << 8 | hdr[2];
        stream = ((unsigned)hdr[5] & 0x7f) << 24 | (unsigned)hdr[6] << 16 | (unsigned)hdr[7] << 8 |
                 hdr[8];
        if (len > sizeof(payload) || read_full(ssl, payload, len) < 0)
            return -1;
        if (hdr[3] == H2_GOAWAY || (hdr[3] == H2_RST_STREAM && stream == 1))
            return -1;
        if (hdr[3] == H2_SETTINGS && (hdr[4] & H2_ACK))
            got_ack = 1;
        else if (hdr[3] == H2_SETTINGS) {
            got_settings = 1;
            n = h2_frame(ack, 0, H2_SETTINGS, H2_ACK, 0);
            if (SSL_write(ssl, ack, (int)n) != (int)n)
                return -1;
        } else if ((hdr[3] == H2_DATA || hdr[3] == H2_HEADERS) && stream == 1 &&
                   (hdr[4] & H2_END_STREAM))
            got_resp = 1;
    }
    return 0;
}

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

static int alpn_is_h2(const SSL *ssl)
{
    const unsigned char *p;
    unsigned len;

    SSL_get0_alpn_selected(ssl, &p, &len);
    return len == 2 && memcmp(p, "h2", 2) == 0;
}

int main(int argc, char **argv)
{
    struct sockaddr_in dst = {0};
    SSL_CTX *ctx;
    SSL_SESSION *sess = NULL;
    SSL **ssls;
    const char *mode = argc == 6 ? argv[5] : "";
    int n, ok = 0, failed = 0, h2 = strncmp(mode, "h2", 2) == 0;
    char c;

    if ((argc != 5 && argc != 6) || (argc == 6 && strcmp(mode, "handshake-only") != 0 &&
                                     strcmp(mode, "h2") != 0 && strcmp(mode, "h2-get") != 0))
        return fprintf(stderr, "usage: idleclient HOST PORT SNI N [handshake-only|h2|h2-get]\n"), 2;
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
    if (h2)
        SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x02h2", 3);
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
        if (SSL_connect(ssl) != 1 || (argc == 5 && one_request(ssl, argv[3]) < 0) ||
            (h2 && (!alpn_is_h2(ssl) || h2_exchange(ssl, argv[3], mode[2] != '\0') < 0))) {
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
