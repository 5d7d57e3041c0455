/*
 * h2conn_int.h - what the two files of the HTTP/2 client transport share: h2conn.c (the
 * connection: session, input, output, timers, close) calls h2conn_stream.c (the streams, their
 * exchanges, and the helpers both use), never the other way.
 */
#ifndef VG_H2CONN_INT_H
#define VG_H2CONN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include "audit/log.h"
#include "common/defer.h"
#include "http/h2msg.h"
#include "proxy/bevio.h"
#include "proxy/exchange.h"
#include "proxy/h2glue.h"
#include "proxy/worker.h"

struct h2s;

struct h2conn {
    struct worker_link link; /* first: the worker's list holds &c->link */
    struct exch_conn cc;
    struct bevio io;
    nghttp2_session *ng;
    struct event *timer;   /* the tick of deadlines */
    struct event *resume;  /* streams with work for their exchange, run from the loop */
    struct h2s *work;      /* ... queued for it */
    struct h2s *batch;     /* ... taken by the resume event now */
    size_t out_bytes;      /* response bytes waiting in the streams' out buffers */
    struct h2glue_mem mem; /* the session's allocator: mapped blocks, no wiping */
    struct h2s *streams;
    size_t nstreams;
    time_t idle_since;     /* no stream open since */
    struct defer defer;    /* callbacks on the stack; freed at depth 0 after h2_close */
    bool busy;             /* over the connection limit: 503 to each request, then GOAWAY */
    bool draining;         /* GOAWAY sent: open streams finish, then the connection closes */
    bool calm;             /* GOAWAY ENHANCE_YOUR_CALM sent: close once it is out */
    const char *lingering; /* the session is over: the close reason, input discarded */
    size_t lingered;
    /* abuse counters over the current flood window */
    time_t flood_start;
    unsigned settings, pings, priorities, empty_data, resets, completed;
    size_t head_room;  /* what a header block under way may still take on the wire */
    time_t head_since; /* a header block begun (0: none) */
};

enum h2s_state {
    H2S_HEADERS = 0, /* the request's field section is arriving */
    H2S_EXCHANGE,    /* its exchange has it */
    H2S_ENDED,       /* the exchange finished; DATA may still be on its way out */
};

struct h2s {
    struct h2s *prev, *next;
    struct h2conn *c;
    int32_t id;
    enum h2s_state state;
    struct h2req req;
    struct exchange *x;
    struct timespec t0;
    time_t last_io;
    struct evbuffer *in;  /* request DATA the exchange has not taken yet */
    struct evbuffer *out; /* response bytes for DATA frames */
    nghttp2_nv *tnv;      /* trailers waiting for the end of the DATA */
    size_t ntnv;
    char *tbuf;
    bool body_wanted; /* the exchange takes body bytes (ops->more came) */
    bool body_paused; /* exchange_body said stop */
    bool in_end;      /* END_STREAM from the client */
    bool body_ended;  /* exchange_body_end was called */
    bool out_eof;     /* the response is complete on the exchange's side */
    bool deferred;    /* the data provider is waiting for bytes */
    bool want_drain;  /* the exchange waits for room */
    struct h2s **wq;  /* the queue it is on (c->work or c->batch), or NULL */
    struct h2s *wprev, *wnext;
    bool resp_final; /* the final response head went out */
};

/* h2conn_stream.c: helpers of the connection */
void h2_log(const struct h2conn *c, enum log_level lvl, const char *event, const char *reason);
time_t h2_now(void);
/* GOAWAY with code; the connection closes once it is written. */
void h2_goaway(struct h2conn *c, uint32_t code, const char *reason);

/* h2conn_stream.c: streams */
struct h2s *h2s_new(struct h2conn *c, int32_t id);
void h2s_free(struct h2s *s); /* the one teardown of a stream; frees its exchange */
void h2s_consumed(struct h2s *s, size_t n);
void h2s_queue(struct h2s *s);   /* for the resume event: body bytes, a drain notice, an end */
void h2s_unqueue(struct h2s *s); /* off whichever queue it is on */
void h2s_request(struct h2s *s, bool end_stream);
void h2s_feed(struct h2s *s);

#endif
