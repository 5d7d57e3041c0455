/*
 * http1.h - strict HTTP/1.x message parsing and serialising for the proxy (SPEC §4).
 *
 * A parser turns bytes from one side of a connection into a validated struct http_head, then
 * de-framed body bytes, then "done". Request parsing applies the raw-byte rules of SPEC §4 on
 * top of llhttp's strict mode; nothing of the client's head or chunk lines is ever forwarded:
 * the caller serialises a new head with http1_write_request_head() and re-frames the body.
 */
#ifndef VG_HTTP1_H
#define VG_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <event2/buffer.h>

#include "policy/httphead.h"

enum http1_kind {
    HTTP1_REQUEST = 0,
    HTTP1_RESPONSE,
};

enum http1_body {
    HTTP1_BODY_NONE = 0, /* no body */
    HTTP1_BODY_LENGTH,   /* Content-Length */
    HTTP1_BODY_CHUNKED,  /* Transfer-Encoding: chunked */
    HTTP1_BODY_EOF,      /* responses only: body runs until the upstream closes */
};

/*
 * One parsed message head with its framing; valid from on_head until the next message.
 * Requests: CONNECT sets upgrade (the bytes after it are a tunnel); the target is kept as
 * received (origin-, absolute-, authority- or asterisk-form, each validated). Responses to HEAD
 * and 304s have body NONE but content_length holds a Content-Length they carried, so the caller
 * can repeat it with http1_write_response_head(..., HTTP1_BODY_LENGTH, content_length, ...).
 */
struct http1_msg {
    struct http_head head;
    enum http1_body body;
    uint64_t content_length; /* HTTP1_BODY_LENGTH only */
    bool keep_alive;         /* the connection may carry another message after this one */
    bool upgrade; /* request: carries Upgrade (+ Connection: upgrade) naming a protocol other
                   * than h2c, or CONNECT; response: 101 */
};

/*
 * Callbacks return 0 to go on, 1 to pause (http1_feed returns right there), -1 to abort.
 * After a pause call http1_feed again with the bytes not yet consumed, even when there are none
 * left (len 0): a message without body paused in on_head gets its on_done from that call.
 * Responses: each 1xx interim response gets an on_head (body NONE) and no on_done; the final
 * response follows with on_head ... on_done.
 */
struct http1_callbacks {
    int (*on_head)(void *arg, struct http1_msg *msg);
    int (*on_body)(void *arg, const char *data, size_t len); /* de-framed body bytes */
    int (*on_done)(void *arg);                               /* message complete */
    /* The trailer fields of a chunked body, when it had any, right before on_done (valid until
     * the next message or a reset). NULL: trailers are checked and dropped. */
    int (*on_trailers)(void *arg, struct http_head *trailers);
};

struct http1_parser;

struct http1_parser *http1_parser_new(enum http1_kind kind, const struct http1_callbacks *cb,
                                      void *arg);
void http1_parser_free(struct http1_parser **pp);

/*
 * Ready for the next message: wipes the previous head and keeps its storage while small
 * (httphead_clear), so a parser reused for the next request allocates nothing for its head;
 * frees the buffer of a head that arrived in pieces. A message in progress is discarded. After
 * an upgrade or CONNECT the parser parses again (the upgrade was refused); after a message that
 * ended the connection, or an error, it stays stopped.
 */
void http1_parser_reset(struct http1_parser *p);

/* The argument the callbacks get from now on (a reset parser handed to another owner). */
void http1_parser_set_arg(struct http1_parser *p, void *arg);

/*
 * Response parsers: the method of the request being answered (HEAD means no body; a 2xx to
 * CONNECT is a tunnel). Kept until that request's final response is complete, then forgotten.
 */
void http1_parser_set_request_method(struct http1_parser *p, const char *method);

/*
 * Feeds len bytes. Returns how many were consumed (fewer than len after a pause, or when a
 * message that ends the connection is complete: bytes after it are never parsed), or -1 on a
 * protocol error: http1_error() then says which status to answer.
 */
ssize_t http1_feed(struct http1_parser *p, const char *data, size_t len);

/* The peer closed. Completes a HTTP1_BODY_EOF body (0); -1 if a message was cut short. */
int http1_feed_eof(struct http1_parser *p);

/*
 * After -1: the status to answer (400, 405, 431, 501, 502) and a fixed reason text. 500 when a
 * callback returned -1. The reason is a constant string, never peer bytes; fit for the event log.
 */
int http1_error(const struct http1_parser *p, const char **reason);

/* True between on_head and on_done of a message. */
bool http1_in_message(const struct http1_parser *p);

/*
 * Removes hop-by-hop fields (those named in Connection, and Connection, Keep-Alive,
 * Proxy-Connection, Proxy-Authorization, TE, Trailer, Upgrade unless keep_upgrade) and the
 * framing fields Content-Length and Transfer-Encoding, which the writers below set again.
 * Host is never removed because Connection names it. With keep_upgrade, when the Connection
 * options held "upgrade" and an Upgrade field remains, "Connection: upgrade" is appended again
 * (a WebSocket handshake needs it on both hops).
 */
void http1_strip_hop_by_hop(struct http_head *h, bool keep_upgrade);

/*
 * Serialisers: a new head from h's fields, plus the framing field for `body`. 0 or -1, and then
 * nothing is written. Content-Length and Transfer-Encoding fields of h are never written (the
 * framing is the writer's); a name that is not a token, a value with CR, LF, NUL or another
 * control character, a method that is not a token or a target with bytes outside visible ASCII
 * fails. Requests always go out as HTTP/1.1; HTTP1_BODY_EOF is refused for requests. Responses:
 * no framing field on 1xx and 204; HTTP1_BODY_EOF implies close; with close, Connection fields of
 * h are replaced by "Connection: close". http1_write_chunk writes nothing for len 0.
 */
int http1_write_request_head(struct evbuffer *out, const struct http_head *h, enum http1_body body,
                             uint64_t content_length);

/*
 * The same head, for a request that carries a secret (SPEC §8: secret memory is wiped when it
 * is freed): serialised into a block of its own that out holds by reference (never copied into
 * out's chains), wiped with OPENSSL_cleanse and freed when out drains or frees it - also after
 * evbuffer_add_buffer() moved it to another evbuffer. Whoever sends from out must not copy it
 * either (no evbuffer_pullup across it; conn_push() writes such a buffer chain by chain).
 */
int http1_write_request_head_wiped(struct evbuffer *out, const struct http_head *h,
                                   enum http1_body body, uint64_t content_length);

/* The blocks of heads that fit 2 KiB are kept per thread once wiped (at most 64) for the next
 * heads; this frees the calling thread's (a worker, when its loop ends). */
void http1_write_release_kept(void);

/* How many wiped blocks the calling thread keeps. */
size_t http1_write_kept(void);

int http1_write_response_head(struct evbuffer *out, const struct http_head *h, enum http1_body body,
                              uint64_t content_length, bool close);
int http1_write_chunk(struct evbuffer *out, const char *data, size_t len);
/* The "<hex size>\r\n" line of a chunk of len bytes whose data the caller adds (nothing for 0). */
int http1_write_chunk_header(struct evbuffer *out, size_t len);
int http1_write_last_chunk(struct evbuffer *out);

/* The last chunk with trailer fields (or without, when t is NULL or empty): fields as in
 * http1_write_response_head, after http1_trailers_filter. 0 or -1 (nothing written). */
int http1_write_last_chunk_trailers(struct evbuffer *out, struct http_head *t);

/*
 * Removes from a trailer section every field a sender must not put there or a recipient must
 * not act on (RFC 9110 §6.5.1, RFC 9113 §8.1): framing, routing, connection-specific fields,
 * authentication, request modifiers, content metadata. What is left is safe to relay.
 */
void http1_trailers_filter(struct http_head *t);

/*
 * A response vaultgate itself produces (SPEC §4): status line, Proxy-Status with the RFC 9209
 * error type and details, Content-Type text/plain, Content-Length, Connection: close when
 * close, and a one-line text body naming host and reason. host may be NULL.
 */
int http1_write_error(struct evbuffer *out, int status, const char *error_type, const char *details,
                      const char *host, bool close);

/* The two parts of such a response that do not depend on HTTP/1.1's framing: the Proxy-Status
 * value ("vaultgate; error=...; details=\"...\"") appended to ps, and the text body to body.
 * 0 or -1 (a status or type that cannot be written). */
int http1_error_parts(int status, const char *error_type, const char *details, const char *host,
                      struct evbuffer *ps, struct evbuffer *body);

/*
 * Splits a Host header value (or authority) "host[:port]" / "[v6][:port]". Writes the
 * normalised host to host (HOSTNAME_BUFSZ) and the port (0 when absent). 0 or -1 when the
 * value is not of that form (userinfo, spaces, several values, a bad name or port).
 */
int http1_split_authority(const char *value, size_t len, char *host, size_t hostsz, int *port);

/*
 * The common case of http1_split_authority without normalising again: value is exactly
 * norm_host (already normalised, not an IPv6 literal), optionally followed by ":port". Then 1
 * with *port set (0 for none), as http1_split_authority would give; otherwise 0 (nothing
 * written) and the caller takes the full path.
 */
int http1_authority_is(const char *value, size_t len, const char *norm_host, int *port);

#endif
