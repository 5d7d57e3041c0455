/*
 * test_grpcmask.c - masking a credentialed gRPC response message by message (mask/grpcmask.c):
 * a secret inside one message is masked however the DATA is cut, prefixes pass unchanged, a
 * message that ends is out at once, and a compressed or oversized message is refused before
 * any byte of it goes out.
 *
 * The secret is a canary; failure messages name offsets and lengths, never its bytes.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "common/caps.h"
#include "mask/grpcmask.h"
#include "tests/unit/guard.h"

#define SECRET "sk-canary-GRPC-0123456789"

static struct grpcmask *new_gm(void)
{
    struct inject_form f = {(const unsigned char *)SECRET, sizeof(SECRET) - 1, 0};
    struct grpcmask *g = grpcmask_new(&f, 1);

    ck_assert_ptr_nonnull(g);
    return g;
}

/* Appends one uncompressed message. Returns the new length. */
static size_t put_msg(unsigned char *out, size_t at, const char *payload, size_t n)
{
    out[at] = 0;
    out[at + 1] = (unsigned char)(n >> 24);
    out[at + 2] = (unsigned char)(n >> 16);
    out[at + 3] = (unsigned char)(n >> 8);
    out[at + 4] = (unsigned char)n;
    memcpy(out + at + 5, payload, n);
    return at + 5 + n;
}

static void star(unsigned char *s, size_t len)
{
    size_t k = strlen(SECRET);

    for (size_t i = 0; i + k <= len; i++)
        if (memcmp(s + i, SECRET, k) == 0)
            memset(s + i, '*', k);
}

/* Three messages: the secret alone, inside text, and none; plus an empty message. */
static size_t build(unsigned char *wire, unsigned char *want)
{
    static const char m2[] = "{\"echo\":\"Bearer " SECRET "\"}";
    size_t n = 0;

    n = put_msg(wire, n, SECRET, strlen(SECRET));
    n = put_msg(wire, n, m2, strlen(m2));
    n = put_msg(wire, n, "", 0);
    n = put_msg(wire, n, "plain", 5);
    memcpy(want, wire, n);
    star(want, n);
    return n;
}

/* Whole, cut once at every offset, byte by byte: the output is exactly want. */
START_TEST(test_every_cut)
{
    unsigned char wire[256], want[256];
    size_t len = build(wire, want);

    for (size_t cut = 0; cut <= len + 1; cut++) {
        struct grpcmask *g = new_gm();
        struct evbuffer *out = evbuffer_new();
        char *gw = guard_copy(wire, len);

        if (cut <= len) {
            ck_assert_int_eq(grpcmask_feed(g, gw, cut, out), 0);
            ck_assert_int_eq(grpcmask_feed(g, gw + cut, len - cut, out), 0);
        } else {
            for (size_t i = 0; i < len; i++)
                ck_assert_int_eq(grpcmask_feed(g, gw + i, 1, out), 0);
        }
        /* every message ended: all of it is out before finish */
        ck_assert_msg(evbuffer_get_length(out) == len, "cut %zu: %zu of %zu bytes out", cut,
                      evbuffer_get_length(out), len);
        ck_assert_int_eq(grpcmask_finish(g, out), 0);
        ck_assert_uint_eq(evbuffer_get_length(out), len);
        for (size_t i = 0; i < len; i++)
            ck_assert_msg(evbuffer_pullup(out, -1)[i] == want[i], "cut %zu: byte %zu differs", cut,
                          i);
        guard_free(gw, len);
        evbuffer_free(out);
        grpcmask_free(&g);
        ck_assert_ptr_null(g);
    }
}
END_TEST

/* A message cut short: its prefix out at once, the payload held until it ends or the body does. */
START_TEST(test_held_until_message_end)
{
    unsigned char wire[64];
    struct grpcmask *g = new_gm();
    struct evbuffer *out = evbuffer_new();

    put_msg(wire, 0, SECRET, strlen(SECRET));
    /* ten bytes of the secret: the prefix goes, the start of a match is held */
    ck_assert_int_eq(grpcmask_feed(g, (const char *)wire, 5 + 10, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 5);
    ck_assert_int_eq(grpcmask_finish(g, out), 0); /* the body ended mid-message */
    ck_assert_uint_eq(evbuffer_get_length(out), 15);
    grpcmask_free(&g);
    evbuffer_free(out);
}
END_TEST

/* Compressed (flag 1) and oversized messages: -1, nothing of that message out. */
START_TEST(test_refused_messages)
{
    unsigned char wire[64];
    struct grpcmask *g = new_gm();
    struct evbuffer *out = evbuffer_new();
    size_t n = put_msg(wire, 0, "ok", 2);
    uint32_t big = VG_GRPC_MESSAGE_MAX + 1;

    wire[n] = 1; /* compressed */
    memcpy(wire + n + 1, "\0\0\0\x03", 4);
    memcpy(wire + n + 5, "abc", 3);
    ck_assert_int_eq(grpcmask_feed(g, (const char *)wire, n + 8, out), -1);
    ck_assert_uint_eq(evbuffer_get_length(out), n);      /* the first message only */
    ck_assert_int_eq(grpcmask_feed(g, "x", 1, out), -1); /* stays failed */
    grpcmask_free(&g);
    evbuffer_drain(out, evbuffer_get_length(out));

    g = new_gm();
    wire[0] = 0;
    wire[1] = (unsigned char)(big >> 24);
    wire[2] = (unsigned char)(big >> 16);
    wire[3] = (unsigned char)(big >> 8);
    wire[4] = (unsigned char)big;
    ck_assert_int_eq(grpcmask_feed(g, (const char *)wire, 5, out), -1);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    grpcmask_free(&g);
    evbuffer_free(out);
}
END_TEST

/* A prefix cut short at the end of the body goes out as it came. */
START_TEST(test_partial_prefix_at_end)
{
    struct grpcmask *g = new_gm();
    struct evbuffer *out = evbuffer_new();

    ck_assert_int_eq(grpcmask_feed(g, "\0\0\0", 3, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    ck_assert_int_eq(grpcmask_finish(g, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 3);
    grpcmask_free(&g);
    evbuffer_free(out);
}
END_TEST

Suite *suite_grpcmask(void);

Suite *suite_grpcmask(void)
{
    Suite *s = suite_create("grpcmask");
    TCase *tc = tcase_create("messages");

    tcase_add_test(tc, test_every_cut);
    tcase_add_test(tc, test_held_until_message_end);
    tcase_add_test(tc, test_refused_messages);
    tcase_add_test(tc, test_partial_prefix_at_end);
    suite_add_tcase(s, tc);
    return s;
}
