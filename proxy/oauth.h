/*
 * oauth.h - OAuth 2.0 access tokens kept fresh by vaultgate (SPEC §3 "OAuth 2.0 access
 * tokens"): one token manager per process, with a thread and an event loop of its own, fetches
 * every oauth2 source's token at start and again before it expires, one fetch per source at a
 * time whatever the number of workers, through the same resolver, address rules, upstream TLS
 * verification and --upstream-proxy as any upstream request (an upstream context of its own).
 *
 * Workers never wait on it: oauth_acquire() answers at once (a token, wait, or failed); a worker
 * whose request waits parks it and is woken through the eventfd it registered (oauth_watch) when
 * any source's state changes.
 *
 * Sources outlive snapshots: oauth_bind() attaches to each oauth2 source of a new snapshot the
 * running source with the same configuration (a SIGHUP that leaves it unchanged keeps its token
 * and its rotated refresh token), or a new one (fetched at once). A source goes when the last
 * snapshot that uses it goes.
 *
 * Tokens, client secrets and refresh tokens live in wiped memory and are never logged; log
 * lines and status warnings name the secret, never a value.
 */
#ifndef VG_OAUTH_H
#define VG_OAUTH_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

struct oauth;
struct oauth_src;
struct oauth_tok;
struct policy;
struct audit;
struct upstream_config;

/* Starts the manager: its event loop, upstream context and thread. NULL + err. */
struct oauth *oauth_start(const struct upstream_config *cfg, struct audit *audit, int fetch_timeout,
                          char *err, size_t errlen);

/* Stops the thread (fetches in flight are cancelled). Call after the workers stopped. The
 * sources stay until oauth_free(). NULL-safe. */
void oauth_stop(struct oauth *o);

/* Frees what is left; call when no snapshot refers to a source any more. NULLs *op. */
void oauth_free(struct oauth **op);

/* Attaches a source to each oauth2 source of p (before p is published). 0 or -1 + err. Main
 * thread. */
int oauth_bind(struct oauth *o, struct policy *p, char *err, size_t errlen);

/* A worker's eventfd, written (1) whenever a source's state changes; removed before the fd is
 * closed. 0 or -1. */
int oauth_watch(struct oauth *o, int fd);
void oauth_unwatch(struct oauth *o, int fd);

enum oauth_state {
    OAUTH_READY = 0, /* *tok is a new reference to a valid token */
    OAUTH_WAIT,      /* none valid; a fetch is under way: wait for a wake-up */
    OAUTH_FAILED,    /* none valid and the token endpoint fails: answer 502 */
};

/* The source's token, if one is valid now. Any thread; never blocks on I/O. */
enum oauth_state oauth_acquire(struct oauth_src *s, struct oauth_tok **tok);

/* The upstream answered 401 to tok: drop it (if it is still the current one) and fetch a new
 * one for later requests; at most once per VG_OAUTH_REJECT_INTERVAL per source. */
void oauth_reject(struct oauth_src *s, const struct oauth_tok *tok);

/* The secret's name (for Proxy-Status details and logs). */
const char *oauth_src_name(const struct oauth_src *s);

/* The token's bytes (valid while the reference is held). */
const char *oauth_tok_value(const struct oauth_tok *t, size_t *len);
void oauth_tok_unref(struct oauth_tok **tp);

/* Appends "token endpoint for NAME failed" for each source of p whose endpoint fails. */
void oauth_warnings_json(const struct policy *p, cJSON *arr);

#endif
