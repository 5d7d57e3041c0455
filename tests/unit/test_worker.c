/*
 * test_worker.c - the worker's connection list, drain and abort (proxy/worker.c), with fake
 * connections on a worker built by hand around an event base (no thread).
 */
#include <check.h>
#include <string.h>

#include <event2/event.h>

#include "proxy/metrics.h"
#include "proxy/worker.h"

struct fake_conn {
    struct worker_link link; /* first */
    struct worker *w;
    bool busy; /* a request in flight: a drain lets it finish */
    int drains, aborts;
    bool gone;
};

static void fc_close(struct fake_conn *c)
{
    if (!c->gone) {
        c->gone = true;
        worker_detach(c->w, &c->link);
    }
}

static void fc_drain(struct worker_link *l)
{
    struct fake_conn *c = (struct fake_conn *)l;

    c->drains++;
    if (!c->busy)
        fc_close(c);
}

static void fc_abort(struct worker_link *l)
{
    struct fake_conn *c = (struct fake_conn *)l;

    c->aborts++;
    fc_close(c);
}

static const struct worker_link_ops fc_ops = {fc_drain, fc_abort};

static struct worker_shared sh;
static struct worker w;

static void setup(void)
{
    memset(&sh, 0, sizeof(sh));
    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(metrics_init(1), 0);
    w.base = event_base_new();
    w.sh = &sh;
}

static void teardown(void)
{
    event_base_free(w.base);
    metrics_shutdown();
}

/* Attach gives distinct ids and counts; drain closes the idle ones at once, lets the busy ones
 * finish, and ends the loop when the last one leaves. */
START_TEST(test_drain)
{
    struct fake_conn c[4] = {0};
    uint64_t ids[4];

    for (int i = 0; i < 4; i++) {
        c[i].w = &w;
        c[i].busy = i % 2 == 1;
        ids[i] = worker_attach(&w, &c[i].link, &fc_ops);
        for (int k = 0; k < i; k++)
            ck_assert(ids[k] != ids[i]);
    }
    ck_assert_uint_eq(w.nconns, 4);
    ck_assert_int_eq(atomic_load(&sh.active_conns), 4);
    worker_drain(&w);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(c[i].drains, 1);
    ck_assert_uint_eq(w.nconns, 2);
    ck_assert(!event_base_got_exit(w.base));
    worker_drain(&w); /* a second command changes nothing */
    ck_assert_int_eq(c[1].drains, 1);
    fc_close(&c[1]);
    ck_assert(!event_base_got_exit(w.base));
    fc_close(&c[3]);
    event_base_loop(w.base, EVLOOP_NONBLOCK);
    ck_assert(event_base_got_exit(w.base));
    ck_assert_int_eq(atomic_load(&sh.active_conns), 0);
}
END_TEST

/* Abort closes everything at once; replace keeps a connection's place without counting. */
START_TEST(test_abort_and_replace)
{
    struct fake_conn c[3] = {0}, repl = {0};

    for (int i = 0; i < 3; i++) {
        c[i].w = &w;
        c[i].busy = true;
        worker_attach(&w, &c[i].link, &fc_ops);
    }
    repl.w = &w;
    repl.busy = true;
    worker_replace(&w, &c[1].link, &repl.link, &fc_ops);
    c[1].gone = true;
    ck_assert_uint_eq(w.nconns, 3);
    ck_assert_int_eq(atomic_load(&sh.active_conns), 3);
    worker_abort(&w);
    ck_assert_int_eq(c[0].aborts + c[2].aborts + repl.aborts, 3);
    ck_assert_int_eq(c[1].aborts, 0);
    ck_assert_uint_eq(w.nconns, 0);
    ck_assert_ptr_null(w.conns);
    event_base_loop(w.base, EVLOOP_NONBLOCK);
    ck_assert(event_base_got_exit(w.base));
}
END_TEST

Suite *suite_worker(void);

Suite *suite_worker(void)
{
    Suite *s = suite_create("worker");
    TCase *tc = tcase_create("connections");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_drain);
    tcase_add_test(tc, test_abort_and_replace);
    suite_add_tcase(s, tc);
    return s;
}
