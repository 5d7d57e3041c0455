/*
 * exchange_int.h - what the exchange's files share; private to them. They call one way:
 * exchange.c (the transport's API, checks, decision, rewrite) -> exchange_cred.c (the
 * credential) -> exchange_resp.c (the origin and the response) -> exchange_life.c (states,
 * timer, log lines, answers, the end) -> exchange_filter.c (the response filter). What a lower
 * file needs of the credential is read through the inline exch_cred_* below.
 */
#ifndef VG_EXCHANGE_INT_H
#define VG_EXCHANGE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "audit/log.h"
#include "common/caps.h"
#include "common/defer.h"
#include "policy/inject.h"
#include "policy/sigv4.h"
#include "proxy/bevio.h"
#include "proxy/dlq.h"
#include "proxy/exchange.h"
#include "proxy/exchange_filter.h"
#include "proxy/metrics.h"
#include "proxy/oauth.h"
#include "proxy/origin.h"
#include "proxy/upstream.h"

struct mask_decoder;
struct grpcmask;

/* Timeouts of SPEC §4 the exchange keeps, in seconds (the operator's, --timeout), of a worker
 * (the _W forms) or of an exchange's worker. */
#define EXCH_T_W(w, k) vg_timeout(&(w)->sh->timeouts, (k))
/* a safety net above upstream.c's own connect and TLS timeouts */
#define EXCH_T_UP_GET_W(w) (EXCH_T_W(w, VG_T_CONNECT) + EXCH_T_W(w, VG_T_UPSTREAM_HANDSHAKE) + 20)
/* how long a request waits for a token: the manager's whole fetch, and a little */
#define EXCH_T_TOKEN_W(w)                                                                          \
    (EXCH_T_W(w, VG_T_CONNECT) + EXCH_T_W(w, VG_T_UPSTREAM_HANDSHAKE) + VG_OAUTH_FETCH_EXTRA +     \
     VG_OAUTH_WAIT_MAX)
#define EXCH_T(x, k)     EXCH_T_W((x)->w, k)
#define EXCH_T_UP_GET(x) EXCH_T_UP_GET_W((x)->w)
#define EXCH_T_TOKEN(x)  EXCH_T_TOKEN_W((x)->w)
#define EXCH_HTTPS_PORT  443
#define EXCH_HTTP_PORT   80

/* The request's progress; exch_set_req() is the one setter (it logs at debug). */
enum exch_req {
    EXCH_REQ_HEAD = 0, /* waiting for the request head, then checking and deciding it */
    EXCH_REQ_TOKEN,    /* oauth2: waiting for the token manager (parked on the worker) */
    EXCH_REQ_SIGN,     /* SigV4: the body is buffered and hashed before the request is signed */
    EXCH_REQ_CONNECT,  /* head accepted; waiting for the origin */
    EXCH_REQ_BODY,     /* the head went upstream; the body follows */
    EXCH_REQ_SENT,     /* the whole request went upstream */
    EXCH_REQ_ENDED,    /* finished was reported; nothing more happens */
};

/* The response's progress; exch_set_resp() is the one setter (it logs at debug). */
enum exch_resp {
    EXCH_RESP_NONE = 0,  /* no final head went to the transport yet (1xx may have) */
    EXCH_RESP_BODY,      /* a final head went to the transport; the body streams */
    EXCH_RESP_SWITCHING, /* a 101 went to the transport; its end completes the switch */
    EXCH_RESP_DRAIN,     /* the body ended upstream; its decoded rest waits for the client */
    EXCH_RESP_DONE,      /* complete (an answer of vaultgate's own included) */
    EXCH_RESP_SWITCHED,  /* the 101 is complete: the upstream goes to the transport */
};

/*
 * The credential of one request: what was injected, the forms the masker looks for, a SigV4
 * body being buffered, an OAuth 2.0 token. Only exchange_cred.c reads or writes it; the rest
 * of the exchange asks through exch_cred_*().
 */
struct exch_cred {
    struct inject_form forms[INJECT_MAX_FORMS]; /* what the masker looks for */
    size_t nforms;
    struct inject_form *hforms; /* forms plus those of the secret's earlier values, or NULL */
    size_t nhforms;
    struct inject_token **htok; /* ... the earlier values' wire forms (owned) */
    size_t nhtok;
    bool forms_dynamic;          /* per request (a signature): the masker is not kept */
    char sig[SIGV4_HEX_LEN + 1]; /* this request's SigV4 signature */
    struct sigv4_hash *sig_hash; /* SigV4: the body's SHA-256 while it is buffered */
    struct evbuffer *sig_body;   /* ... the buffered body, in blocks wiped when released */
    char *sig_blk;               /* ... the block being filled */
    size_t sig_blk_cap, sig_blk_used;
    uint64_t sig_len;       /* ... bytes buffered */
    bool sig_buffered;      /* the body went into sig_body: it goes upstream with Content-Length */
    struct oauth_src *osrc; /* oauth2: the source (the snapshot's, alive with x->policy) */
    struct oauth_tok *otok; /* ... the token injected (a reference) */
    struct inject_token *itok; /* ... its wire forms */
};

struct exchange {
    struct exch_conn *cc; /* NULL once freed by the transport (the memory may wait) */
    const struct exchange_ops *ops;
    void *t;
    struct worker *w;
    enum exch_req req_state;
    enum exch_resp resp_state;
    struct http1_msg *req;     /* the transport's, valid until exchange_free */
    char host[HOSTNAME_BUFSZ]; /* this request's host */
    int target_port;           /* absolute-form on the proxy listener, or CONNECT: the port named */
    bool connect_tunnel;       /* CONNECT to a host that is not ours to intercept */
    enum metrics_decision mdec;
    int rule;              /* injected rule, or -1 */
    struct policy *policy; /* the snapshot this request was decided on (own reference) */
    uint64_t policy_gen;
    int status;
    struct timespec t_start;
    int64_t bytes_in, bytes_out;
    struct dlq_entry timer; /* upstream connect and response head, or a token (the worker's
                               deadline queues, exchange_timers_module) */
    void (*expired)(struct exchange *x); /* the timer's handler; NULL: the upstream's */

    /* upstream */
    struct origin *o; /* this request's upstream, whatever its protocol (origin.h) */
    int up_tls;       /* UPSTREAM_PLAIN, UPSTREAM_TLS or UPSTREAM_TLS_H2 */
    bool grpc;        /* the request says application/grpc...: HTTP/2 upstreams only (never decides
                       * how the response is read: resp_is_grpc) */
    int up_port;
    bool route_tunnel;
    bool reported;              /* a policy block forwarded by a report-only vault (SPEC §12) */
    struct http_head *trailers; /* the response's, when it had any (the parser's) */

    /* facts of this request (its progress is the two states above) */
    bool ws;         /* asks for a WebSocket upgrade */
    bool ws_bad_ext; /* a credentialed 101 named an extension */
    bool retried;    /* sent again after a pooled connection died */

    struct exch_filter rf; /* reflection masking (SPEC §4) of the response (exchange_filter.c) */
    int resp_err_status;   /* set by a response callback that aborts the parse */
    const char *resp_err_type;
    const char *resp_err_details;

    struct exch_cred cred; /* the credential of this request (exchange_cred.c's alone) */
    struct exchange *park_prev, *park_next; /* waiting for a token (exchange_cred.c) */
    void **park_list;                       /* the list x is parked on, or NULL */

    struct defer defer; /* exchange callbacks on the stack; freed at depth 0 after exchange_free */
};

/* exchange_life.c */
void exch_set_req(struct exchange *x, enum exch_req s);
void exch_set_resp(struct exchange *x, enum exch_resp s);
/* Head and body are on their way to the upstream or there. */
static inline bool exch_relaying(const struct exchange *x)
{
    return x->req_state == EXCH_REQ_BODY || x->req_state == EXCH_REQ_SENT;
}
void exch_enter(struct exchange *x);
void exch_leave(struct exchange *x);
double exch_elapsed(const struct timespec *t0);
void exch_log(const struct exchange *x, enum log_level lvl, const char *event, const char *reason,
              const char *detail);
void exch_log_request(struct exchange *x, const char *route, const char *reason);
/* Arms the one timer: expired (NULL: answer 504, the upstream timed out) runs when it fires. */
void exch_arm(struct exchange *x, int seconds, void (*expired)(struct exchange *x));
void exch_record_refusal(struct exchange *x);
void exch_fail(struct exchange *x, int status, const char *type, const char *details,
               const char *reason);
void exch_finish(struct exchange *x, enum exch_end how);
void exch_drop_upstream(struct exchange *x, bool abort);
/* Frees the memory of x (what the connection lent was given back by exchange_free), or keeps
 * it (zeroed, with its empty scratch buffer) among the worker's spares. */
void exch_destroy(struct exchange *x);
/* A zeroed exchange for w (a spare, maybe with its scratch buffer), or NULL. */
struct exchange *exch_spare_take(struct worker *w);
/* The worker's spares: made at its start, freed at its end (the module's hooks). */

/*
 * A masker is built for one rule's forms of one snapshot. It is no connection's: an idle
 * connection would hold ~2 KiB for it. The worker keeps up to VG_WORKER_MASKS of them, and
 * VG_WORKER_MASK_BYTES of their memory (a masker grows with its secret), for the next
 * credentialed requests of any connection (LIFO, so the most recently used stay warm);
 * one of an older snapshot is freed (wiped) as soon as it is seen, and all of them when the
 * worker takes a new snapshot. Beyond those, a new masker is made from the rule's set (the
 * forms' matcher tables and filter, mask_set_new), which the worker keeps for up to
 * VG_WORKER_MASK_SETS rules of the current snapshot, so that only the stream's state is made
 * per exchange, however many run at once.
 */
struct exch_masks {
    size_t n, nsets;
    size_t bytes; /* of the kept maskers (mask_mem when given), at most VG_WORKER_MASK_BYTES */
    struct {
        struct mask *m;
        int rule;
        uint64_t gen;
        size_t bytes;
    } e[VG_WORKER_MASKS];
    struct {
        struct mask_set *s;
        int rule;
        uint64_t gen;
    } sets[VG_WORKER_MASK_SETS];
};

/* Frees entry i of the cache (wiped), the last one taking its place. */
void exch_masks_drop(struct exch_masks *c, size_t i);
/* A masker for rule's forms (forms[0..n)) of snapshot gen, now the caller's: the worker's, or
 * one made from the rule's set (made first when the worker has none). NULL when out of memory. */
struct mask *exch_mask_take(struct worker *w, int rule, uint64_t gen,
                            const struct inject_form *forms, size_t n);
/* Gives *mp (a masker that finished its stream) to the worker's cache, or frees it; NULLs *mp. */
void exch_mask_give(struct worker *w, struct mask **mp, int rule, uint64_t gen);

/* exchange_cred.c */
int exch_cred_apply(struct exchange *x, struct http_head *h);
int exch_cred_body(struct exchange *x, const char *data, size_t len);
int exch_cred_body_end(struct exchange *x);
void exch_cred_free(struct exchange *x);
void exch_cred_detach(struct exchange *x);

/* The credential as the lower files read it. */
/* How the request body goes upstream: as the client framed it, or buffered (SigV4) with its
 * length. */
static inline enum http1_body exch_req_body(const struct exchange *x, uint64_t *len)
{
    const struct http1_msg *req = x->req;

    if (x->cred.sig_buffered) {
        *len = x->cred.sig_len;
        return x->cred.sig_len > 0 ? HTTP1_BODY_LENGTH : HTTP1_BODY_NONE;
    }
    *len = req->content_length;
    if (req->body == HTTP1_BODY_LENGTH && req->content_length == 0)
        return HTTP1_BODY_NONE;
    return req->body;
}

/* A buffered (SigV4) body that goes upstream after the head, or NULL. */
static inline struct evbuffer *exch_cred_buffered(const struct exchange *x)
{
    return x->cred.sig_buffered ? x->cred.sig_body : NULL;
}

/* The forms this request's masker looks for: the credential's, and those of every value its
 * secret held earlier in the run (SPEC §4). */
static inline const struct inject_form *exch_cred_forms(const struct exchange *x, size_t *n)
{
    *n = x->cred.hforms != NULL ? x->cred.nhforms : x->cred.nforms;
    return x->cred.hforms != NULL ? x->cred.hforms : x->cred.forms;
}

/* The forms are this request's alone (a signature, a token, earlier values): its masker is
 * not kept for others. */
static inline bool exch_cred_dynamic(const struct exchange *x)
{
    return x->cred.forms_dynamic;
}

/* The upstream answered 401: an injected token is reported rejected (SPEC §3). */
static inline void exch_cred_rejected(struct exchange *x)
{
    if (x->cred.otok != NULL)
        oauth_reject(x->cred.osrc, x->cred.otok); /* a new token for later requests */
}

/* exchange_resp.c */
extern const struct origin_cbs exch_origin_cbs;
int exch_mask_setup(struct exchange *x, struct http_head *h, bool keep_ranges);
void exch_get_upstream(struct exchange *x);

#endif
