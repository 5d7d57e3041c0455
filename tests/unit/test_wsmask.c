/*
 * test_wsmask.c - masking a credentialed WebSocket by message (mask/wsmask.c): secrets cut
 * across frames, control frames between fragments, a message delivered whole at its end, and
 * every protocol violation refused without passing on the offending frame.
 *
 * The secret is a canary; failure messages name offsets and lengths, never its bytes.
 */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "mask/wsmask.h"
#include "tests/unit/guard.h"

#define SECRET "sk-canary-WS-0123456789"

struct frame {
    bool fin;
    unsigned op;
    const char *payload;
};

/* Server frame bytes (no mask) with the minimal length encoding. Returns the length. */
static size_t frame_bytes(const struct frame *f, unsigned char *out)
{
    size_t n = strlen(f->payload), h = 2;

    out[0] = (unsigned char)((f->fin ? 0x80 : 0) | f->op);
    if (n < 126) {
        out[1] = (unsigned char)n;
    } else {
        out[1] = 126;
        out[2] = (unsigned char)(n >> 8);
        out[3] = (unsigned char)n;
        h = 4;
    }
    memcpy(out + h, f->payload, n);
    return h + n;
}

/* Stars every occurrence of SECRET in s (in place). */
static void star(char *s, size_t len)
{
    size_t k = strlen(SECRET);

    for (size_t i = 0; i + k <= len; i++)
        if (memcmp(s + i, SECRET, k) == 0)
            memset(s + i, '*', k);
}

/*
 * The wire bytes of frames, and what the client must get: the same frames with each data
 * message's payload masked across its frames and each control payload masked alone.
 */
static size_t build(const struct frame *fs, size_t n, unsigned char *wire, unsigned char *want)
{
    size_t pos[64], wl = 0, ml = 0, first = 0;
    char msg[4096];

    ck_assert_uint_le(n, 64);
    for (size_t i = 0; i < n; i++) {
        size_t fl = frame_bytes(&fs[i], wire + wl);

        pos[i] = wl + fl - strlen(fs[i].payload); /* where the payload starts */
        wl += fl;
    }
    memcpy(want, wire, wl);
    for (size_t i = 0; i < n; i++) {
        size_t pl = strlen(fs[i].payload);

        if (fs[i].op & 0x8) {
            star((char *)want + pos[i], pl);
            continue;
        }
        if (ml == 0)
            first = i;
        memcpy(msg + ml, fs[i].payload, pl);
        ml += pl;
        if (!fs[i].fin)
            continue;
        star(msg, ml);
        for (size_t j = first, off = 0; j <= i; j++) {
            if (fs[j].op & 0x8)
                continue;
            memcpy(want + pos[j], msg + off, strlen(fs[j].payload));
            off += strlen(fs[j].payload);
        }
        ml = 0;
    }
    return wl;
}

static struct wsmask *new_wsmask(void)
{
    struct inject_form f = {(const unsigned char *)SECRET, sizeof(SECRET) - 1, 0};
    struct wsmask *w = wsmask_new(&f, 1);

    ck_assert_ptr_nonnull(w);
    return w;
}

/* Feeds wire cut at the given offsets; checks the output equals want exactly. */
static void run(const unsigned char *wire, size_t len, const unsigned char *want,
                const size_t *cuts, size_t ncuts, const char *what)
{
    struct wsmask *w = new_wsmask();
    struct evbuffer *out = evbuffer_new();
    char *g = guard_copy(wire, len);
    size_t prev = 0;

    for (size_t k = 0; k <= ncuts; k++) {
        size_t at = k < ncuts ? cuts[k] : len;

        ck_assert_int_eq(wsmask_feed(w, g + prev, at - prev, out), 0);
        prev = at;
    }
    ck_assert_msg(evbuffer_get_length(out) == len, "%s: %zu bytes out of %zu", what,
                  evbuffer_get_length(out), len);
    for (size_t i = 0; i < len; i++)
        ck_assert_msg(evbuffer_pullup(out, -1)[i] == want[i], "%s: byte %zu differs", what, i);
    ck_assert_int_eq(wsmask_in_message(w), 0);
    guard_free(g, len);
    evbuffer_free(out);
    wsmask_free(&w);
    ck_assert_ptr_null(w);
}

/* Whole, cut once at every offset, and byte by byte. */
static void run_all_cuts(const struct frame *fs, size_t n, const char *what)
{
    unsigned char wire[4096], want[4096];
    size_t len = build(fs, n, wire, want);
    size_t *cuts = calloc(len + 1, sizeof(*cuts));

    ck_assert_ptr_nonnull(cuts);
    run(wire, len, want, NULL, 0, what);
    for (size_t a = 0; a <= len; a++)
        run(wire, len, want, &a, 1, what);
    for (size_t k = 0; k < len; k++)
        cuts[k] = k;
    run(wire, len, want, cuts, len, what);
    free(cuts);
}

/* The secret echoed in one message of 1-byte frames (3 bytes on the wire each). */
START_TEST(test_secret_in_one_byte_frames)
{
    static char bytes[64][2];
    struct frame fs[64];
    const char *msg = "Bearer " SECRET "!";
    size_t n = strlen(msg);

    for (size_t i = 0; i < n; i++) {
        bytes[i][0] = msg[i];
        bytes[i][1] = '\0';
        fs[i].fin = i + 1 == n;
        fs[i].op = i == 0 ? 0x1 : 0x0;
        fs[i].payload = bytes[i];
    }
    run_all_cuts(fs, n, "one-byte frames");
}
END_TEST

/* Control frames between fragments stay in place; a ping echoing the secret is masked. */
START_TEST(test_control_between_fragments)
{
    const struct frame fs[] = {
        {false, 0x1, "hello sk-canary"}, {true, 0x9, "ping " SECRET},
        {false, 0x0, "-WS-01234"},       {true, 0xa, ""},
        {true, 0x0, "56789 bye"},        {true, 0x2, SECRET SECRET},
        {true, 0x8, "\x03\xe8" SECRET},
    };

    run_all_cuts(fs, sizeof(fs) / sizeof(fs[0]), "control between fragments");
}
END_TEST

/* A 16-bit length and a message of several frames with the secret at a boundary. */
START_TEST(test_long_frames)
{
    static char big[200];
    struct frame fs[3] = {{false, 0x2, big}, {false, 0x0, SECRET}, {true, 0x0, "tail"}};

    memset(big, 'a', sizeof(big) - 4);
    memcpy(big + sizeof(big) - 4, "sk-", 3); /* "sk-" then the secret: only it is masked */
    run_all_cuts(fs, 3, "long frames");
}
END_TEST

/* A frame whose payload ends in a possible beginning of the secret: held until the next frame
 * of the message; the final frame delivers everything at once. */
START_TEST(test_hold_and_release)
{
    const struct frame f1 = {false, 0x1, "abc s"}, f2 = {true, 0x0, "k"};
    unsigned char b1[64], b2[64];
    size_t l1 = frame_bytes(&f1, b1), l2 = frame_bytes(&f2, b2);
    struct wsmask *w = new_wsmask();
    struct evbuffer *out = evbuffer_new();

    ck_assert_int_eq(wsmask_feed(w, (char *)b1, l1, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), l1 - 1); /* "s" could begin the secret */
    ck_assert_int_eq(wsmask_in_message(w), 1);
    ck_assert_int_eq(wsmask_feed(w, (char *)b2, l2, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), l1 + l2); /* the message ended: all of it */
    ck_assert_int_eq(memcmp(evbuffer_pullup(out, -1), b1, l1), 0);
    ck_assert_int_eq(memcmp(evbuffer_pullup(out, -1) + l1, b2, l2), 0);
    /* a final frame ending in such a prefix is not held at all */
    evbuffer_drain(out, evbuffer_get_length(out));
    ck_assert_int_eq(wsmask_feed(w, "\x81\x01s", 3, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 3);
    wsmask_free(&w);
    evbuffer_free(out);
}
END_TEST

/* Frames that break the protocol: nothing of them goes out, then wsmask_fail closes 1002. */
static const struct {
    const char *bytes;
    size_t len;
    const char *why;
} bad_frames[] = {
    {"\x81\x85"
     "abcdhello",
     11, "masked server frame"},
    {"\xc1\x02hi", 4, "RSV1 (deflate not negotiated)"},
    {"\xa1\x02hi", 4, "RSV2"},
    {"\x91\x02hi", 4, "RSV3"},
    {"\x83\x02hi", 4, "reserved data opcode"},
    {"\x8b\x00", 2, "reserved control opcode"},
    {"\x80\x02hi", 4, "continuation outside a message"},
    {"\x09\x00", 2, "fragmented ping"},
    {"\x89\x7e\x00\x7e", 4, "ping over 125 bytes"},
    {"\x81\x7e\x00\x05hello", 9, "16-bit length below 126"},
    {"\x81\x7f\x00\x00\x00\x00\x00\x00\x00\x05hello", 15, "64-bit length below 65536"},
    {"\x81\x7f\x80\x00\x00\x00\x00\x01\x00\x00", 10, "64-bit length with the top bit"},
};

START_TEST(test_protocol_errors)
{
    struct wsmask *w = new_wsmask();
    struct evbuffer *out = evbuffer_new();
    const unsigned char *o;

    ck_assert_int_eq(wsmask_feed(w, "\x81\x02ok", 4, out), 0);
    ck_assert_msg(wsmask_feed(w, bad_frames[_i].bytes, bad_frames[_i].len, out) < 0, "accepted: %s",
                  bad_frames[_i].why);
    ck_assert_msg(evbuffer_get_length(out) == 4, "%s: part of the frame went out",
                  bad_frames[_i].why);
    ck_assert_int_eq(wsmask_feed(w, "\x81\x02ok", 4, out), -1); /* stays broken */
    ck_assert_int_eq(wsmask_fail(w, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 8);
    o = evbuffer_pullup(out, -1);
    ck_assert_int_eq(memcmp(o + 4, "\x88\x02\x03\xea", 4), 0);
    wsmask_free(&w);
    evbuffer_free(out);
}
END_TEST

/* A text frame inside a fragmented message is a violation too (it would start a new one). */
START_TEST(test_new_message_inside_message)
{
    struct wsmask *w = new_wsmask();
    struct evbuffer *out = evbuffer_new();

    ck_assert_int_eq(wsmask_feed(w,
                                 "\x01\x02"
                                 "ab",
                                 4, out),
                     0);
    ck_assert_int_eq(wsmask_feed(w,
                                 "\x81\x02"
                                 "cd",
                                 4, out),
                     -1);
    ck_assert_uint_eq(evbuffer_get_length(out), 4);
    wsmask_free(&w);
    evbuffer_free(out);
}
END_TEST

/* A failure while bytes are held: the frame begun is completed with stars, never the bytes. */
START_TEST(test_fail_with_held_bytes)
{
    struct wsmask *w = new_wsmask();
    struct evbuffer *out = evbuffer_new();
    const unsigned char *o;

    /* "xx sk-canary" then a frame with the mask bit */
    ck_assert_int_eq(wsmask_feed(w, "\x01\x0cxx sk-canary", 14, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 5); /* header and "xx " */
    ck_assert_int_eq(wsmask_feed(w, "\x80\x81zzzzq", 7, out), -1);
    ck_assert_int_eq(wsmask_fail(w, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 14 + 4);
    o = evbuffer_pullup(out, -1);
    ck_assert_int_eq(memcmp(o, "\x01\x0cxx *********", 14), 0);
    ck_assert_int_eq(memcmp(o + 14, "\x88\x02\x03\xea", 4), 0);
    wsmask_free(&w);
    evbuffer_free(out);

    /* cut inside a frame's payload (the upstream went away): the rest is stars */
    w = new_wsmask();
    out = evbuffer_new();
    ck_assert_int_eq(wsmask_feed(w,
                                 "\x81\x06"
                                 "abc",
                                 5, out),
                     0);
    ck_assert_int_eq(wsmask_in_message(w), 1);
    ck_assert_int_eq(wsmask_fail(w, out), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 8 + 4);
    ck_assert_int_eq(memcmp(evbuffer_pullup(out, -1),
                            "\x81\x06"
                            "abc***",
                            8),
                     0);
    wsmask_free(&w);
    evbuffer_free(out);
}
END_TEST

/* Empty frames behind held bytes are bounded: past the cap the stream fails. */
START_TEST(test_waiting_frames_bounded)
{
    struct wsmask *w = new_wsmask();
    struct evbuffer *out = evbuffer_new();
    int rc = 0;

    ck_assert_int_eq(wsmask_feed(w, "\x01\x01s", 3, out), 0);
    for (size_t i = 0; i < 200000 && rc == 0; i++)
        rc = wsmask_feed(w, "\x00\x00", 2, out);
    ck_assert_int_eq(rc, -1);
    ck_assert_uint_eq(evbuffer_get_length(out), 2); /* the first header only */
    wsmask_free(&w);
    evbuffer_free(out);
}
END_TEST

Suite *suite_wsmask(void);

Suite *suite_wsmask(void)
{
    Suite *s = suite_create("wsmask");
    TCase *tc = tcase_create("frames");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_secret_in_one_byte_frames);
    tcase_add_test(tc, test_control_between_fragments);
    tcase_add_test(tc, test_long_frames);
    tcase_add_test(tc, test_hold_and_release);
    tcase_add_loop_test(tc, test_protocol_errors, 0, sizeof(bad_frames) / sizeof(bad_frames[0]));
    tcase_add_test(tc, test_new_message_inside_message);
    tcase_add_test(tc, test_fail_with_held_bytes);
    tcase_add_test(tc, test_waiting_frames_bounded);
    suite_add_tcase(s, tc);
    return s;
}
