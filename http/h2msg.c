/*
 * h2msg.c - HTTP/2 request field sections checked against RFC 9113 §8 and SPEC §4, and heads
 * turned into nghttp2 name/value lists (see h2msg.h).
 *
 * Guarantees: a request reaches an exchange only with :method, :scheme https and a :path in
 * origin form (or "*" for OPTIONS; CONNECT with :authority only), pseudo-header fields first
 * and once each, lower-case token names (no '_'), no connection-specific field, te only
 * "trailers", values without NUL, CR, LF, other controls, DEL or surrounding whitespace, a
 * well-formed content-length that the DATA then matches, within 64 KiB and 100 fields; at most
 * one host field, which agrees with :authority when both are sent. The first refusal is kept;
 * nothing is forwarded after one.
 */
#include "http/h2msg.h"
#include "http/http1_int.h"

#include "common/caps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
    PS_METHOD = 1,
    PS_SCHEME = 2,
    PS_AUTHORITY = 4,
    PS_PATH = 8,
    PS_PROTOCOL = 16,
};

/* Fields RFC 9113 §8.2.2 forbids in HTTP/2 (te is allowed with the value "trailers" only). */
static const char *const conn_specific[] = {"connection", "keep-alive", "proxy-connection",
                                            "transfer-encoding", "upgrade"};

void h2req_init(struct h2req *r)
{
    memset(r, 0, sizeof(*r));
    httphead_init(&r->msg.head);
}

/* The path and the joined cookie go, wiped; the path's buffer stays for the next request when
 * keep and it is within VG_H2_PATH_KEEP. */
static void h2req_free_strings(struct h2req *r, bool keep)
{
    if (r->path != NULL)
        explicit_bzero(r->path, r->path_len);
    if (!keep || r->path_cap > VG_H2_PATH_KEEP) {
        free(r->path_buf);
        r->path_buf = NULL;
        r->path_cap = 0;
    }
    if (r->cookie != NULL)
        explicit_bzero(r->cookie, r->cookie_len);
    free(r->cookie);
    r->path = r->cookie = NULL;
    r->path_len = 0;
}

void h2req_clear(struct h2req *r)
{
    struct http_head h;
    char *pb;
    size_t pcap;

    h2req_free_strings(r, true);
    httphead_clear(&r->msg.head);
    h = r->msg.head;
    pb = r->path_buf;
    pcap = r->path_cap;
    memset(r, 0, sizeof(*r));
    r->msg.head = h;
    r->path_buf = pb;
    r->path_cap = pcap;
}

void h2req_free(struct h2req *r)
{
    httphead_reset(&r->msg.head);
    h2req_free_strings(r, false);
}

/* r->path made room for n bytes, in the kept buffer when it is large enough. 0 or -1. */
static int path_room(struct h2req *r, size_t n)
{
    char *b;

    if (r->path_cap < n) {
        if ((b = malloc(n)) == NULL)
            return -1;
        free(r->path_buf); /* wiped when its request ended; never holds this one's bytes */
        r->path_buf = b;
        r->path_cap = n;
    }
    r->path = r->path_buf;
    return 0;
}

static void refuse(struct h2req *r, enum h2req_verdict v, int status, const char *why)
{
    if (r->verdict != H2REQ_OK)
        return;
    r->verdict = v;
    r->status = status;
    r->why = why;
}

static bool nv_name_is(const uint8_t *n, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(n, lit, len) == 0;
}

/* RFC 9113 §8.2.1 plus SPEC §4's raw-byte rule for values: 0 ok, -1 malformed, -2 refused. */
static int value_check(const uint8_t *v, size_t n)
{
    if (n > 0 && (is_ows(v[0]) || is_ows(v[n - 1])))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == 0 || v[i] == '\r' || v[i] == '\n')
            return -1;
        if (!is_value_byte(v[i]))
            return -2;
    }
    return 0;
}

/* One pseudo-header field of a request. */
static void pseudo_field(struct h2req *r, const uint8_t *name, size_t nlen, const uint8_t *v,
                         size_t vlen)
{
    static const struct {
        const char *name;
        unsigned bit;
    } known[] = {{":method", PS_METHOD},
                 {":scheme", PS_SCHEME},
                 {":authority", PS_AUTHORITY},
                 {":path", PS_PATH},
                 {":protocol", PS_PROTOCOL}};
    unsigned bit = 0;

    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (nv_name_is(name, nlen, known[i].name))
            bit = known[i].bit;
    }
    if (bit == 0 || r->regular || (r->pseudo & bit)) {
        refuse(r, H2REQ_MALFORMED, 0, "pseudo-header field out of place");
        return;
    }
    r->pseudo |= bit;
    switch (bit) {
    case PS_METHOD:
        if (vlen == 0 || vlen >= sizeof(r->method) || !all_tchar((const char *)v, vlen))
            refuse(r, H2REQ_MALFORMED, 0, "bad :method");
        else
            memcpy(r->method, v, vlen);
        break;
    case PS_SCHEME:
        if (vlen >= sizeof(r->scheme))
            refuse(r, H2REQ_ANSWER, 400, "unsupported :scheme");
        else
            memcpy(r->scheme, v, vlen);
        break;
    case PS_AUTHORITY:
        if (vlen == 0 || vlen >= sizeof(r->authority) || !all_vchar((const char *)v, vlen))
            refuse(r, H2REQ_ANSWER, 400, "malformed :authority");
        else
            memcpy(r->authority, v, vlen);
        break;
    case PS_PATH:
        if (vlen == 0 || vlen > VG_HEAD_MAX_BYTES || !all_vchar((const char *)v, vlen)) {
            refuse(r, H2REQ_ANSWER, 400, "malformed :path");
        } else if (path_room(r, vlen) < 0) {
            refuse(r, H2REQ_ANSWER, 431, "out of memory");
        } else {
            memcpy(r->path, v, vlen);
            r->path_len = vlen;
        }
        break;
    default:
        r->ext_connect = true;
        break;
    }
}

/* host and :authority must agree (RFC 9113 §8.3.1); a lone host stands in for :authority. One
 * host field at most (SPEC §10, as HTTP/1.1): a second would leave the choice between them to
 * whoever reads the message next. */
static void host_field(struct h2req *r, const uint8_t *v, size_t vlen)
{
    if (++r->nhost > 1) {
        refuse(r, H2REQ_ANSWER, 400, "several host fields");
        return;
    }
    if (vlen == 0 || vlen >= sizeof(r->authority)) {
        refuse(r, H2REQ_ANSWER, 400, "malformed host");
        return;
    }
    if (r->pseudo & PS_AUTHORITY) {
        if (strlen(r->authority) != vlen || strncasecmp(r->authority, (const char *)v, vlen) != 0)
            refuse(r, H2REQ_ANSWER, 400, "host and :authority differ");
        return;
    }
    memcpy(r->authority, v, vlen);
    r->authority[vlen] = '\0';
}

/* content-length: 0|[1-9][0-9]{0,15}, repeated only with the same value. */
static void cl_field(struct h2req *r, const uint8_t *v, size_t vlen)
{
    uint64_t n = 0;

    if (vlen == 0 || vlen > 16 || (v[0] == '0' && vlen > 1)) {
        refuse(r, H2REQ_ANSWER, 400, "malformed content-length");
        return;
    }
    for (size_t i = 0; i < vlen; i++) {
        if (v[i] < '0' || v[i] > '9') {
            refuse(r, H2REQ_ANSWER, 400, "malformed content-length");
            return;
        }
        n = n * 10 + (uint64_t)(v[i] - '0');
    }
    if (r->has_cl && r->cl != n)
        refuse(r, H2REQ_MALFORMED, 0, "content-length repeated with another value");
    r->has_cl = true;
    r->cl = n;
}

/* Cookie crumbs are joined into one field for HTTP/1.1 (RFC 9113 §8.2.3). 0 or -1. */
static int cookie_field(struct h2req *r, const uint8_t *v, size_t vlen)
{
    size_t need = r->cookie_len + (r->cookie_len > 0 ? 2 : 0) + vlen;
    char *nc = malloc(need + 1);

    if (nc == NULL)
        return -1;
    if (r->cookie_len > 0) {
        memcpy(nc, r->cookie, r->cookie_len);
        memcpy(nc + r->cookie_len, "; ", 2);
        explicit_bzero(r->cookie, r->cookie_len);
    }
    memcpy(nc + need - vlen, v, vlen);
    nc[need] = '\0';
    free(r->cookie);
    r->cookie = nc;
    r->cookie_len = need;
    return 0;
}

/* Regular field names: lower-case tokens without '_' (SPEC §4, RFC 9113 §8.2.1). */
static int name_check(const uint8_t *n, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (n[i] >= 'A' && n[i] <= 'Z')
            return -1;
        if (!is_tchar(n[i]))
            return -1;
        if (n[i] == '_')
            return -2;
    }
    return 0;
}

/* A regular field of the request. */
static void regular_field(struct h2req *r, const uint8_t *n, size_t nlen, const uint8_t *v,
                          size_t vlen)
{
    int nc = name_check(n, nlen);

    r->regular = true;
    if (nc < 0) {
        refuse(r, nc == -1 ? H2REQ_MALFORMED : H2REQ_ANSWER, 400, "bad field name");
        return;
    }
    for (size_t i = 0; i < sizeof(conn_specific) / sizeof(conn_specific[0]); i++) {
        if (nv_name_is(n, nlen, conn_specific[i])) {
            refuse(r, H2REQ_MALFORMED, 0, "connection-specific field");
            return;
        }
    }
    if (nv_name_is(n, nlen, "te")) {
        if (!(vlen == 8 && strncasecmp((const char *)v, "trailers", 8) == 0))
            refuse(r, H2REQ_MALFORMED, 0, "te other than trailers");
        return; /* nothing for HTTP/1.1: te is hop-by-hop */
    }
    if (nv_name_is(n, nlen, "host")) {
        host_field(r, v, vlen);
        return;
    }
    if (nv_name_is(n, nlen, "content-length"))
        cl_field(r, v, vlen);
    if (nv_name_is(n, nlen, "cookie")) {
        if (cookie_field(r, v, vlen) < 0)
            refuse(r, H2REQ_ANSWER, 431, "out of memory");
        return;
    }
    if (r->verdict == H2REQ_OK &&
        httphead_add(&r->msg.head, (const char *)n, nlen, (const char *)v, vlen) < 0)
        refuse(r, H2REQ_ANSWER, 431, "field section too large");
}

void h2req_field(struct h2req *r, const uint8_t *name, size_t nlen, const uint8_t *value,
                 size_t vlen)
{
    int vc;

    if (r->verdict != H2REQ_OK)
        return;
    r->nfields++;
    r->bytes += nlen + vlen;
    if (r->nfields > VG_HEAD_MAX_FIELDS || r->bytes > VG_HEAD_MAX_BYTES) {
        refuse(r, H2REQ_ANSWER, 431,
               r->nfields > VG_HEAD_MAX_FIELDS ? "too many header fields"
                                               : "header section too large");
        return;
    }
    if (nlen == 0) {
        refuse(r, H2REQ_MALFORMED, 0, "empty field name");
        return;
    }
    vc = value_check(value, vlen);
    if (vc == -1) {
        refuse(r, H2REQ_MALFORMED, 0, "field value with NUL, CR, LF or surrounding space");
        return;
    }
    if (vc == -2) {
        refuse(r, H2REQ_ANSWER, 400, "control character in a field value");
        return;
    }
    if (name[0] == ':')
        pseudo_field(r, name, nlen, value, vlen);
    else
        regular_field(r, name, nlen, value, vlen);
}

/* :path is origin-form, or "*" for OPTIONS. */
static bool path_ok(const struct h2req *r)
{
    if (r->path[0] == '/')
        return true;
    return r->path_len == 1 && r->path[0] == '*' && strcmp(r->method, "OPTIONS") == 0;
}

/* The pseudo-header fields a request of its method must have, and no others. 0 or -1. */
static int pseudo_complete(struct h2req *r)
{
    bool connect = strcmp(r->method, "CONNECT") == 0;

    if (!(r->pseudo & PS_METHOD)) {
        refuse(r, H2REQ_MALFORMED, 0, "no :method");
        return -1;
    }
    if (r->ext_connect) {
        /* extended CONNECT (RFC 8441) is never enabled: WebSockets use HTTP/1.1 */
        if (connect)
            refuse(r, H2REQ_ANSWER, 405, "extended CONNECT is not supported");
        else
            refuse(r, H2REQ_MALFORMED, 0, ":protocol without CONNECT");
        return -1;
    }
    if (connect) {
        if (!(r->pseudo & PS_AUTHORITY) || (r->pseudo & (PS_SCHEME | PS_PATH))) {
            refuse(r, H2REQ_MALFORMED, 0, "CONNECT with the wrong pseudo-header fields");
            return -1;
        }
        return 0;
    }
    if ((r->pseudo & (PS_SCHEME | PS_PATH)) != (PS_SCHEME | PS_PATH)) {
        refuse(r, H2REQ_MALFORMED, 0, "no :scheme or :path");
        return -1;
    }
    if (strcmp(r->scheme, "https") != 0) {
        refuse(r, H2REQ_ANSWER, 400, "unsupported :scheme");
        return -1;
    }
    if (!path_ok(r)) {
        refuse(r, H2REQ_ANSWER, 400, "unsupported request target form");
        return -1;
    }
    if (r->authority[0] == '\0') {
        refuse(r, H2REQ_ANSWER, 400, "missing :authority");
        return -1;
    }
    return 0;
}

enum h2req_verdict h2req_finish(struct h2req *r, bool end_stream)
{
    struct http1_msg *m = &r->msg;
    bool connect;

    if (r->verdict != H2REQ_OK || pseudo_complete(r) < 0)
        return r->verdict;
    connect = strcmp(r->method, "CONNECT") == 0;
    if (httphead_set_request_line(&m->head, r->method, strlen(r->method),
                                  connect ? r->authority : r->path,
                                  connect ? strlen(r->authority) : r->path_len, 1) < 0 ||
        httphead_add(&m->head, "Host", 4, r->authority, strlen(r->authority)) < 0 ||
        (r->cookie != NULL && httphead_add(&m->head, "cookie", 6, r->cookie, r->cookie_len) < 0)) {
        refuse(r, H2REQ_ANSWER, 431, "header section too large");
        return r->verdict;
    }
    m->keep_alive = true;
    m->upgrade = false;
    if (end_stream) {
        m->body = HTTP1_BODY_NONE;
        if (r->has_cl && r->cl != 0) {
            refuse(r, H2REQ_MALFORMED, 0, "content-length without DATA");
            return r->verdict;
        }
    } else if (r->has_cl) {
        m->body = HTTP1_BODY_LENGTH;
        m->content_length = r->cl;
    } else {
        m->body = HTTP1_BODY_CHUNKED; /* unknown length: re-framed as chunks for HTTP/1.1 */
    }
    return H2REQ_OK;
}

int h2req_data(struct h2req *r, size_t len, bool end_stream)
{
    r->data += len;
    if (r->has_cl && (r->data > r->cl || (end_stream && r->data != r->cl)))
        return -1;
    return 0;
}

int h2req_trailer_field(const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen)
{
    if (nlen == 0 || name[0] == ':' || name_check(name, nlen) != 0 ||
        value_check(value, vlen) == -1)
        return -1;
    for (size_t i = 0; i < sizeof(conn_specific) / sizeof(conn_specific[0]); i++) {
        if (nv_name_is(name, nlen, conn_specific[i]))
            return -1;
    }
    return 0;
}

/* ---- heads out -------------------------------------------------------------------------- */

/* Response fields HTTP/2 must not carry (connection-specific), and the framing of HTTP/1.1. */
static bool nv_skipped(const struct http_field *f)
{
    static const char *const skip[] = {"connection",        "keep-alive", "proxy-connection",
                                       "transfer-encoding", "upgrade",    "te",
                                       "content-length"};

    for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++) {
        if (f->name_len == strlen(skip[i]) && strncasecmp(f->name, skip[i], f->name_len) == 0)
            return true;
    }
    return false;
}

static void nv_set(nghttp2_nv *nv, char *name, size_t nlen, const char *value, size_t vlen)
{
    nv->name = (uint8_t *)name;
    nv->namelen = nlen;
    nv->value = (uint8_t *)value;
    nv->valuelen = vlen;
    nv->flags = NGHTTP2_NV_FLAG_NONE;
}

int h2msg_nv(const struct http_head *h, int status, bool len_known, uint64_t len, nghttp2_nv *nv,
             size_t nvcap, char *buf, size_t bufcap)
{
    size_t n = 0, used = 0;

    if (status >= 0) {
        if (nvcap < 1 || bufcap < 12)
            return -1;
        if (status > 999)
            return -1;
        memcpy(buf, ":status", 7);
        buf[7] = (char)('0' + status / 100);
        buf[8] = (char)('0' + status / 10 % 10);
        buf[9] = (char)('0' + status % 10);
        nv_set(&nv[n++], buf, 7, buf + 7, 3);
        used = 11;
    }
    for (size_t i = 0; h != NULL && i < h->nfields; i++) {
        const struct http_field *f = &h->fields[i];

        if (nv_skipped(f))
            continue;
        if (n == nvcap || used + f->name_len > bufcap)
            return -1;
        for (size_t k = 0; k < f->name_len; k++) {
            char c = f->name[k];

            buf[used + k] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
        nv_set(&nv[n++], buf + used, f->name_len, f->value, f->value_len);
        used += f->name_len;
    }
    if (len_known) {
        int k;

        if (n == nvcap || used + 14 + 21 > bufcap)
            return -1;
        memcpy(buf + used, "content-length", 14);
        k = snprintf(buf + used + 14, 21, "%llu", (unsigned long long)len);
        nv_set(&nv[n++], buf + used, 14, buf + used + 14, (size_t)k);
    }
    return (int)n;
}
