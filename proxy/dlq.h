/*
 * dlq.h - deadline queues: the timers of many connections that wait one fixed duration, behind
 * one libevent timer.
 *
 * A connection's own struct event costs 128 bytes for as long as the connection lives, idle or
 * not, and each arm is a heap operation. Connections of one worker mostly wait a handful of
 * durations (the keep-alive idle timeout, the head timeout, the record-buffer release), so a
 * struct dlq holds the waits of one duration in arming order, which is the order they fall due:
 * its one timer waits for the first only. An entry is four words embedded in its owner; arming
 * and disarming are list operations (no system call, no allocation); the queue's timer is added
 * when the queue gets its first entry and re-set, when it fires, for the next one due.
 *
 * Times are CLOCK_MONOTONIC milliseconds. A queue belongs to one event loop (one thread).
 */
#ifndef VG_DLQ_H
#define VG_DLQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct dlq;

/* One wait; zero-initialised means not armed. */
struct dlq_entry {
    struct dlq_entry *prev, *next;
    struct dlq *q; /* the queue it waits in, NULL when not armed */
    int64_t due;   /* CLOCK_MONOTONIC, ms */
};

/* Runs for each entry that fell due, after it left its queue; it may arm it again (in this queue
 * or another), disarm others, or free its owner. */
typedef void (*dlq_cb)(struct dlq_entry *e);

/* A queue of waits of ms milliseconds on base, run by cb. NULL when out of memory. */
struct dlq *dlq_new(struct event_base *base, int64_t ms, dlq_cb cb);

/* Frees the queue; entries still in it are left unarmed (their owners are not told). */
void dlq_free(struct dlq **qp);

/* The queue's duration, in ms. */
int64_t dlq_ms(const struct dlq *q);

/* Arms e to fall due the queue's duration from now (disarmed first if it waits anywhere).
 * 0, or -1 when the queue's timer could not be added (e is then not armed). */
int dlq_add(struct dlq *q, struct dlq_entry *e);

/* Disarms e if it waits (no-op otherwise). */
void dlq_del(struct dlq_entry *e);

/* Whether e waits in a queue. */
static inline bool dlq_armed(const struct dlq_entry *e)
{
    return e->q != NULL;
}

/* The number of entries waiting in q (for tests and metrics). */
size_t dlq_count(const struct dlq *q);

/* The queues of one owner's few durations, made together (a duration given twice makes one
 * queue), all run by cb. NULL when out of memory (nothing is left made). */
struct dlq_set;

struct dlq_set *dlq_set_new(struct event_base *base, const int64_t *ms, size_t n, dlq_cb cb);

/* The set's queue of ms (as given to dlq_set_new), or NULL when it has none. */
struct dlq *dlq_set_get(const struct dlq_set *s, int64_t ms);

/* Frees the set and its queues (dlq_free: entries left unarmed). */
void dlq_set_free(struct dlq_set **sp);

#endif
