/*
 * origin_spare.c - the worker's spare origins: the memory of a request's upstream (struct
 * origin_conn) with the HTTP/1.1 response parser and stage buffer it used, kept for the next
 * request of any connection of the worker, so that a keep-alive request on a pooled connection
 * gets its origin without an allocation.
 *
 * Guarantees: at most VG_WORKER_ORIGINS are kept (a stack; beyond that freed); a kept origin
 * is zeroed, its parser reset (the response head wiped) and only kept when it ended a response
 * that let the connection go on, its stage kept only empty (a wiped block was released, and
 * wiped, when it drained); the worker's end frees them all, and closes the connections of the
 * origins still draining a cancelled request's response (origin_h1.c), which it lists.
 */
#include "proxy/origin_int.h"
#include "common/caps.h"
#include "http/http1.h"
#include "proxy/worker.h"

#include <string.h>

#include <event2/buffer.h>

/* The worker's spares, made by the module's init (none without it: nothing is kept). */
struct origin_spares {
    size_t n;
    struct origin_conn *c[VG_WORKER_ORIGINS];
    struct origin_conn *draining; /* origin_h1.c's draining origins */
};

static struct origin_spares *origin_spares(struct worker *w)
{
    void **st = w != NULL ? worker_module_state(w, &origin_worker_module) : NULL;

    return st != NULL ? *st : NULL;
}

struct origin_conn *origin_spare_take(struct worker *w)
{
    struct origin_spares *sp = origin_spares(w);

    if (sp != NULL && sp->n > 0)
        return sp->c[--sp->n];
    return calloc(1, sizeof(struct origin_conn));
}

/* Frees c with what the adapters left. */
static void origin_spare_free(struct origin_conn *c)
{
    http1_parser_free(&c->parser);
    if (c->io.stage != NULL)
        evbuffer_free(c->io.stage);
    free(c);
}

void origin_spare_give(struct origin_conn *c)
{
    struct origin_spares *sp = origin_spares(c->w);
    struct http1_parser *parser = c->parser;
    struct evbuffer *stage = c->io.stage;

    if (sp == NULL || sp->n >= VG_WORKER_ORIGINS) {
        origin_spare_free(c);
        return;
    }
    if (parser != NULL && !c->parser_reusable)
        http1_parser_free(&parser);
    if (parser != NULL)
        http1_parser_reset(parser);
    if (stage != NULL && evbuffer_get_length(stage) > 0) {
        evbuffer_free(stage);
        stage = NULL;
    }
    explicit_bzero(c, sizeof(*c));
    c->parser = parser;
    c->parser_reusable = parser != NULL; /* until an HTTP/1.1 adapter uses it */
    c->io.stage = stage;
    sp->c[sp->n++] = c;
}

bool origin_drain_add(struct origin_conn *c)
{
    struct origin_spares *sp = origin_spares(c->w);

    if (sp == NULL)
        return false;
    c->drain_prev = NULL;
    c->drain_next = sp->draining;
    if (sp->draining != NULL)
        sp->draining->drain_prev = c;
    sp->draining = c;
    return true;
}

void origin_drain_remove(struct origin_conn *c)
{
    struct origin_spares *sp = origin_spares(c->w);

    if (c->drain_prev != NULL)
        c->drain_prev->drain_next = c->drain_next;
    else if (sp != NULL && sp->draining == c)
        sp->draining = c->drain_next;
    if (c->drain_next != NULL)
        c->drain_next->drain_prev = c->drain_prev;
    c->drain_prev = c->drain_next = NULL;
}

static int origin_worker_init(struct worker *w, char *err, size_t errlen)
{
    void **st = worker_module_state(w, &origin_worker_module);

    (void)err, (void)errlen;
    if (st != NULL && *st == NULL)
        *st = calloc(1, sizeof(struct origin_spares));
    return 0; /* without spares every origin is allocated and freed: slower, never wrong */
}

static void origin_worker_free(struct worker *w)
{
    void **st = worker_module_state(w, &origin_worker_module);
    struct origin_spares *sp = st != NULL ? *st : NULL;

    if (sp == NULL)
        return;
    while (sp->draining != NULL)
        origin_h1_drain_stop(sp->draining); /* takes it off the list */
    *st = NULL; /* an origin freed later (none should be) is freed, not kept */
    while (sp->n > 0)
        origin_spare_free(sp->c[--sp->n]);
    free(sp);
}

/* The loop ended: the wiped request-head blocks this thread kept go. */
static void origin_thread_end(struct worker *w)
{
    (void)w;
    http1_write_release_kept();
}

const struct worker_module origin_worker_module = {
    .name = "origin",
    .init = origin_worker_init,
    .end = origin_thread_end,
    .free = origin_worker_free,
};
