/*
 * h2msg.h - HTTP/2 messages as vaultgate reads and writes them (RFC 9113 §8): a request's
 * field section checked field by field as it arrives and turned into the struct http1_msg an
 * exchange takes, and a struct http_head turned into the name/value list nghttp2 sends.
 *
 * The server session runs with nghttp2's HTTP messaging checks off: every rule of §8 that
 * vaultgate relies on is checked here, where it is written down and tested, and a refusal can
 * be the answer the spec asks for (405 for extended CONNECT, 431 for the caps, 400) instead of
 * a bare stream reset. Pure functions over buffers: no sockets, no logging.
 */
#ifndef VG_H2MSG_H
#define VG_H2MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "common/hostname.h"
#include "http/http1.h"

/* What a request's field section came to. */
enum h2req_verdict {
    H2REQ_OK = 0,
    H2REQ_MALFORMED, /* RFC 9113 §8.1.1: the stream is reset with PROTOCOL_ERROR */
    H2REQ_ANSWER,    /* well-formed HTTP/2, refused with an HTTP status (h2req.status) */
};

/* One request's field section as it arrives. */
struct h2req {
    struct http1_msg msg; /* the head once h2req_finish() returned H2REQ_OK */
    enum h2req_verdict verdict;
    int status;       /* H2REQ_ANSWER: 400, 405, 431 */
    const char *why;  /* a fixed reason for the log and the answer */
    unsigned pseudo;  /* pseudo-header fields seen (bits) */
    bool regular;     /* a regular field came: no pseudo-header may follow */
    bool ext_connect; /* :protocol (extended CONNECT, never enabled here) */
    char method[32];
    char scheme[8];
    char authority[HOSTNAME_BUFSZ + 8];
    unsigned nhost; /* host fields seen: more than one is 400, as in HTTP/1.1 */
    char *path;     /* the :path's bytes (in path_buf) once set */
    size_t path_len;
    char *path_buf; /* kept across h2req_clear up to VG_H2_PATH_KEEP bytes, wiped */
    size_t path_cap;
    size_t bytes, nfields; /* the caps of SPEC §4 (64 KiB, 100 fields) */
    bool has_cl;
    uint64_t cl;
    uint64_t data; /* DATA bytes seen, against content-length */
    char *cookie;  /* cookie crumbs joined with "; " (RFC 9113 §8.2.3) */
    size_t cookie_len;
};

void h2req_init(struct h2req *r);
void h2req_free(struct h2req *r);
/* Wipes r and makes it ready for the next request as h2req_init does, keeping the head's arena
 * and field array within httphead_clear's bounds and the :path's buffer up to VG_H2_PATH_KEEP
 * bytes (h2req_free frees them). */
void h2req_clear(struct h2req *r);

/* One field (nghttp2's on_header: decoded, unvalidated). Records the first refusal in
 * r->verdict; later fields are ignored once one stands. */
void h2req_field(struct h2req *r, const uint8_t *name, size_t nlen, const uint8_t *value,
                 size_t vlen);

/* The field section ended; end_stream: no body follows. Returns the verdict; on H2REQ_OK
 * r->msg holds method, target (:path), Host (from :authority, first), the regular fields, and
 * the body framing for the exchange (none, Content-Length, or unknown length as chunked). */
enum h2req_verdict h2req_finish(struct h2req *r, bool end_stream);

/* A DATA frame's length (and END_STREAM): -1 when it breaks content-length (malformed). */
int h2req_data(struct h2req *r, size_t len, bool end_stream);

/* Trailer fields of a request (a trailer section): checked, then dropped as for HTTP/1.1. 0, or
 * -1 when malformed (a pseudo-header, a connection-specific field). */
int h2req_trailer_field(const uint8_t *name, size_t nlen, const uint8_t *value, size_t vlen);

/*
 * The name/value list of a response head (":status" first, then the fields with lower-case
 * names, connection-specific fields dropped, "content-length" added when len_known) or of a
 * trailer section (status < 0: no ":status"). nv and the names point into buf, which the
 * caller provides (nvcap entries, bufcap bytes). Returns the number of entries, or -1 when
 * they do not fit.
 */
int h2msg_nv(const struct http_head *h, int status, bool len_known, uint64_t len, nghttp2_nv *nv,
             size_t nvcap, char *buf, size_t bufcap);

#endif
