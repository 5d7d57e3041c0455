/*
 * http1_body.c - de-framing of HTTP/1.x bodies for the parser of http1.c: a Content-Length
 * counter, close-delimited bodies, and a chunked decoder that accepts exactly RFC 9112's
 * grammar (chunk extensions capped at VG_CHUNK_EXT_MAX per line, trailers checked against the
 * head caps, then handed to on_trailers or dropped). Body bytes go to on_body as they arrive;
 * nothing is buffered but a trailer section for on_trailers. The error and callback-result
 * helpers of both files are here, in the file http1.c calls, so the two call one way.
 */
#include "http/http1.h"
#include "http/http1_int.h"

#include "common/caps.h"
#include "common/pct.h"

#include <stdlib.h>
#include <string.h>

/* The parser's two ways out of a step, shared with http1.c (which calls this file, never the
 * other way round). */
int http1_fail(struct http1_parser *p, int status, const char *reason)
{
    if (p->kind == HTTP1_RESPONSE)
        status = 502;
    p->err_status = status;
    p->err_reason = reason;
    p->state = ST_ERROR;
    return STEP_ERR;
}

/* Callback results: 0 go on, 1 (any positive) pause, negative abort. */
int http1_cb_result(struct http1_parser *p, int rc)
{
    if (rc < 0) {
        p->err_status = 500;
        p->err_reason = "aborted by the caller";
        p->state = ST_ERROR;
        return STEP_ERR;
    }
    return rc > 0 ? STEP_PAUSE : STEP_CONT;
}

static int deliver(struct http1_parser *p, const char *data, size_t n)
{
    return http1_cb_result(p, p->cb.on_body ? p->cb.on_body(p->arg, data, n) : 0);
}

int http1_finish_message(struct http1_parser *p)
{
    const struct http1_msg *m = &p->msg;

    p->in_msg = false;
    p->interim = false;
    if (p->kind == HTTP1_RESPONSE) {
        p->req_head = false;
        p->req_conn = false;
    }
    if (m->upgrade)
        p->state = ST_UPGRADED;
    else if (!m->keep_alive)
        p->state = ST_CLOSED;
    else
        p->state = ST_HEAD;
    return http1_cb_result(p, p->cb.on_done ? p->cb.on_done(p->arg) : 0);
}

int http1_feed_length(struct http1_parser *p, const char *data, size_t len, size_t *pos)
{
    size_t n = len - *pos;

    if (n == 0)
        return STEP_MORE;
    if (n > p->remaining)
        n = (size_t)p->remaining;
    p->remaining -= n;
    *pos += n;
    if (p->remaining == 0)
        p->state = ST_DONE_PENDING;
    return deliver(p, data + *pos - n, n);
}

int http1_feed_eof_body(struct http1_parser *p, const char *data, size_t len, size_t *pos)
{
    size_t n = len - *pos;

    if (n == 0)
        return STEP_MORE;
    *pos = len;
    return deliver(p, data + len - n, n);
}

static bool ext_accepting(enum ext_state e)
{
    return e == EXT_START || e == EXT_NAME || e == EXT_TOKVAL || e == EXT_AFTER_Q;
}

/* One byte of a chunk extension; -1 when the grammar does not allow it. */
static int ext_step(struct http1_parser *p, unsigned char c)
{
    bool ws = is_ows(c);

    switch (p->ext) {
    case EXT_START:
    case EXT_BWS:
    case EXT_AFTER_VAL:
    case EXT_AFTER_Q:
        if (c == ';')
            p->ext = EXT_SEMI;
        else if (ws)
            p->ext = p->ext == EXT_START ? EXT_BWS : (p->ext == EXT_BWS ? EXT_BWS : EXT_AFTER_VAL);
        else
            return -1;
        return 0;
    case EXT_SEMI:
        if (is_tchar(c))
            p->ext = EXT_NAME;
        else if (!ws)
            return -1;
        return 0;
    case EXT_NAME:
    case EXT_NAME_BWS:
        if (c == '=')
            p->ext = EXT_EQ;
        else if (c == ';')
            p->ext = EXT_SEMI;
        else if (ws)
            p->ext = EXT_NAME_BWS;
        else if (!is_tchar(c) || p->ext == EXT_NAME_BWS)
            return -1;
        return 0;
    case EXT_EQ:
        if (c == '"')
            p->ext = EXT_QSTR;
        else if (is_tchar(c))
            p->ext = EXT_TOKVAL;
        else if (!ws)
            return -1;
        return 0;
    case EXT_TOKVAL:
        if (c == ';')
            p->ext = EXT_SEMI;
        else if (ws)
            p->ext = EXT_AFTER_VAL;
        else if (!is_tchar(c))
            return -1;
        return 0;
    case EXT_QSTR:
        if (c == '"')
            p->ext = EXT_AFTER_Q;
        else if (c == '\\')
            p->ext = EXT_QESC;
        else if (!is_value_byte(c))
            return -1;
        return 0;
    case EXT_QESC:
        if (!is_value_byte(c))
            return -1;
        p->ext = EXT_QSTR;
        return 0;
    }
    return -1;
}

/* Trailer section: field lines checked like head lines, then dropped. */
/* Keeps one byte of the trailer section for on_trailers. 0 or -1. */
static int trailer_keep(struct http1_parser *p, unsigned char c)
{
    if (p->tlen == p->tcap) {
        uint32_t cap = p->tcap == 0 ? 256 : p->tcap * 2;
        char *nb = malloc(cap);

        if (nb == NULL)
            return -1;
        if (p->tbuf != NULL) {
            memcpy(nb, p->tbuf, p->tlen);
            explicit_bzero(p->tbuf, p->tcap);
            free(p->tbuf);
        }
        p->tbuf = nb;
        p->tcap = cap;
    }
    p->tbuf[p->tlen++] = (char)c;
    return 0;
}

/* The kept trailer section (validated byte by byte) as fields of p->trailers. 0 or -1. */
static int trailer_fields(struct http1_parser *p)
{
    const char *s = p->tbuf, *end = p->tbuf + p->tlen;

    httphead_reset(&p->trailers);
    while (s < end) {
        const char *eol = memchr(s, '\r', (size_t)(end - s)), *colon, *v, *ve;

        if (eol == NULL || eol == s)
            break;
        colon = memchr(s, ':', (size_t)(eol - s));
        if (colon == NULL)
            return -1;
        for (v = colon + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
            ;
        for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
            ;
        if (httphead_add(&p->trailers, s, (size_t)(colon - s), v, (size_t)(ve - v)) < 0)
            return -1;
        s = eol + 2;
    }
    return 0;
}

static int trailer_step(struct http1_parser *p, unsigned char c)
{
    if (++p->tr_bytes > VG_HEAD_MAX_BYTES)
        return http1_fail(p, 431, "trailer section too large");
    if (p->cb.on_trailers != NULL && trailer_keep(p, c) < 0)
        return http1_fail(p, 500, "out of memory");
    switch (p->state) {
    case ST_TRAILER_START:
        if (c == '\r') {
            p->state = ST_TRAILER_END_LF;
        } else if (is_tchar(c) && (c != '_' || p->kind == HTTP1_RESPONSE)) {
            if (++p->tr_fields > VG_HEAD_MAX_FIELDS)
                return http1_fail(p, 431, "too many trailer fields");
            p->state = ST_TRAILER_NAME;
        } else {
            return http1_fail(p, 400, "bad trailer line");
        }
        return 0;
    case ST_TRAILER_NAME:
        if (c == ':')
            p->state = ST_TRAILER_VALUE;
        else if (!is_tchar(c) || (c == '_' && p->kind == HTTP1_REQUEST))
            return http1_fail(p, 400, "bad trailer name");
        return 0;
    case ST_TRAILER_VALUE:
        if (c == '\r')
            p->state = ST_TRAILER_LF;
        else if (c == '\n')
            return http1_fail(p, 400, "LF without CR in trailer");
        else if (!is_value_byte(c))
            return http1_fail(p, 400, "control character in trailer");
        return 0;
    case ST_TRAILER_LF:
        if (c != '\n')
            return http1_fail(p, 400, "CR without LF in trailer");
        p->state = ST_TRAILER_START;
        return 0;
    case ST_TRAILER_END_LF:
        if (c != '\n')
            return http1_fail(p, 400, "CR without LF in trailer");
        p->state = ST_DONE_PENDING;
        return 0;
    default:
        return http1_fail(p, 400, "internal state");
    }
}

/* Chunk-size line: 1*16HEXDIG [chunk-ext] CRLF. */
static int chunk_line_step(struct http1_parser *p, unsigned char c)
{
    int v;

    switch (p->state) {
    case ST_CHUNK_SIZE:
        v = pct_hexval(c);
        if (v >= 0) {
            if (++p->ndigits > MAX_CHUNK_DIGITS)
                return http1_fail(p, 400, "chunk size too long");
            p->remaining = (p->remaining << 4) | (uint64_t)v;
            return 0;
        }
        if (p->ndigits == 0)
            return http1_fail(p, 400, "bad chunk size");
        p->state = ST_CHUNK_EXT;
        p->ext = EXT_START;
        p->ext_len = 0;
        /* c is the first byte after the digits */
        __attribute__((fallthrough));
    case ST_CHUNK_EXT:
        if (c == '\r') {
            if (!ext_accepting(p->ext))
                return http1_fail(p, 400, "bad chunk extension");
            p->state = ST_CHUNK_SIZE_LF;
            return 0;
        }
        if (c == '\n')
            return http1_fail(p, 400, "LF without CR in chunk line");
        if (++p->ext_len > VG_CHUNK_EXT_MAX)
            return http1_fail(p, 400, "chunk extensions too long");
        if (ext_step(p, c) < 0)
            return http1_fail(p, 400, "bad chunk extension");
        return 0;
    case ST_CHUNK_SIZE_LF:
        if (c != '\n')
            return http1_fail(p, 400, "CR without LF in chunk line");
        p->ndigits = 0;
        p->state = p->remaining == 0 ? ST_TRAILER_START : ST_CHUNK_DATA;
        return 0;
    case ST_CHUNK_DATA_CR:
        if (c != '\r')
            return http1_fail(p, 400, "chunk data not followed by CRLF");
        p->state = ST_CHUNK_DATA_LF;
        return 0;
    case ST_CHUNK_DATA_LF:
        if (c != '\n')
            return http1_fail(p, 400, "chunk data not followed by CRLF");
        p->state = ST_CHUNK_SIZE;
        p->remaining = 0;
        return 0;
    default:
        return trailer_step(p, c);
    }
}

int http1_feed_chunked(struct http1_parser *p, const char *data, size_t len, size_t *pos)
{
    while (*pos < len) {
        if (p->state == ST_CHUNK_DATA) {
            size_t n = len - *pos;

            if (n > p->remaining)
                n = (size_t)p->remaining;
            p->remaining -= n;
            *pos += n;
            if (p->remaining == 0)
                p->state = ST_CHUNK_DATA_CR;
            return deliver(p, data + *pos - n, n);
        }
        if (chunk_line_step(p, (unsigned char)data[(*pos)++]) < 0)
            return STEP_ERR;
        if (p->state == ST_DONE_PENDING && p->tr_fields > 0 && p->cb.on_trailers != NULL) {
            if (trailer_fields(p) < 0)
                return http1_fail(p, 500, "out of memory");
            return http1_cb_result(p, p->cb.on_trailers(p->arg, &p->trailers));
        }
        if (p->state == ST_DONE_PENDING || p->state == ST_CHUNK_DATA)
            return STEP_CONT;
    }
    return STEP_MORE;
}
