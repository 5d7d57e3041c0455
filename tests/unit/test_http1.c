/*
 * test_http1.c - the strict HTTP/1.x parser and the serialisers (http/http1.c, SPEC §4).
 *
 * Every input is fed from a guard-page copy, so a one-byte over-read crashes. Every request
 * case runs twice: in one piece and byte by byte, and both runs must record the same events.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "common/caps.h"
#include "common/hostname.h"
#include "http/http1.h"
#include "tests/unit/guard.h"

#define S(lit) lit, sizeof(lit) - 1

/* ---- recorder ---- */

struct rec {
    char log[16384];
    size_t loglen;
    int heads, dones;
    int pause_mask; /* 1 on_head, 2 on_body, 4 on_done */
    bool paused;
    bool stopped;
    size_t consumed;
    enum http1_kind kind;
    const char *why;
};

static void rec_put(struct rec *r, const char *s, size_t n)
{
    if (r->loglen + n >= sizeof(r->log))
        n = sizeof(r->log) - 1 - r->loglen;
    memcpy(r->log + r->loglen, s, n);
    r->loglen += n;
    r->log[r->loglen] = '\0';
}

static int rec_head(void *arg, struct http1_msg *m)
{
    struct rec *r = arg;
    char line[512];

    r->heads++;
    if (r->kind == HTTP1_REQUEST)
        snprintf(line, sizeof(line), "<H %s %.*s 1.%d", m->head.method, (int)m->head.target_len,
                 m->head.target, m->head.version_minor);
    else
        snprintf(line, sizeof(line), "<H %d [%s] 1.%d", m->head.status, m->head.reason,
                 m->head.version_minor);
    rec_put(r, line, strlen(line));
    snprintf(line, sizeof(line), " b%d cl%llu ka%d up%d", (int)m->body,
             (unsigned long long)m->content_length, m->keep_alive, m->upgrade);
    rec_put(r, line, strlen(line));
    for (size_t i = 0; i < m->head.nfields; i++) {
        rec_put(r, " |", 2);
        rec_put(r, m->head.fields[i].name, m->head.fields[i].name_len);
        rec_put(r, "=", 1);
        rec_put(r, m->head.fields[i].value, m->head.fields[i].value_len);
    }
    rec_put(r, ">", 1);
    if (r->pause_mask & 1) {
        r->paused = true;
        return 1;
    }
    return 0;
}

static int rec_body(void *arg, const char *d, size_t n)
{
    struct rec *r = arg;

    rec_put(r, d, n);
    if (r->pause_mask & 2) {
        r->paused = true;
        return 1;
    }
    return 0;
}

static int rec_done(void *arg)
{
    struct rec *r = arg;

    r->dones++;
    rec_put(r, "<D>", 3);
    if (r->pause_mask & 4) {
        r->paused = true;
        return 1;
    }
    return 0;
}

static const struct http1_callbacks rec_cb = {rec_head, rec_body, rec_done, NULL};

/*
 * Feeds in pieces of `step` bytes (0: all at once), each from a guard copy, resuming at once
 * after every pause. Returns 0, or the error status. eof: call http1_feed_eof at the end.
 */
static int run(enum http1_kind kind, const char *method, const char *in, size_t len, size_t step,
               int pause_mask, bool eof, struct rec *r)
{
    struct http1_parser *p;
    int status = 0;

    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->pause_mask = pause_mask;
    p = http1_parser_new(kind, &rec_cb, r);
    ck_assert_ptr_nonnull(p);
    if (method != NULL)
        http1_parser_set_request_method(p, method);
    if (step == 0)
        step = len;
    for (size_t at = 0; at < len && !r->stopped && status == 0; at += step) {
        size_t n = len - at < step ? len - at : step, off = 0;
        char *c = guard_copy(in + at, n);

        for (;;) {
            ssize_t k;

            r->paused = false;
            k = http1_feed(p, c + off, n - off);
            if (k < 0) {
                status = http1_error(p, &r->why);
                ck_assert_int_ge(status, 400);
                break;
            }
            ck_assert_uint_le((size_t)k, n - off);
            off += (size_t)k;
            r->consumed += (size_t)k;
            if (r->paused)
                continue;
            if (off < n)
                r->stopped = true;
            break;
        }
        guard_free(c, n);
    }
    if (status == 0 && eof && http1_feed_eof(p) < 0)
        status = http1_error(p, NULL);
    http1_parser_free(&p);
    ck_assert_ptr_null(p);
    return status;
}

/* The status of a request with one extra field whose value (or, with in_name, whose name) is
 * len bytes of fill with byte bad at position at (none when at == len): 0 when it parsed. */
static int field_status(bool in_name, char fill, char bad, size_t len, size_t at)
{
    char in[160], v[41];
    struct rec r;
    int n;

    memset(v, fill, len);
    v[len] = '\0';
    if (at < len)
        v[at] = bad;
    n = in_name
            ? snprintf(in, sizeof(in), "GET / HTTP/1.1\r\nHost: a.example\r\n%s: x\r\n\r\n", v)
            : snprintf(in, sizeof(in), "GET / HTTP/1.1\r\nHost: a.example\r\nX-V: %s\r\n\r\n", v);
    return run(HTTP1_REQUEST, NULL, in, (size_t)n, 0, 0, false, &r);
}

/* A control byte at every position of a field value, and a byte that is no token at every
 * position of a field name, of every length up to 40 (the byte-class scan takes four bytes
 * per step, then one by one): 400 each time; the same fields without them parse. */
START_TEST(test_field_bytes_every_position)
{
    for (size_t len = 1; len <= 40; len++) {
        for (size_t at = 0; at <= len; at++) {
            ck_assert_int_eq(field_status(false, 'v', '\x01', len, at), at < len ? 400 : 0);
            ck_assert_int_eq(field_status(true, 'n', '(', len, at), at < len ? 400 : 0);
        }
    }
}
END_TEST

/* ---- bad requests: one row per SPEC §4 rule and per llhttp 8.1 leniency ---- */

struct bad_case {
    const char *name;
    const char *in;
    size_t len;
    int status;
    const char *why; /* http1_error's reason: the rule that fired */
};

#define H11 "GET / HTTP/1.1\r\nHost: a.example\r\n"
#define BAD(name, lit, st, why)                                                                    \
    {                                                                                              \
        name, lit, sizeof(lit) - 1, st, why                                                        \
    }

static const struct bad_case bad_requests[] = {
    /* CR / LF */
    BAD("bare CR in request line", "GET / HTTP/1.1\rHost: a.example\r\n\r\n", 400,
        "CR without LF in head"),
    BAD("bare LF after request line", "GET / HTTP/1.1\nHost: a.example\r\n\r\n", 400,
        "LF without CR in head"),
    BAD("LF-only head end", "GET / HTTP/1.1\r\nHost: a.example\n\n", 400, "LF without CR in head"),
    BAD("bare CR inside value", H11 "X-A: b\rc\r\n\r\n", 400, "CR without LF in head"),
    BAD("CRLF CR X ends head and starts another (llhttp 8.1)",
        H11 "\rGET /smuggled HTTP/1.1\r\nHost: a.example\r\n\r\n", 400, "CR without LF in head"),
    BAD("CRLF CR X with nothing after", H11 "\rX", 400, "CR without LF in head"),
    BAD("bare CR after empty value (llhttp 8.1)", H11 "X-A:\rX-B: c\r\n\r\n", 400,
        "CR without LF in head"),
    BAD("bare CR before leading CRLF", "\rGET / HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "CR without LF in head"),
    BAD("bare LF as leading empty line", "\nGET / HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "LF without CR in head"),
    /* line starts */
    BAD("obs-fold continuation (llhttp 8.1)", H11 "X-A: b\r\n  c\r\n\r\n", 400,
        "head line starts with whitespace (obs-fold)"),
    BAD("obs-fold with tab", H11 "X-A: b\r\n\tc\r\n\r\n", 400,
        "head line starts with whitespace (obs-fold)"),
    BAD("first field line starts with space", "GET / HTTP/1.1\r\n Host: a.example\r\n\r\n", 400,
        "head line starts with whitespace (obs-fold)"),
    /* names */
    BAD("empty header name (llhttp 8.1)", H11 ": x\r\n\r\n", 400,
        "header line without name or colon"),
    BAD("space inside header name (llhttp 8.1)", H11 "X A: b\r\n\r\n", 400,
        "header name is not a token"),
    BAD("space before colon", "GET / HTTP/1.1\r\nHost : a.example\r\n\r\n", 400,
        "header name is not a token"),
    BAD("underscore in header name", H11 "X_Forwarded_For: 1\r\n\r\n", 400,
        "underscore in header name"),
    BAD("non-token header name", H11 "X(A): b\r\n\r\n", 400, "header name is not a token"),
    BAD("header line without colon", H11 "XA\r\n\r\n", 400, "header line without name or colon"),
    BAD("non-ASCII header name", H11 "X\xc3\xa9: b\r\n\r\n", 400, "header name is not a token"),
    /* values */
    BAD("NUL in value", H11 "X-A: b\0c\r\n\r\n", 400, "control character in header value"),
    BAD("control character in value", H11 "X-A: b\x01c\r\n\r\n", 400,
        "control character in header value"),
    BAD("DEL in value", H11 "X-A: b\x7f\r\n\r\n", 400, "control character in header value"),
    BAD("ESC in value", H11 "X-A: \x1b[0m\r\n\r\n", 400, "control character in header value"),
    /* request line */
    BAD("non-ASCII byte in target", "GET /\x80 HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "bad byte in request target"),
    BAD("tab in target", "GET /a\tb HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "bad byte in request target"),
    BAD("NUL in target", "GET /\0 HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "bad byte in request target"),
    BAD("two spaces in request line", "GET  / HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "bad request line"),
    BAD("trailing space in request line", "GET / HTTP/1.1 \r\nHost: a.example\r\n\r\n", 400,
        "HTTP version other than 1.1 or 1.0"),
    BAD("HTTP/1.2", "GET / HTTP/1.2\r\nHost: a.example\r\n\r\n", 400,
        "HTTP version other than 1.1 or 1.0"),
    BAD("HTTP/2.0", "GET / HTTP/2.0\r\nHost: a.example\r\n\r\n", 400,
        "HTTP version other than 1.1 or 1.0"),
    BAD("HTTP/0.9", "GET / HTTP/0.9\r\nHost: a.example\r\n\r\n", 400,
        "HTTP version other than 1.1 or 1.0"),
    BAD("lower-case version", "GET / http/1.1\r\nHost: a.example\r\n\r\n", 400,
        "HTTP version other than 1.1 or 1.0"),
    BAD("no version", "GET /\r\nHost: a.example\r\n\r\n", 400, "bad request line"),
    BAD("method not a token", "G(T / HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "method is not a token"),
    BAD("unknown method", "FROB / HTTP/1.1\r\nHost: a.example\r\n\r\n", 501,
        "method not recognised"),
    BAD("TRACE", "TRACE / HTTP/1.1\r\nHost: a.example\r\n\r\n", 405, "TRACE not allowed"),
    BAD("target neither origin nor absolute", "GET a/b HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "bad request target"),
    BAD("asterisk target on GET", "GET * HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "bad request target"),
    BAD("absolute-form with userinfo",
        "GET http://user:pw@a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "userinfo in request target"),
    BAD("absolute-form with bare userinfo",
        "GET http://@a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "userinfo in request target"),
    BAD("absolute-form with other scheme",
        "GET ftp://a.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n", 400, "bad request target"),
    BAD("absolute-form with bad host", "GET http://a_b/ HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "bad authority in request target"),
    BAD("CONNECT without port", "CONNECT a.example HTTP/1.1\r\nHost: a.example\r\n\r\n", 400,
        "bad CONNECT target"),
    BAD("CONNECT with body",
        "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n"
        "Content-Length: 5\r\n\r\nhello",
        400, "body on CONNECT"),
    /* Host */
    BAD("no Host on HTTP/1.1", "GET / HTTP/1.1\r\nX-A: b\r\n\r\n", 400, "no Host"),
    BAD("two Host fields", H11 "Host: a.example\r\n\r\n", 400, "more than one Host"),
    BAD("Host with userinfo", "GET / HTTP/1.1\r\nHost: u@a.example\r\n\r\n", 400,
        "Host is not host[:port]"),
    BAD("Host with space", "GET / HTTP/1.1\r\nHost: a.example b\r\n\r\n", 400,
        "Host is not host[:port]"),
    BAD("Host with comma", "GET / HTTP/1.1\r\nHost: a.example,b.example\r\n\r\n", 400,
        "Host is not host[:port]"),
    BAD("Host empty", "GET / HTTP/1.1\r\nHost:\r\n\r\n", 400, "Host is not host[:port]"),
    BAD("Host non-ASCII", "GET / HTTP/1.1\r\nHost: \xc3\xa9.example\r\n\r\n", 400,
        "Host is not host[:port]"),
    BAD("Host port 0", "GET / HTTP/1.1\r\nHost: a.example:0\r\n\r\n", 400,
        "Host is not host[:port]"),
    BAD("Host port too big", "GET / HTTP/1.1\r\nHost: a.example:65536\r\n\r\n", 400,
        "Host is not host[:port]"),
    BAD("Host two colons", "GET / HTTP/1.1\r\nHost: a.example:1:2\r\n\r\n", 400,
        "Host is not host[:port]"),
    BAD("Host with path", "GET / HTTP/1.1\r\nHost: a.example/x\r\n\r\n", 400,
        "Host is not host[:port]"),
    /* Connection / Upgrade */
    BAD("non-ASCII in Connection", H11 "Connection: cl\xc3\xb6se\r\n\r\n", 400, "bad Connection"),
    BAD("non-token in Connection", H11 "Connection: keep-alive; x\r\n\r\n", 400, "bad Connection"),
    BAD("non-ASCII in Upgrade", H11 "Upgrade: web\x80socket\r\nConnection: upgrade\r\n\r\n", 400,
        "bad Upgrade"),
    /* Transfer-Encoding */
    BAD("TE gzip", H11 "Transfer-Encoding: gzip\r\n\r\n", 400,
        "Transfer-Encoding other than chunked"),
    BAD("TE chunked, gzip", H11 "Transfer-Encoding: chunked, gzip\r\n\r\n", 400,
        "Transfer-Encoding other than chunked"),
    BAD("TE gzip, chunked", H11 "Transfer-Encoding: gzip, chunked\r\n\r\n", 400,
        "Transfer-Encoding other than chunked"),
    BAD("TE chunked twice in one field", H11 "Transfer-Encoding: chunked, chunked\r\n\r\n", 400,
        "Transfer-Encoding other than chunked"),
    BAD("TE in two fields", H11 "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        400, "Transfer-Encoding other than chunked"),
    BAD("TE with non-ASCII", H11 "Transfer-Encoding: chunked\xc2\xa0\r\n\r\n", 400,
        "Transfer-Encoding other than chunked"),
    BAD("TE with vertical tab",
        H11 "Transfer-Encoding: \x0b"
            "chunked\r\n\r\n",
        400, "control character in header value"),
    BAD("TE on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
        "Transfer-Encoding on HTTP/1.0"),
    BAD("CL and TE", H11 "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
        "both Content-Length and Transfer-Encoding"),
    BAD("TE and CL", H11 "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400,
        "both Content-Length and Transfer-Encoding"),
    /* Content-Length */
    BAD("duplicate CL, same value", H11 "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400,
        "duplicate Content-Length"),
    BAD("duplicate CL, different value", H11 "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", 400,
        "duplicate Content-Length"),
    BAD("CL list", H11 "Content-Length: 5, 5\r\n\r\nhello", 400, "bad Content-Length"),
    BAD("CL leading zero", H11 "Content-Length: 05\r\n\r\nhello", 400, "bad Content-Length"),
    BAD("CL plus sign", H11 "Content-Length: +5\r\n\r\nhello", 400, "bad Content-Length"),
    BAD("CL negative", H11 "Content-Length: -1\r\n\r\n", 400, "bad Content-Length"),
    BAD("CL hex", H11 "Content-Length: 0x5\r\n\r\nhello", 400, "bad Content-Length"),
    BAD("CL 17 digits", H11 "Content-Length: 10000000000000000\r\n\r\n", 400, "bad Content-Length"),
    BAD("CL empty", H11 "Content-Length:\r\n\r\n", 400, "bad Content-Length"),
    BAD("CL inner space", H11 "Content-Length: 1 0\r\n\r\n", 400, "bad Content-Length"),
    BAD("CL non-ASCII digit", H11 "Content-Length: \xd9\xa5\r\n\r\n", 400, "bad Content-Length"),
    /* chunked bodies */
    BAD("chunk size not hex", H11 "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400,
        "bad chunk size"),
    BAD("chunk size with leading space",
        H11 "Transfer-Encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n", 400, "bad chunk size"),
    BAD("chunk size with 0x", H11 "Transfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
        400, "bad chunk extension"),
    BAD("chunk size 17 digits", H11 "Transfer-Encoding: chunked\r\n\r\n00000000000000005\r\n", 400,
        "chunk size too long"),
    BAD("chunk line ended by CR X (llhttp 8.1)",
        H11 "Transfer-Encoding: chunked\r\n\r\n5\rXhello\r\n0\r\n\r\n", 400,
        "CR without LF in chunk line"),
    BAD("chunk line ended by LF", H11 "Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
        400, "LF without CR in chunk line"),
    BAD("chunk data without CRLF", H11 "Transfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n",
        400, "chunk data not followed by CRLF"),
    BAD("chunk data ended by LF", H11 "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
        400, "chunk data not followed by CRLF"),
    BAD("chunk data ended by CR X", H11 "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\rX0\r\n\r\n",
        400, "chunk data not followed by CRLF"),
    BAD("chunk size whitespace before CRLF",
        H11 "Transfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n", 400, "bad chunk extension"),
    BAD("chunk extension without name", H11 "Transfer-Encoding: chunked\r\n\r\n5;\r\nhello\r\n",
        400, "bad chunk extension"),
    BAD("chunk extension bad char", H11 "Transfer-Encoding: chunked\r\n\r\n5;a=(\r\nhello\r\n", 400,
        "bad chunk extension"),
    BAD("chunk extension unterminated quote",
        H11 "Transfer-Encoding: chunked\r\n\r\n5;a=\"x\r\nhello\r\n", 400, "bad chunk extension"),
    BAD("chunk extension with bare CR", H11 "Transfer-Encoding: chunked\r\n\r\n5;a\rb\r\nhello\r\n",
        400, "CR without LF in chunk line"),
    BAD("chunk extension with NUL", H11 "Transfer-Encoding: chunked\r\n\r\n5;a=\"\0\"\r\nhello\r\n",
        400, "bad chunk extension"),
    /* trailers */
    BAD("trailer obs-fold", H11 "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: a\r\n b\r\n\r\n", 400,
        "bad trailer line"),
    BAD("trailer bare LF", H11 "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: a\n\r\n", 400,
        "LF without CR in trailer"),
    BAD("trailer without colon", H11 "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T\r\n\r\n", 400,
        "bad trailer name"),
    BAD("trailer control char", H11 "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: \x01\r\n\r\n", 400,
        "control character in trailer"),
    BAD("trailer end CR X", H11 "Transfer-Encoding: chunked\r\n\r\n0\r\n\rX", 400,
        "CR without LF in trailer"),
};

/* A bad request: the given status, never an on_head, in one piece and byte by byte. */
START_TEST(test_bad_request)
{
    const struct bad_case *c = &bad_requests[_i];
    struct rec r;
    int st;
    bool body_rule = strstr(c->name, "chunk") != NULL || strstr(c->name, "trailer") != NULL;

    st = run(HTTP1_REQUEST, NULL, c->in, c->len, 0, 0, false, &r);
    ck_assert_msg(st == c->status, "%s: status %d, want %d", c->name, st, c->status);
    ck_assert_msg(strcmp(r.why, c->why) == 0, "%s: reason %s, want %s", c->name, r.why, c->why);
    /* body errors are found after the head went out; no message may complete */
    if (body_rule)
        ck_assert_msg(r.dones == 0, "%s: completed", c->name);
    else
        ck_assert_msg(r.heads == 0, "%s: on_head was called", c->name);
    st = run(HTTP1_REQUEST, NULL, c->in, c->len, 1, 0, false, &r);
    ck_assert_msg(st == c->status, "%s (bytewise): status %d, want %d", c->name, st, c->status);
    ck_assert_msg(strcmp(r.why, c->why) == 0, "%s (bytewise): reason %s", c->name, r.why);
    if (body_rule)
        ck_assert_msg(r.dones == 0, "%s (bytewise): completed", c->name);
    else
        ck_assert_msg(r.heads == 0, "%s (bytewise): on_head was called", c->name);
}
END_TEST

/* Heads over the caps: 431. */
START_TEST(test_caps)
{
    size_t n = VG_HEAD_MAX_BYTES + 100, len;
    char *big = malloc(n + 200);
    struct rec r;

    ck_assert_ptr_nonnull(big);
    len = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: a.example\r\nX-Big: ");
    memset(big + len, 'a', VG_HEAD_MAX_BYTES);
    len += VG_HEAD_MAX_BYTES;
    memcpy(big + len, "\r\n\r\n", 4);
    len += 4;
    ck_assert_int_eq(run(HTTP1_REQUEST, NULL, big, len, 0, 0, false, &r), 431);
    ck_assert_int_eq(r.heads, 0);
    ck_assert_int_eq(run(HTTP1_REQUEST, NULL, big, len, 4096, 0, false, &r), 431);
    ck_assert_int_eq(r.heads, 0);
    /* an unfinished head that already exceeds the cap fails without waiting for its end */
    ck_assert_int_eq(run(HTTP1_REQUEST, NULL, big, len - 4, 0, 0, false, &r), 431);

    /* a head of exactly VG_HEAD_MAX_BYTES passes, one byte more fails */
    for (size_t extra = 0; extra <= 1; extra++) {
        size_t fill;

        len = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: a.example\r\nX-Big: ");
        fill = VG_HEAD_MAX_BYTES - len - 4 + extra;
        memset(big + len, 'b', fill);
        len += fill;
        memcpy(big + len, "\r\n\r\n", 4);
        len += 4;
        ck_assert_uint_eq(len, VG_HEAD_MAX_BYTES + extra);
        ck_assert_int_eq(run(HTTP1_REQUEST, NULL, big, len, 0, 0, false, &r), extra ? 431 : 0);
        ck_assert_int_eq(run(HTTP1_REQUEST, NULL, big, len, 1000, 0, false, &r), extra ? 431 : 0);
        ck_assert_int_eq(r.dones, extra ? 0 : 1);
    }
    /* exactly 100 fields pass, 101 fail */
    for (int nf = 100; nf <= 101; nf++) {
        len = (size_t)sprintf(big, "GET / HTTP/1.1\r\nHost: a.example\r\n");
        for (int i = 1; i < nf; i++)
            len += (size_t)sprintf(big + len, "X-F%d: v\r\n", i);
        len += (size_t)sprintf(big + len, "\r\n");
        ck_assert_int_eq(run(HTTP1_REQUEST, NULL, big, len, 0, 0, false, &r), nf == 100 ? 0 : 431);
        ck_assert_int_eq(r.heads, nf == 100 ? 1 : 0);
    }
    /* chunk extensions: 4096 bytes pass, 4097 fail */
    for (int ext = 4096; ext <= 4097; ext++) {
        len = (size_t)sprintf(big, H11 "Transfer-Encoding: chunked\r\n\r\n5;");
        memset(big + len, 'e', (size_t)ext - 1);
        len += (size_t)ext - 1;
        len += (size_t)sprintf(big + len, "\r\nhello\r\n0\r\n\r\n");
        ck_assert_int_eq(run(HTTP1_REQUEST, NULL, big, len, 0, 0, false, &r),
                         ext == 4096 ? 0 : 400);
        ck_assert_int_eq(r.dones, ext == 4096 ? 1 : 0);
    }
    free(big);
}
END_TEST

/* ---- good requests ---- */

struct good_case {
    const char *name;
    const char *in;
    size_t len;
    const char *log;
    bool stopped; /* bytes were left unparsed */
};

#define GOOD(name, in, log, stopped)                                                               \
    {                                                                                              \
        name, in, sizeof(in) - 1, log, stopped                                                     \
    }

static const struct good_case good_requests[] = {
    GOOD("GET",
         "GET /a?b=c HTTP/1.1\r\nHost: a.example\r\nX-Case:  Mixed Case \t\r\nACCEPT: */*\r\n\r\n",
         "<H GET /a?b=c 1.1 b0 cl0 ka1 up0 |Host=a.example |X-Case=Mixed Case |ACCEPT=*/*><D>",
         false),
    GOOD("POST with Content-Length",
         "POST /p HTTP/1.1\r\nHost: a.example:443\r\nContent-Length: 5\r\n\r\nhello",
         "<H POST /p 1.1 b1 cl5 ka1 up0 |Host=a.example:443 |Content-Length=5>hello<D>", false),
    GOOD("POST with Content-Length 0",
         "POST /p HTTP/1.1\r\nHost: a.example\r\nContent-Length: 0\r\n\r\n",
         "<H POST /p 1.1 b1 cl0 ka1 up0 |Host=a.example |Content-Length=0><D>", false),
    GOOD("chunked with extensions under the cap",
         "POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: Chunked\r\n\r\n"
         "5;name=val ; q=\"x \\\"y\\\"\";flag\r\nhello\r\n00A\r\n0123456789\r\n0\r\n\r\n",
         "<H POST / 1.1 b2 cl0 ka1 up0 |Host=a.example "
         "|Transfer-Encoding=Chunked>hello0123456789<D>",
         false),
    GOOD("chunked with trailers dropped, Content-Length in trailer ignored (llhttp 8.1)",
         "POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n"
         "3\r\nabc\r\n0\r\nContent-Length: 20\r\nX-T: v\r\n\r\n"
         "GET /next HTTP/1.1\r\nHost: a.example\r\n\r\n",
         "<H POST / 1.1 b2 cl0 ka1 up0 |Host=a.example |Transfer-Encoding=chunked>abc<D>"
         "<H GET /next 1.1 b0 cl0 ka1 up0 |Host=a.example><D>",
         false),
    GOOD("pipelined pair",
         "GET /1 HTTP/1.1\r\nHost: a.example\r\n\r\nPOST /2 HTTP/1.1\r\nHost: a.example\r\n"
         "Content-Length: 2\r\n\r\nhi",
         "<H GET /1 1.1 b0 cl0 ka1 up0 |Host=a.example><D>"
         "<H POST /2 1.1 b1 cl2 ka1 up0 |Host=a.example |Content-Length=2>hi<D>",
         false),
    GOOD("leading empty lines are skipped", "\r\n\r\nGET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
         "<H GET / 1.1 b0 cl0 ka1 up0 |Host=a.example><D>", false),
    GOOD("HTTP/1.0 without Host closes", "GET / HTTP/1.0\r\n\r\nGET /ignored HTTP/1.0\r\n\r\n",
         "<H GET / 1.0 b0 cl0 ka0 up0><D>", true),
    GOOD("HTTP/1.0 keep-alive",
         "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\nGET /2 HTTP/1.0\r\n\r\n",
         "<H GET / 1.0 b0 cl0 ka1 up0 |Connection=Keep-Alive><D><H GET /2 1.0 b0 cl0 ka0 up0><D>",
         false),
    GOOD("data after Connection: close is never parsed (llhttp 8.1)",
         "POST / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"
         "GET /smuggled HTTP/1.1\r\nHost: a.example\r\n\r\n",
         "<H POST / 1.1 b1 cl1 ka0 up0 |Host=a.example |Connection=close |Content-Length=1>x<D>",
         true),
    GOOD("garbage after Connection: close is never parsed",
         "GET / HTTP/1.1\r\nHost: a.example\r\nConnection: keep-alive, close\r\n\r\n\x01\x02\r\rX",
         "<H GET / 1.1 b0 cl0 ka0 up0 |Host=a.example |Connection=keep-alive, close><D>", true),
    GOOD("websocket upgrade stops parsing",
         "GET /ws HTTP/1.1\r\nHost: a.example\r\nUpgrade: websocket\r\nConnection: keep-alive, "
         "Upgrade\r\n\r\n"
         "\x81\x05hello",
         "<H GET /ws 1.1 b0 cl0 ka1 up1 |Host=a.example |Upgrade=websocket |Connection=keep-alive, "
         "Upgrade><D>",
         true),
    GOOD("Upgrade without the Connection option is no upgrade",
         "GET / HTTP/1.1\r\nHost: a.example\r\nUpgrade: h2c\r\n\r\n",
         "<H GET / 1.1 b0 cl0 ka1 up0 |Host=a.example |Upgrade=h2c><D>", false),
    /* an h2c offer is declined by ignoring it: no upgrade, the next request is parsed */
    GOOD("h2c upgrade offer is no upgrade",
         "GET / HTTP/1.1\r\nHost: a.example\r\nConnection: Upgrade, HTTP2-Settings\r\n"
         "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
         "GET /2 HTTP/1.1\r\nHost: a.example\r\n\r\n",
         "<H GET / 1.1 b0 cl0 ka1 up0 |Host=a.example |Connection=Upgrade, HTTP2-Settings "
         "|Upgrade=h2c |HTTP2-Settings=AAMAAABkAARAAAAAAAIAAAAA><D><H GET /2 1.1 b0 cl0 ka1 up0 "
         "|Host=a.example><D>",
         false),
    GOOD("H2C in any case is no upgrade either",
         "GET / HTTP/1.1\r\nHost: a.example\r\nConnection: upgrade\r\nUpgrade: H2C\r\n\r\n"
         "GET /2 HTTP/1.1\r\nHost: a.example\r\n\r\n",
         "<H GET / 1.1 b0 cl0 ka1 up0 |Host=a.example |Connection=upgrade |Upgrade=H2C><D>"
         "<H GET /2 1.1 b0 cl0 ka1 up0 |Host=a.example><D>",
         false),
    GOOD("h2c beside another protocol is an upgrade",
         "GET /ws HTTP/1.1\r\nHost: a.example\r\nConnection: upgrade\r\n"
         "Upgrade: h2c, websocket\r\n\r\n\x81\x00",
         "<H GET /ws 1.1 b0 cl0 ka1 up1 |Host=a.example |Connection=upgrade "
         "|Upgrade=h2c, websocket><D>",
         true),
    GOOD("CONNECT stops parsing",
         "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n\x16\x03\x01",
         "<H CONNECT a.example:443 1.1 b0 cl0 ka1 up1 |Host=a.example:443><D>", true),
    GOOD("absolute-form", "GET http://a.example:80/x?y HTTP/1.1\r\nHost: a.example\r\n\r\n",
         "<H GET http://a.example:80/x?y 1.1 b0 cl0 ka1 up0 |Host=a.example><D>", false),
    GOOD("OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: [::1]:8443\r\n\r\n",
         "<H OPTIONS * 1.1 b0 cl0 ka1 up0 |Host=[::1]:8443><D>", false),
    GOOD("obs-text in an ordinary value",
         "GET / HTTP/1.1\r\nHost: a.example\r\nX-N: caf\xc3\xa9\r\n\r\n",
         "<H GET / 1.1 b0 cl0 ka1 up0 |Host=a.example |X-N=caf\xc3\xa9><D>", false),
    GOOD("empty value", "GET / HTTP/1.1\r\nHost: a.example\r\nX-E:\r\nX-F: \r\n\r\n",
         "<H GET / 1.1 b0 cl0 ka1 up0 |Host=a.example |X-E= |X-F=><D>", false),
};

START_TEST(test_good_request)
{
    const struct good_case *c = &good_requests[_i];
    struct rec r;
    static const size_t steps[] = {0, 1, 2, 7};

    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        for (int pm = 0; pm < 8; pm += 7) {
            int st = run(HTTP1_REQUEST, NULL, c->in, c->len, steps[s], pm, false, &r);

            ck_assert_msg(st == 0, "%s step %zu: status %d", c->name, steps[s], st);
            ck_assert_msg(strcmp(r.log, c->log) == 0, "%s step %zu pause %d:\n got %s\nwant %s",
                          c->name, steps[s], pm, r.log, c->log);
            ck_assert_msg(r.stopped == c->stopped, "%s step %zu: stopped %d", c->name, steps[s],
                          r.stopped);
        }
    }
}
END_TEST

/* Pausing: http1_feed returns the bytes up to the pause, a later call continues. */
START_TEST(test_pause_resume)
{
    static const char in[] = "POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 3\r\n\r\nabc"
                             "GET /2 HTTP/1.1\r\nHost: a.example\r\n\r\n";
    size_t len = sizeof(in) - 1, head1 = 55;
    char *c = guard_copy(in, len);
    struct rec r = {.kind = HTTP1_REQUEST, .pause_mask = 7};
    struct http1_parser *p = http1_parser_new(HTTP1_REQUEST, &rec_cb, &r);
    ssize_t k;

    k = http1_feed(p, c, len);
    ck_assert_int_eq(k, (ssize_t)head1);
    ck_assert_int_eq(r.heads, 1);
    ck_assert(http1_in_message(p));
    k = http1_feed(p, c + head1, len - head1);
    ck_assert_int_eq(k, 3); /* the body, then pause in on_body */
    ck_assert_int_eq(r.dones, 0);
    k = http1_feed(p, c + head1 + 3, len - head1 - 3);
    ck_assert_int_eq(k, 0); /* on_done pauses without consuming */
    ck_assert_int_eq(r.dones, 1);
    ck_assert(!http1_in_message(p));
    http1_parser_reset(p);
    k = http1_feed(p, c + head1 + 3, len - head1 - 3);
    ck_assert_int_eq(k, (ssize_t)(len - head1 - 3));
    ck_assert_int_eq(r.heads, 2);
    ck_assert_int_eq(r.dones, 1);
    /* a body-less message paused in on_head completes on a zero-length feed */
    ck_assert_int_eq(http1_feed(p, c + len, 0), 0);
    ck_assert_int_eq(r.dones, 2);
    http1_parser_free(&p);
    guard_free(c, len);
}
END_TEST

/* After an upgrade the parser stops; reset (the upgrade was refused) resumes, close does not. */
START_TEST(test_reset_after_upgrade_and_close)
{
    static const char up[] =
        "GET /ws HTTP/1.1\r\nHost: a.example\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\n\r\nGET /2 HTTP/1.1\r\nHost: a.example\r\n\r\n";
    static const char cl[] = "GET / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n"
                             "GET /2 HTTP/1.1\r\nHost: a.example\r\n\r\n";
    size_t first = 78;
    struct rec r = {.kind = HTTP1_REQUEST};
    struct http1_parser *p = http1_parser_new(HTTP1_REQUEST, &rec_cb, &r);
    char *c = guard_copy(up, sizeof(up) - 1);

    ck_assert_int_eq(http1_feed(p, c, sizeof(up) - 1), (ssize_t)first);
    ck_assert_int_eq(http1_feed(p, c + first, sizeof(up) - 1 - first), 0);
    http1_parser_reset(p);
    ck_assert_int_eq(http1_feed(p, c + first, sizeof(up) - 1 - first),
                     (ssize_t)(sizeof(up) - 1 - first));
    ck_assert_int_eq(r.dones, 2);
    guard_free(c, sizeof(up) - 1);
    http1_parser_free(&p);

    memset(&r, 0, sizeof(r));
    p = http1_parser_new(HTTP1_REQUEST, &rec_cb, &r);
    c = guard_copy(cl, sizeof(cl) - 1);
    first = 54;
    ck_assert_int_eq(http1_feed(p, c, sizeof(cl) - 1), (ssize_t)first);
    http1_parser_reset(p);
    ck_assert_int_eq(http1_feed(p, c + first, sizeof(cl) - 1 - first), 0);
    ck_assert_int_eq(http1_feed_eof(p), 0);
    ck_assert_int_eq(r.heads, 1);
    guard_free(c, sizeof(cl) - 1);
    http1_parser_free(&p);
}
END_TEST

static int abort_head(void *arg, struct http1_msg *m)
{
    return -1;
}

START_TEST(test_callback_abort_and_sticky_error)
{
    static const char in[] = "GET / HTTP/1.1\r\nHost: a.example\r\n\r\n";
    struct http1_callbacks cb = {abort_head, NULL, NULL, NULL};
    struct http1_parser *p = http1_parser_new(HTTP1_REQUEST, &cb, NULL);
    const char *why = NULL;

    ck_assert_int_eq(http1_feed(p, in, sizeof(in) - 1), -1);
    ck_assert_int_eq(http1_error(p, &why), 500);
    ck_assert_ptr_nonnull(why);
    http1_parser_reset(p);
    ck_assert_int_eq(http1_feed(p, in, sizeof(in) - 1), -1);
    http1_parser_free(&p);
}
END_TEST

START_TEST(test_request_eof)
{
    struct rec r;

    ck_assert_int_eq(
        run(HTTP1_REQUEST, NULL, S("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n"), 0, 0, true, &r),
        0);
    ck_assert_int_eq(run(HTTP1_REQUEST, NULL, S("GET / HTTP/1.1\r\nHost: a.exa"), 0, 0, true, &r),
                     400);
    ck_assert_int_eq(run(HTTP1_REQUEST, NULL,
                         S("POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: 9\r\n\r\nabc"), 0,
                         0, true, &r),
                     400);
    ck_assert_int_eq(r.dones, 0);
}
END_TEST

/* ---- responses ---- */

struct resp_case {
    const char *name;
    const char *method;
    const char *in;
    size_t len;
    bool eof;
    int status;
    const char *log;
    bool stopped;
};

#define RESP(name, m, in, eof, st, log, stopped)                                                   \
    {                                                                                              \
        name, m, in, sizeof(in) - 1, eof, st, log, stopped                                         \
    }

static const struct resp_case responses[] = {
    RESP("200 with Content-Length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", false,
         0, "<H 200 [OK] 1.1 b1 cl2 ka1 up0 |Content-Length=2>hi<D>", false),
    RESP(
        "HEAD: no body despite Content-Length", "HEAD",
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        false, 0,
        "<H 200 [OK] 1.1 b0 cl10 ka1 up0 |Content-Length=10><D>"
        "<H 200 [OK] 1.1 b1 cl0 ka1 up0 |Content-Length=0><D>",
        false),
    RESP("a method that begins with HEAD is not HEAD: a body", "HEADER",
         "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", false, 0,
         "<H 200 [OK] 1.1 b1 cl2 ka1 up0 |Content-Length=2>hi<D>", false),
    RESP("head in lower case is not HEAD (methods are case-sensitive): a body", "head",
         "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", false, 0,
         "<H 200 [OK] 1.1 b1 cl2 ka1 up0 |Content-Length=2>hi<D>", false),
    RESP("a 200 to CONNECTX is no tunnel", "CONNECTX",
         "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, 0,
         "<H 200 [OK] 1.1 b1 cl0 ka1 up0 |Content-Length=0><D>", false),
    RESP("204: no body", "GET", "HTTP/1.1 204 No Content\r\n\r\n", false, 0,
         "<H 204 [No Content] 1.1 b0 cl0 ka1 up0><D>", false),
    RESP("304: no body", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", false, 0,
         "<H 304 [Not Modified] 1.1 b0 cl5 ka1 up0 |Content-Length=5><D>", false),
    RESP(
        "chunked", "GET",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\ndata\r\n0\r\nX-T: 1\r\n\r\n",
        false, 0, "<H 200 [OK] 1.1 b2 cl0 ka1 up0 |Transfer-Encoding=chunked>data<D>", false),
    RESP("EOF-delimited", "GET", "HTTP/1.1 200 OK\r\nServer: x\r\n\r\nuntil the end", true, 0,
         "<H 200 [OK] 1.1 b3 cl0 ka0 up0 |Server=x>until the end<D>", false),
    RESP("100-continue then 200", "POST",
         "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx", false, 0,
         "<H 100 [Continue] 1.1 b0 cl0 ka1 up0><H 200 [OK] 1.1 b1 cl1 ka1 up0 "
         "|Content-Length=1>x<D>",
         false),
    RESP("103 then 204", "GET",
         "HTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 204 \r\n\r\n", false, 0,
         "<H 103 [Early Hints] 1.1 b0 cl0 ka1 up0 |Link=</s>><H 204 [] 1.1 b0 cl0 ka1 up0><D>",
         false),
    RESP("101 stops parsing", "GET",
         "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: "
         "Upgrade\r\n\r\n\x81\x00",
         false, 0,
         "<H 101 [Switching Protocols] 1.1 b0 cl0 ka1 up1 |Upgrade=websocket "
         "|Connection=Upgrade><D>",
         true),
    RESP("2xx to CONNECT stops parsing", "CONNECT",
         "HTTP/1.1 200 Connection established\r\n\r\n\x16", false, 0,
         "<H 200 [Connection established] 1.1 b0 cl0 ka1 up1><D>", true),
    RESP("status without reason", "GET", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", false, 0,
         "<H 200 [] 1.1 b1 cl0 ka1 up0 |Content-Length=0><D>", false),
    RESP("HTTP/1.0 response closes", "GET", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nxyz",
         false, 0, "<H 200 [OK] 1.0 b1 cl1 ka0 up0 |Content-Length=1>x<D>", true),
    RESP("duplicate Content-Length", "GET",
         "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", false, 502, "",
         false),
    RESP("CL and TE", "GET",
         "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", false, 502,
         "", false),
    RESP("bad CL", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n", false, 502, "", false),
    RESP("conflicting CL", "GET",
         "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", false, 502, "",
         false),
    RESP("TE gzip", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", false,
         502, "", false),
    RESP("bare LF", "GET", "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", false, 502, "", false),
    RESP("bare CR", "GET", "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", false, 502, "", false),
    RESP("NUL in value", "GET", "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n", false, 502, "", false),
    RESP("obs-fold", "GET", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", false, 502, "", false),
    RESP("HTTP/2 status line", "GET", "HTTP/2 200 OK\r\n\r\n", false, 502, "", false),
    RESP("status 600", "GET", "HTTP/1.1 600 X\r\n\r\n", false, 502, "", false),
    RESP("status 2 digits", "GET", "HTTP/1.1 20 X\r\n\r\n", false, 502, "", false),
    RESP("cut short", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", true, 502,
         "<H 200 [OK] 1.1 b1 cl5 ka1 up0 |Content-Length=5>ab", false),
    RESP("bad chunk", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nx\r\n", false,
         502, "<H 200 [OK] 1.1 b2 cl0 ka1 up0 |Transfer-Encoding=chunked>", false),
};

START_TEST(test_response)
{
    const struct resp_case *c = &responses[_i];
    struct rec r;

    for (size_t step = 0; step <= 1; step++) {
        int st = run(HTTP1_RESPONSE, c->method, c->in, c->len, step, 0, c->eof, &r);

        ck_assert_msg(st == c->status, "%s: status %d, want %d", c->name, st, c->status);
        ck_assert_msg(strcmp(r.log, c->log) == 0, "%s step %zu:\n got %s\nwant %s", c->name, step,
                      r.log, c->log);
        ck_assert_msg(r.stopped == c->stopped, "%s: stopped %d", c->name, r.stopped);
    }
}
END_TEST

/* The request method is forgotten once its final response is complete. */
START_TEST(test_response_method_reset)
{
    static const char in[] = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n"
                             "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
    struct rec r;

    ck_assert_int_eq(run(HTTP1_RESPONSE, "HEAD", S(in), 0, 0, false, &r), 0);
    ck_assert_str_eq(r.log, "<H 200 [OK] 1.1 b0 cl1 ka1 up0 |Content-Length=1><D>"
                            "<H 200 [OK] 1.1 b1 cl1 ka1 up0 |Content-Length=1>x<D>");
}
END_TEST

/* ---- serialisers ---- */

static struct http_head *make_head(const char *method, const char *target)
{
    static struct http_head h;

    httphead_init(&h);
    if (method != NULL)
        ck_assert_int_eq(
            httphead_set_request_line(&h, method, strlen(method), target, strlen(target), 1), 0);
    return &h;
}

static void add(struct http_head *h, const char *n, const char *v)
{
    ck_assert_int_eq(httphead_add(h, n, strlen(n), v, strlen(v)), 0);
}

static void expect_buf(struct evbuffer *b, const char *want)
{
    size_t n = evbuffer_get_length(b);
    char *got = calloc(1, n + 1);

    evbuffer_copyout(b, got, n);
    ck_assert_msg(n == strlen(want) && memcmp(got, want, n) == 0, "got:\n%s\nwant:\n%s", got, want);
    free(got);
    evbuffer_drain(b, n);
}

START_TEST(test_write_request_head)
{
    struct evbuffer *b = evbuffer_new();
    struct http_head *h = make_head("POST", "/v1/x?y=1");

    add(h, "Host", "api.example");
    add(h, "content-length", "99");
    add(h, "X-Empty", "");
    add(h, "Transfer-Encoding", "chunked");
    ck_assert_int_eq(http1_write_request_head(b, h, HTTP1_BODY_LENGTH, 12), 0);
    expect_buf(b, "POST /v1/x?y=1 HTTP/1.1\r\nHost: api.example\r\nX-Empty:\r\n"
                  "Content-Length: 12\r\n\r\n");
    ck_assert_int_eq(http1_write_request_head(b, h, HTTP1_BODY_CHUNKED, 0), 0);
    expect_buf(b, "POST /v1/x?y=1 HTTP/1.1\r\nHost: api.example\r\nX-Empty:\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n");
    ck_assert_int_eq(http1_write_request_head(b, h, HTTP1_BODY_NONE, 0), 0);
    expect_buf(b, "POST /v1/x?y=1 HTTP/1.1\r\nHost: api.example\r\nX-Empty:\r\n\r\n");
    ck_assert_int_eq(http1_write_request_head(b, h, HTTP1_BODY_EOF, 0), -1);
    /* a value that would forge a header is refused, nothing written */
    add(h, "X-Bad", "a");
    h->fields[h->nfields - 1].value = "a\r\nInjected: 1";
    h->fields[h->nfields - 1].value_len = 15;
    ck_assert_int_eq(http1_write_request_head(b, h, HTTP1_BODY_NONE, 0), -1);
    ck_assert_uint_eq(evbuffer_get_length(b), 0);
    httphead_reset(h);
    h = make_head("GET", "/a");
    h->target = "/a b";
    h->target_len = 4;
    ck_assert_int_eq(http1_write_request_head(b, h, HTTP1_BODY_NONE, 0), -1);
    httphead_reset(h);
    evbuffer_free(b);
}
END_TEST

START_TEST(test_write_response_head)
{
    struct evbuffer *b = evbuffer_new();
    struct http_head *h = make_head(NULL, NULL);

    ck_assert_int_eq(httphead_set_status_line(h, 1, 200, S("Fine")), 0);
    add(h, "Content-Type", "text/plain");
    add(h, "Connection", "keep-alive");
    ck_assert_int_eq(http1_write_response_head(b, h, HTTP1_BODY_LENGTH, 5, false), 0);
    expect_buf(b, "HTTP/1.1 200 Fine\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\n"
                  "Content-Length: 5\r\n\r\n");
    ck_assert_int_eq(http1_write_response_head(b, h, HTTP1_BODY_CHUNKED, 0, true), 0);
    expect_buf(b, "HTTP/1.1 200 Fine\r\nContent-Type: text/plain\r\n"
                  "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    ck_assert_int_eq(http1_write_response_head(b, h, HTTP1_BODY_EOF, 0, false), 0);
    expect_buf(b, "HTTP/1.1 200 Fine\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n");
    httphead_reset(h);
    ck_assert_int_eq(httphead_set_status_line(h, 0, 204, S("")), 0);
    ck_assert_int_eq(http1_write_response_head(b, h, HTTP1_BODY_LENGTH, 5, false), 0);
    expect_buf(b, "HTTP/1.1 204 No Content\r\n\r\n");
    httphead_reset(h);
    ck_assert_int_eq(httphead_set_status_line(h, 1, 299, S("")), 0);
    ck_assert_int_eq(http1_write_response_head(b, h, HTTP1_BODY_NONE, 0, false), 0);
    expect_buf(b, "HTTP/1.1 299 \r\n\r\n");
    httphead_reset(h);
    evbuffer_free(b);
}
END_TEST

START_TEST(test_write_chunks)
{
    struct evbuffer *b = evbuffer_new();
    char big[300];

    memset(big, 'z', sizeof(big));
    ck_assert_int_eq(http1_write_chunk(b, "hello", 5), 0);
    ck_assert_int_eq(http1_write_chunk(b, "", 0), 0);
    ck_assert_int_eq(http1_write_last_chunk(b), 0);
    expect_buf(b, "5\r\nhello\r\n0\r\n\r\n");
    ck_assert_int_eq(http1_write_chunk(b, big, sizeof(big)), 0);
    ck_assert_uint_eq(evbuffer_get_length(b), 3 + 2 + 300 + 2);
    ck_assert_int_eq(memcmp(evbuffer_pullup(b, 5), "12c\r\n", 5), 0);
    evbuffer_free(b);
}
END_TEST

START_TEST(test_write_error)
{
    struct evbuffer *b = evbuffer_new();

    ck_assert_int_eq(http1_write_error(b, 403, "http_request_denied", "host blocked by policy",
                                       "evil.example", true),
                     0);
    expect_buf(b, "HTTP/1.1 403 Forbidden\r\n"
                  "Proxy-Status: vaultgate; error=http_request_denied; "
                  "details=\"host blocked by policy\"\r\n"
                  "Content-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: 52\r\n"
                  "Cache-Control: no-store\r\n"
                  "Connection: close\r\n"
                  "\r\n"
                  "vaultgate: 403 host blocked by policy: evil.example\n");
    ck_assert_int_eq(http1_write_error(b, 400, "http_request_error", "bad \"quote\" \\ and\r\nCRLF",
                                       NULL, false),
                     0);
    expect_buf(b, "HTTP/1.1 400 Bad Request\r\n"
                  "Proxy-Status: vaultgate; error=http_request_error; "
                  "details=\"bad \\\"quote\\\" \\\\ and??CRLF\"\r\n"
                  "Content-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: 39\r\n"
                  "Cache-Control: no-store\r\n"
                  "\r\n"
                  "vaultgate: 400 bad \"quote\" \\ and??CRLF\n");
    /* a host that is not a valid name never reaches the output */
    ck_assert_int_eq(
        http1_write_error(b, 421, "destination_ip_unroutable", NULL, "EVIL.example\r\nX: y", false),
        0);
    expect_buf(b, "HTTP/1.1 421 Misdirected Request\r\n"
                  "Proxy-Status: vaultgate; error=destination_ip_unroutable\r\n"
                  "Content-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: 35\r\n"
                  "Cache-Control: no-store\r\n"
                  "\r\n"
                  "vaultgate: 421 Misdirected Request\n");
    evbuffer_free(b);
}
END_TEST

START_TEST(test_write_error_host_normalised)
{
    struct evbuffer *b = evbuffer_new();

    ck_assert_int_eq(http1_write_error(b, 502, "dns_error", "no address", "API.Example.", false),
                     0);
    expect_buf(b, "HTTP/1.1 502 Bad Gateway\r\n"
                  "Proxy-Status: vaultgate; error=dns_error; details=\"no address\"\r\n"
                  "Content-Type: text/plain; charset=utf-8\r\n"
                  "Content-Length: 39\r\n"
                  "Cache-Control: no-store\r\n"
                  "\r\n"
                  "vaultgate: 502 no address: api.example\n");
    ck_assert_int_eq(http1_write_error(b, 403, "Bad Type", "x", NULL, false), -1);
    ck_assert_int_eq(http1_write_error(b, 403, "a\"b", "x", NULL, false), -1);
    ck_assert_uint_eq(evbuffer_get_length(b), 0);
    evbuffer_free(b);
}
END_TEST

/* ---- hop-by-hop ---- */

START_TEST(test_strip_hop_by_hop)
{
    struct http_head *h = make_head("GET", "/");

    add(h, "Host", "a.example");
    add(h, "Connection", "X-Hop, host, Upgrade");
    add(h, "X-Hop", "1");
    add(h, "Keep-Alive", "timeout=5");
    add(h, "Proxy-Connection", "keep-alive");
    add(h, "Proxy-Authorization", "Basic eA==");
    add(h, "TE", "trailers");
    add(h, "Trailer", "X-T");
    add(h, "Content-Length", "0");
    add(h, "Transfer-Encoding", "chunked");
    add(h, "Upgrade", "websocket");
    add(h, "X-Keep", "yes");
    http1_strip_hop_by_hop(h, false);
    ck_assert_uint_eq(h->nfields, 2);
    ck_assert_str_eq(h->fields[0].name, "Host");
    ck_assert_str_eq(h->fields[1].name, "X-Keep");
    httphead_reset(h);

    h = make_head("GET", "/ws");
    add(h, "Host", "a.example");
    add(h, "Upgrade", "websocket");
    add(h, "Connection", "keep-alive, Upgrade");
    add(h, "Sec-WebSocket-Key", "k");
    http1_strip_hop_by_hop(h, true);
    ck_assert_uint_eq(h->nfields, 4);
    ck_assert_str_eq(h->fields[1].name, "Upgrade");
    ck_assert_str_eq(h->fields[3].name, "Connection");
    ck_assert_str_eq(h->fields[3].value, "upgrade");
    httphead_reset(h);
}
END_TEST

/* The head model of a parser is reused, wiped, by the next message and after a reset. */
struct reuse_rec {
    const char *arena[3];
    const void *fields[3];
    int n;
};

static int reuse_head(void *arg, struct http1_msg *m)
{
    struct reuse_rec *rr = arg;

    if (rr->n < 3) {
        rr->arena[rr->n] = m->head.arena;
        rr->fields[rr->n] = m->head.fields;
    }
    rr->n++;
    return 0;
}

START_TEST(test_parser_reuses_head)
{
    static const char two[] = "GET /a HTTP/1.1\r\nHost: a.example\r\nX-Secret: sk-ONE\r\n\r\n"
                              "GET /b HTTP/1.1\r\nHost: a.example\r\n\r\n";
    static const char third[] = "GET /c HTTP/1.1\r\nHost: b.example\r\n\r\n";
    static const struct http1_callbacks cb = {reuse_head, NULL, NULL, NULL};
    struct reuse_rec rr = {0};
    struct http1_parser *p = http1_parser_new(HTTP1_REQUEST, &cb, &rr);
    char *c = guard_copy(two, sizeof(two) - 1);

    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(http1_feed(p, c, sizeof(two) - 1), (ssize_t)(sizeof(two) - 1));
    ck_assert_int_eq(rr.n, 2);
    ck_assert_ptr_nonnull(rr.arena[0]);
    ck_assert_ptr_eq(rr.arena[1], rr.arena[0]);
    ck_assert_ptr_eq(rr.fields[1], rr.fields[0]);
    guard_free(c, sizeof(two) - 1);
    http1_parser_reset(p);
    c = guard_copy(third, sizeof(third) - 1);
    ck_assert_int_eq(http1_feed(p, c, sizeof(third) - 1), (ssize_t)(sizeof(third) - 1));
    ck_assert_int_eq(rr.n, 3);
    ck_assert_ptr_eq(rr.arena[2], rr.arena[0]);
    ck_assert_ptr_eq(rr.fields[2], rr.fields[0]);
    guard_free(c, sizeof(third) - 1);
    http1_parser_free(&p);
}
END_TEST

/* Every hop-by-hop name in any case, and names of the same lengths that are none. */
START_TEST(test_strip_hop_by_hop_names)
{
    static const char *const hop[] = {
        "connection", "KEEP-ALIVE", "proxy-connection", "Proxy-authorization",
        "te",         "TRAILER",    "content-length",   "Transfer-encoding"};
    static const char *const keep[] = {
        "Connectiox", "Keep-Alivf", "Proxy-Connectiom", "Proxy-Authorizatiom",
        "tf",         "Trailes",    "Content-Lengtg",   "Transfer-Encodinh",
        "Upgrades",   "X-Upgrad"};
    struct http_head *h = make_head("GET", "/");

    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        add(h, hop[i], "1");
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        add(h, keep[i], "1");
    add(h, "UPGRADE", "websocket");
    http1_strip_hop_by_hop(h, false);
    ck_assert_uint_eq(h->nfields, sizeof(keep) / sizeof(keep[0]));
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        ck_assert_str_eq(h->fields[i].name, keep[i]);
    httphead_reset(h);
}
END_TEST

/* ---- authority ---- */

static const struct auth_case {
    const char *in;
    int rc;
    const char *host;
    int port;
} auth_cases[] = {
    {"example.com", 0, "example.com", 0},
    {"Example.COM.", 0, "example.com", 0},
    {"example.com:443", 0, "example.com", 443},
    {"example.com:1", 0, "example.com", 1},
    {"example.com:65535", 0, "example.com", 65535},
    {"192.0.2.1:80", 0, "192.0.2.1", 80},
    {"[::1]", 0, "::1", 0},
    {"[2001:DB8::1]:8443", 0, "2001:db8::1", 8443},
    /* an IPv6 literal that embeds an IPv4 address names the IPv4 host */
    {"[::ffff:192.0.2.1]", 0, "192.0.2.1", 0},
    {"[::FFFF:C000:201]:80", 0, "192.0.2.1", 80},
    {"[::192.0.2.1]", 0, "192.0.2.1", 0},
    {"[64:ff9b::192.0.2.1]:443", 0, "192.0.2.1", 443},
    {"[64:ff9b:1:c000:2:100::]", 0, "192.0.2.1", 0},
    {"[2002:c000:201::1]:8080", 0, "192.0.2.1", 8080},
    {"::ffff:192.0.2.1", -1, NULL, 0},
    {"", -1, NULL, 0},
    {":443", -1, NULL, 0},
    {"example.com:", -1, NULL, 0},
    {"example.com:0", -1, NULL, 0},
    {"example.com:65536", -1, NULL, 0},
    {"example.com:123456", -1, NULL, 0},
    {"example.com:-1", -1, NULL, 0},
    {"example.com:44a", -1, NULL, 0},
    {"user@example.com", -1, NULL, 0},
    {"user:pw@example.com:443", -1, NULL, 0},
    {"example.com, other.com", -1, NULL, 0},
    {"example.com,other.com", -1, NULL, 0},
    {"exa mple.com", -1, NULL, 0},
    {" example.com", -1, NULL, 0},
    {"example.com ", -1, NULL, 0},
    {"exa_mple.com", -1, NULL, 0},
    {"::1", -1, NULL, 0},
    {"[::1", -1, NULL, 0},
    {"[::1]x", -1, NULL, 0},
    {"[::1]:", -1, NULL, 0},
    {"[192.0.2.1]", -1, NULL, 0},
    {"[example.com]", -1, NULL, 0},
    {"example.com/path", -1, NULL, 0},
    {"123", -1, NULL, 0},
    {"a..b", -1, NULL, 0},
    {"example.com\t", -1, NULL, 0},
    {"ex\xc3\xa4mple.com", -1, NULL, 0},
};

START_TEST(test_split_authority)
{
    const struct auth_case *c = &auth_cases[_i];
    size_t n = strlen(c->in);
    char *in = guard_copy(c->in, n);
    char host[HOSTNAME_BUFSZ] = "untouched";
    int port = -7;

    ck_assert_msg(http1_split_authority(in, n, host, sizeof(host), &port) == c->rc, "%s", c->in);
    if (c->rc == 0) {
        ck_assert_str_eq(host, c->host);
        ck_assert_int_eq(port, c->port);
    } else {
        ck_assert_str_eq(host, "untouched");
        ck_assert_int_eq(port, -7);
    }
    guard_free(in, n);
}
END_TEST

/* Trailers: handed to on_trailers (fields, whitespace trimmed) before on_done, whatever the
 * reads; filtered and written again after the last chunk. Without the callback, dropped. */
static int tr_fields_seen;
static char tr_text[512];

static int tr_cb(void *arg, struct http_head *t)
{
    size_t n = 0;

    tr_fields_seen += (int)t->nfields;
    for (size_t i = 0; i < t->nfields && n < sizeof(tr_text) - 64; i++)
        n += (size_t)snprintf(tr_text + n, sizeof(tr_text) - n, "%s=%s;", t->fields[i].name,
                              t->fields[i].value);
    return 0;
}

START_TEST(test_response_trailers)
{
    static const char in[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "3\r\nabc\r\n0\r\nX-A:  one \r\nContent-Length: 7\r\n"
                             "grpc-status: 0\r\n\r\n";
    struct http1_callbacks cb = {NULL, NULL, NULL, tr_cb};
    size_t len = sizeof(in) - 1;

    for (size_t cut = 0; cut <= len; cut++) {
        struct http1_parser *p = http1_parser_new(HTTP1_RESPONSE, &cb, NULL);
        char *g = guard_copy(in, len);
        ssize_t a, b;

        tr_fields_seen = 0;
        tr_text[0] = '\0';
        a = http1_feed(p, g, cut);
        ck_assert_int_ge(a, 0);
        b = http1_feed(p, g + a, len - (size_t)a);
        ck_assert_int_ge(b, 0);
        while ((size_t)(a + b) < len && b >= 0) {
            ssize_t c = http1_feed(p, g + a + b, len - (size_t)(a + b));

            ck_assert_int_ge(c, 0);
            b += c;
            if (c == 0)
                break;
        }
        ck_assert_msg(tr_fields_seen == 3, "cut %zu: %d fields", cut, tr_fields_seen);
        ck_assert_str_eq(tr_text, "X-A=one;Content-Length=7;grpc-status=0;");
        guard_free(g, len);
        http1_parser_free(&p);
    }
    {
        struct http_head t;
        struct evbuffer *out = evbuffer_new();

        httphead_init(&t);
        httphead_add(&t, "X-A", 3, "one", 3);
        httphead_add(&t, "Content-Length", 14, "7", 1);
        httphead_add(&t, "Host", 4, "x", 1);
        ck_assert_int_eq(http1_write_last_chunk_trailers(out, &t), 0);
        ck_assert_uint_eq(evbuffer_get_length(out), 15);
        ck_assert_int_eq(memcmp(evbuffer_pullup(out, -1), "0\r\nX-A: one\r\n\r\n", 15), 0);
        httphead_reset(&t);
        evbuffer_free(out);
    }
}
END_TEST

Suite *suite_http1(void);

Suite *suite_http1(void)
{
    Suite *s = suite_create("http1");
    TCase *tc = tcase_create("request");

    tcase_add_loop_test(tc, test_bad_request, 0, sizeof(bad_requests) / sizeof(bad_requests[0]));
    tcase_add_loop_test(tc, test_good_request, 0, sizeof(good_requests) / sizeof(good_requests[0]));
    tcase_add_test(tc, test_caps);
    tcase_add_test(tc, test_field_bytes_every_position);
    tcase_add_test(tc, test_pause_resume);
    tcase_add_test(tc, test_callback_abort_and_sticky_error);
    tcase_add_test(tc, test_reset_after_upgrade_and_close);
    tcase_add_test(tc, test_request_eof);
    suite_add_tcase(s, tc);
    tc = tcase_create("response");
    tcase_add_loop_test(tc, test_response, 0, sizeof(responses) / sizeof(responses[0]));
    tcase_add_test(tc, test_response_method_reset);
    tcase_add_test(tc, test_response_trailers);
    suite_add_tcase(s, tc);
    tc = tcase_create("write");
    tcase_add_test(tc, test_write_request_head);
    tcase_add_test(tc, test_write_response_head);
    tcase_add_test(tc, test_write_chunks);
    tcase_add_test(tc, test_write_error);
    tcase_add_test(tc, test_write_error_host_normalised);
    tcase_add_test(tc, test_strip_hop_by_hop);
    tcase_add_test(tc, test_strip_hop_by_hop_names);
    tcase_add_test(tc, test_parser_reuses_head);
    tcase_add_loop_test(tc, test_split_authority, 0, sizeof(auth_cases) / sizeof(auth_cases[0]));
    suite_add_tcase(s, tc);
    return s;
}
