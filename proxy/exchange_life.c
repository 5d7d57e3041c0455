/*
 * exchange_life.c - what every part of an exchange calls (exchange.c, exchange_cred.c and
 * exchange_resp.c call down to it; it calls none of them): the request's and the response's
 * states and their setters, the callback bracket and the memory's end, the one timer, the log
 * lines and refusal records, the exchange's own answers and its last report to the transport,
 * and the worker's cache of maskers.
 *
 * Guarantees: every request ends in exactly one report to the transport (ops->finished); a state
 * changes only through its setter, which logs the new state's name at debug, never a path or a
 * secret; the memory goes only when no callback of the exchange is on the stack.
 */
#include "proxy/exchange_int.h"
#include "audit/audit.h"
#include "mask/mask.h"
#include "policy/policy.h"
#include "proxy/reason.h"
#include "proxy/worker.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

/* ---- small helpers ---------------------------------------------------------------------- */

double exch_elapsed(const struct timespec *t0)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) + (double)(now.tv_nsec - t0->tv_nsec) / 1e9;
}

static const char *decision_name(enum metrics_decision d)
{
    static const char *const names[] = {"inject", "allow", "block", "error"};

    return d < METRICS_D_COUNT ? names[d] : "error";
}

static void exch_fields(const struct exchange *x, struct log_fields *f)
{
    const struct exch_conn *cc = x->cc;

    f->conn = cc->id;
    f->client = cc->client_addr;
    f->listener = cc->la->label;
    f->host = x->host[0] != '\0' ? x->host : NULL;
}

void exch_log(const struct exchange *x, enum log_level lvl, const char *event, const char *reason,
              const char *detail)
{
    struct log_fields f = LOG_FIELDS_INIT;

    if (!log_enabled(lvl) || x->cc == NULL)
        return;
    exch_fields(x, &f);
    f.reason = reason;
    f.detail = detail;
    log_event(lvl, event, &f);
}

void exch_log_request(struct exchange *x, const char *route, const char *reason)
{
    struct log_fields f = LOG_FIELDS_INIT;
    struct policy_rule_info ri;

    if (!log_enabled(LOG_INFO) || x->cc == NULL)
        return;
    exch_fields(x, &f);
    f.route = route;
    f.proto = x->cc->proto;
    f.decision = decision_name(x->mdec);
    if (x->rule >= 0 && x->policy != NULL) {
        policy_rule_info(x->policy, (size_t)x->rule, &ri);
        f.rule = x->rule;
        f.secret = ri.secret_name;
    }
    f.status = x->status;
    f.bytes_in = x->bytes_in;
    f.bytes_out = x->bytes_out;
    f.duration = exch_elapsed(&x->t_start);
    f.reason = reason;
    log_event(LOG_INFO, "request", &f);
}

static const char *const req_names[] = {"head", "token", "sign", "connect",
                                        "body", "sent",  "ended"};
static const char *const resp_names[] = {"none", "body", "switching", "drain", "done", "switched"};

void exch_set_req(struct exchange *x, enum exch_req s)
{
    if (x->req_state == s)
        return;
    x->req_state = s;
    exch_log(x, LOG_DEBUG, "request_state", req_names[s], NULL);
}

void exch_set_resp(struct exchange *x, enum exch_resp s)
{
    if (x->resp_state == s)
        return;
    x->resp_state = s;
    exch_log(x, LOG_DEBUG, "response_state", resp_names[s], NULL);
}

void exch_enter(struct exchange *x)
{
    defer_enter(&x->defer);
}

void exch_leave(struct exchange *x)
{
    if (defer_leave(&x->defer))
        exch_destroy(x);
}

static void timer_cb(struct dlq_entry *e)
{
    struct exchange *x = (struct exchange *)(void *)((char *)e - offsetof(struct exchange, timer));

    exch_enter(x);
    if (x->expired != NULL) {
        x->expired(x);
        exch_leave(x);
        return;
    }
    metrics_upstream_error(x->w->id, METRICS_UE_TIMEOUT);
    exch_fail(x, 504, exch_relaying(x) ? VG_PS_RESPONSE_TIMEOUT : VG_PS_CONNECTION_TIMEOUT,
              "upstream timed out", VG_R_UPSTREAM_TIMEOUT);
    exch_leave(x);
}

/*
 * The exchange's one timer is an entry in one of its worker's deadline queues (dlq.h), one per
 * duration an exchange waits: the upstream's connection, the response head, a token. They are
 * made at the worker's start (exch_timers_init) from the run's timeouts, so arming is two list
 * operations, never an allocation or a heap operation.
 */
void exch_arm(struct exchange *x, int seconds, void (*expired)(struct exchange *x))
{
    struct dlq *q = worker_dlq(x->w, &exchange_timers_module, (int64_t)seconds * 1000);

    x->expired = expired;
    /* a queue's timer is a pre-made event: adding it fails only on a broken event base; no
     * queue: the worker's end, when no timer runs again */
    if (q != NULL)
        (void)dlq_add(q, &x->timer);
}

static int exch_timers_init(struct worker *w, char *err, size_t errlen)
{
    const int64_t ms[] = {(int64_t)EXCH_T_UP_GET_W(w) * 1000,
                          (int64_t)EXCH_T_W(w, VG_T_RESPONSE_HEAD) * 1000,
                          (int64_t)EXCH_T_TOKEN_W(w) * 1000};

    return worker_dlq_init(w, &exchange_timers_module, ms, sizeof(ms) / sizeof(ms[0]), timer_cb,
                           err, errlen);
}

static void exch_timers_free(struct worker *w)
{
    worker_dlq_free(w, &exchange_timers_module);
}

const struct worker_module exchange_timers_module = {
    .name = "exchtimer", .init = exch_timers_init, .free = exch_timers_free};

void exch_record_refusal(struct exchange *x)
{
    struct worker *w = x->w;

    audit_blocked(w->sh->audit, w->id, x->host);
    audit_route(w->sh->audit, w->id, x->host, AUDIT_ROUTE_REFUSED);
    metrics_blocked(w->id);
}

/* ---- the end of an exchange ------------------------------------------------------------ */

/* Reports how the exchange ended: its last word to the transport. */
void exch_finish(struct exchange *x, enum exch_end how)
{
    if (x->req_state == EXCH_REQ_ENDED || defer_freed(&x->defer))
        return;
    exch_set_req(x, EXCH_REQ_ENDED);
    dlq_del(&x->timer);
    x->ops->finished(x->t, how);
}

/* Frees the upstream side. abort: the peer must not take what it got as a complete message. */
void exch_drop_upstream(struct exchange *x, bool abort)
{
    origin_cancel(&x->o, abort);
}

/*
 * Answers the request with a response of vaultgate's own (SPEC §4) and ends the exchange: the
 * connection closes after it. Nothing more is forwarded in either direction. When a response
 * is already on its way, cutting the connection is all that is left.
 */
void exch_fail(struct exchange *x, int status, const char *type, const char *details,
               const char *reason)
{
    if (x->req_state == EXCH_REQ_ENDED || defer_freed(&x->defer))
        return;
    exch_drop_upstream(x, true);
    if (x->resp_state != EXCH_RESP_NONE) {
        exch_log_request(x, NULL, reason);
        exch_finish(x, EXCH_END_ABORT);
        return;
    }
    x->status = status;
    exch_set_resp(x, EXCH_RESP_DONE);
    if (x->ops->error(x->t, status, type, details, x->host[0] != '\0' ? x->host : NULL) < 0) {
        exch_finish(x, EXCH_END_ABORT);
        return;
    }
    metrics_request(x->w->id, x->mdec, status, exch_elapsed(&x->t_start));
    exch_log_request(x, x->mdec == METRICS_D_BLOCK ? "refused" : NULL, reason);
    exch_finish(x, EXCH_END_CLOSE);
}

/* ---- the worker's spare exchanges --------------------------------------------------------- */

/*
 * The memory of an ended exchange, with its timer and its filter's empty scratch buffer, serves
 * the next request of any connection of the worker: at most VG_WORKER_EXCHANGES are kept (a
 * stack), zeroed (the credential's copies with them), the timer not pending. The state of the
 * module exchange_spares_module, made by its init and freed by its free hook.
 */
struct exch_spares {
    size_t n;
    struct exchange *x[VG_WORKER_EXCHANGES];
};

static struct exch_spares *exch_spares(struct worker *w)
{
    void **st = w != NULL ? worker_module_state(w, &exchange_spares_module) : NULL;

    return st != NULL ? *st : NULL;
}

struct exchange *exch_spare_take(struct worker *w)
{
    struct exch_spares *sp = exch_spares(w);

    if (sp != NULL && sp->n > 0)
        return sp->x[--sp->n];
    return calloc(1, sizeof(struct exchange));
}

static int exch_spares_init(struct worker *w, char *err, size_t errlen)
{
    void **st = worker_module_state(w, &exchange_spares_module);

    (void)err, (void)errlen;
    if (st != NULL && *st == NULL)
        *st = calloc(1, sizeof(struct exch_spares)); /* none: every exchange is allocated */
    return 0;
}

static void exch_spares_free(struct worker *w)
{
    void **st = worker_module_state(w, &exchange_spares_module);
    struct exch_spares *sp = st != NULL ? *st : NULL;

    if (sp == NULL)
        return;
    *st = NULL; /* an exchange freed later (none should be) is freed, not kept */
    while (sp->n > 0) {
        struct exchange *x = sp->x[--sp->n];

        exch_destroy(x); /* no spares any more: freed */
    }
    free(sp);
}

/* Frees the memory of x (everything the connection lent was given back by exchange_free), or
 * keeps it, zeroed, for the worker's next request. */
void exch_destroy(struct exchange *x)
{
    struct exch_spares *sp = exch_spares(x->w);
    struct evbuffer *scratch = x->rf.scratch;

    if (sp != NULL && sp->n < VG_WORKER_EXCHANGES && scratch != NULL &&
        evbuffer_get_length(scratch) == 0)
        x->rf.scratch = NULL; /* kept */
    else
        scratch = NULL;
    exch_filter_free(&x->rf);
    policy_unref(&x->policy);
    dlq_del(&x->timer);
    if (sp == NULL || sp->n >= VG_WORKER_EXCHANGES) {
        free(x);
        return;
    }
    explicit_bzero(x, sizeof(*x));
    x->rf.scratch = scratch;
    sp->x[sp->n++] = x;
}

const struct worker_module exchange_spares_module = {
    .name = "exchange-spares",
    .init = exch_spares_init,
    .free = exch_spares_free,
};

/* ---- the worker's maskers ---------------------------------------------------------------- */

/* Frees entry i (wiped), the last one taking its place. */
void exch_masks_drop(struct exch_masks *c, size_t i)
{
    mask_free(&c->e[i].m);
    c->bytes -= c->e[i].bytes;
    c->e[i] = c->e[--c->n];
}

/* The worker's maskers: this module's state (worker_module_state) is a struct exch_masks, made
 * at the first masker given back; dropped after a reload (refresh) and at the end (free). */
static void exch_masks_refresh(struct worker *w)
{
    exchange_worker_masks(w, false);
}

static void exch_masks_free(struct worker *w)
{
    exchange_worker_masks(w, true);
}

const struct worker_module exchange_masks_module = {
    .name = "exchange-masks",
    .refresh = exch_masks_refresh,
    .free = exch_masks_free,
};

/* The slot of w's masker cache, or NULL on a worker that carries no exchange. */
static struct exch_masks **masks_slot(struct worker *w)
{
    return (struct exch_masks **)worker_module_state(w, &exchange_masks_module);
}

void exchange_worker_masks(struct worker *w, bool all)
{
    struct exch_masks **slot = masks_slot(w);
    struct exch_masks *c = slot != NULL ? *slot : NULL;

    if (c == NULL)
        return;
    for (size_t i = c->n; i-- > 0;) {
        if (all || c->e[i].gen != w->policy_gen)
            exch_masks_drop(c, i);
    }
    for (size_t i = c->nsets; i-- > 0;) {
        if (all || c->sets[i].gen != w->policy_gen) {
            mask_set_free(&c->sets[i].s); /* maskers still running keep theirs */
            c->sets[i] = c->sets[--c->nsets];
        }
    }
    if (all) {
        free(c);
        *slot = NULL;
    }
}

/* The worker's set for rule of snapshot gen, made from forms when it has none (kept when there
 * is room, else the oldest kept one makes room: a set in use lives on in its maskers). NULL when
 * out of memory; the caller does not own it. */
static struct mask_set *exch_mask_set(struct exch_masks *c, int rule, uint64_t gen,
                                      const struct inject_form *forms, size_t n)
{
    struct mask_set *s;

    for (size_t i = 0; i < c->nsets; i++) {
        if (c->sets[i].rule == rule && c->sets[i].gen == gen)
            return c->sets[i].s;
    }
    if ((s = mask_set_new(forms, n)) == NULL)
        return NULL;
    if (c->nsets == VG_WORKER_MASK_SETS) {
        mask_set_free(&c->sets[0].s);
        c->sets[0] = c->sets[--c->nsets];
    }
    c->sets[c->nsets].s = s;
    c->sets[c->nsets].rule = rule;
    c->sets[c->nsets].gen = gen;
    c->nsets++;
    return s;
}

struct mask *exch_mask_take(struct worker *w, int rule, uint64_t gen,
                            const struct inject_form *forms, size_t n)
{
    struct exch_masks **slot = masks_slot(w);
    struct exch_masks *c = slot != NULL ? *slot : NULL;
    struct mask_set *s;
    struct mask *m;

    if (slot == NULL || gen != w->policy_gen)
        return mask_new(forms, n);
    if (c == NULL && (c = *slot = calloc(1, sizeof(*c))) == NULL)
        return NULL;
    for (size_t i = c->n; i-- > 0;) {
        if (c->e[i].gen != w->policy_gen) {
            exch_masks_drop(c, i);
            continue;
        }
        if (c->e[i].rule != rule || c->e[i].gen != gen)
            continue;
        m = c->e[i].m;
        c->bytes -= c->e[i].bytes;
        c->e[i] = c->e[--c->n];
        return m;
    }
    s = exch_mask_set(c, rule, gen, forms, n);
    return s != NULL ? mask_new_from(s) : NULL;
}

void exch_mask_give(struct worker *w, struct mask **mp, int rule, uint64_t gen)
{
    struct exch_masks **slot = masks_slot(w);
    struct exch_masks *c = slot != NULL ? *slot : NULL;
    size_t bytes = mask_mem(*mp);

    if (gen != w->policy_gen || slot == NULL ||
        (c == NULL && (c = *slot = calloc(1, sizeof(*c))) == NULL) || c->n == VG_WORKER_MASKS ||
        c->bytes + bytes > VG_WORKER_MASK_BYTES) {
        mask_free(mp);
        return;
    }
    c->e[c->n].m = *mp;
    c->e[c->n].rule = rule;
    c->e[c->n].gen = gen;
    c->e[c->n].bytes = bytes;
    c->bytes += bytes;
    c->n++;
    *mp = NULL;
}
