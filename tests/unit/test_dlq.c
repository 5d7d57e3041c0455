/*
 * test_dlq.c - deadline queues (proxy/dlq.h) on a real event base: entries fall due after the
 * queue's duration, in arming order; a disarmed entry never runs; the queue's timer is pending
 * exactly while an entry waits; a callback may arm its entry again; arming in another queue
 * moves the entry; freeing a queue leaves its entries unarmed; a set makes one queue per
 * distinct duration.
 */
#include <check.h>

#include <stddef.h>
#include <time.h>

#include <event2/event.h>

#include "proxy/dlq.h"

struct item {
    struct dlq_entry e;
    int id;
    int rearm; /* times the callback arms it again in the same queue */
    struct dlq *q;
};

static int order[16];
static int64_t at[16];
static int nrun;
static struct event_base *cur_base;
static int stop_after;

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void item_cb(struct dlq_entry *e)
{
    struct item *it = (struct item *)(void *)((char *)e - offsetof(struct item, e));

    order[nrun] = it->id;
    at[nrun++] = mono_ms();
    if (it->rearm > 0) {
        it->rearm--;
        ck_assert_int_eq(dlq_add(it->q, &it->e), 0);
    }
    if (nrun == stop_after)
        event_base_loopbreak(cur_base);
}

static struct event_base *setup(int stop)
{
    nrun = 0;
    stop_after = stop;
    cur_base = event_base_new();
    ck_assert_ptr_nonnull(cur_base);
    return cur_base;
}

static int added(struct event_base *b)
{
    return event_base_get_num_events(b, EVENT_BASE_COUNT_ADDED);
}

START_TEST(test_dlq_order_and_time)
{
    struct event_base *b = setup(3);
    struct dlq *q = dlq_new(b, 40, item_cb);
    struct item it[3] = {{.id = 1}, {.id = 2}, {.id = 3}};
    int64_t t0 = mono_ms();

    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(dlq_ms(q), 40);
    ck_assert_int_eq(added(b), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(dlq_add(q, &it[i].e), 0);
    ck_assert_uint_eq(dlq_count(q), 3);
    ck_assert_int_eq(added(b), 1); /* one timer for all three */
    ck_assert(dlq_armed(&it[1].e));
    event_base_dispatch(b);
    ck_assert_int_eq(nrun, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(order[i], i + 1);
        ck_assert_int_ge(at[i] - t0, 40 - 1);
        ck_assert(!dlq_armed(&it[i].e));
    }
    ck_assert_uint_eq(dlq_count(q), 0);
    ck_assert_int_eq(added(b), 0);
    dlq_free(&q);
    ck_assert_ptr_null(q);
    event_base_free(b);
}
END_TEST

START_TEST(test_dlq_disarm)
{
    struct event_base *b = setup(2);
    struct dlq *q = dlq_new(b, 20, item_cb);
    struct item it[3] = {{.id = 1}, {.id = 2}, {.id = 3}};

    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(dlq_add(q, &it[i].e), 0);
    dlq_del(&it[1].e);
    dlq_del(&it[1].e); /* twice: nothing */
    ck_assert(!dlq_armed(&it[1].e));
    ck_assert_uint_eq(dlq_count(q), 2);
    dlq_del(&it[0].e); /* the first: the timer stays for the next one */
    ck_assert_int_eq(added(b), 1);
    dlq_del(&it[2].e); /* the last: the timer goes */
    ck_assert_int_eq(added(b), 0);
    ck_assert_int_eq(dlq_add(q, &it[2].e), 0);
    ck_assert_int_eq(dlq_add(q, &it[0].e), 0);
    event_base_dispatch(b);
    ck_assert_int_eq(nrun, 2);
    ck_assert_int_eq(order[0], 3); /* arming order, not the items' */
    ck_assert_int_eq(order[1], 1);
    dlq_free(&q);
    event_base_free(b);
}
END_TEST

START_TEST(test_dlq_rearm_in_callback)
{
    struct event_base *b = setup(3);
    struct dlq *q = dlq_new(b, 15, item_cb);
    struct item it = {.id = 7, .rearm = 2, .q = q};
    int64_t t0 = mono_ms();

    ck_assert_int_eq(dlq_add(q, &it.e), 0);
    event_base_dispatch(b);
    ck_assert_int_eq(nrun, 3);
    ck_assert_int_ge(at[2] - t0, 3 * 15 - 3);
    ck_assert_int_eq(added(b), 0);
    dlq_free(&q);
    event_base_free(b);
}
END_TEST

START_TEST(test_dlq_move_between_queues)
{
    struct event_base *b = setup(1);
    struct dlq *slow = dlq_new(b, 60000, item_cb), *fast = dlq_new(b, 10, item_cb);
    struct item it = {.id = 4};

    ck_assert_int_eq(dlq_add(slow, &it.e), 0);
    ck_assert_int_eq(dlq_add(fast, &it.e), 0);
    ck_assert_uint_eq(dlq_count(slow), 0);
    ck_assert_uint_eq(dlq_count(fast), 1);
    ck_assert_int_eq(added(b), 1); /* slow's timer went with its last entry */
    event_base_dispatch(b);
    ck_assert_int_eq(nrun, 1);
    ck_assert_int_eq(order[0], 4);
    dlq_free(&slow);
    dlq_free(&fast);
    event_base_free(b);
}
END_TEST

START_TEST(test_dlq_free_leaves_entries_unarmed)
{
    struct event_base *b = setup(0);
    struct dlq *q = dlq_new(b, 1000, item_cb);
    struct item it[2] = {{.id = 1}, {.id = 2}};

    ck_assert_int_eq(dlq_add(q, &it[0].e), 0);
    ck_assert_int_eq(dlq_add(q, &it[1].e), 0);
    dlq_free(&q);
    ck_assert(!dlq_armed(&it[0].e));
    ck_assert(!dlq_armed(&it[1].e));
    dlq_del(&it[0].e); /* harmless after the queue went */
    ck_assert_int_eq(added(b), 0);
    ck_assert_int_eq(event_base_loop(b, EVLOOP_NONBLOCK), 1); /* nothing left to run */
    ck_assert_int_eq(nrun, 0);
    event_base_free(b);
}
END_TEST

START_TEST(test_dlq_set)
{
    struct event_base *b = setup(2);
    const int64_t ms[] = {30, 10, 30, 0, 10};
    struct dlq_set *set = dlq_set_new(b, ms, sizeof(ms) / sizeof(ms[0]), item_cb);
    struct item it[2] = {{.id = 1}, {.id = 2}};

    ck_assert_ptr_nonnull(set);
    ck_assert_ptr_nonnull(dlq_set_get(set, 30));
    ck_assert_ptr_nonnull(dlq_set_get(set, 10));
    ck_assert_ptr_nonnull(dlq_set_get(set, 1)); /* 0 is taken as 1 ms */
    ck_assert_ptr_eq(dlq_set_get(set, 0), dlq_set_get(set, 1));
    ck_assert_ptr_null(dlq_set_get(set, 20));
    ck_assert_int_eq(dlq_ms(dlq_set_get(set, 30)), 30);
    ck_assert_int_eq(dlq_add(dlq_set_get(set, 30), &it[0].e), 0);
    ck_assert_int_eq(dlq_add(dlq_set_get(set, 10), &it[1].e), 0);
    event_base_dispatch(b);
    ck_assert_int_eq(nrun, 2);
    ck_assert_int_eq(order[0], 2); /* the shorter queue's entry first */
    ck_assert_int_eq(order[1], 1);
    ck_assert_int_eq(dlq_add(dlq_set_get(set, 30), &it[0].e), 0);
    dlq_set_free(&set);
    ck_assert_ptr_null(set);
    ck_assert(!dlq_armed(&it[0].e));
    ck_assert_int_eq(added(b), 0);
    event_base_free(b);
}
END_TEST

Suite *suite_dlq(void);

Suite *suite_dlq(void)
{
    Suite *s = suite_create("dlq");
    TCase *tc = tcase_create("dlq");

    tcase_add_test(tc, test_dlq_order_and_time);
    tcase_add_test(tc, test_dlq_disarm);
    tcase_add_test(tc, test_dlq_rearm_in_callback);
    tcase_add_test(tc, test_dlq_move_between_queues);
    tcase_add_test(tc, test_dlq_free_leaves_entries_unarmed);
    tcase_add_test(tc, test_dlq_set);
    suite_add_tcase(s, tc);
    return s;
}
