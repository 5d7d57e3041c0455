/*
 * conn_int.h - what proxy/conn.c (client side, accept, checks, teardown) and proxy/conn_relay.c
 * (upstream side, response relay, reflection masking) share. Private to those two files.
 */
#ifndef VG_CONN_INT_H
#define VG_CONN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "audit/log.h"
#include "common/hostname.h"
#include "policy/policy.h"
#include "proxy/conn.h"
#include "proxy/http1.h"
#include "proxy/metrics.h"
#include "proxy/upstream.h"

struct mask;
struct mask_decoder;
struct wsmask;

/* Timeouts of SPEC §4, in seconds. */
#define CONN_T_HANDSHAKE 10
#define CONN_T_HEAD      30
#define CONN_T_IDLE      75
#define CONN_T_UP_HEAD   600
#define CONN_T_BODY_IDLE 300
#define CONN_T_UP_GET    40 /* safety net above upstream.c's connect + TLS timeouts */
#define CONN_T_FLUSH     10
#define CONN_T_LINGER    2
#define CONN_HTTPS_PORT  443
#define CONN_HTTP_PORT   80

/* The one name vaultgate answers itself (SPEC §9, `vaultgate probe`). */
#define CONN_PROBE_HOST "probe.vaultgate.invalid"

enum conn_state {
    CONN_S_TLS_ACCEPT = 0, /* TLS handshake in progress */
    CONN_S_REQ_HEAD,       /* waiting for (or reading) a request head */
    CONN_S_UP_CONNECT,     /* head accepted; waiting for upstream_get */
    CONN_S_RELAY,          /* request and response streaming */
    CONN_S_FLUSH_CLOSE,    /* final response being written; close when flushed */
    CONN_S_LINGER,         /* close_notify + FIN sent; discarding input until EOF or timeout */
    CONN_S_TUNNEL_PEEK,    /* CONNECT tunnel: reading the ClientHello to check its SNI */
    CONN_S_TUNNEL,         /* CONNECT tunnel without interception: bytes spliced both ways */
    CONN_S_CLOSED,
};

struct conn_end {
    struct bufferevent *bev;
    struct http1_parser *parser;
    struct evbuffer *stage; /* bytes produced for this side, sent by conn_push() */
    bool paused;            /* reading stopped because the other side's output is over its cap */
    bool nocopy; /* stage leads with a wiped block (a head with a secret): never pulled up */
};

struct conn {
    struct conn_end client, upstream;
    enum conn_state state;
    struct listen_worker *w;
    const struct listen_addr *la;
    struct conn *prev, *next;
    uint64_t id;
    struct event *timer;
    int depth;         /* callback nesting; the struct is freed at depth 0 */
    bool free_pending; /* conn_close() ran inside a callback */
    bool tls;          /* TLS terminated here (host from SNI or CONNECT); else plain HTTP */
    bool proxy;        /* accepted on an explicit-proxy listener */
    bool host_fixed;   /* the connection has one host (SNI, CONNECT); else each request's */
    bool graceful;     /* conn_close() ends the upstream side with a FIN, not an RST */
    bool tunnel_eof;   /* CONNECT tunnel: one side closed, flushing the other */
    bool ws;           /* the current request asks for a WebSocket upgrade */
    bool ws_switch;    /* the upstream answered 101: splice once the head is out */
    bool ws_bad_ext;   /* a credentialed 101 named an extension: close 1002 after the head */
    int default_port;  /* the port a Host may name besides none and the listener's own */
    bool handshake_done;
    bool draining;             /* stop requested: close after the current response */
    bool idle;                 /* REQ_HEAD with no byte of the next request yet */
    bool parse_stop;           /* a parser callback asked the feed loop to stop */
    char host[HOSTNAME_BUFSZ]; /* normalised SNI */
    char client_addr[64];
    struct policy *policy; /* snapshot of the current request (or of the handshake) */

    /* current request */
    struct upstream_req *upreq;
    struct http1_msg *req;  /* owned by client.parser, valid until it is reset */
    struct http1_msg *resp; /* owned by upstream.parser */
    enum metrics_decision mdec;
    int rule;
    int status;
    bool head_ready; /* on_head seen, not yet handled */
    bool req_done;   /* whole request body sent upstream */
    bool req_keep_alive;
    int req_minor;     /* the client's HTTP/1.x minor version (the forwarded head says 1) */
    bool resp_started; /* response head written to the client */
    bool resp_done;
    bool resp_chunked; /* re-framing the response body as chunked for the client */
    bool resp_close;   /* the client connection closes after this response */
    bool route_tunnel;
    bool up_tls; /* the upstream of this request: TLS to up_port, or plain HTTP */
    int up_port;
    int target_port; /* absolute-form on the proxy listener: the port the target names */
    bool retried;    /* the request was sent again after a pooled connection died */
    int64_t bytes_in, bytes_out;
    uint64_t resp_bytes; /* bytes read from the upstream for this request */
    /* reflection masking of a response to a request that carried a secret (SPEC §4) */
    struct mask *mask;
    int mask_rule; /* the masker is reused while rule and snapshot stay the same */
    uint64_t mask_gen;
    bool mask_clean;     /* the last response through it ended with mask_finish() */
    bool masking;        /* this request carried the secret: its response is masked */
    uint64_t policy_gen; /* generation of c->policy */
    struct mask_decoder *dec;
    struct evbuffer *zpend;   /* compressed body bytes waiting for the client to drain */
    struct evbuffer *plain;   /* decoded bytes on their way to the masker */
    bool zmore;               /* the decoder stopped at its output budget: more is inside it */
    bool zdone;               /* the body ended upstream; its decoded rest is still pending */
    struct wsmask *wsm;       /* a credentialed WebSocket after 101: its server frames, masked */
    struct evbuffer *scratch; /* decoded / masked bytes on their way to the client */
    int resp_err_status;      /* set by a response callback that aborts the parse */
    const char *resp_err_type;
    const char *resp_err_details;
    struct timespec t_start;
};

/* conn.c */
double conn_elapsed(const struct timespec *t0);
void conn_log(const struct conn *c, enum log_level lvl, const char *event, const char *reason,
              const char *detail);
void conn_set_state(struct conn *c, enum conn_state s);
void conn_arm(struct conn *c, int seconds);
void conn_enter(struct conn *c);
void conn_leave(struct conn *c);
void conn_push(struct conn_end *e);
size_t conn_pending(const struct conn_end *e);
const char *conn_tls_reason(unsigned long e);
enum metrics_upstream_error conn_upstream_metric(enum upstream_err e);
void conn_drop_upstream(struct conn *c, bool abort);
void conn_close(struct conn *c, const char *reason);
void conn_flush_close(struct conn *c);
void conn_log_request(struct conn *c, const char *route, const char *reason);
void conn_respond_error(struct conn *c, int status, const char *type, const char *details,
                        const char *reason);
void conn_record_refusal(struct conn *c, const char *host);
/* The decision for c->host on the worker's current policy snapshot (which c then keeps). On
 * block: answers 403, records the refusal and returns -1; else 0 with *dec filled. */
int conn_decide(struct conn *c, struct policy_decision *dec);
void conn_client_input(struct conn *c);
void conn_update_reading(struct conn *c);

void conn_begin(struct conn *c);
void conn_client_setcb(struct conn *c);
void conn_start_request(struct conn *c);

/* conn_proxy.c */
void conn_proxy_connect(struct conn *c);
int conn_proxy_target(struct conn *c, struct http_head *h, const char **why);
void conn_proxy_peek(struct conn *c);
void conn_tunnel_start(struct conn *c);

/* conn_relay.c */
void conn_drop_mask(struct conn *c);
void conn_drop_decoder(struct conn *c);
int conn_mask_setup(struct conn *c, struct http_head *h);
void conn_upstream_input(struct conn *c);
void conn_up_ready(void *arg, struct bufferevent *bev, enum upstream_err err, bool route_tunnel);

#endif
