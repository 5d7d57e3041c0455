/*
 * http1.c - strict HTTP/1.x parsing for the proxy (SPEC §4); the serialisers are in
 * http1_write.c.
 *
 * Guarantees: a head reaches on_head only after every raw-byte rule of SPEC §4 has passed on the
 * complete head, and after llhttp (strict, no lenient flags) has parsed the same bytes to the
 * same end with the same method, version and framing. Bodies are de-framed here by a
 * Content-Length counter and a chunked decoder that accept exactly RFC 9112's grammar (chunk
 * extensions capped, trailers checked and dropped). Nothing the peer sent is forwarded as is:
 * the serialisers of http1_write.c build new heads and chunk lines from validated fields.
 *
 * Memory: the parser struct, the head model's arena and field array (kept across messages and
 * resets while small: httphead_clear), plus, only while a head arrives split over several reads,
 * a head buffer (at most VG_HEAD_MAX_BYTES) that http1_parser_reset frees. No logging here.
 */
#include "http/http1.h"
#include "http/http1_int.h"

#include "common/caps.h"
#include "common/hostname.h"
#include "common/hostport.h"

#include <llhttp.h>
#include <stdlib.h>
#include <string.h>

/* Line kinds found by the head scanner. */
enum line_kind {
    LINE_ERR = -1,
    LINE_CONT = 0,
    LINE_LEAD, /* an empty line before the start line */
    LINE_END,  /* the empty line that ends the head */
};

/* The fields of a head that decide framing and routing, gathered in one pass. */
struct head_info {
    int minor;
    int status;
    unsigned nhost, ncl, nte;
    uint64_t cl;
    bool te_chunked, conn_close, conn_keepalive, conn_upgrade, has_upgrade;
    bool upgrade_other; /* Upgrade names a protocol other than h2c */
    const char *method;
    size_t mlen;
};

/* The byte classes of http1_int.h (C_TCHAR | C_TNAME | C_VALUE | C_VCHAR per byte). */
const uint8_t http1_cls[256] = {
    0,  0,  0,  0,  0,  0,  0,  0,  0,  4,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,
    0,  0,  0,  0,  0,  0,  0,  0,  4,  15, 12, 15, 15, 15, 15, 15, 12, 12, 15, 15, 12, 15, 15, 12,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 12, 12, 12, 12, 12, 12, 12, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 12, 12, 12, 15, 13,
    15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15, 15,
    15, 15, 15, 12, 15, 12, 15, 0,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
    4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
    4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
    4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
    4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
    4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,  4,
};

/* ---- head: scanning lines as they arrive ---- */

/*
 * Checks one complete line (n bytes, the last one LF) of a head being received: CRLF exactly,
 * no other CR, no leading whitespace on field lines, the field count cap.
 */
static enum line_kind line_check(struct http1_parser *p, const char *line, size_t n)
{
    if (n < 2 || line[n - 2] != '\r') {
        http1_fail(p, 400, "LF without CR in head");
        return LINE_ERR;
    }
    if (memchr(line, '\r', n - 2) != NULL) {
        http1_fail(p, 400, "CR without LF in head");
        return LINE_ERR;
    }
    if (n == 2)
        return p->nlines == 0 ? LINE_LEAD : LINE_END;
    if (p->nlines > 0 && is_ows((unsigned char)line[0])) {
        http1_fail(p, 400, "head line starts with whitespace (obs-fold)");
        return LINE_ERR;
    }
    if (p->nlines++ > VG_HEAD_MAX_FIELDS) {
        http1_fail(p, 431, "too many header fields");
        return LINE_ERR;
    }
    return LINE_CONT;
}

/* A CR inside the unfinished part of a line can only be valid as its last byte. */
static int tail_check(struct http1_parser *p, const char *s, size_t n)
{
    if (n > 1 && memchr(s, '\r', n - 1) != NULL)
        return http1_fail(p, 400, "CR without LF in head");
    return 0;
}

static int buf_append(struct http1_parser *p, const char *s, size_t n)
{
    size_t need = (size_t)p->blen + n;

    if (need + p->lead > VG_HEAD_MAX_BYTES)
        return http1_fail(p, 431, "head too large");
    if (need > p->bcap) {
        size_t cap = p->bcap ? p->bcap : 1024;
        char *nb;

        while (cap < need)
            cap *= 2;
        if (cap > VG_HEAD_MAX_BYTES)
            cap = VG_HEAD_MAX_BYTES;
        nb = realloc(p->buf, cap);
        if (nb == NULL)
            return http1_fail(p, 431, "out of memory for head");
        p->buf = nb;
        p->bcap = (uint32_t)cap;
    }
    memcpy(p->buf + p->blen, s, n);
    p->blen = (uint32_t)need;
    return 0;
}

static int head_complete(struct http1_parser *p, const char *h, size_t n);

/* Head bytes when nothing is buffered: scan data in place, buffer only an unfinished head. */
static int head_direct(struct http1_parser *p, const char *data, size_t len, size_t *pos)
{
    size_t start = *pos, ls = *pos;

    for (;;) {
        const char *lf = memchr(data + ls, '\n', len - ls);
        size_t end;

        if (lf == NULL) {
            if (tail_check(p, data + ls, len - ls) < 0)
                return STEP_ERR;
            if (len > start) {
                if (buf_append(p, data + start, len - start) < 0)
                    return STEP_ERR;
                p->line_start = (uint32_t)(ls - start);
            }
            *pos = len;
            return STEP_MORE;
        }
        end = (size_t)(lf - data) + 1;
        if (end - start + p->lead > VG_HEAD_MAX_BYTES)
            return http1_fail(p, 431, "head too large");
        switch (line_check(p, data + ls, end - ls)) {
        case LINE_ERR:
            return STEP_ERR;
        case LINE_LEAD:
            p->lead += 2;
            start = end;
            break;
        case LINE_END:
            *pos = end;
            return head_complete(p, data + start, end - start);
        case LINE_CONT:
            break;
        }
        ls = end;
    }
}

/* Head bytes when part of the head is buffered: append line by line, never beyond the head. */
static int head_buffered(struct http1_parser *p, const char *data, size_t len, size_t *pos)
{
    while (*pos < len) {
        const char *lf = memchr(data + *pos, '\n', len - *pos);
        size_t seg = lf ? (size_t)(lf - data) + 1 - *pos : len - *pos;
        uint32_t old = p->blen;
        enum line_kind k;

        if (buf_append(p, data + *pos, seg) < 0)
            return STEP_ERR;
        *pos += seg;
        if (lf == NULL) {
            size_t from = old > p->line_start ? old - 1 : p->line_start;

            return tail_check(p, p->buf + from, p->blen - from) < 0 ? STEP_ERR : STEP_MORE;
        }
        k = line_check(p, p->buf + p->line_start, p->blen - p->line_start);
        if (k == LINE_ERR)
            return STEP_ERR;
        if (k == LINE_END)
            return head_complete(p, p->buf, p->blen);
        if (k == LINE_LEAD) {
            /* only an empty line can be buffered before the start line: drop it */
            p->lead += 2;
            p->blen = 0;
            p->line_start = 0;
            return STEP_CONT;
        }
        p->line_start = p->blen;
    }
    return STEP_MORE;
}

static int feed_head(struct http1_parser *p, const char *data, size_t len, size_t *pos)
{
    if (*pos >= len)
        return STEP_MORE;
    if (p->blen == 0)
        return head_direct(p, data, len, pos);
    return head_buffered(p, data, len, pos);
}

/* ---- head: parsing a complete head ---- */

/* Content-Length: 0|[1-9][0-9]{0,15} */
static int parse_cl(const char *v, size_t n, uint64_t *out)
{
    uint64_t x = 0;

    if (n == 0 || n > 16 || (v[0] == '0' && n > 1))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    *out = x;
    return 0;
}

/*
 * A comma-separated list (RFC 9110 §5.6.1) of tokens (or, with slash, protocol names
 * token["/"token], noting one other than h2c). Sets the Connection option flags it finds. -1
 * when an element is not one.
 */
static int parse_token_list(const char *v, size_t n, bool slash, struct head_info *hi)
{
    size_t i = 0;

    while (i <= n) {
        size_t s = i, e;

        while (i < n && v[i] != ',')
            i++;
        e = i++;
        while (s < e && is_ows((unsigned char)v[s]))
            s++;
        while (e > s && is_ows((unsigned char)v[e - 1]))
            e--;
        if (s == e)
            continue;
        if (slash) {
            const char *sl = memchr(v + s, '/', e - s);
            size_t a = sl ? (size_t)(sl - v) : e;

            if (a == s || !all_tchar(v + s, a - s) ||
                (sl != NULL && (a + 1 == e || !all_tchar(v + a + 1, e - a - 1))))
                return -1;
            if (!NAME_IS(v + s, e - s, "h2c"))
                hi->upgrade_other = true;
            continue;
        }
        if (!all_tchar(v + s, e - s))
            return -1;
        if (NAME_IS(v + s, e - s, "close"))
            hi->conn_close = true;
        else if (NAME_IS(v + s, e - s, "keep-alive"))
            hi->conn_keepalive = true;
        else if (NAME_IS(v + s, e - s, "upgrade"))
            hi->conn_upgrade = true;
    }
    return 0;
}

/* The request-specific checks of one field (SPEC §4). */
static int check_request_field(struct http1_parser *p, const char *name, size_t nlen, const char *v,
                               size_t vlen, struct head_info *hi)
{
    uint64_t cl;

    switch (nlen) {
    case 4:
        if (NAME_IS(name, nlen, "host")) {
            char host[HOSTNAME_BUFSZ];
            int port;

            hi->nhost++;
            if (http1_split_authority(v, vlen, host, sizeof(host), &port) < 0)
                return http1_fail(p, 400, "Host is not host[:port]");
        }
        break;
    case 7:
        if (NAME_IS(name, nlen, "upgrade")) {
            hi->has_upgrade = true;
            if (parse_token_list(v, vlen, true, hi) < 0)
                return http1_fail(p, 400, "bad Upgrade");
        }
        break;
    case 10:
        if (NAME_IS(name, nlen, "connection") && parse_token_list(v, vlen, false, hi) < 0)
            return http1_fail(p, 400, "bad Connection");
        break;
    case 14:
        if (NAME_IS(name, nlen, "content-length")) {
            if (++hi->ncl > 1)
                return http1_fail(p, 400, "duplicate Content-Length");
            if (parse_cl(v, vlen, &cl) < 0)
                return http1_fail(p, 400, "bad Content-Length");
            hi->cl = cl;
        }
        break;
    case 17:
        if (NAME_IS(name, nlen, "transfer-encoding")) {
            if (++hi->nte > 1)
                return http1_fail(p, 400, "Transfer-Encoding other than chunked");
            if (!NAME_IS(v, vlen, "chunked"))
                return http1_fail(p, 400, "Transfer-Encoding other than chunked");
            hi->te_chunked = true;
        }
        break;
    default:
        break;
    }
    return 0;
}

/* The response checks of one field: framing and Connection only. */
static int check_response_field(struct http1_parser *p, const char *name, size_t nlen,
                                const char *v, size_t vlen, struct head_info *hi)
{
    uint64_t cl;

    if (NAME_IS(name, nlen, "content-length")) {
        if (hi->ncl++ > 0)
            return http1_fail(p, 502, "duplicate Content-Length");
        if (parse_cl(v, vlen, &cl) < 0)
            return http1_fail(p, 502, "bad Content-Length");
        hi->cl = cl;
    } else if (NAME_IS(name, nlen, "transfer-encoding")) {
        if (++hi->nte > 1 || !NAME_IS(v, vlen, "chunked"))
            return http1_fail(p, 502, "Transfer-Encoding other than chunked");
        hi->te_chunked = true;
    } else if (NAME_IS(name, nlen, "connection")) {
        (void)parse_token_list(v, vlen, false, hi);
    } else if (NAME_IS(name, nlen, "upgrade")) {
        hi->has_upgrade = true;
    }
    return 0;
}

/* One field line (without CRLF): name ":" OWS value OWS. */
static int parse_field(struct http1_parser *p, const char *l, size_t n, struct head_info *hi)
{
    size_t nlen = span(l, n, p->kind == HTTP1_REQUEST ? C_TNAME : C_TCHAR), vs, ve;
    int rc;

    if (nlen == n || l[nlen] != ':') {
        if (nlen < n && l[nlen] == '_')
            return http1_fail(p, 400, "underscore in header name");
        if (memchr(l, ':', n) == NULL)
            return http1_fail(p, 400, "header line without name or colon");
        return http1_fail(p, 400, "header name is not a token");
    }
    if (nlen == 0)
        return http1_fail(p, 400, "header line without name or colon");
    vs = nlen + 1;
    ve = n;
    while (vs < ve && is_ows((unsigned char)l[vs]))
        vs++;
    while (ve > vs && is_ows((unsigned char)l[ve - 1]))
        ve--;
    if (span(l + vs, ve - vs, C_VALUE) != ve - vs)
        return http1_fail(p, 400, "control character in header value");
    if (p->kind == HTTP1_REQUEST)
        rc = check_request_field(p, l, nlen, l + vs, ve - vs, hi);
    else
        rc = check_response_field(p, l, nlen, l + vs, ve - vs, hi);
    if (rc < 0)
        return rc;
    /* a token name and a value without control characters: nothing left to check */
    if (httphead_add_valid(&p->msg.head, l, nlen, l + vs, ve - vs) < 0)
        return http1_fail(p, 431, "head too large");
    return 0;
}

static int parse_version(const char *v, size_t n)
{
    if (n != 8 || memcmp(v, "HTTP/1.", 7) != 0)
        return -1;
    if (v[7] == '1')
        return 1;
    if (v[7] == '0')
        return 0;
    return -1;
}

/* Absolute-form: http(s)://authority[/path][?query], no userinfo. */
static int check_absolute_target(struct http1_parser *p, const char *t, size_t n)
{
    const char *sep = memchr(t, ':', n);
    char host[HOSTNAME_BUFSZ];
    size_t slen, a, e;
    int port;

    if (sep == NULL)
        return http1_fail(p, 400, "bad request target");
    slen = (size_t)(sep - t);
    if (!NAME_IS(t, slen, "http") && !NAME_IS(t, slen, "https"))
        return http1_fail(p, 400, "bad request target");
    if (n - slen < 3 || sep[1] != '/' || sep[2] != '/')
        return http1_fail(p, 400, "bad request target");
    a = slen + 3;
    for (e = a; e < n && t[e] != '/' && t[e] != '?' && t[e] != '#'; e++) {
        if (t[e] == '@')
            return http1_fail(p, 400, "userinfo in request target");
    }
    if (http1_split_authority(t + a, e - a, host, sizeof(host), &port) < 0)
        return http1_fail(p, 400, "bad authority in request target");
    return 0;
}

static int check_target(struct http1_parser *p, const char *m, size_t mlen, const char *t,
                        size_t tlen)
{
    char host[HOSTNAME_BUFSZ];
    int port;

    if (NAME_IS(m, mlen, "CONNECT") && memcmp(m, "CONNECT", 7) == 0) {
        if (http1_split_authority(t, tlen, host, sizeof(host), &port) < 0 || port == 0)
            return http1_fail(p, 400, "bad CONNECT target");
        return 0;
    }
    if (t[0] == '/')
        return 0;
    if (tlen == 1 && t[0] == '*')
        return mlen == 7 && memcmp(m, "OPTIONS", 7) == 0 ? 0
                                                         : http1_fail(p, 400, "bad request target");
    return check_absolute_target(p, t, tlen);
}

/* Request line: method SP request-target SP HTTP-version. */
static int parse_request_line(struct http1_parser *p, const char *l, size_t n, struct head_info *hi)
{
    const char *sp1 = memchr(l, ' ', n), *sp2;
    size_t mlen, tlen;

    if (sp1 == NULL || sp1 == l)
        return http1_fail(p, 400, "bad request line");
    mlen = (size_t)(sp1 - l);
    if (!all_tchar(l, mlen))
        return http1_fail(p, 400, "method is not a token");
    sp2 = memchr(sp1 + 1, ' ', n - mlen - 1);
    if (sp2 == NULL || sp2 == sp1 + 1)
        return http1_fail(p, 400, "bad request line");
    tlen = (size_t)(sp2 - sp1 - 1);
    if (!all_vchar(sp1 + 1, tlen))
        return http1_fail(p, 400, "bad byte in request target");
    hi->minor = parse_version(sp2 + 1, n - (size_t)(sp2 + 1 - l));
    if (hi->minor < 0)
        return http1_fail(p, 400, "HTTP version other than 1.1 or 1.0");
    if (check_target(p, l, mlen, sp1 + 1, tlen) < 0)
        return STEP_ERR;
    hi->method = l;
    hi->mlen = mlen;
    if (httphead_set_request_line(&p->msg.head, l, mlen, sp1 + 1, tlen, hi->minor) < 0)
        return http1_fail(p, 431, "head too large");
    return 0;
}

/* Status line: HTTP-version SP 3DIGIT [SP reason-phrase]. */
static int parse_status_line(struct http1_parser *p, const char *l, size_t n, struct head_info *hi)
{
    const char *reason = "";
    size_t rlen = 0;

    if (n < 12 || l[8] != ' ' || (hi->minor = parse_version(l, 8)) < 0)
        return http1_fail(p, 502, "bad status line");
    for (int i = 9; i < 12; i++) {
        if (l[i] < '0' || l[i] > '9')
            return http1_fail(p, 502, "bad status code");
    }
    hi->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
    if (hi->status < 100 || hi->status > 599)
        return http1_fail(p, 502, "bad status code");
    if (n > 12) {
        if (l[12] != ' ')
            return http1_fail(p, 502, "bad status line");
        reason = l + 13;
        rlen = n - 13;
        for (size_t i = 0; i < rlen; i++) {
            if (!is_value_byte((unsigned char)reason[i]))
                return http1_fail(p, 502, "control character in reason phrase");
        }
    }
    if (httphead_set_status_line(&p->msg.head, hi->minor, hi->status, reason, rlen) < 0)
        return http1_fail(p, 502, "head too large");
    return 0;
}

static int on_llhttp_headers_complete(llhttp_t *lp)
{
    return HPE_PAUSED;
}

static const llhttp_settings_t llhttp_cfg = {
    .on_headers_complete = on_llhttp_headers_complete,
};

/*
 * Second opinion: llhttp in strict mode must parse the same bytes as a head that ends exactly
 * where ours does, with the same version, status and framing.
 */
static int llhttp_agrees(struct http1_parser *p, const char *h, size_t n,
                         const struct head_info *hi)
{
    llhttp_t lp;
    llhttp_errno_t e;

    llhttp_init(&lp, p->kind == HTTP1_REQUEST ? HTTP_REQUEST : HTTP_RESPONSE, &llhttp_cfg);
    e = llhttp_execute(&lp, h, n);
    if (e == HPE_INVALID_METHOD)
        return http1_fail(p, 501, "method not recognised");
    if (e != HPE_PAUSED || llhttp_get_error_pos(&lp) != h + n)
        return http1_fail(p, 400, "malformed head");
    if (lp.http_major != 1 || lp.http_minor != hi->minor)
        return http1_fail(p, 400, "malformed head");
    if (p->kind == HTTP1_RESPONSE)
        return lp.status_code == hi->status ? 0 : http1_fail(p, 502, "malformed head");
    if (((lp.flags & F_CHUNKED) != 0) != hi->te_chunked ||
        ((lp.flags & F_CONTENT_LENGTH) != 0) != (hi->ncl > 0) ||
        (hi->ncl > 0 && lp.content_length != hi->cl))
        return http1_fail(p, 400, "malformed head");
    return 0;
}

static int request_framing(struct http1_parser *p, const struct head_info *hi)
{
    struct http1_msg *m = &p->msg;
    bool connect = hi->mlen == 7 && memcmp(hi->method, "CONNECT", 7) == 0;

    if (hi->nte > 0 && hi->ncl > 0)
        return http1_fail(p, 400, "both Content-Length and Transfer-Encoding");
    if (hi->nte > 0 && hi->minor == 0)
        return http1_fail(p, 400, "Transfer-Encoding on HTTP/1.0");
    if (hi->nhost > 1)
        return http1_fail(p, 400, "more than one Host");
    if (hi->nhost == 0 && hi->minor == 1)
        return http1_fail(p, 400, "no Host");
    if (connect && (hi->nte > 0 || hi->cl > 0))
        return http1_fail(p, 400, "body on CONNECT");
    m->body =
        hi->te_chunked ? HTTP1_BODY_CHUNKED : (hi->ncl > 0 ? HTTP1_BODY_LENGTH : HTTP1_BODY_NONE);
    m->content_length = hi->ncl > 0 ? hi->cl : 0;
    /* an offer of h2c alone is declined by ignoring it (RFC 9110 §7.8): the connection stays
     * HTTP/1.1, Upgrade and HTTP2-Settings go as hop-by-hop fields, the next request follows */
    m->upgrade = connect || (hi->has_upgrade && hi->conn_upgrade && hi->upgrade_other);
    if (hi->minor == 1)
        m->keep_alive = !hi->conn_close;
    else
        m->keep_alive = hi->conn_keepalive && !hi->conn_close;
    return 0;
}

static int response_framing(struct http1_parser *p, const struct head_info *hi)
{
    struct http1_msg *m = &p->msg;
    int s = hi->status;

    if (hi->nte > 0 && hi->ncl > 0)
        return http1_fail(p, 502, "both Content-Length and Transfer-Encoding");
    if (hi->nte > 0 && hi->minor == 0)
        return http1_fail(p, 502, "Transfer-Encoding on HTTP/1.0");
    m->content_length = hi->ncl > 0 ? hi->cl : 0;
    m->upgrade = s == 101 || (p->req_conn && s >= 200 && s < 300);
    if (hi->minor == 1)
        m->keep_alive = !hi->conn_close;
    else
        m->keep_alive = hi->conn_keepalive && !hi->conn_close;
    if (s < 200 || s == 204 || s == 304 || p->req_head || m->upgrade)
        m->body = HTTP1_BODY_NONE;
    else if (hi->te_chunked)
        m->body = HTTP1_BODY_CHUNKED;
    else if (hi->ncl > 0)
        m->body = HTTP1_BODY_LENGTH;
    else {
        m->body = HTTP1_BODY_EOF;
        m->keep_alive = false;
    }
    return 0;
}

/* Parses a complete head (h..h+n ends with CRLFCRLF) into p->msg and calls on_head. */
static int head_parse(struct http1_parser *p, const char *h, size_t n)
{
    struct head_info hi = {0};
    const char *l = h, *end = h + n - 2;
    int rc;

    httphead_clear(&p->msg.head);
    while (l < end) {
        const char *lf = memchr(l, '\n', (size_t)(end - l));
        size_t len = (size_t)(lf - l) - 1;

        if (l == h)
            rc = p->kind == HTTP1_REQUEST ? parse_request_line(p, l, len, &hi)
                                          : parse_status_line(p, l, len, &hi);
        else
            rc = parse_field(p, l, len, &hi);
        if (rc < 0)
            return STEP_ERR;
        l = lf + 1;
    }
    rc = p->kind == HTTP1_REQUEST ? request_framing(p, &hi) : response_framing(p, &hi);
    if (rc < 0 || llhttp_agrees(p, h, n, &hi) < 0)
        return STEP_ERR;
    if (p->kind == HTTP1_REQUEST && hi.mlen == 5 && memcmp(hi.method, "TRACE", 5) == 0)
        return http1_fail(p, 405, "TRACE not allowed");
    return 0;
}

static int head_complete(struct http1_parser *p, const char *h, size_t n)
{
    struct http1_msg *m = &p->msg;
    bool final;

    p->blen = 0;
    p->line_start = 0;
    p->lead = 0;
    p->nlines = 0;
    if (head_parse(p, h, n) < 0) {
        httphead_reset(&m->head);
        return STEP_ERR;
    }
    final = p->kind == HTTP1_REQUEST || m->head.status >= 200 || m->upgrade;
    switch (m->body) {
    case HTTP1_BODY_LENGTH:
        p->remaining = m->content_length;
        p->state = m->content_length > 0 ? ST_BODY_LENGTH : ST_DONE_PENDING;
        break;
    case HTTP1_BODY_CHUNKED:
        p->state = ST_CHUNK_SIZE;
        p->remaining = 0;
        p->ndigits = 0;
        p->tr_bytes = 0;
        p->tr_fields = 0;
        p->tlen = 0;
        break;
    case HTTP1_BODY_EOF:
        p->state = ST_BODY_EOF;
        break;
    case HTTP1_BODY_NONE:
        /* a 1xx: the final response is still to come, with no on_done in between */
        p->state = final ? ST_DONE_PENDING : ST_HEAD;
        break;
    }
    p->in_msg = final;
    p->interim = !final;
    return http1_cb_result(p, p->cb.on_head ? p->cb.on_head(p->arg, m) : 0);
}

/* ---- public parser API ---- */

struct http1_parser *http1_parser_new(enum http1_kind kind, const struct http1_callbacks *cb,
                                      void *arg)
{
    struct http1_parser *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->kind = kind;
    if (cb != NULL)
        p->cb = *cb;
    p->arg = arg;
    httphead_init(&p->msg.head);
    httphead_init(&p->trailers);
    return p;
}

/* Frees (and wipes) the kept trailer section and its fields. */
static void http1_trailers_release(struct http1_parser *p)
{
    httphead_reset(&p->trailers);
    if (p->tbuf != NULL)
        explicit_bzero(p->tbuf, p->tcap);
    free(p->tbuf);
    p->tbuf = NULL;
    p->tlen = p->tcap = 0;
}

void http1_parser_free(struct http1_parser **pp)
{
    struct http1_parser *p;

    if (pp == NULL || *pp == NULL)
        return;
    p = *pp;
    httphead_reset(&p->msg.head);
    http1_trailers_release(p);
    if (p->buf != NULL)
        explicit_bzero(p->buf, p->bcap);
    free(p->buf);
    free(p);
    *pp = NULL;
}

void http1_parser_reset(struct http1_parser *p)
{
    httphead_clear(&p->msg.head);
    http1_trailers_release(p);
    if (p->buf != NULL)
        explicit_bzero(p->buf, p->bcap);
    free(p->buf);
    p->buf = NULL;
    p->blen = p->bcap = 0;
    p->line_start = p->lead = p->nlines = 0;
    p->remaining = 0;
    p->in_msg = false;
    p->interim = false;
    p->msg.body = HTTP1_BODY_NONE;
    p->msg.content_length = 0;
    p->msg.keep_alive = false;
    p->msg.upgrade = false;
    /* a connection that ended, or failed, stays stopped */
    if (p->state != ST_CLOSED && p->state != ST_ERROR)
        p->state = ST_HEAD;
}

void http1_parser_set_arg(struct http1_parser *p, void *arg)
{
    p->arg = arg;
}

void http1_parser_set_request_method(struct http1_parser *p, const char *method)
{
    size_t n = method != NULL ? strnlen(method, 8) : 0;

    /* methods are case-sensitive (RFC 9110 §9.1): exact bytes, the length first */
    p->req_head = n == 4 && memcmp(method, "HEAD", 4) == 0;
    p->req_conn = n == 7 && memcmp(method, "CONNECT", 7) == 0;
}

ssize_t http1_feed(struct http1_parser *p, const char *data, size_t len)
{
    size_t pos = 0;

    for (;;) {
        int rc;

        switch (p->state) {
        case ST_ERROR:
            return -1;
        case ST_UPGRADED:
        case ST_CLOSED:
            return (ssize_t)pos;
        case ST_HEAD:
            rc = feed_head(p, data, len, &pos);
            break;
        case ST_DONE_PENDING:
            rc = http1_finish_message(p);
            break;
        case ST_BODY_LENGTH:
            rc = http1_feed_length(p, data, len, &pos);
            break;
        case ST_BODY_EOF:
            rc = http1_feed_eof_body(p, data, len, &pos);
            break;
        default:
            rc = http1_feed_chunked(p, data, len, &pos);
            break;
        }
        if (rc == STEP_ERR)
            return -1;
        if (rc == STEP_MORE || rc == STEP_PAUSE)
            return (ssize_t)pos;
    }
}

int http1_feed_eof(struct http1_parser *p)
{
    switch (p->state) {
    case ST_ERROR:
        return -1;
    case ST_UPGRADED:
    case ST_CLOSED:
        return 0;
    case ST_HEAD:
        if (p->blen == 0 && !p->interim)
            return 0;
        http1_fail(p, 400, "connection closed inside a head");
        return -1;
    case ST_DONE_PENDING:
    case ST_BODY_EOF:
        p->msg.keep_alive = false;
        p->msg.upgrade = false;
        if (http1_finish_message(p) == STEP_ERR)
            return -1;
        p->state = ST_CLOSED;
        return 0;
    default:
        http1_fail(p, 400, "connection closed inside a body");
        return -1;
    }
}

int http1_error(const struct http1_parser *p, const char **reason)
{
    if (reason != NULL)
        *reason = p->err_reason != NULL ? p->err_reason : "no error";
    return p->err_status;
}

bool http1_in_message(const struct http1_parser *p)
{
    return p->in_msg;
}

/* ---- authority ---- */

/* A client's Host may carry leading zeros in its port (RFC 3986: port = *DIGIT); never 0. */
#define HTTP1_PORT_FLAGS HOSTPORT_LEADING_ZERO

int http1_authority_is(const char *value, size_t len, const char *norm_host, int *port)
{
    size_t hl = strlen(norm_host);
    int pt = 0;

    if (hl == 0 || len < hl || len > VG_HOST_MAX + 8 || memcmp(value, norm_host, hl) != 0 ||
        memchr(norm_host, ':', hl) != NULL || (len > hl && value[hl] != ':'))
        return 0;
    if (len > hl && hostport_port(value + hl + 1, len - hl - 1, HTTP1_PORT_FLAGS, &pt) < 0)
        return 0;
    *port = pt;
    return 1;
}

int http1_split_authority(const char *value, size_t len, char *host, size_t hostsz, int *port)
{
    struct hostport hp;

    if (value == NULL || len == 0 || len > VG_HOST_MAX + 8 || hostsz < HOSTNAME_BUFSZ ||
        !all_vchar(value, len) || memchr(value, '@', len) != NULL ||
        memchr(value, ',', len) != NULL || hostport_parse(value, len, HTTP1_PORT_FLAGS, &hp) < 0)
        return -1;
    memcpy(host, hp.host, strlen(hp.host) + 1);
    *port = hp.port;
    return 0;
}
