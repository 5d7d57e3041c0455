/*
 * test_h2glue.c - the nghttp2 glue of both HTTP/2 sides (proxy/h2glue.c): the session
 * allocator in both modes, a request from a wiping client session to a server session through
 * the output flush and the input feed, a flush gathered into one chain, the input budget, the
 * DATA provider's copy, and what fatal input errors mean.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <nghttp2/nghttp2.h>

#include "common/asan.h"
#include "proxy/bevio.h"
#include "proxy/h2glue.h"

#define GLUE_MAPS (!VG_ASAN) /* under ASan every block stays on the heap */

static size_t mapped(const struct h2glue_mem *m)
{
    size_t n = 0;

    for (size_t i = 0; i < H2GLUE_LAZY_BLOCKS; i++)
        n += m->lazy[i].p != NULL;
    return n;
}

/* Every allocator call in one mode: contents kept across moves, zeroed calloc, slots given
 * back, and an overflowing calloc refused. */
static void check_mem(bool wipe)
{
    struct h2glue_mem m;
    nghttp2_mem *a = &m.mem;
    unsigned char *small, *big[H2GLUE_LAZY_BLOCKS + 1], *z;

    h2glue_mem_init(&m, wipe);
    ck_assert_ptr_eq(a->mem_user_data, &m);
    small = a->malloc(100, a->mem_user_data);
    ck_assert_ptr_nonnull(small);
    memset(small, 'a', 100);
    small = a->realloc(small, 200, a->mem_user_data); /* heap to heap */
    ck_assert_ptr_nonnull(small);
    ck_assert_int_eq(small[99], 'a');
    small = a->realloc(small, 20000, a->mem_user_data); /* heap to a mapping */
    ck_assert_ptr_nonnull(small);
    ck_assert_int_eq(small[0], 'a');
    ck_assert_int_eq(small[99], 'a');
    ck_assert_uint_eq(mapped(&m), GLUE_MAPS ? 1 : 0);
    small = a->realloc(small, 50, a->mem_user_data); /* a mapping back to the heap */
    ck_assert_ptr_nonnull(small);
    ck_assert_int_eq(small[49], 'a');
    ck_assert_uint_eq(mapped(&m), 0);
    a->free(small, a->mem_user_data);
    for (size_t i = 0; i <= H2GLUE_LAZY_BLOCKS; i++) { /* one more than the slots: the heap */
        big[i] = a->malloc(16384, a->mem_user_data);
        ck_assert_ptr_nonnull(big[i]);
        big[i][16383] = 'b';
    }
    ck_assert_uint_eq(mapped(&m), GLUE_MAPS ? H2GLUE_LAZY_BLOCKS : 0);
    for (size_t i = 0; i <= H2GLUE_LAZY_BLOCKS; i++)
        a->free(big[i], a->mem_user_data);
    ck_assert_uint_eq(mapped(&m), 0);
    z = a->calloc(10, 1000, a->mem_user_data);
    ck_assert_ptr_nonnull(z);
    for (size_t i = 0; i < 10000; i++)
        ck_assert_int_eq(z[i], 0);
    a->free(z, a->mem_user_data);
    a->free(NULL, a->mem_user_data);
    ck_assert_ptr_null(a->calloc(SIZE_MAX / 2, 4, a->mem_user_data));
}

START_TEST(test_h2glue_mem)
{
    check_mem(false);
    check_mem(true);
}
END_TEST

struct seen {
    char method[16];
    char path[64];
    bool request;
    int requests;
};

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
    struct seen *s = user;
    char *to = NULL;

    if (nlen == 7 && memcmp(name, ":method", 7) == 0)
        to = s->method;
    else if (nlen == 5 && memcmp(name, ":path", 5) == 0)
        to = s->path;
    if (to != NULL && vlen < 16)
        memcpy(to, value, vlen);
    return 0;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    struct seen *s = user;

    if (f->hd.type == NGHTTP2_HEADERS && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        s->request = true;
        s->requests++;
    }
    return 0;
}

static nghttp2_nv nv(const char *n, const char *v)
{
    nghttp2_nv x = {(uint8_t *)n, (uint8_t *)v, strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE};

    return x;
}

/* A GET from a wiping client session, flushed into a stage (no socket) and fed to a server
 * session: the server sees the request; fed again with too small a budget, nothing is read. */
/* Small blocks freed are kept for the thread's next sessions, cleansed first when wiping, and
 * given back on release. */
START_TEST(test_h2glue_cache)
{
    struct h2glue_mem plain, wiped;
    unsigned char *p, *q;

    h2glue_cache_release();
    h2glue_mem_init(&plain, false);
    h2glue_mem_init(&wiped, true);
    p = wiped.mem.malloc(100, &wiped);
    ck_assert_ptr_nonnull(p);
    memset(p, 'S', 100);
    wiped.mem.free(p, &wiped);
    ck_assert_uint_eq(h2glue_cache_bytes(), GLUE_MAPS ? 128 : 0);
    q = plain.mem.malloc(120, &plain); /* the same class: the kept block */
    ck_assert_ptr_nonnull(q);
    if (GLUE_MAPS) {
        ck_assert_ptr_eq(q, p);
        for (size_t i = sizeof(void *); i < 100; i++)
            ck_assert_int_eq(q[i], 0); /* cleansed when kept (the first bytes held the link) */
    }
    ck_assert_uint_eq(h2glue_cache_bytes(), 0);
    p = plain.mem.calloc(1, 60, &plain);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < 60; i++)
        ck_assert_int_eq(p[i], 0);
    plain.mem.free(q, &plain);
    plain.mem.free(p, &plain);
    ck_assert_uint_eq(h2glue_cache_bytes(), GLUE_MAPS ? 192 : 0);
    h2glue_cache_release();
    ck_assert_uint_eq(h2glue_cache_bytes(), 0);
}
END_TEST

START_TEST(test_h2glue_session_roundtrip)
{
    static const nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    struct h2glue_setup client = {.iv = iv, .niv = 1, .http_checks = true, .conn_window = 1 << 20};
    struct h2glue_setup server = {.server = true, .header = on_header, .frame_recv = on_frame_recv};
    struct h2glue_mem cm, sm;
    nghttp2_session *c = NULL, *s = NULL;
    struct bevio io = {NULL, evbuffer_new(), false};
    struct seen seen = {{0}, {0}, false, 0};
    nghttp2_nv req[] = {nv(":method", "GET"), nv(":scheme", "https"), nv(":authority", "a.test"),
                        nv(":path", "/x")};
    size_t budget = 8;
    ssize_t n;

    h2glue_mem_init(&cm, true);
    h2glue_mem_init(&sm, false);
    ck_assert_int_eq(h2glue_session_new(&c, &client, NULL, &cm), 0);
    ck_assert_int_eq(h2glue_session_new(&s, &server, &seen, &sm), 0);
    ck_assert_int_gt(nghttp2_submit_request(c, NULL, req, 4, NULL, NULL), 0);
    ck_assert_int_eq(h2glue_send(c, &io, true), 0);
    ck_assert(io.nocopy); /* the frames sit in wiped blocks, held by reference */
    ck_assert_uint_gt(evbuffer_get_length(io.stage), 24);
    while ((n = h2glue_recv(s, io.stage, NULL)) > 0)
        ;
    ck_assert_int_eq(n, 0);
    ck_assert(seen.request);
    ck_assert_str_eq(seen.method, "GET");
    ck_assert_str_eq(seen.path, "/x");

    /* a run longer than the budget is not fed, and the input goes */
    ck_assert_int_gt(nghttp2_submit_request(c, NULL, req, 4, NULL, NULL), 0);
    ck_assert_int_eq(h2glue_send(c, &io, false), 0);
    ck_assert_int_eq(h2glue_recv(s, io.stage, &budget), H2GLUE_OVER);
    ck_assert_uint_eq(evbuffer_get_length(io.stage), 0);
    ck_assert_uint_eq(budget, 8);

    nghttp2_session_del(c);
    nghttp2_session_del(s);
    ck_assert_uint_eq(mapped(&cm) + mapped(&sm), 0); /* the sessions gave every block back */
    evbuffer_free(io.stage);
}
END_TEST

/* Without wipe, a flush to a bufferevent that has nothing queued gathers its frames into one
 * chain (copied one by one, they filled four chains of 1 to 4 KiB): eighty requests with paths
 * of 100 bytes (about 7 KiB, Huffman coded) arrive in one piece, and all are read. */
START_TEST(test_h2glue_send_gathers)
{
    static const nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0}};
    struct h2glue_setup client = {.iv = iv, .niv = 1, .http_checks = true};
    struct h2glue_setup server = {.server = true, .header = on_header, .frame_recv = on_frame_recv};
    struct event_base *base = event_base_new();
    struct bufferevent *pair[2];
    struct bevio io = {NULL, evbuffer_new(), false};
    struct h2glue_mem cm, sm;
    nghttp2_session *c = NULL, *s = NULL;
    struct seen seen = {{0}, {0}, false, 0};
    nghttp2_nv req[] = {nv(":method", "GET"), nv(":scheme", "https"), nv(":authority", "a.test"),
                        nv(":path", "/x")};
    char path[101];
    struct evbuffer *in;
    ssize_t n;

    ck_assert_ptr_nonnull(base);
    ck_assert_int_eq(bufferevent_pair_new(base, 0, pair), 0);
    bufferevent_enable(pair[1], EV_READ);
    io.bev = pair[0];
    h2glue_mem_init(&cm, false);
    h2glue_mem_init(&sm, false);
    ck_assert_int_eq(h2glue_session_new(&c, &client, NULL, &cm), 0);
    ck_assert_int_eq(h2glue_session_new(&s, &server, &seen, &sm), 0);
    memset(path, 'p', sizeof(path) - 1);
    path[0] = '/';
    path[sizeof(path) - 1] = '\0';
    for (int i = 0; i < 80; i++) {
        path[1] = (char)('a' + i % 26);
        path[2] = (char)('a' + i / 26);
        req[3] = nv(":path", path);
        ck_assert_int_gt(nghttp2_submit_request(c, NULL, req, 4, NULL, NULL), 0);
    }
    ck_assert_int_eq(h2glue_send(c, &io, false), 0);
    ck_assert_uint_eq(evbuffer_get_length(io.stage), 0);
    in = bufferevent_get_input(pair[1]);
    ck_assert_uint_gt(evbuffer_get_length(in), 80 * 64);
    ck_assert_int_eq(evbuffer_peek(in, -1, NULL, NULL, 0), 1); /* one chain, one record */
    while ((n = h2glue_recv(s, in, NULL)) > 0)
        ;
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(seen.requests, 80);

    nghttp2_session_del(c);
    nghttp2_session_del(s);
    bufferevent_free(pair[0]);
    bufferevent_free(pair[1]);
    evbuffer_free(io.stage);
    event_base_free(base);
}
END_TEST

START_TEST(test_h2glue_data)
{
    struct evbuffer *out = evbuffer_new();
    uint8_t buf[8];
    uint32_t flags = 0;
    bool deferred = false;

    ck_assert_int_eq(h2glue_data(out, false, &deferred, buf, sizeof(buf), &flags),
                     NGHTTP2_ERR_DEFERRED);
    ck_assert(deferred);
    evbuffer_add(out, "0123456789", 10);
    deferred = false;
    ck_assert_int_eq(h2glue_data(out, true, &deferred, buf, sizeof(buf), &flags), 8);
    ck_assert(!deferred);
    ck_assert_uint_eq(flags, 0); /* two bytes still wait */
    ck_assert_int_eq(memcmp(buf, "01234567", 8), 0);
    ck_assert_int_eq(h2glue_data(out, true, &deferred, buf, sizeof(buf), &flags), 2);
    ck_assert_uint_eq(flags, NGHTTP2_DATA_FLAG_EOF);
    flags = 0;
    ck_assert_int_eq(h2glue_data(out, true, &deferred, buf, sizeof(buf), &flags), 0);
    ck_assert_uint_eq(flags, NGHTTP2_DATA_FLAG_EOF); /* an empty body ends at once */
    evbuffer_free(out);
}
END_TEST

/* A payload as large as nghttp2 allows (16 KiB) is cut so that frame and header fill one TLS
 * record; the rest follows in the next frame. */
START_TEST(test_h2glue_data_record)
{
    struct evbuffer *out = evbuffer_new();
    static uint8_t buf[16384];
    uint32_t flags = 0;
    bool deferred = false;

    for (size_t i = 0; i < 20000; i++)
        evbuffer_add(out, "x", 1);
    ck_assert_int_eq(h2glue_data(out, true, &deferred, buf, sizeof(buf), &flags), H2GLUE_DATA_MAX);
    ck_assert_int_eq(H2GLUE_DATA_MAX + 9, 16384);
    ck_assert_uint_eq(flags, 0);
    ck_assert_int_eq(h2glue_data(out, true, &deferred, buf, sizeof(buf), &flags),
                     20000 - H2GLUE_DATA_MAX);
    ck_assert_uint_eq(flags, NGHTTP2_DATA_FLAG_EOF);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_h2glue_recv_error)
{
    static const struct {
        ssize_t n;
        uint32_t code;
        const char *why; /* NULL: nghttp2's own description */
    } cases[] = {
        {H2GLUE_OVER, NGHTTP2_ENHANCE_YOUR_CALM, "continuation_flood"},
        {NGHTTP2_ERR_TOO_MANY_CONTINUATIONS, NGHTTP2_ENHANCE_YOUR_CALM, "continuation_flood"},
        {NGHTTP2_ERR_FLOODED, NGHTTP2_ENHANCE_YOUR_CALM, "flood"},
        {NGHTTP2_ERR_BAD_CLIENT_MAGIC, NGHTTP2_NO_ERROR, NULL},
        {NGHTTP2_ERR_PROTO, NGHTTP2_PROTOCOL_ERROR, NULL},
        {NGHTTP2_ERR_HEADER_COMP, NGHTTP2_PROTOCOL_ERROR, NULL},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint32_t code = 99;
        const char *why = h2glue_recv_error(cases[i].n, &code);

        ck_assert_uint_eq(code, cases[i].code);
        ck_assert_str_eq(why,
                         cases[i].why != NULL ? cases[i].why : nghttp2_strerror((int)cases[i].n));
    }
}
END_TEST

Suite *suite_h2glue(void);

Suite *suite_h2glue(void)
{
    Suite *s = suite_create("h2glue");
    TCase *tc = tcase_create("h2glue");

    tcase_add_test(tc, test_h2glue_mem);
    tcase_add_test(tc, test_h2glue_cache);
    tcase_add_test(tc, test_h2glue_session_roundtrip);
    tcase_add_test(tc, test_h2glue_send_gathers);
    tcase_add_test(tc, test_h2glue_data);
    tcase_add_test(tc, test_h2glue_data_record);
    tcase_add_test(tc, test_h2glue_recv_error);
    suite_add_tcase(s, tc);
    return s;
}
