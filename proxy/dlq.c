/*
 * dlq.c - deadline queues (dlq.h): a FIFO of waits of one duration and one libevent timer.
 *
 * Guarantees: an entry falls due no earlier than the queue's duration after it was armed, less
 * DLQ_SLACK_MS (the loop's clock and this one are read at different moments; a wait that ends
 * a millisecond early costs nothing, a second wake-up for it would); entries run in the order
 * they were armed; the timer is pending exactly while the queue holds an entry (re-set from
 * the callback after a run, so entries armed during it add no timer of their own). Disarming
 * the first entry leaves the timer as it is: it wakes once for nothing and is set for the next.
 */
#include "proxy/dlq.h"

#include <stdlib.h>
#include <time.h>

#include <event2/event.h>

#define DLQ_SLACK_MS 1

struct dlq {
    struct dlq_entry *head, *tail;
    size_t n;
    int64_t ms;
    dlq_cb cb;
    bool running; /* inside the timer's callback: it sets the timer once done */
    struct event *timer;
};

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sets the timer for the head's due time (from now), or takes it off for an empty queue. */
static int dlq_set_timer(struct dlq *q, int64_t now)
{
    struct timeval tv;
    int64_t left;

    if (q->head == NULL) {
        event_del(q->timer);
        return 0;
    }
    left = q->head->due - now;
    if (left < 0)
        left = 0;
    tv.tv_sec = (time_t)(left / 1000);
    tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
    return event_add(q->timer, &tv);
}

static void unlink_entry(struct dlq *q, struct dlq_entry *e)
{
    if (e->prev != NULL)
        e->prev->next = e->next;
    else
        q->head = e->next;
    if (e->next != NULL)
        e->next->prev = e->prev;
    else
        q->tail = e->prev;
    e->prev = e->next = NULL;
    e->q = NULL;
    q->n--;
}

static void dlq_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct dlq *q = arg;
    int64_t now = now_ms();

    (void)fd;
    (void)what;
    q->running = true;
    while (q->head != NULL && q->head->due <= now + DLQ_SLACK_MS) {
        struct dlq_entry *e = q->head;

        unlink_entry(q, e);
        q->cb(e);
    }
    q->running = false;
    /* A failure leaves the rest waiting until the next arm of an empty queue; nothing else is
     * lost (the timer is a pre-made event: event_add fails only on a broken base). */
    (void)dlq_set_timer(q, now);
}

struct dlq *dlq_new(struct event_base *base, int64_t ms, dlq_cb cb)
{
    struct dlq *q = calloc(1, sizeof(*q));

    if (q == NULL)
        return NULL;
    q->ms = ms > 0 ? ms : 1;
    q->cb = cb;
    q->timer = evtimer_new(base, dlq_timer_cb, q);
    if (q->timer == NULL) {
        free(q);
        return NULL;
    }
    return q;
}

void dlq_free(struct dlq **qp)
{
    struct dlq *q = *qp;

    if (q == NULL)
        return;
    while (q->head != NULL)
        unlink_entry(q, q->head);
    event_free(q->timer);
    free(q);
    *qp = NULL;
}

int64_t dlq_ms(const struct dlq *q)
{
    return q->ms;
}

size_t dlq_count(const struct dlq *q)
{
    return q->n;
}

int dlq_add(struct dlq *q, struct dlq_entry *e)
{
    int64_t now = now_ms();

    dlq_del(e);
    e->due = now + q->ms;
    e->q = q;
    e->next = NULL;
    e->prev = q->tail;
    if (q->tail != NULL)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
    q->n++;
    if (q->n == 1 && !q->running && dlq_set_timer(q, now) != 0) {
        unlink_entry(q, e);
        return -1;
    }
    return 0;
}

void dlq_del(struct dlq_entry *e)
{
    struct dlq *q = e->q;

    if (q == NULL)
        return;
    unlink_entry(q, e);
    if (q->n == 0 && !q->running)
        event_del(q->timer);
}

/* ---- sets ------------------------------------------------------------------------------- */

struct dlq_set {
    size_t n;
    struct dlq *q[]; /* one per distinct duration */
};

struct dlq_set *dlq_set_new(struct event_base *base, const int64_t *ms, size_t n, dlq_cb cb)
{
    struct dlq_set *s = calloc(1, sizeof(*s) + n * sizeof(s->q[0]));

    for (size_t i = 0; s != NULL && i < n; i++) {
        int64_t d = ms[i] > 0 ? ms[i] : 1;

        if (dlq_set_get(s, d) != NULL)
            continue;
        if ((s->q[s->n] = dlq_new(base, d, cb)) == NULL)
            dlq_set_free(&s);
        else
            s->n++;
    }
    return s;
}

struct dlq *dlq_set_get(const struct dlq_set *s, int64_t ms)
{
    if (ms <= 0)
        ms = 1;
    for (size_t i = 0; i < s->n; i++) {
        if (s->q[i]->ms == ms)
            return s->q[i];
    }
    return NULL;
}

void dlq_set_free(struct dlq_set **sp)
{
    struct dlq_set *s = *sp;

    if (s == NULL)
        return;
    while (s->n > 0)
        dlq_free(&s->q[--s->n]);
    free(s);
    *sp = NULL;
}
