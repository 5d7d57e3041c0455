/*
 * httphead.h - the model of one HTTP/1.x request head that vaultgate rebuilds and forwards.
 *
 * The proxy fills it from validated fields (http/http1.c), policy rewrites it (inject.c), and
 * the proxy serialises it. Every string is owned by the head; all of them live in one arena that
 * is freed (and wiped, since an injected secret may be in it) by httphead_reset, or wiped and
 * kept for the next message by httphead_clear.
 * Pure data: no I/O, no libevent.
 */
#ifndef VG_HTTPHEAD_H
#define VG_HTTPHEAD_H

#include <stddef.h>

#include "common/caps.h"

struct http_field {
    const char *name; /* as received (case kept), NUL-terminated */
    size_t name_len;
    const char *value; /* NUL-terminated, surrounding whitespace removed */
    size_t value_len;
};

struct http_head {
    /* request line (requests) */
    const char *method; /* e.g. "GET" */
    const char *target; /* origin-form "/path?query", or as received for other forms */
    size_t target_len;
    int version_minor; /* 0 for HTTP/1.0, 1 for HTTP/1.1 */
    /* status line (responses) */
    int status;         /* e.g. 200 */
    const char *reason; /* reason phrase, may be empty */
    struct http_field *fields;
    size_t nfields;
    size_t fields_cap;
    /* arena */
    char *arena;
    size_t arena_len;
    size_t arena_cap;
};

/*
 * Caps of one head model (added by the policy module): live string bytes in the arena (room for
 * a full 64 KiB received head plus injected material) and fields (room for the 100 received
 * plus what vaultgate adds). A call that would exceed them fails with -1.
 */
#define HTTPHEAD_MAX_BYTES  (2 * VG_HEAD_MAX_BYTES)
#define HTTPHEAD_MAX_FIELDS (2 * VG_HEAD_MAX_FIELDS)

void httphead_init(struct http_head *h);

/*
 * Storage httphead_clear keeps for the next message: an arena up to this many bytes and a field
 * array up to this many entries (a usual head fits in both); larger ones are freed, so one big
 * head does not stay with its owner.
 */
#define HTTPHEAD_KEEP_BYTES  4096
#define HTTPHEAD_KEEP_FIELDS 32

/* Wipes and frees every string; the head is empty and reusable. */
void httphead_reset(struct http_head *h);

/*
 * Wipes every string and empties the head like httphead_reset, but keeps the arena and the field
 * array when they are within HTTPHEAD_KEEP_BYTES / HTTPHEAD_KEEP_FIELDS, so an owner that parses
 * message after message into the same head allocates nothing for the usual head.
 * httphead_reset (or a later clear of an outgrown head) frees them.
 */
void httphead_clear(struct http_head *h);

/* Sets method/target/version (copies). 0 or -1 (out of memory or over the head cap). */
int httphead_set_request_line(struct http_head *h, const char *method, size_t mlen,
                              const char *target, size_t tlen, int version_minor);

/* Sets version/status/reason of a response head (copies). 0 or -1. */
int httphead_set_status_line(struct http_head *h, int version_minor, int status, const char *reason,
                             size_t rlen);

/* Replaces the target (copies). 0 or -1. */
int httphead_set_target(struct http_head *h, const char *target, size_t tlen);

/* Appends a field (copies both). 0 or -1 (a NUL, CR or LF in either, a colon in the name, an
 * empty name, or no room). */
int httphead_add(struct http_head *h, const char *name, size_t nlen, const char *value,
                 size_t vlen);

/* httphead_add for bytes a parser has already held to the grammar (the name a non-empty
 * token, the value free of control characters: http/http1.c's parse_field), without checking
 * them again. 0 or -1 (no room). */
int httphead_add_valid(struct http_head *h, const char *name, size_t nlen, const char *value,
                       size_t vlen);

/* Removes every field named name (ASCII case-insensitive). Returns how many were removed. */
size_t httphead_remove(struct http_head *h, const char *name);

/* 1 for RFC 9110 token characters (tchar). */
int httphead_is_tchar(unsigned char ch);

/* 1 if field names a (alen bytes) and b (blen bytes) are equal, ASCII case-insensitively. */
int httphead_name_eq(const char *a, size_t alen, const char *b, size_t blen);

/* Number of fields named name, and the first one (or NULL). */
size_t httphead_count(const struct http_head *h, const char *name);
const struct http_field *httphead_get(const struct http_head *h, const char *name);

/* 1 if the comma-separated list value of any field `name` contains token (case-insensitive). */
int httphead_has_token(const struct http_head *h, const char *name, const char *token);

#endif
