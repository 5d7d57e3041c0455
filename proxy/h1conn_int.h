/*
 * h1conn_int.h - what h1conn.c (the HTTP/1.1 transport) and proxyconn.c (CONNECT on the
 * explicit-proxy listener) share. Private to those files.
 */
#ifndef VG_H1CONN_INT_H
#define VG_H1CONN_INT_H

#include <stdbool.h>
#include <time.h>

#include "audit/log.h"
#include "common/defer.h"
#include "proxy/cio.h"
#include "proxy/dlq.h"
#include "proxy/exchange.h"
#include "proxy/h1conn.h"
#include "http/http1.h"
#include "proxy/worker.h"

/* Timeouts of SPEC §4 the transport keeps, in seconds: the operator's (--timeout) by name, and
 * the transport's own. */
#define H1_T(c, k)   H1_T_W((c)->cc.w, (k))
#define H1_T_W(w, k) vg_timeout(&(w)->sh->timeouts, (k))
#define H1_T_FLUSH   10
#define H1_T_LINGER  2
#define H1_T_PEEK    10 /* a tunnelled CONNECT's ClientHello must arrive this soon */
/* An idle connection keeps its TLS record buffers this long (ms), for the next request. */
#define H1_BUF_KEEP_MS 100

enum h1_state {
    H1_S_IDLE = 0, /* waiting for a request: no byte of it yet */
    H1_S_HEAD,     /* reading a request head */
    H1_S_EXCHANGE, /* the request is with its exchange */
    H1_S_PEEK,     /* CONNECT tunnel: reading the ClientHello to check its SNI */
    H1_S_FLUSH,    /* final response being written; close when flushed */
    H1_S_LINGER,   /* close_notify + FIN sent; discarding input until EOF or timeout */
    H1_S_CLOSED,
};

/* Where the request body of the current exchange is. */
enum h1_body {
    H1_BODY_WAIT = 0, /* the exchange does not take it yet */
    H1_BODY_FLOW,     /* fed as it arrives */
    H1_BODY_PAUSED,   /* the upstream is full: until ops->more */
    H1_BODY_DONE,     /* complete (or none) */
};

/* How the current response is framed for the client. */
enum h1_framing {
    H1_FR_NONE = 0, /* as announced (Content-Length, or no body) */
    H1_FR_CHUNKED,  /* unknown length, HTTP/1.1 client: re-framed as chunks */
};

struct h1conn {
    struct worker_link link; /* first: the worker's list holds &c->link */
    struct exch_conn cc;     /* what its exchanges know of it */
    enum h1_state state;
    enum h1_body body;
    enum h1_framing framing;
    struct cio *io;         /* the client; NULL once handed on */
    struct evbuffer *stage; /* produced for the client, sent by cio_push(); lent by the worker */
    struct http1_parser *parser;
    struct http1_msg *req;      /* the parser's, between on_head and the next reset */
    struct exchange *x;         /* the request in flight */
    struct upstream_req *upreq; /* a tunnelled CONNECT's upstream on its way */
    struct dlq_entry timer;     /* the connection's one timer (h1_arm*): the worker's queues */
    struct event *resume;       /* runs the input handler from the loop (buffered input waits) */
    struct timespec t_req;      /* first byte of the current request */
    int req_minor;              /* the client's HTTP/1.x minor version */
    struct defer defer;         /* callbacks on the stack; freed at depth 0 after h1_close */
    const struct h1conn_hooks *hooks; /* its starter's (an intercepted CONNECT), or NULL */
    bool head_ready;                  /* on_head seen, not yet handled */
    bool parse_stop;                  /* a parser callback asked the feed loop to stop */
    bool keep_alive;                  /* the request allows another one after it */
    bool resp_close;                  /* the connection closes after this response */
    bool want_drain;                  /* the exchange waits for the client's output to drain */
    bool busy;                        /* over the connection limit: answer 503 and close */
    bool graceful;                    /* handed over or finishing: no RST */
    bool buf_timer; /* the timer releases the TLS record buffers (h1_arm_idle, _buffers) */
    int idle_rest;  /* idle: the seconds of waiting left after that */
};

/* h1conn.c */
void h1_enter(struct h1conn *c);
void h1_leave(struct h1conn *c);
void h1_log(const struct h1conn *c, enum log_level lvl, const char *event, const char *reason,
            const char *detail);
void h1_set_state(struct h1conn *c, enum h1_state s);
void h1_arm(struct h1conn *c, int seconds);
void h1_arm_idle(struct h1conn *c, int seconds);
void h1_arm_buffers(struct h1conn *c);
void h1_close(struct h1conn *c, const char *reason);
void h1_handover(struct h1conn *c);
void h1_begin(struct h1conn *c);
void h1_schedule_input(struct h1conn *c);
void h1_reading(struct h1conn *c);
void h1_record_refusal(struct h1conn *c, const char *host);
void h1_push(struct h1conn *c);

/* proxyconn.c */
void proxy_connected(struct h1conn *c);
void proxy_peek(struct h1conn *c);

#endif
