/*
 * origin_int.h - what origin.c (getting the connection, picking the adapter) and the adapters
 * origin_h1.c and origin_h2.c share. Private to those three files; origin.c calls the adapters,
 * never the other way round.
 */
#ifndef VG_ORIGIN_INT_H
#define VG_ORIGIN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/defer.h"
#include "common/hostname.h"
#include "proxy/cio.h"
#include "proxy/h2up.h"
#include "proxy/origin.h"

/* How an HTTP/1.1 origin reads the response. */
enum origin_h1_read {
    ORIGIN_H1_HELD = 0, /* not read: the exchange said hold (or has not resumed yet) */
    ORIGIN_H1_READING,  /* read as it arrives */
    ORIGIN_H1_FEEDING,  /* inside the parser loop (a resume there only asks for another turn) */
    ORIGIN_H1_AGAIN,    /* ... and the exchange resumed inside it: one more turn */
};

/* An HTTP/1.1 origin's connection and the bytes staged for it. */
struct origin_h1_io {
    struct cio *conn;       /* NULL once gone */
    struct evbuffer *stage; /* the request as produced, sent by cio_push() */
    bool nocopy; /* stage holds a wiped block (a head with a secret) or chains never pulled up */
};

/* One request's upstream as origin.c and its adapters see it. */
struct origin_conn {
    struct origin o; /* first: the interface */
    struct worker *w;
    char host[HOSTNAME_BUFSZ];
    int port;
    int tls;
    bool retryable;
    struct upstream_ctx *up;
    int body_idle;              /* seconds, once a final head arrived */
    struct upstream_req *upreq; /* dialling */
    struct h2up *h2dial;        /* the dial announced for other requests to wait on */
    struct h2up_stream *h2s;    /* HTTP/2: the request's stream (queued while connecting) */
    struct defer defer;         /* callbacks of the origin on the stack */

    /* HTTP/1.1 (origin_h1.c) */
    struct origin_h1_io io;
    struct http1_parser *parser; /* the response parser */
    struct http1_msg *resp;      /* the final response head, once parsed */
    enum origin_h1_read rd;
    enum http1_body req_body; /* the framing of the request body sent */
    bool head_sent;           /* a request head went out on the connection */
    bool body_paused;         /* request body held until the connection drains */
    bool answered;            /* a final response head went to the exchange */
    bool done;                /* the response ended (resp.on_done went through) */
    bool parser_reusable;     /* the parser is unused, or its connection went back to the pool */
    bool req_ended;           /* the whole request was staged (origin_body_end) */
    bool draining;            /* cancelled after the request: the response is read and dropped */
    bool fresh;               /* the connection was dialled for this request (not pooled) */
    bool broken;          /* the parser failed, or the connection saw an EOF, error or timeout */
    bool quickack;        /* TCP_QUICKACK set since the last push to the connection */
    uint64_t resp_bytes;  /* response bytes parsed */
    uint64_t drain_bytes; /* response body bytes dropped while draining */
    struct origin_conn *drain_prev, *drain_next; /* the worker's draining origins */
};

static inline void origin_enter(struct origin_conn *c)
{
    defer_enter(&c->defer);
}

/* origin_spare.c: a zeroed origin for w (a spare of the worker's, or a new one), or NULL when
 * out of memory; it may come with a reset response parser and an empty stage. */
struct origin_conn *origin_spare_take(struct worker *w);
/* The end of c: its memory, parser and stage go to its worker's spares (zeroed, reset, wiped)
 * or are freed. */
void origin_spare_give(struct origin_conn *c);

/* The worker's list of draining origins (closed at its end): add is false when the worker keeps
 * none (then nothing drains). */
bool origin_drain_add(struct origin_conn *c);
void origin_drain_remove(struct origin_conn *c);

static inline void origin_destroy(struct origin_conn *c)
{
    origin_spare_give(c);
}

static inline void origin_leave(struct origin_conn *c)
{
    if (defer_leave(&c->defer))
        origin_destroy(c);
}

/* The end of c: freed now, or when its outermost callback returns. */
static inline void origin_gone(struct origin_conn *c)
{
    if (defer_free(&c->defer))
        origin_destroy(c);
}

/* origin_h1.c: c speaks HTTP/1.1 over io (taken). 0, or -1 when out of memory (cancel frees
 * what was taken). */
int origin_h1_attach(struct origin_conn *c, struct cio *io, unsigned how);

/* Ends a draining origin: its connection closed (the worker ends). */
void origin_h1_drain_stop(struct origin_conn *c);

/* origin_h2.c: c's stream c->h2s is open: c speaks HTTP/2 from now on. */
void origin_h2_opened(struct origin_conn *c);
/* The stream's callbacks (h2up_ops of origin.c). */
int origin_h2_on_head(void *arg, struct http1_msg *msg);
int origin_h2_on_body(void *arg, const char *data, size_t len);
int origin_h2_on_done(void *arg);
int origin_h2_on_trailers(void *arg, struct http_head *t);
void origin_h2_after(void *arg, bool err);
void origin_h2_more(void *arg);

#endif
