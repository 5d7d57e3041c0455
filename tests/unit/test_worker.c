/*
 * test_worker.c - the worker's connection list, drain and abort (proxy/worker.c), with fake
 * connections on a worker built by hand around an event base (no thread); and the module
 * registry: the order of the modules' init and free on a started worker (one thread, no
 * listener socket), their state slots, a listener no module accepts.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "proxy/metrics.h"
#include "proxy/upstream.h"
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

/* ---- the module registry ---------------------------------------------------------------- */

static char calls[256]; /* "<hook><module>" per call, in order: "ia" = init of module a */
static int fail_init;   /* the module whose init fails (its letter), or 0 */

static void note(char hook, char mod)
{
    size_t n = strlen(calls);

    if (n + 2 < sizeof(calls)) {
        calls[n] = hook;
        calls[n + 1] = mod;
        calls[n + 2] = '\0';
    }
}

static const struct worker_module mod_a, mod_b, mod_c;

#define FAKE_HOOKS(x)                                                                              \
    static int init_##x(struct worker *wk, char *err, size_t errlen)                               \
    {                                                                                              \
        void **st = worker_module_state(wk, &mod_##x);                                             \
                                                                                                   \
        note('i', #x[0]);                                                                          \
        ck_assert_ptr_nonnull(st);                                                                 \
        ck_assert_ptr_null(*st);                                                                   \
        *st = (void *)&mod_##x; /* what the module keeps: its own address */                       \
        if (fail_init == #x[0]) {                                                                  \
            snprintf(err, errlen, "%s failed", #x);                                                \
            return -1;                                                                             \
        }                                                                                          \
        return 0;                                                                                  \
    }                                                                                              \
    static void free_##x(struct worker *wk)                                                        \
    {                                                                                              \
        void **st = worker_module_state(wk, &mod_##x);                                             \
                                                                                                   \
        note('f', #x[0]);                                                                          \
        ck_assert(*st == NULL || *st == (void *)&mod_##x);                                         \
        *st = NULL;                                                                                \
    }

FAKE_HOOKS(a)
FAKE_HOOKS(b)
FAKE_HOOKS(c)

static void stop_b(struct worker *wk)
{
    note('s', 'b');
}

static pthread_t main_thread;

/* c's end: on the worker's own thread, after its loop */
static void end_c(struct worker *wk)
{
    (void)wk;
    note('e', 'c');
    ck_assert(!pthread_equal(pthread_self(), main_thread));
}

static const struct worker_module mod_a = {.name = "a", .init = init_a, .free = free_a};
static const struct worker_module mod_b = {
    .name = "b", .init = init_b, .stop = stop_b, .free = free_b};
static const struct worker_module mod_c = {
    .name = "c", .init = init_c, .end = end_c, .free = free_c};

static struct upstream_config mod_cfg;
static const char *const mod_dns[] = {"127.0.0.1"};

static void mod_setup(void)
{
    memset(&sh, 0, sizeof(sh));
    calls[0] = '\0';
    fail_init = 0;
    main_thread = pthread_self();
    ck_assert_int_eq(metrics_init(1), 0);
    mod_cfg.dns_servers = mod_dns; /* loopback only: nothing is resolved anyway */
    mod_cfg.ndns = 1;
    pthread_mutex_init(&sh.policy_lock, NULL);
    sh.nworkers = 1;
    sh.max_conns = 10;
    sh.upcfg = &mod_cfg;
}

static void mod_teardown(void)
{
    pthread_mutex_destroy(&sh.policy_lock);
    metrics_shutdown();
}

/* init in the order of registration, free in the reverse one; a module registered twice
 * counts once; each module has its own slot, and none has one it was not registered for. */
START_TEST(test_module_order)
{
    char err[256] = "";
    struct worker *ws;

    ck_assert_int_eq(worker_module_add(&sh, &mod_b), 0);
    ck_assert_int_eq(worker_module_add(&sh, &mod_a), 0);
    ck_assert_int_eq(worker_module_add(&sh, &mod_b), 0);
    ck_assert_int_eq(worker_module_add(&sh, &mod_c), 0);
    ck_assert_uint_eq(sh.nmodules, 3);
    ws = worker_start_all(&sh, err, sizeof(err));
    ck_assert_msg(ws != NULL, "%s", err);
    ck_assert_str_eq(calls, "ibiaic");
    ck_assert_ptr_eq(*worker_module_state(&ws[0], &mod_a), &mod_a);
    ck_assert_ptr_eq(*worker_module_state(&ws[0], &mod_b), &mod_b);
    ck_assert_ptr_ne(worker_module_state(&ws[0], &mod_a), worker_module_state(&ws[0], &mod_b));
    calls[0] = '\0';
    worker_stop_all(&ws, sh.nworkers, 5);
    ck_assert_ptr_null(ws);
    /* the drain stops the listeners (b's stop), the loop ends (c's end, on the worker's
     * thread), the end stops them again, then frees */
    ck_assert_str_eq(calls, "sbecsbfcfafb");
}
END_TEST

/* Each module's state is its own slot, asked in any order and again; a module not registered
 * has none. */
START_TEST(test_module_state_lookups)
{
    static const struct worker_module mods[WORKER_MODULES_MAX];
    static struct worker wk;
    static struct worker_shared shx;
    static const size_t order[] = {3, 0, 15, 7, 8, 1, 9, 3, 14, 2, 0, 4, 12, 5, 11, 6, 10, 13};

    wk.sh = &shx;
    for (size_t i = 0; i + 1 < WORKER_MODULES_MAX; i++)
        ck_assert_int_eq(worker_module_add(&shx, &mods[i]), 0);
    for (int round = 0; round < 3; round++) {
        for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
            size_t i = order[k];

            if (i + 1 == WORKER_MODULES_MAX)
                ck_assert_ptr_null(worker_module_state(&wk, &mods[i]));
            else
                ck_assert_ptr_eq(worker_module_state(&wk, &mods[i]), &wk.mstate[i]);
        }
    }
}
END_TEST

/* A failing init fails the start with its error; every module's free still runs, in the
 * reverse order, those whose init never ran included. */
START_TEST(test_module_init_fails)
{
    char err[256] = "";

    ck_assert_int_eq(worker_module_add(&sh, &mod_a), 0);
    ck_assert_int_eq(worker_module_add(&sh, &mod_b), 0);
    ck_assert_int_eq(worker_module_add(&sh, &mod_c), 0);
    fail_init = 'b';
    ck_assert_ptr_null(worker_start_all(&sh, err, sizeof(err)));
    ck_assert_str_eq(err, "b failed");
    ck_assert_str_eq(calls, "iaibsbfcfbfa");
}
END_TEST

/* A listener whose kind no module accepts fails the start, naming it; the registry is full at
 * WORKER_MODULES_MAX. */
START_TEST(test_module_listener_unclaimed)
{
    static const struct worker_module more[WORKER_MODULES_MAX + 1];
    struct listen_addr la = {0};
    int fd = -1;
    char err[256] = "";

    la.kind = LISTEN_DNS;
    la.fds = &fd;
    snprintf(la.label, sizeof(la.label), "dns 127.0.0.1:53");
    sh.addrs = &la;
    sh.naddrs = 1;
    ck_assert_int_eq(worker_module_add(&sh, &mod_a), 0);
    ck_assert_ptr_null(worker_start_all(&sh, err, sizeof(err)));
    ck_assert_str_eq(err, "worker 0: nothing accepts on dns 127.0.0.1:53");
    ck_assert_str_eq(calls, "fa"); /* no init ran: the listeners come first */
    for (size_t i = 1; i < WORKER_MODULES_MAX; i++)
        ck_assert_int_eq(worker_module_add(&sh, &more[i]), 0);
    ck_assert_int_eq(worker_module_add(&sh, &more[0]), -1);
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
    tc = tcase_create("modules");
    tcase_add_checked_fixture(tc, mod_setup, mod_teardown);
    tcase_add_test(tc, test_module_order);
    tcase_add_test(tc, test_module_state_lookups);
    tcase_add_test(tc, test_module_init_fails);
    tcase_add_test(tc, test_module_listener_unclaimed);
    suite_add_tcase(s, tc);
    return s;
}
