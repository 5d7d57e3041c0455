/*
 * http1_int.h - private to http/http1.c (parser) and http/http1_write.c (serialisers): the
 * byte classes and the few helpers both sides check bytes with, so that what the writer accepts
 * is decided by the same table as what the parser accepts. No other module includes this.
 */
#ifndef VG_HTTP1_INT_H
#define VG_HTTP1_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <strings.h>

#include "http/http1.h"

/* Byte classes, one table lookup per byte on the hot paths. */
#define C_TCHAR 1 /* RFC 9110 tchar */
#define C_TNAME 2 /* tchar except '_' (request field names) */
#define C_VALUE 4 /* field-value byte: HTAB, SP, VCHAR, obs-text; no other control, no DEL */
#define C_VCHAR 8 /* visible ASCII 0x21-0x7e */

/* Defined in http1.c. */
extern const uint8_t http1_cls[256];

enum http1_state {
    ST_HEAD = 0,     /* waiting for, or inside, a head */
    ST_DONE_PENDING, /* head or body complete, on_done still to be called */
    ST_BODY_LENGTH,
    ST_BODY_EOF,
    ST_CHUNK_SIZE,
    ST_CHUNK_EXT,
    ST_CHUNK_SIZE_LF,
    ST_CHUNK_DATA,
    ST_CHUNK_DATA_CR,
    ST_CHUNK_DATA_LF,
    ST_TRAILER_START,
    ST_TRAILER_NAME,
    ST_TRAILER_VALUE,
    ST_TRAILER_LF,
    ST_TRAILER_END_LF,
    ST_UPGRADED, /* upgrade or CONNECT done: the bytes after are not HTTP; reset resumes */
    ST_CLOSED,   /* a message that ends the connection is done: nothing more is parsed */
    ST_ERROR,
};

/* Chunk extension grammar (RFC 9112 §7.1.1) as a small state machine. */
enum ext_state {
    EXT_START = 0, /* right after the size digits (accepting) */
    EXT_BWS,       /* whitespace after the size, ';' must follow */
    EXT_SEMI,      /* after ';' */
    EXT_NAME,      /* in a name (accepting) */
    EXT_NAME_BWS,  /* whitespace after a name */
    EXT_EQ,        /* after '=' */
    EXT_TOKVAL,    /* in a token value (accepting) */
    EXT_QSTR,      /* in a quoted value */
    EXT_QESC,      /* after a backslash in a quoted value */
    EXT_AFTER_Q,   /* after the closing quote (accepting) */
    EXT_AFTER_VAL, /* whitespace after a value */
};

/* Results of the feeding steps. */
enum step {
    STEP_ERR = -1,
    STEP_MORE = 0, /* all input used, more is needed */
    STEP_CONT,     /* state changed, go on */
    STEP_PAUSE,    /* a callback asked to pause */
};

#define MAX_CHUNK_DIGITS 16

struct http1_parser {
    enum http1_kind kind;
    enum http1_state state;
    struct http1_callbacks cb;
    void *arg;
    struct http1_msg msg;
    /* head accumulation, used only when a head spans reads */
    char *buf;
    uint32_t blen, bcap;
    uint32_t line_start; /* offset in buf of the line being received */
    uint32_t lead;       /* bytes of empty lines before the start line */
    uint32_t nlines;     /* start line + field lines so far */
    /* body */
    uint64_t remaining;
    uint32_t ndigits;
    uint32_t ext_len;
    enum ext_state ext;
    uint32_t tr_bytes, tr_fields;
    char *tbuf; /* the raw trailer section, kept only when on_trailers is set */
    uint32_t tlen, tcap;
    struct http_head trailers;
    bool in_msg;
    bool interim;  /* responses: a 1xx was seen, the final response is still due */
    bool req_head; /* responses: answering HEAD */
    bool req_conn; /* responses: answering CONNECT */
    int err_status;
    const char *err_reason;
};

/* http1_body.c: the parser's error and callback-result helpers (used by http1.c too) and the
 * body states (ST_DONE_PENDING up to ST_TRAILER_END_LF) */
int http1_fail(struct http1_parser *p, int status, const char *reason);
int http1_cb_result(struct http1_parser *p, int rc);
int http1_finish_message(struct http1_parser *p);
int http1_feed_length(struct http1_parser *p, const char *data, size_t len, size_t *pos);
int http1_feed_eof_body(struct http1_parser *p, const char *data, size_t len, size_t *pos);
int http1_feed_chunked(struct http1_parser *p, const char *data, size_t len, size_t *pos);

static inline bool is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* Length of the run of bytes of class mask at the start of s: four bytes per step while all
 * four are of the class (names and values are mostly long runs), then one by one. */
static inline size_t span(const char *s, size_t n, uint8_t mask)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;

    while (i + 4 <= n && (http1_cls[u[i]] & http1_cls[u[i + 1]] & http1_cls[u[i + 2]] &
                          http1_cls[u[i + 3]] & mask) == mask)
        i += 4;
    while (i < n && (http1_cls[u[i]] & mask))
        i++;
    return i;
}

static inline bool is_tchar(unsigned char c)
{
    return http1_cls[c] & C_TCHAR;
}

static inline bool is_value_byte(unsigned char c)
{
    return http1_cls[c] & C_VALUE;
}

static inline bool all_vchar(const char *s, size_t n)
{
    return span(s, n, C_VCHAR) == n;
}

static inline bool all_tchar(const char *s, size_t n)
{
    return span(s, n, C_TCHAR) == n;
}

static inline bool name_is(const char *s, size_t n, const char *lit, size_t litlen)
{
    return n == litlen && strncasecmp(s, lit, n) == 0;
}

#define NAME_IS(s, n, lit) name_is((s), (n), (lit), sizeof(lit) - 1)

#endif
