/*
 * oauth.c - the OAuth 2.0 token manager (oauth.h): sources shared by snapshots, the tokens they
 * hold, the manager's thread that fetches and refreshes them, and the workers' side (acquire,
 * reject, wake-ups).
 *
 * Guarantees: at most one fetch per source at a time (only the manager's thread starts them,
 * and only when none is in flight); a token is refreshed when a tenth of its lifetime (at least
 * 60 s, at most half of it) is left, and dropped when it expires; a failed fetch is retried
 * after 1, 2, 4 ... up to VG_OAUTH_BACKOFF_MAX seconds; workers take o->lock only for a few
 * pointer reads and never wait for I/O; every token, client secret and refresh token is wiped
 * when freed; logs and warnings carry secret names, never values.
 */
#include "proxy/oauth.h"
#include "proxy/oauth_int.h"
#include "audit/audit.h"
#include "audit/log.h"
#include "common/sechist.h"
#include "common/secmem.h"
#include "policy/policy.h"
#include "proxy/metrics.h"
#include "proxy/upstream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

int64_t oauth_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- tokens ----------------------------------------------------------------------------- */

const char *oauth_tok_value(const struct oauth_tok *t, size_t *len)
{
    *len = t->len;
    return t->value;
}

void oauth_tok_unref(struct oauth_tok **tp)
{
    struct oauth_tok *t;

    if (tp == NULL || *tp == NULL)
        return;
    t = *tp;
    *tp = NULL;
    if (atomic_fetch_sub(&t->refs, 1) == 1) {
        secmem_free(&t->value, t->len + 1);
        free(t);
    }
}

/* ---- wake-ups --------------------------------------------------------------------------- */

static void fd_kick(int fd)
{
    uint64_t one = 1;
    ssize_t r = write(fd, &one, sizeof(one));

    (void)r;
}

/* Asks the manager's thread to look at its sources. Any thread. */
static void oauth_kick(struct oauth *o)
{
    if (o->cmd_fd >= 0)
        fd_kick(o->cmd_fd);
}

/* Tells every worker that a source changed (o->lock held). */
static void notify_workers(struct oauth *o)
{
    for (size_t i = 0; i < o->nwatch; i++)
        fd_kick(o->watch[i]);
}

int oauth_watch(struct oauth *o, int fd)
{
    int rc = -1;

    pthread_mutex_lock(&o->lock);
    if (o->nwatch < VG_WORKERS_MAX) {
        o->watch[o->nwatch++] = fd;
        rc = 0;
    }
    pthread_mutex_unlock(&o->lock);
    return rc;
}

void oauth_unwatch(struct oauth *o, int fd)
{
    pthread_mutex_lock(&o->lock);
    for (size_t i = 0; i < o->nwatch; i++) {
        if (o->watch[i] == fd) {
            o->watch[i] = o->watch[--o->nwatch];
            break;
        }
    }
    pthread_mutex_unlock(&o->lock);
}

/* ---- sources ---------------------------------------------------------------------------- */

const char *oauth_src_name(const struct oauth_src *s)
{
    return s->name;
}

static void src_free(struct oauth_src *s)
{
    oauth_fetch_cancel(&s->f);
    if (s->timer != NULL)
        event_free(s->timer);
    oauth_tok_unref(&s->tok);
    secmem_free(&s->client_secret, s->cs_len + 1);
    secmem_free(&s->rt_vault, s->rt_vault_len + 1);
    secmem_free(&s->rt, s->rt_len + 1);
    free(s->name);
    free(s->token_url);
    free(s->host);
    free(s->target);
    free(s->client_id);
    free(s->scope);
    free(s->audience);
    free(s);
}

static bool str_same(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static bool bytes_same(const char *a, size_t alen, const char *b, size_t blen)
{
    return (a == NULL && b == NULL) ||
           (a != NULL && b != NULL && alen == blen && secmem_equal(a, b, alen));
}

/* The same configuration as the vault's source i: a reload that changed nothing keeps it. */
static bool src_matches(const struct oauth_src *s, const struct policy_oauth *pi)
{
    return !s->dead && strcmp(s->name, pi->secret_name) == 0 &&
           strcmp(s->token_url, pi->token_url) == 0 && s->refresh_grant == pi->refresh_grant &&
           s->auth_post == pi->auth_post && strcmp(s->client_id, pi->client_id) == 0 &&
           str_same(s->scope, pi->scope) && str_same(s->audience, pi->audience) &&
           bytes_same(s->client_secret, s->cs_len, pi->client_secret, pi->client_secret_len) &&
           bytes_same(s->rt_vault, s->rt_vault_len, pi->refresh_token, pi->refresh_token_len);
}

static char *dup_opt(const char *s, size_t len, bool *oom)
{
    char *d;

    if (s == NULL)
        return NULL;
    d = secmem_dup(s, len);
    *oom = *oom || d == NULL;
    return d;
}

static struct oauth_src *src_new(struct oauth *o, const struct policy_oauth *pi)
{
    struct oauth_src *s = calloc(1, sizeof(*s));
    bool oom = false;

    if (s == NULL)
        return NULL;
    s->o = o;
    s->port = pi->port;
    s->refresh_grant = pi->refresh_grant;
    s->auth_post = pi->auth_post;
    s->name = strdup(pi->secret_name);
    s->token_url = strdup(pi->token_url);
    s->host = strdup(pi->host);
    s->target = strdup(pi->target);
    s->client_id = strdup(pi->client_id);
    s->scope = pi->scope != NULL ? strdup(pi->scope) : NULL;
    s->audience = pi->audience != NULL ? strdup(pi->audience) : NULL;
    s->client_secret = dup_opt(pi->client_secret, pi->client_secret_len, &oom);
    s->cs_len = pi->client_secret_len;
    s->rt_vault = dup_opt(pi->refresh_token, pi->refresh_token_len, &oom);
    s->rt_vault_len = pi->refresh_token_len;
    s->rt = dup_opt(pi->refresh_token, pi->refresh_token_len, &oom);
    s->rt_len = pi->refresh_token_len;
    s->want = true; /* fetched at once */
    if (oom || s->name == NULL || s->token_url == NULL || s->host == NULL || s->target == NULL ||
        s->client_id == NULL || (pi->scope != NULL && s->scope == NULL) ||
        (pi->audience != NULL && s->audience == NULL)) {
        src_free(s);
        return NULL;
    }
    return s;
}

/* policy_oauth_attach's release: a snapshot that used s went. Any thread. */
static void src_release(void *slot)
{
    struct oauth_src *s = slot;
    struct oauth *o = s->o;
    bool now = false;

    pthread_mutex_lock(&o->lock);
    if (--s->refs == 0) {
        s->dead = true;
        if (o->stopped) { /* no thread to do it: unlink and free here */
            for (struct oauth_src **pp = &o->srcs; *pp != NULL; pp = &(*pp)->next) {
                if (*pp == s) {
                    *pp = s->next;
                    break;
                }
            }
            now = true;
        }
    }
    pthread_mutex_unlock(&o->lock);
    if (now)
        src_free(s);
    else
        oauth_kick(o);
}

int oauth_bind(struct oauth *o, struct policy *p, char *err, size_t errlen)
{
    size_t n = policy_oauth_count(p);

    for (size_t i = 0; i < n; i++) {
        struct policy_oauth pi;
        struct oauth_src *s;

        policy_oauth_info(p, i, &pi);
        pthread_mutex_lock(&o->lock);
        for (s = o->srcs; s != NULL && !src_matches(s, &pi); s = s->next)
            ;
        if (s == NULL && (s = src_new(o, &pi)) != NULL) {
            s->next = o->srcs;
            o->srcs = s;
        }
        if (s != NULL)
            s->refs++;
        pthread_mutex_unlock(&o->lock);
        if (s == NULL) {
            snprintf(err, errlen, "oauth2 source %s: out of memory", pi.secret_name);
            return -1; /* what was attached so far is released with p */
        }
        policy_oauth_attach(p, i, s, src_release);
    }
    if (n > 0)
        oauth_kick(o);
    return 0;
}

/* ---- the workers' side ------------------------------------------------------------------ */

enum oauth_state oauth_acquire(struct oauth_src *s, struct oauth_tok **tok)
{
    struct oauth *o = s->o;
    enum oauth_state st;
    int64_t now = oauth_now_ms();

    pthread_mutex_lock(&o->lock);
    if (s->tok != NULL && now < s->expires_ms) {
        atomic_fetch_add(&s->tok->refs, 1);
        *tok = s->tok;
        st = OAUTH_READY;
    } else if (s->failing) {
        st = OAUTH_FAILED;
    } else {
        if (!s->fetching && !s->want) {
            s->want = true;
            oauth_kick(o);
        }
        st = OAUTH_WAIT;
    }
    pthread_mutex_unlock(&o->lock);
    return st;
}

void oauth_reject(struct oauth_src *s, const struct oauth_tok *tok)
{
    struct oauth *o = s->o;
    int64_t now = oauth_now_ms();
    bool dropped = false, limited = false;

    pthread_mutex_lock(&o->lock);
    if (s->tok == tok && sechist_live(s->name, now) >= VG_SECRET_HISTORY_LIVE) {
        /* every token stays masked until exit: a sandbox that provokes 401s must not grow
         * that list without bound, so past VG_SECRET_HISTORY_LIVE valid ones the token stays */
        limited = true;
    } else if (s->tok == tok &&
               (s->rejected_ms == 0 || now - s->rejected_ms >= VG_OAUTH_REJECT_INTERVAL * 1000)) {
        oauth_tok_unref(&s->tok);
        s->rejected_ms = now;
        s->want = true;
        s->next_try_ms = 0;
        dropped = true;
        oauth_kick(o);
    }
    pthread_mutex_unlock(&o->lock);
    if (dropped) {
        struct log_fields f = LOG_FIELDS_INIT;

        f.secret = s->name;
        f.host = s->host;
        f.reason = "upstream_401";
        log_event(LOG_INFO, "oauth_token_dropped", &f);
    } else if (limited) {
        struct log_fields f = LOG_FIELDS_INIT;

        f.secret = s->name;
        f.host = s->host;
        f.reason = "token_history_full";
        log_event(LOG_WARN, "oauth_token_kept", &f);
    }
}

void oauth_warnings_json(const struct policy *p, cJSON *arr)
{
    for (size_t i = 0; i < policy_oauth_count(p); i++) {
        struct oauth_src *s = policy_oauth_slot(p, i);
        char buf[160];
        bool failing;

        if (s == NULL)
            continue;
        pthread_mutex_lock(&s->o->lock);
        failing = s->failing;
        pthread_mutex_unlock(&s->o->lock);
        if (!failing)
            continue;
        snprintf(buf, sizeof(buf), "token endpoint for %s failed", s->name);
        cJSON_AddItemToArray(arr, cJSON_CreateString(buf));
    }
}

/* ---- the manager's thread --------------------------------------------------------------- */

static void src_timer_cb(evutil_socket_t fd, short what, void *arg);

/* When s needs the thread next (o->lock held): its timer is set for it. */
static void src_schedule(struct oauth_src *s, int64_t now)
{
    int64_t at = INT64_MAX;
    struct timeval tv;

    if (s->fetching || s->dead)
        return;
    if (s->failing || s->want)
        at = s->next_try_ms;
    else if (s->tok != NULL)
        at = s->refresh_ms;
    if (at == INT64_MAX)
        return;
    if (s->timer == NULL && (s->timer = evtimer_new(s->o->base, src_timer_cb, s)) == NULL)
        return;
    at = at > now ? at - now : 0;
    tv.tv_sec = (time_t)(at / 1000);
    tv.tv_usec = (suseconds_t)(at % 1000) * 1000;
    evtimer_add(s->timer, &tv);
}

/* Starts what is due, frees what died, sets the timers (the manager's thread). */
static void oauth_scan(struct oauth *o)
{
    int64_t now = oauth_now_ms();
    struct oauth_src **pp = &o->srcs, *dead = NULL;

    pthread_mutex_lock(&o->lock);
    while (*pp != NULL) {
        struct oauth_src *s = *pp;
        bool due;

        if (s->dead) {
            *pp = s->next;
            s->next = dead;
            dead = s;
            continue;
        }
        due = !s->fetching && now >= s->next_try_ms &&
              (s->want || s->failing || (s->tok != NULL && now >= s->refresh_ms) ||
               (s->tok == NULL && !s->failing));
        if (due && oauth_fetch_start(s) == 0) {
            s->fetching = true;
            s->want = false;
        } else if (due) {
            /* could not even start (out of memory): count it as a failure */
            s->failing = true;
            s->fails++;
            s->next_try_ms = now + 1000;
        }
        src_schedule(s, now);
        pp = &s->next;
    }
    pthread_mutex_unlock(&o->lock);
    while (dead != NULL) {
        struct oauth_src *next = dead->next;

        src_free(dead);
        dead = next;
    }
}

static void src_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct oauth_src *s = arg;

    (void)fd;
    (void)what;
    oauth_scan(s->o);
}

static void cmd_cb(evutil_socket_t fd, short what, void *arg)
{
    struct oauth *o = arg;
    uint64_t v;
    ssize_t r = read(fd, &v, sizeof(v));

    (void)r;
    (void)what;
    if (atomic_load(&o->quit)) {
        event_base_loopbreak(o->base);
        return;
    }
    oauth_scan(o);
}

/* Retry delay after the n-th failure in a row: 1, 2, 4 ... VG_OAUTH_BACKOFF_MAX s, each
 * shortened by up to a tenth at random so that many gateways do not retry in step. */
static int64_t backoff_ms(unsigned n)
{
    int64_t ms = 1000;

    while (--n > 0 && ms < VG_OAUTH_BACKOFF_MAX * 1000)
        ms *= 2;
    if (ms > VG_OAUTH_BACKOFF_MAX * 1000)
        ms = VG_OAUTH_BACKOFF_MAX * 1000;
    return ms - (ms / 10) * (rand() % 100) / 100;
}

/* The lifetime a token gets, and when it is refreshed: when a tenth of it (at least 60 s, at
 * most half of it) is left. */
static void token_times(struct oauth_src *s, int64_t start_ms, int64_t expires_in)
{
    int64_t life = expires_in * 1000, margin = life / 10;

    if (margin < 60000)
        margin = 60000;
    if (margin > life / 2)
        margin = life / 2;
    s->expires_ms = start_ms + life;
    s->refresh_ms = start_ms + life - margin;
}

static void fetched_log(const struct oauth_src *s, const struct oauth_result *r)
{
    struct log_fields f = LOG_FIELDS_INIT;
    char detail[160];

    f.secret = s->name;
    f.host = s->host;
    f.route = r->reached ? (r->route_tunnel ? "tunnel" : "direct") : NULL;
    f.status = r->status;
    f.duration = r->seconds;
    if (r->ok) {
        snprintf(detail, sizeof(detail), "expires_in=%lld%s", (long long)r->expires_in,
                 r->refresh != NULL ? " refresh_token rotated" : "");
        f.detail = detail;
        log_event(LOG_INFO, "oauth_token", &f);
    } else {
        f.reason = r->reason;
        f.detail = r->detail[0] != '\0' ? r->detail : NULL;
        log_event(LOG_WARN, "oauth_token_failed", &f);
    }
}

/*
 * A new token joins its secret's history before any request can carry it, so that once it is
 * replaced (a refresh, a 401, a reload) responses are still masked for it until exit (SPEC §4).
 * 0 or -1 (out of memory: the token is not used).
 */
static int retire_first(const struct oauth_src *s, const struct oauth_result *r)
{
    int64_t expires = r->started_ms + r->expires_in * 1000;

    return sechist_retire(s->name, r->token, r->token_len, expires > 0 ? expires : 1);
}

void oauth_fetched(struct oauth_src *s, struct oauth_result *r)
{
    struct oauth *o = s->o;
    struct oauth_tok *t = NULL;
    int64_t now = oauth_now_ms();

    if (r->reached)
        audit_route(o->audit, -1, s->host,
                    r->route_tunnel ? AUDIT_ROUTE_TUNNEL : AUDIT_ROUTE_DIRECT);
    if (r->upstream_err_kind > 0)
        metrics_upstream_error(-1, (enum metrics_upstream_error)(r->upstream_err_kind - 1));
    if (r->ok && retire_first(s, r) < 0) {
        r->ok = false;
        r->reason = "out_of_memory";
    }
    fetched_log(s, r);
    if (r->ok && (t = calloc(1, sizeof(*t))) != NULL) {
        atomic_init(&t->refs, 1);
        t->value = r->token;
        t->len = r->token_len;
        r->token = NULL;
    }
    pthread_mutex_lock(&o->lock);
    s->fetching = false;
    if (t != NULL) {
        oauth_tok_unref(&s->tok);
        s->tok = t;
        token_times(s, r->started_ms, r->expires_in);
        if (r->refresh != NULL) {
            secmem_free(&s->rt, s->rt_len + 1);
            s->rt = r->refresh;
            s->rt_len = r->refresh_len;
            r->refresh = NULL;
        }
        s->failing = false;
        s->fails = 0;
        s->next_try_ms = 0;
    } else {
        s->failing = true;
        s->fails++;
        s->next_try_ms = now + backoff_ms(s->fails);
    }
    notify_workers(o);
    src_schedule(s, now);
    pthread_mutex_unlock(&o->lock);
    secmem_free(&r->token, r->token_len + 1);
    secmem_free(&r->refresh, r->refresh_len + 1);
}

static void *oauth_main(void *arg)
{
    struct oauth *o = arg;

    event_base_dispatch(o->base);
    /* stopping: every fetch and timer belongs to this loop, so they go now */
    pthread_mutex_lock(&o->lock);
    for (struct oauth_src *s = o->srcs; s != NULL; s = s->next) {
        oauth_fetch_cancel(&s->f);
        s->fetching = false;
        if (s->timer != NULL)
            event_free(s->timer);
        s->timer = NULL;
    }
    o->stopped = true;
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

struct oauth *oauth_start(const struct upstream_config *cfg, struct audit *audit, int fetch_timeout,
                          char *err, size_t errlen)
{
    struct oauth *o = calloc(1, sizeof(*o));

    if (o == NULL) {
        snprintf(err, errlen, "oauth: out of memory");
        return NULL;
    }
    pthread_mutex_init(&o->lock, NULL);
    o->audit = audit;
    o->fetch_timeout = fetch_timeout;
    o->cmd_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (o->cmd_fd < 0 || (o->base = event_base_new()) == NULL) {
        snprintf(err, errlen, "oauth: %s", o->cmd_fd < 0 ? strerror(errno) : "event base");
        goto fail;
    }
    if ((o->up = upstream_ctx_new(o->base, cfg, err, errlen)) == NULL)
        goto fail;
    o->cmd_ev = event_new(o->base, o->cmd_fd, EV_READ | EV_PERSIST, cmd_cb, o);
    if (o->cmd_ev == NULL || event_add(o->cmd_ev, NULL) < 0) {
        snprintf(err, errlen, "oauth: out of memory");
        goto fail;
    }
    if (pthread_create(&o->thread, NULL, oauth_main, o) != 0) {
        snprintf(err, errlen, "oauth: cannot start thread");
        goto fail;
    }
    o->started = true;
    return o;
fail:
    oauth_stop(o);
    oauth_free(&o);
    return NULL;
}

void oauth_stop(struct oauth *o)
{
    if (o == NULL)
        return;
    if (o->started) {
        atomic_store(&o->quit, true);
        oauth_kick(o);
        pthread_join(o->thread, NULL);
        o->started = false;
    }
    pthread_mutex_lock(&o->lock);
    o->stopped = true;
    pthread_mutex_unlock(&o->lock);
    if (o->cmd_ev != NULL)
        event_free(o->cmd_ev);
    o->cmd_ev = NULL;
    upstream_ctx_free(&o->up);
    if (o->base != NULL) {
        event_base_loop(o->base, EVLOOP_NONBLOCK); /* let cancelled resolver queries finish */
        event_base_free(o->base);
    }
    o->base = NULL;
}

void oauth_free(struct oauth **op)
{
    struct oauth *o;

    if (op == NULL || *op == NULL)
        return;
    o = *op;
    oauth_stop(o);
    while (o->srcs != NULL) {
        struct oauth_src *s = o->srcs;

        o->srcs = s->next;
        src_free(s);
    }
    if (o->cmd_fd >= 0)
        close(o->cmd_fd);
    pthread_mutex_destroy(&o->lock);
    free(o);
    *op = NULL;
}
