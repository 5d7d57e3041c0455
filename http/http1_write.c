/*
 * http1_write.c - HTTP/1.x serialisers for the proxy (SPEC §4): new request and response heads,
 * chunk framing, vaultgate's own error responses, and the hop-by-hop strip that precedes them.
 *
 * Guarantees: nothing the peer sent is copied as is - every head is built from the fields of a
 * struct http_head, and every name (RFC 9110 token) and value (no CR, LF, NUL or other control
 * character) is checked again with the parser's byte classes (http1_int.h) before anything is
 * written, so a field that got past the model cannot forge a head; a check that fails writes
 * nothing. Framing is the writer's alone: Content-Length and Transfer-Encoding fields of the head
 * are never written, the writer adds its own. Heads always go out as HTTP/1.1; chunks carry no
 * extensions and the last chunk no trailers. An error response names only a fixed reason, an
 * sf-token error type, printable-ASCII details and a re-normalised host: no peer bytes.
 *
 * Memory: a head is sized exactly and written with one evbuffer reservation; the hop-by-hop
 * strip uses a 512-byte stack buffer (heap only for longer Connection fields). No logging here.
 */
#include "http/http1.h"
#include "http/http1_int.h"

#include "common/asan.h"
#include "common/hostname.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

/* ---- hop-by-hop fields ---- */

/* The order is that of the bits hop_bit returns. */
static const struct {
    const char *name;
    size_t len;
} hop_fields[] = {
#define HOP(s)                                                                                     \
    {                                                                                              \
        s, sizeof(s) - 1                                                                           \
    }
    HOP("Connection"), HOP("Keep-Alive"), HOP("Proxy-Connection"), HOP("Proxy-Authorization"),
    HOP("TE"),         HOP("Trailer"),    HOP("Content-Length"),   HOP("Transfer-Encoding"),
#undef HOP
};

/*
 * Removes the fields named by the Connection options. Host is never removed this way (it is
 * meant for every hop, and dropping it would change the routing of the forwarded request), nor
 * Upgrade when it is kept. Returns whether `upgrade` was among the options.
 */
static bool strip_connection_options(struct http_head *h, bool keep_upgrade)
{
    char stack[512], *buf = stack, *w;
    size_t total = 1;
    bool upgrade = false;

    for (size_t i = 0; i < h->nfields; i++) {
        if (NAME_IS(h->fields[i].name, h->fields[i].name_len, "connection"))
            total += h->fields[i].value_len + 1;
    }
    if (total > sizeof(stack) && (buf = malloc(total)) == NULL)
        return false;
    w = buf;
    for (size_t i = 0; i < h->nfields; i++) {
        if (NAME_IS(h->fields[i].name, h->fields[i].name_len, "connection")) {
            memcpy(w, h->fields[i].value, h->fields[i].value_len);
            w += h->fields[i].value_len;
            *w++ = ',';
        }
    }
    *w = '\0';
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        size_t n;

        while (is_ows((unsigned char)*tok))
            tok++;
        n = strlen(tok);
        while (n > 0 && is_ows((unsigned char)tok[n - 1]))
            tok[--n] = '\0';
        if (n == 0 || !all_tchar(tok, n) || NAME_IS(tok, n, "host"))
            continue;
        if (NAME_IS(tok, n, "upgrade")) {
            upgrade = true;
            if (keep_upgrade)
                continue;
        }
        httphead_remove(h, tok);
    }
    if (buf != stack)
        free(buf);
    return upgrade;
}

#define NHOP (sizeof(hop_fields) / sizeof(hop_fields[0]))
_Static_assert(NHOP == 8, "hop_bit knows eight hop-by-hop names");

/*
 * The bit of a field name among hop_fields (bit NHOP: Upgrade), or 0: the length picks the one
 * or two names it can be, so each field costs one or two compares, not one per entry.
 */
static unsigned hop_bit(const char *name, size_t len)
{
    switch (len) {
    case 2:
        return NAME_IS(name, len, "te") ? 1u << 4 : 0;
    case 7:
        if (NAME_IS(name, len, "trailer"))
            return 1u << 5;
        return NAME_IS(name, len, "upgrade") ? 1u << NHOP : 0;
    case 10:
        if (NAME_IS(name, len, "connection"))
            return 1u << 0;
        return NAME_IS(name, len, "keep-alive") ? 1u << 1 : 0;
    case 14:
        return NAME_IS(name, len, "content-length") ? 1u << 6 : 0;
    case 16:
        return NAME_IS(name, len, "proxy-connection") ? 1u << 2 : 0;
    case 17:
        return NAME_IS(name, len, "transfer-encoding") ? 1u << 7 : 0;
    case 19:
        return NAME_IS(name, len, "proxy-authorization") ? 1u << 3 : 0;
    default:
        return 0;
    }
}

/* One bit per hop_fields entry present in h (bit NHOP: Upgrade), in one pass over the fields. */
static unsigned hop_present(const struct http_head *h)
{
    unsigned bits = 0;

    for (size_t i = 0; i < h->nfields; i++)
        bits |= hop_bit(h->fields[i].name, h->fields[i].name_len);
    return bits;
}

void http1_strip_hop_by_hop(struct http_head *h, bool keep_upgrade)
{
    unsigned bits = hop_present(h);
    bool upgrade = (bits & 1) != 0 && strip_connection_options(h, keep_upgrade);

    for (size_t j = 0; j < NHOP; j++) {
        if (bits & (1u << j))
            httphead_remove(h, hop_fields[j].name);
    }
    if (!keep_upgrade && (bits & (1u << NHOP)))
        httphead_remove(h, "Upgrade");
    else if (upgrade && httphead_count(h, "Upgrade") > 0)
        (void)httphead_add(h, "Connection", 10, "upgrade", 7);
}

/* ---- serialisers ---- */

/* Room for "Transfer-Encoding: chunked\r\n" or "Content-Length: <20 digits>\r\n". */
#define FRAMING_MAX 48
#define CLOSE_LINE  "Connection: close\r\n"

static const struct {
    int status;
    const char *reason;
} reasons[] = {
    {100, "Continue"},
    {101, "Switching Protocols"},
    {103, "Early Hints"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {204, "No Content"},
    {206, "Partial Content"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {303, "See Other"},
    {304, "Not Modified"},
    {307, "Temporary Redirect"},
    {308, "Permanent Redirect"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {411, "Length Required"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {417, "Expectation Failed"},
    {421, "Misdirected Request"},
    {426, "Upgrade Required"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
};

static const char *reason_for(int status)
{
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        if (reasons[i].status == status)
            return reasons[i].reason;
    }
    return "";
}

static bool value_ok(const char *v, size_t n)
{
    return span(v, n, C_VALUE) == n;
}

/* Framing fields are always the writer's; Connection is too when the writer adds close. */
static bool field_skipped(const struct http_field *f, bool skip_connection)
{
    return NAME_IS(f->name, f->name_len, "content-length") ||
           NAME_IS(f->name, f->name_len, "transfer-encoding") ||
           (skip_connection && NAME_IS(f->name, f->name_len, "connection"));
}

/* Bytes the fields of h take on the wire; 0 with *bad set when one would break the framing. */
static size_t fields_size(const struct http_head *h, bool skip_connection, bool *bad)
{
    size_t n = 0;

    for (size_t i = 0; i < h->nfields; i++) {
        const struct http_field *f = &h->fields[i];

        if (f->name_len == 0 || !all_tchar(f->name, f->name_len) ||
            !value_ok(f->value, f->value_len)) {
            *bad = true;
            return 0;
        }
        if (!field_skipped(f, skip_connection))
            n += f->name_len + f->value_len + 4;
    }
    return n;
}

static char *put(char *w, const char *s, size_t n)
{
    memcpy(w, s, n);
    return w + n;
}

static char *put_fields(char *w, const struct http_head *h, bool skip_connection)
{
    for (size_t i = 0; i < h->nfields; i++) {
        const struct http_field *f = &h->fields[i];

        if (field_skipped(f, skip_connection))
            continue;
        w = put(w, f->name, f->name_len);
        *w++ = ':';
        if (f->value_len > 0) {
            *w++ = ' ';
            w = put(w, f->value, f->value_len);
        }
        w = put(w, "\r\n", 2);
    }
    return w;
}

/* v in decimal (no printf on the per-request path). */
static char *put_dec(char *w, uint64_t v)
{
    char tmp[20], *p = tmp + sizeof(tmp);

    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    return put(w, p, (size_t)(tmp + sizeof(tmp) - p));
}

/* v in lower-case hex, as "%zx" prints it. */
static char *put_hex(char *w, size_t v)
{
    char tmp[2 * sizeof(size_t)], *p = tmp + sizeof(tmp);

    do {
        *--p = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v != 0);
    return put(w, p, (size_t)(tmp + sizeof(tmp) - p));
}

static char *put_framing(char *w, enum http1_body body, uint64_t content_length)
{
    if (body == HTTP1_BODY_LENGTH) {
        w = put(w, "Content-Length: ", 16);
        w = put_dec(w, content_length);
        w = put(w, "\r\n", 2);
    } else if (body == HTTP1_BODY_CHUNKED)
        w = put(w, "Transfer-Encoding: chunked\r\n", 28);
    return w;
}

/* Reserves n contiguous bytes at the end of out; commit with commit_space. */
static char *reserve(struct evbuffer *out, size_t n, struct evbuffer_iovec *v)
{
    if (evbuffer_reserve_space(out, (ev_ssize_t)n, v, 1) != 1 || v->iov_len < n)
        return NULL;
    return v->iov_base;
}

static int commit_space(struct evbuffer *out, struct evbuffer_iovec *v, const char *end)
{
    v->iov_len = (size_t)(end - (const char *)v->iov_base);
    return evbuffer_commit_space(out, v, 1) == 0 ? 0 : -1;
}

/* Bytes the request head takes (with room for the framing field); 0 when it cannot be written. */
static size_t request_head_size(const struct http_head *h, enum http1_body body)
{
    size_t mlen, n;
    bool bad = false;

    if (h->method == NULL || h->target == NULL || body == HTTP1_BODY_EOF)
        return 0;
    mlen = strlen(h->method);
    if (mlen == 0 || !all_tchar(h->method, mlen) || h->target_len == 0 ||
        !all_vchar(h->target, h->target_len))
        return 0;
    n = fields_size(h, false, &bad);
    if (bad)
        return 0;
    return n + mlen + h->target_len + 12 + FRAMING_MAX + 2;
}

/* Writes the head (checked by request_head_size) at w; returns the end. */
static char *request_head_put(char *w, const struct http_head *h, enum http1_body body,
                              uint64_t content_length)
{
    w = put(w, h->method, strlen(h->method));
    *w++ = ' ';
    w = put(w, h->target, h->target_len);
    w = put(w, " HTTP/1.1\r\n", 11);
    w = put_fields(w, h, false);
    w = put_framing(w, body, content_length);
    return put(w, "\r\n", 2);
}

int http1_write_request_head(struct evbuffer *out, const struct http_head *h, enum http1_body body,
                             uint64_t content_length)
{
    struct evbuffer_iovec v;
    size_t n = request_head_size(h, body);
    char *w;

    if (n == 0 || (w = reserve(out, n, &v)) == NULL)
        return -1;
    return commit_space(out, &v, request_head_put(w, h, body, content_length));
}

/* A serialised head that carries a secret, in memory of its own (see wipe_free). */
struct wiped_block {
    size_t cap;
    char bytes[];
};

/*
 * Blocks of WIPED_KEEP_CAP bytes (a head that fits takes one) are kept per thread once wiped,
 * up to WIPED_KEEP_MAX, for the thread's next heads: a worker sends one per upstream request.
 * Under ASan none is kept.
 */
#define WIPED_KEEP_CAP 2048
#define WIPED_KEEP_MAX 64

static _Thread_local struct {
    struct wiped_block *b[WIPED_KEEP_MAX];
    size_t n;
} wiped_kept;

/*
 * evbuffer reference cleanup (and error path): wipe the head's len bytes, then keep or free the
 * block. They are the only bytes written to it since it was last wiped (or since malloc: a new
 * block never held a head), so the whole block is clean again.
 */
static void wipe_free(const void *data, size_t len, void *arg)
{
    struct wiped_block *b = arg;

    (void)data;
    OPENSSL_cleanse(b->bytes, len);
    if (!VG_ASAN && b->cap == WIPED_KEEP_CAP && wiped_kept.n < WIPED_KEEP_MAX)
        wiped_kept.b[wiped_kept.n++] = b;
    else
        free(b);
}

void http1_write_release_kept(void)
{
    while (wiped_kept.n > 0)
        free(wiped_kept.b[--wiped_kept.n]);
}

size_t http1_write_kept(void)
{
    return wiped_kept.n;
}

/* A block for a head of n bytes: a kept one when it fits, else a new one. */
static struct wiped_block *wiped_take(size_t n)
{
    size_t cap = n <= WIPED_KEEP_CAP ? WIPED_KEEP_CAP : n;
    struct wiped_block *b;

    if (cap == WIPED_KEEP_CAP && wiped_kept.n > 0)
        return wiped_kept.b[--wiped_kept.n];
    if ((b = malloc(sizeof(*b) + cap)) != NULL)
        b->cap = cap;
    return b;
}

int http1_write_request_head_wiped(struct evbuffer *out, const struct http_head *h,
                                   enum http1_body body, uint64_t content_length)
{
    size_t n = request_head_size(h, body);
    struct wiped_block *b;
    char *end;

    if (n == 0 || (b = wiped_take(n)) == NULL)
        return -1;
    end = request_head_put(b->bytes, h, body, content_length);
    if (evbuffer_add_reference(out, b->bytes, (size_t)(end - b->bytes), wipe_free, b) < 0) {
        wipe_free(NULL, (size_t)(end - b->bytes), b);
        return -1;
    }
    return 0;
}

int http1_write_response_head(struct evbuffer *out, const struct http_head *h, enum http1_body body,
                              uint64_t content_length, bool close)
{
    struct evbuffer_iovec v;
    const char *reason =
        h->reason != NULL && h->reason[0] != '\0' ? h->reason : reason_for(h->status);
    size_t rlen = strlen(reason), n;
    bool bad = false;
    char *w;

    if (h->status < 100 || h->status > 599 || !value_ok(reason, rlen))
        return -1;
    /* RFC 9110 §8.6, §6.4.1: no framing fields on 1xx and 204 */
    if (h->status < 200 || h->status == 204)
        body = HTTP1_BODY_NONE;
    if (body == HTTP1_BODY_EOF)
        close = true;
    n = fields_size(h, close, &bad);
    if (bad)
        return -1;
    n += 13 + rlen + 2 + FRAMING_MAX + sizeof(CLOSE_LINE) + 2;
    if ((w = reserve(out, n, &v)) == NULL)
        return -1;
    w = put(w, "HTTP/1.1 ", 9);
    *w++ = (char)('0' + h->status / 100);
    *w++ = (char)('0' + h->status / 10 % 10);
    *w++ = (char)('0' + h->status % 10);
    *w++ = ' ';
    w = put(w, reason, rlen);
    w = put(w, "\r\n", 2);
    w = put_fields(w, h, close);
    w = put_framing(w, body, content_length);
    if (close)
        w = put(w, CLOSE_LINE, sizeof(CLOSE_LINE) - 1);
    w = put(w, "\r\n", 2);
    return commit_space(out, &v, w);
}

int http1_write_chunk(struct evbuffer *out, const char *data, size_t len)
{
    struct evbuffer_iovec v;
    char *w;

    if (len == 0) /* a zero-size chunk would end the body */
        return 0;
    if ((w = reserve(out, len + 16 + 4, &v)) == NULL)
        return -1;
    w = put_hex(w, len);
    w = put(w, "\r\n", 2);
    w = put(w, data, len);
    w = put(w, "\r\n", 2);
    return commit_space(out, &v, w);
}

int http1_write_chunk_header(struct evbuffer *out, size_t len)
{
    struct evbuffer_iovec v;
    char *w;

    if (len == 0)
        return 0;
    if ((w = reserve(out, 16 + 2, &v)) == NULL)
        return -1;
    w = put_hex(w, len);
    w = put(w, "\r\n", 2);
    return commit_space(out, &v, w);
}

int http1_write_last_chunk(struct evbuffer *out)
{
    return evbuffer_add(out, "0\r\n\r\n", 5);
}

/* Fields no trailer section may carry onwards (RFC 9110 §6.5.1; RFC 9113 §8.2.2). */
static const char *const trailer_refused[] = {
    "content-length",
    "transfer-encoding",
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "authorization",
    "proxy-authorization",
    "proxy-authenticate",
    "www-authenticate",
    "set-cookie",
    "cookie",
    "content-encoding",
    "content-type",
    "content-range",
    "range",
    "if-range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "expect",
    "max-forwards",
    "cache-control",
    "expires",
    "age",
    "date",
    "location",
    "retry-after",
    "vary",
    "warning",
};

void http1_trailers_filter(struct http_head *t)
{
    for (size_t i = 0; i < sizeof(trailer_refused) / sizeof(trailer_refused[0]); i++)
        httphead_remove(t, trailer_refused[i]);
}

int http1_write_last_chunk_trailers(struct evbuffer *out, struct http_head *t)
{
    struct evbuffer_iovec v;
    bool bad = false;
    size_t n;
    char *w;

    if (t == NULL || t->nfields == 0)
        return http1_write_last_chunk(out);
    http1_trailers_filter(t);
    n = fields_size(t, false, &bad);
    if (bad)
        return -1;
    w = reserve(out, 5 + n, &v);
    if (w == NULL)
        return -1;
    w = put(w, "0\r\n", 3);
    w = put_fields(w, t, false);
    w = put(w, "\r\n", 2);
    return commit_space(out, &v, w);
}

/* RFC 9209 error types are sf-tokens; ours are lower-case names like http_request_denied. */
static bool error_type_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64 || !((s[0] >= 'a' && s[0] <= 'z')))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* details as printable ASCII only; quoted adds sf-string escapes for '"' and '\'. */
static void put_details(struct evbuffer *b, const char *s, bool quoted)
{
    for (; *s != '\0'; s++) {
        char c = (unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f ? *s : '?';

        if (quoted && (c == '"' || c == '\\'))
            evbuffer_add(b, "\\", 1);
        evbuffer_add(b, &c, 1);
    }
}

int http1_error_parts(int status, const char *error_type, const char *details, const char *host,
                      struct evbuffer *ps, struct evbuffer *body)
{
    char norm[HOSTNAME_BUFSZ];

    if (status < 100 || status > 599 || (error_type != NULL && !error_type_ok(error_type)))
        return -1;
    if (host != NULL && hostname_normalize(host, strlen(host), norm, sizeof(norm)) < 0)
        host = NULL;
    else if (host != NULL)
        host = norm;
    evbuffer_add_printf(body, "vaultgate: %d ", status);
    if (details != NULL)
        put_details(body, details, false);
    else
        evbuffer_add_printf(body, "%s", reason_for(status));
    if (host != NULL)
        evbuffer_add_printf(body, ": %s", host);
    evbuffer_add(body, "\n", 1);
    evbuffer_add(ps, "vaultgate", 9);
    if (error_type != NULL)
        evbuffer_add_printf(ps, "; error=%s", error_type);
    if (details != NULL) {
        evbuffer_add(ps, "; details=\"", 11);
        put_details(ps, details, true);
        evbuffer_add(ps, "\"", 1);
    }
    return 0;
}

int http1_write_error(struct evbuffer *out, int status, const char *error_type, const char *details,
                      const char *host, bool close)
{
    struct evbuffer *body = evbuffer_new(), *head = evbuffer_new();
    char line[64];
    int rc = -1;

    if (body == NULL || head == NULL)
        goto cleanup;
    evbuffer_add_printf(head, "HTTP/1.1 %03d %s\r\nProxy-Status: ", status, reason_for(status));
    if (http1_error_parts(status, error_type, details, host, head, body) < 0)
        goto cleanup;
    snprintf(line, sizeof(line), "\r\nContent-Length: %zu\r\n", evbuffer_get_length(body));
    evbuffer_add_printf(head, "\r\nContent-Type: text/plain; charset=utf-8%s", line);
    evbuffer_add(head, "Cache-Control: no-store\r\n", 25);
    if (close)
        evbuffer_add(head, CLOSE_LINE, sizeof(CLOSE_LINE) - 1);
    evbuffer_add(head, "\r\n", 2);
    if (evbuffer_add_buffer(head, body) != 0 || evbuffer_add_buffer(out, head) != 0)
        goto cleanup;
    rc = 0;
cleanup:
    if (body != NULL)
        evbuffer_free(body);
    if (head != NULL)
        evbuffer_free(head);
    return rc;
}
