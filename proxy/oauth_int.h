/*
 * oauth_int.h - what oauth.c (the manager: sources, tokens, the thread, workers' side) and
 * oauth_fetch.c (one request to a token endpoint) share. Private to those two files.
 */
#ifndef VG_OAUTH_INT_H
#define VG_OAUTH_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/caps.h"
#include "proxy/oauth.h"

struct event;
struct event_base;
struct upstream_ctx;
struct oauth_fetch;

struct oauth_tok {
    atomic_int refs;
    char *value; /* secmem, len + 1 */
    size_t len;
};

struct oauth_src {
    struct oauth *o;
    struct oauth_src *next;
    int refs;  /* snapshots attached (o->lock) */
    bool dead; /* no snapshot left: the thread frees it */
    /* configuration (immutable) */
    char *name, *token_url, *host, *target, *client_id, *scope, *audience;
    int port;
    bool refresh_grant, auth_post;
    char *client_secret; /* secmem or NULL */
    size_t cs_len;
    char *rt_vault; /* the vault's refresh token (what a reload compares), secmem or NULL */
    size_t rt_vault_len;
    /* state (o->lock) */
    char *rt; /* the refresh token to use next (rotated), secmem or NULL */
    size_t rt_len;
    struct oauth_tok *tok;
    int64_t expires_ms, refresh_ms; /* CLOCK_MONOTONIC */
    bool fetching, want, failing;
    unsigned fails;
    int64_t next_try_ms, rejected_ms;
    /* the manager's thread only */
    struct event *timer;
    struct oauth_fetch *f;
};

struct oauth {
    pthread_mutex_t lock; /* sources, their state, the watch list */
    struct oauth_src *srcs;
    int watch[VG_WORKERS_MAX];
    size_t nwatch;
    bool stopped; /* the thread is gone: sources are freed where they die */
    /* the manager's thread */
    pthread_t thread;
    bool started;
    atomic_bool quit;
    struct event_base *base;
    struct upstream_ctx *up;
    int cmd_fd;
    struct event *cmd_ev;
    struct audit *audit;
    int fetch_timeout; /* seconds for one whole fetch */
};

/* What one fetch brought. */
struct oauth_result {
    bool ok;
    char *token; /* secmem, token_len + 1; taken by oauth_fetched */
    size_t token_len;
    char *refresh; /* a rotated refresh token (secmem) or NULL; taken */
    size_t refresh_len;
    int64_t expires_in;    /* seconds */
    int64_t started_ms;    /* when the request was sent: lifetimes count from here */
    const char *reason;    /* failure: a fixed code */
    char detail[128];      /* failure: status and OAuth error code, never a value */
    int upstream_err_kind; /* enum metrics_upstream_error + 1, or 0 */
    int status;
    bool reached; /* a connection to the endpoint was made: its route counts */
    bool route_tunnel;
    double seconds;
};

int64_t oauth_now_ms(void);

/* oauth_fetch.c (the manager's thread, o->lock held for start) */
int oauth_fetch_start(struct oauth_src *s);
void oauth_fetch_cancel(struct oauth_fetch **fp);

/* oauth.c: a fetch ended (the manager's thread, o->lock not held); takes r's buffers. */
void oauth_fetched(struct oauth_src *s, struct oauth_result *r);

#endif
