/*
 * test_spares.c - the worker's spare exchanges (proxy/exchange_life.c) and spare origins
 * (proxy/origin_spare.c): what an ended one leaves for the next request of the worker, zeroed,
 * with only what may serve again, and nothing kept without the module's state. The worker is
 * built by hand (no threads, no sockets); the exchange's origin is a source that has none.
 * And libevent's buffer blocks a worker thread keeps (proxy/evmem.c).
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/crypto.h>

#include "common/asan.h"
#include "common/caps.h"
#include "http/http1.h"
#include "mask/mask.h"
#include "policy/policy.h"
#include "proxy/exchange.h"
#include "proxy/evmem.h"
#include "proxy/exchange_int.h"
#include "proxy/listen.h"
#include "proxy/metrics.h"
#include "proxy/origin.h"
#include "proxy/origin_int.h"
#include "proxy/worker.h"

static const char vault_json[] = "{\"version\":1,\"run\":{\"id\":\"run-s\",\"user\":\"u\"},"
                                 "\"secrets\":{},\"rules\":[],"
                                 "\"host_policy\":{\"default\":\"allow\"}}";

static struct event_base *base;
static struct worker_shared sh;
static struct worker w;
static struct listen_addr la = {.kind = LISTEN_HTTP, .port = 8080, .label = "http test"};

static void setup(void)
{
    char err[256];

    base = event_base_new();
    ck_assert_ptr_nonnull(base);
    ck_assert_int_eq(metrics_init(1), 0);
    pthread_mutex_init(&sh.policy_lock, NULL);
    sh.policy = policy_parse(vault_json, sizeof(vault_json) - 1, err, sizeof(err));
    ck_assert_msg(sh.policy != NULL, "%s", err);
    sh.mode = POLICY_MODE_DEFAULT;
    w.base = base;
    w.sh = &sh;
    ck_assert_int_eq(worker_module_add(&sh, &origin_worker_module), 0);
    ck_assert_int_eq(worker_module_add(&sh, &exchange_spares_module), 0);
    ck_assert_int_eq(worker_module_add(&sh, &exchange_timers_module), 0);
    ck_assert_int_eq(origin_worker_module.init(&w, err, sizeof(err)), 0);
    ck_assert_int_eq(exchange_spares_module.init(&w, err, sizeof(err)), 0);
    ck_assert_int_eq(exchange_timers_module.init(&w, err, sizeof(err)), 0);
}

static void teardown(void)
{
    exchange_spares_module.free(&w);
    exchange_timers_module.free(&w);
    origin_worker_module.free(&w);
    policy_unref(&w.policy);
    policy_unref(&sh.policy);
    event_base_free(base);
    metrics_shutdown();
    memset(&w, 0, sizeof(w));
    memset(&sh, 0, sizeof(sh));
}

/* ---- a transport that notes how the exchange ended; a source with no origin ---------------- */

static int ended_status;
static bool ended;

static int t_head(void *t, struct http_head *h, enum exch_body b, uint64_t len, bool close)
{
    return 0;
}

static int t_body(void *t, struct evbuffer *buf)
{
    return evbuffer_drain(buf, evbuffer_get_length(buf));
}

static int t_end(void *t, struct http_head *trailers)
{
    return 0;
}

static int t_error(void *t, int status, const char *type, const char *details, const char *host)
{
    ended_status = status;
    return 0;
}

static size_t t_room(void *t)
{
    return 1 << 20;
}

static void t_nothing(void *t)
{
}

static void t_finished(void *t, enum exch_end how)
{
    ended = true;
}

static const struct exchange_ops t_ops = {t_head, t_body,    t_end,     t_error,
                                          t_room, t_nothing, t_nothing, t_finished};

/* The exchanges waiting in the worker's queue of the upstream-connection timeout. */
static size_t up_get_waiting(void)
{
    struct dlq_set **timers = (struct dlq_set **)worker_module_state(&w, &exchange_timers_module);
    struct dlq *q = dlq_set_get(*timers, (int64_t)EXCH_T_UP_GET_W(&w) * 1000);

    ck_assert_ptr_nonnull(q);
    return dlq_count(q);
}

static size_t waiting_at_get; /* up_get_waiting() when the exchange asked for its origin */

static struct origin *none_get(struct worker *wk, const struct origin_want *want,
                               const struct origin_cbs *cbs, void *arg)
{
    waiting_at_get = up_get_waiting();
    return NULL; /* out of memory, as far as the exchange knows */
}

static void none_start(struct origin *o)
{
}

static const struct origin_source none_source = {none_get, none_start};

static struct http1_msg *parsed;

static int on_head(void *arg, struct http1_msg *msg)
{
    parsed = msg;
    return 1;
}

static const struct http1_callbacks req_cb = {on_head, NULL, NULL, NULL};

/* One request to open.test on connection cc, answered by the exchange itself (no origin). */
static struct exchange *one_request(struct exch_conn *cc)
{
    static const char raw[] = "GET / HTTP/1.1\r\nHost: open.test\r\n\r\n";
    struct http1_parser *p = http1_parser_new(HTTP1_REQUEST, &req_cb, NULL);
    struct exchange *x = exchange_new(cc, &t_ops, NULL, NULL), *mem = x;

    ck_assert_ptr_nonnull(x);
    ck_assert_str_eq(exchange_host(x), "");
    ck_assert(!exchange_responding(x));
    ended = false;
    ended_status = 0;
    ck_assert_int_gt(http1_feed(p, raw, sizeof(raw) - 1), 0);
    exchange_request(x, parsed);
    ck_assert(ended);
    ck_assert_int_eq(ended_status, 502);
    exchange_free(&x);
    http1_parser_free(&p);
    return mem;
}

/* ---- tests -------------------------------------------------------------------------------- */

/* The second exchange is the first's memory, zeroed; the timer armed for the upstream left its
 * deadline queue when the exchange ended. */
START_TEST(test_exchange_spare)
{
    struct exch_conn cc = {.w = &w, .la = &la, .id = 1, .default_port = 80};
    struct exchange *first, *second;

    cc.origins = &none_source;
    first = one_request(&cc);
    ck_assert_uint_eq(waiting_at_get, 1); /* armed while the origin was asked for */
    ck_assert_uint_eq(up_get_waiting(), 0);
    waiting_at_get = 0;
    second = one_request(&cc);
    ck_assert_ptr_eq(second, first);
    ck_assert_uint_eq(waiting_at_get, 1);
    ck_assert(!dlq_armed(&second->timer));
    ck_assert_uint_eq(up_get_waiting(), 0);
    exch_conn_release(&cc);
}
END_TEST

/* An origin comes back zeroed: its parser reset when it may serve again, else freed; its stage
 * kept only empty. */
START_TEST(test_origin_spare)
{
    struct origin_conn *c = origin_spare_take(&w), *again;
    struct http1_parser *parser;

    ck_assert_ptr_nonnull(c);
    c->w = &w;
    snprintf(c->host, sizeof(c->host), "up.test");
    parser = c->parser = http1_parser_new(HTTP1_RESPONSE, NULL, NULL);
    c->parser_reusable = true;
    c->io.stage = evbuffer_new();
    evbuffer_add(c->io.stage, "x", 1);
    origin_spare_give(c);
    again = origin_spare_take(&w);
    ck_assert_ptr_eq(again, c);
    ck_assert_ptr_eq(again->parser, parser);
    ck_assert(again->parser_reusable);
    ck_assert_ptr_null(again->io.stage); /* it held bytes: freed */
    ck_assert_str_eq(again->host, "");
    ck_assert_ptr_null(again->w);

    again->w = &w;
    again->parser_reusable = false; /* used, its connection not pooled */
    again->io.stage = evbuffer_new();
    origin_spare_give(again);
    c = origin_spare_take(&w);
    ck_assert_ptr_null(c->parser);
    ck_assert_ptr_nonnull(c->io.stage); /* empty: kept */
    c->w = &w;
    origin_spare_give(c); /* the module's free hook frees it */
}
END_TEST

/* Without the module's state (a worker whose init did not run) nothing is kept. */
START_TEST(test_no_state)
{
    struct origin_conn *c;

    origin_worker_module.free(&w);
    c = origin_spare_take(&w);
    ck_assert_ptr_nonnull(c);
    c->w = &w;
    c->io.stage = evbuffer_new();
    origin_spare_give(c); /* freed (ASan sees a leak otherwise) */
    c = origin_spare_take(&w);
    ck_assert_ptr_null(c->io.stage);
    c->w = &w;
    origin_spare_give(c);
}
END_TEST

/* The worker's maskers: a given one serves the next take of its rule and snapshot; at most
 * VG_WORKER_MASKS are kept, and at most VG_WORKER_MASK_BYTES of them (a long secret's maskers
 * fill that with a few); the module's free hook frees them. */
START_TEST(test_mask_cache_bounds)
{
    static const unsigned char key[] = "sk-test-0123456789abcdef";
    static unsigned char longkey[8192];
    struct inject_form small = {key, sizeof(key) - 1, 0}, big = {longkey, sizeof(longkey), 0};
    static struct mask *m[VG_WORKER_MASKS + 1];
    struct exch_masks *c;
    struct mask *again;
    size_t kept_big = 0;

    ck_assert_int_eq(worker_module_add(&sh, &exchange_masks_module), 0);
    w.policy_gen = 1;
    for (size_t i = 0; i <= VG_WORKER_MASKS; i++)
        ck_assert_ptr_nonnull(m[i] = exch_mask_take(&w, 0, 1, &small, 1));
    for (size_t i = 0; i <= VG_WORKER_MASKS; i++) {
        exch_mask_give(&w, &m[i], 0, 1);
        ck_assert_ptr_null(m[i]);
    }
    c = *worker_module_state(&w, &exchange_masks_module);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(c->n, VG_WORKER_MASKS); /* one past the count was freed */
    ck_assert_uint_le(c->bytes, VG_WORKER_MASK_BYTES);
    again = exch_mask_take(&w, 0, 1, &small, 1);
    ck_assert_ptr_nonnull(again);
    ck_assert_uint_eq(c->n, VG_WORKER_MASKS - 1); /* taken from the cache */
    exch_mask_give(&w, &again, 0, 1);
    exchange_worker_masks(&w, true); /* empty again */
    memset(longkey, 'k', sizeof(longkey));
    for (size_t i = 0; i < 64; i++)
        ck_assert_ptr_nonnull(m[i] = exch_mask_take(&w, 1, 1, &big, 1));
    ck_assert_uint_gt(mask_mem(m[0]), VG_WORKER_MASK_BYTES / 64); /* 64 would not fit */
    for (size_t i = 0; i < 64; i++)
        exch_mask_give(&w, &m[i], 1, 1);
    c = *worker_module_state(&w, &exchange_masks_module);
    ck_assert_uint_le(c->bytes, VG_WORKER_MASK_BYTES);
    for (size_t i = 0; i < c->n; i++)
        kept_big += c->e[i].rule == 1;
    ck_assert_uint_gt(kept_big, 0);
    ck_assert_uint_lt(kept_big, 64);
    exchange_masks_module.free(&w);
    ck_assert_ptr_null(*worker_module_state(&w, &exchange_masks_module));
}
END_TEST

/* A chain's block freed by a keeping thread serves the next chain of its size; past the
 * budget, and once the thread ends keeping, blocks go back to the heap. */
START_TEST(test_evmem_keeps)
{
    static struct evbuffer *m[1100];
    struct evbuffer *b;
    size_t one;
    static const char data[100];

    evmem_install();
    evmem_thread_begin();
    b = evbuffer_new();
    ck_assert_int_eq(evbuffer_add(b, data, sizeof(data)), 0); /* a 1 KiB chain */
    evbuffer_free(b);
    one = evmem_kept_bytes();
    ck_assert_uint_eq(one, VG_ASAN ? 0 : 1024);
    b = evbuffer_new();
    ck_assert_int_eq(evbuffer_add(b, data, sizeof(data)), 0); /* the kept block */
    ck_assert_uint_eq(evmem_kept_bytes(), 0);
    ck_assert_int_eq(evbuffer_expand(b, 16384), 0); /* a 32 KiB chain beside it */
    evbuffer_free(b);
    ck_assert_uint_eq(evmem_kept_bytes(), VG_ASAN ? 0 : 1024 + 32768);
    for (int i = 0; i < 40; i++) { /* 40 x 32 KiB at once: 32 are kept */
        m[i] = evbuffer_new();
        ck_assert_int_eq(evbuffer_expand(m[i], 16384), 0);
    }
    for (int i = 0; i < 40; i++)
        evbuffer_free(m[i]);
    ck_assert_uint_eq(evmem_kept_bytes(), VG_ASAN ? 0 : 1024 + 32 * 32768);
    for (int i = 0; i < 1100; i++) { /* 1100 x 1 KiB: 1 MiB of them is kept */
        m[i] = evbuffer_new();
        ck_assert_int_eq(evbuffer_add(m[i], data, sizeof(data)), 0);
    }
    for (int i = 0; i < 1100; i++)
        evbuffer_free(m[i]);
    ck_assert_uint_eq(evmem_kept_bytes(), VG_ASAN ? 0 : 1024 * 1024 + 32 * 32768);
    evmem_thread_end();
    ck_assert_uint_eq(evmem_kept_bytes(), 0);
    b = evbuffer_new();
    ck_assert_int_eq(evbuffer_add(b, data, sizeof(data)), 0);
    evbuffer_free(b);
    ck_assert_uint_eq(evmem_kept_bytes(), 0); /* no longer keeping */
}
END_TEST

/* OpenSSL's small blocks (its record writer's 40 bytes): a freed one is wiped and serves the next
 * of its usable size, never a larger request; at most 64 per size are kept; a thread that ends
 * keeping frees them. The runner installs the allocator first thing, as vaultgate's main. */
START_TEST(test_evmem_ssl_keeps)
{
    unsigned char *p, *q, *m[100];
    bool wiped = true;

    evmem_thread_begin();
    p = OPENSSL_malloc(40);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xA5, 40);
    OPENSSL_free(p);
    ck_assert_uint_eq(evmem_kept_bytes(), VG_ASAN ? 0 : 40);
    if (!VG_ASAN) {
        for (size_t i = sizeof(void *); i < 40; i++) /* the first bytes link the kept blocks */
            wiped = wiped && p[i] == 0;
        ck_assert(wiped);
    }
    q = OPENSSL_malloc(80); /* beyond the small sizes: from the heap */
    ck_assert_ptr_nonnull(q);
    ck_assert_uint_eq(evmem_kept_bytes(), VG_ASAN ? 0 : 40);
    OPENSSL_free(q);
    ck_assert_uint_eq(evmem_kept_bytes(), VG_ASAN ? 0 : 40);
    q = OPENSSL_zalloc(33); /* the kept block's size serves it, zeroed */
    ck_assert_ptr_nonnull(q);
    if (!VG_ASAN)
        ck_assert_ptr_eq(q, p);
    for (int i = 0; i < 33; i++)
        ck_assert_uint_eq(q[i], 0);
    ck_assert_uint_eq(evmem_kept_bytes(), 0);
    OPENSSL_free(q);
    for (int i = 0; i < 100; i++)
        ck_assert_ptr_nonnull(m[i] = OPENSSL_malloc(40));
    for (int i = 0; i < 100; i++)
        OPENSSL_free(m[i]);
    ck_assert_uint_eq(evmem_kept_bytes(), VG_ASAN ? 0 : 64 * 40);
    evmem_thread_end();
    ck_assert_uint_eq(evmem_kept_bytes(), 0);
    p = OPENSSL_malloc(40);
    ck_assert_ptr_nonnull(p);
    OPENSSL_free(p);
    ck_assert_uint_eq(evmem_kept_bytes(), 0); /* no longer keeping */
}
END_TEST

Suite *suite_spares(void);

Suite *suite_spares(void)
{
    Suite *s = suite_create("spares");
    TCase *tc = tcase_create("spares");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_exchange_spare);
    tcase_add_test(tc, test_origin_spare);
    tcase_add_test(tc, test_no_state);
    tcase_add_test(tc, test_mask_cache_bounds);
    suite_add_tcase(s, tc);
    tc = tcase_create("evmem");
    tcase_add_test(tc, test_evmem_keeps);
    tcase_add_test(tc, test_evmem_ssl_keeps);
    suite_add_tcase(s, tc);
    return s;
}
