/*
 * test_wipe.c - a serialised request head that carries a secret never sits in memory that is
 * freed unwiped (SPEC §8): http1_write_request_head_wiped() keeps it in a block of its own,
 * held by reference, so no libevent chain ever holds the secret.
 *
 * libevent's allocator is replaced (event_set_mem_functions) by one that scans every block it
 * frees for the canary secret. The control case writes the same head with the plain
 * http1_write_request_head() and must see the canary in a freed chain: the check can fail.
 * Replacing libevent's allocator is only safe in a process that has not allocated with it yet,
 * so the cases need Check's fork mode (the default) and pass without checking under CK_FORK=no.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "common/asan.h"
#include "policy/httphead.h"
#include "http/http1.h"

#define CANARY "sk-WIPE-CANARY-0123456789abcdef"

struct blk {
    size_t size;
    size_t pad; /* keeps the payload 16-byte aligned */
};

static int freed_with_canary;

static bool has_canary(const char *p, size_t n)
{
    size_t cl = sizeof(CANARY) - 1;

    for (size_t i = 0; i + cl <= n; i++) {
        if (p[i] == CANARY[0] && memcmp(p + i, CANARY, cl) == 0)
            return true;
    }
    return false;
}

static void *scan_malloc(size_t n)
{
    struct blk *b = malloc(sizeof(*b) + n);

    if (b == NULL)
        return NULL;
    b->size = n;
    return b + 1;
}

static void scan_free(void *p)
{
    struct blk *b;

    if (p == NULL)
        return;
    b = (struct blk *)p - 1;
    if (has_canary(p, b->size))
        freed_with_canary++;
    free(b);
}

static void *scan_realloc(void *p, size_t n)
{
    void *q;

    if (p == NULL)
        return scan_malloc(n);
    q = scan_malloc(n);
    if (q == NULL)
        return NULL;
    memcpy(q, p, ((struct blk *)p - 1)->size < n ? ((struct blk *)p - 1)->size : n);
    scan_free(p);
    return q;
}

static bool forked(void)
{
    const char *f = getenv("CK_FORK");

    return f == NULL || strcmp(f, "no") != 0;
}

static void head_with_secret(struct http_head *h)
{
    httphead_init(h);
    ck_assert_int_eq(httphead_set_request_line(h, "POST", 4, "/v1/x", 5, 1), 0);
    ck_assert_int_eq(httphead_add(h, "Host", 4, "api.example.test", 16), 0);
    ck_assert_int_eq(httphead_add(h, "Authorization", 13, "Bearer " CANARY, 7 + sizeof(CANARY) - 1),
                     0);
}

/*
 * What conn.c does with an upstream's stage: the head, body bytes after it, a partial send,
 * the rest moved on to the bufferevent's output, sent and drained there, everything freed.
 */
static int run_case(bool wiped)
{
    struct http_head h;
    struct evbuffer *stage, *out;
    struct evbuffer_iovec v;
    char all[1024];
    size_t n;
    int rc;

    freed_with_canary = 0;
    event_set_mem_functions(scan_malloc, scan_realloc, scan_free);
    head_with_secret(&h);
    stage = evbuffer_new();
    out = evbuffer_new();
    ck_assert_ptr_nonnull(stage);
    ck_assert_ptr_nonnull(out);
    rc = (wiped ? http1_write_request_head_wiped : http1_write_request_head)(stage, &h,
                                                                             HTTP1_BODY_LENGTH, 4);
    ck_assert_int_eq(rc, 0);
    evbuffer_add(stage, "body", 4);
    n = evbuffer_copyout(stage, all, sizeof(all) - 1);
    all[n] = '\0';
    ck_assert_msg(has_canary(all, n), "the serialised head carries the secret");
    ck_assert_ptr_nonnull(strstr(all, "POST /v1/x HTTP/1.1\r\nHost: api.example.test\r\n"));
    ck_assert_ptr_nonnull(strstr(all, "Content-Length: 4\r\n\r\nbody"));
    /* send 10 bytes from the first chain, as conn_push() does, then move the rest on */
    ck_assert_int_ge(evbuffer_peek(stage, -1, NULL, &v, 1), 1);
    evbuffer_drain(stage, 10);
    evbuffer_add_buffer(out, stage);
    while (evbuffer_get_length(out) > 0) {
        ck_assert_int_ge(evbuffer_peek(out, -1, NULL, &v, 1), 1);
        evbuffer_drain(out, v.iov_len > 7 ? 7 : v.iov_len);
    }
    evbuffer_free(stage);
    evbuffer_free(out);
    httphead_reset(&h);
    return freed_with_canary;
}

START_TEST(test_wiped_head_never_in_a_chain)
{
    if (!forked())
        return;
    ck_assert_int_eq(run_case(true), 0);
}
END_TEST

START_TEST(test_plain_head_is_seen)
{
    if (!forked())
        return;
    /* control: the plain writer copies the head into a chain that is freed as it is */
    ck_assert_int_gt(run_case(false), 0);
}
END_TEST

START_TEST(test_wiped_head_refused_for_eof_body)
{
    struct http_head h;
    struct evbuffer *b = evbuffer_new();

    httphead_init(&h);
    ck_assert_int_eq(httphead_set_request_line(&h, "GET", 3, "/", 1, 1), 0);
    ck_assert_int_eq(
        httphead_add(&h, "Authorization", 13, "Bearer " CANARY, 7 + sizeof(CANARY) - 1), 0);
    ck_assert_int_eq(http1_write_request_head_wiped(b, &h, HTTP1_BODY_EOF, 0), -1);
    ck_assert_uint_eq(evbuffer_get_length(b), 0);
    httphead_reset(&h);
    evbuffer_free(b);
}
END_TEST

/* A head's block is kept for the thread's next head once wiped (every byte the head took is
 * zero, the secret gone), and given back on release. */
START_TEST(test_wiped_head_block_kept)
{
    struct http_head h;
    struct evbuffer *b = evbuffer_new();
    size_t keep = VG_ASAN ? 0 : 1; /* under ASan none is kept */
    struct evbuffer_iovec v;
    const char *block;
    size_t len;

    http1_write_release_kept();
    head_with_secret(&h);
    ck_assert_int_eq(http1_write_request_head_wiped(b, &h, HTTP1_BODY_LENGTH, 4), 0);
    ck_assert_uint_eq(http1_write_kept(), 0);
    ck_assert_int_eq(evbuffer_peek(b, -1, NULL, &v, 1), 1);
    block = v.iov_base;
    len = v.iov_len;
    ck_assert(has_canary(block, len));
    evbuffer_drain(b, evbuffer_get_length(b));
    ck_assert_uint_eq(http1_write_kept(), keep);
    for (size_t i = 0; keep > 0 && i < len; i++) /* the kept block is still ours to read */
        ck_assert_msg(block[i] == 0, "byte %zu of the kept head not wiped", i);
    ck_assert_int_eq(http1_write_request_head_wiped(b, &h, HTTP1_BODY_LENGTH, 4), 0);
    ck_assert_uint_eq(http1_write_kept(), 0); /* taken again */
    evbuffer_free(b);
    ck_assert_uint_eq(http1_write_kept(), keep);
    http1_write_release_kept();
    ck_assert_uint_eq(http1_write_kept(), 0);
    httphead_reset(&h);
}
END_TEST

Suite *suite_wipe(void);

Suite *suite_wipe(void)
{
    Suite *s = suite_create("wipe");
    TCase *tc = tcase_create("head");

    tcase_add_test(tc, test_wiped_head_never_in_a_chain);
    tcase_add_test(tc, test_plain_head_is_seen);
    tcase_add_test(tc, test_wiped_head_refused_for_eof_body);
    tcase_add_test(tc, test_wiped_head_block_kept);
    suite_add_tcase(s, tc);
    return s;
}
